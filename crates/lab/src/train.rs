//! Training ART-DQN's learner (ART journal Appendix A.2) over simulated
//! episodes through the real transport: `artq train art-dqn`.
//!
//! Why this exists: a model trained on one scenario was worse than no policy
//! on a path it had not seen (issue 25), so training draws each episode from
//! a [`Distribution`] of paths (Mahimahi traces or constant rates), loss
//! rates, RTTs and file sizes, and one trained model is meant for all of
//! them. [`Episodes::Single`] keeps the older form, one scenario with a new
//! seed per episode.
//!
//! **Determinism with parallel rollouts.** Episodes run in batches of
//! [`TrainSpec::batch`]: every episode of a batch decides with the learner as
//! it stood when the batch began (exploring at that moment's rate) and
//! collects its experiences instead of learning
//! ([`recovery::art::ArtFactory::collecting`]); once the whole batch has
//! run, the learner stores and learns from them in episode order, one
//! learning step per experience, as it would online. [`TrainSpec::jobs`]
//! only says how many episodes of a batch run at once, so the same
//! arguments give the same model, byte for byte, whatever `jobs` is. The
//! batch does change the model: a larger batch acts on an older network.
//!
//! **Sampling.** Episode k (from 0) has run seed `seed + k` and draws its
//! path, loss rate, RTT and size each uniformly from the distribution's
//! lists, by `netem::derive_seed(seed, "artq-train/k/<list>")`: the same
//! seed gives the same episodes, and adding an entry to one list does not
//! change the draws from the others.
//!
//! The lab never reads a clock: wall time is the caller's to measure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use apps::workload::Workload;
use netem::{derive_seed, LinkConfig, LinkSpec};
use recovery::art::{ArtFactory, Experience, ExperienceSink};
use serde::Deserialize;
use transport::policy::PolicyFactory;

use crate::experiments::scenarios::trace as shared_trace;
use crate::run::{run_with, RunOptions};
use crate::scenario::{Scenario, MAX_SCENARIO_BYTES};

/// Most episodes one training may run.
pub const MAX_EPISODES: u64 = 1_000_000;
/// Largest batch of episodes.
pub const MAX_BATCH: usize = 4096;
/// Most episodes run at once.
pub const MAX_JOBS: usize = 256;
/// Most entries in one list of a distribution file.
pub const MAX_LIST: usize = 1000;
/// Largest file size an episode may transfer (1 GB): a bigger one is a
/// typo, and would take hours per episode.
pub const MAX_SIZE: u64 = 1_000_000_000;

/// The shared traces of the default distribution, as paths relative to
/// the repository root: T-Mobile's LTE trace, each direction in turn as the
/// data direction. Verizon's ([`HELD_OUT_TRACES`]) is left out.
pub const TRAINING_TRACES: &[(&str, &str)] = &[
    ("TMobile-LTE-short.down", "TMobile-LTE-short.up"),
    ("TMobile-LTE-short.up", "TMobile-LTE-short.down"),
];

/// The shared traces the default distribution never trains on, kept for
/// evaluating a trained model on paths it has not seen: Verizon's LTE
/// trace, the one the paper's Fig. 27 uses (both directions).
pub const HELD_OUT_TRACES: &[(&str, &str)] = &[
    ("Verizon-LTE-short.down", "Verizon-LTE-short.up"),
    ("Verizon-LTE-short.up", "Verizon-LTE-short.down"),
];

/// Loss rates of the default distribution.
pub const DEFAULT_LOSSES: &[f64] = &[0.01, 0.02, 0.05, 0.08, 0.1];
/// RTTs of the default distribution, ms.
pub const DEFAULT_RTTS_MS: &[f64] = &[10.0, 30.0, 60.0, 100.0];
/// File sizes of the default distribution, bytes.
pub const DEFAULT_SIZES: &[u64] = &[1_000_000, 2_000_000, 5_000_000];
/// Where the shared traces are, relative to the repository root.
pub const SHARED_TRACES: &str = "../shared/traces";
/// Constant rates of the fallback distribution (shared traces missing),
/// Mbit/s: about the range of the LTE traces' means and above.
pub const FALLBACK_BANDWIDTHS: &[f64] = &[5.0, 10.0, 20.0, 50.0];
/// Episodes of the default distribution: about a minute of training on two
/// cores in a release build (about 110,000 experiences and learning steps).
pub const DEFAULT_EPISODES: u64 = 1000;

