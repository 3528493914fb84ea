use super::*;
use crate::coding::BufMutExt;
use crate::error::DecodeError;
use crate::TransportErrorCode;
use proptest::prelude::*;

/// Test frames borrow their bytes; leaking a few small buffers per case is
/// the simplest way to get `Frame<'static>` out of a proptest strategy.
fn leak(v: Vec<u8>) -> &'static [u8] {
    Box::leak(v.into_boxed_slice())
}

fn decode_all(bytes: &[u8]) -> Vec<Result<Frame<'_>, DecodeError>> {
    FrameIter::new(bytes).collect()
}

fn encoded(frame: &Frame<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    frame.encode(&mut out);
    out
}

const V62: u64 = (1 << 62) - 1;

fn varint() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..64, 0u64..16384, 0u64..(1 << 30), 0..=V62]
}

fn bytes(max: usize) -> impl Strategy<Value = &'static [u8]> {
    proptest::collection::vec(any::<u8>(), 0..max).prop_map(leak)
}

fn stream_id() -> impl Strategy<Value = StreamId> {
    varint().prop_map(StreamId)
}

fn dir() -> impl Strategy<Value = Dir> {
    prop_oneof![Just(Dir::Bi), Just(Dir::Uni)]
}

pub(crate) fn arb_ack() -> impl Strategy<Value = AckFrame> {
    (
        varint(),
        0u64..2000,
        proptest::collection::vec((0u64..2000, 0u64..2000), 0..12),
        varint(),
        proptest::option::of((varint(), varint(), varint())),
    )
        .prop_map(|(largest, first, rest, delay, ecn)| {
            let mut lo = largest.saturating_sub(first);
            let mut ranges = vec![lo..=largest];
            for (gap, len) in rest {
                let Some(hi) = lo.checked_sub(gap + 2) else {
                    break;
                };
                let Some(new_lo) = hi.checked_sub(len) else {
                    break;
                };
                ranges.push(new_lo..=hi);
                lo = new_lo;
            }
            let ecn = ecn.map(|(ect0, ect1, ce)| EcnCounts { ect0, ect1, ce });
            AckFrame {
                largest,
                delay,
                ranges,
                ecn,
            }
        })
}

/// Any valid frame.
pub(crate) fn arb_frame() -> impl Strategy<Value = Frame<'static>> {
    prop_oneof![
        (1usize..64).prop_map(|len| Frame::Padding { len }),
        Just(Frame::Ping),
        arb_ack().prop_map(Frame::Ack),
        (stream_id(), varint(), varint()).prop_map(|(id, error_code, final_size)| {
            Frame::ResetStream {
                id,
                error_code,
                final_size,
            }
        }),
        (stream_id(), varint()).prop_map(|(id, error_code)| Frame::StopSending { id, error_code }),
        (0u64..(1 << 40), bytes(200)).prop_map(|(offset, data)| Frame::Crypto { offset, data }),
        proptest::collection::vec(any::<u8>(), 1..60)
            .prop_map(|t| Frame::NewToken { token: leak(t) }),
        (
            stream_id(),
            0..=(V62 - 300),
            any::<bool>(),
            bytes(300),
            any::<bool>()
        )
            .prop_map(|(id, offset, fin, data, zero)| Frame::Stream {
                id,
                offset: if zero { 0 } else { offset },
                fin,
                data
            }),
        varint().prop_map(Frame::MaxData),
        (stream_id(), varint()).prop_map(|(id, max)| Frame::MaxStreamData { id, max }),
        (dir(), 0..=MAX_STREAM_COUNT).prop_map(|(dir, count)| Frame::MaxStreams { dir, count }),
        varint().prop_map(|limit| Frame::DataBlocked { limit }),
        (stream_id(), varint()).prop_map(|(id, limit)| Frame::StreamDataBlocked { id, limit }),
        (dir(), 0..=MAX_STREAM_COUNT).prop_map(|(dir, limit)| Frame::StreamsBlocked { dir, limit }),
        (
            varint(),
            any::<u64>(),
            proptest::collection::vec(any::<u8>(), 1..=20),
            any::<[u8; 16]>()
        )
            .prop_map(|(sequence, r, cid, reset_token)| Frame::NewConnectionId {
                sequence,
                retire_prior_to: r % (sequence + 1),
                cid: ConnectionId::new(&cid).unwrap(),
                reset_token,
            }),
        varint().prop_map(|sequence| Frame::RetireConnectionId { sequence }),
        any::<[u8; 8]>().prop_map(Frame::PathChallenge),
        any::<[u8; 8]>().prop_map(Frame::PathResponse),
        (varint(), proptest::option::of(varint()), bytes(80)).prop_map(
            |(error_code, frame_type, reason)| Frame::ConnectionClose {
                error_code,
                frame_type,
                reason
            }
        ),
        Just(Frame::HandshakeDone),
        bytes(300).prop_map(|data| Frame::Datagram { data }),
    ]
}

