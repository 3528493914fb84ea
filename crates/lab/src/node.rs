//! [`QuicNode`]: an application [`Host`] (a real `transport::Endpoint`
//! plus one `apps` application) as a simulator [`Node`], and the observers
//! that hang the lab's measurement on it.
//!
//! The node is the simulator's driver of the application layer: it copies
//! nothing (the simulator hands each datagram's buffer over and the endpoint
//! decrypts it in place), runs the host after every input, and lets the
//! simulator drain [`Node::poll_transmit`]. Which application runs is the
//! workload's business (`apps::workload`); the node never knows. Nothing here
//! reads a clock unless CPU measurement is switched on
//! ([`QuicNode::set_measure_cpu`]), which only times the node's own methods.

use std::cell::RefCell;
use std::io::Write;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::{Arc, OnceLock};

use apps::{Host, Observer, Protocol};
use netem::{Datagram, Node};
use transport::events::QlogWriter;
use transport::streams::StreamEvent;
use transport::{Connection, ConnectionHandle, ConnectionStats, Event};
use wire::time::Instant;

use crate::metrics::Recorder;

/// Capacity of a fresh transmit buffer: artq's 1350-byte datagrams and
/// then some, so the endpoint never reallocates.
const TX_CAPACITY: usize = 2048;

/// The TLS configurations of every simulated run: one self-signed Ed25519
/// certificate for `localhost`, made once per process from a fixed seed
/// (self-signing per run would dominate short runs, and a fixed seed keeps
/// the handshake bytes' sizes identical everywhere). The server offers every
/// protocol artq serves; the client offers `protocol` alone.
pub fn tls_configs(
    protocol: Protocol,
) -> Result<(Arc<rustls::ServerConfig>, Arc<rustls::ClientConfig>), String> {
    type Configs = (
        Arc<rustls::ServerConfig>,
        Vec<(Protocol, Arc<rustls::ClientConfig>)>,
    );
    static CONFIGS: OnceLock<Result<Configs, String>> = OnceLock::new();
    let (server, clients) = CONFIGS
        .get_or_init(|| {
            use transport::crypto::{self, ServerVerification};
            let (chain, key) = crypto::self_signed_from_seed(&["localhost"], [0x5a; 32])
                .map_err(|e| e.to_string())?;
            let server = crypto::server_config(chain, key, &Protocol::alpn_list(&Protocol::ALL))
                .map_err(|e| e.to_string())?;
            let clients = Protocol::ALL
                .iter()
                .map(|&p| {
                    crypto::client_config(ServerVerification::Insecure, &[p.alpn()])
                        .map(|c| (p, c))
                        .map_err(|e| e.to_string())
                })
                .collect::<Result<_, _>>()?;
            Ok((server, clients))
        })
        .as_ref()
        .map_err(Clone::clone)?;
    let client = clients
        .iter()
        .find(|(p, _)| *p == protocol)
        .map(|(_, c)| c.clone())
        .ok_or_else(|| format!("artq has no {protocol} server to simulate"))?;
    Ok((server.clone(), client))
}

/// An application host driven by the simulator.
///
/// Calling protocol: build the [`Host`] (endpoint, application, observer),
/// wrap it with [`QuicNode::new`], add it to a [`netem::Simulator`] at the
/// same address, run, then read results through [`QuicNode::host`].
pub struct QuicNode {
    addr: SocketAddr,
    host: Host,
    tx: Vec<u8>,
    cpu: Option<std::time::Duration>,
    /// While this says so, the node sends nothing (see
    /// [`QuicNode::hold_transmissions_while`]).
    hold: Option<Box<dyn Fn() -> bool>>,
}

impl core::fmt::Debug for QuicNode {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("QuicNode")
            .field("addr", &self.addr)
            .field("host", &self.host)
            .finish_non_exhaustive()
    }
}

impl QuicNode {
    /// `host` at `addr`.
    pub fn new(addr: SocketAddr, host: Host) -> QuicNode {
        QuicNode {
            addr,
            host,
            tx: Vec::with_capacity(TX_CAPACITY),
            cpu: None,
            hold: None,
        }
    }

    /// The endpoint and application.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The endpoint and application, to act on a connection between two
    /// simulator steps (`lab::steer` resumes deferred rounds).
    pub fn host_mut(&mut self) -> &mut Host {
        &mut self.host
    }

    /// The node transmits nothing while `hold` returns true: a driver that
    /// answers a decision between two simulator steps (`lab::steer`) keeps
    /// the packets of the instant waiting for it, so they leave in the
    /// order an immediate decision would have given. The driver then takes
    /// the node mutably, which makes the simulator poll it again.
    pub fn hold_transmissions_while(&mut self, hold: Box<dyn Fn() -> bool>) {
        self.hold = Some(hold);
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

    /// Runs `f`, adding its wall time to the CPU account when measuring.
    #[allow(
        clippy::disallowed_methods,
        reason = "`cpu_ms` is a report of the sender's cost, never an input to the run"
    )]
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
}

