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

mod common;

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
    let server = rt
        .block_on(async { quinn_hq::spawn_server(scratch.root()) })
        .expect("starting the quinn hq-interop server");
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
    let server = rt
        .block_on(async { quinn_hq::spawn_server(scratch.root()) })
        .expect("starting the quinn hq-interop server");
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
    let server = rt
        .block_on(async { quinn_hq::spawn_server(scratch.root()) })
        .expect("starting the quinn hq-interop server");
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
    let server = rt
        .block_on(async { quinn_hq::spawn_server(scratch.root()) })
        .expect("starting the quinn hq-interop server");
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

// ---------------------------------------------------------------------------
// HTTP/3 peers (interop_h3.rs) against the quinn + h3 reference server.
// ---------------------------------------------------------------------------

/// Size of the HTTP/3 transfers (as in `interop_h3.rs`).
const H3_SIZE: u64 = 5_000_000;

/// Starts the quinn h3 server on `scratch`'s root with its own self-signed cert.
fn quinn_h3_server(rt: &tokio::runtime::Runtime, scratch: &Scratch) -> quinn_h3::H3Server {
    rt.block_on(async { quinn_h3::spawn_server(scratch.root(), None) })
        .expect("starting the quinn h3 server")
}

/// aioquic's H3Connection client <- quinn h3 server, 5 MB, byte-exact: proves
/// `tests/interop/aioquic_h3_client.py` for `interop_h3.rs`.
#[test]
fn aioquic_h3_client_downloads_5mb_from_quinn_h3_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", H3_SIZE, 31);
    let rt = common::runtime();
    let server = quinn_h3_server(&rt, &scratch);
    let out = scratch.out("file");
    let url = format!("https://{}/file", server.addr);
    let run = h3_peers::aioquic_h3_download(&url, &out, TRANSFER_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    common::assert_downloaded(
        &run,
        "aioquic h3 client",
        &server.describe(),
        H3_SIZE,
        &file,
        &out,
    );
    let served = server.served();
    assert!(
        served
            .iter()
            .any(|r| r.path == "/file" && r.status == 200 && r.complete),
        "{}",
        server.describe()
    );
}

/// quic-go's http3 client <- quinn h3 server, 5 MB, byte-exact: proves the Go
/// peer (`tests/interop/go`, built by `.ci/run`) for `interop_h3.rs`.
#[test]
fn go_h3_client_downloads_5mb_from_quinn_h3_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", H3_SIZE, 32);
    let rt = common::runtime();
    let server = quinn_h3_server(&rt, &scratch);
    let out = scratch.out("file");
    let url = format!("https://{}/file", server.addr);
    let run = h3_peers::go_h3_download(&url, &out, TRANSFER_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    common::assert_downloaded(
        &run,
        "quic-go h3 client",
        &server.describe(),
        H3_SIZE,
        &file,
        &out,
    );
}

/// Both HTTP/3 clients turn a 404 into exit code 1 with the status in the
/// message and leave no output file: a missing file on `artq serve` cannot
/// pass as an empty download. The Go client also rejects a bad URL (exit 2).
#[test]
fn h3_clients_fail_on_missing_file() {
    let scratch = Scratch::new();
    let rt = common::runtime();
    let server = quinn_h3_server(&rt, &scratch);
    let url = format!("https://{}/missing", server.addr);
    let deadline = Duration::from_secs(60);
    let out = scratch.out("missing-aioquic");
    let run = h3_peers::aioquic_h3_download(&url, &out, deadline).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(1), "aioquic: {}", run.stderr);
    assert!(
        run.stderr.contains("HTTP status 404"),
        "aioquic: {}",
        run.stderr
    );
    assert!(!out.exists(), "aioquic left {}", out.display());
    let out = scratch.out("missing-go");
    let run = h3_peers::go_h3_download(&url, &out, deadline).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(1), "quic-go: {}", run.stderr);
    assert!(
        run.stderr.contains("HTTP status 404"),
        "quic-go: {}",
        run.stderr
    );
    assert!(!out.exists(), "quic-go left {}", out.display());
    assert!(
        server.served().iter().filter(|r| r.status == 404).count() == 2,
        "{}",
        server.describe()
    );

    let client = h3_peers::go_h3_client().unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(client);
    cmd.arg("http://127.0.0.1:1/file");
    let run = process::run_with_deadline(cmd, deadline).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(2), "quic-go: {}", run.stderr);
}

