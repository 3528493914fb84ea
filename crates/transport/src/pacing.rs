//! Pacing (RFC 9002 §7.7): spreading packets over time instead of sending a
//! whole congestion window in one burst.
//!
//! [`Pacer`] is a token bucket that answers "when may the next packet go"
//! rather than sleeping, so the sans-IO connection can fold the answer into
//! its `poll_timeout`. Tokens (bytes) accrue at the pacing rate up to a burst
//! allowance; a packet may leave when the bucket holds its size.
//!
//! The burst allowance is `max(10 datagrams, rate * 2 ms)`. Ten datagrams
//! match the initial window (RFC 9002 §7.2), so pacing never delays the first
//! flight. The 2 ms term is for real-time drivers: the UDP driver sleeps with
//! about 1 ms precision, so it wakes up to a millisecond late and must find
//! that millisecond's worth of tokens still in the bucket, or multi-Gbit/s
//! rates would be capped at what one wake-up can send. At 10 Gbit/s the
//! allowance is 2.5 MB, a burst a loopback or data-centre path absorbs.

use wire::time::{Duration, Instant};

/// Minimum burst allowance, in datagrams.
pub const BURST_PACKETS: u64 = 10;
/// Burst allowance expressed as time at the pacing rate.
pub const BURST_INTERVAL: Duration = Duration::from_millis(2);

/// Tokens are counted in nano-bytes (bytes × 10^9), so that `elapsed_ns *
/// rate` credits exactly, with no rounding drift.
const SCALE: u128 = 1_000_000_000;

/// The pacing gain `N` of RFC 9002 §7.7, as numerator / denominator.
const PACING_GAIN: (u128, u128) = (5, 4);

/// A token-bucket pacer for one path.
#[derive(Clone, Debug)]
pub struct Pacer {
    /// Maximum datagram size, bytes; sets the minimum burst.
    max_datagram_size: u64,
    /// Current bucket size, bytes.
    capacity: u64,
    /// Tokens available, in nano-bytes.
    tokens: u128,
    /// Time up to which tokens have been credited.
    last: Instant,
    /// The rate of the latest `delay` call, bytes per second.
    rate: u64,
}

impl Pacer {
    /// A pacer with a full bucket of [`BURST_PACKETS`] datagrams.
    pub fn new(now: Instant, max_datagram_size: u64) -> Self {
        let capacity = BURST_PACKETS.saturating_mul(max_datagram_size.max(1));
        Pacer {
            max_datagram_size,
            capacity,
            tokens: u128::from(capacity) * SCALE,
            last: now,
            rate: 0,
        }
    }

    /// The bucket size for `rate`: `max(10 datagrams, rate * 2 ms)`.
    fn capacity_for(&self, rate: u64) -> u64 {
        let burst = u128::from(rate) * BURST_INTERVAL.as_nanos() / SCALE;
        let burst = u64::try_from(burst).unwrap_or(u64::MAX);
        burst.max(BURST_PACKETS.saturating_mul(self.max_datagram_size.max(1)))
    }

    /// Credits tokens for the time since the last call at `rate`, and resizes
    /// the bucket for `rate`. Time going backwards credits nothing.
    fn refill(&mut self, now: Instant, rate: u64) {
        if now > self.last {
            let elapsed = (now - self.last).as_nanos();
            self.tokens = self.tokens.saturating_add(elapsed * u128::from(rate));
            self.last = now;
        }
        self.capacity = self.capacity_for(rate);
        self.tokens = self.tokens.min(u128::from(self.capacity) * SCALE);
    }

    /// When the next packet of `bytes` may be sent at `rate` bytes per second,
    /// or `None` if it may go now. A packet larger than the whole bucket may
    /// go once the bucket is full. A `rate` of 0 means "not paced" (no
    /// controller here produces it; stalling the connection would be worse
    /// than a burst).
    pub fn delay(&mut self, now: Instant, bytes: u64, rate: u64) -> Option<Instant> {
        if rate == 0 {
            return None;
        }
        self.rate = rate;
        self.refill(now, rate);
        let need = u128::from(bytes.min(self.capacity)) * SCALE;
        if self.tokens >= need {
            return None;
        }
        let deficit = need - self.tokens;
        let wait_ns = deficit.div_ceil(u128::from(rate));
        let wait = Duration::from_nanos(u64::try_from(wait_ns).unwrap_or(u64::MAX));
        Some(now.max(self.last) + wait)
    }

    /// Accounts a packet of `bytes` sent at `now`.
    pub fn on_sent(&mut self, now: Instant, bytes: u64) {
        if self.rate != 0 {
            self.refill(now, self.rate);
        }
        self.tokens = self.tokens.saturating_sub(u128::from(bytes) * SCALE);
    }

    /// The path's maximum datagram size changed (the minimum burst follows).
    pub fn on_mtu_update(&mut self, max_datagram_size: u64) {
        self.max_datagram_size = max_datagram_size;
    }
}

