//! Tests of BBR: the path model end to end, then each rule alone.

use super::*;
use crate::congestion::{DeliveryRateEstimator, PacketRateState};
use crate::pacing::Pacer;
use std::collections::VecDeque;

const MDS: u64 = 1200;

/// A bulk sender over one bottleneck: FIFO link of `link_rate` bytes/s
/// with an unbounded queue, `one_way` propagation each way, one ACK frame
/// per packet, no loss. Virtual time only.
struct PathSim {
    now: Instant,
    bbr: Bbr,
    rtt: RttEstimator,
    rate: DeliveryRateEstimator,
    pacer: Pacer,
    link_rate: u64,
    one_way: Duration,
    link_free: Instant,
    /// (ACK arrival time, send time, rate state), in send order.
    outstanding: VecDeque<(Instant, Instant, PacketRateState)>,
    bytes_in_flight: u64,
    delivered: u64,
}

impl PathSim {
    fn new(link_rate: u64, one_way: Duration, seed: u64) -> Self {
        let now = Instant::from_millis(1_000);
        PathSim {
            now,
            bbr: Bbr::new(now, MDS, seed),
            rtt: RttEstimator::new(Duration::from_millis(333)),
            rate: DeliveryRateEstimator::default(),
            pacer: Pacer::new(now, MDS),
            link_rate,
            one_way,
            link_free: now,
            outstanding: VecDeque::new(),
            bytes_in_flight: 0,
            delivered: 0,
        }
    }

    fn send(&mut self) {
        let st = self.rate.on_packet_sent(self.now, self.bytes_in_flight);
        self.bytes_in_flight += MDS;
        self.bbr.on_packet_sent(self.now, MDS, self.bytes_in_flight);
        self.pacer.on_sent(self.now, MDS);
        let serialization = Duration::from_nanos(MDS * 1_000_000_000 / self.link_rate);
        let departure = self.now.max(self.link_free) + serialization;
        self.link_free = departure;
        let ack_at = departure + self.one_way * 2;
        self.outstanding.push_back((ack_at, self.now, st));
    }

    fn ack(&mut self) {
        let Some((at, sent, st)) = self.outstanding.pop_front() else {
            return;
        };
        self.rtt
            .update(Duration::ZERO, at - sent, Duration::ZERO, true);
        self.rate.on_packet_acked(at, &st, sent, MDS);
        self.bbr.on_ack(at, sent, MDS, false, &self.rtt);
        self.bytes_in_flight -= MDS;
        self.delivered += MDS;
        let rs = self.rate.take_sample(at, self.rtt.min());
        self.bbr
            .on_end_acks(at, self.bytes_in_flight, false, rs.as_ref(), &self.rtt);
    }

    /// Runs until `end`, calling `observe` after every ACK.
    fn run_until(&mut self, end: Instant, mut observe: impl FnMut(&Bbr, Instant)) {
        while self.now < end {
            let next_ack = self.outstanding.front().map(|&(at, _, _)| at);
            let next_send = if self.bytes_in_flight + MDS <= self.bbr.window() {
                let rate = self.bbr.pacing_rate().expect("BBR always paces");
                Some(self.pacer.delay(self.now, MDS, rate).unwrap_or(self.now))
            } else {
                None
            };
            match (next_send, next_ack) {
                (Some(s), a) if a.is_none_or(|a| s < a) => {
                    self.now = s;
                    if self
                        .pacer
                        .delay(s, MDS, self.bbr.pacing_rate().unwrap_or(u64::MAX))
                        .is_none()
                    {
                        self.send();
                    }
                }
                (_, Some(a)) => {
                    self.now = a;
                    self.ack();
                    observe(&self.bbr, a);
                }
                (_, None) => unreachable!("nothing in flight and window full"),
            }
        }
    }
}

const LINK_RATE: u64 = 1_250_000; // 10 Mbit/s

