//! Tests of one link direction: timing, queue limits, capacity, loss (its
//! faults, corruption to ECN marking, are in `fault_tests.rs`).

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

use proptest::prelude::*;

use super::*;
use crate::trace::{shared_traces_for_test, OPPORTUNITY_BYTES};

pub(super) fn addr(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A datagram whose payload starts with `seq` (so order can be checked).
pub(super) fn dgram(seq: u32, payload_len: usize) -> Datagram {
    let mut payload = vec![0u8; payload_len.max(4)];
    payload[..4].copy_from_slice(&seq.to_be_bytes());
    payload.truncate(payload_len.max(4));
    Datagram::new(addr(1), addr(2), payload)
}

pub(super) fn seq_of(d: &Datagram) -> u32 {
    let mut b = [0u8; 4];
    b.copy_from_slice(&d.payload[..4]);
    u32::from_be_bytes(b)
}

/// Drives `link` event by event until `until`, returning (arrival time, seq).
fn drain_until(link: &mut Link, until: Instant) -> Vec<(Instant, u32)> {
    let mut out = Vec::new();
    while let Some(t) = link.next_event() {
        if t > until {
            break;
        }
        while let Some(d) = link.poll_deliver(t) {
            out.push((t, seq_of(&d)));
        }
    }
    out
}

fn trace_link(text: &str, delay: Duration) -> Link {
    let trace = Trace::parse(text, "test").expect("valid trace");
    Link::new(LinkConfig::new(Capacity::Trace(Arc::new(trace)), delay), 1)
}

#[test]
fn wire_len_counts_ip_and_udp_headers() {
    assert_eq!(dgram(0, 1472).wire_len(), 1500);
    let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, 9));
    let d = Datagram::new(v6, v6, vec![0; 1452]);
    assert_eq!(d.wire_len(), 1500);
}

#[test]
fn idle_constant_link_delivers_after_delay_plus_serialization() {
    let delay = Duration::from_millis(25);
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Constant {
                bits_per_sec: 10_000_000,
            },
            delay,
        ),
        7,
    );
    let t0 = Instant::from_millis(3);
    link.send(t0, dgram(1, 1200));
    // 1228 wire bytes * 8 / 10 Mbit/s = 982.4 us, exactly.
    let expected = t0 + delay + Duration::from_nanos(982_400);
    assert_eq!(link.next_event(), Some(t0 + Duration::from_nanos(982_400)));
    assert!(link
        .poll_deliver(expected - Duration::from_nanos(1))
        .is_none());
    assert_eq!(link.next_event(), Some(expected));
    let d = link.poll_deliver(expected).expect("arrived");
    assert_eq!(seq_of(&d), 1);
    assert!(link.poll_deliver(expected).is_none());
    assert_eq!(link.next_event(), None);
    let s = link.stats();
    assert_eq!(
        (
            s.offered,
            s.delivered,
            s.bytes_delivered,
            s.wire_bytes_delivered
        ),
        (1, 1, 1200, 1228)
    );
}

#[test]
fn back_to_back_constant_rate_has_no_rounding_drift() {
    // 1228 bytes at 7 Mbit/s = 1403428.571.. ns: not a whole number of ns.
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Constant {
                bits_per_sec: 7_000_000,
            },
            Duration::ZERO,
        ),
        0,
    );
    for i in 0..7000 {
        link.send(Instant::ZERO, dgram(i, 1200));
    }
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(got.len(), 7000);
    for (k, (t, seq)) in got.iter().enumerate() {
        assert_eq!(*seq as usize, k);
        // Exact completion: ceil((k+1) * 1228 * 8e9 / 7e6) ns.
        let exact = ((k as u128 + 1) * 1228 * 8 * 1_000_000_000).div_ceil(7_000_000);
        assert_eq!(u128::from(t.as_nanos()), exact, "packet {k}");
    }
}

