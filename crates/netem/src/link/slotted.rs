//! The slotted delay line ([`Slotted`]): the channel of the RCP authors'
//! simulator (rcp.md Table I; `SingleModeChannel` and `ChannelBuffer` in
//! their published code, github.com/qizhu8/DRL-RCP-py, `Ver2/`).
//!
//! Why it exists: that channel is not a queue in front of a propagation
//! delay. It is one FIFO buffer in which a packet must stay at least the
//! "propagation delay" (their `rtt` parameter, 100 slots) and from which at
//! most `processRate` packets leave per slot. With a full buffer of 300
//! packets served 3 per slot, the buffer *is* the 100-slot pipe: queueing
//! and propagation overlap instead of adding up. Modelling it as a
//! drop-tail queue plus a separate delay (artq's dumbbell) doubles the
//! latency of every message and of every retransmission.
//!
//! Semantics, as their code runs (read from `channel.py`,
//! `channelBuffer.py` and the slot loop of `SimulationEnvironment2.py`):
//!
//! 1. An arriving packet first faces the random drop (the link's loss
//!    model, decided before the buffer, as their `putPackets` does);
//! 2. then the buffer: a full buffer drops it (the link's
//!    [`QueueLimit`](super::QueueLimit), which for this capacity counts
//!    *every* packet in the channel, sojourning or not, as their
//!    `ChannelBuffer` does);
//! 3. at each slot boundary `k · slot` (`k = 0, 1, 2, ...`) at most
//!    `per_slot` packets leave, oldest first, each only if the boundary
//!    lies strictly after its arrival plus `sojourn`. Their
//!    `getPackets` stops at the first packet that has not stayed long
//!    enough; so does this (the buffer is FIFO and the sojourn constant,
//!    so nothing behind it could leave either).
//!
//! Their loop puts a slot's packets into the buffer before it takes that
//! slot's departures out, so a packet arriving in slot `k` (the interval
//! `((k-1) · slot, k · slot)` here) sees the buffer as the departures of
//! boundary `k - 1` left it and may leave at boundary `k + sojourn / slot`
//! at the earliest: exactly `sojourn` slots in their slot counting. A
//! packet arriving exactly on a boundary counts as arriving just after it
//! (it joins the next slot, for the buffer and for its departure alike):
//! that makes the outcome independent of the order in which the simulator
//! runs simultaneous events.
//!
//! **The order in which a slot's packets reach the buffer** ([`SlotStage`]).
//! Their loop asks the clients for their packets in a random order (a
//! fresh permutation of the clients every slot) and puts each client's
//! packets into the buffer one after the other: a client that sends two
//! packets in a slot (a retransmission and a new message) offers them as
//! one block, whose second packet finds the buffer fuller than a lone
//! packet would. So a slotted link holds a slot's arrivals (those that
//! survived the random drop) until the slot's end, then offers them to
//! the buffer sender by sender (by source address), the senders in a
//! random order drawn from the link's own stream
//! (`derive_seed(link seed, "order")`), each sender's packets in the order
//! they arrived. Ordering packets one by one instead changes the numbers:
//! their ARQ's latency is about 440 slots instead of Table II's 611
//! (docs/reproduce.md, "RCP").
//!
//! Departures then cross the link's propagation delay (0 for the authors'
//! channel) and are delivered. The per-slot rate may change during a run
//! ([`SlotRates`], their `setProcessRate`, Experiment 4): a change at
//! instant `t` applies from the first boundary at or after `t`.

use std::fmt;
use std::str::FromStr;

use std::net::SocketAddr;

use rand::Rng;
use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use wire::time::{Duration, Instant};

use super::{DelayLine, Queued, WaitQueue};

/// Most rate changes one [`SlotRates`] may hold.
pub const MAX_SLOT_RATE_CHANGES: usize = 10_000;
/// Latest rate change, ms since the start (one day).
const MAX_AT_MS: f64 = 86_400_000.0;
/// Most packets a slot may serve.
pub const MAX_PER_SLOT: u64 = 1_000_000;

/// The capacity of a slotted delay line (see the module doc).
///
/// Exists so the RCP experiments can run on the network the paper's
/// numbers come from, and so `artq sim` and scenario files can describe it
/// (`--slot-rate`, `--slot`, `--sojourn`, `--slot-rate-change`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Slotted {
    /// Length of one slot (positive).
    pub slot: Duration,
    /// Packets that may leave at each slot boundary (at least 1).
    pub per_slot: u64,
    /// The least time a packet stays in the channel, from its arrival to
    /// its departure (the authors' `rtt`).
    pub sojourn: Duration,
    /// Later per-slot rates.
    pub changes: SlotRates,
}

