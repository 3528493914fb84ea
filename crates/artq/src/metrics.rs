//! `artq serve --metrics ADDR`: the server's counters and histograms in
//! the Prometheus text exposition (OpenMetrics flavour, written by the
//! maintained `prometheus-client` crate), served on `GET /metrics` by a
//! small HTTP/1.1 listener thread.
//!
//! Who writes what:
//! - every connection carries a [`ConnectionMeter`] subscriber, which
//!   observes each lost item's recovery as the retransmission engine
//!   records it (recovery latency, `t_wait`, the round `n` that delivered
//!   it);
//! - every worker has a [`WorkerMeter`], which adds its connections'
//!   counters (bytes, packets, losses, replicas) to the shared totals about
//!   once a second and when a connection ends, and the endpoint's and the
//!   edge's counters the same way, as differences since its last look.
//!
//! Totals are therefore at most a second behind, and exact once the
//! connections they count have ended.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{Context, Result};
use apps::edge::EdgeCounters;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, linear_buckets, Histogram};
use prometheus_client::registry::{Registry, Unit};
use transport::events::{RecoveryOutcome, RecoveryRecord, Subscriber};
use transport::policy::PathView;
use transport::{
    Connection, ConnectionError, ConnectionHandle, ConnectionStats, Endpoint, EndpointStats,
};
use wire::time::{Duration, Instant};

/// How often a worker adds its live connections' counters to the totals.
const SAMPLE_EVERY: StdDuration = StdDuration::from_secs(1);

/// Largest scrape request head read.
const MAX_REQUEST: usize = 8 << 10;

/// A connection's ALPN and QUIC version.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ConnectionLabels {
    alpn: String,
    version: String,
}

/// The recovery scheme of a server's connections.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SchemeLabel {
    scheme: String,
}

/// Why a handshake failed.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CauseLabel {
    cause: String,
}

/// Which failure an origin request met.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct UpstreamErrorLabel {
    error: String,
}

/// Everything `/metrics` shows: one per server, shared by its workers.
pub struct ServerMetrics {
    registry: Registry,
    scheme: SchemeLabel,
    connections_open: Gauge,
    connections: Family<ConnectionLabels, Counter>,
    handshake_failures: Family<CauseLabel, Counter>,
    sent_bytes: Counter,
    received_bytes: Counter,
    sent_packets: Counter,
    lost_packets: Counter,
    replicas: Family<SchemeLabel, Counter>,
    extra_replicas: Family<SchemeLabel, Counter>,
    reinjections: Family<SchemeLabel, Counter>,
    zero_rtt_packets: Counter,
    mtu_probes: Counter,
    mtu_probes_lost: Counter,
    mtu_black_holes: Counter,
    recovery_latency: Histogram,
    t_wait: Histogram,
    recovery_round: Histogram,
    retries: Counter,
    tokens_accepted: Counter,
    stateless_resets: Counter,
    refused: Counter,
    forwarded: Counter,
    edge_requests: Counter,
    upstream_requests: Counter,
    upstream_errors: Family<UpstreamErrorLabel, Counter>,
    cache_hits: Counter,
    cache_stores: Counter,
    live_cut: Counter,
    upstream_head: Histogram,
}

