//! [`WorkSet`]: the ordered set behind the endpoint's ready set and
//! deadline index.
//!
//! Both are touched several times per datagram (a connection enters the
//! ready set when a datagram reaches it and leaves when it has nothing to
//! send; its deadline moves with almost every packet it sends), yet most
//! endpoints hold a handful of entries: a client has one connection, a
//! simulated server a few. A `BTreeSet` pays for its generality there:
//! searches through node handles, and a root node freed when the set
//! empties and allocated again at the next insertion (perf: about 2-3% of
//! a simulated bulk transfer went to the two sets). A sorted vector is
//! cheaper at that size but costs O(n) per insertion, which a server with
//! thousands of ready connections cannot afford. So the set is a sorted
//! vector up to [`SPILL`] entries and a B-tree above, and returns to the
//! vector once it has shrunk to [`UNSPILL`] (the gap keeps a set that
//! hovers around the bound from moving back and forth). Either way it is
//! the same ordered set: what it holds and the order it yields never
//! depend on its representation.

use core::ops::{Bound, RangeBounds};
use std::collections::BTreeSet;

/// Entries above which the set moves into a B-tree.
const SPILL: usize = 32;
/// Entries at or below which a B-tree set moves back into the vector.
const UNSPILL: usize = SPILL / 2;

/// An ordered set of small `Copy` keys, cheap when it holds few (module
/// doc) and O(log n) when it holds many.
#[derive(Clone, Debug)]
pub(super) struct WorkSet<T: Ord + Copy> {
    /// Sorted and free of repeats while `tree` is `None`; kept empty (its
    /// allocation kept for the next return) while the tree holds the set.
    small: Vec<T>,
    /// The set, once it outgrew the vector.
    tree: Option<BTreeSet<T>>,
}

impl<T: Ord + Copy> Default for WorkSet<T> {
    fn default() -> Self {
        WorkSet {
            small: Vec::new(),
            tree: None,
        }
    }
}

impl<T: Ord + Copy> WorkSet<T> {
    /// Adds `v`; `false` if it was there.
    pub(super) fn insert(&mut self, v: T) -> bool {
        if let Some(tree) = self.tree.as_mut() {
            return tree.insert(v);
        }
        // Entries mostly arrive in order (handles, later deadlines): try the
        // end before searching.
        let at = match self.small.last() {
            Some(last) if *last < v => self.small.len(),
            _ => match self.small.binary_search(&v) {
                Ok(_) => return false,
                Err(at) => at,
            },
        };
        self.small.insert(at, v);
        if self.small.len() > SPILL {
            self.tree = Some(self.small.drain(..).collect());
        }
        true
    }

    /// Removes `v`; `false` if it was not there.
    pub(super) fn remove(&mut self, v: &T) -> bool {
        let Some(tree) = self.tree.as_mut() else {
            return match self.small.binary_search(v) {
                Ok(at) => {
                    self.small.remove(at);
                    true
                }
                Err(_) => false,
            };
        };
        let removed = tree.remove(v);
        if tree.len() <= UNSPILL {
            self.small.extend(tree.iter().copied());
            self.tree = None;
        }
        removed
    }

    /// Removes `old`, if there, and adds `new`: a moved deadline. In the
    /// vector, an entry whose new key keeps its place among its neighbours
    /// (a connection's deadline usually moves less than the gap to the
    /// next one, and with one connection there is no neighbour at all) is
    /// overwritten where it is, one search instead of two and no shifting.
    pub(super) fn replace(&mut self, old: &T, new: T) {
        if self.tree.is_none() {
            if let Ok(at) = self.small.binary_search(old) {
                let after_prev = at == 0 || self.small.get(at - 1).is_some_and(|p| *p < new);
                let before_next = self.small.get(at + 1).is_none_or(|n| new < *n);
                if after_prev && before_next {
                    if let Some(entry) = self.small.get_mut(at) {
                        *entry = new;
                    }
                    return;
                }
            }
        }
        // The new entry goes in before the old one leaves: a B-tree of one
        // entry then never empties, so its node is not freed and
        // allocated again at every move.
        self.insert(new);
        if *old != new {
            self.remove(old);
        }
    }

    /// The least entry.
    pub(super) fn first(&self) -> Option<T> {
        match &self.tree {
            Some(tree) => tree.first().copied(),
            None => self.small.first().copied(),
        }
    }

