//! quinn-proto's two endpoints in one thread, in virtual time, over an
//! ideal bottleneck: the cost of a production QUIC state machine per
//! packet, as a reference for the simulator's speed.
//!
//! Why this exists: issue 27 asks the simulator to run a saturated
//! 100 Mbit/s transfer at 50x real time, which leaves about 2.2 us of wall
//! time per data packet for everything: both endpoints (packet assembly,
//! AEAD, header protection, ACKs, loss detection, congestion control, flow
//! control, stream buffers), the emulated network and the application.
//! Whether that is a fair target depends on what a QUIC stack costs per
//! packet without any simulator around it, and quinn-proto (the sans-IO
//! core of quinn, a production stack) answers it: this runs its client and
//! server against each other with the same crypto provider (rustls on
//! ring, whose default suites both stacks negotiate), datagrams of the
//! same size, BBR, and a bottleneck of the same rate and delay. What the
//! pair is spared, it is spared on purpose, so that its figure is a floor
//! rather than a like-for-like run: the body is one shared buffer handed to
//! quinn without a copy and read without a copy or a check (artq generates
//! every byte and checks it), and the bottleneck is a few lines (a
//! serialization clock, a propagation delay, an unlimited queue as the
//! simulator's links have by default, and Bernoulli loss) instead of the
//! simulator's event queue, links and metrics.
//!
//! Several pairs can share the bottleneck (the reference of the many-flow
//! preset): each flow is its own client and server endpoint with one
//! connection, as in the simulator's flows.
//!
//! The loop: poll the connections of the flows an event concerns for
//! datagrams (one per call, as artq's endpoints send), put them on the
//! bottleneck of their direction, then advance virtual time to the next
//! arrival or timer and deliver or fire it. Wall time is the whole loop's,
//! handshakes included.

use std::collections::{BTreeSet, VecDeque};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::congestion::BbrConfig;
use quinn_proto::{
    Connection, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event,
    ServerConfig, StreamId, TransportConfig, VarInt,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::quinn_hq;

/// Virtual time after which a run that has not finished is reported as
/// stuck rather than looped on forever.
const VIRTUAL_LIMIT: Duration = Duration::from_secs(600);

/// What the pairs are asked to move, and over what.
#[derive(Clone, Copy, Debug)]
pub struct PairSpec {
    /// Client-server pairs sharing the bottleneck, each its own two
    /// endpoints and one connection.
    pub flows: usize,
    /// Body bytes in all, server to client, split equally over the flows,
    /// each on one unidirectional stream.
    pub bytes: u64,
    /// Bottleneck rate, bits per second, both directions.
    pub rate_bps: f64,
    /// Round-trip propagation delay (half each way).
    pub rtt: Duration,
    /// Random loss probability per datagram, both directions.
    pub loss: f64,
    /// The largest UDP payload either side sends (no path MTU discovery).
    pub mtu: u16,
    /// Seed of the loss draws.
    pub seed: u64,
}

/// One finished run.
#[derive(Clone, Copy, Debug)]
pub struct PairRun {
    /// Wall time of the whole loop.
    pub wall: Duration,
    /// Virtual time from the first client's first packet to the last body
    /// byte of the last flow to finish.
    pub simulated: Duration,
    /// Datagrams the servers sent (data and everything else).
    pub server_datagrams: u64,
    /// Datagrams the clients sent (acknowledgements, mostly).
    pub client_datagrams: u64,
    /// Datagrams the bottleneck's random loss dropped.
    pub dropped: u64,
}

impl PairRun {
    /// All datagrams sent, both directions.
    pub fn datagrams(&self) -> u64 {
        self.server_datagrams + self.client_datagrams
    }
}

/// Why a run did not finish.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// quinn's configuration was refused.
    #[error("quinn configuration: {0}")]
    Config(String),
    /// A connection was lost or closed before its body arrived.
    #[error("quinn connection of flow {flow} lost after {received} of {expected} bytes: {reason}")]
    Lost {
        /// The flow.
        flow: usize,
        /// Its body bytes received.
        received: u64,
        /// Its body bytes asked for.
        expected: u64,
        /// quinn's reason.
        reason: String,
    },
    /// Nothing was left to happen, or the virtual time limit passed,
    /// before every body arrived.
    #[error("quinn pairs stalled at {at:?} of virtual time with {unfinished} flows unfinished")]
    Stalled {
        /// Virtual time since the start.
        at: Duration,
        /// Flows whose body had not all arrived.
        unfinished: usize,
    },
}

