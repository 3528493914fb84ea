//! ART-DQN: a Deep Q-Network in place of the Redundancy Adapter (ART
//! journal Appendix A.2, §8).
//!
//! The network picks a redundancy level from the connection's state
//! (epsilon-greedy while it explores), rounds are sent with that many
//! replicas, and when a round's outcome is known the decision is rewarded.
//! The experience `(s1, a, r, s2)` — s2 the state when the outcome is known,
//! "one RTT later" in the paper — goes to the replay memory, and the network
//! learns from it online.
//!
//! **Granularity** (`per=`, [`Granularity`]):
//! - `per=loss` (the default, what artq did before issue 25): every round of
//!   every lost item gets its own decision, with the item's round in the
//!   state.
//! - `per=connection`: the paper's granularity. A.2 says "state and action
//!   information between DQN and ART-DQN is transmitted not on a per-packet
//!   basis but on a per-connection basis", because "network states undergo
//!   minimal changes over short periods"; its DQN wrote one action that
//!   ART-DQN "consults when determining redundancy level", and got "results
//!   one RTT later". We read that as: one decision per connection per
//!   decision interval of one smoothed RTT, taken at the first loss of the
//!   interval from the connection's state (no item in it: the round value
//!   is 0), and applied to every round of every item lost until the next
//!   decision. Its reward is the mean of A.2's per-round rewards over the
//!   rounds sent at that level, known once all of them settled (or
//!   [`MAX_OPEN_EPOCHS`] decisions later, with those settled by then), and
//!   s2 is the connection's state at that moment.
//!
//! **Rewards** (`reward=`, [`RewardKind`]):
//! - `reward=a2` (the default), A.2's rule:
//!   ```text
//!   reward = 1 / (N·R)     if the round's replicas got through
//!          = −γ / (N·R)    if every replica of the round was lost
//!   ```
//!   with N the round, R the level and γ the paper's "magnitude ratio
//!   between rewards and penalties" (§8.1 singles out 1.05). Both cases
//!   scale with 1/(N·R), so the best level in a state does not depend on N,
//!   and below a replica loss of about 1/(2(1+γ)) level 1 earns most in
//!   every round: learned well, A.2's reward gives plain QUIC's levels with
//!   ART's scheduling, and N_max no better than QUIC's (docs/recovery.md,
//!   "ART-DQN off its training path").
//! - `reward=tail` (ours, issue 25): a round costs its replicas, and a lost
//!   round costs γ·4^(min(N,3)−1) more, in units of replicas (both over
//!   R_max): a copy is worth spending where a loss would push an item into
//!   a later round, which is what sets N_max. Each item is an episode that
//!   ends when a round gets through (terminal), with s2 the item's next
//!   round when it does not, and the discount 1: the network learns the
//!   expected cost of recovering an item from each round. γ defaults to
//!   [`TAIL_GAMMA`].
//!
//! Choices where the appendix is vague (also in docs/recovery.md):
//! - **Outcomes** exactly as ART-MAB's ([`super::mab`]): "received" = the
//!   first acknowledgement of any replica of the round; "unreceived" = the
//!   item entered its next round. Rounds never settled are forgotten after
//!   [`super::mab::MAX_PENDING`] newer ones.
//! - **State** (7 values in [0, 1], scale-free so that a model trained on
//!   some paths reads others the same way: no rate, time or size in absolute
//!   units): packet loss rate and replica loss rate (EWMAs over packet
//!   fates, weight 1/32), the queueing share of the smoothed RTT (1 −
//!   min_rtt/srtt), the RTT variation over the smoothed RTT (rttvar/srtt),
//!   the recent largest loss burst (ART's B_max over the burst window, 8
//!   RTTs by default) over 16, the last level chosen over R_max, and the
//!   round over 8 (0 for `per=connection`), each capped at 1. Before issue
//!   25 the third and fourth values were srtt and min_rtt over 200 ms:
//!   a model trained at one RTT saw another RTT as a new state.
//! - **One learner per connection's factory**: the paper runs one DQN
//!   process that every connection of the server reads and trains through
//!   shared memory. Here the learner sits behind an `Arc<Mutex<_>>` that
//!   every connection built by one factory shares (in `artq serve`, all of
//!   them; in a simulated run, its one connection; `artq train` keeps one
//!   learner over all its episodes).
//! - **Determinism**: the initial weights and replay sampling draw from a
//!   ChaCha8 stream seeded by the scheme's `seed=` (default 1), made when
//!   the factory is built; exploration draws from the connection's seeded
//!   RNG that the transport hands to every decision. No clock, no OS RNG:
//!   a simulated run with a seed is repeatable bit for bit.
//! - **Collecting** ([`ExperienceSink`]): a factory made with
//!   [`super::ArtFactory::collecting`] decides with the shared learner
//!   without changing it and hands its experiences to a sink instead of
//!   learning, so that `artq train --jobs N` can run episodes in parallel
//!   and learn from them afterwards in a fixed order.
//! - **Network and learning**: two hidden layers of 64 ReLU units, Adam at
//!   1e-3, Double DQN targets with discount 0.9 (1 for `reward=tail` with
//!   `per=loss`, whose episodes are items), batch 32, memory 10,000, target
//!   sync every 100 learning steps, one learning step per experience,
//!   exploration 0.1 decaying x0.9 per 1,000 steps to 0.01 (the Morvan DQN
//!   the paper adapted uses an epsilon-greedy policy of this kind; the
//!   appendix gives no values). A model loaded from a file starts at the
//!   floor, and learns online only once its new replay memory holds
//!   [`LOADED_WARMUP`] experiences: it has been trained.
//! - **Model files** carry their training options (γ, `per=`, `reward=`,
//!   seed, the state's version) as one safetensors metadata entry; a
//!   `model=FILE` run takes the options it does not name from there, and a
//!   file made for another state is refused.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use learn::{Activation, Dqn, DqnConfig, Epsilon, LearnError, OptimizerKind, Transition};
use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::ItemId;
use wire::time::{Duration, Instant};

use super::mab::MAX_PENDING;

/// Number of values in the state.
pub const STATE_DIM: usize = 7;

/// Version of the state's definition, recorded in model files: a model
/// trained on another definition reads its inputs wrongly, so loading one
/// is refused. 2: the scale-free state of issue 25.
pub const STATE_VERSION: u32 = 2;

/// Default γ of `reward=tail`: a lost round costs 4 replicas in round 1,
/// 16 in round 2, 64 from round 3 on. Chosen among 2, 4, 8 and 16 without
/// the held-out trace (on T-Mobile's training trace and a 2 Mbit/s link,
/// seeds the training never used): 2 learned plain QUIC's levels, 8 and 16 the same or
/// a lower N_max for more replicas than ART (docs/recovery.md).
pub const TAIL_GAMMA: f64 = 4.0;