/// Why a distribution could not be loaded or training could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrainError {
    /// The distribution file could not be read.
    #[error("cannot read distribution {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        error: std::io::Error,
    },
    /// The distribution file is not valid TOML, or has an unknown or
    /// ill-typed key.
    #[error("malformed distribution {origin}: {message}")]
    Toml {
        /// The file.
        origin: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A value of the distribution is out of range, or a trace it names
    /// cannot be used; the message names the key and the value.
    #[error("bad distribution {origin}: {message}")]
    Invalid {
        /// The file (or `built-in`).
        origin: String,
        /// What is wrong, naming the key and value.
        message: String,
    },
    /// The training itself cannot run (the scheme has no learner, a
    /// number is out of range, an episode's links cannot be built).
    #[error("{0}")]
    Setup(String),
}

/// One path an episode may run over.
#[derive(Clone, Debug, PartialEq)]
pub enum PathKind {
    /// Mahimahi traces: `down` for the data (server to client), `up` for
    /// the acknowledgements.
    Trace {
        /// The server-to-client trace.
        down: PathBuf,
        /// The client-to-server trace.
        up: PathBuf,
    },
    /// A constant rate in both directions, Mbit/s.
    Rate(f64),
}

impl PathKind {
    /// A short description (`TMobile-LTE-short.down`, `50 Mbit/s`).
    pub fn label(&self) -> String {
        match self {
            PathKind::Trace { down, .. } => down.file_name().map_or_else(
                || down.display().to_string(),
                |n| n.to_string_lossy().into(),
            ),
            PathKind::Rate(mbps) => format!("{mbps} Mbit/s"),
        }
    }
}

/// The scenarios `artq train` samples an episode from (see the module
/// docs). Every episode downloads one file over one connection, Cubic,
/// Bernoulli loss at the drawn rate in both directions.
#[derive(Clone, Debug, PartialEq)]
pub struct Distribution {
    /// Where it came from (a file, or `built-in`), for messages.
    pub origin: String,
    /// Paths.
    pub paths: Vec<PathKind>,
    /// Loss rates, in [0, 1).
    pub losses: Vec<f64>,
    /// Round-trip propagation delays, ms.
    pub rtts_ms: Vec<f64>,
    /// File sizes, bytes.
    pub sizes: Vec<u64>,
    /// The number of episodes when the command gives none.
    pub episodes: Option<u64>,
}

/// A distribution file as written (see [`Distribution::from_toml_str`]).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDistribution {
    #[serde(default)]
    traces: Vec<RawTrace>,
    #[serde(default)]
    bandwidths: Vec<f64>,
    losses: Vec<f64>,
    rtts: Vec<f64>,
    sizes: Vec<RawSize>,
    episodes: Option<u64>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawTrace {
    Both(PathBuf),
    Pair { down: PathBuf, up: PathBuf },
}

#[derive(Deserialize)]
#[serde(untagged)]
enum RawSize {
    Bytes(u64),
    Text(String),
}

