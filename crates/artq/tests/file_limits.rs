//! Every file a user points artq at is read with a size cap (issue 15, bug
//! 9): `/dev/zero` or `/dev/urandom` given as a trace, a loss pattern, a
//! scenario, a trace a scenario names, a certificate, a key or a CA bundle
//! must end in a clear error that names the file and the limit, quickly,
//! instead of reading until memory runs out.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{process, Scratch};

/// Generous for a debug build on a loaded 2-core machine; a capped read of
/// 64 MiB takes well under a second, an uncapped one never ends.
const DEADLINE: Duration = Duration::from_secs(60);

/// Runs `artq args...` and returns its stderr, asserting that it failed
/// cleanly (exit status 1, an `artq: error:` line, no panic) before the
/// deadline.
fn refused(args: &[&str]) -> String {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(args);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.status.code(),
        Some(1),
        "{args:?}: status {:?}, stderr: {}",
        out.status,
        out.stderr
    );
    assert!(
        out.stderr.contains("artq: error:") && !out.stderr.contains("panicked"),
        "{args:?}: {}",
        out.stderr
    );
    out.stderr
}

/// The endless devices of this machine.
fn endless() -> Vec<&'static str> {
    let devs: Vec<&str> = ["/dev/zero", "/dev/urandom"]
        .into_iter()
        .filter(|d| Path::new(d).exists())
        .collect();
    assert!(
        !devs.is_empty(),
        "no /dev/zero or /dev/urandom to test with"
    );
    devs
}

#[test]
fn endless_traces_and_loss_patterns_fail_fast() {
    for dev in endless() {
        let e = refused(&["sim", "--trace", dev]);
        assert!(
            e.contains(dev) && e.contains("64 MiB") && e.contains("trace"),
            "{e}"
        );
        let e = refused(&["sim", "--down-trace", dev]);
        assert!(e.contains(dev) && e.contains("64 MiB"), "{e}");
        let e = refused(&["sim", "--loss-pattern", dev]);
        assert!(e.contains(dev) && e.contains("loss-pattern"), "{e}");
        let e = refused(&[
            "link",
            "--listen",
            "127.0.0.1:0",
            "--to",
            "127.0.0.1:9",
            "--trace",
            dev,
        ]);
        assert!(e.contains(dev) && e.contains("64 MiB"), "{e}");
    }
}

#[test]
fn endless_scenarios_and_the_traces_they_name_fail_fast() {
    let scratch = Scratch::new();
    for dev in endless() {
        let e = refused(&["sim", "--scenario", dev]);
        assert!(
            e.contains(dev) && e.contains("1 MiB") && e.contains("scenario"),
            "{e}"
        );
        let file = scratch.path().join("endless.toml");
        std::fs::write(&file, format!("[link]\ntrace = \"{dev}\"\n")).expect("write scenario");
        let e = refused(&["sim", "--scenario", &file.to_string_lossy()]);
        assert!(e.contains(dev) && e.contains("64 MiB"), "{e}");
    }
}

#[test]
fn endless_certificates_keys_and_ca_bundles_fail_fast() {
    let scratch = Scratch::new();
    let root = scratch.root();
    let root = root.to_string_lossy();
    for dev in endless() {
        let e = refused(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--root",
            &root,
            "--cert",
            dev,
            "--key",
            dev,
        ]);
        assert!(
            e.contains(dev) && e.contains("PEM") && e.contains("1048576"),
            "{e}"
        );
        let e = refused(&["get", "https://127.0.0.1:9/f", "--ca", dev]);
        assert!(e.contains(dev) && e.contains("PEM"), "{e}");
    }
}
