//! NewReno, as QUIC specifies it (RFC 9002 §7 and Appendix B).
//!
//! Slow start grows the window by the bytes acknowledged; congestion avoidance
//! grows it by one maximum datagram per window acknowledged (accumulated in
//! `bytes_acked`, RFC 9002 §7.3.3); a loss or ECN-CE halves it once per
//! recovery period (§7.3.2); persistent congestion collapses it to the minimum
//! window (§7.6). Acknowledgments received while the sender is
//! application-limited do not grow it (§7.8).

use wire::time::Instant;

use super::{initial_window, minimum_window, Controller};
use crate::rtt::RttEstimator;

/// Window reduction on a congestion event (`kLossReductionFactor`,
/// RFC 9002 §7.2), as numerator / denominator.
const LOSS_REDUCTION: (u64, u64) = (1, 2);

/// The RFC 9002 NewReno congestion controller.
#[derive(Clone, Debug)]
pub struct NewReno {
    /// Maximum datagram size of the path, in bytes.
    max_datagram_size: u64,
    /// `congestion_window`, bytes.
    cwnd: u64,
    /// `ssthresh`, bytes; `u64::MAX` until the first congestion event.
    ssthresh: u64,
    /// Bytes acknowledged in congestion avoidance since the last increase.
    bytes_acked: u64,
    /// `congestion_recovery_start_time`; `None` when no recovery period
    /// applies (never entered, or reset by persistent congestion).
    recovery_start: Option<Instant>,
}

impl NewReno {
    /// A controller at the initial window for this maximum datagram size
    /// (RFC 9002 §7.2).
    pub fn new(max_datagram_size: u64) -> Self {
        NewReno {
            max_datagram_size,
            cwnd: initial_window(max_datagram_size),
            ssthresh: u64::MAX,
            bytes_acked: 0,
            recovery_start: None,
        }
    }

    /// Whether a packet sent at `sent_time` belongs to the current recovery
    /// period (RFC 9002 §B.4 `InCongestionRecovery`).
    fn in_recovery(&self, sent_time: Instant) -> bool {
        self.recovery_start.is_some_and(|start| sent_time <= start)
    }
}

impl Controller for NewReno {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {
        // Bytes in flight are tracked by the transport; nothing to do.
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        // RFC 9002 §7.3.2: no growth during recovery; the period ends when a
        // packet sent after it started is acknowledged.
        if self.in_recovery(sent_time) {
            return;
        }
        // RFC 9002 §7.8: do not grow an under-utilised window.
        if app_limited {
            return;
        }
        if self.cwnd < self.ssthresh {
            // RFC 9002 §7.3.1: slow start adds the bytes acknowledged.
            self.cwnd = self.cwnd.saturating_add(bytes);
        } else {
            // RFC 9002 §7.3.3: one maximum datagram per window acknowledged.
            self.bytes_acked = self.bytes_acked.saturating_add(bytes);
            if self.bytes_acked >= self.cwnd {
                self.bytes_acked -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(self.max_datagram_size);
            }
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
        // RFC 9002 §B.6: one reduction per recovery period.
        if !self.in_recovery(sent_time) {
            self.recovery_start = Some(now);
            let reduced = super::mul_div(self.cwnd, LOSS_REDUCTION.0, LOSS_REDUCTION.1);
            self.ssthresh = reduced.max(minimum_window(self.max_datagram_size));
            self.cwnd = self.ssthresh;
            self.bytes_acked = 0;
        }
        // RFC 9002 §7.6.2 / §B.8: persistent congestion collapses the window
        // and ends the recovery period.
        if persistent {
            self.cwnd = minimum_window(self.max_datagram_size);
            self.recovery_start = None;
            self.bytes_acked = 0;
        }
    }

    fn on_mtu_update(&mut self, max_datagram_size: u64) {
        self.max_datagram_size = max_datagram_size;
        self.cwnd = self.cwnd.max(minimum_window(max_datagram_size));
        if self.ssthresh != u64::MAX {
            self.ssthresh = self.ssthresh.max(minimum_window(max_datagram_size));
        }
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        None
    }

    fn name(&self) -> &'static str {
        "newreno"
    }

    fn in_slow_start(&self) -> bool {
        self.cwnd < self.ssthresh
    }