/// One direction of the bottleneck, shared by every flow: a serialization
/// clock and a propagation delay behind an unlimited queue (the
/// simulator's default link), and Bernoulli loss.
struct Pipe {
    rate_bps: f64,
    delay: Duration,
    loss: f64,
    busy_until: Instant,
    /// Arrival instant, flow, datagram.
    in_flight: VecDeque<(Instant, usize, BytesMut)>,
    dropped: u64,
}

impl Pipe {
    fn new(spec: &PairSpec, start: Instant) -> Self {
        Pipe {
            rate_bps: spec.rate_bps,
            delay: spec.rtt / 2,
            loss: spec.loss,
            busy_until: start,
            in_flight: VecDeque::new(),
            dropped: 0,
        }
    }

    fn send(&mut self, now: Instant, flow: usize, datagram: &[u8], rng: &mut ChaCha8Rng) {
        let start = self.busy_until.max(now);
        // No draw at all without loss: the harness's own cost is charged
        // to quinn's figure, so it is kept small.
        let lost = self.loss > 0.0 && rng.gen_bool(self.loss.min(1.0));
        if lost {
            self.dropped += 1;
            return;
        }
        let serialization = Duration::from_secs_f64(datagram.len() as f64 * 8.0 / self.rate_bps);
        self.busy_until = start + serialization;
        let arrival = self.busy_until + self.delay;
        self.in_flight
            .push_back((arrival, flow, BytesMut::from(datagram)));
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.front().map(|(at, _, _)| *at)
    }

    fn take_due(&mut self, now: Instant) -> Option<(usize, BytesMut)> {
        match self.in_flight.front() {
            Some((at, _, _)) if *at <= now => self.in_flight.pop_front().map(|(_, f, d)| (f, d)),
            _ => None,
        }
    }
}

/// One side of a flow: its endpoint and its one connection.
struct Side {
    endpoint: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    addr: SocketAddr,
    datagrams: u64,
}

impl Side {
    fn new(
        config: Arc<EndpointConfig>,
        server: Option<Arc<ServerConfig>>,
        port: u16,
        seed: u64,
    ) -> Self {
        let mut rng_seed = [0u8; 32];
        rng_seed[..8].copy_from_slice(&seed.to_le_bytes());
        Side {
            endpoint: Endpoint::new(config, server, false, Some(rng_seed)),
            conn: None,
            addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
            datagrams: 0,
        }
    }

    /// Hands a datagram from `from` to this side's endpoint; a datagram
    /// that opens a connection is accepted with `server_config`, and what
    /// the endpoint answers by itself goes to `back`.
    fn receive(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: BytesMut,
        buf: &mut Vec<u8>,
        server_config: &Option<Arc<ServerConfig>>,
        back: &mut Vec<Vec<u8>>,
    ) -> Result<(), PairError> {
        match self.endpoint.handle(now, from, None, None, data, buf) {
            Some(DatagramEvent::ConnectionEvent(_, event)) => {
                if let Some((_, conn)) = &mut self.conn {
                    conn.handle_event(event);
                }
            }
            Some(DatagramEvent::NewConnection(incoming)) => {
                buf.clear();
                match self
                    .endpoint
                    .accept(incoming, now, buf, server_config.clone())
                {
                    Ok(accepted) => self.conn = Some(accepted),
                    Err(e) => {
                        return Err(PairError::Config(format!("accept: {:?}", e.cause)));
                    }
                }
            }
            Some(DatagramEvent::Response(transmit)) => {
                back.push(buf.get(..transmit.size).unwrap_or_default().to_vec());
            }
            None => {}
        }
        Ok(())
    }

