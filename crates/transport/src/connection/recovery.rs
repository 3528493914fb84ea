//! Loss recovery: ACK processing, RFC 9002 loss detection and PTO, and the
//! retransmission rounds of lost stream data driven by the recovery policy.
//!
//! Lost 1-RTT stream data becomes an *item*. The policy decides how many
//! replicas of an item to send in each round and when; the queue below holds
//! them until due. A round ends when every replica sent in it is declared
//! lost; the item then enters the next round and the policy is asked again.
//! When any packet carrying the item's data is acknowledged, the item is
//! delivered: its round is recorded (`n`) with the number of replicas sent
//! (`k`), and queued replicas are cancelled.

use std::collections::{BTreeMap, BTreeSet};

use wire::time::Instant;

use super::spaces::{Retransmit, SentPacket};
use super::spurious::LostEntry;
use super::{loss, Connection, SpaceId, Timer};
use crate::events::RecoveryRecord;
use crate::policy::{DataKind, Decision, ItemId, LostData, PathView, ReplicaRef, MAX_REPLICAS};
use crate::streams::StreamChunk;

/// Lost stream data being recovered.
#[derive(Debug)]
pub(crate) struct Item {
    pub chunks: Vec<StreamChunk>,
    /// DATAGRAM payloads carried (ids into the datagram store).
    pub datagrams: Vec<u64>,
    pub first_sent: Instant,
    pub first_lost: Instant,
    /// Current round (1 = first retransmission round).
    pub round: u32,
    /// Replicas sent so far, all rounds (`k`).
    pub sent: u32,
    /// Replicas of the current round sent and not yet declared lost.
    pub outstanding: u32,
    /// Replicas of the current round still queued.
    pub queued: u32,
    pub opportunistic: bool,
}

/// A replica waiting for its send time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct QueuedReplica {
    pub send_at: Instant,
    pub seq: u64,
    pub item: ItemId,
    pub round: u32,
    pub index: u16,
}

/// The items and the replica queue.
#[derive(Debug, Default)]
pub(crate) struct RecoveryState {
    pub items: BTreeMap<ItemId, Item>,
    /// Ordered by send time (then insertion), so due replicas are a prefix.
    pub queue: BTreeSet<QueuedReplica>,
    next_item: u64,
    next_seq: u64,
}

impl RecoveryState {
    /// The earliest queued replica's send time.
    pub fn next_send_at(&self) -> Option<Instant> {
        self.queue.first().map(|q| q.send_at)
    }

    /// Pop the next due replica of a live item.
    pub fn pop_due(
        &mut self,
        now: Instant,
        allow_non_opportunistic: bool,
    ) -> Option<QueuedReplica> {
        // Drop stale entries at the front (their item is delivered or moved
        // to a later round), then take the first due one that may go.
        while let Some(q) = self.queue.first().copied() {
            if q.send_at > now || self.is_live(&q) {
                break;
            }
            self.queue.pop_first();
        }
        let q = *self
            .queue
            .iter()
            .take_while(|q| q.send_at <= now)
            .find(|q| self.is_live(q) && (allow_non_opportunistic || self.is_opportunistic(q)))?;
        self.queue.remove(&q);
        Some(q)
    }

    /// Whether a due replica can go now.
    pub fn has_due(&self, now: Instant, allow_non_opportunistic: bool) -> bool {
        self.queue
            .iter()
            .take_while(|q| q.send_at <= now)
            .any(|q| self.is_live(q) && (allow_non_opportunistic || self.is_opportunistic(q)))
    }

    fn is_live(&self, q: &QueuedReplica) -> bool {
        self.items.get(&q.item).is_some_and(|i| i.round == q.round)
    }

    fn is_opportunistic(&self, q: &QueuedReplica) -> bool {
        self.items.get(&q.item).is_some_and(|i| i.opportunistic)
    }