/// Encoded valid frames (no padding, so each decodes on its own).
pub(crate) fn arb_payload() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(arb_frame(), 0..8).prop_map(|frames| {
        let mut out = Vec::new();
        for f in frames
            .iter()
            .filter(|f| !matches!(f, Frame::Padding { .. }))
        {
            f.encode(&mut out);
        }
        out
    })
}

#[test]
fn padding_runs_fold_into_one_frame() {
    let payload = [0, 0, 0, 1, 0, 0];
    assert_eq!(
        decode_all(&payload),
        vec![
            Ok(Frame::Padding { len: 3 }),
            Ok(Frame::Ping),
            Ok(Frame::Padding { len: 2 })
        ]
    );
}

#[test]
fn stream_frame_forms() {
    // Type 0x08: no offset, no length, data to the end.
    assert_eq!(
        decode_all(&[0x08, 0x04, b'h', b'i']),
        vec![Ok(Frame::Stream {
            id: StreamId(4),
            offset: 0,
            fin: false,
            data: b"hi"
        })]
    );
    // Type 0x0f: offset, length, fin; then a PING.
    assert_eq!(
        decode_all(&[0x0f, 0x01, 0x40, 0x80, 0x01, b'x', 0x01]),
        vec![
            Ok(Frame::Stream {
                id: StreamId(1),
                offset: 128,
                fin: true,
                data: b"x"
            }),
            Ok(Frame::Ping)
        ]
    );
    let f = Frame::Stream {
        id: StreamId(8),
        offset: 70,
        fin: true,
        data: b"abc",
    };
    let bytes = encoded(&f);
    assert_eq!(bytes, [0x0f, 0x08, 0x40, 70, 0x03, b'a', b'b', b'c']);
    assert_eq!(f.ty(), 0x0f);
    assert_eq!(stream_header_len(StreamId(8), 70, 3) + 3, bytes.len());
}

#[test]
fn datagram_frame_forms() {
    assert_eq!(
        decode_all(&[0x30, 1, 2]),
        vec![Ok(Frame::Datagram { data: &[1, 2] })]
    );
    assert_eq!(
        decode_all(&[0x31, 1, 9, 0x01]),
        vec![Ok(Frame::Datagram { data: &[9] }), Ok(Frame::Ping)]
    );
    assert_eq!(encoded(&Frame::Datagram { data: &[9] }), [0x31, 1, 9]);
}

#[test]
fn non_minimal_frame_types_decode() {
    assert_eq!(decode_all(&[0x40, 0x01]), vec![Ok(Frame::Ping)]);
    assert_eq!(
        decode_all(&[0x80, 0, 0, 0x1e]),
        vec![Ok(Frame::HandshakeDone)]
    );
}

fn first_err(bytes: &[u8]) -> DecodeError {
    FrameIter::new(bytes)
        .find_map(Result::err)
        .expect("an error")
}

fn assert_malformed(bytes: &[u8], ty: u64) {
    let err = first_err(bytes);
    assert_eq!(err.frame_type(), Some(ty), "{err:?}");
    assert!(matches!(err, DecodeError::MalformedFrame { .. }), "{err:?}");
    assert_eq!(err.error_code(), TransportErrorCode::FRAME_ENCODING_ERROR);
}

