//! The receiving half of one stream (RFC 9000 §3.2).
//!
//! Validates what the peer sends against the final size and the stream's
//! receive window, stores the bytes in an [`Assembler`], and hands them to the
//! application in order. Connection-level accounting is the caller's: every
//! method that changes credit says how much, so [`super::Streams`] can charge
//! or release the connection window with the same numbers.

use wire::frame::MAX_STREAM_OFFSET;

use super::assembler::Assembler;
use super::flow::RecvWindow;
use super::ReadError;
use crate::TransportError;

/// What a STREAM frame or RESET_STREAM did, for the caller's bookkeeping.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct RecvOutcome {
    /// Connection credit to release right away (data that will never be read).
    pub release: u64,
    /// The application should hear about it (`Readable` / `Reset`).
    pub notify: bool,
}

/// The receiving half of a stream.
#[derive(Clone, Debug)]
pub(crate) struct RecvStream {
    /// Reassembly buffer.
    asm: Assembler,
    /// Stream-level window; `window.received` is the highest offset received.
    pub window: RecvWindow,
    /// Known once a FIN or RESET_STREAM arrived ("Size Known").
    pub final_size: Option<u64>,
    /// The peer reset the stream with this code ("Reset Recvd").
    pub reset: Option<u64>,
    /// The application stopped reading (STOP_SENDING) with this code.
    pub stopped: Option<u64>,
    /// The application saw the end: `Ok(None)` or `Err(Reset)` from `read`.
    pub end_read: bool,
    /// A `Readable` event is outstanding (cleared by `read`).
    readable_notified: bool,
}

impl RecvStream {
    /// A half that lets the peer send `window` bytes ahead of the reader.
    pub fn new(window: u64) -> Self {
        RecvStream {
            asm: Assembler::default(),
            window: RecvWindow::new(window),
            final_size: None,
            reset: None,
            stopped: None,
            end_read: false,
            readable_notified: false,
        }
    }

    /// Data is dropped instead of buffered (peer reset or we stopped).
    fn discarding(&self) -> bool {
        self.reset.is_some() || self.stopped.is_some()
    }

    /// Bytes held in the reassembly buffer (received, not read; holes cost
    /// nothing).
    pub fn buffered(&self) -> u64 {
        self.asm.buffered()
    }

    /// Pieces the held bytes are stored in (the connection caps their sum).
    pub fn pieces(&self) -> usize {
        self.asm.pieces()
    }

    /// Highest offset received so far.
    pub fn highest(&self) -> u64 {
        self.window.received
    }

    /// Checks a STREAM frame ending at `end` (RFC 9000 §4.5, §4.1) and returns
    /// the new connection credit it uses (`end` beyond the highest offset).
    pub fn validate_data(&self, end: u64, fin: bool) -> Result<u64, TransportError> {
        if end > MAX_STREAM_OFFSET {
            return Err(TransportError::flow_control("stream offset beyond 2^62-1"));
        }
        match self.final_size {
            Some(size) if end > size => {
                return Err(TransportError::final_size("data past the final size"))
            }
            Some(size) if fin && end != size => {
                return Err(TransportError::final_size("final size changed"))
            }
            None if fin && end < self.highest() => {
                return Err(TransportError::final_size(
                    "final size below data already received",
                ))
            }
            _ => {}
        }
        if end > self.window.max {
            return Err(TransportError::flow_control(
                "stream data beyond MAX_STREAM_DATA",
            ));
        }
        Ok(end.saturating_sub(self.highest()))
    }

    /// Applies a STREAM frame checked by [`RecvStream::validate_data`]; `used`
    /// is the credit it returned.
    pub fn apply_data(&mut self, offset: u64, data: &[u8], fin: bool, used: u64) -> RecvOutcome {
        self.window.receive(used);
        if fin {
            self.final_size = Some(self.highest());
        }
        if self.discarding() {
            // Counted against flow control, then dropped (RFC 9000 §3.5).
            self.window.release(used);
            return RecvOutcome {
                release: used,
                notify: false,
            };
        }
        self.asm.insert(offset, data);
        let notify = !self.readable_notified && (self.asm.readable() > 0 || self.at_end());
        self.readable_notified |= notify;
        RecvOutcome { release: 0, notify }
    }

