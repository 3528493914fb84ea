//! CUBIC (RFC 9438), adapted to QUIC's byte-counted windows.
//!
//! Slow start, recovery periods, persistent congestion and the app-limited
//! rule are as in [`super::NewReno`] (RFC 9002 §7). In congestion avoidance
//! the window follows the cubic function of the time since the epoch started
//! (RFC 9438 §4.2), never less than the Reno-friendly estimate `W_est`
//! (§4.3); a congestion event multiplies it by β = 0.7 (§4.6), with fast
//! convergence (§4.7).
//!
//! Choices the RFC leaves open, and ours:
//! - The window is reduced from `cwnd`, not from the bytes in flight (§4.6
//!   allows either; the transport's flight size is not passed to
//!   [`Controller::on_congestion_event`]).
//! - The congestion-avoidance epoch starts at the first acknowledgment that
//!   ends the recovery period (the start of the congestion avoidance stage,
//!   §4.2).
//! - In the Reno-friendly region the window is raised to `W_est` but never
//!   lowered to it: lowering the window without a congestion signal would be
//!   a reduction the RFC does not ask for.
//! - While the sender is application-limited the window does not grow (§5.8)
//!   and the epoch is shifted forward by the time spent limited, so the cubic
//!   curve resumes where it stopped instead of jumping ahead.
//!
//! Window arithmetic is `f64` (bytes); the public window is its integer part.
//! Time differences saturate at zero, so `now` going backwards only pauses
//! the curve.

use wire::time::Instant;

use super::{initial_window, minimum_window, Controller};
use crate::rtt::RttEstimator;

/// Multiplicative decrease factor β_cubic (RFC 9438 §4.6).
pub const BETA: f64 = 0.7;
/// The cubic scaling constant C, in segments per second cubed (RFC 9438 §5.1).
pub const C: f64 = 0.4;
/// Additive increase factor of the Reno-friendly estimate while below `W_max`:
/// `3 * (1 - β) / (1 + β)` (RFC 9438 §4.3).
const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA) / (1.0 + BETA);

/// The RFC 9438 CUBIC congestion controller.
#[derive(Clone, Debug)]
pub struct Cubic {
    /// Maximum datagram size (segment size), bytes.
    max_datagram_size: u64,
    /// Congestion window, bytes.
    cwnd: f64,
    /// Slow-start threshold, bytes; `u64::MAX` until the first reduction.
    ssthresh: u64,
    /// Start of the current recovery period (RFC 9002 §7.3.2), if any.
    recovery_start: Option<Instant>,
    /// `W_max`: the window just before the last reduction, after fast
    /// convergence (RFC 9438 §4.6–§4.7), bytes.
    w_max: f64,
    /// `K`: seconds the cubic function takes to climb back to `W_max`.
    k: f64,
    /// `t_epoch`: start of the current congestion avoidance stage, or `None`
    /// until the next acknowledgment in congestion avoidance starts one.
    epoch_start: Option<Instant>,
    /// `W_est`: the Reno-friendly window estimate (RFC 9438 §4.3), bytes.
    w_est: f64,
    /// When the sender became application-limited during the current epoch.
    app_limited_since: Option<Instant>,
}

impl Cubic {
    /// A controller at the initial window (RFC 9002 §7.2).
    pub fn new(max_datagram_size: u64) -> Self {
        Cubic {
            max_datagram_size,
            cwnd: initial_window(max_datagram_size) as f64,
            ssthresh: u64::MAX,
            recovery_start: None,
            w_max: 0.0,
            k: 0.0,
            epoch_start: None,
            w_est: 0.0,
            app_limited_since: None,
        }
    }

    /// The segment size as a float, never zero.
    fn mds(&self) -> f64 {
        self.max_datagram_size.max(1) as f64
    }

    fn min_window(&self) -> f64 {
        minimum_window(self.max_datagram_size) as f64
    }

