//! `artq train art-dqn`: offline training of ART-DQN's learner (ART journal
//! Appendix A.2) over simulated runs through the real transport
//! (`lab::train`), and the trained model written as a safetensors file that
//! `--scheme art-dqn:model=FILE` loads.
//!
//! What the episodes are, in order of precedence:
//! - `--distribution FILE`: a scenario distribution (TOML, see
//!   `lab::train::Distribution`), one draw per episode;
//! - any link, workload or scenario option (`--bw`, `--trace`, `--loss`,
//!   `--size`, `--scenario FILE`, ...): that one scenario, episode k with
//!   seed S + k (the form before issue 25);
//! - neither: the documented default distribution (the shared traces not
//!   held out for evaluation, several loss rates, RTTs and sizes), or, when
//!   those traces are missing, a constant-rate stand-in, said loudly on
//!   stderr.
//!
//! Episodes run in batches (`--batch`) with the learner as it stood at the
//! batch's start, `--jobs` of them at once, and the learner learns from
//! each batch in episode order: the model depends on the command, never on
//! `--jobs` (lab::train explains why). A failed episode (a run that did not
//! complete) is reported and training goes on, keeping what it collected.
//! Progress goes to stderr (a bar on a terminal, a line per episode
//! otherwise); stdout gets one summary line.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::Instant as StdInstant;

use anyhow::{Context, Result};
use clap::Args;
use lab::train::{Distribution, EpisodeReport, Episodes, TrainSpec, MAX_BATCH, MAX_EPISODES};

use crate::progress::Progress;
use crate::sim::{scenario_of, ScenarioArgs};

/// Episodes of a single scenario when `--episodes` is not given.
const SINGLE_EPISODES: u64 = 20;
/// `--batch` default.
const DEFAULT_BATCH: usize = 8;

/// Options of `artq train`.
#[derive(Args, Debug)]
#[command(after_long_help = after_help())]
pub struct TrainArgs {
    /// The learning scheme to train: `art-dqn`, with its options
    /// (`art-dqn:reward=tail,per=connection,gamma=4,seed=3`); with
    /// `model=FILE` training continues from that model. A scenario file's
    /// own scheme is replaced by it.
    #[arg(value_name = "SCHEME")]
    scheme: String,
    /// Train on episodes drawn from this scenario distribution (TOML:
    /// traces, bandwidths, losses, rtts, sizes, episodes; see below).
    #[arg(long, value_name = "FILE", conflicts_with = "scenario")]
    distribution: Option<PathBuf>,
    /// One scenario for every episode (link, workload, transport; `--seed`
    /// is the first episode's seed). Without any of these options and
    /// without --distribution, the default distribution is used.
    #[command(flatten)]
    run: ScenarioArgs,
    /// Number of training episodes (simulated runs) [default: the
    /// distribution's `episodes` (1000 for the default distribution), or 20
    /// for one scenario].
    #[arg(long, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=MAX_EPISODES))]
    episodes: Option<u64>,
    /// Episodes run with one state of the network before it learns from
    /// them, in episode order. Changes the model (a larger batch acts on an
    /// older network); --jobs does not.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_BATCH,
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..=MAX_BATCH as u64))]
    batch: usize,
    /// Episodes of a batch run at once (threads) [default: the cores]. The
    /// model is the same whatever this is.
    #[arg(long, value_name = "N",
          value_parser = clap::builder::RangedU64ValueParser::<usize>::new()
              .range(1..=lab::train::MAX_JOBS as u64))]
    jobs: Option<usize>,
    /// Print the distribution the command would train on (TOML) and exit.
    #[arg(long)]
    print_distribution: bool,
    /// Write the trained model to this file (safetensors; replaced if it
    /// exists).
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "print_distribution"
    )]
    out: Option<PathBuf>,
    /// Set by main: the scenario options given on the command line (not
    /// their defaults); any makes this a single-scenario training.
    #[arg(skip)]
    pub scenario_flags: Vec<String>,
}

/// The long help's closing section: the distribution file and the default.
fn after_help() -> String {
    let d = Distribution::documented();
    format!(
        "Examples:\n  artq train art-dqn:reward=tail --out art-dqn.safetensors\n      \
         (the default distribution below)\n  \
         artq train art-dqn --distribution my.toml --episodes 500 --jobs 2 --out m.safetensors\n  \
         artq train art-dqn --bw 50 --rtt 30 --loss 0.05 --size 5MB --episodes 20 --out m.safetensors\n      \
         (one scenario)\n  \
         artq sim --trace ../shared/traces/Verizon-LTE-short.down --loss 0.05 --size 5MB \\\n      \
         --scheme art-dqn:model=m.safetensors   (the model's options come with it)\n\n\
         A distribution file lists what each episode draws from, uniformly and independently,\n\
         with the training seed (--seed, default 1; episode k runs with seed S + k):\n\n  \
         traces = [\"lte.down\", {{ down = \"a.down\", up = \"a.up\" }}]  # Mahimahi files, relative to the file\n  \
         bandwidths = [10, 50]    # Mbit/s, constant-rate paths (optional)\n  \
         losses = [0.01, 0.05]    # Bernoulli loss, both directions\n  \
         rtts = [30, 100]         # ms\n  \
         sizes = [\"1MB\", \"5MB\"]   # one file per episode\n  \
         episodes = 1000          # optional default of --episodes\n\n\
         The default distribution (no scenario option, no --distribution; paths relative to the\n\
         repository root, the Verizon trace held out for evaluation):\n\n{}",
        d.to_toml()
            .lines()
            .map(|l| format!("  {l}\n"))
            .collect::<String>()
    )
}

