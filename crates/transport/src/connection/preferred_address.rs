//! A server's preferred address (RFC 9000 §9.6, §18.2): the server offers
//! a second address in its transport parameters, with a connection ID
//! (sequence number 1) and a stateless reset token for it; the client,
//! once the handshake is confirmed, probes that address and moves there
//! when the path validates.
//!
//! Server: [`Connection::accept`] puts the parameter in when the
//! [`ServerConfig`](crate::ServerConfig) names preferred addresses and the
//! endpoint's connection IDs are not zero-length (§18.2: a server using
//! zero-length IDs MUST NOT offer one). The connection ID and token come
//! from a stream of the connection's seed of their own, so a server
//! without a preferred address draws exactly what it always drew. When
//! the client's non-probing packets start arriving at the preferred
//! address (the driver says which of the server's addresses a datagram was
//! sent to), the server sends from there too; that is a new path, so
//! congestion control and RTT start over and the policy's
//! `on_path_change` runs, as in `migration`. The client's address did not
//! change, so there is nothing to validate (§9.6.2 asks for validation
//! only of a new client address, handled by `migration`).
//!
//! Client ([`TransportConfig::follow_preferred_address`]): after the
//! handshake is confirmed (§9.6.1 forbids earlier), a PATH_CHALLENGE in a
//! datagram padded to 1200 bytes goes to the preferred address of its own
//! address family, with the parameter's connection ID; it is sent again
//! every PTO, three times in all. A PATH_RESPONSE echoing it (on any path,
//! §8.2.2) moves the client: every later packet goes to the preferred
//! address with that connection ID, the handshake's connection ID is
//! retired, and the path starts afresh. No answer after the third PTO: the
//! client stays where it is (§9.6.1: "the client ... MAY continue using
//! the original address"). Datagrams from either server address are read
//! throughout.
//!
//! [`TransportConfig::follow_preferred_address`]: crate::TransportConfig::follow_preferred_address

use std::net::SocketAddr;

use rand::RngCore;
use wire::cid::ConnectionId;
use wire::frame::Frame;
use wire::packet;
use wire::time::Instant;
use wire::transport_params::{PreferredAddress, TransportParameters};
use wire::TransportErrorCode;

use super::timer::Timer;
use super::{Connection, SpaceId, Transmit};
use crate::cid_issuer::CidIssuer;
use crate::config::PreferredAddresses;
use crate::crypto;
use crate::error::TransportError;
use crate::rng::{RngSeed, StackRng};

/// Datagrams carrying PATH_CHALLENGE or PATH_RESPONSE are padded to this
/// (RFC 9000 §8.2.1, §8.2.2), within the anti-amplification budget.
pub(super) const PROBE_DATAGRAM: usize = 1200;
/// AEAD tag length (every QUIC v1 cipher suite).
const TAG_LEN: usize = 16;
/// The stream of the connection's seed the preferred address's connection
/// ID and reset token come from.
const PREFERRED_STREAM: u64 = 0x9a;

/// Client: where the client is with the server's preferred address.
#[derive(Clone, Copy, Debug)]
pub(super) enum PreferredPath {
    /// None offered, not for us, or switched off.
    None,
    /// Offered; probing starts when the handshake is confirmed.
    Offered { addr: SocketAddr },
    /// Being validated.
    Probing {
        addr: SocketAddr,
        challenge: [u8; 8],
        /// The challenge waits to be (re)sent.
        send_pending: bool,
        /// Challenges sent so far.
        tries: u8,
        /// When validation is abandoned and the client stays (RFC 9000
        /// §8.2.4: three times the larger of the current PTO and the PTO
        /// of a new path at the initial RTT).
        give_up_at: Instant,
    },
    /// The client moved there (from `original`).
    Moved {
        addr: SocketAddr,
        original: SocketAddr,
    },
    /// Validation failed: the client stayed on the original path.
    Failed { addr: SocketAddr },
}

impl PreferredPath {
    /// The preferred address, whatever became of it.
    fn addr(&self) -> Option<SocketAddr> {
        match *self {
            PreferredPath::None => None,
            PreferredPath::Offered { addr }
            | PreferredPath::Probing { addr, .. }
            | PreferredPath::Moved { addr, .. }
            | PreferredPath::Failed { addr } => Some(addr),
        }
    }
}

