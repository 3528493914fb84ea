//! The sending half of one stream (RFC 9000 §3.1).
//!
//! Offsets, not packets: the half knows which byte ranges were acknowledged
//! (`acked`), which must be sent again (`retransmit`) and where new data
//! starts (`unsent`). The connection reports chunk fates; any chunk can be
//! asked for its still-unacknowledged parts and written again, which is all a
//! redundancy policy (ART, replicas) needs, without touching the queues.

use wire::frame::{stream_data_capacity, write_stream_header};
use wire::StreamId;

use super::send_buffer::SendBuffer;
use super::{StreamChunk, WriteError};
use crate::range_set::RangeSet;

/// RESET_STREAM state of a send half we abandoned (RFC 9000 §3.1 "Reset Sent").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResetState {
    /// Application error code sent to the peer.
    pub error_code: u64,
    /// Final size: every byte ever sent counts, nothing more (RFC 9000 §4.5).
    pub final_size: u64,
    /// The RESET_STREAM frame was acknowledged ("Reset Recvd").
    pub acked: bool,
}

/// What an acknowledgement changed, for the caller's events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AckOutcome {
    /// Buffer space was freed.
    pub freed: bool,
    /// All data and the FIN are now acknowledged ("Data Recvd"), for the first time.
    pub finished: bool,
}

/// The sending half of a stream.
#[derive(Clone, Debug)]
pub(crate) struct SendStream {
    /// Unacknowledged bytes: `buf.base()` is the acknowledged prefix, `buf.end()`
    /// the stream's length so far.
    buf: SendBuffer,
    /// Offset of the first byte never sent.
    unsent: u64,
    /// The peer's stream-level limit (MAX_STREAM_DATA, RFC 9000 §4.1).
    pub max_data: u64,
    /// Acknowledged ranges at or above `buf.base()`.
    acked: RangeSet,
    /// Lost ranges waiting to be sent again (never acked, always `< unsent`).
    retransmit: RangeSet,
    /// The application called `finish`.
    fin_requested: bool,
    /// A frame with FIN was sent.
    fin_sent: bool,
    /// The FIN was declared lost and must be sent again.
    fin_lost: bool,
    /// A frame with FIN was acknowledged.
    fin_acked: bool,
    /// Set once `finished` was reported.
    finished: bool,
    /// We reset the stream.
    pub reset: Option<ResetState>,
    /// The peer sent STOP_SENDING with this code.
    pub stopped: Option<u64>,
    /// Limit at which STREAM_DATA_BLOCKED was last queued.
    pub blocked_reported: Option<u64>,
    /// Every byte below this was copied once at the head of line while
    /// flow control blocked us ([`SendStream::next_head_copy`]).
    head_copied_to: u64,
}

impl SendStream {
    /// A fresh half that may send `max_data` bytes before the peer raises it.
    pub fn new(max_data: u64) -> Self {
        SendStream {
            buf: SendBuffer::default(),
            unsent: 0,
            max_data,
            acked: RangeSet::new(),
            retransmit: RangeSet::new(),
            fin_requested: false,
            fin_sent: false,
            fin_lost: false,
            fin_acked: false,
            finished: false,
            reset: None,
            stopped: None,
            blocked_reported: None,
            head_copied_to: 0,
        }
    }

    /// Bytes buffered and not yet acknowledged.
    pub fn buffered(&self) -> u64 {
        self.buf.len()
    }

    /// Stream offset just past the last byte written.
    pub fn end(&self) -> u64 {
        self.buf.end()
    }

    /// The acknowledged prefix: every byte below it was acknowledged.
    pub fn acked_prefix(&self) -> u64 {
        self.buf.base()
    }

    /// New bytes the stream-level limit still lets us send.
    pub fn stream_credit_left(&self) -> u64 {
        self.max_data.saturating_sub(self.unsent)
    }

    /// Bytes written, never sent, and within the peer's stream credit (none
    /// once reset): what only the connection's credit keeps from the wire.
    pub fn unsent_within_credit(&self) -> u64 {
        if self.reset.is_some() {
            return 0;
        }
        self.buf
            .end()
            .min(self.max_data)
            .saturating_sub(self.unsent)
    }

    /// Bytes written past the peer's stream credit (none once reset): held
    /// ahead of MAX_STREAM_DATA.
    pub fn unsent_past_credit(&self) -> u64 {
        if self.reset.is_some() {
            return 0;
        }
        self.buf
            .end()
            .saturating_sub(self.max_data.max(self.unsent))
    }

