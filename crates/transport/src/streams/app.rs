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

    /// Copies as much of `data` as there is room for ([`Streams::write_room`]);
    /// returns how much. `Err(Blocked)` if no room at all; a short or blocked
    /// write is followed by `Writable` once room opens (the peer's credit
    /// grows, acknowledgements free the buffer). An empty `data` returns
    /// `Ok(0)`, or the error a write would meet.
    pub fn write(&mut self, id: StreamId, data: &[u8]) -> Result<usize, WriteError> {
        let room = self.write_room(id)?;
        let n = self
            .with_send(id, |send| send.write(data, room))
            .ok_or(WriteError::UnknownStream)?;
        let n = match n {
            Err(WriteError::Blocked) => {
                self.blocked_writers.insert(id);
                self.note_short_write(room);
                return Err(WriteError::Blocked);
            }
            other => other?,
        };
        if n < data.len() {
            self.blocked_writers.insert(id);
            self.note_short_write(room);
        }
        if n > 0 {
            self.schedule(id);
        }
        Ok(n)
    }

    /// How many bytes [`Streams::write`] would take on `id` now. Writes are
    /// bounded by the send buffers ([`super::StreamsConfig::send_buffer`],
    /// [`super::StreamsConfig::connection_send_buffer`]) and by the peer's
    /// flow control: a stream may run [`super::StreamsConfig::send_ahead`]
    /// bytes past its MAX_STREAM_DATA, all streams together that much past
    /// the connection's MAX_DATA. An application that reads its data from a
    /// source (a file) asks this first, so it reads only what the peer's
    /// window lets through. `Err` as `write` would fail.
    pub fn write_room(&self, id: StreamId) -> Result<u64, WriteError> {
        let send = self
            .streams
            .get(&id)
            .and_then(|s| s.send.as_ref())
            .ok_or(WriteError::UnknownStream)?;
        send.check_writable()?;
        Ok(self.room(send))
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
        let outcome = self
            .with_send(id, |send| {
                if send.stopped.is_some() {
                    None
                } else {
                    Some(send.reset(error_code))
                }
            })
            .ok_or(WriteError::UnknownStream)?;
        match outcome {
            None => return Ok(()),
            Some(false) => return Err(WriteError::Closed),
            Some(true) => {}
        }
        self.control.insert(Pending::ResetStream(id));
        self.schedule(id);
        self.wake_writers();
        Ok(())
    }

    /// Reads in-order bytes into `buf`: `Ok(Some(n))` with `n > 0`, `Ok(None)`
    /// once the FIN was reached and everything read, `Err(Blocked)` if nothing
    /// is available now. An empty `buf` gives `Ok(Some(0))` when data waits.
    /// Reading gives credit back to the peer (MAX_STREAM_DATA / MAX_DATA when
    /// the unread credit falls to half the window).
    pub fn read(&mut self, id: StreamId, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        let (result, credit) = self
            .with_recv(id, |recv| {
                let result = recv.read(buf);
                let credit = matches!(result, Ok(Some(n)) if n > 0)
                    && recv.wants_credit()
                    && recv.window.poll_update().is_some();
                (result, credit)
            })
            .ok_or(ReadError::UnknownStream)?;
        match result {
            Ok(Some(n)) if n > 0 => {
                if credit {
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
        let (release, wants_stop) = self
            .with_recv(id, |recv| {
                (recv.stop(error_code), recv.wants_stop_sending())
            })
            .ok_or(ReadError::UnknownStream)?;
        let Some(release) = release else {
            return Ok(());
        };
        if wants_stop {
            self.control.insert(Pending::StopSending(id));
        }
        self.release_conn(release);
        self.maybe_forget(id);
        Ok(())
    }
}