    fn in_recovery(&self, sent_time: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent_time <= start)
    }

    /// `W_cubic(t) = C * (t - K)^3 + W_max` (RFC 9438 §4.2), in bytes, for
    /// `t` seconds after the epoch start.
    fn w_cubic(&self, t: f64) -> f64 {
        let d = t - self.k;
        C * d * d * d * self.mds() + self.w_max
    }

    /// Starts a congestion avoidance epoch at `now` (RFC 9438 §4.2): computes
    /// `K` from `W_max` and the current window (`cwnd_epoch`), and resets
    /// `W_est` to it (§4.3).
    fn start_epoch(&mut self, now: Instant) {
        self.epoch_start = Some(now);
        self.app_limited_since = None;
        if self.cwnd < self.w_max {
            // K = cubic_root((W_max - cwnd_epoch) / C), in segments.
            self.k = ((self.w_max - self.cwnd) / self.mds() / C).cbrt();
        } else {
            // Slow start ended above the old maximum: the plateau is here.
            self.k = 0.0;
            self.w_max = self.cwnd;
        }
        self.w_est = self.cwnd;
    }

    /// One acknowledgment of `bytes` in congestion avoidance (RFC 9438
    /// §4.2–§4.5).
    fn congestion_avoidance(&mut self, now: Instant, bytes: u64, rtt: &RttEstimator) {
        let epoch = match self.epoch_start {
            Some(e) => e,
            None => {
                self.start_epoch(now);
                now
            }
        };
        let t = now.saturating_duration_since(epoch).as_secs_f64();
        let mds = self.mds();
        let acked = bytes as f64;

        // RFC 9438 §4.3: W_est grows by alpha_cubic segments per window
        // acknowledged; alpha becomes 1 once W_est reaches W_max.
        let alpha = if self.w_est >= self.w_max {
            1.0
        } else {
            ALPHA_CUBIC
        };
        self.w_est += alpha * acked * mds / self.cwnd;

        if self.w_cubic(t) < self.w_est {
            // RFC 9438 §4.3: Reno-friendly region.
            self.cwnd = self.cwnd.max(self.w_est);
        } else {
            // RFC 9438 §4.4–§4.5: aim at W_cubic one RTT ahead, clamped to
            // [cwnd, 1.5 cwnd]; close (target - cwnd) / cwnd per byte acked.
            let horizon = t + rtt.smoothed().as_secs_f64();
            let target = self.w_cubic(horizon).clamp(self.cwnd, 1.5 * self.cwnd);
            self.cwnd += (target - self.cwnd) * acked / self.cwnd;
        }
    }

    /// The current `K`, seconds (for tests and stats).
    pub fn k(&self) -> f64 {
        self.k
    }

    /// The current `W_max`, bytes (for tests and stats).
    pub fn w_max(&self) -> u64 {
        self.w_max as u64
    }
}

impl Controller for Cubic {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {}