impl Distribution {
    /// Parses a distribution:
    ///
    /// ```toml
    /// # Each list is sampled uniformly per episode.
    /// traces = [
    ///   "../shared/traces/TMobile-LTE-short.down",        # both directions
    ///   { down = "lte.down", up = "lte.up" },             # or one each
    /// ]
    /// bandwidths = [10, 50]      # Mbit/s: constant-rate paths (optional)
    /// losses = [0.01, 0.05, 0.1] # Bernoulli, both directions, in [0, 1)
    /// rtts = [20, 60]            # ms
    /// sizes = ["1MB", "5MB"]     # bytes, or with a unit (KB, MB, MiB...)
    /// episodes = 300             # optional: the default of --episodes
    /// ```
    ///
    /// `traces` and `bandwidths` together need at least one entry; the other
    /// lists at least one each. Relative trace paths stay relative to the
    /// working directory ([`Distribution::from_toml_file`] makes them
    /// relative to the file). `origin` names the text in errors.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Distribution, TrainError> {
        let raw: RawDistribution = toml::from_str(text).map_err(|e| TrainError::Toml {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })?;
        let invalid = |message: String| TrainError::Invalid {
            origin: origin.to_string(),
            message,
        };
        let mut paths = Vec::new();
        for t in raw.traces {
            paths.push(match t {
                RawTrace::Both(p) => PathKind::Trace {
                    down: p.clone(),
                    up: p,
                },
                RawTrace::Pair { down, up } => PathKind::Trace { down, up },
            });
        }
        for (i, &mbps) in raw.bandwidths.iter().enumerate() {
            if !(mbps.is_finite() && mbps > 0.0 && mbps <= 100_000.0) {
                return Err(invalid(format!(
                    "bandwidths[{i}] = {mbps}: a rate must be in (0, 100000] Mbit/s"
                )));
            }
            paths.push(PathKind::Rate(mbps));
        }
        if paths.is_empty() {
            return Err(invalid(
                "no path: give `traces` (Mahimahi files) or `bandwidths` (Mbit/s), or both".into(),
            ));
        }
        for (i, &p) in raw.losses.iter().enumerate() {
            if !(0.0..1.0).contains(&p) {
                return Err(invalid(format!(
                    "losses[{i}] = {p}: a loss rate must be in [0, 1)"
                )));
            }
        }
        for (i, &rtt) in raw.rtts.iter().enumerate() {
            if !(rtt.is_finite() && rtt > 0.0 && rtt <= 10_000.0) {
                return Err(invalid(format!(
                    "rtts[{i}] = {rtt}: an RTT must be in (0, 10000] ms"
                )));
            }
        }
        let mut sizes = Vec::new();
        for (i, s) in raw.sizes.iter().enumerate() {
            let bytes = match s {
                RawSize::Bytes(b) => *b,
                RawSize::Text(t) => apps::size::parse_size(t)
                    .map_err(|e| invalid(format!("sizes[{i}] = \"{t}\": {e}")))?,
            };
            if !(1..=MAX_SIZE).contains(&bytes) {
                return Err(invalid(format!(
                    "sizes[{i}] = {bytes} bytes: a size must be in 1..={MAX_SIZE}"
                )));
            }
            sizes.push(bytes);
        }
        for (key, len) in [
            ("losses", raw.losses.len()),
            ("rtts", raw.rtts.len()),
            ("sizes", sizes.len()),
            ("traces and bandwidths", paths.len()),
        ] {
            if len == 0 {
                return Err(invalid(format!(
                    "`{key}` is empty: give at least one value"
                )));
            }
            if len > MAX_LIST {
                return Err(invalid(format!(
                    "`{key}` has {len} entries, more than {MAX_LIST}"
                )));
            }
        }
        if let Some(n) = raw.episodes {
            if !(1..=MAX_EPISODES).contains(&n) {
                return Err(invalid(format!(
                    "episodes = {n}: must be in 1..={MAX_EPISODES}"
                )));
            }
        }
        Ok(Distribution {
            origin: origin.to_string(),
            paths,
            losses: raw.losses,
            rtts_ms: raw.rtts,
            sizes,
            episodes: raw.episodes,
        })
    }

    /// Loads a distribution file (at most 1 MiB); relative trace paths are
    /// taken relative to the file's directory. The traces are checked
    /// here: a missing or malformed one is an error naming it.
    pub fn from_toml_file(path: &Path) -> Result<Distribution, TrainError> {
        let io = |error| TrainError::Io {
            path: path.to_path_buf(),
            error,
        };
        let text = netem::read_capped_text(path, MAX_SCENARIO_BYTES, "distribution").map_err(io)?;
        let mut d = Distribution::from_toml_str(&text, &path.display().to_string())?;
        if let Some(dir) = path.parent() {
            for p in &mut d.paths {
                if let PathKind::Trace { down, up } = p {
                    for f in [down, up] {
                        if f.is_relative() {
                            *f = dir.join(&*f);
                        }
                    }
                }
            }
        }
        d.check_traces()?;
        Ok(d)
    }

    /// The documented default: [`TRAINING_TRACES`] from `../shared/traces`,
    /// losses [`DEFAULT_LOSSES`], RTTs [`DEFAULT_RTTS_MS`], sizes
    /// [`DEFAULT_SIZES`], [`DEFAULT_EPISODES`] episodes. Without those
    /// traces, the same with constant rates [`FALLBACK_BANDWIDTHS`] instead,
    /// and the second value says so (for the caller to print loudly). The
    /// traces are found from the working directory (the repository root)
    /// or, failing that, from where this crate was built.
    pub fn builtin() -> (Distribution, Option<String>) {
        let traces: Vec<(PathBuf, PathBuf)> = TRAINING_TRACES
            .iter()
            .map(|(d, u)| (shared_trace(d), shared_trace(u)))
            .collect();
        let missing: Vec<String> = traces
            .iter()
            .flat_map(|(d, u)| [d, u])
            .filter(|p| !p.is_file())
            .map(|p| p.display().to_string())
            .collect();
        if missing.is_empty() {
            let paths = traces
                .into_iter()
                .map(|(down, up)| PathKind::Trace { down, up })
                .collect();
            return (Distribution::default_over(paths), None);
        }
        let paths = FALLBACK_BANDWIDTHS
            .iter()
            .map(|&b| PathKind::Rate(b))
            .collect();
        let warning = format!(
            "the shared training traces are missing ({}; run from the repository root, beside \
             ../shared/traces): training on constant-rate paths of {} Mbit/s instead, which is \
             NOT the documented default distribution and generalises worse to mobile paths",
            missing.join(", "),
            FALLBACK_BANDWIDTHS
                .iter()
                .map(|b| b.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        (Distribution::default_over(paths), Some(warning))
    }

    /// The default distribution as documented: trace paths as written,
    /// relative to the repository root (`../shared/traces/...`), not
    /// resolved. For help texts and docs.
    pub fn documented() -> Distribution {
        let paths = TRAINING_TRACES
            .iter()
            .map(|(d, u)| PathKind::Trace {
                down: Path::new(SHARED_TRACES).join(d),
                up: Path::new(SHARED_TRACES).join(u),
            })
            .collect();
        Distribution::default_over(paths)
    }

    /// The default lists over `paths`.
    fn default_over(paths: Vec<PathKind>) -> Distribution {
        Distribution {
            origin: "built-in".into(),
            paths,
            losses: DEFAULT_LOSSES.to_vec(),
            rtts_ms: DEFAULT_RTTS_MS.to_vec(),
            sizes: DEFAULT_SIZES.to_vec(),
            episodes: Some(DEFAULT_EPISODES),
        }
    }

    /// Checks that every trace can be read and parsed (an error names the
    /// file), before any episode runs.
    pub fn check_traces(&self) -> Result<(), TrainError> {
        for (i, p) in self.paths.iter().enumerate() {
            if matches!(p, PathKind::Trace { .. }) {
                self.link(i, 0.0, 30.0).map(|_| ())?;
            }
        }
        Ok(())
    }

    /// The links of path `path` at `loss` and `rtt_ms`.
    fn link(
        &self,
        path: usize,
        loss: f64,
        rtt_ms: f64,
    ) -> Result<(LinkSpec, (LinkConfig, LinkConfig)), TrainError> {
        let mut link = LinkSpec {
            rtt: rtt_ms,
            loss: Some(loss),
            ..LinkSpec::default()
        };
        match self.paths.get(path) {
            Some(PathKind::Trace { down, up }) => {
                link.bw = None;
                link.trace = Some(down.clone());
                link.up.trace = Some(up.clone());
            }
            Some(PathKind::Rate(mbps)) => link.bw = Some(*mbps),
            None => return Err(TrainError::Setup(format!("no path {path}"))),
        }
        let configs = link.configs().map_err(|e| TrainError::Invalid {
            origin: self.origin.clone(),
            message: format!("path {}: {e}", self.paths[path].label()),
        })?;
        Ok((link, configs))
    }

    /// The draws of episode `k` of a training with seed `seed`: indices into
    /// (paths, losses, rtts, sizes).
    pub fn draw(&self, seed: u64, k: u64) -> [usize; 4] {
        let pick = |list: &str, n: usize| {
            (derive_seed(seed, &format!("artq-train/{k}/{list}")) % n.max(1) as u64) as usize
        };
        [
            pick("path", self.paths.len()),
            pick("loss", self.losses.len()),
            pick("rtt", self.rtts_ms.len()),
            pick("size", self.sizes.len()),
        ]
    }

    /// The distribution as TOML (paths as given; what
    /// [`Distribution::from_toml_str`] reads back), for `--help`,
    /// `--print-distribution` and the docs.
    pub fn to_toml(&self) -> String {
        let quoted = |p: &Path| format!("{:?}", p.display().to_string());
        let mut out = String::new();
        let traces: Vec<String> = self
            .paths
            .iter()
            .filter_map(|p| match p {
                PathKind::Trace { down, up } if down == up => Some(quoted(down)),
                PathKind::Trace { down, up } => Some(format!(
                    "{{ down = {}, up = {} }}",
                    quoted(down),
                    quoted(up)
                )),
                PathKind::Rate(_) => None,
            })
            .collect();
        if !traces.is_empty() {
            out.push_str("traces = [\n");
            for t in traces {
                out.push_str(&format!("  {t},\n"));
            }
            out.push_str("]\n");
        }
        let rates: Vec<String> = self
            .paths
            .iter()
            .filter_map(|p| match p {
                PathKind::Rate(b) => Some(b.to_string()),
                PathKind::Trace { .. } => None,
            })
            .collect();
        let list = |v: Vec<String>| v.join(", ");
        if !rates.is_empty() {
            out.push_str(&format!("bandwidths = [{}]\n", list(rates)));
        }
        out.push_str(&format!(
            "losses = [{}]\nrtts = [{}]\nsizes = [{}]\n",
            list(self.losses.iter().map(|l| l.to_string()).collect()),
            list(self.rtts_ms.iter().map(|r| r.to_string()).collect()),
            list(self.sizes.iter().map(|&s| size_text(s)).collect()),
        ));
        if let Some(n) = self.episodes {
            out.push_str(&format!("episodes = {n}\n"));
        }
        out
    }
}

/// A size as a distribution file writes it: `"5MB"`, `"200KB"`, or bytes.
fn size_text(bytes: u64) -> String {
    if bytes >= 1_000_000 && bytes % 1_000_000 == 0 {
        format!("\"{}MB\"", bytes / 1_000_000)
    } else if bytes >= 1000 && bytes % 1000 == 0 {
        format!("\"{}KB\"", bytes / 1000)
    } else {
        bytes.to_string()
    }
}

/// What episodes a training runs.
#[derive(Clone, Debug)]
pub enum Episodes {
    /// One scenario; episode k runs it with seed `seed + k`.
    Single {
        /// The scenario (its scheme is replaced by the factory).
        scenario: Box<Scenario>,
        /// Its links, built once.
        links: Box<(LinkConfig, LinkConfig)>,
    },
    /// Episodes drawn from a distribution.
    Sampled(Distribution),
}

/// How a training runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrainSpec {
    /// Episodes to run.
    pub episodes: u64,
    /// Seed of episode 0's run (and of the distribution's draws).
    pub seed: u64,
    /// Episodes run with one state of the learner before it learns from
    /// them (see the module docs).
    pub batch: usize,
    /// Episodes of a batch run at once; changes the wall time only.
    pub jobs: usize,
}

