//! `artq sim` as a program (issue 3 acceptance): one JSON object with
//! `--json`, byte-identical output for the same scenario and seed, loss
//! recovery visible in the metrics, multi-file workloads, TOML scenarios,
//! the per-packet CSV, and clear errors for bad input.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::process::{self, RunOutput};
use serde_json::Value;

/// Bound on one simulated run (debug build included); a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(120);

/// Small, quick link flags: 20 Mbit/s, 40 ms RTT.
const LINK: [&str; 4] = ["--bw", "20", "--rtt", "40"];

fn artq_sim(args: &[&str], cwd: Option<&Path>) -> RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("sim").args(args);
    if let Some(dir) = cwd {
        cmd.current_dir(dir);
    }
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `artq sim ARGS --json`, checks it succeeded and printed exactly one
/// JSON object, and returns its text and value.
fn sim_json(args: &[&str]) -> (String, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let out = artq_sim(&all, None);
    assert!(
        out.status.success(),
        "artq sim {all:?} failed: {}",
        out.stderr
    );
    let text = out.stdout.clone();
    assert!(
        text.ends_with('\n') && text.lines().count() == 1,
        "not one line of JSON: {text:?}"
    );
    let value: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("bad JSON {text:?}: {e}"));
    assert!(value.is_object(), "{text}");
    (text, value)
}

fn u(v: &Value, field: &str) -> u64 {
    v[field]
        .as_u64()
        .unwrap_or_else(|| panic!("{field} is not an unsigned integer in {v}"))
}

fn f(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {v}"))
}

#[test]
fn json_has_the_design_fields_and_is_deterministic() {
    let args = [
        &LINK[..],
        &["--size", "2MB", "--loss", "0.02", "--seed", "7"],
    ]
    .concat();
    let (a, v) = sim_json(&args);
    let (b, _) = sim_json(&args);
    assert_eq!(a, b, "same scenario and seed, different output");
    for field in [
        "scheme",
        "seed",
        "fct_ms",
        "goodput_mbps",
        "bytes",
        "data_packets",
        "lost_packets",
        "replicas",
        "extra_replicas",
        "n_max",
        "k_max",
        "n_hist",
        "t_wait_ms",
        "recovery_latency_ms",
        "recovery_deterioration_rate",
        "share_n_ge_2",
        "retransmission_ratio",
        "spurious_retransmissions",
    ] {
        assert!(v.get(field).is_some(), "missing {field} in {v}");
    }
    assert_eq!(v["scheme"], "quic");
    assert_eq!(u(&v, "seed"), 7);
    assert_eq!(u(&v, "bytes"), 2_000_000);
    assert!(v.get("cpu_ms").is_none(), "cpu_ms without --measure-cpu");
    assert!(
        v.get("fct_ms_per_file").is_none(),
        "one file has no per-file summary"
    );
    for key in ["p50", "p95", "p99", "max", "mean"] {
        assert!(v["t_wait_ms"][key].is_number(), "t_wait_ms.{key} in {v}");
    }
    // Another seed draws other losses.
    let other = [
        &LINK[..],
        &["--size", "2MB", "--loss", "0.02", "--seed", "8"],
    ]
    .concat();
    let (c, _) = sim_json(&other);
    assert_ne!(a, c, "seeds 7 and 8 gave the same run");
}

#[test]
fn lossless_run_reaches_the_link_rate() {
    let (_, v) = sim_json(&[&LINK[..], &["--size", "4MB", "--loss", "0"]].concat());
    assert_eq!(u(&v, "lost_packets"), 0);
    assert_eq!(u(&v, "replicas"), 0);
    assert!(v["t_wait_ms"].is_null());
    let goodput = f(&v, "goodput_mbps");
    assert!(
        (0.85 * 20.0..=20.0).contains(&goodput),
        "goodput {goodput} Mbit/s on a 20 Mbit/s link"
    );
}

