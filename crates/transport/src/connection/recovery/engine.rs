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
//! A *reinjection* ([`Engine::reinject`], AutoRec) is a replica the policy
//! asks for outside its decisions. It carries the round it was sent in (its
//! [`ReplicaRef`]) and delivers the item like any replica, but it is not
//! part of the round: the round ends when the replicas the policy decided
//! are lost, whatever reinjections are still in flight, so that AutoRec's
//! ARQ retransmits exactly when plain ARQ would (autorec.md §4.2: AutoRec
//! is a sender add-on beside ARQ; docs/recovery.md "AutoRec").
//!
//! This module is the one place where an item is created, advances a
//! round, is delivered or is given up, and every exit leaves exactly one
//! [`RecoveryRecord`] in the outbox ([`Engine::take_records`]): delivered,
//! with the round `n` that delivered it and the replicas `k` it cost, or
//! abandoned, with the reason. The engine knows nothing of streams,
//! packets or policies: the connection measures what of an item is still
//! unacknowledged ([`Remaining`]) and passes the policy in as a closure.

use std::collections::{BTreeMap, BTreeSet};

use wire::time::{Duration, Instant};

use super::copies::EarlyCopies;
use crate::events::{AbandonReason, RecoveryOutcome, RecoveryRecord};
use crate::policy::{
    DataKind, Decision, ItemId, LostData, ReplicaRef, StreamPosition, MAX_REPLICAS,
};
use crate::streams::StreamChunk;

/// Lost data being recovered.
#[derive(Debug)]
struct Item {
    chunks: Vec<StreamChunk>,
    /// DATAGRAM payloads carried (ids into the connection's datagram store).
    datagrams: Vec<u64>,
    first_sent: Instant,
    first_lost: Instant,
    /// T_unit of the item's first retransmission (round 1's first
    /// replica): from its send to its loss detection
    /// ([`RecoveryRecord::t_unit`]).
    t_unit: Option<Duration>,
    /// Current round (0 until the first round starts).
    round: u32,
    /// Retransmissions of its data so far (`k`): replicas of all rounds,
    /// reinjections, and the early copies (a probe's, a head-of-line copy)
    /// sent before its loss was declared.
    sent: u32,
    /// Replicas the policy decided for the current round, sent and not yet
    /// declared lost (reinjections are not counted: they hold no round).
    outstanding: u32,
    /// Replicas the policy decided for the current round, still queued.
    queued: u32,
    /// A reinjection of the current round is queued.
    reinjection_queued: bool,
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
    /// Its item's replicas were opportunistic when it was queued (the
    /// flag of a current entry is its item's: see `Engine::opportunistic_queued`).
    opportunistic: bool,
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
    /// Where the stream data sits in its stream (`LostData::position`).
    pub position: Option<StreamPosition>,
}