/// One episode's result, reported in episode order.
#[derive(Clone, Debug, PartialEq)]
pub struct EpisodeReport {
    /// Its index, from 0.
    pub index: u64,
    /// Its run's seed.
    pub seed: u64,
    /// Its scenario in words.
    pub setting: String,
    /// `n_max`, replicas and FCT (ms) of the run, or why it failed.
    pub outcome: Result<(u32, u64, f64), String>,
    /// Experiences it collected.
    pub collected: usize,
    /// The learner's experiences after learning from it.
    pub experiences: u64,
    /// The learner's learning steps after learning from it.
    pub learn_steps: u64,
    /// The exploration rate the episode acted with.
    pub epsilon: f64,
    /// The loss of the latest learning step (NaN before the first).
    pub td_loss: f64,
}

/// What a training did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TrainSummary {
    /// Episodes run.
    pub episodes: u64,
    /// Episodes whose run did not complete (what they collected is kept).
    pub failed: u64,
    /// Experiences stored.
    pub experiences: u64,
    /// Learning steps taken.
    pub learn_steps: u64,
}

/// A prepared episode.
struct Prepared {
    scenario: Scenario,
    links: (LinkConfig, LinkConfig),
    setting: String,
}

/// Trains `factory`'s learner (an `art-dqn` factory) over `episodes` as
/// `spec` says, calling `on_episode` for each episode in order once the
/// learner has learned from it. The learner is left trained (save it with
/// [`recovery::art::Learner::save`]).
pub fn train(
    factory: &ArtFactory,
    episodes: &Episodes,
    spec: &TrainSpec,
    on_episode: &mut dyn FnMut(&EpisodeReport),
) -> Result<TrainSummary, TrainError> {
    let learner = factory.learner().ok_or_else(|| {
        TrainError::Setup("only art-dqn has a learner to train (ART journal Appendix A.2)".into())
    })?;
    if !(1..=MAX_EPISODES).contains(&spec.episodes) {
        return Err(TrainError::Setup(format!(
            "episodes {} must be in 1..={MAX_EPISODES}",
            spec.episodes
        )));
    }
    if !(1..=MAX_BATCH).contains(&spec.batch) || !(1..=MAX_JOBS).contains(&spec.jobs) {
        return Err(TrainError::Setup(format!(
            "batch {} must be in 1..={MAX_BATCH} and jobs {} in 1..={MAX_JOBS}",
            spec.batch, spec.jobs
        )));
    }
    if let Episodes::Sampled(d) = episodes {
        if d.paths.is_empty() || d.losses.is_empty() || d.rtts_ms.is_empty() || d.sizes.is_empty() {
            return Err(TrainError::Invalid {
                origin: d.origin.clone(),
                message: "every list (paths, losses, rtts, sizes) needs a value".into(),
            });
        }
    }
    let lock = || learner.lock().unwrap_or_else(|p| p.into_inner());
    let mut links_cache = LinkCache::new();
    let mut failed = 0;
    let mut first = 0u64;
    while first < spec.episodes {
        let last = (first + spec.batch as u64).min(spec.episodes);
        let mut batch = Vec::new();
        for k in first..last {
            batch.push(prepare(episodes, spec.seed, k, &mut links_cache)?);
        }
        let epsilon = lock().dqn().epsilon();
        let results = run_batch(factory, &batch, spec.jobs);
        for (i, (p, (outcome, experiences))) in batch.iter().zip(results).enumerate() {
            let collected = experiences.len();
            let mut l = lock();
            for t in experiences {
                l.remember(t, true);
            }
            let outcome = outcome.map(|r| (r.0, r.1, r.2));
            if outcome.is_err() {
                failed += 1;
            }
            let report = EpisodeReport {
                index: first + i as u64,
                seed: p.scenario.seed,
                setting: p.setting.clone(),
                outcome,
                collected,
                experiences: l.experiences,
                learn_steps: l.learn_steps,
                epsilon,
                td_loss: l.last_loss,
            };
            drop(l);
            on_episode(&report);
        }
        first = last;
    }
    let l = lock();
    Ok(TrainSummary {
        episodes: spec.episodes,
        failed,
        experiences: l.experiences,
        learn_steps: l.learn_steps,
    })
}

