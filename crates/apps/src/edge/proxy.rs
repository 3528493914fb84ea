//! [`Edge`]: the requests the server hands to origins, and the origin
//! responses, connections, cache entries and live relays that answer them.
//!
//! The server ([`crate::server::HttpServer`]) opens a *view* for each
//! client request an upstream claims ([`Edge::open`]), asks for its head
//! ([`Edge::head`]) and pulls its body ([`Edge::read`]) as the client's
//! stream takes it, and closes the view when the exchange is over or the
//! client went away ([`Edge::close_view`]). Behind the views, a *fetch* is
//! one origin request on one origin connection:
//! - a **private** fetch answers one view; its body passes through a buffer
//!   of at most [`RESPONSE_BUFFER`] bytes, and the origin is read only
//!   while that buffer has room, so a slow client slows the origin;
//! - a **shared** fetch is a cacheable response (RFC 9111's plain cases,
//!   [`super::cache`]) of known length: every view that asked for the same
//!   URL while it was under way reads it from the start, and it goes into
//!   the cache when complete;
//! - a **live** fetch is an endless FLV or MPEG-TS response: it feeds a
//!   [`LiveRelay`], and every viewer of the path joins it at the last
//!   keyframe ([`super::live`]).
//!
//! Concurrent requests for one URL (a GET that may use the cache) make one
//! origin request: while the first one's head is awaited, later ones wait
//! on it. When the head says the response can be shared (cacheable or
//! live) they read it too; otherwise each of them sends its own request,
//! as a cache must not hand one client's private response to another.
//!
//! Failures: an origin that refuses or cannot be reached, or answers with
//! a malformed head, gives 502; one that has not answered within the
//! upstream timeout gives 504; one that fails, stalls for the timeout, or
//! ends early after the head makes [`Edge::read`] fail, and the server
//! resets the client's stream (never a short body that looks complete). A
//! request sent on a pooled keep-alive connection that the origin had
//! closed meanwhile is sent again, once, on a fresh connection.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::IpAddr;
use std::rc::Rc;

use wire::time::{Duration, Instant};

use super::cache::{self, Cache};
use super::headers;
use super::http1::{self, Decoded, Framing, RequestBodyEncoder, RequestFraming, ResponseDecoder};
use super::live::{LiveFormat, LiveRelay, ViewerId, ViewerRead, DEFAULT_LIVE_BUFFER};
use super::origin_io::{LinkState, OriginConn, OriginIo};
use super::routes::Routes;
use crate::content::BodyChunk;
use crate::http::{Method, Request, ResponseHead};
use crate::protocol::Protocol;

/// Most body bytes of a private response held between the origin and the
/// client's stream (beside [`super::origin_io::MAX_INPUT`] bytes of raw
/// input and what the transport's stream holds): the edge reads no more
/// from the origin until the client takes some.
pub const RESPONSE_BUFFER: usize = 256 * 1024;

/// Most request body bytes waiting to be written to one origin
/// connection: the server reads no more of the client's upload until the
/// origin takes some.
pub const UPLOAD_BUFFER: usize = 256 * 1024;

/// How long an idle keep-alive connection to an origin is kept for reuse.
pub const POOL_IDLE: Duration = Duration::from_secs(15);

/// Most idle connections kept per upstream.
pub const MAX_IDLE_PER_UPSTREAM: usize = 64;

/// Most connections open to one upstream at once (idle ones included);
/// a request beyond it is answered 503.
pub const MAX_CONNECTIONS_PER_UPSTREAM: usize = 4096;

/// The default of `--upstream-timeout`: how long an origin may take to
/// answer a request's head, and how long a body may stall.
pub const DEFAULT_UPSTREAM_TIMEOUT: Duration = Duration::from_secs(10);

/// How the edge is set up.
#[derive(Clone, Debug)]
pub struct EdgeOptions {
    /// The upstreams and their prefixes.
    pub routes: Routes,
    /// Bytes of responses the cache may hold (0: no cache).
    pub cache_size: u64,
    /// How long an origin may take to answer a head, or stall a body.
    pub upstream_timeout: Duration,
    /// Bytes a live stream keeps for its viewers (see [`LiveRelay`]).
    pub live_buffer: usize,
}

impl EdgeOptions {
    /// `routes` with no cache and the default timeout and live buffer.
    pub fn new(routes: Routes) -> EdgeOptions {
        EdgeOptions {
            routes,
            cache_size: 0,
            upstream_timeout: DEFAULT_UPSTREAM_TIMEOUT,
            live_buffer: DEFAULT_LIVE_BUFFER,
        }
    }
}

/// Names one client request the edge answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ViewId(u64);

/// The head of a view's response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadPoll {
    /// Not known yet (the origin has not answered).
    Pending,
    /// The head to send the client.
    Ready(ResponseHead),
    /// No origin response: answer with this status (502, 503, 504) and an
    /// empty body.
    Failed(u16),
}

