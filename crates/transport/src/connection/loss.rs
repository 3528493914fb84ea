//! RFC 9002 loss detection, probe timeout and persistent congestion as pure
//! functions over the sent-packet records.
//!
//! Nothing here touches a connection: the callers in `recovery` gather the
//! inputs (packet numbers, send times, the RTT estimator's thresholds, which
//! packet numbers were acknowledged) and act on the answers. Each rule can
//! therefore be tested alone, with packet histories written by hand.

use wire::time::{Duration, Instant};

use super::SpaceId;
use crate::range_set::RangeSet;

/// RFC 9002 §6.1.1 `kPacketThreshold`: a packet is lost once a packet sent
/// this many packet numbers later is acknowledged.
pub(crate) const PACKET_THRESHOLD: u64 = 3;
/// RFC 9002 §7.6.1 `kPersistentCongestionThreshold`.
pub(crate) const PERSISTENT_CONGESTION_THRESHOLD: u32 = 3;

/// The outcome of one loss-detection pass over a packet number space.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Detection {
    /// Packet numbers declared lost, ascending.
    pub lost: Vec<u64>,
    /// When the earliest packet not yet lost will cross the time threshold
    /// (RFC 9002 §6.1.2 `loss_time`), if any.
    pub loss_time: Option<Instant>,
}

/// RFC 9002 §6.1 (Appendix A.10 `DetectAndRemoveLostPackets`): which of the
/// unacknowledged packets are lost, by the packet and the time thresholds.
///
/// `unacked` yields `(packet number, send time)` of the packets still in
/// flight, in ascending packet-number order; only those below
/// `largest_acked` are candidates. `loss_delay` is the time threshold
/// (`max(9/8 * max(smoothed_rtt, latest_rtt), kGranularity)`).
pub(crate) fn detect_lost(
    unacked: impl IntoIterator<Item = (u64, Instant)>,
    largest_acked: u64,
    now: Instant,
    loss_delay: Duration,
) -> Detection {
    // Saturates at the epoch, like every `Instant` subtraction.
    let lost_send_time = now - loss_delay;
    let mut out = Detection::default();
    for (pn, time_sent) in unacked {
        if pn >= largest_acked {
            break;
        }
        let by_time = time_sent <= lost_send_time;
        let by_count = largest_acked >= pn.saturating_add(PACKET_THRESHOLD);
        if by_time || by_count {
            out.lost.push(pn);
        } else {
            let t = time_sent + loss_delay;
            out.loss_time = Some(out.loss_time.map_or(t, |l| l.min(t)));
        }
    }
    out
}

/// RFC 9002 §7.6.1: the persistent congestion duration,
/// `(smoothed_rtt + max(4 * rttvar, kGranularity) + max_ack_delay) *
/// kPersistentCongestionThreshold`. `pto_base` is the first two terms (the
/// RTT estimator's [`pto_base`](crate::rtt::RttEstimator::pto_base)).
pub(crate) fn persistent_congestion_duration(
    pto_base: Duration,
    max_ack_delay: Duration,
) -> Duration {
    (pto_base + max_ack_delay) * PERSISTENT_CONGESTION_THRESHOLD
}

/// A packet declared lost, as persistent-congestion detection sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LostPacket {
    /// Its packet number.
    pub pn: u64,
    /// When it was sent.
    pub time_sent: Instant,
    /// Whether it was ack-eliciting.
    pub ack_eliciting: bool,
}

/// RFC 9002 §7.6.2: whether the packets lost in one detection pass
/// establish persistent congestion.
///
/// That needs two ack-eliciting lost packets, both sent after the first RTT
/// sample (`first_rtt_sample`; none before it), more than `duration` apart,
/// with no packet sent between them acknowledged (the *contiguity* rule: a
/// single acknowledged packet in the middle proves the path carried data in
/// that period). `lost` is sorted by packet number (hence by send time);
/// `acked` holds the packet numbers of this space known to be acknowledged,
/// at least those above the oldest lost packet.
///
/// Within a run of lost packets that no acknowledgement interrupts, the
/// span from its first to its last ack-eliciting packet is what counts;
/// non-ack-eliciting losses neither open nor close a span, and neither do
/// packets still in flight (they are not acknowledged). Packets declared
/// lost in earlier passes do not extend a span (quinn and s2n-quic, and the
/// RFC's pseudocode, look at one pass too): a conservative choice, since
/// wrongly collapsing the window to its minimum costs far more than
/// missing a persistent congestion that plain loss recovery handles anyway.
pub(crate) fn in_persistent_congestion(
    lost: &[LostPacket],
    acked: &RangeSet,
    first_rtt_sample: Option<Instant>,
    duration: Duration,
) -> bool {
    let Some(first_sample) = first_rtt_sample else {
        return false;
    };
    let mut run_start: Option<LostPacket> = None;
    let mut prev: Option<LostPacket> = None;
    for p in lost
        .iter()
        .filter(|p| p.ack_eliciting && p.time_sent > first_sample)
    {
        if let Some(q) = prev {
            let between = q.pn.saturating_add(1)..p.pn;
            if !between.is_empty() && acked.intersect(between).next().is_some() {
                run_start = None;
            }
        }
        let start = *run_start.get_or_insert(*p);
        if p.time_sent.saturating_duration_since(start.time_sent) > duration {
            return true;
        }
        prev = Some(*p);
    }
    false
}

