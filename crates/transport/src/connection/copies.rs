//! The copies a packet may carry beyond new data: the policy's
//! reinjections and replicas of data being recovered, head-of-line
//! copies while flow control blocks the sender (policy.rs, "Reinjection
//! and off-mode", "Head-of-line copies"), and a probe's copy of the
//! oldest data in flight (RFC 9002 §6.2.4). The send path (`send.rs`)
//! asks for them while it builds a 1-RTT packet.

use wire::frame;
use wire::time::Instant;

use super::spaces::SentPacket;
use super::{Connection, SpaceId};
use crate::policy::{HeadOfLine, ReplicaRef};
use crate::streams::StreamChunk;

/// How many acknowledged chunks of early copies are remembered: a loss is
/// declared within a few RTTs of its copy's acknowledgement, and a probe
/// or head-of-line copy is at most one packet per PTO or flow-control
/// stall, so a few dozen cover every case that matters.
pub(super) const EARLY_ACKS: usize = 64;

impl Connection {
    /// An early copy (a probe's or a head-of-line copy) was acknowledged:
    /// remember what it delivered, for [`Connection::delivered_by_copy`].
    pub(super) fn remember_early_ack(&mut self, chunks: &[StreamChunk], sent: Instant) {
        for c in chunks {
            if self.early_acked.len() == EARLY_ACKS {
                self.early_acked.pop_front();
            }
            self.early_acked.push_back((*c, sent));
        }
    }

    /// When every chunk of a packet just declared lost lies within data an
    /// acknowledged early copy carried, that copy's send time: the loss was
    /// recovered before it was declared, by one retransmission (counted in
    /// round 1, its `t_wait` ending when the copy arrived). `None` when
    /// some of it was not delivered that way.
    pub(super) fn delivered_by_copy(&self, chunks: &[StreamChunk]) -> Option<Instant> {
        let mut latest: Option<Instant> = None;
        for c in chunks {
            let end = c.offset + u64::from(c.len);
            let sent = self
                .early_acked
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

    /// A packet may go: let the policy reinject an item being recovered,
    /// when the sender is application-limited (off-mode) or when the
    /// policy's reinjection time has come (policy.rs, "Reinjection and
    /// off-mode"). The engine queues the replica due now, so this very
    /// packet carries it. Idle and blocked by flow control with nothing
    /// reinjected, the policy may instead ask for a head-of-line copy
    /// (policy.rs, "Head-of-line copies") of at most `room` bytes of frame,
    /// returned for this packet to carry.
    pub(super) fn offer_reinjection(&mut self, now: Instant, room: usize) -> Option<StreamChunk> {
        let app_limited = !self.has_eliciting(SpaceId::Data, now);
        let timer_due = || self.policy.next_reinjection().is_some_and(|t| t <= now);
        let item = if app_limited {
            self.call_policy(now, |policy, cx| policy.on_app_limited(cx))
        } else if timer_due() {
            self.call_policy(now, |policy, cx| policy.on_reinjection_timer(cx))
        } else {
            None
        };
        if let Some(id) = item {
            // Refused when the item is gone or a replica of it still waits.
            let _accepted = self.engine.reinject(now, id);
            return None;
        }
        if !app_limited || !self.streams.flow_blocked() {
            return None;
        }
        let (chunk, position) = self.streams.head_copy(room)?;
        let head = HeadOfLine {
            bytes: u64::from(chunk.len),
            position,
        };
        self.call_policy(now, |policy, cx| policy.on_flow_blocked(cx, &head))
            .then_some(chunk)
    }

    /// Write the unacknowledged parts of an item's data. False if nothing
    /// is left to carry.
    pub(super) fn write_replica(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        r: &ReplicaRef,
        record: &mut SentPacket,
    ) -> bool {
        let Some(item) = self.engine.data(r.item) else {
            return false;
        };
        let chunks: Vec<StreamChunk> = item.chunks.to_vec();
        let datagrams = item.datagrams.to_vec();
        let mut wrote = false;
        for id in datagrams {
            let Some(d) = self.datagram_store.get(&id) else {
                continue;
            };
            let need = frame::datagram_header_len(d.len()) + d.len();
            if buf.len() + need > max_end {
                continue;
            }
            frame::write_datagram_header(buf, d.len());
            buf.extend_from_slice(d);
            record.datagrams.push(id);
            wrote = true;
        }
        wrote |= self.write_unacked(buf, max_end, &chunks, record);
        if wrote {
            record.reinjection = self.on_replica_sent(r);
        }
        wrote
    }

    /// Write a head-of-line copy of `chunk` (what of it is still
    /// unacknowledged) and count it as a replica. False if nothing fit.
    pub(super) fn write_head_copy(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        chunk: &StreamChunk,
        record: &mut SentPacket,
    ) -> bool {
        let wrote = self.write_unacked(buf, max_end, std::slice::from_ref(chunk), record);
        // Offered once, sent or not.
        self.streams.on_head_copied(chunk);
        if wrote {
            self.stats.head_copies += 1;
            self.stats.replicas += 1;
            self.stats.extra_replicas += 1;
        }
        wrote
    }

    /// Write into a probe the stream data of the oldest packet in flight
    /// that still has some unacknowledged (RFC 9002 §6.2.4: "Previously
    /// sent data MAY be sent if no new data can be sent"; quinn and
    /// Chromium's QUIC do the same), counted as a replica and in
    /// `probe_copies`. A probe that carries data gets it through even
    /// when every acknowledgement that would declare the original lost
    /// is itself lost. False if nothing fit or nothing was left.
    pub(super) fn write_probe_copy(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &mut SentPacket,
    ) -> bool {
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
        for chunks in candidates {
            if self.write_unacked(buf, max_end, &chunks, record) {
                self.stats.probe_copies += 1;
                self.stats.replicas += 1;
                return true;
            }
        }
        false
    }

    /// Write STREAM frames for the parts of `chunks` not yet acknowledged
    /// that fit before `max_end`, recording them in `record`. False if
    /// none was written.
    fn write_unacked(
        &mut self,
        buf: &mut Vec<u8>,
        max_end: usize,
        chunks: &[StreamChunk],
        record: &mut SentPacket,
    ) -> bool {
        let mut parts = Vec::new();
        let mut wrote = false;
        for chunk in chunks {
            self.streams.unacked_parts(chunk, &mut parts);
            for p in &parts {
                let Some(p) = fitting_part(p, max_end.saturating_sub(buf.len())) else {
                    // Not one byte of it fits: the packet is full.
                    return wrote;
                };
                if self.streams.write_chunk(&p, buf) {
                    record.stream_chunks.push(p);
                    wrote = true;
                }
            }
        }
        wrote
    }
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
