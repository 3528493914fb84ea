//! The sans-IO HTTP/1.1 client codec of one origin connection (RFC 9112).
//!
//! The edge's driver owns the TCP socket; this module only turns requests
//! into bytes ([`write_request_head`], [`RequestBodyEncoder`]) and bytes into
//! a response ([`ResponseDecoder`]). One request at a time: the edge never
//! pipelines, so a response is always the answer to the last request
//! written, and a connection is reused only after its response completed
//! cleanly ([`Decoded::Done`] with `keep_alive`).
//!
//! The status line and header fields are parsed by `httparse`; the body
//! framing (content-length, chunked, close-delimited) is decoded here.
//!
//! Origins are trusted more than clients but not blindly: no input makes the
//! decoder panic, and every buffer an origin can grow is bounded, each bound
//! a `pub const` here ([`MAX_HEAD`], [`MAX_FIELDS`], [`MAX_INTERIM`],
//! [`MAX_CHUNK_LINE`], [`MAX_TRAILERS`]). The body itself is never buffered
//! by the decoder: the caller says how much it can take per call.

use super::headers::{connection_options, is_forwardable_value, is_token};
use crate::http::{Field, ResponseHead};

/// Largest response head (status line, fields and the empty line) accepted
/// from an origin, 64 KiB; larger is [`OriginError::HeadTooLarge`]. Each
/// interim (1xx) head is held to it too, as are the empty lines an origin
/// sends before a head, together. This bounds the caller's read buffer
/// while a head is incomplete.
pub const MAX_HEAD: usize = 64 * 1024;

/// Most header fields in one response head; more is
/// [`OriginError::TooManyFields`]. Also the bound of a trailer section.
pub const MAX_FIELDS: usize = 128;

/// Most interim (1xx) responses skipped before the final one; more is
/// [`OriginError::TooManyInterim`] (an origin sending 103s forever would
/// otherwise hold the request open).
pub const MAX_INTERIM: usize = 16;

/// Longest chunk-size line, extensions and CRLF included, 4 KiB; longer is
/// [`OriginError::ChunkLineTooLong`]. Extensions are read and ignored.
pub const MAX_CHUNK_LINE: usize = 4 * 1024;

/// Largest trailer section (the fields after the last chunk and the empty
/// line), 16 KiB; larger is [`OriginError::TrailersTooLarge`]. Trailers are
/// checked and dropped: nothing at the edge uses them, and HTTP/3 clients
/// would get them only if the proxy forwarded them, which it does not.
pub const MAX_TRAILERS: usize = 16 * 1024;

// --- requests --------------------------------------------------------------

/// Why a request could not be written. The proxy answers the client 400 for
/// a head (the fields came from the client) and aborts a body that breaks
/// its declared framing. Refusing here, rather than writing, is the guard
/// against request smuggling and header injection: no byte of a refused
/// head reaches `out`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    /// The method is not a token (RFC 9110 §9.1).
    #[error("request method {0:?} is not a token")]
    Method(String),
    /// The target does not start with `/`, or holds a space, a control
    /// character (CR, LF, NUL...) or DEL: it would break the request line.
    #[error("request target {0:?} is not an origin-form target")]
    Target(String),
    /// A field name is not a token.
    #[error("field name {0:?} is not a token")]
    FieldName(String),
    /// A field value holds CR, LF or NUL.
    #[error("field {0:?} has CR, LF or NUL in its value")]
    FieldValue(String),
    /// Body bytes were written beyond the declared length (nothing of the
    /// offending write was framed).
    #[error("request body longer than its content-length {declared}")]
    BodyTooLong {
        /// The declared length.
        declared: u64,
    },
    /// The body ended before its declared length.
    #[error("request body ended after {written} of its {declared} bytes")]
    BodyTooShort {
        /// The declared length.
        declared: u64,
        /// What was written.
        written: u64,
    },
    /// Body bytes were written for a request declared without a body.
    #[error("body bytes written for a request without a body")]
    NoBody,
    /// The body was written to after its end.
    #[error("request body written after its end")]
    Finished,
}

