//! The client's reading side of a request stream (RFC 9114 §4.1):
//! interim (1xx) HEADERS, the final response HEADERS, DATA (handed to the
//! application without copying it into the session), optional trailers
//! (decoded, then ignored), unknown frames skipped anywhere.

use super::error::{
    H3Error, H3_EXCESSIVE_LOAD, H3_ID_ERROR, H3_MESSAGE_ERROR, H3_REQUEST_INCOMPLETE,
};
use super::frame::{self, StreamKind};
use super::message;
use super::qpack::{self, SectionError};
use super::reader::{ByteSource, FrameCursor, Step};
use crate::http::{ResponseHead, MAX_FIELD_SECTION};

/// Where the response is in its frame sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the final response HEADERS.
    Head,
    /// Reading the body.
    Body,
    /// Trailers came: only unknown frames and FIN may follow.
    Trailers,
}

/// What waiting for the response head produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HeadRead {
    /// Nothing more now.
    Blocked,
    /// The final response head.
    Response(ResponseHead),
    /// The response cannot be used: a stream error with this code
    /// (H3_MESSAGE_ERROR malformed, H3_EXCESSIVE_LOAD too large,
    /// H3_REQUEST_INCOMPLETE ended early) and a reason; the request failed.
    Failed(u64, String),
    /// The server reset the stream with this code.
    Reset(u64),
}

/// What reading the body produced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyRead {
    /// Body bytes copied into the caller's buffer.
    Data(usize),
    /// The body ended (FIN).
    End,
    /// Nothing more now.
    Blocked,
    /// The server reset the stream with this code.
    Reset(u64),
}

/// The reading side of one request stream, on the client.
#[derive(Clone, Debug)]
pub struct ResponseReader {
    cursor: FrameCursor,
    phase: Phase,
}

impl Default for ResponseReader {
    fn default() -> Self {
        ResponseReader {
            cursor: FrameCursor::default(),
            phase: Phase::Head,
        }
    }
}

/// A frame header that may not appear on a request stream at a client, or
/// `Ok` (RFC 9114 §7.2.5: we never sent MAX_PUSH_ID, so a PUSH_PROMISE
/// carries a push ID above our limit).
fn check_frame(ty: u64) -> Result<(), H3Error> {
    frame::check_allowed(ty, StreamKind::Request)?;
    if ty == frame::PUSH_PROMISE {
        return Err(H3Error::new(
            H3_ID_ERROR,
            "PUSH_PROMISE without MAX_PUSH_ID",
        ));
    }
    Ok(())
}

impl ResponseReader {
    /// The final head has been reported; the body is next.
    pub fn has_head(&self) -> bool {
        self.phase != Phase::Head
    }

    /// Reads until the final response head. `Err` is a connection error.
    pub fn read_head(&mut self, src: &mut impl ByteSource) -> Result<HeadRead, H3Error> {
        while self.phase == Phase::Head {
            match self.cursor.step(src)? {
                Step::Header(h) => {
                    check_frame(h.ty)?;
                    match h.ty {
                        frame::DATA => {
                            return Err(H3Error::unexpected("DATA before the response HEADERS"))
                        }
                        frame::HEADERS if h.len > MAX_FIELD_SECTION => {
                            return Ok(HeadRead::Failed(
                                H3_EXCESSIVE_LOAD,
                                format!("response HEADERS of {} bytes exceeds our limit", h.len),
                            ))
                        }
                        frame::HEADERS => self.cursor.collect(h),
                        _ => self.cursor.skip(h),
                    }
                }
                Step::Frame { payload, .. } => {
                    let fields = match qpack::decode_section(&payload, MAX_FIELD_SECTION) {
                        Ok(fields) => fields,
                        Err(SectionError::Failed(reason)) => return Err(H3Error::qpack(reason)),
                        Err(SectionError::TooLarge(size)) => {
                            return Ok(HeadRead::Failed(
                                H3_EXCESSIVE_LOAD,
                                format!("response field section of {size} bytes exceeds our limit"),
                            ))
                        }
                    };
                    match message::parse_response(fields) {
                        Ok(head) if head.status < 200 => {} // interim: wait for the final one
                        Ok(head) => {
                            self.phase = Phase::Body;
                            return Ok(HeadRead::Response(head));
                        }
                        Err(e) => return Ok(HeadRead::Failed(H3_MESSAGE_ERROR, e.to_string())),
                    }
                }
                Step::Fin => {
                    return Ok(HeadRead::Failed(
                        H3_REQUEST_INCOMPLETE,
                        "stream ended before a response".into(),
                    ))
                }
                Step::Blocked => return Ok(HeadRead::Blocked),
                Step::Reset(code) => return Ok(HeadRead::Reset(code)),
                Step::Gone => {
                    return Ok(HeadRead::Failed(
                        H3_REQUEST_INCOMPLETE,
                        "stream closed".into(),
                    ))
                }
            }
        }
        Ok(HeadRead::Blocked)
    }

