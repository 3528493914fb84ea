//! ART's Redundancy Adapter: test-and-verification of the redundancy level
//! (ART journal §6.1, Figs. 13–14, eq. 5).
//!
//! The sender keeps a sliding bitmap of the fates of the last `L_queue`
//! replicas (1 = lost again, 0 = acknowledged); `p_r` is the share of ones.
//! Each retransmission round n has its own level R_n, starting at 1 (or at
//! OR3's 2n − 1, as the authors' artifact does: [`StartLevels`]). When data
//! enters round n the adapter computes the expected number of replicas that
//! get through, `E = R_n · (1 − p_r)` (eq. 5), and steps R_n toward E ≈ 1:
//! E < 1 → R_n + 1, E ≥ 2 → R_n − 1 (never below 1), otherwise unchanged.
//!
//! Choices where the paper is vague (also in docs/recovery.md):
//! - **Order** (Fig. 14's flow): E is computed with the current R_n, R_n is
//!   adjusted, and the *adjusted* R_n is the number of replicas sent for this
//!   loss.
//! - **Partly filled queue**: `p_r = c / len` over the fates recorded so far
//!   (the paper's `c / L_queue` assumes a full queue); an empty queue gives
//!   `p_r = 0`.
//! - **Spurious losses**: a replica declared lost and acknowledged later had
//!   its "1" turned into a "0" (it was delivered after all) instead of
//!   appending a second entry for the same packet.
//! - **R_max**: R_n is capped at a configured `r_max` (default 8, the largest
//!   level the paper evaluates in Fig. 12), itself at most the transport's
//!   `MAX_REPLICAS`.
//! - **Rounds tracked**: rounds 1..=[`TRACKED_ROUNDS`] have their own level;
//!   later rounds (which need dozens of consecutive replica losses) share the
//!   last one, so memory stays bounded whatever round number arrives.
//!
//! The arithmetic is exact: `E < 1 ⇔ R·(len − c) < len` and
//! `E ≥ 2 ⇔ R·(len − c) ≥ 2·len`, in integers.

use std::collections::VecDeque;

/// Rounds with a level of their own; later rounds share the last level.
pub const TRACKED_ROUNDS: usize = 64;

/// The sliding bitmap queue of replica fates (ART journal §6.1, Fig. 13).
#[derive(Clone, Debug)]
pub struct ReplicaWindow {
    capacity: usize,
    /// (packet number, lost) of the newest `capacity` replica fates.
    fates: VecDeque<(u64, bool)>,
    ones: usize,
}

impl ReplicaWindow {
    /// A window of the last `l_queue` fates (at least 1).
    pub fn new(l_queue: usize) -> Self {
        let capacity = l_queue.max(1);
        ReplicaWindow {
            capacity,
            fates: VecDeque::with_capacity(capacity),
            ones: 0,
        }
    }

    /// Record a replica (packet `pn`) declared lost: a "1".
    pub fn on_lost(&mut self, pn: u64) {
        self.push(pn, true);
    }

    /// Record an acknowledged replica: a "0". A replica still in the window
    /// as lost (a spurious loss) is corrected in place.
    pub fn on_acked(&mut self, pn: u64) {
        if let Some(entry) = self.fates.iter_mut().find(|(p, lost)| *p == pn && *lost) {
            entry.1 = false;
            self.ones = self.ones.saturating_sub(1);
            return;
        }
        self.push(pn, false);
    }

    fn push(&mut self, pn: u64, lost: bool) {
        if self.fates.len() >= self.capacity {
            if let Some((_, old)) = self.fates.pop_front() {
                if old {
                    self.ones = self.ones.saturating_sub(1);
                }
            }
        }
        self.fates.push_back((pn, lost));
        if lost {
            self.ones += 1;
        }
    }

    /// Fates recorded (at most `L_queue`).
    pub fn len(&self) -> usize {
        self.fates.len()
    }

    /// True before any replica fate is known.
    pub fn is_empty(&self) -> bool {
        self.fates.is_empty()
    }

    /// Lost replicas in the window (the paper's `c`).
    pub fn ones(&self) -> usize {
        self.ones
    }

    /// The replica loss rate `p_r` (0 for an empty window).
    pub fn loss_rate(&self) -> f64 {
        if self.fates.is_empty() {
            return 0.0;
        }
        self.ones as f64 / self.fates.len() as f64
    }
}

/// The level R_n each round has before its first adaptation step.
///
/// Exists because the paper does not say where R_n starts, and the choice
/// decides what the rarely visited later rounds send: round n ≥ 2 sees one
/// adaptation step per item that reaches it, so its level stays near its
/// start for most of a connection.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StartLevels {
    /// R_n = 1 in every round: start as plain QUIC (our default, the
    /// cheapest start; the reading of the paper).
    #[default]
    One,
    /// R_n = 2n − 1: start as OR3. The authors' artifact (litonglab/quic-art,
    /// `sc_rounds_map[n] = 2*n - 1` in `lsquic_send_ctl.c`) initialises its
    /// per-round table this way.
    Or3,
}

