//! The RPC workload: many small request/response exchanges over one
//! connection, issued open loop at a given rate, with one completion time
//! (FCT) per call. ART journal §7.7 (Fig. 26) measures ART on production RPC
//! traffic whose size distribution is not public; this module stands in a
//! published one.
//!
//! **Sizes** ([`RpcSampler`]): the `ETC` pool of Facebook's memcached
//! measurement (Atikoglu, Xu, Frachtenberg, Jiang, Paleczny, "Workload
//! Analysis of a Large-Scale Key-Value Store", SIGMETRICS 2012, §5 and
//! Table 5), the published datacenter request/response study with fitted
//! parameters. A call is a GET of one key:
//! - request: the key, Generalized Extreme Value with location
//!   μ = 30.7984, scale σ = 8.20449, shape k = 0.078688 bytes, rounded and
//!   clamped to 1..=[`MAX_KEY`] (memcached's key limit);
//! - response: the value, Generalized Pareto with location θ = 0, scale
//!   σ = 214.476, shape k = 0.348238 bytes (heavy tailed: mean about 329 B,
//!   median about 168 B, one value in 3,600 above 10 KB), rounded and
//!   clamped to 1..=[`MAX_VALUE`] (memcached's default item limit, 1 MB).
//!
//! **Arrivals**: open loop, Poisson at `rate` calls per second (ETC's
//! fitted inter-arrival law describes a whole server's load, not one
//! client's; a Poisson stream at a chosen rate is the usual reading). The
//! first call is due when the handshake completes; a call's FCT runs from
//! the time it was due to the time its last response byte was read, so a
//! call that waits for a stream credit is charged for the wait.
//!
//! **Wire form**: a call is an HTTP GET (hq-interop or HTTP/3, like every
//! workload) of `/rpc/<index>/<value size>?k=<key>`: the key travels in the
//! request, the value is [`FileContent`] of the call's index, checked byte
//! for byte by the client. [`RpcContent`] is the server side, mounted at
//! [`RPC_PREFIX`] ([`rpc_content`]) by the simulator and by `artq serve`
//! alike; `artq get --rpc` runs [`RpcClient`] over real UDP.
//!
//! Everything is drawn from one seeded generator in call order, so a seed
//! fixes the sizes and the schedule.

use std::collections::{BTreeMap, VecDeque};

use rand::RngCore;
use transport::rng::{RngSeed, StackRng};
use transport::streams::StreamEvent;
use transport::{Connection, ConnectionHandle, Endpoint, Event};
use wire::time::{Duration, Instant};
use wire::StreamId;

use crate::app::{App, OwnConnection};
use crate::content::{Content, FileContent, Refusal, Resource};
use crate::files::{ClientError, FileTimes, CHUNK};
use crate::http::{BodyError, ClientEvent, ClientSession, Request};
use crate::protocol::Protocol;

/// Where the RPC endpoint lives on a server: calls are
/// `/rpc/<index>/<value size>?k=<key>`.
pub const RPC_PREFIX: &str = "/rpc";

/// Largest key (request) size, bytes: memcached's key length limit.
pub const MAX_KEY: u64 = 250;
/// Largest value (response) size, bytes: memcached's default item limit.
pub const MAX_VALUE: u64 = 1_000_000;
/// Highest call rate a workload may ask for, calls per second.
pub const MAX_RATE: u64 = 100_000;

/// ETC key size: Generalized Extreme Value location (bytes).
pub const KEY_MU: f64 = 30.7984;
/// ETC key size: GEV scale (bytes).
pub const KEY_SIGMA: f64 = 8.20449;
/// ETC key size: GEV shape.
pub const KEY_SHAPE: f64 = 0.078688;
/// ETC value size: Generalized Pareto scale (bytes; location 0).
pub const VALUE_SIGMA: f64 = 214.476;
/// ETC value size: Generalized Pareto shape.
pub const VALUE_SHAPE: f64 = 0.348238;

/// One call as the sampler draws it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    /// Time since the previous call was due.
    pub gap: Duration,
    /// Request (key) size, bytes.
    pub key: u64,
    /// Response (value) size, bytes.
    pub value: u64,
}

