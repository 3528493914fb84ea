//! Retry over real UDP (issue 15, bug 5), with independent peers on both
//! sides: `artq get` follows the Retry of aioquic's server (it used to time
//! out against `serve(..., retry=True)`), and `artq serve --retry` makes
//! `artq get` (HTTP/3 and hq-interop) and quinn's client prove their address
//! first. Each download is byte-exact; the server's statistics line says the
//! connection went through a Retry.
//!
//! Needs the venv python with aioquic for the aioquic case (`$ARTQ_PYTHON`,
//! default `<workspace>/.venv/bin/python`); without it that test fails and
//! says so.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process;
use common::Scratch;

const SIZE: u64 = 1_000_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// `artq get --alpn <alpn> --insecure URL -o out`.
fn artq_get(url: &str, alpn: &str, out: &Path) -> process::RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(url)
        .args(["--insecure", "--alpn", alpn, "--timeout", "50", "-o"])
        .arg(out);
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// `artq get` downloads from aioquic's hq-interop server started with
/// `retry=True`, byte-exact.
#[test]
fn artq_get_follows_aioquic_retry() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 31);
    let (mut server, addr) = common::spawn_aioquic_server(&scratch, &["--retry"]);
    let out = scratch.out("file");
    let run = artq_get(&format!("https://{addr}/file"), "hq-interop", &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
}

/// `artq serve --retry`: `artq get` over HTTP/3 and over hq-interop goes
/// through the Retry and downloads byte-exact.
#[test]
fn artq_get_through_artq_serve_retry() {
    for alpn in ["h3", "hq-interop"] {
        let scratch = Scratch::new();
        let file = scratch.served_file("file", SIZE, 32);
        let (mut server, addr, stats) =
            common::spawn_artq_serve_with_stats(&scratch.root(), &scratch.logs(), &["--retry"])
                .unwrap_or_else(|e| panic!("{e}"));
        let out = scratch.out("file");
        let run = artq_get(&format!("https://{addr}/file"), alpn, &out);
        let context = format!("server: {}", server.describe());
        common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
        let summary = stats.first(&mut server);
        assert_eq!(summary["retried"], true, "{alpn}: {summary}");
    }
}

/// `artq serve --retry`: quinn's client (which follows Retry on its own)
/// downloads byte-exact.
#[test]
fn quinn_through_artq_serve_retry() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 33);
    let (mut server, addr, stats) =
        common::spawn_artq_serve_with_stats(&scratch.root(), &scratch.logs(), &["--retry"])
            .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    let out = scratch.out("file");
    let fetched = common::quinn_download(&rt, addr, "/file", &out, DEADLINE)
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert_eq!(fetched.bytes, SIZE);
    common::compare_files(&file, &out).unwrap_or_else(|e| panic!("{e}"));
    let summary = stats.first(&mut server);
    assert_eq!(summary["retried"], true, "{summary}");
}
