//! Tests of `art+`: each mechanism alone, then the policy's decisions, then
//! a property test of its bounds.

use super::budget::{Budget, INITIAL_TOKENS, MAX_TOKENS};
use super::model::{BurstHistogram, LossModel};
use super::*;
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::{with_context, ItemId, ReplicaRef};
use wire::time::{Duration, Instant};

fn path() -> PathView {
    // 100 Mbit/s, 300 ms: 3.75 MB in flight per RTT, 3000 packets of 1250 B.
    PathView {
        srtt: Duration::from_millis(300),
        min_rtt: Duration::from_millis(300),
        pacing_rate: 12_500_000,
        mtu: 1250,
        ..Default::default()
    }
}

fn lost(item: u64, round: u32, position: Option<StreamPosition>) -> LostData {
    LostData::new(ItemId(item), round, Instant::ZERO, Instant::ZERO, 1200).with_position(position)
}

/// Far from the head and from the flow-control edge (100 MB of headroom).
fn far() -> Option<StreamPosition> {
    Some(StreamPosition {
        behind_head: 50_000_000,
        credit_left: 50_000_000,
    })
}

/// Not at the head, but the credit runs out within a tenth of an RTT
/// (400 KB at 3.75 MB per RTT: inside the default 0.25 RTT).
fn near_edge() -> Option<StreamPosition> {
    Some(StreamPosition {
        behind_head: 200_000,
        credit_left: 200_000,
    })
}

struct Driver {
    p: ArtPlusPolicy,
    rng: ChaCha8Rng,
    pn: u64,
}

impl Driver {
    fn new(name: &str) -> Self {
        let (_, opts) = match name.split_once(':') {
            Some((b, o)) => (b, Some(o)),
            None => (name, None),
        };
        Driver {
            p: ArtPlusPolicy::new(ArtPlusConfig::parse(name, opts).unwrap()).unwrap(),
            rng: ChaCha8Rng::seed_from_u64(7),
            pn: 0,
        }
    }

    /// Send one packet (a replica when `replica`) and report its fate.
    fn packet(&mut self, replica: bool, is_lost: bool) {
        self.pn += 1;
        let pn = self.pn;
        let replica = replica.then_some(ReplicaRef {
            item: ItemId(0),
            round: 1,
            index: 0,
        });
        let sent = SentView {
            pn,
            size: 1250,
            replica,
            carries_new_data: replica.is_none(),
        };
        let path = path();
        let p = &mut self.p;
        let tag = with_context(Instant::ZERO, &path, &mut self.rng, |cx| {
            p.on_packet_sent(cx, &sent)
        });
        let fate = PacketFate {
            pn,
            time_sent: Instant::ZERO,
            size: 1250,
            tag,
            replica,
            carries_new_data: replica.is_none(),
        };
        with_context(Instant::ZERO, &path, &mut self.rng, |cx| {
            if is_lost {
                p.on_packet_lost(cx, &fate)
            } else {
                p.on_packet_acked(cx, &fate)
            }
        });
    }

    /// `n` packets, every `every`-th lost (replicas when `replica`).
    fn feed(&mut self, n: u64, every: u64, replica: bool) {
        for i in 0..n {
            self.packet(replica, i % every == every - 1);
        }
    }

    fn decide(&mut self, l: &LostData) -> usize {
        self.decide_at(Instant::ZERO, l)
    }

    /// The replicas decided for `l` when its loss is declared at `now`.
    fn decide_at(&mut self, now: Instant, l: &LostData) -> usize {
        let path = path();
        let p = &mut self.p;
        match with_context(now, &path, &mut self.rng, |cx| p.on_data_lost(cx, l)) {
            Decision::Retransmit {
                send_at,
                opportunistic,
            } => {
                assert!(opportunistic);
                send_at.len()
            }
            Decision::Drop => 0,
            Decision::Defer => panic!("art+ never defers"),
        }
    }

    /// Offer a head-of-line copy `behind` bytes behind its stream's head.
    fn head(&mut self, behind: u64) -> bool {
        let path = path();
        let p = &mut self.p;
        let head = HeadOfLine {
            bytes: 1200,
            position: StreamPosition {
                behind_head: behind,
                credit_left: 0,
            },
        };
        with_context(Instant::ZERO, &path, &mut self.rng, |cx| {
            p.on_flow_blocked(cx, &head)
        })
    }
}

// ---- model -----------------------------------------------------------------

