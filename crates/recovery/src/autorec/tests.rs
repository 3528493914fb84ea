use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::{with_context, ReplicaRef};

use super::*;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn path() -> PathView {
    PathView {
        srtt: Duration::from_millis(60),
        min_rtt: Duration::from_millis(50),
        ..PathView::default()
    }
}

fn lost(item: u64, round: u32, sent: u64, lost: u64) -> LostData {
    LostData::new(ItemId(item), round, at(sent), at(lost), 1200).with_retransmissions(round - 1)
}

fn replica_sent(item: u64, index: u16) -> SentView {
    SentView {
        pn: 0,
        size: 1200,
        replica: Some(ReplicaRef {
            item: ItemId(item),
            round: 1,
            index,
        }),
        carries_new_data: false,
    }
}

fn fixed(a: u32) -> AutorecPolicy {
    AutorecPolicy::new(AutorecConfig {
        variant: Variant::Fixed(a),
        ..AutorecConfig::default()
    })
    .unwrap()
}

fn delivered(item: u64, first_lost: u64, sent: u64) -> RecoveryRecord {
    RecoveryRecord {
        item: ItemId(item),
        chunks: Vec::new(),
        first_sent: at(0),
        first_lost: at(first_lost),
        t_unit: None,
        retransmissions: 1,
        outcome: RecoveryOutcome::Delivered {
            round: 1,
            recovery_sent: at(sent),
            needed: 1,
            acked_at: at(sent + 60),
        },
    }
}

#[test]
fn queue_entries_move_to_the_tail_and_leave_at_a_thres() {
    let mut q = ReinjectionQueue::default();
    q.on_resent(ItemId(1), at(10));
    q.on_resent(ItemId(2), at(20));
    q.on_resent(ItemId(1), at(30)); // resent again: to the tail
    assert_eq!(q.items().collect::<Vec<_>>(), [ItemId(2), ItemId(1)]);
    assert_eq!(q.get(ItemId(1)).unwrap().last_sent, at(30));
    // A_thres = 1: each entry is reinjected once, head first.
    assert_eq!(q.reinject_head(1, at(40)), Some(ItemId(2)));
    assert_eq!(q.reinject_head(1, at(41)), Some(ItemId(1)));
    assert_eq!(q.reinject_head(1, at(42)), None, "A_i reached A_thres");
    assert_eq!(q.head(2).map(|e| e.item), Some(ItemId(2)));
    let e = q.get(ItemId(2)).unwrap();
    assert_eq!((e.reinjections, e.last_sent), (1, at(40)));
    // Acknowledged: the entry leaves.
    q.remove(ItemId(2));
    assert_eq!(q.items().collect::<Vec<_>>(), [ItemId(1)]);
    assert_eq!(q.reinject_head(0, at(50)), None, "A_thres = 0: never");
}

#[test]
fn a_refused_reinjection_is_taken_back() {
    let mut q = ReinjectionQueue::default();
    q.on_resent(ItemId(1), at(10));
    q.on_resent(ItemId(2), at(20));
    assert_eq!(q.reinject_head(1, at(40)), Some(ItemId(1)));
    // The transport refused it: A_i back to 0, the entry stays at the tail
    // with its new T_stmp, and is eligible again after the others.
    q.refund(ItemId(1));
    let e = q.get(ItemId(1)).unwrap();
    assert_eq!((e.reinjections, e.last_sent), (0, at(40)));
    assert_eq!(q.items().collect::<Vec<_>>(), [ItemId(2), ItemId(1)]);
    assert_eq!(q.reinject_head(1, at(41)), Some(ItemId(2)));
    assert_eq!(q.reinject_head(1, at(42)), Some(ItemId(1)));
    assert_eq!(q.reinject_head(1, at(43)), None);
    // A refund for an item that left is ignored.
    q.refund(ItemId(9));
}

