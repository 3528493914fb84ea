//! A run paused at every decision of one kind and steered from outside:
//! the engine of the Python environment `artq.env.RetransmissionEnv`.
//!
//! The real transport runs in the simulator exactly as in [`run()`](fn@crate::run), with
//! the measured flow's recovery policy replaced by a *steered* one
//! ([`recovery::steer`]): at each decision point it posts the paper's
//! observation on a shared desk and defers the round
//! ([`transport::policy::Decision::Defer`]). The run is driven one unit of
//! work at a time ([`netem::Simulator::step`]); after each, the driver
//! looks at the desk, and when a decision waits it returns control to the
//! caller, at the same virtual instant. The sender node holds its
//! packets meanwhile ([`QuicNode::hold_transmissions_while`]), so nothing
//! leaves before the decision is in. [`SteeredRun::act`] writes the action
//! on the desk, resumes the round ([`transport::Connection::resume_round`]:
//! the transport asks the policy again, which now finds its answer) and
//! runs on to the next decision or the end. No thread, no copy of the
//! network: one simulator, paused between two units of work.
//!
//! Everything is seeded by the scenario, so a run with the same scenario
//! and the same actions is the same run, step for step.

use std::sync::Arc;

use apps::workload::Workload;
use netem::RunOutcome;
use recovery::autorec::AutorecReward;
use recovery::steer::{self, Desk, SharedDesk, SteerKind, SteeredFactory};
use transport::policy::PolicyFactory;

use crate::node::QuicNode;
use crate::run::{finish, prepare, Prepared, RunResult};
use crate::scenario::{Scenario, ScenarioError};

/// The decision kinds, for help and errors.
pub const DECISIONS: &[(&str, &str)] = &[
    (
        "art",
        "a retransmission round's redundancy level, as ART-DQN decides (ART journal A.2): action a = level a + 1",
    ),
    (
        "rcp",
        "a timed-out message's retransmit (1) or drop (0), as RCP decides (rcp.md §III); needs a messages workload; `rcp:OPTIONS` sets the utility as the rcp scheme does",
    ),
    (
        "autorec",
        "AutoRec's A_thres for the next decision interval, where its Redundancy Adapter decides (autorec.md §4.1): action a = A_thres a in 0..=4; needs a live workload",
    ),
];

/// The reward presets: the papers' rewards, by name.
pub const REWARDS: &[(&str, &str)] = &[
    (
        "art-dqn",
        "ART journal A.2: 1/(N·R) when a round gets through, -1.05/(N·R) when all its replicas are lost",
    ),
    (
        "art-mab",
        "ART journal A.1: the same rule with ART-MAB's penalty factor 1.01",
    ),
    (
        "rcp",
        "rcp.md eqs. 4-5: the utility of a delivered message at its latency, of a dropped one from the estimates",
    ),
    (
        "autorec",
        "autorec.md eq. 2: minus the utility of each interval, -latency·sigmoid_0.1(A_thres-2)/(minRTT·goodput in Mbit/s)",
    ),
    (
        "autorec-gain",
        "autorec.md eq. 3: R_Δ, the utility's relative improvement over the interval before",
    ),
];