    fn new_item(&mut self) -> ItemId {
        let id = ItemId(self.next_item);
        self.next_item += 1;
        id
    }

    fn enqueue(&mut self, send_at: Instant, item: ItemId, round: u32, index: u16) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.queue.insert(QueuedReplica {
            send_at,
            seq,
            item,
            round,
            index,
        });
    }
}

impl Connection {
    pub(super) fn path_view(&self) -> PathView {
        let cwnd = self.cc.window();
        PathView {
            srtt: self.rtt.smoothed(),
            min_rtt: self.rtt.min(),
            rttvar: self.rtt.rttvar(),
            latest_rtt: self.rtt.latest(),
            cwnd,
            bytes_in_flight: self.bytes_in_flight,
            pacing_rate: self.pacing_rate(),
            mtu: u64::from(self.max_datagram_size),
        }
    }

    pub(super) fn pacing_rate(&self) -> u64 {
        self.cc.pacing_rate().unwrap_or_else(|| {
            crate::pacing::default_pacing_rate(self.cc.window(), self.rtt.smoothed())
        })
    }

    /// Count a recovered item and tell the subscribers.
    pub(super) fn record_recovery(
        &mut self,
        now: Instant,
        item: ItemId,
        it: Item,
        round: u32,
        recovery_sent: Instant,
    ) {
        self.stats.record_delivery(round, it.sent);
        if self.subscribers.is_empty() {
            return;
        }
        let record = RecoveryRecord {
            item,
            chunks: it.chunks,
            first_sent: it.first_sent,
            first_lost: it.first_lost,
            round,
            retransmissions: it.sent,
            recovery_sent,
            acked_at: now,
        };
        for s in &mut self.subscribers {
            s.data_recovered(now, &record);
        }
    }

    /// A replica of `item` was acknowledged.
    pub(super) fn deliver_item(
        &mut self,
        now: Instant,
        item: ItemId,
        round: u32,
        recovery_sent: Instant,
    ) {
        let Some(it) = self.recovery.items.get(&item) else {
            return;
        };
        // A replica that could not carry every unacknowledged part (rare: the
        // data was split by other acknowledgements) does not finish the item:
        // start another round for what is left.
        let (stream_bytes, datagram_bytes) = self.unacked_bytes(it);
        if stream_bytes + datagram_bytes > 0 {
            if it.queued == 0 && it.outstanding <= 1 {
                self.start_round(now, item);
            }
            return;
        }
        if let Some(it) = self.recovery.items.remove(&item) {
            self.record_recovery(now, item, it, round, recovery_sent);
        }
    }

    /// RFC 9002 §6.1: declare the packets of `space` lost that the packet
    /// or time threshold says are, and arm `loss_time` for the rest.
    pub(super) fn detect_and_handle_lost(&mut self, now: Instant, space: SpaceId) {
        let loss_delay = self.rtt.loss_delay();
        let s = self.space_mut(space);
        s.loss_time = None;
        let Some(largest_acked) = s.largest_acked else {
            return;
        };
        let d = loss::detect_lost(
            s.sent.iter().map(|(&pn, p)| (pn, p.time_sent)),
            largest_acked,
            now,
            loss_delay,
        );
        s.loss_time = d.loss_time;
        if d.lost.is_empty() {
            return;
        }
        let packets: Vec<(u64, SentPacket)> = d
            .lost
            .into_iter()
            .filter_map(|pn| s.sent.remove(&pn).map(|p| (pn, p)))
            .collect();
        self.on_packets_lost(now, space, packets);
    }

