//! End-to-end transfers through the in-memory `Pair`: handshake, byte-exact
//! delivery with and without loss, flow control, datagrams, close.

use transport::test_pair::{content, Pair};
use transport::{ConnectionError, Event, TransportConfig};
use wire::time::Duration;
use wire::Dir;

#[test]
fn handshake_completes() {
    let mut pair = Pair::default_pair();
    pair.connect();
    assert!(!pair.client().is_handshaking());
    assert!(!pair.server().is_handshaking());
    assert_eq!(
        pair.client().alpn_protocol(),
        Some(transport::crypto::TEST_ALPN)
    );
}

#[test]
fn lossless_download_is_byte_exact() {
    let mut pair = Pair::default_pair();
    let data = content(2_000_000, 1);
    let got = pair.download(&data, Duration::from_secs(30));
    assert!(got == data, "corrupted transfer");
    let s = pair.server().stats();
    assert_eq!(s.lost_packets, 0);
    assert_eq!(s.replicas, 0);
    assert!(s.data_packets > 1000);
}

#[test]
fn lossy_download_is_byte_exact_and_counts_recovery() {
    for seed in [1u64, 2, 3] {
        let mut pair = Pair::default_pair().with_random_loss(0.05);
        pair.rng = rand::SeedableRng::seed_from_u64(seed);
        let data = content(1_000_000, seed);
        let got = pair.download(&data, Duration::from_secs(120));
        assert!(got == data, "corrupted transfer with seed {seed}");
        let s = pair.server().stats();
        assert!(s.lost_packets > 0, "5% loss but nothing lost");
        // Plain QUIC: one replica per round, never extra ones.
        assert!(s.replicas > 0);
        assert_eq!(s.extra_replicas, 0);
        assert!(s.recovery.n_max >= 1);
    }
}

#[test]
fn receive_window_bounds_what_the_peer_sends() {
    let mut client_cfg = TransportConfig::default();
    client_cfg.streams.receive_window = 64 * 1024;
    client_cfg.streams.stream_receive_window = 64 * 1024;
    let mut pair = Pair::new(TransportConfig::default(), client_cfg);
    pair.connect();
    let id = pair.client().streams().open(Dir::Bi).unwrap();
    pair.client().streams().write(id, b"GET /\r\n").unwrap();
    pair.client().streams().finish(id).unwrap();
    let data = content(1_000_000, 5);
    let mut sid = None;
    // The client never reads: the server must stop at the window.
    pair.drive_until(Duration::from_secs(5), |p| {
        if sid.is_none() {
            sid = p.server().streams().accept(Dir::Bi);
        }
        if let Some(s) = sid {
            let _ = p.server().streams().write(s, &data);
        }
        false
    });
    let sent = pair.server().stats().stream_bytes_sent;
    assert!(sent <= 64 * 1024, "sent {sent} bytes past a 64 KiB window");
    assert!(
        sent >= 60 * 1024,
        "sent only {sent} bytes of a 64 KiB window"
    );
}

#[test]
fn datagrams_flow_both_ways() {
    let mut pair = Pair::default_pair();
    pair.connect();
    pair.client().send_datagram(b"ping".to_vec()).unwrap();
    let mut got = None;
    pair.drive_until(Duration::from_secs(1), |p| {
        got = p.server().recv_datagram();
        got.is_some()
    });
    assert_eq!(got.as_deref(), Some(&b"ping"[..]));
    let max = pair.client().max_datagram_payload().unwrap();
    assert!(pair.client().send_datagram(vec![0; max + 1]).is_err());
}

#[test]
fn application_close_reaches_peer() {
    let mut pair = Pair::default_pair();
    pair.connect();
    let now = pair.now;
    pair.client().close(now, 42, b"bye");
    let mut reason = None;
    pair.drive_until(Duration::from_secs(1), |p| {
        while let Some(ev) = p.server().poll_event() {
            if let Event::ConnectionLost(r) = ev {
                reason = Some(r);
            }
        }
        reason.is_some()
    });
    assert_eq!(
        reason,
        Some(ConnectionError::PeerClosed {
            code: 42,
            application: true,
            reason: "bye".into()
        })
    );
}

