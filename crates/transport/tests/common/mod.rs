//! A quinn-style `Pair`: a client and a server endpoint joined by in-memory
//! links with a virtual clock, latency, a bottleneck rate, and a loss hook.
//! No sockets, no threads, no wall clock: every test is deterministic.
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::crypto::{self, ServerVerification};
use transport::streams::{ReadError, WriteError};
use wire::Dir;
use transport::policy::PolicyFactory;
use transport::{ClientConfig, ConnectionHandle, Endpoint, EndpointConfig, ServerConfig, TransportConfig};
use wire::time::{Duration, Instant};

/// One datagram on its way.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    from: SocketAddr,
    data: Vec<u8>,
}

/// Which datagrams to drop.
pub type DropHook = Box<dyn FnMut(Instant, bool /* to_server */, &[u8], &mut ChaCha8Rng) -> bool>;

/// Two endpoints and the network between them.
pub struct Pair {
    pub now: Instant,
    pub client: Endpoint,
    pub server: Endpoint,
    pub client_addr: SocketAddr,
    pub server_addr: SocketAddr,
    /// One-way propagation delay.
    pub latency: Duration,
    /// Bottleneck rate of each direction, bytes per second.
    pub rate: u64,
    queue: BinaryHeap<Reverse<InFlight>>,
    link_free_at: [Instant; 2],
    seq: u64,
    pub drop: Option<DropHook>,
    pub rng: ChaCha8Rng,
    pub client_conn: Option<ConnectionHandle>,
    pub server_conn: Option<ConnectionHandle>,
    pub delivered: [u64; 2],
    pub dropped: [u64; 2],
    buf: Vec<u8>,
}

pub fn server_config(transport: TransportConfig) -> ServerConfig {
    let (chain, key) = crypto::self_signed(&["localhost"]).expect("certificate");
    let tls = crypto::server_config(chain, key, &[b"hq-interop"]).expect("server config");
    ServerConfig { tls, transport: Arc::new(transport) }
}

pub fn client_config(transport: TransportConfig) -> ClientConfig {
    let tls = crypto::client_config(ServerVerification::Insecure, &[b"hq-interop"]).expect("client config");
    ClientConfig { tls, transport: Arc::new(transport), server_name: "localhost".into() }
}

pub fn transport_with(policy: Arc<dyn PolicyFactory>) -> TransportConfig {
    TransportConfig { policy, ..TransportConfig::default() }
}

impl Pair {
    pub fn new(server_transport: TransportConfig, client_transport: TransportConfig) -> Self {
        let server = Endpoint::new(EndpointConfig::server(7, server_config(server_transport)));
        let client = Endpoint::new(EndpointConfig::client(9));
        let mut pair = Pair {
            now: Instant::ZERO,
            client,
            server,
            client_addr: "127.0.0.1:5000".parse().unwrap(),
            server_addr: "127.0.0.1:4433".parse().unwrap(),
            latency: Duration::from_millis(10),
            rate: 12_500_000,
            queue: BinaryHeap::new(),
            link_free_at: [Instant::ZERO; 2],
            seq: 0,
            drop: None,
            rng: ChaCha8Rng::seed_from_u64(42),
            client_conn: None,
            server_conn: None,
            delivered: [0; 2],
            dropped: [0; 2],
            buf: Vec::new(),
        };
        let cfg = client_config(client_transport);
        let h = pair.client.connect(pair.now, &cfg, pair.server_addr).expect("connect");
        pair.client_conn = Some(h);
        pair
    }

    pub fn default_pair() -> Self {
        Pair::new(TransportConfig::default(), TransportConfig::default())
    }

    /// Drop each datagram independently with probability `p` (both ways),
    /// but never the first `spare` datagrams (let the handshake through).
    pub fn with_random_loss(mut self, p: f64) -> Self {
        self.drop = Some(Box::new(move |_, _, _, rng| rng.gen::<f64>() < p));
        self
    }

    pub fn client(&mut self) -> &mut transport::Connection {
        let h = self.client_conn.expect("client connection");
        self.client.connection_mut(h).expect("client connection alive")
    }

    /// The client connection, if the endpoint still has it.
    pub fn client_opt(&mut self) -> Option<&mut transport::Connection> {
        let h = self.client_conn?;
        self.client.connection_mut(h)
    }

    pub fn server(&mut self) -> &mut transport::Connection {
        let h = self.server_conn.expect("server connection");
        self.server.connection_mut(h).expect("server connection alive")
    }