/// The steered kind for a decision name (`art`, `rcp`, `rcp:OPTIONS`), a
/// reward preset (None: the decision's own paper's) and ART's R_max.
pub fn steer_kind(decision: &str, reward: Option<&str>, r_max: u32) -> Result<SteerKind, String> {
    let known = |list: &[(&str, &str)]| list.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ");
    let base = decision.split(':').next().unwrap_or(decision);
    match base {
        "art" => {
            if decision != "art" {
                return Err("the art decision takes no options".into());
            }
            if !(1..=transport::policy::MAX_REPLICAS as u32).contains(&r_max) {
                return Err(format!(
                    "r_max must be in 1..={}, got {r_max}",
                    transport::policy::MAX_REPLICAS
                ));
            }
            let penalty = match reward.unwrap_or("art-dqn") {
                "art-dqn" => recovery::art::DqnAdapterConfig::default().gamma,
                "art-mab" => recovery::art::BanditConfig::epsilon_greedy().eta,
                other => {
                    return Err(format!(
                        "reward '{other}' does not apply to the art decision (art-dqn, art-mab)"
                    ))
                }
            };
            Ok(SteerKind::ArtLevel { r_max, penalty })
        }
        "rcp" => {
            match reward.unwrap_or("rcp") {
                "rcp" => {}
                other => {
                    return Err(format!(
                        "reward '{other}' does not apply to the rcp decision (rcp)"
                    ))
                }
            }
            let config = recovery::rcp::parse(decision)
                .ok_or_else(|| format!("unknown decision '{decision}'"))??;
            Ok(SteerKind::RcpMessage(Box::new(config)))
        }
        "autorec" => {
            if decision != "autorec" {
                return Err("the autorec decision takes no options".into());
            }
            let reward = match reward.unwrap_or("autorec") {
                "autorec" => AutorecReward::Utility,
                "autorec-gain" => AutorecReward::Gain,
                other => {
                    return Err(format!(
                        "reward '{other}' does not apply to the autorec decision (autorec, autorec-gain)"
                    ))
                }
            };
            Ok(SteerKind::AutorecLevel { reward })
        }
        _ => Err(format!(
            "unknown decision '{decision}'; the decisions are {}",
            known(DECISIONS)
        )),
    }
}

/// What a step leads to.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The observation of the next decision; `None` when the run ended.
    pub observation: Option<Vec<f32>>,
    /// The rewards of the outcomes that became known since the last step.
    pub reward: f64,
    /// The run ended: the workload completed or nothing was left to do.
    pub terminated: bool,
    /// The run was cut: its time limit, or a stall.
    pub truncated: bool,
}

/// One run of a scenario, paused at each decision.
pub struct SteeredRun {
    scenario: Scenario,
    kind: SteerKind,
    prepared: Prepared,
    desk: SharedDesk,
    outcome: Option<RunOutcome>,
    /// Decisions answered so far.
    pub decisions: u64,
}

impl core::fmt::Debug for SteeredRun {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("SteeredRun")
            .field("kind", &self.kind)
            .field("decisions", &self.decisions)
            .field("outcome", &self.outcome)
            .finish_non_exhaustive()
    }
}

impl SteeredRun {
    /// Builds the run of `scenario` (its `scheme` is replaced by the
    /// steered policy of `kind`) and runs it to the first decision.
    pub fn start(
        scenario: &Scenario,
        kind: SteerKind,
    ) -> Result<(SteeredRun, Step), ScenarioError> {
        let mut scenario = scenario.clone();
        if let SteerKind::RcpMessage(config) = &kind {
            // RCP's congestion control, as the rcp scheme sets it.
            if let Some(cc) = recovery::parse_scheme(&config.name)
                .ok()
                .and_then(|s| s.congestion())
            {
                scenario.cc = cc;
            }
        }
        if matches!(kind, SteerKind::AutorecLevel { .. })
            && !matches!(scenario.workload, Workload::Live(_))
        {
            // AutoRec's decision is about live streams (its off-mode
            // reinjection needs a sender that runs out of data).
            return Err(ScenarioError::Invalid(
                "the autorec decision needs a live workload (workload.kind = \"live\")".into(),
            ));
        }
        let scenario = &scenario;
        let desk = Desk::shared();
        let factory: Arc<dyn PolicyFactory> =
            Arc::new(SteeredFactory::new(kind.clone(), desk.clone()));
        let mut prepared = prepare(scenario, None, false, None, Some(factory))?;
        let server = prepared.placed[0].server_id;
        let gate = desk.clone();
        prepared
            .sim
            .node_mut::<QuicNode>(server)
            .ok_or_else(|| ScenarioError::Setup("the sender node is missing".into()))?
            .hold_transmissions_while(Box::new(move || steer::lock(&gate).next().is_some()));
        let mut run = SteeredRun {
            scenario: scenario.clone(),
            kind,
            prepared,
            desk,
            outcome: None,
            decisions: 0,
        };
        let first = run.advance();
        Ok((run, first))
    }