/// A PATH_CHALLENGE to answer, and the path it arrived on: the
/// PATH_RESPONSE goes back on that path (RFC 9000 §8.2.2).
#[derive(Clone, Copy, Debug)]
pub(super) struct PendingResponse {
    pub data: [u8; 8],
    /// Our address the challenge was sent to (`None`: unknown, the
    /// current one).
    pub local: Option<SocketAddr>,
    /// The peer's address it came from.
    pub remote: SocketAddr,
    /// The datagram was large enough to pad the response to 1200 bytes
    /// within three times its size.
    pub pad: bool,
}

/// Server: the preferred_address parameter for `addresses`, its connection
/// ID (of `cid_len` bytes, the handshake ID's length) and reset token drawn
/// by `issuer` from `seed`'s own stream. `None` when no address is
/// configured or our IDs are zero-length.
pub(super) fn server_offer(
    addresses: &PreferredAddresses,
    cid_len: usize,
    issuer: &CidIssuer,
    seed: RngSeed,
) -> Option<PreferredAddress> {
    if addresses.is_empty() || cid_len == 0 {
        return None;
    }
    let mut rng = StackRng::new(seed).fork(PREFERRED_STREAM);
    let cid = issuer.new_cid_of_len(&mut rng, cid_len);
    let reset_token = issuer.reset_token(&mut rng, &cid);
    Some(PreferredAddress {
        v4: addresses.v4,
        v6: addresses.v6,
        cid,
        reset_token,
    })
}

impl Connection {
    /// Server: route and remember the preferred address's connection ID
    /// (sequence number 1).
    pub(super) fn register_preferred_cid(&mut self, now: Instant, offer: &PreferredAddress) {
        self.cids.add_preferred(offer.cid, offer.reset_token);
        self.drain_cid_events(now);
    }

    /// Client: the server's transport parameters arrived; note its
    /// preferred address if it offers one we can use.
    pub(super) fn on_peer_preferred_address(
        &mut self,
        params: &TransportParameters,
    ) -> Result<(), TransportError> {
        let Some(raw) = params.preferred_address.as_deref() else {
            return Ok(());
        };
        if !self.side.is_client() {
            return Ok(());
        }
        let tp_err = |r| TransportError::new(TransportErrorCode::TRANSPORT_PARAMETER_ERROR, r);
        let pa =
            PreferredAddress::decode(raw).map_err(|_| tp_err("malformed preferred_address"))?;
        if self.cids.remote_cid().is_empty() {
            // RFC 9000 §18.2: "A server that chooses a zero-length
            // connection ID MUST NOT provide a preferred address."
            return Err(tp_err("preferred_address with a zero-length connection ID"));
        }
        // Its connection ID has sequence number 1 (RFC 9000 §5.1.1).
        self.cids
            .on_new_connection_id(1, 0, pa.cid, pa.reset_token)?;
        if !self.config.follow_preferred_address {
            return Ok(());
        }
        if let Some(addr) = pa.for_family_of(self.remote).filter(|a| *a != self.remote) {
            self.preferred = PreferredPath::Offered { addr };
        }
        Ok(())
    }

    /// Client: the handshake is confirmed; start probing the preferred
    /// address, if there is one.
    pub(super) fn start_preferred_probe(&mut self, now: Instant) {
        let PreferredPath::Offered { addr } = self.preferred else {
            return;
        };
        let mut challenge = [0u8; 8];
        self.rng.fill_bytes(&mut challenge);
        tracing::debug!(%addr, "probing the server's preferred address");
        let initial_pto = crate::rtt::RttEstimator::new(self.config.initial_rtt).pto_base();
        let give_up_at = now + self.pto_duration(SpaceId::Data).max(initial_pto) * 3;
        self.preferred = PreferredPath::Probing {
            addr,
            challenge,
            send_pending: true,
            tries: 0,
            give_up_at,
        };
        self.arm_probe_timer(now, 0, give_up_at);
    }

    /// The challenge goes again after the current path's PTO, doubled for
    /// each challenge already sent (RFC 9000 §8.2.1: no more often than an
    /// Initial would be), and no later than the give-up time. A lost
    /// challenge or answer (a loaded client's socket drops datagrams) is
    /// retried within milliseconds on a short path, where waiting for the
    /// PTO at the initial RTT (about a second) let a short transfer end
    /// before the client moved.
    fn arm_probe_timer(&mut self, now: Instant, tries: u8, give_up_at: Instant) {
        let backoff = 1u32 << tries.saturating_sub(1).min(10);
        let retry = now + self.pto_duration(SpaceId::Data) * backoff;
        self.timers
            .set(Timer::PathValidation, retry.min(give_up_at.max(now)));
    }

