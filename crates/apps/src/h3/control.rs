//! The connection-level half of HTTP/3, shared by client and server: our
//! control stream (SETTINGS, GOAWAY) and every unidirectional stream the
//! peer opens (RFC 9114 §6.2): its control stream, its QPACK encoder and
//! decoder streams, push streams (refused) and unknown types (ignored).

use std::collections::BTreeMap;

use transport::Connection;
use wire::coding::decode_varint;
use wire::{Dir, Side, StreamId};

use super::error::{
    H3Error, H3_CLOSED_CRITICAL_STREAM, H3_EXCESSIVE_LOAD, H3_FRAME_UNEXPECTED, H3_ID_ERROR,
    H3_MISSING_SETTINGS, H3_STREAM_CREATION_ERROR,
};
use super::frame::{self, Settings, StreamKind};
use super::qpack::streams::{DecoderStreamChecker, EncoderStreamChecker};
use super::reader::{ByteSource, ConnStream, FrameCursor, Step};
use super::writer::SendState;
use super::MAX_CONTROL_FRAME;
use crate::http::MAX_FIELD_SECTION;

/// Unidirectional stream types (RFC 9114 §6.2, RFC 9204 §4.2).
pub const STREAM_CONTROL: u64 = 0x00;
/// A push stream: server to client only.
pub const STREAM_PUSH: u64 = 0x01;
/// The QPACK encoder stream.
pub const STREAM_QPACK_ENCODER: u64 = 0x02;
/// The QPACK decoder stream.
pub const STREAM_QPACK_DECODER: u64 = 0x03;

/// A reserved setting identifier (`0x1f * 7 + 0x21`) we send with value 0,
/// as RFC 9114 §7.2.4.1 asks ("Endpoints SHOULD include at least one such
/// setting"), so peers that choke on unknown settings show up early.
pub const GREASE_SETTING: u64 = 0x1f * 7 + 0x21;

/// The settings we send: a field-section limit and no dynamic table.
pub fn our_settings() -> Settings {
    Settings {
        max_field_section_size: Some(MAX_FIELD_SECTION),
        qpack_max_table_capacity: Some(0),
        qpack_blocked_streams: Some(0),
    }
}

/// What the peer told us on its control stream.
#[derive(Clone, Debug)]
pub struct PeerControl {
    /// Our role: GOAWAY and MAX_PUSH_ID mean different things to each.
    our_side: Side,
    /// Its SETTINGS, once received (always the first frame).
    pub settings: Option<Settings>,
    /// The smallest GOAWAY ID it sent (a client-initiated bidirectional
    /// stream ID when the peer is a server, a push ID otherwise).
    pub goaway: Option<u64>,
    /// The largest MAX_PUSH_ID a client peer sent (we never push).
    pub max_push_id: Option<u64>,
}

impl PeerControl {
    /// Nothing received yet.
    pub fn new(our_side: Side) -> PeerControl {
        PeerControl {
            our_side,
            settings: None,
            goaway: None,
            max_push_id: None,
        }
    }

    /// Reads the peer's control stream until it blocks. Its end (FIN or
    /// reset) is H3_CLOSED_CRITICAL_STREAM.
    pub fn read(
        &mut self,
        cursor: &mut FrameCursor,
        src: &mut impl ByteSource,
    ) -> Result<(), H3Error> {
        loop {
            match cursor.step(src)? {
                Step::Header(h) => {
                    if self.settings.is_none() && h.ty != frame::SETTINGS {
                        return Err(H3Error::new(
                            H3_MISSING_SETTINGS,
                            "first frame on the control stream is not SETTINGS",
                        ));
                    }
                    frame::check_allowed(h.ty, StreamKind::Control)?;
                    match h.ty {
                        frame::PUSH_PROMISE => {
                            return Err(H3Error::unexpected("PUSH_PROMISE on the control stream"))
                        }
                        frame::SETTINGS if self.settings.is_some() => {
                            return Err(H3Error::unexpected("second SETTINGS frame"))
                        }
                        frame::SETTINGS if h.len > MAX_CONTROL_FRAME => {
                            return Err(H3Error::new(H3_EXCESSIVE_LOAD, "SETTINGS frame too large"))
                        }
                        frame::SETTINGS => cursor.collect(h),
                        frame::GOAWAY | frame::MAX_PUSH_ID | frame::CANCEL_PUSH if h.len > 8 => {
                            return Err(H3Error::frame("frame longer than its one varint"))
                        }
                        frame::GOAWAY | frame::MAX_PUSH_ID | frame::CANCEL_PUSH => {
                            cursor.collect(h)
                        }
                        _ => cursor.skip(h),
                    }
                }
                Step::Frame { ty, payload } => self.on_frame(ty, &payload)?,
                Step::Blocked => return Ok(()),
                Step::Fin | Step::Reset(_) | Step::Gone => {
                    return Err(H3Error::new(
                        H3_CLOSED_CRITICAL_STREAM,
                        "the peer closed its control stream",
                    ))
                }
            }
        }
    }

