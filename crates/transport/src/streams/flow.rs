//! Flow-control counters (RFC 9000 §4).
//!
//! Two small value types, used at both levels:
//! - [`SendCredit`]: how much new data the peer lets us send (its MAX_DATA or
//!   MAX_STREAM_DATA) against what we have sent.
//! - [`RecvWindow`]: what we let the peer send, against what it sent and what
//!   the application consumed. Credit is extended only as data is consumed,
//!   so the window really bounds the bytes buffered at the receiver.

use wire::frame::MAX_STREAM_OFFSET;

/// Connection-level send credit: the peer's MAX_DATA against the sum of the
/// highest offsets we sent on every stream (RFC 9000 §4.1).
#[derive(Clone, Debug, Default)]
pub(crate) struct SendCredit {
    /// The peer's limit (cumulative bytes).
    pub max: u64,
    /// New bytes sent so far (retransmissions do not count again).
    pub sent: u64,
    /// The limit at which DATA_BLOCKED was last queued (RFC 9000 §4.1: sent
    /// once per limit).
    pub blocked_reported: Option<u64>,
}

impl SendCredit {
    /// Bytes of new data we may still send.
    pub fn available(&self) -> u64 {
        self.max.saturating_sub(self.sent)
    }

    /// Applies a MAX_DATA value; limits never decrease (RFC 9000 §19.9).
    /// Returns true if the limit grew.
    pub fn raise(&mut self, max: u64) -> bool {
        if max > self.max {
            self.max = max;
            true
        } else {
            false
        }
    }

    /// Records `n` new bytes sent.
    pub fn consume(&mut self, n: u64) {
        debug_assert!(n <= self.available(), "sent past the peer's limit");
        self.sent = self.sent.saturating_add(n);
    }
}

/// A receive window: what the peer may send (RFC 9000 §4.1, §4.2).
///
/// `received` counts bytes of peer credit used (at stream level: the highest
/// offset received; at connection level: the sum of those), `released` the
/// bytes the application consumed or that were discarded. The advertised
/// `max` only moves when [`RecvWindow::poll_update`] says so, i.e. once the
/// unconsumed credit `max - released` falls to half the window or below.
#[derive(Clone, Debug)]
pub(crate) struct RecvWindow {
    /// Window size: the most bytes the peer may have outstanding (unconsumed).
    pub window: u64,
    /// The limit we advertised (initial transport parameter or MAX_* frame).
    pub max: u64,
    /// Credit used by the peer.
    pub received: u64,
    /// Credit given back by consumption.
    pub released: u64,
}

impl RecvWindow {
    /// A window of `window` bytes, advertised in full from the start.
    pub fn new(window: u64) -> Self {
        let window = window.min(MAX_STREAM_OFFSET);
        RecvWindow {
            window,
            max: window,
            received: 0,
            released: 0,
        }
    }

    /// Credit the peer may still use.
    pub fn available(&self) -> u64 {
        self.max.saturating_sub(self.received)
    }

    /// Records `n` more bytes of credit used by the peer. The caller checked
    /// `n <= available()`; over-use saturates instead of wrapping.
    pub fn receive(&mut self, n: u64) {
        debug_assert!(n <= self.available(), "peer exceeded the checked window");
        self.received = self.received.saturating_add(n);
    }

    /// Records `n` bytes consumed (read or discarded).
    pub fn release(&mut self, n: u64) {
        self.released = self.released.saturating_add(n).min(self.received);
    }

    /// If the unconsumed credit fell to half the window or below, raises the
    /// limit to `released + window` and returns the new limit to advertise.
    pub fn poll_update(&mut self) -> Option<u64> {
        let remaining = self.max.saturating_sub(self.released);
        if remaining.saturating_mul(2) > self.window {
            return None;
        }
        let new_max = self
            .released
            .saturating_add(self.window)
            .min(MAX_STREAM_OFFSET);
        if new_max > self.max {
            self.max = new_max;
            Some(new_max)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn send_credit_only_grows() {
        let mut c = SendCredit {
            max: 100,
            ..Default::default()
        };
        c.consume(60);
        assert_eq!(c.available(), 40);
        assert!(!c.raise(50));
        assert_eq!(c.max, 100);
        assert!(c.raise(200));
        assert_eq!(c.available(), 140);
    }

    #[test]
    fn window_extends_only_after_half_is_consumed() {
        let mut w = RecvWindow::new(100);
        w.receive(100);
        assert_eq!(w.available(), 0);
        assert_eq!(w.poll_update(), None, "nothing consumed, nothing extended");
        w.release(49);
        assert_eq!(w.poll_update(), None, "51 unconsumed > half the window");
        w.release(1);
        assert_eq!(w.poll_update(), Some(150));
        assert_eq!(w.available(), 50);
        assert_eq!(w.poll_update(), None, "already advertised");
    }

    #[test]
    fn release_never_exceeds_received() {
        let mut w = RecvWindow::new(10);
        w.receive(4);
        w.release(1000);
        assert_eq!(w.released, 4);
    }

    #[test]
    fn window_is_capped_at_the_varint_range() {
        let mut w = RecvWindow::new(u64::MAX);
        assert_eq!(w.max, MAX_STREAM_OFFSET);
        w.receive(MAX_STREAM_OFFSET);
        w.release(MAX_STREAM_OFFSET);
        assert_eq!(w.poll_update(), None);
    }
}
