//! A client that moves (RFC 9000 §9): NAT rebinding or a real migration,
//! seen by the server as 1-RTT packets from a new address, and the path
//! validation that follows (§8.2).
//!
//! The server follows the peer to a new address when a *non-probing*
//! packet (one with a frame other than PATH_CHALLENGE, PATH_RESPONSE,
//! NEW_CONNECTION_ID or PADDING) arrives from it carrying the largest packet
//! number received so far (§9.3), once the handshake is confirmed (§9,
//! "MUST NOT initiate migration before the handshake is confirmed" applies
//! to the client; a server that followed a peer whose handshake is not yet
//! confirmed could be redirected by a spoofed Initial). Then:
//!
//! - it sends to the new address at once, and validates it with a
//!   PATH_CHALLENGE (8 random bytes from the connection's RNG) in a datagram
//!   padded to at least 1200 bytes when the budget allows (§8.2.1). The
//!   challenge goes first in its packet, ahead of replicas (which would
//!   otherwise fill every packet while losses are recovered), and is sent
//!   again when its packet is declared lost or a PTO fires, until the
//!   PATH_RESPONSE echoes it;
//! - until then it sends at most three times what it received from the new
//!   address (§9.3, §8.1 applied to the new path);
//! - an address change (not only a port) resets congestion control and the
//!   RTT estimator (§9.4): the new path's capacity is unknown. A port change
//!   alone, a NAT rebinding, keeps them (§9.4 allows it: same path);
//! - the recovery policy is told (`on_path_change`): per-path statistics
//!   such as ART's burst history restart;
//! - validation abandoned after three times the larger of the PTO and the
//!   initial PTO (§8.2.4) sends the server back to the last validated
//!   address (§9.3.2).
//!
//! artq's client moves only to a server's preferred address
//! (`preferred_address`); it ignores datagrams from any address but the
//! server's two (the driver does not rebind its socket).

use std::net::SocketAddr;

use rand::RngCore;
use wire::frame::Frame;
use wire::time::Instant;

use super::spaces::{Retransmit, SentPacket};
use super::timer::Timer;
use super::{Connection, SpaceId};

/// The least size of a datagram carrying a PATH_CHALLENGE (§8.2.1).
const CHALLENGE_DATAGRAM: usize = 1200;

/// A path being validated after the peer moved to it.
#[derive(Clone, Copy, Debug)]
pub(super) struct PathValidation {
    /// The challenge we sent; the PATH_RESPONSE must echo it.
    challenge: [u8; 8],
    /// The last validated address, to go back to if validation fails.
    previous: SocketAddr,
    /// Bytes received from and sent to the new address since the move:
    /// the new path's anti-amplification budget.
    received: u64,
    sent: u64,
    /// The challenge waits to be (re)sent.
    send_pending: bool,
}

impl PathValidation {
    /// Bytes we may still send on the unvalidated path (three times what
    /// it delivered to us).
    pub(super) fn budget(&self) -> u64 {
        self.received.saturating_mul(3).saturating_sub(self.sent)
    }
}

/// Whether a frame is a probing frame (§9.1): one that may travel on a new
/// path without making the peer follow.
fn is_probing(frame: &Frame<'_>) -> bool {
    matches!(
        frame,
        Frame::PathChallenge(_)
            | Frame::PathResponse(_)
            | Frame::NewConnectionId { .. }
            | Frame::Padding { .. }
    )
}

impl Connection {
    /// A datagram of `len` bytes arrived from `from`: count it toward the
    /// budget of a path under validation.
    pub(super) fn on_datagram_from(&mut self, from: SocketAddr, len: usize) {
        self.rx.remote = from;
        self.rx.len = len as u64;
        if from == self.remote {
            if let Some(v) = self.path_validation.as_mut() {
                v.received = v.received.saturating_add(len as u64);
            }
        }
    }

    /// Whether `frame` makes a packet non-probing.
    pub(super) fn frame_is_non_probing(frame: &Frame<'_>) -> bool {
        !is_probing(frame)
    }

    /// A 1-RTT packet was processed: `newest` when it has the largest
    /// packet number so far, `non_probing` when it carried a frame other
    /// than the probing ones. Follows the peer if it moved.
    pub(super) fn on_packet_from_peer(&mut self, now: Instant, newest: bool, non_probing: bool) {
        let from = self.rx.remote;
        // The client sends to another of our addresses (our preferred
        // address, `preferred_address`).
        let local_moved = self.rx.local.filter(|l| Some(*l) != self.local);
        if (from == self.remote && local_moved.is_none())
            || !newest
            || !non_probing
            || !self.side.is_server()
            || !self.handshake.confirmed
            || self.is_closed()
        {
            return;
        }
        if let Some(local) = local_moved {
            if from == self.remote {
                self.on_local_address_change(now, local);
                return;
            }
            // Both ends changed: answer from where it now sends, and
            // validate its new address as below.
            self.local = Some(local);
        }
        let previous = match self.path_validation {
            // A move while the last one is still being validated: the
            // address to fall back to is still the last validated one.
            Some(v) => v.previous,
            None => self.remote,
        };
        tracing::debug!(%previous, new = %from, "peer moved: validating the new path");
        let ip_changed = from.ip() != self.remote.ip();
        self.remote = from;
        let mut challenge = [0u8; 8];
        self.rng.fill_bytes(&mut challenge);
        self.path_validation = Some(PathValidation {
            challenge,
            previous,
            // The datagram that moved us counts: its budget carries the
            // challenge (an ACK-only client would otherwise never get one).
            received: self.rx.len,
            sent: 0,
            send_pending: true,
        });
        self.stats.path_changes += 1;
        if ip_changed {
            self.reset_path_state(now);
        }
        // §8.2.4: abandon after 3 × max(PTO, initial PTO).
        let initial_pto = crate::rtt::RttEstimator::new(self.config.initial_rtt).pto_base();
        let pto = self.pto_duration(SpaceId::Data).max(initial_pto);
        self.timers.set(Timer::PathValidation, now + pto * 3);
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_path_change(&mut cx);
    }

