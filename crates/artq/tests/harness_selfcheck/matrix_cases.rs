//! The interop matrix (`interop_matrix.rs`): every case against quic-go's
//! own interop server, so that a case failing against artq fails because
//! of artq.

use super::*;

/// The matrix's `handshake` case against quic-go's interop server.
#[test]
fn matrix_handshake_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKE, QuicGo);
}

/// The matrix's `transfer` case against quic-go's interop server.
#[test]
fn matrix_transfer_against_quic_go_server() {
    matrix::run(&matrix::TRANSFER, QuicGo);
}

/// The matrix's `multiplexing` case against quic-go's interop server.
#[test]
fn matrix_multiplexing_against_quic_go_server() {
    matrix::run(&matrix::MULTIPLEXING, QuicGo);
}

/// The matrix's `chacha20` case against quic-go's interop server.
#[test]
fn matrix_chacha20_against_quic_go_server() {
    matrix::run(&matrix::CHACHA20, QuicGo);
}

/// The matrix's `keyupdate` case against quic-go's interop server.
#[test]
fn matrix_keyupdate_against_quic_go_server() {
    matrix::run(&matrix::KEYUPDATE, QuicGo);
}

/// The matrix's `retry` case against quic-go's interop server.
#[test]
fn matrix_retry_against_quic_go_server() {
    matrix::run(&matrix::RETRY, QuicGo);
}

/// The matrix's `handshakeloss` case against quic-go's interop server.
#[test]
fn matrix_handshakeloss_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKELOSS, QuicGo);
}

/// The matrix's `transferloss` case against quic-go's interop server.
#[test]
fn matrix_transferloss_against_quic_go_server() {
    matrix::run(&matrix::TRANSFERLOSS, QuicGo);
}

/// The matrix's `handshakecorruption` case against quic-go's interop server.
#[test]
fn matrix_handshakecorruption_against_quic_go_server() {
    matrix::run(&matrix::HANDSHAKECORRUPTION, QuicGo);
}

/// The matrix's `transfercorruption` case against quic-go's interop server.
#[test]
fn matrix_transfercorruption_against_quic_go_server() {
    matrix::run(&matrix::TRANSFERCORRUPTION, QuicGo);
}

/// The matrix's `blackhole` case against quic-go's interop server.
#[test]
fn matrix_blackhole_against_quic_go_server() {
    matrix::run(&matrix::BLACKHOLE, QuicGo);
}

/// The matrix's `amplificationlimit` case against quic-go's interop server.
#[test]
fn matrix_amplificationlimit_against_quic_go_server() {
    matrix::run(&matrix::AMPLIFICATIONLIMIT, QuicGo);
}

/// The matrix's key update after corruption against quic-go's interop server.
#[test]
fn matrix_keyupdate_after_corruption_against_quic_go_server() {
    matrix::run(&matrix::KEYUPDATE_AFTER_CORRUPTION, QuicGo);
}

/// The matrix's `resumption` case against quic-go's interop server.
#[test]
fn matrix_resumption_against_quic_go_server() {
    matrix::run(&matrix::RESUMPTION, QuicGo);
}

/// The matrix's `zerortt` case against quic-go's interop server.
#[test]
fn matrix_zerortt_against_quic_go_server() {
    matrix::run(&matrix::ZERORTT, QuicGo);
}

// The matrix's evidence checks can fail: each is fed a trace it must reject.

/// `resumption`'s evidence rejects two full handshakes (or one connection)
/// and accepts a full one beside a resumed one, whatever their order.
#[test]
fn resumption_check_rejects_two_full_handshakes() {
    use common::qlog::ConnectionLog;
    let log = |crypto| ConnectionLog {
        received_handshake_crypto: crypto,
        ..ConnectionLog::default()
    };
    assert!(matrix::check_resumed(&[log(592), log(590)]).is_err());
    assert!(matrix::check_resumed(&[log(592)]).is_err());
    assert!(matrix::check_resumed(&[log(0), log(592)]).is_err());
    assert!(matrix::check_resumed(&[log(151), log(592)]).is_ok());
    assert!(matrix::check_resumed(&[log(592), log(151)]).is_ok());
}

