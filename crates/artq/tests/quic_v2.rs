//! QUIC version 2 (RFC 9369) end to end over real UDP: `artq get
//! --quic-version v2` downloads a file from `artq serve` (which speaks v1
//! and v2 by default) in v2, byte-exact; both ends report v2. A server
//! limited to v1 (`--quic-versions v1`) answers with Version Negotiation,
//! and the v2 client fails instead of silently using v1.

mod common;

use std::process::Command;
use std::time::Duration;

use common::process;
use common::Scratch;

const SIZE: u64 = 300_000;

/// `artq get --quic-version v2 --alpn hq-interop --insecure URL -o out`.
fn get_v2(url: &str, out: &std::path::Path) -> process::RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(url)
        .args(["--insecure", "--quic-version", "v2", "--timeout", "5"])
        .args(["--alpn", "hq-interop", "-o"])
        .arg(out);
    process::run_with_deadline(cmd, Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn artq_get_downloads_in_v2_from_artq_serve() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 52);
    let (mut server, addr, stats) =
        common::spawn_artq_serve_with_stats(&scratch.root(), &scratch.logs(), &[])
            .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = get_v2(&format!("https://{addr}/file"), &out);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert!(
        run.stderr.contains("QUIC version: v2"),
        "artq get did not report v2:\n{}",
        run.stderr
    );
    let summary = stats.first(&mut server);
    assert_eq!(
        summary["quic_version"], "v2",
        "the server did not run v2: {summary}"
    );
}

#[test]
fn a_v1_only_server_refuses_a_v2_client() {
    let scratch = Scratch::new();
    scratch.served_file("file", 1000, 53);
    let (mut server, addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--quic-versions", "v1"])
            .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let run = get_v2(&format!("https://{addr}/file"), &out);
    assert!(
        !run.status.success(),
        "a v2 download from a v1-only server succeeded:\n{}\nserver: {}",
        run.stderr,
        server.describe()
    );
}