    /// Checks a RESET_STREAM (RFC 9000 §4.5, §19.4) and returns the new
    /// connection credit its final size uses.
    pub fn validate_reset(&self, final_size: u64) -> Result<u64, TransportError> {
        match self.final_size {
            Some(size) if size != final_size => {
                Err(TransportError::final_size("final size changed"))
            }
            None if final_size < self.highest() => Err(TransportError::final_size(
                "final size below data already received",
            )),
            _ if final_size > self.window.max => Err(TransportError::flow_control(
                "final size beyond MAX_STREAM_DATA",
            )),
            _ => Ok(final_size.saturating_sub(self.highest())),
        }
    }

    /// Applies a RESET_STREAM checked by [`RecvStream::validate_reset`].
    /// Unread data is dropped and its connection credit released.
    pub fn apply_reset(&mut self, error_code: u64, final_size: u64, used: u64) -> RecvOutcome {
        if self.reset.is_some() {
            return RecvOutcome::default();
        }
        self.window.receive(used);
        self.final_size = Some(final_size);
        let release = if self.stopped.is_some() {
            used // everything below was already released when we stopped
        } else {
            final_size.saturating_sub(self.asm.read_offset())
        };
        self.window.release(release);
        self.asm.discard();
        self.reset = Some(error_code);
        // A reader that already stopped does not care.
        RecvOutcome {
            release,
            notify: self.stopped.is_none() && !self.end_read,
        }
    }

    /// The application stops reading: drops buffered data and returns the
    /// connection credit to release; `None` if it had already stopped.
    pub fn stop(&mut self, error_code: u64) -> Option<u64> {
        if self.stopped.is_some() {
            return None;
        }
        let release = if self.reset.is_some() {
            0
        } else {
            self.highest().saturating_sub(self.asm.read_offset())
        };
        self.window.release(release);
        self.asm.discard();
        self.stopped = Some(error_code);
        Some(release)
    }

    /// STOP_SENDING is still worth sending: the peer may still be sending
    /// (RFC 9000 §3.5: not after the size is known or the stream was reset).
    pub fn wants_stop_sending(&self) -> bool {
        self.stopped.is_some() && self.reset.is_none() && self.final_size.is_none()
    }

    /// MAX_STREAM_DATA is still useful (RFC 9000 §3.2: not once the size is known).
    pub fn wants_credit(&self) -> bool {
        self.final_size.is_none() && !self.discarding()
    }

    /// All data up to the FIN is readable (or was read).
    fn at_end(&self) -> bool {
        self.final_size
            .is_some_and(|s| self.asm.contiguous_end() >= s)
    }

