//! The endpoint: routes datagrams to connections by connection ID, accepts
//! new connections (server), answers unknown versions with Version
//! Negotiation, and multiplexes the connections' output onto one socket.
//! Sans-IO like the connection: the driver passes datagrams, time and
//! buffers in.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::cid::ConnectionId;
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::Instant;

use crate::config::{ClientConfig, EndpointConfig};
use crate::connection::{ConnectError, Connection, EndpointEvent, Transmit};

/// Index of a connection inside its endpoint. Handles are never reused, so
/// an application may key its own state by them safely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Most connections one endpoint holds (a bound on memory per hostile peer).
const MAX_CONNECTIONS: usize = 4096;

/// A QUIC endpoint: many connections behind one UDP socket.
pub struct Endpoint {
    config: EndpointConfig,
    rng: ChaCha8Rng,
    /// Slots are never reused (a dead one costs a pointer), keeping handles unique.
    connections: Vec<Option<Box<Connection>>>,
    /// Local connection IDs to connections. Only looked up, never iterated,
    /// so its order cannot leak into results.
    routes: HashMap<ConnectionId, ConnectionHandle>,
    /// Server: (client address, original DCID) of connections still in the
    /// handshake, for the client's retransmitted Initials.
    initial_routes: HashMap<(SocketAddr, ConnectionId), ConnectionHandle>,
    responses: VecDeque<(SocketAddr, Vec<u8>)>,
    incoming: VecDeque<ConnectionHandle>,
    next_poll: usize,
    /// Indices of live connections (iteration is over these only).
    live: BTreeSet<usize>,
    /// Drained connections kept until the application has read their
    /// last events (ConnectionLost in particular).
    drained: BTreeSet<usize>,
}

