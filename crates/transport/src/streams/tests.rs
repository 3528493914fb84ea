//! Tests of [`Streams`] through its public API: peer-frame validation, flow
//! control at both levels, the send path, and an end-to-end model where
//! packets are lost, reordered and replicated between two `Streams`.

use proptest::prelude::*;
use wire::frame::Frame;
use wire::transport_params::TransportParameters;
use wire::{Dir, FrameIter, Side, StreamId, TransportErrorCode as Code};

use super::*;
use crate::TransportError;

mod limits;

fn config(conn: u64, stream: u64, send_buffer: u64, streams: u64) -> StreamsConfig {
    StreamsConfig {
        receive_window: conn,
        stream_receive_window: stream,
        send_buffer,
        max_concurrent_bidi_streams: streams,
        max_concurrent_uni_streams: streams,
        ..StreamsConfig::default()
    }
}

/// A client and a server that exchanged transport parameters.
fn pair(client: StreamsConfig, server: StreamsConfig) -> (Streams, Streams) {
    let (mut cp, mut sp) = (
        TransportParameters::default(),
        TransportParameters::default(),
    );
    client.apply_to(&mut cp);
    server.apply_to(&mut sp);
    let mut c = Streams::new(Side::Client, client);
    let mut s = Streams::new(Side::Server, server);
    c.set_peer_params(&sp);
    s.set_peer_params(&cp);
    (c, s)
}

fn server(conn: u64, stream: u64, streams: u64) -> Streams {
    pair(
        StreamsConfig::default(),
        config(conn, stream, 1 << 20, streams),
    )
    .1
}

fn code(r: Result<(), TransportError>) -> Code {
    r.expect_err("expected a connection error").code
}

fn events(s: &mut Streams) -> Vec<StreamEvent> {
    std::iter::from_fn(|| s.poll_event()).collect()
}

/// All pending control frames, decoded.
fn controls(s: &mut Streams) -> Vec<ControlFrame> {
    let mut out = Vec::new();
    std::iter::from_fn(|| s.poll_control(1000, &mut out)).collect()
}

/// Delivers every frame of `bytes` to `s`.
fn deliver(s: &mut Streams, bytes: &[u8]) -> Result<(), TransportError> {
    for frame in FrameIter::new(bytes) {
        match frame.expect("our own encoding decodes") {
            Frame::Stream {
                id,
                offset,
                fin,
                data,
            } => s.on_stream_frame(id, offset, data, fin)?,
            Frame::ResetStream {
                id,
                error_code,
                final_size,
            } => s.on_reset_stream(id, error_code, final_size)?,
            Frame::StopSending { id, error_code } => s.on_stop_sending(id, error_code)?,
            Frame::MaxData(max) => s.on_max_data(max),
            Frame::MaxStreamData { id, max } => s.on_max_stream_data(id, max)?,
            Frame::MaxStreams { dir, count } => s.on_max_streams(dir, count)?,
            Frame::StreamDataBlocked { id, limit } => s.on_stream_data_blocked(id, limit)?,
            Frame::DataBlocked { .. } | Frame::StreamsBlocked { .. } => {}
            other => panic!("unexpected frame {other:?}"),
        }
    }
    Ok(())
}

const C0: StreamId = StreamId(0); // client bidi 0
const C_UNI0: StreamId = StreamId(2); // client uni 0
const S0: StreamId = StreamId(1); // server bidi 0
const S_UNI0: StreamId = StreamId(3); // server uni 0

#[test]
fn stream_window_violation_is_flow_control_error() {
    let mut s = server(10_000, 100, 10);
    assert_eq!(s.on_stream_frame(C0, 0, &[0; 100], false), Ok(()));
    assert_eq!(
        code(s.on_stream_frame(C0, 100, &[0; 1], false)),
        Code::FLOW_CONTROL_ERROR
    );
    assert_eq!(
        code(s.on_reset_stream(C0, 0, 101)),
        Code::FLOW_CONTROL_ERROR
    );
    assert_eq!(
        code(s.on_stream_frame(C0, (1 << 62) - 1, &[0; 1], false)),
        Code::FLOW_CONTROL_ERROR
    );
    assert_eq!(
        code(s.on_stream_frame(C0, u64::MAX, &[0; 1], false)),
        Code::FLOW_CONTROL_ERROR
    );
}

