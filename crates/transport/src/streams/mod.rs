//! Streams and flow control for one connection (RFC 9000 §2–§4).
//!
//! [`Streams`] owns every stream's state, both flow-control levels and the
//! stream-related control frames. It never sees packets: the connection asks
//! it to fill packets and reports what became of what it sent.
//!
//! Calling protocol (the connection's side):
//! - peer frames go to the `on_*` methods; an `Err` closes the connection with
//!   its code (add the frame type with [`TransportError::with_frame`](crate::TransportError::with_frame));
//! - to build a packet: [`Streams::poll_control`] for control frames, then
//!   [`Streams::poll_chunk`] + [`Streams::write_chunk`] for STREAM frames,
//!   until either returns `None`/`false` (do not loop on [`Streams::has_pending`]
//!   alone: a chunk may not fit the room left);
//! - record each [`StreamChunk`] / [`ControlFrame`] in the sent packet, then
//!   report its fate with [`Streams::on_chunk_acked`], [`Streams::requeue_lost`]
//!   (plain retransmission), [`Streams::on_control_acked`], [`Streams::on_control_lost`];
//! - redundancy policies may at any time take [`Streams::unacked_parts`] of a
//!   chunk and [`Streams::write_chunk`] them again as replicas; that changes no
//!   queue, only acknowledgements do.
//!
//! The application side ([`Streams::open`], [`Streams::write`], [`Streams::read`],
//! ...) is reached through the connection; [`Streams::poll_event`] reports changes.
//!
//! Memory (what one connection can make us hold, [`StreamsConfig`]):
//! - sending: stream bytes live once, in each stream's send buffer, until
//!   acknowledged. `write` takes bytes only while the stream and the
//!   connection stay within the peer's flow-control credit plus
//!   [`StreamsConfig::send_ahead`], and within [`StreamsConfig::send_buffer`]
//!   and [`StreamsConfig::connection_send_buffer`]; an application is told
//!   with `Blocked`, then `Writable` once credit or acknowledgements open
//!   room, so it reads its source only as the peer's window opens;
//! - receiving: received bytes are stored sparsely (a hole costs nothing),
//!   never more than our receive windows let the peer send, in at most
//!   [`StreamsConfig::max_receive_pieces`] pieces per connection (a peer that
//!   fragments its data past that is closed with PROTOCOL_VIOLATION).
//!
//! Range bookkeeping is O(log n) per operation.

mod app;
mod assembler;
mod control;
mod flow;
mod incoming;
mod limits;
mod recv;
mod send;
mod send_buffer;
mod transmit;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use wire::frame::MAX_STREAM_COUNT;
use wire::transport_params::TransportParameters;
use wire::{Dir, Side, StreamId};

pub use control::ControlFrame;

use control::Pending;
use flow::{RecvWindow, SendCredit};
use limits::SendTotals;
use recv::RecvStream;
use send::SendStream;

