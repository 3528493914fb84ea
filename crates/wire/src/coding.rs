//! Bounds-checked reading and appending of network-order integers and varints.
//!
//! [`Reader`] is the only way the decoders in this crate look at untrusted
//! bytes: every read checks the remaining length and returns
//! [`DecodeError::UnexpectedEnd`] rather than panicking. [`BufMutExt`] appends
//! to a `Vec<u8>`; encoders take values the local endpoint produced, so an
//! out-of-range value there is a caller bug (debug-asserted, clamped in
//! release builds).

use crate::error::DecodeError;
use crate::varint::VarInt;

/// A cursor over untrusted bytes. Reads never panic.
#[derive(Clone, Debug)]
pub struct Reader<'a> {
    /// The bytes not yet consumed.
    rest: &'a [u8],
    /// Length of the slice the reader was created over (for [`Reader::position`]).
    total: usize,
}

impl<'a> Reader<'a> {
    /// A reader positioned at the start of `buf`.
    #[inline]
    pub fn new(buf: &'a [u8]) -> Self {
        Reader {
            rest: buf,
            total: buf.len(),
        }
    }

    /// Bytes left to read.
    #[inline]
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }

    /// Bytes consumed so far (offset of the next read from the start).
    #[inline]
    pub fn position(&self) -> usize {
        self.total - self.rest.len()
    }

    /// True when nothing is left to read.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// The next byte, without consuming it.
    #[inline]
    pub fn peek_u8(&self) -> Option<u8> {
        self.rest.first().copied()
    }

    /// Consumes exactly `N` bytes as an array.
    #[inline]
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let (head, tail) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or(DecodeError::UnexpectedEnd)?;
        self.rest = tail;
        Ok(*head)
    }

    /// One byte.
    #[inline]
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        let (&b, tail) = self.rest.split_first().ok_or(DecodeError::UnexpectedEnd)?;
        self.rest = tail;
        Ok(b)
    }

    /// A big-endian `u16`.
    #[inline]
    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        self.array().map(u16::from_be_bytes)
    }

    /// A big-endian `u32`.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        self.array().map(u32::from_be_bytes)
    }

    /// A big-endian `u64`.
    #[inline]
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        self.array().map(u64::from_be_bytes)
    }

    /// A variable-length integer (RFC 9000 §16). Non-minimal encodings are
    /// accepted, as the RFC requires for most fields.
    #[inline]
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let first = self.peek_u8().ok_or(DecodeError::UnexpectedEnd)?;
        let value = match first >> 6 {
            0 => u64::from(self.u8()?),
            1 => u64::from(u16::from_be_bytes(self.array()?) & 0x3fff),
            2 => u64::from(u32::from_be_bytes(self.array()?) & 0x3fff_ffff),
            _ => u64::from_be_bytes(self.array()?) & 0x3fff_ffff_ffff_ffff,
        };
        Ok(value)
    }

    /// A varint as a [`VarInt`].
    #[inline]
    pub fn var(&mut self) -> Result<VarInt, DecodeError> {
        // A decoded varint is always <= 2^62-1.
        self.varint().map(VarInt::saturating_from_u64)
    }

    /// The next `n` bytes, borrowed from the input.
    #[inline]
    pub fn bytes(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self
            .rest
            .split_at_checked(n)
            .ok_or(DecodeError::UnexpectedEnd)?;
        self.rest = tail;
        Ok(head)
    }

    /// The next `n` bytes, where `n` came off the wire as a `u64`.
    #[inline]
    pub fn bytes_u64(&mut self, n: u64) -> Result<&'a [u8], DecodeError> {
        let n = usize::try_from(n).map_err(|_| DecodeError::UnexpectedEnd)?;
        self.bytes(n)
    }

    /// Skips `n` bytes.
    #[inline]
    pub fn skip(&mut self, n: usize) -> Result<(), DecodeError> {
        self.bytes(n).map(|_| ())
    }

    /// Everything left; the reader is empty afterwards.
    #[inline]
    pub fn rest(&mut self) -> &'a [u8] {
        core::mem::take(&mut self.rest)
    }

    /// Everything left, without consuming it.
    #[inline]
    pub fn peek_rest(&self) -> &'a [u8] {
        self.rest
    }
}

