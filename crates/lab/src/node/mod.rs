//! [`QuicNode`]: a real `transport::Endpoint` plus an application, as a
//! simulator [`Node`].
//!
//! The application is one of two hq-interop-like roles (HTTP/0.9 over QUIC,
//! as `artq serve`/`artq get` speak it):
//! - the **server** answers `GET /N\r\n` on a bidirectional stream with file
//!   `N` of the [`Workload`] and FIN, generating the bytes on the fly;
//! - the **client** connects at time zero and requests the files one after
//!   another over that one connection, checks every byte against the same
//!   generator, records when each file completed, and closes the connection
//!   when the last one is in.
//!
//! The roles live in `client` and `server`; this module holds the node
//! itself. The node copies each datagram into a scratch buffer (the endpoint
//! decrypts in place), runs the endpoint, then lets the application react;
//! the simulator then drains [`Node::poll_transmit`]. Nothing here reads a clock
//! unless CPU measurement is switched on ([`QuicNode::set_measure_cpu`]),
//! which only times the node's own methods.

mod client;
mod server;

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use netem::{Datagram, Node};
use transport::connection::ConnectError;
use transport::{ClientConfig, ConnectionStats, Endpoint, EndpointConfig, ServerConfig};
use wire::time::Instant;

use crate::metrics::Recorder;
use crate::workload::Workload;

use client::ClientApp;
pub use client::{ClientError, ClientReport, FileTimes};
use server::ServerApp;

/// Capacity of a fresh transmit buffer: artq's 1350-byte datagrams and
/// then some, so the endpoint never reallocates.
const TX_CAPACITY: usize = 2048;
/// Bytes generated or read per step.
pub(crate) const CHUNK: usize = 64 * 1024;

/// The TLS configurations of every simulated run: one self-signed Ed25519
/// certificate for `localhost`, made once per process from a fixed seed
/// (self-signing per run would dominate short runs, and a fixed seed keeps
/// the handshake bytes' sizes identical everywhere).
pub fn tls_configs() -> Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>), String> {
    type Pair = (Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>);
    static CONFIGS: OnceLock<Result<Pair, String>> = OnceLock::new();
    CONFIGS
        .get_or_init(|| {
            use transport::crypto::{self, ServerVerification, ALPN_HQ_INTEROP};
            let (chain, key) = crypto::self_signed_from_seed(&["localhost"], [0x5a; 32])
                .map_err(|e| e.to_string())?;
            let server =
                crypto::server_config(chain, key, &[ALPN_HQ_INTEROP]).map_err(|e| e.to_string())?;
            let client = crypto::client_config(ServerVerification::Insecure, &[ALPN_HQ_INTEROP])
                .map_err(|e| e.to_string())?;
            Ok((server, client))
        })
        .clone()
}

#[derive(Debug)]
enum Role {
    Server(ServerApp),
    Client(ClientApp),
}

/// A QUIC endpoint and its application, driven by the simulator.
///
/// Calling protocol: build with [`QuicNode::server`] or [`QuicNode::client`],
/// add to a [`netem::Simulator`] at the address given, run, then read
/// [`QuicNode::client_report`] / [`QuicNode::sender_stats`].
pub struct QuicNode {
    addr: SocketAddr,
    endpoint: Endpoint,
    role: Role,
    tx: Vec<u8>,
    cpu: Option<std::time::Duration>,
}

impl core::fmt::Debug for QuicNode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QuicNode")
            .field("addr", &self.addr)
            .field("role", &self.role)
            .finish_non_exhaustive()
    }
}

impl QuicNode {
    /// A server at `addr` serving `workload`'s files. `recorder`, if given,
    /// subscribes to the first connection as the sender.
    pub fn server(
        addr: SocketAddr,
        config: ServerConfig,
        endpoint_seed: u64,
        workload: Workload,
        content_seed: u64,
        recorder: Option<Recorder>,
    ) -> QuicNode {
        let endpoint = Endpoint::new(EndpointConfig::server(endpoint_seed, config));
        let app = ServerApp::new(workload, content_seed, recorder);
        QuicNode::new(addr, endpoint, Role::Server(app))
    }