    /// `Ok` while the application may still write; otherwise why not.
    pub fn check_writable(&self) -> Result<(), WriteError> {
        if let Some(code) = self.stopped {
            return Err(WriteError::Stopped(code));
        }
        if self.reset.is_some() || self.fin_requested {
            return Err(WriteError::Closed);
        }
        Ok(())
    }

    /// Copies as much of `data` as `room` (bytes the caller's limits allow
    /// now) lets in; `Err(Blocked)` if none of a non-empty `data` fits.
    pub fn write(&mut self, data: &[u8], room: u64) -> Result<usize, WriteError> {
        self.check_writable()?;
        let n = usize::try_from(room).map_or(data.len(), |r| r.min(data.len()));
        if n == 0 && !data.is_empty() {
            return Err(WriteError::Blocked);
        }
        self.buf.push(data.get(..n).unwrap_or_default());
        Ok(n)
    }

    /// Marks the end of the stream after the bytes written so far.
    pub fn finish(&mut self) -> Result<(), WriteError> {
        if let Some(code) = self.stopped {
            return Err(WriteError::Stopped(code));
        }
        if self.reset.is_some() || self.fin_requested {
            return Err(WriteError::Closed);
        }
        self.fin_requested = true;
        Ok(())
    }

    /// Abandons the stream (RFC 9000 §3.1 "Reset Sent"): frees the buffer and
    /// forgets queued retransmissions. False if already reset or all acked.
    pub fn reset(&mut self, error_code: u64) -> bool {
        if self.reset.is_some() || self.finished {
            return false;
        }
        self.reset = Some(ResetState {
            error_code,
            final_size: self.unsent,
            acked: false,
        });
        self.buf.clear();
        self.acked.clear();
        self.retransmit.clear();
        self.fin_lost = false;
        true
    }

    /// Nothing more will happen on this half: all acked, or the reset acked.
    pub fn is_done(&self) -> bool {
        self.finished || self.reset.is_some_and(|r| r.acked)
    }

    /// Something to send that needs no flow-control credit: lost ranges, a
    /// lost FIN, or a bare FIN after all data was sent.
    pub fn wants_urgent(&self) -> bool {
        self.reset.is_none()
            && (!self.retransmit.is_empty()
                || self.fin_lost
                || (self.fin_requested && !self.fin_sent && self.unsent == self.buf.end()))
    }

    /// New bytes that the stream-level limit lets us send.
    pub fn wants_new(&self) -> bool {
        self.reset.is_none() && self.unsent < self.buf.end() && self.unsent < self.max_data
    }

    /// The stream limit we are stuck at, if new data waits on it
    /// (RFC 9000 §19.13 STREAM_DATA_BLOCKED).
    pub fn blocked_at(&self) -> Option<u64> {
        (self.reset.is_none() && self.unsent < self.buf.end() && self.unsent >= self.max_data)
            .then_some(self.max_data)
    }

    /// Whether a chunk ending at `end` may carry the FIN.
    fn fin_fits(&self, end: u64) -> bool {
        self.fin_requested && end == self.buf.end()
    }

    /// The next retransmission (or bare/lost FIN) that fits in a STREAM frame
    /// of `max_frame_len` bytes, marked as sent.
    pub fn poll_urgent(&mut self, id: StreamId, max_frame_len: usize) -> Option<StreamChunk> {
        if self.reset.is_some() {
            return None;
        }
        if let Some(r) = self.retransmit.peek_min() {
            let cap = stream_data_capacity(id, r.start, max_frame_len)?;
            let len = (r.end - r.start).min(cap as u64).min(u64::from(u32::MAX));
            if len == 0 {
                return None;
            }
            let end = r.start + len;
            self.retransmit.remove(r.start..end);
            let fin = self.fin_fits(end) && (self.fin_lost || !self.fin_sent);
            if fin {
                self.fin_sent = true;
                self.fin_lost = false;
            }
            return Some(StreamChunk {
                id,
                offset: r.start,
                len: len as u32,
                fin,
            });
        }
        let end = self.buf.end();
        let bare_fin =
            self.fin_requested && self.unsent == end && (self.fin_lost || !self.fin_sent);
        if bare_fin {
            stream_data_capacity(id, end, max_frame_len)?;
            self.fin_sent = true;
            self.fin_lost = false;
            return Some(StreamChunk {
                id,
                offset: end,
                len: 0,
                fin: true,
            });
        }
        None
    }