    fn on_packets_lost(&mut self, now: Instant, space: SpaceId, packets: Vec<(u64, SentPacket)>) {
        let mut congestion: Option<(Instant, u64)> = None; // (newest lost send time, bytes)
                                                           // For persistent congestion (RFC 9002 §7.6.2), in packet-number order.
        let summary: Vec<loss::LostPacket> = packets
            .iter()
            .map(|(pn, p)| loss::LostPacket {
                pn: *pn,
                time_sent: p.time_sent,
                ack_eliciting: p.ack_eliciting,
            })
            .collect();
        if space == SpaceId::Data {
            // The policy hears about every loss of this detection pass before
            // any round starts, so a burst is known whole when the first of
            // its items is scheduled (ART's B_max, journal §6.2).
            let path = self.path_view();
            for (pn, p) in &packets {
                self.policy.on_packet_lost(now, &p.fate(*pn), &path);
            }
        }
        for (pn, p) in packets {
            self.stats.lost_packets += 1;
            for s in &mut self.subscribers {
                s.packet_lost(now, space, pn);
            }
            if p.in_flight {
                self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
            }
            if p.ack_eliciting {
                let s = self.space_mut(space);
                s.ack_eliciting_in_flight = s.ack_eliciting_in_flight.saturating_sub(1);
            }
            for r in &p.retransmits {
                match r {
                    Retransmit::Crypto(range) => {
                        self.space_mut(space).crypto_send.on_lost(range.clone())
                    }
                    Retransmit::Control(c) => self.streams.on_control_lost(*c),
                    Retransmit::HandshakeDone => self.handshake_done_pending = true,
                    Retransmit::NewConnectionId(seq) => self.cids.pending_new.push_back(*seq),
                    Retransmit::RetireConnectionId(seq) => self.cids.pending_retire.push_back(*seq),
                    Retransmit::NewToken => self.on_new_token_lost(),
                }
            }
            let signals = if space == SpaceId::Data {
                self.on_data_packet_lost(now, pn, &p)
            } else {
                p.in_flight
            };
            if signals && p.in_flight {
                let (t, b) = congestion.unwrap_or((p.time_sent, 0));
                congestion = Some((t.max(p.time_sent), b + u64::from(p.size)));
            }
        }
        if let Some((sent_time, bytes)) = congestion {
            let duration =
                loss::persistent_congestion_duration(self.rtt.pto_base(), self.peer_max_ack_delay);
            let persistent = loss::in_persistent_congestion(
                &summary,
                &self.space(space).acked,
                self.first_rtt_sample,
                duration,
            );
            self.stats.congestion_events += 1;
            self.cc
                .on_congestion_event(now, sent_time, bytes, persistent, &self.rtt);
        }
    }

    /// A 1-RTT packet was declared lost: policy bookkeeping and rounds.
    /// Returns whether this loss should reach congestion control.
    fn on_data_packet_lost(&mut self, now: Instant, pn: u64, p: &SentPacket) -> bool {
        if let Some(r) = p.replica {
            let e = LostEntry {
                item: Some(r.item),
                round: r.round,
                fate: p.fate(pn),
                lost_at: now,
                chunks: p.stream_chunks.clone(),
                datagrams: p.datagrams.clone(),
            };
            self.lost_history.remember(pn, e);
            let Some(item) = self.recovery.items.get_mut(&r.item) else {
                return false;
            };
            if item.round != r.round {
                return false; // an older round's straggler
            }
            item.outstanding = item.outstanding.saturating_sub(1);
            if item.outstanding > 0 || item.queued > 0 {
                return false;
            }
            // Every replica of the round is lost: next round (and, per ART
            // journal §6.4, only now a congestion signal).
            self.start_round(now, r.item);
            return true;
        }
        let datagrams: Vec<u64> = p
            .datagrams
            .iter()
            .copied()
            .filter(|id| self.datagram_store.contains_key(id))
            .collect();
        if p.stream_chunks.is_empty() && datagrams.is_empty() {
            let e = LostEntry {
                item: None,
                round: 0,
                fate: p.fate(pn),
                lost_at: now,
                chunks: Vec::new(),
                datagrams: Vec::new(),
            };
            self.lost_history.remember(pn, e);
            return p.ack_eliciting;
        }
        let id = self.recovery.new_item();
        let e = LostEntry {
            item: Some(id),
            round: 0,
            fate: p.fate(pn),
            lost_at: now,
            chunks: p.stream_chunks.clone(),
            datagrams: p.datagrams.clone(),
        };
        self.lost_history.remember(pn, e);
        self.recovery.items.insert(
            id,
            Item {
                chunks: p.stream_chunks.clone(),
                datagrams,
                first_sent: p.time_sent,
                first_lost: now,
                round: 0,
                sent: 0,
                outstanding: 0,
                queued: 0,
                opportunistic: false,
            },
        );
        self.start_round(now, id);
        true
    }

