//! How a server endpoint admits clients (issue 15, bugs 4 and 5): no state
//! for Initials that do not decrypt, bounded state for addresses not yet
//! validated, freed slots and routes, Retry with its integrity tag and
//! tokens on both sides, NEW_TOKEN for later connections. Everything goes
//! through real endpoints and connections (`test_pair::Pair`); hostile
//! packets are built with the public wire and crypto APIs, as an attacker
//! would.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use transport::crypto;
use transport::test_pair::{self, Pair};
use transport::{
    AdmissionConfig, ConnectionError, ConnectionHandle, Endpoint, EndpointConfig, Event, RetryMode,
    TransportConfig,
};
use wire::cid::ConnectionId;
use wire::frame::{self, Frame, FrameIter};
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::{Duration, Instant};
use wire::Side;

const INVALID_TOKEN: u64 = 0x0b;
const TRANSPORT_PARAMETER_ERROR: u64 = 0x08;

fn addr(i: u32, port: u16) -> SocketAddr {
    SocketAddr::from(([10, (i >> 16) as u8, (i >> 8) as u8, i as u8], port))
}

/// A server endpoint for `pair`'s client with these admission settings.
fn server(admission: AdmissionConfig) -> Endpoint {
    let config = test_pair::server_config(TransportConfig::default());
    Endpoint::new(EndpointConfig::server(7, config).with_admission(admission))
}

/// A pair whose server runs with `admission`.
fn pair_with(admission: AdmissionConfig) -> Pair {
    let mut pair = Pair::default_pair();
    pair.server = server(admission);
    pair
}

fn always_retry() -> AdmissionConfig {
    AdmissionConfig {
        retry: RetryMode::Always,
        ..AdmissionConfig::default()
    }
}

/// The kinds of junk a flood carries.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Junk {
    /// Random bytes (the header form bit set, so mostly unknown versions).
    Random,
    /// Random bytes after a v1 Initial's first byte and version.
    RandomV1,
    /// A well-formed v1 Initial header (DCID of 8 to 20 bytes, a Length
    /// that matches) around a garbage payload.
    WellFormed,
}

/// 1200 to 1400 bytes of `kind` junk.
fn junk_initial(rng: &mut ChaCha8Rng, kind: Junk) -> Vec<u8> {
    let size = rng.gen_range(1200..=1400);
    let mut d = vec![0u8; size];
    rng.fill_bytes(&mut d);
    match kind {
        Junk::Random => {
            d[0] |= 0x80;
            return d;
        }
        Junk::RandomV1 => {
            d[0] = 0xc0 | (d[0] & 0x0f);
            d[1..5].copy_from_slice(&packet::QUIC_V1.to_be_bytes());
            return d;
        }
        Junk::WellFormed => {}
    }
    let mut out = Vec::with_capacity(size);
    let dcid_len = rng.gen_range(8..=20);
    let scid_len = rng.gen_range(0..=20);
    out.push(0xc0 | rng.gen_range(0..4u8));
    out.extend_from_slice(&packet::QUIC_V1.to_be_bytes());
    out.push(dcid_len);
    out.extend_from_slice(&d[..usize::from(dcid_len)]);
    out.push(scid_len);
    out.extend_from_slice(&d[20..20 + usize::from(scid_len)]);
    out.push(0); // no token
    let rest = size - out.len() - 2;
    out.push(0x40 | (rest >> 8) as u8);
    out.push(rest as u8);
    out.extend_from_slice(&d[out.len()..size]);
    out.resize(size, 0);
    out
}

/// The first datagram of a fresh client (its Initial with a ClientHello),
/// and that Initial's Destination Connection ID.
fn client_first_datagram(seed: u64, server: SocketAddr) -> (Vec<u8>, ConnectionId) {
    let mut client = Endpoint::new(EndpointConfig::client(seed));
    let config = test_pair::client_config(TransportConfig::default());
    client
        .connect(Instant::ZERO, &config, server)
        .expect("client connects");
    let mut buf = Vec::new();
    let t = client
        .poll_transmit(Instant::ZERO, &mut buf)
        .expect("a first flight");
    buf.truncate(t.size);
    let dcid = *packet::decode_protected(&buf, 8).unwrap().dst_cid();
    (buf, dcid)
}

