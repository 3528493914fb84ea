//! [`OriginIo`]: the seam between the edge and the driver that owns its
//! origin sockets.
//!
//! The edge is sans-IO like the rest of the application layer: it never
//! opens a socket. It asks for TCP connections ([`OriginCommand::Connect`]),
//! queues the bytes it wants written and takes the bytes the driver read;
//! the driver (the UDP event loop of `artq serve`, which polls these sockets
//! beside its UDP sockets) does the system calls and reports what happened.
//! This is the TCP counterpart of [`transport::Transmit`] and
//! `Host::handle_datagram`.
//!
//! Calling protocol of a driver, each turn after `Host::drive`:
//! 1. [`OriginIo::poll_command`] until `None`: open or close sockets;
//! 2. for each open socket: write [`OriginIo::outgoing`] and report
//!    [`OriginIo::wrote`]; read at most [`OriginIo::read_room`] bytes and
//!    hand them to [`OriginIo::received`]; report [`OriginIo::connected`],
//!    [`OriginIo::closed`] (end of stream) and [`OriginIo::failed`];
//! 3. when anything was reported, drive the host again before sleeping.
//!
//! Backpressure: the driver reads only while [`OriginIo::read_room`] is
//! above zero, so a response whose client is slow leaves its bytes in the
//! kernel's TCP buffers and the origin's window closes. Each connection
//! holds at most [`MAX_INPUT`] bytes read and not yet consumed.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddr;

/// Most bytes read from one origin connection and not yet consumed by the
/// edge: the driver reads no more until the edge takes some.
pub const MAX_INPUT: usize = 64 * 1024;

/// Names one origin connection between the edge and the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OriginConn(pub u64);

/// What the edge asks the driver to do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OriginCommand {
    /// Open a TCP connection to `addr`, then report
    /// [`OriginIo::connected`] or [`OriginIo::failed`].
    Connect {
        /// The connection's name.
        conn: OriginConn,
        /// Where the origin listens.
        addr: SocketAddr,
    },
    /// Close the socket now (unread data makes the kernel reset it); the
    /// edge has forgotten the connection and wants no more reports.
    Close {
        /// The connection's name.
        conn: OriginConn,
    },
}

/// Where one connection stands, as the driver reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Connecting.
    Connecting,
    /// Connected; bytes flow.
    Open,
    /// The origin ended its sending half (what was read is still in the
    /// input).
    Closed,
    /// The connection failed (refused, reset, unreachable): the reason.
    Failed(String),
}

/// One origin connection's buffers.
#[derive(Debug)]
struct Link {
    state: LinkState,
    /// Bytes to write; `written` of them are gone.
    output: Vec<u8>,
    written: usize,
    /// Bytes written since the connection opened.
    written_total: u64,
    /// Bytes read and not yet consumed.
    input: Vec<u8>,
}

/// The origin connections of one edge: commands for the driver, bytes both
/// ways, and what the driver reported.
#[derive(Debug, Default)]
pub struct OriginIo {
    links: BTreeMap<OriginConn, Link>,
    commands: VecDeque<OriginCommand>,
    next: u64,
    /// Something was reported since [`OriginIo::take_activity`].
    activity: bool,
}

impl OriginIo {
    /// No connections.
    pub fn new() -> OriginIo {
        OriginIo::default()
    }

    // The edge's side.

    /// Asks for a new connection to `addr`.
    pub fn connect(&mut self, addr: SocketAddr) -> OriginConn {
        let conn = OriginConn(self.next);
        self.next += 1;
        self.links.insert(
            conn,
            Link {
                state: LinkState::Connecting,
                output: Vec::new(),
                written: 0,
                written_total: 0,
                input: Vec::new(),
            },
        );
        self.commands
            .push_back(OriginCommand::Connect { conn, addr });
        conn
    }

    /// Forgets `conn` and has the driver close its socket.
    pub fn close(&mut self, conn: OriginConn) {
        if self.links.remove(&conn).is_some() {
            self.commands.push_back(OriginCommand::Close { conn });
        }
    }

    /// Queues `bytes` to be written on `conn` (ignored for an unknown
    /// connection). What is queued is bounded by the caller: a request head
    /// and the request body it forwards under its own flow control.
    pub fn send(&mut self, conn: OriginConn, bytes: &[u8]) {
        if let Some(link) = self.links.get_mut(&conn) {
            link.output.extend_from_slice(bytes);
        }
    }

    /// Bytes queued on `conn` and not yet written.
    pub fn unsent(&self, conn: OriginConn) -> usize {
        self.links
            .get(&conn)
            .map_or(0, |l| l.output.len().saturating_sub(l.written))
    }

    /// Bytes the driver wrote on `conn` since it opened: how the edge
    /// sees an origin taking a request body.
    pub fn written_total(&self, conn: OriginConn) -> u64 {
        self.links.get(&conn).map_or(0, |l| l.written_total)
    }

    /// What was read from `conn` and not yet consumed.
    pub fn input(&self, conn: OriginConn) -> &[u8] {
        self.links.get(&conn).map_or(&[], |l| l.input.as_slice())
    }

    /// The first `n` bytes of [`OriginIo::input`] are consumed.
    pub fn consume(&mut self, conn: OriginConn, n: usize) {
        if let Some(link) = self.links.get_mut(&conn) {
            let n = n.min(link.input.len());
            link.input.drain(..n);
        }
    }

