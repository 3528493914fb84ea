//! Per-connection counters (quinn's `ConnectionStats` shape): cheap to keep,
//! read by `artq` and the lab at any time.

use serde::Serialize;
use wire::time::Duration;

use crate::events::RecoveryRecord;

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Counters and gauges of one connection. Sender-side loss recovery figures
/// follow DESIGN.md's metric names.
#[derive(Clone, Debug, Default, Serialize)]
#[non_exhaustive]
pub struct ConnectionStats {
    /// UDP datagrams sent.
    pub datagrams_sent: u64,
    /// UDP datagrams received.
    pub datagrams_received: u64,
    /// QUIC packets sent (all spaces).
    pub packets_sent: u64,
    /// QUIC packets received and successfully decrypted.
    pub packets_received: u64,
    /// Bytes sent in UDP payloads.
    pub bytes_sent: u64,
    /// Bytes received in UDP payloads.
    pub bytes_received: u64,
    /// Packets dropped on receipt (undecryptable, duplicate, unknown keys).
    pub packets_dropped: u64,
    /// 1-RTT packets carrying first transmissions of stream data
    /// (DESIGN.md `data_packets`).
    pub data_packets: u64,
    /// Stream payload bytes sent for the first time.
    pub stream_bytes_sent: u64,
    /// Packets declared lost, replicas included (`lost_packets`).
    pub lost_packets: u64,
    /// Packets sent to recover lost stream data: every replica counts
    /// (`replicas`, the paper's redundancy cost).
    pub replicas: u64,
    /// Replicas beyond one per round (`extra_replicas`).
    pub extra_replicas: u64,
    /// Replicas sent because the policy asked for them outside a loss
    /// decision (AutoRec's reinjections, policy.rs "Reinjection and
    /// off-mode"); they are also counted in `replicas` and `extra_replicas`.
    pub reinjections: u64,
    /// Copies of unacknowledged data at the head of line sent while flow
    /// control blocked the sender, before any loss was declared
    /// ([`crate::policy::RecoveryPolicy::on_flow_blocked`]); also counted
    /// in `replicas` and `extra_replicas`, so redundancy cost stays whole.
    /// Left out of the JSON when 0, so runs of schemes that never copy
    /// read as before.
    #[serde(skip_serializing_if = "is_zero")]
    pub head_copies: u64,
    /// Probes that carried a copy of the oldest stream data in flight
    /// because the probe timeout found no new data to send (RFC 9002
    /// §6.2.4); also counted in `replicas` (a retransmission), not in
    /// `extra_replicas` (no loss was declared). Left out of the JSON when 0.
    #[serde(skip_serializing_if = "is_zero")]
    pub probe_copies: u64,
    /// DATAGRAM payloads given up by the policy after a loss.
    pub datagrams_dropped: u64,
    /// FEC repair packets sent (sender, `fec:K`).
    pub fec_repairs: u64,
    /// Packets rebuilt from FEC repair symbols (receiver).
    pub fec_recovered: u64,
    /// Packets declared lost that were acknowledged later.
    pub spurious_retransmissions: u64,
    /// The per-item recovery figures (`n_hist`, `n_max`, `k_max`, ...),
    /// flattened into this struct's JSON.
    #[serde(flatten)]
    pub recovery: RecoveryTally,
    /// Times the peer moved to a new address and we followed (RFC 9000 §9;
    /// NAT rebindings included).
    pub path_changes: u64,
    /// Validations of a peer's new address that timed out (we went back
    /// to the last validated one, RFC 9000 §9.3.2).
    pub path_validations_failed: u64,
    /// Packets the peer reported as CE-marked in its ACK frames (RFC 9000
    /// §13.4): the path's queues signalled congestion without dropping.
    pub ecn_ce_reported: u64,
    /// Our ECN marking failed validation and stopped (§13.4.2).
    pub ecn_validation_failed: bool,
    /// Datagrams we sent marked ECT(0).
    pub ecn_marked_sent: u64,
    /// Client: 0-RTT packets sent (early data of a resumed session).
    pub zero_rtt_packets_sent: u64,
    /// Server: 0-RTT packets read (early data accepted and decrypted).
    pub zero_rtt_packets_received: u64,
    /// Congestion events (window reductions).
    pub congestion_events: u64,
    /// PTO expirations.
    pub pto_count: u64,
    /// Current congestion window, bytes.
    pub cwnd: u64,
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Minimum RTT.
    pub min_rtt: Duration,
    /// Latest RTT sample.
    pub latest_rtt: Duration,
    /// Bytes in flight now.
    pub bytes_in_flight: u64,
}

