//! Connection events: typed, not log text (STYLE.md: s2n's subscribers).
//!
//! The connection reports what happens to every attached [`Subscriber`]:
//! packets sent, received and lost, congestion metrics, replicas scheduled,
//! lost data recovered, stream data arriving. [`QlogWriter`] is the
//! subscriber that writes qlog (draft-ietf-quic-qlog-main-schema, JSON-SEQ,
//! `.sqlog`) for qvis and other QUIC tools; the lab's metric recorders are
//! others. With no subscriber attached the connection pays one branch per
//! event.

use std::io::Write;

use serde_json::json;
use wire::time::{Duration, Instant};

use wire::StreamId;

use crate::connection::SpaceId;
use crate::policy::{ItemId, PathView, PolicyEvent, PolicyState};
use crate::streams::StreamChunk;

/// How one lost item left recovery: one record per item, written by the
/// retransmission engine at the item's one exit (DESIGN.md metrics `n`,
/// `k`, and the sender's side of `t_wait` and `recovery_latency`).
#[derive(Clone, Debug)]
pub struct RecoveryRecord {
    /// The item.
    pub item: ItemId,
    /// The stream data it carried (as first sent).
    pub chunks: Vec<StreamChunk>,
    /// First transmission of the data.
    pub first_sent: Instant,
    /// First loss detection.
    pub first_lost: Instant,
    /// AutoRec's T_unit (§2.3, "the time elapsed for a data packet from
    /// being sent to being retransmitted") measured on the item's first
    /// retransmission: from its send to its loss detection. `None` when
    /// that retransmission was never declared lost (it got through, or the
    /// item left first).
    pub t_unit: Option<Duration>,
    /// Retransmissions (replicas) sent for it (`k`).
    pub retransmissions: u32,
    /// Delivered or abandoned.
    pub outcome: RecoveryOutcome,
}

impl RecoveryRecord {
    /// The round that delivered the data (`n`), if it was delivered.
    pub fn delivered_round(&self) -> Option<u32> {
        match self.outcome {
            RecoveryOutcome::Delivered { round, .. } => Some(round),
            RecoveryOutcome::Abandoned { .. } => None,
        }
    }

    /// `recovery_latency` (AutoRec §2.3): from the first loss detection to
    /// the send of the copy whose acknowledgement delivered the data.
    /// `None` when it was not delivered, or delivered by its original
    /// (`n = 0`: no recovery packet exists).
    pub fn recovery_latency(&self) -> Option<Duration> {
        match self.outcome {
            RecoveryOutcome::Delivered {
                round,
                recovery_sent,
                ..
            } if round > 0 => Some(recovery_sent.saturating_duration_since(self.first_lost)),
            _ => None,
        }
    }

    /// Whether the recovery *deteriorated* (AutoRec §5, the recovery
    /// deterioration rate): the data was delivered, and its recovery
    /// latency is at least T_unit ("takes two or more T_unit", the first
    /// being the original's). Recovery latency is made of the T_units of
    /// the retransmissions lost before the one that got through (§2.3,
    /// Fig. 6), so T_unit is measured on the item's own first
    /// retransmission ([`RecoveryRecord::t_unit`]): ARQ's retransmission
    /// in the next round is sent at its loss detection, one T_unit later,
    /// and counts whatever the jitter of T_unit from one packet to the
    /// next; a reinjection that got through before that does not. Data
    /// whose first retransmission was never declared lost was recovered
    /// within one T_unit.
    pub fn deteriorated(&self) -> bool {
        match (self.recovery_latency(), self.t_unit) {
            (Some(latency), Some(t_unit)) => latency >= t_unit,
            _ => false,
        }
    }
}

/// The end of an item's recovery.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecoveryOutcome {
    /// A packet carrying its data was acknowledged.
    Delivered {
        /// The round of that packet (`n`; 0 = the original arrived after
        /// all, a spurious loss).
        round: u32,
        /// When that packet was sent.
        recovery_sent: Instant,
        /// Retransmissions sent up to and including that packet, in the
        /// order the rounds and their replicas went out (0 when the
        /// original got through): AutoRec's "recovery requires two or more
        /// retransmissions" is `needed >= 2`.
        needed: u32,
        /// When its acknowledgement arrived.
        acked_at: Instant,
    },
    /// Recovery stopped without an acknowledgement of the item's packets.
    Abandoned {
        /// Why.
        reason: AbandonReason,
        /// When.
        at: Instant,
    },
}

