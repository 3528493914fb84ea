//! `art+`: a sender-only redundancy policy of our own, built on what the
//! reproduction of ART measured (docs/reproduce.md: ART's adapter leaves
//! most of Fig. 24's gain on the table). Four ideas, each switchable for
//! the ablation (`art+:hol=off`, …):
//!
//! - **head-of-line awareness** (`hol`): lost data that blocks the receiver
//!   (at its stream's acknowledged prefix, or so close to the flow-control
//!   edge that one more round would stall the sender) is *blocking*; it
//!   gets the strict residual-loss target and first call on the budget.
//!   Data far ahead of the head can wait a round at no cost to the
//!   application; so can data at its stream's head with credit to spare,
//!   unless its loss was found late (`late_rtts`) and one more round would
//!   put it at the far end of the latency tail. Needs the transport's
//!   [`StreamPosition`] in [`LostData::position`].
//! - **model-based level** (`model`): the smallest R with p_r^R at or below
//!   the target, p_r over hundreds of replica fates ([`model::LossModel`])
//!   instead of ART's ±1 steps over 10.
//! - **burst awareness** (`burst`): the escape space over which replicas
//!   are spread is a quantile of the loss-burst length distribution
//!   ([`model::BurstHistogram`]) instead of ART's B_max.
//! - **cost budget** (`budget`): at most `budget` extra replicas per lost
//!   packet ([`budget::Budget`]), the constraint C of the journal's eq. 4.
//! - **stall copies** (`stall`): while flow control blocks the sender, copy
//!   the unacknowledged data at the head of line before any loss is
//!   declared ([`SendingHooks::on_flow_blocked`]), within `hol_rtts` of
//!   the head and paid from the same budget as blocking data's replicas.
//!
//! Replicas are opportunistic and spread by ART's scheduler rule
//! ([`crate::art::scheduler::spread`]), as in `art`. With every idea off,
//! `art+` is ART's adapter and scheduler.

pub mod budget;
pub mod model;

#[cfg(test)]
mod tests;

use transport::policy::{
    DataKind, Decision, HeadOfLine, LostData, PacketFate, PacketTag, PathView, PolicyContext,
    PolicyState, RecoveryPolicy, SendingHooks, SentView, StreamPosition, MAX_REPLICAS,
};

use crate::art::scheduler::spread;
use crate::art::{RedundancyAdapter, ReplicaScheduler};
use crate::error::SchemeError;
use crate::whole::{whole, WholeError};
use budget::Budget;
use model::{BurstHistogram, LossModel};

/// The form of the scheme's name, for errors and `--recovery help`.
pub const FORM: &str = "art+ or art+:KEY=VALUE,... with keys hol, model, burst, stall (on|off), \
    budget (off or extra replicas per lost packet in 0..=31), target (residual loss of \
    blocking data, in (0, 1)), far_target (in (0, 1]), hol_rtts (in (0, 100]), late_rtts \
    (in [0, 100]), history (replica fates, 1..=4096), quantile (burst quantile, in (0, 1])";

/// Largest replica-fate history accepted.
pub const MAX_HISTORY: usize = 4096;