/// Draws calls: Poisson gaps and ETC key and value sizes (module doc).
#[derive(Debug)]
pub struct RpcSampler {
    rng: StackRng,
    rate: u64,
}

impl RpcSampler {
    /// Calls at `rate` per second (at least 1), drawn from `seed`.
    pub fn new(seed: u64, rate: u64) -> RpcSampler {
        RpcSampler {
            rng: StackRng::new(RngSeed::Fixed(seed)),
            rate: rate.max(1),
        }
    }

    /// Uniform in (0, 1]: 53 random bits, never 0 (logarithms and negative
    /// powers of it stay finite).
    fn unit(&mut self) -> f64 {
        ((self.rng.next_u64() >> 11) + 1) as f64 / (1u64 << 53) as f64
    }

    /// A key size: the GEV inverse CDF, `μ + σ((−ln u)^(−k) − 1)/k`.
    pub fn key_size(&mut self) -> u64 {
        let u = self.unit().min(1.0 - f64::EPSILON);
        let x = KEY_MU + KEY_SIGMA * ((-u.ln()).powf(-KEY_SHAPE) - 1.0) / KEY_SHAPE;
        clamp_round(x, MAX_KEY)
    }

    /// A value size: the Generalized Pareto inverse CDF,
    /// `σ(v^(−k) − 1)/k` with `v = 1 − u`.
    pub fn value_size(&mut self) -> u64 {
        let v = self.unit();
        let x = VALUE_SIGMA * (v.powf(-VALUE_SHAPE) - 1.0) / VALUE_SHAPE;
        clamp_round(x, MAX_VALUE)
    }

    /// An exponential gap of mean `1 / rate` seconds.
    pub fn gap(&mut self) -> Duration {
        let secs = -self.unit().ln() / self.rate as f64;
        Duration::from_nanos((secs * 1e9).min(1e15) as u64)
    }

    /// The next call (gap, key, value: drawn in that order).
    pub fn next_call(&mut self) -> Call {
        let gap = self.gap();
        let key = self.key_size();
        let value = self.value_size();
        Call { gap, key, value }
    }
}

/// Rounds a sampled size to whole bytes in `1..=max` (NaN gives 1).
fn clamp_round(x: f64, max: u64) -> u64 {
    if x.is_nan() {
        return 1;
    }
    (x.round().clamp(1.0, max as f64)) as u64
}

/// The request path of call `index` with a `value`-byte response and a
/// `key`-byte key.
pub fn call_path(index: u64, key: u64, value: u64) -> String {
    let key: String = (0..key.min(MAX_KEY))
        .map(|j| char::from(b'a' + ((index + j) % 26) as u8))
        .collect();
    format!("{RPC_PREFIX}/{index}/{value}?k={key}")
}

/// A server's content with the RPC endpoint mounted at [`RPC_PREFIX`].
pub fn rpc_content(seed: u64) -> crate::content::Mounts {
    crate::content::Mounts::new().mount(RPC_PREFIX, Box::new(RpcContent { seed }))
}

/// The server side of the RPC workload: answers `/<index>/<size>` below
/// its mount point ([`RPC_PREFIX`]; any query) with [`FileContent`] of
/// `index` and `size` bytes, size at most [`MAX_VALUE`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RpcContent {
    /// Content seed (see [`FileContent`]).
    pub seed: u64,
}

impl Content for RpcContent {
    fn resolve(&mut self, _now: Instant, target: &str) -> Result<Resource, Refusal> {
        let path = target.split(['?', '#']).next().unwrap_or("");
        let rest = path.strip_prefix('/').ok_or(Refusal::NotFound)?;
        let (index, size) = rest.split_once('/').ok_or(Refusal::NotFound)?;
        let index: u64 = index.parse().map_err(|_| Refusal::NotFound)?;
        let size: u64 = size.parse().map_err(|_| Refusal::NotFound)?;
        if size > MAX_VALUE {
            return Err(Refusal::NotFound);
        }
        Ok(Resource {
            content_type: "application/octet-stream",
            length: Some(size),
            body: Box::new(FileContent::new(self.seed, index, size)),
        })
    }
}

