//! `artq train art-dqn`: offline training of ART-DQN's learner (ART journal
//! Appendix A.2) over simulated runs of one scenario, through the real
//! transport, and the trained model written as a safetensors file that
//! `--scheme art-dqn:model=FILE` loads.
//!
//! Episode k (from 0) is the scenario run with seed `S + k` (S = `--seed`,
//! default 1, or the scenario file's): the same path and workload, fresh
//! loss draws each time. One factory serves every episode, so its one
//! learner keeps its network, replay memory and exploration schedule from
//! episode to episode and learns online during each (one learning step per
//! settled round). The learner's initial weights and replay sampling come
//! from the scheme's `seed=` option; with the same command the model file is
//! the same, byte for byte.
//!
//! A failed episode (a run that did not complete) is reported and training
//! goes on: what it learned before failing is kept. Progress goes to stderr
//! (a bar on a terminal, a line per episode otherwise); stdout gets one
//! summary line.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant as StdInstant;

use anyhow::{Context, Result};
use clap::Args;
use lab::RunOptions;
use transport::policy::PolicyFactory;

use crate::progress::ProgressBar;
use crate::sim::{scenario_of, ScenarioArgs};

/// Largest number of episodes accepted.
const MAX_EPISODES: u64 = 1_000_000;

/// Options of `artq train`.
#[derive(Args, Debug)]
pub struct TrainArgs {
    /// The learning scheme to train: `art-dqn`, with its options
    /// (`art-dqn:gamma=1.1,seed=3`); with `model=FILE` training continues
    /// from that model. A scenario file's own scheme is replaced by it.
    #[arg(value_name = "SCHEME")]
    scheme: String,
    /// The scenario of every episode (link, workload, transport; `--seed`
    /// is the first episode's seed).
    #[command(flatten)]
    run: ScenarioArgs,
    /// Number of training episodes (simulated runs).
    #[arg(long, value_name = "N", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=MAX_EPISODES))]
    episodes: u64,
    /// Write the trained model to this file (safetensors; replaced if it
    /// exists).
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
}

/// What a training run did, for the summary line and tests.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainSummary {
    /// Episodes run.
    pub episodes: u64,
    /// Episodes whose run did not complete.
    pub failed: u64,
    /// Rounds settled (experiences stored) over all episodes.
    pub experiences: u64,
    /// Learning steps taken over all episodes.
    pub learn_steps: u64,
    /// Wall time of the whole training, seconds.
    pub wall_s: f64,
}

/// Runs `artq train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let s = train(&a)?;
    println!(
        "trained {} over {} episodes ({} failed): {} experiences, {} learning steps in {:.1} s \
         ({:.0} steps/s); model written to {}",
        a.scheme,
        s.episodes,
        s.failed,
        s.experiences,
        s.learn_steps,
        s.wall_s,
        s.learn_steps as f64 / s.wall_s.max(1e-9),
        a.out.display()
    );
    std::io::stdout().flush()?;
    Ok(())
}

/// Trains and saves; the summary.
fn train(a: &TrainArgs) -> Result<TrainSummary> {
    // Errors in the command come before any work: the scheme (a missing or
    // mismatched model=FILE included), the scenario, the output directory.
    let factory = recovery::parse_art_dqn(&a.scheme).map_err(|e| {
        anyhow::anyhow!("{e} (artq train trains art-dqn, ART journal Appendix A.2)")
    })?;
    let learner = factory
        .learner()
        .context("an art-dqn factory always has a learner")?;
    let (mut scenario, links) = scenario_of(&a.run, &a.scheme)?;
    scenario.scheme = a.scheme.clone();
    if let Some(dir) = a.out.parent().filter(|d| !d.as_os_str().is_empty()) {
        anyhow::ensure!(
            dir.is_dir(),
            "--out {}: the directory {} does not exist",
            a.out.display(),
            dir.display()
        );
    }
    let factory: Arc<dyn PolicyFactory> = Arc::new(factory);
    let first_seed = scenario.seed;
    let started = StdInstant::now();
    let mut bar = ProgressBar::new(
        a.episodes as usize,
        "episodes",
        std::io::stderr().is_terminal(),
    );
    bar.note(&format!(
        "[train] {} over {} episodes, seeds {}..={}",
        a.scheme,
        a.episodes,
        first_seed,
        first_seed.wrapping_add(a.episodes - 1)
    ));
    let mut failed = 0;
    for k in 0..a.episodes {
        let mut episode = scenario.clone();
        episode.seed = first_seed.wrapping_add(k);
        let options = RunOptions {
            links: Some(links.clone()),
            policy: Some(factory.clone()),
            ..RunOptions::default()
        };
        let episode_started = StdInstant::now();
        let outcome = lab::run_with(&episode, options);
        let (experiences, steps, epsilon, loss) = {
            let l = learner.lock().unwrap_or_else(|p| p.into_inner());
            (l.experiences, l.learn_steps, l.dqn().epsilon(), l.last_loss)
        };
        let status = match outcome {
            Ok(r) => format!(
                "n_max {} replicas {} fct {:.0} ms",
                r.metrics.n_max, r.metrics.replicas, r.metrics.fct_ms
            ),
            Err(e) => {
                failed += 1;
                format!("FAILED: {e}")
            }
        };
        bar.step_done(
            &format!(
                "[train] episode {}/{} seed {}: {status}; {experiences} experiences, {steps} \
                 learning steps, epsilon {epsilon:.3}, loss {loss:.4} ({:.1} s)",
                k + 1,
                a.episodes,
                episode.seed,
                episode_started.elapsed().as_secs_f64()
            ),
            "train",
            started.elapsed(),
        );
    }
    bar.finish();
    let l = learner.lock().unwrap_or_else(|p| p.into_inner());
    l.save(&a.out)
        .with_context(|| format!("cannot write the model to {}", a.out.display()))?;
    Ok(TrainSummary {
        episodes: a.episodes,
        failed,
        experiences: l.experiences,
        learn_steps: l.learn_steps,
        wall_s: started.elapsed().as_secs_f64(),
    })
}