impl StartLevels {
    /// The starting level of `round` (1-based; 0 is read as 1), capped at
    /// `r_max`.
    pub fn level(self, round: u32, r_max: u32) -> u32 {
        let n = round.max(1);
        let start = match self {
            StartLevels::One => 1,
            StartLevels::Or3 => n.saturating_mul(2).saturating_sub(1),
        };
        start.clamp(1, r_max.max(1))
    }

    /// The name used in scheme descriptions (`one`, `or3`).
    pub fn name(self) -> &'static str {
        match self {
            StartLevels::One => "one",
            StartLevels::Or3 => "or3",
        }
    }
}

/// The test-and-verification Redundancy Adapter: per-round levels R_n driven
/// by the replica loss rate (ART journal §6.1, eq. 5).
#[derive(Clone, Debug)]
pub struct RedundancyAdapter {
    window: ReplicaWindow,
    /// `levels[n - 1]` = R_n; grown on demand up to [`TRACKED_ROUNDS`].
    levels: Vec<u32>,
    r_max: u32,
    start: StartLevels,
}

impl RedundancyAdapter {
    /// An adapter with a window of `l_queue` replica fates and levels capped
    /// at `r_max` (at least 1), every R_n starting at 1.
    pub fn new(l_queue: usize, r_max: u32) -> Self {
        Self::with_start(l_queue, r_max, StartLevels::One)
    }

    /// As [`RedundancyAdapter::new`], with the levels starting at `start`.
    pub fn with_start(l_queue: usize, r_max: u32, start: StartLevels) -> Self {
        RedundancyAdapter {
            window: ReplicaWindow::new(l_queue),
            levels: Vec::new(),
            r_max: r_max.max(1),
            start,
        }
    }

    /// The replica fate window.
    pub fn window(&self) -> &ReplicaWindow {
        &self.window
    }

    /// A replica was acknowledged.
    pub fn on_replica_acked(&mut self, pn: u64) {
        self.window.on_acked(pn);
    }

    /// A replica was declared lost.
    pub fn on_replica_lost(&mut self, pn: u64) {
        self.window.on_lost(pn);
    }

    /// The current R_n of `round`, without adjusting it (its start level if
    /// never used).
    pub fn level(&self, round: u32) -> u32 {
        self.levels
            .get(slot(round))
            .copied()
            .unwrap_or_else(|| self.start.level(slot_round(round), self.r_max))
    }

    /// Data enters `round`: compute E with the current R_n (eq. 5), step R_n
    /// (Fig. 14), and return the adjusted R_n: the replicas to send.
    pub fn on_data_lost(&mut self, round: u32) -> u32 {
        let i = slot(round);
        while self.levels.len() <= i {
            let n = self.levels.len() as u32 + 1;
            self.levels.push(self.start.level(n, self.r_max));
        }
        let len = self.window.len() as u64;
        let delivered = len - self.window.ones() as u64;
        // Entry exists: resized just above.
        let r = &mut self.levels[i];
        let level = u64::from(*r);
        if len == 0 {
            // p_r = 0, so E = R_n.
            if level >= 2 {
                *r -= 1;
            }
        } else if level * delivered < len {
            // E < 1: too few replicas expected to get through.
            *r = r.saturating_add(1);
        } else if level * delivered >= 2 * len && *r > 1 {
            // E ≥ 2: at least one replica too many.
            *r -= 1;
        }
        *r = (*r).clamp(1, self.r_max);
        *r
    }
}

/// Index into the level table for a 1-based round (0 is read as 1).
fn slot(round: u32) -> usize {
    (round.max(1) as usize).min(TRACKED_ROUNDS) - 1
}

