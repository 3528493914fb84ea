//! Hostile peers: raw bytes written on the transport's streams, and the
//! session's reaction (connection close code, stream reset or stop, or the
//! request still served). The sessions must never panic.

use transport::connection::Event;
use transport::streams::{ReadError, StreamEvent};
use transport::test_pair::Pair;
use transport::TransportConfig;
use wire::time::Duration;
use wire::{Dir, StreamId};

use super::{control_stream, headers_frame, Harness, GET_ROOT};
use crate::h3::error::*;
use crate::h3::frame::{self, write_frame, write_header};
use crate::h3::reader::ConnStream;
use crate::h3::response_reader::{HeadRead, ResponseReader};
use crate::http::{MessageError, ServerEvent, MAX_FIELD_SECTION};

/// A server session facing a raw client.
fn raw_client() -> Harness {
    Harness::new(true, false)
}

/// Opens a stream on the raw client and writes `bytes` (then FIN if
/// `fin`).
fn client_stream(h: &mut Harness, dir: Dir, bytes: &[u8], fin: bool) -> StreamId {
    let streams = h.pair.client().streams();
    let id = streams.open(dir).expect("a stream");
    assert_eq!(streams.write(id, bytes), Ok(bytes.len()));
    if fin {
        streams.finish(id).expect("finish");
    }
    id
}

/// The raw client's valid control stream (SETTINGS with nothing in it).
fn client_control(h: &mut Harness) -> StreamId {
    client_stream(h, Dir::Uni, &control_stream(&[]), false)
}

/// A request on a new bidirectional stream: `bytes`, then FIN.
fn client_request(h: &mut Harness, bytes: &[u8]) -> StreamId {
    client_stream(h, Dir::Bi, bytes, true)
}

/// The close code the server sends after the raw client wrote `bytes` on a
/// new stream of `dir` (with FIN if `fin`).
fn close_code_for(dir: Dir, bytes: &[u8], fin: bool) -> Option<u64> {
    let mut h = raw_client();
    client_stream(&mut h, dir, bytes, fin);
    h.server_close_code()
}

/// Reads the raw client's response head on `id` (the server session's
/// answer), as a client would.
fn response_head(h: &mut Harness, id: StreamId) -> HeadRead {
    let mut reader = ResponseReader::default();
    let mut out = HeadRead::Blocked;
    h.run(Duration::from_secs(5), |h| {
        let Some(conn) = h.pair.client_opt() else {
            return true;
        };
        match reader.read_head(&mut ConnStream { conn, id }) {
            Ok(HeadRead::Blocked) => false,
            Ok(read) => {
                out = read;
                true
            }
            Err(e) => panic!("the server's response broke the framing: {e}"),
        }
    });
    out
}

/// The codes of the STOP_SENDING frames the raw client receives for
/// `ids` (None for those that get none within 5 s).
fn stops(h: &mut Harness, ids: &[StreamId]) -> Vec<Option<u64>> {
    let mut codes = vec![None; ids.len()];
    h.run(Duration::from_secs(5), |h| {
        let Some(conn) = h.pair.client_opt() else {
            return true;
        };
        while let Some(event) = conn.poll_event() {
            if let Event::Stream(StreamEvent::Stopped { id, error_code }) = event {
                if let Some(i) = ids.iter().position(|&s| s == id) {
                    codes[i] = Some(error_code);
                }
            }
        }
        codes.iter().all(Option::is_some)
    });
    codes
}

/// The code the raw client's stream `id` was reset with, once it is.
fn reset_with(h: &mut Harness, id: StreamId) -> Option<u64> {
    let mut code = None;
    h.run(Duration::from_secs(5), |h| {
        let Some(conn) = h.pair.client_opt() else {
            return true;
        };
        let mut buf = [0u8; 4096];
        loop {
            match conn.streams().read(id, &mut buf) {
                Ok(Some(_)) => continue,
                Err(ReadError::Reset(c)) => {
                    code = Some(c);
                    return true;
                }
                Ok(None) | Err(_) => return false,
            }
        }
    });
    code
}