    /// Congestion control, RTT and the path MTU start over on a new path
    /// (§9.4, §14.3).
    pub(super) fn reset_path_state(&mut self, now: Instant) {
        self.path_mtu.on_new_path();
        let mds = u64::from(self.path_mtu.current());
        let seed = self.rng.next_u64();
        self.cc = self.config.congestion.build_seeded(now, mds, seed);
        self.rtt = crate::rtt::RttEstimator::new(self.config.initial_rtt);
        self.tx.pacer = crate::pacing::Pacer::new(now, mds);
    }

    /// A PATH_RESPONSE arrived: the path is validated if it echoes our
    /// challenge (others are stale or forged, and ignored).
    pub(super) fn on_path_response(&mut self, data: [u8; 8]) {
        if self.path_validation.is_some_and(|v| v.challenge == data) {
            tracing::debug!(remote = %self.remote, "new path validated");
            self.path_validation = None;
            self.timers.stop(Timer::PathValidation);
        }
    }

    /// Validation took too long: go back to the last validated address.
    pub(super) fn on_path_validation_timeout(&mut self, now: Instant) {
        self.timers.stop(Timer::PathValidation);
        let Some(v) = self.path_validation.take() else {
            return;
        };
        tracing::debug!(failed = %self.remote, back_to = %v.previous, "path validation failed");
        self.stats.path_validations_failed += 1;
        let ip_changed = v.previous.ip() != self.remote.ip();
        self.remote = v.previous;
        if ip_changed {
            self.reset_path_state(now);
        }
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_path_change(&mut cx);
    }

    /// A PTO fired: a challenge not yet answered goes out again.
    pub(super) fn on_pto_path_challenge(&mut self) {
        if let Some(v) = self.path_validation.as_mut() {
            v.send_pending = true;
        }
    }

    /// A packet carrying the challenge `data` was declared lost: it goes
    /// out again if the path is still being validated with it. Waiting for
    /// a PTO instead left it unsent while acknowledgements kept coming (no
    /// PTO fires then), until validation timed out.
    pub(super) fn on_path_challenge_lost(&mut self, data: [u8; 8]) {
        if let Some(v) = self
            .path_validation
            .as_mut()
            .filter(|v| v.challenge == data)
        {
            v.send_pending = true;
        }
    }

    /// Whether a PATH_CHALLENGE waits to be sent.
    pub(super) fn path_challenge_pending(&self) -> bool {
        self.path_validation.is_some_and(|v| v.send_pending)
    }

    /// Write the pending PATH_CHALLENGE and note it in `record`, so that
    /// its loss sends it again and [`Connection::pad_challenge_datagram`]
    /// pads its datagram. Returns whether it wrote.
    pub(super) fn write_path_challenge(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &mut SentPacket,
    ) -> bool {
        let Some(v) = self.path_validation.as_mut() else {
            return false;
        };
        if !v.send_pending || buf.len() + 9 > max_end {
            return false;
        }
        Frame::PathChallenge(v.challenge).encode(buf);
        v.send_pending = false;
        record
            .retransmits
            .push(Retransmit::PathChallenge(v.challenge));
        true
    }

    /// A packet that carries a PATH_CHALLENGE is padded so that its
    /// datagram reaches 1200 bytes when `max_end` (the path's budget)
    /// allows (§8.2.1). Done once the packet's frames are in, so that a
    /// replica travelling with the challenge counts toward the 1200 bytes
    /// instead of being squeezed by padding.
    pub(super) fn pad_challenge_datagram(
        &self,
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &SentPacket,
    ) {
        let challenged = record
            .retransmits
            .iter()
            .any(|r| matches!(r, Retransmit::PathChallenge(_)));
        let pad_to = max_end.min(CHALLENGE_DATAGRAM);
        if challenged && buf.len() < pad_to {
            buf.resize(pad_to, 0); // PADDING frames
        }
    }

    /// A datagram of `len` bytes left for the peer: count it against the
    /// new path's budget while it is unvalidated.
    pub(super) fn on_datagram_sent_on_path(&mut self, len: usize) {
        if let Some(v) = self.path_validation.as_mut() {
            v.sent = v.sent.saturating_add(len as u64);
        }
    }

    /// Bytes we may still send to the peer's (new, unvalidated) address;
    /// unlimited when no path is under validation.
    pub(super) fn path_budget(&self) -> u64 {
        self.path_validation.map_or(u64::MAX, |v| v.budget())
    }
}
