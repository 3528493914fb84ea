//! QUIC transport parameters (RFC 9000 §18), carried in the TLS
//! quic_transport_parameters extension, plus max_datagram_frame_size
//! (RFC 9221 §3) and grease_quic_bit (RFC 9287 §3).
//!
//! Decoding enforces everything RFC 9000 §7.4 and §18.2 let a receiver check
//! on its own; checks that need connection state (initial_source_connection_id
//! matching the packet's source CID, RFC 9000 §7.3) are the transport's.

use crate::cid::ConnectionId;
use crate::coding::{BufMutExt, Reader};
use crate::error::DecodeError;
use crate::side::Side;
use crate::time::Duration;
use crate::varint::varint_len;

mod preferred_address;
pub use preferred_address::PreferredAddress;

/// Transport parameter identifiers (RFC 9000 §18.2, RFC 9221 §3, RFC 9287 §3).
pub mod param_id {
    /// original_destination_connection_id (server only).
    pub const ORIGINAL_DESTINATION_CONNECTION_ID: u64 = 0x00;
    /// max_idle_timeout, in milliseconds.
    pub const MAX_IDLE_TIMEOUT: u64 = 0x01;
    /// stateless_reset_token (server only).
    pub const STATELESS_RESET_TOKEN: u64 = 0x02;
    /// max_udp_payload_size.
    pub const MAX_UDP_PAYLOAD_SIZE: u64 = 0x03;
    /// initial_max_data.
    pub const INITIAL_MAX_DATA: u64 = 0x04;
    /// initial_max_stream_data_bidi_local.
    pub const INITIAL_MAX_STREAM_DATA_BIDI_LOCAL: u64 = 0x05;
    /// initial_max_stream_data_bidi_remote.
    pub const INITIAL_MAX_STREAM_DATA_BIDI_REMOTE: u64 = 0x06;
    /// initial_max_stream_data_uni.
    pub const INITIAL_MAX_STREAM_DATA_UNI: u64 = 0x07;
    /// initial_max_streams_bidi.
    pub const INITIAL_MAX_STREAMS_BIDI: u64 = 0x08;
    /// initial_max_streams_uni.
    pub const INITIAL_MAX_STREAMS_UNI: u64 = 0x09;
    /// ack_delay_exponent.
    pub const ACK_DELAY_EXPONENT: u64 = 0x0a;
    /// max_ack_delay, in milliseconds.
    pub const MAX_ACK_DELAY: u64 = 0x0b;
    /// disable_active_migration (zero-length).
    pub const DISABLE_ACTIVE_MIGRATION: u64 = 0x0c;
    /// preferred_address (server only).
    pub const PREFERRED_ADDRESS: u64 = 0x0d;
    /// active_connection_id_limit.
    pub const ACTIVE_CONNECTION_ID_LIMIT: u64 = 0x0e;
    /// initial_source_connection_id.
    pub const INITIAL_SOURCE_CONNECTION_ID: u64 = 0x0f;
    /// retry_source_connection_id (server only).
    pub const RETRY_SOURCE_CONNECTION_ID: u64 = 0x10;
    /// max_datagram_frame_size (RFC 9221 §3).
    pub const MAX_DATAGRAM_FRAME_SIZE: u64 = 0x20;
    /// grease_quic_bit (RFC 9287 §3, zero-length).
    pub const GREASE_QUIC_BIT: u64 = 0x2ab2;
    /// artq private, zero-length: "I decode ARTQ_FEC repair frames". Only
    /// artq receivers send it; any other peer ignores it as unknown
    /// (RFC 9000 §18.1), so an FEC sender never sends repair frames to them.
    pub const ARTQ_FEC: u64 = 0x3fa7_fec0;

    /// True for the reserved ids 31 * N + 27 that peers send to exercise
    /// unknown-parameter handling (RFC 9000 §18.1).
    pub fn is_reserved(id: u64) -> bool {
        id % 31 == 27
    }
}

/// RFC 9000 §18.2 defaults for the parameters that have non-zero ones.
const DEFAULT_MAX_UDP_PAYLOAD_SIZE: u64 = 65527;
const DEFAULT_ACK_DELAY_EXPONENT: u64 = 3;
const DEFAULT_MAX_ACK_DELAY_MS: u64 = 25;
const DEFAULT_ACTIVE_CONNECTION_ID_LIMIT: u64 = 2;

