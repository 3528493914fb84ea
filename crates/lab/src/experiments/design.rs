//! The ART journal's design-space figures: what fixed redundancy levels cost
//! (Fig. 12), how sensitive the adapter is to its window L_queue (Fig. 15),
//! the per-packet reductions of rounds and T_wait (Fig. 23), and N_max
//! against goodput over many runs (Fig. 24(a)).
//!
//! Fig. 23 is not a comparison of means: it pairs packets. For one setting
//! and one seed, QUIC and ART run the same file over the same link with the
//! same seeds; a packet is identified by the stream bytes it carries
//! (stream, offset of its first byte), which both runs send in the same
//! packetization. A pair is a packet whose first transmission was lost in
//! both runs; its reductions are `ΔN = N_quic − N_art` (retransmission
//! rounds until delivery) and `ΔT_wait = T_wait^quic − T_wait^art`.
//! Packets lost in only one run are left out: the link's loss draws follow
//! the packets sent, and ART's replicas shift them, so beyond the first
//! loss the two runs do not lose the same packets, and a one-sided packet
//! measures that shift rather than the recovery. [`pair_items`] is the
//! pairing; the distributions pool every pair of every setting of a seed.

use std::collections::BTreeMap;

use apps::workload::Workload;
use netem::LossKind;
use transport::congestion::CongestionAlgorithm;

use super::common::{
    combine, groups, mean_of, num, pct_label, reduction_pct, size_label, AggRow, Case, Claim,
    Experiment, Scale, Verdict,
};
use super::scenarios::{base, cases};
use crate::metrics::{ms, ItemRecord};
use crate::run::run;
use crate::scenario::Scenario;

// ---- Fig. 12 ----------------------------------------------------------

/// Fig. 12's schemes: R = 0 (plain QUIC: no replica beyond the one
/// retransmission) and ART's scheduler with fixed R = 3, 5, 8.
const FIG12_SCHEMES: &[&str] = &["quic", "art-fix:3", "art-fix:5", "art-fix:8"];

/// `art-fig12`.
pub fn fig12(scale: Scale) -> Experiment {
    let size = scale.pick(10_000_000, 1_000_000, 100_000);
    let losses: &[f64] = scale.pick(
        &[0.02, 0.05, 0.08, 0.10],
        &[0.02, 0.05, 0.08, 0.10],
        &[0.05],
    );
    let mut all = Vec::new();
    for &p in losses {
        let group = format!("p={}", pct_label(p));
        all.extend(cases(&group, FIG12_SCHEMES, |s| {
            base(s, 100.0, 100.0, p, Workload::bulk(size))
        }));
    }
    Experiment {
        name: "art-fig12",
        title: "Fig. 12: redundancy cost and N_max of fixed redundancy levels",
        setting: format!(
            "one {} file, 100 Mbit/s, 100 ms RTT, Bernoulli loss {} both ways, Cubic; R = 0 \
             is plain quic, R = 3, 5, 8 are art-fix:R (ART's scheduler with a fixed level; \
             the paper's text does not say whether Fig. 12 spreads the replicas)",
            size_label(size),
            losses
                .iter()
                .map(|p| pct_label(*p))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        paper_numbers: &[
            "§6.1, Fig. 12(a): the redundancy cost rises with R (chart only).",
            "§6.1, Fig. 12(b): \"the higher the redundancy level, the lower the N_max\"; the \
             inflection point differs between loss rates.",
        ],
        table_metrics: &["redundancy", "n_max", "fct_ms"],
        cases: all,
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§6.1, Fig. 12(a)",
                paper: "redundancy cost rises with the fixed level R at every loss rate",
                judge: fig12_cost,
            },
            Claim {
                source: "§6.1, Fig. 12(b)",
                paper: "N_max falls as R rises at every loss rate",
                judge: fig12_nmax,
            },
        ],
        asides: vec![],
    }
}