    /// Client: a PTO passed without an answer: challenge again, or after
    /// the last try stay on the original path.
    pub(super) fn on_preferred_probe_timeout(&mut self, now: Instant) {
        self.timers.stop(Timer::PathValidation);
        let PreferredPath::Probing {
            addr,
            challenge,
            tries,
            give_up_at,
            ..
        } = self.preferred
        else {
            return;
        };
        if now >= give_up_at {
            tracing::debug!(%addr, "preferred address did not validate; staying");
            self.stats.path_validations_failed += 1;
            self.preferred = PreferredPath::Failed { addr };
            return;
        }
        self.preferred = PreferredPath::Probing {
            addr,
            challenge,
            send_pending: true,
            tries,
            give_up_at,
        };
        self.arm_probe_timer(now, tries, give_up_at);
    }

    /// Client: a PATH_RESPONSE arrived; returns whether it validated the
    /// preferred address (and the client moved there).
    pub(super) fn on_preferred_path_response(&mut self, now: Instant, data: [u8; 8]) -> bool {
        let PreferredPath::Probing {
            addr, challenge, ..
        } = self.preferred
        else {
            return false;
        };
        if challenge != data {
            return false;
        }
        self.timers.stop(Timer::PathValidation);
        let original = self.remote;
        tracing::debug!(%original, %addr, "moving to the server's preferred address");
        self.preferred = PreferredPath::Moved { addr, original };
        self.remote = addr;
        // The preferred address's connection ID from now on; the
        // handshake's is retired (RFC 9000 §9.6.1, §5.1.2).
        self.cids.use_from(1);
        self.stats.path_changes += 1;
        if addr.ip() != original.ip() {
            self.reset_path_state(now);
        }
        // A non-probing packet soon, so the server follows.
        self.space_mut(SpaceId::Data).ping_pending = true;
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_path_change(&mut cx);
        true
    }

    /// Client: whether datagrams from `from` are the server's (its address,
    /// or its preferred address).
    pub(super) fn is_server_address(&self, from: SocketAddr) -> bool {
        from == self.remote
            || self.preferred.addr() == Some(from)
            || matches!(self.preferred, PreferredPath::Moved { original, .. } if original == from)
    }

    /// The server's preferred address this client moved to, if it did.
    pub fn moved_to_preferred_address(&self) -> Option<SocketAddr> {
        match self.preferred {
            PreferredPath::Moved { addr, .. } => Some(addr),
            _ => None,
        }
    }

    /// Server: the client now sends its non-probing packets to another of
    /// our addresses from the same address of its own: send from there.
    pub(super) fn on_local_address_change(&mut self, now: Instant, local: SocketAddr) {
        let previous = self.local;
        tracing::debug!(?previous, new = %local, "client moved to another of our addresses");
        self.local = Some(local);
        self.stats.path_changes += 1;
        if previous.is_none_or(|p| p.ip() != local.ip()) {
            self.reset_path_state(now);
        }
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_path_change(&mut cx);
    }

    /// Queue the answer to a PATH_CHALLENGE from the datagram being read.
    pub(super) fn queue_path_response(&mut self, data: [u8; 8]) {
        if self.path_responses.len() >= 8 {
            return;
        }
        self.path_responses.push_back(PendingResponse {
            data,
            local: self.rx.local,
            remote: self.rx.remote,
            pad: self.rx.len.saturating_mul(3) >= PROBE_DATAGRAM as u64,
        });
    }

    /// Whether `r` arrived on the current path (its answer may ride in an
    /// ordinary packet).
    pub(super) fn on_current_path(&self, r: &PendingResponse) -> bool {
        r.remote == self.remote && (r.local.is_none() || r.local == self.local)
    }

