//! `artq reproduce` end to end: outputs, unknown names, determinism.
//!
//! Uses the hidden `--tiny` scale (one seed, small transfers) so the test
//! stays fast in debug builds; the quick and full scales share every code
//! path but the sizes.

use std::path::Path;
use std::process::{Command, Output};

fn artq(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_artq"))
        .args(args)
        .output()
        .expect("artq runs")
}

fn reproduce_fig22(out: &Path) -> Output {
    let out = out.to_str().expect("utf-8 temp path");
    artq(&["reproduce", "--tiny", "--jobs", "2", "fig22", "--out", out])
}

#[test]
fn fig22_writes_csvs_json_and_report_with_every_scheme() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = reproduce_fig22(dir.path());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Progress on stderr, only the written paths on stdout.
    assert!(stderr.contains("[fig22]"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    for name in [
        "fig22_runs.csv",
        "fig22_summary.csv",
        "results.json",
        "report.md",
        "report.html",
        "fig22_fct_ms.svg",
        "fig22_redundancy.svg",
    ] {
        assert!(dir.path().join(name).is_file(), "{name} missing");
        assert!(stdout.contains(name), "{stdout}");
    }
    // A chart per table metric, with a bar per scheme, linked from the report.
    let svg = std::fs::read_to_string(dir.path().join("fig22_redundancy.svg")).expect("svg");
    assert!(svg.starts_with("<svg ") && svg.trim_end().ends_with("</svg>"));
    // The legend names every scheme (plotters writes each text on its own line).
    for scheme in ["quic", "fec:9", "art"] {
        assert!(
            svg.contains(&format!(">\n{scheme}\n</text>")),
            "{scheme}: {svg}"
        );
    }
    let runs = std::fs::read_to_string(dir.path().join("fig22_runs.csv")).expect("runs csv");
    let lines: Vec<&str> = runs.lines().collect();
    assert!(
        lines[0].starts_with("experiment,group,scheme,seed,error,fct_ms"),
        "{runs}"
    );
    assert_eq!(lines.len(), 1 + 3, "three schemes x one seed: {runs}");
    for scheme in ["quic", "fec:9", "art"] {
        let row = lines
            .iter()
            .find(|l| l.split(',').nth(2) == Some(scheme))
            .unwrap_or_else(|| panic!("no {scheme} row in {runs}"));
        assert_eq!(row.split(',').nth(4), Some(""), "run failed: {row}");
    }
    let summary = std::fs::read_to_string(dir.path().join("fig22_summary.csv")).expect("summary");
    assert_eq!(summary.lines().count(), 1 + 3, "{summary}");
    assert!(summary
        .lines()
        .next()
        .unwrap_or("")
        .contains("redundancy_mean"));

    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("results.json")).expect("json"),
    )
    .expect("valid JSON");
    assert_eq!(json["scale"], "tiny");
    let fig = &json["experiments"]["fig22"];
    assert_eq!(fig["rows"].as_array().map(Vec::len), Some(3));
    let fec = fig["rows"]
        .as_array()
        .and_then(|r| r.iter().find(|x| x["scheme"] == "fec:9"))
        .expect("fec row");
    let repairs = fec["metrics"]["fec_repairs"]["mean"]
        .as_f64()
        .expect("repairs");
    let replicas = fec["metrics"]["replicas"]["mean"]
        .as_f64()
        .expect("replicas");
    let redundancy = fec["metrics"]["redundancy"]["mean"]
        .as_f64()
        .expect("redundancy");
    assert!(repairs > 0.0);
    assert!((redundancy - (repairs + replicas)).abs() < 1e-6);
    assert_eq!(fig["claims"].as_array().map(Vec::len), Some(2));

    let report = std::fs::read_to_string(dir.path().join("report.md")).expect("report");
    assert!(report.contains("## fig22"), "{report}");
    assert!(report.contains("| size=500KB | fec:9 | 1 |"), "{report}");
    assert!(report.contains("Fig. 22"), "{report}");
    assert!(
        report.contains("![fig22 redundancy](fig22_redundancy.svg)"),
        "{report}"
    );
    assert!(
        report.contains("**reproduced**")
            || report.contains("**partially reproduced**")
            || report.contains("**not reproduced**"),
        "{report}"
    );
}

