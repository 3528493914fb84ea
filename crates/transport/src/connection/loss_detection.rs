//! RFC 9002 loss detection applied to the connection (its Appendix A):
//! ACK frames, the RTT sample they give (§5.1) and what each acknowledged
//! packet releases (bytes in flight, congestion control, retransmittable
//! frames, stream data, the recovery item it carried); declaring packets
//! lost with the pure rules of `loss` and what each lost packet releases
//! (congestion events, frames to send again); the loss-detection timer and
//! PTO probes. [`LossDetection`] holds the per-connection state those rules
//! keep. Lost 1-RTT packets go on to
//! [`Recovery`](super::recovery::Recovery), which owns what happens to
//! their data.

use wire::frame::AckFrame;
use wire::time::{Duration, Instant};

use super::recovery::{PathInputs, Recovery, RecoveryContext, SPURIOUS_LOSS_WINDOW_PTOS};
use super::spaces::{Retransmit, SentPacket};
use super::{loss, Connection, SpaceId, Timer};
use crate::error::TransportError;
use crate::policy::{ItemId, PathView};

/// How many times a server resends its Initial CRYPTO data before the PTO
/// because the client's Initial packets show it still lacks it (RFC 9002
/// §6.2.3 allows this "for a limited number of times per connection"). A
/// client that keeps sending ack-eliciting Initial packets (its
/// anti-deadlock probes, or its ClientHello again) without acknowledging
/// the server's Initial has no Handshake keys: the ServerHello was lost.
/// Waiting for the server's own PTO, which backs off from 1 s without an
/// RTT sample, can take longer than a client's handshake timeout on a
/// lossy path (quic-go gives up after 10 s). Each resend is also bounded by
/// the anti-amplification limit, and the client's probes back off.
const MAX_EARLY_CRYPTO_RESENDS: u8 = 4;

/// Entries of [`LossDetection::newly_acked`]'s capacity kept once nothing
/// is in flight: a frame acknowledges two packets or so in a bulk transfer
/// over a real network.
const NEWLY_ACKED_KEPT: usize = 16;

/// RFC 9002's per-connection loss-detection state, beside the per-space
/// state in [`PacketSpace`](super::spaces::PacketSpace).
///
/// Exists so that the PTO backoff, the first RTT sample and the peer's
/// ack delay parameters have one owner: ACK processing, the
/// loss-detection timer and the PTO read them here.
#[derive(Debug)]
pub(super) struct LossDetection {
    /// PTOs in a row without an acknowledgement (RFC 9002 §6.2.1).
    pub(super) pto_count: u32,
    /// When the first RTT sample was taken: persistent congestion only
    /// counts packets sent after it (RFC 9002 §7.6.2).
    pub(super) first_rtt_sample: Option<Instant>,
    /// The peer's max_ack_delay (RFC 9000 §18.2), 25 ms until its transport
    /// parameters say.
    pub(super) peer_max_ack_delay: Duration,
    /// The peer's ack_delay_exponent (RFC 9000 §18.2), 3 until its
    /// transport parameters say.
    pub(super) peer_ack_delay_exponent: u8,
    /// Early resends of the server's Initial CRYPTO data so far
    /// ([`MAX_EARLY_CRYPTO_RESENDS`]).
    pub(super) early_crypto_resends: u8,
    /// The packets an ACK frame newly acknowledges, empty between frames:
    /// kept so that its capacity serves the next frame (a fresh vector
    /// was an allocation, and a regrowth or two, per ACK frame).
    newly_acked: Vec<(u64, SentPacket)>,
}

impl Default for LossDetection {
    /// Before any packet: no backoff, no sample, RFC 9000's defaults for
    /// the peer's ack delay parameters.
    fn default() -> Self {
        LossDetection {
            pto_count: 0,
            first_rtt_sample: None,
            peer_max_ack_delay: Duration::from_millis(25),
            peer_ack_delay_exponent: 3,
            early_crypto_resends: 0,
            newly_acked: Vec::new(),
        }
    }
}

