//! The seam between applications and drivers: [`App`], [`Observer`] and
//! [`Host`].
//!
//! A driver (the simulator's node in `lab`, the UDP event loop in `artq`)
//! owns a [`Host`]: an [`Endpoint`] plus one application. It feeds the host
//! datagrams and timeouts with the current time, drains its datagrams, and
//! calls [`Host::drive`] after each batch of input; that is all a driver
//! knows. The host accepts new connections, hands every connection event to
//! the observer and the application, then lets the application move data.
//! An application never reads a clock, a socket or the OS RNG, so the same
//! application gives the same bytes in virtual time and over real UDP.
//!
//! Calling protocol of a driver, per turn:
//! 1. [`Host::handle_datagram`] for each datagram that arrived and/or
//!    [`Host::handle_timeout`] when [`Host::poll_timeout`] has passed;
//! 2. [`Host::drive`];
//! 3. [`Host::poll_transmit`] until `None`;
//! 4. stop when [`Host::is_finished`].

use std::any::Any;
use std::net::SocketAddr;

use transport::connection::ConnectError;
use transport::{ClientConfig, Connection, ConnectionHandle, Endpoint, Event, Transmit};
use wire::time::Instant;

/// An application: the server or client role of a workload, over any
/// number of connections of one endpoint.
pub trait App: Any {
    /// The endpoint accepted (server) or opened (client) connection `h`.
    fn on_connection(&mut self, now: Instant, h: ConnectionHandle, conn: &mut Connection);

    /// An event of connection `h`, in the order the connection raised it.
    fn on_event(&mut self, now: Instant, h: ConnectionHandle, conn: &mut Connection, event: &Event);

    /// After the events: make progress on every connection (read requests
    /// and responses, write bodies, open streams).
    fn drive(&mut self, now: Instant, endpoint: &mut Endpoint);

    /// When the application must be driven again without network input
    /// (a live source's next frame); `None` if it only reacts to the network.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// The origin connections the driver must serve for this application
    /// (an edge's, [`crate::edge::OriginIo`]); `None` for applications
    /// that reach no origin, which is all of them but the edge server.
    fn origin_io(&mut self) -> Option<&mut crate::edge::OriginIo> {
        None
    }

    /// Nothing is left to do: a client whose work is done (or failed) and
    /// whose connection is closed; a server that served at least one
    /// connection and has none open.
    fn is_finished(&self, endpoint: &Endpoint) -> bool;

    /// Begins a graceful shutdown (a server stops taking requests, HTTP/3
    /// sends GOAWAY) and closes connections once they are idle.
    fn shutdown(&mut self, now: Instant, endpoint: &mut Endpoint) {
        let _ = (now, endpoint);
    }

    /// The application as [`Any`], so that the code that built it can read
    /// its results back (`lab` reads a client's report after a run).
    fn as_any(&self) -> &dyn Any;

    /// The application as `Any`, mutably, for a driver that reaches into a
    /// concrete type it knows (a server's metrics drain the edge's
    /// timings); `None` for applications that do not offer it.
    fn as_any_mut(&mut self) -> Option<&mut dyn Any> {
        None
    }
}

/// Sees every connection and event before the application does: where a
/// driver hangs what is not the application's business (qlog files,
/// measurement subscribers, statistics lines).
pub trait Observer {
    /// A new connection (accepted, or opened by [`Host::connect`]).
    fn on_connection(&mut self, h: ConnectionHandle, conn: &mut Connection) {
        let _ = (h, conn);
    }

    /// An event of connection `h`.
    fn on_event(&mut self, h: ConnectionHandle, conn: &mut Connection, event: &Event) {
        let _ = (h, conn, event);
    }
}

/// An endpoint and the application it runs: what a driver drives.
pub struct Host {
    endpoint: Endpoint,
    app: Box<dyn App>,
    observer: Option<Box<dyn Observer>>,
    /// The endpoint's news of this turn ([`Endpoint::take_news`]), a list
    /// kept to reuse its allocation.
    news: Vec<ConnectionHandle>,
}

impl core::fmt::Debug for Host {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Host")
            .field("connections", &self.endpoint.len())
            .finish_non_exhaustive()
    }
}

impl Host {
    /// `app` on `endpoint`.
    pub fn new(endpoint: Endpoint, app: Box<dyn App>) -> Host {
        Host {
            endpoint,
            app,
            observer: None,
            news: Vec::new(),
        }
    }

    /// Adds an observer of every connection and event.
    pub fn with_observer(mut self, observer: Box<dyn Observer>) -> Host {
        self.observer = Some(observer);
        self
    }

    /// Opens a client connection to `remote` and hands it to the observer
    /// and the application.
    pub fn connect(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
    ) -> Result<ConnectionHandle, ConnectError> {
        let h = self.endpoint.connect(now, config, remote)?;
        self.introduce(now, h);
        Ok(h)
    }

