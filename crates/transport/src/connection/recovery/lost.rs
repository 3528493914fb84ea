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
        let found: Vec<u64> = self.entries.range(range).map(|(pn, _)| *pn).collect();
        found
            .into_iter()
            .filter_map(|pn| self.entries.remove(&pn).map(|e| (pn, e)))
            .collect()
    }

    /// Take out the remembered packets that an ACK frame's `ranges`
    /// acknowledge, in the order [`LostHistory::take_range`] on each range
    /// in turn would give them. An ACK frame's ranges descend and are
    /// disjoint (the decoder checks): then one walk over the remembered
    /// packets between the lowest and the highest range, each placed by a
    /// binary search, replaces a search of the map per range (with 1% loss
    /// an ACK carries many ranges, and those searches were 4% of a run,
    /// perf). Other ranges are taken one by one.
    pub fn take_acked(&mut self, ranges: &[RangeInclusive<u64>]) -> Vec<(u64, LostEntry)> {
        let descending = ranges.windows(2).all(|w| match w {
            [higher, lower] => lower.end() < higher.start(),
            _ => true,
        });
        if !descending {
            return ranges
                .iter()
                .flat_map(|r| self.take_range(r.clone()))
                .collect();
        }
        let (Some(lowest), Some(highest)) = (ranges.last(), ranges.first()) else {
            return Vec::new();
        };
        if self.entries.is_empty() || lowest.start() > highest.end() {
            return Vec::new();
        }
        // (index of the range holding it, packet number): sorted, the
        // order of the ranges, then ascending within each.
        let mut hits: Vec<(usize, u64)> = self
            .entries
            .range(*lowest.start()..=*highest.end())
            .filter_map(|(&pn, _)| {
                let i = ranges.partition_point(|r| *r.start() > pn);
                ranges.get(i).filter(|r| r.contains(&pn)).map(|_| (i, pn))
            })
            .collect();
        hits.sort_unstable();
        hits.into_iter()
            .filter_map(|(_, pn)| self.entries.remove(&pn).map(|e| (pn, e)))
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn entry(pn: u64) -> LostEntry {
        LostEntry {
            item: None,
            round: 0,
            fate: PacketFate {
                pn,
                time_sent: Instant::ZERO,
                size: 1200,
                tag: None,
                replica: None,
                carries_new_data: true,
            },
            lost_at: Instant::ZERO,
            chunks: Vec::new(),
            datagrams: Vec::new(),
        }
    }

    fn history(pns: &[u64]) -> LostHistory {
        let mut h = LostHistory::default();
        for &pn in pns {
            h.remember(pn, entry(pn));
        }
        h
    }

    proptest! {
        /// take_acked takes what take_range on each range in turn takes, in
        /// the same order, and leaves the same history behind: for an ACK
        /// frame's descending disjoint ranges and for any other list.
        #[test]
        fn take_acked_is_take_range_on_each_range(
            pns in proptest::collection::btree_set(0u64..200, 0..40),
            cuts in proptest::collection::btree_set(0u64..220, 0..16),
            shuffle in proptest::collection::vec((0u64..220, 0u64..20), 0..6),
        ) {
            let pns: Vec<u64> = pns.into_iter().collect();
            // Descending, disjoint ranges from sorted cut points.
            let cuts: Vec<u64> = cuts.into_iter().collect();
            let mut frame: Vec<RangeInclusive<u64>> = cuts
                .chunks(2)
                .filter_map(|c| match c {
                    [a, b] => Some(*a..=*b),
                    _ => None,
                })
                .collect();
            frame.reverse();
            let arbitrary: Vec<RangeInclusive<u64>> =
                shuffle.iter().map(|&(a, len)| a..=a + len).collect();
            for ranges in [frame, arbitrary] {
                let mut fast = history(&pns);
                let mut slow = history(&pns);
                let got: Vec<u64> = fast.take_acked(&ranges).into_iter().map(|(pn, _)| pn).collect();
                let want: Vec<u64> = ranges
                    .iter()
                    .flat_map(|r| slow.take_range(r.clone()))
                    .map(|(pn, _)| pn)
                    .collect();
                prop_assert_eq!(&got, &want);
                let left_fast: Vec<u64> = fast.entries.keys().copied().collect();
                let left_slow: Vec<u64> = slow.entries.keys().copied().collect();
                prop_assert_eq!(left_fast, left_slow);
            }
        }
    }
}
