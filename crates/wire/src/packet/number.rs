//! Packet number truncation and reconstruction (RFC 9000 §17.1, Appendix A.2, A.3).
//!
//! The sender puts only the low 1 to 4 bytes of a packet number on the wire,
//! enough for the receiver to recover the full number from the largest one it
//! has processed. Packet numbers themselves are at most 2^62-1 (RFC 9000 §12.3).

/// The largest packet number QUIC allows (RFC 9000 §12.3).
pub const MAX_PACKET_NUMBER: u64 = (1 << 62) - 1;

/// Bytes needed to encode `pn` given the largest packet number the peer has
/// acknowledged in this space (`None` if none yet): 1..=4.
///
/// RFC 9000 §17.1 / Appendix A.2: the encoding must cover more than twice the
/// number of packets in flight, so that the receiver's window of half the
/// encoded range around its expectation contains `pn`.
pub fn pn_len_for(pn: u64, largest_acked: Option<u64>) -> usize {
    let unacked = match largest_acked {
        Some(acked) => pn.saturating_sub(acked),
        None => pn.saturating_add(1),
    };
    // Smallest n with 2^(8n) >= 2 * unacked, i.e. unacked <= 2^(8n-1).
    (1..=4)
        .find(|&n| unacked <= 1u64 << (8 * n - 1))
        .unwrap_or(4)
}

/// The low `pn_len` bytes of `pn` (what goes on the wire). `pn_len` outside
/// 1..=4 is a caller bug (debug assert; clamped otherwise).
pub fn truncate_pn(pn: u64, pn_len: usize) -> u32 {
    debug_assert!((1..=4).contains(&pn_len), "packet number length {pn_len}");
    let bits = 8 * pn_len.clamp(1, 4) as u32;
    (pn & ((1u64 << bits) - 1)) as u32
}

/// The full packet number closest to the next expected one whose low
/// `pn_len` bytes equal `truncated` (RFC 9000 Appendix A.3).
///
/// `largest_pn` is the largest packet number successfully processed in this
/// space (`None` before the first). Bits of `truncated` above `pn_len` bytes
/// are ignored; `pn_len` outside 1..=4 is clamped. Never overflows: a result
/// that would exceed 2^62-1 is clamped to [`MAX_PACKET_NUMBER`] (only a peer
/// that exhausted the packet number space can cause that).
pub fn decode_pn(largest_pn: Option<u64>, truncated: u64, pn_len: usize) -> u64 {
    let bits = 8 * pn_len.clamp(1, 4) as u32;
    let win = 1u64 << bits;
    let hwin = win / 2;
    let mask = win - 1;
    let expected = match largest_pn {
        Some(largest) => largest.min(MAX_PACKET_NUMBER) + 1,
        None => 0,
    };
    // expected <= 2^62, so none of the arithmetic below can overflow a u64.
    let candidate = (expected & !mask) | (truncated & mask);
    let pn = if candidate + hwin <= expected && candidate + win <= MAX_PACKET_NUMBER {
        candidate + win
    } else if candidate > expected + hwin && candidate >= win {
        candidate - win
    } else {
        candidate
    };
    pn.min(MAX_PACKET_NUMBER)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rfc9000_a3_example() {
        assert_eq!(decode_pn(Some(0xa82f_30ea), 0x9b32, 2), 0xa82f_9b32);
    }

    #[test]
    fn rfc9000_17_1_examples() {
        // 29,519 packets outstanding: 16 bits.
        assert_eq!(pn_len_for(0xac_5c02, Some(0xab_e8b3)), 2);
        // 0xace8fe: 24 bits.
        assert_eq!(pn_len_for(0xac_e8fe, Some(0xab_e8b3)), 3);
        assert_eq!(truncate_pn(0xac_5c02, 2), 0x5c02);
        assert_eq!(truncate_pn(0xac_e8fe, 3), 0xac_e8fe);
    }

    #[test]
    fn length_thresholds() {
        assert_eq!(pn_len_for(0, None), 1);
        assert_eq!(pn_len_for(127, None), 1); // 128 unacked
        assert_eq!(pn_len_for(128, None), 2);
        assert_eq!(pn_len_for(228, Some(100)), 1);
        assert_eq!(pn_len_for(229, Some(100)), 2);
        assert_eq!(pn_len_for(5, Some(9)), 1); // caller bug, still sane
        assert_eq!(pn_len_for(MAX_PACKET_NUMBER, None), 4);
        assert_eq!(pn_len_for(u64::MAX, Some(0)), 4);
    }

    #[test]
    fn decode_edges() {
        assert_eq!(decode_pn(None, 0, 1), 0);
        assert_eq!(decode_pn(None, 0xff, 1), 0xff);
        // Near the top of the space nothing overflows.
        let top = decode_pn(Some(MAX_PACKET_NUMBER), 0, 4);
        assert!(top <= MAX_PACKET_NUMBER);
        assert_eq!(decode_pn(Some(u64::MAX), 0xffff_ffff, 4), MAX_PACKET_NUMBER);
        assert_eq!(
            decode_pn(Some(MAX_PACKET_NUMBER - 1), 0xffff_ffff, 4),
            MAX_PACKET_NUMBER
        );
        // Wrap forward across a window boundary.
        assert_eq!(decode_pn(Some(0xfe), 0x01, 1), 0x101);
        // And backwards.
        assert_eq!(decode_pn(Some(0x101), 0xff, 1), 0xff);
    }

    proptest! {
        /// Whatever the sender picks with `pn_len_for`, a receiver whose largest
        /// received packet lies between the largest acknowledged and the packet
        /// itself recovers the exact number.
        #[test]
        fn encode_then_decode(acked in 0u64..(1 << 40), ahead in 1u64..(1 << 30),
                              recv_frac in 0.0f64..1.0, none in any::<bool>()) {
            // With nothing acknowledged yet, fewer than 2^31 packets can be in flight.
            let pn = if none { ahead } else { acked + ahead };
            let largest_acked = if none { None } else { Some(acked) };
            let len = pn_len_for(pn, largest_acked);
            let lowest = largest_acked.unwrap_or(0);
            let received = lowest + ((pn - lowest) as f64 * recv_frac) as u64;
            let received = received.min(pn - 1).max(lowest);
            let largest_seen = if none && received == 0 && recv_frac < 0.5 { None } else { Some(received) };
            let truncated = u64::from(truncate_pn(pn, len));
            prop_assert_eq!(decode_pn(largest_seen, truncated, len), pn);
        }

        #[test]
        fn decode_never_panics(largest in proptest::option::of(any::<u64>()), t in any::<u64>(), len in 0usize..10) {
            prop_assert!(decode_pn(largest, t, len) <= MAX_PACKET_NUMBER);
        }
    }
}