/// The header fields of the first packet of a datagram, if it is a long one.
struct Long {
    ty: LongType,
    dcid: ConnectionId,
    scid: ConnectionId,
    token: Vec<u8>,
}

fn long_header(d: &[u8]) -> Option<Long> {
    match packet::decode_protected(d, 8).ok()? {
        ProtectedHeader::Long {
            ty,
            dst_cid,
            src_cid,
            token,
            ..
        } => Some(Long {
            ty,
            dcid: dst_cid,
            scid: src_cid,
            token: token.to_vec(),
        }),
        ProtectedHeader::Retry {
            dst_cid,
            src_cid,
            token,
            ..
        } => Some(Long {
            ty: LongType::Retry,
            dcid: dst_cid,
            scid: src_cid,
            token: token.to_vec(),
        }),
        _ => None,
    }
}

/// The CRYPTO bytes at offset 0 of a client's Initial (its ClientHello),
/// decrypted as any on-path observer can.
fn client_hello(datagram: &[u8]) -> Vec<u8> {
    let ProtectedHeader::Long {
        dst_cid,
        pn_offset,
        len,
        ..
    } = packet::decode_protected(datagram, 8).unwrap()
    else {
        panic!("not a long header");
    };
    let keys = crypto::initial_keys(&dst_cid, Side::Server, wire::Version::V1);
    let mut p = datagram[..len].to_vec();
    let (_, pn_len, truncated) =
        crypto::remove_header_protection(&*keys.remote.header, &mut p, pn_offset).unwrap();
    let pn = packet::decode_pn(None, u64::from(truncated), pn_len);
    let range = crypto::open(&*keys.remote.packet, &mut p, pn_offset + pn_len, pn).unwrap();
    for f in FrameIter::new(&p[range]) {
        if let Ok(Frame::Crypto { offset: 0, data }) = f {
            return data.to_vec();
        }
    }
    panic!("no ClientHello in the client's Initial");
}

/// A client Initial of 1200 bytes protected with the client Initial keys
/// of `dcid`, carrying `frames` then PADDING.
fn seal_client_initial(
    dcid: &ConnectionId,
    scid: &ConnectionId,
    pn: u64,
    frames: &[u8],
) -> Vec<u8> {
    let keys = crypto::initial_keys(dcid, Side::Client, wire::Version::V1);
    let mut out = Vec::new();
    let layout = packet::write_long_header(
        &mut out,
        LongType::Initial,
        wire::Version::V1,
        dcid,
        scid,
        &[],
        pn,
        4,
    );
    out.extend_from_slice(frames);
    out.resize(1200 - crypto::TAG_LEN, 0);
    out.resize(1200, 0);
    packet::set_long_length(&mut out, &layout, 1200);
    crypto::seal(&keys.local, &mut out, layout.pn_offset, 4, pn).unwrap();
    out
}

fn crypto_frame(offset: u64, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::write_crypto_header(&mut f, offset, data.len());
    f.extend_from_slice(data);
    f
}

/// A Retry for a client whose SCID is `client_scid` and whose first DCID
/// was `original_dcid`, with `token`; `good_tag` false flips a tag bit.
fn forged_retry(
    client_scid: &ConnectionId,
    original_dcid: &ConnectionId,
    token: &[u8],
    good_tag: bool,
) -> (Vec<u8>, ConnectionId) {
    let retry_scid = ConnectionId::new(&[0xee; 8]).unwrap();
    let mut out = Vec::new();
    packet::write_retry(
        &mut out,
        wire::Version::V1,
        client_scid,
        &retry_scid,
        token,
        0,
    );
    let mut tag = crypto::retry_integrity_tag(wire::Version::V1, original_dcid, &out).unwrap();
    if !good_tag {
        tag[3] ^= 0x10;
    }
    out.extend_from_slice(&tag);
    (out, retry_scid)
}