#[test]
fn reaches_probe_bw_with_the_path_model() {
    let mut sim = PathSim::new(LINK_RATE, Duration::from_millis(20), 7);
    let mut modes = vec![BbrMode::Startup];
    let start = sim.now;
    let mut delivered_at_4s = 0;
    sim.run_until(start + Duration::from_secs(4), |b, _| {
        if modes.last() != Some(&b.mode()) {
            modes.push(b.mode());
        }
    });
    delivered_at_4s += sim.delivered;
    sim.run_until(start + Duration::from_secs(8), |b, _| {
        if modes.last() != Some(&b.mode()) {
            modes.push(b.mode());
        }
    });
    assert_eq!(modes, [BbrMode::Startup, BbrMode::Drain, BbrMode::ProbeBw]);
    let b = &sim.bbr;
    assert_eq!(b.mode(), BbrMode::ProbeBw);
    let bw_err = (b.btl_bw() as f64 - LINK_RATE as f64).abs() / LINK_RATE as f64;
    assert!(bw_err < 0.01, "btl_bw {} vs link {LINK_RATE}", b.btl_bw());
    // RTprop = 40 ms propagation + one serialization (0.96 ms).
    assert_eq!(b.rtprop(), Some(Duration::from_micros(40_960)));
    let bdp = LINK_RATE as f64 * 0.040_96;
    let expected_cwnd = 2.0 * bdp + 3.0 * MDS as f64;
    let cwnd_err = (b.window() as f64 - expected_cwnd).abs() / expected_cwnd;
    assert!(
        cwnd_err < 0.05,
        "cwnd {} vs 2*BDP+3*MDS {expected_cwnd:.0}",
        b.window()
    );
    // The link stayed busy: goodput over the last 4 s is the link rate.
    let goodput = (sim.delivered - delivered_at_4s) as f64 / 4.0;
    assert!(goodput > 0.97 * LINK_RATE as f64, "goodput {goodput:.0}");
    // Pacing follows the ProbeBW gain.
    let rate = b.pacing_rate().expect("paced") as f64;
    assert!((rate / b.btl_bw() as f64 - b.pacing_gain).abs() < 1e-3);
    assert!(b.round_count() > 100);
}

#[test]
fn probe_rtt_after_ten_seconds_without_a_lower_rtt() {
    let mut sim = PathSim::new(LINK_RATE, Duration::from_millis(20), 3);
    let start = sim.now;
    sim.run_until(start + Duration::from_secs(3), |_, _| {});
    assert_eq!(sim.bbr.mode(), BbrMode::ProbeBw);
    // The route gets longer: RTprop samples never go back to 41 ms.
    sim.one_way = Duration::from_millis(25);
    let mut probe_rtt: Option<(Instant, Instant)> = None;
    sim.run_until(start + Duration::from_secs(16), |b, now| {
        if b.mode() == BbrMode::ProbeRtt {
            assert!(
                b.window() <= MIN_PIPE_CWND_PACKETS * MDS,
                "window {}",
                b.window()
            );
            let span = probe_rtt.get_or_insert((now, now));
            span.1 = now;
        }
    });
    let (begin, end) = probe_rtt.expect("ProbeRTT happened");
    // At most 10 s after the last RTprop refresh (before the route change).
    assert!(
        begin > start + Duration::from_secs(10) && begin < start + Duration::from_secs(13),
        "{begin:?}"
    );
    let span = end - begin;
    assert!(
        span >= PROBE_RTT_DURATION && span < Duration::from_millis(500),
        "ProbeRTT lasted {span:?}"
    );
    assert_eq!(sim.bbr.mode(), BbrMode::ProbeBw);
    // The new propagation delay was learnt.
    let rtprop = sim.bbr.rtprop().expect("measured");
    assert!(
        rtprop >= Duration::from_micros(50_960) && rtprop < Duration::from_millis(52),
        "{rtprop:?}"
    );
}

#[test]
fn simulation_is_deterministic_per_seed() {
    let trace = |seed| {
        let mut sim = PathSim::new(LINK_RATE, Duration::from_millis(10), seed);
        let mut windows = Vec::new();
        let end = sim.now + Duration::from_secs(2);
        sim.run_until(end, |b, _| windows.push((b.window(), b.pacing_rate())));
        windows
    };
    assert_eq!(trace(1), trace(1));
}

#[test]
fn probe_bw_start_phase_is_random_but_never_the_drain_phase() {
    let mut seen = [false; 8];
    for seed in 0..200 {
        let mut b = Bbr::new(Instant::ZERO, MDS, seed);
        b.enter_probe_bw(Instant::ZERO);
        assert_ne!(b.cycle_index, 1, "seed {seed} started in the 0.75 phase");
        assert_eq!(b.pacing_gain, PACING_GAIN_CYCLE[b.cycle_index]);
        seen[b.cycle_index] = true;
        // Same seed, same phase.
        let mut again = Bbr::new(Instant::ZERO, MDS, seed);
        again.enter_probe_bw(Instant::ZERO);
        assert_eq!(again.cycle_index, b.cycle_index);
    }
    assert_eq!(seen, [true, false, true, true, true, true, true, true]);
}