/// The scenario of episode `k`.
fn prepare(
    episodes: &Episodes,
    seed: u64,
    k: u64,
    cache: &mut LinkCache,
) -> Result<Prepared, TrainError> {
    let run_seed = seed.wrapping_add(k);
    match episodes {
        Episodes::Single { scenario, links } => Ok(Prepared {
            scenario: Scenario {
                seed: run_seed,
                ..(**scenario).clone()
            },
            links: (**links).clone(),
            setting: String::new(),
        }),
        Episodes::Sampled(d) => {
            let [path, loss, rtt, size] = d.draw(seed, k);
            let key = (path, loss, rtt);
            let (link, links) = match cache.entry(key) {
                std::collections::btree_map::Entry::Occupied(e) => e.get().clone(),
                std::collections::btree_map::Entry::Vacant(e) => e
                    .insert(d.link(path, d.losses[loss], d.rtts_ms[rtt])?)
                    .clone(),
            };
            let bytes = d.sizes[size];
            let setting = format!(
                "{}, {} ms, loss {}%, {}",
                d.paths[path].label(),
                d.rtts_ms[rtt],
                d.losses[loss] * 100.0,
                size_text(bytes).trim_matches('"')
            );
            Ok(Prepared {
                scenario: Scenario {
                    seed: run_seed,
                    workload: Workload::bulk(bytes),
                    link,
                    ..Scenario::default()
                },
                links,
                setting,
            })
        }
    }
}

