//! The real-time UDP relay: the same [`Link`] models, on real sockets.
//!
//! This is the only module of the crate with sockets and a real clock. A
//! relay listens on `listen`; whoever sends to it is the client (a new source
//! address replaces the previous client, as a NAT rebinding would). Client
//! datagrams cross the `up` link and leave from the relay's own ephemeral
//! socket towards `to`; datagrams from `to` cross the `down` link back to
//! the current client. Datagrams reaching the upstream socket from anyone but
//! `to` are ignored (counted).
//!
//! Time: `std::time::Instant` is mapped onto [`wire::time::Instant`] as
//! nanoseconds since the relay started, so traces start in phase with the
//! relay. Each socket has a reader thread that blocks in `recv_from` and
//! timestamps a datagram the moment it arrives; the link thread owns both
//! links, waits on a channel until the earlier of the next datagram and the
//! links' next event (futex precision, tens of microseconds), and sends what
//! the links deliver. Departure times are computed by the models, so a late
//! wake-up delays one datagram a little but never shifts the rate.
//!
//! NAT rebinding ([`RelayConfig::rebind`]): every interval the relay moves
//! its upstream side to a fresh socket, with a new port (and, for an
//! address rebinding, a new loopback address 127.0.0.2, .3, ... when the
//! server is on loopback), as a NAT that forgot its binding would. The old
//! socket is closed: what the server still sends there is lost (counted as
//! `stale`), exactly what a server that does not follow its client's new
//! address (RFC 9000 §9) would suffer.
//!
//! ECN: the sockets read and write the ECN codepoint of every datagram
//! (through quinn-udp), so an ECN-capable sender's ECT marks cross the
//! links, and a link with a CE threshold marks them as the simulator's do.
//!
//! Seeds: the uplink uses `derive_seed(seed, "link/up")`, the downlink
//! `derive_seed(seed, "link/down")` (see [`crate::seed`]).
//!
//! Capture: with [`RelayConfig::pcap`] set, the link thread records the
//! server's side of the link in a pcap file ([`crate::pcap`]): each client
//! datagram as it is sent to the server (after the up link: lost ones are
//! absent, corrupted ones damaged), from the relay's upstream address, and
//! each server datagram as it arrives (before the down link). Timestamps
//! count from the relay's start, the clock of blackhole windows. The file is
//! flushed before every wait of the link thread, so a relay killed at any
//! moment leaves a capture complete but for the datagrams of that moment; a failed write stops the relay
//! with the error.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};

use serde::{Deserialize, Serialize};
use wire::time::{Duration, Instant};

use crate::link::{Datagram, Ecn, Link, LinkConfig, LinkStats};
use crate::pcap;
use crate::seed::{derive_seed, LINK_DOWN, LINK_UP};

/// How long a reader blocks before checking whether to stop.
const READ_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(20);
/// Longest the link thread waits before checking whether to stop.
const IDLE_WAIT: Duration = Duration::from_millis(20);
/// Largest UDP payload.
const MAX_DATAGRAM: usize = 65_536;

/// What the relay does: where it listens, where it forwards, and the two
/// link directions in between.
///
/// Exists for `artq link` and tests: put any UDP program behind an emulated
/// link in real time.
#[derive(Clone, Debug, PartialEq)]
pub struct RelayConfig {
    /// Address clients send to.
    pub listen: SocketAddr,
    /// The server every client datagram is forwarded to.
    pub to: SocketAddr,
    /// Client-to-server direction.
    pub up: LinkConfig,
    /// Server-to-client direction.
    pub down: LinkConfig,
    /// Master seed of both directions' random stages.
    pub seed: u64,
    /// Record the server's side of the link in this pcap file (see the
    /// module doc); `None`: no capture.
    pub pcap: Option<PathBuf>,
    /// Rebind the upstream side periodically, as a NAT would (see the
    /// module doc); `None`: never.
    pub rebind: Option<Rebind>,
}

/// A NAT rebinding the relay simulates: what changes, and how often.
///
/// Exists for the interop runner's `rebind-port` and `rebind-addr` cases:
/// a server must follow its client to the new address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebind {
    /// Time between rebindings (the first one `every` after the start).
    pub every: Duration,
    /// Change the IP address too, not only the port (loopback servers
    /// only: the relay walks 127.0.0.2, 127.0.0.3, ...).
    pub address: bool,
}

