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

/// `artq` run from the repository root (where `../shared/traces` is).
fn artq_at_root(args: &[&str]) -> RunOutput {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(args).current_dir(common::workspace_root());
    process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"))
}

/// The shared traces the default distribution and the held-out evaluation
/// need (`netem::trace::shared_traces_for_test`: missing, the test fails
/// unless ARTQ_SKIP_MISSING_TRACES is set, and then skips).
fn shared_traces(test: &str) -> bool {
    netem::trace::shared_traces_for_test(
        test,
        &[
            "TMobile-LTE-short.down",
            "TMobile-LTE-short.up",
            "Verizon-LTE-short.down",
            "Verizon-LTE-short.up",
        ],
    )
    .is_some()
}

#[test]
fn the_documented_default_training_runs_short_and_its_model_loads() {
    if !shared_traces("the_documented_default_training_runs_short_and_its_model_loads") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("art-dqn.safetensors");
    let model = model.to_str().unwrap();
    // The documented command (docs/recovery.md, models/art-dqn.md), cut to
    // two episodes: the default distribution, no scenario option.
    let out = artq_at_root(&[
        "train",
        "art-dqn:reward=tail",
        "--episodes",
        "2",
        "--out",
        model,
    ]);
    assert!(out.status.success(), "artq train failed: {}", out.stderr);
    assert!(
        out.stderr.contains("the built-in distribution") && !out.stderr.contains("WARNING"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("TMobile-LTE-short"), "{}", out.stderr);
    assert!(!out.stderr.contains("Verizon"), "held out: {}", out.stderr);
    // The model carries its options: no need to repeat reward=tail.
    let scheme = format!("art-dqn:model={model}");
    let sim = artq_at_root(&[
        "sim",
        "--trace",
        "../shared/traces/Verizon-LTE-short.down",
        "--loss",
        "0.05",
        "--size",
        "200KB",
        "--scheme",
        &scheme,
        "--json",
    ]);
    assert!(sim.status.success(), "artq sim failed: {}", sim.stderr);
    let v: serde_json::Value = serde_json::from_str(&sim.stdout).unwrap();
    assert_eq!(
        v["scheme"].as_str(),
        Some(format!("art-dqn:reward=tail,model={model}").as_str()),
        "{v}"
    );
}

/// The sha256 the provenance file records for the committed model.
fn recorded_sha256() -> String {
    let text = std::fs::read_to_string(common::workspace_root().join("models/art-dqn.md"))
        .expect("models/art-dqn.md");
    text.lines()
        .find_map(|l| l.trim().strip_prefix("- sha256: `"))
        .and_then(|l| l.strip_suffix('`'))
        .expect("a `- sha256: `...`` line in models/art-dqn.md")
        .to_string()
}

#[test]
fn the_committed_model_is_the_one_its_provenance_names_and_runs() {
    let path = common::workspace_root().join("models/art-dqn.safetensors");
    let bytes = std::fs::read(&path).expect("models/art-dqn.safetensors");
    let digest = ring::digest::digest(&ring::digest::SHA256, &bytes);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        hex,
        recorded_sha256(),
        "models/art-dqn.md names another model"
    );
    let scheme = "art-dqn:model=models/art-dqn.safetensors";
    let mut args = vec!["sim", "--scheme", scheme, "--json"];
    args.extend_from_slice(&EPISODE);
    let sim = artq_at_root(&args);
    assert!(sim.status.success(), "artq sim failed: {}", sim.stderr);
    let v: serde_json::Value = serde_json::from_str(&sim.stdout).unwrap();
    assert_eq!(
        v["scheme"].as_str(),
        Some("art-dqn:reward=tail,model=models/art-dqn.safetensors"),
        "{v}"
    );
}

#[test]
fn jobs_do_not_change_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let model = |jobs: &str| {
        let out = dir.path().join(format!("m{jobs}.safetensors"));
        let out_s = out.to_str().unwrap().to_string();
        let mut args = vec!["train", "art-dqn:reward=tail"];
        args.extend_from_slice(&EPISODE);
        args.extend_from_slice(&[
            "--episodes",
            "3",
            "--batch",
            "2",
            "--jobs",
            jobs,
            "--out",
            &out_s,
        ]);
        let r = artq(&args);
        assert!(r.status.success(), "{}", r.stderr);
        std::fs::read(out).unwrap()
    };
    assert_eq!(model("1"), model("3"));
}

#[test]
fn distribution_files_are_read_and_refused_with_reasons() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("d.toml");
    let out = dir.path().join("m.safetensors");
    let out = out.to_str().unwrap();
    std::fs::write(
        &file,
        "bandwidths = [20]\nlosses = [0.08]\nrtts = [40]\nsizes = [\"300KB\"]\nepisodes = 2\n",
    )
    .unwrap();
    let f = file.to_str().unwrap();
    let r = artq(&[
        "train",
        "art-dqn",
        "--distribution",
        f,
        "--print-distribution",
    ]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stdout.contains("bandwidths = [20]"), "{}", r.stdout);
    let r = artq(&["train", "art-dqn", "--distribution", f, "--out", out]);
    assert!(r.status.success(), "{}", r.stderr);
    assert!(r.stdout.contains("over 2 episodes"), "{}", r.stdout);
    assert!(
        r.stderr.contains("20 Mbit/s, 40 ms, loss 8%, 300KB"),
        "{}",
        r.stderr
    );
    // A bad value, a scenario flag beside the file, a missing file.
    std::fs::write(
        &file,
        "bandwidths = [20]\nlosses = [0.08, 2]\nrtts = [40]\nsizes = [\"300KB\"]\n",
    )
    .unwrap();
    let r = artq(&["train", "art-dqn", "--distribution", f, "--out", out]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("losses[1] = 2"), "{}", r.stderr);
    let r = artq(&[
        "train",
        "art-dqn",
        "--distribution",
        f,
        "--loss",
        "0.1",
        "--out",
        out,
    ]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("--loss"), "{}", r.stderr);
    let r = artq(&[
        "train",
        "art-dqn",
        "--distribution",
        "no/such.toml",
        "--out",
        out,
    ]);
    assert!(!r.status.success());
    assert!(r.stderr.contains("no/such.toml"), "{}", r.stderr);
}
