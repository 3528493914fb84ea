//! An hq-interop server and client on quinn's public API.
//!
//! Why this exists: quinn is the independent reference peer for `artq serve` and
//! `artq get` (DESIGN.md, "Real dependencies for solved problems"). This module
//! is that peer, written once and used twice: by the interop tests in
//! `crates/artq/tests/` and, through a `#[path]` include, by the loopback
//! benchmark in `crates/bench`. It therefore depends only on quinn, rustls,
//! rcgen, tokio and bytes, never on the test harness around it.
//!
//! hq-interop is HTTP/0.9 over QUIC (ALPN `hq-interop`): the client opens a
//! bidirectional stream, sends `GET /path\r\n` and FIN; the server answers with
//! the file's bytes and FIN. The server here refuses anything it cannot serve by
//! resetting the stream with `HQ_REFUSED`.

use std::error::Error;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::VarInt;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};
use tokio::sync::mpsc;

/// Boxed error for the peer's fallible setup and transfers.
pub type BoxError = Box<dyn Error + Send + Sync + 'static>;

/// The hq-interop ALPN token.
pub const ALPN: &[u8] = b"hq-interop";

/// Application error code the server resets a stream with when it refuses a
/// request (bad request line, path outside the root, missing file).
pub const HQ_REFUSED: u32 = 0x10;

/// Longest request line the server accepts (`GET ` + path + CRLF).
const MAX_REQUEST: usize = 4096;

/// File read size, and so the size of the chunks handed to quinn (64 KiB).
const CHUNK: usize = 64 * 1024;

/// Read-ahead between the file reader thread and the stream, in chunks.
const READ_AHEAD: usize = 16;

/// The ring crypto provider both peers use.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A fresh self-signed certificate for `localhost` and `127.0.0.1`.
pub fn self_signed() -> Result<(CertificateDer<'static>, PrivateKeyDer<'static>), BoxError> {
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()])?;
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    Ok((ck.cert.der().clone(), key.into()))
}

/// A quinn server config: TLS 1.3, ring, a fresh self-signed cert, ALPN hq-interop.
pub fn server_config() -> Result<quinn::ServerConfig, BoxError> {
    let (cert, key) = self_signed()?;
    let mut tls = rustls::ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(vec![cert], key)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    Ok(quinn::ServerConfig::with_crypto(Arc::new(
        QuicServerConfig::try_from(tls)?,
    )))
}

/// A quinn client config that accepts any server certificate (the `--insecure`
/// of the CLIs) but still checks the handshake signatures, ALPN hq-interop.
pub fn insecure_client_config() -> Result<quinn::ClientConfig, BoxError> {
    let provider = provider();
    let mut tls = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyServerCert { provider }))
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    Ok(quinn::ClientConfig::new(Arc::new(
        QuicClientConfig::try_from(tls)?,
    )))
}

/// Certificate verifier that trusts any certificate chain and name but still
/// verifies that the server holds the certificate's key (the TLS 1.3
/// CertificateVerify signature), so the handshake is exercised for real.
#[derive(Debug)]
struct AnyServerCert {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyServerCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// A running hq-interop server on 127.0.0.1; closed when dropped.
pub struct HqServer {
    /// The address it is bound to (127.0.0.1, ephemeral port).
    pub addr: SocketAddr,
    endpoint: quinn::Endpoint,
}

impl Drop for HqServer {
    fn drop(&mut self) {
        self.endpoint
            .close(VarInt::from_u32(0), b"server shutting down");
    }
}

/// Starts an hq-interop server for the files under `root` on 127.0.0.1:0.
///
/// Must be called inside a tokio runtime; the accept loop runs as a task on it
/// until the returned [`HqServer`] is dropped.
pub fn spawn_server(root: PathBuf) -> Result<HqServer, BoxError> {
    let endpoint =
        quinn::Endpoint::server(server_config()?, SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    let addr = endpoint.local_addr()?;
    let accept = endpoint.clone();
    let root = Arc::new(root);
    tokio::spawn(async move {
        while let Some(incoming) = accept.accept().await {
            tokio::spawn(serve_connection(incoming, Arc::clone(&root)));
        }
    });
    Ok(HqServer { addr, endpoint })
}

/// Serves every request stream of one connection until the peer closes it.
/// Holding `conn` here keeps the connection open while responses drain.
async fn serve_connection(incoming: quinn::Incoming, root: Arc<PathBuf>) {
    let Ok(conn) = incoming.await else { return };
    while let Ok((send, recv)) = conn.accept_bi().await {
        tokio::spawn(serve_request(send, recv, Arc::clone(&root)));
    }
}

/// Answers one `GET /path\r\n` request; refuses with a stream reset otherwise.
async fn serve_request(
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
    root: Arc<PathBuf>,
) {
    let file = match read_request(&mut recv).await {
        Ok(path) => resolve(&root, &path).and_then(|p| File::open(p).ok()),
        Err(_) => None,
    };
    let Some(file) = file else {
        let _ = send.reset(VarInt::from_u32(HQ_REFUSED));
        return;
    };
    // A thread reads ahead so disk reads never block the runtime's workers.
    let (tx, mut rx) = mpsc::channel::<io::Result<Bytes>>(READ_AHEAD);
    std::thread::spawn(move || read_chunks(file, tx));
    while let Some(chunk) = rx.recv().await {
        let Ok(chunk) = chunk else {
            let _ = send.reset(VarInt::from_u32(HQ_REFUSED));
            return;
        };
        if send.write_chunk(chunk).await.is_err() {
            return; // peer stopped the stream or the connection is gone
        }
    }
    if send.finish().is_ok() {
        // Wait until the peer has acknowledged everything (or gave up).
        let _ = send.stopped().await;
    }
}

/// Sends `file` as 64 KiB chunks until EOF, an error, or the receiver is gone.
fn read_chunks(mut file: File, tx: mpsc::Sender<io::Result<Bytes>>) {
    loop {
        let mut buf = BytesMut::zeroed(CHUNK);
        match file.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                buf.truncate(n);
                if tx.blocking_send(Ok(buf.freeze())).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                let _ = tx.blocking_send(Err(e));
                return;
            }
        }
    }
}

