//! The real-time driver: a UDP socket (and one more per preferred address
//! of a server, RFC 9000 §9.6), a real clock, and an [`apps::Host`] (a
//! sans-IO endpoint plus its application). This and the
//! relay are the only places artq reads a clock. The simulator's driver is
//! `lab::QuicNode`; both run the same applications.
//!
//! Loop: fire timers, let the application act, send everything the endpoint
//! has, wait for readability or the next timer (the endpoint's or the
//! application's), read every datagram that is there, repeat; stop when the
//! application is finished, a deadline passes, or after a graceful shutdown.
//!
//! Socket I/O goes through `quinn-udp` (a maintained crate for the solved
//! problem of UDP offloads): consecutive equal-size datagrams to one
//! destination leave in one `sendmsg` with generic segmentation offload, and
//! received datagrams may arrive coalesced (GRO), split here by their stride.
//! Where the kernel lacks either, it falls back to one datagram per call.
//!
//! An edge's origin connections are TCP sockets on the same poll
//! ([`crate::origins`]): after each turn's sends, the driver carries out
//! the application's origin commands, writes and reads them, and drives
//! the application again at once when an origin had news.
//!
//! With several sockets, every datagram read is handed to the endpoint
//! with the address of the socket it came in on, and every datagram goes
//! out of the socket bound to its [`transport::Transmit::source`] (the
//! first socket when that is `None` or not one of ours).

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant as StdInstant};

use apps::Host;
use mio::net::UdpSocket;

use crate::origins::OriginSockets;
use mio::{Events, Interest, Poll, Token};
use wire::ecn::Ecn;
use wire::time::Instant;

/// Kernel socket buffers: large enough for a multi-Gbit/s loopback burst.
const SOCKET_BUFFER: usize = 8 << 20;
/// Largest datagram we read.
const MAX_DATAGRAM: usize = 65_536;
/// Most datagrams batched into one GSO send: also how many a server's
/// endpoint takes from one connection in a row
/// (`EndpointConfig::transmit_burst`), so that such a batch can form when
/// several connections send at once.
pub const MAX_BATCH: usize = 32;
/// Largest GSO send, bytes (the UDP payload limit).
const MAX_BATCH_BYTES: usize = 65_000;

/// Maps the wall clock onto the sans-IO clock (nanoseconds since start).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: StdInstant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Clock {
            start: StdInstant::now(),
        }
    }

    /// The current time.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX))
    }
}

/// How long a graceful shutdown may take before the driver stops anyway.
pub const SHUTDOWN_GRACE: StdDuration = StdDuration::from_secs(2);

/// When [`Driver::run`] stops.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stop<'a> {
    /// Stop as soon as the application is finished (a client's download);
    /// a server keeps serving.
    pub when_finished: bool,
    /// Give up with `TimedOut` at this time.
    pub deadline: Option<StdInstant>,
    /// When this flag becomes true (a signal), shut the application down
    /// gracefully and stop when it is finished or after [`SHUTDOWN_GRACE`].
    pub signal: Option<&'a AtomicBool>,
    /// Stop (`Ok`) as soon as this connection's handshake is over (it is
    /// established, or gone): a client's first phase, bounded by its
    /// handshake timeout.
    pub handshake_of: Option<transport::ConnectionHandle>,
}

/// One bound socket.
struct Socket {
    socket: UdpSocket,
    state: quinn_udp::UdpSocketState,
    /// Its bound address.
    addr: SocketAddr,
}

/// UDP sockets driving a host.
pub struct Driver {
    /// The first is the one bound by [`Driver::bind`]; the others were
    /// added by [`Driver::bind_also`].
    sockets: Vec<Socket>,
    poll: Poll,
    clock: Clock,
    recv_buf: Vec<u8>,
    /// One datagram from the endpoint.
    one: Vec<u8>,
    /// The batch being assembled: equal-size datagrams to one destination
    /// from one socket.
    batch: Vec<u8>,
    batch_dst: Option<SocketAddr>,
    /// Index of the socket the batch leaves from.
    batch_socket: usize,
    /// The ECN codepoint of every datagram of the batch (one per send call).
    batch_ecn: Option<Ecn>,
    batch_segment: usize,
    /// A datagram that did not fit the previous batch (socket index,
    /// destination, ECN, bytes).
    stash: Option<(usize, SocketAddr, Option<Ecn>, Vec<u8>)>,
    /// The batch could not be sent (socket buffer full): retry it first.
    blocked: bool,
    /// The TCP sockets of the application's origin connections (an edge's).
    origins: OriginSockets,
}