    /// What is decided.
    pub fn kind(&self) -> &SteerKind {
        &self.kind
    }

    /// The observation of the decision waiting, if any.
    pub fn observation(&self) -> Option<Vec<f32>> {
        steer::lock(&self.desk)
            .next()
            .map(|p| p.observation.clone())
    }

    /// Answers the waiting decision with `action` and runs to the next
    /// one or the end. An error when no decision waits (the run ended) or
    /// the action is out of range.
    pub fn act(&mut self, action: u32) -> Result<Step, String> {
        if action >= self.kind.actions() {
            return Err(format!(
                "action {action} is out of range: 0..{}",
                self.kind.actions()
            ));
        }
        let Some(point) = steer::lock(&self.desk).answer(action) else {
            return Err("no decision is waiting: the run has ended (reset it)".into());
        };
        self.decisions += 1;
        let now = self.prepared.sim.now();
        let server = self.prepared.placed[0].server_id;
        let handle = self.prepared.placed[0].sender.borrow().first;
        // Taking the node mutably makes the simulator poll it again: the
        // replicas of the resumed round leave at this instant.
        if let (Some(node), Some(h)) = (self.prepared.sim.node_mut::<QuicNode>(server), handle) {
            if let Some(conn) = node.host_mut().endpoint_mut().connection_mut(h) {
                conn.resume_round(now, point.item);
            }
        }
        Ok(self.advance())
    }

    /// Steps the simulator until a decision waits or the run ends.
    fn advance(&mut self) -> Step {
        loop {
            if let Some(observation) = self.observation() {
                return Step {
                    observation: Some(observation),
                    reward: steer::lock(&self.desk).take_reward(),
                    terminated: false,
                    truncated: false,
                };
            }
            if let Some(outcome) = self.outcome {
                return self.ended(outcome);
            }
            if let Some(outcome) = self.prepared.sim.step(self.prepared.limit) {
                self.outcome = Some(outcome);
            }
        }
    }

    fn ended(&self, outcome: RunOutcome) -> Step {
        let cut = matches!(outcome, RunOutcome::DeadlineReached | RunOutcome::Stalled);
        Step {
            observation: None,
            reward: steer::lock(&self.desk).take_reward(),
            terminated: !cut,
            truncated: cut,
        }
    }

