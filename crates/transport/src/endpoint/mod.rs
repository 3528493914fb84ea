//! The endpoint: routes datagrams to connections by connection ID, admits
//! new clients (server), answers unknown versions with Version Negotiation,
//! and multiplexes the connections' output onto one socket. Sans-IO like
//! the connection: the driver passes datagrams, time and buffers in.
//!
//! - `admission`: what an Initial for an unknown connection must pass
//!   before any state exists, the bounds on unvalidated state, Retry and
//!   the other stateless answers;
//! - `token`: the address-validation tokens of Retry and NEW_TOKEN.
//!
//! Every connection ID the endpoint and its connections issue comes from
//! one [`CidIssuer`] (shaped for the worker when the server runs several,
//! [`EndpointConfig::with_workers`]). With [`crate::StaticKeys`] a server
//! answers a short-header packet for a connection it does not know with a
//! stateless reset (RFC 9000 §10.3), which the client recognises because
//! the reset token of each of our IDs is `HMAC(reset key, cid)`, the same
//! at every worker and after a restart.
//!
//! Connections live in a map keyed by handle, so the memory of one that
//! ended is freed as soon as the application has read its last events, and
//! its routes go with it. Handles are never reused.
//!
//! A client endpoint keeps the NEW_TOKEN token each server gave it (the
//! latest one per server address, for at most [`MAX_CLIENT_TOKENS`]
//! servers) and uses it once, on its next connection to that address.
//!
//! # Work is proportional to the connections that have some
//!
//! No call scans every connection: a server holding a thousand mostly idle
//! connections pays, per datagram and per timer, for the few that act.
//!
//! - **Ready set.** [`Endpoint::poll_transmit`] polls only connections that
//!   may have something to send: one a datagram was routed to, one whose
//!   timer fired, one the application borrowed with
//!   [`Endpoint::connection_mut`], a new one, and one whose deadline has
//!   passed even if [`Endpoint::handle_timeout`] has not run yet (a pacing
//!   release is such a deadline: the connection may send once it passes).
//!   A connection leaves the set when its `poll_transmit` returns `None`.
//!   The set is visited in the round-robin order the endpoint has always
//!   used (handle order, starting after the connection that sent last), so
//!   every connection that would have sent a datagram sends it in the same
//!   place of the sequence.
//! - **Deadlines.** Each connection's [`Connection::poll_timeout`] is cached
//!   in a set ordered by time, refreshed whenever the endpoint touched the
//!   connection; connections lent out by `connection_mut` are read afresh
//!   until the next call that may refresh them. [`Endpoint::poll_timeout`]
//!   is the first entry; [`Endpoint::handle_timeout`] visits, in handle
//!   order, the connections whose deadline passed and those the
//!   application borrowed since the last call (their endpoint events).
//!
//! - **News.** [`Endpoint::take_news`] names the connections whose events
//!   the application may not have read: one that ran an input (a datagram,
//!   a timer), a new one, one that queued events while it sent, and one the
//!   application borrowed. The application reads events from those alone
//!   and, once it is done with the endpoint for this turn, calls
//!   [`Endpoint::settle_news`], which keeps only the borrowed connections
//!   whose borrowing queued events (so a connection the application writes
//!   to each turn is not read again for nothing).
//!
//! Why skipping a connection changes nothing: a connection that answered
//! `None` and was not touched since answers `None` again, with the same
//! state, until one of its timers passes (its pacer's tokens, replicas and
//! acknowledgements all wait on timers it reports). The simulator's runs
//! are therefore the very datagram sequences they were when every
//! connection was polled.

mod admission;
mod slots;
mod token;
mod work_set;

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::Arc;

use rand::Rng;
use wire::cid::ConnectionId;
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::Instant;

use self::admission::{UnvalidatedSet, MAX_RESPONSES};
use self::slots::Slots;
use self::token::TokenKey;
use self::work_set::WorkSet;
use crate::cid_issuer::{self, CidIssuer};
use crate::config::{ClientConfig, EndpointConfig};
use crate::connection::{ConnectError, Connection, EndpointEvent, Transmit};
use crate::rng::StackRng;

/// Index of a connection inside its endpoint. Handles are never reused, so
/// an application may key its own state by them safely.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ConnectionHandle(pub usize);

/// Most servers a client endpoint remembers a NEW_TOKEN token for.
pub const MAX_CLIENT_TOKENS: usize = 256;

/// ChaCha stream of the endpoint's seed that admission draws from (token
/// key, token nonces, Retry connection IDs), apart from the stream of
/// connection IDs and connection seeds.
const ADMISSION_STREAM: u64 = 0xad;

