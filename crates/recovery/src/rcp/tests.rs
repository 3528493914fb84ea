use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::{
    with_context, DataKind, Decision, ItemId, LostData, PacketFate, PathView, RecoveryPolicy,
    ReplicaRef, SentView,
};
use wire::time::{Duration, Instant};

use super::model::Normalisation;
use super::policy::{MessagePolicy, Rule};
use super::*;

fn ms(v: u64) -> Duration {
    Duration::from_millis(v)
}

fn at(v: u64) -> Instant {
    Instant::ZERO + ms(v)
}

fn lost(item: u64, first_sent: u64, round: u32, kind: DataKind) -> LostData {
    LostData::new(
        ItemId(item),
        round,
        at(first_sent),
        at(first_sent + 10),
        100,
    )
    .with_retransmissions(round - 1)
    .with_kind(kind)
}

/// `p.on_data_lost` at `now` on a default path.
fn lose(p: &mut MessagePolicy, now: Instant, l: &LostData, rng: &mut dyn RngCore) -> Decision {
    with_context(now, &PathView::default(), rng, |cx| p.on_data_lost(cx, l))
}

/// `p.on_packet_acked` at `now` on a default path.
fn ack(p: &mut MessagePolicy, now: Instant, f: &PacketFate, rng: &mut dyn RngCore) {
    with_context(now, &PathView::default(), rng, |cx| {
        p.on_packet_acked(cx, f)
    })
}

fn policy(name: &str) -> MessagePolicy {
    MessagePolicy::new(parse(name).expect("a message scheme").expect("valid"))
}

fn fate(pn: u64, sent: u64, replica: Option<(u64, u32)>) -> PacketFate {
    PacketFate {
        pn,
        time_sent: at(sent),
        size: 150,
        tag: None,
        replica: replica.map(|(item, round)| ReplicaRef {
            item: ItemId(item),
            round,
            index: 0,
        }),
        carries_new_data: false,
    }
}

/// The schemes declare how the message workload carries their messages:
/// only `tcp` on a reliable stream.
#[test]
fn only_tcp_asks_for_a_stream() {
    use transport::policy::{Carriage, RecoveryPolicy};
    assert_eq!(policy("tcp").message_carriage(), Carriage::Stream);
    for s in ["udp", "arq", "rcp", "rcp:beta=0.3"] {
        assert_eq!(policy(s).message_carriage(), Carriage::Datagram, "{s}");
    }
    assert_eq!(
        transport::policy::QuicPolicy.message_carriage(),
        Carriage::Datagram
    );
}

#[test]
fn options_parse_with_defaults_and_bad_ones_are_refused() {
    let c = parse("rcp").unwrap().unwrap();
    assert_eq!(c.rule, Rule::Learned);
    assert_eq!((c.utility.alpha, c.utility.beta), (2.0, 0.5));
    assert_eq!(
        c.utility.normalisation,
        Normalisation::Simple {
            tau_r_max: DEFAULT_TAU_MAX
        }
    );
    let c = parse("arq:beta=0.3,alpha=4,norm=tuned,eps_udp=0.4,eps_arq=0.03,l_udp=101,l_arq=611")
        .unwrap()
        .unwrap();
    assert_eq!(c.rule, Rule::Always);
    assert_eq!((c.utility.alpha, c.utility.beta), (4.0, 0.3));
    assert!(
        matches!(c.utility.normalisation, Normalisation::Tuned { l_arq, .. } if l_arq == ms(611))
    );
    assert!(parse("quic").is_none());
    assert_eq!(parse("tcp").unwrap().unwrap().rule, Rule::Reliable);
    for bad in [
        "rcp:beta=2",
        "rcp:beta=x",
        "rcp:beta",
        "rcp:gamma=1",
        "rcp:norm=tuned",
        "rcp:norm=tuned,eps_udp=0.4,eps_arq=0.03,l_udp=101",
        "rcp:tau_max=0",
        "rcp:eps_udp=0.4",
        "rcp:norm=fancy",
        "rcp:slot=0",
        "tcp:beta=1",
        "udp:alpha=-1",
        "rcp:norm=tuned,eps_udp=0.4,eps_arq=0.03,l_udp=600,l_arq=100",
    ] {
        assert!(parse(bad).unwrap().is_err(), "{bad}");
    }
}