/// Counters of a relay run.
///
/// Exists so `artq link` can report what the emulated link did, and tests can
/// check it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct RelayStats {
    /// Client-to-server link.
    pub up: LinkStats,
    /// Server-to-client link.
    pub down: LinkStats,
    /// Times a new client address replaced the previous one.
    pub client_changes: u64,
    /// Datagrams on the upstream socket from someone other than `to`.
    pub ignored: u64,
    /// Downlink datagrams dropped because no client was known yet.
    pub no_client: u64,
    /// Datagrams the OS refused to send.
    pub send_errors: u64,
    /// Times the upstream side moved to a new socket ([`Rebind`]).
    pub rebinds: u64,
    /// Server datagrams that reached an upstream socket already replaced
    /// by a rebinding (lost, as at a NAT that forgot the binding).
    pub stale: u64,
}

/// Runs a relay on the calling thread until `stop` is set (checked at least
/// every 20 ms), then returns its counters.
///
/// Errors: binding a socket, or a socket failing in a way that is not
/// transient (timeouts, interrupts and ICMP-induced refusals are transient).
pub fn run(config: RelayConfig, stop: Arc<AtomicBool>) -> io::Result<RelayStats> {
    Relay::bind(config)?.run(&stop)
}

/// Binds a relay and runs it on its own thread.
///
/// Exists for tests and `artq link`: the sockets are bound before this
/// returns, so [`RelayHandle::local_addr`] is usable at once.
pub fn spawn(config: RelayConfig) -> io::Result<RelayHandle> {
    let relay = Relay::bind(config)?;
    let local_addr = relay.client_sock.local_addr()?;
    let upstream_addr = relay.server_sock.local_addr()?;
    let stop = Arc::new(AtomicBool::new(false));
    let thread_stop = Arc::clone(&stop);
    let thread = thread::Builder::new()
        .name("netem-relay".to_string())
        .spawn(move || relay.run(&thread_stop))?;
    Ok(RelayHandle {
        local_addr,
        upstream_addr,
        stop,
        thread: Some(thread),
    })
}

/// A relay running on its own thread; stopping (or dropping) it joins the
/// thread.
#[derive(Debug)]
pub struct RelayHandle {
    local_addr: SocketAddr,
    upstream_addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<io::Result<RelayStats>>>,
}

impl RelayHandle {
    /// The address clients send to (`listen`, with the actual port if it
    /// was 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The relay's own address towards the server.
    pub fn upstream_addr(&self) -> SocketAddr {
        self.upstream_addr
    }

    /// Stops the relay, waits for its thread and returns its counters.
    pub fn stop(mut self) -> io::Result<RelayStats> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> io::Result<RelayStats> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take() {
            None => Err(io::Error::other("relay already stopped")),
            Some(thread) => thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("relay thread panicked"))),
        }
    }
}

impl Drop for RelayHandle {
    fn drop(&mut self) {
        if self.thread.is_some() {
            let _ = self.stop_and_join();
        }
    }
}

/// Which socket a datagram came in on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Client,
    Server,
}

/// What reader threads tell the link thread.
enum Msg {
    Datagram {
        side: Side,
        /// Which upstream socket (0, then one more per rebinding); 0 for
        /// the client side.
        generation: u64,
        from: SocketAddr,
        /// The ECN codepoint it arrived with.
        ecn: Option<Ecn>,
        payload: Vec<u8>,
        at: Instant,
    },
    Failed(io::Error),
}

/// Bound sockets (and the capture file), ready to run.
struct Relay {
    config: RelayConfig,
    client_sock: UdpSocket,
    server_sock: UdpSocket,
    /// What quinn-udp knows of each socket (for sending with ECN).
    client_state: quinn_udp::UdpSocketState,
    server_state: quinn_udp::UdpSocketState,
    capture: Option<Capture>,
}

/// The open capture file of a relay.
struct Capture {
    out: BufWriter<File>,
    /// Records written since the last flush.
    dirty: bool,
}

impl Capture {
    /// Creates `path` and writes the pcap header.
    fn create(path: &PathBuf) -> io::Result<Capture> {
        let file = File::create(path).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", path.display()))
        })?;
        let mut out = BufWriter::new(file);
        pcap::write_header(&mut out)?;
        out.flush()?;
        Ok(Capture { out, dirty: false })
    }

    /// Records one datagram.
    fn record(
        &mut self,
        at: Instant,
        src: SocketAddr,
        dst: SocketAddr,
        payload: &[u8],
    ) -> io::Result<()> {
        self.dirty = true;
        pcap::write_record(&mut self.out, at.since_epoch(), src, dst, payload)
    }

    /// Flushes what was recorded since the last flush.
    fn flush(&mut self) -> io::Result<()> {
        if self.dirty {
            self.dirty = false;
            self.out.flush()?;
        }
        Ok(())
    }
}