#[test]
fn level_is_the_smallest_meeting_the_target() {
    assert_eq!(LossModel::level_for(0.05, 0.01, 8), 2); // 0.25% ≤ 1%
    assert_eq!(LossModel::level_for(0.005, 0.01, 8), 1);
    assert_eq!(LossModel::level_for(0.3, 0.01, 8), 4); // 0.81%
    assert_eq!(LossModel::level_for(0.05, 0.2, 8), 1);
    assert_eq!(LossModel::level_for(1.0, 0.01, 8), 8);
    assert_eq!(LossModel::level_for(0.0, 0.01, 8), 1);
}

#[test]
fn replica_loss_starts_from_the_packet_loss_and_follows_replicas() {
    let mut m = LossModel::new(500);
    assert_eq!(m.replica_loss(), 0.0);
    // 1000 packets at 5% loss, no replica yet: p_r is the packet rate.
    for i in 0..1000u64 {
        m.on_fate(i, false, i % 20 == 19);
    }
    assert!((m.packet_loss() - 0.05).abs() < 0.02, "{}", m.packet_loss());
    assert!((m.replica_loss() - m.packet_loss()).abs() < 1e-12);
    // Replicas lost half of the time: p_r moves there as fates accumulate.
    for i in 0..400u64 {
        m.on_fate(10_000 + i, true, i % 2 == 0);
    }
    assert!(m.replica_loss() > 0.45, "{}", m.replica_loss());
    assert_eq!(m.replica_fates(), 400);
}

#[test]
fn a_spurious_replica_loss_is_corrected_in_place() {
    let mut m = LossModel::new(10);
    m.on_fate(1, true, true);
    m.on_fate(1, true, false);
    assert_eq!(m.replica_fates(), 1);
    let before = m.replica_loss();
    m.on_fate(2, true, false);
    assert!(m.replica_loss() <= before);
}

#[test]
fn burst_quantile_ignores_a_rare_long_burst() {
    let mut b = BurstHistogram::default();
    assert_eq!(b.quantile(0.9), 0);
    // 1000 single losses, far apart, then one run of 20.
    for i in 0..1000u64 {
        b.on_lost(i * 10);
    }
    for i in 0..20u64 {
        b.on_lost(50_000 + i);
    }
    // The singles weigh about 256 (their decay), the long burst 20: 7% of
    // the lost packets. The 90% quantile is a single loss, the maximum
    // (ART's B_max) 20.
    assert_eq!(b.quantile(0.9), 1);
    assert_eq!(b.quantile(1.0), 20);
    // Bursts of 4 dominate: the quantile follows them.
    for i in 0..100u64 {
        for k in 0..4 {
            b.on_lost(100_000 + i * 10 + k);
        }
    }
    assert_eq!(b.quantile(0.9), 4);
}

// ---- budget ----------------------------------------------------------------

#[test]
fn budget_grants_what_losses_earned_and_keeps_a_reserve() {
    let mut b = Budget::new(0.5);
    assert_eq!(b.grant(10, true), INITIAL_TOKENS as u32);
    assert_eq!(b.grant(1, true), 0);
    for _ in 0..4 {
        b.on_loss();
    }
    assert_eq!(b.grant(5, true), 2);
    // Data that does not block spends only above half the cap.
    for _ in 0..1000 {
        b.on_loss();
    }
    assert_eq!(b.tokens(), MAX_TOKENS);
    assert_eq!(b.grant(100, false), (MAX_TOKENS / 2.0) as u32);
    assert_eq!(b.grant(1, false), 0);
    assert_eq!(b.grant(1, true), 1);
    assert!(b.spent() as f64 <= b.earned());
}

// ---- head-of-line ----------------------------------------------------------

#[test]
fn blocking_is_the_flow_control_edge_or_the_head() {
    let p = path(); // 3.75 MB per RTT
    let head = Some(StreamPosition {
        behind_head: 0,
        credit_left: u64::MAX,
    });
    assert_eq!(Blocking::of(head, &p, 2.5), Blocking::Stream);
    assert_eq!(Blocking::of(near_edge(), &p, 2.5), Blocking::Sender);
    assert_eq!(Blocking::of(far(), &p, 2.5), Blocking::No);
    assert_eq!(Blocking::of(None, &p, 2.5), Blocking::No);
    // 8 MB of headroom: the sender stalls within 2.5 RTTs (9.4 MB), not
    // within 2.
    let mid = Some(StreamPosition {
        behind_head: 4_000_000,
        credit_left: 4_000_000,
    });
    assert_eq!(Blocking::of(mid, &p, 2.5), Blocking::Sender);
    assert_eq!(Blocking::of(mid, &p, 2.0), Blocking::No);
    // The head with little credit left stalls the sender too.
    let tight_head = Some(StreamPosition {
        behind_head: 0,
        credit_left: 1000,
    });
    assert_eq!(Blocking::of(tight_head, &p, 2.5), Blocking::Sender);
}