    /// A whole control frame.
    fn on_frame(&mut self, ty: u64, payload: &[u8]) -> Result<(), H3Error> {
        match ty {
            frame::SETTINGS => self.settings = Some(Settings::decode(payload)?),
            frame::GOAWAY => {
                let id = frame::parse_single_varint(payload)?;
                // RFC 9114 §5.2: a server's GOAWAY carries a client-initiated
                // bidirectional stream ID, and IDs never grow.
                if self.our_side == Side::Client && id % 4 != 0 {
                    return Err(H3Error::new(
                        H3_ID_ERROR,
                        "GOAWAY with a non-request stream ID",
                    ));
                }
                if self.goaway.is_some_and(|previous| id > previous) {
                    return Err(H3Error::new(
                        H3_ID_ERROR,
                        "GOAWAY ID larger than a previous one",
                    ));
                }
                self.goaway = Some(id);
            }
            frame::MAX_PUSH_ID => {
                if self.our_side == Side::Client {
                    return Err(H3Error::new(
                        H3_FRAME_UNEXPECTED,
                        "MAX_PUSH_ID from a server",
                    ));
                }
                let id = frame::parse_single_varint(payload)?;
                if self.max_push_id.is_some_and(|previous| id < previous) {
                    return Err(H3Error::new(H3_ID_ERROR, "MAX_PUSH_ID decreased"));
                }
                self.max_push_id = Some(id);
            }
            frame::CANCEL_PUSH => {
                frame::parse_single_varint(payload)?;
                // We never promise a push (server) and never allow one
                // (client: no MAX_PUSH_ID sent), so every push ID is unknown.
                return Err(H3Error::new(
                    H3_ID_ERROR,
                    "CANCEL_PUSH for a push that cannot exist",
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

/// A peer's unidirectional stream, by what its type byte said.
#[derive(Clone, Debug)]
enum UniStream {
    /// The type varint is not complete yet.
    Typing { buf: [u8; 8], filled: usize },
    /// Its control stream.
    Control(FrameCursor),
    /// Its QPACK encoder stream.
    Encoder(EncoderStreamChecker),
    /// Its QPACK decoder stream.
    Decoder(DecoderStreamChecker),
}

/// What to do with a unidirectional stream after reading it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UniOutcome {
    /// Keep it: more may come.
    Keep,
    /// An unknown or reserved type: stop reading it with
    /// H3_STREAM_CREATION_ERROR and forget it (RFC 9114 §6.2).
    Refuse,
}

/// The connection-level state of a session.
#[derive(Debug)]
pub struct Control {
    side: Side,
    /// `on_connected` was called: our control stream is wanted.
    started: bool,
    /// Our control stream, once `open` succeeded.
    ours: Option<StreamId>,
    /// Its pending frames (type byte, SETTINGS, GOAWAY).
    ours_send: SendState,
    /// What the peer's control stream said.
    pub peer: PeerControl,
    /// The peer's unidirectional streams we still read.
    uni: BTreeMap<StreamId, UniStream>,
    /// Which critical stream types the peer already opened (a second one
    /// is H3_STREAM_CREATION_ERROR, RFC 9114 §6.2.1, RFC 9204 §4.2).
    seen_control: bool,
    seen_encoder: bool,
    seen_decoder: bool,
}

impl Control {
    /// The state of a session on `side` before the handshake completes.
    pub fn new(side: Side) -> Control {
        Control {
            side,
            started: false,
            ours: None,
            ours_send: SendState::default(),
            peer: PeerControl::new(side),
            uni: BTreeMap::new(),
            seen_control: false,
            seen_encoder: false,
            seen_decoder: false,
        }
    }

    /// Queues our control stream's type and SETTINGS; the stream opens on
    /// the next [`Control::poll`] the peer's MAX_STREAMS allows.
    pub fn start(&mut self) {
        if self.started {
            return;
        }
        self.started = true;
        let mut bytes = vec![STREAM_CONTROL as u8];
        let mut payload = Vec::new();
        our_settings().encode(&mut payload);
        wire::BufMutExt::put_varint(&mut payload, GREASE_SETTING);
        wire::BufMutExt::put_varint(&mut payload, 0);
        frame::write_frame(&mut bytes, frame::SETTINGS, &payload);
        self.ours_send.queue(&bytes);
    }

    /// What our control stream would send now (tests).
    #[cfg(test)]
    fn ours_send_bytes(&self) -> Vec<u8> {
        self.ours_send.pending_bytes().to_vec()
    }

    /// Queues GOAWAY with `id` after SETTINGS.
    pub fn queue_goaway(&mut self, id: u64) {
        let mut payload = Vec::new();
        wire::BufMutExt::put_varint(&mut payload, id);
        let mut bytes = Vec::new();
        frame::write_frame(&mut bytes, frame::GOAWAY, &payload);
        self.ours_send.queue(&bytes);
    }

    /// Opens our control stream if it is wanted and the peer's MAX_STREAMS
    /// allows, and writes what it owes. The peer stopping it is
    /// H3_CLOSED_CRITICAL_STREAM.
    pub fn flush_ours(&mut self, conn: &mut Connection) -> Result<(), H3Error> {
        if self.started && self.ours.is_none() {
            self.ours = conn.streams().open(Dir::Uni);
        }
        if let Some(id) = self.ours {
            self.ours_send.flush(conn, id).map_err(|_| {
                H3Error::new(H3_CLOSED_CRITICAL_STREAM, "our control stream was stopped")
            })?;
        }
        Ok(())
    }

    /// Opens and flushes our control stream, accepts the peer's new
    /// unidirectional streams and reads all of them. An `Err` is a
    /// connection error.
    pub fn poll(&mut self, conn: &mut Connection) -> Result<(), H3Error> {
        self.flush_ours(conn)?;
        while let Some(id) = conn.streams().accept(Dir::Uni) {
            self.uni.insert(
                id,
                UniStream::Typing {
                    buf: [0; 8],
                    filled: 0,
                },
            );
        }
        let ids: Vec<StreamId> = self.uni.keys().copied().collect();
        for id in ids {
            let outcome = self.read_uni(id, &mut ConnStream { conn, id })?;
            if outcome == UniOutcome::Refuse {
                // The stream may already be gone; nothing to undo then.
                let _ = conn.streams().stop_sending(id, H3_STREAM_CREATION_ERROR);
            }
        }
        Ok(())
    }

    /// Reads one of the peer's unidirectional streams from `src`,
    /// registering it first if it is new (the fuzz body feeds byte slices
    /// here).
    pub fn read_uni(
        &mut self,
        id: StreamId,
        src: &mut impl ByteSource,
    ) -> Result<UniOutcome, H3Error> {
        let mut stream = self.uni.remove(&id).unwrap_or(UniStream::Typing {
            buf: [0; 8],
            filled: 0,
        });
        let outcome = self.read_uni_stream(&mut stream, src);
        if matches!(outcome, Ok(UniOutcome::Keep)) {
            self.uni.insert(id, stream);
        }
        outcome
    }

    fn read_uni_stream(
        &mut self,
        stream: &mut UniStream,
        src: &mut impl ByteSource,
    ) -> Result<UniOutcome, H3Error> {
        loop {
            match stream {
                UniStream::Typing { buf, filled } => {
                    // One byte, then the rest of the varint it announces.
                    let need = match buf.first() {
                        Some(&b) if *filled > 0 => 1usize << (b >> 6),
                        _ => 1,
                    };
                    if *filled < need {
                        match src.read(buf.get_mut(*filled..need).unwrap_or_default()) {
                            Ok(Some(n)) => *filled += n,
                            Err(transport::streams::ReadError::Blocked) => {
                                return Ok(UniOutcome::Keep)
                            }
                            // A stream that ends or is reset before its
                            // type is known is simply forgotten.
                            Ok(None) | Err(_) => return Ok(UniOutcome::Refuse),
                        }
                        continue;
                    }
                    let Ok((ty, _)) = decode_varint(buf.get(..*filled).unwrap_or_default()) else {
                        return Ok(UniOutcome::Keep);
                    };
                    match self.open_typed(ty)? {
                        Some(typed) => *stream = typed,
                        None => return Ok(UniOutcome::Refuse),
                    }
                }
                UniStream::Control(cursor) => {
                    self.peer.read(cursor, src)?;
                    return Ok(UniOutcome::Keep);
                }
                UniStream::Encoder(checker) => return read_qpack_stream(src, |b| checker.feed(b)),
                UniStream::Decoder(checker) => return read_qpack_stream(src, |b| checker.feed(b)),
            }
        }
    }

    /// The state for a stream of type `ty`; `None` for a type we do not
    /// know (reserved ones included), which is refused.
    fn open_typed(&mut self, ty: u64) -> Result<Option<UniStream>, H3Error> {
        let second = |seen: &mut bool, what: &'static str| {
            if std::mem::replace(seen, true) {
                Err(H3Error::new(H3_STREAM_CREATION_ERROR, what))
            } else {
                Ok(())
            }
        };
        match ty {
            STREAM_CONTROL => {
                second(&mut self.seen_control, "second control stream")?;
                Ok(Some(UniStream::Control(FrameCursor::default())))
            }
            STREAM_QPACK_ENCODER => {
                second(&mut self.seen_encoder, "second QPACK encoder stream")?;
                Ok(Some(UniStream::Encoder(EncoderStreamChecker::default())))
            }
            STREAM_QPACK_DECODER => {
                second(&mut self.seen_decoder, "second QPACK decoder stream")?;
                Ok(Some(UniStream::Decoder(DecoderStreamChecker::default())))
            }
            STREAM_PUSH if self.side == Side::Server => Err(H3Error::new(
                H3_STREAM_CREATION_ERROR,
                "push stream from a client",
            )),
            // We never sent MAX_PUSH_ID, so any push ID exceeds our limit
            // (RFC 9114 §4.6).
            STREAM_PUSH => Err(H3Error::new(H3_ID_ERROR, "push stream without MAX_PUSH_ID")),
            _ => Ok(None),
        }
    }
}

/// Reads a QPACK encoder or decoder stream into its checker until it
/// blocks; its end is H3_CLOSED_CRITICAL_STREAM (RFC 9204 §4.2).
fn read_qpack_stream(
    src: &mut impl ByteSource,
    mut feed: impl FnMut(&[u8]) -> Result<(), H3Error>,
) -> Result<UniOutcome, H3Error> {
    let mut buf = [0u8; 256];
    loop {
        match src.read(&mut buf) {
            Ok(Some(n)) => feed(buf.get(..n).unwrap_or_default())?,
            Err(transport::streams::ReadError::Blocked) => return Ok(UniOutcome::Keep),
            Ok(None) | Err(_) => {
                return Err(H3Error::new(
                    H3_CLOSED_CRITICAL_STREAM,
                    "the peer closed a QPACK stream",
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::error::is_reserved_code_point;

    #[test]
    fn grease_setting_is_reserved_and_ignored() {
        assert!(is_reserved_code_point(GREASE_SETTING));
        let mut control = Control::new(Side::Client);
        control.start();
        let mut peer = Control::new(Side::Server);
        let id = StreamId::new(Side::Client, Dir::Uni, 0);
        let bytes = control.ours_send_bytes();
        let outcome = peer.read_uni(id, &mut crate::h3::reader::SliceSource::new(&bytes, false));
        assert_eq!(outcome, Ok(UniOutcome::Keep));
        assert_eq!(peer.peer.settings, Some(our_settings()));
    }
}
