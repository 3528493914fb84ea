//! Every registered scheme, driven through arbitrary sequences of the seam's
//! callbacks (sent / acked / lost / data lost / time passes) with arbitrary,
//! even absurd, path views: no panic, and every decision keeps the
//! invariants of its scheme (DESIGN.md "policy invariants").

use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use recovery::{parse_scheme, RoundRule};
use transport::policy::{
    with_context, DataKind, Decision, ItemId, LostData, PacketFate, PathView, ReplicaRef, SentView,
    MAX_REPLICAS,
};
use wire::time::{Duration, Instant};

/// Names to exercise: every listed pattern with a few parameters.
fn names() -> Vec<String> {
    let mut v = Vec::new();
    for pattern in recovery::SCHEMES.iter().map(|r| r.name) {
        if pattern.starts_with("autorec-fixed") {
            // AutoRec's levels are 0..=4 (autorec.md eq. 1).
            for r in [0, 2, 4] {
                v.push(pattern.replace('R', &r.to_string()));
            }
        } else if pattern.contains('R') {
            for r in [1, 3, 32] {
                v.push(pattern.replace('R', &r.to_string()));
            }
        } else if pattern.contains('K') {
            for k in [1, 9, 255] {
                v.push(pattern.replace('K', &k.to_string()));
            }
        } else {
            v.push((*pattern).to_string());
        }
    }
    v
}

#[derive(Clone, Debug)]
enum Op {
    Sent {
        replica: Option<(u64, u32, u16)>,
    },
    Acked {
        back: usize,
    },
    Lost {
        back: usize,
    },
    DataLost {
        item: u64,
        round: u32,
        datagram: bool,
    },
    Advance {
        nanos: u64,
    },
    Path(PathView),
}

fn arb_path() -> impl Strategy<Value = PathView> {
    let d = prop_oneof![Just(0u64), 1u64..1_000_000_000, any::<u64>()];
    let n = prop_oneof![Just(0u64), 1u64..100_000_000, any::<u64>()];
    (d.clone(), d.clone(), d, n.clone(), n.clone(), n).prop_map(
        |(srtt, min_rtt, latest, rate, mtu, cwnd)| PathView {
            srtt: Duration::from_nanos(srtt),
            min_rtt: Duration::from_nanos(min_rtt),
            latest_rtt: Duration::from_nanos(latest),
            rttvar: Duration::from_nanos(latest / 2),
            cwnd,
            bytes_in_flight: cwnd / 2,
            pacing_rate: rate,
            mtu: mtu % 70_000,
        },
    )
}

fn arb_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => proptest::option::of((0u64..20, 1u32..6, 0u16..8)).prop_map(|replica| Op::Sent { replica }),
        2 => (0usize..64).prop_map(|back| Op::Acked { back }),
        3 => (0usize..64).prop_map(|back| Op::Lost { back }),
        3 => (0u64..20, prop_oneof![1u32..8, any::<u32>()], proptest::bool::weighted(0.1))
            .prop_map(|(item, round, datagram)| Op::DataLost { item, round, datagram }),
        1 => prop_oneof![0u64..10_000_000, any::<u64>()].prop_map(|nanos| Op::Advance { nanos }),
        1 => arb_path().prop_map(Op::Path),
    ]
}