/// Per group: the means of `metric` along [`FIG12_SCHEMES`], and whether
/// they rise (or fall) strictly / weakly.
fn monotone(rows: &[AggRow], metric: &str, rising: bool) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let vals: Option<Vec<f64>> = FIG12_SCHEMES
            .iter()
            .map(|s| mean_of(rows, &g, s, metric))
            .collect();
        let Some(vals) = vals else {
            outcomes.push(None);
            continue;
        };
        let ok = |strict: bool| {
            vals.windows(2).all(|w| {
                let (a, b) = if rising { (w[0], w[1]) } else { (w[1], w[0]) };
                if strict {
                    a < b
                } else {
                    a <= b
                }
            })
        };
        let ends = match (vals.first(), vals.last()) {
            (Some(a), Some(b)) if rising => a < b,
            (Some(a), Some(b)) => a > b,
            _ => false,
        };
        outcomes.push(Some((ok(false) && ends, ends)));
        parts.push(format!(
            "{g}: {}",
            vals.iter().map(|v| num(*v)).collect::<Vec<_>>().join(" → ")
        ));
    }
    (
        combine(&outcomes),
        format!("mean {metric} for R = 0, 3, 5, 8: {}", parts.join("; ")),
    )
}

fn fig12_cost(rows: &[AggRow]) -> (Verdict, String) {
    monotone(rows, "redundancy", true)
}

fn fig12_nmax(rows: &[AggRow]) -> (Verdict, String) {
    monotone(rows, "n_max", false)
}

// ---- Fig. 15 ----------------------------------------------------------

/// The L_queue values of Fig. 15 (the paper's default is "≥ 10").
const FIG15_L: &[usize] = &[1, 5, 10, 20, 50];

fn lq_scheme(l: usize) -> String {
    format!("art:l_queue={l}")
}

/// `art-fig15`.
pub fn fig15(scale: Scale) -> Experiment {
    let size = scale.pick(10_000_000, 2_000_000, 200_000);
    let means: &[f64] = scale.pick(&[0.01, 0.03, 0.05, 0.10], &[0.01, 0.05, 0.10], &[0.05]);
    let ls: &[usize] = scale.pick(FIG15_L, FIG15_L, &[1, 10]);
    let schemes: Vec<String> = ls.iter().map(|l| lq_scheme(*l)).collect();
    let scheme_refs: Vec<&str> = schemes.iter().map(String::as_str).collect();
    let mut all = Vec::new();
    for &p in means {
        let group = format!("mean p={}", pct_label(p));
        all.extend(cases(&group, &scheme_refs, |s| {
            let mut sc = base(s, 100.0, 30.0, p, Workload::bulk(size));
            sc.link.loss_model = LossKind::Varying;
            sc.link.loss_std = p / 2.0;
            sc.link.loss_interval = 100.0;
            sc
        }));
    }
    Experiment {
        name: "art-fig15",
        title: "Fig. 15: sensitivity of ART to L_queue under time-varying loss",
        setting: format!(
            "one {} file, 100 Mbit/s, 30 ms RTT, loss rate redrawn every 100 ms from a \
             Gaussian N(p̄, (p̄/2)²) (the paper: \"the loss pattern follows Gaussian \
             distribution\", p̄ = 1% ~ 10%; the spread and interval are our choice), \
             p̄ = {}, both ways, Cubic; schemes art:l_queue=N for N = {}",
            size_label(size),
            means
                .iter()
                .map(|p| pct_label(*p))
                .collect::<Vec<_>>()
                .join(", "),
            ls.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
        ),
        paper_numbers: &[
            "§6.1, Fig. 15: \"within identical network conditions, the overall redundancy level \
             remains relatively stable (goes up very slowly) with the increase of L_queue\".",
            "§6.1: \"a small L_queue (e.g., L_queue = 1) increases the randomness in the \
             statistics on p_r, resulting in a higher redundancy cost\".",
            "§6.1: \"from the perspective of performance, the results remain similar\".",
        ],
        table_metrics: &["redundancy", "fct_ms", "n_max"],
        cases: all,
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§6.1, Fig. 15",
                paper: "redundancy stays nearly flat for L_queue from 10 up (within ±20% of L_queue = 10)",
                judge: fig15_flat,
            },
            Claim {
                source: "§6.1, Fig. 15",
                paper: "L_queue = 1 costs more redundancy than L_queue = 10",
                judge: fig15_small,
            },
            Claim {
                source: "§6.1, Fig. 15",
                paper: "FCT is similar across L_queue (within 10% of L_queue = 10)",
                judge: fig15_fct,
            },
        ],
        asides: vec![],
    }
}