#[test]
fn idle_trace_link_waits_for_the_next_opportunity() {
    let delay = Duration::from_millis(10);
    let mut link = trace_link("5\n10\n", delay);
    // Arrival at 1 ms: the opportunity at 5 ms carries it.
    link.send(Instant::from_millis(1), dgram(1, 100));
    assert_eq!(link.next_event(), Some(Instant::from_millis(5)));
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(got, vec![(Instant::from_millis(15), 1)]);
    // Arrival exactly at an opportunity (10 ms) cannot use it: the next one
    // is in the second period, at 10 + 5 ms.
    let mut link = trace_link("5\n10\n", delay);
    link.send(Instant::from_millis(10), dgram(2, 100));
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(got, vec![(Instant::from_millis(25), 2)]);
    // After a long idle gap the trace is still in phase: 1000.5 ms -> 1005.
    link.send(Instant::from_micros(1_000_500), dgram(3, 100));
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(got, vec![(Instant::from_millis(1015), 3)]);
}

#[test]
fn opportunity_bytes_carry_over_between_packets() {
    let mut link = trace_link("1\n", Duration::ZERO);
    // Two 700-byte IP packets share one 1500-byte opportunity; a 3028-byte
    // one needs three; the 1472 bytes left in the third carry the next.
    link.send(Instant::ZERO, dgram(1, 672));
    link.send(Instant::ZERO, dgram(2, 672));
    link.send(Instant::ZERO, dgram(3, 3000));
    link.send(Instant::ZERO, dgram(4, 1400));
    link.send(Instant::ZERO, dgram(5, 100));
    let got = drain_until(&mut link, Instant::MAX);
    let ms = Instant::from_millis;
    // Opportunity 1 (1 ms): packets 1 and 2 (1400 bytes, 100 left go to 3).
    // 3 needs 3028: 100 + 1500 (2 ms) + 1428 of the 3 ms one, leaving 72.
    // 4 needs 1428: 72 at 3 ms, 1356 at 4 ms, leaving 144 for 5 (128 bytes).
    assert_eq!(
        got,
        vec![(ms(1), 1), (ms(1), 2), (ms(3), 3), (ms(4), 4), (ms(4), 5)]
    );
}

#[test]
fn unused_opportunity_bytes_are_lost() {
    let mut link = trace_link("1\n", Duration::ZERO);
    link.send(Instant::ZERO, dgram(1, 100));
    // The first packet leaves at 1 ms, wasting 1372 bytes; the second
    // arrives at 1.5 ms and gets a fresh opportunity at 2 ms.
    link.send(Instant::from_micros(1500), dgram(2, 100));
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(
        got,
        vec![(Instant::from_millis(1), 1), (Instant::from_millis(2), 2)]
    );
}

fn burst_into(capacity: Capacity, queue: QueueLimit, n: u32, payload: usize) -> LinkStats {
    let mut link = Link::new(
        LinkConfig::new(capacity, Duration::ZERO).with_queue(queue),
        0,
    );
    let t = Instant::from_micros(500);
    for i in 0..n {
        link.send(t, dgram(i, payload));
    }
    let got = drain_until(&mut link, Instant::MAX);
    let s = link.stats();
    assert_eq!(got.len() as u64, s.delivered);
    // Accepted ones come out in order.
    assert!(got.windows(2).all(|w| w[0].1 < w[1].1));
    s
}

#[test]
fn droptail_packet_limit_drops_exactly_when_full() {
    let slow = || Capacity::Trace(Arc::new(Trace::constant(1_000_000)));
    let s = burst_into(slow(), QueueLimit::Packets(10), 25, 1472);
    assert_eq!(
        (s.delivered, s.dropped_queue, s.max_queue_pkts),
        (10, 15, 10)
    );
    let s = burst_into(slow(), QueueLimit::Packets(10), 10, 1472);
    assert_eq!((s.delivered, s.dropped_queue), (10, 0));
    let s = burst_into(slow(), QueueLimit::Packets(0), 3, 1472);
    assert_eq!((s.delivered, s.dropped_queue), (0, 3));
    // An idle constant-rate link takes the first arrival into service at
    // once, so the queue keeps N more.
    let constant = || Capacity::Constant {
        bits_per_sec: 1_000_000,
    };
    let s = burst_into(constant(), QueueLimit::Packets(10), 25, 1472);
    assert_eq!(
        (s.delivered, s.dropped_queue, s.max_queue_pkts),
        (11, 14, 10)
    );
    let s = burst_into(Capacity::Unlimited, QueueLimit::Packets(0), 25, 1472);
    assert_eq!((s.delivered, s.dropped_queue), (25, 0));
}

