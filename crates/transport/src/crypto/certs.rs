//! Certificates and TLS configurations for artq endpoints.
//!
//! Both configurations are TLS 1.3 only (RFC 9001 §4.2) on rustls's ring
//! provider, with the ALPN list the caller gives (RFC 9001 §8.1; the
//! application layer owns the tokens). By default neither side resumes
//! sessions or accepts 0-RTT: every connection runs a full handshake, so each
//! measured transfer starts from the same state. [`enable_server_resumption`]
//! and [`enable_client_resumption`] turn session tickets and 0-RTT on for a
//! real server or client (`artq serve --resumption`, `artq get`), with the
//! anti-replay rules documented on [`enable_server_resumption`].
//!
//! Certificates made here are Ed25519: its signatures are deterministic and
//! always 64 bytes, so a handshake's message sizes do not vary from run to run
//! (ECDSA signatures vary in length), which keeps simulated runs repeatable.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{
    verify_tls12_signature, verify_tls13_signature, CryptoProvider, WebPkiSupportedAlgorithms,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::CryptoError;

/// The ALPN token the transport's own tests, its in-memory test pair and its
/// fuzz bodies negotiate. The transport knows no application protocol: the
/// real ones (`h3`, `hq-interop`) are the application layer's (`apps`).
#[doc(hidden)]
pub const TEST_ALPN: &[u8] = b"artq-test";

/// How a client decides whether to trust the server's certificate.
#[derive(Clone, Debug)]
pub enum ServerVerification {
    /// Accept any certificate chain for any name. DANGER: this gives up server
    /// authentication, so anyone on the path can impersonate the server. It is
    /// for tests, the simulator and `artq get --insecure`. The handshake
    /// signature (CertificateVerify) is still checked against the presented
    /// certificate, so the TLS handshake itself stays sound.
    Insecure,
    /// Trust exactly these certificates as roots: CA certificates, or
    /// self-signed server certificates (as made by [`self_signed_with_key`]). The
    /// server's chain and name are fully verified (WebPKI).
    Roots(Vec<CertificateDer<'static>>),
}

/// The ring provider: the one crypto backend of artq.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A self-signed Ed25519 certificate for `names` with a fresh key (ring's
/// system random generator): the transport's own tests.
#[cfg(test)]
pub(crate) fn self_signed(
    names: &[&str],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CryptoError> {
    let key_pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519)?;
    self_signed_with_key(names, key_pair)
}

/// Like `self_signed`, but the key is derived from `seed` (RFC 8032 §5.1.5:
/// an Ed25519 private key is 32 arbitrary bytes), so the certificate is the
/// same bytes every time for the same seed and names: a simulated run can
/// derive it from its scenario seed.
pub fn self_signed_from_seed(
    names: &[&str],
    seed: [u8; 32],
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CryptoError> {
    // PKCS#8 v1 PrivateKeyInfo for Ed25519 (RFC 8410 §7): a fixed 16-byte
    // prefix (version 0, algorithm id-Ed25519 1.3.101.112, OCTET STRING
    // wrapping an OCTET STRING of 32 bytes) followed by the private key.
    const PKCS8_ED25519_PREFIX: [u8; 16] = [
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04,
        0x20,
    ];
    let mut der = Vec::with_capacity(PKCS8_ED25519_PREFIX.len() + seed.len());
    der.extend_from_slice(&PKCS8_ED25519_PREFIX);
    der.extend_from_slice(&seed);
    let key_pair = rcgen::KeyPair::from_pkcs8_der_and_sign_algo(
        &PrivatePkcs8KeyDer::from(der),
        &rcgen::PKCS_ED25519,
    )?;
    self_signed_with_key(names, key_pair)
}

/// A certificate for `names` (DNS names or IP addresses, e.g. `localhost`,
/// `127.0.0.1`) signed with `key_pair` itself, its subject (and so issuer)
/// common name the first name, and the key as PKCS#8. rcgen's defaults make
/// the rest fixed: validity 1975–4096, serial number from the public key.
///
/// The caller brings the key: a real endpoint generates one from the OS
/// random generator (`artq serve` makes an ECDSA P-256 key, the algorithm
/// every browser accepts; Chromium offers no Ed25519), the simulator derives
/// an Ed25519 one from its seed ([`self_signed_from_seed`]).
pub fn self_signed_with_key(
    names: &[&str],
    key_pair: rcgen::KeyPair,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CryptoError> {
    let owned: Vec<String> = names.iter().map(|n| (*n).to_owned()).collect();
    let mut params = rcgen::CertificateParams::new(owned)?;
    if let Some(first) = names.first() {
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, *first);
    }
    let cert = params.self_signed(&key_pair)?;
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key_pair.serialize_der()));
    Ok((vec![cert.der().clone()], key))
}

