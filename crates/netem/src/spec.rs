//! [`LinkSpec`]: the emulated path as users describe it, the one link
//! description of the workspace.
//!
//! `artq link` and `artq sim` take it as flags (with the `cli` feature it is
//! a `clap::Args`), scenario files as a `[link]` table, and experiments build
//! it in code; [`LinkSpec::configs`] turns it into the two [`LinkConfig`]s the
//! simulator and the relay run. Both directions are alike unless `up`
//! (client to server, flags `--up-*`, table `[link.up]`) or `down` (server
//! to client, `--down-*`, `[link.down]`) override a value.
//!
//! Defaults: [`LinkSpec::default`] is `artq sim`'s path (100 Mbit/s, 30 ms,
//! 1% loss); the flags' own defaults are the identity link (no rate limit,
//! no delay, no loss), which `artq sim` overrides with its defaults.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wire::time::Duration;

use crate::faults::{Blackholes, Corruption, DropList};
use crate::link::{Capacity, LinkConfig, QueueLimit, RateSchedule, SlotRates, Slotted};
use crate::loss::LossModel;
use crate::trace::{Trace, TraceError};

/// Default bottleneck rate of [`LinkSpec::default`], Mbit/s.
pub const DEFAULT_BW_MBPS: f64 = 100.0;
/// Default round-trip propagation delay of [`LinkSpec::default`], ms.
pub const DEFAULT_RTT_MS: f64 = 30.0;
/// Default random loss probability of [`LinkSpec::default`].
pub const DEFAULT_LOSS: f64 = 0.01;
/// Default mean Gilbert-Elliott burst length, packets.
pub const DEFAULT_BURST: f64 = 3.0;
/// Default Gilbert-Elliott idle reset, ms: a silence this long ends a burst
/// (see [`BurstReset`]).
pub const DEFAULT_BURST_RESET_MS: f64 = 100.0;
/// Longest idle reset accepted, ms (one hour).
const MAX_BURST_RESET_MS: f64 = 3.6e6;
/// Default standard deviation of the varying loss rate.
pub const DEFAULT_LOSS_STD: f64 = 0.01;
/// Default interval between varying loss-rate draws, ms.
pub const DEFAULT_LOSS_INTERVAL_MS: f64 = 1000.0;
/// Default slot of a slotted link (`--slot`), ms: the slot RCP's
/// experiments map the paper's slots to.
pub const DEFAULT_SLOT_MS: f64 = 1.0;
/// Longest slot, sojourn or one-way delay accepted, ms (about 2.8 hours).
const MAX_MS: f64 = 1e7;

fn is_default_slot(ms: &f64) -> bool {
    *ms == DEFAULT_SLOT_MS
}

fn is_zero(ms: &f64) -> bool {
    *ms == 0.0
}

/// Why a [`LinkSpec`] cannot become links.
#[derive(Debug, thiserror::Error)]
pub enum SpecError {
    /// A trace or loss-pattern file is missing or malformed. The message
    /// names the file, line and OS error.
    #[error("{0}")]
    Trace(TraceError),
    /// A parameter is out of range.
    #[error("invalid link: {0}")]
    Link(String),
}

impl From<TraceError> for SpecError {
    fn from(e: TraceError) -> Self {
        SpecError::Trace(e)
    }
}

/// Random loss process of a [`LinkSpec`] (`--loss-model`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    /// Independent losses with probability --loss (like mm-loss).
    #[default]
    Bernoulli,
    /// Gilbert-Elliott bursts: mean rate --loss, mean burst length --burst.
    Gilbert,
    /// Bernoulli with the rate redrawn from N(--loss, --loss-std) every
    /// --loss-interval ms (ART journal Fig. 15).
    Varying,
}

/// The Gilbert-Elliott idle reset as users give it: `--burst-reset MS` or
/// `--burst-reset none`, TOML `burst_reset = 100` or `burst_reset = "none"`.
///
/// Exists because the plain per-packet Gilbert-Elliott chain stands for no
/// real path: its state only moves when a packet arrives, so a burst that
/// starts at a transfer's tail survives any silence and swallows every
/// backed-off PTO probe until the idle timeout (6 of 7 downloads through
/// `artq link --loss-model gilbert --burst 10` died that way). Real bursts
/// (a queue overflowing, a fade) are stretches of time, so by default a
/// packet arriving [`DEFAULT_BURST_RESET_MS`] or more after the previous one
/// redraws the chain's state from its stationary distribution. `None` keeps
/// the plain chain, for comparison with papers that use it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BurstReset {
    /// A packet arriving at least this many ms after the previous one
    /// redraws the chain's state (positive, at most one hour).
    AfterMs(f64),
    /// The plain per-packet chain: bursts outlast any silence.
    None,
}

impl Default for BurstReset {
    /// [`DEFAULT_BURST_RESET_MS`].
    fn default() -> Self {
        BurstReset::AfterMs(DEFAULT_BURST_RESET_MS)
    }
}

