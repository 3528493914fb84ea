//! Tests of the slotted delay line (`Capacity::Slotted`): its exact
//! sojourn, its per-slot rate, its buffer, and agreement with a slot loop
//! written the way the RCP authors' simulator runs its channel.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::tests::{dgram, seq_of};
use super::*;

const MS: u64 = 1_000_000;

fn slotted(per_slot: u64, sojourn_slots: u64, queue: u64) -> Link {
    let s = Slotted {
        slot: Duration::from_millis(1),
        per_slot,
        sojourn: Duration::from_millis(sojourn_slots),
        changes: SlotRates::default(),
    };
    Link::new(
        LinkConfig::new(Capacity::Slotted(s), Duration::ZERO)
            .with_queue(QueueLimit::Packets(queue)),
        3,
    )
}

/// Every delivery `(time, seq)` up to `until`, polling at each event.
fn deliveries(link: &mut Link, until: Instant) -> Vec<(Instant, u32)> {
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

#[test]
fn a_packet_leaves_at_the_boundary_its_sojourn_ends() {
    let mut link = slotted(3, 100, 300);
    // Arrives inside slot 1 (0, 1 ms): offered to the buffer at its end,
    // leaves at boundary 1 + 100.
    link.send(Instant::from_nanos(MS / 2), dgram(1, 100));
    assert_eq!(link.next_event(), Some(Instant::from_millis(1)));
    assert!(link.poll_deliver(Instant::from_millis(1)).is_none());
    assert_eq!(link.next_event(), Some(Instant::from_millis(101)));
    // Arriving exactly on boundary 2 joins the next slot (2, 3]: 3 + 100
    // (whatever order the simulator runs simultaneous events in).
    link.send(Instant::from_millis(2), dgram(2, 100));
    // One that arrives late in slot 3 leaves at boundary 103 too: the
    // sojourn is counted in the authors' slots.
    link.send(Instant::from_nanos(3 * MS - 1), dgram(3, 100));
    assert!(link
        .poll_deliver(Instant::from_nanos(101 * MS - 1))
        .is_none());
    let got = deliveries(&mut link, Instant::from_millis(200));
    assert_eq!(
        got,
        vec![
            (Instant::from_millis(101), 1),
            (Instant::from_millis(103), 2),
            (Instant::from_millis(103), 3)
        ]
    );
    // Size does not matter: a slot serves packets, not bytes.
    link.send(Instant::from_nanos(200 * MS + 1), dgram(4, 1400));
    assert_eq!(
        deliveries(&mut link, Instant::from_millis(400)),
        vec![(Instant::from_millis(301), 4)]
    );
}

#[test]
fn a_slot_serves_at_most_its_rate_oldest_first() {
    let mut link = slotted(3, 10, 300);
    for seq in 0..7 {
        link.send(
            Instant::from_nanos(MS / 2 + u64::from(seq)),
            dgram(seq, 100),
        );
    }
    let got = deliveries(&mut link, Instant::from_millis(100));
    let at = |ms: u64, seqs: &[u32]| -> Vec<(Instant, u32)> {
        seqs.iter()
            .map(|&s| (Instant::from_millis(ms), s))
            .collect()
    };
    let want: Vec<_> = [at(11, &[0, 1, 2]), at(12, &[3, 4, 5]), at(13, &[6])].concat();
    assert_eq!(got, want);
    assert_eq!(link.stats().delivered, 7);
}

#[test]
fn the_buffer_counts_sojourning_packets_and_a_full_one_drops() {
    // Three places; nothing can leave for 50 slots, so the fourth and
    // fifth arrivals find the buffer full.
    let mut link = slotted(3, 50, 3);
    for seq in 0..5 {
        link.send(
            Instant::from_nanos(MS / 2 + u64::from(seq)),
            dgram(seq, 100),
        );
    }
    // Held until the slot ends, then offered to the buffer.
    assert_eq!((link.queued_packets(), link.in_link()), (0, 5));
    assert_eq!(link.next_event(), Some(Instant::from_millis(1)));
    assert!(link.poll_deliver(Instant::from_millis(1)).is_none());
    assert_eq!(link.stats().dropped_queue, 2);
    assert_eq!(link.queued_packets(), 3);
    // After they left, there is room again.
    let got = deliveries(&mut link, Instant::from_millis(60));
    assert_eq!(got.len(), 3);
    link.send(
        Instant::from_millis(60) + Duration::from_nanos(1),
        dgram(9, 100),
    );
    assert!(link.poll_deliver(Instant::from_millis(61)).is_none());
    assert_eq!(link.queued_packets(), 1);
    assert_eq!(link.stats().dropped_queue, 2);
}

#[test]
fn the_random_drop_comes_before_the_buffer() {
    // Every arrival is lost: a lost packet never takes a place, so the
    // one-packet buffer never overflows (the authors' `putPackets` draws
    // the drop first and only then tries the buffer).
    let s = Slotted {
        slot: Duration::from_millis(1),
        per_slot: 1,
        sojourn: Duration::from_millis(50),
        changes: SlotRates::default(),
    };
    let cfg = LinkConfig::new(Capacity::Slotted(s), Duration::ZERO)
        .with_queue(QueueLimit::Packets(1))
        .with_loss(LossModel::Bernoulli { p: 1.0 });
    let mut link = Link::new(cfg, 1);
    for seq in 0..10 {
        link.send(
            Instant::from_nanos(MS / 2 + u64::from(seq)),
            dgram(seq, 100),
        );
    }
    let st = link.stats();
    assert_eq!((st.dropped_loss, st.dropped_queue), (10, 0));
}

#[test]
fn the_rate_changes_at_the_first_boundary_at_or_after_the_change() {
    let s = Slotted {
        slot: Duration::from_millis(1),
        per_slot: 3,
        sojourn: Duration::from_millis(5),
        changes: "20:1".parse().expect("schedule"),
    };
    let mut link = Link::new(LinkConfig::new(Capacity::Slotted(s), Duration::ZERO), 1);
    // Six arrivals in slot 15: eligible at 20, when the rate is already 1.
    for seq in 0..6 {
        link.send(
            Instant::from_nanos(14 * MS + 1 + u64::from(seq)),
            dgram(seq, 100),
        );
    }
    let times: Vec<u64> = deliveries(&mut link, Instant::from_millis(100))
        .iter()
        .map(|(t, _)| t.as_nanos() / MS)
        .collect();
    assert_eq!(times, vec![20, 21, 22, 23, 24, 25]);
}

/// The authors' channel as a slot loop: in slot `k` the slot's arrivals
/// face the buffer (drop-tail on a full buffer), then at most `rate`
/// packets that have stayed `sojourn` slots leave, oldest first, stopping
/// at the first that has not. Returns `(departure slot, seq)`.
fn slot_loop(
    arrivals: &[(u64, u32)],
    rate: usize,
    sojourn: u64,
    buffer: usize,
    slots: u64,
) -> Vec<(u64, u32)> {
    let mut q: VecDeque<(u64, u32)> = VecDeque::new();
    let mut out = Vec::new();
    let mut next = 0;
    for k in 1..=slots {
        while let Some(&(slot, seq)) = arrivals.get(next) {
            if slot != k {
                break;
            }
            if q.len() < buffer {
                q.push_back((k, seq));
            }
            next += 1;
        }
        for _ in 0..rate {
            match q.front() {
                Some(&(enq, seq)) if k - enq >= sojourn => {
                    out.push((k, seq));
                    q.pop_front();
                }
                _ => break,
            }
        }
    }
    out
}

#[test]
fn the_link_matches_the_authors_slot_loop_under_overload() {
    // Table I's shape at a smaller scale: 5 senders x 1 packet per slot,
    // 3 per slot served, a 30-packet buffer, 10 slots of sojourn. Arrivals
    // fall at random instants of their slot.
    let mut rng = ChaCha8Rng::seed_from_u64(25);
    let (rate, sojourn, buffer, slots) = (3u64, 10u64, 30u64, 400u64);
    let mut arrivals = Vec::new();
    let mut seq = 0u32;
    for k in 1..=slots {
        let mut offsets: Vec<u64> = (0..5).map(|_| rng.gen_range(1..MS)).collect();
        offsets.sort_unstable();
        for off in offsets {
            arrivals.push(((k - 1) * MS + off, k, seq));
            seq += 1;
        }
    }
    let mut link = slotted(rate, sojourn, buffer);
    let mut got = Vec::new();
    for &(at, _, seq) in &arrivals {
        let at = Instant::from_nanos(at);
        while let Some(t) = link.next_event().filter(|&t| t <= at) {
            while let Some(d) = link.poll_deliver(t) {
                got.push((t.as_nanos() / MS, seq_of(&d)));
            }
        }
        link.send(at, dgram(seq, 100));
    }
    for (t, s) in deliveries(&mut link, Instant::from_millis(slots)) {
        got.push((t.as_nanos() / MS, s));
    }
    let by_slot: Vec<(u64, u32)> = arrivals.iter().map(|&(_, k, s)| (k, s)).collect();
    let want = slot_loop(&by_slot, rate as usize, sojourn, buffer as usize, slots);
    assert_eq!(got, want);
    // Overloaded and full, each packet that gets in stays exactly the
    // sojourn: the buffer is the pipe. It holds the arrivals of the last
    // sojourn + 1 slots at its fullest (a slot's arrivals enter before its
    // departures leave), so it serves buffer / (sojourn + 1) per slot:
    // 30 / 11 here, 300 / 101 = 2.97 in Table I.
    let served_late = want.iter().filter(|(k, _)| *k > 100).count() as f64;
    let per_slot = served_late / (slots - 100) as f64;
    assert!((per_slot - 30.0 / 11.0).abs() < 0.01, "{per_slot}");
    let arrived: std::collections::BTreeMap<u32, u64> =
        by_slot.iter().map(|&(k, s)| (s, k)).collect();
    assert!(want
        .iter()
        .filter(|(k, _)| *k > 100)
        .all(|(k, s)| k - arrived[s] == sojourn));
}

#[test]
fn a_slots_senders_reach_the_buffer_as_blocks_in_a_random_order() {
    // Each slot: sender A sends two packets around sender B's one, in time
    // order A, B, A. The buffer has room for two per slot (two leave per
    // slot, after one slot). The authors' loop offers each sender's
    // packets as a block, the senders in a random order: A's pair, or B
    // then A's first. Never A's first and B's (the time order).
    let s = Slotted {
        slot: Duration::from_millis(1),
        per_slot: 2,
        sojourn: Duration::from_millis(1),
        changes: SlotRates::default(),
    };
    let cfg =
        LinkConfig::new(Capacity::Slotted(s), Duration::ZERO).with_queue(QueueLimit::Packets(2));
    let mut link = Link::new(cfg, 11);
    let from = |port: u16, seq: u32| {
        let mut d = dgram(seq, 100);
        d.src = super::tests::addr(port);
        d
    };
    let mut got = Vec::new();
    let slots = 400u64;
    for k in 0..slots {
        let base = k * MS;
        let seq = (k * 3) as u32;
        link.send(Instant::from_nanos(base + 100), from(10, seq));
        link.send(Instant::from_nanos(base + 200), from(20, seq + 1));
        link.send(Instant::from_nanos(base + 300), from(10, seq + 2));
        while let Some(t) = link
            .next_event()
            .filter(|&t| t <= Instant::from_nanos(base + MS))
        {
            while let Some(d) = link.poll_deliver(t) {
                got.push(seq_of(&d));
            }
        }
    }
    let mut pairs = std::collections::BTreeMap::new();
    for chunk in got.chunks(2) {
        let base = chunk[0] / 3 * 3;
        let pair: Vec<u32> = chunk.iter().map(|s| s - base).collect();
        *pairs.entry(pair).or_insert(0) += 1;
    }
    let a_first = pairs.get(&vec![0, 2]).copied().unwrap_or(0);
    let b_first = pairs.get(&vec![1, 0]).copied().unwrap_or(0);
    assert_eq!(a_first + b_first, pairs.values().sum::<i32>(), "{pairs:?}");
    // Both orders, about equally often (every other slot: a slot's
    // arrivals enter before its departures leave, so the full buffer
    // refuses the next slot's).
    assert!(a_first > 70 && b_first > 70, "{pairs:?}");
}

#[test]
fn bad_slotted_configurations_are_refused() {
    let base = Slotted {
        slot: Duration::from_millis(1),
        per_slot: 3,
        sojourn: Duration::ZERO,
        changes: SlotRates::default(),
    };
    assert!(base.validate().is_ok());
    for bad in [
        Slotted {
            slot: Duration::ZERO,
            ..base.clone()
        },
        Slotted {
            per_slot: 0,
            ..base.clone()
        },
    ] {
        let cfg = LinkConfig::new(Capacity::Slotted(bad), Duration::ZERO);
        assert!(cfg.validate().is_err());
        // Built anyway, it never panics.
        let mut link = Link::new(cfg, 1);
        link.send(Instant::from_millis(1), dgram(0, 100));
        let _ = deliveries(&mut link, Instant::from_millis(10));
    }
    for bad in ["5000", "x:3", "5000:0", "5000:1.5", "-1:3", "1:3,1:4"] {
        assert!(bad.parse::<SlotRates>().is_err(), "{bad}");
    }
    let r: SlotRates = "5000:3, 100:7".parse().expect("valid");
    assert_eq!(r.to_string(), "100:7,5000:3");
}