/// The quic-go client honours its timeout (exit code 3) against a peer that
/// never answers, as the aioquic clients do.
#[test]
fn go_h3_client_times_out_on_silent_server() {
    let scratch = Scratch::new();
    let silent = UdpSocket::bind("127.0.0.1:0").expect("binding a UDP socket on 127.0.0.1");
    let addr = silent.local_addr().expect("local addr");
    let client = h3_peers::go_h3_client().unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("never");
    let mut cmd = Command::new(client);
    cmd.args(["-insecure", "-timeout", "2", "-o"])
        .arg(&out)
        .arg(format!("https://{addr}/file"));
    let run =
        process::run_with_deadline(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(run.status.code(), Some(3), "stderr:\n{}", run.stderr);
    assert!(run.stderr.contains("timed out"), "stderr:\n{}", run.stderr);
    assert!(!out.exists(), "left {}", out.display());
    drop(silent);
}

/// What one browser run against the quinn h3 server left behind.
struct BrowserRun {
    /// The Chromium driver's exit status and output.
    run: process::RunOutput,
    /// The requests the server answered.
    served: Vec<quinn_h3::Served>,
    /// The server's account of the run, for messages.
    server: String,
}

/// Loads `page.html#<fragment>` (the digest page, installed into `scratch`'s
/// root) in Chromium from a quinn h3 server that presents `cert`, with
/// Chromium pinning the key hash `spki`.
fn chromium_against_quinn_h3(
    scratch: &Scratch,
    cert: &certs::TestCert,
    spki: &str,
    fragment: &str,
) -> BrowserRun {
    h3_peers::install_digest_page(&scratch.root(), "page.html");
    let rt = common::runtime();
    let server = rt
        .block_on(async {
            quinn_h3::spawn_server(
                scratch.root(),
                Some((vec![cert.cert_der.clone()], cert.key_der())),
            )
        })
        .expect("starting the quinn h3 server");
    let origin = server.addr.to_string();
    let url = format!("https://{origin}/page.html#{fragment}");
    let run = h3_peers::chromium_fetch(
        &url,
        spki,
        &origin,
        &scratch.logs().join("chromium.netlog.json"),
        Duration::from_secs(90),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    BrowserRun {
        run,
        served: server.served(),
        server: server.describe(),
    }
}

/// Unmodified headless Chromium <- quinn h3 server: the page (served from the
/// same directory) fetches a 5 MB file over HTTP/3 and its SHA-256, computed
/// in the page with crypto.subtle, matches the file's. Proves the browser
/// harness (flags, certificate pinning, DevTools driver, page) that
/// `interop_h3.rs` points at `artq serve`.
#[test]
fn chromium_fetches_5mb_over_h3_from_quinn_h3_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", H3_SIZE, 33);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let b = chromium_against_quinn_h3(&scratch, &cert, &cert.spki_sha256_base64, "/file");
    h3_peers::assert_browser_digest(&b.run, &expected, &b.server);
    // The driver succeeds only when the page reports h3 for the page and the
    // file; the server (QUIC only) confirms that Chromium fetched both whole.
    for (path, size) in [("/page.html", None), ("/file", Some(H3_SIZE))] {
        assert!(
            b.served.iter().any(|r| r.path == path
                && r.status == 200
                && r.complete
                && size.is_none_or(|s| r.body_bytes == s)
                && r.user_agent
                    .as_deref()
                    .is_some_and(|ua| ua.contains("Chrome/"))),
            "the server did not see Chromium fetch {path} whole:\n{}",
            b.server
        );
    }
}

/// The browser check is not vacuous: a served file one bit off from the
/// expected one gives another digest (which the check rejects), a missing
/// file makes the driver exit 1 with the HTTP status, and with the pin of
/// another key Chromium refuses the server's self-signed certificate.
#[test]
fn chromium_check_detects_wrong_digest_missing_file_and_untrusted_cert() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", 100_000, 34);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = std::fs::read(&file).expect("read file");
    bytes[54_321] ^= 0x40;
    std::fs::write(&file, &bytes).expect("write damaged file");
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));

    let b = chromium_against_quinn_h3(&scratch, &cert, &cert.spki_sha256_base64, "/file");
    assert!(
        b.run.status.success(),
        "driver: {}\n{}",
        b.run.stderr,
        b.server
    );
    assert_eq!(
        h3_peers::printed_digest(&b.run),
        Some(certs::sha256_hex(&bytes).as_str()),
        "the page must hash exactly the served bytes"
    );
    let err = h3_peers::check_browser_digest(&b.run, &expected, "")
        .expect_err("a wrong digest must fail the check");
    assert!(err.contains(&expected), "message: {err}");

    let b = chromium_against_quinn_h3(&scratch, &cert, &cert.spki_sha256_base64, "/missing");
    assert_eq!(
        b.run.status.code(),
        Some(1),
        "driver: {}\n{}",
        b.run.stderr,
        b.server
    );
    assert!(
        b.run.stderr.contains("HTTP status 404"),
        "driver: {}",
        b.run.stderr
    );
    assert!(
        h3_peers::printed_digest(&b.run).is_none(),
        "stdout: {}",
        b.run.stdout
    );

    let other = certs::TestCert::generate(&scratch.logs()).unwrap_or_else(|e| panic!("{e}"));
    let b = chromium_against_quinn_h3(&scratch, &cert, &other.spki_sha256_base64, "/file");
    assert_eq!(
        b.run.status.code(),
        Some(1),
        "driver: {}\n{}",
        b.run.stderr,
        b.server
    );
    // Over QUIC Chromium reports the handshake failure as
    // ERR_QUIC_PROTOCOL_ERROR; its netlog holds the verdict,
    // ERR_CERT_AUTHORITY_INVALID (-202).
    assert!(
        b.run.stderr.contains("CERT_VERIFIER_JOB: net_error=-202"),
        "expected Chromium to reject the certificate: {}",
        b.run.stderr
    );
    assert!(
        !b.served.iter().any(|r| r.path == "/file"),
        "an untrusted server must not be asked for the file:\n{}",
        b.server
    );
}

