//! [`Slots`]: the endpoint's connections by handle.
//!
//! Every datagram, timer and poll looks its connection up several times
//! (the route's target, its deadline, its endpoint events, its reset
//! tokens), so the lookup must be cheap for the one or two connections of
//! a client or a simulated node, and stay O(log n) for a server's
//! thousands. Handles are handed out in increasing order and never reused,
//! which a map can use: the handles are appended to a sorted vector and
//! found by binary search, with the slots in a vector beside them. A
//! removed connection leaves a hole (its slot `None`) until the holes are
//! half of the vector, when both are compacted: removal stays O(1)
//! amortised, and a long-lived connection among many short ones does not
//! pin memory for every handle issued since (a vector indexed by handle
//! would). Iteration is in handle order, as the `BTreeMap` this replaces
//! gave it (perf: its searches were about 2% of a simulated bulk transfer).

/// Values keyed by strictly increasing `usize` handles.
#[derive(Debug)]
pub(super) struct Slots<V> {
    /// Handles, sorted; a removed one stays until the next compaction.
    handles: Vec<usize>,
    /// `values[k]` belongs to `handles[k]`; `None` once removed.
    values: Vec<Option<V>>,
    /// Values present.
    len: usize,
}

impl<V> Default for Slots<V> {
    fn default() -> Self {
        Slots {
            handles: Vec::new(),
            values: Vec::new(),
            len: 0,
        }
    }
}

impl<V> Slots<V> {
    /// Adds `value` under `handle`, which must be above every handle added
    /// before; a handle that is not is refused and `value` handed back.
    pub(super) fn insert(&mut self, handle: usize, value: V) -> Result<(), V> {
        if self.handles.last().is_some_and(|&last| last >= handle) {
            return Err(value);
        }
        self.handles.push(handle);
        self.values.push(Some(value));
        self.len += 1;
        Ok(())
    }

    fn index(&self, handle: usize) -> Option<usize> {
        self.handles.binary_search(&handle).ok()
    }

    /// The value under `handle`.
    pub(super) fn get(&self, handle: &usize) -> Option<&V> {
        let k = self.index(*handle)?;
        self.values.get(k)?.as_ref()
    }

    /// The value under `handle`, mutably.
    pub(super) fn get_mut(&mut self, handle: &usize) -> Option<&mut V> {
        let k = self.index(*handle)?;
        self.values.get_mut(k)?.as_mut()
    }

    /// Takes the value under `handle` out.
    pub(super) fn remove(&mut self, handle: &usize) -> Option<V> {
        let k = self.index(*handle)?;
        let value = self.values.get_mut(k)?.take()?;
        self.len -= 1;
        if self.values.len() >= 2 * self.len + 16 {
            self.compact();
        }
        Some(value)
    }

    /// Drops the holes removals left.
    fn compact(&mut self) {
        let mut values = self.values.iter();
        self.handles
            .retain(|_| values.next().is_some_and(Option::is_some));
        self.values.retain(Option::is_some);
    }

    /// Number of values.
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The handles present, in increasing order.
    pub(super) fn keys(&self) -> impl Iterator<Item = &usize> + '_ {
        self.handles
            .iter()
            .zip(&self.values)
            .filter(|(_, v)| v.is_some())
            .map(|(h, _)| h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    proptest! {
        /// Insertions of increasing handles and removals in any order:
        /// the answers are a `BTreeMap`'s, through compactions.
        #[test]
        fn behaves_as_a_btree_map(ops in proptest::collection::vec((any::<bool>(), 0usize..400), 0..800)) {
            let mut slots = Slots::default();
            let mut model = BTreeMap::new();
            let mut next = 0;
            for (add, pick) in ops {
                if add {
                    prop_assert!(slots.insert(next, next * 10).is_ok());
                    model.insert(next, next * 10);
                    next += 1;
                } else {
                    prop_assert_eq!(slots.remove(&pick), model.remove(&pick));
                }
                prop_assert_eq!(slots.len(), model.len());
                prop_assert_eq!(slots.get(&pick), model.get(&pick));
                if let Some(v) = slots.get_mut(&pick) {
                    *v += 1;
                }
                if let Some(v) = model.get_mut(&pick) {
                    *v += 1;
                }
                prop_assert_eq!(slots.keys().collect::<Vec<_>>(), model.keys().collect::<Vec<_>>());
                prop_assert!(slots.values.len() < 2 * slots.len() + 16, "holes are bounded");
            }
        }
    }

    #[test]
    fn refuses_a_handle_out_of_order() {
        let mut slots = Slots::default();
        assert!(slots.insert(5, 'a').is_ok());
        assert_eq!(slots.insert(5, 'b'), Err('b'));
        assert_eq!(slots.insert(3, 'c'), Err('c'));
        assert_eq!(slots.get(&5), Some(&'a'));
        assert_eq!(slots.len(), 1);
    }
}