impl core::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("connections", &self.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A new endpoint.
    pub fn new(config: EndpointConfig) -> Self {
        Endpoint {
            rng: ChaCha8Rng::seed_from_u64(config.rng_seed),
            config,
            connections: Vec::new(),
            routes: HashMap::new(),
            initial_routes: HashMap::new(),
            responses: VecDeque::new(),
            incoming: VecDeque::new(),
            next_poll: 0,
            live: BTreeSet::new(),
            drained: BTreeSet::new(),
        }
    }

    /// Number of live connections.
    pub fn len(&self) -> usize {
        self.live.len()
    }

    /// True when no connection is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handles of all live connections, in index order.
    pub fn handles(&self) -> Vec<ConnectionHandle> {
        self.live.iter().map(|&i| ConnectionHandle(i)).collect()
    }

    /// A connection, if it is still there.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(h.0).and_then(|c| c.as_deref())
    }

    /// A connection, mutably.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        self.connections.get_mut(h.0).and_then(|c| c.as_deref_mut())
    }

    /// The next connection accepted by the server.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.incoming.pop_front()
    }

    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let mut bytes = [0u8; ConnectionId::MAX_LEN];
            let len = self.config.local_cid_len.clamp(1, ConnectionId::MAX_LEN);
            self.rng.fill_bytes(&mut bytes[..len]);
            if let Ok(cid) = ConnectionId::new(&bytes[..len]) {
                if !self.routes.contains_key(&cid) {
                    return cid;
                }
            }
        }
    }

    fn insert(&mut self, conn: Connection) -> ConnectionHandle {
        self.connections.push(Some(Box::new(conn)));
        let idx = self.connections.len() - 1;
        self.live.insert(idx);
        ConnectionHandle(idx)
    }

    /// Open a client connection.
    pub fn connect(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
    ) -> Result<ConnectionHandle, ConnectError> {
        let cid = self.new_cid();
        let seed = self.rng.gen();
        let conn = Connection::connect(now, config, remote, cid, seed)?;
        let h = self.insert(conn);
        self.routes.insert(cid, h);
        Ok(h)
    }

    /// Route one datagram. Returns the connection it went to, if any.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        data: &mut [u8],
    ) -> Option<ConnectionHandle> {
        self.reap();
        let header = packet::decode_protected(data, self.config.local_cid_len).ok()?;
        let (dcid, initial) = match &header {
            ProtectedHeader::Long {
                ty,
                dst_cid,
                src_cid,
                ..
            } => (*dst_cid, (*ty == LongType::Initial).then_some(*src_cid)),
            ProtectedHeader::Short { dst_cid, .. } => (*dst_cid, None),
            ProtectedHeader::Retry { dst_cid, .. }
            | ProtectedHeader::VersionNegotiation { dst_cid, .. } => (*dst_cid, None),
            ProtectedHeader::UnsupportedVersion {
                dst_cid, src_cid, ..
            } => {
                self.version_negotiation(remote, *dst_cid, *src_cid, data.len());
                return None;
            }
        };
        let handle = self
            .routes
            .get(&dcid)
            .or_else(|| self.initial_routes.get(&(remote, dcid)))
            .copied();
        let handle = match handle {
            Some(h) => h,
            None => {
                let client_scid = initial?;
                self.accept_initial(now, remote, dcid, client_scid, data.len())?
            }
        };
        let conn = self.connection_mut(handle)?;
        conn.handle_datagram(now, remote, data);
        self.process_endpoint_events(handle);
        Some(handle)
    }

    /// A client Initial for an unknown connection: start a server connection.
    fn accept_initial(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        dcid: ConnectionId,
        client_scid: ConnectionId,
        datagram_len: usize,
    ) -> Option<ConnectionHandle> {
        let server = self.config.server.clone()?;
        // RFC 9000 §14.1: drop Initial datagrams below 1200 bytes; §7.2: the
        // client's first DCID is at least 8 bytes.
        if datagram_len < packet::MIN_INITIAL_SIZE
            || dcid.len() < 8
            || self.len() >= MAX_CONNECTIONS
        {
            return None;
        }
        let cid = self.new_cid();
        let seed = self.rng.gen();
        let conn = match Connection::accept(now, &server, remote, cid, dcid, client_scid, seed) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept connection");
                return None;
            }
        };
        let h = self.insert(conn);
        self.routes.insert(cid, h);
        self.initial_routes.insert((remote, dcid), h);
        self.incoming.push_back(h);
        Some(h)
    }

    fn version_negotiation(
        &mut self,
        remote: SocketAddr,
        dcid: ConnectionId,
        scid: ConnectionId,
        len: usize,
    ) {
        // RFC 9000 §6.1: only answer datagrams that could be Initials, and
        // keep the queue bounded.
        if self.config.server.is_none()
            || len < packet::MIN_INITIAL_SIZE
            || self.responses.len() >= 64
        {
            return;
        }
        let mut out = Vec::with_capacity(64);
        let first = self.rng.gen::<u8>();
        packet::write_version_negotiation(&mut out, &scid, &dcid, &[packet::QUIC_V1], first);
        self.responses.push_back((remote, out));
    }

    fn process_endpoint_events(&mut self, h: ConnectionHandle) {
        let mut drained = false;
        while let Some(ev) = self.connection_mut(h).and_then(|c| c.poll_endpoint_event()) {
            match ev {
                EndpointEvent::NewLocalCid(cid) => {
                    self.routes.insert(cid, h);
                }
                EndpointEvent::RetireLocalCid(cid) => {
                    self.routes.remove(&cid);
                }
                EndpointEvent::Drained => drained = true,
            }
        }
        if drained {
            self.routes.retain(|_, v| *v != h);
            self.initial_routes.retain(|_, v| *v != h);
            self.drained.insert(h.0);
        }
    }

    /// Forget drained connections whose events the application has read.
    fn reap(&mut self) {
        if self.drained.is_empty() {
            return;
        }
        let done: Vec<usize> = self
            .drained
            .iter()
            .copied()
            .filter(|&i| self.connections[i].as_ref().is_none_or(|c| !c.has_events()))
            .collect();
        for i in done {
            self.drained.remove(&i);
            self.connections[i] = None;
            self.live.remove(&i);
            self.incoming.retain(|v| v.0 != i);
        }
    }

    /// The next datagram to send, from any connection (round robin).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.reap();
        if let Some((dst, data)) = self.responses.pop_front() {
            buf.clear();
            buf.extend_from_slice(&data);
            return Some(Transmit {
                destination: dst,
                size: data.len(),
            });
        }
        // Round robin: start after the connection that sent last.
        let mut cursor = self.next_poll;
        for _ in 0..self.live.len() {
            let Some(&idx) = self
                .live
                .range(cursor..)
                .next()
                .or_else(|| self.live.iter().next())
            else {
                break;
            };
            cursor = idx + 1;
            let Some(conn) = self.connections[idx].as_mut() else {
                continue;
            };
            let t = conn.poll_transmit(now, buf);
            self.process_endpoint_events(ConnectionHandle(idx));
            if let Some(t) = t {
                self.next_poll = idx + 1;
                return Some(t);
            }
        }
        None
    }

    /// Earliest timer of any connection.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.live
            .iter()
            .filter_map(|&i| self.connections[i].as_ref()?.poll_timeout())
            .min()
    }

    /// Fire expired timers of every connection.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reap();
        let live: Vec<usize> = self.live.iter().copied().collect();
        for i in live {
            let Some(conn) = self.connections[i].as_mut() else {
                continue;
            };
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
            self.process_endpoint_events(ConnectionHandle(i));
        }
    }
}