#[test]
fn the_queue_is_bounded() {
    let mut q = ReinjectionQueue::default();
    for i in 0..(MAX_ENTRIES as u64 + 10) {
        q.on_resent(ItemId(i), at(i));
    }
    assert_eq!(q.len(), MAX_ENTRIES);
    assert_eq!(q.items().next(), Some(ItemId(10)));
}

#[test]
fn t_thres_is_t_unit_over_a_thres_plus_one() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = fixed(2);
    // Before any loss: 9/8·SRTT + 25 ms = 92.5 ms.
    assert_eq!(p.t_thres(&path()), Duration::from_micros(92_500) / 3);
    // Measured: first transmission to loss detection.
    with_context(at(100), &path(), &mut rng, |cx| {
        p.on_data_lost(cx, &lost(1, 1, 10, 100))
    });
    assert_eq!(p.t_thres(&path()), Duration::from_millis(30));
    assert_eq!(fixed(0).t_thres(&path()), Duration::from_micros(92_500));
}

#[test]
fn off_mode_reinjects_up_to_a_thres_then_opportunistic_waits_for_t_thres() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = fixed(2);
    assert_eq!(
        with_context(at(100), &path(), &mut rng, |cx| p
            .on_data_lost(cx, &lost(1, 1, 10, 100))),
        Decision::single(at(100)),
        "ARQ: one retransmission"
    );
    assert_eq!(
        with_context(at(100), &path(), &mut rng, |cx| p.on_app_limited(cx)),
        None,
        "not sent yet"
    );
    with_context(at(100), &path(), &mut rng, |cx| {
        p.on_packet_sent(cx, &replica_sent(1, 0))
    });
    // T_unit = 90 ms, A = 2: T_thres = 30 ms after the retransmission.
    assert_eq!(p.next_reinjection(), Some(at(130)));
    assert_eq!(
        with_context(at(120), &path(), &mut rng, |cx| p.on_reinjection_timer(cx)),
        None
    );
    assert_eq!(
        with_context(at(130), &path(), &mut rng, |cx| p.on_reinjection_timer(cx)),
        Some(ItemId(1))
    );
    with_context(at(130), &path(), &mut rng, |cx| {
        p.on_packet_sent(cx, &replica_sent(1, 1))
    });
    // Off-mode does not wait for T_thres.
    assert_eq!(
        with_context(at(131), &path(), &mut rng, |cx| p.on_app_limited(cx)),
        Some(ItemId(1))
    );
    with_context(at(131), &path(), &mut rng, |cx| {
        p.on_packet_sent(cx, &replica_sent(1, 2))
    });
    assert_eq!(
        with_context(at(132), &path(), &mut rng, |cx| p.on_app_limited(cx)),
        None,
        "A_i = A_thres"
    );
    assert_eq!(p.next_reinjection(), None);
    // Delivered: gone from the queue.
    with_context(at(200), &path(), &mut rng, |cx| {
        p.on_recovery_ended(cx, &delivered(1, 100, 131))
    });
    assert!(p.queue().is_empty());
}

#[test]
fn the_offmode_variant_never_reinjects_on_a_timer() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = AutorecPolicy::new(AutorecConfig {
        variant: Variant::OffModeOnly,
        ..AutorecConfig::default()
    })
    .unwrap();
    with_context(at(100), &path(), &mut rng, |cx| {
        p.on_data_lost(cx, &lost(1, 1, 10, 100))
    });
    with_context(at(100), &path(), &mut rng, |cx| {
        p.on_packet_sent(cx, &replica_sent(1, 0))
    });
    assert_eq!(p.next_reinjection(), None);
    assert_eq!(
        with_context(at(500), &path(), &mut rng, |cx| p.on_reinjection_timer(cx)),
        None
    );
    assert_eq!(
        with_context(at(101), &path(), &mut rng, |cx| p.on_app_limited(cx)),
        Some(ItemId(1))
    );
    assert_eq!(p.name(), "autorec-offmode");
}

