//! The capacity stage: who is being served and when it leaves.
//!
//! Exact constant-rate serialization and Mahimahi opportunity traces, behind
//! one small enum so dispatch stays static (smoltcp's `AnyController` shape).

use std::sync::Arc;

use wire::time::Instant;

use super::slotted::SlottedServer;
use super::{DelayLine, Queued, WaitQueue};
use crate::trace::{Trace, OPPORTUNITY_BYTES};

/// Nanoseconds per millisecond (trace timestamps are ms).
const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
const NS_PER_SEC: u128 = 1_000_000_000;

/// The capacity stage of a link.
#[derive(Debug)]
pub(super) enum Server {
    /// Everything departs on arrival.
    Unlimited,
    /// Exact constant rate.
    Constant(ConstantServer),
    /// Mahimahi opportunities.
    Trace(TraceServer),
    /// Packets per slot after a minimum sojourn.
    Slotted(SlottedServer),
}

impl Server {
    pub(super) fn new(capacity: &super::Capacity) -> Server {
        match capacity {
            super::Capacity::Unlimited => Server::Unlimited,
            super::Capacity::Constant { bits_per_sec } => Server::Constant(ConstantServer {
                bits_per_sec: *bits_per_sec,
                in_service: None,
                changes: Vec::new(),
                next_change: 0,
            }),
            super::Capacity::Stepped {
                bits_per_sec,
                changes,
            } => Server::Constant(ConstantServer {
                bits_per_sec: *bits_per_sec,
                in_service: None,
                changes: changes
                    .changes()
                    .iter()
                    .map(|&(at, bps)| (u64::try_from(at.as_nanos()).unwrap_or(u64::MAX), bps))
                    .collect(),
                next_change: 0,
            }),
            super::Capacity::Trace(trace) => Server::Trace(TraceServer::new(Arc::clone(trace))),
            super::Capacity::Slotted(s) => Server::Slotted(SlottedServer::new(s)),
        }
    }

    /// Serves the link up to and including `now`, moving finished datagrams
    /// from the queue through service into the delay line.
    pub(super) fn advance(&mut self, now: Instant, queue: &mut WaitQueue, line: &mut DelayLine) {
        match self {
            Server::Unlimited => {}
            Server::Constant(s) => s.advance(now, queue, line),
            Server::Trace(s) => s.advance(now, queue, line),
            Server::Slotted(s) => s.advance(now, queue, line),
        }
    }

    /// Takes `q` straight into service at `now` if the stage can (no
    /// capacity limit, or an idle constant-rate link whose queue is empty);
    /// otherwise gives it back for the queue. Call after `advance(now)`.
    pub(super) fn start_if_idle(
        &mut self,
        now: Instant,
        q: Queued,
        line: &mut DelayLine,
    ) -> Result<(), Queued> {
        match self {
            Server::Unlimited => {
                line.push(now, q.datagram);
                Ok(())
            }
            Server::Constant(s) if s.in_service.is_none() => {
                // After advance(now) an idle server has an empty queue: each
                // completion starts the next queued datagram.
                s.apply_changes(now.as_nanos());
                let start = u128::from(now.as_nanos()).saturating_mul(u128::from(s.bits_per_sec));
                s.start(q, start);
                Ok(())
            }
            Server::Constant(_) | Server::Trace(_) | Server::Slotted(_) => Err(q),
        }
    }

    /// When the stage's state next changes, if it has work.
    pub(super) fn next_change(&self, queue: &WaitQueue) -> Option<Instant> {
        match self {
            Server::Unlimited => None,
            Server::Constant(s) => s.in_service.as_ref().and_then(|service| service.done_at),
            Server::Trace(s) => {
                if s.in_transit.is_none() && queue.is_empty() {
                    None
                } else {
                    s.opportunity_at().map(Instant::from_nanos)
                }
            }
            Server::Slotted(s) => s.next_change(queue),
        }
    }

    /// Whether a datagram is in service.
    pub(super) fn is_busy(&self) -> bool {
        match self {
            Server::Unlimited => false,
            Server::Constant(s) => s.in_service.is_some(),
            Server::Trace(s) => s.in_transit.is_some(),
            Server::Slotted(_) => false,
        }
    }
}