/// What the RPC client has done.
#[derive(Clone, Debug, Default)]
pub struct RpcReport {
    /// Completed calls in completion order: when each was due and when its
    /// response was complete.
    pub calls: Vec<FileTimes>,
    /// Response body bytes received and checked.
    pub bytes_received: u64,
    /// Key bytes sent in requests.
    pub key_bytes: u64,
    /// When the last call completed.
    pub done_at: Option<Instant>,
    /// Why the client gave up.
    pub error: Option<ClientError>,
}

/// A call that is due, waiting for a stream.
#[derive(Clone, Copy, Debug)]
struct Due {
    index: u64,
    at: Instant,
    key: u64,
    value: u64,
}

/// A call whose request is sent.
#[derive(Debug)]
struct InFlight {
    due: Due,
    expect: FileContent,
    received: u64,
    head_seen: bool,
}

/// The RPC client application (one connection): `rpcs` calls at `rate`
/// per second.
pub struct RpcClient {
    protocol: Protocol,
    session: Box<dyn ClientSession>,
    authority: Option<String>,
    content_seed: u64,
    rpcs: u64,
    sampler: RpcSampler,
    /// The next call not yet due, and when it is due.
    next: Option<Due>,
    drawn: u64,
    waiting: VecDeque<Due>,
    inflight: BTreeMap<StreamId, InFlight>,
    conn: OwnConnection,
    connected: bool,
    closed: bool,
    report: RpcReport,
    buf: Vec<u8>,
}

impl RpcClient {
    /// `rpcs` calls at `rate` per second over `protocol`; sizes and gaps
    /// from `content_seed` (the server's content seed, so bodies check).
    pub fn new(
        protocol: Protocol,
        authority: Option<String>,
        content_seed: u64,
        rpcs: u64,
        rate: u64,
    ) -> RpcClient {
        RpcClient {
            protocol,
            session: protocol.client_session(),
            authority,
            content_seed,
            rpcs,
            sampler: RpcSampler::new(netem::derive_seed(content_seed, "rpc/calls"), rate),
            next: None,
            drawn: 0,
            waiting: VecDeque::new(),
            inflight: BTreeMap::new(),
            conn: OwnConnection::default(),
            connected: false,
            closed: false,
            report: RpcReport::default(),
            buf: vec![0; CHUNK],
        }
    }

    /// Progress and results.
    pub fn report(&self) -> &RpcReport {
        &self.report
    }

    /// Draws the call after `after` (the previous call's due time).
    fn draw(&mut self, after: Instant) {
        if self.drawn >= self.rpcs {
            self.next = None;
            return;
        }
        let c = self.sampler.next_call();
        self.next = Some(Due {
            index: self.drawn,
            at: after + c.gap,
            key: c.key,
            value: c.value,
        });
        self.drawn += 1;
    }

    /// Moves every call due by `now` to the waiting queue.
    fn arrivals(&mut self, now: Instant) {
        while let Some(d) = self.next.filter(|d| d.at <= now) {
            self.waiting.push_back(d);
            self.draw(d.at);
        }
    }

    /// Sends waiting calls while streams are available.
    fn send(&mut self, conn: &mut Connection) -> Result<(), ClientError> {
        while let Some(d) = self.waiting.front().copied() {
            let request = Request {
                authority: self.authority.clone(),
                ..Request::get(call_path(d.index, d.key, d.value))
            };
            match self.session.send_request(conn, &request) {
                Ok(stream) => {
                    self.waiting.pop_front();
                    self.report.key_bytes += d.key;
                    self.inflight.insert(
                        stream,
                        InFlight {
                            due: d,
                            expect: FileContent::new(self.content_seed, d.index, d.value),
                            received: 0,
                            head_seen: false,
                        },
                    );
                }
                Err(crate::http::SendError::NoStream) => return Ok(()),
                Err(e) => {
                    return Err(ClientError::Stream {
                        file: d.index,
                        reason: format!("cannot send the request: {e}"),
                    })
                }
            }
        }
        Ok(())
    }