/// Writes a request head: `METHOD target HTTP/1.1`, each field as
/// `name: value`, and the empty line, CRLF-terminated, appended to `out`.
///
/// The caller passes every field, `host` first ([`super::headers`] builds
/// them), plus the body's framing field if any ([`RequestFraming::field`]).
/// Nothing is written unless everything is valid: the method and field names
/// must be tokens; the target must start with `/` and hold no space,
/// control character or DEL (bytes above 0x7f pass: origins take UTF-8
/// paths); values must hold no CR, LF or NUL.
pub fn write_request_head(
    out: &mut Vec<u8>,
    method: &str,
    target: &str,
    fields: &[Field],
) -> Result<(), RequestError> {
    if !is_token(method) {
        return Err(RequestError::Method(method.to_string()));
    }
    if !target.starts_with('/') || target.bytes().any(|b| b <= b' ' || b == 0x7f) {
        return Err(RequestError::Target(target.to_string()));
    }
    for f in fields {
        if !is_token(&f.name) {
            return Err(RequestError::FieldName(f.name.clone()));
        }
        if !is_forwardable_value(&f.value) {
            return Err(RequestError::FieldValue(f.name.clone()));
        }
    }
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for f in fields {
        out.extend_from_slice(f.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(f.value.trim_matches([' ', '\t']).as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    Ok(())
}

/// How a request body is framed on the wire (RFC 9112 §6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestFraming {
    /// No body, no framing field (a GET or HEAD).
    None,
    /// Exactly this many bytes, announced by `content-length` (the proxy
    /// knows the length when the client sent one).
    Length(u64),
    /// `transfer-encoding: chunked`: a body of unknown length (an HTTP/3
    /// client's body without `content-length`).
    Chunked,
}

impl RequestFraming {
    /// The field that announces this framing, for the head: the caller adds
    /// it to the fields it passes to [`write_request_head`].
    /// `Length(0)` gives `content-length: 0` (a POST with an empty body must
    /// say so); `None` gives no field.
    pub fn field(self) -> Option<Field> {
        match self {
            RequestFraming::None => None,
            RequestFraming::Length(n) => Some(Field::new("content-length", n.to_string())),
            RequestFraming::Chunked => Some(Field::new("transfer-encoding", "chunked")),
        }
    }
}

/// Frames the body bytes of one request after its head, and holds the
/// caller to the framing it declared: a length body may not run over or
/// stop short (either would desynchronize the connection, the origin
/// reading our next request as body or our body as a request).
#[derive(Clone, Debug)]
pub struct RequestBodyEncoder {
    framing: RequestFraming,
    written: u64,
    finished: bool,
}

impl RequestBodyEncoder {
    /// An encoder for a body framed as `framing`.
    pub fn new(framing: RequestFraming) -> RequestBodyEncoder {
        RequestBodyEncoder {
            framing,
            written: 0,
            finished: false,
        }
    }

    /// Body bytes written so far (without framing).
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Appends `data` to `out`, framed. An empty `data` writes nothing (in a
    /// chunked body a zero-size chunk would end it). On an error nothing is
    /// appended.
    pub fn write(&mut self, data: &[u8], out: &mut Vec<u8>) -> Result<(), RequestError> {
        if self.finished {
            return Err(RequestError::Finished);
        }
        if data.is_empty() {
            return Ok(());
        }
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        let total = self.written.saturating_add(len);
        match self.framing {
            RequestFraming::None => return Err(RequestError::NoBody),
            RequestFraming::Length(declared) => {
                if total > declared {
                    return Err(RequestError::BodyTooLong { declared });
                }
                out.extend_from_slice(data);
            }
            RequestFraming::Chunked => {
                out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                out.extend_from_slice(data);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.written = total;
        Ok(())
    }

    /// Ends the body: chunked writes the last chunk (`0`, no trailers); a
    /// length body checks that all of it was written. Finishing twice is an
    /// error, as is a short body (the connection must then be closed).
    pub fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), RequestError> {
        if self.finished {
            return Err(RequestError::Finished);
        }
        self.finished = true;
        match self.framing {
            RequestFraming::None => {}
            RequestFraming::Length(declared) if self.written < declared => {
                return Err(RequestError::BodyTooShort {
                    declared,
                    written: self.written,
                });
            }
            RequestFraming::Length(_) => {}
            RequestFraming::Chunked => out.extend_from_slice(b"0\r\n\r\n"),
        }
        Ok(())
    }
}

// --- responses -------------------------------------------------------------

/// Why an origin's response was refused. Each message is fit for a log
/// line; the proxy answers its client 502 and closes the origin connection.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// The bytes are not a valid response (status line, fields, framing
    /// fields, chunk framing or trailers).
    #[error("malformed origin response: {0}")]
    Malformed(String),
    /// A response head larger than [`MAX_HEAD`].
    #[error("origin response head larger than {MAX_HEAD} bytes")]
    HeadTooLarge,
    /// More than [`MAX_FIELDS`] fields in a head or trailer section.
    #[error("origin response with more than {MAX_FIELDS} fields")]
    TooManyFields,
    /// More than [`MAX_INTERIM`] interim (1xx) responses.
    #[error("origin sent more than {MAX_INTERIM} interim (1xx) responses")]
    TooManyInterim,
    /// A `101 Switching Protocols`: the edge never asks to upgrade.
    #[error("origin switched protocols (101) though no upgrade was asked for")]
    UnexpectedUpgrade,
    /// A chunk-size line longer than [`MAX_CHUNK_LINE`].
    #[error("origin chunk-size line longer than {MAX_CHUNK_LINE} bytes")]
    ChunkLineTooLong,
    /// A trailer section larger than [`MAX_TRAILERS`].
    #[error("origin trailer section larger than {MAX_TRAILERS} bytes")]
    TrailersTooLarge,
    /// The origin closed the connection inside the response: in the head
    /// (after some of it arrived), a length body or a chunked body (the
    /// string says which).
    #[error("origin closed the connection inside the response {0}")]
    Truncated(&'static str),
    /// The origin closed the connection before sending any byte. On a
    /// reused connection this is the race of an idle close with our
    /// request: RFC 9112 §9.3.1 lets the proxy retry an idempotent request
    /// (GET, HEAD) on a new connection.
    #[error("origin closed the connection before responding")]
    Closed,
}

/// How the body of a response is delimited, as its head says (RFC 9112
/// §6.3). The proxy uses it to choose the client's framing fields
/// ([`super::headers::client_response_fields`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// No body: the response to a HEAD request, a 204 or a 304 (whatever
    /// their fields say), or `content-length: 0`.
    Empty,
    /// `content-length` bytes (more than zero).
    Length(u64),
    /// `transfer-encoding` ending in `chunked`.
    Chunked,
    /// Until the origin closes the connection: neither a length nor
    /// chunked. Such a connection is never reused.
    Close,
}

/// What one [`ResponseDecoder::decode`] call did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// Everything usable in `input` was consumed; call again when more
    /// bytes arrived (appended after the unconsumed rest, if any).
    NeedMore,
    /// The final response's head (interim 1xx heads are skipped, never
    /// reported) and how its body is framed. Reported once, first.
    Head(ResponseHead, Framing),
    /// Body bytes (at least one, at most `max_body`) were appended to the
    /// caller's buffer. Call again: more may follow from the same input.
    Body,
    /// Body bytes are waiting in `input` but `max_body` was 0: the caller
    /// is the one blocked. Call again once it has room; no new input is
    /// needed. (`NeedMore` always means the input is what is missing.)
    Blocked,
    /// The response is complete. `keep_alive`: the connection may carry the
    /// next request. It is false when the origin or the framing says so
    /// (`connection: close`, HTTP/1.0 without `keep-alive`, close-delimited
    /// or chunked-with-content-length bodies) and when `input` held bytes
    /// after the response: with no pipelining they answer nothing, so the
    /// connection is out of step. Bytes arriving later, on an idle
    /// connection, mean the same: the caller must close an idle connection
    /// that becomes readable. Later calls report `Done` again.
    Done {
        /// Whether the connection may be reused.
        keep_alive: bool,
    },
}

/// Where a response is in its decoding.
#[derive(Clone, Debug)]
enum State {
    /// Before the final head (interim heads included).
    Head,
    /// In a content-length body, this many bytes to go.
    Length(u64),
    /// Before a chunk-size line.
    ChunkSize,
    /// In a chunk's data, this many bytes to go.
    ChunkData(u64),
    /// After a chunk's data, before its CRLF.
    ChunkEnd,
    /// After the last chunk: the trailer section and the empty line.
    Trailers,
    /// In a close-delimited body.
    Close,
    /// The response is complete.
    Complete,
    /// An error was reported; it is reported again on every call.
    Failed(OriginError),
}

/// Decodes the one response to the request last written on an origin
/// connection: a new decoder per request.
///
/// Calling protocol: after every read from the socket, call
/// [`ResponseDecoder::decode`] with all the bytes received and not yet
/// consumed, drop the consumed prefix, and act on the event; repeat while
/// it is `Head` or `Body`, wait for input on `NeedMore`, for room in the
/// body's consumer on `Blocked`. At end of stream call
/// [`ResponseDecoder::finish`] once every byte was consumed (`NeedMore`).
/// An error is final: every later call reports it again.
#[derive(Clone, Debug)]
pub struct ResponseDecoder {
    head_request: bool,
    state: State,
    /// What the head allows; the final decision also needs no leftovers.
    keep_alive: bool,
    /// Interim responses skipped so far.
    interim: usize,
    /// Empty lines skipped before heads, in bytes.
    blank: usize,
    /// Whether any byte arrived (tells `Closed` from `Truncated`).
    started: bool,
    /// How many bytes at the start of the caller's input were already
    /// searched for the end of the pending head, chunk line or trailer
    /// section: a slow origin's bytes are scanned once, not once per read.
    scanned: usize,
}

impl ResponseDecoder {
    /// A decoder for the response to a request, `head_request` if it was a
    /// HEAD (whose response has no body, whatever its fields say).
    pub fn new(head_request: bool) -> ResponseDecoder {
        ResponseDecoder {
            head_request,
            state: State::Head,
            keep_alive: false,
            interim: 0,
            blank: 0,
            started: false,
            scanned: 0,
        }
    }

    /// Consumes a prefix of `input` (the bytes received and not yet
    /// consumed) and reports one event; returns how many bytes were
    /// consumed. The caller keeps the rest and passes it again, with what
    /// arrives next appended.
    ///
    /// At most `max_body` body bytes are appended to `body` per call, so the
    /// caller applies backpressure: with `max_body == 0` no body byte is
    /// consumed ([`Decoded::Blocked`] if some are waiting), though framing
    /// (chunk lines, the end of the response) still is.
    pub fn decode(
        &mut self,
        input: &[u8],
        body: &mut Vec<u8>,
        max_body: usize,
    ) -> Result<(usize, Decoded), OriginError> {
        self.started |= !input.is_empty();
        let scanned = std::mem::take(&mut self.scanned).min(input.len());
        let result = match &self.state {
            State::Failed(e) => return Err(e.clone()),
            State::Complete => {
                self.keep_alive &= input.is_empty();
                Ok((
                    0,
                    Decoded::Done {
                        keep_alive: self.keep_alive,
                    },
                ))
            }
            State::Head => self.head(input, scanned),
            _ => self.body(input, scanned, body, max_body),
        };
        if let Err(e) = &result {
            self.state = State::Failed(e.clone());
        }
        result
    }

    /// The origin closed the connection (end of stream), after `decode`
    /// consumed every byte. A close-delimited body ends here
    /// (`Done { keep_alive: false }`), as does an already complete response;
    /// anywhere else the response is cut: [`OriginError::Truncated`], or
    /// [`OriginError::Closed`] if nothing at all arrived.
    pub fn finish(&mut self) -> Result<Decoded, OriginError> {
        let error = match &self.state {
            State::Failed(e) => return Err(e.clone()),
            State::Close | State::Complete => {
                self.state = State::Complete;
                self.keep_alive = false;
                return Ok(Decoded::Done { keep_alive: false });
            }
            State::Head if !self.started => OriginError::Closed,
            State::Head => OriginError::Truncated("head"),
            State::Length(_) => OriginError::Truncated("body"),
            State::ChunkSize | State::ChunkData(_) | State::ChunkEnd | State::Trailers => {
                OriginError::Truncated("chunked body")
            }
        };
        self.state = State::Failed(error.clone());
        Err(error)
    }

    /// The head state: skips empty lines and interim responses, reports the
    /// final head.
    fn head(&mut self, input: &[u8], mut scanned: usize) -> Result<(usize, Decoded), OriginError> {
        let mut pos = 0;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            // Empty lines before a head are skipped (httparse would too), but
            // here, once, counted against MAX_HEAD.
            let blank = leading_empty_lines(rest);
            if blank > 0 {
                self.blank = self.blank.saturating_add(blank);
                if self.blank > MAX_HEAD {
                    return Err(OriginError::HeadTooLarge);
                }
                pos += blank;
                scanned = 0;
                continue;
            }
            // Only the first MAX_HEAD bytes are searched for the end of the
            // head, so whether a head is too large does not depend on how
            // the bytes were split into reads.
            let window = rest.get(..MAX_HEAD).unwrap_or(rest);
            let Some(end) = find_head_end(window, scanned) else {
                if rest.len() > MAX_HEAD {
                    return Err(OriginError::HeadTooLarge);
                }
                self.scanned = rest.len();
                return Ok((pos, Decoded::NeedMore));
            };
            let mut raw = [httparse::EMPTY_HEADER; MAX_FIELDS];
            let mut response = httparse::Response::new(&mut raw);
            let parsed = response
                .parse(rest.get(..end).unwrap_or(rest))
                .map_err(|e| match e {
                    httparse::Error::TooManyHeaders => OriginError::TooManyFields,
                    e => OriginError::Malformed(format!("response head: {e}")),
                })?;
            if parsed.is_partial() {
                // Cannot happen once empty lines are skipped; searching on
                // keeps the decoder safe if it ever did.
                scanned = end;
                continue;
            }
            pos += end;
            scanned = 0;
            let version = response.version.unwrap_or(1);
            let status = response.code.unwrap_or(0);
            match status {
                101 => return Err(OriginError::UnexpectedUpgrade),
                100..=199 => {
                    self.interim += 1;
                    if self.interim > MAX_INTERIM {
                        return Err(OriginError::TooManyInterim);
                    }
                    continue;
                }
                200..=599 => {}
                _ => {
                    return Err(OriginError::Malformed(format!(
                        "status {status} out of range"
                    )))
                }
            }
            let mut headers = Vec::with_capacity(response.headers.len());
            for h in response.headers.iter() {
                let value = std::str::from_utf8(h.value).map_err(|_| {
                    OriginError::Malformed(format!("field {:?} is not UTF-8", h.name))
                })?;
                headers.push(Field::new(h.name, value.trim_matches([' ', '\t'])));
            }
            let head = ResponseHead { status, headers };
            let framing = self.framing(version, &head)?;
            self.state = match framing {
                Framing::Empty => State::Complete,
                Framing::Length(n) => State::Length(n),
                Framing::Chunked => State::ChunkSize,
                Framing::Close => State::Close,
            };
            return Ok((pos, Decoded::Head(head, framing)));
        }
    }

    /// The body's framing and the connection's fate from a final head
    /// (RFC 9112 §6.3 and §9.3), HTTP/1.`minor`.
    fn framing(&mut self, minor: u8, head: &ResponseHead) -> Result<Framing, OriginError> {
        let options = connection_options(&head.headers);
        let has = |option: &str| options.iter().any(|o| o == option);
        self.keep_alive = !has("close") && (minor >= 1 || has("keep-alive"));

        let mut codings = Vec::new();
        let mut has_te = false;
        for f in head
            .headers
            .iter()
            .filter(|f| f.name == "transfer-encoding")
        {
            has_te = true;
            for coding in f.value.split(',') {
                // A coding's parameters (`;q=...`) do not change its name.
                let name = coding.split(';').next().unwrap_or_default();
                let name = name.trim_matches([' ', '\t']).to_ascii_lowercase();
                if !name.is_empty() {
                    codings.push(name);
                }
            }
        }
        if has_te && minor == 0 {
            // RFC 9112 §6.1: its framing cannot be trusted.
            return Err(OriginError::Malformed(
                "transfer-encoding in an HTTP/1.0 response".into(),
            ));
        }
        if has_te && codings.is_empty() {
            return Err(OriginError::Malformed("empty transfer-encoding".into()));
        }
        if codings.iter().filter(|c| *c == "chunked").count() > 1 {
            return Err(OriginError::Malformed("chunked applied twice".into()));
        }
        let length = if has_te {
            // Ignored (RFC 9112 §6.3 rule 3), but the message smells of
            // smuggling: its connection is not reused.
            if head.headers.iter().any(|f| f.name == "content-length") {
                self.keep_alive = false;
            }
            None
        } else {
            content_length(&head.headers)?
        };

        let framing = if self.head_request || head.status == 204 || head.status == 304 {
            Framing::Empty
        } else if has_te {
            if codings.last().is_some_and(|c| c == "chunked") {
                Framing::Chunked
            } else {
                Framing::Close
            }
        } else {
            match length {
                Some(0) => Framing::Empty,
                Some(n) => Framing::Length(n),
                None => Framing::Close,
            }
        };
        if framing == Framing::Close {
            self.keep_alive = false;
        }
        Ok(framing)
    }

    /// The body states: decodes as far as `input`, `max_body` and the
    /// response allow, and reports one event.
    fn body(
        &mut self,
        input: &[u8],
        scanned: usize,
        body: &mut Vec<u8>,
        max_body: usize,
    ) -> Result<(usize, Decoded), OriginError> {
        let mut pos = 0;
        let mut appended = 0;
        let mut blocked = false;
        loop {
            let rest = input.get(pos..).unwrap_or_default();
            let room = max_body - appended;
            // What was searched last call is the start of this call's input.
            let scanned = if pos == 0 { scanned } else { 0 };
            match self.state {
                State::Length(0) => self.state = State::Complete,
                State::ChunkData(0) => self.state = State::ChunkEnd,
                State::Length(remaining) | State::ChunkData(remaining) => {
                    if rest.is_empty() {
                        break;
                    }
                    if room == 0 {
                        blocked = true;
                        break;
                    }
                    let n = usize::try_from(remaining)
                        .map_or(rest.len(), |r| r.min(rest.len()))
                        .min(room);
                    body.extend_from_slice(rest.get(..n).unwrap_or_default());
                    pos += n;
                    appended += n;
                    let left = remaining - n as u64;
                    self.state = match self.state {
                        State::Length(_) => State::Length(left),
                        _ => State::ChunkData(left),
                    };
                }
                State::Close => {
                    if rest.is_empty() {
                        break;
                    }
                    if room == 0 {
                        blocked = true;
                        break;
                    }
                    let n = rest.len().min(room);
                    body.extend_from_slice(rest.get(..n).unwrap_or_default());
                    pos += n;
                    appended += n;
                }
                State::ChunkSize => {
                    let window = rest.get(..MAX_CHUNK_LINE).unwrap_or(rest);
                    let Some(end) = find_crlf(window, scanned) else {
                        if rest.len() >= MAX_CHUNK_LINE {
                            return Err(OriginError::ChunkLineTooLong);
                        }
                        self.scanned = rest.len();
                        break;
                    };
                    let size = parse_chunk_line(rest.get(..end).unwrap_or_default())?;
                    pos += end + 2;
                    self.state = if size == 0 {
                        State::Trailers
                    } else {
                        State::ChunkData(size)
                    };
                }
                State::ChunkEnd => match rest {
                    [b'\r', b'\n', ..] => {
                        pos += 2;
                        self.state = State::ChunkSize;
                    }
                    [] | [b'\r'] => break,
                    _ => {
                        return Err(OriginError::Malformed(
                            "chunk data not followed by CRLF".into(),
                        ))
                    }
                },
                State::Trailers => {
                    let end = match rest {
                        [b'\r', b'\n', ..] => 2,
                        [] | [b'\r'] => break,
                        _ => {
                            let window = rest.get(..MAX_TRAILERS).unwrap_or(rest);
                            let Some(end) = find_trailers_end(window, scanned) else {
                                if rest.len() >= MAX_TRAILERS {
                                    return Err(OriginError::TrailersTooLarge);
                                }
                                self.scanned = rest.len();
                                break;
                            };
                            check_trailers(rest.get(..end).unwrap_or_default())?;
                            end
                        }
                    };
                    pos += end;
                    self.state = State::Complete;
                }
                State::Complete | State::Head | State::Failed(_) => break,
            }
        }
        let event = if appended > 0 {
            Decoded::Body
        } else if matches!(self.state, State::Complete) {
            self.keep_alive &= pos == input.len();
            Decoded::Done {
                keep_alive: self.keep_alive,
            }
        } else if blocked {
            Decoded::Blocked
        } else {
            Decoded::NeedMore
        };
        Ok((pos, event))
    }
}

/// The `content-length` of a message's fields: `None` without one; the
/// value when every `content-length` field, and every element of each (a
/// list of identical values is allowed, RFC 9110 §8.6), is the same decimal
/// number; an error for anything else (several values, not digits,
/// overflow), which RFC 9112 §6.3 makes unrecoverable.
pub fn content_length(fields: &[Field]) -> Result<Option<u64>, OriginError> {
    let mut length = None;
    for f in fields.iter().filter(|f| f.name == "content-length") {
        for element in f.value.split(',') {
            let element = element.trim_matches([' ', '\t']);
            let n = element
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| element.parse::<u64>().ok())
                .flatten()
                .ok_or_else(|| {
                    OriginError::Malformed(format!("invalid content-length {:?}", f.value))
                })?;
            if length.is_some_and(|l| l != n) {
                return Err(OriginError::Malformed(
                    "content-length fields disagree".into(),
                ));
            }
            length = Some(n);
        }
    }
    Ok(length)
}

