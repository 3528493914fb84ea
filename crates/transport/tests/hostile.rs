//! Hostile input: the server must never panic or hang. Garbage is dropped;
//! protocol violations inside authenticated packets close the connection
//! with the RFC 9000 error code.

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::test_pair::Pair;
use transport::{ConnectionError, Event, TransportConfig};
use wire::coding::BufMutExt;
use wire::time::Duration;
use wire::{Dir, TransportErrorCode};

/// Inject raw frame bytes from the client and return the error the server
/// closed with, as seen by the client (CONNECTION_CLOSE from the server).
fn server_close_code(frames: Vec<u8>) -> Option<u64> {
    close_code_of(Pair::default_pair(), frames)
}

/// As [`server_close_code`], with the pair given.
fn close_code_of(mut pair: Pair, frames: Vec<u8>) -> Option<u64> {
    pair.connect();
    pair.client().inject_raw_frames(frames);
    let mut code = None;
    pair.drive_until(Duration::from_secs(2), |p| {
        while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
            if let Event::ConnectionLost(ConnectionError::PeerClosed {
                code: c,
                application: false,
                ..
            }) = ev
            {
                code = Some(c);
            }
        }
        code.is_some()
    });
    code
}

fn frame(build: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut v = Vec::new();
    build(&mut v);
    v
}

/// An artq FEC repair frame over a two-packet block.
fn fec_repair_frame() -> Vec<u8> {
    frame(|b| {
        wire::frame::Frame::ArtqFec(wire::frame::FecRepair {
            first_pn: 0,
            count: 2,
            deltas: &[1],
            repair: &[0, 1, 7],
        })
        .encode(b)
    })
}

#[test]
fn fec_repair_frames_need_the_transport_parameter() {
    // The server never advertised `artq_fec`: a repair frame is a protocol
    // violation, as an unnegotiated DATAGRAM frame is (RFC 9221 §3).
    let refusing = TransportConfig {
        fec: transport::fec::FecConfig::off(),
        ..TransportConfig::default()
    };
    let pair = Pair::new(refusing, TransportConfig::default());
    assert_eq!(
        close_code_of(pair, fec_repair_frame()),
        Some(TransportErrorCode::PROTOCOL_VIOLATION.0)
    );
    // A server that advertised it processes the frame and stays open.
    assert_eq!(server_close_code(fec_repair_frame()), None);
}

#[test]
fn unknown_frame_type_is_frame_encoding_error() {
    let f = frame(|b| b.put_varint(0x3f_1234));
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::FRAME_ENCODING_ERROR.0)
    );
}

#[test]
fn truncated_stream_frame_is_frame_encoding_error() {
    // STREAM with LEN bit claiming 100 bytes, carrying 3.
    let f = frame(|b| {
        b.put_u8(0x0a);
        b.put_varint(0);
        b.put_varint(100);
        b.put_slice(b"abc");
    });
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::FRAME_ENCODING_ERROR.0)
    );
}

#[test]
fn stream_on_server_uni_stream_is_stream_state_error() {
    // Stream 3 is server-initiated unidirectional: the client may not send on it.
    let f = frame(|b| {
        b.put_u8(0x0a);
        b.put_varint(3);
        b.put_varint(1);
        b.put_u8(0);
    });
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::STREAM_STATE_ERROR.0)
    );
}

#[test]
fn stream_beyond_limit_is_stream_limit_error() {
    let f = frame(|b| {
        b.put_u8(0x0a);
        b.put_varint(4 * 1_000_000); // client bidi stream index 1e6
        b.put_varint(1);
        b.put_u8(0);
    });
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::STREAM_LIMIT_ERROR.0)
    );
}

#[test]
fn data_past_flow_control_is_flow_control_error() {
    // Offset far beyond the advertised window.
    let f = frame(|b| {
        b.put_u8(0x0e); // OFF + LEN
        b.put_varint(0);
        b.put_varint(1 << 40);
        b.put_varint(1);
        b.put_u8(0);
    });
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::FLOW_CONTROL_ERROR.0)
    );
}

#[test]
fn handshake_done_from_client_is_protocol_violation() {
    let f = frame(|b| b.put_u8(0x1e));
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::PROTOCOL_VIOLATION.0)
    );
}

#[test]
fn ack_of_unsent_packet_is_protocol_violation() {
    let f = frame(|b| {
        b.put_u8(0x02);
        b.put_varint(1 << 30); // largest acknowledged: never sent
        b.put_varint(0);
        b.put_varint(0);
        b.put_varint(0);
    });
    assert_eq!(
        server_close_code(f),
        Some(TransportErrorCode::PROTOCOL_VIOLATION.0)
    );
}