/// What the edge has done, for logs and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EdgeCounters {
    /// Client requests an upstream claimed.
    pub requests: u64,
    /// Requests sent to origins (retries included).
    pub origin_requests: u64,
    /// Requests answered from the cache (the cache's own count).
    pub cache_hits: u64,
    /// Requests that read another request's origin response (waiting on
    /// it, sharing a cacheable one, or joining a live stream).
    pub coalesced: u64,
    /// Responses stored in the cache (the cache's own count).
    pub cache_stores: u64,
    /// Live viewers cut off for falling behind.
    pub live_cut: u64,
    /// Requests answered 502 (origin refused, unreachable, malformed).
    pub bad_gateway: u64,
    /// Requests answered 504 (origin slower than the timeout).
    pub gateway_timeout: u64,
    /// Requests answered 503 (too many origin connections).
    pub unavailable: u64,
    /// Responses cut after their head (origin failed, stalled or ended
    /// early): the clients' streams were reset.
    pub aborted: u64,
    /// Origin connections opened.
    pub connections_opened: u64,
    /// Requests sent on a pooled keep-alive connection.
    pub connections_reused: u64,
}

impl core::ops::AddAssign<&EdgeCounters> for EdgeCounters {
    /// Adds another edge's counts: a server of several workers, each with
    /// its own edge, reports their sum.
    fn add_assign(&mut self, o: &EdgeCounters) {
        let EdgeCounters {
            requests,
            origin_requests,
            cache_hits,
            coalesced,
            cache_stores,
            live_cut,
            bad_gateway,
            gateway_timeout,
            unavailable,
            aborted,
            connections_opened,
            connections_reused,
        } = o;
        self.requests += requests;
        self.origin_requests += origin_requests;
        self.cache_hits += cache_hits;
        self.coalesced += coalesced;
        self.cache_stores += cache_stores;
        self.live_cut += live_cut;
        self.bad_gateway += bad_gateway;
        self.gateway_timeout += gateway_timeout;
        self.unavailable += unavailable;
        self.aborted += aborted;
        self.connections_opened += connections_opened;
        self.connections_reused += connections_reused;
    }
}

/// A request ready for an origin.
#[derive(Clone, Debug)]
struct OriginRequest {
    upstream: usize,
    /// The client's request (the cache's rules read it).
    request: Rc<Request>,
    /// Request head, as written on the wire.
    bytes: Rc<Vec<u8>>,
    /// A HEAD request (its response has no body).
    head_only: bool,
    /// Whether it may be sent again on a fresh connection (GET, HEAD).
    idempotent: bool,
    /// How its body is framed (none for most GETs).
    framing: RequestFraming,
}

/// Where a fetch's body goes.
enum Store {
    /// One reader: the bytes it has not read yet, dropped as it reads.
    Private { buf: VecDeque<u8> },
    /// Many readers, each from the start: every byte kept (the response
    /// is cacheable and at most the cache's largest object).
    Shared {
        buf: Vec<u8>,
        lifetime: Duration,
        origin_age: Duration,
    },
    /// A live stream.
    Live(Box<LiveRelay>),
}

/// How far a fetch is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for the response head.
    Head,
    /// Reading the body.
    Body,
    /// The body ended cleanly.
    Done,
    /// The origin failed after the head.
    Failed(String),
}

/// One origin request on one connection.
struct Fetch {
    request: OriginRequest,
    /// Its coalescing key, while other requests may still join it.
    key: Option<String>,
    conn: OriginConn,
    /// The connection came from the pool.
    reused: bool,
    /// It was already sent again once.
    retried: bool,
    /// Some response bytes were consumed.
    answered: bool,
    decoder: ResponseDecoder,
    phase: Phase,
    head: Option<ResponseHead>,
    store: Store,
    /// Body bytes decoded so far.
    total: u64,
    views: Vec<ViewId>,
    /// When the origin must have answered (head), or made progress (body).
    deadline: Instant,
    /// The request body on its way to the origin: `None` when there is
    /// none, or once it was sent whole.
    upload: Option<RequestBodyEncoder>,
    /// The connection's written bytes when the deadline was last set.
    written: u64,
    /// When the request was first sent (the origin's time to answer is
    /// measured from it, retries and connection set-up included).
    sent_at: Instant,
}

impl Fetch {
    /// Body bytes that may be decoded now.
    fn room(&self) -> usize {
        match &self.store {
            Store::Private { buf, .. } => RESPONSE_BUFFER.saturating_sub(buf.len()),
            Store::Shared { .. } | Store::Live(_) => RESPONSE_BUFFER,
        }
    }
}

/// What a view reads.
enum ViewState {
    /// A fetch's body from `offset` (or its head, still awaited).
    Fetch { fetch: u64, offset: u64 },
    /// A live stream.
    Live { fetch: u64, viewer: ViewerId },
    /// A cached response.
    Cached {
        head: ResponseHead,
        body: Rc<[u8]>,
        pos: usize,
    },
    /// No response: a status to answer with.
    Failed(u16),
}

/// One client request.
struct View {
    /// What it asks of its origin (`None` when it failed before that).
    request: Option<OriginRequest>,
    state: ViewState,
}