#[test]
fn unknown_experiment_is_a_clear_error_listing_the_valid_ones() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = artq(&[
        "reproduce",
        "--tiny",
        "fig99",
        "--out",
        dir.path().to_str().expect("utf-8"),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown experiment 'fig99'"), "{stderr}");
    for name in [
        "fig19",
        "fig20",
        "fig21",
        "fig22",
        "fig24",
        "ablation",
        "art-fig12",
        "art-fig15",
        "art-fig23",
        "art-fig24a",
        "art-fig26",
        "autorec-fig11",
        "autorec-fig12",
        "autorec-fig13",
        "art-fig27",
        "art-dqn-heldout",
    ] {
        assert!(stderr.contains(name), "{stderr}");
    }
    assert!(!dir.path().join("results.json").exists());
}

#[test]
fn running_twice_gives_identical_results() {
    let a = tempfile::tempdir().expect("temp dir");
    let b = tempfile::tempdir().expect("temp dir");
    assert!(reproduce_fig22(a.path()).status.success());
    assert!(reproduce_fig22(b.path()).status.success());
    for name in [
        "results.json",
        "report.md",
        "fig22_runs.csv",
        "fig22_summary.csv",
        "fig22_redundancy.svg",
    ] {
        let x = std::fs::read(a.path().join(name)).expect("first");
        let y = std::fs::read(b.path().join(name)).expect("second");
        assert!(x == y, "{name} differs between two runs");
    }
}

/// A subset of the issue-12 experiments end to end: every output file
/// exists, the RPC and paired metrics are present and sane, and a second
/// invocation writes the same bytes.
#[test]
fn rpc_and_design_experiments_write_sane_identical_outputs() {
    let run = |dir: &Path| {
        let out = dir.to_str().expect("utf-8 temp path");
        let o = artq(&[
            "reproduce",
            "--tiny",
            "--jobs",
            "2",
            "art-fig26",
            "art-fig12",
            "--out",
            out,
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    };
    let a = tempfile::tempdir().expect("temp dir");
    let b = tempfile::tempdir().expect("temp dir");
    run(a.path());
    run(b.path());
    let files = [
        "art-fig26_runs.csv",
        "art-fig26_summary.csv",
        "art-fig26_rpc_fct_mean_ms.svg",
        "art-fig12_summary.csv",
        "art-fig12_redundancy.svg",
        "results.json",
        "report.md",
        "report.html",
    ];
    for name in files {
        let x = std::fs::read(a.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        let y = std::fs::read(b.path().join(name)).expect("second run");
        assert!(!x.is_empty(), "{name} is empty");
        assert!(x == y, "{name} differs between two runs");
    }
    let json: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(a.path().join("results.json")).expect("json"),
    )
    .expect("valid JSON");
    let rows = json["experiments"]["art-fig26"]["rows"]
        .as_array()
        .expect("rows");
    for row in rows.iter().filter(|r| r["group"] == "rpc p=5%") {
        let p50 = row["metrics"]["rpc_fct_p50_ms"]["mean"]
            .as_f64()
            .expect("p50");
        let p99 = row["metrics"]["rpc_fct_p99_ms"]["mean"]
            .as_f64()
            .expect("p99");
        // 60 ms RTT: no call completes faster; none should take seconds.
        assert!((60.0..2000.0).contains(&p50) && p99 >= p50, "{row}");
    }
    let fig12 = json["experiments"]["art-fig12"]["rows"]
        .as_array()
        .expect("rows");
    assert_eq!(fig12.len(), 4, "R = 0, 3, 5, 8");
    for row in fig12 {
        assert_eq!(row["failed"], 0, "{row}");
        assert!(
            row["metrics"]["redundancy"]["mean"].as_f64().is_some(),
            "{row}"
        );
    }
    let report = std::fs::read_to_string(a.path().join("report.md")).expect("report");
    assert!(report.contains("| art-fig26 |") && report.contains("| art-fig12 |"));
}

#[test]
fn render_redraws_charts_and_reports_from_results_json_alone() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = reproduce_fig22(dir.path());
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let drawn = [
        "fig22_redundancy.svg",
        "fig22_fct_ms.svg",
        "report.md",
        "report.html",
    ];
    let before: Vec<Vec<u8>> = drawn
        .iter()
        .map(|n| std::fs::read(dir.path().join(n)).expect(n))
        .collect();
    let results = std::fs::read(dir.path().join("results.json")).expect("results.json");
    for n in drawn {
        std::fs::remove_file(dir.path().join(n)).expect(n);
    }
    let path = dir.path().to_str().expect("utf-8 temp path");
    let again = artq(&["reproduce", "--render", path]);
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let stdout = String::from_utf8_lossy(&again.stdout);
    for (n, b) in drawn.iter().zip(&before) {
        assert!(stdout.contains(n), "{stdout}");
        assert!(
            std::fs::read(dir.path().join(n)).expect(n) == *b,
            "{n} differs"
        );
    }
    assert!(
        !stdout.contains("results.json") && !stdout.contains(".csv"),
        "{stdout}"
    );
    assert_eq!(
        std::fs::read(dir.path().join("results.json")).expect("kept"),
        results
    );
    // A directory without results.json is an error that says so, not a panic.
    let empty = tempfile::tempdir().expect("temp dir");
    let bad = artq(&[
        "reproduce",
        "--render",
        empty.path().to_str().expect("utf-8"),
    ]);
    assert!(!bad.status.success());
    let stderr = String::from_utf8_lossy(&bad.stderr);
    assert!(stderr.contains("cannot redraw the report"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