/// `art+`'s parameters; [`ArtPlusConfig::default`] is `art+`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArtPlusConfig {
    /// Head-of-line awareness (default on). Off: all data counts as
    /// blocking.
    pub hol: bool,
    /// Data is blocking when the sender could send for less than this many
    /// smoothed RTTs (at its pacing rate) before this data's absence stalls
    /// it (default 0.25: measured at Fig. 24's setting, wider horizons
    /// bought no goodput for their replicas; docs/recovery.md).
    pub hol_rtts: f64,
    /// Data at its stream's head with credit to spare ([`Blocking::Stream`])
    /// counts as blocking only once it has waited this many smoothed RTTs
    /// since its first transmission (default 1.25; 0: every head blocks).
    /// A loss that the packet threshold finds is declared about one RTT
    /// after it was sent, and one more round costs its stream one more
    /// round trip, where most first rounds end. A loss found later than
    /// the time threshold's 9/8 RTT (by the probe timeout, or behind an
    /// idle gap) is already in the latency tail, and one more round would
    /// put it at the far end. Measured on the RPC workload at 1-15% loss
    /// (40 seeds): t_wait's 99th percentile no worse than ART's at
    /// 0.97-1.02x its replicas, where treating every head as blocking
    /// cost up to 1.28x (docs/recovery.md).
    pub late_rtts: f64,
    /// Model-based level (default on). Off: ART's adapter (10 fates, ±1),
    /// one more replica for blocking data when `hol` is on.
    pub model: bool,
    /// Residual loss target for blocking data (default 0.02: one copy up
    /// to 2% replica loss, where a second copy would save fewer than one
    /// round in fifty; two from there up to 14%).
    pub target: f64,
    /// Residual loss target for other data (default 0.1: one copy up to
    /// 10% replica loss, two from there up to 32%; measured on the live
    /// workload, where 0.2 left t_wait's 99th percentile 12 ms above
    /// ART's at 10% loss and 0.1 matches it at 0.87x ART's cost;
    /// docs/recovery.md).
    pub far_target: f64,
    /// Replica fates in p_r's estimate (default 500).
    pub history: usize,
    /// Burst awareness (default on). Off: ART's escape space from B_max.
    pub burst: bool,
    /// Quantile of the burst-length distribution (weighted by lost
    /// packets) that sizes the escape space (default 0.9).
    pub quantile: f64,
    /// Extra replicas allowed per lost packet (default 0.5: at most 1.5
    /// times plain QUIC's retransmissions); `None`: no budget.
    pub budget: Option<f64>,
    /// Cap on replicas per round (8, as ART's).
    pub r_max: u32,
    /// Head-of-line copies while flow-control blocked (policy.rs,
    /// "Head-of-line copies"): data within `hol_rtts` of its stream's
    /// head, each copy one token of the budget. Default off: at Fig. 24's
    /// setting it bought +4% goodput at 8 MB for +28% redundancy, within
    /// the seeds' spread, and lost goodput at 2 MB (docs/recovery.md).
    pub stall: bool,
}

impl Default for ArtPlusConfig {
    fn default() -> Self {
        ArtPlusConfig {
            hol: true,
            hol_rtts: 0.25,
            late_rtts: 1.25,
            model: true,
            target: 0.02,
            far_target: 0.1,
            history: 500,
            burst: true,
            quantile: 0.9,
            budget: Some(0.5),
            r_max: 8,
            stall: false,
        }
    }
}

fn on_off(v: bool) -> &'static str {
    if v {
        "on"
    } else {
        "off"
    }
}

impl ArtPlusConfig {
    /// The scheme's name: `art+`, then every parameter that differs from
    /// the default, in a fixed order (`art+:hol=off,budget=0.3`).
    pub fn name(&self) -> String {
        let d = ArtPlusConfig::default();
        let mut parts = Vec::new();
        if self.hol != d.hol {
            parts.push(format!("hol={}", on_off(self.hol)));
        }
        if self.hol_rtts != d.hol_rtts {
            parts.push(format!("hol_rtts={}", self.hol_rtts));
        }
        if self.late_rtts != d.late_rtts {
            parts.push(format!("late_rtts={}", self.late_rtts));
        }
        if self.model != d.model {
            parts.push(format!("model={}", on_off(self.model)));
        }
        if self.target != d.target {
            parts.push(format!("target={}", self.target));
        }
        if self.far_target != d.far_target {
            parts.push(format!("far_target={}", self.far_target));
        }
        if self.history != d.history {
            parts.push(format!("history={}", self.history));
        }
        if self.burst != d.burst {
            parts.push(format!("burst={}", on_off(self.burst)));
        }
        if self.quantile != d.quantile {
            parts.push(format!("quantile={}", self.quantile));
        }
        if self.budget != d.budget {
            parts.push(match self.budget {
                Some(b) => format!("budget={b}"),
                None => "budget=off".into(),
            });
        }
        if self.r_max != d.r_max {
            parts.push(format!("r_max={}", self.r_max));
        }
        if self.stall != d.stall {
            parts.push(format!("stall={}", on_off(self.stall)));
        }
        if parts.is_empty() {
            "art+".into()
        } else {
            format!("art+:{}", parts.join(","))
        }
    }

