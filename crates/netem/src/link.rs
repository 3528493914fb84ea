//! One direction of an emulated link.
//!
//! A datagram offered to a [`Link`] goes through these stages, in this order:
//!
//! 1. **blackholes** ([`Blackholes`]): inside a window, every arrival is
//!    dropped;
//! 2. **drop list** ([`DropList`]): the Nth arrival (from 1) is dropped if
//!    listed;
//! 3. **random loss** ([`LossModel`], decided at arrival), at most
//!    `loss_max_burst` datagrams in a row when that is set;
//! 4. **drop-tail queue** ([`QueueLimit`]): a full queue drops the arrival;
//! 5. **capacity** ([`Capacity`]): a Mahimahi trace of delivery opportunities,
//!    a constant rate, or none; a datagram leaves when its last byte has been
//!    served (serialization); or the slotted delay line of RCP's authors
//!    ([`Slotted`]: a packet count per slot, after a minimum sojourn);
//! 6. **propagation delay**: a constant one-way delay added on departure;
//! 7. **corruption** ([`Corruption`]): a delivered datagram may arrive
//!    damaged.
//!
//! Stages 1, 2 and 7 are the interop runner's faults (see [`crate::faults`]);
//! when they are off (the default) they draw nothing and change nothing, so
//! a link without them behaves exactly as before they existed.
//!
//! The order is that of the usual Mahimahi nesting
//! `mm-delay D mm-loss downlink P mm-link UP DOWN --downlink-queue=droptail ...`
//! as seen by downlink packets, which cross the shells from the outside in:
//! delay, loss, then the link's queue and trace. The same nesting sends
//! uplink packets through the link first and the loss shell second, so there a
//! lost packet would still have used a delivery opportunity; artq applies loss
//! first in both directions, so a lost packet never takes queue space or
//! capacity, and both directions behave alike. Propagation delay is a pure
//! time shift, so its position only matters for time-varying loss (evaluated
//! here at the arrival instant).
//!
//! Every stage is a deterministic function of the arrival sequence (datagram
//! and time) and the link's own seeded RNGs (loss and corruption each have
//! their own stream), so the simulator and the real-time
//! relay produce the same behaviour from the same arrivals. Calls may come at
//! any times; a time earlier than one already seen is treated as the latest
//! one seen (time never goes backwards). Storage is one `VecDeque` per stage,
//! reused, so the hot path only moves datagrams.

mod schedule;
mod server;
mod slotted;

pub use schedule::RateSchedule;
pub use slotted::{SlotRates, Slotted, MAX_PER_SLOT};

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use wire::time::{Duration, Instant};

use crate::faults::{Blackholes, Corrupter, Corruption, DropList};
use crate::loss::{LossModel, LossProcess};
use crate::seed::{derive_seed, CORRUPT, LOSS, ORDER};
use crate::trace::Trace;

use server::Server;
use slotted::SlotStage;

/// IPv4 (20) + UDP (8) header bytes.
const IPV4_UDP_OVERHEAD: u64 = 28;
/// IPv6 (40) + UDP (8) header bytes.
const IPV6_UDP_OVERHEAD: u64 = 48;

/// A UDP datagram in flight through the emulator.
///
/// Exists because the emulator knows nothing about QUIC: nodes exchange UDP
/// payloads between socket addresses, exactly what the relay sees on the wire.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    /// Sender's address.
    pub src: SocketAddr,
    /// Destination address.
    pub dst: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
    /// The ECN codepoint of the IP header, `None` for Not-ECT. Links carry it
    /// unchanged (a drop-tail queue does not mark).
    pub ecn: Option<Ecn>,
}

pub use wire::ecn::Ecn;

impl Datagram {
    /// A datagram without ECN marking.
    pub fn new(src: SocketAddr, dst: SocketAddr, payload: Vec<u8>) -> Datagram {
        Datagram {
            src,
            dst,
            payload,
            ecn: None,
        }
    }

    /// Size of the IP packet carrying this datagram: payload + UDP header +
    /// IPv4 header (28 bytes of overhead), or IPv6 (48) when either address
    /// is IPv6.
    ///
    /// This is what capacity and byte-limited queues count, like Mahimahi
    /// which sees IP packets (plus a 4-byte TUN header that both its
    /// opportunities and artq's leave out, see [`crate::trace`]). A
    /// 1472-byte payload over IPv4 fills one 1500-byte opportunity exactly.
    pub fn wire_len(&self) -> u64 {
        let overhead = if self.src.is_ipv4() && self.dst.is_ipv4() {
            IPV4_UDP_OVERHEAD
        } else {
            IPV6_UDP_OVERHEAD
        };
        (self.payload.len() as u64).saturating_add(overhead)
    }
}