/// The pacing rate RFC 9002 §7.7 suggests when the controller has none:
/// `N * cwnd / smoothed_rtt` with `N = 1.25`, in bytes per second. A zero
/// RTT gives `u64::MAX` (unpaced).
pub fn default_pacing_rate(cwnd: u64, srtt: Duration) -> u64 {
    let srtt_ns = srtt.as_nanos();
    if srtt_ns == 0 {
        return u64::MAX;
    }
    let rate = u128::from(cwnd) * SCALE * PACING_GAIN.0 / (PACING_GAIN.1 * srtt_ns);
    u64::try_from(rate).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MDS: u64 = 1200;

    /// Sends `bytes`-sized packets for `span` at `rate`, waking exactly when
    /// the pacer says, or rounded up to `granularity` plus `late`, like a
    /// real-time driver. Returns the bytes sent.
    fn drive(rate: u64, span: Duration, granularity: Duration, late: Duration) -> u64 {
        let start = Instant::from_millis(1_000);
        let end = start + span;
        let mut pacer = Pacer::new(start, MDS);
        let mut now = start;
        let mut sent = 0;
        while now < end {
            match pacer.delay(now, MDS, rate) {
                None => {
                    pacer.on_sent(now, MDS);
                    sent += MDS;
                }
                Some(t) => {
                    assert!(t > now, "delay must be in the future");
                    let g = granularity.as_nanos() as u64;
                    let t = if g > 0 {
                        Instant::from_nanos(t.as_nanos().div_ceil(g) * g) + late
                    } else {
                        t
                    };
                    now = t;
                }
            }
        }
        sent
    }

    #[test]
    fn spreads_packets_at_the_configured_rate() {
        // 100 Mbit/s for one simulated second.
        let rate = 12_500_000;
        let sent = drive(rate, Duration::from_secs(1), Duration::ZERO, Duration::ZERO);
        let packets = sent / MDS;
        let expected = rate / MDS; // 10416
        let err = (packets as f64 - expected as f64).abs() / expected as f64;
        assert!(err < 0.01, "{packets} packets vs {expected}");
    }

    #[test]
    fn packets_are_evenly_spaced_after_the_initial_burst() {
        let rate = 12_500_000; // one 1200-byte packet per 96 µs
        let start = Instant::from_millis(5);
        let mut pacer = Pacer::new(start, MDS);
        let mut now = start;
        let mut times = Vec::new();
        while times.len() < 200 {
            match pacer.delay(now, MDS, rate) {
                None => {
                    pacer.on_sent(now, MDS);
                    times.push(now);
                }
                Some(t) => now = t,
            }
        }
        // The first ten leave at once (the initial window's burst) ...
        assert!(times[..10].iter().all(|&t| t == start));
        // ... then one every 96 µs.
        for w in times[20..].windows(2) {
            assert_eq!(w[1] - w[0], Duration::from_micros(96));
        }
    }

    #[test]
    fn multi_gigabit_with_millisecond_timers() {
        // 10 Gbit/s with a driver that wakes on 1 ms ticks and up to 1 ms
        // late: the 2 ms bucket keeps the rate within 1%.
        let rate = 1_250_000_000;
        let sent = drive(
            rate,
            Duration::from_secs(1),
            Duration::from_millis(1),
            Duration::from_micros(999),
        );
        let err = (sent as f64 - rate as f64).abs() / rate as f64;
        assert!(err < 0.01, "{sent} bytes vs {rate}");
    }

    #[test]
    fn oversized_packet_goes_when_bucket_is_full() {
        let mut pacer = Pacer::new(Instant::ZERO, MDS);
        assert_eq!(pacer.delay(Instant::ZERO, 100 * MDS, 1_000_000), None);
        pacer.on_sent(Instant::ZERO, 100 * MDS);
        let t = pacer
            .delay(Instant::ZERO, 100 * MDS, 1_000_000)
            .expect("bucket empty");
        // Waits for a full bucket (12 000 bytes at 1 MB/s = 12 ms), not 120 ms.
        assert_eq!(t, Instant::from_millis(12));
    }

    #[test]
    fn zero_rate_is_unpaced_and_time_going_back_is_safe() {
        let mut pacer = Pacer::new(Instant::from_millis(10), MDS);
        assert_eq!(pacer.delay(Instant::from_millis(10), MDS, 0), None);
        for _ in 0..20 {
            pacer.on_sent(Instant::from_millis(10), MDS);
        }
        let t = pacer
            .delay(Instant::from_millis(5), MDS, 1_200_000)
            .expect("empty bucket");
        assert!(t >= Instant::from_millis(10));
        let _ = pacer.delay(Instant::MAX, u64::MAX, u64::MAX);
        pacer.on_sent(Instant::MAX, u64::MAX);
        let _ = pacer.delay(Instant::ZERO, u64::MAX, 1);
    }

    #[test]
    fn default_rate_formula() {
        // 1.25 * 12 000 B / 100 ms = 150 000 B/s
        assert_eq!(
            default_pacing_rate(12_000, Duration::from_millis(100)),
            150_000
        );
        assert_eq!(default_pacing_rate(12_000, Duration::ZERO), u64::MAX);
        assert_eq!(
            default_pacing_rate(u64::MAX, Duration::from_nanos(1)),
            u64::MAX
        );
        assert_eq!(default_pacing_rate(0, Duration::from_millis(1)), 0);
    }

    proptest! {
        /// However late the driver wakes and whatever the packet sizes, a
        /// pacer-obeying sender never exceeds burst + rate * elapsed.
        #[test]
        fn never_exceeds_rate_plus_burst(
            rate in 10_000u64..10_000_000_000,
            steps in proptest::collection::vec((1u64..9000, 0u64..3_000_000), 1..400),
        ) {
            let start = Instant::from_millis(1);
            let mut pacer = Pacer::new(start, MDS);
            let mut now = start;
            let mut sent: u128 = 0;
            let burst = u128::from(pacer.capacity_for(rate).max(BURST_PACKETS * MDS));
            for (bytes, late_ns) in steps {
                match pacer.delay(now, bytes, rate) {
                    None => {
                        pacer.on_sent(now, bytes);
                        sent += u128::from(bytes);
                        let elapsed = (now - start).as_nanos();
                        let allowed = burst + elapsed * u128::from(rate) / SCALE + u128::from(bytes);
                        prop_assert!(sent <= allowed, "sent {} > allowed {}", sent, allowed);
                    }
                    Some(t) => {
                        prop_assert!(t > now);
                        now = t + Duration::from_nanos(late_ns);
                    }
                }
            }
        }
    }
}