/// One rate sample of `rate` bytes/s over `rtt_ms`, a round of its own
/// (its packet left when everything before it was delivered).
fn sample(
    bbr: &mut Bbr,
    rtt: &mut RttEstimator,
    now: Instant,
    delivered: &mut u64,
    rate: u64,
    app_limited: bool,
    rtt_ms: u64,
) {
    let r = Duration::from_millis(rtt_ms);
    rtt.update(Duration::ZERO, r, Duration::ZERO, true);
    let rs = RateSample {
        delivery_rate: rate,
        interval: r,
        delivered: 4 * MDS,
        prior_delivered: *delivered,
        is_app_limited: app_limited,
        rtt: r,
    };
    *delivered += 4 * MDS;
    bbr.on_end_acks(now, MDS, app_limited, Some(&rs), rtt);
}

#[test]
fn probe_rtt_samples_do_not_replace_a_stale_bandwidth() {
    let start = Instant::from_millis(1_000);
    let mut bbr = Bbr::new(start, MDS, 1);
    let mut rtt = RttEstimator::new(Duration::from_millis(333));
    let mut delivered = 0;
    let at = |ms: u64| start + Duration::from_millis(ms);
    // The path's rate, measured.
    for i in 0..10 {
        sample(
            &mut bbr,
            &mut rtt,
            at(100 * i),
            &mut delivered,
            12_500_000,
            false,
            100,
        );
    }
    assert_eq!(bbr.btl_bw(), 12_500_000);
    // Flow control limits the sender for 20 rounds: every sample is
    // application-limited and lower, so none refreshes the maximum.
    for i in 10..30 {
        sample(
            &mut bbr,
            &mut rtt,
            at(100 * i),
            &mut delivered,
            6_000_000,
            true,
            101,
        );
    }
    assert_eq!(bbr.btl_bw(), 12_500_000);
    // RTprop expires: ProbeRTT, 4 packets in flight.
    sample(
        &mut bbr,
        &mut rtt,
        at(11_500),
        &mut delivered,
        6_000_000,
        true,
        101,
    );
    assert_eq!(bbr.mode(), BbrMode::ProbeRtt);
    // Its samples are window-limited, not application-limited, and
    // tiny: they measure the clamp and must not become BtlBw.
    let mut t = 11_500;
    while bbr.mode() == BbrMode::ProbeRtt {
        t += 100;
        assert!(t < 13_000, "ProbeRTT ends");
        sample(
            &mut bbr,
            &mut rtt,
            at(t),
            &mut delivered,
            48_000,
            false,
            101,
        );
    }
    assert_eq!(bbr.btl_bw(), 12_500_000);
    assert!(bbr.pacing_rate().unwrap_or(0) >= 12_500_000 * 3 / 4);
    // A sample of a packet sent after ProbeRTT counts again.
    sample(
        &mut bbr,
        &mut rtt,
        at(t + 100),
        &mut delivered,
        20_000_000,
        false,
        100,
    );
    assert_eq!(bbr.btl_bw(), 20_000_000);
}

#[test]
fn loss_does_not_reduce_but_persistent_congestion_does() {
    let rtt = RttEstimator::new(Duration::from_millis(50));
    let mut b = Bbr::new(Instant::ZERO, MDS, 0);
    b.cwnd = 100 * MDS;
    b.on_congestion_event(
        Instant::from_millis(10),
        Instant::from_millis(5),
        5 * MDS,
        false,
        &rtt,
    );
    assert_eq!(b.window(), 100 * MDS);
    b.on_ecn_ce(Instant::from_millis(10), Instant::from_millis(5), &rtt);
    assert_eq!(b.window(), 100 * MDS);
    b.on_congestion_event(
        Instant::from_millis(10),
        Instant::from_millis(5),
        5 * MDS,
        true,
        &rtt,
    );
    assert_eq!(b.window(), 2 * MDS);
    // The next ACK restores BBR's 4-datagram floor.
    b.on_ack(
        Instant::from_millis(20),
        Instant::from_millis(11),
        MDS,
        false,
        &rtt,
    );
    b.on_end_acks(Instant::from_millis(20), 0, false, None, &rtt);
    assert!(b.window() >= MIN_PIPE_CWND_PACKETS * MDS);
}

#[test]
fn initial_pacing_rate_uses_the_first_rtt() {
    let mut b = Bbr::new(Instant::ZERO, MDS, 0);
    // Before any RTT: high gain * initial window per millisecond.
    assert_eq!(b.pacing_rate(), Some(rate_with_gain(12_000_000, HIGH_GAIN)));
    let mut rtt = RttEstimator::new(Duration::from_millis(333));
    rtt.update(
        Duration::ZERO,
        Duration::from_millis(100),
        Duration::ZERO,
        true,
    );
    b.on_end_acks(Instant::from_millis(100), 0, false, None, &rtt);
    // 2.885 * 12 000 B / 100 ms
    assert_eq!(b.pacing_rate(), Some(rate_with_gain(120_000, HIGH_GAIN)));
    assert!(b.in_slow_start());
    assert_eq!(b.name(), "bbr");
}
