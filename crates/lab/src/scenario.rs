//! Scenarios: everything that determines one simulated run, as plain data
//! (TOML files, or built by `artq sim` from its flags).
//!
//! A scenario plus its seed fully determines a run (DESIGN.md principle 3):
//! every random component draws from `netem::derive_seed(seed, label)`, with
//! the labels `link/up`, `link/down`, `endpoint/client`, `endpoint/server`
//! and `workload/content`.
//!
//! The TOML form uses the command line's names and units:
//!
//! ```toml
//! scheme = "quic"          # recovery scheme (DESIGN.md names)
//! cc = "cubic"             # cubic | newreno | bbr
//! seed = 1
//! recv_window = "8MB"      # the client's receive window; bytes or with a unit
//! time_limit = 3600        # virtual seconds before the run is abandoned
//!
//! [workload]
//! files = 1                # fetched one after another over one connection
//! size = "10MB"
//!
//! [link]                   # both directions unless [link.up] / [link.down] say otherwise
//! bw = 100                 # Mbit/s
//! rtt = 30                 # ms, split evenly over the two directions
//! loss = 0.01              # 0..1
//! loss_model = "bernoulli" # bernoulli | gilbert | varying
//! # trace = "traces/TMobile-LTE-short.down"  (relative to the scenario file)
//! [link.down]
//! loss = 0.02
//! ```

use std::path::{Path, PathBuf};
use std::sync::Arc;

use netem::{Capacity, LinkConfig, LossModel, QueueLimit, Trace, TraceError};
use serde::{Deserialize, Serialize};
use transport::congestion::CongestionAlgorithm;
use wire::time::Duration;

use crate::workload::{deserialize_opt_size, Workload};

/// Default bottleneck rate, Mbit/s.
pub const DEFAULT_BW_MBPS: f64 = 100.0;
/// Default round-trip propagation delay, ms.
pub const DEFAULT_RTT_MS: f64 = 30.0;
/// Default random loss probability (both directions).
pub const DEFAULT_LOSS: f64 = 0.01;
/// Default time limit, virtual seconds: generous, a safety net against runs
/// that cannot finish (a link that loses everything).
pub const DEFAULT_TIME_LIMIT_S: f64 = 3600.0;

/// Why a scenario could not be loaded or run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScenarioError {
    /// The scenario file could not be read.
    #[error("cannot read scenario {}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said (part of the message, so not a `source`).
        error: std::io::Error,
    },
    /// The scenario file is not valid TOML or has unknown or ill-typed keys.
    #[error("malformed scenario {origin}: {message}")]
    Toml {
        /// The file (or `<string>`).
        origin: String,
        /// The parser's message, with line and column.
        message: String,
    },
    /// A trace or loss-pattern file is missing or malformed. The message
    /// already names the file, line and OS error, so it has no `source`
    /// (an error chain would print the OS error twice).
    #[error("{0}")]
    Trace(TraceError),
    /// A link parameter is out of range.
    #[error("invalid link: {0}")]
    Link(String),
    /// The recovery scheme name is unknown.
    #[error("{0}")]
    Scheme(String),
    /// Another parameter is out of range.
    #[error("invalid scenario: {0}")]
    Invalid(String),
    /// TLS or connection setup failed.
    #[error("setup failed: {0}")]
    Setup(String),
    /// A received byte differs from the file sent: the transport corrupted
    /// data. Never expected; always a bug.
    #[error("data corruption: {0}")]
    Data(String),
    /// The transfer did not complete.
    #[error("run incomplete at {at_ms:.0} ms (virtual): {reason}; {files_done} of {files} files, {bytes_received} bytes received")]
    Incomplete {
        /// What stopped it.
        reason: String,
        /// Virtual time when it stopped, ms.
        at_ms: f64,
        /// Files completed.
        files_done: u64,
        /// Files in the workload.
        files: u64,
        /// Payload bytes received.
        bytes_received: u64,
    },
}