#[test]
fn droptail_byte_limit_drops_exactly_when_full() {
    let slow = || Capacity::Trace(Arc::new(Trace::constant(1_000_000)));
    // 1500-byte packets: exactly 10 fit in 15 000 bytes.
    let s = burst_into(slow(), QueueLimit::Bytes(15_000), 25, 1472);
    assert_eq!(
        (s.delivered, s.dropped_queue, s.max_queue_bytes),
        (10, 15, 15_000)
    );
    // One byte less: 9.
    let s = burst_into(slow(), QueueLimit::Bytes(14_999), 25, 1472);
    assert_eq!((s.delivered, s.dropped_queue), (9, 16));
    // 1028-byte packets: 14 fit (14 392 bytes), the 15th would need 15 420.
    let s = burst_into(slow(), QueueLimit::Bytes(15_000), 25, 1000);
    assert_eq!((s.delivered, s.dropped_queue), (14, 11));
}

#[test]
fn full_queue_accepts_again_once_service_starts() {
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Trace(Arc::new(Trace::parse("1\n", "t").expect("ok"))),
            Duration::ZERO,
        )
        .with_queue(QueueLimit::Packets(2)),
        0,
    );
    for i in 0..3 {
        link.send(Instant::from_micros(100), dgram(i, 1472));
    }
    assert_eq!(link.stats().dropped_queue, 1);
    // At 1 ms the head leaves; one slot is free again.
    link.send(Instant::from_micros(1100), dgram(10, 1472));
    link.send(Instant::from_micros(1100), dgram(11, 1472));
    assert_eq!(link.stats().dropped_queue, 2);
    assert_eq!(link.queued_packets(), 2);
}

/// Offers saturating traffic (a backlog arriving at `from` that never
/// drains) and returns the IP bytes delivered in (from, from + window].
fn saturated_wire_bytes_from(
    capacity: Capacity,
    from: Instant,
    window: Duration,
    payload: usize,
    backlog: u32,
) -> u64 {
    let mut link = Link::new(LinkConfig::new(capacity, Duration::ZERO), 3);
    for i in 0..backlog {
        link.send(from, dgram(i, payload));
    }
    let got = drain_until(&mut link, from + window);
    assert!(link.queued_packets() > 0, "backlog too small to saturate");
    assert!(got.iter().all(|(t, _)| *t > from));
    got.len() as u64 * dgram(0, payload).wire_len()
}

fn saturated_wire_bytes(capacity: Capacity, window: Duration, payload: usize, backlog: u32) -> u64 {
    saturated_wire_bytes_from(capacity, Instant::ZERO, window, payload, backlog)
}

#[test]
fn constant_trace_capacity_is_reproduced_over_10s() {
    for bps in [1_000_000u64, 20_000_000, 48_000_000, 7_777_777] {
        let trace = Arc::new(Trace::constant(bps));
        let window = Duration::from_secs(10);
        let expected_opps = trace.opportunities_between(0, 10_000);
        let got = saturated_wire_bytes(
            Capacity::Trace(trace),
            window,
            1472,
            (expected_opps + 100) as u32,
        );
        // MTU-sized packets: exactly one per opportunity.
        assert_eq!(got, expected_opps * OPPORTUNITY_BYTES, "{bps}");
        let nominal = bps as f64 * 10.0 / 8.0;
        let err = (got as f64 - nominal).abs() / nominal;
        assert!(err < 0.01, "{bps}: {got} bytes vs {nominal} ({err})");
        // Smaller packets use the same bytes (carry-over), within a packet.
        let bytes_small = saturated_wire_bytes(
            Capacity::Trace(Arc::new(Trace::constant(bps))),
            window,
            1000,
            (expected_opps * 3 / 2 + 100) as u32,
        );
        let err = (bytes_small as f64 - nominal).abs() / nominal;
        assert!(
            err < 0.01,
            "{bps} small packets: {bytes_small} vs {nominal}"
        );
    }
}

#[test]
fn exact_constant_capacity_is_reproduced_over_10s() {
    let got = saturated_wire_bytes(
        Capacity::Constant {
            bits_per_sec: 20_000_000,
        },
        Duration::from_secs(10),
        1200,
        25_000,
    );
    // 25 000 000 bytes in 10 s; whole packets of 1228 bytes.
    assert_eq!(got, 25_000_000 / 1228 * 1228);
}

