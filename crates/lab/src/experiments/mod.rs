//! The ART paper's evaluation as named, seeded experiments (`artq reproduce`).
//!
//! Why this exists: issue 4's acceptance asks for the journal's Figs. 16-24
//! settings to be run with seeds averaged and reported beside the paper's
//! own numbers. An [`Experiment`] is a named set of [`Case`]s (one scenario
//! per group and scheme), each run once per seed; [`run_experiment`] runs
//! them and [`aggregate`] folds the runs into [`AggRow`]s (mean, min and max
//! over seeds). Every [`Claim`] of the paper is then judged from those rows
//! ([`Verdict`]), never from hard-coded numbers. [`report`] writes the CSV,
//! JSON and Markdown outputs.
//!
//! Everything is deterministic: a run depends only on its scenario and seed,
//! results are stored by case index (whatever order worker threads finish
//! in), and maps are `BTreeMap`s.
//!
//! Layout, leaves first: [`common`] holds the data types (the ones above,
//! [`Scale`], [`RunRow`], [`Stat`]) and the helpers judges share;
//! [`scenarios`] the scenario builders several experiments share. Each
//! experiment module (`journal`, `design`, `deploy`, `fig25`, `fig27`,
//! `dqn_heldout`, `rcp`, `rcp_exp4`, `autorec`, `artplus`) defines its
//! experiments and the paper's claims, importing only from those two
//! leaves, never from this module or another experiment. This module holds
//! the registry ([`REGISTRY`]: every experiment's name, help, constructor
//! and runner, in one table that [`EXPERIMENTS`], [`experiment`],
//! [`select`] and the runners derive from), running and aggregation;
//! [`report`] and [`plot`] the writers.

pub mod artplus;
pub mod autorec;
pub mod common;
pub mod deploy;
pub mod design;
pub mod dqn_heldout;
pub mod fig25;
pub mod fig27;
pub mod journal;
pub mod paper;
pub mod plot;
pub mod rcp;
pub mod rcp_exp4;
pub mod report;
pub mod scenarios;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;

use crate::run::{run_with, RunOptions};
use crate::scenario::Scenario;
use scenarios::{Variant, VARIANT_NAMES};

pub use common::{
    find, mean_of, round6, AggRow, Aside, Case, Claim, Experiment, RunRow, Scale, Stat, Verdict,
    METRICS,
};

/// One experiment of the registry: everything `artq reproduce` needs to
/// know about it besides its definition. Exists so that the list of names,
/// the constructors and the runners are one table, not lists kept in step
/// by hand.
#[derive(Clone, Copy)]
pub struct Entry {
    /// Name on the command line (`fig19`).
    pub name: &'static str,
    /// What it reproduces, in one line (for `artq reproduce --help`).
    pub help: &'static str,
    /// Builds the experiment at a scale.
    pub make: fn(Scale) -> Experiment,
    /// Builds it in another model of the network (the RCP figures and
    /// Experiment 4: their variants, named `name` plus
    /// [`Variant::suffix`], listed in [`VARIANT_NAMES`]); `None` for the
    /// experiments without variants.
    pub variant: Option<fn(Scale, Variant) -> Experiment>,
    /// How a case runs when it is not one simulation (see [`CaseRunner`]),
    /// for the experiment and its variants; `None`: [`run_case`].
    pub runner: Option<CaseRunner>,
}

impl Entry {
    /// A row whose cases are single simulations and that has no variants.
    const fn plain(name: &'static str, help: &'static str, make: fn(Scale) -> Experiment) -> Entry {
        Entry {
            name,
            help,
            make,
            variant: None,
            runner: None,
        }
    }
}