/// Exact constant-rate serialization, the rate optionally changing at
/// given instants ([`super::Capacity::Stepped`]).
///
/// Times are kept in "scaled" units of `ns * bits_per_sec`, in which a
/// datagram of `L` bytes takes exactly `L * 8 * 1e9` units, so back-to-back
/// departures never accumulate rounding error. A rate change re-bases the
/// scale at the nanosecond the next datagram starts.
#[derive(Debug)]
pub(super) struct ConstantServer {
    bits_per_sec: u64,
    /// The datagram being serialized and when it is done.
    in_service: Option<InService>,
    /// Rate changes `(ns since the epoch, bits per second)`, sorted.
    changes: Vec<(u64, u64)>,
    /// Index of the first change not yet applied.
    next_change: usize,
}

/// A datagram in service on a [`ConstantServer`].
#[derive(Debug)]
struct InService {
    queued: Queued,
    /// Its completion in scaled time (the next one starts there).
    done_scaled: u128,
    /// The same as an instant, rounded up to the ns (`None`: a zero rate,
    /// never). Kept, not recomputed: its 128-bit division, asked for at
    /// every rescheduling of the link, was 2% of a saturated run (perf).
    done_at: Option<Instant>,
}

impl ConstantServer {
    /// Applies the rate changes due at `ns`; true if the rate changed.
    fn apply_changes(&mut self, ns: u64) -> bool {
        let mut changed = false;
        while let Some(&(at, bps)) = self.changes.get(self.next_change) {
            if at > ns {
                break;
            }
            changed |= bps != self.bits_per_sec;
            self.bits_per_sec = bps;
            self.next_change += 1;
        }
        changed
    }

    /// Starts serializing `q` at scaled time `start`.
    fn start(&mut self, q: Queued, start: u128) {
        let bits = u128::from(q.wire_len).saturating_mul(8);
        let done_scaled = start.saturating_add(bits.saturating_mul(NS_PER_SEC));
        // The rate cannot change before the datagram is done (changes apply
        // when the next one starts), so its instant is computed once.
        let done_at = self.done_at(done_scaled);
        self.in_service = Some(InService {
            queued: q,
            done_scaled,
            done_at,
        });
    }

    /// The instant (rounded up to the ns) of scaled time `scaled`; `None` for
    /// a zero rate (never).
    fn done_at(&self, scaled: u128) -> Option<Instant> {
        if self.bits_per_sec == 0 {
            return None;
        }
        let ns = scaled.div_ceil(u128::from(self.bits_per_sec));
        Some(Instant::from_nanos(u64::try_from(ns).unwrap_or(u64::MAX)))
    }

    fn advance(&mut self, now: Instant, queue: &mut WaitQueue, line: &mut DelayLine) {
        while let Some(InService {
            done_scaled,
            done_at,
            ..
        }) = self.in_service
        {
            let Some(done) = done_at.filter(|&d| d <= now) else {
                return;
            };
            if let Some(service) = self.in_service.take() {
                line.push(done, service.queued.datagram);
            }
            // The next datagram starts the instant the previous one ends,
            // in exact scaled time (re-based on a rate change).
            if let Some(next) = queue.pop_front() {
                let start = if self.apply_changes(done.as_nanos()) {
                    u128::from(done.as_nanos()).saturating_mul(u128::from(self.bits_per_sec))
                } else {
                    done_scaled
                };
                self.start(next, start);
            }
        }
    }
}

/// Mahimahi delivery opportunities (see [`super::Capacity::Trace`]).
#[derive(Debug)]
pub(super) struct TraceServer {
    trace: Arc<Trace>,
    /// Index in the period of the next unused opportunity.
    next: usize,
    /// Start of the current period, ns since the epoch.
    base_ns: u64,
    /// Period length in ns; 0 means the trace never delivers.
    period_ns: u64,
    /// The datagram partly served by earlier opportunities, with the bytes
    /// it still needs.
    in_transit: Option<(Queued, u64)>,
}

impl TraceServer {
    fn new(trace: Arc<Trace>) -> TraceServer {
        let period_ns = trace.period_ms().saturating_mul(NS_PER_MS);
        TraceServer {
            trace,
            next: 0,
            base_ns: 0,
            period_ns,
            in_transit: None,
        }
    }

    /// Time of the next unused opportunity, ns; `None` if there is none ever.
    fn opportunity_at(&self) -> Option<u64> {
        if self.period_ns == 0 {
            return None;
        }
        let ms = *self.trace.opportunities_ms().get(self.next)?;
        Some(self.base_ns.saturating_add(ms.saturating_mul(NS_PER_MS)))
    }

