//! Self-check of the interop harness, with no artq QUIC code involved.
//!
//! Why this exists: `interop_quinn.rs` and `interop_aioquic.rs` put artq
//! between two parts of this harness (a quinn or aioquic peer on one side, the
//! process and file helpers on the other). These tests run the same peers
//! against each other and exercise every failure path of the helpers, so when
//! an interop test fails, the peers and the scaffolding are known good and the
//! failure is attributable to artq. The interop matrix's cases
//! (`interop_matrix.rs`) run here against quic-go's own interop server; their
//! network is `artq link` (netem's relay, no QUIC), which they thereby
//! validate too.
//!
//! One test binary in four files: the hq peers and the helpers here, the
//! HTTP/3 peers in [`h3_peer_checks`], the matrix in [`matrix_cases`], and
//! the edge tests' real components (nginx, ffmpeg, the many-URL HTTP/3
//! fetcher, the Chromium live player) in [`edge_checks`].

#[path = "../common/mod.rs"]
mod common;
mod edge_checks;
mod h3_peer_checks;
mod matrix_cases;

use std::net::UdpSocket;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::matrix::{self, ServerUnderTest::QuicGo};
use common::{capture, certs, h3_peers, process, quinn_h3, quinn_hq, Scratch};

/// Bound on any single transfer in these tests (a hung peer fails, not hangs).
const TRANSFER_DEADLINE: Duration = Duration::from_secs(120);

/// quinn client <-> quinn server, 20 MB, byte-exact: the reference pair for
/// the 20 MB artq tests in `interop_quinn.rs`.
#[test]
fn quinn_client_downloads_20mb_from_quinn_server() {
    const SIZE: u64 = 20_000_000;
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 1);
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    let out = scratch.out("file");
    let fetched = common::quinn_download(&rt, server.addr, "/file", &out, TRANSFER_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fetched.bytes, SIZE);
    common::compare_files(&file, &out).unwrap_or_else(|e| panic!("{e}"));
}

/// aioquic client script <-> quinn server, 5 MB, byte-exact: proves the python
/// peer used by `interop_aioquic.rs`, and its summary line, are right.
#[test]
fn aioquic_client_downloads_5mb_from_quinn_server() {
    const SIZE: u64 = 5_000_000;
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 2);
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    let out = scratch.out("file");
    let url = format!("https://{}/file", server.addr);
    let run =
        common::aioquic_download(&url, &out, TRANSFER_DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    common::assert_downloaded(&run, "aioquic client", "", SIZE, &file, &out);
}

/// The quinn server refuses what it must not serve (parent dirs, missing files,
/// directories) by resetting the stream, and the quinn client reports that as an
/// error rather than an empty download.
#[test]
fn quinn_server_refuses_paths_outside_root_and_missing_files() {
    let scratch = Scratch::new();
    scratch.served_file("file", 1000, 3);
    common::write_seeded_file(&scratch.path().join("secret"), 1000, 4).expect("writing secret");
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    for path in [
        "/../secret",
        "/./../secret",
        "/missing",
        "/",
        "no-leading-slash",
    ] {
        let out = scratch.out("refused");
        let result = common::quinn_download(&rt, server.addr, path, &out, Duration::from_secs(30));
        let err = result.expect_err(&format!("request for {path:?} must be refused"));
        assert!(
            err.contains("reset"),
            "request for {path:?}: expected a stream reset, got: {err}"
        );
    }
    // The same server still serves a good request afterwards.
    let out = scratch.out("file");
    let fetched =
        common::quinn_download(&rt, server.addr, "/./file", &out, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(fetched.bytes, 1000);
}

/// Path mapping of the quinn server, case by case.
#[test]
fn resolve_stays_under_root() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.root().join("d")).expect("mkdir");
    scratch.served_file("d/f", 10, 5);
    let root = scratch.root();
    assert_eq!(quinn_hq::resolve(&root, "/d/f"), Some(root.join("d/f")));
    assert_eq!(quinn_hq::resolve(&root, "//d//./f"), Some(root.join("d/f")));
    for bad in ["/d/../d/f", "/..", "/d", "d/f", "/d\\f", "/d/f\0", ""] {
        assert_eq!(
            quinn_hq::resolve(&root, bad),
            None,
            "{bad:?} must not resolve"
        );
    }
}

/// The aioquic client exits non-zero, and leaves no output file, when the
/// server refuses the request: an artq refusal will therefore not look like
/// an empty successful download.
#[test]
fn aioquic_client_fails_on_refused_request() {
    let scratch = Scratch::new();
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    let out = scratch.out("missing");
    let url = format!("https://{}/missing", server.addr);
    let run = common::aioquic_download(&url, &out, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(1), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("reset"), "stderr:\n{}", run.stderr);
    assert!(
        !out.exists(),
        "a failed download must not leave {}",
        out.display()
    );
}

