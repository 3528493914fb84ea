//! A test aid: two [`Endpoint`]s, a client and a server, joined by in-memory
//! links with a virtual clock, a one-way latency, a bottleneck rate per
//! direction and a seeded drop model. No sockets, no threads, no wall clock:
//! every run is a function of its seeds.
//!
//! Why it lives in the library: the transport crate's integration tests and
//! the recovery crate's end-to-end policy tests both need this pair, and
//! integration-test modules cannot be imported across crates. One copy here
//! means the two suites exercise the same network model.
//!
//! It is compiled only with the `test-hooks` cargo feature, which test builds
//! enable through dev-dependencies; it is never enabled in the `artq` binary.
//!
//! Every flush holds both endpoints to [`Connection::poll_transmit`]'s
//! contract (None means nothing until an input or a timeout) and panics,
//! failing the test, when one breaks it.
//!
//! The pair itself does not panic on anything a peer sends. The asserting
//! helpers ([`Pair::connect`], [`Pair::download`], [`Pair::client`],
//! [`Pair::server`]) panic by design, to fail the calling test; each has a
//! non-panicking counterpart.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::time::{Duration, Instant};
use wire::{Dir, StreamId};

use crate::crypto::{self, ServerVerification};
use crate::policy::PolicyFactory;
use crate::streams::{ReadError, WriteError};
use crate::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, EndpointConfig, Event, ServerConfig,
    TransportConfig,
};

/// The ALPN both sides offer.
const ALPN: &[u8] = crypto::TEST_ALPN;

/// One datagram on its way.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    from: SocketAddr,
    /// Where it is addressed.
    to: SocketAddr,
    /// Its ECN codepoint.
    ecn: Option<wire::ecn::Ecn>,
    data: Vec<u8>,
}

/// Decides which datagrams the network drops: called once per datagram a
/// side sends, with the current time, whether it travels toward the server,
/// its bytes and the pair's seeded RNG. True drops it.
pub type DropHook = Box<dyn FnMut(Instant, bool /* to_server */, &[u8], &mut ChaCha8Rng) -> bool>;

/// Time-based loss bursts on the data (server to client) direction, like a
/// drop-tail queue overflowing: why a test can put replicas sent back to
/// back into the same burst.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Outages {
    /// Probability that a datagram taking the link starts an outage (it is
    /// dropped itself).
    pub probability: f64,
    /// How long an outage drops every datagram that takes the link.
    pub length: Duration,
}

/// Two endpoints and the network between them.
pub struct Pair {
    /// The virtual clock.
    pub now: Instant,
    /// The client endpoint (it opens the connection).
    pub client: Endpoint,
    /// The server endpoint.
    pub server: Endpoint,
    /// The client's address as the server sees it.
    pub client_addr: SocketAddr,
    /// The server's address as the client sees it.
    pub server_addr: SocketAddr,
    /// Other addresses the server receives on (its preferred addresses,
    /// RFC 9000 §9.6); datagrams sent toward the server at any address
    /// but these and `server_addr` are lost.
    pub server_also_at: Vec<SocketAddr>,
    /// One-way propagation delay.
    pub latency: Duration,
    /// Bottleneck rate of each direction, bytes per second.
    pub rate: u64,
    /// Which datagrams to drop; none when `None`. Applied first.
    pub drop: Option<DropHook>,
    /// Loss bursts on the server-to-client direction, applied after `drop`
    /// and keyed on when a datagram takes the link.
    pub outages: Option<Outages>,
    /// The RNG of the drop hook and of the outages.
    pub rng: ChaCha8Rng,
    /// How long [`Pair::connect`] waits for the handshake, in virtual time.
    pub handshake_limit: Duration,
    /// At this time the client's NAT binding moves it to this address
    /// ([`Pair::rebind_client`]).
    pub rebind: Option<(Instant, SocketAddr)>,
    /// From the first time given on, the client's NAT binding moves it to
    /// the next port every period (`artq link --rebind-every`).
    pub rebind_every: Option<(Instant, Duration)>,
    /// The network clears every datagram's ECN bits.
    pub bleach_ecn: bool,
    /// The client's connection.
    pub client_conn: Option<ConnectionHandle>,
    /// The server's connection, once the first client datagram arrived.
    pub server_conn: Option<ConnectionHandle>,
    /// Server connections of the client connections before the last
    /// [`Pair::reconnect`]: their datagrams do not make them current again.
    earlier_server_conns: Vec<ConnectionHandle>,
    /// Datagrams delivered, indexed by direction (1: toward the server).
    pub delivered: [u64; 2],
    /// Datagrams dropped, indexed by direction (1: toward the server).
    pub dropped: [u64; 2],
    outage_until: Instant,
    queue: BinaryHeap<Reverse<InFlight>>,
    link_free_at: [Instant; 2],
    seq: u64,
    buf: Vec<u8>,
}

