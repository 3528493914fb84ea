//! In-memory handshakes between a client and a server [`TlsSession`], with
//! every CRYPTO chunk carried in a packet sealed at the level the
//! `write_handshake` rule assigns it, and opened by the peer with its keys for
//! that level: the keys and the level rule are checked together.

use super::*;
use crate::crypto::certs::{
    client_config, self_signed, server_config, ServerVerification, TEST_ALPN,
};
use crate::crypto::keys::{
    initial_keys, HeaderProtectionKey, KeyChange, Keys, NextSecrets, PacketKey,
};
use crate::crypto::protect::{open, remove_header_protection, seal, seal_parts, TAG_LEN};
use proptest::prelude::*;
use rustls::AlertDescription;

const INITIAL: usize = 0;
const HANDSHAKE: usize = 1;
const ONE_RTT: usize = 2;
const CLIENT_PARAMS: &[u8] = b"client transport parameters";
const SERVER_PARAMS: &[u8] = b"server transport parameters";

/// One endpoint: its session, keys per level, and the packets it sent.
struct Peer {
    tls: TlsSession,
    keys: [Option<Keys>; 3],
    next: Option<NextSecrets>,
    level: usize,
    next_pn: [u64; 3],
    outbox: Vec<(usize, Vec<u8>)>,
    /// (level, TLS handshake message type of the chunk's first message).
    sent: Vec<(usize, u8)>,
}

impl Peer {
    fn new(tls: TlsSession) -> Self {
        let dcid = b"\x83\x94\xc8\xf0\x3e\x51\x57\x08";
        let initial = initial_keys(dcid, tls.side(), wire::Version::V1);
        Peer {
            tls,
            keys: [Some(initial), None, None],
            next: None,
            level: INITIAL,
            next_pn: [0; 3],
            outbox: Vec::new(),
            sent: Vec::new(),
        }
    }

    /// Drain `write_handshake`, sealing each chunk at its level.
    fn pump(&mut self) {
        loop {
            let mut data = Vec::new();
            let change = self.tls.write_handshake(&mut data);
            if !data.is_empty() {
                self.sent.push((self.level, data[0]));
                let packet = self.seal(self.level, &data);
                self.outbox.push((self.level, packet));
            }
            match change {
                Some(KeyChange::Handshake { keys }) => {
                    assert_eq!(self.level, INITIAL, "Handshake keys come after Initial");
                    self.keys[HANDSHAKE] = Some(keys);
                    self.level = HANDSHAKE;
                }
                Some(KeyChange::OneRtt { keys, next }) => {
                    assert_eq!(self.level, HANDSHAKE, "1-RTT keys come after Handshake");
                    self.keys[ONE_RTT] = Some(keys);
                    self.next = Some(next);
                    self.level = ONE_RTT;
                }
                None => break,
            }
        }
    }

    /// A packet at `level`: long header (Initial/Handshake) or short (1-RTT),
    /// 8 header bytes, a 2-byte packet number at offset 9, `data`, the tag.
    fn seal(&mut self, level: usize, data: &[u8]) -> Vec<u8> {
        let pn = self.next_pn[level];
        self.next_pn[level] += 1;
        let first = if level == ONE_RTT { 0x41 } else { 0xc1 };
        let mut packet = vec![first, 0, 0, 0, 1, 8, 7, 6, 5];
        packet.extend_from_slice(&(pn as u16).to_be_bytes());
        packet.extend_from_slice(data);
        packet.extend_from_slice(&[0; TAG_LEN]);
        let keys = self.keys[level]
            .as_ref()
            .expect("keys for the level being written");
        seal(&keys.local, &mut packet, 9, 2, pn).expect("seal");
        packet
    }

    /// Unprotect a packet with this endpoint's keys for `level`.
    fn open_packet(keys: &Keys, mut packet: Vec<u8>) -> Vec<u8> {
        let (_, pn_len, pn) = remove_header_protection(keys.remote.header.as_ref(), &mut packet, 9)
            .expect("unprotect");
        let range = open(
            keys.remote.packet.as_ref(),
            &mut packet,
            9 + pn_len,
            u64::from(pn),
        )
        .expect("open");
        packet[range].to_vec()
    }

    /// Receive a packet: like a connection, first let TLS hand over keys it
    /// has ready if the packet's level has none yet.
    fn receive(&mut self, level: usize, packet: Vec<u8>) -> Result<(), TlsFailure> {
        if self.keys[level].is_none() {
            self.pump();
        }
        let keys = self.keys[level]
            .as_ref()
            .expect("keys for the level of a received packet");
        let data = Self::open_packet(keys, packet);
        self.tls.read_handshake(&data)
    }

