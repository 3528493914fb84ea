//! The cost of one redundancy decision of a recovery policy, and the speed
//! of ART-DQN's learner: the policy alone, fed a seeded stream of transport
//! callbacks, so the numbers are the adapters' own (ART journal §8.1
//! compares ART, ART-MAB and ART-DQN's CPU overheads).
//!
//! The feed: packets sent one per 100 µs of virtual time, each lost with
//! probability `loss`; every loss asks the policy for a decision (round 1),
//! each replica it asks for is sent and lost with the same probability, and
//! a round whose replicas are all lost asks for round 2, and so on (up to 8
//! rounds). Acknowledged replicas are reported acknowledged, so the learning
//! adapters get their rewards (and ART-DQN learns online, as it does in a
//! run). Everything but the policy's own work is a few integer operations.

use std::time::{Duration, Instant as StdInstant};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::policy::{
    Decision, ItemId, LostData, PacketFate, PacketTag, PathView, PolicyContext, PolicyEvents,
    PolicyFactory, ReplicaRef, SentView,
};
use wire::time::{Duration as SimDuration, Instant};

/// What feeding one policy cost.
#[derive(Clone, Copy, Debug, Default)]
pub struct DecisionCost {
    /// Decisions asked for (`on_data_lost` calls).
    pub decisions: u64,
    /// Replicas the decisions asked for.
    pub replicas: u64,
    /// Wall time of the whole feed (every callback).
    pub wall: Duration,
}

impl DecisionCost {
    /// Microseconds per decision, callbacks between decisions included.
    pub fn us_per_decision(&self) -> f64 {
        if self.decisions == 0 {
            return 0.0;
        }
        self.wall.as_secs_f64() * 1e6 / self.decisions as f64
    }
}

/// The path every decision sees: 10 Mbit/s, 30 ms (an LTE-like path).
fn path() -> PathView {
    PathView {
        srtt: SimDuration::from_millis(30),
        min_rtt: SimDuration::from_millis(30),
        latest_rtt: SimDuration::from_millis(30),
        rttvar: SimDuration::from_millis(5),
        cwnd: 100_000,
        bytes_in_flight: 50_000,
        pacing_rate: 1_250_000,
        mtu: 1250,
    }
}

/// Feeds a fresh policy of `factory` with `packets` packets at loss rate
/// `loss` (seeded by `seed`) and times it.
pub fn feed(factory: &dyn PolicyFactory, packets: u64, loss: f64, seed: u64) -> DecisionCost {
    let mut policy = factory.build();
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut losses = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let path = path();
    let mut cost = DecisionCost::default();
    // Nobody listens: the policies' trace events are dropped unbuilt.
    let mut events = PolicyEvents::default();
    let mut pn = 0u64;
    let started = StdInstant::now();
    for i in 0..packets {
        let now = Instant::ZERO + SimDuration::from_micros(100 * i);
        pn += 1;
        let tag = policy.on_packet_sent(
            &mut PolicyContext::new(now, &path, &mut rng, &mut events),
            &SentView {
                pn,
                size: 1250,
                replica: None,
                carries_new_data: true,
            },
        );
        let fate = |pn: u64, tag: Option<PacketTag>, replica: Option<ReplicaRef>| PacketFate {
            pn,
            time_sent: now,
            size: 1250,
            tag,
            replica,
            carries_new_data: replica.is_none(),
        };
        if !losses.gen_bool(loss) {
            policy.on_packet_acked(
                &mut PolicyContext::new(now, &path, &mut rng, &mut events),
                &fate(pn, tag, None),
            );
            continue;
        }
        policy.on_packet_lost(
            &mut PolicyContext::new(now, &path, &mut rng, &mut events),
            &fate(pn, tag, None),
        );
        let item = ItemId(i);
        for round in 1..=8u32 {
            let lost = LostData::new(item, round, now, now, 1200);
            let n = match policy.on_data_lost(
                &mut PolicyContext::new(now, &path, &mut rng, &mut events),
                &lost,
            ) {
                Decision::Retransmit { send_at, .. } => send_at.len(),
                Decision::Drop | Decision::Defer => 0,
            };
            cost.decisions += 1;
            cost.replicas += n as u64;
            let mut delivered = false;
            for index in 0..n {
                pn += 1;
                let replica = Some(ReplicaRef {
                    item,
                    round,
                    index: index as u16,
                });
                let tag = policy.on_packet_sent(
                    &mut PolicyContext::new(now, &path, &mut rng, &mut events),
                    &SentView {
                        pn,
                        size: 1250,
                        replica,
                        carries_new_data: false,
                    },
                );
                if losses.gen_bool(loss) {
                    policy.on_packet_lost(
                        &mut PolicyContext::new(now, &path, &mut rng, &mut events),
                        &fate(pn, tag, replica),
                    );
                } else {
                    policy.on_packet_acked(
                        &mut PolicyContext::new(now, &path, &mut rng, &mut events),
                        &fate(pn, tag, replica),
                    );
                    delivered = true;
                }
            }
            if delivered || n == 0 {
                break;
            }
        }
    }
    cost.wall = started.elapsed();
    cost
}

/// Learning steps per second of a learner with `config` (ART-DQN's:
/// `recovery::art::DqnAdapterConfig::dqn`; RCP's:
/// `recovery::rcp::policy::table3_dqn`): the replay memory is filled with `fill`
/// random experiences first, then `steps` learning steps are timed.
pub fn dqn_learn_rate(
    config: learn::DqnConfig,
    fill: usize,
    steps: u64,
    seed: u64,
) -> anyhow::Result<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let state_dim = config.state_dim;
    let actions = config.actions;
    let mut dqn = learn::Dqn::new(config, &mut rng)?;
    for _ in 0..fill {
        let state: Vec<f32> = (0..state_dim).map(|_| rng.gen()).collect();
        let next_state: Vec<f32> = (0..state_dim).map(|_| rng.gen()).collect();
        let t = learn::Transition {
            state,
            action: rng.gen_range(0..actions),
            reward: rng.gen_range(-1.0..1.0),
            next_state,
            done: false,
        };
        dqn.remember(t)?;
    }
    let started = StdInstant::now();
    let mut taken = 0u64;
    for _ in 0..steps {
        if dqn.learn(&mut rng)?.is_some() {
            taken += 1;
        }
    }
    let secs = started.elapsed().as_secs_f64();
    anyhow::ensure!(
        taken == steps,
        "only {taken} of {steps} learning steps were taken"
    );
    Ok(taken as f64 / secs.max(1e-9))
}