impl Connection {
    /// RFC 9002 §A.7: process an ACK frame.
    pub(super) fn on_ack_received(
        &mut self,
        now: Instant,
        space: SpaceId,
        ack: &AckFrame,
    ) -> Result<(), TransportError> {
        let s = self.space_mut(space);
        if ack.largest >= s.next_pn {
            return Err(
                TransportError::protocol_violation("ACK for a packet never sent").with_frame(0x02),
            );
        }
        s.largest_acked = Some(s.largest_acked.map_or(ack.largest, |l| l.max(ack.largest)));
        let mut newly = core::mem::take(&mut self.loss_detection.newly_acked);
        newly.clear();
        let s = self.space_mut(space);
        // With loss, an ACK frame repeats the ranges below its holes until
        // it learns they arrived, a dozen or more per frame, most of them
        // below every packet still kept: those are passed over here
        // (remove_range would find nothing there either).
        let kept_from = s.sent.first_pn().unwrap_or(u64::MAX);
        for r in &ack.ranges {
            if *r.end() < kept_from {
                continue;
            }
            let from = newly.len();
            s.sent.remove_range(r.clone(), &mut newly);
            for (pn, _) in newly.get(from..).unwrap_or_default() {
                s.acked.insert_one(*pn);
            }
        }
        if space == SpaceId::Data {
            let horizon = now - self.pto_duration(SpaceId::Data) * SPURIOUS_LOSS_WINDOW_PTOS;
            let (recovery, mut cx) = self.recovery(now);
            recovery.detect_spurious(&mut cx, &ack.ranges, horizon);
        }
        if newly.is_empty() {
            self.loss_detection.newly_acked = newly;
            return Ok(());
        }
        self.on_ack_ecn(now, space, ack.ecn, &newly);
        // RFC 9002 §5.1: an RTT sample when the largest acknowledged is newly
        // acked and at least one newly acked packet was ack-eliciting.
        if let Some((_, largest)) = newly.iter().find(|(pn, _)| *pn == ack.largest) {
            if newly.iter().any(|(_, p)| p.ack_eliciting) {
                let sample = now.saturating_duration_since(largest.time_sent);
                let ack_delay = if space == SpaceId::Data {
                    let micros = ack
                        .delay
                        .checked_shl(u32::from(self.loss_detection.peer_ack_delay_exponent))
                        .unwrap_or(u64::MAX);
                    Duration::from_micros(micros.min(1 << 40))
                } else {
                    Duration::ZERO
                };
                self.rtt.update(
                    ack_delay,
                    sample,
                    self.loss_detection.peer_max_ack_delay,
                    self.handshake.confirmed,
                );
                self.loss_detection.first_rtt_sample.get_or_insert(now);
            }
        }
        let app_limited = !self.has_data_to_send();
        for (pn, p) in newly.drain(..) {
            self.on_packet_acked(now, space, pn, p, app_limited);
        }
        // The capacity stays while packets are in flight, since the next
        // frame will likely acknowledge as many: with GRO on loopback one
        // frame acknowledges hundreds of packets, and cutting the buffer
        // back after every frame made glibc move it with mremap (past its
        // 128 KiB mmap threshold) on each regrowth, 43,000 calls in a
        // 1 GiB download. It is never larger than the packets in flight
        // were, and once none are, an idle connection keeps no
        // window-sized buffer.
        if self.space(space).sent.first_pn().is_none() {
            newly.shrink_to(NEWLY_ACKED_KEPT);
        }
        self.loss_detection.newly_acked = newly;
        self.detect_and_handle_lost(now, space);
        // Acknowledgements below the oldest packet in flight can no longer
        // sit between two lost packets (persistent congestion's contiguity).
        let s = self.space_mut(space);
        let floor = s.sent.first_pn().unwrap_or(s.next_pn);
        s.acked.remove_below(floor);
        let sample = self.rate.take_sample(now, self.rtt.min());
        self.cc.on_end_acks(
            now,
            self.bytes_in_flight,
            app_limited,
            sample.as_ref(),
            &self.rtt,
        );
        // RFC 9002 §A.7: reset the PTO backoff, except for a client that is
        // not yet sure the server validated its address.
        if self.side.is_server() || self.handshake.confirmed || space != SpaceId::Initial {
            self.loss_detection.pto_count = 0;
        }
        let (recovery, mut cx) = self.recovery(now);
        recovery.publish(&mut cx, space == SpaceId::Data);
        self.set_loss_detection_timer(now);
        if !self.subscribers.is_empty() {
            let v = self.path_view();
            for s in &mut self.subscribers {
                s.metrics_updated(now, &v);
            }
        }
        Ok(())
    }

