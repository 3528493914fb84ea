//! End-to-end benchmarks of artq against independent QUIC peers.
//!
//! Why this crate exists: DESIGN.md keeps speed targets out of the tests
//! ("Tests assert behaviour, not wall-clock time") and in benchmarks measured
//! as a ratio against a peer in the same run, on the same machine. The
//! `loopback` binary is that benchmark for bulk goodput: quinn to quinn
//! in-process, then `artq serve` to `artq get` as processes, one file, one
//! loopback, and the ratio artq/quinn.
//!
//! It is a workspace member but not a default member and is run by hand, not
//! in CI: `cargo build --release -p artq && cargo run --release -p artq-bench
//! --bin loopback -- --size 1GiB`.
//!
//! Layers: [`size`] parses DESIGN.md sizes (`1GiB`, `200KB`); [`content`]
//! writes the seeded test file; [`quinn_hq`] is the quinn peer; [`process`]
//! runs child processes with deadlines; [`artq_child`] drives the artq binary
//! and reads its output contract.
#![warn(missing_docs)]

pub mod artq_child;
pub mod content;
pub mod decisions;
/// Child processes with deadlines, shared verbatim with the artq tests.
///
/// It lives in `crates/artq/tests/common/process.rs` and is compiled here by
/// path, like [`quinn_hq`], so that `artq serve` is started and its ready line
/// read by one implementation, not two that can drift apart.
#[path = "../../artq/tests/common/process.rs"]
pub mod process;
/// The quinn hq-interop peer, shared verbatim with the interop tests.
///
/// It lives in `crates/artq/tests/common/quinn_hq.rs` and is compiled here by
/// path so that the peer the benchmark measures is exactly the peer the interop
/// tests validate (one implementation, not two that can drift apart).
#[path = "../../artq/tests/common/quinn_hq.rs"]
pub mod quinn_hq;
/// The one size grammar of the workspace (`apps::size`), for the `--size` flags.
pub use apps::size;

use std::time::Duration;

/// Goodput in Mbit/s of `bytes` moved in `elapsed` (infinite for zero time).
pub fn goodput_mbps(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        f64::INFINITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_of_one_megabyte_per_second_is_eight_mbit() {
        assert!((goodput_mbps(1_000_000, Duration::from_secs(1)) - 8.0).abs() < 1e-9);
        assert!((goodput_mbps(125_000_000, Duration::from_millis(500)) - 2000.0).abs() < 1e-6);
        assert!(goodput_mbps(1, Duration::ZERO).is_infinite());
    }
}
