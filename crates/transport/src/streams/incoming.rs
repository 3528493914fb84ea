//! Stream frames from the peer (RFC 9000 §19.4, §19.5, §19.8–§19.13).
//!
//! Every handler first resolves the stream ID: it may name a stream the peer
//! is allowed to open (implicitly opening it and all lower ones of its kind,
//! RFC 9000 §2.1, §3.2), a live stream, a stream already closed and forgotten
//! (the frame is then ignored), or a stream that cannot exist (an error).

use wire::frame::{MAX_STREAM_COUNT, MAX_STREAM_OFFSET};
use wire::{Dir, StreamId};

use super::control::Pending;
use super::{di, StreamEvent, Streams};
use crate::TransportError;

/// Which half of the stream a frame addresses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Half {
    /// Frames about data the peer sends us (STREAM, RESET_STREAM, STREAM_DATA_BLOCKED).
    Recv,
    /// Frames about data we send (MAX_STREAM_DATA, STOP_SENDING).
    Send,
}

impl Streams {
    /// Resolves `id` for a frame addressing `half`. `Ok(true)` if the stream
    /// is live (opening peer streams as needed), `Ok(false)` if it was closed
    /// and forgotten.
    fn resolve(&mut self, id: StreamId, half: Half) -> Result<bool, TransportError> {
        let local = self.is_local(id);
        let dir = id.dir();
        if dir == Dir::Uni {
            // RFC 9000 §19.8, §19.4, §19.13: no receiving half on our own
            // unidirectional streams; §19.10, §19.5: no sending half on the peer's.
            match (half, local) {
                (Half::Recv, true) => {
                    return Err(TransportError::stream_state("frame for a send-only stream"))
                }
                (Half::Send, false) => {
                    return Err(TransportError::stream_state(
                        "frame for a receive-only stream",
                    ))
                }
                _ => {}
            }
        }
        let d = di(dir);
        let index = id.index();
        if local {
            if index >= self.next_local[d] {
                // RFC 9000 §19.8, §19.10, §19.5: a locally initiated stream not yet created.
                return Err(TransportError::stream_state(
                    "frame for a stream we never opened",
                ));
            }
        } else {
            if index >= self.max_remote[d] {
                // RFC 9000 §4.6.
                return Err(TransportError::stream_limit(
                    "stream ID beyond our MAX_STREAMS",
                ));
            }
            if index >= self.next_remote[d] {
                // RFC 9000 §2.1 / §3.2: opening a stream opens all lower ones of its kind.
                for i in self.next_remote[d]..=index {
                    let sid = StreamId::new(id.initiator(), dir, i);
                    let stream = self.new_stream(sid);
                    self.streams.insert(sid, stream);
                }
                self.next_remote[d] = index + 1;
                self.events.push_back(StreamEvent::Opened { dir });
            }
        }
        Ok(self.streams.contains_key(&id))
    }

    /// A STREAM frame (RFC 9000 §19.8).
    pub fn on_stream_frame(
        &mut self,
        id: StreamId,
        offset: u64,
        data: &[u8],
        fin: bool,
    ) -> Result<(), TransportError> {
        let end = offset
            .checked_add(data.len() as u64)
            .filter(|&e| e <= MAX_STREAM_OFFSET)
            .ok_or(TransportError::flow_control("stream offset beyond 2^62-1"))?;
        if !self.resolve(id, Half::Recv)? {
            return Ok(());
        }
        let Some(recv) = self.streams.get(&id).and_then(|s| s.recv.as_ref()) else {
            return Ok(());
        };
        let used = recv.validate_data(end, fin)?;
        if used > self.recv_window.available() {
            // RFC 9000 §4.1: more than our MAX_DATA.
            return Err(TransportError::flow_control(
                "connection data beyond MAX_DATA",
            ));
        }
        self.recv_window.receive(used);
        let Some(out) = self.with_recv(id, |recv| recv.apply_data(offset, data, fin, used)) else {
            return Ok(());
        };
        if self.recv_pieces > self.config.max_receive_pieces {
            // RFC 9000 §21.6: a peer fragmenting its data (holes, bytes
            // filled in from the back) must not make us keep unbounded
            // bookkeeping; §21.9 lets us close on such non-productive input.
            return Err(TransportError::protocol_violation(
                "stream data fragmented into too many pieces",
            ));
        }
        if out.notify {
            self.events.push_back(StreamEvent::Readable { id });
        }
        self.release_conn(out.release);
        self.maybe_forget(id);
        Ok(())
    }

