//! 1-RTT packet protection across key updates (RFC 9001 §6).
//!
//! # How a packet's key is chosen
//!
//! The key phase bit of a short header says which of two keys protects the
//! packet. A packet whose bit matches the current phase is opened with the
//! current key. One whose bit differs is either *old* (sent before the
//! current phase began, and reordered) or *new* (the peer started a key
//! update):
//! - old when its packet number is below the first one the peer sent in the
//!   current phase, or when no packet of the current phase has arrived yet
//!   after an update we started (the peer has not followed): opened with
//!   the previous key while it is kept, dropped otherwise;
//! - new otherwise: tried with the next phase's key.
//!
//! # Failed decryption changes nothing (RFC 9001 §6.3, §9.5)
//!
//! The next phase's packet keys are derived ahead of need, when the current
//! phase begins, and a packet is only *tried* against them: the phase
//! changes after a packet authenticates, never before. A corrupted or forged
//! packet claiming the next phase therefore leaves every key as it was (the
//! bug this module's layout exists to rule out: advancing the secrets before
//! the trial lost the real next keys for good), and since no key is derived
//! on the receive path, the time a packet takes does not reveal whether it
//! authenticated.
//!
//! # Starting an update (RFC 9001 §6.1, §6.6)
//!
//! [`Connection::initiate_key_update`] switches both directions to the next
//! phase at once (the peer answers in the new phase). A further update waits
//! until the peer acknowledged a packet of the current phase. The
//! connection also updates by itself when a key has protected a quarter of
//! the packets its AEAD's confidentiality limit allows (2^23 for AES-GCM;
//! ChaCha20-Poly1305 has none that a connection can reach), and closes with
//! AEAD_LIMIT_REACHED rather than protect a packet past the limit when no
//! update could happen in time (the peer never acknowledged the new phase).
//!
//! # Packets that fail authentication (RFC 9001 §6.6)
//!
//! Every packet that a key was tried on and failed counts, whatever its
//! space or key phase; past the AEAD's integrity limit (2^52 for AES-GCM,
//! 2^36 for ChaCha20-Poly1305) the connection closes with
//! AEAD_LIMIT_REACHED (`recv.rs`, `on_authentication_failure`). A packet no
//! key was tried on (its key discarded or not yet there) does not count.
//!
//! # A peer that breaks the rules (RFC 9001 §6.2, §6.4)
//!
//! Two orderings only a misbehaving peer produces close the connection
//! with KEY_UPDATE_ERROR:
//! - a second update before we sent, under the current keys, an ACK frame
//!   acknowledging a packet of the current phase (§6.2 allows closing:
//!   "An endpoint MAY treat such consecutive key updates as a connection
//!   error of type KEY_UPDATE_ERROR"; a peer following §6.1 never does it,
//!   because it may update only once it has such an acknowledgement). The
//!   first update of a connection is not judged: §6.1 asks the initiator
//!   only to have confirmed the handshake, which a server does before its
//!   client does (the client confirms on HANDSHAKE_DONE), so a client may
//!   rightly see the server's update before its own confirmation, and no
//!   part of RFC 9001 makes an early update an error for the receiver;
//! - a packet of the previous phase numbered above one of the current phase
//!   (§6.4: "An endpoint that successfully removes protection with old keys
//!   when newer keys were used for packets with lower packet numbers MUST
//!   treat this as a connection error of type KEY_UPDATE_ERROR").
//!
//! # Discarding the previous key (RFC 9001 §6.5)
//!
//! The previous read key stays for three PTOs after the first packet of the
//! new phase arrived (not after the update started: until the peer follows
//! an update we started, its packets still come in the old phase), then
//! [`Timer::KeyDiscard`] drops it.

use core::ops::Range;

use rustls::quic::PacketKey;
use wire::packet;
use wire::time::Instant;

use super::{Connection, SpaceId, Timer};
use crate::crypto::{self, CryptoError, Keys, NextSecrets, PacketKeySet};
use crate::error::TransportError;
use wire::TransportErrorCode;

