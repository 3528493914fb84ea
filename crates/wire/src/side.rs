//! Who is who: endpoint roles, stream directions and stream identifiers (RFC 9000 §2.1).

use core::fmt;

/// The role of an endpoint in a connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The endpoint that initiated the connection.
    Client,
    /// The endpoint that accepted it.
    Server,
}

impl Side {
    /// True for [`Side::Client`].
    pub fn is_client(self) -> bool {
        self == Side::Client
    }

    /// True for [`Side::Server`].
    pub fn is_server(self) -> bool {
        self == Side::Server
    }

    /// The peer's role.
    pub fn opposite(self) -> Side {
        match self {
            Side::Client => Side::Server,
            Side::Server => Side::Client,
        }
    }
}

/// Whether a stream carries data both ways or only from its initiator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Dir {
    /// Bidirectional.
    Bi,
    /// Unidirectional (initiator to peer only).
    Uni,
}

/// A QUIC stream identifier: the two low bits encode initiator and direction
/// (RFC 9000 §2.1), the rest is the stream's index among its kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The `index`-th stream of the given initiator and direction.
    pub fn new(initiator: Side, dir: Dir, index: u64) -> Self {
        let low = (initiator.is_server() as u64) | (((dir == Dir::Uni) as u64) << 1);
        StreamId(index.saturating_mul(4).saturating_add(low))
    }

    /// Which side opened the stream.
    pub fn initiator(self) -> Side {
        if self.0 & 1 == 0 {
            Side::Client
        } else {
            Side::Server
        }
    }

    /// The stream's direction.
    pub fn dir(self) -> Dir {
        if self.0 & 2 == 0 {
            Dir::Bi
        } else {
            Dir::Uni
        }
    }

    /// The stream's index among streams of the same initiator and direction.
    pub fn index(self) -> u64 {
        self.0 >> 2
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_id_bits() {
        let id = StreamId::new(Side::Server, Dir::Uni, 5);
        assert_eq!(id.0, 23);
        assert_eq!(id.initiator(), Side::Server);
        assert_eq!(id.dir(), Dir::Uni);
        assert_eq!(id.index(), 5);
        assert_eq!(StreamId(0).initiator(), Side::Client);
        assert_eq!(StreamId(0).dir(), Dir::Bi);
    }
}
