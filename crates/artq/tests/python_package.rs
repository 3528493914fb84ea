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
//!
//! `.ci/run` builds the package's wheel once (`target/wheels/artq-*.whl`,
//! exported as `ARTQ_WHEEL`) and installs it with the extras
//! `artq[env,sweep,plot]` into `.venv`, so the suite runs against
//! `pip install ".[env,sweep,plot]"`. `base_install_in_a_fresh_venv`
//! installs the same wheel without extras into a new venv and checks that
//! the package works there and that what needs an extra says which.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

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

/// The wheel `.ci/run` built: `ARTQ_WHEEL`, else the one wheel in
/// `target/wheels/`. Panics, saying how to build it, when there is none,
/// several, or one older than the package's sources (a stale wheel would
/// test other code).
fn built_wheel() -> PathBuf {
    let root = common::workspace_root();
    let hint = "run `.ci/run` from the repository root: it builds the wheel \
                (pip wheel ., cargo's dev profile) into target/wheels and exports ARTQ_WHEEL";
    let wheel = match std::env::var_os("ARTQ_WHEEL") {
        Some(w) => PathBuf::from(w),
        None => {
            let dir = root.join("target/wheels");
            let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
                .unwrap_or_else(|e| panic!("no wheel: cannot read {}: {e}; {hint}", dir.display()))
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("artq-") && n.ends_with(".whl"))
                })
                .collect();
            match wheels.as_slice() {
                [one] => one.clone(),
                _ => panic!(
                    "expected one artq wheel in {}, found {wheels:?}; {hint}",
                    dir.display()
                ),
            }
        }
    };
    let built = std::fs::metadata(&wheel)
        .and_then(|m| m.modified())
        .unwrap_or_else(|e| panic!("wheel {}: {e}; {hint}", wheel.display()));
    let mut sources = vec![root.join("pyproject.toml")];
    for dir in ["python/artq", "crates/python/src"] {
        let entries =
            std::fs::read_dir(root.join(dir)).unwrap_or_else(|e| panic!("cannot read {dir}: {e}"));
        sources.extend(
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_file()),
        );
    }
    for source in sources {
        let changed = std::fs::metadata(&source)
            .and_then(|m| m.modified())
            .unwrap_or_else(|e| panic!("{}: {e}", source.display()));
        assert!(
            changed <= built,
            "the wheel {} is older than {}: {hint}",
            wheel.display(),
            source.display()
        );
    }
    wheel
}

/// `pip install artq` without extras, in a venv of its own: the package
/// runs a simulation, tqdm (its one dependency) came with it, and
/// `import artq.env` and `artq.sweep(...)` raise an `ImportError` (an
/// `artq.ArtqError`) naming the extra to install
/// (tests/python/base_install_check.py says what exactly).
#[test]
fn base_install_in_a_fresh_venv() {
    let python = common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let root = common::workspace_root();
    let wheel = built_wheel();
    let scratch = tempfile::Builder::new()
        .prefix("artq-fresh-venv-")
        .tempdir()
        .expect("temp dir");
    let venv = scratch.path().join("venv");
    let start = Instant::now();
    let mut create = Command::new(&python);
    create.arg("-m").arg("venv").arg(&venv);
    let out = common::process::run_with_deadline(create, Duration::from_secs(120))
        .expect("python -m venv");
    assert!(
        out.status.success(),
        "python -m venv failed: {}",
        out.stderr
    );
    let fresh = venv.join("bin/python");
    let mut install = Command::new(&fresh);
    install
        .args([
            "-m",
            "pip",
            "install",
            "-q",
            "--disable-pip-version-check",
            "--no-input",
        ])
        .arg(&wheel);
    let out = common::process::run_with_deadline(install, Duration::from_secs(300))
        .expect("pip install the wheel");
    assert!(
        out.status.success(),
        "pip install {} into a fresh venv failed (it needs PyPI for tqdm):\n{}\n{}",
        wheel.display(),
        out.stdout,
        out.stderr
    );
    let installed = start.elapsed();
    let mut check = Command::new(&fresh);
    check
        .arg(root.join("tests/python/base_install_check.py"))
        // Not the repository root: nothing there may shadow the installed
        // package.
        .current_dir(scratch.path());
    let out =
        common::process::run_with_deadline(check, Duration::from_secs(120)).expect("run the check");
    assert!(
        out.status.success(),
        "the base install check failed ({}):\n{}\n{}",
        out.status,
        out.stdout,
        out.stderr
    );
    eprintln!(
        "fresh venv: created and installed in {:.1} s, checked in {:.1} s\n{}",
        installed.as_secs_f64(),
        (start.elapsed() - installed).as_secs_f64(),
        out.stdout.trim()
    );
}
