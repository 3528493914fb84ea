//! The real-time driver: one UDP socket, a real clock, and a sans-IO
//! [`Endpoint`]. This and the relay are the only places artq reads a clock.
//!
//! Loop: send everything the endpoint has, wait for readability or the next
//! timer, read every datagram that is there, fire timers, let the
//! application act, repeat.

use std::io;
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

/// Maps the wall clock onto the sans-IO clock (nanoseconds since start).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: StdInstant,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Clock { start: StdInstant::now() }
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
    poll: Poll,
    clock: Clock,
    recv_buf: Vec<u8>,
    send_buf: Vec<u8>,
    blocked_send: Option<(SocketAddr, usize)>,
}

impl Driver {
    /// Bind a UDP socket on `addr` with large buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        let domain = socket2::Domain::for_address(addr);
        let sock = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
        // Best effort: the kernel may clamp these.
        let _ = sock.set_recv_buffer_size(SOCKET_BUFFER);
        let _ = sock.set_send_buffer_size(SOCKET_BUFFER);
        sock.set_nonblocking(true)?;
        sock.bind(&addr.into())?;
        let mut socket = UdpSocket::from_std(sock.into());
        let poll = Poll::new()?;
        poll.registry().register(&mut socket, SOCKET, Interest::READABLE)?;
        Ok(Driver {
            socket,
            poll,
            clock: Clock::new(),
            recv_buf: vec![0; MAX_DATAGRAM],
            send_buf: Vec::with_capacity(MAX_DATAGRAM),
            blocked_send: None,
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
    pub fn run(&mut self, endpoint: &mut Endpoint, app: &mut dyn App, deadline: Option<StdInstant>) -> io::Result<()> {
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

    /// Read every datagram waiting on the socket.
    fn receive_all(&mut self, endpoint: &mut Endpoint) -> io::Result<()> {
        loop {
            match self.socket.recv_from(&mut self.recv_buf) {
                Ok((n, from)) => {
                    let now = self.clock.now();
                    endpoint.handle_datagram(now, from, &mut self.recv_buf[..n]);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // ICMP errors (port unreachable) surface here on some systems.
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Send what the endpoint has. False if the socket buffer filled up.
    fn flush(&mut self, endpoint: &mut Endpoint) -> io::Result<bool> {
        if let Some((dst, len)) = self.blocked_send {
            match self.socket.send_to(&self.send_buf[..len], dst) {
                Ok(_) => self.blocked_send = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(_) => self.blocked_send = None,
            }
        }
        // Interleave reads so a fast sender does not starve its own ACK input.
        let mut budget = 64;
        loop {
            let now = self.clock.now();
            let Some(t) = endpoint.poll_transmit(now, &mut self.send_buf) else { return Ok(true) };
            match self.socket.send_to(&self.send_buf[..t.size], t.destination) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.blocked_send = Some((t.destination, t.size));
                    return Ok(false);
                }
                // A datagram the network refuses is a lost datagram.
                Err(e) => tracing::debug!(error = %e, "send failed"),
            }
            budget -= 1;
            if budget == 0 {
                budget = 64;
                self.receive_all(endpoint)?;
            }
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}
