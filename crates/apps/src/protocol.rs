//! The application protocols artq speaks, and their ALPN tokens.
//!
//! This is the one list of ALPN tokens in the workspace: the transport knows
//! none (it negotiates whatever list its TLS configuration carries), the
//! applications ask [`Protocol::from_alpn`] what a connection speaks and
//! [`Protocol::server_session`] / [`Protocol::client_session`] for the
//! code that speaks it.

use crate::http::{ClientSession, ServerSession};

/// ALPN token of HTTP/3 (RFC 9114 §3.1).
pub const H3: &[u8] = b"h3";
/// ALPN token of hq-interop, HTTP/0.9 over QUIC as the QUIC interop runner
/// uses it.
pub const HQ_INTEROP: &[u8] = b"hq-interop";

/// An application protocol over a QUIC connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Protocol {
    /// HTTP/3 with QPACK (RFC 9114, RFC 9204).
    H3,
    /// hq-interop: `GET /path\r\n` on a bidirectional stream, answered with
    /// the bytes and FIN.
    HqInterop,
}

impl Protocol {
    /// Every protocol, in the server's order of preference.
    pub const ALL: [Protocol; 2] = [Protocol::H3, Protocol::HqInterop];

    /// The ALPN token.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            Protocol::H3 => H3,
            Protocol::HqInterop => HQ_INTEROP,
        }
    }

    /// The protocol a negotiated ALPN token names, if artq speaks it.
    pub fn from_alpn(alpn: &[u8]) -> Option<Protocol> {
        Protocol::ALL.into_iter().find(|p| p.alpn() == alpn)
    }

    /// The name used on the command line and in scenario files (`h3`,
    /// `hq-interop`).
    pub fn name(self) -> &'static str {
        match self {
            Protocol::H3 => "h3",
            Protocol::HqInterop => "hq-interop",
        }
    }

    /// The application close code of a connection that ends normally
    /// (hq-interop: 0; HTTP/3: H3_NO_ERROR).
    pub fn no_error_code(self) -> u64 {
        match self {
            Protocol::H3 => 0x100,
            Protocol::HqInterop => crate::hq::CLOSE_NO_ERROR,
        }
    }

    /// The application close code of a connection abandoned because of a
    /// local error (hq-interop: 1; HTTP/3: H3_INTERNAL_ERROR).
    pub fn error_code(self) -> u64 {
        match self {
            Protocol::H3 => 0x102,
            Protocol::HqInterop => crate::hq::CLOSE_ERROR,
        }
    }

    /// A server session of this protocol for a new connection.
    pub fn server_session(self) -> Box<dyn ServerSession> {
        match self {
            Protocol::HqInterop => Box::new(crate::hq::HqServer::new()),
            Protocol::H3 => Box::new(crate::h3::H3Server::new()),
        }
    }

    /// A client session of this protocol for a new connection.
    pub fn client_session(self) -> Box<dyn ClientSession> {
        match self {
            Protocol::HqInterop => Box::new(crate::hq::HqClient::new()),
            Protocol::H3 => Box::new(crate::h3::H3Client::new()),
        }
    }

    /// The ALPN list of a TLS configuration that offers `protocols`.
    pub fn alpn_list(protocols: &[Protocol]) -> Vec<&'static [u8]> {
        protocols.iter().map(|p| p.alpn()).collect()
    }
}

impl core::fmt::Display for Protocol {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::str::FromStr for Protocol {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "h3" => Ok(Protocol::H3),
            "hq-interop" | "hq" => Ok(Protocol::HqInterop),
            other => Err(format!("unknown protocol '{other}' (use h3 or hq-interop)")),
        }
    }
}

impl serde::Serialize for Protocol {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Protocol {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alpn_round_trips() {
        for p in Protocol::ALL {
            assert_eq!(Protocol::from_alpn(p.alpn()), Some(p));
            assert_eq!(p.name().parse::<Protocol>(), Ok(p));
        }
        assert_eq!(Protocol::from_alpn(b"h2"), None);
        assert!("spdy".parse::<Protocol>().is_err());
    }
}