/// Stream and flow-control limits for one endpoint, and so the memory one
/// connection's streams can hold.
///
/// The receive windows are the receiver's buffer (the papers' "receive
/// buffer"): the peer can never have more than `receive_window` bytes
/// unconsumed on the connection, nor `stream_receive_window` on one stream,
/// because credit is extended only as the application reads.
///
/// The send side holds at most what the peer's flow control grants plus
/// `send_ahead` twice and once per stream with data, and never more than
/// `connection_send_buffer`. With the defaults one connection's streams
/// hold at most: 16 MiB received (our window) plus about 1.6 MiB of
/// reassembly bookkeeping; and to send, the smaller of 16 MiB and the
/// peer's connection credit plus 128 KiB plus 64 KiB per stream (what is in
/// flight and not yet acknowledged included: it is within that credit), so
/// about 6.5 MiB beyond the peer's credit with all 100 streams open.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamsConfig {
    /// Connection-level receive window in bytes (our initial_max_data and the
    /// credit kept ahead of the reader).
    pub receive_window: u64,
    /// Per-stream receive window in bytes (our initial_max_stream_data_*).
    pub stream_receive_window: u64,
    /// Most unacknowledged bytes buffered per stream for sending; `write`
    /// accepts no more until acknowledgements free space.
    pub send_buffer: u64,
    /// Most unacknowledged bytes buffered for sending on the whole
    /// connection (every stream together): the cap when a peer grants more
    /// credit than it reads or acknowledges.
    pub connection_send_buffer: u64,
    /// How far writes may run ahead of the peer's flow-control credit,
    /// bytes. Within its MAX_STREAM_DATA a stream takes bytes while all
    /// streams' unsent bytes stay within the connection's MAX_DATA plus
    /// `send_ahead`, or its own stay within `send_ahead` (so the
    /// connection's credit is shared among streams instead of taken by the
    /// first written); past its MAX_STREAM_DATA, up to `send_ahead` more,
    /// while all streams' bytes past their own credit stay within
    /// `send_ahead`. Data the peer does not let us send yet is not worth
    /// holding; a little is, so that control streams and requests written
    /// before the peer's limits arrive fit and an application can write in
    /// chunks.
    pub send_ahead: u64,
    /// Most bytes written and not yet sent, over all streams (`None`: no
    /// limit but the others). What the peer's credit lets us buffer (16 MiB
    /// windows are common) is far more than a sender needs queued to keep
    /// its path busy: an application that is woken when half of this is
    /// left refills in time (TCP's `notsent_lowat` is the same idea). Each
    /// stream may still hold its own `send_ahead` beyond it, so a peer
    /// reading its streams in any order gets data on each. `artq serve`
    /// and `artq get` set 1 MiB; the simulator leaves it off (`None`), so
    /// its results do not depend on it.
    pub unsent_limit: Option<u64>,
    /// Most pieces received stream data may be stored in, summed over the
    /// connection's streams. In-order data fills pieces of 16 KiB, so a full
    /// 16 MiB window is about a thousand; each hole a loss leaves adds one.
    /// Each piece costs about 100 bytes of bookkeeping, so this bounds what
    /// a peer fragmenting its data (one byte every other byte) can make us
    /// hold; past it the connection is closed with PROTOCOL_VIOLATION.
    pub max_receive_pieces: u64,
    /// Bidirectional streams the peer may have open at once (initial_max_streams_bidi).
    pub max_concurrent_bidi_streams: u64,
    /// Unidirectional streams the peer may have open at once (initial_max_streams_uni).
    pub max_concurrent_uni_streams: u64,
}

impl Default for StreamsConfig {
    /// 16 MiB windows and send buffers: one bandwidth-delay product of
    /// 1 Gbit/s x 134 ms, enough not to be the bottleneck in the papers'
    /// settings, while bounding memory per connection. 64 KiB ahead of the
    /// peer's credit (one of the server's body chunks: an application is
    /// driven between the credit's arrival and the next packet, so more
    /// would only cost memory per slow client). 16384 receive pieces:
    /// twice what a 16 MiB window of 1200-byte packets with every other
    /// one lost needs, for about 1.6 MiB of bookkeeping. 100 streams each
    /// way.
    fn default() -> Self {
        StreamsConfig {
            receive_window: 16 << 20,
            stream_receive_window: 16 << 20,
            send_buffer: 16 << 20,
            connection_send_buffer: 16 << 20,
            send_ahead: 64 << 10,
            unsent_limit: None,
            max_receive_pieces: 16384,
            max_concurrent_bidi_streams: 100,
            max_concurrent_uni_streams: 100,
        }
    }
}

impl StreamsConfig {
    /// Sets both receive windows to `bytes` (`--recv-window`).
    pub fn with_receive_window(mut self, bytes: u64) -> Self {
        self.receive_window = bytes;
        self.stream_receive_window = bytes;
        self
    }

    /// Writes our flow-control and stream-count limits into the transport
    /// parameters we send (RFC 9000 §18.2). Values are clamped to what the
    /// wire can carry.
    pub fn apply_to(&self, params: &mut TransportParameters) {
        let max_offset = wire::frame::MAX_STREAM_OFFSET;
        params.initial_max_data = self.receive_window.min(max_offset);
        let stream = self.stream_receive_window.min(max_offset);
        params.initial_max_stream_data_bidi_local = stream;
        params.initial_max_stream_data_bidi_remote = stream;
        params.initial_max_stream_data_uni = stream;
        params.initial_max_streams_bidi = self.max_concurrent_bidi_streams.min(MAX_STREAM_COUNT);
        params.initial_max_streams_uni = self.max_concurrent_uni_streams.min(MAX_STREAM_COUNT);
    }
}

/// What a STREAM frame carried: enough to find its bytes again in the send
/// buffer. Stored in sent-packet records, so it is kept small (24 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StreamChunk {
    /// The stream.
    pub id: StreamId,
    /// Offset of the first byte.
    pub offset: u64,
    /// Number of bytes (may be 0 for a bare FIN).
    pub len: u32,
    /// The frame carried the FIN bit.
    pub fin: bool,
}

impl StreamChunk {
    /// Offset just past the chunk's last byte.
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.len))
    }
}