/// The SPKI hash the tests compute is the one the README's openssl pipeline
/// prints for the same certificate, so the hand-run browser command works.
#[test]
fn spki_hash_matches_readme_openssl_pipeline() {
    let scratch = Scratch::new();
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(
            "openssl x509 -pubkey -noout -in \"$1\" | openssl pkey -pubin -outform der \
             | openssl dgst -sha256 -binary | base64",
        )
        .arg("sh")
        .arg(&cert.cert_pem);
    let run =
        process::run_with_deadline(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.status.success(),
        "openssl pipeline failed (is openssl installed?): {}",
        run.stderr
    );
    assert_eq!(run.stdout.trim(), cert.spki_sha256_base64);
}

/// base64 and SHA-256 helpers against RFC 4648 and FIPS 180-2 test vectors.
#[test]
fn base64_and_sha256_vectors() {
    for (input, want) in [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ] {
        assert_eq!(certs::base64(input.as_bytes()), want, "{input:?}");
    }
    assert_eq!(
        certs::sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
}

/// Chromium refuses an Ed25519 server certificate even when its key is
/// pinned: it offers no Ed25519 signature scheme (its signature_algorithms
/// are ECDSA P-256/384, RSA-PSS and RSA PKCS#1), so rustls fails the handshake
/// with NoSignatureSchemesInCommon. This is why the browser tests hand
/// `artq serve` an ECDSA P-256 certificate (`--cert/--key`, [`certs::TestCert`]):
/// artq's built-in self-signed certificate is Ed25519.
#[test]
fn chromium_refuses_ed25519_certificate() {
    let scratch = Scratch::new();
    scratch.served_file("file", 1000, 35);
    h3_peers::install_digest_page(&scratch.root(), "page.html");
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("Ed25519 key");
    let cert = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
        .and_then(|p| p.self_signed(&key))
        .expect("Ed25519 certificate");
    let spki =
        certs::base64(ring::digest::digest(&ring::digest::SHA256, &key.public_key_der()).as_ref());
    let rt = common::runtime();
    let server = rt
        .block_on(async {
            quinn_h3::spawn_server(
                scratch.root(),
                Some((
                    vec![cert.der().clone()],
                    rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
                )),
            )
        })
        .expect("starting the quinn h3 server");
    let origin = server.addr.to_string();
    let run = h3_peers::chromium_fetch(
        &format!("https://{origin}/page.html#/file"),
        &spki,
        &origin,
        &scratch.logs().join("chromium.netlog.json"),
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert_eq!(
        run.status.code(),
        Some(1),
        "driver: {}\n{}",
        run.stderr,
        server.describe()
    );
    assert!(
        server.connections() == 0
            && server
                .errors()
                .iter()
                .any(|e| e.contains("NoSignatureSchemesInCommon")),
        "expected rustls to find no signature scheme in common with Chromium:\n{}",
        server.describe()
    );
}

// ---------------------------------------------------------------------------
// The interop matrix (interop_matrix.rs): every case against quic-go's own
// interop server, so that a case failing against artq fails because of artq.
// ---------------------------------------------------------------------------

/// The matrix's `handshake` case against quic-go's interop server.
#[test]
fn matrix_handshake_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKE, QuicGo);
}

