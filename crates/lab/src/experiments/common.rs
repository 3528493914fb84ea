//! What every experiment is made of and judged with: the data types of the
//! experiment layer ([`Scale`], [`Case`], [`Experiment`], [`Claim`],
//! [`Aside`], [`Verdict`], the per-run [`RunRow`] and the aggregated
//! [`AggRow`] with its [`Stat`]s), the metric names ([`METRICS`]), and the
//! helpers the judges share (row look-up, labels and number formats, how
//! per-group outcomes combine, and judging helpers used by more than one
//! experiment).
//!
//! Why a module of its own: it is a leaf. Experiment modules import from
//! here (and from [`super::scenarios`]), never from the registry in
//! `experiments` (`mod.rs`) nor from each other, so no experiment module
//! depends on a module that depends on experiment modules.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::run::RunResult;
use crate::scenario::Scenario;

/// How big the experiments are.
///
/// Exists because the paper's sizes (100 MB, 1000 files) take minutes per
/// experiment, while a smoke check must take seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    /// The paper's sizes, three seeds.
    Full,
    /// About a tenth of the sizes, two seeds: the whole set in about two
    /// minutes of release wall time.
    Quick,
    /// Tiny transfers, one seed: for the test suite (debug builds).
    Tiny,
}

impl Scale {
    /// The seeds every case is run with.
    pub fn seeds(self) -> Vec<u64> {
        match self {
            Scale::Full => vec![1, 2, 3],
            Scale::Quick => vec![1, 2],
            Scale::Tiny => vec![1],
        }
    }

    /// Picks the value for this scale.
    pub fn pick<T>(self, full: T, quick: T, tiny: T) -> T {
        match self {
            Scale::Full => full,
            Scale::Quick => quick,
            Scale::Tiny => tiny,
        }
    }

    /// The lower-case name (`full`, `quick`, `tiny`).
    pub fn name(self) -> &'static str {
        self.pick("full", "quick", "tiny")
    }
}

/// One scenario of an experiment: a group (a setting such as `loss=1%
/// size=1MB`) and a scheme. The scenario's seed is replaced per run.
#[derive(Clone, Debug)]
pub struct Case {
    /// The setting, as shown in tables (`loss=1% size=1MB`).
    pub group: String,
    /// The recovery scheme as tables show it: `scenario.scheme`, or its
    /// base name when its options vary with the group (RCP's figures give
    /// `udp`, `arq` and `rcp` the group's utility options).
    pub scheme: String,
    /// What to run.
    pub scenario: Scenario,
}

/// What our numbers say about one claim of the paper.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Our numbers agree with the claim.
    Reproduced,
    /// They agree in direction but not in size, or only in some settings.
    Partially,
    /// They disagree.
    #[serde(rename = "not reproduced")]
    NotReproduced,
    /// The runs needed to judge failed or are missing.
    Undecided,
}

impl Verdict {
    /// The word used in report.md.
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Reproduced => "reproduced",
            Verdict::Partially => "partially reproduced",
            Verdict::NotReproduced => "not reproduced",
            Verdict::Undecided => "undecided (runs missing)",
        }
    }
}

/// A claim of the paper and how to judge it from our aggregated rows.
#[derive(Clone, Copy)]
pub struct Claim {
    /// Where the paper says it (`§7.2, Fig. 19`).
    pub source: &'static str,
    /// The claim, transcribed (with the paper's numbers when it gives any).
    pub paper: &'static str,
    /// Judges the claim; the string is our evidence, numbers from the runs.
    pub judge: fn(&[AggRow]) -> (Verdict, String),
}

/// A further reading of an experiment's runs that is not a claim of the
/// paper: how a comparison changes under another reading of the paper, for
/// example. Exists so such analyses are computed from the runs of the same
/// invocation, never written by hand.
#[derive(Clone, Copy)]
pub struct Aside {
    /// What is compared, in words.
    pub what: &'static str,
    /// Our numbers for it.
    pub compute: fn(&[AggRow]) -> String,
}

/// A named experiment: its cases, seeds and the paper's claims.
#[derive(Clone)]
pub struct Experiment {
    /// Name on the command line (`fig19`).
    pub name: &'static str,
    /// What it reproduces (`Fig. 19: overall comparison`).
    pub title: &'static str,
    /// The common setting in words (with any deviation from the paper).
    pub setting: String,
    /// The paper's reported numbers or qualitative findings, transcribed.
    pub paper_numbers: &'static [&'static str],
    /// Metrics shown in the report's table, in order.
    pub table_metrics: &'static [&'static str],
    /// Scenarios, each run once per seed.
    pub cases: Vec<Case>,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Claims judged from the rows.
    pub claims: Vec<Claim>,
    /// Further readings of the rows (not the paper's claims).
    pub asides: Vec<Aside>,
}

