#![allow(
    clippy::disallowed_methods,
    reason = "these tests drive the real-time relay over real sockets, against the wall clock"
)]
//! Relay tests on 127.0.0.1 only, each bounded to a few seconds.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::thread;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use super::*;
use crate::link::{Capacity, QueueLimit};
use crate::loss::LossModel;

fn local_socket() -> UdpSocket {
    let s = UdpSocket::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    s.set_read_timeout(Some(StdDuration::from_millis(50)))
        .expect("timeout");
    s
}

fn seq_of(buf: &[u8]) -> u32 {
    u32::from_be_bytes(buf[..4].try_into().expect("4 bytes"))
}

/// Receives on `sock` until `done` is set, recording (seq, time since
/// `epoch`, sender); echoes back to the sender if `echo`.
fn receiver(
    sock: UdpSocket,
    epoch: StdInstant,
    done: Arc<AtomicBool>,
    echo: bool,
) -> thread::JoinHandle<Vec<(u32, StdDuration, SocketAddr, usize)>> {
    thread::spawn(move || {
        let mut log = Vec::new();
        let mut buf = vec![0u8; 65_536];
        while !done.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                log.push((seq_of(&buf[..n]), epoch.elapsed(), from, n));
                if echo {
                    sock.send_to(&buf[..n], from).expect("echo");
                }
            }
        }
        log
    })
}

#[test]
fn relay_applies_delay_and_loss_both_ways() {
    let server = local_socket();
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        to: server.local_addr().expect("addr"),
        up: LinkConfig::new(Capacity::Unlimited, Duration::from_millis(20))
            .with_loss(LossModel::Bernoulli { p: 0.1 }),
        down: LinkConfig::new(Capacity::Unlimited, Duration::from_millis(20)),
        seed: 1,
        pcap: None,
        rebind: None,
    };
    let relay = spawn(config).expect("relay starts");
    assert!(relay.local_addr().ip().is_loopback());
    assert!(relay.upstream_addr().ip().is_loopback());
    let client = local_socket();
    let epoch = StdInstant::now();
    let done = Arc::new(AtomicBool::new(false));
    let server_rx = receiver(server, epoch, Arc::clone(&done), true);
    let client_rx = receiver(
        client.try_clone().expect("clone"),
        epoch,
        Arc::clone(&done),
        false,
    );

    let n = 1000u32;
    let mut sent_at = Vec::with_capacity(n as usize);
    for seq in 0..n {
        let mut payload = seq.to_be_bytes().to_vec();
        payload.resize(200, 0);
        sent_at.push(epoch.elapsed());
        client.send_to(&payload, relay.local_addr()).expect("send");
        if seq % 4 == 3 {
            thread::sleep(StdDuration::from_millis(2));
        }
    }
    thread::sleep(StdDuration::from_millis(300));
    done.store(true, Ordering::Relaxed);
    let at_server = server_rx.join().expect("server thread");
    let at_client = client_rx.join().expect("client thread");
    let stats = relay.stop().expect("relay stats");

    // Loss: p = 0.1 over 1000 packets, sd ~ 0.0095; 5 sigma.
    let lost = 1.0 - at_server.len() as f64 / f64::from(n);
    assert!((0.05..=0.15).contains(&lost), "loss fraction {lost}");
    assert_eq!(stats.up.offered, u64::from(n));
    assert_eq!(stats.up.delivered, at_server.len() as u64);
    assert_eq!(stats.up.delivered + stats.up.dropped_loss, stats.up.offered);
    // The downlink is lossless: every echo comes back.
    assert_eq!(at_client.len(), at_server.len());
    assert_eq!(stats.down.delivered, at_client.len() as u64);
    // Delay: never early; on time within scheduling noise for most.
    // Everything reached the server from the relay's one upstream socket.
    let upstream = at_server[0].2;
    assert!(upstream.ip().is_loopback());
    assert!(at_server.iter().all(|(_, _, from, _)| *from == upstream));
    let mut one_way: Vec<StdDuration> = at_server
        .iter()
        .map(|(seq, t, _, _)| t.saturating_sub(sent_at[*seq as usize]))
        .collect();
    one_way.sort();
    assert!(
        one_way[0] >= StdDuration::from_millis(20),
        "early: {:?}",
        one_way[0]
    );
    let median = one_way[one_way.len() / 2];
    eprintln!(
        "relay one-way delay: min {:?} median {median:?} max {:?}; loss {lost:.3}",
        one_way[0],
        one_way[one_way.len() - 1]
    );
    assert!(
        median < StdDuration::from_millis(30),
        "median one-way {median:?}"
    );
    for (seq, t, from, _) in &at_client {
        assert!(from.ip().is_loopback());
        let rtt = t.saturating_sub(sent_at[*seq as usize]);
        assert!(rtt >= StdDuration::from_millis(40), "rtt {rtt:?} for {seq}");
    }
}

