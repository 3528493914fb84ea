//! The handshake's lifecycle: TLS output into the CRYPTO streams and new
//! keys, the peer's transport parameters (validated and applied), handshake
//! completion and confirmation, and the discarding of the Initial and
//! Handshake spaces (RFC 9001 §4.1, §4.9; RFC 9000 §7.3, §18).

use wire::cid::ConnectionId;
use wire::time::{Duration, Instant};
use wire::transport_params::TransportParameters;
use wire::TransportErrorCode;

use super::spaces::PacketSpace;
use super::{nonzero, Connection, Event, OneRttKeys, SpaceId, State};
use crate::config::TransportConfig;
use crate::crypto::KeyChange;
use crate::error::TransportError;

/// How far the handshake has come (RFC 9001 §4.1).
///
/// Exists so that the handshake's progress has one owner: TLS output goes
/// to the space [`HandshakeState::tls_write_space`] names, completion and
/// confirmation are set here once, and the peer's transport parameters are
/// kept once validated and applied.
#[derive(Debug)]
pub(super) struct HandshakeState {
    /// Level the TLS writer currently produces data for.
    pub(super) tls_write_space: SpaceId,
    /// TLS finished (RFC 9001 §4.1.1).
    pub(super) complete: bool,
    /// The handshake is confirmed (RFC 9001 §4.1.2).
    pub(super) confirmed: bool,
    /// Server: HANDSHAKE_DONE is to be sent (again).
    pub(super) done_pending: bool,
    /// Client: switched to the server's SCID after its first Initial.
    pub(super) got_server_initial: bool,
    /// Client: the server's SCID from its first Initial, applied once that
    /// packet decrypts.
    pub(super) pending_server_scid: Option<ConnectionId>,
    /// The peer's transport parameters, once validated and applied.
    pub(super) peer_params: Option<TransportParameters>,
}

impl Default for HandshakeState {
    /// Nothing exchanged yet: TLS writes Initial data.
    fn default() -> Self {
        HandshakeState {
            tls_write_space: SpaceId::Initial,
            complete: false,
            confirmed: false,
            done_pending: false,
            got_server_initial: false,
            pending_server_scid: None,
            peer_params: None,
        }
    }
}

impl Connection {
    /// Drain TLS output into the CRYPTO streams and install new keys.
    pub(super) fn process_tls_output(&mut self) {
        loop {
            let mut buf = Vec::new();
            let change = self.tls.write_handshake(&mut buf);
            if !buf.is_empty() {
                let space = self.handshake.tls_write_space;
                self.space_mut(space).crypto_send.push(&buf);
            }
            match change {
                Some(KeyChange::Handshake { keys }) => {
                    self.handshake_keys = Some(keys);
                    self.handshake.tls_write_space = SpaceId::Handshake;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    self.one_rtt = Some(OneRttKeys::new(keys, next));
                    self.handshake.tls_write_space = SpaceId::Data;
                    self.on_one_rtt_keys();
                }
                None => break,
            }
        }
        self.accept_zero_rtt();
    }