/// Metrics recorded per run, in CSV column order, with their meaning.
pub const METRICS: &[(&str, &str)] = &[
    ("fct_ms", "completion time of the whole workload, ms"),
    ("goodput_mbps", "application bytes over fct, Mbit/s"),
    ("data_packets", "first transmissions of stream data"),
    ("lost_packets", "packets declared lost (replicas included)"),
    ("replicas", "retransmitted packets, every replica"),
    ("extra_replicas", "replicas beyond one per round"),
    ("fec_repairs", "FEC repair packets (fec:K only)"),
    (
        "redundancy",
        "redundancy cost: replicas + fec_repairs, packets",
    ),
    ("redundancy_ratio", "redundancy / data_packets"),
    ("n_max", "largest retransmission round that delivered data"),
    (
        "n_max_file_mean",
        "mean over the files of each file's n_max (files without loss count 0; single-file runs: n_max)",
    ),
    (
        "share_n_ge_2",
        "share of recovered items needing >= 2 rounds",
    ),
    (
        "t_wait_p99_ms",
        "99th percentile t_wait, ms (0: nothing lost)",
    ),
    (
        "avg_bitrate_kbps",
        "video: mean bitrate played, kbit/s (live: payload; DASH: the segments' representations)",
    ),
    (
        "startup_ms",
        "video: from the player's first request to the start of playback, ms",
    ),
    ("freeze_count", "live: freezes per 100 s of playback"),
    ("freeze_ms", "live: frozen time per 100 s of playback, ms"),
    ("rebuffer_count", "DASH: rebuffering events over the video"),
    ("rebuffer_s", "DASH: total rebuffering time, s"),
    (
        "bitrate_switches",
        "DASH: representation changes between consecutive segments",
    ),
    ("rpc_fct_mean_ms", "rpc workload: mean per-call completion time, ms"),
    ("rpc_fct_p50_ms", "rpc workload: median per-call completion time, ms"),
    ("rpc_fct_p95_ms", "rpc workload: 95th percentile per-call completion time, ms"),
    ("rpc_fct_p99_ms", "rpc workload: 99th percentile per-call completion time, ms"),
    (
        "paired_packets",
        "art-fig23: packets lost in both the quic and the art run of a seed",
    ),
    ("dn_mean", "art-fig23: mean per-packet reduction of retransmission rounds (quic - art)"),
    ("dn_p99", "art-fig23: 99th percentile reduction of rounds"),
    ("dn_max", "art-fig23: largest reduction of rounds"),
    ("share_dn_pos", "art-fig23: share of paired packets with fewer rounds under art"),
    ("dtwait_p50_ms", "art-fig23: median per-packet reduction of t_wait (quic - art), ms"),
    ("dtwait_p95_ms", "art-fig23: 95th percentile reduction of t_wait, ms"),
    ("dtwait_p99_ms", "art-fig23: 99th percentile reduction of t_wait, ms"),
    ("delivery_ratio", "messages: distinct messages delivered over generated"),
    ("loss", "messages: 1 - delivery_ratio (rcp.md's epsilon)"),
    ("mean_latency_ms", "messages: mean latency of the delivered messages, ms (rcp.md's l)"),
    ("utility", "messages: the application's utility U(epsilon, l), rcp.md eq. 1"),
    (
        "retransmission_probability",
        "messages: share of timed-out messages retransmitted",
    ),
    (
        "retransmission_probability_ewma",
        "messages: running average (weight 0.01) of the retransmit-or-drop decisions at the end of the run (the authors' retranProb)",
    ),
    (
        "retransmission_probability_tenths",
        "messages: share of retransmissions among the decisions of the even tenths of the run (what Table IV's Retrans Prob holds, as the authors' script computes it)",
    ),
    (
        "loss_final",
        "messages: epsilon over the last 25% of the slots (Table IV's Final): messages arriving in them over messages generated in them",
    ),
    (
        "mean_latency_final_ms",
        "messages: mean latency of the messages arriving in the last 25% of the slots, ms",
    ),
    (
        "utility_final",
        "messages: the utility over the last 25% of the slots",
    ),
    (
        "recovery_latency_mean_ms",
        "live: mean recovery_latency of all recovered data (first loss detection to the send of the copy that got through), ms",
    ),
    (
        "recovery_latency_multi_mean_ms",
        "live: mean recovery_latency of the data whose recovery needed >= 2 retransmissions (AutoRec's displayed latency), ms",
    ),
    (
        "recovery_latency_multi_p95_ms",
        "live: 95th percentile of that latency, ms",
    ),
    (
        "recovery_latency_multi_max_ms",
        "live: largest such latency, ms",
    ),
    (
        "recovery_deterioration_rate",
        "live: share of recovered data whose recovery latency was >= T_unit (AutoRec §5; T_unit measured on the data's first retransmission)",
    ),
    (
        "retransmission_ratio",
        "live: replicas / data_packets (AutoRec's retran_ratio)",
    ),
    ("t_wait_p50_ms", "art-fig27: median t_wait (packet recovery time), ms"),
    (
        "learn_steps",
        "art-fig27: learning steps behind the run (art-dqn's training and online learning; 0 for the others)",
    ),
    (
        "retx_before",
        "rcp-exp4: retransmissions per 1000 slots before the slow-down",
    ),
    (
        "retx_early",
        "rcp-exp4: retransmissions per 1000 slots in the 4000 slots after the slow-down",
    ),
    (
        "retx_late",
        "rcp-exp4: retransmissions per 1000 slots from 7000 slots after the slow-down to the end",
    ),
];

