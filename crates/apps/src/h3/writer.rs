//! Writing frames on a stream whose transport writes may fall short.
//!
//! `Streams::write` copies only what fits the send buffer. A frame must
//! still reach the wire whole and as declared, so each sending stream keeps
//! a [`SendState`]: bytes of frames already committed but not yet taken by
//! the transport (`pending`: HEADERS, SETTINGS, GOAWAY, a DATA frame header
//! that did not fit), the payload bytes the current DATA frame still owes,
//! and whether FIN waits for those. Nothing new is written while anything
//! is owed, so no frame is ever torn or interleaved. Body bytes are never
//! copied into `pending`: a DATA frame declares only bytes the application
//! passed, and each call writes straight from the application's slice.

use transport::streams::WriteError;
use transport::Connection;
use wire::StreamId;

use super::frame::{self, DATA};
use crate::http::SendError;

/// Largest DATA frame we declare: large enough that headers cost nothing
/// (5 bytes per MiB), small enough that a short write commits us to little.
pub const MAX_DATA_FRAME: usize = 1 << 20;

/// Our sending half of one stream.
#[derive(Clone, Debug, Default)]
pub struct SendState {
    /// Frame bytes committed but not yet accepted by the transport.
    pending: Vec<u8>,
    /// Offset of the first unsent byte of `pending`.
    pending_at: usize,
    /// Payload bytes the current DATA frame still owes.
    data_owed: u64,
    /// FIN requested: sent once nothing is owed.
    fin_requested: bool,
    /// FIN handed to the transport.
    fin_sent: bool,
}

impl SendState {
    /// Commits whole frame bytes (a HEADERS, SETTINGS or GOAWAY frame) to be
    /// written after whatever is owed.
    pub fn queue(&mut self, bytes: &[u8]) {
        debug_assert!(self.data_owed == 0, "a frame queued inside a DATA frame");
        self.pending.extend_from_slice(bytes);
    }

    /// The committed bytes not yet written (tests look at what a stream
    /// would send).
    #[cfg(test)]
    pub fn pending_bytes(&self) -> &[u8] {
        self.pending.get(self.pending_at..).unwrap_or_default()
    }

    /// Nothing owed: every committed byte (and FIN, if requested) went out.
    pub fn is_idle(&self) -> bool {
        self.pending_at >= self.pending.len()
            && self.data_owed == 0
            && self.fin_requested == self.fin_sent
    }

    /// FIN was handed to the transport.
    pub fn is_finished(&self) -> bool {
        self.fin_sent
    }

    /// FIN was requested (it may still wait for owed bytes).
    pub fn fin_requested(&self) -> bool {
        self.fin_requested
    }

    /// Payload bytes the current DATA frame still owes.
    pub fn data_owed(&self) -> u64 {
        self.data_owed
    }

    /// Gives up sending after the peer stopped the stream (STOP_SENDING):
    /// nothing more will be written, and the half counts as finished. A
    /// server may do that once it has answered (RFC 9114 §4.1.1); the
    /// response still arrives.
    pub fn abandon(&mut self) {
        self.pending.clear();
        self.pending_at = 0;
        self.data_owed = 0;
        self.fin_requested = true;
        self.fin_sent = true;
    }

    /// Writes what is pending, then FIN if requested and nothing is owed.
    /// `Ok(true)` once no committed frame byte is left in `pending` (a DATA
    /// frame may still owe payload: see [`SendState::is_idle`]).
    pub fn flush(&mut self, conn: &mut Connection, id: StreamId) -> Result<bool, WriteError> {
        while self.pending_at < self.pending.len() {
            let rest = self.pending.get(self.pending_at..).unwrap_or_default();
            match conn.streams().write(id, rest) {
                Ok(n) => self.pending_at += n,
                Err(WriteError::Blocked) => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        self.pending.clear();
        self.pending_at = 0;
        if self.fin_requested && !self.fin_sent && self.data_owed == 0 {
            conn.streams().finish(id)?;
            self.fin_sent = true;
        }
        Ok(true)
    }

    /// Requests FIN after what is committed; sends it now if possible.
    /// Refused while a DATA frame still owes payload (the frame would end
    /// short, H3_FRAME_ERROR at the peer).
    pub fn finish(&mut self, conn: &mut Connection, id: StreamId) -> Result<(), SendError> {
        if self.data_owed > 0 {
            return Err(SendError::NotReady(
                "the current DATA frame still owes body bytes",
            ));
        }
        if self.fin_requested {
            return Err(SendError::Stream(WriteError::Closed));
        }
        self.fin_requested = true;
        self.flush(conn, id)?;
        Ok(())
    }

    /// Writes body bytes from `data` as DATA frames: first what the current
    /// frame owes, then new frames of at most [`MAX_DATA_FRAME`]. Returns
    /// how many bytes of `data` were taken; `Err(Stream(Blocked))` if none.
    pub fn send_body(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        data: &[u8],
    ) -> Result<usize, SendError> {
        if self.fin_requested {
            return Err(SendError::Stream(WriteError::Closed));
        }
        if data.is_empty() {
            return Ok(0);
        }
        let mut taken = 0;
        'frames: while taken < data.len() {
            if !self.flush(conn, id)? {
                break;
            }
            if self.data_owed == 0 {
                let len = (data.len() - taken).min(MAX_DATA_FRAME);
                let mut header = Vec::with_capacity(frame::MAX_HEADER_LEN);
                frame::write_header(&mut header, DATA, len as u64);
                let written = match conn.streams().write(id, &header) {
                    Ok(n) => n,
                    Err(WriteError::Blocked) => break,
                    Err(e) => return Err(e.into()),
                };
                self.data_owed = len as u64;
                if written < header.len() {
                    // The rest of the header goes first next time.
                    self.pending = header;
                    self.pending_at = written;
                    break;
                }
            }
            while self.data_owed > 0 && taken < data.len() {
                let owed = usize::try_from(self.data_owed).unwrap_or(usize::MAX);
                let end = taken + owed.min(data.len() - taken);
                let chunk = data.get(taken..end).unwrap_or_default();
                match conn.streams().write(id, chunk) {
                    Ok(n) => {
                        taken += n;
                        self.data_owed -= n as u64;
                        if n < chunk.len() {
                            break 'frames;
                        }
                    }
                    Err(WriteError::Blocked) => break 'frames,
                    Err(e) => return Err(e.into()),
                }
            }
        }
        if taken == 0 {
            return Err(SendError::Stream(WriteError::Blocked));
        }
        Ok(taken)
    }
}