/// Why an item left recovery without being delivered by its own packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AbandonReason {
    /// Nothing of its data was left unacknowledged when a round was due to
    /// start or a replica to leave: acknowledged through another packet,
    /// or its stream was reset.
    NothingLeft,
    /// The policy gave up DATAGRAM payloads (`Decision::Drop`).
    Dropped,
    /// The connection closed while it was being recovered.
    ConnectionClosed,
}

impl AbandonReason {
    /// The reason's name in traces and JSON.
    pub fn name(self) -> &'static str {
        match self {
            AbandonReason::NothingLeft => "nothing_left",
            AbandonReason::Dropped => "dropped",
            AbandonReason::ConnectionClosed => "connection_closed",
        }
    }
}

/// Receives connection events as they happen. Every method has an empty
/// default, so a subscriber implements only what it needs.
pub trait Subscriber: Send {
    /// A packet left.
    fn packet_sent(
        &mut self,
        _now: Instant,
        _space: SpaceId,
        _pn: u64,
        _size: usize,
        _ack_eliciting: bool,
    ) {
    }
    /// A packet was received and decrypted.
    fn packet_received(&mut self, _now: Instant, _space: SpaceId, _pn: u64, _size: usize) {}
    /// A packet was declared lost.
    fn packet_lost(&mut self, _now: Instant, _space: SpaceId, _pn: u64) {}
    /// RTT / congestion state after an ACK.
    fn metrics_updated(&mut self, _now: Instant, _path: &PathView) {}
    /// The recovery policy scheduled a replica (artq extension event).
    fn replica_scheduled(
        &mut self,
        _now: Instant,
        _item: ItemId,
        _round: u32,
        _index: u16,
        _send_at: Instant,
    ) {
    }
    /// A lost item left recovery, delivered or abandoned (sender side): one
    /// call per item.
    fn recovery_ended(&mut self, _now: Instant, _record: &RecoveryRecord) {}
    /// The recovery policy's reported state changed (sender side, artq
    /// extension event; see [`RecoveryPolicy::report_state`](crate::policy::RecoveryPolicy::report_state)).
    fn policy_state(&mut self, _now: Instant, _state: &PolicyState) {}
    /// The recovery policy published an event (sender side, artq extension
    /// event; see [`PolicyContext::publish`](crate::policy::PolicyContext::publish)).
    fn policy_event(&mut self, _now: Instant, _event: &PolicyEvent) {}
    /// STREAM payload arrived (receiver side; duplicates included, before
    /// reassembly).
    fn stream_data_received(&mut self, _now: Instant, _id: StreamId, _offset: u64, _len: u64) {}
    /// We issued a connection ID (and its stateless reset token) to the
    /// peer: what makes the endpoint's identifiers observable in a trace.
    fn connection_id_issued(
        &mut self,
        _now: Instant,
        _sequence: u64,
        _cid: &[u8],
        _reset_token: &[u8; 16],
    ) {
    }
}

/// Writes qlog JSON-SEQ (RFC 7464 record separators) to a writer. Write
/// errors stop the log silently: tracing must never break a connection.
pub struct QlogWriter<W: Write + Send> {
    out: Option<W>,
}

impl<W: Write + Send> QlogWriter<W> {
    /// Start a trace: writes the qlog header naming the vantage point.
    pub fn new(mut out: W, title: &str, is_server: bool) -> Self {
        let header = json!({
            "qlog_version": "0.3",
            "qlog_format": "JSON-SEQ",
            "title": title,
            "trace": {
                "vantage_point": { "type": if is_server { "server" } else { "client" } },
                "common_fields": { "time_format": "relative", "reference_time": 0 },
            }
        });
        let ok = writeln!(out, "\x1e{header}").is_ok();
        QlogWriter {
            out: ok.then_some(out),
        }
    }

    fn event(&mut self, now: Instant, name: &str, data: serde_json::Value) {
        let Some(out) = self.out.as_mut() else { return };
        let time_ms = now.as_nanos() as f64 / 1e6;
        let rec = json!({ "time": time_ms, "name": name, "data": data });
        if writeln!(out, "\x1e{rec}").is_err() {
            self.out = None;
        }
    }
}

impl<W: Write + Send> Drop for QlogWriter<W> {
    fn drop(&mut self) {
        if let Some(out) = self.out.as_mut() {
            let _ = out.flush();
        }
    }
}