#[test]
fn udp_drops_arq_retransmits_at_the_timeout_and_stream_data_is_always_resent() {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut udp = policy("udp");
    assert_eq!(
        lose(
            &mut udp,
            at(50),
            &lost(0, 0, 1, DataKind::Datagram),
            &mut rng
        ),
        Decision::Drop
    );
    // Stream data is never dropped, whatever the scheme.
    for name in ["udp", "arq", "rcp", "tcp"] {
        let mut p = policy(name);
        assert_eq!(
            lose(&mut p, at(50), &lost(0, 0, 1, DataKind::Stream), &mut rng),
            Decision::single(at(50)),
            "{name}"
        );
    }
    // ARQ: before any RTT sample the timeout is the initial 30 ms after
    // the transmission; the loss declared at 20 ms waits for it.
    let mut arq = policy("arq");
    let d = lose(
        &mut arq,
        at(20),
        &lost(0, 0, 1, DataKind::Datagram),
        &mut rng,
    );
    assert_eq!(
        d,
        Decision::Retransmit {
            send_at: vec![at(30)],
            opportunistic: false
        }
    );
    // RTT samples of 100 ms: τ_r = 100 + 4 × 50 = 300 ms after the first.
    ack(&mut arq, at(200), &fate(5, 100, None), &mut rng);
    assert_eq!(arq.rto(), ms(300));
    // A replica sent at 30 ms times out at 330 ms; declared lost at 400: now.
    with_context(at(30), &PathView::default(), &mut rng, |cx| {
        arq.on_packet_sent(
            cx,
            &SentView {
                pn: 9,
                size: 150,
                replica: Some(ReplicaRef {
                    item: ItemId(0),
                    round: 1,
                    index: 0,
                }),
                carries_new_data: false,
            },
        )
    });
    let d = lose(
        &mut arq,
        at(400),
        &lost(0, 0, 2, DataKind::Datagram),
        &mut rng,
    );
    assert_eq!(d, Decision::single(at(400)));
}

#[test]
fn rcp_learns_from_its_decisions_and_is_repeatable() {
    let run = |seed: u64| {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut p = policy("rcp:beta=0.5");
        let mut decisions = Vec::new();
        for i in 0..200u64 {
            let d = lose(
                &mut p,
                at(i + 150),
                &lost(i, i, 1, DataKind::Datagram),
                &mut rng,
            );
            if matches!(d, Decision::Retransmit { .. }) {
                // The retransmission gets through 100 ms later.
                ack(
                    &mut p,
                    at(i + 300),
                    &fate(1000 + i, i + 200, Some((i, 1))),
                    &mut rng,
                );
            }
            decisions.push(d == Decision::Drop);
        }
        (decisions, p.learn_steps())
    };
    let (a, steps) = run(3);
    let drops = a.iter().filter(|d| **d).count();
    assert!(drops > 0 && drops < a.len(), "{drops} drops of {}", a.len());
    // Once the memory holds a batch, every experience is one learning step.
    assert!(steps > 100, "{steps}");
    assert_eq!(run(3).0, a, "same seed, same decisions");
}

#[test]
fn rcp_prefers_retransmitting_when_only_delivery_counts() {
    // beta = 1: a drop costs U(ε̂, ·) < 0, a delivery U(0, ·) = 0; after
    // training the greedy answer is to retransmit.
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut p = policy("rcp:beta=1");
    for i in 0..1500u64 {
        let d = lose(
            &mut p,
            at(i + 150),
            &lost(i, i, 1, DataKind::Datagram),
            &mut rng,
        );
        if matches!(d, Decision::Retransmit { .. }) {
            ack(
                &mut p,
                at(i + 300),
                &fate(10_000 + i, i + 200, Some((i, 1))),
                &mut rng,
            );
        }
    }
    let mut late = 0;
    for i in 1500..1700u64 {
        let d = lose(
            &mut p,
            at(i + 150),
            &lost(i, i, 1, DataKind::Datagram),
            &mut rng,
        );
        if matches!(d, Decision::Retransmit { .. }) {
            late += 1;
            ack(
                &mut p,
                at(i + 300),
                &fate(10_000 + i, i + 200, Some((i, 1))),
                &mut rng,
            );
        }
    }
    assert!(late >= 190, "only {late} of the last 200 retransmitted");
}

