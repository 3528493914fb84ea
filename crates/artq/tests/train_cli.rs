//! `artq train art-dqn` as a program (issue 11): a tiny training run
//! writes a model that `artq sim --scheme art-dqn:model=FILE` loads and
//! uses; the same command writes the same file; bad input is refused
//! before any work.

mod common;

use std::process::Command;
use std::time::Duration;

use common::process::{self, RunOutput};

/// Bound on one command (debug build included); a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(180);

/// A small, lossy path and a small file: each episode has a few dozen
/// losses to learn from.
const EPISODE: [&str; 8] = [
    "--bw", "20", "--rtt", "40", "--loss", "0.08", "--size", "1MB",
];

fn artq(args: &[&str]) -> RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(args);
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

fn train(out: &str) -> RunOutput {
    let mut args = vec!["train", "art-dqn:gamma=1.1"];
    args.extend_from_slice(&EPISODE);
    args.extend_from_slice(&["--episodes", "2", "--seed", "5", "--out", out]);
    artq(&args)
}

#[test]
fn a_trained_model_is_saved_loaded_and_repeatable() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("dqn.safetensors");
    let model = model.to_str().unwrap();
    let out = train(model);
    assert!(out.status.success(), "artq train failed: {}", out.stderr);
    assert!(
        out.stderr.contains("episode 1/2 seed 5") && out.stderr.contains("episode 2/2 seed 6"),
        "{}",
        out.stderr
    );
    assert!(
        out.stdout.contains("over 2 episodes (0 failed)"),
        "{}",
        out.stdout
    );
    // Something was learned: the summary counts learning steps.
    let steps: u64 = out
        .stdout
        .split(" learning steps")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no step count in {}", out.stdout));
    assert!(steps > 0, "{}", out.stdout);
    let first = std::fs::read(model).unwrap();
    assert!(!first.is_empty());

    // The same command writes the same model.
    let again = dir.path().join("again.safetensors");
    let again = again.to_str().unwrap();
    assert!(train(again).status.success());
    assert_eq!(first, std::fs::read(again).unwrap(), "training is seeded");

    // The model drives a run.
    let scheme = format!("art-dqn:gamma=1.1,model={model}");
    let mut args = vec!["sim", "--scheme", &scheme, "--json"];
    args.extend_from_slice(&EPISODE);
    let sim = artq(&args);
    assert!(sim.status.success(), "artq sim failed: {}", sim.stderr);
    let v: serde_json::Value = serde_json::from_str(&sim.stdout).unwrap();
    assert_eq!(v["scheme"].as_str(), Some(scheme.as_str()), "{v}");
    assert!(v["n_max"].as_u64().is_some_and(|n| n >= 1), "{v}");
}

#[test]
fn bad_input_is_refused_before_training() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.safetensors");
    let out = out.to_str().unwrap();
    // Not a learning scheme.
    let r = artq(&["train", "art", "--episodes", "1", "--out", out]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("art-dqn"), "{}", r.stderr);
    // A model that does not exist.
    let r = artq(&[
        "train",
        "art-dqn:model=no-such-model.safetensors",
        "--out",
        out,
    ]);
    assert!(!r.status.success());
    assert!(
        r.stderr.contains("no-such-model.safetensors"),
        "{}",
        r.stderr
    );
    // No episodes; an output directory that does not exist.
    assert!(
        !artq(&["train", "art-dqn", "--episodes", "0", "--out", out])
            .status
            .success()
    );
    let r = artq(&["train", "art-dqn", "--out", "no/such/dir/m.safetensors"]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("does not exist"), "{}", r.stderr);
    assert!(!std::path::Path::new(out).exists(), "nothing was written");
}
