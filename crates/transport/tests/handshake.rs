//! Handshake-time behaviour of the endpoint and connection: version
//! negotiation, the anti-amplification limit, loss during the handshake,
//! and 1-RTT packets that arrive before the handshake is complete.

use std::cell::RefCell;
use std::ops::Range;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use transport::connection::SpaceId;
use transport::events::Subscriber;
use transport::test_pair::{self, Pair};
use transport::{Endpoint, EndpointConfig, Event, TransportConfig};
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::{Duration, Instant};
use wire::Dir;

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
    assert!(ep
        .handle_datagram(Instant::ZERO, from, None, &mut d)
        .is_none());
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
    ep.handle_datagram(Instant::ZERO, from, None, &mut small);
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

/// The packets coalesced in a datagram: (long header type, or `None` for a
/// 1-RTT packet, which fills the rest; byte range). Stops at anything it
/// cannot parse.
fn packets_of(datagram: &[u8]) -> Vec<(Option<LongType>, Range<usize>)> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < datagram.len() {
        match packet::decode_protected(&datagram[at..], 8) {
            Ok(ProtectedHeader::Long { ty, len, .. }) => {
                out.push((Some(ty), at..at + len));
                at += len.max(1);
            }
            Ok(ProtectedHeader::Short { .. }) => {
                out.push((None, at..datagram.len()));
                break;
            }
            _ => break,
        }
    }
    out
}

/// What the network of [`client_finished_lost_then_1rtt_acked`] does.
#[derive(Default)]
struct FinishedLoss {
    /// Client datagrams with a Handshake packet still to lose outright.
    drops_left: u32,
    /// The server has sent a 1-RTT packet: from then on the emulated
    /// client has "confirmed" the handshake and sends no Handshake packet.
    server_sent_1rtt: bool,
    /// Client datagrams with their Handshake packets cut out, to deliver.
    stripped: Vec<Vec<u8>>,
    /// Handshake packets the emulated client never sent.
    suppressed: u32,
}

/// Records the server's decrypted packets and stream data, in order.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<(SpaceId, bool)>>>);

impl Subscriber for Received {
    fn packet_received(&mut self, _now: Instant, space: SpaceId, _pn: u64, _size: usize) {
        self.0.lock().unwrap().push((space, false));
    }
    fn stream_data_received(&mut self, _now: Instant, _id: wire::StreamId, _o: u64, _l: u64) {
        self.0.lock().unwrap().push((SpaceId::Data, true));
    }
}

