//! The edge end to end, in memory: an HTTP/3 client session over a real
//! QUIC connection pair (`transport::test_pair`) to an [`HttpServer`] with
//! an [`Edge`], whose origin connections the test serves itself, playing
//! the driver and a scripted origin. Virtual time, no sockets: every
//! failure rule (502, 504, resets, a client that leaves) and every sharing
//! rule (coalescing, the cache, live fan-out) is checked exactly.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use transport::crypto::{self, ServerVerification};
use transport::test_pair::Pair;
use transport::{ClientConfig, ServerConfig, TransportConfig};
use wire::time::{Duration, Instant};
use wire::StreamId;

use super::origin_io::{OriginCommand, OriginConn, MAX_INPUT};
use super::proxy::RESPONSE_BUFFER;
use super::{Edge, EdgeOptions, Routes, Upstream};
use crate::app::App;
use crate::content::Mounts;
use crate::h3::tests::{read_downloads, Download};
use crate::h3::H3Client;
use crate::http::{ClientSession, Field, Method, Request, ResponseHead};
use crate::server::{HttpServer, ServerOptions};

/// The origin's address as the edge knows it.
fn origin_addr() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 8080))
}

/// An edge in front of one origin at `/`, with no cache, a 2 s upstream
/// timeout and a 256 KiB live buffer.
fn one_origin() -> EdgeOptions {
    let routes = Routes::new(vec![Upstream {
        prefix: "/".into(),
        authority: "origin:8080".into(),
        addr: origin_addr(),
    }])
    .expect("routes");
    let mut options = EdgeOptions::new(routes);
    options.upstream_timeout = Duration::from_secs(2);
    options.live_buffer = 256 * 1024;
    options
}

/// One origin connection as the scripted origin sees it.
#[derive(Debug, Default)]
pub struct OriginSide {
    /// What the edge wrote.
    pub received: Vec<u8>,
    /// Bytes the origin sends, not yet taken by the edge (fed as its read
    /// room allows).
    pub pending: Vec<u8>,
    /// The origin closes after `pending`.
    pub close_after: bool,
    /// The edge closed the connection.
    pub closed_by_edge: bool,
    /// Bytes the edge took.
    pub taken: usize,
    /// End of stream was reported.
    pub eof_reported: bool,
}

/// An HTTP/3 client, an edge server and a scripted origin.
pub struct EdgeHarness {
    pub pair: Pair,
    pub server: HttpServer,
    pub client: H3Client,
    pub downloads: BTreeMap<StreamId, Download>,
    /// Origin connections by name, in the order the edge asked for them.
    pub origin: BTreeMap<OriginConn, OriginSide>,
    /// The origin refuses connections.
    pub refuse: bool,
    /// The origin reads nothing the edge writes.
    pub origin_deaf: bool,
    /// Request bodies the client is still sending: bytes and how many went.
    pub uploads: BTreeMap<StreamId, (Vec<u8>, usize)>,
    buf: Vec<u8>,
}

impl EdgeHarness {
    /// A connected client and an edge in front of one origin at `/`, with
    /// a cache of `cache_size` bytes and a 2 s upstream timeout.
    pub fn new(cache_size: u64) -> EdgeHarness {
        let mut options = one_origin();
        options.cache_size = cache_size;
        EdgeHarness::with_options(options)
    }

    /// Like [`EdgeHarness::new`] with `options` and a client with the
    /// default transport settings.
    pub fn with_options(options: EdgeOptions) -> EdgeHarness {
        EdgeHarness::build(options, TransportConfig::default())
    }

    /// Like [`EdgeHarness::new`] (no cache), with a client whose receive
    /// windows are `window` bytes.
    pub fn with_client_window(window: u64) -> EdgeHarness {
        let mut transport = TransportConfig::default();
        transport.streams.receive_window = window;
        transport.streams.stream_receive_window = window;
        EdgeHarness::build(one_origin(), transport)
    }