#[test]
fn the_adapter_decides_once_per_interval_from_measured_recoveries() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = AutorecPolicy::new(AutorecConfig::default()).unwrap();
    assert_eq!(p.level(), 1);
    let mut state = PolicyState::default();
    p.report_state(&mut state);
    let names: Vec<&str> = state.fields().iter().map(|(n, _)| *n).collect();
    assert!(names.contains(&"a_thres") && names.contains(&"utility"));
    assert!(names.contains(&"loss_rate"));
    // A calm path (SRTT 20 ms): E_waiting < Θ, so the first decision is 0.
    let calm = PathView {
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        ..PathView::default()
    };
    for i in 0..20u64 {
        let sent = SentView {
            pn: i,
            size: 1200,
            replica: None,
            carries_new_data: true,
        };
        with_context(at(i * 10), &calm, &mut rng, |cx| {
            p.on_packet_sent(cx, &sent)
        });
    }
    with_context(at(0), &calm, &mut rng, |cx| {
        p.on_data_lost(cx, &lost(1, 1, 0, 0))
    });
    with_context(at(500), &path(), &mut rng, |cx| {
        p.on_recovery_ended(cx, &delivered(1, 0, 10))
    });
    assert_eq!(p.level(), 1, "the interval is not over");
    with_context(at(1000), &calm, &mut rng, |cx| {
        p.on_data_lost(cx, &lost(2, 1, 900, 1000))
    });
    assert_eq!(p.level(), 0);
}

#[test]
fn a_gated_interval_never_reinjects() {
    // A calm path (SRTT 20 ms, no loss counted): E_waiting < Θ at every
    // decision. One item stays unacknowledged in the queue throughout.
    let mut rng = ChaCha8Rng::seed_from_u64(9);
    let mut p = AutorecPolicy::new(AutorecConfig::default()).unwrap();
    let calm = PathView {
        srtt: Duration::from_millis(20),
        min_rtt: Duration::from_millis(20),
        ..PathView::default()
    };
    with_context(at(0), &calm, &mut rng, |cx| {
        p.on_data_lost(cx, &lost(1000, 1, 0, 0))
    });
    with_context(at(0), &calm, &mut rng, |cx| {
        p.on_packet_sent(cx, &replica_sent(1000, 0))
    });
    // The first interval (A_thres = 1 before any decision) has a recovery,
    // so its end decides.
    with_context(at(100), &calm, &mut rng, |cx| {
        p.on_recovery_ended(cx, &delivered(999, 50, 51))
    });
    // 40 decision intervals, each with traffic and one recovered item:
    // four times the run of unchanged intervals that starts an exploration.
    for k in 1..=40u64 {
        let t = k * 1000;
        for i in 0..20u64 {
            let sent = SentView {
                pn: k * 100 + i,
                size: 1200,
                replica: None,
                carries_new_data: true,
            };
            with_context(at(t - 500 + i), &calm, &mut rng, |cx| {
                p.on_packet_sent(cx, &sent)
            });
        }
        // This loss closes the interval: the adapter decides.
        with_context(at(t), &calm, &mut rng, |cx| {
            p.on_data_lost(cx, &lost(k, 1, t - 30, t))
        });
        assert_eq!(p.level(), 0, "interval {k} is gated");
        with_context(at(t), &calm, &mut rng, |cx| {
            p.on_packet_sent(cx, &replica_sent(k, 0))
        });
        assert_eq!(p.next_reinjection(), None, "interval {k}");
        for dt in [1, 200, 900] {
            assert_eq!(
                with_context(at(t + dt), &calm, &mut rng, |cx| p.on_app_limited(cx)),
                None,
                "interval {k} reinjects in off-mode"
            );
            assert_eq!(
                with_context(at(t + dt), &calm, &mut rng, |cx| p.on_reinjection_timer(cx)),
                None,
                "interval {k} reinjects on its timer"
            );
        }
        with_context(at(t + 100), &calm, &mut rng, |cx| {
            p.on_recovery_ended(cx, &delivered(k, t, t + 1))
        });
    }
    assert_eq!(p.queue().get(ItemId(1000)).map(|e| e.reinjections), Some(0));
}
