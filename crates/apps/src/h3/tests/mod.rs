//! Session tests over a real in-memory QUIC connection pair
//! (`transport::test_pair::Pair`): an [`H3Client`] fetching from an
//! [`H3Server`] driven by a small file-serving application, and hostile
//! peers that write raw bytes on the transport's streams.

mod hostile;
mod session;

use std::collections::BTreeMap;

use transport::test_pair::Pair;
use transport::{Connection, ConnectionError};
use wire::time::Duration;
use wire::StreamId;

use super::frame::{self, write_frame};
use super::qpack;
use super::{H3Client, H3Server};
use crate::http::{
    BodyError, ClientEvent, ClientSession, Field, MessageError, Method, Request, ResponseHead,
    SendError, ServerEvent, ServerSession,
};

/// A response body the test server is still writing: a file of
/// [`Harness::files`] and how much of it went out.
struct Outgoing {
    path: String,
    sent: usize,
}

/// What the test client got for one request.
#[derive(Debug, Default)]
pub struct Download {
    /// The response head, once reported.
    pub head: Option<ResponseHead>,
    /// Body bytes read so far.
    pub body: Vec<u8>,
    /// `read_body` returned the end.
    pub done: bool,
    /// `read_body` failed with this.
    pub error: Option<BodyError>,
    /// `Failed` was reported with this reason.
    pub failed: Option<String>,
    /// The client stops reading after this many body bytes (a slow
    /// reader).
    pub read_limit: Option<usize>,
}

/// The test client application: takes what the client session reports
/// and reads the bodies of `downloads` (each up to its `read_limit`) into
/// them, with `buf` as the read buffer.
pub fn read_downloads(
    client: &mut H3Client,
    conn: &mut Connection,
    now: wire::time::Instant,
    downloads: &mut BTreeMap<StreamId, Download>,
    buf: &mut [u8],
) {
    while conn.poll_event().is_some() {}
    while let Some(event) = client.poll(now, conn) {
        match event {
            ClientEvent::Response { stream, head } => {
                downloads.entry(stream).or_default().head = Some(head);
            }
            ClientEvent::Failed { stream, reason } => {
                downloads.entry(stream).or_default().failed = Some(reason);
            }
        }
    }
    for (&id, d) in downloads.iter_mut() {
        if d.head.is_none() || d.done || d.error.is_some() {
            continue;
        }
        loop {
            let want = match d.read_limit {
                Some(limit) => limit.saturating_sub(d.body.len()).min(buf.len()),
                None => buf.len(),
            };
            let Some(into) = buf.get_mut(..want).filter(|b| !b.is_empty()) else {
                break;
            };
            match client.read_body(now, conn, id, into) {
                Ok(Some(n)) => d.body.extend_from_slice(&into[..n]),
                Ok(None) => {
                    d.done = true;
                    break;
                }
                Err(BodyError::Blocked) => break,
                Err(e) => {
                    d.error = Some(e);
                    break;
                }
            }
        }
    }
}

/// A client and a server over one connection pair, either side optionally
/// left raw (no session: the test writes and reads the streams itself).
pub struct Harness {
    pub pair: Pair,
    pub server: Option<H3Server>,
    pub client: Option<H3Client>,
    /// What the test server serves, by path.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Fields the test server adds to every 200 response.
    pub extra_fields: Vec<Field>,
    /// The test server leaves requests unanswered.
    pub hold: bool,
    outgoing: BTreeMap<StreamId, Outgoing>,
    /// Every event the server session reported.
    pub server_events: Vec<ServerEvent>,
    /// Per request stream, what the client session produced.
    pub downloads: BTreeMap<StreamId, Download>,
    /// Errors the server session returned to the test application (a
    /// stream the client abandoned while the answer was being written).
    pub send_errors: Vec<(StreamId, SendError)>,
    /// The client application's read buffer.
    buf: Vec<u8>,
}

