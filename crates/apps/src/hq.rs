//! hq-interop: HTTP/0.9 over QUIC, as the QUIC interop runner speaks it.
//!
//! The client opens a bidirectional stream and sends `GET /path\r\n` (a
//! bare `\n`, or the stream's FIN, also ends the line) and FIN; the server
//! answers with the resource's bytes and FIN. There are no headers and no
//! status: a refusal is a RESET_STREAM ([`RESET_REFUSED`]), an error while
//! sending one too ([`RESET_INTERNAL`]), and a client assumes status 200 for
//! any response that is not reset.
//!
//! A request stream carries at most a request line ([`MAX_REQUEST`] bytes).
//! Once a well-formed line is read, the server keeps reading the stream up
//! to its FIN and discards what follows the line, at most [`MAX_REQUEST`]
//! more bytes; beyond that it stops reading (STOP_SENDING,
//! [`STOP_REQUEST_READ`]), so the transport discards the rest instead of
//! holding it. It does not send STOP_SENDING at once: a client that sends
//! the line and then its FIN separately (quic-go's interop client, under
//! load) treats a stream stopped before its FIN as failed. A malformed
//! line is answered with STOP_SENDING ([`RESET_REFUSED`]) at once.
//!
//! This module holds the one request-line parser of the workspace
//! ([`parse_request`]) and the two [`crate::http`] sessions over it.

use std::collections::{BTreeMap, VecDeque};

use transport::streams::{ReadError, WriteError};
use transport::Connection;
use wire::time::Instant;
use wire::{Dir, StreamId};

use crate::http::{
    BodyError, ClientEvent, ClientSession, MessageError, Request, ResponseHead, SendError,
    ServerEvent, ServerSession,
};

/// Longest request line a server reads, bytes.
pub const MAX_REQUEST: usize = 4096;
/// RESET_STREAM code of a refused request (no such file, bad request).
pub const RESET_REFUSED: u64 = 0x10;
/// RESET_STREAM code of a response abandoned half-way (a read error).
pub const RESET_INTERNAL: u64 = 0x11;
/// STOP_SENDING code once a request line is read and the client had not
/// ended the stream: nothing after the line is read (hq-interop defines no
/// codes; 0 says "no error", as [`CLOSE_NO_ERROR`] does for connections).
pub const STOP_REQUEST_READ: u64 = 0;
/// Application close code of a connection that ends normally.
pub const CLOSE_NO_ERROR: u64 = 0;
/// Application close code of a connection abandoned on an error.
pub const CLOSE_ERROR: u64 = 1;

/// The request target of a complete request line: `None` while more bytes
/// may come (no line end yet, no FIN, at most [`MAX_REQUEST`] bytes),
/// `Some(Ok(path))` for `GET <path>`, `Some(Err(_))` for anything else.
///
/// The line ends at the first `\n` (a `\r` before it is dropped), or at the
/// stream's end when `fin`.
pub fn parse_request(buf: &[u8], fin: bool) -> Option<Result<String, MessageError>> {
    let line = match buf.iter().position(|&b| b == b'\n') {
        Some(end) => buf.get(..end).unwrap_or_default(),
        None if fin => buf,
        None if buf.len() > MAX_REQUEST => {
            return Some(Err(MessageError::TooLarge(buf.len() as u64)))
        }
        None => return None,
    };
    if line.len() > MAX_REQUEST {
        return Some(Err(MessageError::TooLarge(line.len() as u64)));
    }
    let malformed = |why: &str| Some(Err(MessageError::Malformed(why.to_string())));
    let Ok(text) = std::str::from_utf8(line) else {
        return malformed("request line is not UTF-8");
    };
    let text = text.strip_suffix('\r').unwrap_or(text);
    let mut parts = text.split(' ');
    match (parts.next(), parts.next(), parts.next()) {
        (Some("GET"), Some(path), None) if path.starts_with('/') => Some(Ok(path.to_string())),
        (Some("GET"), Some(_), None) => malformed("path must start with '/'"),
        _ => malformed("expected 'GET /path'"),
    }
}