    fn flush(&mut self) {
        loop {
            let mut any = false;
            while let Some(t) = self.client.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.size].to_vec();
                self.enqueue(true, self.client_addr, data);
                any = true;
            }
            while let Some(t) = self.server.poll_transmit(self.now, &mut self.buf) {
                let data = self.buf[..t.size].to_vec();
                self.enqueue(false, self.server_addr, data);
                any = true;
            }
            if !any {
                break;
            }
        }
    }

    fn enqueue(&mut self, to_server: bool, from: SocketAddr, data: Vec<u8>) {
        let dir = to_server as usize;
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
        self.link_free_at[dir] = start + ser;
        let at = start + ser + self.latency;
        self.seq += 1;
        self.queue.push(Reverse(InFlight { at, seq: self.seq, to_server, from, data }));
    }

    /// Inject a raw datagram toward the server, arriving now.
    pub fn inject_to_server(&mut self, data: Vec<u8>) {
        self.seq += 1;
        self.queue.push(Reverse(InFlight { at: self.now, seq: self.seq, to_server: true, from: self.client_addr, data }));
    }

    /// Advance to the next event and process it. False if nothing is left.
    pub fn step(&mut self) -> bool {
        self.step_until(Instant::MAX)
    }

    /// Like [`Pair::step`], but never moves the clock past `limit`.
    pub fn step_until(&mut self, limit: Instant) -> bool {
        self.flush();
        let next_packet = self.queue.peek().map(|Reverse(p)| p.at);
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()].into_iter().flatten().min();
        let next = match (next_packet, next_timer) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => match a.or(b) {
                Some(t) => t,
                None => return false,
            },
        };
        self.now = self.now.max(next.min(limit));
        while let Some(Reverse(p)) = self.queue.peek() {
            if p.at > self.now {
                break;
            }
            let Reverse(mut p) = self.queue.pop().unwrap();
            self.delivered[p.to_server as usize] += 1;
            if p.to_server {
                if let Some(h) = self.server.handle_datagram(self.now, p.from, &mut p.data) {
                    self.server_conn.get_or_insert(h);
                }
            } else {
                self.client.handle_datagram(self.now, p.from, &mut p.data);
            }
        }
        self.client.handle_timeout(self.now);
        self.server.handle_timeout(self.now);
        while self.server.accept().is_some() {}
        self.flush();
        true
    }

    /// Step until `done` holds or `limit` of virtual time passes.
    pub fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
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

    /// Complete the handshake (both sides Connected).
    pub fn connect(&mut self) {
        self.connect_within(Duration::from_secs(10));
    }

    /// Complete the handshake within `limit` of virtual time.
    pub fn connect_within(&mut self, limit: Duration) {
        let mut c = false;
        let mut s = false;
        let ok = self.drive_until(limit, |p| {
            while let Some(ev) = p.client_conn.and_then(|h| p.client.connection_mut(h)).and_then(|c| c.poll_event()) {
                if ev == transport::Event::Connected {
                    c = true;
                }
            }
            if let Some(h) = p.server_conn {
                while let Some(ev) = p.server.connection_mut(h).and_then(|c| c.poll_event()) {
                    if ev == transport::Event::Connected {
                        s = true;
                    }
                }
            }
            c && s
        });
        assert!(ok, "handshake did not complete within {limit:?} (client: {:?}, server: {:?})",
            self.client_opt().map(|c| (c.is_handshaking(), c.close_reason().cloned(), c.stats().pto_count)),
            self.server_conn.and_then(|h| self.server.connection(h)).map(|c| (c.is_handshaking(), c.close_reason().cloned(), c.stats().pto_count)));
    }
}

impl Pair {
    /// Server sends `data` to the client on a client-opened stream (the CDN
    /// direction); returns what the client received.
    pub fn download(&mut self, data: &[u8], limit: Duration) -> Vec<u8> {
            let pair = self;
        pair.connect();
        let id = pair.client().streams().open(Dir::Bi).expect("open stream");
        assert_eq!(pair.client().streams().write(id, b"GET /\r\n").unwrap(), 7);
        pair.client().streams().finish(id).unwrap();
        let mut sent = 0usize;
        let mut accepted = None;
        let mut received = Vec::new();
        let mut done = false;
        let mut buf = vec![0u8; 65536];
        pair.drive_until(limit, |p| {
            if accepted.is_none() {
                accepted = p.server().streams().accept(Dir::Bi);
            }
            if let Some(sid) = accepted {
                while sent < data.len() {
                    match p.server().streams().write(sid, &data[sent..]) {
                        Ok(n) => sent += n,
                        Err(WriteError::Blocked) => break,
                        Err(e) => panic!("write failed: {e:?}"),
                    }
                }
                if sent == data.len() {
                    let _ = p.server().streams().finish(sid);
                }
            }
            loop {
                match p.client().streams().read(id, &mut buf) {
                    Ok(Some(n)) => received.extend_from_slice(&buf[..n]),
                    Ok(None) => {
                        done = true;
                        break;
                    }
                    Err(ReadError::Blocked) => break,
                    Err(e) => panic!("read failed: {e:?}"),
                }
            }
            done
        });
        assert!(done, "download did not finish: {} of {} bytes", received.len(), data.len());
        received
    }
}

/// Deterministic test content.
pub fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}
