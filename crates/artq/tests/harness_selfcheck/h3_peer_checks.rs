//! HTTP/3 peers (`interop_h3.rs`) against the quinn + h3 reference
//! server, and the Chromium checks, so that an HTTP/3 test failing against
//! artq fails because of artq.

use super::*;

/// Size of the HTTP/3 transfers (as in `interop_h3.rs`).
const H3_SIZE: u64 = 5_000_000;

/// aioquic's H3Connection client <- quinn h3 server, 5 MB, byte-exact: proves
/// `tests/interop/aioquic_h3_client.py` for `interop_h3.rs`.
#[test]
fn aioquic_h3_client_downloads_5mb_from_quinn_h3_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", H3_SIZE, 31);
    let rt = common::runtime();
    let server = common::quinn_h3_server(&rt, &scratch);
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
    let server = common::quinn_h3_server(&rt, &scratch);
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
    let server = common::quinn_h3_server(&rt, &scratch);
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
