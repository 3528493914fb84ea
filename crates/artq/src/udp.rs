//! The real-time driver: one UDP socket, a real clock, and a sans-IO
//! [`Endpoint`]. This and the relay are the only places artq reads a clock.
//!
//! Loop: send everything the endpoint has, wait for readability or the next
//! timer, read every datagram that is there, fire timers, let the
//! application act, repeat.
//!
//! Socket I/O goes through `quinn-udp` (a maintained crate for the solved
//! problem of UDP offloads): consecutive equal-size datagrams to one
//! destination leave in one `sendmsg` with generic segmentation offload, and
//! received datagrams may arrive coalesced (GRO), split here by their stride.
//! Where the kernel lacks either, it falls back to one datagram per call.

use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use mio::net::UdpSocket;
use mio::{Events, Interest, Poll, Token};
use transport::Endpoint;
use wire::time::Instant;

const SOCKET: Token = Token(0);
/// Kernel socket buffers: large enough for a multi-Gbit/s loopback burst.
const SOCKET_BUFFER: usize = 8 << 20;
/// Largest datagram we read.
const MAX_DATAGRAM: usize = 65_536;
/// Most datagrams batched into one GSO send.
const MAX_BATCH: usize = 32;
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

/// What the application tells the driver after each turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// Stop the loop (after flushing what is queued).
    Stop,
}

/// Application logic run by the driver on every turn of the loop.
pub trait App {
    /// Act on the endpoint's connections (read events, move stream data).
    fn on_turn(&mut self, now: Instant, endpoint: &mut Endpoint) -> Flow;
}

/// A UDP socket driving an endpoint.
pub struct Driver {
    socket: UdpSocket,
    state: quinn_udp::UdpSocketState,
    poll: Poll,
    clock: Clock,
    recv_buf: Vec<u8>,
    /// One datagram from the endpoint.
    one: Vec<u8>,
    /// The batch being assembled: equal-size datagrams to one destination.
    batch: Vec<u8>,
    batch_dst: Option<SocketAddr>,
    batch_segment: usize,
    /// A datagram that did not fit the previous batch.
    stash: Option<(SocketAddr, Vec<u8>)>,
    /// The batch could not be sent (socket buffer full): retry it first.
    blocked: bool,
}

impl Driver {
    /// Bind a UDP socket on `addr` with large buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let domain = socket2::Domain::for_address(addr);
        let sock =
            socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        // Best effort: the kernel may clamp these.
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
        sock.set_nonblocking(true)?;
        sock.bind(&addr.into())?;
        let mut socket = UdpSocket::from_std(sock.into());
        let state = quinn_udp::UdpSocketState::new((&socket).into())?;
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut socket, SOCKET, Interest::READABLE)?;
        let recv_len = MAX_DATAGRAM.max(1500 * state.gro_segments());
        Ok(Driver {
            socket,
            state,
            poll,
            clock: Clock::new(),
            recv_buf: vec![0; recv_len],
            one: Vec::with_capacity(MAX_DATAGRAM),
            batch: Vec::with_capacity(MAX_DATAGRAM),
            batch_dst: None,
            batch_segment: 0,
            stash: None,
            blocked: false,
        })
    }

    /// The bound address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// The driver's clock.
    pub fn clock(&self) -> Clock {
        self.clock
    }

    /// Run until the application says stop or `deadline` (if any) passes.
    pub fn run(
        &mut self,
        endpoint: &mut Endpoint,
        app: &mut dyn App,
        deadline: Option<StdInstant>,
    ) -> io::Result<()> {
        let mut events = Events::with_capacity(64);
        loop {
            let now = self.clock.now();
            endpoint.handle_timeout(now);
            let flow = app.on_turn(now, endpoint);
            let sent_all = self.flush(endpoint)?;
            if flow == Flow::Stop {
                return Ok(());
            }
            if deadline.is_some_and(|d| StdInstant::now() >= d) {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "deadline passed"));
            }
            let now = self.clock.now();
            let mut timeout = endpoint
                .poll_timeout()
                .map(|t| StdDuration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos())))
                .unwrap_or(StdDuration::from_millis(100))
                .min(StdDuration::from_millis(100));
            if !sent_all {
                timeout = timeout.min(StdDuration::from_micros(200));
            }
            if let Some(d) = deadline {
                timeout = timeout.min(d.saturating_duration_since(StdInstant::now()));
            }
            self.poll.poll(&mut events, Some(timeout)).or_else(|e| {
                if e.kind() == io::ErrorKind::Interrupted {
                    Ok(())
                } else {
                    Err(e)
                }
            })?;
            self.receive_all(endpoint)?;
        }
    }

    /// Read every datagram waiting on the socket (GRO: one read may carry
    /// several, `stride` bytes apart).
    fn receive_all(&mut self, endpoint: &mut Endpoint) -> io::Result<()> {
        loop {
            let mut meta = [quinn_udp::RecvMeta::default()];
            let result = {
                let mut bufs = [IoSliceMut::new(&mut self.recv_buf)];
                self.state.recv((&self.socket).into(), &mut bufs, &mut meta)
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
                        endpoint.handle_datagram(now, m.addr, &mut self.recv_buf[start..end]);
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
            ecn: None,
            contents: &self.batch,
            segment_size: (segments > 1).then_some(self.batch_segment),
            src_ip: None,
        };
        match self.state.send((&self.socket).into(), &transmit) {
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
    fn flush(&mut self, endpoint: &mut Endpoint) -> io::Result<bool> {
        if self.blocked && !self.send_batch() {
            return Ok(false);
        }
        let max_segments = self.state.max_gso_segments().clamp(1, MAX_BATCH);
        // Interleave reads so a fast sender does not starve its own ACK input.
        let mut budget = 64;
        loop {
            let (dst, size) = match self.stash.take() {
                Some((dst, data)) => {
                    self.one.clear();
                    self.one.extend_from_slice(&data);
                    (dst, data.len())
                }
                None => {
                    let now = self.clock.now();
                    match endpoint.poll_transmit(now, &mut self.one) {
                        Some(t) => (t.destination, t.size),
                        None => return Ok(self.send_batch()),
                    }
                }
            };
            let fits = self.batch_dst == Some(dst)
                && size <= self.batch_segment
                && self.batch.len() % self.batch_segment.max(1) == 0
                && self.batch.len() + size <= MAX_BATCH_BYTES
                && self.batch.len() / self.batch_segment.max(1) < max_segments;
            if !fits && self.batch_dst.is_some() {
                // Send the current batch, then start a new one with this.
                self.stash = Some((dst, self.one[..size].to_vec()));
                if !self.send_batch() {
                    return Ok(false);
                }
                budget -= 1;
                if budget == 0 {
                    budget = 64;
                    self.receive_all(endpoint)?;
                }
                continue;
            }
            if self.batch_dst.is_none() {
                self.batch_dst = Some(dst);
                self.batch_segment = size;
            }
            self.batch.extend_from_slice(&self.one[..size]);
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
