//! `artq reproduce`: the ART paper's evaluation (issue 4's acceptance) as
//! named, seeded experiments over the simulator (crate `lab`, module
//! `experiments`), written to `--out DIR` as CSV, `results.json` and
//! `report.md` beside the paper's own numbers.
//!
//! Progress goes to stderr (one line per run); stdout gets only the list of
//! files written, so a script can pipe it.

use std::io::Write;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use lab::experiments::{self, report, RunDone, Scale, EXPERIMENTS};

/// Options of `artq reproduce`.
#[derive(Args, Debug)]
pub struct ReproduceArgs {
    /// Smaller sizes and two seeds: the whole set in about two minutes
    /// (release build). Without it, the paper's sizes and three seeds.
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
    /// Experiments to run (fig19, fig20, fig21, fig22, fig24, ablation);
    /// all when none is given.
    #[arg(value_name = "EXPERIMENT")]
    experiments: Vec<String>,
}

/// Runs `artq reproduce`.
pub fn run(a: ReproduceArgs) -> Result<()> {
    let scale = if a.tiny {
        Scale::Tiny
    } else if a.quick {
        Scale::Quick
    } else {
        Scale::Full
    };
    let names: Vec<String> = if a.experiments.is_empty() {
        EXPERIMENTS.iter().map(|s| s.to_string()).collect()
    } else {
        a.experiments.clone()
    };
    let mut chosen = Vec::new();
    for name in &names {
        match experiments::experiment(name, scale) {
            Some(e)
                if !chosen
                    .iter()
                    .any(|c: &experiments::Experiment| c.name == e.name) =>
            {
                chosen.push(e)
            }
            Some(_) => {}
            None => bail!(
                "unknown experiment '{name}'; valid experiments: {}",
                EXPERIMENTS.join(", ")
            ),
        }
    }
    let jobs = a.jobs.map(usize::from).unwrap_or_else(|| {
        std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
    });
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    for exp in &chosen {
        eprintln!(
            "[{}] {} runs ({} scale, seeds {:?})",
            exp.name,
            exp.cases.len() * exp.seeds.len(),
            scale.name(),
            exp.seeds
        );
        let name = exp.name;
        let mut progress = |d: &RunDone<'_>| {
            let status = match &d.row.error {
                Some(e) => format!("FAILED: {e}"),
                None => format!(
                    "n_max {} redundancy {} fct {:.0} ms",
                    d.row.metrics.get("n_max").copied().unwrap_or(0.0),
                    d.row.metrics.get("redundancy").copied().unwrap_or(0.0),
                    d.row.metrics.get("fct_ms").copied().unwrap_or(0.0)
                ),
            };
            eprintln!(
                "[{name}] {}/{} {} {} seed {}: {status} ({:.1} s)",
                d.done,
                d.total,
                d.row.group,
                d.row.scheme,
                d.row.seed,
                d.wall.as_secs_f64()
            );
        };
        results.push(experiments::evaluate(exp, jobs, &mut progress));
    }
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
        a.out.join("report.md").display()
    );
    Ok(())
}
