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
//!   (we started the update and the peer has not followed): opened with the
//!   previous key while it is kept, dropped otherwise;
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
//! connection also updates by itself before a key has protected as many
//! packets as its AEAD's confidentiality limit allows.
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
use crate::crypto::{self, Keys, NextSecrets, PacketKeySet};

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
        if !self.handshake_confirmed {
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

    /// Open a 1-RTT packet whose header protection is removed, choosing the
    /// key by its key phase bit (see the module documentation). Returns the
    /// payload range, or `None` (nothing changed) when no key opens it.
    pub(super) fn open_one_rtt(
        &mut self,
        first: u8,
        packet: &mut [u8],
        header_len: usize,
        pn: u64,
        now: Instant,
    ) -> Option<Range<usize>> {
        let pto = self.pto_duration(SpaceId::Data);
        let next_pn = self.space(SpaceId::Data).next_pn;
        let k = self.one_rtt.as_mut()?;
        let phase = first & packet::KEY_PHASE_BIT != 0;
        if phase == k.phase {
            let range = crypto::open(&*k.keys.remote.packet, packet, header_len, pn).ok()?;
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
            return Some(range);
        }
        let old = k.first_remote_pn.is_none_or(|first_pn| pn < first_pn);
        if old {
            let prev = k.prev_remote.as_ref()?;
            return crypto::open(&**prev, packet, header_len, pn).ok();
        }
        // The peer started a key update: try the keys derived ahead. Only a
        // packet that authenticates moves the phase.
        let range = crypto::open(&*k.next.remote, packet, header_len, pn).ok()?;
        k.rotate(next_pn);
        k.first_remote_pn = Some(pn);
        self.timers.set(Timer::KeyDiscard, now + pto * 3);
        tracing::debug!(side = ?self.side, phase = k.phase, "key update followed");
        Some(range)
    }
}
