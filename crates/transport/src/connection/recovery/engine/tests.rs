//! The engine's unit tests and its property test.
use std::collections::BTreeMap;

use proptest::prelude::*;
use wire::time::Duration;
use wire::StreamId;

use super::*;

fn at(ms: u64) -> Instant {
    Instant::from_millis(ms)
}

fn chunk() -> Vec<StreamChunk> {
    vec![StreamChunk {
        id: StreamId(0),
        offset: 0,
        len: 100,
        fin: false,
    }]
}

const LEFT: Remaining = Remaining {
    stream: 100,
    datagram: 0,
    position: None,
};
const NONE: Remaining = Remaining {
    stream: 0,
    datagram: 0,
    position: None,
};

fn one_now(lost: &LostData) -> Decision {
    Decision::single(lost.first_lost)
}

#[test]
fn a_round_whose_data_is_gone_leaves_a_record() {
    // Formerly `start_round`'s silent "already acknowledged" exit.
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    assert_eq!(
        e.start_round(at(10), id, NONE, one_now),
        RoundStart::Ended {
            dropped_datagrams: Vec::new()
        }
    );
    let recs = e.take_records();
    assert_eq!(recs.len(), 1);
    assert_eq!(
        recs[0].outcome,
        RecoveryOutcome::Abandoned {
            reason: AbandonReason::NothingLeft,
            at: at(10)
        }
    );
    assert!(!e.is_live(id));
}

#[test]
fn an_empty_replica_leaves_a_record() {
    // Formerly `on_replica_empty`'s silent exit.
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    e.start_round(at(10), id, LEFT, one_now);
    let r = e.pop_due(at(10), true).expect("due");
    e.on_replica_empty(at(11), &r);
    let recs = e.take_records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].retransmissions, 0);
    assert!(matches!(
        recs[0].outcome,
        RecoveryOutcome::Abandoned {
            reason: AbandonReason::NothingLeft,
            ..
        }
    ));
    assert_eq!(
        e.pop_due(at(100), true),
        None,
        "its queue entries are stale"
    );
}

#[test]
fn rounds_advance_and_delivery_records_n_and_k() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    let two = |lost: &LostData| Decision::Retransmit {
        send_at: vec![lost.first_lost, lost.first_lost + Duration::from_millis(5)],
        opportunistic: false,
    };
    assert!(matches!(
        e.start_round(at(10), id, LEFT, two),
        RoundStart::Scheduled { round: 1, .. }
    ));
    let a = e.pop_due(at(10), true).expect("first replica");
    assert_eq!(e.pop_due(at(10), true), None, "second not due yet");
    e.on_replica_sent(&a);
    assert_eq!(
        e.on_replica_lost(at(25), &a, at(10)),
        ReplicaLoss::RoundGoesOn
    );
    let b = e.pop_due(at(15), true).expect("second replica");
    e.on_replica_sent(&b);
    assert_eq!(
        e.on_replica_lost(at(30), &b, at(15)),
        ReplicaLoss::RoundOver
    );
    assert!(matches!(
        e.start_round(at(30), id, LEFT, one_now),
        RoundStart::Scheduled { round: 2, .. }
    ));
    // The first round's straggler is stale for the round count...
    assert_eq!(e.on_replica_lost(at(35), &a, at(10)), ReplicaLoss::Stale);
    let c = e.pop_due(at(30), true).expect("round 2");
    e.on_replica_sent(&c);
    assert_eq!(
        e.on_replica_acked(at(60), &c, at(30), NONE),
        ReplicaAck::Delivered
    );
    let recs = e.take_records();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].retransmissions, 3);
    assert_eq!(recs[0].delivered_round(), Some(2));
    // ...and a late acknowledgement of it finds the item gone: no record.
    e.on_late_ack(at(70), id, 1, 1, at(15), NONE);
    assert!(e.take_records().is_empty());
}