/// Every datagram the client sends, recorded by a drop hook that drops
/// those `drop` selects.
type Sent = Rc<RefCell<Vec<(Instant, Vec<u8>)>>>;

fn record_client(pair: &mut Pair, mut drop: impl FnMut(Instant, &[u8]) -> bool + 'static) -> Sent {
    let sent: Sent = Rc::default();
    let log = sent.clone();
    pair.drop = Some(Box::new(move |now, to_server, d, _| {
        if !to_server {
            return false;
        }
        log.borrow_mut().push((now, d.to_vec()));
        drop(now, d)
    }));
    sent
}

/// Drive until the client connection is lost; its reason.
fn client_loss(pair: &mut Pair, limit: Duration) -> Option<ConnectionError> {
    let mut reason = None;
    pair.drive_until(limit, |p| {
        while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
            if let Event::ConnectionLost(e) = ev {
                reason = Some(e);
            }
        }
        reason.is_some()
    });
    reason
}

/// Open a new client connection on the pair's client endpoint, making it
/// the pair's connection.
fn reconnect(pair: &mut Pair) -> ConnectionHandle {
    let cfg = test_pair::client_config(TransportConfig::default());
    let h = pair
        .client
        .connect(pair.now, &cfg, pair.server_addr)
        .expect("connect");
    pair.client_conn = Some(h);
    pair.server_conn = None;
    h
}

/// Close the pair's connection and drive until the server forgot it
/// (the application read every event, so the endpoint may reap it).
fn close_and_drain(pair: &mut Pair) {
    let now = pair.now;
    pair.client().close(now, 0, b"bye");
    pair.drive_until(Duration::from_secs(30), |p| {
        for h in p.server.handles() {
            while p
                .server
                .connection_mut(h)
                .and_then(|c| c.poll_event())
                .is_some()
            {}
        }
        for h in p.client.handles() {
            while p
                .client
                .connection_mut(h)
                .and_then(|c| c.poll_event())
                .is_some()
            {}
        }
        p.server.poll_timeout().is_none() && p.client.poll_timeout().is_none()
    });
    // Reaping happens on the next call into the endpoints.
    let now = pair.now;
    pair.server.handle_timeout(now);
    pair.client.handle_timeout(now);
}

/// Bug 4: thousands of junk Initials from thousands of addresses (random
/// bytes, and well-formed headers around garbage) create no connection and
/// leave no route; the server answers none of them (but Version
/// Negotiation for unknown versions) and then serves a real client at once.
/// On the old endpoint every well-formed one became a connection, until the
/// 4096-slot table was full for 30 s.
#[test]
fn junk_initials_create_no_state_and_a_client_still_connects() {
    let mut pair = Pair::default_pair();
    let mut rng = ChaCha8Rng::seed_from_u64(15);
    let kinds = [
        Junk::Random,
        Junk::RandomV1,
        Junk::WellFormed,
        Junk::WellFormed,
    ];
    for i in 0..10_000u32 {
        let mut d = junk_initial(&mut rng, kinds[i as usize % kinds.len()]);
        let from = addr(i, 1024 + (i % 50_000) as u16);
        pair.server.handle_datagram(pair.now, from, None, &mut d);
    }
    assert_eq!(pair.server.len(), 0, "junk Initials created connections");
    // Unknown versions may get Version Negotiation (RFC 9000 §6.1), no
    // larger than what asked for it and bounded in number; nothing else.
    let mut buf = Vec::new();
    let mut answers = 0;
    while let Some(t) = pair.server.poll_transmit(pair.now, &mut buf) {
        answers += 1;
        assert!(
            matches!(
                packet::decode_protected(&buf[..t.size], 8),
                Ok(ProtectedHeader::VersionNegotiation { .. })
            ),
            "the server answered junk with something else"
        );
    }
    assert!(answers <= 256, "{answers} answers");
    let stats = pair.server.stats();
    assert_eq!(
        (stats.routes, stats.initial_routes, stats.unvalidated),
        (0, 0, 0)
    );
    assert!(stats.initials_dropped >= 5000, "{stats:?}");
    // A real client is served as if nothing happened.
    pair.connect_within(Duration::from_secs(2));
    assert_eq!(pair.server.len(), 1);
}

