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
