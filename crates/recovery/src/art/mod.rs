//! ART (Adaptive ReTransmission, ART journal §5–§6): a Redundancy Adapter
//! chooses how many replicas of lost data to send in each retransmission
//! round, a Replica Scheduler chooses when to send each, and the replicas are
//! *opportunistic* (journal §6.4): they may go when the congestion window is
//! full and skip pacing.
//!
//! One policy, [`ArtPolicy`], covers ART and the variants of the paper's
//! ablations and appendix, chosen by [`ArtConfig`]:
//!
//! | name | adapter | scheduler |
//! |---|---|---|
//! | `art` | test-and-verification ([`adapter`], §6.1) | random ([`scheduler`], §6.2) |
//! | `art-fix:R` | fixed R (Fig. 18(b) "ART-fix") | random |
//! | `art-norand` | test-and-verification | none: back to back at `now` |
//! | `art-norand:R` | fixed R (Fig. 18(b) "ART-norand") | none |
//! | `art-mab-eg`, `art-mab-ucb` | bandit ([`mab`], Appendix A.1) | random |
//!
//! Opportunism is kept by every variant: it is ART's answer to
//! congestion-limited traffic (§6.4), not part of the scheduler whose effect
//! the ablations isolate.
//!
//! ART recovers reliable stream data (the papers' subject). Lost
//! DATAGRAM-only data is given up, as plain QUIC does (RFC 9221), and does
//! not touch the adapter's per-round levels or the bandit.

pub mod adapter;
pub mod dqn;
pub mod mab;
pub mod scheduler;

use transport::policy::{
    DataKind, Decision, LostData, PacketFate, PacketTag, PolicyContext, PolicyFactory, PolicyState,
    RecoveryPolicy, SentView, MAX_REPLICAS,
};

pub use adapter::{RedundancyAdapter, ReplicaWindow, StartLevels};
pub use mab::{BanditAdapter, BanditConfig, BanditStrategy};
pub use scheduler::{BurstTracker, ReplicaScheduler};

use crate::registry::SchemeError;

/// Largest accepted `L_queue` (the paper uses 10 and shows larger changes
/// little, journal Fig. 15).
pub const MAX_L_QUEUE: usize = 4096;
/// Largest accepted burst window, in RTTs.
pub const MAX_BURST_WINDOW_RTTS: u32 = 1000;
/// Largest accepted α.
pub const MAX_ALPHA: f64 = 1000.0;

/// ART's parameters, with the paper's defaults ([`ArtConfig::default`] is
/// `art`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArtConfig {
    /// Replica fates in the sliding bitmap (`L_queue`, journal §6.1;
    /// default 10, "we by default set L_queue ≥ 10").
    pub l_queue: usize,
    /// Scaling coefficient α of eq. 6 (≥ 1; default 1, "in most cases, we set
    /// α = 1").
    pub alpha: f64,
    /// W: `B_max` is the largest burst over the last W RTTs (§6.2: "e.g.
    /// 5 ~ 10 RTTs"; default 8).
    pub burst_window_rtts: u32,
    /// Cap on the redundancy level (our choice, default 8: the largest level
    /// the paper evaluates, Fig. 12); at most the transport's `MAX_REPLICAS`.
    /// Also the number of bandit arms.
    pub r_max: u32,
    /// Spread replicas with the Replica Scheduler (false: `art-norand`).
    pub scheduler: bool,
    /// A fixed level instead of an adapter (`art-fix:R`, `art-norand:R`).
    pub fixed_r: Option<u32>,
    /// A bandit adapter instead of test-and-verification (`art-mab-*`).
    pub bandit: Option<BanditConfig>,
    /// Where the per-round levels R_n start (default 1; `or3` for 2n − 1 as
    /// in the authors' artifact). Only the test-and-verification adapter
    /// uses it.
    pub start_levels: StartLevels,
    /// Replicas bypass the congestion window and pacing (journal §6.4;
    /// default true). False sends them like QUIC's retransmissions: an
    /// experiment knob (no command-line name), see docs/recovery.md.
    pub opportunistic: bool,
}

