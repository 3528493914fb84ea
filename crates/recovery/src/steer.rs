//! Decisions taken outside the transport: the policies of the Python
//! environment (`artq.env.RetransmissionEnv`, driven by `lab::steer`).
//!
//! A learning agent written in Python cannot answer a policy callback
//! synchronously: the transport calls the policy in the middle of an
//! event, and the agent lives on the other side of a Gymnasium `step()`.
//! So a *steered* policy answers its decision points with
//! [`Decision::Defer`](transport::policy::Decision::Defer): it posts the
//! decision point (the item, the round and the observation the paper's
//! agent sees) on a shared [`Desk`] and lets the round wait. The driver
//! (`lab::steer`) notices the posting after the simulator's current unit of
//! work, hands the observation to Python, takes the action from `step()`,
//! writes it on the desk ([`Desk::answer`]) and resumes the round
//! ([`transport::Connection::resume_round`]) at the same virtual instant:
//! the transport asks the policy again, and this time the policy finds its
//! answer. Rewards are added to the desk as outcomes become known and
//! collected by the driver at every step.
//!
//! One steered policy per decision kind, each reusing the definitions of
//! the scheme whose decision it exposes (so there is one state definition
//! per paper, not a copy for Python):
//! - [`SteerKind::ArtLevel`]: a retransmission round's redundancy level,
//!   decided where ART-DQN decides ([`crate::art::ArtPolicy`] with its
//!   scheduler and opportunism); observation = ART-DQN's state
//!   ([`crate::art::dqn::RoundBook`]), reward = Appendix A.2's or A.1's
//!   ([`crate::art::dqn::round_reward`]).
//! - [`SteerKind::RcpMessage`]: a lost message's retransmit-or-drop,
//!   decided where RCP decides ([`crate::rcp::policy::MessagePolicy`]); observation =
//!   RCP's state, reward = RCP's utility-based reward.
//! - [`SteerKind::AutorecLevel`]: AutoRec's A_thres once per decision
//!   interval, decided where AutoRec's Redundancy Adapter decides
//!   ([`crate::autorec::AutorecPolicy::steered`]); observation = the
//!   adapter's state ([`crate::autorec::adapter::state`]), reward = eq. 2's
//!   utility or eq. 3's R_Δ ([`crate::autorec::AutorecReward`]).

use transport::policy::{PolicyFactory, RecoveryPolicy};

use crate::art::{ArtConfig, ArtPolicy};
use crate::autorec::{AutorecPolicy, AutorecReward};
use crate::rcp::policy::{MessageConfig, MessagePolicy};

pub use crate::desk::{lock, DecisionPoint, Desk, SharedDesk};

/// Which decision a steered run exposes.
#[derive(Clone, Debug, PartialEq)]
pub enum SteerKind {
    /// ART's redundancy level per retransmission round (actions
    /// `0..r_max`: level `action + 1`), rewarded with Appendix A.2's rule
    /// whose penalty factor is `penalty` (1.05 for ART-DQN's preset, 1.01
    /// for ART-MAB's A.1 preset).
    ArtLevel {
        /// Highest level (ART's R_max).
        r_max: u32,
        /// The penalty factor of the reward (γ of A.2, η of A.1).
        penalty: f64,
    },
    /// RCP's retransmit-or-drop per lost message (action 0: drop,
    /// 1: retransmit), with RCP's configuration (its utility, its reward).
    RcpMessage(Box<MessageConfig>),
    /// AutoRec's A_thres for the next decision interval (actions
    /// `0..=A_MAX`: A_thres = action), each interval rewarded by `reward`.
    AutorecLevel {
        /// The reward preset.
        reward: AutorecReward,
    },
}

impl SteerKind {
    /// How many actions there are.
    pub fn actions(&self) -> u32 {
        match self {
            SteerKind::ArtLevel { r_max, .. } => (*r_max).max(1),
            SteerKind::RcpMessage(_) => 2,
            SteerKind::AutorecLevel { .. } => crate::autorec::A_MAX + 1,
        }
    }

    /// Length of the observation vector.
    pub fn observation_len(&self) -> usize {
        match self {
            SteerKind::ArtLevel { .. } => crate::art::dqn::STATE_DIM,
            SteerKind::RcpMessage(_) => crate::rcp::model::STATE_DIM,
            SteerKind::AutorecLevel { .. } => crate::autorec::adapter::STATE_DIM,
        }
    }
}

/// Builds one steered policy per connection, all posting on one desk.
#[derive(Clone, Debug)]
pub struct SteeredFactory {
    kind: SteerKind,
    desk: SharedDesk,
}

impl SteeredFactory {
    /// A factory of steered policies of `kind` posting on `desk`.
    pub fn new(kind: SteerKind, desk: SharedDesk) -> Self {
        SteeredFactory { kind, desk }
    }
}

impl PolicyFactory for SteeredFactory {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        match &self.kind {
            &SteerKind::ArtLevel { r_max, penalty } => Box::new(ArtPolicy::steered(
                ArtConfig {
                    r_max: r_max.max(1),
                    ..ArtConfig::default()
                },
                self.desk.clone(),
                penalty,
            )),
            SteerKind::RcpMessage(config) => Box::new(MessagePolicy::steered(
                MessageConfig {
                    name: "env:rcp".into(),
                    ..(**config).clone()
                },
                self.desk.clone(),
            )),
            &SteerKind::AutorecLevel { reward } => {
                Box::new(AutorecPolicy::steered(self.desk.clone(), reward))
            }
        }
    }

    fn name(&self) -> String {
        match self.kind {
            SteerKind::ArtLevel { .. } => "env:art".into(),
            SteerKind::RcpMessage(_) => "env:rcp".into(),
            SteerKind::AutorecLevel { .. } => "env:autorec".into(),
        }
    }
}
