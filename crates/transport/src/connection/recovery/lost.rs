//! The lost-packet history behind spurious-loss detection (RFC 9002 §6.1
//! lets a sender keep declared-lost packets a while): a 1-RTT packet
//! declared lost and acknowledged later was not lost. Its data counts as
//! delivered, and the recovery policy hears of the acknowledgement with
//! the same fate it heard of the loss, so that it can correct what it
//! recorded ([`super::Recovery::detect_spurious`]).

use std::collections::VecDeque;
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
///
/// Kept in a deque sorted by packet number rather than a tree: packets are
/// declared lost in nearly ascending order (appended at the back), forgotten
/// oldest first (popped at the front), and every ACK frame is checked
/// against the entries between its lowest and highest range, which a walk
/// along a sorted deque does in a few instructions per entry (through the
/// tree it was about 1% of a lossy bulk transfer's instructions, callgrind).
/// Taking an entry out of the middle (a spurious loss) costs a shift, and is
/// rare.
#[derive(Debug, Default)]
pub(crate) struct LostHistory {
    entries: VecDeque<(u64, LostEntry)>,
}

impl LostHistory {
    /// Remember a packet just declared lost.
    pub fn remember(&mut self, pn: u64, entry: LostEntry) {
        let at = match self.entries.back() {
            Some(&(last, _)) if last < pn => self.entries.len(),
            _ => self.entries.partition_point(|&(p, _)| p < pn),
        };
        match self.entries.get_mut(at) {
            // Declared lost again: the newer record replaces the older.
            Some(slot) if slot.0 == pn => slot.1 = entry,
            _ => self.entries.insert(at, (pn, entry)),
        }
    }

    /// Whether nothing is remembered (the common case: no loss lately).
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Where the entries numbered `range` sit.
    fn span(&self, range: &RangeInclusive<u64>) -> core::ops::Range<usize> {
        let from = self.entries.partition_point(|&(p, _)| p < *range.start());
        let to = self.entries.partition_point(|&(p, _)| p <= *range.end());
        from..to.max(from)
    }

    /// Take out the remembered packets numbered within `range`: an
    /// acknowledgement of them arrived.
    pub fn take_range(&mut self, range: RangeInclusive<u64>) -> Vec<(u64, LostEntry)> {
        let span = self.span(&range);
        self.entries.drain(span).collect()
    }

    /// Take out the remembered packets that an ACK frame's `ranges`
    /// acknowledge, in the order [`LostHistory::take_range`] on each range
    /// in turn would give them. An ACK frame's ranges descend and are
    /// disjoint (the decoder checks): then one walk over the remembered
    /// packets between the lowest and the highest range, beside a walk up
    /// the ranges, replaces a search per range (with 1% loss an ACK carries
    /// many ranges, and those searches were 4% of a run, perf). Other
    /// ranges are taken one by one.
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
        // (index of the range holding it, index of the entry): the ranges
        // walked upwards (from the last) beside the entries.
        let mut hits: Vec<(usize, usize)> = Vec::new();
        let mut k = ranges.len();
        let span = self.span(&(*lowest.start()..=*highest.end()));
        for (at, &(pn, _)) in self.entries.range(span.clone()).enumerate() {
            // Skip the ranges that end below `pn`.
            while let Some(r) = k.checked_sub(1).and_then(|i| ranges.get(i)) {
                if *r.end() >= pn {
                    break;
                }
                k -= 1;
            }
            let Some(i) = k.checked_sub(1) else {
                break;
            };
            if ranges.get(i).is_some_and(|r| r.contains(&pn)) {
                hits.push((i, span.start + at));
            }
        }
        if hits.is_empty() {
            return Vec::new();
        }
        // Taken out highest index first, so the others stay where they are;
        // then handed out in range order, ascending within each.
        let mut taken: Vec<(usize, u64, LostEntry)> = Vec::with_capacity(hits.len());
        for &(i, at) in hits.iter().rev() {
            if let Some((pn, e)) = self.entries.remove(at) {
                taken.push((i, pn, e));
            }
        }
        taken.sort_unstable_by_key(|&(i, pn, _)| (i, pn));
        taken.into_iter().map(|(_, pn, e)| (pn, e)).collect()
    }

    /// Forget the losses declared before `horizon`.
    pub fn forget_before(&mut self, horizon: Instant) {
        while self
            .entries
            .front()
            .is_some_and(|(_, e)| e.lost_at < horizon)
        {
            self.entries.pop_front();
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
                let left_fast: Vec<u64> = fast.entries.iter().map(|&(pn, _)| pn).collect();
                let left_slow: Vec<u64> = slow.entries.iter().map(|&(pn, _)| pn).collect();
                prop_assert_eq!(left_fast, left_slow);
            }
        }
    }
}
