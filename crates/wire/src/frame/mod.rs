//! QUIC frames (RFC 9000 §19) and DATAGRAM (RFC 9221 §4).
//!
//! [`FrameIter`] decodes a decrypted packet payload into borrowed [`Frame`]s
//! without allocating (only ACK frames allocate, for their range list).
//! [`Frame::encode`] writes any frame; the send path uses the header-only
//! writers ([`write_stream_header`], [`write_crypto_header`],
//! [`write_datagram_header`], [`write_ack`]) so that stream bytes are copied
//! once, straight from the send buffer into the packet.

mod decode;
mod write;

#[cfg(test)]
pub(crate) mod tests;

use core::ops::RangeInclusive;

pub use decode::FrameIter;
pub use write::{
    ack_frame_len, ack_frame_len_bound, crypto_data_capacity, crypto_header_len,
    datagram_data_capacity, datagram_header_len, stream_data_capacity, stream_header_len,
    write_ack, write_crypto_header, write_datagram_header, write_stream_header,
};

use crate::cid::ConnectionId;
use crate::coding::BufMutExt;
use crate::side::{Dir, StreamId};

/// Frame type codes (RFC 9000 §12.4 Table 3, RFC 9221 §4).
pub mod frame_type {
    /// PADDING (RFC 9000 §19.1).
    pub const PADDING: u64 = 0x00;
    /// PING (RFC 9000 §19.2).
    pub const PING: u64 = 0x01;
    /// ACK without ECN counts (RFC 9000 §19.3).
    pub const ACK: u64 = 0x02;
    /// ACK with ECN counts (RFC 9000 §19.3).
    pub const ACK_ECN: u64 = 0x03;
    /// RESET_STREAM (RFC 9000 §19.4).
    pub const RESET_STREAM: u64 = 0x04;
    /// STOP_SENDING (RFC 9000 §19.5).
    pub const STOP_SENDING: u64 = 0x05;
    /// CRYPTO (RFC 9000 §19.6).
    pub const CRYPTO: u64 = 0x06;
    /// NEW_TOKEN (RFC 9000 §19.7).
    pub const NEW_TOKEN: u64 = 0x07;
    /// First STREAM type; 0x08..=0x0f carry the OFF, LEN and FIN bits (RFC 9000 §19.8).
    pub const STREAM: u64 = 0x08;
    /// Last STREAM type (all three flag bits set).
    pub const STREAM_MAX: u64 = 0x0f;
    /// STREAM flag: an Offset field is present.
    pub const STREAM_OFF_BIT: u64 = 0x04;
    /// STREAM flag: a Length field is present.
    pub const STREAM_LEN_BIT: u64 = 0x02;
    /// STREAM flag: the frame ends the stream.
    pub const STREAM_FIN_BIT: u64 = 0x01;
    /// MAX_DATA (RFC 9000 §19.9).
    pub const MAX_DATA: u64 = 0x10;
    /// MAX_STREAM_DATA (RFC 9000 §19.10).
    pub const MAX_STREAM_DATA: u64 = 0x11;
    /// MAX_STREAMS for bidirectional streams (RFC 9000 §19.11).
    pub const MAX_STREAMS_BIDI: u64 = 0x12;
    /// MAX_STREAMS for unidirectional streams (RFC 9000 §19.11).
    pub const MAX_STREAMS_UNI: u64 = 0x13;
    /// DATA_BLOCKED (RFC 9000 §19.12).
    pub const DATA_BLOCKED: u64 = 0x14;
    /// STREAM_DATA_BLOCKED (RFC 9000 §19.13).
    pub const STREAM_DATA_BLOCKED: u64 = 0x15;
    /// STREAMS_BLOCKED for bidirectional streams (RFC 9000 §19.14).
    pub const STREAMS_BLOCKED_BIDI: u64 = 0x16;
    /// STREAMS_BLOCKED for unidirectional streams (RFC 9000 §19.14).
    pub const STREAMS_BLOCKED_UNI: u64 = 0x17;
    /// NEW_CONNECTION_ID (RFC 9000 §19.15).
    pub const NEW_CONNECTION_ID: u64 = 0x18;
    /// RETIRE_CONNECTION_ID (RFC 9000 §19.16).
    pub const RETIRE_CONNECTION_ID: u64 = 0x19;
    /// PATH_CHALLENGE (RFC 9000 §19.17).
    pub const PATH_CHALLENGE: u64 = 0x1a;
    /// PATH_RESPONSE (RFC 9000 §19.18).
    pub const PATH_RESPONSE: u64 = 0x1b;
    /// CONNECTION_CLOSE signalling a transport error (RFC 9000 §19.19).
    pub const CONNECTION_CLOSE: u64 = 0x1c;
    /// CONNECTION_CLOSE signalling an application error (RFC 9000 §19.19).
    pub const CONNECTION_CLOSE_APP: u64 = 0x1d;
    /// HANDSHAKE_DONE (RFC 9000 §19.20).
    pub const HANDSHAKE_DONE: u64 = 0x1e;
    /// DATAGRAM without a Length field: data runs to the end of the packet (RFC 9221 §4).
    pub const DATAGRAM: u64 = 0x30;
    /// DATAGRAM with a Length field (RFC 9221 §4).
    pub const DATAGRAM_LEN: u64 = 0x31;
    /// artq's block-FEC repair frame: a private type that only an artq
    /// receiver understands (the FEC baseline is the one scheme that needs a
    /// receiver change; see DESIGN.md). Sent only to peers that advertised
    /// the `artq_fec` transport parameter; any other peer would close the
    /// connection with FRAME_ENCODING_ERROR, as RFC 9000 §12.4 requires.
    pub const ARTQ_FEC: u64 = 0x3f_a7_00;
}