/// `reward=tail`: the penalty of a lost round grows this many times per
/// round...
pub const TAIL_GROWTH: f64 = 4.0;

/// ...up to this round.
pub const TAIL_ROUNDS: u32 = 3;

/// A learner made from a trained model learns online only once its fresh
/// replay memory holds this many experiences (a tenth of the memory), so
/// that a new path's first few outcomes, replayed over and over, cannot
/// undo its training (measured: learning from the 32nd experience on, a
/// model's N_max on a held-out path rose from 1.83 to 2.00, docs/recovery.md).
pub const LOADED_WARMUP: usize = 1_000;

/// `per=connection`: decisions whose rounds have not all settled are
/// closed with what they have once this many newer decisions were taken.
pub const MAX_OPEN_EPOCHS: usize = 16;

/// How often the network decides (`per=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Granularity {
    /// `per=loss`: every round of every lost item is its own decision.
    #[default]
    Loss,
    /// `per=connection`: one decision per connection per smoothed RTT,
    /// applied to every loss until the next (A.2; see the module docs).
    Connection,
}

impl Granularity {
    /// The option's value (`loss`, `connection`).
    pub fn name(self) -> &'static str {
        match self {
            Granularity::Loss => "loss",
            Granularity::Connection => "connection",
        }
    }

    /// The granularity named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "loss" => Some(Granularity::Loss),
            "connection" => Some(Granularity::Connection),
            _ => None,
        }
    }
}

/// What a settled round earns (`reward=`; see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RewardKind {
    /// A.2's `±1/(N·R)`, the penalty scaled by γ.
    #[default]
    A2,
    /// Ours: the round's replicas, and γ·4^(min(N,3)−1) more when it was
    /// lost.
    Tail,
}

impl RewardKind {
    /// The option's value (`a2`, `tail`).
    pub fn name(self) -> &'static str {
        match self {
            RewardKind::A2 => "a2",
            RewardKind::Tail => "tail",
        }
    }

    /// The reward named `s`.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "a2" => Some(RewardKind::A2),
            "tail" => Some(RewardKind::Tail),
            _ => None,
        }
    }

    /// γ when the scheme names none: 1.05 for A.2 (§8.1), [`TAIL_GAMMA`].
    pub fn default_gamma(self) -> f64 {
        match self {
            RewardKind::A2 => 1.05,
            RewardKind::Tail => TAIL_GAMMA,
        }
    }
}

/// Parameters of ART-DQN (ART journal Appendix A.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqnAdapterConfig {
    /// γ: the penalty's magnitude relative to the reward (> 0; A.2's
    /// default 1.05, which §8.1 singles out; [`TAIL_GAMMA`] for
    /// `reward=tail`).
    pub gamma: f64,
    /// Seed of the network's initial weights and of replay sampling.
    pub seed: u64,
    /// Learn online from this connection's outcomes.
    pub learn_online: bool,
    /// Per loss or per connection.
    pub per: Granularity,
    /// The reward rule.
    pub reward: RewardKind,
}

impl Default for DqnAdapterConfig {
    fn default() -> Self {
        DqnAdapterConfig {
            gamma: RewardKind::A2.default_gamma(),
            seed: 1,
            learn_online: true,
            per: Granularity::Loss,
            reward: RewardKind::A2,
        }
    }
}

impl DqnAdapterConfig {
    /// Checks γ.
    pub fn check(&self) -> Result<(), String> {
        if !(self.gamma.is_finite() && self.gamma > 0.0 && self.gamma <= 100.0) {
            return Err(format!("gamma must be in (0, 100], got {}", self.gamma));
        }
        Ok(())
    }

    /// Whether each lost item is an episode of its own (`reward=tail`,
    /// `per=loss`): a round that gets through ends it.
    fn item_episodes(&self) -> bool {
        self.reward == RewardKind::Tail && self.per == Granularity::Loss
    }

    /// The network and learning parameters for levels `1..=r_max`.
    pub fn dqn(&self, r_max: u32) -> DqnConfig {
        DqnConfig {
            state_dim: STATE_DIM,
            actions: r_max.max(1) as usize,
            hidden: vec![64, 64],
            activation: Activation::Relu,
            gamma: if self.item_episodes() { 1.0 } else { 0.9 },
            learning_rate: 1e-3,
            optimizer: OptimizerKind::Adam,
            batch_size: 32,
            memory: 10_000,
            target_update: 100,
            epsilon: Epsilon {
                start: 0.1,
                factor: 0.9,
                every: 1_000,
                floor: 0.01,
            },
            double: true,
        }
    }

    /// The reward of round `round` sent at `level` of `r_max`.
    pub fn reward(&self, round: u32, level: u32, received: bool, r_max: u32) -> f64 {
        match self.reward {
            RewardKind::A2 => round_reward(round, level, received, self.gamma),
            RewardKind::Tail => tail_reward(round, level, received, self.gamma, r_max),
        }
    }

    /// The options that differ from the defaults, as `key=value` in the
    /// registry's order (`gamma`, `seed`, `online`, `per`, `reward`); γ
    /// counts as default when it is the reward's.
    pub fn options(&self) -> Vec<String> {
        let default = DqnAdapterConfig::default();
        let mut opts = Vec::new();
        if self.gamma != self.reward.default_gamma() {
            opts.push(format!("gamma={}", self.gamma));
        }
        if self.seed != default.seed {
            opts.push(format!("seed={}", self.seed));
        }
        if self.learn_online != default.learn_online {
            opts.push(format!("online={}", self.learn_online));
        }
        if self.per != default.per {
            opts.push(format!("per={}", self.per.name()));
        }
        if self.reward != default.reward {
            opts.push(format!("reward={}", self.reward.name()));
        }
        opts
    }

    /// What a model file records of its training (see [`ModelNote`]).
    pub fn note(&self, r_max: u32) -> ModelNote {
        ModelNote {
            gamma: self.gamma,
            seed: self.seed,
            per: self.per,
            reward: self.reward,
            r_max,
            state: STATE_VERSION,
        }
    }
}

