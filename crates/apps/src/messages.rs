//! The message workload (RCP, rcp.md §III-A): the sender produces
//! fixed-size messages at a fixed rate, each stamped with its generation
//! time; the receiver records which arrived and how late.
//!
//! **Wire form**: a message is `seq` (8 bytes, big endian), the generation
//! time in nanoseconds of the sender's clock (8 bytes, big endian), then
//! zero padding up to the message size. Messages travel in QUIC DATAGRAM
//! frames (RFC 9221), one frame per message, so a receiver needs nothing but
//! RFC 9221; with the `tcp` scheme (rcp.md's TCP NewReno baseline) they
//! travel back to back on one reliable unidirectional stream instead: the
//! scheme declares which ([`Carriage`], read from the connection, never
//! from the scheme's name). Which messages the transport retransmits or abandons is
//! the recovery policy's business (`recovery::rcp`): the application only
//! produces and consumes.
//!
//! **Roles**: the server is the sender (it runs the recovery scheme, as in
//! every artq workload), the client the receiver. Message `i` is generated
//! at the start of its period, `start + i / rate` (`start` being the first
//! multiple of the period, counted from the clock's epoch, at or after the
//! moment the handshake completed: concurrent senders share their
//! periods; senders given one [`StartGate`] start together, at the first
//! multiple at or after the moment the last of their handshakes completed),
//! and stamped with that instant; it is handed
//! to the transport at a uniformly random instant of the period, drawn
//! from the workload's seed. That is the slot model of rcp.md §V-A: every
//! client generates its packet at the beginning of the slot, and the
//! clients reach the channel in a random order within it (the authors'
//! simulator permutes them every slot). Periodic senders sharing a
//! bottleneck would otherwise arrive in the same order every period, and a
//! drop-tail queue would always drop the same sender's messages. A
//! message's latency runs from its stamp, so it includes the wait until
//! its send instant, as the authors' latency does (a packet stamped in
//! slot `t` that stays the channel's 100 slots arrives 101 slots later).
//! The sender keeps at most [`MAX_BACKLOG`] messages waiting for the
//! congestion window (the paper's UDP sends at once; ours is still a QUIC
//! sender): a message generated while the backlog is full is discarded at
//! the sender and counts as lost. A drain period after the last generation
//! (`drain`, default [`DEFAULT_DRAIN`]) lets late copies arrive; then the
//! sender closes the connection. A message that has not arrived by then is
//! lost.
//!
//! **Metrics** ([`MessageReport`]): the delivery ratio (distinct messages
//! received over messages generated) and the latency of each delivered
//! message (arrival minus generation, both read from one clock in the
//! simulator; over real UDP the two ends' clocks differ and only the
//! delivery counts are meaningful), and the first arrivals in order
//! ([`MessageReport::arrivals`]), from which a caller that knows when the
//! sender started computes figures over part of the run (the last 25% of
//! slots of rcp.md Table IV, or everything up to the sender's close).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use rand::RngCore;
use transport::policy::Carriage;
use transport::rng::{RngSeed, StackRng};
use transport::streams::StreamEvent;
use transport::{Connection, ConnectionError, ConnectionHandle, Endpoint, Event};
use wire::time::{Duration, Instant};
use wire::{Dir, StreamId};

use crate::app::{App, OwnConnection};

/// Bytes of a message's header: sequence number and generation time.
pub const HEADER: usize = 16;
/// Largest message, bytes: it must fit one DATAGRAM frame in a
/// 1200-byte packet.
pub const MAX_SIZE: u32 = 1100;
/// Most messages one workload may generate (the receiver keeps one bit
/// per message).
pub const MAX_MESSAGES: u64 = 100_000_000;
/// Highest generation rate, messages per second.
pub const MAX_RATE: u64 = 1_000_000;
/// Messages the sender holds back while congestion control blocks it.
pub const MAX_BACKLOG: usize = 1000;
/// Time after the last message's generation before the sender closes.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(3);
/// Longest drain period a workload may ask for, ms.
pub const MAX_DRAIN_MS: u32 = 600_000;
/// Most first arrivals a [`MessageReport`] lists one by one (64 MiB of
/// them); a longer run keeps its totals but not the list
/// ([`MessageReport::arrivals_complete`]).
pub const MAX_LISTED_ARRIVALS: usize = 4 << 20;

