//! The desk where a steered policy posts its decision points and finds
//! the answers from outside the transport ([`crate::steer`] explains the
//! protocol): a leaf module below the schemes, so that ART, AutoRec and
//! RCP can post on it without importing `steer`, which builds them.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use transport::policy::ItemId;

/// A decision waiting for an answer from outside.
#[derive(Clone, Debug, PartialEq)]
pub struct DecisionPoint {
    /// The lost data it is about.
    pub item: ItemId,
    /// Its round (1 = first retransmission).
    pub round: u32,
    /// What the paper's agent sees (the scheme's state vector).
    pub observation: Vec<f32>,
}

/// Where steered policies post decision points and find their answers, and
/// where rewards accumulate between two steps. Shared (`Arc<Mutex<_>>`)
/// between the policy inside the transport and the driver outside.
#[derive(Debug, Default)]
pub struct Desk {
    waiting: VecDeque<DecisionPoint>,
    answers: BTreeMap<(ItemId, u32), u32>,
    reward: f64,
    /// Decisions answered so far.
    pub decisions: u64,
}

impl Desk {
    /// A shared, empty desk.
    pub fn shared() -> SharedDesk {
        Arc::new(Mutex::new(Desk::default()))
    }

    /// A policy posts a decision point.
    pub fn post(&mut self, point: DecisionPoint) {
        self.waiting.push_back(point);
    }

    /// The oldest decision point not yet answered.
    pub fn next(&self) -> Option<&DecisionPoint> {
        self.waiting.front()
    }

    /// Answer the oldest decision point with `action`; returns it (the
    /// driver resumes its round), or `None` when nothing waits.
    pub fn answer(&mut self, action: u32) -> Option<DecisionPoint> {
        let point = self.waiting.pop_front()?;
        self.answers.insert((point.item, point.round), action);
        self.decisions += 1;
        Some(point)
    }

    /// The policy takes the answer to its decision point, if given.
    pub fn take_answer(&mut self, item: ItemId, round: u32) -> Option<u32> {
        self.answers.remove(&(item, round))
    }

    /// An outcome's reward.
    pub fn add_reward(&mut self, reward: f64) {
        self.reward += reward;
    }

    /// The reward accumulated since the last call.
    pub fn take_reward(&mut self) -> f64 {
        std::mem::take(&mut self.reward)
    }
}

/// A desk shared by a policy and its driver.
pub type SharedDesk = Arc<Mutex<Desk>>;

/// Locks a desk; a panic elsewhere while it was held leaves it usable.
pub fn lock(desk: &SharedDesk) -> MutexGuard<'_, Desk> {
    desk.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_go_to_the_oldest_point_and_rewards_are_taken_once() {
        let mut d = Desk::default();
        assert!(d.answer(1).is_none());
        for i in 0..2 {
            d.post(DecisionPoint {
                item: ItemId(i),
                round: 1,
                observation: vec![0.0],
            });
        }
        assert_eq!(d.next().map(|p| p.item), Some(ItemId(0)));
        assert_eq!(d.answer(3).map(|p| p.item), Some(ItemId(0)));
        assert_eq!(d.take_answer(ItemId(0), 1), Some(3));
        assert_eq!(d.take_answer(ItemId(0), 1), None);
        assert_eq!(d.next().map(|p| p.item), Some(ItemId(1)));
        d.add_reward(0.5);
        d.add_reward(-0.25);
        assert_eq!(d.take_reward(), 0.25);
        assert_eq!(d.take_reward(), 0.0);
        assert_eq!(d.decisions, 1);
    }
}
