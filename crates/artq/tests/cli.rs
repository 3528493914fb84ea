//! The command line as a user meets it: qlog output, statistics, and clear
//! errors for bad input (never a panic, never a hang).

mod common;

use std::process::Command;
use std::time::Duration;

use common::{process, Scratch};

const DEADLINE: Duration = Duration::from_secs(60);

fn artq() -> Command {
    Command::new(common::artq_bin())
}

/// `--qlog` writes one JSON-SEQ file per connection on the server and one
/// for `get`, each a qlog header followed by parseable event records.
#[test]
fn qlog_files_are_valid_json_seq() {
    let scratch = Scratch::new();
    scratch.served_file("f", 300_000, 3);
    let qdir = scratch.path().join("qlog");
    let qdir_s = qdir.to_string_lossy().into_owned();
    let (mut server, addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--qlog", &qdir_s])
            .unwrap_or_else(|e| panic!("{e}"));
    let client_qlog = scratch.path().join("client.sqlog");
    let mut get = artq();
    get.arg("get")
        .arg(format!("https://{addr}/f"))
        .arg("--insecure")
        .arg("--stats")
        .arg("-o")
        .arg(scratch.out("f"))
        .arg("--qlog")
        .arg(&client_qlog);
    let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "get failed: {}\nserver: {}",
        out.stderr,
        server.describe()
    );
    // --stats: a JSON object with the transport counters.
    let stats_line = out
        .stderr
        .lines()
        .find(|l| l.starts_with('{'))
        .expect("stats JSON on stderr");
    let stats: serde_json::Value = serde_json::from_str(stats_line).expect("stats parse");
    assert!(stats["packets_received"].as_u64().unwrap() > 100);
    assert!(stats["srtt"].is_object() || stats["srtt"].is_number() || stats["srtt"].is_string());

    // The client's qlog: JSON-SEQ records with packets both ways.
    let text = std::fs::read_to_string(&client_qlog).expect("client qlog written");
    let records: Vec<serde_json::Value> = text
        .split('\u{1e}')
        .filter(|r| !r.trim().is_empty())
        .map(|r| serde_json::from_str(r.trim()).expect("each record is JSON"))
        .collect();
    assert_eq!(records[0]["qlog_format"], "JSON-SEQ");
    assert!(records
        .iter()
        .any(|r| r["name"] == "transport:packet_received"));
    assert!(records.iter().any(|r| r["name"] == "transport:packet_sent"));
    drop(server);
    let entries: Vec<_> = std::fs::read_dir(&qdir).expect("server qlog dir").collect();
    assert_eq!(entries.len(), 1, "one qlog per connection");
}

/// The text of `artq serve --stats-json`'s file once it holds a complete
/// line: the server writes it when a connection ends, after its draining
/// period. Fails the test after 20 s.
fn wait_for_stats_json(path: &std::path::Path) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.ends_with('\n') {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no --stats-json line within 20 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `--stats-json FILE`: one JSON line per ended connection, with the field
/// names of `artq sim --json`; through a lossy `artq link`, its recovery
/// figures add up (every lost item recovered in some round).
#[test]
fn serve_writes_one_stats_json_line_per_connection() {
    let scratch = Scratch::new();
    scratch.served_file("f", 1_000_000, 5);
    let stats_path = scratch.path().join("stats.jsonl");
    let stats_s = stats_path.to_string_lossy().into_owned();
    let (_server, server_addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--recovery", "art", "--stats-json", &stats_s],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut link = artq();
    link.args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server_addr.to_string())
        .args([
            "--bw",
            "50",
            "--rtt",
            "20",
            "--down-loss",
            "0.05",
            "--up-loss",
            "0",
        ]);
    let (_link, addr) =
        process::spawn_listening(link, "artq-link", &scratch.logs(), Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{e}"));
    let mut get = artq();
    get.arg("get")
        .arg(format!("https://{addr}/f"))
        .args(["--insecure", "-o"])
        .arg(scratch.out("f"));
    let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "get failed: {}", out.stderr);
    // The server's connection ends after its draining period.
    let text = wait_for_stats_json(&stats_path);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let v: serde_json::Value = serde_json::from_str(lines[0]).expect("one JSON object");
    assert_eq!(v["scheme"], "art");
    assert_eq!(v["alpn"], "h3");
    let u = |k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k} missing: {v}"));
    assert!(u("data_packets") > 500, "{v}");
    assert!(u("lost_packets") > 0, "5% loss, none lost: {v}");
    let n_hist: Vec<u64> = v["n_hist"]
        .as_array()
        .expect("n_hist")
        .iter()
        .filter_map(serde_json::Value::as_u64)
        .collect();
    assert_eq!(n_hist.iter().sum::<u64>(), u("recovered_items"), "{v}");
    assert!(
        u("recovered_items") > 0 && u("replicas") >= u("recovered_items"),
        "{v}"
    );
    assert_eq!(u("n_max") as usize + 1, n_hist.len(), "{v}");
}