/// One endpoint's transport parameters (RFC 9000 §18.2). Field names follow
/// the RFC; `_ms` fields are milliseconds. [`Default`] gives the RFC defaults,
/// which is also what an absent parameter means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransportParameters {
    /// The Destination CID of the client's first Initial (server only).
    pub original_destination_connection_id: Option<ConnectionId>,
    /// Idle timeout in milliseconds; 0 disables it.
    pub max_idle_timeout_ms: u64,
    /// Stateless reset token for the handshake connection ID (server only).
    pub stateless_reset_token: Option<[u8; 16]>,
    /// Largest UDP payload the endpoint will accept (>= 1200).
    pub max_udp_payload_size: u64,
    /// Initial connection-level flow control limit.
    pub initial_max_data: u64,
    /// Initial limit for bidirectional streams opened by the sender of these parameters.
    pub initial_max_stream_data_bidi_local: u64,
    /// Initial limit for bidirectional streams opened by the peer.
    pub initial_max_stream_data_bidi_remote: u64,
    /// Initial limit for unidirectional streams opened by the peer.
    pub initial_max_stream_data_uni: u64,
    /// How many bidirectional streams the peer may open (<= 2^60).
    pub initial_max_streams_bidi: u64,
    /// How many unidirectional streams the peer may open (<= 2^60).
    pub initial_max_streams_uni: u64,
    /// Exponent scaling the ACK Delay field (<= 20).
    pub ack_delay_exponent: u64,
    /// Maximum time the endpoint delays acknowledgments, ms (< 2^14).
    pub max_ack_delay_ms: u64,
    /// The endpoint does not support active connection migration.
    pub disable_active_migration: bool,
    /// The server's preferred address, raw (server only; length-validated).
    pub preferred_address: Option<Vec<u8>>,
    /// How many connection IDs from the peer the endpoint will store (>= 2).
    pub active_connection_id_limit: u64,
    /// The Source CID of the endpoint's first Initial.
    pub initial_source_connection_id: Option<ConnectionId>,
    /// The Source CID of the server's Retry (server only).
    pub retry_source_connection_id: Option<ConnectionId>,
    /// Largest DATAGRAM frame accepted; `None` means no DATAGRAM support (RFC 9221).
    pub max_datagram_frame_size: Option<u64>,
    /// The endpoint accepts packets with the Fixed Bit clear (RFC 9287).
    pub grease_quic_bit: bool,
    /// artq private: the sender of these parameters decodes ARTQ_FEC frames.
    pub artq_fec: bool,
}

impl Default for TransportParameters {
    fn default() -> Self {
        TransportParameters {
            original_destination_connection_id: None,
            max_idle_timeout_ms: 0,
            stateless_reset_token: None,
            max_udp_payload_size: DEFAULT_MAX_UDP_PAYLOAD_SIZE,
            initial_max_data: 0,
            initial_max_stream_data_bidi_local: 0,
            initial_max_stream_data_bidi_remote: 0,
            initial_max_stream_data_uni: 0,
            initial_max_streams_bidi: 0,
            initial_max_streams_uni: 0,
            ack_delay_exponent: DEFAULT_ACK_DELAY_EXPONENT,
            max_ack_delay_ms: DEFAULT_MAX_ACK_DELAY_MS,
            disable_active_migration: false,
            preferred_address: None,
            active_connection_id_limit: DEFAULT_ACTIVE_CONNECTION_ID_LIMIT,
            initial_source_connection_id: None,
            retry_source_connection_id: None,
            max_datagram_frame_size: None,
            grease_quic_bit: false,
            artq_fec: false,
        }
    }
}

fn put_varint_param(out: &mut Vec<u8>, id: u64, value: u64) {
    out.put_varint(id);
    out.put_varint(varint_len(value) as u64);
    out.put_varint(value);
}

fn put_bytes_param(out: &mut Vec<u8>, id: u64, value: &[u8]) {
    out.put_varint(id);
    out.put_varint(value.len() as u64);
    out.put_slice(value);
}

fn invalid(reason: &'static str) -> DecodeError {
    DecodeError::InvalidTransportParameter(reason)
}

/// A parameter value that must be exactly one varint.
fn varint_value(value: &[u8]) -> Result<u64, DecodeError> {
    let mut r = Reader::new(value);
    let v = r.varint().map_err(|_| invalid("truncated integer value"))?;
    if !r.is_empty() {
        return Err(invalid("integer value with trailing bytes"));
    }
    Ok(v)
}

fn cid_value(value: &[u8]) -> Result<ConnectionId, DecodeError> {
    ConnectionId::new(value).map_err(|_| invalid("connection ID longer than 20 bytes"))
}

/// Index of a known parameter in the duplicate-detection bitmap.
fn known_index(id: u64) -> Option<u32> {
    match id {
        0x00..=0x10 => Some(id as u32),
        param_id::MAX_DATAGRAM_FRAME_SIZE => Some(17),
        param_id::GREASE_QUIC_BIT => Some(18),
        param_id::ARTQ_FEC => Some(19),
        _ => None,
    }
}

