//! The discrete-event simulator (DES).
//!
//! Single-threaded, no async runtime, no sleeping: virtual time jumps from
//! event to event. Each node and each link has at most one pending event,
//! kept by the [`agenda`] in a heap keyed by `(time, seq)`, where `seq` is a
//! counter incremented per scheduling, so simultaneous events run in the
//! order they were scheduled and a run is bit-for-bit repeatable.
//!
//! The world is a set of [`Node`]s, each at one socket address, and a set of
//! [`Link`]s. A route says which links a datagram from `src` to `dst` crosses,
//! in order; several routes may share a link (a dumbbell bottleneck shared
//! by competing flows). After every datagram delivery or timeout the node
//! concerned is polled with [`Node::poll_transmit`] until it returns `None`,
//! then asked for its next timeout.
//!
//! Nodes are stored as trait objects that also implement [`Any`], so callers
//! add them by value ([`Simulator::add_node`] is generic) and get their
//! concrete type back with [`Simulator::node`] / [`Simulator::node_mut`] or
//! [`Simulator::take_node`]. A `Box<dyn Node>` is itself a `Node`, for callers
//! that only have one.

mod agenda;
mod routes;

use std::any::Any;
use std::collections::VecDeque;
use std::net::SocketAddr;

use rustc_hash::FxHashMap;
use serde::{Deserialize, Serialize};
use wire::time::Instant;

use crate::link::{Datagram, Link, LinkConfig, LinkStats};
use agenda::{Agenda, Target};
use routes::{Hop, Leaving, Routes};

/// Units of work (events and deliveries) at one instant after which a run is
/// declared stalled: a node asking for a timeout at `now` forever, or two
/// nodes ping-ponging over a zero-delay route, never let time advance.
const STALL_LIMIT: u64 = 10_000_000;

/// Delivered payloads kept for reuse ([`Node::poll_transmit_reusing`]): more
/// than the datagrams a node sends in one poll, few enough to stay warm.
const SPARE_PAYLOADS: usize = 64;

/// Something that consumes and produces UDP datagrams: a QUIC endpoint, a
/// traffic generator, a toy echo server.
///
/// The simulator drives it sans-IO, in quinn's verb style: `handle_*` feeds
/// input, `poll_*` takes output.
pub trait Node {
    /// A datagram from `from` arrived for this node (at address `to`), its
    /// IP header carrying the ECN codepoint `ecn` (ECT as its sender marked
    /// it, CE from a queue on the way, `None` for Not-ECT). The buffer is
    /// the node's to use: a QUIC endpoint decrypts it in place.
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: SocketAddr,
        ecn: Option<crate::Ecn>,
        payload: &mut [u8],
    );
    /// The next datagram this node wants to send now, if any. Called after
    /// every input until it returns `None`. The datagram's `src` should be
    /// the node's address; routing uses `(src, dst)` as given.
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram>;
    /// [`Node::poll_transmit`] for a node that can reuse buffers: `spares`
    /// holds the emptied payloads of datagrams delivered earlier, which the
    /// node may take for its own payloads instead of allocating (the
    /// simulator calls this one). A buffer and its allocator round trip per
    /// datagram were 2% of a saturated run. The default ignores them.
    fn poll_transmit_reusing(
        &mut self,
        now: Instant,
        spares: &mut Vec<Vec<u8>>,
    ) -> Option<Datagram> {
        let _ = spares;
        self.poll_transmit(now)
    }
    /// When this node next wants [`Node::handle_timeout`]; a time in the past
    /// fires at the current time.
    fn poll_timeout(&mut self) -> Option<Instant>;
    /// The time from [`Node::poll_timeout`] has come.
    fn handle_timeout(&mut self, now: Instant);
    /// Whether this node is done; a run stops when all nodes are.
    fn is_finished(&self) -> bool {
        false
    }
}