#[test]
fn connection_window_really_bounds_the_peer() {
    let mut s = server(1000, 2000, 10);
    s.on_stream_frame(C0, 0, &[1; 600], false).unwrap();
    s.on_stream_frame(StreamId(4), 0, &[2; 400], false).unwrap();
    assert_eq!(
        controls(&mut s),
        vec![],
        "no credit before the application reads"
    );
    // Window + 1 bytes without reads.
    assert_eq!(
        code(s.on_stream_frame(StreamId(8), 0, &[3; 1], false)),
        Code::FLOW_CONTROL_ERROR
    );
    assert_eq!(
        code(s.on_reset_stream(StreamId(8), 0, 1)),
        Code::FLOW_CONTROL_ERROR
    );
    // Retransmitted (already counted) bytes are fine.
    s.on_stream_frame(C0, 0, &[1; 600], false).unwrap();
    assert_eq!(s.recv_buffered(C0), Some(600));

    let mut buf = [0u8; 499];
    assert_eq!(s.read(C0, &mut buf), Ok(Some(499)));
    assert_eq!(
        controls(&mut s),
        vec![],
        "501 unread credit is still above half"
    );
    assert_eq!(s.read(C0, &mut buf[..1]), Ok(Some(1)));
    assert_eq!(controls(&mut s), vec![ControlFrame::MaxData(1500)]);
    assert_eq!(s.on_stream_frame(StreamId(8), 0, &[3; 500], false), Ok(()));
    assert_eq!(
        code(s.on_stream_frame(StreamId(8), 500, &[3; 1], false)),
        Code::FLOW_CONTROL_ERROR
    );
}

#[test]
fn peer_stream_limit_and_implicit_open() {
    let mut s = server(1 << 20, 1 << 20, 3);
    assert_eq!(
        code(s.on_stream_frame(StreamId::new(Side::Client, Dir::Bi, 3), 0, b"x", false)),
        Code::STREAM_LIMIT_ERROR
    );
    assert_eq!(
        code(s.on_max_stream_data(StreamId::new(Side::Client, Dir::Bi, 3), 5)),
        Code::STREAM_LIMIT_ERROR
    );
    s.on_stream_frame(StreamId::new(Side::Client, Dir::Bi, 2), 0, b"x", false)
        .unwrap();
    assert_eq!(
        events(&mut s),
        vec![
            StreamEvent::Opened { dir: Dir::Bi },
            StreamEvent::Readable { id: StreamId(8) }
        ]
    );
    let accepted: Vec<_> = std::iter::from_fn(|| s.accept(Dir::Bi)).collect();
    assert_eq!(accepted, vec![StreamId(0), StreamId(4), StreamId(8)]);
    assert_eq!(s.accept(Dir::Uni), None);
    // Lower streams are open: frames for them are accepted and open nothing new.
    s.on_stream_frame(StreamId(4), 0, b"y", true).unwrap();
    assert!(!events(&mut s).contains(&StreamEvent::Opened { dir: Dir::Bi }));
}