#[test]
fn validation_errors() {
    // Stream data past 2^62-1.
    let mut b = vec![0x0e, 0x00];
    b.put_varint(V62);
    b.extend_from_slice(&[0x01, 0xaa]);
    assert_malformed(&b, 0x0e);
    let n = b.len();
    b[n - 2] = 0; // zero-length at 2^62-1 is fine
    b.pop();
    assert!(decode_all(&b).iter().all(Result::is_ok));
    // CRYPTO past 2^62-1.
    let mut b = vec![0x06];
    b.put_varint(V62);
    b.extend_from_slice(&[0x01, 0xaa]);
    assert_malformed(&b, 0x06);
    // NEW_CONNECTION_ID: CID length 0 and 21, retire_prior_to > sequence.
    let ncid = |seq: u8, rpt: u8, len: u8| {
        let mut b = vec![0x18, seq, rpt, len];
        b.resize(b.len() + usize::from(len) + 16, 7);
        b
    };
    assert!(decode_all(&ncid(3, 3, 20))[0].is_ok());
    assert_malformed(&ncid(3, 3, 0), 0x18);
    assert_malformed(&ncid(3, 3, 21), 0x18);
    assert_malformed(&ncid(3, 4, 8), 0x18);
    // MAX_STREAMS / STREAMS_BLOCKED above 2^60.
    for ty in [0x12u8, 0x13, 0x16, 0x17] {
        let mut b = vec![ty];
        b.put_varint(MAX_STREAM_COUNT);
        assert!(decode_all(&b)[0].is_ok());
        let mut b = vec![ty];
        b.put_varint(MAX_STREAM_COUNT + 1);
        assert_malformed(&b, u64::from(ty));
    }
    // Empty NEW_TOKEN.
    assert_malformed(&[0x07, 0x00], 0x07);
    // ACK: first range below zero, gap below zero, range below zero, huge count.
    assert_malformed(&[0x02, 5, 0, 0, 6], 0x02);
    assert_malformed(&[0x02, 5, 0, 1, 2, 2, 0], 0x02); // smallest 3, gap 2 -> -1
    assert_malformed(&[0x02, 5, 0, 1, 2, 0, 2], 0x02); // next largest 1, len 2 -> -1
    assert!(decode_all(&[0x02, 5, 0, 1, 2, 0, 1])[0].is_ok());
    let mut b = vec![0x02, 5, 0];
    b.put_varint(V62);
    b.push(0);
    assert_eq!(
        first_err(&b),
        DecodeError::MalformedFrame {
            frame_type: 2,
            reason: "ACK range count exceeds frame size"
        }
    );
}

#[test]
fn unknown_types() {
    assert_eq!(first_err(&[0x21]), DecodeError::UnknownFrameType(0x21));
    let err = first_err(&[0x40, 0x22]);
    assert_eq!(err, DecodeError::UnknownFrameType(0x22));
    assert_eq!(err.error_code(), TransportErrorCode::FRAME_ENCODING_ERROR);
}

#[test]
fn artq_fec_round_trip_and_validation() {
    let mut deltas = Vec::new();
    deltas.put_varint(1);
    deltas.put_varint(3);
    let f = Frame::ArtqFec(FecRepair {
        first_pn: 100,
        count: 3,
        deltas: &deltas,
        repair: &[1, 2, 3],
    });
    let bytes = encoded(&f);
    let back = FrameIter::new(&bytes).next().unwrap().unwrap();
    assert_eq!(back, f);
    let Frame::ArtqFec(r) = back else {
        unreachable!()
    };
    assert_eq!(r.packet_numbers().collect::<Vec<_>>(), vec![100, 101, 104]);
    // Zero delta, zero count and oversized count are malformed.
    for (count, delta) in [(2u64, 0u64), (0, 1), (256, 1)] {
        let mut b = Vec::new();
        b.put_varint(frame_type::ARTQ_FEC);
        b.put_varint(5);
        b.put_varint(count);
        b.put_varint(delta);
        b.put_varint(0);
        assert!(
            matches!(first_err(&b), DecodeError::MalformedFrame { .. }),
            "count {count} delta {delta}"
        );
    }
}

#[test]
fn iteration_stops_after_an_error() {
    let mut it = FrameIter::new(&[0x01, 0x21, 0x01, 0x01]);
    assert_eq!(it.next(), Some(Ok(Frame::Ping)));
    assert!(matches!(it.next(), Some(Err(_))));
    assert_eq!(it.next(), None);
    assert_eq!(it.next(), None);
}