impl Relay {
    fn bind(config: RelayConfig) -> io::Result<Relay> {
        let client_sock = UdpSocket::bind(config.listen)?;
        // Same family as the server; loopback if the server is local (tests
        // never bind beyond 127.0.0.1), otherwise any interface.
        let ip = match (config.to, config.to.ip().is_loopback()) {
            (SocketAddr::V4(_), true) => Ipv4Addr::LOCALHOST.into(),
            (SocketAddr::V4(_), false) => Ipv4Addr::UNSPECIFIED.into(),
            (SocketAddr::V6(_), true) => Ipv6Addr::LOCALHOST.into(),
            (SocketAddr::V6(_), false) => Ipv6Addr::UNSPECIFIED.into(),
        };
        let server_sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        let capture = config.pcap.as_ref().map(Capture::create).transpose()?;
        let client_state = udp_state(&client_sock)?;
        let server_state = udp_state(&server_sock)?;
        Ok(Relay {
            config,
            client_sock,
            server_sock,
            client_state,
            server_state,
            capture,
        })
    }

    #[allow(
        clippy::disallowed_methods,
        reason = "the real-time relay forwards live UDP datagrams: its clock is the wall clock"
    )]
    fn run(mut self, stop: &Arc<AtomicBool>) -> io::Result<RelayStats> {
        let start = std::time::Instant::now();
        let (tx, rx) = mpsc::channel();
        let mut readers = Readers {
            start,
            tx,
            stop: Arc::clone(stop),
            running: Vec::with_capacity(2),
        };
        let result = readers
            .spawn(&self.client_sock, Side::Client, 0)
            .and_then(|()| readers.spawn(&self.server_sock, Side::Server, 0))
            .and_then(|()| self.forward_loop(start, stop, &rx, &mut readers));
        readers.quit_all();
        result
    }

    /// The link thread: feeds arrivals into the links and sends what they
    /// deliver, on time.
    fn forward_loop(
        &mut self,
        start: std::time::Instant,
        stop: &AtomicBool,
        rx: &Receiver<Msg>,
        readers: &mut Readers,
    ) -> io::Result<RelayStats> {
        let to = self.config.to;
        let mut upstream = self.server_sock.local_addr()?;
        let mut generation = 0u64;
        let mut next_rebind = self.config.rebind.map(|r| Instant::ZERO + r.every);
        let mut up = Link::new(
            self.config.up.clone(),
            derive_seed(self.config.seed, LINK_UP),
        );
        let mut down = Link::new(
            self.config.down.clone(),
            derive_seed(self.config.seed, LINK_DOWN),
        );
        let mut client: Option<SocketAddr> = None;
        let mut stats = RelayStats::default();
        while !stop.load(Ordering::Relaxed) {
            let now = elapsed(start);
            if let (Some(at), Some(rebind)) = (next_rebind, self.config.rebind) {
                if now >= at {
                    generation += 1;
                    let ip = rebind_ip(upstream, to, rebind.address, generation);
                    let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
                    // The old socket's reader stops within READ_TIMEOUT; its
                    // last datagrams are stale.
                    readers.retire(Side::Server);
                    readers.spawn(&sock, Side::Server, generation)?;
                    self.server_state = udp_state(&sock)?;
                    self.server_sock = sock;
                    upstream = self.server_sock.local_addr()?;
                    stats.rebinds = stats.rebinds.saturating_add(1);
                    next_rebind = Some(at + rebind.every);
                }
            }
            while let Some(d) = up.poll_deliver(now) {
                if let Some(c) = &mut self.capture {
                    c.record(now, upstream, to, &d.payload)?;
                }
                if send(&self.server_state, &self.server_sock, &d, to).is_err() {
                    stats.send_errors = stats.send_errors.saturating_add(1);
                }
            }
            while let Some(d) = down.poll_deliver(now) {
                match client {
                    Some(c) => {
                        if send(&self.client_state, &self.client_sock, &d, c).is_err() {
                            stats.send_errors = stats.send_errors.saturating_add(1);
                        }
                    }
                    None => stats.no_client = stats.no_client.saturating_add(1),
                }
            }
            let next = [up.next_event(), down.next_event(), next_rebind]
                .into_iter()
                .flatten()
                .min();
            let wait = next.map_or(IDLE_WAIT, |t| {
                t.saturating_duration_since(now).min(IDLE_WAIT)
            });
            if let Some(c) = &mut self.capture {
                c.flush()?;
            }
            let mut msg = match rx.recv_timeout(wait) {
                Ok(msg) => Some(msg),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => break,
            };
            while let Some(m) = msg {
                match m {
                    Msg::Failed(e) => return Err(e),
                    Msg::Datagram {
                        side: Side::Client,
                        from,
                        ecn,
                        payload,
                        at,
                        ..
                    } => {
                        if client.is_some_and(|c| c != from) {
                            stats.client_changes = stats.client_changes.saturating_add(1);
                        }
                        client = Some(from);
                        let mut d = Datagram::new(from, to, payload);
                        d.ecn = ecn;
                        up.send(at, d);
                    }
                    Msg::Datagram {
                        side: Side::Server,
                        generation: g,
                        ..
                    } if g != generation => {
                        stats.stale = stats.stale.saturating_add(1);
                    }
                    Msg::Datagram {
                        side: Side::Server,
                        from,
                        ecn,
                        payload,
                        at,
                        ..
                    } => {
                        if from == to {
                            if let Some(c) = &mut self.capture {
                                c.record(at, to, upstream, &payload)?;
                            }
                            let dst = client.unwrap_or(self.config.listen);
                            let mut d = Datagram::new(to, dst, payload);
                            d.ecn = ecn;
                            down.send(at, d);
                        } else {
                            stats.ignored = stats.ignored.saturating_add(1);
                        }
                    }
                }
                msg = rx.try_recv().ok();
            }
        }
        stats.up = up.stats();
        stats.down = down.stats();
        Ok(stats)
    }
}