/// The edge: routes, origin connections, fetches, the cache and the live
/// relays of one server.
pub struct Edge {
    routes: Routes,
    io: OriginIo,
    timeout: Duration,
    live_buffer: usize,
    cache: Cache,
    /// Idle keep-alive connections per upstream, with when they went idle.
    pools: Vec<Vec<(OriginConn, Instant)>>,
    /// Open connections per upstream (idle or in use).
    open: Vec<usize>,
    fetches: BTreeMap<u64, Fetch>,
    /// Fetches other requests may join, by key.
    joinable: HashMap<String, u64>,
    views: BTreeMap<ViewId, View>,
    next_fetch: u64,
    next_view: u64,
    /// Decoded body bytes on their way to a store.
    scratch: Vec<u8>,
    counters: EdgeCounters,
    /// Origins' times to answer (request sent to response head read) not
    /// yet taken by [`Edge::take_head_times`]; at most
    /// [`MAX_HEAD_TIMES`].
    head_times: Vec<Duration>,
}

/// Most origin answer times an edge keeps for its reader: a server's
/// metrics take them every second, so this covers 4096 responses a second.
pub const MAX_HEAD_TIMES: usize = 4096;

impl core::fmt::Debug for Edge {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Edge")
            .field("upstreams", &self.routes.upstreams().len())
            .field("fetches", &self.fetches.len())
            .field("views", &self.views.len())
            .finish_non_exhaustive()
    }
}

impl Edge {
    /// An edge in front of `options.routes`.
    pub fn new(options: EdgeOptions) -> Edge {
        let n = options.routes.upstreams().len();
        Edge {
            routes: options.routes,
            io: OriginIo::new(),
            timeout: options.upstream_timeout,
            live_buffer: options.live_buffer,
            cache: Cache::new(options.cache_size),
            pools: vec![Vec::new(); n],
            open: vec![0; n],
            fetches: BTreeMap::new(),
            joinable: HashMap::new(),
            views: BTreeMap::new(),
            next_fetch: 0,
            next_view: 0,
            scratch: Vec::new(),
            counters: EdgeCounters::default(),
            head_times: Vec::new(),
        }
    }

    /// The origins' times to answer since the last call: from sending a
    /// request to reading its response head (at most [`MAX_HEAD_TIMES`];
    /// beyond that they are not kept).
    pub fn take_head_times(&mut self) -> Vec<Duration> {
        std::mem::take(&mut self.head_times)
    }

    /// The routing table.
    pub fn routes(&self) -> &Routes {
        &self.routes
    }

    /// The origin connections, for the driver.
    pub fn io_mut(&mut self) -> &mut OriginIo {
        &mut self.io
    }

    /// What the edge has done so far.
    pub fn counters(&self) -> EdgeCounters {
        EdgeCounters {
            cache_hits: self.cache.hits(),
            cache_stores: self.cache.stores(),
            ..self.counters
        }
    }

    /// The cache (its counters).
    pub fn cache(&self) -> &Cache {
        &self.cache
    }

    /// Client requests being answered.
    pub fn views(&self) -> usize {
        self.views.len()
    }

    /// Starts answering `request` from upstream `upstream` (an index into
    /// the routes) for a client at `client` that spoke `protocol`.
    pub fn open(
        &mut self,
        now: Instant,
        upstream: usize,
        request: &Request,
        client: IpAddr,
        protocol: Protocol,
    ) -> ViewId {
        self.counters.requests += 1;
        let id = ViewId(self.next_view);
        self.next_view += 1;
        let Some(origin) = self.routes.upstreams().get(upstream) else {
            return self.insert_failed(id, 502);
        };
        let mut fields = headers::origin_request_fields(
            request,
            client,
            &origin.authority,
            headers::received_protocol(protocol),
        );
        let framing = match request_framing(request) {
            Ok(framing) => framing,
            Err(()) => return self.insert_failed(id, 400),
        };
        fields.extend(framing.field());
        let mut bytes = Vec::new();
        if let Err(e) =
            http1::write_request_head(&mut bytes, request.method.as_str(), &request.path, &fields)
        {
            tracing::debug!(error = %e, "request refused before the origin");
            return self.insert_failed(id, 400);
        }
        let origin_request = OriginRequest {
            upstream,
            request: Rc::new(request.clone()),
            bytes: Rc::new(bytes),
            head_only: request.method == Method::Head,
            // A request with a body is never sent twice (its body is gone).
            idempotent: matches!(request.method, Method::Get | Method::Head)
                && framing == RequestFraming::None,
            framing,
        };
        let key = (request.method == Method::Get && cache::request_may_use_cache(request))
            .then(|| format!("{upstream} {}", request.path));
        let shared = key.as_deref().and_then(|k| self.answer_shared(now, k, id));
        let state = match shared {
            Some(state) => state,
            None => match self.start(now, &origin_request, key, id) {
                Ok(fetch) => ViewState::Fetch { fetch, offset: 0 },
                Err(status) => self.failed_state(status),
            },
        };
        self.views.insert(
            id,
            View {
                request: Some(origin_request),
                state,
            },
        );
        id
    }

    /// What answers view `view` of the URL `key` without a request of its
    /// own: a fresh cache entry, or another request's origin response that
    /// can still be shared. `None` when it needs its own.
    fn answer_shared(&mut self, now: Instant, key: &str, view: ViewId) -> Option<ViewState> {
        if let Some(hit) = self.cache.get(key, now) {
            return Some(ViewState::Cached {
                head: hit.head,
                body: hit.body,
                pos: 0,
            });
        }
        let fetch = *self.joinable.get(key)?;
        let state = self.join(fetch, view)?;
        self.counters.coalesced += 1;
        Some(state)
    }