    /// The run's result (the metrics of `artq sim --json`) once it ended;
    /// `None` before.
    pub fn result(&self) -> Option<Result<RunResult, ScenarioError>> {
        let outcome = self.outcome?;
        Some(finish(&self.scenario, &self.prepared, outcome))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario() -> Scenario {
        let mut s: Scenario = toml::from_str(
            "seed = 3\n[workload]\nsize = \"300KB\"\n[link]\nloss = 0.05\nrtt = 40\nbw = 20\n",
        )
        .expect("scenario");
        s.seed = 3;
        s
    }

    /// One steered episode of the decision kind `kind` on `scenario`,
    /// acting `actions(i)` at the i-th decision: the (observation,
    /// reward) pairs and the run's result. A finished run refuses to act.
    fn steered(
        kind: &str,
        scenario: &Scenario,
        actions: impl Fn(usize) -> u32,
    ) -> (Vec<(Vec<f32>, f64)>, RunResult) {
        let kind = steer_kind(kind, None, 4).expect("kind");
        let (mut run, mut step) = SteeredRun::start(scenario, kind).expect("start");
        let mut trajectory = Vec::new();
        let mut i = 0;
        while let Some(obs) = step.observation.clone() {
            trajectory.push((obs, step.reward));
            step = run.act(actions(i)).expect("act");
            i += 1;
        }
        assert!(step.terminated, "{step:?}");
        assert!(run.act(0).is_err());
        (trajectory, run.result().expect("ended").expect("completed"))
    }

    /// ART-DQN's decisions on the bulk scenario.
    fn episode(actions: impl Fn(usize) -> u32) -> (Vec<(Vec<f32>, f64)>, RunResult) {
        steered("art", &scenario(), actions)
    }

    #[test]
    fn every_loss_is_a_decision_and_episodes_repeat() {
        let (a, ra) = episode(|i| (i % 3) as u32);
        let (b, rb) = episode(|i| (i % 3) as u32);
        assert!(a.len() >= 5, "{} decisions", a.len());
        assert_eq!(a, b);
        assert_eq!(ra.metrics.fct_ms, rb.metrics.fct_ms);
        assert!(a
            .iter()
            .all(|(o, _)| o.len() == recovery::art::dqn::STATE_DIM));
        // Other actions, another run.
        let (_, rc) = episode(|_| 3);
        assert!(rc.metrics.extra_replicas > ra.metrics.extra_replicas);
    }

    #[test]
    fn level_one_everywhere_is_the_quic_retransmission_count() {
        // Level 1 for every round sends one replica per round, as QUIC
        // does: as many decisions as retransmissions.
        let (t, r) = episode(|_| 0);
        assert_eq!(r.metrics.extra_replicas, 0);
        assert_eq!(t.len() as u64, r.sender_stats.replicas);
    }

    /// AutoRec's default setting (autorec.md §5.1), a 4 s stream.
    fn live() -> Scenario {
        toml::from_str(
            "seed = 2\ncc = \"bbr\"\n[workload]\nkind = \"live\"\nbitrate = 7000\nduration = 4\n\
             [link]\nloss = 0.05\nrtt = 50\nbw = 8\nqueue_bytes = 500000\n",
        )
        .expect("scenario")
    }

    /// AutoRec's per-interval decisions on the live scenario.
    fn autorec_episode(actions: impl Fn(usize) -> u32) -> (Vec<(Vec<f32>, f64)>, RunResult) {
        steered("autorec", &live(), actions)
    }

    #[test]
    fn autorec_decides_once_per_interval_and_episodes_repeat() {
        let (a, ra) = autorec_episode(|i| (i % 5) as u32);
        let (b, _) = autorec_episode(|i| (i % 5) as u32);
        assert_eq!(a, b);
        // One decision per interval of 1 s (the first closes after 1 s).
        assert!((2..=4).contains(&a.len()), "{} decisions", a.len());
        let dim = recovery::autorec::adapter::STATE_DIM;
        assert!(a.iter().all(|(o, _)| o.len() == dim));
        // The observation's first value is the level the interval ran
        // with: the start level, then the actions.
        assert_eq!(a[0].0[0], 1.0);
        assert_eq!(a[1].0[0], 0.0);
        assert_eq!(a[2].0[0], 1.0);
        // The first interval ran before any decision: no reward; the
        // others have eq. 2's (negative) utility.
        assert_eq!(a[0].1, 0.0);
        assert!(a[1..].iter().all(|(_, r)| *r < 0.0), "{a:?}");
        // Level 0 everywhere reinjects nothing after the first interval;
        // level 4 everywhere reinjects more.
        let (_, r0) = autorec_episode(|_| 0);
        let (_, r4) = autorec_episode(|_| 4);
        assert!(
            r4.metrics.extra_replicas > r0.metrics.extra_replicas,
            "{} vs {}",
            r4.metrics.extra_replicas,
            r0.metrics.extra_replicas
        );
        assert!(ra.metrics.fct_ms > 0.0);
    }

    #[test]
    fn bad_kinds_are_explained() {
        assert!(steer_kind("teleport", None, 4)
            .unwrap_err()
            .contains("art, rcp, autorec"));
        assert!(steer_kind("art", Some("rcp"), 4).is_err());
        assert!(steer_kind("art", None, 0).is_err());
        assert!(steer_kind("rcp:beta=x", None, 4).is_err());
        assert!(steer_kind("rcp:beta=0.3", None, 4).is_ok());
        assert!(steer_kind("autorec", Some("art-dqn"), 4).is_err());
        assert!(steer_kind("autorec:x", None, 4).is_err());
        assert!(steer_kind("autorec", Some("autorec-gain"), 4).is_ok());
        // Not on a bulk transfer.
        let kind = steer_kind("autorec", None, 4).expect("kind");
        let err = SteeredRun::start(&scenario(), kind).unwrap_err();
        assert!(err.to_string().contains("live workload"), "{err}");
    }
}
