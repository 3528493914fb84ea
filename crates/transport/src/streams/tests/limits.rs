//! What writes may take (the peer's credit plus `send_ahead`, the send
//! buffers), `Writable` when room opens, and the cap on received pieces.

use super::*;

/// A client whose peer (the server) grants `conn` bytes of connection
/// credit and `stream` per stream, and that may run `ahead` past them.
fn writer(conn: u64, stream: u64, ahead: u64) -> Streams {
    let client = StreamsConfig {
        send_ahead: ahead,
        ..StreamsConfig::default()
    };
    pair(client, config(conn, stream, 1 << 20, 10)).0
}

#[test]
fn writes_stop_at_the_peers_credit_plus_send_ahead() {
    let mut c = writer(100_000, 1000, 500);
    let id = c.open(Dir::Uni).unwrap();
    assert_eq!(c.write_room(id), Ok(1500));
    assert_eq!(c.write(id, &[1; 5000]), Ok(1500));
    assert_eq!(c.write(id, &[1; 10]), Err(WriteError::Blocked));
    assert_eq!(c.write(id, &[]), Ok(0), "an empty write is not refused");
    assert_eq!(events(&mut c), vec![]);
    // Sending does not open room: the bytes are still held until acked.
    let sent = c.poll_chunk(2000).unwrap();
    assert_eq!(sent.len, 1000, "only the credit goes out");
    assert_eq!(c.write_room(id), Ok(0));
    c.on_max_stream_data(id, 3000).unwrap();
    assert_eq!(events(&mut c), vec![StreamEvent::Writable { id }]);
    assert_eq!(
        c.write_room(id),
        Ok(2000),
        "new credit plus send_ahead past it"
    );
    c.on_max_stream_data(id, 4000).unwrap();
    assert_eq!(events(&mut c), vec![], "Writable once per blocked write");
}

#[test]
fn streams_share_the_connection_credit() {
    // Streams of 1000 bytes of credit, a connection of 1500, 500 ahead.
    let mut c = writer(1500, 1000, 500);
    let a = c.open(Dir::Uni).unwrap();
    let b = c.open(Dir::Uni).unwrap();
    let d = c.open(Dir::Uni).unwrap();
    let e = c.open(Dir::Uni).unwrap();
    assert_eq!(
        c.write(a, &[1; 5000]),
        Ok(1500),
        "its credit and 500 past it"
    );
    assert_eq!(
        c.write(b, &[2; 5000]),
        Ok(1000),
        "its credit (2000 within credit: the connection's 1500 plus 500); \
         the 500 past credit are a's"
    );
    // The connection's allowance is used up, but every stream may hold
    // 500 of its own: the peer gets data on every stream it reads.
    assert_eq!(c.write(d, &[3; 5000]), Ok(500));
    assert_eq!(c.write(d, &[3; 5000]), Err(WriteError::Blocked));
    assert_eq!(c.send_buffered_total(), 3000);
    c.on_max_data(3500);
    assert_eq!(events(&mut c), vec![StreamEvent::Writable { id: d }]);
    assert_eq!(c.write(d, &[3; 5000]), Ok(500), "the rest of its credit");
    assert_eq!(c.write(e, &[4; 5000]), Ok(1000));
    // Both levels of credit are respected on the wire, and the connection's
    // is spread over the streams with data (round robin).
    let mut sent = [0u64; 4];
    while let Some(ch) = c.poll_chunk(600) {
        let k = [a, b, d, e].iter().position(|&s| s == ch.id).unwrap();
        sent[k] += u64::from(ch.len);
    }
    assert_eq!(sent.iter().sum::<u64>(), 3500);
    assert!(sent.iter().all(|&n| n > 0), "{sent:?}");
}

#[test]
fn the_connection_send_buffer_caps_every_stream_together() {
    let client = StreamsConfig {
        connection_send_buffer: 3000,
        ..StreamsConfig::default()
    };
    let (mut c, _) = pair(client, StreamsConfig::default());
    let a = c.open(Dir::Uni).unwrap();
    let b = c.open(Dir::Uni).unwrap();
    assert_eq!(c.write(a, &[1; 2000]), Ok(2000));
    assert_eq!(c.write(b, &[2; 2000]), Ok(1000));
    let first = c.poll_chunk(1200).unwrap();
    assert_eq!(
        c.write_room(b),
        Ok(0),
        "sent but unacknowledged still counts"
    );
    c.on_chunk_acked(&first);
    assert_eq!(events(&mut c), vec![StreamEvent::Writable { id: b }]);
    assert_eq!(c.write_room(b), Ok(u64::from(first.len)));
    // A reset gives its bytes back.
    c.reset(a, 0).unwrap();
    assert_eq!(c.send_buffered_total(), 1000);
}