#[test]
fn real_verizon_trace_capacity_is_reproduced_over_10s() {
    let Some(dir) = shared_traces_for_test(
        "real_verizon_trace_capacity_is_reproduced_over_10s",
        &["Verizon-LTE-short.down"],
    ) else {
        return;
    };
    let path = dir.join("Verizon-LTE-short.down");
    let trace = Arc::new(Trace::from_file(&path).expect("real trace parses"));
    // The first 10 s, and 10 s across the end of the 140 s period.
    for from_s in [0u64, 135] {
        let from_ms = from_s * 1000;
        let expected = trace.opportunities_between(from_ms, from_ms + 10_000) * OPPORTUNITY_BYTES;
        let got = saturated_wire_bytes_from(
            Capacity::Trace(Arc::clone(&trace)),
            Instant::from_millis(from_ms),
            Duration::from_secs(10),
            1472,
            (expected / 1000 + 1000) as u32,
        );
        let err = (got as f64 - expected as f64).abs() / expected as f64;
        assert!(err < 0.01, "from {from_s} s: {got} vs {expected}");
        assert_eq!(got, expected, "MTU packets use every opportunity");
    }
    // And with a live sender instead of a backlog: 1 packet every 0.1 ms
    // (~118 Mbit/s, above the trace's peaks) into a 2000-packet queue.
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Trace(Arc::clone(&trace)),
            Duration::from_millis(20),
        )
        .with_queue(QueueLimit::Packets(2000)),
        5,
    );
    let mut delivered_bytes = 0u64;
    let step = Duration::from_micros(100);
    let mut t = Instant::ZERO;
    let end = Instant::from_millis(10_000);
    let mut seq = 0;
    while t <= end + Duration::from_millis(20) {
        if t <= end {
            link.send(t, dgram(seq, 1472));
            seq += 1;
        }
        while let Some(d) = link.poll_deliver(t) {
            delivered_bytes += d.wire_len();
        }
        t += step;
    }
    let expected = trace.opportunities_between(0, 10_000) * OPPORTUNITY_BYTES;
    let err = (delivered_bytes as f64 - expected as f64).abs() / expected as f64;
    assert!(
        err < 0.01,
        "live sender: {delivered_bytes} vs {expected} ({err})"
    );
}

#[test]
fn link_loss_matches_model_and_frees_capacity() {
    let mut link = Link::new(
        LinkConfig::ideal().with_loss(LossModel::Bernoulli { p: 0.04 }),
        42,
    );
    let n = 200_000u32;
    for i in 0..n {
        link.send(Instant::from_micros(u64::from(i)), dgram(i, 100));
    }
    let delivered = drain_until(&mut link, Instant::MAX).len() as f64;
    let s = link.stats();
    assert_eq!(s.offered, u64::from(n));
    assert_eq!(s.delivered + s.dropped_loss, s.offered);
    let rate = 1.0 - delivered / f64::from(n);
    let sigma = (0.04 * 0.96 / f64::from(n)).sqrt();
    assert!((rate - 0.04).abs() < 5.0 * sigma, "{rate}");
}

#[test]
fn same_seed_same_fate_different_seed_different() {
    let run = |seed| {
        let mut link = Link::new(
            LinkConfig::new(
                Capacity::Constant {
                    bits_per_sec: 5_000_000,
                },
                Duration::from_millis(5),
            )
            .with_queue(QueueLimit::Packets(20))
            .with_loss(LossModel::gilbert_from_mean(0.05, 3.0)),
            seed,
        );
        for i in 0..3000 {
            link.send(Instant::from_micros(u64::from(i) * 1500), dgram(i, 1000));
        }
        drain_until(&mut link, Instant::MAX)
    };
    assert_eq!(run(1), run(1));
    assert_ne!(run(1), run(2));
}

#[test]
fn degenerate_links_never_deliver_and_never_hang() {
    for capacity in [
        Capacity::Constant { bits_per_sec: 0 },
        Capacity::Trace(Arc::new(Trace::constant(0))),
    ] {
        let mut link = Link::new(
            LinkConfig::new(capacity, Duration::from_millis(1)).with_queue(QueueLimit::Packets(3)),
            0,
        );
        for i in 0..10 {
            link.send(Instant::from_millis(u64::from(i)), dgram(i, 10));
        }
        assert!(link.poll_deliver(Instant::MAX).is_none());
        assert_eq!(link.next_event(), None);
        assert!(link.stats().dropped_queue >= 6);
    }
}