/// Why a received packet was not opened.
#[derive(Debug)]
pub(super) enum OpenError {
    /// No key was tried: the packet's key is gone or not there yet, or the
    /// packet is too short to carry a tag. Not an authentication failure.
    NoKey,
    /// A key was tried and the packet failed authentication (counted
    /// toward the integrity limit, RFC 9001 §6.6).
    Auth,
    /// The packet opened, but under keys the peer must not have used then
    /// (RFC 9001 §6.2, §6.4): the connection closes.
    Fatal(TransportError),
}

impl From<CryptoError> for OpenError {
    fn from(e: CryptoError) -> Self {
        match e {
            CryptoError::DecryptFailed => OpenError::Auth,
            _ => OpenError::NoKey,
        }
    }
}

/// A KEY_UPDATE_ERROR (RFC 9001 §6.7).
const fn key_update_error(reason: &'static str) -> OpenError {
    OpenError::Fatal(TransportError::new(
        TransportErrorCode::KEY_UPDATE_ERROR,
        reason,
    ))
}

/// Packets kept back from the confidentiality limit: what the connection
/// may still protect to close (CONNECTION_CLOSE and its repeats) once no
/// key update is possible (RFC 9001 §6.6 recommends closing before).
const CLOSE_RESERVE: u64 = 16;

/// Why [`Connection::initiate_key_update`] refused to start a key update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyUpdateError {
    /// The handshake is not confirmed yet (RFC 9001 §6.1 forbids an update
    /// before), or the connection never had 1-RTT keys.
    #[error("the handshake is not confirmed yet")]
    NotConfirmed,
    /// No packet of the current key phase has been acknowledged yet, so the
    /// peer may not have followed the previous update (RFC 9001 §6.1).
    #[error("the previous key update is not acknowledged yet")]
    Pending,
    /// The connection is closing or closed.
    #[error("the connection is closed")]
    Closed,
}

/// Fraction of an AEAD's confidentiality limit after which the connection
/// starts a key update by itself: early enough that the update (which waits
/// for an acknowledgement) completes long before the limit.
const CONFIDENTIALITY_MARGIN_DIVISOR: u64 = 4;

/// 1-RTT keys of the current phase, the next phase's keys derived ahead, and
/// the previous phase's read key while it is kept.
pub(super) struct OneRttKeys {
    /// Header protection keys (never updated, RFC 9001 §6) and the current
    /// phase's packet keys.
    pub keys: Keys,
    /// The current key phase bit.
    pub phase: bool,
    /// The previous phase's read key, kept for reordered packets until
    /// [`Timer::KeyDiscard`] fires.
    pub prev_remote: Option<Box<dyn PacketKey>>,
    /// Packet keys of the next phase, derived when the current one began.
    next: PacketKeySet,
    /// Secrets of the phase after `next`.
    secrets: NextSecrets,
    /// Smallest packet number opened with the current phase's read key;
    /// `None` until the peer sends in the current phase.
    first_remote_pn: Option<u64>,
    /// Our first packet number in the current phase. Another update may
    /// start once the peer acknowledged it or a later packet.
    first_local_pn: u64,
    /// Key updates so far, by either side.
    updates: u64,
    /// Packets we may protect in one phase before updating by ourselves.
    update_after: u64,
    /// Packets we may protect in one phase at most: the AEAD's
    /// confidentiality limit (RFC 9001 §6.6), less [`CLOSE_RESERVE`].
    hard_limit: u64,
    /// The largest packet number acknowledged by an ACK frame we sent in
    /// the current phase: once it reaches `first_remote_pn`, the peer may
    /// have learnt that we read its packets of this phase, and may update
    /// again (§6.1, §6.2).
    largest_acked_sent: Option<u64>,
}

impl OneRttKeys {
    /// Keys of phase 0 from the handshake, the secrets of the phases after it.
    pub fn new(keys: Keys, mut secrets: NextSecrets) -> Self {
        let next = secrets.next_packet_keys();
        let limit = keys.local.packet.confidentiality_limit();
        OneRttKeys {
            keys,
            phase: false,
            prev_remote: None,
            next,
            secrets,
            first_remote_pn: None,
            first_local_pn: 0,
            updates: 0,
            update_after: (limit / CONFIDENTIALITY_MARGIN_DIVISOR).max(1),
            hard_limit: limit.saturating_sub(CLOSE_RESERVE).max(1),
            largest_acked_sent: None,
        }
    }

