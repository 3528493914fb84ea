//! The simulator's agenda: when each node and each link next wants to run.
//!
//! Every node and every link has at most one pending event, its next
//! timeout or service instant. The agenda keeps exactly those, one entry per
//! target, in an indexed binary heap keyed by `(time, seq)`: rescheduling a
//! target moves its entry in place instead of leaving a stale copy behind.
//! The lazy heap this replaces pushed a new entry each time a target's time
//! moved (a paced sender's timer moves with every packet, a loss-detection
//! timer with every ACK) and skipped the stale ones when they surfaced; on a
//! saturated 100 Mbit/s link its pops were 4% of a run's time, and the heap
//! held thousands of dead entries per live one. The order is the same:
//! `seq` still counts schedulings, so simultaneous events run in the order
//! they were scheduled, and a run is bit-for-bit what it was.
//!
//! A simulation of one or two flows has four to six targets, and for so
//! few the heap's bookkeeping (a position update per level, each sift
//! through bounds-checked tables) cost more than it saved: about 5% of a
//! saturated run's instructions went to the agenda. So up to [`SMALL`]
//! entries the array is kept in no order, a rescheduling writes its entry
//! in place and the earliest is found by a scan; past it the array is made
//! a heap and kept one. Keys are unique, so both find the same earliest
//! entry, and a run does not depend on which form the agenda had.

use wire::time::Instant;

/// What an event refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Target {
    /// The node at this index: its timeout.
    Node(usize),
    /// The link at this index: its next delivery or service instant.
    Link(usize),
}

/// One pending event.
#[derive(Clone, Copy, Debug)]
struct Entry {
    at: Instant,
    seq: u64,
    target: Target,
}

impl Entry {
    fn key(&self) -> (Instant, u64) {
        (self.at, self.seq)
    }
}

/// Entries up to which the agenda is a plain array (module doc).
const SMALL: usize = 8;

/// The pending events, earliest first; see the module doc.
#[derive(Debug, Default)]
pub(super) struct Agenda {
    /// The entries: in no order while there are at most [`SMALL`], a
    /// binary min-heap on `(at, seq)` above.
    heap: Vec<Entry>,
    /// Where node `n`'s entry sits in `heap`, if it has one.
    node_pos: Vec<Option<usize>>,
    /// Where link `l`'s entry sits in `heap`, if it has one.
    link_pos: Vec<Option<usize>>,
    /// Schedulings so far (the tie-break between simultaneous events).
    seq: u64,
}

impl Agenda {
    /// The instant `target` is scheduled at, if it is.
    pub fn scheduled(&self, target: Target) -> Option<Instant> {
        let i = self.pos(target)?;
        self.heap.get(i).map(|e| e.at)
    }

    /// Schedules `target` at `at` (`None`: not at all). An unchanged instant
    /// keeps the entry and its place among simultaneous events; a changed
    /// one counts as a new scheduling.
    pub fn schedule(&mut self, target: Target, at: Option<Instant>) {
        if at == self.scheduled(target) {
            return;
        }
        let pos = self.pos(target);
        let Some(at) = at else {
            self.remove(target);
            return;
        };
        self.seq = self.seq.wrapping_add(1);
        let entry = Entry {
            at,
            seq: self.seq,
            target,
        };
        match pos {
            // Moved: the entry takes its new key where it is and, in a
            // heap, sifts to its place (half the work of a removal and an
            // insertion). The keys are unique (`seq`), so the order of pops
            // does not depend on the heap's shape.
            Some(i) => {
                self.put(i, entry);
                if !self.is_small() {
                    let i = self.sift_up(i);
                    self.sift_down(i);
                }
            }
            None => {
                let i = self.heap.len();
                self.heap.push(entry);
                self.set_pos(target, Some(i));
                match self.heap.len() {
                    n if n <= SMALL => {}
                    // Just outgrew the plain array: make it a heap.
                    n if n == SMALL + 1 => {
                        for k in (0..n / 2).rev() {
                            self.sift_down(k);
                        }
                    }
                    _ => {
                        self.sift_up(i);
                    }
                }
            }
        }
    }

    /// Whether the entries are a plain array (module doc).
    fn is_small(&self) -> bool {
        self.heap.len() <= SMALL
    }