/// Longest a [`StartGate`] waits for its last sender's handshake after
/// the first one's: a flow whose handshake has not completed by then
/// starts on its own when it does, and the others do not wait for it.
pub const GATE_TIMEOUT: Duration = Duration::from_secs(10);

/// One start instant for the message senders of one run: each starts
/// generating at the first period boundary at or after the moment the
/// last of their handshakes completed (or [`GATE_TIMEOUT`] after the
/// first, if one never does).
///
/// Why: rcp.md's clients all start generating in slot 1 of the authors'
/// simulator, which has no handshake. A sender that starts when its own
/// handshake completes starts late when its handshake needs a
/// retransmission, into a channel the others have already filled; its
/// last messages then cross an emptier channel after the others have
/// ended (seed 8 of `rcp-table2` lost a third fewer messages that way).
/// With a gate, no message is generated while any handshake of the run
/// is in flight. A sender waiting at the gate looks again at each period
/// boundary, so all of them see it open at the same boundary. Shared by
/// the senders of one simulated run (one thread); a real server gives its
/// senders none.
#[derive(Clone, Debug)]
pub struct StartGate {
    state: Arc<Mutex<GateState>>,
}

/// What a [`StartGate`] has seen.
#[derive(Debug)]
struct GateState {
    /// Senders it waits for.
    expected: usize,
    /// Handshakes completed so far.
    arrived: usize,
    /// When the first completed.
    first: Option<Instant>,
    /// The instant it opened at, once it has.
    opened: Option<Instant>,
}

impl StartGate {
    /// A gate for `senders` message senders (at least one).
    pub fn new(senders: usize) -> Self {
        Self {
            state: Arc::new(Mutex::new(GateState {
                expected: senders.max(1),
                arrived: 0,
                first: None,
                opened: None,
            })),
        }
    }

    /// One sender's handshake completed at `now`: the instant its
    /// schedule starts from, or `None` while it waits for the others. A
    /// handshake completing after the gate opened (the timeout) starts on
    /// its own, from `now`.
    fn arrive(&self, now: Instant) -> Option<Instant> {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if g.open_by(now).is_some() {
            return Some(now);
        }
        g.arrived += 1;
        g.first.get_or_insert(now);
        if g.arrived >= g.expected {
            g.opened = Some(now);
        }
        g.opened
    }

    /// The instant the gate opened at, if it has by `now`.
    fn opened(&self, now: Instant) -> Option<Instant> {
        self.state
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .open_by(now)
    }
}

impl GateState {
    /// The instant the gate opened at, if it has by `now`: when the last
    /// sender arrived, or [`GATE_TIMEOUT`] after the first.
    fn open_by(&mut self, now: Instant) -> Option<Instant> {
        if self.opened.is_none() {
            let timeout = self.first.map(|f| f + GATE_TIMEOUT);
            if timeout.is_some_and(|t| now >= t) {
                self.opened = timeout;
            }
        }
        self.opened
    }
}

/// What the message workload sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MessageParams {
    /// Messages generated (at least 1).
    pub messages: u64,
    /// Bytes per message ([`HEADER`]..=[`MAX_SIZE`]).
    pub size: u32,
    /// Messages per second (1..=[`MAX_RATE`]).
    pub rate: u64,
    /// Wait after the last generation before closing, ms.
    pub drain_ms: u32,
}

impl MessageParams {
    /// Checks every number; the error says which and why.
    pub fn validate(&self) -> Result<(), String> {
        if self.messages == 0 || self.messages > MAX_MESSAGES {
            return Err(format!(
                "the messages workload needs 1..={MAX_MESSAGES} messages"
            ));
        }
        if !(HEADER as u32..=MAX_SIZE).contains(&self.size) {
            return Err(format!(
                "message_size {} is outside {HEADER}..={MAX_SIZE} bytes",
                self.size
            ));
        }
        if self.rate == 0 || self.rate > MAX_RATE {
            return Err(format!(
                "message_rate {} is outside 1..={MAX_RATE} per second",
                self.rate
            ));
        }
        if self.drain_ms > MAX_DRAIN_MS {
            return Err(format!(
                "drain {} ms is more than {MAX_DRAIN_MS} ms",
                self.drain_ms
            ));
        }
        Ok(())
    }

