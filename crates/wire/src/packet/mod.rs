//! QUIC packet headers (RFC 9000 §17, version-independent parts RFC 8999).
//!
//! Decoding works on *protected* packets: header protection (RFC 9001 §5.4)
//! still hides the low bits of the first byte and the packet number, so
//! [`decode_protected`] stops at the packet number and reports where it is
//! ([`ProtectedHeader`]'s `pn_offset`). The caller removes header protection,
//! reads the packet number with [`decode_pn`], and decrypts the payload.
//!
//! Encoding is the mirror image: the `write_*` functions append a header with
//! a plaintext packet number to an output buffer and report offsets; the
//! caller appends frames and the AEAD tag, patches the Length field of a long
//! header with [`set_long_length`], then applies protection.

mod number;

pub use number::{decode_pn, pn_len_for, truncate_pn, MAX_PACKET_NUMBER};

use crate::cid::ConnectionId;
use crate::coding::{encode_varint_fixed_into, BufMutExt, Reader};
use crate::error::DecodeError;
use crate::version::Version;

/// QUIC version 1 (RFC 9000 §15), as on the wire.
pub const QUIC_V1: u32 = Version::V1.wire();

/// Header Form bit: set for long headers (RFC 9000 §17.2).
pub const LONG_HEADER_FORM: u8 = 0x80;
/// Fixed Bit: always set in v1 packets, unless greased (RFC 9000 §17.2, RFC 9287).
pub const FIXED_BIT: u8 = 0x40;
/// Key Phase bit of a short header (RFC 9000 §17.3.1). Header-protected.
pub const KEY_PHASE_BIT: u8 = 0x04;
/// Latency Spin Bit of a short header (RFC 9000 §17.4).
pub const SPIN_BIT: u8 = 0x20;
/// Smallest UDP payload for a datagram carrying a client Initial packet
/// (RFC 9000 §14.1).
pub const MIN_INITIAL_SIZE: usize = 1200;
/// Length of the Retry Integrity Tag (RFC 9001 §5.8).
pub const RETRY_INTEGRITY_TAG_LEN: usize = 16;

/// Largest value of the 2-byte Length placeholder written by
/// [`write_long_header`].
const MAX_LONG_LENGTH: usize = (1 << 14) - 1;

/// The type of a long-header packet (RFC 9000 §17.2). Its bits on the wire
/// depend on the version: [`Version::long_type_bits`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum LongType {
    /// Initial (type 0x0): carries the first CRYPTO data and may carry a token.
    Initial,
    /// 0-RTT (type 0x1): early application data.
    ZeroRtt,
    /// Handshake (type 0x2): the rest of the TLS handshake.
    Handshake,
    /// Retry (type 0x3): a server's address validation request.
    Retry,
}

/// A packet header as far as it can be read before header protection is
/// removed. Borrowed fields point into the datagram.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtectedHeader<'a> {
    /// An Initial, 0-RTT or Handshake packet (never Retry).
    Long {
        /// Packet type.
        ty: LongType,
        /// The version of the packet (one we implement).
        version: Version,
        /// Destination connection ID.
        dst_cid: ConnectionId,
        /// Source connection ID.
        src_cid: ConnectionId,
        /// The Token field; Initial only, else empty.
        token: &'a [u8],
        /// Offset of the (protected) packet number from the start of this packet.
        pn_offset: usize,
        /// Length of this packet: header through the end of the payload as
        /// given by its Length field. The next coalesced packet starts here.
        len: usize,
    },
    /// A Retry packet (RFC 9000 §17.2.5); it fills the rest of the datagram.
    Retry {
        /// The version of the packet (one we implement).
        version: Version,
        /// Destination connection ID (the client's source CID).
        dst_cid: ConnectionId,
        /// Source connection ID (chosen by the server).
        src_cid: ConnectionId,
        /// The Retry Token. May be empty here; the client must then discard
        /// the packet (RFC 9000 §17.2.5.2).
        token: &'a [u8],
        /// Retry Integrity Tag (RFC 9001 §5.8).
        integrity_tag: [u8; 16],
        /// Length of the packet (the rest of the datagram).
        len: usize,
    },
    /// A 1-RTT packet (RFC 9000 §17.3.1); it fills the rest of the datagram.
    Short {
        /// Destination connection ID (of the locally known length).
        dst_cid: ConnectionId,
        /// Offset of the (protected) packet number: `1 + dst_cid.len()`.
        pn_offset: usize,
        /// Length of the packet (the rest of the datagram).
        len: usize,
    },
    /// A Version Negotiation packet (RFC 9000 §17.2.1); fills the datagram.
    VersionNegotiation {
        /// Destination connection ID.
        dst_cid: ConnectionId,
        /// Source connection ID.
        src_cid: ConnectionId,
        /// The versions the server supports.
        versions: Vec<u32>,
    },
    /// A long header with a version we do not implement: only the RFC 8999
    /// invariant fields are read, enough to answer with Version Negotiation.
    UnsupportedVersion {
        /// The version the peer used.
        version: u32,
        /// Destination connection ID.
        dst_cid: ConnectionId,
        /// Source connection ID.
        src_cid: ConnectionId,
    },
}

