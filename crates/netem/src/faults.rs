//! Faults of a link direction beyond random loss: outages, drop lists and
//! corruption.
//!
//! Exists to emulate the QUIC interop runner's network scenarios with the one
//! link model (simulator and relay alike): `blackhole` (the link drops
//! everything for a while: [`Blackholes`]), `droplist` (drop the Nth
//! datagrams of a direction: [`DropList`]) and `corrupt-rate` (damage
//! datagrams instead of dropping them: [`Corruption`], applied by a
//! [`Corrupter`]). Where each acts in the pipeline is described in
//! [`crate::link`].
//!
//! The one place netem looks into a payload: a [`Corrupter`] never damages a
//! QUIC Version Negotiation packet (a long header, RFC 8999 §5.1, with
//! version 0), as the runner's `corrupt-rate` spares them. A client must give
//! up on a Version Negotiation packet that seems to refuse its version, so a
//! damaged one would turn a recoverable error (a corrupted Initial) into a
//! fatal one that no server could avoid.

use std::fmt;
use std::str::FromStr;

use rand_chacha::rand_core::RngCore;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use wire::time::Duration;

use crate::seed::{rng_from_seed, unit_f64};

/// Longest time a blackhole window may reach, ms (one day: beyond any run,
/// and far from overflowing a `Duration`).
const MAX_WINDOW_MS: f64 = 86_400_000.0;

/// Time windows during which a link direction drops every datagram offered
/// to it (`--blackhole 1500-3500,8000-9000`, in ms since the clock's epoch:
/// the relay's start, or the start of a simulation).
///
/// Exists for the interop runner's `blackhole` case: the path goes silent for
/// a while, then comes back, and a transfer must survive it. Windows are
/// half-open (`from <= t < until`), sorted and merged when parsed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Blackholes {
    windows: Vec<(Duration, Duration)>,
}

impl Blackholes {
    /// Whether there are no windows.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    /// Whether `t` (since the epoch) falls inside a window.
    pub fn contains(&self, t: Duration) -> bool {
        self.windows
            .iter()
            .any(|&(from, until)| from <= t && t < until)
    }

    /// The windows, sorted and disjoint.
    pub fn windows(&self) -> &[(Duration, Duration)] {
        &self.windows
    }
}

/// Parses a millisecond value of a window, bounded.
fn parse_ms(text: &str) -> Result<Duration, String> {
    let ms: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("{text:?} is not a number of ms"))?;
    if !(ms.is_finite() && (0.0..=MAX_WINDOW_MS).contains(&ms)) {
        return Err(format!(
            "{text:?} ms is out of range (0 to {MAX_WINDOW_MS})"
        ));
    }
    Duration::try_from_secs_f64(ms / 1e3).map_err(|e| format!("{text:?} ms: {e}"))
}

impl FromStr for Blackholes {
    type Err = String;

    /// `FROM-TO[,FROM-TO...]` in ms, each `FROM < TO`; empty for none.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut windows = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (from, until) = part
                .split_once('-')
                .ok_or_else(|| format!("blackhole window {part:?} is not FROM-TO (ms)"))?;
            let (from, until) = (parse_ms(from)?, parse_ms(until)?);
            if from >= until {
                return Err(format!("blackhole window {part:?} ends before it begins"));
            }
            windows.push((from, until));
        }
        windows.sort();
        let mut merged: Vec<(Duration, Duration)> = Vec::with_capacity(windows.len());
        for (from, until) in windows {
            match merged.last_mut() {
                Some(last) if from <= last.1 => last.1 = last.1.max(until),
                _ => merged.push((from, until)),
            }
        }
        Ok(Blackholes { windows: merged })
    }
}

impl fmt::Display for Blackholes {
    /// The canonical form of [`Blackholes::from_str`]'s syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (from, until)) in self.windows.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            write!(
                f,
                "{sep}{}-{}",
                from.as_secs_f64() * 1e3,
                until.as_secs_f64() * 1e3
            )?;
        }
        Ok(())
    }
}

impl TryFrom<String> for Blackholes {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<Blackholes> for String {
    fn from(b: Blackholes) -> String {
        b.to_string()
    }
}

/// Datagrams of a link direction to drop by their position: the Nth
/// datagram offered to the direction, counting from 1 (`--up-drop 2-7,10`).
///
/// Exists for the interop runner's `droplist` scenarios: `amplificationlimit`
/// drops the client's 2nd to 7th datagrams so that the server, having
/// received only the first, sits at its amplification limit. Stored as
/// sorted, merged inclusive ranges, so `1-1000000000` costs nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DropList {
    ranges: Vec<(u64, u64)>,
}