/// Lower-case hex, as qlog writes connection IDs and tokens.
fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes
        .iter()
        .fold(String::with_capacity(2 * bytes.len()), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

fn packet_type(space: SpaceId) -> &'static str {
    match space {
        SpaceId::Initial => "initial",
        SpaceId::Handshake => "handshake",
        SpaceId::Data => "1RTT",
    }
}

impl<W: Write + Send> Subscriber for QlogWriter<W> {
    fn packet_sent(
        &mut self,
        now: Instant,
        space: SpaceId,
        pn: u64,
        size: usize,
        ack_eliciting: bool,
    ) {
        self.event(
            now,
            "transport:packet_sent",
            json!({
                "header": { "packet_type": packet_type(space), "packet_number": pn },
                "raw": { "length": size },
                "is_ack_eliciting": ack_eliciting,
            }),
        );
    }

    fn packet_received(&mut self, now: Instant, space: SpaceId, pn: u64, size: usize) {
        self.event(
            now,
            "transport:packet_received",
            json!({
                "header": { "packet_type": packet_type(space), "packet_number": pn },
                "raw": { "length": size },
            }),
        );
    }

    fn packet_lost(&mut self, now: Instant, space: SpaceId, pn: u64) {
        self.event(
            now,
            "recovery:packet_lost",
            json!({ "header": { "packet_type": packet_type(space), "packet_number": pn } }),
        );
    }

    fn metrics_updated(&mut self, now: Instant, p: &PathView) {
        self.event(
            now,
            "recovery:metrics_updated",
            json!({
                "smoothed_rtt": p.srtt.as_secs_f64() * 1e3,
                "min_rtt": p.min_rtt.as_secs_f64() * 1e3,
                "latest_rtt": p.latest_rtt.as_secs_f64() * 1e3,
                "rtt_variance": p.rttvar.as_secs_f64() * 1e3,
                "congestion_window": p.cwnd,
                "bytes_in_flight": p.bytes_in_flight,
                "pacing_rate": p.pacing_rate.saturating_mul(8),
            }),
        );
    }

    fn recovery_ended(&mut self, now: Instant, r: &RecoveryRecord) {
        let ms = |t: Instant| t.as_nanos() as f64 / 1e6;
        match r.outcome {
            RecoveryOutcome::Delivered {
                round,
                recovery_sent,
                ..
            } => self.event(
                now,
                "artq:data_recovered",
                json!({
                    "item": r.item.0,
                    "n": round,
                    "k": r.retransmissions,
                    "first_sent_ms": ms(r.first_sent),
                    "first_lost_ms": ms(r.first_lost),
                    "recovery_sent_ms": ms(recovery_sent),
                }),
            ),
            RecoveryOutcome::Abandoned { reason, .. } => self.event(
                now,
                "artq:data_abandoned",
                json!({
                    "item": r.item.0,
                    "k": r.retransmissions,
                    "reason": reason.name(),
                    "first_sent_ms": ms(r.first_sent),
                    "first_lost_ms": ms(r.first_lost),
                }),
            ),
        }
    }

    fn policy_state(&mut self, now: Instant, state: &PolicyState) {
        let fields: serde_json::Map<String, serde_json::Value> = state
            .fields()
            .iter()
            .map(|&(k, v)| (k.to_string(), json!(v)))
            .collect();
        self.event(now, "artq:policy_state", serde_json::Value::Object(fields));
    }

    fn policy_event(&mut self, now: Instant, event: &PolicyEvent) {
        let mut fields: serde_json::Map<String, serde_json::Value> = event
            .fields
            .fields()
            .iter()
            .map(|&(k, v)| (k.to_string(), json!(v)))
            .collect();
        fields.insert("name".into(), json!(event.name));
        self.event(now, "artq:policy_event", serde_json::Value::Object(fields));
    }

    fn connection_id_issued(
        &mut self,
        now: Instant,
        sequence: u64,
        cid: &[u8],
        reset_token: &[u8; 16],
    ) {
        self.event(
            now,
            "connectivity:connection_id_updated",
            json!({
                "owner": "local",
                "sequence_number": sequence,
                "new": hex(cid),
                "stateless_reset_token": hex(reset_token),
            }),
        );
    }

    fn replica_scheduled(
        &mut self,
        now: Instant,
        item: ItemId,
        round: u32,
        index: u16,
        send_at: Instant,
    ) {
        self.event(
            now,
            "artq:replica_scheduled",
            json!({
                "item": item.0,
                "round": round,
                "index": index,
                "delay_ms": send_at.saturating_duration_since(now).as_secs_f64() * 1e3,
            }),
        );
    }
}