#[test]
fn truncated_frames_are_frame_encoding_errors() {
    let f = Frame::Stream {
        id: StreamId(4),
        offset: 1000,
        fin: false,
        data: b"hello",
    };
    let bytes = encoded(&f);
    for cut in 1..bytes.len() {
        assert_eq!(
            first_err(&bytes[..cut]),
            DecodeError::MalformedFrame {
                frame_type: 0x0e,
                reason: "truncated frame"
            },
            "cut {cut}"
        );
    }
    // A truncated frame type itself.
    assert_eq!(
        first_err(&[0x40]),
        DecodeError::MalformedFrame {
            frame_type: 0,
            reason: "truncated frame"
        }
    );
}

#[test]
fn frame_classes() {
    let ack = Frame::Ack(AckFrame {
        largest: 1,
        delay: 0,
        ranges: vec![0..=1],
        ecn: None,
    });
    let close_t = Frame::ConnectionClose {
        error_code: 0,
        frame_type: Some(0),
        reason: b"",
    };
    let close_a = Frame::ConnectionClose {
        error_code: 0,
        frame_type: None,
        reason: b"",
    };
    let stream = Frame::Stream {
        id: StreamId(0),
        offset: 0,
        fin: false,
        data: b"",
    };
    let crypto = Frame::Crypto {
        offset: 0,
        data: b"",
    };
    assert!(
        !ack.is_ack_eliciting()
            && !close_t.is_ack_eliciting()
            && !Frame::Padding { len: 1 }.is_ack_eliciting()
    );
    assert!(
        Frame::Ping.is_ack_eliciting() && stream.is_ack_eliciting() && crypto.is_ack_eliciting()
    );
    assert!(
        ack.allowed_in_long_header()
            && close_t.allowed_in_long_header()
            && crypto.allowed_in_long_header()
    );
    assert!(
        Frame::Ping.allowed_in_long_header() && Frame::Padding { len: 3 }.allowed_in_long_header()
    );
    assert!(!close_a.allowed_in_long_header() && !stream.allowed_in_long_header());
    assert!(!Frame::HandshakeDone.allowed_in_long_header());
    assert!(
        stream.allowed_in_zero_rtt() && !ack.allowed_in_zero_rtt() && !crypto.allowed_in_zero_rtt()
    );
    assert_eq!(close_t.ty(), 0x1c);
    assert_eq!(close_a.ty(), 0x1d);
    assert!(ack.clone().ty() == 0x02 && ack != close_t);
}

#[test]
#[allow(clippy::single_range_in_vec_init)] // a one-range ACK is the point
fn write_ack_layout() {
    // RFC 9000 §19.3.1 arithmetic: ranges [10,12] and [3,5]: gap = 10 - 5 - 2 = 3.
    let mut out = Vec::new();
    write_ack(&mut out, &[10..13, 3..6], 7, None);
    assert_eq!(out, [0x02, 12, 7, 1, 2, 3, 2]);
    assert_eq!(ack_frame_len(&[10..13, 3..6], 7, None), out.len());
    let Some(Ok(Frame::Ack(ack))) = FrameIter::new(&out).next() else {
        panic!()
    };
    assert_eq!(ack.ranges, vec![10..=12, 3..=5]);
    assert!(ack.contains(4) && !ack.contains(7) && !ack.contains(13));
    let ecn = EcnCounts {
        ect0: 1,
        ect1: 2,
        ce: 3,
    };
    out.clear();
    write_ack(&mut out, &[0..1], 0, Some(&ecn));
    assert_eq!(out, [0x03, 0, 0, 0, 0, 1, 2, 3]);
}

#[test]
fn hot_types_stay_small() {
    assert!(
        core::mem::size_of::<Frame<'_>>() <= 80,
        "{}",
        core::mem::size_of::<Frame<'_>>()
    );
}