/// What an endpoint holds and what its admission did: for operators, and
/// for tests that check state is bounded and freed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Connections held (drained ones included until their last events are
    /// read).
    pub connections: usize,
    /// Connection IDs routed to connections.
    pub routes: usize,
    /// Server: (client address, client's DCID) pairs routed to connections
    /// still in their handshake.
    pub initial_routes: usize,
    /// Server: connections whose client's address is not yet validated.
    pub unvalidated: usize,
    /// Server: unvalidated connections whose ClientHello is incomplete.
    pub half_open: usize,
    /// Client: servers it holds a NEW_TOKEN token for.
    pub stored_tokens: usize,
    /// Server: Initials for unknown connections dropped without state:
    /// too small, undecryptable, or not a client's first flight.
    pub initials_dropped: u64,
    /// Server: client Initials refused by a bound (unvalidated state,
    /// connections in total).
    pub refused: u64,
    /// Server: Retry packets sent.
    pub retries_sent: u64,
    /// Server: tokens (Retry or NEW_TOKEN) that validated an address.
    pub tokens_accepted: u64,
    /// Server: tokens refused (forged, expired, another address).
    pub tokens_rejected: u64,
    /// Server: connections closed before they existed (INVALID_TOKEN,
    /// CONNECTION_REFUSED).
    pub stateless_closes: u64,
    /// Server: half-open connections dropped for silence.
    pub half_open_expired: u64,
    /// Stateless responses dropped because the queue was full.
    pub responses_dropped: u64,
    /// Server with static keys: stateless resets sent (RFC 9000 §10.3),
    /// answers to short-header packets for connections it does not hold
    /// (ended, another process's before a restart, or misrouted).
    pub stateless_resets_sent: u64,
}

impl core::ops::AddAssign<&EndpointStats> for EndpointStats {
    /// Adds another endpoint's figures: a server of several workers
    /// reports the sum of its endpoints (gauges as totals, counters as
    /// totals).
    fn add_assign(&mut self, o: &EndpointStats) {
        let EndpointStats {
            connections,
            routes,
            initial_routes,
            unvalidated,
            half_open,
            stored_tokens,
            initials_dropped,
            refused,
            retries_sent,
            tokens_accepted,
            tokens_rejected,
            stateless_closes,
            half_open_expired,
            responses_dropped,
            stateless_resets_sent,
        } = o;
        self.connections += connections;
        self.routes += routes;
        self.initial_routes += initial_routes;
        self.unvalidated += unvalidated;
        self.half_open += half_open;
        self.stored_tokens += stored_tokens;
        self.initials_dropped += initials_dropped;
        self.refused += refused;
        self.retries_sent += retries_sent;
        self.tokens_accepted += tokens_accepted;
        self.tokens_rejected += tokens_rejected;
        self.stateless_closes += stateless_closes;
        self.half_open_expired += half_open_expired;
        self.responses_dropped += responses_dropped;
        self.stateless_resets_sent += stateless_resets_sent;
    }
}

/// The connections with news (module doc: news), as a list that is
/// sorted and rid of repeats when taken, not a tree: a connection is named
/// several times a turn (each datagram, each borrow) and the list taken
/// once, so appending is cheaper than keeping a set (the tree's insertions,
/// and its node freed and allocated again each turn, were 2-3% of a
/// simulated bulk transfer). Repeats are folded when the list grows past
/// twice what it held the last time, so it stays within a constant factor
/// of the connections named, whether or not anyone takes it.
#[derive(Debug, Default)]
struct NewsList {
    handles: Vec<usize>,
    /// Length after the last fold.
    folded: usize,
}

impl NewsList {
    fn insert(&mut self, i: usize) {
        if self.handles.last() == Some(&i) {
            return;
        }
        self.handles.push(i);
        if self.handles.len() > 2 * self.folded + 64 {
            self.fold();
        }
    }

    fn fold(&mut self) {
        self.handles.sort_unstable();
        self.handles.dedup();
        self.folded = self.handles.len();
    }

    /// Appends every connection named to `out`, in handle order, once; the
    /// list is left empty (its allocation kept for the next turn).
    fn take_into(&mut self, out: &mut Vec<ConnectionHandle>) {
        self.fold();
        self.folded = 0;
        out.extend(self.handles.drain(..).map(ConnectionHandle));
    }

    fn remove(&mut self, i: usize) {
        self.handles.retain(|&h| h != i);
    }

    fn retain(&mut self, keep: impl FnMut(&usize) -> bool) {
        self.handles.retain(keep);
    }
}

/// One connection and what routes to it.
struct Slot {
    conn: Box<Connection>,
    /// Its [`Connection::poll_timeout`] as last read: its entry in
    /// [`Endpoint::deadlines`].
    deadline: Option<Instant>,
    /// Our connection IDs routed to it.
    cids: Vec<ConnectionId>,
    /// Server: its (client address, client's DCID) route, while it has one.
    initial_route: Option<(SocketAddr, ConnectionId)>,
    /// The peer's stateless reset tokens indexed for it (in `reset_tokens`).
    reset_tokens: [Option<[u8; 16]>; 2],
    /// The connection's [`Connection::peer_reset_tokens_key`] when they
    /// were indexed.
    reset_key: Option<(u64, Option<u64>)>,
    /// Which of the endpoint's work lists name it (module doc).
    marks: Marks,
}

/// A connection's membership in the endpoint's work lists, kept beside the
/// lists so that naming a connection again costs a flag test, not a search
/// of an ordered set: connections are named several times a turn (every
/// borrow, every datagram), and the trees' searches, insertions and nodes
/// freed and allocated again each turn were about 6% of a simulated bulk
/// transfer (perf).
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    /// In [`Endpoint::ready`].
    ready: bool,
    /// In [`Endpoint::lent`].
    lent: bool,
    /// In [`Endpoint::unsettled`].
    unsettled: bool,
}

