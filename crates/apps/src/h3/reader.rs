//! Reading frames off a stream without ever taking more bytes than the
//! current step needs.
//!
//! [`FrameCursor`] reads a frame header byte-exact (at most 16 bytes, kept
//! between reads), then lets its owner decide what the payload is for:
//! collected whole (HEADERS, SETTINGS, bounded by a limit the owner picks),
//! skipped (unknown frames, request bodies the server ignores), or handed
//! out piecewise (the client's DATA). The bytes come from a [`ByteSource`]:
//! a transport stream in a session, a byte slice in the fuzz body and unit
//! tests, so the stream state machines run the same code in both.

use transport::streams::ReadError;
use transport::Connection;
use wire::StreamId;

use super::error::H3Error;
use super::frame::{self, FrameHeader, MAX_HEADER_LEN};

/// Bytes of one stream, in order; as [`transport::streams::Streams::read`].
pub trait ByteSource {
    /// Up to `buf.len()` bytes: `Ok(Some(n))` (n > 0 unless `buf` is
    /// empty), `Ok(None)` at the end, `Err(Blocked)` when nothing is there
    /// now, `Err(Reset(code))` if the peer reset the stream.
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError>;
}

/// A transport stream as a [`ByteSource`].
pub struct ConnStream<'a> {
    /// The connection.
    pub conn: &'a mut Connection,
    /// The stream.
    pub id: StreamId,
}

impl ByteSource for ConnStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        self.conn.streams().read(self.id, buf)
    }
}

/// A byte slice as a [`ByteSource`]: `fin` says whether its end is the
/// stream's end (`Ok(None)`) or just all that arrived so far (`Blocked`).
#[derive(Clone, Debug)]
pub struct SliceSource<'a> {
    data: &'a [u8],
    fin: bool,
}

impl<'a> SliceSource<'a> {
    /// A source that yields `data`, then the end (`fin`) or `Blocked`.
    pub fn new(data: &'a [u8], fin: bool) -> SliceSource<'a> {
        SliceSource { data, fin }
    }
}

impl ByteSource for SliceSource<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
        if self.data.is_empty() {
            return if self.fin {
                Ok(None)
            } else {
                Err(ReadError::Blocked)
            };
        }
        let n = buf.len().min(self.data.len());
        let (now, later) = self.data.split_at(n);
        buf.get_mut(..n).unwrap_or_default().copy_from_slice(now);
        self.data = later;
        Ok(Some(n))
    }
}

/// What reading a stream came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// A frame header: the owner must say what to do with the payload
    /// ([`FrameCursor::collect`], [`FrameCursor::skip`] or
    /// [`FrameCursor::stream`]) before the next [`FrameCursor::step`].
    Header(FrameHeader),
    /// A frame given to [`FrameCursor::collect`], whole.
    Frame {
        /// Its type.
        ty: u64,
        /// Its payload.
        payload: Vec<u8>,
    },
    /// The stream ended cleanly, between two frames.
    Fin,
    /// Nothing more to read now.
    Blocked,
    /// The peer reset the stream with this code.
    Reset(u64),
    /// The transport no longer knows the stream (we stopped it earlier).
    Gone,
}

/// What the cursor is doing with the current frame's payload.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
enum Payload {
    /// Between frames: the next bytes are a header.
    #[default]
    Between,
    /// A header was returned; the owner has not decided yet.
    Undecided,
    /// Collecting `want` bytes of a frame of type `ty`.
    Collect { ty: u64, want: usize, buf: Vec<u8> },
    /// Discarding this many more bytes.
    Skip { remaining: u64 },
    /// This many more bytes belong to the owner, read with
    /// [`FrameCursor::read_streamed`].
    Stream { remaining: u64 },
}

/// One stream's position in its sequence of frames.
#[derive(Clone, Debug, Default)]
pub struct FrameCursor {
    header: [u8; MAX_HEADER_LEN],
    filled: usize,
    payload: Payload,
}

/// A read that is neither data nor an end.
fn interrupted(e: ReadError) -> Step {
    match e {
        ReadError::Blocked => Step::Blocked,
        ReadError::Reset(code) => Step::Reset(code),
        ReadError::UnknownStream => Step::Gone,
    }
}