    /// The entries in order.
    pub(super) fn iter(&self) -> Iter<'_, T> {
        self.range::<core::ops::RangeFull>(..)
    }

    /// The entries within `range`, in order.
    pub(super) fn range<R: RangeBounds<T>>(&self, range: R) -> Iter<'_, T> {
        match &self.tree {
            Some(tree) => Iter::Tree(tree.range(range)),
            None => {
                let from = match range.start_bound() {
                    Bound::Included(v) => self.small.partition_point(|x| x < v),
                    Bound::Excluded(v) => self.small.partition_point(|x| x <= v),
                    Bound::Unbounded => 0,
                };
                let to = match range.end_bound() {
                    Bound::Included(v) => self.small.partition_point(|x| x <= v),
                    Bound::Excluded(v) => self.small.partition_point(|x| x < v),
                    Bound::Unbounded => self.small.len(),
                };
                Iter::Small(
                    self.small
                        .get(from..to.max(from))
                        .unwrap_or_default()
                        .iter(),
                )
            }
        }
    }

    /// Nothing, as an iterator of the set's type.
    pub(super) fn none(&self) -> Iter<'_, T> {
        Iter::Small([].iter())
    }

    /// Number of entries.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.tree.as_ref().map_or(self.small.len(), BTreeSet::len)
    }
}

/// Entries of a [`WorkSet`] in order, from either representation (one
/// concrete type, so that a caller's loop compiles to a plain one).
#[derive(Debug)]
pub(super) enum Iter<'a, T> {
    /// From the sorted vector.
    Small(core::slice::Iter<'a, T>),
    /// From the B-tree.
    Tree(std::collections::btree_set::Range<'a, T>),
}

impl<T: Copy> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        match self {
            Iter::Small(it) => it.next().copied(),
            Iter::Tree(it) => it.next().copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u8),
        Remove(u8),
        Replace(u8, u8),
        Range(u8, u8),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => any::<u8>().prop_map(Op::Insert),
            2 => any::<u8>().prop_map(Op::Remove),
            2 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Replace(a, b)),
            1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Range(a, b)),
        ]
    }

    proptest! {
        /// Whatever it is asked, the set answers as a `BTreeSet` would,
        /// through growth past the spill bound and shrinkage back.
        #[test]
        fn behaves_as_a_btree_set(ops in proptest::collection::vec(op(), 0..600)) {
            let mut set = WorkSet::default();
            let mut model = BTreeSet::new();
            for op in ops {
                match op {
                    Op::Insert(v) => prop_assert_eq!(set.insert(v), model.insert(v)),
                    Op::Remove(v) => prop_assert_eq!(set.remove(&v), model.remove(&v)),
                    Op::Replace(a, b) => {
                        set.replace(&a, b);
                        model.remove(&a);
                        model.insert(b);
                        let got: Vec<u8> = set.iter().collect();
                        let want: Vec<u8> = model.iter().copied().collect();
                        prop_assert_eq!(got, want);
                    }
                    Op::Range(a, b) => {
                        let want: Vec<u8> = model.range(a..=a.max(b)).copied().collect();
                        let got: Vec<u8> = set.range(a..=a.max(b)).collect();
                        prop_assert_eq!(got, want);
                        let want: Vec<u8> = model.range(a..a.max(b)).copied().collect();
                        let got: Vec<u8> = set.range(a..a.max(b)).collect();
                        prop_assert_eq!(got, want);
                        let want: Vec<u8> = model.range(a..).copied().collect();
                        let got: Vec<u8> = set.range(a..).collect();
                        prop_assert_eq!(got, want);
                    }
                }
                prop_assert_eq!(set.len(), model.len());
                prop_assert_eq!(set.first(), model.first().copied());
                prop_assert_eq!(set.iter().collect::<Vec<_>>(), model.iter().copied().collect::<Vec<_>>());
            }
        }
    }

    #[test]
    fn spills_into_a_tree_and_returns() {
        let mut set = WorkSet::default();
        for v in 0..=SPILL {
            set.insert(v);
        }
        assert!(set.tree.is_some(), "past the bound it is a tree");
        for v in 0..SPILL - UNSPILL {
            set.remove(&v);
        }
        assert!(set.tree.is_some(), "above the lower bound it stays a tree");
        set.remove(&(SPILL - UNSPILL));
        assert!(
            set.tree.is_none(),
            "shrunk to the lower bound it is a vector"
        );
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            (SPILL - UNSPILL + 1..=SPILL).collect::<Vec<_>>()
        );
    }
}