impl ServerMetrics {
    /// The metrics of a server whose connections use recovery `scheme`.
    pub fn new(scheme: &str) -> Arc<Self> {
        let mut m = ServerMetrics {
            registry: Registry::default(),
            scheme: SchemeLabel {
                scheme: scheme.to_string(),
            },
            connections_open: Gauge::default(),
            connections: Family::default(),
            handshake_failures: Family::default(),
            sent_bytes: Counter::default(),
            received_bytes: Counter::default(),
            sent_packets: Counter::default(),
            lost_packets: Counter::default(),
            replicas: Family::default(),
            extra_replicas: Family::default(),
            reinjections: Family::default(),
            zero_rtt_packets: Counter::default(),
            mtu_probes: Counter::default(),
            mtu_probes_lost: Counter::default(),
            mtu_black_holes: Counter::default(),
            // 1 ms .. 16 s.
            recovery_latency: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            t_wait: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
            // n = 0 (the original got through) .. 10.
            recovery_round: Histogram::new(linear_buckets(0.0, 1.0, 11)),
            retries: Counter::default(),
            tokens_accepted: Counter::default(),
            stateless_resets: Counter::default(),
            refused: Counter::default(),
            forwarded: Counter::default(),
            edge_requests: Counter::default(),
            upstream_requests: Counter::default(),
            upstream_errors: Family::default(),
            cache_hits: Counter::default(),
            cache_stores: Counter::default(),
            live_cut: Counter::default(),
            // 1 ms .. 16 s.
            upstream_head: Histogram::new(exponential_buckets(0.001, 2.0, 15)),
        };
        let r = &mut m.registry;
        r.register(
            "artq_connections_open",
            "Connections held now (handshaking, established or closing)",
            m.connections_open.clone(),
        );
        r.register(
            "artq_connections",
            "Connections whose handshake completed, by ALPN and QUIC version",
            m.connections.clone(),
        );
        r.register(
            "artq_handshake_failures",
            "Connections that ended before their handshake completed, by cause",
            m.handshake_failures.clone(),
        );
        r.register_with_unit(
            "artq_sent",
            "UDP payload bytes sent",
            Unit::Bytes,
            m.sent_bytes.clone(),
        );
        r.register_with_unit(
            "artq_received",
            "UDP payload bytes received",
            Unit::Bytes,
            m.received_bytes.clone(),
        );
        r.register(
            "artq_sent_packets",
            "QUIC packets sent",
            m.sent_packets.clone(),
        );
        r.register(
            "artq_lost_packets",
            "Packets declared lost, replicas included",
            m.lost_packets.clone(),
        );
        r.register(
            "artq_replicas",
            "Packets sent to recover lost data, every replica counted",
            m.replicas.clone(),
        );
        r.register(
            "artq_extra_replicas",
            "Replicas beyond one per recovery round",
            m.extra_replicas.clone(),
        );
        r.register(
            "artq_reinjections",
            "Replicas sent outside a loss decision (AutoRec's reinjections)",
            m.reinjections.clone(),
        );
        r.register(
            "artq_zero_rtt_packets",
            "0-RTT packets accepted and decrypted",
            m.zero_rtt_packets.clone(),
        );
        r.register(
            "artq_mtu_probes",
            "Path MTU discovery probes sent (padded PINGs)",
            m.mtu_probes.clone(),
        );
        r.register(
            "artq_mtu_probes_lost",
            "Path MTU probes lost: sizes the path did not carry (not in artq_lost_packets)",
            m.mtu_probes_lost.clone(),
        );
        r.register(
            "artq_mtu_black_holes",
            "Connections whose path stopped carrying the discovered size and fell back to --max-datagram-size",
            m.mtu_black_holes.clone(),
        );
        r.register_with_unit(
            "artq_recovery_latency",
            "From a lost item's first loss detection to the sending of the copy that delivered it",
            Unit::Seconds,
            m.recovery_latency.clone(),
        );
        r.register_with_unit(
            "artq_t_wait",
            "Sender's estimate of t_wait: from a lost item's first transmission to the \
             acknowledgement of the copy that delivered it, less half the smoothed RTT",
            Unit::Seconds,
            m.t_wait.clone(),
        );
        r.register(
            "artq_recovery_round",
            "The round n that delivered a lost item (0: the original arrived after all)",
            m.recovery_round.clone(),
        );
        r.register("artq_retries", "Retry packets sent", m.retries.clone());
        r.register(
            "artq_tokens_accepted",
            "Address-validation tokens (Retry or NEW_TOKEN) accepted",
            m.tokens_accepted.clone(),
        );
        r.register(
            "artq_stateless_resets",
            "Stateless resets sent for packets of unknown connections",
            m.stateless_resets.clone(),
        );
        r.register(
            "artq_refused_connections",
            "Client Initials refused by a limit",
            m.refused.clone(),
        );
        r.register(
            "artq_forwarded_datagrams",
            "Datagrams passed from the worker that received them to the one that owns their connection",
            m.forwarded.clone(),
        );
        r.register(
            "artq_edge_requests",
            "Client requests an upstream claimed",
            m.edge_requests.clone(),
        );
        r.register(
            "artq_upstream_requests",
            "Requests sent to origins (retries included)",
            m.upstream_requests.clone(),
        );
        r.register(
            "artq_upstream_errors",
            "Origin failures: bad_gateway (502), gateway_timeout (504), unavailable (503), \
             aborted (cut after the head)",
            m.upstream_errors.clone(),
        );
        r.register(
            "artq_cache_hits",
            "Requests answered from the cache",
            m.cache_hits.clone(),
        );
        r.register(
            "artq_cache_stores",
            "Origin responses stored in the cache",
            m.cache_stores.clone(),
        );
        r.register_with_unit(
            "artq_upstream_response",
            "Origins' time to answer: from sending a request (connection set-up and a retry \
             included) to reading its response head",
            Unit::Seconds,
            m.upstream_head.clone(),
        );
        r.register(
            "artq_live_viewers_cut",
            "Live viewers cut off for falling behind",
            m.live_cut.clone(),
        );
        Arc::new(m)
    }

