//! The retransmission engine: lost data as *items*, their *rounds* and the
//! *replicas* the recovery policy asks for.
//!
//! Lost 1-RTT stream data becomes an item. The policy decides how many
//! replicas of an item to send in each round and when; the queue here holds
//! them until due. A round ends when every replica sent in it is declared
//! lost; the item then enters the next round and the policy is asked again.
//! When a packet carrying the item's data is acknowledged, the item is
//! delivered; queued replicas are cancelled.
//!
//! This module is the one place where an item is created, advances a
//! round, is delivered or is given up, and every exit leaves exactly one
//! [`RecoveryRecord`] in the outbox ([`Engine::take_records`]): delivered,
//! with the round `n` that delivered it and the replicas `k` it cost, or
//! abandoned, with the reason. The engine knows nothing of streams,
//! packets or policies: the connection measures what of an item is still
//! unacknowledged ([`Remaining`]) and passes the policy in as a closure.

use std::collections::{BTreeMap, BTreeSet};

use wire::time::Instant;

use crate::events::{AbandonReason, RecoveryOutcome, RecoveryRecord};
use crate::policy::{DataKind, Decision, ItemId, LostData, ReplicaRef, MAX_REPLICAS};
use crate::streams::StreamChunk;

/// Lost data being recovered.
#[derive(Debug)]
struct Item {
    chunks: Vec<StreamChunk>,
    /// DATAGRAM payloads carried (ids into the connection's datagram store).
    datagrams: Vec<u64>,
    first_sent: Instant,
    first_lost: Instant,
    /// Current round (0 until the first round starts).
    round: u32,
    /// Replicas sent so far, all rounds (`k`).
    sent: u32,
    /// Replicas of the current round sent and not yet declared lost.
    outstanding: u32,
    /// Replicas of the current round still queued.
    queued: u32,
    /// Replicas the current round has had so far (the policy's, then any
    /// reinjections): the next replica's index.
    round_replicas: u16,
    /// Replicas the policy's decision asked for in the current round (the
    /// indexes from here on are reinjections).
    decided: u16,
    /// `sent` when each round started (index = round − 1), for the
    /// delivering copy's position ([`RecoveryOutcome::Delivered::needed`]).
    round_starts: Vec<u32>,
    opportunistic: bool,
    /// The policy deferred the current round's decision
    /// ([`Decision::Defer`]): nothing is queued until it is resumed.
    deferred: bool,
}

/// A replica waiting for its send time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct QueuedReplica {
    send_at: Instant,
    seq: u64,
    item: ItemId,
    round: u32,
    index: u16,
}

impl QueuedReplica {
    fn replica(&self) -> ReplicaRef {
        ReplicaRef {
            item: self.item,
            round: self.round,
            index: self.index,
        }
    }
}

/// What of an item is still unacknowledged, as the connection measured it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Remaining {
    /// Stream payload bytes (a bare FIN counting as one).
    pub stream: u64,
    /// DATAGRAM payload bytes still held.
    pub datagram: u64,
}

impl Remaining {
    fn is_empty(&self) -> bool {
        self.stream == 0 && self.datagram == 0
    }
}

/// The data an item carries, for the send path to write a replica.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ItemData<'a> {
    /// Stream data as first sent.
    pub chunks: &'a [StreamChunk],
    /// DATAGRAM payload ids.
    pub datagrams: &'a [u64],
}

/// What starting a round led to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum RoundStart {
    /// Replicas queued: `(index, send_at)` each, for the event subscribers.
    Scheduled {
        /// The round started.
        round: u32,
        /// Each replica's index and send time.
        replicas: Vec<(u16, Instant)>,
    },
    /// The item left (a record is in the outbox). `datagrams` lists the
    /// DATAGRAM payloads the policy gave up, which the caller forgets.
    Ended {
        /// Payloads dropped by the policy's `Drop`.
        dropped_datagrams: Vec<u64>,
    },
    /// The policy deferred its decision ([`Decision::Defer`]): the round
    /// started, nothing is queued until [`Engine::resume_round`].
    Deferred {
        /// The round started.
        round: u32,
    },
    /// No such item (already gone).
    Unknown,
}

