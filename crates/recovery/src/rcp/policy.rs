//! The message schemes of rcp.md as policies: `rcp` (a Double DQN decides
//! per timed-out message), and the baselines `udp` (never retransmit),
//! `arq` (always retransmit at timeout) and `tcp` (reliable stream
//! delivery, RFC 9002 recovery; the message workload carries its messages
//! on a stream under this scheme).
//!
//! **How a message times out** (docs/recovery.md, "RCP"). The transport
//! declares a packet lost by RFC 9002's rules (three later packets
//! acknowledged, or 9/8 of an RTT passed); for a packet that carried only
//! DATAGRAM frames it then asks the policy about [`DataKind::Datagram`]
//! data. RCP's own timeout is eqs. 8-10 ([`RcpRto`]), kept here from the
//! acknowledgements the policy sees. The policy decides when the transport
//! declares the loss and, if it retransmits, schedules the copy at
//! `last transmission + τ_r` (now if that has passed): the seam's
//! `send_at`, which the transport already honours and cancels when the
//! data is acknowledged in between. So a retransmission leaves when RCP's
//! timer expires, with no timer of RCP's inside the transport.
//!
//! **Rewards** (eqs. 4-5): a retransmitted message that is acknowledged
//! earns `U(0, l)` with `l` its one-way latency, from its generation to the
//! arrival of the copy that got through; a dropped one earns `U(ε̂, l̂)` at
//! once. A retransmission that times out again earns nothing and leads to
//! the next decision's state (eq. 6).
//!
//! **Where `l` comes from** ([`LatencySource`]). In the simulator both ends
//! share one clock, so the arrival of every packet at the receiver is
//! known: the simulator logs it ([`ArrivalLog`]) and the policy reads the
//! delivering copy's arrival when its acknowledgement comes back, so `l`
//! (and `l̂`, which the state and eq. 5 use) is measured, as the authors'
//! simulator measures it (its acknowledgements reach the sender in the
//! slot the data arrived, so its sender's `now - generation` is the exact
//! one-way delay). Over a real network the sender cannot see the
//! receiver's clock and `l` is estimated: the delivering copy's send time
//! minus the generation time plus half that copy's RTT sample. The
//! estimate is 50 slots short on the authors' channel, whose return path
//! is instant (RTT = one-way delay), and exact only on a symmetric path.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use learn::{Activation, Dqn, DqnConfig, Epsilon, OptimizerKind, Transition};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::policy::{
    Carriage, DataKind, Decision, ItemId, LostData, PacketFate, PolicyContext, PolicyFactory,
    PolicyState, RecoveryPolicy, SentView,
};
use wire::time::{Duration, Instant};

use super::model::{state, Estimates, RcpRto, RtoRule, Utility};
use crate::desk::{self, DecisionPoint, SharedDesk};

/// Decisions awaiting their reward that one connection keeps at most; the
/// oldest is forgotten beyond it (an item the transport ended without
/// telling the policy, e.g. delivered by a late acknowledgement of its
/// original).
pub const MAX_PENDING: usize = 65_536;

/// Table III and Fig. 3: the learner RCP trains.
///
/// The paper names a "Double Q-learning Network" and describes an
/// evaluation and a target network; the authors' code (`RL_Brain.py`)
/// trains a plain two-network DQN: the target is `r + γ max_a
/// Q_target(s', a)`, and every transition bootstraps, a delivered or
/// dropped message's included (there are no terminal states). artq trains
/// a Double DQN (the online network picks the next action, the target
/// network values it: van Hasselt's correction of max's overestimation,
/// which the paper's name asks for) and ends a message's episode when it
/// is delivered or dropped: its reward is then final, and bootstrapping
/// from a state the message never reaches again would add a value that
/// belongs to other messages (docs/recovery.md, "RCP").
pub fn table3_dqn() -> DqnConfig {
    DqnConfig {
        state_dim: 5,
        actions: 2,
        // Fig. 3's two hidden layers; the widths and the sigmoid after
        // both are those of the authors' published code.
        hidden: vec![20, 30],
        activation: Activation::Sigmoid,
        gamma: 0.9,
        learning_rate: 0.01,
        optimizer: OptimizerKind::Adam,
        batch_size: 32,
        memory: 100_000,
        target_update: 100,
        epsilon: Epsilon {
            start: 0.3,
            factor: 0.7,
            every: 100,
            floor: 0.0,
        },
        double: true,
    }
}