impl BurstReset {
    /// The reset gap the loss model takes; `Err` names the bad value.
    fn gap(self) -> Result<Option<Duration>, SpecError> {
        match self {
            BurstReset::None => Ok(None),
            BurstReset::AfterMs(ms) if ms.is_finite() && ms > 0.0 && ms <= MAX_BURST_RESET_MS => {
                Ok(Some(Duration::from_secs_f64(ms / 1e3)))
            }
            BurstReset::AfterMs(ms) => Err(SpecError::Link(format!(
                "burst_reset must be a positive number of ms (at most one hour) or \"none\", got {ms}"
            ))),
        }
    }
}

impl std::fmt::Display for BurstReset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BurstReset::AfterMs(ms) => write!(f, "{ms}"),
            BurstReset::None => f.write_str("none"),
        }
    }
}

impl std::str::FromStr for BurstReset {
    type Err = String;

    /// `none` (any case) or a number of ms; the range is checked when the
    /// link is built, with the other parameters.
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("none") {
            return Ok(BurstReset::None);
        }
        s.parse::<f64>()
            .map(BurstReset::AfterMs)
            .map_err(|_| format!("expected a number of ms or \"none\", got {s:?}"))
    }
}

impl Serialize for BurstReset {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        match self {
            BurstReset::AfterMs(ms) => ser.serialize_f64(*ms),
            BurstReset::None => ser.serialize_str("none"),
        }
    }
}

impl<'de> Deserialize<'de> for BurstReset {
    fn deserialize<D: serde::Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        /// A number of ms, or the word `none`.
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Ms(f64),
            Word(String),
        }
        match Raw::deserialize(de)? {
            Raw::Ms(ms) => Ok(BurstReset::AfterMs(ms)),
            Raw::Word(w) => w.parse().map_err(serde::de::Error::custom),
        }
    }
}

/// Per-direction overrides: one struct per direction, so that each has its
/// own flag names (`--up-bw`, `--down-bw`) and TOML table.
macro_rules! direction {
    ($name:ident, $which:literal, $bw:literal, $bw_id:literal, $trace:literal, $trace_id:literal, $loss:literal, $loss_id:literal,
     $corrupt:literal, $corrupt_id:literal, $drop:literal, $drop_id:literal, $blackhole:literal, $blackhole_id:literal,
     $instant:literal, $instant_id:literal) => {
        #[doc = concat!("Overrides of the ", $which, " direction of a [`LinkSpec`].")]
        #[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
        #[cfg_attr(feature = "cli", derive(clap::Args))]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            #[doc = concat!("Rate of the ", $which, " direction, Mbit/s.")]
            #[cfg_attr(feature = "cli", arg(long = $bw, id = $bw_id, value_name = "MBPS"))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub bw: Option<f64>,
            #[doc = concat!("Mahimahi trace of the ", $which, " direction.")]
            #[cfg_attr(feature = "cli", arg(long = $trace, id = $trace_id, value_name = "FILE"))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub trace: Option<PathBuf>,
            #[doc = concat!("Loss probability of the ", $which, " direction.")]
            #[cfg_attr(feature = "cli", arg(long = $loss, id = $loss_id, value_name = "P"))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub loss: Option<f64>,
            #[doc = concat!("Corruption probability of the ", $which, " direction.")]
            #[cfg_attr(feature = "cli", arg(long = $corrupt, id = $corrupt_id, value_name = "P"))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub corrupt: Option<f64>,
            #[doc = concat!("Datagrams of the ", $which, " direction to drop by position (from 1).")]
            #[cfg_attr(feature = "cli", arg(long = $drop, id = $drop_id, value_name = "N[-M],..."))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub drop: Option<DropList>,
            #[doc = concat!("Blackhole windows of the ", $which, " direction, ms.")]
            #[cfg_attr(feature = "cli", arg(long = $blackhole, id = $blackhole_id, value_name = "FROM-TO,..."))]
            #[serde(default, skip_serializing_if = "Option::is_none")]
            pub blackhole: Option<Blackholes>,
            #[doc = concat!("The ", $which, " direction delivers every datagram the instant it is sent: no delay, rate limit, queue, loss or other fault, whatever the both-ways settings say. The return path of RCP's authors' simulator, whose acknowledgements reach the sender in the slot the data arrived (rcp.md Table I).")]
            #[cfg_attr(feature = "cli", arg(long = $instant, id = $instant_id))]
            #[serde(default, skip_serializing_if = "std::ops::Not::not")]
            pub instant: bool,
        }

        impl $name {
            fn overrides(&self) -> Overrides<'_> {
                Overrides {
                    bw: self.bw,
                    trace: self.trace.as_ref(),
                    loss: self.loss,
                    corrupt: self.corrupt,
                    drop: self.drop.as_ref(),
                    blackhole: self.blackhole.as_ref(),
                    instant: self.instant,
                }
            }

            fn trace_mut(&mut self) -> &mut Option<PathBuf> {
                &mut self.trace
            }
        }
    };
}