proptest! {
    #[test]
    fn every_frame_round_trips(frame in arb_frame()) {
        let bytes = encoded(&frame);
        prop_assert_eq!(decode_all(&bytes), vec![Ok(frame.clone())]);
        prop_assert_eq!(crate::coding::Reader::new(&bytes).varint().unwrap(), frame.ty());
    }

    #[test]
    fn frame_sequences_round_trip(frames in proptest::collection::vec(arb_frame(), 0..10)) {
        let frames: Vec<_> = frames.into_iter().filter(|f| !matches!(f, Frame::Padding { .. })).collect();
        let mut out = Vec::new();
        for f in &frames {
            f.encode(&mut out);
        }
        let decoded: Vec<_> = decode_all(&out).into_iter().map(Result::unwrap).collect();
        prop_assert_eq!(decoded, frames);
    }

    #[test]
    fn truncation_never_decodes_the_whole_frame(frame in arb_frame(), cut_frac in 0.0f64..1.0) {
        let bytes = encoded(&frame);
        let cut = ((bytes.len() as f64) * cut_frac) as usize;
        if !matches!(frame, Frame::Padding { .. }) && cut > 0 && cut < bytes.len() {
            let err = first_err(&bytes[..cut]);
            prop_assert_eq!(err.error_code(), TransportErrorCode::FRAME_ENCODING_ERROR);
        }
    }

    #[test]
    fn header_writers_match_their_lengths(id in stream_id(), offset in 0..=(V62 - 70000), len in 0usize..70000, fin in any::<bool>()) {
        let mut out = Vec::new();
        write_stream_header(&mut out, id, offset, len, fin);
        prop_assert_eq!(out.len(), stream_header_len(id, offset, len));
        out.resize(out.len() + len, 0xab);
        let f = FrameIter::new(&out).next().unwrap().unwrap();
        prop_assert_eq!(f, Frame::Stream { id, offset, fin, data: &vec![0xab; len][..] });

        out.clear();
        write_crypto_header(&mut out, offset, len);
        prop_assert_eq!(out.len(), crypto_header_len(offset, len));
        out.clear();
        write_datagram_header(&mut out, len);
        prop_assert_eq!(out.len(), datagram_header_len(len));
    }

    #[test]
    fn capacities_are_tight(id in stream_id(), offset in varint(), space in 0usize..20000) {
        match stream_data_capacity(id, offset, space) {
            Some(n) => {
                prop_assert!(stream_header_len(id, offset, n) + n <= space);
                prop_assert!(stream_header_len(id, offset, n + 1) + n + 1 > space);
            }
            None => prop_assert!(stream_header_len(id, offset, 0) > space),
        }
        match crypto_data_capacity(offset, space) {
            Some(n) => {
                prop_assert!(crypto_header_len(offset, n) + n <= space);
                prop_assert!(crypto_header_len(offset, n + 1) + n + 1 > space);
            }
            None => prop_assert!(crypto_header_len(offset, 0) > space),
        }
        match datagram_data_capacity(space) {
            Some(n) => {
                prop_assert!(datagram_header_len(n) + n <= space);
                prop_assert!(datagram_header_len(n + 1) + n + 1 > space);
            }
            None => prop_assert!(datagram_header_len(0) > space),
        }
    }

    #[test]
    fn write_ack_matches_decoded_ranges(ack in arb_ack()) {
        let half_open: Vec<_> = ack.ranges.iter().map(|r| *r.start()..*r.end() + 1).collect();
        let mut out = Vec::new();
        write_ack(&mut out, &half_open, ack.delay, ack.ecn.as_ref());
        prop_assert_eq!(out.len(), ack_frame_len(&half_open, ack.delay, ack.ecn.as_ref()));
        prop_assert!(out.len() <= ack_frame_len_bound(half_open.len(), ack.ecn.is_some()));
        prop_assert_eq!(out, encoded(&Frame::Ack(ack)));
    }

    #[test]
    fn frame_iter_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut errors = 0;
        for f in FrameIter::new(&data) {
            match f {
                Ok(f) => {
                    let _ = (f.ty(), f.is_ack_eliciting());
                }
                Err(e) => {
                    errors += 1;
                    prop_assert_eq!(e.error_code(), TransportErrorCode::FRAME_ENCODING_ERROR);
                }
            }
        }
        prop_assert!(errors <= 1);
    }
}