/// The largest stream or crypto offset plus length (RFC 9000 §19.8: 2^62-1).
pub const MAX_STREAM_OFFSET: u64 = (1 << 62) - 1;
/// The largest stream count in MAX_STREAMS / STREAMS_BLOCKED (RFC 9000 §19.11).
pub const MAX_STREAM_COUNT: u64 = 1 << 60;

/// ECN counters of an ACK_ECN frame (RFC 9000 §19.3.2).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct EcnCounts {
    /// Packets received with the ECT(0) codepoint.
    pub ect0: u64,
    /// Packets received with the ECT(1) codepoint.
    pub ect1: u64,
    /// Packets received with the ECN-CE codepoint.
    pub ce: u64,
}

/// A decoded ACK frame (RFC 9000 §19.3) with its gaps resolved into ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AckFrame {
    /// Largest Acknowledged.
    pub largest: u64,
    /// ACK Delay as encoded: scale by 2^ack_delay_exponent for microseconds
    /// (RFC 9000 §19.3).
    pub delay: u64,
    /// Acknowledged packet numbers, highest range first; the first range
    /// contains `largest`. Never empty once decoded.
    pub ranges: Vec<RangeInclusive<u64>>,
    /// ECN counts, for an ACK_ECN frame.
    pub ecn: Option<EcnCounts>,
}

impl AckFrame {
    /// True if `pn` is acknowledged by this frame.
    pub fn contains(&self, pn: u64) -> bool {
        self.ranges.iter().any(|r| r.contains(&pn))
    }
}