    /// Checks every parameter's range.
    pub fn validate(&self) -> Result<(), SchemeError> {
        let bad = |reason: &str| {
            Err(SchemeError::InvalidConfig {
                scheme: self.name(),
                reason: reason.into(),
            })
        };
        if !(self.hol_rtts > 0.0 && self.hol_rtts <= 100.0) {
            return bad("hol_rtts must be in (0, 100]");
        }
        if !(0.0..=100.0).contains(&self.late_rtts) {
            return bad("late_rtts must be in [0, 100]");
        }
        if !(self.target > 0.0 && self.target < 1.0) {
            return bad("target must be in (0, 1)");
        }
        if !(self.far_target > 0.0 && self.far_target <= 1.0) {
            return bad("far_target must be in (0, 1]");
        }
        if !(1..=MAX_HISTORY).contains(&self.history) {
            return bad("history must be in 1..=4096");
        }
        if !(self.quantile > 0.0 && self.quantile <= 1.0) {
            return bad("quantile must be in (0, 1]");
        }
        if let Some(b) = self.budget {
            if !(0.0..=31.0).contains(&b) {
                return bad("budget must be in 0..=31 extra replicas per lost packet");
            }
        }
        if !(1..=MAX_REPLICAS as u32).contains(&self.r_max) {
            return bad("r_max must be in 1..=32");
        }
        Ok(())
    }

    /// Parses the options after `art+:` (`None`: no options).
    pub fn parse(name: &str, options: Option<&str>) -> Result<Self, SchemeError> {
        let bad = |reason: String| SchemeError::BadParameter {
            name: name.into(),
            reason,
            form: FORM.into(),
        };
        let mut c = ArtPlusConfig::default();
        let Some(options) = options else {
            return Ok(c);
        };
        if options.is_empty() {
            return Err(bad("empty options".into()));
        }
        let number = |key: &str, v: &str| {
            v.parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad(format!("{key} '{v}' is not a number")))
        };
        let switch = |key: &str, v: &str| match v {
            "on" => Ok(true),
            "off" => Ok(false),
            _ => Err(bad(format!("{key} '{v}' is not on or off"))),
        };
        for opt in options.split(',') {
            let (key, v) = opt
                .split_once('=')
                .ok_or_else(|| bad(format!("'{opt}' is not KEY=VALUE")))?;
            match key {
                "hol" => c.hol = switch(key, v)?,
                "model" => c.model = switch(key, v)?,
                "burst" => c.burst = switch(key, v)?,
                "stall" => c.stall = switch(key, v)?,
                "budget" => {
                    c.budget = match v {
                        "off" => None,
                        _ => Some(number(key, v)?),
                    }
                }
                "target" => c.target = number(key, v)?,
                "far_target" => c.far_target = number(key, v)?,
                "hol_rtts" => c.hol_rtts = number(key, v)?,
                "late_rtts" => c.late_rtts = number(key, v)?,
                "quantile" => c.quantile = number(key, v)?,
                "history" => {
                    c.history = whole(v, 0..=usize::MAX).map_err(|e| match e {
                        WholeError::NotANumber => bad(format!("history '{v}' is not a number")),
                        WholeError::OutOfRange => bad(format!("history {v} is out of range")),
                    })?;
                }
                _ => return Err(bad(format!("unknown option '{key}'"))),
            }
        }
        c.validate().map_err(|e| match e {
            SchemeError::InvalidConfig { reason, .. } => bad(reason),
            other => other,
        })?;
        Ok(c)
    }
}

/// How lost data blocks the receiver, as the sender sees its place in the
/// stream ([`StreamPosition`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Blocking {
    /// Near the flow-control edge: the sender, at its pacing rate, runs out
    /// of credit within `hol_rtts` smoothed RTTs unless this data arrives.
    /// One more round stalls the whole connection.
    Sender,
    /// At its stream's head with credit to spare: one more round delays
    /// this stream's delivery, not the sender.
    Stream,
    /// Neither (or unknown): it can wait a round at no cost to the
    /// application.
    No,
}