    /// The text exposition of every metric.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }

    /// Serves `GET /metrics` on `addr` from a thread of its own; returns
    /// the bound address.
    pub fn listen(self: &Arc<Self>, addr: SocketAddr) -> Result<SocketAddr> {
        let listener =
            TcpListener::bind(addr).with_context(|| format!("cannot bind --metrics {addr}"))?;
        let bound = listener.local_addr()?;
        let metrics = Arc::clone(self);
        std::thread::Builder::new()
            .name("artq-metrics".into())
            .spawn(move || {
                for stream in listener.incoming().flatten() {
                    // One scrape at a time: a slow scraper delays the next
                    // by at most the timeouts below.
                    let _ = answer_scrape(&metrics, stream);
                }
            })
            .context("cannot start the metrics thread")?;
        Ok(bound)
    }
}

/// Reads one HTTP/1.1 request and answers it.
fn answer_scrape(metrics: &ServerMetrics, mut stream: TcpStream) -> std::io::Result<()> {
    stream.set_read_timeout(Some(StdDuration::from_secs(5)))?;
    stream.set_write_timeout(Some(StdDuration::from_secs(5)))?;
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    let path = loop {
        let n = stream.read(&mut chunk)?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&chunk[..n]);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf) {
            Ok(httparse::Status::Complete(_)) => {
                break (req.method == Some("GET") || req.method == Some("HEAD"))
                    .then(|| req.path.unwrap_or("").to_string());
            }
            Ok(httparse::Status::Partial) if buf.len() < MAX_REQUEST => continue,
            _ => break None,
        }
    };
    let (status, ctype, body) = match path.as_deref() {
        Some("/metrics") => (
            "200 OK",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
            metrics.encode(),
        ),
        Some(_) => ("404 Not Found", "text/plain", "try /metrics\n".to_string()),
        None => ("400 Bad Request", "text/plain", String::new()),
    };
    write!(
        stream,
        "HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )?;
    stream.flush()
}

/// Observes one connection's recoveries for the histograms.
pub struct ConnectionMeter {
    metrics: Arc<ServerMetrics>,
    srtt: Duration,
}

impl ConnectionMeter {
    /// A meter writing into `metrics`.
    pub fn new(metrics: Arc<ServerMetrics>) -> Self {
        ConnectionMeter {
            metrics,
            srtt: Duration::ZERO,
        }
    }
}

impl Subscriber for ConnectionMeter {
    fn metrics_updated(&mut self, _now: Instant, path: &PathView) {
        self.srtt = path.srtt;
    }