#[test]
fn lossy_run_recovers_and_writes_the_per_packet_csv() {
    let dir = tempfile::tempdir().expect("temp dir");
    let csv = dir.path().join("items.csv");
    let csv_arg = csv.to_str().expect("utf-8 temp path");
    let args = [
        &LINK[..],
        &["--size", "2MB", "--loss", "0.03", "--per-packet", csv_arg],
    ]
    .concat();
    let (_, v) = sim_json(&args);
    assert!(u(&v, "lost_packets") > 0);
    assert!(u(&v, "n_max") >= 1 && u(&v, "k_max") >= 1);
    assert!(u(&v, "replicas") >= u(&v, "n_max"));
    let recovered: u64 = v["n_hist"]
        .as_array()
        .expect("n_hist array")
        .iter()
        .filter_map(Value::as_u64)
        .sum();
    let text = std::fs::read_to_string(&csv).expect("per-packet CSV written");
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("item,stream,offset,len,n,k,first_sent_ms,t_wait_ms,recovery_latency_ms")
    );
    let rows: Vec<&str> = lines.collect();
    assert_eq!(rows.len() as u64, recovered, "one row per recovered item");
    for row in rows {
        assert_eq!(row.split(',').count(), 9, "{row}");
    }
}

/// `--qlog DIR`: both vantage points' traces, the sender's with ART's
/// state and round events; tracing changes no result.
#[test]
fn qlog_traces_both_ends_and_the_policy() {
    let dir = tempfile::tempdir().expect("temp dir");
    let qlog = dir.path().join("traces");
    let args = [
        &LINK[..],
        &["--size", "1MB", "--loss", "0.05", "--scheme", "art"],
    ]
    .concat();
    let (plain, _) = sim_json(&args);
    let traced_args = [
        &args[..],
        &["--qlog", qlog.to_str().expect("utf-8 temp path")],
    ]
    .concat();
    let (traced, _) = sim_json(&traced_args);
    assert_eq!(plain, traced, "tracing changed the results");
    let records = |name: &str| -> Vec<Value> {
        let text = std::fs::read_to_string(qlog.join(name)).expect("trace written");
        text.split('\x1e')
            .filter(|r| !r.trim().is_empty())
            .map(|r| serde_json::from_str(r.trim()).expect("JSON-SEQ record"))
            .collect()
    };
    let server = records("server.sqlog");
    let client = records("client.sqlog");
    assert_eq!(server[0]["trace"]["vantage_point"]["type"], "server");
    assert_eq!(client[0]["trace"]["vantage_point"]["type"], "client");
    let named = |recs: &[Value], name: &str| recs.iter().filter(|r| r["name"] == name).count();
    assert!(named(&server, "recovery:packet_lost") > 0);
    assert!(named(&server, "artq:policy_state") > 0);
    assert!(named(&server, "artq:policy_event") > 0);
    assert!(named(&client, "transport:packet_received") > 0);
}

#[test]
fn many_files_over_one_connection() {
    let (_, v) = sim_json(
        &[
            &LINK[..],
            &["--size", "100KB", "--files", "10", "--loss", "0.01"],
        ]
        .concat(),
    );
    assert_eq!(u(&v, "files"), 10);
    assert_eq!(u(&v, "bytes"), 1_000_000);
    let per_file = &v["fct_ms_per_file"];
    assert!(f(per_file, "max") <= f(&v, "fct_ms"), "{v}");
    assert!(
        f(per_file, "p50") >= 40.0,
        "a file takes at least one RTT: {v}"
    );
}

#[test]
fn scenario_file_runs_and_seed_overrides_it() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("s.toml");
    std::fs::write(
        &file,
        "seed = 3\ncc = \"newreno\"\n[workload]\nsize = \"1MB\"\n[link]\nbw = 20\nrtt = 40\nloss = 0.02\n",
    )
    .expect("write scenario");
    let path = file.to_str().expect("utf-8 temp path");
    let (a, v) = sim_json(&["--scenario", path]);
    assert_eq!(u(&v, "seed"), 3);
    assert_eq!(v["cc"], "newreno");
    assert_eq!(u(&v, "bytes"), 1_000_000);
    let (b, v) = sim_json(&["--scenario", path, "--seed", "4"]);
    assert_eq!(u(&v, "seed"), 4);
    assert_ne!(a, b);
    // The same run from flags gives the same JSON.
    let (c, _) = sim_json(
        &[
            &LINK[..],
            &[
                "--loss", "0.02", "--size", "1MB", "--cc", "newreno", "--seed", "3",
            ],
        ]
        .concat(),
    );
    assert_eq!(a, c, "flags and TOML disagree");
}