/// `artq get --rpc` over real UDP through a lossy `artq link` against
/// `artq serve --recovery art`: every call answered and checked byte for
/// byte, the FCTs reported with `artq sim`'s names; a wrong path is a clear
/// error.
#[test]
fn rpc_calls_over_real_udp() {
    let scratch = Scratch::new();
    let (_server, server_addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--recovery", "art"])
            .unwrap_or_else(|e| panic!("{e}"));
    let mut link = artq();
    link.args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server_addr.to_string())
        .args(["--bw", "20", "--rtt", "30", "--loss", "0.05"]);
    let (_link, addr) =
        process::spawn_listening(link, "artq-link", &scratch.logs(), Duration::from_secs(20))
            .unwrap_or_else(|e| panic!("{e}"));
    let mut get = artq();
    get.arg("get").arg(format!("https://{addr}/rpc")).args([
        "--insecure",
        "--rpc",
        "--rpcs",
        "60",
        "--rpc-rate",
        "200",
        "--stats",
    ]);
    let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "get --rpc failed: {}", out.stderr);
    let v: serde_json::Value =
        serde_json::from_str(out.stdout.trim()).expect("one JSON object on stdout");
    assert_eq!(v["workload"], "rpc");
    assert_eq!(v["rpcs"], 60, "{v}");
    let fct = &v["rpc_fct_ms"];
    let p50 = fct["p50"].as_f64().expect("p50");
    let max = fct["max"].as_f64().expect("max");
    // At least one round trip each; the slowest no faster than the median.
    assert!(p50 >= 30.0 && max >= p50, "{fct}");

    let mut wrong = artq();
    wrong
        .arg("get")
        .arg(format!("https://{addr}/f"))
        .args(["--insecure", "--rpc", "--rpcs", "5"]);
    let out = process::run_with_deadline(wrong, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(!out.status.success());
    assert!(out.stderr.contains("must be /rpc"), "{}", out.stderr);
}

/// ECN over real UDP (issue 16): `artq serve` to `artq get` (ECN on by
/// default; `--no-ecn` on both for the run without) through `artq link` with a 50-packet queue that marks CE from 20
/// waiting. The CE marks reach the sender (the relay and the driver carry
/// the codepoints), and Cubic, reacting to them as to loss, loses fewer
/// packets than the same transfer without ECN.
#[test]
fn ecn_through_a_marking_link_means_fewer_drops() {
    let run = |ecn: bool| -> serde_json::Value {
        let scratch = Scratch::new();
        scratch.served_file("f", 4_000_000, 9);
        let stats_path = scratch.path().join("stats.jsonl");
        let stats_s = stats_path.to_string_lossy().into_owned();
        let mut serve_args = vec!["--stats-json", stats_s.as_str()];
        let mut link_args = vec!["--bw", "20", "--rtt", "40", "--loss", "0", "--queue", "50"];
        let mut get_args = vec!["--insecure"];
        if ecn {
            link_args.extend(["--ecn-mark", "20"]);
        } else {
            serve_args.push("--no-ecn");
            get_args.push("--no-ecn");
        }
        let (_server, server_addr) =
            common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &serve_args)
                .unwrap_or_else(|e| panic!("{e}"));
        let mut link = artq();
        link.args(["link", "--listen", "127.0.0.1:0", "--to"])
            .arg(server_addr.to_string())
            .args(&link_args);
        let (_link, addr) =
            process::spawn_listening(link, "artq-link", &scratch.logs(), Duration::from_secs(20))
                .unwrap_or_else(|e| panic!("{e}"));
        let mut get = artq();
        get.arg("get")
            .arg(format!("https://{addr}/f"))
            .args(&get_args)
            .arg("-o")
            .arg(scratch.out("f"));
        let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "get failed: {}", out.stderr);
        let text = wait_for_stats_json(&stats_path);
        serde_json::from_str(text.lines().next().unwrap_or("")).expect("JSON")
    };
    let plain = run(false);
    let marked = run(true);
    let u = |v: &serde_json::Value, k: &str| v[k].as_u64().unwrap_or_else(|| panic!("{k}: {v}"));
    assert_eq!(u(&plain, "ecn_marked_sent"), 0);
    assert!(u(&marked, "ecn_marked_sent") > 1000, "{marked}");
    assert_eq!(marked["ecn_validation_failed"], false, "{marked}");
    assert!(
        u(&marked, "ecn_ce_reported") > 0,
        "no CE reached the sender: {marked}"
    );
    assert!(
        u(&marked, "lost_packets") < u(&plain, "lost_packets"),
        "{} lost with ECN, {} without",
        u(&marked, "lost_packets"),
        u(&plain, "lost_packets")
    );
}

