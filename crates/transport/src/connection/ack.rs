//! ACK frames (RFC 9002 §A.7): which packets they newly acknowledge, the
//! RTT sample they give (§5.1), and what each acknowledged packet releases
//! (bytes in flight, congestion control, retransmittable frames, stream
//! data, the policy's callback, the recovery item it carried).

use wire::frame::AckFrame;
use wire::time::{Duration, Instant};

use super::recovery::SPURIOUS_LOSS_WINDOW_PTOS;
use super::spaces::{Retransmit, SentPacket};
use super::{Connection, SpaceId};
use crate::error::TransportError;

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
        let mut newly: Vec<(u64, SentPacket)> = Vec::new();
        for r in &ack.ranges {
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
                        .checked_shl(u32::from(self.peer_ack_delay_exponent))
                        .unwrap_or(u64::MAX);
                    Duration::from_micros(micros.min(1 << 40))
                } else {
                    Duration::ZERO
                };
                self.rtt.update(
                    ack_delay,
                    sample,
                    self.peer_max_ack_delay,
                    self.handshake_confirmed,
                );
                self.first_rtt_sample.get_or_insert(now);
            }
        }
        let app_limited = !self.has_data_to_send();
        for (pn, p) in newly {
            self.on_packet_acked(now, space, pn, p, app_limited);
        }
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
        if self.side.is_server() || self.handshake_confirmed || space != SpaceId::Initial {
            self.pto_count = 0;
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

    fn on_packet_acked(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        p: SentPacket,
        app_limited: bool,
    ) {
        if p.in_flight {
            self.bytes_in_flight = self.bytes_in_flight.saturating_sub(u64::from(p.size));
            self.cc
                .on_ack(now, p.time_sent, u64::from(p.size), app_limited, &self.rtt);
            self.rate
                .on_packet_acked(now, &p.rate, p.time_sent, u64::from(p.size));
        }
        if p.ack_eliciting {
            let s = self.space_mut(space);
            s.ack_eliciting_in_flight = s.ack_eliciting_in_flight.saturating_sub(1);
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
        let (recovery, mut cx) = self.recovery(now);
        recovery.on_packet_acked(&mut cx, pn, &p);
    }
}
