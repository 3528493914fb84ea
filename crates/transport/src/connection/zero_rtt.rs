//! Session resumption's 0-RTT (RFC 9001 §4.6; RFC 9000 §7.4.1, §12.4,
//! §17.2.3): the client's early keys and remembered transport parameters,
//! the server's acceptance, the check of the parameters a server confirms,
//! and what a rejection puts back in the send queue.
//!
//! 0-RTT and 1-RTT packets share the Application Data packet number space
//! ([`SpaceId::Data`]): a 0-RTT packet is a Data-space packet with a long
//! header, protected with the 0-RTT keys. Only the client sends them, only
//! the server reads them.

use wire::frame::Frame;
use wire::transport_params::TransportParameters;
use wire::Side;

use super::{Connection, SpaceId};
use crate::crypto::DirectionalKeys;
use crate::error::TransportError;

/// Where a connection stands with 0-RTT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ZeroRttStatus {
    /// No 0-RTT: no ticket allowing it (client), or none accepted (server).
    NotAttempted,
    /// Client: resuming with early data; 0-RTT packets may be sent until the
    /// server answers.
    Sending,
    /// The server accepted the client's 0-RTT data (both sides know it).
    Accepted,
    /// Client: the server refused the early data; what it carried was put
    /// back in the send queue for 1-RTT packets.
    Rejected,
}

/// A connection's 0-RTT state.
pub(super) struct ZeroRtt {
    /// Client: the keys that seal 0-RTT packets, until the 1-RTT keys come.
    /// Server: the keys that open them, until the first 1-RTT packet.
    keys: Option<DirectionalKeys>,
    status: ZeroRttStatus,
    /// Client: the encoded transport parameters rustls handed back from the
    /// ticket (the server's, from the earlier connection), and what they
    /// decode to when 0-RTT uses them.
    remembered_raw: Option<Vec<u8>>,
    remembered: Option<TransportParameters>,
}

impl ZeroRtt {
    pub(super) fn new() -> Self {
        ZeroRtt {
            keys: None,
            status: ZeroRttStatus::NotAttempted,
            remembered_raw: None,
            remembered: None,
        }
    }
}

impl core::fmt::Debug for ZeroRtt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ZeroRtt")
            .field("status", &self.status)
            .field("keys", &self.keys.is_some())
            .finish()
    }
}

impl Connection {
    /// Whether this connection resumed an earlier session (a TLS ticket was
    /// accepted: RFC 8446 §2.2), once the handshake has got that far.
    pub fn is_resumed(&self) -> bool {
        self.tls.is_resumed()
    }

    /// Where the connection stands with 0-RTT.
    pub fn zero_rtt_status(&self) -> ZeroRttStatus {
        self.zero_rtt.status
    }

    /// Client: true while stream data written now leaves in 0-RTT packets,
    /// before the handshake completes. An application may then open streams
    /// and send requests it would otherwise hold until
    /// [`Event::Connected`](super::Event::Connected), provided they are safe
    /// to replay (RFC 9001 §9.2: 0-RTT data has no replay protection across
    /// server instances).
    pub fn is_sending_zero_rtt(&self) -> bool {
        self.side.is_client() && self.zero_rtt.keys.is_some() && self.one_rtt.is_none()
    }

    /// Client, at creation: take the remembered parameters and, when the
    /// ticket allows early data, the 0-RTT keys. Only the limits RFC 9000
    /// §7.4.1 lets a client remember are applied (flow control and stream
    /// counts); parameters that decode badly mean no 0-RTT.
    pub(super) fn start_zero_rtt(&mut self) {
        let Some(raw) = self.tls.peer_transport_parameters().map(<[u8]>::to_vec) else {
            return;
        };
        self.zero_rtt.remembered_raw = Some(raw.clone());
        let Some(keys) = self.tls.zero_rtt_keys() else {
            return;
        };
        let Ok(params) = TransportParameters::decode(&raw, Side::Server) else {
            tracing::debug!("remembered transport parameters do not decode: no 0-RTT");
            return;
        };
        self.streams.set_peer_params(&params);
        self.zero_rtt.remembered = Some(params);
        self.zero_rtt.keys = Some(keys);
        self.zero_rtt.status = ZeroRttStatus::Sending;
    }

    /// Client: the transport parameters rustls reports are still the
    /// remembered ones (the server's EncryptedExtensions not read yet).
    pub(super) fn params_are_remembered(&self, raw: &[u8]) -> bool {
        self.side.is_client()
            && self.tls.is_handshaking()
            && self.zero_rtt.remembered_raw.as_deref() == Some(raw)
    }

    /// Server, after reading the ClientHello: install the 0-RTT keys if
    /// rustls accepted early data (a fresh, single-use ticket allowing it,
    /// the same ALPN).
    pub(super) fn accept_zero_rtt(&mut self) {
        if !self.side.is_server() || self.zero_rtt.status != ZeroRttStatus::NotAttempted {
            return;
        }
        if let Some(keys) = self.tls.zero_rtt_keys() {
            self.zero_rtt.keys = Some(keys);
            self.zero_rtt.status = ZeroRttStatus::Accepted;
        }
    }