    /// The next new data within `max_frame_len`, the stream limit and
    /// `conn_credit`, marked as sent. The caller charges `len` to the connection.
    pub fn poll_new(
        &mut self,
        id: StreamId,
        max_frame_len: usize,
        conn_credit: u64,
    ) -> Option<StreamChunk> {
        if !self.wants_new() {
            return None;
        }
        let cap = stream_data_capacity(id, self.unsent, max_frame_len)?;
        let len = (self.buf.end() - self.unsent)
            .min(self.max_data - self.unsent)
            .min(conn_credit)
            .min(cap as u64)
            .min(u64::from(u32::MAX));
        if len == 0 {
            return None;
        }
        let offset = self.unsent;
        self.unsent += len;
        let fin = self.fin_fits(self.unsent) && !self.fin_sent;
        if fin {
            self.fin_sent = true;
        }
        Some(StreamChunk {
            id,
            offset,
            len: len as u32,
            fin,
        })
    }

    /// The lowest stretch of sent, unacknowledged data not copied before
    /// (policy.rs, "Head-of-line copies"), at most what a STREAM frame of
    /// `max_frame_len` bytes carries; never the FIN. `None` when every sent
    /// byte is acknowledged or copied, or the stream was reset.
    pub fn next_head_copy(&self, id: StreamId, max_frame_len: usize) -> Option<StreamChunk> {
        if self.reset.is_some() {
            return None;
        }
        let mut start = self.buf.base().max(self.head_copied_to);
        // Runs in `acked` are maximal: the byte after one is unacknowledged.
        if let Some(r) = self.acked.range_containing(start) {
            start = r.end;
        }
        if start >= self.unsent {
            return None;
        }
        let end = self
            .acked
            .first_range_after(start)
            .map_or(self.unsent, |r| r.start)
            .min(self.unsent);
        let cap = stream_data_capacity(id, start, max_frame_len)?;
        let len = (end - start).min(cap as u64).min(u64::from(u32::MAX));
        (len > 0).then_some(StreamChunk {
            id,
            offset: start,
            len: len as u32,
            fin: false,
        })
    }

    /// A head-of-line copy of everything below `end` was sent.
    pub fn on_head_copied(&mut self, end: u64) {
        self.head_copied_to = self.head_copied_to.max(end);
    }

    /// `chunk`'s range clipped to what is still buffered and was sent.
    fn live_range(&self, chunk: &StreamChunk) -> std::ops::Range<u64> {
        let end = chunk
            .offset
            .saturating_add(u64::from(chunk.len))
            .min(self.unsent);
        chunk.offset.max(self.buf.base())..end
    }

    /// Records an acknowledged chunk (idempotent) and frees the acked prefix.
    pub fn on_ack(&mut self, chunk: &StreamChunk) -> AckOutcome {
        let mut out = AckOutcome::default();
        if self.reset.is_some() {
            return out;
        }
        let r = self.live_range(chunk);
        // In order (nothing acknowledged out of order waiting, and the
        // chunk starts at the acknowledged prefix): the prefix grows by the
        // chunk, which the set below would say after creating its tree's
        // first node and dropping it again (an allocation and a free per
        // acknowledged chunk in a bulk transfer).
        let in_order = r.start < r.end && r.start == self.buf.base() && self.acked.is_empty();
        if r.start < r.end {
            if !in_order {
                self.acked.insert(r.clone());
            }
            if !self.retransmit.is_empty() {
                self.retransmit.remove(r.clone());
            }
        }
        if chunk.fin
            && self.fin_sent
            && chunk.offset.saturating_add(u64::from(chunk.len)) == self.buf.end()
        {
            self.fin_acked = true;
            self.fin_lost = false;
        }
        // `acked` only holds ranges at or above the base, so a run starting at
        // the base is the newly contiguous prefix.
        if in_order {
            self.buf.free_to(r.end);
            out.freed = true;
        } else if self.acked.min() == Some(self.buf.base()) {
            if let Some(prefix) = self.acked.pop_min() {
                self.buf.free_to(prefix.end);
                out.freed = true;
            }
        }
        if !self.finished && self.fin_acked && self.buf.is_empty() && self.unsent == self.buf.end()
        {
            self.finished = true;
            out.finished = true;
        }
        out
    }