/// The server side of hq-interop on one connection.
#[derive(Debug, Default)]
pub struct HqServer {
    /// Request bytes received so far, per stream still being read.
    requests: BTreeMap<StreamId, Vec<u8>>,
    /// Streams whose request line is read, waiting for their FIN: the
    /// bytes after the line discarded so far.
    draining: BTreeMap<StreamId, usize>,
    /// Reports not yet returned by `poll`.
    ready: VecDeque<ServerEvent>,
}

impl HqServer {
    /// A session with no streams yet.
    pub fn new() -> HqServer {
        HqServer::default()
    }

    /// Reads past the request line of the streams not yet ended, up to
    /// their FIN or [`MAX_REQUEST`] bytes, then stops reading them.
    fn drain_requests(&mut self, conn: &mut Connection) {
        let mut tmp = [0u8; 1024];
        self.draining.retain(|&id, discarded| loop {
            match conn.streams().read(id, &mut tmp) {
                Ok(Some(n)) => {
                    *discarded = discarded.saturating_add(n);
                    if *discarded > MAX_REQUEST {
                        let _ = conn.streams().stop_sending(id, STOP_REQUEST_READ);
                        break false;
                    }
                }
                Err(ReadError::Blocked) => break true,
                // FIN, or the stream is gone.
                Ok(None) | Err(_) => break false,
            }
        });
    }

    /// Reads the request streams; queues what completed.
    fn read_requests(&mut self, conn: &mut Connection) {
        self.drain_requests(conn);
        while let Some(id) = conn.streams().accept(Dir::Bi) {
            self.requests.insert(id, Vec::new());
        }
        let ids: Vec<StreamId> = self.requests.keys().copied().collect();
        let mut tmp = [0u8; 1024];
        for id in ids {
            let Some(buf) = self.requests.get_mut(&id) else {
                continue;
            };
            let mut fin = false;
            let mut gone = false;
            loop {
                match conn.streams().read(id, &mut tmp) {
                    Ok(Some(n)) => {
                        buf.extend_from_slice(tmp.get(..n).unwrap_or_default());
                        if buf.len() > MAX_REQUEST {
                            break;
                        }
                    }
                    Ok(None) => {
                        fin = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(_) => {
                        gone = true;
                        break;
                    }
                }
            }
            if gone {
                self.requests.remove(&id);
                self.ready.push_back(ServerEvent::Cancelled { stream: id });
                continue;
            }
            let Some(parsed) = parse_request(buf, fin) else {
                continue;
            };
            if let Some(buf) = self.requests.remove(&id) {
                if !fin && parsed.is_ok() {
                    // Read on to the FIN (see the module doc); what came
                    // after the line already counts.
                    let line = buf
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(buf.len(), |i| i + 1);
                    self.draining.insert(id, buf.len() - line);
                } else if !fin {
                    let _ = conn.streams().stop_sending(id, RESET_REFUSED);
                }
            }
            self.ready.push_back(match parsed {
                Ok(path) => ServerEvent::Request {
                    stream: id,
                    request: Request::get(path),
                },
                Err(error) => ServerEvent::BadRequest { stream: id, error },
            });
        }
    }
}

impl ServerSession for HqServer {
    fn on_connected(&mut self, _conn: &mut Connection) {}

    fn poll(&mut self, _now: Instant, conn: &mut Connection) -> Option<ServerEvent> {
        if self.ready.is_empty() {
            self.read_requests(conn);
        }
        self.ready.pop_front()
    }

    fn send_response(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        head: &ResponseHead,
    ) -> Result<(), SendError> {
        if (200..300).contains(&head.status) {
            return Ok(());
        }
        // No status line in hq: a refusal is a reset.
        conn.streams().reset(stream, RESET_REFUSED)?;
        Err(SendError::Stream(WriteError::Closed))
    }

