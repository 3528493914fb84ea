//! HTTP/3 interop of `artq serve` and `artq get` with independent stacks:
//! aioquic (Python), quic-go (Go), headless Chromium, and quinn + h3 (Rust).
//!
//! Why this exists: `artq serve` negotiates ALPN `h3` or `hq-interop` per
//! connection and `artq get` speaks h3 by default. A CDN's real clients are
//! browsers and HTTP/3 libraries, so these tests download from `artq serve`
//! with three unmodified HTTP/3 clients (5 MB, byte-exact or SHA-256 exact),
//! one of them Chromium through a lossy emulated link with ART recovery, and
//! download with `artq get --alpn h3` from the quinn + h3 reference server.
//! Every peer here passes the same check against the quinn h3 server in
//! `harness_selfcheck/`, so a failure here is artq's.
//!
//! Needs the peers `.ci/run` provides: the venv python with aioquic
//! (`$ARTQ_PYTHON`), the quic-go client (`$ARTQ_H3_CLIENT`, built from
//! `tests/interop/go`) and Chromium (`$ARTQ_CHROMIUM`). A missing peer fails
//! the test with a message saying how to get it; nothing is skipped.
//!
//! CLI contract relied on:
//! - `artq serve --listen 127.0.0.1:0 --root DIR [--recovery S] [--cert F --key F]`
//!   prints `listening on <ip:port>` first, then serves HTTP/3 (ALPN `h3`):
//!   `GET /path` answers 200 with the file, 404 for a missing file. The
//!   clients check `content-length` against the body when it is sent, but do
//!   not need it; Chromium needs no `content-type` (it sniffs the page as
//!   HTML), and also asks for `/favicon.ico` (a 404 is fine).
//! - `artq link --listen 127.0.0.1:0 --to ADDR [link options]` prints
//!   `listening on <ip:port>` and relays UDP both ways.
//! - `artq get URL --insecure --alpn h3 --timeout S -o FILE` exits 0 after a
//!   complete download and prints `received N bytes in T s: G Mbit/s` on stderr.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{certs, h3_peers, process, quinn_h3, Scratch};

/// Size of every transfer (5 MB: the brief's size for the slower peers).
const SIZE: u64 = 5_000_000;

/// Bound on one loopback download (debug build, loaded 2-core CI machine).
const TRANSFER_DEADLINE: Duration = Duration::from_secs(120);

/// Bound on a browser run through the lossy link: 5 MB at 20 Mbit/s is 2 s
/// of serialization; with quinn as the sender the run takes about 30 s (its
/// Cubic backs off at 5% loss); the rest is margin for a loaded CI machine.
/// The driver's own timeout fires 5 s earlier with the page's state.
const LOSSY_BROWSER_DEADLINE: Duration = Duration::from_secs(180);

/// aioquic's H3Connection client downloads 5 MB from `artq serve`, byte-exact.
#[test]
fn aioquic_h3_client_downloads_5mb_from_artq_serve() {
    common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 41);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run =
        h3_peers::aioquic_h3_download(&format!("https://{addr}/file"), &out, TRANSFER_DEADLINE)
            .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "aioquic h3 client", &context, SIZE, &file, &out);
}

/// quic-go's http3 client downloads 5 MB from `artq serve`, byte-exact.
#[test]
fn go_h3_client_downloads_5mb_from_artq_serve() {
    h3_peers::go_h3_client().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 42);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = h3_peers::go_h3_download(&format!("https://{addr}/file"), &out, TRANSFER_DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "quic-go h3 client", &context, SIZE, &file, &out);
}

/// Both HTTP/3 clients get a 404 (exit 1, status in the message) for a
/// missing file from `artq serve`, and the server keeps running.
#[test]
fn h3_clients_get_404_for_missing_file_from_artq_serve() {
    let scratch = Scratch::new();
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let url = format!("https://{addr}/missing");
    let deadline = Duration::from_secs(60);
    for (client, run) in [
        (
            "aioquic h3 client",
            h3_peers::aioquic_h3_download(&url, &scratch.out("a"), deadline),
        ),
        (
            "quic-go h3 client",
            h3_peers::go_h3_download(&url, &scratch.out("g"), deadline),
        ),
    ] {
        let run = run.unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
        assert!(
            run.status.code() == Some(1) && run.stderr.contains("HTTP status 404"),
            "{client} should report HTTP status 404 ({}):\n{}\nserver: {}",
            run.status,
            run.stderr,
            server.describe()
        );
    }
    assert!(
        server.try_status().is_none(),
        "artq serve must keep running: {}",
        server.describe()
    );
}

/// Starts `artq serve --recovery art --cert C --key K` for `scratch`'s root
/// with the digest page installed as `page.html`.
fn artq_serve_for_browser(
    scratch: &Scratch,
    cert: &certs::TestCert,
) -> (process::ChildGuard, std::net::SocketAddr) {
    h3_peers::install_digest_page(&scratch.root(), "page.html");
    let mut extra = vec!["--recovery".to_string(), "art".to_string()];
    extra.extend(cert.serve_args());
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &extra)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Headless Chromium loads the digest page from `artq serve` directly
/// (loopback, no loss) and the 5 MB file's SHA-256 computed in the page
/// matches. The lossless baseline of the next test: if this one fails, the
/// problem is HTTP/3 or QUIC interop with Chromium, not loss recovery.
#[test]
fn chromium_fetches_5mb_over_h3_from_artq_serve() {
    h3_peers::chromium().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 43);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let (mut server, addr) = artq_serve_for_browser(&scratch, &cert);
    let origin = addr.to_string();
    let netlog = scratch.logs().join("chromium.netlog.json");
    let run = h3_peers::chromium_fetch(
        &format!("https://{origin}/page.html#/file"),
        &cert.spki_sha256_base64,
        &origin,
        &netlog,
        TRANSFER_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    h3_peers::assert_browser_digest(&run, &expected, &format!("server: {}", server.describe()));
    assert!(
        server.try_status().is_none(),
        "artq serve must keep running: {}",
        server.describe()
    );
}