impl ProtectedHeader<'_> {
    /// The destination connection ID (every header has one).
    pub fn dst_cid(&self) -> &ConnectionId {
        match self {
            ProtectedHeader::Long { dst_cid, .. }
            | ProtectedHeader::Retry { dst_cid, .. }
            | ProtectedHeader::Short { dst_cid, .. }
            | ProtectedHeader::VersionNegotiation { dst_cid, .. }
            | ProtectedHeader::UnsupportedVersion { dst_cid, .. } => dst_cid,
        }
    }

    /// The source connection ID (long headers only).
    pub fn src_cid(&self) -> Option<&ConnectionId> {
        match self {
            ProtectedHeader::Long { src_cid, .. }
            | ProtectedHeader::Retry { src_cid, .. }
            | ProtectedHeader::VersionNegotiation { src_cid, .. }
            | ProtectedHeader::UnsupportedVersion { src_cid, .. } => Some(src_cid),
            ProtectedHeader::Short { .. } => None,
        }
    }

    /// Length of this packet within the datagram, or `None` when it is "the
    /// rest of the datagram" and not recorded (Version Negotiation, unsupported
    /// versions).
    pub fn packet_len(&self) -> Option<usize> {
        match *self {
            ProtectedHeader::Long { len, .. }
            | ProtectedHeader::Retry { len, .. }
            | ProtectedHeader::Short { len, .. } => Some(len),
            _ => None,
        }
    }

    /// Offset of the protected packet number, for packets that have one.
    pub fn pn_offset(&self) -> Option<usize> {
        match *self {
            ProtectedHeader::Long { pn_offset, .. } | ProtectedHeader::Short { pn_offset, .. } => {
                Some(pn_offset)
            }
            _ => None,
        }
    }
}

/// Parses the header of the first packet in `packet` without removing header
/// protection. `short_dcid_len` is the length of the connection IDs this
/// endpoint issues (short headers do not carry it).
///
/// A datagram may hold several coalesced long-header packets (RFC 9000
/// §12.2): process the first, then call again on `&packet[len..]`.
/// Packets whose Fixed Bit is clear are rejected (RFC 9000 §17.2); see
/// [`decode_protected_with`] to accept them after negotiating
/// grease_quic_bit. Never panics.
pub fn decode_protected(
    packet: &[u8],
    short_dcid_len: usize,
) -> Result<ProtectedHeader<'_>, DecodeError> {
    decode_protected_with(packet, short_dcid_len, true)
}

/// [`decode_protected`], with the Fixed Bit check optional: an endpoint that
/// advertised grease_quic_bit must accept packets with the bit clear
/// (RFC 9287 §3).
pub fn decode_protected_with(
    packet: &[u8],
    short_dcid_len: usize,
    require_fixed_bit: bool,
) -> Result<ProtectedHeader<'_>, DecodeError> {
    let mut r = Reader::new(packet);
    let first = r.u8()?;
    if first & LONG_HEADER_FORM == 0 {
        // RFC 9000 §17.3.1: 1-RTT packet.
        if require_fixed_bit && first & FIXED_BIT == 0 {
            return Err(DecodeError::InvalidHeader("fixed bit not set"));
        }
        if short_dcid_len > ConnectionId::MAX_LEN {
            return Err(DecodeError::InvalidHeader(
                "local connection ID length above 20",
            ));
        }
        let dst_cid = ConnectionId::new(r.bytes(short_dcid_len)?)?;
        if r.is_empty() {
            return Err(DecodeError::UnexpectedEnd);
        }
        return Ok(ProtectedHeader::Short {
            dst_cid,
            pn_offset: r.position(),
            len: packet.len(),
        });
    }

    // RFC 8999 §5.1: version and connection IDs are version-independent.
    let version = r.u32()?;
    let dst_cid = read_cid(&mut r)?;
    let src_cid = read_cid(&mut r)?;
    if version == 0 {
        // RFC 9000 §17.2.1: the rest is a list of 32-bit versions.
        let list = r.rest();
        if list.len() % 4 != 0 {
            return Err(DecodeError::InvalidHeader(
                "version list not a multiple of 4 bytes",
            ));
        }
        let versions = list
            .chunks_exact(4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        return Ok(ProtectedHeader::VersionNegotiation {
            dst_cid,
            src_cid,
            versions,
        });
    }
    let Some(version) = Version::from_wire(version) else {
        return Ok(ProtectedHeader::UnsupportedVersion {
            version,
            dst_cid,
            src_cid,
        });
    };
    if require_fixed_bit && first & FIXED_BIT == 0 {
        return Err(DecodeError::InvalidHeader("fixed bit not set"));
    }

    let ty = version.long_type_from_bits(first >> 4);
    let token = match ty {
        LongType::Retry => {
            // RFC 9000 §17.2.5: token then the 16-byte integrity tag, to the end.
            let rest = r.rest();
            let token_len = rest
                .len()
                .checked_sub(RETRY_INTEGRITY_TAG_LEN)
                .ok_or(DecodeError::UnexpectedEnd)?;
            let (token, tag) = rest.split_at(token_len);
            let mut integrity_tag = [0u8; RETRY_INTEGRITY_TAG_LEN];
            integrity_tag.copy_from_slice(tag);
            return Ok(ProtectedHeader::Retry {
                version,
                dst_cid,
                src_cid,
                token,
                integrity_tag,
                len: packet.len(),
            });
        }
        LongType::Initial => {
            // RFC 9000 §17.2.2: Token Length (varint) and Token.
            let token_len = r.varint()?;
            r.bytes_u64(token_len)?
        }
        LongType::ZeroRtt | LongType::Handshake => &[][..],
    };

    // RFC 9000 §17.2: Length covers the packet number and the payload.
    let length = r.varint()?;
    let pn_offset = r.position();
    if length == 0 {
        return Err(DecodeError::InvalidHeader("zero Length field"));
    }
    let len = usize::try_from(length)
        .ok()
        .and_then(|l| pn_offset.checked_add(l))
        .filter(|&end| end <= packet.len())
        .ok_or(DecodeError::UnexpectedEnd)?;
    Ok(ProtectedHeader::Long {
        ty,
        version,
        dst_cid,
        src_cid,
        token,
        pn_offset,
        len,
    })
}