    /// A view that failed before reaching an origin.
    fn insert_failed(&mut self, id: ViewId, status: u16) -> ViewId {
        let state = self.failed_state(status);
        self.views.insert(
            id,
            View {
                request: None,
                state,
            },
        );
        id
    }

    /// Counts a failure status and makes the view state for it.
    fn failed_state(&mut self, status: u16) -> ViewState {
        match status {
            502 => self.counters.bad_gateway += 1,
            503 => self.counters.unavailable += 1,
            504 => self.counters.gateway_timeout += 1,
            _ => {}
        }
        ViewState::Failed(status)
    }

    /// View `view` joins fetch `fetch` if it can still be shared.
    fn join(&mut self, fetch: u64, view: ViewId) -> Option<ViewState> {
        let f = self.fetches.get_mut(&fetch)?;
        let state = match (&f.phase, &mut f.store) {
            (Phase::Head, _) | (Phase::Body | Phase::Done, Store::Shared { .. }) => {
                ViewState::Fetch { fetch, offset: 0 }
            }
            (Phase::Body, Store::Live(relay)) => ViewState::Live {
                fetch,
                viewer: relay.join(),
            },
            _ => return None,
        };
        f.views.push(view);
        Some(state)
    }

    /// Sends `request` to its origin on a pooled or new connection, as a
    /// new fetch read by `view`. `Err(status)` when no connection can be
    /// had.
    fn start(
        &mut self,
        now: Instant,
        request: &OriginRequest,
        key: Option<String>,
        view: ViewId,
    ) -> Result<u64, u16> {
        let (conn, reused) = self.connection(request.upstream)?;
        self.counters.origin_requests += 1;
        self.io.send(conn, &request.bytes);
        let id = self.next_fetch;
        self.next_fetch += 1;
        if let Some(k) = &key {
            self.joinable.insert(k.clone(), id);
        }
        self.fetches.insert(
            id,
            Fetch {
                request: request.clone(),
                key,
                conn,
                reused,
                retried: false,
                answered: false,
                decoder: ResponseDecoder::new(request.head_only),
                phase: Phase::Head,
                head: None,
                store: Store::Private {
                    buf: VecDeque::new(),
                },
                total: 0,
                views: vec![view],
                deadline: now + self.timeout,
                upload: (request.framing != RequestFraming::None)
                    .then(|| RequestBodyEncoder::new(request.framing)),
                written: self.io.written_total(conn),
                sent_at: now,
            },
        );
        Ok(id)
    }

    /// An idle pooled connection to `upstream`, or a new one.
    fn connection(&mut self, upstream: usize) -> Result<(OriginConn, bool), u16> {
        let pool = self.pools.get_mut(upstream).ok_or(502u16)?;
        while let Some((conn, _)) = pool.pop() {
            if self.io.state(conn) == Some(&LinkState::Open) && self.io.input(conn).is_empty() {
                self.counters.connections_reused += 1;
                return Ok((conn, true));
            }
            self.io.close(conn);
            if let Some(n) = self.open.get_mut(upstream) {
                *n = n.saturating_sub(1);
            }
        }
        let open = self.open.get_mut(upstream).ok_or(502u16)?;
        if *open >= MAX_CONNECTIONS_PER_UPSTREAM {
            return Err(503);
        }
        *open += 1;
        let addr = self.routes.upstreams().get(upstream).ok_or(502u16)?.addr;
        self.counters.connections_opened += 1;
        Ok((self.io.connect(addr), false))
    }

    /// Closes `conn` of `upstream` for good.
    fn drop_connection(&mut self, upstream: usize, conn: OriginConn) {
        self.io.close(conn);
        if let Some(n) = self.open.get_mut(upstream) {
            *n = n.saturating_sub(1);
        }
    }

    /// The head of `view`'s response.
    pub fn head(&self, view: ViewId) -> HeadPoll {
        let Some(v) = self.views.get(&view) else {
            return HeadPoll::Failed(502);
        };
        match &v.state {
            ViewState::Fetch { fetch, .. } | ViewState::Live { fetch, .. } => {
                match self.fetches.get(fetch).and_then(|f| f.head.clone()) {
                    Some(head) => HeadPoll::Ready(head),
                    None => HeadPoll::Pending,
                }
            }
            ViewState::Cached { head, .. } => HeadPoll::Ready(head.clone()),
            ViewState::Failed(status) => HeadPoll::Failed(*status),
        }
    }