/// The training options a model file records (its safetensors metadata
/// entry `artq`): `scheme=art-dqn;gamma=G;seed=N;per=P;reward=R;r_max=M;
/// state=V`. Exists so that `art-dqn:model=FILE` needs no options repeated,
/// and so that a model made for another state definition is refused
/// instead of read wrongly.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelNote {
    /// γ it was trained with.
    pub gamma: f64,
    /// Its `seed=`.
    pub seed: u64,
    /// Its granularity.
    pub per: Granularity,
    /// Its reward rule.
    pub reward: RewardKind,
    /// Its highest level.
    pub r_max: u32,
    /// Its state's version ([`STATE_VERSION`] when made by this artq).
    pub state: u32,
}

impl ModelNote {
    /// The metadata text.
    pub fn render(&self) -> String {
        format!(
            "scheme=art-dqn;gamma={};seed={};per={};reward={};r_max={};state={}",
            self.gamma,
            self.seed,
            self.per.name(),
            self.reward.name(),
            self.r_max,
            self.state
        )
    }

    /// Reads a metadata text; the error says which entry is wrong.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut note = ModelNote {
            gamma: f64::NAN,
            seed: 0,
            per: Granularity::Loss,
            reward: RewardKind::A2,
            r_max: 0,
            state: 0,
        };
        let mut seen = Vec::new();
        for entry in text.split(';') {
            let (key, value) = entry
                .split_once('=')
                .ok_or_else(|| format!("training record entry '{entry}' is not KEY=VALUE"))?;
            let bad = || format!("training record entry {key}='{value}' is not valid");
            match key {
                "scheme" if value == "art-dqn" => {}
                "scheme" => return Err(format!("a model of {value}, not of art-dqn")),
                "gamma" => note.gamma = value.parse().map_err(|_| bad())?,
                "seed" => note.seed = value.parse().map_err(|_| bad())?,
                "per" => note.per = Granularity::parse(value).ok_or_else(bad)?,
                "reward" => note.reward = RewardKind::parse(value).ok_or_else(bad)?,
                "r_max" => note.r_max = value.parse().map_err(|_| bad())?,
                "state" => note.state = value.parse().map_err(|_| bad())?,
                // Entries of later versions are ignored.
                _ => continue,
            }
            seen.push(key);
        }
        for key in ["scheme", "gamma", "seed", "per", "reward", "r_max", "state"] {
            if !seen.contains(&key) {
                return Err(format!("training record has no '{key}'"));
            }
        }
        Ok(note)
    }

    /// The note of the model file at `path`, checked against this artq's
    /// state and `r_max`. A file without a note was made before models
    /// recorded their training (and before the scale-free state) and is
    /// refused: its inputs would be read wrongly.
    pub fn of_file(path: &Path, r_max: u32) -> Result<Self, LearnError> {
        let mismatch = |reason: String| LearnError::Mismatch {
            path: path.to_owned(),
            reason,
        };
        let text = learn::model_note(path)?.ok_or_else(|| {
            mismatch(
                "the model has no training record: it was made by an older artq, whose \
                 ART-DQN state this one reads differently; train it again"
                    .into(),
            )
        })?;
        let note = ModelNote::parse(&text).map_err(mismatch)?;
        if note.state != STATE_VERSION {
            return Err(mismatch(format!(
                "the model was trained on ART-DQN state version {}, this artq uses {}; train it \
                 again",
                note.state, STATE_VERSION
            )));
        }
        if note.r_max != r_max {
            return Err(mismatch(format!(
                "the model decides levels 1..={}, this scheme 1..={r_max}",
                note.r_max
            )));
        }
        Ok(note)
    }
}

/// One experience `(s1, a, r, s2, done)`, as the learner stores it.
pub type Experience = Transition;

/// Where a collecting adapter puts its experiences (see the module docs).
pub type ExperienceSink = Arc<Mutex<Vec<Experience>>>;

/// The learner an ART-DQN factory's connections share.
#[derive(Debug)]
pub struct Learner {
    dqn: Dqn,
    config: DqnAdapterConfig,
    r_max: u32,
    /// Replay sampling (seeded; decisions use the connection's RNG).
    rng: ChaCha8Rng,
    /// Experiences stored.
    pub experiences: u64,
    /// Learning steps taken.
    pub learn_steps: u64,
    /// The loss of the latest learning step (NaN before the first).
    pub last_loss: f64,
    /// Experiences the replay memory must hold before learning (0: from
    /// the first full batch; [`LOADED_WARMUP`] for a trained model).
    warmup: usize,
}

impl Learner {
    /// A fresh, untrained learner for levels `1..=r_max`.
    pub fn new(config: &DqnAdapterConfig, r_max: u32) -> Result<Self, LearnError> {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let dqn = Dqn::new(config.dqn(r_max), &mut rng)?;
        Ok(Learner {
            dqn,
            config: *config,
            r_max,
            rng,
            experiences: 0,
            learn_steps: 0,
            last_loss: f64::NAN,
            warmup: 0,
        })
    }

    /// A learner with the weights of the model file at `path` (written by
    /// [`Learner::save`] for the same `r_max` and state), exploring at the
    /// floor, learning online after [`LOADED_WARMUP`] experiences. `config` should carry the file's options where the user named
    /// none ([`ModelNote::of_file`]).
    pub fn load(config: &DqnAdapterConfig, r_max: u32, path: &Path) -> Result<Self, LearnError> {
        ModelNote::of_file(path, r_max)?;
        let mut cfg = config.dqn(r_max);
        cfg.epsilon.start = cfg.epsilon.floor;
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let mut dqn = Dqn::new(cfg, &mut rng)?;
        dqn.load(path)?;
        Ok(Learner {
            dqn,
            config: *config,
            r_max,
            rng,
            experiences: 0,
            learn_steps: 0,
            last_loss: f64::NAN,
            warmup: LOADED_WARMUP,
        })
    }

    /// A learner with this one's network, as [`Learner::load`] would make
    /// it from this learner's model file (exploring at the floor, empty
    /// replay memory, no counts, the same warm-up), for `config` (whose network must have the
    /// same shape). Lets one trained network start several independent
    /// runs without a file.
    pub fn trained_copy(&self, config: &DqnAdapterConfig) -> Result<Learner, LearnError> {
        let mut cfg = config.dqn(self.r_max);
        cfg.epsilon.start = cfg.epsilon.floor;
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let mut dqn = Dqn::new(cfg, &mut rng)?;
        dqn.copy_weights(&self.dqn)?;
        Ok(Learner {
            dqn,
            config: *config,
            r_max: self.r_max,
            rng,
            experiences: 0,
            learn_steps: 0,
            last_loss: f64::NAN,
            warmup: LOADED_WARMUP,
        })
    }

    /// Write the network to `path` (safetensors), with its training options
    /// ([`ModelNote`]).
    pub fn save(&self, path: &Path) -> Result<(), LearnError> {
        let note = self.config.note(self.r_max).render();
        self.dqn.save_with_note(path, Some(&note))
    }