/// The aioquic client honours `--timeout` (exit code 3) against a peer that
/// never answers, so a hung artq cannot hang the python side either.
#[test]
fn aioquic_client_times_out_on_silent_server() {
    let scratch = Scratch::new();
    let silent = UdpSocket::bind("127.0.0.1:0").expect("binding a UDP socket on 127.0.0.1");
    let addr = silent.local_addr().expect("local addr");
    let python = common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("never");
    let mut cmd = Command::new(python);
    cmd.arg(common::aioquic_client_script())
        .args([
            "--insecure",
            "--timeout",
            "2",
            &format!("https://{addr}/file"),
            "-o",
        ])
        .arg(&out);
    let run =
        process::run_with_deadline(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(3), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("timed out"), "stderr:\n{}", run.stderr);
    drop(silent);
}

/// `spawn_listening` parses the ready line and its guard kills the child on drop.
#[test]
fn spawn_listening_reads_address_and_guard_kills_child() {
    let scratch = Scratch::new();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo 'listening on 127.0.0.1:4433'; exec sleep 60"]);
    let (mut guard, addr) =
        process::spawn_listening(cmd, "fake-server", &scratch.logs(), Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(addr, "127.0.0.1:4433".parse().expect("valid address"));
    assert!(
        guard.try_status().is_none(),
        "the fake server should still run"
    );
    let pid = guard.id();
    drop(guard);
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} survived its guard"
    );
}

/// A server that exits without the ready line fails fast with a clear message
/// (artq's current state before `serve` exists), instead of hanging.
#[test]
fn spawn_listening_fails_fast_when_server_exits_or_misprints() {
    let scratch = Scratch::new();
    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo 'oops' >&2; exit 3"]);
    let started = std::time::Instant::now();
    let err = process::spawn_listening(cmd, "dies", &scratch.logs(), Duration::from_secs(30))
        .err()
        .expect("a server that exits must be an error");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
    assert!(
        err.contains("listening on") && err.contains("oops"),
        "message: {err}"
    );

    let mut cmd = Command::new("sh");
    cmd.args(["-c", "echo 'starting up'; exec sleep 60"]);
    let err = process::spawn_listening(cmd, "chatty", &scratch.logs(), Duration::from_secs(10))
        .err()
        .expect("a banner before the ready line breaks the contract");
    assert!(err.contains("starting up"), "message: {err}");

    for bad in [
        "listening on 127.0.0.1:0",
        "listening on localhost:80",
        "listening on",
    ] {
        assert!(
            process::parse_listening_line(bad).is_err(),
            "{bad:?} must be rejected"
        );
    }
}

/// `run_with_deadline` kills a child that outlives its deadline.
#[test]
fn run_with_deadline_kills_hung_child() {
    let mut cmd = Command::new("sleep");
    cmd.arg("60");
    let started = std::time::Instant::now();
    let err = process::run_with_deadline(cmd, Duration::from_millis(300))
        .expect_err("sleep 60 must exceed a 300 ms deadline");
    assert!(err.contains("still running"), "message: {err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "took {:?}",
        started.elapsed()
    );
}

/// Seeded content is reproducible and the comparison catches a one-byte flip
/// and a truncation, each with its offset.
#[test]
fn seeded_files_are_deterministic_and_compare_catches_damage() {
    let scratch = Scratch::new();
    let p = |n: &str| scratch.path().join(n);
    let size = 3 * common::CHUNK as u64 + 17;
    common::write_seeded_file(&p("a"), size, 7).expect("write a");
    common::write_seeded_file(&p("b"), size, 7).expect("write b");
    common::write_seeded_file(&p("c"), size, 8).expect("write c");
    assert_eq!(std::fs::metadata(p("a")).expect("stat").len(), size);
    common::compare_files(&p("a"), &p("b")).expect("same seed, same bytes");
    assert!(
        common::compare_files(&p("a"), &p("c")).is_err(),
        "different seeds must differ"
    );

    let mut bytes = std::fs::read(p("a")).expect("read a");
    let at = 2 * common::CHUNK + 5;
    bytes[at] ^= 1;
    std::fs::write(p("flipped"), &bytes).expect("write flipped");
    let err = common::compare_files(&p("a"), &p("flipped")).expect_err("one flipped bit");
    assert!(err.contains(&format!("at byte {at}")), "message: {err}");

    bytes[at] ^= 1;
    bytes.truncate(bytes.len() - 1);
    std::fs::write(p("short"), &bytes).expect("write short");
    let err = common::compare_files(&p("a"), &p("short")).expect_err("one byte short");
    assert!(err.contains(&format!("expected {size}")), "message: {err}");
}

/// The summary-line parser accepts the contract's shape and nothing else.
#[test]
fn summary_line_parser() {
    let ok = "noise\nreceived 20000000 bytes in 1.234 s: 129.6 Mbit/s\n";
    assert_eq!(common::summary_bytes(ok), Some(20_000_000));
    for bad in [
        "received 20000000 bytes",
        "received x bytes in 1.0 s: 1.0 Mbit/s",
        "received 5 bytes in fast s: 1.0 Mbit/s",
        "received 5 bytes in 1.0 s: 1.0 MB/s",
    ] {
        assert_eq!(common::summary_bytes(bad), None, "{bad:?}");
    }
}