impl DropList {
    /// Whether the list drops nothing.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Whether the `n`th datagram (from 1) is dropped.
    pub fn contains(&self, n: u64) -> bool {
        self.ranges.iter().any(|&(lo, hi)| lo <= n && n <= hi)
    }
}

impl FromStr for DropList {
    type Err = String;

    /// `N` or `N-M` items separated by commas, counting from 1; empty for
    /// none.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let number = |t: &str| -> Result<u64, String> {
            match t.trim().parse::<u64>() {
                Ok(0) => Err("datagrams are counted from 1, not 0".to_string()),
                Ok(n) => Ok(n),
                Err(_) => Err(format!("{t:?} is not a datagram number")),
            }
        };
        let mut ranges = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            let (lo, hi) = match part.split_once('-') {
                Some((lo, hi)) => (number(lo)?, number(hi)?),
                None => {
                    let n = number(part)?;
                    (n, n)
                }
            };
            if lo > hi {
                return Err(format!("drop range {part:?} ends before it begins"));
            }
            ranges.push((lo, hi));
        }
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
        for (lo, hi) in ranges {
            match merged.last_mut() {
                Some(last) if lo <= last.1.saturating_add(1) => last.1 = last.1.max(hi),
                _ => merged.push((lo, hi)),
            }
        }
        Ok(DropList { ranges: merged })
    }
}

impl fmt::Display for DropList {
    /// The canonical form of [`DropList::from_str`]'s syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, &(lo, hi)) in self.ranges.iter().enumerate() {
            let sep = if i == 0 { "" } else { "," };
            if lo == hi {
                write!(f, "{sep}{lo}")?;
            } else {
                write!(f, "{sep}{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl TryFrom<String> for DropList {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<DropList> for String {
    fn from(d: DropList) -> String {
        d.to_string()
    }
}

/// Random damage to delivered datagrams (`--corrupt P`, `--corrupt-span N`).
///
/// Exists for the interop runner's `corrupt-rate` cases: a corrupted
/// datagram still arrives, and the receiver must discard it without harm
/// (packet protection fails, or a damaged header must not be trusted). Each
/// delivered datagram is damaged with probability `probability`: one byte,
/// at a uniformly random position among the first `span` bytes (the whole
/// datagram when `None`), is XORed with a uniformly random non-zero value,
/// flipping one to eight of its bits. The runner damages one of the first
/// 51 bytes, aiming at the QUIC header and the sample its protection is
/// keyed from (`--corrupt-span 51`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Corruption {
    /// Probability that a delivered datagram is damaged, in [0, 1].
    pub probability: f64,
    /// Damage only one of the first this many bytes (>= 1); `None`: any byte.
    pub span: Option<u32>,
}

impl Corruption {
    /// Checks the parameters: probability finite in [0, 1], span >= 1.
    pub fn validate(&self) -> Result<(), String> {
        if !(self.probability.is_finite() && (0.0..=1.0).contains(&self.probability)) {
            return Err(format!(
                "corruption probability {} is not in 0..1",
                self.probability
            ));
        }
        if self.span == Some(0) {
            return Err("corrupt_span must be at least 1 byte".into());
        }
        Ok(())
    }
}

/// One seeded run of a [`Corruption`]: damages datagrams one by one.
///
/// Exists so corruption draws from a stream of its own
/// (`derive_seed(link_seed, "corrupt")`): turning it on never changes which
/// datagrams the loss process drops.
#[derive(Clone, Debug)]
pub struct Corrupter {
    probability: f64,
    span: Option<u32>,
    rng: ChaCha8Rng,
}

impl Corrupter {
    /// Starts a run of `corruption` with the RNG stream `seed`.
    pub fn new(corruption: &Corruption, seed: u64) -> Corrupter {
        Corrupter {
            probability: if corruption.probability.is_finite() {
                corruption.probability.clamp(0.0, 1.0)
            } else {
                0.0
            },
            span: corruption.span,
            rng: rng_from_seed(seed),
        }
    }

