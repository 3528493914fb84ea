//! Snapshots of `artq sim --json` for a small matrix of schemes and links
//! (issue 9): any change in simulated results shows up in review as a diff
//! of `tests/snapshots/*.snap`, instead of hiding inside loose bounds.
//!
//! The transfers are small so that the matrix runs in a debug build in a
//! few seconds. `cpu_ms` (wall time, not deterministic) is never asked
//! for, and removed should it appear. After an intended change of results,
//! regenerate with `INSTA_UPDATE=always cargo test -p artq --test
//! sim_snapshots` and explain every changed number in the commit message.

mod common;

use std::process::Command;
use std::time::Duration;

use common::process;
use serde_json::Value;

/// Bound on one simulated run (debug build included); a hang fails the test.
const DEADLINE: Duration = Duration::from_secs(120);

/// Every scheme family on the default link (12 Mbit/s, 3% Bernoulli loss
/// here), and the bursty Gilbert-Elliott link for the schemes that react to
/// bursts.
const CASES: &[(&str, &[&str])] = &[
    ("quic_bernoulli", &["--scheme", "quic", "--loss", "0.03"]),
    ("art_bernoulli", &["--scheme", "art", "--loss", "0.03"]),
    (
        "fixed2_bernoulli",
        &["--scheme", "fixed:2", "--loss", "0.03"],
    ),
    ("2n1_bernoulli", &["--scheme", "2n+1", "--loss", "0.03"]),
    ("or3_bernoulli", &["--scheme", "or3", "--loss", "0.03"]),
    ("fec4_bernoulli", &["--scheme", "fec:4", "--loss", "0.03"]),
    (
        "quic_gilbert",
        &[
            "--scheme",
            "quic",
            "--loss",
            "0.04",
            "--loss-model",
            "gilbert",
            "--burst",
            "3",
        ],
    ),
    (
        "art_gilbert",
        &[
            "--scheme",
            "art",
            "--loss",
            "0.04",
            "--loss-model",
            "gilbert",
            "--burst",
            "3",
        ],
    ),
    (
        "art_mab_ucb_gilbert",
        &[
            "--scheme",
            "art-mab-ucb",
            "--loss",
            "0.04",
            "--loss-model",
            "gilbert",
            "--burst",
            "3",
        ],
    ),
];

/// Common to every case: a small transfer over a short path.
const BASE: &[&str] = &["--size", "300KB", "--rtt", "40", "--seed", "5", "--json"];

fn sim(args: &[&str]) -> Value {
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("sim").args(args).args(BASE);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "artq sim {args:?} failed: {}",
        out.stderr
    );
    let mut v: Value = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("bad JSON {:?}: {e}", out.stdout));
    if let Some(o) = v.as_object_mut() {
        o.remove("cpu_ms");
    }
    v
}

#[test]
fn sim_results_match_the_snapshots() {
    for (name, args) in CASES {
        let v = sim(args);
        // The run must have exercised recovery, or the snapshot says little.
        assert!(
            v["lost_packets"].as_u64().is_some_and(|n| n > 0),
            "{name}: nothing lost in {v}"
        );
        insta::assert_json_snapshot!(*name, v);
    }
}
