//! The server's reading side of a request stream (RFC 9114 §4.1): HEADERS,
//! then DATA (the body), then optional trailers, with unknown frames
//! skipped anywhere. The first DATA payload is held until the application
//! decides: it reads the body ([`RequestReader::stream_body`], then
//! [`RequestReader::read_body`]: the edge forwards it to an origin) or
//! lets it be discarded ([`RequestReader::skip_body`]).

use super::error::H3Error;
use super::frame::{self, StreamKind};
use super::message;
use super::qpack::{self, SectionError};
use super::reader::{ByteSource, FrameCursor, Step};
use crate::http::{MessageError, Request, MAX_FIELD_SECTION};

/// Where the request is in its frame sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the request HEADERS.
    Head,
    /// Reading the body; `content_length` as declared, `received` so far.
    Body {
        content_length: Option<u64>,
        received: u64,
    },
    /// Trailers came: only unknown frames and FIN may follow.
    Trailers {
        content_length: Option<u64>,
        received: u64,
    },
    /// Nothing more is read.
    Done,
}

/// What reading a request stream produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestRead {
    /// Nothing more now.
    Blocked,
    /// The request head, decoded and valid.
    Request(Request),
    /// The request head is malformed or too large: answer 4xx and stop
    /// reading (nothing more is read from this stream).
    Bad(MessageError),
    /// The request ended (FIN) after its head.
    End,
    /// The stream ended before the request HEADERS (H3_REQUEST_INCOMPLETE).
    Incomplete,
    /// The body did not match the content-length (RFC 9114 §4.1.2: a
    /// malformed request after the fact; reset it with H3_MESSAGE_ERROR).
    LengthMismatch,
    /// The client reset the stream with this code (or the transport
    /// forgot it).
    Reset(u64),
    /// A DATA payload is waiting: the application reads it with
    /// [`RequestReader::read_body`], or, once it skipped the body, the next
    /// [`RequestReader::read`] discards it.
    Body,
}

/// The reading side of one request stream.
#[derive(Clone, Debug)]
pub struct RequestReader {
    cursor: FrameCursor,
    phase: Phase,
    /// What happens to DATA payloads.
    body: BodyMode,
}

/// Whether the application reads the request body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BodyMode {
    /// Not decided yet: the first DATA payload is held until it is.
    Undecided,
    /// DATA payloads are discarded.
    Skip,
    /// DATA payloads go to the application ([`RequestReader::read_body`]).
    Stream,
}

impl Default for RequestReader {
    fn default() -> Self {
        RequestReader {
            cursor: FrameCursor::default(),
            phase: Phase::Head,
            body: BodyMode::Undecided,
        }
    }
}

/// What [`RequestReader::read_body`] read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RequestBodyRead {
    /// Body bytes copied into the caller's buffer.
    Data(usize),
    /// The request ended (FIN; trailers are read and dropped).
    End,
    /// Nothing more now.
    Blocked,
    /// The body did not match the content-length.
    LengthMismatch,
    /// The client reset the stream with this code.
    Reset(u64),
}

impl RequestReader {
    /// From now on, DATA payloads are handed to the application
    /// ([`RequestReader::read_body`]) instead of being skipped. Call before
    /// the body is read, i.e. as soon as the request head is reported.
    pub fn stream_body(&mut self) {
        if self.body == BodyMode::Undecided {
            self.body = BodyMode::Stream;
        }
    }

    /// The application does not want the body: it is discarded (a held
    /// DATA payload included) as [`RequestReader::read`] goes on.
    pub fn skip_body(&mut self) {
        if self.body == BodyMode::Undecided {
            self.body = BodyMode::Skip;
        }
    }

    /// Whether the body goes to the application.
    pub fn streams_body(&self) -> bool {
        self.body == BodyMode::Stream
    }

    /// Whether the fate of the body is still open.
    pub fn body_undecided(&self) -> bool {
        self.body == BodyMode::Undecided
    }

    /// Body bytes of the current DATA frame are held for the application:
    /// [`RequestReader::read`] must not be called until they are read or
    /// the body is skipped (it would discard them).
    pub fn holds_body(&self) -> bool {
        self.body != BodyMode::Skip && self.cursor.streamed_remaining() > 0
    }