    /// When message `seq` is generated, the schedule starting at `start`.
    pub fn generated_at(&self, start: Instant, seq: u64) -> Instant {
        let ns = u128::from(seq) * 1_000_000_000 / u128::from(self.rate.max(1));
        start + Duration::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX))
    }

    /// The first period boundary at or after `t`, counted from the clock's
    /// epoch: where a schedule starting at `t` begins.
    pub fn boundary_at_or_after(&self, t: Instant) -> Instant {
        let period = (1_000_000_000 / self.rate.max(1)).max(1);
        Instant::from_nanos(t.as_nanos().div_ceil(period).saturating_mul(period))
    }

    /// The first period boundary strictly after `t`.
    fn boundary_after(&self, t: Instant) -> Instant {
        self.boundary_at_or_after(t + Duration::from_nanos(1))
    }

    /// When the sender closes: the drain period after the last generation.
    pub fn closes_at(&self, start: Instant) -> Instant {
        self.generated_at(start, self.messages.saturating_sub(1))
            + Duration::from_millis(u64::from(self.drain_ms))
    }
}

/// One message's bytes.
pub fn encode(seq: u64, generated: Instant, size: u32) -> Vec<u8> {
    let mut m = vec![0u8; (size as usize).max(HEADER)];
    m[..8].copy_from_slice(&seq.to_be_bytes());
    let ns = u64::try_from(generated.since_epoch().as_nanos()).unwrap_or(u64::MAX);
    m[8..16].copy_from_slice(&ns.to_be_bytes());
    m
}

/// A message's sequence number and generation time, or `None` if it is
/// too short to be one.
pub fn decode(bytes: &[u8]) -> Option<(u64, Instant)> {
    let seq = u64::from_be_bytes(bytes.get(..8)?.try_into().ok()?);
    let ns = u64::from_be_bytes(bytes.get(8..16)?.try_into().ok()?);
    Some((seq, Instant::ZERO + Duration::from_nanos(ns)))
}

/// The sender's progress on one connection.
#[derive(Debug)]
struct Outgoing {
    carriage: Carriage,
    start: Option<Instant>,
    /// Connected and waiting at the [`StartGate`]: the next period
    /// boundary, when it looks again.
    waiting: Option<Instant>,
    next: u64,
    stream: Option<StreamId>,
    /// Stream bytes written by the application but refused by the stream
    /// (flow control), bounded by [`MAX_BACKLOG`] messages.
    pending: Vec<u8>,
    discarded: u64,
    closed: bool,
    /// When the next message is generated (once started).
    due: Option<Instant>,
    /// Draws each message's instant within its period.
    rng: StackRng,
}

impl Outgoing {
    /// A connection's progress before its handshake completes.
    fn new(carriage: Carriage, rng: StackRng) -> Self {
        Self {
            carriage,
            start: None,
            waiting: None,
            next: 0,
            stream: None,
            pending: Vec::new(),
            discarded: 0,
            closed: false,
            due: None,
            rng,
        }
    }
}

/// The server role: generates the messages on every connection it accepts.
#[derive(Debug)]
pub struct MessageSender {
    params: MessageParams,
    conns: BTreeMap<ConnectionHandle, Outgoing>,
    served: bool,
    rng: StackRng,
    /// Shared with the run's other senders, when they start together.
    gate: Option<StartGate>,
}

impl MessageSender {
    /// A sender of `params`' messages; `seed` draws their instants.
    pub fn new(params: MessageParams, seed: u64) -> Self {
        Self {
            params,
            conns: BTreeMap::new(),
            served: false,
            rng: StackRng::new(RngSeed::Fixed(seed)),
            gate: None,
        }
    }

    /// Starts this sender's schedule together with the other senders of
    /// `gate` ([`StartGate`]); before its first connection.
    pub fn set_gate(&mut self, gate: StartGate) {
        self.gate = Some(gate);
    }

    /// Where a connection that completed its handshake at `now` stands:
    /// started, or waiting at the gate until the next boundary.
    fn on_connected(&self, now: Instant, out: &mut Outgoing) {
        if out.start.is_some() || out.waiting.is_some() {
            return;
        }
        let Some(gate) = &self.gate else {
            out.start = Some(self.params.boundary_at_or_after(now));
            return;
        };
        match gate.arrive(now) {
            Some(from) => out.start = Some(self.params.boundary_at_or_after(from)),
            None => out.waiting = Some(self.params.boundary_after(now)),
        }
    }

