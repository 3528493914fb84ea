//! A self-contained two-endpoint harness for end-to-end policy tests: a
//! client and a server `transport::Endpoint` joined by in-memory links with a
//! virtual clock, a fixed one-way latency, a bottleneck rate and a seeded
//! Bernoulli drop. No sockets, no threads, no wall clock. (The approach of
//! the transport crate's own `tests/common`, which is not importable.)
#![allow(dead_code)]

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::crypto::{self, ServerVerification};
use transport::policy::{
    DataKind, Decision, LostData, PacketFate, PathView, PolicyFactory, RecoveryPolicy, SentView,
};
use transport::streams::{ReadError, WriteError};
use transport::{
    ClientConfig, ConnectionHandle, ConnectionStats, Endpoint, EndpointConfig, ServerConfig,
    TransportConfig,
};
use wire::time::{Duration, Instant};
use wire::Dir;

/// One datagram on its way.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct InFlight {
    at: Instant,
    seq: u64,
    to_server: bool,
    from: SocketAddr,
    data: Vec<u8>,
}

/// Two endpoints and the network between them.
pub struct Pair {
    pub now: Instant,
    client: Endpoint,
    server: Endpoint,
    client_addr: SocketAddr,
    server_addr: SocketAddr,
    /// One-way propagation delay.
    pub latency: Duration,
    /// Bottleneck rate of each direction, bytes per second.
    pub rate: u64,
    /// Drop probability of every datagram, both directions.
    pub loss: f64,
    /// Optional outages on the data (server to client) direction: each
    /// datagram starts one with probability `.0`; it drops everything sent
    /// for `.1` (a time-based loss burst, like a drop-tail queue overflow).
    pub outages: Option<(f64, Duration)>,
    outage_until: Instant,
    queue: BinaryHeap<Reverse<InFlight>>,
    link_free_at: [Instant; 2],
    seq: u64,
    loss_rng: ChaCha8Rng,
    client_conn: Option<ConnectionHandle>,
    server_conn: Option<ConnectionHandle>,
    buf: Vec<u8>,
}

impl Pair {
    /// A client connecting to a server whose sender uses `policy`; `seed`
    /// seeds the endpoints and the loss pattern.
    pub fn new(policy: Arc<dyn PolicyFactory>, loss: f64, seed: u64) -> Self {
        let (chain, key) =
            crypto::self_signed_from_seed(&["localhost"], [7; 32]).expect("certificate");
        let tls = crypto::server_config(chain, key, &[b"hq-interop"]).expect("server config");
        let transport = TransportConfig {
            policy,
            ..TransportConfig::default()
        };
        let server_cfg = ServerConfig {
            tls,
            transport: Arc::new(transport),
        };
        let server = Endpoint::new(EndpointConfig::server(
            seed.wrapping_mul(2).wrapping_add(1),
            server_cfg,
        ));
        let client = Endpoint::new(EndpointConfig::client(seed.wrapping_mul(2).wrapping_add(2)));
        let mut pair = Pair {
            now: Instant::ZERO,
            client,
            server,
            client_addr: "127.0.0.1:5000".parse().expect("address"),
            server_addr: "127.0.0.1:4433".parse().expect("address"),
            latency: Duration::from_millis(10),
            rate: 12_500_000,
            loss,
            outages: None,
            outage_until: Instant::ZERO,
            queue: BinaryHeap::new(),
            link_free_at: [Instant::ZERO; 2],
            seq: 0,
            loss_rng: ChaCha8Rng::seed_from_u64(seed ^ 0x5eed),
            client_conn: None,
            server_conn: None,
            buf: Vec::new(),
        };
        let tls = crypto::client_config(ServerVerification::Insecure, &[b"hq-interop"])
            .expect("client config");
        let cfg = ClientConfig {
            tls,
            transport: Arc::new(TransportConfig::default()),
            server_name: "localhost".into(),
        };
        let h = pair
            .client
            .connect(pair.now, &cfg, pair.server_addr)
            .expect("connect");
        pair.client_conn = Some(h);
        pair
    }

    fn client(&mut self) -> &mut transport::Connection {
        let h = self.client_conn.expect("client connection");
        self.client
            .connection_mut(h)
            .expect("client connection alive")
    }

    fn server(&mut self) -> Option<&mut transport::Connection> {
        let h = self.server_conn?;
        self.server.connection_mut(h)
    }

