//! ART-DQN: a Deep Q-Network in place of the Redundancy Adapter (ART
//! journal Appendix A.2, §8).
//!
//! On every loss the adapter builds the connection's state, the network
//! picks a redundancy level (epsilon-greedy while it explores), and the
//! round is sent with that many replicas. When the round's outcome is known
//! the decision is rewarded as in A.2:
//!
//! ```text
//! reward = 1 / (N·R)     if the round's replicas got through
//!        = −γ / (N·R)    if every replica of the round was lost
//! ```
//!
//! with N the round, R the level and γ the paper's "magnitude ratio
//! between rewards and penalties" (§8.1 singles out 1.05). The experience
//! `(s1, a, r, s2)` — s2 the state when the outcome is known, "one RTT
//! later" in the paper — goes to the replay memory, and the network learns
//! from it online.
//!
//! Choices where the appendix is vague (also in docs/recovery.md):
//! - **Outcomes** exactly as ART-MAB's ([`super::mab`]): "received" = the
//!   first acknowledgement of any replica of the round; "unreceived" = the
//!   item entered its next round. Rounds never settled are forgotten after
//!   [`super::mab::MAX_PENDING`] newer ones.
//! - **State** (7 values, each scaled to about [0, 1] so no input dominates
//!   the first layer): packet loss rate and replica loss rate (EWMAs over
//!   packet fates, weight 1/32), srtt and min_rtt in units of 200 ms, the
//!   recent largest loss burst (ART's B_max over the burst window, 8 RTTs
//!   by default) over 16, the
//!   last level chosen over R_max, and the round number over 8 (capped at 1
//!   each where a value can grow).
//! - **One learner per connection's factory**: the paper runs one DQN
//!   process that every connection of the server reads and trains through
//!   shared memory. Here the learner sits behind an `Arc<Mutex<_>>` that
//!   every connection built by one factory shares (in `artq serve`, all of
//!   them; in a simulated run, its one connection; `artq train` keeps one
//!   factory over all its episodes).
//! - **Determinism**: the initial weights and replay sampling draw from a
//!   ChaCha8 stream seeded by the scheme's `seed=` (default 1), made when
//!   the factory is built; exploration draws from the connection's seeded
//!   RNG that the transport hands to every decision. No clock, no OS RNG:
//!   a simulated run with a seed is repeatable bit for bit.
//! - **Network and learning**: two hidden layers of 64 ReLU units, Adam at
//!   1e-3, Double DQN targets with discount 0.9, batch 32, memory 10,000,
//!   target sync every 100 learning steps, one learning step per settled
//!   round, exploration 0.1 decaying x0.9 per 1,000 steps to 0.01 (the
//!   Morvan DQN the paper adapted uses an epsilon-greedy policy of this
//!   kind; the appendix gives no values). A model loaded from a file
//!   starts at the floor: it has been trained.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

use learn::{Activation, Dqn, DqnConfig, Epsilon, LearnError, OptimizerKind, Transition};
use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use transport::policy::ItemId;

use super::mab::MAX_PENDING;

/// Number of values in the state.
pub const STATE_DIM: usize = 7;

/// Parameters of ART-DQN (ART journal Appendix A.2).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DqnAdapterConfig {
    /// γ of A.2: the penalty's magnitude relative to the reward (> 0;
    /// §8.1 singles out 1.05).
    pub gamma: f64,
    /// Seed of the network's initial weights and of replay sampling.
    pub seed: u64,
    /// Learn online from this connection's outcomes.
    pub learn_online: bool,
}