    /// A connected client with `client_transport` and an edge with
    /// `options`.
    fn build(options: EdgeOptions, client_transport: TransportConfig) -> EdgeHarness {
        let (chain, key) =
            crypto::self_signed_from_seed(&["localhost"], [3; 32]).expect("certificate");
        let server = ServerConfig {
            tls: crypto::server_config(chain, key, &[b"h3"]).expect("server TLS"),
            transport: Arc::new(TransportConfig::default()),
            preferred_address: Default::default(),
        };
        let client = ClientConfig {
            tls: crypto::client_config(ServerVerification::Insecure, &[b"h3"]).expect("client TLS"),
            transport: Arc::new(client_transport),
            server_name: "localhost".into(),
        };
        let mut pair = Pair::with_configs(server, &client);
        pair.connect();
        let mut app = HttpServer::new(Box::new(Mounts::new()), ServerOptions::default())
            .with_edge(Edge::new(options));
        let now = pair.now;
        let h = pair.server_conn.expect("a server connection");
        app.on_connection(now, h, pair.server());
        let mut client = H3Client::new();
        client.on_connected(pair.client());
        EdgeHarness {
            pair,
            server: app,
            client,
            downloads: BTreeMap::new(),
            origin: BTreeMap::new(),
            refuse: false,
            origin_deaf: false,
            uploads: BTreeMap::new(),
            buf: vec![0; 64 * 1024],
        }
    }

    /// Sends a GET of `path` (with an authority, as HTTP/3 requires).
    pub fn get(&mut self, path: &str) -> StreamId {
        self.request(Request {
            authority: Some("edge.example:443".into()),
            ..Request::get(path)
        })
    }

    /// Sends `request`.
    pub fn request(&mut self, request: Request) -> StreamId {
        let conn = self.pair.client();
        let id = self
            .client
            .send_request(conn, &request)
            .expect("request sent");
        self.downloads.insert(id, Download::default());
        id
    }

    /// Sends `request` with `body` (written as flow control allows).
    pub fn upload(&mut self, request: Request, body: Vec<u8>) -> StreamId {
        let conn = self.pair.client();
        let id = self
            .client
            .open_request(conn, &request)
            .expect("request sent");
        self.downloads.insert(id, Download::default());
        self.uploads.insert(id, (body, 0));
        id
    }

    /// Sends a GET of `path` and runs until the origin has received it;
    /// returns the request stream and the origin connection it came on.
    pub fn get_at_origin(&mut self, path: &str) -> (StreamId, OriginConn) {
        let id = self.get(path);
        let line = format!("GET {path} HTTP/1.1\r\n");
        let arrived = self.run(Duration::from_secs(1), |h| {
            h.origin
                .values()
                .any(|o| String::from_utf8_lossy(&o.received).contains(&line))
        });
        assert!(arrived, "the request for {path} did not reach the origin");
        let conn = self
            .origin
            .iter()
            .find(|(_, o)| String::from_utf8_lossy(&o.received).contains(&line))
            .map(|(&c, _)| c)
            .expect("the connection it came on");
        (id, conn)
    }

    /// The edge's counters.
    pub fn counters(&self) -> super::EdgeCounters {
        self.server.edge().expect("an edge").counters()
    }

    /// The origin connection the edge opened `n`-th (0-based).
    pub fn conn(&self, n: usize) -> OriginConn {
        *self
            .origin
            .keys()
            .nth(n)
            .expect("that many origin connections")
    }

    /// The origin queues `bytes` on `conn`.
    pub fn respond(&mut self, conn: OriginConn, bytes: &[u8]) {
        self.origin
            .get_mut(&conn)
            .expect("an origin connection")
            .pending
            .extend_from_slice(bytes);
    }

    /// The origin closes `conn` after what it queued.
    pub fn origin_close(&mut self, conn: OriginConn) {
        self.origin
            .get_mut(&conn)
            .expect("an origin connection")
            .close_after = true;
    }

    /// Requests the origin received on `conn` (request heads), as text.
    pub fn received(&self, conn: OriginConn) -> String {
        String::from_utf8_lossy(&self.origin[&conn].received).into_owned()
    }

    /// One turn: the server application, the origin, the client.
    pub fn turn(&mut self) {
        let now = self.pair.now;
        let h = self.pair.server_conn.expect("a server connection");
        if let Some(conn) = self.pair.server.connection_mut(h) {
            while let Some(event) = conn.poll_event() {
                self.server.on_event(now, h, conn, &event);
            }
        }
        self.server.drive(now, &mut self.pair.server);
        self.serve_origin();
        // Drive again at once when the origin had news, as the driver does.
        if self.server.origin_io().is_some_and(|io| io.take_activity()) {
            self.server.drive(now, &mut self.pair.server);
            self.serve_origin();
        }
        self.read_client(now);
    }

