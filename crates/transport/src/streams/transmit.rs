//! The send path: filling packets with STREAM and control frames, and the
//! fates of what was sent (RFC 9000 §13.3).
//!
//! Order inside a packet is the connection's choice; here the order among
//! streams is: retransmissions and FINs first (they need no flow-control
//! credit and unblock the peer's reassembly), then new data round-robin over
//! the streams that flow control lets send, one chunk per call.

use std::ops::Bound;

use super::control::{ControlFrame, Pending};
use super::{di, StreamChunk, StreamEvent, Streams};
use crate::policy::StreamPosition;
use wire::StreamId;

impl Streams {
    /// The next chunk for a packet with `max_frame_len` bytes of room for the
    /// whole STREAM frame (header + data): queued retransmissions first, then
    /// new data round-robin across streams, within connection and stream flow
    /// control. Marks it as sent. `None` if nothing fits (room below a header
    /// plus one byte, unless a bare FIN).
    pub fn poll_chunk(&mut self, max_frame_len: usize) -> Option<StreamChunk> {
        // Retransmissions and FINs, lowest stream first.
        while let Some(&id) = self.urgent.first() {
            let send = self.streams.get_mut(&id).and_then(|s| s.send.as_mut());
            match send {
                Some(send) if send.wants_urgent() => {
                    let chunk = send.poll_urgent(id, max_frame_len);
                    if chunk.is_some() {
                        self.schedule(id);
                    }
                    // `None`: the frame does not fit; new data would not either.
                    return chunk;
                }
                _ => {
                    self.urgent.remove(&id);
                }
            }
        }
        let credit = self.send_credit.available();
        if credit == 0 {
            self.check_conn_blocked();
            return None;
        }
        let id = self
            .ready
            .range(wire::StreamId(self.rr_next)..)
            .next()
            .or_else(|| self.ready.first())
            .copied()?;
        let chunk = self
            .with_send(id, |send| send.poll_new(id, max_frame_len, credit))
            .flatten();
        if let Some(c) = chunk {
            self.send_credit.consume(u64::from(c.len));
            self.rr_next = id.0.saturating_add(1);
            self.schedule(id);
            self.check_conn_blocked();
            self.on_unsent_sent();
        }
        chunk
    }

    /// Appends the full STREAM frame for `chunk` (header and bytes) to `out`.
    /// Works for any chunk whose bytes are still buffered, so replicas too.
    /// `false`, with nothing written, if the data is gone (stream reset, or
    /// acknowledged and freed: use [`Streams::unacked_parts`] first).
    pub fn write_chunk(&self, chunk: &StreamChunk, out: &mut Vec<u8>) -> bool {
        self.streams
            .get(&chunk.id)
            .and_then(|s| s.send.as_ref())
            .is_some_and(|send| send.write_chunk(chunk, out))
    }

    /// A packet carrying `chunk` was acknowledged. Idempotent. Frees the
    /// acknowledged prefix; emits `Writable` if a write was waiting for room
    /// and `Finished` once all data and the FIN are acknowledged.
    pub fn on_chunk_acked(&mut self, chunk: &StreamChunk) {
        let id = chunk.id;
        let Some(out) = self.with_send(id, |send| send.on_ack(chunk)) else {
            return;
        };
        if out.freed && !self.blocked_writers.is_empty() {
            self.wake_writers();
        }
        if out.finished {
            self.events.push_back(StreamEvent::Finished { id });
        }
        self.schedule(id);
        if out.finished {
            self.maybe_forget(id);
        }
    }

    /// The parts of `chunk` not yet acknowledged, written into `out` (cleared
    /// first). Empty if the stream was reset or everything was acknowledged.
    pub fn unacked_parts(&self, chunk: &StreamChunk, out: &mut Vec<StreamChunk>) {
        out.clear();
        if let Some(send) = self.streams.get(&chunk.id).and_then(|s| s.send.as_ref()) {
            send.unacked_parts(chunk, out);
        }
    }

    /// Where lost data starting at stream offset `first_unacked` of stream
    /// `id` sits: bytes in front of it, and the new data flow control
    /// (stream and connection) still allows. `None` for a stream we do not
    /// send on (gone, or reset).
    pub fn position(&self, id: StreamId, first_unacked: u64) -> Option<StreamPosition> {
        let send = self.streams.get(&id).and_then(|s| s.send.as_ref())?;
        if send.reset.is_some() {
            return None;
        }
        Some(StreamPosition {
            behind_head: first_unacked.saturating_sub(send.acked_prefix()),
            credit_left: send.stream_credit_left().min(self.send_credit.available()),
        })
    }

    /// Whether flow control alone holds data back: stream data is written
    /// and unsent, and neither the connection's nor its streams' credit
    /// lets any of it go (nothing else pending either).
    pub fn flow_blocked(&self) -> bool {
        !self.has_pending()
            && (self.send_totals.within_credit > 0 || self.send_totals.past_credit > 0)
    }