impl Blocking {
    /// Where lost data at `pos` stands. The bytes the sender may still send
    /// before this data stalls it are the credit left now plus what the
    /// receiver will release when the data in front of this one is
    /// delivered.
    pub fn of(pos: Option<StreamPosition>, path: &PathView, hol_rtts: f64) -> Blocking {
        let Some(pos) = pos else {
            return Blocking::No;
        };
        let headroom = pos.behind_head.saturating_add(pos.credit_left) as f64;
        let horizon = hol_rtts * path.srtt.as_secs_f64() * path.pacing_rate as f64;
        if headroom < horizon {
            Blocking::Sender
        } else if pos.behind_head == 0 {
            Blocking::Stream
        } else {
            Blocking::No
        }
    }
}

/// The `art+` policy of one connection.
#[derive(Clone, Debug)]
pub struct ArtPlusPolicy {
    config: ArtPlusConfig,
    model: LossModel,
    bursts: BurstHistogram,
    /// ART's adapter (the level when `model` is off) and scheduler (the
    /// escape space when `burst` is off), fed in every configuration.
    adapter: RedundancyAdapter,
    scheduler: ReplicaScheduler,
    budget: Option<Budget>,
    /// Ack-eliciting packets sent: each packet's tag is its send index.
    sent: u64,
    /// Rounds decided, and those that were blocking (for traces).
    decided: u64,
    blocking: u64,
    /// Head-of-line copies granted (for traces).
    head_copies: u64,
}