impl From<TraceError> for ScenarioError {
    fn from(e: TraceError) -> Self {
        ScenarioError::Trace(e)
    }
}

/// Loss process of a [`LinkSpec`] (the CLI's `--loss-model`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    /// Independent losses with probability `loss`.
    #[default]
    Bernoulli,
    /// Gilbert-Elliott bursts: mean rate `loss`, mean burst length `burst`.
    Gilbert,
    /// Bernoulli with the rate redrawn from N(`loss`, `loss_std`) every
    /// `loss_interval` ms (ART journal Fig. 15).
    Varying,
}

/// Per-direction overrides of a [`LinkSpec`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirSpec {
    /// Rate of this direction, Mbit/s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bw: Option<f64>,
    /// Mahimahi trace of this direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<PathBuf>,
    /// Loss probability of this direction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
}

/// The emulated path, in the command line's terms (DESIGN.md link options):
/// both directions alike unless `up` (client to server) or `down` (server to
/// client) override a value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LinkSpec {
    /// Bottleneck rate, Mbit/s; `None` (only from code) is unlimited.
    pub bw: Option<f64>,
    /// Mahimahi trace for both directions (takes precedence over `bw`).
    pub trace: Option<PathBuf>,
    /// Round-trip propagation delay, ms, split evenly over both directions.
    pub rtt: f64,
    /// Random loss probability, 0..1; `None` or 0 is no loss.
    pub loss: Option<f64>,
    /// Loss process.
    pub loss_model: LossKind,
    /// Mean burst length in packets (gilbert).
    pub burst: f64,
    /// Gilbert-Elliott idle reset, ms: a packet arriving this long after the
    /// previous one redraws the chain's state from its stationary
    /// distribution, so a burst cannot outlast a silence (gilbert; `None`:
    /// the plain per-packet chain). See `netem::LossModel::GilbertElliott`.
    pub burst_reset: Option<f64>,
    /// Standard deviation of the loss rate (varying).
    pub loss_std: f64,
    /// Interval between loss-rate draws, ms (varying).
    pub loss_interval: f64,
    /// A recorded loss pattern (one 0/1 per line, 1 = drop) replayed on the
    /// server-to-client direction instead of a random model.
    pub loss_pattern: Option<PathBuf>,
    /// Drop-tail queue limit in packets (default unlimited).
    pub queue: Option<u64>,
    /// Drop-tail queue limit in bytes (instead of `queue`).
    pub queue_bytes: Option<u64>,
    /// Client-to-server overrides.
    pub up: DirSpec,
    /// Server-to-client overrides.
    pub down: DirSpec,
}

impl Default for LinkSpec {
    /// 100 Mbit/s, 30 ms RTT, 1% Bernoulli loss both ways, unlimited queue:
    /// the default `artq sim` path.
    fn default() -> Self {
        LinkSpec {
            bw: Some(DEFAULT_BW_MBPS),
            trace: None,
            rtt: DEFAULT_RTT_MS,
            loss: Some(DEFAULT_LOSS),
            loss_model: LossKind::Bernoulli,
            burst: 3.0,
            burst_reset: None,
            loss_std: 0.01,
            loss_interval: 1000.0,
            loss_pattern: None,
            queue: None,
            queue_bytes: None,
            up: DirSpec::default(),
            down: DirSpec::default(),
        }
    }
}