    /// Reads the next bytes of `view`'s body into `buf`: `Err` when the
    /// response cannot be completed (the server resets the stream).
    pub fn read(&mut self, view: ViewId, buf: &mut [u8]) -> Result<BodyChunk, String> {
        let Some(v) = self.views.get_mut(&view) else {
            return Err("unknown view".into());
        };
        match &mut v.state {
            ViewState::Failed(_) => Ok(BodyChunk::End),
            ViewState::Cached { body, pos, .. } => {
                let rest = body.get(*pos..).unwrap_or_default();
                if rest.is_empty() {
                    return Ok(BodyChunk::End);
                }
                let n = rest.len().min(buf.len());
                copy_into(buf, rest, n);
                *pos += n;
                Ok(BodyChunk::Data(n))
            }
            ViewState::Live { fetch, viewer } => {
                let Some(Fetch {
                    store: Store::Live(relay),
                    ..
                }) = self.fetches.get_mut(fetch)
                else {
                    return Err("the live stream is gone".into());
                };
                match relay.read(*viewer, buf) {
                    ViewerRead::Data(n) => Ok(BodyChunk::Data(n)),
                    ViewerRead::Wait => Ok(BodyChunk::Wait(None)),
                    ViewerRead::End => Ok(BodyChunk::End),
                    ViewerRead::Cut => {
                        self.counters.live_cut += 1;
                        Err("fell too far behind the live stream".into())
                    }
                    ViewerRead::Failed => Err("the live stream failed".into()),
                }
            }
            ViewState::Fetch { fetch, offset } => {
                let Some(f) = self.fetches.get_mut(fetch) else {
                    return Err("the origin response is gone".into());
                };
                let n = match &mut f.store {
                    Store::Private { buf: body } => {
                        let n = body.len().min(buf.len());
                        let (front, back) = body.as_slices();
                        let first = front.len().min(n);
                        copy_into(buf, front, first);
                        if let Some(rest) = buf.get_mut(first..) {
                            copy_into(rest, back, n - first);
                        }
                        body.drain(..n);
                        n
                    }
                    Store::Shared { buf: body, .. } => {
                        let from = usize::try_from(*offset).unwrap_or(usize::MAX);
                        let rest = body.get(from..).unwrap_or_default();
                        let n = rest.len().min(buf.len());
                        copy_into(buf, rest, n);
                        n
                    }
                    Store::Live(_) => return Err("a live stream read as a file".into()),
                };
                *offset += n as u64;
                if n > 0 {
                    return Ok(BodyChunk::Data(n));
                }
                match &f.phase {
                    Phase::Done if *offset >= f.total => Ok(BodyChunk::End),
                    Phase::Failed(reason) => Err(reason.clone()),
                    _ => Ok(BodyChunk::Wait(None)),
                }
            }
        }
    }

    /// Whether `view`'s request body is still to be sent: the server
    /// reads it from the client ([`Edge::write_request_body`],
    /// [`Edge::end_request_body`]) while this holds.
    pub fn wants_request_body(&self, view: ViewId) -> bool {
        self.upload_fetch(view).is_some()
    }

    /// How many request body bytes `view`'s origin connection takes now:
    /// at most [`UPLOAD_BUFFER`] bytes wait to be written, so a slow
    /// origin slows the client's upload (its flow control).
    pub fn request_body_room(&self, view: ViewId) -> usize {
        match self.upload_fetch(view).and_then(|id| self.fetches.get(&id)) {
            Some(f) => UPLOAD_BUFFER.saturating_sub(self.io.unsent(f.conn)),
            None => 0,
        }
    }

    /// Forwards request body bytes of `view` to its origin. `Err` when the
    /// body cannot be framed as its head said (the server resets the
    /// client's stream; the origin connection is closed).
    pub fn write_request_body(&mut self, view: ViewId, data: &[u8]) -> Result<(), String> {
        let Some(id) = self.upload_fetch(view) else {
            // The response ended first (an early answer): the rest of the
            // body is not needed.
            return Ok(());
        };
        let Some(f) = self.fetches.get_mut(&id) else {
            return Ok(());
        };
        let conn = f.conn;
        let Some(encoder) = f.upload.as_mut() else {
            return Ok(());
        };
        self.scratch.clear();
        let written = encoder.write(data, &mut self.scratch);
        self.io.send(conn, &self.scratch);
        self.scratch.clear();
        written.map_err(|e| self.upload_failed(id, e.to_string()))
    }

    /// The client's request body ended: the framing is completed.
    pub fn end_request_body(&mut self, view: ViewId) -> Result<(), String> {
        let Some(id) = self.upload_fetch(view) else {
            return Ok(());
        };
        let Some(f) = self.fetches.get_mut(&id) else {
            return Ok(());
        };
        let conn = f.conn;
        let Some(mut encoder) = f.upload.take() else {
            return Ok(());
        };
        self.scratch.clear();
        let finished = encoder.finish(&mut self.scratch);
        self.io.send(conn, &self.scratch);
        self.scratch.clear();
        finished.map_err(|e| self.upload_failed(id, e.to_string()))
    }

    /// The fetch whose request body `view` still sends.
    fn upload_fetch(&self, view: ViewId) -> Option<u64> {
        let ViewState::Fetch { fetch, .. } = self.views.get(&view)?.state else {
            return None;
        };
        let f = self.fetches.get(&fetch)?;
        (f.upload.is_some() && matches!(f.phase, Phase::Head | Phase::Body)).then_some(fetch)
    }

    /// The request body of fetch `id` could not be sent: the exchange
    /// fails (as an origin failure: 502 before the head, a reset after).
    fn upload_failed(&mut self, id: u64, reason: String) -> String {
        let reason = format!("request body: {reason}");
        if let Some(f) = self.fetches.get_mut(&id) {
            f.upload = None;
        }
        self.on_error(id, 400, reason.clone());
        reason
    }