/// How fast a link drains its queue.
///
/// Exists to switch between recorded cellular capacity and the papers'
/// fixed-bandwidth links without touching the rest of the pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum Capacity {
    /// An exact constant rate of IP bytes: a datagram of `L` wire bytes takes
    /// `L * 8 / bits_per_sec` seconds, computed without rounding drift
    /// (departures are rounded up to the nanosecond only when reported). An
    /// idle link starts serializing an arrival at once. A rate of 0 never
    /// delivers.
    Constant {
        /// Link rate in bits per second of IP packets.
        bits_per_sec: u64,
    },
    /// [`Capacity::Constant`] whose rate changes at the instants of a
    /// [`RateSchedule`] (a link that slows down or speeds up mid-run).
    Stepped {
        /// Rate before the first change, bits per second of IP packets.
        bits_per_sec: u64,
        /// The later rates.
        changes: RateSchedule,
    },
    /// Mahimahi delivery opportunities of 1500 bytes each, looping, starting
    /// at the clock's epoch (time zero): Mahimahi's `mm-link` semantics.
    ///
    /// An opportunity at time `T` serves packets that arrived strictly
    /// before `T` (Mahimahi serves the link up to `now` before enqueuing an
    /// arrival). Its 1500 bytes go to the packet at the head; bytes a packet
    /// does not need go on to the next queued packet, and a packet larger than
    /// what is left carries the remainder over to later opportunities. Bytes
    /// of an opportunity that find the queue empty are lost. A packet leaves
    /// when the opportunity that completes it occurs.
    Trace(Arc<Trace>),
    /// The slotted delay line of the RCP authors' simulator (rcp.md Table
    /// I): at each slot boundary at most a number of packets leave, each
    /// after a minimum sojourn in the link, whatever their size; the
    /// queue limit counts every packet in the channel. See [`Slotted`].
    Slotted(Slotted),
    /// No capacity limit: arrivals leave at once and the queue never fills.
    Unlimited,
}

/// The drop-tail queue's size limit.
///
/// Counts datagrams waiting for capacity, not the one being served: like
/// Mahimahi, whose `mm-link` takes the head packet out of its droptail queue
/// when service starts (`--downlink-queue=droptail
/// --downlink-queue-args=packets=N` or `bytes=N`). With a trace, service
/// starts only at an opportunity, so a burst at one instant into a trace link
/// keeps exactly `N` packets; an idle constant-rate link starts serializing
/// the first arrival at once, so it keeps `N + 1`. A slotted link
/// ([`Capacity::Slotted`]) serves nothing on arrival, so its queue holds
/// every packet in the channel, sojourning or not (the authors' buffer).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QueueLimit {
    /// Never drops (DESIGN.md's "large" default).
    Unlimited,
    /// At most this many datagrams waiting.
    Packets(u64),
    /// At most this many IP bytes ([`Datagram::wire_len`]) waiting. Mahimahi
    /// counts its 4-byte TUN header too, so its `bytes=N` holds slightly
    /// fewer packets.
    Bytes(u64),
}

/// Configuration of one link direction.
///
/// Exists as plain data so scenarios, the CLI and the relay all build links
/// the same way.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkConfig {
    /// Bottleneck capacity.
    pub capacity: Capacity,
    /// One-way propagation delay, added after serialization.
    pub delay: Duration,
    /// Drop-tail queue limit in front of the capacity stage.
    pub queue: QueueLimit,
    /// Random loss applied to arrivals.
    pub loss: LossModel,
    /// At most this many datagrams in a row are dropped by `loss`; the next
    /// one passes without consulting it (the interop runner's drop-rate
    /// `burst`). `None`: no limit.
    pub loss_max_burst: Option<u64>,
    /// Windows during which every arrival is dropped.
    pub blackholes: Blackholes,
    /// Arrivals to drop by position (the Nth offered datagram, from 1).
    pub drop_list: DropList,
    /// Damage to delivered datagrams; `None`: none.
    pub corrupt: Option<Corruption>,
    /// ECN marking (RFC 3168): an ECN-capable datagram arriving when at
    /// least this many datagrams wait in the queue is marked CE instead of
    /// waiting for the queue to overflow (a step threshold, as DCTCP's K).
    /// Not-ECT datagrams are only ever dropped. `None`: no marking.
    pub ce_threshold: Option<u64>,
}