    /// The agent.
    pub fn dqn(&self) -> &Dqn {
        &self.dqn
    }

    /// Store one experience and, if `learn`, take one learning step (once
    /// the memory holds a batch, and for a trained model
    /// [`LOADED_WARMUP`] experiences).
    pub fn remember(&mut self, t: Transition, learn: bool) {
        if self.dqn.remember(t).is_err() {
            return;
        }
        self.experiences += 1;
        if learn && self.dqn.memory_len() >= self.warmup {
            if let Ok(Some(loss)) = self.dqn.learn(&mut self.rng) {
                self.learn_steps += 1;
                self.last_loss = f64::from(loss);
            }
        }
    }
}

/// What the adapter observes of the connection, turned into the state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Smoothed RTT, seconds.
    pub srtt_s: f64,
    /// Minimum RTT, seconds.
    pub min_rtt_s: f64,
    /// RTT variation, seconds.
    pub rttvar_s: f64,
    /// Largest recent loss burst, packets (ART's B_max).
    pub max_burst: u64,
}

/// EWMA weight of the loss-rate features.
const RATE_WEIGHT: f64 = 1.0 / 32.0;

/// The state of one connection, in the order the network reads it (see the
/// module docs); `round` 0 for a decision about no item (`per=connection`).
pub fn state(
    obs: &Observation,
    loss_rate: f64,
    replica_loss_rate: f64,
    last_level: u32,
    r_max: u32,
    round: u32,
) -> [f32; STATE_DIM] {
    let unit = |x: f64| {
        if x.is_finite() {
            x.clamp(0.0, 1.0) as f32
        } else {
            0.0
        }
    };
    let of_srtt = |x: f64| {
        if obs.srtt_s > 0.0 {
            x / obs.srtt_s
        } else {
            0.0
        }
    };
    [
        unit(loss_rate),
        unit(replica_loss_rate),
        unit(1.0 - of_srtt(obs.min_rtt_s.min(obs.srtt_s))),
        unit(of_srtt(obs.rttvar_s)),
        unit(obs.max_burst as f64 / 16.0),
        unit(f64::from(last_level) / f64::from(r_max.max(1))),
        unit(f64::from(round) / 8.0),
    ]
}

/// A.2's reward (and A.1's, with its η as `penalty`) for round `round`
/// of an item sent at `level`: `1/(N·R)` when the round got through,
/// `−penalty/(N·R)` when every replica was lost.
pub fn round_reward(round: u32, level: u32, received: bool, penalty: f64) -> f64 {
    let nr = f64::from(round.max(1)) * f64::from(level.max(1));
    if received {
        1.0 / nr
    } else {
        -penalty / nr
    }
}

/// `reward=tail` (ours) for round `round` sent at `level` of `r_max`:
/// `−level/r_max` when it got through, `−(level + γ·4^(min(N,3)−1))/r_max`
/// when every replica was lost.
pub fn tail_reward(round: u32, level: u32, received: bool, gamma: f64, r_max: u32) -> f64 {
    let mut cost = f64::from(level.max(1));
    if !received {
        let steps = round.clamp(1, TAIL_ROUNDS) - 1;
        cost += gamma * TAIL_GROWTH.powi(steps as i32);
    }
    -cost / f64::from(r_max.max(1))
}

/// A decision waiting for its outcome.
#[derive(Clone, Debug)]
struct Pending {
    state: [f32; STATE_DIM],
    level: u32,
    epoch: Option<u64>,
}

/// A round whose outcome became known: the experience `(s1, a, r, s2)`
/// without the reward, which is the decider's (ART-DQN's γ, or a
/// Python environment's preset).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Settled {
    /// The state the level was chosen in.
    pub state: [f32; STATE_DIM],
    /// The level chosen.
    pub level: u32,
    /// The round (N).
    pub round: u32,
    /// Whether a replica of the round got through.
    pub received: bool,
    /// The state when the outcome became known: the item's next round when
    /// it was lost, a first round when it got through.
    pub next_state: [f32; STATE_DIM],
    /// The `per=connection` decision the round belonged to.
    pub epoch: Option<u64>,
}

/// ART-DQN's view of one connection: the features of its state and the
/// rounds whose outcome is awaited. The one definition of the state and of
/// when a round settles, shared by [`DqnAdapter`] (which decides with the
/// network) and by a decider outside the transport (the Python
/// environment's steered ART, [`crate::steer`]).
#[derive(Clone, Debug)]
pub struct RoundBook {
    r_max: u32,
    pending: BTreeMap<(ItemId, u32), Pending>,
    loss_rate: f64,
    replica_loss_rate: f64,
    last_level: u32,
    /// The latest observation (refreshed by every callback that has one).
    obs: Observation,
}

impl RoundBook {
    /// A connection with no history, levels `1..=r_max`.
    pub fn new(r_max: u32) -> Self {
        RoundBook {
            r_max: r_max.max(1),
            pending: BTreeMap::new(),
            loss_rate: 0.0,
            replica_loss_rate: 0.0,
            last_level: 1,
            obs: Observation {
                srtt_s: 0.0,
                min_rtt_s: 0.0,
                rttvar_s: 0.0,
                max_burst: 0,
            },
        }
    }

    /// The highest level.
    pub fn r_max(&self) -> u32 {
        self.r_max
    }

    /// The level chosen last (1 before any decision).
    pub fn last_level(&self) -> u32 {
        self.last_level
    }

    /// The latest observation.
    pub fn observation(&self) -> &Observation {
        &self.obs
    }

    /// The state for a decision about round `round` (0: about the
    /// connection, no item).
    pub fn state(&self, round: u32) -> [f32; STATE_DIM] {
        state(
            &self.obs,
            self.loss_rate,
            self.replica_loss_rate,
            self.last_level,
            self.r_max,
            round,
        )
    }

    /// Round `round` of `item` needs a level: refreshes the observation and
    /// settles round − 1 as lost (the transport's rule: a round starts when
    /// every replica of the previous one was lost).
    pub fn on_data_lost(&mut self, item: ItemId, round: u32, obs: Observation) -> Option<Settled> {
        self.obs = obs;
        if round > 1 {
            self.settle(item, round - 1, false)
        } else {
            None
        }
    }

    /// `level` was chosen for round `round` of `item` in `state`.
    pub fn decided(&mut self, item: ItemId, round: u32, state: [f32; STATE_DIM], level: u32) {
        self.decided_in(item, round, state, level, None);
    }