impl Harness {
    /// A connected pair with sessions on the sides asked for
    /// (`on_connected` already called).
    pub fn new(server: bool, client: bool) -> Harness {
        Harness::over(Pair::default_pair(), server, client)
    }

    /// Like [`Harness::new`] over `pair` (not connected yet).
    pub fn over(mut pair: Pair, server: bool, client: bool) -> Harness {
        pair.connect();
        let mut h = Harness {
            pair,
            server: server.then(H3Server::new),
            client: client.then(H3Client::new),
            files: BTreeMap::new(),
            extra_fields: Vec::new(),
            hold: false,
            outgoing: BTreeMap::new(),
            server_events: Vec::new(),
            downloads: BTreeMap::new(),
            send_errors: Vec::new(),
            buf: vec![0; 64 * 1024],
        };
        if let Some(s) = h.server.as_mut() {
            s.on_connected(h.pair.server());
        }
        if let Some(c) = h.client.as_mut() {
            c.on_connected(h.pair.client());
        }
        h
    }

    /// Both sides with sessions.
    pub fn sessions() -> Harness {
        Harness::new(true, true)
    }

    /// A GET of `path` with an authority, sent by the client session.
    pub fn get(&mut self, path: &str) -> StreamId {
        self.request(Request {
            authority: Some("localhost:4433".into()),
            ..Request::get(path)
        })
    }

    /// Sends `request` with the client session.
    pub fn request(&mut self, request: Request) -> StreamId {
        let conn = self.pair.client();
        let client = self.client.as_mut().expect("a client session");
        let id = client.send_request(conn, &request).expect("request sent");
        self.downloads.insert(id, Download::default());
        id
    }

    /// One turn of both applications at the pair's current time.
    pub fn turn(&mut self) {
        let now = self.pair.now;
        let Harness {
            pair,
            server,
            client,
            files,
            extra_fields,
            hold,
            outgoing,
            server_events,
            downloads,
            send_errors,
            buf,
        } = self;
        if let (Some(server), Some(conn)) = (server.as_mut(), pair.server_opt()) {
            // Transport events are not needed: sessions poll their streams.
            while conn.poll_event().is_some() {}
            while let Some(event) = server.poll(now, conn) {
                if !*hold {
                    if let Err(e) = serve(server, conn, files, extra_fields, outgoing, &event) {
                        send_errors.push(e);
                    }
                }
                server_events.push(event);
            }
            pump(server, conn, files, outgoing);
        }
        if let (Some(client), Some(conn)) = (client.as_mut(), pair.client_opt()) {
            read_downloads(client, conn, now, downloads, buf);
        }
    }

    /// Turns and steps until `done` holds or `limit` of virtual time passes.
    pub fn run(&mut self, limit: Duration, mut done: impl FnMut(&mut Harness) -> bool) -> bool {
        let end = self.pair.now + limit;
        loop {
            self.turn();
            if done(self) {
                return true;
            }
            if self.pair.now >= end || !self.pair.step_until(end) {
                self.turn();
                return done(self);
            }
        }
    }

    /// Runs until every download ended (body read, failed or errored).
    /// With both sessions present, the server application must not have
    /// met a send error on the way.
    pub fn finish_downloads(&mut self, limit: Duration) -> bool {
        let done = self.run(limit, |h| {
            h.downloads
                .values()
                .all(|d| d.done || d.failed.is_some() || d.error.is_some())
        });
        if self.client.is_some() && self.server.is_some() {
            assert!(self.send_errors.is_empty(), "{:?}", self.send_errors);
        }
        done
    }

    /// Runs until the client connection ends; the application close code
    /// the server sent, if that is how it ended.
    pub fn server_close_code(&mut self) -> Option<u64> {
        let mut code = None;
        self.run(Duration::from_secs(5), |h| {
            let reason = h.pair.client_opt().and_then(|c| c.close_reason().cloned());
            if let Some(ConnectionError::PeerClosed {
                code: c,
                application: true,
                ..
            }) = reason
            {
                code = Some(c);
            }
            reason.is_some()
        });
        code
    }

