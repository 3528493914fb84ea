//! A server's preferred address (RFC 9000 §9.6, issue 16): the server
//! offers a second address; the client, once the handshake is confirmed,
//! validates it and moves there, and the download finishes there
//! byte-exact. A preferred address nobody answers at leaves the client on
//! the original path; a client told not to follow never probes.

use std::net::SocketAddr;

use transport::test_pair::{content, seeded_server_config, Pair};
use transport::{Endpoint, EndpointConfig, PreferredAddresses, TransportConfig};
use wire::time::Duration;

const PREFERRED: &str = "127.0.0.2:4434";

/// A pair whose server offers `PREFERRED`, reachable when `reachable`.
fn pair_with_preferred(client: TransportConfig, reachable: bool) -> Pair {
    let mut pair = Pair::seeded(TransportConfig::default(), client, 5);
    let mut server = seeded_server_config(TransportConfig::default(), [7; 32]);
    let mut addresses = PreferredAddresses::default();
    addresses.add(PREFERRED.parse().unwrap()).unwrap();
    server.preferred_address = addresses;
    pair.server = Endpoint::new(EndpointConfig::server(11, server));
    if reachable {
        pair.server_also_at.push(PREFERRED.parse().unwrap());
    }
    pair
}

fn download(pair: &mut Pair) {
    let data = content(2_000_000, 4);
    let got = pair.download(&data, Duration::from_secs(60));
    assert!(got == data, "not byte-exact");
}

#[test]
fn the_client_moves_to_the_preferred_address_and_finishes_there() {
    let preferred: SocketAddr = PREFERRED.parse().unwrap();
    let mut pair = pair_with_preferred(TransportConfig::default(), true);
    download(&mut pair);
    let client = pair.client();
    assert_eq!(client.moved_to_preferred_address(), Some(preferred));
    assert_eq!(client.remote_address(), preferred);
    let c = client.stats();
    assert_eq!(c.path_changes, 1);
    assert_eq!(c.path_validations_failed, 0);
    let server = pair.server();
    // The server answers from the address its client now sends to.
    assert_eq!(server.local_address(), Some(preferred));
    let s = server.stats();
    assert_eq!(s.path_changes, 1);
    assert_eq!(s.path_validations_failed, 0);
    // The handshake's connection ID was retired: the server replaced it.
    let routes = pair.server.stats().routes;
    assert!(routes >= 2, "routes {routes}");
}

#[test]
fn an_unreachable_preferred_address_leaves_the_client_where_it_was() {
    let mut pair = pair_with_preferred(TransportConfig::default(), false);
    download(&mut pair);
    // Probing takes three PTOs; keep the connection up past them.
    let end = pair.now + Duration::from_secs(5);
    pair.drive_until(Duration::from_secs(5), |p| p.now >= end);
    let original = pair.server_addr;
    let client = pair.client();
    assert_eq!(client.moved_to_preferred_address(), None);
    assert_eq!(client.remote_address(), original);
    let c = client.stats();
    assert_eq!(c.path_changes, 0);
    assert_eq!(c.path_validations_failed, 1);
    let server = pair.server();
    assert_eq!(server.local_address(), Some(original));
    assert_eq!(server.stats().path_changes, 0);
}

/// The client's first challenge is lost (nobody answers at the preferred
/// address yet): the next goes after the current path's PTO, tens of
/// milliseconds here, not after the PTO at the initial RTT (about a
/// second), so the client moves well within 400 ms. On a loaded real host
/// a dropped challenge or answer used to leave a short download on the
/// original path.
#[test]
fn a_lost_challenge_goes_again_after_the_paths_pto() {
    let preferred: SocketAddr = PREFERRED.parse().unwrap();
    let mut pair = pair_with_preferred(TransportConfig::default(), false);
    pair.connect();
    // The handshake is confirmed (HANDSHAKE_DONE) one RTT later, and the
    // first challenge leaves then: 100 ms cover both.
    let lost = pair.now + Duration::from_millis(100);
    pair.drive_until(Duration::from_millis(100), |p| p.now >= lost);
    assert_eq!(pair.client().moved_to_preferred_address(), None);
    assert!(pair.dropped[1] > 0, "the first challenge went nowhere");
    pair.server_also_at.push(preferred);
    let end = pair.now + Duration::from_millis(400);
    pair.drive_until(Duration::from_millis(400), |p| {
        p.now >= end || p.client().moved_to_preferred_address().is_some()
    });
    assert_eq!(
        pair.client().moved_to_preferred_address(),
        Some(preferred),
        "not moved within 400 ms of a lost challenge"
    );
    assert_eq!(pair.client().stats().path_validations_failed, 0);
}

#[test]
fn a_client_told_not_to_follow_stays() {
    let client = TransportConfig {
        follow_preferred_address: false,
        ..TransportConfig::default()
    };
    let mut pair = pair_with_preferred(client, true);
    download(&mut pair);
    let original = pair.server_addr;
    let client = pair.client();
    assert_eq!(client.moved_to_preferred_address(), None);
    assert_eq!(client.remote_address(), original);
    assert_eq!(client.stats().path_changes, 0);
    assert_eq!(client.stats().path_validations_failed, 0);
    assert_eq!(pair.server().stats().path_changes, 0);
}

#[test]
fn a_server_without_a_preferred_address_offers_none() {
    // The seeded pair of every other test: nothing moves, and the server
    // endpoint routes only its usual connection IDs.
    let mut pair = Pair::seeded(TransportConfig::default(), TransportConfig::default(), 5);
    download(&mut pair);
    assert_eq!(pair.client().moved_to_preferred_address(), None);
    assert_eq!(pair.server().stats().path_changes, 0);
}