/// Metrics that only some workloads or experiments produce: a run row
/// carries them only when they mean something (blank CSV cells otherwise).
const OPTIONAL_METRICS: &[&str] = &[
    "rpc_fct_mean_ms",
    "rpc_fct_p50_ms",
    "rpc_fct_p95_ms",
    "rpc_fct_p99_ms",
    "paired_packets",
    "dn_mean",
    "dn_p99",
    "dn_max",
    "share_dn_pos",
    "dtwait_p50_ms",
    "dtwait_p95_ms",
    "dtwait_p99_ms",
    "delivery_ratio",
    "loss",
    "mean_latency_ms",
    "utility",
    "retransmission_probability",
    "retransmission_probability_ewma",
    "retransmission_probability_tenths",
    "loss_final",
    "mean_latency_final_ms",
    "utility_final",
    "recovery_latency_mean_ms",
    "recovery_latency_multi_mean_ms",
    "recovery_latency_multi_p95_ms",
    "recovery_latency_multi_max_ms",
    "recovery_deterioration_rate",
    "retransmission_ratio",
    "t_wait_p50_ms",
    "learn_steps",
    "retx_before",
    "retx_early",
    "retx_late",
];

/// One run: a case with one seed, and its metrics (or why it failed).
/// Deserialize: the Python package's sweeps hand rows back to the CSV
/// writers here.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct RunRow {
    /// The case's group.
    pub group: String,
    /// The scheme.
    pub scheme: String,
    /// The seed.
    pub seed: u64,
    /// The failure, when the run did not complete.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
    /// [`METRICS`] by name (empty on failure).
    #[serde(default)]
    pub metrics: BTreeMap<String, f64>,
}

