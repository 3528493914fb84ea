//! Requests and responses as the applications see them, whatever the
//! protocol, and the two session interfaces every protocol implements.
//!
//! An application (a file server, a downloader, a video player) speaks in
//! [`Request`]s and [`ResponseHead`]s plus body bytes; a session
//! ([`ServerSession`], [`ClientSession`]) turns them into one protocol's
//! bytes on a [`transport::Connection`]'s streams. hq-interop
//! ([`crate::hq`]) and HTTP/3 ([`crate::h3`]) are the two sessions; which
//! one a connection uses is decided by its negotiated ALPN
//! ([`crate::protocol::Protocol`]).
//!
//! Sessions are sans-IO like the transport: they never read a clock; they
//! act when the application calls them, on the connection it passes in.
//! The methods that read peer input ([`ServerSession::poll`],
//! [`ClientSession::poll`], [`ClientSession::read_body`]) take the driver's
//! `now`, because a protocol error found there closes the connection and
//! [`Connection::close`] needs the time.

use transport::streams::{ReadError, WriteError};
use transport::Connection;
use wire::time::Instant;
use wire::StreamId;

/// Largest field section (all header names and values, each plus 32 bytes as
/// RFC 9114 §4.2.2 counts it) a session accepts from a peer; larger ones are
/// refused. Also what HTTP/3 advertises as SETTINGS_MAX_FIELD_SECTION_SIZE.
pub const MAX_FIELD_SECTION: u64 = 16 * 1024;

/// An HTTP request method.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Method {
    /// `GET`.
    Get,
    /// `HEAD`: the response head without a body.
    Head,
    /// Any other token (servers answer 405).
    Other(String),
}

impl Method {
    /// The method token.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Other(m) => m,
        }
    }

    /// A safe method (RFC 9110 §9.2.1: GET, HEAD, OPTIONS, TRACE): one a
    /// server may answer from replayable 0-RTT data.
    pub fn is_safe(&self) -> bool {
        matches!(self, Method::Get | Method::Head) || matches!(self.as_str(), "OPTIONS" | "TRACE")
    }

    /// The method a token names.
    pub fn from_token(token: &str) -> Method {
        match token {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            other => Method::Other(other.to_string()),
        }
    }
}

/// One header field: a lowercase name and a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name, lowercase (HTTP/3 forbids uppercase names).
    pub name: String,
    /// Field value.
    pub value: String,
}

impl Field {
    /// A field from a name (lowercased here) and a value.
    pub fn new(name: impl Into<String>, value: impl Into<String>) -> Field {
        Field {
            name: name.into().to_ascii_lowercase(),
            value: value.into(),
        }
    }
}

/// A request: what a client asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The method.
    pub method: Method,
    /// The path with its query (`/a/b?x=1`), always starting with `/`.
    pub path: String,
    /// The `:authority` (host and port), when the protocol carries one.
    pub authority: Option<String>,
    /// Regular header fields (no pseudo-headers).
    pub headers: Vec<Field>,
}

impl Request {
    /// A `GET` of `path` with no authority and no headers.
    pub fn get(path: impl Into<String>) -> Request {
        Request {
            method: Method::Get,
            path: path.into(),
            authority: None,
            headers: Vec::new(),
        }
    }
}

/// The head of a response: status and header fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    /// Status code (100..=599).
    pub status: u16,
    /// Header fields (no pseudo-headers).
    pub headers: Vec<Field>,
}

impl ResponseHead {
    /// A head with `status` and no fields.
    pub fn new(status: u16) -> ResponseHead {
        ResponseHead {
            status,
            headers: Vec::new(),
        }
    }

    /// Adds a field.
    pub fn with(mut self, name: &str, value: impl Into<String>) -> ResponseHead {
        self.headers.push(Field::new(name, value));
        self
    }