impl Driver {
    /// Bind a UDP socket on `addr` with large buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let poll = Poll::new()?;
        let first = open_socket(&poll, addr, Token(0))?;
        let recv_len = MAX_DATAGRAM.max(1500 * first.state.gro_segments());
        Ok(Driver {
            sockets: vec![first],
            poll,
            clock: Clock::new(),
            recv_buf: vec![0; recv_len],
            one: Vec::with_capacity(MAX_DATAGRAM),
            batch: Vec::with_capacity(MAX_DATAGRAM),
            batch_dst: None,
            batch_socket: 0,
            batch_ecn: None,
            batch_segment: 0,
            stash: None,
            blocked: false,
            origins: OriginSockets::default(),
        })
    }

    /// Bind one more socket on `addr` (a server's preferred address):
    /// returns its bound address.
    pub fn bind_also(&mut self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let s = open_socket(&self.poll, addr, Token(self.sockets.len()))?;
        let bound = s.addr;
        let recv_len = MAX_DATAGRAM.max(1500 * s.state.gro_segments());
        if self.recv_buf.len() < recv_len {
            self.recv_buf.resize(recv_len, 0);
        }
        self.sockets.push(s);
        Ok(bound)
    }

    /// The first socket's bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        Ok(self.sockets[0].addr)
    }

    /// The driver's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Runs `host` until its application is finished (`Ok`, if `stop`
    /// says so), `stop`'s deadline passes (`Err(TimedOut)`), or a graceful
    /// shutdown that `stop`'s signal asked for is over (`Ok`: every
    /// connection closed, or [`SHUTDOWN_GRACE`] passed).
    pub fn run(&mut self, host: &mut Host, stop: Stop<'_>) -> io::Result<()> {
        let mut events = Events::with_capacity(64);
        let mut shutdown_by: Option<StdInstant> = None;
        let mut had_connections = false;
        loop {
            let now = self.clock.now();
            host.handle_timeout(now);
            host.drive(now);
            let sent_all = self.flush(host)?;
            let origin_news = match host.origin_io() {
                Some(io) => self.origins.step(&self.poll, io),
                None => false,
            };
            // The last connection is gone: a long-running server hands what
            // its clients made it allocate back to the OS.
            let busy = !host.endpoint().is_empty();
            if had_connections && !busy {
                release_free_memory();
            }
            had_connections = busy;
            if stop.when_finished && host.is_finished() {
                return Ok(());
            }
            if let Some(h) = stop.handshake_of {
                if host
                    .endpoint()
                    .connection(h)
                    .is_none_or(|c| !c.is_handshaking())
                {
                    return Ok(());
                }
            }
            if let Some(by) = shutdown_by {
                let ep = host.endpoint();
                let all_closed = ep
                    .handles()
                    .into_iter()
                    .all(|h| ep.connection(h).is_none_or(|c| c.is_closed()));
                if all_closed || StdInstant::now() >= by {
                    return Ok(());
                }
            }
            if shutdown_by.is_none() && stop.signal.is_some_and(|s| s.load(Ordering::Relaxed)) {
                host.shutdown(now);
                shutdown_by = Some(StdInstant::now() + SHUTDOWN_GRACE);
                continue;
            }
            if stop.deadline.is_some_and(|d| StdInstant::now() >= d) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
            }
            let now = self.clock.now();
            let mut timeout = host
                .poll_timeout()
                .map(|t| StdDuration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos())))
                .unwrap_or(StdDuration::from_millis(100))
                .min(StdDuration::from_millis(100));
            if !sent_all {
                timeout = timeout.min(StdDuration::from_micros(200));
            }
            if origin_news {
                timeout = StdDuration::ZERO;
            }
            if let Some(d) = stop.deadline {
                timeout = timeout.min(d.saturating_duration_since(StdInstant::now()));
            }
            self.poll.poll(&mut events, Some(timeout)).or_else(|e| {
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
            for event in events.iter() {
                if OriginSockets::owns(event.token()) {
                    self.origins.on_event(event);
                }
            }
            self.receive_all(host)?;
        }
    }

    /// Read every datagram waiting on every socket.
    fn receive_all(&mut self, host: &mut Host) -> io::Result<()> {
        for i in 0..self.sockets.len() {
            self.receive_on(i, host)?;
        }
        Ok(())
    }

    /// Read every datagram waiting on socket `i` (GRO: one read may carry
    /// several, `stride` bytes apart). The endpoint learns which socket
    /// only when there are several.
    fn receive_on(&mut self, i: usize, host: &mut Host) -> io::Result<()> {
        let to = (self.sockets.len() > 1).then(|| self.sockets[i].addr);
        loop {
            let mut meta = [quinn_udp::RecvMeta::default()];
            let result = {
                let mut bufs = [IoSliceMut::new(&mut self.recv_buf)];
                let s = &self.sockets[i];
                s.state.recv((&s.socket).into(), &mut bufs, &mut meta)
            };
            match result {
                Ok(n) if n > 0 => {
                    let m = meta[0];
                    let now = self.clock.now();
                    let len = m.len.min(self.recv_buf.len());
                    let stride = if m.stride == 0 { len } else { m.stride };
                    let mut start = 0;
                    while start < len {
                        let end = (start + stride).min(len);
                        host.handle_datagram(
                            now,
                            to,
                            m.addr,
                            m.ecn.map(netem::ecn_from_udp),
                            &mut self.recv_buf[start..end],
                        );
                        start = end;
                    }
                }
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ICMP errors (port unreachable) surface here on some systems.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Send the assembled batch. False if the socket buffer is full (the
    /// batch stays and goes first next time).
    fn send_batch(&mut self) -> bool {
        let Some(dst) = self.batch_dst else {
            return true;
        };
        let segments = self.batch.len().div_ceil(self.batch_segment.max(1));
        let transmit = quinn_udp::Transmit {
            destination: dst,
            ecn: self.batch_ecn.map(netem::ecn_to_udp),
            contents: &self.batch,
            segment_size: (segments > 1).then_some(self.batch_segment),
            src_ip: None,
        };
        let s = &self.sockets[self.batch_socket];
        match s.state.send((&s.socket).into(), &transmit) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                self.blocked = true;
                false
            }
            // Other errors were logged by quinn-udp: a datagram the network
            // refuses is a lost datagram.
            _ => {
                self.blocked = false;
                self.batch.clear();
                self.batch_dst = None;
                true
            }
        }
    }

    /// Send what the endpoint has, batching equal-size datagrams to one
    /// destination. False if the socket buffer filled up.
    fn flush(&mut self, host: &mut Host) -> io::Result<bool> {
        if self.blocked && !self.send_batch() {
            return Ok(false);
        }
        // Interleave reads so a fast sender does not starve its own ACK input.
        let mut budget = 64;
        loop {
            let (socket, dst, ecn, size) = match self.stash.take() {
                Some((socket, dst, ecn, data)) => {
                    self.one.clear();
                    self.one.extend_from_slice(&data);
                    (socket, dst, ecn, data.len())
                }
                None => {
                    let now = self.clock.now();
                    match host.poll_transmit(now, &mut self.one) {
                        Some(t) => (self.socket_for(t.source), t.destination, t.ecn, t.size),
                        None => return Ok(self.send_batch()),
                    }
                }
            };
            let max_segments = self.sockets[socket]
                .state
                .max_gso_segments()
                .clamp(1, MAX_BATCH);
            let fits = self.batch_dst == Some(dst)
                && self.batch_socket == socket
                && self.batch_ecn == ecn
                && size <= self.batch_segment
                && self.batch.len() % self.batch_segment.max(1) == 0
                && self.batch.len() + size <= MAX_BATCH_BYTES
                && self.batch.len() / self.batch_segment.max(1) < max_segments;
            if !fits && self.batch_dst.is_some() {
                // Send the current batch, then start a new one with this.
                self.stash = Some((socket, dst, ecn, self.one[..size].to_vec()));
                if !self.send_batch() {
                    return Ok(false);
                }
                budget -= 1;
                if budget == 0 {
                    budget = 64;
                    self.receive_all(host)?;
                }
                continue;
            }
            if self.batch_dst.is_none() {
                self.batch_dst = Some(dst);
                self.batch_socket = socket;
                self.batch_ecn = ecn;
                self.batch_segment = size;
            }
            self.batch.extend_from_slice(&self.one[..size]);
        }
    }
}

impl Driver {
    /// The socket to send from for a datagram whose source is `source`.
    fn socket_for(&self, source: Option<SocketAddr>) -> usize {
        source
            .and_then(|a| self.sockets.iter().position(|s| s.addr == a))
            .unwrap_or(0)
    }
}

/// A non-blocking UDP socket bound to `addr` with large buffers,
/// registered with `poll` under `token`.
fn open_socket(poll: &Poll, addr: SocketAddr, token: Token) -> io::Result<Socket> {
    let domain = socket2::Domain::for_address(addr);
    let sock = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    // Best effort: the kernel may clamp these.
    let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    let mut socket = UdpSocket::from_std(sock.into());
    let state = quinn_udp::UdpSocketState::new((&socket).into())?;
    poll.registry()
        .register(&mut socket, token, Interest::READABLE)?;
    let addr = socket.local_addr()?;
    Ok(Socket {
        socket,
        state,
        addr,
    })
}

/// Returns freed heap memory to the operating system. glibc keeps memory a
/// burst of connections freed whenever anything still lives above it in the
/// heap, so without this a server's resident size stays at its peak after
/// the clients have gone.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn release_free_memory() {
    // SAFETY: malloc_trim takes no pointer from us; it only walks glibc's
    // own heap bookkeeping under the allocator's locks, and may be called
    // at any time from any thread (glibc documents it as MT-Safe).
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Elsewhere the allocator decides when memory goes back.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn release_free_memory() {}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