    fn ssthresh(&self) -> Option<u64> {
        (self.ssthresh != u64::MAX).then_some(self.ssthresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::time::Duration;

    const MDS: u64 = 1200;

    fn rtt() -> RttEstimator {
        RttEstimator::new(Duration::from_millis(100))
    }

    /// Sends a full window at `now` and acknowledges all of it one RTT later,
    /// packet by packet; returns the new time.
    fn one_round(c: &mut NewReno, now: Instant, app_limited: bool) -> Instant {
        let sent = now;
        let packets = c.window() / MDS;
        for i in 0..packets {
            c.on_packet_sent(sent, MDS, (i + 1) * MDS);
        }
        let acked = now + Duration::from_millis(100);
        for _ in 0..packets {
            c.on_ack(acked, sent, MDS, app_limited, &rtt());
        }
        c.on_end_acks(acked, 0, app_limited, None, &rtt());
        acked
    }

    #[test]
    fn slow_start_doubles_per_round_trip() {
        let mut c = NewReno::new(MDS);
        assert_eq!(c.window(), 12_000);
        let mut now = Instant::from_millis(0);
        for expected in [24_000, 48_000, 96_000] {
            now = one_round(&mut c, now, false);
            assert_eq!(c.window(), expected);
            assert!(c.in_slow_start());
        }
    }

    #[test]
    fn loss_halves_once_per_recovery_period() {
        let mut c = NewReno::new(MDS);
        let now = one_round(&mut c, Instant::ZERO, false);
        assert_eq!(c.window(), 24_000);
        let t_loss = now + Duration::from_millis(10);
        c.on_congestion_event(t_loss, now, MDS, false, &rtt());
        assert_eq!(c.window(), 12_000);
        assert_eq!(c.ssthresh(), Some(12_000));
        assert!(!c.in_slow_start());
        // More losses of packets sent before the recovery started: ignored.
        c.on_congestion_event(
            t_loss + Duration::from_millis(5),
            t_loss,
            MDS,
            false,
            &rtt(),
        );
        assert_eq!(c.window(), 12_000);
        // ACKs of packets sent before recovery do not grow the window.
        for _ in 0..20 {
            c.on_ack(t_loss + Duration::from_millis(50), now, MDS, false, &rtt());
        }
        assert_eq!(c.window(), 12_000);
        // A loss of a packet sent after recovery started: new reduction.
        let later = t_loss + Duration::from_millis(1);
        c.on_congestion_event(
            t_loss + Duration::from_millis(200),
            later,
            MDS,
            false,
            &rtt(),
        );
        assert_eq!(c.window(), 6_000);
        // Never below the minimum window.
        for i in 0..10 {
            let t = t_loss + Duration::from_secs(1 + i);
            c.on_congestion_event(t + Duration::from_millis(1), t, MDS, false, &rtt());
        }
        assert_eq!(c.window(), 2 * MDS);
    }

    #[test]
    fn congestion_avoidance_adds_one_datagram_per_window() {
        let mut c = NewReno::new(MDS);
        let now = one_round(&mut c, Instant::ZERO, false); // 24_000
        c.on_congestion_event(now, now, MDS, false, &rtt()); // 12_000, recovery at `now`
        let mut t = now + Duration::from_millis(1);
        for expected in [13_200, 14_400, 15_600] {
            t = one_round(&mut c, t, false);
            assert_eq!(c.window(), expected);
        }
        // Partial windows accumulate: half a window acknowledged adds nothing yet.
        let sent = t;
        for _ in 0..(c.window() / MDS / 2) {
            c.on_ack(t + Duration::from_millis(100), sent, MDS, false, &rtt());
        }
        assert_eq!(c.window(), 15_600);
    }

    #[test]
    fn persistent_congestion_collapses_to_minimum_window() {
        let mut c = NewReno::new(MDS);
        let now = one_round(&mut c, Instant::ZERO, false);
        c.on_congestion_event(now + Duration::from_secs(3), now, 10 * MDS, true, &rtt());
        assert_eq!(c.window(), 2 * MDS);
        assert_eq!(c.ssthresh(), Some(12_000));
        // Recovery period is reset: the window grows again in slow start.
        let t = now + Duration::from_secs(4);
        c.on_ack(t, now + Duration::from_secs(3), MDS, false, &rtt());
        assert_eq!(c.window(), 3 * MDS);
    }

    #[test]
    fn no_growth_when_app_limited() {
        let mut c = NewReno::new(MDS);
        one_round(&mut c, Instant::ZERO, true);
        assert_eq!(c.window(), 12_000);
        let now = one_round(&mut c, Instant::from_millis(1_000), false);
        assert_eq!(c.window(), 24_000);
        c.on_congestion_event(now, now, MDS, false, &rtt());
        one_round(&mut c, now + Duration::from_millis(1), true);
        assert_eq!(c.window(), 12_000);
    }

    #[test]
    fn mtu_update_raises_window_to_new_minimum() {
        let mut c = NewReno::new(MDS);
        c.on_congestion_event(
            Instant::from_millis(10),
            Instant::from_millis(5),
            MDS,
            true,
            &rtt(),
        );
        assert_eq!(c.window(), 2400);
        c.on_mtu_update(1500);
        assert_eq!(c.window(), 3000);
    }
}