/// Action indices of the DQN's outputs (rcp.md §III-C: 0 = do not
/// retransmit, 1 = retransmit).
const DROP: usize = 0;
const RETRANSMIT: usize = 1;

/// What a message scheme does with a timed-out message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// `udp`: never retransmit.
    Never,
    /// `arq`: always retransmit, at RCP's timeout.
    Always,
    /// `rcp`: ask the Double DQN.
    Learned,
    /// `tcp`: reliable stream data, recovered as QUIC does (one copy at
    /// once, under congestion control).
    Reliable,
}

impl Rule {
    /// The scheme's base name.
    pub fn base(self) -> &'static str {
        match self {
            Rule::Never => "udp",
            Rule::Always => "arq",
            Rule::Learned => "rcp",
            Rule::Reliable => "tcp",
        }
    }
}

/// Most packet arrivals an [`ArrivalLog`] holds; beyond it the lowest
/// packet numbers (whose acknowledgements were lost or never came) go.
pub const MAX_LOGGED_ARRIVALS: usize = 65_536;

/// When the receiver got each of the sender's 1-RTT packets (by packet
/// number), written by whoever can see both ends on one clock (the
/// simulator: `lab` records the receiver's `packet_received` events) and
/// read by the sender's message policy when the packet is acknowledged.
///
/// Exists so that the simulator measures a message's one-way latency
/// instead of estimating it from RTT/2 ([`LatencySource`]). Bounded: it
/// keeps the first arrival of at most [`MAX_LOGGED_ARRIVALS`] packets,
/// each removed when read.
#[derive(Debug, Default)]
pub struct ArrivalLog {
    arrived: BTreeMap<u64, Instant>,
}

impl ArrivalLog {
    /// Packet `pn` reached the receiver at `at` (a duplicate keeps the
    /// first arrival).
    pub fn record(&mut self, pn: u64, at: Instant) {
        self.arrived.entry(pn).or_insert(at);
        while self.arrived.len() > MAX_LOGGED_ARRIVALS {
            self.arrived.pop_first();
        }
    }

    /// When packet `pn` reached the receiver, if logged; forgets it.
    pub fn take(&mut self, pn: u64) -> Option<Instant> {
        self.arrived.remove(&pn)
    }

    /// Arrivals held now.
    pub fn len(&self) -> usize {
        self.arrived.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.arrived.is_empty()
    }
}

/// An [`ArrivalLog`] shared by its writer (the receiver's side) and its
/// reader (the sender's policy).
pub type SharedArrivalLog = Arc<Mutex<ArrivalLog>>;

/// Where a message scheme takes a delivered message's one-way latency `l`
/// from (the module doc says why there are two).
#[derive(Clone, Debug, Default)]
pub enum LatencySource {
    /// From the sender's clock alone: the delivering copy's send time
    /// minus the generation time, plus half that copy's RTT sample. What a
    /// real network allows.
    #[default]
    Estimated,
    /// Measured: the delivering copy's arrival at the receiver, read from
    /// the log, minus the generation time (the estimate only for a packet
    /// the log does not hold). What the simulator does.
    Measured(SharedArrivalLog),
}

impl LatencySource {
    /// `measured` or `estimated`, as the policy reports it.
    pub fn name(&self) -> &'static str {
        match self {
            LatencySource::Estimated => "estimated",
            LatencySource::Measured(_) => "measured",
        }
    }
}

