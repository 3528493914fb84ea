//! ART (Adaptive ReTransmission, ART journal §5–§6): a Redundancy Adapter
//! chooses how many replicas of lost data to send in each retransmission
//! round, a Replica Scheduler chooses when to send each, and the replicas are
//! *opportunistic* (journal §6.4): they may go when the congestion window is
//! full. They still leave at the pacing rate: unpaced, the first replicas
//! of a burst of losses left together and died together under outages
//! (measured in docs/recovery.md, seam note 2).
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
//! | `art-dqn` | Deep Q-Network ([`dqn`], Appendix A.2) | random |
//!
//! Opportunism is kept by every variant: it is ART's answer to
//! congestion-limited traffic (§6.4), not part of the scheduler whose effect
//! the ablations isolate.
//!
//! ART recovers reliable stream data (the papers' subject). Lost
//! DATAGRAM-only data is given up, as plain QUIC does (RFC 9221), and does
//! not touch the adapter's per-round levels or the bandit.
//!
//! ART-DQN's learner is shared: every policy an [`ArtFactory`] builds holds
//! the same [`dqn::Learner`] (see [`dqn`] for why and how runs stay
//! deterministic).

pub mod adapter;
pub mod dqn;
pub mod mab;
pub mod scheduler;

use std::path::Path;
use std::sync::{Arc, Mutex};

use transport::policy::{
    DataKind, Decision, ItemId, LostData, PacketFate, PacketTag, PathView, PolicyContext,
    PolicyFactory, PolicyState, RecoveryPolicy, SentView, MAX_REPLICAS,
};
use wire::time::Instant;

pub use adapter::{RedundancyAdapter, ReplicaWindow, StartLevels};
pub use dqn::{
    DqnAdapter, DqnAdapterConfig, Experience, ExperienceSink, Granularity, Learner, ModelNote,
    RewardKind,
};
pub use mab::{BanditAdapter, BanditConfig, BanditStrategy};
pub use scheduler::{BurstTracker, ReplicaScheduler};

