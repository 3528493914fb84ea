//! An HTTP/3 file server on quinn + h3 (hyperium), the reference server of the
//! HTTP/3 interop harness.
//!
//! Why this exists: the HTTP/3 peers of `artq serve` (aioquic's H3Connection,
//! quic-go's http3 client, headless Chromium) are first proven against this
//! server in `harness_selfcheck/`, so a failing `interop_h3.rs` test points
//! at artq; and `artq get --alpn h3` is tested against it. It is built from
//! public APIs only (quinn 0.11, h3 0.0.8, h3-quinn 0.0.10).
//!
//! Behaviour: ALPN `h3` only; `GET /path` (query ignored) answers 200 with
//! `content-length` and the file's bytes when `path` names a regular file under
//! the root (mapped by [`quinn_hq::resolve`]), 404 with a short body otherwise,
//! 405 for other methods. `.html` files go out as `text/html`. Every request is
//! recorded ([`H3Server::served`]) so tests can see what a browser asked for.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use quinn::crypto::rustls::QuicServerConfig;
use quinn::VarInt;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::quinn_hq::{self, BoxError};

/// The HTTP/3 ALPN token.
pub const ALPN: &[u8] = b"h3";

/// Size of the DATA frames the body is sent in (64 KiB).
const CHUNK: usize = 64 * 1024;

/// One answered request, as the server saw it.
#[derive(Debug, Clone)]
pub struct Served {
    /// Request method.
    pub method: String,
    /// Request path (`:path`, query included).
    pub path: String,
    /// Status sent.
    pub status: u16,
    /// Body bytes handed to the stream (all of them unless the peer stopped it).
    pub body_bytes: u64,
    /// Whether the whole body was sent and the stream finished.
    pub complete: bool,
    /// The `user-agent` header, if any.
    pub user_agent: Option<String>,
}

/// What the accept loop shares with the test.
#[derive(Default)]
struct Record {
    connections: AtomicUsize,
    served: Mutex<Vec<Served>>,
    errors: Mutex<Vec<String>>,
}

/// A running HTTP/3 server on 127.0.0.1; closed when dropped.
pub struct H3Server {
    /// The address it is bound to (127.0.0.1, ephemeral port).
    pub addr: SocketAddr,
    endpoint: quinn::Endpoint,
    record: Arc<Record>,
}

impl H3Server {
    /// Connections that completed the QUIC handshake with ALPN h3.
    pub fn connections(&self) -> usize {
        self.record.connections.load(Ordering::SeqCst)
    }

    /// Every request answered so far, in order.
    pub fn served(&self) -> Vec<Served> {
        self.record
            .served
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// Connection- and stream-level errors seen so far (for failure messages).
    pub fn errors(&self) -> Vec<String> {
        self.record
            .errors
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default()
    }

    /// A few lines on what the server saw, for assertion messages.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "quinn h3 server on {}: {} h3 connection(s)",
            self.addr,
            self.connections()
        );
        for r in self.served() {
            s.push_str(&format!(
                "\n  {} {} -> {} ({} body bytes{}) ua={:?}",
                r.method,
                r.path,
                r.status,
                r.body_bytes,
                if r.complete { "" } else { ", incomplete" },
                r.user_agent.as_deref().unwrap_or("")
            ));
        }
        for e in self.errors() {
            s.push_str(&format!("\n  error: {e}"));
        }
        s
    }
}

impl Drop for H3Server {
    fn drop(&mut self) {
        self.endpoint
            .close(VarInt::from_u32(0x100), b"server shutting down"); // H3_NO_ERROR
    }
}

/// A quinn server config: TLS 1.3 (ring), the given certificate, ALPN h3.
pub fn server_config(
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> Result<quinn::ServerConfig, BoxError> {
    let mut tls = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13])?
    .with_no_client_auth()
    .with_single_cert(chain, key)?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    Ok(quinn::ServerConfig::with_crypto(Arc::new(
        QuicServerConfig::try_from(tls)?,
    )))
}