    /// Passes the connection's endpoint events to the endpoint and back.
    fn exchange_events(&mut self) {
        let Some((handle, conn)) = &mut self.conn else {
            return;
        };
        while let Some(event) = conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(*handle, event) {
                conn.handle_event(back);
            }
        }
    }

    /// The connection's application events; an error if it was lost.
    fn poll_events(&mut self) -> Result<(), String> {
        if let Some((_, conn)) = &mut self.conn {
            while let Some(event) = conn.poll() {
                if let Event::ConnectionLost { reason } = event {
                    return Err(reason.to_string());
                }
            }
        }
        Ok(())
    }

    /// Sends what the connection has to send onto `pipe`.
    fn transmit(
        &mut self,
        now: Instant,
        flow: usize,
        pipe: &mut Pipe,
        buf: &mut Vec<u8>,
        rng: &mut ChaCha8Rng,
    ) {
        let Some((_, conn)) = &mut self.conn else {
            return;
        };
        loop {
            buf.clear();
            let Some(transmit) = conn.poll_transmit(now, 1, buf) else {
                break;
            };
            self.datagrams += 1;
            pipe.send(now, flow, buf.get(..transmit.size).unwrap_or_default(), rng);
        }
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.conn.as_mut().and_then(|(_, c)| c.poll_timeout())
    }

    fn fire_timeout(&mut self, now: Instant) {
        if let Some((_, conn)) = &mut self.conn {
            if conn.poll_timeout().is_some_and(|t| t <= now) {
                conn.handle_timeout(now);
            }
        }
    }
}

/// The server's body: one unidirectional stream, written from one
/// buffer as flow control allows, then finished.
struct Body {
    data: Bytes,
    sent: usize,
    stream: Option<StreamId>,
    finished: bool,
}

impl Body {
    fn write(&mut self, conn: &mut Connection) {
        if self.finished {
            return;
        }
        let id = match self.stream {
            Some(id) => id,
            None => match conn.streams().open(Dir::Uni) {
                Some(id) => *self.stream.insert(id),
                None => return,
            },
        };
        let mut stream = conn.send_stream(id);
        while self.sent < self.data.len() {
            let mut chunk = [self.data.slice(self.sent..)];
            match stream.write_chunks(&mut chunk) {
                Ok(written) if written.bytes > 0 => self.sent += written.bytes,
                _ => return,
            }
        }
        self.finished = stream.finish().is_ok();
    }
}

/// One client-server pair and its transfer.
struct Flow {
    client: Side,
    server: Side,
    body: Body,
    /// The client's end of the body's stream, once it has seen it.
    incoming: Option<StreamId>,
    received: u64,
    expected: u64,
    done: bool,
    /// The endpoint's own answers (version negotiation, resets) to send
    /// back to the client.
    responses: Vec<Vec<u8>>,
    /// The flow's entry in the timer index: its earlier connection timer.
    timer: Option<Instant>,
    /// Whether it waits in the list of flows to run.
    queued: bool,
}