    /// A datagram from `from` arrived (decrypted in place), with the ECN
    /// codepoint of its IP header when the driver sees it (the simulator, a
    /// socket reading IP_TOS), and the local address it was sent to when
    /// the driver has several (a server with a preferred address; `None`
    /// otherwise). Call [`Host::drive`] after a batch of them.
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        to: Option<SocketAddr>,
        from: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        payload: &mut [u8],
    ) {
        self.endpoint
            .handle_datagram_on(now, to, from, ecn, payload);
    }

    /// Fires the endpoint's timers that are due. Call [`Host::drive`] after.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.endpoint.handle_timeout(now);
    }

    /// Lets the application react: accepts new connections, dispatches
    /// every pending connection event to the observer and the application,
    /// then drives the application. Events are read from the connections
    /// the endpoint names as news ([`Endpoint::take_news`]), so a turn
    /// costs what the connections that acted cost, not one visit per
    /// connection held.
    pub fn drive(&mut self, now: Instant) {
        while let Some(h) = self.endpoint.accept() {
            self.introduce(now, h);
        }
        let mut news = core::mem::take(&mut self.news);
        self.endpoint.take_news(&mut news);
        for &h in &news {
            // Borrowed once for all its events (each borrow marks it).
            let Some(conn) = self.endpoint.connection_mut(h) else {
                continue;
            };
            while let Some(event) = conn.poll_event() {
                if let Some(o) = self.observer.as_mut() {
                    o.on_event(h, conn, &event);
                }
                self.app.on_event(now, h, conn, &event);
            }
        }
        news.clear();
        self.news = news;
        self.app.drive(now, &mut self.endpoint);
        self.endpoint.settle_news();
    }

    /// The next datagram to send, written into `buf`.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.endpoint.poll_transmit(now, buf)
    }

    /// The application's origin connections, for a driver that owns TCP
    /// sockets (see [`crate::edge::OriginIo`]'s calling protocol).
    pub fn origin_io(&mut self) -> Option<&mut crate::edge::OriginIo> {
        self.app.origin_io()
    }

    /// The earliest of the endpoint's and the application's timers.
    pub fn poll_timeout(&self) -> Option<Instant> {
        match (self.endpoint.poll_timeout(), self.app.poll_timeout()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The application has nothing left to do.
    pub fn is_finished(&self) -> bool {
        self.app.is_finished(&self.endpoint)
    }

    /// Asks the application to shut down gracefully; keep driving until
    /// [`Host::is_finished`] or a deadline.
    pub fn shutdown(&mut self, now: Instant) {
        self.app.shutdown(now, &mut self.endpoint);
    }

    /// The endpoint.
    pub fn endpoint(&self) -> &Endpoint {
        &self.endpoint
    }

    /// The endpoint, mutably (to read or close connections).
    pub fn endpoint_mut(&mut self) -> &mut Endpoint {
        &mut self.endpoint
    }

    /// The application as its concrete type, if it is a `T`.
    pub fn app<T: App>(&self) -> Option<&T> {
        self.app.as_any().downcast_ref::<T>()
    }

    /// The application as its concrete type, mutably, if it is a `T` that
    /// offers it ([`App::as_any_mut`]).
    pub fn app_mut<T: App>(&mut self) -> Option<&mut T> {
        self.app.as_any_mut()?.downcast_mut::<T>()
    }

    fn introduce(&mut self, now: Instant, h: ConnectionHandle) {
        if let Some(conn) = self.endpoint.connection_mut(h) {
            if let Some(o) = self.observer.as_mut() {
                o.on_connection(h, conn);
            }
            self.app.on_connection(now, h, conn);
        }
    }
}

/// The one connection a client application follows: the first the host
/// hands it ([`App::on_connection`]); events of any other are not its.
///
/// Exists so that the client applications (files, RPC, messages) share
/// one definition of "my connection" instead of each keeping an
/// `Option<ConnectionHandle>` and the same checks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OwnConnection(Option<ConnectionHandle>);

impl OwnConnection {
    /// The host opened a connection: it is ours if we have none yet.
    pub fn adopt(&mut self, h: ConnectionHandle) {
        self.0.get_or_insert(h);
    }

    /// Whether `h` is our connection (false before we have one).
    pub fn is(&self, h: ConnectionHandle) -> bool {
        self.0 == Some(h)
    }

    /// Our connection's handle, once adopted.
    pub fn handle(&self) -> Option<ConnectionHandle> {
        self.0
    }

    /// Our connection in `endpoint`, while it is there.
    pub fn get<'e>(&self, endpoint: &'e Endpoint) -> Option<&'e Connection> {
        self.0.and_then(|h| endpoint.connection(h))
    }

    /// Our connection in `endpoint`, to act on, while it is there.
    pub fn get_mut<'e>(&self, endpoint: &'e mut Endpoint) -> Option<&'e mut Connection> {
        self.0.and_then(|h| endpoint.connection_mut(h))
    }
}