    /// Plays the driver and the origin.
    fn serve_origin(&mut self) {
        let Some(io) = self.server.origin_io() else {
            return;
        };
        while let Some(command) = io.poll_command() {
            match command {
                OriginCommand::Connect { conn, addr } => {
                    assert_eq!(addr, origin_addr());
                    self.origin.insert(conn, OriginSide::default());
                    if self.refuse {
                        io.failed(conn, "connection refused".into());
                    } else {
                        io.connected(conn);
                    }
                }
                OriginCommand::Close { conn } => {
                    if let Some(side) = self.origin.get_mut(&conn) {
                        side.closed_by_edge = true;
                    }
                }
            }
        }
        for (&conn, side) in self.origin.iter_mut() {
            if side.closed_by_edge {
                continue;
            }
            if !self.origin_deaf {
                let out = io.outgoing(conn).to_vec();
                side.received.extend_from_slice(&out);
                io.wrote(conn, out.len());
            }
            let room = io.read_room(conn).min(side.pending.len());
            if room > 0 {
                io.received(conn, &side.pending[..room]);
                side.pending.drain(..room);
                side.taken += room;
            }
            if side.close_after && side.pending.is_empty() && !side.eof_reported {
                side.eof_reported = true;
                io.closed(conn);
            }
        }
    }

    fn read_client(&mut self, now: Instant) {
        let conn = self.pair.client();
        for (&id, (body, sent)) in self.uploads.iter_mut() {
            while *sent < body.len() {
                match self.client.send_request_body(conn, id, &body[*sent..]) {
                    Ok(n) if n > 0 => *sent += n,
                    _ => break,
                }
            }
            if *sent == body.len() && self.client.finish_request(conn, id).is_ok() {
                *sent += 1;
            }
        }
        read_downloads(
            &mut self.client,
            conn,
            now,
            &mut self.downloads,
            &mut self.buf,
        );
    }

    /// Turns and steps until `done` holds or `limit` of virtual time
    /// passes; whether `done` held.
    pub fn run(&mut self, limit: Duration, mut done: impl FnMut(&mut EdgeHarness) -> bool) -> bool {
        let end = self.pair.now + limit;
        loop {
            self.turn();
            if done(self) {
                return true;
            }
            if self.pair.now >= end {
                return false;
            }
            // Wake for the application's timers too (the edge's deadlines),
            // and at least every 5 ms (the origin is served on turns).
            let app = self.server.poll_timeout().unwrap_or(Instant::MAX);
            let limit = end.min(app).min(self.pair.now + Duration::from_millis(5));
            if !self.pair.step_until(limit) {
                self.pair.now = limit;
            }
        }
    }

    /// Runs until every download ended (body read, failed or errored).
    pub fn finish(&mut self, limit: Duration) -> bool {
        self.run(limit, |h| {
            h.downloads
                .values()
                .all(|d| d.done || d.failed.is_some() || d.error.is_some())
        })
    }
}

/// An origin response head with `fields` and a content-length for `body`.
pub fn response(status: u16, fields: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} X\r\ncontent-length: {}\r\n", body.len());
    for (name, value) in fields {
        out += &format!("{name}: {value}\r\n");
    }
    out += "\r\n";
    let mut out = out.into_bytes();
    out.extend_from_slice(body);
    out
}

/// The value of `name` in a response head.
fn field<'a>(head: &'a ResponseHead, name: &str) -> Option<&'a str> {
    head.header(name)
}