#[test]
fn control_stream_must_start_with_settings() {
    let mut bytes = vec![0x00];
    write_frame(&mut bytes, frame::GOAWAY, &[0]);
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_MISSING_SETTINGS)
    );
    // Even an unknown frame first is a missing SETTINGS.
    let mut bytes = vec![0x00];
    write_frame(&mut bytes, 0x21, b"");
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_MISSING_SETTINGS)
    );
}

#[test]
fn second_control_stream_is_refused() {
    let mut h = raw_client();
    client_control(&mut h);
    client_control(&mut h);
    assert_eq!(h.server_close_code(), Some(H3_STREAM_CREATION_ERROR));
}

#[test]
fn closing_the_control_stream_is_fatal() {
    assert_eq!(
        close_code_for(Dir::Uni, &control_stream(&[]), true),
        Some(H3_CLOSED_CRITICAL_STREAM)
    );
    let mut h = raw_client();
    let id = client_control(&mut h);
    h.run(Duration::from_millis(100), |_| false);
    h.pair.client().streams().reset(id, H3_NO_ERROR).unwrap();
    assert_eq!(h.server_close_code(), Some(H3_CLOSED_CRITICAL_STREAM));
}

#[test]
fn frames_on_the_wrong_stream() {
    // DATA and HEADERS on the control stream.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::DATA, b"x");
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_FRAME_UNEXPECTED)
    );
    let mut bytes = control_stream(&[]);
    bytes.extend_from_slice(&headers_frame(&GET_ROOT));
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_FRAME_UNEXPECTED)
    );
    // A second SETTINGS.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::SETTINGS, b"");
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_FRAME_UNEXPECTED)
    );
    // SETTINGS and GOAWAY on a request stream.
    let mut bytes = Vec::new();
    write_frame(&mut bytes, frame::SETTINGS, b"");
    assert_eq!(
        close_code_for(Dir::Bi, &bytes, true),
        Some(H3_FRAME_UNEXPECTED)
    );
    let mut bytes = headers_frame(&GET_ROOT);
    write_frame(&mut bytes, frame::GOAWAY, &[0]);
    assert_eq!(
        close_code_for(Dir::Bi, &bytes, true),
        Some(H3_FRAME_UNEXPECTED)
    );
    // DATA before HEADERS.
    let mut bytes = Vec::new();
    write_frame(&mut bytes, frame::DATA, b"early");
    assert_eq!(
        close_code_for(Dir::Bi, &bytes, true),
        Some(H3_FRAME_UNEXPECTED)
    );
    // PUSH_PROMISE from a client.
    let mut bytes = headers_frame(&GET_ROOT);
    write_frame(&mut bytes, frame::PUSH_PROMISE, &[0, 0, 0]);
    assert_eq!(
        close_code_for(Dir::Bi, &bytes, true),
        Some(H3_FRAME_UNEXPECTED)
    );
}

#[test]
fn http2_frame_types_are_unexpected() {
    for ty in [0x02, 0x06, 0x08, 0x09] {
        let mut bytes = control_stream(&[]);
        write_frame(&mut bytes, ty, &[0]);
        assert_eq!(
            close_code_for(Dir::Uni, &bytes, false),
            Some(H3_FRAME_UNEXPECTED),
            "{ty}"
        );
        let mut bytes = headers_frame(&GET_ROOT);
        write_frame(&mut bytes, ty, &[0]);
        assert_eq!(
            close_code_for(Dir::Bi, &bytes, true),
            Some(H3_FRAME_UNEXPECTED),
            "{ty}"
        );
    }
}