impl Node for Box<dyn Node> {
    fn handle_datagram(
        &mut self,
        now: Instant,
        from: SocketAddr,
        to: SocketAddr,
        ecn: Option<crate::Ecn>,
        payload: &mut [u8],
    ) {
        (**self).handle_datagram(now, from, to, ecn, payload);
    }
    fn poll_transmit(&mut self, now: Instant) -> Option<Datagram> {
        (**self).poll_transmit(now)
    }
    fn poll_transmit_reusing(
        &mut self,
        now: Instant,
        spares: &mut Vec<Vec<u8>>,
    ) -> Option<Datagram> {
        (**self).poll_transmit_reusing(now, spares)
    }
    fn poll_timeout(&mut self) -> Option<Instant> {
        (**self).poll_timeout()
    }
    fn handle_timeout(&mut self, now: Instant) {
        (**self).handle_timeout(now);
    }
    fn is_finished(&self) -> bool {
        (**self).is_finished()
    }
}

/// A [`Node`] that can be downcast; implemented for every `'static` node.
trait AnyNode: Node {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
    fn as_node_mut(&mut self) -> &mut dyn Node;
}

impl<T: Node + 'static> AnyNode for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
    fn as_node_mut(&mut self) -> &mut dyn Node {
        self
    }
}

/// Index of a node in a [`Simulator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeId(usize);

/// Index of a link in a [`Simulator`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LinkId(usize);

/// Why [`Simulator::route`] refused a route.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The path names a link this simulator does not have.
    #[error("unknown link {0:?}")]
    UnknownLink(LinkId),
    /// The path crosses the same link twice; a datagram leaving a link must
    /// know its next hop unambiguously.
    #[error("link {0:?} appears twice in one path")]
    RepeatedLink(LinkId),
}

/// Why [`Simulator::run_until`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum RunOutcome {
    /// Every node reports [`Node::is_finished`].
    Finished,
    /// Nothing is scheduled: no timers, nothing in any link.
    Idle,
    /// The next event is after the deadline; the clock now reads the deadline.
    DeadlineReached,
    /// Ten million events or deliveries ran without the clock moving: some
    /// node keeps asking for a timeout at `now`, or nodes answer each other
    /// forever over a zero-delay route. The clock stays where it stopped.
    Stalled,
}

/// Simulator-wide counters.
///
/// Exists to make silent drops visible: a datagram nobody routed or nobody
/// receives is counted, never just forgotten.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct SimStats {
    /// Events processed (node timeouts and link services).
    pub events: u64,
    /// Datagrams sent by nodes.
    pub transmitted: u64,
    /// Datagrams handed to a destination node.
    pub delivered: u64,
    /// Datagrams dropped because no route matched their `(src, dst)`, or a
    /// route changed while they were in flight.
    pub unrouted: u64,
    /// Datagrams dropped at the end of their route because no node has
    /// their destination address.
    pub undeliverable: u64,
}

struct NodeSlot {
    addr: SocketAddr,
    node: Box<dyn AnyNode>,
    /// Needs polling before the next event (new, or handed out mutably).
    dirty: bool,
    /// What the node's [`Node::is_finished`] said when it was last polled.
    finished: bool,
}

