//! The connection's QUIC version: which one its long headers and Initial
//! keys use, compatible version negotiation at the server (RFC 9368 §2.3,
//! RFC 9369 §4), and the downgrade checks of the peer's
//! version_information (RFC 9368 §4).
//!
//! How a server switches: the client's first flight arrives in its Original
//! Version (v1, say), its ClientHello carrying version_information that
//! lists v2. Before TLS reads the ClientHello the server picks the
//! Negotiated Version (the client's first listed version it also speaks),
//! and if that is another one it derives the Initial keys of that version,
//! recreates its TLS session in it (rustls fixes the version's HKDF labels
//! when a session is created, and the server's own version_information
//! must name the Negotiated Version), and from then on sends every long
//! header in it. Client Initials still in the Original Version keep being
//! read, with that version's Initial keys. The client learns the switch
//! from the long headers (RFC 9369 §4).

use std::sync::Arc;

use wire::transport_params::{TransportParameters, VersionInformation};
use wire::{ConnectionId, Side, TransportErrorCode, Version};

use super::Connection;
use crate::crypto::client_hello::{self, Peek};
use crate::crypto::{self, Keys, TlsSession};
use crate::error::TransportError;

/// What a server needs to recreate its TLS session in another version.
pub(super) struct PendingServer {
    tls: Arc<rustls::ServerConfig>,
    params: TransportParameters,
    /// The ClientHello bytes read so far (bounded by
    /// [`client_hello::MAX_CLIENT_HELLO`]).
    hello: Vec<u8>,
}

/// A connection's version state.
pub(super) struct VersionState {
    /// The version of the long headers we send, of `initial_keys`, and of
    /// the TLS session: the Negotiated Version once negotiation is over.
    pub current: Version,
    /// The version of the client's first Initial (RFC 9368's Original
    /// Version).
    pub original: Version,
    /// The DCID the Initial keys derive from (RFC 9001 §5.2).
    initial_dcid: ConnectionId,
    /// Server after a switch: the Initial keys of the Original Version, to
    /// read client Initials sent before the client saw the switch.
    pub original_initial_keys: Option<Keys>,
    /// The long-header version of the packet being read (Initial keys are
    /// chosen by it).
    pub rx: Version,
    /// Server, until the ClientHello is complete: what a switch needs.
    pub pending: Option<PendingServer>,
}

impl VersionState {
    pub(super) fn new(version: Version, initial_dcid: ConnectionId) -> Self {
        VersionState {
            current: version,
            original: version,
            initial_dcid,
            original_initial_keys: None,
            rx: version,
            pending: None,
        }
    }

    /// Server: hold the TLS setup until the ClientHello is read, when the
    /// version may still change (only if we speak more than one).
    pub(super) fn hold_server_setup(
        &mut self,
        tls: Arc<rustls::ServerConfig>,
        params: TransportParameters,
    ) {
        self.pending = Some(PendingServer {
            tls,
            params,
            hello: Vec::new(),
        });
    }

    /// A new DCID for the Initial keys (a client following a Retry).
    pub(super) fn set_initial_dcid(&mut self, dcid: ConnectionId) {
        self.initial_dcid = dcid;
    }

    /// The Initial keys of the current version.
    pub(super) fn initial_keys(&self, side: Side) -> Keys {
        crypto::initial_keys(&self.initial_dcid, side, self.current)
    }
}

/// Our version_information (RFC 9368 §3), when we negotiate versions at
/// all: a client offers its Chosen Version alone (it does not follow a
/// switch), a server lists every version it speaks.
pub(super) fn local_version_information(
    side: Side,
    chosen: Version,
    supported: &[Version],
) -> VersionInformation {
    let available = match side {
        Side::Client => vec![chosen.wire()],
        Side::Server => supported.iter().map(|v| v.wire()).collect(),
    };
    VersionInformation {
        chosen: chosen.wire(),
        available,
    }
}

impl Connection {
    /// The version the connection runs in (the Negotiated Version once the
    /// server has read the ClientHello).
    pub fn version(&self) -> Version {
        self.version.current
    }

    /// Whether a long-header packet of `version` belongs to this
    /// connection: the current version, or at a server that switched, a
    /// client Initial still in the Original Version.
    pub(super) fn accepts_version(&self, version: Version, initial: bool) -> bool {
        version == self.version.current
            || (initial
                && self.side.is_server()
                && version == self.version.original
                && self.version.original_initial_keys.is_some())
    }

