//! The TLS 1.3 handshake for one QUIC connection (RFC 9001 §4), on
//! `rustls::quic::Connection`.
//!
//! [`TlsSession`] consumes and produces the bytes carried in CRYPTO frames and
//! reports new keys; the connection decides which packet number space each
//! byte travels in, following the rule documented on
//! [`TlsSession::write_handshake`].

use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::quic;
use wire::{Side, Version};

use super::keys::KeyChange;
use super::CryptoError;

/// A handshake failure, ready to become a CONNECTION_CLOSE: RFC 9001 §4.8 maps
/// a TLS alert to the transport error code `0x100 + alert`
/// (CRYPTO_ERROR range, RFC 9000 §20.1).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TLS handshake failed (error code {code:#x}): {reason}")]
pub struct TlsFailure {
    /// The transport error code: `0x100 + alert`, or `0x100 + 80`
    /// (internal_error) when rustls produced no alert.
    pub code: u64,
    /// What rustls reported, for the CONNECTION_CLOSE reason phrase and logs.
    pub reason: String,
}

/// RFC 9001 §4.8: the base of the CRYPTO_ERROR range.
const CRYPTO_ERROR_BASE: u64 = 0x100;
/// TLS alert internal_error (RFC 8446 §6.2).
const ALERT_INTERNAL_ERROR: u8 = 80;

impl TlsFailure {
    /// The failure for a rustls error and the alert rustls chose for it.
    fn new(error: &rustls::Error, alert: Option<rustls::AlertDescription>) -> Self {
        let alert = alert.map(u8::from).unwrap_or(ALERT_INTERNAL_ERROR);
        TlsFailure {
            code: CRYPTO_ERROR_BASE + u64::from(alert),
            reason: error.to_string(),
        }
    }

    /// The TLS alert carried in the code (RFC 9001 §4.8).
    pub fn alert(&self) -> u8 {
        // `code` is always 0x100 + a u8; the mask keeps that true for
        // hand-built values too.
        (self.code & 0xff) as u8
    }
}

/// One endpoint's TLS 1.3 handshake state for a QUIC connection.
///
/// Calling protocol (RFC 9001 §4.1): the connection passes every contiguous
/// CRYPTO byte it receives, in order, to [`Self::read_handshake`] (whatever
/// the level: rustls checks the sequence itself), then drains
/// [`Self::write_handshake`] until it returns `None`, installing each
/// [`KeyChange`] as it comes. Transport parameters (RFC 9000 §18) travel as
/// opaque bytes; encoding and validating them is the caller's job.
pub struct TlsSession {
    conn: quic::Connection,
    side: Side,
}

impl TlsSession {
    /// A client session of QUIC `version` that will authenticate
    /// `server_name` (a DNS name or an IP address) and send
    /// `transport_params` (RFC 9000 §18, encoded). The version fixes the
    /// HKDF labels of every key the session derives (RFC 9369 §3.3.2).
    pub fn client(
        config: Arc<rustls::ClientConfig>,
        version: Version,
        server_name: &str,
        transport_params: Vec<u8>,
    ) -> Result<Self, CryptoError> {
        let name = ServerName::try_from(server_name.to_owned()).map_err(|e| {
            CryptoError::InvalidServerName {
                name: server_name.to_owned(),
                reason: e.to_string(),
            }
        })?;
        let conn = quic::ClientConnection::new(
            config,
            super::keys::rustls_version(version),
            name,
            transport_params,
        )?;
        Ok(TlsSession {
            conn: conn.into(),
            side: Side::Client,
        })
    }

    /// A server session of QUIC `version` that will send `transport_params`
    /// (RFC 9000 §18).
    pub fn server(
        config: Arc<rustls::ServerConfig>,
        version: Version,
        transport_params: Vec<u8>,
    ) -> Result<Self, CryptoError> {
        let conn = quic::ServerConnection::new(
            config,
            super::keys::rustls_version(version),
            transport_params,
        )?;
        Ok(TlsSession {
            conn: conn.into(),
            side: Side::Server,
        })
    }

    /// Which end of the connection this session is.
    pub fn side(&self) -> Side {
        self.side
    }

    /// Feed handshake bytes received in CRYPTO frames, in stream order.
    ///
    /// On failure the handshake is dead: close the connection with
    /// [`TlsFailure::code`] (RFC 9001 §4.8).
    pub fn read_handshake(&mut self, data: &[u8]) -> Result<(), TlsFailure> {
        self.conn
            .read_hs(data)
            .map_err(|e| TlsFailure::new(&e, self.conn.alert()))
    }

    /// Append handshake bytes to send to `out`, and return new keys if the
    /// handshake just reached the next encryption level.
    ///
    /// The level rule: bytes appended by a call belong to the encryption level
    /// in use *before* any key change the same call returns. Starting at
    /// Initial, a session moves to Handshake on [`KeyChange::Handshake`] and to
    /// 1-RTT on [`KeyChange::OneRtt`]. So a server that has read a ClientHello
    /// gets its ServerHello (Initial) with `KeyChange::Handshake`, then on the
    /// next call EncryptedExtensions..Finished (Handshake) with
    /// `KeyChange::OneRtt`. Call until it returns `None`: a call returning
    /// `None` may still have appended bytes, at the current level.
    pub fn write_handshake(&mut self, out: &mut Vec<u8>) -> Option<KeyChange> {
        self.conn.write_hs(out).map(KeyChange::from)
    }

    /// True until the TLS handshake is complete (RFC 9001 §4.1.1): for a
    /// client, once it has sent its Finished; for a server, once it has
    /// received the client's.
    pub fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }

    /// The peer's encoded transport parameters (RFC 9001 §8.2), once received.
    pub fn peer_transport_parameters(&self) -> Option<&[u8]> {
        self.conn.quic_transport_parameters()
    }

    /// The keys of 0-RTT packets (RFC 9001 §4.6, §5.1), when this session
    /// has them: a client resuming a session whose ticket allows early data
    /// (from the start: they protect what it sends), a server that accepted
    /// a client's early data (once it has read the ClientHello: they open
    /// what it receives). Only one direction exists: the client's.
    pub fn zero_rtt_keys(&self) -> Option<super::DirectionalKeys> {
        self.conn.zero_rtt_keys()
    }

    /// Client: whether the server accepted our 0-RTT data (known once its
    /// EncryptedExtensions are read). Always false for a server.
    pub fn is_early_data_accepted(&self) -> bool {
        match &self.conn {
            quic::Connection::Client(c) => c.is_early_data_accepted(),
            quic::Connection::Server(_) => false,
        }
    }

    /// Whether this handshake resumed an earlier session (a ticket was
    /// accepted), once the handshake has got that far.
    pub fn is_resumed(&self) -> bool {
        self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed)
    }

    /// The negotiated application protocol (RFC 9001 §8.1), once agreed.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.conn.alpn_protocol()
    }
}

impl core::fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TlsSession")
            .field("side", &self.side)
            .field("handshaking", &self.is_handshaking())
            .finish()
    }
}

#[cfg(test)]
#[path = "tls_tests.rs"]
mod tests;