impl FrameCursor {
    /// Collect the payload of the header just returned (the owner checked
    /// its length against its limit).
    pub fn collect(&mut self, header: FrameHeader) {
        let want = usize::try_from(header.len).unwrap_or(usize::MAX);
        self.payload = Payload::Collect {
            ty: header.ty,
            want,
            buf: Vec::with_capacity(want.min(4096)),
        };
    }

    /// Discard the payload of the header just returned.
    pub fn skip(&mut self, header: FrameHeader) {
        self.payload = Payload::Skip {
            remaining: header.len,
        };
    }

    /// Hand the payload of the header just returned to the owner piecewise
    /// ([`FrameCursor::read_streamed`]).
    pub fn stream(&mut self, header: FrameHeader) {
        self.payload = Payload::Stream {
            remaining: header.len,
        };
    }

    /// Payload bytes still to be read with [`FrameCursor::read_streamed`].
    pub fn streamed_remaining(&self) -> u64 {
        match self.payload {
            Payload::Stream { remaining } => remaining,
            _ => 0,
        }
    }

    /// Reads streamed payload into `buf` (no more than the frame has):
    /// `Ok(Ok(n))` with n > 0, or `Ok(Err(step))` for Blocked, Reset or
    /// Gone. The stream ending inside the frame is H3_FRAME_ERROR.
    pub fn read_streamed(
        &mut self,
        src: &mut impl ByteSource,
        buf: &mut [u8],
    ) -> Result<Result<usize, Step>, H3Error> {
        let Payload::Stream { remaining } = &mut self.payload else {
            return Ok(Err(Step::Blocked));
        };
        let cap = usize::try_from(*remaining)
            .unwrap_or(usize::MAX)
            .min(buf.len());
        let target = buf.get_mut(..cap).unwrap_or_default();
        match src.read(target) {
            Ok(Some(n)) => {
                *remaining -= (n as u64).min(*remaining);
                if *remaining == 0 {
                    self.payload = Payload::Between;
                }
                Ok(Ok(n))
            }
            Ok(None) => Err(H3Error::frame("stream ended inside a DATA frame")),
            Err(e) => Ok(Err(interrupted(e))),
        }
    }

    /// Reads until something the owner must act on. A stream that ends
    /// inside a frame header or payload is H3_FRAME_ERROR (RFC 9114 §7.1).
    /// Called while a streamed payload is pending, it skips what is left of
    /// it.
    pub fn step(&mut self, src: &mut impl ByteSource) -> Result<Step, H3Error> {
        loop {
            match &mut self.payload {
                Payload::Between => return self.read_header(src),
                Payload::Undecided => {
                    // The owner ignored the header: treat the payload as
                    // skipped rather than misread it as a header.
                    debug_assert!(false, "frame header left undecided");
                    return Err(H3Error::frame("frame payload left undecided"));
                }
                Payload::Collect { ty, want, buf } => {
                    while buf.len() < *want {
                        let mut chunk = [0u8; 4096];
                        let room = (*want - buf.len()).min(chunk.len());
                        match src.read(chunk.get_mut(..room).unwrap_or_default()) {
                            Ok(Some(n)) => {
                                buf.extend_from_slice(chunk.get(..n).unwrap_or_default())
                            }
                            Ok(None) => return Err(H3Error::frame("stream ended inside a frame")),
                            Err(e) => return Ok(interrupted(e)),
                        }
                    }
                    let step = Step::Frame {
                        ty: *ty,
                        payload: std::mem::take(buf),
                    };
                    self.payload = Payload::Between;
                    return Ok(step);
                }
                Payload::Skip { remaining } | Payload::Stream { remaining } => {
                    while *remaining > 0 {
                        let mut chunk = [0u8; 16384];
                        let room = usize::try_from(*remaining)
                            .unwrap_or(usize::MAX)
                            .min(chunk.len());
                        match src.read(chunk.get_mut(..room).unwrap_or_default()) {
                            Ok(Some(n)) => *remaining -= (n as u64).min(*remaining),
                            Ok(None) => return Err(H3Error::frame("stream ended inside a frame")),
                            Err(e) => return Ok(interrupted(e)),
                        }
                    }
                    self.payload = Payload::Between;
                }
            }
        }
    }