    /// The Initial keys to read a packet of `self.version.rx` with.
    pub(super) fn remote_initial_keys(&self) -> Option<&Keys> {
        if self.version.rx != self.version.current {
            self.version.original_initial_keys.as_ref()
        } else {
            self.initial_keys.as_ref()
        }
    }

    /// Server: contiguous Initial CRYPTO bytes arrive while the version is
    /// undecided. Returns the bytes to hand TLS now: nothing while the
    /// ClientHello is incomplete, then all of it, once the version is
    /// settled (switched if the client offers one we prefer).
    pub(super) fn hold_client_hello(
        &mut self,
        bytes: Vec<u8>,
    ) -> Result<Option<Vec<u8>>, TransportError> {
        let Some(pending) = self.version.pending.as_mut() else {
            return Ok(Some(bytes));
        };
        pending.hello.extend_from_slice(&bytes);
        let chosen = match client_hello::peek_transport_parameters(&pending.hello) {
            Peek::Incomplete if pending.hello.len() <= client_hello::MAX_CLIENT_HELLO => {
                return Ok(None);
            }
            Peek::Complete(Some(raw)) => TransportParameters::decode(raw, Side::Client)
                .ok()
                .and_then(|p| p.version_information)
                .and_then(|info| self.negotiated_version(&info)),
            // Malformed: TLS will say so; stay in our version.
            _ => None,
        };
        let Some(pending) = self.version.pending.take() else {
            return Ok(Some(bytes));
        };
        if let Some(version) = chosen.filter(|&v| v != self.version.current) {
            self.switch_version(version, &pending)?;
        }
        Ok(Some(pending.hello))
    }

    /// RFC 9368 §2.3: the first of the client's Available Versions that we
    /// speak (v1 and v2 are compatible both ways, RFC 9369 §4). `None` when
    /// the client's Chosen Version is not the version of its packets: the
    /// check in [`Self::check_version_information`] closes the connection.
    fn negotiated_version(&self, info: &VersionInformation) -> Option<Version> {
        if info.chosen != self.version.original.wire() {
            return None;
        }
        let ours = self.config.versions();
        info.available
            .iter()
            .filter_map(|&v| Version::from_wire(v))
            .find(|v| ours.contains(v))
    }

    /// Server: answer in `version` from now on (RFC 9369 §4).
    fn switch_version(
        &mut self,
        version: Version,
        pending: &PendingServer,
    ) -> Result<(), TransportError> {
        let mut params = pending.params.clone();
        params.version_information = Some(local_version_information(
            Side::Server,
            version,
            self.config.versions(),
        ));
        let mut encoded = Vec::new();
        params.encode(&mut encoded);
        let tls = TlsSession::server(pending.tls.clone(), version, encoded).map_err(|e| {
            tracing::warn!(error = %e, "cannot recreate the TLS session");
            TransportError::new(TransportErrorCode::INTERNAL_ERROR, "TLS setup failed")
        })?;
        tracing::debug!(from = %self.version.current, to = %version, "compatible version negotiation");
        self.tls = tls;
        self.version.current = version;
        self.version.original_initial_keys = self.initial_keys.take();
        self.initial_keys = Some(self.version.initial_keys(Side::Server));
        Ok(())
    }

    /// RFC 9368 §4, the downgrade checks of the peer's version_information
    /// (parsing failures were refused by the decoder): a client's Chosen
    /// Version must be the version of its first Initial; a server's must be
    /// the version the connection runs in, which is the one we offered.
    /// A missing parameter is accepted (§4: "MAY complete the handshake";
    /// our client never reacts to Version Negotiation).
    pub(super) fn check_version_information(
        &self,
        params: &TransportParameters,
    ) -> Result<(), TransportError> {
        let Some(info) = &params.version_information else {
            return Ok(());
        };
        let expected = match self.side {
            Side::Server => self.version.original,
            Side::Client => self.version.current,
        };
        if info.chosen != expected.wire() {
            return Err(TransportError::new(
                TransportErrorCode::VERSION_NEGOTIATION_ERROR,
                "version_information Chosen Version does not match the connection's",
            ));
        }
        Ok(())
    }
}