#[test]
fn human_summary_and_cpu_time() {
    let out = artq_sim(
        &[&LINK[..], &["--size", "500KB", "--measure-cpu"]].concat(),
        None,
    );
    assert!(out.status.success(), "{}", out.stderr);
    let text = out.stdout;
    assert!(text.starts_with("artq sim: quic (cubic), seed 1: 1 file of 500.0 KB over 20 Mbit/s, 40 ms RTT, 1% loss\n"), "{text}");
    for label in [
        "flow completion time",
        "goodput",
        "lost packets",
        "replicas",
        "t_wait",
        "recovery latency",
        "sender cpu",
    ] {
        assert!(text.contains(label), "no {label:?} in:\n{text}");
    }
    let (_, v) = sim_json(&[&LINK[..], &["--size", "500KB", "--measure-cpu"]].concat());
    assert!(f(&v, "cpu_ms") > 0.0);
}

/// The rpc workload: per-call FCTs in the JSON (and only there: a file
/// run has no `rpc_fct_ms`), every call completed, bad keys refused.
#[test]
fn rpc_workload_reports_per_call_fct() {
    let (_, v) = sim_json(
        &[
            &LINK[..],
            &["--workload", "rpc", "--rpcs", "50", "--rpc-rate", "200"],
            &["--loss", "0.02", "--scheme", "art"],
        ]
        .concat(),
    );
    assert_eq!(u(&v, "files"), 50, "files counts calls: {v}");
    assert!(u(&v, "bytes") > 0, "{v}");
    let rpc = &v["rpc_fct_ms"];
    assert!(f(rpc, "p50") >= 40.0, "a call takes at least one RTT: {v}");
    assert!(f(rpc, "p50") <= f(rpc, "p99") && f(rpc, "p99") <= f(rpc, "max"));
    assert!(v.get("fct_ms_per_file").is_none(), "{v}");
    let (_, files) = sim_json(&[&LINK[..], &["--size", "100KB", "--files", "3"]].concat());
    assert!(files.get("rpc_fct_ms").is_none(), "{files}");
    expect_error(
        &["--workload", "rpc", "--size", "1MB"],
        None,
        "the rpc workload has no key `size`",
    );
    expect_error(
        &["--rpcs", "5"],
        None,
        "the files workload has no key `rpcs`",
    );
    expect_error(
        &["--workload", "rpc", "--rpc-rate", "0"],
        None,
        "rpc_rate must be in 1..=100000",
    );
}

/// Runs `artq sim ARGS`, expects failure with `needle` in stderr and
/// nothing on stdout.
fn expect_error(args: &[&str], cwd: Option<&Path>, needle: &str) {
    let out = artq_sim(args, cwd);
    assert!(
        !out.status.success(),
        "artq sim {args:?} succeeded: {}",
        out.stdout
    );
    assert!(out.stdout.is_empty(), "stdout on error: {}", out.stdout);
    assert!(
        out.stderr.contains(needle),
        "artq sim {args:?}: no {needle:?} in stderr:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
}

#[test]
fn bad_inputs_give_clear_errors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let cwd = Some(dir.path());
    std::fs::write(dir.path().join("bad.trace"), "5\nsoon\n").expect("write");
    std::fs::write(dir.path().join("bad.toml"), "[link]\nbw = \"fast\"\n").expect("write");
    std::fs::write(dir.path().join("typo.toml"), "shceme = \"art\"\n").expect("write");
    expect_error(
        &["--scheme", "no-such-scheme"],
        cwd,
        "unknown recovery scheme 'no-such-scheme'",
    );
    expect_error(&["--trace", "missing.trace"], cwd, "missing.trace");
    expect_error(&["--trace", "bad.trace"], cwd, "bad.trace:2");
    expect_error(
        &["--scenario", "bad.toml"],
        cwd,
        "malformed scenario bad.toml",
    );
    expect_error(&["--scenario", "typo.toml"], cwd, "shceme");
    expect_error(
        &["--scenario", "nope.toml"],
        cwd,
        "cannot read scenario nope.toml",
    );
    expect_error(&["--loss", "1.5"], cwd, "loss probability 1.5");
    expect_error(&["--size", "10XB"], cwd, "unknown size unit");
    expect_error(
        &["--scenario", "bad.toml", "--loss", "0.1"],
        cwd,
        "cannot be used with",
    );
    // A link that loses everything ends in an error, not a hang.
    expect_error(
        &["--loss", "1", "--size", "10KB", "--time-limit", "60"],
        cwd,
        "run incomplete",
    );
}

