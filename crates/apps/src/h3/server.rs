//! [`H3Server`]: the server side of HTTP/3 over one connection.

use std::collections::{BTreeMap, VecDeque};

use transport::streams::WriteError;
use transport::Connection;
use wire::time::Instant;
use wire::{Dir, Side, StreamId};

use super::control::Control;
use super::error::{
    H3Error, H3_EXCESSIVE_LOAD, H3_INTERNAL_ERROR, H3_MESSAGE_ERROR, H3_NO_ERROR,
    H3_REQUEST_CANCELLED, H3_REQUEST_INCOMPLETE, H3_REQUEST_REJECTED,
};
use super::frame::Settings;
use super::message;
use super::reader::{ByteSource, ConnStream};
use super::request_reader::{RequestBodyRead, RequestRead, RequestReader};
use super::writer::SendState;
use crate::http::{BodyError, MessageError, ResponseHead, SendError, ServerEvent, ServerSession};

/// Most bytes read from one request stream: the request head (at most
/// [`crate::http::MAX_FIELD_SECTION`]) and whatever else a client sends
/// (unknown frames, a body the application ignores, trailers), so a
/// request stream cannot make us read without end. A body the application
/// reads ([`ServerSession::stream_request_body`]) does not count: the
/// application bounds it. Before the head is complete,
/// more is refused as too large (431, H3_EXCESSIVE_LOAD); after it, reading
/// stops with H3_NO_ERROR and the response still completes (RFC 9114
/// §4.1.1: a server that does not need the rest of a request may abort
/// reading it).
pub const MAX_REQUEST_STREAM_BYTES: u64 = 64 * 1024;

/// A request stream as a [`ByteSource`] that counts what it hands out.
struct Counted<'a> {
    inner: ConnStream<'a>,
    read: &'a mut u64,
}

impl ByteSource for Counted<'_> {
    fn read(&mut self, buf: &mut [u8]) -> Result<Option<usize>, transport::streams::ReadError> {
        let got = self.inner.read(buf)?;
        if let Some(n) = got {
            *self.read = self.read.saturating_add(n as u64);
        }
        Ok(got)
    }
}

/// One request stream on the server.
#[derive(Debug, Default)]
struct Exchange {
    /// Reading the request.
    reader: RequestReader,
    /// Bytes read from the request stream so far.
    read: u64,
    /// We stopped reading (STOP_SENDING) before the reader was done: the
    /// rest of the request is discarded by the transport.
    read_stopped: bool,
    /// Writing the response.
    send: SendState,
    /// The application heard about this stream (Request or BadRequest).
    reported: bool,
    /// The request was refused as malformed: `abort` resets with
    /// H3_MESSAGE_ERROR.
    bad: bool,
    /// A final (non-1xx) response head was queued.
    final_head: bool,
    /// Our sending half was reset (by `abort` or for the peer).
    reset: bool,
}

impl Exchange {
    /// Nothing more is read from the request stream.
    fn reading_over(&self) -> bool {
        self.read_stopped || self.reader.is_done()
    }

    /// Both halves are over: the stream can be forgotten.
    fn is_over(&self) -> bool {
        self.reading_over() && (self.reset || (self.send.is_finished() && self.send.is_idle()))
    }

    /// Stops reading the request stream with `code` (STOP_SENDING, unless
    /// the client already ended or reset it); its unread bytes are dropped.
    fn stop_reading(&mut self, conn: &mut Connection, id: StreamId, code: u64) {
        if !self.reading_over() {
            let _ = conn.streams().stop_sending(id, code);
            self.read_stopped = true;
        }
    }
}

/// The server side of HTTP/3 (RFC 9114) with QPACK (RFC 9204) on one
/// connection: the [`ServerSession`] that the file server and the
/// simulator's server node drive when the connection negotiated `h3`.
///
/// See the [module documentation](super) for the structure and the
/// choices; the calling protocol is [`ServerSession`]'s.
#[derive(Debug)]
pub struct H3Server {
    control: Control,
    exchanges: BTreeMap<StreamId, Exchange>,
    events: VecDeque<ServerEvent>,
    /// The first client bidirectional stream ID not accepted yet.
    next_request: u64,
    /// The ID our GOAWAY carried; requests on streams at or above it are
    /// rejected.
    goaway: Option<u64>,
    /// A connection error closed the connection.
    failed: bool,
    /// A connection error found where no `now` was at hand
    /// (`on_connected`, `shutdown`): the next `poll` closes with it.
    deferred: Option<H3Error>,
}