    /// The client's exchange is over (complete, or the client went away):
    /// forget the view, and abandon its origin request if nobody else
    /// reads it and it is not complete.
    pub fn close_view(&mut self, view: ViewId) {
        let Some(v) = self.views.remove(&view) else {
            return;
        };
        let fetch = match v.state {
            ViewState::Fetch { fetch, .. } => fetch,
            ViewState::Live { fetch, viewer } => {
                if let Some(Fetch {
                    store: Store::Live(relay),
                    ..
                }) = self.fetches.get_mut(&fetch)
                {
                    relay.leave(viewer);
                }
                fetch
            }
            ViewState::Cached { .. } | ViewState::Failed(_) => return,
        };
        let Some(f) = self.fetches.get_mut(&fetch) else {
            return;
        };
        f.views.retain(|&w| w != view);
        if f.views.is_empty() {
            self.abandon(fetch);
        }
    }

    /// Nobody reads fetch `id` any more: forget it, closing its connection
    /// unless the response completed (then it was already released).
    fn abandon(&mut self, id: u64) {
        let Some(f) = self.fetches.remove(&id) else {
            return;
        };
        self.unjoin(id, f.key.as_deref());
        if matches!(f.phase, Phase::Head | Phase::Body) {
            self.drop_connection(f.request.upstream, f.conn);
        }
    }

    /// Fetch `id` can no longer be joined under `key`.
    fn unjoin(&mut self, id: u64, key: Option<&str>) {
        if let Some(k) = key {
            if self.joinable.get(k) == Some(&id) {
                self.joinable.remove(k);
            }
        }
    }

    /// Processes what the origins sent, timeouts and idle connections.
    /// Call before reading views.
    pub fn drive(&mut self, now: Instant) {
        let ids: Vec<u64> = self.fetches.keys().copied().collect();
        for id in ids {
            self.advance(now, id);
        }
        self.expire_idle(now);
    }

    /// The earliest time the edge must be driven without input: a fetch's
    /// deadline or an idle connection's expiry.
    pub fn poll_timeout(&self) -> Option<Instant> {
        let fetches = self
            .fetches
            .values()
            .filter(|f| matches!(f.phase, Phase::Head | Phase::Body))
            .map(|f| f.deadline);
        let idle = self
            .pools
            .iter()
            .flat_map(|p| p.iter())
            .map(|&(_, since)| since + POOL_IDLE);
        fetches.chain(idle).min()
    }

    /// Closes pooled connections idle for [`POOL_IDLE`] or closed by
    /// their origin.
    fn expire_idle(&mut self, now: Instant) {
        for upstream in 0..self.pools.len() {
            let Some(pool) = self.pools.get_mut(upstream) else {
                continue;
            };
            let mut gone = Vec::new();
            pool.retain(|&(conn, since)| {
                let alive = now < since + POOL_IDLE
                    && self.io.state(conn) == Some(&LinkState::Open)
                    && self.io.input(conn).is_empty();
                if !alive {
                    gone.push(conn);
                }
                alive
            });
            for conn in gone {
                self.drop_connection(upstream, conn);
            }
        }
    }

    /// Moves fetch `id` on: decodes its input, handles its connection's
    /// end and its deadline.
    fn advance(&mut self, now: Instant, id: u64) {
        loop {
            let Some(f) = self.fetches.get_mut(&id) else {
                return;
            };
            if !matches!(f.phase, Phase::Head | Phase::Body) {
                return;
            }
            let room = f.room();
            self.scratch.clear();
            let input = self.io.input(f.conn);
            let result = f.decoder.decode(input, &mut self.scratch, room);
            let conn = f.conn;
            match result {
                Ok((used, decoded)) => {
                    if used > 0 {
                        f.answered = true;
                        self.io.consume(conn, used);
                        if f.phase == Phase::Body {
                            f.deadline = now + self.timeout;
                        }
                    }
                    let stalled = matches!(decoded, Decoded::NeedMore | Decoded::Blocked)
                        || (used == 0 && decoded == Decoded::Body);
                    match decoded {
                        Decoded::NeedMore | Decoded::Blocked => {}
                        Decoded::Head(head, framing) => self.on_head(now, id, head, framing),
                        Decoded::Body => self.on_body(id),
                        Decoded::Done { keep_alive } => {
                            self.on_body(id);
                            self.on_done(now, id, keep_alive);
                            return;
                        }
                    }
                    if stalled {
                        // Waiting on the client, not the origin: the stall
                        // clock restarts.
                        if let Some(f) = self.fetches.get_mut(&id) {
                            if f.phase == Phase::Body && f.room() == 0 {
                                f.deadline = now + self.timeout;
                            }
                        }
                        break;
                    }
                }
                Err(e) => {
                    self.on_error(id, 502, format!("malformed response: {e}"));
                    return;
                }
            }
        }
        self.check_link(now, id);
    }