/// Length of the empty lines (CRLF or LF) at the start of `bytes`.
fn leading_empty_lines(bytes: &[u8]) -> usize {
    let mut n = 0;
    loop {
        match bytes.get(n..) {
            Some([b'\n', ..]) => n += 1,
            Some([b'\r', b'\n', ..]) => n += 2,
            _ => return n,
        }
    }
}

/// The end (just past it) of the first empty line that ends a head in
/// `bytes`: `\n\n` or `\n\r\n`. The first `scanned` bytes were searched
/// before (a terminator may straddle them, hence the overlap).
fn find_head_end(bytes: &[u8], scanned: usize) -> Option<usize> {
    let from = scanned.saturating_sub(2);
    bytes.iter().enumerate().skip(from).find_map(|(i, &b)| {
        match (b, bytes.get(i + 1), bytes.get(i + 2)) {
            (b'\n', Some(b'\n'), _) => Some(i + 2),
            (b'\n', Some(b'\r'), Some(b'\n')) => Some(i + 3),
            _ => None,
        }
    })
}

/// Where the first CRLF in `bytes` starts, searching from `scanned - 1`.
fn find_crlf(bytes: &[u8], scanned: usize) -> Option<usize> {
    let from = scanned.saturating_sub(1);
    bytes
        .windows(2)
        .skip(from)
        .position(|w| w == b"\r\n")
        .map(|i| i + from)
}