    /// Reads body bytes into `buf`, DATA framing removed. `Err` is a
    /// connection error.
    pub fn read_body(
        &mut self,
        src: &mut impl ByteSource,
        buf: &mut [u8],
    ) -> Result<BodyRead, H3Error> {
        if self.phase == Phase::Head {
            return Ok(BodyRead::Blocked);
        }
        loop {
            if self.cursor.streamed_remaining() > 0 {
                return match self.cursor.read_streamed(src, buf)? {
                    Ok(n) => Ok(BodyRead::Data(n)),
                    Err(step) => Ok(interrupted(step)),
                };
            }
            match self.cursor.step(src)? {
                Step::Header(h) => {
                    check_frame(h.ty)?;
                    match (h.ty, self.phase) {
                        (frame::DATA | frame::HEADERS, Phase::Trailers) => {
                            return Err(H3Error::unexpected("frame after the trailers"))
                        }
                        (frame::DATA, _) => self.cursor.stream(h),
                        (frame::HEADERS, _) => {
                            self.phase = Phase::Trailers;
                            if h.len > MAX_FIELD_SECTION {
                                self.cursor.skip(h);
                            } else {
                                self.cursor.collect(h);
                            }
                        }
                        _ => self.cursor.skip(h),
                    }
                }
                Step::Frame { payload, .. } => {
                    // Trailers: a QPACK error still closes the connection;
                    // the fields themselves are not used.
                    if let Err(SectionError::Failed(reason)) =
                        qpack::decode_section(&payload, MAX_FIELD_SECTION)
                    {
                        return Err(H3Error::qpack(reason));
                    }
                }
                Step::Fin => return Ok(BodyRead::End),
                other => return Ok(interrupted(other)),
            }
        }
    }
}

/// A step that interrupts a body read.
fn interrupted(step: Step) -> BodyRead {
    match step {
        Step::Reset(code) => BodyRead::Reset(code),
        Step::Gone => BodyRead::Reset(0),
        _ => BodyRead::Blocked,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::error::{H3_FRAME_ERROR, H3_FRAME_UNEXPECTED};
    use crate::h3::frame::{write_frame, DATA, HEADERS};
    use crate::h3::reader::SliceSource;

    fn headers(fields: &[(&str, &str)]) -> Vec<u8> {
        let mut section = Vec::new();
        qpack::encode_section(
            fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
            &mut section,
        );
        let mut out = Vec::new();
        write_frame(&mut out, HEADERS, &section);
        out
    }

    /// The head and the whole body of `bytes` (ending with FIN).
    fn response(bytes: &[u8]) -> Result<(HeadRead, Vec<u8>), u64> {
        let mut reader = ResponseReader::default();
        let mut src = SliceSource::new(bytes, true);
        let head = reader.read_head(&mut src).map_err(|e| e.code)?;
        let mut body = Vec::new();
        if !reader.has_head() {
            return Ok((head, body));
        }
        let mut buf = [0u8; 7];
        loop {
            match reader.read_body(&mut src, &mut buf).map_err(|e| e.code)? {
                BodyRead::Data(n) => body.extend_from_slice(&buf[..n]),
                BodyRead::End => return Ok((head, body)),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn interim_then_final_then_body_and_trailers() {
        let mut bytes = headers(&[(":status", "103"), ("link", "</a>")]);
        bytes.extend_from_slice(&headers(&[(":status", "200"), ("content-length", "11")]));
        write_frame(&mut bytes, DATA, b"hello ");
        write_frame(&mut bytes, 0x40, b"reserved");
        write_frame(&mut bytes, DATA, b"");
        write_frame(&mut bytes, DATA, b"world");
        bytes.extend_from_slice(&headers(&[("x-checksum", "1")]));
        write_frame(&mut bytes, 0x21, b"");
        let (head, body) = response(&bytes).unwrap();
        assert!(matches!(head, HeadRead::Response(h) if h.status == 200));
        assert_eq!(body, b"hello world");
    }

    #[test]
    fn bad_responses() {
        let (head, _) = response(&headers(&[(":status", "abc")])).unwrap();
        assert!(matches!(head, HeadRead::Failed(..)));
        let (head, _) = response(&[]).unwrap();
        assert!(matches!(head, HeadRead::Failed(..)));
        let mut data_first = Vec::new();
        write_frame(&mut data_first, DATA, b"x");
        assert_eq!(response(&data_first), Err(H3_FRAME_UNEXPECTED));
        let mut push = Vec::new();
        write_frame(&mut push, frame::PUSH_PROMISE, &[0]);
        assert_eq!(response(&push), Err(H3_ID_ERROR));
        let mut cut = headers(&[(":status", "200")]);
        frame::write_header(&mut cut, DATA, 10);
        cut.extend_from_slice(b"abc");
        assert_eq!(response(&cut), Err(H3_FRAME_ERROR));
        let mut after_trailers = headers(&[(":status", "200")]);
        after_trailers.extend_from_slice(&headers(&[("x", "1")]));
        write_frame(&mut after_trailers, DATA, b"late");
        assert_eq!(response(&after_trailers), Err(H3_FRAME_UNEXPECTED));
    }
}