    /// A datagram that is not on the current path: the client's challenge
    /// to the preferred address, or a PATH_RESPONSE to a challenge that
    /// came on another path. `None` when there is none to send.
    pub(super) fn poll_probe(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if self.one_rtt.is_none() || !self.handshake.complete {
            return None;
        }
        if let PreferredPath::Probing {
            addr,
            challenge,
            send_pending: true,
            tries,
            give_up_at,
        } = self.preferred
        {
            let dcid = self.cids.remote_cid_by_seq(1)?;
            self.preferred = PreferredPath::Probing {
                addr,
                challenge,
                send_pending: false,
                tries: tries.saturating_add(1),
                give_up_at,
            };
            return self.write_probe(
                now,
                buf,
                dcid,
                Frame::PathChallenge(challenge),
                PROBE_DATAGRAM,
                addr,
                None,
            );
        }
        let i = self
            .path_responses
            .iter()
            .position(|r| !self.on_current_path(r))?;
        let r = self.path_responses.remove(i)?;
        let pad = if r.pad { PROBE_DATAGRAM } else { 0 };
        let dcid = self.cids.remote_cid();
        self.write_probe(
            now,
            buf,
            dcid,
            Frame::PathResponse(r.data),
            pad,
            r.remote,
            r.local.or(self.local),
        )
    }

    /// One 1-RTT packet with `frame`, PADDING up to `pad_to` bytes of
    /// datagram, to `dcid` at `destination` from `source`. Not tracked for
    /// loss: a probe is not retransmitted but sent anew, and does not count
    /// toward the current path's congestion window (RFC 9000 §9.4).
    #[allow(clippy::too_many_arguments)]
    fn write_probe(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        dcid: ConnectionId,
        frame: Frame<'_>,
        pad_to: usize,
        destination: SocketAddr,
        source: Option<SocketAddr>,
    ) -> Option<Transmit> {
        buf.clear();
        let space = SpaceId::Data;
        let pn = self.space(space).next_pn;
        let pn_len = packet::pn_len_for(pn, self.space(space).largest_acked);
        let phase = self.one_rtt.as_ref().is_some_and(|k| k.phase);
        let pn_offset = packet::write_short_header(buf, false, phase, &dcid, pn, pn_len);
        frame.encode(buf);
        let pad_to = pad_to.min(usize::from(self.path_mtu.current()));
        let min_end = (pn_offset + 4).max(pad_to.saturating_sub(TAG_LEN));
        if buf.len() < min_end {
            buf.resize(min_end, 0); // PADDING frames
        }
        buf.resize(buf.len() + TAG_LEN, 0);
        let keys = self.one_rtt.as_ref().map(|k| &k.keys.local)?;
        if crypto::seal(keys, &mut buf[..], pn_offset, pn_len, pn).is_err() {
            tracing::error!("packet protection failed");
            return None;
        }
        self.space_mut(space).next_pn += 1;
        self.stats.packets_sent += 1;
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        for s in &mut self.subscribers {
            s.packet_sent(now, space, pn, buf.len(), true);
        }
        Some(Transmit {
            destination,
            source,
            size: buf.len(),
            ecn: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addresses() -> PreferredAddresses {
        let mut a = PreferredAddresses::default();
        a.add("127.0.0.2:4434".parse().unwrap()).unwrap();
        a
    }

    fn plain() -> CidIssuer {
        CidIssuer::new(8, None, None)
    }

    #[test]
    fn a_server_offers_its_address_with_a_connection_id_of_its_length() {
        let offer = server_offer(&addresses(), 8, &plain(), RngSeed::Fixed(3)).expect("an offer");
        assert_eq!(offer.cid.len(), 8);
        assert_eq!(offer.v4, Some("127.0.0.2:4434".parse().unwrap()));
        assert_eq!(offer.v6, None);
        // Another seed, another connection ID and token.
        let other = server_offer(&addresses(), 8, &plain(), RngSeed::Fixed(4)).expect("an offer");
        assert_ne!(offer.cid, other.cid);
        assert_ne!(offer.reset_token, other.reset_token);
    }

    #[test]
    fn no_offer_without_addresses_or_with_zero_length_ids() {
        assert!(server_offer(
            &PreferredAddresses::default(),
            8,
            &plain(),
            RngSeed::Fixed(3)
        )
        .is_none());
        // RFC 9000 §18.2: zero-length connection IDs, no preferred address.
        assert!(server_offer(&addresses(), 0, &plain(), RngSeed::Fixed(3)).is_none());
    }

    #[test]
    fn one_address_per_family() {
        let mut a = addresses();
        assert!(a.add("127.0.0.3:1".parse().unwrap()).is_err());
        assert!(a.add("[::1]:1".parse().unwrap()).is_ok());
        assert!(a.add("[::2]:1".parse().unwrap()).is_err());
        assert_eq!(a.iter().count(), 2);
    }
}
