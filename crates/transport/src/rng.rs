//! Where the stack's randomness comes from, and the generator that carries it.
//!
//! The transport never reads the OS RNG (it is sans-IO). Its caller hands it
//! an [`RngSeed`], and everything random (connection IDs, stateless reset
//! tokens, the key that seals address-validation tokens, a policy's coin
//! flips) follows from it, but for the keys an operator configures
//! ([`crate::StaticKeys`]: the token key and reset tokens then come from
//! them):
//!
//! - [`RngSeed::Fixed`]: a number. Two endpoints with the same number make
//!   the same choices, which is what the simulator needs (a scenario and a
//!   seed determine a run bit for bit) and what tests that ask for it want.
//!   Identifiers are then *guessable* by anyone who knows the number: never
//!   use it on a real network.
//! - [`RngSeed::Secret`]: 256 bits the caller drew from the operating
//!   system (`artq serve` and `artq get` do, unless `--seed` is given).
//!   Identifiers and tokens are then unpredictable to anyone who does not
//!   know the 256 bits.
//!
//! [`StackRng`] is the generator both kinds seed: ChaCha8 for a fixed seed
//! (the generator the simulator has always used, so its results do not move),
//! ChaCha20 for a secret one (the full-strength cipher; ChaCha8 is believed
//! secure too, but nothing is gained by a smaller margin where secrets are
//! drawn). Both are cryptographically secure generators; only the seed
//! decides whether the output is a secret.

use core::fmt;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::{ChaCha20Rng, ChaCha8Rng};

/// The seed of an endpoint's (or a connection's) randomness.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum RngSeed {
    /// Reproducible: every identifier and secret follows from this number.
    /// For the simulator and for tests; guessable on a real network.
    Fixed(u64),
    /// Unpredictable: 256 bits the caller drew from the OS RNG.
    Secret([u8; 32]),
}

impl fmt::Debug for RngSeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RngSeed::Fixed(n) => f.debug_tuple("Fixed").field(n).finish(),
            // The secret seed determines every token key: never print it.
            RngSeed::Secret(_) => f.write_str("Secret(..)"),
        }
    }
}

/// A ChaCha generator seeded by an [`RngSeed`] (see the module doc).
#[derive(Clone)]
pub struct StackRng(Inner);

#[derive(Clone)]
enum Inner {
    Fixed(ChaCha8Rng),
    Secret(ChaCha20Rng),
}

impl fmt::Debug for StackRng {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Inner::Fixed(_) => f.write_str("StackRng(ChaCha8, fixed seed)"),
            Inner::Secret(_) => f.write_str("StackRng(ChaCha20, secret seed)"),
        }
    }
}

impl StackRng {
    /// The generator for `seed`. A fixed seed gives exactly
    /// `ChaCha8Rng::seed_from_u64(n)`.
    pub fn new(seed: RngSeed) -> Self {
        match seed {
            RngSeed::Fixed(n) => StackRng(Inner::Fixed(ChaCha8Rng::seed_from_u64(n))),
            RngSeed::Secret(k) => StackRng(Inner::Secret(ChaCha20Rng::from_seed(k))),
        }
    }

    /// An independent generator on another ChaCha stream of the same seed:
    /// drawing from it leaves this generator's sequence untouched (so, for
    /// instance, token keys and Retry choices never shift the connection
    /// IDs and connection seeds a fixed-seed endpoint has always drawn).
    pub fn fork(&self, stream: u64) -> Self {
        let mut forked = self.clone();
        match &mut forked.0 {
            Inner::Fixed(r) => {
                r.set_stream(stream);
                r.set_word_pos(0);
            }
            Inner::Secret(r) => {
                r.set_stream(stream);
                r.set_word_pos(0);
            }
        }
        forked
    }

    /// The seed of a child generator (a connection's): a number for a fixed
    /// seed (as the endpoint has always drawn it), 256 fresh bits otherwise.
    pub fn child_seed(&mut self) -> RngSeed {
        match &mut self.0 {
            Inner::Fixed(r) => RngSeed::Fixed(r.gen()),
            Inner::Secret(r) => RngSeed::Secret(r.gen()),
        }
    }
}

impl RngCore for StackRng {
    fn next_u32(&mut self) -> u32 {
        match &mut self.0 {
            Inner::Fixed(r) => r.next_u32(),
            Inner::Secret(r) => r.next_u32(),
        }
    }

    fn next_u64(&mut self) -> u64 {
        match &mut self.0 {
            Inner::Fixed(r) => r.next_u64(),
            Inner::Secret(r) => r.next_u64(),
        }
    }

    fn fill_bytes(&mut self, dest: &mut [u8]) {
        match &mut self.0 {
            Inner::Fixed(r) => r.fill_bytes(dest),
            Inner::Secret(r) => r.fill_bytes(dest),
        }
    }

    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed seed is exactly the ChaCha8 the simulator always used.
    #[test]
    fn fixed_seed_is_chacha8_from_u64() {
        let mut a = StackRng::new(RngSeed::Fixed(42));
        let mut b = ChaCha8Rng::seed_from_u64(42);
        for _ in 0..8 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    /// A fork never disturbs its parent's sequence, and differs from it.
    #[test]
    fn forks_are_independent() {
        for seed in [RngSeed::Fixed(3), RngSeed::Secret([9; 32])] {
            let mut plain = StackRng::new(seed);
            let mut parent = StackRng::new(seed);
            let mut fork = parent.fork(1);
            let f: [u64; 4] = core::array::from_fn(|_| fork.next_u64());
            let p: [u64; 4] = core::array::from_fn(|_| parent.next_u64());
            let q: [u64; 4] = core::array::from_fn(|_| plain.next_u64());
            assert_eq!(p, q);
            assert_ne!(f, p);
        }
    }

    /// Different secret seeds give different streams; the Debug output
    /// never shows the secret.
    #[test]
    fn secret_seeds_differ_and_stay_hidden() {
        let mut a = StackRng::new(RngSeed::Secret([1; 32]));
        let mut b = StackRng::new(RngSeed::Secret([2; 32]));
        assert_ne!(a.next_u64(), b.next_u64());
        assert_eq!(format!("{:?}", RngSeed::Secret([7; 32])), "Secret(..)");
    }
}