/// A replica popped for a packet with no room for a byte of it goes back
/// to the queue, due at once, and still counts as queued: the round does
/// not end for want of it.
#[test]
fn a_replica_put_back_is_due_again() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    e.start_round(at(10), id, LEFT, one_now);
    let r = e.pop_due(at(10), true).expect("due");
    assert!(!e.has_due(at(10), true));
    e.put_back(at(12), &r);
    assert_eq!(e.next_send_at(), Some(at(12)));
    let again = e.pop_due(at(12), true).expect("due again");
    assert_eq!(again, r);
    e.on_replica_sent(&again);
    assert_eq!(
        e.on_replica_lost(at(20), &again, at(12)),
        ReplicaLoss::RoundOver
    );
    // A stale one (its round over) is not put back.
    e.start_round(at(13), id, LEFT, one_now);
    e.put_back(at(13), &r);
    let next = e.pop_due(at(13), true).expect("round 2's replica");
    assert_eq!(next.round, 2);
    assert!(!e.has_queued());
}

/// A late acknowledgement of a packet that carried only part of an item
/// (a replica cut to fit its packet) does not deliver it while the rest
/// is unacknowledged; once nothing is left, it does.
#[test]
fn a_late_ack_of_part_of_an_item_does_not_deliver_it() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    e.start_round(at(10), id, LEFT, one_now);
    let r = e.pop_due(at(10), true).expect("due");
    e.on_replica_sent(&r);
    let half = Remaining { stream: 50, ..LEFT };
    e.on_late_ack(at(40), id, 1, 0, at(10), half);
    assert!(e.take_records().is_empty(), "delivered with 50 bytes left");
    assert!(e.is_live(id));
    e.on_late_ack(at(45), id, 1, 0, at(10), NONE);
    assert_eq!(e.take_records()[0].delivered_round(), Some(1));
}

#[test]
fn a_reinjection_in_flight_does_not_postpone_the_next_round() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    assert!(!e.reinject(at(10), id), "no round yet");
    e.start_round(at(10), id, LEFT, one_now);
    assert!(!e.reinject(at(10), id), "its replica is still queued");
    let a = e.pop_due(at(10), true).expect("ARQ's retransmission");
    assert!(!e.on_replica_sent(&a), "the policy's own replica");
    assert!(e.reinject(at(20), id));
    assert!(!e.reinject(at(20), id), "a reinjection is already queued");
    let b = e.pop_due(at(20), true).expect("the reinjection");
    assert_eq!((b.round, b.index), (1, 1));
    assert!(e.on_replica_sent(&b), "a reinjection");
    // ARQ's copy is lost while the reinjection is in flight: the round is
    // over at once (ARQ retransmits now, not when `b` is lost too).
    assert_eq!(
        e.on_replica_lost(at(40), &a, at(10)),
        ReplicaLoss::RoundOver
    );
    assert!(matches!(
        e.start_round(at(40), id, LEFT, one_now),
        RoundStart::Scheduled { round: 2, .. }
    ));
    let c = e.pop_due(at(40), true).expect("round 2");
    assert_eq!((c.round, c.index), (2, 0));
    assert!(!e.on_replica_sent(&c));
    // The reinjection's loss changes no round.
    assert_eq!(e.on_replica_lost(at(60), &b, at(20)), ReplicaLoss::Stale);
    assert_eq!(
        e.on_replica_acked(at(90), &c, at(40), NONE),
        ReplicaAck::Delivered
    );
    let rec = &e.take_records()[0];
    assert_eq!(rec.retransmissions, 3);
    assert!(matches!(
        rec.outcome,
        RecoveryOutcome::Delivered {
            needed: 3,
            round: 2,
            ..
        }
    ));
    // T_unit of the first retransmission: sent at 10, declared lost at 40.
    assert_eq!(rec.t_unit, Some(Duration::from_millis(30)));
    assert!(
        rec.deteriorated(),
        "recovered 30 ms (one T_unit) after the loss"
    );
    assert!(!e.reinject(at(100), id), "delivered items are gone");
}

