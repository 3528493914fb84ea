//! [`HttpServer`]: the server role of every request/response workload.
//!
//! One application for `artq serve` and the simulated server: it accepts
//! connections, speaks hq-interop or HTTP/3 on each as its ALPN says, answers
//! each request from a [`Content`] tree, and pulls response bodies into the
//! streams as the peer's flow control lets them through. What differs
//! between a file server, a live-stream origin and a DASH origin is only the
//! content.
//!
//! Memory: a body is read in chunks of [`CHUNK`] bytes into one scratch
//! buffer shared by every response, and only while the stream has room
//! (`Streams::write_room`: the transport takes bytes up to the peer's
//! credit plus a small allowance ahead of it). A write that falls short is
//! the signal to stop: the response keeps what was not taken (at most one
//! chunk) and reads on once the peer's window opens. So a client that opens
//! many streams and reads slowly makes the server hold what its windows
//! grant plus at most a chunk per stream, not a send buffer per stream.
//! Whole chunks keep HTTP/3's DATA frames one chunk long whatever the
//! window (the simulator's results do not depend on how reads are cut).
//!
//! Responses: 200 with `content-type`, `content-length` (when known) and
//! `alt-svc` (when configured); 400 for a malformed request, 404/403 for
//! what the content refuses, 405 for methods other than GET and HEAD (with
//! `allow`), 431 for an oversized header section. hq-interop carries no
//! status: its session resets refused streams instead.

use std::collections::{BTreeMap, BTreeSet};

use transport::streams::StreamEvent;
use transport::{Connection, ConnectionHandle, Endpoint, Event};
use wire::time::Instant;
use wire::StreamId;

use crate::app::App;
use crate::content::{decode_path, BodyChunk, Content, Resource};
use crate::edge::{Edge, HeadPoll, OriginIo, ViewId};
use crate::http::{
    BodyError, MessageError, Method, Request, ResponseHead, SendError, ServerEvent, ServerSession,
};
use crate::protocol::Protocol;

/// Most bytes pulled from a body per read.
pub const CHUNK: usize = 64 * 1024;

/// How the server answers, beyond its content.
#[derive(Clone, Debug, Default)]
pub struct ServerOptions {
    /// The `alt-svc` value added to every HTTP/3 response (e.g.
    /// `h3=":4433"; ma=86400`), so a client can discover the QUIC endpoint.
    pub alt_svc: Option<String>,
}

/// Where a response comes from.
enum Source {
    /// The server's own content: the head was sent with the request's
    /// answer.
    Local(Box<dyn crate::content::Body>),
    /// An origin behind the edge: the head is sent once the edge has it.
    Edge {
        view: ViewId,
        head_sent: bool,
        /// A HEAD request: the head alone.
        head_only: bool,
        /// The request body is being forwarded to the origin.
        uploading: bool,
    },
}

/// A body to pull bytes from, for [`pump_one`].
enum BodyRef<'a> {
    Local(&'a mut dyn crate::content::Body),
    Edge(&'a mut Edge, ViewId),
}

impl BodyRef<'_> {
    fn read(&mut self, now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        match self {
            BodyRef::Local(body) => body.read(now, buf),
            BodyRef::Edge(edge, view) => edge.read(*view, buf),
        }
    }
}

/// A response whose body is being sent.
struct Exchange {
    source: Source,
    /// What the request log will say of it (with a log only).
    log: Option<LogEntry>,
    /// Body bytes read but not yet taken by the session (what a short write
    /// left over); empty, with no capacity, most of the time.
    leftover: Vec<u8>,
    /// The body has nothing now; retry at this time (or on the next turn).
    /// `None` after a turn: the stream is full, and its `Writable` event
    /// brings the exchange back.
    waiting: Option<Option<Instant>>,
}

/// A request as the log will show it, while its response is under way.
struct LogEntry {
    method: String,
    path: String,
    started: Instant,
    /// The response's status once its head went out (0 before).
    status: u16,
    /// Body bytes handed to the stream.
    bytes: u64,
}

impl LogEntry {
    fn of(request: &Request, now: Instant, status: u16) -> LogEntry {
        LogEntry {
            method: request.method.as_str().to_string(),
            path: request.path.clone(),
            started: now,
            status,
            bytes: 0,
        }
    }
}

