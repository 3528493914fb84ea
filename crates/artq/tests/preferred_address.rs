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
use std::time::{Duration, Instant};

use common::process;
use common::Scratch;

const SIZE: u64 = 3_000_000;
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

/// The server's `--stats-json` line for its one connection, once written
/// (when the connection ends).
fn server_summary(path: &Path) -> serde_json::Value {
    let until = Instant::now() + Duration::from_secs(40);
    loop {
        if let Some(line) = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| t.lines().next().map(str::to_owned))
        {
            return serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("bad --stats-json line {line}: {e}"));
        }
        assert!(
            Instant::now() < until,
            "no --stats-json line in {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Serve a file with a preferred address on 127.0.0.2; returns the server,
/// its address, the file and the stats path.
fn serve(scratch: &Scratch) -> (process::ChildGuard, SocketAddr, std::path::PathBuf) {
    let stats = scratch.logs().join("server-stats.json");
    let stats_arg = stats.to_string_lossy().into_owned();
    let (server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &[
            "--preferred-address",
            "127.0.0.2:0",
            "--stats-json",
            &stats_arg,
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    (server, addr, stats)
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
    let summary = server_summary(&stats);
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
    let summary = server_summary(&stats);
    assert_eq!(
        summary["local"].as_str(),
        Some(addr.to_string().as_str()),
        "{summary}"
    );
    assert_eq!(summary["path_changes"], 0, "{summary}");
}
