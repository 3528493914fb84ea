//! The application's side of streams: open, accept, write, read, finish,
//! reset and stop (RFC 9000 §2.4 operations on streams).

use wire::{Dir, StreamId};

use super::control::Pending;
use super::{di, ReadError, Streams, WriteError};

impl Streams {
    /// Opens a stream of kind `dir`. `None` if the peer's MAX_STREAMS is
    /// exhausted: STREAMS_BLOCKED is queued (RFC 9000 §4.6) and an
    /// `Available` event follows when the peer raises the limit.
    pub fn open(&mut self, dir: Dir) -> Option<StreamId> {
        let d = di(dir);
        if self.next_local[d] >= self.max_local[d] {
            self.open_refused[d] = true;
            if self.streams_blocked_reported[d] != Some(self.max_local[d]) {
                self.streams_blocked_reported[d] = Some(self.max_local[d]);
                self.control.insert(Pending::StreamsBlocked(dir));
            }
            return None;
        }
        let id = StreamId::new(self.side, dir, self.next_local[d]);
        self.next_local[d] += 1;
        let stream = self.new_stream(id);
        self.streams.insert(id, stream);
        Some(id)
    }

    /// The next stream the peer opened, in ID order (each once).
    pub fn accept(&mut self, dir: Dir) -> Option<StreamId> {
        let d = di(dir);
        if self.next_accept[d] >= self.next_remote[d] {
            return None;
        }
        let id = StreamId::new(self.side.opposite(), dir, self.next_accept[d]);
        self.next_accept[d] += 1;
        Some(id)
    }

    /// Copies up to the free send-buffer room (`send_buffer` minus the
    /// unacknowledged bytes) of `data`; returns how much. Not limited by flow
    /// control, which limits sending, not buffering. `Err(Blocked)` if no
    /// room at all; a short or blocked write is followed by `Writable`.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        let limit = self.config.send_buffer;
        let send = self
            .streams
            .get_mut(&id)
            .and_then(|s| s.send.as_mut())
            .ok_or(WriteError::UnknownStream)?;
        let n = send.write(data, limit)?;
        if n > 0 {
            self.schedule(id);
        }
        Ok(n)
    }

    /// Ends the stream after the data written so far (FIN).
    pub fn finish(&mut self, id: StreamId) -> Result<(), WriteError> {
        let send = self
            .streams
            .get_mut(&id)
            .and_then(|s| s.send.as_mut())
            .ok_or(WriteError::UnknownStream)?;
        send.finish()?;
        self.schedule(id);
        Ok(())
    }

    /// Abandons the sending half with `error_code` (RESET_STREAM, RFC 9000
    /// §19.4). Buffered data is dropped and never retransmitted. `Closed` if
    /// already reset or all data was acknowledged; a stream the peer stopped
    /// was already reset for it, so that is `Ok`.
    pub fn reset(&mut self, id: StreamId, error_code: u64) -> Result<(), WriteError> {
        let send = self
            .streams
            .get_mut(&id)
            .and_then(|s| s.send.as_mut())
            .ok_or(WriteError::UnknownStream)?;
        if send.stopped.is_some() {
            return Ok(());
        }
        if !send.reset(error_code) {
            return Err(WriteError::Closed);
        }
        self.control.insert(Pending::ResetStream(id));
        self.schedule(id);
        Ok(())
    }

    /// Reads in-order bytes into `buf`: `Ok(Some(n))` with `n > 0`, `Ok(None)`
    /// once the FIN was reached and everything read, `Err(Blocked)` if nothing
    /// is available now. An empty `buf` gives `Ok(Some(0))` when data waits.
    /// Reading gives credit back to the peer (MAX_STREAM_DATA / MAX_DATA when
    /// the unread credit falls to half the window).
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        let recv = self
            .streams
            .get_mut(&id)
            .and_then(|s| s.recv.as_mut())
            .ok_or(ReadError::UnknownStream)?;
        let result = recv.read(buf);
        match result {
            Ok(Some(n)) if n > 0 => {
                if recv.wants_credit() && recv.window.poll_update().is_some() {
                    self.control.insert(Pending::MaxStreamData(id));
                }
                self.release_conn(n as u64);
            }
            Ok(None) | Err(ReadError::Reset(_)) => self.maybe_forget(id),
            _ => {}
        }
        result
    }

    /// Stops reading (STOP_SENDING with `error_code`, RFC 9000 §19.5):
    /// buffered and future data is discarded, its credit given back, and
    /// later reads return `UnknownStream`.
    pub fn stop_sending(&mut self, id: StreamId, error_code: u64) -> Result<(), ReadError> {
        let recv = self
            .streams
            .get_mut(&id)
            .and_then(|s| s.recv.as_mut())
            .ok_or(ReadError::UnknownStream)?;
        let Some(release) = recv.stop(error_code) else {
            return Ok(());
        };
        if recv.wants_stop_sending() {
            self.control.insert(Pending::StopSending(id));
        }
        self.release_conn(release);
        self.maybe_forget(id);
        Ok(())
    }
}