/// A server configuration for `localhost` with a fresh self-signed
/// certificate and `transport` parameters.
///
/// # Panics
/// If the certificate or the TLS configuration cannot be built (fixed inputs,
/// so never in practice).
pub fn server_config(transport: TransportConfig) -> ServerConfig {
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ED25519).expect("key");
    let (chain, key) = crypto::self_signed_with_key(&["localhost"], key).expect("certificate");
    server_config_from(chain, key, transport)
}

/// Like [`server_config`], but the certificate's key comes from `seed`, so
/// the handshake's bytes do not vary between runs.
///
/// # Panics
/// As [`server_config`].
pub fn seeded_server_config(transport: TransportConfig, seed: [u8; 32]) -> ServerConfig {
    let (chain, key) = crypto::self_signed_from_seed(&["localhost"], seed).expect("certificate");
    server_config_from(chain, key, transport)
}

fn server_config_from(
    chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    transport: TransportConfig,
) -> ServerConfig {
    let tls = crypto::server_config(chain, key, &[ALPN]).expect("server config");
    ServerConfig {
        tls,
        transport: Arc::new(transport),
        preferred_address: Default::default(),
    }
}

/// A client configuration for `localhost` that skips certificate
/// verification (the server's certificate is self-signed).
///
/// # Panics
/// If the TLS configuration cannot be built (fixed inputs).
pub fn client_config(transport: TransportConfig) -> ClientConfig {
    let tls = crypto::client_config(ServerVerification::Insecure, &[ALPN]).expect("client config");
    ClientConfig {
        tls,
        transport: Arc::new(transport),
        server_name: "localhost".into(),
    }
}

/// [`server_config`] with session tickets and 0-RTT turned on
/// ([`crypto::enable_server_resumption`]).
pub fn resumable_server_config(transport: TransportConfig) -> ServerConfig {
    let mut config = server_config(transport);
    config.tls = crypto::enable_server_resumption(config.tls, true);
    config
}

/// [`client_config`] that keeps tickets and sends 0-RTT
/// ([`crypto::enable_client_resumption`]): clone it to resume.
pub fn resumable_client_config(transport: TransportConfig) -> ClientConfig {
    let mut config = client_config(transport);
    config.tls = crypto::enable_client_resumption(config.tls);
    config
}

/// Default transport parameters with `policy` as the loss-recovery policy.
pub fn transport_with(policy: Arc<dyn PolicyFactory>) -> TransportConfig {
    TransportConfig {
        policy,
        ..TransportConfig::default()
    }
}

/// `len` bytes of deterministic test content from `seed`.
pub fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// Why [`Pair::try_download`] did not return the object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DownloadError {
    /// The handshake did not complete within [`Pair::handshake_limit`].
    Handshake,
    /// The client connection is gone or cannot open a stream.
    Request,
    /// The server failed to write the object.
    Write(WriteError),
    /// The client failed to read it.
    Read(ReadError),
    /// The time limit passed first.
    Unfinished {
        /// Bytes the client had read.
        received: usize,
        /// Bytes of the object.
        expected: usize,
    },
}