/// Every experiment `artq reproduce` knows, in the order it runs them: the
/// registry. The ART journal's §6.2 and §7 experiments are in
/// [`journal`], the others in a module each.
pub const REGISTRY: &[Entry] = &[
    Entry::plain(
        "fig19",
        "ART against QUIC variants and OR3 (Fig. 19)",
        journal::fig19,
    ),
    Entry::plain("fig20", "ART against OR3 at 1% loss (Fig. 20)", fig20),
    Entry::plain("fig21", "ART against OR3 at 10% loss (Fig. 21)", fig21),
    Entry::plain(
        "fig22",
        "ART against block FEC 9:1 (Fig. 22)",
        journal::fig22,
    ),
    Entry::plain(
        "fig24",
        "goodput against the receive window (Fig. 24(b))",
        journal::fig24,
    ),
    Entry::plain(
        "ablation",
        "the Replica Scheduler under burst loss (Figs. 16-18)",
        journal::ablation,
    ),
    Entry::plain(
        "art-fig25",
        "DASH video QoE, ART against QUIC (Fig. 25)",
        fig25::fig25,
    ),
    Entry::plain(
        "art-fig12",
        "fixed redundancy levels (Fig. 12)",
        design::fig12,
    ),
    Entry::plain(
        "art-fig15",
        "ART's sensitivity to L_queue (Fig. 15)",
        design::fig15,
    ),
    Entry {
        runner: Some(design::fig23_run),
        ..Entry::plain(
            "art-fig23",
            "per-packet reduction of rounds and T_wait (Fig. 23)",
            design::fig23,
        )
    },
    Entry::plain(
        "art-fig24a",
        "N_max and goodput over many runs (Fig. 24(a))",
        design::fig24a,
    ),
    Entry::plain(
        "art-fig26",
        "RPC completion times and 3 MB downloads (Fig. 26)",
        deploy::fig26,
    ),
    Entry {
        runner: Some(fig27::fig27_run),
        ..Entry::plain(
            "art-fig27",
            "ART against ART-MAB and ART-DQN (Fig. 27)",
            fig27::fig27,
        )
    },
    Entry {
        runner: Some(dqn_heldout::dqn_heldout_run),
        ..Entry::plain(
            "art-dqn-heldout",
            "ART-DQN's trained models on held-out LTE traces",
            dqn_heldout::dqn_heldout,
        )
    },
    Entry::plain(
        "rcp-table2",
        "RCP Table II: UDP, ARQ and TCP on Table I's network",
        rcp::table2,
    ),
    Entry {
        variant: Some(rcp::fig5),
        ..Entry::plain(
            "rcp-fig5",
            "RCP Fig. 5: utility of UDP, ARQ and RCP against beta",
            rcp_fig5,
        )
    },
    Entry {
        variant: Some(rcp::fig7),
        ..Entry::plain("rcp-fig7", "RCP Fig. 7: utility against beta", rcp_fig7)
    },
    Entry {
        variant: Some(rcp::fig8),
        ..Entry::plain("rcp-fig8", "RCP Fig. 8: utility against beta", rcp_fig8)
    },
    Entry {
        variant: Some(rcp::fig9),
        ..Entry::plain(
            "rcp-fig9",
            "RCP Fig. 9: utility against beta, simple normalisation",
            rcp_fig9,
        )
    },
    Entry {
        variant: Some(rcp_exp4::exp4),
        runner: Some(rcp_exp4::exp4_run),
        ..Entry::plain(
            "rcp-exp4",
            "RCP Experiment 4: the bottleneck slows mid-run (Table VI)",
            rcp_exp4_authors,
        )
    },
    Entry::plain(
        "autorec-fig11",
        "AutoRec Fig. 11: recovery latency against plain QUIC",
        autorec::fig11,
    ),
    Entry::plain(
        "autorec-fig12",
        "AutoRec Fig. 12: its variants at the default setting",
        autorec::fig12,
    ),
    Entry::plain(
        "autorec-fig13",
        "AutoRec Fig. 13: sensitivity to theta and alpha",
        autorec::fig13,
    ),
    Entry::plain(
        "art-plus-frontier",
        "art+: the cost/latency frontier",
        artplus::frontier,
    ),
    Entry::plain(
        "art-plus-ablation",
        "art+ with each idea switched off",
        artplus::ablation,
    ),
    Entry::plain(
        "art-plus-delay",
        "art+ on delay-sensitive workloads",
        artplus::delay,
    ),
];

/// `fig20`: Fig. 20's setting of the function Figs. 20 and 21 share.
fn fig20(scale: Scale) -> Experiment {
    journal::fig20_21(scale, false)
}

/// `fig21`: Fig. 21's setting of the function Figs. 20 and 21 share.
fn fig21(scale: Scale) -> Experiment {
    journal::fig20_21(scale, true)
}

