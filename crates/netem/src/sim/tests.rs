//! Tests of the discrete-event simulator with toy nodes.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use wire::time::Duration;

use super::*;
use crate::link::{Capacity, QueueLimit};
use crate::loss::LossModel;
use crate::seed::{derive_seed, LINK_DOWN, LINK_UP};
use crate::trace::Trace;
use std::collections::BTreeMap;

fn addr(host: u8, port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::new(10, 0, 0, host), port))
}

/// Sends `count` numbered pings, one per `interval`, and logs the pongs.
struct Pinger {
    me: SocketAddr,
    peer: SocketAddr,
    interval: Duration,
    count: u32,
    sent: u32,
    next_send: Instant,
    /// (time, seq) of every pong.
    log: Vec<(Instant, u32)>,
    /// Send times by seq, to measure round trips.
    sent_at: Vec<Instant>,
    last_now: Instant,
}

impl Pinger {
    fn new(me: SocketAddr, peer: SocketAddr, interval: Duration, count: u32) -> Pinger {
        Pinger {
            me,
            peer,
            interval,
            count,
            sent: 0,
            next_send: Instant::ZERO,
            log: Vec::new(),
            sent_at: Vec::new(),
            last_now: Instant::ZERO,
        }
    }

    fn linger_until(&self) -> Instant {
        self.next_send + Duration::from_secs(1)
    }

    fn observe(&mut self, now: Instant) {
        assert!(now >= self.last_now, "time went backwards");
        self.last_now = now;
    }
}

impl Node for Pinger {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: SocketAddr,
        _ecn: Option<crate::Ecn>,
        payload: &mut [u8],
    ) {
        self.observe(now);
        assert_eq!((from, to), (self.peer, self.me));
        let seq = u32::from_be_bytes(payload[..4].try_into().expect("4 bytes"));
        self.log.push((now, seq));
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        self.observe(now);
        if self.sent < self.count && now >= self.next_send {
            let mut payload = self.sent.to_be_bytes().to_vec();
            payload.resize(1000, 0xab);
            self.sent_at.push(now);
            self.sent += 1;
            self.next_send = now + self.interval;
            return Some(Datagram::new(self.me, self.peer, payload));
        }
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        if self.sent < self.count {
            Some(self.next_send)
        } else {
            // Linger a second for the last pongs, then finish.
            (!self.is_finished()).then_some(self.linger_until())
        }
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.observe(now);
    }
    fn is_finished(&self) -> bool {
        self.sent == self.count && self.last_now >= self.linger_until()
    }
}

/// Echoes every datagram back to its sender and logs what it saw.
#[derive(Default)]
struct Echo {
    pending: VecDeque<Datagram>,
    log: Vec<(Instant, SocketAddr, u32)>,
    bytes_from: BTreeMap<SocketAddr, u64>,
    /// Payload bytes received in [window.0, window.1).
    window: (Instant, Instant),
    bytes_in_window: u64,
    echo: bool,
}

impl Node for Echo {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: SocketAddr,
        _ecn: Option<crate::Ecn>,
        payload: &mut [u8],
    ) {
        let seq = u32::from_be_bytes(payload[..4].try_into().expect("4 bytes"));
        self.log.push((now, from, seq));
        *self.bytes_from.entry(from).or_default() += payload.len() as u64;
        if now >= self.window.0 && now < self.window.1 {
            self.bytes_in_window += payload.len() as u64;
        }
        if self.echo {
            self.pending
                .push_back(Datagram::new(to, from, payload.to_vec()));
        }
    }
    fn poll_transmit(&mut self, _now: Instant) -> Option<Datagram> {
        self.pending.pop_front()
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _now: Instant) {}
    fn is_finished(&self) -> bool {
        true
    }
}

fn lossy(seed_label: &str, master: u64) -> (LinkConfig, u64) {
    let config = LinkConfig::new(
        Capacity::Constant {
            bits_per_sec: 10_000_000,
        },
        Duration::from_millis(15),
    )
    .with_queue(QueueLimit::Packets(50))
    .with_loss(LossModel::Bernoulli { p: 0.1 });
    (config, derive_seed(master, seed_label))
}

/// What a ping-pong run leaves behind: the pinger's pong log, the echo's
/// ping log, the simulator counters and the pings' send times.
type PingPongRun = (
    Vec<(Instant, u32)>,
    Vec<(Instant, SocketAddr, u32)>,
    SimStats,
    Vec<Instant>,
);

