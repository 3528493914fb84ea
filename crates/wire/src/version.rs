//! The QUIC versions this stack speaks, and every constant that differs
//! between them: QUIC v1 (RFC 9000, RFC 9001) and QUIC v2 (RFC 9369).
//!
//! v2 is v1 with other constants, chosen so that middleboxes which learnt
//! v1's do not ossify the protocol (RFC 9369 §3): the version number, the
//! Initial salt, the HKDF labels of packet protection and key update, the
//! Retry integrity key and nonce, and the long-header packet type bits.
//! Everything version-dependent is a method of [`Version`], so no other
//! module tests "is this v2".

use crate::packet::LongType;

/// A QUIC version artq implements. Unknown versions stay `u32`s (they are
/// answered with Version Negotiation, RFC 9000 §6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Version {
    /// QUIC version 1 (RFC 9000), 0x00000001.
    #[default]
    V1,
    /// QUIC version 2 (RFC 9369), 0x6b3343cf.
    V2,
}

/// RFC 9001 §5.2: the QUIC v1 Initial salt.
const V1_INITIAL_SALT: [u8; 20] = [
    0x38, 0x76, 0x2c, 0xf7, 0xf5, 0x59, 0x34, 0xb3, 0x4d, 0x17, 0x9a, 0xe6, 0xa4, 0xc8, 0x0c, 0xad,
    0xcc, 0xbb, 0x7f, 0x0a,
];
/// RFC 9369 §3.3.1: the QUIC v2 Initial salt.
const V2_INITIAL_SALT: [u8; 20] = [
    0x0d, 0xed, 0xe3, 0xde, 0xf7, 0x00, 0xa6, 0xdb, 0x81, 0x93, 0x81, 0xbe, 0x6e, 0x26, 0x9d, 0xcb,
    0xf9, 0xbd, 0x2e, 0xd9,
];
/// RFC 9001 §5.8: the QUIC v1 Retry integrity key.
const V1_RETRY_KEY: [u8; 16] = [
    0xbe, 0x0c, 0x69, 0x0b, 0x9f, 0x66, 0x57, 0x5a, 0x1d, 0x76, 0x6b, 0x54, 0xe3, 0x68, 0xc8, 0x4e,
];
/// RFC 9001 §5.8: the QUIC v1 Retry integrity nonce.
const V1_RETRY_NONCE: [u8; 12] = [
    0x46, 0x15, 0x99, 0xd3, 0x5d, 0x63, 0x2b, 0xf2, 0x23, 0x98, 0x25, 0xbb,
];
/// RFC 9369 §3.3.3: the QUIC v2 Retry integrity key.
const V2_RETRY_KEY: [u8; 16] = [
    0x8f, 0xb4, 0xb0, 0x1b, 0x56, 0xac, 0x48, 0xe2, 0x60, 0xfb, 0xcb, 0xce, 0xad, 0x7c, 0xcc, 0x92,
];
/// RFC 9369 §3.3.3: the QUIC v2 Retry integrity nonce.
const V2_RETRY_NONCE: [u8; 12] = [
    0xd8, 0x69, 0x69, 0xbc, 0x2d, 0x7c, 0x6d, 0x99, 0x90, 0xef, 0xb0, 0x4a,
];

impl Version {
    /// Every version we implement, most preferred first.
    pub const ALL: [Version; 2] = [Version::V2, Version::V1];

    /// The 32-bit Version field of a long header.
    pub const fn wire(self) -> u32 {
        match self {
            Version::V1 => 0x0000_0001,
            Version::V2 => 0x6b33_43cf,
        }
    }