impl Default for DqnAdapterConfig {
    fn default() -> Self {
        DqnAdapterConfig {
            gamma: 1.05,
            seed: 1,
            learn_online: true,
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

    /// The network and learning parameters for levels `1..=r_max`.
    pub fn dqn(&self, r_max: u32) -> DqnConfig {
        DqnConfig {
            state_dim: STATE_DIM,
            actions: r_max.max(1) as usize,
            hidden: vec![64, 64],
            activation: Activation::Relu,
            gamma: 0.9,
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
}

/// The learner an ART-DQN factory's connections share.
#[derive(Debug)]
pub struct Learner {
    dqn: Dqn,
    /// Replay sampling (seeded; decisions use the connection's RNG).
    rng: ChaCha8Rng,
    /// Rounds settled (experiences made).
    pub experiences: u64,
    /// Learning steps taken.
    pub learn_steps: u64,
    /// The loss of the latest learning step (NaN before the first).
    pub last_loss: f64,
}

impl Learner {
    /// A fresh, untrained learner for levels `1..=r_max`.
    pub fn new(config: &DqnAdapterConfig, r_max: u32) -> Result<Self, LearnError> {
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let dqn = Dqn::new(config.dqn(r_max), &mut rng)?;
        Ok(Learner {
            dqn,
            rng,
            experiences: 0,
            learn_steps: 0,
            last_loss: f64::NAN,
        })
    }

    /// A learner with the weights of the model file at `path` (written by
    /// [`Learner::save`] for the same `r_max`), exploring at the floor.
    pub fn load(config: &DqnAdapterConfig, r_max: u32, path: &Path) -> Result<Self, LearnError> {
        let mut cfg = config.dqn(r_max);
        cfg.epsilon.start = cfg.epsilon.floor;
        let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
        let mut dqn = Dqn::new(cfg, &mut rng)?;
        dqn.load(path)?;
        Ok(Learner {
            dqn,
            rng,
            experiences: 0,
            learn_steps: 0,
            last_loss: f64::NAN,
        })
    }

    /// Write the network to `path` (safetensors).
    pub fn save(&self, path: &Path) -> Result<(), LearnError> {
        self.dqn.save(path)
    }

    /// The agent.
    pub fn dqn(&self) -> &Dqn {
        &self.dqn
    }
}

/// What the adapter observes of the connection, turned into the state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Smoothed RTT, seconds.
    pub srtt_s: f64,
    /// Minimum RTT, seconds.
    pub min_rtt_s: f64,
    /// Largest recent loss burst, packets (ART's B_max).
    pub max_burst: u64,
}

/// EWMA weight of the loss-rate features.
const RATE_WEIGHT: f64 = 1.0 / 32.0;

/// The state of one connection, in the order the network reads it (see the
/// module docs).
pub fn state(
    obs: &Observation,
    loss_rate: f64,
    replica_loss_rate: f64,
    last_level: u32,
    r_max: u32,
    round: u32,
) -> [f32; STATE_DIM] {
    let unit = |x: f64| x.clamp(0.0, 1.0) as f32;
    [
        unit(loss_rate),
        unit(replica_loss_rate),
        unit(obs.srtt_s / 0.2),
        unit(obs.min_rtt_s / 0.2),
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

/// A decision waiting for its outcome.
#[derive(Clone, Debug)]
struct Pending {
    state: [f32; STATE_DIM],
    level: u32,
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
    /// The state when the outcome became known.
    pub next_state: [f32; STATE_DIM],
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

    /// The state for a decision about round `round`.
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
        self.last_level = level;
        self.pending
            .insert((item, round.max(1)), Pending { state, level });
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_first();
        }
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
        })
    }
}

/// ART-DQN's Redundancy Adapter for one connection.
#[derive(Clone, Debug)]
pub struct DqnAdapter {
    config: DqnAdapterConfig,
    learner: Arc<Mutex<Learner>>,
    book: RoundBook,
    /// Decisions made (levels chosen).
    pub decisions: u64,
}

impl DqnAdapter {
    /// An adapter over levels `1..=r_max` deciding with the shared `learner`.
    pub fn new(config: DqnAdapterConfig, r_max: u32, learner: Arc<Mutex<Learner>>) -> Self {
        DqnAdapter {
            config,
            learner,
            book: RoundBook::new(r_max),
            decisions: 0,
        }
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

    /// Choose the level for round `round` of `item`.
    pub fn on_data_lost(
        &mut self,
        item: ItemId,
        round: u32,
        obs: Observation,
        mut rng: &mut dyn RngCore,
    ) -> u32 {
        if let Some(settled) = self.book.on_data_lost(item, round, obs) {
            self.learn_from(settled);
        }
        let s = self.book.state(round);
        // A state is always finite and of the network's size, so `act`
        // cannot fail; level 1 (plain QUIC's choice) if it ever did.
        let action = self.lock().dqn.act(&s, &mut rng).unwrap_or(0);
        let level = (action as u32 + 1).min(self.book.r_max());
        self.decisions += 1;
        self.book.decided(item, round, s, level);
        level
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
            self.learn_from(settled);
        }
    }