impl Default for H3Server {
    fn default() -> Self {
        H3Server::new()
    }
}

impl H3Server {
    /// A session for a connection whose handshake is under way.
    pub fn new() -> H3Server {
        H3Server {
            control: Control::new(Side::Server),
            exchanges: BTreeMap::new(),
            events: VecDeque::new(),
            next_request: 0,
            goaway: None,
            failed: false,
            deferred: None,
        }
    }

    /// The peer's SETTINGS, once its control stream delivered them.
    pub fn peer_settings(&self) -> Option<Settings> {
        self.control.peer.settings
    }

    /// Closes the connection for `error` (once).
    fn fail(&mut self, now: Instant, conn: &mut Connection, error: H3Error) {
        if !self.failed {
            tracing::debug!(%error, "HTTP/3 server closing the connection");
            conn.close(now, error.code, error.reason.as_bytes());
            self.failed = true;
            self.events.clear();
        }
    }

    /// Accepts the client's new request streams (rejecting those at or past
    /// our GOAWAY ID).
    fn accept_requests(&mut self, conn: &mut Connection) {
        while let Some(id) = conn.streams().accept(Dir::Bi) {
            self.next_request = self.next_request.max(id.0.saturating_add(4));
            if self.goaway.is_some_and(|g| id.0 >= g) {
                // RFC 9114 §5.2: not processed, safe to retry elsewhere.
                let _ = conn.streams().reset(id, H3_REQUEST_REJECTED);
                let _ = conn.streams().stop_sending(id, H3_REQUEST_REJECTED);
                continue;
            }
            self.exchanges.insert(id, Exchange::default());
        }
    }

    /// Reads every request stream; pushes events. `Err` is a connection
    /// error.
    fn read_requests(&mut self, conn: &mut Connection) -> Result<(), H3Error> {
        let ids: Vec<StreamId> = self.exchanges.keys().copied().collect();
        for id in ids {
            self.read_request(conn, id)?;
        }
        Ok(())
    }

