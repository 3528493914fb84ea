//! The windowed maximum filter behind BBR's bottleneck-bandwidth estimate
//! (draft-cardwell-iccrg-bbr-congestion-control-00 §4.1.1.3: `BtlBw` is the
//! maximum delivery rate over the last 10 round trips).

use std::collections::VecDeque;

/// A windowed maximum over round trips: the largest value seen in the last
/// `window` rounds. Kept as a deque of (round, value) with strictly
/// increasing rounds and strictly decreasing values, so it holds at most
/// `window + 1` entries.
#[derive(Clone, Debug)]
pub(super) struct MaxFilter {
    window: u64,
    samples: VecDeque<(u64, u64)>,
}

impl MaxFilter {
    pub(super) fn new(window: u64) -> Self {
        MaxFilter {
            window,
            samples: VecDeque::new(),
        }
    }

    /// Adds `value` observed in `round` and returns the windowed maximum.
    pub(super) fn update(&mut self, round: u64, value: u64) -> u64 {
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| round.saturating_sub(r) >= self.window)
        {
            self.samples.pop_front();
        }
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        // An entry of the same round that is larger dominates the new one.
        if self.samples.back().is_none_or(|&(r, _)| r < round) {
            self.samples.push_back((round, value));
        }
        self.best()
    }

    pub(super) fn best(&self) -> u64 {
        self.samples.front().map_or(0, |&(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn max_filter_keeps_the_window_maximum() {
        let mut f = MaxFilter::new(10);
        assert_eq!(f.update(1, 100), 100);
        assert_eq!(f.update(1, 50), 100);
        assert_eq!(f.update(5, 80), 100);
        assert_eq!(f.update(10, 70), 100);
        // Round 11: the round-1 sample is 10 rounds old and expires.
        assert_eq!(f.update(11, 60), 80);
        assert_eq!(f.update(15, 10), 70);
        assert_eq!(f.update(20, 5), 60);
        assert_eq!(f.update(40, 1), 1);
        // Bounded: one entry per round at most.
        for i in 0..1000 {
            f.update(50, 1000 - i);
        }
        assert!(f.samples.len() <= 11);
        for r in 60..200 {
            f.update(r, 10_000 - r);
            assert!(f.samples.len() <= 11);
        }
    }

    proptest! {
        /// The filter equals a brute-force maximum over the samples of the
        /// last `window` rounds, for any non-decreasing round sequence.
        #[test]
        fn matches_brute_force(
            window in 1u64..12,
            steps in proptest::collection::vec((0u64..3, 0u64..1000), 1..300),
        ) {
            let mut f = MaxFilter::new(window);
            let mut round = 0u64;
            let mut all: Vec<(u64, u64)> = Vec::new();
            for (advance, value) in steps {
                round += advance;
                all.push((round, value));
                let got = f.update(round, value);
                let expected = all
                    .iter()
                    .filter(|&&(r, _)| round - r < window)
                    .map(|&(_, v)| v)
                    .max()
                    .unwrap_or(0);
                prop_assert_eq!(got, expected);
                prop_assert!(f.samples.len() as u64 <= window + 1);
            }
        }
    }
}
