//! ART journal §7.5, Fig. 25: DASH video QoE with ART against QUIC over
//! an LTE trace with heavy random loss.
//!
//! The paper streams a ~600 s DASH video (Big Buck Bunny, ITEC dataset,
//! 44 kbit/s to 3.9 Mbit/s) over one LSQUIC connection through Mahimahi's
//! Verizon LTE trace with 30 ms RTT and 10% loss, with a rate-based
//! adaptation, and reports average bitrate, rebuffering count and
//! rebuffering time. Here: the `dash` workload (`apps::video::dash`) over
//! `../shared/traces/Verizon-LTE-short.{down,up}` ([`trace`]: beside the
//! working directory, as `artq reproduce` runs from the repository root,
//! else beside the source tree; missing traces make every run fail with
//! the path named, and the claims undecided), 30 ms RTT, 10% Bernoulli
//! loss both ways, Cubic.
//!
//! Seeds: these runs are cheap (a 600 s video simulates in about half a
//! second), so more seeds than the other experiments: 30 (full), 10
//! (quick), 1 (tiny).

use super::common::{
    find, mean_of, num, range_noise, reduction_pct, AggRow, Case, Claim, Experiment, Scale, Verdict,
};
use super::scenarios::trace;
use crate::scenario::Scenario;
use apps::workload::{DashWorkload, Workload};
use netem::LinkSpec;

/// The schemes compared.
const SCHEMES: &[&str] = &["quic", "art"];

/// The experiment at `scale`: 600 s video over 30 seeds (full), 120 s over
/// 10 (quick), 20 s over 1 (tiny).
pub fn fig25(scale: Scale) -> Experiment {
    let seconds: u32 = scale.pick(600, 120, 20);
    let seeds: Vec<u64> = (1..=scale.pick(30, 10, 1)).collect();
    let group = format!("video={seconds}s");
    let cases = SCHEMES
        .iter()
        .map(|&scheme| Case {
            group: group.clone(),
            scheme: scheme.to_string(),
            scenario: scenario(scheme, seconds),
        })
        .collect();
    Experiment {
        name: "art-fig25",
        title: "Fig. 25: DASH video QoE, ART against QUIC (Verizon LTE trace, 30 ms, 10% loss)",
        setting: format!(
            "a {seconds} s DASH video (Big Buck Bunny's ITEC ladder, 45 kbit/s to 3.84 Mbit/s, \
             2 s segments, seeded sizes), rate-based adaptation (0.9 x harmonic mean of the last \
             3 segment download rates), 30 s buffer target, one connection; Verizon-LTE-short \
             trace down and up, 30 ms RTT, 10% Bernoulli loss both ways, Cubic; the paper's video \
             is ~600 s (quick scale: 120 s)"
        ),
        paper_numbers: &[
            "§7.5, Fig. 25: average bitrate 254 kbit/s (QUIC) -> 274 kbit/s (ART), +7.9%.",
            "§7.5, Fig. 25: rebuffering events 82 (QUIC) -> 73 (ART), -11.6%.",
            "§7.5, Fig. 25: rebuffering time 322 s (QUIC) -> 251 s (ART), -27.9%.",
        ],
        table_metrics: &[
            "avg_bitrate_kbps",
            "rebuffer_count",
            "rebuffer_s",
            "startup_ms",
            "bitrate_switches",
            "fct_ms",
        ],
        cases,
        seeds,
        claims: vec![
            Claim {
                source: "§7.5, Fig. 25",
                paper: "ART raises the average bitrate (254 -> 274 kbit/s, +7.9%)",
                judge: judge_bitrate,
            },
            Claim {
                source: "§7.5, Fig. 25",
                paper: "ART rebuffers less often (82 -> 73, -11.6%)",
                judge: judge_rebuffers,
            },
            Claim {
                source: "§7.5, Fig. 25",
                paper: "ART rebuffers for less time (322 -> 251 s, -27.9%)",
                judge: judge_rebuffer_time,
            },
        ],
        asides: Vec::new(),
    }
}

/// One run's scenario.
fn scenario(scheme: &str, seconds: u32) -> Scenario {
    let mut link = LinkSpec {
        bw: None,
        trace: Some(trace("Verizon-LTE-short.down")),
        rtt: 30.0,
        loss: Some(0.10),
        ..LinkSpec::default()
    };
    link.up.trace = Some(trace("Verizon-LTE-short.up"));
    Scenario {
        scheme: scheme.to_string(),
        // A 600 s video stalling for minutes still ends well within this.
        time_limit: 20.0 * f64::from(seconds) + 600.0,
        workload: Workload::Dash(DashWorkload { seconds }),
        link,
        ..Scenario::default()
    }
}