/// The policy's latency estimate l̂ after one retransmitted message,
/// first sent at 0 ms, whose replica (pn 9) left at 200 ms, reached the
/// receiver at 290 ms (if `log` has it) and was acknowledged at 400 ms.
fn latency_after_one_delivery(p: &mut MessagePolicy) -> f64 {
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let d = lose(p, at(100), &lost(0, 0, 1, DataKind::Datagram), &mut rng);
    assert!(matches!(d, Decision::Retransmit { .. }), "{d:?}");
    with_context(at(200), &PathView::default(), &mut rng, |cx| {
        p.on_packet_sent(
            cx,
            &SentView {
                pn: 9,
                size: 150,
                replica: Some(ReplicaRef {
                    item: ItemId(0),
                    round: 1,
                    index: 0,
                }),
                carries_new_data: false,
            },
        )
    });
    ack(p, at(400), &fate(9, 200, Some((0, 1))), &mut rng);
    let mut state = transport::policy::PolicyState::default();
    p.report_state(&mut state);
    state
        .fields()
        .iter()
        .find(|(k, _)| *k == "latency_estimate_ms")
        .map(|&(_, v)| v)
        .expect("reported")
}

#[test]
fn the_simulator_measures_one_way_latency_and_a_real_network_estimates_it() {
    // Estimated: 200 ms until the replica left, plus half its 200-ms RTT.
    let mut estimated = policy("arq");
    assert!((latency_after_one_delivery(&mut estimated) - 300.0).abs() < 1e-6);
    // Measured: the replica's arrival at the receiver, logged at 290 ms
    // (a return path of 110 ms: RTT/2 would be 10 ms off).
    let log = policy::SharedArrivalLog::default();
    log.lock().expect("log").record(9, at(290));
    let mut config = parse("arq").expect("message scheme").expect("valid");
    config.latency = policy::LatencySource::Measured(log.clone());
    let mut measured = MessagePolicy::new(config);
    assert!((latency_after_one_delivery(&mut measured) - 290.0).abs() < 1e-6);
    assert!(
        log.lock().expect("log").is_empty(),
        "read once, then forgotten"
    );
    // A packet the log never saw falls back to the estimate.
    let mut config = parse("arq").expect("message scheme").expect("valid");
    config.latency = policy::LatencySource::Measured(policy::SharedArrivalLog::default());
    let mut unlogged = MessagePolicy::new(config);
    assert!((latency_after_one_delivery(&mut unlogged) - 300.0).abs() < 1e-6);
}

#[test]
fn the_arrival_log_keeps_first_arrivals_and_stays_bounded() {
    let mut log = policy::ArrivalLog::default();
    log.record(1, at(5));
    log.record(1, at(9));
    assert_eq!(log.take(1), Some(at(5)));
    assert_eq!(log.take(1), None);
    for pn in 0..(policy::MAX_LOGGED_ARRIVALS as u64 + 10) {
        log.record(pn, at(pn));
    }
    assert_eq!(log.len(), policy::MAX_LOGGED_ARRIVALS);
    assert_eq!(log.take(0), None, "the oldest went first");
}

#[test]
fn asrun_and_eq9_options_parse() {
    let c = parse("rcp:norm=asrun,eps_udp=0.405,eps_arq=0.034,l_udp=101,l_arq=611,rto=eq9")
        .expect("message scheme")
        .expect("valid");
    assert!(matches!(
        c.utility.normalisation,
        Normalisation::AsRun { l_udp, .. } if l_udp == ms(101)
    ));
    assert_eq!(c.rto, model::RtoRule::Printed);
    assert!(!c.align_to_slot);
    // Aligned: the copy waits for the next slot boundary.
    let mut rng = ChaCha8Rng::seed_from_u64(1);
    let mut p = policy("arq:align=slot,slot=10");
    let d = lose(&mut p, at(20), &lost(0, 3, 1, DataKind::Datagram), &mut rng);
    // First sent at 3 ms, initial timeout 30 ms: due at 33, leaves at 40.
    assert_eq!(d, Decision::single(at(40)));
    assert_eq!(
        parse("arq").expect("message scheme").expect("valid").rto,
        model::RtoRule::Rfc6298
    );
    for bad in [
        "rcp:norm=asrun",
        "rcp:rto=fast",
        "rcp:align=tick",
        "rcp:norm=asrun,eps_udp=0.4,eps_arq=0.03,l_udp=1000,l_arq=100",
    ] {
        assert!(parse(bad).expect("message scheme").is_err(), "{bad}");
    }
}