impl Default for ArtConfig {
    fn default() -> Self {
        ArtConfig {
            l_queue: 10,
            alpha: 1.0,
            burst_window_rtts: 8,
            r_max: 8,
            scheduler: true,
            fixed_r: None,
            bandit: None,
            start_levels: StartLevels::One,
            opportunistic: true,
        }
    }
}

impl ArtConfig {
    /// `art-fix:R`: R replicas per round, spread by the scheduler. `r_max`
    /// is raised to R if needed.
    pub fn fixed(r: u32) -> Self {
        ArtConfig {
            fixed_r: Some(r),
            r_max: ArtConfig::default().r_max.max(r),
            ..ArtConfig::default()
        }
    }

    /// `art-norand`: the adapter, replicas back to back.
    pub fn norand() -> Self {
        ArtConfig {
            scheduler: false,
            ..ArtConfig::default()
        }
    }

    /// `art-norand:R`: R replicas back to back (journal Fig. 18(b)).
    pub fn fixed_norand(r: u32) -> Self {
        ArtConfig {
            scheduler: false,
            ..ArtConfig::fixed(r)
        }
    }

    /// `art-or3start`: ART whose per-round levels start at OR3's 2n − 1, as
    /// the authors' artifact initialises them (see [`StartLevels::Or3`]).
    pub fn or3_start() -> Self {
        ArtConfig {
            start_levels: StartLevels::Or3,
            ..ArtConfig::default()
        }
    }

    /// `art-mab-eg` / `art-mab-ucb`: the bandit adapter with the scheduler.
    pub fn bandit(bandit: BanditConfig) -> Self {
        ArtConfig {
            bandit: Some(bandit),
            ..ArtConfig::default()
        }
    }

    /// The command-line name of this variant (parameters not included).
    pub fn variant_name(&self) -> String {
        match (self.bandit, self.fixed_r, self.scheduler) {
            (Some(b), _, _) => match b.strategy {
                BanditStrategy::EpsilonGreedy { .. } => "art-mab-eg".into(),
                BanditStrategy::Ucb { .. } => "art-mab-ucb".into(),
            },
            (None, Some(r), true) => format!("art-fix:{r}"),
            (None, Some(r), false) => format!("art-norand:{r}"),
            (None, None, true) if self.start_levels == StartLevels::Or3 => "art-or3start".into(),
            (None, None, true) => "art".into(),
            (None, None, false) => "art-norand".into(),
        }
    }

    /// The variant's name, followed by every parameter when they differ from
    /// what the name alone gives (so a run's record says what ran).
    pub fn name(&self) -> String {
        let base = self.variant_name();
        let canonical = match (self.bandit, self.fixed_r, self.scheduler) {
            (Some(b), _, _) => ArtConfig::bandit(match b.strategy {
                BanditStrategy::EpsilonGreedy { .. } => BanditConfig::epsilon_greedy(),
                BanditStrategy::Ucb { .. } => BanditConfig::ucb(),
            }),
            (None, Some(r), true) => ArtConfig::fixed(r),
            (None, Some(r), false) => ArtConfig::fixed_norand(r),
            (None, None, true) if self.start_levels == StartLevels::Or3 => ArtConfig::or3_start(),
            (None, None, true) => ArtConfig::default(),
            (None, None, false) => ArtConfig::norand(),
        };
        if canonical == *self {
            return base;
        }
        let mut s = format!(
            "{base}[l_queue={},alpha={},burst_window_rtts={},r_max={}",
            self.l_queue, self.alpha, self.burst_window_rtts, self.r_max
        );
        if !self.opportunistic {
            s.push_str(",opportunistic=false");
        }
        if self.start_levels != StartLevels::One {
            s.push_str(&format!(",start={}", self.start_levels.name()));
        }
        if let Some(b) = self.bandit {
            match b.strategy {
                BanditStrategy::EpsilonGreedy { epsilon } => {
                    s.push_str(&format!(",epsilon={epsilon}"))
                }
                BanditStrategy::Ucb { c } => s.push_str(&format!(",c={c}")),
            }
            s.push_str(&format!(",eta={}", b.eta));
        }
        s.push(']');
        s
    }

