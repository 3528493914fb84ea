//! What one connection's streams may hold: the accounting behind
//! [`super::StreamsConfig::send_ahead`], [`super::StreamsConfig::send_buffer`],
//! [`super::StreamsConfig::connection_send_buffer`] and
//! [`super::StreamsConfig::max_receive_pieces`], and the `Writable` wakeups that
//! tell an application when room opens.
//!
//! Every change to a send half goes through [`Streams::with_send`] and every
//! change to a receive half's storage through [`Streams::with_recv`], which
//! keep the connection-wide totals exact without each operation having to
//! know what it changed.

use wire::StreamId;

use super::recv::RecvStream;
use super::send::SendStream;
use super::{StreamEvent, Streams};

/// Bytes held on the sending side of a connection, summed over its streams
/// ([`super::StreamsConfig::connection_send_buffer`], [`super::StreamsConfig::send_ahead`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct SendTotals {
    /// Written and not yet acknowledged (unsent bytes included).
    pub(super) buffered: u64,
    /// Written, never sent, within each stream's credit: only the
    /// connection's credit holds them back.
    pub(super) within_credit: u64,
    /// Written past each stream's credit.
    pub(super) past_credit: u64,
}

impl SendTotals {
    /// One send half's share.
    pub(super) fn of(send: &SendStream) -> SendTotals {
        SendTotals {
            buffered: send.buffered(),
            within_credit: send.unsent_within_credit(),
            past_credit: send.unsent_past_credit(),
        }
    }

    /// Applies the change of one send half's share from `before` to `after`.
    pub(super) fn update(&mut self, before: SendTotals, after: SendTotals) {
        let apply = |total: u64, b: u64, a: u64| total.saturating_sub(b).saturating_add(a);
        self.buffered = apply(self.buffered, before.buffered, after.buffered);
        self.within_credit = apply(
            self.within_credit,
            before.within_credit,
            after.within_credit,
        );
        self.past_credit = apply(self.past_credit, before.past_credit, after.past_credit);
    }
}

impl Streams {
    /// Runs `f` on `id`'s sending half and brings the connection's send
    /// totals up to date with what it changed. `None` if there is no such
    /// half.
    pub(super) fn with_send<R>(
        &mut self,
        id: StreamId,
        f: impl FnOnce(&mut SendStream) -> R,
    ) -> Option<R> {
        let send = self.streams.get_mut(&id)?.send.as_mut()?;
        let before = SendTotals::of(send);
        let out = f(send);
        self.send_totals.update(before, SendTotals::of(send));
        Some(out)
    }

    /// Runs `f` on `id`'s receiving half and brings the connection's count
    /// of receive pieces up to date. `None` if there is no such half.
    pub(super) fn with_recv<R>(
        &mut self,
        id: StreamId,
        f: impl FnOnce(&mut RecvStream) -> R,
    ) -> Option<R> {
        let recv = self.streams.get_mut(&id)?.recv.as_mut()?;
        let before = recv.pieces() as u64;
        let out = f(recv);
        let after = recv.pieces() as u64;
        self.recv_pieces = self
            .recv_pieces
            .saturating_sub(before)
            .saturating_add(after);
        Some(out)
    }

    /// Bytes `write` would take on `send` now. New bytes first fill the
    /// stream's credit, as long as all streams' unsent bytes within their
    /// credit stay within the connection's credit plus `send_ahead`, or the
    /// stream's own stay within `send_ahead` (every stream may hold that
    /// much, so the connection's credit is shared among the streams with
    /// data rather than taken by the first written, and a peer reading its
    /// streams in any order gets data on each). Past the stream's credit, up
    /// to `send_ahead` more, as long as all streams' bytes past their credit
    /// stay within `send_ahead`. The send buffers cap everything.
    pub(super) fn room(&self, send: &SendStream) -> u64 {
        let ahead = self.config.send_ahead;
        let totals = &self.send_totals;
        let stream_credit = send.max_data.saturating_sub(send.end());
        let conn_room = self
            .send_credit
            .available()
            .saturating_add(ahead)
            .saturating_sub(totals.within_credit);
        let own_room = ahead.saturating_sub(send.unsent_within_credit());
        let mut room = stream_credit.min(conn_room.max(own_room));
        if room == stream_credit {
            let past = ahead
                .saturating_sub(send.unsent_past_credit())
                .min(ahead.saturating_sub(totals.past_credit));
            room = room.saturating_add(past);
        }
        room.min(self.config.send_buffer.saturating_sub(send.buffered()))
            .min(
                self.config
                    .connection_send_buffer
                    .saturating_sub(totals.buffered),
            )
            // Never below the stream's own allowance: a peer that reads
            // its streams in any order must get data on each, whatever the
            // others hold unsent.
            .min(self.unsent_room().max(own_room))
    }

    /// What [`super::StreamsConfig::unsent_limit`] lets the streams take.
    fn unsent_room(&self) -> u64 {
        self.config
            .unsent_limit
            .map_or(u64::MAX, |limit| limit.saturating_sub(self.unsent()))
    }

    /// Bytes written and never sent, over all streams.
    fn unsent(&self) -> u64 {
        self.send_totals
            .within_credit
            .saturating_add(self.send_totals.past_credit)
    }

    /// A write was given `room` bytes and fell short: if the unsent limit
    /// may be what stopped it, sending must wake it (nothing else will: no
    /// acknowledgement or credit is needed).
    pub(super) fn note_short_write(&mut self, room: u64) {
        if room >= self.unsent_room() {
            self.unsent_waiters = true;
        }
    }

    /// New data left in a packet: once half the unsent limit is free again,
    /// the writers it stopped get `Writable` (half, so that each wakeup is
    /// worth a large write).
    pub(super) fn on_unsent_sent(&mut self) {
        let Some(limit) = self.config.unsent_limit else {
            return;
        };
        if self.unsent_waiters && self.unsent() <= limit / 2 {
            self.unsent_waiters = false;
            self.wake_writers();
        }
    }

    /// Emits `Writable` for every stream whose write fell short and that
    /// has room now (or can no longer be written: the next write says why).
    /// Called whenever room may have opened: acknowledgements, credit,
    /// resets.
    pub(super) fn wake_writers(&mut self) {
        let mut after: Option<StreamId> = None;
        loop {
            let next = match after {
                None => self.blocked_writers.first(),
                Some(a) => self
                    .blocked_writers
                    .range((std::ops::Bound::Excluded(a), std::ops::Bound::Unbounded))
                    .next(),
            };
            let Some(&id) = next else {
                return;
            };
            after = Some(id);
            let wake = match self.streams.get(&id).and_then(|s| s.send.as_ref()) {
                Some(send) => send.check_writable().is_err() || self.room(send) > 0,
                None => true,
            };
            if wake {
                self.blocked_writers.remove(&id);
                self.events.push_back(StreamEvent::Writable { id });
            }
        }
    }
}
