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
//! serialization clock, a propagation delay, a drop-tail limit and
//! Bernoulli loss) instead of the simulator's event queue, links and
//! metrics.
//!
//! The loop: poll both connections for datagrams (one per call, as artq's
//! endpoints send), put them on the bottleneck of their direction, then
//! advance virtual time to the next arrival or timer and deliver or fire
//! it. Wall time is the whole loop's, handshake included.

use std::collections::VecDeque;
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

/// What the pair is asked to move, and over what.
#[derive(Clone, Copy, Debug)]
pub struct PairSpec {
    /// Body bytes, server to client, on one unidirectional stream.
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
    /// Virtual time from the client's first packet to its last body byte.
    pub simulated: Duration,
    /// Datagrams the server sent (data and everything else).
    pub server_datagrams: u64,
    /// Datagrams the client sent (acknowledgements, mostly).
    pub client_datagrams: u64,
    /// Datagrams the bottleneck dropped (random loss and its queue limit).
    pub dropped: u64,
}

/// Why a run did not finish.
#[derive(Debug, thiserror::Error)]
pub enum PairError {
    /// quinn's configuration was refused.
    #[error("quinn configuration: {0}")]
    Config(String),
    /// The connection was lost or closed before the body arrived.
    #[error("quinn connection lost after {received} of {expected} bytes: {reason}")]
    Lost {
        /// Body bytes received.
        received: u64,
        /// Body bytes asked for.
        expected: u64,
        /// quinn's reason.
        reason: String,
    },
    /// Nothing was left to happen, or the virtual time limit passed,
    /// before the body arrived.
    #[error("quinn pair stalled at {at:?} of virtual time after {received} of {expected} bytes")]
    Stalled {
        /// Virtual time since the start.
        at: Duration,
        /// Body bytes received.
        received: u64,
        /// Body bytes asked for.
        expected: u64,
    },
}

/// One direction of the bottleneck: a serialization clock, a propagation
/// delay and a drop-tail limit on the queueing delay (one bandwidth-delay
/// product, the simulator's default buffer).
struct Pipe {
    rate_bps: f64,
    delay: Duration,
    queue_limit: Duration,
    loss: f64,
    busy_until: Instant,
    in_flight: VecDeque<(Instant, BytesMut)>,
    dropped: u64,
}

impl Pipe {
    fn new(spec: &PairSpec, start: Instant) -> Self {
        Pipe {
            rate_bps: spec.rate_bps,
            delay: spec.rtt / 2,
            queue_limit: spec.rtt,
            loss: spec.loss,
            busy_until: start,
            in_flight: VecDeque::new(),
            dropped: 0,
        }
    }

    fn send(&mut self, now: Instant, datagram: &[u8], rng: &mut ChaCha8Rng) {
        let start = self.busy_until.max(now);
        // No draw at all without loss: the harness's own cost is charged
        // to quinn's figure, so it is kept small.
        let lost = self.loss > 0.0 && rng.gen_bool(self.loss.min(1.0));
        if start.duration_since(now) > self.queue_limit || lost {
            self.dropped += 1;
            return;
        }
        let serialization = Duration::from_secs_f64(datagram.len() as f64 * 8.0 / self.rate_bps);
        self.busy_until = start + serialization;
        let arrival = self.busy_until + self.delay;
        self.in_flight
            .push_back((arrival, BytesMut::from(datagram)));
    }

    fn next_arrival(&self) -> Option<Instant> {
        self.in_flight.front().map(|(at, _)| *at)
    }

    fn take_due(&mut self, now: Instant) -> Option<BytesMut> {
        match self.in_flight.front() {
            Some((at, _)) if *at <= now => self.in_flight.pop_front().map(|(_, d)| d),
            _ => None,
        }
    }
}

/// One side: its endpoint and its one connection.
struct Side {
    endpoint: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    addr: SocketAddr,
    datagrams: u64,
}

impl Side {
    /// Hands a datagram from `from` to this side's endpoint; a datagram
    /// that opens a connection is accepted with `server_config`.
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

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.conn.as_mut().and_then(|(_, c)| c.poll_timeout())
    }
}

/// The server's body: one unidirectional stream, written from one shared
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