/// The L_queue values present in `rows`.
fn present_l(rows: &[AggRow]) -> Vec<usize> {
    FIG15_L
        .iter()
        .copied()
        .filter(|l| rows.iter().any(|r| r.scheme == lq_scheme(*l)))
        .collect()
}

/// Per group: every L_queue ≥ 10 within `tol` of L_queue = 10 on `metric`.
fn within_of_ten(rows: &[AggRow], metric: &str, tol: f64) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        let Some(ten) = mean_of(rows, &g, &lq_scheme(10), metric) else {
            outcomes.push(None);
            continue;
        };
        let others: Vec<(usize, f64)> = present_l(rows)
            .into_iter()
            .filter(|l| *l > 10)
            .filter_map(|l| mean_of(rows, &g, &lq_scheme(l), metric).map(|v| (l, v)))
            .collect();
        let dev = |v: f64| if ten > 0.0 { (v - ten) / ten } else { 0.0 };
        let ok = others.iter().all(|(_, v)| dev(*v).abs() <= tol);
        let loose = others.iter().all(|(_, v)| dev(*v).abs() <= 2.0 * tol);
        outcomes.push(Some((ok, loose)));
        parts.push(format!(
            "{g}: L=10 {}{}",
            num(ten),
            others
                .iter()
                .map(|(l, v)| format!(", L={l} {} ({:+.0}%)", num(*v), dev(*v) * 100.0))
                .collect::<String>()
        ));
    }
    (
        combine(&outcomes),
        format!("mean {metric}: {}", parts.join("; ")),
    )
}

fn fig15_flat(rows: &[AggRow]) -> (Verdict, String) {
    within_of_ten(rows, "redundancy", 0.2)
}

fn fig15_fct(rows: &[AggRow]) -> (Verdict, String) {
    within_of_ten(rows, "fct_ms", 0.1)
}

fn fig15_small(rows: &[AggRow]) -> (Verdict, String) {
    let mut outcomes = Vec::new();
    let mut parts = Vec::new();
    for g in groups(rows) {
        match (
            mean_of(rows, &g, &lq_scheme(1), "redundancy"),
            mean_of(rows, &g, &lq_scheme(10), "redundancy"),
        ) {
            (Some(one), Some(ten)) => {
                outcomes.push(Some((one > ten, one >= ten)));
                parts.push(format!("{g}: L=1 {} vs L=10 {}", num(one), num(ten)));
            }
            _ => outcomes.push(None),
        }
    }
    (
        combine(&outcomes),
        format!("mean redundancy {}", parts.join("; ")),
    )
}

// ---- Fig. 23 ----------------------------------------------------------

/// One paired packet: its reductions under ART.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    /// `N_quic − N_art`: retransmission rounds saved.
    pub dn: i64,
    /// `T_wait^quic − T_wait^art`, ms.
    pub dt_wait_ms: f64,
}

/// Pairs the lost packets of a QUIC run and an ART run of the same seed
/// (module doc): same (stream, offset), lost in both, with a T_wait in
/// both. The first record of a key counts. Output in key order.
pub fn pair_items(quic: &[ItemRecord], art: &[ItemRecord]) -> Vec<Pair> {
    let index = |items: &[ItemRecord]| {
        let mut m: BTreeMap<(u64, u64), (u32, f64)> = BTreeMap::new();
        for i in items {
            if let Some(t) = i.t_wait {
                m.entry((i.stream, i.offset)).or_insert((i.n, ms(t)));
            }
        }
        m
    };
    let q = index(quic);
    let a = index(art);
    q.iter()
        .filter_map(|(k, (nq, tq))| {
            a.get(k).map(|(na, ta)| Pair {
                dn: i64::from(*nq) - i64::from(*na),
                dt_wait_ms: tq - ta,
            })
        })
        .collect()
}

/// Nearest-rank percentile of sorted `v` (0 when empty).
fn rank(v: &[f64], p: usize) -> f64 {
    let n = v.len();
    if n == 0 {
        return 0.0;
    }
    let r = (p * n).div_ceil(100).clamp(1, n);
    v.get(r - 1).copied().unwrap_or(0.0)
}