/// Largest PEM file read, bytes (1 MiB: a certificate chain is a few KB,
/// a bundle of every public root CA a few hundred KB). A larger file, or one
/// without an end (`/dev/zero`), is refused after this many bytes.
pub const MAX_PEM_BYTES: u64 = 1 << 20;

/// Read a PEM file's bytes (at most [`MAX_PEM_BYTES`]), naming the file in
/// the error.
fn read_file(path: &Path) -> Result<Vec<u8>, CryptoError> {
    use std::io::Read;
    let error = |reason: String| CryptoError::File {
        path: path.to_owned(),
        reason,
    };
    let file = std::fs::File::open(path).map_err(|e| error(format!("cannot read: {e}")))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| error(format!("cannot read: {e}")))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        return Err(error(format!(
            "larger than {MAX_PEM_BYTES} bytes (1 MiB), the most artq reads from a PEM file"
        )));
    }
    Ok(bytes)
}

/// Load a certificate chain (end-entity first) from a PEM file of one or more
/// `CERTIFICATE` blocks. Other blocks (e.g. a key) are skipped; a file with no
/// certificate, or with a malformed block, is an error naming the file.
pub fn load_pem_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, CryptoError> {
    let bytes = read_file(path)?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CryptoError::File {
            path: path.to_owned(),
            reason: format!("malformed PEM: {e}"),
        })?;
    if chain.is_empty() {
        return Err(CryptoError::File {
            path: path.to_owned(),
            reason: "no CERTIFICATE block found".to_owned(),
        });
    }
    Ok(chain)
}

/// Load a private key from a PEM file: the first `PRIVATE KEY` (PKCS#8),
/// `RSA PRIVATE KEY` (PKCS#1) or `EC PRIVATE KEY` (SEC1) block. Errors name
/// the file and say what was missing or malformed.
pub fn load_pem_key(path: &Path) -> Result<PrivateKeyDer<'static>, CryptoError> {
    let bytes = read_file(path)?;
    PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| CryptoError::File {
        path: path.to_owned(),
        reason: match e {
            rustls::pki_types::pem::Error::NoItemsFound => {
                "no private key found (expected a PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block)"
                    .to_owned()
            }
            other => format!("malformed PEM: {other}"),
        },
    })
}

/// The ALPN list in rustls's form.
fn alpn_list(alpn: &[&[u8]]) -> Vec<Vec<u8>> {
    alpn.iter().map(|p| p.to_vec()).collect()
}

