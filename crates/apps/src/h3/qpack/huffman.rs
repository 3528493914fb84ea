//! The HPACK Huffman code (RFC 7541 §5.2 and Appendix B), which QPACK
//! string literals use when their H bit is set (RFC 9204 §4.1.2).
//!
//! Why our own: the crate the brief suggested (`httlib-huffman` 0.3.4)
//! builds here but accepts padding that is not a prefix of EOS (`0x18`,
//! "a" followed by three zero bits, decodes to "a"), which RFC 7541 §5.2
//! requires to be an error. The code is canonical, so a small decoder
//! needs only the code table: for each code length, the first code and
//! where its symbols start in the (length, symbol)-sorted list.
//!
//! Decoding peeks 30 bits (the longest code) and finds the shortest length
//! whose canonical range contains them: a handful of comparisons per
//! symbol, no per-bit loop, no allocation beyond the output. Encoding
//! shifts each symbol's code into a 64-bit accumulator.

/// Why a Huffman-coded string was refused (RFC 7541 §5.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HuffmanError {
    /// The string contains the EOS symbol.
    #[error("EOS symbol inside a Huffman string")]
    Eos,
    /// The last bits are longer than 7, or not all ones (not a prefix of
    /// EOS).
    #[error("invalid Huffman padding")]
    Padding,
}

/// Longest code in bits (EOS and a few control bytes).
const MAX_CODE_LEN: u32 = 30;

/// Index of EOS in [`CODES`].
const EOS: u16 = 256;