/// The matrix's `transfer` case against quic-go's interop server.
#[test]
fn matrix_transfer_against_quic_go_server() {
    matrix::run(&matrix::TRANSFER, QuicGo);
}

/// The matrix's `multiplexing` case against quic-go's interop server.
#[test]
fn matrix_multiplexing_against_quic_go_server() {
    matrix::run(&matrix::MULTIPLEXING, QuicGo);
}

/// The matrix's `chacha20` case against quic-go's interop server.
#[test]
fn matrix_chacha20_against_quic_go_server() {
    matrix::run(&matrix::CHACHA20, QuicGo);
}

/// The matrix's `keyupdate` case against quic-go's interop server.
#[test]
fn matrix_keyupdate_against_quic_go_server() {
    matrix::run(&matrix::KEYUPDATE, QuicGo);
}

/// The matrix's `retry` case against quic-go's interop server.
#[test]
fn matrix_retry_against_quic_go_server() {
    matrix::run(&matrix::RETRY, QuicGo);
}

/// The matrix's `handshakeloss` case against quic-go's interop server.
#[test]
fn matrix_handshakeloss_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKELOSS, QuicGo);
}

/// The matrix's `transferloss` case against quic-go's interop server.
#[test]
fn matrix_transferloss_against_quic_go_server() {
    matrix::run(&matrix::TRANSFERLOSS, QuicGo);
}

/// The matrix's `handshakecorruption` case against quic-go's interop server.
#[test]
fn matrix_handshakecorruption_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKECORRUPTION, QuicGo);
}

/// The matrix's `transfercorruption` case against quic-go's interop server.
#[test]
fn matrix_transfercorruption_against_quic_go_server() {
    matrix::run(&matrix::TRANSFERCORRUPTION, QuicGo);
}

/// The matrix's `blackhole` case against quic-go's interop server.
#[test]
fn matrix_blackhole_against_quic_go_server() {
    matrix::run(&matrix::BLACKHOLE, QuicGo);
}

/// The matrix's `amplificationlimit` case against quic-go's interop server.
#[test]
fn matrix_amplificationlimit_against_quic_go_server() {
    matrix::run(&matrix::AMPLIFICATIONLIMIT, QuicGo);
}

/// The matrix's key update after corruption against quic-go's interop server.
#[test]
fn matrix_keyupdate_after_corruption_against_quic_go_server() {
    matrix::run(&matrix::KEYUPDATE_AFTER_CORRUPTION, QuicGo);
}

/// The matrix's `resumption` case against quic-go's interop server.
#[test]
fn matrix_resumption_against_quic_go_server() {
    matrix::run(&matrix::RESUMPTION, QuicGo);
}

/// The matrix's `zerortt` case against quic-go's interop server.
#[test]
fn matrix_zerortt_against_quic_go_server() {
    matrix::run(&matrix::ZERORTT, QuicGo);
}

// The matrix's evidence checks can fail: each is fed a trace it must reject.

