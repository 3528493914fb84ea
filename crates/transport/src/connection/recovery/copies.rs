//! Copies of stream data beyond the engine's replicas: what acknowledged
//! early copies (a probe's copy of the oldest data in flight, RFC 9002
//! §6.2.4, and a head-of-line copy while flow control blocks the sender,
//! policy.rs "Head-of-line copies") delivered, and the writing of the
//! unacknowledged parts of stream data into a packet, which every resend
//! shares.

use std::collections::VecDeque;

use wire::frame;
use wire::time::Instant;

use super::super::spaces::SentPacket;
use crate::streams::{StreamChunk, Streams};

/// How many acknowledged chunks of early copies are remembered: a loss is
/// declared within a few RTTs of its copy's acknowledgement, and a probe
/// or head-of-line copy is at most one packet per PTO or flow-control
/// stall, so a few dozen cover every case that matters.
pub(super) const EARLY_ACKS: usize = 64;

/// How many early copies sent are remembered for counting them in the
/// retransmissions (`k`) of the item their data becomes when its loss is
/// declared: the same reasoning as [`EARLY_ACKS`].
pub(super) const EARLY_SENT: usize = 64;

/// The early copies (a probe's copy of the oldest data in flight, a
/// head-of-line copy): resends of stream data before its loss is declared.
/// The engine keeps them so that when that loss comes, the item's
/// retransmissions count them, and an item whose data an acknowledged
/// copy already delivered ends delivered without a round.
#[derive(Debug, Default)]
pub(super) struct EarlyCopies {
    /// The stream data of the latest [`EARLY_SENT`] copies sent.
    sent: VecDeque<Vec<StreamChunk>>,
    /// The chunks acknowledged copies delivered, the latest
    /// [`EARLY_ACKS`], each with its copy's send time.
    acked: VecDeque<(StreamChunk, Instant)>,
}

impl EarlyCopies {
    /// A copy carrying `chunks` left.
    pub fn on_sent(&mut self, chunks: &[StreamChunk]) {
        if self.sent.len() == EARLY_SENT {
            self.sent.pop_front();
        }
        self.sent.push_back(chunks.to_vec());
    }

    /// A copy sent at `sent` was acknowledged: remember what it delivered.
    pub fn on_acked(&mut self, chunks: &[StreamChunk], sent: Instant) {
        for c in chunks {
            if self.acked.len() == EARLY_ACKS {
                self.acked.pop_front();
            }
            self.acked.push_back((*c, sent));
        }
    }

    /// How many of the copies sent carried some of `chunks`: each is a
    /// retransmission of that data.
    pub fn count_carrying(&self, chunks: &[StreamChunk]) -> u32 {
        let overlaps = |a: &StreamChunk, b: &StreamChunk| {
            a.id == b.id
                && a.offset < b.offset + u64::from(b.len).max(1)
                && b.offset < a.offset + u64::from(a.len).max(1)
        };
        let n = self
            .sent
            .iter()
            .filter(|copy| copy.iter().any(|a| chunks.iter().any(|b| overlaps(a, b))))
            .count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }

    /// When every chunk of a packet just declared lost lies within data an
    /// acknowledged early copy carried, that copy's send time (the latest,
    /// when several copies cover it): the loss was recovered before it was
    /// declared, by a retransmission in round 1, its `t_wait` ending when
    /// the copy arrived. `None` when some of it was not delivered that way.
    pub fn delivered_by(&self, chunks: &[StreamChunk]) -> Option<Instant> {
        let mut latest: Option<Instant> = None;
        for c in chunks {
            let end = c.offset + u64::from(c.len);
            let sent = self
                .acked
                .iter()
                .filter(|(e, _)| {
                    e.id == c.id
                        && e.offset <= c.offset
                        && end <= e.offset + u64::from(e.len)
                        && (e.fin || !c.fin)
                })
                .map(|(_, t)| *t)
                .min()?;
            latest = Some(latest.map_or(sent, |l| l.max(sent)));
        }
        latest
    }
}

/// Write STREAM frames for the parts of `chunks` not yet acknowledged
/// that fit before `max_end`, recording them in `record`. False if none
/// was written.
pub(super) fn write_unacked(
    streams: &mut Streams,
    buf: &mut Vec<u8>,
    max_end: usize,
    chunks: &[StreamChunk],
    record: &mut SentPacket,
) -> bool {
    let mut parts = Vec::new();
    let mut wrote = false;
    for chunk in chunks {
        streams.unacked_parts(chunk, &mut parts);
        for p in &parts {
            let Some(p) = fitting_part(p, max_end.saturating_sub(buf.len())) else {
                // Not one byte of it fits: the packet is full.
                return wrote;
            };
            if streams.write_chunk(&p, buf) {
                record.stream_chunks.push(p);
                wrote = true;
            }
        }
    }
    wrote
}

/// What of `part` a STREAM frame within `room` bytes carries: all of it,
/// or its first bytes (without the FIN) when the whole does not fit; `None`
/// when not even one byte does. A copy is never skipped for want of a few
/// bytes: a replica packet's header can be longer than the original's (a
/// longer packet number, a smaller budget on an unvalidated path), and a
/// replica that carried nothing would leave its data unsent for good. The
/// rest of a shortened replica is still unacknowledged when it arrives, so
/// its item runs another round for it.
fn fitting_part(part: &StreamChunk, room: usize) -> Option<StreamChunk> {
    let whole =
        frame::stream_header_len(part.id, part.offset, part.len as usize) + part.len as usize;
    if whole <= room {
        return Some(*part);
    }
    let fits = frame::stream_data_capacity(part.id, part.offset, room)?;
    let len = u32::try_from(fits).ok()?.min(part.len);
    (len > 0).then_some(StreamChunk {
        len,
        fin: false,
        ..*part
    })
}

#[cfg(test)]
mod tests {
    use wire::StreamId;

    use super::*;

    const PART: StreamChunk = StreamChunk {
        id: StreamId(0),
        offset: 2_677_379,
        len: 1313,
        fin: true,
    };

    #[test]
    fn a_part_that_fits_goes_whole() {
        let whole = frame::stream_header_len(PART.id, PART.offset, 1313) + 1313;
        assert_eq!(fitting_part(&PART, whole), Some(PART));
    }

    /// One byte short of the whole part (a longer packet number), or a
    /// budget of a few hundred bytes (an unvalidated path): the copy
    /// carries the first bytes that fit, without the FIN, and fills the
    /// room exactly.
    #[test]
    fn a_part_that_does_not_fit_is_cut_to_the_room() {
        let whole = frame::stream_header_len(PART.id, PART.offset, 1313) + 1313;
        for room in [whole - 1, 300, 40] {
            let p = fitting_part(&PART, room).expect("some of it fits");
            assert_eq!((p.id, p.offset, p.fin), (PART.id, PART.offset, false));
            assert!(p.len > 0 && p.len < PART.len, "{room}: {p:?}");
            let used = frame::stream_header_len(p.id, p.offset, p.len as usize) + p.len as usize;
            assert!(used <= room, "{room}: {used}");
            assert!(
                used + 1 >= room || p.len == PART.len,
                "{room}: {used} wastes room"
            );
        }
    }

    #[test]
    fn no_room_for_a_byte_is_none() {
        let header = frame::stream_header_len(PART.id, PART.offset, 1);
        assert_eq!(fitting_part(&PART, header), None);
        assert_eq!(fitting_part(&PART, 0), None);
    }
}
