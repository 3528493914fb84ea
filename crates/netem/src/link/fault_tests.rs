//! Tests of one link direction's faults: corruption, blackholes, drop
//! lists, capped loss bursts and ECN marking (timing, capacity and queues
//! are in `tests.rs`).

use super::tests::{addr, dgram, seq_of};
use super::*;
use crate::faults::Corruption;

/// A datagram of `len` bytes (at least 20) whose *last* four bytes are
/// `seq`, so corruption of its first 16 bytes leaves the sequence readable.
fn tail_dgram(seq: u32, len: usize) -> Datagram {
    let mut payload = vec![0u8; len.max(20)];
    let n = payload.len();
    payload[n - 4..].copy_from_slice(&seq.to_be_bytes());
    Datagram::new(addr(1), addr(2), payload)
}

/// Sends `n` datagrams 1 ms apart into `link`, then returns the delivered
/// (arrival time, seq from the tail, payload).
fn run_tail(link: &mut Link, n: u32) -> Vec<(Instant, u32, Vec<u8>)> {
    for i in 0..n {
        link.send(Instant::from_millis(u64::from(i)), tail_dgram(i, 100));
    }
    let mut out = Vec::new();
    while let Some(t) = link.next_event() {
        while let Some(d) = link.poll_deliver(t) {
            let tail: [u8; 4] = d.payload[96..].try_into().expect("4 bytes");
            out.push((t, u32::from_be_bytes(tail), d.payload));
        }
    }
    out
}

#[test]
fn corruption_has_its_own_stream_and_damages_only_the_span() {
    let base = LinkConfig::new(
        Capacity::Constant {
            bits_per_sec: 10_000_000,
        },
        Duration::from_millis(15),
    )
    .with_queue(QueueLimit::Packets(25))
    .with_loss(LossModel::gilbert_from_mean(0.05, 3.0));
    let mut corrupting = base.clone();
    corrupting.corrupt = Some(Corruption {
        probability: 0.5,
        span: Some(16),
    });
    let plain = run_tail(&mut Link::new(base, 9), 5000);
    let mut link = Link::new(corrupting, 9);
    let damaged = run_tail(&mut link, 5000);
    // The same datagrams are lost and delivered at the same times.
    let fates =
        |v: &[(Instant, u32, Vec<u8>)]| v.iter().map(|(t, s, _)| (*t, *s)).collect::<Vec<_>>();
    assert_eq!(fates(&plain), fates(&damaged));
    let hit = damaged
        .iter()
        .filter(|(_, _, p)| p[..16].iter().any(|b| *b != 0))
        .count();
    assert!(damaged
        .iter()
        .all(|(_, _, p)| p[16..96].iter().all(|b| *b == 0)));
    assert_eq!(hit as u64, link.stats().corrupted);
    let share = hit as f64 / damaged.len() as f64;
    assert!((0.45..0.55).contains(&share), "{share}");
    // Probability 0 is off: nothing damaged, nothing drawn.
    let mut off = LinkConfig::ideal();
    off.corrupt = Some(Corruption {
        probability: 0.0,
        span: None,
    });
    let mut link = Link::new(off, 9);
    assert!(run_tail(&mut link, 100)
        .iter()
        .all(|(_, _, p)| p[..96].iter().all(|b| *b == 0)));
    assert_eq!(link.stats().corrupted, 0);
}

#[test]
fn blackholes_drop_everything_inside_their_windows() {
    let mut config = LinkConfig::ideal();
    config.blackholes = "200-300,450-460".parse().expect("windows");
    let mut link = Link::new(config, 1);
    let delivered: Vec<u32> = run_tail(&mut link, 1000)
        .iter()
        .map(|(_, s, _)| *s)
        .collect();
    let expected: Vec<u32> = (0..1000)
        .filter(|t| !(200..300).contains(t) && !(450..460).contains(t))
        .collect();
    assert_eq!(delivered, expected);
    assert_eq!(link.stats().dropped_blackhole, 110);
}

#[test]
fn drop_lists_drop_by_position_before_random_loss() {
    let mut config = LinkConfig::ideal().with_loss(LossModel::Bernoulli { p: 0.0 });
    config.drop_list = "2-4,7".parse().expect("list");
    let mut link = Link::new(config, 1);
    let delivered: Vec<u32> = run_tail(&mut link, 10).iter().map(|(_, s, _)| *s).collect();
    // Positions count from 1: seq 1..=3 and 6 are the 2nd-4th and 7th.
    assert_eq!(delivered, [0, 4, 5, 7, 8, 9]);
    let s = link.stats();
    assert_eq!((s.dropped_listed, s.dropped_loss, s.delivered), (4, 0, 6));
}

#[test]
fn loss_max_burst_caps_runs_of_losses() {
    let runs = |p: f64, max: Option<u64>| {
        let mut config = LinkConfig::ideal().with_loss(LossModel::Bernoulli { p });
        config.loss_max_burst = max;
        let mut link = Link::new(config, 3);
        let delivered: Vec<u32> = run_tail(&mut link, 2000)
            .iter()
            .map(|(_, s, _)| *s)
            .collect();
        let mut longest = 0;
        let mut prev = None;
        for &s in &delivered {
            longest = longest.max(prev.map_or(s, |p: u32| s - p - 1));
            prev = Some(s);
        }
        (longest, link.stats())
    };
    let (longest, _) = runs(0.9, None);
    assert!(
        longest > 3,
        "without a cap 90% loss has long runs: {longest}"
    );
    let (longest, stats) = runs(0.9, Some(3));
    assert!(longest <= 3, "{longest}");
    assert!(stats.dropped_loss > 1000);
    // Certain loss with a cap of 3: exactly every fourth datagram passes.
    let (longest, stats) = runs(1.0, Some(3));
    assert_eq!((longest, stats.delivered), (3, 500));
    assert!(LinkConfig {
        loss_max_burst: Some(0),
        ..LinkConfig::ideal()
    }
    .validate()
    .is_err());
}

/// ECN marking: an ECN-capable datagram arriving when at least K wait is
/// marked CE (and still queued); Not-ECT datagrams never are; a full queue
/// still drops.
#[test]
fn ecn_capable_arrivals_are_marked_above_the_threshold() {
    let mut config = LinkConfig::new(
        Capacity::Constant {
            bits_per_sec: 1_000_000,
        },
        Duration::ZERO,
    );
    config.queue = QueueLimit::Packets(6);
    config.ce_threshold = Some(3);
    let mut link = Link::new(config, 1);
    let t0 = Instant::ZERO;
    for seq in 0..10u32 {
        let mut d = dgram(seq, 1000);
        // Every other datagram is ECN-capable.
        d.ecn = (seq % 2 == 0).then_some(Ecn::Ect0);
        link.send(t0, d);
    }
    let mut out = Vec::new();
    while let Some(t) = link.next_event() {
        while let Some(d) = link.poll_deliver(t) {
            out.push((seq_of(&d), d.ecn));
        }
    }
    // 0 goes straight to the server; 1..=6 queue (4 is the first ECT one
    // arriving with 3 waiting); 7..=9 find the queue full.
    let expected: Vec<(u32, Option<Ecn>)> = vec![
        (0, Some(Ecn::Ect0)),
        (1, None),
        (2, Some(Ecn::Ect0)),
        (3, None),
        (4, Some(Ecn::Ce)),
        (5, None),
        (6, Some(Ecn::Ce)),
    ];
    assert_eq!(out, expected);
    let s = link.stats();
    assert_eq!((s.ce_marked, s.dropped_queue), (2, 3));
}