    /// After decoding: the connection's end or failure, and the deadline.
    fn check_link(&mut self, now: Instant, id: u64) {
        let Some(f) = self.fetches.get_mut(&id) else {
            return;
        };
        // The clock of an answer starts when the request is sent whole: an
        // origin taking our request body is making progress, and one
        // waiting for the client's upload is not late.
        let written = self.io.written_total(f.conn);
        let awaiting_client = f.upload.is_some() && self.io.unsent(f.conn) == 0;
        if written != f.written || (f.phase == Phase::Head && awaiting_client) {
            f.written = written;
            f.deadline = now + self.timeout;
        }
        let state = self.io.state(f.conn).cloned();
        let drained = self.io.input(f.conn).is_empty();
        match state {
            Some(LinkState::Closed) if drained => {
                if !f.answered && self.retry(now, id) {
                    return;
                }
                let Some(f) = self.fetches.get_mut(&id) else {
                    return;
                };
                match f.decoder.finish() {
                    Ok(Decoded::Done { .. }) => self.on_done(now, id, false),
                    Ok(_) | Err(_) => {
                        self.on_error(id, 502, "the origin closed the connection early".into())
                    }
                }
            }
            Some(LinkState::Failed(reason)) => {
                if !f.answered && self.retry(now, id) {
                    return;
                }
                self.on_error(id, 502, format!("origin connection failed: {reason}"));
            }
            _ if now >= f.deadline => {
                let why = if f.phase == Phase::Head {
                    "the origin did not answer in time"
                } else {
                    "the origin stalled"
                };
                self.on_error(id, 504, why.into());
            }
            _ => {}
        }
    }

    /// A request on a reused connection found it closed before any answer:
    /// send it again, once, on a fresh connection (the origin may have
    /// closed the idle connection as we sent on it). True if it was.
    fn retry(&mut self, now: Instant, id: u64) -> bool {
        let Some(f) = self.fetches.get(&id) else {
            return false;
        };
        if !f.reused || f.retried || !f.request.idempotent {
            return false;
        }
        let (upstream, old) = (f.request.upstream, f.conn);
        self.drop_connection(upstream, old);
        let Ok((conn, reused)) = self.connection(upstream) else {
            return false;
        };
        let Some(f) = self.fetches.get_mut(&id) else {
            return false;
        };
        self.counters.origin_requests += 1;
        self.io.send(conn, &f.request.bytes);
        f.conn = conn;
        f.reused = reused;
        f.retried = true;
        f.decoder = ResponseDecoder::new(f.request.head_only);
        f.deadline = now + self.timeout;
        true
    }

    /// The origin's head arrived: decide how the body is stored and who
    /// reads it.
    fn on_head(&mut self, now: Instant, id: u64, head: ResponseHead, framing: Framing) {
        let Some(f) = self.fetches.get_mut(&id) else {
            return;
        };
        let mut client_head = ResponseHead::new(head.status);
        client_head.headers = headers::client_response_fields(&head, &framing);
        if f.request.head_only {
            // A HEAD response keeps the length the GET would have.
            if let Some(len) = head.header("content-length") {
                if client_head.header("content-length").is_none() {
                    client_head = client_head.with("content-length", len);
                }
            }
        }
        f.phase = Phase::Body;
        f.deadline = now + self.timeout;
        if self.head_times.len() < MAX_HEAD_TIMES {
            self.head_times
                .push(now.saturating_duration_since(f.sent_at));
        }
        let unbounded = matches!(framing, Framing::Chunked | Framing::Close);
        let live = (head.status == 200 && unbounded)
            .then(|| {
                head.header("content-type")
                    .and_then(LiveFormat::from_content_type)
            })
            .flatten();
        let max_object = self.cache.max_object();
        let shared = match framing {
            Framing::Length(n) if n <= max_object && f.key.is_some() => {
                cache::freshness_lifetime(&f.request.request, &head)
                    .map(|lifetime| (lifetime, cache::origin_age(&head), n))
            }
            _ => None,
        };
        f.head = Some(client_head);
        if let (Some(format), Some(_)) = (live, &f.key) {
            let mut relay = LiveRelay::new(format, self.live_buffer);
            let views = f.views.clone();
            let viewers: Vec<(ViewId, ViewerId)> =
                views.iter().map(|&v| (v, relay.join())).collect();
            f.store = Store::Live(Box::new(relay));
            for (v, viewer) in viewers {
                if let Some(view) = self.views.get_mut(&v) {
                    view.state = ViewState::Live { fetch: id, viewer };
                }
            }
            return;
        }
        if let Some((lifetime, origin_age, len)) = shared {
            f.store = Store::Shared {
                buf: Vec::with_capacity(usize::try_from(len).unwrap_or(0)),
                lifetime,
                origin_age,
            };
            return;
        }
        // A private response: the first view reads it; the others that
        // waited on it send their own requests.
        let key = f.key.take();
        let others: Vec<ViewId> = f.views.drain(1..).collect();
        self.unjoin(id, key.as_deref());
        for v in others {
            let Some(request) = self.views.get(&v).and_then(|view| view.request.clone()) else {
                continue;
            };
            let state = match self.start(now, &request, None, v) {
                Ok(fetch) => ViewState::Fetch { fetch, offset: 0 },
                Err(status) => self.failed_state(status),
            };
            if let Some(view) = self.views.get_mut(&v) {
                view.state = state;
            }
        }
    }

