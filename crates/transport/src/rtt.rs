//! Round-trip time estimation (RFC 9002 §5).
//!
//! The loss detector, the probe timeout and every congestion controller read
//! the path's RTT from one [`RttEstimator`] per connection. The transport
//! computes an RTT sample when an ACK newly acknowledges the largest packet
//! number and feeds it here together with the peer's reported ACK delay
//! (RFC 9002 §5.1); everything else is derived.
//!
//! All arithmetic saturates: the ACK delay is peer-controlled (a varint up to
//! 2^62 scaled by `ack_delay_exponent`), so no value may overflow or panic.

use wire::time::Duration;

/// Timer granularity assumed by the RFC (`kGranularity`, RFC 9002 §6.1.2).
pub const GRANULARITY: Duration = Duration::from_millis(1);

/// The RFC's recommended initial RTT before any sample (`kInitialRtt`,
/// RFC 9002 §6.2.2). The caller decides whether to use it.
pub const DEFAULT_INITIAL_RTT: Duration = Duration::from_millis(333);

/// Nanoseconds of `d`, saturating at `u64::MAX` (about 584 years).
fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// The path's RTT statistics: latest, smoothed, variation and minimum
/// (RFC 9002 §5).
///
/// Before the first sample, `smoothed` is the initial RTT, `rttvar` half of it
/// (RFC 9002 §5.3, §6.2.2), and `latest` and `min` also report the initial RTT
/// so that callers never see a zero RTT; [`RttEstimator::has_sample`] tells
/// whether a real measurement exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttEstimator {
    /// `latest_rtt`: the most recent sample, without ACK-delay adjustment.
    latest: Duration,
    /// `smoothed_rtt`: exponentially weighted moving average.
    smoothed: Duration,
    /// `rttvar`: mean deviation of the adjusted samples.
    rttvar: Duration,
    /// `min_rtt`: the smallest sample seen, ACK delay ignored.
    min: Duration,
    /// Whether `update` has been called at least once.
    has_sample: bool,
}

impl RttEstimator {
    /// A fresh estimator for a new path. `initial_rtt` is the RFC's
    /// `kInitialRtt` (333 ms recommended, RFC 9002 §6.2.2), or a value
    /// remembered from an earlier connection; it is the caller's choice.
    pub fn new(initial_rtt: Duration) -> Self {
        RttEstimator {
            latest: initial_rtt,
            smoothed: initial_rtt,
            rttvar: initial_rtt / 2,
            min: initial_rtt,
            has_sample: false,
        }
    }

    /// Feed one RTT sample (RFC 9002 §5.1–§5.3).
    ///
    /// `rtt_sample` is `ack_time - send_time(largest newly acked)`;
    /// `ack_delay` is the peer-reported ACK delay, already scaled by its
    /// `ack_delay_exponent`; `max_ack_delay` is the peer's transport
    /// parameter. Before the handshake is confirmed the ACK delay is used as
    /// reported (the RFC says the peer's `max_ack_delay` SHOULD be ignored
    /// then; callers that want to ignore the delay of Initial packets pass
    /// zero); once confirmed it is capped at `max_ack_delay` (§5.3).
    pub fn update(
        &mut self,
        ack_delay: Duration,
        rtt_sample: Duration,
        max_ack_delay: Duration,
        handshake_confirmed: bool,
    ) {
        // RFC 9002 §5.3: latest_rtt is the raw sample.
        self.latest = rtt_sample;
        if !self.has_sample {
            // RFC 9002 §5.3: the first sample initialises every estimate.
            self.has_sample = true;
            self.min = rtt_sample;
            self.smoothed = rtt_sample;
            self.rttvar = rtt_sample / 2;
            return;
        }
        // RFC 9002 §5.2: min_rtt ignores the ACK delay.
        self.min = self.min.min(rtt_sample);

        // RFC 9002 §5.3: after confirmation, use the lesser of the reported
        // delay and max_ack_delay.
        let ack_delay = if handshake_confirmed {
            ack_delay.min(max_ack_delay)
        } else {
            ack_delay
        };
        // RFC 9002 §5.3: subtract the ACK delay only if the result stays at or
        // above min_rtt, so a lying peer cannot push the estimate below it.
        let adjusted = match self.min.checked_add(ack_delay) {
            Some(floor) if rtt_sample >= floor => rtt_sample - ack_delay,
            _ => rtt_sample,
        };

        // rttvar = 3/4 * rttvar + 1/4 * |smoothed_rtt - adjusted_rtt|
        let smoothed = u128::from(nanos(self.smoothed));
        let adjusted = u128::from(nanos(adjusted));
        let rttvar = u128::from(nanos(self.rttvar));
        let deviation = smoothed.abs_diff(adjusted);
        self.rttvar = from_nanos_u128((3 * rttvar + deviation) / 4);
        // smoothed_rtt = 7/8 * smoothed_rtt + 1/8 * adjusted_rtt
        self.smoothed = from_nanos_u128((7 * smoothed + adjusted) / 8);
    }