// ---- the policy ------------------------------------------------------------

#[test]
fn blocking_data_gets_copies_far_data_one() {
    let mut d = Driver::new("art+:budget=off");
    d.feed(2000, 20, false); // 5% loss
    assert_eq!(d.decide(&lost(1, 1, near_edge())), 2);
    assert_eq!(d.decide(&lost(2, 1, far())), 1);
    // A second round always counts as blocking.
    assert_eq!(d.decide(&lost(3, 2, far())), 2);
    // Without head-of-line awareness, everything is blocking.
    let mut d = Driver::new("art+:hol=off,budget=off");
    d.feed(2000, 20, false);
    assert_eq!(d.decide(&lost(2, 1, far())), 2);
}

#[test]
fn a_head_with_credit_to_spare_blocks_once_its_loss_is_late() {
    let head = Some(StreamPosition {
        behind_head: 0,
        credit_left: u64::MAX,
    });
    let at = |ms| Instant::ZERO + Duration::from_millis(ms);
    let mut d = Driver::new("art+:budget=off");
    d.feed(2000, 20, false); // 5% loss; srtt 300 ms
                             // Found one RTT after it was sent (the packet threshold): one copy.
    assert_eq!(d.decide_at(at(300), &lost(1, 1, head)), 1);
    // Found after 1.25 RTTs or later (a probe timeout): the blocking level.
    assert_eq!(d.decide_at(at(375), &lost(2, 1, head)), 2);
    assert_eq!(d.decide_at(at(700), &lost(3, 1, head)), 2);
    // The flow-control edge and a second round block however soon.
    assert_eq!(d.decide_at(at(300), &lost(4, 1, near_edge())), 2);
    assert_eq!(d.decide_at(at(300), &lost(5, 2, head)), 2);
    // late_rtts=0: every head blocks.
    let mut d = Driver::new("art+:budget=off,late_rtts=0");
    d.feed(2000, 20, false);
    assert_eq!(d.decide_at(at(300), &lost(1, 1, head)), 2);
}

#[test]
fn the_level_follows_the_loss_rate() {
    let mut d = Driver::new("art+:budget=off");
    d.feed(2000, 200, false); // 0.5%
    assert_eq!(d.decide(&lost(1, 1, near_edge())), 1);
    let mut d = Driver::new("art+:budget=off");
    d.feed(2000, 3, false); // 33%
    assert_eq!(d.decide(&lost(1, 1, near_edge())), 4); // 0.33^4 = 1.2%
    assert_eq!(d.decide(&lost(2, 1, far())), 3); // 0.33^2 = 11% > 10%, 0.33^3 = 3.6%
}

#[test]
fn without_the_model_art_levels_apply_plus_one_when_blocking() {
    let mut d = Driver::new("art+:model=off,budget=off");
    // A lost replica in ART's 10-fate window raises R_1 to 2 (journal §6.1).
    d.feed(10, 10, true);
    assert_eq!(d.decide(&lost(1, 1, far())), 2);
    assert_eq!(d.decide(&lost(2, 1, near_edge())), 3);
}

#[test]
fn the_budget_caps_extra_replicas() {
    let mut d = Driver::new("art+:budget=0.5");
    d.feed(2000, 20, false); // 100 losses: 4 + 50 tokens, capped at 64
    let extra: usize = (0..200)
        .map(|i| d.decide(&lost(i, 1, near_edge())) - 1)
        .sum();
    let b = d.p.budget().unwrap();
    assert_eq!(extra as u64, b.spent());
    assert!(extra as f64 <= b.earned() && extra >= 50, "{extra}");
}

#[test]
fn stall_copies_the_head_within_the_horizon_and_the_budget() {
    let mut d = Driver::new("art+:stall=on");
    // 4 initial tokens: four copies of data at or near the head.
    assert!(d.head(0));
    assert!(d.head(1200));
    // 0.25 RTT at 3.75 MB per RTT: about 940 KB; beyond it, never.
    assert!(!d.head(1_000_000));
    assert!(d.head(900_000));
    assert!(d.head(0));
    assert!(!d.head(0), "the budget is spent");
    assert_eq!(d.p.budget().unwrap().spent(), 4);
    d.feed(40, 20, false); // 2 losses: 1 token
    assert!(d.head(0));
    assert!(!d.head(0));
    // Off: never; without a budget: always within the horizon.
    let mut off = Driver::new("art+");
    assert!(!off.head(0));
    let mut free = Driver::new("art+:budget=off,stall=on");
    assert!((0..1000).all(|_| free.head(0)));
    assert!(!free.head(1_000_000));
}

