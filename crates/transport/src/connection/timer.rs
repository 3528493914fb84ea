//! Connection timers: an array of deadlines indexed by [`Timer`], the next
//! wake-up being their minimum (the driver calls `handle_timeout` then).

use wire::time::Instant;

/// The connection's timers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Loss detection: time threshold or PTO (RFC 9002 §6.2).
    LossDetection = 0,
    /// Delayed ACK (RFC 9000 §13.2.1).
    Ack = 1,
    /// Idle timeout (RFC 9000 §10.1).
    Idle = 2,
    /// End of the closing or draining period (RFC 9000 §10.2).
    Close = 3,
    /// Pacing: the next packet may leave then.
    Pacing = 4,
    /// The earliest scheduled replica.
    Replica = 5,
    /// Keep the previous 1-RTT read key until then (RFC 9001 §6.5).
    KeyDiscard = 6,
    /// Give up validating the peer's new address (RFC 9000 §8.2.4).
    PathValidation = 7,
}

const COUNT: usize = 8;

/// Deadlines of all timers.
///
/// The next wake-up is read after every packet sent and received, so the
/// table is laid out for that read: the deadlines as plain instants (an
/// unset timer holds [`Instant::MAX`], which never wins the minimum over
/// a set one) and a bit per timer saying which are set, so that a timer
/// set to `Instant::MAX` itself still counts. The minimum over eight
/// integers compiles to a few vector instructions; over eight `Option`s it
/// was a branch per timer (cachegrind: about 1% of a simulated bulk
/// transfer's instructions).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerTable {
    at: [Instant; COUNT],
    /// Bit `t` set: timer `t` is set (its deadline is `at[t]`).
    set: u8,
}

impl Default for TimerTable {
    fn default() -> Self {
        TimerTable {
            at: [Instant::MAX; COUNT],
            set: 0,
        }
    }
}

impl TimerTable {
    pub fn set(&mut self, t: Timer, at: Instant) {
        self.at[t as usize] = at;
        self.set |= 1 << t as u8;
    }

    pub fn set_opt(&mut self, t: Timer, at: Option<Instant>) {
        match at {
            Some(at) => self.set(t, at),
            None => self.stop(t),
        }
    }

    pub fn stop(&mut self, t: Timer) {
        self.at[t as usize] = Instant::MAX;
        self.set &= !(1 << t as u8);
    }

    pub fn get(&self, t: Timer) -> Option<Instant> {
        (self.set & (1 << t as u8) != 0).then_some(self.at[t as usize])
    }

    pub fn is_expired(&self, t: Timer, now: Instant) -> bool {
        self.get(t).is_some_and(|d| d <= now)
    }

    pub fn next(&self) -> Option<Instant> {
        (self.set != 0).then(|| self.at.iter().copied().fold(Instant::MAX, Instant::min))
    }

    pub fn stop_all(&mut self) {
        *self = TimerTable::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_is_the_earliest_set_timer() {
        let t = Instant::from_millis;
        let mut table = TimerTable::default();
        assert_eq!(table.next(), None);
        table.set(Timer::Idle, t(30));
        table.set(Timer::Pacing, t(5));
        assert_eq!(table.next(), Some(t(5)));
        assert_eq!(table.get(Timer::Pacing), Some(t(5)));
        table.stop(Timer::Pacing);
        assert_eq!(
            (table.get(Timer::Pacing), table.next()),
            (None, Some(t(30)))
        );
        table.set_opt(Timer::Idle, None);
        assert_eq!(table.next(), None);
        // A timer set to the last instant is set all the same.
        table.set(Timer::KeyDiscard, Instant::MAX);
        assert_eq!(table.next(), Some(Instant::MAX));
        assert!(table.is_expired(Timer::KeyDiscard, Instant::MAX));
        table.stop_all();
        assert_eq!((table.next(), table.get(Timer::KeyDiscard)), (None, None));
    }
}