    /// A waiting connection looks at the gate at `now`. All take the same
    /// start, the boundary at or after the gate's opening; one that looked
    /// at that very boundary just before the last handshake completed on
    /// it sees the gate one period later, and hands its first message to
    /// the transport up to one period late (stamped on time).
    fn look(&self, now: Instant, out: &mut Outgoing) {
        let Some(at) = out.waiting else { return };
        if now < at {
            return;
        }
        match self.gate.as_ref().and_then(|g| g.opened(now)) {
            Some(open) => {
                out.waiting = None;
                out.start = Some(self.params.boundary_at_or_after(open));
            }
            None => out.waiting = Some(self.params.boundary_after(now)),
        }
    }

    /// When message `seq` is handed to the transport: a uniform instant of
    /// its period (it is generated, and stamped, at the period's start).
    fn instant(&self, out: &mut Outgoing, start: Instant, seq: u64) -> Instant {
        let period_ns = 1_000_000_000 / self.params.rate.max(1);
        let jitter = out.rng.next_u64() % period_ns.max(1);
        self.params.generated_at(start, seq) + Duration::from_nanos(jitter)
    }

    /// When the sender's first connection started generating (its
    /// handshake completed): the schedule's origin, from which a caller
    /// finds each period and the close ([`MessageParams::closes_at`]).
    pub fn started_at(&self) -> Option<Instant> {
        self.conns.values().filter_map(|o| o.start).min()
    }

    /// Messages discarded at the sender because the backlog was full, over
    /// all connections.
    pub fn discarded(&self) -> u64 {
        self.conns.values().map(|o| o.discarded).sum()
    }

    fn produce(&self, now: Instant, out: &mut Outgoing, conn: &mut Connection) {
        let Some(start) = out.start else { return };
        let p = self.params;
        while out.next < p.messages {
            let send_at = match out.due {
                Some(t) => t,
                None => {
                    let t = self.instant(out, start, out.next);
                    out.due = Some(t);
                    t
                }
            };
            if send_at > now {
                break;
            }
            let msg = encode(out.next, p.generated_at(start, out.next), p.size);
            out.next += 1;
            out.due = None;
            match out.carriage {
                Carriage::Datagram => {
                    if conn.datagrams_queued() >= MAX_BACKLOG || conn.send_datagram(msg).is_err() {
                        out.discarded += 1;
                    }
                }
                Carriage::Stream => {
                    if out.pending.len() >= MAX_BACKLOG * p.size as usize {
                        out.discarded += 1;
                    } else {
                        out.pending.extend_from_slice(&msg);
                    }
                }
            }
        }
        if out.carriage == Carriage::Stream {
            if out.stream.is_none() {
                out.stream = conn.streams().open(Dir::Uni);
            }
            if let Some(id) = out.stream {
                if !out.pending.is_empty() {
                    if let Ok(n) = conn.streams().write(id, &out.pending) {
                        out.pending.drain(..n);
                    }
                }
            }
        }
    }
}

impl App for MessageSender {
    fn on_connection(&mut self, _now: Instant, h: ConnectionHandle, conn: &mut Connection) {
        self.served = true;
        self.conns.insert(
            h,
            Outgoing::new(conn.message_carriage(), self.rng.fork(h.0 as u64)),
        );
    }

    fn on_event(
        &mut self,
        now: Instant,
        h: ConnectionHandle,
        _conn: &mut Connection,
        event: &Event,
    ) {
        let Some(mut out) = self.conns.remove(&h) else {
            return;
        };
        match event {
            // The schedule starts on the period grid of the clock:
            // concurrent senders share their periods, as the clients of the
            // authors' slotted simulator share slots.
            Event::Connected => self.on_connected(now, &mut out),
            Event::ConnectionLost(_) => out.closed = true,
            _ => {}
        }
        self.conns.insert(h, out);
    }

