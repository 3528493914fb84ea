//! The TCP sockets of an edge's origin connections, served by the UDP
//! driver's event loop ([`crate::udp::Driver`]) beside its UDP sockets.
//!
//! The edge ([`apps::edge`]) is sans-IO: it asks for connections and bytes
//! through [`OriginIo`]; this module does the system calls. Sockets are
//! non-blocking and registered with the driver's `mio` poll for both
//! readiness kinds (edge-triggered): a socket is read until the kernel has
//! nothing more or the edge has no room ([`OriginIo::read_room`]: that is
//! the backpressure that slows an origin down to its client), and written
//! until the kernel's buffer is full. What the kernel says is reported to
//! the edge as it happened: connected, bytes, end of stream, or the error
//! (refused, reset, unreachable) by its text.

use std::collections::HashMap;
use std::io::{self, Read, Write};

use apps::edge::{OriginCommand, OriginConn, OriginIo};
use mio::net::TcpStream;
use mio::{Interest, Poll, Token};

/// Tokens of origin sockets start here (the UDP sockets use the first
/// few).
pub const FIRST_TOKEN: usize = 1 << 16;

/// Bytes read per `read` call.
const READ_CHUNK: usize = 64 * 1024;

/// One origin socket.
struct Link {
    stream: TcpStream,
    token: Token,
    connected: bool,
    /// Readable until a read would block (edge-triggered readiness).
    readable: bool,
    /// Writable until a write would block.
    writable: bool,
    /// The origin's end of stream or an error was reported: nothing more
    /// is read.
    done: bool,
}

/// The origin sockets of one driver.
pub struct OriginSockets {
    links: HashMap<OriginConn, Link>,
    by_token: HashMap<Token, OriginConn>,
    next_token: usize,
    buf: Vec<u8>,
}

impl Default for OriginSockets {
    fn default() -> Self {
        OriginSockets {
            links: HashMap::new(),
            by_token: HashMap::new(),
            next_token: FIRST_TOKEN,
            buf: vec![0; READ_CHUNK],
        }
    }
}

impl OriginSockets {
    /// Whether `token` names one of these sockets.
    pub fn owns(token: Token) -> bool {
        token.0 >= FIRST_TOKEN
    }

    /// A readiness event for `token`.
    pub fn on_event(&mut self, event: &mio::event::Event) {
        let Some(conn) = self.by_token.get(&event.token()) else {
            return;
        };
        if let Some(link) = self.links.get_mut(conn) {
            if event.is_readable() || event.is_read_closed() || event.is_error() {
                link.readable = true;
            }
            if event.is_writable() || event.is_write_closed() || event.is_error() {
                link.writable = true;
            }
        }
    }

    /// Carries out the edge's commands, writes what it queued, reads what
    /// the origins sent (within the edge's room) and reports it. Returns
    /// whether anything was reported to the edge (drive it again before
    /// sleeping).
    pub fn step(&mut self, poll: &Poll, io: &mut OriginIo) -> bool {
        while let Some(command) = io.poll_command() {
            match command {
                OriginCommand::Connect { conn, addr } => match TcpStream::connect(addr) {
                    Ok(stream) => self.register(poll, io, conn, stream),
                    Err(e) => io.failed(conn, describe(&e)),
                },
                OriginCommand::Close { conn } => self.close(poll, conn),
            }
        }
        let conns: Vec<OriginConn> = self.links.keys().copied().collect();
        for conn in conns {
            self.serve(conn, io);
        }
        io.take_activity()
    }

    /// Registers a connecting socket.
    fn register(
        &mut self,
        poll: &Poll,
        io: &mut OriginIo,
        conn: OriginConn,
        mut stream: TcpStream,
    ) {
        let token = Token(self.next_token);
        self.next_token += 1;
        if let Err(e) =
            poll.registry()
                .register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)
        {
            io.failed(conn, describe(&e));
            return;
        }
        // Request heads are small and wanted at once.
        let _ = stream.set_nodelay(true);
        self.by_token.insert(token, conn);
        self.links.insert(
            conn,
            Link {
                stream,
                token,
                connected: false,
                readable: false,
                writable: false,
                done: false,
            },
        );
    }

    /// Forgets `conn` and closes its socket.
    fn close(&mut self, poll: &Poll, conn: OriginConn) {
        if let Some(mut link) = self.links.remove(&conn) {
            let _ = poll.registry().deregister(&mut link.stream);
            self.by_token.remove(&link.token);
        }
    }

    /// Connects, writes and reads `conn` as far as it goes now.
    fn serve(&mut self, conn: OriginConn, io: &mut OriginIo) {
        let Some(link) = self.links.get_mut(&conn) else {
            return;
        };
        if link.done {
            return;
        }
        if !link.connected {
            if !(link.writable || link.readable) {
                return;
            }
            match link.stream.take_error() {
                Ok(Some(e)) | Err(e) => {
                    link.done = true;
                    io.failed(conn, describe(&e));
                    return;
                }
                Ok(None) => {}
            }
            match link.stream.peer_addr() {
                Ok(_) => {
                    link.connected = true;
                    io.connected(conn);
                }
                Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                    // Still connecting: a spurious wake-up.
                    link.writable = false;
                    link.readable = false;
                    return;
                }
                Err(e) => {
                    link.done = true;
                    io.failed(conn, describe(&e));
                    return;
                }
            }
        }
        while link.writable {
            let out = io.outgoing(conn);
            if out.is_empty() {
                break;
            }
            match link.stream.write(out) {
                Ok(n) => io.wrote(conn, n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => link.writable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    link.done = true;
                    io.failed(conn, describe(&e));
                    return;
                }
            }
        }
        while link.readable {
            let room = io.read_room(conn).min(self.buf.len());
            if room == 0 {
                break;
            }
            let Some(buf) = self.buf.get_mut(..room) else {
                break;
            };
            match link.stream.read(buf) {
                Ok(0) => {
                    link.done = true;
                    io.closed(conn);
                    return;
                }
                Ok(n) => io.received(conn, buf.get(..n).unwrap_or_default()),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => link.readable = false,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    link.done = true;
                    io.failed(conn, describe(&e));
                    return;
                }
            }
        }
    }
}

/// An I/O error as the edge logs it ("connection refused (os error 111)").
fn describe(e: &io::Error) -> String {
    e.to_string()
}