direction!(
    UpSpec,
    "client-to-server",
    "up-bw",
    "up_bw",
    "up-trace",
    "up_trace",
    "up-loss",
    "up_loss",
    "up-corrupt",
    "up_corrupt",
    "up-drop",
    "up_drop",
    "up-blackhole",
    "up_blackhole",
    "up-instant",
    "up_instant"
);
direction!(
    DownSpec,
    "server-to-client",
    "down-bw",
    "down_bw",
    "down-trace",
    "down_trace",
    "down-loss",
    "down_loss",
    "down-corrupt",
    "down_corrupt",
    "down-drop",
    "down_drop",
    "down-blackhole",
    "down_blackhole",
    "down-instant",
    "down_instant"
);

/// One direction's overrides, whichever struct they came from.
struct Overrides<'a> {
    bw: Option<f64>,
    trace: Option<&'a PathBuf>,
    loss: Option<f64>,
    corrupt: Option<f64>,
    drop: Option<&'a DropList>,
    blackhole: Option<&'a Blackholes>,
    instant: bool,
}

impl Overrides<'_> {
    /// The names of the overrides set besides `instant` (which excludes
    /// them).
    fn others_set(&self) -> Vec<&'static str> {
        [
            ("bw", self.bw.is_some()),
            ("trace", self.trace.is_some()),
            ("loss", self.loss.is_some()),
            ("corrupt", self.corrupt.is_some()),
            ("drop", self.drop.is_some()),
            ("blackhole", self.blackhole.is_some()),
        ]
        .into_iter()
        .filter_map(|(n, set)| set.then_some(n))
        .collect()
    }
}

/// The emulated path (DESIGN.md link options).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields, default)]
pub struct LinkSpec {
    /// Bottleneck rate in Mbit/s, both directions (none: unlimited).
    #[cfg_attr(feature = "cli", arg(long, value_name = "MBPS"))]
    pub bw: Option<f64>,
    /// Change --bw during the run: from MS ms since the start the link
    /// serves MBPS Mbit/s (`5000:3.84,9000:8`). Applies to each direction
    /// whose rate is --bw (not to an --up-bw/--down-bw override); needs
    /// --bw, not a trace.
    #[cfg_attr(feature = "cli", arg(long, value_name = "MS:MBPS,..."))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bw_change: Option<RateSchedule>,
    /// Mahimahi trace file for both directions (one 1500-byte delivery
    /// opportunity per line, in ms; loops); overrides --bw.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub trace: Option<PathBuf>,
    /// Round-trip propagation delay in ms, split evenly over both
    /// directions.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0, value_name = "MS"))]
    pub rtt: f64,
    /// Random loss probability 0..1, both directions (none: no loss).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    pub loss: Option<f64>,
    /// Loss model.
    #[cfg_attr(feature = "cli", arg(long, value_enum, default_value_t = LossKind::Bernoulli))]
    pub loss_model: LossKind,
    /// Mean burst length in packets (gilbert).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = DEFAULT_BURST, value_name = "PKTS"))]
    pub burst: f64,
    /// Gilbert-Elliott idle reset in ms (gilbert): a packet arriving this
    /// long after the previous one redraws the chain's state from its
    /// stationary distribution, so a burst cannot outlast a silence; `none`
    /// keeps the plain per-packet chain, whose bursts can swallow backed-off
    /// PTO probes until the idle timeout.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "MS|none", default_value_t = BurstReset::default())
    )]
    pub burst_reset: BurstReset,
    /// Standard deviation of the loss rate (varying).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = DEFAULT_LOSS_STD))]
    pub loss_std: f64,
    /// Interval between loss-rate draws in ms (varying).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = DEFAULT_LOSS_INTERVAL_MS, value_name = "MS"))]
    pub loss_interval: f64,
    /// Replay a recorded loss pattern (one 0/1 per line, 1 = drop) on the
    /// server-to-client direction instead of a random model.
    #[cfg_attr(feature = "cli", arg(long, value_name = "FILE"))]
    pub loss_pattern: Option<PathBuf>,
    /// Drop-tail queue limit in packets (default: unlimited).
    #[cfg_attr(feature = "cli", arg(long, value_name = "PKTS"))]
    pub queue: Option<u64>,
    /// Drop-tail queue limit in bytes (instead of --queue).
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "BYTES", conflicts_with = "queue")
    )]
    pub queue_bytes: Option<u64>,
    /// Serve at most PKTS packets per slot, at slot boundaries, instead of
    /// a bit rate: the slotted delay line of RCP's authors (rcp.md Table
    /// I). Each packet stays at least --sojourn ms in the link, and --queue
    /// counts every packet in it. Overrides --bw (a direction's --up-bw /
    /// --down-bw still wins); not with --trace.
    #[cfg_attr(
        feature = "cli",
        arg(long, value_name = "PKTS", conflicts_with = "trace")
    )]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_rate: Option<u64>,
    /// Slot length in ms of --slot-rate.
    #[cfg_attr(feature = "cli", arg(long, default_value_t = DEFAULT_SLOT_MS, value_name = "MS"))]
    #[serde(skip_serializing_if = "is_default_slot")]
    pub slot: f64,
    /// Least time in ms a packet stays in a --slot-rate link, from arrival
    /// to departure (the authors' propagation delay, which overlaps the
    /// queueing instead of adding to it).
    #[cfg_attr(feature = "cli", arg(long, default_value_t = 0.0, value_name = "MS"))]
    #[serde(skip_serializing_if = "is_zero")]
    pub sojourn: f64,
    /// Change --slot-rate during the run: from MS ms since the start the
    /// link serves PKTS packets per slot (`5000:3`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "MS:PKTS,..."))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slot_rate_change: Option<SlotRates>,
    /// At most this many datagrams in a row are lost to the loss model; the
    /// next one gets through (the interop runner's drop-rate burst limit).
    #[cfg_attr(feature = "cli", arg(long, value_name = "PKTS"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub loss_max_burst: Option<u64>,
    /// Probability 0..1 that a delivered datagram arrives damaged (one byte
    /// changed), both directions (none: no corruption).
    #[cfg_attr(feature = "cli", arg(long, value_name = "P"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt: Option<f64>,
    /// Damage only one of a datagram's first BYTES bytes (51: the interop
    /// runner's, aimed at the QUIC header; default: any byte).
    #[cfg_attr(feature = "cli", arg(long, value_name = "BYTES"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub corrupt_span: Option<u32>,
    /// Mark ECN-capable datagrams Congestion Experienced when at least PKTS
    /// wait in the queue, both directions (RFC 3168; default: never mark).
    /// Needs a queue limit: marking is how a full queue is avoided.
    #[cfg_attr(feature = "cli", arg(long, value_name = "PKTS"))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ecn_mark: Option<u64>,
    /// Drop these datagrams of each direction by position, counting from 1
    /// (`2-7,10`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "N[-M],..."))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drop: Option<DropList>,
    /// Drop everything, both directions, inside these windows of ms since
    /// the start (`1500-3500,8000-9000`).
    #[cfg_attr(feature = "cli", arg(long, value_name = "FROM-TO,..."))]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blackhole: Option<Blackholes>,
    /// Client-to-server overrides.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub up: UpSpec,
    /// Server-to-client overrides.
    #[cfg_attr(feature = "cli", command(flatten))]
    pub down: DownSpec,
}