    /// An ACK frame acknowledging up to `largest` leaves in a packet of the
    /// current phase.
    pub fn on_ack_sent(&mut self, largest: u64) {
        self.largest_acked_sent = Some(self.largest_acked_sent.map_or(largest, |l| l.max(largest)));
    }

    /// Whether the peer may start another update: it had an acknowledgement
    /// of a packet of the current phase from us (RFC 9001 §6.1, §6.2). The
    /// first update of the connection needs none (see the module doc).
    fn peer_may_update(&self) -> bool {
        if self.updates == 0 {
            return true;
        }
        match (self.largest_acked_sent, self.first_remote_pn) {
            (Some(acked), Some(first)) => acked >= first,
            _ => false,
        }
    }

    /// Move to the next phase, both directions: the current read key becomes
    /// the previous one, the next phase's keys become current, and the phase
    /// after it is derived now, ahead of need.
    fn rotate(&mut self, first_local_pn: u64) {
        let next = self.secrets.next_packet_keys();
        let current = core::mem::replace(&mut self.next, next);
        let old_remote = core::mem::replace(&mut self.keys.remote.packet, current.remote);
        self.keys.local.packet = current.local;
        self.prev_remote = Some(old_remote);
        self.phase = !self.phase;
        self.first_remote_pn = None;
        self.first_local_pn = first_local_pn;
        self.updates += 1;
        self.largest_acked_sent = None;
    }
}

impl Connection {
    /// Start a 1-RTT key update (RFC 9001 §6.1): from the next packet on,
    /// both directions use the next key phase; the peer follows when it
    /// sees it. Refused before the handshake is confirmed and until the
    /// peer has acknowledged a packet of the current phase. Endpoints need
    /// not do this themselves (the connection updates before its AEAD's
    /// confidentiality limit); it exists to exercise a peer's key update
    /// handling, as interop tests do.
    pub fn initiate_key_update(&mut self) -> Result<(), KeyUpdateError> {
        if self.is_closed() {
            return Err(KeyUpdateError::Closed);
        }
        if !self.handshake.confirmed {
            return Err(KeyUpdateError::NotConfirmed);
        }
        let largest_acked = self.space(SpaceId::Data).largest_acked;
        let next_pn = self.space(SpaceId::Data).next_pn;
        let Some(k) = self.one_rtt.as_mut() else {
            return Err(KeyUpdateError::NotConfirmed);
        };
        if largest_acked.is_none_or(|l| l < k.first_local_pn) {
            return Err(KeyUpdateError::Pending);
        }
        k.rotate(next_pn);
        tracing::debug!(side = ?self.side, phase = k.phase, "key update started");
        // A PING in the new phase: the peer acknowledges it soon even when
        // we send nothing else that elicits an acknowledgement (a receiver
        // sending only ACKs), and that acknowledgement is what allows the
        // next update.
        self.space_mut(SpaceId::Data).ping_pending = true;
        // The previous read key is needed until the peer follows; its
        // three PTOs start when the first packet of the new phase arrives.
        self.timers.stop(Timer::KeyDiscard);
        Ok(())
    }

    /// Number of 1-RTT key updates so far, started by either side.
    pub fn key_updates(&self) -> u64 {
        self.one_rtt.as_ref().map_or(0, |k| k.updates)
    }

