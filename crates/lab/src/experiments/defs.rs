//! The experiment registry (every name `artq reproduce` knows, in the order
//! it runs them, and where each is defined) and the helpers the experiments
//! share: a run's base scenario, a group's cases, labels and number formats,
//! and how verdicts combine. The ART journal's §6.2 and §7 experiments are
//! in [`super::journal`], the others in a module each.

use super::{AggRow, Case, Experiment, Scale, Verdict};
use crate::scenario::Scenario;
use apps::workload::Workload;
use netem::LinkSpec;

/// Every experiment name, in the order `artq reproduce` runs them.
pub const EXPERIMENTS: &[&str] = &[
    "fig19",
    "fig20",
    "fig21",
    "fig22",
    "fig24",
    "ablation",
    "art-fig25",
    "art-fig12",
    "art-fig15",
    "art-fig23",
    "art-fig24a",
    "art-fig26",
    "art-fig27",
    "art-dqn-heldout",
    "rcp-table2",
    "rcp-fig5",
    "rcp-fig7",
    "rcp-fig8",
    "rcp-fig9",
    "rcp-exp4",
    "autorec-fig11",
    "autorec-fig12",
    "autorec-fig13",
    "art-plus-frontier",
    "art-plus-ablation",
    "art-plus-delay",
];

/// Virtual-time limit of each run, seconds: large enough for 1000 files at
/// 10% loss, small enough to stop a run that cannot finish.
const TIME_LIMIT_S: f64 = 1e6;

/// Whether `name` is an RCP figure or Experiment 4, in any variant.
fn is_rcp_figure(name: &str) -> bool {
    ["rcp-fig5", "rcp-fig7", "rcp-fig8", "rcp-fig9", "rcp-exp4"].contains(&name)
        || super::rcp::VARIANT_NAMES.contains(&name)
}

/// The experiment called `name` at `scale` (a name of [`EXPERIMENTS`] or
/// of the RCP variants, `rcp::VARIANT_NAMES`), or `None` for an unknown
/// name.
pub fn experiment(name: &str, scale: Scale) -> Option<Experiment> {
    match name {
        "fig19" => Some(super::journal::fig19(scale)),
        "fig20" => Some(super::journal::fig20_21(scale, false)),
        "fig21" => Some(super::journal::fig20_21(scale, true)),
        "fig22" => Some(super::journal::fig22(scale)),
        "fig24" => Some(super::journal::fig24(scale)),
        "ablation" => Some(super::journal::ablation(scale)),
        "art-fig25" => Some(super::fig25::fig25(scale)),
        "art-fig27" => Some(super::fig27::fig27(scale)),
        "art-dqn-heldout" => Some(super::dqn_heldout::dqn_heldout(scale)),
        "art-fig12" => Some(super::design::fig12(scale)),
        "art-fig15" => Some(super::design::fig15(scale)),
        "art-fig23" => Some(super::design::fig23(scale)),
        "art-fig24a" => Some(super::design::fig24a(scale)),
        "art-fig26" => Some(super::deploy::fig26(scale)),
        "rcp-table2" => Some(super::rcp::table2(scale)),
        // The RCP figures and Experiment 4 on the authors' channel, and
        // their variants (`rcp::VARIANT_NAMES`: `-drain`, `-dumbbell`).
        name if is_rcp_figure(name) => {
            let variant = super::rcp::Variant::of(name);
            let base = name.strip_suffix(variant.suffix()).unwrap_or(name);
            match base {
                "rcp-fig5" => Some(super::rcp::fig5(scale, variant)),
                "rcp-fig7" => Some(super::rcp::fig7(scale, variant)),
                "rcp-fig8" => Some(super::rcp::fig8(scale, variant)),
                "rcp-fig9" => Some(super::rcp::fig9(scale, variant)),
                "rcp-exp4" => Some(super::rcp_exp4::exp4(scale, variant)),
                _ => None,
            }
        }
        "autorec-fig11" => Some(super::autorec::fig11(scale)),
        "autorec-fig12" => Some(super::autorec::fig12(scale)),
        "autorec-fig13" => Some(super::autorec::fig13(scale)),
        "art-plus-frontier" => Some(super::artplus::frontier(scale)),
        "art-plus-ablation" => Some(super::artplus::ablation(scale)),
        "art-plus-delay" => Some(super::artplus::delay(scale)),
        _ => None,
    }
}

/// The experiments called `names` at `scale`, in order, each once (all of
/// them when `names` is empty): what `artq reproduce` and the Python
/// package's `reproduce` run. An unknown name is an error that lists the
/// valid ones.
pub fn select(names: &[String], scale: Scale) -> Result<Vec<Experiment>, String> {
    let all: Vec<String>;
    let names = if names.is_empty() {
        all = EXPERIMENTS.iter().map(|s| s.to_string()).collect();
        &all
    } else {
        names
    };
    let mut chosen: Vec<Experiment> = Vec::new();
    for name in names {
        match experiment(name, scale) {
            Some(e) if !chosen.iter().any(|c| c.name == e.name) => chosen.push(e),
            Some(_) => {}
            None => {
                return Err(format!(
                    "unknown experiment '{name}'; valid experiments: {} (and the RCP variants {})",
                    EXPERIMENTS.join(", "),
                    super::rcp::VARIANT_NAMES.join(", ")
                ))
            }
        }
    }
    Ok(chosen)
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

/// A scenario with Bernoulli loss on a constant-rate link.
pub(super) fn base(scheme: &str, bw: f64, rtt: f64, loss: f64, workload: Workload) -> Scenario {
    Scenario {
        scheme: scheme.to_string(),
        time_limit: TIME_LIMIT_S,
        workload,
        link: LinkSpec {
            bw: Some(bw),
            rtt,
            loss: Some(loss),
            ..LinkSpec::default()
        },
        ..Scenario::default()
    }
}

pub(super) fn cases(group: &str, schemes: &[&str], make: impl Fn(&str) -> Scenario) -> Vec<Case> {
    schemes
        .iter()
        .map(|s| Case {
            group: group.to_string(),
            scheme: s.to_string(),
            scenario: make(s),
        })
        .collect()
}

/// The distinct groups of `rows`, in order.
pub(super) fn groups(rows: &[AggRow]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if !out.contains(&r.group) {
            out.push(r.group.clone());
        }
    }
    out
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

// ---- Fig. 19 ----------------------------------------------------------