    /// A client at `addr` that connects to `server` at time zero and fetches
    /// every file of `workload`. `recorder`, if given, subscribes to the
    /// connection as the receiver.
    pub fn client(
        addr: SocketAddr,
        server: SocketAddr,
        config: &ClientConfig,
        endpoint_seed: u64,
        workload: Workload,
        content_seed: u64,
        recorder: Option<Recorder>,
    ) -> Result<QuicNode, ConnectError> {
        let mut endpoint = Endpoint::new(EndpointConfig::client(endpoint_seed));
        let conn = endpoint.connect(Instant::ZERO, config, server)?;
        if let (Some(r), Some(c)) = (&recorder, endpoint.connection_mut(conn)) {
            c.subscribe(r.receiver_subscriber());
        }
        let app = ClientApp::new(conn, workload, content_seed);
        Ok(QuicNode::new(addr, endpoint, Role::Client(app)))
    }

    fn new(addr: SocketAddr, endpoint: Endpoint, role: Role) -> QuicNode {
        QuicNode {
            addr,
            endpoint,
            role,
            tx: Vec::with_capacity(TX_CAPACITY),
            cpu: None,
        }
    }

    /// Times this node's methods from now on (wall clock; see
    /// [`QuicNode::cpu_time`]).
    pub fn set_measure_cpu(&mut self, on: bool) {
        self.cpu = on.then_some(std::time::Duration::ZERO);
    }

    /// Wall-clock time spent inside this node's [`Node`] methods, when
    /// measured: the node's CPU cost, as the simulator runs on one thread.
    pub fn cpu_time(&self) -> Option<std::time::Duration> {
        self.cpu
    }

    /// The client's progress and results (`None` for a server).
    pub fn client_report(&self) -> Option<&ClientReport> {
        match &self.role {
            Role::Client(c) => Some(&c.report),
            Role::Server(_) => None,
        }
    }

    /// The counters of the server's first connection: live ones if it is
    /// still there, else those it had when it ended (`None` for a client or
    /// before any connection).
    pub fn sender_stats(&self) -> Option<ConnectionStats> {
        let Role::Server(s) = &self.role else {
            return None;
        };
        let first = *s.conns.first()?;
        self.endpoint
            .connection(first)
            .map(|c| c.stats())
            .or_else(|| s.final_stats.clone())
    }

    /// The recovery scheme of the server's first connection.
    pub fn sender_scheme(&self) -> Option<String> {
        let Role::Server(s) = &self.role else {
            return None;
        };
        s.scheme.clone()
    }

    /// Runs `f`, adding its wall time to the CPU account when measuring.
    fn timed<T>(&mut self, f: impl FnOnce(&mut Self) -> T) -> T {
        if self.cpu.is_none() {
            return f(self);
        }
        let start = std::time::Instant::now();
        let out = f(self);
        let spent = start.elapsed();
        if let Some(c) = self.cpu.as_mut() {
            *c = c.saturating_add(spent);
        }
        out
    }

    /// Lets the application react to whatever the endpoint just did.
    fn drive(&mut self, now: Instant) {
        match &mut self.role {
            Role::Server(s) => s.drive(now, &mut self.endpoint),
            Role::Client(c) => c.drive(now, &mut self.endpoint),
        }
    }
}

impl Node for QuicNode {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        _to: SocketAddr,
        payload: &mut [u8],
    ) {
        self.timed(|n| {
            // Decrypted in place: the simulator hands the buffer over.
            n.endpoint.handle_datagram(now, from, payload);
            n.drive(now);
        });
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        self.timed(|n| {
            let t = n.endpoint.poll_transmit(now, &mut n.tx)?;
            // Hand the buffer itself over (no copy); the next one is fresh.
            let mut payload = std::mem::replace(&mut n.tx, Vec::with_capacity(TX_CAPACITY));
            payload.truncate(t.size);
            Some(Datagram::new(n.addr, t.destination, payload))
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.timed(|n| n.endpoint.poll_timeout())
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.timed(|n| {
            n.endpoint.handle_timeout(now);
            n.drive(now);
        });
    }

    fn is_finished(&self) -> bool {
        match &self.role {
            Role::Client(c) => {
                c.report.error.is_some()
                    || (c.closed
                        && self
                            .endpoint
                            .connection(c.conn)
                            .is_none_or(|conn| conn.is_closed()))
            }
            Role::Server(s) => {
                !s.conns.is_empty()
                    && s.conns
                        .iter()
                        .all(|&h| self.endpoint.connection(h).is_none_or(|c| c.is_closed()))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_configs_are_made_once() {
        let (s1, c1) = tls_configs().expect("configs");
        let (s2, c2) = tls_configs().expect("configs");
        assert!(Arc::ptr_eq(&s1, &s2) && Arc::ptr_eq(&c1, &c2));
    }
}
