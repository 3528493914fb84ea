//! The live stream's wire format: every frame is a fixed 28-byte header
//! followed by its payload, back to back on one stream.
//!
//! ```text
//! offset size field
//!  0      4   magic "AQFR"
//!  4      1   kind: 0 = video I-frame, 1 = video P-frame, 2 = audio
//!  5      3   reserved, zero
//!  8      4   frame number (u32, big-endian): 0, 1, 2, ... over all kinds
//! 12      8   capture timestamp, µs since the stream's start (u64, BE)
//! 20      4   duration, µs (u32, BE): how long the frame plays
//! 24      4   payload size, bytes (u32, BE)
//! 28      -   payload
//! ```
//!
//! The payload of frame `n` is [`FileContent`] for seed [`PAYLOAD_SEED`],
//! index `n`, `size` bytes: a client that knows nothing of the server's
//! settings checks every byte. [`FrameParser`] reads the format from a
//! byte stream cut anywhere, checks it, and never panics or grows on
//! hostile input (it holds one header and streams the payload).

use crate::content::FileContent;

/// Bytes of a frame header.
pub const HEADER_LEN: usize = 28;
/// The header's first four bytes.
pub const MAGIC: [u8; 4] = *b"AQFR";
/// The content seed of every frame payload ([`FileContent`]).
pub const PAYLOAD_SEED: u64 = 0x6c69_7665_6672_616d; // "liveframe"
/// Largest payload a parser accepts (a 100 Mbit/s stream's I-frame is
/// well below).
pub const MAX_FRAME_BYTES: u32 = 16 << 20;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameKind {
    /// A video key frame (the first of each group of pictures).
    VideoI,
    /// A video predicted frame.
    VideoP,
    /// An audio frame.
    Audio,
}

impl FrameKind {
    fn code(self) -> u8 {
        match self {
            FrameKind::VideoI => 0,
            FrameKind::VideoP => 1,
            FrameKind::Audio => 2,
        }
    }

    fn from_code(c: u8) -> Option<FrameKind> {
        match c {
            0 => Some(FrameKind::VideoI),
            1 => Some(FrameKind::VideoP),
            2 => Some(FrameKind::Audio),
            _ => None,
        }
    }

    /// A video frame (I or P).
    pub fn is_video(self) -> bool {
        !matches!(self, FrameKind::Audio)
    }
}

/// One frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// Video or audio.
    pub kind: FrameKind,
    /// Position in the stream, from 0.
    pub number: u32,
    /// When the source produced it, µs since the stream's start.
    pub capture_us: u64,
    /// How long it plays, µs.
    pub duration_us: u32,
    /// Payload bytes after the header.
    pub size: u32,
}

impl FrameHeader {
    /// The header's bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[..4].copy_from_slice(&MAGIC);
        b[4] = self.kind.code();
        b[8..12].copy_from_slice(&self.number.to_be_bytes());
        b[12..20].copy_from_slice(&self.capture_us.to_be_bytes());
        b[20..24].copy_from_slice(&self.duration_us.to_be_bytes());
        b[24..28].copy_from_slice(&self.size.to_be_bytes());
        b
    }

    /// Reads a header, checking its magic, kind, reserved bytes and size.
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<FrameHeader, FrameError> {
        let (magic, rest) = b.split_at(4);
        if magic != MAGIC {
            return Err(FrameError::BadMagic);
        }
        let field = |r: core::ops::Range<usize>| rest.get(r.start - 4..r.end - 4).unwrap_or(&[]);
        let kind_code = field(4..5).first().copied().unwrap_or(u8::MAX);
        let kind = FrameKind::from_code(kind_code).ok_or(FrameError::BadKind(kind_code))?;
        if field(5..8).iter().any(|&x| x != 0) {
            return Err(FrameError::Reserved);
        }
        let u32_at = |r| {
            <[u8; 4]>::try_from(field(r))
                .map(u32::from_be_bytes)
                .unwrap_or(0)
        };
        let capture_us = <[u8; 8]>::try_from(field(12..20))
            .map(u64::from_be_bytes)
            .unwrap_or(0);
        let h = FrameHeader {
            kind,
            number: u32_at(8..12),
            capture_us,
            duration_us: u32_at(20..24),
            size: u32_at(24..28),
        };
        if h.size > MAX_FRAME_BYTES {
            return Err(FrameError::TooLarge(h.size));
        }
        Ok(h)
    }
}

