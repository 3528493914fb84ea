//! Seeds: one master seed per scenario, one derived stream per component.
//!
//! A scenario carries a single `u64` master seed. Every random component
//! (each link direction, each loss model, each endpoint) draws from its own
//! ChaCha stream seeded with [`derive_seed`]`(master, label)`, where `label`
//! names the component. Adding a component adds a new label and so a new,
//! independent stream: it never shifts the numbers another component sees,
//! which keeps old results reproducible when a scenario grows.
//!
//! Labels used by this crate (others pick their own, e.g. `"endpoint/client"`):
//!
//! | label | stream |
//! |---|---|
//! | [`LINK_UP`] (`"link/up"`) | the client-to-server link of a relay or two-node scenario |
//! | [`LINK_DOWN`] (`"link/down"`) | the server-to-client link |
//! | [`LOSS`] (`"loss"`) | inside a [`Link`](crate::link::Link): its loss process, derived from the link's seed |
//! | [`CORRUPT`] (`"corrupt"`) | inside a [`Link`](crate::link::Link): its corruption, derived from the link's seed |
//!
//! So a relay with master seed `m` drives its uplink loss with
//! `derive_seed(derive_seed(m, "link/up"), "loss")`.

use rand_chacha::rand_core::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Label of the client-to-server link direction.
pub const LINK_UP: &str = "link/up";
/// Label of the server-to-client link direction.
pub const LINK_DOWN: &str = "link/down";
/// Label of a link's loss process, derived from the link's own seed.
pub const LOSS: &str = "loss";
/// Label of a link's corruption, derived from the link's own seed: its own
/// stream, so turning corruption on never shifts which datagrams are lost.
pub const CORRUPT: &str = "corrupt";
/// Label of a slotted link's admission order (the order in which the
/// senders of one slot reach its buffer), derived from the link's own seed.
pub const ORDER: &str = "order";

/// FNV-1a 64-bit offset basis.
const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a 64-bit prime.
const FNV_PRIME: u64 = 0x0000_0100_0000_01b3;

/// Derives the seed of one component from a scenario's master seed.
///
/// Exists so that every random component gets its own stream and adding a
/// component never shifts another's (see the module doc).
///
/// The function is fixed forever (results depend on it): with `h` the
/// 64-bit FNV-1a hash of `label`'s UTF-8 bytes and `mix` the SplitMix64
/// finaliser, the result is `mix(mix(master) ^ h)`. Only wrapping integer
/// operations are involved, so it is identical on every platform and release.
pub fn derive_seed(master: u64, label: &str) -> u64 {
    splitmix64(splitmix64(master) ^ fnv1a64(label.as_bytes()))
}

/// 64-bit FNV-1a over `bytes`.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(FNV_PRIME)
    })
}

/// The SplitMix64 output function (Steele, Lea, Flood 2014): a bijective
/// avalanche mix of a 64-bit word.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The RNG every random stage of this crate uses: ChaCha8 seeded from a `u64`
/// (`rand_core`'s portable `seed_from_u64` expansion), reproducible across
/// platforms.
pub(crate) fn rng_from_seed(seed: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed)
}

/// A uniform `f64` in `[0, 1)` from the top 53 bits of one `u64` draw.
///
/// Written out instead of `rand`'s `gen::<f64>()` so the mapping from the
/// ChaCha stream to numbers can never change under us.
pub(crate) fn unit_f64(rng: &mut ChaCha8Rng) -> f64 {
    use rand_chacha::rand_core::RngCore;
    // 2^-53: every value is exactly representable, result < 1.
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn fnv_matches_reference_vectors() {
        // Published FNV-1a 64 test vectors.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn splitmix_matches_reference_vector() {
        // First outputs of the reference SplitMix64 generator seeded with 0:
        // the generator adds the golden gamma before mixing, as `splitmix64`
        // does, so state 0 gives its first output and state gamma its second.
        assert_eq!(splitmix64(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(splitmix64(0x9e37_79b9_7f4a_7c15), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn derived_seeds_are_pinned() {
        // Pinned values: a change here silently changes every published run.
        let pinned = [
            (0u64, "link/up", 0xe4bd_1c39_10d7_b55d_u64),
            (0, "link/down", 0x505b_fdbe_396f_331d),
            (1, "link/up", 0x8494_64a1_99c0_0641),
            (42, "loss", 0x3be6_8ae0_76da_30ad),
            (u64::MAX, "endpoint/client", 0x483c_f8d9_12b3_a2c2),
        ];
        for (master, label, expected) in pinned {
            assert_eq!(derive_seed(master, label), expected, "{master} {label}");
        }
    }

    #[test]
    fn labels_and_masters_give_distinct_streams() {
        let labels = [
            LINK_UP,
            LINK_DOWN,
            LOSS,
            CORRUPT,
            "endpoint/client",
            "endpoint/server",
        ];
        let mut seen = std::collections::BTreeSet::new();
        for master in 0..64u64 {
            for l in labels {
                assert!(
                    seen.insert(derive_seed(master, l)),
                    "collision {master} {l}"
                );
            }
        }
    }

    #[test]
    fn unit_f64_is_in_range_and_seeded() {
        let mut a = rng_from_seed(7);
        let mut b = rng_from_seed(7);
        let mut c = rng_from_seed(8);
        let xs: Vec<f64> = (0..1000).map(|_| unit_f64(&mut a)).collect();
        let ys: Vec<f64> = (0..1000).map(|_| unit_f64(&mut b)).collect();
        let zs: Vec<f64> = (0..1000).map(|_| unit_f64(&mut c)).collect();
        assert_eq!(xs, ys);
        assert_ne!(xs, zs);
        assert!(xs.iter().all(|x| (0.0..1.0).contains(x)));
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        assert!((mean - 0.5).abs() < 0.05, "mean {mean}");
    }

    proptest! {
        #[test]
        fn one_bit_of_master_changes_about_half_the_output(master: u64, bit in 0u32..64) {
            let a = derive_seed(master, LINK_UP);
            let b = derive_seed(master ^ (1u64 << bit), LINK_UP);
            let flipped = (a ^ b).count_ones();
            prop_assert!((8..=56).contains(&flipped), "flipped {flipped}");
        }
    }
}