impl Slot {
    /// Whether the reset tokens indexed for it are those its connection
    /// checks now (its IDs have not changed since they were indexed).
    fn reset_tokens_current(&self) -> bool {
        self.reset_key == Some(self.conn.peer_reset_tokens_key())
    }
}

/// Puts connection `i` (in `slot`) in the ready set, unless it is there.
fn mark_ready(ready: &mut WorkSet<usize>, slot: &mut Slot, i: usize) {
    if !slot.marks.ready {
        slot.marks.ready = true;
        ready.insert(i);
    }
}

/// Puts connection `i` (in `slot`) on the unsettled list, unless it is there.
fn mark_unsettled(unsettled: &mut Vec<usize>, slot: &mut Slot, i: usize) {
    if !slot.marks.unsettled {
        slot.marks.unsettled = true;
        unsettled.push(i);
    }
}

/// What the last calls did, for the unit tests.
#[cfg(test)]
#[derive(Clone, Copy, Debug, Default)]
struct WorkCounts {
    /// Connections the last `poll_transmit` polled.
    polled: usize,
    /// Connections the last `handle_timeout` visited.
    visited: usize,
}

/// A QUIC endpoint: many connections behind one UDP socket.
pub struct Endpoint {
    config: EndpointConfig,
    /// Connection IDs and connection seeds: under a fixed seed, the very
    /// sequence the endpoint has always drawn (simulated runs do not move).
    rng: StackRng,
    /// Admission's own stream: token nonces, Retry connection IDs.
    admission_rng: StackRng,
    /// Seals and opens address-validation tokens (from `admission_rng`, or
    /// from the static keys).
    token_key: TokenKey,
    /// Draws every connection ID and reset token of the endpoint and its
    /// connections.
    cid_issuer: Arc<CidIssuer>,
    connections: Slots<Slot>,
    next_handle: usize,
    /// Local connection IDs to connections. Only looked up, never iterated,
    /// so its order cannot leak into results.
    routes: HashMap<ConnectionId, ConnectionHandle>,
    /// Server: (client address, client's DCID) of connections still in the
    /// handshake, for the client's further Initials.
    initial_routes: HashMap<(SocketAddr, ConnectionId), ConnectionHandle>,
    /// The stateless reset tokens peers gave for the IDs our connections
    /// use (at most two per connection), to recognise a reset, whose DCID
    /// is random (RFC 9000 §10.3.1: checked when a datagram cannot be
    /// associated with a connection). Only looked up, never iterated.
    reset_tokens: HashMap<[u8; 16], ConnectionHandle>,
    responses: VecDeque<(SocketAddr, Vec<u8>)>,
    incoming: VecDeque<ConnectionHandle>,
    next_poll: usize,
    /// The connection that sent last, and how many more datagrams it may
    /// send in a row ([`EndpointConfig::transmit_burst`]).
    burst: Option<(usize, usize)>,
    /// Drained connections kept until the application has read their
    /// last events (ConnectionLost in particular).
    drained: BTreeSet<usize>,
    /// Connections that may have a datagram to send (module doc).
    ready: WorkSet<usize>,
    /// (deadline, handle) of every connection with a timer, as last read.
    deadlines: WorkSet<(Instant, usize)>,
    /// Connections lent out by [`Endpoint::connection_mut`] since their
    /// deadline was last read: their cached deadline may be stale. Each
    /// once (its [`Marks::lent`]), in no order; emptied, not freed, when
    /// read. A handle may outlive its connection here until then.
    lent: Vec<usize>,
    /// Connections [`Endpoint::handle_timeout`] visits even without an
    /// expired timer: borrowed by the application or new, so they may hold
    /// endpoint events not processed yet. Kept as `lent` is.
    unsettled: Vec<usize>,
    /// Scratch list of handles for the calls that gather connections to
    /// visit (kept to reuse its allocation).
    scratch: Vec<usize>,
    /// Connections whose events the application may not have read yet
    /// (module doc: news).
    news: NewsList,
    /// Connections polled by the last `poll_transmit` and visited by the
    /// last `handle_timeout` (the unit tests' proof of the module doc).
    #[cfg(test)]
    work: WorkCounts,
    /// Server: connections whose client's address is not validated yet.
    unvalidated: UnvalidatedSet,
    /// Client: the NEW_TOKEN token of each server, by its address.
    client_tokens: BTreeMap<SocketAddr, Vec<u8>>,
    stats: EndpointStats,
}

impl core::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("connections", &self.len())
            .finish_non_exhaustive()
    }
}