impl LinkConfig {
    /// A link with the given capacity and delay, no loss, unlimited queue.
    pub fn new(capacity: Capacity, delay: Duration) -> LinkConfig {
        LinkConfig {
            capacity,
            delay,
            queue: QueueLimit::Unlimited,
            loss: LossModel::None,
            loss_max_burst: None,
            blackholes: Blackholes::default(),
            drop_list: DropList::default(),
            corrupt: None,
            ce_threshold: None,
        }
    }

    /// A perfect link: no capacity limit, no delay, no loss.
    pub fn ideal() -> LinkConfig {
        LinkConfig::new(Capacity::Unlimited, Duration::ZERO)
    }

    /// The same link with a different queue limit.
    pub fn with_queue(mut self, queue: QueueLimit) -> LinkConfig {
        self.queue = queue;
        self
    }

    /// The same link with a different loss model.
    pub fn with_loss(mut self, loss: LossModel) -> LinkConfig {
        self.loss = loss;
        self
    }

    /// Checks the configuration (the loss model's and the corruption's
    /// parameters, a burst limit of at least 1); a [`Link`] built from an
    /// invalid one still never panics.
    pub fn validate(&self) -> Result<(), String> {
        self.loss.validate()?;
        if let Capacity::Slotted(s) = &self.capacity {
            s.validate()?;
        }
        if self.loss_max_burst == Some(0) {
            return Err("loss_max_burst must be at least 1".into());
        }
        self.corrupt.as_ref().map_or(Ok(()), Corruption::validate)
    }
}

/// Counters of one link direction.
///
/// Exists so experiments can report offered load, the two kinds of drops and
/// what got through, and check the emulator against its configuration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct LinkStats {
    /// Datagrams offered with [`Link::send`].
    pub offered: u64,
    /// Datagrams handed out by [`Link::poll_deliver`].
    pub delivered: u64,
    /// Datagrams dropped because the queue was full.
    pub dropped_queue: u64,
    /// Datagrams dropped by the loss model.
    pub dropped_loss: u64,
    /// Datagrams dropped inside a blackhole window.
    pub dropped_blackhole: u64,
    /// Datagrams dropped by the drop list.
    pub dropped_listed: u64,
    /// Delivered datagrams that were damaged.
    pub corrupted: u64,
    /// UDP payload bytes delivered.
    pub bytes_delivered: u64,
    /// IP bytes delivered ([`Datagram::wire_len`]), what capacity counts.
    pub wire_bytes_delivered: u64,
    /// Largest number of datagrams ever waiting in the queue.
    pub max_queue_pkts: u64,
    /// Largest number of IP bytes ever waiting in the queue.
    pub max_queue_bytes: u64,
    /// ECN-capable datagrams marked Congestion Experienced by the queue.
    pub ce_marked: u64,
}

/// A datagram with its size on the wire and its arrival time, as stages
/// hold it.
#[derive(Debug)]
struct Queued {
    datagram: Datagram,
    wire_len: u64,
    /// When it was offered to the link (the slotted stage's sojourn counts
    /// from it).
    arrived: Instant,
}

/// The drop-tail queue: datagrams waiting for service.
#[derive(Debug)]
struct WaitQueue {
    items: VecDeque<Queued>,
    bytes: u64,
    limit: QueueLimit,
}

impl WaitQueue {
    /// Appends `q` unless that would exceed the limit; gives it back if not.
    /// Whether a datagram of `wire_len` bytes would find room.
    fn fits(&self, wire_len: u64) -> bool {
        let pkts = self.items.len() as u64 + 1;
        let bytes = self.bytes.saturating_add(wire_len);
        match self.limit {
            QueueLimit::Unlimited => true,
            QueueLimit::Packets(n) => pkts <= n,
            QueueLimit::Bytes(n) => bytes <= n,
        }
    }

    fn try_push(&mut self, q: Queued, stats: &mut LinkStats) -> Result<(), Queued> {
        if !self.fits(q.wire_len) {
            return Err(q);
        }
        let pkts = self.items.len() as u64 + 1;
        let bytes = self.bytes.saturating_add(q.wire_len);
        self.bytes = bytes;
        self.items.push_back(q);
        stats.max_queue_pkts = stats.max_queue_pkts.max(pkts);
        stats.max_queue_bytes = stats.max_queue_bytes.max(bytes);
        Ok(())
    }

