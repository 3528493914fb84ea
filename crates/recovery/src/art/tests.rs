//! Tests of [`ArtPolicy`]: the variants' decisions and how the callbacks feed
//! the adapter and the scheduler.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::{with_context, DataKind, ItemId, PacketTag, PathView, ReplicaRef};
use wire::time::{Duration, Instant};

// The callbacks with their arguments spelled out, through a context that
// publishes nowhere.
fn data_lost<P: RecoveryPolicy + ?Sized>(
    p: &mut P,
    now: Instant,
    lost: &LostData,
    path: &PathView,
    rng: &mut dyn rand::RngCore,
) -> Decision {
    with_context(now, path, rng, |cx| p.on_data_lost(cx, lost))
}

fn packet_sent<P: RecoveryPolicy + ?Sized>(
    p: &mut P,
    now: Instant,
    sent: &SentView,
) -> Option<PacketTag> {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    with_context(now, &path(), &mut rng, |cx| p.on_packet_sent(cx, sent))
}

fn packet_lost<P: RecoveryPolicy + ?Sized>(
    p: &mut P,
    now: Instant,
    fate: &PacketFate,
    path: &PathView,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    with_context(now, path, &mut rng, |cx| p.on_packet_lost(cx, fate))
}

fn packet_acked<P: RecoveryPolicy + ?Sized>(
    p: &mut P,
    now: Instant,
    fate: &PacketFate,
    path: &PathView,
) {
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    with_context(now, path, &mut rng, |cx| p.on_packet_acked(cx, fate))
}

fn path() -> PathView {
    // 100 Mbit/s, 30 ms: BDP 300 packets of 1250 bytes, 100 µs cycles.
    PathView {
        srtt: Duration::from_millis(30),
        min_rtt: Duration::from_millis(30),
        pacing_rate: 12_500_000,
        mtu: 1250,
        ..Default::default()
    }
}

fn lost(item: u64, round: u32) -> LostData {
    LostData::new(ItemId(item), round, Instant::ZERO, Instant::ZERO, 1200)
}

fn fate(pn: u64, tag: u64, replica: Option<(u64, u32)>) -> PacketFate {
    PacketFate {
        pn,
        time_sent: Instant::ZERO,
        size: 1250,
        // The helper's 0 stands for "no tag" (the transport never told the
        // policy about the packet).
        tag: (tag != 0).then_some(PacketTag(tag)),
        replica: replica.map(|(item, round)| ReplicaRef {
            item: ItemId(item),
            round,
            index: 0,
        }),
        carries_new_data: replica.is_none(),
    }
}

fn sent(pn: u64) -> SentView {
    SentView {
        pn,
        size: 1250,
        replica: None,
        carries_new_data: true,
    }
}

fn times(d: &Decision) -> (&[Instant], bool) {
    match d {
        Decision::Retransmit {
            send_at,
            opportunistic,
        } => (send_at, *opportunistic),
        Decision::Drop | Decision::Defer => panic!("ART never drops or defers"),
    }
}

/// Send `n` packets and lose them all: one burst of `n`.
fn burst(p: &mut ArtPolicy, now: Instant, first_pn: u64, n: u64) {
    let tags: Vec<u64> = (first_pn..first_pn + n)
        .map(|pn| packet_sent(p, now, &sent(pn)).map_or(0, |t| t.0))
        .collect();
    for (pn, tag) in (first_pn..).zip(tags) {
        packet_lost(p, now, &fate(pn, tag, None), &path());
    }
}