/// Regression (issue 15, bug 1; RFC 9001 §5.7): the client's Finished is
/// lost while its 1-RTT request gets through. The server must not process
/// 1-RTT packets before its handshake is complete: it buffers them and
/// reads them once the Finished arrives. A server that acknowledged the
/// request at once deadlocked clients like quic-go's, which may take that
/// acknowledgement as handshake confirmation (RFC 9001 §4.1.2) and stop
/// sending Handshake packets. The network here plays that client: once the
/// server has sent any 1-RTT packet, the client's Handshake packets are cut
/// out of its datagrams.
#[test]
fn client_finished_lost_then_1rtt_acked() {
    for (latency_ms, drops) in [(10, 1), (10, 2), (40, 1), (2, 3)] {
        let net = Rc::new(RefCell::new(FinishedLoss {
            drops_left: drops,
            ..FinishedLoss::default()
        }));
        let hook_net = net.clone();
        let mut pair = Pair::default_pair();
        pair.latency = Duration::from_millis(latency_ms);
        pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
            let mut net = hook_net.borrow_mut();
            let packets = packets_of(datagram);
            if !to_server {
                net.server_sent_1rtt |= packets.iter().any(|(ty, _)| ty.is_none());
                return false;
            }
            let handshake = |ty: &Option<LongType>| *ty == Some(LongType::Handshake);
            if !packets.iter().any(|(ty, _)| handshake(ty)) {
                return false;
            }
            if net.drops_left > 0 {
                net.drops_left -= 1;
                return true;
            }
            if !net.server_sent_1rtt {
                return false;
            }
            net.suppressed += 1;
            let rest: Vec<u8> = packets
                .iter()
                .filter(|(ty, _)| !handshake(ty))
                .flat_map(|(_, r)| datagram[r.clone()].iter().copied())
                .collect();
            if !rest.is_empty() {
                net.stripped.push(rest);
            }
            true
        }));
        // The client completes (it has the server's Finished) and sends its
        // request at once, without waiting for the server.
        let client_done = pair.drive_until(Duration::from_secs(5), |p| {
            let mut connected = false;
            while let Some(ev) = p.client().poll_event() {
                connected |= ev == Event::Connected;
            }
            connected
        });
        assert!(client_done, "the client did not complete its handshake");
        let id = pair.client().streams().open(Dir::Bi).expect("a stream");
        pair.client().streams().write(id, b"GET /\r\n").unwrap();
        pair.client().streams().finish(id).unwrap();

        let data = test_pair::content(200_000, 5);
        let received = Received::default();
        let mut subscribed = false;
        let mut early_1rtt = false;
        let (mut accepted, mut sent, mut got, mut fin) = (None, 0, Vec::new(), false);
        let mut buf = vec![0u8; 65536];
        pair.drive_until(Duration::from_secs(60), |p| {
            let stripped: Vec<Vec<u8>> = net.borrow_mut().stripped.drain(..).collect();
            for d in stripped {
                p.inject_to_server(d);
            }
            let Some(server) = p.server_opt() else {
                return false;
            };
            if !subscribed {
                server.subscribe(Box::new(received.clone()));
                subscribed = true;
            }
            // §5.7, observed directly: no 1-RTT packet is read (decrypted
            // and processed) while the server is still handshaking.
            if server.is_handshaking()
                && received
                    .0
                    .lock()
                    .unwrap()
                    .iter()
                    .any(|e| e.0 == SpaceId::Data)
            {
                early_1rtt = true;
            }
            if accepted.is_none() {
                accepted = server.streams().accept(Dir::Bi);
            }
            if let Some(sid) = accepted {
                while sent < data.len() {
                    match server.streams().write(sid, &data[sent..]) {
                        Ok(n) => sent += n,
                        Err(_) => break,
                    }
                }
                if sent == data.len() {
                    let _ = server.streams().finish(sid);
                }
            }
            let client = p.client();
            while !fin {
                match client.streams().read(id, &mut buf) {
                    Ok(Some(n)) => got.extend_from_slice(&buf[..n]),
                    Ok(None) => fin = true,
                    Err(_) => break,
                }
            }
            fin
        });
        let net = net.borrow();
        assert_eq!(
            net.drops_left, 0,
            "the client's Finished must have been lost"
        );
        assert!(
            !early_1rtt,
            "latency {latency_ms} ms, {drops} lost: the server read 1-RTT packets before the client's Finished"
        );
        assert!(
            fin && got == data,
            "latency {latency_ms} ms, {drops} lost: download stalled at {} of {} bytes \
             (server handshaking: {:?}, client Handshake packets cut: {})",
            got.len(),
            data.len(),
            pair.server_opt().map(|s| s.is_handshaking()),
            net.suppressed
        );
    }
}

/// Records whether the connection had confirmed the handshake each time it
/// read a 1-RTT packet.
#[derive(Clone, Default)]
struct OneRttReads(Arc<Mutex<u32>>);

impl Subscriber for OneRttReads {
    fn packet_received(&mut self, _now: Instant, space: SpaceId, _pn: u64, _size: usize) {
        if space == SpaceId::Data {
            *self.0.lock().unwrap() += 1;
        }
    }
}

/// RFC 9001 §4.1.2: the client confirms the handshake on HANDSHAKE_DONE
/// only, not on an acknowledgement of its 1-RTT data, and keeps its
/// Handshake keys until then. The server's first 1-RTT datagram (with
/// HANDSHAKE_DONE) is lost; the client reads the following ones, which
/// acknowledge its request, and still waits for the retransmitted
/// HANDSHAKE_DONE.
#[test]
fn client_confirms_the_handshake_only_on_handshake_done() {
    let mut pair = Pair::default_pair();
    let mut lost_first = false;
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        if to_server || lost_first || !packets_of(datagram).iter().any(|(ty, _)| ty.is_none()) {
            return false;
        }
        lost_first = true;
        true
    }));
    let client_done = pair.drive_until(Duration::from_secs(5), |p| {
        let mut connected = false;
        while let Some(ev) = p.client().poll_event() {
            connected |= ev == Event::Connected;
        }
        connected
    });
    assert!(client_done);
    let reads = OneRttReads::default();
    pair.client().subscribe(Box::new(reads.clone()));
    let id = pair.client().streams().open(Dir::Bi).expect("a stream");
    pair.client().streams().write(id, b"GET /\r\n").unwrap();
    pair.client().streams().finish(id).unwrap();
    let mut unconfirmed_reads = 0;
    let mut accepted = None;
    let confirmed = pair.drive_until(Duration::from_secs(10), |p| {
        if let Some(server) = p.server_opt() {
            if accepted.is_none() {
                accepted = server.streams().accept(Dir::Bi);
                if let Some(sid) = accepted {
                    server.streams().write(sid, &[7u8; 50_000]).unwrap();
                    server.streams().finish(sid).unwrap();
                }
            }
        }
        let confirmed = p.client().is_handshake_confirmed();
        if !confirmed {
            unconfirmed_reads = *reads.0.lock().unwrap();
        }
        confirmed
    });
    assert!(confirmed, "HANDSHAKE_DONE never arrived");
    assert!(
        unconfirmed_reads > 0,
        "the scenario must let the client read 1-RTT packets before HANDSHAKE_DONE"
    );
}