    /// As [`RoundBook::decided`], for a round sent at the level of
    /// `per=connection` decision `epoch`. Returns the decision of a round
    /// forgotten to make room (whose outcome will never be known), if any.
    pub fn decided_in(
        &mut self,
        item: ItemId,
        round: u32,
        state: [f32; STATE_DIM],
        level: u32,
        epoch: Option<u64>,
    ) -> Vec<Option<u64>> {
        self.last_level = level;
        self.pending.insert(
            (item, round.max(1)),
            Pending {
                state,
                level,
                epoch,
            },
        );
        let mut forgotten = Vec::new();
        while self.pending.len() > MAX_PENDING {
            if let Some((_, p)) = self.pending.pop_first() {
                forgotten.push(p.epoch);
            }
        }
        forgotten
    }

    /// A packet's fate: feeds the loss-rate features (`replica`: it carried
    /// a replica).
    pub fn on_fate(&mut self, lost: bool, replica: bool) {
        let x = if lost { 1.0 } else { 0.0 };
        self.loss_rate += RATE_WEIGHT * (x - self.loss_rate);
        if replica {
            self.replica_loss_rate += RATE_WEIGHT * (x - self.replica_loss_rate);
        }
    }

    /// A replica of round `round` of `item` was acknowledged: that round got
    /// through.
    pub fn on_replica_acked(
        &mut self,
        item: ItemId,
        round: u32,
        obs: Observation,
    ) -> Option<Settled> {
        self.obs = obs;
        self.settle(item, round, true)
    }

    /// For qlog: the loss-rate features.
    pub fn report_state(&self, out: &mut transport::policy::PolicyState) {
        out.set("level", f64::from(self.last_level));
        out.set("loss_rate", self.loss_rate);
        out.set("replica_loss_rate", self.replica_loss_rate);
    }

    fn settle(&mut self, item: ItemId, round: u32, received: bool) -> Option<Settled> {
        let p = self.pending.remove(&(item, round))?;
        Some(Settled {
            state: p.state,
            level: p.level,
            round,
            received,
            next_state: self.state(if received { 1 } else { round + 1 }),
            epoch: p.epoch,
        })
    }
}

/// A `per=connection` decision and the rounds sent at its level.
#[derive(Clone, Debug)]
struct Epoch {
    state: [f32; STATE_DIM],
    level: u32,
    /// Rounds sent at its level whose outcome is awaited.
    outstanding: u32,
    /// Sum of the rewards of its settled rounds.
    reward_sum: f64,
    /// Its settled rounds.
    settled: u32,
    /// A newer decision has replaced it: no round joins it any more.
    closed: bool,
}

/// The `per=connection` decisions of one connection.
#[derive(Clone, Debug, Default)]
struct Epochs {
    /// The decision in force: its id and when it was taken.
    current: Option<(u64, Instant)>,
    open: BTreeMap<u64, Epoch>,
    next_id: u64,
}

/// ART-DQN's Redundancy Adapter for one connection.
#[derive(Clone, Debug)]
pub struct DqnAdapter {
    config: DqnAdapterConfig,
    learner: Arc<Mutex<Learner>>,
    book: RoundBook,
    epochs: Epochs,
    sink: Option<ExperienceSink>,
    /// Decisions made (levels chosen by the network).
    pub decisions: u64,
}

impl DqnAdapter {
    /// An adapter over levels `1..=r_max` deciding with the shared `learner`.
    pub fn new(config: DqnAdapterConfig, r_max: u32, learner: Arc<Mutex<Learner>>) -> Self {
        DqnAdapter {
            config,
            learner,
            book: RoundBook::new(r_max),
            epochs: Epochs::default(),
            sink: None,
            decisions: 0,
        }
    }

    /// This adapter, handing its experiences to `sink` instead of the
    /// learner, which it then only reads (see the module docs).
    pub fn collecting(mut self, sink: ExperienceSink) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The shared learner.
    pub fn learner(&self) -> &Arc<Mutex<Learner>> {
        &self.learner
    }

    /// Its parameters.
    pub fn config(&self) -> &DqnAdapterConfig {
        &self.config
    }

    /// The level chosen last (1 before any decision).
    pub fn last_level(&self) -> u32 {
        self.book.last_level()
    }

    /// For qlog (`artq:policy_state`): the last level, the exploration
    /// rate, the latest learning loss, and the learner's counts.
    pub fn report_state(&self, out: &mut transport::policy::PolicyState) {
        self.book.report_state(out);
        let l = self.lock();
        out.set("epsilon", l.dqn.epsilon());
        if l.last_loss.is_finite() {
            out.set("td_loss", l.last_loss);
        }
        out.set("experiences", l.experiences as f64);
        out.set("learn_steps", l.learn_steps as f64);
    }