/// The relay's reader threads: one per socket, each with its own quit
/// flag so that a rebinding can retire the old upstream socket's reader.
struct Readers {
    start: std::time::Instant,
    tx: Sender<Msg>,
    stop: Arc<AtomicBool>,
    running: Vec<(Side, Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Readers {
    /// Starts a reader of (a clone of) `sock`, tagging its datagrams with
    /// `side` and `generation`.
    fn spawn(&mut self, sock: &UdpSocket, side: Side, generation: u64) -> io::Result<()> {
        let sock = sock.try_clone()?;
        sock.set_read_timeout(Some(READ_TIMEOUT))?;
        let quit = Arc::new(AtomicBool::new(false));
        let (tx, stop, reader_quit) = (self.tx.clone(), Arc::clone(&self.stop), Arc::clone(&quit));
        let start = self.start;
        let handle = thread::Builder::new()
            .name(format!("netem-relay-{side:?}").to_lowercase())
            .spawn(move || read_loop(&sock, side, generation, start, &tx, &stop, &reader_quit))?;
        self.running.push((side, quit, handle));
        Ok(())
    }

    /// Tells the readers of `side` to stop (they exit within
    /// READ_TIMEOUT, closing their socket clones) and forgets them.
    fn retire(&mut self, side: Side) {
        let (retired, kept): (Vec<_>, Vec<_>) =
            self.running.drain(..).partition(|(s, _, _)| *s == side);
        self.running = kept;
        for (_, quit, handle) in retired {
            quit.store(true, Ordering::Relaxed);
            // Not joined here: the link thread must not wait on a read
            // timeout. The thread ends by itself.
            drop(handle);
        }
    }

    /// Stops every reader and waits for them.
    fn quit_all(&mut self) {
        for (_, quit, _) in &self.running {
            quit.store(true, Ordering::Relaxed);
        }
        for (_, _, handle) in self.running.drain(..) {
            // A reader that panicked has nothing more to say.
            let _ = handle.join();
        }
    }
}

/// The address of the upstream socket after rebinding `generation`: the
/// same IP for a port rebinding; for an address rebinding of a loopback
/// IPv4 path, 127.0.0.(1 + generation) (wrapping within 127.0.0.2..=254);
/// elsewhere the same IP (no other address is known to exist).
fn rebind_ip(
    current: SocketAddr,
    to: SocketAddr,
    address: bool,
    generation: u64,
) -> std::net::IpAddr {
    match (address, to) {
        (true, SocketAddr::V4(v4)) if v4.ip().is_loopback() => {
            let host = 2 + (generation.saturating_sub(1) % 253) as u8;
            Ipv4Addr::new(127, 0, 0, host).into()
        }
        _ => current.ip(),
    }
}

/// quinn-udp's view of `sock` (ECN reception on, GRO if the OS has it),
/// leaving the socket blocking: quinn-udp makes it non-blocking, which
/// would turn the readers' timed blocking reads into a busy loop (the flag
/// is shared by every clone of the socket).
fn udp_state(sock: &UdpSocket) -> io::Result<quinn_udp::UdpSocketState> {
    let state = quinn_udp::UdpSocketState::new(sock.into())?;
    sock.set_nonblocking(false)?;
    Ok(state)
}

/// Sends `d`'s payload to `dst` with its ECN codepoint.
fn send(
    state: &quinn_udp::UdpSocketState,
    sock: &UdpSocket,
    d: &Datagram,
    dst: SocketAddr,
) -> io::Result<()> {
    let transmit = quinn_udp::Transmit {
        destination: dst,
        ecn: d.ecn.map(ecn_to_udp),
        contents: &d.payload,
        segment_size: None,
        src_ip: None,
    };
    state.send(sock.into(), &transmit)
}

/// A transport ECN codepoint as quinn-udp's sockets take it (the relay's
/// and `artq`'s UDP driver's one conversion).
pub fn ecn_to_udp(e: Ecn) -> quinn_udp::EcnCodepoint {
    match e {
        Ecn::Ect0 => quinn_udp::EcnCodepoint::Ect0,
        Ecn::Ect1 => quinn_udp::EcnCodepoint::Ect1,
        Ecn::Ce => quinn_udp::EcnCodepoint::Ce,
    }
}

/// The codepoint quinn-udp read from a socket, as the transport names it.
pub fn ecn_from_udp(e: quinn_udp::EcnCodepoint) -> Ecn {
    match e {
        quinn_udp::EcnCodepoint::Ect0 => Ecn::Ect0,
        quinn_udp::EcnCodepoint::Ect1 => Ecn::Ect1,
        quinn_udp::EcnCodepoint::Ce => Ecn::Ce,
    }
}

/// A reader thread: timestamps and forwards every datagram of `sock`.
fn read_loop(
    sock: &UdpSocket,
    side: Side,
    generation: u64,
    start: std::time::Instant,
    tx: &Sender<Msg>,
    stop: &AtomicBool,
    quit: &AtomicBool,
) {
    let mut buf = vec![0u8; MAX_DATAGRAM];
    // Asks the OS for each datagram's ECN codepoint (IP_RECVTOS).
    let state = match udp_state(sock) {
        Ok(s) => s,
        Err(e) => {
            let _ = tx.send(Msg::Failed(e));
            return;
        }
    };
    while !stop.load(Ordering::Relaxed) && !quit.load(Ordering::Relaxed) {
        let mut meta = [quinn_udp::RecvMeta::default()];
        let result = {
            let mut bufs = [io::IoSliceMut::new(&mut buf)];
            state.recv(sock.into(), &mut bufs, &mut meta)
        };
        match result {
            Ok(0) => {}
            Ok(_) => {
                let m = meta[0];
                let at = elapsed(start);
                // With GRO one read may carry several datagrams, `stride`
                // bytes apart.
                let len = m.len.min(buf.len());
                let stride = if m.stride == 0 { len } else { m.stride };
                let mut first = 0;
                while first < len {
                    let end = (first + stride).min(len);
                    let msg = Msg::Datagram {
                        side,
                        generation,
                        from: m.addr,
                        ecn: m.ecn.map(ecn_from_udp),
                        payload: buf[first..end].to_vec(),
                        at,
                    };
                    if tx.send(msg).is_err() {
                        return;
                    }
                    first = end;
                }
            }
            Err(e) if is_transient(&e) => {}
            Err(e) => {
                let _ = tx.send(Msg::Failed(e));
                return;
            }
        }
    }
}

/// Errors a relay shrugs off: timeouts (our stop check), signals, and the
/// refusals some OSes report on UDP after an ICMP port unreachable.
fn is_transient(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock
            | io::ErrorKind::TimedOut
            | io::ErrorKind::Interrupted
            | io::ErrorKind::ConnectionRefused
            | io::ErrorKind::ConnectionReset
    )
}

/// The relay's clock: ns since `start`.
fn elapsed(start: std::time::Instant) -> Instant {
    Instant::from_nanos(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests;