/// What the loss of a replica means for its item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplicaLoss {
    /// It was the last live replica of the current round: the caller starts
    /// the next round (and, per ART journal §6.4, only now is the loss a
    /// congestion signal).
    RoundOver,
    /// Other replicas of the round are still queued or in flight.
    RoundGoesOn,
    /// An older round's straggler, or its item is gone.
    Stale,
}

/// What the acknowledgement of a replica means for its item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ReplicaAck {
    /// The item was delivered (a record is in the outbox).
    Delivered,
    /// Part of the data is still unacknowledged and nothing else of the
    /// round is pending: the caller starts another round for the rest.
    NeedsRound,
    /// Part is unacknowledged, other replicas of the round are pending; or
    /// the item is gone.
    Nothing,
}

/// Items, their rounds and the replica queue, with the outbox of records.
#[derive(Debug, Default)]
pub(crate) struct Engine {
    items: BTreeMap<ItemId, Item>,
    /// Ordered by send time (then insertion), so due replicas are a prefix.
    queue: BTreeSet<QueuedReplica>,
    next_item: u64,
    next_seq: u64,
    /// Records of items that left, for [`Engine::take_records`].
    records: Vec<RecoveryRecord>,
}

impl Engine {
    /// Lost data becomes an item (round 0: no round started yet).
    pub fn create(
        &mut self,
        first_sent: Instant,
        first_lost: Instant,
        chunks: Vec<StreamChunk>,
        datagrams: Vec<u64>,
    ) -> ItemId {
        let id = ItemId(self.next_item);
        self.next_item += 1;
        self.items.insert(
            id,
            Item {
                chunks,
                datagrams,
                first_sent,
                first_lost,
                round: 0,
                sent: 0,
                outstanding: 0,
                queued: 0,
                round_replicas: 0,
                decided: 0,
                round_starts: Vec::new(),
                opportunistic: false,
                deferred: false,
            },
        );
        id
    }