#[test]
fn time_never_goes_backwards() {
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Constant {
                bits_per_sec: 1_000_000,
            },
            Duration::from_millis(10),
        ),
        0,
    );
    link.send(Instant::from_millis(100), dgram(1, 100));
    // An earlier `now` is treated as 100 ms.
    link.send(Instant::from_millis(50), dgram(2, 100));
    assert!(link.poll_deliver(Instant::from_millis(20)).is_none());
    let got = drain_until(&mut link, Instant::MAX);
    assert_eq!(got.len(), 2);
    assert!(got[0].0 > Instant::from_millis(110));
}

#[test]
fn huge_times_and_delays_saturate() {
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Trace(Arc::new(Trace::constant(12_000_000))),
            Duration::MAX,
        ),
        0,
    );
    link.send(Instant::MAX - Duration::from_millis(1), dgram(1, 100));
    link.send(Instant::MAX, dgram(2, 100));
    let _ = link.poll_deliver(Instant::MAX);
    let _ = link.next_event();
    let mut link = Link::new(
        LinkConfig::new(
            Capacity::Constant {
                bits_per_sec: u64::MAX,
            },
            Duration::ZERO,
        ),
        0,
    );
    link.send(Instant::MAX, dgram(1, 100));
    assert!(link.poll_deliver(Instant::MAX).is_some());
}

