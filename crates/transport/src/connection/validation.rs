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
use super::{Connection, ConnectionError, EndpointEvent, Event, SpaceId, State};
use crate::crypto;

impl Connection {
    /// Server before address validation: bytes it may still send (RFC 9000
    /// §8.1, three times what it received). Not loss recovery: the send
    /// path sizes datagrams by it, and a server at the limit arms no PTO.
    pub(super) fn amplification_budget(&self) -> u64 {
        if self.address_validated {
            return u64::MAX;
        }
        self.anti_amp_received
            .saturating_mul(3)
            .saturating_sub(self.anti_amp_sent)
    }

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
            || self.got_server_initial
            || self.retry_scid.is_some()
            || token.is_empty()
            || retry_scid == self.cids.remote_cid()
            || !crypto::verify_retry_integrity(self.version.current, &self.original_dcid, packet)
        {
            self.stats.packets_dropped += 1;
            return;
        }
        tracing::debug!(token_len = token.len(), "following a Retry");
        self.retry_scid = Some(retry_scid);
        self.initial_token = token.to_vec();
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
        self.pto_count = 0;
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
        if !self.side.is_server() || !self.new_token_due() {
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

    /// Whether the connection went through a Retry (client: it followed
    /// one; server: the client came back with our Retry token).
    pub fn was_retried(&self) -> bool {
        self.retry_scid.is_some()
    }

    /// Server: the client's address is validated (RFC 9000 §8.1): it sent
    /// a Handshake packet, or came with a valid token. A client's view of
    /// its server is always validated.
    pub(crate) fn is_address_validated(&self) -> bool {
        self.address_validated
    }

    /// Server: the client's first flight is still incomplete (no Handshake
    /// keys: the ClientHello has not been read in full) and the connection
    /// is not closing. Such state is kept only briefly by the endpoint.
    pub(crate) fn is_half_open(&self) -> bool {
        self.side.is_server() && self.handshake_keys.is_none() && self.state == State::Handshake
    }

    /// Drop a connection silently (nothing is sent), as an idle timeout
    /// does: the endpoint's end for a half-open connection that went quiet.
    pub(crate) fn abandon(&mut self) {
        if self.state == State::Drained {
            return;
        }
        self.timers.stop_all();
        if self.error.is_none() {
            self.error = Some(ConnectionError::TimedOut);
            self.events
                .push_back(Event::ConnectionLost(ConnectionError::TimedOut));
        }
        self.set_drained();
    }
}