    fn drive(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let handles: Vec<ConnectionHandle> = self.conns.keys().copied().collect();
        for h in handles {
            let Some(mut out) = self.conns.remove(&h) else {
                continue;
            };
            if let Some(conn) = endpoint.connection_mut(h) {
                if !out.closed {
                    self.look(now, &mut out);
                    self.produce(now, &mut out, conn);
                    if out.start.is_some_and(|s| now >= self.params.closes_at(s)) {
                        conn.close(now, 0, b"messages done");
                        out.closed = true;
                    }
                }
            } else {
                out.closed = true;
            }
            self.conns.insert(h, out);
        }
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.conns
            .values()
            .filter(|o| !o.closed)
            .filter_map(|o| {
                if o.waiting.is_some() {
                    return o.waiting;
                }
                let start = o.start?;
                Some(if o.next < self.params.messages {
                    o.due
                        .unwrap_or_else(|| self.params.generated_at(start, o.next))
                } else {
                    self.params.closes_at(start)
                })
            })
            .min()
    }

    fn is_finished(&self, endpoint: &Endpoint) -> bool {
        self.served
            && self
                .conns
                .iter()
                .all(|(h, o)| o.closed && endpoint.connection(*h).is_none_or(|c| c.is_closed()))
    }

    fn shutdown(&mut self, now: Instant, endpoint: &mut Endpoint) {
        for (h, o) in self.conns.iter_mut() {
            if let Some(conn) = endpoint.connection_mut(*h) {
                conn.close(now, 0, b"shutdown");
            }
            o.closed = true;
        }
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }

    /// Offered so that a simulated run can give its senders one
    /// [`StartGate`].
    fn as_any_mut(&mut self) -> Option<&mut dyn std::any::Any> {
        Some(self)
    }
}

/// What the receiver measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct MessageReport {
    /// Messages the workload generates.
    pub generated: u64,
    /// Distinct messages received.
    pub delivered: u64,
    /// Copies of a message already received (a retransmission whose
    /// original arrived after all).
    pub duplicates: u64,
    /// Payloads that were not messages of this workload (too short, or a
    /// sequence number beyond the last).
    pub malformed: u64,
    /// Sum of the delivered messages' latencies.
    pub latency_sum: Duration,
    /// When the handshake completed.
    pub connected_at: Option<Instant>,
    /// When the sender closed the connection: the run is over.
    pub done_at: Option<Instant>,
    /// Why the connection ended otherwise.
    pub error: Option<ConnectionError>,
    /// Every distinct message's first arrival, in arrival order (at most
    /// [`MAX_LISTED_ARRIVALS`]).
    pub arrivals: Vec<Arrival>,
    /// Whether `arrivals` lists every delivered message.
    pub arrivals_complete: bool,
}

/// One message's first arrival at the receiver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// When it arrived.
    pub at: Instant,
    /// Arrival minus generation.
    pub latency: Duration,
}

impl MessageReport {
    /// Delivered over generated (0 for an empty workload).
    pub fn delivery_ratio(&self) -> f64 {
        if self.generated == 0 {
            return 0.0;
        }
        self.delivered as f64 / self.generated as f64
    }

    /// Mean latency of the delivered messages; `None` when none arrived.
    pub fn mean_latency(&self) -> Option<Duration> {
        (self.delivered > 0).then(|| {
            Duration::from_nanos(
                u64::try_from(self.latency_sum.as_nanos() / u128::from(self.delivered))
                    .unwrap_or(u64::MAX),
            )
        })
    }
}

/// The client role: receives messages and measures them.
#[derive(Debug)]
pub struct MessageReceiver {
    params: MessageParams,
    conn: OwnConnection,
    stream: Option<StreamId>,
    /// A partial stream record.
    partial: Vec<u8>,
    /// One bit per message: received already.
    seen: Vec<u64>,
    report: MessageReport,
}

impl MessageReceiver {
    /// A receiver for `params`' messages.
    pub fn new(params: MessageParams) -> Self {
        let words = usize::try_from(params.messages.div_ceil(64)).unwrap_or(0);
        Self {
            params,
            conn: OwnConnection::default(),
            stream: None,
            partial: Vec::new(),
            seen: vec![0; words],
            report: MessageReport {
                generated: params.messages,
                arrivals_complete: true,
                ..MessageReport::default()
            },
        }
    }