#[test]
fn unknown_recovery_scheme_is_a_clear_error() {
    let scratch = Scratch::new();
    let mut cmd = artq();
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--recovery",
        "nope",
        "--root",
    ])
    .arg(scratch.root());
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("unknown recovery scheme 'nope'"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("quic"),
        "the error lists the valid names: {}",
        out.stderr
    );
}

#[test]
fn missing_root_is_a_clear_error() {
    let mut cmd = artq();
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--root",
        "/definitely/not/here",
    ]);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    assert!(!out.status.success());
    assert!(out.stderr.contains("--root"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"));
}

#[test]
fn get_rejects_bad_urls_and_unverifiable_servers() {
    for (args, needle) in [
        (
            vec!["get", "http://127.0.0.1:1/x", "--insecure"],
            "only https://",
        ),
        (
            vec!["get", "https://127.0.0.1:99999/x", "--insecure"],
            "bad port",
        ),
        (vec!["get", "https://127.0.0.1:4433/x"], "--ca"),
        (
            vec![
                "get",
                "https://127.0.0.1:4433/x",
                "--insecure",
                "--timeout=-1",
            ],
            "--timeout",
        ),
    ] {
        let mut cmd = artq();
        cmd.args(&args);
        let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stderr.contains(needle), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{args:?}: {}", out.stderr);
    }
}

/// Nobody answers: `get` gives up at its timeout with a clear message.
#[test]
fn get_times_out_against_a_silent_port() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut cmd = artq();
    cmd.arg("get")
        .arg(format!("https://{addr}/x"))
        .args(["--insecure", "--timeout", "1.5"]);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    assert!(!out.status.success());
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    assert!(out.stderr.contains(&addr.to_string()), "{}", out.stderr);
}

/// Nobody answers, and the overall timeout is long: `get` gives up at the
/// handshake timeout (default 10 s; 1 s here), naming the address, not
/// after the 30-s idle timeout.
#[test]
fn get_gives_up_at_the_handshake_timeout_naming_the_address() {
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let mut cmd = artq();
    cmd.arg("get").arg(format!("https://{addr}/x")).args([
        "--insecure",
        "--timeout",
        "60",
        "--handshake-timeout",
        "1",
    ]);
    let start = std::time::Instant::now();
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    let took = start.elapsed();
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("handshake did not complete") && out.stderr.contains(&addr.to_string()),
        "{}",
        out.stderr
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
}

/// Nothing listens at the address (a closed port on 127.0.0.1, whose
/// kernel answers ICMP port unreachable): `get` says so at once, naming
/// the address, well before its handshake timeout.
#[test]
fn get_reports_a_closed_port_at_once() {
    let closed = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    let mut cmd = artq();
    cmd.arg("get").arg(format!("https://{closed}/x")).args([
        "--insecure",
        "--handshake-timeout",
        "20",
    ]);
    let start = std::time::Instant::now();
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    let took = start.elapsed();
    assert!(!out.status.success());
    assert!(
        out.stderr.contains("connection refused") && out.stderr.contains(&closed.to_string()),
        "{}",
        out.stderr
    );
    assert!(took < Duration::from_secs(5), "took {took:?}");
}

#[test]
fn link_rejects_bad_parameters() {
    for (extra, needle) in [
        (vec!["--loss", "1.5"], "not in 0..1"),
        (vec!["--bw=-3"], "out of range"),
        (vec!["--trace", "/no/such/trace"], "/no/such/trace"),
    ] {
        let mut cmd = artq();
        cmd.args(["link", "--listen", "127.0.0.1:0", "--to", "127.0.0.1:9"])
            .args(&extra);
        let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
        assert!(!out.status.success(), "{extra:?} accepted");
        assert!(out.stderr.contains(needle), "{extra:?}: {}", out.stderr);
    }
}

/// `--recovery help` answers the question: the list on stdout, success.
#[test]
fn recovery_help_lists_the_schemes() {
    let scratch = Scratch::new();
    let mut cmd = artq();
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--recovery",
        "help",
        "--root",
    ])
    .arg(scratch.root());
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
    assert!(out.status.success(), "{}", out.stderr);
    for name in ["quic", "art", "or3", "fec:K"] {
        assert!(
            out.stdout.contains(name),
            "{name} missing from: {}",
            out.stdout
        );
    }
}

/// SIGTERM shuts `artq serve` down gracefully: it stops within the grace
/// period, exits 0 and says so, after having served over HTTP/3.
#[test]
fn serve_shuts_down_gracefully_on_sigterm() {
    let scratch = Scratch::new();
    scratch.served_file("f", 100_000, 5);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut get = artq();
    get.arg("get")
        .arg(format!("https://{addr}/f"))
        .args(["--insecure", "-o"])
        .arg(scratch.out("f"));
    let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success(), "{}", out.stderr);
    let kill = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(kill.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(s) = server.try_status() {
            break s;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "artq serve did not stop within 10 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status}; {}", server.stderr_tail());
    assert!(
        server.stderr_tail().contains("shut down"),
        "{}",
        server.stderr_tail()
    );
}