/// Headless Chromium loads the digest page from `artq serve --recovery art`
/// through `artq link` (20 Mbit/s, 40 ms RTT, 5% random loss each way) and
/// the 5 MB file's SHA-256 computed in the page matches: ART recovery with an
/// unmodified browser as the receiver.
#[test]
fn chromium_fetches_5mb_over_h3_from_artq_serve_through_lossy_link() {
    h3_peers::chromium().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 44);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let (mut server, server_addr) = artq_serve_for_browser(&scratch, &cert);
    let (mut link, link_addr) = lossy_link(&scratch, server_addr);

    // Chromium talks to the link; the certificate is the server's.
    let origin = link_addr.to_string();
    let netlog = scratch.logs().join("chromium.netlog.json");
    let run = h3_peers::chromium_fetch(
        &format!("https://{origin}/page.html#/file"),
        &cert.spki_sha256_base64,
        &origin,
        &netlog,
        LOSSY_BROWSER_DEADLINE,
    )
    .unwrap_or_else(|e| {
        panic!(
            "{e}\nlink: {}\nserver: {}",
            link.describe(),
            server.describe()
        )
    });
    let context = format!("link: {}\nserver: {}", link.describe(), server.describe());
    h3_peers::assert_browser_digest(&run, &expected, &context);
    assert!(
        server.try_status().is_none(),
        "server exited: {}",
        server.describe()
    );
    assert!(
        link.try_status().is_none(),
        "link exited: {}",
        link.describe()
    );
}

/// Starts `artq link` in front of `to` with the browser tests' lossy link:
/// 20 Mbit/s, 40 ms RTT, 5% random loss each way, seed 1.
fn lossy_link(
    scratch: &Scratch,
    to: std::net::SocketAddr,
) -> (process::ChildGuard, std::net::SocketAddr) {
    let mut link_cmd = Command::new(common::artq_bin());
    link_cmd
        .args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(to.to_string())
        .args(["--bw", "20", "--rtt", "40", "--loss", "0.05", "--seed", "1"]);
    let (link, link_addr) = process::spawn_listening(
        link_cmd,
        "artq-link",
        &scratch.logs(),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        link_addr.ip().is_loopback(),
        "artq link reports {link_addr}"
    );
    (link, link_addr)
}

/// Headless Chromium loads the digest page from the quinn + h3 reference
/// server through `artq link` (the lossy link of the previous test) and the
/// 5 MB file's SHA-256 matches: proves the relay carries a browser's QUIC
/// (and that the lossy browser harness finishes well inside its deadline),
/// so a failure of the previous test is `artq serve`'s.
#[test]
fn chromium_fetches_5mb_from_quinn_h3_server_through_lossy_link() {
    h3_peers::chromium().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 46);
    let expected = certs::sha256_file_hex(&file).unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
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
    let (mut link, link_addr) = lossy_link(&scratch, server.addr);
    let origin = link_addr.to_string();
    let run = h3_peers::chromium_fetch(
        &format!("https://{origin}/page.html#/file"),
        &cert.spki_sha256_base64,
        &origin,
        &scratch.logs().join("chromium.netlog.json"),
        LOSSY_BROWSER_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}\nlink: {}\n{}", link.describe(), server.describe()));
    let context = format!("link: {}\n{}", link.describe(), server.describe());
    h3_peers::assert_browser_digest(&run, &expected, &context);
    assert!(
        link.try_status().is_none(),
        "link exited: {}",
        link.describe()
    );
}

/// `artq get --alpn h3 --insecure -o FILE` downloads 5 MB from the quinn + h3
/// reference server, byte-exact, with the usual summary line.
#[test]
fn artq_get_h3_downloads_5mb_from_quinn_h3_server() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 45);
    let rt = common::runtime();
    let server = common::quinn_h3_server(&rt, &scratch);
    let out = scratch.out("file");
    let run = h3_peers::artq_get_h3(
        &format!("https://{}/file", server.addr),
        &out,
        TRANSFER_DEADLINE,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    common::assert_downloaded(
        &run,
        "artq get --alpn h3",
        &server.describe(),
        SIZE,
        &file,
        &out,
    );
    assert!(
        server
            .served()
            .iter()
            .any(|r| r.path == "/file" && r.status == 200 && r.complete),
        "{}",
        server.describe()
    );
}

/// `artq get --alpn h3` exits non-zero, names the status and prints no
/// success summary when the quinn h3 server answers 404 (the hq-interop
/// refusal contract of `interop_quinn.rs`, in HTTP/3 terms).
#[test]
fn artq_get_h3_fails_cleanly_on_404() {
    let scratch = Scratch::new();
    let rt = common::runtime();
    let server = common::quinn_h3_server(&rt, &scratch);
    let out = scratch.out("missing");
    let run = h3_peers::artq_get_h3(
        &format!("https://{}/missing", server.addr),
        &out,
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert!(
        !run.status.success() && run.stderr.contains("404"),
        "artq get must fail and name the status 404 ({}):\n{}\n{}",
        run.status,
        run.stderr,
        server.describe()
    );
    assert_eq!(
        common::summary_bytes(&run.stderr),
        None,
        "no success summary on failure:\n{}",
        run.stderr
    );
}