    /// What of an item is still unacknowledged: (stream bytes, a bare FIN
    /// counting as one; DATAGRAM payload bytes still held).
    fn unacked_bytes(&self, item: &Item) -> (u64, u64) {
        let mut parts = Vec::new();
        let mut stream = 0u64;
        for c in &item.chunks {
            self.streams.unacked_parts(c, &mut parts);
            stream += parts
                .iter()
                .map(|p| u64::from(p.len).max(u64::from(p.fin)))
                .sum::<u64>();
        }
        let datagrams = item
            .datagrams
            .iter()
            .filter_map(|d| self.datagram_store.get(d))
            .map(|d| d.len() as u64)
            .sum();
        (stream, datagrams)
    }

    /// Begin the next round of `id`: ask the policy for replicas.
    fn start_round(&mut self, now: Instant, id: ItemId) {
        let (bytes, datagram_bytes) = self
            .recovery
            .items
            .get(&id)
            .map_or((0, 0), |item| self.unacked_bytes(item));
        if bytes == 0 && datagram_bytes == 0 {
            // Everything already acknowledged (or the stream was reset).
            self.recovery.items.remove(&id);
            return;
        }
        let kind = if bytes > 0 {
            DataKind::Stream
        } else {
            DataKind::Datagram
        };
        let path = self.path_view();
        let Some(item) = self.recovery.items.get_mut(&id) else {
            return;
        };
        item.round += 1;
        let lost = LostData {
            item: id,
            first_sent: item.first_sent,
            first_lost: item.first_lost,
            round: item.round,
            retransmissions: item.sent,
            bytes: bytes + datagram_bytes,
            kind,
        };
        let decision = self.policy.on_data_lost(now, &lost, &path, &mut self.rng);
        let (mut times, opportunistic) = match decision {
            Decision::Retransmit {
                send_at,
                opportunistic,
            } => (send_at, opportunistic),
            Decision::Drop if kind == DataKind::Datagram => {
                // Give the datagrams up (RFC 9221 leaves them unreliable).
                if let Some(item) = self.recovery.items.remove(&id) {
                    for d in &item.datagrams {
                        if self.datagram_store.remove(d).is_some() {
                            self.stats.datagrams_dropped += 1;
                        }
                    }
                }
                return;
            }
            // Stream data is reliable: refuse to drop it.
            Decision::Drop => (vec![now], false),
        };
        if times.is_empty() {
            times.push(now);
        }
        times.truncate(MAX_REPLICAS);
        let Some(item) = self.recovery.items.get_mut(&id) else {
            return;
        };
        item.queued = times.len() as u32;
        item.outstanding = 0;
        item.opportunistic = opportunistic;
        let round = item.round;
        for (i, t) in times.into_iter().enumerate() {
            self.recovery.enqueue(t.max(now), id, round, i as u16);
            for s in &mut self.subscribers {
                s.replica_scheduled(now, id, round, i as u16, t.max(now));
            }
        }
    }

    /// Called by the send path when a replica leaves.
    pub(super) fn on_replica_sent(&mut self, r: &ReplicaRef) {
        if let Some(item) = self.recovery.items.get_mut(&r.item) {
            item.queued = item.queued.saturating_sub(1);
            item.outstanding += 1;
            item.sent += 1;
        }
        self.stats.replicas += 1;
        if r.index > 0 {
            self.stats.extra_replicas += 1;
        }
    }