#[test]
fn fragmented_stream_data_is_closed_past_the_piece_limit() {
    let server = StreamsConfig {
        max_receive_pieces: 10,
        ..StreamsConfig::default()
    };
    let (_, mut s) = pair(StreamsConfig::default(), server);
    // One byte every other offset: each is a piece of its own.
    for k in 0..10u64 {
        s.on_stream_frame(C0, 2 * k + 1, b"x", false).unwrap();
    }
    assert_eq!(s.recv_pieces(), 10);
    assert_eq!(
        code(s.on_stream_frame(C0, 21, b"x", false)),
        Code::PROTOCOL_VIOLATION
    );
    // Contiguous data costs no new pieces; reading and stopping free them.
    let (_, mut s) = pair(
        StreamsConfig::default(),
        StreamsConfig {
            max_receive_pieces: 10,
            ..StreamsConfig::default()
        },
    );
    for k in 0..1000u64 {
        s.on_stream_frame(C0, k * 10, &[7; 10], false).unwrap();
    }
    assert_eq!(s.recv_pieces(), 1);
    for k in 0..5u64 {
        s.on_stream_frame(StreamId(4), 2 * k + 1, b"y", false)
            .unwrap();
    }
    assert_eq!(s.recv_pieces(), 6);
    let mut buf = [0u8; 10_000];
    assert_eq!(s.read(C0, &mut buf), Ok(Some(10_000)));
    assert_eq!(s.recv_pieces(), 5);
    s.stop_sending(StreamId(4), 0).unwrap();
    assert_eq!(s.recv_pieces(), 0);
}

/// Sends `c`'s data until at most `left` of the `written` bytes are
/// unsent, checking that no event comes before.
fn send_until_unsent(c: &mut Streams, sent: &mut u64, written: u64, left: u64) {
    while written - *sent > left {
        assert_eq!(events(c), vec![], "woken with {} unsent", written - *sent);
        *sent += c.poll_chunk(1200).map_or(0, |ch| u64::from(ch.len));
    }
}

#[test]
fn the_unsent_limit_stops_writes_and_sending_half_of_it_wakes_them() {
    const AHEAD: u64 = 64 << 10;
    let client = StreamsConfig {
        unsent_limit: Some(300_000),
        send_ahead: AHEAD,
        ..StreamsConfig::default()
    };
    let (mut c, _) = pair(client, StreamsConfig::default());
    let a = c.open(Dir::Uni).unwrap();
    let b = c.open(Dir::Uni).unwrap();
    assert_eq!(c.write(a, &[1; 250_000]), Ok(250_000));
    // Past the limit, a stream may still hold its own allowance, so that
    // a peer reading its streams in any order gets data on each.
    assert_eq!(c.write(b, &[2; 100_000]), Ok(AHEAD as usize));
    assert_eq!(c.write_room(a), Ok(0));
    assert_eq!(c.write(a, &[1; 10]), Err(WriteError::Blocked));
    let written = 250_000 + AHEAD;
    // Sent bytes leave the count at once (acknowledgements are not needed),
    // but the writers wake only once half of the limit is free.
    let mut sent = 0u64;
    send_until_unsent(&mut c, &mut sent, written, 150_000);
    assert_eq!(
        events(&mut c),
        vec![
            StreamEvent::Writable { id: a },
            StreamEvent::Writable { id: b }
        ]
    );
    let room = 300_000 - (written - sent);
    assert_eq!(c.write_room(a), Ok(room));
    // An application that finds no room and asks to be told (the server's
    // pump) is told the same way.
    assert_eq!(c.write(a, &vec![1; room as usize]), Ok(room as usize));
    let written = written + room;
    c.notify_writable(a);
    assert_eq!(events(&mut c), vec![]);
    send_until_unsent(&mut c, &mut sent, written, 150_000);
    assert_eq!(events(&mut c), vec![StreamEvent::Writable { id: a }]);
}

#[test]
fn without_an_unsent_limit_only_credit_and_buffers_bound_writes() {
    let (mut c, _) = pair(StreamsConfig::default(), StreamsConfig::default());
    let a = c.open(Dir::Uni).unwrap();
    assert_eq!(c.write(a, &[1; 100_000]), Ok(100_000));
}
