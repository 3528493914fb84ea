//! A client that moves (RFC 9000 §9, issue 16): the server follows a NAT
//! rebinding or an address change to the new address, validates it, and
//! the download completes byte-exact; a port change (NAT rebinding) keeps
//! the path's congestion state.

use std::net::SocketAddr;

use transport::test_pair::{content, Pair};
use transport::TransportConfig;
use wire::time::{Duration, Instant};

fn moved_download(new_client: SocketAddr, at_ms: u64, size: usize) -> Pair {
    let mut pair = Pair::seeded(TransportConfig::default(), TransportConfig::default(), 7);
    pair.rebind = Some((Instant::from_millis(at_ms), new_client));
    let data = content(size, 3);
    let got = pair.download(&data, Duration::from_secs(60));
    assert!(got == data, "not byte-exact after the move");
    pair
}

#[test]
fn the_server_follows_a_nat_rebinding() {
    let new = SocketAddr::from(([127, 0, 0, 1], 6001));
    let mut pair = moved_download(new, 200, 3_000_000);
    let server = pair.server();
    assert_eq!(server.remote_address(), new);
    let s = server.stats();
    assert_eq!(s.path_changes, 1);
    assert_eq!(s.path_validations_failed, 0);
    // A port change alone keeps the path's congestion state: no collapse
    // to the initial window (10 packets) after the move.
    assert!(s.cwnd > 20 * 1350, "cwnd {} after a rebinding", s.cwnd);
}

#[test]
fn the_server_follows_a_new_address_and_starts_the_path_afresh() {
    let new = SocketAddr::from(([127, 0, 0, 2], 5000));
    let mut pair = moved_download(new, 150, 3_000_000);
    let server = pair.server();
    assert_eq!(server.remote_address(), new);
    let s = server.stats();
    assert_eq!(s.path_changes, 1);
    assert_eq!(s.path_validations_failed, 0);
}

/// Losses that come to light while a new path is being validated: a burst
/// of the server's packets is lost, and the acknowledgement that reveals
/// it comes from the client's new port, so the replicas of the lost data
/// leave in packets cut to the unvalidated path's anti-amplification
/// budget (three times what the new address sent). A replica once carried
/// nothing when its whole chunk did not fit, and its data was given up as
/// "nothing left" for good: the download stalled until the idle timeout
/// (seen with `artq link --rebind-every 400`). Each replica now carries
/// what fits, or waits for a packet with room.
#[test]
fn losses_found_while_the_new_path_is_validated_are_recovered() {
    for (seed, burst_ms) in [(1, 20), (2, 40), (3, 80)] {
        let mut pair = Pair::seeded(TransportConfig::default(), TransportConfig::default(), seed);
        pair.rate = 6_250_000; // 50 Mbit/s
        let burst = Instant::from_millis(500)..Instant::from_millis(500 + burst_ms);
        pair.drop = Some(Box::new(move |now, to_server, _, _| {
            !to_server && burst.contains(&now)
        }));
        pair.rebind = Some((
            Instant::from_millis(500 + burst_ms / 2),
            SocketAddr::from(([127, 0, 0, 1], 6001)),
        ));
        let data = content(8_000_000, seed);
        let got = pair
            .try_download(&data, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("burst {burst_ms} ms: {e}: {:?}", pair.server().stats()));
        assert!(got == data, "burst {burst_ms} ms: not byte-exact");
        let s = pair.server().stats();
        assert!(s.lost_packets > 0, "burst {burst_ms} ms: nothing was lost");
        assert_eq!(s.recovery.abandoned_items, 0, "burst {burst_ms} ms: {s:?}");
        // The challenge lost in the burst went out again when its packet
        // was declared lost: validated at the first try.
        assert_eq!(
            (s.path_changes, s.path_validations_failed),
            (1, 0),
            "burst {burst_ms} ms: {s:?}"
        );
    }
}

/// A NAT that rebinds the client every 400 ms through a whole download
/// (`artq link --rebind-every 400`): what the server sends to the old port
/// each time is lost, and the download completes byte-exact.
#[test]
fn a_download_survives_a_rebinding_every_400_ms() {
    for seed in 1..=3 {
        let mut pair = Pair::seeded(TransportConfig::default(), TransportConfig::default(), seed);
        pair.rate = 6_250_000; // 50 Mbit/s
        pair.rebind_every = Some((Instant::from_millis(300), Duration::from_millis(400)));
        let data = content(20_000_000, seed);
        let got = pair
            .try_download(&data, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert!(got == data, "seed {seed}: not byte-exact");
        let s = pair.server().stats();
        assert!(s.path_changes >= 5, "seed {seed}: {} moves", s.path_changes);
        assert!(s.lost_packets > 0, "seed {seed}: nothing was lost");
    }
}