/// Why a byte stream is not a valid live stream.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The header does not start with "AQFR".
    #[error("frame header without the AQFR magic")]
    BadMagic,
    /// Unknown frame kind.
    #[error("unknown frame kind {0}")]
    BadKind(u8),
    /// Reserved header bytes are not zero.
    #[error("reserved frame header bytes are not zero")]
    Reserved,
    /// A payload larger than [`MAX_FRAME_BYTES`].
    #[error("frame of {0} bytes exceeds the {MAX_FRAME_BYTES}-byte limit")]
    TooLarge(u32),
    /// Frames out of order, missing or repeated.
    #[error("frame {got} where frame {expected} was due")]
    OutOfOrder {
        /// The number due.
        expected: u32,
        /// The number received.
        got: u32,
    },
    /// A capture timestamp earlier than the previous frame's.
    #[error("frame {0}'s capture time goes back")]
    TimeWentBack(u32),
    /// A payload byte differs from the generated content.
    #[error("frame {number}: payload byte {offset} differs from the generated content")]
    Payload {
        /// Frame number.
        number: u32,
        /// Offset in the payload.
        offset: u64,
    },
    /// The stream ended inside a frame.
    #[error("the stream ended inside frame {0}")]
    Truncated(u32),
}

/// The frame being read.
#[derive(Debug)]
struct InFrame {
    header: FrameHeader,
    /// Payload bytes read so far.
    read: u64,
    /// The payload's expected bytes, generated as it arrives.
    expect: FileContent,
}

/// Reads and checks frames from a byte stream cut anywhere.
#[derive(Debug, Default)]
pub struct FrameParser {
    header: [u8; HEADER_LEN],
    header_len: usize,
    current: Option<InFrame>,
    next_number: u32,
    last_capture: u64,
}

impl FrameParser {
    /// A parser expecting frame 0.
    pub fn new() -> FrameParser {
        FrameParser::default()
    }

    /// Frames completed so far.
    pub fn frames(&self) -> u32 {
        self.next_number
    }

    /// Takes the next bytes of the stream; calls `done` with the header of
    /// each frame whose last byte is among them. After an error the parser
    /// is unusable (the stream is broken).
    pub fn push(
        &mut self,
        mut bytes: &[u8],
        mut done: impl FnMut(&FrameHeader),
    ) -> Result<(), FrameError> {
        while !bytes.is_empty() || self.frame_complete() {
            if self.frame_complete() {
                if let Some(f) = self.current.take() {
                    done(&f.header);
                }
                continue;
            }
            match self.current.as_mut() {
                None => {
                    let want = HEADER_LEN - self.header_len;
                    let take = want.min(bytes.len());
                    let (head, rest) = bytes.split_at(take);
                    if let Some(dst) = self.header.get_mut(self.header_len..self.header_len + take)
                    {
                        dst.copy_from_slice(head);
                    }
                    self.header_len += take;
                    bytes = rest;
                    if self.header_len == HEADER_LEN {
                        self.header_len = 0;
                        self.begin()?;
                    }
                }
                Some(f) => {
                    let left = u64::from(f.header.size) - f.read;
                    let take = usize::try_from(left).map_or(bytes.len(), |l| l.min(bytes.len()));
                    let (got, rest) = bytes.split_at(take);
                    // Checked in place: the expected bytes were written out
                    // and compared byte by byte, a loop the compiler does
                    // not vectorise (8% of a live-video reproduction).
                    // `take` is within the frame, so `None` cannot come.
                    if let Err(at) = f.expect.verify(got) {
                        return Err(FrameError::Payload {
                            number: f.header.number,
                            offset: f.read + at.unwrap_or(0) as u64,
                        });
                    }
                    f.read += take as u64;
                    bytes = rest;
                }
            }
        }
        Ok(())
    }