/// Appending network-order integers and varints to a buffer.
pub trait BufMutExt {
    /// Appends one byte.
    fn put_u8(&mut self, v: u8);
    /// Appends a big-endian `u16`.
    fn put_u16(&mut self, v: u16);
    /// Appends a big-endian `u32`.
    fn put_u32(&mut self, v: u32);
    /// Appends a big-endian `u64`.
    fn put_u64(&mut self, v: u64);
    /// Appends `v` as a minimal varint (RFC 9000 §16). Values above
    /// [`VarInt::MAX`] are a caller bug: debug builds assert, release builds
    /// encode [`VarInt::MAX`].
    fn put_varint(&mut self, v: u64);
    /// Appends `v` as a varint of exactly `len` bytes (1, 2, 4 or 8), e.g. a
    /// length placeholder patched later with [`encode_varint_fixed_into`].
    /// A value too big for `len`, or a bad `len`, is a caller bug (debug
    /// assert; release builds round `len` up to a valid size and clamp `v`).
    fn put_varint_fixed(&mut self, v: u64, len: usize);
    /// Appends raw bytes.
    fn put_slice(&mut self, bytes: &[u8]);
}

impl BufMutExt for Vec<u8> {
    #[inline]
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }

    #[inline]
    fn put_u16(&mut self, v: u16) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    #[inline]
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    #[inline]
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_be_bytes());
    }

    #[inline]
    fn put_varint(&mut self, v: u64) {
        debug_assert!(v <= VarInt::MAX.into_inner(), "varint {v} exceeds 2^62-1");
        let v = v.min(VarInt::MAX.into_inner());
        // RFC 9000 §16: the length prefix goes into the two top bits.
        if v < (1 << 6) {
            self.push(v as u8);
        } else if v < (1 << 14) {
            self.extend_from_slice(&((v as u16) | 0x4000).to_be_bytes());
        } else if v < (1 << 30) {
            self.extend_from_slice(&((v as u32) | 0x8000_0000).to_be_bytes());
        } else {
            self.extend_from_slice(&(v | 0xc000_0000_0000_0000).to_be_bytes());
        }
    }

    #[inline]
    fn put_varint_fixed(&mut self, v: u64, len: usize) {
        let len = fixed_len(len);
        let start = self.len();
        self.resize(start + len, 0);
        encode_varint_fixed_into(&mut self[start..], v);
    }

    #[inline]
    fn put_slice(&mut self, bytes: &[u8]) {
        self.extend_from_slice(bytes);
    }
}

/// Rounds a requested fixed varint length to a valid one (1, 2, 4, 8).
fn fixed_len(len: usize) -> usize {
    debug_assert!(
        matches!(len, 1 | 2 | 4 | 8),
        "invalid fixed varint length {len}"
    );
    match len {
        0 | 1 => 1,
        2 => 2,
        3 | 4 => 4,
        _ => 8,
    }
}

/// Overwrites `out` with `v` as a varint of exactly `out.len()` bytes (which
/// must be 1, 2, 4 or 8): fills a placeholder written by
/// [`BufMutExt::put_varint_fixed`]. A value too big for the length is a
/// caller bug: debug builds assert, release builds clamp it to the largest
/// value of that length. Other lengths are left untouched (debug assert).
pub fn encode_varint_fixed_into(out: &mut [u8], v: u64) {
    let (max, prefix): (u64, u64) = match out.len() {
        1 => ((1 << 6) - 1, 0),
        2 => ((1 << 14) - 1, 0x4000),
        4 => ((1 << 30) - 1, 0x8000_0000),
        8 => (VarInt::MAX.into_inner(), 0xc000_0000_0000_0000),
        other => {
            debug_assert!(false, "invalid fixed varint length {other}");
            return;
        }
    };
    debug_assert!(v <= max, "varint {v} does not fit in {} bytes", out.len());
    let encoded = (v.min(max) | prefix).to_be_bytes();
    let len = out.len();
    out.copy_from_slice(&encoded[8 - len..]);
}

