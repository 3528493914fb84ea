//! The receive path: datagrams to packets, packets to frames (RFC 9000 §12,
//! §17; RFC 9001 §5).

use std::net::SocketAddr;

use wire::frame::{Frame, FrameIter};
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::Instant;
use wire::TransportErrorCode;

use super::key_phase::OpenError;
use super::{Connection, ConnectionError, Event, SpaceId, State, Timer};
use crate::crypto;
use crate::error::TransportError;

/// What the receive path keeps between and within datagrams.
///
/// Exists so the datagram being processed (where it came from and went
/// to, its size and ECN codepoint, whether it was readable) is one value,
/// set when it arrives and read by the frames it carries (path
/// validation, migration, ECN counts), and so RFC 9001 §6.6's count of
/// packets that failed authentication has one owner.
#[derive(Debug)]
pub(super) struct ReceiveState {
    /// Which of our addresses the datagram being processed was sent to.
    pub(super) local: Option<SocketAddr>,
    /// Where the datagram being processed came from.
    pub(super) remote: SocketAddr,
    /// Its size, bytes.
    pub(super) len: u64,
    /// Its ECN codepoint.
    pub(super) ecn: Option<wire::ecn::Ecn>,
    /// A packet of it authenticated (or waits for keys): it is no
    /// stateless reset (RFC 9000 §10.3.1).
    pub(super) readable: bool,
    /// Received packets that failed authentication, all keys together
    /// (RFC 9001 §6.6).
    auth_failures: u64,
    /// A test's integrity limit in place of the AEADs' own.
    integrity_limit_override: Option<u64>,
}

impl ReceiveState {
    /// Nothing received yet from the peer at `remote`.
    pub(super) fn new(remote: SocketAddr) -> ReceiveState {
        ReceiveState {
            local: None,
            remote,
            len: 0,
            ecn: None,
            readable: false,
            auth_failures: 0,
            integrity_limit_override: None,
        }
    }
}

/// What to do with a packet of a space, given the keys and handshake state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Readiness {
    /// Its keys are here and it may be processed.
    Read,
    /// Not yet: keep it ([`super::spaces::DeferredPackets`]).
    Defer,
    /// Never: its keys are discarded.
    Drop,
}

/// Reserved header bits that must be zero once protection is removed.
const LONG_RESERVED_BITS: u8 = 0x0c;
const SHORT_RESERVED_BITS: u8 = 0x18;

/// A Data-space packet with a long header is a 0-RTT packet (1-RTT
/// packets have short headers: RFC 9000 §17.2.3, §17.3).
fn is_zero_rtt(space: SpaceId, packet: &[u8]) -> bool {
    space == SpaceId::Data && packet.first().is_some_and(|b| b & 0x80 != 0)
}

/// The last 16 bytes of `data`, when it is long enough to be a stateless
/// reset (RFC 9000 §10.3: at least 21 bytes).
fn reset_tail(data: &[u8]) -> Option<[u8; 16]> {
    if data.len() < crate::cid_issuer::MIN_STATELESS_RESET {
        return None;
    }
    let mut tail = [0u8; 16];
    tail.copy_from_slice(&data[data.len() - 16..]);
    Some(tail)
}

