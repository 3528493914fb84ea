//! ECN codepoints (RFC 3168 §5): the two bits of the IP header that a QUIC
//! sender sets (ECT) and a router sets on congestion (CE), RFC 9000 §13.4.
//!
//! One definition for the transport (which marks, counts and reacts), the
//! emulator (whose queues mark) and the UDP drivers (which read and write
//! the bits on the socket).

/// An ECN codepoint other than Not-ECT.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ecn {
    /// ECN-Capable Transport (0): what a QUIC sender marks.
    Ect0,
    /// ECN-Capable Transport (1) (L4S).
    Ect1,
    /// Congestion Experienced: set by a queue instead of dropping.
    Ce,
}

impl Ecn {
    /// The codepoint of the two ECN bits of an IP header (`None` for
    /// Not-ECT, 0b00).
    pub fn from_bits(bits: u8) -> Option<Ecn> {
        match bits & 0b11 {
            0b10 => Some(Ecn::Ect0),
            0b01 => Some(Ecn::Ect1),
            0b11 => Some(Ecn::Ce),
            _ => None,
        }
    }

    /// The two ECN bits of this codepoint.
    pub fn bits(self) -> u8 {
        match self {
            Ecn::Ect0 => 0b10,
            Ecn::Ect1 => 0b01,
            Ecn::Ce => 0b11,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        for e in [Ecn::Ect0, Ecn::Ect1, Ecn::Ce] {
            assert_eq!(Ecn::from_bits(e.bits()), Some(e));
            assert_eq!(
                Ecn::from_bits(e.bits() | 0xfc),
                Some(e),
                "only the low bits count"
            );
        }
        assert_eq!(Ecn::from_bits(0), None);
    }
}