    /// Moves the decoded bytes in the scratch buffer into fetch `id`'s store.
    fn on_body(&mut self, id: u64) {
        let Some(f) = self.fetches.get_mut(&id) else {
            return;
        };
        if self.scratch.is_empty() {
            return;
        }
        f.total += self.scratch.len() as u64;
        match &mut f.store {
            Store::Private { buf, .. } => buf.extend(self.scratch.iter()),
            Store::Shared { buf, .. } => buf.extend_from_slice(&self.scratch),
            Store::Live(relay) => relay.push(&self.scratch),
        }
        self.scratch.clear();
    }

    /// The response is complete: release the connection, store what is
    /// cacheable.
    fn on_done(&mut self, now: Instant, id: u64, keep_alive: bool) {
        let Some(f) = self.fetches.get_mut(&id) else {
            return;
        };
        f.phase = Phase::Done;
        let (upstream, conn) = (f.request.upstream, f.conn);
        let key = f.key.take();
        match &mut f.store {
            Store::Shared {
                buf,
                lifetime,
                origin_age,
            } => {
                // The body is kept once: the cache's entry and the readers
                // still on it share it, and the fetch lets it go.
                let body: Rc<[u8]> = Rc::from(std::mem::take(buf));
                if let (Some(k), Some(head)) = (&key, &f.head) {
                    self.cache.insert(
                        k.clone(),
                        head.clone(),
                        Rc::clone(&body),
                        now,
                        *lifetime,
                        *origin_age,
                    );
                }
                let head = f.head.clone().unwrap_or_else(|| ResponseHead::new(200));
                for v in std::mem::take(&mut f.views) {
                    let Some(view) = self.views.get_mut(&v) else {
                        continue;
                    };
                    if let ViewState::Fetch { offset, .. } = view.state {
                        view.state = ViewState::Cached {
                            head: head.clone(),
                            body: Rc::clone(&body),
                            pos: usize::try_from(offset).unwrap_or(usize::MAX),
                        };
                    }
                }
            }
            Store::Live(relay) => relay.finish(true),
            Store::Private { .. } => {}
        }
        self.unjoin(id, key.as_deref());
        let upload_done = self.fetches.get(&id).is_some_and(|f| f.upload.is_none());
        let reusable = keep_alive
            && upload_done
            && self.io.input(conn).is_empty()
            && self.io.state(conn) == Some(&LinkState::Open);
        match self.pools.get_mut(upstream) {
            Some(pool) if reusable && pool.len() < MAX_IDLE_PER_UPSTREAM => {
                pool.push((conn, now));
            }
            _ => self.drop_connection(upstream, conn),
        }
        if self.fetches.get(&id).is_some_and(|f| f.views.is_empty()) {
            self.fetches.remove(&id);
        }
    }

    /// The origin failed: before the head, every view gets `status`;
    /// after it, their reads fail and the clients' streams are reset.
    fn on_error(&mut self, id: u64, status: u16, reason: String) {
        let Some(f) = self.fetches.get_mut(&id) else {
            return;
        };
        let upstream = f.request.upstream;
        let origin = self
            .routes
            .upstreams()
            .get(upstream)
            .map(|u| u.authority.clone())
            .unwrap_or_default();
        tracing::warn!(origin = %origin, status, "{reason}");
        let (conn, key) = (f.conn, f.key.take());
        if f.phase == Phase::Head {
            let Some(f) = self.fetches.remove(&id) else {
                return;
            };
            for v in f.views {
                let state = self.failed_state(status);
                if let Some(view) = self.views.get_mut(&v) {
                    view.state = state;
                }
            }
        } else {
            self.counters.aborted += f.views.len() as u64;
            if let Store::Live(relay) = &mut f.store {
                relay.finish(false);
            }
            f.phase = Phase::Failed(reason);
            if f.views.is_empty() {
                self.fetches.remove(&id);
            }
        }
        self.unjoin(id, key.as_deref());
        self.drop_connection(upstream, conn);
    }
}

/// How a request's body goes to the origin: as long as its
/// `content-length` says (`content-length: 0` included, which a POST
/// must send); chunked when it has none and its method carries a body
/// (POST, PUT, PATCH and unknown methods: an HTTP/3 request may stream a
/// body of unknown length); none for the methods that carry none (GET,
/// HEAD, DELETE, OPTIONS, TRACE without a length: a body such a client
/// sends anyway has no meaning and is not forwarded). `Err` for an
/// invalid length.
fn request_framing(request: &Request) -> Result<RequestFraming, ()> {
    let bodiless = matches!(
        request.method.as_str(),
        "GET" | "HEAD" | "DELETE" | "OPTIONS" | "TRACE"
    );
    match http1::content_length(&request.headers) {
        Err(_) => Err(()),
        Ok(Some(0)) if bodiless => Ok(RequestFraming::None),
        Ok(Some(n)) => Ok(RequestFraming::Length(n)),
        Ok(None) if bodiless => Ok(RequestFraming::None),
        Ok(None) => Ok(RequestFraming::Chunked),
    }
}

/// Copies the first `n` bytes of `src` to `dst`.
fn copy_into(dst: &mut [u8], src: &[u8], n: usize) {
    if let (Some(d), Some(s)) = (dst.get_mut(..n), src.get(..n)) {
        d.copy_from_slice(s);
    }
}