/// `rcp-fig5` on the authors' channel (the default variant).
fn rcp_fig5(scale: Scale) -> Experiment {
    rcp::fig5(scale, Variant::Authors)
}

/// `rcp-fig7` on the authors' channel (the default variant).
fn rcp_fig7(scale: Scale) -> Experiment {
    rcp::fig7(scale, Variant::Authors)
}

/// `rcp-fig8` on the authors' channel (the default variant).
fn rcp_fig8(scale: Scale) -> Experiment {
    rcp::fig8(scale, Variant::Authors)
}

/// `rcp-fig9` on the authors' channel (the default variant).
fn rcp_fig9(scale: Scale) -> Experiment {
    rcp::fig9(scale, Variant::Authors)
}

/// `rcp-exp4` on the authors' channel (the default variant).
fn rcp_exp4_authors(scale: Scale) -> Experiment {
    rcp_exp4::exp4(scale, Variant::Authors)
}

/// The names of [`REGISTRY`], in order (computed at compile time).
const fn registry_names<const N: usize>() -> [&'static str; N] {
    let mut out = [""; N];
    let mut i = 0;
    while i < N {
        out[i] = REGISTRY[i].name;
        i += 1;
    }
    out
}

/// The names of [`REGISTRY`] as an array.
const NAMES: [&str; REGISTRY.len()] = registry_names::<{ REGISTRY.len() }>();

/// Every experiment name, in the order `artq reproduce` runs them: the
/// names of [`REGISTRY`].
pub const EXPERIMENTS: &[&str] = &NAMES;

/// The row of the experiment called `name`: its own row, or for an RCP
/// variant (a name of [`VARIANT_NAMES`]) the row of its base experiment,
/// with the variant.
fn entry(name: &str) -> Option<(&'static Entry, Variant)> {
    if let Some(e) = REGISTRY.iter().find(|e| e.name == name) {
        return Some((e, Variant::Authors));
    }
    if !VARIANT_NAMES.contains(&name) {
        return None;
    }
    let variant = Variant::of(name);
    let base = name.strip_suffix(variant.suffix()).unwrap_or(name);
    let e = REGISTRY
        .iter()
        .find(|e| e.name == base && e.variant.is_some())?;
    Some((e, variant))
}

/// The experiment called `name` at `scale` (a name of [`EXPERIMENTS`] or
/// of the RCP variants, [`VARIANT_NAMES`]), or `None` for an unknown
/// name.
pub fn experiment(name: &str, scale: Scale) -> Option<Experiment> {
    let (e, variant) = entry(name)?;
    match e.variant {
        Some(make) if variant != Variant::Authors => Some(make(scale, variant)),
        _ => Some((e.make)(scale)),
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
                    VARIANT_NAMES.join(", ")
                ))
            }
        }
    }
    Ok(chosen)
}

/// The experiments in words for `artq reproduce --help`: one line per row
/// of [`REGISTRY`] (`name: help`), then the RCP variants.
pub fn help_text() -> String {
    let mut out: Vec<String> = REGISTRY
        .iter()
        .map(|e| format!("  {}: {}", e.name, e.help))
        .collect();
    out.push(format!(
        "  (and the RCP variants {})",
        VARIANT_NAMES.join(", ")
    ));
    out.join("\n")
}

/// Folds runs into one row per case (in case order).
pub fn aggregate(cases: &[Case], runs: &[RunRow]) -> Vec<AggRow> {
    cases
        .iter()
        .map(|c| {
            let mine: Vec<&RunRow> = runs
                .iter()
                .filter(|r| r.group == c.group && r.scheme == c.scheme)
                .collect();
            let ok: Vec<&RunRow> = mine.iter().copied().filter(|r| r.error.is_none()).collect();
            let mut metrics = BTreeMap::new();
            for (name, _) in METRICS {
                let vals: Vec<f64> = ok
                    .iter()
                    .filter_map(|r| r.metrics.get(*name))
                    .copied()
                    .collect();
                if vals.is_empty() {
                    continue;
                }
                metrics.insert(name.to_string(), Stat::of(&vals));
            }
            AggRow {
                group: c.group.clone(),
                scheme: c.scheme.clone(),
                runs: ok.len(),
                failed: mine.len() - ok.len(),
                metrics,
            }
        })
        .collect()
}