#[test]
fn final_size_violations() {
    let mut s = server(1 << 20, 1 << 20, 10);
    s.on_stream_frame(C0, 0, b"hello", true).unwrap();
    assert_eq!(
        code(s.on_stream_frame(C0, 5, b"!", false)),
        Code::FINAL_SIZE_ERROR,
        "past the final size"
    );
    assert_eq!(
        code(s.on_stream_frame(C0, 0, b"hell", true)),
        Code::FINAL_SIZE_ERROR,
        "changed"
    );
    assert_eq!(
        code(s.on_reset_stream(C0, 1, 6)),
        Code::FINAL_SIZE_ERROR,
        "reset changes it"
    );
    s.on_stream_frame(C0, 0, b"hello", true).unwrap();
    s.on_stream_frame(StreamId(4), 0, b"0123456789", false)
        .unwrap();
    assert_eq!(
        code(s.on_stream_frame(StreamId(4), 0, b"01234", true)),
        Code::FINAL_SIZE_ERROR,
        "below received"
    );
    assert_eq!(
        code(s.on_reset_stream(StreamId(4), 1, 9)),
        Code::FINAL_SIZE_ERROR,
        "reset below received"
    );
}

#[test]
fn stream_state_errors() {
    let (mut c, _) = pair(StreamsConfig::default(), StreamsConfig::default());
    let uni = c.open(Dir::Uni).unwrap();
    assert_eq!(uni, C_UNI0);
    // Data on our own send-only stream, or on a stream we never opened.
    assert_eq!(
        code(c.on_stream_frame(uni, 0, b"x", false)),
        Code::STREAM_STATE_ERROR
    );
    assert_eq!(code(c.on_reset_stream(uni, 0, 0)), Code::STREAM_STATE_ERROR);
    assert_eq!(
        code(c.on_stream_data_blocked(uni, 0)),
        Code::STREAM_STATE_ERROR
    );
    assert_eq!(
        code(c.on_stream_frame(C0, 0, b"x", false)),
        Code::STREAM_STATE_ERROR
    );
    assert_eq!(code(c.on_stop_sending(C0, 0)), Code::STREAM_STATE_ERROR);
    assert_eq!(code(c.on_max_stream_data(C0, 10)), Code::STREAM_STATE_ERROR);
    // Send-side frames on the peer's receive-only (for us) stream.
    assert_eq!(
        code(c.on_max_stream_data(S_UNI0, 10)),
        Code::STREAM_STATE_ERROR
    );
    assert_eq!(code(c.on_stop_sending(S_UNI0, 1)), Code::STREAM_STATE_ERROR);
    // The peer's streams are fine.
    assert_eq!(c.on_stream_frame(S0, 0, b"x", false), Ok(()));
    assert_eq!(c.on_stream_frame(S_UNI0, 0, b"x", false), Ok(()));
    assert_eq!(
        code(c.on_max_streams(Dir::Bi, (1 << 60) + 1)),
        Code::FRAME_ENCODING_ERROR
    );
}

#[test]
fn send_path_respects_flow_control_and_frame_room() {
    // The server allows 3000 bytes per connection and 2000 per stream.
    let (mut c, _) = pair(StreamsConfig::default(), config(3000, 2000, 1 << 20, 10));
    let a = c.open(Dir::Bi).unwrap();
    let b = c.open(Dir::Bi).unwrap();
    assert_eq!(
        c.write(a, &[1; 5000]),
        Ok(5000),
        "buffering is not flow controlled"
    );
    assert_eq!(c.write(b, &[2; 5000]), Ok(5000));
    let mut sent = [0u64; 2];
    let mut out = Vec::new();
    while let Some(ch) = c.poll_chunk(700) {
        let before = out.len();
        assert!(c.write_chunk(&ch, &mut out));
        assert!(out.len() - before <= 700, "frame exceeds max_frame_len");
        assert!(ch.len > 0 && !ch.fin);
        sent[(ch.id.0 / 4) as usize] += u64::from(ch.len);
    }
    assert!(sent[0] <= 2000 && sent[1] <= 2000, "stream limit: {sent:?}");
    assert_eq!(sent[0] + sent[1], 3000, "connection limit");
    assert!(sent[0] >= 1000 && sent[1] >= 1000, "round robin: {sent:?}");
    // Blocked frames were queued once.
    let mut out = Vec::new();
    let blocked: Vec<_> = std::iter::from_fn(|| c.poll_control(100, &mut out)).collect();
    assert!(
        blocked.contains(&ControlFrame::DataBlocked { limit: 3000 }),
        "{blocked:?}"
    );
    assert!(!c.has_pending());
    assert_eq!(c.poll_chunk(1500), None);
    // Credit arrives: sending resumes up to the new stream limits.
    c.on_max_data(10_000);
    c.on_max_stream_data(a, 2500).unwrap();
    assert_eq!(
        c.poll_chunk(3),
        None,
        "too little room for a header and one byte"
    );
    let mut ends = [0u64; 2];
    while let Some(ch) = c.poll_chunk(1500) {
        assert!(c.write_chunk(&ch, &mut Vec::new()));
        ends[(ch.id.0 / 4) as usize] = ch.end();
    }
    assert_eq!(ends, [2500, 2000], "each stream up to its own limit");
}