    fn recovery_ended(&mut self, _now: Instant, r: &RecoveryRecord) {
        let RecoveryOutcome::Delivered {
            round,
            recovery_sent,
            acked_at,
            ..
        } = r.outcome
        else {
            return;
        };
        self.metrics.recovery_round.observe(f64::from(round));
        if round > 0 {
            let latency = recovery_sent.saturating_duration_since(r.first_lost);
            self.metrics.recovery_latency.observe(latency.as_secs_f64());
        }
        let to_ack = acked_at.saturating_duration_since(r.first_sent);
        let t_wait = to_ack.saturating_sub(self.srtt / 2);
        self.metrics.t_wait.observe(t_wait.as_secs_f64());
    }
}

/// The counters of a connection last added to the totals.
#[derive(Default)]
struct Seen {
    sent_bytes: u64,
    received_bytes: u64,
    sent_packets: u64,
    lost_packets: u64,
    replicas: u64,
    extra_replicas: u64,
    reinjections: u64,
    zero_rtt_packets: u64,
    mtu_probes: u64,
    mtu_probes_lost: u64,
    mtu_black_holes: u64,
}

impl Seen {
    fn of(s: &ConnectionStats) -> Seen {
        Seen {
            sent_bytes: s.bytes_sent,
            received_bytes: s.bytes_received,
            sent_packets: s.packets_sent,
            lost_packets: s.lost_packets,
            replicas: s.replicas,
            extra_replicas: s.extra_replicas,
            reinjections: s.reinjections,
            zero_rtt_packets: s.zero_rtt_packets_received,
            mtu_probes: s.mtu_probes_sent,
            mtu_probes_lost: s.mtu_probes_lost,
            mtu_black_holes: s.mtu_black_holes,
        }
    }
}

/// One worker's side of the metrics: what it already added to the totals.
pub struct WorkerMeter {
    metrics: Arc<ServerMetrics>,
    seen: HashMap<ConnectionHandle, Seen>,
    endpoint: EndpointStats,
    edge: EdgeCounters,
    forwarded: u64,
    next_sample: StdInstant,
}

impl WorkerMeter {
    /// A worker's meter over `metrics`.
    pub fn new(metrics: Arc<ServerMetrics>) -> Self {
        WorkerMeter {
            metrics,
            seen: HashMap::new(),
            endpoint: EndpointStats::default(),
            edge: EdgeCounters::default(),
            forwarded: 0,
            next_sample: StdInstant::now(),
        }
    }

    /// A connection was accepted.
    pub fn opened(&mut self, h: ConnectionHandle) {
        self.seen.insert(h, Seen::default());
        self.metrics.connections_open.inc();
    }

    /// A connection's handshake completed.
    pub fn connected(&mut self, conn: &Connection) {
        let alpn = conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_else(|| "none".into());
        self.metrics
            .connections
            .get_or_create(&ConnectionLabels {
                alpn,
                version: conn.version().name().to_string(),
            })
            .inc();
    }

    /// A connection ended: its last counters, and its cause when the
    /// handshake never completed.
    pub fn ended(&mut self, h: ConnectionHandle, conn: &Connection, reason: &ConnectionError) {
        self.add(h, &conn.stats());
        if self.seen.remove(&h).is_some() {
            self.metrics.connections_open.dec();
        }
        if conn.is_handshaking() {
            let cause = match reason {
                ConnectionError::Transport(e) => format!("{:?}", e.code).to_lowercase(),
                ConnectionError::PeerClosed { .. } => "peer_closed".into(),
                ConnectionError::LocallyClosed => "closed_locally".into(),
                ConnectionError::TimedOut => "timeout".into(),
                ConnectionError::StatelessReset => "stateless_reset".into(),
            };
            self.metrics
                .handshake_failures
                .get_or_create(&CauseLabel { cause })
                .inc();
        }
    }