    /// Decides whether to damage `payload` and damages it; `true` if it did.
    ///
    /// Empty payloads and QUIC Version Negotiation packets are left alone
    /// without a draw (see the module doc); every other call draws once, and
    /// twice more when it damages.
    pub fn apply(&mut self, payload: &mut [u8]) -> bool {
        if payload.is_empty() || is_version_negotiation(payload) {
            return false;
        }
        if unit_f64(&mut self.rng) >= self.probability {
            return false;
        }
        let span = self
            .span
            .map_or(payload.len(), |s| payload.len().min(s as usize));
        let at = below(&mut self.rng, span as u64) as usize;
        let flip = 1 + below(&mut self.rng, 255) as u8;
        if let Some(byte) = payload.get_mut(at) {
            *byte ^= flip;
        }
        true
    }
}

/// Whether `payload` is a QUIC Version Negotiation packet: the long-header
/// bit set and a zero version (RFC 8999 §5.1, §6).
pub fn is_version_negotiation(payload: &[u8]) -> bool {
    payload.len() >= 5 && payload[0] & 0x80 != 0 && payload[1..5] == [0, 0, 0, 0]
}

/// A uniform integer in `[0, n)` (0 when `n` is 0) from one `u64` draw, by
/// the multiply-high method (bias below 2^-32 for the small `n` used here).
/// Written out, like [`unit_f64`], so the mapping can never change under us.
fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    ((u128::from(rng.next_u64()) * u128::from(n)) >> 64) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blackholes_parse_merge_and_contain() {
        let b: Blackholes = "3000-4000, 1500-3500,9000-9000.5".parse().expect("valid");
        assert_eq!(b.to_string(), "1500-4000,9000-9000.5");
        assert!(!b.contains(Duration::from_millis(1499)));
        assert!(b.contains(Duration::from_millis(1500)));
        assert!(b.contains(Duration::from_millis(3999)));
        assert!(!b.contains(Duration::from_millis(4000)));
        assert!("".parse::<Blackholes>().expect("empty").is_empty());
        for bad in ["5", "2-1", "1-1", "a-2", "-1-3", "0-1e12", "NaN-5", "1-inf"] {
            assert!(bad.parse::<Blackholes>().is_err(), "{bad:?}");
        }
        let round: Blackholes = b.to_string().parse().expect("round trip");
        assert_eq!(round, b);
    }

    #[test]
    fn drop_lists_parse_merge_and_contain() {
        let d: DropList = "7, 2-4,5,10-12,11".parse().expect("valid");
        assert_eq!(d.to_string(), "2-5,7,10-12");
        let dropped: Vec<u64> = (1..=13).filter(|&n| d.contains(n)).collect();
        assert_eq!(dropped, [2, 3, 4, 5, 7, 10, 11, 12]);
        let huge: DropList = "1-18446744073709551615".parse().expect("valid");
        assert!(huge.contains(u64::MAX) && huge.contains(1));
        for bad in ["0", "3-2", "x", "1-", "-4", "1.5"] {
            assert!(bad.parse::<DropList>().is_err(), "{bad:?}");
        }
        assert!("".parse::<DropList>().expect("empty").is_empty());
    }

    #[test]
    fn corrupter_damages_the_requested_share_within_the_span() {
        let c = Corruption {
            probability: 0.3,
            span: Some(51),
        };
        c.validate().expect("valid");
        let mut corrupter = Corrupter::new(&c, 7);
        let original: Vec<u8> = (0..1200u32).map(|i| (i % 251) as u8 | 0x01).collect();
        let mut damaged = 0;
        for _ in 0..10_000 {
            let mut p = original.clone();
            let hit = corrupter.apply(&mut p);
            let diff: Vec<usize> = (0..p.len()).filter(|&i| p[i] != original[i]).collect();
            assert_eq!(hit, !diff.is_empty());
            if hit {
                damaged += 1;
                assert_eq!(diff.len(), 1, "exactly one byte changes");
                assert!(diff[0] < 51, "byte {} is outside the span", diff[0]);
            }
        }
        assert!((2700..3300).contains(&damaged), "{damaged} of 10000");
    }

    #[test]
    fn corrupter_is_seeded_and_handles_edges() {
        let c = Corruption {
            probability: 1.0,
            span: None,
        };
        let run = |seed| {
            let mut corrupter = Corrupter::new(&c, seed);
            (0..50)
                .map(|_| {
                    let mut p = vec![0u8; 40];
                    corrupter.apply(&mut p);
                    p
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(run(1), run(1));
        assert_ne!(run(1), run(2));
        let mut corrupter = Corrupter::new(&c, 3);
        let mut empty: [u8; 0] = [];
        assert!(!corrupter.apply(&mut empty));
        let mut one = [0x55u8];
        assert!(corrupter.apply(&mut one));
        assert_ne!(one, [0x55]);
        // A Version Negotiation packet is never damaged.
        let vn = [0xc0u8, 0, 0, 0, 0, 4, 1, 2, 3, 4, 0, 0, 0, 0, 1];
        let mut p = vn;
        assert!(!corrupter.apply(&mut p));
        assert_eq!(p, vn);
        for bad in [f64::NAN, -0.1, 1.5] {
            assert!(Corruption {
                probability: bad,
                span: None
            }
            .validate()
            .is_err());
        }
        assert!(Corruption {
            probability: 0.5,
            span: Some(0)
        }
        .validate()
        .is_err());
    }
}