/// The discrete-event simulator; see the module doc.
///
/// Calling protocol: add nodes, links and routes, then call
/// [`Simulator::run_until`] (repeatedly if wanted; nodes changed through
/// [`Simulator::node_mut`] in between are polled again at the current time).
pub struct Simulator {
    now: Instant,
    /// The next timeout of each node and service of each link.
    agenda: Agenda,
    nodes: Vec<Option<NodeSlot>>,
    /// The node at each address. Looked up for every delivery and never
    /// iterated, so a hash map (a tree of socket addresses, compared byte
    /// by byte, was 3% of a run with 100 flows, perf).
    by_addr: FxHashMap<SocketAddr, usize>,
    links: Vec<Link>,
    /// Each (source, destination) pair's links, asked at every hop.
    routes: Routes,
    /// Datagrams at the end of their route, waiting to be handed to their
    /// node (a queue, not a recursive call, so zero-hop routes cannot
    /// overflow the stack).
    ready: VecDeque<Datagram>,
    /// Events and deliveries since the clock last moved.
    work_at_instant: u64,
    /// Some node has `dirty` set (saves a scan per event).
    any_dirty: bool,
    /// Nodes present, and those of them not finished when last polled: a
    /// node's state changes only while it handles an input, after which it
    /// is polled, so the run's end is two counters to read, not every
    /// node to ask at every event (a scan that grew with the flows).
    live: usize,
    unfinished: usize,
    /// Emptied payloads of delivered datagrams, for the nodes to reuse.
    spare_payloads: Vec<Vec<u8>>,
    stats: SimStats,
}

impl Default for Simulator {
    fn default() -> Self {
        Simulator::new()
    }
}

impl Simulator {
    /// An empty world at time zero.
    pub fn new() -> Simulator {
        Simulator {
            now: Instant::ZERO,
            agenda: Agenda::default(),
            nodes: Vec::new(),
            by_addr: FxHashMap::default(),
            links: Vec::new(),
            routes: Routes::default(),
            ready: VecDeque::new(),
            work_at_instant: 0,
            any_dirty: false,
            live: 0,
            unfinished: 0,
            spare_payloads: Vec::new(),
            stats: SimStats::default(),
        }
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Adds a node at `addr`; it is first polled when the next run starts.
    /// A node added at an address already taken replaces it as the receiver
    /// for that address (the old one keeps running but gets no datagrams).
    pub fn add_node<N: Node + 'static>(&mut self, addr: SocketAddr, node: N) -> NodeId {
        let index = self.nodes.len();
        self.nodes.push(Some(NodeSlot {
            addr,
            node: Box::new(node),
            dirty: true,
            finished: false,
        }));
        self.any_dirty = true;
        self.live += 1;
        self.unfinished += 1;
        self.by_addr.insert(addr, index);
        NodeId(index)
    }

    /// Adds a link; `seed` seeds its random stages (use
    /// [`derive_seed`](crate::seed::derive_seed)).
    pub fn add_link(&mut self, config: LinkConfig, seed: u64) -> LinkId {
        self.links.push(Link::new(config, seed));
        LinkId(self.links.len() - 1)
    }

    /// Datagrams from `src` to `dst` cross `path`'s links in order (an empty
    /// path delivers at once). Replaces an earlier route for the same pair.
    pub fn route(
        &mut self,
        src: SocketAddr,
        dst: SocketAddr,
        path: &[LinkId],
    ) -> Result<(), RouteError> {
        let mut hops = Vec::with_capacity(path.len());
        for &id in path {
            if id.0 >= self.links.len() {
                return Err(RouteError::UnknownLink(id));
            }
            if hops.contains(&id.0) {
                return Err(RouteError::RepeatedLink(id));
            }
            hops.push(id.0);
        }
        self.routes.set(src, dst, hops);
        Ok(())
    }

    /// Counters of one link; `None` for an unknown id.
    pub fn link_stats(&self, id: LinkId) -> Option<LinkStats> {
        self.links.get(id.0).map(Link::stats)
    }

    /// Simulator-wide counters.
    pub fn stats(&self) -> SimStats {
        self.stats
    }

