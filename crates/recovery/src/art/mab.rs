//! ART-MAB: a multi-armed bandit in place of the Redundancy Adapter (ART
//! journal Appendix A.1, §8).
//!
//! Each arm is a redundancy level `1..=R_max`. On every loss (every
//! `on_data_lost`) the bandit pulls an arm, ε-greedy (`art-mab-eg`) or UCB
//! (`art-mab-ucb`), and the round is sent with that many replicas. When the
//! round's outcome is known the arm is rewarded (Appendix A.1):
//!
//! ```text
//! reward = 1 / (N·R)     if the round's replicas got through
//!        = −η / (N·R)    if every replica of the round was lost
//! ```
//!
//! with N the round, R the level pulled and η the penalty factor (§8.1: 1.01).
//!
//! Choices where the appendix is vague (also in docs/recovery.md):
//! - **One bandit** for all rounds (the appendix pulls "upon encountering a
//!   packet loss event"); the round enters only through the reward's N.
//! - **Outcome**: "received" = the first acknowledgement of any replica of
//!   that round; "unreceived" = the item entered the next round (the
//!   transport starts round n + 1 only when every replica of round n is
//!   lost). Each round is settled once; a later contrary report (a spurious
//!   loss) is ignored. Rounds never settled (their data was acknowledged
//!   through an older packet) are forgotten after [`MAX_PENDING`] newer ones.
//! - **Values**: each arm's value is the plain running mean of its rewards
//!   (the appendix's `expect`), its `use_number` the number of pulls.
//! - **ε-greedy**: ε = 0.1 (Appendix A.1); exploration picks a uniform arm;
//!   exploitation picks the best mean, ties to the lowest level (the cheaper).
//! - **UCB** (UCB1, the appendix's ref. \[5\]): every arm is pulled once first
//!   (lowest level first); then `argmax mean_i + c·sqrt(ln t / n_i)` with
//!   `n_i` the pulls of arm i and `t` all pulls. Counting pulls rather than
//!   settled rewards keeps the bonus of an arm whose outcomes are still in
//!   flight from staying infinite. c = √2 by default; rewards lie in
//!   `[−η, 1]`.

use std::collections::BTreeMap;

use rand::{Rng, RngCore};
use transport::policy::ItemId;

/// Unsettled rounds remembered at most; the oldest are forgotten first.
pub const MAX_PENDING: usize = 8192;

/// How the bandit picks an arm.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BanditStrategy {
    /// Explore a uniform arm with probability `epsilon`, else the best mean.
    EpsilonGreedy {
        /// Exploration probability, in `[0, 1]` (Appendix A.1: 0.1).
        epsilon: f64,
    },
    /// UCB1: each arm once, then the best upper confidence bound.
    Ucb {
        /// Weight of the exploration bonus (≥ 0; default √2).
        c: f64,
    },
}

/// Parameters of the bandit adapter (ART journal Appendix A.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BanditConfig {
    /// The arm selection strategy.
    pub strategy: BanditStrategy,
    /// The penalty factor η (> 0; §8.1: 1.01).
    pub eta: f64,
}

impl BanditConfig {
    /// `art-mab-eg`: ε = 0.1, η = 1.01.
    pub fn epsilon_greedy() -> Self {
        BanditConfig {
            strategy: BanditStrategy::EpsilonGreedy { epsilon: 0.1 },
            eta: 1.01,
        }
    }

    /// `art-mab-ucb`: c = √2, η = 1.01.
    pub fn ucb() -> Self {
        BanditConfig {
            strategy: BanditStrategy::Ucb {
                c: std::f64::consts::SQRT_2,
            },
            eta: 1.01,
        }
    }