impl TransportParameters {
    /// Appends the parameters in wire format (RFC 9000 §18), in id order.
    /// Parameters equal to their default (or `None`/`false`) are omitted;
    /// `initial_source_connection_id` is written whenever it is `Some`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        use param_id as id;
        let d = TransportParameters::default();
        if let Some(cid) = &self.original_destination_connection_id {
            put_bytes_param(out, id::ORIGINAL_DESTINATION_CONNECTION_ID, cid);
        }
        let varints = [
            (
                id::MAX_IDLE_TIMEOUT,
                self.max_idle_timeout_ms,
                d.max_idle_timeout_ms,
            ),
            (
                id::MAX_UDP_PAYLOAD_SIZE,
                self.max_udp_payload_size,
                d.max_udp_payload_size,
            ),
            (id::INITIAL_MAX_DATA, self.initial_max_data, 0),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL,
                self.initial_max_stream_data_bidi_local,
                0,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE,
                self.initial_max_stream_data_bidi_remote,
                0,
            ),
            (
                id::INITIAL_MAX_STREAM_DATA_UNI,
                self.initial_max_stream_data_uni,
                0,
            ),
            (
                id::INITIAL_MAX_STREAMS_BIDI,
                self.initial_max_streams_bidi,
                0,
            ),
            (id::INITIAL_MAX_STREAMS_UNI, self.initial_max_streams_uni, 0),
            (
                id::ACK_DELAY_EXPONENT,
                self.ack_delay_exponent,
                d.ack_delay_exponent,
            ),
            (id::MAX_ACK_DELAY, self.max_ack_delay_ms, d.max_ack_delay_ms),
        ];
        for (pid, value, default) in varints {
            if pid == id::MAX_UDP_PAYLOAD_SIZE {
                // Keep id order: stateless_reset_token (0x02) precedes 0x03.
                if let Some(token) = &self.stateless_reset_token {
                    put_bytes_param(out, id::STATELESS_RESET_TOKEN, token);
                }
            }
            if value != default {
                put_varint_param(out, pid, value);
            }
        }
        if self.disable_active_migration {
            put_bytes_param(out, id::DISABLE_ACTIVE_MIGRATION, &[]);
        }
        if let Some(addr) = &self.preferred_address {
            put_bytes_param(out, id::PREFERRED_ADDRESS, addr);
        }
        if self.active_connection_id_limit != d.active_connection_id_limit {
            put_varint_param(
                out,
                id::ACTIVE_CONNECTION_ID_LIMIT,
                self.active_connection_id_limit,
            );
        }
        if let Some(cid) = &self.initial_source_connection_id {
            put_bytes_param(out, id::INITIAL_SOURCE_CONNECTION_ID, cid);
        }
        if let Some(cid) = &self.retry_source_connection_id {
            put_bytes_param(out, id::RETRY_SOURCE_CONNECTION_ID, cid);
        }
        if let Some(size) = self.max_datagram_frame_size {
            put_varint_param(out, id::MAX_DATAGRAM_FRAME_SIZE, size);
        }
        if self.grease_quic_bit {
            put_bytes_param(out, id::GREASE_QUIC_BIT, &[]);
        }
        if self.artq_fec {
            put_bytes_param(out, id::ARTQ_FEC, &[]);
        }
    }

    /// Parses a peer's parameters; `sent_by` is the peer's role.
    ///
    /// Unknown ids (reserved 31 * N + 27 ones included) are skipped (RFC 9000
    /// §7.4.2); a known id sent twice, a server-only parameter from a client,
    /// a malformed value or one out of its §18.2 range is an error, which maps
    /// to TRANSPORT_PARAMETER_ERROR. Duplicates among unknown ids are not
    /// detected (that would need memory proportional to the input).
    pub fn decode(bytes: &[u8], sent_by: Side) -> Result<Self, DecodeError> {
        use param_id as id;
        let mut p = TransportParameters::default();
        let mut seen = 0u32;
        let mut r = Reader::new(bytes);
        while !r.is_empty() {
            let pid = r.varint().map_err(|_| invalid("truncated parameter id"))?;
            let len = r
                .varint()
                .map_err(|_| invalid("truncated parameter length"))?;
            let value = r
                .bytes_u64(len)
                .map_err(|_| invalid("parameter value exceeds extension"))?;
            let Some(index) = known_index(pid) else {
                continue;
            };
            if seen & (1 << index) != 0 {
                return Err(invalid("duplicate transport parameter"));
            }
            seen |= 1 << index;
            // RFC 9000 §18.2: a client MUST NOT send these.
            let server_only = matches!(
                pid,
                id::ORIGINAL_DESTINATION_CONNECTION_ID
                    | id::STATELESS_RESET_TOKEN
                    | id::PREFERRED_ADDRESS
                    | id::RETRY_SOURCE_CONNECTION_ID
            );
            if server_only && sent_by == Side::Client {
                return Err(invalid("server-only transport parameter sent by a client"));
            }
            match pid {
                id::ORIGINAL_DESTINATION_CONNECTION_ID => {
                    p.original_destination_connection_id = Some(cid_value(value)?);
                }
                id::MAX_IDLE_TIMEOUT => p.max_idle_timeout_ms = varint_value(value)?,
                id::STATELESS_RESET_TOKEN => {
                    let token = <[u8; 16]>::try_from(value)
                        .map_err(|_| invalid("stateless_reset_token is not 16 bytes"))?;
                    p.stateless_reset_token = Some(token);
                }
                id::MAX_UDP_PAYLOAD_SIZE => {
                    p.max_udp_payload_size = varint_value(value)?;
                    if p.max_udp_payload_size < 1200 {
                        return Err(invalid("max_udp_payload_size below 1200"));
                    }
                }
                id::INITIAL_MAX_DATA => p.initial_max_data = varint_value(value)?,
                id::INITIAL_MAX_STREAM_DATA_BIDI_LOCAL => {
                    p.initial_max_stream_data_bidi_local = varint_value(value)?;
                }
                id::INITIAL_MAX_STREAM_DATA_BIDI_REMOTE => {
                    p.initial_max_stream_data_bidi_remote = varint_value(value)?;
                }
                id::INITIAL_MAX_STREAM_DATA_UNI => {
                    p.initial_max_stream_data_uni = varint_value(value)?
                }
                id::INITIAL_MAX_STREAMS_BIDI | id::INITIAL_MAX_STREAMS_UNI => {
                    let v = varint_value(value)?;
                    // RFC 9000 §18.2 (and §4.6): at most 2^60 streams.
                    if v > 1 << 60 {
                        return Err(invalid("initial_max_streams exceeds 2^60"));
                    }
                    if pid == id::INITIAL_MAX_STREAMS_BIDI {
                        p.initial_max_streams_bidi = v;
                    } else {
                        p.initial_max_streams_uni = v;
                    }
                }
                id::ACK_DELAY_EXPONENT => {
                    p.ack_delay_exponent = varint_value(value)?;
                    if p.ack_delay_exponent > 20 {
                        return Err(invalid("ack_delay_exponent above 20"));
                    }
                }
                id::MAX_ACK_DELAY => {
                    p.max_ack_delay_ms = varint_value(value)?;
                    if p.max_ack_delay_ms >= 1 << 14 {
                        return Err(invalid("max_ack_delay of 2^14 ms or more"));
                    }
                }
                id::DISABLE_ACTIVE_MIGRATION => {
                    if !value.is_empty() {
                        return Err(invalid("disable_active_migration is not empty"));
                    }
                    p.disable_active_migration = true;
                }
                id::PREFERRED_ADDRESS => {
                    PreferredAddress::decode(value)?;
                    p.preferred_address = Some(value.to_vec());
                }
                id::ACTIVE_CONNECTION_ID_LIMIT => {
                    p.active_connection_id_limit = varint_value(value)?;
                    if p.active_connection_id_limit < 2 {
                        return Err(invalid("active_connection_id_limit below 2"));
                    }
                }
                id::INITIAL_SOURCE_CONNECTION_ID => {
                    p.initial_source_connection_id = Some(cid_value(value)?);
                }
                id::RETRY_SOURCE_CONNECTION_ID => {
                    p.retry_source_connection_id = Some(cid_value(value)?);
                }
                id::MAX_DATAGRAM_FRAME_SIZE => {
                    p.max_datagram_frame_size = Some(varint_value(value)?)
                }
                id::GREASE_QUIC_BIT => {
                    if !value.is_empty() {
                        return Err(invalid("grease_quic_bit is not empty"));
                    }
                    p.grease_quic_bit = true;
                }
                id::ARTQ_FEC => {
                    if !value.is_empty() {
                        return Err(invalid("artq_fec is not empty"));
                    }
                    p.artq_fec = true;
                }
                _ => {} // known_index lists exactly the ids above
            }
        }
        Ok(p)
    }

    /// The idle timeout, or `None` if the endpoint disabled it (value 0).
    pub fn max_idle_timeout(&self) -> Option<Duration> {
        (self.max_idle_timeout_ms != 0).then(|| Duration::from_millis(self.max_idle_timeout_ms))
    }

    /// max_ack_delay as a duration.
    pub fn max_ack_delay(&self) -> Duration {
        Duration::from_millis(self.max_ack_delay_ms)
    }
}

#[cfg(test)]
mod tests;
