//! `artq serve` at scale and in operation (issue 24), over real UDP on
//! 127.0.0.1 with unmodified peers:
//!
//! - two worker threads serve quinn, aioquic and quic-go clients
//!   byte-exact, and both workers take connections;
//! - a resumption ticket and a NEW_TOKEN token issued by one worker are
//!   accepted by the other;
//! - SIGHUP presents a new certificate to new connections while an old
//!   connection finishes its download under the old one;
//! - `--config FILE.toml` behaves as the same flags;
//! - `/metrics` parses with Prometheus's own Python parser and counts the
//!   losses and replicas of a download through a lossy link;
//! - the access log has one line per request with the documented fields;
//! - new connections are placed on the least busy worker, and the kernel
//!   then delivers their datagrams to it directly (steering by connection
//!   ID).
//!
//! Needs the interop venv (`ARTQ_PYTHON` or `.venv`, with aioquic and
//! prometheus_client) and quic-go's HTTP/3 client (`ARTQ_H3_CLIENT`), as
//! `.ci/run` installs them: without them the tests fail, saying what is
//! missing.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{certs::TestCert, h3_peers, process, Scratch};

/// The JSON lines of `path` (a `--stats-json` or `--access-log` file).
fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

/// Waits up to 20 s for `path` to hold at least `n` JSON lines.
fn wait_lines(path: &Path, n: usize, server: &mut process::ChildGuard) -> Vec<serde_json::Value> {
    let start = Instant::now();
    loop {
        let lines = json_lines(path);
        if lines.len() >= n {
            return lines;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{} holds {} lines, expected {n}: {}",
            path.display(),
            lines.len(),
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `artq get URL --insecure -o out [extra]`, within 60 s.
fn artq_get(url: &str, out: &Path, extra: &[&str]) -> process::RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(url)
        .arg("-o")
        .arg(out)
        .args(["--timeout", "50"])
        .args(extra);
    process::run_with_deadline(cmd, Duration::from_secs(60)).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn two_workers_serve_quinn_aioquic_and_quic_go_byte_exact() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", 1_000_000, 24);
    let stats = scratch.out("stats.jsonl");
    let stats_arg = stats.display().to_string();
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--threads", "2", "--stats-json", &stats_arg],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    // quinn: every download from a socket of its own, so the kernel's hash
    // spreads them over both workers.
    let quinn_runs = 16;
    for i in 0..quinn_runs {
        let out = scratch.out(&format!("quinn-{i}"));
        common::quinn_download(&rt, addr, "/file", &out, Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("{e}: {}", server.describe()));
        common::compare_files(&file, &out).unwrap_or_else(|e| panic!("quinn {i}: {e}"));
    }
    for i in 0..2 {
        let out = scratch.out(&format!("aioquic-{i}"));
        let run = common::aioquic_download(
            &format!("https://{addr}/file"),
            &out,
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        common::assert_downloaded(&run, "aioquic", &server.describe(), 1_000_000, &file, &out);
    }
    for i in 0..2 {
        let out = scratch.out(&format!("quic-go-{i}"));
        let run = h3_peers::go_h3_download(
            &format!("https://{addr}/file"),
            &out,
            Duration::from_secs(60),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            run.status.success(),
            "quic-go's client failed: {}\n{}",
            run.stderr,
            server.describe()
        );
        common::compare_files(&file, &out).unwrap_or_else(|e| panic!("quic-go {i}: {e}"));
    }
    let lines = wait_lines(&stats, quinn_runs + 4, &mut server);
    let workers: std::collections::BTreeSet<u64> =
        lines.iter().filter_map(|l| l["worker"].as_u64()).collect();
    assert_eq!(
        workers.into_iter().collect::<Vec<_>>(),
        [0, 1],
        "both workers must have served connections: {lines:?}"
    );
}

/// A quinn client config that keeps tickets and NEW_TOKEN tokens across
/// endpoints (each endpoint is a new socket, hence maybe another worker).
#[test]
fn a_ticket_and_a_token_issued_by_one_worker_are_accepted_by_the_other() {
    let scratch = Scratch::new();
    scratch.served_file("small", 20_000, 7);
    let stats = scratch.out("stats.jsonl");
    let stats_arg = stats.display().to_string();
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--threads", "2", "--retry", "--stats-json", &stats_arg],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    let config = common::quinn_hq::insecure_client_config().expect("client config");
    // One connection from a fresh socket; returns its server-side line.
    let mut connect = |n: usize| -> serde_json::Value {
        let port = rt
            .block_on(async {
                let mut endpoint = common::quinn_hq::client_endpoint()?;
                endpoint.set_default_client_config(config.clone());
                let port = endpoint.local_addr()?.port();
                let fetched = tokio::time::timeout(
                    Duration::from_secs(20),
                    common::quinn_hq::fetch(&endpoint, addr, "/small", &mut std::io::sink()),
                )
                .await
                .map_err(|_| "timed out")??;
                assert_eq!(fetched.bytes, 20_000);
                endpoint.wait_idle().await;
                Ok::<u16, common::quinn_hq::BoxError>(port)
            })
            .unwrap_or_else(|e| panic!("connection {n}: {e}: {}", server.describe()));
        let lines = wait_lines(&stats, n, &mut server);
        lines
            .into_iter()
            .find(|l| {
                l["remote"]
                    .as_str()
                    .is_some_and(|r| r.ends_with(&format!(":{port}")))
            })
            .unwrap_or_else(|| panic!("no server line for client port {port}"))
    };
    let first = connect(1);
    let home = first["worker"].as_u64().expect("a worker index");
    assert_eq!(first["retried"], true, "--retry: {first}");
    assert_eq!(first["resumed"], false, "{first}");
    // Every connection that lands on the first worker gets tickets and
    // tokens from it again; the first that lands elsewhere uses one.
    for n in 2..=40 {
        let line = connect(n);
        if line["worker"].as_u64() == Some(home) {
            continue;
        }
        assert_eq!(
            line["resumed"], true,
            "a ticket of worker {home} was refused by the other: {line}"
        );
        assert_eq!(
            line["retried"], false,
            "a NEW_TOKEN token of worker {home} was refused by the other (Retry sent): {line}"
        );
        return;
    }
    panic!("39 connections from fresh sockets all landed on worker {home}");
}

#[test]
fn sighup_presents_the_new_certificate_while_an_old_download_finishes() {
    let scratch = Scratch::new();
    let old_dir = scratch.path().join("old");
    let new_dir = scratch.path().join("new");
    let live_dir = scratch.path().join("live");
    for d in [&old_dir, &new_dir, &live_dir] {
        std::fs::create_dir_all(d).unwrap();
    }
    let old = TestCert::generate(&old_dir).unwrap();
    let new = TestCert::generate(&new_dir).unwrap();
    let cert = live_dir.join("cert.pem");
    let key = live_dir.join("key.pem");
    std::fs::copy(&old.cert_pem, &cert).unwrap();
    std::fs::copy(&old.key_pem, &key).unwrap();
    let file = scratch.served_file("big", 6_000_000, 3);
    let (cert_arg, key_arg) = (cert.display().to_string(), key.display().to_string());
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--threads", "2", "--cert", &cert_arg, "--key", &key_arg],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    // The old download crosses a 20 Mbit/s link: about 2.5 s.
    let (_link, link_addr) = common::spawn_link(&scratch, addr, &["--bw".into(), "20".into()]);
    let old_out = scratch.out("old-download");
    let old_ca = old.cert_pem.display().to_string();
    let old_started = Instant::now();
    let old_download = {
        let url = format!("https://{link_addr}/big");
        let out = old_out.clone();
        let ca = old_ca.clone();
        std::thread::spawn(move || artq_get(&url, &out, &["--ca", &ca]))
    };
    std::thread::sleep(Duration::from_millis(800));
    std::fs::copy(&new.cert_pem, &cert).unwrap();
    std::fs::copy(&new.key_pem, &key).unwrap();
    let hup = Command::new("kill")
        .args(["-HUP", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    let start = Instant::now();
    while !server
        .stderr_tail()
        .contains("certificate and key reloaded")
    {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "no reload reported: {}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let reloaded_at = Instant::now();
    let url = format!("https://{addr}/big");
    let with_new = artq_get(
        &url,
        &scratch.out("new-ca"),
        &["--ca", &new.cert_pem.display().to_string()],
    );
    assert!(
        with_new.status.success(),
        "a new connection must present the new certificate: {}\n{}",
        with_new.stderr,
        server.describe()
    );
    let with_old = artq_get(&url, &scratch.out("old-ca"), &["--ca", &old_ca]);
    assert!(
        !with_old.status.success(),
        "a new connection still presented the old certificate"
    );
    let old_run = old_download.join().unwrap();
    assert!(
        old_run.status.success(),
        "the download begun before SIGHUP failed: {}\n{}",
        old_run.stderr,
        server.describe()
    );
    common::compare_files(&file, &old_out).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        old_started + old_run.elapsed > reloaded_at,
        "the old download must have been under way at the reload (it took {:?})",
        old_run.elapsed
    );
    // A bad reload keeps the current certificate.
    std::fs::write(&cert, "not a certificate").unwrap();
    Command::new("kill")
        .args(["-HUP", &server.id().to_string()])
        .status()
        .unwrap();
    let start = Instant::now();
    while !server.stderr_tail().contains("keeping the old ones") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let again = artq_get(
        &url,
        &scratch.out("again"),
        &["--ca", &new.cert_pem.display().to_string()],
    );
    assert!(again.status.success(), "{}", again.stderr);
}

#[test]
fn a_config_file_behaves_as_the_same_flags() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", 300_000, 5);
    let run = |name: &str,
               use_file: bool|
     -> (Vec<serde_json::Value>, Vec<serde_json::Value>, String) {
        let stats = scratch.out(&format!("{name}-stats.jsonl"));
        let access = scratch.out(&format!("{name}-access.jsonl"));
        let settings = [
            ("threads", "2".to_string()),
            ("recovery", "\"art\"".to_string()),
            ("no-ecn", "true".to_string()),
            ("stats_json", format!("{:?}", stats.display().to_string())),
            ("access-log", format!("{:?}", access.display().to_string())),
        ];
        let mut args: Vec<String> = Vec::new();
        if use_file {
            let toml: String = settings
                .iter()
                .map(|(k, v)| format!("{k} = {v}\n"))
                .collect();
            let path = scratch.out(&format!("{name}.toml"));
            std::fs::write(&path, toml).unwrap();
            args.push("--config".into());
            args.push(path.display().to_string());
        } else {
            args.extend(["--threads", "2", "--recovery", "art", "--no-ecn"].map(String::from));
            args.extend(["--stats-json".into(), stats.display().to_string()]);
            args.extend(["--access-log".into(), access.display().to_string()]);
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &args)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let out = scratch.out(&format!("{name}-out"));
        let got = artq_get(&format!("https://{addr}/file"), &out, &["--insecure"]);
        assert!(got.status.success(), "{name}: {}", got.stderr);
        common::compare_files(&file, &out).unwrap();
        let stats = wait_lines(&stats, 1, &mut server);
        let access = wait_lines(&access, 1, &mut server);
        (stats, access, server.stderr_tail())
    };
    let (flag_stats, flag_access, flag_err) = run("flags", false);
    let (file_stats, file_access, file_err) = run("file", true);
    for (what, a, b) in [
        ("stats", &flag_stats[0], &file_stats[0]),
        ("access", &flag_access[0], &file_access[0]),
    ] {
        for key in [
            "scheme",
            "alpn",
            "ecn_validated",
            "status",
            "bytes",
            "method",
            "path",
        ] {
            assert_eq!(a[key], b[key], "{what} {key}: flags {a} vs file {b}");
        }
    }
    assert_eq!(flag_stats[0]["scheme"], "art");
    assert_eq!(flag_stats[0]["ecn_validated"], false);
    for err in [&flag_err, &file_err] {
        assert!(err.contains("recovery art, 2 worker threads"), "{err}");
    }
    // A flag wins over the file's key.
    let toml = scratch.out("override.toml");
    std::fs::write(&toml, "recovery = \"art\"\nthreads = 2\n").unwrap();
    let toml_arg = toml.display().to_string();
    let (server, _) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &[
            "--config",
            &toml_arg,
            "--recovery",
            "quic",
            "--threads",
            "1",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let start = Instant::now();
    while !server.stderr_tail().contains("recovery quic") {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}",
            server.stderr_tail()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(!server.stderr_tail().contains("worker threads"));
    // A misspelt key is refused, naming it.
    std::fs::write(&toml, "recovry = \"art\"\n").unwrap();
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
        .arg(scratch.root())
        .args(["--config", &toml_arg]);
    let bad = process::run_with_deadline(cmd, Duration::from_secs(10)).unwrap();
    assert!(!bad.status.success());
    assert!(
        bad.stderr.contains("unknown key `recovry`"),
        "{}",
        bad.stderr
    );
}

/// The body of `GET /metrics` from `addr`.
fn scrape(addr: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    write!(stream, "GET /metrics HTTP/1.1\r\nhost: {addr}\r\n\r\n").unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("no HTTP head: {response}"));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}

/// The samples of an exposition as Prometheus's Python parser reads them:
/// `name{label="v",...}` to value (labels sorted).
fn parse_with_prometheus_client(
    text: &str,
    scratch: &Scratch,
) -> std::collections::BTreeMap<String, f64> {
    let python = common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let path = scratch.out("metrics.txt");
    std::fs::write(&path, text).unwrap();
    let script = r#"
import json, sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
out = {}
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in family.samples:
        labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        out[f"{s.name}{{{labels}}}"] = s.value
print(json.dumps(out))
"#;
    let mut cmd = Command::new(python);
    cmd.args(["-c", script]).arg(&path);
    let run = process::run_with_deadline(cmd, Duration::from_secs(30)).unwrap();
    assert!(
        run.status.success(),
        "prometheus_client could not parse /metrics (is it in the venv? .ci/run installs it): {}\n{text}",
        run.stderr
    );
    serde_json::from_str(run.stdout.trim()).unwrap()
}

#[test]
fn metrics_parse_with_prometheus_and_count_losses_and_replicas() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", 3_000_000, 11);
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &[
            "--recovery",
            "art",
            "--metrics",
            "127.0.0.1:0",
            "--threads",
            "2",
            // The client's CONNECTION_CLOSE crosses the lossy link once;
            // when it is lost the server ends the connection at its idle
            // timeout instead.
            "--idle-timeout",
            "3",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let scrape_at = metrics_addr(&mut server);
    let (_link, link_addr) = common::spawn_link(
        &scratch,
        addr,
        &[
            "--loss".into(),
            "0.05".into(),
            "--rtt".into(),
            "20".into(),
            "--seed".into(),
            "3".into(),
        ],
    );
    let out = scratch.out("out");
    let got = artq_get(&format!("https://{link_addr}/file"), &out, &["--insecure"]);
    assert!(
        got.status.success(),
        "{}\n{}",
        got.stderr,
        server.describe()
    );
    common::compare_files(&file, &out).unwrap();
    // The connection's last counters are added when it ends.
    let start = Instant::now();
    let samples = loop {
        let samples = parse_with_prometheus_client(&scrape(&scrape_at), &scratch);
        if samples.get("artq_connections_open{}") == Some(&0.0) {
            break samples;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "{samples:?}");
        std::thread::sleep(Duration::from_millis(200));
    };
    let get = |k: &str| {
        *samples
            .get(k)
            .unwrap_or_else(|| panic!("no {k} in {samples:?}"))
    };
    assert!(get("artq_lost_packets_total{}") > 0.0, "{samples:?}");
    assert!(
        get("artq_replicas_total{scheme=\"art\"}") > 0.0,
        "{samples:?}"
    );
    assert!(get("artq_sent_bytes_total{}") > 3_000_000.0, "{samples:?}");
    // Path MTU discovery is on by default; the link carries any size.
    assert!(get("artq_mtu_probes_total{}") >= 1.0, "{samples:?}");
    assert_eq!(get("artq_mtu_black_holes_total{}"), 0.0, "{samples:?}");
    assert_eq!(
        get("artq_connections_total{alpn=\"h3\",version=\"v1\"}"),
        1.0
    );
    assert!(get("artq_recovery_round_count{}") > 0.0, "{samples:?}");
    assert!(
        get("artq_recovery_latency_seconds_count{}") > 0.0,
        "{samples:?}"
    );
}

#[test]
fn the_access_log_has_one_line_per_request_with_the_documented_fields() {
    let scratch = Scratch::new();
    scratch.served_file("a", 100_000, 1);
    let log = scratch.out("access.jsonl");
    let log_arg = log.display().to_string();
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &[
            "--access-log",
            &log_arg,
            "--recovery",
            "art",
            "--threads",
            "2",
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let ok = artq_get(
        &format!("https://{addr}/a?x=1"),
        &scratch.out("a"),
        &["--insecure"],
    );
    assert!(ok.status.success(), "{}", ok.stderr);
    let missing = artq_get(
        &format!("https://{addr}/nope"),
        &scratch.out("nope"),
        &["--insecure"],
    );
    assert!(!missing.status.success());
    let hq = common::aioquic_download(
        &format!("https://{addr}/a"),
        &scratch.out("hq"),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(hq.status.success(), "{}", hq.stderr);
    let lines = wait_lines(&log, 3, &mut server);
    std::thread::sleep(Duration::from_millis(300));
    let lines_again = json_lines(&log);
    assert_eq!(
        lines.len(),
        lines_again.len(),
        "one line per request: {lines_again:?}"
    );
    assert_eq!(lines.len(), 3, "{lines:?}");
    for l in &lines {
        for field in [
            "time",
            "client",
            "alpn",
            "method",
            "path",
            "status",
            "bytes",
            "duration_ms",
            "completed",
            "scheme",
            "lost_packets",
            "replicas",
            "connection",
            "worker",
        ] {
            assert!(l.get(field).is_some(), "no {field} in {l}");
        }
        assert_eq!(l["scheme"], "art");
        assert_eq!(l["method"], "GET");
        assert!(l["client"].as_str().unwrap().starts_with("127.0.0.1:"));
        let t = l["time"].as_str().unwrap();
        assert!(t.len() >= 20 && t.ends_with('Z') && t.contains('T'), "{t}");
    }
    let by_path = |p: &str, alpn: &str| {
        lines
            .iter()
            .find(|l| l["path"] == p && l["alpn"] == alpn)
            .unwrap_or_else(|| panic!("no {alpn} {p} in {lines:?}"))
    };
    let a = by_path("/a?x=1", "h3");
    assert_eq!(
        (
            a["status"].as_u64(),
            a["bytes"].as_u64(),
            a["completed"].as_bool()
        ),
        (Some(200), Some(100_000), Some(true))
    );
    let nope = by_path("/nope", "h3");
    assert_eq!(nope["status"], 404);
    let hq = by_path("/a", "hq-interop");
    assert_eq!(hq["bytes"], 100_000);
}

/// The metrics address `artq serve --metrics 127.0.0.1:0` reports.
fn metrics_addr(server: &mut process::ChildGuard) -> String {
    let start = Instant::now();
    loop {
        let tail = server.stderr_tail();
        if let Some(rest) = tail.split("metrics on http://").nth(1) {
            return rest.split('/').next().unwrap_or_default().to_string();
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `artq serve --listen ADDR --root ROOT [extra]`.
fn serve_on(
    scratch: &Scratch,
    listen: &str,
    extra: &[&str],
    name: &str,
) -> (process::ChildGuard, std::net::SocketAddr) {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(["serve", "--listen", listen, "--root"])
        .arg(scratch.root())
        .args(extra);
    process::spawn_listening(cmd, name, &scratch.logs(), Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A server restarted with the same `--host-key` answers a packet of a
/// connection its predecessor held with a stateless reset the client
/// recognises (RFC 9000 §10.3): the client's connection ends at once, not
/// after its idle timeout.
#[test]
fn a_restarted_server_with_the_same_host_key_resets_old_connections() {
    let scratch = Scratch::new();
    scratch.served_file("small", 1000, 1);
    let key = scratch.out("host.key");
    std::fs::write(&key, [7u8; 32]).unwrap();
    let key_arg = key.display().to_string();
    let extra = ["--threads", "2", "--host-key", key_arg.as_str()];
    let (first, addr) = serve_on(&scratch, "127.0.0.1:0", &extra, "artq-serve-1");
    let rt = common::runtime();
    let endpoint = rt
        .block_on(async { common::quinn_hq::client_endpoint() })
        .unwrap();
    let conn = rt
        .block_on(async {
            let conn = endpoint.connect(addr, "localhost")?.await?;
            common::quinn_hq::fetch_on(&conn, "/small", &mut std::io::sink()).await?;
            Ok::<_, common::quinn_hq::BoxError>(conn)
        })
        .unwrap_or_else(|e| panic!("{e}"));
    drop(first); // killed: its connections' state is gone
    let (mut second, _) = serve_on(&scratch, &addr.to_string(), &extra, "artq-serve-2");
    let start = Instant::now();
    let outcome = rt.block_on(async {
        // A request: a short-header packet for a connection nobody holds.
        let _ = common::quinn_hq::fetch_on(&conn, "/small", &mut std::io::sink()).await;
        tokio::time::timeout(Duration::from_secs(10), conn.closed()).await
    });
    let reason = outcome.unwrap_or_else(|_| {
        panic!(
            "the client's connection did not end within 10 s: {}",
            second.describe()
        )
    });
    assert!(
        matches!(reason, quinn::ConnectionError::Reset),
        "expected a stateless reset, got {reason}"
    );
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// Four clients, one after another, against four workers: each connection
/// goes to a worker of its own (placed on the least busy one, whichever
/// socket the kernel handed its first Initial to; the kernel's address
/// hash alone puts four clients on four workers one time in ten), and
/// after its first Initial the kernel delivers its datagrams to that
/// worker directly, so only the placed connections' first packets pass
/// between workers.
#[test]
fn new_connections_spread_over_the_workers_and_reach_them_directly() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", 300_000, 5);
    let (mut server, addr) = serve_on(&scratch, "127.0.0.1:0", &["--threads", "4"], "artq-serve");
    let rt = common::runtime();
    let mut conns = Vec::new();
    for i in 0..4 {
        let out = scratch.out(&format!("quinn-{i}"));
        let conn = rt
            .block_on(async {
                let endpoint = common::quinn_hq::client_endpoint()?;
                let conn = endpoint.connect(addr, "localhost")?.await?;
                let mut body = Vec::new();
                common::quinn_hq::fetch_on(&conn, "/file", &mut body).await?;
                std::fs::write(&out, &body)?;
                Ok::<_, common::quinn_hq::BoxError>((endpoint, conn))
            })
            .unwrap_or_else(|e| panic!("client {i}: {e}: {}", server.describe()));
        common::compare_files(&file, &out).unwrap_or_else(|e| panic!("client {i}: {e}"));
        conns.push(conn);
        // The workers publish their counts after each turn.
        std::thread::sleep(Duration::from_millis(100));
    }
    Command::new("kill")
        .args(["-INT", &server.id().to_string()])
        .status()
        .expect("kill -INT");
    let start = Instant::now();
    while server.try_status().is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "{}",
            server.describe()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(conns);
    let tail = server.stderr_tail();
    let by_worker = tail
        .split("connections accepted by worker: ")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or_else(|| panic!("no per-worker line: {tail}"));
    assert_eq!(by_worker, "1, 1, 1, 1", "{tail}");
    let passed: u64 = tail
        .split(" datagrams passed between workers")
        .next()
        .and_then(|r| r.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of datagrams passed: {tail}"));
    // At most the few first packets of the three connections placed
    // elsewhere; every datagram of theirs without steering.
    assert!(
        passed <= 12,
        "{passed} datagrams passed between workers: {tail}"
    );
}
