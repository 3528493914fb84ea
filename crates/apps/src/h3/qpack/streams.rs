//! The peer's QPACK encoder and decoder streams (RFC 9204 §4.3, §4.4),
//! checked against a dynamic table of capacity 0 on both sides.
//!
//! Encoder stream (the peer's encoder talks to our decoder): our
//! SETTINGS_QPACK_MAX_TABLE_CAPACITY is 0, so Set Dynamic Table Capacity 0
//! is the only valid instruction; a capacity above 0, any insert or a
//! duplicate is QPACK_ENCODER_STREAM_ERROR.
//!
//! Decoder stream (the peer's decoder talks to our encoder): we never
//! insert and never send a section with a Required Insert Count above 0,
//! so Section Acknowledgment and Insert Count Increment acknowledge state
//! that does not exist (QPACK_DECODER_STREAM_ERROR, §4.4.1, §4.4.3);
//! Stream Cancellation is fine (the decoder sends it for any reset stream).
//!
//! Instructions may span reads; the few bytes of an unfinished one are
//! carried to the next read (at most one prefixed integer, 10 bytes).

use super::{decode_int, IntError};
use crate::h3::error::{H3Error, QPACK_DECODER_STREAM_ERROR, QPACK_ENCODER_STREAM_ERROR};

/// Longest instruction we may have to carry: a first byte and nine
/// continuation bytes (62 bits).
const MAX_CARRY: usize = 10;

/// One instruction of either stream, as far as we care.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Verdict {
    /// Valid: keep reading.
    Fine,
    /// Not complete yet: wait for more bytes.
    Incomplete,
    /// A connection error with this reason.
    Error(&'static str),
}

/// Runs `check` over the carried bytes followed by `data`, one
/// instruction at a time; keeps an unfinished tail for next time.
fn feed(
    carry: &mut Vec<u8>,
    data: &[u8],
    code: u64,
    check: fn(&[u8], &mut usize) -> Verdict,
) -> Result<(), H3Error> {
    let mut buf = std::mem::take(carry);
    buf.extend_from_slice(data);
    let mut pos = 0;
    while pos < buf.len() {
        let mut next = pos;
        match check(&buf, &mut next) {
            Verdict::Fine => pos = next,
            Verdict::Incomplete => break,
            Verdict::Error(reason) => return Err(H3Error::new(code, reason)),
        }
    }
    let rest = buf.get(pos..).unwrap_or_default();
    if rest.len() > MAX_CARRY {
        return Err(H3Error::new(code, "instruction integer too long"));
    }
    *carry = rest.to_vec();
    Ok(())
}

/// The verdict on a prefixed integer read with `decode_int`.
fn int_verdict(result: Result<u64, IntError>, then: impl FnOnce(u64) -> Verdict) -> Verdict {
    match result {
        Ok(v) => then(v),
        Err(IntError::Incomplete) => Verdict::Incomplete,
        Err(IntError::Overflow) => Verdict::Error("instruction integer overflows 62 bits"),
    }
}

/// One encoder-stream instruction at `buf[*pos]`.
fn check_encoder_instruction(buf: &[u8], pos: &mut usize) -> Verdict {
    let Some(&first) = buf.get(*pos) else {
        return Verdict::Incomplete;
    };
    if first & 0x80 != 0 {
        Verdict::Error("Insert with Name Reference into a table of capacity 0")
    } else if first & 0x40 != 0 {
        Verdict::Error("Insert with Literal Name into a table of capacity 0")
    } else if first & 0x20 != 0 {
        // Set Dynamic Table Capacity: 0 0 1 capacity(5+).
        int_verdict(decode_int(buf, pos, 5), |capacity| {
            if capacity == 0 {
                Verdict::Fine
            } else {
                Verdict::Error("dynamic table capacity above our maximum of 0")
            }
        })
    } else {
        Verdict::Error("Duplicate in an empty dynamic table")
    }
}

/// One decoder-stream instruction at `buf[*pos]`.
fn check_decoder_instruction(buf: &[u8], pos: &mut usize) -> Verdict {
    let Some(&first) = buf.get(*pos) else {
        return Verdict::Incomplete;
    };
    if first & 0x80 != 0 {
        Verdict::Error("Section Acknowledgment, but no section referenced the dynamic table")
    } else if first & 0x40 != 0 {
        // Stream Cancellation: 0 1 stream id(6+).
        int_verdict(decode_int(buf, pos, 6), |_| Verdict::Fine)
    } else {
        Verdict::Error("Insert Count Increment, but nothing was inserted")
    }
}