    fn pop_front(&mut self) -> Option<Queued> {
        let q = self.items.pop_front()?;
        self.bytes = self.bytes.saturating_sub(q.wire_len);
        Some(q)
    }

    fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The propagation stage: departed datagrams with their arrival times at the
/// far end, in order (departures are in order and the delay is constant).
#[derive(Debug)]
struct DelayLine {
    delay: Duration,
    items: VecDeque<(Instant, Datagram)>,
}

impl DelayLine {
    /// Records that `datagram` left the capacity stage at `departed`.
    fn push(&mut self, departed: Instant, datagram: Datagram) {
        let at = departed + self.delay;
        debug_assert!(self.items.back().is_none_or(|(last, _)| *last <= at));
        self.items.push_back((at, datagram));
    }
}

/// One direction of an emulated link: loss, drop-tail queue, capacity,
/// propagation delay (see the module doc).
///
/// Calling protocol: [`Link::send`] offers a datagram at `now`;
/// [`Link::poll_deliver`] hands out, in order, datagrams that have fully
/// crossed the link by `now` (call until `None`); [`Link::next_event`] says
/// when to poll next. All three accept any `now`; a `now` earlier than the
/// latest seen is treated as the latest seen.
#[derive(Debug)]
pub struct Link {
    loss: LossProcess,
    loss_max_burst: Option<u64>,
    /// Datagrams the loss process dropped in a row, up to now.
    lost_in_a_row: u64,
    blackholes: Blackholes,
    drop_list: DropList,
    /// Present only when corruption is on: off, it draws nothing.
    corrupter: Option<Corrupter>,
    ce_threshold: Option<u64>,
    queue: WaitQueue,
    /// A slotted link's arrivals of the current slot, not yet offered to
    /// the queue (`None` for the other capacities).
    stage: Option<SlotStage>,
    server: Server,
    line: DelayLine,
    stats: LinkStats,
    /// Latest time seen; time never goes backwards.
    clock: Instant,
}

impl Link {
    /// Builds a link; its loss process uses `derive_seed(seed, "loss")`,
    /// its corruption `derive_seed(seed, "corrupt")`, a slotted link's
    /// admission order `derive_seed(seed, "order")`.
    pub fn new(config: LinkConfig, seed: u64) -> Link {
        let stage = match &config.capacity {
            Capacity::Slotted(s) => Some(SlotStage::new(s, derive_seed(seed, ORDER))),
            _ => None,
        };
        let corrupter = config
            .corrupt
            .filter(|c| c.probability > 0.0)
            .map(|c| Corrupter::new(&c, derive_seed(seed, CORRUPT)));
        Link {
            loss: LossProcess::new(&config.loss, derive_seed(seed, LOSS)),
            loss_max_burst: config.loss_max_burst,
            lost_in_a_row: 0,
            blackholes: config.blackholes,
            drop_list: config.drop_list,
            corrupter,
            ce_threshold: config.ce_threshold,
            queue: WaitQueue {
                items: VecDeque::new(),
                bytes: 0,
                limit: config.queue,
            },
            stage,
            server: Server::new(&config.capacity),
            line: DelayLine {
                delay: config.delay,
                items: VecDeque::new(),
            },
            stats: LinkStats::default(),
            clock: Instant::ZERO,
        }
    }

    /// Offers `datagram` to the link at `now`; it is lost, dropped by the
    /// queue, or will come out of [`Link::poll_deliver`] later.
    pub fn send(&mut self, now: Instant, datagram: Datagram) {
        let now = self.tick(now);
        self.stats.offered = self.stats.offered.saturating_add(1);
        if self.blackholes.contains(now.since_epoch()) {
            self.stats.dropped_blackhole = self.stats.dropped_blackhole.saturating_add(1);
            return;
        }
        if self.drop_list.contains(self.stats.offered) {
            self.stats.dropped_listed = self.stats.dropped_listed.saturating_add(1);
            return;
        }
        let burst_over = self
            .loss_max_burst
            .is_some_and(|max| self.lost_in_a_row >= max);
        if !burst_over && self.loss.should_drop(now) {
            self.stats.dropped_loss = self.stats.dropped_loss.saturating_add(1);
            self.lost_in_a_row = self.lost_in_a_row.saturating_add(1);
            return;
        }
        self.lost_in_a_row = 0;
        // Serve the link up to `now` first: capacity that passed before the
        // arrival is not available to it.
        self.serve(now);
        let wire_len = datagram.wire_len();
        let mut datagram = datagram;
        if let (Some(k), Some(Ecn::Ect0 | Ecn::Ect1)) = (self.ce_threshold, datagram.ecn) {
            if self.queue.items.len() as u64 >= k && self.queue.fits(wire_len) {
                datagram.ecn = Some(Ecn::Ce);
                self.stats.ce_marked = self.stats.ce_marked.saturating_add(1);
            }
        }
        let q = Queued {
            datagram,
            wire_len,
            arrived: now,
        };
        if let Some(stage) = &mut self.stage {
            // A slotted link offers the slot's arrivals at its end.
            stage.push(now, q);
            return;
        }
        let q = match self.server.start_if_idle(now, q, &mut self.line) {
            Ok(()) => return,
            Err(q) => q,
        };
        if self.queue.try_push(q, &mut self.stats).is_err() {
            self.stats.dropped_queue = self.stats.dropped_queue.saturating_add(1);
        }
    }

