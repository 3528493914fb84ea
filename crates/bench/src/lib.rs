//! End-to-end benchmarks of artq against independent QUIC peers.
//!
//! Why this crate exists: DESIGN.md keeps speed targets out of the tests
//! ("Tests assert behaviour, not wall-clock time") and in benchmarks measured
//! as a ratio against a peer in the same run, on the same machine. The
//! `loopback` binary is that benchmark for bulk goodput: quinn to quinn
//! (server in a child process), quinn's server to `artq get`, then `artq
//! serve` to `artq get` as processes, one file, one loopback, and the ratios
//! artq/quinn (the whole stacks) and artq/quinn with the same `artq get`
//! clients (the servers alone); with `--clients N` it runs N downloads at
//! once and reports their aggregate goodput and the server's CPU time per
//! megabyte.
//!
//! It is a workspace member but not a default member and is run by hand, not
//! in CI: `cargo build --release -p artq && cargo run --release -p artq-bench
//! --bin loopback -- --size 1GiB`.
//!
//! Layers: [`size`] parses DESIGN.md sizes (`1GiB`, `200KB`); [`content`]
//! writes the seeded test file and verifies bodies; [`quinn_hq`] is the quinn
//! peer and [`quinn_child`] runs its server as a child process and its
//! clients concurrently; [`process`] runs child processes with deadlines;
//! [`artq_child`] drives the artq binary and reads its output contract;
//! [`proc_cpu`] reads a child's CPU time; [`quinn_pair`] runs quinn-proto's
//! clients and servers in virtual time, the reference of `sim_speed`;
//! [`Span`] and [`aggregate`] turn concurrent downloads into one goodput.
#![warn(missing_docs)]

pub mod artq_child;
pub mod content;
pub mod decisions;
pub mod proc_cpu;
/// Child processes with deadlines, shared verbatim with the artq tests.
///
/// It lives in `crates/artq/tests/common/process.rs` and is compiled here by
/// path, like [`quinn_hq`], so that `artq serve` is started and its ready line
/// read by one implementation, not two that can drift apart.
#[path = "../../artq/tests/common/process.rs"]
pub mod process;
pub mod quinn_child;
/// The quinn hq-interop peer, shared verbatim with the interop tests.
///
/// It lives in `crates/artq/tests/common/quinn_hq.rs` and is compiled here by
/// path so that the peer the benchmark measures is exactly the peer the interop
/// tests validate (one implementation, not two that can drift apart).
#[path = "../../artq/tests/common/quinn_hq.rs"]
pub mod quinn_hq;
pub mod quinn_pair;
/// The one size grammar of the workspace (`apps::size`), for the `--size` flags.
pub use apps::size;

use std::time::{Duration, Instant};

/// Goodput in Mbit/s of `bytes` moved in `elapsed` (infinite for zero time).
pub fn goodput_mbps(bytes: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 {
        bytes as f64 * 8.0 / secs / 1e6
    } else {
        f64::INFINITY
    }
}

/// One download of a concurrent batch: its size and when its request went
/// out and its last byte came in.
#[derive(Debug, Clone, Copy)]
pub struct Span {
    /// Body bytes received.
    pub bytes: u64,
    /// When the request was sent.
    pub request: Instant,
    /// When the last byte of the body arrived.
    pub last_byte: Instant,
}

/// The aggregate of concurrent downloads: total bytes and the time from the
/// first request to the last byte of the last download (so that a client
/// that starts late or finishes late counts against the aggregate goodput).
/// `None` for no downloads. With one download it is that download's own
/// transfer time.
pub fn aggregate(spans: &[Span]) -> Option<(u64, Duration)> {
    let first = spans.iter().map(|s| s.request).min()?;
    let last = spans.iter().map(|s| s.last_byte).max()?;
    let bytes = spans.iter().map(|s| s.bytes).sum();
    Some((bytes, last.saturating_duration_since(first)))
}

/// The median of `values` (the mean of the middle two for an even count);
/// `None` for none.
pub fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => v.get(n / 2).copied(),
        _ => Some((v.get(n / 2 - 1)? + v.get(n / 2)?) / 2.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aggregate_spans_first_request_to_last_byte() {
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let spans = [
            Span {
                bytes: 100,
                request: at(10),
                last_byte: at(500),
            },
            Span {
                bytes: 300,
                request: at(0),
                last_byte: at(400),
            },
        ];
        assert_eq!(aggregate(&spans), Some((400, Duration::from_millis(500))));
        assert_eq!(
            aggregate(&spans[..1]),
            Some((100, Duration::from_millis(490)))
        );
        assert_eq!(aggregate(&[]), None);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
    }

    #[test]
    fn goodput_of_one_megabyte_per_second_is_eight_mbit() {
        assert!((goodput_mbps(1_000_000, Duration::from_secs(1)) - 8.0).abs() < 1e-9);
        assert!((goodput_mbps(125_000_000, Duration::from_millis(500)) - 2000.0).abs() < 1e-6);
        assert!(goodput_mbps(1, Duration::ZERO).is_infinite());
    }
}