impl PartialEq for LatencySource {
    /// Two measured sources are equal when they read the same log.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (LatencySource::Estimated, LatencySource::Estimated) => true,
            (LatencySource::Measured(a), LatencySource::Measured(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

/// Everything that defines a message scheme.
#[derive(Clone, Debug, PartialEq)]
pub struct MessageConfig {
    /// The scheme's name as given (echoed by [`RecoveryPolicy::name`]).
    pub name: String,
    /// What to do at a timeout.
    pub rule: Rule,
    /// The application's utility (eq. 1): RCP maximises it; every scheme
    /// reports it.
    pub utility: Utility,
    /// The timeout before the first RTT sample (Table V: 30 slots).
    pub initial_rto: Duration,
    /// The slot of eq. 10's `max(1, 4 V)`.
    pub slot: Duration,
    /// How eq. 9 updates the timer's deviation.
    pub rto: RtoRule,
    /// Retransmissions leave at the first slot boundary at or after their
    /// time (`align=slot`): the authors' senders act once per slot, at its
    /// start, and send a slot's retransmissions before its new message. On
    /// a slotted link (`netem::Capacity::Slotted`) a packet sent on a
    /// boundary joins the next slot ahead of the message the sender hands
    /// over later in it, so the two reach the buffer in the authors' order.
    pub align_to_slot: bool,
    /// Where a delivered message's latency comes from.
    pub latency: LatencySource,
    /// The learner (`rcp` only).
    pub dqn: DqnConfig,
}

/// Builds one [`MessagePolicy`] per connection.
#[derive(Debug)]
pub struct MessageFactory {
    config: MessageConfig,
}

impl MessageFactory {
    /// A factory for `config` (checked).
    pub fn new(config: MessageConfig) -> Result<Self, String> {
        config.utility.validate()?;
        config.dqn.validate().map_err(|e| e.to_string())?;
        if config.initial_rto.is_zero() || config.slot.is_zero() {
            return Err("initial_rto and slot must be positive".into());
        }
        Ok(Self { config })
    }

    /// The configuration.
    pub fn config(&self) -> &MessageConfig {
        &self.config
    }
}

impl PolicyFactory for MessageFactory {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(MessagePolicy::new(self.config.clone()))
    }

    fn name(&self) -> String {
        self.config.name.clone()
    }
}

/// A decision to retransmit, waiting for what follows it.
#[derive(Clone, Debug)]
struct Pending {
    state: [f32; 5],
    first_sent: Instant,
    last_sent: Instant,
}

/// The learner of `rcp`, made at the first decision from the connection's
/// seeded RNG (so a run's seed fixes the initial weights and the replay
/// sampling).
struct Learner {
    dqn: Dqn,
    rng: ChaCha8Rng,
}

impl core::fmt::Debug for Learner {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        self.dqn.fmt(f)
    }
}

/// A decision deferred to a steering driver ([`crate::steer`]): what the
/// first call computed, for the resumed call to continue from.
#[derive(Clone, Copy, Debug)]
struct Deferred {
    state: [f32; 5],
    last_sent: Instant,
}

/// One connection's message policy.
#[derive(Debug)]
pub struct MessagePolicy {
    config: MessageConfig,
    /// Decisions come from outside (the Python environment) through this
    /// desk instead of from [`MessageConfig::rule`]; rewards go to it.
    steer: Option<SharedDesk>,
    deferred: BTreeMap<ItemId, Deferred>,
    rto: RcpRto,
    estimates: Estimates,
    pending: BTreeMap<ItemId, Pending>,
    learner: Option<Learner>,
    /// Why learning stopped, if it did (a non-finite state, say): the
    /// policy then keeps deciding greedily from what it learned.
    learn_error: Option<String>,
}

impl MessagePolicy {
    /// A fresh policy.
    pub fn new(config: MessageConfig) -> Self {
        let rto = RcpRto::with_rule(config.rto, config.initial_rto, config.slot);
        Self {
            config,
            steer: None,
            deferred: BTreeMap::new(),
            rto,
            estimates: Estimates::default(),
            pending: BTreeMap::new(),
            learner: None,
            learn_error: None,
        }
    }

