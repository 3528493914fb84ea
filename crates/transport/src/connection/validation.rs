//! Address validation inside one connection (RFC 9000 §8.1): the client
//! following a server's Retry (§17.2.5.2, RFC 9001 §5.8, RFC 9002 §6.3),
//! the server handing out a NEW_TOKEN token and the client passing it to
//! its endpoint (§8.1.3), and what the endpoint asks about a connection it
//! admitted before the client's address was validated.
//!
//! The stateless half (deciding to send Retry, sealing and checking tokens)
//! is the endpoint's: see `crate::endpoint`.

use wire::cid::ConnectionId;
use wire::frame::Frame;
use wire::time::Instant;
use wire::Side;

use super::spaces::{Retransmit, SentPacket};
use super::{Connection, EndpointEvent, SpaceId, State};
use crate::crypto;

/// What one connection knows about address validation (RFC 9000 §8.1):
/// whether the peer's address is validated, the server's
/// anti-amplification budget until then, the Retry the client followed,
/// the token its Initials carry, and the server's NEW_TOKEN token.
///
/// Exists so that the amplification limit and the tokens have one owner:
/// the receive path reports datagrams in ([`AddressValidation::on_received`])
/// and the Handshake packet that validates the client, the send path
/// datagrams out and the NEW_TOKEN frame it carries.
#[derive(Debug)]
pub(super) struct AddressValidation {
    /// Server: the client's address is validated (a client's view of its
    /// server always is).
    validated: bool,
    /// Server: bytes received from the client before validation.
    received: u64,
    /// Server: bytes sent to the client before validation.
    sent: u64,
    /// Client: the token its Initial packets carry (from a Retry, or an
    /// earlier connection's NEW_TOKEN); empty for none.
    initial_token: Vec<u8>,
    /// The Source Connection ID of the server's Retry, if there was one:
    /// the client checks it against retry_source_connection_id, the server
    /// sends it there (RFC 9000 §7.3).
    retry_scid: Option<ConnectionId>,
    /// Server: the NEW_TOKEN token for this client, until acknowledged.
    new_token: Option<Vec<u8>>,
    /// Server: a NEW_TOKEN frame is to be sent (again).
    new_token_pending: bool,
}

impl AddressValidation {
    /// A client (whose server's address needs no validation) with the
    /// token for its Initials, if it has one.
    pub(super) fn client(initial_token: Vec<u8>) -> AddressValidation {
        AddressValidation {
            validated: true,
            received: 0,
            sent: 0,
            initial_token,
            retry_scid: None,
            new_token: None,
            new_token_pending: false,
        }
    }

    /// A server, as its endpoint admitted the client ([`super::ServerSetup`]).
    pub(super) fn server(
        validated: bool,
        retry_scid: Option<ConnectionId>,
        new_token: Option<Vec<u8>>,
    ) -> AddressValidation {
        AddressValidation {
            validated,
            received: 0,
            sent: 0,
            initial_token: Vec::new(),
            retry_scid,
            new_token_pending: new_token.is_some(),
            new_token,
        }
    }

    /// Server before address validation: bytes it may still send (RFC 9000
    /// §8.1, three times what it received). Not loss recovery: the send
    /// path sizes datagrams by it, and a server at the limit arms no PTO.
    pub(super) fn amplification_budget(&self) -> u64 {
        if self.validated {
            return u64::MAX;
        }
        self.received.saturating_mul(3).saturating_sub(self.sent)
    }

    /// A datagram of `len` bytes arrived from the peer.
    pub(super) fn on_received(&mut self, len: usize) {
        self.received = self.received.saturating_add(len as u64);
    }

    /// A datagram of `len` bytes went to the peer.
    pub(super) fn on_sent(&mut self, len: usize) {
        if !self.validated {
            self.sent = self.sent.saturating_add(len as u64);
        }
    }

    /// Server: the client proved its address (a Handshake packet from it
    /// decrypted, RFC 9000 §8.1).
    pub(super) fn validate(&mut self) {
        self.validated = true;
    }

    /// Whether the peer's address is validated.
    pub(super) fn is_validated(&self) -> bool {
        self.validated
    }

    /// The token the client's Initial packets carry (empty for none).
    pub(super) fn initial_token(&self) -> &[u8] {
        &self.initial_token
    }

    /// The SCID of the Retry the connection went through.
    pub(super) fn retry_scid(&self) -> Option<ConnectionId> {
        self.retry_scid
    }