    /// The value of the first field named `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|f| f.name == name)
            .map(|f| f.value.as_str())
    }

    /// The `content-length`, if present and a number.
    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length")?.trim().parse().ok()
    }
}

/// Why a session could not accept a request or a response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// The message is malformed (RFC 9114 §4.1.2; hq: not `GET <path>`).
    /// A server answers 400 where the protocol can carry a status.
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The field section is larger than [`MAX_FIELD_SECTION`].
    #[error("field section too large ({0} bytes)")]
    TooLarge(u64),
}

/// What a server session reports to its application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ServerEvent {
    /// A complete request head arrived on `stream`; answer it with
    /// [`ServerSession::send_response`], then the body.
    Request {
        /// The request stream.
        stream: StreamId,
        /// The request.
        request: Request,
    },
    /// A request on `stream` could not be parsed. The application should
    /// answer 400 where it can ([`ServerSession::send_response`] on the same
    /// stream; a session that cannot carry a status resets the stream).
    BadRequest {
        /// The request stream.
        stream: StreamId,
        /// What was wrong.
        error: MessageError,
    },
    /// The peer abandoned the request on `stream` (reset or stopped it):
    /// forget it.
    Cancelled {
        /// The request stream.
        stream: StreamId,
    },
}

/// What a client session reports to its application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientEvent {
    /// The response head for the request on `stream` arrived; its body can
    /// be read with [`ClientSession::read_body`].
    Response {
        /// The request stream.
        stream: StreamId,
        /// The response head.
        head: ResponseHead,
    },
    /// The request on `stream` failed (stream reset, malformed response).
    Failed {
        /// The request stream.
        stream: StreamId,
        /// What happened.
        reason: String,
    },
}

/// Why a session refused to send.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The transport refused the write (stream unknown, stopped, closed;
    /// `Blocked` when there is no room now: try again after `Writable`).
    #[error("stream write failed: {0}")]
    Stream(#[from] WriteError),
    /// No request stream can be opened now (the peer's MAX_STREAMS); a
    /// `StreamEvent::Available` follows when it can.
    #[error("no stream available")]
    NoStream,
    /// The session is not ready (handshake not done, or the peer sent
    /// GOAWAY, or the connection is closing).
    #[error("session not ready: {0}")]
    NotReady(&'static str),
}

/// Why [`ClientSession::read_body`] returned no bytes.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BodyError {
    /// Nothing to read now; a `Readable` event follows when there is.
    #[error("no data available")]
    Blocked,
    /// The server reset the stream with this code.
    #[error("reset by the server with code {0:#x}")]
    Reset(u64),
    /// No such request stream (never opened, or already read to the end).
    #[error("unknown stream")]
    UnknownStream,
    /// The response violated the protocol; the connection is being closed.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl From<ReadError> for BodyError {
    fn from(e: ReadError) -> Self {
        match e {
            ReadError::Blocked => BodyError::Blocked,
            ReadError::Reset(code) => BodyError::Reset(code),
            ReadError::UnknownStream => BodyError::UnknownStream,
        }
    }
}

/// The server side of one connection's application protocol.
///
/// Calling protocol, per connection: [`ServerSession::on_connected`] once
/// the handshake completes, then on every turn [`ServerSession::poll`] until
/// it returns `None`, answering each request with
/// [`ServerSession::send_response`], body writes and
/// [`ServerSession::finish`]. A protocol error the session detects closes
/// the connection (with the protocol's error code) by itself.
pub trait ServerSession {
    /// The handshake completed: open whatever streams the protocol needs
    /// (HTTP/3: the control stream and SETTINGS).
    fn on_connected(&mut self, conn: &mut Connection);

    /// Reads what arrived and reports the next request, bad request or
    /// cancellation; `None` when there is nothing more now. `now` is the
    /// driver's time, used if a protocol error closes the connection.
    fn poll(&mut self, now: Instant, conn: &mut Connection) -> Option<ServerEvent>;