    /// Reads body bytes into `buf` (only after [`RequestReader::stream_body`]).
    /// `Err` is a connection error.
    pub fn read_body(
        &mut self,
        src: &mut impl ByteSource,
        buf: &mut [u8],
    ) -> Result<RequestBodyRead, H3Error> {
        if self.body != BodyMode::Stream || self.phase == Phase::Head {
            return Ok(RequestBodyRead::Blocked);
        }
        loop {
            if self.cursor.streamed_remaining() > 0 {
                return match self.cursor.read_streamed(src, buf)? {
                    Ok(n) => Ok(RequestBodyRead::Data(n)),
                    Err(Step::Reset(code)) => {
                        self.phase = Phase::Done;
                        Ok(RequestBodyRead::Reset(code))
                    }
                    Err(Step::Gone) => {
                        self.phase = Phase::Done;
                        Ok(RequestBodyRead::Reset(0))
                    }
                    Err(_) => Ok(RequestBodyRead::Blocked),
                };
            }
            if self.phase == Phase::Done {
                return Ok(RequestBodyRead::End);
            }
            match self.read(src)? {
                RequestRead::Body => continue,
                RequestRead::End => return Ok(RequestBodyRead::End),
                RequestRead::LengthMismatch => return Ok(RequestBodyRead::LengthMismatch),
                RequestRead::Reset(code) => return Ok(RequestBodyRead::Reset(code)),
                RequestRead::Incomplete => return Ok(RequestBodyRead::Reset(0)),
                RequestRead::Blocked | RequestRead::Request(_) | RequestRead::Bad(_) => {
                    return Ok(RequestBodyRead::Blocked)
                }
            }
        }
    }

    /// Nothing more will be read (the request was refused or ended).
    pub fn is_done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Reads until something happens. `Err` is a connection error.
    pub fn read(&mut self, src: &mut impl ByteSource) -> Result<RequestRead, H3Error> {
        while self.phase != Phase::Done {
            match self.cursor.step(src)? {
                Step::Header(h) => {
                    frame::check_allowed(h.ty, StreamKind::Request)?;
                    if let Some(refusal) = self.on_header(h)? {
                        return Ok(refusal);
                    }
                }
                Step::Frame { ty, payload } => {
                    debug_assert_eq!(ty, frame::HEADERS, "only HEADERS is collected");
                    if let Some(read) = self.on_headers(&payload)? {
                        return Ok(read);
                    }
                }
                Step::Fin => {
                    let read = match self.phase {
                        Phase::Head => RequestRead::Incomplete,
                        Phase::Body {
                            content_length: Some(l),
                            received,
                        }
                        | Phase::Trailers {
                            content_length: Some(l),
                            received,
                        } if l != received => RequestRead::LengthMismatch,
                        _ => RequestRead::End,
                    };
                    self.phase = Phase::Done;
                    return Ok(read);
                }
                Step::Blocked => return Ok(RequestRead::Blocked),
                Step::Reset(code) => {
                    self.phase = Phase::Done;
                    return Ok(RequestRead::Reset(code));
                }
                Step::Gone => {
                    self.phase = Phase::Done;
                    return Ok(RequestRead::Reset(0));
                }
            }
        }
        Ok(RequestRead::Blocked)
    }