    /// Client, once the server's real parameters are applied: learn whether
    /// the early data was accepted. Accepted: the server must not have
    /// reduced a limit the 0-RTT data relied on (RFC 9000 §7.4.1), or the
    /// connection ends with PROTOCOL_VIOLATION. Rejected: every 0-RTT
    /// packet is forgotten (neither acknowledged nor lost: never read) and
    /// its stream data queued again for 1-RTT (RFC 9001 §4.6.2).
    pub(super) fn on_server_params(
        &mut self,
        params: &TransportParameters,
    ) -> Result<(), TransportError> {
        if self.zero_rtt.status != ZeroRttStatus::Sending {
            return Ok(());
        }
        if self.tls.is_early_data_accepted() {
            if let Some(old) = self.zero_rtt.remembered.as_ref() {
                check_not_reduced(old, params)?;
            }
            self.zero_rtt.status = ZeroRttStatus::Accepted;
            return Ok(());
        }
        self.zero_rtt.status = ZeroRttStatus::Rejected;
        self.zero_rtt.keys = None;
        let sent = core::mem::take(&mut self.space_mut(SpaceId::Data).sent);
        for (_, p) in sent {
            if p.in_flight {
                self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
            }
            for chunk in &p.stream_chunks {
                self.streams.requeue_lost(chunk);
            }
        }
        let s = self.space_mut(SpaceId::Data);
        s.ack_eliciting_in_flight = 0;
        s.time_of_last_ack_eliciting = None;
        s.loss_time = None;
        tracing::debug!("0-RTT rejected: early stream data queued again for 1-RTT");
        Ok(())
    }

    /// Client: the 1-RTT keys arrived, so 0-RTT ends (RFC 9001 §4.9.3).
    pub(super) fn on_one_rtt_keys(&mut self) {
        if self.side.is_client() {
            self.zero_rtt.keys = None;
        }
    }

    /// Server: a 1-RTT packet was read, so the client has 1-RTT keys and
    /// sends no more 0-RTT (RFC 9001 §4.9.3 allows dropping the keys now).
    pub(super) fn on_one_rtt_packet(&mut self) {
        if self.side.is_server() {
            self.zero_rtt.keys = None;
        }
    }

    /// The 0-RTT keys (client: sealing; server: opening).
    pub(super) fn zero_rtt_keys(&self) -> Option<&DirectionalKeys> {
        self.zero_rtt.keys.as_ref()
    }

    /// Server: whether a 0-RTT packet may still become readable (the
    /// ClientHello, which decides, is not read yet).
    pub(super) fn zero_rtt_undecided(&self) -> bool {
        self.side.is_server()
            && self.zero_rtt.status == ZeroRttStatus::NotAttempted
            && self.handshake_keys.is_none()
            && self.one_rtt.is_none()
    }
}

/// RFC 9000 §12.4 (table 3) and §17.2.3: frames a 0-RTT packet must not
/// carry.
pub(super) fn allowed_in_zero_rtt(frame: &Frame<'_>) -> bool {
    !matches!(
        frame,
        Frame::Ack(_)
            | Frame::Crypto { .. }
            | Frame::HandshakeDone
            | Frame::NewToken { .. }
            | Frame::PathResponse(_)
            | Frame::RetireConnectionId { .. }
    )
}

/// RFC 9000 §7.4.1: a server that accepts 0-RTT must not reduce a limit
/// the client used with its 0-RTT data.
fn check_not_reduced(
    old: &TransportParameters,
    new: &TransportParameters,
) -> Result<(), TransportError> {
    let pairs = [
        (
            "initial_max_data",
            old.initial_max_data,
            new.initial_max_data,
        ),
        (
            "initial_max_stream_data_bidi_local",
            old.initial_max_stream_data_bidi_local,
            new.initial_max_stream_data_bidi_local,
        ),
        (
            "initial_max_stream_data_bidi_remote",
            old.initial_max_stream_data_bidi_remote,
            new.initial_max_stream_data_bidi_remote,
        ),
        (
            "initial_max_stream_data_uni",
            old.initial_max_stream_data_uni,
            new.initial_max_stream_data_uni,
        ),
        (
            "initial_max_streams_bidi",
            old.initial_max_streams_bidi,
            new.initial_max_streams_bidi,
        ),
        (
            "initial_max_streams_uni",
            old.initial_max_streams_uni,
            new.initial_max_streams_uni,
        ),
    ];
    for (name, before, after) in pairs {
        if after < before {
            tracing::debug!(name, before, after, "0-RTT accepted with a reduced limit");
            return Err(TransportError::protocol_violation(
                "0-RTT accepted with reduced transport parameters",
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reduced_limits_are_refused_equal_or_larger_pass() {
        let old = TransportParameters {
            initial_max_data: 1000,
            initial_max_streams_bidi: 10,
            ..TransportParameters::default()
        };
        let mut new = old.clone();
        assert!(check_not_reduced(&old, &new).is_ok());
        new.initial_max_data = 2000;
        assert!(check_not_reduced(&old, &new).is_ok());
        new.initial_max_streams_bidi = 9;
        let err = check_not_reduced(&old, &new).expect_err("reduced");
        assert_eq!(err.code, wire::TransportErrorCode::PROTOCOL_VIOLATION);
    }

    #[test]
    fn zero_rtt_frame_rules() {
        assert!(allowed_in_zero_rtt(&Frame::Ping));
        assert!(allowed_in_zero_rtt(&Frame::MaxData(1)));
        assert!(!allowed_in_zero_rtt(&Frame::HandshakeDone));
        assert!(!allowed_in_zero_rtt(&Frame::Crypto {
            offset: 0,
            data: &[]
        }));
    }
}