impl LinkSpec {
    /// The (client-to-server, server-to-client) link configurations. Trace
    /// and pattern files are read here; errors name the file and line.
    pub fn configs(&self) -> Result<(LinkConfig, LinkConfig), ScenarioError> {
        let delay = self.one_way_delay()?;
        let queue = match (self.queue, self.queue_bytes) {
            (Some(_), Some(_)) => {
                return Err(ScenarioError::Link(
                    "give queue or queue_bytes, not both".into(),
                ))
            }
            (Some(p), None) => QueueLimit::Packets(p),
            (None, Some(b)) => QueueLimit::Bytes(b),
            (None, None) => QueueLimit::Unlimited,
        };
        let up = LinkConfig {
            capacity: self.capacity(&self.up)?,
            delay,
            queue,
            loss: self.loss(self.up.loss, false)?,
        };
        let down = LinkConfig {
            capacity: self.capacity(&self.down)?,
            delay,
            queue,
            loss: self.loss(self.down.loss, true)?,
        };
        up.validate()
            .map_err(|e| ScenarioError::Link(format!("client-to-server: {e}")))?;
        down.validate()
            .map_err(|e| ScenarioError::Link(format!("server-to-client: {e}")))?;
        Ok((up, down))
    }

    fn capacity(&self, dir: &DirSpec) -> Result<Capacity, ScenarioError> {
        if let Some(path) = dir.trace.as_ref().or(self.trace.as_ref()) {
            return Ok(Capacity::Trace(Arc::new(Trace::from_file(path)?)));
        }
        match dir.bw.or(self.bw) {
            None => Ok(Capacity::Unlimited),
            Some(mbps) if mbps.is_finite() && mbps > 0.0 && mbps <= 1e6 => Ok(Capacity::Constant {
                bits_per_sec: (mbps * 1e6).round() as u64,
            }),
            Some(mbps) => Err(ScenarioError::Link(format!(
                "bandwidth {mbps} Mbit/s is out of range (0 < bw <= 1e6)"
            ))),
        }
    }

    fn loss(&self, p: Option<f64>, replay: bool) -> Result<LossModel, ScenarioError> {
        if replay {
            if let Some(path) = &self.loss_pattern {
                return Ok(LossModel::replay_from_file(path)?);
            }
        }
        let Some(p) = p.or(self.loss) else {
            return Ok(LossModel::None);
        };
        if !(0.0..=1.0).contains(&p) {
            return Err(ScenarioError::Link(format!(
                "loss probability {p} is not in 0..1"
            )));
        }
        let model = match self.loss_model {
            LossKind::Bernoulli => LossModel::Bernoulli { p },
            LossKind::Gilbert => {
                if p >= 1.0 {
                    return Err(ScenarioError::Link(
                        "gilbert loss needs a loss rate below 1".into(),
                    ));
                }
                let reset = match self.burst_reset {
                    None => None,
                    Some(ms) if ms.is_finite() && ms > 0.0 && ms <= 3.6e6 => {
                        Some(Duration::from_secs_f64(ms / 1e3))
                    }
                    Some(ms) => {
                        return Err(ScenarioError::Link(format!(
                        "burst_reset must be a positive number of ms (at most one hour), got {ms}"
                    )))
                    }
                };
                LossModel::gilbert_from_mean(p, self.burst).with_idle_reset(reset)
            }
            LossKind::Varying => {
                if !(self.loss_interval.is_finite() && self.loss_interval > 0.0) {
                    return Err(ScenarioError::Link(
                        "loss_interval must be a positive number of ms".into(),
                    ));
                }
                LossModel::Varying {
                    mean: p,
                    std_dev: self.loss_std,
                    interval: Duration::from_secs_f64(self.loss_interval / 1e3),
                }
            }
        };
        model
            .validate()
            .map_err(|e| ScenarioError::Link(format!("invalid loss model: {e}")))?;
        Ok(model)
    }

    fn one_way_delay(&self) -> Result<Duration, ScenarioError> {
        if !(self.rtt.is_finite() && self.rtt >= 0.0 && self.rtt <= 1e7) {
            return Err(ScenarioError::Link(format!(
                "rtt {} ms is out of range",
                self.rtt
            )));
        }
        Ok(Duration::from_secs_f64(self.rtt / 2e3))
    }