/// Runs the ping-pong scenario.
fn ping_pong(master: u64) -> PingPongRun {
    let (a, b) = (addr(1, 1000), addr(2, 443));
    let mut sim = Simulator::new();
    let pinger = sim.add_node(a, Pinger::new(a, b, Duration::from_millis(10), 500));
    let echo = sim.add_node(
        b,
        Echo {
            echo: true,
            ..Echo::default()
        },
    );
    let (up_cfg, up_seed) = lossy(LINK_UP, master);
    let (down_cfg, down_seed) = lossy(LINK_DOWN, master);
    let up = sim.add_link(up_cfg, up_seed);
    let down = sim.add_link(down_cfg, down_seed);
    sim.route(a, b, &[up]).expect("valid route");
    sim.route(b, a, &[down]).expect("valid route");
    let outcome = sim.run_until(Instant::from_millis(60_000));
    assert_eq!(outcome, RunOutcome::Finished);
    let up_stats = sim.link_stats(up).expect("link");
    let down_stats = sim.link_stats(down).expect("link");
    let p = sim.node::<Pinger>(pinger).expect("pinger");
    let e = sim.node::<Echo>(echo).expect("echo");
    assert_eq!(up_stats.offered, 500);
    assert_eq!(up_stats.delivered as usize, e.log.len());
    assert_eq!(down_stats.offered as usize, e.log.len());
    assert_eq!(down_stats.delivered as usize, p.log.len());
    (p.log.clone(), e.log.clone(), sim.stats(), p.sent_at.clone())
}

#[test]
fn ping_pong_through_lossy_links_is_deterministic_per_seed() {
    let (pongs, pings, stats, sent_at) = ping_pong(7);
    // About 10% lost each way: ~450 pings and ~405 pongs arrive.
    assert!((400..=490).contains(&pings.len()), "{}", pings.len());
    assert!((350..=450).contains(&pongs.len()), "{}", pongs.len());
    // Idle links: each way 15 ms + 1028 bytes at 10 Mbit/s (822.4 us).
    let one_way = Duration::from_millis(15) + Duration::from_nanos(822_400);
    for &(t, seq) in &pongs {
        assert_eq!(t, sent_at[seq as usize] + one_way + one_way, "pong {seq}");
    }
    assert_eq!(stats.unrouted, 0);
    assert_eq!(stats.undeliverable, 0);
    // Same seed: the same event log, bit for bit.
    let again = ping_pong(7);
    assert_eq!((&pongs, &pings), (&again.0, &again.1));
    assert_eq!(stats, again.2);
    let json = |s: &SimStats| serde_json::to_string(s).expect("serialises");
    assert_eq!(json(&stats), json(&again.2));
    // Another seed: another loss pattern.
    let other = ping_pong(8);
    assert_ne!(pings, other.1);
}

/// Sends numbered packets at a mean rate until `stop`, with gaps drawn
/// uniformly in [0.5, 1.5] x `interval` (perfectly periodic senders lock
/// into a drop-tail phase pattern where one flow takes every free slot).
struct Blaster {
    me: SocketAddr,
    to: SocketAddr,
    interval: Duration,
    next: Instant,
    stop: Instant,
    seq: u32,
    rng: rand_chacha::ChaCha8Rng,
}