    /// What was measured so far.
    pub fn report(&self) -> &MessageReport {
        &self.report
    }

    fn accept(&mut self, now: Instant, bytes: &[u8]) {
        let Some((seq, generated)) = decode(bytes) else {
            self.report.malformed += 1;
            return;
        };
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        let Some(w) = self
            .seen
            .get_mut(word)
            .filter(|_| seq < self.params.messages)
        else {
            self.report.malformed += 1;
            return;
        };
        if *w & (1 << bit) != 0 {
            self.report.duplicates += 1;
            return;
        }
        *w |= 1 << bit;
        let latency = now.saturating_duration_since(generated);
        self.report.delivered += 1;
        self.report.latency_sum += latency;
        if self.report.arrivals.len() < MAX_LISTED_ARRIVALS {
            self.report.arrivals.push(Arrival { at: now, latency });
        } else {
            self.report.arrivals_complete = false;
        }
    }

    fn read(&mut self, now: Instant, conn: &mut Connection) {
        while let Some(d) = conn.recv_datagram() {
            self.accept(now, &d);
        }
        if self.stream.is_none() {
            self.stream = conn.streams().accept(Dir::Uni);
        }
        let Some(id) = self.stream else { return };
        let size = self.params.size as usize;
        let mut buf = [0u8; 8192];
        while let Ok(Some(n)) = conn.streams().read(id, &mut buf) {
            if n == 0 {
                break;
            }
            self.partial.extend_from_slice(&buf[..n]);
            let whole = self.partial.len() / size * size;
            let records: Vec<u8> = self.partial.drain(..whole).collect();
            for r in records.chunks_exact(size) {
                self.accept(now, r);
            }
        }
    }
}

