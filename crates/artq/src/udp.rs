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

use std::collections::HashMap;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::Arc;
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

/// Datagrams one worker may have queued for another before more are
/// dropped (lost, as a full socket buffer would lose them): 2.6 MB of
/// 1350-byte datagrams.
pub const FORWARD_QUEUE: usize = 2048;

/// The poll token of a worker's [`mio::Waker`] (sockets use 0..n, origin
/// connections 1 << 16 and above).
const WAKE: Token = Token(1 << 15);

/// A datagram one worker received for a connection another owns.
pub struct Forwarded {
    /// The address it was sent to (our socket's).
    local: SocketAddr,
    /// Its sender.
    remote: SocketAddr,
    ecn: Option<Ecn>,
    data: Vec<u8>,
}

/// Which worker owns a datagram's connection, from its connection ID
/// (`None`: handled where it arrived).
pub type OwnerOf = Box<dyn Fn(&[u8]) -> Option<usize> + Send>;

/// What [`Driver::run_with`] calls once per turn, with the datagrams passed
/// to other workers so far.
pub type EachTurn<'a> = &'a mut dyn FnMut(&mut Host, u64);

/// How a worker reaches another: its queue and the waker of its poll.
#[derive(Clone)]
pub struct WorkerInbox {
    queue: SyncSender<Forwarded>,
    waker: Arc<mio::Waker>,
}

/// Most client-chosen connection IDs a worker remembers having placed on
/// another worker ([`WorkerLink`]); the oldest are forgotten first.
const MAX_PLACED: usize = 4096;

/// How long a placement is remembered: the client's Initials and 0-RTT
/// packets that carry its first ID come within its handshake.
const PLACED_FOR: StdDuration = StdDuration::from_secs(10);

/// What ties a worker's driver to the others of one server
/// (`artq serve --threads`): which worker owns a datagram, where a new
/// connection goes, and the way to every worker's queue.
///
/// - A datagram whose connection ID names a worker goes to that worker.
///   The kernel hands it there directly when the sockets steer by
///   connection ID ([`Driver::steer_by_connection_id`]); otherwise (a NAT
///   rebinding or a migration changes the address hash the kernel spreads
///   by) the worker that got it passes it on.
/// - A client's first Initial names no worker: the worker that got it
///   places the connection on the worker with the fewest connections
///   (itself on a tie), so that a few heavy connections do not share a
///   core while others idle, and remembers the placement for the client's
///   later Initial and 0-RTT packets, which carry the same ID.
pub struct WorkerLink {
    /// This worker's index.
    pub me: usize,
    /// The worker that owns a datagram's connection, when its connection ID
    /// says so (`None`: handled here, e.g. a client's first Initial).
    pub owner: OwnerOf,
    /// Every worker's inbox, by index (this one's included).
    pub peers: Vec<WorkerInbox>,
    /// Datagrams the others passed to this worker.
    pub inbox: Receiver<Forwarded>,
    /// Workers to wake after this turn's reads (they have datagrams).
    to_wake: Vec<bool>,
    /// Datagrams passed to another worker, and dropped for a full queue.
    pub forwarded: u64,
    /// Datagrams dropped because the owner's queue was full.
    pub forward_dropped: u64,
    /// Connections held by each worker, as each last published them
    /// (shared by the workers of one server).
    loads: Arc<Vec<AtomicUsize>>,
    /// Length of the workers' connection IDs.
    cid_len: usize,
    /// Client-chosen IDs (with the client's address) of connections this
    /// worker placed on another, and when.
    placed: HashMap<(SocketAddr, wire::cid::ConnectionId), (usize, StdInstant)>,
    /// New connections this worker placed on another.
    pub placed_elsewhere: u64,
}

impl WorkerLink {
    /// A link for worker `me`, given every worker's inbox and its own
    /// receiving end.
    /// `loads` is shared by the links of all the workers (one entry per
    /// worker); `cid_len` is the length of their connection IDs.
    pub fn new(
        me: usize,
        owner: OwnerOf,
        peers: Vec<WorkerInbox>,
        inbox: Receiver<Forwarded>,
        loads: Arc<Vec<AtomicUsize>>,
        cid_len: usize,
    ) -> Self {
        let n = peers.len();
        WorkerLink {
            me,
            owner,
            peers,
            inbox,
            to_wake: vec![false; n],
            forwarded: 0,
            forward_dropped: 0,
            loads,
            cid_len,
            placed: HashMap::new(),
            placed_elsewhere: 0,
        }
    }

    /// Shared connection counts of a server's `workers`, for [`WorkerLink::new`].
    pub fn loads(workers: usize) -> Arc<Vec<AtomicUsize>> {
        Arc::new((0..workers).map(|_| AtomicUsize::new(0)).collect())
    }