/// One request whose exchange is over, for an access log
/// ([`HttpServer::with_request_log`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// The connection it came on.
    pub connection: ConnectionHandle,
    /// The client's address then.
    pub remote: std::net::SocketAddr,
    /// The connection's ALPN (`h3`, `hq-interop`).
    pub alpn: String,
    /// The method (empty for a request too malformed to have one).
    pub method: String,
    /// The path with its query (empty likewise).
    pub path: String,
    /// The response's status; 0 when no response head was sent.
    pub status: u16,
    /// Response body bytes handed to the transport.
    pub bytes: u64,
    /// When the request was read.
    pub started: Instant,
    /// When the client acknowledged the response's last byte (or the
    /// connection ended first, or the exchange was cut).
    pub ended: Instant,
    /// The whole response was written, FIN included (false: aborted,
    /// cancelled or stopped by the client, or its connection ended
    /// first).
    pub completed: bool,
    /// The connection's lost packets so far.
    pub lost_packets: u64,
    /// The connection's replicas so far (the recovery scheme's cost).
    pub replicas: u64,
}

/// Receives every finished request ([`HttpServer::with_request_log`]).
pub type RequestLog = Box<dyn FnMut(&RequestRecord)>;

/// How pumping one response ended this turn.
enum Pumped {
    /// More to send later (the stream is full, or the body waits).
    Later,
    /// The body ended and FIN was written (or the stream is gone).
    Done,
    /// Abandoned: the body failed or the stream was stopped or reset.
    Aborted,
}

/// One connection's protocol state.
struct ServerConn {
    /// Made once the ALPN is known (a ClientHello may span several
    /// Initial packets, so it is not always known at accept time).
    session: Option<Box<dyn ServerSession>>,
    exchanges: BTreeMap<StreamId, Exchange>,
    /// Responses written whole (FIN included) whose log line waits for the
    /// client's acknowledgement of their last byte (with a log only).
    unacked: BTreeMap<StreamId, LogEntry>,
    connected: bool,
    lost: bool,
    /// The earliest time one of its exchanges waits for, as filed in
    /// [`HttpServer::timers`].
    timer: Option<Instant>,
}

impl ServerConn {
    /// The session, made now if the ALPN has become known.
    fn session(&mut self, conn: &Connection) -> Option<&mut Box<dyn ServerSession>> {
        if self.session.is_none() {
            let protocol = conn.alpn_protocol().and_then(Protocol::from_alpn)?;
            self.session = Some(protocol.server_session());
        }
        self.session.as_mut()
    }
}

/// Counters of what the server has answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// Requests answered with a 2xx status.
    pub ok: u64,
    /// Requests refused (4xx).
    pub refused: u64,
    /// Responses abandoned (body errors, peer cancellations).
    pub aborted: u64,
}

/// How much work the server's turns did: what shows that a turn costs the
/// connections that acted, not one visit per connection held (tests and
/// benchmarks read it).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServerWork {
    /// Turns ([`App::drive`] calls).
    pub turns: u64,
    /// Connections visited by those turns, all together.
    pub visits: u64,
}

/// The request/response server application.
pub struct HttpServer {
    content: Box<dyn Content>,
    /// Origins behind path prefixes, when the server is an edge.
    edge: Option<Edge>,
    options: ServerOptions,
    /// Where bodies are read into, shared by every response.
    scratch: Vec<u8>,
    conns: BTreeMap<ConnectionHandle, ServerConn>,
    /// Connections still open, in the order they were accepted (a closed
    /// one is forgotten, so a long-running server keeps nothing per past
    /// connection).
    order: Vec<ConnectionHandle>,
    /// Connections accepted so far.
    accepted: u64,
    /// Connections to visit on the next turn: those that had events (a
    /// request, room to write, their end) since the last one.
    woken: BTreeSet<ConnectionHandle>,
    /// Connections with an exchange that is retried every turn (an origin
    /// response not there yet, a request body being forwarded).
    polling: BTreeSet<ConnectionHandle>,
    /// (time, connection) of each connection whose exchanges wait for a
    /// time (a paced body).
    timers: BTreeSet<(Instant, ConnectionHandle)>,
    work: ServerWork,
    shutting_down: bool,
    counters: ServerCounters,
    /// Told of every finished request, when there is an access log.
    request_log: Option<RequestLog>,
}

impl HttpServer {
    /// A server answering from `content`.
    pub fn new(content: Box<dyn Content>, options: ServerOptions) -> HttpServer {
        HttpServer {
            content,
            edge: None,
            options,
            scratch: Vec::new(),
            conns: BTreeMap::new(),
            order: Vec::new(),
            accepted: 0,
            woken: BTreeSet::new(),
            polling: BTreeSet::new(),
            timers: BTreeSet::new(),
            work: ServerWork::default(),
            shutting_down: false,
            counters: ServerCounters::default(),
            request_log: None,
        }
    }

