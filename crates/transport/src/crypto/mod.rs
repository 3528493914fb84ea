//! The crypto layer: TLS 1.3 for QUIC (RFC 9001) on rustls, packet protection
//! on raw bytes, and certificate/configuration helpers.
//!
//! What is here, and what is not:
//! - [`tls`]: [`TlsSession`], a thin wrapper over `rustls::quic::Connection`
//!   that turns CRYPTO-frame bytes into new packet protection keys. It does not
//!   know about packets or packet number spaces.
//! - [`keys`]: the key types handed to the connection ([`Keys`],
//!   [`DirectionalKeys`], re-exported from rustls), Initial keys
//!   (RFC 9001 §5.2) and 1-RTT key updates (RFC 9001 §6).
//! - [`protect`]: packet protection applied in place on a byte buffer: AEAD
//!   (RFC 9001 §5.3), header protection (§5.4) and the Retry integrity tag
//!   (§5.8). It works on byte offsets the caller computed; it parses no header.
//! - [`client_hello`]: the client's transport parameters read out of its
//!   ClientHello, for a server deciding the version before TLS starts.
//! - [`certs`]: self-signed certificates, PEM loading, and the rustls client
//!   and server configurations artq uses (TLS 1.3 only, ring provider).
//!
//! Like the rest of the crate the layer is sans-IO: it reads no clock and no
//! socket. Two caveats, both inside rustls/ring and accepted by design: rustls
//! draws handshake randomness (client random, key shares) from the OS, and
//! certificate validity is checked against the system clock. With the Ed25519
//! certificates made by [`certs`] every handshake message still has the same
//! size for the same configuration, so a simulated run's packet sizes and
//! timings do not depend on that randomness.
//!
//! # Calling protocol
//!
//! 1. Both sides derive Initial keys from the client's first Destination
//!    Connection ID: [`initial_keys`].
//! 2. Feed received CRYPTO data with [`TlsSession::read_handshake`]; collect
//!    data to send with [`TlsSession::write_handshake`], which also yields a
//!    [`KeyChange`] when the next encryption level's keys are ready. Bytes
//!    written by a call belong to the level in use *before* that call's key
//!    change (see [`TlsSession::write_handshake`]).
//! 3. Protect outgoing packets with [`seal`], unprotect incoming ones with
//!    [`remove_header_protection`] then [`open`].

pub mod certs;
pub mod client_hello;
pub mod keys;
pub mod protect;
pub mod tls;

#[cfg(test)]
mod test_vectors;
#[cfg(test)]
mod v2_tests;

use std::path::PathBuf;

pub use certs::{
    client_config, enable_client_resumption, enable_server_resumption, load_pem_chain,
    load_pem_key, self_signed_from_seed, self_signed_with_key, server_config, ServerVerification,
    MAX_CLIENT_SESSIONS, MAX_SERVER_TICKETS, TEST_ALPN, TICKETS_PER_CONNECTION,
};
pub use keys::{
    initial_keys, DirectionalKeys, HeaderProtectionKey, KeyChange, Keys, NextSecrets, PacketKey,
    PacketKeySet,
};
pub use protect::{
    open, remove_header_protection, retry_integrity_tag, seal, seal_parts, tag_len,
    verify_retry_integrity, MAX_PACKET_NUMBER_LEN, SAMPLE_LEN, TAG_LEN,
};
pub use tls::{TlsFailure, TlsSession};

/// Everything that can go wrong in the crypto layer, except a failed
/// handshake, which is a [`TlsFailure`] because it carries the error code to
/// close the connection with.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CryptoError {
    /// rustls refused a configuration, a key or a session.
    #[error("TLS: {0}")]
    Tls(#[from] rustls::Error),
    /// The name given for the server is neither a DNS name nor an IP address.
    #[error("invalid server name {name:?}: {reason}")]
    InvalidServerName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: String,
    },
    /// A packet is too short for the operation (e.g. no room for the header
    /// protection sample, RFC 9001 §5.4.2, or for the AEAD tag).
    #[error("packet of {len} bytes is too short: {needed} needed for {what}")]
    PacketTooShort {
        /// The packet's length.
        len: usize,
        /// The length the operation needs.
        needed: usize,
        /// What the bytes are needed for.
        what: &'static str,
    },
    /// A packet number length outside 1..=4 (RFC 9000 §17.1).
    #[error("invalid packet number length {0}: must be 1 to 4")]
    InvalidPacketNumberLength(usize),
    /// A packet number offset of 0: the first byte is always the header's
    /// flags byte, so the packet number cannot start there.
    #[error("invalid packet number offset 0")]
    InvalidPacketNumberOffset,
    /// The AEAD refused to encrypt (payload beyond the algorithm's limit).
    #[error("packet encryption failed")]
    EncryptFailed,
    /// The packet failed authentication: corrupted, forged, or protected with
    /// other keys (RFC 9001 §5.5: discard it).
    #[error("packet authentication failed")]
    DecryptFailed,
    /// Header protection could not be applied or removed.
    #[error("header protection failed")]
    HeaderProtectionFailed,
    /// A connection ID longer than QUIC v1 allows (20 bytes, RFC 9000 §17.2).
    #[error("connection ID of {0} bytes is longer than 20")]
    ConnectionIdTooLong(usize),
    /// rcgen could not make a certificate (its error, as text).
    #[error("certificate generation: {0}")]
    CertGeneration(String),
    /// A certificate or key file could not be read or parsed.
    #[error("{}: {reason}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong with it.
        reason: String,
    },
    /// A certificate given as a trust root was refused.
    #[error("trusted certificate #{index}: {reason}")]
    BadRootCertificate {
        /// Its position in the list given.
        index: usize,
        /// Why it was refused.
        reason: String,
    },
    /// [`ServerVerification::Roots`] with an empty list: nothing could verify.
    #[error("no trusted certificates given")]
    NoRootCertificates,
}

impl From<rcgen::Error> for CryptoError {
    fn from(e: rcgen::Error) -> Self {
        CryptoError::CertGeneration(e.to_string())
    }
}