#[test]
fn help_explains_options_with_units() {
    let out = artq_sim(&["--help"], None);
    assert!(out.status.success());
    for needle in [
        "Mbit/s",
        "ms",
        "--size",
        "KiB",
        "--files",
        "--scheme",
        "--scenario",
        "--per-packet",
        "--json",
        "[default: 30]",
    ] {
        assert!(
            out.stdout.contains(needle),
            "--help lacks {needle:?}:\n{}",
            out.stdout
        );
    }
}

/// The video workloads: their playback metrics appear in the JSON (only
/// theirs), the flags and a scenario file describe the same run, and a key
/// of another kind is refused.
#[test]
fn video_workloads_report_playback_and_only_they_do() {
    let (_, files) = sim_json(&["--size", "100KB", "--bw", "20", "--rtt", "40"]);
    for key in [
        "avg_bitrate_kbps",
        "freeze_count",
        "rebuffer_count",
        "startup_ms",
    ] {
        assert!(files.get(key).is_none(), "{key} in a file run: {files}");
    }
    let live_flags = [
        "--workload",
        "live",
        "--bitrate",
        "1500",
        "--fps",
        "25",
        "--duration",
        "4",
        "--gop",
        "50",
        "--startup-delay",
        "500",
        "--bw",
        "20",
        "--rtt",
        "40",
        "--loss",
        "0.02",
    ];
    let (live_text, live) = sim_json(&live_flags);
    let kbps = f(&live, "avg_bitrate_kbps");
    assert!((1350.0..1650.0).contains(&kbps), "{live}");
    assert!(
        f(&live, "freeze_count") >= 0.0 && f(&live, "freeze_ms") >= 0.0,
        "{live}"
    );
    assert!(f(&live, "startup_ms") >= 500.0, "{live}");
    assert!(
        f(&live, "fct_ms") >= 3900.0,
        "paced: 4 s of stream take 4 s: {live}"
    );
    assert!(live.get("rebuffer_count").is_none(), "{live}");

    let dir = tempfile::tempdir().expect("temp dir");
    let toml = dir.path().join("live.toml");
    std::fs::write(
        &toml,
        "[workload]\nkind = \"live\"\nbitrate = 1500\nfps = 25\nduration = 4\ngop = 50\n\
         startup_delay = 500\n[link]\nbw = 20\nrtt = 40\nloss = 0.02\n",
    )
    .expect("write scenario");
    let (from_file, _) = sim_json(&["--scenario", toml.to_str().expect("utf-8 path")]);
    assert_eq!(from_file, live_text, "flags and scenario file run the same");

    let (_, dash) = sim_json(&[
        "--workload",
        "dash",
        "--video-duration",
        "10",
        "--bw",
        "5",
        "--rtt",
        "30",
        "--loss",
        "0.02",
    ]);
    assert_eq!(u(&dash, "files"), 6, "the manifest and 5 segments: {dash}");
    for key in ["rebuffer_count", "bitrate_switches"] {
        assert!(dash[key].is_u64(), "{key}: {dash}");
    }
    assert!(f(&dash, "avg_bitrate_kbps") >= 45.0, "{dash}");
    assert!(dash.get("freeze_count").is_none(), "{dash}");

    let bad = artq_sim(&["--workload", "dash", "--bitrate", "100"], None);
    assert!(!bad.status.success());
    assert!(bad.stderr.contains("bitrate"), "{}", bad.stderr);
}