    /// A frame header on the request stream: decides its payload's fate.
    fn on_header(&mut self, h: frame::FrameHeader) -> Result<Option<RequestRead>, H3Error> {
        match (h.ty, self.phase) {
            (frame::PUSH_PROMISE, _) => Err(H3Error::unexpected("PUSH_PROMISE from a client")),
            (frame::HEADERS, Phase::Head) if h.len > MAX_FIELD_SECTION => {
                self.phase = Phase::Done;
                Ok(Some(RequestRead::Bad(MessageError::TooLarge(h.len))))
            }
            (frame::HEADERS, Phase::Head) => {
                self.cursor.collect(h);
                Ok(None)
            }
            (
                frame::HEADERS,
                Phase::Body {
                    content_length,
                    received,
                },
            ) => {
                // Trailers: decoded (a QPACK error is still an error) unless
                // too large, then ignored.
                if h.len > MAX_FIELD_SECTION {
                    self.cursor.skip(h);
                } else {
                    self.cursor.collect(h);
                }
                self.phase = Phase::Trailers {
                    content_length,
                    received,
                };
                Ok(None)
            }
            (frame::HEADERS, _) => Err(H3Error::unexpected("HEADERS after the trailers")),
            (frame::DATA, Phase::Head) => Err(H3Error::unexpected("DATA before HEADERS")),
            (
                frame::DATA,
                Phase::Body {
                    content_length,
                    received,
                },
            ) => {
                let received = received.saturating_add(h.len);
                self.phase = Phase::Body {
                    content_length,
                    received,
                };
                if content_length.is_some_and(|l| received > l) {
                    self.cursor.skip(h);
                    self.phase = Phase::Done;
                    return Ok(Some(RequestRead::LengthMismatch));
                }
                if self.body != BodyMode::Skip && h.len > 0 {
                    // Held (undecided) or for the application.
                    self.cursor.stream(h);
                    return Ok(Some(RequestRead::Body));
                }
                self.cursor.skip(h);
                Ok(None)
            }
            (frame::DATA, _) => Err(H3Error::unexpected("DATA after the trailers")),
            _ => {
                self.cursor.skip(h);
                Ok(None)
            }
        }
    }

