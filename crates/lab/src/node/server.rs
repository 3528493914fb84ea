//! The server role of [`QuicNode`](super::QuicNode): answer `GET /N\r\n`
//! on each bidirectional stream with file `N` of the workload and FIN,
//! generating the bytes on the fly.

use std::collections::BTreeMap;

use transport::streams::{ReadError, StreamEvent, WriteError};
use transport::{ConnectionHandle, ConnectionStats, Endpoint, Event};
use wire::time::Instant;
use wire::{Dir, StreamId};

use super::CHUNK;
use crate::metrics::Recorder;
use crate::workload::{FileContent, Workload};

/// Stream reset code for a request the server cannot answer.
const RESET_BAD_REQUEST: u64 = 0x10;
/// Longest request line the server reads (`GET /18446744073709551615\r\n`
/// is 28 bytes).
const MAX_REQUEST: usize = 64;

/// A file being sent.
#[derive(Debug)]
struct Transfer {
    content: FileContent,
    buf: Vec<u8>,
    pos: usize,
}

/// The server role.
#[derive(Debug)]
pub(super) struct ServerApp {
    workload: Workload,
    content_seed: u64,
    recorder: Option<Recorder>,
    /// Connections accepted, in order; the first one is measured.
    pub(super) conns: Vec<ConnectionHandle>,
    requests: BTreeMap<(ConnectionHandle, StreamId), Vec<u8>>,
    transfers: BTreeMap<(ConnectionHandle, StreamId), Transfer>,
    /// The measured connection's counters when it ended (the endpoint
    /// forgets drained connections).
    pub(super) final_stats: Option<ConnectionStats>,
    pub(super) scheme: Option<String>,
}

impl ServerApp {
    pub(super) fn new(workload: Workload, content_seed: u64, recorder: Option<Recorder>) -> Self {
        ServerApp {
            workload,
            content_seed,
            recorder,
            conns: Vec::new(),
            requests: BTreeMap::new(),
            transfers: BTreeMap::new(),
            final_stats: None,
            scheme: None,
        }
    }

    pub(super) fn drive(&mut self, _now: Instant, ep: &mut Endpoint) {
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
}