    fn done(&self) -> bool {
        !self.tls.is_handshaking() && self.keys[ONE_RTT].is_some()
    }
}

/// Run the handshake to completion, or to the first failure (and which side
/// reported it).
fn handshake(client: &mut Peer, server: &mut Peer) -> Result<(), (Side, TlsFailure)> {
    client.pump();
    for _ in 0..6 {
        for (level, packet) in std::mem::take(&mut client.outbox) {
            server
                .receive(level, packet)
                .map_err(|e| (Side::Server, e))?;
        }
        server.pump();
        for (level, packet) in std::mem::take(&mut server.outbox) {
            client
                .receive(level, packet)
                .map_err(|e| (Side::Client, e))?;
        }
        client.pump();
        if client.done() && server.done() && client.outbox.is_empty() {
            return Ok(());
        }
    }
    panic!("handshake made no progress");
}

fn pair(verify: ServerVerification, server_name: &str, client_alpn: &[&[u8]]) -> (Peer, Peer) {
    let (chain, key) = self_signed(&["localhost"]).expect("cert");
    pair_with(
        verify,
        server_name,
        client_alpn,
        server_config(chain, key, &[TEST_ALPN]).expect("server config"),
    )
}

fn pair_with(
    verify: ServerVerification,
    server_name: &str,
    client_alpn: &[&[u8]],
    server: Arc<rustls::ServerConfig>,
) -> (Peer, Peer) {
    let client = TlsSession::client(
        client_config(verify, client_alpn).expect("client config"),
        wire::Version::V1,
        server_name,
        CLIENT_PARAMS.to_vec(),
    )
    .expect("client session");
    let server = TlsSession::server(server, wire::Version::V1, SERVER_PARAMS.to_vec())
        .expect("server session");
    assert_eq!((client.side(), server.side()), (Side::Client, Side::Server));
    (Peer::new(client), Peer::new(server))
}

/// After a handshake: parameters, ALPN, levels, 1-RTT keys both ways, and two
/// key updates (RFC 9001 §6).
fn check_established(client: &mut Peer, server: &mut Peer) {
    assert_eq!(client.tls.peer_transport_parameters(), Some(SERVER_PARAMS));
    assert_eq!(server.tls.peer_transport_parameters(), Some(CLIENT_PARAMS));
    assert_eq!(client.tls.alpn_protocol(), Some(TEST_ALPN));
    assert_eq!(server.tls.alpn_protocol(), Some(TEST_ALPN));
    // RFC 9001 §4.1.4: ClientHello and ServerHello in Initial, the server's
    // EncryptedExtensions..Finished and the client's Finished in Handshake,
    // nothing in 1-RTT (no session tickets).
    const CLIENT_HELLO: u8 = 1;
    const SERVER_HELLO: u8 = 2;
    const ENCRYPTED_EXTENSIONS: u8 = 8;
    const FINISHED: u8 = 20;
    assert_eq!(
        client.sent,
        vec![(INITIAL, CLIENT_HELLO), (HANDSHAKE, FINISHED)]
    );
    assert_eq!(
        server.sent,
        vec![(INITIAL, SERVER_HELLO), (HANDSHAKE, ENCRYPTED_EXTENSIONS)]
    );

    let data = b"GET /index.html\r\n";
    let from_client = client.seal(ONE_RTT, data);
    assert_eq!(
        Peer::open_packet(server.keys[ONE_RTT].as_ref().expect("1-RTT"), from_client),
        data
    );
    let from_server = server.seal(ONE_RTT, b"file bytes");
    assert_eq!(
        Peer::open_packet(client.keys[ONE_RTT].as_ref().expect("1-RTT"), from_server),
        b"file bytes"
    );

    // Key updates: packet keys change, header keys stay (RFC 9001 §6).
    let (c_keys, c_next) = (
        client.keys[ONE_RTT].as_ref().expect("1-RTT"),
        client.next.as_mut().expect("next"),
    );
    let (s_keys, s_next) = (
        server.keys[ONE_RTT].as_ref().expect("1-RTT"),
        server.next.as_mut().expect("next"),
    );
    for phase in 1..=2u64 {
        let (c, s) = (c_next.next_packet_keys(), s_next.next_packet_keys());
        let to_server = |rx_key: &dyn PacketKey| {
            transfer(
                c_keys.local.header.as_ref(),
                c.local.as_ref(),
                s_keys.remote.header.as_ref(),
                rx_key,
                phase,
            )
        };
        assert_eq!(to_server(s.remote.as_ref()).expect("updated keys"), UPDATED);
        assert!(
            to_server(s_keys.remote.packet.as_ref()).is_err(),
            "phase 0 key"
        );
        let to_client = |rx_key: &dyn PacketKey| {
            transfer(
                s_keys.local.header.as_ref(),
                s.local.as_ref(),
                c_keys.remote.header.as_ref(),
                rx_key,
                phase,
            )
        };
        assert_eq!(to_client(c.remote.as_ref()).expect("updated keys"), UPDATED);
        assert!(
            to_client(c_keys.remote.packet.as_ref()).is_err(),
            "phase 0 key"
        );
    }
}