/// Bug 4: connections that ended give back their slot and every route:
/// after many connections have come and gone the server holds nothing,
/// and handles are never reused.
#[test]
fn ended_connections_free_their_slots_and_routes() {
    let mut pair = Pair::default_pair();
    let mut handles = Vec::new();
    for round in 0..12 {
        if round > 0 {
            reconnect(&mut pair);
        }
        pair.connect();
        handles.push(pair.server_conn.expect("server connection"));
        assert!(pair.server.stats().routes >= 2, "spare CIDs are routed");
        close_and_drain(&mut pair);
        let s = pair.server.stats();
        assert_eq!(
            (s.connections, s.routes, s.initial_routes, s.unvalidated),
            (0, 0, 0, 0),
            "round {round}: state left behind: {s:?}"
        );
        assert_eq!(pair.client.stats().connections, 0);
    }
    let mut unique = handles.clone();
    unique.dedup();
    assert_eq!(unique, handles, "a handle was reused");
}

/// Bug 4: Initials that do decrypt (anyone can make them: the keys derive
/// from a public value) create unvalidated state only up to the bounds,
/// per source address and in total; with Retry disabled the rest is
/// dropped.
#[test]
fn unvalidated_state_is_bounded_per_source_and_in_total() {
    let admission = AdmissionConfig {
        retry: RetryMode::Never,
        max_unvalidated: 40,
        max_unvalidated_per_source: 5,
        ..AdmissionConfig::default()
    };
    let mut ep = server(admission);
    let server_addr = SocketAddr::from(([127, 0, 0, 1], 4433));
    let now = Instant::ZERO;
    // One address, many ports: five connections.
    for i in 0..30u64 {
        let (mut d, _) = client_first_datagram(1000 + i, server_addr);
        ep.handle_datagram(now, addr(1, 2000 + i as u16), None, &mut d);
    }
    let s = ep.stats();
    assert_eq!((s.connections, s.unvalidated, s.refused), (5, 5, 25));
    // Many addresses: forty in total.
    for i in 0..100u32 {
        let (mut d, _) = client_first_datagram(5000 + u64::from(i), server_addr);
        ep.handle_datagram(now, addr(100 + i, 3000), None, &mut d);
    }
    let s = ep.stats();
    assert_eq!((s.connections, s.unvalidated), (40, 40), "{s:?}");
    assert_eq!(s.refused, 25 + 65);
}

/// Bug 4/5: past the automatic threshold, clients are asked to Retry
/// instead of adding state; a real client then completes through the
/// Retry.
#[test]
fn retry_is_automatic_under_load() {
    let mut pair = pair_with(AdmissionConfig {
        retry: RetryMode::WhenUnvalidatedAtLeast(3),
        ..AdmissionConfig::default()
    });
    let server_addr = pair.server_addr;
    for i in 0..3u32 {
        let (mut d, _) = client_first_datagram(900 + u64::from(i), server_addr);
        pair.server
            .handle_datagram(pair.now, addr(50 + i, 999), None, &mut d);
    }
    // Their answers go nowhere.
    let mut buf = Vec::new();
    while pair.server.poll_transmit(pair.now, &mut buf).is_some() {}
    assert_eq!(pair.server.stats().unvalidated, 3);
    let data = test_pair::content(50_000, 1);
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_accepted), (1, 1));
    assert!(pair.client().was_retried() && pair.server().was_retried());
}