/// A change the application should know about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamEvent {
    /// The peer opened one or more streams: call [`Streams::accept`].
    Opened {
        /// Which kind.
        dir: Dir,
    },
    /// In-order data (or the end of the stream) can be read.
    Readable {
        /// The stream.
        id: StreamId,
    },
    /// A write that fell short can now make progress.
    Writable {
        /// The stream.
        id: StreamId,
    },
    /// All our data and the FIN were acknowledged.
    Finished {
        /// The stream.
        id: StreamId,
    },
    /// The peer sent STOP_SENDING; we reset the stream with its code.
    Stopped {
        /// The stream.
        id: StreamId,
        /// The peer's application error code.
        error_code: u64,
    },
    /// The peer reset its sending half; `read` returns [`ReadError::Reset`].
    Reset {
        /// The stream.
        id: StreamId,
        /// The peer's application error code.
        error_code: u64,
    },
    /// The peer raised MAX_STREAMS after [`Streams::open`] returned `None`:
    /// opening may succeed now.
    Available {
        /// Which kind.
        dir: Dir,
    },
}

/// Why [`Streams::write`], [`Streams::finish`] or [`Streams::reset`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// No send-buffer room now; a `Writable` event follows when there is.
    #[error("send buffer full")]
    Blocked,
    /// No such stream, or it has no sending half (peer's unidirectional).
    #[error("unknown stream")]
    UnknownStream,
    /// The peer asked us to stop (STOP_SENDING) with this code.
    #[error("stopped by peer with code {0}")]
    Stopped(u64),
    /// Already finished or reset.
    #[error("stream closed")]
    Closed,
}

/// Why [`Streams::read`] or [`Streams::stop_sending`] failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// Nothing to read now; a `Readable` event follows when there is.
    #[error("no data available")]
    Blocked,
    /// No such stream, it has no receiving half, or reading was stopped.
    #[error("unknown stream")]
    UnknownStream,
    /// The peer reset the stream with this code.
    #[error("reset by peer with code {0}")]
    Reset(u64),
}

/// One stream: a sending half, a receiving half, or both (RFC 9000 §2.1).
#[derive(Clone, Debug)]
struct Stream {
    send: Option<SendStream>,
    recv: Option<RecvStream>,
}

impl Stream {
    /// Both halves are over: the stream can be forgotten (RFC 9000 §3.3).
    fn is_done(&self) -> bool {
        self.send.as_ref().is_none_or(SendStream::is_done)
            && self.recv.as_ref().is_none_or(RecvStream::is_done)
    }
}

/// Index of a direction in per-direction arrays.
fn di(dir: Dir) -> usize {
    match dir {
        Dir::Bi => 0,
        Dir::Uni => 1,
    }
}

/// Every stream of a connection, with connection-level flow control.
#[derive(Debug)]
pub struct Streams {
    /// Our role: decides which stream IDs are ours.
    side: Side,
    /// Our limits.
    config: StreamsConfig,
    /// Open streams. Closed ones are removed; IDs below the `next_*` counters
    /// that are absent are closed, and frames for them are ignored.
    streams: BTreeMap<StreamId, Stream>,
    /// Streams we opened, per direction (the next index).
    next_local: [u64; 2],
    /// The peer's MAX_STREAMS for streams we open.
    max_local: [u64; 2],
    /// `open` returned `None` since the limit last grew.
    open_refused: [bool; 2],
    /// STREAMS_BLOCKED was queued at this limit.
    streams_blocked_reported: [Option<u64>; 2],
    /// Streams the peer opened (the next index).
    next_remote: [u64; 2],
    /// Our MAX_STREAMS for the peer.
    max_remote: [u64; 2],
    /// Next peer stream to hand to `accept`.
    next_accept: [u64; 2],
    /// The peer's initial per-stream limits: [our bidi, peer's bidi, uni]
    /// (its initial_max_stream_data_bidi_remote, _bidi_local, _uni).
    peer_stream_limits: [u64; 3],
    /// Connection-level send credit (peer's MAX_DATA).
    send_credit: SendCredit,
    /// Connection-level receive window (our MAX_DATA).
    recv_window: RecvWindow,
    /// Streams with lost data or a FIN to send (needs no credit); sent first.
    urgent: BTreeSet<StreamId>,
    /// Streams with new data that stream flow control allows.
    ready: BTreeSet<StreamId>,
    /// Round-robin position among `ready` streams.
    rr_next: u64,
    /// Control frames waiting for room.
    control: BTreeSet<Pending>,
    /// Events for the application.
    events: VecDeque<StreamEvent>,
    /// Bytes held for sending, over all streams.
    send_totals: SendTotals,
    /// Streams whose last write fell short: `Writable` once room opens.
    blocked_writers: BTreeSet<StreamId>,
    /// A write fell short for [`StreamsConfig::unsent_limit`]: sending
    /// wakes the writers once half the limit is left.
    unsent_waiters: bool,
    /// Pieces received data is stored in, over all streams.
    recv_pieces: u64,
}

