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
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TimerTable {
    deadlines: [Option<Instant>; COUNT],
}

impl TimerTable {
    pub fn set(&mut self, t: Timer, at: Instant) {
        self.deadlines[t as usize] = Some(at);
    }

    pub fn set_opt(&mut self, t: Timer, at: Option<Instant>) {
        self.deadlines[t as usize] = at;
    }

    pub fn stop(&mut self, t: Timer) {
        self.deadlines[t as usize] = None;
    }

    pub fn get(&self, t: Timer) -> Option<Instant> {
        self.deadlines[t as usize]
    }

    pub fn is_expired(&self, t: Timer, now: Instant) -> bool {
        self.get(t).is_some_and(|d| d <= now)
    }

    pub fn next(&self) -> Option<Instant> {
        wire::time::earliest(self.deadlines)
    }

    pub fn stop_all(&mut self) {
        self.deadlines = [None; COUNT];
    }
}
