//! Connection IDs and stateless reset tokens (RFC 9000 §5.1, §10.3).

use core::cmp::Ordering;
use core::fmt;
use core::hash::{Hash, Hasher};
use core::ops::Deref;

use crate::error::DecodeError;

/// A QUIC connection ID: 0 to 20 bytes, stored inline so it is `Copy` and
/// never allocates (RFC 9000 §17.2: v1 limits connection IDs to 20 bytes).
///
/// Equality, ordering and hashing look at the ID's bytes only.
#[derive(Clone, Copy)]
pub struct ConnectionId {
    len: u8,
    bytes: [u8; ConnectionId::MAX_LEN],
}

impl ConnectionId {
    /// The longest connection ID QUIC v1 allows (RFC 9000 §17.2).
    pub const MAX_LEN: usize = 20;

    /// The zero-length connection ID.
    pub const EMPTY: ConnectionId = ConnectionId {
        len: 0,
        bytes: [0; Self::MAX_LEN],
    };

    /// A connection ID holding `bytes`; an error if longer than [`Self::MAX_LEN`].
    pub fn new(bytes: &[u8]) -> Result<Self, DecodeError> {
        let mut cid = Self::EMPTY;
        let dst = cid
            .bytes
            .get_mut(..bytes.len())
            .ok_or(DecodeError::InvalidValue(
                "connection ID longer than 20 bytes",
            ))?;
        dst.copy_from_slice(bytes);
        // bytes.len() <= 20 was just checked.
        cid.len = bytes.len() as u8;
        Ok(cid)
    }

    /// Length in bytes (0..=20).
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// True for the zero-length connection ID.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The ID's bytes.
    pub fn as_slice(&self) -> &[u8] {
        // len <= MAX_LEN is an invariant of every constructor.
        self.bytes.get(..self.len()).unwrap_or(&[])
    }
}

impl Default for ConnectionId {
    fn default() -> Self {
        Self::EMPTY
    }
}

impl Deref for ConnectionId {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for ConnectionId {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl TryFrom<&[u8]> for ConnectionId {
    type Error = DecodeError;
    fn try_from(bytes: &[u8]) -> Result<Self, DecodeError> {
        ConnectionId::new(bytes)
    }
}

impl PartialEq for ConnectionId {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for ConnectionId {}

impl Hash for ConnectionId {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl PartialOrd for ConnectionId {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ConnectionId {
    fn cmp(&self, other: &Self) -> Ordering {
        self.as_slice().cmp(other.as_slice())
    }
}

fn write_hex(f: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    for b in bytes {
        write!(f, "{b:02x}")?;
    }
    Ok(())
}

impl fmt::Debug for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("cid:")?;
        write_hex(f, self)
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, self)
    }
}

/// A stateless reset token (RFC 9000 §10.3): 16 bytes bound to a connection ID,
/// whose appearance at the end of a datagram tells the peer the connection is gone.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ResetToken(pub [u8; 16]);

impl ResetToken {
    /// Length of a token on the wire.
    pub const LEN: usize = 16;

    /// True if `datagram` ends with this token (RFC 9000 §10.3.1). The caller
    /// should compare in constant time when that matters; this is a plain
    /// comparison of public data.
    pub fn matches_tail_of(&self, datagram: &[u8]) -> bool {
        // RFC 9000 §10.3: a reset carries at least 5 bytes before the token
        // (first byte plus 38 unpredictable bits), so 21 bytes in all.
        datagram.len() >= 21 && datagram.ends_with(&self.0)
    }
}

impl From<[u8; 16]> for ResetToken {
    fn from(b: [u8; 16]) -> Self {
        ResetToken(b)
    }
}

impl Deref for ResetToken {
    type Target = [u8; 16];
    fn deref(&self) -> &[u8; 16] {
        &self.0
    }
}

impl fmt::Debug for ResetToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("token:")?;
        write_hex(f, &self.0)
    }
}

impl fmt::Display for ResetToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_hex(f, &self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    #[test]
    fn length_limit() {
        assert!(ConnectionId::new(&[7; 20]).is_ok());
        assert!(ConnectionId::new(&[7; 21]).is_err());
        let empty = ConnectionId::new(&[]).unwrap();
        assert!(empty.is_empty());
        assert_eq!(empty, ConnectionId::EMPTY);
        assert_eq!(empty.len(), 0);
    }

    #[test]
    fn formatting_is_hex() {
        let cid = ConnectionId::new(&[0x83, 0x94, 0xc8, 0xf0]).unwrap();
        assert_eq!(cid.to_string(), "8394c8f0");
        assert_eq!(format!("{cid:?}"), "cid:8394c8f0");
        assert_eq!(ResetToken([0xab; 16]).to_string(), "ab".repeat(16));
    }

    #[test]
    fn equality_ignores_nothing_but_bytes() {
        let a = ConnectionId::new(&[1, 2]).unwrap();
        let b = ConnectionId::new(&[1, 2, 0]).unwrap();
        assert_ne!(a, b); // a trailing zero is part of the ID
        assert!(a < b);
        let set: HashSet<_> = [a, b, ConnectionId::new(&[1, 2]).unwrap()]
            .into_iter()
            .collect();
        assert_eq!(set.len(), 2);
    }

    #[test]
    fn reset_token_tail() {
        let t = ResetToken([9; 16]);
        let mut d = vec![0x40; 5];
        d.extend_from_slice(&[9; 16]);
        assert!(t.matches_tail_of(&d));
        assert!(!t.matches_tail_of(&d[1..])); // 20 bytes: too short for a reset
        d.push(0);
        assert!(!t.matches_tail_of(&d));
    }

    proptest! {
        #[test]
        fn bytes_round_trip(bytes in proptest::collection::vec(any::<u8>(), 0..=20)) {
            let cid = ConnectionId::new(&bytes).unwrap();
            prop_assert_eq!(&*cid, &bytes[..]);
            prop_assert_eq!(cid.len(), bytes.len());
        }

        #[test]
        fn ordering_matches_slices(a in proptest::collection::vec(any::<u8>(), 0..=20),
                                   b in proptest::collection::vec(any::<u8>(), 0..=20)) {
            let (ca, cb) = (ConnectionId::new(&a).unwrap(), ConnectionId::new(&b).unwrap());
            prop_assert_eq!(ca.cmp(&cb), a.cmp(&b));
            prop_assert_eq!(ca == cb, a == b);
        }
    }
}