impl Flow {
    /// Runs both applications (the server writes once connected, the
    /// client reads what has arrived), passes events between connections
    /// and endpoints, and puts what both connections send on the pipes.
    fn run(
        &mut self,
        index: usize,
        now: Instant,
        pipes: (&mut Pipe, &mut Pipe),
        buf: &mut Vec<u8>,
        rng: &mut ChaCha8Rng,
    ) -> Result<(), PairError> {
        let lost = |reason: String, received: u64, expected: u64| PairError::Lost {
            flow: index,
            received,
            expected,
            reason,
        };
        self.server
            .poll_events()
            .map_err(|r| lost(r, self.received, self.expected))?;
        if let Some((_, conn)) = &mut self.server.conn {
            if !conn.is_handshaking() {
                self.body.write(conn);
            }
        }
        self.client
            .poll_events()
            .map_err(|r| lost(r, self.received, self.expected))?;
        if let Some((_, conn)) = &mut self.client.conn {
            while let Some(id) = conn.streams().accept(Dir::Uni) {
                self.incoming.get_or_insert(id);
            }
            if let Some(id) = self.incoming {
                if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                    while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
                        self.received += chunk.bytes.len() as u64;
                    }
                    let _ = chunks.finalize();
                }
            }
        }
        self.server.exchange_events();
        self.client.exchange_events();
        let (to_server, to_client) = pipes;
        self.server.transmit(now, index, to_client, buf, rng);
        self.client.transmit(now, index, to_server, buf, rng);
        for datagram in self.responses.drain(..) {
            to_client.send(now, index, &datagram, rng);
        }
        Ok(())
    }

    fn next_timeout(&mut self) -> Option<Instant> {
        match (self.server.poll_timeout(), self.client.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// quinn's transport settings for both sides: BBR, datagrams of
/// `spec.mtu` bytes, and windows large enough for the bottleneck's
/// bandwidth-delay product many times over (flow control never limits).
fn transport_config(spec: &PairSpec) -> TransportConfig {
    let mut t = TransportConfig::default();
    t.congestion_controller_factory(Arc::new(BbrConfig::default()))
        .initial_mtu(spec.mtu)
        .min_mtu(spec.mtu.min(1200))
        .mtu_discovery_config(None)
        .stream_receive_window(VarInt::from_u32(16 << 20))
        .receive_window(VarInt::from_u32(32 << 20))
        .send_window(32 << 20)
        .max_concurrent_uni_streams(VarInt::from_u32(4));
    t
}

/// Marks flow `f` to run before the next event.
fn enqueue(flows: &mut [Flow], ready: &mut Vec<usize>, f: usize) {
    if let Some(flow) = flows.get_mut(f) {
        if !flow.queued {
            flow.queued = true;
            ready.push(f);
        }
    }
}

/// Runs the transfers and times them.
///
/// Per event, only the flows the event concerns run (a datagram's, a
/// timer's), and the next timer is found in an ordered index, so the
/// harness's own work per event does not grow with the flows.
pub fn run(spec: &PairSpec) -> Result<PairRun, PairError> {
    let config_err = |e: Box<dyn std::error::Error + Send + Sync>| PairError::Config(e.to_string());
    let n = spec.flows.max(1);
    let per_flow = spec.bytes / n as u64;
    let per_flow_len = usize::try_from(per_flow)
        .map_err(|_| PairError::Config(format!("{per_flow} bytes do not fit in memory")))?;
    let ports = u16::try_from(n)
        .ok()
        .filter(|&p| p < 20_000)
        .ok_or_else(|| PairError::Config(format!("{n} flows: at most 19,999")))?;
    let transport = Arc::new(transport_config(spec));
    let mut server_config = quinn_hq::server_config().map_err(config_err)?;
    server_config.transport_config(transport.clone());
    let server_config = Some(Arc::new(server_config));
    let mut client_config = quinn_hq::insecure_client_config().map_err(config_err)?;
    client_config.transport_config(transport);
    let endpoint_config = Arc::new(EndpointConfig::default());

    // Each flow's body is its own buffer, filled before the clock starts,
    // as a server holds each response's bytes.
    let mut flows: Vec<Flow> = (0..ports)
        .map(|i| Flow {
            client: Side::new(
                endpoint_config.clone(),
                None,
                40_000 + i,
                2 * u64::from(i) + 1,
            ),
            server: Side::new(
                endpoint_config.clone(),
                server_config.clone(),
                20_000 + i,
                2 * u64::from(i) + 2,
            ),
            body: Body {
                data: Bytes::from(vec![0x5a; per_flow_len]),
                sent: 0,
                stream: None,
                finished: false,
            },
            incoming: None,
            received: 0,
            expected: per_flow,
            done: false,
            responses: Vec::new(),
            timer: None,
            queued: true,
        })
        .collect();

    let wall = Instant::now();
    let start = Instant::now();
    let mut now = start;
    for flow in &mut flows {
        let server = flow.server.addr;
        flow.client.conn = Some(
            flow.client
                .endpoint
                .connect(now, client_config.clone(), server, "localhost")
                .map_err(|e| PairError::Config(format!("connect: {e}")))?,
        );
    }

    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut to_server = Pipe::new(spec, start);
    let mut to_client = Pipe::new(spec, start);
    let mut buf = Vec::with_capacity(usize::from(spec.mtu));
    let mut timers: BTreeSet<(Instant, usize)> = BTreeSet::new();
    let mut ready: Vec<usize> = (0..flows.len()).collect();
    let mut unfinished = flows.len();
    let mut last_done = start;

    loop {
        for f in std::mem::take(&mut ready) {
            let Some(flow) = flows.get_mut(f) else {
                continue;
            };
            flow.queued = false;
            flow.run(f, now, (&mut to_server, &mut to_client), &mut buf, &mut rng)?;
            if !flow.done && flow.received >= flow.expected {
                flow.done = true;
                unfinished -= 1;
                last_done = now;
            }
            let timer = flow.next_timeout();
            if timer != flow.timer {
                if let Some(old) = flow.timer {
                    timers.remove(&(old, f));
                }
                if let Some(new) = timer {
                    timers.insert((new, f));
                }
                flow.timer = timer;
            }
        }
        if unfinished == 0 {
            break;
        }

        // The next instant anything happens.
        let next = [
            to_server.next_arrival(),
            to_client.next_arrival(),
            timers.first().map(|(t, _)| *t),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next.filter(|t| t.duration_since(start) < VIRTUAL_LIMIT) else {
            return Err(PairError::Stalled {
                at: now.duration_since(start),
                unfinished,
            });
        };
        now = now.max(next);
        while let Some((f, datagram)) = to_server.take_due(now) {
            if let Some(flow) = flows.get_mut(f) {
                let from = flow.client.addr;
                flow.server.receive(
                    now,
                    from,
                    datagram,
                    &mut buf,
                    &server_config,
                    &mut flow.responses,
                )?;
            }
            enqueue(&mut flows, &mut ready, f);
        }
        while let Some((f, datagram)) = to_client.take_due(now) {
            if let Some(flow) = flows.get_mut(f) {
                let from = flow.server.addr;
                flow.client
                    .receive(now, from, datagram, &mut buf, &None, &mut Vec::new())?;
            }
            enqueue(&mut flows, &mut ready, f);
        }
        while let Some(&(at, f)) = timers.first() {
            if at > now {
                break;
            }
            timers.remove(&(at, f));
            if let Some(flow) = flows.get_mut(f) {
                flow.timer = None;
                flow.server.fire_timeout(now);
                flow.client.fire_timeout(now);
            }
            enqueue(&mut flows, &mut ready, f);
        }
    }
    Ok(PairRun {
        wall: wall.elapsed(),
        simulated: last_done.duration_since(start),
        server_datagrams: flows.iter().map(|f| f.server.datagrams).sum(),
        client_datagrams: flows.iter().map(|f| f.client.datagrams).sum(),
        dropped: to_server.dropped + to_client.dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bytes: u64, loss: f64) -> PairSpec {
        PairSpec {
            flows: 1,
            bytes,
            rate_bps: 100e6,
            rtt: Duration::from_millis(30),
            loss,
            mtu: 1350,
            seed: 7,
        }
    }

    /// The whole body arrives, in data packets of the configured size, and
    /// no sooner than the path allows (a handshake round trip, a round trip
    /// for the request's worth of data, and the bytes at the link rate).
    #[test]
    fn moves_the_whole_body_at_the_bottleneck_rate() {
        let bytes = 2_000_000;
        let run = run(&spec(bytes, 0.0)).expect("transfer finishes");
        // No datagram carries more body than its own size.
        assert!(
            run.server_datagrams >= bytes / 1350,
            "{} datagrams for {bytes} bytes",
            run.server_datagrams
        );
        let floor = Duration::from_secs_f64(bytes as f64 * 8.0 / 100e6) + Duration::from_millis(30);
        assert!(run.simulated >= floor, "{:?} < {floor:?}", run.simulated);
        assert!(run.client_datagrams > 0);
    }

    /// Random loss is applied and recovered from.
    #[test]
    fn recovers_from_random_loss() {
        let run = run(&spec(1_000_000, 0.05)).expect("transfer finishes despite loss");
        assert!(run.dropped > 0, "5% loss dropped nothing");
    }

    /// Flows share the bottleneck: each body arrives whole, and all of
    /// them take no less than their sum at the link rate.
    #[test]
    fn flows_share_the_bottleneck() {
        let bytes = 2_000_000;
        let run = run(&PairSpec {
            flows: 10,
            ..spec(bytes, 0.0)
        })
        .expect("every flow finishes");
        let floor = Duration::from_secs_f64(bytes as f64 * 8.0 / 100e6);
        assert!(run.simulated >= floor, "{:?} < {floor:?}", run.simulated);
        assert!(run.server_datagrams >= bytes / 1350);
    }

    /// A transfer that cannot finish (every datagram lost) is reported as
    /// stalled, not looped on.
    #[test]
    fn a_dead_path_is_reported() {
        match run(&spec(100_000, 1.0)) {
            Err(PairError::Stalled { unfinished: 1, .. })
            | Err(PairError::Lost { received: 0, .. }) => {}
            other => panic!("expected a stall or a lost connection, got {other:?}"),
        }
    }
}
