//! Delivery-rate estimation (draft-cheng-iccrg-delivery-rate-estimation-00).
//!
//! For every ACK the estimator computes how fast data was delivered over the
//! interval since the newest acknowledged packet was sent: the bytes delivered
//! meanwhile, divided by the longer of the send interval and the ACK interval
//! (so neither a burst of sends nor ACK compression inflates the rate). BBR
//! feeds these samples into its bottleneck-bandwidth filter; the values are
//! also worth logging for any controller.
//!
//! Calling protocol: [`DeliveryRateEstimator::on_packet_sent`] for every
//! in-flight packet, storing the returned [`PacketRateState`] in the sent
//! packet; per ACK frame, [`DeliveryRateEstimator::on_packet_acked`] for each
//! newly acknowledged packet (never twice for one packet), then
//! [`DeliveryRateEstimator::take_sample`] once. When the sender runs out of
//! data, [`DeliveryRateEstimator::on_app_limited`] marks the following samples
//! as application-limited until the bubble is acknowledged.

use wire::time::{Duration, Instant};

/// Connection delivery state recorded in a packet when it is sent (the
/// draft's `P.delivered`, `P.delivered_time`, `P.first_sent_time`,
/// `P.is_app_limited`). The transport stores it in its sent-packet record and
/// hands it back on acknowledgment; 32 bytes. The default (nothing
/// delivered, at the epoch) fills an empty record.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketRateState {
    /// Bytes delivered on the connection when the packet was sent.
    pub delivered: u64,
    /// When `delivered` was last increased, as of the packet's send time.
    pub delivered_time: Instant,
    /// Send time of the newest packet acknowledged before this one was sent:
    /// the start of the packet's send interval.
    pub first_sent_time: Instant,
    /// Whether the sender was application-limited when it sent the packet.
    pub is_app_limited: bool,
}

/// One delivery-rate sample, produced per ACK frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RateSample {
    /// Estimated delivery rate, bytes per second.
    pub delivery_rate: u64,
    /// The interval the rate was measured over (never shorter than min RTT).
    pub interval: Duration,
    /// Bytes delivered over `interval`.
    pub delivered: u64,
    /// Connection-level delivered count when the newest acknowledged packet
    /// was sent (`P.delivered`); BBR counts round trips with it.
    pub prior_delivered: u64,
    /// Whether the sample was taken while application-limited: its rate is
    /// then a lower bound of the path's capacity, not an estimate of it.
    pub is_app_limited: bool,
    /// RTT of the newest acknowledged packet (ack time minus send time, no
    /// ACK-delay adjustment).
    pub rtt: Duration,
}

/// Per-ACK data gathered from the newest acknowledged packet.
#[derive(Clone, Copy, Debug)]
struct Pending {
    prior_delivered: u64,
    is_app_limited: bool,
    send_elapsed: Duration,
    ack_elapsed: Duration,
    newest_sent: Instant,
    rtt: Duration,
}

/// The sender-side delivery-rate estimator of a connection (the draft's `C.*`
/// variables plus the sample under construction).
#[derive(Clone, Debug, Default)]
pub struct DeliveryRateEstimator {
    /// `C.delivered`: bytes acknowledged on the connection.
    delivered: u64,
    /// `C.delivered_time`: when `delivered` was last increased.
    delivered_time: Instant,
    /// `C.first_sent_time`: send time of the newest packet acknowledged.
    first_sent_time: Instant,
    /// `C.app_limited`: the delivered count at which the current
    /// application-limited bubble ends, or 0 if not application-limited.
    app_limited: u64,
    /// The sample being built from the current ACK frame.
    pending: Option<Pending>,
}

