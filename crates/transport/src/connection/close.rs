//! Closing a connection (RFC 9000 §10.2): the application's close, closing
//! on a local error, the closing and draining states, the CONNECTION_CLOSE
//! sent while closing, and abandoning the recovery of data that will never
//! be delivered. [`CloseState`] owns why the connection ended and the frame
//! that says so.

use wire::frame::Frame;
use wire::packet;
use wire::time::Instant;
use wire::TransportErrorCode;

use super::send::{MAX_PN_LEN, MIN_INITIAL_DATAGRAM, TAG_LEN};
use super::{Connection, ConnectionError, EndpointEvent, Event, SpaceId, State, Timer, Transmit};
use crate::crypto;
use crate::error::TransportError;

/// The pending CONNECTION_CLOSE.
#[derive(Clone, Debug)]
struct CloseFrame {
    code: u64,
    frame_type: Option<u64>,
    application: bool,
    reason: Vec<u8>,
}

/// How the connection ends: the CONNECTION_CLOSE it sends while closing
/// and why it ended.
///
/// Exists so that the end of a connection has one owner: every path that
/// ends it (a local close or error, the peer's close, a stateless reset,
/// the idle timer, the endpoint abandoning it) records the reason here
/// once, and the closing state's answers come from here.
#[derive(Debug, Default)]
pub(super) struct CloseState {
    /// Our CONNECTION_CLOSE, once we close.
    frame: Option<CloseFrame>,
    /// Closing: send the close again on the next poll.
    resend: bool,
    /// Why the connection ended, once it did.
    error: Option<ConnectionError>,
}

impl CloseState {
    /// Why the connection ended, if it did.
    pub(super) fn error(&self) -> Option<&ConnectionError> {
        self.error.as_ref()
    }

    /// Record why the connection ended (the last reason given wins).
    pub(super) fn set_error(&mut self, reason: ConnectionError) {
        self.error = Some(reason);
    }

    /// Record why the connection ended unless a reason is already known.
    pub(super) fn set_error_if_none(&mut self, reason: ConnectionError) {
        self.error.get_or_insert(reason);
    }

    /// Closing: a packet arrived, answer with our close again (RFC 9000
    /// §10.2.1).
    pub(super) fn resend(&mut self) {
        self.resend = true;
    }
}

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

    /// Enter the closing state with `frame` (RFC 9000 §10.2.1).
    fn enter_closing(&mut self, now: Instant, frame: CloseFrame, reason: ConnectionError) {
        self.close.frame = Some(frame);
        self.close.resend = true;
        self.state = State::Closing;
        self.abandon_recovery(now);
        self.close.set_error(reason.clone());
        self.events.push_back(Event::ConnectionLost(reason));
        self.timers.stop_all();
        self.timers
            .set(Timer::Close, now + self.pto_duration(SpaceId::Data) * 3);
    }

    /// The peer closed, or reset us: the draining state (RFC 9000
    /// §10.2.2), silent until the timer ends.
    pub(super) fn enter_draining(&mut self, now: Instant, reason: ConnectionError) {
        if self.state == State::Draining || self.state == State::Drained {
            return;
        }
        if self.state != State::Closing {
            self.close.set_error(reason.clone());
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

    /// The connection holds nothing more: the endpoint may forget it.
    pub(super) fn set_drained(&mut self) {
        if self.state != State::Drained {
            self.state = State::Drained;
            self.endpoint_events.push_back(EndpointEvent::Drained);
        }
    }

    /// Drop a connection silently (nothing is sent), as an idle timeout
    /// does: the endpoint's end for a half-open connection that went quiet.
    pub(crate) fn abandon(&mut self) {
        if self.state == State::Drained {
            return;
        }
        self.timers.stop_all();
        if self.close.error().is_none() {
            self.close.set_error(ConnectionError::TimedOut);
            self.events
                .push_back(Event::ConnectionLost(ConnectionError::TimedOut));
        }
        self.set_drained();
    }

    /// CONNECTION_CLOSE while closing (RFC 9000 §10.2.1).
    pub(super) fn poll_close(&mut self, now: Instant, buf: &mut Vec<u8>) -> Option<Transmit> {
        if !self.close.resend {
            return None;
        }
        self.close.resend = false;
        let close = self.close.frame.clone()?;
        let space = [SpaceId::Data, SpaceId::Handshake, SpaceId::Initial]
            .into_iter()
            .find(|&s| self.has_keys(s) && (s != SpaceId::Data || self.handshake.complete))
            .or_else(|| SpaceId::ALL.into_iter().find(|&s| self.has_keys(s)))?;
        let pn = self.space(space).next_pn;
        self.space_mut(space).next_pn += 1;
        let pn_len = packet::pn_len_for(pn, self.space(space).largest_acked);
        let (layout, pn_offset) = self.write_header(space, buf, pn, pn_len);
        // RFC 9000 §10.2.3: an application close in Initial/Handshake packets
        // becomes a transport close with APPLICATION_ERROR.
        let reason_len = close.reason.len().min(256);
        let f = if close.application && space != SpaceId::Data {
            Frame::ConnectionClose {
                error_code: TransportErrorCode::APPLICATION_ERROR.0,
                frame_type: Some(0),
                reason: &[],
            }
        } else if close.application {
            Frame::ConnectionClose {
                error_code: close.code,
                frame_type: None,
                reason: &close.reason[..reason_len],
            }
        } else {
            Frame::ConnectionClose {
                error_code: close.code,
                frame_type: close.frame_type,
                reason: &close.reason[..reason_len],
            }
        };
        f.encode(buf);
        let needs_pad = space == SpaceId::Initial && self.side.is_client();
        let min_end = if needs_pad {
            MIN_INITIAL_DATAGRAM - TAG_LEN
        } else {
            pn_offset + MAX_PN_LEN
        };
        if buf.len() < min_end {
            buf.resize(min_end, 0);
        }
        buf.resize(buf.len() + TAG_LEN, 0);
        let end = buf.len();
        if let Some(l) = layout.as_ref() {
            packet::set_long_length(buf, l, end);
        }
        let keys = self.local_keys(space)?;
        crypto::seal(keys, &mut buf[..], pn_offset, pn_len, pn).ok()?;
        let _ = now;
        self.stats.datagrams_sent += 1;
        self.stats.bytes_sent += buf.len() as u64;
        Some(Transmit {
            destination: self.remote,
            source: self.local,
            size: buf.len(),
            ecn: None,
        })
    }
}