#[test]
fn a_request_is_forwarded_and_its_response_relayed_with_the_end_to_end_fields() {
    let mut h = EdgeHarness::new(0);
    let id = h.request(Request {
        authority: Some("edge.example:443".into()),
        headers: vec![
            Field::new("accept", "text/plain"),
            Field::new("x-forwarded-for", "192.0.2.1"),
        ],
        ..Request::get("/a/b?x=1")
    });
    assert!(h.run(Duration::from_secs(1), |h| !h.origin.is_empty()
        && h.origin
            .values()
            .next()
            .is_some_and(|o| o.received.ends_with(b"\r\n\r\n"))));
    let c = h.conn(0);
    let sent = h.received(c).to_ascii_lowercase();
    assert!(sent.starts_with("get /a/b?x=1 http/1.1\r\n"), "{sent}");
    assert!(sent.contains("host: edge.example:443\r\n"), "{sent}");
    assert!(sent.contains("accept: text/plain\r\n"), "{sent}");
    assert!(
        sent.contains("x-forwarded-for: 192.0.2.1, 127.0.0.1\r\n")
            || sent.contains("x-forwarded-for: 192.0.2.1, "),
        "{sent}"
    );
    assert!(sent.contains("via: 3 artq\r\n"), "{sent}");
    h.respond(
        c,
        &response(
            200,
            &[
                ("connection", "keep-alive"),
                ("x-origin", "1"),
                ("content-type", "text/plain"),
            ],
            b"hello",
        ),
    );
    assert!(h.finish(Duration::from_secs(1)));
    let d = &h.downloads[&id];
    assert!(d.done, "{d:?}");
    assert_eq!(d.body, b"hello");
    let head = d.head.as_ref().expect("a head");
    assert_eq!(head.status, 200);
    assert_eq!(field(head, "x-origin"), Some("1"));
    assert_eq!(field(head, "content-type"), Some("text/plain"));
    assert_eq!(field(head, "content-length"), Some("5"));
    assert_eq!(field(head, "connection"), None);
    assert!(field(head, "via").is_some_and(|v| v.contains("artq")));

    // The connection went back to the pool: the next request reuses it.
    let id2 = h.get("/c");
    assert!(h.run(Duration::from_secs(1), |h| h
        .received(h.conn(0))
        .matches("\r\n\r\n")
        .count()
        == 2));
    assert_eq!(h.origin.len(), 1);
    h.respond(c, &response(200, &[], b"again"));
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&id2].body, b"again");
    let counters = h.counters();
    assert_eq!(
        (counters.connections_opened, counters.connections_reused),
        (1, 1)
    );
    assert_eq!(counters.origin_requests, 2);
}

#[test]
fn an_origin_that_refuses_gives_502_at_once() {
    let mut h = EdgeHarness::new(0);
    h.refuse = true;
    let start = h.pair.now;
    let id = h.get("/x");
    assert!(h.finish(Duration::from_secs(1)));
    let d = &h.downloads[&id];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(502), "{d:?}");
    assert!(d.done && d.body.is_empty());
    assert!(h.pair.now - start < Duration::from_millis(200));
    assert_eq!(h.counters().bad_gateway, 1);
}

#[test]
fn an_origin_that_does_not_answer_gives_504_at_the_timeout() {
    let mut h = EdgeHarness::new(0);
    let start = h.pair.now;
    let id = h.get("/slow");
    assert!(h.finish(Duration::from_secs(5)));
    let d = &h.downloads[&id];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(504), "{d:?}");
    let took = h.pair.now - start;
    assert!(
        took >= Duration::from_secs(2) && took < Duration::from_millis(2300),
        "{took:?}"
    );
    assert!(h.origin[&h.conn(0)].closed_by_edge);
    assert_eq!(h.counters().gateway_timeout, 1);
}

#[test]
fn a_malformed_origin_response_gives_502() {
    let mut h = EdgeHarness::new(0);
    let (id, c) = h.get_at_origin("/bad");
    h.respond(
        c,
        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6\r\n\r\nhello",
    );
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&id].head.as_ref().map(|h| h.status), Some(502));
    assert!(h.origin[&c].closed_by_edge);
}

#[test]
fn an_origin_that_ends_early_resets_the_clients_stream() {
    let mut h = EdgeHarness::new(0);
    let (id, c) = h.get_at_origin("/short");
    h.respond(c, b"HTTP/1.1 200 OK\r\ncontent-length: 100000\r\n\r\n");
    h.respond(c, &[7; 40_000]);
    h.origin_close(c);
    assert!(h.finish(Duration::from_secs(2)));
    let d = &h.downloads[&id];
    // The head was sent, but a reset may discard it before the client
    // reads it: what matters is that no short body looks complete.
    assert!(
        !d.done,
        "a short body must never look complete: {} bytes",
        d.body.len()
    );
    assert!(
        d.error.is_some() || d.failed.is_some(),
        "the stream must be reset: {d:?}"
    );
    assert_eq!(h.counters().aborted, 1);
}