#[test]
fn a_reinjection_that_arrives_first_delivers_the_item() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    e.start_round(at(10), id, LEFT, one_now);
    let a = e.pop_due(at(10), true).expect("ARQ's retransmission");
    e.on_replica_sent(&a);
    assert!(e.reinject(at(25), id));
    let b = e.pop_due(at(25), true).expect("the reinjection");
    e.on_replica_sent(&b);
    assert_eq!(
        e.on_replica_lost(at(70), &a, at(10)),
        ReplicaLoss::RoundOver
    );
    e.start_round(at(70), id, LEFT, one_now);
    let c = e.pop_due(at(70), true).expect("round 2");
    e.on_replica_sent(&c);
    // The reinjection, sent in round 1, gets through before round 2's copy.
    assert_eq!(
        e.on_replica_acked(at(80), &b, at(25), NONE),
        ReplicaAck::Delivered
    );
    let rec = &e.take_records()[0];
    assert_eq!(rec.retransmissions, 3);
    assert_eq!(
        rec.outcome,
        RecoveryOutcome::Delivered {
            round: 1,
            recovery_sent: at(25),
            needed: 2,
            acked_at: at(80),
        }
    );
    assert_eq!(rec.t_unit, Some(Duration::from_millis(60)));
    assert!(!rec.deteriorated(), "rescued 15 ms after the loss");
    // Round 2's copy finds the item gone.
    assert_eq!(
        e.on_replica_acked(at(120), &c, at(70), NONE),
        ReplicaAck::Nothing
    );
    assert!(e.take_records().is_empty());
}

#[test]
fn a_queued_reinjection_holds_no_round_either() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    e.start_round(at(10), id, LEFT, one_now);
    let a = e.pop_due(at(10), true).expect("ARQ's retransmission");
    e.on_replica_sent(&a);
    assert!(e.reinject(at(20), id), "queued, not sent yet");
    assert_eq!(
        e.on_replica_lost(at(30), &a, at(10)),
        ReplicaLoss::RoundOver
    );
    e.start_round(at(30), id, LEFT, one_now);
    // The reinjection of round 1 is stale: round 2's copy goes instead.
    let c = e.pop_due(at(30), true).expect("round 2");
    assert_eq!((c.round, c.index), (2, 0));
    assert_eq!(e.pop_due(at(30), true), None);
    e.on_replica_sent(&c);
    assert!(e.reinject(at(35), id), "round 2 may be reinjected");
}

#[test]
fn dropped_datagrams_are_abandoned_but_stream_data_is_not() {
    let mut e = Engine::default();
    let d = e.create(at(0), at(10), Vec::new(), vec![7, 8]);
    let drop = |_: &LostData| Decision::Drop;
    let dg = Remaining {
        stream: 0,
        datagram: 40,
        position: None,
    };
    assert_eq!(
        e.start_round(at(10), d, dg, drop),
        RoundStart::Ended {
            dropped_datagrams: vec![7, 8]
        }
    );
    let s = e.create(at(0), at(10), chunk(), Vec::new());
    assert!(matches!(
        e.start_round(at(10), s, LEFT, drop),
        RoundStart::Scheduled { round: 1, .. }
    ));
    let recs = e.take_records();
    assert_eq!(recs.len(), 1);
    assert!(matches!(
        recs[0].outcome,
        RecoveryOutcome::Abandoned {
            reason: AbandonReason::Dropped,
            ..
        }
    ));
}

