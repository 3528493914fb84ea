//! The `artq` Python package (crates/python, python/artq, pyproject.toml):
//! its unittest suites `tests/python/test_*.py` (the package against this
//! build's `artq` binary: `artq.sim` returns what `artq sim --json` prints,
//! errors carry the CLI's messages; the Gymnasium environment; sweeps on a
//! local Ray; the examples at a tiny size), run by the venv's Python into
//! which `.ci/run` installs the package (`pip install .`) and the suites'
//! requirements (`tests/python/requirements.txt`).
//!
//! Fails, never skips, when the venv or the package is missing, and says
//! how to get them.

mod common;

use std::process::Command;
use std::time::Duration;

#[test]
fn python_package_suite() {
    let python = common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let root = common::workspace_root();
    let mut check = Command::new(&python);
    check.args(["-c", "import artq, artq.env, ray, pandas, matplotlib"]);
    let out =
        common::process::run_with_deadline(check, Duration::from_secs(60)).expect("run python");
    assert!(
        out.status.success(),
        "{} cannot import the artq package: {}; run `.ci/run` from the repository root \
         (it runs `pip install .` and installs tests/python/requirements.txt into .venv)",
        python.display(),
        out.stderr.trim()
    );
    let mut suite = Command::new(&python);
    suite
        .args([
            "-m",
            "unittest",
            "discover",
            "-v",
            "-s",
            "tests/python",
            "-p",
            "test_*.py",
        ])
        .current_dir(&root)
        .env("ARTQ_BIN", env!("CARGO_BIN_EXE_artq"));
    let out = common::process::run_with_deadline(suite, Duration::from_secs(600))
        .expect("run the Python suite");
    assert!(
        out.status.success(),
        "the Python package's suite failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
}
