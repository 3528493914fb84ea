//! Loss recovery in the connection: applying RFC 9002's rules (`loss`) to
//! the packet number spaces (declaring packets lost, what each lost packet
//! releases, congestion events, the loss-detection timer and PTO probes),
//! and connecting the retransmission engine (`engine`) to the streams, the
//! recovery policy and the subscribers.
//!
//! A lost 1-RTT packet carrying stream data or DATAGRAM payloads becomes
//! an engine item; a lost replica is reported to the engine, which says
//! whether its round is over; the next round asks the policy. The records
//! of items that left the engine are published here, once each.

use wire::time::Instant;

use super::engine::{Engine, Remaining, ReplicaAck, ReplicaLoss, RoundStart};
use super::spaces::{Retransmit, SentPacket};
use super::spurious::LostEntry;
use super::{loss, Connection, SpaceId, Timer};
use crate::policy::{
    Decision, ItemId, LostData, PathView, PolicyContext, PolicyState, RecoveryPolicy, ReplicaRef,
    StreamPosition,
};

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
            s.sent.iter().map(|(pn, p)| (pn, p.time_sent)),
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
            .filter_map(|pn| s.sent.remove(pn).map(|p| (pn, p)))
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
            for (pn, p) in &packets {
                let fate = p.fate(*pn);
                self.call_policy(now, |policy, cx| policy.on_packet_lost(cx, &fate));
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
            self.requeue_retransmits(space, &p.retransmits);
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
        self.publish_recovery_records(now);
        if space == SpaceId::Data {
            self.publish_policy_state(now);
        }
    }

    /// Queue the frames of `retransmits` (a packet's CRYPTO ranges and
    /// control frames) to be sent again: the packet is lost, or a probe
    /// resends what the oldest packet in flight carried. Sending one of
    /// them twice is harmless (each frame is idempotent).
    fn requeue_retransmits(&mut self, space: SpaceId, retransmits: &[Retransmit]) {
        for r in retransmits {
            match r {
                Retransmit::Crypto(range) => {
                    self.space_mut(space).crypto_send.on_lost(range.clone())
                }
                Retransmit::Control(c) => self.streams.on_control_lost(*c),
                Retransmit::HandshakeDone => self.handshake_done_pending = true,
                Retransmit::NewConnectionId(seq) => self.cids.pending_new.push_back(*seq),
                Retransmit::RetireConnectionId(seq) => self.cids.pending_retire.push_back(*seq),
                Retransmit::NewToken => self.on_new_token_lost(),
                Retransmit::PathChallenge(data) => self.on_path_challenge_lost(*data),
            }
        }
    }

    /// A 1-RTT packet was declared lost: policy bookkeeping and rounds.
    /// Returns whether this loss should reach congestion control.
    fn on_data_packet_lost(&mut self, now: Instant, pn: u64, p: &SentPacket) -> bool {
        let fate = p.fate(pn);
        let mut entry = LostEntry {
            item: None,
            round: 0,
            fate,
            lost_at: now,
            chunks: p.stream_chunks.clone(),
            datagrams: p.datagrams.clone(),
        };
        if let Some(r) = p.replica {
            entry.item = Some(r.item);
            entry.round = r.round;
            self.lost_history.remember(pn, entry);
            let round_over =
                self.engine.on_replica_lost(now, &r, p.time_sent) == ReplicaLoss::RoundOver;
            if round_over {
                // Every replica the policy decided for the round is lost:
                // next round, whatever reinjections are in flight.
                self.start_round(now, r.item);
            }
            // Congestion control hears a replica's loss when it ends a
            // round (ART journal §6.4: one signal per round, so plain QUIC
            // keeps RFC 9002 exactly), and always for a reinjection:
            // AutoRec is an add-on over LSQUIC, whose reinjected copies are
            // ordinary packets, and LSQUIC's loss detection reports every
            // lost packet to congestion control (`cci_lost`, and a loss
            // event when it was sent after the last cut-back). Congestion
            // controllers here take one reduction per recovery period
            // (RFC 9002 §7.3.2), as LSQUIC's cut-back rule does.
            return round_over || p.reinjection;
        }
        if p.early_copy {
            // The data's own packets still carry it: their loss, if it
            // comes, starts recovery. The chunks are remembered so that a
            // late acknowledgement still acknowledges them.
            self.lost_history.remember(pn, entry);
            return p.ack_eliciting;
        }
        let datagrams: Vec<u64> = p
            .datagrams
            .iter()
            .copied()
            .filter(|id| self.datagram_store.contains_key(id))
            .collect();
        if p.stream_chunks.is_empty() && datagrams.is_empty() {
            entry.chunks.clear();
            entry.datagrams.clear();
            self.lost_history.remember(pn, entry);
            return p.ack_eliciting;
        }
        let by_copy = if datagrams.is_empty() {
            self.delivered_by_copy(&p.stream_chunks)
        } else {
            None
        };
        let id = self
            .engine
            .create(p.time_sent, now, p.stream_chunks.clone(), datagrams);
        entry.item = Some(id);
        self.lost_history.remember(pn, entry);
        match by_copy {
            // A copy sent before the loss was declared already delivered
            // the data (copies.rs): recovered in round 1, no round to run.
            Some(copy_sent) => self.engine.delivered_by_copy(now, id, copy_sent),
            None => self.start_round(now, id),
        }
        true
    }

    /// What of an item is still unacknowledged.
    pub(super) fn remaining(&self, id: ItemId) -> Remaining {
        let Some(data) = self.engine.data(id) else {
            return Remaining::default();
        };
        let mut parts = Vec::new();
        let mut stream = 0u64;
        let mut position: Option<StreamPosition> = None;
        for c in data.chunks {
            self.streams.unacked_parts(c, &mut parts);
            stream += parts
                .iter()
                .map(|p| u64::from(p.len).max(u64::from(p.fin)))
                .sum::<u64>();
            // The chunk's first unacknowledged byte; the item's position is
            // its chunk nearest a stream's head.
            if let Some(here) = parts
                .first()
                .and_then(|p| self.streams.position(p.id, p.offset))
            {
                if position.is_none_or(|q| here.behind_head < q.behind_head) {
                    position = Some(here);
                }
            }
        }
        let datagram = data
            .datagrams
            .iter()
            .filter_map(|d| self.datagram_store.get(d))
            .map(|d| d.len() as u64)
            .sum();
        Remaining {
            stream,
            datagram,
            position,
        }
    }

    /// Begin the next round of `id`: the engine asks the policy.
    pub(super) fn start_round(&mut self, now: Instant, id: ItemId) {
        let start = self.round_with_policy(now, id, |e, now, id, remaining, decide| {
            e.start_round(now, id, remaining, decide)
        });
        self.round_started(now, id, start);
    }

    /// Runs `round` (the engine's start or resumption of `id`'s round)
    /// with the policy's `on_data_lost` as its decision, in a
    /// [`PolicyContext`] at `now`, then hands on what the policy published.
    fn round_with_policy(
        &mut self,
        now: Instant,
        id: ItemId,
        round: impl FnOnce(
            &mut Engine,
            Instant,
            ItemId,
            Remaining,
            &mut dyn FnMut(&LostData) -> Decision,
        ) -> RoundStart,
    ) -> RoundStart {
        let remaining = self.remaining(id);
        let path = self.path_view();
        self.policy_events
            .set_listening(!self.subscribers.is_empty());
        let policy = &mut self.policy;
        let mut cx = PolicyContext::new(now, &path, &mut self.rng, &mut self.policy_events);
        let start = round(&mut self.engine, now, id, remaining, &mut |lost| {
            policy.on_data_lost(&mut cx, lost)
        });
        self.flush_policy_events(now);
        start
    }

    /// Ask the policy again for the round of `id` whose decision it
    /// deferred ([`crate::policy::Decision::Defer`]), at `now` (the instant
    /// it deferred, for the decision to be what an immediate one would have
    /// been). Returns false when the item is gone or its round is not
    /// deferred. The driver then polls the connection for what to send.
    pub fn resume_round(&mut self, now: Instant, id: ItemId) -> bool {
        let start = self.round_with_policy(now, id, |e, now, id, remaining, decide| {
            e.resume_round(now, id, remaining, decide)
        });
        let known = start != RoundStart::Unknown;
        self.round_started(now, id, start);
        self.publish_recovery_records(now);
        known
    }

    /// What a round's decision led to, for the subscribers and the datagram
    /// store.
    fn round_started(&mut self, now: Instant, id: ItemId, start: RoundStart) {
        match start {
            RoundStart::Scheduled { round, replicas } => {
                for s in &mut self.subscribers {
                    for &(index, send_at) in &replicas {
                        s.replica_scheduled(now, id, round, index, send_at);
                    }
                }
            }
            RoundStart::Ended { dropped_datagrams } => {
                for d in &dropped_datagrams {
                    if self.datagram_store.remove(d).is_some() {
                        self.stats.datagrams_dropped += 1;
                    }
                }
            }
            RoundStart::Deferred { .. } | RoundStart::Unknown => {}
        }
    }

    /// A replica of an item was acknowledged (`sent_at`: when it left).
    pub(super) fn on_replica_acked(&mut self, now: Instant, r: &ReplicaRef, sent_at: Instant) {
        let remaining = self.remaining(r.item);
        if self.engine.on_replica_acked(now, r, sent_at, remaining) == ReplicaAck::NeedsRound {
            self.start_round(now, r.item);
        }
    }

    /// Called by the send path when a replica leaves. Returns whether it
    /// was a reinjection.
    pub(super) fn on_replica_sent(&mut self, r: &ReplicaRef) -> bool {
        let reinjection = self.engine.on_replica_sent(r);
        if reinjection {
            self.stats.reinjections += 1;
        }
        self.stats.replicas += 1;
        if r.index > 0 {
            self.stats.extra_replicas += 1;
        }
        reinjection
    }

    /// Call the policy with a [`PolicyContext`]; then hand what it published
    /// to the subscribers.
    pub(super) fn call_policy<R>(
        &mut self,
        now: Instant,
        f: impl FnOnce(&mut dyn RecoveryPolicy, &mut PolicyContext<'_>) -> R,
    ) -> R {
        let path = self.path_view();
        self.policy_events
            .set_listening(!self.subscribers.is_empty());
        let out = {
            let mut cx = PolicyContext::new(now, &path, &mut self.rng, &mut self.policy_events);
            f(self.policy.as_mut(), &mut cx)
        };
        self.flush_policy_events(now);
        out
    }

    /// Hand the events the policy published to the subscribers.
    fn flush_policy_events(&mut self, now: Instant) {
        if self.policy_events.is_empty() {
            return;
        }
        for e in self.policy_events.drain() {
            for s in &mut self.subscribers {
                s.policy_event(now, &e);
            }
        }
    }

    /// Tell the subscribers the policy's state if it changed since the last
    /// report (nothing to do, and nothing asked, without subscribers).
    pub(super) fn publish_policy_state(&mut self, now: Instant) {
        if self.subscribers.is_empty() {
            return;
        }
        let mut state = PolicyState::default();
        self.policy.report_state(&mut state);
        if state.is_empty() || self.last_policy_state.as_ref() == Some(&state) {
            return;
        }
        for s in &mut self.subscribers {
            s.policy_state(now, &state);
        }
        self.last_policy_state = Some(state);
    }

    /// Hand the records of items that left the engine to the statistics
    /// and the subscribers, once each.
    pub(super) fn publish_recovery_records(&mut self, now: Instant) {
        if !self.engine.has_records() {
            return;
        }
        for record in self.engine.take_records() {
            self.call_policy(now, |policy, cx| policy.on_recovery_ended(cx, &record));
            self.stats.recovery.observe(&record);
            for s in &mut self.subscribers {
                s.recovery_ended(now, &record);
            }
        }
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
        self.on_pto_path_challenge();
        let s = self.space_mut(space);
        s.probes = 2;
        if space == SpaceId::Data {
            // RFC 9002 §6.2.4: a probe with no new data to carry resends
            // previously sent data. The oldest packet in flight's control
            // frames (HANDSHAKE_DONE, NEW_CONNECTION_ID, ...) are queued
            // again here; its stream data rides in a probe as a copy
            // (`write_probe_copy`). Probes of PINGs alone leave the data
            // to an acknowledgement that declares it lost, and when the
            // peer's acknowledgements are lost too, nothing moves until
            // the idle timeout.
            let no_new_data = !self.has_data_to_send();
            let s = self.space_mut(space);
            s.probe_copy = no_new_data;
            let oldest = s
                .sent
                .values()
                .find(|p| p.ack_eliciting && p.in_flight)
                .map(|p| p.retransmits.clone())
                .unwrap_or_default();
            self.requeue_retransmits(space, &oldest);
        } else {
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