#[test]
fn acked_data_is_freed_and_writable_follows() {
    let (mut c, _) = pair(
        StreamsConfig {
            send_buffer: 1000,
            ..Default::default()
        },
        StreamsConfig::default(),
    );
    let id = c.open(Dir::Uni).unwrap();
    assert_eq!(c.write(id, &[9; 1500]), Ok(1000));
    assert_eq!(c.write(id, &[9; 10]), Err(WriteError::Blocked));
    let c1 = c.poll_chunk(600).unwrap();
    let c2 = c.poll_chunk(600).unwrap();
    assert_eq!(c.send_buffered(id), Some(1000));
    c.on_chunk_acked(&c2);
    assert_eq!(c.send_buffered(id), Some(1000), "a hole keeps the prefix");
    assert_eq!(events(&mut c), vec![]);
    c.on_chunk_acked(&c1);
    assert_eq!(c.send_buffered(id), Some(1000 - u64::from(c1.len + c2.len)));
    assert_eq!(events(&mut c), vec![StreamEvent::Writable { id }]);
    c.on_chunk_acked(&c1); // idempotent
    assert!(
        !c.write_chunk(&c1, &mut Vec::new()),
        "freed data cannot be written"
    );
    assert_eq!(
        c.write(id, &[9; 2000]),
        Ok(u64::from(c1.len + c2.len) as usize)
    );
}

#[test]
fn lost_data_is_resent_before_new_data() {
    let (mut c, _) = pair(StreamsConfig::default(), StreamsConfig::default());
    let a = c.open(Dir::Bi).unwrap();
    let b = c.open(Dir::Bi).unwrap();
    c.write(a, &[1; 3000]).unwrap();
    let first = c.poll_chunk(1000).unwrap();
    c.write(b, &[2; 3000]).unwrap();
    let _second = c.poll_chunk(1000).unwrap();
    c.requeue_lost(&first);
    let again = c.poll_chunk(1000).unwrap();
    assert_eq!(
        again, first,
        "the lost range comes back first, before new data on any stream"
    );
    let next = c.poll_chunk(1000).unwrap();
    assert!(next.offset > 0, "then new data");
    // A lost chunk that got acked in the meantime is not resent.
    c.requeue_lost(&next);
    c.on_chunk_acked(&next);
    let after = c.poll_chunk(1000).unwrap();
    assert_ne!(after, next);
}