#[test]
fn a_deferred_round_queues_nothing_until_resumed_with_the_same_lost_data() {
    let mut e = Engine::default();
    let id = e.create(at(0), at(10), chunk(), Vec::new());
    let mut asked = Vec::new();
    let start = e.start_round(at(10), id, LEFT, |l| {
        asked.push(l.clone());
        Decision::Defer
    });
    assert_eq!(start, RoundStart::Deferred { round: 1 });
    assert!(!e.has_queued());
    // Deferred: no reinjection, no new round from a stray acknowledgement.
    assert!(!e.reinject(at(10), id));
    let stray = ReplicaRef {
        item: id,
        round: 0,
        index: 0,
    };
    assert_eq!(
        e.on_replica_acked(at(10), &stray, at(0), LEFT),
        ReplicaAck::Nothing
    );
    let start = e.resume_round(at(10), id, LEFT, |l| {
        asked.push(l.clone());
        Decision::Retransmit {
            send_at: vec![at(10), at(12)],
            opportunistic: true,
        }
    });
    assert!(
        matches!(start, RoundStart::Scheduled { round: 1, ref replicas } if replicas.len() == 2)
    );
    assert_eq!(asked.len(), 2);
    assert_eq!(asked[0].round, asked[1].round);
    assert_eq!(asked[0].retransmissions, asked[1].retransmissions);
    assert_eq!(e.pop_due(at(10), false).map(|r| r.round), Some(1));
    // Only a deferred round resumes.
    assert_eq!(
        e.resume_round(at(10), id, LEFT, |_| Decision::Drop),
        RoundStart::Unknown
    );
}

/// One step of a random history of losses, sends and fates.
#[derive(Clone, Debug)]
enum Op {
    /// An original packet is declared lost: a new item, `replicas` per round.
    LoseOriginal { replicas: u8, datagram: bool },
    /// Send the next due replica (`cwnd_ok`: the window allows it).
    SendDue { cwnd_ok: bool },
    /// A replica in flight is declared lost.
    LoseReplica(usize),
    /// A replica in flight is acknowledged; `partial`: it could not carry
    /// everything.
    AckReplica { which: usize, partial: bool },
    /// A packet declared lost earlier is acknowledged after all.
    LateAck(usize),
    /// An item's stream is reset: nothing left to send.
    Reset(usize),
    /// A policy asks to reinject an item.
    Reinject(usize),
    /// Time passes.
    Wait(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u8..4, any::<bool>())
            .prop_map(|(replicas, datagram)| Op::LoseOriginal { replicas, datagram }),
        any::<bool>().prop_map(|cwnd_ok| Op::SendDue { cwnd_ok }),
        any::<usize>().prop_map(Op::LoseReplica),
        (any::<usize>(), prop::bool::weighted(0.2))
            .prop_map(|(which, partial)| Op::AckReplica { which, partial }),
        any::<usize>().prop_map(Op::LateAck),
        any::<usize>().prop_map(Op::Reset),
        any::<usize>().prop_map(Op::Reinject),
        any::<u8>().prop_map(Op::Wait),
    ]
}

/// The connection's side of the engine, simulated.
#[derive(Default)]
struct World {
    e: Engine,
    now: u64,
    remaining: BTreeMap<ItemId, Remaining>,
    replicas: BTreeMap<ItemId, u8>,
    in_flight: Vec<(ReplicaRef, Instant)>,
    lost: Vec<(ItemId, u32, Instant)>,
    sent: BTreeMap<ItemId, u32>,
    created: Vec<ItemId>,
}

impl World {
    fn t(&self) -> Instant {
        at(self.now)
    }

    fn start_round(&mut self, id: ItemId) {
        let now = self.t();
        let n = self.replicas.get(&id).copied().unwrap_or(1);
        let rem = self.remaining.get(&id).copied().unwrap_or_default();
        self.e.start_round(now, id, rem, |lost| {
            if lost.kind == DataKind::Datagram && lost.round > 2 {
                return Decision::Drop;
            }
            Decision::Retransmit {
                send_at: (0..n)
                    .map(|i| now + Duration::from_millis(u64::from(i) * 3))
                    .collect(),
                opportunistic: n > 1,
            }
        });
    }