/// Starts an HTTP/3 server for the files under `root` on 127.0.0.1:0, with
/// `cert` (chain and key) or a fresh self-signed certificate.
///
/// Must be called inside a tokio runtime; the accept loop runs as a task on it
/// until the returned [`H3Server`] is dropped.
pub fn spawn_server(
    root: PathBuf,
    cert: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<H3Server, BoxError> {
    let (chain, key) = match cert {
        Some(c) => c,
        None => {
            let (c, k) = quinn_hq::self_signed()?;
            (vec![c], k)
        }
    };
    let endpoint = quinn::Endpoint::server(
        server_config(chain, key)?,
        SocketAddr::from((Ipv4Addr::LOCALHOST, 0)),
    )?;
    let addr = endpoint.local_addr()?;
    let record = Arc::new(Record::default());
    let accept = endpoint.clone();
    let root = Arc::new(root);
    let rec = Arc::clone(&record);
    tokio::spawn(async move {
        while let Some(incoming) = accept.accept().await {
            tokio::spawn(serve_connection(
                incoming,
                Arc::clone(&root),
                Arc::clone(&rec),
            ));
        }
    });
    Ok(H3Server {
        addr,
        endpoint,
        record,
    })
}

/// Runs one HTTP/3 connection: accepts request streams until the peer closes.
async fn serve_connection(incoming: quinn::Incoming, root: Arc<PathBuf>, record: Arc<Record>) {
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => {
            push(&record.errors, format!("handshake failed: {e}"));
            return;
        }
    };
    record.connections.fetch_add(1, Ordering::SeqCst);
    let peer = conn.remote_address();
    let mut h3_conn: h3::server::Connection<h3_quinn::Connection, Bytes> =
        match h3::server::builder()
            .build(h3_quinn::Connection::new(conn))
            .await
        {
            Ok(c) => c,
            Err(e) => {
                push(&record.errors, format!("{peer}: h3 setup failed: {e}"));
                return;
            }
        };
    loop {
        match h3_conn.accept().await {
            Ok(Some(resolver)) => {
                let root = Arc::clone(&root);
                let record = Arc::clone(&record);
                tokio::spawn(async move {
                    match resolver.resolve_request().await {
                        Ok((req, stream)) => serve_request(req, stream, &root, &record).await,
                        Err(e) => push(&record.errors, format!("{peer}: bad request: {e}")),
                    }
                });
            }
            Ok(None) => return,
            Err(e) => {
                // A client closing with H3_NO_ERROR is the normal end; anything
                // else is kept for failure messages (not itself a failure).
                if !e.is_h3_no_error() {
                    push(&record.errors, format!("{peer}: connection ended: {e}"));
                }
                return;
            }
        }
    }
}

type Stream = h3::server::RequestStream<h3_quinn::BidiStream<Bytes>, Bytes>;

/// Answers one request (see the module doc) and records it.
async fn serve_request(req: Request<()>, mut stream: Stream, root: &Path, record: &Record) {
    let path = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let mut served = Served {
        method: req.method().to_string(),
        path: path.clone(),
        status: 0,
        body_bytes: 0,
        complete: false,
        user_agent: req
            .headers()
            .get(http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string),
    };
    let result = respond(&req, &mut stream, root, &mut served).await;
    if let Err(e) = result {
        push(
            &record.errors,
            format!("{} {}: {e}", served.method, served.path),
        );
    }
    push(&record.served, served);
}

/// Sends the status, headers and body for `req`; fills in `served`.
async fn respond(
    req: &Request<()>,
    stream: &mut Stream,
    root: &Path,
    served: &mut Served,
) -> Result<(), BoxError> {
    let file = if req.method() == Method::GET {
        quinn_hq::resolve(root, req.uri().path())
    } else {
        None
    };
    let (status, content_type, body) = match file {
        Some(p) => {
            let body = tokio::task::spawn_blocking(move || std::fs::read(&p)).await??;
            let ct = if req.uri().path().ends_with(".html") {
                "text/html; charset=utf-8"
            } else {
                "application/octet-stream"
            };
            (StatusCode::OK, ct, Bytes::from(body))
        }
        None if req.method() != Method::GET => (
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            Bytes::from_static(b"only GET\n"),
        ),
        None => (
            StatusCode::NOT_FOUND,
            "text/plain",
            Bytes::from_static(b"not found\n"),
        ),
    };
    served.status = status.as_u16();
    let resp = Response::builder()
        .status(status)
        .header(http::header::CONTENT_LENGTH, body.len())
        .header(http::header::CONTENT_TYPE, content_type)
        .header(http::header::CACHE_CONTROL, "no-store")
        .body(())?;
    stream.send_response(resp).await?;
    let mut at = 0;
    while at < body.len() {
        let end = (at + CHUNK).min(body.len());
        stream.send_data(body.slice(at..end)).await?;
        served.body_bytes += (end - at) as u64;
        at = end;
    }
    stream.finish().await?;
    served.complete = true;
    Ok(())
}

/// Appends to a shared list, ignoring a poisoned lock (a panicked task).
fn push<T>(list: &Mutex<Vec<T>>, item: T) {
    if let Ok(mut l) = list.lock() {
        l.push(item);
    }
}