/// RFC 9001 §5.7 lets an endpoint keep packets it cannot read yet. The
/// server's first datagram (its Initial, whose ServerHello gives the keys
/// of what follows) is lost; the next one, Handshake packets only, arrives
/// first. The client keeps them and reads them once the retransmitted
/// Initial gives it the keys, instead of dropping them. A certificate chain
/// of four copies makes the server's flight span several datagrams.
#[test]
fn handshake_packets_that_overtake_their_keys_are_kept() {
    let mut pair = Pair::default_pair();
    let (chain, key) =
        transport::crypto::self_signed_from_seed(&["localhost"], [3; 32]).expect("certificate");
    let chain = vec![chain[0].clone(); 4];
    let tls = transport::crypto::server_config(chain, key, &[transport::crypto::TEST_ALPN])
        .expect("server config");
    let server = transport::ServerConfig {
        tls,
        transport: Arc::new(TransportConfig::default()),
        preferred_address: Default::default(),
    };
    pair.server = Endpoint::new(EndpointConfig::server(7, server));
    let mut first = true;
    pair.drop = Some(Box::new(move |_, to_server, _, _| {
        let lose = first && !to_server;
        first &= !lose;
        lose
    }));
    let read = HandshakePacketsRead::default();
    pair.client().subscribe(Box::new(read.clone()));
    pair.connect();
    assert_eq!(pair.dropped[0], 1);
    // The lost datagram held the Initial and the first Handshake packet
    // (number 0); the flight's later Handshake packets (1, 2, ...) arrived
    // before the keys. Had the client dropped them, it would have read only
    // their retransmissions, under new packet numbers.
    let read = read.0.lock().unwrap().clone();
    assert!(
        read.contains(&1) && read.contains(&2),
        "Handshake packets that arrived before their keys were dropped: read {read:?}"
    );
}

/// The Handshake packet numbers a connection read, in order.
#[derive(Clone, Default)]
struct HandshakePacketsRead(Arc<Mutex<Vec<u64>>>);

impl Subscriber for HandshakePacketsRead {
    fn packet_received(&mut self, _now: Instant, space: SpaceId, pn: u64, _size: usize) {
        if space == SpaceId::Handshake {
            self.0.lock().unwrap().push(pn);
        }
    }
}

/// The server keeps a bounded number of 1-RTT packets while it waits for
/// the client's Finished (32 packets, 29,440 bytes): a client that sends
/// more has the excess dropped, and retransmits it like any lost packet.
#[test]
fn early_1rtt_packets_beyond_the_bound_are_dropped_then_retransmitted() {
    let mut pair = Pair::default_pair();
    let mut finished_lost = false;
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        let handshake = packets_of(datagram)
            .iter()
            .any(|(ty, _)| *ty == Some(LongType::Handshake));
        let lose = to_server && handshake && !finished_lost;
        finished_lost |= lose;
        lose
    }));
    let client_done = pair.drive_until(Duration::from_secs(5), |p| {
        let mut connected = false;
        while let Some(ev) = p.client().poll_event() {
            connected |= ev == Event::Connected;
        }
        connected
    });
    assert!(client_done);
    // 60 small packets of stream data (well within the client's initial
    // window), sent at once: the server still waits for the Finished.
    let mut streams = Vec::new();
    for i in 0..60u8 {
        let id = pair.client().streams().open(Dir::Bi).expect("a stream");
        pair.client().streams().write(id, &[i; 100]).unwrap();
        pair.client().streams().finish(id).unwrap();
        streams.push((id, i));
        let now = pair.now;
        pair.step_until(now);
    }
    pair.drive_until(Duration::from_millis(15), |_| false);
    assert!(pair.server().is_handshaking());
    let dropped_early = pair.server().stats().packets_dropped;
    assert!(
        dropped_early >= 60 - 32,
        "only {dropped_early} of 60 early packets dropped"
    );
    // Everything arrives in the end, byte-exact.
    let mut got = std::collections::BTreeMap::new();
    let mut buf = [0u8; 1000];
    let all = pair.drive_until(Duration::from_secs(30), |p| {
        let Some(server) = p.server_opt() else {
            return false;
        };
        while let Some(id) = server.streams().accept(Dir::Bi) {
            got.insert(id, Vec::new());
        }
        for (id, bytes) in got.iter_mut() {
            while let Ok(Some(n)) = server.streams().read(*id, &mut buf) {
                bytes.extend_from_slice(&buf[..n]);
            }
        }
        got.len() == 60 && got.values().all(|b| b.len() == 100)
    });
    assert!(all, "early data lost for good: {} streams", got.len());
    for (id, i) in streams {
        assert!(got[&id].iter().all(|b| *b == i), "stream {id:?} corrupted");
    }
}