    /// A whole HEADERS frame: the request head, or trailers (ignored).
    fn on_headers(&mut self, payload: &[u8]) -> Result<Option<RequestRead>, H3Error> {
        let fields = match qpack::decode_section(payload, MAX_FIELD_SECTION) {
            Ok(fields) => fields,
            Err(SectionError::Failed(reason)) => return Err(H3Error::qpack(reason)),
            Err(SectionError::TooLarge(size)) if self.phase == Phase::Head => {
                self.phase = Phase::Done;
                return Ok(Some(RequestRead::Bad(MessageError::TooLarge(size))));
            }
            Err(SectionError::TooLarge(_)) => return Ok(None),
        };
        if self.phase != Phase::Head {
            return Ok(None);
        }
        match message::parse_request(fields) {
            Ok(request) => {
                let content_length = message::content_length(&request.headers).ok().flatten();
                self.phase = Phase::Body {
                    content_length,
                    received: 0,
                };
                Ok(Some(RequestRead::Request(request)))
            }
            Err(e) => {
                self.phase = Phase::Done;
                Ok(Some(RequestRead::Bad(e)))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::error::{H3_FRAME_ERROR, H3_FRAME_UNEXPECTED, QPACK_DECOMPRESSION_FAILED};
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

    const GET: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "localhost"),
        (":path", "/x"),
    ];

    /// Every read result until the stream is done or blocked.
    fn read_all(bytes: &[u8], fin: bool) -> Result<Vec<RequestRead>, u64> {
        let mut reader = RequestReader::default();
        let mut src = SliceSource::new(bytes, fin);
        let mut out = Vec::new();
        loop {
            let r = reader.read(&mut src).map_err(|e| e.code)?;
            if r == RequestRead::Blocked {
                return Ok(out);
            }
            if matches!(r, RequestRead::Request(_)) {
                // An application that does not want the body.
                reader.skip_body();
            }
            out.push(r);
            if reader.is_done() {
                return Ok(out);
            }
        }
    }

    #[test]
    fn request_then_body_then_trailers() {
        let mut bytes = headers(&GET);
        write_frame(&mut bytes, 0x21, b"grease");
        write_frame(&mut bytes, DATA, b"body");
        bytes.extend_from_slice(&headers(&[("x-trailer", "1")]));
        let reads = read_all(&bytes, true).unwrap();
        assert!(matches!(&reads[0], RequestRead::Request(r) if r.path == "/x"));
        assert_eq!(reads[1], RequestRead::End);
    }

    #[test]
    fn frame_order_errors() {
        let mut data_first = Vec::new();
        write_frame(&mut data_first, DATA, b"x");
        assert_eq!(read_all(&data_first, false), Err(H3_FRAME_UNEXPECTED));
        let mut settings = Vec::new();
        write_frame(&mut settings, frame::SETTINGS, b"");
        assert_eq!(read_all(&settings, false), Err(H3_FRAME_UNEXPECTED));
        let mut twice = headers(&GET);
        twice.extend_from_slice(&headers(&[("x", "1")]));
        twice.extend_from_slice(&headers(&[("x", "1")]));
        assert_eq!(read_all(&twice, false), Err(H3_FRAME_UNEXPECTED));
        let mut cut = headers(&GET);
        cut.pop();
        assert_eq!(read_all(&cut, true), Err(H3_FRAME_ERROR));
        let mut dynamic = Vec::new();
        write_frame(&mut dynamic, HEADERS, &[0x00, 0x00, 0x80]);
        assert_eq!(read_all(&dynamic, false), Err(QPACK_DECOMPRESSION_FAILED));
    }

    #[test]
    fn refusals_are_stream_level() {
        assert_eq!(read_all(&[], true), Ok(vec![RequestRead::Incomplete]));
        let bad = read_all(&headers(&GET[1..]), false).unwrap();
        assert!(matches!(
            bad[0],
            RequestRead::Bad(MessageError::Malformed(_))
        ));
        let mut big = Vec::new();
        frame::write_header(&mut big, HEADERS, MAX_FIELD_SECTION + 1);
        assert_eq!(
            read_all(&big, false),
            Ok(vec![RequestRead::Bad(MessageError::TooLarge(
                MAX_FIELD_SECTION + 1
            ))])
        );
        let mut with_length = GET.to_vec();
        with_length.push(("content-length", "3"));
        let mut short = headers(&with_length);
        write_frame(&mut short, DATA, b"ab");
        let reads = read_all(&short, true).unwrap();
        assert_eq!(reads[1], RequestRead::LengthMismatch);
        let mut long = headers(&with_length);
        write_frame(&mut long, DATA, b"abcd");
        let reads = read_all(&long, false).unwrap();
        assert_eq!(reads[1], RequestRead::LengthMismatch);
    }

    #[test]
    fn a_streamed_body_is_read_by_the_application() {
        let mut fields = GET.to_vec();
        fields.push(("content-length", "9"));
        let mut bytes = headers(&fields);
        write_frame(&mut bytes, DATA, b"abcd");
        write_frame(&mut bytes, 0x21, b"grease");
        write_frame(&mut bytes, DATA, b"efghi");
        bytes.extend_from_slice(&headers(&[("x-trailer", "1")]));
        let mut reader = RequestReader::default();
        let mut src = SliceSource::new(&bytes, true);
        assert!(matches!(reader.read(&mut src), Ok(RequestRead::Request(_))));
        // Undecided: the first DATA payload is held, not discarded.
        assert_eq!(reader.read(&mut src), Ok(RequestRead::Body));
        assert!(reader.holds_body());
        reader.stream_body();
        let mut body = Vec::new();
        let mut buf = [0u8; 3];
        loop {
            match reader.read_body(&mut src, &mut buf).unwrap() {
                RequestBodyRead::Data(n) => body.extend_from_slice(&buf[..n]),
                RequestBodyRead::End => break,
                other => panic!("{other:?}"),
            }
        }
        assert_eq!(body, b"abcdefghi");
        assert!(reader.is_done());
    }

    #[test]
    fn a_streamed_body_shorter_than_its_length_is_refused() {
        let mut fields = GET.to_vec();
        fields.push(("content-length", "9"));
        let mut bytes = headers(&fields);
        write_frame(&mut bytes, DATA, b"abcd");
        let mut reader = RequestReader::default();
        let mut src = SliceSource::new(&bytes, true);
        assert!(matches!(reader.read(&mut src), Ok(RequestRead::Request(_))));
        reader.stream_body();
        let mut buf = [0u8; 16];
        assert_eq!(
            reader.read_body(&mut src, &mut buf),
            Ok(RequestBodyRead::Data(4))
        );
        assert_eq!(
            reader.read_body(&mut src, &mut buf),
            Ok(RequestBodyRead::LengthMismatch)
        );
    }
}
