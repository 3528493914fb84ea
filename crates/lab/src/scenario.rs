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
//! alpn = "hq-interop"     # the client's protocol: hq-interop | h3
//!
//! [workload]               # see apps::workload for every kind and its keys
//! kind = "files"           # the default
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
//!
//! [[flows]]                # extra flows sharing the link (a dumbbell), each
//! scheme = "udp"           # with its own scheme, cc and workload; repeat the
//! cc = "none"              # table for more. Their metrics are reported apart.
//! [flows.workload]
//! kind = "messages"
//! messages = 10000
//! ```

use std::path::{Path, PathBuf};

use apps::size::deserialize_opt_size;
use apps::workload::Workload;
use apps::Protocol;
use netem::{LinkSpec, SpecError, TraceError};
use serde::{Deserialize, Serialize};
use transport::congestion::CongestionAlgorithm;

/// Default time limit, virtual seconds: generous, a safety net against runs
/// that cannot finish (a link that loses everything).
pub const DEFAULT_TIME_LIMIT_S: f64 = 3600.0;

/// Largest scenario file read, bytes (1 MiB: a scenario is a few hundred
/// bytes). A larger file, or one without an end (`/dev/zero`), is refused
/// after this many bytes, saying so.
pub const MAX_SCENARIO_BYTES: u64 = 1 << 20;

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

impl From<SpecError> for ScenarioError {
    fn from(e: SpecError) -> Self {
        match e {
            SpecError::Trace(t) => ScenarioError::Trace(t),
            SpecError::Link(m) => ScenarioError::Link(m),
        }
    }
}

fn is_hq_interop(p: &Protocol) -> bool {
    *p == Protocol::HqInterop
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
    /// Congestion controller of both ends, unless the scheme sets its own
    /// (RCP's message schemes: `recovery::Scheme::congestion`).
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
    /// Both ends use ECN (RFC 9000 §13.4): they mark ECT(0) and react to
    /// CE, which a link marks with `ecn_mark`. Default off.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub ecn: bool,
    /// How often every client (the data's receiver) acknowledges: after
    /// this many ack-eliciting packets (RFC 9000 §13.2.2); `None` keeps the
    /// transport's 2. With `max_ack_delay = 0`, 1 acknowledges every
    /// packet the moment it arrives, as the RCP authors' receiver does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ack_threshold: Option<u32>,
    /// Every client's max_ack_delay, ms (how long it may hold an ACK, and
    /// the transport parameter it announces); `None` keeps the transport's
    /// 25 ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_ack_delay: Option<f64>,
    /// Virtual seconds after which an unfinished run is abandoned.
    pub time_limit: f64,
    /// The application protocol the client speaks (the server speaks all
    /// of artq's). Default hq-interop, the protocol the papers' runs used.
    #[serde(skip_serializing_if = "is_hq_interop")]
    pub alpn: Protocol,
    /// What the client fetches.
    pub workload: Workload,
    /// The emulated path.
    pub link: LinkSpec,
    /// Extra flows over the same links, competing with the scenario's own
    /// (which is the measured one): N senders sharing one bottleneck.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<FlowSpec>,
}

/// Largest [`Scenario::ack_threshold`]: an ACK at least every 1000
/// ack-eliciting packets (beyond it the sender's loss detection would wait
/// on the delay timer alone).
pub const MAX_ACK_THRESHOLD: u32 = 1000;

/// [`Scenario::max_ack_delay`] must be below this many ms: RFC 9000 §18.2
/// makes 2^14 ms and above invalid.
pub const MAX_ACK_DELAY_MS: f64 = 16384.0;

/// Most extra flows a scenario may have.
pub const MAX_FLOWS: usize = 1000;

/// One extra flow of a [`Scenario`]: a client and a server of their own,
/// over the scenario's links.
///
/// Exists so that a scenario can put several senders, each with its own
/// scheme and workload, behind one bottleneck (RCP's dumbbell, rcp.md
/// Table I) without a special topology.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowSpec {
    /// The flow's recovery scheme.
    #[serde(default = "default_scheme")]
    pub scheme: String,
    /// The flow's congestion controller, unless its scheme sets its own
    /// (as for [`Scenario::cc`]).
    #[serde(default)]
    pub cc: CongestionAlgorithm,
    /// What the flow's client fetches.
    pub workload: Workload,
}