/// Reads a varint from the start of `buf`: the value and its encoded length.
pub fn decode_varint(buf: &[u8]) -> Result<(u64, usize), DecodeError> {
    let mut r = Reader::new(buf);
    let v = r.varint()?;
    Ok((v, r.position()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::varint::varint_len;
    use proptest::prelude::*;

    fn enc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        out.put_varint(v);
        out
    }

    /// RFC 9000 Appendix A.1 examples.
    #[test]
    fn rfc9000_a1_examples() {
        let cases: [(&str, u64); 4] = [
            ("c2197c5eff14e88c", 151_288_809_941_952_652),
            ("9d7f3e7d", 494_878_333),
            ("7bbd", 15_293),
            ("25", 37),
        ];
        for (hex_str, value) in cases {
            let bytes = hex::decode(hex_str).unwrap();
            assert_eq!(Reader::new(&bytes).varint(), Ok(value), "{hex_str}");
            assert_eq!(hex::encode(enc(value)), hex_str);
        }
        // "the two-byte sequence 0x40 0x25 also decodes to 37"
        assert_eq!(Reader::new(&[0x40, 0x25]).varint(), Ok(37));
        assert_eq!(decode_varint(&[0x40, 0x25]), Ok((37, 2)));
    }

    #[test]
    fn truncated_reads_are_unexpected_end() {
        assert_eq!(Reader::new(&[]).u8(), Err(DecodeError::UnexpectedEnd));
        assert_eq!(Reader::new(&[1]).u16(), Err(DecodeError::UnexpectedEnd));
        assert_eq!(
            Reader::new(&[1, 2, 3]).u32(),
            Err(DecodeError::UnexpectedEnd)
        );
        assert_eq!(Reader::new(&[0; 7]).u64(), Err(DecodeError::UnexpectedEnd));
        assert_eq!(
            Reader::new(&[0x40]).varint(),
            Err(DecodeError::UnexpectedEnd)
        );
        assert_eq!(
            Reader::new(&[0x80, 0, 0]).varint(),
            Err(DecodeError::UnexpectedEnd)
        );
        assert_eq!(
            Reader::new(&[0xc0; 7]).varint(),
            Err(DecodeError::UnexpectedEnd)
        );
        assert_eq!(
            Reader::new(&[1, 2]).bytes(3),
            Err(DecodeError::UnexpectedEnd)
        );
        assert_eq!(
            Reader::new(&[1, 2]).bytes_u64(u64::MAX),
            Err(DecodeError::UnexpectedEnd)
        );
    }

    #[test]
    fn reader_positions() {
        let data = [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07];
        let mut r = Reader::new(&data);
        assert_eq!(r.peek_u8(), Some(1));
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0203));
        assert_eq!(r.position(), 3);
        assert_eq!(r.remaining(), 4);
        assert_eq!(r.bytes(2), Ok(&data[3..5]));
        assert_eq!(r.rest(), &data[5..]);
        assert!(r.is_empty());
        assert_eq!(r.position(), data.len());
        assert_eq!(r.peek_u8(), None);
        assert_eq!(r.rest(), &[] as &[u8]);
    }

    #[test]
    fn fixed_length_varints() {
        let mut out = Vec::new();
        out.put_varint_fixed(37, 2);
        assert_eq!(out, [0x40, 0x25]);
        out.clear();
        out.put_varint_fixed(0, 4);
        assert_eq!(out, [0x80, 0, 0, 0]);
        out.clear();
        out.put_varint_fixed(5, 8);
        assert_eq!(Reader::new(&out).varint(), Ok(5));
        assert_eq!(out.len(), 8);
        let mut placeholder = [0u8; 2];
        encode_varint_fixed_into(&mut placeholder, 1200);
        assert_eq!(Reader::new(&placeholder).varint(), Ok(1200));
    }

    #[test]
    fn integers_are_big_endian() {
        let mut out = Vec::new();
        out.put_u8(1);
        out.put_u16(0x0203);
        out.put_u32(0x0405_0607);
        out.put_u64(0x0809_0a0b_0c0d_0e0f);
        out.put_slice(&[0x10]);
        assert_eq!(out, (1..=0x10).collect::<Vec<u8>>());
        let mut r = Reader::new(&out);
        assert_eq!(r.u8(), Ok(1));
        assert_eq!(r.u16(), Ok(0x0203));
        assert_eq!(r.u32(), Ok(0x0405_0607));
        assert_eq!(r.u64(), Ok(0x0809_0a0b_0c0d_0e0f));
        assert_eq!(r.array::<1>(), Ok([0x10]));
    }

    proptest! {
        #[test]
        fn varint_round_trip(v in 0u64..=VarInt::MAX.into_inner()) {
            let bytes = enc(v);
            prop_assert_eq!(bytes.len(), varint_len(v));
            let mut r = Reader::new(&bytes);
            prop_assert_eq!(r.varint(), Ok(v));
            prop_assert!(r.is_empty());
        }

        #[test]
        fn fixed_varint_round_trip(v in 0u64..(1 << 30), pick in 0usize..3) {
            let len = [4usize, 8, 4][pick].max(varint_len(v));
            let mut out = Vec::new();
            out.put_varint_fixed(v, len);
            prop_assert_eq!(out.len(), len);
            prop_assert_eq!(Reader::new(&out).varint(), Ok(v));
        }

        #[test]
        fn reader_never_panics(data in proptest::collection::vec(any::<u8>(), 0..32), n in 0usize..40) {
            let mut r = Reader::new(&data);
            let _ = r.varint();
            let _ = r.bytes(n);
            let _ = r.u32();
            prop_assert!(r.position() <= data.len());
        }
    }
}