impl Slotted {
    /// Checks the slot and the rates.
    pub fn validate(&self) -> Result<(), String> {
        if self.slot.is_zero() {
            return Err("the slot must be positive".into());
        }
        if !(1..=MAX_PER_SLOT).contains(&self.per_slot) {
            return Err(format!(
                "slot_rate {} is outside 1..={MAX_PER_SLOT} packets per slot",
                self.per_slot
            ));
        }
        Ok(())
    }
}

/// Changes of a slotted channel's per-slot rate: from each change's instant
/// (since the start of the run) the channel serves that many packets per
/// slot. Written `MS:PKTS[,MS:PKTS...]` (`5000:3`: 3 packets per slot from
/// 5 s on).
///
/// Exists for RCP's Experiment 4 (rcp.md §V-F, Table V), whose channel
/// slows from 7 to 3 packets per slot at slot 5000.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SlotRates {
    /// `(instant since the epoch, packets per slot)`, sorted by instant.
    changes: Vec<(Duration, u64)>,
}

impl SlotRates {
    /// Whether there is no change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The changes, `(instant since the epoch, packets per slot)`, sorted.
    pub fn changes(&self) -> &[(Duration, u64)] {
        &self.changes
    }
}

impl FromStr for SlotRates {
    type Err = String;

    /// `MS:PKTS[,MS:PKTS...]`, `0 <= MS <= 86400000`, `1 <= PKTS <=
    /// 1000000`; empty for none. Two changes at one instant are an error.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut changes = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            if changes.len() == MAX_SLOT_RATE_CHANGES {
                return Err(format!(
                    "more than {MAX_SLOT_RATE_CHANGES} slot rate changes"
                ));
            }
            let (at, pkts) = part
                .split_once(':')
                .ok_or_else(|| format!("slot rate change {part:?} is not MS:PKTS"))?;
            let at: f64 = at
                .trim()
                .parse()
                .map_err(|_| format!("slot rate change {part:?}: {at:?} is not a number of ms"))?;
            if !(at.is_finite() && (0.0..=MAX_AT_MS).contains(&at)) {
                return Err(format!(
                    "slot rate change {part:?}: {at} ms is out of range (0 to {MAX_AT_MS})"
                ));
            }
            let pkts: u64 = pkts.trim().parse().map_err(|_| {
                format!("slot rate change {part:?}: {pkts:?} is not a whole number of packets")
            })?;
            if !(1..=MAX_PER_SLOT).contains(&pkts) {
                return Err(format!(
                    "slot rate change {part:?}: {pkts} is outside 1..={MAX_PER_SLOT} packets per slot"
                ));
            }
            changes.push((Duration::from_secs_f64(at / 1e3), pkts));
        }
        changes.sort_by_key(|&(at, _)| at);
        if let Some(w) = changes.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "two slot rate changes at {} ms",
                w[0].0.as_secs_f64() * 1e3
            ));
        }
        Ok(SlotRates { changes })
    }
}

impl TryFrom<String> for SlotRates {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<SlotRates> for String {
    fn from(r: SlotRates) -> String {
        r.to_string()
    }
}

impl fmt::Display for SlotRates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (at, pkts)) in self.changes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{pkts}", at.as_secs_f64() * 1e3)?;
        }
        Ok(())
    }
}

/// The arrivals of the current slot of a slotted link, waiting for the
/// slot's end to be offered to the buffer sender by sender (see the module
/// doc).
#[derive(Debug)]
pub(super) struct SlotStage {
    slot_ns: u64,
    /// The slot the held arrivals belong to (their boundary index).
    slot: u64,
    items: Vec<Queued>,
    rng: ChaCha8Rng,
}

