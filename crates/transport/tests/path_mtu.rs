//! Path MTU discovery (DPLPMTUD, RFC 9000 §14.3, RFC 8899;
//! connection/path_mtu.rs): a sender with discovery on finds the largest
//! size a path carries and sends its data in it; probes lost because they
//! are too large are neither congestion nor lost data; a path whose MTU
//! shrinks under an established size (a black hole) sends the connection
//! back to its configured size without losing the transfer; and without
//! discovery nothing larger than the configured size is ever sent.

use std::cell::Cell;
use std::rc::Rc;

use transport::test_pair::{content, Pair};
use transport::TransportConfig;
use wire::time::Duration;

fn discovering() -> TransportConfig {
    TransportConfig {
        mtu_discovery_ceiling: Some(1452),
        ..TransportConfig::default()
    }
}

/// A pair whose network drops every datagram larger than
/// `path_mtu(bytes delivered to the client so far)`; the largest datagram
/// delivered each way is kept in the returned cell (to the client, to the
/// server).
fn pair_over(
    server: TransportConfig,
    client: TransportConfig,
    path_mtu: impl Fn(usize) -> usize + 'static,
) -> (Pair, Rc<Cell<(usize, usize)>>) {
    let mut pair = Pair::seeded(server, client, 9);
    let largest = Rc::new(Cell::new((0, 0)));
    let seen = largest.clone();
    let mut delivered = 0;
    pair.drop = Some(Box::new(move |_, to_server, data, _| {
        if data.len() > path_mtu(delivered) {
            return true;
        }
        let (c, s) = seen.get();
        seen.set(if to_server {
            (c, s.max(data.len()))
        } else {
            delivered += data.len();
            (c.max(data.len()), s)
        });
        false
    }));
    (pair, largest)
}

#[test]
fn a_path_that_carries_the_ceiling_gets_it_with_one_probe() {
    let (mut pair, largest) = pair_over(discovering(), discovering(), |_| 1500);
    let data = content(2_000_000, 1);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    let s = pair.server().stats();
    assert_eq!(pair.server().max_datagram_size(), 1452);
    assert_eq!((s.mtu_probes_sent, s.mtu_probes_lost), (1, 0));
    assert_eq!(largest.get().0, 1452, "the data did not use the size found");
    // The client, which sends only acknowledgements, searched too.
    assert_eq!(pair.client().max_datagram_size(), 1452);
}

#[test]
fn a_smaller_path_is_found_and_its_lost_probes_are_not_congestion() {
    let (mut pair, largest) = pair_over(discovering(), discovering(), |_| 1400);
    // Long enough for the whole search (each size that fails takes three
    // probes, each declared lost about an RTT later).
    let data = content(8_000_000, 2);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    let size = pair.server().max_datagram_size();
    let s = pair.server().stats();
    assert!((1381..=1400).contains(&size), "found {size}");
    // The ceiling three times (MAX_PROBES), then halving.
    assert!(s.mtu_probes_lost >= 3, "{} probes lost", s.mtu_probes_lost);
    // Only probes were lost: no data loss, no congestion reaction.
    assert_eq!(s.lost_packets, 0);
    assert_eq!(s.congestion_events, 0);
    assert_eq!(s.replicas, 0);
    assert_eq!(largest.get().0, usize::from(size));
}

#[test]
fn a_black_hole_after_the_search_falls_back_and_the_download_completes() {
    // The path carries 1500 bytes until 400 kB have reached the client,
    // then 1350 (a route change behind a smaller link).
    let (mut pair, _) = pair_over(discovering(), discovering(), |delivered| {
        if delivered < 400_000 {
            1500
        } else {
            1350
        }
    });
    let data = content(3_000_000, 3);
    // 0.3 s without the black hole and 0.75 s with it; with detection only
    // after 250 such loss events it took 23 s (the PTO's small probes were
    // all that got through).
    assert!(pair.download(&data, Duration::from_secs(3)) == data);
    let s = pair.server().stats();
    assert!(s.mtu_black_holes >= 1, "no black hole detected: {s:?}");
    // The search after the fall back finds nothing above the base.
    assert_eq!(pair.server().max_datagram_size(), 1350);
}

#[test]
fn without_discovery_nothing_exceeds_the_configured_size() {
    let (mut pair, largest) = pair_over(
        TransportConfig::default(),
        TransportConfig::default(),
        |_| 65_527,
    );
    let data = content(1_000_000, 4);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    assert_eq!(pair.server().stats().mtu_probes_sent, 0);
    assert_eq!(pair.server().max_datagram_size(), 1350);
    let (to_client, to_server) = largest.get();
    assert!(
        to_client <= 1350 && to_server <= 1350,
        "{to_client} / {to_server}"
    );
}

#[test]
fn a_ceiling_at_or_below_the_configured_size_turns_discovery_off() {
    let low = TransportConfig {
        mtu_discovery_ceiling: Some(1300),
        ..TransportConfig::default()
    };
    let (mut pair, largest) = pair_over(low, discovering(), |_| 1500);
    let data = content(500_000, 5);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    assert_eq!(pair.server().stats().mtu_probes_sent, 0);
    assert!(largest.get().0 <= 1350);
    // The client's own search is independent of the server's setting.
    assert_eq!(pair.client().max_datagram_size(), 1452);
}

#[test]
fn random_loss_is_not_a_black_hole() {
    for seed in 0..4 {
        let mut pair = Pair::seeded(discovering(), discovering(), seed).with_random_loss(0.05);
        let data = content(3_000_000, seed);
        assert!(pair.download(&data, Duration::from_secs(60)) == data);
        let s = pair.server().stats();
        assert!(s.lost_packets > 50, "seed {seed}: the loss did not happen");
        assert_eq!(s.mtu_black_holes, 0, "seed {seed}: {s:?}");
        assert_eq!(pair.server().max_datagram_size(), 1452, "seed {seed}");
    }
}