    /// Reads in order into `buf`; returns bytes read (credit to release).
    /// An empty `buf` returns `Ok(Some(0))` when data is waiting.
    pub fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        self.readable_notified = false;
        if self.stopped.is_some() {
            return Err(ReadError::UnknownStream);
        }
        if let Some(code) = self.reset {
            self.end_read = true;
            return Err(ReadError::Reset(code));
        }
        if buf.is_empty() && self.asm.readable() > 0 {
            return Ok(Some(0));
        }
        let n = self.asm.read(buf);
        if n > 0 {
            self.window.release(n as u64);
            return Ok(Some(n));
        }
        if self.final_size == Some(self.asm.read_offset()) {
            self.end_read = true;
            return Ok(None);
        }
        Err(ReadError::Blocked)
    }

    /// Nothing more will happen on this half: the application saw the end,
    /// or it stopped reading and the final size is known.
    pub fn is_done(&self) -> bool {
        self.end_read || (self.stopped.is_some() && self.final_size.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::TransportErrorCode as Code;

    fn code<T>(r: Result<T, TransportError>) -> Code {
        r.err().expect("expected an error").code
    }

    #[test]
    fn final_size_rules() {
        let mut s = RecvStream::new(1000);
        let used = s.validate_data(10, false).unwrap();
        s.apply_data(0, &[0; 10], false, used);
        assert_eq!(
            code(s.validate_data(5, true)),
            Code::FINAL_SIZE_ERROR,
            "below received"
        );
        let used = s.validate_data(20, true).unwrap();
        s.apply_data(10, &[0; 10], true, used);
        assert_eq!(
            code(s.validate_data(21, false)),
            Code::FINAL_SIZE_ERROR,
            "past the end"
        );
        assert_eq!(
            code(s.validate_data(19, true)),
            Code::FINAL_SIZE_ERROR,
            "changed"
        );
        assert_eq!(s.validate_data(20, true), Ok(0), "repeat is fine");
        assert_eq!(code(s.validate_reset(30)), Code::FINAL_SIZE_ERROR);
        assert_eq!(s.validate_reset(20), Ok(0));
    }

    #[test]
    fn stream_window_is_enforced_and_extended_by_reads() {
        let mut s = RecvStream::new(100);
        assert_eq!(code(s.validate_data(101, false)), Code::FLOW_CONTROL_ERROR);
        assert_eq!(code(s.validate_reset(101)), Code::FLOW_CONTROL_ERROR);
        let used = s.validate_data(100, false).unwrap();
        assert_eq!(used, 100);
        assert!(s.apply_data(0, &[1; 100], false, used).notify);
        assert_eq!(s.window.poll_update(), None);
        let mut buf = [0u8; 60];
        assert_eq!(s.read(&mut buf), Ok(Some(60)));
        assert_eq!(s.window.poll_update(), Some(160));
        assert_eq!(s.validate_data(160, false), Ok(60));
        assert_eq!(code(s.validate_data(161, false)), Code::FLOW_CONTROL_ERROR);
    }

    #[test]
    fn reset_releases_unread_credit_and_is_reported_once() {
        let mut s = RecvStream::new(100);
        let used = s.validate_data(30, false).unwrap();
        s.apply_data(0, &[1; 30], false, used);
        let mut buf = [0u8; 10];
        s.read(&mut buf).unwrap();
        let used = s.validate_reset(50).unwrap();
        assert_eq!(used, 20);
        let out = s.apply_reset(7, 50, used);
        assert_eq!(
            out,
            RecvOutcome {
                release: 40,
                notify: true
            }
        );
        assert_eq!(s.apply_reset(7, 50, 0), RecvOutcome::default());
        assert_eq!(s.read(&mut buf), Err(ReadError::Reset(7)));
        assert!(s.is_done());
    }

    #[test]
    fn stop_discards_and_later_data_is_released_at_once() {
        let mut s = RecvStream::new(100);
        let used = s.validate_data(30, false).unwrap();
        s.apply_data(0, &[1; 30], false, used);
        assert_eq!(s.stop(3), Some(30));
        assert_eq!(s.stop(3), None);
        assert!(s.wants_stop_sending());
        let used = s.validate_data(40, true).unwrap();
        assert_eq!(
            s.apply_data(30, &[1; 10], true, used),
            RecvOutcome {
                release: 10,
                notify: false
            }
        );
        assert!(!s.wants_stop_sending());
        assert!(s.is_done());
        assert_eq!(s.read(&mut [0u8; 4]), Err(ReadError::UnknownStream));
    }

    #[test]
    fn fin_is_read_as_none() {
        let mut s = RecvStream::new(100);
        let used = s.validate_data(3, true).unwrap();
        s.apply_data(0, b"abc", true, used);
        let mut buf = [0u8; 10];
        assert_eq!(s.read(&mut []), Ok(Some(0)));
        assert_eq!(s.read(&mut buf), Ok(Some(3)));
        assert_eq!(&buf[..3], b"abc");
        assert_eq!(s.read(&mut buf), Ok(None));
        assert!(s.is_done());
    }
}