    /// A policy whose retransmit-or-drop decisions come from outside,
    /// through `desk` (observation: eq. 2's state; action 0 drop, 1
    /// retransmit; rewards: eqs. 4-5 with `config`'s utility, added to the
    /// desk). Everything else is `rcp`'s: its timeout, its estimates.
    pub fn steered(config: MessageConfig, desk: SharedDesk) -> Self {
        Self {
            steer: Some(desk),
            ..Self::new(MessageConfig {
                rule: Rule::Learned,
                ..config
            })
        }
    }

    /// The learner's steps so far (0 for the rule-based schemes).
    pub fn learn_steps(&self) -> u64 {
        self.learner.as_ref().map_or(0, |l| l.dqn.learn_steps())
    }

    /// The current timeout τ_r.
    pub fn rto(&self) -> Duration {
        self.rto.rto()
    }

    /// Store a transition and take one learning step.
    fn experience(&mut self, t: Transition) {
        if let Some(desk) = &self.steer {
            desk::lock(desk).add_reward(f64::from(t.reward));
            return;
        }
        let Some(l) = self.learner.as_mut() else {
            return;
        };
        if self.learn_error.is_some() {
            return;
        }
        let result = l.dqn.remember(t).and_then(|()| l.dqn.learn(&mut l.rng));
        if let Err(e) = result {
            self.learn_error = Some(e.to_string());
        }
    }

    /// A message timed out: the estimates learn it, the previous
    /// retransmission (if any) is settled with no reward, and eq. 2's state
    /// and the last transmission time are returned.
    fn timed_out(&mut self, lost: &LostData, now: Instant) -> ([f32; 5], Instant) {
        self.estimates.on_timeout();
        let attempts = lost.retransmissions + 1;
        let queued = now.saturating_duration_since(lost.first_sent);
        let s = state(attempts, queued, &self.rto, &self.estimates);
        let before = self.pending.remove(&lost.item);
        let last_sent = before.as_ref().map_or(lost.first_sent, |p| p.last_sent);
        if let Some(p) = before {
            // The retransmission timed out too: no reward, the next state.
            self.experience(Transition {
                state: p.state.to_vec(),
                action: RETRANSMIT,
                reward: 0.0,
                next_state: s.to_vec(),
                done: false,
            });
        }
        (s, last_sent)
    }

    fn choose(&mut self, s: &[f32; 5], rng: &mut dyn RngCore) -> usize {
        match self.config.rule {
            Rule::Never => DROP,
            Rule::Always | Rule::Reliable => RETRANSMIT,
            Rule::Learned => {
                if self.learner.is_none() {
                    let mut seed = ChaCha8Rng::seed_from_u64(rng.next_u64());
                    match Dqn::new(self.config.dqn.clone(), &mut seed) {
                        Ok(dqn) => self.learner = Some(Learner { dqn, rng: seed }),
                        Err(e) => self.learn_error = Some(e.to_string()),
                    }
                }
                let Some(l) = self.learner.as_mut() else {
                    return RETRANSMIT;
                };
                let mut rng = rng;
                l.dqn.act(s, &mut rng).unwrap_or(RETRANSMIT)
            }
        }
    }
}

impl RecoveryPolicy for MessagePolicy {
    fn name(&self) -> String {
        self.config.name.clone()
    }