    /// A RESET_STREAM frame (RFC 9000 §19.4).
    pub fn on_reset_stream(
        &mut self,
        id: StreamId,
        error_code: u64,
        final_size: u64,
    ) -> Result<(), TransportError> {
        if !self.resolve(id, Half::Recv)? {
            return Ok(());
        }
        let Some(recv) = self.streams.get(&id).and_then(|s| s.recv.as_ref()) else {
            return Ok(());
        };
        let used = recv.validate_reset(final_size)?;
        if used > self.recv_window.available() {
            return Err(TransportError::flow_control("final size beyond MAX_DATA"));
        }
        self.recv_window.receive(used);
        let Some(out) = self.with_recv(id, |recv| recv.apply_reset(error_code, final_size, used))
        else {
            return Ok(());
        };
        if out.notify {
            self.events.push_back(StreamEvent::Reset { id, error_code });
        }
        self.release_conn(out.release);
        self.maybe_forget(id);
        Ok(())
    }

    /// A STOP_SENDING frame (RFC 9000 §19.5): we reset the stream with the
    /// peer's code (§3.5: "SHOULD copy the error code") and tell the application.
    pub fn on_stop_sending(&mut self, id: StreamId, error_code: u64) -> Result<(), TransportError> {
        if !self.resolve(id, Half::Send)? {
            return Ok(());
        }
        let reset = self.with_send(id, |send| {
            if send.stopped.is_some() {
                return false;
            }
            send.stopped = Some(error_code);
            // Already reset by us, or all data acknowledged: nothing left to stop.
            send.reset(error_code)
        });
        if reset != Some(true) {
            return Ok(());
        }
        self.control.insert(Pending::ResetStream(id));
        self.events
            .push_back(StreamEvent::Stopped { id, error_code });
        self.schedule(id);
        self.wake_writers();
        Ok(())
    }

    /// A MAX_DATA frame (RFC 9000 §19.9); smaller values are ignored.
    pub fn on_max_data(&mut self, max: u64) {
        if self.send_credit.raise(max) {
            self.wake_writers();
        }
    }

    /// A MAX_STREAM_DATA frame (RFC 9000 §19.10); smaller values are ignored.
    pub fn on_max_stream_data(&mut self, id: StreamId, max: u64) -> Result<(), TransportError> {
        if !self.resolve(id, Half::Send)? {
            return Ok(());
        }
        let raised = self.with_send(id, |send| {
            let raised = max > send.max_data;
            send.max_data = send.max_data.max(max);
            raised
        });
        if raised == Some(true) {
            self.schedule(id);
            self.wake_writers();
        }
        Ok(())
    }

    /// A MAX_STREAMS frame (RFC 9000 §19.11): a count above 2^60 is a
    /// FRAME_ENCODING_ERROR; smaller values than before are ignored.
    pub fn on_max_streams(&mut self, dir: Dir, count: u64) -> Result<(), TransportError> {
        if count > MAX_STREAM_COUNT {
            return Err(TransportError::frame_encoding("MAX_STREAMS above 2^60"));
        }
        self.raise_max_local(dir, count);
        Ok(())
    }

    /// A STREAM_DATA_BLOCKED frame (RFC 9000 §19.13): validated; if the peer
    /// is blocked below the limit we already advertised, it missed our
    /// MAX_STREAM_DATA, so that is queued again.
    pub fn on_stream_data_blocked(
        &mut self,
        id: StreamId,
        limit: u64,
    ) -> Result<(), TransportError> {
        if !self.resolve(id, Half::Recv)? {
            return Ok(());
        }
        if let Some(recv) = self.streams.get(&id).and_then(|s| s.recv.as_ref()) {
            if recv.wants_credit() && limit < recv.window.max {
                self.control.insert(Pending::MaxStreamData(id));
            }
        }
        Ok(())
    }
}