    /// Adds what changed since the last look, at most once per
    /// [`SAMPLE_EVERY`]: every live connection's counters, the endpoint's
    /// admission counters, the edge's, and the datagrams passed to other
    /// workers (`forwarded`, a running total).
    pub fn sample(&mut self, endpoint: &Endpoint, edge: Option<EdgeCounters>, forwarded: u64) {
        let now = StdInstant::now();
        if now < self.next_sample {
            return;
        }
        self.next_sample = now + SAMPLE_EVERY;
        let handles: Vec<ConnectionHandle> = self.seen.keys().copied().collect();
        for h in handles {
            if let Some(conn) = endpoint.connection(h) {
                self.add(h, &conn.stats());
            }
        }
        let e = endpoint.stats();
        let m = &self.metrics;
        m.retries
            .inc_by(e.retries_sent.saturating_sub(self.endpoint.retries_sent));
        m.tokens_accepted.inc_by(
            e.tokens_accepted
                .saturating_sub(self.endpoint.tokens_accepted),
        );
        m.stateless_resets.inc_by(
            e.stateless_resets_sent
                .saturating_sub(self.endpoint.stateless_resets_sent),
        );
        m.refused
            .inc_by(e.refused.saturating_sub(self.endpoint.refused));
        self.endpoint = e;
        m.forwarded.inc_by(forwarded.saturating_sub(self.forwarded));
        self.forwarded = forwarded;
        if let Some(c) = edge {
            let o = self.edge;
            m.edge_requests
                .inc_by(c.requests.saturating_sub(o.requests));
            m.upstream_requests
                .inc_by(c.origin_requests.saturating_sub(o.origin_requests));
            m.cache_hits
                .inc_by(c.cache_hits.saturating_sub(o.cache_hits));
            m.cache_stores
                .inc_by(c.cache_stores.saturating_sub(o.cache_stores));
            m.live_cut.inc_by(c.live_cut.saturating_sub(o.live_cut));
            for (error, now, before) in [
                ("bad_gateway", c.bad_gateway, o.bad_gateway),
                ("gateway_timeout", c.gateway_timeout, o.gateway_timeout),
                ("unavailable", c.unavailable, o.unavailable),
                ("aborted", c.aborted, o.aborted),
            ] {
                m.upstream_errors
                    .get_or_create(&UpstreamErrorLabel {
                        error: error.into(),
                    })
                    .inc_by(now.saturating_sub(before));
            }
            self.edge = c;
        }
    }

    /// Origins' times to answer, as the edge measured them.
    pub fn upstream_heads(&mut self, times: &[Duration]) {
        for t in times {
            self.metrics.upstream_head.observe(t.as_secs_f64());
        }
    }

    /// Adds a connection's counters since its last look.
    fn add(&mut self, h: ConnectionHandle, s: &ConnectionStats) {
        let Some(seen) = self.seen.get_mut(&h) else {
            return;
        };
        let now = Seen::of(s);
        let m = &self.metrics;
        m.sent_bytes
            .inc_by(now.sent_bytes.saturating_sub(seen.sent_bytes));
        m.received_bytes
            .inc_by(now.received_bytes.saturating_sub(seen.received_bytes));
        m.sent_packets
            .inc_by(now.sent_packets.saturating_sub(seen.sent_packets));
        m.lost_packets
            .inc_by(now.lost_packets.saturating_sub(seen.lost_packets));
        m.replicas
            .get_or_create(&m.scheme)
            .inc_by(now.replicas.saturating_sub(seen.replicas));
        m.extra_replicas
            .get_or_create(&m.scheme)
            .inc_by(now.extra_replicas.saturating_sub(seen.extra_replicas));
        m.reinjections
            .get_or_create(&m.scheme)
            .inc_by(now.reinjections.saturating_sub(seen.reinjections));
        m.zero_rtt_packets
            .inc_by(now.zero_rtt_packets.saturating_sub(seen.zero_rtt_packets));
        m.mtu_probes
            .inc_by(now.mtu_probes.saturating_sub(seen.mtu_probes));
        m.mtu_probes_lost
            .inc_by(now.mtu_probes_lost.saturating_sub(seen.mtu_probes_lost));
        m.mtu_black_holes
            .inc_by(now.mtu_black_holes.saturating_sub(seen.mtu_black_holes));
        *seen = now;
    }
}

/// A worker's meter, shared by its observer (connections' births and
/// ends) and its turn hook (periodic samples) on the worker's thread.
pub type SharedWorkerMeter = std::rc::Rc<std::cell::RefCell<WorkerMeter>>;