#[test]
fn unacked_parts_are_exactly_the_holes() {
    let (mut c, _) = pair(StreamsConfig::default(), StreamsConfig::default());
    let id = c.open(Dir::Bi).unwrap();
    c.write(id, &[5; 1000]).unwrap();
    c.finish(id).unwrap();
    let big = c.poll_chunk(2000).unwrap();
    assert_eq!((big.offset, big.len, big.fin), (0, 1000, true));
    let ack = |c: &mut Streams, offset, len| {
        c.on_chunk_acked(&StreamChunk {
            id,
            offset,
            len,
            fin: false,
        })
    };
    ack(&mut c, 0, 100);
    ack(&mut c, 300, 200);
    ack(&mut c, 900, 100);
    let mut parts = vec![StreamChunk {
        id: C0,
        offset: 7,
        len: 7,
        fin: false,
    }]; // cleared first
    c.unacked_parts(&big, &mut parts);
    let holes: Vec<_> = parts.iter().map(|p| (p.offset, p.len, p.fin)).collect();
    assert_eq!(
        holes,
        vec![(100, 200, false), (500, 400, false), (1000, 0, true)]
    );
    // Each part can be written again right now (replicas), with no queue change.
    let mut out = Vec::new();
    for p in &parts {
        assert!(c.write_chunk(p, &mut out));
    }
    assert!(!c.has_pending());
    for p in &parts {
        c.on_chunk_acked(p);
    }
    c.unacked_parts(&big, &mut parts);
    assert!(parts.is_empty());
    assert_eq!(events(&mut c), vec![StreamEvent::Finished { id }]);
}

/// `position` (for `LostData::position`): bytes in front of lost data
/// and the flow-control credit left.
#[test]
fn position_counts_bytes_in_front_and_credit_left() {
    let (mut c, _) = pair(StreamsConfig::default(), StreamsConfig::default());
    let id = c.open(Dir::Bi).unwrap();
    c.write(id, &[5; 3000]).unwrap();
    let a = c.poll_chunk(1000).unwrap();
    let b = c.poll_chunk(1000).unwrap();
    let credit = c.position(id, a.offset).unwrap().credit_left;
    assert!(credit > 0);
    // Nothing acknowledged: `a` is the head, `b` has a's bytes in front.
    assert_eq!(c.position(id, a.offset).unwrap().behind_head, 0);
    assert_eq!(
        c.position(id, b.offset).unwrap().behind_head,
        u64::from(a.len)
    );
    // `a` acknowledged: `b` is the head now.
    c.on_chunk_acked(&a);
    assert_eq!(c.position(id, b.offset).unwrap().behind_head, 0);
    // Sending more uses credit.
    let _ = c.poll_chunk(1000).unwrap();
    assert!(c.position(id, b.offset).unwrap().credit_left < credit);
    // A stream we never sent on has no position.
    assert_eq!(c.position(StreamId(400), 0), None);
}

#[test]
fn stop_sending_resets_with_the_peer_code() {
    let (mut c, mut s) = pair(StreamsConfig::default(), StreamsConfig::default());
    let id = c.open(Dir::Bi).unwrap();
    c.write(id, &[1; 5000]).unwrap();
    let ch = c.poll_chunk(1200).unwrap();
    let mut out = Vec::new();
    c.write_chunk(&ch, &mut out);
    deliver(&mut s, &out).unwrap();
    assert_eq!(s.accept(Dir::Bi), Some(id));
    s.stop_sending(id, 42).unwrap();
    assert_eq!(s.read(id, &mut [0; 10]), Err(ReadError::UnknownStream));
    let mut out = Vec::new();
    let sc = s.poll_control(100, &mut out).unwrap();
    assert_eq!(sc, ControlFrame::StopSending { id, error_code: 42 });
    deliver(&mut c, &out).unwrap();
    assert_eq!(
        events(&mut c),
        vec![StreamEvent::Stopped { id, error_code: 42 }]
    );
    assert_eq!(c.write(id, b"x"), Err(WriteError::Stopped(42)));
    assert_eq!(c.send_buffered(id), Some(0));
    assert!(!c.write_chunk(&ch, &mut Vec::new()));
    let mut out = Vec::new();
    let rc = c.poll_control(100, &mut out).unwrap();
    assert_eq!(
        rc,
        ControlFrame::ResetStream {
            id,
            error_code: 42,
            final_size: u64::from(ch.len)
        }
    );
    // Lost, it is sent again; acknowledged, the sending half is over.
    c.on_control_lost(rc);
    assert_eq!(c.poll_control(100, &mut out), Some(rc));
    deliver(&mut s, &out).unwrap();
    c.on_control_acked(rc);
    // The server's STOP_SENDING is not re-sent once the size is known.
    s.on_control_lost(sc);
    assert_eq!(s.poll_control(100, &mut Vec::new()), None);
}