    /// The parts of `chunk` not yet acknowledged, appended to `out`.
    pub fn unacked_parts(&self, chunk: &StreamChunk, out: &mut Vec<StreamChunk>) {
        if self.reset.is_some() || self.finished {
            return;
        }
        let id = chunk.id;
        let r = self.live_range(chunk);
        let first = out.len();
        for gap in self.acked.subtract_from(r) {
            let len = (gap.end - gap.start) as u32; // within the chunk: fits
            out.push(StreamChunk {
                id,
                offset: gap.start,
                len,
                fin: false,
            });
        }
        let chunk_end = chunk.offset.saturating_add(u64::from(chunk.len));
        if chunk.fin && !self.fin_acked && self.fin_fits(chunk_end) {
            let pushed = out.len() > first;
            match out.last_mut() {
                Some(last) if pushed && last.end() == chunk_end => last.fin = true,
                _ => out.push(StreamChunk {
                    id,
                    offset: chunk_end,
                    len: 0,
                    fin: true,
                }),
            }
        }
    }

    /// Queues the unacknowledged parts of a lost chunk for retransmission.
    pub fn requeue(&mut self, chunk: &StreamChunk) {
        if self.reset.is_some() || self.finished {
            return;
        }
        let r = self.live_range(chunk);
        let Self {
            acked, retransmit, ..
        } = self;
        for gap in acked.subtract_from(r) {
            retransmit.insert(gap);
        }
        let chunk_end = chunk.offset.saturating_add(u64::from(chunk.len));
        if chunk.fin && self.fin_sent && !self.fin_acked && self.fin_fits(chunk_end) {
            self.fin_lost = true;
        }
    }

