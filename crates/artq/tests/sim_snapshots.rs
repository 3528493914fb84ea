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

/// Common to every case of [`CASES`]: a small transfer over a short path.
const BASE: &[&str] = &["--size", "300KB", "--rtt", "40", "--seed", "5", "--json"];

/// AutoRec's testbed in small: a 5 s live stream at 2 Mbit/s over 8 Mbit/s,
/// 50 ms, 5% loss (autorec.md §5.1 at a tenth of its length).
const LIVE: &[&str] = &[
    "--workload",
    "live",
    "--bitrate",
    "2000",
    "--duration",
    "5",
    "--bw",
    "8",
    "--rtt",
    "50",
    "--loss",
    "0.05",
];

/// RCP's messages in small: 2000 messages of 100 bytes at one per ms over
/// 10 Mbit/s, 100 ms, 10% loss on the data's way.
const MESSAGES: &[&str] = &[
    "--workload",
    "messages",
    "--messages",
    "2000",
    "--bw",
    "10",
    "--rtt",
    "100",
    "--loss",
    "0",
    "--down-loss",
    "0.1",
];

/// (snapshot name, scheme, arguments) of the schemes that need their own
/// workload: AutoRec (and QUIC beside it) on a live stream, RCP and its
/// baselines on messages.
const WORKLOAD_CASES: &[(&str, &str, &[&str])] = &[
    ("autorec_live", "autorec", LIVE),
    ("quic_live", "quic", LIVE),
    ("rcp_messages", "rcp", MESSAGES),
    ("udp_messages", "udp", MESSAGES),
    ("arq_messages", "arq", MESSAGES),
];

/// art+ and ART-DQN (learning online from its seed) on the file transfer
/// of [`CASES`].
const ADAPTER_CASES: &[(&str, &str, &[&str])] = &[
    ("artplus_gilbert", "art+", GILBERT),
    ("art_dqn_bernoulli", "art-dqn", BERNOULLI),
];

fn sim(scheme: &str, args: &[&str]) -> Value {
    let mut cmd = Command::new(common::artq_bin());
    cmd.args(["sim", "--scheme", scheme]).args(args);
    let out = process::run_with_deadline(cmd, DEADLINE).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "artq sim --scheme {scheme} {args:?} failed: {}",
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
    let files = CASES
        .iter()
        .chain(ADAPTER_CASES)
        .map(|&(name, scheme, link)| {
            let args: Vec<&str> = link.iter().chain(BASE).copied().collect();
            (name, scheme, args)
        });
    let own = WORKLOAD_CASES.iter().map(|&(name, scheme, args)| {
        let args: Vec<&str> = args
            .iter()
            .chain(&["--seed", "5", "--json"])
            .copied()
            .collect();
        (name, scheme, args)
    });
    for (name, scheme, args) in files.chain(own) {
        let v = sim(scheme, &args);
        // The run must have exercised recovery, or the snapshot says little.
        assert!(
            v["lost_packets"].as_u64().is_some_and(|n| n > 0),
            "{name}: nothing lost in {v}"
        );
        insta::assert_json_snapshot!(name, v);
    }
}