    /// Publishes how many connections this worker holds.
    fn publish_load(&self, connections: usize) {
        if let Some(l) = self.loads.get(self.me) {
            l.store(connections, Ordering::Relaxed);
        }
    }

    /// The worker `data` belongs to, when it is another: the one its
    /// connection ID names, or, for a client opening a connection, the one
    /// it was placed on (now, if this is its first Initial).
    fn destination(&mut self, remote: SocketAddr, data: &[u8], host: &Host) -> Option<usize> {
        if let Some(w) = (self.owner)(data) {
            return Some(w);
        }
        let (dcid, initial) = transport::opening_cid(data, self.cid_len)?;
        let now = StdInstant::now();
        if let Some(&(w, at)) = self.placed.get(&(remote, dcid)) {
            if now.duration_since(at) < PLACED_FOR {
                return Some(w);
            }
            self.placed.remove(&(remote, dcid));
        }
        if !initial || host.endpoint().knows(remote, &dcid) {
            return None;
        }
        // The fewest connections, this worker on a tie; counted at once so
        // that a burst of new clients spreads before the counts are
        // published again.
        let load = |w: usize| {
            self.loads
                .get(w)
                .map_or(usize::MAX, |l| l.load(Ordering::Relaxed))
        };
        let mut best = self.me;
        for w in 0..self.peers.len() {
            if load(w) < load(best) {
                best = w;
            }
        }
        if let Some(l) = self.loads.get(best) {
            l.fetch_add(1, Ordering::Relaxed);
        }
        if best != self.me {
            if self.placed.len() >= MAX_PLACED {
                self.placed
                    .retain(|_, &mut (_, at)| now.duration_since(at) < PLACED_FOR);
                if self.placed.len() >= MAX_PLACED {
                    self.placed.clear();
                }
            }
            self.placed.insert((remote, dcid), (best, now));
            self.placed_elsewhere += 1;
        }
        Some(best)
    }

    /// Pass `data` to the worker it belongs to if that is another; false
    /// when it is this worker's to handle.
    fn pass_on(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        ecn: Option<Ecn>,
        data: &[u8],
        host: &Host,
    ) -> bool {
        let Some(w) = self.destination(remote, data, host) else {
            return false;
        };
        if w == self.me || w >= self.peers.len() {
            return false;
        }
        let f = Forwarded {
            local,
            remote,
            ecn,
            data: data.to_vec(),
        };
        match self.peers[w].queue.try_send(f) {
            Ok(()) => {
                self.forwarded += 1;
                self.to_wake[w] = true;
            }
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.forward_dropped += 1;
            }
        }
        true
    }

    /// Wake the workers this turn passed datagrams to.
    fn wake(&mut self) {
        for (w, wake) in self.to_wake.iter_mut().enumerate() {
            if std::mem::take(wake) {
                let _ = self.peers[w].waker.wake();
            }
        }
    }
}

/// Maps the wall clock onto the sans-IO clock (nanoseconds since start).
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    start: StdInstant,
    /// The calendar time at `start`, for logs.
    start_wall: std::time::SystemTime,
}

impl Clock {
    /// A clock whose epoch is now.
    pub fn new() -> Self {
        Clock {
            start: StdInstant::now(),
            start_wall: std::time::SystemTime::now(),
        }
    }

    /// The calendar time of `t` (for logs: the calendar may jump, the
    /// sans-IO clock never does).
    pub fn wall(&self, t: Instant) -> std::time::SystemTime {
        self.start_wall + StdDuration::from_nanos(t.as_nanos())
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
    /// The other workers of a multi-threaded server.
    link: Option<WorkerLink>,
    /// Its sockets share their ports with other workers' (`SO_REUSEPORT`).
    shared: bool,
    /// The kernel reported an ICMP port or host unreachable for something
    /// we sent (a client's sockets ask for these reports: see
    /// [`Driver::report_unreachable`]).
    unreachable: bool,
}

impl Driver {
    /// Bind a UDP socket on `addr` with large buffers.
    pub fn bind(addr: SocketAddr) -> io::Result<Self> {
        Self::bind_with(addr, false)
    }

    /// Bind a UDP socket on `addr` that shares its port with the other
    /// workers' (`SO_REUSEPORT`): the kernel spreads datagrams over them.
    pub fn bind_shared(addr: SocketAddr) -> io::Result<Self> {
        Self::bind_with(addr, true)
    }