impl RunRow {
    /// The row of a finished run.
    pub fn from_result(case: &Case, seed: u64, r: &RunResult) -> RunRow {
        let m = &r.metrics;
        let repairs = r.sender_stats.fec_repairs;
        let redundancy = m.replicas.saturating_add(repairs);
        let ratio = if m.data_packets == 0 {
            0.0
        } else {
            redundancy as f64 / m.data_packets as f64
        };
        // Every workload has the first metrics; only video workloads the
        // playback ones (absent values stay empty cells).
        let values = [
            Some(m.fct_ms),
            Some(m.goodput_mbps),
            Some(m.data_packets as f64),
            Some(m.lost_packets as f64),
            Some(m.replicas as f64),
            Some(m.extra_replicas as f64),
            Some(repairs as f64),
            Some(redundancy as f64),
            Some(ratio),
            Some(f64::from(m.n_max)),
            Some(m.n_max_file_mean.unwrap_or(f64::from(m.n_max))),
            Some(m.share_n_ge_2),
            Some(m.t_wait_ms.map_or(0.0, |s| s.p99)),
            m.avg_bitrate_kbps,
            m.startup_ms,
            m.freeze_count,
            m.freeze_ms,
            m.rebuffer_count.map(|n| n as f64),
            m.rebuffer_ms.map(|v| v / 1e3),
            m.bitrate_switches.map(|n| n as f64),
        ];
        let mut metrics: BTreeMap<String, f64> = METRICS
            .iter()
            .filter(|(name, _)| !OPTIONAL_METRICS.contains(name))
            .zip(values)
            .filter_map(|((name, _), v)| Some((name.to_string(), round6(v?))))
            .collect();
        if let Some(rpc) = &m.rpc_fct_ms {
            for (name, v) in [
                ("rpc_fct_mean_ms", rpc.mean),
                ("rpc_fct_p50_ms", rpc.p50),
                ("rpc_fct_p95_ms", rpc.p95),
                ("rpc_fct_p99_ms", rpc.p99),
            ] {
                metrics.insert(name.to_string(), round6(v));
            }
        }
        for (name, v) in [
            ("delivery_ratio", m.delivery_ratio),
            ("loss", m.delivery_ratio.map(|d| 1.0 - d)),
            ("mean_latency_ms", m.mean_latency_ms),
            ("utility", m.utility),
            ("retransmission_probability", m.retransmission_probability),
            (
                "retransmission_probability_ewma",
                m.retransmission_probability_ewma,
            ),
            (
                "retransmission_probability_tenths",
                m.retransmission_probability_tenths,
            ),
            ("loss_final", m.loss_final),
            ("mean_latency_final_ms", m.mean_latency_final_ms),
            ("utility_final", m.utility_final),
        ] {
            if let Some(v) = v {
                metrics.insert(name.to_string(), round6(v));
            }
        }
        if m.freeze_count.is_some() {
            // Live streams: AutoRec's figures.
            let mut put = |name: &str, v: f64| {
                metrics.insert(name.to_string(), round6(v));
            };
            if let Some(l) = &m.recovery_latency_ms {
                put("recovery_latency_mean_ms", l.mean);
            }
            if let Some(l) = &m.recovery_latency_multi_ms {
                put("recovery_latency_multi_mean_ms", l.mean);
                put("recovery_latency_multi_p95_ms", l.p95);
                put("recovery_latency_multi_max_ms", l.max);
            }
            put("recovery_deterioration_rate", m.recovery_deterioration_rate);
            put("retransmission_ratio", m.retransmission_ratio);
        }
        RunRow {
            group: case.group.clone(),
            scheme: case.scheme.clone(),
            seed,
            error: None,
            metrics,
        }
    }
}

/// Rounds to 6 decimals, so outputs do not depend on the last float bits of
/// a formatting routine.
pub fn round6(v: f64) -> f64 {
    if v.is_finite() {
        (v * 1e6).round() / 1e6
    } else {
        0.0
    }
}

/// Mean, spread, min and max of one metric over the seeds of a case.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct Stat {
    /// Arithmetic mean.
    pub mean: f64,
    /// Sample standard deviation over the seeds (0 for one seed): what
    /// judges that ask "within the noise" weigh a difference against.
    pub sd: f64,
    /// Smallest value.
    pub min: f64,
    /// Largest value.
    pub max: f64,
}

impl Stat {
    /// Mean, standard deviation, min and max of `vals` (not empty).
    pub fn of(vals: &[f64]) -> Stat {
        let n = vals.len().max(1) as f64;
        let mean = vals.iter().sum::<f64>() / n;
        let sd = if vals.len() > 1 {
            (vals.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt()
        } else {
            0.0
        };
        Stat {
            mean: round6(mean),
            sd: round6(sd),
            min: vals.iter().copied().fold(f64::INFINITY, f64::min),
            max: vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }
}

/// A case aggregated over its successful seeds.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct AggRow {
    /// The case's group.
    pub group: String,
    /// The scheme.
    pub scheme: String,
    /// Seeds that completed.
    pub runs: usize,
    /// Seeds that failed.
    pub failed: usize,
    /// [`METRICS`] by name (empty when every seed failed).
    pub metrics: BTreeMap<String, Stat>,
}

impl AggRow {
    /// Mean of `metric`, when at least one seed completed.
    pub fn mean(&self, metric: &str) -> Option<f64> {
        self.metrics.get(metric).map(|s| s.mean)
    }
}

/// Finds the row of `group` and `scheme`.
pub fn find<'a>(rows: &'a [AggRow], group: &str, scheme: &str) -> Option<&'a AggRow> {
    rows.iter().find(|r| r.group == group && r.scheme == scheme)
}

/// Mean of `metric` in the row of `group` and `scheme`.
pub fn mean_of(rows: &[AggRow], group: &str, scheme: &str, metric: &str) -> Option<f64> {
    find(rows, group, scheme).and_then(|r| r.mean(metric))
}