impl fmt::Display for DownloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Handshake => write!(f, "handshake did not complete"),
            Self::Request => write!(f, "client could not send its request"),
            Self::Write(e) => write!(f, "write failed: {e:?}"),
            Self::Read(e) => write!(f, "read failed: {e:?}"),
            Self::Unfinished { received, expected } => {
                write!(f, "download did not finish: {received} of {expected} bytes")
            }
        }
    }
}

impl std::error::Error for DownloadError {}

impl Pair {
    /// A client connecting to a server with the given transport parameters;
    /// fixed endpoint seeds, a fresh server certificate, drop RNG seed 42,
    /// 10 ms latency, 100 Mbit/s, no loss.
    pub fn new(server_transport: TransportConfig, client_transport: TransportConfig) -> Self {
        Self::build(
            server_config(server_transport),
            client_config(client_transport),
            7,
            9,
            42,
        )
    }

    /// Like [`Pair::new`], with both configurations given (e.g. resumable
    /// ones: [`resumable_server_config`], [`resumable_client_config`]).
    pub fn with_configs(server: ServerConfig, client: &ClientConfig) -> Self {
        Self::build(server, client.clone(), 7, 9, 42)
    }

    /// Open a new client connection to the server from the same client
    /// endpoint (the previous connections stay as they are): what a
    /// returning client does, resuming when `config` holds a ticket. The
    /// new connection becomes [`Pair::client`]; [`Pair::server`] follows
    /// once its first datagram arrives.
    pub fn reconnect(&mut self, config: &ClientConfig) {
        self.client_conn = self.client.connect(self.now, config, self.server_addr).ok();
        self.earlier_server_conns.extend(self.server_conn.take());
    }

    /// [`Pair::new`] with default parameters on both sides.
    pub fn default_pair() -> Self {
        Pair::new(TransportConfig::default(), TransportConfig::default())
    }

    /// Like [`Pair::new`], but everything random comes from `seed`: the
    /// endpoints, the drop RNG, and a fixed server certificate.
    pub fn seeded(
        server_transport: TransportConfig,
        client_transport: TransportConfig,
        seed: u64,
    ) -> Self {
        Self::build(
            seeded_server_config(server_transport, [7; 32]),
            client_config(client_transport),
            seed.wrapping_mul(2).wrapping_add(1),
            seed.wrapping_mul(2).wrapping_add(2),
            seed ^ 0x5eed,
        )
    }

    fn build(
        server: ServerConfig,
        cfg: ClientConfig,
        server_seed: u64,
        client_seed: u64,
        rng_seed: u64,
    ) -> Self {
        let mut pair = Pair {
            now: Instant::ZERO,
            client: Endpoint::new(EndpointConfig::client(client_seed)),
            server: Endpoint::new(EndpointConfig::server(server_seed, server)),
            client_addr: SocketAddr::from(([127, 0, 0, 1], 5000)),
            server_addr: SocketAddr::from(([127, 0, 0, 1], 4433)),
            server_also_at: Vec::new(),
            latency: Duration::from_millis(10),
            rate: 12_500_000,
            drop: None,
            outages: None,
            rng: ChaCha8Rng::seed_from_u64(rng_seed),
            handshake_limit: Duration::from_secs(10),
            rebind: None,
            rebind_every: None,
            bleach_ecn: false,
            client_conn: None,
            server_conn: None,
            earlier_server_conns: Vec::new(),
            delivered: [0; 2],
            dropped: [0; 2],
            outage_until: Instant::ZERO,
            queue: BinaryHeap::new(),
            link_free_at: [Instant::ZERO; 2],
            seq: 0,
            buf: Vec::new(),
        };
        // A fresh client endpoint always accepts a connect; if it ever did
        // not, `client_conn` stays `None` and the helpers report it.
        pair.client_conn = pair.client.connect(pair.now, &cfg, pair.server_addr).ok();
        pair
    }

    /// Drop each datagram independently with probability `p`, both ways
    /// (the handshake included).
    pub fn with_random_loss(mut self, p: f64) -> Self {
        self.drop = Some(Box::new(move |_, _, _, rng| rng.gen::<f64>() < p));
        self
    }