    /// Tells `log` of every request whose exchange is over: completed,
    /// refused, cancelled or cut by its connection's end (an access log).
    pub fn with_request_log(mut self, log: RequestLog) -> HttpServer {
        self.request_log = Some(log);
        self
    }

    /// Logs a finished exchange, when there is a log.
    fn log_end(
        log: &mut Option<RequestLog>,
        h: ConnectionHandle,
        conn: Option<&Connection>,
        entry: Option<LogEntry>,
        now: Instant,
        completed: bool,
    ) {
        let (Some(log), Some(e)) = (log.as_mut(), entry) else {
            return;
        };
        let (remote, alpn, lost_packets, replicas) = match conn {
            Some(c) => {
                let stats = c.stats();
                (
                    c.remote_address(),
                    c.alpn_protocol()
                        .map(|a| String::from_utf8_lossy(a).into_owned())
                        .unwrap_or_default(),
                    stats.lost_packets,
                    stats.replicas,
                )
            }
            None => (
                std::net::SocketAddr::from(([0, 0, 0, 0], 0)),
                String::new(),
                0,
                0,
            ),
        };
        log(&RequestRecord {
            connection: h,
            remote,
            alpn,
            method: e.method,
            path: e.path,
            status: e.status,
            bytes: e.bytes,
            started: e.started,
            ended: now,
            completed,
            lost_packets,
            replicas,
        });
    }

    /// Puts `edge` in front of the content: requests its routes claim go
    /// to its origins, the others to the content.
    pub fn with_edge(mut self, edge: Edge) -> HttpServer {
        self.edge = Some(edge);
        self
    }

    /// The edge, when the server is one.
    pub fn edge(&self) -> Option<&Edge> {
        self.edge.as_ref()
    }

