//! qlog event output (draft-ietf-quic-qlog-main-schema, JSON-SEQ
//! serialization, `.sqlog`), so runs can be inspected in qvis and the other
//! tools QUIC engineers use.
//!
//! The connection reports typed events to a [`QlogSink`]; [`QlogWriter`] is
//! the sink that writes JSON-SEQ records to any `io::Write`. With no sink
//! attached the connection pays one branch per event.

use std::io::Write;

use serde_json::json;
use wire::time::Instant;

use crate::connection::SpaceId;
use crate::policy::{ItemId, PathView};

/// Receives connection events as they happen.
pub trait QlogSink: Send {
    /// A packet left.
    fn packet_sent(&mut self, now: Instant, space: SpaceId, pn: u64, size: usize, ack_eliciting: bool);
    /// A packet was received and decrypted.
    fn packet_received(&mut self, now: Instant, space: SpaceId, pn: u64, size: usize);
    /// A packet was declared lost.
    fn packet_lost(&mut self, now: Instant, space: SpaceId, pn: u64);
    /// RTT / congestion state after an ACK.
    fn metrics_updated(&mut self, now: Instant, path: &PathView);
    /// The recovery policy scheduled a replica (artq extension event).
    fn replica_scheduled(&mut self, now: Instant, item: ItemId, round: u32, index: u16, send_at: Instant);
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
        let ok = write!(out, "\x1e{header}\n").is_ok();
        QlogWriter { out: ok.then_some(out) }
    }

    fn event(&mut self, now: Instant, name: &str, data: serde_json::Value) {
        let Some(out) = self.out.as_mut() else { return };
        let time_ms = now.as_nanos() as f64 / 1e6;
        let rec = json!({ "time": time_ms, "name": name, "data": data });
        if write!(out, "\x1e{rec}\n").is_err() {
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

fn packet_type(space: SpaceId) -> &'static str {
    match space {
        SpaceId::Initial => "initial",
        SpaceId::Handshake => "handshake",
        SpaceId::Data => "1RTT",
    }
}

impl<W: Write + Send> QlogSink for QlogWriter<W> {
    fn packet_sent(&mut self, now: Instant, space: SpaceId, pn: u64, size: usize, ack_eliciting: bool) {
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

    fn replica_scheduled(&mut self, now: Instant, item: ItemId, round: u32, index: u16, send_at: Instant) {
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