    /// Reads response heads and bodies of every call in flight.
    fn read(&mut self, now: Instant, conn: &mut Connection) -> Result<(), ClientError> {
        while let Some(ev) = self.session.poll(now, conn) {
            match ev {
                ClientEvent::Response { stream, head } => {
                    if let Some(f) = self.inflight.get_mut(&stream) {
                        if head.status != 200 {
                            return Err(ClientError::Status {
                                file: f.due.index,
                                status: head.status,
                            });
                        }
                        f.head_seen = true;
                    }
                }
                ClientEvent::Failed { stream, reason } => {
                    if let Some(f) = self.inflight.get(&stream) {
                        return Err(ClientError::Stream {
                            file: f.due.index,
                            reason,
                        });
                    }
                }
            }
        }
        let ready: Vec<StreamId> = self
            .inflight
            .iter()
            .filter(|(_, f)| f.head_seen)
            .map(|(s, _)| *s)
            .collect();
        for stream in ready {
            self.read_one(now, conn, stream)?;
        }
        Ok(())
    }

    /// Reads one call's body; records it when complete.
    fn read_one(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        stream: StreamId,
    ) -> Result<(), ClientError> {
        loop {
            let Some(f) = self.inflight.get_mut(&stream) else {
                return Ok(());
            };
            let file = f.due.index;
            match self.session.read_body(now, conn, stream, &mut self.buf) {
                Ok(Some(n)) => {
                    let got = self.buf.get(..n).unwrap_or_default();
                    if f.expect.verify(got).is_err() {
                        return Err(ClientError::Mismatch {
                            file,
                            offset: f.received,
                        });
                    }
                    f.received += n as u64;
                    self.report.bytes_received += n as u64;
                }
                Ok(None) => {
                    if f.received != f.due.value {
                        return Err(ClientError::WrongLength {
                            file,
                            received: f.received,
                            expected: f.due.value,
                        });
                    }
                    self.report.calls.push(FileTimes {
                        requested: f.due.at,
                        completed: now,
                    });
                    self.inflight.remove(&stream);
                    if self.report.calls.len() as u64 == self.rpcs {
                        self.report.done_at = Some(now);
                    }
                    return Ok(());
                }
                Err(BodyError::Blocked) => return Ok(()),
                Err(e) => {
                    return Err(ClientError::Stream {
                        file,
                        reason: e.to_string(),
                    })
                }
            }
        }
    }

    /// Closes the connection once (done or failed).
    fn close(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.closed {
            return;
        }
        if let Some(conn) = self.conn.get_mut(ep) {
            let (code, reason): (u64, &[u8]) = if self.report.error.is_some() {
                (self.protocol.error_code(), b"rpc failed")
            } else {
                (self.protocol.no_error_code(), b"done")
            };
            conn.close(now, code, reason);
        }
        self.closed = true;
    }
}

impl App for RpcClient {
    fn on_connection(&mut self, _now: Instant, h: ConnectionHandle, _conn: &mut Connection) {
        self.conn.adopt(h);
    }

    fn on_event(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        conn: &mut Connection,
        event: &Event,
    ) {
        if !self.conn.is(h) {
            return;
        }
        match event {
            Event::Connected => {
                self.connected = true;
                self.session.on_connected(conn);
                // The first call is due at once; the schedule starts here.
                if self.drawn == 0 {
                    self.draw(now);
                    if let Some(d) = self.next.as_mut() {
                        d.at = now;
                    }
                }
            }
            Event::ConnectionLost(reason) => {
                if self.report.done_at.is_none() && self.report.error.is_none() {
                    self.report.error = Some(ClientError::Connection(reason.clone()));
                }
                self.closed = true;
            }
            Event::Stream(StreamEvent::Reset { id, error_code }) => {
                if let Some(f) = self.inflight.get(id) {
                    let reason = format!("reset by the server with code {error_code:#x}");
                    self.report.error.get_or_insert(ClientError::Stream {
                        file: f.due.index,
                        reason,
                    });
                }
            }
            _ => {}
        }
    }