#[test]
fn malformed_frames() {
    // A frame header cut by FIN: a 2-byte type varint with one byte.
    assert_eq!(close_code_for(Dir::Bi, &[0x40], true), Some(H3_FRAME_ERROR));
    // A HEADERS frame shorter than it says.
    let mut bytes = Vec::new();
    write_header(&mut bytes, frame::HEADERS, 20);
    bytes.extend_from_slice(&[0, 0, 0xd1]);
    assert_eq!(close_code_for(Dir::Bi, &bytes, true), Some(H3_FRAME_ERROR));
    // A DATA frame cut by FIN after a valid request head.
    let mut bytes = headers_frame(&GET_ROOT);
    write_header(&mut bytes, frame::DATA, 100);
    bytes.extend_from_slice(b"short");
    assert_eq!(close_code_for(Dir::Bi, &bytes, true), Some(H3_FRAME_ERROR));
    // GOAWAY whose payload is not one varint; a SETTINGS pair cut short.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::GOAWAY, &[0x40]);
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_FRAME_ERROR)
    );
    assert_eq!(
        close_code_for(Dir::Uni, &control_stream(&[0x06]), false),
        Some(H3_FRAME_ERROR)
    );
}

#[test]
fn bad_settings() {
    assert_eq!(
        close_code_for(Dir::Uni, &control_stream(&[0x06, 0x01, 0x06, 0x01]), false),
        Some(H3_SETTINGS_ERROR)
    );
    for h2 in [0x00, 0x02, 0x03, 0x04, 0x05] {
        assert_eq!(
            close_code_for(Dir::Uni, &control_stream(&[h2, 0x00]), false),
            Some(H3_SETTINGS_ERROR),
            "{h2}"
        );
    }
    // An oversized SETTINGS frame is refused before it is read.
    let mut bytes = vec![0x00];
    write_header(&mut bytes, frame::SETTINGS, MAX_FIELD_SECTION + 1);
    assert_eq!(
        close_code_for(Dir::Uni, &bytes, false),
        Some(H3_EXCESSIVE_LOAD)
    );
}

#[test]
fn push_ids_and_goaway_from_a_client() {
    // GOAWAY IDs (push IDs from a client) may only shrink.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::GOAWAY, &[4]);
    write_frame(&mut bytes, frame::GOAWAY, &[8]);
    assert_eq!(close_code_for(Dir::Uni, &bytes, false), Some(H3_ID_ERROR));
    // CANCEL_PUSH for a push we never promised; MAX_PUSH_ID going down.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::CANCEL_PUSH, &[0]);
    assert_eq!(close_code_for(Dir::Uni, &bytes, false), Some(H3_ID_ERROR));
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::MAX_PUSH_ID, &[5]);
    write_frame(&mut bytes, frame::MAX_PUSH_ID, &[3]);
    assert_eq!(close_code_for(Dir::Uni, &bytes, false), Some(H3_ID_ERROR));
    // A push stream from a client.
    assert_eq!(
        close_code_for(Dir::Uni, &[0x01, 0x00], false),
        Some(H3_STREAM_CREATION_ERROR)
    );
}

#[test]
fn qpack_references_outside_the_static_table() {
    let section_frame = |section: &[u8]| {
        let mut out = Vec::new();
        write_frame(&mut out, frame::HEADERS, section);
        out
    };
    let cases: [&[u8]; 5] = [
        &[0x00, 0x00, 0xff, 0x24],       // indexed, static index 99
        &[0x00, 0x00, 0x5f, 0x54, 0x00], // name reference, static index 99
        &[0x00, 0x00, 0x80],             // indexed, dynamic table
        &[0x00, 0x00, 0x10],             // indexed, post-base
        &[0x02, 0x00, 0xd1],             // Required Insert Count 1
    ];
    for section in cases {
        assert_eq!(
            close_code_for(Dir::Bi, &section_frame(section), true),
            Some(QPACK_DECOMPRESSION_FAILED),
            "{section:02x?}"
        );
    }
}