#[test]
fn relay_achieves_20_mbps_in_real_time() {
    let server = local_socket();
    let rate = 20_000_000u64;
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        to: server.local_addr().expect("addr"),
        up: LinkConfig::new(
            Capacity::Constant { bits_per_sec: rate },
            Duration::from_millis(40),
        )
        .with_queue(QueueLimit::Packets(5000)),
        down: LinkConfig::new(
            Capacity::Constant { bits_per_sec: rate },
            Duration::from_millis(40),
        ),
        seed: 2,
        pcap: None,
        rebind: None,
    };
    let relay = spawn(config).expect("relay starts");
    let epoch = StdInstant::now();
    let done = Arc::new(AtomicBool::new(false));
    let server_rx = receiver(server, epoch, Arc::clone(&done), false);
    let client = local_socket();
    // ~28 Mbit/s offered for ~1.25 s: 12 MTU-sized datagrams every 5 ms.
    let n = 3000u32;
    let payload_len = 1472;
    let start = StdInstant::now();
    for seq in 0..n {
        let mut payload = seq.to_be_bytes().to_vec();
        payload.resize(payload_len, 0);
        client.send_to(&payload, relay.local_addr()).expect("send");
        if seq % 12 == 11 {
            let due = StdDuration::from_millis(u64::from(seq / 12 + 1) * 5);
            if let Some(wait) = due.checked_sub(start.elapsed()) {
                thread::sleep(wait);
            }
        }
    }
    // 3000 packets take 1.8 s at 20 Mbit/s, + 40 ms; wait for the drain.
    if let Some(rest) = StdDuration::from_millis(2300).checked_sub(start.elapsed()) {
        thread::sleep(rest);
    }
    done.store(true, Ordering::Relaxed);
    let log = server_rx.join().expect("server thread");
    let stats = relay.stop().expect("stats");
    assert_eq!(stats.up.dropped_queue, 0);
    assert_eq!(log.len() as u32, n, "all datagrams arrive");
    // In order.
    assert!(log.windows(2).all(|w| w[0].0 < w[1].0));
    // Rate from first to last arrival: the queue never empties in between.
    let span = log[log.len() - 1].1 - log[0].1;
    let bytes = (log.len() - 1) as f64 * payload_len as f64;
    let measured = bytes * 8.0 / span.as_secs_f64();
    let expected = rate as f64 * payload_len as f64 / 1500.0;
    let err = (measured - expected).abs() / expected;
    eprintln!("relay rate: {measured:.0} bit/s of payload vs {expected:.0} ({err:.4})");
    assert!(
        err < 0.05,
        "measured {measured:.0} bit/s of payload, expected {expected:.0}"
    );
}

#[test]
fn new_client_address_replaces_the_old_and_strangers_are_ignored() {
    let server = local_socket();
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        to: server.local_addr().expect("addr"),
        up: LinkConfig::ideal(),
        down: LinkConfig::ideal(),
        seed: 3,
        pcap: None,
        rebind: None,
    };
    let relay = spawn(config).expect("relay starts");
    let (a, b) = (local_socket(), local_socket());
    let mut buf = [0u8; 64];

    a.send_to(&1u32.to_be_bytes(), relay.local_addr())
        .expect("send");
    let (_, upstream) = server
        .recv_from(&mut buf)
        .expect("server gets a's datagram");
    assert_eq!(upstream, relay.upstream_addr());
    server
        .send_to(&2u32.to_be_bytes(), upstream)
        .expect("reply");
    let (n, from) = a.recv_from(&mut buf).expect("a gets the reply");
    assert_eq!((seq_of(&buf[..n]), from), (2, relay.local_addr()));

    b.send_to(&3u32.to_be_bytes(), relay.local_addr())
        .expect("send");
    server
        .recv_from(&mut buf)
        .expect("server gets b's datagram");
    server
        .send_to(&4u32.to_be_bytes(), upstream)
        .expect("reply");
    let (n, _) = b.recv_from(&mut buf).expect("b, the new client, gets it");
    assert_eq!(seq_of(&buf[..n]), 4);
    assert!(a.recv_from(&mut buf).is_err(), "a no longer gets replies");

    // A stranger writing to the upstream socket is ignored.
    let stranger = local_socket();
    stranger
        .send_to(&5u32.to_be_bytes(), upstream)
        .expect("send");
    assert!(b.recv_from(&mut buf).is_err());

    let stats = relay.stop().expect("stats");
    assert_eq!(stats.client_changes, 1);
    assert_eq!(stats.ignored, 1);
    assert_eq!((stats.up.delivered, stats.down.delivered), (2, 2));
}