    fn bind_with(addr: SocketAddr, reuse_port: bool) -> io::Result<Self> {
        let poll = Poll::new()?;
        let first = open_socket(&poll, addr, Token(0), reuse_port)?;
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
            link: None,
            shared: reuse_port,
            unreachable: false,
        })
    }

    /// This driver's inbox for the other workers of a server, and the
    /// receiving end to hand to [`Driver::link`].
    pub fn inbox(&self) -> io::Result<(WorkerInbox, Receiver<Forwarded>)> {
        let (queue, rx) = std::sync::mpsc::sync_channel(FORWARD_QUEUE);
        let waker = Arc::new(mio::Waker::new(self.poll.registry(), WAKE)?);
        Ok((WorkerInbox { queue, waker }, rx))
    }

    /// Ask the kernel to report ICMP errors (port or host unreachable) for
    /// what this client's socket sends (`IP_RECVERR`, `IPV6_RECVERR`: an
    /// unconnected UDP socket hears of none otherwise). Then a handshake
    /// whose server has no socket on its port ends at once
    /// ([`Stop::handshake_of`]) with `ConnectionRefused`, instead of at the
    /// handshake timeout. Linux only; elsewhere nothing changes.
    pub fn report_unreachable(&mut self) {
        #[cfg(target_os = "linux")]
        for s in &self.sockets {
            use std::os::fd::AsRawFd;
            let (level, name) = if s.addr.is_ipv6() {
                (libc::IPPROTO_IPV6, libc::IPV6_RECVERR)
            } else {
                (libc::IPPROTO_IP, libc::IP_RECVERR)
            };
            let on: libc::c_int = 1;
            // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a
            // live local c_int; the descriptor is our open socket. Failure
            // only means no reports (checked, and ignored: best effort).
            let _ = unsafe {
                libc::setsockopt(
                    s.socket.as_raw_fd(),
                    level,
                    name,
                    (&on as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                )
            };
        }
    }

    /// Has the kernel deliver each datagram of the listening port to the
    /// worker its connection ID names, among the `workers` sockets bound
    /// on it with `SO_REUSEPORT` (in worker order; call after all are
    /// bound). A classic BPF program on the group (`SO_ATTACH_REUSEPORT_CBPF`)
    /// picks the socket from the first byte of the destination connection
    /// ID, whose remainder modulo `workers` is the worker for our IDs
    /// ([`transport::datagram_owner`]); a client's first packets, which
    /// carry an ID of its own choosing, go to a worker that ID picks,
    /// always the same one for one connection attempt. Without it the
    /// kernel spreads datagrams by a hash of the addresses, and packets
    /// that reach the wrong worker (every packet of a connection placed
    /// on another worker, or moved by a NAT rebinding) are passed on.
    /// Linux only; elsewhere, or if the kernel refuses, an error.
    pub fn steer_by_connection_id(&self, workers: usize) -> io::Result<()> {
        let workers = u32::try_from(workers).unwrap_or(u32::MAX);
        if !(2..=256).contains(&workers) {
            return Ok(());
        }
        let socket = self
            .sockets
            .first()
            .ok_or_else(|| io::Error::other("no socket"))?;
        steer_group(&socket.socket, workers)
    }

    /// Make this driver one worker of several ([`WorkerLink`]).
    pub fn link(&mut self, link: WorkerLink) {
        self.link = Some(link);
    }

    /// The worker link, for its counters.
    pub fn worker_link(&self) -> Option<&WorkerLink> {
        self.link.as_ref()
    }

    /// Bind one more socket on `addr` (a server's preferred address):
    /// returns its bound address.
    pub fn bind_also(&mut self, addr: SocketAddr) -> io::Result<SocketAddr> {
        let s = open_socket(&self.poll, addr, Token(self.sockets.len()), self.shared)?;
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

    /// Use `clock` (the other workers' of a server: their endpoints share
    /// token keys, and token times must mean the same to all).
    pub fn set_clock(&mut self, clock: Clock) {
        self.clock = clock;
    }

    /// Runs `host` until its application is finished (`Ok`, if `stop`
    /// says so), `stop`'s deadline passes (`Err(TimedOut)`), or a graceful
    /// shutdown that `stop`'s signal asked for is over (`Ok`: every
    /// connection closed, or [`SHUTDOWN_GRACE`] passed).
    pub fn run(&mut self, host: &mut Host, stop: Stop<'_>) -> io::Result<()> {
        self.run_with(host, stop, None)
    }

    /// [`Driver::run`], calling `each_turn` once per turn of the loop,
    /// after the wait and before the datagrams that ended it are read,
    /// with the datagrams passed to other workers so far (a server picks up a reloaded certificate there, and
    /// publishes its metrics).
    pub fn run_with(
        &mut self,
        host: &mut Host,
        stop: Stop<'_>,
        mut each_turn: Option<EachTurn<'_>>,
    ) -> io::Result<()> {
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
                let handshaking = host
                    .endpoint()
                    .connection(h)
                    .is_some_and(|c| c.is_handshaking());
                if self.unreachable && handshaking {
                    return Err(io::Error::new(
                        io::ErrorKind::ConnectionRefused,
                        "the peer's host reported its port unreachable (ICMP)",
                    ));
                }
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
            // Before reading: a certificate reloaded while this worker
            // slept must be the one its next new connection gets.
            if let Some(f) = each_turn.as_mut() {
                f(host, self.link.as_ref().map_or(0, |l| l.forwarded));
            }
            self.receive_all(host)?;
        }
    }

    /// Read every datagram waiting on every socket, and those other
    /// workers passed to this one.
    fn receive_all(&mut self, host: &mut Host) -> io::Result<()> {
        for i in 0..self.sockets.len() {
            self.receive_on(i, host)?;
        }
        if let Some(link) = &mut self.link {
            link.wake();
            let several = self.sockets.len() > 1;
            while let Ok(mut f) = link.inbox.try_recv() {
                let now = self.clock.now();
                let to = several.then_some(f.local);
                host.handle_datagram(now, to, f.remote, f.ecn, &mut f.data);
            }
            link.publish_load(host.endpoint().len());
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
                    let local = self.sockets[i].addr;
                    while start < len {
                        let end = (start + stride).min(len);
                        let ecn = m.ecn.map(netem::ecn_from_udp);
                        if let Some(link) = &mut self.link {
                            if link.pass_on(local, m.addr, ecn, &self.recv_buf[start..end], host) {
                                start = end;
                                continue;
                            }
                        }
                        host.handle_datagram(now, to, m.addr, ecn, &mut self.recv_buf[start..end]);
                        start = end;
                    }
                }
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // An ICMP port or host unreachable: noted, and the report
                // itself is read off the socket's error queue.
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::ConnectionRefused | io::ErrorKind::HostUnreachable
                    ) =>
                {
                    self.unreachable = true;
                    drain_error_queue(&self.sockets[i].socket);
                    continue;
                }
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

/// Attaches to `socket`'s `SO_REUSEPORT` group the program of
/// [`Driver::steer_by_connection_id`]. For UDP the program sees the
/// datagram from its payload on; a load past its end ends the program
/// with 0 (the first worker), and a result past the group's size makes
/// the kernel fall back to its hash.
#[cfg(target_os = "linux")]
fn steer_group(socket: &UdpSocket, workers: u32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let (ld_b_abs, jset_k, ja, mod_k, ret_a) = (
        libc::BPF_LD | libc::BPF_B | libc::BPF_ABS,
        libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K,
        libc::BPF_JMP | libc::BPF_JA,
        libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
        libc::BPF_RET | libc::BPF_A,
    );
    let program = [
        // A = first byte; the header form bit says long or short.
        op(ld_b_abs, 0, 0, 0),
        op(jset_k, 0, 2, 0x80),
        // Long header: flags, 4 version bytes, the ID's length, the ID.
        op(ld_b_abs, 0, 0, 6),
        op(ja, 0, 0, 1),
        // Short header: the ID right after the first byte.
        op(ld_b_abs, 0, 0, 1),
        op(mod_k, 0, 0, workers),
        op(ret_a, 0, 0, 0),
    ];
    let prog = libc::sock_fprog {
        len: program.len() as u16,
        filter: program.as_ptr().cast_mut(),
    };
    // SAFETY: setsockopt reads `size_of::<sock_fprog>()` bytes from a live
    // local sock_fprog whose `filter` points at `program`, alive until the
    // call returns (the kernel copies the program); the descriptor is our
    // open socket.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn steer_group(_socket: &UdpSocket, _workers: u32) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "Linux only"))
}

/// A non-blocking UDP socket bound to `addr` with large buffers,
/// registered with `poll` under `token`; with `reuse_port`, other sockets
/// may bind the same address (each worker of a server has one).
fn open_socket(
    poll: &Poll,
    addr: SocketAddr,
    token: Token,
    reuse_port: bool,
) -> io::Result<Socket> {
    let domain = socket2::Domain::for_address(addr);
    let sock = socket2::Socket::new(domain, socket2::Type::DGRAM, Some(socket2::Protocol::UDP))?;
    if reuse_port {
        sock.set_reuse_port(true)?;
    }
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

/// Reads the ICMP reports queued on `socket`'s error queue (Linux's
/// `MSG_ERRQUEUE`), so they do not fill its receive buffer; their contents
/// are not needed (a client has one peer).
fn drain_error_queue(socket: &UdpSocket) {
    #[cfg(target_os = "linux")]
    {
        let sock = socket2::SockRef::from(socket);
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 2048];
        // Bounded: a queue holds at most what the receive buffer allows.
        for _ in 0..1024 {
            if sock
                .recv_with_flags(&mut buf, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT)
                .is_err()
            {
                break;
            }
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = socket;
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
