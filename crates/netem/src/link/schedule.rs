//! A bottleneck rate that changes during a run ([`RateSchedule`]).
//!
//! Exists for experiments whose network changes under the flows, such as
//! RCP's Experiment 4 (rcp.md §V-F: the service rate falls from 7 to 3
//! packets per slot at slot 5000). A recorded trace could express that
//! too, but only in 1500-byte opportunities; a schedule keeps the exact
//! constant-rate service between changes.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};
use wire::time::Duration;

/// Most changes one schedule may hold.
pub const MAX_CHANGES: usize = 10_000;
/// Latest change, ms since the start (one day).
const MAX_AT_MS: f64 = 86_400_000.0;
/// Highest rate of a change, Mbit/s (the limit of `bw`).
const MAX_MBPS: f64 = 1e6;

/// Rate changes of a constant-rate link: from each change's instant (since
/// the clock's epoch, the start of a run) the link serves at its rate,
/// until the next change.
///
/// Written `MS:MBPS[,MS:MBPS...]` (`5000:3.84` = 3.84 Mbit/s from 5 s on).
/// Changes are sorted when parsed; two at one instant are an error. A
/// datagram already being serialized when the rate changes finishes at the
/// rate it started with: the change takes effect at the next datagram, an
/// error of at most one datagram's serialization time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RateSchedule {
    /// `(instant since the epoch, bits per second)`, sorted by instant.
    changes: Vec<(Duration, u64)>,
}

impl RateSchedule {
    /// Whether there is no change.
    pub fn is_empty(&self) -> bool {
        self.changes.is_empty()
    }

    /// The changes, `(instant since the epoch, bits per second)`, sorted.
    pub fn changes(&self) -> &[(Duration, u64)] {
        &self.changes
    }
}

impl FromStr for RateSchedule {
    type Err = String;

    /// `MS:MBPS[,MS:MBPS...]`, `0 <= MS <= 86400000`, `0 < MBPS <= 1e6`;
    /// empty for none.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut changes = Vec::new();
        for part in s.split(',').filter(|p| !p.trim().is_empty()) {
            if changes.len() == MAX_CHANGES {
                return Err(format!("more than {MAX_CHANGES} rate changes"));
            }
            let (at, mbps) = part
                .split_once(':')
                .ok_or_else(|| format!("rate change {part:?} is not MS:MBPS"))?;
            let at: f64 = at
                .trim()
                .parse()
                .map_err(|_| format!("rate change {part:?}: {at:?} is not a number of ms"))?;
            if !(at.is_finite() && (0.0..=MAX_AT_MS).contains(&at)) {
                return Err(format!(
                    "rate change {part:?}: {at} ms is out of range (0 to {MAX_AT_MS})"
                ));
            }
            let mbps: f64 = mbps
                .trim()
                .parse()
                .map_err(|_| format!("rate change {part:?}: {mbps:?} is not a rate in Mbit/s"))?;
            if !(mbps.is_finite() && mbps > 0.0 && mbps <= MAX_MBPS) {
                return Err(format!(
                    "rate change {part:?}: {mbps} Mbit/s is out of range (0 < rate <= {MAX_MBPS})"
                ));
            }
            let at = Duration::try_from_secs_f64(at / 1e3)
                .map_err(|e| format!("rate change {part:?}: {e}"))?;
            changes.push((at, (mbps * 1e6).round() as u64));
        }
        changes.sort_unstable();
        if let Some(w) = changes.windows(2).find(|w| w[0].0 == w[1].0) {
            return Err(format!(
                "two rate changes at {} ms",
                w[0].0.as_secs_f64() * 1e3
            ));
        }
        Ok(RateSchedule { changes })
    }
}

impl fmt::Display for RateSchedule {
    /// The canonical form of [`RateSchedule::from_str`]'s syntax.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (at, bps)) in self.changes.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}", at.as_secs_f64() * 1e3, *bps as f64 / 1e6)?;
        }
        Ok(())
    }
}

impl TryFrom<String> for RateSchedule {
    type Error = String;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

impl From<RateSchedule> for String {
    fn from(r: RateSchedule) -> String {
        r.to_string()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};

    use wire::time::Instant;

    use super::*;
    use crate::link::{Capacity, Datagram, Link, LinkConfig};

    /// Departure times of `n` back-to-back 972-byte datagrams (1000 bytes
    /// on the wire) queued at time zero on `capacity`, no delay.
    fn departures(capacity: Capacity, n: usize) -> Vec<u64> {
        let a = SocketAddr::from((Ipv4Addr::LOCALHOST, 1));
        let mut link = Link::new(LinkConfig::new(capacity, Duration::ZERO), 0);
        for _ in 0..n {
            link.send(Instant::ZERO, Datagram::new(a, a, vec![0; 972]));
        }
        let mut out = Vec::new();
        while let Some(t) = link.next_event() {
            while link.poll_deliver(t).is_some() {
                out.push(t.as_nanos());
            }
        }
        out
    }

    #[test]
    fn the_rate_changes_at_the_next_datagram_after_each_change() {
        // 8 Mbit/s: 1 ms per datagram; from 4.5 ms 4 Mbit/s (2 ms), from
        // 10 ms 8 Mbit/s again.
        let got = departures(
            Capacity::Stepped {
                bits_per_sec: 8_000_000,
                changes: "4.5:4,10:8".parse().expect("valid"),
            },
            9,
        );
        let ms = |m: u64| m * 1_000_000;
        // 1-4 ms at 8 Mbit/s; the one started at 4 ms finishes at 5 ms (the
        // change takes effect at the next start); then 7, 9, 11 ms at 4
        // Mbit/s (the one started at 9 ms keeps 4 Mbit/s); then 12, 13 ms.
        assert_eq!(
            got,
            vec![
                ms(1),
                ms(2),
                ms(3),
                ms(4),
                ms(5),
                ms(7),
                ms(9),
                ms(11),
                ms(12)
            ]
        );
        // Without changes it is the constant link.
        let plain = departures(
            Capacity::Constant {
                bits_per_sec: 8_000_000,
            },
            3,
        );
        assert_eq!(plain, vec![ms(1), ms(2), ms(3)]);
    }

    #[test]
    fn parses_sorts_and_round_trips() {
        let r: RateSchedule = "9000:1, 5000:3.84".parse().expect("valid");
        assert_eq!(
            r.changes(),
            &[
                (Duration::from_millis(5000), 3_840_000),
                (Duration::from_millis(9000), 1_000_000)
            ]
        );
        let again: RateSchedule = r.to_string().parse().expect("round trip");
        assert_eq!(again, r);
        assert!("".parse::<RateSchedule>().expect("empty").is_empty());
    }

    #[test]
    fn refuses_bad_changes() {
        for bad in [
            "5000",
            "5000:0",
            "5000:-1",
            "-1:3",
            "x:3",
            "5000:fast",
            "5000:inf",
            "1e12:3",
            "5000:3,5000:4",
            "5000:2e6",
        ] {
            assert!(bad.parse::<RateSchedule>().is_err(), "{bad:?}");
        }
    }
}