    /// Makes relative file paths relative to `dir` (the scenario file's).
    fn resolve_paths(&mut self, dir: &Path) {
        let fix = |p: &mut Option<PathBuf>| {
            if let Some(path) = p.as_mut().filter(|p| p.is_relative()) {
                *path = dir.join(&*path);
            }
        };
        fix(&mut self.trace);
        fix(&mut self.loss_pattern);
        fix(&mut self.up.trace);
        fix(&mut self.down.trace);
    }
}

/// One simulated run: a client fetching a workload from a server over an
/// emulated path, the server using one recovery scheme.
///
/// Exists as plain, serialisable data so a run can be stored, shared and
/// repeated bit for bit. Missing TOML keys take the defaults of `artq sim`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Scenario {
    /// Recovery scheme of the sender (DESIGN.md names: `quic`, `art`, ...).
    pub scheme: String,
    /// Congestion controller of both ends.
    pub cc: CongestionAlgorithm,
    /// Master seed: every random component's seed derives from it.
    pub seed: u64,
    /// The client's receive window (flow-control credit, its receive
    /// buffer) in bytes; `None` keeps the transport's default (16 MiB).
    #[serde(
        deserialize_with = "deserialize_opt_size",
        skip_serializing_if = "Option::is_none"
    )]
    pub recv_window: Option<u64>,
    /// Virtual seconds after which an unfinished run is abandoned.
    pub time_limit: f64,
    /// What the client fetches.
    pub workload: Workload,
    /// The emulated path.
    pub link: LinkSpec,
}

impl Default for Scenario {
    /// 10 MB over 100 Mbit/s, 30 ms RTT, 1% loss, scheme `quic`, Cubic,
    /// seed 1: the default `artq sim` run.
    fn default() -> Self {
        Scenario {
            scheme: "quic".into(),
            cc: CongestionAlgorithm::default(),
            seed: 1,
            recv_window: None,
            time_limit: DEFAULT_TIME_LIMIT_S,
            workload: Workload::default(),
            link: LinkSpec::default(),
        }
    }
}

impl Scenario {
    /// Parses a TOML scenario; `origin` names it in errors. Relative paths
    /// stay relative to the working directory.
    pub fn from_toml_str(text: &str, origin: &str) -> Result<Scenario, ScenarioError> {
        toml::from_str(text).map_err(|e| ScenarioError::Toml {
            origin: origin.to_string(),
            message: e.to_string().trim_end().to_string(),
        })
    }