impl Endpoint {
    /// A new endpoint.
    pub fn new(mut config: EndpointConfig) -> Self {
        config.admission = admission::sanitize(config.admission);
        let rng = StackRng::new(config.rng_seed);
        let mut admission_rng = rng.fork(ADMISSION_STREAM);
        // Drawn even when static keys replace it: admission's later draws
        // (nonces, Retry IDs) stay where they always were.
        let drawn_key = TokenKey::new(&mut admission_rng);
        let token_key = match &config.static_keys {
            Some(keys) => TokenKey::from_static(&keys.token),
            None => drawn_key,
        };
        let cid_issuer = Arc::new(CidIssuer::new(
            config.local_cid_len,
            config.workers,
            config.static_keys.as_ref(),
        ));
        Endpoint {
            rng,
            admission_rng,
            token_key,
            cid_issuer,
            config,
            connections: Slots::default(),
            next_handle: 0,
            routes: HashMap::new(),
            initial_routes: HashMap::new(),
            reset_tokens: HashMap::new(),
            responses: VecDeque::new(),
            incoming: VecDeque::new(),
            next_poll: 0,
            burst: None,
            drained: BTreeSet::new(),
            ready: WorkSet::default(),
            deadlines: WorkSet::default(),
            lent: Vec::new(),
            unsettled: Vec::new(),
            scratch: Vec::new(),
            news: NewsList::default(),
            #[cfg(test)]
            work: WorkCounts::default(),
            unvalidated: UnvalidatedSet::default(),
            client_tokens: BTreeMap::new(),
            stats: EndpointStats::default(),
        }
    }

    /// Number of connections held (drained ones until their last events
    /// are read).
    pub fn len(&self) -> usize {
        self.connections.len()
    }

    /// True when no connection is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Handles of all connections held, in handle order.
    pub fn handles(&self) -> Vec<ConnectionHandle> {
        self.connections
            .keys()
            .map(|&i| ConnectionHandle(i))
            .collect()
    }

    /// A connection, if it is still there.
    pub fn connection(&self, h: ConnectionHandle) -> Option<&Connection> {
        self.connections.get(&h.0).map(|s| &*s.conn)
    }

    /// A connection, mutably: what the application does with it (write,
    /// close, read events) may give it something to send, move its timers
    /// or queue endpoint events, so the endpoint polls it again.
    pub fn connection_mut(&mut self, h: ConnectionHandle) -> Option<&mut Connection> {
        let slot = self.connections.get_mut(&h.0)?;
        mark_ready(&mut self.ready, slot, h.0);
        if !slot.marks.lent {
            slot.marks.lent = true;
            self.lent.push(h.0);
        }
        mark_unsettled(&mut self.unsettled, slot, h.0);
        self.news.insert(h.0);
        Some(&mut *slot.conn)
    }

    /// Appends to `out` the connections whose events the application may
    /// not have read since the last call, in handle order (module doc:
    /// news). An application that reads events from these alone, then
    /// calls [`Endpoint::settle_news`] after its turn, reads every event.
    /// The caller's list, cleared and passed again each turn, saves an
    /// allocation per turn.
    pub fn take_news(&mut self, out: &mut Vec<ConnectionHandle>) {
        self.news.take_into(out);
    }

    /// Ends the application's turn: of the connections borrowed since
    /// [`Endpoint::take_news`], keeps as news only those holding events
    /// (what the application did to them queued some).
    pub fn settle_news(&mut self) {
        let connections = &self.connections;
        self.news
            .retain(|i| connections.get(i).is_some_and(|s| s.conn.has_events()));
    }

    /// Whether a connection here goes by `dcid` for packets from `remote`:
    /// one of our IDs, or the ID a client chose for a connection this
    /// endpoint accepted (what a multi-worker driver asks before placing a
    /// new connection elsewhere).
    pub fn knows(&self, remote: SocketAddr, dcid: &ConnectionId) -> bool {
        self.routes.contains_key(dcid) || self.initial_routes.contains_key(&(remote, *dcid))
    }

    /// Server: present `tls` (a renewed certificate, say) to connections
    /// accepted from now on; existing connections keep the configuration
    /// they started with. No effect on a client endpoint.
    pub fn set_server_tls(&mut self, tls: std::sync::Arc<rustls::ServerConfig>) {
        if let Some(server) = self.config.server.as_mut() {
            server.tls = tls;
        }
    }

    /// The next connection accepted by the server.
    pub fn accept(&mut self) -> Option<ConnectionHandle> {
        self.incoming.pop_front()
    }

    /// What the endpoint holds and what its admission did.
    pub fn stats(&self) -> EndpointStats {
        EndpointStats {
            connections: self.connections.len(),
            routes: self.routes.len(),
            initial_routes: self.initial_routes.len(),
            unvalidated: self.unvalidated.len(),
            half_open: self.unvalidated.half_open(),
            stored_tokens: self.client_tokens.len(),
            ..self.stats.clone()
        }
    }

    /// A fresh connection ID of ours, not routed yet.
    fn new_cid(&mut self) -> ConnectionId {
        loop {
            let cid = self.cid_issuer.new_cid(&mut self.rng);
            if !self.routes.contains_key(&cid) {
                return cid;
            }
        }
    }

    /// A connection ID for a stateless answer, from admission's stream
    /// (never shifting the sequence of [`Endpoint::new_cid`]). `routable`:
    /// the client will send to it, so it has our length and is not routed.
    fn random_cid(&mut self, routable: bool) -> ConnectionId {
        let len = if routable {
            self.cid_issuer.cid_len()
        } else {
            8
        };
        loop {
            let cid = self.cid_issuer.new_cid_of_len(&mut self.admission_rng, len);
            if !self.routes.contains_key(&cid) {
                return cid;
            }
        }
    }

