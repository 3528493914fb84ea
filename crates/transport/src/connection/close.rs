//! Closing a connection (RFC 9000 §10.2): the application's close, closing
//! on a local error, the closing and draining states, and abandoning the
//! recovery of data that will never be delivered.

use wire::time::Instant;

use super::{CloseFrame, Connection, ConnectionError, EndpointEvent, Event, SpaceId, State, Timer};
use crate::error::TransportError;

impl Connection {
    /// Close the connection with an application error code.
    pub fn close(&mut self, now: Instant, code: u64, reason: &[u8]) {
        if self.is_closed() {
            return;
        }
        self.enter_closing(
            now,
            CloseFrame {
                code,
                frame_type: None,
                application: true,
                reason: reason.to_vec(),
            },
            ConnectionError::LocallyClosed,
        );
    }

    /// Begin closing because of a local protocol error.
    pub(super) fn close_with_error(&mut self, now: Instant, err: TransportError) {
        if self.is_closed() {
            return;
        }
        tracing::debug!(side = ?self.side, error = %err, "closing connection");
        let frame = CloseFrame {
            code: err.code.0,
            frame_type: Some(err.frame_type.unwrap_or(0)),
            application: false,
            reason: err.reason.as_bytes().to_vec(),
        };
        self.enter_closing(now, frame, ConnectionError::Transport(err));
    }

    pub(super) fn enter_closing(
        &mut self,
        now: Instant,
        frame: CloseFrame,
        reason: ConnectionError,
    ) {
        self.close = Some(frame);
        self.close_resend = true;
        self.state = State::Closing;
        self.abandon_recovery(now);
        self.error = Some(reason.clone());
        self.events.push_back(Event::ConnectionLost(reason));
        self.timers.stop_all();
        self.timers
            .set(Timer::Close, now + self.pto_duration(SpaceId::Data) * 3);
    }

    pub(super) fn enter_draining(&mut self, now: Instant, reason: ConnectionError) {
        if self.state == State::Draining || self.state == State::Drained {
            return;
        }
        if self.state != State::Closing {
            self.error = Some(reason.clone());
            self.events.push_back(Event::ConnectionLost(reason));
        }
        self.state = State::Draining;
        self.abandon_recovery(now);
        self.timers.stop_all();
        self.timers
            .set(Timer::Close, now + self.pto_duration(SpaceId::Data) * 3);
    }

    /// The connection is closing: lost data still being recovered never
    /// will be, and its items say so.
    pub(super) fn abandon_recovery(&mut self, now: Instant) {
        let (recovery, mut cx) = self.recovery(now);
        recovery.abandon_all(&mut cx);
    }

    pub(super) fn set_drained(&mut self) {
        if self.state != State::Drained {
            self.state = State::Drained;
            self.endpoint_events.push_back(EndpointEvent::Drained);
        }
    }
}