#[test]
fn final_size_change_is_final_size_error() {
    let mut pair = Pair::default_pair();
    pair.connect();
    let id = pair.client().streams().open(Dir::Bi).unwrap();
    pair.client().streams().write(id, b"hello").unwrap();
    pair.client().streams().finish(id).unwrap();
    pair.drive_until(Duration::from_millis(200), |_| false);
    // Now claim a different final size for the same stream.
    pair.client().inject_raw_frames(frame(|b| {
        b.put_u8(0x0f);
        b.put_varint(id.0);
        b.put_varint(5);
        b.put_varint(3);
        b.put_slice(b"xyz");
    }));
    let mut code = None;
    pair.drive_until(Duration::from_secs(2), |p| {
        while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
            if let Event::ConnectionLost(ConnectionError::PeerClosed { code: c, .. }) = ev {
                code = Some(c);
            }
        }
        code.is_some()
    });
    assert_eq!(code, Some(TransportErrorCode::FINAL_SIZE_ERROR.0));
}

#[test]
fn random_datagrams_never_panic_the_server() {
    let mut pair = Pair::default_pair();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    for i in 0..2000 {
        let len = if i % 3 == 0 {
            1200 + rng.gen_range(0..200)
        } else {
            rng.gen_range(0..1500)
        };
        let mut d = vec![0u8; len];
        rng.fill(&mut d[..]);
        // Some look like long-header Initials, some like short headers.
        if i % 2 == 0 && !d.is_empty() {
            d[0] = 0xc0 | (d[0] & 0x0f);
            if d.len() > 5 {
                d[1..5].copy_from_slice(&1u32.to_be_bytes());
            }
        }
        pair.inject_to_server(d);
        pair.step();
    }
    // The real client still connects afterwards.
    pair.connect();
}

#[test]
fn truncated_copies_of_real_packets_are_dropped() {
    let mut pair = Pair::default_pair();
    let mut seen: Vec<Vec<u8>> = Vec::new();
    pair.drop = Some(Box::new(|_, _, _, _| false));
    // Capture a few real client datagrams by connecting once.
    pair.connect();
    let id = pair.client().streams().open(Dir::Bi).unwrap();
    pair.client().streams().write(id, b"GET /x\r\n").unwrap();
    let mut buf = Vec::new();
    let now = pair.now;
    while let Some(t) = pair.client.poll_transmit(now, &mut buf) {
        seen.push(buf[..t.size].to_vec());
    }
    assert!(!seen.is_empty());
    for d in &seen {
        for cut in [1, 5, 20, d.len() / 2, d.len().saturating_sub(1)] {
            pair.inject_to_server(d[..cut.min(d.len())].to_vec());
            pair.step();
        }
        let mut flipped = d.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 0xff;
        pair.inject_to_server(flipped);
        pair.step();
    }
    // Authentication failures are dropped silently: the connection lives.
    assert!(!pair.server().is_closed());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    /// Arbitrary bytes as the frames of a 1-RTT packet from the client: the
    /// server never panics, and either carries on, closes with a protocol
    /// error (never INTERNAL_ERROR) that the client then hears, or hears
    /// the client's own CONNECTION_CLOSE among the bytes.
    fn arbitrary_frame_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 1..200)) {
        let mut pair = Pair::default_pair();
        pair.connect();
        pair.client().inject_raw_frames(bytes.clone());
        pair.drive_until(Duration::from_millis(500), |_| false);
        let server = pair.server_opt().and_then(|s| s.close_reason().cloned());
        match server {
            None => {}
            Some(ConnectionError::Transport(e)) => {
                prop_assert_ne!(e.code, TransportErrorCode::INTERNAL_ERROR, "{:?}", e);
                let client = pair.client_opt().and_then(|c| c.close_reason().cloned());
                let heard = matches!(
                    &client,
                    Some(ConnectionError::PeerClosed { code, application: false, .. })
                        if *code == e.code.0
                );
                prop_assert!(
                    heard || retires_clients_cids(&bytes),
                    "server closed with {:?}, client saw {:?}", e, client
                );
            }
            // The bytes may hold a well-formed CONNECTION_CLOSE (0x1c,
            // 0x1d) of the client's: the server then hears its peer close.
            Some(ConnectionError::PeerClosed { .. })
                if bytes.iter().any(|b| matches!(b, 0x1c | 0x1d)) => {}
            // Or a frame for a client stream the client never opened: the
            // server rightly takes the stream as opened and may answer
            // about it (MAX_STREAM_DATA), which the client, not knowing the
            // stream, rightly refuses (RFC 9000 §19.10).
            Some(ConnectionError::PeerClosed { code, application: false, .. })
                if code == TransportErrorCode::STREAM_STATE_ERROR.0
                    && names_a_client_stream(&bytes) => {}
            Some(other) => prop_assert!(false, "server ended otherwise: {:?}", other),
        }
    }
}