impl Node for Blaster {
    fn handle_datagram(
        &mut self,
        _: Instant,
        _: SocketAddr,
        _: SocketAddr,
        _: Option<crate::Ecn>,
        _: &mut [u8],
    ) {
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if now >= self.next && now < self.stop {
            let jitter = 0.5 + crate::seed::unit_f64(&mut self.rng);
            self.next += self.interval.mul_f64(jitter);
            self.seq += 1;
            let mut payload = self.seq.to_be_bytes().to_vec();
            payload.resize(1472, 0);
            return Some(Datagram::new(self.me, self.to, payload));
        }
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (self.next < self.stop).then_some(self.next)
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_finished(&self) -> bool {
        self.next >= self.stop
    }
}

#[test]
fn dumbbell_senders_share_the_bottleneck_rate() {
    for bottleneck_capacity in [
        Capacity::Constant {
            bits_per_sec: 10_000_000,
        },
        Capacity::Trace(Arc::new(Trace::constant(10_000_000))),
    ] {
        let receiver = addr(9, 80);
        let senders = [addr(1, 5000), addr(2, 5000)];
        let mut sim = Simulator::new();
        let sink = sim.add_node(
            receiver,
            Echo {
                window: (Instant::from_millis(1000), Instant::from_millis(5000)),
                ..Echo::default()
            },
        );
        let bottleneck = sim.add_link(
            LinkConfig::new(bottleneck_capacity, Duration::from_millis(20))
                .with_queue(QueueLimit::Packets(100)),
            derive_seed(1, "link/bottleneck"),
        );
        for (i, &s) in senders.iter().enumerate() {
            // 15 Mbit/s each of 1500-byte IP packets: 30 offered for 10.
            sim.add_node(
                s,
                Blaster {
                    me: s,
                    to: receiver,
                    interval: Duration::from_nanos(800_000),
                    next: Instant::from_micros(i as u64 * 13),
                    stop: Instant::from_millis(6000),
                    seq: 0,
                    rng: crate::seed::rng_from_seed(derive_seed(1, &format!("sender{i}"))),
                },
            );
            let access = sim.add_link(
                LinkConfig::new(
                    Capacity::Constant {
                        bits_per_sec: 100_000_000,
                    },
                    Duration::from_millis(1),
                ),
                derive_seed(1, &format!("link/access{i}")),
            );
            sim.route(s, receiver, &[access, bottleneck])
                .expect("route");
        }
        let outcome = sim.run_until(Instant::from_millis(7000));
        assert_ne!(outcome, RunOutcome::Stalled);
        let echo = sim.node::<Echo>(sink).expect("sink");
        // 4 s at 10 Mbit/s of 1500-byte IP packets carrying 1472 bytes each.
        let expected = 10_000_000.0 / 8.0 * 4.0 * 1472.0 / 1500.0;
        let err = (echo.bytes_in_window as f64 - expected).abs() / expected;
        assert!(err < 0.01, "{} vs {expected}", echo.bytes_in_window);
        // Both flows got through, neither starved.
        for s in senders {
            let b = echo.bytes_from.get(&s).copied().unwrap_or(0);
            assert!(b as f64 > 0.25 * expected, "{s}: {b}");
        }
        let stats = sim.link_stats(bottleneck).expect("bottleneck");
        assert!(stats.dropped_queue > 0);
        assert_eq!(stats.max_queue_pkts, 100);
    }
}

#[test]
fn unrouted_and_undeliverable_are_counted() {
    let (a, b, nobody) = (addr(1, 1), addr(2, 2), addr(3, 3));
    let mut sim = Simulator::new();
    sim.add_node(a, Pinger::new(a, b, Duration::from_millis(1), 3));
    // No route a -> b: all 3 unrouted; the pinger lingers 1 s, then finishes.
    assert_eq!(
        sim.run_until(Instant::from_millis(5000)),
        RunOutcome::Finished
    );
    assert_eq!(sim.stats().unrouted, 3);
    let mut sim = Simulator::new();
    sim.add_node(a, Pinger::new(a, nobody, Duration::from_millis(1), 3));
    let l = sim.add_link(LinkConfig::ideal(), 0);
    sim.route(a, nobody, &[l]).expect("route");
    sim.run_until(Instant::from_millis(100));
    assert_eq!(sim.stats().undeliverable, 3);
    assert_eq!(sim.stats().transmitted, 3);
}

#[test]
fn route_errors() {
    let mut sim = Simulator::new();
    let l = sim.add_link(LinkConfig::ideal(), 0);
    let (a, b) = (addr(1, 1), addr(2, 2));
    assert_eq!(
        sim.route(a, b, &[LinkId(5)]),
        Err(RouteError::UnknownLink(LinkId(5)))
    );
    assert_eq!(sim.route(a, b, &[l, l]), Err(RouteError::RepeatedLink(l)));
    assert_eq!(sim.route(a, b, &[]), Ok(()));
}

/// Asks for a timeout in the past, then at a fixed time, logging `now`.
struct Clockwatcher {
    fired: Vec<Instant>,
    plan: Vec<Instant>,
}

impl Node for Clockwatcher {
    fn handle_datagram(
        &mut self,
        _: Instant,
        _: SocketAddr,
        _: SocketAddr,
        _: Option<crate::Ecn>,
        _: &mut [u8],
    ) {
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        self.plan.first().copied()
    }
    fn handle_timeout(&mut self, now: Instant) {
        self.fired.push(now);
        if !self.plan.is_empty() {
            self.plan.remove(0);
        }
    }
}

#[test]
fn timeouts_in_the_past_fire_now_and_deadlines_hold() {
    let mut sim = Simulator::new();
    let id = sim.add_node(
        addr(1, 1),
        Clockwatcher {
            fired: Vec::new(),
            plan: vec![
                Instant::from_millis(50),
                Instant::from_millis(10),
                Instant::from_millis(80),
            ],
        },
    );
    assert_eq!(
        sim.run_until(Instant::from_millis(60)),
        RunOutcome::DeadlineReached
    );
    assert_eq!(sim.now(), Instant::from_millis(60));
    // 50 ms fired; 10 ms was in the past, so it fired at 50 ms too.
    let fired = sim.node::<Clockwatcher>(id).expect("node").fired.clone();
    assert_eq!(
        fired,
        vec![Instant::from_millis(50), Instant::from_millis(50)]
    );
    assert_eq!(sim.run_until(Instant::from_millis(1000)), RunOutcome::Idle);
    let fired = sim.node::<Clockwatcher>(id).expect("node").fired.clone();
    assert_eq!(fired.last(), Some(&Instant::from_millis(80)));
    assert_eq!(sim.now(), Instant::from_millis(80));
    // A node added later is polled at the current time: past plans fire now.
    let late = sim.add_node(
        addr(2, 2),
        Clockwatcher {
            fired: Vec::new(),
            plan: vec![Instant::ZERO],
        },
    );
    sim.run_until(Instant::from_millis(2000));
    assert_eq!(
        sim.node::<Clockwatcher>(late).expect("node").fired,
        vec![Instant::from_millis(80)]
    );
}

#[test]
fn node_mut_commands_take_effect_and_types_are_checked() {
    let (a, b) = (addr(1, 1), addr(2, 2));
    let mut sim = Simulator::new();
    let pinger = sim.add_node(a, Pinger::new(a, b, Duration::from_millis(1), 0));
    let echo = sim.add_node(b, Echo::default());
    sim.route(a, b, &[]).expect("route");
    assert_eq!(
        sim.run_until(Instant::from_millis(10)),
        RunOutcome::DeadlineReached
    );
    assert!(sim.node::<Echo>(pinger).is_none(), "wrong type is None");
    // Tell the pinger to send 2 more; the next run polls it.
    sim.node_mut::<Pinger>(pinger).expect("pinger").count = 2;
    sim.run_until(Instant::from_millis(100));
    assert_eq!(sim.node::<Echo>(echo).expect("echo").log.len(), 2);
    assert!(sim.take_node::<Echo>(pinger).is_none());
    let taken = sim.take_node::<Echo>(echo).expect("echo");
    assert_eq!(taken.log.len(), 2);
    assert!(sim.node::<Echo>(echo).is_none());
    // A boxed node works too.
    let boxed: Box<dyn Node> = Box::new(Echo::default());
    let id = sim.add_node(b, boxed);
    sim.node_mut::<Pinger>(pinger).expect("pinger").count = 3;
    sim.run_until(Instant::from_millis(200));
    assert!(sim.node::<Box<dyn Node>>(id).is_some());
    assert_eq!(sim.stats().delivered, 3);
}

#[test]
fn zero_delay_ping_pong_stalls_instead_of_hanging() {
    let (a, b) = (addr(1, 1), addr(2, 2));
    let mut sim = Simulator::new();
    sim.add_node(
        a,
        Echo {
            echo: true,
            ..Echo::default()
        },
    );
    sim.add_node(
        b,
        Echo {
            echo: true,
            ..Echo::default()
        },
    );
    // Make them never "finished" so the run keeps going.
    struct Kick(SocketAddr, SocketAddr, bool);
    impl Node for Kick {
        fn handle_datagram(
            &mut self,
            _: Instant,
            _: SocketAddr,
            _: SocketAddr,
            _: Option<crate::Ecn>,
            _: &mut [u8],
        ) {
        }
        fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
            if std::mem::replace(&mut self.2, false) {
                Some(Datagram::new(self.0, self.1, vec![0; 8]))
            } else {
                None
            }
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }
    let kicker = addr(3, 3);
    sim.add_node(kicker, Kick(a, b, true));
    // The kick "from a" reaches b; then a and b echo each other forever.
    sim.route(a, b, &[]).expect("route");
    sim.route(b, a, &[]).expect("route");
    assert_eq!(sim.run_until(Instant::from_millis(1)), RunOutcome::Stalled);
    assert_eq!(sim.now(), Instant::ZERO);
}

#[test]
fn simultaneous_arrivals_keep_send_order() {
    let (a, b) = (addr(1, 1), addr(2, 2));
    struct Burst(SocketAddr, SocketAddr, u32);
    impl Node for Burst {
        fn handle_datagram(
            &mut self,
            _: Instant,
            _: SocketAddr,
            _: SocketAddr,
            _: Option<crate::Ecn>,
            _: &mut [u8],
        ) {
        }
        fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
            if self.2 == 0 {
                return None;
            }
            self.2 -= 1;
            Some(Datagram::new(self.0, self.1, self.2.to_be_bytes().to_vec()))
        }
        fn poll_timeout(&mut self) -> Option<Instant> {
            None
        }
        fn handle_timeout(&mut self, _: Instant) {}
    }
    let mut sim = Simulator::new();
    sim.add_node(a, Burst(a, b, 100));
    let echo = sim.add_node(b, Echo::default());
    let l = sim.add_link(
        LinkConfig::new(Capacity::Unlimited, Duration::from_millis(5)),
        0,
    );
    sim.route(a, b, &[l]).expect("route");
    sim.run_until(Instant::from_millis(100));
    let seqs: Vec<u32> = sim
        .node::<Echo>(echo)
        .expect("echo")
        .log
        .iter()
        .map(|e| e.2)
        .collect();
    assert_eq!(seqs, (0..100).rev().collect::<Vec<_>>());
}

