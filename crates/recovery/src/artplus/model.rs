//! `art+`'s loss model: the replica loss rate p_r over a long history, the
//! level it implies for a residual-loss target, and the loss-burst length
//! distribution.
//!
//! ART steps each round's level by ±1 from p_r over 10 replica fates
//! (journal §6.1), so at 5% loss its window is clean most of the time and
//! the level falls back to 1 (docs/reproduce.md, Fig. 24). Here p_r is
//! estimated over hundreds of fates, shrunk towards the loss rate of all
//! packets while few replica fates are known, and the level is the smallest
//! R whose residual loss p_r^R meets a target: the model rather than a step.

use crate::art::ReplicaWindow;

/// Pseudo-fates of the prior: the packet loss rate counts as this many
/// replica fates in p_r's estimate.
const PRIOR_FATES: f64 = 20.0;

/// Weight of one packet fate in the packet loss rate's moving average
/// (about the last 512 packets).
const PACKET_WEIGHT: f64 = 1.0 / 512.0;

/// The replica loss rate p_r and the smallest level meeting a target.
#[derive(Clone, Debug)]
pub struct LossModel {
    replicas: ReplicaWindow,
    packet_loss: f64,
    packets: u64,
}

impl LossModel {
    /// A model over the last `history` replica fates (at least 1).
    pub fn new(history: usize) -> Self {
        LossModel {
            replicas: ReplicaWindow::new(history),
            packet_loss: 0.0,
            packets: 0,
        }
    }

    /// A packet's fate: every packet feeds the packet loss rate (the
    /// prior), replicas also the replica window (by packet number, so a
    /// spurious loss acknowledged later is corrected in place).
    pub fn on_fate(&mut self, pn: u64, replica: bool, lost: bool) {
        self.packets = self.packets.saturating_add(1);
        // The mean of the first packets, then a moving average.
        let w = (1.0 / self.packets as f64).max(PACKET_WEIGHT);
        let x = if lost { 1.0 } else { 0.0 };
        self.packet_loss += w * (x - self.packet_loss);
        if replica {
            if lost {
                self.replicas.on_lost(pn);
            } else {
                self.replicas.on_acked(pn);
            }
        }
    }

    /// The loss rate of all packets (moving average).
    pub fn packet_loss(&self) -> f64 {
        self.packet_loss
    }

    /// Replica fates held.
    pub fn replica_fates(&self) -> usize {
        self.replicas.len()
    }

    /// p_r: lost replicas over replica fates, with the packet loss rate
    /// counted as `PRIOR_FATES` fates: `(c + k·p) / (n + k)`.
    pub fn replica_loss(&self) -> f64 {
        let c = self.replicas.ones() as f64;
        let n = self.replicas.len() as f64;
        ((c + PRIOR_FATES * self.packet_loss) / (n + PRIOR_FATES)).clamp(0.0, 1.0)
    }

    /// The smallest R in `1..=r_max` with `p^R ≤ target`, or `r_max`.
    pub fn level_for(p: f64, target: f64, r_max: u32) -> u32 {
        let mut residual = p;
        for r in 1..r_max.max(1) {
            if residual <= target {
                return r;
            }
            residual *= p;
        }
        r_max.max(1)
    }
}

/// Largest burst length the histogram tells apart; longer ones count here.
pub const MAX_BURST_BIN: usize = 64;

/// Decay applied to the histogram per finished burst (about the last 256
/// bursts weigh).
const BURST_DECAY: f64 = 1.0 - 1.0 / 256.0;

/// The distribution of loss-burst lengths: runs of consecutive packets (in
/// send order) declared lost, with older bursts decaying. ART uses only the
/// longest recent burst, B_max (§6.2), so one long outage sets its escape
/// space for W RTTs; a quantile of the distribution follows the bursts
/// that most losses belong to.
#[derive(Clone, Debug)]
pub struct BurstHistogram {
    /// Decayed count of finished bursts per length (index = length, 0 unused).
    counts: [f64; MAX_BURST_BIN + 1],
    /// The burst still growing: its last send index and its length.
    open: Option<(u64, u64)>,
}

impl Default for BurstHistogram {
    fn default() -> Self {
        BurstHistogram {
            counts: [0.0; MAX_BURST_BIN + 1],
            open: None,
        }
    }
}

impl BurstHistogram {
    /// A lost packet with send index `index`: extends the open burst when it
    /// directly follows it, otherwise closes it and opens a new one.
    pub fn on_lost(&mut self, index: u64) {
        match self.open {
            Some((last, len)) if index == last.saturating_add(1) => {
                self.open = Some((index, len.saturating_add(1)));
            }
            Some((last, _)) if index == last => {}
            _ => {
                self.close();
                self.open = Some((index, 1));
            }
        }
    }

    fn close(&mut self) {
        if let Some((_, len)) = self.open.take() {
            for c in &mut self.counts {
                *c *= BURST_DECAY;
            }
            let bin = (len as usize).min(MAX_BURST_BIN);
            self.counts[bin] += 1.0;
        }
    }

    /// The burst length that a share `q` of lost packets' bursts do not
    /// exceed (weighted by packets: a burst of 8 holds 8 losses). 0 with no
    /// loss seen; the open burst counts as finished.
    pub fn quantile(&self, q: f64) -> u64 {
        let mut weights = self.counts;
        if let Some((_, len)) = self.open {
            weights[(len as usize).min(MAX_BURST_BIN)] += 1.0;
        }
        let total: f64 = weights
            .iter()
            .enumerate()
            .map(|(len, c)| len as f64 * c)
            .sum();
        if total <= 0.0 {
            return 0;
        }
        let goal = q.clamp(0.0, 1.0) * total;
        let mut acc = 0.0;
        for (len, c) in weights.iter().enumerate().skip(1) {
            acc += len as f64 * c;
            if acc >= goal - 1e-9 {
                return len as u64;
            }
        }
        MAX_BURST_BIN as u64
    }
}
