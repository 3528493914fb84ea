//! Per-connection counters (quinn's `ConnectionStats` shape): cheap to keep,
//! read by `artq` and the lab at any time.

use serde::Serialize;
use wire::time::Duration;

use crate::events::RecoveryRecord;

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
    /// Lost-data items whose data eventually got through.
    pub recovered_items: u64,
    /// Lost-data items that left recovery undelivered (stream reset, data
    /// dropped by the policy, connection closed).
    pub abandoned_items: u64,
    /// DATAGRAM payloads given up by the policy after a loss.
    pub datagrams_dropped: u64,
    /// FEC repair packets sent (sender, `fec:K`).
    pub fec_repairs: u64,
    /// Packets rebuilt from FEC repair symbols (receiver).
    pub fec_recovered: u64,
    /// Packets declared lost that were acknowledged later.
    pub spurious_retransmissions: u64,
    /// Largest retransmission round that delivered data (`n_max`).
    pub n_max: u32,
    /// Largest number of retransmissions of one item (`k_max`).
    pub k_max: u32,
    /// `n_hist[n]`: items delivered in round n (0 = the original got through
    /// after all, i.e. a spurious loss).
    pub n_hist: Vec<u64>,
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

impl ConnectionStats {
    /// Count an item that left recovery.
    pub(crate) fn record_recovery(&mut self, record: &RecoveryRecord) {
        let Some(round) = record.delivered_round() else {
            self.abandoned_items += 1;
            return;
        };
        let retransmissions = record.retransmissions;
        let idx = round as usize;
        if self.n_hist.len() <= idx {
            self.n_hist.resize(idx + 1, 0);
        }
        self.n_hist[idx] += 1;
        self.n_max = self.n_max.max(round);
        self.k_max = self.k_max.max(retransmissions);
        self.recovered_items += 1;
    }
}
