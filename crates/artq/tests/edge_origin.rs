//! Acceptance tests of `artq serve` as a CDN edge in front of HTTP/1.1
//! origins: big files through a lossy path, caching, and every way an
//! origin or a client can fail.
//!
//! Why this exists: the edge speaks HTTP/3 to clients and HTTP/1.1 to
//! origins. These tests judge it by what real clients (quic-go's http3
//! client, headless Chromium, aioquic via `tests/edge/h3_fetch.py`) receive
//! and what a real origin (nginx, counting requests in its access log) or a
//! test-owned TCP origin sees. The pieces are checked without artq in
//! `harness_selfcheck/edge_checks.rs`, so a failure here is the edge's.
//!
//! Needs what `.ci/run` provides: nginx (`$ARTQ_NGINX`), the venv python
//! with aioquic (`$ARTQ_PYTHON`), the quic-go client (`$ARTQ_H3_CLIENT`) and
//! Chromium (`$ARTQ_CHROMIUM`). A missing one fails the test with how to
//! get it; nothing is skipped.
//!
//! CLI contract relied on (beyond `interop_h3.rs`'s):
//! - `artq serve --listen 127.0.0.1:0 --root DIR --upstream [/PREFIX=]http://127.0.0.1:PORT
//!   [--cache-size BYTES] [--upstream-timeout SECONDS] [--recovery S] [--cert F --key F]`
//!   prints `listening on ADDR` and proxies requests over HTTP/3 to the
//!   origin; an upstream without a prefix takes `/`, so `--root` (an empty
//!   directory here) serves nothing. The request path is passed on unchanged.
//! - Origin unreachable: 502. Origin silent past `--upstream-timeout`: 504.
//!   Origin cut before the end of a body whose length it announced: the
//!   client's stream is reset (or, if nothing was sent yet, a 502), never a
//!   clean end. A client that cancels its request or closes its connection:
//!   the edge closes its origin connection for that response within 1 s.
//! - A response with `Cache-Control: max-age=300` is served from the cache
//!   (`--cache-size`) the second time: the origin sees it once.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::edge::{self, Fetched};
use common::nginx::{free_tcp_port, Nginx};
use common::{certs, h3_peers, process, Scratch};

/// Size of the big download (the brief's 20 MB).
const BIG: u64 = 20_000_000;

/// Bound on one 20 MB download through the lossy link (20 Mbit/s: 8 s of
/// serialization; 5% loss each way slows any congestion controller; a
/// debug build on a loaded 2-core machine).
const BIG_DEADLINE: Duration = Duration::from_secs(240);

/// Bound on a short request's client run.
const SHORT_DEADLINE: Duration = Duration::from_secs(60);

/// The big-download tests take this, so the two 20 MB transfers (each with
/// its own link, edge and origin) do not share the 2-core machine.
static HEAVY: Mutex<()> = Mutex::new(());

fn heavy() -> std::sync::MutexGuard<'static, ()> {
    HEAVY.lock().unwrap_or_else(|e| e.into_inner())
}

/// An empty directory for the edge's `--root`: what the edge serves must
/// come from the origin.
fn empty_root(scratch: &Scratch) -> std::path::PathBuf {
    let dir = scratch.path().join("edge-root");
    std::fs::create_dir_all(&dir).expect("mkdir edge-root");
    dir
}