/// Bug 4: a ClientHello split over two Initials that arrive in the wrong
/// order (as Chromium's may) is accepted: the first datagram's CRYPTO does
/// not start at 0, yet it creates (half-open) state, and the handshake
/// completes once the start arrives.
#[test]
fn split_client_hello_out_of_order_is_accepted() {
    let mut pair = Pair::default_pair();
    // Take the client's first flight off the network until it has sent two
    // Initials (the first and a PTO probe): the two packets made here reuse
    // their packet numbers, so the server's ACKs name packets it sent.
    let sent = record_client(&mut pair, |_, _| true);
    pair.drive_until(Duration::from_secs(5), |_| sent.borrow().len() >= 2);
    let original = sent.borrow()[0].1.clone();
    let hello = client_hello(&original);
    let head = long_header(&original).unwrap();
    let cut = hello.len() / 2;
    let tail = seal_client_initial(
        &head.dcid,
        &head.scid,
        0,
        &crypto_frame(cut as u64, &hello[cut..]),
    );
    let start = seal_client_initial(&head.dcid, &head.scid, 1, &crypto_frame(0, &hello[..cut]));
    pair.drop = None;
    pair.inject_to_server(tail);
    pair.step();
    let s = pair.server.stats();
    assert_eq!((s.connections, s.half_open), (1, 1), "{s:?}");
    pair.inject_to_server(start);
    pair.connect_within(Duration::from_secs(5));
    let s = pair.server.stats();
    assert_eq!((s.half_open, s.unvalidated), (0, 0), "{s:?}");
}

/// Bug 4: half-open state is short-lived: a first Initial whose
/// ClientHello never completes is forgotten after the half-open timeout,
/// routes and all.
#[test]
fn half_open_connections_expire() {
    let mut ep = server(AdmissionConfig::default());
    let dcid = ConnectionId::new(&[3; 8]).unwrap();
    let scid = ConnectionId::new(&[4; 8]).unwrap();
    let mut d = seal_client_initial(&dcid, &scid, 0, &crypto_frame(900, &[0x55; 300]));
    let from = addr(9, 9);
    let h = ep
        .handle_datagram(Instant::ZERO, from, None, &mut d)
        .expect("a decryptable Initial with CRYPTO creates state");
    assert_eq!(ep.stats().half_open, 1);
    let deadline = ep.poll_timeout().expect("a deadline");
    assert!(
        deadline <= Instant::ZERO + Duration::from_secs(3),
        "{deadline:?}"
    );
    ep.handle_timeout(Instant::ZERO + Duration::from_secs(3));
    let s = ep.stats();
    assert_eq!((s.half_open, s.unvalidated, s.half_open_expired), (0, 0, 1));
    let conn = ep
        .connection_mut(h)
        .expect("kept until its events are read");
    assert!(matches!(
        conn.poll_event(),
        Some(Event::ConnectionLost(ConnectionError::TimedOut))
    ));
    ep.handle_timeout(Instant::ZERO + Duration::from_secs(4));
    let s = ep.stats();
    assert_eq!((s.connections, s.routes, s.initial_routes), (0, 0, 0));
}

/// Bug 5: `--retry`: the client follows the Retry (new DCID, the token in
/// its Initials), both sides check the Retry's connection IDs through the
/// transport parameters, and the transfer completes.
#[test]
fn retry_round_trip_completes_and_carries_the_token() {
    let mut pair = pair_with(always_retry());
    let sent = record_client(&mut pair, |_, _| false);
    let data = test_pair::content(200_000, 2);
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    let s = pair.server.stats();
    assert_eq!(
        (s.retries_sent, s.tokens_accepted, s.connections),
        (1, 1, 1),
        "{s:?}"
    );
    assert!(pair.client().was_retried() && pair.server().was_retried());
    let initials: Vec<Long> = sent
        .borrow()
        .iter()
        .filter_map(|(_, d)| long_header(d))
        .filter(|h| h.ty == LongType::Initial)
        .collect();
    assert!(initials.len() >= 2);
    assert!(initials[0].token.is_empty());
    assert!(
        !initials[1].token.is_empty(),
        "the retried Initial carries the token"
    );
    assert_ne!(initials[0].dcid, initials[1].dcid, "a new DCID after Retry");
    assert_eq!(
        initials[0].scid, initials[1].scid,
        "the client's SCID stays"
    );
}

