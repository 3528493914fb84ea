//! Frame header writers for the send path, and ACK encoding.
//!
//! The `*_header` writers append everything of a STREAM, CRYPTO or DATAGRAM
//! frame but its data, so the caller copies the data once, straight after.
//! The `*_header_len` functions give the exact size the writer will produce,
//! and the `*_data_capacity` functions the most data that fits in a budget.

use core::ops::{Range, RangeInclusive};

use super::{frame_type, stream_type, EcnCounts};
use crate::coding::BufMutExt;
use crate::side::StreamId;
use crate::varint::varint_len;

/// Size of the STREAM frame header [`write_stream_header`] writes: type byte,
/// stream ID, Offset (when non-zero) and Length.
#[inline]
pub fn stream_header_len(id: StreamId, offset: u64, len: usize) -> usize {
    let off = if offset != 0 { varint_len(offset) } else { 0 };
    1 + varint_len(id.0) + off + varint_len(len as u64)
}

/// Appends a STREAM frame header (RFC 9000 §19.8) with the LEN bit set, the
/// OFF bit when `offset` is non-zero, and FIN as asked. The caller appends
/// exactly `len` data bytes right after.
#[inline]
pub fn write_stream_header(out: &mut Vec<u8>, id: StreamId, offset: u64, len: usize, fin: bool) {
    out.put_u8(stream_type(offset, fin) as u8);
    out.put_varint(id.0);
    if offset != 0 {
        out.put_varint(offset);
    }
    out.put_varint(len as u64);
}

/// Size of the CRYPTO frame header [`write_crypto_header`] writes.
#[inline]
pub fn crypto_header_len(offset: u64, len: usize) -> usize {
    1 + varint_len(offset) + varint_len(len as u64)
}

/// Appends a CRYPTO frame header (RFC 9000 §19.6); the caller appends `len`
/// data bytes right after.
#[inline]
pub fn write_crypto_header(out: &mut Vec<u8>, offset: u64, len: usize) {
    out.put_u8(frame_type::CRYPTO as u8);
    out.put_varint(offset);
    out.put_varint(len as u64);
}

/// Size of the DATAGRAM frame header [`write_datagram_header`] writes.
#[inline]
pub fn datagram_header_len(len: usize) -> usize {
    1 + varint_len(len as u64)
}

/// Appends a DATAGRAM frame header with a Length field (type 0x31, RFC 9221
/// §4); the caller appends `len` data bytes right after.
#[inline]
pub fn write_datagram_header(out: &mut Vec<u8>, len: usize) {
    out.put_u8(frame_type::DATAGRAM_LEN as u8);
    out.put_varint(len as u64);
}

/// The most data bytes `n` such that `fixed + varint_len(n) + n <= space`,
/// or `None` if not even an empty frame fits.
fn data_capacity(fixed: usize, space: usize) -> Option<usize> {
    let avail = space.checked_sub(fixed)?;
    // Lengths above 2^30 cannot occur in a UDP packet; capping keeps varint_len in range.
    let avail = avail.min(1 << 30);
    if avail == 0 {
        return None;
    }
    let mut n = avail - varint_len(avail as u64).min(avail);
    // At a varint size boundary one more byte may fit with a shorter Length.
    while n + 1 + varint_len(n as u64 + 1) <= avail {
        n += 1;
    }
    Some(n)
}

/// How many data bytes a STREAM frame for `id` at `offset` can carry within
/// `space` bytes (header included); `None` if not even an empty frame fits.
pub fn stream_data_capacity(id: StreamId, offset: u64, space: usize) -> Option<usize> {
    let off = if offset != 0 { varint_len(offset) } else { 0 };
    data_capacity(1 + varint_len(id.0) + off, space)
}

/// How many data bytes a CRYPTO frame at `offset` can carry within `space`
/// bytes (header included); `None` if not even an empty frame fits.
pub fn crypto_data_capacity(offset: u64, space: usize) -> Option<usize> {
    data_capacity(1 + varint_len(offset), space)
}

/// How many payload bytes a DATAGRAM frame can carry within `space` bytes
/// (header included); `None` if not even an empty frame fits.
pub fn datagram_data_capacity(space: usize) -> Option<usize> {
    data_capacity(1, space)
}