    /// `p`, of `space`, is no longer in flight (acknowledged or lost): out
    /// of bytes in flight and the space's count of ack-eliciting packets.
    pub(super) fn leave_flight(&mut self, space: SpaceId, p: &SentPacket) {
        if p.in_flight {
            self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
        }
        if p.ack_eliciting {
            let s = self.space_mut(space);
            s.ack_eliciting_in_flight = s.ack_eliciting_in_flight.saturating_sub(1);
        }
    }

    fn on_packet_acked(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        p: SentPacket,
        app_limited: bool,
    ) {
        self.leave_flight(space, &p);
        if p.in_flight {
            self.cc
                .on_ack(now, p.time_sent, u64::from(p.size), app_limited, &self.rtt);
            self.rate
                .on_packet_acked(now, &p.rate, p.time_sent, u64::from(p.size));
        }
        if let Some(largest) = p.largest_acked {
            // RFC 9000 §13.2.4: the peer has our ACK up to `largest`; stop
            // reporting older ranges.
            self.space_mut(space).forget_received_up_to(largest);
        }
        for r in &p.retransmits {
            match r {
                Retransmit::Crypto(range) => {
                    self.space_mut(space).crypto_send.on_acked(range.clone())
                }
                Retransmit::Control(c) => self.streams.on_control_acked(*c),
                Retransmit::NewToken => self.validation.on_new_token_acked(),
                _ => {}
            }
        }
        for c in &p.stream_chunks {
            self.streams.on_chunk_acked(c);
        }
        if space != SpaceId::Data {
            // DATAGRAM frames travel in 0-RTT and 1-RTT packets only.
            return;
        }
        if self.on_mtu_acked(now, pn, &p) {
            return;
        }
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_packet_acked(&mut cx, pn, &p);
    }

    /// The PTO period of `space` without backoff (RFC 9002 §6.2.1): the
    /// peer's max_ack_delay counts in the application space once the
    /// handshake is confirmed.
    pub(super) fn pto_duration(&self, space: SpaceId) -> Duration {
        let mut d = self.rtt.pto_base();
        if space == SpaceId::Data && self.handshake.confirmed {
            d += self.loss_detection.peer_max_ack_delay;
        }
        d
    }

    /// The client sent an ack-eliciting Initial packet that did not advance
    /// its handshake: without our ServerHello it has no Handshake keys, so
    /// it can only probe or repeat itself. Resend our unacknowledged Initial
    /// CRYPTO data now, in two datagrams, rather than at our PTO
    /// ([`MAX_EARLY_CRYPTO_RESENDS`]).
    pub(super) fn resend_initial_crypto_early(&mut self) {
        if self.loss_detection.early_crypto_resends >= MAX_EARLY_CRYPTO_RESENDS {
            return;
        }
        let s = self.space_mut(SpaceId::Initial);
        if !s.crypto_send.has_unacked() || s.crypto_send.has_pending() {
            return;
        }
        s.crypto_send.requeue_unacked();
        // Two datagrams, each with the whole Initial flight, as a PTO sends
        // (RFC 9002 §6.2.4): one lost copy then costs no further round.
        s.probes = s.probes.max(2);
        self.loss_detection.early_crypto_resends += 1;
        tracing::debug!(
            resends = self.loss_detection.early_crypto_resends,
            "client still in Initial: resending the server's Initial CRYPTO data"
        );
    }