fn default_scheme() -> String {
    "quic".into()
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
            ecn: false,
            ack_threshold: None,
            max_ack_delay: None,
            time_limit: DEFAULT_TIME_LIMIT_S,
            alpn: Protocol::HqInterop,
            workload: Workload::default(),
            link: LinkSpec::default(),
            flows: Vec::new(),
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

    /// Loads a TOML scenario file (at most [`MAX_SCENARIO_BYTES`]). Relative
    /// trace and loss-pattern paths are taken relative to the file's
    /// directory; the files they name are read with their own limits when
    /// the links are built.
    pub fn from_toml_file(path: &Path) -> Result<Scenario, ScenarioError> {
        let io = |error| ScenarioError::Io {
            path: path.to_path_buf(),
            error,
        };
        let text = netem::read_capped_text(path, MAX_SCENARIO_BYTES, "scenario").map_err(io)?;
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
        if self.flows.len() > MAX_FLOWS {
            return Err(ScenarioError::Invalid(format!(
                "{} extra flows is more than {MAX_FLOWS}",
                self.flows.len()
            )));
        }
        for (i, f) in self.flows.iter().enumerate() {
            f.workload
                .validate()
                .map_err(|e| ScenarioError::Invalid(format!("flow {}: {e}", i + 1)))?;
        }
        if let Some(w) = self.recv_window {
            if w < 1200 {
                return Err(ScenarioError::Invalid(format!(
                    "recv_window {w} is below the 1200 bytes of one packet"
                )));
            }
        }
        if let Some(n) = self.ack_threshold {
            if !(1..=MAX_ACK_THRESHOLD).contains(&n) {
                return Err(ScenarioError::Invalid(format!(
                    "ack_threshold {n} must be 1 to {MAX_ACK_THRESHOLD} packets"
                )));
            }
        }
        if let Some(ms) = self.max_ack_delay {
            if !(ms.is_finite() && (0.0..MAX_ACK_DELAY_MS).contains(&ms)) {
                return Err(ScenarioError::Invalid(format!(
                    "max_ack_delay {ms} ms must be at least 0 and below {MAX_ACK_DELAY_MS} \
                     (2^14 ms, RFC 9000 §18.2)"
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
    use netem::{Capacity, LossModel, QueueLimit};
    use wire::time::Duration;

    /// (The link's own rules are `netem::spec`'s tests.)
    #[test]
    fn empty_toml_is_the_default_run() {
        let s = Scenario::from_toml_str("", "<test>").expect("parses");
        assert_eq!(s, Scenario::default());
        assert_eq!(s.link, LinkSpec::default());
        assert_eq!(s.alpn, Protocol::HqInterop);
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
    fn burst_reset_defaults_to_100_ms_and_none_keeps_the_plain_chain() {
        let gilbert = "[link]\nloss = 0.05\nloss_model = \"gilbert\"\nburst = 10\n";
        let s = Scenario::from_toml_str(gilbert, "<test>").expect("parses");
        assert_eq!(s.link.burst_reset, netem::BurstReset::AfterMs(100.0));
        let (_, down) = s.link.configs().expect("valid");
        let chain = LossModel::gilbert_from_mean(0.05, 10.0);
        assert_eq!(
            down.loss,
            chain
                .clone()
                .with_idle_reset(Some(Duration::from_millis(100)))
        );
        let plain = format!("{gilbert}burst_reset = \"none\"\n");
        let s = Scenario::from_toml_str(&plain, "<test>").expect("parses");
        assert_eq!(s.link.burst_reset, netem::BurstReset::None);
        assert_eq!(s.link.configs().expect("valid").1.loss, chain);
        let again = Scenario::from_toml_str(&s.to_toml(), "<again>").expect("round trip");
        assert_eq!(again, s);
        let odd = format!("{gilbert}burst_reset = 12.5\n");
        let s = Scenario::from_toml_str(&odd, "<test>").expect("parses");
        assert_eq!(s.link.burst_reset, netem::BurstReset::AfterMs(12.5));
        let bad = format!("{gilbert}burst_reset = \"never\"\n");
        let err = Scenario::from_toml_str(&bad, "x.toml").expect_err("not a reset");
        assert!(err.to_string().contains("none"), "{err}");
    }

    #[test]
    fn the_rcp_authors_channel_reads_from_toml_and_bad_values_say_which() {
        let text = "[link]\nslot_rate = 3\nsojourn = 100\nrtt = 0\nqueue = 300\nloss = 0\n\
                    [link.down]\nloss = 0.1\n[link.up]\ninstant = true\n";
        let s = Scenario::from_toml_str(text, "<test>").expect("parses");
        let (up, down) = s.link.configs().expect("valid");
        assert_eq!(up, netem::LinkConfig::ideal());
        assert!(matches!(
            down.capacity,
            Capacity::Slotted(netem::Slotted { per_slot: 3, .. })
        ));
        let again = Scenario::from_toml_str(&s.to_toml(), "<again>").expect("round trip");
        assert_eq!(again, s);
        for (bad, words) in [
            ("[link]\nslot_rate = 0\n", "slot_rate 0"),
            ("[link]\nsojourn = 100\n", "give slot_rate"),
            ("[link]\nslot_rate = 3\nslot = -1\n", "slot -1"),
            (
                "[link]\nslot_rate = 3\nslot_rate_change = \"5000:0\"\n",
                "5000:0",
            ),
            (
                "[link.up]\ninstant = true\nloss = 0.1\n",
                "excludes up.loss",
            ),
        ] {
            let err = Scenario::from_toml_str(bad, "x.toml")
                .map_err(|e| e.to_string())
                .and_then(|s| s.link.configs().map(|_| ()).map_err(|e| e.to_string()))
                .expect_err(bad);
            assert!(err.contains(words), "{bad}: {err}");
        }
        assert!(Scenario::from_toml_str("[link]\nslot_rate = -3\n", "x").is_err());
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
        assert!(Scenario::from_toml_str("alpn = \"h2\"", "x").is_err());
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
    fn endless_scenario_files_and_traces_fail_fast_saying_why() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            if !Path::new(dev).exists() {
                continue;
            }
            let e = Scenario::from_toml_file(Path::new(dev)).expect_err("no end");
            assert!(matches!(e, ScenarioError::Io { .. }), "{e:?}");
            assert!(e.to_string().contains("1 MiB"), "{e}");
        }
        // A scenario naming an endless trace: refused when the links are built.
        let dir = tempfile::tempdir().expect("temp dir");
        let file = dir.path().join("s.toml");
        std::fs::write(&file, "[link]\ntrace = \"/dev/zero\"\n").expect("write scenario");
        let s = Scenario::from_toml_file(&file).expect("the scenario itself is fine");
        let e = ScenarioError::from(s.link.configs().expect_err("endless trace"));
        assert!(
            e.to_string().starts_with("/dev/zero: ") && e.to_string().contains("64 MiB"),
            "{e}"
        );
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