impl ArtPlusPolicy {
    /// A policy for `config`, validated first.
    pub fn new(config: ArtPlusConfig) -> Result<Self, SchemeError> {
        config.validate()?;
        let art = crate::art::ArtConfig::default();
        Ok(ArtPlusPolicy {
            config,
            model: LossModel::new(config.history),
            bursts: BurstHistogram::default(),
            adapter: RedundancyAdapter::new(art.l_queue, config.r_max),
            scheduler: ReplicaScheduler::new(art.alpha, art.burst_window_rtts),
            budget: config.budget.map(Budget::new),
            sent: 0,
            decided: 0,
            blocking: 0,
            head_copies: 0,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ArtPlusConfig {
        &self.config
    }

    /// The loss model.
    pub fn model(&self) -> &LossModel {
        &self.model
    }

    /// The budget, when there is one.
    pub fn budget(&self) -> Option<&Budget> {
        self.budget.as_ref()
    }

    /// The burst-length distribution.
    pub fn bursts(&self) -> &BurstHistogram {
        &self.bursts
    }

    fn index(fate: &PacketFate) -> u64 {
        fate.tag.map_or(fate.pn, |t| t.0)
    }

    /// Escape space in packets: a quantile of the burst distribution, or
    /// ART's B_max, bounded by the BDP (eq. 6 with α = 1).
    fn escape_space(&mut self, cx: &PolicyContext<'_>) -> u64 {
        if self.config.burst {
            self.bursts
                .quantile(self.config.quantile)
                .min(cx.path.bdp_packets())
                .max(1)
        } else {
            self.scheduler.escape_space(cx.now, cx.path)
        }
    }
}

impl RecoveryPolicy for ArtPlusPolicy {
    fn name(&self) -> String {
        self.config.name()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        let c = self.config;
        let waited = cx.now.saturating_duration_since(lost.first_sent);
        let late = waited.as_secs_f64() >= c.late_rtts * cx.path.srtt.as_secs_f64();
        let blocking = !c.hol
            || lost.round >= 2
            || match Blocking::of(lost.position, cx.path, c.hol_rtts) {
                Blocking::Sender => true,
                Blocking::Stream => late,
                Blocking::No => false,
            };
        // The ART adapter steps in every configuration, so that switching
        // `model` off gives exactly its levels.
        let art_level = self.adapter.on_data_lost(lost.round);
        let wanted = if c.model {
            let target = if blocking { c.target } else { c.far_target };
            LossModel::level_for(self.model.replica_loss(), target, c.r_max)
        } else if c.hol && blocking {
            art_level.saturating_add(1)
        } else {
            art_level
        };
        let wanted = wanted.clamp(1, c.r_max.min(MAX_REPLICAS as u32));
        let r = match &mut self.budget {
            Some(b) => 1 + b.grant(wanted - 1, blocking),
            None => wanted,
        };
        self.decided += 1;
        self.blocking += u64::from(blocking);
        let space = self.escape_space(cx);
        if cx.tracing() {
            cx.publish(
                "round_level",
                &[
                    ("item", lost.item.0 as f64),
                    ("round", f64::from(lost.round)),
                    ("level", f64::from(r)),
                    ("wanted", f64::from(wanted)),
                    ("blocking", f64::from(u8::from(blocking))),
                    ("escape_space", space as f64),
                ],
            );
        }
        Decision::Retransmit {
            send_at: spread(cx.now, r as usize, space, cx.path, cx.rng),
            opportunistic: true,
        }
    }

    /// Burst history describes the old path; the loss model and budget are
    /// kept (as ART keeps its levels).
    fn on_path_change(&mut self, cx: &mut PolicyContext<'_>) {
        let art = crate::art::ArtConfig::default();
        self.scheduler = ReplicaScheduler::new(art.alpha, art.burst_window_rtts);
        self.bursts = BurstHistogram::default();
        cx.publish("path_changed", &[]);
    }

    /// For qlog (`artq:policy_state`): p_r, the packet loss rate, the
    /// burst quantile, the budget's tokens and the share of blocking
    /// rounds.
    fn report_state(&self, out: &mut PolicyState) {
        out.set("replica_loss", self.model.replica_loss());
        out.set("packet_loss", self.model.packet_loss());
        out.set(
            "burst_quantile",
            self.bursts.quantile(self.config.quantile) as f64,
        );
        if let Some(b) = &self.budget {
            out.set("budget_tokens", b.tokens());
        }
        if self.decided > 0 {
            out.set("blocking_share", self.blocking as f64 / self.decided as f64);
        }
        if self.config.stall {
            out.set("head_copies", self.head_copies as f64);
        }
    }

    fn on_packet_sent(
        &mut self,
        _cx: &mut PolicyContext<'_>,
        _sent: &SentView,
    ) -> Option<PacketTag> {
        self.sent = self.sent.saturating_add(1);
        Some(PacketTag(self.sent))
    }

    fn on_packet_acked(&mut self, _cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        self.model.on_fate(fate.pn, fate.replica.is_some(), false);
        if fate.replica.is_some() {
            self.adapter.on_replica_acked(fate.pn);
        }
    }

    fn on_packet_lost(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        let index = Self::index(fate);
        self.model.on_fate(fate.pn, fate.replica.is_some(), true);
        self.bursts.on_lost(index);
        self.scheduler.on_packet_lost(cx.now, index, cx.path);
        if fate.replica.is_some() {
            self.adapter.on_replica_lost(fate.pn);
        }
        if let Some(b) = &mut self.budget {
            b.on_loss();
        }
    }

    fn sending_hooks(&mut self) -> Option<&mut dyn SendingHooks> {
        Some(self)
    }
}

impl SendingHooks for ArtPlusPolicy {
    /// A copy of the head of line while flow control blocks the sender
    /// (`stall`): only data within `hol_rtts` of its stream's head, where
    /// its loss would hold the receiver's window longest, and only with a
    /// token of the budget (spent as for blocking data).
    fn on_flow_blocked(&mut self, cx: &mut PolicyContext<'_>, head: &HeadOfLine) -> bool {
        if !self.config.stall {
            return false;
        }
        let horizon =
            self.config.hol_rtts * cx.path.srtt.as_secs_f64() * cx.path.pacing_rate as f64;
        if head.position.behind_head > 0 && head.position.behind_head as f64 >= horizon {
            return false;
        }
        let granted = match &mut self.budget {
            Some(b) => b.grant(1, true) == 1,
            None => true,
        };
        self.head_copies += u64::from(granted);
        granted
    }
}