    /// Sends the response head on `stream` (hq-interop: nothing for a 2xx;
    /// any other status resets the stream, as hq has no status line).
    fn send_response(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        head: &ResponseHead,
    ) -> Result<(), SendError>;

    /// Writes body bytes on `stream` after its head; returns how many of
    /// `data` were taken (`Err(Stream(Blocked))` if none fit now).
    fn send_body(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, SendError>;

    /// Ends the response on `stream` after what was written.
    fn finish(&mut self, conn: &mut Connection, stream: StreamId) -> Result<(), SendError>;

    /// Abandons the response on `stream` (RESET_STREAM with the protocol's
    /// error code for an internal error).
    fn abort(&mut self, conn: &mut Connection, stream: StreamId);

    /// Begins a graceful shutdown: refuse new requests (HTTP/3: GOAWAY)
    /// while the ones in flight complete.
    fn shutdown(&mut self, conn: &mut Connection);

    /// The application will read the body of the request on `stream`
    /// ([`ServerSession::read_request_body`]) instead of the session
    /// discarding it. Call when the request is reported, before the next
    /// [`ServerSession::poll`]. Protocols without request bodies
    /// (hq-interop) ignore it.
    fn stream_request_body(&mut self, stream: StreamId) {
        let _ = stream;
    }

    /// Reads request body bytes of `stream` into `buf` (after
    /// [`ServerSession::stream_request_body`]): `Ok(Some(n))`, `Ok(None)` at
    /// the end of the request, `Err(Blocked)` when nothing is available
    /// now; a reset or a malformed body is an error after which the
    /// exchange is over (the session reset the stream). `now` is the
    /// driver's time, used if a protocol error closes the connection.
    /// Protocols without request bodies answer `Ok(None)`.
    fn read_request_body(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<Option<usize>, BodyError> {
        let _ = (now, conn, stream, buf);
        Ok(None)
    }
}

/// The client side of one connection's application protocol.
///
/// Calling protocol: [`ClientSession::on_connected`] once the handshake
/// completes; [`ClientSession::send_request`] opens a request stream; on
/// every turn [`ClientSession::poll`] until `None` reports response heads,
/// after which [`ClientSession::read_body`] reads the body.
pub trait ClientSession {
    /// The handshake completed: open whatever streams the protocol needs.
    fn on_connected(&mut self, conn: &mut Connection);

    /// Sends `request` (with an empty body) on a new bidirectional stream.
    fn send_request(
        &mut self,
        conn: &mut Connection,
        request: &Request,
    ) -> Result<StreamId, SendError>;

    /// Reads what arrived and reports the next response head or failure;
    /// `None` when there is nothing more now. `now` is the driver's time,
    /// used if a protocol error closes the connection.
    fn poll(&mut self, now: Instant, conn: &mut Connection) -> Option<ClientEvent>;

    /// Reads body bytes of the response on `stream` into `buf`, as
    /// [`transport::streams::Streams::read`] does: `Ok(Some(n))` with
    /// `n > 0`, `Ok(None)` at the end of the body, `Err(Blocked)` when
    /// nothing is available now. Protocol framing is removed (HTTP/3 DATA
    /// frames); a framing error closes the connection and is reported as
    /// [`BodyError::Protocol`] (`now` is the driver's time, for that close).
    fn read_body(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<Option<usize>, BodyError>;
}

#[cfg(test)]
mod tests {
    use super::Method;

    /// What `artq serve --0rtt` answers from early data (RFC 9110 §9.2.1).
    #[test]
    fn safe_methods_are_the_read_only_ones() {
        for m in ["GET", "HEAD", "OPTIONS", "TRACE"] {
            assert!(Method::from_token(m).is_safe(), "{m}");
        }
        for m in ["POST", "PUT", "DELETE", "PATCH", "CONNECT", "get"] {
            assert!(!Method::from_token(m).is_safe(), "{m}");
        }
    }
}