/// Feeds each varint field of an ACK frame to `field`, in wire order (type
/// included). `ranges` are inclusive `(smallest, largest)` pairs, highest
/// first. Returns false (having fed nothing) if `ranges` is empty.
fn ack_fields<I>(ranges: I, delay: u64, ecn: Option<&EcnCounts>, mut field: impl FnMut(u64)) -> bool
where
    I: Iterator<Item = (u64, u64)> + Clone,
{
    let count = ranges.clone().count();
    let mut iter = ranges;
    let Some((first_lo, first_hi)) = iter.next() else {
        debug_assert!(false, "ACK frame without ranges");
        return false;
    };
    field(if ecn.is_some() {
        frame_type::ACK_ECN
    } else {
        frame_type::ACK
    });
    // RFC 9000 §19.3: Largest Acknowledged, ACK Delay, ACK Range Count, First ACK Range.
    field(first_hi);
    field(delay);
    field(count as u64 - 1);
    field(first_hi.saturating_sub(first_lo));
    let mut prev_lo = first_lo;
    for (lo, hi) in iter {
        // RFC 9000 §19.3.1: Gap = previous smallest - this largest - 2.
        debug_assert!(
            hi.saturating_add(2) <= prev_lo,
            "ACK ranges overlap or touch"
        );
        field(prev_lo.saturating_sub(hi).saturating_sub(2));
        field(hi.saturating_sub(lo));
        prev_lo = lo;
    }
    if let Some(e) = ecn {
        field(e.ect0);
        field(e.ect1);
        field(e.ce);
    }
    true
}

/// Half-open ranges as inclusive pairs, skipping empty ones (a caller bug).
fn half_open(ranges: &[Range<u64>]) -> impl Iterator<Item = (u64, u64)> + Clone + '_ {
    ranges.iter().filter_map(|r| {
        debug_assert!(r.start < r.end, "empty ACK range {r:?}");
        (r.start < r.end).then(|| (r.start, r.end - 1))
    })
}

/// Appends an ACK (or ACK_ECN when `ecn` is given) frame, RFC 9000 §19.3.
///
/// `ranges_descending` are half-open ranges of received packet numbers,
/// highest first, non-overlapping and non-adjacent; the caller guarantees at
/// least one. `delay` is the already-scaled ACK Delay field.
pub fn write_ack(
    out: &mut Vec<u8>,
    ranges_descending: &[Range<u64>],
    delay: u64,
    ecn: Option<&EcnCounts>,
) {
    ack_fields(half_open(ranges_descending), delay, ecn, |v| {
        out.put_varint(v)
    });
}

/// Size in bytes of the frame [`write_ack`] would write for these arguments.
pub fn ack_frame_len(
    ranges_descending: &[Range<u64>],
    delay: u64,
    ecn: Option<&EcnCounts>,
) -> usize {
    let mut len = 0;
    ack_fields(half_open(ranges_descending), delay, ecn, |v| {
        len += varint_len(v)
    });
    len
}

/// An upper bound on [`ack_frame_len`] for `ranges` ranges, from their
/// count alone: every field at the longest varint (8 bytes). A sender with
/// that much room writes the frame without measuring it first (measuring
/// walks the ranges once more, about 0.6% of a simulated bulk transfer's
/// instructions).
pub fn ack_frame_len_bound(ranges: usize, ecn: bool) -> usize {
    // Type, Largest Acknowledged, ACK Delay, ACK Range Count, First ACK
    // Range; a gap and a length per further range; three ECN counts.
    let fields = 5 + 2 * ranges.saturating_sub(1) + if ecn { 3 } else { 0 };
    fields.saturating_mul(8)
}

/// [`write_ack`] for the inclusive ranges of a decoded [`super::AckFrame`].
pub(super) fn write_ack_inclusive(
    out: &mut Vec<u8>,
    ranges: &[RangeInclusive<u64>],
    delay: u64,
    ecn: Option<&EcnCounts>,
) {
    let pairs = ranges.iter().map(|r| (*r.start(), *r.end()));
    ack_fields(pairs, delay, ecn, |v| out.put_varint(v));
}