    fn insert(&mut self, conn: Connection) -> ConnectionHandle {
        let h = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        let slot = Slot {
            conn: Box::new(conn),
            deadline: None,
            cids: Vec::new(),
            initial_route: None,
            reset_tokens: [None; 2],
            reset_key: None,
            marks: Marks::default(),
        };
        // Handles only grow, so the map always takes the new one.
        let inserted = self.connections.insert(h.0, slot).is_ok();
        debug_assert!(inserted, "handles are issued in increasing order");
        // New: it has its first flight to send, endpoint events, a timer.
        if let Some(slot) = self.connections.get_mut(&h.0) {
            mark_ready(&mut self.ready, slot, h.0);
            mark_unsettled(&mut self.unsettled, slot, h.0);
        }
        self.news.insert(h.0);
        self.refresh_deadline(h.0);
        h
    }

    /// Read connection `i`'s deadline again after the endpoint touched it.
    fn refresh_deadline(&mut self, i: usize) {
        let Some(slot) = self.connections.get_mut(&i) else {
            return;
        };
        let deadline = slot.conn.poll_timeout();
        if deadline == slot.deadline {
            return;
        }
        match (slot.deadline, deadline) {
            (Some(old), Some(new)) => self.deadlines.replace(&(old, i), (new, i)),
            (None, Some(new)) => {
                self.deadlines.insert((new, i));
            }
            (Some(old), None) => {
                self.deadlines.remove(&(old, i));
            }
            (None, None) => {}
        }
        slot.deadline = deadline;
    }

    /// Read the deadlines of the connections lent out since.
    fn refresh_lent(&mut self) {
        if self.lent.is_empty() {
            return;
        }
        let mut lent = core::mem::take(&mut self.lent);
        for &i in &lent {
            if let Some(slot) = self.connections.get_mut(&i) {
                slot.marks.lent = false;
            }
            self.refresh_deadline(i);
        }
        lent.clear();
        self.lent = lent;
    }

    /// Connection `i` ran an input (datagram, timer, abandonment): it may
    /// send, and its deadline moved.
    pub(super) fn touched(&mut self, i: usize) {
        if let Some(slot) = self.connections.get_mut(&i) {
            mark_ready(&mut self.ready, slot, i);
            self.news.insert(i);
        }
        self.refresh_deadline(i);
    }