    /// The data of a live item.
    pub fn data(&self, id: ItemId) -> Option<ItemData<'_>> {
        self.items.get(&id).map(|i| ItemData {
            chunks: &i.chunks,
            datagrams: &i.datagrams,
        })
    }

    /// Whether the item is still being recovered.
    #[cfg(test)]
    pub fn is_live(&self, id: ItemId) -> bool {
        self.items.contains_key(&id)
    }

    /// Begin the next round of `id`, asking `decide` (the policy) for its
    /// replicas. With nothing left to send, or a `Drop` of datagram-only
    /// data, the item leaves instead. A [`Decision::Defer`] leaves the
    /// round started but undecided until [`Engine::resume_round`].
    pub fn start_round(
        &mut self,
        now: Instant,
        id: ItemId,
        remaining: Remaining,
        decide: impl FnOnce(&LostData) -> Decision,
    ) -> RoundStart {
        if !self.items.contains_key(&id) {
            return RoundStart::Unknown;
        }
        if remaining.is_empty() {
            // Acknowledged through another packet, or its stream was reset.
            self.abandon(now, id, AbandonReason::NothingLeft);
            return RoundStart::Ended {
                dropped_datagrams: Vec::new(),
            };
        }
        let Some(item) = self.items.get_mut(&id) else {
            return RoundStart::Unknown;
        };
        item.round += 1;
        item.round_starts.push(item.sent);
        self.decide_round(now, id, remaining, decide)
    }

    /// Ask `decide` again for the round of `id` that a [`Decision::Defer`]
    /// left undecided: the same [`LostData`] as the first time. `Unknown`
    /// when the item is gone or its round is not deferred.
    pub fn resume_round(
        &mut self,
        now: Instant,
        id: ItemId,
        remaining: Remaining,
        decide: impl FnOnce(&LostData) -> Decision,
    ) -> RoundStart {
        if !self.items.get(&id).is_some_and(|i| i.deferred) {
            return RoundStart::Unknown;
        }
        if remaining.is_empty() {
            self.abandon(now, id, AbandonReason::NothingLeft);
            return RoundStart::Ended {
                dropped_datagrams: Vec::new(),
            };
        }
        self.decide_round(now, id, remaining, decide)
    }

    /// The decision of the round `id` is in: queue its replicas, drop it,
    /// or leave it deferred.
    fn decide_round(
        &mut self,
        now: Instant,
        id: ItemId,
        remaining: Remaining,
        decide: impl FnOnce(&LostData) -> Decision,
    ) -> RoundStart {
        let kind = if remaining.stream > 0 {
            DataKind::Stream
        } else {
            DataKind::Datagram
        };
        let Some(item) = self.items.get_mut(&id) else {
            return RoundStart::Unknown;
        };
        let lost = LostData {
            item: id,
            first_sent: item.first_sent,
            first_lost: item.first_lost,
            round: item.round,
            retransmissions: item.sent,
            bytes: remaining.stream + remaining.datagram,
            kind,
        };
        let (mut times, opportunistic) = match decide(&lost) {
            Decision::Retransmit {
                send_at,
                opportunistic,
            } => (send_at, opportunistic),
            Decision::Drop if kind == DataKind::Datagram => {
                // Give the datagrams up (RFC 9221 leaves them unreliable).
                let dropped_datagrams = item.datagrams.clone();
                self.abandon(now, id, AbandonReason::Dropped);
                return RoundStart::Ended { dropped_datagrams };
            }
            // Stream data is reliable: refuse to drop it.
            Decision::Drop => (vec![now], false),
            Decision::Defer => {
                item.deferred = true;
                item.queued = 0;
                item.round_replicas = 0;
                item.decided = 0;
                item.outstanding = 0;
                return RoundStart::Deferred { round: item.round };
            }
        };
        item.deferred = false;
        if times.is_empty() {
            times.push(now);
        }
        times.truncate(MAX_REPLICAS);
        item.queued = times.len() as u32;
        item.round_replicas = times.len() as u16;
        item.decided = times.len() as u16;
        item.outstanding = 0;
        item.opportunistic = opportunistic;
        let round = item.round;
        let mut replicas = Vec::with_capacity(times.len());
        for (i, t) in times.into_iter().enumerate() {
            let send_at = t.max(now);
            let seq = self.next_seq;
            self.next_seq += 1;
            self.queue.insert(QueuedReplica {
                send_at,
                seq,
                item: id,
                round,
                index: i as u16,
            });
            replicas.push((i as u16, send_at));
        }
        RoundStart::Scheduled { round, replicas }
    }

    /// A policy asks to reinject `id` (AutoRec, autorec.md §4.2): one more
    /// replica of its current round, due now. Refused (false) when the item
    /// is gone, no round has started, a replica of the round is still
    /// queued (it will carry the data anyway), or the round reached
    /// [`MAX_REPLICAS`]. The replica joins the round: the round ends only
    /// when it too is declared lost.
    pub fn reinject(&mut self, now: Instant, id: ItemId) -> bool {
        let Some(item) = self.items.get_mut(&id) else {
            return false;
        };
        if item.round == 0
            || item.deferred
            || item.queued > 0
            || usize::from(item.round_replicas) >= MAX_REPLICAS
        {
            return false;
        }
        let index = item.round_replicas;
        item.round_replicas += 1;
        item.queued += 1;
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.insert(QueuedReplica {
            send_at: now,
            seq,
            item: id,
            round: item.round,
            index,
        });
        true
    }

    /// A replica packet was declared lost.
    pub fn on_replica_lost(&mut self, r: &ReplicaRef) -> ReplicaLoss {
        let Some(item) = self.items.get_mut(&r.item) else {
            return ReplicaLoss::Stale;
        };
        if item.round != r.round {
            return ReplicaLoss::Stale;
        }
        item.outstanding = item.outstanding.saturating_sub(1);
        if item.outstanding > 0 || item.queued > 0 {
            return ReplicaLoss::RoundGoesOn;
        }
        ReplicaLoss::RoundOver
    }

    /// A replica packet (sent at `sent_at`) was acknowledged; `remaining`
    /// is what of its item is still unacknowledged after that.
    pub fn on_replica_acked(
        &mut self,
        now: Instant,
        r: &ReplicaRef,
        sent_at: Instant,
        remaining: Remaining,
    ) -> ReplicaAck {
        let Some(item) = self.items.get_mut(&r.item) else {
            return ReplicaAck::Nothing;
        };
        if remaining.is_empty() {
            self.deliver(now, r.item, r.round, r.index, sent_at);
            return ReplicaAck::Delivered;
        }
        // A replica that could not carry every unacknowledged part (rare:
        // the data was split by other acknowledgements) does not finish the
        // item: another round for what is left, once nothing else of this
        // one is pending.
        if item.round == r.round {
            item.outstanding = item.outstanding.saturating_sub(1);
        }
        if item.queued == 0 && item.outstanding == 0 && !item.deferred {
            ReplicaAck::NeedsRound
        } else {
            ReplicaAck::Nothing
        }
    }

    /// A packet of the item from `round` (0 = its original transmission;
    /// `index` its replica index), declared lost earlier, was acknowledged
    /// after all: that round delivered the data.
    pub fn on_late_ack(
        &mut self,
        now: Instant,
        item: ItemId,
        round: u32,
        index: u16,
        sent_at: Instant,
    ) {
        if self.items.contains_key(&item) {
            self.deliver(now, item, round, index, sent_at);
        }
    }

    /// The earliest queued replica's send time.
    pub fn next_send_at(&self) -> Option<Instant> {
        self.queue.first().map(|q| q.send_at)
    }

    /// Whether any replica is queued (due or not).
    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// Take the next due replica of a live item; `allow_non_opportunistic`
    /// is whether congestion control lets a regular packet go.
    pub fn pop_due(&mut self, now: Instant, allow_non_opportunistic: bool) -> Option<ReplicaRef> {
        // Drop stale entries at the front (their item is delivered or moved
        // to a later round), then take the first due one that may go.
        while let Some(q) = self.queue.first().copied() {
            if q.send_at > now || self.is_current(&q) {
                break;
            }
            self.queue.pop_first();
        }
        let q = *self
            .queue
            .iter()
            .take_while(|q| q.send_at <= now)
            .find(|q| {
                self.is_current(q) && (allow_non_opportunistic || self.is_opportunistic(q))
            })?;
        self.queue.remove(&q);
        Some(q.replica())
    }

    /// Whether a due replica could go now.
    pub fn has_due(&self, now: Instant, allow_non_opportunistic: bool) -> bool {
        self.queue
            .iter()
            .take_while(|q| q.send_at <= now)
            .any(|q| self.is_current(q) && (allow_non_opportunistic || self.is_opportunistic(q)))
    }

    /// A replica popped by [`Engine::pop_due`] left in a packet. Returns
    /// whether it was a reinjection ([`Engine::reinject`]) rather than one
    /// the policy's decision asked for.
    pub fn on_replica_sent(&mut self, r: &ReplicaRef) -> bool {
        let Some(item) = self.items.get_mut(&r.item) else {
            return false;
        };
        item.queued = item.queued.saturating_sub(1);
        item.outstanding += 1;
        item.sent += 1;
        r.round == item.round && r.index >= item.decided
    }

    /// A replica popped by [`Engine::pop_due`] found nothing left to carry:
    /// its item's data was acknowledged some other way, or its stream reset.
    pub fn on_replica_empty(&mut self, now: Instant, r: &ReplicaRef) {
        self.abandon(now, r.item, AbandonReason::NothingLeft);
    }

    /// Give up every item still being recovered (the connection closed).
    pub fn abandon_all(&mut self, now: Instant) {
        let ids: Vec<ItemId> = self.items.keys().copied().collect();
        for id in ids {
            self.abandon(now, id, AbandonReason::ConnectionClosed);
        }
        self.queue.clear();
    }

    /// Records of the items that left since the last call, in order.
    pub fn take_records(&mut self) -> Vec<RecoveryRecord> {
        std::mem::take(&mut self.records)
    }

    /// Whether records wait in the outbox.
    pub fn has_records(&self) -> bool {
        !self.records.is_empty()
    }

    fn is_current(&self, q: &QueuedReplica) -> bool {
        self.items.get(&q.item).is_some_and(|i| i.round == q.round)
    }

    fn is_opportunistic(&self, q: &QueuedReplica) -> bool {
        self.items.get(&q.item).is_some_and(|i| i.opportunistic)
    }

    fn deliver(
        &mut self,
        now: Instant,
        id: ItemId,
        round: u32,
        index: u16,
        recovery_sent: Instant,
    ) {
        let needed = match (round, self.items.get(&id)) {
            (0, _) | (_, None) => 0,
            (n, Some(item)) => {
                let before = item
                    .round_starts
                    .get(n as usize - 1)
                    .copied()
                    .unwrap_or(item.sent);
                (before + u32::from(index) + 1).min(item.sent.max(1))
            }
        };
        self.finish(
            id,
            RecoveryOutcome::Delivered {
                round,
                recovery_sent,
                acked_at: now,
                needed,
            },
        );
    }

    fn abandon(&mut self, now: Instant, id: ItemId, reason: AbandonReason) {
        self.finish(id, RecoveryOutcome::Abandoned { reason, at: now });
    }

    /// The one exit: the item leaves, its record goes to the outbox.
    fn finish(&mut self, id: ItemId, outcome: RecoveryOutcome) {
        let Some(it) = self.items.remove(&id) else {
            return;
        };
        self.records.push(RecoveryRecord {
            item: id,
            chunks: it.chunks,
            first_sent: it.first_sent,
            first_lost: it.first_lost,
            retransmissions: it.sent,
            outcome,
        });
    }
}