const UPDATED: &[u8] = b"after a key update";

/// Seal a short-header packet carrying [`UPDATED`] with one set of keys and
/// open it with another; the payload if it opens.
fn transfer(
    tx_header: &dyn HeaderProtectionKey,
    tx_key: &dyn PacketKey,
    rx_header: &dyn HeaderProtectionKey,
    rx_key: &dyn PacketKey,
    pn: u64,
) -> Result<Vec<u8>, CryptoError> {
    // Key phase bit set (0x04): the receiver's cue to use the next keys.
    let mut packet = vec![0x45, 1, 2, 3, 4, 5, 6, 7, 8, 0, pn as u8];
    packet.extend_from_slice(UPDATED);
    packet.extend_from_slice(&[0; TAG_LEN]);
    seal_parts(tx_header, tx_key, &mut packet, 9, 2, pn)?;
    let (first, pn_len, truncated) = remove_header_protection(rx_header, &mut packet, 9)?;
    assert_eq!(
        (first, pn_len, u64::from(truncated)),
        (0x45, 2, pn),
        "header keys never change"
    );
    let range = open(rx_key, &mut packet, 9 + pn_len, pn)?;
    Ok(packet[range].to_vec())
}

#[test]
fn handshake_with_trusted_roots() {
    let (chain, key) = self_signed(&["localhost"]).expect("cert");
    let server = server_config(chain.clone(), key, &[TEST_ALPN]).expect("server config");
    let (mut client, mut server) = pair_with(
        ServerVerification::Roots(chain),
        "localhost",
        &[TEST_ALPN],
        server,
    );
    handshake(&mut client, &mut server).expect("handshake");
    check_established(&mut client, &mut server);
}

/// Insecure skips the name and chain checks.
#[test]
fn handshake_insecure_accepts_any_name() {
    let (mut client, mut server) = pair(ServerVerification::Insecure, "example.org", &[TEST_ALPN]);
    handshake(&mut client, &mut server).expect("handshake");
    check_established(&mut client, &mut server);
}

/// An IP address is a valid server name too (the certificate names it).
#[test]
fn handshake_with_ip_server_name() {
    let (chain, key) = self_signed(&["127.0.0.1"]).expect("cert");
    let config = server_config(chain.clone(), key, &[TEST_ALPN]).expect("server config");
    let (mut client, mut server) = pair_with(
        ServerVerification::Roots(chain),
        "127.0.0.1",
        &[TEST_ALPN],
        config,
    );
    handshake(&mut client, &mut server).expect("handshake");
}

/// The CRYPTO_ERROR code a client reports for a failed handshake.
fn client_failure(client: &mut Peer, server: &mut Peer) -> TlsFailure {
    match handshake(client, server) {
        Err((Side::Client, failure)) => failure,
        other => panic!("expected the client to fail, got {other:?}"),
    }
}

fn crypto_error(alert: AlertDescription) -> u64 {
    0x100 + u64::from(u8::from(alert))
}

#[test]
fn roots_reject_a_certificate_for_another_name() {
    let (chain, key) = self_signed(&["localhost"]).expect("cert");
    let config = server_config(chain.clone(), key, &[TEST_ALPN]).expect("server config");
    let (mut client, mut server) = pair_with(
        ServerVerification::Roots(chain),
        "example.org",
        &[TEST_ALPN],
        config,
    );
    let failure = client_failure(&mut client, &mut server);
    assert_eq!(
        failure.code,
        crypto_error(AlertDescription::BadCertificate),
        "{failure}"
    );
    assert_eq!(failure.alert(), 42);
    assert!(client.tls.is_handshaking());
}

