//! [`QuicNode`]: a real `transport::Endpoint` plus an application, as a
//! simulator [`Node`].
//!
//! The application is one of two hq-interop-like roles (HTTP/0.9 over QUIC,
//! as `artq serve`/`artq get` speak it):
//! - the **server** answers `GET /N\r\n` on a bidirectional stream with file
//!   `N` of the [`Workload`] and FIN, generating the bytes on the fly;
//! - the **client** connects at time zero and requests the files one after
//!   another over that one connection, checks every byte against the same
//!   generator, records when each file completed, and closes the connection
//!   when the last one is in.
//!
//! The node copies each datagram into a scratch buffer (the endpoint decrypts
//! in place), runs the endpoint, then lets the application react; the
//! simulator then drains [`Node::poll_transmit`]. Nothing here reads a clock
//! unless CPU measurement is switched on ([`QuicNode::set_measure_cpu`]),
//! which only times the node's own methods.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use netem::{Datagram, Node};
use transport::connection::ConnectError;
use transport::streams::{ReadError, StreamEvent, WriteError};
use transport::{
    ClientConfig, ConnectionError, ConnectionHandle, ConnectionStats, Endpoint, EndpointConfig,
    Event, ServerConfig,
};
use wire::time::Instant;
use wire::{Dir, StreamId};

use crate::metrics::Recorder;
use crate::workload::{FileContent, Workload};

/// Application error code the client closes with when it is done.
const CLOSE_DONE: u64 = 0;
/// Application error code the client closes with when a file is wrong.
const CLOSE_BAD_DATA: u64 = 1;
/// Stream reset code for a request the server cannot answer.
const RESET_BAD_REQUEST: u64 = 0x10;
/// Longest request line the server reads (`GET /18446744073709551615\r\n`
/// is 28 bytes).
const MAX_REQUEST: usize = 64;
/// Capacity of a fresh transmit buffer: artq's 1350-byte datagrams and
/// then some, so the endpoint never reallocates.
const TX_CAPACITY: usize = 2048;
/// Bytes generated or read per step.
const CHUNK: usize = 64 * 1024;

/// The TLS configurations of every simulated run: one self-signed Ed25519
/// certificate for `localhost`, made once per process from a fixed seed
/// (self-signing per run would dominate short runs, and a fixed seed keeps
/// the handshake bytes' sizes identical everywhere).
pub fn tls_configs() -> Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>), String> {
    type Pair = (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>);
    static CONFIGS: OnceLock<Result<Pair, String>> = OnceLock::new();
    CONFIGS
        .get_or_init(|| {
            use transport::crypto::{self, ServerVerification, ALPN_HQ_INTEROP};
            let (chain, key) = crypto::self_signed_from_seed(&["localhost"], [0x5a; 32])
                .map_err(|e| e.to_string())?;
            let server =
                crypto::server_config(chain, key, &[ALPN_HQ_INTEROP]).map_err(|e| e.to_string())?;
            let client = crypto::client_config(ServerVerification::Insecure, &[ALPN_HQ_INTEROP])
                .map_err(|e| e.to_string())?;
            Ok((server, client))
        })
        .clone()
}

/// Start and end of one file's download at the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTimes {
    /// When the request was written.
    pub requested: Instant,
    /// When the last byte (and FIN) was read.
    pub completed: Instant,
}

/// Why the client gave up.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClientError {
    /// A received byte differs from the file's content.
    #[error("file {file}: byte {offset} differs from the file's content")]
    Mismatch {
        /// File index.
        file: u64,
        /// Offset of the first wrong byte.
        offset: u64,
    },
    /// The stream ended with the wrong number of bytes.
    #[error("file {file}: stream ended after {received} bytes, expected {expected}")]
    WrongLength {
        /// File index.
        file: u64,
        /// Bytes received.
        received: u64,
        /// The file's size.
        expected: u64,
    },
    /// The server reset the stream or refused it.
    #[error("file {file}: stream failed: {reason}")]
    Stream {
        /// File index.
        file: u64,
        /// What happened.
        reason: String,
    },
    /// The connection ended before the last file was in.
    #[error("connection ended: {0}")]
    Connection(ConnectionError),
}