    fn send_body(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, SendError> {
        Ok(conn.streams().write(stream, data)?)
    }

    fn finish(&mut self, conn: &mut Connection, stream: StreamId) -> Result<(), SendError> {
        Ok(conn.streams().finish(stream)?)
    }

    fn abort(&mut self, conn: &mut Connection, stream: StreamId) {
        // Fails only if the stream is already gone: nothing left to abort.
        let _ = conn.streams().reset(stream, RESET_INTERNAL);
    }

    fn shutdown(&mut self, _conn: &mut Connection) {}
}

/// The client side of hq-interop on one connection.
#[derive(Debug, Default)]
pub struct HqClient {
    /// Response heads to report (hq has none: each request gets a 200 as
    /// soon as it is sent).
    ready: VecDeque<ClientEvent>,
}

impl HqClient {
    /// A session with no requests yet.
    pub fn new() -> HqClient {
        HqClient::default()
    }
}

impl ClientSession for HqClient {
    fn on_connected(&mut self, _conn: &mut Connection) {}

    fn send_request(
        &mut self,
        conn: &mut Connection,
        request: &Request,
    ) -> Result<StreamId, SendError> {
        if request.method != crate::http::Method::Get {
            return Err(SendError::NotReady("hq-interop can only GET"));
        }
        let id = conn.streams().open(Dir::Bi).ok_or(SendError::NoStream)?;
        let line = format!("GET {}\r\n", request.path);
        // A fresh stream's send buffer takes a request line whole.
        let wrote = conn.streams().write(id, line.as_bytes())?;
        if wrote != line.len() {
            let _ = conn.streams().reset(id, RESET_INTERNAL);
            return Err(SendError::Stream(WriteError::Blocked));
        }
        conn.streams().finish(id)?;
        self.ready.push_back(ClientEvent::Response {
            stream: id,
            head: ResponseHead::new(200),
        });
        Ok(id)
    }

    fn poll(&mut self, _now: Instant, _conn: &mut Connection) -> Option<ClientEvent> {
        self.ready.pop_front()
    }