/// The peer's encoder stream, after its type byte.
#[derive(Clone, Debug, Default)]
pub struct EncoderStreamChecker {
    carry: Vec<u8>,
}

impl EncoderStreamChecker {
    /// Checks the next bytes of the stream; an error is
    /// QPACK_ENCODER_STREAM_ERROR.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), H3Error> {
        feed(
            &mut self.carry,
            data,
            QPACK_ENCODER_STREAM_ERROR,
            check_encoder_instruction,
        )
    }
}

/// The peer's decoder stream, after its type byte.
#[derive(Clone, Debug, Default)]
pub struct DecoderStreamChecker {
    carry: Vec<u8>,
}

impl DecoderStreamChecker {
    /// Checks the next bytes of the stream; an error is
    /// QPACK_DECODER_STREAM_ERROR.
    pub fn feed(&mut self, data: &[u8]) -> Result<(), H3Error> {
        feed(
            &mut self.carry,
            data,
            QPACK_DECODER_STREAM_ERROR,
            check_decoder_instruction,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(bytes: &[u8]) -> Result<(), u64> {
        EncoderStreamChecker::default()
            .feed(bytes)
            .map_err(|e| e.code)
    }

    fn dec(bytes: &[u8]) -> Result<(), u64> {
        DecoderStreamChecker::default()
            .feed(bytes)
            .map_err(|e| e.code)
    }

    #[test]
    fn encoder_stream() {
        assert_eq!(enc(&[]), Ok(()));
        assert_eq!(enc(&[0x20, 0x20]), Ok(())); // capacity 0, twice
                                                // RFC 9204 Appendix B.2: Set Dynamic Table Capacity 220.
        assert_eq!(enc(&[0x3f, 0xbd, 0x01]), Err(QPACK_ENCODER_STREAM_ERROR));
        assert_eq!(enc(&[0x21]), Err(QPACK_ENCODER_STREAM_ERROR));
        // B.2's Insert With Name Reference, B.3's Insert With Literal Name,
        // B.4's Duplicate.
        assert_eq!(enc(&[0xc0, 0x0f]), Err(QPACK_ENCODER_STREAM_ERROR));
        assert_eq!(enc(&[0x4a, 0x63]), Err(QPACK_ENCODER_STREAM_ERROR));
        assert_eq!(enc(&[0x02]), Err(QPACK_ENCODER_STREAM_ERROR));
    }

    #[test]
    fn decoder_stream() {
        // Stream Cancellation of stream 8, then of a large stream id split
        // across two reads.
        let mut checker = DecoderStreamChecker::default();
        assert!(checker.feed(&[0x48, 0x7f]).is_ok());
        assert!(checker.feed(&[0x81, 0x01]).is_ok());
        assert!(checker.carry.is_empty());
        // B.2's Section Acknowledgment (stream 4), B.3's Insert Count
        // Increment (1), and an increment of 0.
        assert_eq!(dec(&[0x84]), Err(QPACK_DECODER_STREAM_ERROR));
        assert_eq!(dec(&[0x01]), Err(QPACK_DECODER_STREAM_ERROR));
        assert_eq!(dec(&[0x00]), Err(QPACK_DECODER_STREAM_ERROR));
        // A stream id past 62 bits.
        let mut long = vec![0x7f];
        long.extend_from_slice(&[0xff; 12]);
        assert_eq!(dec(&long), Err(QPACK_DECODER_STREAM_ERROR));
    }

    proptest! {
        #[test]
        fn checkers_never_panic(chunks in proptest::collection::vec(
            proptest::collection::vec(any::<u8>(), 0..16), 0..6)) {
            let mut e = EncoderStreamChecker::default();
            let mut d = DecoderStreamChecker::default();
            for chunk in &chunks {
                let _ = e.feed(chunk);
                if d.feed(chunk).is_err() {
                    break;
                }
                prop_assert!(d.carry.len() <= MAX_CARRY);
            }
        }
    }
}
