//! RFC 9002 loss detection applied to the connection: declaring packets
//! lost with the pure rules of `loss`, what each lost packet releases
//! (bytes in flight, retransmittable frames, congestion events), the
//! loss-detection timer and PTO probes. Lost 1-RTT packets go on to
//! [`Recovery`](super::recovery::Recovery), which owns what happens to
//! their data.

use wire::time::Instant;

use super::recovery::{PathInputs, Recovery, RecoveryContext};
use super::spaces::{Retransmit, SentPacket};
use super::{loss, Connection, SpaceId, Timer};
use crate::policy::{ItemId, PathView};

impl Connection {
    /// What the path view is measured from.
    pub(super) fn path_inputs(&self) -> PathInputs<'_> {
        PathInputs {
            cc: self.cc.as_ref(),
            rtt: &self.rtt,
            bytes_in_flight: self.bytes_in_flight,
            mtu: self.max_datagram_size,
        }
    }

    /// The path as it stands (subscribers' metrics).
    pub(super) fn path_view(&self) -> PathView {
        self.path_inputs().view()
    }

    /// The pacing rate in force, bytes per second.
    pub(super) fn pacing_rate(&self) -> u64 {
        self.path_inputs().pacing_rate()
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
            let (recovery, mut cx) = self.recovery(now);
            recovery.on_losses_detected(&mut cx, &packets);
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
                let (recovery, mut cx) = self.recovery(now);
                recovery.on_data_packet_lost(&mut cx, pn, &p)
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
        let (recovery, mut cx) = self.recovery(now);
        recovery.publish(&mut cx, space == SpaceId::Data);
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
                Retransmit::NewToken => self.validation.on_new_token_lost(),
                Retransmit::PathChallenge(data) => self.on_path_challenge_lost(*data),
            }
        }
    }

    /// Recovery and what of the connection it works with, at `now`: the
    /// one way to reach the recovery policy.
    pub(super) fn recovery(&mut self, now: Instant) -> (&mut Recovery, RecoveryContext<'_>) {
        (
            &mut self.recovery,
            RecoveryContext {
                now,
                path: PathInputs {
                    cc: self.cc.as_ref(),
                    rtt: &self.rtt,
                    bytes_in_flight: self.bytes_in_flight,
                    mtu: self.max_datagram_size,
                },
                streams: &mut self.streams,
                stats: &mut self.stats,
                subscribers: &mut self.subscribers,
                rng: &mut self.rng,
            },
        )
    }

    /// Ask the policy again for the round of `id` whose decision it
    /// deferred ([`crate::policy::Decision::Defer`]), at `now` (the instant
    /// it deferred, for the decision to be what an immediate one would have
    /// been). Returns false when the item is gone or its round is not
    /// deferred. The driver then polls the connection for what to send.
    pub fn resume_round(&mut self, now: Instant, id: ItemId) -> bool {
        let (recovery, mut cx) = self.recovery(now);
        recovery.resume_round(&mut cx, id)
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
        if self.side.is_server()
            && !self.validation.is_validated()
            && self.validation.amplification_budget() == 0
        {
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