#[cfg(test)]
mod tests {
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
    };
    const NONE: Remaining = Remaining {
        stream: 0,
        datagram: 0,
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
        assert_eq!(e.on_replica_lost(&a), ReplicaLoss::RoundGoesOn);
        let b = e.pop_due(at(15), true).expect("second replica");
        e.on_replica_sent(&b);
        assert_eq!(e.on_replica_lost(&b), ReplicaLoss::RoundOver);
        assert!(matches!(
            e.start_round(at(30), id, LEFT, one_now),
            RoundStart::Scheduled { round: 2, .. }
        ));
        // The first round's straggler is stale for the round count...
        assert_eq!(e.on_replica_lost(&a), ReplicaLoss::Stale);
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
        e.on_late_ack(at(70), id, 1, 1, at(15));
        assert!(e.take_records().is_empty());
    }

    #[test]
    fn a_reinjection_joins_the_current_round() {
        let mut e = Engine::default();
        let id = e.create(at(0), at(10), chunk(), Vec::new());
        assert!(!e.reinject(at(10), id), "no round yet");
        e.start_round(at(10), id, LEFT, one_now);
        assert!(!e.reinject(at(10), id), "its replica is still queued");
        let a = e.pop_due(at(10), true).expect("first replica");
        assert!(!e.on_replica_sent(&a), "the policy's own replica");
        assert!(e.reinject(at(20), id));
        let b = e.pop_due(at(20), true).expect("the reinjection");
        assert_eq!((b.round, b.index), (1, 1));
        assert!(e.on_replica_sent(&b), "a reinjection");
        // The round ends only when both are lost.
        assert_eq!(e.on_replica_lost(&a), ReplicaLoss::RoundGoesOn);
        assert_eq!(e.on_replica_lost(&b), ReplicaLoss::RoundOver);
        e.start_round(at(40), id, LEFT, one_now);
        let c = e.pop_due(at(40), true).expect("round 2");
        assert_eq!((c.round, c.index), (2, 0));
        e.on_replica_sent(&c);
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
        assert!(!e.reinject(at(100), id), "delivered items are gone");
    }

    #[test]
    fn dropped_datagrams_are_abandoned_but_stream_data_is_not() {
        let mut e = Engine::default();
        let d = e.create(at(0), at(10), Vec::new(), vec![7, 8]);
        let drop = |_: &LostData| Decision::Drop;
        let dg = Remaining {
            stream: 0,
            datagram: 40,
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
                    if self.e.on_replica_lost(&r) == ReplicaLoss::RoundOver {
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
                    self.e.on_late_ack(now, item, round, 0, sent_at);
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
}