    fn on_ack(
        &mut self,
        now: Instant,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    ) {
        // RFC 9002 §7.3.2: no growth for packets sent before recovery began.
        if self.in_recovery(sent_time) {
            return;
        }
        let in_slow_start = self.in_slow_start();
        if app_limited {
            // RFC 9438 §5.8 / RFC 9002 §7.8: no growth; remember when the
            // limited period began so the epoch can be shifted past it.
            if !in_slow_start && self.epoch_start.is_some() && self.app_limited_since.is_none() {
                self.app_limited_since = Some(now);
            }
            return;
        }
        if let Some(since) = self.app_limited_since.take() {
            if let Some(epoch) = self.epoch_start {
                self.epoch_start = Some(epoch + now.saturating_duration_since(since));
            }
        }
        if in_slow_start {
            // RFC 9438 §4.10 / RFC 9002 §7.3.1: standard slow start.
            self.cwnd += bytes as f64;
        } else {
            self.congestion_avoidance(now, bytes, rtt);
        }
        if !self.cwnd.is_finite() {
            // Unreachable with finite inputs; keep the window usable anyway.
            self.cwnd = self.min_window();
        }
    }

    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent_time: Instant,
        _lost_bytes: u64,
        persistent: bool,
        _rtt: &RttEstimator,
    ) {
        if !self.in_recovery(sent_time) {
            self.recovery_start = Some(now);
            // RFC 9438 §4.7: fast convergence. A flow whose window did not
            // get back to the previous maximum releases bandwidth faster.
            self.w_max = if self.cwnd < self.w_max {
                self.cwnd * (1.0 + BETA) / 2.0
            } else {
                self.cwnd
            };
            // RFC 9438 §4.6: multiplicative decrease, floored at RFC 9002's
            // minimum window.
            let reduced = (self.cwnd * BETA).round().max(self.min_window());
            self.ssthresh = reduced as u64;
            self.cwnd = reduced;
            self.epoch_start = None;
            self.app_limited_since = None;
        }
        if persistent {
            // RFC 9002 §7.6.2: collapse to the minimum window; RFC 9438 §4.8
            // then restarts slow start up to ssthresh.
            self.cwnd = self.min_window();
            self.recovery_start = None;
            self.epoch_start = None;
            self.app_limited_since = None;
        }
    }

    fn on_mtu_update(&mut self, max_datagram_size: u64) {
        self.max_datagram_size = max_datagram_size;
        self.cwnd = self.cwnd.max(self.min_window());
        if self.ssthresh != u64::MAX {
            self.ssthresh = self.ssthresh.max(minimum_window(max_datagram_size));
        }
    }

    fn window(&self) -> u64 {
        // `as` saturates for out-of-range floats; the floor keeps the
        // minimum-window guarantee even at u64::MAX-sized MTUs.
        (self.cwnd as u64).max(minimum_window(self.max_datagram_size))
    }

    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    fn name(&self) -> &'static str {
        "cubic"
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh as f64
    }

    fn ssthresh(&self) -> Option<u64> {
        (self.ssthresh != u64::MAX).then_some(self.ssthresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::time::Duration;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    const MDS: u64 = 1200;
    const RTT_MS: u64 = 100;

    fn rtt(ms: u64) -> RttEstimator {
        let mut r = RttEstimator::new(Duration::from_millis(333));
        r.update(
            Duration::ZERO,
            Duration::from_millis(ms),
            Duration::from_millis(25),
            true,
        );
        r
    }

    /// A controller that just lost a packet at window `w_segments`, at time
    /// `t0`; returns it with the first post-recovery send time.
    fn after_loss(w_segments: f64, t0: Instant) -> Cubic {
        let mut c = Cubic::new(MDS);
        c.cwnd = w_segments * MDS as f64;
        c.on_congestion_event(t0, t0 - Duration::from_millis(1), MDS, false, &rtt(RTT_MS));
        c
    }

    /// Runs rounds of one window each: at the start of a round a full window
    /// is sent, its ACKs arrive evenly spread over the next RTT. Calls
    /// `check(now, &cubic)` after every ACK. Returns the final time.
    fn run_rounds(
        c: &mut Cubic,
        mut now: Instant,
        rounds: usize,
        rtt_ms: u64,
        app_limited: bool,
        mut check: impl FnMut(Instant, &Cubic),
    ) -> Instant {
        let r = rtt(rtt_ms);
        let round = Duration::from_millis(rtt_ms);
        for _ in 0..rounds {
            let sent = now;
            let n = (c.window() / MDS).max(1);
            for i in 0..n {
                let at = now + round * (i as u32 + 1) / (n as u32);
                c.on_ack(at, sent, MDS, app_limited, &r);
                check(at, c);
            }
            now += round;
        }
        now
    }

    #[test]
    fn slow_start_doubles_and_loss_multiplies_by_beta_once() {
        let mut c = Cubic::new(MDS);
        let now = run_rounds(&mut c, Instant::ZERO, 3, RTT_MS, false, |_, _| {});
        assert_eq!(c.window(), 96_000);
        assert!(c.in_slow_start());
        c.on_congestion_event(
            now,
            now - Duration::from_millis(1),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        assert_eq!(c.window(), 67_200);
        assert_eq!(c.ssthresh(), Some(67_200));
        assert_eq!(c.w_max(), 96_000);
        // Same recovery period: ignored.
        c.on_congestion_event(
            now + Duration::from_millis(5),
            now,
            MDS,
            false,
            &rtt(RTT_MS),
        );
        assert_eq!(c.window(), 67_200);
        assert!(!c.in_slow_start());
    }

    #[test]
    fn k_follows_rfc_9438_formula() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        assert_eq!(c.window(), 84_000); // 0.7 * 100 segments
                                        // The epoch starts with the first ACK after recovery.
        c.on_ack(
            t0 + Duration::from_millis(101),
            t0 + Duration::from_millis(1),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        let expected_k = (100.0f64 * (1.0 - BETA) / C).cbrt(); // cbrt(75)
        assert!((c.k() - expected_k).abs() < 1e-9, "K = {}", c.k());
        assert!((c.k() - 4.2172).abs() < 1e-3);
    }

    #[test]
    fn window_follows_the_cubic_curve() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        let start = t0 + Duration::from_millis(1);
        let k = (75.0f64).cbrt();
        let w_max = 100.0;
        let checkpoints = [1.0, 2.0, 3.0, k, 5.0, 6.0];
        let mut next = 0;
        let mut epoch = None;
        run_rounds(&mut c, start, 70, RTT_MS, false, |now, c| {
            let e = *epoch.get_or_insert(c.epoch_start.expect("epoch started by first ACK"));
            let t = secs(now - e);
            if next < checkpoints.len() && t >= checkpoints[next] {
                let expected = C * (t - k).powi(3) + w_max; // segments
                let got = c.window() as f64 / MDS as f64;
                let err = (got - expected).abs() / expected;
                assert!(
                    err < 0.02,
                    "t={t:.2}s: cwnd {got:.2} segments, W_cubic {expected:.2}"
                );
                next += 1;
            }
        });
        assert_eq!(next, checkpoints.len(), "all checkpoints reached");
        // Still growing past W_max in the convex region.
        assert!(c.window() > 100 * MDS);
    }

    #[test]
    fn reno_friendly_region_on_short_rtt() {
        // With a 1 ms RTT the cubic curve is nearly flat over 50 RTTs, while
        // W_est grows by alpha_cubic segments per RTT (RFC 9438 §4.3).
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        run_rounds(
            &mut c,
            t0 + Duration::from_millis(1),
            50,
            1,
            false,
            |_, _| {},
        );
        let expected = 70.0 + ALPHA_CUBIC * 50.0;
        let got = c.window() as f64 / MDS as f64;
        assert!(
            (got - expected).abs() / expected < 0.02,
            "cwnd {got:.2}, W_est {expected:.2}"
        );
        // Above W_max, W_est grows one segment per RTT, like Reno.
        let before = c.window() as f64 / MDS as f64;
        run_rounds(
            &mut c,
            t0 + Duration::from_millis(200),
            40,
            1,
            false,
            |_, _| {},
        );
        let after = c.window() as f64 / MDS as f64;
        let expected_gain = {
            // remaining below W_max at alpha_cubic, the rest at 1 per RTT
            let below = ((100.0 - before) / ALPHA_CUBIC).clamp(0.0, 40.0);
            (100.0 - before).clamp(0.0, ALPHA_CUBIC * 40.0) + (40.0 - below)
        };
        let gain = after - before;
        assert!(
            (gain - expected_gain).abs() < 1.5,
            "gain {gain:.2}, expected {expected_gain:.2}"
        );
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        assert_eq!(c.w_max(), 100 * MDS);
        // A second loss (new recovery period) before regaining W_max.
        let t1 = t0 + Duration::from_millis(500);
        c.on_congestion_event(
            t1,
            t0 + Duration::from_millis(100),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        // W_max = 70 * (1 + 0.7) / 2 = 59.5 segments; cwnd = 49 segments.
        assert!(c.w_max().abs_diff(71_400) <= 1, "W_max {}", c.w_max());
        assert_eq!(c.window(), 49 * MDS);
        c.on_ack(
            t1 + Duration::from_millis(100),
            t1 + Duration::from_millis(1),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        let expected_k = ((59.5f64 - 49.0) / C).cbrt();
        assert!((c.k() - expected_k).abs() < 1e-9);
        // A loss above W_max sets W_max to the window without reduction.
        let mut d = after_loss(100.0, t0);
        d.cwnd = 120.0 * MDS as f64;
        d.on_congestion_event(
            t1,
            t0 + Duration::from_millis(100),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        assert_eq!(d.w_max(), 120 * MDS);
    }

    #[test]
    fn persistent_congestion_collapses_and_restarts_slow_start() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        c.on_congestion_event(t0 + Duration::from_secs(3), t0, MDS, true, &rtt(RTT_MS));
        assert_eq!(c.window(), 2 * MDS);
        assert!(c.in_slow_start());
        run_rounds(
            &mut c,
            t0 + Duration::from_secs(4),
            1,
            RTT_MS,
            false,
            |_, _| {},
        );
        assert_eq!(c.window(), 4 * MDS);
    }

    #[test]
    fn no_growth_when_app_limited_and_curve_resumes() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        let now = run_rounds(
            &mut c,
            t0 + Duration::from_millis(1),
            5,
            RTT_MS,
            false,
            |_, _| {},
        );
        let w = c.window();
        let epoch = c.epoch_start.expect("epoch running");
        // Ten seconds application-limited: no growth at all.
        let now = run_rounds(&mut c, now, 100, RTT_MS, true, |_, c| {
            assert_eq!(c.window(), w)
        });
        // Afterwards the epoch was shifted by the limited time, so the window
        // grows by a small step, not by ten seconds' worth of curve.
        run_rounds(&mut c, now, 1, RTT_MS, false, |_, _| {});
        let shifted = c.epoch_start.expect("epoch running");
        assert!(
            secs(shifted - epoch) > 9.8,
            "epoch shifted by {:?}",
            shifted - epoch
        );
        assert!(
            c.window() < w + 3 * MDS,
            "window jumped from {w} to {}",
            c.window()
        );
    }

    #[test]
    fn time_going_backwards_does_not_panic_or_shrink() {
        let t0 = Instant::from_millis(10_000);
        let mut c = after_loss(100.0, t0);
        c.on_ack(
            t0 + Duration::from_secs(1),
            t0 + Duration::from_millis(2),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        let w = c.window();
        c.on_ack(t0, t0 + Duration::from_millis(2), MDS, false, &rtt(RTT_MS));
        c.on_ack(
            Instant::ZERO,
            t0 + Duration::from_millis(2),
            MDS,
            false,
            &rtt(RTT_MS),
        );
        assert!(c.window() >= w);
    }
}
