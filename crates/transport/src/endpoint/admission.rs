//! How a server admits a new client (issue 15, bugs 4 and 5): the checks an
//! Initial for an unknown connection passes before any state exists, the
//! bounds on state kept for addresses not yet validated, and the stateless
//! answers (Retry, a close with INVALID_TOKEN or CONNECTION_REFUSED).
//!
//! In order, for a datagram that no connection claims:
//!
//! 1. It must start with an Initial of a version the server speaks (v1, and
//!    v2 when configured; others get Version Negotiation, see `route`) in a
//!    datagram of at least 1200 bytes (RFC 9000 §14.1).
//! 2. That Initial must decrypt with the Initial keys of its Destination
//!    Connection ID (RFC 9001 §5.2), have its reserved bits clear, hold only
//!    frames an Initial may carry, and carry CRYPTO data; CRYPTO at offset 0
//!    must start a ClientHello. A first datagram whose CRYPTO does not start
//!    at 0 is accepted too: Chromium and quic-go split a ~1.9 KB ClientHello
//!    over two Initials, sometimes out of order. Everything else (random
//!    bytes, well-formed headers around garbage) is dropped having cost one
//!    key derivation and one failed decryption, and no memory.
//! 3. A token, if any, is opened ([`super::token`]). A valid one validates
//!    the address. An invalid *Retry* token gets a stateless close with
//!    INVALID_TOKEN (RFC 9000 §8.1.2: the client will not take another
//!    Retry); an unusable NEW_TOKEN token counts as no token (§8.1.3).
//! 4. Without a valid token the address is unvalidated. The client gets a
//!    Retry when [`RetryMode`] says so, or when the unvalidated state in
//!    total or from its IP address is at its bound; with
//!    [`RetryMode::Never`] such Initials are dropped instead.
//! 5. Past [`AdmissionConfig::max_connections`], a stateless close with
//!    CONNECTION_REFUSED (RFC 9000 §5.2.2).
//!
//! A connection created unvalidated is tracked here until a Handshake
//! packet from the client validates its address (or it ends). While its
//! ClientHello is incomplete (*half-open*) it lives at most
//! [`AdmissionConfig::half_open_timeout`] without receiving anything.
//!
//! Stateless answers go to the response queue, which is bounded; none is
//! larger than the Initial that caused it (no amplification). The stateless
//! resets of a server with static keys share that queue and its bound
//! (`Endpoint::stateless_reset`).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};

use rand::Rng;
use wire::cid::ConnectionId;
use wire::frame::{Frame, FrameIter};
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::Instant;
use wire::{Side, TransportErrorCode, Version};

use super::token::{InvalidToken, TokenKind, ValidToken};
use super::{ConnectionHandle, Endpoint};
use crate::config::{AdmissionConfig, RetryMode};
use crate::connection::ServerSetup;
use crate::crypto;

/// Most stateless responses (Version Negotiation, Retry, closes) queued at
/// once; beyond it they are dropped (the client retransmits).
pub(super) const MAX_RESPONSES: usize = 256;

/// Handshake message type of a ClientHello (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;

/// A connection created before its client's address was validated.
#[derive(Clone, Copy, Debug)]
pub(super) struct Unvalidated {
    source: IpAddr,
    /// While half-open: when it is dropped unless something arrives.
    half_open_until: Option<Instant>,
}

/// The server's bookkeeping of unvalidated connections: by handle, and
/// counted per source IP address.
#[derive(Debug, Default)]
pub(super) struct UnvalidatedSet {
    by_handle: std::collections::BTreeMap<usize, Unvalidated>,
    per_source: HashMap<IpAddr, usize>,
}

impl UnvalidatedSet {
    pub fn len(&self) -> usize {
        self.by_handle.len()
    }

    pub fn count_from(&self, ip: IpAddr) -> usize {
        self.per_source.get(&ip).copied().unwrap_or(0)
    }

    pub fn half_open(&self) -> usize {
        self.by_handle
            .values()
            .filter(|u| u.half_open_until.is_some())
            .count()
    }