#[test]
fn closed_streams_are_forgotten_and_replaced() {
    let (mut c, mut s) = pair(
        StreamsConfig::default(),
        config(1 << 20, 1 << 20, 1 << 20, 1),
    );
    let id = c.open(Dir::Uni).unwrap();
    assert_eq!(c.open(Dir::Uni), None, "the server allows one");
    c.write(id, b"hi").unwrap();
    c.finish(id).unwrap();
    let ch = c.poll_chunk(100).unwrap();
    let mut out = Vec::new();
    c.write_chunk(&ch, &mut out);
    deliver(&mut s, &out).unwrap();
    let mut buf = [0u8; 8];
    assert_eq!(s.read(id, &mut buf), Ok(Some(2)));
    assert_eq!(s.read(id, &mut buf), Ok(None));
    assert_eq!(s.open_streams(), 0);
    // Late duplicates for the forgotten stream are ignored.
    assert_eq!(deliver(&mut s, &out), Ok(()));
    assert_eq!(s.read(id, &mut buf), Err(ReadError::UnknownStream));
    let mut out = Vec::new();
    let frames: Vec<_> = std::iter::from_fn(|| s.poll_control(100, &mut out)).collect();
    assert_eq!(
        frames,
        vec![ControlFrame::MaxStreams {
            dir: Dir::Uni,
            count: 2
        }]
    );
    deliver(&mut c, &out).unwrap();
    let mut sb = Vec::new();
    let _ = c.poll_control(100, &mut sb); // the STREAMS_BLOCKED from earlier is stale now
    assert!(events(&mut c).contains(&StreamEvent::Available { dir: Dir::Uni }));
    assert_eq!(
        c.open(Dir::Uni),
        Some(StreamId::new(Side::Client, Dir::Uni, 1))
    );
    c.on_chunk_acked(&ch);
    assert_eq!(events(&mut c), vec![StreamEvent::Finished { id }]);
    assert_eq!(
        c.open_streams(),
        1,
        "the finished stream is gone, the new one open"
    );
}

#[test]
fn peer_reset_is_reported_and_releases_credit() {
    let mut s = server(1000, 1000, 10);
    s.on_stream_frame(C0, 0, &[0; 300], false).unwrap();
    s.on_reset_stream(C0, 7, 900).unwrap();
    let ev = events(&mut s);
    assert!(
        ev.contains(&StreamEvent::Reset {
            id: C0,
            error_code: 7
        }),
        "{ev:?}"
    );
    assert_eq!(s.read(C0, &mut [0; 10]), Err(ReadError::Reset(7)));
    // 900 bytes of credit came back without the application reading them.
    assert_eq!(controls(&mut s), vec![ControlFrame::MaxData(1900)]);
    assert_eq!(s.on_stream_frame(StreamId(4), 0, &[0; 1000], false), Ok(()));
}