impl Streams {
    /// No streams yet; we advertise `config`'s limits. Until
    /// [`Streams::set_peer_params`] the peer allows us nothing.
    pub fn new(side: Side, config: StreamsConfig) -> Self {
        let recv_window = RecvWindow::new(config.receive_window);
        let max_remote = [
            config.max_concurrent_bidi_streams.min(MAX_STREAM_COUNT),
            config.max_concurrent_uni_streams.min(MAX_STREAM_COUNT),
        ];
        Streams {
            side,
            config,
            streams: BTreeMap::new(),
            next_local: [0; 2],
            max_local: [0; 2],
            open_refused: [false; 2],
            streams_blocked_reported: [None; 2],
            next_remote: [0; 2],
            max_remote,
            next_accept: [0; 2],
            peer_stream_limits: [0; 3],
            send_credit: SendCredit::default(),
            recv_window,
            urgent: BTreeSet::new(),
            ready: BTreeSet::new(),
            rr_next: 0,
            control: BTreeSet::new(),
            events: VecDeque::new(),
            send_totals: SendTotals::default(),
            blocked_writers: BTreeSet::new(),
            unsent_waiters: false,
            recv_pieces: 0,
        }
    }

    /// Applies the peer's transport parameters: connection credit, per-stream
    /// credit (also for streams opened before they arrived) and stream counts.
    pub fn set_peer_params(&mut self, params: &TransportParameters) {
        self.send_credit.raise(params.initial_max_data);
        self.peer_stream_limits = [
            params.initial_max_stream_data_bidi_remote,
            params.initial_max_stream_data_bidi_local,
            params.initial_max_stream_data_uni,
        ];
        self.raise_max_local(Dir::Bi, params.initial_max_streams_bidi);
        self.raise_max_local(Dir::Uni, params.initial_max_streams_uni);
        let ids: Vec<StreamId> = self.streams.keys().copied().collect();
        for id in ids {
            let limit = self.initial_send_limit(id);
            self.with_send(id, |send| send.max_data = send.max_data.max(limit));
            self.schedule(id);
        }
        self.wake_writers();
    }

    /// Next event for the application.
    pub fn poll_event(&mut self) -> Option<StreamEvent> {
        self.events.pop_front()
    }

    /// Whether events wait for [`Streams::poll_event`].
    pub fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    /// Asks for a `Writable` event on `id` once it has room (at once if it
    /// has some now): for an application that found
    /// [`Streams::write_room`] at 0 and wrote nothing, so that it need not
    /// try again until then.
    pub fn notify_writable(&mut self, id: StreamId) {
        self.blocked_writers.insert(id);
        if let Some(send) = self.streams.get(&id).and_then(|s| s.send.as_ref()) {
            self.note_short_write(self.room(send));
        }
        self.wake_writers();
    }

    /// Unacknowledged bytes buffered on a stream's sending half.
    pub fn send_buffered(&self, id: StreamId) -> Option<u64> {
        self.streams
            .get(&id)?
            .send
            .as_ref()
            .map(SendStream::buffered)
    }

    /// Bytes held in a stream's receive buffer (received, not yet read;
    /// holes cost nothing): never more than its receive window.
    pub fn recv_buffered(&self, id: StreamId) -> Option<u64> {
        self.streams
            .get(&id)?
            .recv
            .as_ref()
            .map(RecvStream::buffered)
    }

    /// Unacknowledged bytes buffered for sending over all streams: at most
    /// [`StreamsConfig::connection_send_buffer`].
    pub fn send_buffered_total(&self) -> u64 {
        self.send_totals.buffered
    }

    /// Pieces received stream data is stored in over all streams: at most
    /// [`StreamsConfig::max_receive_pieces`].
    pub fn recv_pieces(&self) -> u64 {
        self.recv_pieces
    }

    /// Anything to send: lost data, a FIN, new data within flow control, or
    /// a control frame. (A `true` does not promise it fits the room left.)
    pub fn has_pending(&self) -> bool {
        !self.control.is_empty()
            || !self.urgent.is_empty()
            || (!self.ready.is_empty() && self.send_credit.available() > 0)
    }

    /// Number of streams currently tracked (open or not yet fully closed).
    pub fn open_streams(&self) -> usize {
        self.streams.len()
    }