/// One QUIC frame; byte fields borrow from the decrypted payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// `len` consecutive PADDING frames (one byte each), decoded as one.
    Padding {
        /// Number of padding bytes.
        len: usize,
    },
    /// PING: elicits an ACK, carries nothing.
    Ping,
    /// ACK or ACK_ECN.
    Ack(AckFrame),
    /// RESET_STREAM: the sender abandons a stream.
    ResetStream {
        /// The stream.
        id: StreamId,
        /// Application error code.
        error_code: u64,
        /// The stream's final size in bytes.
        final_size: u64,
    },
    /// STOP_SENDING: the receiver asks the sender to stop.
    StopSending {
        /// The stream.
        id: StreamId,
        /// Application error code.
        error_code: u64,
    },
    /// CRYPTO: TLS handshake bytes at `offset` of the space's crypto stream.
    Crypto {
        /// Byte offset in the crypto stream.
        offset: u64,
        /// The handshake bytes.
        data: &'a [u8],
    },
    /// NEW_TOKEN: an address-validation token for future connections (non-empty).
    NewToken {
        /// The token.
        token: &'a [u8],
    },
    /// STREAM: application bytes at `offset` of a stream.
    Stream {
        /// The stream.
        id: StreamId,
        /// Byte offset of `data` in the stream.
        offset: u64,
        /// The stream ends with this frame's data.
        fin: bool,
        /// The bytes.
        data: &'a [u8],
    },
    /// MAX_DATA: new connection-level flow control limit.
    MaxData(u64),
    /// MAX_STREAM_DATA: new stream-level flow control limit.
    MaxStreamData {
        /// The stream.
        id: StreamId,
        /// Maximum stream offset the peer may send.
        max: u64,
    },
    /// MAX_STREAMS: cumulative count of streams the peer may open.
    MaxStreams {
        /// Which kind of stream.
        dir: Dir,
        /// Cumulative stream count (at most 2^60).
        count: u64,
    },
    /// DATA_BLOCKED: the sender is blocked by connection flow control.
    DataBlocked {
        /// The limit it is blocked at.
        limit: u64,
    },
    /// STREAM_DATA_BLOCKED: the sender is blocked by stream flow control.
    StreamDataBlocked {
        /// The stream.
        id: StreamId,
        /// The limit it is blocked at.
        limit: u64,
    },
    /// STREAMS_BLOCKED: the sender wants to open more streams than allowed.
    StreamsBlocked {
        /// Which kind of stream.
        dir: Dir,
        /// The stream count limit it hit (at most 2^60).
        limit: u64,
    },
    /// NEW_CONNECTION_ID: a connection ID the peer may use.
    NewConnectionId {
        /// Sequence number of the ID.
        sequence: u64,
        /// IDs with lower sequence numbers must be retired.
        retire_prior_to: u64,
        /// The ID (1 to 20 bytes).
        cid: ConnectionId,
        /// Its stateless reset token.
        reset_token: [u8; 16],
    },
    /// RETIRE_CONNECTION_ID: stop using an ID the peer issued.
    RetireConnectionId {
        /// Sequence number of the retired ID.
        sequence: u64,
    },
    /// PATH_CHALLENGE: echo this data to validate a path.
    PathChallenge([u8; 8]),
    /// PATH_RESPONSE: the echo of a PATH_CHALLENGE.
    PathResponse([u8; 8]),
    /// CONNECTION_CLOSE (0x1c transport, 0x1d application).
    ConnectionClose {
        /// Transport or application error code.
        error_code: u64,
        /// The frame type that caused a transport close (`Some` means type
        /// 0x1c); `None` for an application close (type 0x1d).
        frame_type: Option<u64>,
        /// Reason phrase (UTF-8 by convention, not checked).
        reason: &'a [u8],
    },
    /// HANDSHAKE_DONE: the server confirms the handshake.
    HandshakeDone,
    /// DATAGRAM: an unreliable application datagram (RFC 9221).
    Datagram {
        /// The payload.
        data: &'a [u8],
    },
    /// ARTQ_FEC: the repair symbol of one FEC block. Wire format: type,
    /// first packet number, count, count−1 packet-number deltas (each ≥ 1),
    /// repair length, repair bytes. The repair is the XOR of each protected
    /// packet's `u16 length ‖ plaintext payload`, zero-padded to the longest.
    ArtqFec(FecRepair<'a>),
}

/// The body of an ARTQ_FEC frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FecRepair<'a> {
    /// Packet number of the block's first packet.
    pub first_pn: u64,
    /// Number of packets in the block (1..=255).
    pub count: u64,
    /// The count−1 varint-encoded deltas between consecutive packet numbers.
    pub deltas: &'a [u8],
    /// The repair symbol.
    pub repair: &'a [u8],
}

impl FecRepair<'_> {
    /// The packet numbers the block covers, in order. The deltas were
    /// validated when the frame was decoded.
    pub fn packet_numbers(&self) -> impl Iterator<Item = u64> + '_ {
        let mut r = crate::coding::Reader::new(self.deltas);
        let mut pn = Some(self.first_pn);
        core::iter::from_fn(move || {
            let cur = pn?;
            pn = r.varint().ok().and_then(|d| cur.checked_add(d));
            Some(cur)
        })
        .take(usize::try_from(self.count).unwrap_or(0))
    }
}

/// Largest number of packets in one FEC block.
pub const MAX_FEC_BLOCK: u64 = 255;