/// A size in the report's words (`100MB`, `200KB`), powers of 1000.
pub fn size_label(bytes: u64) -> String {
    if bytes >= 1_000_000 && bytes % 1_000_000 == 0 {
        format!("{}MB", bytes / 1_000_000)
    } else if bytes >= 1000 && bytes % 1000 == 0 {
        format!("{}KB", bytes / 1000)
    } else {
        format!("{bytes}B")
    }
}

/// The distinct values of `key` over `rows`, in the order they first
/// appear.
fn distinct(rows: &[AggRow], key: impl Fn(&AggRow) -> &String) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(key(r)) {
            out.push(key(r).clone());
        }
    }
    out
}

/// The distinct groups of `rows`, in order.
pub(super) fn groups(rows: &[AggRow]) -> Vec<String> {
    distinct(rows, |r| &r.group)
}

/// The distinct schemes of `rows`, in order: what the judges that compare
/// every scheme of an experiment (art-fig27's) and the charts' series
/// start from.
pub(super) fn schemes(rows: &[AggRow]) -> Vec<String> {
    distinct(rows, |r| &r.scheme)
}

/// A probability as a percentage label (`0.15` → `15%`), rounded to
/// hundredths of a percent so float products never show (`15.000000000000002%`).
pub fn pct_label(p: f64) -> String {
    format!("{}%", (p * 1e4).round() / 100.0)
}

/// A number for prose: fewer decimals for larger values.
pub fn num(v: f64) -> String {
    let a = v.abs();
    if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The seeds' noise of `metric` over `rows`: the largest range over
/// `2 sqrt(runs)`, a rough standard error from the min and max (the rule
/// art-fig25's and AutoRec's verdicts were set with; `art-plus-delay`
/// weighs differences against the standard deviation instead).
pub(super) fn range_noise<'a>(rows: impl IntoIterator<Item = &'a AggRow>, metric: &str) -> f64 {
    rows.into_iter()
        .filter_map(|r| {
            let st = r.metrics.get(metric)?;
            Some((st.max - st.min) / (2.0 * (r.runs.max(1) as f64).sqrt()))
        })
        .fold(0.0, f64::max)
}

/// `(b - a) / b` in percent: how much lower `a` is than `b`.
pub(super) fn reduction_pct(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| (b - a) / b * 100.0)
}

/// The verdict on a claim of two parts: both hold → reproduced, one →
/// partially, neither → not reproduced.
pub(super) fn both_or_one(first: bool, second: bool) -> Verdict {
    match (first, second) {
        (true, true) => Verdict::Reproduced,
        (true, false) | (false, true) => Verdict::Partially,
        (false, false) => Verdict::NotReproduced,
    }
}

/// Combines per-group outcomes: all good → reproduced, some or "weak" →
/// partially, none → not reproduced, no data → undecided.
pub(super) fn combine(outcomes: &[Option<(bool, bool)>]) -> Verdict {
    if outcomes.is_empty() || outcomes.iter().any(Option::is_none) {
        return Verdict::Undecided;
    }
    let strong = outcomes.iter().flatten().filter(|(s, _)| *s).count();
    let weak = outcomes.iter().flatten().filter(|(s, w)| *s || *w).count();
    if strong == outcomes.len() {
        Verdict::Reproduced
    } else if weak > 0 {
        Verdict::Partially
    } else {
        Verdict::NotReproduced
    }
}

/// The verdict on "ART-DQN keeps ART's N_max at a lower redundancy": from
/// the pooled N_max and redundancy ratio of `[art, art-dqn]`, the DQN named
/// `dqn` (as the N_max and the redundancy parts of the line call it).
/// "Matches": within a quarter of a round on average over the settings
/// (N_max is an integer per run; the paper's bars are equal).
pub(super) fn judge_dqn_against_art(
    n_max: [f64; 2],
    redundancy: [f64; 2],
    dqn: [&str; 2],
) -> (Verdict, String) {
    let saving = if redundancy[0] > 0.0 {
        (redundancy[0] - redundancy[1]) / redundancy[0] * 100.0
    } else {
        0.0
    };
    let matches = (n_max[1] - n_max[0]).abs() <= 0.25;
    let ours = format!(
        "mean n_max art {}, {} {}; redundancy_ratio art {}, {} {} ({:.1}% {} than art)",
        num(n_max[0]),
        dqn[0],
        num(n_max[1]),
        num(redundancy[0]),
        dqn[1],
        num(redundancy[1]),
        saving.abs(),
        if saving >= 0.0 { "lower" } else { "higher" }
    );
    let verdict = both_or_one(matches, saving > 0.0);
    (verdict, ours)
}
