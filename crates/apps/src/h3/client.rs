//! [`H3Client`]: the client side of HTTP/3 over one connection.

use std::collections::{BTreeMap, VecDeque};

use transport::streams::WriteError;
use transport::Connection;
use wire::time::Instant;
use wire::{Dir, Side, StreamId};

use super::control::Control;
use super::error::{H3Error, H3_REQUEST_CANCELLED, H3_STREAM_CREATION_ERROR};
use super::frame::Settings;
use super::message;
use super::reader::ConnStream;
use super::response_reader::{BodyRead, HeadRead, ResponseReader};
use super::writer::SendState;
use crate::http::{BodyError, ClientEvent, ClientSession, Request, SendError};

/// One request stream on the client.
#[derive(Debug, Default)]
struct Exchange {
    /// Writing the request (HEADERS and FIN).
    send: SendState,
    /// Reading the response.
    reader: ResponseReader,
}

/// The client side of HTTP/3 (RFC 9114) with QPACK (RFC 9204) on one
/// connection: the [`ClientSession`] that the downloader and the
/// simulator's client node drive when the connection negotiated `h3`.
///
/// Requests need [`Request::authority`] (HTTP/3 carries `:authority`;
/// `send_request` answers `NotReady` without it). See the
/// [module documentation](super) for the structure and the choices.
#[derive(Debug)]
pub struct H3Client {
    control: Control,
    exchanges: BTreeMap<StreamId, Exchange>,
    events: VecDeque<ClientEvent>,
    /// The server's GOAWAY ID we already acted on.
    goaway_seen: Option<u64>,
    /// A connection error closed the connection.
    failed: bool,
    /// A connection error found where no `now` was at hand: the next
    /// `poll` closes with it.
    deferred: Option<H3Error>,
}

impl Default for H3Client {
    fn default() -> Self {
        H3Client::new()
    }
}

impl H3Client {
    /// A session for a connection whose handshake is under way.
    pub fn new() -> H3Client {
        H3Client {
            control: Control::new(Side::Client),
            exchanges: BTreeMap::new(),
            events: VecDeque::new(),
            goaway_seen: None,
            failed: false,
            deferred: None,
        }
    }

    /// The server sent GOAWAY: no new request will be processed.
    pub fn is_going_away(&self) -> bool {
        self.control.peer.goaway.is_some()
    }

    /// The peer's SETTINGS, once its control stream delivered them.
    pub fn peer_settings(&self) -> Option<Settings> {
        self.control.peer.settings
    }

    /// Closes the connection for `error` (once).
    fn fail(&mut self, now: Instant, conn: &mut Connection, error: H3Error) {
        if !self.failed {
            tracing::debug!(%error, "HTTP/3 client closing the connection");
            conn.close(now, error.code, error.reason.as_bytes());
            self.failed = true;
            self.events.clear();
            self.exchanges.clear();
        }
    }

    /// Reports `stream` failed, abandons both halves and forgets it.
    fn give_up(&mut self, conn: &mut Connection, stream: StreamId, code: u64, reason: String) {
        self.exchanges.remove(&stream);
        let _ = conn.streams().stop_sending(stream, code);
        let _ = conn.streams().reset(stream, code);
        self.events
            .push_back(ClientEvent::Failed { stream, reason });
    }

    /// One turn of reading: the control streams, then every response head
    /// still awaited. `Err` is a connection error.
    fn read(&mut self, conn: &mut Connection) -> Result<(), H3Error> {
        self.control.poll(conn)?;
        if conn.streams().accept(Dir::Bi).is_some() {
            // RFC 9114 §6.1: servers never open bidirectional streams.
            return Err(H3Error::new(
                H3_STREAM_CREATION_ERROR,
                "server-initiated bidirectional stream",
            ));
        }
        if let Some(goaway) = self
            .control
            .peer
            .goaway
            .filter(|&g| Some(g) != self.goaway_seen)
        {
            self.goaway_seen = Some(goaway);
            // Requests at or past the ID will not be processed (§5.2).
            let refused: Vec<StreamId> = self
                .exchanges
                .range(StreamId(goaway)..)
                .map(|(&id, _)| id)
                .collect();
            for id in refused {
                self.give_up(
                    conn,
                    id,
                    H3_REQUEST_CANCELLED,
                    "refused by the server's GOAWAY".into(),
                );
            }
        }
        let ids: Vec<StreamId> = self.exchanges.keys().copied().collect();
        for id in ids {
            let Some(ex) = self.exchanges.get_mut(&id) else {
                continue;
            };
            match ex.send.flush(conn, id) {
                Ok(_) => {}
                Err(WriteError::Stopped(_)) => ex.send.abandon(),
                Err(e) => {
                    let reason = format!("request write failed: {e}");
                    self.give_up(conn, id, H3_REQUEST_CANCELLED, reason);
                    continue;
                }
            }
            if ex.reader.has_head() {
                continue;
            }
            match ex.reader.read_head(&mut ConnStream { conn, id })? {
                HeadRead::Blocked => {}
                HeadRead::Response(head) => {
                    self.events
                        .push_back(ClientEvent::Response { stream: id, head });
                }
                HeadRead::Failed(code, reason) => self.give_up(conn, id, code, reason),
                HeadRead::Reset(code) => {
                    self.exchanges.remove(&id);
                    self.events.push_back(ClientEvent::Failed {
                        stream: id,
                        reason: format!("reset by the server with code {code:#x}"),
                    });
                }
            }
        }
        Ok(())
    }
}