    fn apply(&mut self, op: Op) {
        let now = self.t();
        match op {
            Op::LoseOriginal { replicas, datagram } => {
                let (chunks, dgs, rem) = if datagram {
                    (
                        Vec::new(),
                        vec![1],
                        Remaining {
                            stream: 0,
                            datagram: 50,
                            position: None,
                        },
                    )
                } else {
                    (chunk(), Vec::new(), LEFT)
                };
                let id = self.e.create(now, now, chunks, dgs);
                self.created.push(id);
                self.remaining.insert(id, rem);
                self.replicas.insert(id, replicas);
                self.lost.push((id, 0, now));
                self.start_round(id);
            }
            Op::SendDue { cwnd_ok } => {
                if let Some(r) = self.e.pop_due(now, cwnd_ok) {
                    let rem = self.remaining.get(&r.item).copied().unwrap_or_default();
                    if rem.is_empty() {
                        self.e.on_replica_empty(now, &r);
                    } else {
                        self.e.on_replica_sent(&r);
                        *self.sent.entry(r.item).or_default() += 1;
                        self.in_flight.push((r, now));
                    }
                }
            }
            Op::LoseReplica(i) if !self.in_flight.is_empty() => {
                let (r, sent_at) = self.in_flight.remove(i % self.in_flight.len());
                self.lost.push((r.item, r.round, sent_at));
                if self.e.on_replica_lost(now, &r, sent_at) == ReplicaLoss::RoundOver {
                    self.start_round(r.item);
                }
            }
            Op::AckReplica { which, partial } if !self.in_flight.is_empty() => {
                let (r, sent_at) = self.in_flight.remove(which % self.in_flight.len());
                let rem = if partial {
                    self.remaining.get(&r.item).copied().unwrap_or_default()
                } else {
                    NONE
                };
                self.remaining.insert(r.item, rem);
                if self.e.on_replica_acked(now, &r, sent_at, rem) == ReplicaAck::NeedsRound {
                    self.start_round(r.item);
                }
            }
            Op::LateAck(i) if !self.lost.is_empty() => {
                let (item, round, sent_at) = self.lost.remove(i % self.lost.len());
                self.remaining.insert(item, NONE);
                self.e.on_late_ack(now, item, round, 0, sent_at, NONE);
            }
            Op::Reset(i) if !self.created.is_empty() => {
                let id = self.created[i % self.created.len()];
                self.remaining.insert(id, NONE);
            }
            Op::Reinject(i) if !self.created.is_empty() => {
                let id = self.created[i % self.created.len()];
                self.e.reinject(now, id);
            }
            Op::Wait(ms) => self.now += u64::from(ms),
            _ => {}
        }
    }

    /// Let everything play out: send what is queued, acknowledge it.
    fn settle(&mut self) {
        for _ in 0..1000 {
            self.now += 1000;
            self.apply(Op::SendDue { cwnd_ok: true });
            if !self.in_flight.is_empty() {
                self.apply(Op::AckReplica {
                    which: 0,
                    partial: false,
                });
            }
            if !self.e.has_queued() && self.in_flight.is_empty() {
                break;
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever the order of losses, acknowledgements, late
    /// acknowledgements and resets, every item ends in exactly one
    /// record, with `k` equal to the replicas actually sent and a
    /// delivering round no later than the last round started.
    #[test]
    fn every_lost_item_ends_in_exactly_one_record(
        ops in prop::collection::vec(op(), 1..120)
    ) {
        let mut w = World::default();
        let mut records = Vec::new();
        for op in ops {
            w.apply(op);
            records.extend(w.e.take_records());
        }
        w.settle();
        records.extend(w.e.take_records());
        let mut seen: BTreeMap<ItemId, &RecoveryRecord> = BTreeMap::new();
        for r in &records {
            prop_assert!(seen.insert(r.item, r).is_none(), "two records for {:?}", r.item);
        }
        for id in &w.created {
            let r = seen.get(id);
            prop_assert!(r.is_some(), "no record for {:?}", id);
            let r = r.unwrap();
            prop_assert!(!w.e.is_live(*id));
            prop_assert_eq!(r.retransmissions, w.sent.get(id).copied().unwrap_or(0));
        }
        prop_assert_eq!(seen.len(), w.created.len());
    }
}