    /// Peer transport parameters arrived: validate and apply them.
    pub(super) fn apply_peer_params(&mut self) -> Result<(), TransportError> {
        if self.handshake.peer_params.is_some() {
            return Ok(());
        }
        let Some(raw) = self.tls.peer_transport_parameters() else {
            return Ok(());
        };
        if self.params_are_remembered(raw) {
            // A resuming client: rustls reports the ticket's parameters
            // until the server's EncryptedExtensions replace them.
            return Ok(());
        }
        let params = TransportParameters::decode(raw, self.side.opposite()).map_err(|e| {
            tracing::debug!(error = %e, "bad transport parameters");
            TransportError::new(
                TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
                "malformed transport parameters",
            )
            .with_frame(0x06)
        })?;
        self.authenticate_cids(&params)?;
        self.check_version_information(&params)?;
        self.streams.set_peer_params(&params);
        self.loss_detection.peer_max_ack_delay = Duration::from_millis(params.max_ack_delay_ms);
        self.loss_detection.peer_ack_delay_exponent = params.ack_delay_exponent as u8;
        let peer_idle = nonzero(Duration::from_millis(params.max_idle_timeout_ms));
        self.idle_timeout = match (self.idle_timeout, peer_idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let peer_mtu = u16::try_from(params.max_udp_payload_size.min(65527)).unwrap_or(u16::MAX);
        self.path_mtu.limit_to_peer(peer_mtu);
        self.on_datagram_size_changed();
        self.datagrams
            .set_peer_max_frame(params.max_datagram_frame_size);
        self.cids.set_peer_limit(params.active_connection_id_limit);
        self.recovery
            .set_fec_encoder(self.config.fec.encoder_for(params.artq_fec));
        self.on_server_params(&params)?;
        if let (true, Some(token)) = (self.side.is_client(), params.stateless_reset_token) {
            // RFC 9000 §10.3: the server's handshake ID's reset token.
            self.cids.set_handshake_reset_token(token);
        }
        self.on_peer_preferred_address(&params)?;
        self.handshake.peer_params = Some(params);
        Ok(())
    }

    /// TLS finished: the handshake is complete (RFC 9001 §4.1.1).
    pub(super) fn on_handshake_complete(&mut self, now: Instant) {
        if self.handshake.complete {
            return;
        }
        self.handshake.complete = true;
        self.state = State::Established;
        self.events.push_back(Event::Connected);
        if self.side.is_server() {
            // RFC 9001 §4.1.2: the server confirms the handshake at completion.
            self.handshake.done_pending = true;
            self.confirm_handshake(now);
        }
    }

    /// True once the handshake is confirmed (RFC 9001 §4.1.2): at the
    /// server when it completes, at the client when HANDSHAKE_DONE arrives.
    /// Handshake keys are kept until then, and key updates wait for it.
    pub fn is_handshake_confirmed(&self) -> bool {
        self.handshake.confirmed
    }

    pub(super) fn confirm_handshake(&mut self, now: Instant) {
        if self.handshake.confirmed {
            return;
        }
        self.handshake.confirmed = true;
        self.discard_space(now, SpaceId::Handshake);
        self.issue_cids(now);
        self.start_preferred_probe(now);
    }

    /// Drop a space's keys and in-flight packets (RFC 9001 §4.9).
    pub(super) fn discard_space(&mut self, now: Instant, id: SpaceId) {
        match id {
            SpaceId::Initial => {
                if self.initial_keys.take().is_none() {
                    return;
                }
            }
            SpaceId::Handshake => {
                if self.handshake_keys.take().is_none() {
                    return;
                }
            }
            SpaceId::Data => return,
        }
        let space = &mut self.spaces[id as usize];
        let in_flight: u64 = space
            .sent
            .values()
            .filter(|p| p.in_flight)
            .map(|p| u64::from(p.size))
            .sum();
        *space = PacketSpace {
            next_pn: space.next_pn,
            ..Default::default()
        };
        self.bytes_in_flight = self.bytes_in_flight.saturating_sub(in_flight);
        self.loss_detection.pto_count = 0;
        self.set_loss_detection_timer(now);
    }
}

/// Our transport parameters from the config.
pub(super) fn local_params(
    config: &TransportConfig,
    local_cid: ConnectionId,
    original_dcid: Option<ConnectionId>,
) -> TransportParameters {
    let mut p = TransportParameters::default();
    config.streams.apply_to(&mut p);
    p.max_idle_timeout_ms = config.max_idle_timeout.as_millis() as u64;
    p.max_ack_delay_ms = config.max_ack_delay.as_millis() as u64;
    p.ack_delay_exponent = 3;
    p.max_udp_payload_size = 65527;
    p.active_connection_id_limit = config.active_connection_id_limit.max(2);
    p.initial_source_connection_id = Some(local_cid);
    p.original_destination_connection_id = original_dcid;
    p.max_datagram_frame_size = config.max_datagram_frame_size;
    // artq receivers decode block-FEC repair frames (the `fec:K` baseline).
    p.artq_fec = config.fec.accept;
    p
}