    /// The sender's (server's) counters.
    pub fn server_stats(&mut self) -> ConnectionStats {
        self.server().expect("server connection").stats()
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
        if self.loss_rng.gen::<f64>() < self.loss {
            return;
        }
        let dir = to_server as usize;
        let ser = Duration::from_nanos(data.len() as u64 * 1_000_000_000 / self.rate.max(1));
        let start = self.link_free_at[dir].max(self.now);
        if let (false, Some((p, length))) = (to_server, self.outages) {
            // Keyed on when the datagram takes the link.
            if start < self.outage_until {
                return;
            }
            if self.loss_rng.gen::<f64>() < p {
                self.outage_until = start + length;
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
            data,
        }));
    }

    /// Advance to the next event (never past `limit`) and process it.
    fn step_until(&mut self, limit: Instant) -> bool {
        self.flush();
        let next_packet = self.queue.peek().map(|Reverse(p)| p.at);
        let next_timer = [self.client.poll_timeout(), self.server.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        let Some(next) = [next_packet, next_timer].into_iter().flatten().min() else {
            return false;
        };
        self.now = self.now.max(next.min(limit));
        while self.queue.peek().is_some_and(|Reverse(p)| p.at <= self.now) {
            let Some(Reverse(mut p)) = self.queue.pop() else {
                break;
            };
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
    fn drive_until(&mut self, limit: Duration, mut done: impl FnMut(&mut Pair) -> bool) -> bool {
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

    /// Complete the handshake (both sides report `Connected`).
    fn connect(&mut self) {
        let (mut c, mut s) = (false, false);
        let ok = self.drive_until(Duration::from_secs(30), |p| {
            while let Some(ev) = p.client().poll_event() {
                c |= ev == transport::Event::Connected;
            }
            while let Some(ev) = p.server().and_then(|s| s.poll_event()) {
                s |= ev == transport::Event::Connected;
            }
            c && s
        });
        assert!(ok, "handshake did not complete");
    }

    /// The client requests one object; the server (the sender under test)
    /// writes `data` and FIN. Returns what the client read, or None if it did
    /// not finish within `limit` of virtual time.
    pub fn download(&mut self, data: &[u8], limit: Duration) -> Option<Vec<u8>> {
        self.connect();
        let id = self.client().streams().open(Dir::Bi).expect("open stream");
        assert_eq!(
            self.client()
                .streams()
                .write(id, b"GET /\r\n")
                .expect("request"),
            7
        );
        self.client().streams().finish(id).expect("finish request");
        let mut sent = 0usize;
        let mut accepted = None;
        let mut received = Vec::new();
        let mut done = false;
        let mut buf = vec![0u8; 65536];
        self.drive_until(limit, |p| {
            if let Some(server) = p.server() {
                if accepted.is_none() {
                    accepted = server.streams().accept(Dir::Bi);
                }
                if let Some(sid) = accepted {
                    while sent < data.len() {
                        match server.streams().write(sid, &data[sent..]) {
                            Ok(n) => sent += n,
                            Err(WriteError::Blocked) => break,
                            Err(e) => panic!("write failed: {e:?}"),
                        }
                    }
                    if sent == data.len() {
                        let _ = server.streams().finish(sid);
                    }
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
        done.then_some(received)
    }
}

/// Deterministic test content.
pub fn content(len: usize, seed: u64) -> Vec<u8> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut v = vec![0u8; len];
    rng.fill(&mut v[..]);
    v
}

/// What a [`Recorded`] policy saw and decided.
#[derive(Debug, Default)]
pub struct Record {
    /// `on_data_lost` calls: retransmission rounds started.
    pub rounds: u64,
    /// Replicas asked for, all rounds.
    pub replicas_asked: u64,
    /// Replica packets the transport reported as sent.
    pub replicas_sent: u64,
    /// Decisions that broke the seam's invariants (described).
    pub violations: Vec<String>,
}

/// Wraps a scheme's factory: every policy it builds delegates to the real
/// one and records its decisions.
#[derive(Debug)]
pub struct Recorded {
    pub inner: Arc<dyn PolicyFactory>,
    pub record: Arc<Mutex<Record>>,
}

#[derive(Debug)]
struct RecordedPolicy {
    inner: Box<dyn RecoveryPolicy>,
    record: Arc<Mutex<Record>>,
}

impl PolicyFactory for Recorded {
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(RecordedPolicy {
            inner: self.inner.build(),
            record: self.record.clone(),
        })
    }

    fn name(&self) -> String {
        self.inner.name()
    }
}

impl RecoveryPolicy for RecordedPolicy {
    fn name(&self) -> String {
        self.inner.name()
    }

    fn on_data_lost(
        &mut self,
        now: Instant,
        lost: &LostData,
        path: &PathView,
        rng: &mut dyn RngCore,
    ) -> Decision {
        let d = self.inner.on_data_lost(now, lost, path, rng);
        let mut r = self.record.lock().expect("record lock");
        r.rounds += 1;
        if let Decision::Retransmit { send_at, .. } = &d {
            r.replicas_asked += send_at.len() as u64;
            if send_at.is_empty() || send_at.windows(2).any(|w| w[0] > w[1]) {
                r.violations.push(format!("bad send times {send_at:?}"));
            }
            if let Some(t) = send_at.iter().find(|t| **t < now || **t > now + path.srtt) {
                r.violations
                    .push(format!("{t:?} outside [{now:?}, +{:?}]", path.srtt));
            }
        } else if lost.kind == DataKind::Stream {
            r.violations.push("dropped stream data".into());
        }
        d
    }

    fn on_packet_sent(&mut self, now: Instant, sent: &SentView) -> u64 {
        if sent.replica.is_some() {
            self.record.lock().expect("record lock").replicas_sent += 1;
        }
        self.inner.on_packet_sent(now, sent)
    }

    fn on_packet_acked(&mut self, now: Instant, fate: &PacketFate, path: &PathView) {
        self.inner.on_packet_acked(now, fate, path);
    }

    fn on_packet_lost(&mut self, now: Instant, fate: &PacketFate, path: &PathView) {
        self.inner.on_packet_lost(now, fate, path);
    }
}