    /// The next datagram that has fully crossed the link by `now`, in order
    /// of arrival at the far end.
    pub fn poll_deliver(&mut self, now: Instant) -> Option<Datagram> {
        let now = self.tick(now);
        self.serve(now);
        let (at, _) = self.line.items.front()?;
        if *at > now {
            return None;
        }
        let (_, mut datagram) = self.line.items.pop_front()?;
        if let Some(corrupter) = &mut self.corrupter {
            if corrupter.apply(&mut datagram.payload) {
                self.stats.corrupted = self.stats.corrupted.saturating_add(1);
            }
        }
        self.stats.delivered = self.stats.delivered.saturating_add(1);
        self.stats.bytes_delivered = self
            .stats
            .bytes_delivered
            .saturating_add(datagram.payload.len() as u64);
        self.stats.wire_bytes_delivered = self
            .stats
            .wire_bytes_delivered
            .saturating_add(datagram.wire_len());
        Some(datagram)
    }

    /// When to call [`Link::poll_deliver`] next: the earliest time a datagram
    /// arrives at the far end or the link's state changes (a service
    /// completion, or a trace opportunity while datagrams wait). `None` when
    /// nothing is in the link. May be earlier than the latest `now` seen if
    /// the link has not been polled since.
    pub fn next_event(&self) -> Option<Instant> {
        let arrival = self.line.items.front().map(|(at, _)| *at);
        let service = self.server.next_change(&self.queue);
        let admission = self.stage.as_ref().and_then(SlotStage::due);
        wire::time::earliest([arrival, service, admission])
    }

    /// Serves the link up to and including `now`. A slotted link first
    /// offers the held slot's arrivals to the queue at that slot's end,
    /// after the departures of the boundaries before it.
    fn serve(&mut self, now: Instant) {
        if let Some(stage) = self.stage.as_mut() {
            if let Some(due) = stage.due().filter(|&d| d <= now) {
                let held = stage.take_in_order();
                // `due` is a boundary k >= 1: the ones before it first.
                let before = Instant::from_nanos(due.as_nanos().saturating_sub(1));
                self.server.advance(before, &mut self.queue, &mut self.line);
                for q in held {
                    if self.queue.try_push(q, &mut self.stats).is_err() {
                        self.stats.dropped_queue = self.stats.dropped_queue.saturating_add(1);
                    }
                }
            }
        }
        self.server.advance(now, &mut self.queue, &mut self.line);
    }

    /// Counters so far.
    pub fn stats(&self) -> LinkStats {
        self.stats
    }

    /// Datagrams waiting in the queue now (not counting one in service).
    pub fn queued_packets(&self) -> usize {
        self.queue.items.len()
    }

    /// Datagrams somewhere in the link: held for their slot's end
    /// (slotted), queued, in service or propagating.
    pub fn in_link(&self) -> usize {
        self.queue
            .items
            .len()
            .saturating_add(self.stage.as_ref().map_or(0, SlotStage::len))
            .saturating_add(usize::from(self.server.is_busy()))
            .saturating_add(self.line.items.len())
    }

    /// Clamps `now` to the latest time seen and records it.
    fn tick(&mut self, now: Instant) -> Instant {
        self.clock = self.clock.max(now);
        self.clock
    }
}

#[cfg(test)]
mod fault_tests;
#[cfg(test)]
mod slotted_tests;
#[cfg(test)]
mod tests;
