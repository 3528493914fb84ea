//! QUIC version 2 (RFC 9369) and compatible version negotiation (RFC 9368)
//! between real endpoints: a v2 connection from the first packet, the
//! server's switch from a v1 first flight that offers v2, its Version
//! Negotiation list, and hostile version_information closing the
//! connection with the RFC's error.
//!
//! Hostile first flights are built as an attacker would: a real rustls
//! ClientHello carrying hand-made transport parameters, sealed with the
//! public Initial keys.

use std::net::SocketAddr;

use transport::crypto::{self, TlsSession};
use transport::test_pair::{self, Pair};
use transport::{ConnectionError, Endpoint, EndpointConfig, TransportConfig};
use wire::cid::ConnectionId;
use wire::frame::{self, Frame, FrameIter};
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::{Duration, Instant};
use wire::transport_params::TransportParameters;
use wire::{Side, TransportErrorCode, Version};

fn versions(v: &[Version]) -> TransportConfig {
    TransportConfig {
        versions: v.to_vec(),
        ..TransportConfig::default()
    }
}

/// The version of every long header in `datagram`.
fn long_versions(datagram: &[u8]) -> Vec<Version> {
    let mut out = Vec::new();
    let mut rest = datagram;
    while let Ok(ProtectedHeader::Long { version, len, .. }) = packet::decode_protected(rest, 8) {
        out.push(version);
        rest = &rest[len..];
    }
    out
}

/// A client and a server that both prefer v2 speak it from the first
/// packet; a file crosses byte-exact, and every long header is v2.
#[test]
fn v2_from_the_start() {
    let mut pair = Pair::new(
        versions(&[Version::V2, Version::V1]),
        versions(&[Version::V2]),
    );
    let seen = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    pair.drop = Some(Box::new(move |_, _, datagram, _| {
        log.borrow_mut().extend(long_versions(datagram));
        false
    }));
    let data = test_pair::content(200_000, 9);
    assert_eq!(pair.download(&data, Duration::from_secs(10)), data);
    assert_eq!(pair.client().version(), Version::V2);
    assert_eq!(pair.server().version(), Version::V2);
    let seen = seen.borrow();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|&v| v == Version::V2),
        "long headers: {seen:?}"
    );
}

/// A v1-only server answers a v2 Initial with Version Negotiation listing
/// v1 (RFC 9000 §6); a v2 client has no other way in and gives up.
#[test]
fn v1_only_server_negotiates_v2_away() {
    let mut pair = Pair::new(TransportConfig::default(), versions(&[Version::V2]));
    let lists = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
    let log = lists.clone();
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        if !to_server {
            if let Ok(ProtectedHeader::VersionNegotiation { versions, .. }) =
                packet::decode_protected(datagram, 8)
            {
                log.borrow_mut().push(versions);
            }
        }
        false
    }));
    assert!(!pair.try_connect_within(Duration::from_secs(1)));
    assert_eq!(lists.borrow().first(), Some(&vec![packet::QUIC_V1]));
}

/// A v1 client without version_information stays in v1 with a server that
/// speaks both: nothing is offered, nothing switches.
#[test]
fn plain_v1_client_stays_in_v1() {
    let mut pair = Pair::new(
        versions(&[Version::V2, Version::V1]),
        TransportConfig::default(),
    );
    pair.connect();
    assert_eq!(pair.server().version(), Version::V1);
    assert_eq!(pair.client().version(), Version::V1);
}

/// A server endpoint speaking `vs`.
fn server(vs: &[Version]) -> Endpoint {
    let config = test_pair::server_config(versions(vs));
    Endpoint::new(EndpointConfig::server(7, config))
}

const CLIENT: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 4433);

/// A first flight in `version` whose ClientHello carries `params` (raw
/// transport parameters), as one 1200-byte Initial datagram.
fn first_flight(version: Version, params: Vec<u8>) -> (Vec<u8>, ConnectionId) {
    let config = test_pair::client_config(TransportConfig::default());
    let mut tls =
        TlsSession::client(config.tls.clone(), version, "localhost", params).expect("client TLS");
    let mut hello = Vec::new();
    let _ = tls.write_handshake(&mut hello);
    assert!(hello.len() < 1000, "ClientHello fits one Initial");
    let dcid = ConnectionId::new(&[7; 8]).unwrap();
    let scid = ConnectionId::new(&[9; 8]).unwrap();
    let keys = crypto::initial_keys(&dcid, Side::Client, version);
    let mut out = Vec::new();
    let layout = packet::write_long_header(
        &mut out,
        LongType::Initial,
        version,
        &dcid,
        &scid,
        &[],
        0,
        4,
    );
    frame::write_crypto_header(&mut out, 0, hello.len());
    out.extend_from_slice(&hello);
    out.resize(1200, 0);
    packet::set_long_length(&mut out, &layout, 1200);
    crypto::seal(&keys.local, &mut out, layout.pn_offset, 4, 0).unwrap();
    (out, dcid)
}