    /// Whether at least one RTT sample has been taken (before that, the
    /// estimates are the initial RTT).
    pub fn has_sample(&self) -> bool {
        self.has_sample
    }

    /// `latest_rtt`: the most recent raw sample (RFC 9002 §5.2).
    pub fn latest(&self) -> Duration {
        self.latest
    }

    /// `smoothed_rtt` (RFC 9002 §5.3).
    pub fn smoothed(&self) -> Duration {
        self.smoothed
    }

    /// `rttvar` (RFC 9002 §5.3).
    pub fn rttvar(&self) -> Duration {
        self.rttvar
    }

    /// `min_rtt` over the connection's lifetime (RFC 9002 §5.2).
    pub fn min(&self) -> Duration {
        self.min
    }

    /// The probe timeout without the peer's `max_ack_delay`:
    /// `smoothed_rtt + max(4 * rttvar, kGranularity)` (RFC 9002 §6.2.1). The
    /// caller adds `max_ack_delay` for the application data space and applies
    /// the exponential backoff.
    pub fn pto_base(&self) -> Duration {
        let var = self.rttvar.saturating_mul(4).max(GRANULARITY);
        self.smoothed.saturating_add(var)
    }

    /// The time threshold for declaring a packet lost:
    /// `max(9/8 * max(smoothed_rtt, latest_rtt), kGranularity)`
    /// (RFC 9002 §6.1.2, `kTimeThreshold` = 9/8).
    pub fn loss_delay(&self) -> Duration {
        let base = u128::from(nanos(self.smoothed.max(self.latest)));
        from_nanos_u128(base * 9 / 8).max(GRANULARITY)
    }
}

impl Default for RttEstimator {
    /// An estimator starting from [`DEFAULT_INITIAL_RTT`].
    fn default() -> Self {
        RttEstimator::new(DEFAULT_INITIAL_RTT)
    }
}

