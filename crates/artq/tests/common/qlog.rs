//! What a client's qlog files say about its connections.
//!
//! Why this exists: the interop runner checks its cases on packet captures
//! decrypted with the key log (how many handshakes, was there a Retry, which
//! key phases, which stream limit). quic-go's interop client writes a qlog
//! per connection (`$QLOGDIR/<odcid>.sqlog`, JSON-SEQ, decrypted packet
//! headers and frames), which answers the same questions from the client's
//! side without a decryptor, for artq and for quic-go's server alike.
//!
//! Only the events and fields read here are relied on (quic-go v0.65.0,
//! qlog draft schema `quic-14`): `transport:packet_sent` and
//! `transport:packet_received` (`header.packet_type`, `header.key_phase_bit`),
//! `transport:parameters_set` (`initiator`, `initial_max_streams_bidi`) and
//! `transport:connection_closed`.

use std::path::Path;

use serde_json::Value;

/// One connection's qlog, summarised.
#[derive(Debug, Default)]
pub struct ConnectionLog {
    /// The file it came from (its name is the original destination CID).
    pub file: String,
    /// Retry packets received.
    pub retries_received: u64,
    /// 1-RTT packets sent with the key phase bit set.
    pub sent_key_phase_1: u64,
    /// 1-RTT packets received with the key phase bit set.
    pub received_key_phase_1: u64,
    /// 1-RTT packets received in all.
    pub received_1rtt: u64,
    /// The server's `initial_max_streams_bidi` transport parameter.
    pub peer_max_streams_bidi: Option<u64>,
    /// 0-RTT packets sent.
    pub sent_0rtt: u64,
    /// Of those, how many the server acknowledged (in ACK frames of 1-RTT
    /// packets: 0-RTT and 1-RTT share a packet number space), which it
    /// only does when it accepted the early data and read them.
    pub acked_0rtt: u64,
    /// CRYPTO bytes received in Handshake packets (the server's Handshake
    /// flight: with a resumed session it carries no certificate).
    pub received_handshake_crypto: u64,
    /// The `connection_closed` event's data, if the connection logged one.
    pub closed: Option<String>,
}

/// Reads every `*.sqlog` file of `dir`, oldest first (by modification
/// time, then name): the connections in about the order they were made.
pub fn read_dir(dir: &Path) -> Result<Vec<ConnectionLog>, String> {
    let entries = std::fs::read_dir(dir).map_err(|e| format!("read {}: {e}", dir.display()))?;
    let mut paths: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "sqlog"))
        .map(|p| (std::fs::metadata(&p).and_then(|m| m.modified()).ok(), p))
        .collect();
    paths.sort();
    paths.iter().map(|(_, p)| read_file(p)).collect()
}

/// Summarises one qlog file. Lines that are not JSON (a record cut short
/// when the client was killed) are skipped.
pub fn read_file(path: &Path) -> Result<ConnectionLog, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("read {}: {e}", path.display()))?;
    let mut log = ConnectionLog {
        file: path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default(),
        ..ConnectionLog::default()
    };
    let mut zero_rtt_pns = Vec::new();
    let mut acked_1rtt: Vec<(u64, u64)> = Vec::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line.trim_start_matches('\u{1e}')) else {
            continue;
        };
        let data = &event["data"];
        let one_rtt = data["header"]["packet_type"] == "1RTT";
        let phase_1 = data["header"]["key_phase_bit"] == true;
        match event["name"].as_str() {
            Some("transport:packet_sent") if one_rtt && phase_1 => log.sent_key_phase_1 += 1,
            Some("transport:packet_sent") if data["header"]["packet_type"] == "0RTT" => {
                log.sent_0rtt += 1;
                zero_rtt_pns.extend(data["header"]["packet_number"].as_u64());
            }
            Some("transport:packet_received") if data["header"]["packet_type"] == "handshake" => {
                let frames = data["frames"].as_array().map(Vec::as_slice).unwrap_or(&[]);
                log.received_handshake_crypto += frames
                    .iter()
                    .filter(|f| f["frame_type"] == "crypto")
                    .filter_map(|f| f["length"].as_u64())
                    .sum::<u64>();
            }
            Some("transport:packet_received") if data["header"]["packet_type"] == "retry" => {
                log.retries_received += 1
            }
            Some("transport:packet_received") if one_rtt => {
                log.received_1rtt += 1;
                acked_1rtt.extend(acked_ranges(data));
                if phase_1 {
                    log.received_key_phase_1 += 1;
                }
            }
            Some("transport:parameters_set") if data["initiator"] == "remote" => {
                if let Some(n) = data["initial_max_streams_bidi"].as_u64() {
                    log.peer_max_streams_bidi = Some(n);
                }
            }
            Some("transport:connection_closed") => log.closed = Some(data.to_string()),
            _ => {}
        }
    }
    log.acked_0rtt = zero_rtt_pns
        .iter()
        .filter(|&&pn| acked_1rtt.iter().any(|&(lo, hi)| lo <= pn && pn <= hi))
        .count() as u64;
    Ok(log)
}

/// The packet-number ranges `[lo, hi]` the ACK frames of a packet event
/// acknowledge (qlog writes `[lo, hi]`, or `[pn]` for one packet).
fn acked_ranges(data: &Value) -> Vec<(u64, u64)> {
    let frames = data["frames"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    frames
        .iter()
        .filter(|f| f["frame_type"] == "ack")
        .filter_map(|f| f["acked_ranges"].as_array())
        .flatten()
        .filter_map(|r| {
            let lo = r.get(0)?.as_u64()?;
            Some((lo, r.get(1).and_then(Value::as_u64).unwrap_or(lo)))
        })
        .collect()
}