/// A length-prefixed connection ID of a long header; v1 allows up to 20 bytes
/// (RFC 9000 §17.2). Other versions may use up to 255 (RFC 8999 §5.1); we
/// cannot hold those and report an invalid header.
fn read_cid(r: &mut Reader<'_>) -> Result<ConnectionId, DecodeError> {
    let len = r.u8()?;
    if usize::from(len) > ConnectionId::MAX_LEN {
        return Err(DecodeError::InvalidHeader(
            "connection ID longer than 20 bytes",
        ));
    }
    ConnectionId::new(r.bytes(usize::from(len))?)
}

/// The first byte of a long header: form and fixed bits, the type (its
/// bits as `version` numbers it), and `pn_len - 1` in the low two bits
/// (RFC 9000 §17.2). For Retry the low bits are unused and `pn_len` is
/// ignored.
pub fn first_byte_long(version: Version, ty: LongType, pn_len: usize) -> u8 {
    let low = match ty {
        LongType::Retry => 0,
        _ => pn_len_bits(pn_len),
    };
    LONG_HEADER_FORM | FIXED_BIT | (version.long_type_bits(ty) << 4) | low
}

/// `pn_len - 1` for the Packet Number Length bits. Lengths outside 1..=4 are
/// a caller bug (debug assert; clamped otherwise).
fn pn_len_bits(pn_len: usize) -> u8 {
    debug_assert!((1..=4).contains(&pn_len), "packet number length {pn_len}");
    (pn_len.clamp(1, 4) - 1) as u8
}

/// Appends the low `pn_len` bytes of `pn`, big-endian.
fn put_truncated_pn(out: &mut Vec<u8>, pn: u64, pn_len: usize) {
    let len = pn_len.clamp(1, 4);
    let bytes = truncate_pn(pn, len).to_be_bytes();
    out.extend_from_slice(&bytes[4 - len..]);
}

/// Appends a length-prefixed connection ID.
fn put_cid(out: &mut Vec<u8>, cid: &ConnectionId) {
    // A ConnectionId is at most 20 bytes, so its length fits a byte.
    out.put_u8(cid.len() as u8);
    out.put_slice(cid);
}

/// Where [`write_long_header`] put the fields the caller must revisit;
/// absolute indices into the output buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LongHeaderLayout {
    /// Offset of the 2-byte Length placeholder.
    pub len_offset: usize,
    /// Offset of the packet number.
    pub pn_offset: usize,
}