    /// A.2's reward for a round `round` sent at `level`.
    pub fn reward(&self, round: u32, level: u32, received: bool) -> f64 {
        round_reward(round, level, received, self.config.gamma)
    }

    fn learn_from(&mut self, p: Settled) {
        let reward = self.reward(p.round, p.level, p.received);
        let learn_online = self.config.learn_online;
        let mut l = self.lock();
        let t = Transition {
            state: p.state.to_vec(),
            action: p.level as usize - 1,
            reward: reward as f32,
            next_state: p.next_state.to_vec(),
            done: false,
        };
        if l.dqn.remember(t).is_err() {
            return;
        }
        l.experiences += 1;
        if learn_online {
            let Learner { dqn, rng, .. } = &mut *l;
            if let Ok(Some(loss)) = dqn.learn(rng) {
                l.learn_steps += 1;
                l.last_loss = f64::from(loss);
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
            max_burst: 2,
        }
    }

    fn adapter(config: DqnAdapterConfig, r_max: u32) -> DqnAdapter {
        let learner = Arc::new(Mutex::new(Learner::new(&config, r_max).unwrap()));
        DqnAdapter::new(config, r_max, learner)
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
    fn the_state_is_scaled_and_bounded() {
        let s = state(&obs(), 0.05, 0.5, 2, 4, 1);
        assert_eq!(s.len(), STATE_DIM);
        assert!(s.iter().all(|v| (0.0..=1.0).contains(v)), "{s:?}");
        assert!((s[2] - 0.25).abs() < 1e-6 && (s[5] - 0.5).abs() < 1e-6);
        let huge = Observation {
            srtt_s: 100.0,
            min_rtt_s: 100.0,
            max_burst: u64::MAX,
        };
        let s = state(&huge, 7.0, -1.0, 99, 4, u32::MAX);
        assert!(s.iter().all(|v| (0.0..=1.0).contains(v)), "{s:?}");
    }

    #[test]
    fn every_settled_round_is_an_experience_and_a_learning_step() {
        let mut a = adapter(DqnAdapterConfig::default(), 4);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for i in 0..100u64 {
            let item = ItemId(i);
            let level = a.on_data_lost(item, 1, obs(), &mut rng);
            assert!((1..=4).contains(&level));
            if i % 3 == 0 {
                // Lost: the item enters round 2, which settles round 1.
                a.on_data_lost(item, 2, obs(), &mut rng);
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
                let level = a.on_data_lost(ItemId(item), round, obs(), &mut rng);
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
    fn models_round_trip_and_loaded_learners_explore_at_the_floor() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("art-dqn.safetensors");
        let config = DqnAdapterConfig::default();
        let trained = Learner::new(&config, 4).unwrap();
        trained.save(&path).unwrap();
        let loaded = Learner::load(&config, 4, &path).unwrap();
        let s = state(&obs(), 0.1, 0.2, 1, 4, 1);
        assert_eq!(
            loaded.dqn().q_values(&s).unwrap(),
            trained.dqn().q_values(&s).unwrap()
        );
        assert_eq!(loaded.dqn().epsilon(), 0.01);
        let e = Learner::load(&config, 6, &path).unwrap_err().to_string();
        assert!(e.contains("art-dqn.safetensors"), "{e}");
    }
}