impl Default for LinkSpec {
    /// 100 Mbit/s, 30 ms RTT, 1% Bernoulli loss both ways, unlimited queue:
    /// the default `artq sim` path.
    fn default() -> Self {
        LinkSpec {
            bw: Some(DEFAULT_BW_MBPS),
            bw_change: None,
            trace: None,
            rtt: DEFAULT_RTT_MS,
            loss: Some(DEFAULT_LOSS),
            loss_model: LossKind::Bernoulli,
            burst: DEFAULT_BURST,
            burst_reset: BurstReset::default(),
            loss_std: DEFAULT_LOSS_STD,
            loss_interval: DEFAULT_LOSS_INTERVAL_MS,
            loss_pattern: None,
            queue: None,
            queue_bytes: None,
            slot_rate: None,
            slot: DEFAULT_SLOT_MS,
            sojourn: 0.0,
            slot_rate_change: None,
            loss_max_burst: None,
            corrupt: None,
            corrupt_span: None,
            ecn_mark: None,
            drop: None,
            blackhole: None,
            up: UpSpec::default(),
            down: DownSpec::default(),
        }
    }
}

impl LinkSpec {
    /// The (client-to-server, server-to-client) link configurations. Trace
    /// and pattern files are read here; errors name the file and line.
    pub fn configs(&self) -> Result<(LinkConfig, LinkConfig), SpecError> {
        let delay = self.one_way_delay()?;
        let queue = match (self.queue, self.queue_bytes) {
            (Some(_), Some(_)) => {
                return Err(SpecError::Link(
                    "give queue or queue_bytes, not both".into(),
                ))
            }
            (Some(p), None) => QueueLimit::Packets(p),
            (None, Some(b)) => QueueLimit::Bytes(b),
            (None, None) => QueueLimit::Unlimited,
        };
        if self.ecn_mark == Some(0) {
            return Err(SpecError::Link("ecn_mark must be at least 1 packet".into()));
        }
        let (up, down) = (self.up.overrides(), self.down.overrides());
        for (name, dir) in [("up", &up), ("down", &down)] {
            let others = dir.others_set();
            if dir.instant && !others.is_empty() {
                return Err(SpecError::Link(format!(
                    "{name}.instant delivers at once: it excludes {name}.{}",
                    others.join(&format!(", {name}."))
                )));
            }
        }
        if up.instant && down.instant {
            return Err(SpecError::Link(
                "up.instant and down.instant together leave no link to emulate".into(),
            ));
        }
        if self.corrupt_span.is_some() && [self.corrupt, up.corrupt, down.corrupt] == [None; 3] {
            return Err(SpecError::Link(
                "corrupt_span needs a corruption probability (corrupt)".into(),
            ));
        }
        let up = LinkConfig {
            capacity: self.capacity(&up)?,
            delay,
            queue,
            loss: self.loss(up.loss, false)?,
            loss_max_burst: self.loss_max_burst,
            blackholes: up
                .blackhole
                .or(self.blackhole.as_ref())
                .cloned()
                .unwrap_or_default(),
            drop_list: up.drop.or(self.drop.as_ref()).cloned().unwrap_or_default(),
            corrupt: self.corruption(up.corrupt),
            ce_threshold: self.ecn_mark,
        };
        let down = LinkConfig {
            capacity: self.capacity(&down)?,
            delay,
            queue,
            loss: self.loss(down.loss, true)?,
            loss_max_burst: self.loss_max_burst,
            blackholes: down
                .blackhole
                .or(self.blackhole.as_ref())
                .cloned()
                .unwrap_or_default(),
            drop_list: down
                .drop
                .or(self.drop.as_ref())
                .cloned()
                .unwrap_or_default(),
            corrupt: self.corruption(down.corrupt),
            ce_threshold: self.ecn_mark,
        };
        up.validate()
            .map_err(|e| SpecError::Link(format!("client-to-server: {e}")))?;
        down.validate()
            .map_err(|e| SpecError::Link(format!("server-to-client: {e}")))?;
        let instant =
            |d: &Overrides<'_>, c: LinkConfig| if d.instant { LinkConfig::ideal() } else { c };
        Ok((
            instant(&self.up.overrides(), up),
            instant(&self.down.overrides(), down),
        ))
    }

