//! The send path: packet assembly, coalescing, padding and protection
//! (RFC 9000 §12.2, §13, §14.1; RFC 9001 §5).

use wire::frame::{self, Frame};
use wire::packet::{self, LongHeaderLayout, LongType};
use wire::time::Instant;
use wire::TransportErrorCode;

use super::recovery::SendWindow;
use super::spaces::{Retransmit, SentPacket};
use super::{Connection, SpaceId, State, Timer, Transmit, LOCAL_ACK_DELAY_EXPONENT};
use crate::crypto;
use crate::error::TransportError;
use crate::pacing::Pacer;
use crate::policy::SentView;
use crate::streams::StreamChunk;

/// AEAD tag length of every QUIC v1 cipher suite.
pub(super) const TAG_LEN: usize = 16;
/// Datagrams carrying Initial packets are padded to this (RFC 9000 §14.1).
pub(super) const MIN_INITIAL_DATAGRAM: usize = 1200;
/// Packet number length assumed when sizing stream data, so that a replica
/// of the same data always fits even if the packet number grows.
pub(super) const MAX_PN_LEN: usize = 4;
/// Largest 1-RTT packet header: flags, a 20-byte connection ID, the
/// packet number.
const MAX_SHORT_HEADER: usize = 1 + 20 + MAX_PN_LEN;

/// ACK ranges an ACK frame carries at most: the highest ones, those the
/// peer is still deciding about (RFC 9000 §13.2.4 asks for a bound).
const MAX_ACK_RANGES: usize = 32;

/// What the send path keeps between datagrams.
///
/// Exists so that pacing (RFC 9002 §7.7: when the next 1-RTT packet may
/// leave) has one owner on the send path, beside the test hook's frames
/// for the next 1-RTT packet.
#[derive(Debug)]
pub(super) struct SendState {
    /// Spreads 1-RTT packets over the RTT at the controller's rate.
    pub(super) pacer: Pacer,
    /// Test hook: raw frame bytes for the next 1-RTT packet.
    pub(super) raw_frames: Vec<Vec<u8>>,
}

impl SendState {
    /// Nothing sent yet; the pacer's burst sized for `mtu`-byte packets.
    pub(super) fn new(now: Instant, mtu: u64) -> SendState {
        SendState {
            pacer: Pacer::new(now, mtu),
            raw_frames: Vec::new(),
        }
    }
}

/// A packet written into the datagram buffer, not yet protected.
struct Built {
    space: SpaceId,
    start: usize,
    layout: Option<LongHeaderLayout>,
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
    record: SentPacket,
    /// The record goes into the sent map (ack-eliciting or padded).
    track: bool,
    /// End of the packet (tag included) in the buffer.
    end: usize,
}