    fn drive(&mut self, now: Instant, ep: &mut Endpoint) {
        if self.closed || !self.connected {
            return;
        }
        if self.report.error.is_none() {
            self.arrivals(now);
            if let Some(conn) = self.conn.get_mut(ep) {
                let result = self.send(conn).and_then(|()| self.read(now, conn));
                // Reading may free streams: send what waits for them.
                let result = result.and_then(|()| self.send(conn));
                if let Err(e) = result {
                    self.report.error = Some(e);
                }
            }
        }
        if self.report.error.is_some() || self.report.done_at.is_some() {
            self.close(now, ep);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if self.closed || !self.connected || self.report.error.is_some() {
            return None;
        }
        self.next.map(|d| d.at)
    }

    fn is_finished(&self, endpoint: &Endpoint) -> bool {
        self.report.error.is_some()
            || (self.closed && self.conn.get(endpoint).is_none_or(|c| c.is_closed()))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn quantile(mut v: Vec<u64>, q: f64) -> u64 {
        v.sort_unstable();
        let i = ((v.len() as f64 * q) as usize).min(v.len() - 1);
        v[i]
    }

    /// The sampled sizes follow the ETC fits: medians and means against the
    /// closed forms, the tail against the Pareto survival function.
    #[test]
    fn sizes_follow_the_etc_distributions() {
        let mut s = RpcSampler::new(7, 100);
        let n = 40_000;
        let keys: Vec<u64> = (0..n).map(|_| s.key_size()).collect();
        let values: Vec<u64> = (0..n).map(|_| s.value_size()).collect();
        // GEV median: μ + σ((ln 2)^(−k) − 1)/k ≈ 33.85.
        let key_median = KEY_MU + KEY_SIGMA * ((2f64.ln()).powf(-KEY_SHAPE) - 1.0) / KEY_SHAPE;
        let got = quantile(keys.clone(), 0.5) as f64;
        assert!(
            (got - key_median).abs() <= 1.0,
            "key median {got} vs {key_median}"
        );
        assert!(keys.iter().all(|&k| (1..=MAX_KEY).contains(&k)));
        // GPD median σ(2^k − 1)/k ≈ 168; mean σ/(1 − k) ≈ 329.
        let value_median = VALUE_SIGMA * (2f64.powf(VALUE_SHAPE) - 1.0) / VALUE_SHAPE;
        let got = quantile(values.clone(), 0.5) as f64;
        assert!(
            (got - value_median).abs() / value_median < 0.05,
            "value median {got} vs {value_median}"
        );
        let mean = values.iter().sum::<u64>() as f64 / n as f64;
        let want = VALUE_SIGMA / (1.0 - VALUE_SHAPE);
        assert!(
            (mean - want).abs() / want < 0.1,
            "value mean {mean} vs {want}"
        );
        // Heavy tail: P(X > 2 KB) = (1 + k x / σ)^(−1/k) ≈ 1.3%.
        let p = (1.0 + VALUE_SHAPE * 2000.0 / VALUE_SIGMA).powf(-1.0 / VALUE_SHAPE);
        let share = values.iter().filter(|&&v| v > 2000).count() as f64 / n as f64;
        assert!((share - p).abs() / p < 0.15, "tail {share} vs {p}");
        assert!(values.iter().all(|&v| (1..=MAX_VALUE).contains(&v)));
    }

    #[test]
    fn gaps_are_poisson_at_the_rate() {
        let mut s = RpcSampler::new(3, 200);
        let n = 20_000;
        let total: f64 = (0..n).map(|_| s.gap().as_secs_f64()).sum();
        let mean = total / n as f64;
        assert!((mean - 0.005).abs() / 0.005 < 0.05, "mean gap {mean}");
    }

    #[test]
    fn same_seed_same_calls() {
        let draw = |seed| {
            let mut s = RpcSampler::new(seed, 100);
            (0..100).map(|_| s.next_call()).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn content_answers_call_paths_only() {
        let mut c = rpc_content(1);
        let now = Instant::ZERO;
        let r = c.resolve(now, &call_path(4, 30, 500)).expect("a call path");
        assert_eq!(r.length, Some(500));
        for bad in [
            "/rpc/4",
            "/rpc/x/5",
            "/rpc/1/-5",
            "/rpc/1/1000001",
            "/4",
            "/rpc/1/99999999999999999999999",
        ] {
            assert!(c.resolve(now, bad).is_err(), "{bad}");
        }
        assert_eq!(call_path(0, 3, 7), "/rpc/0/7?k=abc");
        assert!(call_path(0, 10_000, 7).len() < 300);
    }
}