    fn insert(&mut self, h: ConnectionHandle, u: Unvalidated) {
        *self.per_source.entry(u.source).or_default() += 1;
        self.by_handle.insert(h.0, u);
    }

    pub fn remove(&mut self, h: ConnectionHandle) {
        let Some(u) = self.by_handle.remove(&h.0) else {
            return;
        };
        if let Some(n) = self.per_source.get_mut(&u.source) {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&u.source);
            }
        }
    }

    /// The earliest half-open deadline.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.by_handle
            .values()
            .filter_map(|u| u.half_open_until)
            .min()
    }

    /// Half-open connections whose deadline passed.
    pub fn expired(&self, now: Instant) -> Vec<ConnectionHandle> {
        self.by_handle
            .iter()
            .filter(|(_, u)| u.half_open_until.is_some_and(|t| t <= now))
            .map(|(&i, _)| ConnectionHandle(i))
            .collect()
    }
}

/// What the trial decryption found in an Initial.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Probe {
    /// Not a client's Initial: undecryptable, malformed, or without CRYPTO.
    Junk,
    /// A client's Initial carrying CRYPTO data.
    ClientInitial,
}

/// Decrypts a copy of the Initial `packet` (its `len` bytes, packet number
/// at `pn_offset`) with the client Initial keys of `dcid` in `version`, and
/// checks that it is what a client's first flight looks like.
fn probe_initial(packet: &[u8], pn_offset: usize, dcid: &ConnectionId, version: Version) -> Probe {
    let keys = crypto::initial_keys(dcid, Side::Server, version);
    let mut copy = packet.to_vec();
    let Ok((first, pn_len, truncated)) =
        crypto::remove_header_protection(&*keys.remote.header, &mut copy, pn_offset)
    else {
        return Probe::Junk;
    };
    let pn = packet::decode_pn(None, u64::from(truncated), pn_len);
    let Ok(payload) = crypto::open(&*keys.remote.packet, &mut copy, pn_offset + pn_len, pn) else {
        return Probe::Junk;
    };
    // RFC 9000 §17.2: reserved bits, checked after decryption.
    if first & 0x0c != 0 {
        return Probe::Junk;
    }
    let mut crypto_seen = false;
    for frame in FrameIter::new(&copy[payload]) {
        let Ok(frame) = frame else {
            return Probe::Junk;
        };
        if !frame.allowed_in_long_header() {
            return Probe::Junk;
        }
        if let Frame::Crypto { offset, data } = frame {
            if offset == 0 && data.first().is_some_and(|&b| b != CLIENT_HELLO) {
                return Probe::Junk;
            }
            crypto_seen |= !data.is_empty();
        }
    }
    if crypto_seen {
        Probe::ClientInitial
    } else {
        Probe::Junk
    }
}