    /// What the path view is measured from.
    pub(super) fn path_inputs(&self) -> PathInputs<'_> {
        PathInputs {
            cc: self.cc.as_ref(),
            rtt: &self.rtt,
            bytes_in_flight: self.bytes_in_flight,
            mtu: self.path_mtu.current(),
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

    fn on_packets_lost(
        &mut self,
        now: Instant,
        space: SpaceId,
        mut packets: Vec<(u64, SentPacket)>,
    ) {
        if space == SpaceId::Data {
            self.on_mtu_losses(now, &mut packets);
            if packets.is_empty() {
                return;
            }
        }
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
            self.leave_flight(space, &p);
            self.requeue_retransmits(space, &p.retransmits);
            let (in_flight, time_sent, size) = (p.in_flight, p.time_sent, p.size);
            let signals = if space == SpaceId::Data {
                let (recovery, mut cx) = self.recovery(now);
                recovery.on_data_packet_lost(&mut cx, pn, p)
            } else {
                in_flight
            };
            if signals && in_flight {
                let (t, b) = congestion.unwrap_or((time_sent, 0));
                congestion = Some((t.max(time_sent), b + u64::from(size)));
            }
        }
        if let Some((sent_time, bytes)) = congestion {
            let duration = loss::persistent_congestion_duration(
                self.rtt.pto_base(),
                self.loss_detection.peer_max_ack_delay,
            );
            let persistent = loss::in_persistent_congestion(
                &summary,
                &self.space(space).acked,
                self.loss_detection.first_rtt_sample,
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
                Retransmit::HandshakeDone => self.handshake.done_pending = true,
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
                    mtu: self.path_mtu.current(),
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
                armed: self.has_keys(id) && (id != SpaceId::Data || self.handshake.complete),
                eliciting_in_flight: s.has_ack_eliciting_in_flight(),
                time_of_last_ack_eliciting: s.time_of_last_ack_eliciting,
                pto: self.pto_duration(id),
            }
        });
        // Anti-deadlock: a client without handshake keys confirmed keeps probing.
        let anti_deadlock = (self.side.is_client() && !self.handshake.confirmed).then(|| {
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
        loss::pto_time_and_space(&spaces, self.loss_detection.pto_count, anti_deadlock, now)
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
        self.loss_detection.pto_count = self.loss_detection.pto_count.saturating_add(1);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pair::Pair;
    use crate::TransportConfig;

    /// The buffer of newly acknowledged packets keeps its capacity from
    /// one ACK frame to the next while packets are in flight (a client
    /// that acknowledges hundreds of packets per frame, as one reading
    /// with GRO does, made the old per-frame cut regrow it each time) and
    /// is cut back once nothing is in flight.
    #[test]
    fn acked_packets_buffer_is_kept_in_flight_and_cut_when_idle() {
        let client = TransportConfig {
            ack_eliciting_threshold: 200,
            ..TransportConfig::default()
        };
        let mut pair = Pair::new(TransportConfig::default(), client);
        pair.connect();
        let data = vec![7u8; 4 << 20];
        let mut kept_in_flight = 0usize;
        let got = pair.try_fetch_watching(&data, Duration::from_secs(60), |p| {
            let server = p.server();
            if server.space(SpaceId::Data).sent.first_pn().is_some() {
                let capacity = server.loss_detection.newly_acked.capacity();
                kept_in_flight = kept_in_flight.max(capacity);
            }
        });
        match got {
            Ok(body) => assert_eq!(body.len(), data.len(), "the whole body arrives"),
            Err(e) => panic!("download failed: {e:?}"),
        }
        assert!(
            kept_in_flight >= 100,
            "between frames the buffer held only {kept_in_flight} entries"
        );
        // Everything acknowledged: the buffer is cut back.
        pair.drive_until(Duration::from_secs(1), |p| {
            p.server().space(SpaceId::Data).sent.first_pn().is_none()
        });
        let capacity = pair.server().loss_detection.newly_acked.capacity();
        assert!(
            capacity <= NEWLY_ACKED_KEPT,
            "idle, it keeps {capacity} entries"
        );
    }
}