    /// Where `conn` stands (`None`: unknown or closed by us).
    pub fn state(&self, conn: OriginConn) -> Option<&LinkState> {
        self.links.get(&conn).map(|l| &l.state)
    }

    /// Whether the driver reported anything since the last call, and
    /// forgets it: the edge's cue to look at its connections again.
    pub fn take_activity(&mut self) -> bool {
        std::mem::take(&mut self.activity)
    }

    /// Connections known (open, connecting, or reported closed and not yet
    /// forgotten).
    pub fn len(&self) -> usize {
        self.links.len()
    }

    /// No connections.
    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    // The driver's side.

    /// The next command for the driver.
    pub fn poll_command(&mut self) -> Option<OriginCommand> {
        self.commands.pop_front()
    }

    /// The bytes to write on `conn` now.
    pub fn outgoing(&self, conn: OriginConn) -> &[u8] {
        self.links
            .get(&conn)
            .filter(|l| l.state == LinkState::Open)
            .and_then(|l| l.output.get(l.written..))
            .unwrap_or_default()
    }

    /// `n` bytes of [`OriginIo::outgoing`] were written.
    pub fn wrote(&mut self, conn: OriginConn, n: usize) {
        if let Some(link) = self.links.get_mut(&conn) {
            let n = n.min(link.output.len().saturating_sub(link.written));
            link.written += n;
            link.written_total += n as u64;
            if link.written == link.output.len() {
                link.output.clear();
                link.written = 0;
            }
        }
    }

    /// How many bytes the driver may read from `conn` now (0 while the
    /// edge has not consumed what it has, or after the origin's end).
    pub fn read_room(&self, conn: OriginConn) -> usize {
        self.links
            .get(&conn)
            .filter(|l| l.state == LinkState::Open)
            .map_or(0, |l| MAX_INPUT.saturating_sub(l.input.len()))
    }

    /// The connection is established.
    pub fn connected(&mut self, conn: OriginConn) {
        if let Some(link) = self.links.get_mut(&conn) {
            if link.state == LinkState::Connecting {
                link.state = LinkState::Open;
                self.activity = true;
            }
        }
    }

    /// Bytes were read from `conn` (at most [`OriginIo::read_room`]; more
    /// is kept all the same, so no byte is lost to a driver's mistake).
    pub fn received(&mut self, conn: OriginConn, bytes: &[u8]) {
        if let Some(link) = self.links.get_mut(&conn) {
            link.input.extend_from_slice(bytes);
            self.activity = true;
        }
    }

    /// The origin ended its sending half (a read returned 0).
    pub fn closed(&mut self, conn: OriginConn) {
        if let Some(link) = self.links.get_mut(&conn) {
            if matches!(link.state, LinkState::Open | LinkState::Connecting) {
                link.state = LinkState::Closed;
                self.activity = true;
            }
        }
    }

    /// The connection failed (connect refused, reset, unreachable).
    pub fn failed(&mut self, conn: OriginConn, reason: String) {
        if let Some(link) = self.links.get_mut(&conn) {
            if !matches!(link.state, LinkState::Failed(_)) {
                link.state = LinkState::Failed(reason);
                self.activity = true;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:8080".parse().unwrap()
    }

    #[test]
    fn a_connection_is_asked_for_then_carries_bytes_both_ways() {
        let mut io = OriginIo::new();
        let c = io.connect(addr());
        assert_eq!(
            io.poll_command(),
            Some(OriginCommand::Connect {
                conn: c,
                addr: addr()
            })
        );
        io.send(c, b"GET / HTTP/1.1\r\n\r\n");
        // Nothing is written before the connection is up.
        assert!(io.outgoing(c).is_empty());
        assert_eq!(io.read_room(c), 0);
        io.connected(c);
        assert!(io.take_activity());
        assert_eq!(io.outgoing(c), b"GET / HTTP/1.1\r\n\r\n");
        io.wrote(c, 4);
        assert_eq!(io.outgoing(c), b"/ HTTP/1.1\r\n\r\n");
        assert_eq!(io.unsent(c), 14);
        io.wrote(c, 14);
        assert!(io.outgoing(c).is_empty());
        io.received(c, b"HTTP/1.1 200 OK\r\n");
        assert_eq!(io.read_room(c), MAX_INPUT - 17);
        io.consume(c, 9);
        assert_eq!(io.input(c), b"200 OK\r\n");
        io.closed(c);
        assert_eq!(io.state(c), Some(&LinkState::Closed));
        assert_eq!(io.read_room(c), 0);
        io.close(c);
        assert_eq!(io.poll_command(), Some(OriginCommand::Close { conn: c }));
        assert!(io.is_empty());
    }

    #[test]
    fn input_is_bounded_by_the_read_room() {
        let mut io = OriginIo::new();
        let c = io.connect(addr());
        io.connected(c);
        io.received(c, &vec![0; MAX_INPUT]);
        assert_eq!(io.read_room(c), 0);
        io.consume(c, 1000);
        assert_eq!(io.read_room(c), 1000);
    }

    #[test]
    fn reports_for_forgotten_connections_are_ignored() {
        let mut io = OriginIo::new();
        let c = io.connect(addr());
        io.close(c);
        io.connected(c);
        io.received(c, b"late");
        io.failed(c, "reset".into());
        assert!(!io.take_activity());
        assert_eq!(io.state(c), None);
        assert!(io.input(c).is_empty());
    }
}