/// The invariants of one decision of scheme `name`.
fn check(
    name: &str,
    d: &Decision,
    now: Instant,
    round: u32,
    path: &PathView,
    kind: DataKind,
) -> Result<(), TestCaseError> {
    let base = name.split(':').next().unwrap_or(name);
    if kind == DataKind::Datagram {
        match base {
            // RCP's message schemes decide about DATAGRAM-only data: udp
            // drops it, arq and tcp retransmit it (one copy, at RCP's
            // timeout: never before now), rcp does either.
            "udp" => prop_assert_eq!(d, &Decision::Drop, "{}: datagram", name),
            "arq" | "tcp" | "rcp" => match d {
                Decision::Drop => prop_assert_eq!(base, "rcp", "{} dropped a datagram", name),
                Decision::Defer => prop_assert!(false, "{} deferred", name),
                Decision::Retransmit {
                    send_at,
                    opportunistic,
                } => {
                    prop_assert_eq!(send_at.len(), 1, "{}: datagram copies", name);
                    prop_assert!(send_at[0] >= now, "{name}: copy before now");
                    prop_assert!(!*opportunistic, "{name}: opportunistic");
                }
            },
            // Every other scheme gives up DATAGRAM-only data, as plain
            // QUIC does.
            _ => prop_assert_eq!(d, &Decision::Drop, "{}: datagram", name),
        }
        return Ok(());
    }
    let Decision::Retransmit {
        send_at,
        opportunistic,
    } = d
    else {
        return Err(TestCaseError::fail(format!("{name} dropped reliable data")));
    };
    prop_assert!(
        !send_at.is_empty() && send_at.len() <= MAX_REPLICAS,
        "{name}: {} replicas",
        send_at.len()
    );
    prop_assert!(
        send_at.windows(2).all(|w| w[0] <= w[1]),
        "{name}: unsorted {send_at:?}"
    );
    for t in send_at {
        prop_assert!(
            *t >= now && *t <= now + path.srtt,
            "{name}: {t:?} outside [now, now + srtt]"
        );
    }
    let param = name
        .split_once(':')
        .map(|(_, r)| r.parse::<usize>().unwrap());
    let art = name.starts_with("art");
    prop_assert_eq!(*opportunistic, art, "{}: opportunistic flag", name);
    if !art || name.starts_with("art-norand") {
        prop_assert!(
            send_at.iter().all(|t| *t == now),
            "{name}: not back to back at now"
        );
    }
    let r_max = param.unwrap_or(1).max(8);
    match name.split(':').next().unwrap() {
        "quic" => prop_assert_eq!(send_at.len(), 1),
        "fixed" | "art-fix" | "art-norand" if param.is_some() => {
            prop_assert_eq!(Some(send_at.len()), param)
        }
        "2n+1" => prop_assert_eq!(send_at.len() as u32, RoundRule::TwoNPlusOne.level(round)),
        "or3" => prop_assert_eq!(send_at.len() as u32, RoundRule::Or3.level(round)),
        _ => prop_assert!(send_at.len() <= r_max, "{name}: {} > R_max", send_at.len()),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn every_scheme_keeps_its_invariants(
        ops in proptest::collection::vec(arb_op(), 0..150),
        start in prop_oneof![Just(0u64), any::<u64>()],
        path in arb_path(),
        seed in any::<u64>(),
    ) {
        for name in names() {
            let mut p = parse_scheme(&name).unwrap().policy().build();
            prop_assert_eq!(p.name(), name.clone());
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut now = Instant::from_nanos(start);
            let mut path = path;
            let mut pn = 0u64;
            // Packets sent and not yet reported, with their fates.
            let mut outstanding: Vec<PacketFate> = Vec::new();
            for op in &ops {
                match op {
                    Op::Sent { replica } => {
                        pn += 1;
                        let replica = replica.map(|(item, round, index)| ReplicaRef { item: ItemId(item), round, index });
                        let view = SentView { pn, size: 1250, replica, carries_new_data: replica.is_none() };
                        let tag = with_context(now, &path, &mut rng, |cx| p.on_packet_sent(cx, &view));
                        outstanding.push(PacketFate { pn, time_sent: now, size: 1250, tag, replica, carries_new_data: replica.is_none() });
                    }
                    Op::Acked { back } | Op::Lost { back } => {
                        if outstanding.is_empty() { continue; }
                        let i = outstanding.len() - 1 - back % outstanding.len();
                        let fate = outstanding.remove(i);
                        if matches!(op, Op::Acked { .. }) {
                            with_context(now, &path, &mut rng, |cx| p.on_packet_acked(cx, &fate));
                        } else {
                            with_context(now, &path, &mut rng, |cx| p.on_packet_lost(cx, &fate));
                            // A spurious loss: acknowledged after all, sometimes.
                            if back % 5 == 0 {
                                with_context(now, &path, &mut rng, |cx| p.on_packet_acked(cx, &fate));
                            }
                        }
                    }
                    Op::DataLost { item, round, datagram } => {
                        let kind = if *datagram { DataKind::Datagram } else { DataKind::Stream };
                        let lost = LostData::new(ItemId(*item), *round, now, now, 1200).with_kind(kind);
                        let d = with_context(now, &path, &mut rng, |cx| p.on_data_lost(cx, &lost));
                        check(&name, &d, now, *round, &path, kind)?;
                    }
                    Op::Advance { nanos } => now += Duration::from_nanos(*nanos),
                    Op::Path(v) => path = *v,
                }
            }
        }
    }
}

/// Same seed, same callbacks: the same decisions (randomness only from the
/// RNG argument).
#[test]
fn decisions_are_deterministic() {
    let run = |name: &str| {
        let mut p = parse_scheme(name).unwrap().policy().build();
        let mut rng = ChaCha8Rng::seed_from_u64(99);
        let path = PathView {
            srtt: Duration::from_millis(40),
            min_rtt: Duration::from_millis(30),
            pacing_rate: 12_500_000,
            mtu: 1250,
            ..Default::default()
        };
        let mut out = Vec::new();
        for i in 0..200u64 {
            let now = Instant::from_millis(i);
            let view = SentView {
                pn: i,
                size: 1250,
                replica: None,
                carries_new_data: true,
            };
            let tag = with_context(now, &path, &mut rng, |cx| p.on_packet_sent(cx, &view));
            let replica = (i % 3 == 0).then_some(ReplicaRef {
                item: ItemId(i / 7),
                round: 1,
                index: 0,
            });
            let fate = PacketFate {
                pn: i,
                time_sent: now,
                size: 1250,
                tag,
                replica,
                carries_new_data: true,
            };
            if i % 4 == 0 {
                with_context(now, &path, &mut rng, |cx| p.on_packet_lost(cx, &fate));
                let lost = LostData::new(ItemId(i), 1 + (i % 3) as u32, now, now, 1);
                out.push(with_context(now, &path, &mut rng, |cx| {
                    p.on_data_lost(cx, &lost)
                }));
            } else {
                with_context(now, &path, &mut rng, |cx| p.on_packet_acked(cx, &fate));
            }
        }
        out
    };
    for name in names() {
        assert_eq!(run(&name), run(&name), "{name}");
    }
}