impl Remaining {
    pub(crate) fn is_empty(&self) -> bool {
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
    /// An older round's straggler, a reinjection (it holds no round), or
    /// its item is gone.
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
    /// Entries of `queue` queued as opportunistic. An item's flag changes
    /// only when it starts a round, which leaves its older entries stale,
    /// so with none queued no current entry is opportunistic: the
    /// congestion-limited checks of [`Engine::has_due`] and
    /// [`Engine::pop_due`], made for every packet, then need no scan of
    /// the replicas waiting for the window (11% of a busy server's time
    /// when they were scanned).
    opportunistic_queued: usize,
    next_item: u64,
    next_seq: u64,
    /// Resends of stream data before its loss was declared: counted in
    /// the item the data becomes, and delivering it when acknowledged.
    early: EarlyCopies,
    /// Records of items that left, for [`Engine::take_records`].
    records: Vec<RecoveryRecord>,
}

impl Engine {
    /// Lost data becomes an item (round 0: no round started yet). The
    /// early copies that carried some of its data already count among its
    /// retransmissions.
    pub fn create(
        &mut self,
        first_sent: Instant,
        first_lost: Instant,
        chunks: Vec<StreamChunk>,
        datagrams: Vec<u64>,
    ) -> ItemId {
        let id = ItemId(self.next_item);
        self.next_item += 1;
        let copies = self.early.count_carrying(&chunks);
        self.items.insert(
            id,
            Item {
                chunks,
                datagrams,
                first_sent,
                first_lost,
                t_unit: None,
                round: 0,
                sent: copies,
                outstanding: 0,
                queued: 0,
                reinjection_queued: false,
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
            position: remaining.position,
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
                item.reinjection_queued = false;
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
        // A reinjection still queued from the round before is stale now
        // (`pop_due` drops it): this round's replicas carry the data.
        item.reinjection_queued = false;
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
            self.enqueue(QueuedReplica {
                send_at,
                seq,
                item: id,
                round,
                index: i as u16,
                opportunistic,
            });
            replicas.push((i as u16, send_at));
        }
        RoundStart::Scheduled { round, replicas }
    }

    /// A policy asks to reinject `id` (AutoRec, autorec.md §4.2): one more
    /// copy of its data, due now, tagged with the current round and the
    /// next replica index. Refused (false) when the item is gone, no round
    /// has started, a replica of the round (decided or reinjected) is
    /// still queued (it will carry the data anyway), or the round reached
    /// [`MAX_REPLICAS`]. The reinjection holds no round (module doc): its
    /// loss never delays the next round, its acknowledgement delivers the
    /// item.
    pub fn reinject(&mut self, now: Instant, id: ItemId) -> bool {
        let Some(item) = self.items.get_mut(&id) else {
            return false;
        };
        if item.round == 0
            || item.deferred
            || item.queued > 0
            || item.reinjection_queued
            || usize::from(item.round_replicas) >= MAX_REPLICAS
        {
            return false;
        }
        let index = item.round_replicas;
        item.round_replicas += 1;
        item.reinjection_queued = true;
        let (round, opportunistic) = (item.round, item.opportunistic);
        let seq = self.next_seq;
        self.next_seq += 1;
        self.enqueue(QueuedReplica {
            send_at: now,
            seq,
            item: id,
            round,
            index,
            opportunistic,
        });
        true
    }

    /// A replica packet sent at `sent_at` was declared lost at `now`.
    pub fn on_replica_lost(
        &mut self,
        now: Instant,
        r: &ReplicaRef,
        sent_at: Instant,
    ) -> ReplicaLoss {
        let Some(item) = self.items.get_mut(&r.item) else {
            return ReplicaLoss::Stale;
        };
        if (r.round, r.index) == (1, 0) && item.t_unit.is_none() {
            item.t_unit = Some(now.saturating_duration_since(sent_at));
        }
        if item.round != r.round || r.index >= item.decided {
            // An older round's straggler, or a reinjection (no round waits
            // for one).
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
        if item.round == r.round && r.index < item.decided {
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
    /// after all; `remaining` is what of the item is still unacknowledged
    /// after that. With nothing left, that round delivered the data. A
    /// replica that carried only part of the data (shortened to fit its
    /// packet) leaves the rest to the item's current round.
    pub fn on_late_ack(
        &mut self,
        now: Instant,
        item: ItemId,
        round: u32,
        index: u16,
        sent_at: Instant,
        remaining: Remaining,
    ) {
        if self.items.contains_key(&item) && remaining.is_empty() {
            self.deliver(now, item, round, index, sent_at);
        }
    }

    /// An early copy (a probe's, a head-of-line copy: a resend of stream
    /// data whose loss has not been declared) carrying `chunks` left.
    pub fn on_copy_sent(&mut self, chunks: &[StreamChunk]) {
        self.early.on_sent(chunks);
    }

    /// An early copy sent at `sent` carrying `chunks` was acknowledged.
    pub fn on_copy_acked(&mut self, chunks: &[StreamChunk], sent: Instant) {
        self.early.on_acked(chunks, sent);
    }

    /// When acknowledged early copies delivered all of `chunks` (data
    /// whose loss is being declared), the latest such copy's send time.
    pub fn delivered_early(&self, chunks: &[StreamChunk]) -> Option<Instant> {
        self.early.delivered_by(chunks)
    }

    /// A new item's data was already delivered by a copy sent at
    /// `copy_sent`, before its loss was declared (a probe's or a
    /// head-of-line copy): it ends delivered in round 1 by one
    /// retransmission, without a round of its own.
    pub fn delivered_by_copy(&mut self, now: Instant, item: ItemId, copy_sent: Instant) {
        if self.items.get(&item).is_some_and(|i| i.round == 0) {
            self.deliver(now, item, 1, 0, copy_sent);
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
            self.dequeue(&q);
        }
        if !allow_non_opportunistic && self.opportunistic_queued == 0 {
            return None;
        }
        let q = *self
            .queue
            .iter()
            .take_while(|q| q.send_at <= now)
            .find(|q| {
                self.is_current(q) && (allow_non_opportunistic || self.is_opportunistic(q))
            })?;
        self.dequeue(&q);
        Some(q.replica())
    }

    fn enqueue(&mut self, q: QueuedReplica) {
        if self.queue.insert(q) && q.opportunistic {
            self.opportunistic_queued += 1;
        }
    }

    fn dequeue(&mut self, q: &QueuedReplica) {
        if self.queue.remove(q) && q.opportunistic {
            self.opportunistic_queued -= 1;
        }
    }

    /// Whether a due replica could go now.
    pub fn has_due(&self, now: Instant, allow_non_opportunistic: bool) -> bool {
        if !allow_non_opportunistic && self.opportunistic_queued == 0 {
            return false;
        }
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
        item.sent += 1;
        let reinjection = r.round == item.round && r.index >= item.decided;
        if reinjection {
            item.reinjection_queued = false;
        } else {
            item.queued = item.queued.saturating_sub(1);
            item.outstanding += 1;
        }
        reinjection
    }

    /// A replica popped by [`Engine::pop_due`] could not be written (its
    /// packet had no room for a byte of it): due again at `now`.
    pub fn put_back(&mut self, now: Instant, r: &ReplicaRef) {
        let Some(opportunistic) = (self.items.get(&r.item))
            .filter(|i| i.round == r.round)
            .map(|i| i.opportunistic)
        else {
            return;
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        self.enqueue(QueuedReplica {
            send_at: now,
            seq,
            item: r.item,
            round: r.round,
            index: r.index,
            opportunistic,
        });
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
        self.opportunistic_queued = 0;
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
                // A round that never started delivered it only when an
                // early copy did (`delivered_by_copy`): the first resend.
                let before = item.round_starts.get(n as usize - 1).copied().unwrap_or(0);
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
            t_unit: it.t_unit,
            retransmissions: it.sent,
            outcome,
        });
    }
}

#[cfg(test)]
mod tests;
