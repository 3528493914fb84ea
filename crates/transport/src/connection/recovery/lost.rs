//! The lost-packet history behind spurious-loss detection (RFC 9002 §6.1
//! lets a sender keep declared-lost packets a while): a 1-RTT packet
//! declared lost and acknowledged later was not lost. Its data counts as
//! delivered, and the recovery policy hears of the acknowledgement with
//! the same fate it heard of the loss, so that it can correct what it
//! recorded ([`super::Recovery::detect_spurious`]).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use wire::time::Instant;

use crate::policy::{ItemId, PacketFate};
use crate::streams::StreamChunk;

/// How long a lost 1-RTT packet is remembered, in PTOs after its loss: a
/// packet still unacknowledged by then was lost for real (its
/// acknowledgement would come about one RTT after a spurious loss; four
/// PTOs leave room for ACK delay, reordering and PTO backoff). This bounds
/// the history by the packets lost within that window.
pub(crate) const SPURIOUS_LOSS_WINDOW_PTOS: u32 = 4;

/// A 1-RTT packet declared lost, remembered for spurious-loss detection:
/// if it is acknowledged after all, its data counts as delivered and the
/// policy hears of the acknowledgement with the same fate it heard of the
/// loss. Kept for [`SPURIOUS_LOSS_WINDOW_PTOS`] PTOs after the loss.
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
    entries: BTreeMap<u64, LostEntry>,
}

impl LostHistory {
    /// Remember a packet just declared lost.
    pub fn remember(&mut self, pn: u64, entry: LostEntry) {
        self.entries.insert(pn, entry);
    }

    /// Whether nothing is remembered (the common case: no loss lately).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Take out the remembered packets numbered within `range`: an
    /// acknowledgement of them arrived.
    pub fn take_range(&mut self, range: RangeInclusive<u64>) -> Vec<(u64, LostEntry)> {
        // Most ranges of an ACK frame lie outside the few packets remembered
        // (below the oldest, mostly): answered without a search of the map.
        // The range searches of every ACK's every range were 2.2% of a run
        // with 1% loss (perf).
        let (Some((&oldest, _)), Some((&newest, _))) = (
            self.entries.first_key_value(),
            self.entries.last_key_value(),
        ) else {
            return Vec::new();
        };
        if *range.end() < oldest || *range.start() > newest {
            return Vec::new();
        }
        let found: Vec<u64> = self.entries.range(range).map(|(pn, _)| *pn).collect();
        found
            .into_iter()
            .filter_map(|pn| self.entries.remove(&pn).map(|e| (pn, e)))
            .collect()
    }

    /// Forget the losses declared before `horizon`.
    pub fn forget_before(&mut self, horizon: Instant) {
        while let Some((&pn, e)) = self.entries.iter().next() {
            if e.lost_at >= horizon {
                break;
            }
            self.entries.remove(&pn);
        }
    }
}