/// The end (just past it) of the first CRLFCRLF in `bytes`: the end of a
/// non-empty trailer section. Chunked framing is held to CRLF.
fn find_trailers_end(bytes: &[u8], scanned: usize) -> Option<usize> {
    let from = scanned.saturating_sub(3);
    bytes
        .windows(4)
        .skip(from)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + from + 4)
}

/// The size of a chunk-size line without its CRLF: hex digits, then
/// optional whitespace and extensions (`;name=value`, read and ignored:
/// they mean nothing to the edge), RFC 9112 §7.1.1.
fn parse_chunk_line(line: &[u8]) -> Result<u64, OriginError> {
    let digits = line.iter().take_while(|b| b.is_ascii_hexdigit()).count();
    if digits == 0 {
        return Err(OriginError::Malformed("chunk size is not hex".into()));
    }
    let mut size: u64 = 0;
    for &b in line.iter().take(digits) {
        let digit = char::from(b).to_digit(16).unwrap_or(0);
        size = size
            .checked_mul(16)
            .and_then(|s| s.checked_add(u64::from(digit)))
            .ok_or_else(|| OriginError::Malformed("chunk size overflows".into()))?;
    }
    let rest = line.get(digits..).unwrap_or_default();
    let rest = match rest.iter().position(|&b| b != b' ' && b != b'\t') {
        Some(i) => rest.get(i..).unwrap_or_default(),
        None => &[],
    };
    match rest {
        [] => Ok(size),
        [b';', ext @ ..] if ext.iter().all(|&b| b == b'\t' || (b >= b' ' && b != 0x7f)) => Ok(size),
        _ => Err(OriginError::Malformed(
            "invalid bytes after chunk size".into(),
        )),
    }
}

/// Checks a trailer section (fields and the empty line, `bytes` ending with
/// CRLFCRLF) as httparse parses fields, with CRLF line ends only, like the
/// rest of the chunked framing; the fields are then dropped.
fn check_trailers(bytes: &[u8]) -> Result<(), OriginError> {
    let bare_lf = bytes
        .iter()
        .enumerate()
        .any(|(i, &b)| b == b'\n' && (i == 0 || bytes.get(i - 1) != Some(&b'\r')));
    if bare_lf {
        return Err(OriginError::Malformed("bare LF in trailer section".into()));
    }
    let mut raw = [httparse::EMPTY_HEADER; MAX_FIELDS];
    match httparse::parse_headers(bytes, &mut raw) {
        Ok(httparse::Status::Complete((n, _))) if n == bytes.len() => Ok(()),
        Ok(_) => Err(OriginError::Malformed(
            "trailer section does not end at its empty line".into(),
        )),
        Err(httparse::Error::TooManyHeaders) => Err(OriginError::TooManyFields),
        Err(e) => Err(OriginError::Malformed(format!("trailer section: {e}"))),
    }
}

/// The body of the cargo-fuzz target `origin_response`
/// (`fuzz/fuzz_targets/`), kept in the library so the unit tests run it on
/// stable Rust over the committed seeds and random inputs.
#[doc(hidden)]
pub mod fuzzing {
    use super::*;
    use crate::edge::headers::{client_response_fields, HOP_BY_HOP};