/// One run's completion, for progress displays.
#[derive(Clone, Debug)]
pub struct RunDone<'a> {
    /// The experiment it belongs to.
    pub experiment: &'a str,
    /// Runs of that experiment finished so far (this one included).
    pub done: usize,
    /// Runs in that experiment.
    pub total: usize,
    /// The run's row.
    pub row: &'a RunRow,
    /// Wall time of the run.
    pub wall: std::time::Duration,
}

/// A progress callback of [`run_experiments`] and [`evaluate_all`].
pub type OnDone<'a> = dyn FnMut(&RunDone<'_>) + Send + 'a;

/// Runs every case of `exp` with every seed on `jobs` threads (at least
/// one); [`run_experiments`] of one experiment.
pub fn run_experiment(exp: &Experiment, jobs: usize, on_done: &mut OnDone<'_>) -> Vec<RunRow> {
    run_experiments(std::slice::from_ref(exp), jobs, on_done)
        .pop()
        .unwrap_or_default()
}

/// Runs every case of every experiment of `exps` with every seed, on
/// `jobs` threads (at least one) that take the runs from one queue, in
/// order: an experiment's runs start while the previous experiment's last
/// ones still run, so no thread idles at the end of each experiment (with
/// many cores and a few long runs per experiment, that idle tail was most
/// of the wall time). Each run depends on its case and seed only, so the
/// rows are the same whatever the threads and the order of completion.
/// `on_done` is called after each run (under one lock, in completion
/// order, with per-experiment counts); the returned rows are per
/// experiment, in case-then-seed order.
pub fn run_experiments(
    exps: &[Experiment],
    jobs: usize,
    on_done: &mut OnDone<'_>,
) -> Vec<Vec<RunRow>> {
    let work: Vec<(usize, usize, u64)> = exps
        .iter()
        .enumerate()
        .flat_map(|(e, exp)| {
            exp.cases
                .iter()
                .enumerate()
                .flat_map(move |(i, _)| exp.seeds.iter().map(move |s| (e, i, *s)))
        })
        .collect();
    let totals: Vec<usize> = exps.iter().map(|e| e.cases.len() * e.seeds.len()).collect();
    let next = AtomicUsize::new(0);
    // The rows by work index, runs done per experiment, and the progress
    // callback: one lock, so the callback sees `done` counts in order.
    type Slots<'s> = (Vec<Option<RunRow>>, Vec<usize>, &'s mut OnDone<'s>);
    let slots: Mutex<Slots<'_>> =
        Mutex::new((vec![None; work.len()], vec![0; exps.len()], on_done));
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, 64) {
            scope.spawn(|| loop {
                let idx = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(e, case_idx, seed)) = work.get(idx) else {
                    break;
                };
                let Some((exp, case)) = exps.get(e).and_then(|x| Some((x, x.cases.get(case_idx)?)))
                else {
                    break;
                };
                #[allow(
                    clippy::disallowed_methods,
                    reason = "wall time of a run, for the progress report only"
                )]
                let started = std::time::Instant::now();
                let row = run_case_of(exp.name, case, seed);
                let wall = started.elapsed();
                let mut guard = slots
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                let (rows, done, report) = &mut *guard;
                let Some(done) = done.get_mut(e) else {
                    break;
                };
                *done += 1;
                report(&RunDone {
                    experiment: exp.name,
                    done: *done,
                    total: totals.get(e).copied().unwrap_or(0),
                    row: &row,
                    wall,
                });
                if let Some(slot) = rows.get_mut(idx) {
                    *slot = Some(row);
                }
            });
        }
    });
    let (rows, _, _) = slots
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut out: Vec<Vec<RunRow>> = vec![Vec::new(); exps.len()];
    for ((e, _, _), row) in work.iter().zip(rows) {
        if let (Some(list), Some(row)) = (out.get_mut(*e), row) {
            list.push(row);
        }
    }
    out
}

/// A run that is not one simulation (art-fig23 runs quic and art on the
/// same seed and pairs their packets): the metrics of a case and seed.
pub type CaseRunner = fn(&Case, u64) -> Result<BTreeMap<String, f64>, String>;