    /// The client connection.
    ///
    /// # Panics
    /// If it is gone (use [`Pair::client_opt`] when that can happen).
    pub fn client(&mut self) -> &mut Connection {
        self.client_opt().expect("client connection alive")
    }

    /// The client connection, if the endpoint still has it.
    pub fn client_opt(&mut self) -> Option<&mut Connection> {
        let h = self.client_conn?;
        self.client.connection_mut(h)
    }

    /// The server connection.
    ///
    /// # Panics
    /// If there is none yet or it is gone (see [`Pair::server_opt`]).
    pub fn server(&mut self) -> &mut Connection {
        self.server_opt().expect("server connection alive")
    }

    /// The server connection, if one was accepted and is still there.
    pub fn server_opt(&mut self) -> Option<&mut Connection> {
        let h = self.server_conn?;
        self.server.connection_mut(h)
    }

    fn flush(&mut self) {
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.size].to_vec();
                self.enqueue(true, self.client_addr, t.destination, t.ecn, data);
                any = true;
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.size].to_vec();
                let from = t.source.unwrap_or(self.server_addr);
                self.enqueue(false, from, t.destination, t.ecn, data);
                any = true;
            }
            if !any {
                break;
            }
        }
        // `poll_transmit`'s contract: None means nothing to send until an
        // input or `poll_timeout`. The loop above polls again whenever a
        // side sent something, and each step begins with a flush, so a
        // break of it would pass unseen (a real driver polls only after an
        // event, and the work stalls): hold both sides to it here, polling
        // every connection, also those the endpoint's ready set skips.
        for (side, endpoint) in [("client", &mut self.client), ("server", &mut self.server)] {
            if let Some((_, t)) = endpoint.poll_transmit_scan(self.now, &mut self.buf) {
                panic!(
                    "the {side} had a {}-byte datagram to send at {:?} right after its \
                     poll_transmit returned None (a transport bug: the work would wait \
                     for an unrelated event)",
                    t.size, self.now
                );
            }
        }
    }

    /// The client's NAT binding changes: from now on its datagrams come
    /// from `addr`, and datagrams sent to its old address are lost
    /// (those already on their way still arrive).
    pub fn rebind_client(&mut self, addr: SocketAddr) {
        self.client_addr = addr;
    }

    fn enqueue(
        &mut self,
        to_server: bool,
        from: SocketAddr,
        to: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        data: Vec<u8>,
    ) {
        // A path that clears the ECN bits, as some middleboxes do.
        let ecn = ecn.filter(|_| !self.bleach_ecn);
        let dir = usize::from(to_server);
        if !to_server && to != self.client_addr {
            // Sent to a binding the client's NAT no longer has.
            self.dropped[dir] += 1;
            return;
        }
        if to_server && to != self.server_addr && !self.server_also_at.contains(&to) {
            // Nobody listens there.
            self.dropped[dir] += 1;
            return;
        }
        let dropped = match self.drop.as_mut() {
            Some(hook) => hook(self.now, to_server, &data, &mut self.rng),
            None => false,
        };
        if dropped {
            self.dropped[dir] += 1;
            return;
        }
        let ser = Duration::from_nanos(data.len() as u64 * 1_000_000_000 / self.rate.max(1));
        let start = self.link_free_at[dir].max(self.now);
        if let (false, Some(o)) = (to_server, self.outages) {
            // Keyed on when the datagram takes the link. Inside an outage no
            // random number is drawn.
            if start < self.outage_until {
                self.dropped[dir] += 1;
                return;
            }
            if self.rng.gen::<f64>() < o.probability {
                self.outage_until = start + o.length;
                self.dropped[dir] += 1;
                return;
            }
        }
        self.link_free_at[dir] = start + ser;
        let at = start + ser + self.latency;
        self.seq += 1;
        self.queue.push(Reverse(InFlight {
            at,
            seq: self.seq,
            to_server,
            from,
            to,
            ecn,
            data,
        }));
    }

    /// Inject a raw datagram toward the server, arriving now.
    pub fn inject_to_server(&mut self, data: Vec<u8>) {
        self.seq += 1;
        self.queue.push(Reverse(InFlight {
            at: self.now,
            seq: self.seq,
            to_server: true,
            from: self.client_addr,
            to: self.server_addr,
            ecn: None,
            data,
        }));
    }

    /// Advance to the next event and process it. False if nothing is left.
    pub fn step(&mut self) -> bool {
        self.step_until(Instant::MAX)
    }

    /// Like [`Pair::step`], but never moves the clock past `limit`.
    pub fn step_until(&mut self, limit: Instant) -> bool {
        self.flush();
        let next_packet = self.queue.peek().map(|Reverse(p)| p.at);
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let next_rebind = self.rebind_every.map(|(at, _)| at);
        let Some(next) = [next_packet, next_timer, next_rebind]
            .into_iter()
            .flatten()
            .min()
        else {
            return false;
        };
        self.now = self.now.max(next.min(limit));
        if let Some((at, addr)) = self.rebind {
            if self.now >= at {
                self.rebind = None;
                self.rebind_client(addr);
            }
        }
        if let Some((at, every)) = self.rebind_every {
            if self.now >= at {
                let mut next = self.client_addr;
                next.set_port(next.port().wrapping_add(1).max(1024));
                self.rebind_client(next);
                self.rebind_every = Some((at + every, every));
            }
        }
        while self.queue.peek().is_some_and(|Reverse(p)| p.at <= self.now) {
            let Some(Reverse(mut p)) = self.queue.pop() else {
                break;
            };
            self.delivered[usize::from(p.to_server)] += 1;
            if p.to_server {
                if let Some(h) =
                    self.server
                        .handle_datagram_on(self.now, Some(p.to), p.from, p.ecn, &mut p.data)
                {
                    if !self.earlier_server_conns.contains(&h) {
                        self.server_conn.get_or_insert(h);
                    }
                }
            } else {
                self.client
                    .handle_datagram(self.now, p.from, p.ecn, &mut p.data);
            }
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        while self.server.accept().is_some() {}
        self.flush();
        true
    }

    /// Step until `done` holds or `limit` of virtual time passes; returns
    /// whether `done` held.
    pub fn drive_until(
        &mut self,
        limit: Duration,
        mut done: impl FnMut(&mut Pair) -> bool,
    ) -> bool {
        let end = self.now + limit;
        while self.now < end {
            if done(self) {
                return true;
            }
            if !self.step_until(end) {
                return done(self);
            }
        }
        done(self)
    }

    /// Complete the handshake within [`Pair::handshake_limit`].
    ///
    /// # Panics
    /// If it does not complete (the calling test fails).
    pub fn connect(&mut self) {
        self.connect_within(self.handshake_limit);
    }

    /// Complete the handshake within `limit` of virtual time.
    ///
    /// # Panics
    /// If it does not complete (the calling test fails), with both sides'
    /// state in the message.
    pub fn connect_within(&mut self, limit: Duration) {
        let ok = self.try_connect_within(limit);
        let state = |c: &Connection| {
            (
                c.is_handshaking(),
                c.close_reason().cloned(),
                c.stats().pto_count,
            )
        };
        assert!(
            ok,
            "handshake did not complete within {limit:?} (client: {:?}, server: {:?})",
            self.client_opt().map(|c| state(c)),
            self.server_opt().map(|c| state(c)),
        );
    }

    /// Drive until both sides report [`Event::Connected`] or `limit` of
    /// virtual time passes; returns whether they did. Consumes the events
    /// of both connections until then.
    pub fn try_connect_within(&mut self, limit: Duration) -> bool {
        let (mut c, mut s) = (false, false);
        self.drive_until(limit, |p| {
            while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
                c |= ev == Event::Connected;
            }
            while let Some(ev) = p.server_opt().and_then(|s| s.poll_event()) {
                s |= ev == Event::Connected;
            }
            c && s
        })
    }

    /// Connect, then the server sends `data` to the client on a
    /// client-opened stream (the CDN direction); returns what the client
    /// received.
    ///
    /// # Panics
    /// If the handshake or the transfer does not complete within `limit`.
    pub fn download(&mut self, data: &[u8], limit: Duration) -> Vec<u8> {
        self.try_download(data, limit)
            .unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`Pair::download`] without panicking: the client requests one object
    /// (`GET /`), the server writes `data` and FIN. The handshake must
    /// complete within [`Pair::handshake_limit`], the transfer within
    /// `limit` of virtual time.
    pub fn try_download(&mut self, data: &[u8], limit: Duration) -> Result<Vec<u8>, DownloadError> {
        if !self.try_connect_within(self.handshake_limit) {
            return Err(DownloadError::Handshake);
        }
        self.try_fetch(data, limit)
    }

    /// The request and response of [`Pair::try_download`] over a
    /// connection that is already up (a test that changes the network
    /// after the handshake).
    pub fn try_fetch(&mut self, data: &[u8], limit: Duration) -> Result<Vec<u8>, DownloadError> {
        self.try_fetch_watching(data, limit, |_| {})
    }

    /// [`Pair::try_fetch`], calling `watch` after each round of serving
    /// and reading: a test that checks a connection's state while the
    /// transfer is under way.
    pub fn try_fetch_watching(
        &mut self,
        data: &[u8],
        limit: Duration,
        mut watch: impl FnMut(&mut Pair),
    ) -> Result<Vec<u8>, DownloadError> {
        let client = self.client_opt().ok_or(DownloadError::Request)?;
        let id = client
            .streams()
            .open(Dir::Bi)
            .ok_or(DownloadError::Request)?;
        let request = b"GET /\r\n";
        if client
            .streams()
            .write(id, request)
            .map_err(DownloadError::Write)?
            != request.len()
        {
            return Err(DownloadError::Request);
        }
        client.streams().finish(id).map_err(DownloadError::Write)?;
        let mut sent = 0usize;
        let mut accepted = None;
        let mut received = Vec::new();
        let mut outcome = Ok(false);
        let mut buf = vec![0u8; 65536];
        self.drive_until(limit, |p| {
            outcome = serve_and_read(
                p,
                id,
                data,
                &mut sent,
                &mut accepted,
                &mut received,
                &mut buf,
            );
            watch(p);
            !matches!(outcome, Ok(false))
        });
        match outcome {
            Ok(true) => Ok(received),
            Ok(false) => Err(DownloadError::Unfinished {
                received: received.len(),
                expected: data.len(),
            }),
            Err(e) => Err(e),
        }
    }
}

