//! QPACK (RFC 9204) with a dynamic table of capacity 0: field sections
//! reference only the static table or carry literals.
//!
//! Why capacity 0: artq's workloads send a handful of short fields per
//! request, so the dynamic table would save a few bytes per request at the
//! cost of the encoder/decoder stream state machines, blocked streams and
//! their failure modes. With SETTINGS_QPACK_MAX_TABLE_CAPACITY 0 (our
//! default, sent explicitly), a conforming peer never inserts, every field
//! section has Required Insert Count 0, and our encoder never inserts
//! either. RFC 9204 §4.2 then lets us skip opening our own encoder and
//! decoder streams; a peer's are still accepted and checked
//! ([`streams`]).
//!
//! Layout: [`huffman`] (string coding), [`static_table`], prefixed integers
//! and string literals (this module), the field-section encoder and
//! decoder (this module), and the instruction checkers for the peer's
//! encoder and decoder streams ([`streams`]).

pub mod huffman;
pub mod static_table;
pub mod streams;

use self::static_table::Match;

/// Why a prefixed integer could not be read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntError {
    /// The input ends inside the integer.
    Incomplete,
    /// The value exceeds 2^62 - 1 (our bound, RFC 9204 §4.1.1 leaves it to
    /// the implementation).
    Overflow,
}

/// Largest integer we decode: the QUIC varint range.
pub const MAX_INT: u64 = (1 << 62) - 1;