    /// The edge, mutably (a server's metrics drain its timings).
    pub fn edge_mut(&mut self) -> Option<&mut Edge> {
        self.edge.as_mut()
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// How much work its turns did.
    pub fn work(&self) -> ServerWork {
        self.work
    }

    /// What has been answered so far.
    pub fn counters(&self) -> ServerCounters {
        self.counters
    }

    /// Connections accepted and not yet closed, in order.
    pub fn connections(&self) -> &[ConnectionHandle] {
        &self.order
    }

    /// Forgets connection `h`, closing the edge views of its exchanges.
    fn forget(&mut self, now: Instant, h: ConnectionHandle) {
        self.order.retain(|&o| o != h);
        self.polling.remove(&h);
        if let Some(sc) = self.conns.remove(&h) {
            if let Some(at) = sc.timer {
                self.timers.remove(&(at, h));
            }
            for (_, e) in sc.unacked {
                Self::log_end(&mut self.request_log, h, None, Some(e), now, true);
            }
            for (_, mut ex) in sc.exchanges {
                Self::log_end(&mut self.request_log, h, None, ex.log.take(), now, false);
                release(&mut self.edge, ex);
            }
        }
    }

    /// Answers one session report.
    fn on_request_event(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        conn: &mut Connection,
        ev: ServerEvent,
    ) {
        let logging = self.request_log.is_some();
        let entry =
            |request: &Request, status: u16| logging.then(|| LogEntry::of(request, now, status));
        let Some(sc) = self.conns.get_mut(&h) else {
            return;
        };
        let Some(session) = sc.session(conn) else {
            return;
        };
        match ev {
            ServerEvent::Request { stream, request } => {
                // Before the handshake completes, a server can only have
                // read 0-RTT data: a replayable request. Only safe methods
                // are answered from it (RFC 8470 §3: 425 Too Early tells
                // the client to send it again after the handshake). A
                // request read in the same turn as the client's Finished
                // counts as after it: single-use tickets already refuse a
                // replayed first flight's early data.
                if conn.is_handshaking() && !request.method.is_safe() {
                    self.counters.refused += 1;
                    let head = ResponseHead::new(425).with("content-length", "0");
                    if session.send_response(conn, stream, &head).is_ok() {
                        let _ = session.finish(conn, stream);
                    }
                    if let Some(e) = entry(&request, 425) {
                        sc.unacked.insert(stream, e);
                    }
                    return;
                }
                if let Some(edge) = self.edge.as_mut() {
                    match route(edge, &request) {
                        Route::Local => {}
                        Route::Upstream(upstream) => {
                            let protocol = conn
                                .alpn_protocol()
                                .and_then(Protocol::from_alpn)
                                .unwrap_or(Protocol::H3);
                            let client = conn.remote_address().ip();
                            let view = edge.open(now, upstream, &request, client, protocol);
                            let uploading = edge.wants_request_body(view);
                            if uploading {
                                session.stream_request_body(stream);
                            }
                            sc.exchanges.insert(
                                stream,
                                Exchange {
                                    source: Source::Edge {
                                        view,
                                        head_sent: false,
                                        head_only: request.method == Method::Head,
                                        uploading,
                                    },
                                    log: entry(&request, 0),
                                    leftover: Vec::new(),
                                    waiting: None,
                                },
                            );
                            return;
                        }
                        Route::Refused(status) => {
                            self.counters.refused += 1;
                            let head = ResponseHead::new(status).with("content-length", "0");
                            if session.send_response(conn, stream, &head).is_ok() {
                                let _ = session.finish(conn, stream);
                            }
                            if let Some(e) = entry(&request, status) {
                                sc.unacked.insert(stream, e);
                            }
                            return;
                        }
                    }
                }
                let (head, resource) = answer(&mut *self.content, &self.options, now, &request);
                let ok = (200..300).contains(&head.status);
                let sent = session.send_response(conn, stream, &head);
                if !ok || sent.is_err() {
                    self.counters.refused += 1;
                    let _ = session.finish(conn, stream);
                    match entry(&request, if sent.is_ok() { head.status } else { 0 }) {
                        Some(e) if sent.is_ok() => {
                            sc.unacked.insert(stream, e);
                        }
                        e => Self::log_end(&mut self.request_log, h, Some(conn), e, now, false),
                    }
                    return;
                }
                self.counters.ok += 1;
                match resource {
                    Some(r) if request.method == Method::Get => {
                        sc.exchanges.insert(
                            stream,
                            Exchange {
                                source: Source::Local(r.body),
                                log: entry(&request, head.status),
                                leftover: Vec::new(),
                                waiting: None,
                            },
                        );
                    }
                    _ => {
                        let _ = session.finish(conn, stream);
                        if let Some(e) = entry(&request, head.status) {
                            sc.unacked.insert(stream, e);
                        }
                    }
                }
            }
            ServerEvent::BadRequest { stream, error } => {
                self.counters.refused += 1;
                let status = match error {
                    MessageError::TooLarge(_) => 431,
                    MessageError::Malformed(_) => 400,
                };
                let head = ResponseHead::new(status).with("content-length", "0");
                if session.send_response(conn, stream, &head).is_ok() {
                    let _ = session.finish(conn, stream);
                }
                if logging {
                    let e = LogEntry {
                        method: String::new(),
                        path: String::new(),
                        started: now,
                        status,
                        bytes: 0,
                    };
                    sc.unacked.insert(stream, e);
                }
            }
            ServerEvent::Cancelled { stream } => {
                if let Some(mut ex) = sc.exchanges.remove(&stream) {
                    self.counters.aborted += 1;
                    let e = ex.log.take();
                    Self::log_end(&mut self.request_log, h, Some(conn), e, now, false);
                    release(&mut self.edge, ex);
                }
            }
        }
    }

    /// Moves body bytes into the streams as far as the transport takes
    /// them now.
    fn pump(&mut self, now: Instant, h: ConnectionHandle, conn: &mut Connection) {
        let Some(sc) = self.conns.get_mut(&h) else {
            return;
        };
        let Some(session) = sc.session.as_mut() else {
            return;
        };
        let mut done = Vec::new();
        for (&id, ex) in sc.exchanges.iter_mut() {
            if let Some(Some(at)) = ex.waiting {
                if now < at {
                    continue;
                }
            }
            ex.waiting = None;
            // The body to pump, or how the exchange stands without one.
            let body = match &mut ex.source {
                Source::Local(body) => Ok(BodyRef::Local(body.as_mut())),
                Source::Edge {
                    view,
                    head_sent,
                    head_only,
                    uploading,
                } => {
                    let Some(edge) = self.edge.as_mut() else {
                        done.push((id, true));
                        continue;
                    };
                    if *uploading {
                        match pump_upload(
                            now,
                            edge,
                            *view,
                            conn,
                            session.as_mut(),
                            id,
                            &mut self.scratch,
                        ) {
                            Ok(still) => *uploading = still,
                            Err(()) => {
                                session.abort(conn, id);
                                done.push((id, true));
                                continue;
                            }
                        }
                    }
                    let mut status = 0;
                    let sent = send_edge_head(
                        edge,
                        *view,
                        head_sent,
                        *head_only,
                        &self.options,
                        conn,
                        session.as_mut(),
                        id,
                        &mut status,
                    );
                    if let (Some(log), true) = (ex.log.as_mut(), status != 0) {
                        log.status = status;
                    }
                    match sent {
                        EdgeHead::Pending => {
                            ex.waiting = Some(None);
                            Err(Pumped::Later)
                        }
                        EdgeHead::Finished => Err(Pumped::Done),
                        EdgeHead::Failed => Err(Pumped::Aborted),
                        EdgeHead::Body => Ok(BodyRef::Edge(edge, *view)),
                    }
                }
            };
            let pumped = match body {
                Ok(body) => {
                    let mut sent = 0;
                    let pumped = pump_one(
                        now,
                        conn,
                        session.as_mut(),
                        id,
                        &mut ex.leftover,
                        &mut ex.waiting,
                        body,
                        &mut self.scratch,
                        &mut sent,
                    );
                    if let Some(log) = ex.log.as_mut() {
                        log.bytes += sent;
                    }
                    pumped
                }
                Err(pumped) => pumped,
            };
            match pumped {
                Pumped::Later => {}
                Pumped::Done => done.push((id, false)),
                Pumped::Aborted => done.push((id, true)),
            }
        }
        for (id, aborted) in done {
            if let Some(mut ex) = sc.exchanges.remove(&id) {
                match ex.log.take() {
                    Some(e) if !aborted => {
                        sc.unacked.insert(id, e);
                    }
                    e => Self::log_end(&mut self.request_log, h, Some(conn), e, now, false),
                }
                release(&mut self.edge, ex);
            }
            if aborted {
                self.counters.aborted += 1;
            }
        }
        self.schedule(h);
    }

    /// Files connection `h` for the turns its exchanges wait for: every
    /// turn ([`HttpServer::polling`]), a time ([`HttpServer::timers`]), or
    /// neither (their streams' `Writable` events bring them back).
    fn schedule(&mut self, h: ConnectionHandle) {
        let Some(sc) = self.conns.get_mut(&h) else {
            return;
        };
        let mut every_turn = false;
        let mut at: Option<Instant> = None;
        for ex in sc.exchanges.values() {
            if matches!(
                ex.source,
                Source::Edge {
                    uploading: true,
                    ..
                }
            ) {
                every_turn = true;
            }
            match ex.waiting {
                Some(None) => every_turn = true,
                Some(Some(t)) => at = Some(at.map_or(t, |a| a.min(t))),
                None => {}
            }
        }
        if every_turn {
            self.polling.insert(h);
        } else {
            self.polling.remove(&h);
        }
        if sc.timer != at {
            if let Some(old) = sc.timer {
                self.timers.remove(&(old, h));
            }
            if let Some(new) = at {
                self.timers.insert((new, h));
            }
            sc.timer = at;
        }
    }
}

/// Sends what `ex` left over, then, while the stream has room
/// ([`transport::streams::Streams::write_room`]), reads a chunk of its body
/// and sends it, until a write falls short, the body waits or it ends.
#[allow(clippy::too_many_arguments)]
fn pump_one(
    now: Instant,
    conn: &mut Connection,
    session: &mut dyn ServerSession,
    id: StreamId,
    leftover: &mut Vec<u8>,
    waiting: &mut Option<Option<Instant>>,
    mut body: BodyRef<'_>,
    scratch: &mut Vec<u8>,
    sent: &mut u64,
) -> Pumped {
    use transport::streams::WriteError;
    loop {
        if !leftover.is_empty() {
            match session.send_body(conn, id, leftover) {
                Ok(n) if n >= leftover.len() => {
                    *sent += leftover.len() as u64;
                    *leftover = Vec::new();
                }
                Ok(n) => {
                    *sent += n as u64;
                    leftover.drain(..n);
                    return Pumped::Later;
                }
                Err(SendError::Stream(WriteError::Blocked)) => return Pumped::Later,
                Err(_) => return Pumped::Aborted,
            }
        }
        let Ok(room) = conn.streams().write_room(id) else {
            // Stopped by the peer, reset or gone: the response is over (the
            // session reports a stop as `Cancelled` on its own).
            return Pumped::Aborted;
        };
        if room == 0 {
            // Nothing written, so nothing fell short: ask for the event.
            conn.streams().notify_writable(id);
            return Pumped::Later;
        }
        if scratch.len() < CHUNK {
            scratch.resize(CHUNK, 0);
        }
        match body.read(now, scratch) {
            // A body that gives nothing without waiting is retried next turn.
            Ok(BodyChunk::Data(0)) => {
                *waiting = Some(None);
                return Pumped::Later;
            }
            Ok(BodyChunk::Data(n)) => {
                let data = scratch.get(..n).unwrap_or_default();
                match session.send_body(conn, id, data) {
                    Ok(taken) if taken >= data.len() => *sent += data.len() as u64,
                    Ok(taken) => {
                        *sent += taken as u64;
                        *leftover = data.get(taken..).unwrap_or_default().to_vec();
                        return Pumped::Later;
                    }
                    Err(SendError::Stream(WriteError::Blocked)) => {
                        *leftover = data.to_vec();
                        return Pumped::Later;
                    }
                    Err(_) => return Pumped::Aborted,
                }
            }
            Ok(BodyChunk::End) => {
                // Fails only if the stream was reset meanwhile: done either way.
                let _ = session.finish(conn, id);
                return Pumped::Done;
            }
            Ok(BodyChunk::Wait(at)) => {
                *waiting = Some(at);
                return Pumped::Later;
            }
            Err(_) => {
                session.abort(conn, id);
                return Pumped::Aborted;
            }
        }
    }
}

/// Where a request goes when the server is an edge.
enum Route {
    /// To the server's own content.
    Local,
    /// To this upstream.
    Upstream(usize),
    /// Nowhere: answer this status (400 for a path that cannot be decoded
    /// or that climbs with `..`, 405 for CONNECT).
    Refused(u16),
}

/// Routes `request` by its decoded path. Dot segments are refused rather
/// than resolved, so a path cannot name one route and reach another.
fn route(edge: &Edge, request: &Request) -> Route {
    let Some(path) = decode_path(&request.path) else {
        return Route::Refused(400);
    };
    let Some(upstream) = edge.routes().route(&path) else {
        return Route::Local;
    };
    if path
        .split('/')
        .any(|segment| segment == ".." || segment == ".")
    {
        return Route::Refused(400);
    }
    // CONNECT asks for a tunnel, not a resource: not an origin request.
    if request.method.as_str() == "CONNECT" {
        return Route::Refused(405);
    }
    Route::Upstream(upstream)
}

/// Where an edge response stands after [`send_edge_head`].
enum EdgeHead {
    /// The origin has not answered yet.
    Pending,
    /// The head is out; pump the body.
    Body,
    /// The response is complete (a failure status, a HEAD, a bodiless
    /// status).
    Finished,
    /// The head could not be sent (the stream is gone, or the origin's
    /// fields are not valid HTTP/3): the stream was reset.
    Failed,
}

/// Sends the head of an edge response once the edge has it.
#[allow(clippy::too_many_arguments)]
fn send_edge_head(
    edge: &mut Edge,
    view: ViewId,
    head_sent: &mut bool,
    head_only: bool,
    options: &ServerOptions,
    conn: &mut Connection,
    session: &mut dyn ServerSession,
    id: StreamId,
    status: &mut u16,
) -> EdgeHead {
    if *head_sent {
        return EdgeHead::Body;
    }
    let (mut head, body) = match edge.head(view) {
        HeadPoll::Pending => return EdgeHead::Pending,
        HeadPoll::Ready(head) => {
            let body = !head_only && !matches!(head.status, 204 | 304);
            (head, body)
        }
        HeadPoll::Failed(status) => (ResponseHead::new(status).with("content-length", "0"), false),
    };
    if let Some(v) = &options.alt_svc {
        head = head.with("alt-svc", v.clone());
    }
    *head_sent = true;
    *status = head.status;
    if session.send_response(conn, id, &head).is_err() {
        *status = 0;
        session.abort(conn, id);
        return EdgeHead::Failed;
    }
    if body {
        EdgeHead::Body
    } else {
        let _ = session.finish(conn, id);
        EdgeHead::Finished
    }
}

/// Forwards what arrived of an edge request's body to the origin, as far
/// as the origin connection takes it. `Ok(true)` while more is to come,
/// `Ok(false)` once the body ended (or the edge needs no more of it);
/// `Err` when the body failed (the client reset it, it broke its
/// content-length, or could not be framed): abort the exchange.
fn pump_upload(
    now: Instant,
    edge: &mut Edge,
    view: ViewId,
    conn: &mut Connection,
    session: &mut dyn ServerSession,
    id: StreamId,
    scratch: &mut Vec<u8>,
) -> Result<bool, ()> {
    if scratch.len() < CHUNK {
        scratch.resize(CHUNK, 0);
    }
    loop {
        if !edge.wants_request_body(view) {
            return Ok(false);
        }
        let room = edge.request_body_room(view).min(scratch.len());
        if room == 0 {
            return Ok(true);
        }
        let buf = scratch.get_mut(..room).unwrap_or_default();
        match session.read_request_body(now, conn, id, buf) {
            Ok(Some(n)) => {
                let data = buf.get(..n).unwrap_or_default();
                edge.write_request_body(view, data).map_err(|_| ())?;
            }
            Ok(None) => {
                edge.end_request_body(view).map_err(|_| ())?;
                return Ok(false);
            }
            Err(BodyError::Blocked) => return Ok(true),
            Err(_) => return Err(()),
        }
    }
}

/// An exchange is over: its edge view, if any, is closed.
fn release(edge: &mut Option<Edge>, ex: Exchange) {
    if let (Some(edge), Source::Edge { view, .. }) = (edge.as_mut(), ex.source) {
        edge.close_view(view);
    }
}

/// The response head and resource for `request`.
fn answer(
    content: &mut dyn Content,
    options: &ServerOptions,
    now: Instant,
    request: &Request,
) -> (ResponseHead, Option<Resource>) {
    let with_alt_svc = |head: ResponseHead| match &options.alt_svc {
        Some(v) => head.with("alt-svc", v.clone()),
        None => head,
    };
    if !matches!(request.method, Method::Get | Method::Head) {
        let head = ResponseHead::new(405)
            .with("allow", "GET, HEAD")
            .with("content-length", "0");
        return (with_alt_svc(head), None);
    }
    match content.resolve(now, &request.path) {
        Ok(r) => {
            let mut head = ResponseHead::new(200).with("content-type", r.content_type);
            if let Some(len) = r.length {
                head = head.with("content-length", len.to_string());
            }
            (with_alt_svc(head), Some(r))
        }
        Err(refusal) => {
            let head = ResponseHead::new(refusal.status()).with("content-length", "0");
            (with_alt_svc(head), None)
        }
    }
}

impl App for HttpServer {
    fn on_connection(&mut self, _now: Instant, h: ConnectionHandle, _conn: &mut Connection) {
        self.order.push(h);
        self.woken.insert(h);
        self.accepted += 1;
        self.conns.insert(
            h,
            ServerConn {
                session: None,
                exchanges: BTreeMap::new(),
                unacked: BTreeMap::new(),
                connected: false,
                lost: false,
                timer: None,
            },
        );
    }