#[test]
fn a_chunked_and_a_close_delimited_body_are_relayed_whole() {
    let mut h = EdgeHarness::new(0);
    let (a, c) = h.get_at_origin("/chunked");
    h.respond(c, b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n");
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&a].body, b"hello world");
    assert_eq!(
        field(h.downloads[&a].head.as_ref().unwrap(), "transfer-encoding"),
        None
    );
    let b = h.get("/close");
    assert!(h.run(Duration::from_secs(1), |h| h
        .received(h.conn(0))
        .contains("/close")));
    // Still the first connection (chunked responses keep it alive).
    let c = h.conn(0);
    h.respond(c, b"HTTP/1.1 200 OK\r\n\r\nuntil the end");
    h.origin_close(c);
    assert!(h.finish(Duration::from_secs(1)));
    let d = &h.downloads[&b];
    assert!(d.done, "{d:?}");
    assert_eq!(d.body, b"until the end");
}

#[test]
fn a_slow_client_slows_the_origin_and_the_edge_holds_a_bounded_amount() {
    let window = 1 << 20;
    let mut h = EdgeHarness::with_client_window(window);
    let size = 8 << 20;
    let id = h.get("/big");
    h.downloads.get_mut(&id).unwrap().read_limit = Some(0);
    assert!(h.run(Duration::from_secs(1), |h| !h.origin.is_empty()));
    let c = h.conn(0);
    h.respond(
        c,
        format!("HTTP/1.1 200 OK\r\ncontent-length: {size}\r\n\r\n").as_bytes(),
    );
    h.respond(c, &vec![1; size]);
    h.run(Duration::from_secs(3), |_| false);
    // The client reads nothing: the edge took what the client's stream
    // window, its buffers and one input buffer hold, and no more.
    let taken = h.origin[&c].taken;
    // The stream's credit, plus what the transport may hold ahead of it
    // and the server's leftover chunk.
    let ahead = 2 * crate::server::CHUNK;
    assert!(
        taken <= window as usize + ahead + RESPONSE_BUFFER + MAX_INPUT + 4096,
        "took {taken}"
    );
    assert!(
        taken < size,
        "the whole body was read although nobody takes it: {taken}"
    );
    // Reading resumes: the whole body arrives.
    h.downloads.get_mut(&id).unwrap().read_limit = None;
    assert!(h.finish(Duration::from_secs(10)));
    assert_eq!(h.downloads[&id].body.len(), size);
}

#[test]
fn a_client_that_goes_away_closes_the_origin_connection() {
    let mut h = EdgeHarness::new(0);
    let (id, c) = h.get_at_origin("/big");
    h.respond(c, b"HTTP/1.1 200 OK\r\ncontent-length: 50000000\r\n\r\n");
    h.respond(c, &vec![1; 1 << 20]);
    assert!(
        h.run(Duration::from_secs(1), |h| h.downloads[&id].body.len()
            > 100_000)
    );
    // The client abandons the response.
    let conn = h.pair.client();
    let _ = conn.streams().stop_sending(id, 0x10c);
    let _ = conn.streams().reset(id, 0x10c);
    let left = h.pair.now;
    assert!(h.run(Duration::from_secs(1), |h| h.origin[&c].closed_by_edge));
    assert!(h.pair.now - left < Duration::from_millis(200));
    assert_eq!(h.server.edge().unwrap().views(), 0);
}