#[test]
fn run_stops_on_the_flag_and_bind_errors_are_reported() {
    let taken = local_socket();
    let config = RelayConfig {
        listen: taken.local_addr().expect("addr"),
        to: "127.0.0.1:9".parse().expect("addr"),
        up: LinkConfig::ideal(),
        down: LinkConfig::ideal(),
        seed: 0,
        pcap: None,
        rebind: None,
    };
    assert!(spawn(config.clone()).is_err(), "listen address in use");

    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        ..config
    };
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    let started = StdInstant::now();
    let t = thread::spawn(move || run(config, flag));
    thread::sleep(StdDuration::from_millis(100));
    stop.store(true, Ordering::Relaxed);
    let stats = t.join().expect("thread").expect("clean stop");
    assert_eq!(stats, RelayStats::default());
    assert!(started.elapsed() < StdDuration::from_secs(2));
}

/// The records of a capture written by the relay: (time, src, dst, payload).
fn read_capture(path: &std::path::Path) -> Vec<(StdDuration, SocketAddr, SocketAddr, Vec<u8>)> {
    let bytes = std::fs::read(path).expect("capture exists");
    assert_eq!(&bytes[..4], &[0xd4, 0xc3, 0xb2, 0xa1], "pcap magic");
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let mut out = Vec::new();
    let mut at = 24;
    while at < bytes.len() {
        let t =
            StdDuration::from_secs(word(at).into()) + StdDuration::from_micros(word(at + 4).into());
        let len = word(at + 8) as usize;
        let ip = &bytes[at + 16..at + 16 + len];
        assert_eq!(ip[0], 0x45, "IPv4 without options");
        let addr = |a: usize, p: usize| {
            let ip4: [u8; 4] = ip[a..a + 4].try_into().expect("4 bytes");
            SocketAddr::from((ip4, u16::from_be_bytes([ip[p], ip[p + 1]])))
        };
        out.push((t, addr(12, 20), addr(16, 22), ip[28..].to_vec()));
        at += 16 + len;
    }
    out
}