impl H3Client {
    /// Sends the head of `request` on a new stream and leaves the stream
    /// open for a body: write it with [`H3Client::send_request_body`], end
    /// it with [`H3Client::finish_request`]. (Requests without a body go
    /// through [`ClientSession::send_request`].)
    pub fn open_request(
        &mut self,
        conn: &mut Connection,
        request: &Request,
    ) -> Result<StreamId, SendError> {
        if self.failed || conn.is_closed() {
            return Err(SendError::NotReady("the connection is closed"));
        }
        if conn.is_handshaking() {
            return Err(SendError::NotReady("the handshake is not complete"));
        }
        if self.is_going_away() {
            return Err(SendError::NotReady("the server sent GOAWAY"));
        }
        let fields = message::request_fields(request).map_err(SendError::NotReady)?;
        let peer_limit = self
            .control
            .peer
            .settings
            .and_then(|s| s.max_field_section_size);
        let frame = message::headers_frame(&fields, peer_limit).map_err(SendError::NotReady)?;
        let id = conn.streams().open(Dir::Bi).ok_or(SendError::NoStream)?;
        let mut ex = Exchange::default();
        ex.send.queue(&frame);
        if let Err(e) = ex.send.flush(conn, id) {
            if e != WriteError::Blocked {
                let _ = conn.streams().reset(id, H3_REQUEST_CANCELLED);
                let _ = conn.streams().stop_sending(id, H3_REQUEST_CANCELLED);
                return Err(SendError::Stream(e));
            }
        }
        self.exchanges.insert(id, ex);
        Ok(id)
    }

    /// Writes request body bytes on a stream of [`H3Client::open_request`];
    /// returns how many were taken (`Err(Stream(Blocked))` if none fit).
    pub fn send_request_body(
        &mut self,
        conn: &mut Connection,
        id: StreamId,
        data: &[u8],
    ) -> Result<usize, SendError> {
        let ex = self
            .exchanges
            .get_mut(&id)
            .ok_or(SendError::Stream(WriteError::UnknownStream))?;
        ex.send.send_body(conn, id, data)
    }

    /// Ends the request body of a stream of [`H3Client::open_request`].
    pub fn finish_request(&mut self, conn: &mut Connection, id: StreamId) -> Result<(), SendError> {
        let ex = self
            .exchanges
            .get_mut(&id)
            .ok_or(SendError::Stream(WriteError::UnknownStream))?;
        ex.send.finish(conn, id)
    }
}

impl ClientSession for H3Client {
    fn on_connected(&mut self, conn: &mut Connection) {
        self.control.start();
        if let Err(e) = self.control.flush_ours(conn) {
            self.deferred.get_or_insert(e);
        }
    }

    fn send_request(
        &mut self,
        conn: &mut Connection,
        request: &Request,
    ) -> Result<StreamId, SendError> {
        let id = self.open_request(conn, request)?;
        // The body is empty: FIN right after HEADERS (now or on a later
        // poll if the send buffer is full).
        if let Err(e) = self.finish_request(conn, id) {
            self.exchanges.remove(&id);
            let _ = conn.streams().reset(id, H3_REQUEST_CANCELLED);
            let _ = conn.streams().stop_sending(id, H3_REQUEST_CANCELLED);
            return Err(e);
        }
        Ok(id)
    }

    fn poll(&mut self, now: Instant, conn: &mut Connection) -> Option<ClientEvent> {
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
        if let Err(error) = self.read(conn) {
            self.fail(now, conn, error);
            return None;
        }
        self.events.pop_front()
    }

    fn read_body(
        &mut self,
        now: Instant,
        conn: &mut Connection,
        stream: StreamId,
        buf: &mut [u8],
    ) -> Result<Option<usize>, BodyError> {
        if self.failed {
            return Err(BodyError::Protocol("the connection was closed".into()));
        }
        let ex = self
            .exchanges
            .get_mut(&stream)
            .ok_or(BodyError::UnknownStream)?;
        if let Err(WriteError::Stopped(_)) = ex.send.flush(conn, stream) {
            // The server stopped our request half; the response goes on.
            ex.send.abandon();
        }
        let read = ex
            .reader
            .read_body(&mut ConnStream { conn, id: stream }, buf);
        match read {
            Ok(BodyRead::Data(n)) => Ok(Some(n)),
            Ok(BodyRead::Blocked) => Err(BodyError::Blocked),
            Ok(BodyRead::End) => {
                self.exchanges.remove(&stream);
                Ok(None)
            }
            Ok(BodyRead::Reset(code)) => {
                self.exchanges.remove(&stream);
                Err(BodyError::Reset(code))
            }
            Err(error) => {
                self.fail(now, conn, error);
                Err(BodyError::Protocol(error.to_string()))
            }
        }
    }
}