#[test]
fn concurrent_misses_make_one_origin_request_and_later_requests_hit_the_cache() {
    let mut h = EdgeHarness::new(1 << 20);
    let ids: Vec<StreamId> = (0..3).map(|_| h.get("/obj")).collect();
    assert!(h.run(Duration::from_secs(1), |h| !h.origin.is_empty()));
    h.run(Duration::from_millis(100), |_| false);
    assert_eq!(h.origin.len(), 1, "one origin connection for three misses");
    let c = h.conn(0);
    let body = vec![9u8; 30_000];
    h.respond(c, &response(200, &[("cache-control", "max-age=60")], &body));
    assert!(h.finish(Duration::from_secs(2)));
    for id in &ids {
        assert_eq!(h.downloads[id].body, body);
    }
    let later = h.get("/obj");
    assert!(h.finish(Duration::from_secs(1)));
    let d = &h.downloads[&later];
    assert_eq!(d.body, body);
    assert!(d.head.as_ref().and_then(|h| h.header("age")).is_some());
    let counters = h.counters();
    assert_eq!(counters.origin_requests, 1);
    assert_eq!(
        (
            counters.coalesced,
            counters.cache_hits,
            counters.cache_stores
        ),
        (2, 1, 1)
    );
    assert_eq!(h.received(c).matches("GET /obj").count(), 1);
}

#[test]
fn a_response_that_may_not_be_shared_is_fetched_again_for_each_waiting_request() {
    let mut h = EdgeHarness::new(1 << 20);
    let a = h.get("/private");
    let (b, c) = h.get_at_origin("/private");
    h.respond(
        c,
        &response(200, &[("cache-control", "private, max-age=60")], b"mine"),
    );
    assert!(h.run(Duration::from_secs(1), |h| h.origin.len() == 2));
    let c2 = h.conn(1);
    h.respond(
        c2,
        &response(200, &[("cache-control", "private, max-age=60")], b"yours"),
    );
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&a].body, b"mine");
    assert_eq!(h.downloads[&b].body, b"yours");
    assert_eq!(h.counters().cache_stores, 0);
}

#[test]
fn requests_with_authorization_bypass_the_cache() {
    let mut h = EdgeHarness::new(1 << 20);
    let auth = |h: &mut EdgeHarness| {
        h.request(Request {
            authority: Some("edge.example:443".into()),
            headers: vec![Field::new("authorization", "Bearer x")],
            ..Request::get("/obj")
        })
    };
    auth(&mut h);
    assert!(h.run(Duration::from_secs(1), |h| !h.origin.is_empty()));
    h.respond(
        h.conn(0),
        &response(200, &[("cache-control", "max-age=60")], b"one"),
    );
    assert!(h.finish(Duration::from_secs(1)));
    auth(&mut h);
    assert!(h.run(Duration::from_secs(1), |h| h
        .received(h.conn(0))
        .matches("GET /obj")
        .count()
        == 2));
    h.respond(
        h.conn(0),
        &response(200, &[("cache-control", "max-age=60")], b"two"),
    );
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.counters().cache_hits, 0);
}

#[test]
fn connect_is_refused_and_head_is_forwarded() {
    let mut h = EdgeHarness::new(0);
    // HTTP/3's CONNECT has no path: the session refuses it as malformed
    // (400) before the edge sees it; the edge would refuse it too (405).
    let connect = h.request(Request {
        method: Method::Other("CONNECT".into()),
        authority: Some("edge.example:443".into()),
        ..Request::get("/tunnel")
    });
    let head = h.request(Request {
        method: Method::Head,
        authority: Some("edge.example:443".into()),
        ..Request::get("/file")
    });
    assert!(h.run(Duration::from_secs(1), |h| !h.origin.is_empty()
        && h.received(h.conn(0)).contains("\r\n\r\n")));
    assert!(h.received(h.conn(0)).starts_with("HEAD /file HTTP/1.1\r\n"));
    h.respond(
        h.conn(0),
        b"HTTP/1.1 200 OK\r\ncontent-length: 1234\r\n\r\n",
    );
    assert!(h.finish(Duration::from_secs(1)));
    let status = h.downloads[&connect].head.as_ref().map(|h| h.status);
    assert!(matches!(status, Some(400 | 405)), "{status:?}");
    assert!(!h.received(h.conn(0)).contains("CONNECT"));
    let d = &h.downloads[&head];
    assert_eq!(d.head.as_ref().and_then(|h| h.content_length()), Some(1234));
    assert!(d.done && d.body.is_empty());
}

#[test]
fn paths_that_climb_out_of_a_route_are_refused() {
    let mut h = EdgeHarness::new(0);
    let id = h.get("/a/../b");
    let enc = h.get("/a/%2e%2e/b");
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&id].head.as_ref().map(|h| h.status), Some(400));
    assert_eq!(h.downloads[&enc].head.as_ref().map(|h| h.status), Some(400));
    assert!(h.origin.is_empty());
}

