//! HTTP/3 (RFC 9114) with QPACK (RFC 9204) over the artq transport:
//! [`H3Server`] and [`H3Client`], the [`crate::http`] sessions a
//! connection uses when it negotiated the `h3` ALPN.
//!
//! # Structure, bottom up
//!
//! - [`frame`]: the frame header (`type`, `length` varints, at most 16
//!   bytes), the frame types, which stream may carry which frame, SETTINGS.
//! - [`qpack`]: prefixed integers, string literals with the Huffman code
//!   ([`qpack::huffman`], our own: see there why), the static table, the
//!   field-section encoder and decoder, and checkers for the peer's QPACK
//!   encoder and decoder streams.
//! - [`reader`] and [`writer`]: a stream's frames in and out. The reader
//!   takes from the transport only the bytes the current step needs, so a
//!   DATA payload goes from the transport straight into the application's
//!   buffer; the writer keeps each stream's committed-but-unwritten frame
//!   bytes and the payload the current DATA frame still owes, so partial
//!   transport writes never tear a frame.
//! - [`control`]: our control stream and every unidirectional stream the
//!   peer opens; [`request_reader`] and [`response_reader`]: the frame
//!   sequence of a request stream on each side; [`message`]: the HTTP rules
//!   (pseudo-headers, forbidden fields) between field lines and
//!   [`crate::http::Request`] / [`crate::http::ResponseHead`].
//! - [`H3Server`] and [`H3Client`]: the sessions. On every `poll` they open
//!   or flush our control stream, accept and read the peer's streams, write
//!   what responses or requests still owe, and report events.
//!
//! Every stream state machine reads through [`reader::ByteSource`], so the
//! fuzz body ([`fuzzing::frames_and_qpack`]) runs the same code over byte
//! slices.
//!
//! # Errors
//!
//! A connection error (RFC 9114 §8, RFC 9204 §6) closes the connection with
//! `Connection::close(now, code, reason)`; the session then reports
//! nothing more and refuses to send. Stream errors reset and stop the
//! stream: a malformed or oversized request is reported as
//! [`crate::http::ServerEvent::BadRequest`] (after STOP_SENDING with
//! H3_MESSAGE_ERROR or H3_EXCESSIVE_LOAD) so the application can answer 400
//! or 431; if it aborts instead, the stream is reset with H3_MESSAGE_ERROR.
//! A malformed or oversized response is [`crate::http::ClientEvent::Failed`].
//! The mapping, in short:
//!
//! | what | error |
//! |---|---|
//! | frame truncated by FIN, bad GOAWAY/MAX_PUSH_ID/CANCEL_PUSH payload, truncated setting | H3_FRAME_ERROR |
//! | frame on the wrong stream or out of order, HTTP/2 frame type, second SETTINGS | H3_FRAME_UNEXPECTED |
//! | first control frame not SETTINGS | H3_MISSING_SETTINGS |
//! | duplicate or HTTP/2 setting identifier | H3_SETTINGS_ERROR |
//! | second control/encoder/decoder stream, push stream from a client, server-initiated bidirectional stream | H3_STREAM_CREATION_ERROR |
//! | control, encoder or decoder stream closed | H3_CLOSED_CRITICAL_STREAM |
//! | growing GOAWAY ID, GOAWAY on a non-request ID, CANCEL_PUSH, PUSH_PROMISE or push stream to a client without MAX_PUSH_ID | H3_ID_ERROR |
//! | SETTINGS payload over [`MAX_CONTROL_FRAME`] | H3_EXCESSIVE_LOAD |
//! | field section not decodable, Required Insert Count not 0, dynamic reference, static index >= 99, bad Huffman | QPACK_DECOMPRESSION_FAILED |
//! | encoder-stream insert, duplicate or capacity > 0 | QPACK_ENCODER_STREAM_ERROR |
//! | decoder-stream Section Acknowledgment or Insert Count Increment | QPACK_DECODER_STREAM_ERROR |
//!
//! Unknown and reserved frame types are skipped wherever they appear;
//! unknown and reserved unidirectional stream types are stopped with
//! H3_STREAM_CREATION_ERROR and discarded; unknown settings are ignored.
//!
//! # Choices
//!
//! - QPACK dynamic table capacity 0 on both sides
//!   (SETTINGS_QPACK_MAX_TABLE_CAPACITY 0 and SETTINGS_QPACK_BLOCKED_STREAMS
//!   0 are sent explicitly). Our encoder references the static table and
//!   Huffman-codes literals when that is shorter. With no dynamic table,
//!   RFC 9204 §4.2 lets us not open QPACK encoder and decoder streams, and
//!   we do not; the peer's are accepted and checked.
//! - No server push: we never send MAX_PUSH_ID (client) or PUSH_PROMISE
//!   (server).
//! - Our SETTINGS carries one reserved identifier
//!   ([`control::GREASE_SETTING`], value 0), as RFC 9114 §7.2.4.1
//!   recommends, so a peer that mishandles unknown settings fails at once.
//! - Limits, so no peer can grow a buffer without bound: a frame header is
//!   at most 16 bytes; a HEADERS payload is collected only up to
//!   [`crate::http::MAX_FIELD_SECTION`] bytes (larger is refused as too
//!   large without being read into memory: 431 on the server, `Failed` on
//!   the client; trailers that large are skipped), and the decoded section
//!   is bounded by the same number (RFC 9114 §4.2.2 counting, also what we
//!   advertise as SETTINGS_MAX_FIELD_SECTION_SIZE); a SETTINGS payload is
//!   at most [`MAX_CONTROL_FRAME`] (H3_EXCESSIVE_LOAD past it); GOAWAY,
//!   MAX_PUSH_ID and CANCEL_PUSH at most 8 bytes; an unfinished QPACK
//!   stream instruction at most 10 bytes. DATA payload is never buffered.
//!   A request stream is read for at most
//!   [`server::MAX_REQUEST_STREAM_BYTES`] (431 if the head is not complete
//!   by then, else reading stops with H3_NO_ERROR), and once the response
//!   is complete the server stops reading the rest of the request
//!   (STOP_SENDING with H3_NO_ERROR, RFC 9114 §4.1.1) unless the client
//!   already ended it.
//! - The client sends `:scheme https` and needs [`crate::http::Request`]'s
//!   authority (`send_request` answers `NotReady` without one); CONNECT
//!   requests are reported as malformed (nothing here proxies).
//! - GOAWAY: `shutdown` accepts the requests that already arrived, then
//!   sends the first client bidirectional stream ID not accepted;
//!   streams opened later are reset with H3_REQUEST_REJECTED. Closing the
//!   connection once the last response is done is the application's call.

pub mod client;
pub mod control;
pub mod error;
pub mod frame;
#[doc(hidden)]
pub mod fuzzing;
pub mod message;
pub mod qpack;
pub mod reader;
pub mod request_reader;
pub mod response_reader;
pub mod server;
pub mod writer;

#[cfg(test)]
pub(crate) mod tests;

pub use client::H3Client;
pub use error::H3Error;
pub use server::H3Server;

/// Largest SETTINGS payload we read (H3_EXCESSIVE_LOAD past it): the field
/// section limit, far more than the few settings any peer sends.
pub const MAX_CONTROL_FRAME: u64 = crate::http::MAX_FIELD_SECTION;