/// `resumption`'s evidence rejects two full handshakes (or one connection)
/// and accepts a full one beside a resumed one, whatever their order.
#[test]
fn resumption_check_rejects_two_full_handshakes() {
    use common::qlog::ConnectionLog;
    let log = |crypto| ConnectionLog {
        received_handshake_crypto: crypto,
        ..ConnectionLog::default()
    };
    assert!(matrix::check_resumed(&[log(592), log(590)]).is_err());
    assert!(matrix::check_resumed(&[log(592)]).is_err());
    assert!(matrix::check_resumed(&[log(0), log(592)]).is_err());
    assert!(matrix::check_resumed(&[log(151), log(592)]).is_ok());
    assert!(matrix::check_resumed(&[log(592), log(151)]).is_ok());
}

/// A v1 long-header packet of `kind` (0 Initial, 2 Handshake) with the given
/// connection IDs and `len` bytes in all.
fn long_packet(kind: u8, dcid: &[u8], scid: &[u8], len: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (kind << 4), 0, 0, 0, 1, dcid.len() as u8];
    p.extend_from_slice(dcid);
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    if kind == 0 {
        p.push(0); // no token
    }
    let rest = len - p.len() - 2; // a 2-byte Length field
    p.extend_from_slice(&(0x4000u16 | rest as u16).to_be_bytes());
    p.resize(len, 0);
    p
}

/// A capture record `ms` after the start.
fn record(
    ms: u64,
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    payload: Vec<u8>,
) -> capture::Record {
    capture::Record {
        at: Duration::from_millis(ms),
        src,
        dst,
        payload,
    }
}

/// Coalesced long headers are walked to the end, a short header ends the
/// datagram, and a header cut short is reported unreadable.
#[test]
fn capture_walks_coalesced_quic_headers() {
    let mut d = long_packet(0, b"12345678", b"abcd", 300);
    d.extend(long_packet(2, b"12345678", b"abcd", 200));
    d.extend([0x40, 1, 2, 3]);
    let kinds: Vec<(capture::PacketKind, usize)> = capture::quic_packets(&d)
        .iter()
        .map(|p| (p.kind, p.len))
        .collect();
    assert_eq!(
        kinds,
        [
            (capture::PacketKind::Initial, 300),
            (capture::PacketKind::Handshake, 200),
            (capture::PacketKind::Short, 4)
        ]
    );
    let cut = &d[..250];
    let kinds: Vec<capture::PacketKind> =
        capture::quic_packets(cut).iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [capture::PacketKind::Unreadable]);
    let vn = [0x80u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        capture::quic_packets(&vn)[0].kind,
        capture::PacketKind::VersionNegotiation
    );
}

/// The amplification check rejects a server that sends four times what it
/// received before validation, or too little Handshake data, or a client
/// that never validates; it accepts 3x and notes an overshoot below 4x.
#[test]
fn capture_amplification_check_rejects_what_it_must() {
    let (client, server) = (
        "127.0.0.1:5000".parse().expect("addr"),
        "127.0.0.1:443".parse().expect("addr"),
    );
    let initial = || long_packet(0, b"cccccccc", b"dd", 1200);
    let flight = |n: usize| long_packet(2, b"dd", b"ss", n);
    let validate = record(50, client, server, long_packet(2, b"ss", b"dd", 50));
    let trace = |sent: &[usize]| {
        let mut t = vec![record(0, client, server, initial())];
        for (i, n) in sent.iter().enumerate() {
            t.push(record(10 + i as u64, server, client, flight(*n)));
        }
        t.push(validate.clone());
        t.push(record(60, server, client, flight(1200)));
        t
    };
    let ok = capture::check_amplification(&trace(&[1200, 1200, 1200]), server, 3000)
        .expect("exactly 3x is allowed");
    assert!(ok.contains("within 3x"), "{ok}");
    let slid = capture::check_amplification(&trace(&[1200, 1200, 1200, 500]), server, 3000)
        .expect("under 4x slides, as in the runner");
    assert!(slid.contains("500 bytes over 3x"), "{slid}");
    let err = capture::check_amplification(&trace(&[1200, 1200, 1200, 1200]), server, 3000)
        .expect_err("4x is a violation");
    assert!(err.contains("4800 bytes"), "{err}");
    let err = capture::check_amplification(&trace(&[1200]), server, 3000)
        .expect_err("the chain was not sent");
    assert!(err.contains("Handshake"), "{err}");
    let mut never = trace(&[1200]);
    never.retain(|r| r.at != validate.at);
    let err = capture::check_amplification(&never, server, 0).expect_err("never validated");
    assert!(err.contains("never validated"), "{err}");
}