    /// Reads the next frame header, byte-exact.
    fn read_header(&mut self, src: &mut impl ByteSource) -> Result<Step, H3Error> {
        loop {
            let have = self.header.get(..self.filled).unwrap_or_default();
            let need = frame::header_len_needed(have);
            if need == self.filled {
                let Some((header, _)) = frame::parse_header(have) else {
                    return Err(H3Error::frame("unparsable frame header"));
                };
                self.filled = 0;
                self.payload = Payload::Undecided;
                return Ok(Step::Header(header));
            }
            let target = self.header.get_mut(self.filled..need).unwrap_or_default();
            match src.read(target) {
                Ok(Some(n)) => self.filled += n,
                Ok(None) if self.filled == 0 => return Ok(Step::Fin),
                Ok(None) => return Err(H3Error::frame("stream ended inside a frame header")),
                Err(e) => return Ok(interrupted(e)),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::error::H3_FRAME_ERROR;
    use crate::h3::frame::{write_frame, write_header, DATA, HEADERS};

    /// Hands out one byte per read (the worst split), then the end.
    struct Trickle<'a>(&'a [u8]);

    impl ByteSource for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, ReadError> {
            let (Some((&first, rest)), Some(slot)) = (self.0.split_first(), buf.first_mut()) else {
                return Ok(None);
            };
            *slot = first;
            self.0 = rest;
            Ok(Some(1))
        }
    }

    /// Every frame of `data`, read a byte at a time, DATA skipped.
    fn frames_bytewise(data: &[u8]) -> Result<Vec<(u64, Vec<u8>)>, u64> {
        let mut src = Trickle(data);
        let mut cursor = FrameCursor::default();
        let mut frames = Vec::new();
        loop {
            match cursor.step(&mut src).map_err(|e| e.code)? {
                Step::Header(h) if h.ty == DATA => cursor.skip(h),
                Step::Header(h) => cursor.collect(h),
                Step::Frame { ty, payload } => frames.push((ty, payload)),
                Step::Fin => return Ok(frames),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn frames_split_anywhere() {
        let mut data = Vec::new();
        write_frame(&mut data, HEADERS, b"abc");
        write_frame(&mut data, DATA, &[7; 300]);
        write_frame(&mut data, 0x21, b"");
        write_frame(&mut data, HEADERS, b"");
        let frames = frames_bytewise(&data).unwrap();
        assert_eq!(
            frames,
            vec![
                (HEADERS, b"abc".to_vec()),
                (0x21, Vec::new()),
                (HEADERS, Vec::new())
            ]
        );
    }

    #[test]
    fn truncation_is_a_frame_error() {
        let mut data = Vec::new();
        write_header(&mut data, HEADERS, 10);
        data.extend_from_slice(b"abc");
        assert_eq!(frames_bytewise(&data), Err(H3_FRAME_ERROR));
        // Cut inside the header: a 2-byte type varint with one byte.
        assert_eq!(frames_bytewise(&[0x40]), Err(H3_FRAME_ERROR));
        assert_eq!(frames_bytewise(&[0x01]), Err(H3_FRAME_ERROR));
        assert_eq!(frames_bytewise(&[]), Ok(Vec::new()));
    }

    #[test]
    fn streamed_payload_stops_at_the_frame_end() {
        let mut data = Vec::new();
        write_frame(&mut data, DATA, b"hello");
        write_frame(&mut data, DATA, b"!");
        let mut src = SliceSource::new(&data, true);
        let mut cursor = FrameCursor::default();
        let mut body = Vec::new();
        loop {
            if cursor.streamed_remaining() > 0 {
                let mut buf = [0u8; 64];
                let n = cursor.read_streamed(&mut src, &mut buf).unwrap().unwrap();
                body.extend_from_slice(&buf[..n]);
                continue;
            }
            match cursor.step(&mut src).unwrap() {
                Step::Header(h) => cursor.stream(h),
                Step::Fin => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(body, b"hello!");
    }
}