    /// Where the earliest entry is.
    fn first(&self) -> Option<usize> {
        if !self.is_small() {
            return Some(0);
        }
        let mut best: Option<(usize, (Instant, u64))> = None;
        for (i, e) in self.heap.iter().enumerate() {
            if best.is_none_or(|(_, key)| e.key() < key) {
                best = Some((i, e.key()));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The earliest event: its instant and target.
    pub fn peek(&self) -> Option<(Instant, Target)> {
        let e = self.heap.get(self.first()?)?;
        Some((e.at, e.target))
    }

    /// Removes and returns the earliest event (the simulator peeks, then
    /// removes by target; the tests pop).
    #[cfg(test)]
    pub fn pop(&mut self) -> Option<(Instant, Target)> {
        let first = *self.heap.get(self.first()?)?;
        self.remove(first.target);
        Some((first.at, first.target))
    }

    /// Forgets `target`'s event, if it has one.
    pub fn remove(&mut self, target: Target) {
        let Some(i) = self.pos(target) else {
            return;
        };
        self.set_pos(target, None);
        let Some(last) = self.heap.pop() else {
            return;
        };
        if i < self.heap.len() {
            // The last entry fills the hole.
            self.put(i, last);
            // In a heap, the entry moved into the hole may belong above or
            // below it; a heap that shrank to the plain array's size is a
            // valid plain array as it is.
            if !self.is_small() {
                let i = self.sift_up(i);
                self.sift_down(i);
            }
        }
    }

    fn pos(&self, target: Target) -> Option<usize> {
        match target {
            Target::Node(n) => self.node_pos.get(n).copied().flatten(),
            Target::Link(l) => self.link_pos.get(l).copied().flatten(),
        }
    }

    fn set_pos(&mut self, target: Target, pos: Option<usize>) {
        let (table, index) = match target {
            Target::Node(n) => (&mut self.node_pos, n),
            Target::Link(l) => (&mut self.link_pos, l),
        };
        if table.len() <= index {
            table.resize(index + 1, None);
        }
        if let Some(slot) = table.get_mut(index) {
            *slot = pos;
        }
    }

    /// Moves the entry at `i` up to its place; returns where it ended.
    /// The entry is held aside while the parents it passes move down into
    /// the hole, one write and one position update per level.
    fn sift_up(&mut self, mut i: usize) -> usize {
        let Some(&entry) = self.heap.get(i) else {
            return i;
        };
        while i > 0 {
            let parent = (i - 1) / 2;
            let Some(&above) = self.heap.get(parent) else {
                break;
            };
            if entry.key() >= above.key() {
                break;
            }
            self.put(i, above);
            i = parent;
        }
        self.put(i, entry);
        i
    }

    /// Moves the entry at `i` down to its place, the same way.
    fn sift_down(&mut self, mut i: usize) {
        let Some(&entry) = self.heap.get(i) else {
            return;
        };
        loop {
            let left = 2 * i + 1;
            let right = left + 1;
            let child = match (self.heap.get(left), self.heap.get(right)) {
                (Some(l), Some(r)) if r.key() < l.key() => right,
                (Some(_), _) => left,
                (None, _) => break,
            };
            let Some(&below) = self.heap.get(child) else {
                break;
            };
            if below.key() >= entry.key() {
                break;
            }
            self.put(i, below);
            i = child;
        }
        self.put(i, entry);
    }

    /// Writes `entry` at `i` and records where it is.
    fn put(&mut self, i: usize, entry: Entry) {
        if let Some(slot) = self.heap.get_mut(i) {
            *slot = entry;
        }
        self.set_pos(entry.target, Some(i));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    fn t(us: u64) -> Instant {
        Instant::from_micros(us)
    }

    /// The lazy heap the agenda replaced, as the reference: a new entry per
    /// changed scheduling, stale ones skipped when popped.
    #[derive(Default)]
    struct Lazy {
        heap: BinaryHeap<Reverse<(Instant, u64, Target)>>,
        live: std::collections::BTreeMap<Target, (Instant, u64)>,
        seq: u64,
    }

    impl Lazy {
        fn schedule(&mut self, target: Target, at: Option<Instant>) {
            if at == self.live.get(&target).map(|&(t, _)| t) {
                return;
            }
            self.live.remove(&target);
            if let Some(at) = at {
                self.seq += 1;
                self.heap.push(Reverse((at, self.seq, target)));
                self.live.insert(target, (at, self.seq));
            }
        }

        fn pop(&mut self) -> Option<(Instant, Target)> {
            while let Some(Reverse((at, seq, target))) = self.heap.pop() {
                if self.live.get(&target) == Some(&(at, seq)) {
                    self.live.remove(&target);
                    return Some((at, target));
                }
            }
            None
        }
    }

    #[test]
    fn simultaneous_events_run_in_scheduling_order() {
        let mut agenda = Agenda::default();
        agenda.schedule(Target::Node(2), Some(t(5)));
        agenda.schedule(Target::Link(0), Some(t(5)));
        agenda.schedule(Target::Node(0), Some(t(5)));
        agenda.schedule(Target::Node(1), Some(t(3)));
        // Same instant again: keeps its place.
        agenda.schedule(Target::Node(2), Some(t(5)));
        let order: Vec<_> = std::iter::from_fn(|| agenda.pop()).collect();
        assert_eq!(
            order,
            [
                (t(3), Target::Node(1)),
                (t(5), Target::Node(2)),
                (t(5), Target::Link(0)),
                (t(5), Target::Node(0)),
            ]
        );
    }

    #[test]
    fn rescheduling_and_removal_leave_one_entry_per_target() {
        let mut agenda = Agenda::default();
        agenda.schedule(Target::Node(0), Some(t(10)));
        agenda.schedule(Target::Node(0), Some(t(20)));
        agenda.schedule(Target::Link(3), Some(t(15)));
        agenda.schedule(Target::Link(3), None);
        assert_eq!(agenda.scheduled(Target::Link(3)), None);
        assert_eq!(agenda.heap.len(), 1);
        assert_eq!(agenda.peek(), Some((t(20), Target::Node(0))));
        agenda.remove(Target::Node(0));
        assert_eq!(agenda.pop(), None);
    }

    proptest::proptest! {
        /// Any sequence of schedulings and pops gives the lazy heap's order,
        /// the agenda growing past the plain array's size and back.
        #[test]
        fn same_order_as_the_lazy_heap(
            ops in proptest::collection::vec((0usize..24, proptest::option::of(0u64..50), proptest::bool::ANY), 0..600)
        ) {
            let mut agenda = Agenda::default();
            let mut lazy = Lazy::default();
            for (who, at, pop) in ops {
                if pop {
                    proptest::prop_assert_eq!(agenda.pop(), lazy.pop());
                } else {
                    let target = if who % 2 == 0 { Target::Node(who / 2) } else { Target::Link(who / 2) };
                    agenda.schedule(target, at.map(t));
                    lazy.schedule(target, at.map(t));
                }
            }
            loop {
                let (a, b) = (agenda.pop(), lazy.pop());
                proptest::prop_assert_eq!(a, b);
                if a.is_none() {
                    break;
                }
            }
        }
    }
}