#[test]
fn the_authors_channel_with_instant_acks_returns_at_the_arrival_instant() {
    // RCP's Table I channel (slot rate, sojourn, no propagation delay) one
    // way, the instant direction back: an echo reaches the pinger the
    // instant its ping left the channel, so the round trip is the one-way
    // delay (what the authors' simulator, whose ACKs arrive in the slot
    // the data did, shows its senders).
    let mut spec = crate::LinkSpec {
        slot_rate: Some(3),
        sojourn: 100.0,
        rtt: 0.0,
        loss: Some(0.0),
        queue: Some(300),
        ..crate::LinkSpec::default()
    };
    spec.down.instant = true;
    let (up_cfg, down_cfg) = spec.configs().expect("valid spec");
    let (a, b) = (addr(1, 1000), addr(2, 443));
    let mut sim = Simulator::new();
    let pinger = sim.add_node(a, Pinger::new(a, b, Duration::from_millis(10), 5));
    let echo = sim.add_node(
        b,
        Echo {
            echo: true,
            ..Echo::default()
        },
    );
    let up = sim.add_link(up_cfg, 1);
    let down = sim.add_link(down_cfg, 2);
    sim.route(a, b, &[up]).expect("valid route");
    sim.route(b, a, &[down]).expect("valid route");
    assert_eq!(
        sim.run_until(Instant::from_millis(5_000)),
        RunOutcome::Finished
    );
    let p = sim.node::<Pinger>(pinger).expect("pinger");
    let e = sim.node::<Echo>(echo).expect("echo");
    assert_eq!(p.log.len(), 5);
    for (i, &(pong_at, seq)) in p.log.iter().enumerate() {
        let sent = p.sent_at[seq as usize];
        // Sent on a slot boundary, so it joins the next slot: 1 + 100.
        assert_eq!(
            pong_at.saturating_duration_since(sent),
            Duration::from_millis(101),
            "ping {seq}"
        );
        assert_eq!(e.log[i].0, pong_at, "the echo left the instant it arrived");
    }
}