#[test]
fn qpack_streams_are_checked() {
    // Set Dynamic Table Capacity 0 is fine, an insert is not.
    assert_eq!(
        close_code_for(Dir::Uni, &[0x02, 0x20, 0xc0, 0x01, 0x61], false),
        Some(QPACK_ENCODER_STREAM_ERROR)
    );
    assert_eq!(
        close_code_for(Dir::Uni, &[0x02, 0x3f, 0xbd, 0x01], false),
        Some(QPACK_ENCODER_STREAM_ERROR)
    );
    // Stream Cancellation is fine, a Section Acknowledgment is not.
    assert_eq!(
        close_code_for(Dir::Uni, &[0x03, 0x40, 0x84], false),
        Some(QPACK_DECODER_STREAM_ERROR)
    );
    // A second encoder stream; closing one.
    let mut h = raw_client();
    client_stream(&mut h, Dir::Uni, &[0x02], false);
    client_stream(&mut h, Dir::Uni, &[0x02], false);
    assert_eq!(h.server_close_code(), Some(H3_STREAM_CREATION_ERROR));
    assert_eq!(
        close_code_for(Dir::Uni, &[0x03, 0x40], true),
        Some(H3_CLOSED_CRITICAL_STREAM)
    );
}

#[test]
fn unknown_frames_and_streams_are_ignored() {
    let mut h = raw_client();
    h.files.insert("/".into(), b"hello".to_vec());
    // Control stream with reserved and unknown frames and settings.
    let mut control = control_stream(&[0x21, 0x07, 0x33, 0x01, 0x06, 0x40, 0x64]);
    write_frame(&mut control, 0x21, b"grease");
    write_frame(&mut control, 0x1234, &[0; 300]);
    client_stream(&mut h, Dir::Uni, &control, false);
    // Unknown and reserved stream types.
    let reserved = client_stream(&mut h, Dir::Uni, &[0x21, 1, 2, 3], false);
    let unknown = client_stream(&mut h, Dir::Uni, &[0x40, 0x54, 9, 9], false);
    // A request wrapped in unknown frames.
    let mut bytes = Vec::new();
    write_frame(&mut bytes, 0x40, b"before");
    bytes.extend_from_slice(&headers_frame(&GET_ROOT));
    write_frame(&mut bytes, 0x1f * 3 + 0x21, b"after");
    let id = client_request(&mut h, &bytes);
    assert!(matches!(response_head(&mut h, id), HeadRead::Response(head) if head.status == 200));
    assert_eq!(
        stops(&mut h, &[reserved, unknown]),
        [Some(H3_STREAM_CREATION_ERROR); 2]
    );
    // Still open.
    assert!(h.pair.client().close_reason().is_none());
    assert!(h.server.as_ref().unwrap().peer_settings().is_some());
}

#[test]
fn malformed_request_is_answered_400() {
    let mut h = raw_client();
    let mut fields = GET_ROOT.to_vec();
    fields.push(("X-Upper", "1"));
    let id = client_request(&mut h, &headers_frame(&fields));
    assert!(matches!(response_head(&mut h, id), HeadRead::Response(head) if head.status == 400));
    assert!(matches!(
        h.server_events[..],
        [ServerEvent::BadRequest {
            error: MessageError::Malformed(_),
            ..
        }]
    ));
    // Missing pseudo-headers and a connection-specific field, likewise.
    for fields in [
        &GET_ROOT[1..],
        &[
            GET_ROOT[0],
            GET_ROOT[1],
            GET_ROOT[2],
            GET_ROOT[3],
            ("connection", "close"),
        ][..],
    ] {
        let id = client_request(&mut h, &headers_frame(fields));
        assert!(
            matches!(response_head(&mut h, id), HeadRead::Response(head) if head.status == 400)
        );
    }
    assert!(h.pair.client().close_reason().is_none());
}