/// The outage check needs the server active on both sides of the window and
/// no client datagram inside it.
#[test]
fn capture_outage_check_rejects_what_it_must() {
    let (client, server) = (
        "127.0.0.1:5000".parse().expect("addr"),
        "127.0.0.1:443".parse().expect("addr"),
    );
    let (from, until) = (Duration::from_millis(1000), Duration::from_millis(2000));
    let mut t = vec![
        record(500, server, client, vec![0x40; 10]),
        record(2500, server, client, vec![0x40; 10]),
    ];
    capture::check_outage_spanned(&t, server, from, until).expect("spans the outage");
    t.push(record(1500, client, server, vec![0x40; 10]));
    t.sort_by_key(|r| r.at);
    let err = capture::check_outage_spanned(&t, server, from, until).expect_err("leak");
    assert!(err.contains("inside the outage"), "{err}");
    let early = vec![record(500, server, client, vec![0x40; 10])];
    let err = capture::check_outage_spanned(&early, server, from, until).expect_err("ended");
    assert!(err.contains("did not fall inside"), "{err}");
}

/// What the relay's pcap writer writes, the matrix's reader reads back.
#[test]
fn capture_reads_what_the_relay_writes() {
    let scratch = Scratch::new();
    let path = scratch.path().join("x.pcap");
    let mut out = Vec::new();
    netem::pcap::write_header(&mut out).expect("vec");
    let v4: (std::net::SocketAddr, std::net::SocketAddr) = (
        "127.0.0.1:1".parse().expect("addr"),
        "127.0.0.1:2".parse().expect("addr"),
    );
    let v6: std::net::SocketAddr = "[::1]:3".parse().expect("addr");
    netem::pcap::write_record(
        &mut out,
        Duration::from_micros(1_250_000),
        v4.0,
        v4.1,
        b"abc",
    )
    .expect("vec");
    netem::pcap::write_record(&mut out, Duration::from_secs(2), v6, v6, b"").expect("vec");
    std::fs::write(&path, &out).expect("write");
    let records = capture::read_pcap(&path).expect("reads");
    assert_eq!(records.len(), 2);
    assert_eq!(
        (
            records[0].at,
            records[0].src,
            records[0].dst,
            records[0].payload.as_slice()
        ),
        (Duration::from_micros(1_250_000), v4.0, v4.1, &b"abc"[..])
    );
    assert_eq!((records[1].src, records[1].payload.len()), (v6, 0));
    std::fs::write(&path, &out[..out.len() - 1]).expect("write");
    assert!(
        capture::read_pcap(&path).is_err(),
        "a cut record is an error"
    );
}

/// The qlog summary counts what the matrix's checks read, and skips a line
/// cut short.
#[test]
fn qlog_summary_reads_quic_go_events() {
    let scratch = Scratch::new();
    let lines = [
        r#"{"qlog_format":"JSON-SEQ"}"#,
        "\u{1e}{\"time\":1,\"name\":\"transport:parameters_set\",\"data\":{\"initiator\":\"remote\",\"initial_max_streams_bidi\":100}}",
        r#"{"time":2,"name":"transport:packet_received","data":{"header":{"packet_type":"retry"}}}"#,
        r#"{"time":3,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","key_phase_bit":true}}}"#,
        r#"{"time":4,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","key_phase_bit":false}}}"#,
        r#"{"time":5,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","key_phase_bit":true}}}"#,
        r#"{"time":6,"name":"transport:connection_closed","data":{"trigger":"idle_timeout"}}"#,
        r#"{"time":7,"name":"transport:packet_sent","data":{"hea"#,
    ];
    std::fs::write(scratch.path().join("a.sqlog"), lines.join("\n")).expect("write");
    std::fs::write(scratch.path().join("b.txt"), "not a qlog").expect("write");
    let logs = common::qlog::read_dir(scratch.path()).expect("reads");
    assert_eq!(logs.len(), 1);
    let c = &logs[0];
    assert_eq!(
        (
            c.retries_received,
            c.sent_key_phase_1,
            c.received_key_phase_1,
            c.received_1rtt
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(c.peer_max_streams_bidi, Some(100));
    assert!(c
        .closed
        .as_deref()
        .is_some_and(|s| s.contains("idle_timeout")));
}