/// One round of [`Pair::try_download`]: the server accepts the request
/// stream and writes what it can of `data`, the client reads what arrived.
/// Ok(true) once the client read FIN.
fn serve_and_read(
    p: &mut Pair,
    id: StreamId,
    data: &[u8],
    sent: &mut usize,
    accepted: &mut Option<StreamId>,
    received: &mut Vec<u8>,
    buf: &mut [u8],
) -> Result<bool, DownloadError> {
    if let Some(server) = p.server_opt() {
        if accepted.is_none() {
            *accepted = server.streams().accept(Dir::Bi);
        }
        if let Some(sid) = *accepted {
            while *sent < data.len() {
                match server.streams().write(sid, &data[*sent..]) {
                    Ok(n) => *sent += n,
                    Err(WriteError::Blocked) => break,
                    Err(e) => return Err(DownloadError::Write(e)),
                }
            }
            if *sent == data.len() {
                // Repeated finishes after the first are harmless errors.
                let _ = server.streams().finish(sid);
            }
        }
    }
    let Some(client) = p.client_opt() else {
        return Err(DownloadError::Request);
    };
    loop {
        match client.streams().read(id, buf) {
            Ok(Some(n)) => received.extend_from_slice(&buf[..n]),
            Ok(None) => return Ok(true),
            Err(ReadError::Blocked) => return Ok(false),
            Err(e) => return Err(DownloadError::Read(e)),
        }
    }
}