#[test]
fn oversized_headers_are_answered_431() {
    let mut h = raw_client();
    // A HEADERS frame declared larger than the limit: refused unread.
    let mut bytes = Vec::new();
    write_header(&mut bytes, frame::HEADERS, MAX_FIELD_SECTION + 1);
    bytes.extend_from_slice(&[0; 1000]);
    let id = client_stream(&mut h, Dir::Bi, &bytes, false);
    assert!(matches!(response_head(&mut h, id), HeadRead::Response(head) if head.status == 431));
    assert_eq!(stops(&mut h, &[id]), [Some(H3_EXCESSIVE_LOAD)]);
    // A small frame that decodes to more than the limit: 600 fields of
    // 32 + 2 bytes each.
    let mut fields = GET_ROOT.to_vec();
    fields.extend(std::iter::repeat_n(("a", "b"), 600));
    let frame = headers_frame(&fields);
    assert!((frame.len() as u64) < MAX_FIELD_SECTION);
    let id = client_request(&mut h, &frame);
    assert!(matches!(response_head(&mut h, id), HeadRead::Response(head) if head.status == 431));
    assert!(matches!(
        h.server_events[..],
        [
            ServerEvent::BadRequest {
                error: MessageError::TooLarge(_),
                ..
            },
            ServerEvent::BadRequest {
                error: MessageError::TooLarge(_),
                ..
            }
        ]
    ));
    assert!(h.pair.client().close_reason().is_none());
}

#[test]
fn request_stream_ending_early_is_reset() {
    let mut h = raw_client();
    let id = client_request(&mut h, &[]);
    assert_eq!(reset_with(&mut h, id), Some(H3_REQUEST_INCOMPLETE));
    // A body longer than its content-length.
    let mut fields = GET_ROOT.to_vec();
    fields.push(("content-length", "2"));
    let mut bytes = headers_frame(&fields);
    write_frame(&mut bytes, frame::DATA, b"abc");
    let id = client_request(&mut h, &bytes);
    assert_eq!(reset_with(&mut h, id), Some(H3_MESSAGE_ERROR));
}

#[test]
fn client_reset_or_stop_is_reported_as_cancelled() {
    for (reset, stop) in [(true, true), (true, false), (false, true)] {
        // A send buffer far smaller than the body: the response is still
        // being written when the client gives up.
        let mut server_transport = TransportConfig::default();
        server_transport.streams.send_buffer = 100_000;
        let pair = Pair::new(server_transport, TransportConfig::default());
        let mut h = Harness::over(pair, true, false);
        h.files.insert("/".into(), vec![7; 4 << 20]);
        let id = client_stream(&mut h, Dir::Bi, &headers_frame(&GET_ROOT), false);
        assert!(h.run(Duration::from_secs(2), |h| !h.server_events.is_empty()));
        let streams = h.pair.client().streams();
        if reset {
            streams.reset(id, H3_REQUEST_CANCELLED).unwrap();
        }
        if stop {
            streams.stop_sending(id, H3_REQUEST_CANCELLED).unwrap();
        }
        let cancelled = h.run(Duration::from_secs(2), |h| {
            h.server_events
                .iter()
                .any(|e| matches!(e, ServerEvent::Cancelled { stream } if *stream == id))
        });
        assert!(
            cancelled,
            "reset {reset}, stop {stop}: {:?}",
            h.server_events
        );
    }
}

#[test]
fn stop_before_the_answer_is_reported_as_cancelled() {
    // The application has not answered yet: nothing is written, and the
    // stop is still noticed.
    let mut h = raw_client();
    h.hold = true;
    let id = client_stream(&mut h, Dir::Bi, &headers_frame(&GET_ROOT), false);
    assert!(h.run(Duration::from_secs(2), |h| !h.server_events.is_empty()));
    h.pair
        .client()
        .streams()
        .stop_sending(id, H3_REQUEST_CANCELLED)
        .unwrap();
    assert!(h.run(Duration::from_secs(2), |h| {
        h.server_events
            .iter()
            .any(|e| matches!(e, ServerEvent::Cancelled { stream } if *stream == id))
    }));
}

/// HEADERS for `fields`, then a DATA frame declaring 1 MB of which
/// `body` bytes follow (the client is still uploading).
fn request_with_upload(fields: &[(&str, &str)], body: usize) -> Vec<u8> {
    let mut bytes = headers_frame(fields);
    write_header(&mut bytes, frame::DATA, 1_000_000);
    bytes.extend(std::iter::repeat_n(0x5a, body));
    bytes
}