/// Runs one transfer and times it.
pub fn run(spec: &PairSpec) -> Result<PairRun, PairError> {
    let config_err = |e: Box<dyn std::error::Error + Send + Sync>| PairError::Config(e.to_string());
    let transport = Arc::new(transport_config(spec));
    let mut server_config = quinn_hq::server_config().map_err(config_err)?;
    server_config.transport_config(transport.clone());
    let server_config = Some(Arc::new(server_config));
    let mut client_config = quinn_hq::insecure_client_config().map_err(config_err)?;
    client_config.transport_config(transport);

    let body_len = usize::try_from(spec.bytes)
        .map_err(|_| PairError::Config(format!("{} bytes do not fit in memory", spec.bytes)))?;
    let mut body = Body {
        data: Bytes::from(vec![0x5a; body_len]),
        sent: 0,
        stream: None,
        finished: false,
    };

    let wall = Instant::now();
    let start = Instant::now();
    let mut now = start;
    let endpoint_config = Arc::new(EndpointConfig::default());
    let mut client = Side {
        endpoint: Endpoint::new(endpoint_config.clone(), None, false, Some([1; 32])),
        conn: None,
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 40_000)),
        datagrams: 0,
    };
    let mut server = Side {
        endpoint: Endpoint::new(endpoint_config, server_config.clone(), false, Some([2; 32])),
        conn: None,
        addr: SocketAddr::from((Ipv4Addr::LOCALHOST, 4433)),
        datagrams: 0,
    };
    client.conn = Some(
        client
            .endpoint
            .connect(now, client_config, server.addr, "localhost")
            .map_err(|e| PairError::Config(format!("connect: {e}")))?,
    );

    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    let mut to_server = Pipe::new(spec, start);
    let mut to_client = Pipe::new(spec, start);
    let mut buf = Vec::with_capacity(usize::from(spec.mtu));
    let mut responses: Vec<Vec<u8>> = Vec::new();
    let mut received: u64 = 0;
    let mut incoming: Option<StreamId> = None;
    let mut done_at = None;

    while done_at.is_none() {
        // The applications: the server writes once connected, the client
        // reads what has arrived.
        if let Some((_, conn)) = &mut server.conn {
            while let Some(event) = conn.poll() {
                if let Event::ConnectionLost { reason } = event {
                    return Err(PairError::Lost {
                        received,
                        expected: spec.bytes,
                        reason: reason.to_string(),
                    });
                }
            }
            if !conn.is_handshaking() {
                body.write(conn);
            }
        }
        if let Some((_, conn)) = &mut client.conn {
            while let Some(event) = conn.poll() {
                if let Event::ConnectionLost { reason } = event {
                    return Err(PairError::Lost {
                        received,
                        expected: spec.bytes,
                        reason: reason.to_string(),
                    });
                }
            }
            while let Some(id) = conn.streams().accept(Dir::Uni) {
                incoming.get_or_insert(id);
            }
            if let Some(id) = incoming {
                if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                    while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
                        received += chunk.bytes.len() as u64;
                    }
                    let _ = chunks.finalize();
                }
            }
            if received >= spec.bytes {
                done_at = Some(now);
            }
        }
        server.exchange_events();
        client.exchange_events();

        // Transmissions onto the bottleneck.
        for (side, pipe) in [(&mut server, &mut to_client), (&mut client, &mut to_server)] {
            if let Some((_, conn)) = &mut side.conn {
                loop {
                    buf.clear();
                    let Some(transmit) = conn.poll_transmit(now, 1, &mut buf) else {
                        break;
                    };
                    side.datagrams += 1;
                    pipe.send(now, buf.get(..transmit.size).unwrap_or_default(), &mut rng);
                }
            }
        }
        for datagram in responses.drain(..) {
            to_client.send(now, &datagram, &mut rng);
        }
        if done_at.is_some() {
            break;
        }

        // The next instant anything happens.
        let next = [
            to_server.next_arrival(),
            to_client.next_arrival(),
            server.poll_timeout(),
            client.poll_timeout(),
        ]
        .into_iter()
        .flatten()
        .min();
        let Some(next) = next.filter(|t| t.duration_since(start) < VIRTUAL_LIMIT) else {
            return Err(PairError::Stalled {
                at: now.duration_since(start),
                received,
                expected: spec.bytes,
            });
        };
        now = now.max(next);
        while let Some(datagram) = to_server.take_due(now) {
            server.receive(
                now,
                client.addr,
                datagram,
                &mut buf,
                &server_config,
                &mut responses,
            )?;
        }
        while let Some(datagram) = to_client.take_due(now) {
            client.receive(now, server.addr, datagram, &mut buf, &None, &mut Vec::new())?;
        }
        for side in [&mut server, &mut client] {
            if let Some((_, conn)) = &mut side.conn {
                if conn.poll_timeout().is_some_and(|t| t <= now) {
                    conn.handle_timeout(now);
                }
            }
        }
    }
    Ok(PairRun {
        wall: wall.elapsed(),
        simulated: done_at.unwrap_or(now).duration_since(start),
        server_datagrams: server.datagrams,
        client_datagrams: client.datagrams,
        dropped: to_server.dropped + to_client.dropped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(bytes: u64, loss: f64) -> PairSpec {
        PairSpec {
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

    /// A transfer that cannot finish (every datagram lost) is reported as
    /// stalled, not looped on.
    #[test]
    fn a_dead_path_is_reported() {
        match run(&spec(100_000, 1.0)) {
            Err(PairError::Stalled { received: 0, .. })
            | Err(PairError::Lost { received: 0, .. }) => {}
            other => panic!("expected a stall or a lost connection, got {other:?}"),
        }
    }
}