#[test]
fn roots_reject_an_untrusted_certificate() {
    // Another issuer: no trust anchor matches.
    let (trusted, _) = self_signed(&["trusted.example"]).expect("cert");
    let (mut client, mut server) = pair(
        ServerVerification::Roots(trusted),
        "localhost",
        &[TEST_ALPN],
    );
    let failure = client_failure(&mut client, &mut server);
    assert_eq!(
        failure.code,
        crypto_error(AlertDescription::UnknownCA),
        "{failure}"
    );

    // Same issuer name, other key: the chain's signature does not verify.
    let (same_name, _) = self_signed(&["localhost"]).expect("cert");
    let (mut client, mut server) = pair(
        ServerVerification::Roots(same_name),
        "localhost",
        &[TEST_ALPN],
    );
    let failure = client_failure(&mut client, &mut server);
    assert_eq!(
        failure.code,
        crypto_error(AlertDescription::DecryptError),
        "{failure}"
    );
}

/// A server showing a certificate whose key it does not hold.
#[derive(Debug)]
struct WrongKey(Arc<rustls::sign::CertifiedKey>);

impl rustls::server::ResolvesServerCert for WrongKey {
    fn resolve(
        &self,
        _hello: rustls::server::ClientHello<'_>,
    ) -> Option<Arc<rustls::sign::CertifiedKey>> {
        Some(self.0.clone())
    }
}

/// Insecure still checks the CertificateVerify signature: a server that shows
/// a certificate without holding its key is refused.
#[test]
fn insecure_still_verifies_the_handshake_signature() {
    let (chain, _) = self_signed(&["localhost"]).expect("cert");
    let (_, other_key) = self_signed(&["localhost"]).expect("cert");
    let signer = rustls::crypto::ring::sign::any_supported_type(&other_key).expect("signing key");
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])
    .expect("TLS 1.3")
    .with_no_client_auth()
    .with_cert_resolver(Arc::new(WrongKey(Arc::new(
        rustls::sign::CertifiedKey::new(chain, signer),
    ))));
    config.alpn_protocols = vec![TEST_ALPN.to_vec()];
    let (mut client, mut server) = pair_with(
        ServerVerification::Insecure,
        "localhost",
        &[TEST_ALPN],
        Arc::new(config),
    );
    let failure = client_failure(&mut client, &mut server);
    assert_eq!(
        failure.code,
        crypto_error(AlertDescription::DecryptError),
        "{failure}"
    );
}

/// RFC 9001 §8.1: no common application protocol is error 0x178.
#[test]
fn alpn_mismatch_is_no_application_protocol() {
    let (mut client, mut server) = pair(ServerVerification::Insecure, "localhost", &[b"h3"]);
    match handshake(&mut client, &mut server) {
        Err((Side::Server, failure)) => assert_eq!(failure.code, 0x178, "{failure}"),
        other => panic!("expected the server to refuse, got {other:?}"),
    }
}

#[test]
fn invalid_server_name_is_an_error() {
    let config = client_config(ServerVerification::Insecure, &[TEST_ALPN]).expect("client config");
    let err = TlsSession::client(config, wire::Version::V1, "not a host name!", Vec::new())
        .expect_err("invalid name");
    assert!(
        matches!(err, CryptoError::InvalidServerName { .. }),
        "{err:?}"
    );
}

proptest! {
    /// Garbage handshake bytes end in a CRYPTO_ERROR, never a panic.
    #[test]
    fn garbage_handshake_data_fails_cleanly(chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..300), 1..4)) {
        let (chain, key) = self_signed_cached();
        let config = server_config(chain, key, &[TEST_ALPN]).expect("server config");
        let mut server = TlsSession::server(config, wire::Version::V1, SERVER_PARAMS.to_vec()).expect("server");
        for chunk in &chunks {
            if let Err(failure) = server.read_handshake(chunk) {
                prop_assert!((0x100..=0x1ff).contains(&failure.code), "{}", failure);
                break;
            }
            let mut out = Vec::new();
            while server.write_handshake(&mut out).is_some() {}
        }
    }
}

/// One certificate for all property cases (generating one per case is slow).
fn self_signed_cached() -> (
    Vec<rustls::pki_types::CertificateDer<'static>>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    static CERT: std::sync::OnceLock<(Vec<rustls::pki_types::CertificateDer<'static>>, Vec<u8>)> =
        std::sync::OnceLock::new();
    let (chain, key) = CERT.get_or_init(|| {
        let (chain, key) = self_signed(&["localhost"]).expect("cert");
        (chain, key.secret_der().to_vec())
    });
    let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key.clone()).into();
    (chain.clone(), key)
}
