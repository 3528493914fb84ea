//! The file workload's client: fetch a list of paths one after another over
//! one connection, hand each body to a [`BodySink`], record when each
//! completed, and close the connection when the last one is in.
//!
//! It is `artq get` (one path, bytes written to a file) and the simulated
//! client of `artq sim` (paths `/0`, `/1`, ..., every byte checked against
//! the generated content) at once: only the sink differs. Its server is
//! [`crate::server::HttpServer`] with a [`crate::content::Directory`] or
//! [`crate::content::GeneratedFiles`].
//!
//! What to fetch next and what to do with the bodies is a [`Fetcher`]: a
//! fixed list of paths into a [`BodySink`] for files, a player for the
//! video workloads (`crate::video`), which choose their next request as
//! they go (DASH's rate adaptation) and may wait before making it (a full
//! playout buffer). The request/response loop stays here, in one place.

use std::io::Write;

use transport::streams::StreamEvent;
use transport::{Connection, ConnectionError, ConnectionHandle, Endpoint, Event};
use wire::time::Instant;
use wire::StreamId;

use crate::app::{App, OwnConnection};
use crate::content::FileContent;
use crate::http::{BodyError, ClientEvent, ClientSession, Request, ResponseHead};
use crate::protocol::Protocol;

/// Bytes read from a stream per step.
pub const CHUNK: usize = 64 * 1024;

/// Start and end of one file's download at the client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileTimes {
    /// When the request was written.
    pub requested: Instant,
    /// When the last byte (and the end of the body) was read.
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
    /// The body ended with the wrong number of bytes.
    #[error("file {file}: body ended after {received} bytes, expected {expected}")]
    WrongLength {
        /// File index.
        file: u64,
        /// Bytes received.
        received: u64,
        /// The file's size.
        expected: u64,
    },
    /// The server answered with something other than 200.
    #[error("file {file}: the server answered {status}")]
    Status {
        /// File index.
        file: u64,
        /// The status code.
        status: u16,
    },
    /// The server reset the stream or the response was malformed.
    #[error("file {file}: {reason}")]
    Stream {
        /// File index.
        file: u64,
        /// What happened.
        reason: String,
    },
    /// The body could not be stored.
    #[error("file {file}: cannot write the body: {reason}")]
    Output {
        /// File index.
        file: u64,
        /// What the sink said.
        reason: String,
    },
    /// The connection ended before the last file was in.
    #[error("connection ended: {0}")]
    Connection(ConnectionError),
}

/// Where response bodies go: checked against generated content
/// ([`VerifySink`]) or written out ([`WriteSink`]).
pub trait BodySink {
    /// The head of file `file`'s response arrived; `Err` refuses it.
    fn start(&mut self, file: u64, head: &ResponseHead) -> Result<(), ClientError>;
    /// The next `bytes` of file `file`'s body, at `offset`.
    fn data(&mut self, file: u64, offset: u64, bytes: &[u8]) -> Result<(), ClientError>;
    /// File `file`'s body ended after `received` bytes.
    fn end(&mut self, file: u64, received: u64) -> Result<(), ClientError>;
}

/// Checks every body byte against [`FileContent`]: the simulator's client,
/// which needs no copy of what the server sent.
#[derive(Debug)]
pub struct VerifySink {
    seed: u64,
    size: u64,
    current: Option<FileContent>,
}

impl VerifySink {
    /// Expects file `i` to be `FileContent::new(seed, i, size)`.
    pub fn new(seed: u64, size: u64) -> VerifySink {
        VerifySink {
            seed,
            size,
            current: None,
        }
    }
}

impl BodySink for VerifySink {
    fn start(&mut self, file: u64, head: &ResponseHead) -> Result<(), ClientError> {
        if head.status != 200 {
            return Err(ClientError::Status {
                file,
                status: head.status,
            });
        }
        self.current = Some(FileContent::new(self.seed, file, self.size));
        Ok(())
    }