    /// Reject unusable parameters, with the reason.
    pub fn validate(&self) -> Result<(), SchemeError> {
        let bad = |reason: String| {
            Err(SchemeError::InvalidConfig {
                scheme: self.variant_name(),
                reason,
            })
        };
        if self.l_queue == 0 || self.l_queue > MAX_L_QUEUE {
            return bad(format!(
                "l_queue must be in 1..={MAX_L_QUEUE}, got {}",
                self.l_queue
            ));
        }
        if !(self.alpha.is_finite() && (1.0..=MAX_ALPHA).contains(&self.alpha)) {
            return bad(format!(
                "alpha must be in [1, {MAX_ALPHA}], got {}",
                self.alpha
            ));
        }
        if self.burst_window_rtts == 0 || self.burst_window_rtts > MAX_BURST_WINDOW_RTTS {
            return bad(format!(
                "burst_window_rtts must be in 1..={MAX_BURST_WINDOW_RTTS}, got {}",
                self.burst_window_rtts
            ));
        }
        if self.r_max == 0 || self.r_max as usize > MAX_REPLICAS {
            return bad(format!(
                "r_max must be in 1..={MAX_REPLICAS}, got {}",
                self.r_max
            ));
        }
        if let Some(r) = self.fixed_r {
            if r == 0 || r > self.r_max {
                return bad(format!(
                    "the fixed level R must be in 1..={} (r_max), got {r}",
                    self.r_max
                ));
            }
            if self.bandit.is_some() {
                return bad("a fixed level and a bandit adapter exclude each other".into());
            }
        }
        if let Some(b) = self.bandit {
            b.check().or_else(bad)?;
        }
        Ok(())
    }
}

/// Where the redundancy level comes from.
#[derive(Clone, Debug)]
enum Level {
    Adaptive(RedundancyAdapter),
    Fixed(u32),
    Bandit(BanditAdapter),
}

/// The ART policy of one connection (any variant of [`ArtConfig`]).
#[derive(Clone, Debug)]
pub struct ArtPolicy {
    config: ArtConfig,
    level: Level,
    scheduler: ReplicaScheduler,
    /// Ack-eliciting packets sent so far: each packet's tag is its index, so
    /// loss bursts are judged in send order (see [`scheduler`]).
    sent: u64,
}

impl ArtPolicy {
    /// A policy for `config`, which is validated first.
    pub fn new(config: ArtConfig) -> Result<Self, SchemeError> {
        config.validate()?;
        let level = match (config.bandit, config.fixed_r) {
            (Some(b), _) => Level::Bandit(BanditAdapter::new(b, config.r_max)),
            (None, Some(r)) => Level::Fixed(r),
            (None, None) => Level::Adaptive(RedundancyAdapter::with_start(
                config.l_queue,
                config.r_max,
                config.start_levels,
            )),
        };
        let scheduler = ReplicaScheduler::new(config.alpha, config.burst_window_rtts);
        Ok(ArtPolicy {
            config,
            level,
            scheduler,
            sent: 0,
        })
    }

    /// Its configuration.
    pub fn config(&self) -> &ArtConfig {
        &self.config
    }

    /// The test-and-verification adapter, when this variant has one.
    pub fn adapter(&self) -> Option<&RedundancyAdapter> {
        match &self.level {
            Level::Adaptive(a) => Some(a),
            _ => None,
        }
    }

    /// The bandit adapter, when this variant has one.
    pub fn bandit(&self) -> Option<&BanditAdapter> {
        match &self.level {
            Level::Bandit(b) => Some(b),
            _ => None,
        }
    }

    /// The replica scheduler (its burst tracker is fed in every variant).
    pub fn scheduler_mut(&mut self) -> &mut ReplicaScheduler {
        &mut self.scheduler
    }

    /// Send index of a packet: its tag, or its packet number when the
    /// transport never told us about the packet (no tag).
    fn index(fate: &PacketFate) -> u64 {
        fate.tag.map_or(fate.pn, |t| t.0)
    }
}