/// Reference model of a trace link with an unlimited queue, written the
/// obvious way: walk opportunities one by one; arrivals strictly before an
/// opportunity may use it.
fn reference_trace_link(ops_ms: &[u64], arrivals: &[(u64, u64)]) -> Vec<u64> {
    let period = *ops_ms.last().expect("non-empty") * 1_000_000;
    let mut out = Vec::new();
    let mut next_arrival = 0;
    let mut current: Option<u64> = None; // bytes still needed by the head
    let mut waiting: VecDeque<u64> = VecDeque::new();
    'periods: for k in 0u64.. {
        for &ms in ops_ms {
            let t = k * period + ms * 1_000_000;
            while next_arrival < arrivals.len() && arrivals[next_arrival].0 < t {
                waiting.push_back(arrivals[next_arrival].1);
                next_arrival += 1;
            }
            let mut budget = 1500u64;
            while budget > 0 {
                let need = match current.take() {
                    Some(n) => n,
                    None => match waiting.pop_front() {
                        Some(n) => n,
                        None => break,
                    },
                };
                if need > budget {
                    current = Some(need - budget);
                    break;
                }
                budget -= need;
                out.push(t);
            }
            if out.len() == arrivals.len() {
                break 'periods;
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn trace_link_matches_reference_model(
        mut ops in proptest::collection::vec(0u64..40, 1..12),
        mut arrivals in proptest::collection::vec((0u64..200_000_000, 1usize..4000), 1..60),
        poll_every in 1u64..5_000_000,
    ) {
        ops.sort_unstable();
        prop_assume!(*ops.last().unwrap_or(&0) > 0);
        arrivals.sort_unstable();
        let text: String = ops.iter().map(|x| format!("{x}\n")).collect();
        let mut link = trace_link(&text, Duration::ZERO);
        let with_len: Vec<(u64, u64)> = arrivals.iter().map(|&(t, p)| (t, dgram(0, p).wire_len())).collect();
        let expected = reference_trace_link(&ops, &with_len);
        // Drive the link with sends at their times and polls on a grid, and
        // collect exact delivery times via next_event.
        let mut got = Vec::new();
        let mut i = 0;
        let mut poll_t = 0u64;
        loop {
            let next_send = arrivals.get(i).map(|a| a.0);
            let next_ev = link.next_event().map(Instant::as_nanos);
            let candidates = [next_send, next_ev, Some(poll_t)];
            let Some(t) = candidates.iter().flatten().copied().min() else { break };
            if next_send == Some(t) {
                link.send(Instant::from_nanos(t), dgram(i as u32, arrivals[i].1));
                i += 1;
            } else {
                while let Some(_d) = link.poll_deliver(Instant::from_nanos(t)) {
                    got.push(t);
                }
                if t == poll_t { poll_t += poll_every; }
            }
            if i == arrivals.len() && link.in_link() == 0 { break; }
        }
        prop_assert_eq!(got, expected);
    }

    #[test]
    fn outcome_does_not_depend_on_poll_times(
        mut arrivals in proptest::collection::vec((0u64..100_000_000, 1usize..2000), 1..150),
        polls in proptest::collection::vec(0u64..150_000_000, 0..50),
        trace in any::<bool>(), limit in 1u64..15, seed: u64,
    ) {
        arrivals.sort_unstable();
        let make = || {
            let capacity = if trace {
                Capacity::Trace(Arc::new(Trace::constant(3_000_000)))
            } else {
                Capacity::Constant { bits_per_sec: 3_000_000 }
            };
            Link::new(
                LinkConfig::new(capacity, Duration::from_millis(7))
                    .with_queue(QueueLimit::Packets(limit))
                    .with_loss(LossModel::gilbert_from_mean(0.1, 2.0)),
                seed,
            )
        };
        // A: polled exactly at every event (the simulator's way).
        let mut a = make();
        let mut got_a = Vec::new();
        for (i, &(t, len)) in arrivals.iter().enumerate() {
            while let Some(ev) = a.next_event().filter(|e| e.as_nanos() <= t) {
                while let Some(d) = a.poll_deliver(ev) {
                    got_a.push((ev, seq_of(&d)));
                }
            }
            a.send(Instant::from_nanos(t), dgram(i as u32, len));
        }
        got_a.extend(drain_until(&mut a, Instant::MAX));
        // B: polled only at arbitrary times (a relay waking up late), then
        // drained at the end.
        let mut b = make();
        let mut order_b = Vec::new();
        let mut events: Vec<(u64, Option<usize>)> = arrivals.iter().enumerate().map(|(i, a)| (a.0, Some(i))).collect();
        events.extend(polls.iter().map(|&p| (p, None)));
        events.sort_by_key(|&(t, i)| (t, i.is_none()));
        for (t, what) in events {
            match what {
                Some(i) => b.send(Instant::from_nanos(t), dgram(i as u32, arrivals[i].1)),
                None => {
                    while let Some(d) = b.poll_deliver(Instant::from_nanos(t)) {
                        order_b.push(seq_of(&d));
                    }
                }
            }
        }
        while let Some(d) = b.poll_deliver(Instant::MAX) {
            order_b.push(seq_of(&d));
        }
        let order_a: Vec<u32> = got_a.iter().map(|&(_, s)| s).collect();
        prop_assert_eq!(order_a, order_b);
        prop_assert_eq!(a.stats(), b.stats());
    }

    #[test]
    fn conservation_and_no_panics(
        ops in proptest::collection::vec((0u64..50_000_000, 0usize..3000, any::<bool>()), 1..200),
        cap in 0u8..4, limit in 0u64..20, p in 0.0f64..1.0, seed: u64,
    ) {
        let capacity = match cap {
            0 => Capacity::Unlimited,
            1 => Capacity::Constant { bits_per_sec: 1_000_000 + limit * 100_000 },
            2 => Capacity::Trace(Arc::new(Trace::constant(2_000_000))),
            _ => Capacity::Trace(Arc::new(Trace::parse("0\n3\n3\n9\n", "t").expect("valid"))),
        };
        let queue = if limit % 2 == 0 { QueueLimit::Packets(limit) } else { QueueLimit::Bytes(limit * 700) };
        let mut link = Link::new(
            LinkConfig::new(capacity, Duration::from_micros(limit * 300))
                .with_queue(queue)
                .with_loss(LossModel::Bernoulli { p }),
            seed,
        );
        let mut delivered = 0u64;
        for (i, (t, len, poll)) in ops.into_iter().enumerate() {
            let t = Instant::from_nanos(t);
            if poll {
                while let Some(_d) = link.poll_deliver(t) {
                    delivered += 1;
                }
            } else {
                link.send(t, dgram(i as u32, len));
            }
        }
        let s = link.stats();
        prop_assert_eq!(s.delivered, delivered);
        prop_assert_eq!(s.offered, s.delivered + s.dropped_loss + s.dropped_queue + link.in_link() as u64);
        // Something scheduled means something in the link, and vice versa
        // (a zero-rate link aside, which has no cases here).
        prop_assert_eq!(link.next_event().is_some(), link.in_link() > 0);
    }
}