    /// Runs until the server connection ends; the application close code
    /// the client sent, if that is how it ended.
    pub fn client_close_code(&mut self) -> Option<u64> {
        let mut code = None;
        self.run(Duration::from_secs(5), |h| {
            let reason = h.pair.server_opt().and_then(|c| c.close_reason().cloned());
            if let Some(ConnectionError::PeerClosed {
                code: c,
                application: true,
                ..
            }) = reason
            {
                code = Some(c);
            }
            reason.is_some()
        });
        code
    }
}

/// The test server application: answers each event as a file server would.
fn serve(
    server: &mut H3Server,
    conn: &mut Connection,
    files: &BTreeMap<String, Vec<u8>>,
    extra_fields: &[Field],
    outgoing: &mut BTreeMap<StreamId, Outgoing>,
    event: &ServerEvent,
) -> Result<(), (StreamId, SendError)> {
    match event {
        ServerEvent::Request { stream, request } => {
            let file = files.get(&request.path);
            let head = match (&request.method, file) {
                (Method::Get | Method::Head, Some(body)) => {
                    let mut head =
                        ResponseHead::new(200).with("content-length", body.len().to_string());
                    head.headers.extend_from_slice(extra_fields);
                    head
                }
                (Method::Get | Method::Head, None) => ResponseHead::new(404),
                (Method::Other(_), _) => ResponseHead::new(405),
            };
            let fail = |e| (*stream, e);
            server.send_response(conn, *stream, &head).map_err(fail)?;
            match (head.status, &request.method, file) {
                (200, Method::Get, Some(body)) if !body.is_empty() => {
                    outgoing.insert(
                        *stream,
                        Outgoing {
                            path: request.path.clone(),
                            sent: 0,
                        },
                    );
                }
                _ => server.finish(conn, *stream).map_err(fail)?,
            }
        }
        ServerEvent::BadRequest { stream, error } => {
            let status = match error {
                MessageError::TooLarge(_) => 431,
                MessageError::Malformed(_) => 400,
            };
            let fail = |e| (*stream, e);
            server
                .send_response(conn, *stream, &ResponseHead::new(status))
                .map_err(fail)?;
            server.finish(conn, *stream).map_err(fail)?;
        }
        ServerEvent::Cancelled { stream } => {
            outgoing.remove(stream);
        }
    }
    Ok(())
}

/// Writes what fits of every body being sent; finishes the complete ones.
fn pump(
    server: &mut H3Server,
    conn: &mut Connection,
    files: &BTreeMap<String, Vec<u8>>,
    outgoing: &mut BTreeMap<StreamId, Outgoing>,
) {
    outgoing.retain(|&id, out| {
        let body = files.get(&out.path).map_or(&[][..], Vec::as_slice);
        while out.sent < body.len() {
            match server.send_body(conn, id, &body[out.sent..]) {
                Ok(n) => out.sent += n,
                Err(_) => return true,
            }
        }
        server.finish(conn, id).is_err()
    });
}

/// A HEADERS frame with `fields`, QPACK-encoded (for raw peers).
pub fn headers_frame(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut section = Vec::new();
    qpack::encode_section(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    let mut out = Vec::new();
    write_frame(&mut out, frame::HEADERS, &section);
    out
}

/// The pseudo-headers of a valid GET of `/`.
pub const GET_ROOT: [(&str, &str); 4] = [
    (":method", "GET"),
    (":scheme", "https"),
    (":authority", "localhost"),
    (":path", "/"),
];

/// A control stream's opening: its type, then SETTINGS with `settings`
/// (raw setting bytes).
pub fn control_stream(settings: &[u8]) -> Vec<u8> {
    let mut out = vec![0x00];
    write_frame(&mut out, frame::SETTINGS, settings);
    out
}