    /// Test hook: start a key update by ourselves after `packets` packets in
    /// one key phase instead of a quarter of the AEAD's confidentiality
    /// limit (millions of packets), so tests can reach it.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn set_key_update_interval(&mut self, packets: u64) {
        if let Some(k) = self.one_rtt.as_mut() {
            k.update_after = packets.max(1);
        }
    }

    /// Test hook: the confidentiality limit the connection holds to
    /// instead of its AEAD's (millions of packets), so tests can reach it.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn set_confidentiality_limit(&mut self, packets: u64) {
        if let Some(k) = self.one_rtt.as_mut() {
            k.hard_limit = packets.max(1);
        }
    }

    /// Test hook: start a key update now, ignoring RFC 9001 §6.1 (the
    /// handshake need not be confirmed, the previous update need not be
    /// acknowledged): a misbehaving peer, for tests of what its peer does.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn force_key_update(&mut self) {
        let next_pn = self.space(SpaceId::Data).next_pn;
        if let Some(k) = self.one_rtt.as_mut() {
            k.rotate(next_pn);
            self.space_mut(SpaceId::Data).ping_pending = true;
            self.timers.stop(Timer::KeyDiscard);
        }
    }

    /// RFC 9001 §6.6: start a key update before the current key has
    /// protected as many packets as its confidentiality limit allows.
    /// Called on the receive path, where the acknowledgement that makes an
    /// update possible arrives.
    pub(super) fn update_keys_if_worn(&mut self) {
        let next_pn = self.space(SpaceId::Data).next_pn;
        let worn = self
            .one_rtt
            .as_ref()
            .is_some_and(|k| next_pn.saturating_sub(k.first_local_pn) >= k.update_after);
        if worn && self.initiate_key_update().is_ok() {
            tracing::debug!(side = ?self.side, "key update: confidentiality limit near");
        }
    }

    /// RFC 9001 §6.6: "Endpoints MUST initiate a key update before sending
    /// more protected packets than the confidentiality limit for the
    /// selected AEAD permits. If a key update is not possible [...], the
    /// endpoint MUST stop using the connection"; closing with
    /// AEAD_LIMIT_REACHED before that point is RECOMMENDED. The update
    /// starts at a quarter of the limit ([`Connection::update_keys_if_worn`]);
    /// a peer that never acknowledges the new phase meets this instead.
    /// Checked before each datagram is built.
    pub(super) fn confidentiality_exhausted(&self) -> bool {
        let next_pn = self.space(SpaceId::Data).next_pn;
        self.one_rtt
            .as_ref()
            .is_some_and(|k| next_pn.saturating_sub(k.first_local_pn) >= k.hard_limit)
    }

    /// Open a 1-RTT packet whose header protection is removed, choosing the
    /// key by its key phase bit (see the module documentation). Returns the
    /// payload range; when no key opens it, nothing changed.
    pub(super) fn open_one_rtt(
        &mut self,
        first: u8,
        packet: &mut [u8],
        header_len: usize,
        pn: u64,
        now: Instant,
    ) -> Result<Range<usize>, OpenError> {
        let pto = self.pto_duration(SpaceId::Data);
        let next_pn = self.space(SpaceId::Data).next_pn;
        let k = self.one_rtt.as_mut().ok_or(OpenError::NoKey)?;
        let phase = first & packet::KEY_PHASE_BIT != 0;
        if phase == k.phase {
            let range = crypto::open(&*k.keys.remote.packet, packet, header_len, pn)?;
            match k.first_remote_pn {
                Some(first_pn) => k.first_remote_pn = Some(first_pn.min(pn)),
                None => {
                    k.first_remote_pn = Some(pn);
                    if k.prev_remote.is_some() {
                        // The peer is in the new phase: old packets still in
                        // flight arrive within about three PTOs.
                        self.timers.set(Timer::KeyDiscard, now + pto * 3);
                    }
                }
            }
            return Ok(range);
        }
        // No packet of the current phase yet: after an update we started,
        // the peer's packets are still old; before any update (phase 0),
        // the peer may have updated first.
        let old = match k.first_remote_pn {
            Some(first_pn) => pn < first_pn,
            None => k.prev_remote.is_some(),
        };
        if old {
            let prev = k.prev_remote.as_ref().ok_or(OpenError::NoKey)?;
            return Ok(crypto::open(&**prev, packet, header_len, pn)?);
        }
        // The peer started a key update: try the keys derived ahead. Only a
        // packet that authenticates moves the phase. A copy is kept to try
        // the previous key after a failure (a failed trial wipes the
        // buffer): §6.4's check, rare (one packet per update, or forgeries).
        let copy = k.prev_remote.as_ref().map(|_| packet.to_vec());
        match crypto::open(&*k.next.remote, packet, header_len, pn) {
            Ok(range) => {
                // RFC 9001 §6.2: a second update before we acknowledged, in
                // the current phase, a packet of the current phase.
                if !k.peer_may_update() {
                    return Err(key_update_error(
                        "key update before the previous one was acknowledged",
                    ));
                }
                k.rotate(next_pn);
                k.first_remote_pn = Some(pn);
                self.timers.set(Timer::KeyDiscard, now + pto * 3);
                tracing::debug!(side = ?self.side, phase = k.phase, "key update followed");
                Ok(range)
            }
            Err(e) => {
                // RFC 9001 §6.4: the previous phase's key for a packet
                // numbered above one of the current phase.
                if let (Some(prev), Some(mut copy)) = (k.prev_remote.as_ref(), copy) {
                    if crypto::open(&**prev, &mut copy, header_len, pn).is_ok() {
                        return Err(key_update_error(
                            "old keys after newer keys protected a lower packet number",
                        ));
                    }
                }
                Err(e.into())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use wire::time::Duration;
    use wire::TransportErrorCode;

    use crate::connection::{ConnectionError, SpaceId};
    use crate::test_pair::Pair;

    /// Hand what the client has to send now straight to the server.
    fn client_to_server_now(pair: &mut Pair) -> usize {
        let now = pair.now;
        let mut buf = Vec::new();
        let mut n = 0;
        while let Some(t) = pair.client.poll_transmit(now, &mut buf) {
            let mut d = buf[..t.size].to_vec();
            pair.server
                .handle_datagram(now, pair.client_addr, None, &mut d);
            n += 1;
        }
        n
    }

    /// The client's next packets go out under the other phase's sending
    /// key (swapped with the one derived ahead) and phase bit: a sender
    /// that can go back to its previous keys, as no correct one does.
    fn swap_client_send_phase(pair: &mut Pair) {
        let c = pair.client();
        let k = c.one_rtt.as_mut().expect("1-RTT keys");
        core::mem::swap(&mut k.keys.local.packet, &mut k.next.local);
        k.phase = !k.phase;
        c.space_mut(SpaceId::Data).ping_pending = true;
    }

    /// RFC 9001 §6.4: "An endpoint that successfully removes protection
    /// with old keys when newer keys were used for packets with lower
    /// packet numbers MUST treat this as a connection error of type
    /// KEY_UPDATE_ERROR."
    #[test]
    fn old_keys_after_newer_ones_are_a_key_update_error() {
        let mut pair = Pair::default_pair();
        pair.connect();
        let confirmed = pair.drive_until(Duration::from_secs(5), |p| {
            p.client().is_handshake_confirmed()
        });
        assert!(confirmed);
        pair.drive_until(Duration::from_millis(200), |_| false);
        // Phase 1: the server follows.
        swap_client_send_phase(&mut pair);
        assert!(client_to_server_now(&mut pair) > 0);
        assert_eq!(pair.server().key_updates(), 1);
        assert!(!pair.server().is_closed());
        // Back to phase 0's key, with higher packet numbers.
        swap_client_send_phase(&mut pair);
        assert!(client_to_server_now(&mut pair) > 0);
        match pair.server().close_reason() {
            Some(ConnectionError::Transport(e)) => {
                assert_eq!(e.code, TransportErrorCode::KEY_UPDATE_ERROR);
            }
            other => panic!("expected KEY_UPDATE_ERROR, closed for {other:?}"),
        }
    }

    /// A reordered packet of the previous phase (lower packet number than
    /// the first of the new phase) is read, not an error.
    #[test]
    fn a_late_packet_of_the_previous_phase_is_no_error() {
        let mut pair = Pair::default_pair();
        pair.connect();
        let confirmed = pair.drive_until(Duration::from_secs(5), |p| {
            p.client().is_handshake_confirmed()
        });
        assert!(confirmed);
        pair.drive_until(Duration::from_millis(200), |_| false);
        // A phase-0 packet held back.
        let now = pair.now;
        pair.client().space_mut(SpaceId::Data).ping_pending = true;
        let mut buf = Vec::new();
        let t = pair.client.poll_transmit(now, &mut buf).expect("a PING");
        let mut late = buf[..t.size].to_vec();
        while pair.client.poll_transmit(now, &mut buf).is_some() {}
        swap_client_send_phase(&mut pair);
        assert!(client_to_server_now(&mut pair) > 0);
        assert_eq!(pair.server().key_updates(), 1);
        let received = pair.server().stats().packets_received;
        pair.server
            .handle_datagram(now, pair.client_addr, None, &mut late);
        assert!(
            !pair.server().is_closed(),
            "{:?}",
            pair.server().close_reason()
        );
        assert_eq!(pair.server().stats().packets_received, received + 1);
    }
}