/// What the client has done so far.
#[derive(Clone, Debug, Default)]
pub struct ClientReport {
    /// Completed files, in order.
    pub files: Vec<FileTimes>,
    /// Payload bytes received (and checked) so far.
    pub bytes_received: u64,
    /// Set when the last file completed.
    pub done_at: Option<Instant>,
    /// Set when the client gave up.
    pub error: Option<ClientError>,
}

/// The file being downloaded.
#[derive(Debug)]
struct Download {
    stream: StreamId,
    file: u64,
    content: FileContent,
    received: u64,
    requested: Instant,
}

/// The client role.
#[derive(Debug)]
struct ClientApp {
    conn: ConnectionHandle,
    workload: Workload,
    content_seed: u64,
    connected: bool,
    next_file: u64,
    current: Option<Download>,
    report: ClientReport,
    closed: bool,
    buf: Vec<u8>,
    expect: Vec<u8>,
}

/// A file being sent.
#[derive(Debug)]
struct Transfer {
    content: FileContent,
    buf: Vec<u8>,
    pos: usize,
}

/// The server role.
#[derive(Debug)]
struct ServerApp {
    workload: Workload,
    content_seed: u64,
    recorder: Option<Recorder>,
    /// Connections accepted, in order; the first one is measured.
    conns: Vec<ConnectionHandle>,
    requests: BTreeMap<(ConnectionHandle, StreamId), Vec<u8>>,
    transfers: BTreeMap<(ConnectionHandle, StreamId), Transfer>,
    /// The measured connection's counters when it ended (the endpoint
    /// forgets drained connections).
    final_stats: Option<ConnectionStats>,
    scheme: Option<String>,
}

#[derive(Debug)]
enum Role {
    Server(ServerApp),
    Client(ClientApp),
}

/// A QUIC endpoint and its application, driven by the simulator.
///
/// Calling protocol: build with [`QuicNode::server`] or [`QuicNode::client`],
/// add to a [`netem::Simulator`] at the address given, run, then read
/// [`QuicNode::client_report`] / [`QuicNode::sender_stats`].
pub struct QuicNode {
    addr: SocketAddr,
    endpoint: Endpoint,
    role: Role,
    rx: Vec<u8>,
    tx: Vec<u8>,
    cpu: Option<std::time::Duration>,
}