/// A server configuration: `chain` (end-entity first) and its `key`, TLS 1.3
/// only, ALPN `alpn` (a client offering none of them is refused with
/// no_application_protocol, RFC 9001 §8.1), no client authentication, no
/// session tickets and `max_early_data_size` 0 (no 0-RTT).
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ServerConfig>, CryptoError> {
    let mut config = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = alpn_list(alpn);
    config.max_early_data_size = 0;
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

/// Largest number of session tickets a resuming server keeps
/// ([`enable_server_resumption`]): each is one entry of rustls's in-memory
/// store (about 200 bytes: the resumption secret, the suite, the ALPN, the
/// client's certificate-free identity), so this bounds it to about 1 MB. When
/// full, the oldest ticket is forgotten and its client falls back to a full
/// handshake.
pub const MAX_SERVER_TICKETS: usize = 4096;

/// Tickets a resuming server issues per connection (RFC 8446 §4.6.1): one
/// per later connection a client may open; tickets are single-use.
pub const TICKETS_PER_CONNECTION: usize = 2;

/// Largest number of servers a resuming client remembers tickets for
/// ([`enable_client_resumption`]).
pub const MAX_CLIENT_SESSIONS: usize = 64;

/// Turn on session resumption, and 0-RTT when `early_data`, for a server
/// configuration made by [`server_config`] (RFC 8446 §2.2, §2.3; RFC 9001
/// §4.6). Without `early_data`, tickets carry no early_data extension and
/// clients resume with a 1-RTT handshake.
///
/// Anti-replay (RFC 8446 §8, RFC 9001 §9.2): tickets are *stateful and
/// single-use*. The server keeps each ticket it issued in a bounded
/// in-memory store ([`MAX_SERVER_TICKETS`]) and removes it when a client
/// presents it, so a ClientHello replayed with the same ticket finds
/// nothing: it gets a full handshake and its 0-RTT data is rejected
/// (discarded unread). rustls also checks the ticket's age against the time
/// it was issued. What remains (and what the docs tell an application) is
/// that 0-RTT data is not protected against replay *to another server
/// instance* that shares no store, nor after a restart loses the store; it
/// is only accepted with the same ALPN, and tickets die with the process.
/// An application must only act on 0-RTT requests that are idempotent
/// (artq's file and generated-content GETs are).
///
/// With `early_data`, `max_early_data_size` is 0xffffffff, as RFC 9001 §4.6.1 requires of
/// QUIC: the amount of 0-RTT data is bounded by the transport's flow
/// control (the connection and stream receive windows), not by TLS.
///
/// The server's transport parameters that a client remembers with a ticket
/// (RFC 9000 §7.4.1) are those of the configuration the store belongs to:
/// the store lives inside this rustls configuration, which one endpoint
/// uses with one transport configuration, so a ticket accepted by it was
/// issued under the same limits and they are never reduced.
pub fn enable_server_resumption(
    config: Arc<rustls::ServerConfig>,
    early_data: bool,
) -> Arc<rustls::ServerConfig> {
    let mut config = Arc::unwrap_or_clone(config);
    config.session_storage = rustls::server::ServerSessionMemoryCache::new(MAX_SERVER_TICKETS);
    // rustls's default ticketer is off: tickets are store entries (stateful),
    // which is also what rustls requires to accept 0-RTT.
    config.send_tls13_tickets = TICKETS_PER_CONNECTION;
    // 0: tickets carry no early_data extension, so clients send no 0-RTT.
    config.max_early_data_size = if early_data { u32::MAX } else { 0 };
    Arc::new(config)
}

/// Turn on session resumption and 0-RTT for a client configuration made by
/// [`client_config`]: tickets are kept in memory, per server name, for as
/// long as the configuration lives (every connection of one `artq get` run
/// shares it), at most [`MAX_CLIENT_SESSIONS`] servers.
pub fn enable_client_resumption(config: Arc<rustls::ClientConfig>) -> Arc<rustls::ClientConfig> {
    let mut config = Arc::unwrap_or_clone(config);
    config.resumption = rustls::client::Resumption::in_memory_sessions(MAX_CLIENT_SESSIONS);
    config.enable_early_data = true;
    Arc::new(config)
}

/// A client configuration: TLS 1.3 only, ALPN `alpn` (offered in this order),
/// server certificates checked as `verify` says, no resumption, no 0-RTT.
pub fn client_config(
    verify: ServerVerification,
    alpn: &[&[u8]],
) -> Result<Arc<rustls::ClientConfig>, CryptoError> {
    let provider = provider();
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?;
    let mut config = match verify {
        ServerVerification::Insecure => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
        ServerVerification::Roots(certs) => {
            if certs.is_empty() {
                return Err(CryptoError::NoRootCertificates);
            }
            let mut roots = rustls::RootCertStore::empty();
            for (index, cert) in certs.into_iter().enumerate() {
                roots
                    .add(cert)
                    .map_err(|e| CryptoError::BadRootCertificate {
                        index,
                        reason: e.to_string(),
                    })?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        }
    };
    config.alpn_protocols = alpn_list(alpn);
    config.resumption = rustls::client::Resumption::disabled();
    config.enable_early_data = false;
    Ok(Arc::new(config))
}

/// [`ServerVerification::Insecure`]: skips the chain and name checks, keeps
/// the handshake signature check (with the provider's algorithms), so the
/// server must still hold the key of the certificate it shows.
struct AnyServerCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl fmt::Debug for AnyServerCertificate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AnyServerCertificate")
    }
}