    fn on_event(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        conn: &mut Connection,
        event: &Event,
    ) {
        let Some(sc) = self.conns.get_mut(&h) else {
            return;
        };
        self.woken.insert(h);
        match event {
            Event::Connected => {
                sc.connected = true;
                let shutting_down = self.shutting_down;
                // TLS only completes with an ALPN from our list, so the
                // session exists from here on.
                if let Some(session) = sc.session(conn) {
                    session.on_connected(conn);
                    if shutting_down {
                        session.shutdown(conn);
                    }
                }
            }
            Event::Stream(StreamEvent::Finished { id }) => {
                if let Some(e) = sc.unacked.remove(id) {
                    Self::log_end(&mut self.request_log, h, Some(conn), Some(e), now, true);
                }
            }
            Event::Stream(StreamEvent::Stopped { id, .. }) => {
                if let Some(e) = sc.unacked.remove(id) {
                    Self::log_end(&mut self.request_log, h, Some(conn), Some(e), now, false);
                }
            }
            Event::ConnectionLost(_) => {
                sc.lost = true;
                // Written whole, FIN included; the last acknowledgement may
                // not have come before the connection ended.
                for (_, e) in std::mem::take(&mut sc.unacked) {
                    Self::log_end(&mut self.request_log, h, Some(conn), Some(e), now, true);
                }
                for (_, mut ex) in std::mem::take(&mut sc.exchanges) {
                    let e = ex.log.take();
                    Self::log_end(&mut self.request_log, h, Some(conn), e, now, false);
                    release(&mut self.edge, ex);
                }
            }
            _ => {}
        }
    }