/// Runs `artq train`.
pub fn run(a: TrainArgs) -> Result<()> {
    let Some(out) = a.out.clone() else {
        let (episodes, warning) = episodes_of(&a)?;
        if let Some(w) = warning {
            eprintln!("artq train: WARNING: {w}");
        }
        match episodes {
            Episodes::Sampled(d) => print!("{}", d.to_toml()),
            Episodes::Single { scenario, .. } => print!("{}", scenario.to_toml()),
        }
        return Ok(());
    };
    let started = StdInstant::now();
    let s = train(&a, &out)?;
    let wall_s = started.elapsed().as_secs_f64();
    println!(
        "trained {} over {} episodes ({} failed): {} experiences, {} learning steps in {:.1} s \
         ({:.0} steps/s); model written to {}",
        a.scheme,
        s.episodes,
        s.failed,
        s.experiences,
        s.learn_steps,
        wall_s,
        s.learn_steps as f64 / wall_s.max(1e-9),
        out.display()
    );
    std::io::stdout().flush()?;
    Ok(())
}

/// The episodes of the command, and a warning to print loudly (the default
/// distribution without its traces).
fn episodes_of(a: &TrainArgs) -> Result<(Episodes, Option<String>)> {
    if let Some(path) = &a.distribution {
        if let Some(flag) = a.scenario_flags.first() {
            anyhow::bail!(
                "--distribution {} gives the scenarios; --{flag} would be ignored",
                path.display()
            );
        }
        return Ok((Episodes::Sampled(Distribution::from_toml_file(path)?), None));
    }
    if a.scenario_flags.is_empty() {
        let (d, warning) = Distribution::builtin();
        d.check_traces()?;
        return Ok((Episodes::Sampled(d), warning));
    }
    let (mut scenario, links) = scenario_of(&a.run, &a.scheme)?;
    scenario.scheme = a.scheme.clone();
    Ok((
        Episodes::Single {
            scenario: Box::new(scenario),
            links: Box::new(links),
        },
        None,
    ))
}

/// Trains and saves; the summary.
fn train(a: &TrainArgs, out: &std::path::Path) -> Result<lab::train::TrainSummary> {
    // Errors in the command come before any work: the scheme (a missing or
    // mismatched model=FILE included), the episodes, the output directory.
    let factory = recovery::parse_art_dqn(&a.scheme).map_err(|e| {
        anyhow::anyhow!("{e} (artq train trains art-dqn, ART journal Appendix A.2)")
    })?;
    let learner = factory
        .learner()
        .context("an art-dqn factory always has a learner")?;
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        anyhow::ensure!(
            dir.is_dir(),
            "--out {}: the directory {} does not exist",
            out.display(),
            dir.display()
        );
    }
    let (episodes, warning) = episodes_of(a)?;
    if let Some(w) = &warning {
        eprintln!("artq train: WARNING: {w}");
    }
    let reward = factory.config().dqn.map(|d| d.reward);
    if matches!(episodes, Episodes::Sampled(_)) && reward == Some(recovery::art::RewardKind::A2) {
        eprintln!(
            "artq train: note: reward=a2 (the paper's) learns plain QUIC's levels off its \
             training paths; art-dqn:reward=tail trains the model meant for any path \
             (docs/recovery.md, \"ART-DQN off its training paths\")"
        );
    }
    let (count, seed, what) = match &episodes {
        Episodes::Single { scenario, .. } => (
            a.episodes.unwrap_or(SINGLE_EPISODES),
            scenario.seed,
            "one scenario".to_string(),
        ),
        Episodes::Sampled(d) => (
            a.episodes.or(d.episodes).unwrap_or(SINGLE_EPISODES),
            a.run.seed.unwrap_or(1),
            format!(
                "the {} distribution ({} paths, {} loss rates, {} RTTs, {} sizes)",
                d.origin,
                d.paths.len(),
                d.losses.len(),
                d.rtts_ms.len(),
                d.sizes.len()
            ),
        ),
    };
    let jobs = a
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
    let spec = TrainSpec {
        episodes: count,
        seed,
        batch: a.batch,
        jobs,
    };
    let mut bar = Progress::new(count as usize, "episodes", std::io::stderr().is_terminal());
    bar.note(&format!(
        "[train] {} over {count} episodes of {what}, seeds {}..={}, batches of {}, {jobs} at once",
        a.scheme,
        seed,
        seed.wrapping_add(count - 1),
        a.batch,
    ));
    let mut on_episode = |r: &EpisodeReport| {
        let status = match &r.outcome {
            Ok((n_max, replicas, fct)) => {
                format!("n_max {n_max} replicas {replicas} fct {fct:.0} ms")
            }
            Err(e) => format!("FAILED: {e}"),
        };
        let setting = if r.setting.is_empty() {
            String::new()
        } else {
            format!(" ({})", r.setting)
        };
        bar.step_done(&format!(
            "[train] episode {}/{count} seed {}{setting}: {status}; {} experiences, {} \
                 learning steps, epsilon {:.3}, loss {:.4}",
            r.index + 1,
            r.seed,
            r.experiences,
            r.learn_steps,
            r.epsilon,
            r.td_loss,
        ));
    };
    let summary = lab::train::train(&factory, &episodes, &spec, &mut on_episode)?;
    bar.finish();
    let l = learner.lock().unwrap_or_else(|p| p.into_inner());
    l.save(out)
        .with_context(|| format!("cannot write the model to {}", out.display()))?;
    Ok(summary)
}