/// The papers' per-item loss-recovery figures (DESIGN.md `n`, `k`), computed
/// in one place over the retransmission engine's records.
///
/// Exists so that every reader (the connection's [`ConnectionStats`], hence
/// `artq serve`'s connection summary, and the lab's `artq sim` metrics)
/// shows numbers computed by the same code from the same records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryTally {
    /// Lost-data items whose data eventually got through.
    pub recovered_items: u64,
    /// Lost-data items that left recovery undelivered (stream reset, data
    /// dropped by the policy, connection closed).
    pub abandoned_items: u64,
    /// Largest retransmission round that delivered data (`n_max`).
    pub n_max: u32,
    /// Largest number of retransmissions of one delivered item (`k_max`).
    pub k_max: u32,
    /// `n_hist[n]`: items delivered in round n (0 = the original got through
    /// after all, i.e. a spurious loss).
    pub n_hist: Vec<u64>,
}

impl RecoveryTally {
    /// Count one item that left recovery.
    pub fn observe(&mut self, record: &RecoveryRecord) {
        let Some(round) = record.delivered_round() else {
            self.abandoned_items += 1;
            return;
        };
        let idx = round as usize;
        if self.n_hist.len() <= idx {
            self.n_hist.resize(idx + 1, 0);
        }
        self.n_hist[idx] += 1;
        self.n_max = self.n_max.max(round);
        self.k_max = self.k_max.max(record.retransmissions);
        self.recovered_items += 1;
    }

    /// Share of delivered items that needed two rounds or more (AutoRec's
    /// recovery deterioration rate); 0 when nothing was delivered.
    pub fn deterioration_rate(&self) -> f64 {
        let deteriorated: u64 = self.n_hist.iter().skip(2).sum();
        if self.recovered_items == 0 {
            0.0
        } else {
            deteriorated as f64 / self.recovered_items as f64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::{AbandonReason, RecoveryOutcome};
    use crate::policy::ItemId;
    use wire::time::Instant;

    fn rec(outcome: RecoveryOutcome, k: u32) -> RecoveryRecord {
        RecoveryRecord {
            item: ItemId(0),
            chunks: Vec::new(),
            first_sent: Instant::ZERO,
            first_lost: Instant::ZERO,
            retransmissions: k,
            outcome,
        }
    }

    fn delivered(round: u32, k: u32) -> RecoveryRecord {
        let t = Instant::ZERO;
        rec(
            RecoveryOutcome::Delivered {
                round,
                recovery_sent: t,
                acked_at: t,
                needed: k,
            },
            k,
        )
    }

    #[test]
    fn tally_counts_rounds_and_abandons() {
        let mut t = RecoveryTally::default();
        for r in [
            delivered(1, 1),
            delivered(1, 2),
            delivered(3, 3),
            delivered(0, 0),
        ] {
            t.observe(&r);
        }
        t.observe(&rec(
            RecoveryOutcome::Abandoned {
                reason: AbandonReason::NothingLeft,
                at: Instant::ZERO,
            },
            7,
        ));
        assert_eq!(t.n_hist, vec![1, 2, 0, 1]);
        assert_eq!((t.n_max, t.k_max), (3, 3), "abandoned k is not k_max");
        assert_eq!((t.recovered_items, t.abandoned_items), (4, 1));
        assert!((t.deterioration_rate() - 0.25).abs() < 1e-12);
        assert_eq!(RecoveryTally::default().deterioration_rate(), 0.0);
    }
}
