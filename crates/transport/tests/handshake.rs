//! Handshake-time behaviour of the endpoint and connection: version
//! negotiation, the anti-amplification limit, and loss during the handshake.

use transport::test_pair::{self, Pair};
use transport::{Endpoint, EndpointConfig, TransportConfig};
use wire::packet::{self, ProtectedHeader};
use wire::time::{Duration, Instant};

/// RFC 9000 §6.1: a long-header datagram of an unknown version, big enough
/// to be an Initial, is answered with Version Negotiation listing v1.
#[test]
fn unknown_version_gets_version_negotiation() {
    let server = test_pair::server_config(TransportConfig::default());
    let mut ep = Endpoint::new(EndpointConfig::server(1, server));
    let mut d = vec![0u8; 1200];
    d[0] = 0xc0;
    d[1..5].copy_from_slice(&0x1a2a_3a4au32.to_be_bytes());
    d[5] = 8;
    d[6..14].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    d[14] = 4;
    d[15..19].copy_from_slice(&[9, 9, 9, 9]);
    let from = "127.0.0.1:9999".parse().unwrap();
    assert!(ep.handle_datagram(Instant::ZERO, from, &mut d).is_none());
    let mut buf = Vec::new();
    let t = ep
        .poll_transmit(Instant::ZERO, &mut buf)
        .expect("a version negotiation packet");
    assert_eq!(t.destination, from);
    match packet::decode_protected(&buf[..t.size], 8).unwrap() {
        ProtectedHeader::VersionNegotiation {
            dst_cid,
            src_cid,
            versions,
        } => {
            assert_eq!(&dst_cid[..], &[9, 9, 9, 9]);
            assert_eq!(&src_cid[..], &[1, 2, 3, 4, 5, 6, 7, 8]);
            assert!(versions.contains(&packet::QUIC_V1));
        }
        other => panic!("expected version negotiation, got {other:?}"),
    }
    // A small datagram of an unknown version gets nothing (RFC 9000 §6.1).
    let mut small = d[..100].to_vec();
    ep.handle_datagram(Instant::ZERO, from, &mut small);
    assert!(ep.poll_transmit(Instant::ZERO, &mut buf).is_none());
}

/// RFC 9000 §8.1: before the client's address is validated the server
/// sends at most three times what it received.
#[test]
fn server_respects_anti_amplification_limit() {
    let mut pair = Pair::default_pair();
    // Deliver only the client's first datagram; the server never hears more.
    let mut first = true;
    pair.drop = Some(Box::new(move |_, to_server, _, _| {
        if to_server {
            let keep = first;
            first = false;
            !keep
        } else {
            false
        }
    }));
    let mut received_by_client = 0u64;
    pair.drive_until(Duration::from_secs(20), |_| false);
    let server_stats = pair.server().stats();
    received_by_client += server_stats.bytes_sent;
    let client_sent = 1200u64; // the one Initial datagram delivered
    assert!(server_stats.bytes_received >= client_sent);
    assert!(
        received_by_client <= 3 * server_stats.bytes_received,
        "server sent {received_by_client} bytes after receiving {}",
        server_stats.bytes_received
    );
    assert!(
        received_by_client > 0,
        "the server must answer within the limit"
    );
}

/// Handshake packets lost: PTO probes retransmit them and the handshake
/// still completes.
#[test]
fn handshake_survives_loss() {
    for seed in 0..40u64 {
        let mut pair = Pair::default_pair().with_random_loss(0.3);
        pair.rng = rand::SeedableRng::seed_from_u64(seed);
        pair.connect_within(Duration::from_secs(60));
    }
}

/// Every random choice comes from the seeds: two runs are identical.
#[test]
fn connections_are_deterministic() {
    let run = || {
        let mut pair = Pair::default_pair().with_random_loss(0.05);
        let data = test_pair::content(300_000, 4);
        let got = pair.download(&data, Duration::from_secs(60));
        assert!(got == data);
        let s = pair.server().stats();
        (
            pair.now,
            s.packets_sent,
            s.lost_packets,
            s.replicas,
            s.bytes_sent,
        )
    };
    assert_eq!(run(), run());
}