use crate::desk::{self, DecisionPoint, SharedDesk};
use crate::error::SchemeError;

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
    /// A DQN adapter instead of test-and-verification (`art-dqn`).
    pub dqn: Option<DqnAdapterConfig>,
    /// Where the per-round levels R_n start (default 1; `or3` for 2n − 1 as
    /// in the authors' artifact). Only the test-and-verification adapter
    /// uses it.
    pub start_levels: StartLevels,
    /// Replicas bypass the congestion window, not pacing (journal §6.4;
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
            dqn: None,
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

    /// `art-dqn`: the DQN adapter with the scheduler.
    pub fn with_dqn(dqn: DqnAdapterConfig) -> Self {
        ArtConfig {
            dqn: Some(dqn),
            ..ArtConfig::default()
        }
    }

    /// The command-line name of this variant (parameters not included).
    pub fn variant_name(&self) -> String {
        if self.dqn.is_some() {
            return "art-dqn".into();
        }
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
        if let Some(d) = self.dqn {
            // The registry's own form when only the DQN's options differ.
            if ArtConfig::with_dqn(d) == *self {
                return dqn_name(&d);
            }
        }
        let canonical = match (self.bandit, self.fixed_r, self.scheduler) {
            _ if self.dqn.is_some() => ArtConfig::with_dqn(DqnAdapterConfig::default()),
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
        if let Some(d) = self.dqn {
            s.push_str(&format!(",gamma={},seed={}", d.gamma, d.seed));
            if !d.learn_online {
                s.push_str(",online=false");
            }
            if d.per != Granularity::Loss {
                s.push_str(&format!(",per={}", d.per.name()));
            }
            if d.reward != RewardKind::A2 {
                s.push_str(&format!(",reward={}", d.reward.name()));
            }
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
        if let Some(d) = self.dqn {
            if self.bandit.is_some() || self.fixed_r.is_some() {
                return bad("a DQN adapter excludes a bandit and a fixed level".into());
            }
            d.check().or_else(bad)?;
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
    Dqn(DqnAdapter),
    /// Levels from outside the transport (the Python environment,
    /// [`crate::steer`]), seeing ART-DQN's state.
    Steered(Steered),
}

/// A level source that defers to a driver: ART-DQN's state and round
/// bookkeeping ([`dqn::RoundBook`]), the decisions from a [`SharedDesk`],
/// the rewards (A.2's rule with penalty factor `penalty`) to it.
#[derive(Clone, Debug)]
struct Steered {
    book: dqn::RoundBook,
    desk: SharedDesk,
    penalty: f64,
    /// The state posted for each deferred round, used when it resumes.
    posted: std::collections::BTreeMap<(ItemId, u32), [f32; dqn::STATE_DIM]>,
}

impl Steered {
    /// The level for round `round` of `item`, or `None` after posting the
    /// decision point (the round is deferred).
    fn on_data_lost(&mut self, item: ItemId, round: u32, obs: dqn::Observation) -> Option<u32> {
        if let Some(state) = self.posted.remove(&(item, round)) {
            let answer = desk::lock(&self.desk).take_answer(item, round);
            let level = answer.map_or(1, |a| a.saturating_add(1).min(self.book.r_max()));
            self.book.decided(item, round, state, level);
            return Some(level);
        }
        if let Some(s) = self.book.on_data_lost(item, round, obs) {
            self.reward(&s);
        }
        let state = self.book.state(round);
        desk::lock(&self.desk).post(DecisionPoint {
            item,
            round,
            observation: state.to_vec(),
        });
        self.posted.insert((item, round), state);
        while self.posted.len() > mab::MAX_PENDING {
            self.posted.pop_first();
        }
        None
    }

    fn reward(&self, s: &dqn::Settled) {
        let r = dqn::round_reward(s.round, s.level, s.received, self.penalty);
        desk::lock(&self.desk).add_reward(r);
    }
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
    /// The model file an `art-dqn` learner started from (for the name).
    model: Option<Arc<str>>,
}

impl ArtPolicy {
    /// A policy for `config`, which is validated first. An `art-dqn`
    /// policy gets a fresh, untrained learner of its own.
    pub fn new(config: ArtConfig) -> Result<Self, SchemeError> {
        config.validate()?;
        let learner = match config.dqn {
            Some(d) => Some(Arc::new(Mutex::new(
                Learner::new(&d, config.r_max).map_err(|e| learn_error(&config, e))?,
            ))),
            None => None,
        };
        Self::build(config, learner)
    }

    /// An `art-dqn` policy deciding with (and training) `learner`, which
    /// may be shared with other policies.
    pub fn with_learner(
        config: ArtConfig,
        learner: Arc<Mutex<Learner>>,
    ) -> Result<Self, SchemeError> {
        config.validate()?;
        if config.dqn.is_none() {
            return Err(SchemeError::InvalidConfig {
                scheme: config.variant_name(),
                reason: "only art-dqn takes a learner".into(),
            });
        }
        Self::build(config, Some(learner))
    }

    fn build(config: ArtConfig, learner: Option<Arc<Mutex<Learner>>>) -> Result<Self, SchemeError> {
        let level = match (config.bandit, config.fixed_r) {
            _ if config.dqn.is_some() => match (config.dqn, learner) {
                (Some(d), Some(l)) => Level::Dqn(DqnAdapter::new(d, config.r_max, l)),
                _ => {
                    return Err(SchemeError::InvalidConfig {
                        scheme: config.variant_name(),
                        reason: "art-dqn needs a learner".into(),
                    })
                }
            },
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
            model: None,
        })
    }

    /// ART (`config`'s scheduler and opportunism) whose levels come from
    /// outside through `desk` ([`crate::steer`]): each round's decision is
    /// deferred with ART-DQN's state posted, and its outcome is rewarded
    /// with A.2's rule of penalty factor `penalty`. `config`'s adapter
    /// choice is ignored.
    pub fn steered(config: ArtConfig, desk: SharedDesk, penalty: f64) -> Self {
        let config = ArtConfig {
            fixed_r: None,
            bandit: None,
            dqn: None,
            ..config
        };
        ArtPolicy {
            config,
            level: Level::Steered(Steered {
                book: dqn::RoundBook::new(config.r_max),
                desk,
                penalty,
                posted: std::collections::BTreeMap::new(),
            }),
            scheduler: ReplicaScheduler::new(config.alpha, config.burst_window_rtts),
            sent: 0,
            model: None,
        }
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

    /// The DQN adapter, when this variant has one.
    pub fn dqn(&self) -> Option<&DqnAdapter> {
        match &self.level {
            Level::Dqn(d) => Some(d),
            _ => None,
        }
    }

    /// What the DQN adapter observes now (path and recent bursts).
    fn observation(&mut self, now: Instant, path: &PathView) -> dqn::Observation {
        dqn::Observation {
            srtt_s: path.srtt.as_secs_f64(),
            min_rtt_s: path.min_rtt.as_secs_f64(),
            rttvar_s: path.rttvar.as_secs_f64(),
            max_burst: self.scheduler.max_burst(now, path),
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
        if matches!(self.level, Level::Steered(_)) {
            return "env:art".into();
        }
        name_with_model(&self.config, self.model.as_deref())
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        let path = cx.path;
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        let obs = match self.level {
            Level::Dqn(_) | Level::Steered(_) => Some(self.observation(now, path)),
            _ => None,
        };
        let r = match &mut self.level {
            Level::Adaptive(a) => a.on_data_lost(lost.round),
            Level::Fixed(r) => *r,
            Level::Bandit(b) => b.on_data_lost(lost.item, lost.round, cx.rng),
            Level::Dqn(d) => match obs {
                Some(obs) => d.on_data_lost(lost.item, lost.round, now, obs, cx.rng),
                None => 1,
            },
            Level::Steered(st) => match obs.and_then(|o| st.on_data_lost(lost.item, lost.round, o))
            {
                Some(level) => level,
                // Posted: the driver answers before time moves on.
                None => return Decision::Defer,
            },
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
            Level::Dqn(d) => d.report_state(out),
            Level::Steered(s) => s.book.report_state(out),
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

    fn on_packet_acked(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        let (now, path) = (cx.now, cx.path);
        let obs = match &mut self.level {
            Level::Dqn(d) => {
                d.on_fate(false, fate.replica.is_some());
                fate.replica.map(|_| ())
            }
            Level::Steered(s) => {
                s.book.on_fate(false, fate.replica.is_some());
                fate.replica.map(|_| ())
            }
            _ => None,
        }
        .map(|()| self.observation(now, path));
        let Some(r) = fate.replica else { return };
        match &mut self.level {
            Level::Adaptive(a) => a.on_replica_acked(fate.pn),
            Level::Bandit(b) => b.on_replica_acked(r.item, r.round),
            Level::Dqn(d) => {
                if let Some(obs) = obs {
                    d.on_replica_acked(r.item, r.round, obs);
                }
            }
            Level::Steered(s) => {
                if let Some(settled) = obs.and_then(|o| s.book.on_replica_acked(r.item, r.round, o))
                {
                    s.reward(&settled);
                }
            }
            Level::Fixed(_) => {}
        }
    }

    fn on_packet_lost(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        let now = cx.now;
        let path = cx.path;
        self.scheduler.on_packet_lost(now, Self::index(fate), path);
        match &mut self.level {
            Level::Adaptive(a) if fate.replica.is_some() => a.on_replica_lost(fate.pn),
            Level::Dqn(d) => d.on_fate(true, fate.replica.is_some()),
            Level::Steered(s) => s.book.on_fate(true, fate.replica.is_some()),
            _ => {}
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
    /// A factory for `config`, rejected with the reason if unusable. An
    /// `art-dqn` factory makes one untrained learner that all its policies
    /// share.
    pub fn new(config: ArtConfig) -> Result<Self, SchemeError> {
        let prototype = ArtPolicy::new(config)?;
        Ok(ArtFactory { config, prototype })
    }

    /// An `art-dqn` factory whose shared learner starts from the model file
    /// at `model` (written by `artq train art-dqn` for the same `r_max`);
    /// a missing, unreadable or mismatched file is an error here.
    pub fn with_model(config: ArtConfig, model: &Path) -> Result<Self, SchemeError> {
        config.validate()?;
        let Some(d) = config.dqn else {
            return Err(SchemeError::InvalidConfig {
                scheme: config.variant_name(),
                reason: "only art-dqn loads a model".into(),
            });
        };
        let learner =
            Learner::load(&d, config.r_max, model).map_err(|e| learn_error(&config, e))?;
        let mut prototype = ArtPolicy::with_learner(config, Arc::new(Mutex::new(learner)))?;
        prototype.model = Some(model.display().to_string().into());
        Ok(ArtFactory { config, prototype })
    }

    /// An `art-dqn` factory whose policies share `learner` (a trained one,
    /// for example [`Learner::trained_copy`]); `label` stands for the model
    /// in the scheme's name, as a model file's path does.
    pub fn with_learner(
        config: ArtConfig,
        learner: Arc<Mutex<Learner>>,
        label: &str,
    ) -> Result<Self, SchemeError> {
        let mut prototype = ArtPolicy::with_learner(config, learner)?;
        prototype.model = Some(label.into());
        Ok(ArtFactory { config, prototype })
    }

    /// The configuration every policy gets.
    pub fn config(&self) -> &ArtConfig {
        &self.config
    }

    /// This `art-dqn` factory, its policies deciding with the same learner
    /// but handing their experiences to `sink` instead of learning (see
    /// [`dqn`], "Collecting"): for training episodes run in parallel. Any
    /// other variant is returned unchanged.
    pub fn collecting(&self, sink: ExperienceSink) -> ArtFactory {
        let mut f = self.clone();
        if let Level::Dqn(d) = &f.prototype.level {
            f.prototype.level = Level::Dqn(d.clone().collecting(sink));
        }
        f
    }

    /// The learner every `art-dqn` policy of this factory shares (to save
    /// it after training); `None` for the other variants.
    pub fn learner(&self) -> Option<Arc<Mutex<Learner>>> {
        self.prototype.dqn().map(|d| d.learner().clone())
    }
}

/// The registry form of an `art-dqn` configuration: `art-dqn`, or with its
/// options when they differ from the defaults.
fn dqn_name(d: &DqnAdapterConfig) -> String {
    let opts = d.options();
    if opts.is_empty() {
        "art-dqn".into()
    } else {
        format!("art-dqn:{}", opts.join(","))
    }
}

/// The name of `config`, with the model file its learner started from.
fn name_with_model(config: &ArtConfig, model: Option<&str>) -> String {
    match model {
        None => config.name(),
        Some(m) if config.name() == "art-dqn" => format!("art-dqn:model={m}"),
        Some(m) => format!("{},model={m}", config.name()),
    }
}

/// A learner that could not be made or loaded, as a scheme error.
fn learn_error(config: &ArtConfig, e: learn::LearnError) -> SchemeError {
    SchemeError::InvalidConfig {
        scheme: config.variant_name(),
        reason: e.to_string(),
    }
}

impl PolicyFactory for ArtFactory {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.prototype.clone())
    }

    fn name(&self) -> String {
        name_with_model(&self.config, self.prototype.model.as_deref())
    }
}

#[cfg(test)]
mod tests;