impl Connection {
    /// Write the next datagram to send into `buf` (cleared first). Call until
    /// it returns `None`, then wait for input or [`Connection::poll_timeout`].
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        buf.clear();
        match self.state {
            State::Drained | State::Draining => return None,
            State::Closing => return self.poll_close(now, buf),
            _ => {}
        }
        if self.confidentiality_exhausted() {
            // RFC 9001 §6.6: no key update came in time; stop using the keys.
            self.close_with_error(
                now,
                TransportError::new(
                    TransportErrorCode::AEAD_LIMIT_REACHED,
                    "confidentiality limit reached without a key update",
                ),
            );
            return self.poll_close(now, buf);
        }
        if let Some(t) = self.poll_probe(now, buf) {
            return Some(t);
        }
        self.timers.stop(Timer::Pacing);
        // The datagram's packets, one per space at most, are built in
        // these slots and finished where they lie: a packet's record is
        // about 250 bytes, and returning the array, iterating it by value
        // and passing each packet on were seven copies of it per packet
        // (3% of a saturated simulation). Written as three `None`s: the
        // array expression `[const { None }; 3]` compiled to three copies
        // of a 248-byte constant, memcpy calls at every poll, where a
        // `None` is one tag to store.
        let mut built: [Option<Built>; 3] = [None, None, None];
        let [.., probe_slot] = &mut built;
        self.build_mtu_probe(now, buf, probe_slot);
        if probe_slot.is_none() && !self.build_packets(now, buf, &mut built) {
            return None;
        }
        for b in built.iter_mut().flatten() {
            self.finish_packet(now, buf, b);
        }
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        self.validation.on_sent(buf.len());
        self.on_datagram_sent_on_path(buf.len());
        let ecn = self.outgoing_ecn();
        if ecn.is_some() {
            self.stats.ecn_marked_sent += 1;
        }
        self.set_loss_detection_timer(now);
        self.update_send_timers(now);
        Some(Transmit {
            destination: self.remote,
            source: self.local,
            size: buf.len(),
            ecn,
        })
    }

    /// A path MTU probe, when one is due and the window and the pacer let
    /// a packet of its size go (path_mtu.rs): a 1-RTT packet with a PING,
    /// padded to the size under test. Only on a confirmed connection, on a
    /// validated path, and not while a probe timeout is pending (whose
    /// probes go first, at the base size). Built into `slot` (empty on
    /// entry), like [`Connection::build_packet`], so that its record is
    /// written where it lies rather than returned and moved there.
    fn build_mtu_probe(&mut self, now: Instant, buf: &mut Vec<u8>, slot: &mut Option<Built>) {
        if !self.handshake.confirmed
            || self.one_rtt.is_none()
            || self.path_validation.is_some()
            || self.loss_detection.pto_count > 0
        {
            return;
        }
        let Some(size) = self.path_mtu.probe_due(now) else {
            return;
        };
        let bytes = u64::from(size);
        if self.bytes_in_flight + bytes > self.cc.window() {
            return;
        }
        let rate = self.pacing_rate();
        if self.tx.pacer.delay(now, bytes, rate).is_some() {
            // The data path below sets the pacing timer.
            return;
        }
        let space = SpaceId::Data;
        let pn = self.space(space).next_pn;
        let pn_len = packet::pn_len_for(pn, self.space(space).largest_acked);
        let (layout, pn_offset) = self.write_header(space, buf, pn, pn_len);
        buf.push(frame::frame_type::PING as u8);
        let end = usize::from(size);
        if buf.len() + TAG_LEN > end {
            buf.clear();
            return;
        }
        buf.resize(end - TAG_LEN, 0); // PADDING frames
        buf.resize(end, 0);
        let built = slot.insert(Built {
            space,
            start: 0,
            layout,
            pn_offset,
            pn_len,
            pn,
            record: self.new_record(now),
            track: true,
            end,
        });
        built.record.ack_eliciting = true;
        built.record.in_flight = true;
        self.space_mut(space).next_pn += 1;
        self.path_mtu.on_probe_sent(pn, size);
        self.stats.mtu_probes_sent += 1;
    }

    /// Builds the packets of the next datagram into `built`, one per space
    /// at most (slots in place: a Vec here was an allocation per poll, two
    /// per datagram sent); `false` when there is nothing to send.
    fn build_packets(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
        built: &mut [Option<Built>; 3],
    ) -> bool {
        // While a probe timeout is pending, packets stay at the size every
        // path carries, so that the PTO's probes get through a path whose
        // MTU shrank (path_mtu.rs, black holes).
        let mtu = if self.loss_detection.pto_count > 0 {
            self.path_mtu.base()
        } else {
            self.path_mtu.current()
        };
        let limit = usize::from(mtu)
            .min(usize::try_from(self.validation.amplification_budget()).unwrap_or(usize::MAX))
            .min(usize::try_from(self.path_budget()).unwrap_or(usize::MAX));
        if limit < 64 {
            return false;
        }
        // The spaces by reference: zipped by value, the array was copied
        // into the iterator and read back across the copy's seam, a store
        // forwarding stall in perf on every poll.
        for (slot, &space) in built.iter_mut().zip(SpaceId::ALL.iter()) {
            // A resuming client's Data space sends 0-RTT packets before
            // it has 1-RTT keys.
            let zero_rtt = space == SpaceId::Data && self.is_sending_zero_rtt();
            if !(self.has_keys(space) || zero_rtt) {
                continue;
            }
            if limit.saturating_sub(buf.len()) < 64 {
                break;
            }
            self.build_packet(now, space, buf, limit, slot);
        }
        if built.iter().all(Option::is_none) {
            self.update_send_timers(now);
            return false;
        }
        // RFC 9000 §14.1: pad datagrams with a client Initial, or a server's
        // ack-eliciting Initial, to 1200 bytes (within the budget).
        let needs_padding = built.iter().flatten().any(|b| {
            b.space == SpaceId::Initial && (self.side.is_client() || b.record.ack_eliciting)
        });
        if needs_padding && buf.len() < MIN_INITIAL_DATAGRAM && limit >= MIN_INITIAL_DATAGRAM {
            let pad = MIN_INITIAL_DATAGRAM - buf.len();
            let body_end = buf.len() - TAG_LEN;
            buf.truncate(body_end);
            buf.resize(body_end + pad, 0); // PADDING frames
            buf.resize(body_end + pad + TAG_LEN, 0);
            if let Some(last) = built.iter_mut().flatten().last() {
                last.record.in_flight = true;
                last.track = true;
            }
        }
        // The last packet absorbed any padding.
        if let Some(last) = built.iter_mut().flatten().last() {
            last.end = buf.len();
        }
        true
    }

    /// Timers that depend on what is waiting to be sent.
    fn update_send_timers(&mut self, now: Instant) {
        let wakeup = self.recovery.next_wakeup(now);
        self.timers.set_opt(Timer::Replica, wakeup);
        let ack = self
            .space(SpaceId::Data)
            .ack_deadline
            .filter(|_| self.space(SpaceId::Data).ack_pending);
        self.timers.set_opt(Timer::Ack, ack);
    }

    /// Whether the application has stream data, replicas or datagrams waiting.
    pub(super) fn has_data_to_send(&self) -> bool {
        // Queued DATAGRAM frames are data waiting too: without them, a
        // datagram-only sender counted every acknowledgement as
        // application-limited and its window never grew.
        self.streams.has_pending() || self.recovery.has_queued() || self.datagrams.queued() > 0
    }

    fn congestion_allows(&self) -> bool {
        self.bytes_in_flight + u64::from(self.path_mtu.current()) <= self.cc.window()
    }

    /// Build one packet of `space` at the end of `buf` into `slot` (empty
    /// on entry), or nothing. The record is written where it will lie
    /// until the packet is finished, not moved there at the end.
    fn build_packet(
        &mut self,
        now: Instant,
        space: SpaceId,
        buf: &mut Vec<u8>,
        limit: usize,
        slot: &mut Option<Built>,
    ) {
        // A PTO in any space lets every space send (RFC 9002 §6.2.4: probes
        // are not blocked by congestion control). During the handshake this
        // matters: a client whose window is full of Initial probes must
        // still get its Handshake flight (the Finished) out, or the server,
        // which has dropped its Initial keys, never completes.
        let probing = SpaceId::ALL.iter().any(|&s| self.space(s).probes > 0);
        let cwnd_ok = self.congestion_allows() || probing;
        let mut pacing_ok = true;
        let replica_waiting = space == SpaceId::Data && self.recovery.has_due(now, false);
        if (cwnd_ok || replica_waiting) && !probing && space == SpaceId::Data {
            let rate = self.pacing_rate();
            if let Some(t) = self
                .tx
                .pacer
                .delay(now, u64::from(self.path_mtu.current()), rate)
            {
                pacing_ok = false;
                self.timers.set(Timer::Pacing, t);
            }
        }
        let may_elicit = cwnd_ok && pacing_ok;
        let resend = if space == SpaceId::Data && self.handshake.complete {
            let window = SendWindow {
                may_elicit,
                pacing_ok,
                probing,
                // Only read when a packet may go (and costs a scan).
                app_limited: may_elicit && !probing && !self.has_eliciting(SpaceId::Data, now),
                room: limit.saturating_sub(buf.len() + MAX_SHORT_HEADER + TAG_LEN),
            };
            let (recovery, mut cx) = self.recovery(now);
            recovery.plan_resend(&mut cx, window)
        } else {
            None
        };
        let s = self.space(space);
        let ack_due = s.ack_pending
            && !s.received.is_empty()
            && (space != SpaceId::Data || s.ack_deadline.is_some_and(|d| d <= now));
        let elicit = resend.is_some() || (may_elicit && self.has_eliciting(space, now));
        if !ack_due && !elicit {
            if space == SpaceId::Data && cwnd_ok && pacing_ok && !self.has_data_to_send() {
                self.rate.on_app_limited(self.bytes_in_flight);
            }
            return;
        }

        // Header.
        let start = buf.len();
        let pn = self.space(space).next_pn;
        let pn_len = packet::pn_len_for(pn, self.space(space).largest_acked);
        let (layout, pn_offset) = self.write_header(space, buf, pn, pn_len);
        let max_end = limit.saturating_sub(TAG_LEN);
        let built = slot.insert(Built {
            space,
            start,
            layout,
            pn_offset,
            pn_len,
            pn,
            record: self.new_record(now),
            track: false,
            end: 0,
        });
        let record = &mut built.record;

        // A path under validation gets its PATH_CHALLENGE first (RFC 9000
        // §8.2.1): replicas fill their packets, so behind them the
        // challenge stayed unsent for as long as losses were being
        // recovered, validation timed out, and the server went back to an
        // address the client had left.
        if space == SpaceId::Data
            && self.handshake.complete
            && self.write_path_challenge(buf, max_end, record)
        {
            record.ack_eliciting = true;
        }
        // A replica or a head-of-line copy comes first (after a
        // challenge), cut to the room there is; other frames only fill
        // what is left.
        if let Some(resend) = resend {
            let (recovery, mut cx) = self.recovery(now);
            recovery.write_resend(&mut cx, resend, buf, max_end, may_elicit, record);
        }

        // A probe with no new data to carry resends the oldest data in
        // flight (RFC 9002 §6.2.4), once per probe timeout.
        if space == SpaceId::Data
            && self.handshake.complete
            && record.replica.is_none()
            && !record.early_copy
            && std::mem::take(&mut self.space_mut(space).probe_copy)
        {
            /// Packets looked at: the oldest in flight are where a probe's
            /// copy helps, and the scan stays short on a full window.
            const SCAN: usize = 16;
            let candidates: Vec<Vec<StreamChunk>> = self
                .space(SpaceId::Data)
                .sent
                .values()
                .filter(|p| p.ack_eliciting && p.in_flight && !p.stream_chunks.is_empty())
                .take(SCAN)
                .map(|p| p.stream_chunks.clone())
                .collect();
            let (recovery, mut cx) = self.recovery(now);
            recovery.write_probe_copy(&mut cx, &candidates, buf, max_end, record);
        }

        // ACK (RFC 9000 §13.2): when due, or piggybacked on eliciting packets.
        let ecn_counts = self.ack_ecn_counts(space);
        let s = self.space(space);
        if (ack_due || (elicit && s.ack_pending)) && !s.received.is_empty() {
            let delay = if space == SpaceId::Data {
                s.ack_delay(now, LOCAL_ACK_DELAY_EXPONENT)
            } else {
                0
            };
            // The highest ranges, at most MAX_ACK_RANGES, held on the stack
            // and the frame measured before it is written: an ACK costs no
            // allocation (two per ACK were about 1% of a bulk transfer).
            let mut held: [core::ops::Range<u64>; MAX_ACK_RANGES] =
                [const { 0..0 }; MAX_ACK_RANGES];
            let mut count = 0;
            for (slot, r) in held.iter_mut().zip(s.received.iter().rev()) {
                *slot = r;
                count += 1;
            }
            let ranges = held.get(..count).unwrap_or_default();
            // Measured only when the bound says it might not fit.
            let ecn = ecn_counts.as_ref();
            let fits = buf.len() + frame::ack_frame_len_bound(count, ecn.is_some()) <= max_end
                || buf.len() + frame::ack_frame_len(ranges, delay, ecn) <= max_end;
            if fits {
                frame::write_ack(buf, ranges, delay, ecn);
                record.largest_acked = s.received.max();
                if let (SpaceId::Data, Some(largest)) = (space, record.largest_acked) {
                    // RFC 9001 §6.2: what lets the peer update keys again.
                    if let Some(k) = self.one_rtt.as_mut() {
                        k.on_ack_sent(largest);
                    }
                }
                let s = self.space_mut(space);
                s.ack_pending = false;
                s.unacked_eliciting = 0;
                s.ack_deadline = None;
            }
        }

        // A completed FEC block's repair symbol travels in its own packet.
        let alone = record.replica.is_none() && !record.early_copy;
        let fec_ready = space == SpaceId::Data && may_elicit && alone;
        let fec_repair = fec_ready && {
            let (recovery, mut cx) = self.recovery(now);
            recovery.write_fec_repair(&mut cx, buf, max_end, record)
        };
        if !fec_repair && elicit && alone {
            self.write_eliciting_frames(now, space, buf, max_end, may_elicit, record);
        }

        // Probes must elicit an ACK: PING if nothing else did.
        let s = self.space_mut(space);
        if !record.ack_eliciting && (s.probes > 0 || s.ping_pending) && buf.len() < max_end {
            buf.push(frame::frame_type::PING as u8);
            record.ack_eliciting = true;
            s.ping_pending = false;
        }
        if record.ack_eliciting {
            s.probes = s.probes.saturating_sub(1);
            // RFC 9002 §6.2.4: a second probe datagram guards against the
            // loss of one; during the handshake it carries the CRYPTO data
            // again rather than a bare PING the peer can do nothing with.
            if space != SpaceId::Data && s.probes > 0 && !s.crypto_send.has_pending() {
                s.crypto_send.requeue_unacked();
            }
        }
        self.pad_challenge_datagram(buf, max_end, record);
        if buf.len() == start + (pn_offset - start) + pn_len {
            // Nothing but a header: undo.
            buf.truncate(start);
            *slot = None;
            return;
        }
        // Header protection samples 4 bytes after the packet number start
        // plus 16: make sure the payload is long enough (RFC 9001 §5.4.2).
        let min_payload_end = pn_offset + MAX_PN_LEN;
        if buf.len() < min_payload_end {
            buf.resize(min_payload_end, 0);
        }
        buf.resize(buf.len() + TAG_LEN, 0);
        self.space_mut(space).next_pn += 1;
        record.in_flight = record.ack_eliciting;
        built.track = record.ack_eliciting;
        built.end = buf.len();
    }

    /// The record of a packet about to be written at `now`, before any
    /// frame: not yet eliciting or in flight, its delivery-rate sample
    /// taken and its ECN mark decided.
    fn new_record(&mut self, now: Instant) -> SentPacket {
        SentPacket {
            time_sent: now,
            size: 0,
            ack_eliciting: false,
            in_flight: false,
            largest_acked: None,
            stream_chunks: Vec::new(),
            datagrams: Vec::new(),
            retransmits: Vec::new(),
            rate: self.rate.on_packet_sent(now, self.bytes_in_flight),
            replica: None,
            reinjection: false,
            new_data: false,
            early_copy: false,
            tag: None,
            ecn_marked: self.outgoing_ecn().is_some(),
        }
    }

    /// Whether `space` has ack-eliciting frames waiting.
    pub(super) fn has_eliciting(&self, space: SpaceId, now: Instant) -> bool {
        let s = self.space(space);
        if s.crypto_send.has_pending() || s.ping_pending || s.probes > 0 {
            return true;
        }
        if space == SpaceId::Data && self.is_sending_zero_rtt() {
            // 0-RTT carries stream data only (RFC 9000 §12.4).
            return self.streams.has_pending();
        }
        if space != SpaceId::Data || !self.handshake.complete {
            return false;
        }
        self.handshake.done_pending
            || self.validation.new_token_due()
            || !self.tx.raw_frames.is_empty()
            || self.recovery.fec_pending()
            || self
                .path_responses
                .front()
                .is_some_and(|r| self.on_current_path(r))
            || self.path_challenge_pending()
            || !self.cids.pending_new.is_empty()
            || !self.cids.pending_retire.is_empty()
            || self.datagrams.queued() > 0
            || self.streams.has_pending()
            || self.recovery.has_due(now, true)
    }

    /// Everything but ACKs and replicas, in priority order.
    fn write_eliciting_frames(
        &mut self,
        _now: Instant,
        space: SpaceId,
        buf: &mut Vec<u8>,
        max_end: usize,
        may_elicit: bool,
        record: &mut SentPacket,
    ) {
        let before = buf.len();
        if space == SpaceId::Data && self.handshake.complete {
            if self.handshake.done_pending && self.side.is_server() && buf.len() < max_end {
                buf.push(frame::frame_type::HANDSHAKE_DONE as u8);
                self.handshake.done_pending = false;
                record.retransmits.push(Retransmit::HandshakeDone);
            }
            self.validation.write_new_token(buf, max_end, record);
            // Answers to challenges from the current path; the others
            // leave in datagrams of their own (`poll_probe`).
            while let Some(r) = self.path_responses.front().copied() {
                if !self.on_current_path(&r) || buf.len() + 9 > max_end {
                    break;
                }
                Frame::PathResponse(r.data).encode(buf);
                self.path_responses.pop_front();
            }
            while let Some(&seq) = self.cids.pending_new.front() {
                let Some(issued) = self.cids.issued(seq) else {
                    self.cids.pending_new.pop_front();
                    continue;
                };
                let mut tmp = Vec::with_capacity(48);
                Frame::NewConnectionId {
                    sequence: seq,
                    retire_prior_to: 0,
                    cid: issued.cid,
                    reset_token: issued.reset_token,
                }
                .encode(&mut tmp);
                if buf.len() + tmp.len() > max_end {
                    break;
                }
                buf.extend_from_slice(&tmp);
                self.cids.pending_new.pop_front();
                record.retransmits.push(Retransmit::NewConnectionId(seq));
            }
            while let Some(&seq) = self.cids.pending_retire.front() {
                let mut tmp = Vec::with_capacity(10);
                Frame::RetireConnectionId { sequence: seq }.encode(&mut tmp);
                if buf.len() + tmp.len() > max_end {
                    break;
                }
                buf.extend_from_slice(&tmp);
                self.cids.pending_retire.pop_front();
                record.retransmits.push(Retransmit::RetireConnectionId(seq));
            }
            while let Some(raw) = self.tx.raw_frames.pop() {
                buf.extend_from_slice(&raw);
            }
            while let Some(c) = self
                .streams
                .poll_control(max_end.saturating_sub(buf.len()), buf)
            {
                record.retransmits.push(Retransmit::Control(c));
            }
        }
        // CRYPTO data of this level.
        loop {
            let room = max_end.saturating_sub(buf.len());
            let s = self.space(space);
            if !s.crypto_send.has_pending() || room < 16 {
                break;
            }
            let offset_hint = 8; // varint offset upper bound
            let max_data = room.saturating_sub(1 + offset_hint + 2);
            let Some(r) = self.space_mut(space).crypto_send.poll(max_data) else {
                break;
            };
            let len = (r.end - r.start) as usize;
            frame::write_crypto_header(buf, r.start, len);
            let s = self.space(space);
            buf.extend_from_slice(s.crypto_send.bytes(&r));
            record.retransmits.push(Retransmit::Crypto(r));
        }
        let zero_rtt = space == SpaceId::Data && self.is_sending_zero_rtt();
        if space == SpaceId::Data && (self.handshake.complete || zero_rtt) && may_elicit {
            while let Some(d) = self.datagrams.peek_outgoing().filter(|_| !zero_rtt) {
                let need = frame::datagram_header_len(d.len()) + d.len();
                if buf.len() + need > max_end {
                    break;
                }
                frame::write_datagram_header(buf, d.len());
                buf.extend_from_slice(d);
                let Some(d) = self.datagrams.pop_outgoing() else {
                    break;
                };
                let id = self.recovery.store_datagram(d);
                record.datagrams.push(id);
                record.ack_eliciting = true;
            }
            // New stream data; room sized for the largest packet number so
            // that a replica of this data always fits in one packet.
            let mut header_slack = MAX_PN_LEN.saturating_sub(self.pn_len_in_use(space));
            // The block's repair frame must fit one packet: its symbol is
            // the longest payload + 2, its header up to ~24 bytes plus one
            // or two bytes per packet-number delta.
            header_slack += self.recovery.fec_frame_overhead();
            loop {
                let room = max_end.saturating_sub(buf.len() + header_slack);
                if room < 8 {
                    break;
                }
                let Some(chunk) = self.streams.poll_chunk(room) else {
                    break;
                };
                if !self.streams.write_chunk(&chunk, buf) {
                    break;
                }
                self.stats.stream_bytes_sent += u64::from(chunk.len);
                record.stream_chunks.push(chunk);
                record.new_data = true;
            }
        }
        if buf.len() > before {
            record.ack_eliciting = true;
        }
    }

    fn pn_len_in_use(&self, space: SpaceId) -> usize {
        let s = self.space(space);
        packet::pn_len_for(s.next_pn, s.largest_acked)
    }

    /// Protect a built packet and account for it.
    /// The packet's record moves into the sent map, leaving an empty one.
    fn finish_packet(&mut self, now: Instant, buf: &mut [u8], b: &mut Built) {
        let end = b.end;
        if let Some(layout) = b.layout.as_ref() {
            packet::set_long_length(buf, layout, end);
        }

        if b.space == SpaceId::Data && b.record.new_data {
            self.recovery
                .on_new_data_sent(b.pn, &buf[b.pn_offset + b.pn_len..end - TAG_LEN]);
        }
        if let Some(keys) = self.local_keys(b.space) {
            if crypto::seal(
                keys,
                &mut buf[b.start..end],
                b.pn_offset - b.start,
                b.pn_len,
                b.pn,
            )
            .is_err()
            {
                tracing::error!("packet protection failed");
            }
        }
        let size = (end - b.start) as u16;
        b.record.size = size;
        self.stats.packets_sent += 1;
        if b.space == SpaceId::Data && b.layout.is_some() {
            self.stats.zero_rtt_packets_sent += 1;
        }
        for s in &mut self.subscribers {
            s.packet_sent(
                now,
                b.space,
                b.pn,
                usize::from(size),
                b.record.ack_eliciting,
            );
        }
        if b.record.ack_eliciting && self.side.is_client() && b.space == SpaceId::Handshake {
            // RFC 9001 §4.9.1: a client drops Initial keys once it sends Handshake.
            self.discard_space(now, SpaceId::Initial);
        }
        if !b.track {
            return;
        }
        // Path MTU probes are not the recovery policy's business (their
        // loss is by design: path_mtu.rs).
        if b.space == SpaceId::Data && !self.path_mtu.is_probe(b.pn) {
            if b.record.new_data {
                self.stats.data_packets += 1;
            }
            let view = SentView {
                pn: b.pn,
                size,
                replica: b.record.replica,
                carries_new_data: b.record.new_data,
            };
            let (recovery, mut cx) = self.recovery(now);
            b.record.tag = recovery.on_packet_sent(&mut cx, &view);
        }
        if b.record.in_flight {
            self.bytes_in_flight += u64::from(size);
            self.cc
                .on_packet_sent(now, u64::from(size), self.bytes_in_flight);
            self.tx.pacer.on_sent(now, u64::from(size));
        }
        let s = self.space_mut(b.space);
        if b.record.ack_eliciting {
            s.ack_eliciting_in_flight += 1;
            s.time_of_last_ack_eliciting = Some(now);
        }
        s.sent.insert(b.pn, core::mem::take(&mut b.record));
    }

    /// Write the header of a `space` packet numbered `pn` at the end of
    /// `buf`: long (Initial/Handshake/0-RTT, with a Length placeholder) or
    /// short.
    /// Returns the long-header layout, if any, and the packet-number offset.
    pub(super) fn write_header(
        &self,
        space: SpaceId,
        buf: &mut Vec<u8>,
        pn: u64,
        pn_len: usize,
    ) -> (Option<LongHeaderLayout>, usize) {
        let dcid = self.cids.remote_cid();
        match space {
            SpaceId::Data if !self.is_sending_zero_rtt() => {
                let phase = self.one_rtt.as_ref().is_some_and(|k| k.phase);
                (
                    None,
                    packet::write_short_header(buf, false, phase, &dcid, pn, pn_len),
                )
            }
            _ => {
                let ty = match space {
                    SpaceId::Initial => LongType::Initial,
                    SpaceId::Handshake => LongType::Handshake,
                    SpaceId::Data => LongType::ZeroRtt,
                };
                let scid = self.cids.issued(0).map(|c| c.cid).unwrap_or_default();
                // A client's Initials carry its token (RFC 9000 §17.2.2).
                let token: &[u8] = if ty == LongType::Initial && self.side.is_client() {
                    self.validation.initial_token()
                } else {
                    &[]
                };
                let l = packet::write_long_header(
                    buf,
                    ty,
                    self.version.current,
                    &dcid,
                    &scid,
                    token,
                    pn,
                    pn_len,
                );
                (Some(l), l.pn_offset)
            }
        }
    }

    /// Our sealing keys for `space`, if we have them.
    pub(super) fn local_keys(&self, space: SpaceId) -> Option<&crypto::DirectionalKeys> {
        match space {
            SpaceId::Initial => self.initial_keys.as_ref().map(|k| &k.local),
            SpaceId::Handshake => self.handshake_keys.as_ref().map(|k| &k.local),
            SpaceId::Data => match self.one_rtt.as_ref() {
                Some(k) => Some(&k.keys.local),
                // A resuming client's 0-RTT packets.
                None if self.side.is_client() => self.zero_rtt_keys(),
                None => None,
            },
        }
    }
}