    /// Connections whose deadline is `now` or earlier (in deadline order).
    fn expired(&self, now: Instant) -> impl Iterator<Item = usize> + '_ {
        // Most calls find none: the first entry says so without the range
        // search.
        let any = self.deadlines.first().is_some_and(|(t, _)| t <= now);
        let due = if any {
            self.deadlines.range(..=(now, usize::MAX))
        } else {
            self.deadlines.none()
        };
        due.map(|(_, i)| i)
    }

    fn add_route(&mut self, h: ConnectionHandle, cid: ConnectionId) {
        if let Some(slot) = self.connections.get_mut(&h.0) {
            self.routes.insert(cid, h);
            slot.cids.push(cid);
        }
    }

    fn set_initial_route(&mut self, h: ConnectionHandle, remote: SocketAddr, dcid: ConnectionId) {
        if let Some(slot) = self.connections.get_mut(&h.0) {
            self.initial_routes.insert((remote, dcid), h);
            slot.initial_route = Some((remote, dcid));
        }
    }

    /// Open a client connection. It carries the NEW_TOKEN token an earlier
    /// connection to `remote` received, if there is one (used once).
    pub fn connect(
        &mut self,
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
    ) -> Result<ConnectionHandle, ConnectError> {
        let cid = self.new_cid();
        let seed = self.rng.child_seed();
        // RFC 9000 §8.1.3: a token is not reused across connection attempts.
        let token = self.client_tokens.remove(&remote).unwrap_or_default();
        let issuer = self.cid_issuer.clone();
        let conn = Connection::connect(now, config, remote, cid, seed, token, issuer)?;
        let h = self.insert(conn);
        self.add_route(h, cid);
        Ok(h)
    }

    /// Route one datagram. Returns the connection it went to, if any.
    /// `ecn` is the codepoint of its IP header, for drivers that read it
    /// (`None`: Not-ECT or unknown).
    pub fn handle_datagram(
        &mut self,
        now: Instant,
        remote: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        data: &mut [u8],
    ) -> Option<ConnectionHandle> {
        self.handle_datagram_on(now, None, remote, ecn, data)
    }

    /// [`Endpoint::handle_datagram`] for a driver that receives on more
    /// than one address (a server with a preferred address, RFC 9000
    /// §9.6): `local` is the address the datagram was sent to, and the
    /// connection answers from it ([`Transmit::source`]). Stateless answers
    /// (Version Negotiation, Retry) leave from the usual address.
    pub fn handle_datagram_on(
        &mut self,
        now: Instant,
        local: Option<SocketAddr>,
        remote: SocketAddr,
        ecn: Option<wire::ecn::Ecn>,
        data: &mut [u8],
    ) -> Option<ConnectionHandle> {
        self.reap();
        self.refresh_lent();
        let handle = match self.route(remote, data)? {
            Some(h) => h,
            None => self.admit(now, remote, data)?,
        };
        let slot = self.connections.get_mut(&handle.0)?;
        slot.conn.handle_datagram_on(now, local, remote, ecn, data);
        self.touched(handle.0);
        self.process_endpoint_events(handle);
        self.refresh_unvalidated(handle, now, true);
        Some(handle)
    }

    /// The connection `data` is for: `Some(Some(h))` when routed,
    /// `Some(None)` when no connection claims it (a new client, maybe), and
    /// `None` when the datagram needs nothing more (unparseable, or answered
    /// with Version Negotiation).
    fn route(&mut self, remote: SocketAddr, data: &[u8]) -> Option<Option<ConnectionHandle>> {
        let header = packet::decode_protected(data, self.config.local_cid_len).ok()?;
        let (dcid, initial) = match &header {
            ProtectedHeader::Long {
                ty,
                dst_cid,
                src_cid,
                version,
                ..
            } => {
                let initial = *ty == LongType::Initial;
                if initial
                    && !self.speaks(*version)
                    && !self.routes.contains_key(dst_cid)
                    && !self.initial_routes.contains_key(&(remote, *dst_cid))
                {
                    // A version we implement but do not serve: as unknown.
                    self.version_negotiation(remote, *dst_cid, *src_cid, data.len());
                    return None;
                }
                (*dst_cid, initial)
            }
            ProtectedHeader::Short { dst_cid, .. }
            | ProtectedHeader::Retry { dst_cid, .. }
            | ProtectedHeader::VersionNegotiation { dst_cid, .. } => (*dst_cid, false),
            ProtectedHeader::UnsupportedVersion {
                dst_cid, src_cid, ..
            } => {
                self.version_negotiation(remote, *dst_cid, *src_cid, data.len());
                return None;
            }
        };
        let routed = self
            .routes
            .get(&dcid)
            .or_else(|| self.initial_routes.get(&(remote, dcid)))
            .copied();
        match routed {
            Some(h) => Some(Some(h)),
            None if initial => Some(None),
            None if matches!(header, ProtectedHeader::Short { .. }) => {
                // A stateless reset for one of our connections (it goes
                // there to be checked in constant time and end it), or
                // else a packet for a connection we lost.
                if let Some(h) = self.reset_candidate(data) {
                    return Some(Some(h));
                }
                self.stateless_reset(remote, &dcid, data.len());
                None
            }
            None => None,
        }
    }

    /// The connection whose peer gave the last 16 bytes of `data` as a
    /// stateless reset token, if any.
    fn reset_candidate(&self, data: &[u8]) -> Option<ConnectionHandle> {
        if self.reset_tokens.is_empty() || data.len() < cid_issuer::MIN_STATELESS_RESET {
            return None;
        }
        let mut tail = [0u8; cid_issuer::RESET_TOKEN_LEN];
        tail.copy_from_slice(&data[data.len() - cid_issuer::RESET_TOKEN_LEN..]);
        self.reset_tokens.get(&tail).copied()
    }

    /// Index the reset tokens connection `h` now checks (they change when
    /// the peer's tokens arrive and when it moves to another peer ID).
    fn sync_reset_tokens(&mut self, h: ConnectionHandle) {
        let Some(slot) = self.connections.get_mut(&h.0) else {
            return;
        };
        if slot.reset_tokens_current() {
            return;
        }
        slot.reset_key = Some(slot.conn.peer_reset_tokens_key());
        let tokens = slot.conn.peer_reset_tokens();
        if tokens == slot.reset_tokens {
            return;
        }
        for old in slot.reset_tokens.iter().flatten() {
            if self.reset_tokens.get(old) == Some(&h) {
                self.reset_tokens.remove(old);
            }
        }
        for new in tokens.iter().flatten() {
            self.reset_tokens.insert(*new, h);
        }
        slot.reset_tokens = tokens;
    }

    /// Server: whether new connections may use `version`.
    fn speaks(&self, version: wire::Version) -> bool {
        self.config
            .server
            .as_ref()
            .is_some_and(|s| s.transport.versions().contains(&version))
    }

    fn version_negotiation(
        &mut self,
        remote: SocketAddr,
        dcid: ConnectionId,
        scid: ConnectionId,
        len: usize,
    ) {
        // RFC 9000 §6.1: only answer datagrams that could be Initials, and
        // keep the queue bounded.
        if self.config.server.is_none() || len < packet::MIN_INITIAL_SIZE {
            return;
        }
        if self.responses.len() >= MAX_RESPONSES {
            self.stats.responses_dropped += 1;
            return;
        }
        let mut out = Vec::with_capacity(64);
        let first = self.admission_rng.gen::<u8>();
        let versions: Vec<u32> = match &self.config.server {
            Some(s) => s.transport.versions().iter().map(|v| v.wire()).collect(),
            None => vec![packet::QUIC_V1],
        };
        packet::write_version_negotiation(&mut out, &scid, &dcid, &versions, first);
        self.responses.push_back((remote, out));
    }

    /// Server with static keys: answer a short-header packet of `len`
    /// bytes for `dcid`, which no connection holds, with a stateless reset
    /// (RFC 9000 §10.3). Smaller than the packet (§10.3.3), from
    /// admission's generator, through the bounded response queue; nothing
    /// for a packet too small to answer that way.
    ///
    /// A worker must only see short-header packets of its own IDs (the
    /// driver routes them by [`crate::datagram_owner`]): one that got
    /// another worker's packet would reset a live connection.
    fn stateless_reset(&mut self, remote: SocketAddr, dcid: &ConnectionId, len: usize) {
        if self.config.server.is_none() {
            return;
        }
        let Some(token) = self.cid_issuer.static_reset_token(dcid) else {
            return;
        };
        if len <= cid_issuer::MIN_STATELESS_RESET {
            return;
        }
        if self.responses.len() >= MAX_RESPONSES {
            self.stats.responses_dropped += 1;
            return;
        }
        let Some(out) = cid_issuer::stateless_reset(&mut self.admission_rng, &token, len) else {
            return;
        };
        self.responses.push_back((remote, out));
        self.stats.stateless_resets_sent += 1;
    }

    fn process_endpoint_events(&mut self, h: ConnectionHandle) {
        // Most calls (one per packet) find no event and the reset tokens
        // unchanged: one lookup says so.
        let idle = (self.connections.get(&h.0))
            .is_none_or(|slot| !slot.conn.has_endpoint_events() && slot.reset_tokens_current());
        if idle {
            return;
        }
        let mut drained = false;
        while let Some(ev) =
            (self.connections.get_mut(&h.0)).and_then(|s| s.conn.poll_endpoint_event())
        {
            match ev {
                EndpointEvent::NewLocalCid(cid) => self.add_route(h, cid),
                EndpointEvent::RetireLocalCid(cid) => {
                    self.routes.remove(&cid);
                    if let Some(slot) = self.connections.get_mut(&h.0) {
                        slot.cids.retain(|c| *c != cid);
                    }
                }
                EndpointEvent::Drained => drained = true,
                EndpointEvent::NewToken(token) => self.store_token(h, token),
            }
        }
        self.sync_reset_tokens(h);
        if drained {
            self.unroute(h);
            self.unvalidated.remove(h);
            self.drained.insert(h.0);
        }
    }

    /// Client: keep the server's latest NEW_TOKEN token for the next
    /// connection to its address.
    fn store_token(&mut self, h: ConnectionHandle, token: Vec<u8>) {
        let Some(remote) = self.connection(h).map(Connection::remote_address) else {
            return;
        };
        if !self.client_tokens.contains_key(&remote)
            && self.client_tokens.len() >= MAX_CLIENT_TOKENS
        {
            // Forget one server to make room (the lowest address: any
            // choice will do, and this one is deterministic).
            self.client_tokens.pop_first();
        }
        self.client_tokens.insert(remote, token);
    }

    /// Remove every route to `h`.
    fn unroute(&mut self, h: ConnectionHandle) {
        let Some(slot) = self.connections.get_mut(&h.0) else {
            return;
        };
        for cid in slot.cids.drain(..) {
            if self.routes.get(&cid) == Some(&h) {
                self.routes.remove(&cid);
            }
        }
        if let Some(key) = slot.initial_route.take() {
            if self.initial_routes.get(&key) == Some(&h) {
                self.initial_routes.remove(&key);
            }
        }
        for token in core::mem::take(&mut slot.reset_tokens).iter().flatten() {
            if self.reset_tokens.get(token) == Some(&h) {
                self.reset_tokens.remove(token);
            }
        }
    }

    /// Forget drained connections whose events the application has read.
    fn reap(&mut self) {
        if self.drained.is_empty() {
            return;
        }
        let done: Vec<usize> = self
            .drained
            .iter()
            .copied()
            .filter(|i| self.connections.get(i).is_none_or(|s| !s.conn.has_events()))
            .collect();
        for i in done {
            self.drained.remove(&i);
            if let Some(slot) = self.connections.remove(&i) {
                if let Some(t) = slot.deadline {
                    self.deadlines.remove(&(t, i));
                }
                // Drained connections were unrouted; this is for any token
                // indexed since, so that none outlives its connection.
                for token in slot.reset_tokens.iter().flatten() {
                    if self.reset_tokens.get(token) == Some(&ConnectionHandle(i)) {
                        self.reset_tokens.remove(token);
                    }
                }
            }
            self.ready.remove(&i);
            self.news.remove(i);
            self.incoming.retain(|v| v.0 != i);
        }
    }

    /// The next datagram to send, from any connection (round robin over
    /// the connections that may send: see the module doc).
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        self.reap();
        self.refresh_lent();
        #[cfg(test)]
        {
            self.work.polled = 0;
        }
        if let Some((dst, data)) = self.responses.pop_front() {
            buf.clear();
            buf.extend_from_slice(&data);
            return Some(Transmit {
                destination: dst,
                source: None,
                size: data.len(),
                ecn: None,
            });
        }
        // A connection whose deadline passed may send now (a pacing
        // release), whether or not the driver called handle_timeout first.
        let mut due = core::mem::take(&mut self.scratch);
        due.extend(self.expired(now));
        for &i in &due {
            if let Some(slot) = self.connections.get_mut(&i) {
                mark_ready(&mut self.ready, slot, i);
            }
        }
        due.clear();
        self.scratch = due;
        // The connection that sent last goes on while its burst lasts.
        if let Some((idx, left)) = self.burst.take() {
            if let Some(t) = self.poll_connection(idx, now, buf) {
                self.burst = (left > 1).then_some((idx, left - 1));
                return Some(t);
            }
        }
        // Round robin: start after the connection that sent last, wrap
        // around once, visit each ready connection at most once.
        let start = self.next_poll;
        let mut cursor = start;
        let mut wrapped = false;
        loop {
            let next = match (wrapped, cursor) {
                (false, _) => self.ready.range(cursor..).next(),
                (true, 0) => self.ready.first().filter(|&i| i < start),
                (true, _) => self.ready.range(cursor..start).next(),
            };
            let Some(idx) = next else {
                if wrapped {
                    break;
                }
                wrapped = true;
                cursor = 0;
                continue;
            };
            cursor = idx + 1;
            if let Some(t) = self.poll_connection(idx, now, buf) {
                self.next_poll = idx + 1;
                let more = self.config.transmit_burst.saturating_sub(1);
                self.burst = (more > 0).then_some((idx, more));
                return Some(t);
            }
        }
        None
    }

    /// Poll connection `idx` for a datagram; it leaves the ready set when
    /// it has none.
    fn poll_connection(&mut self, idx: usize, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        let slot = self.connections.get_mut(&idx)?;
        #[cfg(test)]
        {
            self.work.polled += 1;
        }
        let t = slot.conn.poll_transmit(now, buf);
        if slot.conn.has_events() {
            self.news.insert(idx);
        }
        self.process_endpoint_events(ConnectionHandle(idx));
        self.refresh_deadline(idx);
        if t.is_none() {
            if let Some(slot) = self.connections.get_mut(&idx) {
                slot.marks.ready = false;
            }
            self.ready.remove(&idx);
        }
        t
    }

    /// Test hook: a datagram from any connection, polling every one
    /// directly (the scan [`Endpoint::poll_transmit`] avoids). After
    /// `poll_transmit` returned `None`, this must return `None` too: a
    /// connection outside the ready set has nothing to send (module doc).
    /// The test pair holds every test to it.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn poll_transmit_scan(
        &mut self,
        now: Instant,
        buf: &mut Vec<u8>,
    ) -> Option<(ConnectionHandle, Transmit)> {
        let handles: Vec<usize> = self.connections.keys().copied().collect();
        for i in handles {
            let t = self
                .connections
                .get_mut(&i)
                .and_then(|s| s.conn.poll_transmit(now, buf));
            self.process_endpoint_events(ConnectionHandle(i));
            self.refresh_deadline(i);
            if let Some(t) = t {
                return Some((ConnectionHandle(i), t));
            }
        }
        None
    }

    /// Earliest timer of any connection, or of the endpoint's own
    /// (half-open connections' deadlines).
    pub fn poll_timeout(&self) -> Option<Instant> {
        // Cached deadlines, but read afresh those of connections lent out
        // since (theirs may have moved either way).
        let cached = self
            .deadlines
            .iter()
            .find(|(_, i)| !self.connections.get(i).is_some_and(|s| s.marks.lent))
            .map(|(t, _)| t);
        let lent = wire::time::earliest(
            (self.lent.iter()).map(|i| self.connections.get(i).and_then(|s| s.conn.poll_timeout())),
        );
        wire::time::earliest([cached, lent, self.unvalidated.next_deadline()])
    }

    /// Fire expired timers of the connections and of the endpoint. Visits,
    /// in handle order, the connections whose deadline passed and those
    /// borrowed or created since the last call.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.reap();
        self.refresh_lent();
        // In handle order, each once: the unsettled and the expired.
        let mut visit = core::mem::take(&mut self.scratch);
        for &i in &self.unsettled {
            if let Some(slot) = self.connections.get_mut(&i) {
                slot.marks.unsettled = false;
            }
        }
        visit.append(&mut self.unsettled);
        visit.extend(self.expired(now));
        visit.sort_unstable();
        visit.dedup();
        #[cfg(test)]
        {
            self.work.visited = visit.len();
        }
        for &i in &visit {
            let Some(slot) = self.connections.get_mut(&i) else {
                continue;
            };
            if slot.conn.poll_timeout().is_some_and(|t| t <= now) {
                slot.conn.handle_timeout(now);
                // Even a timer with nothing else to do (pacing) lets it send.
                mark_ready(&mut self.ready, slot, i);
                self.news.insert(i);
            }
            let h = ConnectionHandle(i);
            self.process_endpoint_events(h);
            self.refresh_unvalidated(h, now, false);
            self.refresh_deadline(i);
        }
        visit.clear();
        self.scratch = visit;
        self.expire_half_open(now);
    }
}

#[cfg(test)]
mod tests;