impl Node for QuicNode {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        _to: SocketAddr,
        ecn: Option<netem::Ecn>,
        payload: &mut [u8],
    ) {
        self.timed(|n| {
            // Decrypted in place: the simulator hands the buffer over.
            n.host.handle_datagram(now, None, from, ecn, payload);
            n.host.drive(now);
        });
    }

    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        self.poll_transmit_reusing(now, &mut Vec::new())
    }

    fn poll_transmit_reusing(
        &mut self,
        now: Instant,
        spares: &mut Vec<Vec<u8>>,
    ) -> Option<Datagram> {
        if self.hold.as_ref().is_some_and(|h| h()) {
            return None;
        }
        self.timed(|n| {
            let t = n.host.poll_transmit(now, &mut n.tx)?;
            // Hand the buffer itself over (no copy); the next one is a
            // delivered datagram's, emptied, or else fresh.
            let next = spares
                .pop()
                .unwrap_or_else(|| Vec::with_capacity(TX_CAPACITY));
            let mut payload = std::mem::replace(&mut n.tx, next);
            payload.truncate(t.size);
            let mut d = Datagram::new(n.addr, t.destination, payload);
            d.ecn = t.ecn;
            Some(d)
        })
    }

    fn poll_timeout(&mut self) -> Option<Instant> {
        self.timed(|n| n.host.poll_timeout())
    }

    fn handle_timeout(&mut self, now: Instant) {
        self.timed(|n| {
            n.host.handle_timeout(now);
            n.host.drive(now);
        });
    }

    fn is_finished(&self) -> bool {
        self.host.is_finished()
    }
}

/// What the sender's observer learned about the measured connection (the
/// server's first).
#[derive(Clone, Debug, Default)]
pub struct SenderFacts {
    /// The measured connection.
    pub first: Option<ConnectionHandle>,
    /// Its recovery scheme's name.
    pub scheme: Option<String>,
    /// Its counters when it ended (the endpoint forgets drained connections).
    pub final_stats: Option<ConnectionStats>,
}

/// The server side's measurement: subscribes the [`Recorder`] to the first
/// connection as the sender, retires its streams' arrival records when they
/// are acknowledged, and keeps its counters when it ends.
pub struct SenderObserver {
    recorder: Recorder,
    facts: Rc<RefCell<SenderFacts>>,
    qlog: Option<QlogSink>,
}

/// Where a qlog trace is written.
pub type QlogSink = Box<dyn Write + Send>;

/// The title of the traces of simulated runs.
const QLOG_TITLE: &str = "artq sim";

impl SenderObserver {
    /// An observer feeding `recorder`; `facts` is shared with the caller.
    pub fn new(recorder: Recorder, facts: Rc<RefCell<SenderFacts>>) -> SenderObserver {
        SenderObserver {
            recorder,
            facts,
            qlog: None,
        }
    }

    /// Also trace the measured connection as qlog into `sink`.
    pub fn with_qlog(mut self, sink: Option<QlogSink>) -> SenderObserver {
        self.qlog = sink;
        self
    }
}

impl Observer for SenderObserver {
    fn on_connection(&mut self, h: ConnectionHandle, conn: &mut Connection) {
        let mut facts = self.facts.borrow_mut();
        if facts.first.is_none() {
            facts.first = Some(h);
            facts.scheme = Some(conn.recovery_scheme());
            conn.subscribe(self.recorder.sender_subscriber());
            if let Some(sink) = self.qlog.take() {
                conn.subscribe(Box::new(QlogWriter::new(sink, QLOG_TITLE, true)));
            }
        }
    }

    fn on_event(&mut self, h: ConnectionHandle, conn: &mut Connection, event: &Event) {
        let mut facts = self.facts.borrow_mut();
        if facts.first != Some(h) {
            return;
        }
        match event {
            Event::Stream(StreamEvent::Finished { id }) => self.recorder.stream_finished(*id),
            Event::ConnectionLost(_) => facts.final_stats = Some(conn.stats()),
            _ => {}
        }
    }
}

/// The client side's measurement: subscribes the [`Recorder`] to the
/// client's connection as the receiver.
pub struct ReceiverObserver {
    recorder: Recorder,
    qlog: Option<QlogSink>,
}

impl ReceiverObserver {
    /// An observer feeding `recorder`.
    pub fn new(recorder: Recorder) -> ReceiverObserver {
        ReceiverObserver {
            recorder,
            qlog: None,
        }
    }

    /// Also trace the client's (first) connection as qlog into `sink`.
    pub fn with_qlog(mut self, sink: Option<QlogSink>) -> ReceiverObserver {
        self.qlog = sink;
        self
    }
}

impl Observer for ReceiverObserver {
    fn on_connection(&mut self, _h: ConnectionHandle, conn: &mut Connection) {
        conn.subscribe(self.recorder.receiver_subscriber());
        if let Some(sink) = self.qlog.take() {
            conn.subscribe(Box::new(QlogWriter::new(sink, QLOG_TITLE, false)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_configs_are_made_once() {
        let (s1, c1) = tls_configs(Protocol::HqInterop).expect("configs");
        let (s2, c2) = tls_configs(Protocol::HqInterop).expect("configs");
        assert!(Arc::ptr_eq(&s1, &s2) && Arc::ptr_eq(&c1, &c2));
    }
}
