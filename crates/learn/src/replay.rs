//! Experience replay (Mnih et al. 2015): a bounded ring of past
//! transitions, sampled uniformly so a minibatch is not a run of
//! correlated consecutive steps.

use rand::Rng;

/// A bounded memory of items: once full, each new item replaces the
/// oldest. Sampling draws from the caller's RNG only, so a seeded run
/// samples the same minibatches.
#[derive(Clone, Debug)]
pub struct ReplayMemory<T> {
    items: Vec<T>,
    capacity: usize,
    /// Where the next item goes once the memory is full.
    next: usize,
}

impl<T: Clone> ReplayMemory<T> {
    /// An empty memory of at most `capacity` items (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Self {
            items: Vec::with_capacity(capacity.min(4096)),
            capacity,
            next: 0,
        }
    }

    /// Remember `item`, forgetting the oldest one if full.
    pub fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            self.items.push(item);
        } else {
            self.items[self.next] = item;
            self.next = (self.next + 1) % self.capacity;
        }
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.items.len()
    }

    /// Nothing remembered yet.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }

    /// Most items held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// `n` items drawn uniformly with replacement, or nothing when the
    /// memory holds fewer than `n`.
    pub fn sample(&self, n: usize, rng: &mut impl Rng) -> Option<Vec<T>> {
        if n == 0 || self.items.len() < n {
            return None;
        }
        Some(
            (0..n)
                .map(|_| self.items[rng.gen_range(0..self.items.len())].clone())
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    #[test]
    fn keeps_the_newest_items_up_to_capacity() {
        let mut m = ReplayMemory::new(3);
        for i in 0..5 {
            m.push(i);
        }
        assert_eq!(m.len(), 3);
        let mut held = m.items.clone();
        held.sort();
        assert_eq!(held, vec![2, 3, 4]);
    }

    #[test]
    fn sampling_is_determined_by_the_seed() {
        let mut m = ReplayMemory::new(1000);
        for i in 0..1000 {
            m.push(i);
        }
        let draw = |seed| m.sample(32, &mut ChaCha8Rng::seed_from_u64(seed)).unwrap();
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
        assert!(m.sample(1001, &mut ChaCha8Rng::seed_from_u64(1)).is_none());
        assert!(m.sample(0, &mut ChaCha8Rng::seed_from_u64(1)).is_none());
    }
}