/// The round whose level `round` uses (rounds past [`TRACKED_ROUNDS`] share
/// the last one).
fn slot_round(round: u32) -> u32 {
    slot(round) as u32 + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn window_slides_at_l_queue() {
        let mut w = ReplicaWindow::new(3);
        assert_eq!(w.loss_rate(), 0.0);
        w.on_lost(1);
        w.on_lost(2);
        w.on_acked(3);
        assert_eq!((w.len(), w.ones()), (3, 2));
        // A fourth fate pushes out the oldest "1".
        w.on_acked(4);
        assert_eq!((w.len(), w.ones()), (3, 1));
        w.on_acked(5);
        w.on_acked(6);
        assert_eq!((w.len(), w.ones()), (3, 0));
        w.on_lost(7);
        assert!((w.loss_rate() - 1.0 / 3.0).abs() < 1e-12);
    }

    #[test]
    fn spurious_loss_is_corrected_in_place() {
        let mut w = ReplicaWindow::new(10);
        w.on_lost(5);
        w.on_lost(6);
        w.on_acked(5);
        assert_eq!((w.len(), w.ones()), (2, 1));
        // An ack for a packet not in the window is a new "0".
        w.on_acked(9);
        assert_eq!((w.len(), w.ones()), (3, 1));
    }

    #[test]
    fn e_below_one_raises() {
        let mut a = RedundancyAdapter::new(10, 8);
        a.on_replica_lost(1);
        // p_r = 1: E = 0 < 1 each time, so R_1 climbs by one per loss.
        assert_eq!(a.on_data_lost(1), 2);
        assert_eq!(a.on_data_lost(1), 3);
        // Half the replicas lost: E = 3 · 0.5 = 1.5, unchanged.
        a.on_replica_acked(2);
        assert_eq!(a.on_data_lost(1), 3);
    }

    #[test]
    fn e_at_least_two_lowers_but_never_below_one() {
        let mut a = RedundancyAdapter::new(10, 8);
        a.on_replica_lost(1);
        for _ in 0..3 {
            a.on_data_lost(1);
        }
        assert_eq!(a.level(1), 4);
        // Window of one "1" and nine "0"s: p_r = 0.1.
        for pn in 2..=10 {
            a.on_replica_acked(pn);
        }
        // E = 4·0.9 = 3.6 ≥ 2 → 3; E = 2.7 → 2; E = 1.8 → stays 2.
        assert_eq!(a.on_data_lost(1), 3);
        assert_eq!(a.on_data_lost(1), 2);
        assert_eq!(a.on_data_lost(1), 2);
        // All acknowledged: p_r = 0, E = R: 2 → 1, then stays 1.
        a.on_replica_acked(11);
        assert_eq!(a.on_data_lost(1), 1);
        assert_eq!(a.on_data_lost(1), 1);
    }

    #[test]
    fn empty_window_keeps_level_one() {
        let mut a = RedundancyAdapter::new(10, 8);
        assert_eq!(a.on_data_lost(1), 1);
        assert_eq!(a.on_data_lost(2), 1);
    }

    #[test]
    fn per_round_levels_are_independent() {
        let mut a = RedundancyAdapter::new(10, 8);
        a.on_replica_lost(1);
        assert_eq!(a.on_data_lost(2), 2);
        assert_eq!(a.on_data_lost(2), 3);
        // Round 1 has not moved: it starts at 1 and steps once.
        assert_eq!(a.level(1), 1);
        assert_eq!(a.on_data_lost(1), 2);
        assert_eq!(a.level(2), 3);
        assert_eq!(a.level(3), 1);
    }

    #[test]
    fn or3_start_levels_adapt_from_two_n_minus_one() {
        let mut a = RedundancyAdapter::with_start(10, 8, StartLevels::Or3);
        assert_eq!((a.level(1), a.level(2), a.level(3)), (1, 3, 5));
        // Capped at r_max, and rounds past the table share the last level.
        assert_eq!(a.level(5), 8);
        assert_eq!(a.level(u32::MAX), 8);
        // Replicas all delivered (p_r = 0): E = R_n, so 3 → 2 on round 2's
        // first loss, and round 3 is untouched.
        for pn in 0..10 {
            a.on_replica_acked(pn);
        }
        assert_eq!(a.on_data_lost(2), 2);
        assert_eq!(a.level(3), 5);
        // Every replica lost (p_r = 1): E = 0 < 1 raises from the start level.
        for pn in 10..20 {
            a.on_replica_lost(pn);
        }
        assert_eq!(a.on_data_lost(3), 6);
    }

    #[test]
    fn capped_at_r_max_and_huge_rounds_share_a_slot() {
        let mut a = RedundancyAdapter::new(1, 4);
        a.on_replica_lost(1);
        for _ in 0..10 {
            a.on_data_lost(u32::MAX);
        }
        assert_eq!(a.level(u32::MAX), 4);
        assert_eq!(a.level(TRACKED_ROUNDS as u32), 4);
        assert_eq!(a.level(1), 1);
        assert_eq!(a.levels.len(), TRACKED_ROUNDS);
    }

    proptest! {
        /// Whatever the fates and rounds: 1 ≤ R ≤ r_max, one step at most, and
        /// the step has the sign eq. 5 asks for.
        #[test]
        fn steps_follow_eq5(
            l_queue in 1usize..20,
            r_max in 1u32..=32,
            ops in proptest::collection::vec((any::<u8>(), 0u32..100), 1..200),
        ) {
            let mut a = RedundancyAdapter::new(l_queue, r_max);
            let mut pn = 0u64;
            for (op, round) in ops {
                match op % 3 {
                    0 => { pn += 1; a.on_replica_lost(pn) }
                    1 => { pn += 1; a.on_replica_acked(pn) }
                    _ => {
                        let before = a.level(round);
                        let p_r = a.window().loss_rate();
                        let e = f64::from(before) * (1.0 - p_r);
                        let after = a.on_data_lost(round);
                        prop_assert!((1..=r_max).contains(&after));
                        let want = if e < 1.0 - 1e-9 { before + 1 } else if e >= 2.0 - 1e-9 { before - 1 } else { before };
                        prop_assert_eq!(after, want.clamp(1, r_max));
                        prop_assert!(a.window().len() <= l_queue);
                    }
                }
            }
        }
    }
}