/// Reads the request line (up to CRLF or FIN) and returns the requested path.
async fn read_request(recv: &mut quinn::RecvStream) -> Result<String, BoxError> {
    let mut line = Vec::with_capacity(256);
    let mut buf = [0u8; 1024];
    loop {
        if let Some(end) = line.windows(2).position(|w| w == b"\r\n") {
            line.truncate(end);
            break;
        }
        if line.len() > MAX_REQUEST {
            return Err("request line too long".into());
        }
        match recv.read(&mut buf).await? {
            Some(n) => line.extend_from_slice(buf.get(..n).ok_or("read past buffer")?),
            None => break, // FIN without CRLF: take what we have
        }
    }
    let line = std::str::from_utf8(&line)?;
    let path = line
        .strip_prefix("GET ")
        .ok_or("request is not `GET /path`")?;
    Ok(path.trim_end().to_string())
}

/// Maps a request path onto a file under `root`; `None` if it would leave the
/// root (a `..` segment, a backslash or NUL) or names no regular file.
pub fn resolve(root: &Path, path: &str) -> Option<PathBuf> {
    let rel = path.strip_prefix('/')?;
    let mut out = root.to_path_buf();
    for part in rel.split('/') {
        match part {
            "" | "." => {} // `a//b`, `./a`
            ".." => return None,
            _ if part.contains(['\\', '\0']) => return None,
            _ => out.push(part),
        }
    }
    out.is_file().then_some(out)
}

/// A quinn client endpoint on 127.0.0.1:0 with [`insecure_client_config`].
/// Must be called inside a tokio runtime.
pub fn client_endpoint() -> Result<quinn::Endpoint, BoxError> {
    let mut endpoint = quinn::Endpoint::client(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))?;
    endpoint.set_default_client_config(insecure_client_config()?);
    Ok(endpoint)
}

/// [`client_endpoint`] on a socket with a receive buffer of `bytes` (or
/// the most the kernel allows): for a socket that many connections share,
/// whose handshake flights arriving at once overflow the default buffer
/// (about 208 KiB on Linux), so that the client's own drops do not show up
/// as the server's latency. Must be called inside a tokio runtime.
pub fn client_endpoint_with_recv_buffer(bytes: usize) -> Result<quinn::Endpoint, BoxError> {
    let socket = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    // Best effort: the kernel clamps it to net.core.rmem_max.
    let _ = socket.set_recv_buffer_size(bytes);
    socket.bind(&SocketAddr::from((Ipv4Addr::LOCALHOST, 0)).into())?;
    let runtime = quinn::default_runtime().ok_or("no async runtime for quinn")?;
    let mut endpoint = quinn::Endpoint::new(
        quinn::EndpointConfig::default(),
        None,
        socket.into(),
        runtime,
    )?;
    endpoint.set_default_client_config(insecure_client_config()?);
    Ok(endpoint)
}

/// What one completed download measured.
#[derive(Debug, Clone, Copy)]
pub struct Fetched {
    /// Response body size.
    pub bytes: u64,
    /// Wall time from sending the request to the last byte (handshake excluded).
    pub transfer: Duration,
}

impl Fetched {
    /// Goodput in Mbit/s (body bits over transfer time).
    pub fn goodput_mbps(&self) -> f64 {
        let secs = self.transfer.as_secs_f64();
        if secs > 0.0 {
            self.bytes as f64 * 8.0 / secs / 1e6
        } else {
            f64::INFINITY
        }
    }
}

/// Connects to `server`, downloads `path` into `sink`, and closes the connection.
///
/// Fails if the handshake fails, the stream is reset (e.g. the server refused
/// the request), the connection is lost, or `sink` fails.
pub async fn fetch(
    endpoint: &quinn::Endpoint,
    server: SocketAddr,
    path: &str,
    sink: &mut dyn Write,
) -> Result<Fetched, BoxError> {
    let conn = endpoint.connect(server, "localhost")?.await?;
    let result = fetch_on(&conn, path, sink).await;
    conn.close(VarInt::from_u32(0), b"done");
    result
}

/// Downloads `path` on an established connection (one request stream).
pub async fn fetch_on(
    conn: &quinn::Connection,
    path: &str,
    sink: &mut dyn Write,
) -> Result<Fetched, BoxError> {
    let (mut send, mut recv) = conn.open_bi().await?;
    let start = Instant::now();
    send.write_all(format!("GET {path}\r\n").as_bytes()).await?;
    send.finish()?;
    let mut bytes: u64 = 0;
    while let Some(chunk) = recv.read_chunk(usize::MAX, true).await? {
        sink.write_all(&chunk.bytes)?;
        bytes = bytes.saturating_add(chunk.bytes.len() as u64);
    }
    Ok(Fetched {
        bytes,
        transfer: start.elapsed(),
    })
}