    fn drive(&mut self, now: Instant, endpoint: &mut Endpoint) {
        if let Some(edge) = self.edge.as_mut() {
            edge.drive(now);
        }
        // The connections that may have work: woken by events, retried
        // every turn, whose time came, or all while shutting down.
        let mut visit = core::mem::take(&mut self.woken);
        visit.extend(self.polling.iter().copied());
        while let Some(&(at, h)) = self.timers.first() {
            if at > now {
                break;
            }
            self.timers.pop_first();
            if let Some(sc) = self.conns.get_mut(&h) {
                sc.timer = None;
            }
            visit.insert(h);
        }
        if self.shutting_down {
            visit.extend(self.conns.keys().copied());
        }
        self.work.turns += 1;
        self.work.visits += visit.len() as u64;
        for h in visit {
            let Some(conn) = endpoint.connection_mut(h) else {
                self.forget(now, h);
                continue;
            };
            if self.conns.get(&h).is_none_or(|sc| sc.lost) {
                self.forget(now, h);
                continue;
            }
            // Requests are read as soon as they arrive, even before the
            // handshake is confirmed (as the transport delivers them).
            while let Some(ev) = self
                .conns
                .get_mut(&h)
                .and_then(|sc| sc.session(conn))
                .and_then(|s| s.poll(now, conn))
            {
                self.on_request_event(now, h, conn, ev);
            }
            self.pump(now, h, conn);
            if self.shutting_down
                && self.conns.get(&h).is_some_and(|sc| sc.exchanges.is_empty())
                && !conn.is_closed()
            {
                conn.close(now, shutdown_code(conn), b"server shutting down");
            }
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        let bodies = self.timers.first().map(|&(at, _)| at);
        let edge = self.edge.as_ref().and_then(Edge::poll_timeout);
        bodies.into_iter().chain(edge).min()
    }

    fn origin_io(&mut self) -> Option<&mut OriginIo> {
        self.edge.as_mut().map(Edge::io_mut)
    }

    fn is_finished(&self, endpoint: &Endpoint) -> bool {
        self.accepted > 0
            && self
                .order
                .iter()
                .all(|&h| endpoint.connection(h).is_none_or(|c| c.is_closed()))
    }

    fn shutdown(&mut self, _now: Instant, endpoint: &mut Endpoint) {
        self.shutting_down = true;
        for (&h, sc) in self.conns.iter_mut() {
            if let Some(conn) = endpoint.connection_mut(h) {
                if sc.connected {
                    if let Some(session) = sc.session(conn) {
                        session.shutdown(conn);
                    }
                }
            }
        }
    }

    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// The close code of a graceful shutdown in the connection's protocol.
fn shutdown_code(conn: &Connection) -> u64 {
    conn.alpn_protocol()
        .and_then(Protocol::from_alpn)
        .map_or(0, Protocol::no_error_code)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::content::GeneratedFiles;

    fn files() -> GeneratedFiles {
        GeneratedFiles {
            seed: 1,
            files: 2,
            size: 1234,
        }
    }

    fn options() -> ServerOptions {
        ServerOptions {
            alt_svc: Some("h3=\":4433\"; ma=86400".into()),
        }
    }

    #[test]
    fn a_found_resource_is_200_with_type_length_and_alt_svc() {
        let (head, resource) = answer(&mut files(), &options(), Instant::ZERO, &Request::get("/1"));
        assert_eq!(head.status, 200);
        assert_eq!(head.content_length(), Some(1234));
        assert_eq!(
            head.header("content-type"),
            Some("application/octet-stream")
        );
        assert_eq!(head.header("alt-svc"), Some("h3=\":4433\"; ma=86400"));
        assert!(resource.is_some());
    }

    #[test]
    fn refusals_carry_their_status_and_alt_svc() {
        let (head, resource) = answer(&mut files(), &options(), Instant::ZERO, &Request::get("/9"));
        assert_eq!((head.status, resource.is_none()), (404, true));
        assert_eq!(head.header("alt-svc"), Some("h3=\":4433\"; ma=86400"));
        let post = Request {
            method: Method::Other("POST".into()),
            ..Request::get("/1")
        };
        let (head, resource) = answer(&mut files(), &options(), Instant::ZERO, &post);
        assert_eq!((head.status, resource.is_none()), (405, true));
        assert_eq!(head.header("allow"), Some("GET, HEAD"));
        let head_req = Request {
            method: Method::Head,
            ..Request::get("/0")
        };
        let (head, _) = answer(
            &mut files(),
            &ServerOptions::default(),
            Instant::ZERO,
            &head_req,
        );
        assert_eq!(head.status, 200);
        assert_eq!(head.content_length(), Some(1234));
        assert_eq!(head.header("alt-svc"), None);
    }
}