/// Compares one metric of ART and QUIC: `higher_is_better` says which
/// direction is an improvement; `paper_pct` is the paper's improvement.
/// Reproduced when ART improves by at least half the paper's figure and
/// by more than the seeds' noise, partially when it improves by less (or
/// within the noise), not reproduced otherwise. The noise is the larger
/// of the two schemes' ranges over the seeds divided by `2 sqrt(runs)`, a
/// rough standard error (the rows keep mean, min and max only).
fn compare(
    rows: &[AggRow],
    metric: &str,
    higher_is_better: bool,
    paper_pct: f64,
) -> (Verdict, String) {
    let Some(group) = rows.first().map(|r| r.group.clone()) else {
        return (Verdict::Undecided, "no runs".into());
    };
    let (Some(q), Some(a)) = (
        mean_of(rows, &group, "quic", metric),
        mean_of(rows, &group, "art", metric),
    ) else {
        return (Verdict::Undecided, "a scheme has no completed run".into());
    };
    let noise = range_noise(
        ["quic", "art"].iter().filter_map(|s| find(rows, &group, s)),
        metric,
    );
    let within_noise = (a - q).abs() <= noise;
    let gain = if higher_is_better {
        (q > 0.0).then(|| (a - q) / q * 100.0)
    } else {
        reduction_pct(a, q)
    };
    let ours = format!(
        "{metric}: quic {}, art {} ({}{})",
        num(q),
        num(a),
        gain.map_or("no change to measure".into(), |g| format!(
            "{g:+.1}% improvement"
        )),
        if within_noise {
            format!(", within the seeds' noise of {}", num(noise))
        } else {
            String::new()
        }
    );
    let verdict = match gain {
        Some(g) if g >= paper_pct / 2.0 && !within_noise => Verdict::Reproduced,
        Some(g) if g > 0.0 => Verdict::Partially,
        Some(_) => Verdict::NotReproduced,
        // Both zero (no rebuffering at all): nothing to improve.
        None => Verdict::NotReproduced,
    };
    (verdict, ours)
}

fn judge_bitrate(rows: &[AggRow]) -> (Verdict, String) {
    compare(rows, "avg_bitrate_kbps", true, 7.9)
}

fn judge_rebuffers(rows: &[AggRow]) -> (Verdict, String) {
    compare(rows, "rebuffer_count", false, 11.6)
}

fn judge_rebuffer_time(rows: &[AggRow]) -> (Verdict, String) {
    compare(rows, "rebuffer_s", false, 27.9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::common::Stat;
    use std::collections::BTreeMap;

    fn row(scheme: &str, metric: &str, v: f64) -> AggRow {
        let mut metrics = BTreeMap::new();
        metrics.insert(metric.to_string(), Stat::of(&[v]));
        AggRow {
            group: "video=20s".into(),
            scheme: scheme.into(),
            runs: 1,
            failed: 0,
            metrics,
        }
    }

    #[test]
    fn verdicts_follow_the_direction_and_size_of_the_change() {
        let judge = |q: f64, a: f64| {
            judge_rebuffers(&[
                row("quic", "rebuffer_count", q),
                row("art", "rebuffer_count", a),
            ])
            .0
        };
        assert_eq!(judge(82.0, 73.0), Verdict::Reproduced);
        // The same means with seeds spread over 0-60: within the noise.
        let mut q = row("quic", "rebuffer_count", 82.0);
        if let Some(st) = q.metrics.get_mut("rebuffer_count") {
            (st.min, st.max) = (50.0, 110.0);
        }
        let noisy = judge_rebuffers(&[q, row("art", "rebuffer_count", 73.0)]);
        assert_eq!(noisy.0, Verdict::Partially, "{}", noisy.1);
        assert_eq!(judge(82.0, 80.0), Verdict::Partially);
        assert_eq!(judge(82.0, 90.0), Verdict::NotReproduced);
        assert_eq!(judge(0.0, 0.0), Verdict::NotReproduced);
        let bitrate = judge_bitrate(&[
            row("quic", "avg_bitrate_kbps", 254.0),
            row("art", "avg_bitrate_kbps", 274.0),
        ]);
        assert_eq!(bitrate.0, Verdict::Reproduced, "{}", bitrate.1);
        assert_eq!(judge_bitrate(&[]).0, Verdict::Undecided);
    }

    #[test]
    fn a_tiny_run_plays_the_video_with_sane_qoe() {
        let e = fig25(Scale::Tiny);
        let traces = ["Verizon-LTE-short.down", "Verizon-LTE-short.up"];
        if netem::trace::shared_traces_for_test("a_tiny_run_plays_the_video_with_sane_qoe", &traces)
            .is_none()
        {
            return;
        }
        let r = crate::experiments::evaluate(&e, 2, &mut |_| {});
        assert_eq!(r.rows.len(), 2);
        for row in &r.rows {
            assert_eq!((row.runs, row.failed), (1, 0), "{:?}", r.runs);
            let kbps = row.mean("avg_bitrate_kbps").unwrap_or(0.0);
            assert!((45.0..=3841.0).contains(&kbps), "{row:?}");
            assert!(row.mean("rebuffer_count").is_some_and(|v| v >= 0.0));
            assert!(row.mean("startup_ms").is_some_and(|v| v > 0.0));
            // 20 s of video, downloaded ahead of playback: the run ends
            // about when the playback would.
            assert!(row.mean("fct_ms").is_some_and(|v| v > 1000.0), "{row:?}");
        }
        assert_eq!(r.claims.len(), 3);
    }

    #[test]
    fn the_experiment_is_registered_with_both_schemes() {
        let e = crate::experiments::experiment("art-fig25", Scale::Tiny).expect("registered");
        assert_eq!(e.cases.len(), 2);
        assert!(e
            .cases
            .iter()
            .all(|c| c.scenario.workload == Workload::Dash(DashWorkload { seconds: 20 })));
        assert_eq!(
            crate::experiments::experiment("art-fig25", Scale::Full).map(|e| e.seeds.len()),
            Some(30)
        );
    }
}
