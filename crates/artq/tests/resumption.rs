//! Session resumption and 0-RTT over real UDP (issue 16): `artq get
//! --reconnect 1` fetches a file twice, the second time on a new connection
//! that resumes the session and sends its request in 0-RTT, from `artq serve
//! --0rtt` and from aioquic's server (an independent stack issuing its
//! own tickets). Each body is byte-exact; `artq get`'s per-connection line
//! says the second connection resumed, the server accepted early data and at
//! least one 0-RTT packet left. By default `artq serve` issues tickets
//! without early data (the second connection resumes with no 0-RTT); with
//! `--no-resumption` it issues none, so nothing resumes.
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

const SIZE: u64 = 200_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// `artq get --reconnect 1 --alpn <alpn> --insecure URL -o out`.
fn artq_get_twice(url: &str, alpn: &str, out: &Path) -> process::RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(url)
        .args(["--insecure", "--reconnect", "1", "--timeout", "50"])
        .args(["--alpn", alpn, "-o"])
        .arg(out);
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// The number of 0-RTT packets in `artq get`'s line for connection `n`,
/// asserting the line starts as `expected` says.
fn connection_line(run: &process::RunOutput, n: usize, expected: &str) -> u64 {
    let prefix = format!("connection {n}: ");
    let line = run
        .stderr
        .lines()
        .find(|l| l.starts_with(&prefix))
        .unwrap_or_else(|| panic!("no line for connection {n}:\n{}", run.stderr));
    assert!(
        line[prefix.len()..].starts_with(expected),
        "connection {n}: expected `{expected}`, got `{line}`"
    );
    line.rsplit(", ")
        .next()
        .and_then(|s| s.split(' ').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no 0-RTT packet count in `{line}`"))
}

#[test]
fn artq_get_resumes_with_zero_rtt_from_artq_serve() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 41);
    let (mut server, addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--0rtt"])
            .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = artq_get_twice(&format!("https://{addr}/file"), "hq-interop", &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert_eq!(connection_line(&run, 1, "full handshake, no 0-RTT"), 0);
    let early = connection_line(&run, 2, "resumed, 0-RTT accepted");
    assert!(early >= 1, "{}", run.stderr);

    // HTTP/3 resumes too, but waits for the handshake to send.
    let out = scratch.out("file-h3");
    let run = artq_get_twice(&format!("https://{addr}/file"), "h3", &out);
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert_eq!(connection_line(&run, 2, "resumed"), 0);
}

#[test]
fn artq_serve_resumes_by_default_without_zero_rtt() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 44);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = artq_get_twice(&format!("https://{addr}/file"), "hq-interop", &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert_eq!(connection_line(&run, 2, "resumed, no 0-RTT"), 0);
}

#[test]
fn artq_serve_without_resumption_issues_no_ticket() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 42);
    let (mut server, addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--no-resumption"])
            .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = artq_get_twice(&format!("https://{addr}/file"), "hq-interop", &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert_eq!(connection_line(&run, 2, "full handshake, no 0-RTT"), 0);
}

#[test]
fn artq_get_resumes_with_zero_rtt_from_aioquic() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 43);
    let (mut server, addr) = common::spawn_aioquic_server(&scratch, &["--resumption"]);
    let out = scratch.out("file");
    let run = artq_get_twice(&format!("https://{addr}/file"), "hq-interop", &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    let early = connection_line(&run, 2, "resumed, 0-RTT accepted");
    assert!(early >= 1, "{}", run.stderr);
}