    /// Marks the next opportunity used, wrapping to the next period as
    /// Mahimahi does (the base moves on by the last timestamp).
    fn burn(&mut self) {
        self.next = self.next.saturating_add(1);
        if self.next >= self.trace.opportunities_ms().len() {
            self.next = 0;
            self.base_ns = self.base_ns.saturating_add(self.period_ns);
        }
    }

    /// Burns every opportunity at or before `now` in O(log n), for an idle
    /// link (nothing to serve, so nothing else happens).
    fn skip_idle(&mut self, now: u64) {
        let ops = self.trace.opportunities_ms();
        if self.period_ns == 0 || now < self.base_ns {
            return;
        }
        // First opportunity of this period after `now`: its ms value is
        // above floor((now - base) / 1 ms).
        let rel_ms = (now - self.base_ns) / NS_PER_MS;
        let rest = ops.get(self.next..).unwrap_or(&[]);
        let found = first_above(rest, rel_ms);
        if found < rest.len() {
            self.next = self.next.saturating_add(found);
            return;
        }
        // The whole period is spent: jump over whole periods, then search
        // the one containing `now`.
        let next_base = self.base_ns.saturating_add(self.period_ns);
        let whole = now.saturating_sub(next_base) / self.period_ns;
        self.base_ns = next_base.saturating_add(whole.saturating_mul(self.period_ns));
        let rel_ms = now.saturating_sub(self.base_ns) / NS_PER_MS;
        // < len: the last timestamp is the period, which is > rel_ms
        // (unless the base saturated, when min() keeps the index valid).
        self.next = ops
            .partition_point(|&ms| ms <= rel_ms)
            .min(ops.len().saturating_sub(1));
    }

    fn advance(&mut self, now: Instant, queue: &mut WaitQueue, line: &mut DelayLine) {
        let now = now.as_nanos();
        loop {
            if self.in_transit.is_none() && queue.is_empty() {
                self.skip_idle(now);
                return;
            }
            let Some(at) = self.opportunity_at().filter(|&at| at <= now) else {
                return;
            };
            self.burn();
            self.use_opportunity(Instant::from_nanos(at), queue, line);
        }
    }

    /// Spends one opportunity's bytes on the datagram in transit and then on
    /// queued ones; unused bytes are lost.
    fn use_opportunity(&mut self, at: Instant, queue: &mut WaitQueue, line: &mut DelayLine) {
        let mut budget = OPPORTUNITY_BYTES;
        while budget > 0 {
            let (q, need) = match self.in_transit.take() {
                Some(t) => t,
                None => match queue.pop_front() {
                    Some(q) => {
                        let need = q.wire_len;
                        (q, need)
                    }
                    None => return,
                },
            };
            if need > budget {
                self.in_transit = Some((q, need - budget));
                return;
            }
            budget -= need;
            line.push(at, q.datagram);
        }
    }
}

/// The index of the first entry of `sorted` (ascending) above `ms`, as
/// `partition_point(|&x| x <= ms)` gives it, found by galloping from the
/// front. An idle trace link burns its past opportunities at every datagram
/// and timer, and the clock has moved only a few opportunities on since
/// the last time: a binary search over the whole rest of the trace (10^4 to
/// 10^5 timestamps, mostly out of cache) was 5% of ART-DQN's held-out
/// evaluation (perf); galloping costs the logarithm of the distance.
fn first_above(sorted: &[u64], ms: u64) -> usize {
    // Probes at 0, 1, 3, 7, ...: every entry before `bound / 2` is at or
    // below `ms` once a probe fails or runs off the end.
    let mut bound = 1usize;
    while sorted.get(bound - 1).is_some_and(|&x| x <= ms) {
        bound = bound.saturating_mul(2);
    }
    let lo = (bound / 2).min(sorted.len());
    let hi = bound.min(sorted.len());
    lo + sorted
        .get(lo..hi)
        .map_or(0, |window| window.partition_point(|&x| x <= ms))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Galloping finds what a binary search over the whole slice finds.
        #[test]
        fn first_above_is_partition_point(
            mut sorted in proptest::collection::vec(0u64..400, 0..300),
            ms in 0u64..450,
        ) {
            sorted.sort_unstable();
            prop_assert_eq!(first_above(&sorted, ms), sorted.partition_point(|&x| x <= ms));
        }
    }
}
