//! The preferred_address transport parameter's value (RFC 9000 §18.2,
//! Figure 22): the addresses a server would rather be reached at, with the
//! connection ID and stateless reset token to use there (sequence number 1,
//! RFC 9000 §5.1.1). The one parser of that grammar: decoding the
//! transport parameters checks it, the transport reads it.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use crate::cid::ConnectionId;
use crate::error::DecodeError;

/// A server's preferred address, parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreferredAddress {
    /// The IPv4 address and port, if the server offers one (all-zero on
    /// the wire means none).
    pub v4: Option<SocketAddrV4>,
    /// The IPv6 address and port, if the server offers one.
    pub v6: Option<SocketAddrV6>,
    /// The connection ID to send to at the preferred address (1..=20
    /// bytes: a server using zero-length IDs has no preferred address).
    pub cid: ConnectionId,
    /// The stateless reset token of that connection ID.
    pub reset_token: [u8; 16],
}

/// Bytes of the value besides the connection ID: IPv4 (4) + port (2) +
/// IPv6 (16) + port (2) + CID length (1) + reset token (16).
const FIXED: usize = 4 + 2 + 16 + 2 + 1 + 16;

fn invalid(reason: &'static str) -> DecodeError {
    DecodeError::InvalidTransportParameter(reason)
}

impl PreferredAddress {
    /// Parse the parameter's value.
    pub fn decode(value: &[u8]) -> Result<Self, DecodeError> {
        let cid_len = usize::from(
            *value
                .get(24)
                .ok_or(invalid("preferred_address too short"))?,
        );
        if !(1..=ConnectionId::MAX_LEN).contains(&cid_len) {
            return Err(invalid(
                "preferred_address connection ID length not in 1..=20",
            ));
        }
        if value.len() != FIXED + cid_len {
            return Err(invalid("preferred_address length mismatch"));
        }
        let ip4: [u8; 4] = value[0..4]
            .try_into()
            .map_err(|_| invalid("preferred_address"))?;
        let port4 = u16::from_be_bytes([value[4], value[5]]);
        let ip6: [u8; 16] = value[6..22]
            .try_into()
            .map_err(|_| invalid("preferred_address"))?;
        let port6 = u16::from_be_bytes([value[22], value[23]]);
        let cid = ConnectionId::new(&value[25..25 + cid_len])?;
        let reset_token: [u8; 16] = value[25 + cid_len..]
            .try_into()
            .map_err(|_| invalid("preferred_address length mismatch"))?;
        // RFC 9000 §18.2: an address family the server does not offer is
        // sent as an all-zero address and port.
        let v4 =
            (ip4 != [0; 4] || port4 != 0).then(|| SocketAddrV4::new(Ipv4Addr::from(ip4), port4));
        let v6 = (ip6 != [0; 16] || port6 != 0)
            .then(|| SocketAddrV6::new(Ipv6Addr::from(ip6), port6, 0, 0));
        Ok(PreferredAddress {
            v4,
            v6,
            cid,
            reset_token,
        })
    }

    /// The parameter's value.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FIXED + self.cid.len());
        let (ip4, port4) = self.v4.map_or(([0; 4], 0), |a| (a.ip().octets(), a.port()));
        let (ip6, port6) = self
            .v6
            .map_or(([0; 16], 0), |a| (a.ip().octets(), a.port()));
        out.extend_from_slice(&ip4);
        out.extend_from_slice(&port4.to_be_bytes());
        out.extend_from_slice(&ip6);
        out.extend_from_slice(&port6.to_be_bytes());
        out.push(self.cid.len() as u8);
        out.extend_from_slice(&self.cid);
        out.extend_from_slice(&self.reset_token);
        out
    }

    /// The preferred address of the same family as `current` (a client
    /// moves within its address family: its socket is bound to one), if
    /// offered and usable (not unspecified, port not zero).
    pub fn for_family_of(&self, current: SocketAddr) -> Option<SocketAddr> {
        let addr = match current {
            SocketAddr::V4(_) => SocketAddr::V4(self.v4?),
            SocketAddr::V6(_) => SocketAddr::V6(self.v6?),
        };
        (!addr.ip().is_unspecified() && addr.port() != 0).then_some(addr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_reads_absent_families_as_none() {
        let pa = PreferredAddress {
            v4: Some("127.0.0.2:4434".parse().unwrap()),
            v6: None,
            cid: ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap(),
            reset_token: [9; 16],
        };
        let bytes = pa.encode();
        assert_eq!(bytes.len(), FIXED + 8);
        assert_eq!(PreferredAddress::decode(&bytes).unwrap(), pa);
        let here: SocketAddr = "127.0.0.1:4433".parse().unwrap();
        assert_eq!(
            pa.for_family_of(here),
            Some("127.0.0.2:4434".parse().unwrap())
        );
        assert_eq!(pa.for_family_of("[::1]:4433".parse().unwrap()), None);
    }

    #[test]
    fn rejects_bad_lengths() {
        assert!(PreferredAddress::decode(&[0; 20]).is_err());
        assert!(PreferredAddress::decode(&[0; 41]).is_err()); // zero-length CID
        let mut v = vec![0; 24];
        v.push(4);
        v.extend_from_slice(&[0; 4 + 15]);
        assert!(PreferredAddress::decode(&v).is_err()); // token one short
    }
}