impl core::fmt::Debug for QuicNode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QuicNode")
            .field("addr", &self.addr)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl QuicNode {
    /// A server at `addr` serving `workload`'s files. `recorder`, if given,
    /// subscribes to the first connection as the sender.
    pub fn server(
        addr: SocketAddr,
        config: ServerConfig,
        endpoint_seed: u64,
        workload: Workload,
        content_seed: u64,
        recorder: Option<Recorder>,
    ) -> QuicNode {
        let endpoint = Endpoint::new(EndpointConfig::server(endpoint_seed, config));
        let app = ServerApp {
            workload,
            content_seed,
            recorder,
            conns: Vec::new(),
            requests: BTreeMap::new(),
            transfers: BTreeMap::new(),
            final_stats: None,
            scheme: None,
        };
        QuicNode::new(addr, endpoint, Role::Server(app))
    }

    /// A client at `addr` that connects to `server` at time zero and fetches
    /// every file of `workload`. `recorder`, if given, subscribes to the
    /// connection as the receiver.
    pub fn client(
        addr: SocketAddr,
        server: SocketAddr,
        config: &ClientConfig,
        endpoint_seed: u64,
        workload: Workload,
        content_seed: u64,
        recorder: Option<Recorder>,
    ) -> Result<QuicNode, ConnectError> {
        let mut endpoint = Endpoint::new(EndpointConfig::client(endpoint_seed));
        let conn = endpoint.connect(Instant::ZERO, config, server)?;
        if let (Some(r), Some(c)) = (&recorder, endpoint.connection_mut(conn)) {
            c.subscribe(r.receiver_subscriber());
        }
        let app = ClientApp {
            conn,
            workload,
            content_seed,
            connected: false,
            next_file: 0,
            current: None,
            report: ClientReport::default(),
            closed: false,
            buf: vec![0; CHUNK],
            expect: vec![0; CHUNK],
        };
        Ok(QuicNode::new(addr, endpoint, Role::Client(app)))
    }

    fn new(addr: SocketAddr, endpoint: Endpoint, role: Role) -> QuicNode {
        QuicNode {
            addr,
            endpoint,
            role,
            rx: Vec::with_capacity(TX_CAPACITY),
            tx: Vec::with_capacity(TX_CAPACITY),
            cpu: None,
        }
    }

    /// Times this node's methods from now on (wall clock; see
    /// [`QuicNode::cpu_time`]).
    pub fn set_measure_cpu(&mut self, on: bool) {
        self.cpu = on.then_some(std::time::Duration::ZERO);
    }

    /// Wall-clock time spent inside this node's [`Node`] methods, when
    /// measured: the node's CPU cost, as the simulator runs on one thread.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        self.cpu
    }

    /// The client's progress and results (`None` for a server).
    pub fn client_report(&self) -> Option<&ClientReport> {
        match &self.role {
            Role::Client(c) => Some(&c.report),
            Role::Server(_) => None,
        }
    }

    /// The counters of the server's first connection: live ones if it is
    /// still there, else those it had when it ended (`None` for a client or
    /// before any connection).
    pub fn sender_stats(&self) -> Option<ConnectionStats> {
        let Role::Server(s) = &self.role else {
            return None;
        };
        let first = *s.conns.first()?;
        self.endpoint
            .connection(first)
            .map(|c| c.stats())
            .or_else(|| s.final_stats.clone())
    }

    /// The recovery scheme of the server's first connection.
    pub fn sender_scheme(&self) -> Option<String> {
        let Role::Server(s) = &self.role else {
            return None;
        };
        s.scheme.clone()
    }

    /// Runs `f`, adding its wall time to the CPU account when measuring.
    fn timed<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        if self.cpu.is_none() {
            return f(self);
        }
        let start = std::time::Instant::now();
        let out = f(self);
        let spent = start.elapsed();
        if let Some(c) = self.cpu.as_mut() {
            *c = c.saturating_add(spent);
        }
        out
    }

    /// Lets the application react to whatever the endpoint just did.
    fn drive(&mut self, now: Instant) {
        match &mut self.role {
            Role::Server(s) => s.drive(now, &mut self.endpoint),
            Role::Client(c) => c.drive(now, &mut self.endpoint),
        }
    }
}

