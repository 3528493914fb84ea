//! HTTP/3 and QPACK application error codes (RFC 9114 §8.1, RFC 9204 §6),
//! and [`H3Error`], the connection error a session closes the connection
//! with.
//!
//! The codes are plain `u64`s because that is what the transport carries
//! (CONNECTION_CLOSE of type 0x1d, RESET_STREAM, STOP_SENDING) and what a
//! test reads back from `ConnectionError::PeerClosed { code, .. }`.

/// No error: graceful closure, or a stream no longer needed.
pub const H3_NO_ERROR: u64 = 0x100;
/// A protocol error with no more specific code.
pub const H3_GENERAL_PROTOCOL_ERROR: u64 = 0x101;
/// An internal error in the HTTP stack (the application gave up).
pub const H3_INTERNAL_ERROR: u64 = 0x102;
/// A stream was created that the peer may not create (a second control
/// stream, a push stream from a client, an unknown stream type refused).
pub const H3_STREAM_CREATION_ERROR: u64 = 0x103;
/// A stream the connection needs (control, QPACK encoder/decoder) closed.
pub const H3_CLOSED_CRITICAL_STREAM: u64 = 0x104;
/// A frame not allowed in the current state or on this stream.
pub const H3_FRAME_UNEXPECTED: u64 = 0x105;
/// A frame violated layout or size rules.
pub const H3_FRAME_ERROR: u64 = 0x106;
/// The peer generates excessive load (here: a control frame over our limit).
pub const H3_EXCESSIVE_LOAD: u64 = 0x107;
/// A stream ID or push ID was used incorrectly.
pub const H3_ID_ERROR: u64 = 0x108;
/// A SETTINGS frame contained invalid values.
pub const H3_SETTINGS_ERROR: u64 = 0x109;
/// The control stream did not start with SETTINGS.
pub const H3_MISSING_SETTINGS: u64 = 0x10a;
/// A request was not processed (refused after GOAWAY).
pub const H3_REQUEST_REJECTED: u64 = 0x10b;
/// A request or its response is no longer needed.
pub const H3_REQUEST_CANCELLED: u64 = 0x10c;
/// A stream ended before the request was complete.
pub const H3_REQUEST_INCOMPLETE: u64 = 0x10d;
/// A malformed request or response (RFC 9114 §4.1.2).
pub const H3_MESSAGE_ERROR: u64 = 0x10e;
/// A CONNECT request's TCP connection failed.
pub const H3_CONNECT_ERROR: u64 = 0x10f;
/// The request should be retried over HTTP/1.1.
pub const H3_VERSION_FALLBACK: u64 = 0x110;

/// The decoder could not interpret an encoded field section (RFC 9204 §6).
pub const QPACK_DECOMPRESSION_FAILED: u64 = 0x200;
/// The decoder could not interpret an encoder-stream instruction.
pub const QPACK_ENCODER_STREAM_ERROR: u64 = 0x201;
/// The encoder could not interpret a decoder-stream instruction.
pub const QPACK_DECODER_STREAM_ERROR: u64 = 0x202;

/// A connection error: the session closes the connection with `code` and
/// `reason` (`Connection::close`), and the peer sees both in its
/// CONNECTION_CLOSE.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("HTTP/3 error {code:#x}: {reason}")]
pub struct H3Error {
    /// One of the codes of this module.
    pub code: u64,
    /// A short reason phrase, sent to the peer.
    pub reason: &'static str,
}

impl H3Error {
    /// An error with `code` and `reason`.
    pub const fn new(code: u64, reason: &'static str) -> H3Error {
        H3Error { code, reason }
    }

    /// H3_FRAME_ERROR: a frame's layout or length is wrong.
    pub const fn frame(reason: &'static str) -> H3Error {
        H3Error::new(H3_FRAME_ERROR, reason)
    }

    /// H3_FRAME_UNEXPECTED: a frame where it may not be.
    pub const fn unexpected(reason: &'static str) -> H3Error {
        H3Error::new(H3_FRAME_UNEXPECTED, reason)
    }

    /// QPACK_DECOMPRESSION_FAILED: a field section we cannot decode.
    pub const fn qpack(reason: &'static str) -> H3Error {
        H3Error::new(QPACK_DECOMPRESSION_FAILED, reason)
    }
}

/// Whether `value` is one of the reserved "greasing" code points
/// `0x1f * N + 0x21` (RFC 9114 §6.2.3, §7.2.8, §7.2.4.1, §8.1), which
/// stream types, frame types, settings and error codes all reserve.
pub fn is_reserved_code_point(value: u64) -> bool {
    value >= 0x21 && (value - 0x21) % 0x1f == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserved_code_points() {
        assert!(is_reserved_code_point(0x21));
        assert!(is_reserved_code_point(0x40));
        assert!(is_reserved_code_point(0x3fff_ffff_ffff_fffe));
        assert!(!is_reserved_code_point(0x20));
        assert!(!is_reserved_code_point(0x22));
        assert!(!is_reserved_code_point(0));
        assert!(!is_reserved_code_point(u64::MAX));
    }

    #[test]
    fn display_names_the_code() {
        let e = H3Error::frame("truncated");
        assert_eq!(e.to_string(), "HTTP/3 error 0x106: truncated");
        assert_eq!(H3Error::qpack("x").code, QPACK_DECOMPRESSION_FAILED);
    }
}
