//! QUIC variable-length integers (RFC 9000 §16).
//!
//! The two most significant bits of the first byte give the encoded length
//! (1, 2, 4 or 8 bytes); the remaining bits hold the value in network byte
//! order, so values range over 0..=2^62-1. Reading and writing live in
//! [`crate::coding`]; this module holds the value type and the length rule.

use core::fmt;

use crate::error::DecodeError;

/// An integer that fits a QUIC variable-length encoding: 0..=2^62-1.
///
/// Holding a `VarInt` proves the value is encodable, so encoders taking one
/// need no range check.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct VarInt(u64);

impl VarInt {
    /// The largest encodable value, 2^62-1 (RFC 9000 §16).
    pub const MAX: VarInt = VarInt((1 << 62) - 1);
    /// Zero.
    pub const ZERO: VarInt = VarInt(0);

    /// Any `u32` fits.
    pub const fn from_u32(v: u32) -> Self {
        VarInt(v as u64)
    }

    /// `v` if it is at most [`VarInt::MAX`], else an [`DecodeError::InvalidValue`].
    pub fn from_u64(v: u64) -> Result<Self, DecodeError> {
        if v <= Self::MAX.0 {
            Ok(VarInt(v))
        } else {
            Err(DecodeError::InvalidValue("integer exceeds 2^62-1"))
        }
    }

    /// `v`, or [`VarInt::MAX`] if it is larger.
    pub const fn saturating_from_u64(v: u64) -> Self {
        if v <= Self::MAX.0 {
            VarInt(v)
        } else {
            Self::MAX
        }
    }

    /// The value.
    pub const fn into_inner(self) -> u64 {
        self.0
    }

    /// Bytes of the minimal encoding: 1, 2, 4 or 8.
    pub fn size(self) -> usize {
        varint_len(self.0)
    }
}

/// Bytes of the minimal varint encoding of `v` (RFC 9000 §16, Table 4).
///
/// Values above [`VarInt::MAX`] are a caller bug: debug builds assert, release
/// builds answer 8 (the length the value would be clamped to).
#[inline]
pub fn varint_len(v: u64) -> usize {
    if v < (1 << 6) {
        1
    } else if v < (1 << 14) {
        2
    } else if v < (1 << 30) {
        4
    } else {
        debug_assert!(v <= VarInt::MAX.0, "varint {v} exceeds 2^62-1");
        8
    }
}

impl From<u32> for VarInt {
    fn from(v: u32) -> Self {
        VarInt::from_u32(v)
    }
}

impl From<u8> for VarInt {
    fn from(v: u8) -> Self {
        VarInt(u64::from(v))
    }
}

impl From<u16> for VarInt {
    fn from(v: u16) -> Self {
        VarInt(u64::from(v))
    }
}

impl TryFrom<u64> for VarInt {
    type Error = DecodeError;
    fn try_from(v: u64) -> Result<Self, DecodeError> {
        VarInt::from_u64(v)
    }
}

impl From<VarInt> for u64 {
    fn from(v: VarInt) -> u64 {
        v.0
    }
}

impl fmt::Debug for VarInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl fmt::Display for VarInt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_boundaries() {
        assert_eq!(varint_len(0), 1);
        assert_eq!(varint_len(63), 1);
        assert_eq!(varint_len(64), 2);
        assert_eq!(varint_len(16383), 2);
        assert_eq!(varint_len(16384), 4);
        assert_eq!(varint_len((1 << 30) - 1), 4);
        assert_eq!(varint_len(1 << 30), 8);
        assert_eq!(varint_len(VarInt::MAX.into_inner()), 8);
        assert_eq!(VarInt::from_u32(16384).size(), 4);
    }

    #[test]
    fn range_checked_construction() {
        assert_eq!(VarInt::from_u64((1 << 62) - 1), Ok(VarInt::MAX));
        assert!(VarInt::from_u64(1 << 62).is_err());
        assert!(VarInt::try_from(u64::MAX).is_err());
        assert_eq!(VarInt::saturating_from_u64(u64::MAX), VarInt::MAX);
        assert_eq!(u64::from(VarInt::from(7u8)), 7);
        assert_eq!(VarInt::from_u32(u32::MAX).into_inner(), u64::from(u32::MAX));
        assert_eq!(VarInt::from_u32(37).to_string(), "37");
        assert!(VarInt::from_u32(1) < VarInt::from_u32(2));
    }
}