impl Node for QuicNode {
    fn handle_datagram(&mut self, now: Instant, from: SocketAddr, _to: SocketAddr, payload: &[u8]) {
        self.timed(|n| {
            n.rx.clear();
            n.rx.extend_from_slice(payload);
            n.endpoint.handle_datagram(now, from, &mut n.rx);
            n.drive(now);
        });
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        self.timed(|n| {
            let t = n.endpoint.poll_transmit(now, &mut n.tx)?;
            // Hand the buffer itself over (no copy); the next one is fresh.
            let mut payload = std::mem::replace(&mut n.tx, Vec::with_capacity(TX_CAPACITY));
            payload.truncate(t.size);
            Some(Datagram::new(n.addr, t.destination, payload))
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.timed(|n| n.endpoint.poll_timeout())
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.timed(|n| {
            n.endpoint.handle_timeout(now);
            n.drive(now);
        });
    }

    fn is_finished(&self) -> bool {
        match &self.role {
            Role::Client(c) => {
                c.report.error.is_some()
                    || (c.closed
                        && self
                            .endpoint
                            .connection(c.conn)
                            .is_none_or(|conn| conn.is_closed()))
            }
            Role::Server(s) => {
                !s.conns.is_empty()
                    && s.conns
                        .iter()
                        .all(|&h| self.endpoint.connection(h).is_none_or(|c| c.is_closed()))
            }
        }
    }
}

impl ClientApp {
    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        let Some(conn) = ep.connection_mut(self.conn) else {
            return;
        };
        while let Some(ev) = conn.poll_event() {
            match ev {
                Event::Connected => self.connected = true,
                Event::ConnectionLost(reason) => {
                    if self.report.done_at.is_none() && self.report.error.is_none() {
                        self.report.error = Some(ClientError::Connection(reason));
                    }
                    self.closed = true;
                }
                Event::Stream(StreamEvent::Reset { id, error_code }) => {
                    if let Some(d) = self.current.as_ref().filter(|d| d.stream == id) {
                        let reason = format!("reset by the server with code {error_code}");
                        self.report.error.get_or_insert(ClientError::Stream {
                            file: d.file,
                            reason,
                        });
                    }
                }
                _ => {}
            }
        }
        if self.closed || self.report.error.is_some() || !self.connected {
            self.close_on_error(now, ep);
            return;
        }
        loop {
            let Some(conn) = ep.connection_mut(self.conn) else {
                return;
            };
            if self.current.is_none() {
                if self.next_file >= self.workload.files {
                    if self.report.done_at.is_some() && !self.closed {
                        conn.close(now, CLOSE_DONE, b"done");
                        self.closed = true;
                    }
                    return;
                }
                if !self.request(now, conn) {
                    return;
                }
                if self.report.error.is_some() {
                    self.close_on_error(now, ep);
                    return;
                }
            }
            match self.read(now, conn) {
                Ok(true) => continue, // a file completed: request the next one
                Ok(false) => return,
                Err(e) => {
                    self.report.error = Some(e);
                    self.close_on_error(now, ep);
                    return;
                }
            }
        }
    }

    /// Opens a stream for the next file and sends its request; false if no
    /// stream can be opened yet (the peer's MAX_STREAMS).
    fn request(&mut self, now: Instant, conn: &mut transport::Connection) -> bool {
        let Some(id) = conn.streams().open(Dir::Bi) else {
            return false;
        };
        let file = self.next_file;
        let line = format!("GET /{file}\r\n");
        // A fresh stream's send buffer takes a 30-byte request whole.
        let wrote = conn.streams().write(id, line.as_bytes());
        let finished = conn.streams().finish(id);
        if wrote != Ok(line.len()) || finished.is_err() {
            let reason = format!("cannot send the request: {wrote:?} {finished:?}");
            self.report.error = Some(ClientError::Stream { file, reason });
        }
        self.next_file += 1;
        self.current = Some(Download {
            stream: id,
            file,
            content: FileContent::new(self.content_seed, file, self.workload.size),
            received: 0,
            requested: now,
        });
        true
    }

    /// Reads and checks what arrived; `Ok(true)` once the file is complete.
    fn read(
        &mut self,
        now: Instant,
        conn: &mut transport::Connection,
    ) -> Result<bool, ClientError> {
        let Some(d) = self.current.as_mut() else {
            return Ok(false);
        };
        loop {
            match conn.streams().read(d.stream, &mut self.buf) {
                Ok(Some(n)) => {
                    let got = self.buf.get(..n).unwrap_or_default();
                    let expect = self.expect.get_mut(..n).unwrap_or_default();
                    let produced = d.content.fill(expect);
                    if produced < n {
                        return Err(ClientError::WrongLength {
                            file: d.file,
                            received: d.received.saturating_add(n as u64),
                            expected: self.workload.size,
                        });
                    }
                    if got != &*expect {
                        let at = got
                            .iter()
                            .zip(expect.iter())
                            .position(|(a, b)| a != b)
                            .unwrap_or(0);
                        return Err(ClientError::Mismatch {
                            file: d.file,
                            offset: d.received + at as u64,
                        });
                    }
                    d.received += n as u64;
                    self.report.bytes_received =
                        self.report.bytes_received.saturating_add(n as u64);
                }
                Ok(None) => {
                    if d.received != self.workload.size {
                        return Err(ClientError::WrongLength {
                            file: d.file,
                            received: d.received,
                            expected: self.workload.size,
                        });
                    }
                    self.report.files.push(FileTimes {
                        requested: d.requested,
                        completed: now,
                    });
                    if self.report.files.len() as u64 == self.workload.files {
                        self.report.done_at = Some(now);
                    }
                    self.current = None;
                    return Ok(true);
                }
                Err(ReadError::Blocked) => return Ok(false),
                Err(e) => {
                    return Err(ClientError::Stream {
                        file: d.file,
                        reason: e.to_string(),
                    })
                }
            }
        }
    }

    /// After an error: close the connection once, with the bad-data code.
    fn close_on_error(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.report.error.is_some() && !self.closed {
            if let Some(conn) = ep.connection_mut(self.conn) {
                conn.close(now, CLOSE_BAD_DATA, b"transfer failed");
            }
            self.closed = true;
        }
    }
}

impl ServerApp {
    fn drive(&mut self, _now: Instant, ep: &mut Endpoint) {
        while let Some(h) = ep.accept() {
            if self.conns.is_empty() {
                if let Some(conn) = ep.connection_mut(h) {
                    if let Some(r) = &self.recorder {
                        conn.subscribe(r.sender_subscriber());
                    }
                    self.scheme = Some(conn.recovery_scheme());
                }
            }
            self.conns.push(h);
        }
        for i in 0..self.conns.len() {
            let Some(&h) = self.conns.get(i) else {
                continue;
            };
            let Some(conn) = ep.connection_mut(h) else {
                continue;
            };
            let mut lost = false;
            while let Some(ev) = conn.poll_event() {
                match ev {
                    Event::Stream(StreamEvent::Finished { id }) => {
                        if let Some(r) = self.recorder.as_ref().filter(|_| i == 0) {
                            r.stream_finished(id);
                        }
                    }
                    Event::ConnectionLost(_) => lost = true,
                    _ => {}
                }
            }
            if lost {
                if i == 0 {
                    self.final_stats = Some(conn.stats());
                }
                self.requests.retain(|k, _| k.0 != h);
                self.transfers.retain(|k, _| k.0 != h);
                continue;
            }
            self.read_requests(h, conn);
            self.pump(h, conn);
        }
    }