    fn capacity(&self, dir: &Overrides<'_>) -> Result<Capacity, SpecError> {
        let changes = self.bw_change.as_ref().filter(|c| !c.is_empty());
        if changes.is_some() && (self.bw.is_none() || self.trace.is_some()) {
            return Err(SpecError::Link(
                "bw_change changes bw: give bw (a constant rate), not a trace".into(),
            ));
        }
        let slotted = self.slotted()?;
        if let (Some(s), None, None) = (slotted, dir.trace, dir.bw) {
            return Ok(Capacity::Slotted(s));
        }
        if let Some(path) = dir.trace.or(self.trace.as_ref()) {
            return Ok(Capacity::Trace(Arc::new(Trace::from_file(path)?)));
        }
        match dir.bw.or(self.bw) {
            None => Ok(Capacity::Unlimited),
            Some(mbps) if mbps.is_finite() && mbps > 0.0 && mbps <= 1e6 => {
                let bits_per_sec = (mbps * 1e6).round() as u64;
                // The schedule changes the both-ways rate, not an override.
                Ok(match changes.filter(|_| dir.bw.is_none()) {
                    Some(changes) => Capacity::Stepped {
                        bits_per_sec,
                        changes: changes.clone(),
                    },
                    None => Capacity::Constant { bits_per_sec },
                })
            }
            Some(mbps) => Err(SpecError::Link(format!(
                "bandwidth {mbps} Mbit/s is out of range (0 < bw <= 1e6)"
            ))),
        }
    }

    /// The slotted capacity of `slot_rate`, `slot`, `sojourn` and
    /// `slot_rate_change`; `None` without `slot_rate` (then the other three
    /// must keep their defaults).
    fn slotted(&self) -> Result<Option<Slotted>, SpecError> {
        let ms = |name: &str, v: f64, positive: bool| {
            let ok = v.is_finite() && v <= MAX_MS && if positive { v > 0.0 } else { v >= 0.0 };
            if ok {
                Ok(Duration::from_secs_f64(v / 1e3))
            } else {
                Err(SpecError::Link(format!(
                    "{name} {v} ms is out of range ({} to {MAX_MS} ms)",
                    if positive { "above 0" } else { "0" }
                )))
            }
        };
        let slot = ms("slot", self.slot, true)?;
        let sojourn = ms("sojourn", self.sojourn, false)?;
        let changes = self.slot_rate_change.clone().unwrap_or_default();
        let Some(per_slot) = self.slot_rate else {
            if self.slot != DEFAULT_SLOT_MS || self.sojourn != 0.0 || !changes.is_empty() {
                return Err(SpecError::Link(
                    "slot, sojourn and slot_rate_change describe a slotted link: give slot_rate"
                        .into(),
                ));
            }
            return Ok(None);
        };
        if self.trace.is_some() {
            return Err(SpecError::Link(
                "slot_rate and trace are two capacities: give one".into(),
            ));
        }
        if self.bw_change.as_ref().is_some_and(|c| !c.is_empty()) {
            return Err(SpecError::Link(
                "bw_change changes bw, not slot_rate: use slot_rate_change".into(),
            ));
        }
        let s = Slotted {
            slot,
            per_slot,
            sojourn,
            changes,
        };
        s.validate().map_err(SpecError::Link)?;
        Ok(Some(s))
    }