#[test]
fn datagrams_are_dropped() {
    let mut d = Driver::new("art+");
    let mut l = lost(1, 1, None);
    l.kind = DataKind::Datagram;
    assert_eq!(d.decide(&l), 0);
}

#[test]
fn names_and_options_parse_strictly() {
    let ok = |s: &str| {
        let (_, o) = s.split_once(':').map_or((s, None), |(b, o)| (b, Some(o)));
        ArtPlusConfig::parse(s, o)
    };
    assert_eq!(ok("art+").unwrap(), ArtPlusConfig::default());
    assert_eq!(ArtPlusConfig::default().name(), "art+");
    let c = ok("art+:hol=off,budget=off,target=0.05").unwrap();
    assert_eq!(c.name(), "art+:hol=off,target=0.05,budget=off");
    assert_eq!(ok("art+:target=0.02").unwrap().name(), "art+");
    assert_eq!(ok(&c.name()).unwrap(), c);
    for bad in [
        "art+:",
        "art+:hol",
        "art+:hol=maybe",
        "art+:target=0",
        "art+:target=nan",
        "art+:budget=-1",
        "art+:history=0",
        "art+:history=x",
        "art+:quantile=2",
        "art+:speed=11",
        "art+:stall=1",
        "art+:late_rtts=-1",
        "art+:late_rtts=101",
    ] {
        assert!(ok(bad).is_err(), "{bad}");
    }
    assert_eq!(
        crate::parse_scheme("art+:burst=off").unwrap().name(),
        "art+:burst=off"
    );
    assert_eq!(
        ok("art+:stall=on,hol=off").unwrap().name(),
        "art+:hol=off,stall=on"
    );
    assert_eq!(
        ok("art+:model=off,late_rtts=0").unwrap().name(),
        "art+:late_rtts=0,model=off"
    );
}

// ---- property --------------------------------------------------------------

#[derive(Clone, Debug)]
enum Op {
    Packet {
        replica: bool,
        lost: bool,
    },
    DataLost {
        round: u32,
        behind: u64,
        credit: u64,
    },
    Blocked {
        behind: u64,
    },
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (any::<bool>(), proptest::bool::weighted(0.3))
            .prop_map(|(replica, lost)| Op::Packet { replica, lost }),
        2 => (1u32..6, prop_oneof![Just(0u64), any::<u64>()], any::<u64>())
            .prop_map(|(round, behind, credit)| Op::DataLost { round, behind, credit }),
        1 => prop_oneof![Just(0u64), 0u64..2_000_000].prop_map(|behind| Op::Blocked { behind }),
    ]
}

proptest! {
    /// Whatever happens, no decision asks for more than MAX_REPLICAS (nor
    /// r_max) copies, and with a budget the extra replicas never exceed
    /// what the losses earned: new data is never starved beyond it.
    #[test]
    fn never_over_max_replicas_nor_over_budget(
        ops in proptest::collection::vec(arb_op(), 1..300),
        budget in prop_oneof![Just(None), (0u32..40).prop_map(|b| Some(f64::from(b) / 10.0))],
        hol in any::<bool>(),
        model in any::<bool>(),
        r_max in 1u32..=32,
        stall in any::<bool>(),
    ) {
        let config =
            ArtPlusConfig { budget, hol, model, r_max, stall, ..ArtPlusConfig::default() };
        let mut d = Driver {
            p: ArtPlusPolicy::new(config).unwrap(),
            rng: ChaCha8Rng::seed_from_u64(1),
            pn: 0,
        };
        let mut losses = 0u64;
        let mut extra = 0u64;
        for (i, op) in ops.iter().enumerate() {
            match *op {
                Op::Packet { replica, lost } => {
                    losses += u64::from(lost);
                    d.packet(replica, lost);
                }
                Op::DataLost { round, behind, credit } => {
                    let pos = StreamPosition { behind_head: behind, credit_left: credit };
                    let n = d.decide(&lost(i as u64, round, Some(pos)));
                    prop_assert!((1..=MAX_REPLICAS.min(r_max as usize)).contains(&n), "{n}");
                    extra += n as u64 - 1;
                }
                // A head-of-line copy is one more extra replica.
                Op::Blocked { behind } => {
                    let copied = d.head(behind);
                    prop_assert!(stall || !copied);
                    extra += u64::from(copied);
                }
            }
        }
        if let Some(b) = budget {
            let allowed = INITIAL_TOKENS + b * losses as f64;
            prop_assert!(extra as f64 <= allowed + 1e-9, "{extra} > {allowed}");
        }
    }
}