#[test]
fn idle_connection_times_out() {
    let cfg = TransportConfig {
        max_idle_timeout: Duration::from_secs(2),
        ..TransportConfig::default()
    };
    let mut pair = Pair::new(cfg.clone(), cfg);
    pair.connect();
    let mut lost = false;
    pair.drive_until(Duration::from_secs(10), |p| {
        while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
            lost |= ev == Event::ConnectionLost(ConnectionError::TimedOut);
        }
        lost
    });
    assert!(lost);
    // Once its last event is read, the endpoint forgets the connection.
    pair.step();
    assert!(pair.client_opt().is_none());
}

/// Heavy loss both ways (ACKs too): recovery must never stall.
#[test]
fn heavy_loss_download_completes() {
    for seed in 10u64..16 {
        let mut pair = Pair::default_pair().with_random_loss(0.2);
        pair.rng = rand::SeedableRng::seed_from_u64(seed);
        let data = content(400_000, seed);
        let got = pair.download(&data, Duration::from_secs(600));
        assert!(got == data, "corrupted transfer with seed {seed}");
    }
}

/// Burst loss: everything sent during 40 ms of every 500 ms is
/// dropped (both ways), on top of 1 % random loss.
#[test]
fn burst_loss_download_completes() {
    let mut pair = Pair::default_pair();
    pair.drop = Some(Box::new(|now, _, _, rng| {
        use rand::Rng;
        let phase = now.as_nanos() % 500_000_000;
        (250_000_000..290_000_000).contains(&phase) || rng.gen::<f64>() < 0.01
    }));
    let data = content(3_000_000, 77);
    let got = pair.download(&data, Duration::from_secs(600));
    assert!(got == data);
    let s = pair.server().stats();
    assert!(
        s.lost_packets > 50,
        "bursts should have cost packets: {}",
        s.lost_packets
    );
}

/// RFC 9002 §6.2.4: when the probe timeout finds no new data to send, the
/// probe carries the oldest data in flight. Here the one-packet response
/// is dropped and so is every acknowledgement the client sends for the
/// next 3 s: probes of PINGs alone would leave the response to an
/// acknowledgement that declares it lost, and none gets through (what a
/// corrupting link did to an interop case). The probe's copy delivers it
/// within a few PTOs.
#[test]
fn probe_carries_the_oldest_data_when_acknowledgements_are_lost() {
    let mut pair = Pair::default_pair();
    pair.connect();
    // Let the handshake's last packets (HANDSHAKE_DONE, tickets) settle.
    pair.drive_until(Duration::from_millis(500), |_| false);
    let start = pair.now;
    let mut blackout_from: Option<wire::time::Instant> = None;
    pair.drop = Some(Box::new(move |now, to_server, data, _| {
        if !to_server && blackout_from.is_none() && data.len() > 600 {
            blackout_from = Some(now);
            return true;
        }
        to_server && blackout_from.is_some_and(|t| now < t + Duration::from_secs(3))
    }));
    let data = content(1000, 9);
    let got = pair
        .try_fetch(&data, Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(got == data, "corrupted transfer");
    let took = pair.now - start;
    assert!(
        took < Duration::from_secs(2),
        "the response arrived after {took:?}: only once the client's acknowledgements got through"
    );
    let s = pair.server().stats();
    assert!(s.probe_copies >= 1, "{s:?}");
    assert!(
        s.replicas >= s.probe_copies,
        "a probe's copy is a retransmission"
    );
    // The response's loss is declared once acknowledgements get through
    // again: recovered in round 1 by the copy, not abandoned.
    pair.drive_until(Duration::from_secs(5), |_| false);
    let s = pair.server().stats();
    assert_eq!(s.lost_packets, 1, "{s:?}");
    assert_eq!(s.recovery.abandoned_items, 0, "{s:?}");
    assert_eq!(s.recovery.n_hist.get(1), Some(&1), "{s:?}");
    assert_eq!(s.recovery.n_hist.iter().sum::<u64>(), 1, "{s:?}");
}