    /// Our own send credit left at connection level (for diagnostics).
    pub fn send_credit(&self) -> u64 {
        self.send_credit.available()
    }

    /// True if `id` was opened by us.
    fn is_local(&self, id: StreamId) -> bool {
        id.initiator() == self.side
    }

    /// The peer's initial sending limit for a stream of `id`'s kind.
    fn initial_send_limit(&self, id: StreamId) -> u64 {
        match (id.dir(), self.is_local(id)) {
            (Dir::Bi, true) => self.peer_stream_limits[0],
            (Dir::Bi, false) => self.peer_stream_limits[1],
            (Dir::Uni, _) => self.peer_stream_limits[2],
        }
    }

    /// A new stream's state with the halves its kind has.
    fn new_stream(&self, id: StreamId) -> Stream {
        let local = self.is_local(id);
        let has_send = id.dir() == Dir::Bi || local;
        let has_recv = id.dir() == Dir::Bi || !local;
        Stream {
            send: has_send.then(|| SendStream::new(self.initial_send_limit(id))),
            recv: has_recv.then(|| RecvStream::new(self.config.stream_receive_window)),
        }
    }

    /// The peer raised MAX_STREAMS (frame or transport parameter).
    fn raise_max_local(&mut self, dir: Dir, count: u64) {
        let d = di(dir);
        let count = count.min(MAX_STREAM_COUNT);
        if count > self.max_local[d] {
            self.max_local[d] = count;
            if std::mem::take(&mut self.open_refused[d]) {
                self.events.push_back(StreamEvent::Available { dir });
            }
        }
    }

    /// Brings `id`'s membership of the send queues up to date, and queues
    /// STREAM_DATA_BLOCKED / DATA_BLOCKED when new data waits on a limit.
    fn schedule(&mut self, id: StreamId) {
        let (urgent, ready, blocked) = match self.streams.get_mut(&id).and_then(|s| s.send.as_mut())
        {
            Some(s) => {
                let blocked = s.blocked_at().filter(|&l| s.blocked_reported != Some(l));
                if blocked.is_some() {
                    s.blocked_reported = blocked;
                }
                (s.wants_urgent(), s.wants_new(), blocked.is_some())
            }
            None => (false, false, false),
        };
        set_member(&mut self.urgent, id, urgent);
        set_member(&mut self.ready, id, ready);
        if blocked {
            // RFC 9000 §4.1: tell the peer we are blocked at this stream limit.
            self.control.insert(Pending::StreamDataBlocked(id));
        }
        if ready {
            self.check_conn_blocked();
        }
    }

    /// RFC 9000 §4.1: DATA_BLOCKED once per limit when new data waits on it.
    fn check_conn_blocked(&mut self) {
        let c = &mut self.send_credit;
        if c.available() == 0 && !self.ready.is_empty() && c.blocked_reported != Some(c.max) {
            c.blocked_reported = Some(c.max);
            self.control.insert(Pending::DataBlocked);
        }
    }

    /// Connection credit given back (data read or discarded); queues MAX_DATA
    /// when the unconsumed credit fell to half the window.
    fn release_conn(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        self.recv_window.release(n);
        if self.recv_window.poll_update().is_some() {
            self.control.insert(Pending::MaxData);
        }
    }

    /// Forgets `id` if both halves are over (RFC 9000 §3.3); a closed peer
    /// stream lets the peer open one more (MAX_STREAMS, RFC 9000 §4.6).
    fn maybe_forget(&mut self, id: StreamId) {
        if !self.streams.get(&id).is_some_and(Stream::is_done) {
            return;
        }
        if let Some(stream) = self.streams.remove(&id) {
            // Done halves hold nothing; keep the totals exact regardless.
            if let Some(send) = &stream.send {
                self.send_totals
                    .update(SendTotals::of(send), SendTotals::default());
            }
            if let Some(recv) = &stream.recv {
                self.recv_pieces = self.recv_pieces.saturating_sub(recv.pieces() as u64);
            }
        }
        self.blocked_writers.remove(&id);
        self.urgent.remove(&id);
        self.ready.remove(&id);
        if !self.is_local(id) {
            let d = di(id.dir());
            if self.max_remote[d] < MAX_STREAM_COUNT {
                self.max_remote[d] += 1;
                self.control.insert(Pending::MaxStreams(id.dir()));
            }
        }
    }
}

/// Adds or removes `id` so that membership equals `member`.
fn set_member(set: &mut BTreeSet<StreamId>, id: StreamId, member: bool) {
    if member {
        set.insert(id);
    } else {
        set.remove(&id);
    }
}
