//! AutoRec's per-interval A_thres decided from outside the transport (the
//! Python environment's `autorec` decision, [`crate::steer`]).
//!
//! The Redundancy Adapter decides once per decision interval, when the
//! first loss after the interval's end closes it (see the module doc of
//! [`super`]). A steered AutoRec posts that decision instead: the state
//! the adapter decides from ([`super::adapter::state`]) goes on the desk
//! and the loss that closed the interval is deferred
//! ([`Decision::Defer`](transport::policy::Decision::Defer)); when the
//! driver resumes it, the policy takes the answer, A_thres ∈ 0..=4 (the
//! paper's set), for the interval that has just begun, and retransmits
//! the loss as AutoRec's ARQ does. The agent's choice replaces all of the
//! adapter's step 3 (eq. 5, the E_waiting gate, the exploration and the
//! 10% cut-off); everything else (the reinjection queue, off-mode and
//! opportunistic reinjection at T_thres) is AutoRec's own code.
//!
//! An interval without a recovery makes no decision, as in the adapter.
//! The reward of a decision is known when the interval it chose for
//! closes, so it arrives with the next decision point (and the interval
//! still open when the run ends is not rewarded).

use transport::policy::ItemId;

use super::adapter::{self, Interval, A_MAX};
use crate::desk::{self, DecisionPoint, SharedDesk};

/// The reward of an interval, by preset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AutorecReward {
    /// `autorec`: minus the utility of eq. 2 (lower is better in the
    /// paper), with the goodput in Mbit/s so that the value is of order
    /// one: −latency · sigmoid_α(A − 2) / (minRTT · goodput Mbit/s).
    Utility,
    /// `autorec-gain`: R_Δ of eq. 3, the utility's relative improvement
    /// over the interval before (what the adapter's step rule climbs); 0
    /// for the first interval with a utility.
    Gain,
}

/// The steered part of an [`super::AutorecPolicy`].
#[derive(Clone, Debug)]
pub(super) struct Steered {
    desk: SharedDesk,
    reward: AutorecReward,
    /// A_thres in force (the driver's last answer; the configured start
    /// level before the first).
    level: u32,
    /// The loss (item, round) whose decision point waits on the desk.
    pending: Option<(ItemId, u32)>,
    /// Whether the interval that just closed ran at a level the driver
    /// chose (only those are rewarded).
    decided: bool,
    /// The utility (eq. 2, goodput in bytes/s) of the last interval that
    /// had one, for R_Δ.
    last_utility: Option<f64>,
}

impl Steered {
    /// Steering through `desk`, rewarding by `reward`, at A_thres `start`
    /// until the first answer.
    pub(super) fn new(desk: SharedDesk, reward: AutorecReward, start: u32) -> Self {
        Steered {
            desk,
            reward,
            level: start.min(A_MAX),
            pending: None,
            decided: false,
            last_utility: None,
        }
    }

    /// A_thres in force.
    pub(super) fn level(&self) -> u32 {
        self.level
    }

    /// Takes the driver's answer to the waiting decision if it is in.
    /// Returns whether `(item, round)` is the deferred loss being resumed.
    pub(super) fn resume(&mut self, item: ItemId, round: u32) -> bool {
        let Some((p_item, p_round)) = self.pending else {
            return false;
        };
        let Some(answer) = desk::lock(&self.desk).take_answer(p_item, p_round) else {
            return false;
        };
        self.level = answer.min(A_MAX);
        self.pending = None;
        self.decided = true;
        (p_item, p_round) == (item, round)
    }

    /// Whether a decision point waits for its answer.
    pub(super) fn is_waiting(&self) -> bool {
        self.pending.is_some()
    }

    /// An interval closed at the loss `(item, round)`: rewards the level
    /// it ran with and posts the decision for the next one.
    pub(super) fn post(&mut self, item: ItemId, round: u32, m: &Interval, alpha: f64) {
        let state = adapter::state(m, self.level, alpha, self.last_utility);
        let u = adapter::utility(alpha, self.level, m);
        let mut desk = desk::lock(&self.desk);
        if self.decided {
            let reward = match self.reward {
                AutorecReward::Utility => {
                    let mbps = Interval {
                        goodput: m.goodput * 8e-6,
                        ..*m
                    };
                    adapter::utility(alpha, self.level, &mbps).map_or(0.0, |u| -u)
                }
                AutorecReward::Gain => match (self.last_utility, u) {
                    (Some(prev), Some(cur)) => adapter::r_delta(prev, cur),
                    _ => 0.0,
                },
            };
            desk.add_reward(reward);
        }
        if u.is_some() {
            self.last_utility = u;
        }
        desk.post(DecisionPoint {
            item,
            round,
            observation: state.to_vec(),
        });
        self.pending = Some((item, round));
    }
}
