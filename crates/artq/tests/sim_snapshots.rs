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

/// 3% Bernoulli loss.
const BERNOULLI: &[&str] = &["--loss", "0.03"];
/// A bursty Gilbert-Elliott link (4% loss, mean burst 3).
const GILBERT: &[&str] = &["--loss", "0.04", "--loss-model", "gilbert", "--burst", "3"];

/// (snapshot name, scheme, link): every scheme family on Bernoulli loss,
/// and the schemes that react to bursts on the Gilbert-Elliott link.
const CASES: &[(&str, &str, &[&str])] = &[
    ("quic_bernoulli", "quic", BERNOULLI),
    ("art_bernoulli", "art", BERNOULLI),
    ("fixed2_bernoulli", "fixed:2", BERNOULLI),
    ("2n1_bernoulli", "2n+1", BERNOULLI),
    ("or3_bernoulli", "or3", BERNOULLI),
    ("fec4_bernoulli", "fec:4", BERNOULLI),
    ("quic_gilbert", "quic", GILBERT),
    ("art_gilbert", "art", GILBERT),
    ("art_mab_ucb_gilbert", "art-mab-ucb", GILBERT),
];

/// Common to every case: a small transfer over a short path.
const BASE: &[&str] = &["--size", "300KB", "--rtt", "40", "--seed", "5", "--json"];

fn sim(scheme: &str, link: &[&str]) -> Value {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(["sim", "--scheme", scheme]).args(link).args(BASE);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "artq sim --scheme {scheme} {link:?} failed: {}",
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
    for (name, scheme, link) in CASES {
        let v = sim(scheme, link);
        // The run must have exercised recovery, or the snapshot says little.
        assert!(
            v["lost_packets"].as_u64().is_some_and(|n| n > 0),
            "{name}: nothing lost in {v}"
        );
        insta::assert_json_snapshot!(*name, v);
    }
}