    /// `tcp` (rcp.md's TCP NewReno baseline) delivers every message in
    /// order on one stream; the others decide per datagram.
    fn message_carriage(&self) -> Carriage {
        match self.config.rule {
            Rule::Reliable => Carriage::Stream,
            Rule::Learned | Rule::Never | Rule::Always => Carriage::Datagram,
        }
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        let now = cx.now;
        if lost.kind == DataKind::Stream || self.config.rule == Rule::Reliable {
            return Decision::single(now);
        }
        let (s, last_sent) = match self.deferred.remove(&lost.item) {
            // The driver answered a deferred decision: continue from it.
            Some(d) => (d.state, d.last_sent),
            None => self.timed_out(lost, now),
        };
        let action = match &self.steer {
            None => self.choose(&s, cx.rng),
            Some(desk) => {
                let mut desk = desk::lock(desk);
                match desk.take_answer(lost.item, lost.round) {
                    Some(0) => DROP,
                    Some(_) => RETRANSMIT,
                    None => {
                        desk.post(DecisionPoint {
                            item: lost.item,
                            round: lost.round,
                            observation: s.to_vec(),
                        });
                        drop(desk);
                        self.deferred.insert(
                            lost.item,
                            Deferred {
                                state: s,
                                last_sent,
                            },
                        );
                        return Decision::Defer;
                    }
                }
            }
        };
        if action == DROP {
            self.estimates.on_given_up();
            let reward = self.config.utility.dropped_reward(&self.estimates) as f32;
            self.experience(Transition {
                state: s.to_vec(),
                action: DROP,
                reward,
                next_state: s.to_vec(),
                done: true,
            });
            return Decision::Drop;
        }
        if self.pending.len() >= MAX_PENDING {
            self.pending.pop_first();
        }
        self.pending.insert(
            lost.item,
            Pending {
                state: s,
                first_sent: lost.first_sent,
                last_sent,
            },
        );
        let mut send_at = (last_sent + self.rto.rto()).max(now);
        if self.config.align_to_slot {
            let slot = u64::try_from(self.config.slot.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1);
            send_at = Instant::from_nanos(send_at.as_nanos().div_ceil(slot).saturating_mul(slot));
        }
        Decision::Retransmit {
            send_at: vec![send_at],
            opportunistic: false,
        }
    }

    fn on_packet_sent(
        &mut self,
        cx: &mut PolicyContext<'_>,
        sent: &SentView,
    ) -> Option<transport::policy::PacketTag> {
        if let Some(p) = sent.replica.and_then(|r| self.pending.get_mut(&r.item)) {
            p.last_sent = cx.now;
        }
        None
    }

    fn on_packet_acked(&mut self, cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        let rtt = cx.now.saturating_duration_since(fate.time_sent);
        self.rto.on_sample(rtt);
        let arrived = match &self.config.latency {
            LatencySource::Estimated => None,
            LatencySource::Measured(log) => log
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .take(fate.pn),
        };
        let one_way = arrived.map_or(rtt / 2, |at| at.saturating_duration_since(fate.time_sent));
        match fate.replica.and_then(|r| self.pending.remove(&r.item)) {
            Some(p) => {
                let latency = fate.time_sent.saturating_duration_since(p.first_sent) + one_way;
                self.estimates.on_delivered(latency);
                let reward = self.config.utility.delivered_reward(latency) as f32;
                self.experience(Transition {
                    state: p.state.to_vec(),
                    action: RETRANSMIT,
                    reward,
                    next_state: p.state.to_vec(),
                    done: true,
                });
            }
            None if fate.replica.is_none() => self.estimates.on_delivered(one_way),
            None => {}
        }
    }

    fn report_state(&self, out: &mut PolicyState) {
        out.set("rto_ms", self.rto.rto().as_secs_f64() * 1e3);
        out.set(
            "latency_measured",
            f64::from(u8::from(matches!(
                self.config.latency,
                LatencySource::Measured(_)
            ))),
        );
        out.set("loss_estimate", self.estimates.loss.value());
        out.set("link_loss_estimate", self.estimates.link_loss.value());
        out.set(
            "latency_estimate_ms",
            self.estimates.latency().as_secs_f64() * 1e3,
        );
        if let Some(l) = &self.learner {
            out.set("epsilon", l.dqn.epsilon());
            out.set("learn_steps", l.dqn.learn_steps() as f64);
        }
    }
}