/// Three seconds of ffmpeg's FLV output (three keyframes), from the live
/// relay's fixtures.
const FLV_SAMPLE: &[u8] = include_bytes!("../../tests/data/edge/testsrc2-160x90.flv");

#[test]
fn viewers_of_a_live_path_share_one_origin_request_and_late_joiners_start_at_a_keyframe() {
    let mut h = EdgeHarness::new(0);
    let (first, c) = h.get_at_origin("/live/cam.flv");
    // An encoder's own HTTP output: no length, the stream ends when it
    // closes.
    h.respond(c, b"HTTP/1.1 200 OK\r\ncontent-type: video/x-flv\r\n\r\n");
    let (start, rest) = FLV_SAMPLE.split_at(FLV_SAMPLE.len() / 2);
    h.respond(c, start);
    assert!(
        h.run(Duration::from_secs(1), |h| h.downloads[&first].body.len()
            >= start.len() / 2)
    );
    // Two late joiners: no new origin request.
    let late: Vec<StreamId> = (0..2).map(|_| h.get("/live/cam.flv")).collect();
    assert!(h.run(Duration::from_secs(1), |h| late.iter().all(|id| h
        .downloads[id]
        .body
        .len()
        > 13)));
    h.respond(c, rest);
    h.origin_close(c);
    assert!(h.finish(Duration::from_secs(2)));
    assert_eq!(h.origin.len(), 1, "one origin request for three viewers");
    assert_eq!(h.received(c).matches("GET /live/cam.flv").count(), 1);
    let d = &h.downloads[&first];
    assert!(d.done, "{d:?}");
    assert_eq!(
        d.body, FLV_SAMPLE,
        "the first viewer gets the stream as sent"
    );
    for id in &late {
        let d = &h.downloads[id];
        assert!(d.done, "{d:?}");
        assert!(
            d.body.starts_with(b"FLV"),
            "a late joiner starts with the FLV header"
        );
        assert!(d.body.len() < FLV_SAMPLE.len());
        // After the preamble comes a video keyframe tag taken from the
        // stream: the joiner's tail is a suffix of the stream.
        let tail = &d.body[d.body.len() - 1000..];
        assert!(FLV_SAMPLE.ends_with(tail));
    }
    assert_eq!(h.counters().coalesced, 2);
    assert_eq!(h.server.edge().unwrap().views(), 0);
}

#[test]
fn the_last_viewer_leaving_a_live_stream_closes_its_origin_request() {
    let mut h = EdgeHarness::new(0);
    let (id, c) = h.get_at_origin("/live/cam.flv");
    h.respond(
        c,
        b"HTTP/1.1 200 OK\r\ncontent-type: video/x-flv\r\ntransfer-encoding: chunked\r\n\r\n",
    );
    h.respond(c, format!("{:x}\r\n", FLV_SAMPLE.len()).as_bytes());
    h.respond(c, FLV_SAMPLE);
    h.respond(c, b"\r\n");
    assert!(h.run(Duration::from_secs(1), |h| !h.downloads[&id]
        .body
        .is_empty()));
    let conn = h.pair.client();
    let _ = conn.streams().stop_sending(id, 0x10c);
    let _ = conn.streams().reset(id, 0x10c);
    assert!(h.run(Duration::from_secs(1), |h| h.origin[&c].closed_by_edge));
}

/// The body of the first request the origin received on `conn`, after
/// its head.
fn received_body(h: &EdgeHarness, conn: OriginConn) -> Vec<u8> {
    let all = &h.origin[&conn].received;
    let at = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a request head");
    all[at + 4..].to_vec()
}

/// Decodes a chunked body.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = data
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk line");
        let size =
            usize::from_str_radix(std::str::from_utf8(&data[..line_end]).unwrap(), 16).unwrap();
        data = &data[line_end + 2..];
        if size == 0 {
            assert_eq!(data, b"\r\n", "the last chunk ends the body");
            return out;
        }
        out.extend_from_slice(&data[..size]);
        assert_eq!(&data[size..size + 2], b"\r\n");
        data = &data[size + 2..];
    }
}