impl SlotStage {
    pub(super) fn new(config: &Slotted, seed: u64) -> SlotStage {
        SlotStage {
            slot_ns: u64::try_from(config.slot.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
            slot: 0,
            items: Vec::new(),
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// Holds `q`, which arrived at `now`; the caller has offered every
    /// earlier slot's arrivals already ([`SlotStage::due`]).
    pub(super) fn push(&mut self, now: Instant, q: Queued) {
        let slot = now.as_nanos() / self.slot_ns + 1;
        debug_assert!(self.items.is_empty() || self.slot == slot);
        self.slot = slot;
        self.items.push(q);
    }

    /// The boundary at which the held arrivals are offered, if any.
    pub(super) fn due(&self) -> Option<Instant> {
        (!self.items.is_empty())
            .then(|| Instant::from_nanos(self.slot.saturating_mul(self.slot_ns)))
    }

    /// Datagrams held.
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }

    /// The held arrivals in the order they reach the buffer: grouped by
    /// sender, the senders in a random order, each sender's in arrival
    /// order.
    pub(super) fn take_in_order(&mut self) -> Vec<Queued> {
        let mut groups: Vec<(SocketAddr, Vec<Queued>)> = Vec::new();
        for q in self.items.drain(..) {
            match groups.iter_mut().find(|(src, _)| *src == q.datagram.src) {
                Some((_, g)) => g.push(q),
                None => groups.push((q.datagram.src, vec![q])),
            }
        }
        // Fisher-Yates, as a permutation of the senders.
        for i in (1..groups.len()).rev() {
            let j = self.rng.gen_range(0..=i);
            groups.swap(i, j);
        }
        groups.into_iter().flat_map(|(_, g)| g).collect()
    }
}

/// The slotted capacity stage: which boundary comes next and at what rate.
#[derive(Debug)]
pub(super) struct SlottedServer {
    slot_ns: u64,
    sojourn: Duration,
    per_slot: u64,
    /// Rate changes `(ns since the epoch, packets per slot)`, sorted.
    changes: Vec<(u64, u64)>,
    /// Index of the first change not yet applied.
    next_change: usize,
    /// Index of the next boundary not yet served.
    next_k: u64,
}

impl SlottedServer {
    pub(super) fn new(config: &Slotted) -> SlottedServer {
        SlottedServer {
            // A zero slot is refused by `Slotted::validate`; one that slips
            // through still never divides by zero.
            slot_ns: u64::try_from(config.slot.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1),
            sojourn: config.sojourn,
            per_slot: config.per_slot,
            changes: config
                .changes
                .changes()
                .iter()
                .map(|&(at, n)| (u64::try_from(at.as_nanos()).unwrap_or(u64::MAX), n))
                .collect(),
            next_change: 0,
            next_k: 0,
        }
    }

    fn boundary(&self, k: u64) -> Instant {
        Instant::from_nanos(k.saturating_mul(self.slot_ns))
    }

    /// The first boundary index at which a packet that arrived at `arrived`
    /// may leave: the first boundary strictly after `arrived + sojourn`. A
    /// packet arriving inside slot `k` (`((k-1) slot, k slot)`) leaves at
    /// `k + sojourn / slot`; one arriving exactly on boundary `k` counts as
    /// arriving just after it, in slot `k + 1` (its buffer check came after
    /// that boundary's departures too).
    fn first_eligible(&self, arrived: Instant) -> u64 {
        (arrived + self.sojourn).as_nanos() / self.slot_ns + 1
    }

    /// The per-slot rate at boundary `k` (applying the changes due by it).
    fn rate_at(&mut self, k: u64) -> u64 {
        let t = k.saturating_mul(self.slot_ns);
        while let Some(&(at, n)) = self.changes.get(self.next_change) {
            if at > t {
                break;
            }
            self.per_slot = n;
            self.next_change += 1;
        }
        self.per_slot
    }

    /// Serves every boundary up to and including `now`.
    pub(super) fn advance(&mut self, now: Instant, queue: &mut WaitQueue, line: &mut DelayLine) {
        let last_k = now.as_nanos() / self.slot_ns;
        while self.next_k <= last_k {
            let Some(head) = queue.items.front() else {
                // Nothing waits: the boundaries up to `now` pass unused.
                self.next_k = last_k + 1;
                return;
            };
            let eligible = self.first_eligible(head.arrived);
            if eligible > self.next_k {
                // The head cannot leave before `eligible`: skip to it.
                self.next_k = eligible;
                continue;
            }
            let k = self.next_k;
            let at = self.boundary(k);
            let rate = self.rate_at(k);
            let mut served = 0;
            while served < rate {
                let ready = queue
                    .items
                    .front()
                    .is_some_and(|q| self.first_eligible(q.arrived) <= k);
                if !ready {
                    break;
                }
                if let Some(q) = queue.pop_front() {
                    line.push(at, q.datagram);
                }
                served += 1;
            }
            self.next_k = k + 1;
        }
    }

    /// The next boundary at which a packet leaves, if one waits.
    pub(super) fn next_change(&self, queue: &WaitQueue) -> Option<Instant> {
        let head = queue.items.front()?;
        Some(self.boundary(self.first_eligible(head.arrived).max(self.next_k)))
    }
}