    fn read_body(
        &mut self,
        _now: Instant,
        conn: &mut Connection,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<Option<usize>, BodyError> {
        Ok(conn.streams().read(stream, buf)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ok(path: &str) -> Option<Result<String, MessageError>> {
        Some(Ok(path.to_string()))
    }

    #[test]
    fn parses_request_lines() {
        assert_eq!(parse_request(b"GET /a.bin\r\n", false), ok("/a.bin"));
        assert_eq!(parse_request(b"GET /12\n", false), ok("/12"));
        assert_eq!(parse_request(b"GET /a.bin", false), None);
        assert_eq!(parse_request(b"GET /a.bin", true), ok("/a.bin"));
        assert_eq!(parse_request(b"GET /a\r\nrest", false), ok("/a"));
        for bad in [
            &b"PUT /x\r\n"[..],
            b"GET\r\n",
            b"GET x\r\n",
            b"GET /a b\r\n",
            b"get /a\r\n",
            &[0xff, b'\r', b'\n'],
        ] {
            assert!(
                matches!(
                    parse_request(bad, false),
                    Some(Err(MessageError::Malformed(_)))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(parse_request(b"", true), Some(Err(_))));
        assert!(matches!(
            parse_request(&vec![b'a'; MAX_REQUEST + 1], false),
            Some(Err(MessageError::TooLarge(_)))
        ));
        let mut long = b"GET /".to_vec();
        long.extend(vec![b'a'; MAX_REQUEST]);
        long.push(b'\n');
        assert!(matches!(
            parse_request(&long, false),
            Some(Err(MessageError::TooLarge(_)))
        ));
    }

    /// A server session over a real connection whose client sent `bytes`
    /// on a new request stream (no FIN); the server session is polled until
    /// it reports something.
    fn server_facing(
        bytes: &[u8],
    ) -> (transport::test_pair::Pair, HqServer, StreamId, ServerEvent) {
        let mut pair = transport::test_pair::Pair::default_pair();
        pair.connect();
        let id = pair.client().streams().open(Dir::Bi).expect("a stream");
        assert_eq!(pair.client().streams().write(id, bytes), Ok(bytes.len()));
        let mut server = HqServer::new();
        let mut event = None;
        pair.drive_until(wire::time::Duration::from_secs(2), |p| {
            let now = p.now;
            event = p.server_opt().and_then(|c| server.poll(now, c));
            event.is_some()
        });
        let event = event.expect("the request was reported");
        (pair, server, id, event)
    }

    /// The STOP_SENDING code the client gets on `id` within 2 s, the server
    /// session polled meanwhile.
    fn stopped_with(
        pair: &mut transport::test_pair::Pair,
        server: &mut HqServer,
        id: StreamId,
    ) -> Option<u64> {
        let mut code = None;
        pair.drive_until(wire::time::Duration::from_secs(2), |p| {
            let now = p.now;
            if let Some(c) = p.server_opt() {
                while server.poll(now, c).is_some() {}
            }
            while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
                if let transport::Event::Stream(transport::streams::StreamEvent::Stopped {
                    id: s,
                    error_code,
                }) = ev
                {
                    if s == id {
                        code = Some(error_code);
                    }
                }
            }
            code.is_some()
        });
        code
    }

    #[test]
    fn a_request_whose_fin_comes_later_is_not_stopped() {
        // quic-go's interop client may send the line and its FIN apart: a
        // stream stopped in between fails its Close.
        let (mut pair, mut server, id, event) = server_facing(b"GET /a.bin\r\n");
        assert_eq!(
            event,
            ServerEvent::Request {
                stream: id,
                request: Request::get("/a.bin")
            }
        );
        pair.drive_until(wire::time::Duration::from_millis(300), |_| false);
        assert_eq!(pair.client().streams().finish(id), Ok(()));
        assert_eq!(stopped_with(&mut pair, &mut server, id), None);
        assert!(server.draining.is_empty(), "the FIN ended the draining");
    }

    #[test]
    fn bytes_after_the_request_line_are_stopped_not_held() {
        // A request line, then 100 KB the server never reads, no FIN.
        let mut bytes = b"GET /a.bin\r\n".to_vec();
        bytes.extend(std::iter::repeat_n(b'x', 100_000));
        let (mut pair, mut server, id, event) = server_facing(&bytes);
        assert_eq!(
            event,
            ServerEvent::Request {
                stream: id,
                request: Request::get("/a.bin")
            }
        );
        assert_eq!(
            stopped_with(&mut pair, &mut server, id),
            Some(STOP_REQUEST_READ)
        );
        let held = pair.server().streams().recv_buffered(id).unwrap_or(0);
        assert_eq!(held, 0, "the unread bytes were discarded");
    }

    #[test]
    fn a_refused_request_is_stopped_with_the_refusal_code() {
        // No line end within MAX_REQUEST bytes, and more coming.
        let bytes = vec![b'G'; 3 * MAX_REQUEST];
        let (mut pair, mut server, id, event) = server_facing(&bytes);
        assert!(
            matches!(event, ServerEvent::BadRequest { stream, error: MessageError::TooLarge(_) } if stream == id),
            "{event:?}"
        );
        assert_eq!(
            stopped_with(&mut pair, &mut server, id),
            Some(RESET_REFUSED)
        );
        let held = pair.server().streams().recv_buffered(id).unwrap_or(0);
        assert_eq!(held, 0, "the unread bytes were discarded");
    }

    proptest! {
        /// No input makes the parser panic, and a complete answer never
        /// depends on bytes after the line end.
        #[test]
        fn parser_total(buf in proptest::collection::vec(any::<u8>(), 0..200), fin in any::<bool>()) {
            let a = parse_request(&buf, fin);
            if let Some(end) = buf.iter().position(|&b| b == b'\n') {
                let mut longer = buf[..=end].to_vec();
                longer.extend_from_slice(b"GET /other\r\n");
                prop_assert_eq!(parse_request(&longer, false), a);
            }
        }
    }
}