impl App for MessageReceiver {
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
                self.report.connected_at.get_or_insert(now);
            }
            Event::DatagramReceived | Event::Stream(StreamEvent::Readable { .. }) => {
                self.read(now, conn)
            }
            Event::Stream(StreamEvent::Opened { .. }) => self.read(now, conn),
            Event::ConnectionLost(reason) => {
                self.read(now, conn);
                // The sender's CONNECTION_CLOSE may be lost on a lossy
                // path: an idle timeout after the scheduled close is the
                // end of the run too.
                let scheduled_end = self
                    .report
                    .connected_at
                    .is_some_and(|c| now >= self.params.closes_at(c));
                match reason {
                    ConnectionError::PeerClosed { code: 0, .. } => {
                        self.report.done_at.get_or_insert(now);
                    }
                    ConnectionError::TimedOut if scheduled_end => {
                        self.report.done_at.get_or_insert(now);
                    }
                    other => {
                        if self.report.done_at.is_none() {
                            self.report.error = Some(other.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }

    fn drive(&mut self, now: Instant, endpoint: &mut Endpoint) {
        if let Some(conn) = self.conn.get_mut(endpoint) {
            self.read(now, conn);
        }
    }

    fn is_finished(&self, endpoint: &Endpoint) -> bool {
        (self.report.done_at.is_some() || self.report.error.is_some())
            && self.conn.get(endpoint).is_none_or(|c| c.is_closed())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> MessageParams {
        MessageParams {
            messages: 100,
            size: 64,
            rate: 1000,
            drain_ms: 500,
        }
    }

    #[test]
    fn messages_round_trip_and_short_payloads_are_refused() {
        let t = Instant::ZERO + Duration::from_micros(1234);
        let m = encode(42, t, 64);
        assert_eq!(m.len(), 64);
        assert_eq!(decode(&m), Some((42, t)));
        assert_eq!(decode(&m[..15]), None);
    }

    fn outgoing() -> Outgoing {
        Outgoing::new(Carriage::Datagram, StackRng::new(RngSeed::Fixed(1)))
    }

    fn ms(x: u64) -> Instant {
        Instant::ZERO + Duration::from_millis(x)
    }

    #[test]
    fn senders_at_one_gate_start_together_after_the_last_handshake() {
        let gate = StartGate::new(2);
        let (mut a, mut b) = (
            MessageSender::new(params(), 1),
            MessageSender::new(params(), 2),
        );
        a.set_gate(gate.clone());
        b.set_gate(gate);
        let (mut oa, mut ob) = (outgoing(), outgoing());
        // A connects first and waits, looking again at each boundary.
        a.on_connected(ms(5) + Duration::from_micros(300), &mut oa);
        assert_eq!((oa.start, oa.waiting), (None, Some(ms(6))));
        a.look(ms(6), &mut oa);
        assert_eq!((oa.start, oa.waiting), (None, Some(ms(7))));
        // B's handshake completes at 300.4 ms: both start at 301 ms.
        b.on_connected(ms(300) + Duration::from_micros(400), &mut ob);
        assert_eq!((ob.start, ob.waiting), (Some(ms(301)), None));
        a.look(ms(301), &mut oa);
        assert_eq!((oa.start, oa.waiting), (Some(ms(301)), None));
        // A look before its boundary changes nothing.
        let mut oc = outgoing();
        oc.waiting = Some(ms(9));
        a.look(ms(8), &mut oc);
        assert_eq!((oc.start, oc.waiting), (None, Some(ms(9))));
    }

    #[test]
    fn a_gate_stops_waiting_for_a_handshake_that_never_completes() {
        let gate = StartGate::new(3);
        let mut a = MessageSender::new(params(), 1);
        a.set_gate(gate.clone());
        let mut oa = outgoing();
        a.on_connected(ms(100), &mut oa);
        a.look(ms(101), &mut oa);
        assert_eq!(oa.start, None);
        // GATE_TIMEOUT after the first handshake it opens without the rest.
        let open = ms(100) + GATE_TIMEOUT;
        a.look(open, &mut oa);
        assert_eq!(oa.start, Some(open));
        // A handshake completing later starts on its own.
        let mut late = outgoing();
        a.on_connected(open + Duration::from_micros(2500), &mut late);
        assert_eq!(late.start, Some(open + Duration::from_millis(3)));
    }

    #[test]
    fn without_a_gate_a_sender_starts_at_its_own_boundary() {
        let a = MessageSender::new(params(), 1);
        let mut oa = outgoing();
        a.on_connected(ms(7), &mut oa);
        assert_eq!((oa.start, oa.waiting), (Some(ms(7)), None));
        let mut ob = outgoing();
        a.on_connected(ms(7) + Duration::from_nanos(1), &mut ob);
        assert_eq!(ob.start, Some(ms(8)));
    }

    #[test]
    fn the_schedule_is_rate_paced_and_closes_after_the_drain() {
        let p = params();
        let s = Instant::ZERO + Duration::from_millis(10);
        assert_eq!(p.generated_at(s, 0), s);
        assert_eq!(p.generated_at(s, 5), s + Duration::from_millis(5));
        assert_eq!(p.closes_at(s), s + Duration::from_millis(99 + 500));
        assert!(p.validate().is_ok());
        for bad in [
            MessageParams { messages: 0, ..p },
            MessageParams { size: 8, ..p },
            MessageParams { size: 5000, ..p },
            MessageParams { rate: 0, ..p },
            MessageParams {
                drain_ms: MAX_DRAIN_MS + 1,
                ..p
            },
        ] {
            assert!(bad.validate().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_receiver_counts_distinct_messages_and_their_latency() {
        let mut r = MessageReceiver::new(params());
        let now = Instant::ZERO + Duration::from_millis(100);
        r.accept(
            now,
            &encode(3, Instant::ZERO + Duration::from_millis(40), 64),
        );
        r.accept(
            now,
            &encode(3, Instant::ZERO + Duration::from_millis(40), 64),
        );
        r.accept(
            now,
            &encode(7, Instant::ZERO + Duration::from_millis(80), 64),
        );
        r.accept(now, &encode(100, Instant::ZERO, 64)); // beyond the last
        r.accept(now, b"short");
        let rep = r.report();
        assert_eq!((rep.delivered, rep.duplicates, rep.malformed), (2, 1, 2));
        assert_eq!(rep.mean_latency(), Some(Duration::from_millis(40)));
        assert!((rep.delivery_ratio() - 0.02).abs() < 1e-12);
        assert_eq!(
            rep.arrivals,
            vec![
                Arrival {
                    at: now,
                    latency: Duration::from_millis(60)
                },
                Arrival {
                    at: now,
                    latency: Duration::from_millis(20)
                }
            ]
        );
        assert!(rep.arrivals_complete);
    }
}