    /// Client: follow a Retry from `retry_scid` with `token`.
    fn on_retry(&mut self, retry_scid: ConnectionId, token: &[u8]) {
        self.retry_scid = Some(retry_scid);
        self.initial_token = token.to_vec();
    }

    /// Server: whether a NEW_TOKEN frame waits to be sent.
    pub(super) fn new_token_due(&self) -> bool {
        self.new_token_pending && self.new_token.is_some()
    }

    /// Server: write the NEW_TOKEN frame if it is due and fits before
    /// `max_end`.
    pub(super) fn write_new_token(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &mut SentPacket,
    ) {
        if !self.new_token_due() {
            return;
        }
        let Some(token) = self.new_token.as_deref() else {
            return;
        };
        let mut frame = Vec::with_capacity(token.len() + 4);
        Frame::NewToken { token }.encode(&mut frame);
        if buf.len() + frame.len() <= max_end {
            buf.extend_from_slice(&frame);
            self.new_token_pending = false;
            record.retransmits.push(Retransmit::NewToken);
        }
    }

    /// Server: the packet with our NEW_TOKEN frame was lost; send it again.
    pub(super) fn on_new_token_lost(&mut self) {
        self.new_token_pending = self.new_token.is_some();
    }

    /// Server: the client has our token; forget it.
    pub(super) fn on_new_token_acked(&mut self) {
        self.new_token = None;
        self.new_token_pending = false;
    }
}

impl Connection {
    /// Client: a Retry packet arrived (`packet` is all of it, tag included).
    /// Accepted at most once, only before anything from the server was
    /// processed, with a non-empty token, a new connection ID and a valid
    /// integrity tag; otherwise ignored as the RFC requires.
    pub(super) fn on_retry(
        &mut self,
        now: Instant,
        packet: &[u8],
        retry_scid: ConnectionId,
        token: &[u8],
    ) {
        if !self.side.is_client()
            || self.state != State::Handshake
            || self.handshake.got_server_initial
            || self.validation.retry_scid().is_some()
            || token.is_empty()
            || retry_scid == self.cids.remote_cid()
            || !crypto::verify_retry_integrity(self.version.current, &self.original_dcid, packet)
        {
            self.stats.packets_dropped += 1;
            return;
        }
        tracing::debug!(token_len = token.len(), "following a Retry");
        self.validation.on_retry(retry_scid, token);
        // New Destination Connection ID, hence new Initial keys (RFC 9001
        // §5.2); our own Source Connection ID stays (the token may bind it).
        self.cids.set_remote_cid(retry_scid);
        self.version.set_initial_dcid(retry_scid);
        self.initial_keys = Some(self.version.initial_keys(Side::Client));
        // RFC 9002 §6.3: reset loss recovery; the same ClientHello goes out
        // again with the token, under packet numbers that keep counting
        // (RFC 9000 §17.2.5.3).
        let space = self.space_mut(SpaceId::Initial);
        let sent = core::mem::take(&mut space.sent);
        space.ack_eliciting_in_flight = 0;
        space.time_of_last_ack_eliciting = None;
        space.loss_time = None;
        space.probes = 0;
        space.crypto_send.requeue_unacked();
        let in_flight: u64 = sent
            .values()
            .filter(|p| p.in_flight)
            .map(|p| u64::from(p.size))
            .sum();
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(in_flight);
        self.loss_detection.pto_count = 0;
        self.set_loss_detection_timer(now);
    }

    /// Client: a NEW_TOKEN frame arrived. Only the latest token waits for
    /// the endpoint, so a server sending many holds no more memory.
    pub(super) fn on_new_token(&mut self, token: &[u8]) {
        self.endpoint_events
            .retain(|e| !matches!(e, EndpointEvent::NewToken(_)));
        self.endpoint_events
            .push_back(EndpointEvent::NewToken(token.to_vec()));
    }

    /// Whether the connection went through a Retry (client: it followed
    /// one; server: the client came back with our Retry token).
    pub fn was_retried(&self) -> bool {
        self.validation.retry_scid().is_some()
    }

    /// Server: the client's address is validated (RFC 9000 §8.1): it sent
    /// a Handshake packet, or came with a valid token. A client's view of
    /// its server is always validated.
    pub(crate) fn is_address_validated(&self) -> bool {
        self.validation.is_validated()
    }

    /// Server: the client's first flight is still incomplete (no Handshake
    /// keys: the ClientHello has not been read in full) and the connection
    /// is not closing. Such state is kept only briefly by the endpoint.
    pub(crate) fn is_half_open(&self) -> bool {
        self.side.is_server() && self.handshake_keys.is_none() && self.state == State::Handshake
    }
}