/// Bug 5: a Retry whose integrity tag does not verify is ignored (RFC 9001
/// §5.8); one that verifies is followed, and when it did not come from the
/// server the transport parameters expose it (RFC 9000 §7.3).
#[test]
fn retry_integrity_tag_is_checked() {
    for good_tag in [false, true] {
        let mut pair = Pair::default_pair();
        let sent = record_client(&mut pair, |_, _| false);
        pair.step();
        let first = long_header(&sent.borrow()[0].1).unwrap();
        let (mut retry, retry_scid) =
            forged_retry(&first.scid, &first.dcid, b"\x07forged", good_tag);
        let (now, from) = (pair.now, pair.server_addr);
        pair.client.handle_datagram(now, from, None, &mut retry);
        if good_tag {
            // Followed: the next Initial goes to the Retry's SCID with the
            // token, and the server's parameters then give the forgery away.
            let reason = client_loss(&mut pair, Duration::from_secs(10));
            assert!(
                matches!(&reason, Some(ConnectionError::Transport(e)) if e.code.0 == TRANSPORT_PARAMETER_ERROR),
                "{reason:?}"
            );
            let followed = sent.borrow().iter().any(|(_, d)| {
                long_header(d).is_some_and(|h| h.dcid == retry_scid && h.token == b"\x07forged")
            });
            assert!(followed, "the client did not follow a valid Retry");
        } else {
            pair.connect();
            assert!(!pair.client().was_retried());
            let tokens = sent
                .borrow()
                .iter()
                .filter_map(|(_, d)| long_header(d))
                .any(|h| !h.token.is_empty() || h.dcid == retry_scid);
            assert!(!tokens, "the client followed a Retry with a bad tag");
        }
    }
}

/// Bug 5: a Retry token the server did not issue (a forger's Retry with a
/// valid tag) gets a stateless close with INVALID_TOKEN, and no state.
#[test]
fn forged_retry_token_is_refused_with_invalid_token() {
    let mut pair = Pair::default_pair();
    let sent = record_client(&mut pair, |_, _| false);
    pair.step();
    let first = long_header(&sent.borrow()[0].1).unwrap();
    // Kind byte 1 claims a Retry token.
    let mut token = vec![1u8];
    token.extend_from_slice(&[0xab; 60]);
    let (mut retry, _) = forged_retry(&first.scid, &first.dcid, &token, true);
    // It reaches the client before the server's answer (which the client,
    // once it followed the Retry, can no longer decrypt).
    let (now, from) = (pair.now, pair.server_addr);
    pair.client.handle_datagram(now, from, None, &mut retry);
    let reason = client_loss(&mut pair, Duration::from_secs(10));
    assert!(
        matches!(&reason, Some(ConnectionError::PeerClosed { code, .. }) if *code == INVALID_TOKEN),
        "{reason:?}"
    );
    let s = pair.server.stats();
    assert!(s.tokens_rejected >= 1 && s.stateless_closes >= 1, "{s:?}");
}

/// Bug 5: a Retry token is good for `retry_token_lifetime` only: a client
/// whose retried Initials are all lost until then is refused with
/// INVALID_TOKEN rather than admitted with a stale proof.
#[test]
fn expired_retry_token_is_refused() {
    let mut pair = pair_with(always_retry());
    pair.handshake_limit = Duration::from_secs(60);
    let start = pair.now;
    // Lose every Initial that carries a token for 11 s (the lifetime is 10 s).
    record_client(&mut pair, move |now, d| {
        now < start + Duration::from_secs(11) && long_header(d).is_some_and(|h| !h.token.is_empty())
    });
    let reason = client_loss(&mut pair, Duration::from_secs(60));
    assert!(
        matches!(&reason, Some(ConnectionError::PeerClosed { code, .. }) if *code == INVALID_TOKEN),
        "{reason:?}"
    );
    let s = pair.server.stats();
    assert_eq!(
        (s.retries_sent, s.tokens_accepted, s.connections),
        (1, 0, 0),
        "{s:?}"
    );
}

