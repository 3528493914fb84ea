//! Spurious-loss detection (RFC 9002 §6.1 lets a sender keep declared-lost
//! packets a while): a 1-RTT packet declared lost and acknowledged later
//! was not lost. Its data counts as delivered, and the recovery policy
//! hears of the acknowledgement with the same fate it heard of the loss, so
//! that it can correct what it recorded.

use std::collections::BTreeMap;

use wire::frame::AckFrame;
use wire::time::Instant;

use super::{Connection, SpaceId};
use crate::policy::{ItemId, PacketFate};
use crate::streams::StreamChunk;

/// How long a lost 1-RTT packet is remembered, in PTOs after its loss: a
/// packet still unacknowledged by then was lost for real (its
/// acknowledgement would come about one RTT after a spurious loss; four
/// PTOs leave room for ACK delay, reordering and PTO backoff). This bounds
/// the history by the packets lost within that window.
pub(crate) const SPURIOUS_LOSS_WINDOW_PTOS: u32 = 4;

/// A 1-RTT packet declared lost, remembered for spurious-loss detection
/// (RFC 9002 §6.1 lets a sender keep lost packets a while for this): if it
/// is acknowledged after all, its data counts as delivered and the policy
/// hears of the acknowledgement with the same fate it heard of the loss.
/// Kept for [`SPURIOUS_LOSS_WINDOW_PTOS`] PTOs after the loss.
#[derive(Clone, Debug)]
pub(crate) struct LostEntry {
    /// The item whose data it carried, if any.
    pub item: Option<ItemId>,
    /// Its round (0 = an original transmission).
    pub round: u32,
    /// What [`RecoveryPolicy::on_packet_lost`](crate::policy::RecoveryPolicy::on_packet_lost)
    /// was told: given again to `on_packet_acked` on a late acknowledgement.
    pub fate: PacketFate,
    pub lost_at: Instant,
    /// The stream data it carried: acknowledged in the stream layer if the
    /// packet turns out to have arrived (its item may be gone by then, with
    /// its replicas cancelled, so nothing else would acknowledge it).
    pub chunks: Vec<StreamChunk>,
    /// The DATAGRAM payloads it carried.
    pub datagrams: Vec<u64>,
}

/// The 1-RTT packets declared lost within the window, by packet number.
#[derive(Debug, Default)]
pub(crate) struct LostHistory {
    pub entries: BTreeMap<u64, LostEntry>,
}

impl LostHistory {
    /// Remember a packet just declared lost.
    pub fn remember(&mut self, pn: u64, entry: LostEntry) {
        self.entries.insert(pn, entry);
    }
}

impl Connection {
    /// Acknowledged packets that we had declared lost: spurious losses.
    pub(super) fn detect_spurious(&mut self, now: Instant, ack: &AckFrame) {
        if self.lost_history.entries.is_empty() {
            return;
        }
        for r in &ack.ranges {
            let found: Vec<u64> = self
                .lost_history
                .entries
                .range(r.clone())
                .map(|(pn, _)| *pn)
                .collect();
            for pn in found {
                if let Some(e) = self.lost_history.entries.remove(&pn) {
                    self.stats.spurious_retransmissions += 1;
                    // Lost, then acknowledged: the policy gets both
                    // callbacks (the seam's promise), so that it can
                    // correct the fate it recorded.
                    let fate = e.fate;
                    self.call_policy(now, |policy, cx| policy.on_packet_acked(cx, &fate));
                    for c in &e.chunks {
                        self.streams.on_chunk_acked(c);
                    }
                    for d in &e.datagrams {
                        self.datagram_store.remove(d);
                    }
                    if let Some(item) = e.item {
                        // The packet got through after all: the round it was
                        // sent in delivered the data (0 for the original),
                        // if it carried all that was left of it.
                        let remaining = self.remaining(item);
                        self.engine.on_late_ack(
                            now,
                            item,
                            e.round,
                            e.fate.replica.map_or(0, |r| r.index),
                            e.fate.time_sent,
                            remaining,
                        );
                    }
                }
            }
        }
        // Forget losses older than the window.
        let horizon = now - self.pto_duration(SpaceId::Data) * SPURIOUS_LOSS_WINDOW_PTOS;
        while let Some((&pn, e)) = self.lost_history.entries.iter().next() {
            if e.lost_at >= horizon {
                break;
            }
            self.lost_history.entries.remove(&pn);
        }
    }
}