    fn data(&mut self, file: u64, offset: u64, got: &[u8]) -> Result<(), ClientError> {
        let Some(content) = self.current.as_mut() else {
            return Err(ClientError::Stream {
                file,
                reason: "body before head".into(),
            });
        };
        match content.verify(got) {
            Ok(()) => {}
            Err(None) => {
                return Err(ClientError::WrongLength {
                    file,
                    received: offset.saturating_add(got.len() as u64),
                    expected: self.size,
                });
            }
            Err(Some(at)) => {
                return Err(ClientError::Mismatch {
                    file,
                    offset: offset + at as u64,
                });
            }
        }
        Ok(())
    }

    fn end(&mut self, file: u64, received: u64) -> Result<(), ClientError> {
        self.current = None;
        if received != self.size {
            return Err(ClientError::WrongLength {
                file,
                received,
                expected: self.size,
            });
        }
        Ok(())
    }
}

/// Writes bodies to a writer (a file, standard output): `artq get`.
pub struct WriteSink {
    out: Box<dyn Write>,
    /// The `content-length` of the current response, checked at its end.
    expected: Option<u64>,
}

impl WriteSink {
    /// Writes every body, one after another, to `out`.
    pub fn new(out: Box<dyn Write>) -> WriteSink {
        WriteSink {
            out,
            expected: None,
        }
    }
}

impl BodySink for WriteSink {
    fn start(&mut self, file: u64, head: &ResponseHead) -> Result<(), ClientError> {
        if head.status != 200 {
            return Err(ClientError::Status {
                file,
                status: head.status,
            });
        }
        self.expected = head.content_length();
        Ok(())
    }

    fn data(&mut self, file: u64, _offset: u64, bytes: &[u8]) -> Result<(), ClientError> {
        self.out.write_all(bytes).map_err(|e| ClientError::Output {
            file,
            reason: e.to_string(),
        })
    }

    fn end(&mut self, file: u64, received: u64) -> Result<(), ClientError> {
        if let Some(expected) = self.expected.take().filter(|&e| e != received) {
            return Err(ClientError::WrongLength {
                file,
                received,
                expected,
            });
        }
        self.out.flush().map_err(|e| ClientError::Output {
            file,
            reason: e.to_string(),
        })
    }
}

/// What a [`Fetcher`] wants next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// Request this path.
    Get(String),
    /// Nothing now: ask again at this time (`None`: after the next network
    /// event).
    Wait(Option<Instant>),
    /// Everything has been fetched: the client closes the connection.
    Done,
}