/// The pooled statistics of `pairs` as art-fig23's metrics.
pub fn pair_metrics(pairs: &[Pair]) -> BTreeMap<String, f64> {
    let mut dn: Vec<f64> = pairs.iter().map(|p| p.dn as f64).collect();
    let mut dt: Vec<f64> = pairs.iter().map(|p| p.dt_wait_ms).collect();
    dn.sort_by(f64::total_cmp);
    dt.sort_by(f64::total_cmp);
    let n = pairs.len();
    let mean = if n == 0 {
        0.0
    } else {
        dn.iter().sum::<f64>() / n as f64
    };
    let pos = if n == 0 {
        0.0
    } else {
        pairs.iter().filter(|p| p.dn > 0).count() as f64 / n as f64
    };
    [
        ("paired_packets", n as f64),
        ("dn_mean", mean),
        ("dn_p99", rank(&dn, 99)),
        ("dn_max", dn.last().copied().unwrap_or(0.0)),
        ("share_dn_pos", pos),
        ("dtwait_p50_ms", rank(&dt, 50)),
        ("dtwait_p95_ms", rank(&dt, 95)),
        ("dtwait_p99_ms", rank(&dt, 99)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// The settings of Fig. 23 at a scale: (Mbit/s, ms, loss).
fn fig23_grid(scale: Scale) -> Vec<(f64, f64, f64)> {
    let bws: &[f64] = scale.pick(&[10.0, 50.0, 100.0, 200.0], &[10.0, 100.0, 200.0], &[50.0]);
    let rtts: &[f64] = scale.pick(&[20.0, 60.0, 100.0], &[20.0, 100.0], &[50.0]);
    let losses: &[f64] = scale.pick(&[0.01, 0.05, 0.10], &[0.01, 0.05, 0.10], &[0.05]);
    let mut out = Vec::new();
    for &b in bws {
        for &r in rtts {
            for &p in losses {
                out.push((b, r, p));
            }
        }
    }
    out
}

fn fig23_size(scale: Scale) -> u64 {
    scale.pick(10_000_000, 2_000_000, 200_000)
}

fn fig23_group(scale: Scale) -> String {
    format!(
        "{} settings pooled ({})",
        fig23_grid(scale).len(),
        scale.name()
    )
}

/// `art-fig23`: one case per scale, whose runner ([`fig23_run`]) runs the
/// whole grid for a seed and pools the pairs.
pub fn fig23(scale: Scale) -> Experiment {
    let size = fig23_size(scale);
    let grid = fig23_grid(scale);
    let list = |f: fn(&(f64, f64, f64)) -> f64, unit: &str| {
        let mut v: Vec<f64> = grid.iter().map(f).collect();
        v.sort_by(f64::total_cmp);
        v.dedup();
        v.iter()
            .map(|x| format!("{x}{unit}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    Experiment {
        name: "art-fig23",
        title: "Fig. 23: per-packet reduction of retransmission rounds and T_wait (quic − art)",
        setting: format!(
            "one {} file per setting over every combination of bandwidth {} Mbit/s, RTT {} ms \
             and Bernoulli loss {} both ways (Cubic); per seed, quic and art run each setting \
             with the same seeds and packets lost in both runs are paired by (stream, offset) \
             (see docs/reproduce.md); percentiles pool the pairs of every setting",
            size_label(size),
            list(|g| g.0, ""),
            list(|g| g.1, ""),
            list(|g| g.2 * 100.0, "%"),
        ),
        paper_numbers: &[
            "§7.3, Fig. 23(a): ΔN = N_quic − N_art is 0 in most cases and up to 5.",
            "§7.3, Fig. 23(b): ΔT_wait p50 / p95 / p99 = 3.23 / 32.83 / 78.48 ms.",
        ],
        table_metrics: &[
            "paired_packets",
            "dn_mean",
            "dn_max",
            "share_dn_pos",
            "dtwait_p50_ms",
            "dtwait_p95_ms",
            "dtwait_p99_ms",
        ],
        cases: vec![Case {
            group: fig23_group(scale),
            scheme: "quic-art".into(),
            scenario: Scenario::default(),
        }],
        seeds: scale.seeds(),
        claims: vec![
            Claim {
                source: "§7.3, Fig. 23(a)",
                paper: "ΔN is mostly 0, positive in the worst cases (up to 5)",
                judge: fig23_rounds,
            },
            Claim {
                source: "§7.3, Fig. 23(b)",
                paper: "ΔT_wait p50 / p95 / p99 = 3.23 / 32.83 / 78.48 ms",
                judge: fig23_wait,
            },
        ],
        asides: vec![],
    }
}

/// Runs the grid of the case's scale for `seed`: quic and art per setting,
/// pairs pooled.
pub fn fig23_run(case: &Case, seed: u64) -> Result<BTreeMap<String, f64>, String> {
    let scale = [Scale::Full, Scale::Quick, Scale::Tiny]
        .into_iter()
        .find(|s| case.group == fig23_group(*s))
        .ok_or_else(|| format!("unknown art-fig23 group '{}'", case.group))?;
    let size = fig23_size(scale);
    let mut pairs = Vec::new();
    for (bw, rtt, p) in fig23_grid(scale) {
        let mut items = Vec::new();
        for scheme in ["quic", "art"] {
            let scenario = Scenario {
                seed,
                ..base(scheme, bw, rtt, p, Workload::bulk(size))
            };
            let r =
                run(&scenario).map_err(|e| format!("{scheme} at {bw} Mbit/s {rtt} ms {p}: {e}"))?;
            items.push(r.items);
        }
        if let [q, a] = items.as_slice() {
            pairs.extend(pair_items(q, a));
        }
    }
    Ok(pair_metrics(&pairs))
}

fn fig23_rounds(rows: &[AggRow]) -> (Verdict, String) {
    let Some(r) = rows.first() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let (Some(pos), Some(max), Some(mean)) = (
        r.mean("share_dn_pos"),
        r.metrics.get("dn_max").map(|s| s.max),
        r.mean("dn_mean"),
    ) else {
        return (Verdict::Undecided, "runs missing".into());
    };
    let verdict = if pos < 0.5 && max >= 1.0 && mean > 0.0 {
        Verdict::Reproduced
    } else if max >= 1.0 {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    };
    (
        verdict,
        format!(
            "ΔN > 0 for {:.1}% of paired packets, mean ΔN {}, largest {} (the paper: up to 5)",
            pos * 100.0,
            num(mean),
            num(max)
        ),
    )
}

fn fig23_wait(rows: &[AggRow]) -> (Verdict, String) {
    let Some(r) = rows.first() else {
        return (Verdict::Undecided, "no runs".into());
    };
    let got: Option<Vec<f64>> = ["dtwait_p50_ms", "dtwait_p95_ms", "dtwait_p99_ms"]
        .iter()
        .map(|m| r.mean(m))
        .collect();
    let Some(got) = got else {
        return (Verdict::Undecided, "runs missing".into());
    };
    let paper = [3.23, 32.83, 78.48];
    // Same order of magnitude (within a factor of 2) at every percentile:
    // reproduced; positive at p95 and p99: partially.
    let close = got
        .iter()
        .zip(paper)
        .all(|(g, p)| *g >= p / 2.0 && *g <= p * 2.0);
    let positive = got.iter().skip(1).all(|g| *g > 0.0);
    let verdict = if close {
        Verdict::Reproduced
    } else if positive {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    };
    let ratio =
        |i: usize| reduction_pct(got[i], paper[i]).map_or("-".into(), |x| format!("{:+.0}%", -x));
    (
        verdict,
        format!(
            "ΔT_wait p50 / p95 / p99 = {} / {} / {} ms (vs the paper: {} / {} / {})",
            num(got[0]),
            num(got[1]),
            num(got[2]),
            ratio(0),
            ratio(1),
            ratio(2)
        ),
    )
}

// ---- Fig. 24(a) -------------------------------------------------------

/// `art-fig24a`.
pub fn fig24a(scale: Scale) -> Experiment {
    let size = scale.pick(20_000_000, 5_000_000, 500_000);
    let seeds: Vec<u64> = match scale {
        Scale::Full => (1..=30).collect(),
        Scale::Quick => (1..=6).collect(),
        Scale::Tiny => vec![1],
    };
    let runs = seeds.len();
    Experiment {
        name: "art-fig24a",
        title: "Fig. 24(a): N_max and goodput over many runs (8 MB receive window)",
        setting: format!(
            "one {} file, 100 Mbit/s, 300 ms RTT, 5% Bernoulli loss both ways, 8 MB receive \
             window, BBR (as art's fig24), {runs} seeds per scheme (the paper: 100 runs of an \
             unstated size; fewer and smaller here to fit the time budget); schemes quic, art",
            size_label(size)
        ),
        paper_numbers: &[
            "§7.4, Fig. 24(a): over 100 runs, ART's average N_max is lower and its goodput \
             higher (chart only, no numbers).",
        ],
        table_metrics: &["n_max", "goodput_mbps", "n_max_file_mean", "redundancy"],
        cases: cases("window=8MB", &["quic", "art"], |s| Scenario {
            cc: CongestionAlgorithm::Bbr,
            recv_window: Some(8_000_000),
            ..base(s, 100.0, 300.0, 0.05, Workload::bulk(size))
        }),
        seeds,
        claims: vec![
            Claim {
                source: "§7.4, Fig. 24(a)",
                paper: "ART's mean N_max over the runs is lower than QUIC's",
                judge: |rows| fig24a_cmp(rows, "n_max", false),
            },
            Claim {
                source: "§7.4, Fig. 24(a)",
                paper: "ART's mean goodput over the runs is higher than QUIC's",
                judge: |rows| fig24a_cmp(rows, "goodput_mbps", true),
            },
        ],
        asides: vec![],
    }
}

fn fig24a_cmp(rows: &[AggRow], metric: &str, higher: bool) -> (Verdict, String) {
    let g = "window=8MB";
    let (Some(a), Some(q)) = (
        mean_of(rows, g, "art", metric),
        mean_of(rows, g, "quic", metric),
    ) else {
        return (Verdict::Undecided, "runs missing".into());
    };
    let better = if higher { a > q } else { a < q };
    let verdict = if better {
        Verdict::Reproduced
    } else if a == q {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    };
    (
        verdict,
        format!("mean {metric}: art {}, quic {}", num(a), num(q)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::time::{Duration, Instant};

    fn item(stream: u64, offset: u64, n: u32, t_wait_ms: Option<u64>) -> ItemRecord {
        ItemRecord {
            item: 0,
            stream,
            offset,
            len: 1000,
            n,
            k: 1,
            needed: n.min(1),
            first_sent: Instant::ZERO,
            first_lost: Instant::ZERO,
            t_wait: t_wait_ms.map(Duration::from_millis),
            recovery_latency: None,
        }
    }

    #[test]
    fn pairs_only_packets_lost_in_both_runs() {
        let quic = vec![
            item(0, 0, 3, Some(300)),
            item(0, 1000, 1, Some(100)),
            item(0, 5000, 2, Some(200)), // lost only under quic
            item(4, 0, 1, None),         // never delivered: no t_wait
            item(0, 0, 9, Some(900)),    // a later record of the same key
        ];
        let art = vec![
            item(0, 1000, 1, Some(90)),
            item(0, 0, 1, Some(100)),
            item(0, 7000, 1, Some(50)), // lost only under art
            item(4, 0, 1, Some(10)),
        ];
        let pairs = pair_items(&quic, &art);
        assert_eq!(
            pairs,
            vec![
                Pair {
                    dn: 2,
                    dt_wait_ms: 200.0
                },
                Pair {
                    dn: 0,
                    dt_wait_ms: 10.0
                },
            ]
        );
        let m = pair_metrics(&pairs);
        assert_eq!(m["paired_packets"], 2.0);
        assert_eq!(m["dn_max"], 2.0);
        assert_eq!(m["share_dn_pos"], 0.5);
        assert_eq!(m["dtwait_p50_ms"], 10.0);
        assert_eq!(m["dtwait_p99_ms"], 200.0);
        assert!(pair_items(&quic, &[]).is_empty());
        assert_eq!(pair_metrics(&[])["paired_packets"], 0.0);
    }

    #[test]
    fn negative_reductions_are_kept() {
        let pairs = pair_items(&[item(1, 0, 1, Some(50))], &[item(1, 0, 2, Some(80))]);
        assert_eq!(
            pairs,
            vec![Pair {
                dn: -1,
                dt_wait_ms: -30.0
            }]
        );
    }

    #[test]
    fn fig23_runner_knows_its_scale_from_the_group() {
        for s in [Scale::Full, Scale::Quick, Scale::Tiny] {
            let e = fig23(s);
            assert_eq!(e.cases.len(), 1);
            assert_eq!(e.cases[0].group, fig23_group(s));
        }
        let bad = Case {
            group: "nope".into(),
            scheme: "quic-art".into(),
            scenario: Scenario::default(),
        };
        assert!(fig23_run(&bad, 1).is_err());
    }
}