    /// The node `id` as its concrete type `T`, if it is one.
    pub fn node<T: Node + 'static>(&self, id: NodeId) -> Option<&T> {
        self.slot(id)?.node.as_any().downcast_ref()
    }

    /// The node `id` as its concrete type `T`, mutably. The node is polled
    /// again (transmit, timeout) before the next event, so commands given to
    /// it take effect at the current time.
    pub fn node_mut<T: Node + 'static>(&mut self, id: NodeId) -> Option<&mut T> {
        let slot = self.nodes.get_mut(id.0)?.as_mut()?;
        slot.dirty = true;
        self.any_dirty = true;
        slot.node.as_any_mut().downcast_mut()
    }

    /// The node `id` as a `dyn Node`, whatever its type; marks it for polling
    /// like [`Simulator::node_mut`].
    pub fn node_dyn_mut(&mut self, id: NodeId) -> Option<&mut dyn Node> {
        let slot = self.nodes.get_mut(id.0)?.as_mut()?;
        slot.dirty = true;
        self.any_dirty = true;
        Some(slot.node.as_node_mut())
    }

    /// Removes node `id` and returns it as `T`. `None` (and the node stays)
    /// if it is not a `T`. Datagrams for its address are then undeliverable.
    pub fn take_node<T: Node + 'static>(&mut self, id: NodeId) -> Option<T> {
        let entry = self.nodes.get_mut(id.0)?;
        if !entry.as_ref()?.node.as_any().is::<T>() {
            return None;
        }
        let slot = entry.take()?;
        self.live -= 1;
        if !slot.finished {
            self.unfinished -= 1;
        }
        self.agenda.remove(Target::Node(id.0));
        if self.by_addr.get(&slot.addr) == Some(&id.0) {
            self.by_addr.remove(&slot.addr);
        }
        slot.node.into_any().downcast::<T>().ok().map(|b| *b)
    }

    /// Runs events in time order until `deadline`, until every node is
    /// finished, or until nothing is scheduled, whichever comes first.
    pub fn run_until(&mut self, deadline: Instant) -> RunOutcome {
        loop {
            if let Some(outcome) = self.step(deadline) {
                return outcome;
            }
        }
    }

    /// Runs one unit of work: the delivery of one ready datagram (then its
    /// node's transmissions), else one event (a node's timeout or a link's
    /// service). `None` when it ran, or why nothing could run, as
    /// [`Simulator::run_until`] would return it. A driver that must act
    /// between two units of work (the Python environment of `lab::steer`,
    /// answering decisions at the instant they arise) steps;
    /// [`Simulator::run_until`] is this in a loop, so stepping changes
    /// nothing.
    pub fn step(&mut self, deadline: Instant) -> Option<RunOutcome> {
        self.poll_dirty_nodes();
        // Datagrams ready at this instant (zero-delay routes, a link's
        // deliveries) go before the next event, one per step.
        if let Some(datagram) = self.ready.pop_front() {
            if !self.count_work() {
                self.ready.push_front(datagram);
                return Some(RunOutcome::Stalled);
            }
            self.deliver(datagram);
            return None;
        }
        if self.all_finished() {
            return Some(RunOutcome::Finished);
        }
        let Some((at, target)) = self.agenda.peek() else {
            return Some(RunOutcome::Idle);
        };
        if at > deadline {
            // Not due yet: it stays for a later run.
            if deadline > self.now {
                self.now = deadline;
                self.work_at_instant = 0;
            }
            return Some(RunOutcome::DeadlineReached);
        }
        if at > self.now {
            self.now = at;
            self.work_at_instant = 0;
        }
        if !self.count_work() {
            return Some(RunOutcome::Stalled);
        }
        // The event peeked above, taken out by its target (a pop would
        // search for the earliest again).
        self.agenda.remove(target);
        self.stats.events = self.stats.events.saturating_add(1);
        match target {
            Target::Node(n) => {
                if let Some(slot) = self.nodes.get_mut(n).and_then(Option::as_mut) {
                    slot.node.handle_timeout(self.now);
                }
                self.poll_node(n);
            }
            Target::Link(l) => self.service_link(l),
        }
        None
    }

    /// Counts one unit of work at the current instant; `false` once the
    /// stall limit is passed.
    fn count_work(&mut self) -> bool {
        self.work_at_instant = self.work_at_instant.saturating_add(1);
        self.work_at_instant <= STALL_LIMIT
    }

    fn all_finished(&self) -> bool {
        self.live > 0 && self.unfinished == 0
    }

    /// Polls nodes that are new or were handed out mutably.
    fn poll_dirty_nodes(&mut self) {
        if !std::mem::take(&mut self.any_dirty) {
            return;
        }
        let dirty: Vec<usize> = (self.nodes.iter().enumerate())
            .filter(|(_, slot)| slot.as_ref().is_some_and(|s| s.dirty))
            .map(|(n, _)| n)
            .collect();
        for n in dirty {
            self.poll_node(n);
        }
    }

    /// Drains node `n`'s transmissions and reschedules its timeout.
    fn poll_node(&mut self, n: usize) {
        let now = self.now;
        loop {
            let Some(slot) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
                return;
            };
            slot.dirty = false;
            let Some(datagram) = slot
                .node
                .poll_transmit_reusing(now, &mut self.spare_payloads)
            else {
                break;
            };
            self.stats.transmitted = self.stats.transmitted.saturating_add(1);
            self.forward(datagram, Leaving::Node(n));
        }
        let Some(slot) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            return;
        };
        let finished = slot.node.is_finished();
        if finished != slot.finished {
            slot.finished = finished;
            if finished {
                self.unfinished -= 1;
            } else {
                self.unfinished += 1;
            }
        }
        // A timeout in the past fires now.
        let want = slot.node.poll_timeout().map(|t| t.max(now));
        self.agenda.schedule(Target::Node(n), want);
    }

    /// Delivers what link `l` has ready now and reschedules it.
    fn service_link(&mut self, l: usize) {
        let now = self.now;
        while let Some(datagram) = self
            .links
            .get_mut(l)
            .and_then(|link| link.poll_deliver(now))
        {
            self.forward(datagram, Leaving::Link(l));
        }
        self.reschedule_link(l);
    }

    fn reschedule_link(&mut self, l: usize) {
        let now = self.now;
        let Some(link) = self.links.get_mut(l) else {
            return;
        };
        let want = link.next_event().map(|t| t.max(now));
        self.agenda.schedule(Target::Link(l), want);
    }

    /// Moves `datagram`, just sent by a node or just out of a link
    /// (`from`), to its next hop: the next link on its route or, at the
    /// end, the destination node.
    fn forward(&mut self, datagram: Datagram, from: Leaving) {
        match self.routes.next(datagram.src, datagram.dst, from) {
            Hop::Link(l) => {
                let now = self.now;
                if let Some(link) = self.links.get_mut(l) {
                    link.send(now, datagram);
                }
                self.reschedule_link(l);
            }
            Hop::Deliver => self.ready.push_back(datagram),
            Hop::Unrouted => {
                // No route, or the route changed while it was in flight.
                self.stats.unrouted = self.stats.unrouted.saturating_add(1);
            }
        }
    }

    /// Hands `datagram` to the node at its destination and polls that node.
    fn deliver(&mut self, mut datagram: Datagram) {
        let Some(&n) = self.by_addr.get(&datagram.dst) else {
            self.stats.undeliverable = self.stats.undeliverable.saturating_add(1);
            return;
        };
        let Some(slot) = self.nodes.get_mut(n).and_then(Option::as_mut) else {
            self.stats.undeliverable = self.stats.undeliverable.saturating_add(1);
            return;
        };
        self.stats.delivered = self.stats.delivered.saturating_add(1);
        slot.node.handle_datagram(
            self.now,
            datagram.src,
            datagram.dst,
            datagram.ecn,
            &mut datagram.payload,
        );
        if self.spare_payloads.len() < SPARE_PAYLOADS {
            let mut payload = datagram.payload;
            payload.clear();
            self.spare_payloads.push(payload);
        }
        self.poll_node(n);
    }

    fn slot(&self, id: NodeId) -> Option<&NodeSlot> {
        self.nodes.get(id.0)?.as_ref()
    }
}

#[cfg(test)]
mod tests;