/// Decides what the client fetches, one response at a time, and takes the
/// bodies. Exists so the file client, the live player and the DASH player
/// share one request/response loop ([`FilesClient`]).
pub trait Fetcher: std::any::Any {
    /// What to request as item `index` (0, 1, ...), at `now`.
    fn next(&mut self, now: Instant, index: u64) -> Next;
    /// The head of item `index`'s response arrived; `Err` refuses it.
    fn start(&mut self, now: Instant, index: u64, head: &ResponseHead) -> Result<(), ClientError>;
    /// The next `bytes` of item `index`'s body, at `offset`.
    fn data(
        &mut self,
        now: Instant,
        index: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ClientError>;
    /// Item `index`'s body ended after `received` bytes.
    fn end(&mut self, now: Instant, index: u64, received: u64) -> Result<(), ClientError>;
    /// The fetcher as [`std::any::Any`], to read its results back.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// A fixed list of paths whose bodies go to a [`BodySink`]: the file
/// workload and `artq get`.
struct SinkFetcher {
    paths: Paths,
    sink: Box<dyn BodySink>,
}

impl Fetcher for SinkFetcher {
    fn next(&mut self, _now: Instant, index: u64) -> Next {
        if index < self.paths.len() {
            Next::Get(self.paths.get(index))
        } else {
            Next::Done
        }
    }

    fn start(&mut self, _now: Instant, index: u64, head: &ResponseHead) -> Result<(), ClientError> {
        self.sink.start(index, head)
    }

    fn data(
        &mut self,
        _now: Instant,
        index: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ClientError> {
        self.sink.data(index, offset, bytes)
    }

    fn end(&mut self, _now: Instant, index: u64, received: u64) -> Result<(), ClientError> {
        self.sink.end(index, received)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// What the client has done so far.
#[derive(Clone, Debug, Default)]
pub struct FilesReport {
    /// Completed files, in order.
    pub files: Vec<FileTimes>,
    /// Body bytes received (and accepted by the sink) so far.
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
    received: u64,
    requested: Instant,
    head_seen: bool,
}

/// The paths to fetch.
#[derive(Clone, Debug)]
pub enum Paths {
    /// `/0`, `/1`, ..., `/(count-1)`: the generated files of
    /// [`crate::content::GeneratedFiles`].
    Indexed(u64),
    /// These paths, in order.
    List(Vec<String>),
}

impl Paths {
    fn len(&self) -> u64 {
        match self {
            Paths::Indexed(n) => *n,
            Paths::List(l) => l.len() as u64,
        }
    }

    fn get(&self, i: u64) -> String {
        match self {
            Paths::Indexed(_) => crate::content::GeneratedFiles::path(i),
            Paths::List(l) => usize::try_from(i)
                .ok()
                .and_then(|i| l.get(i))
                .cloned()
                .unwrap_or_default(),
        }
    }
}

/// The file download client application (one connection).
pub struct FilesClient {
    protocol: Protocol,
    session: Box<dyn ClientSession>,
    authority: Option<String>,
    fetcher: Box<dyn Fetcher>,
    /// Set when the fetcher said [`Next::Wait`] with a time.
    wake_at: Option<Instant>,
    conn: OwnConnection,
    connected: bool,
    next_file: u64,
    current: Option<Download>,
    report: FilesReport,
    closed: bool,
    buf: Vec<u8>,
}

impl FilesClient {
    /// Fetches `paths` over `protocol` into `sink`. `authority` (`host:port`)
    /// is sent where the protocol carries one (HTTP/3 requires it).
    pub fn new(
        protocol: Protocol,
        authority: Option<String>,
        paths: Paths,
        sink: Box<dyn BodySink>,
    ) -> FilesClient {
        FilesClient::with_fetcher(protocol, authority, Box::new(SinkFetcher { paths, sink }))
    }

    /// Fetches what `fetcher` asks for, over `protocol`.
    pub fn with_fetcher(
        protocol: Protocol,
        authority: Option<String>,
        fetcher: Box<dyn Fetcher>,
    ) -> FilesClient {
        FilesClient {
            protocol,
            session: protocol.client_session(),
            authority,
            fetcher,
            wake_at: None,
            conn: OwnConnection::default(),
            connected: false,
            next_file: 0,
            current: None,
            report: FilesReport::default(),
            closed: false,
            buf: vec![0; CHUNK],
        }
    }

    /// Progress and results.
    pub fn report(&self) -> &FilesReport {
        &self.report
    }

    /// The fetcher as its concrete type, if it is an `F` (a player's
    /// statistics).
    pub fn fetcher<F: Fetcher>(&self) -> Option<&F> {
        self.fetcher.as_any().downcast_ref::<F>()
    }

    /// The connection, once opened.
    pub fn connection(&self) -> Option<ConnectionHandle> {
        self.conn.handle()
    }

    /// Opens a stream for `path` (the next item) and sends its request;
    /// false if no stream can be opened yet (the peer's MAX_STREAMS).
    fn request(&mut self, now: Instant, conn: &mut Connection, path: String) -> bool {
        let file = self.next_file;
        let request = Request {
            authority: self.authority.clone(),
            ..Request::get(path)
        };
        let stream = match self.session.send_request(conn, &request) {
            Ok(id) => id,
            Err(crate::http::SendError::NoStream) => return false,
            Err(e) => {
                self.report.error = Some(ClientError::Stream {
                    file,
                    reason: format!("cannot send the request: {e}"),
                });
                return true;
            }
        };
        self.next_file += 1;
        self.current = Some(Download {
            stream,
            file,
            received: 0,
            requested: now,
            head_seen: false,
        });
        true
    }

    /// Reads what arrived for the current file; `Ok(true)` once complete.
    fn read(&mut self, now: Instant, conn: &mut Connection) -> Result<bool, ClientError> {
        let Some(d) = self.current.as_mut() else {
            return Ok(false);
        };
        while let Some(ev) = self.session.poll(now, conn) {
            match ev {
                ClientEvent::Response { stream, head } if stream == d.stream => {
                    self.fetcher.start(now, d.file, &head)?;
                    d.head_seen = true;
                }
                ClientEvent::Failed { stream, reason } if stream == d.stream => {
                    return Err(ClientError::Stream {
                        file: d.file,
                        reason,
                    });
                }
                _ => {}
            }
        }
        if !d.head_seen {
            return Ok(false);
        }
        loop {
            match self.session.read_body(now, conn, d.stream, &mut self.buf) {
                Ok(Some(n)) => {
                    let got = self.buf.get(..n).unwrap_or_default();
                    self.fetcher.data(now, d.file, d.received, got)?;
                    d.received += n as u64;
                    self.report.bytes_received =
                        self.report.bytes_received.saturating_add(n as u64);
                }
                Ok(None) => {
                    self.fetcher.end(now, d.file, d.received)?;
                    self.report.files.push(FileTimes {
                        requested: d.requested,
                        completed: now,
                    });
                    self.current = None;
                    return Ok(true);
                }
                Err(BodyError::Blocked) => return Ok(false),
                Err(e) => {
                    return Err(ClientError::Stream {
                        file: d.file,
                        reason: e.to_string(),
                    })
                }
            }
        }
    }

    /// After an error: close the connection once.
    fn close_on_error(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.report.error.is_some() && !self.closed {
            if let Some(conn) = self.conn.get_mut(ep) {
                conn.close(now, self.protocol.error_code(), b"transfer failed");
            }
            self.closed = true;
        }
    }
}

impl App for FilesClient {
    fn on_connection(&mut self, _now: Instant, h: ConnectionHandle, conn: &mut Connection) {
        self.conn.adopt(h);
        // A resuming connection that may send 0-RTT starts at once with
        // hq-interop: its requests are plain GETs, safe to replay (RFC 9001
        // §9.2). HTTP/3 waits for the handshake: its 0-RTT would need the
        // server's SETTINGS remembered with the ticket (RFC 9114 §7.2.4.2),
        // which artq does not keep.
        if self.protocol == Protocol::HqInterop && conn.is_sending_zero_rtt() {
            self.connected = true;
        }
    }

    fn on_event(
        &mut self,
        _now: Instant,
        h: ConnectionHandle,
        conn: &mut Connection,
        event: &Event,
    ) {
        if !self.conn.is(h) {
            return;
        }
        match event {
            Event::Connected => {
                self.connected = true;
                self.session.on_connected(conn);
            }
            Event::ConnectionLost(reason) => {
                if self.report.done_at.is_none() && self.report.error.is_none() {
                    self.report.error = Some(ClientError::Connection(reason.clone()));
                }
                self.closed = true;
            }
            Event::Stream(StreamEvent::Reset { id, error_code }) => {
                if let Some(d) = self.current.as_ref().filter(|d| d.stream == *id) {
                    let reason = format!("reset by the server with code {error_code:#x}");
                    self.report.error.get_or_insert(ClientError::Stream {
                        file: d.file,
                        reason,
                    });
                }
            }
            _ => {}
        }
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.closed || self.report.error.is_some() || !self.connected {
            self.close_on_error(now, ep);
            return;
        }
        loop {
            let Some(conn) = self.conn.get_mut(ep) else {
                return;
            };
            if self.current.is_none() {
                self.wake_at = None;
                match self.fetcher.next(now, self.next_file) {
                    Next::Done => {
                        self.report.done_at.get_or_insert(now);
                        if !self.closed {
                            conn.close(now, self.protocol.no_error_code(), b"done");
                            self.closed = true;
                        }
                        return;
                    }
                    Next::Wait(at) => {
                        self.wake_at = at;
                        return;
                    }
                    Next::Get(path) => {
                        if !self.request(now, conn, path) {
                            return;
                        }
                    }
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

    fn poll_timeout(&self) -> Option<Instant> {
        self.wake_at
    }

    fn is_finished(&self, endpoint: &Endpoint) -> bool {
        self.report.error.is_some()
            || (self.closed && self.conn.get(endpoint).is_none_or(|c| c.is_closed()))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}