impl DeliveryRateEstimator {
    /// A packet counted in bytes in flight is being sent; returns the state to
    /// store with it. `bytes_in_flight_before` excludes the packet itself.
    pub fn on_packet_sent(&mut self, now: Instant, bytes_in_flight_before: u64) -> PacketRateState {
        // draft-cheng §3.2 (OnPacketSent): restart the intervals after idle.
        if bytes_in_flight_before == 0 {
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        PacketRateState {
            delivered: self.delivered,
            delivered_time: self.delivered_time,
            first_sent_time: self.first_sent_time,
            is_app_limited: self.app_limited != 0,
        }
    }

    /// One newly acknowledged packet of `bytes`, sent at `sent_time` with the
    /// state `state` (draft-cheng §3.3, UpdateRateSample). Call at most once
    /// per packet.
    pub fn on_packet_acked(
        &mut self,
        now: Instant,
        state: &PacketRateState,
        sent_time: Instant,
        bytes: u64,
    ) {
        self.delivered = self.delivered.saturating_add(bytes);
        self.delivered_time = now;
        // Base the sample on the newest packet acknowledged (the one sent
        // last, with the largest delivered count).
        let newest = match &self.pending {
            None => true,
            Some(p) => {
                state.delivered > p.prior_delivered
                    || (state.delivered == p.prior_delivered && sent_time >= p.newest_sent)
            }
        };
        if newest {
            self.pending = Some(Pending {
                prior_delivered: state.delivered,
                is_app_limited: state.is_app_limited,
                send_elapsed: sent_time.saturating_duration_since(state.first_sent_time),
                ack_elapsed: now.saturating_duration_since(state.delivered_time),
                newest_sent: sent_time,
                rtt: now.saturating_duration_since(sent_time),
            });
            self.first_sent_time = sent_time;
        }
    }

    /// Finishes the sample of the ACK frame just processed (draft-cheng §3.3,
    /// GenerateRateSample). Returns `None` if nothing was acknowledged or the
    /// interval is shorter than `min_rtt` (ACK compression or a spurious
    /// retransmission would make such a rate unreliable); pass
    /// `Duration::ZERO` when no RTT sample exists yet. `_now` is the time of
    /// the ACK (the intervals were already measured in `on_packet_acked`).
    pub fn take_sample(&mut self, _now: Instant, min_rtt: Duration) -> Option<RateSample> {
        // Clear the app-limited mark once the bubble has been acknowledged.
        if self.app_limited != 0 && self.delivered > self.app_limited {
            self.app_limited = 0;
        }
        let p = self.pending.take()?;
        let interval = p.send_elapsed.max(p.ack_elapsed);
        if interval < min_rtt || interval.is_zero() {
            return None;
        }
        let delivered = self.delivered.saturating_sub(p.prior_delivered);
        let interval_ns = interval.as_nanos().max(1);
        let rate = u128::from(delivered) * 1_000_000_000 / interval_ns;
        Some(RateSample {
            delivery_rate: u64::try_from(rate).unwrap_or(u64::MAX),
            interval,
            delivered,
            prior_delivered: p.prior_delivered,
            is_app_limited: p.is_app_limited,
            rtt: p.rtt,
        })
    }

    /// The sender ran out of data to send with `bytes_in_flight` outstanding
    /// (draft-cheng §3.4): samples are marked application-limited until that
    /// much more has been delivered.
    pub fn on_app_limited(&mut self, bytes_in_flight: u64) {
        self.app_limited = self.delivered.saturating_add(bytes_in_flight).max(1);
    }

    /// Whether the sender is currently marked application-limited.
    pub fn is_app_limited(&self) -> bool {
        self.app_limited != 0
    }

    /// Total bytes acknowledged on the connection (`C.delivered`).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    const MDS: u64 = 1200;

    /// A paced sender at `rate` bytes/s over a path of fixed `rtt`, with an
    /// ACK frame every `ack_every` packets. Returns all samples taken after
    /// the first three RTTs (the first round measures from an idle start).
    fn ack_clock(rate: u64, rtt: Duration, ack_every: usize, total: u64) -> Vec<RateSample> {
        let mut est = DeliveryRateEstimator::default();
        let gap = Duration::from_nanos(MDS * 1_000_000_000 / rate);
        let mut in_flight = 0;
        let mut outstanding: VecDeque<(Instant, PacketRateState)> = VecDeque::new();
        let mut unacked_at_receiver: Vec<(Instant, PacketRateState)> = Vec::new();
        let mut samples = Vec::new();
        let start = Instant::from_millis(1);
        for i in 0..total {
            let now = start + gap * i as u32;
            // Deliver every ACK due by now, in order.
            while let Some(&(sent, st)) = outstanding.front() {
                let arrival = sent + rtt;
                if arrival > now {
                    break;
                }
                outstanding.pop_front();
                unacked_at_receiver.push((sent, st));
                if unacked_at_receiver.len() == ack_every {
                    for (s, st) in unacked_at_receiver.drain(..) {
                        est.on_packet_acked(arrival, &st, s, MDS);
                        in_flight -= MDS;
                    }
                    if let Some(rs) = est.take_sample(arrival, rtt) {
                        if arrival > start + rtt * 3 {
                            samples.push(rs);
                        }
                    }
                }
            }
            let st = est.on_packet_sent(now, in_flight);
            in_flight += MDS;
            outstanding.push_back((now, st));
        }
        samples
    }

    #[test]
    fn constant_rate_ack_clock_gives_the_configured_rate() {
        for (rate, ack_every) in [
            (12_500_000, 1),
            (12_500_000, 2),
            (1_000_000, 1),
            (125_000_000, 10),
        ] {
            let samples = ack_clock(rate, Duration::from_millis(50), ack_every, 20_000);
            assert!(samples.len() > 100, "{} samples", samples.len());
            for rs in &samples {
                let err = (rs.delivery_rate as f64 - rate as f64).abs() / rate as f64;
                assert!(
                    err < 0.01,
                    "{rs:?} rate {} vs {rate} (ack every {ack_every})",
                    rs.delivery_rate
                );
                assert!(rs.interval >= Duration::from_millis(50));
                assert!(!rs.is_app_limited);
                assert_eq!(rs.rtt, Duration::from_millis(50));
            }
        }
    }

    #[test]
    fn first_packet_after_idle_measures_one_rtt() {
        let mut est = DeliveryRateEstimator::default();
        let t0 = Instant::from_millis(100);
        let st = est.on_packet_sent(t0, 0);
        let st2 = est.on_packet_sent(t0, MDS);
        let ack = t0 + Duration::from_millis(20);
        est.on_packet_acked(ack, &st, t0, MDS);
        est.on_packet_acked(ack, &st2, t0, MDS);
        let rs = est
            .take_sample(ack, Duration::from_millis(20))
            .expect("valid sample");
        assert_eq!(rs.delivered, 2 * MDS);
        assert_eq!(rs.interval, Duration::from_millis(20));
        assert_eq!(rs.delivery_rate, 2 * MDS * 50);
        assert_eq!(rs.prior_delivered, 0);
        assert_eq!(est.delivered(), 2 * MDS);
        // Nothing acknowledged since: no sample.
        assert_eq!(est.take_sample(ack, Duration::ZERO), None);
    }

    #[test]
    fn short_intervals_are_rejected() {
        let mut est = DeliveryRateEstimator::default();
        let t0 = Instant::from_millis(100);
        let st = est.on_packet_sent(t0, 0);
        let ack = t0 + Duration::from_millis(5);
        est.on_packet_acked(ack, &st, t0, MDS);
        assert_eq!(est.take_sample(ack, Duration::from_millis(10)), None);
        // The pending sample was consumed; a zero interval is rejected too.
        let st = est.on_packet_sent(ack, 0);
        est.on_packet_acked(ack, &st, ack, MDS);
        assert_eq!(est.take_sample(ack, Duration::ZERO), None);
    }

    #[test]
    fn app_limited_marks_samples_until_the_bubble_is_delivered() {
        let mut est = DeliveryRateEstimator::default();
        let t0 = Instant::from_millis(100);
        let rtt = Duration::from_millis(10);
        let a = est.on_packet_sent(t0, 0);
        est.on_app_limited(MDS);
        assert!(est.is_app_limited());
        let b = est.on_packet_sent(t0 + Duration::from_millis(1), MDS);
        assert!(!a.is_app_limited);
        assert!(b.is_app_limited);
        // Ack of `a` delivers the bubble's first byte count (delivered == mark).
        est.on_packet_acked(t0 + rtt, &a, t0, MDS);
        let rs = est.take_sample(t0 + rtt, rtt).expect("sample");
        assert!(!rs.is_app_limited);
        assert!(est.is_app_limited());
        est.on_packet_acked(
            t0 + rtt + Duration::from_millis(1),
            &b,
            t0 + Duration::from_millis(1),
            MDS,
        );
        let rs = est
            .take_sample(t0 + rtt + Duration::from_millis(1), Duration::ZERO)
            .expect("sample");
        assert!(rs.is_app_limited);
        // Delivered (2400) is now beyond the mark (1200): cleared.
        assert!(!est.is_app_limited());
        let c = est.on_packet_sent(t0 + Duration::from_millis(20), 0);
        assert!(!c.is_app_limited);
    }

    #[test]
    fn sample_uses_the_newest_packet_of_the_ack() {
        let mut est = DeliveryRateEstimator::default();
        let t0 = Instant::from_millis(100);
        let p1 = est.on_packet_sent(t0, 0);
        let p2 = est.on_packet_sent(t0 + Duration::from_millis(2), MDS);
        let ack = t0 + Duration::from_millis(12);
        // Acknowledged in reverse order within one frame.
        est.on_packet_acked(ack, &p2, t0 + Duration::from_millis(2), MDS);
        est.on_packet_acked(ack, &p1, t0, MDS);
        let rs = est.take_sample(ack, Duration::ZERO).expect("sample");
        assert_eq!(rs.rtt, Duration::from_millis(10));
    }

    #[test]
    fn packet_state_is_small() {
        assert!(core::mem::size_of::<PacketRateState>() <= 32);
    }

    proptest! {
        /// Arbitrary send/ack interleavings (including time going backwards)
        /// never panic, and every sample obeys the min-RTT floor and
        /// rate = delivered / interval.
        #[test]
        fn samples_are_consistent(
            ops in proptest::collection::vec((any::<bool>(), 0u64..100_000, 0u64..50_000_000, any::<bool>()), 1..300),
            min_rtt_us in 0u64..100_000,
        ) {
            let mut est = DeliveryRateEstimator::default();
            let min_rtt = Duration::from_micros(min_rtt_us);
            let mut now = Instant::from_millis(1000);
            let mut sent: Vec<(Instant, PacketRateState, u64)> = Vec::new();
            let mut in_flight = 0u64;
            for (send, bytes, dt_ns, back) in ops {
                if back { now = now - Duration::from_nanos(dt_ns / 10) } else { now += Duration::from_nanos(dt_ns) }
                if send || sent.is_empty() {
                    let st = est.on_packet_sent(now, in_flight);
                    in_flight = in_flight.saturating_add(bytes);
                    sent.push((now, st, bytes));
                    if bytes % 7 == 0 { est.on_app_limited(in_flight) }
                } else {
                    let (s, st, b) = sent.remove(0);
                    in_flight = in_flight.saturating_sub(b);
                    est.on_packet_acked(now, &st, s, b);
                    if let Some(rs) = est.take_sample(now, min_rtt) {
                        prop_assert!(rs.interval >= min_rtt);
                        prop_assert!(!rs.interval.is_zero());
                        let expect = u128::from(rs.delivered) * 1_000_000_000 / rs.interval.as_nanos();
                        prop_assert_eq!(u128::from(rs.delivery_rate), expect);
                    }
                }
            }
        }
    }
}