    fn lock(&self) -> MutexGuard<'_, Learner> {
        // A panic while holding the lock (a bug) must not take every other
        // connection down with it: the learner's state is still usable.
        self.learner.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(test)]
    fn current_state(&self, round: u32) -> [f32; STATE_DIM] {
        self.book.state(round)
    }

    /// The network's level in state `s` (epsilon-greedy).
    fn act(&mut self, s: &[f32; STATE_DIM], mut rng: &mut dyn RngCore) -> u32 {
        // A state is always finite and of the network's size, so `act`
        // cannot fail; level 1 (plain QUIC's choice) if it ever did.
        let action = self.lock().dqn.act(s, &mut rng).unwrap_or(0);
        self.decisions += 1;
        (action as u32 + 1).min(self.book.r_max())
    }

    /// Choose the level for round `round` of `item`, lost at `now`.
    pub fn on_data_lost(
        &mut self,
        item: ItemId,
        round: u32,
        now: Instant,
        obs: Observation,
        rng: &mut dyn RngCore,
    ) -> u32 {
        if let Some(settled) = self.book.on_data_lost(item, round, obs) {
            self.on_settled(settled);
        }
        match self.config.per {
            Granularity::Loss => {
                let s = self.book.state(round);
                let level = self.act(&s, rng);
                self.book.decided(item, round, s, level);
                level
            }
            Granularity::Connection => {
                let (id, state, level) = self.connection_level(now, rng);
                let forgotten = self.book.decided_in(item, round, state, level, Some(id));
                if let Some(e) = self.epochs.open.get_mut(&id) {
                    e.outstanding += 1;
                }
                for epoch in forgotten.into_iter().flatten() {
                    self.round_done(epoch, None);
                }
                level
            }
        }
    }

    /// `per=connection`: the decision in force at `now`, taking a new one
    /// when none was taken in the last smoothed RTT.
    fn connection_level(
        &mut self,
        now: Instant,
        rng: &mut dyn RngCore,
    ) -> (u64, [f32; STATE_DIM], u32) {
        let interval = Duration::from_secs_f64(self.book.observation().srtt_s.max(0.0))
            .max(Duration::from_millis(1));
        let current = self.epochs.current.filter(|&(id, at)| {
            now.saturating_duration_since(at) < interval && self.epochs.open.contains_key(&id)
        });
        if let Some((id, _)) = current {
            if let Some(e) = self.epochs.open.get(&id) {
                return (id, e.state, e.level);
            }
        }
        if let Some((old, _)) = self.epochs.current.take() {
            let done = match self.epochs.open.get_mut(&old) {
                Some(e) => {
                    e.closed = true;
                    e.outstanding == 0
                }
                None => false,
            };
            if done {
                self.finish_epoch(old);
            }
        }
        let state = self.book.state(0);
        let level = self.act(&state, rng);
        let id = self.epochs.next_id;
        self.epochs.next_id += 1;
        self.epochs.open.insert(
            id,
            Epoch {
                state,
                level,
                outstanding: 0,
                reward_sum: 0.0,
                settled: 0,
                closed: false,
            },
        );
        self.epochs.current = Some((id, now));
        while self.epochs.open.len() > MAX_OPEN_EPOCHS {
            match self.epochs.open.first_key_value() {
                Some((&oldest, _)) => self.finish_epoch(oldest),
                None => break,
            }
        }
        (id, state, level)
    }

    /// A packet's fate: feeds the loss-rate features (`replica`: it carried
    /// a replica).
    pub fn on_fate(&mut self, lost: bool, replica: bool) {
        self.book.on_fate(lost, replica);
    }

    /// A replica of round `round` of `item` was acknowledged: that round got
    /// through.
    pub fn on_replica_acked(&mut self, item: ItemId, round: u32, obs: Observation) {
        if let Some(settled) = self.book.on_replica_acked(item, round, obs) {
            self.on_settled(settled);
        }
    }

    /// The reward of a round `round` sent at `level` (see [`RewardKind`]).
    pub fn reward(&self, round: u32, level: u32, received: bool) -> f64 {
        self.config
            .reward(round, level, received, self.book.r_max())
    }

    fn on_settled(&mut self, p: Settled) {
        let reward = self.reward(p.round, p.level, p.received);
        match (self.config.per, p.epoch) {
            (Granularity::Connection, Some(epoch)) => self.round_done(epoch, Some(reward)),
            _ => {
                let done = self.config.item_episodes() && p.received;
                self.record(Transition {
                    state: p.state.to_vec(),
                    action: p.level as usize - 1,
                    reward: reward as f32,
                    next_state: p.next_state.to_vec(),
                    done,
                });
            }
        }
    }

    /// A round of `per=connection` decision `epoch` settled with `reward`
    /// (`None`: forgotten, outcome unknown).
    fn round_done(&mut self, epoch: u64, reward: Option<f64>) {
        let Some(e) = self.epochs.open.get_mut(&epoch) else {
            return;
        };
        e.outstanding = e.outstanding.saturating_sub(1);
        if let Some(r) = reward {
            e.reward_sum += r;
            e.settled += 1;
        }
        if e.closed && e.outstanding == 0 {
            self.finish_epoch(epoch);
        }
    }

    /// Close `per=connection` decision `epoch`: its experience is its state,
    /// level, the mean reward of its settled rounds and the state now.
    fn finish_epoch(&mut self, epoch: u64) {
        let Some(e) = self.epochs.open.remove(&epoch) else {
            return;
        };
        if self.epochs.current.is_some_and(|(id, _)| id == epoch) {
            self.epochs.current = None;
        }
        if e.settled == 0 {
            return;
        }
        self.record(Transition {
            state: e.state.to_vec(),
            action: e.level as usize - 1,
            reward: (e.reward_sum / f64::from(e.settled)) as f32,
            next_state: self.book.state(0).to_vec(),
            done: false,
        });
    }

    /// An experience: to the sink when collecting, else to the learner
    /// (which learns from it when online).
    fn record(&mut self, t: Transition) {
        match &self.sink {
            Some(sink) => sink.lock().unwrap_or_else(|p| p.into_inner()).push(t),
            None => {
                let online = self.config.learn_online;
                self.lock().remember(t, online);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs() -> Observation {
        Observation {
            srtt_s: 0.05,
            min_rtt_s: 0.03,
            rttvar_s: 0.01,
            max_burst: 2,
        }
    }

    fn adapter(config: DqnAdapterConfig, r_max: u32) -> DqnAdapter {
        let learner = Arc::new(Mutex::new(Learner::new(&config, r_max).unwrap()));
        DqnAdapter::new(config, r_max, learner)
    }

    fn per_connection() -> DqnAdapterConfig {
        DqnAdapterConfig {
            per: Granularity::Connection,
            ..DqnAdapterConfig::default()
        }
    }

    fn ms(t: u64) -> Instant {
        Instant::from_millis(t)
    }

    #[test]
    fn rewards_follow_appendix_a2() {
        let a = adapter(DqnAdapterConfig::default(), 4);
        assert_eq!(a.reward(1, 1, true), 1.0);
        assert_eq!(a.reward(2, 2, true), 0.25);
        assert!((a.reward(1, 2, false) + 1.05 / 2.0).abs() < 1e-12);
        assert!(DqnAdapterConfig {
            gamma: 0.0,
            ..DqnAdapterConfig::default()
        }
        .check()
        .is_err());
    }

    #[test]
    fn the_tail_reward_charges_replicas_and_lost_rounds_more_each_round() {
        let c = DqnAdapterConfig {
            reward: RewardKind::Tail,
            gamma: 2.0,
            ..DqnAdapterConfig::default()
        };
        let a = adapter(c, 8);
        assert_eq!(a.reward(1, 1, true), -1.0 / 8.0);
        assert_eq!(a.reward(5, 3, true), -3.0 / 8.0);
        assert_eq!(a.reward(1, 1, false), -(1.0 + 2.0) / 8.0);
        assert_eq!(a.reward(2, 1, false), -(1.0 + 2.0 * TAIL_GROWTH) / 8.0);
        // The growth stops at TAIL_ROUNDS.
        let last = f64::from(TAIL_ROUNDS - 1);
        let cap = -(2.0 + 2.0 * TAIL_GROWTH.powf(last)) / 8.0;
        assert_eq!(a.reward(TAIL_ROUNDS, 2, false), cap);
        assert_eq!(a.reward(TAIL_ROUNDS + 5, 2, false), cap);
        // Items are episodes: discount 1, and only for per=loss.
        assert_eq!(c.dqn(8).gamma, 1.0);
        let pc = DqnAdapterConfig {
            per: Granularity::Connection,
            ..c
        };
        assert_eq!(pc.dqn(8).gamma, 0.9);
        assert_eq!(DqnAdapterConfig::default().dqn(8).gamma, 0.9);
    }

    #[test]
    fn the_state_is_scale_free_and_bounded() {
        let s = state(&obs(), 0.05, 0.5, 2, 4, 1);
        assert_eq!(s.len(), STATE_DIM);
        assert!(s.iter().all(|v| (0.0..=1.0).contains(v)), "{s:?}");
        // Queueing share 1 - 30/50, variation 10/50.
        assert!(
            (s[2] - 0.4).abs() < 1e-6 && (s[3] - 0.2).abs() < 1e-6,
            "{s:?}"
        );
        assert!((s[5] - 0.5).abs() < 1e-6);
        // The same path ten times slower reads the same.
        let slow = Observation {
            srtt_s: 0.5,
            min_rtt_s: 0.3,
            rttvar_s: 0.1,
            max_burst: 2,
        };
        assert_eq!(state(&slow, 0.05, 0.5, 2, 4, 1), s);
        let huge = Observation {
            srtt_s: 100.0,
            min_rtt_s: 1000.0,
            rttvar_s: f64::INFINITY,
            max_burst: u64::MAX,
        };
        let s = state(&huge, 7.0, -1.0, 99, 4, u32::MAX);
        assert!(s.iter().all(|v| (0.0..=1.0).contains(v)), "{s:?}");
        let zero = Observation {
            srtt_s: 0.0,
            min_rtt_s: 0.0,
            rttvar_s: 0.0,
            max_burst: 0,
        };
        let s = state(&zero, f64::NAN, 0.0, 1, 0, 0);
        assert!(s.iter().all(|v| (0.0..=1.0).contains(v)), "{s:?}");
        assert_eq!(s[6], 0.0, "round 0: a decision about no item");
    }

    #[test]
    fn every_settled_round_is_an_experience_and_a_learning_step() {
        let mut a = adapter(DqnAdapterConfig::default(), 4);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for i in 0..100u64 {
            let item = ItemId(i);
            let level = a.on_data_lost(item, 1, ms(i), obs(), &mut rng);
            assert!((1..=4).contains(&level));
            if i % 3 == 0 {
                // Lost: the item enters round 2, which settles round 1.
                a.on_data_lost(item, 2, ms(i), obs(), &mut rng);
                a.on_replica_acked(item, 2, obs());
            } else {
                a.on_replica_acked(item, 1, obs());
            }
            // A second acknowledgement of the same round changes nothing.
            a.on_replica_acked(item, 1, obs());
        }
        let l = a.lock();
        assert_eq!(l.experiences, 100 + 34);
        assert_eq!(
            l.learn_steps,
            l.experiences - 31,
            "learning starts at a full batch"
        );
        assert_eq!(a.decisions, 134);
    }

    #[test]
    fn a_costly_penalty_teaches_more_copies_where_one_copy_fails() {
        // Every round with one replica is lost, every round with more gets
        // through: the learner must come to prefer level >= 2 in this state.
        let config = DqnAdapterConfig {
            gamma: 2.0,
            ..DqnAdapterConfig::default()
        };
        let mut a = adapter(config, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut item = 0;
        for _ in 0..3000 {
            item += 1;
            let mut round = 1;
            loop {
                let level = a.on_data_lost(ItemId(item), round, ms(item), obs(), &mut rng);
                if level >= 2 || round == 4 {
                    a.on_replica_acked(ItemId(item), round, obs());
                    break;
                }
                round += 1;
            }
        }
        let s = a.current_state(1);
        let greedy = a.lock().dqn.greedy(&s).unwrap();
        assert!(
            greedy >= 1,
            "greedy level {} in a path where one copy never arrives",
            greedy + 1
        );
    }

    #[test]
    fn the_tail_reward_teaches_copies_for_late_rounds_only() {
        // A path where each copy is lost with probability 0.2, drawn here.
        // Under reward=tail with gamma 2 the expected costs (in replicas,
        // from the round on) are 1.89 for one copy in round 1 against 2.18
        // for two, and 3.26 for one copy in round 2 against 2.45 for two:
        // one copy first, more for a later round, whose loss costs more.
        let config = DqnAdapterConfig {
            reward: RewardKind::Tail,
            gamma: 2.0,
            ..DqnAdapterConfig::default()
        };
        let mut a = adapter(config, 3);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut draw = ChaCha8Rng::seed_from_u64(4);
        for item in 0..8000u64 {
            let mut round = 1;
            loop {
                let level = a.on_data_lost(ItemId(item), round, ms(item), obs(), &mut rng);
                let lost = (0..level).all(|_| rand::Rng::gen_bool(&mut draw, 0.2));
                if !lost || round == 6 {
                    a.on_replica_acked(ItemId(item), round, obs());
                    break;
                }
                round += 1;
            }
        }
        let l = a.lock();
        let level = |round: u32| l.dqn.greedy(&a.book.state(round)).unwrap() + 1;
        assert_eq!(level(1), 1, "round 1");
        assert!(level(2) >= 2, "round 2");
    }

    #[test]
    fn per_connection_decides_once_per_rtt_for_every_loss() {
        let mut a = adapter(per_connection(), 8);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // srtt 50 ms: losses at 0, 10, 20, 40 ms share one decision.
        let levels: Vec<u32> = [0, 10, 20, 40]
            .iter()
            .enumerate()
            .map(|(i, &t)| a.on_data_lost(ItemId(i as u64), 1, ms(t), obs(), &mut rng))
            .collect();
        assert_eq!(a.decisions, 1);
        assert!(levels.iter().all(|&l| l == levels[0]), "{levels:?}");
        // Round 2 of item 0 at 45 ms: still the same decision.
        assert_eq!(
            a.on_data_lost(ItemId(0), 2, ms(45), obs(), &mut rng),
            levels[0]
        );
        assert_eq!(a.decisions, 1);
        // One smoothed RTT after the decision, the next loss takes a new one.
        a.on_data_lost(ItemId(9), 1, ms(50), obs(), &mut rng);
        assert_eq!(a.decisions, 2);
        // The state of a connection decision names no round.
        let e = &a.epochs.open[&1];
        assert_eq!(e.state[6], 0.0);
    }

    #[test]
    fn per_connection_rewards_the_mean_of_its_rounds_once_they_settled() {
        let mut a = adapter(per_connection(), 8);
        let sink: ExperienceSink = Arc::default();
        a = a.collecting(sink.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let l0 = a.on_data_lost(ItemId(0), 1, ms(0), obs(), &mut rng);
        a.on_data_lost(ItemId(1), 1, ms(5), obs(), &mut rng);
        a.on_data_lost(ItemId(2), 1, ms(6), obs(), &mut rng);
        // Item 0 gets through, item 1 is lost (its round 2 starts later,
        // in the next decision), item 2 is still out.
        a.on_replica_acked(ItemId(0), 1, obs());
        a.on_data_lost(ItemId(1), 2, ms(60), obs(), &mut rng);
        assert!(
            sink.lock().unwrap().is_empty(),
            "decision 0 still awaits item 2"
        );
        a.on_replica_acked(ItemId(2), 1, obs());
        let got = sink.lock().unwrap().clone();
        assert_eq!(got.len(), 1, "{got:?}");
        let t = &got[0];
        assert_eq!(t.action as u32 + 1, l0);
        let expect =
            (2.0 * round_reward(1, l0, true, 1.05) + round_reward(1, l0, false, 1.05)) / 3.0;
        assert!((f64::from(t.reward) - expect).abs() < 1e-6, "{t:?}");
        assert!(!t.done);
        assert_eq!(t.state[6], 0.0);
        // Collecting never touches the learner.
        let l = a.lock();
        assert_eq!((l.experiences, l.learn_steps), (0, 0));
    }

    #[test]
    fn per_connection_closes_decisions_that_never_settle() {
        let mut a = adapter(per_connection(), 8);
        let sink: ExperienceSink = Arc::default();
        a = a.collecting(sink.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // Each decision sends two rounds; one settles, one never does.
        for k in 0..(MAX_OPEN_EPOCHS as u64 + 10) {
            let t = k * 100;
            a.on_data_lost(ItemId(2 * k), 1, ms(t), obs(), &mut rng);
            a.on_data_lost(ItemId(2 * k + 1), 1, ms(t + 1), obs(), &mut rng);
            a.on_replica_acked(ItemId(2 * k), 1, obs());
        }
        assert!(a.epochs.open.len() <= MAX_OPEN_EPOCHS);
        // The oldest decisions were closed with their settled round.
        assert_eq!(sink.lock().unwrap().len(), 10);
    }

    #[test]
    fn per_loss_collecting_hands_experiences_to_the_sink() {
        let c = DqnAdapterConfig {
            reward: RewardKind::Tail,
            ..DqnAdapterConfig::default()
        };
        let sink: ExperienceSink = Arc::default();
        let mut a = adapter(c, 8).collecting(sink.clone());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        a.on_data_lost(ItemId(0), 1, ms(0), obs(), &mut rng);
        a.on_data_lost(ItemId(0), 2, ms(90), obs(), &mut rng);
        a.on_replica_acked(ItemId(0), 2, obs());
        let got = sink.lock().unwrap().clone();
        assert_eq!(got.len(), 2);
        // Round 1 was lost: the item goes on to round 2 (not terminal);
        // round 2 got through: the item's episode ends.
        assert!(!got[0].done && got[1].done, "{got:?}");
        assert!((got[0].next_state[6] - 0.25).abs() < 1e-6);
        assert_eq!(a.lock().experiences, 0);
    }

    #[test]
    fn models_round_trip_with_their_training_record() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("art-dqn.safetensors");
        let config = DqnAdapterConfig {
            gamma: 3.5,
            per: Granularity::Connection,
            reward: RewardKind::Tail,
            seed: 9,
            ..DqnAdapterConfig::default()
        };
        let trained = Learner::new(&config, 4).unwrap();
        trained.save(&path).unwrap();
        let note = ModelNote::of_file(&path, 4).unwrap();
        assert_eq!(note, config.note(4));
        assert_eq!(ModelNote::parse(&note.render()).unwrap(), note);
        let loaded = Learner::load(&config, 4, &path).unwrap();
        let s = state(&obs(), 0.1, 0.2, 1, 4, 1);
        assert_eq!(
            loaded.dqn().q_values(&s).unwrap(),
            trained.dqn().q_values(&s).unwrap()
        );
        assert_eq!(loaded.dqn().epsilon(), 0.01);
        // A copy in memory is what loading the file gives.
        let copy = trained.trained_copy(&config).unwrap();
        assert_eq!(
            copy.dqn().q_values(&s).unwrap(),
            loaded.dqn().q_values(&s).unwrap()
        );
        assert_eq!(copy.dqn().epsilon(), 0.01);
        // A trained model learns only once its new memory is warm.
        let mut warm = trained.trained_copy(&config).unwrap();
        let t = Transition {
            state: s.to_vec(),
            action: 0,
            reward: -1.0,
            next_state: s.to_vec(),
            done: true,
        };
        for _ in 0..LOADED_WARMUP - 1 {
            warm.remember(t.clone(), true);
        }
        assert_eq!(
            (warm.experiences, warm.learn_steps),
            (LOADED_WARMUP as u64 - 1, 0)
        );
        warm.remember(t, true);
        assert_eq!(warm.learn_steps, 1);
        let e = Learner::load(&config, 6, &path).unwrap_err().to_string();
        assert!(
            e.contains("art-dqn.safetensors") && e.contains("1..=4"),
            "{e}"
        );
        // A model without a record (an older artq's) is refused, saying why.
        let old = dir.path().join("old.safetensors");
        trained.dqn().save(&old).unwrap();
        let e = Learner::load(&config, 4, &old).unwrap_err().to_string();
        assert!(
            e.contains("old.safetensors") && e.contains("train it again"),
            "{e}"
        );
        for bad in [
            "",
            "scheme=art-dqn",
            "scheme=rcp;gamma=1;seed=1;per=loss;reward=a2;r_max=8;state=2",
            "scheme=art-dqn;gamma=x;seed=1;per=loss;reward=a2;r_max=8;state=2",
            "scheme=art-dqn;gamma=1;seed=1;per=packet;reward=a2;r_max=8;state=2",
            "scheme=art-dqn;gamma=1;seed=1;per=loss;reward=a2;r_max=8",
        ] {
            assert!(ModelNote::parse(bad).is_err(), "{bad}");
        }
        let other = ModelNote {
            state: STATE_VERSION + 1,
            ..note
        };
        let v = dir.path().join("future.safetensors");
        trained
            .dqn()
            .save_with_note(&v, Some(&other.render()))
            .unwrap();
        let e = Learner::load(&config, 4, &v).unwrap_err().to_string();
        assert!(e.contains("state version"), "{e}");
    }
}