    /// How one response decoding ended, to compare two runs.
    #[derive(Clone, Debug, PartialEq, Eq)]
    pub struct Outcome {
        /// The final head and its framing, if one was reported.
        pub head: Option<(ResponseHead, Framing)>,
        /// All body bytes, in order.
        pub body: Vec<u8>,
        /// `Ok(reusable)`: the response completed, and whether the
        /// connection could carry another request (the decoder's
        /// `keep_alive` and no byte left over); or the error.
        pub end: Result<bool, OriginError>,
    }

    /// Decodes the response carried by `reads` (then end of stream), as the
    /// driver would: `room(i)` is the `max_body` of the `i`-th call. Checks
    /// the decoder's contract at every call.
    pub fn run<'a>(
        head_request: bool,
        reads: impl IntoIterator<Item = &'a [u8]>,
        mut room: impl FnMut(usize) -> usize,
    ) -> Outcome {
        let mut decoder = ResponseDecoder::new(head_request);
        let mut outcome = Outcome {
            head: None,
            body: Vec::new(),
            end: Err(OriginError::Closed),
        };
        let mut buf = Vec::new();
        let mut calls = 0;
        let mut done = None;
        for read in reads {
            buf.extend_from_slice(read);
            if done.is_some() {
                continue;
            }
            // Each call consumes, reports a new state, or stops: bounded.
            let mut budget = 4 * buf.len() + 16;
            loop {
                assert!(budget > 0, "decoder makes no progress");
                budget -= 1;
                let max = room(calls);
                calls += 1;
                let before = outcome.body.len();
                let (n, event) = match decoder.decode(&buf, &mut outcome.body, max) {
                    Ok(r) => r,
                    Err(e) => {
                        assert_eq!(decoder.decode(&buf, &mut outcome.body, max), Err(e.clone()));
                        outcome.end = Err(e);
                        return check(outcome);
                    }
                };
                let appended = outcome.body.len() - before;
                assert!(n <= buf.len(), "consumed more than the input");
                assert!(appended <= max && appended <= n, "{appended} > {max}");
                buf.drain(..n);
                match event {
                    Decoded::NeedMore => {
                        assert_eq!(appended, 0);
                        break;
                    }
                    Decoded::Blocked => {
                        assert_eq!((appended, max), (0, 0));
                        assert!(!buf.is_empty());
                    }
                    Decoded::Body => {
                        assert!(appended > 0);
                        assert!(outcome.head.is_some(), "body before the head");
                    }
                    Decoded::Head(head, framing) => {
                        assert!(outcome.head.is_none(), "two heads");
                        outcome.head = Some((head, framing));
                    }
                    Decoded::Done { keep_alive } => {
                        assert_eq!(appended, 0);
                        assert!(outcome.head.is_some(), "done before the head");
                        done = Some(keep_alive);
                        break;
                    }
                }
            }
        }
        // The end of stream; bytes still in `buf` are an incomplete line
        // or head (or follow a complete response).
        outcome.end = match done {
            Some(keep_alive) => Ok(keep_alive && buf.is_empty()),
            None => match decoder.finish() {
                Ok(Decoded::Done { keep_alive }) => Ok(keep_alive && buf.is_empty()),
                Ok(other) => panic!("finish reported {other:?}"),
                Err(e) => Err(e),
            },
        };
        check(outcome)
    }

    /// Checks what a whole decoding must satisfy, and returns it.
    fn check(outcome: Outcome) -> Outcome {
        match &outcome.head {
            None => assert!(outcome.body.is_empty()),
            Some((head, framing)) => {
                assert!((200..=599).contains(&head.status), "{}", head.status);
                for f in &head.headers {
                    assert!(!f.name.bytes().any(|b| b.is_ascii_uppercase()));
                    assert!(is_forwardable_value(&f.value), "{f:?}");
                }
                match (framing, &outcome.end) {
                    (Framing::Empty, _) => assert!(outcome.body.is_empty()),
                    (Framing::Length(n), Ok(_)) => assert_eq!(outcome.body.len() as u64, *n),
                    (Framing::Length(n), Err(_)) => assert!(outcome.body.len() as u64 <= *n),
                    (Framing::Close, Ok(reusable)) => assert!(!reusable),
                    _ => {}
                }
                let out = client_response_fields(head, framing);
                let options = connection_options(&head.headers);
                for f in &out {
                    assert!(!HOP_BY_HOP.contains(&f.name.as_str()), "{f:?}");
                    assert!(!options.contains(&f.name), "{f:?}");
                    assert!(is_forwardable_value(&f.value), "{f:?}");
                }
            }
        }
        outcome
    }

    /// `origin_response`: arbitrary bytes as an origin's answer.
    ///
    /// Byte 0: bit 0 says whether the request was a HEAD; the other bits
    /// are the `max_body` of every other call (the calls between take 0,
    /// exercising [`Decoded::Blocked`]). Byte 1: the size of each read, less
    /// one. The rest is the response, decoded twice: whole with no body
    /// limit, and in reads of that size with that backpressure. Both must
    /// give the same head, body bytes and end (the contract checks of
    /// [`run`] hold in both).
    pub fn origin_response(data: &[u8]) {
        let [flags, step, response @ ..] = data else {
            return;
        };
        let head_request = flags & 1 == 1;
        let max = usize::from(flags >> 1).max(1);
        let step = usize::from(*step) + 1;
        let whole = run(head_request, [response], |_| usize::MAX);
        let split = run(head_request, response.chunks(step), |i| {
            if i % 2 == 0 {
                0
            } else {
                max
            }
        });
        assert_eq!(whole, split, "split into reads of {step}, max_body {max}");
    }
}

#[cfg(test)]
mod tests {
    use super::fuzzing::{origin_response, run, Outcome};
    use super::*;
    use proptest::prelude::*;

    /// Decodes `response` whole, unlimited.
    fn whole(head_request: bool, response: &[u8]) -> Outcome {
        run(head_request, [response], |_| usize::MAX)
    }

    fn head_of(outcome: &Outcome) -> (&ResponseHead, Framing) {
        let (head, framing) = outcome.head.as_ref().expect("a head");
        (head, *framing)
    }

    // --- requests ---

    #[test]
    fn request_head_is_written() {
        let mut out = Vec::new();
        let fields = [
            Field::new("host", "o.example"),
            Field::new("accept", " */* "),
        ];
        write_request_head(&mut out, "GET", "/a?b=1", &fields).unwrap();
        assert_eq!(
            out,
            b"GET /a?b=1 HTTP/1.1\r\nhost: o.example\r\naccept: */*\r\n\r\n"
        );
    }

    #[test]
    fn request_injection_is_refused_and_nothing_written() {
        let ok = [Field::new("host", "h")];
        let cases: Vec<(&str, &str, Vec<Field>)> = vec![
            ("GET\r\nX", "/", ok.to_vec()),
            ("", "/", ok.to_vec()),
            ("GET /", "/", ok.to_vec()),
            ("GET", "a", ok.to_vec()),
            ("GET", "", ok.to_vec()),
            ("GET", "http://x/", ok.to_vec()),
            ("GET", "/a b", ok.to_vec()),
            ("GET", "/a\r\nhost: evil", ok.to_vec()),
            ("GET", "/a\0", ok.to_vec()),
            ("GET", "/a\n", ok.to_vec()),
            ("GET", "/", vec![Field::new("x", "a\r\nhost: evil")]),
            ("GET", "/", vec![Field::new("x", "a\nb")]),
            ("GET", "/", vec![Field::new("x", "a\0")]),
            ("GET", "/", vec![Field::new("x y", "1")]),
            ("GET", "/", vec![Field::new("x\r\n", "1")]),
            ("GET", "/", vec![Field::new("", "1")]),
        ];
        for (method, target, fields) in cases {
            let mut out = b"before".to_vec();
            let r = write_request_head(&mut out, method, target, &fields);
            assert!(r.is_err(), "{method:?} {target:?} {fields:?}");
            assert_eq!(out, b"before");
        }
        let mut out = Vec::new();
        write_request_head(&mut out, "GET", "/caf\u{e9}", &[]).unwrap();
    }