/// Transport parameters of a client with this version_information value
/// (raw bytes: hostile ones too).
fn client_params(version_information: Option<&[u8]>) -> Vec<u8> {
    let p = TransportParameters {
        initial_source_connection_id: Some(ConnectionId::new(&[9; 8]).unwrap()),
        initial_max_data: 1 << 20,
        ..TransportParameters::default()
    };
    let mut out = Vec::new();
    p.encode(&mut out);
    if let Some(value) = version_information {
        out.push(0x11);
        out.push(value.len() as u8);
        out.extend_from_slice(value);
    }
    out
}

fn words(ws: &[u32]) -> Vec<u8> {
    ws.iter().flat_map(|w| w.to_be_bytes()).collect()
}

/// Feeds `datagram` to a server speaking v1 and v2; returns the server's
/// answer datagrams and how its connection ended, if it did.
fn serve_first_flight(datagram: &mut [u8]) -> (Vec<Vec<u8>>, Option<ConnectionError>) {
    let mut server = server(&[Version::V1, Version::V2]);
    let now = Instant::ZERO;
    let h = server
        .handle_datagram(now, CLIENT, None, datagram)
        .expect("the Initial is admitted");
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(t) = server.poll_transmit(now + Duration::from_millis(1), &mut buf) {
        out.push(buf[..t.size].to_vec());
    }
    let reason = server.connection(h).and_then(|c| c.close_reason().cloned());
    (out, reason)
}

/// RFC 9368 §2.3, RFC 9369 §4: a v1 first flight whose version_information
/// offers v2 first is answered in v2: the server's Initial (ServerHello)
/// is a v2 packet that opens with v2 Initial keys.
#[test]
fn server_switches_a_v1_client_offering_v2() {
    let info = words(&[1, Version::V2.wire(), 1]);
    let (mut datagram, dcid) = first_flight(Version::V1, client_params(Some(&info)));
    let (answers, closed) = serve_first_flight(&mut datagram);
    assert!(closed.is_none(), "closed: {closed:?}");
    let first = answers.first().expect("the server answers");
    let ProtectedHeader::Long {
        ty: LongType::Initial,
        version: Version::V2,
        pn_offset,
        len,
        ..
    } = packet::decode_protected(first, 8).unwrap()
    else {
        panic!("the server's first packet is not a v2 Initial");
    };
    let keys = crypto::initial_keys(&dcid, Side::Client, Version::V2);
    let mut p = first[..len].to_vec();
    let (_, pn_len, truncated) =
        crypto::remove_header_protection(&*keys.remote.header, &mut p, pn_offset).unwrap();
    let pn = packet::decode_pn(None, u64::from(truncated), pn_len);
    let range = crypto::open(&*keys.remote.packet, &mut p, pn_offset + pn_len, pn)
        .expect("v2 Initial keys open the server's Initial");
    assert!(FrameIter::new(&p[range]).any(|f| matches!(f, Ok(Frame::Crypto { .. }))));
    assert!(answers
        .iter()
        .flat_map(|d| long_versions(d))
        .all(|v| v == Version::V2));
}

/// RFC 9368 §4: hostile version_information. A Chosen Version that is not
/// the version of the client's packets is a downgrade attempt
/// (VERSION_NEGOTIATION_ERROR, 0x11); malformed values are parsing failures
/// (TRANSPORT_PARAMETER_ERROR, 0x08). Either way the server closes, and
/// never panics.
#[test]
fn hostile_version_information_closes_the_connection() {
    let cases: [(&str, Vec<u8>, TransportErrorCode); 5] = [
        (
            "Chosen Version v2 in a v1 Initial",
            words(&[Version::V2.wire(), Version::V2.wire(), 1]),
            TransportErrorCode::VERSION_NEGOTIATION_ERROR,
        ),
        (
            "empty",
            vec![],
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
        ),
        (
            "odd length",
            vec![0, 0, 0, 1, 0x6b, 0x33],
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
        ),
        (
            "Chosen Version 0",
            words(&[0, 1]),
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
        ),
        (
            "Chosen Version not among the Available Versions",
            words(&[1, Version::V2.wire()]),
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
        ),
    ];
    for (what, value, code) in cases {
        let (mut datagram, _) = first_flight(Version::V1, client_params(Some(&value)));
        let (answers, closed) = serve_first_flight(&mut datagram);
        match closed {
            Some(ConnectionError::Transport(e)) => assert_eq!(e.code, code, "{what}"),
            other => panic!("{what}: the server did not close ({other:?})"),
        }
        assert!(!answers.is_empty(), "{what}: the close is sent");
        // The server stayed in v1 (nothing valid asked for v2).
        assert!(answers
            .iter()
            .flat_map(|d| long_versions(d))
            .all(|v| v == Version::V1));
    }
}