impl Connection {
    /// Process one UDP datagram from `remote`. The buffer is decrypted in
    /// place. Undecryptable or malformed packets are dropped; protocol
    /// violations close the connection with the right error code.
    /// `ecn` is the ECN codepoint of the datagram's IP header, when the
    /// driver can read it (counted per packet and reported in our ACK
    /// frames: RFC 9000 §13.4.1); `None` for Not-ECT or unknown.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        data: &mut [u8],
    ) {
        self.handle_datagram_on(now, None, remote, ecn, data);
    }

    /// [`Connection::handle_datagram`] for a driver with more than one
    /// address (a server with a preferred address): `local` is the one
    /// the datagram was sent to.
    pub fn handle_datagram_on(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        data: &mut [u8],
    ) {
        self.rx.local = local;
        if self.local.is_none() && self.side.is_server() {
            self.local = local;
        }
        self.rx.ecn = ecn;
        self.stats.datagrams_received += 1;
        self.stats.bytes_received += data.len() as u64;
        self.validation.on_received(data.len());
        self.on_datagram_from(remote, data.len());
        // RFC 9000 §10.3.1: a datagram we cannot process may be a
        // stateless reset, recognised by its last 16 bytes (kept before
        // decryption in place changes them).
        let tail = reset_tail(data);
        match self.state {
            State::Drained | State::Draining => return,
            State::Closing => {
                if tail.is_some_and(|t| self.is_stateless_reset(&t)) {
                    // The peer is gone: stop repeating the close.
                    self.enter_draining(now, ConnectionError::StatelessReset);
                    return;
                }
                // RFC 9000 §10.2.1: answer with CONNECTION_CLOSE again.
                self.close.resend();
                return;
            }
            _ => {}
        }
        if self.side.is_client() && !self.is_server_address(remote) {
            // A client reads only its server's addresses (the one it
            // connected to, and its preferred address).
            return;
        }
        self.rx.readable = false;
        self.read_packets(now, data);
        if let Some(t) = tail {
            if !self.rx.readable && !self.is_closed() && self.is_stateless_reset(&t) {
                tracing::debug!(side = ?self.side, "stateless reset received");
                self.enter_draining(now, ConnectionError::StatelessReset);
            }
        }
    }

    /// Whether `tail` (a datagram's last 16 bytes) is the stateless reset
    /// token of a peer connection ID we have used.
    fn is_stateless_reset(&self, tail: &[u8; 16]) -> bool {
        self.cids.is_stateless_reset(tail, self.probed_peer_cid())
    }

    /// The peer's connection ID other than the active one that we have
    /// sent to: the preferred address's (sequence number 1), once the
    /// client probed it.
    fn probed_peer_cid(&self) -> Option<u64> {
        let probed = !matches!(
            self.preferred,
            super::preferred_address::PreferredPath::None
                | super::preferred_address::PreferredPath::Offered { .. }
        );
        probed.then_some(1)
    }

    /// The stateless reset tokens that end this connection (RFC 9000
    /// §10.3.1): those of the peer's IDs we have used. The endpoint indexes
    /// them, to hand it a reset whose random DCID routes nowhere.
    pub(crate) fn peer_reset_tokens(&self) -> [Option<[u8; 16]>; 2] {
        self.cids.used_reset_tokens(self.probed_peer_cid())
    }

    /// What [`Connection::peer_reset_tokens`] depends on: equal keys, equal
    /// tokens, so the endpoint, which asks after every input and every
    /// poll, reads them only when the key moved.
    pub(crate) fn peer_reset_tokens_key(&self) -> (u64, Option<u64>) {
        (self.cids.remote_changes(), self.probed_peer_cid())
    }

    /// The packets of one datagram, in order; sets `rx.readable` when
    /// one of them authenticates or waits for its keys.
    fn read_packets(&mut self, now: Instant, data: &mut [u8]) {
        let mut offset = 0;
        while offset < data.len() {
            let rest = &mut data[offset..];
            let local_len = self.cids.local_cid_len();
            let header = match packet::decode_protected(rest, local_len) {
                Ok(h) => h,
                Err(_) => {
                    self.stats.packets_dropped += 1;
                    return;
                }
            };
            let (space, pn_offset, len) = match header {
                ProtectedHeader::Long {
                    ty,
                    dst_cid: _,
                    src_cid,
                    pn_offset,
                    len,
                    version,
                    ..
                } => {
                    if !self.accepts_version(version, ty == LongType::Initial) {
                        // Another version's packet (RFC 9369 §4): not ours.
                        self.stats.packets_dropped += 1;
                        offset += len;
                        continue;
                    }
                    self.version.rx = version;
                    let space = match ty {
                        LongType::Initial => SpaceId::Initial,
                        LongType::Handshake => SpaceId::Handshake,
                        // 0-RTT shares the Application Data space; only a
                        // server reads it (see `readiness`).
                        LongType::ZeroRtt => SpaceId::Data,
                        LongType::Retry => {
                            offset += len;
                            continue;
                        }
                    };
                    if space == SpaceId::Initial
                        && self.side.is_client()
                        && !self.handshake.got_server_initial
                    {
                        // RFC 9000 §7.2: switch to the server's chosen CID.
                        self.handshake.pending_server_scid = Some(src_cid);
                    }
                    (space, pn_offset, len)
                }
                ProtectedHeader::Short { pn_offset, len, .. } => {
                    self.version.rx = self.version.current;
                    (SpaceId::Data, pn_offset, len)
                }
                ProtectedHeader::VersionNegotiation { versions, .. } => {
                    if self.side.is_client()
                        && !self.handshake.got_server_initial
                        && !versions.contains(&self.version.current.wire())
                    {
                        // RFC 9000 §6.2: the server does not speak our
                        // version; we know no other way in, so abandon. A
                        // list holding our version is ignored (RFC 9368 §4).
                        let err = TransportError::new(
                            TransportErrorCode::CONNECTION_REFUSED,
                            "server does not support our QUIC version",
                        );
                        self.close
                            .set_error(ConnectionError::Transport(err.clone()));
                        self.events
                            .push_back(Event::ConnectionLost(ConnectionError::Transport(err)));
                        self.set_drained();
                    }
                    return;
                }
                ProtectedHeader::Retry { src_cid, token, .. } => {
                    // The Retry fills the rest of the datagram.
                    self.on_retry(now, rest, src_cid, token);
                    return;
                }
                ProtectedHeader::UnsupportedVersion { .. } => return,
            };
            let end = offset.saturating_add(len).min(data.len());
            let packet = &mut data[offset..end];
            offset = end;
            let result = match self.readiness(space, is_zero_rtt(space, packet)) {
                Readiness::Read => self
                    .process_packet(now, space, packet, pn_offset)
                    .and_then(|()| self.read_deferred(now)),
                Readiness::Defer => {
                    // It may open later: not what a reset looks like.
                    self.rx.readable = true;
                    if !self.space_mut(space).deferred.push(packet, pn_offset) {
                        self.stats.packets_dropped += 1;
                    }
                    Ok(())
                }
                Readiness::Drop => {
                    self.stats.packets_dropped += 1;
                    Ok(())
                }
            };
            if let Err(e) = result {
                self.close_with_error(now, e);
                return;
            }
            if self.is_closed() {
                return;
            }
        }
    }

    /// Whether a packet of `space` (a 0-RTT one when `zero_rtt`) can be
    /// read now, must wait, or never will be (its keys are discarded, or
    /// never came).
    fn readiness(&self, space: SpaceId, zero_rtt: bool) -> Readiness {
        if zero_rtt {
            return if self.zero_rtt_keys().is_some() && self.side.is_server() {
                Readiness::Read
            } else if self.zero_rtt_undecided() {
                // Reordered ahead of the ClientHello that may accept it.
                Readiness::Defer
            } else {
                // No ticket, early data refused, a client, or keys dropped.
                Readiness::Drop
            };
        }
        match space {
            SpaceId::Initial if self.initial_keys.is_some() => Readiness::Read,
            SpaceId::Initial => Readiness::Drop,
            SpaceId::Handshake if self.handshake_keys.is_some() => Readiness::Read,
            // Handshake keys come before 1-RTT keys: without either, they
            // are still to come; with 1-RTT keys only, they are discarded.
            SpaceId::Handshake if self.one_rtt.is_none() => Readiness::Defer,
            SpaceId::Handshake => Readiness::Drop,
            SpaceId::Data if self.one_rtt.is_none() => Readiness::Defer,
            // RFC 9001 §5.7: a server has 1-RTT keys before the client's
            // Finished, but must not process 1-RTT packets until it has it.
            // Acknowledging them earlier tells a client that may take such
            // an acknowledgement as confirmation (§4.1.2) to stop sending
            // the Finished, which deadlocks when the Finished was lost.
            SpaceId::Data if self.side.is_server() && !self.handshake.complete => Readiness::Defer,
            SpaceId::Data => Readiness::Read,
        }
    }

    /// Read the deferred packets of every space that has become readable
    /// (a Handshake packet read now may make 1-RTT packets readable).
    fn read_deferred(&mut self, now: Instant) -> Result<(), TransportError> {
        for space in [SpaceId::Handshake, SpaceId::Data] {
            if self.space(space).deferred.is_empty() {
                continue;
            }
            // The Data space holds 0-RTT and 1-RTT packets, each with its
            // own readiness: read what is ready, keep what may still be.
            let ready = |c: &Self, packet: &[u8]| c.readiness(space, is_zero_rtt(space, packet));
            let any_ready = self
                .space(space)
                .deferred
                .iter()
                .any(|(p, _)| ready(self, p) == Readiness::Read);
            if !any_ready {
                continue;
            }
            for (mut packet, pn_offset) in self.space_mut(space).deferred.take() {
                match ready(self, &packet) {
                    Readiness::Read => self.process_packet(now, space, &mut packet, pn_offset)?,
                    Readiness::Defer => {
                        let _kept = self.space_mut(space).deferred.push(&packet, pn_offset);
                    }
                    Readiness::Drop => self.stats.packets_dropped += 1,
                }
                if self.is_closed() {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    fn process_packet(
        &mut self,
        now: Instant,
        space: SpaceId,
        packet: &mut [u8],
        pn_offset: usize,
    ) -> Result<(), TransportError> {
        let largest = self.space(space).largest_received.map(|(pn, _)| pn);
        let zero_rtt = is_zero_rtt(space, packet);
        let (first, pn, payload) = {
            let header_key = if zero_rtt {
                self.zero_rtt_keys().map(|k| &*k.header)
            } else {
                self.remote_header_key(space)
            };
            let Some(header_key) = header_key else {
                self.stats.packets_dropped += 1;
                return Ok(());
            };
            let Ok((first, pn_len, truncated)) =
                crypto::remove_header_protection(header_key, packet, pn_offset)
            else {
                self.stats.packets_dropped += 1;
                return Ok(());
            };
            let pn = packet::decode_pn(largest, u64::from(truncated), pn_len);
            let header_len = pn_offset + pn_len;
            let opened = if zero_rtt {
                match self.zero_rtt_keys() {
                    Some(k) => crypto::open(&*k.packet, packet, header_len, pn).map_err(Into::into),
                    None => Err(OpenError::NoKey),
                }
            } else {
                self.decrypt(space, first, packet, header_len, pn, now)
            };
            match opened {
                Ok(range) => {
                    self.rx.readable = true;
                    (first, pn, range)
                }
                Err(OpenError::Fatal(e)) => return Err(e),
                Err(OpenError::Auth) => {
                    self.stats.packets_dropped += 1;
                    return self.on_authentication_failure();
                }
                Err(OpenError::NoKey) => {
                    self.stats.packets_dropped += 1;
                    return Ok(());
                }
            }
        };
        // RFC 9000 §17.2/§17.3.1: reserved bits checked after decryption.
        let reserved = if space == SpaceId::Data && !zero_rtt {
            SHORT_RESERVED_BITS
        } else {
            LONG_RESERVED_BITS
        };
        if first & reserved != 0 {
            return Err(TransportError::protocol_violation(
                "reserved header bits set",
            ));
        }
        if !self.space_mut(space).on_packet_received(pn, now) {
            self.stats.packets_dropped += 1;
            return Ok(());
        }
        self.stats.packets_received += 1;
        let ecn = self.rx.ecn;
        super::ecn::count(&mut self.space_mut(space).ecn_received, ecn);
        if zero_rtt {
            self.stats.zero_rtt_packets_received += 1;
        } else if space == SpaceId::Data {
            self.on_one_rtt_packet();
        }
        if space == SpaceId::Data && self.fec_rx.is_active() {
            self.fec_rx.store(pn, &packet[payload.clone()]);
        }
        if let Some(scid) = self.handshake.pending_server_scid.take() {
            self.handshake.got_server_initial = true;
            self.cids.set_remote_cid(scid);
        }
        if self.side.is_server() && space == SpaceId::Handshake {
            // RFC 9000 §8.1: a Handshake packet proves the client's address;
            // RFC 9001 §4.9.1: the server then drops Initial keys.
            self.validation.validate();
            self.discard_space(now, SpaceId::Initial);
        }
        for s in &mut self.subscribers {
            s.packet_received(now, space, pn, packet.len());
        }
        self.reset_idle_timer(now);
        let payload = &packet[payload];
        if payload.is_empty() {
            return Err(TransportError::protocol_violation("packet without frames"));
        }
        let crypto_before = self.space(space).crypto_recv.delivered();
        let mut ack_eliciting = false;
        let mut non_probing = false;
        for frame in FrameIter::new(payload) {
            let frame =
                frame.map_err(|e| TransportError::new(e.error_code(), "malformed frame"))?;
            if zero_rtt && !super::zero_rtt::allowed_in_zero_rtt(&frame) {
                return Err(TransportError::protocol_violation(
                    "frame not allowed in a 0-RTT packet",
                )
                .with_frame(frame.ty()));
            }
            if space != SpaceId::Data && !frame.allowed_in_long_header() {
                return Err(TransportError::protocol_violation(
                    "frame not allowed in this packet type",
                )
                .with_frame(frame.ty()));
            }
            ack_eliciting |= frame.is_ack_eliciting();
            non_probing |= Self::frame_is_non_probing(&frame);
            self.process_frame(now, space, frame)?;
            if self.is_closed() {
                return Ok(());
            }
        }
        if ack_eliciting {
            self.on_ack_eliciting_received(now, space, pn);
            if space == SpaceId::Initial
                && self.side.is_server()
                && self.space(space).crypto_recv.delivered() == crypto_before
            {
                self.resend_initial_crypto_early();
            }
        }
        if space == SpaceId::Data && !zero_rtt {
            self.update_keys_if_worn();
            let newest = largest.is_none_or(|l| pn > l);
            self.on_packet_from_peer(now, newest, non_probing);
        }
        Ok(())
    }

    fn remote_header_key(&self, space: SpaceId) -> Option<&dyn rustls::quic::HeaderProtectionKey> {
        match space {
            SpaceId::Initial => self.remote_initial_keys().map(|k| &*k.remote.header),
            SpaceId::Handshake => self.handshake_keys.as_ref().map(|k| &*k.remote.header),
            SpaceId::Data => self.one_rtt.as_ref().map(|k| &*k.keys.remote.header),
        }
    }

    /// Decrypt a packet whose header protection is removed; handles 1-RTT
    /// key updates (RFC 9001 §6). Returns the payload range.
    fn decrypt(
        &mut self,
        space: SpaceId,
        first: u8,
        packet: &mut [u8],
        header_len: usize,
        pn: u64,
        now: Instant,
    ) -> Result<core::ops::Range<usize>, OpenError> {
        match space {
            SpaceId::Initial => {
                let k = self.remote_initial_keys().ok_or(OpenError::NoKey)?;
                Ok(crypto::open(&*k.remote.packet, packet, header_len, pn)?)
            }
            SpaceId::Handshake => {
                let k = self.handshake_keys.as_ref().ok_or(OpenError::NoKey)?;
                Ok(crypto::open(&*k.remote.packet, packet, header_len, pn)?)
            }
            SpaceId::Data => self.open_one_rtt(first, packet, header_len, pn, now),
        }
    }

    /// RFC 9001 §6.6: "If the total number of received packets that fail
    /// authentication within the connection, across all keys, exceeds the
    /// integrity limit for the selected AEAD, the endpoint MUST immediately
    /// close the connection with a connection error of type
    /// AEAD_LIMIT_REACHED and not process any more packets." Every space
    /// counts (Initial, Handshake, 0-RTT and 1-RTT keys, across key
    /// updates); the limit is the smallest of the AEADs in use (the
    /// negotiated suite's; Initial packets use AES-128-GCM). Closing puts
    /// the connection in the closing state, which reads no packet.
    fn on_authentication_failure(&mut self) -> Result<(), TransportError> {
        self.rx.auth_failures = self.rx.auth_failures.saturating_add(1);
        if self.rx.auth_failures > self.integrity_limit() {
            return Err(TransportError::new(
                TransportErrorCode::AEAD_LIMIT_REACHED,
                "too many packets failed authentication",
            ));
        }
        Ok(())
    }

    /// The integrity limit of the AEADs this connection reads with.
    fn integrity_limit(&self) -> u64 {
        if let Some(limit) = self.rx.integrity_limit_override {
            return limit;
        }
        let initial = self
            .remote_initial_keys()
            .map(|k| k.remote.packet.integrity_limit());
        let handshake = (self.handshake_keys.as_ref()).map(|k| k.remote.packet.integrity_limit());
        let one_rtt = (self.one_rtt.as_ref()).map(|k| k.keys.remote.packet.integrity_limit());
        [initial, handshake, one_rtt]
            .into_iter()
            .flatten()
            .min()
            // AES-128-GCM's, the Initial packets' AEAD (RFC 9001 §6.6).
            .unwrap_or(1 << 52)
    }

    /// Packets that failed authentication so far, across all keys
    /// (RFC 9001 §6.6's count).
    pub fn authentication_failures(&self) -> u64 {
        self.rx.auth_failures
    }

    /// Test hook: close after `packets` authentication failures instead of
    /// the AEAD's integrity limit (2^52 or 2^36), so tests can reach it.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn set_integrity_limit(&mut self, packets: u64) {
        self.rx.integrity_limit_override = Some(packets);
    }

    fn on_ack_eliciting_received(&mut self, now: Instant, space: SpaceId, pn: u64) {
        let threshold = self.config.ack_eliciting_threshold.max(1);
        let max_delay = self.config.max_ack_delay;
        let s = self.space_mut(space);
        s.ack_pending = true;
        s.unacked_eliciting += 1;
        // RFC 9000 §13.2.1: ack Initial/Handshake at once; 1-RTT after
        // `threshold` packets, at once when out of order, else by max_ack_delay.
        let out_of_order = s.largest_received.is_some_and(|(l, _)| pn < l)
            || s.received.len() > 1
                && s.received.max() == Some(pn)
                && !s.received.contains(pn.saturating_sub(1));
        if space != SpaceId::Data || s.unacked_eliciting >= threshold || out_of_order {
            s.ack_deadline = Some(now);
        } else if s.ack_deadline.is_none() {
            s.ack_deadline = Some(now + max_delay);
        }
        let deadline = s.ack_deadline;
        if space == SpaceId::Data {
            self.timers.set_opt(Timer::Ack, deadline);
        }
    }

    fn process_frame(
        &mut self,
        now: Instant,
        space: SpaceId,
        frame: Frame<'_>,
    ) -> Result<(), TransportError> {
        let ty = frame.ty();
        let server_only = |me: wire::Side| {
            if me.is_server() {
                Err(
                    TransportError::protocol_violation("frame only a server may send")
                        .with_frame(ty),
                )
            } else {
                Ok(())
            }
        };
        match frame {
            Frame::Padding { .. } | Frame::Ping => {}
            Frame::Ack(ack) => self.on_ack_received(now, space, &ack)?,
            Frame::Crypto { offset, data } => self.on_crypto(now, space, offset, data)?,
            Frame::Stream {
                id,
                offset,
                fin,
                data,
            } => {
                for s in &mut self.subscribers {
                    s.stream_data_received(now, id, offset, data.len() as u64);
                }
                self.streams
                    .on_stream_frame(id, offset, data, fin)
                    .map_err(|e| e.with_frame(ty))?
            }
            Frame::ResetStream {
                id,
                error_code,
                final_size,
            } => self
                .streams
                .on_reset_stream(id, error_code, final_size)
                .map_err(|e| e.with_frame(ty))?,
            Frame::StopSending { id, error_code } => self
                .streams
                .on_stop_sending(id, error_code)
                .map_err(|e| e.with_frame(ty))?,
            Frame::MaxData(max) => self.streams.on_max_data(max),
            Frame::MaxStreamData { id, max } => self
                .streams
                .on_max_stream_data(id, max)
                .map_err(|e| e.with_frame(ty))?,
            Frame::MaxStreams { dir, count } => self
                .streams
                .on_max_streams(dir, count)
                .map_err(|e| e.with_frame(ty))?,
            Frame::DataBlocked { .. } | Frame::StreamsBlocked { .. } => {}
            Frame::StreamDataBlocked { id, limit } => self
                .streams
                .on_stream_data_blocked(id, limit)
                .map_err(|e| e.with_frame(ty))?,
            Frame::NewToken { token } => {
                server_only(self.side)?;
                if token.is_empty() {
                    return Err(TransportError::frame_encoding("empty NEW_TOKEN").with_frame(ty));
                }
                self.on_new_token(token);
            }
            Frame::NewConnectionId {
                sequence,
                retire_prior_to,
                cid,
                reset_token,
            } => self
                .cids
                .on_new_connection_id(sequence, retire_prior_to, cid, reset_token)
                .map_err(|e| e.with_frame(ty))?,
            Frame::RetireConnectionId { sequence } => {
                let retired = self
                    .cids
                    .on_retire_connection_id(sequence, &self.cid_issuer, &mut self.rng)
                    .map_err(|e| e.with_frame(ty))?;
                if let Some(cid) = retired {
                    self.endpoint_events
                        .push_back(super::EndpointEvent::RetireLocalCid(cid));
                }
                self.drain_cid_events(now);
            }
            Frame::PathChallenge(data) => self.queue_path_response(data),
            Frame::PathResponse(data) => {
                if !self.on_preferred_path_response(now, data) {
                    self.on_path_response(data);
                }
            }
            Frame::ConnectionClose {
                error_code,
                frame_type,
                reason,
            } => {
                let err = ConnectionError::PeerClosed {
                    code: error_code,
                    application: frame_type.is_none(),
                    reason: String::from_utf8_lossy(reason).into_owned(),
                };
                self.enter_draining(now, err);
            }
            Frame::HandshakeDone => {
                server_only(self.side)?;
                // RFC 9001 §4.1.2: the client confirms the handshake.
                self.confirm_handshake(now);
            }
            Frame::ArtqFec(f) => {
                // Private to artq: only a peer that saw our `artq_fec`
                // transport parameter may send it.
                if !self.config.fec.accept {
                    return Err(TransportError::protocol_violation(
                        "FEC repair frame without the artq_fec transport parameter",
                    )
                    .with_frame(ty));
                }
                if space != SpaceId::Data {
                    return Err(
                        TransportError::protocol_violation("FEC frame outside 1-RTT")
                            .with_frame(ty),
                    );
                }
                let pns: Vec<u64> = f.packet_numbers().collect();
                let repair = f.repair.to_vec();
                self.on_fec_repair(now, &pns, &repair)?;
            }
            Frame::Datagram { data } => {
                let max = self.config.max_datagram_frame_size.ok_or_else(|| {
                    TransportError::protocol_violation("DATAGRAM frames not negotiated")
                        .with_frame(ty)
                })?;
                if data.len() as u64 > max {
                    return Err(
                        TransportError::protocol_violation("DATAGRAM frame too large")
                            .with_frame(ty),
                    );
                }
                if self.datagrams.on_received(data) {
                    self.events.push_back(Event::DatagramReceived);
                }
            }
        }
        Ok(())
    }

    /// A block's repair symbol arrived: if exactly one of its packets is
    /// missing, rebuild it and process it as if it had arrived.
    fn on_fec_repair(
        &mut self,
        now: Instant,
        pns: &[u64],
        repair: &[u8],
    ) -> Result<(), TransportError> {
        self.fec_rx.activate();
        let s = self.space(SpaceId::Data);
        let mut missing = pns
            .iter()
            .copied()
            .filter(|&pn| pn >= s.received_floor && !s.received.contains(pn));
        let (Some(lost), None) = (missing.next(), missing.next()) else {
            return Ok(());
        };
        let Some(payload) = self.fec_rx.recover(pns, lost, repair) else {
            return Ok(());
        };
        if !self.space_mut(SpaceId::Data).on_packet_received(lost, now) {
            return Ok(());
        }
        self.stats.fec_recovered += 1;
        self.fec_rx.store(lost, &payload);
        let mut ack_eliciting = false;
        for frame in FrameIter::new(&payload) {
            let frame = frame.map_err(|e| {
                TransportError::new(e.error_code(), "malformed frame in FEC-recovered packet")
            })?;
            if matches!(frame, Frame::ArtqFec(_)) {
                continue; // blocks never nest
            }
            ack_eliciting |= frame.is_ack_eliciting();
            self.process_frame(now, SpaceId::Data, frame)?;
            if self.is_closed() {
                return Ok(());
            }
        }
        if ack_eliciting {
            self.on_ack_eliciting_received(now, SpaceId::Data, lost);
        }
        Ok(())
    }

    fn on_crypto(
        &mut self,
        now: Instant,
        space: SpaceId,
        offset: u64,
        data: &[u8],
    ) -> Result<(), TransportError> {
        if !self.space_mut(space).crypto_recv.insert(offset, data) {
            return Err(TransportError::new(
                TransportErrorCode::CRYPTO_BUFFER_EXCEEDED,
                "too much out-of-order CRYPTO data",
            ));
        }
        while let Some(bytes) = self.space_mut(space).crypto_recv.pop() {
            // A server negotiating versions reads the whole ClientHello first.
            let Some(bytes) = self.hold_client_hello(bytes)? else {
                continue;
            };
            if let Err(fail) = self.tls.read_handshake(&bytes) {
                tracing::debug!(reason = %fail.reason, "TLS failure");
                return Err(TransportError::new(
                    TransportErrorCode(fail.code),
                    "TLS handshake failed",
                ));
            }
        }
        self.apply_peer_params()?;
        self.process_tls_output();
        if !self.tls.is_handshaking() {
            if self.handshake.peer_params.is_none() {
                return Err(TransportError::new(
                    TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
                    "missing transport parameters",
                ));
            }
            self.on_handshake_complete(now);
        }
        Ok(())
    }
}