    /// The stream ended: an error if it ended inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        if let Some(f) = &self.current {
            return Err(FrameError::Truncated(f.header.number));
        }
        if self.header_len > 0 {
            return Err(FrameError::Truncated(self.next_number));
        }
        Ok(())
    }

    fn frame_complete(&self) -> bool {
        self.current
            .as_ref()
            .is_some_and(|f| f.read == u64::from(f.header.size))
    }

    /// A whole header is in: check it and start its payload.
    fn begin(&mut self) -> Result<(), FrameError> {
        let h = FrameHeader::decode(&self.header)?;
        if h.number != self.next_number {
            return Err(FrameError::OutOfOrder {
                expected: self.next_number,
                got: h.number,
            });
        }
        if h.capture_us < self.last_capture {
            return Err(FrameError::TimeWentBack(h.number));
        }
        self.last_capture = h.capture_us;
        self.next_number = self.next_number.wrapping_add(1);
        self.current = Some(InFrame {
            header: h,
            read: 0,
            expect: FileContent::new(PAYLOAD_SEED, u64::from(h.number), u64::from(h.size)),
        });
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(number: u32, kind: FrameKind, capture_us: u64, size: u32) -> Vec<u8> {
        let h = FrameHeader {
            kind,
            number,
            capture_us,
            duration_us: 33_333,
            size,
        };
        let mut v = h.encode().to_vec();
        let mut payload = vec![0; size as usize];
        FileContent::new(PAYLOAD_SEED, u64::from(number), u64::from(size)).fill(&mut payload);
        v.extend_from_slice(&payload);
        v
    }

    fn stream() -> Vec<u8> {
        let mut s = frame(0, FrameKind::VideoI, 0, 5000);
        s.extend(frame(1, FrameKind::Audio, 0, 160));
        s.extend(frame(2, FrameKind::VideoP, 33_333, 0));
        s.extend(frame(3, FrameKind::VideoP, 66_666, 1000));
        s
    }

    #[test]
    fn headers_round_trip() {
        let h = FrameHeader {
            kind: FrameKind::VideoP,
            number: 0x0102_0304,
            capture_us: 0x1122_3344_5566_7788,
            duration_us: 20_000,
            size: 1234,
        };
        let b = h.encode();
        assert_eq!(&b[..4], b"AQFR");
        assert_eq!(FrameHeader::decode(&b), Ok(h));
        let mut bad = b;
        bad[4] = 9;
        assert_eq!(FrameHeader::decode(&bad), Err(FrameError::BadKind(9)));
        let mut bad = b;
        bad[6] = 1;
        assert_eq!(FrameHeader::decode(&bad), Err(FrameError::Reserved));
        let mut bad = b;
        bad[24..28].copy_from_slice(&u32::MAX.to_be_bytes());
        assert_eq!(
            FrameHeader::decode(&bad),
            Err(FrameError::TooLarge(u32::MAX))
        );
    }

    #[test]
    fn frames_are_found_however_the_stream_is_cut() {
        let s = stream();
        for cut in [1, 7, 28, 29, 1000, s.len()] {
            let mut p = FrameParser::new();
            let mut seen = Vec::new();
            for piece in s.chunks(cut) {
                p.push(piece, |h| seen.push((h.number, h.kind, h.size)))
                    .expect("valid stream");
            }
            p.finish().expect("ends on a frame boundary");
            assert_eq!(
                seen,
                vec![
                    (0, FrameKind::VideoI, 5000),
                    (1, FrameKind::Audio, 160),
                    (2, FrameKind::VideoP, 0),
                    (3, FrameKind::VideoP, 1000)
                ],
                "cut {cut}"
            );
        }
    }

    #[test]
    fn broken_streams_are_refused() {
        let s = stream();
        let run = |bytes: &[u8]| {
            let mut p = FrameParser::new();
            p.push(bytes, |_| {}).and_then(|()| p.finish())
        };
        assert_eq!(run(&s[..s.len() - 1]), Err(FrameError::Truncated(3)));
        assert_eq!(run(&s[..10]), Err(FrameError::Truncated(0)));
        let mut flipped = s.clone();
        flipped[28 + 100] ^= 1;
        assert_eq!(
            run(&flipped),
            Err(FrameError::Payload {
                number: 0,
                offset: 100
            })
        );
        let mut skipped = frame(0, FrameKind::VideoI, 0, 10);
        skipped.extend(frame(2, FrameKind::VideoP, 10, 10));
        assert_eq!(
            run(&skipped),
            Err(FrameError::OutOfOrder {
                expected: 1,
                got: 2
            })
        );
        let mut back = frame(0, FrameKind::VideoI, 50, 10);
        back.extend(frame(1, FrameKind::VideoP, 10, 10));
        assert_eq!(run(&back), Err(FrameError::TimeWentBack(1)));
        assert_eq!(
            run(b"GET / HTTP/1.1\r\nHost: example\r\n\r\n"),
            Err(FrameError::BadMagic)
        );
    }

    proptest::proptest! {
        #[test]
        fn hostile_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
                                     cut in 1usize..64) {
            let mut p = FrameParser::new();
            for piece in bytes.chunks(cut) {
                if p.push(piece, |_| {}).is_err() {
                    break;
                }
            }
            let _ = p.finish();
            // A valid header announcing a huge payload is refused before
            // anything is allocated for it.
            let mut huge = frame(0, FrameKind::VideoI, 0, 0);
            huge[24..28].copy_from_slice(&(MAX_FRAME_BYTES + 1).to_be_bytes());
            let refused = FrameParser::new().push(&huge, |_| {}).is_err();
            proptest::prop_assert!(refused);
        }
    }
}