/// The run ends when every node present is finished: the counts the
/// simulator keeps follow nodes that finish, are taken out or are added.
#[test]
fn finishes_when_every_present_node_is() {
    let (a, b) = (addr(1, 1), addr(2, 2));
    let mut sim = Simulator::new();
    assert_eq!(sim.run_until(Instant::from_millis(10)), RunOutcome::Idle);
    // The pinger sends forever within this run: never finished.
    let pinger = sim.add_node(a, Pinger::new(a, b, Duration::from_millis(1), u32::MAX));
    let echo = sim.add_node(b, Echo::default());
    sim.route(a, b, &[]).expect("route");
    assert_eq!(
        sim.run_until(Instant::from_millis(20)),
        RunOutcome::DeadlineReached
    );
    // Without it, the echo (always finished) ends the run at once.
    assert!(sim.take_node::<Pinger>(pinger).is_some());
    assert_eq!(
        sim.run_until(Instant::from_millis(30)),
        RunOutcome::Finished
    );
    let pings = sim.node::<Echo>(echo).expect("echo").log.len();
    assert!(pings >= 20, "{pings} pings in 20 ms");
    // A new pinger with two pings runs, then lingers a second and finishes.
    let late = sim.add_node(a, Pinger::new(a, b, Duration::from_millis(1), 2));
    assert_eq!(
        sim.run_until(Instant::from_millis(500)),
        RunOutcome::DeadlineReached
    );
    assert_eq!(
        sim.run_until(Instant::from_millis(5_000)),
        RunOutcome::Finished
    );
    assert_eq!(sim.node::<Echo>(echo).expect("echo").log.len(), pings + 2);
    // Taking every node out leaves nothing to finish.
    assert!(sim.take_node::<Pinger>(late).is_some());
    assert!(sim.take_node::<Echo>(echo).is_some());
    assert_eq!(sim.run_until(Instant::from_millis(6_000)), RunOutcome::Idle);
}