impl RecoveryPolicy for ArtPolicy {
    fn name(&self) -> String {
        self.config.name()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        let path = cx.path;
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        let r = match &mut self.level {
            Level::Adaptive(a) => a.on_data_lost(lost.round),
            Level::Fixed(r) => *r,
            Level::Bandit(b) => b.on_data_lost(lost.item, lost.round, cx.rng),
        };
        let r = (r.clamp(1, self.config.r_max) as usize).min(MAX_REPLICAS);
        if cx.tracing() {
            // B_max and the escape space this round's replicas spread over
            // (journal §6.2). Reading them expires old bursts at `now`,
            // which `schedule` below does anyway: tracing changes nothing.
            let (b_max, space) = if self.config.scheduler {
                (
                    self.scheduler.max_burst(now, path),
                    self.scheduler.escape_space(now, path),
                )
            } else {
                (0, 1)
            };
            cx.publish(
                "round_level",
                &[
                    ("item", lost.item.0 as f64),
                    ("round", f64::from(lost.round)),
                    ("level", r as f64),
                    ("b_max", b_max as f64),
                    ("escape_space", space as f64),
                ],
            );
        }
        let send_at = if self.config.scheduler {
            self.scheduler.schedule(now, r, path, cx.rng)
        } else {
            vec![now; r]
        };
        // ART journal §6.4: opportunism.
        Decision::Retransmit {
            send_at,
            opportunistic: self.config.opportunistic,
        }
    }

    /// B_max and the escape space describe the path's loss bursts (journal
    /// §6.2): a new path starts with no burst history. The redundancy
    /// levels and the replica-fate window stay: they adapt within L_queue
    /// fates on any path, and the journal ties them to no path.
    fn on_path_change(&mut self, cx: &mut PolicyContext<'_>) {
        self.scheduler = ReplicaScheduler::new(self.config.alpha, self.config.burst_window_rtts);
        cx.publish("path_changed", &[]);
    }

    /// For qlog (`artq:policy_state`): the Redundancy Adapter's levels R_1..R_3
    /// and the replica-loss share p_r of its window (journal §6.1); the
    /// bandit's best arm, its mean reward and the pulls so far (Appendix
    /// A.1); or the fixed level. Each round's level, B_max and escape space
    /// are `artq:policy_event`s named `round_level` (see `on_data_lost`).
    fn report_state(&self, out: &mut PolicyState) {
        match &self.level {
            Level::Adaptive(a) => {
                out.set("r_1", f64::from(a.level(1)));
                out.set("r_2", f64::from(a.level(2)));
                out.set("r_3", f64::from(a.level(3)));
                out.set("replica_loss_share", a.window().loss_rate());
                out.set("window_len", a.window().len() as f64);
            }
            Level::Fixed(r) => out.set("r_1", f64::from(*r)),
            Level::Bandit(b) => {
                let (level, arm) = b.best_arm();
                out.set("best_level", f64::from(level));
                out.set("best_mean_reward", arm.mean);
                out.set(
                    "pulls",
                    b.arms().iter().map(|a| a.pulls).sum::<u64>() as f64,
                );
            }
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
        let Some(r) = fate.replica else { return };
        match &mut self.level {
            Level::Adaptive(a) => a.on_replica_acked(fate.pn),
            Level::Bandit(b) => b.on_replica_acked(r.item, r.round),
            Level::Fixed(_) => {}
        }
    }

    fn on_packet_lost(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        let now = cx.now;
        let path = cx.path;
        self.scheduler.on_packet_lost(now, Self::index(fate), path);
        if fate.replica.is_some() {
            if let Level::Adaptive(a) = &mut self.level {
                a.on_replica_lost(fate.pn);
            }
        }
    }
}

/// Builds an [`ArtPolicy`] per connection from a validated [`ArtConfig`].
///
/// The policy is built (and its configuration checked) once, in
/// [`ArtFactory::new`]; every connection gets a clone of it, so a bad
/// configuration is an error when parsed and can never be replaced by
/// another scheme later.
#[derive(Clone, Debug)]
pub struct ArtFactory {
    config: ArtConfig,
    prototype: ArtPolicy,
}

impl ArtFactory {
    /// A factory for `config`, rejected with the reason if unusable.
    pub fn new(config: ArtConfig) -> Result<Self, SchemeError> {
        let prototype = ArtPolicy::new(config)?;
        Ok(ArtFactory { config, prototype })
    }

    /// The configuration every policy gets.
    pub fn config(&self) -> &ArtConfig {
        &self.config
    }
}

impl PolicyFactory for ArtFactory {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.prototype.clone())
    }

    fn name(&self) -> String {
        self.config.name()
    }
}

#[cfg(test)]
mod tests;
