//! DES throughput: datagrams per second of wall time through one link.
//!
//! `cargo bench -p artq-netem --bench des`. Not a criterion bench (no extra
//! dependency): one timed run per configuration, printed. The target is above
//! one million datagrams per second for the DES with a trace link.
#![allow(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall time; the simulation itself reads no clock"
)]

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use netem::link::Datagram;
use netem::{Capacity, LinkConfig, LossModel, Node, QueueLimit, Simulator, Trace};
use wire::time::{Duration, Instant};

/// Sends `left` MTU-sized datagrams, one every `gap`.
struct Source {
    me: SocketAddr,
    to: SocketAddr,
    gap: Duration,
    next: Instant,
    left: u64,
}

impl Node for Source {
    fn handle_datagram(
        &mut self,
        _: Instant,
        _: SocketAddr,
        _: SocketAddr,
        _: Option<netem::Ecn>,
        _: &mut [u8],
    ) {
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        if self.left == 0 || now < self.next {
            return None;
        }
        self.left -= 1;
        self.next += self.gap;
        Some(Datagram::new(self.me, self.to, vec![0; 1200]))
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (self.left > 0).then_some(self.next)
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_finished(&self) -> bool {
        self.left == 0
    }
}

/// Counts what arrives.
struct Sink(u64);

impl Node for Sink {
    fn handle_datagram(
        &mut self,
        _: Instant,
        _: SocketAddr,
        _: SocketAddr,
        _: Option<netem::Ecn>,
        payload: &mut [u8],
    ) {
        self.0 += black_box(payload.len()) as u64;
    }
    fn poll_transmit(&mut self, _: Instant) -> Option<Datagram> {
        None
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        None
    }
    fn handle_timeout(&mut self, _: Instant) {}
    fn is_finished(&self) -> bool {
        true
    }
}

fn run(name: &str, capacity: Capacity, packets: u64) {
    let a = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
    let b = SocketAddr::from((Ipv4Addr::LOCALHOST, 2));
    let mut sim = Simulator::new();
    // 1 packet per 10 us: 980 Mbit/s offered.
    sim.add_node(
        a,
        Source {
            me: a,
            to: b,
            gap: Duration::from_micros(10),
            next: Instant::ZERO,
            left: packets,
        },
    );
    let sink = sim.add_node(b, Sink(0));
    let link = sim.add_link(
        LinkConfig::new(capacity, Duration::from_millis(20))
            .with_queue(QueueLimit::Packets(1000))
            .with_loss(LossModel::Bernoulli { p: 0.01 }),
        1,
    );
    sim.route(a, b, &[link]).expect("route");
    let started = std::time::Instant::now();
    sim.run_until(Instant::MAX);
    let secs = started.elapsed().as_secs_f64();
    let stats = sim.link_stats(link).expect("link");
    let bytes = sim.node::<Sink>(sink).map_or(0, |s| s.0);
    println!(
        "{name:>24}: {packets} datagrams in {secs:.3} s = {:.2} M datagrams/s ({} delivered, {bytes} bytes)",
        packets as f64 / secs / 1e6,
        stats.delivered,
    );
}

fn main() {
    let n = 2_000_000;
    run("unlimited", Capacity::Unlimited, n);
    run(
        "constant 1 Gbit/s",
        Capacity::Constant {
            bits_per_sec: 1_000_000_000,
        },
        n,
    );
    run(
        "trace 1 Gbit/s",
        Capacity::Trace(Arc::new(Trace::constant(1_000_000_000))),
        n,
    );
    run(
        "trace 100 Mbit/s (drops)",
        Capacity::Trace(Arc::new(Trace::constant(100_000_000))),
        n,
    );
}
