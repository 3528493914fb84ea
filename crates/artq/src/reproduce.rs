//! `artq reproduce`: the ART paper's evaluation (issue 4's acceptance) as
//! named, seeded experiments over the simulator (crate `lab`, module
//! `experiments`), written to `--out DIR` as CSV, `results.json`,
//! `report.md` and `report.html` (charts inline) beside the papers' own
//! numbers; or, with `--render DIR`, the charts and reports of a previous
//! run redrawn from its results.json.
//!
//! Progress goes to stderr: on a terminal, indicatif's bars (one over every
//! run of every chosen experiment with its rate and ETA, one over the
//! current experiment's runs); otherwise one line per run. stdout gets only the list of files
//! written, so a script can pipe it.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;
use lab::experiments::{self, report, RunDone, Scale};

use crate::progress::Progress;

/// Options of `artq reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Smaller sizes and fewer seeds: the whole set in about two minutes
    /// on two cores (release build). Without it, the paper's sizes (or the
    /// largest that fit) and three or more seeds.
    #[arg(long)]
    quick: bool,
    /// Tiny transfers and one seed (for the test suite).
    #[arg(long, hide = true, conflicts_with = "quick")]
    tiny: bool,
    /// Output directory (created if missing).
    #[arg(long, value_name = "DIR", default_value = "artq-out")]
    out: PathBuf,
    /// Simulations run in parallel [default: the number of CPUs]. Results do
    /// not depend on it.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    jobs: Option<u16>,
    /// Run nothing: redraw the charts, report.md and report.html of the
    /// previous run whose outputs are in DIR, from its results.json (left
    /// unchanged, as are its CSVs).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["quick", "tiny", "out", "jobs", "experiments"])]
    render: Option<PathBuf>,
    /// Experiments to run; all when none is given. The help text lists
    /// them from the registry (`lab::experiments::REGISTRY`), so it cannot
    /// fall behind it.
    #[arg(value_name = "EXPERIMENT", help = experiments_short_help(), long_help = experiments_long_help())]
    experiments: Vec<String>,
}

/// `-h`'s words for the experiment names: every name of the registry.
fn experiments_short_help() -> String {
    format!(
        "Experiments to run ({}, and the RCP variants); all when none is given",
        experiments::EXPERIMENTS.join(", ")
    )
}

/// `--help`'s words for the experiment names: each with its one-line help,
/// from the registry.
fn experiments_long_help() -> String {
    format!(
        "Experiments to run, in this order; all when none is given:\n{}",
        experiments::help_text()
    )
}

/// Runs `artq reproduce`.
pub fn run(a: ReproduceArgs) -> Result<()> {
    if let Some(dir) = &a.render {
        let written = report::render_outputs(dir)
            .with_context(|| format!("cannot redraw the report in {}", dir.display()))?;
        let mut stdout = std::io::stdout().lock();
        for p in written {
            writeln!(stdout, "{}", p.display())?;
        }
        stdout.flush()?;
        return Ok(());
    }
    let scale = if a.tiny {
        Scale::Tiny
    } else if a.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    let chosen = experiments::select(&a.experiments, scale).map_err(anyhow::Error::msg)?;
    let jobs = a.jobs.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let started = std::time::Instant::now();
    let total: usize = chosen.iter().map(|e| e.cases.len() * e.seeds.len()).sum();
    let mut bar = Progress::new(total, "runs", std::io::stderr().is_terminal());
    for exp in &chosen {
        bar.stage(exp.name, exp.cases.len() * exp.seeds.len());
    }
    // Every experiment's runs from one queue (lab::experiments::run_experiments).
    let mut progress = |d: &RunDone<'_>| {
        if d.done == 1 {
            let exp = chosen.iter().find(|e| e.name == d.experiment);
            bar.note(&format!(
                "[{}] {} runs ({} scale, seeds {:?})",
                d.experiment,
                d.total,
                scale.name(),
                exp.map(|e| e.seeds.as_slice()).unwrap_or_default()
            ));
        }
        let status = match &d.row.error {
            Some(e) => format!("FAILED: {e}"),
            None => d
                .row
                .metrics
                .iter()
                .filter(|(k, _)| PROGRESS_METRICS.contains(&k.as_str()))
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect::<Vec<_>>()
                .join(" "),
        };
        bar.step_done_in(
            Some(d.experiment),
            &format!(
                "[{}] {}/{} {} {} seed {}: {status} ({:.1} s)",
                d.experiment,
                d.done,
                d.total,
                d.row.group,
                d.row.scheme,
                d.row.seed,
                d.wall.as_secs_f64()
            ),
        );
    };
    let results = experiments::evaluate_all(&chosen, jobs, &mut progress);
    bar.finish();
    let written = report::write_outputs(&a.out, scale, &chosen, &results)
        .with_context(|| format!("cannot write the results into {}", a.out.display()))?;
    let mut stdout = std::io::stdout().lock();
    for p in written {
        writeln!(stdout, "{}", p.display())?;
    }
    stdout.flush()?;
    let failed: usize = results
        .iter()
        .map(|r| r.runs.iter().filter(|x| x.error.is_some()).count())
        .sum();
    eprintln!(
        "done in {:.1} s: {} experiment(s), {failed} failed run(s); see {}",
        started.elapsed().as_secs_f64(),
        results.len(),
        a.out.join("report.html").display()
    );
    Ok(())
}

/// Metrics shown per run in the progress lines (when the run has them).
const PROGRESS_METRICS: &[&str] = &[
    "n_max",
    "redundancy",
    "fct_ms",
    "rpc_fct_mean_ms",
    "paired_packets",
];