/// Reads an integer with a `prefix_bits`-bit prefix (RFC 7541 §5.1) whose
/// first byte is `buf[*pos]`; advances `*pos` past it.
pub fn decode_int(buf: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<u64, IntError> {
    debug_assert!((1..=8).contains(&prefix_bits));
    let mask = (1u64 << prefix_bits) - 1;
    let mut at = *pos;
    let first = *buf.get(at).ok_or(IntError::Incomplete)?;
    at += 1;
    let mut value = u64::from(first) & mask;
    if value == mask {
        let mut shift = 0u32;
        loop {
            let byte = *buf.get(at).ok_or(IntError::Incomplete)?;
            at += 1;
            let part = u64::from(byte & 0x7f);
            // 62 bits fit in nine 7-bit groups; a tenth could only add zeros
            // or overflow, so it is refused either way.
            if shift > 56 || part > (MAX_INT >> shift) {
                return Err(IntError::Overflow);
            }
            value = value
                .checked_add(part << shift)
                .filter(|v| *v <= MAX_INT)
                .ok_or(IntError::Overflow)?;
            if byte & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
    }
    *pos = at;
    Ok(value)
}

/// Appends `value` with a `prefix_bits`-bit prefix; `flags` holds the bits
/// of the first byte above the prefix.
pub fn encode_int(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, value: u64) {
    debug_assert!((1..=8).contains(&prefix_bits));
    let mask = (1u64 << prefix_bits) - 1;
    if value < mask {
        out.push(flags | value as u8);
        return;
    }
    out.push(flags | mask as u8);
    let mut rest = value - mask;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Why a field section could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SectionError {
    /// The encoding is invalid or references the dynamic table:
    /// QPACK_DECOMPRESSION_FAILED, a connection error.
    Failed(&'static str),
    /// The decoded fields exceed the size limit (RFC 9114 §4.2.2 counting:
    /// name + value + 32 per field): a stream-level refusal. Carries the
    /// size counted when the limit was crossed.
    TooLarge(u64),
}

/// One decoded field line: a name and a value, raw bytes (validation is
/// the message layer's).
pub type FieldLine = (Vec<u8>, Vec<u8>);

/// RFC 9114 §4.2.2: a field's size for SETTINGS_MAX_FIELD_SECTION_SIZE.
pub fn field_size(name: &[u8], value: &[u8]) -> u64 {
    (name.len() as u64)
        .saturating_add(value.len() as u64)
        .saturating_add(32)
}

/// Reads a string literal whose length has a `prefix_bits`-bit prefix and
/// whose H (Huffman) flag is the bit just above the prefix.
fn decode_string(buf: &[u8], pos: &mut usize, prefix_bits: u32) -> Result<Vec<u8>, SectionError> {
    let huffman_flag = 1u8 << prefix_bits;
    let huffman = buf.get(*pos).is_some_and(|b| b & huffman_flag != 0);
    let len =
        decode_int(buf, pos, prefix_bits).map_err(|_| SectionError::Failed("bad string length"))?;
    let end = usize::try_from(len)
        .ok()
        .and_then(|len| pos.checked_add(len))
        .filter(|&end| end <= buf.len())
        .ok_or(SectionError::Failed("string runs past the field section"))?;
    let raw = buf.get(*pos..end).unwrap_or_default();
    *pos = end;
    if huffman {
        let mut out = Vec::new();
        huffman::decode(raw, &mut out).map_err(|_| SectionError::Failed("bad Huffman string"))?;
        Ok(out)
    } else {
        Ok(raw.to_vec())
    }
}

/// Appends a string literal: Huffman-coded when that is shorter, its
/// length with a `prefix_bits`-bit prefix, `flags` above the H bit.
fn encode_string(out: &mut Vec<u8>, flags: u8, prefix_bits: u32, s: &[u8]) {
    let coded_len = huffman::encoded_len(s);
    if coded_len < s.len() {
        encode_int(
            out,
            flags | (1 << prefix_bits),
            prefix_bits,
            coded_len as u64,
        );
        huffman::encode(s, out);
    } else {
        encode_int(out, flags, prefix_bits, s.len() as u64);
        out.extend_from_slice(s);
    }
}

/// Encodes `fields` as a field section with Required Insert Count 0:
/// static-table references where an entry matches, literals otherwise.
pub fn encode_section<'a>(
    fields: impl IntoIterator<Item = (&'a [u8], &'a [u8])>,
    out: &mut Vec<u8>,
) {
    // Required Insert Count 0, Sign 0, Delta Base 0 (RFC 9204 §4.5.1).
    out.extend_from_slice(&[0x00, 0x00]);
    for (name, value) in fields {
        match static_table::find(name, value) {
            // Indexed field line, T=1 (static): 1 1 index(6+).
            Match::Full(index) => encode_int(out, 0xc0, 6, index),
            // Literal with name reference, N=0, T=1: 0 1 0 1 index(4+).
            Match::Name(index) => {
                encode_int(out, 0x50, 4, index);
                encode_string(out, 0x00, 7, value);
            }
            // Literal with literal name, N=0: 0 0 1 0 H len(3+).
            Match::None => {
                encode_string(out, 0x20, 3, name);
                encode_string(out, 0x00, 7, value);
            }
        }
    }
}

/// Decodes a field section. `max_size` bounds the decoded fields
/// (RFC 9114 §4.2.2 counting); decoding stops as soon as it is crossed.
///
/// Errors ([`SectionError::Failed`], i.e. QPACK_DECOMPRESSION_FAILED): a
/// Required Insert Count other than 0 (our table capacity is 0), a negative
/// Base, any dynamic or post-base reference, a static index of 99 or more,
/// a truncated or overlong integer or string, bad Huffman coding.
pub fn decode_section(buf: &[u8], max_size: u64) -> Result<Vec<FieldLine>, SectionError> {
    let fail = SectionError::Failed;
    let mut pos = 0;
    let required_insert_count =
        decode_int(buf, &mut pos, 8).map_err(|_| fail("bad Required Insert Count"))?;
    if required_insert_count != 0 {
        return Err(fail(
            "Required Insert Count is not 0 (dynamic table capacity is 0)",
        ));
    }
    let sign = buf.get(pos).is_some_and(|b| b & 0x80 != 0);
    let _delta_base = decode_int(buf, &mut pos, 7).map_err(|_| fail("bad Delta Base"))?;
    if sign {
        // RFC 9204 §4.5.1.2: Sign 1 with Delta Base >= Required Insert Count
        // (0) would make the Base negative.
        return Err(fail("negative Base"));
    }
    let mut fields = Vec::new();
    let mut size = 0u64;
    while let Some(&first) = buf.get(pos) {
        let (name, value) = if first & 0x80 != 0 {
            // Indexed field line: 1 T index(6+).
            if first & 0x40 == 0 {
                return Err(fail("reference to the dynamic table"));
            }
            let index = decode_int(buf, &mut pos, 6).map_err(|_| fail("bad index"))?;
            let (name, value) =
                static_table::get(index).ok_or(fail("static index out of range"))?;
            (name.to_vec(), value.to_vec())
        } else if first & 0x40 != 0 {
            // Literal with name reference: 0 1 N T index(4+), value.
            if first & 0x10 == 0 {
                return Err(fail("name reference to the dynamic table"));
            }
            let index = decode_int(buf, &mut pos, 4).map_err(|_| fail("bad index"))?;
            let (name, _) = static_table::get(index).ok_or(fail("static index out of range"))?;
            let value = decode_string(buf, &mut pos, 7)?;
            (name.to_vec(), value)
        } else if first & 0x20 != 0 {
            // Literal with literal name: 0 0 1 N H len(3+), name, value.
            let name = decode_string(buf, &mut pos, 3)?;
            let value = decode_string(buf, &mut pos, 7)?;
            (name, value)
        } else {
            // 0001xxxx indexed post-base, 0000xxxx literal with post-base
            // name reference: both reference the dynamic table.
            return Err(fail("post-base reference to the dynamic table"));
        };
        size = size.saturating_add(field_size(&name, &value));
        if size > max_size {
            return Err(SectionError::TooLarge(size));
        }
        fields.push((name, value));
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    fn round_int(prefix: u32, value: u64) -> Result<u64, IntError> {
        let mut out = Vec::new();
        encode_int(&mut out, 0, prefix, value);
        let mut pos = 0;
        let v = decode_int(&out, &mut pos, prefix)?;
        assert_eq!(pos, out.len());
        Ok(v)
    }

    /// RFC 7541 Appendix C.1: 10 and 1337 with a 5-bit prefix, 42 with 8.
    #[test]
    fn rfc7541_integer_examples() {
        let cases: [(&str, u32, u64); 3] = [("0a", 5, 10), ("1f9a0a", 5, 1337), ("2a", 8, 42)];
        for (hex_str, prefix, value) in cases {
            let mut out = Vec::new();
            encode_int(&mut out, 0, prefix, value);
            assert_eq!(hex::encode(&out), hex_str);
            let mut pos = 0;
            assert_eq!(decode_int(&unhex(hex_str), &mut pos, prefix), Ok(value));
        }
        for prefix in 1..=8 {
            for v in [0, 1, 30, 31, 127, 128, 255, 256, 1 << 20, MAX_INT] {
                assert_eq!(round_int(prefix, v), Ok(v), "prefix {prefix} value {v}");
            }
        }
    }

    #[test]
    fn integer_overflow_and_truncation() {
        let mut pos = 0;
        // 2^62 with an 8-bit prefix: 255 then continuation bytes.
        let mut out = Vec::new();
        encode_int(&mut out, 0, 8, MAX_INT);
        let last = out.len() - 1;
        out[last] += 1; // one more in the top group: 2^62 - 1 + 2^56 > MAX
        assert_eq!(decode_int(&out, &mut pos, 8), Err(IntError::Overflow));
        // Endless continuation bytes.
        let long = [0xff; 20];
        assert_eq!(decode_int(&long, &mut 0, 8), Err(IntError::Overflow));
        // Zero-valued continuation bytes past 62 bits are refused too.
        let mut padded = vec![0xff];
        padded.extend_from_slice(&[0x80; 9]);
        padded.push(0x00);
        assert_eq!(decode_int(&padded, &mut 0, 8), Err(IntError::Overflow));
        assert_eq!(decode_int(&[0x1f], &mut 0, 5), Err(IntError::Incomplete));
        assert_eq!(
            decode_int(&[0x1f, 0x9a], &mut 0, 5),
            Err(IntError::Incomplete)
        );
        assert_eq!(decode_int(&[], &mut 0, 5), Err(IntError::Incomplete));
    }

    /// RFC 9204 Appendix B.1: a literal with a static name reference.
    #[test]
    fn rfc9204_b1_literal_with_name_reference() {
        let section = unhex("0000 510b 2f69 6e64 6578 2e68 746d 6c");
        assert_eq!(
            decode_section(&section, 1 << 14),
            Ok(vec![(b":path".to_vec(), b"/index.html".to_vec())])
        );
        // Our encoder Huffman-codes the value (shorter), so the bytes differ
        // from the example's; the decoded fields do not.
        let mut ours = Vec::new();
        encode_section([(&b":path"[..], &b"/index.html"[..])], &mut ours);
        assert_eq!(
            decode_section(&ours, 1 << 14),
            decode_section(&section, 1 << 14)
        );
    }

    /// RFC 9204 Appendix B.2: a section referencing two dynamic entries
    /// (Required Insert Count 2) is refused with table capacity 0, as is
    /// any dynamic or post-base form.
    #[test]
    fn dynamic_references_fail() {
        let failed = |hex_str: &str| {
            matches!(
                decode_section(&unhex(hex_str), 1 << 14),
                Err(SectionError::Failed(_))
            )
        };
        assert!(failed("0381 10 11")); // B.2: Required Insert Count 2
        assert!(failed("0000 80")); // indexed, dynamic
        assert!(failed("0000 10")); // indexed post-base
        assert!(failed("0000 4003 616263")); // literal, dynamic name ref
        assert!(failed("0000 0003 616263")); // literal, post-base name ref
        assert!(failed("0080")); // Sign 1 with RIC 0: negative Base
        assert!(failed("0000 ff24")); // static index 99
        assert!(failed("0000 5f54 00")); // name reference, static index 15 + 84 = 99
        assert!(failed("00")); // prefix cut short
        assert!(failed("")); // nothing at all
        assert!(failed("0000 2303 6162")); // literal name cut short
        assert!(failed("0000 2918 00")); // Huffman name "a" with zero padding
        assert!(!failed("0000 d1")); // static 17 (:method GET)
    }

    #[test]
    fn section_round_trip_and_static_references() {
        let fields: Vec<(&[u8], &[u8])> = vec![
            (b":method", b"GET"),
            (b":scheme", b"https"),
            (b":authority", b"example.com"),
            (b":path", b"/"),
            (b"user-agent", b"artq"),
            (b"x-custom", b"value with spaces"),
            (b"content-length", b"0"),
        ];
        let mut out = Vec::new();
        encode_section(fields.iter().copied(), &mut out);
        // :method GET is static index 17: one byte 0xc0 | 17.
        assert_eq!(out[2], 0xd1);
        let decoded = decode_section(&out, 1 << 14).unwrap();
        let expected: Vec<FieldLine> = fields
            .iter()
            .map(|(n, v)| (n.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(decoded, expected);
    }

    #[test]
    fn size_limit() {
        let big = vec![b'a'; 100];
        let mut out = Vec::new();
        encode_section([(&b"x-big"[..], &big[..])], &mut out);
        let size = field_size(b"x-big", &big);
        assert!(decode_section(&out, size).is_ok());
        assert_eq!(
            decode_section(&out, size - 1),
            Err(SectionError::TooLarge(size))
        );
    }

    proptest! {
        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let _ = decode_section(&data, 1 << 14);
            let mut pos = 0;
            let _ = decode_int(&data, &mut pos, 5);
            prop_assert!(pos <= data.len());
        }

        #[test]
        fn fields_round_trip(fields in proptest::collection::vec(
            (proptest::collection::vec(any::<u8>(), 0..20), proptest::collection::vec(any::<u8>(), 0..40)), 0..8)) {
            let mut out = Vec::new();
            encode_section(fields.iter().map(|(n, v)| (&n[..], &v[..])), &mut out);
            prop_assert_eq!(decode_section(&out, u64::MAX), Ok(fields));
        }

        #[test]
        fn integers_round_trip(prefix in 1u32..=8, value in 0..=MAX_INT) {
            prop_assert_eq!(round_int(prefix, value), Ok(value));
        }
    }
}
