//! A server's preferred address over real UDP (RFC 9000 §9.6, issue 16):
//! `artq serve --preferred-address 127.0.0.2:0` also listens there and
//! offers it; `artq get` moves there once the handshake is confirmed and
//! finishes the download there, byte-exact. Both ends say so: the client's
//! `moved to the server's preferred address` line, and the server's
//! `--stats-json` line (the address the connection ended on, one path
//! change). With `--no-preferred-address` the client stays.

mod common;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process;
use common::Scratch;

/// Large enough that the download outlasts the probe of the preferred
/// address even on a loaded machine (3 MB over loopback took 31 ms, and
/// once ended before the client had moved).
const SIZE: u64 = 30_000_000;
const DEADLINE: Duration = Duration::from_secs(60);

/// `artq get --insecure --alpn hq-interop URL -o out [extra]`.
fn artq_get(url: &str, out: &Path, extra: &[&str]) -> process::RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(url)
        .args([
            "--insecure",
            "--timeout",
            "50",
            "--alpn",
            "hq-interop",
            "-o",
        ])
        .arg(out)
        .args(extra);
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// Serve a file with a preferred address on 127.0.0.2; returns the server,
/// its address and its `--stats-json` summaries.
fn serve(scratch: &Scratch) -> (process::ChildGuard, SocketAddr, common::ServeStats) {
    common::spawn_artq_serve_with_stats(
        &scratch.root(),
        &scratch.logs(),
        &["--preferred-address", "127.0.0.2:0"],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn artq_get_follows_artq_serves_preferred_address() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 61);
    let (mut server, addr, stats) = serve(&scratch);
    let out = scratch.out("file");
    let run = artq_get(&format!("https://{addr}/file"), &out, &[]);
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    let moved: SocketAddr = run
        .stderr
        .lines()
        .find_map(|l| l.strip_prefix("moved to the server's preferred address "))
        .unwrap_or_else(|| panic!("the client did not move:\n{}\n{context}", run.stderr))
        .parse()
        .expect("an address");
    assert_eq!(moved.ip().to_string(), "127.0.0.2", "{}", run.stderr);
    assert_ne!(moved.port(), 0);
    let summary = stats.first(&mut server);
    assert_eq!(
        summary["local"].as_str(),
        Some(moved.to_string().as_str()),
        "the server did not end on its preferred address: {summary}"
    );
    assert_eq!(summary["path_changes"], 1, "{summary}");
    assert_eq!(summary["path_validations_failed"], 0, "{summary}");
}

#[test]
fn artq_get_no_preferred_address_stays() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 62);
    let (mut server, addr, stats) = serve(&scratch);
    let out = scratch.out("file");
    let run = artq_get(
        &format!("https://{addr}/file"),
        &out,
        &["--no-preferred-address"],
    );
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "artq get", &context, SIZE, &file, &out);
    assert!(
        !run.stderr
            .contains("moved to the server's preferred address"),
        "{}",
        run.stderr
    );
    let summary = stats.first(&mut server);
    assert_eq!(
        summary["local"].as_str(),
        Some(addr.to_string().as_str()),
        "{summary}"
    );
    assert_eq!(summary["path_changes"], 0, "{summary}");
}