    /// Loads a TOML scenario file. Relative trace and loss-pattern paths are
    /// taken relative to the file's directory.
    pub fn from_toml_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|error| ScenarioError::Io {
            path: path.to_path_buf(),
            error,
        })?;
        let mut s = Scenario::from_toml_str(&text, &path.display().to_string())?;
        if let Some(dir) = path.parent() {
            s.link.resolve_paths(dir);
        }
        Ok(s)
    }

    /// The scenario as TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_else(|e| format!("# cannot serialise the scenario: {e}\n"))
    }

    /// Checks everything but the link (which [`LinkSpec::configs`] checks)
    /// and the scheme (which the registry checks).
    pub fn validate(&self) -> Result<(), ScenarioError> {
        self.workload.validate().map_err(ScenarioError::Invalid)?;
        if let Some(w) = self.recv_window {
            if w < 1200 {
                return Err(ScenarioError::Invalid(format!(
                    "recv_window {w} is below the 1200 bytes of one packet"
                )));
            }
        }
        if !(self.time_limit.is_finite() && self.time_limit > 0.0 && self.time_limit <= 1e9) {
            return Err(ScenarioError::Invalid(format!(
                "time_limit {} s must be a positive number of seconds (at most 1e9)",
                self.time_limit
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_toml_is_the_default_run() {
        let s = Scenario::from_toml_str("", "<test>").expect("parses");
        assert_eq!(s, Scenario::default());
        let (up, down) = s.link.configs().expect("valid");
        assert_eq!(
            up.capacity,
            Capacity::Constant {
                bits_per_sec: 100_000_000
            }
        );
        assert_eq!(down.delay, Duration::from_millis(15));
        assert_eq!(down.loss, LossModel::Bernoulli { p: 0.01 });
        assert_eq!(up.queue, QueueLimit::Unlimited);
    }

    #[test]
    fn toml_round_trips_and_reads_overrides() {
        let text = r#"
            scheme = "quic"
            cc = "bbr"
            seed = 7
            recv_window = "1MiB"
            [workload]
            files = 3
            size = "200KB"
            [link]
            bw = 20
            rtt = 40
            loss = 0.02
            loss_model = "gilbert"
            burst = 4
            burst_reset = 100
            queue = 50
            [link.up]
            loss = 0
        "#;
        let s = Scenario::from_toml_str(text, "<test>").expect("parses");
        assert_eq!(s.cc, CongestionAlgorithm::Bbr);
        assert_eq!(s.recv_window, Some(1 << 20));
        assert_eq!(s.workload, Workload::files(3, 200_000));
        let (up, down) = s.link.configs().expect("valid");
        let reset = Some(Duration::from_millis(100));
        assert_eq!(
            up.loss,
            LossModel::gilbert_from_mean(0.0, 4.0).with_idle_reset(reset)
        );
        assert_eq!(
            down.loss,
            LossModel::gilbert_from_mean(0.02, 4.0).with_idle_reset(reset)
        );
        assert_eq!(down.queue, QueueLimit::Packets(50));
        let again = Scenario::from_toml_str(&s.to_toml(), "<again>").expect("round trip");
        assert_eq!(again, s);
    }

    #[test]
    fn bad_scenarios_are_errors_with_a_message() {
        let err = Scenario::from_toml_str("sceme = \"quic\"", "x.toml").unwrap_err();
        assert!(
            err.to_string().contains("x.toml") && err.to_string().contains("sceme"),
            "{err}"
        );
        assert!(Scenario::from_toml_str("seed = \"one\"", "x").is_err());
        assert!(Scenario::from_toml_str("[link]\nrtt = ", "x").is_err());
        let mut s = Scenario::default();
        s.link.loss = Some(1.5);
        assert!(matches!(s.link.configs(), Err(ScenarioError::Link(_))));
        s.link.loss = Some(0.1);
        s.link.loss_model = LossKind::Gilbert;
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            s.link.burst_reset = Some(bad);
            let err = s.link.configs().unwrap_err();
            assert!(err.to_string().contains("burst_reset"), "{err}");
        }
        s.link.burst_reset = None;
        s.link.loss_model = LossKind::Bernoulli;
        s.link.bw = Some(-1.0);
        assert!(matches!(s.link.configs(), Err(ScenarioError::Link(_))));
        s.link.bw = Some(10.0);
        s.link.trace = Some(PathBuf::from("/nonexistent/trace"));
        let err = s.link.configs().unwrap_err();
        assert!(err.to_string().contains("/nonexistent/trace"), "{err}");
        let s = Scenario {
            recv_window: Some(10),
            ..Scenario::default()
        };
        assert!(s.validate().is_err());
        let s = Scenario {
            time_limit: f64::NAN,
            ..Scenario::default()
        };
        assert!(s.validate().is_err());
        let missing = Scenario::from_toml_file(Path::new("/nonexistent/s.toml")).unwrap_err();
        assert!(matches!(missing, ScenarioError::Io { .. }), "{missing}");
    }

    #[test]
    fn relative_paths_follow_the_scenario_file() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("t.trace"), "1\n2\n").expect("write trace");
        let file = dir.path().join("s.toml");
        std::fs::write(&file, "[link]\ntrace = \"t.trace\"\n").expect("write scenario");
        let s = Scenario::from_toml_file(&file).expect("loads");
        assert_eq!(s.link.trace, Some(dir.path().join("t.trace")));
        let (up, _) = s.link.configs().expect("trace loads");
        assert!(matches!(up.capacity, Capacity::Trace(_)));
    }
}
