//! Time as the sans-IO core sees it.
//!
//! The protocol code never reads a clock: every entry point takes `now: Instant`.
//! [`Instant`] is a count of nanoseconds since an arbitrary epoch chosen by the
//! driver (the simulator starts at zero; the UDP drivers map `std::time::Instant`
//! onto it). Durations are plain [`core::time::Duration`], re-exported here.
//!
//! All arithmetic saturates instead of panicking, so a hostile or absurd value
//! (an ACK delay of 2^62 µs, say) can never bring the process down.

pub use core::time::Duration;

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// The earliest of `deadlines` that is set (`None` when none is): what a
/// timer table, a link or an endpoint next waits for. A fold, which
/// compiles to straight-line code over an array, where `flatten().min()`
/// kept an iterator's state per element (about 1% of a simulated bulk
/// transfer's instructions went to such loops, cachegrind).
pub fn earliest(deadlines: impl IntoIterator<Item = Option<Instant>>) -> Option<Instant> {
    deadlines
        .into_iter()
        .fold(None, |first, d| match (first, d) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
}

/// A point in time: nanoseconds since the driver's epoch.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Instant(u64);

impl Instant {
    /// The driver's epoch (time zero).
    pub const ZERO: Instant = Instant(0);
    /// The largest representable instant; used as "never".
    pub const MAX: Instant = Instant(u64::MAX);

    /// An instant `nanos` nanoseconds after the epoch.
    pub const fn from_nanos(nanos: u64) -> Self {
        Instant(nanos)
    }

    /// An instant `micros` microseconds after the epoch (saturating).
    pub const fn from_micros(micros: u64) -> Self {
        Instant(micros.saturating_mul(1_000))
    }

    /// An instant `millis` milliseconds after the epoch (saturating).
    pub const fn from_millis(millis: u64) -> Self {
        Instant(millis.saturating_mul(1_000_000))
    }

    /// Nanoseconds since the epoch.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// Time since the epoch as a [`Duration`].
    pub const fn since_epoch(self) -> Duration {
        Duration::from_nanos(self.0)
    }

    /// `self - earlier`, or zero if `earlier` is later than `self`.
    pub fn saturating_duration_since(self, earlier: Instant) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// `self + d`, or `None` on overflow.
    pub fn checked_add(self, d: Duration) -> Option<Instant> {
        let n = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(n).map(Instant)
    }

    /// `self - d`, or `None` if that would precede the epoch.
    pub fn checked_sub(self, d: Duration) -> Option<Instant> {
        let n = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_sub(n).map(Instant)
    }
}

fn duration_nanos_saturating(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl Add<Duration> for Instant {
    type Output = Instant;
    /// Saturates at [`Instant::MAX`].
    fn add(self, d: Duration) -> Instant {
        Instant(self.0.saturating_add(duration_nanos_saturating(d)))
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, d: Duration) {
        *self = *self + d;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    /// Saturates at the epoch.
    fn sub(self, d: Duration) -> Instant {
        Instant(self.0.saturating_sub(duration_nanos_saturating(d)))
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero (like [`Instant::saturating_duration_since`]).
    fn sub(self, earlier: Instant) -> Duration {
        self.saturating_duration_since(earlier)
    }
}

impl fmt::Debug for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "t+{:.6}s", self.0 as f64 / 1e9)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_is_the_least_deadline_set() {
        let t = Instant::from_millis;
        assert_eq!(earliest([None, Some(t(5)), None, Some(t(3))]), Some(t(3)));
        assert_eq!(earliest([Some(t(7))]), Some(t(7)));
        assert_eq!(earliest([None, None]), None);
        assert_eq!(earliest(core::iter::empty()), None);
        assert_eq!(earliest([Some(Instant::MAX), Some(t(0))]), Some(t(0)));
    }

    #[test]
    fn arithmetic_saturates() {
        assert_eq!(Instant::MAX + Duration::from_secs(1), Instant::MAX);
        assert_eq!(Instant::ZERO - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::ZERO - Instant::from_millis(5), Duration::ZERO);
        assert_eq!(Instant::ZERO + Duration::MAX, Instant::MAX);
        assert_eq!(
            Instant::from_millis(3) - Instant::from_millis(1),
            Duration::from_millis(2)
        );
        assert_eq!(
            Instant::from_micros(1).checked_sub(Duration::from_micros(2)),
            None
        );
    }
}