    /// Appends the STREAM frame for `chunk` (header and bytes). False, with
    /// nothing written, if its bytes are no longer (or never were) buffered.
    pub fn write_chunk(&self, chunk: &StreamChunk, out: &mut Vec<u8>) -> bool {
        if self.reset.is_some() || (chunk.len == 0 && !chunk.fin) {
            return false;
        }
        let Some(end) = chunk.offset.checked_add(u64::from(chunk.len)) else {
            return false;
        };
        if end > self.unsent || (chunk.fin && !self.fin_fits(end)) {
            return false;
        }
        let range = chunk.offset..end;
        if !self.buf.contains(&range) {
            return false;
        }
        write_stream_header(out, chunk.id, chunk.offset, chunk.len as usize, chunk.fin);
        self.buf.append_to(range, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: StreamId = StreamId(0);

    fn chunk(offset: u64, len: u32, fin: bool) -> StreamChunk {
        StreamChunk {
            id: ID,
            offset,
            len,
            fin,
        }
    }

    #[test]
    fn new_data_respects_stream_limit_and_frame_room() {
        let mut s = SendStream::new(1000);
        assert_eq!(s.write(&[7u8; 3000], 10_000), Ok(3000));
        let c = s.poll_new(ID, 500, u64::MAX).unwrap();
        assert_eq!((c.offset, c.fin), (0, false));
        // 1 type byte + 1 id byte + 2 length bytes at offset 0.
        assert_eq!(c.len, 496);
        let c2 = s.poll_new(ID, 5000, u64::MAX).unwrap();
        assert_eq!(
            (c2.offset, c2.len),
            (496, 504),
            "stopped at MAX_STREAM_DATA"
        );
        assert_eq!(s.poll_new(ID, 5000, u64::MAX), None);
        assert_eq!(s.blocked_at(), Some(1000));
        s.max_data = 5000;
        let c3 = s.poll_new(ID, 5000, 10).unwrap();
        assert_eq!(c3.len, 10, "connection credit");
    }

    #[test]
    fn head_copies_cover_each_unacknowledged_byte_once() {
        let mut s = SendStream::new(u64::MAX);
        assert_eq!(s.write(&[3u8; 4000], 10_000), Ok(4000));
        assert_eq!(s.next_head_copy(ID, 1000), None, "nothing sent yet");
        assert_eq!(s.poll_new(ID, 3004, u64::MAX).unwrap().len, 3000);
        // The head: the first packet's bytes, at most one frame's worth.
        let c = s.next_head_copy(ID, 504).unwrap();
        assert_eq!((c.offset, c.len, c.fin), (0, 500, false));
        s.on_head_copied(c.end());
        let c = s.next_head_copy(ID, 5000).unwrap();
        assert_eq!((c.offset, c.len), (500, 2500), "stops at the unsent edge");
        // Acknowledged data is never copied: 1000..2000 acked, the copy
        // mark at 500 skips to the next hole.
        s.on_ack(&chunk(1000, 1000, false));
        let c = s.next_head_copy(ID, 5000).unwrap();
        assert_eq!((c.offset, c.len), (500, 500), "stops at the acked run");
        s.on_head_copied(c.end());
        let c = s.next_head_copy(ID, 5000).unwrap();
        assert_eq!((c.offset, c.len), (2000, 1000));
        s.on_head_copied(c.end());
        assert_eq!(s.next_head_copy(ID, 5000), None, "each byte once");
        // The acked prefix moves past the mark: still nothing acked.
        s.on_ack(&chunk(0, 1000, false));
        assert_eq!(s.next_head_copy(ID, 5000), None);
        assert_eq!(s.poll_new(ID, 1006, u64::MAX).unwrap().len, 1000);
        let c = s.next_head_copy(ID, 5000).unwrap();
        assert_eq!((c.offset, c.len), (3000, 1000), "newly sent data");
        assert!(s.reset(1));
        assert_eq!(s.next_head_copy(ID, 5000), None, "reset");
    }

    #[test]
    fn write_takes_what_the_room_allows() {
        let mut s = SendStream::new(u64::MAX);
        assert_eq!(s.write(&[1u8; 100], 64), Ok(64));
        assert_eq!(s.write(&[1u8; 10], 0), Err(WriteError::Blocked));
        assert_eq!(s.write(&[], 0), Ok(0), "an empty write probes the state");
        let unsent = |s: &SendStream| (s.unsent_within_credit(), s.unsent_past_credit());
        assert_eq!((s.end(), unsent(&s)), (64, (64, 0)));
        let c = s.poll_new(ID, 2000, u64::MAX).unwrap();
        assert_eq!(c.len, 64);
        assert_eq!(unsent(&s), (0, 0));
        let out = s.on_ack(&chunk(0, 32, false));
        assert!(out.freed);
        assert_eq!(s.buffered(), 32);
        assert_eq!(s.write(&[1u8; 100], 32), Ok(32));
        assert_eq!(unsent(&s), (32, 0));
        s.max_data = 80;
        assert_eq!(
            unsent(&s),
            (16, 16),
            "the stream credit splits the unsent bytes"
        );
        assert!(s.reset(1));
        assert_eq!((s.buffered(), unsent(&s)), (0, (0, 0)));
    }

    #[test]
    fn fin_rides_on_the_last_chunk_and_finishes_when_acked() {
        let mut s = SendStream::new(u64::MAX);
        s.write(b"abcdef", 100).unwrap();
        s.finish().unwrap();
        assert_eq!(s.write(b"x", 100), Err(WriteError::Closed));
        let c = s.poll_new(ID, 100, u64::MAX).unwrap();
        assert_eq!(c, chunk(0, 6, true));
        assert!(!s.wants_urgent() && !s.wants_new());
        let mut out = Vec::new();
        s.unacked_parts(&c, &mut out);
        assert_eq!(out, vec![c]);
        assert_eq!(
            s.on_ack(&chunk(0, 3, false)),
            AckOutcome {
                freed: true,
                finished: false
            }
        );
        assert_eq!(
            s.on_ack(&c),
            AckOutcome {
                freed: true,
                finished: true
            }
        );
        assert_eq!(s.on_ack(&c), AckOutcome::default(), "idempotent");
        assert!(s.is_done());
        s.unacked_parts(&c, &mut out);
        assert_eq!(out.len(), 1, "nothing appended once finished");
    }

    #[test]
    fn bare_fin_and_lost_fin_are_sent_without_credit() {
        let mut s = SendStream::new(u64::MAX);
        s.write(b"abc", 100).unwrap();
        let c = s.poll_new(ID, 100, u64::MAX).unwrap();
        assert!(!c.fin);
        s.finish().unwrap();
        assert!(s.wants_urgent());
        let f = s.poll_urgent(ID, 100).unwrap();
        assert_eq!(f, chunk(3, 0, true));
        assert!(!s.wants_urgent());
        s.on_ack(&c);
        s.requeue(&f);
        assert!(s.wants_urgent(), "lost FIN goes back in the queue");
        assert_eq!(s.poll_urgent(ID, 100), Some(chunk(3, 0, true)));
        let mut buf = Vec::new();
        assert!(s.write_chunk(&f, &mut buf));
        assert_eq!(buf, [0x08 | 0x04 | 0x02 | 0x01, 0, 3, 0]);
        assert!(s.on_ack(&f).finished);
    }

    #[test]
    fn holes_and_retransmissions() {
        let mut s = SendStream::new(u64::MAX);
        s.write(&[0u8; 1000], 10_000).unwrap();
        let c = s.poll_new(ID, 2000, u64::MAX).unwrap();
        assert_eq!(c.len, 1000);
        s.on_ack(&chunk(100, 100, false));
        s.on_ack(&chunk(500, 300, false));
        let mut out = Vec::new();
        s.unacked_parts(&c, &mut out);
        assert_eq!(
            out,
            vec![
                chunk(0, 100, false),
                chunk(200, 300, false),
                chunk(800, 200, false)
            ]
        );
        s.requeue(&c);
        s.on_ack(&chunk(0, 100, false)); // acked while queued: not resent
        assert_eq!(s.buffered(), 800);
        assert_eq!(s.poll_urgent(ID, 2000), Some(chunk(200, 300, false)));
        let r = s.poll_urgent(ID, 2000).unwrap();
        assert_eq!(r, chunk(800, 200, false));
        let mut buf = Vec::new();
        assert!(s.write_chunk(&r, &mut buf));
        assert!(
            !s.write_chunk(&chunk(0, 10, false), &mut buf),
            "freed bytes"
        );
        assert!(
            !s.write_chunk(&chunk(990, 20, false), &mut buf),
            "never sent"
        );
        assert!(
            !s.write_chunk(&chunk(990, 10, true), &mut buf),
            "no FIN requested"
        );
    }

    #[test]
    fn reset_discards_everything() {
        let mut s = SendStream::new(u64::MAX);
        s.write(&[0u8; 100], 1000).unwrap();
        let c = s.poll_new(ID, 60, u64::MAX).unwrap();
        assert!(s.reset(9));
        assert!(!s.reset(9));
        assert_eq!(s.reset.unwrap().final_size, u64::from(c.len));
        assert_eq!(s.buffered(), 0);
        let mut out = Vec::new();
        s.unacked_parts(&c, &mut out);
        assert!(out.is_empty());
        assert!(!s.write_chunk(&c, &mut Vec::new()));
        assert!(!s.wants_urgent() && !s.wants_new());
        assert_eq!(s.write(b"x", 1000), Err(WriteError::Closed));
        s.stopped = Some(4);
        assert_eq!(s.write(b"x", 1000), Err(WriteError::Stopped(4)));
    }

    proptest::proptest! {
        /// However acknowledgements arrive (in order, out of order,
        /// overlapping, repeated), the buffer is freed up to the longest
        /// acknowledged prefix, `freed` says when it moved, and the stream
        /// finishes once every byte and the FIN are acknowledged.
        #[test]
        fn acks_free_the_acknowledged_prefix(
            cuts in proptest::collection::vec(1u32..400, 1..12),
            order in proptest::collection::vec((0usize..64, 0u32..3), 0..40),
        ) {
            let total: u32 = cuts.iter().sum();
            let mut s = SendStream::new(u64::MAX);
            s.write(&vec![5u8; total as usize], u64::MAX).unwrap();
            s.finish().unwrap();
            let mut sent = Vec::new();
            for &len in cuts.iter().cycle() {
                match s.poll_new(ID, len as usize + 16, u64::MAX) {
                    Some(c) => sent.push(c),
                    None => break,
                }
            }
            proptest::prop_assert_eq!(s.unsent, u64::from(total));
            let mut covered = vec![false; total as usize];
            let mut fin_acked = false;
            let mut prefix = 0u64;
            // The given order, then every chunk, so that it ends finished.
            let picks = order.iter().map(|&(i, _)| i % sent.len()).chain(0..sent.len());
            for i in picks {
                let c = sent[i];
                let was_finished = s.finished;
                let out = s.on_ack(&c);
                for b in c.offset..c.offset + u64::from(c.len) {
                    covered[b as usize] = true;
                }
                fin_acked |= c.fin;
                let now = covered.iter().take_while(|&&b| b).count() as u64;
                proptest::prop_assert_eq!(s.buf.base(), now);
                proptest::prop_assert_eq!(out.freed, now > prefix);
                prefix = now;
                proptest::prop_assert_eq!(out.finished, !was_finished && fin_acked && now == u64::from(total));
            }
            proptest::prop_assert!(s.finished);
        }
    }
}