#[test]
fn a_complete_response_stops_the_rest_of_the_request() {
    // 404 answered at once; the client is still sending a body: RFC 9114
    // §4.1.1 lets the server stop reading with H3_NO_ERROR, and it must,
    // so the upload stops instead of being read and dropped for ever.
    let mut h = raw_client();
    let id = client_stream(
        &mut h,
        Dir::Bi,
        &request_with_upload(&GET_ROOT, 20_000),
        false,
    );
    assert_eq!(stops(&mut h, &[id]), [Some(H3_NO_ERROR)]);
    match response_head(&mut h, id) {
        HeadRead::Response(head) => assert_eq!(head.status, 404),
        other => panic!("expected the 404, got {other:?}"),
    }
}

#[test]
fn a_request_stream_is_read_at_most_64_kib() {
    // The answer is pending (held); the client uploads 200 KB: reading
    // stops past MAX_REQUEST_STREAM_BYTES, with H3_NO_ERROR since the
    // request itself was complete.
    let mut h = raw_client();
    h.hold = true;
    let id = client_stream(
        &mut h,
        Dir::Bi,
        &request_with_upload(&GET_ROOT, 200_000),
        false,
    );
    assert_eq!(stops(&mut h, &[id]), [Some(H3_NO_ERROR)]);
    assert!(matches!(
        h.server_events.as_slice(),
        [ServerEvent::Request { .. }]
    ));
    let held = h.pair.server().streams().recv_buffered(id).unwrap_or(0);
    assert_eq!(held, 0, "the rest of the upload is discarded, not held");
}

#[test]
fn endless_unknown_frames_before_the_request_are_431() {
    // Unknown frames are skipped, but not without end: 100 KB of them
    // before any HEADERS is a request too large.
    let mut bytes = Vec::new();
    for _ in 0..100 {
        write_frame(&mut bytes, 0x21, &[0; 1000]);
    }
    let mut h = raw_client();
    let id = client_stream(&mut h, Dir::Bi, &bytes, false);
    assert_eq!(stops(&mut h, &[id]), [Some(H3_EXCESSIVE_LOAD)]);
    assert!(
        matches!(
            h.server_events.as_slice(),
            [ServerEvent::BadRequest {
                error: MessageError::TooLarge(_),
                ..
            }]
        ),
        "{:?}",
        h.server_events
    );
    match response_head(&mut h, id) {
        HeadRead::Response(head) => assert_eq!(head.status, 431),
        other => panic!("expected a 431, got {other:?}"),
    }
}

// ---- a client session facing a raw server ----

/// A client session facing a raw server, with one request sent; returns
/// the harness and the request stream, accepted on the server.
fn raw_server_with_request() -> (Harness, StreamId) {
    let mut h = Harness::new(false, true);
    let id = h.get("/");
    assert!(h.run(Duration::from_secs(2), |h| {
        h.pair
            .server_opt()
            .and_then(|c| c.streams().accept(Dir::Bi))
            .is_some()
    }));
    (h, id)
}

/// Writes `bytes` (then FIN) on the raw server's side of `id`.
fn server_writes(h: &mut Harness, id: StreamId, bytes: &[u8]) {
    let streams = h.pair.server().streams();
    assert_eq!(streams.write(id, bytes), Ok(bytes.len()));
    streams.finish(id).unwrap();
}

#[test]
fn client_rejects_data_before_the_response() {
    let (mut h, id) = raw_server_with_request();
    let mut bytes = Vec::new();
    write_frame(&mut bytes, frame::DATA, b"x");
    server_writes(&mut h, id, &bytes);
    assert_eq!(h.client_close_code(), Some(H3_FRAME_UNEXPECTED));
}