    /// The stretch a head-of-line copy would carry (policy.rs, "Head-of-line
    /// copies"), within a STREAM frame of `max_frame_len` bytes: over the
    /// streams we send on, the one nearest its stream's acknowledged
    /// prefix, lowest stream first on a tie; with its position.
    pub fn head_copy(&self, max_frame_len: usize) -> Option<(StreamChunk, StreamPosition)> {
        let credit = self.send_credit.available();
        let mut best: Option<(StreamChunk, StreamPosition)> = None;
        for (&id, s) in &self.streams {
            let Some(send) = s.send.as_ref() else {
                continue;
            };
            let Some(c) = send.next_head_copy(id, max_frame_len) else {
                continue;
            };
            let pos = StreamPosition {
                behind_head: c.offset.saturating_sub(send.acked_prefix()),
                credit_left: send.stream_credit_left().min(credit),
            };
            if best.is_none_or(|(_, b)| pos.behind_head < b.behind_head) {
                best = Some((c, pos));
            }
        }
        best
    }

    /// A head-of-line copy of `chunk` was sent: its bytes are not offered
    /// again.
    pub fn on_head_copied(&mut self, chunk: &StreamChunk) {
        if let Some(send) = self
            .streams
            .get_mut(&chunk.id)
            .and_then(|s| s.send.as_mut())
        {
            send.on_head_copied(chunk.end());
        }
    }

    /// Plain retransmission: the unacknowledged parts of a lost chunk go back
    /// to the stream's retransmission queue, sent before new data.
    pub fn requeue_lost(&mut self, chunk: &StreamChunk) {
        if let Some(send) = self
            .streams
            .get_mut(&chunk.id)
            .and_then(|s| s.send.as_mut())
        {
            send.requeue(chunk);
            self.schedule(chunk.id);
        }
    }

    /// Writes one pending control frame into `out` if one fits in `max_len`
    /// bytes, and returns its record for the sent packet.
    pub fn poll_control(&mut self, max_len: usize, out: &mut Vec<u8>) -> Option<ControlFrame> {
        let mut after: Option<Pending> = None;
        loop {
            let key = match after {
                None => self.control.first(),
                Some(k) => self
                    .control
                    .range((Bound::Excluded(k), Bound::Unbounded))
                    .next(),
            }
            .copied()?;
            after = Some(key);
            let Some(frame) = self.current_control(key) else {
                // No longer relevant (stream gone, limit moved on).
                self.control.remove(&key);
                continue;
            };
            let start = out.len();
            frame.encode(out);
            if out.len() - start > max_len {
                out.truncate(start);
                continue; // a smaller one may still fit
            }
            self.control.remove(&key);
            return Some(frame);
        }
    }

    /// A packet carrying `frame` was lost: queue it again if it still says
    /// what we would say now (e.g. MAX_DATA only if it is still the latest).
    pub fn on_control_lost(&mut self, frame: ControlFrame) {
        let key = frame.key();
        if self.current_control(key) == Some(frame) {
            self.control.insert(key);
        }
    }

    /// A packet carrying `frame` was acknowledged: an acknowledged
    /// RESET_STREAM ends the sending half (RFC 9000 §3.1 "Reset Recvd").
    pub fn on_control_acked(&mut self, frame: ControlFrame) {
        if let ControlFrame::ResetStream { id, .. } = frame {
            let reset = self
                .streams
                .get_mut(&id)
                .and_then(|s| s.send.as_mut())
                .and_then(|s| s.reset.as_mut());
            if let Some(r) = reset {
                r.acked = true;
                self.maybe_forget(id);
            }
        }
    }

    /// The frame `key` stands for, with today's values; `None` if it no
    /// longer needs sending.
    fn current_control(&self, key: Pending) -> Option<ControlFrame> {
        let send = |id| self.streams.get(&id).and_then(|s| s.send.as_ref());
        let recv = |id| self.streams.get(&id).and_then(|s| s.recv.as_ref());
        match key {
            Pending::MaxData => Some(ControlFrame::MaxData(self.recv_window.max)),
            Pending::MaxStreams(dir) => Some(ControlFrame::MaxStreams {
                dir,
                count: self.max_remote[di(dir)],
            }),
            Pending::MaxStreamData(id) => {
                let r = recv(id).filter(|r| r.wants_credit())?;
                Some(ControlFrame::MaxStreamData {
                    id,
                    max: r.window.max,
                })
            }
            Pending::ResetStream(id) => {
                let r = send(id)?.reset.filter(|r| !r.acked)?;
                Some(ControlFrame::ResetStream {
                    id,
                    error_code: r.error_code,
                    final_size: r.final_size,
                })
            }
            Pending::StopSending(id) => {
                let r = recv(id).filter(|r| r.wants_stop_sending())?;
                Some(ControlFrame::StopSending {
                    id,
                    error_code: r.stopped?,
                })
            }
            Pending::DataBlocked => {
                let c = &self.send_credit;
                (c.available() == 0 && !self.ready.is_empty())
                    .then_some(ControlFrame::DataBlocked { limit: c.max })
            }
            Pending::StreamDataBlocked(id) => {
                let limit = send(id)?.blocked_at()?;
                Some(ControlFrame::StreamDataBlocked { id, limit })
            }
            Pending::StreamsBlocked(dir) => {
                let d = di(dir);
                (self.next_local[d] >= self.max_local[d]).then_some(ControlFrame::StreamsBlocked {
                    dir,
                    limit: self.max_local[d],
                })
            }
        }
    }
}