#[test]
fn streams_opened_before_peer_params_get_credit_later() {
    let mut c = Streams::new(Side::Client, StreamsConfig::default());
    assert_eq!(c.open(Dir::Bi), None, "no MAX_STREAMS yet");
    let mut sp = TransportParameters::default();
    config(5000, 3000, 1 << 20, 4).apply_to(&mut sp);
    assert_eq!(
        (
            sp.initial_max_data,
            sp.initial_max_stream_data_bidi_remote,
            sp.initial_max_streams_uni
        ),
        (5000, 3000, 4)
    );
    c.set_peer_params(&sp);
    assert_eq!(
        events(&mut c),
        vec![StreamEvent::Available { dir: Dir::Bi }]
    );
    let id = c.open(Dir::Bi).unwrap();
    c.write(id, &[0; 4000]).unwrap();
    let mut total = 0;
    while let Some(ch) = c.poll_chunk(1200) {
        total += ch.len;
    }
    assert_eq!(
        total, 3000,
        "the peer's initial_max_stream_data_bidi_remote"
    );
    // A peer blocked below our current limit gets MAX_STREAM_DATA again.
    let mut s = server(1 << 20, 1000, 10);
    s.on_stream_frame(C0, 0, &[0; 1000], false).unwrap();
    s.read(C0, &mut [0; 1000]).unwrap();
    assert_eq!(
        controls(&mut s),
        vec![ControlFrame::MaxStreamData { id: C0, max: 2000 }]
    );
    s.on_stream_data_blocked(C0, 1000).unwrap();
    assert_eq!(
        controls(&mut s),
        vec![ControlFrame::MaxStreamData { id: C0, max: 2000 }]
    );
    s.on_stream_data_blocked(C0, 2000).unwrap();
    assert_eq!(controls(&mut s), vec![]);
}

#[test]
fn stream_chunk_stays_small() {
    // Every sent packet keeps a list of these.
    assert_eq!(std::mem::size_of::<StreamChunk>(), 24);
}

/// A tiny deterministic generator for the model test.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// A packet in flight: its bytes and the records the sender keeps.
struct Packet {
    bytes: Vec<u8>,
    chunks: Vec<StreamChunk>,
    controls: Vec<ControlFrame>,
}