    #[test]
    fn chunked_request_body() {
        let mut enc = RequestBodyEncoder::new(RequestFraming::Chunked);
        let mut out = Vec::new();
        enc.write(b"hello", &mut out).unwrap();
        enc.write(b"", &mut out).unwrap();
        enc.write(&[b'x'; 26], &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        let mut want = b"5\r\nhello\r\n1a\r\n".to_vec();
        want.extend_from_slice(&[b'x'; 26]);
        want.extend_from_slice(b"\r\n0\r\n\r\n");
        assert_eq!(out, want);
        assert_eq!(enc.written(), 31);
        assert_eq!(enc.write(b"a", &mut out), Err(RequestError::Finished));
        assert_eq!(enc.finish(&mut out), Err(RequestError::Finished));
        assert_eq!(
            RequestFraming::Chunked.field(),
            Some(Field::new("transfer-encoding", "chunked"))
        );
    }

    #[test]
    fn length_request_body_is_held_to_its_length() {
        let mut enc = RequestBodyEncoder::new(RequestFraming::Length(5));
        let mut out = Vec::new();
        enc.write(b"abc", &mut out).unwrap();
        assert_eq!(
            enc.write(b"def", &mut out),
            Err(RequestError::BodyTooLong { declared: 5 })
        );
        assert_eq!(out, b"abc", "nothing of a refused write is framed");
        enc.write(b"de", &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        assert_eq!(out, b"abcde");

        let mut short = RequestBodyEncoder::new(RequestFraming::Length(5));
        short.write(b"abc", &mut out).unwrap();
        assert_eq!(
            short.finish(&mut out),
            Err(RequestError::BodyTooShort {
                declared: 5,
                written: 3
            })
        );
        assert_eq!(
            RequestFraming::Length(0).field(),
            Some(Field::new("content-length", "0"))
        );
    }

    #[test]
    fn bodiless_request() {
        let mut enc = RequestBodyEncoder::new(RequestFraming::None);
        let mut out = Vec::new();
        assert_eq!(enc.write(b"a", &mut out), Err(RequestError::NoBody));
        enc.write(b"", &mut out).unwrap();
        enc.finish(&mut out).unwrap();
        assert!(out.is_empty());
        assert_eq!(RequestFraming::None.field(), None);
    }

    // --- responses: framing ---

    #[test]
    fn content_length_body() {
        let o = whole(
            false,
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nX-A:  b \r\n\r\nhello",
        );
        let (head, framing) = head_of(&o);
        assert_eq!(head.status, 200);
        assert_eq!(
            head.headers,
            [Field::new("content-length", "5"), Field::new("x-a", "b")]
        );
        assert_eq!(framing, Framing::Length(5));
        assert_eq!(o.body, b"hello");
        assert_eq!(o.end, Ok(true));
    }

    #[test]
    fn chunked_body_with_extensions_and_trailers() {
        let o = whole(
            false,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n\
              5;name=value;flag\r\nhello\r\n\
              000A \t; ext=\"q\"\r\n, world!!!\r\n\
              0\r\nX-Checksum: 1\r\nX-Other: 2\r\n\r\n",
        );
        assert_eq!(head_of(&o).1, Framing::Chunked);
        assert_eq!(o.body, b"hello, world!!!");
        assert_eq!(o.end, Ok(true));
    }

    #[test]
    fn close_delimited_body() {
        for response in [
            &b"HTTP/1.1 200 OK\r\n\r\nuntil the end"[..],
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\nuntil the end",
            b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nuntil the end",
        ] {
            let o = whole(false, response);
            assert_eq!(head_of(&o).1, Framing::Close);
            assert_eq!(o.body, b"until the end");
            assert_eq!(o.end, Ok(false));
        }
        // Nothing in the body: still ends at end of stream.
        let mut dec = ResponseDecoder::new(false);
        let (n, ev) = dec
            .decode(b"HTTP/1.1 200 OK\r\n\r\n", &mut Vec::new(), 10)
            .unwrap();
        assert_eq!((n, matches!(ev, Decoded::Head(..))), (19, true));
        let ev = dec.decode(b"", &mut Vec::new(), 10).unwrap();
        assert_eq!(ev, (0, Decoded::NeedMore));
        assert_eq!(dec.finish(), Ok(Decoded::Done { keep_alive: false }));
    }

    #[test]
    fn body_exactly_at_a_chunk_boundary() {
        // Reads that end exactly after a chunk's data, after its CRLF, and
        // after the last chunk's line.
        let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let reads: [&[u8]; 5] = [head, b"3\r\nabc", b"\r\n", b"0\r\n", b"\r\n"];
        let o = run(false, reads, |_| usize::MAX);
        assert_eq!(o.body, b"abc");
        assert_eq!(o.end, Ok(true));

        // max_body exactly one chunk.
        let mut dec = ResponseDecoder::new(false);
        let mut body = Vec::new();
        let (n, _) = dec.decode(head, &mut body, 0).unwrap();
        assert_eq!(n, head.len());
        let input = b"3\r\nabc\r\n3\r\ndef\r\n0\r\n\r\n";
        // The first call stops at the second chunk's data (no room), having
        // consumed the framing before it; the second reaches the end.
        let (n, ev) = dec.decode(input, &mut body, 3).unwrap();
        assert_eq!((n, ev), (11, Decoded::Body));
        let (m, ev) = dec.decode(&input[n..], &mut body, 3).unwrap();
        assert_eq!((m, ev), (10, Decoded::Body));
        let (k, ev) = dec.decode(&input[n + m..], &mut body, 3).unwrap();
        assert_eq!((k, ev), (0, Decoded::Done { keep_alive: true }));
        assert_eq!(body, b"abcdef");
    }

    #[test]
    fn split_at_every_byte_matches_whole() {
        let responses: [&[u8]; 6] = [
            b"HTTP/1.1 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
            b"HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n\
              HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nA: b\r\n\r\n",
            b"\r\nHTTP/1.0 200 OK\r\n\r\nclose delimited",
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nZ\r\n",
            b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabcEXTRA",
        ];
        for response in responses {
            let reference = whole(false, response);
            for cut in 0..=response.len() {
                let (a, b) = response.split_at(cut);
                let o = run(false, [a, b], |_| usize::MAX);
                assert_eq!(o, reference, "cut at {cut}");
            }
            // One byte per read, one body byte per call.
            let o = run(false, response.chunks(1), |i| i % 2);
            assert_eq!(o, reference);
        }
    }

    #[test]
    fn backpressure_never_loses_or_duplicates_bytes() {
        let body: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        let mut chunked = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        for part in body.chunks(700) {
            chunked.extend_from_slice(format!("{:x}\r\n", part.len()).as_bytes());
            chunked.extend_from_slice(part);
            chunked.extend_from_slice(b"\r\n");
        }
        chunked.extend_from_slice(b"0\r\n\r\n");
        let mut length = b"HTTP/1.1 200 OK\r\ncontent-length: 3000\r\n\r\n".to_vec();
        length.extend_from_slice(&body);
        for response in [chunked, length] {
            for max in [1, 7, 699, 700, 701, 5000] {
                let o = run(false, response.chunks(333), |i| {
                    if i % 3 == 0 {
                        0
                    } else {
                        max
                    }
                });
                assert_eq!(o.body, body, "max_body {max}");
                assert_eq!(o.end, Ok(true));
            }
        }
    }

    #[test]
    fn zero_max_body_blocks_without_consuming_body() {
        let mut dec = ResponseDecoder::new(false);
        let input = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nab";
        let mut body = Vec::new();
        let (n, ev) = dec.decode(input, &mut body, 0).unwrap();
        assert!(matches!(ev, Decoded::Head(..)));
        let rest = &input[n..];
        assert_eq!(
            dec.decode(rest, &mut body, 0).unwrap(),
            (0, Decoded::Blocked)
        );
        assert_eq!(
            dec.decode(b"", &mut body, 0).unwrap(),
            (0, Decoded::NeedMore)
        );
        assert_eq!(dec.decode(rest, &mut body, 1).unwrap(), (1, Decoded::Body));
        assert_eq!(
            dec.decode(&rest[1..], &mut body, 5).unwrap(),
            (1, Decoded::Body)
        );
        let done = Decoded::Done { keep_alive: true };
        assert_eq!(dec.decode(b"", &mut body, 0).unwrap(), (0, done.clone()));
        assert_eq!(dec.decode(b"", &mut body, 0).unwrap(), (0, done));
        assert_eq!(body, b"ab");
    }

    // --- responses: heads ---

    #[test]
    fn interim_responses_are_skipped() {
        let o = whole(
            false,
            b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 102 Processing\r\n\r\n\
              HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n\
              HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
        );
        let (head, _) = head_of(&o);
        assert_eq!(head.status, 201);
        assert_eq!(head.headers, [Field::new("content-length", "2")]);
        assert_eq!(o.body, b"ok");

        let o = whole(false, b"HTTP/1.1 101 Switching Protocols\r\n\r\n");
        assert_eq!(o.end, Err(OriginError::UnexpectedUpgrade));

        let mut many = b"HTTP/1.1 103 Early Hints\r\n\r\n".repeat(MAX_INTERIM + 1);
        many.extend_from_slice(b"HTTP/1.1 204 No Content\r\n\r\n");
        assert_eq!(whole(false, &many).end, Err(OriginError::TooManyInterim));
    }

    #[test]
    fn head_204_and_304_have_no_body() {
        let o = whole(true, b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n");
        assert_eq!(head_of(&o).1, Framing::Empty);
        assert_eq!((o.body.is_empty(), &o.end), (true, &Ok(true)));

        let o = whole(
            true,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!(head_of(&o).1, Framing::Empty);
        assert_eq!(o.end, Ok(true));

        for status in ["204 No Content", "304 Not Modified"] {
            let response =
                format!("HTTP/1.1 {status}\r\nContent-Length: 10\r\nETag: \"e\"\r\n\r\n");
            let o = whole(false, response.as_bytes());
            assert_eq!(head_of(&o).1, Framing::Empty, "{status}");
            assert_eq!(o.end, Ok(true), "{status}");
        }
        let o = whole(false, b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n");
        assert_eq!(head_of(&o).1, Framing::Empty);
    }

    #[test]
    fn content_length_rules() {
        let o = whole(
            false,
            b"HTTP/1.1 200 OK\r\nContent-Length: 3, 3\r\ncontent-length: 3\r\n\r\nabc",
        );
        assert_eq!(head_of(&o).1, Framing::Length(3));

        for bad in [
            "Content-Length: 3\r\nContent-Length: 4",
            "Content-Length: 3, 4",
            "Content-Length: -3",
            "Content-Length: +3",
            "Content-Length: 0x3",
            "Content-Length: ",
            "Content-Length: 3,",
            "Content-Length: 3 3",
            "Content-Length: 99999999999999999999999",
        ] {
            let response = format!("HTTP/1.1 200 OK\r\n{bad}\r\n\r\nabc");
            let o = whole(false, response.as_bytes());
            assert!(
                matches!(o.end, Err(OriginError::Malformed(_))),
                "{bad}: {o:?}"
            );
            assert_eq!(o.head, None);
        }

        // Transfer-Encoding wins; the connection is not reused.
        let o = whole(
            false,
            b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\nTransfer-Encoding: chunked\r\n\r\n\
              1\r\na\r\n0\r\n\r\n",
        );
        assert_eq!(head_of(&o).1, Framing::Chunked);
        assert_eq!((o.body.as_slice(), &o.end), (&b"a"[..], &Ok(false)));
    }

    #[test]
    fn bad_transfer_encodings() {
        for bad in [
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked",
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: ,",
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked",
        ] {
            let o = whole(false, format!("{bad}\r\n\r\n0\r\n\r\n").as_bytes());
            assert!(matches!(o.end, Err(OriginError::Malformed(_))), "{bad}");
        }
    }

    #[test]
    fn bad_chunk_sizes_are_errors() {
        for bad in [
            "Z\r\n",
            "\r\n",
            " 5\r\nhello\r\n",
            "5 x\r\nhello\r\n",
            "5\nhello\r\n",
            "5;\0\r\nhello\r\n",
            "-5\r\n",
            "10000000000000000\r\n",
            "fffffffffffffffff\r\n",
            "5\r\nhelloXY0\r\n\r\n",
            "5\r\nhello\n0\r\n\r\n",
            "0\r\nbad trailer\r\n\r\n",
            "0\r\nA: b\nC: d\r\n\r\n",
        ] {
            let response = format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{bad}");
            let o = whole(false, response.as_bytes());
            assert!(
                matches!(o.end, Err(OriginError::Malformed(_))),
                "{bad:?}: {o:?}"
            );
        }
        // The largest size fits (and then the body is truncated).
        let o = whole(
            false,
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0ffffffffffffffff\r\nab",
        );
        assert_eq!(o.end, Err(OriginError::Truncated("chunked body")));
        assert_eq!(o.body, b"ab");
    }

    #[test]
    fn long_chunk_lines_and_trailers_are_refused() {
        let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        let long_ext = format!("{head}1;{}\r\na\r\n0\r\n\r\n", "x".repeat(MAX_CHUNK_LINE));
        assert_eq!(
            whole(false, long_ext.as_bytes()).end,
            Err(OriginError::ChunkLineTooLong)
        );
        let fits = format!(
            "{head}1;{}\r\na\r\n0\r\n\r\n",
            "x".repeat(MAX_CHUNK_LINE - 5)
        );
        assert_eq!(whole(false, fits.as_bytes()).end, Ok(true));

        let trailers = format!("{head}0\r\nx: {}\r\n\r\n", "v".repeat(MAX_TRAILERS));
        assert_eq!(
            whole(false, trailers.as_bytes()).end,
            Err(OriginError::TrailersTooLarge)
        );
        let many: String = (0..=MAX_FIELDS).map(|i| format!("t{i}: v\r\n")).collect();
        let trailers = format!("{head}0\r\n{many}\r\n");
        assert_eq!(
            whole(false, trailers.as_bytes()).end,
            Err(OriginError::TooManyFields)
        );
    }

    #[test]
    fn malformed_heads_are_errors() {
        for bad in [
            &b"HTTP/1.1 200 OK\r\nX-Folded: a\r\n b\r\n\r\n"[..],
            b"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX : a\r\n\r\n",
            b"HTTP/2 200 OK\r\n\r\n",
            b"HTTP/1.1 2000 OK\r\n\r\n",
            b"HTTP/1.1 099 Low\r\n\r\n",
            b"HTTP/1.1 600 High\r\n\r\n",
            b"ICY 200 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nX: \xff\xfe\r\n\r\n",
            b"\rHTTP/1.1 200 OK\r\n\r\n",
        ] {
            let o = whole(false, bad);
            assert!(
                matches!(o.end, Err(OriginError::Malformed(_))),
                "{:?}: {o:?}",
                String::from_utf8_lossy(bad)
            );
        }
        let many: String = (0..=MAX_FIELDS).map(|i| format!("f{i}: v\r\n")).collect();
        let o = whole(false, format!("HTTP/1.1 200 OK\r\n{many}\r\n").as_bytes());
        assert_eq!(o.end, Err(OriginError::TooManyFields));
    }

    #[test]
    fn huge_heads_are_refused() {
        let filler = |n: usize| format!("HTTP/1.1 200 OK\r\nx: {}\r\n\r\n", "a".repeat(n));
        let overhead = filler(0).len();
        let at_limit = filler(MAX_HEAD - overhead);
        assert_eq!(at_limit.len(), MAX_HEAD);
        assert_eq!(whole(false, at_limit.as_bytes()).end, Ok(false));
        let over = filler(MAX_HEAD - overhead + 1);
        assert_eq!(
            whole(false, over.as_bytes()).end,
            Err(OriginError::HeadTooLarge)
        );
        let o = run(false, over.as_bytes().chunks(1000), |_| usize::MAX);
        assert_eq!(o.end, Err(OriginError::HeadTooLarge));

        // An endless head is refused once past the bound, not buffered.
        let mut dec = ResponseDecoder::new(false);
        let endless = vec![b'a'; MAX_HEAD + 1];
        let mut input = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
        input.extend_from_slice(&endless);
        assert_eq!(
            dec.decode(&input, &mut Vec::new(), 0),
            Err(OriginError::HeadTooLarge)
        );
        // Endless empty lines too.
        let o = whole(false, &b"\r\n".repeat(MAX_HEAD / 2 + 1));
        assert_eq!(o.end, Err(OriginError::HeadTooLarge));
    }

    #[test]
    fn keep_alive_decisions() {
        let cases: [(&[u8], bool); 9] = [
            (b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", true),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: X, CLOSE\r\n\r\n",
                false,
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n",
                true,
            ),
            (b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false),
            (
                b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: Keep-Alive\r\n\r\n",
                true,
            ),
            (
                b"HTTP/1.0 200 OK\r\nContent-Length: 0\r\nConnection: keep-alive, close\r\n\r\n",
                false,
            ),
            // Extra bytes after the response: the connection is out of step.
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\naHTTP/1.1",
                false,
            ),
            (b"HTTP/1.1 204 No Content\r\n\r\n\r\n", false),
        ];
        for (response, keep_alive) in cases {
            let o = whole(false, response);
            assert_eq!(
                o.end,
                Ok(keep_alive),
                "{:?}",
                String::from_utf8_lossy(response)
            );
        }
        // The decoder itself reports leftovers in the input it is given.
        let mut dec = ResponseDecoder::new(false);
        let input = b"HTTP/1.1 204 No Content\r\n\r\nX";
        let (n, _) = dec.decode(input, &mut Vec::new(), 0).unwrap();
        assert_eq!(
            dec.decode(&input[n..], &mut Vec::new(), 0),
            Ok((0, Decoded::Done { keep_alive: false }))
        );
    }

    /// The decoder's own verdicts, without the test driver's: an end of
    /// response followed by a stray byte in the same input, and a wrong
    /// byte after chunk data seen as soon as it arrives.
    #[test]
    fn decoder_verdicts_within_one_input() {
        let head = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n";
        let mut dec = ResponseDecoder::new(false);
        let (n, _) = dec.decode(head, &mut Vec::new(), 0).unwrap();
        assert_eq!(n, head.len());
        let (n, ev) = dec.decode(b"0\r\n\r\nX", &mut Vec::new(), 0).unwrap();
        assert_eq!((n, ev), (5, Decoded::Done { keep_alive: false }));

        let mut dec = ResponseDecoder::new(false);
        dec.decode(head, &mut Vec::new(), 0).unwrap();
        let mut body = Vec::new();
        assert_eq!(dec.decode(b"1\r\na", &mut body, 10), Ok((4, Decoded::Body)));
        assert!(matches!(
            dec.decode(b"X", &mut body, 10),
            Err(OriginError::Malformed(_))
        ));
    }

    #[test]
    fn end_of_stream_rules() {
        let cases: [(&[u8], Result<bool, OriginError>); 7] = [
            (b"", Err(OriginError::Closed)),
            (
                b"HTTP/1.1 200 OK\r\nContent-",
                Err(OriginError::Truncated("head")),
            ),
            (
                b"HTTP/1.1 100 Continue\r\n\r\n",
                Err(OriginError::Truncated("head")),
            ),
            (
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabc",
                Err(OriginError::Truncated("body")),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
                Err(OriginError::Truncated("chunked body")),
            ),
            (
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nA: b\r\n",
                Err(OriginError::Truncated("chunked body")),
            ),
            (b"HTTP/1.1 200 OK\r\n\r\nall of it", Ok(false)),
        ];
        for (response, end) in cases {
            let o = whole(false, response);
            assert_eq!(o.end, end, "{:?}", String::from_utf8_lossy(response));
        }
        let mut dec = ResponseDecoder::new(false);
        assert_eq!(dec.finish(), Err(OriginError::Closed));
        assert_eq!(
            dec.decode(b"HTTP/1.1 200 OK\r\n\r\n", &mut Vec::new(), 1),
            Err(OriginError::Closed),
            "an error is final"
        );
    }

    #[test]
    fn http10_responses() {
        let o = whole(false, b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok");
        assert_eq!(head_of(&o).1, Framing::Length(2));
        assert_eq!((o.body.as_slice(), &o.end), (&b"ok"[..], &Ok(false)));
        // Bare LF line ends in the head, as httparse accepts them.
        let o = whole(false, b"HTTP/1.1 200\nContent-Length: 2\n\nok");
        assert_eq!(head_of(&o).0.status, 200);
        assert_eq!(o.end, Ok(true));
    }

    #[test]
    fn content_length_helper() {
        let f = |v: &str| content_length(&[Field::new("content-length", v)]);
        assert_eq!(f("0"), Ok(Some(0)));
        assert_eq!(f(" 42 "), Ok(Some(42)));
        assert_eq!(f("18446744073709551615"), Ok(Some(u64::MAX)));
        assert!(f("18446744073709551616").is_err());
        assert_eq!(content_length(&[]), Ok(None));
    }

    // --- the fuzz body ---

    proptest! {
        #[test]
        fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            origin_response(&data);
        }

        /// Valid responses mutated at a few bytes: random bytes rarely get
        /// past the status line.
        #[test]
        fn mutated_responses(
            flags in any::<u8>(),
            step in any::<u8>(),
            seed in 0usize..4,
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        ) {
            let bases: [&[u8]; 4] = [
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;a=b\r\nhello\r\n0\r\nT: 1\r\n\r\n",
                b"HTTP/1.1 103 Early Hints\r\nLink: <a>\r\n\r\nHTTP/1.0 200 OK\r\n\r\nrest",
                b"HTTP/1.1 304 Not Modified\r\nConnection: close, x\r\nX: y\r\n\r\n",
            ];
            let mut data = vec![flags, step];
            data.extend_from_slice(bases[seed]);
            for (at, byte) in flips {
                let i = 2 + at.index(data.len() - 2);
                data[i] ^= byte;
            }
            origin_response(&data);
        }
    }

    /// The seeds in `fuzz/corpus/origin_response/` run through the body;
    /// those named `ok-*` are responses that complete, `bad-*` ones that
    /// are refused (a seed that no longer does what its name says fails).
    #[test]
    fn seed_corpus_is_valid() {
        let seeds = crate::fuzzing::tests::seed_files("origin_response");
        assert!(seeds.len() >= 8);
        for path in seeds {
            let data = std::fs::read(&path).unwrap();
            origin_response(&data);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let o = whole(data[0] & 1 == 1, &data[2..]);
            if name.starts_with("ok-") {
                assert!(o.end.is_ok(), "{name}: {o:?}");
            } else if name.starts_with("bad-") {
                assert!(o.end.is_err(), "{name}: {o:?}");
            } else {
                panic!("seed {name} names no known kind (ok-, bad-)");
            }
        }
    }
}