/// A v1 long-header packet of `kind` (0 Initial, 2 Handshake) with the given
/// connection IDs and `len` bytes in all.
fn long_packet(kind: u8, dcid: &[u8], scid: &[u8], len: usize) -> Vec<u8> {
    let mut p = vec![0xc0 | (kind << 4), 0, 0, 0, 1, dcid.len() as u8];
    p.extend_from_slice(dcid);
    p.push(scid.len() as u8);
    p.extend_from_slice(scid);
    if kind == 0 {
        p.push(0); // no token
    }
    let rest = len - p.len() - 2; // a 2-byte Length field
    p.extend_from_slice(&(0x4000u16 | rest as u16).to_be_bytes());
    p.resize(len, 0);
    p
}

/// A capture record `ms` after the start.
fn record(
    ms: u64,
    src: std::net::SocketAddr,
    dst: std::net::SocketAddr,
    payload: Vec<u8>,
) -> capture::Record {
    capture::Record {
        at: Duration::from_millis(ms),
        src,
        dst,
        payload,
    }
}

/// Coalesced long headers are walked to the end, a short header ends the
/// datagram, and a header cut short is reported unreadable.
#[test]
fn capture_walks_coalesced_quic_headers() {
    let mut d = long_packet(0, b"12345678", b"abcd", 300);
    d.extend(long_packet(2, b"12345678", b"abcd", 200));
    d.extend([0x40, 1, 2, 3]);
    let kinds: Vec<(capture::PacketKind, usize)> = capture::quic_packets(&d)
        .iter()
        .map(|p| (p.kind, p.len))
        .collect();
    assert_eq!(
        kinds,
        [
            (capture::PacketKind::Initial, 300),
            (capture::PacketKind::Handshake, 200),
            (capture::PacketKind::Short, 4)
        ]
    );
    let cut = &d[..250];
    let kinds: Vec<capture::PacketKind> =
        capture::quic_packets(cut).iter().map(|p| p.kind).collect();
    assert_eq!(kinds, [capture::PacketKind::Unreadable]);
    let vn = [0x80u8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    assert_eq!(
        capture::quic_packets(&vn)[0].kind,
        capture::PacketKind::VersionNegotiation
    );
}

/// The amplification check rejects a server that sends four times what it
/// received before validation, or too little Handshake data, or a client
/// that never validates; it accepts 3x and notes an overshoot below 4x.
#[test]
fn capture_amplification_check_rejects_what_it_must() {
    let (client, server) = (
        "127.0.0.1:5000".parse().expect("addr"),
        "127.0.0.1:443".parse().expect("addr"),
    );
    let initial = || long_packet(0, b"cccccccc", b"dd", 1200);
    let flight = |n: usize| long_packet(2, b"dd", b"ss", n);
    let validate = record(50, client, server, long_packet(2, b"ss", b"dd", 50));
    let trace = |sent: &[usize]| {
        let mut t = vec![record(0, client, server, initial())];
        for (i, n) in sent.iter().enumerate() {
            t.push(record(10 + i as u64, server, client, flight(*n)));
        }
        t.push(validate.clone());
        t.push(record(60, server, client, flight(1200)));
        t
    };
    let ok = capture::check_amplification(&trace(&[1200, 1200, 1200]), server, 3000)
        .expect("exactly 3x is allowed");
    assert!(ok.contains("within 3x"), "{ok}");
    let slid = capture::check_amplification(&trace(&[1200, 1200, 1200, 500]), server, 3000)
        .expect("under 4x slides, as in the runner");
    assert!(slid.contains("500 bytes over 3x"), "{slid}");
    let err = capture::check_amplification(&trace(&[1200, 1200, 1200, 1200]), server, 3000)
        .expect_err("4x is a violation");
    assert!(err.contains("4800 bytes"), "{err}");
    let err = capture::check_amplification(&trace(&[1200]), server, 3000)
        .expect_err("the chain was not sent");
    assert!(err.contains("Handshake"), "{err}");
    let mut never = trace(&[1200]);
    never.retain(|r| r.at != validate.at);
    let err = capture::check_amplification(&never, server, 0).expect_err("never validated");
    assert!(err.contains("never validated"), "{err}");
}

/// The outage check needs the server active on both sides of the window and
/// no client datagram inside it.
#[test]
fn capture_outage_check_rejects_what_it_must() {
    let (client, server) = (
        "127.0.0.1:5000".parse().expect("addr"),
        "127.0.0.1:443".parse().expect("addr"),
    );
    let (from, until) = (Duration::from_millis(1000), Duration::from_millis(2000));
    let mut t = vec![
        record(500, server, client, vec![0x40; 10]),
        record(2500, server, client, vec![0x40; 10]),
    ];
    capture::check_outage_spanned(&t, server, from, until).expect("spans the outage");
    t.push(record(1500, client, server, vec![0x40; 10]));
    t.sort_by_key(|r| r.at);
    let err = capture::check_outage_spanned(&t, server, from, until).expect_err("leak");
    assert!(err.contains("inside the outage"), "{err}");
    let early = vec![record(500, server, client, vec![0x40; 10])];
    let err = capture::check_outage_spanned(&early, server, from, until).expect_err("ended");
    assert!(err.contains("did not fall inside"), "{err}");
}

/// What the relay's pcap writer writes, the matrix's reader reads back.
#[test]
fn capture_reads_what_the_relay_writes() {
    let scratch = Scratch::new();
    let path = scratch.path().join("x.pcap");
    let mut out = Vec::new();
    netem::pcap::write_header(&mut out).expect("vec");
    let v4: (std::net::SocketAddr, std::net::SocketAddr) = (
        "127.0.0.1:1".parse().expect("addr"),
        "127.0.0.1:2".parse().expect("addr"),
    );
    let v6: std::net::SocketAddr = "[::1]:3".parse().expect("addr");
    netem::pcap::write_record(
        &mut out,
        Duration::from_micros(1_250_000),
        v4.0,
        v4.1,
        b"abc",
    )
    .expect("vec");
    netem::pcap::write_record(&mut out, Duration::from_secs(2), v6, v6, b"").expect("vec");
    std::fs::write(&path, &out).expect("write");
    let records = capture::read_pcap(&path).expect("reads");
    assert_eq!(records.len(), 2);
    assert_eq!(
        (
            records[0].at,
            records[0].src,
            records[0].dst,
            records[0].payload.as_slice()
        ),
        (Duration::from_micros(1_250_000), v4.0, v4.1, &b"abc"[..])
    );
    assert_eq!((records[1].src, records[1].payload.len()), (v6, 0));
    std::fs::write(&path, &out[..out.len() - 1]).expect("write");
    assert!(
        capture::read_pcap(&path).is_err(),
        "a cut record is an error"
    );
}

/// The qlog summary counts what the matrix's checks read, and skips a line
/// cut short.
#[test]
fn qlog_summary_reads_quic_go_events() {
    let scratch = Scratch::new();
    let lines = [
        r#"{"qlog_format":"JSON-SEQ"}"#,
        "\u{1e}{\"time\":1,\"name\":\"transport:parameters_set\",\"data\":{\"initiator\":\"remote\",\"initial_max_streams_bidi\":100}}",
        r#"{"time":2,"name":"transport:packet_received","data":{"header":{"packet_type":"retry"}}}"#,
        r#"{"time":3,"name":"transport:packet_sent","data":{"header":{"packet_type":"1RTT","key_phase_bit":true}}}"#,
        r#"{"time":4,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","key_phase_bit":false}}}"#,
        r#"{"time":5,"name":"transport:packet_received","data":{"header":{"packet_type":"1RTT","key_phase_bit":true}}}"#,
        r#"{"time":6,"name":"transport:connection_closed","data":{"trigger":"idle_timeout"}}"#,
        r#"{"time":7,"name":"transport:packet_sent","data":{"hea"#,
    ];
    std::fs::write(scratch.path().join("a.sqlog"), lines.join("\n")).expect("write");
    std::fs::write(scratch.path().join("b.txt"), "not a qlog").expect("write");
    let logs = common::qlog::read_dir(scratch.path()).expect("reads");
    assert_eq!(logs.len(), 1);
    let c = &logs[0];
    assert_eq!(
        (
            c.retries_received,
            c.sent_key_phase_1,
            c.received_key_phase_1,
            c.received_1rtt
        ),
        (1, 1, 1, 2)
    );
    assert_eq!(c.peer_max_streams_bidi, Some(100));
    assert!(c
        .closed
        .as_deref()
        .is_some_and(|s| s.contains("idle_timeout")));
}