    /// A queued replica found nothing left to carry.
    pub(super) fn on_replica_empty(&mut self, r: &ReplicaRef) {
        self.recovery.items.remove(&r.item);
    }

    // ---- timers (RFC 9002 §6.2, Appendix A.8) ----

    fn loss_time_and_space(&self) -> Option<(Instant, SpaceId)> {
        SpaceId::ALL
            .iter()
            .filter_map(|&id| self.space(id).loss_time.map(|t| (t, id)))
            .min_by_key(|(t, _)| *t)
    }

    fn pto_time_and_space(&self, now: Instant) -> Option<(Instant, SpaceId)> {
        let spaces = SpaceId::ALL.map(|id| {
            let s = self.space(id);
            loss::PtoSpace {
                id,
                armed: self.has_keys(id) && (id != SpaceId::Data || self.handshake_complete),
                eliciting_in_flight: s.has_ack_eliciting_in_flight(),
                time_of_last_ack_eliciting: s.time_of_last_ack_eliciting,
                pto: self.pto_duration(id),
            }
        });
        // Anti-deadlock: a client without handshake keys confirmed keeps probing.
        let anti_deadlock = (self.side.is_client() && !self.handshake_confirmed).then(|| {
            let space = if self.handshake_keys.is_some() {
                SpaceId::Handshake
            } else {
                SpaceId::Initial
            };
            loss::AntiDeadlock {
                space,
                has_keys: self.has_keys(space),
            }
        });
        loss::pto_time_and_space(&spaces, self.pto_count, anti_deadlock, now)
    }

    pub(super) fn set_loss_detection_timer(&mut self, now: Instant) {
        if let Some((t, _)) = self.loss_time_and_space() {
            self.timers.set(Timer::LossDetection, t);
            return;
        }
        // RFC 9002 §A.6: a server blocked by the amplification limit arms no PTO.
        if self.side.is_server() && !self.address_validated && self.amplification_budget() == 0 {
            self.timers.stop(Timer::LossDetection);
            return;
        }
        let at = self.pto_time_and_space(now).map(|(t, _)| t);
        self.timers.set_opt(Timer::LossDetection, at);
    }

    pub(super) fn on_loss_detection_timeout(&mut self, now: Instant) {
        if let Some((t, space)) = self.loss_time_and_space() {
            if t <= now {
                self.detect_and_handle_lost(now, space);
                self.set_loss_detection_timer(now);
                return;
            }
        }
        let Some((_, space)) = self.pto_time_and_space(now) else {
            self.timers.stop(Timer::LossDetection);
            return;
        };
        self.stats.pto_count += 1;
        self.pto_count = self.pto_count.saturating_add(1);
        let s = self.space_mut(space);
        s.probes = 2;
        if space != SpaceId::Data {
            // Resend unacknowledged handshake data in the probes.
            s.crypto_send.requeue_unacked();
            if !s.crypto_send.has_pending() {
                s.ping_pending = true;
            }
            // RFC 9002 §6.2.4: "the sender SHOULD send ack-eliciting packets
            // from other packet number spaces with in-flight data,
            // coalescing packets if possible". During the handshake that is
            // the other level's CRYPTO data: a server whose ServerHello
            // (Initial) and certificate (Handshake) are both unacknowledged
            // resends both in the same datagrams instead of alternating one
            // level per PTO, which doubles every wait.
            for other in [SpaceId::Initial, SpaceId::Handshake] {
                if other == space
                    || !self.has_keys(other)
                    || !self.space(other).has_ack_eliciting_in_flight()
                {
                    continue;
                }
                let o = self.space_mut(other);
                o.probes = o.probes.max(1);
                o.crypto_send.requeue_unacked();
            }
        }
        self.set_loss_detection_timer(now);
    }
}