#[test]
fn a_request_body_streams_to_the_origin_with_its_length() {
    let mut h = EdgeHarness::new(1 << 20);
    let body = transport::test_pair::content(300_000, 5);
    let id = h.upload(
        Request {
            method: Method::Other("POST".into()),
            authority: Some("edge.example:443".into()),
            headers: vec![Field::new("content-length", body.len().to_string())],
            ..Request::get("/upload")
        },
        body.clone(),
    );
    assert!(h.run(Duration::from_secs(2), |h| !h.origin.is_empty()
        && received_body(h, h.conn(0)).len() == body.len()));
    let c = h.conn(0);
    let head = h.received(c);
    assert!(head.starts_with("POST /upload HTTP/1.1\r\n"), "{head}");
    assert!(
        head.contains("content-length: 300000\r\n"),
        "{}",
        &head[..200]
    );
    assert_eq!(received_body(&h, c), body);
    h.respond(c, &response(201, &[], b"stored"));
    assert!(h.finish(Duration::from_secs(1)));
    let d = &h.downloads[&id];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(201));
    assert_eq!(d.body, b"stored");
    // A request with a body is never coalesced nor stored.
    assert_eq!(h.counters().cache_stores, 0);
}

#[test]
fn a_request_body_without_a_length_goes_chunked() {
    let mut h = EdgeHarness::new(0);
    let body = transport::test_pair::content(150_000, 6);
    let id = h.upload(
        Request {
            method: Method::Other("PUT".into()),
            authority: Some("edge.example:443".into()),
            ..Request::get("/object")
        },
        body.clone(),
    );
    assert!(h.run(Duration::from_secs(2), |h| !h.origin.is_empty()
        && received_body(h, h.conn(0)).ends_with(b"0\r\n\r\n")));
    let c = h.conn(0);
    assert!(h.received(c).contains("transfer-encoding: chunked\r\n"));
    assert_eq!(dechunk(&received_body(&h, c)), body);
    h.respond(c, &response(204, &[], b""));
    assert!(h.finish(Duration::from_secs(1)));
    assert_eq!(h.downloads[&id].head.as_ref().map(|h| h.status), Some(204));
}

#[test]
fn an_origin_that_does_not_read_slows_the_upload_and_the_edge_holds_a_bounded_amount() {
    let mut h = EdgeHarness::new(0);
    h.origin_deaf = true;
    let body = vec![3u8; 8 << 20];
    let id = h.upload(
        Request {
            method: Method::Other("POST".into()),
            authority: Some("edge.example:443".into()),
            headers: vec![Field::new("content-length", body.len().to_string())],
            ..Request::get("/upload")
        },
        body,
    );
    // Less than the 2 s upstream timeout: an origin that takes no byte of
    // the body for that long is given up (504).
    h.run(Duration::from_millis(1500), |_| false);
    let c = h.conn(0);
    // The edge holds at most its upload buffer (and a chunk over it) for
    // an origin that reads nothing; the rest waits in the client's stream,
    // under flow control.
    let unsent = h.server.origin_io().unwrap().unsent(c);
    assert!(
        unsent > 0 && unsent <= super::proxy::UPLOAD_BUFFER + crate::server::CHUNK,
        "{unsent}"
    );
    assert!(h.uploads.contains_key(&id));
    // The origin reads again: everything arrives.
    h.origin_deaf = false;
    let done = h.run(Duration::from_secs(10), |h| {
        received_body(h, c).len() == 8 << 20
    });
    assert!(
        done,
        "origin got {} bytes; client wrote {}; unsent {}",
        received_body(&h, c).len(),
        h.uploads[&id].1,
        h.server.origin_io().unwrap().unsent(c)
    );
}

#[test]
fn an_origin_that_takes_no_byte_of_an_upload_for_the_timeout_gives_504() {
    let mut h = EdgeHarness::new(0);
    h.origin_deaf = true;
    let id = h.upload(
        Request {
            method: Method::Other("POST".into()),
            authority: Some("edge.example:443".into()),
            headers: vec![Field::new("content-length", (4 << 20).to_string())],
            ..Request::get("/upload")
        },
        vec![1; 4 << 20],
    );
    assert!(h.finish(Duration::from_secs(5)));
    let d = &h.downloads[&id];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(504), "{d:?}");
    assert!(h.origin[&h.conn(0)].closed_by_edge);
}