impl ServerCertVerifier for AnyServerCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        // The documented danger of `ServerVerification::Insecure`.
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        // Unreachable with a TLS 1.3-only configuration; verify anyway.
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_file(name: &str, contents: &[u8]) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!("artq-crypto-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path
    }

    fn pem(label: &str, der: &[u8]) -> String {
        use std::fmt::Write;
        // Base64 (RFC 4648) by hand: no extra dependency for one test helper.
        const ALPHABET: &[u8; 64] =
            b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut b64 = String::new();
        for chunk in der.chunks(3) {
            let n = chunk
                .iter()
                .enumerate()
                .fold(0u32, |acc, (i, &b)| acc | u32::from(b) << (16 - 8 * i));
            for i in 0..4 {
                if i <= chunk.len() {
                    b64.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    b64.push('=');
                }
            }
        }
        let mut out = format!("-----BEGIN {label}-----\n");
        for line in b64.as_bytes().chunks(64) {
            writeln!(out, "{}", std::str::from_utf8(line).expect("ascii")).expect("string write");
        }
        writeln!(out, "-----END {label}-----").expect("string write");
        out
    }

    #[test]
    fn pem_files_load_and_errors_name_the_file() {
        let (chain, key) = self_signed(&["localhost"]).expect("cert");
        let cert_pem = pem("CERTIFICATE", chain[0].as_ref());
        let key_pem = pem("PRIVATE KEY", key.secret_der());
        let both = temp_file(
            "both.pem",
            format!("{key_pem}{cert_pem}{cert_pem}").as_bytes(),
        );
        let loaded = load_pem_chain(&both).expect("chain");
        assert_eq!(loaded.len(), 2);
        assert_eq!(loaded[0], chain[0]);
        assert_eq!(
            load_pem_key(&both).expect("key").secret_der(),
            key.secret_der()
        );
        // What was loaded works.
        server_config(loaded, load_pem_key(&both).expect("key"), &[TEST_ALPN]).expect("config");

        let only_cert = temp_file("cert.pem", cert_pem.as_bytes());
        let err = load_pem_key(&only_cert).expect_err("no key").to_string();
        assert!(
            err.contains("cert.pem") && err.contains("no private key"),
            "{err}"
        );
        let only_key = temp_file("key.pem", key_pem.as_bytes());
        let err = load_pem_chain(&only_key).expect_err("no cert").to_string();
        assert!(
            err.contains("key.pem") && err.contains("no CERTIFICATE"),
            "{err}"
        );
        let broken = temp_file("broken.pem", b"-----BEGIN CERTIFICATE-----\n!!!!\n");
        let err = load_pem_chain(&broken).expect_err("broken").to_string();
        assert!(
            err.contains("broken.pem") && err.contains("malformed"),
            "{err}"
        );
        let missing = std::env::temp_dir().join("artq-no-such-file.pem");
        let err = load_pem_chain(&missing).expect_err("missing").to_string();
        assert!(
            err.contains("artq-no-such-file.pem") && err.contains("cannot read"),
            "{err}"
        );
        // The per-process directory of `temp_file`: one was left behind per
        // test run before.
        if let Some(dir) = both.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }

    #[test]
    fn endless_pem_files_fail_fast_saying_why() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            let path = Path::new(dev);
            if !path.exists() {
                continue;
            }
            for err in [
                load_pem_chain(path).map(|_| ()).expect_err("no end"),
                load_pem_key(path).map(|_| ()).expect_err("no end"),
            ] {
                let text = err.to_string();
                assert!(
                    text.contains(dev) && text.contains("larger than 1048576 bytes"),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn seeded_certificates_are_reproducible() {
        let a = self_signed_from_seed(&["localhost"], [7; 32]).expect("cert");
        let b = self_signed_from_seed(&["localhost"], [7; 32]).expect("cert");
        let c = self_signed_from_seed(&["localhost"], [8; 32]).expect("cert");
        assert_eq!(a.0, b.0);
        assert_eq!(a.1.secret_der(), b.1.secret_der());
        assert_ne!(a.0, c.0);
        // Same size whatever the key: Ed25519 keys and signatures are fixed-size.
        assert_eq!(a.0[0].len(), c.0[0].len());
        server_config(a.0, a.1, &[TEST_ALPN]).expect("rustls accepts the seeded key");
    }

    #[test]
    fn bad_configurations_are_errors() {
        assert!(matches!(
            client_config(ServerVerification::Roots(vec![]), &[TEST_ALPN]),
            Err(CryptoError::NoRootCertificates)
        ));
        let garbage = CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01]);
        assert!(matches!(
            client_config(ServerVerification::Roots(vec![garbage.clone()]), &[]),
            Err(CryptoError::BadRootCertificate { index: 0, .. })
        ));
        let (_, key) = self_signed(&["localhost"]).expect("cert");
        assert!(matches!(
            server_config(vec![garbage], key, &[]),
            Err(CryptoError::Tls(_))
        ));
        let (chain, _) = self_signed(&["localhost"]).expect("cert");
        let (_, other_key) = self_signed(&["localhost"]).expect("cert");
        assert!(
            server_config(chain, other_key, &[]).is_err(),
            "key must match the certificate"
        );
    }

    #[test]
    fn configs_are_tls13_only_without_0rtt() {
        let (chain, key) = self_signed(&["localhost"]).expect("cert");
        let server = server_config(chain, key, &[TEST_ALPN]).expect("server");
        assert_eq!(server.max_early_data_size, 0);
        assert_eq!(server.send_tls13_tickets, 0);
        assert_eq!(server.alpn_protocols, vec![TEST_ALPN.to_vec()]);
        let client = client_config(ServerVerification::Insecure, &[TEST_ALPN]).expect("client");
        assert!(!client.enable_early_data);
        assert_eq!(client.alpn_protocols, vec![TEST_ALPN.to_vec()]);

        // A TLS 1.2-only client (plain TLS, not QUIC) is refused by the server.
        let tls12 = rustls::ClientConfig::builder_with_provider(provider())
            .with_protocol_versions(&[&rustls::version::TLS12])
            .expect("TLS 1.2 config")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyServerCertificate {
                algorithms: provider().signature_verification_algorithms,
            }))
            .with_no_client_auth();
        let name = ServerName::try_from("localhost").expect("name");
        let mut c = rustls::ClientConnection::new(Arc::new(tls12), name).expect("client conn");
        let mut s = rustls::ServerConnection::new(server).expect("server conn");
        let mut hello = Vec::new();
        c.write_tls(&mut hello).expect("ClientHello");
        s.read_tls(&mut hello.as_slice()).expect("read");
        let err = s.process_new_packets().expect_err("TLS 1.2 refused");
        assert!(matches!(err, rustls::Error::PeerIncompatible(_)), "{err:?}");
    }
}