/// RFC 9002 §6.2.3: a client that keeps sending Initial packets without
/// acknowledging the server's Initial has no Handshake keys: the ServerHello
/// was lost. The server resends it at once instead of waiting for its own
/// PTO. Here the server's PTO is made long (initial RTT 3 s: about 9 s),
/// its first flight is lost, and the client's first probe (its ClientHello
/// again, at about 1 s) must bring the ServerHello back well before it.
/// Seen with quic-go's interop client at 30% loss: the server's PTO backs
/// off from 1 s, and the client gives up its handshake after 10 s.
#[test]
fn server_resends_its_initial_when_the_client_is_still_in_initial() {
    let server = TransportConfig {
        initial_rtt: Duration::from_secs(3),
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(server, TransportConfig::default());
    let mut server_datagrams = 0;
    let resent = Rc::new(RefCell::new(Vec::new()));
    let seen = resent.clone();
    pair.drop = Some(Box::new(move |now, to_server, datagram, _| {
        if to_server {
            return false;
        }
        server_datagrams += 1;
        if server_datagrams > 1
            && packets_of(datagram)
                .iter()
                .any(|p| p.0 == Some(LongType::Initial))
        {
            seen.borrow_mut().push(now);
        }
        server_datagrams == 1
    }));
    // The client's PTO is about 1 s (initial RTT 333 ms); its probe and the
    // resent flight take two 10 ms trips more.
    assert!(
        pair.try_connect_within(Duration::from_millis(1500)),
        "the handshake waited for the server's PTO (client handshaking: {:?}, server PTOs: {:?})",
        pair.client_opt().map(|c| c.is_handshaking()),
        pair.server_opt().map(|c| c.stats().pto_count),
    );
    // Like a PTO's probes, the resend is two datagrams: one lost copy then
    // costs no further round.
    let resent = resent.borrow();
    let first = resent.first().copied();
    assert!(
        first.is_some() && resent.iter().filter(|&&t| Some(t) == first).count() >= 2,
        "server datagrams with an Initial after the loss, at {resent:?}"
    );
}

/// RFC 9002 §6.2.4: when the PTO fires, "the sender SHOULD send
/// ack-eliciting packets from other packet number spaces with in-flight
/// data, coalescing packets if possible". The server's whole first flight
/// (Initial with the ServerHello, Handshake with the certificate) is lost
/// and the client does not probe before the server's PTO (its initial RTT
/// is 3 s): the server's first probe datagram must carry both levels, so
/// the handshake completes one round trip after the PTO instead of waiting
/// for a second, backed-off PTO for the Handshake level.
#[test]
fn pto_probes_carry_every_handshake_level() {
    let client = TransportConfig {
        initial_rtt: Duration::from_secs(3),
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(TransportConfig::default(), client);
    let start = pair.now;
    let probes = Rc::new(RefCell::new(Vec::new()));
    let seen = probes.clone();
    pair.drop = Some(Box::new(move |now, to_server, datagram, _| {
        if to_server {
            return false;
        }
        if now < start + Duration::from_millis(500) {
            return true;
        }
        let levels: Vec<Option<LongType>> = packets_of(datagram).into_iter().map(|p| p.0).collect();
        seen.borrow_mut().push(levels);
        false
    }));
    let done = pair.try_connect_within(Duration::from_secs(2));
    let probes = probes.borrow();
    let first = probes.first().cloned().unwrap_or_default();
    assert!(
        first.contains(&Some(LongType::Initial)) && first.contains(&Some(LongType::Handshake)),
        "the server's first PTO datagram carries {first:?}"
    );
    assert!(
        done,
        "the handshake did not complete one round trip after the server's PTO \
         (server datagrams after the loss: {probes:?})"
    );
}