#[test]
fn art_starts_with_one_opportunistic_replica() {
    let mut p = ArtPolicy::new(ArtConfig::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let now = Instant::from_millis(100);
    let d = data_lost(&mut p, now, &lost(1, 1), &path(), &mut rng);
    assert_eq!(
        d,
        Decision::Retransmit {
            send_at: vec![now],
            opportunistic: true
        }
    );
    assert_eq!(RecoveryPolicy::name(&p), "art");
}

#[test]
fn replica_fates_drive_the_adapter_and_originals_do_not() {
    let mut p = ArtPolicy::new(ArtConfig::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(2);
    let now = Instant::from_millis(100);
    // Lost originals do not count toward p_r.
    packet_lost(&mut p, now, &fate(1, 1, None), &path());
    assert!(p.adapter().unwrap().window().is_empty());
    // A lost replica does: p_r = 1, E = 0 < 1, R_1 goes to 2.
    packet_lost(&mut p, now, &fate(2, 2, Some((1, 1))), &path());
    let d = data_lost(&mut p, now, &lost(2, 1), &path(), &mut rng);
    assert_eq!(times(&d).0.len(), 2);
    // Acked replicas bring it back down: p_r = 1/4, E = 2·0.75 = 1.5 stays.
    for pn in 3..6 {
        packet_acked(&mut p, now, &fate(pn, pn, Some((2, 1))), &path());
    }
    assert_eq!(
        times(&data_lost(&mut p, now, &lost(3, 1), &path(), &mut rng))
            .0
            .len(),
        2
    );
    assert_eq!(p.adapter().unwrap().window().len(), 4);
}

#[test]
fn scheduler_spreads_replicas_within_one_rtt() {
    let mut cfg = ArtConfig::fixed(6);
    cfg.alpha = 2.0;
    let mut p = ArtPolicy::new(cfg).unwrap();
    let now = Instant::from_millis(500);
    burst(&mut p, now, 10, 20);
    assert_eq!(p.scheduler_mut().escape_space(now, &path()), 40);
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut spread = false;
    for i in 0..100 {
        let d = data_lost(&mut p, now, &lost(i, 1), &path(), &mut rng);
        let (t, opp) = times(&d);
        assert!(opp);
        assert_eq!(t.len(), 6, "art-fix:6 sends exactly 6");
        assert_eq!(t[0], now);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        assert!(
            t.iter().all(|x| *x - now < Duration::from_micros(4000)),
            "beyond 40 cycles of 100 µs"
        );
        spread |= t[5] > now;
    }
    assert!(spread);
}

#[test]
fn norand_variants_send_everything_now() {
    let now = Instant::from_millis(500);
    let mut rng = ChaCha8Rng::seed_from_u64(4);
    let mut p = ArtPolicy::new(ArtConfig::fixed_norand(5)).unwrap();
    burst(&mut p, now, 1, 30);
    let d = data_lost(&mut p, now, &lost(1, 1), &path(), &mut rng);
    assert_eq!(
        d,
        Decision::Retransmit {
            send_at: vec![now; 5],
            opportunistic: true
        }
    );
    assert_eq!(RecoveryPolicy::name(&p), "art-norand:5");

    let mut p = ArtPolicy::new(ArtConfig::norand()).unwrap();
    burst(&mut p, now, 1, 30);
    for pn in 100..103 {
        packet_lost(&mut p, now, &fate(pn, 0, Some((1, 1))), &path());
    }
    let d = data_lost(&mut p, now, &lost(1, 1), &path(), &mut rng);
    assert_eq!(
        d,
        Decision::Retransmit {
            send_at: vec![now; 2],
            opportunistic: true
        }
    );
    assert_eq!(RecoveryPolicy::name(&p), "art-norand");
}

#[test]
fn level_never_exceeds_r_max() {
    let cfg = ArtConfig {
        r_max: 3,
        ..ArtConfig::default()
    };
    let mut p = ArtPolicy::new(cfg).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let now = Instant::from_millis(1);
    for pn in 0..10 {
        packet_lost(&mut p, now, &fate(pn, pn + 1, Some((1, 1))), &path());
    }
    let counts: Vec<usize> = (0..6)
        .map(|i| {
            times(&data_lost(&mut p, now, &lost(i, 1), &path(), &mut rng))
                .0
                .len()
        })
        .collect();
    assert_eq!(counts, [2, 3, 3, 3, 3, 3]);
    assert_eq!(
        RecoveryPolicy::name(&p),
        "art[l_queue=10,alpha=1,burst_window_rtts=8,r_max=3]"
    );
}

#[test]
fn bandit_variants_learn_from_rounds() {
    let mut p = ArtPolicy::new(ArtConfig::bandit(BanditConfig::ucb())).unwrap();
    assert_eq!(RecoveryPolicy::name(&p), "art-mab-ucb");
    let mut rng = ChaCha8Rng::seed_from_u64(6);
    let now = Instant::from_millis(1);
    // UCB tries each of the 8 arms once first.
    let levels: Vec<usize> = (0..8)
        .map(|i| {
            times(&data_lost(&mut p, now, &lost(i, 1), &path(), &mut rng))
                .0
                .len()
        })
        .collect();
    assert_eq!(levels, [1, 2, 3, 4, 5, 6, 7, 8]);
    // Item 0's round 1 gets acked: arm 1 rewarded 1/(1·1).
    packet_acked(&mut p, now, &fate(50, 50, Some((0, 1))), &path());
    let arm = p.bandit().unwrap().arms()[0];
    assert_eq!((arm.rewards, arm.mean), (1, 1.0));
    // Item 1 (level 2) enters round 2: its round 1 is penalised −η/(1·2).
    data_lost(&mut p, now, &lost(1, 2), &path(), &mut rng);
    let arm = p.bandit().unwrap().arms()[1];
    assert_eq!(arm.rewards, 1);
    assert!((arm.mean + 1.01 / 2.0).abs() < 1e-12);
    assert_eq!(
        RecoveryPolicy::name(
            &ArtPolicy::new(ArtConfig::bandit(BanditConfig::epsilon_greedy())).unwrap()
        ),
        "art-mab-eg"
    );
}

#[test]
fn validation_rejects_out_of_range_parameters() {
    let ok = ArtConfig::default();
    let bad = [
        ArtConfig { l_queue: 0, ..ok },
        ArtConfig {
            l_queue: MAX_L_QUEUE + 1,
            ..ok
        },
        ArtConfig { alpha: 0.5, ..ok },
        ArtConfig {
            alpha: f64::NAN,
            ..ok
        },
        ArtConfig {
            alpha: f64::INFINITY,
            ..ok
        },
        ArtConfig {
            burst_window_rtts: 0,
            ..ok
        },
        ArtConfig { r_max: 0, ..ok },
        ArtConfig {
            r_max: MAX_REPLICAS as u32 + 1,
            ..ok
        },
        ArtConfig {
            fixed_r: Some(0),
            ..ok
        },
        ArtConfig {
            fixed_r: Some(9),
            ..ok
        },
        ArtConfig {
            fixed_r: Some(2),
            bandit: Some(BanditConfig::ucb()),
            ..ok
        },
        ArtConfig {
            bandit: Some(BanditConfig {
                eta: -1.0,
                ..BanditConfig::ucb()
            }),
            ..ok
        },
    ];
    for cfg in bad {
        let e = ArtFactory::new(cfg)
            .err()
            .unwrap_or_else(|| panic!("accepted {cfg:?}"));
        assert!(matches!(e, SchemeError::InvalidConfig { .. }), "{e:?}");
        assert!(ArtPolicy::new(cfg).is_err());
    }
    assert!(ArtFactory::new(ArtConfig::fixed(32)).is_ok());
    assert_eq!(ArtFactory::new(ok).unwrap().build().name(), "art");
}

#[test]
fn tags_are_send_indices_so_bursts_ignore_pn_gaps() {
    let mut p = ArtPolicy::new(ArtConfig::default()).unwrap();
    let now = Instant::from_millis(10);
    // Packet numbers 1, 3, 5 (pure ACKs in between, never seen by the
    // policy) are consecutive sends: one burst of 3.
    let tags: Vec<u64> = [1, 3, 5]
        .iter()
        .map(|pn| packet_sent(&mut p, now, &sent(*pn)).map_or(0, |t| t.0))
        .collect();
    assert_eq!(tags, [1, 2, 3]);
    for (pn, tag) in [1, 3, 5].into_iter().zip(tags) {
        packet_lost(&mut p, now, &fate(pn, tag, None), &path());
    }
    assert_eq!(p.scheduler_mut().max_burst(now, &path()), 3);
}

#[test]
fn datagrams_are_given_up_without_touching_the_levels() {
    let mut p = ArtPolicy::new(ArtConfig::default()).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(8);
    let now = Instant::from_millis(1);
    packet_lost(&mut p, now, &fate(1, 1, Some((1, 1))), &path());
    let l = lost(1, 1).with_kind(DataKind::Datagram);
    assert_eq!(
        data_lost(&mut p, now, &l, &path(), &mut rng),
        Decision::Drop
    );
    assert_eq!(p.adapter().unwrap().level(1), 1);
}

#[test]
fn opportunism_can_be_switched_off_for_experiments() {
    let cfg = ArtConfig {
        opportunistic: false,
        ..ArtConfig::default()
    };
    let mut p = ArtPolicy::new(cfg).unwrap();
    assert_eq!(
        RecoveryPolicy::name(&p),
        "art[l_queue=10,alpha=1,burst_window_rtts=8,r_max=8,opportunistic=false]"
    );
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let now = Instant::from_millis(3);
    let d = data_lost(&mut p, now, &lost(1, 1), &path(), &mut rng);
    assert_eq!(
        d,
        Decision::Retransmit {
            send_at: vec![now],
            opportunistic: false
        }
    );
}

/// Issue 16: a path change seen by a policy. B_max and the escape space
/// belong to a path: after the peer moves, the burst history restarts,
/// while the redundancy levels stay.
#[test]
fn burst_statistics_restart_on_a_new_path() {
    let mut p = ArtPolicy::new(ArtConfig::default()).unwrap();
    let now = Instant::from_millis(100);
    burst(&mut p, now, 10, 20);
    assert_eq!(p.scheduler_mut().max_burst(now, &path()), 20);
    assert_eq!(p.scheduler_mut().escape_space(now, &path()), 20);
    let levels = |p: &ArtPolicy| {
        (1..=3)
            .map(|n| p.adapter().unwrap().level(n))
            .collect::<Vec<_>>()
    };
    let levels_before = levels(&p);
    let mut rng = ChaCha8Rng::seed_from_u64(0);
    with_context(now, &path(), &mut rng, |cx| p.on_path_change(cx));
    assert_eq!(p.scheduler_mut().max_burst(now, &path()), 0);
    assert_eq!(p.scheduler_mut().escape_space(now, &path()), 1);
    assert_eq!(levels(&p), levels_before);
    // New losses build the new path's history.
    burst(&mut p, now, 100, 4);
    assert_eq!(p.scheduler_mut().max_burst(now, &path()), 4);
}

#[test]
fn dqn_policies_of_one_factory_share_one_learner() {
    let factory = ArtFactory::new(ArtConfig::with_dqn(DqnAdapterConfig::default())).unwrap();
    assert_eq!(factory.name(), "art-dqn");
    let learner = factory.learner().expect("art-dqn has a learner");
    let mut a = factory.build();
    let mut b = factory.build();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let now = Instant::from_millis(1);
    // Each connection loses an item and gets a replica of round 1 acked:
    // two experiences in the one learner.
    for (p, item) in [(&mut a, 1), (&mut b, 2)] {
        let d = data_lost(&mut **p, now, &lost(item, 1), &path(), &mut rng);
        let (send_at, opportunistic) = times(&d);
        assert!((1..=8).contains(&send_at.len()) && opportunistic);
        packet_acked(
            &mut **p,
            now,
            &fate(90 + item, 90 + item, Some((item, 1))),
            &path(),
        );
    }
    assert_eq!(learner.lock().unwrap().experiences, 2);
    let mut state = PolicyState::default();
    a.report_state(&mut state);
    let field = |n: &str| state.fields().iter().find(|(k, _)| *k == n).map(|f| f.1);
    assert!(field("level").is_some_and(|l| (1.0..=8.0).contains(&l)));
    assert_eq!(field("epsilon"), Some(0.1));
    assert_eq!(field("experiences"), Some(2.0));
    // Another factory has a learner of its own.
    let other = ArtFactory::new(ArtConfig::with_dqn(DqnAdapterConfig::default())).unwrap();
    assert_eq!(other.learner().unwrap().lock().unwrap().experiences, 0);
    // The DQN excludes the other adapters.
    let both = ArtConfig {
        bandit: Some(BanditConfig::ucb()),
        ..ArtConfig::with_dqn(DqnAdapterConfig::default())
    };
    assert!(ArtPolicy::new(both).is_err());
    assert!(ArtFactory::new(ArtConfig::default())
        .unwrap()
        .learner()
        .is_none());
}

#[test]
fn dqn_decisions_repeat_with_the_same_seeds() {
    let decide = || {
        let mut p = ArtPolicy::new(ArtConfig::with_dqn(DqnAdapterConfig::default())).unwrap();
        let mut rng = ChaCha8Rng::seed_from_u64(11);
        let now = Instant::from_millis(5);
        (0..200u64)
            .map(|i| {
                let n = times(&data_lost(&mut p, now, &lost(i, 1), &path(), &mut rng))
                    .0
                    .len();
                if i % 4 == 0 {
                    data_lost(&mut p, now, &lost(i, 2), &path(), &mut rng);
                } else {
                    packet_acked(
                        &mut p,
                        now,
                        &fate(1000 + i, 1000 + i, Some((i, 1))),
                        &path(),
                    );
                }
                n
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(decide(), decide());
}

#[test]
fn a_per_connection_policy_sends_every_loss_of_an_rtt_at_one_level() {
    let config = ArtConfig::with_dqn(DqnAdapterConfig {
        per: Granularity::Connection,
        ..DqnAdapterConfig::default()
    });
    assert_eq!(config.name(), "art-dqn:per=connection");
    let factory = ArtFactory::new(config).unwrap();
    let mut p = factory.build();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let srtt = path().srtt;
    // Losses within one smoothed RTT of the first: one decision, one level,
    // whatever their round.
    let start = Instant::from_millis(10);
    let mut levels = Vec::new();
    for i in 0..6u64 {
        let now = start + srtt * (i as u32) / 8;
        let round = if i % 2 == 0 { 1 } else { 2 };
        let d = data_lost(&mut *p, now, &lost(i, round), &path(), &mut rng);
        levels.push(times(&d).0.len());
    }
    assert!(levels.iter().all(|&l| l == levels[0]), "{levels:?}");
    let reported_level = |p: &dyn RecoveryPolicy| {
        let mut state = PolicyState::default();
        p.report_state(&mut state);
        state
            .fields()
            .iter()
            .find(|(k, _)| *k == "level")
            .map(|f| f.1)
    };
    assert_eq!(reported_level(&*p), Some(levels[0] as f64));
    // A loss one smoothed RTT later takes a new decision (the same level or
    // not); the learner has learned nothing yet (no round settled).
    data_lost(&mut *p, start + srtt, &lost(99, 1), &path(), &mut rng);
    assert_eq!(factory.learner().unwrap().lock().unwrap().experiences, 0);
}