/// Appends an Initial, 0-RTT or Handshake header (RFC 9000 §17.2.2-4) with a
/// zeroed 2-byte Length placeholder and the packet number truncated to
/// `pn_len` bytes. `token` is written for Initial packets only (and must be
/// empty otherwise). Fill the Length in with [`set_long_length`] once the
/// packet is complete. Retry packets are written with [`write_retry`].
#[allow(clippy::too_many_arguments)]
pub fn write_long_header(
    out: &mut Vec<u8>,
    ty: LongType,
    version: Version,
    dst_cid: &ConnectionId,
    src_cid: &ConnectionId,
    token: &[u8],
    pn: u64,
    pn_len: usize,
) -> LongHeaderLayout {
    debug_assert!(ty != LongType::Retry, "use write_retry for Retry packets");
    debug_assert!(
        ty == LongType::Initial || token.is_empty(),
        "token outside Initial"
    );
    out.put_u8(first_byte_long(version, ty, pn_len));
    out.put_u32(version.wire());
    put_cid(out, dst_cid);
    put_cid(out, src_cid);
    if ty == LongType::Initial {
        out.put_varint(token.len() as u64);
        out.put_slice(token);
    }
    let len_offset = out.len();
    out.put_varint_fixed(0, 2);
    let pn_offset = out.len();
    put_truncated_pn(out, pn, pn_len);
    LongHeaderLayout {
        len_offset,
        pn_offset,
    }
}

/// Fills the Length placeholder of a header written by [`write_long_header`]:
/// `packet_end - layout.pn_offset`, i.e. packet number, payload and AEAD tag
/// (`packet_end` is the absolute end of the finished packet, tag included).
/// The length must fit the 2-byte placeholder (< 16384): a caller bug
/// otherwise (debug assert; clamped in release builds).
pub fn set_long_length(out: &mut [u8], layout: &LongHeaderLayout, packet_end: usize) {
    let length = packet_end.saturating_sub(layout.pn_offset);
    debug_assert!(
        packet_end > layout.pn_offset,
        "packet ends before its packet number"
    );
    debug_assert!(
        length <= MAX_LONG_LENGTH,
        "long header Length {length} needs > 2 bytes"
    );
    let length = length.min(MAX_LONG_LENGTH) as u64;
    let end = layout.len_offset.saturating_add(2);
    match out.get_mut(layout.len_offset..end) {
        Some(slot) => encode_varint_fixed_into(slot, length),
        None => debug_assert!(false, "Length placeholder outside the buffer"),
    }
}

/// Appends a 1-RTT short header (RFC 9000 §17.3.1) and returns the offset of
/// its packet number in `out`.
pub fn write_short_header(
    out: &mut Vec<u8>,
    spin: bool,
    key_phase: bool,
    dst_cid: &ConnectionId,
    pn: u64,
    pn_len: usize,
) -> usize {
    let mut first = FIXED_BIT | pn_len_bits(pn_len);
    if spin {
        first |= SPIN_BIT;
    }
    if key_phase {
        first |= KEY_PHASE_BIT;
    }
    out.put_u8(first);
    out.put_slice(dst_cid);
    let pn_offset = out.len();
    put_truncated_pn(out, pn, pn_len);
    pn_offset
}

/// Appends a Version Negotiation packet (RFC 9000 §17.2.1). `dst_cid` and
/// `src_cid` are the client's source and destination IDs, swapped by the
/// caller. The unused first-byte bits come from `first_byte_random`, with
/// 0x40 set as the RFC recommends.
pub fn write_version_negotiation(
    out: &mut Vec<u8>,
    dst_cid: &ConnectionId,
    src_cid: &ConnectionId,
    versions: &[u32],
    first_byte_random: u8,
) {
    out.put_u8(LONG_HEADER_FORM | FIXED_BIT | (first_byte_random & 0x3f));
    out.put_u32(0);
    put_cid(out, dst_cid);
    put_cid(out, src_cid);
    for &v in versions {
        out.put_u32(v);
    }
}

/// Appends a Retry packet *without* its integrity tag (RFC 9000 §17.2.5).
/// The caller computes the tag over [`write_retry_pseudo_packet`]'s output
/// (RFC 9001 §5.8) and appends it. The four unused first-byte bits come from
/// `first_byte_random`.
pub fn write_retry(
    out: &mut Vec<u8>,
    version: Version,
    dst_cid: &ConnectionId,
    src_cid: &ConnectionId,
    token: &[u8],
    first_byte_random: u8,
) {
    out.put_u8(first_byte_long(version, LongType::Retry, 1) | (first_byte_random & 0x0f));
    out.put_u32(version.wire());
    put_cid(out, dst_cid);
    put_cid(out, src_cid);
    out.put_slice(token);
}

/// Appends the Retry Pseudo-Packet (RFC 9001 §5.8): the original destination
/// connection ID, length-prefixed, followed by the Retry packet without its
/// tag. The AEAD over this (with empty plaintext) yields the integrity tag.
pub fn write_retry_pseudo_packet(
    out: &mut Vec<u8>,
    original_dst_cid: &ConnectionId,
    retry_without_tag: &[u8],
) {
    put_cid(out, original_dst_cid);
    out.put_slice(retry_without_tag);
}

#[cfg(test)]
mod tests;