/// Whether `frames` hold a well-formed NEW_CONNECTION_ID, ahead of any
/// malformed frame, that retires connection IDs (`retire_prior_to` above 0).
///
/// The server applies the frames of a packet in order, as RFC 9000 asks, so
/// such a frame makes it retire the client's real IDs and address everything
/// after it, its CONNECTION_CLOSE included, to the ID in the frame. The test
/// injected that ID behind the client's back, so the client rightly drops
/// the close as addressed to a connection ID it never issued; a real client
/// would have issued it and heard the close.
fn retires_clients_cids(frames: &[u8]) -> bool {
    wire::frame::FrameIter::new(frames)
        .map_while(Result::ok)
        .any(|f| matches!(f, wire::frame::Frame::NewConnectionId { retire_prior_to, .. } if retire_prior_to > 0))
}

/// Whether `frames`, as the client's packet carries them (followed by
/// PADDING), hold a well-formed frame for a client-initiated stream ahead
/// of any malformed frame. The client of these tests opens no stream.
fn names_a_client_stream(frames: &[u8]) -> bool {
    let mut padded = frames.to_vec();
    padded.extend_from_slice(&[0; 32]);
    wire::frame::FrameIter::new(&padded)
        .map_while(Result::ok)
        .any(|f| {
            let id = match f {
                wire::frame::Frame::ResetStream { id, .. }
                | wire::frame::Frame::StopSending { id, .. }
                | wire::frame::Frame::Stream { id, .. }
                | wire::frame::Frame::MaxStreamData { id, .. }
                | wire::frame::Frame::StreamDataBlocked { id, .. } => id,
                _ => return false,
            };
            id.initiator() == wire::Side::Client
        })
}

/// A random run's find: STREAM_DATA_BLOCKED's type alone, which the
/// client's padding completes as STREAM_DATA_BLOCKED for stream 0. The
/// server takes stream 0 as opened and answers about it; the client, which
/// never opened it, closes with STREAM_STATE_ERROR.
#[test]
fn a_client_stream_named_behind_the_clients_back_is_exempt() {
    assert!(names_a_client_stream(&[0x15]));
    // Stream 1 is the server's: the server itself refuses that frame.
    assert!(!names_a_client_stream(&[0x15, 0x01, 0x00]));
    assert!(!names_a_client_stream(&[0xff, 0xff]));
    let mut pair = Pair::default_pair();
    pair.connect();
    pair.client().inject_raw_frames(vec![0x15]);
    pair.drive_until(Duration::from_millis(500), |_| false);
    let closed = pair.server_opt().and_then(|s| s.close_reason().cloned());
    assert!(
        matches!(
            &closed,
            Some(ConnectionError::PeerClosed { code, application: false, .. })
                if *code == TransportErrorCode::STREAM_STATE_ERROR.0
        ),
        "{closed:?}"
    );
}

/// The failing input a random run found: NEW_CONNECTION_ID (sequence 2^59,
/// retire_prior_to 1087) followed by garbage.
#[test]
fn close_after_an_injected_cid_switch_is_exempt_only_for_that_frame() {
    let mut frames = vec![
        0x18, 0xc8, 0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0x04, 0x3f, 13,
    ];
    frames.extend_from_slice(&[7; 13]);
    frames.extend_from_slice(&[9; 16]);
    frames.extend_from_slice(&[0xff, 0xff, 0x01]);
    assert!(retires_clients_cids(&frames));
    // The same frame retiring nothing, and garbage alone, are not exempt.
    let mut keeps = frames.clone();
    keeps[9..17].copy_from_slice(&[0xc0, 0, 0, 0, 0, 0, 0, 0]);
    assert!(!retires_clients_cids(&keeps));
    assert!(!retires_clients_cids(&[0xff, 0xff, 0x01]));
    // And the server, given them, closes without panicking.
    let mut pair = Pair::default_pair();
    pair.connect();
    pair.client().inject_raw_frames(frames);
    pair.drive_until(Duration::from_millis(500), |_| false);
    let closed = pair.server_opt().and_then(|s| s.close_reason().cloned());
    assert!(
        matches!(&closed, Some(ConnectionError::Transport(e)) if e.code != TransportErrorCode::INTERNAL_ERROR),
        "{closed:?}"
    );
    // Its close went to the injected ID, which the client never issued.
    let client = pair.client_opt().and_then(|c| c.close_reason().cloned());
    assert!(client.is_none(), "{client:?}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// The `server_datagrams` fuzz target's body on generated inputs.
    #[test]
    fn server_datagrams_fuzz_body(bytes in proptest::collection::vec(any::<u8>(), 0..4000)) {
        transport::fuzzing::server_datagrams(&bytes);
    }
}
