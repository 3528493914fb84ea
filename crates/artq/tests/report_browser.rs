//! report.html in a real browser: `artq reproduce --quick` (every
//! experiment: about three minutes on two cores with the test build, whose
//! dependencies are optimised, 1.35 times the release build's time), and
//! `artq reproduce` on a few experiments at the hidden `--tiny` scale
//! (seconds), then tests/report/check_report.py opens each report in
//! headless Chromium
//! and checks that it loads with no console error and no network request,
//! that every chart is an image that rendered (non-zero size), that each
//! experiment the paper gives numbers for shows them in its charts (and the
//! others do not), and that screenshots of the first screen and of one
//! experiment are not blank. The same check runs on the committed
//! full-scale report, docs/reproduce/report.html.
//!
//! Chromium is `$ARTQ_CHROMIUM` (exported by `.ci/run`, which installs
//! Debian's chromium), else `chromium` on PATH; python is `$ARTQ_PYTHON`,
//! else `python3` (the driver needs only the standard library). A missing
//! one fails the test with how to get it: it never skips.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository root (the driver lives in tests/report).
fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs tests/report/check_report.py on `report`, screenshots into `shots`;
/// fails the test unless the check passed, and returns its JSON summary.
fn check_report(report: &Path, experiment: &str, shots: &Path) -> serde_json::Value {
    let chromium = std::env::var("ARTQ_CHROMIUM").unwrap_or_else(|_| "chromium".into());
    let python = std::env::var("ARTQ_PYTHON").unwrap_or_else(|_| "python3".into());
    let out = Command::new(&python)
        .arg(workspace_root().join("tests/report/check_report.py"))
        .args([
            "--chromium",
            &chromium,
            "--timeout",
            "90",
            "--experiment",
            experiment,
        ])
        .arg("--screenshots")
        .arg(shots)
        .arg(report)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {python} (set ARTQ_PYTHON, or run .ci/run): {e}"));
    let text = format!(
        "check_report.py: {}; Chromium is $ARTQ_CHROMIUM or chromium on PATH (.ci/run \
         installs Debian's chromium):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(stdout.trim().strip_prefix("ok: ").expect("an ok line"))
        .expect("JSON summary")
}

/// Runs `artq reproduce ARGS --out OUT` (the test build); fails the test
/// unless it succeeded.
fn reproduce(args: &[&str], out: &Path) {
    let run = Command::new(env!("CARGO_BIN_EXE_artq"))
        .arg("reproduce")
        .args(args)
        .arg("--out")
        .arg(out)
        .output()
        .expect("artq runs");
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

/// Each experiment section shows the paper's values in a chart exactly
/// when the paper gives some.
fn assert_paper_shown_where_given(sections: &[serde_json::Value]) {
    for s in sections {
        let paper = s["paperValues"].as_u64().expect("count");
        let shown = s["chartsWithPaper"].as_u64().expect("count");
        assert_eq!(paper > 0, shown > 0, "{s}");
    }
}

/// The committed full-scale report (docs/reproduce/report.html), as a
/// reader who clones the repository opens it: every one of its charts.
#[test]
fn committed_report_html_renders_in_chromium() {
    let dir = tempfile::tempdir().expect("temp dir");
    let report = workspace_root().join("docs/reproduce/report.html");
    let summary = check_report(&report, "art-fig23", dir.path());
    assert!(
        summary["images"].as_u64().expect("count") >= 150,
        "{summary}"
    );
}

#[test]
fn report_html_renders_in_chromium_with_the_papers_values() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    // art-fig25 and rcp-table2 have paper values, art-fig12 (lines against
    // the loss rate) has none.
    reproduce(
        &[
            "--tiny",
            "--jobs",
            "2",
            "art-fig25",
            "art-fig12",
            "rcp-table2",
        ],
        &out,
    );
    let report = out.join("report.html");
    assert!(report.is_file(), "no report.html");
    let shots = dir.path().join("shots");
    let summary = check_report(&report, "art-fig25", &shots);
    // Every chart of the run is in the page: 6 + 3 + 3 table metrics.
    assert_eq!(summary["images"], 12, "{summary}");
    let sections = summary["sections"].as_array().expect("sections");
    let names: Vec<&str> = sections.iter().filter_map(|s| s["name"].as_str()).collect();
    assert_eq!(names, ["art-fig25", "art-fig12", "rcp-table2"]);
    assert_paper_shown_where_given(sections);
    for png in ["first-screen.png", "experiment.png"] {
        let bytes = std::fs::read(shots.join(png)).expect(png);
        assert!(bytes.starts_with(b"\x89PNG"), "{png} is not a PNG");
    }
}

/// The acceptance of issue 28 as written: the report of `artq reproduce
/// --quick`, every experiment, opens in Chromium with no console error,
/// every chart rendered, and every experiment with paper values shows them.
#[test]
fn quick_report_renders_in_chromium_with_every_papers_value() {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("out");
    reproduce(&["--quick", "--jobs", "2"], &out);
    let shots = dir.path().join("shots");
    let summary = check_report(&out.join("report.html"), "fig20", &shots);
    let sections = summary["sections"].as_array().expect("sections");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).expect("results.json"))
            .expect("results.json parses");
    let experiments = results["experiments"].as_object().expect("experiments");
    assert_eq!(sections.len(), experiments.len(), "{summary}");
    // Every chart file of the run is an image in the page.
    let charts = std::fs::read_dir(&out)
        .expect("out dir")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "svg"))
        })
        .count();
    assert!(charts >= 100, "{charts} charts");
    assert_eq!(summary["images"].as_u64(), Some(charts as u64), "{summary}");
    let with_paper = sections
        .iter()
        .filter(|s| s["paperValues"].as_u64().is_some_and(|n| n > 0))
        .count();
    // ART Figs. 20, 21, 23-27, RCP Table II, Fig. 5 and Exp. 4, AutoRec
    // Figs. 11-13 (lab::experiments::paper).
    assert!(
        with_paper >= 13,
        "{with_paper} experiments with paper values: {summary}"
    );
    assert_paper_shown_where_given(sections);
}