/// The runner of `experiment`'s cases, from [`REGISTRY`]: its row's, or
/// for a name that starts with the name of a row with variants (the RCP
/// variants: `rcp-exp4-drain`), that row's.
fn case_runner(experiment: &str) -> Option<CaseRunner> {
    REGISTRY
        .iter()
        .find(|e| e.name == experiment || (e.variant.is_some() && experiment.starts_with(e.name)))
        .and_then(|e| e.runner)
}

/// Runs one case of `experiment` with one seed; a failed run becomes a
/// row with `error`.
pub fn run_case_of(experiment: &str, case: &Case, seed: u64) -> RunRow {
    let Some(runner) = case_runner(experiment) else {
        return run_case(case, seed);
    };
    let (error, metrics) = match runner(case, seed) {
        Ok(m) => (None, m.into_iter().map(|(k, v)| (k, round6(v))).collect()),
        Err(e) => (Some(e), BTreeMap::new()),
    };
    RunRow {
        group: case.group.clone(),
        scheme: case.scheme.clone(),
        seed,
        error,
        metrics,
    }
}

/// Runs one case with one seed; a failed run becomes a row with `error`.
pub fn run_case(case: &Case, seed: u64) -> RunRow {
    let scenario = Scenario {
        seed,
        ..case.scenario.clone()
    };
    match run_with(&scenario, RunOptions::default()) {
        Ok(r) => RunRow::from_result(case, seed, &r),
        Err(e) => RunRow {
            group: case.group.clone(),
            scheme: case.scheme.clone(),
            seed,
            error: Some(e.to_string()),
            metrics: BTreeMap::new(),
        },
    }
}

/// An experiment's complete outcome.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct ExperimentResult {
    /// The experiment's name.
    pub name: String,
    /// Its title.
    pub title: String,
    /// Its setting in words.
    pub setting: String,
    /// The seeds used.
    pub seeds: Vec<u64>,
    /// Every run.
    pub runs: Vec<RunRow>,
    /// One row per case.
    pub rows: Vec<AggRow>,
    /// The paper's claims with our verdicts.
    pub claims: Vec<JudgedClaim>,
    /// Further readings of the rows: (what, our numbers).
    pub asides: Vec<(String, String)>,
}

/// A claim with our verdict.
#[derive(Clone, Debug, Serialize, serde::Deserialize)]
pub struct JudgedClaim {
    /// Where the paper says it.
    pub source: String,
    /// What the paper says.
    pub paper: String,
    /// What our numbers say.
    pub verdict: Verdict,
    /// Our numbers behind the verdict.
    pub ours: String,
}

/// Runs `exp`, aggregates and judges it.
pub fn evaluate(exp: &Experiment, jobs: usize, on_done: &mut OnDone<'_>) -> ExperimentResult {
    let runs = run_experiment(exp, jobs, on_done);
    judge(exp, runs)
}

/// Runs every experiment of `exps` from one queue ([`run_experiments`]),
/// then aggregates and judges each: the results in `exps`' order.
pub fn evaluate_all(
    exps: &[Experiment],
    jobs: usize,
    on_done: &mut OnDone<'_>,
) -> Vec<ExperimentResult> {
    run_experiments(exps, jobs, on_done)
        .into_iter()
        .zip(exps)
        .map(|(runs, exp)| judge(exp, runs))
        .collect()
}

/// Aggregates `runs` of `exp` and judges its claims.
pub fn judge(exp: &Experiment, runs: Vec<RunRow>) -> ExperimentResult {
    let rows = aggregate(&exp.cases, &runs);
    let claims = exp
        .claims
        .iter()
        .map(|c| {
            let (verdict, ours) = (c.judge)(&rows);
            JudgedClaim {
                source: c.source.to_string(),
                paper: c.paper.to_string(),
                verdict,
                ours,
            }
        })
        .collect();
    let asides = exp
        .asides
        .iter()
        .map(|a| (a.what.to_string(), (a.compute)(&rows)))
        .collect();
    ExperimentResult {
        name: exp.name.to_string(),
        title: exp.title.to_string(),
        setting: exp.setting.clone(),
        seeds: exp.seeds.clone(),
        runs,
        rows,
        claims,
        asides,
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod chart_tests;