/// Starts `artq serve --root <empty> --upstream <upstream> [extra...]`.
fn spawn_edge(
    scratch: &Scratch,
    upstream: &str,
    extra: &[&str],
) -> (process::ChildGuard, SocketAddr) {
    let mut args = vec!["--upstream", upstream];
    args.extend_from_slice(extra);
    common::spawn_artq_serve(&empty_root(scratch), &scratch.logs(), &args)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Starts the edge with `--recovery art --cc bbr` and `cert` in front of `nginx`,
/// and the lossy link (20 Mbit/s, 40 ms RTT, 5% loss, seed 3) in front of
/// the edge. Returns (edge, link, link address).
fn edge_behind_lossy_link(
    scratch: &Scratch,
    nginx: &Nginx,
    cert: &certs::TestCert,
) -> (process::ChildGuard, process::ChildGuard, SocketAddr) {
    let upstream = nginx.origin_url();
    // BBR, as a CDN edge runs: at 5% loss Cubic's window would hold 20 MB
    // to about 1.5 Mbit/s (two minutes a download) and test only patience;
    // the recovery scheme under test is the same.
    let mut extra: Vec<String> = vec![
        "--recovery".into(),
        "art".into(),
        "--cc".into(),
        "bbr".into(),
    ];
    extra.extend(cert.serve_args());
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let (edge, edge_addr) = spawn_edge(scratch, &upstream, &extra);
    let link_args: Vec<String> = ["--bw", "20", "--rtt", "40", "--loss", "0.05", "--seed", "3"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (link, link_addr) = common::spawn_link(scratch, edge_addr, &link_args);
    (edge, link, link_addr)
}

/// quic-go's HTTP/3 client downloads a 20 MB file that nginx serves,
/// through the edge (`--recovery art`) behind a lossy link (20 Mbit/s, 40
/// ms RTT, 5% loss each way), byte-exact.
#[test]
fn go_h3_client_downloads_20mb_from_nginx_through_edge_over_lossy_link() {
    h3_peers::go_h3_client().unwrap_or_else(|e| panic!("{e}"));
    let _heavy = heavy();
    let scratch = Scratch::new();
    let file = scratch.served_file("file", BIG, 51);
    let mut nginx =
        Nginx::start(&scratch.root(), scratch.path(), "").unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let (mut edge, mut link, link_addr) = edge_behind_lossy_link(&scratch, &nginx, &cert);
    let out = scratch.out("file");
    let run = h3_peers::go_h3_download(&format!("https://{link_addr}/file"), &out, BIG_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\nedge: {}\nlink: {}", edge.describe(), link.describe()));
    let context = format!(
        "edge: {}\nlink: {}\nnginx: {}",
        edge.describe(),
        link.describe(),
        nginx.describe()
    );
    common::assert_downloaded(&run, "quic-go h3 client", &context, BIG, &file, &out);
    eprintln!("quic-go through the edge: {}", run.stderr.trim());
}

/// Headless Chromium loads the digest page and the 20 MB file, both from
/// nginx through the edge (`--recovery art`) behind the lossy link, over
/// HTTP/3, and the SHA-256 computed in the page matches.
#[test]
fn chromium_downloads_20mb_from_nginx_through_edge_over_lossy_link() {
    h3_peers::chromium().unwrap_or_else(|e| panic!("{e}"));
    let _heavy = heavy();
    let scratch = Scratch::new();
    let file = scratch.served_file("file", BIG, 52);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    h3_peers::install_digest_page(&scratch.root(), "page.html");
    let mut nginx =
        Nginx::start(&scratch.root(), scratch.path(), "").unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let (mut edge, mut link, link_addr) = edge_behind_lossy_link(&scratch, &nginx, &cert);
    let origin = link_addr.to_string();
    let run = h3_peers::chromium_fetch(
        &format!("https://{origin}/page.html#/file"),
        &cert.spki_sha256_base64,
        &origin,
        &scratch.logs().join("chromium.netlog.json"),
        BIG_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}\nedge: {}\nlink: {}", edge.describe(), link.describe()));
    let context = format!(
        "edge: {}\nlink: {}\nnginx: {}",
        edge.describe(),
        link.describe(),
        nginx.describe()
    );
    h3_peers::assert_browser_digest(&run, &expected, &context);
    eprintln!("chromium through the edge: {}", run.stderr.trim());
    assert!(
        nginx.access_log_count("/file") >= 1,
        "the file must have come from nginx: {context}"
    );
}

/// 200 small objects that nginx serves with `Cache-Control: max-age=300`,
/// fetched twice through the edge (`--cache-size 64000000`): both passes
/// get every object byte-exact, and nginx sees exactly 200 requests for
/// them, not 400.
#[test]
fn cacheable_objects_reach_the_origin_once() {
    const OBJECTS: usize = 200;
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.root().join("cache")).expect("mkdir cache");
    let digests: Vec<String> = (0..OBJECTS)
        .map(|i| {
            let size = 1_000 + 97 * i as u64;
            let path = scratch.served_file(&format!("cache/obj-{i}"), size, 1_000 + i as u64);
            certs::sha256_file_hex(&path).unwrap_or_else(|e| panic!("{e}"))
        })
        .collect();
    let mut nginx = Nginx::start(
        &scratch.root(),
        scratch.path(),
        &Nginx::cache_control_location("/cache/", 300),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // One worker: caches are per worker thread (docs/operations.md), and
    // the second pass must hit the first pass's cache.
    let (mut edge, addr) = spawn_edge(
        &scratch,
        &nginx.origin_url(),
        &["--cache-size", "64000000", "--threads", "1"],
    );
    let urls: Vec<String> = (0..OBJECTS)
        .map(|i| format!("https://{addr}/cache/obj-{i}"))
        .collect();
    for pass in 1..=2 {
        let (run, got) = edge::h3_fetch(&urls, &["--concurrency", "8"], Duration::from_secs(120))
            .unwrap_or_else(|e| panic!("{e}\nedge: {}", edge.describe()));
        for (i, f) in got.iter().enumerate() {
            assert!(
                f.status == Some(200) && f.end == "fin" && f.sha256 == digests[i],
                "pass {pass}, object {i}: expected 200 with SHA-256 {}, got {}\nclient stderr: {}\n\
                 edge: {}\nnginx: {}",
                digests[i],
                f.raw,
                run.stderr,
                edge.describe(),
                nginx.describe()
            );
        }
        assert!(
            run.status.success(),
            "pass {pass}: {}\n{}",
            run.stdout,
            run.stderr
        );
        // nginx logs a request when it has sent the response: by now.
        let seen = nginx.wait_access_count("/cache/", OBJECTS, Duration::from_secs(5));
        assert_eq!(
            seen,
            OBJECTS,
            "after pass {pass} nginx logged {seen} requests under /cache/ for {OBJECTS} \
             objects with Cache-Control: max-age=300 (the second pass must come from the \
             edge's cache)\nedge: {}",
            edge.describe()
        );
    }
    thread::sleep(Duration::from_millis(500));
    assert_eq!(nginx.access_log_count("/cache/"), OBJECTS);
}

/// What a test-owned origin does with each connection.
#[derive(Clone, Copy)]
enum OriginMode {
    /// Accepts, reads nothing, answers nothing.
    Silent,
    /// Announces `length` bytes, sends `sent` of them, closes.
    CutShort { length: u64, sent: u64 },
    /// Announces `length` bytes and sends them slowly (32 KiB every 20 ms).
    Slow { length: u64 },
}

/// What the test-owned origin saw.
#[derive(Default)]
struct OriginLog {
    connections: AtomicUsize,
    requests: AtomicUsize,
    /// When the first connection was found closed by the edge.
    closed_at: Mutex<Option<SystemTime>>,
    stop: AtomicBool,
}

/// A raw TCP origin on 127.0.0.1 in a thread, for the failures nginx cannot
/// stage; stopped when dropped.
struct TestOrigin {
    addr: SocketAddr,
    log: Arc<OriginLog>,
}

/// Connections a test origin serves at most (each gets a thread).
const ORIGIN_MAX_CONNECTIONS: usize = 16;

impl TestOrigin {
    fn start(mode: OriginMode) -> TestOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a test origin");
        listener
            .set_nonblocking(true)
            .expect("nonblocking listener");
        let addr = listener.local_addr().expect("local_addr");
        let log = Arc::new(OriginLog::default());
        let shared = Arc::clone(&log);
        thread::spawn(move || {
            while !shared.stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((stream, _)) => {
                        let _ = stream.set_nonblocking(false);
                        if shared.connections.fetch_add(1, Ordering::SeqCst)
                            >= ORIGIN_MAX_CONNECTIONS
                        {
                            continue; // dropped: closed at once
                        }
                        let conn_log = Arc::clone(&shared);
                        thread::spawn(move || serve_origin_connection(stream, mode, &conn_log));
                    }
                    Err(_) => thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        TestOrigin { addr, log }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn describe(&self) -> String {
        format!(
            "test origin on {}: {} connection(s), {} request(s), closed by the edge at {:?}",
            self.addr,
            self.log.connections.load(Ordering::SeqCst),
            self.log.requests.load(Ordering::SeqCst),
            self.closed_at()
        )
    }

    fn closed_at(&self) -> Option<SystemTime> {
        *self.log.closed_at.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.log.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads a request head (at most 64 KiB); false if the peer closed first.
fn read_request_head(stream: &mut TcpStream, log: &OriginLog) -> bool {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if log.stop.load(Ordering::SeqCst) || head.len() > 64 * 1024 {
            return false;
        }
        match stream.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return false,
        }
    }
    log.requests.fetch_add(1, Ordering::SeqCst);
    true
}

/// Writes a 200 head announcing `length` bytes of body; false if the edge
/// is gone.
fn write_head(stream: &mut TcpStream, length: u64) -> bool {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\
         Content-Length: {length}\r\n\r\n"
    );
    stream.write_all(head.as_bytes()).is_ok()
}

/// Reads and discards what `stream` (with a read timeout set) receives
/// until the peer closes it, it fails, `deadline` passes or `stop` says so.
fn read_until_closed(stream: &mut TcpStream, deadline: Instant, stop: impl Fn() -> bool) {
    let mut buf = [0u8; 4096];
    while !stop() && Instant::now() < deadline {
        match stream.read(&mut buf) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return,
        }
    }
}

fn serve_origin_connection(mut stream: TcpStream, mode: OriginMode, log: &OriginLog) {
    let deadline = Instant::now() + Duration::from_secs(90);
    match mode {
        OriginMode::Silent => {
            // Hold the connection, never answer, until the test ends.
            let _ = stream.set_read_timeout(Some(Duration::from_millis(100)));
            read_until_closed(&mut stream, deadline, || log.stop.load(Ordering::SeqCst));
        }
        OriginMode::CutShort { length, sent } => {
            if !read_request_head(&mut stream, log) {
                return;
            }
            if !write_head(&mut stream, length) {
                return;
            }
            let chunk = vec![0x5au8; 64 * 1024];
            let mut left = sent;
            while left > 0 {
                let n = usize::try_from(left).map_or(chunk.len(), |l| l.min(chunk.len()));
                if stream.write_all(&chunk[..n]).is_err() {
                    return;
                }
                left -= n as u64;
            }
            let _ = stream.flush();
            // Dropping the stream closes it: the body stops half-way.
        }
        OriginMode::Slow { length } => {
            if !read_request_head(&mut stream, log) {
                return;
            }
            if !write_head(&mut stream, length) {
                return;
            }
            // A reader notices the edge's FIN or RST; a writer its RST.
            let closed = Arc::new(AtomicBool::new(false));
            if let Ok(mut reader) = stream.try_clone() {
                let closed = Arc::clone(&closed);
                let _ = reader.set_read_timeout(Some(Duration::from_millis(50)));
                thread::spawn(move || {
                    let until = Instant::now() + Duration::from_secs(90);
                    read_until_closed(&mut reader, until, || closed.load(Ordering::SeqCst));
                    closed.store(true, Ordering::SeqCst);
                });
            }
            let _ = stream.set_write_timeout(Some(Duration::from_millis(50)));
            let chunk = vec![0xa5u8; 32 * 1024];
            let mut sent: u64 = 0;
            while sent < length && !log.stop.load(Ordering::SeqCst) && Instant::now() < deadline {
                if closed.load(Ordering::SeqCst) {
                    break;
                }
                match stream.write(&chunk) {
                    Ok(n) => sent += n as u64,
                    Err(e)
                        if matches!(
                            e.kind(),
                            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                        ) => {}
                    Err(_) => break,
                }
                thread::sleep(Duration::from_millis(20));
            }
            let write_failed =
                sent < length && !log.stop.load(Ordering::SeqCst) && Instant::now() < deadline;
            if closed.load(Ordering::SeqCst) || write_failed {
                let mut at = log.closed_at.lock().unwrap_or_else(|e| e.into_inner());
                at.get_or_insert_with(SystemTime::now);
            }
        }
    }
}

/// One GET through the edge with `h3_fetch.py` (extra arguments `extra`).
fn fetch_one(edge_addr: SocketAddr, path: &str, extra: &[&str]) -> (process::RunOutput, Fetched) {
    let (run, mut got) = edge::h3_fetch(
        &[format!("https://{edge_addr}{path}")],
        extra,
        SHORT_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got.len(), 1, "h3_fetch.py: {}\n{}", run.stdout, run.stderr);
    (run, got.remove(0))
}

/// An origin where nothing listens: the edge answers 502, and fast (the
/// client's head time is under 1 s; a refused loopback connection takes
/// microseconds). quic-go's client sees the 502 too.
#[test]
fn origin_down_answers_502_within_a_second() {
    let scratch = Scratch::new();
    let port = free_tcp_port().unwrap_or_else(|e| panic!("{e}"));
    let (mut edge, addr) = spawn_edge(&scratch, &format!("http://127.0.0.1:{port}"), &[]);
    let (run, f) = fetch_one(addr, "/anything", &[]);
    assert_eq!(
        f.status,
        Some(502),
        "{}\n{}\nedge: {}",
        f.raw,
        run.stderr,
        edge.describe()
    );
    let head_ms = f.head_ms.unwrap_or(f64::MAX);
    assert!(head_ms < 1000.0, "502 took {head_ms} ms: {}", f.raw);
    let go = h3_peers::go_h3_download(
        &format!("https://{addr}/anything"),
        &scratch.out("go"),
        SHORT_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        go.status.code() == Some(1) && go.stderr.contains("HTTP status 502"),
        "quic-go client should report HTTP status 502 ({}): {}",
        go.status,
        go.stderr
    );
    assert!(
        edge.try_status().is_none(),
        "the edge must keep running: {}",
        edge.describe()
    );
}

/// An origin that accepts and never answers: with `--upstream-timeout 2`
/// the edge answers 504 after about 2 s (not before 1.8 s, well before 10 s).
#[test]
fn silent_origin_answers_504_after_upstream_timeout() {
    let scratch = Scratch::new();
    let origin = TestOrigin::start(OriginMode::Silent);
    let (mut edge, addr) = spawn_edge(&scratch, &origin.url(), &["--upstream-timeout", "2"]);
    let (run, f) = fetch_one(addr, "/slow", &[]);
    assert_eq!(
        f.status,
        Some(504),
        "{}\n{}\nedge: {}\n{}",
        f.raw,
        run.stderr,
        edge.describe(),
        origin.describe()
    );
    let head_ms = f.head_ms.unwrap_or(f64::MAX);
    assert!(
        (1800.0..10_000.0).contains(&head_ms),
        "504 after {head_ms} ms with --upstream-timeout 2: {}",
        f.raw
    );
    assert!(
        origin.log.connections.load(Ordering::SeqCst) >= 1,
        "{}",
        origin.describe()
    );
}

/// An origin that announces 4 MB, sends 2 MB and closes: the client must
/// not see a complete response. The edge resets the client's stream after
/// what it relayed (or answers 502 if it had sent nothing); quic-go's
/// client, which checks the content-length, fails too.
#[test]
fn origin_cut_mid_body_resets_the_client_stream() {
    let scratch = Scratch::new();
    let origin = TestOrigin::start(OriginMode::CutShort {
        length: 4_000_000,
        sent: 2_000_000,
    });
    let (mut edge, addr) = spawn_edge(&scratch, &origin.url(), &[]);
    let (run, f) = fetch_one(addr, "/cut", &[]);
    let context = format!(
        "{}\n{}\nedge: {}\n{}",
        f.raw,
        run.stderr,
        edge.describe(),
        origin.describe()
    );
    assert!(
        !run.status.success(),
        "the client must report a failure: {context}"
    );
    match f.status {
        Some(200) => {
            assert_eq!(
                f.end, "reset",
                "after the origin cut the body, the edge must reset the client's stream, \
                 not end it: {context}"
            );
            assert!(f.bytes < 4_000_000, "{context}");
        }
        Some(502) => {}
        other => panic!("expected 200 then a reset (or a 502), got status {other:?}: {context}"),
    }
    let go = h3_peers::go_h3_download(
        &format!("https://{addr}/cut"),
        &scratch.out("go"),
        SHORT_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !go.status.success() && common::summary_bytes(&go.stderr).is_none(),
        "quic-go client must fail, with no success summary ({}): {}",
        go.status,
        go.stderr
    );
    assert!(
        !scratch.out("go").exists(),
        "a failed download leaves no file"
    );
    assert!(
        edge.try_status().is_none(),
        "the edge must keep running: {}",
        edge.describe()
    );
}

/// Fetches a big, slowly streamed origin file through the edge, stops after
/// 2 s (`abort`: `reset` cancels the request and keeps the connection 3 s
/// more; `close` closes the connection) and asserts that the origin saw its
/// connection closed within 1 s of that.
fn client_leaving_closes_origin_connection(abort: &str) {
    let scratch = Scratch::new();
    let origin = TestOrigin::start(OriginMode::Slow {
        length: 1_000_000_000,
    });
    let (mut edge, addr) = spawn_edge(&scratch, &origin.url(), &[]);
    let (run, f) = fetch_one(
        addr,
        "/big",
        &["--for", "2", "--abort", abort, "--linger", "3"],
    );
    let context = format!(
        "{}\n{}\nedge: {}\n{}",
        f.raw,
        run.stderr,
        edge.describe(),
        origin.describe()
    );
    assert_eq!(f.status, Some(200), "{context}");
    assert_eq!(f.end, "cancelled", "{context}");
    assert!(
        f.bytes > 0,
        "the body was flowing before the client left: {context}"
    );
    let left = f.cancel_unix.expect("a cancelled fetch says when");
    // Give a broken edge time to show it: up to 5 s after the client left.
    let until = Instant::now() + Duration::from_secs(3);
    while origin.closed_at().is_none() && Instant::now() < until {
        thread::sleep(Duration::from_millis(20));
    }
    let closed = origin.closed_at().unwrap_or_else(|| {
        panic!(
            "the edge kept its origin connection open after the client left ({abort}): {context}"
        )
    });
    let closed = closed
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    let after = closed - left;
    eprintln!("origin connection closed {after:.3} s after the client left ({abort})");
    assert!(
        after < 1.0,
        "the origin connection closed {after:.3} s after the client left ({abort}), \
         expected < 1 s: {context}"
    );
}

/// A client cancels its request mid-download (STOP_SENDING and
/// RESET_STREAM, connection kept): the edge closes its origin connection
/// within 1 s.
#[test]
fn client_cancelling_a_download_closes_the_origin_connection_within_a_second() {
    client_leaving_closes_origin_connection("reset");
}

/// A client closes its connection mid-download: the edge closes its origin
/// connection within 1 s.
#[test]
fn client_closing_its_connection_closes_the_origin_connection_within_a_second() {
    client_leaving_closes_origin_connection("close");
}

/// The resident size of process `pid`, in bytes (`VmRSS` of
/// `/proc/PID/status`).
fn rss_bytes(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_else(|e| panic!("cannot read /proc/{pid}/status: {e}"));
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no VmRSS in /proc/{pid}/status"))
}

/// How many slow clients [`many_slow_clients_keep_the_server_small`] runs.
const SLOW_CLIENTS: usize = 200;

/// The memory bound of docs/edge.md ("Memory and limits") for clients
/// whose flow-control window is 1 MB: 256 KiB of body waiting for the
/// client, 64 KiB of origin input, one 64 KiB chunk, the 1 MB the window
/// lets the transport hold unacknowledged, and the connection's own state,
/// rounded up to 3 MiB a client, above a 64 MiB base.
const SLOW_CLIENT_BOUND: u64 = 64 * 1024 * 1024 + SLOW_CLIENTS as u64 * 3 * 1024 * 1024;

/// 200 clients download a 100 MB file that nginx serves, through the edge,
/// and read it slowly: each `artq get` writes the body to a pipe that
/// nobody reads, so once the pipe and its output buffer are full it stops
/// reading its connection (its 1 MB flow-control window closes and it
/// sends no more acknowledgements). The edge must then stop reading the
/// origin for that response: its resident size stays under the documented
/// bound (without backpressure it would read 100 MB per client from a
/// loopback origin, 20 GB in all).
///
/// (A shared slow link in front of 200 clients tests the link instead:
/// its full queue drops the later clients' handshakes.)
#[test]
fn many_slow_clients_keep_the_server_small() {
    let _heavy = heavy();
    let scratch = Scratch::new();
    scratch.served_file("big", 100_000_000, 77);
    let nginx = Nginx::start(&scratch.root(), scratch.path(), "").unwrap_or_else(|e| panic!("{e}"));
    let (edge, edge_addr) = spawn_edge(&scratch, &nginx.origin_url(), &[]);
    thread::sleep(Duration::from_millis(300));
    let baseline = rss_bytes(edge.id());
    let url = format!("https://{edge_addr}/big");
    let mut clients: Vec<std::process::Child> = (0..SLOW_CLIENTS)
        .map(|i| {
            let log = std::fs::File::create(scratch.logs().join(format!("slow-client-{i}.log")))
                .expect("client log");
            std::process::Command::new(common::artq_bin())
                .args([
                    "get",
                    "--insecure",
                    "--recv-window",
                    "1MB",
                    "--timeout",
                    "60",
                ])
                .arg(&url)
                .stdin(std::process::Stdio::null())
                .stdout(std::process::Stdio::piped())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start a client: {e}"))
        })
        .collect();
    // The server's peak while the clients hold their responses.
    let start = Instant::now();
    let mut peak = 0;
    while start.elapsed() < Duration::from_secs(15) {
        peak = peak.max(rss_bytes(edge.id()));
        thread::sleep(Duration::from_millis(250));
    }
    // What each client got into its pipe (read after it is gone, so the
    // read cannot block).
    let received: Vec<usize> = clients
        .iter_mut()
        .map(|c| {
            let _ = c.kill();
            let _ = c.wait();
            let mut got = Vec::new();
            if let Some(out) = c.stdout.as_mut() {
                let _ = out.read_to_end(&mut got);
            }
            got.len()
        })
        .collect();
    clients.clear();
    let receiving = received.iter().filter(|&&n| n > 0).count();
    eprintln!(
        "{SLOW_CLIENTS} slow clients: edge RSS {:.1} MiB at rest, peak {:.1} MiB \
         ({:.2} MiB a client above the base), bound {:.0} MiB; {receiving} received \
         part of the body",
        baseline as f64 / 1048576.0,
        peak as f64 / 1048576.0,
        peak.saturating_sub(baseline) as f64 / 1048576.0 / SLOW_CLIENTS as f64,
        SLOW_CLIENT_BOUND as f64 / 1048576.0,
    );
    assert_eq!(
        receiving, SLOW_CLIENTS,
        "every client must have received part of the body"
    );
    assert!(
        peak < SLOW_CLIENT_BOUND,
        "the edge's RSS reached {peak} bytes with {SLOW_CLIENTS} slow clients (bound {SLOW_CLIENT_BOUND})"
    );
    drop(nginx);
}