impl Endpoint {
    /// A datagram no connection claims: admit its client, answer it
    /// statelessly, or drop it (see the module doc). Returns the new
    /// connection, which the caller then hands the datagram.
    pub(super) fn admit(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        datagram: &[u8],
    ) -> Option<ConnectionHandle> {
        let server = self.config.server.clone()?;
        let cid_len = self.config.local_cid_len;
        let Ok(ProtectedHeader::Long {
            ty: LongType::Initial,
            dst_cid,
            src_cid,
            token,
            pn_offset,
            len,
            version,
        }) = packet::decode_protected(datagram, cid_len)
        else {
            return None;
        };
        if !server.transport.versions().contains(&version) {
            // `route` answered it with Version Negotiation.
            return None;
        }
        if datagram.len() < packet::MIN_INITIAL_SIZE {
            self.stats.initials_dropped += 1;
            return None;
        }
        if probe_initial(&datagram[..len], pn_offset, &dst_cid, version) == Probe::Junk {
            self.stats.initials_dropped += 1;
            return None;
        }
        let admission = &self.config.admission;
        let valid = if token.is_empty() {
            None
        } else {
            match self.token_key.open(
                token,
                remote,
                now,
                admission.retry_token_lifetime,
                admission.new_token_lifetime,
            ) {
                Ok(v) => {
                    self.stats.tokens_accepted += 1;
                    Some(v)
                }
                Err(InvalidToken {
                    kind: Some(TokenKind::Retry),
                }) => {
                    self.stats.tokens_rejected += 1;
                    self.stateless_close(
                        remote,
                        version,
                        dst_cid,
                        src_cid,
                        TransportErrorCode::INVALID_TOKEN,
                    );
                    return None;
                }
                Err(_) => {
                    self.stats.tokens_rejected += 1;
                    None
                }
            }
        };
        let source = remote.ip();
        if valid.is_none() {
            // RFC 9000 §7.2: a client's first DCID has at least 8 bytes.
            if dst_cid.len() < 8 {
                self.stats.initials_dropped += 1;
                return None;
            }
            let admission = &self.config.admission;
            let at_bound = self.unvalidated.len() >= admission.max_unvalidated
                || self.unvalidated.count_from(source) >= admission.max_unvalidated_per_source;
            let retry = match admission.retry {
                RetryMode::Never => false,
                RetryMode::Always => true,
                RetryMode::WhenUnvalidatedAtLeast(n) => at_bound || self.unvalidated.len() >= n,
            };
            if retry {
                self.send_retry(now, remote, version, dst_cid, src_cid);
                return None;
            }
            if at_bound {
                self.stats.refused += 1;
                return None;
            }
        }
        if self.connections.len() >= self.config.admission.max_connections {
            self.stats.refused += 1;
            self.stateless_close(
                remote,
                version,
                dst_cid,
                src_cid,
                TransportErrorCode::CONNECTION_REFUSED,
            );
            return None;
        }
        let (original_dcid, retry_scid) = match valid {
            Some(ValidToken::Retry { original_dcid }) => (original_dcid, Some(dst_cid)),
            _ => (dst_cid, None),
        };
        let local_cid = self.new_cid();
        let seed = self.rng.child_seed();
        let new_token = self.config.admission.new_token_lifetime.map(|_| {
            self.token_key
                .seal_new_token(&mut self.admission_rng, remote, now)
        });
        let setup = ServerSetup {
            local_cid,
            initial_dcid: dst_cid,
            client_scid: src_cid,
            original_dcid,
            retry_scid,
            address_validated: valid.is_some(),
            new_token,
            version,
        };
        let issuer = self.cid_issuer.clone();
        let conn = match crate::Connection::accept(now, &server, remote, setup, seed, issuer) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept connection");
                return None;
            }
        };
        let h = self.insert(conn);
        self.add_route(h, local_cid);
        self.set_initial_route(h, remote, dst_cid);
        if valid.is_none() {
            self.unvalidated.insert(
                h,
                Unvalidated {
                    source,
                    half_open_until: Some(now + self.config.admission.half_open_timeout),
                },
            );
        }
        self.incoming.push_back(h);
        Some(h)
    }

    /// After connection `h` received a datagram (`active`) or its timers
    /// ran: forget it once its address is validated or it ended, and move
    /// its half-open deadline.
    pub(super) fn refresh_unvalidated(&mut self, h: ConnectionHandle, now: Instant, active: bool) {
        if !self.unvalidated.by_handle.contains_key(&h.0) {
            return;
        }
        let status = self.connections.get(&h.0).map(|s| {
            let c = &s.conn;
            (c.is_address_validated() || c.is_drained(), c.is_half_open())
        });
        let timeout = self.config.admission.half_open_timeout;
        match status {
            None | Some((true, _)) => self.unvalidated.remove(h),
            Some((false, half_open)) => {
                if let Some(entry) = self.unvalidated.by_handle.get_mut(&h.0) {
                    if !half_open {
                        entry.half_open_until = None;
                    } else if active {
                        entry.half_open_until = Some(now + timeout);
                    }
                }
            }
        }
    }

    /// Drop half-open connections that stayed quiet too long.
    pub(super) fn expire_half_open(&mut self, now: Instant) {
        for h in self.unvalidated.expired(now) {
            if let Some(slot) = self.connections.get_mut(&h.0) {
                tracing::debug!(remote = %slot.conn.remote_address(), "half-open connection expired");
                slot.conn.abandon();
                self.stats.half_open_expired += 1;
            }
            self.touched(h.0);
            self.unvalidated.remove(h);
            self.process_endpoint_events(h);
        }
    }

    /// Answer `client_dcid`/`client_scid` from `remote` with a Retry (in
    /// the client's `version`) whose token records `client_dcid` (RFC 9000
    /// §8.1.2, §17.2.5).
    fn send_retry(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        version: Version,
        client_dcid: ConnectionId,
        client_scid: ConnectionId,
    ) {
        if self.responses.len() >= MAX_RESPONSES {
            self.stats.responses_dropped += 1;
            return;
        }
        // The Retry's SCID becomes the client's next DCID: like any
        // connection ID of ours, unpredictable and not already routed, and
        // never the DCID it replaces (RFC 9000 §17.2.5.1).
        let retry_scid = loop {
            let cid = self.random_cid(true);
            if cid != client_dcid {
                break cid;
            }
        };
        let token = self
            .token_key
            .seal_retry(&mut self.admission_rng, remote, &client_dcid, now);
        let mut out = Vec::with_capacity(64 + token.len());
        let unused_bits = self.admission_rng.gen::<u8>();
        packet::write_retry(
            &mut out,
            version,
            &client_scid,
            &retry_scid,
            &token,
            unused_bits,
        );
        let Ok(tag) = crypto::retry_integrity_tag(version, &client_dcid, &out) else {
            return;
        };
        out.extend_from_slice(&tag);
        self.responses.push_back((remote, out));
        self.stats.retries_sent += 1;
    }

    /// Close a connection that was never created (RFC 9000 §10.2: no
    /// closing period): one Initial packet with CONNECTION_CLOSE `code`,
    /// protected with the Initial keys the client used (in its `version`).
    fn stateless_close(
        &mut self,
        remote: SocketAddr,
        version: Version,
        client_dcid: ConnectionId,
        client_scid: ConnectionId,
        code: TransportErrorCode,
    ) {
        if self.responses.len() >= MAX_RESPONSES {
            self.stats.responses_dropped += 1;
            return;
        }
        let keys = crypto::initial_keys(&client_dcid, Side::Server, version);
        let our_scid = self.random_cid(false);
        let mut out = Vec::with_capacity(96);
        let pn_len = 1;
        let layout = packet::write_long_header(
            &mut out,
            LongType::Initial,
            version,
            &client_scid,
            &our_scid,
            &[],
            0,
            pn_len,
        );
        Frame::ConnectionClose {
            error_code: code.0,
            frame_type: Some(0),
            reason: &[],
        }
        .encode(&mut out);
        // Room for the header protection sample (RFC 9001 §5.4.2): PADDING.
        let min_end = layout.pn_offset + 4;
        if out.len() < min_end {
            out.resize(min_end, 0);
        }
        out.resize(out.len() + crypto::TAG_LEN, 0);
        let end = out.len();
        packet::set_long_length(&mut out, &layout, end);
        if crypto::seal(&keys.local, &mut out, layout.pn_offset, pn_len, 0).is_err() {
            return;
        }
        self.responses.push_back((remote, out));
        self.stats.stateless_closes += 1;
    }
}

/// Admission settings a server can run with: none of the bounds may be
/// zero where a zero would refuse every client.
pub(super) fn sanitize(mut a: AdmissionConfig) -> AdmissionConfig {
    a.max_connections = a.max_connections.max(1);
    a.max_unvalidated = a.max_unvalidated.max(1);
    a.max_unvalidated_per_source = a.max_unvalidated_per_source.max(1);
    a
}
