//! Interop of `artq serve` and `artq get` with quinn, an independent QUIC stack.
//!
//! Why this exists: DESIGN.md promises that every artq sender works with an
//! unmodified receiver and that transfers are byte-exact. These tests hold the
//! CLI to that promise against quinn 0.11 (public API only) in both roles:
//! quinn downloads from `artq serve`, and `artq get` downloads from quinn. The
//! same quinn peer passes `harness_selfcheck/`, so a failure here is artq's.
//!
//! CLI contract relied on (DESIGN.md "Command line"):
//! - `artq serve --listen 127.0.0.1:0 --root DIR` prints exactly one stdout line
//!   `listening on <ip:port>` once bound, then serves hq-interop until killed.
//! - `artq get https://127.0.0.1:PORT/path --insecure -o FILE` exits 0 after a
//!   complete download and prints `received N bytes in T s: G Mbit/s` to
//!   stderr; on failure it exits non-zero with an error message.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{process, Scratch};

/// Size of the bulk transfers (the brief's 20 MB).
const SIZE: u64 = 20_000_000;

/// Bound on one 20 MB transfer, debug build included: a hang fails the test.
const TRANSFER_DEADLINE: Duration = Duration::from_secs(180);

/// An unmodified quinn client downloads 20 MB from `artq serve`, byte-exact.
#[test]
fn quinn_client_downloads_20mb_from_artq_serve() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 11);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    let out = scratch.out("file");
    let fetched = common::quinn_download(&rt, addr, "/file", &out, TRANSFER_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert_eq!(fetched.bytes, SIZE, "server: {}", server.describe());
    common::compare_files(&file, &out).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        server.try_status().is_none(),
        "artq serve must keep running: {}",
        server.describe()
    );
}

/// `artq get --insecure -o FILE` downloads 20 MB from a quinn server,
/// byte-exact, and prints the summary line with the right byte count.
#[test]
fn artq_get_downloads_20mb_from_quinn_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 12);
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    let out = scratch.out("file");
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(format!("https://{}/file", server.addr))
        .args(["--insecure", "--alpn", "hq-interop", "-o"])
        .arg(&out);
    let run = process::run_with_deadline(cmd, TRANSFER_DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    common::assert_downloaded(&run, "artq get", "", SIZE, &file, &out);
}

/// `artq get` reports a refused request (the quinn server resets the stream
/// for a missing file) as a non-zero exit with a message, within the deadline:
/// never a hang and never a silent empty file.
#[test]
fn artq_get_fails_cleanly_when_quinn_server_refuses() {
    let scratch = Scratch::new();
    let rt = common::runtime();
    let server = common::quinn_hq_server(&rt, &scratch);
    let out = scratch.out("missing");
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(format!("https://{}/missing", server.addr))
        .args(["--insecure", "--alpn", "hq-interop", "-o"])
        .arg(&out);
    let run =
        process::run_with_deadline(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !run.status.success(),
        "artq get must fail on a refused request; stderr:\n{}",
        run.stderr
    );
    assert!(
        !run.stderr.trim().is_empty(),
        "artq get must say why it failed"
    );
    assert_eq!(
        common::summary_bytes(&run.stderr),
        None,
        "no success summary on failure:\n{}",
        run.stderr
    );
}

/// `artq serve` never serves a file outside `--root`: requests with `..`
/// either fail or return nothing, never the neighbouring file's bytes.
#[test]
fn artq_serve_refuses_paths_outside_root() {
    let scratch = Scratch::new();
    scratch.served_file("file", 1000, 13);
    let secret = scratch.path().join("secret");
    common::write_seeded_file(&secret, 1000, 14).expect("writing the secret file");
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    for path in ["/../secret", "/./../secret", "/%2e%2e/secret"] {
        let out = scratch.out("refused");
        match common::quinn_download(&rt, addr, path, &out, Duration::from_secs(30)) {
            Err(_) => {}
            Ok(f) => assert_eq!(
                f.bytes, 0,
                "artq serve answered {path:?} with {} bytes",
                f.bytes
            ),
        }
    }
    // Still alive and serving after hostile requests.
    let out = scratch.out("file");
    let fetched = common::quinn_download(&rt, addr, "/file", &out, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert_eq!(fetched.bytes, 1000);
}