/// A run's `n_max`, replicas and FCT, or why it failed.
type Outcome = Result<(u32, u64, f64), String>;

/// An episode's outcome and the experiences it collected.
type Collected = (Outcome, Vec<Experience>);

/// The links of each (path, loss, RTT) drawn so far, built once each.
type LinkCache = BTreeMap<(usize, usize, usize), (LinkSpec, (LinkConfig, LinkConfig))>;

/// Runs every episode of `batch` (on up to `jobs` threads) with collecting
/// copies of `factory`; their outcomes and experiences, in batch order.
fn run_batch(factory: &ArtFactory, batch: &[Prepared], jobs: usize) -> Vec<Collected> {
    let slots: Vec<Mutex<Option<Collected>>> = batch.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(p) = batch.get(i) else { break };
        let sink: ExperienceSink = Arc::default();
        let policy: Arc<dyn PolicyFactory> = Arc::new(factory.collecting(sink.clone()));
        let options = RunOptions {
            links: Some(p.links.clone()),
            policy: Some(policy),
            ..RunOptions::default()
        };
        let outcome = run_with(&p.scenario, options)
            .map(|r| (r.metrics.n_max, r.metrics.replicas, r.metrics.fct_ms))
            .map_err(|e| e.to_string());
        let experiences = std::mem::take(&mut *sink.lock().unwrap_or_else(|e| e.into_inner()));
        *slots[i].lock().unwrap_or_else(|e| e.into_inner()) = Some((outcome, experiences));
    };
    let threads = jobs.clamp(1, batch.len().max(1));
    if threads == 1 {
        work();
    } else {
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(work);
            }
        });
    }
    slots
        .into_iter()
        .map(|s| {
            s.into_inner()
                .unwrap_or_else(|e| e.into_inner())
                .unwrap_or_else(|| (Err("the episode did not run".into()), Vec::new()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Distribution, TrainError> {
        Distribution::from_toml_str(text, "d.toml")
    }

    const OK: &str = r#"
        traces = ["a.down", { down = "b.down", up = "b.up" }]
        bandwidths = [10, 50.5]
        losses = [0.01, 0.1]
        rtts = [30, 100]
        sizes = ["1MB", 2000]
        episodes = 7
    "#;

    #[test]
    fn a_distribution_file_lists_what_episodes_draw_from() {
        let d = parse(OK).unwrap();
        assert_eq!(
            d.paths,
            vec![
                PathKind::Trace {
                    down: "a.down".into(),
                    up: "a.down".into()
                },
                PathKind::Trace {
                    down: "b.down".into(),
                    up: "b.up".into()
                },
                PathKind::Rate(10.0),
                PathKind::Rate(50.5),
            ]
        );
        assert_eq!(d.sizes, vec![1_000_000, 2000]);
        assert_eq!(d.episodes, Some(7));
        // Its TOML reads back as itself.
        let again = parse(&d.to_toml()).unwrap();
        assert_eq!(again.paths, d.paths);
        assert_eq!(
            (again.losses, again.rtts_ms, again.sizes, again.episodes),
            (d.losses, d.rtts_ms, d.sizes, d.episodes)
        );
    }

    #[test]
    fn bad_distributions_name_the_key_and_value() {
        let base = "losses = [0.01]\nrtts = [30]\nsizes = [\"1MB\"]\nbandwidths = [10]\n";
        for (text, needle) in [
            (
                "losses = [0.01]\nrtts = [30]\nsizes = [\"1MB\"]\n",
                "no path",
            ),
            (&base.replace("[0.01]", "[0.01, 1.5]"), "losses[1] = 1.5"),
            (&base.replace("[30]", "[-3]"), "rtts[0] = -3"),
            (
                &base.replace("[\"1MB\"]", "[\"1XB\"]"),
                "sizes[0] = \"1XB\"",
            ),
            (&base.replace("[\"1MB\"]", "[0]"), "sizes[0] = 0"),
            (&base.replace("[10]", "[0]"), "bandwidths[0] = 0"),
            (&base.replace("[0.01]", "[]"), "`losses` is empty"),
            (&format!("{base}episodes = 0\n"), "episodes = 0"),
            (&format!("{base}loss = [0.1]\n"), "unknown field `loss`"),
            ("losses = 0.1", "malformed"),
            (&base.replace("rtts = [30]\n", ""), "missing field `rtts`"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(needle) && e.contains("d.toml"), "{text}: {e}");
        }
    }

    #[test]
    fn trace_paths_follow_the_file_and_missing_traces_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("x.trace"), "1\n2\n").unwrap();
        let file = dir.path().join("d.toml");
        std::fs::write(
            &file,
            "traces = [\"x.trace\"]\nlosses = [0.01]\nrtts = [30]\nsizes = [\"1MB\"]\n",
        )
        .unwrap();
        let d = Distribution::from_toml_file(&file).unwrap();
        assert_eq!(
            d.paths,
            vec![PathKind::Trace {
                down: dir.path().join("x.trace"),
                up: dir.path().join("x.trace")
            }]
        );
        std::fs::write(
            &file,
            "traces = [\"absent.trace\"]\nlosses = [0.01]\nrtts = [30]\nsizes = [\"1MB\"]\n",
        )
        .unwrap();
        let e = Distribution::from_toml_file(&file).unwrap_err().to_string();
        assert!(e.contains("absent.trace"), "{e}");
        let e = Distribution::from_toml_file(&dir.path().join("none.toml"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("none.toml"), "{e}");
    }

    #[test]
    fn draws_are_seeded_uniform_and_independent_per_list() {
        let d = parse(OK).unwrap();
        let a: Vec<[usize; 4]> = (0..400).map(|k| d.draw(1, k)).collect();
        assert_eq!(a, (0..400).map(|k| d.draw(1, k)).collect::<Vec<_>>());
        assert_ne!(a, (0..400).map(|k| d.draw(2, k)).collect::<Vec<_>>());
        for (list, n) in [(0, 4), (1, 2), (2, 2), (3, 2)] {
            for v in 0..n {
                let count = a.iter().filter(|x| x[list] == v).count();
                assert!(count > 400 / n / 2, "list {list} value {v}: {count}");
            }
        }
        // One more loss rate leaves the other draws alone.
        let mut more = d.clone();
        more.losses.push(0.05);
        for k in 0..50 {
            let (x, y) = (d.draw(1, k), more.draw(1, k));
            assert_eq!((x[0], x[2], x[3]), (y[0], y[2], y[3]));
        }
    }

    #[test]
    fn the_default_distribution_holds_out_the_evaluation_traces() {
        let (d, warning) = Distribution::builtin();
        for p in &d.paths {
            if let PathKind::Trace { down, up } = p {
                for f in [down, up] {
                    let name = f.file_name().unwrap().to_string_lossy().to_string();
                    assert!(
                        !HELD_OUT_TRACES
                            .iter()
                            .any(|(a, b)| *a == name || *b == name),
                        "{name} is held out"
                    );
                }
            }
        }
        match warning {
            None => assert_eq!(d.paths.len(), TRAINING_TRACES.len()),
            Some(w) => {
                assert!(w.contains("missing") && w.contains("NOT"), "{w}");
                assert!(d.paths.iter().all(|p| matches!(p, PathKind::Rate(_))));
            }
        }
        assert!(d.losses.iter().all(|l| (0.01..=0.1).contains(l)));
    }

    /// A small sampled training, as `artq train` runs it.
    fn tiny(jobs: usize) -> (Vec<u8>, TrainSummary, Vec<EpisodeReport>) {
        let d = parse(
            "bandwidths = [10, 20]\nlosses = [0.05, 0.1]\nrtts = [20, 40]\nsizes = [\"200KB\"]\n",
        )
        .unwrap();
        let factory = recovery::parse_art_dqn("art-dqn:reward=tail").unwrap();
        let spec = TrainSpec {
            episodes: 5,
            seed: 3,
            batch: 2,
            jobs,
        };
        let mut reports = Vec::new();
        let summary = train(&factory, &Episodes::Sampled(d), &spec, &mut |r| {
            reports.push(r.clone())
        })
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.safetensors");
        factory
            .learner()
            .unwrap()
            .lock()
            .unwrap()
            .save(&path)
            .unwrap();
        (std::fs::read(&path).unwrap(), summary, reports)
    }

    #[test]
    fn the_model_is_the_same_whatever_the_jobs() {
        let (one, s1, r1) = tiny(1);
        let (three, s3, r3) = tiny(3);
        assert_eq!(one, three, "same command, different --jobs");
        assert_eq!(s1, s3);
        // (Debug text: a NaN loss before the first step is not == itself.)
        assert_eq!(format!("{r1:?}"), format!("{r3:?}"));
        assert_eq!(s1.episodes, 5);
        assert_eq!(
            r1.iter().map(|r| r.index).collect::<Vec<_>>(),
            [0, 1, 2, 3, 4]
        );
        assert_eq!(
            r1.iter().map(|r| r.seed).collect::<Vec<_>>(),
            [3, 4, 5, 6, 7]
        );
        assert!(s1.experiences > 0 && s1.learn_steps > 0, "{s1:?}");
        assert_eq!(
            s1.experiences,
            r1.iter().map(|r| r.collected as u64).sum::<u64>()
        );
        // A batch acts with the learner as it stood at its start.
        assert_eq!(r1[0].epsilon, r1[1].epsilon);
        assert!(r1.iter().all(|r| r.outcome.is_ok()), "{r1:?}");
    }

    #[test]
    fn training_needs_a_learner_and_sane_numbers() {
        let d = parse("bandwidths = [10]\nlosses = [0.05]\nrtts = [20]\nsizes = [\"100KB\"]\n")
            .unwrap();
        let art = recovery::art::ArtFactory::new(recovery::art::ArtConfig::default()).unwrap();
        let spec = TrainSpec {
            episodes: 1,
            seed: 1,
            batch: 1,
            jobs: 1,
        };
        let e = train(&art, &Episodes::Sampled(d.clone()), &spec, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("art-dqn"), "{e}");
        let dqn = recovery::parse_art_dqn("art-dqn").unwrap();
        let empty = Distribution {
            sizes: Vec::new(),
            ..d.clone()
        };
        let e = train(&dqn, &Episodes::Sampled(empty), &spec, &mut |_| {}).unwrap_err();
        assert!(e.to_string().contains("needs a value"), "{e}");
        for bad in [
            TrainSpec {
                episodes: 0,
                ..spec
            },
            TrainSpec { batch: 0, ..spec },
            TrainSpec { jobs: 0, ..spec },
        ] {
            assert!(train(&dqn, &Episodes::Sampled(d.clone()), &bad, &mut |_| {}).is_err());
        }
    }
}
