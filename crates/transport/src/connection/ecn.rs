//! Explicit Congestion Notification (RFC 9000 §13.4, RFC 9002 §7.1): mark
//! what we send ECT(0), count the codepoints of what we receive and report
//! them in ACK frames, validate what the peer reports, and treat a rise in
//! its CE count as a congestion event.
//!
//! Switched on by `TransportConfig::ecn` (off by default: a sender only
//! marks when asked). As a receiver we always count and report, since
//! reporting costs a peer nothing and RFC 9000 §13.4.1 asks for it.
//!
//! Validation (§13.4.2), per packet number space: an ACK that newly
//! acknowledges packets we sent marked must carry ECN counts, the counts
//! must never go down, and the increase of ECT(0) + CE must cover the newly
//! acknowledged marked packets. Any failure switches marking off for the
//! rest of the connection (the path or the peer mangles ECN). Until the
//! first such ACK passes, we are *testing*; after, *capable*. (§A.4's
//! "testing with 10 packets, then waiting" is not modelled: every packet is
//! marked until validation fails.)

use wire::ecn::Ecn;
use wire::frame::EcnCounts;
use wire::time::Instant;

use super::spaces::SentPacket;
use super::{Connection, SpaceId};

/// Where our ECN marking stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum EcnState {
    /// Not asked to mark.
    #[default]
    Off,
    /// Marking, no ACK has validated it yet.
    Testing,
    /// Marking, validated.
    Capable,
    /// Validation failed: no more marking.
    Failed,
}

/// Add one received packet's codepoint to `counts`.
pub(super) fn count(counts: &mut EcnCounts, ecn: Option<Ecn>) {
    match ecn {
        Some(Ecn::Ect0) => counts.ect0 = counts.ect0.saturating_add(1),
        Some(Ecn::Ect1) => counts.ect1 = counts.ect1.saturating_add(1),
        Some(Ecn::Ce) => counts.ce = counts.ce.saturating_add(1),
        None => {}
    }
}

impl Connection {
    /// Our ECT(0) marking was validated: an ACK frame of the peer carried
    /// ECN counts that covered the marked packets it acknowledged
    /// (§13.4.2), and none failed since.
    pub fn ecn_validated(&self) -> bool {
        self.ecn == EcnState::Capable
    }

    /// The codepoint of the next datagram we send.
    pub(super) fn outgoing_ecn(&self) -> Option<Ecn> {
        match self.ecn {
            EcnState::Testing | EcnState::Capable => Some(Ecn::Ect0),
            EcnState::Off | EcnState::Failed => None,
        }
    }

    /// The counts to put in an ACK frame of `space`: `None` (a plain ACK)
    /// until a marked packet arrived.
    pub(super) fn ack_ecn_counts(&self, space: SpaceId) -> Option<EcnCounts> {
        let c = self.space(space).ecn_received;
        (c != EcnCounts::default()).then_some(c)
    }

    /// An ACK frame of `space` reported `reported` and newly acknowledged
    /// `newly`: validate, and react to new CE marks.
    pub(super) fn on_ack_ecn(
        &mut self,
        now: Instant,
        space: SpaceId,
        reported: Option<EcnCounts>,
        newly: &[(u64, SentPacket)],
    ) {
        if !matches!(self.ecn, EcnState::Testing | EcnState::Capable) {
            return;
        }
        let marked = newly.iter().filter(|(_, p)| p.ecn_marked).count() as u64;
        let previous = self.space(space).ecn_reported;
        let Some(counts) = reported else {
            if marked > 0 {
                self.ecn_failed("an ACK of marked packets without ECN counts");
            }
            return;
        };
        if counts.ect0 < previous.ect0 || counts.ect1 < previous.ect1 || counts.ce < previous.ce {
            self.ecn_failed("ECN counts went down");
            return;
        }
        let covered = (counts.ect0 - previous.ect0).saturating_add(counts.ce - previous.ce);
        if covered < marked {
            self.ecn_failed("ECN counts do not cover the marked packets acknowledged");
            return;
        }
        self.space_mut(space).ecn_reported = counts;
        if marked > 0 && self.ecn == EcnState::Testing {
            self.ecn = EcnState::Capable;
        }
        let new_ce = counts.ce - previous.ce;
        if new_ce > 0 {
            self.stats.ecn_ce_reported = self.stats.ecn_ce_reported.saturating_add(new_ce);
            // RFC 9002 §7.1 / §B.7: one congestion event, keyed on the send
            // time of the largest newly acknowledged packet.
            if let Some((_, largest)) = newly.iter().max_by_key(|(pn, _)| *pn) {
                let sent = largest.time_sent;
                self.cc.on_ecn_ce(now, sent, &self.rtt);
            }
        }
    }

    fn ecn_failed(&mut self, why: &str) {
        tracing::debug!(why, "ECN validation failed: marking off");
        self.ecn = EcnState::Failed;
        self.stats.ecn_validation_failed = true;
    }
}
