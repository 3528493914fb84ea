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
    /// Path MTU probes sent (path_mtu.rs; only with discovery on, so left
    /// out of the JSON when 0).
    #[serde(skip_serializing_if = "is_zero")]
    pub mtu_probes_sent: u64,
    /// Path MTU probes declared lost: sizes the path did not carry. They
    /// are not counted in `lost_packets`.
    #[serde(skip_serializing_if = "is_zero")]
    pub mtu_probes_lost: u64,
    /// Times the path stopped carrying the discovered size and the
    /// connection fell back to its configured one (a PMTU black hole).
    #[serde(skip_serializing_if = "is_zero")]
    pub mtu_black_holes: u64,
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
    /// ([`crate::policy::SendingHooks::on_flow_blocked`]); also counted
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
    /// Delivered items whose recovery latency was at least T_unit
    /// ([`RecoveryRecord::deteriorated`]).
    pub deteriorated_items: u64,
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
        if record.deteriorated() {
            self.deteriorated_items += 1;
        }
        self.n_max = self.n_max.max(round);
        self.k_max = self.k_max.max(record.retransmissions);
        self.recovered_items += 1;
    }

    /// AutoRec's recovery deterioration rate (§5, DESIGN.md
    /// `recovery_deterioration_rate`): the share of delivered items whose
    /// recovery latency was at least T_unit; 0 when nothing was delivered.
    pub fn deterioration_rate(&self) -> f64 {
        share(self.deteriorated_items, self.recovered_items)
    }

    /// Share of delivered items that needed two rounds or more (DESIGN.md
    /// `share_n_ge_2`); 0 when nothing was delivered. It counts rounds, not
    /// time: an item that a reinjection sent in round 1 delivered counts
    /// as round 1 whenever it arrived.
    pub fn share_n_ge_2(&self) -> f64 {
        share(self.n_hist.iter().skip(2).sum(), self.recovered_items)
    }
}

/// `part / whole`, 0 when `whole` is 0.
fn share(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
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
            t_unit: None,
            retransmissions: k,
            outcome,
        }
    }

    /// Delivered in `round` by a copy sent `latency` ms after the first
    /// loss detection (at 100 ms), with the first retransmission declared
    /// lost `t_unit` ms after it left, if it was.
    fn recovered(round: u32, latency: u64, t_unit: Option<u64>) -> RecoveryRecord {
        let lost = Instant::from_millis(100);
        RecoveryRecord {
            first_lost: lost,
            t_unit: t_unit.map(Duration::from_millis),
            ..rec(
                RecoveryOutcome::Delivered {
                    round,
                    recovery_sent: lost + Duration::from_millis(latency),
                    acked_at: lost + Duration::from_millis(latency + 50),
                    needed: round,
                },
                round,
            )
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
        assert!((t.share_n_ge_2() - 0.25).abs() < 1e-12);
        assert_eq!(RecoveryTally::default().share_n_ge_2(), 0.0);
        assert_eq!(RecoveryTally::default().deterioration_rate(), 0.0);
    }

    #[test]
    fn deterioration_is_counted_by_latency_against_t_unit() {
        // AutoRec §5's example (Fig. 6): one packet recovered by its first
        // retransmission, one whose retransmission was lost (T_unit 60 ms)
        // and recovered by the next, sent 60 ms after the loss: 50%.
        let mut t = RecoveryTally::default();
        t.observe(&recovered(1, 0, None));
        t.observe(&recovered(2, 60, Some(60)));
        assert_eq!(t.deteriorated_items, 1);
        assert!((t.deterioration_rate() - 0.5).abs() < 1e-12);
        // Rescued by a reinjection half a T_unit after the loss, while the
        // first retransmission was lost: not deteriorated.
        t.observe(&recovered(1, 30, Some(60)));
        // A round-1 copy that left a whole T_unit after the loss is: rounds
        // do not measure time (`share_n_ge_2` misses it).
        t.observe(&recovered(1, 70, Some(60)));
        // Round 2, a little later than one T_unit: deteriorated.
        t.observe(&recovered(2, 65, Some(58)));
        // The original got through after all: no recovery latency.
        t.observe(&recovered(0, 0, Some(60)));
        assert_eq!(t.recovered_items, 6);
        assert_eq!(t.deteriorated_items, 3);
        assert!((t.deterioration_rate() - 0.5).abs() < 1e-12);
        assert!((t.share_n_ge_2() - 2.0 / 6.0).abs() < 1e-12);
        // Abandoned items are not part of the rate.
        t.observe(&RecoveryRecord {
            t_unit: Some(Duration::from_millis(1)),
            ..rec(
                RecoveryOutcome::Abandoned {
                    reason: AbandonReason::ConnectionClosed,
                    at: Instant::from_millis(500),
                },
                4,
            )
        });
        assert_eq!((t.recovered_items, t.deteriorated_items), (6, 3));
    }
}