/// What the probe timeout needs to know about one packet number space.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PtoSpace {
    /// The space.
    pub id: SpaceId,
    /// Whether we may send in it now (keys; for 1-RTT, a complete handshake).
    pub armed: bool,
    /// Whether it has ack-eliciting packets in flight.
    pub eliciting_in_flight: bool,
    /// When its last ack-eliciting packet was sent.
    pub time_of_last_ack_eliciting: Option<Instant>,
    /// Its probe timeout before backoff (RFC 9002 §6.2.1), `max_ack_delay`
    /// included where it applies.
    pub pto: Duration,
}

/// A client still unsure its handshake completed keeps a PTO armed with
/// nothing in flight (RFC 9002 §6.2.2.1, anti-deadlock): in which space.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AntiDeadlock {
    /// The space to probe: Handshake once its keys exist, else Initial.
    pub space: SpaceId,
    /// Whether its keys exist.
    pub has_keys: bool,
}

/// RFC 9002 §6.2.1 and Appendix A.8 `GetPtoTimeAndSpace`: when the probe
/// timeout fires, and in which space. `pto_count` is the backoff exponent.
/// `anti_deadlock` is set for a client without a confirmed handshake.
pub(crate) fn pto_time_and_space(
    spaces: &[PtoSpace],
    pto_count: u32,
    anti_deadlock: Option<AntiDeadlock>,
    now: Instant,
) -> Option<(Instant, SpaceId)> {
    let backoff = 1u32 << pto_count.min(16);
    if spaces.iter().all(|s| !s.eliciting_in_flight) {
        let a = anti_deadlock?;
        if !a.has_keys {
            return None;
        }
        let s = spaces.iter().find(|s| s.id == a.space)?;
        let base = s.time_of_last_ack_eliciting.unwrap_or(now);
        return Some((base + s.pto * backoff, a.space));
    }
    spaces
        .iter()
        .filter(|s| s.eliciting_in_flight && s.armed)
        .filter_map(|s| {
            s.time_of_last_ack_eliciting
                .map(|t| (t + s.pto * backoff, s.id))
        })
        // The earliest deadline; ties go to the earlier space (Initial first).
        .min_by_key(|&(t, id)| (t, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(n: u64) -> Instant {
        Instant::from_nanos(n * 1_000_000)
    }

    fn lost(pn: u64, t: u64) -> LostPacket {
        LostPacket {
            pn,
            time_sent: at(t),
            ack_eliciting: true,
        }
    }

    #[test]
    fn packet_threshold_declares_three_behind() {
        // Sent 1..=5 at 100 ms, largest acked 5, no time loss yet.
        let sent = (1..5).map(|pn| (pn, at(100)));
        let d = detect_lost(sent, 5, at(110), ms(50));
        assert_eq!(d.lost, vec![1, 2]);
        // 3 and 4 cross the time threshold at 150 ms.
        assert_eq!(d.loss_time, Some(at(150)));
    }

    #[test]
    fn time_threshold_declares_old_packets() {
        let sent = [(7, at(10)), (8, at(40)), (9, at(45))];
        let d = detect_lost(sent, 9, at(60), ms(20));
        // 7 was sent 50 ms ago (> 20), 8 exactly 20 ms ago (lost: <=).
        assert_eq!(d.lost, vec![7, 8]);
        assert_eq!(d.loss_time, None);
    }

    #[test]
    fn nothing_at_or_above_largest_acked_is_lost() {
        let sent = [(5, at(0)), (6, at(0)), (7, at(0))];
        let d = detect_lost(sent, 5, at(1000), ms(1));
        assert!(d.lost.is_empty());
        assert_eq!(d.loss_time, None);
    }

    #[test]
    fn early_in_time_nothing_underflows() {
        // `now` smaller than the loss delay: the threshold time saturates
        // at the epoch; a packet sent later than that is not lost by time.
        let d = detect_lost([(0, at(1)), (1, at(1))], 2, at(2), ms(100));
        assert!(d.lost.is_empty());
        assert_eq!(d.loss_time, Some(at(101)));
    }

    #[test]
    fn persistent_congestion_needs_the_span() {
        let acked = RangeSet::new();
        let d = ms(300);
        let spread = [lost(10, 1000), lost(11, 1100), lost(12, 1301)];
        assert!(in_persistent_congestion(&spread, &acked, Some(at(0)), d));
        // Exactly the duration is not more than it.
        let short = [lost(10, 1000), lost(12, 1300)];
        assert!(!in_persistent_congestion(&short, &acked, Some(at(0)), d));
    }

    #[test]
    fn an_acknowledged_packet_between_breaks_contiguity() {
        // RFC 9002 §7.6.2: 10 and 14 are 400 ms apart, but 12 (sent in
        // between) was acknowledged: no persistent congestion.
        let mut acked = RangeSet::new();
        acked.insert_one(12);
        let lost_pkts = [
            lost(10, 1000),
            lost(11, 1100),
            lost(13, 1300),
            lost(14, 1400),
        ];
        assert!(!in_persistent_congestion(
            &lost_pkts,
            &acked,
            Some(at(0)),
            ms(300)
        ));
        // Without that acknowledgement (12 still in flight, say), it is.
        assert!(in_persistent_congestion(
            &lost_pkts,
            &RangeSet::new(),
            Some(at(0)),
            ms(300)
        ));
        // A later run long enough on its own still counts.
        let longer = [
            lost(10, 1000),
            lost(13, 1300),
            lost(14, 1400),
            lost(15, 1700),
        ];
        assert!(in_persistent_congestion(
            &longer,
            &acked,
            Some(at(0)),
            ms(300)
        ));
    }

    #[test]
    fn only_ack_eliciting_packets_after_the_first_sample_count() {
        let acked = RangeSet::new();
        let mut pkts = [lost(10, 1000), lost(11, 1200), lost(12, 1400)];
        // Without any RTT sample, never.
        assert!(!in_persistent_congestion(&pkts, &acked, None, ms(300)));
        // The first packet was sent before the first sample: 11..12 span
        // only 200 ms.
        assert!(!in_persistent_congestion(
            &pkts,
            &acked,
            Some(at(1000)),
            ms(300)
        ));
        // A non-ack-eliciting end does not close the span...
        pkts[2].ack_eliciting = false;
        assert!(!in_persistent_congestion(
            &pkts,
            &acked,
            Some(at(0)),
            ms(300)
        ));
        // ...nor break it: 10 -> 13 spans 500 ms over a lost ACK-only 12.
        let pkts = [pkts[0], pkts[1], pkts[2], lost(13, 1500)];
        assert!(in_persistent_congestion(
            &pkts,
            &acked,
            Some(at(0)),
            ms(300)
        ));
    }

    #[test]
    fn duration_formula() {
        assert_eq!(persistent_congestion_duration(ms(100), ms(25)), ms(375));
    }

    fn space(id: SpaceId, eliciting: bool, last: Option<u64>, pto: u64) -> PtoSpace {
        PtoSpace {
            id,
            armed: true,
            eliciting_in_flight: eliciting,
            time_of_last_ack_eliciting: last.map(at),
            pto: ms(pto),
        }
    }

    #[test]
    fn pto_picks_the_earliest_space_and_backs_off() {
        let spaces = [
            space(SpaceId::Initial, true, Some(100), 300),
            space(SpaceId::Handshake, true, Some(150), 200),
            space(SpaceId::Data, false, Some(0), 10),
        ];
        assert_eq!(
            pto_time_and_space(&spaces, 0, None, at(0)),
            Some((at(350), SpaceId::Handshake))
        );
        // Backoff 4x: Initial 100 + 1200 beats Handshake 150 + 800? No: 950.
        assert_eq!(
            pto_time_and_space(&spaces, 2, None, at(0)),
            Some((at(950), SpaceId::Handshake))
        );
        // A space that may not send is skipped.
        let mut s2 = spaces;
        s2[1].armed = false;
        assert_eq!(
            pto_time_and_space(&s2, 0, None, at(0)),
            Some((at(400), SpaceId::Initial))
        );
    }

    #[test]
    fn pto_with_nothing_in_flight_only_for_the_anti_deadlock_client() {
        let spaces = [
            space(SpaceId::Initial, false, None, 300),
            space(SpaceId::Handshake, false, Some(50), 300),
            space(SpaceId::Data, false, None, 300),
        ];
        assert_eq!(pto_time_and_space(&spaces, 0, None, at(10)), None);
        let a = AntiDeadlock {
            space: SpaceId::Initial,
            has_keys: true,
        };
        // Nothing ever sent in Initial: counted from now.
        assert_eq!(
            pto_time_and_space(&spaces, 1, Some(a), at(10)),
            Some((at(610), SpaceId::Initial))
        );
        let h = AntiDeadlock {
            space: SpaceId::Handshake,
            has_keys: true,
        };
        assert_eq!(
            pto_time_and_space(&spaces, 0, Some(h), at(10)),
            Some((at(350), SpaceId::Handshake))
        );
        let none = AntiDeadlock {
            has_keys: false,
            ..h
        };
        assert_eq!(pto_time_and_space(&spaces, 0, Some(none), at(10)), None);
    }
}