/// Builds one packet of at most `mtu` bytes from `s`; with `replicate`, adds
/// a replica of the unacknowledged parts of an older chunk if it fits.
fn build(s: &mut Streams, mtu: usize, replica_of: Option<StreamChunk>) -> Packet {
    let mut p = Packet {
        bytes: Vec::new(),
        chunks: Vec::new(),
        controls: Vec::new(),
    };
    while let Some(c) = s.poll_control(mtu - p.bytes.len(), &mut p.bytes) {
        p.controls.push(c);
    }
    if let Some(old) = replica_of {
        let mut parts = Vec::new();
        s.unacked_parts(&old, &mut parts);
        for part in parts {
            let need = wire::frame::stream_header_len(part.id, part.offset, part.len as usize)
                + part.len as usize;
            if p.bytes.len() + need <= mtu && s.write_chunk(&part, &mut p.bytes) {
                p.chunks.push(part);
            }
        }
    }
    while let Some(c) = s.poll_chunk(mtu.saturating_sub(p.bytes.len())) {
        assert!(
            s.write_chunk(&c, &mut p.bytes),
            "a fresh chunk is always writable"
        );
        p.chunks.push(c);
    }
    assert!(p.bytes.len() <= mtu);
    p
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Random loss, reordering and replicas between two `Streams`: every byte
    /// arrives exactly once in order, flow control is never violated, the
    /// receive buffer never exceeds its window, and every stream finishes.
    #[test]
    fn model_delivers_exact_bytes(
        seed in 1u64..u64::MAX,
        sizes in proptest::collection::vec(0usize..12_000, 1..4),
        loss_pct in 0u64..40,
        replica_pct in 0u64..30,
    ) {
        let mut rng = XorShift(seed);
        let recv_cfg = config(6000, 4000, 1 << 20, 10);
        let (mut tx, mut rx) = pair(config(1 << 20, 1 << 20, 5000, 10), recv_cfg.clone());
        let data: Vec<Vec<u8>> = sizes.iter().enumerate()
            .map(|(k, &n)| (0..n).map(|i| (i as u64 * 7 + k as u64 * 13 + i as u64 / 251) as u8).collect())
            .collect();
        let ids: Vec<StreamId> = data.iter().map(|_| tx.open(Dir::Uni).unwrap()).collect();
        let mut written = vec![0usize; data.len()];
        let mut got: Vec<Vec<u8>> = vec![Vec::new(); data.len()];
        let mut ended = vec![false; data.len()];
        let mut finished = 0usize;
        let mut to_rx: Vec<Packet> = Vec::new();
        let mut to_tx: Vec<Packet> = Vec::new();
        let mut sent_chunks: Vec<StreamChunk> = Vec::new();
        let mut accepted: Vec<StreamId> = Vec::new();

        for _round in 0..20_000 {
            // Sender application: fill the send buffers.
            for k in 0..data.len() {
                if written[k] < data[k].len() {
                    if let Ok(n) = tx.write(ids[k], &data[k][written[k]..]) {
                        written[k] += n;
                    }
                }
                if written[k] == data[k].len() {
                    let _ = tx.finish(ids[k]);
                }
            }
            // Sender transport: a packet, sometimes with a replica.
            let replica = if !sent_chunks.is_empty() && rng.below(100) < replica_pct {
                Some(sent_chunks[rng.below(sent_chunks.len() as u64) as usize])
            } else {
                None
            };
            if !tx.has_pending() {
                prop_assert_eq!(tx.poll_chunk(1200), None);
                prop_assert_eq!(tx.poll_control(1200, &mut Vec::new()), None);
            }
            let p = build(&mut tx, 1200, replica);
            if !p.bytes.is_empty() {
                sent_chunks.extend(p.chunks.iter().copied());
                to_rx.push(p);
            }
            // Receiver transport and application: credit goes back.
            let back = build(&mut rx, 1200, None);
            if !back.bytes.is_empty() {
                to_tx.push(back);
            }
            // The network: deliver or lose one packet each way, in random order.
            if !to_rx.is_empty() {
                let p = to_rx.swap_remove(rng.below(to_rx.len() as u64) as usize);
                if rng.below(100) < loss_pct {
                    for c in &p.chunks { tx.requeue_lost(c); }
                    for &c in &p.controls { tx.on_control_lost(c); }
                } else {
                    prop_assert_eq!(deliver(&mut rx, &p.bytes), Ok(()));
                    for c in &p.chunks { tx.on_chunk_acked(c); }
                    for &c in &p.controls { tx.on_control_acked(c); }
                }
            }
            if !to_tx.is_empty() {
                let p = to_tx.swap_remove(rng.below(to_tx.len() as u64) as usize);
                if rng.below(100) < loss_pct {
                    for &c in &p.controls { rx.on_control_lost(c); }
                } else {
                    prop_assert_eq!(deliver(&mut tx, &p.bytes), Ok(()));
                    for &c in &p.controls { rx.on_control_acked(c); }
                }
            }
            // Receiver application: read with random buffer sizes.
            while let Some(id) = rx.accept(Dir::Uni) {
                accepted.push(id);
            }
            for k in 0..data.len() {
                prop_assert!(rx.recv_buffered(ids[k]).unwrap_or(0) <= recv_cfg.stream_receive_window);
                if ended[k] || !accepted.contains(&ids[k]) || rng.below(4) == 0 {
                    continue;
                }
                let mut buf = vec![0u8; 1 + rng.below(3000) as usize];
                loop {
                    match rx.read(ids[k], &mut buf) {
                        Ok(Some(n)) => got[k].extend_from_slice(&buf[..n]),
                        Ok(None) => { ended[k] = true; break; }
                        Err(ReadError::Blocked) => break,
                        Err(e) => prop_assert!(false, "read error {e:?}"),
                    }
                }
            }
            while let Some(ev) = tx.poll_event() {
                if let StreamEvent::Finished { .. } = ev { finished += 1; }
            }
            while rx.poll_event().is_some() {}
            if finished == data.len() && ended.iter().all(|&e| e) {
                break;
            }
        }
        prop_assert_eq!(&got, &data);
        prop_assert_eq!(finished, data.len(), "every stream's data and FIN acknowledged");
        prop_assert_eq!(tx.open_streams(), 0, "finished streams are forgotten");
        prop_assert_eq!(rx.open_streams(), 0);
    }
}