/// A duration of `n` nanoseconds, saturating at `u64::MAX` nanoseconds.
fn from_nanos_u128(n: u128) -> Duration {
    Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: fn(u64) -> Duration = Duration::from_millis;

    #[test]
    fn initial_state_uses_initial_rtt() {
        let rtt = RttEstimator::new(MS(333));
        assert!(!rtt.has_sample());
        assert_eq!(rtt.smoothed(), MS(333));
        assert_eq!(rtt.rttvar(), Duration::from_micros(166_500));
        // 333 + 4 * 166.5 = 999 ms (RFC 9002 §6.2.2: first PTO is about 1 s).
        assert_eq!(rtt.pto_base(), MS(999));
    }

    #[test]
    fn first_sample_initialises_everything() {
        let mut rtt = RttEstimator::new(MS(333));
        // The ACK delay is ignored for the first sample (RFC 9002 §5.3).
        rtt.update(MS(10), MS(100), MS(25), true);
        assert!(rtt.has_sample());
        assert_eq!(rtt.latest(), MS(100));
        assert_eq!(rtt.min(), MS(100));
        assert_eq!(rtt.smoothed(), MS(100));
        assert_eq!(rtt.rttvar(), MS(50));
    }

    #[test]
    fn later_samples_follow_ewma_with_ack_delay_adjustment() {
        let mut rtt = RttEstimator::new(MS(333));
        rtt.update(Duration::ZERO, MS(100), MS(25), true);
        // sample 140, ack delay 20 -> adjusted 120 (120 >= min 100)
        rtt.update(MS(20), MS(140), MS(25), true);
        // rttvar = 3/4*50 + 1/4*|100-120| = 37.5 + 5 = 42.5
        assert_eq!(rtt.rttvar(), Duration::from_micros(42_500));
        // smoothed = 7/8*100 + 1/8*120 = 102.5
        assert_eq!(rtt.smoothed(), Duration::from_micros(102_500));
        assert_eq!(rtt.latest(), MS(140));
        assert_eq!(rtt.min(), MS(100));
    }

    #[test]
    fn ack_delay_capped_by_max_ack_delay_only_once_confirmed() {
        let mut confirmed = RttEstimator::new(MS(333));
        confirmed.update(Duration::ZERO, MS(100), MS(25), true);
        let mut unconfirmed = confirmed;
        // ack delay 80 > max_ack_delay 25.
        confirmed.update(MS(80), MS(200), MS(25), true);
        unconfirmed.update(MS(80), MS(200), MS(25), false);
        // confirmed: adjusted = 200 - 25 = 175 -> smoothed = 87.5 + 21.875
        assert_eq!(confirmed.smoothed(), Duration::from_micros(109_375));
        // unconfirmed: adjusted = 200 - 80 = 120 -> smoothed = 87.5 + 15
        assert_eq!(unconfirmed.smoothed(), Duration::from_micros(102_500));
    }

    #[test]
    fn ack_delay_not_subtracted_below_min_rtt() {
        let mut rtt = RttEstimator::new(MS(333));
        rtt.update(Duration::ZERO, MS(100), MS(25), true);
        // 110 - 20 = 90 < min 100: use 110 unadjusted.
        rtt.update(MS(20), MS(110), MS(25), true);
        // smoothed = 87.5 + 13.75 = 101.25
        assert_eq!(rtt.smoothed(), Duration::from_micros(101_250));
    }

    #[test]
    fn min_rtt_ignores_ack_delay() {
        let mut rtt = RttEstimator::new(MS(333));
        rtt.update(Duration::ZERO, MS(100), MS(25), true);
        rtt.update(MS(20), MS(90), MS(25), true);
        assert_eq!(rtt.min(), MS(90));
    }

    #[test]
    fn pto_base_and_loss_delay_formulas() {
        let mut rtt = RttEstimator::new(MS(333));
        rtt.update(Duration::ZERO, MS(100), MS(25), true);
        // 100 + 4 * 50
        assert_eq!(rtt.pto_base(), MS(300));
        // 9/8 * 100
        assert_eq!(rtt.loss_delay(), Duration::from_micros(112_500));
        // latest above smoothed: loss delay follows latest.
        rtt.update(Duration::ZERO, MS(200), MS(25), true);
        assert_eq!(rtt.loss_delay(), MS(225));

        // Tiny RTTs are floored at the granularity.
        let mut tiny = RttEstimator::new(MS(333));
        tiny.update(Duration::ZERO, Duration::from_micros(10), MS(25), true);
        assert_eq!(tiny.loss_delay(), GRANULARITY);
        assert_eq!(tiny.pto_base(), Duration::from_micros(10) + GRANULARITY);
    }

    #[test]
    fn hostile_values_do_not_panic() {
        let mut rtt = RttEstimator::new(Duration::MAX);
        let _ = rtt.pto_base();
        let _ = rtt.loss_delay();
        rtt.update(Duration::MAX, Duration::MAX, Duration::MAX, false);
        rtt.update(
            Duration::MAX,
            Duration::from_nanos(u64::MAX),
            Duration::MAX,
            true,
        );
        rtt.update(
            Duration::from_secs(1 << 62),
            Duration::from_nanos(1),
            Duration::MAX,
            true,
        );
        let _ = rtt.pto_base();
        let _ = rtt.loss_delay();
        assert_eq!(rtt.min(), Duration::from_nanos(1));
    }

    proptest! {
        #[test]
        fn estimates_stay_within_sample_bounds(
            samples in proptest::collection::vec((0u64..1_000_000_000, 0u64..1_000_000_000), 1..64),
            confirmed in any::<bool>(),
        ) {
            let mut rtt = RttEstimator::new(MS(333));
            let mut lo = u64::MAX;
            let mut hi = 0;
            for &(s, d) in &samples {
                rtt.update(Duration::from_nanos(d), Duration::from_nanos(s), MS(25), confirmed);
                lo = lo.min(s);
                hi = hi.max(s);
            }
            prop_assert_eq!(rtt.min(), Duration::from_nanos(lo));
            prop_assert_eq!(rtt.latest(), Duration::from_nanos(samples[samples.len() - 1].0));
            // Adjusted samples are never below min_rtt nor above the raw
            // sample, so the average stays within [min, max] (integer division
            // can lose up to a nanosecond per step).
            let slack = samples.len() as u64;
            prop_assert!(nanos(rtt.smoothed()) + slack >= lo);
            prop_assert!(nanos(rtt.smoothed()) <= hi);
            prop_assert!(nanos(rtt.rttvar()) <= hi);
            prop_assert!(rtt.pto_base() >= rtt.smoothed());
            prop_assert!(rtt.loss_delay() >= GRANULARITY);
        }
    }
}