/// RFC 7541 Appendix B: (code, length in bits) of each symbol 0..=255, then
/// EOS (256). The codes are right-aligned.
#[rustfmt::skip]
const CODES: [(u32, u8); 257] = [
    (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28),
    (0xfffffe4, 28), (0xfffffe5, 28), (0xfffffe6, 28), (0xfffffe7, 28),
    (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
    (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28),
    (0xfffffed, 28), (0xfffffee, 28), (0xfffffef, 28), (0xffffff0, 28),
    (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
    (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28),
    (0xffffff8, 28), (0xffffff9, 28), (0xffffffa, 28), (0xffffffb, 28),
    (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
    (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11),
    (0x3fa, 10), (0x3fb, 10), (0xf9, 8), (0x7fb, 11),
    (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
    (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6),
    (0x1a, 6), (0x1b, 6), (0x1c, 6), (0x1d, 6),
    (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
    (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10),
    (0x1ffa, 13), (0x21, 6), (0x5d, 7), (0x5e, 7),
    (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
    (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7),
    (0x67, 7), (0x68, 7), (0x69, 7), (0x6a, 7),
    (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
    (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7),
    (0xfc, 8), (0x73, 7), (0xfd, 8), (0x1ffb, 13),
    (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
    (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5),
    (0x24, 6), (0x5, 5), (0x25, 6), (0x26, 6),
    (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
    (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5),
    (0x2b, 6), (0x76, 7), (0x2c, 6), (0x8, 5),
    (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
    (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15),
    (0x7fc, 11), (0x3ffd, 14), (0x1ffd, 13), (0xffffffc, 28),
    (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
    (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23),
    (0x3fffd6, 22), (0x7fffda, 23), (0x7fffdb, 23), (0x7fffdc, 23),
    (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
    (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23),
    (0xffffee, 24), (0x7fffe1, 23), (0x7fffe2, 23), (0x7fffe3, 23),
    (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
    (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24),
    (0x3fffda, 22), (0x1fffdd, 21), (0xfffe9, 20), (0x3fffdb, 22),
    (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
    (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24),
    (0x1fffdf, 21), (0x3fffdf, 22), (0x7fffeb, 23), (0x7fffec, 23),
    (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
    (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23),
    (0xfffea, 20), (0x3fffe2, 22), (0x3fffe3, 22), (0x3fffe4, 22),
    (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
    (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19),
    (0x3fffe7, 22), (0x7ffff2, 23), (0x3fffe8, 22), (0x1ffffec, 25),
    (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
    (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25),
    (0x7fff2, 19), (0x1fffe3, 21), (0x3ffffe6, 26), (0x7ffffe0, 27),
    (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
    (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26),
    (0xffffffd, 28), (0x7ffffe3, 27), (0x7ffffe4, 27), (0x7ffffe5, 27),
    (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
    (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23),
    (0x3fffea, 22), (0x3fffeb, 22), (0x1ffffee, 25), (0x1ffffef, 25),
    (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
    (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26),
    (0x7ffffe7, 27), (0x7ffffe8, 27), (0x7ffffe9, 27), (0x7ffffea, 27),
    (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
    (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26),
    (0x3fffffff, 30),
];

/// The decoding tables derived from [`CODES`] at compile time.
struct DecodeTables {
    /// Symbols sorted by (code length, symbol): the canonical order.
    sorted: [u16; 257],
    /// Per length: index in `sorted` of its first symbol.
    offset: [u16; 31],
    /// Per length: the first (smallest) code of that length.
    first: [u32; 31],
    /// Per length: exclusive upper bound of the codes of that length or
    /// shorter, left-aligned to 30 bits. A 30-bit window below
    /// `limit[len]` (and not below `limit[len - 1]`) starts with a code of
    /// length `len`.
    limit: [u32; 31],
}

const fn build_tables() -> DecodeTables {
    let mut t = DecodeTables {
        sorted: [0; 257],
        offset: [0; 31],
        first: [0; 31],
        limit: [0; 31],
    };
    let mut n = 0usize;
    let mut len = 1usize;
    while len <= MAX_CODE_LEN as usize {
        t.offset[len] = n as u16;
        let mut count = 0u32;
        let mut sym = 0usize;
        while sym < 257 {
            if CODES[sym].1 as usize == len {
                if count == 0 {
                    t.first[len] = CODES[sym].0;
                }
                t.sorted[n] = sym as u16;
                n += 1;
                count += 1;
            }
            sym += 1;
        }
        if count == 0 {
            // No code of this length: the bound (left-aligned, so not
            // scaled) stays that of the shorter lengths.
            t.limit[len] = if len == 1 { 0 } else { t.limit[len - 1] };
        } else {
            t.limit[len] = (t.first[len] + count) << (MAX_CODE_LEN as usize - len);
        }
        len += 1;
    }
    t
}

static TABLES: DecodeTables = build_tables();

/// Bytes `input` takes once Huffman-coded (padding included).
pub fn encoded_len(input: &[u8]) -> usize {
    let bits: usize = input
        .iter()
        .map(|&b| usize::from(CODES[usize::from(b)].1))
        .sum();
    bits.div_ceil(8)
}

/// Appends `input` Huffman-coded to `out`, padded with the most significant
/// bits of EOS (ones).
pub fn encode(input: &[u8], out: &mut Vec<u8>) {
    out.reserve(encoded_len(input));
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &byte in input {
        let (code, len) = CODES[usize::from(byte)];
        acc = (acc << len) | u64::from(code);
        bits += u32::from(len);
        while bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
        acc &= (1u64 << bits) - 1;
    }
    if bits > 0 {
        let pad = 8 - bits;
        out.push(((acc << pad) | ((1u64 << pad) - 1)) as u8);
    }
}

/// The symbol at the top of the `bits` low bits of `acc`, and its length.
/// Past the available bits the window is filled with ones (EOS's prefix),
/// so a returned length greater than `bits` means "only padding is left".
fn peek_symbol(acc: u64, bits: u32) -> (u16, u32) {
    let mask = (1u64 << MAX_CODE_LEN) - 1;
    let window = if bits >= MAX_CODE_LEN {
        (acc >> (bits - MAX_CODE_LEN)) & mask
    } else {
        let fill = MAX_CODE_LEN - bits;
        ((acc << fill) | ((1u64 << fill) - 1)) & mask
    } as u32;
    let t = &TABLES;
    let mut len = 5u32; // the shortest code
                        // The EOS code (30 ones) is the last of length 30, so limit[30] is 2^30
                        // and the loop always stops by then.
    while len < MAX_CODE_LEN && window >= t.limit[len as usize] {
        len += 1;
    }
    let code = window >> (MAX_CODE_LEN - len);
    let index =
        usize::from(t.offset[len as usize]) + (code.saturating_sub(t.first[len as usize])) as usize;
    (t.sorted.get(index).copied().unwrap_or(EOS), len)
}

/// Decodes one symbol from the `bits` low bits of `acc` into `out`;
/// `Ok(false)` if only a partial code (padding) is left.
fn take_symbol(acc: &mut u64, bits: &mut u32, out: &mut Vec<u8>) -> Result<bool, HuffmanError> {
    let (sym, len) = peek_symbol(*acc, *bits);
    if len > *bits {
        return Ok(false);
    }
    if sym == EOS {
        return Err(HuffmanError::Eos);
    }
    out.push(sym as u8);
    *bits -= len;
    *acc &= (1u64 << *bits) - 1;
    Ok(true)
}

/// Appends the decoding of the Huffman-coded `input` to `out`.
///
/// Errors (RFC 7541 §5.2): EOS inside the string, padding longer than 7
/// bits, or padding that is not all ones.
pub fn decode(input: &[u8], out: &mut Vec<u8>) -> Result<(), HuffmanError> {
    // At most 8 symbols per 5 bits (the shortest code).
    out.reserve(input.len().saturating_mul(8) / 5);
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    for &byte in input {
        acc = (acc << 8) | u64::from(byte);
        bits += 8;
        while bits >= MAX_CODE_LEN {
            take_symbol(&mut acc, &mut bits, out)?;
        }
    }
    while bits > 0 {
        if !take_symbol(&mut acc, &mut bits, out)? {
            break;
        }
    }
    let ones = (1u64 << bits) - 1;
    if bits > 7 || acc != ones {
        return Err(HuffmanError::Padding);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn unhex(s: &str) -> Vec<u8> {
        hex::decode(s.replace(' ', "")).unwrap()
    }

    fn dec(bytes: &[u8]) -> Result<Vec<u8>, HuffmanError> {
        let mut out = Vec::new();
        decode(bytes, &mut out).map(|()| out)
    }

    /// The table is the canonical code of its lengths: each code is the
    /// previous code of the (length, symbol) order plus one, shifted to its
    /// length. This is what the decoder relies on.
    #[test]
    fn code_table_is_canonical() {
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (CODES[s].1, s));
        let mut code: u32 = 0;
        let mut prev_len = CODES[order[0]].1;
        for (i, &s) in order.iter().enumerate() {
            let (c, len) = CODES[s];
            if i > 0 {
                code = (code + 1) << (len - prev_len);
            }
            assert_eq!(c, code, "symbol {s}");
            prev_len = len;
        }
        assert_eq!(CODES[256], ((1 << 30) - 1, 30));
    }

    /// RFC 7541 Appendix C.4 (requests) and C.6 (responses) string literals.
    #[test]
    fn rfc7541_vectors() {
        let vectors = [
            ("www.example.com", "f1e3 c2e5 f23a 6ba0 ab90 f4ff"),
            ("no-cache", "a8eb 1064 9cbf"),
            ("custom-key", "25a8 49e9 5ba9 7d7f"),
            ("custom-value", "25a8 49e9 5bb8 e8b4 bf"),
            ("302", "6402"),
            ("private", "aec3 771a 4b"),
            (
                "Mon, 21 Oct 2013 20:13:21 GMT",
                "d07a be94 1054 d444 a820 0595 040b 8166 e082 a62d 1bff",
            ),
            (
                "https://www.example.com",
                "9d29 ad17 1863 c78f 0b97 c8e9 ae82 ae43 d3",
            ),
        ];
        for (text, coded) in vectors {
            let coded = unhex(coded);
            let mut out = Vec::new();
            encode(text.as_bytes(), &mut out);
            assert_eq!(out, coded, "{text}");
            assert_eq!(encoded_len(text.as_bytes()), coded.len());
            assert_eq!(dec(&coded).unwrap(), text.as_bytes(), "{text}");
        }
    }

    #[test]
    fn empty_string() {
        assert_eq!(dec(&[]), Ok(Vec::new()));
        let mut out = Vec::new();
        encode(b"", &mut out);
        assert!(out.is_empty());
    }

    #[test]
    fn bad_padding_is_refused() {
        // "a" is 00011: three one bits of padding are right, zeros are not.
        assert_eq!(dec(&[0x1f]), Ok(b"a".to_vec()));
        assert_eq!(dec(&[0x18]), Err(HuffmanError::Padding));
        assert_eq!(dec(&[0x1c]), Err(HuffmanError::Padding));
        // Eight or more bits of padding: "a" then a whole byte of ones.
        assert_eq!(dec(&[0x1f, 0xff]), Err(HuffmanError::Padding));
        // A lone byte of ones is 8 bits of padding, not a symbol.
        assert_eq!(dec(&[0xff]), Err(HuffmanError::Padding));
    }

    #[test]
    fn eos_is_refused() {
        // 30 ones (EOS) then two ones of padding.
        assert_eq!(dec(&[0xff, 0xff, 0xff, 0xff]), Err(HuffmanError::Eos));
        // "a" (00011), EOS, then padding: 00011 + 30 ones + 5 ones = 40 bits.
        assert_eq!(dec(&[0x1f, 0xff, 0xff, 0xff, 0xff]), Err(HuffmanError::Eos));
    }

    proptest! {
        #[test]
        fn round_trip(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut coded = Vec::new();
            encode(&data, &mut coded);
            prop_assert_eq!(coded.len(), encoded_len(&data));
            prop_assert_eq!(dec(&coded).unwrap(), data);
        }

        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            let _ = decode(&data, &mut out);
            prop_assert!(out.len() <= data.len() * 8 / 5);
        }
    }
}