#[test]
fn capture_records_the_server_side_with_the_runner_faults_applied() {
    let server = local_socket();
    let dir = std::env::temp_dir().join(format!("netem-capture-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let pcap = dir.join("link.pcap");
    let mut down = LinkConfig::ideal();
    down.corrupt = Some(crate::faults::Corruption {
        probability: 1.0,
        span: Some(4),
    });
    let mut up = LinkConfig::ideal();
    up.drop_list = "2-3".parse().expect("drop list");
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        to: server.local_addr().expect("addr"),
        up,
        down,
        seed: 5,
        pcap: Some(pcap.clone()),
        rebind: None,
    };
    let relay = spawn(config).expect("relay starts");
    let upstream = relay.upstream_addr();
    let to = server.local_addr().expect("addr");
    let client = local_socket();
    let mut buf = [0u8; 64];
    for seq in 0u32..5 {
        let mut payload = seq.to_be_bytes().to_vec();
        payload.extend_from_slice(b"payload");
        client.send_to(&payload, relay.local_addr()).expect("send");
        if seq == 1 || seq == 2 {
            continue; // dropped by the list (datagrams 2 and 3)
        }
        let (n, from) = server.recv_from(&mut buf).expect("server receives");
        assert_eq!((&buf[..n], from), (&payload[..], upstream));
        server.send_to(&payload, from).expect("echo");
        let (n, _) = client.recv_from(&mut buf).expect("client receives");
        assert_eq!(n, payload.len());
        assert_ne!(
            &buf[..4],
            &payload[..4],
            "the echo is damaged in its first 4 bytes"
        );
        assert_eq!(&buf[4..n], &payload[4..], "and only there");
    }
    let stats = relay.stop().expect("stats");
    assert_eq!((stats.up.dropped_listed, stats.down.corrupted), (2, 3));
    let records = read_capture(&pcap);
    let _ = std::fs::remove_dir_all(&dir);
    // Three client datagrams reached the server, three echoes left it: the
    // capture holds the server's side, so the echoes are undamaged there.
    let seqs: Vec<(u32, bool)> = records
        .iter()
        .map(|(_, src, dst, p)| {
            assert!(p.ends_with(b"payload"));
            let from_server = *src == to;
            assert_eq!(if from_server { *dst } else { *src }, upstream);
            (seq_of(p), from_server)
        })
        .collect();
    assert_eq!(
        seqs,
        [
            (0, false),
            (0, true),
            (3, false),
            (3, true),
            (4, false),
            (4, true)
        ]
    );
    assert!(
        records.windows(2).all(|w| w[0].0 <= w[1].0),
        "in time order"
    );
}

/// NAT rebinding: after each interval the server sees the client's
/// datagrams from a new upstream port (and, with `address`, a new loopback
/// address); what it sends to the old one is lost, what it sends to the new
/// one reaches the client.
#[test]
fn rebinding_moves_the_upstream_side() {
    for address in [false, true] {
        let server = local_socket();
        let config = RelayConfig {
            listen: "127.0.0.1:0".parse().expect("addr"),
            to: server.local_addr().expect("addr"),
            up: LinkConfig::ideal(),
            down: LinkConfig::ideal(),
            seed: 3,
            pcap: None,
            rebind: Some(Rebind {
                every: Duration::from_millis(300),
                address,
            }),
        };
        let relay = spawn(config).expect("relay starts");
        let client = local_socket();
        let mut buf = [0u8; 64];
        client
            .send_to(&1u32.to_be_bytes(), relay.local_addr())
            .expect("send");
        let (_, first) = server.recv_from(&mut buf).expect("first datagram");
        std::thread::sleep(StdDuration::from_millis(450));
        client
            .send_to(&2u32.to_be_bytes(), relay.local_addr())
            .expect("send");
        let (n, second) = server.recv_from(&mut buf).expect("second datagram");
        assert_eq!(seq_of(&buf[..n]), 2);
        assert_ne!(first.port(), second.port(), "the port moved");
        assert_eq!(first.ip() != second.ip(), address, "{first} -> {second}");
        // The old binding is gone; the new one reaches the client.
        server.send_to(&3u32.to_be_bytes(), first).expect("send");
        server.send_to(&4u32.to_be_bytes(), second).expect("send");
        let (n, _) = client
            .recv_from(&mut buf)
            .expect("reply via the new binding");
        assert_eq!(seq_of(&buf[..n]), 4);
        let stats = relay.stop().expect("stats");
        assert!(stats.rebinds >= 1, "{stats:?}");
    }
}

/// ECN through the relay: ECT(0) marks cross it both ways, and a link
/// whose queue marks turns some of a burst's marks into CE.
#[test]
fn ecn_codepoints_cross_the_relay_and_queues_mark_ce() {
    let server = local_socket();
    server
        .set_read_timeout(Some(StdDuration::from_secs(2)))
        .expect("timeout");
    let server_state = quinn_udp::UdpSocketState::new((&server).into()).expect("state");
    server.set_nonblocking(false).expect("blocking again");
    let mut up = LinkConfig::new(
        Capacity::Constant {
            bits_per_sec: 2_000_000,
        },
        Duration::ZERO,
    );
    up.queue = QueueLimit::Packets(100);
    up.ce_threshold = Some(5);
    let config = RelayConfig {
        listen: "127.0.0.1:0".parse().expect("addr"),
        to: server.local_addr().expect("addr"),
        up,
        down: LinkConfig::ideal(),
        seed: 3,
        pcap: None,
        rebind: None,
    };
    let relay = spawn(config).expect("relay starts");
    let client = local_socket();
    let client_state = quinn_udp::UdpSocketState::new((&client).into()).expect("state");
    let payload = [7u8; 1000];
    for _ in 0..30 {
        let t = quinn_udp::Transmit {
            destination: relay.local_addr(),
            ecn: Some(quinn_udp::EcnCodepoint::Ect0),
            contents: &payload,
            segment_size: None,
            src_ip: None,
        };
        client_state.send((&client).into(), &t).expect("send");
    }
    let mut seen = Vec::new();
    let mut buf = vec![0u8; 2000];
    while seen.len() < 30 {
        let mut meta = [quinn_udp::RecvMeta::default()];
        let mut bufs = [io::IoSliceMut::new(&mut buf)];
        match server_state.recv((&server).into(), &mut bufs, &mut meta) {
            Ok(_) => {
                let m = meta[0];
                let stride = if m.stride == 0 { m.len } else { m.stride };
                for _ in 0..m.len.div_ceil(stride.max(1)) {
                    seen.push(m.ecn);
                }
            }
            Err(e) => panic!("after {} datagrams: {e}", seen.len()),
        }
    }
    let ce = seen
        .iter()
        .filter(|e| **e == Some(quinn_udp::EcnCodepoint::Ce))
        .count();
    let ect0 = seen
        .iter()
        .filter(|e| **e == Some(quinn_udp::EcnCodepoint::Ect0))
        .count();
    assert_eq!(ce + ect0, 30, "{seen:?}");
    assert!(ce >= 10 && ect0 >= 5, "{ce} CE, {ect0} ECT(0)");
    let stats = relay.stop().expect("stats");
    assert_eq!(stats.up.ce_marked as usize, ce);
}