impl Frame<'_> {
    /// The frame type this frame encodes as with [`Frame::encode`] (STREAM
    /// and DATAGRAM always with a Length field, so a frame decoded without one
    /// reports the LEN variant).
    pub fn ty(&self) -> u64 {
        use frame_type as t;
        match self {
            Frame::Padding { .. } => t::PADDING,
            Frame::Ping => t::PING,
            Frame::Ack(ack) => {
                if ack.ecn.is_some() {
                    t::ACK_ECN
                } else {
                    t::ACK
                }
            }
            Frame::ResetStream { .. } => t::RESET_STREAM,
            Frame::StopSending { .. } => t::STOP_SENDING,
            Frame::Crypto { .. } => t::CRYPTO,
            Frame::NewToken { .. } => t::NEW_TOKEN,
            Frame::Stream { offset, fin, .. } => stream_type(*offset, *fin),
            Frame::MaxData(_) => t::MAX_DATA,
            Frame::MaxStreamData { .. } => t::MAX_STREAM_DATA,
            Frame::MaxStreams { dir: Dir::Bi, .. } => t::MAX_STREAMS_BIDI,
            Frame::MaxStreams { dir: Dir::Uni, .. } => t::MAX_STREAMS_UNI,
            Frame::DataBlocked { .. } => t::DATA_BLOCKED,
            Frame::StreamDataBlocked { .. } => t::STREAM_DATA_BLOCKED,
            Frame::StreamsBlocked { dir: Dir::Bi, .. } => t::STREAMS_BLOCKED_BIDI,
            Frame::StreamsBlocked { dir: Dir::Uni, .. } => t::STREAMS_BLOCKED_UNI,
            Frame::NewConnectionId { .. } => t::NEW_CONNECTION_ID,
            Frame::RetireConnectionId { .. } => t::RETIRE_CONNECTION_ID,
            Frame::PathChallenge(_) => t::PATH_CHALLENGE,
            Frame::PathResponse(_) => t::PATH_RESPONSE,
            Frame::ConnectionClose {
                frame_type: Some(_),
                ..
            } => t::CONNECTION_CLOSE,
            Frame::ConnectionClose {
                frame_type: None, ..
            } => t::CONNECTION_CLOSE_APP,
            Frame::HandshakeDone => t::HANDSHAKE_DONE,
            Frame::Datagram { .. } => t::DATAGRAM_LEN,
            Frame::ArtqFec(_) => t::ARTQ_FEC,
        }
    }

    /// True unless the frame is ACK, PADDING or CONNECTION_CLOSE: a packet
    /// with any other frame must be acknowledged (RFC 9002 §2).
    pub fn is_ack_eliciting(&self) -> bool {
        !matches!(
            self,
            Frame::Ack(_) | Frame::Padding { .. } | Frame::ConnectionClose { .. }
        )
    }

    /// True if the frame may appear in Initial and Handshake packets: PADDING,
    /// PING, ACK, CRYPTO and transport CONNECTION_CLOSE (RFC 9000 §12.4, §12.5).
    pub fn allowed_in_long_header(&self) -> bool {
        matches!(
            self,
            Frame::Padding { .. }
                | Frame::Ping
                | Frame::Ack(_)
                | Frame::Crypto { .. }
                | Frame::ConnectionClose {
                    frame_type: Some(_),
                    ..
                }
        )
    }

    /// True if the frame may appear in a 0-RTT packet: everything but ACK,
    /// CRYPTO, HANDSHAKE_DONE, NEW_TOKEN, PATH_RESPONSE and
    /// RETIRE_CONNECTION_ID (RFC 9000 §12.5).
    pub fn allowed_in_zero_rtt(&self) -> bool {
        !matches!(
            self,
            Frame::Ack(_)
                | Frame::Crypto { .. }
                | Frame::HandshakeDone
                | Frame::NewToken { .. }
                | Frame::PathResponse(_)
                | Frame::RetireConnectionId { .. }
        )
    }

    /// Appends the frame's wire encoding to `out`. Values are assumed valid
    /// (they were produced locally or decoded by [`FrameIter`]); an ACK with
    /// no ranges is a caller bug (debug assert; nothing is written).
    pub fn encode(&self, out: &mut Vec<u8>) {
        use frame_type as t;
        match self {
            Frame::Padding { len } => out.resize(out.len() + len, 0),
            Frame::Ping => out.put_u8(t::PING as u8),
            Frame::Ack(ack) => {
                write::write_ack_inclusive(out, &ack.ranges, ack.delay, ack.ecn.as_ref())
            }
            Frame::ResetStream {
                id,
                error_code,
                final_size,
            } => {
                out.put_u8(t::RESET_STREAM as u8);
                out.put_varint(id.0);
                out.put_varint(*error_code);
                out.put_varint(*final_size);
            }
            Frame::StopSending { id, error_code } => {
                out.put_u8(t::STOP_SENDING as u8);
                out.put_varint(id.0);
                out.put_varint(*error_code);
            }
            Frame::Crypto { offset, data } => {
                write_crypto_header(out, *offset, data.len());
                out.put_slice(data);
            }
            Frame::NewToken { token } => {
                out.put_u8(t::NEW_TOKEN as u8);
                out.put_varint(token.len() as u64);
                out.put_slice(token);
            }
            Frame::Stream {
                id,
                offset,
                fin,
                data,
            } => {
                write_stream_header(out, *id, *offset, data.len(), *fin);
                out.put_slice(data);
            }
            Frame::MaxData(max) => {
                out.put_u8(t::MAX_DATA as u8);
                out.put_varint(*max);
            }
            Frame::MaxStreamData { id, max } => {
                out.put_u8(t::MAX_STREAM_DATA as u8);
                out.put_varint(id.0);
                out.put_varint(*max);
            }
            Frame::MaxStreams { count, .. } => {
                out.put_u8(self.ty() as u8);
                out.put_varint(*count);
            }
            Frame::DataBlocked { limit } => {
                out.put_u8(t::DATA_BLOCKED as u8);
                out.put_varint(*limit);
            }
            Frame::StreamDataBlocked { id, limit } => {
                out.put_u8(t::STREAM_DATA_BLOCKED as u8);
                out.put_varint(id.0);
                out.put_varint(*limit);
            }
            Frame::StreamsBlocked { limit, .. } => {
                out.put_u8(self.ty() as u8);
                out.put_varint(*limit);
            }
            Frame::NewConnectionId {
                sequence,
                retire_prior_to,
                cid,
                reset_token,
            } => {
                out.put_u8(t::NEW_CONNECTION_ID as u8);
                out.put_varint(*sequence);
                out.put_varint(*retire_prior_to);
                // A ConnectionId is at most 20 bytes.
                out.put_u8(cid.len() as u8);
                out.put_slice(cid);
                out.put_slice(reset_token);
            }
            Frame::RetireConnectionId { sequence } => {
                out.put_u8(t::RETIRE_CONNECTION_ID as u8);
                out.put_varint(*sequence);
            }
            Frame::PathChallenge(data) => {
                out.put_u8(t::PATH_CHALLENGE as u8);
                out.put_slice(data);
            }
            Frame::PathResponse(data) => {
                out.put_u8(t::PATH_RESPONSE as u8);
                out.put_slice(data);
            }
            Frame::ConnectionClose {
                error_code,
                frame_type,
                reason,
            } => {
                out.put_u8(self.ty() as u8);
                out.put_varint(*error_code);
                if let Some(ft) = frame_type {
                    out.put_varint(*ft);
                }
                out.put_varint(reason.len() as u64);
                out.put_slice(reason);
            }
            Frame::HandshakeDone => out.put_u8(t::HANDSHAKE_DONE as u8),
            Frame::Datagram { data } => {
                write_datagram_header(out, data.len());
                out.put_slice(data);
            }
            Frame::ArtqFec(f) => {
                out.put_varint(t::ARTQ_FEC);
                out.put_varint(f.first_pn);
                out.put_varint(f.count);
                out.put_slice(f.deltas);
                out.put_varint(f.repair.len() as u64);
                out.put_slice(f.repair);
            }
        }
    }
}

/// STREAM type byte with LEN always set, OFF when `offset` is non-zero.
fn stream_type(offset: u64, fin: bool) -> u64 {
    let mut ty = frame_type::STREAM | frame_type::STREAM_LEN_BIT;
    if offset != 0 {
        ty |= frame_type::STREAM_OFF_BIT;
    }
    if fin {
        ty |= frame_type::STREAM_FIN_BIT;
    }
    ty
}