#[test]
fn client_reports_malformed_and_reset_responses() {
    let (mut h, id) = raw_server_with_request();
    server_writes(&mut h, id, &headers_frame(&[(":status", "2x0")]));
    assert!(h.finish_downloads(Duration::from_secs(2)));
    assert!(h.downloads[&id].failed.is_some());
    let second = h.get("/again");
    assert!(h.run(Duration::from_secs(2), |h| {
        h.pair
            .server_opt()
            .and_then(|c| c.streams().accept(Dir::Bi))
            .is_some()
    }));
    h.pair
        .server()
        .streams()
        .reset(second, H3_INTERNAL_ERROR)
        .unwrap();
    assert!(h.finish_downloads(Duration::from_secs(2)));
    assert!(h.downloads[&second]
        .failed
        .as_deref()
        .is_some_and(|r| r.contains("0x102")));
    assert!(h.pair.client().close_reason().is_none());
}

#[test]
fn client_reads_interim_responses_trailers_and_unknown_frames() {
    let (mut h, id) = raw_server_with_request();
    let mut bytes = headers_frame(&[(":status", "100")]);
    write_frame(&mut bytes, 0x21, b"x");
    bytes.extend_from_slice(&headers_frame(&[(":status", "200")]));
    write_frame(&mut bytes, frame::DATA, b"abc");
    write_frame(&mut bytes, 0x1234, b"skip me");
    write_frame(&mut bytes, frame::DATA, b"def");
    bytes.extend_from_slice(&headers_frame(&[("x-trailer", "t")]));
    server_writes(&mut h, id, &bytes);
    assert!(h.finish_downloads(Duration::from_secs(2)));
    let d = &h.downloads[&id];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(200));
    assert_eq!(d.body, b"abcdef");
    assert!(d.done);
}

#[test]
fn client_checks_the_server_control_stream() {
    // GOAWAY growing; GOAWAY naming a non-request stream; MAX_PUSH_ID from
    // a server; a server-initiated bidirectional stream; a push stream.
    let goaway = |ids: &[u8]| {
        let mut bytes = control_stream(&[]);
        for &id in ids {
            write_frame(&mut bytes, frame::GOAWAY, &[id]);
        }
        bytes
    };
    let mut max_push = control_stream(&[]);
    write_frame(&mut max_push, frame::MAX_PUSH_ID, &[1]);
    let cases: [(Dir, Vec<u8>, u64); 5] = [
        (Dir::Uni, goaway(&[4, 8]), H3_ID_ERROR),
        (Dir::Uni, goaway(&[2]), H3_ID_ERROR),
        (Dir::Uni, max_push, H3_FRAME_UNEXPECTED),
        (Dir::Bi, b"x".to_vec(), H3_STREAM_CREATION_ERROR),
        (Dir::Uni, vec![0x01, 0x00], H3_ID_ERROR),
    ];
    for (dir, bytes, code) in cases {
        let mut h = Harness::new(false, true);
        let streams = h.pair.server().streams();
        let id = streams.open(dir).unwrap();
        assert_eq!(streams.write(id, &bytes), Ok(bytes.len()));
        assert_eq!(h.client_close_code(), Some(code), "{dir:?} {bytes:02x?}");
    }
}

#[test]
fn client_handles_goaway_for_unprocessed_requests() {
    let (mut h, first) = raw_server_with_request();
    let second = h.get("/b");
    // GOAWAY(4): stream 0 will be processed, stream 4 will not.
    let mut bytes = control_stream(&[]);
    write_frame(&mut bytes, frame::GOAWAY, &[4]);
    let streams = h.pair.server().streams();
    let control = streams.open(Dir::Uni).unwrap();
    assert_eq!(streams.write(control, &bytes), Ok(bytes.len()));
    assert!(h.run(Duration::from_secs(2), |h| h.downloads[&second]
        .failed
        .is_some()));
    assert!(h.downloads[&first].failed.is_none());
    assert_eq!(second.0, 4);
    server_writes(&mut h, first, &headers_frame(&[(":status", "204")]));
    assert!(h.finish_downloads(Duration::from_secs(2)));
    assert!(h.downloads[&first].done);
}