    /// The version a long header's Version field names, if we implement it.
    pub fn from_wire(version: u32) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.wire() == version)
    }

    /// Its short name, as on the command line ("v1", "v2").
    pub fn name(self) -> &'static str {
        match self {
            Version::V1 => "v1",
            Version::V2 => "v2",
        }
    }

    /// The salt of the Initial secret (RFC 9001 §5.2, RFC 9369 §3.3.1).
    pub fn initial_salt(self) -> &'static [u8; 20] {
        match self {
            Version::V1 => &V1_INITIAL_SALT,
            Version::V2 => &V2_INITIAL_SALT,
        }
    }

    /// HKDF-Expand-Label label of packet protection keys (RFC 9001 §5.1,
    /// RFC 9369 §3.3.2).
    pub fn key_label(self) -> &'static str {
        match self {
            Version::V1 => "quic key",
            Version::V2 => "quicv2 key",
        }
    }

    /// Label of packet protection IVs.
    pub fn iv_label(self) -> &'static str {
        match self {
            Version::V1 => "quic iv",
            Version::V2 => "quicv2 iv",
        }
    }

    /// Label of header protection keys.
    pub fn hp_label(self) -> &'static str {
        match self {
            Version::V1 => "quic hp",
            Version::V2 => "quicv2 hp",
        }
    }

    /// Label of the key update (RFC 9001 §6.1).
    pub fn ku_label(self) -> &'static str {
        match self {
            Version::V1 => "quic ku",
            Version::V2 => "quicv2 ku",
        }
    }

    /// The fixed AES-128-GCM key of the Retry Integrity Tag (RFC 9001 §5.8,
    /// RFC 9369 §3.3.3).
    pub fn retry_key(self) -> &'static [u8; 16] {
        match self {
            Version::V1 => &V1_RETRY_KEY,
            Version::V2 => &V2_RETRY_KEY,
        }
    }

    /// The fixed nonce of the Retry Integrity Tag.
    pub fn retry_nonce(self) -> &'static [u8; 12] {
        match self {
            Version::V1 => &V1_RETRY_NONCE,
            Version::V2 => &V2_RETRY_NONCE,
        }
    }

    /// The two Long Packet Type bits of `ty` (RFC 9000 Table 5; RFC 9369
    /// §3.2 rotates them: Initial 0b01, 0-RTT 0b10, Handshake 0b11, Retry
    /// 0b00).
    pub fn long_type_bits(self, ty: LongType) -> u8 {
        let v1 = match ty {
            LongType::Initial => 0,
            LongType::ZeroRtt => 1,
            LongType::Handshake => 2,
            LongType::Retry => 3,
        };
        match self {
            Version::V1 => v1,
            Version::V2 => (v1 + 1) & 3,
        }
    }

    /// The packet type whose Long Packet Type bits are the low two bits of
    /// `bits` (the inverse of [`Self::long_type_bits`]).
    pub fn long_type_from_bits(self, bits: u8) -> LongType {
        let v1 = match self {
            Version::V1 => bits & 3,
            Version::V2 => bits.wrapping_sub(1) & 3,
        };
        match v1 {
            0 => LongType::Initial,
            1 => LongType::ZeroRtt,
            2 => LongType::Handshake,
            _ => LongType::Retry,
        }
    }
}

impl core::fmt::Display for Version {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Version {
    type Err = String;

    /// "v1"/"1" or "v2"/"2" (case-insensitive), or the hex wire value.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "v1" | "1" | "0x00000001" | "0x1" => Ok(Version::V1),
            "v2" | "2" | "0x6b3343cf" => Ok(Version::V2),
            _ => Err(format!("unknown QUIC version {s:?} (expected v1 or v2)")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_round_trip() {
        assert_eq!(Version::V1.wire(), 1);
        assert_eq!(Version::V2.wire(), 0x6b33_43cf);
        for v in Version::ALL {
            assert_eq!(Version::from_wire(v.wire()), Some(v));
            assert_eq!(v.name().parse::<Version>(), Ok(v));
        }
        assert_eq!(Version::from_wire(0), None);
        assert_eq!(Version::from_wire(0x1a2a_3a4a), None);
        assert!("v3".parse::<Version>().is_err());
    }

    /// RFC 9369 §3.2: the v2 packet types, and the inverse mapping for
    /// every pair of bits in both versions.
    #[test]
    fn long_type_bits_follow_the_rfcs() {
        use LongType::*;
        let v1 = [(Initial, 0), (ZeroRtt, 1), (Handshake, 2), (Retry, 3)];
        let v2 = [(Initial, 1), (ZeroRtt, 2), (Handshake, 3), (Retry, 0)];
        for (version, table) in [(Version::V1, v1), (Version::V2, v2)] {
            for (ty, bits) in table {
                assert_eq!(version.long_type_bits(ty), bits, "{version} {ty:?}");
                assert_eq!(version.long_type_from_bits(bits), ty, "{version} {bits}");
                // Only the low two bits count.
                assert_eq!(version.long_type_from_bits(bits | 0xfc), ty);
            }
        }
    }
}