    /// Why the parameters are unusable, if they are.
    pub fn check(&self) -> Result<(), String> {
        match self.strategy {
            BanditStrategy::EpsilonGreedy { epsilon } if !(0.0..=1.0).contains(&epsilon) => {
                return Err(format!("epsilon must be in [0, 1], got {epsilon}"));
            }
            BanditStrategy::Ucb { c } if !(c.is_finite() && c >= 0.0) => {
                return Err(format!("the UCB weight c must be finite and >= 0, got {c}"));
            }
            _ => {}
        }
        if !(self.eta.is_finite() && self.eta > 0.0) {
            return Err(format!("eta must be finite and > 0, got {}", self.eta));
        }
        Ok(())
    }
}

/// One arm: a redundancy level.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Arm {
    /// Times pulled (the appendix's `use_number`).
    pub pulls: u64,
    /// Rewards received.
    pub rewards: u64,
    /// Mean reward (the appendix's `expect`); 0 before any reward.
    pub mean: f64,
}

/// The bandit-based Redundancy Adapter.
#[derive(Clone, Debug)]
pub struct BanditAdapter {
    config: BanditConfig,
    /// `arms[i]` is redundancy level `i + 1`.
    arms: Vec<Arm>,
    total_pulls: u64,
    /// Rounds sent and not yet settled: (item, round) → level pulled.
    pending: BTreeMap<(ItemId, u32), u32>,
}

impl BanditAdapter {
    /// A bandit over levels `1..=r_max` (at least one arm). The config must
    /// have passed [`BanditConfig::check`]; out-of-range values are clamped.
    pub fn new(config: BanditConfig, r_max: u32) -> Self {
        let arms = vec![Arm::default(); r_max.max(1) as usize];
        BanditAdapter {
            config,
            arms,
            total_pulls: 0,
            pending: BTreeMap::new(),
        }
    }

    /// The arms, lowest level first.
    pub fn arms(&self) -> &[Arm] {
        &self.arms
    }

    /// The arm with the highest mean reward (the lowest level among equals)
    /// and its level: what exploitation would pull now.
    pub fn best_arm(&self) -> (u32, Arm) {
        let i = self.best_by(|a| a.mean);
        // i < arms.len() ≤ MAX_REPLICAS, so it fits a u32.
        (i as u32 + 1, self.arms.get(i).copied().unwrap_or_default())
    }

    /// Pull an arm for round `round` of `item`; returns the level to send.
    pub fn on_data_lost(&mut self, item: ItemId, round: u32, rng: &mut dyn RngCore) -> u32 {
        if round > 1 {
            // Round − 1 ended with every replica lost (the transport's rule).
            self.settle(item, round - 1, false);
        }
        let arm = self.select(rng);
        if let Some(a) = self.arms.get_mut(arm) {
            a.pulls = a.pulls.saturating_add(1);
        }
        self.total_pulls = self.total_pulls.saturating_add(1);
        // arm < arms.len() ≤ MAX_REPLICAS, so it fits a u32.
        let level = arm as u32 + 1;
        self.pending.insert((item, round.max(1)), level);
        while self.pending.len() > MAX_PENDING {
            self.pending.pop_first();
        }
        level
    }

    /// A replica of round `round` of `item` was acknowledged: that round got
    /// through.
    pub fn on_replica_acked(&mut self, item: ItemId, round: u32) {
        self.settle(item, round, true);
    }

    fn settle(&mut self, item: ItemId, round: u32, received: bool) {
        let Some(level) = self.pending.remove(&(item, round)) else {
            return;
        };
        let nr = f64::from(round.max(1)) * f64::from(level);
        let reward = if received {
            1.0 / nr
        } else {
            -self.config.eta / nr
        };
        self.update(level, reward);
    }

    /// Fold `reward` into the running mean of the arm of `level`.
    pub fn update(&mut self, level: u32, reward: f64) {
        let Some(a) = self.arms.get_mut((level as usize).wrapping_sub(1)) else {
            return;
        };
        a.rewards = a.rewards.saturating_add(1);
        a.mean += (reward - a.mean) / a.rewards as f64;
    }