/// Bug 5: NEW_TOKEN. The server gives each client a token; the client's
/// endpoint uses it (once) on its next connection, which then needs no
/// Retry. A token is refused from another address, when expired, or when
/// forged, and those clients simply go through Retry.
#[test]
fn new_token_validates_the_next_connection() {
    let mut pair = pair_with(AdmissionConfig {
        retry: RetryMode::Always,
        new_token_lifetime: Some(Duration::from_secs(60)),
        ..AdmissionConfig::default()
    });
    let data = test_pair::content(20_000, 3);
    let stored = |p: &mut Pair| {
        p.drive_until(Duration::from_secs(2), |p| {
            p.client.stats().stored_tokens == 1
        })
    };
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    assert!(stored(&mut pair), "the client kept no NEW_TOKEN token");
    close_and_drain(&mut pair);
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_accepted), (1, 1));

    // Second connection: the token, no Retry.
    reconnect(&mut pair);
    assert_eq!(pair.client.stats().stored_tokens, 0, "a token is used once");
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_accepted), (1, 2), "{s:?}");
    assert!(!pair.server().was_retried());
    assert!(stored(&mut pair));
    close_and_drain(&mut pair);

    // From another address: refused, Retry instead.
    pair.client_addr = SocketAddr::from(([127, 0, 0, 2], 5000));
    reconnect(&mut pair);
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_rejected), (2, 1), "{s:?}");
    assert!(stored(&mut pair));
    close_and_drain(&mut pair);

    // Expired: refused, Retry instead. (Nothing is pending: the clock
    // jumps.)
    pair.now += Duration::from_secs(61);
    reconnect(&mut pair);
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_rejected), (3, 2), "{s:?}");
}

/// Bug 5: forged NEW_TOKEN-kind tokens open nothing: the client is treated
/// as having no token (here: asked to Retry), never admitted as validated.
#[test]
fn forged_new_token_is_ignored() {
    let mut ep = server(always_retry());
    let dcid = ConnectionId::new(&[8; 8]).unwrap();
    let (d, _) = client_first_datagram(77, SocketAddr::from(([127, 0, 0, 1], 4433)));
    let hello = client_hello(&d);
    let scid = long_header(&d).unwrap().scid;
    let keys = crypto::initial_keys(&dcid, Side::Client, wire::Version::V1);
    let mut token = vec![2u8];
    token.extend_from_slice(&[0x11; 40]);
    let mut out = Vec::new();
    let layout = packet::write_long_header(
        &mut out,
        LongType::Initial,
        wire::Version::V1,
        &dcid,
        &scid,
        &token,
        0,
        4,
    );
    out.extend_from_slice(&crypto_frame(0, &hello));
    out.resize(1200 - crypto::TAG_LEN, 0);
    out.resize(1200, 0);
    packet::set_long_length(&mut out, &layout, 1200);
    crypto::seal(&keys.local, &mut out, layout.pn_offset, 4, 0).unwrap();
    assert!(ep
        .handle_datagram(Instant::ZERO, addr(5, 5), None, &mut out)
        .is_none());
    let s = ep.stats();
    assert_eq!(
        (s.connections, s.tokens_rejected, s.retries_sent),
        (0, 1, 1),
        "{s:?}"
    );
    let mut buf = Vec::new();
    let t = ep.poll_transmit(Instant::ZERO, &mut buf).expect("a Retry");
    let h = long_header(&buf[..t.size]).unwrap();
    assert_eq!((h.ty, h.dcid), (LongType::Retry, scid));
    assert!(crypto::verify_retry_integrity(
        wire::Version::V1,
        &dcid,
        &buf[..t.size]
    ));
}