    fn loss(&self, p: Option<f64>, replay: bool) -> Result<LossModel, SpecError> {
        if replay {
            if let Some(path) = &self.loss_pattern {
                return Ok(LossModel::replay_from_file(path)?);
            }
        }
        let Some(p) = p.or(self.loss) else {
            return Ok(LossModel::None);
        };
        if !(0.0..=1.0).contains(&p) {
            return Err(SpecError::Link(format!(
                "loss probability {p} is not in 0..1"
            )));
        }
        let model = match self.loss_model {
            LossKind::Bernoulli => LossModel::Bernoulli { p },
            LossKind::Gilbert => {
                if p >= 1.0 {
                    return Err(SpecError::Link(
                        "gilbert loss needs a loss rate below 1".into(),
                    ));
                }
                let reset = self.burst_reset.gap()?;
                LossModel::gilbert_from_mean(p, self.burst).with_idle_reset(reset)
            }
            LossKind::Varying => {
                if !(self.loss_interval.is_finite()
                    && self.loss_interval > 0.0
                    && self.loss_interval <= MAX_MS)
                {
                    return Err(SpecError::Link(format!(
                        "loss_interval must be a positive number of ms (at most {MAX_MS}), got {}",
                        self.loss_interval
                    )));
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
            .map_err(|e| SpecError::Link(format!("invalid loss model: {e}")))?;
        Ok(model)
    }

    /// One direction's corruption: its override, else the both-ways value,
    /// with the span ([`LinkConfig::validate`] checks the values).
    fn corruption(&self, p: Option<f64>) -> Option<Corruption> {
        p.or(self.corrupt).map(|probability| Corruption {
            probability,
            span: self.corrupt_span,
        })
    }

    fn one_way_delay(&self) -> Result<Duration, SpecError> {
        if !(self.rtt.is_finite() && self.rtt >= 0.0 && self.rtt <= 1e7) {
            return Err(SpecError::Link(format!(
                "rtt {} ms is out of range",
                self.rtt
            )));
        }
        Ok(Duration::from_secs_f64(self.rtt / 2e3))
    }

    /// Makes relative file paths relative to `dir` (a scenario file's).
    pub fn resolve_paths(&mut self, dir: &Path) {
        let fix = |p: &mut Option<PathBuf>| {
            if let Some(path) = p.as_mut().filter(|p| p.is_relative()) {
                *path = dir.join(&*path);
            }
        };
        fix(&mut self.trace);
        fix(&mut self.loss_pattern);
        fix(self.up.trace_mut());
        fix(self.down.trace_mut());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_is_the_sim_path() {
        let (up, down) = LinkSpec::default().configs().expect("valid");
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
    fn directions_override_and_errors_say_what() {
        let mut s = LinkSpec {
            loss_model: LossKind::Gilbert,
            burst: 4.0,
            burst_reset: BurstReset::AfterMs(100.0),
            loss: Some(0.02),
            queue: Some(50),
            ..LinkSpec::default()
        };
        s.up.loss = Some(0.0);
        s.down.bw = Some(5.0);
        let (up, down) = s.configs().expect("valid");
        let reset = Some(Duration::from_millis(100));
        assert_eq!(
            up.loss,
            LossModel::gilbert_from_mean(0.0, 4.0).with_idle_reset(reset)
        );
        assert_eq!(
            down.loss,
            LossModel::gilbert_from_mean(0.02, 4.0).with_idle_reset(reset)
        );
        assert_eq!(
            down.capacity,
            Capacity::Constant {
                bits_per_sec: 5_000_000
            }
        );
        assert_eq!(down.queue, QueueLimit::Packets(50));
        for bad in [0.0, -5.0, f64::NAN, f64::INFINITY] {
            s.burst_reset = BurstReset::AfterMs(bad);
            let err = s.configs().unwrap_err();
            assert!(err.to_string().contains("burst_reset"), "{err}");
        }
        let s = LinkSpec {
            loss: Some(1.5),
            ..LinkSpec::default()
        };
        assert!(matches!(s.configs(), Err(SpecError::Link(_))));
        let s = LinkSpec {
            bw: Some(-1.0),
            ..LinkSpec::default()
        };
        assert!(matches!(s.configs(), Err(SpecError::Link(_))));
        let s = LinkSpec {
            queue_bytes: Some(10),
            queue: Some(10),
            ..LinkSpec::default()
        };
        assert!(matches!(s.configs(), Err(SpecError::Link(_))));
        let s = LinkSpec {
            trace: Some(PathBuf::from("/nonexistent/trace")),
            ..LinkSpec::default()
        };
        let err = s.configs().unwrap_err();
        assert!(err.to_string().contains("/nonexistent/trace"), "{err}");
    }

    /// A varying-loss interval too long for a `Duration` (the issue 26
    /// audit found `--loss-interval 1e30` panicking) is an error.
    #[test]
    fn a_huge_loss_interval_is_an_error_not_a_panic() {
        for bad in [1e30, f64::MAX, MAX_MS * 2.0, 0.0, -1.0, f64::NAN] {
            let s = LinkSpec {
                loss_model: LossKind::Varying,
                loss_interval: bad,
                ..LinkSpec::default()
            };
            let err = s.configs().unwrap_err();
            assert!(err.to_string().contains("loss_interval"), "{bad}: {err}");
        }
        let s = LinkSpec {
            loss_model: LossKind::Varying,
            loss_interval: MAX_MS,
            ..LinkSpec::default()
        };
        assert!(s.configs().is_ok());
    }

    #[test]
    fn runner_faults_apply_per_direction_and_are_checked() {
        let mut s = LinkSpec {
            corrupt: Some(0.3),
            corrupt_span: Some(51),
            loss_max_burst: Some(3),
            blackhole: Some("1500-3500".parse().expect("window")),
            ..LinkSpec::default()
        };
        s.up.drop = Some("2-7".parse().expect("list"));
        s.down.corrupt = Some(0.0);
        s.down.blackhole = Some("100-200".parse().expect("window"));
        let (up, down) = s.configs().expect("valid");
        assert_eq!(
            up.corrupt,
            Some(Corruption {
                probability: 0.3,
                span: Some(51)
            })
        );
        assert_eq!(down.corrupt.map(|c| c.probability), Some(0.0));
        assert_eq!((up.loss_max_burst, down.loss_max_burst), (Some(3), Some(3)));
        assert!(up.drop_list.contains(2) && up.drop_list.contains(7) && !up.drop_list.contains(8));
        assert!(down.drop_list.is_empty());
        assert!(up.blackholes.contains(Duration::from_millis(2000)));
        assert!(!down.blackholes.contains(Duration::from_millis(2000)));
        assert!(down.blackholes.contains(Duration::from_millis(150)));
        // Off by default: the links of a spec without them have none.
        let (up, _) = LinkSpec::default().configs().expect("valid");
        assert_eq!(
            (
                up.corrupt,
                up.loss_max_burst,
                up.drop_list.is_empty(),
                up.blackholes.is_empty()
            ),
            (None, None, true, true)
        );
        for bad in [
            LinkSpec {
                corrupt: Some(1.5),
                ..LinkSpec::default()
            },
            LinkSpec {
                corrupt_span: Some(51),
                ..LinkSpec::default()
            },
            LinkSpec {
                corrupt: Some(0.1),
                corrupt_span: Some(0),
                ..LinkSpec::default()
            },
            LinkSpec {
                loss_max_burst: Some(0),
                ..LinkSpec::default()
            },
        ] {
            assert!(matches!(bad.configs(), Err(SpecError::Link(_))), "{bad:?}");
        }
    }

    #[test]
    fn runner_faults_serialise_as_strings_and_only_when_set() {
        let mut s = LinkSpec {
            corrupt: Some(0.02),
            drop: Some("3,1-2".parse().expect("list")),
            ..LinkSpec::default()
        };
        s.up.blackhole = Some("10-20".parse().expect("window"));
        let json = serde_json::to_value(&s).expect("serialises");
        assert_eq!(json["drop"], "1-3");
        assert_eq!(json["up"]["blackhole"], "10-20");
        assert!(json.get("corrupt_span").is_none() && json.get("blackhole").is_none());
        let back: LinkSpec = serde_json::from_value(json).expect("parses");
        assert_eq!(back, s);
        let plain = serde_json::to_value(LinkSpec::default()).expect("serialises");
        for key in [
            "corrupt",
            "corrupt_span",
            "drop",
            "blackhole",
            "loss_max_burst",
        ] {
            assert!(plain.get(key).is_none(), "{key} must not appear when unset");
        }
        let bad = serde_json::from_str::<LinkSpec>(r#"{"drop": "0"}"#);
        assert!(bad.is_err());
    }

    #[test]
    fn gilbert_ends_bursts_at_a_silence_unless_told_none() {
        let gilbert = |reset| LinkSpec {
            loss_model: LossKind::Gilbert,
            burst: 10.0,
            loss: Some(0.05),
            burst_reset: reset,
            ..LinkSpec::default()
        };
        let chain = LossModel::gilbert_from_mean(0.05, 10.0);
        let (_, down) = gilbert(BurstReset::default()).configs().expect("valid");
        assert_eq!(
            down.loss,
            chain
                .clone()
                .with_idle_reset(Some(Duration::from_millis(100))),
            "the default ends a burst after 100 ms of silence"
        );
        let (_, down) = gilbert(BurstReset::None).configs().expect("valid");
        assert_eq!(down.loss, chain, "none keeps the plain chain");
        assert_eq!("none".parse(), Ok(BurstReset::None));
        assert_eq!(" NONE ".parse(), Ok(BurstReset::None));
        assert_eq!("250".parse(), Ok(BurstReset::AfterMs(250.0)));
        assert!("soon".parse::<BurstReset>().is_err());
        assert_eq!(BurstReset::None.to_string(), "none");
        assert_eq!(BurstReset::default().to_string(), "100");
    }

    #[test]
    fn slot_rate_makes_the_authors_channel_and_instant_an_ideal_return() {
        let mut s = LinkSpec {
            slot_rate: Some(3),
            sojourn: 100.0,
            rtt: 0.0,
            loss: Some(0.0),
            queue: Some(300),
            ..LinkSpec::default()
        };
        s.down.loss = Some(0.1);
        s.up.instant = true;
        let (up, down) = s.configs().expect("valid");
        assert_eq!(
            down.capacity,
            Capacity::Slotted(Slotted {
                slot: Duration::from_millis(1),
                per_slot: 3,
                sojourn: Duration::from_millis(100),
                changes: SlotRates::default(),
            })
        );
        assert_eq!(down.queue, QueueLimit::Packets(300));
        assert_eq!(down.loss, LossModel::Bernoulli { p: 0.1 });
        assert_eq!(down.delay, Duration::ZERO);
        // The instant direction is the ideal link, whatever the both-ways
        // settings (queue, slot rate) say.
        assert_eq!(up, LinkConfig::ideal());
        // TOML names are the flags'.
        let json = serde_json::to_value(&s).expect("serialises");
        assert_eq!(json["slot_rate"], 3);
        assert_eq!(json["sojourn"], 100.0);
        assert_eq!(json["up"]["instant"], true);
        assert!(json.get("slot").is_none() && json["down"].get("instant").is_none());
        let back: LinkSpec = serde_json::from_value(json).expect("parses");
        assert_eq!(back, s);
        // A rate change of the slotted link.
        s.slot_rate_change = Some("5000:1".parse().expect("schedule"));
        let (_, down) = s.configs().expect("valid");
        let Capacity::Slotted(d) = down.capacity else {
            panic!("not slotted: {:?}", down.capacity)
        };
        assert_eq!(d.changes.changes(), &[(Duration::from_secs(5), 1)]);
    }

    #[test]
    fn slotted_and_instant_mistakes_say_what() {
        let slotted = LinkSpec {
            slot_rate: Some(3),
            ..LinkSpec::default()
        };
        let err = |s: &LinkSpec| s.configs().expect_err("invalid").to_string();
        for (bad, words) in [
            (
                LinkSpec {
                    sojourn: 100.0,
                    ..LinkSpec::default()
                },
                "give slot_rate",
            ),
            (
                LinkSpec {
                    slot_rate: Some(0),
                    ..LinkSpec::default()
                },
                "slot_rate 0",
            ),
            (
                LinkSpec {
                    slot: 0.0,
                    ..slotted.clone()
                },
                "slot 0",
            ),
            (
                LinkSpec {
                    sojourn: f64::NAN,
                    ..slotted.clone()
                },
                "sojourn NaN",
            ),
            (
                LinkSpec {
                    trace: Some(PathBuf::from("t")),
                    ..slotted.clone()
                },
                "two capacities",
            ),
            (
                LinkSpec {
                    bw_change: Some("10:5".parse().expect("schedule")),
                    ..slotted.clone()
                },
                "slot_rate_change",
            ),
        ] {
            let e = err(&bad);
            assert!(e.contains(words), "{e} (wanted {words})");
        }
        let mut s = slotted.clone();
        s.up.instant = true;
        s.up.loss = Some(0.5);
        assert!(err(&s).contains("up.instant delivers at once: it excludes up.loss"));
        let mut s = slotted;
        s.up.instant = true;
        s.down.instant = true;
        assert!(err(&s).contains("no link"));
    }

    #[test]
    fn relative_paths_resolve_against_a_directory() {
        let mut s = LinkSpec {
            trace: Some(PathBuf::from("t.trace")),
            loss_pattern: Some(PathBuf::from("/abs/p")),
            ..LinkSpec::default()
        };
        s.down.trace = Some(PathBuf::from("d.trace"));
        s.resolve_paths(Path::new("/dir"));
        assert_eq!(s.trace, Some(PathBuf::from("/dir/t.trace")));
        assert_eq!(s.down.trace, Some(PathBuf::from("/dir/d.trace")));
        assert_eq!(s.loss_pattern, Some(PathBuf::from("/abs/p")));
    }
}