    /// Reads request bytes; starts a transfer once a request is complete.
    fn read_requests(&mut self, h: ConnectionHandle, conn: &mut transport::Connection) {
        while let Some(id) = conn.streams().accept(Dir::Bi) {
            self.requests.insert((h, id), Vec::new());
        }
        let keys: Vec<StreamId> = self
            .requests
            .range((h, StreamId(0))..=(h, StreamId(u64::MAX)))
            .map(|(k, _)| k.1)
            .collect();
        let mut tmp = [0u8; MAX_REQUEST];
        for id in keys {
            let mut fin = false;
            let mut failed = false;
            loop {
                match conn.streams().read(id, &mut tmp) {
                    Ok(Some(n)) => {
                        let Some(r) = self.requests.get_mut(&(h, id)) else {
                            break;
                        };
                        r.extend_from_slice(tmp.get(..n).unwrap_or_default());
                        if r.len() > MAX_REQUEST {
                            failed = true;
                            break;
                        }
                    }
                    Ok(None) => {
                        fin = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(_) => {
                        failed = true;
                        break;
                    }
                }
            }
            let parsed = match self.requests.get(&(h, id)) {
                Some(_) if failed => Some(None),
                Some(buf) => parse_request(buf, fin),
                None => None,
            };
            let Some(file) = parsed else { continue };
            self.requests.remove(&(h, id));
            match file.filter(|&f| f < self.workload.files) {
                Some(f) => {
                    let content = FileContent::new(self.content_seed, f, self.workload.size);
                    self.transfers.insert(
                        (h, id),
                        Transfer {
                            content,
                            buf: Vec::with_capacity(CHUNK),
                            pos: 0,
                        },
                    );
                }
                None => {
                    // hq-interop has no status codes: refuse by resetting.
                    let _ = conn.streams().reset(id, RESET_BAD_REQUEST);
                }
            }
        }
    }

    /// Moves file bytes into the streams until their send buffers are full.
    fn pump(&mut self, h: ConnectionHandle, conn: &mut transport::Connection) {
        let keys: Vec<StreamId> = self
            .transfers
            .range((h, StreamId(0))..=(h, StreamId(u64::MAX)))
            .map(|(k, _)| k.1)
            .collect();
        for id in keys {
            let Some(t) = self.transfers.get_mut(&(h, id)) else {
                continue;
            };
            let done = loop {
                if t.pos >= t.buf.len() {
                    if t.content.remaining() == 0 {
                        // Fails only if the stream was reset meanwhile: done either way.
                        let _ = conn.streams().finish(id);
                        break true;
                    }
                    t.buf.resize(CHUNK, 0);
                    let n = t.content.fill(&mut t.buf);
                    t.buf.truncate(n);
                    t.pos = 0;
                    continue;
                }
                match conn
                    .streams()
                    .write(id, t.buf.get(t.pos..).unwrap_or_default())
                {
                    Ok(n) => t.pos += n,
                    Err(WriteError::Blocked) => break false,
                    Err(_) => break true,
                }
            };
            if done {
                self.transfers.remove(&(h, id));
            }
        }
    }
}

/// The file index of a complete request line `GET /N\r\n` (or `GET /N`
/// ended by FIN): `None` while more bytes may come, `Some(None)` for a
/// malformed request.
fn parse_request(buf: &[u8], fin: bool) -> Option<Option<u64>> {
    let line = match buf.iter().position(|&b| b == b'\n') {
        Some(end) => buf.get(..end).unwrap_or_default(),
        None if fin || buf.len() > MAX_REQUEST => buf,
        None => return None,
    };
    let text = std::str::from_utf8(line).ok();
    let index = text
        .and_then(|t| t.trim_end_matches('\r').strip_prefix("GET /"))
        .and_then(|n| n.parse().ok());
    Some(index)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_parse() {
        assert_eq!(parse_request(b"GET /12\r\n", false), Some(Some(12)));
        assert_eq!(parse_request(b"GET /12", false), None);
        assert_eq!(parse_request(b"GET /12", true), Some(Some(12)));
        assert_eq!(parse_request(b"GET /x\r\n", false), Some(None));
        assert_eq!(parse_request(b"PUT /1\r\n", false), Some(None));
        assert_eq!(
            parse_request(b"GET /99999999999999999999999\r\n", false),
            Some(None)
        );
        assert_eq!(parse_request(&[0xff, b'\n'], false), Some(None));
        assert_eq!(parse_request(&[b'G'; MAX_REQUEST + 1], false), Some(None));
        assert_eq!(parse_request(b"", true), Some(None));
    }

    #[test]
    fn tls_configs_are_made_once() {
        let (s1, c1) = tls_configs().expect("configs");
        let (s2, c2) = tls_configs().expect("configs");
        assert!(Arc::ptr_eq(&s1, &s2) && Arc::ptr_eq(&c1, &c2));
    }
}
