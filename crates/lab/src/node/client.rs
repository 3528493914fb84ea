//! The client role of [`QuicNode`](super::QuicNode): fetch the workload's
//! files one after another over one connection, check every byte, record
//! when each file completed, close when done.

use transport::streams::{ReadError, StreamEvent};
use transport::{ConnectionError, ConnectionHandle, Endpoint, Event};
use wire::time::Instant;
use wire::{Dir, StreamId};

use super::CHUNK;
use crate::workload::{FileContent, Workload};

/// Application error code the client closes with when it is done.
const CLOSE_DONE: u64 = 0;
/// Application error code the client closes with when a file is wrong.
const CLOSE_BAD_DATA: u64 = 1;

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
pub(super) struct ClientApp {
    pub(super) conn: ConnectionHandle,
    workload: Workload,
    content_seed: u64,
    connected: bool,
    next_file: u64,
    current: Option<Download>,
    pub(super) report: ClientReport,
    pub(super) closed: bool,
    buf: Vec<u8>,
    expect: Vec<u8>,
}

impl ClientApp {
    pub(super) fn new(conn: ConnectionHandle, workload: Workload, content_seed: u64) -> Self {
        ClientApp {
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
        }
    }

    pub(super) fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
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