/// `--idle-timeout`: a client that vanishes mid-download (its path cut, no
/// CONNECTION_CLOSE) is let go after the server's idle timeout, here 1 s,
/// not the default 30 s; a timeout that is not a positive number of
/// seconds is refused by name.
#[test]
fn serve_lets_a_vanished_client_go_at_its_idle_timeout() {
    let scratch = Scratch::new();
    scratch.served_file("big", 20_000_000, 9);
    let (mut server, server_addr, stats) = common::spawn_artq_serve_with_stats(
        &scratch.root(),
        &scratch.logs(),
        &["--idle-timeout", "1", "--threads", "1"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (link, addr) = common::spawn_link(
        &scratch,
        server_addr,
        &["--bw".into(), "2".into(), "--rtt".into(), "20".into()],
    );
    let mut get = artq();
    get.arg("get")
        .arg(format!("https://{addr}/big"))
        .args(["--insecure", "--timeout", "60", "-o"])
        .arg(scratch.out("big"));
    let _get = process::spawn_guarded(get, "artq-get", &scratch.logs()).unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        stats.ended().is_empty(),
        "the download ended before its path was cut: {}",
        server.describe()
    );
    // Cut the path: from now on the server hears nothing from its client.
    let cut = std::time::Instant::now();
    drop(link);
    let summary = stats.first(&mut server);
    let took = cut.elapsed();
    assert_eq!(summary["ended"], "idle timeout", "{summary}");
    assert!(took < Duration::from_secs(10), "took {took:?}: {summary}");

    for bad in ["0", "-1", "nan", "1e9", "soon"] {
        let mut cmd = artq();
        cmd.args(["serve", "--listen", "127.0.0.1:0"])
            .arg(format!("--idle-timeout={bad}"))
            .arg("--root")
            .arg(scratch.root());
        let out = process::run_with_deadline(cmd, DEADLINE).unwrap();
        assert!(!out.status.success(), "--idle-timeout {bad} accepted");
        assert!(out.stderr.contains("--idle-timeout"), "{}", out.stderr);
    }
}

/// Path MTU discovery over real UDP (connection/path_mtu.rs): `artq serve`
/// probes loopback up to the default ceiling and sends its data in
/// 1452-byte datagrams (the driver's sockets forbid fragmentation, and
/// loopback carries them); the client probed too, and no probe was lost.
/// With `--no-mtu-discovery` the server stays at 1350.
#[test]
fn path_mtu_discovery_reaches_the_ceiling_over_loopback() {
    let received_sizes = |serve_args: &[&str]| -> (Vec<u64>, serde_json::Value) {
        let scratch = Scratch::new();
        scratch.served_file("f", 2_000_000, 4);
        let (_server, addr) =
            common::spawn_artq_serve(&scratch.root(), &scratch.logs(), serve_args)
                .unwrap_or_else(|e| panic!("{e}"));
        let qlog = scratch.path().join("client.sqlog");
        let mut get = artq();
        get.arg("get")
            .arg(format!("https://{addr}/f"))
            .args(["--insecure", "--stats", "-o"])
            .arg(scratch.out("f"))
            .arg("--qlog")
            .arg(&qlog);
        let out = process::run_with_deadline(get, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "get failed: {}", out.stderr);
        let stats_line = out
            .stderr
            .lines()
            .find(|l| l.starts_with('{'))
            .expect("stats JSON");
        let stats: serde_json::Value = serde_json::from_str(stats_line).expect("stats parse");
        let text = std::fs::read_to_string(&qlog).expect("client qlog written");
        let sizes = text
            .split('\u{1e}')
            .filter_map(|r| serde_json::from_str::<serde_json::Value>(r.trim()).ok())
            .filter(|r| r["name"] == "transport:packet_received")
            .filter_map(|r| r["data"]["raw"]["length"].as_u64())
            .collect();
        (sizes, stats)
    };
    let (sizes, client) = received_sizes(&[]);
    // 2 MB in datagrams of 1452 bytes at most: about 1400 of them.
    let large = sizes.iter().filter(|&&n| n > 1350).count();
    assert!(
        large > 1000,
        "{large} of {} datagrams above 1350 bytes",
        sizes.len()
    );
    assert_eq!(sizes.iter().max(), Some(&1452));
    assert_eq!(client["mtu_probes_sent"], 1, "{client}");
    assert!(client.get("mtu_probes_lost").is_none(), "{client}");
    let (sizes, _) = received_sizes(&["--no-mtu-discovery"]);
    assert!(sizes.iter().all(|&n| n <= 1350));
}