    /// Reads request stream `id` as far as it goes now; pushes events.
    /// `Err` is a connection error.
    fn read_request(&mut self, conn: &mut Connection, id: StreamId) -> Result<(), H3Error> {
        {
            let Some(ex) = self.exchanges.get_mut(&id) else {
                return Ok(());
            };
            // Body bytes held for the application stay where they are: it
            // reads them with `read_request_body`, or skips them.
            if ex.reader.holds_body() {
                return Ok(());
            }
            while !ex.reading_over() {
                // A body the application reads is bounded by flow control
                // and the application's reading, not by this limit (which
                // then counts frame headers only).
                if ex.read > MAX_REQUEST_STREAM_BYTES && !ex.reader.streams_body() {
                    if ex.reported {
                        // The request is known; the rest is not needed.
                        ex.stop_reading(conn, id, H3_NO_ERROR);
                    } else {
                        ex.stop_reading(conn, id, H3_EXCESSIVE_LOAD);
                        ex.reported = true;
                        ex.bad = true;
                        self.events.push_back(ServerEvent::BadRequest {
                            stream: id,
                            error: MessageError::TooLarge(ex.read),
                        });
                    }
                    break;
                }
                let read = ex.reader.read(&mut Counted {
                    inner: ConnStream {
                        conn: &mut *conn,
                        id,
                    },
                    read: &mut ex.read,
                })?;
                match read {
                    RequestRead::Blocked | RequestRead::End => break,
                    RequestRead::Request(request) => {
                        ex.reported = true;
                        self.events.push_back(ServerEvent::Request {
                            stream: id,
                            request,
                        });
                    }
                    // A DATA payload held until the application decides,
                    // or for it to read (`read_request_body`).
                    RequestRead::Body => break,
                    RequestRead::Bad(error) => {
                        // Stop the upload; the application answers 4xx on
                        // our half (or aborts, which resets it).
                        let code = match error {
                            MessageError::TooLarge(_) => H3_EXCESSIVE_LOAD,
                            MessageError::Malformed(_) => H3_MESSAGE_ERROR,
                        };
                        let _ = conn.streams().stop_sending(id, code);
                        ex.reported = true;
                        ex.bad = true;
                        self.events
                            .push_back(ServerEvent::BadRequest { stream: id, error });
                    }
                    RequestRead::Incomplete | RequestRead::LengthMismatch => {
                        let code = if read == RequestRead::Incomplete {
                            H3_REQUEST_INCOMPLETE
                        } else {
                            H3_MESSAGE_ERROR
                        };
                        let _ = conn.streams().stop_sending(id, code);
                        let _ = conn.streams().reset(id, code);
                        ex.reset = true;
                        if ex.reported {
                            self.events.push_back(ServerEvent::Cancelled { stream: id });
                        }
                    }
                    RequestRead::Reset(_) => {
                        let _ = conn.streams().reset(id, H3_REQUEST_CANCELLED);
                        ex.reset = true;
                        if ex.reported {
                            self.events.push_back(ServerEvent::Cancelled { stream: id });
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Writes what responses owe (heads that did not fit, FINs). A response
    /// the client stopped (STOP_SENDING) is reported as cancelled: streams
    /// with nothing owed are probed with an empty write, which the
    /// transport refuses with `Stopped` once the client stopped them.
    fn flush_responses(&mut self, conn: &mut Connection) {
        let mut stopped = Vec::new();
        for (&id, ex) in &mut self.exchanges {
            if ex.reset || ex.send.is_finished() {
                continue;
            }
            let result = if ex.send.is_idle() {
                conn.streams().write(id, &[]).map(|_| true)
            } else {
                ex.send.flush(conn, id)
            };
            if let Err(WriteError::Stopped(_)) = result {
                stopped.push(id);
            }
        }
        for id in stopped {
            self.cancelled(id);
        }
        self.exchanges.retain(|_, ex| !ex.is_over());
    }

    /// The client stopped our half of `stream`: it is over for us (the
    /// transport reset it), and the application hears of it once.
    fn cancelled(&mut self, stream: StreamId) {
        if let Some(ex) = self.exchanges.get_mut(&stream) {
            if !ex.reset && ex.reported {
                self.events.push_back(ServerEvent::Cancelled { stream });
            }
            ex.reset = true;
        }
    }

    /// The exchange on `stream`, if the session can still send on it.
    fn exchange(
        &mut self,
        conn: &Connection,
        stream: StreamId,
    ) -> Result<&mut Exchange, SendError> {
        if self.failed || conn.is_closed() {
            return Err(SendError::NotReady("the connection is closed"));
        }
        let ex = self
            .exchanges
            .get_mut(&stream)
            .ok_or(SendError::Stream(WriteError::UnknownStream))?;
        if ex.reset {
            return Err(SendError::Stream(WriteError::Closed));
        }
        Ok(ex)
    }
}

/// A write error that means the client stopped the stream.
/// Whether a send failed because the client stopped the stream.
fn was_stopped<T>(result: &Result<T, SendError>) -> bool {
    matches!(result, Err(SendError::Stream(WriteError::Stopped(_))))
}

impl ServerSession for H3Server {
    fn on_connected(&mut self, conn: &mut Connection) {
        self.control.start();
        if let Err(e) = self.control.flush_ours(conn) {
            self.deferred.get_or_insert(e);
        }
    }

    fn poll(&mut self, now: Instant, conn: &mut Connection) -> Option<ServerEvent> {
        if let Some(event) = self.events.pop_front() {
            return Some(event);
        }
        if self.failed || conn.is_closed() {
            return None;
        }
        if let Some(error) = self.deferred.take() {
            self.fail(now, conn, error);
            return None;
        }
        // Every event was delivered: an application that heard of a
        // request and did not ask for its body does not want it.
        for ex in self.exchanges.values_mut() {
            if ex.reported && ex.reader.body_undecided() {
                ex.reader.skip_body();
            }
        }
        let result = self.control.poll(conn).and_then(|()| {
            self.accept_requests(conn);
            self.read_requests(conn)
        });
        if let Err(error) = result {
            self.fail(now, conn, error);
            return None;
        }
        self.flush_responses(conn);
        self.events.pop_front()
    }

    fn send_response(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        head: &ResponseHead,
    ) -> Result<(), SendError> {
        let peer_limit = self
            .control
            .peer
            .settings
            .and_then(|s| s.max_field_section_size);
        let ex = self.exchange(conn, stream)?;
        if ex.final_head {
            return Err(SendError::NotReady("the response head was already sent"));
        }
        let fields = message::response_fields(head).map_err(SendError::NotReady)?;
        let frame = message::headers_frame(&fields, peer_limit).map_err(SendError::NotReady)?;
        ex.send.queue(&frame);
        ex.final_head = head.status >= 200;
        let result = ex
            .send
            .flush(conn, stream)
            .map(|_| ())
            .map_err(SendError::from);
        if was_stopped(&result) {
            self.cancelled(stream);
        }
        result
    }

    fn send_body(
        &mut self,
        conn: &mut Connection,
        stream: StreamId,
        data: &[u8],
    ) -> Result<usize, SendError> {
        let ex = self.exchange(conn, stream)?;
        if !ex.final_head {
            return Err(SendError::NotReady("send_response comes before the body"));
        }
        let result = ex.send.send_body(conn, stream, data);
        if was_stopped(&result) {
            self.cancelled(stream);
        }
        result
    }

    fn finish(&mut self, conn: &mut Connection, stream: StreamId) -> Result<(), SendError> {
        let ex = self.exchange(conn, stream)?;
        if !ex.final_head {
            return Err(SendError::NotReady("no final response head was sent"));
        }
        if ex.reader.body_undecided() {
            // Nobody asked for the body: what already arrived of the
            // request is read (and its body discarded) before reading
            // stops, so a malformed rest is still caught.
            ex.reader.skip_body();
            if let Err(e) = self.read_request(conn, stream) {
                self.deferred.get_or_insert(e);
            }
        }
        let ex = self.exchange(conn, stream)?;
        // The response is complete: whatever the client still sends on the
        // request stream is not needed (RFC 9114 §4.1.1, H3_NO_ERROR).
        ex.stop_reading(conn, stream, H3_NO_ERROR);
        let result = ex.send.finish(conn, stream);
        if was_stopped(&result) {
            self.cancelled(stream);
        }
        if self.exchanges.get(&stream).is_some_and(Exchange::is_over) {
            self.exchanges.remove(&stream);
        }
        result
    }

    fn abort(&mut self, conn: &mut Connection, stream: StreamId) {
        let Some(ex) = self.exchanges.remove(&stream) else {
            return;
        };
        // A malformed request the application did not answer is a stream
        // error of type H3_MESSAGE_ERROR (RFC 9114 §4.1.2).
        let code = if ex.bad {
            H3_MESSAGE_ERROR
        } else {
            H3_INTERNAL_ERROR
        };
        let _ = conn.streams().reset(stream, code);
        if !ex.reading_over() {
            let _ = conn.streams().stop_sending(stream, code);
        }
    }

    fn stream_request_body(&mut self, stream: StreamId) {
        if let Some(ex) = self.exchanges.get_mut(&stream) {
            ex.reader.stream_body();
        }
    }

    fn read_request_body(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<Option<usize>, BodyError> {
        if self.failed {
            return Err(BodyError::Protocol("the connection failed".into()));
        }
        let Some(ex) = self.exchanges.get_mut(&stream) else {
            return Err(BodyError::UnknownStream);
        };
        if ex.read_stopped || ex.reset {
            return Err(BodyError::UnknownStream);
        }
        let read = ex.reader.read_body(
            &mut ConnStream {
                conn: &mut *conn,
                id: stream,
            },
            buf,
        );
        match read {
            Ok(RequestBodyRead::Data(n)) => Ok(Some(n)),
            Ok(RequestBodyRead::End) => Ok(None),
            Ok(RequestBodyRead::Blocked) => Err(BodyError::Blocked),
            Ok(RequestBodyRead::LengthMismatch) => {
                // RFC 9114 §4.1.2: a malformed request, after the fact.
                let _ = conn.streams().stop_sending(stream, H3_MESSAGE_ERROR);
                let _ = conn.streams().reset(stream, H3_MESSAGE_ERROR);
                ex.reset = true;
                Err(BodyError::Reset(H3_MESSAGE_ERROR))
            }
            Ok(RequestBodyRead::Reset(code)) => {
                let _ = conn.streams().reset(stream, H3_REQUEST_CANCELLED);
                ex.reset = true;
                Err(BodyError::Reset(code))
            }
            Err(error) => {
                let reason = error.reason;
                self.fail(now, conn, error);
                Err(BodyError::Protocol(reason.to_string()))
            }
        }
    }

    fn shutdown(&mut self, conn: &mut Connection) {
        if self.goaway.is_some() || self.failed {
            return;
        }
        // Requests that already arrived are processed: accept them first,
        // then announce the first ID we will not process.
        self.accept_requests(conn);
        let id = self.next_request;
        self.goaway = Some(id);
        self.control.queue_goaway(id);
        if let Err(e) = self.control.flush_ours(conn) {
            self.deferred.get_or_insert(e);
        }
    }
}