    /// The index of the arm to pull.
    fn select(&self, rng: &mut dyn RngCore) -> usize {
        match self.config.strategy {
            BanditStrategy::EpsilonGreedy { epsilon } => {
                if rng.gen::<f64>() < epsilon {
                    rng.gen_range(0..self.arms.len())
                } else {
                    self.best_by(|a| a.mean)
                }
            }
            BanditStrategy::Ucb { c } => {
                if let Some(untried) = self.arms.iter().position(|a| a.pulls == 0) {
                    return untried;
                }
                let ln_t = (self.total_pulls.max(1) as f64).ln();
                self.best_by(|a| a.mean + c * (ln_t / a.pulls.max(1) as f64).sqrt())
            }
        }
    }

    /// The arm with the largest score; ties go to the lowest level.
    fn best_by(&self, score: impl Fn(&Arm) -> f64) -> usize {
        let mut best = 0;
        let mut best_score = f64::NEG_INFINITY;
        for (i, a) in self.arms.iter().enumerate() {
            let s = score(a);
            if s > best_score {
                best = i;
                best_score = s;
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn eg(epsilon: f64) -> BanditConfig {
        BanditConfig {
            strategy: BanditStrategy::EpsilonGreedy { epsilon },
            eta: 1.01,
        }
    }

    #[test]
    fn rewards_follow_appendix_a1() {
        let mut b = BanditAdapter::new(eg(0.0), 4);
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        // All means are 0: greedy picks the lowest level.
        assert_eq!(b.on_data_lost(ItemId(1), 1, &mut rng), 1);
        b.on_replica_acked(ItemId(1), 1);
        assert_eq!(b.arms()[0].rewards, 1);
        assert!((b.arms()[0].mean - 1.0).abs() < 1e-12, "1/(N·R) = 1");
        // A second ack of the same round is not counted twice.
        b.on_replica_acked(ItemId(1), 1);
        assert_eq!(b.arms()[0].rewards, 1);
        // Item 2: round 1 fails (round 2 starts), round 2 gets through.
        assert_eq!(b.on_data_lost(ItemId(2), 1, &mut rng), 1);
        let level = b.on_data_lost(ItemId(2), 2, &mut rng);
        let a = b.arms()[0];
        assert_eq!(a.rewards, 2);
        assert!(
            (a.mean - (1.0 - 1.01) / 2.0).abs() < 1e-12,
            "penalty −η/(1·1)"
        );
        // Arm 1's mean is now below 0, the untouched arms': greedy moves on.
        assert_eq!(level, 2);
        b.on_replica_acked(ItemId(2), 2);
        let a = b.arms()[1];
        assert_eq!(a.rewards, 1);
        assert!((a.mean - 1.0 / 4.0).abs() < 1e-12, "1/(N·R) = 1/(2·2)");
    }

    #[test]
    fn greedy_exploits_the_best_mean() {
        let mut b = BanditAdapter::new(eg(0.0), 5);
        b.update(3, 0.9);
        b.update(1, 0.2);
        let mut rng = ChaCha8Rng::seed_from_u64(2);
        for i in 0..20 {
            assert_eq!(b.on_data_lost(ItemId(i), 1, &mut rng), 3);
        }
    }

    #[test]
    fn epsilon_greedy_explores_with_probability_epsilon() {
        let mut b = BanditAdapter::new(eg(0.25), 8);
        b.update(1, 1.0);
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let n = 40_000;
        let mut counts = [0u32; 8];
        for i in 0..n {
            let level = b.on_data_lost(ItemId(i), 1, &mut rng);
            counts[level as usize - 1] += 1;
        }
        // Arm 1 is chosen on exploitation (75%) and on 1/8 of explorations.
        let expected_best = 0.75 + 0.25 / 8.0;
        let share = f64::from(counts[0]) / n as f64;
        assert!(
            (share - expected_best).abs() < 0.01,
            "best arm share {share}"
        );
        for c in &counts[1..] {
            let s = f64::from(*c) / n as f64;
            assert!((s - 0.25 / 8.0).abs() < 0.005, "explored arm share {s}");
        }
    }

    #[test]
    fn ucb_tries_each_arm_once_then_takes_the_argmax() {
        let mut b = BanditAdapter::new(BanditConfig::ucb(), 4);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let first: Vec<u32> = (0..4)
            .map(|i| b.on_data_lost(ItemId(i), 1, &mut rng))
            .collect();
        assert_eq!(first, [1, 2, 3, 4]);
        // Give level 2 the best mean; the others equal pulls, so the bonus ties.
        b.update(1, 0.1);
        b.update(2, 0.5);
        b.update(3, 0.2);
        b.update(4, 0.1);
        assert_eq!(b.on_data_lost(ItemId(10), 1, &mut rng), 2);
        // Check the index against the formula for every arm.
        let t = b.total_pulls as f64;
        let c = std::f64::consts::SQRT_2;
        let scores: Vec<f64> = b
            .arms()
            .iter()
            .map(|a| a.mean + c * (t.ln() / a.pulls as f64).sqrt())
            .collect();
        let argmax = scores
            .iter()
            .enumerate()
            .fold(0, |best, (i, s)| if *s > scores[best] { i } else { best });
        assert_eq!(b.on_data_lost(ItemId(11), 1, &mut rng), argmax as u32 + 1);
    }

    #[test]
    fn ucb_bonus_brings_back_a_neglected_arm() {
        let mut b = BanditAdapter::new(BanditConfig::ucb(), 2);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        b.on_data_lost(ItemId(0), 1, &mut rng);
        b.on_data_lost(ItemId(1), 1, &mut rng);
        b.update(1, 0.5);
        b.update(2, 0.4);
        let picks: Vec<u32> = (2..200)
            .map(|i| b.on_data_lost(ItemId(i), 1, &mut rng))
            .collect();
        assert!(picks.iter().filter(|l| **l == 1).count() > 100);
        assert!(picks.contains(&2), "the bonus never revisited arm 2");
    }

    #[test]
    fn pending_rounds_are_bounded() {
        let mut b = BanditAdapter::new(eg(0.1), 3);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for i in 0..(MAX_PENDING as u64 + 100) {
            b.on_data_lost(ItemId(i), 1, &mut rng);
        }
        assert_eq!(b.pending.len(), MAX_PENDING);
        assert!(!b.pending.contains_key(&(ItemId(0), 1)));
    }

    #[test]
    fn config_checks() {
        assert!(BanditConfig::epsilon_greedy().check().is_ok());
        assert!(BanditConfig::ucb().check().is_ok());
        assert!(eg(1.5).check().is_err());
        assert!(eg(f64::NAN).check().is_err());
        assert!(BanditConfig {
            eta: 0.0,
            ..BanditConfig::ucb()
        }
        .check()
        .is_err());
        assert!(BanditConfig {
            strategy: BanditStrategy::Ucb { c: f64::INFINITY },
            eta: 1.0
        }
        .check()
        .is_err());
    }

    proptest! {
        #[test]
        fn levels_stay_in_range(
            ucb in any::<bool>(),
            r_max in 1u32..=32,
            ops in proptest::collection::vec((any::<u8>(), 0u64..50, any::<u32>()), 0..300),
            seed in any::<u64>(),
        ) {
            let cfg = if ucb { BanditConfig::ucb() } else { BanditConfig::epsilon_greedy() };
            let mut b = BanditAdapter::new(cfg, r_max);
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            for (op, item, round) in ops {
                if op % 2 == 0 {
                    let l = b.on_data_lost(ItemId(item), round, &mut rng);
                    prop_assert!((1..=r_max).contains(&l));
                } else {
                    b.on_replica_acked(ItemId(item), round);
                }
            }
            for a in b.arms() {
                prop_assert!(a.mean.is_finite() && a.mean <= 1.0 && a.mean >= -1.01);
            }
        }
    }
}
