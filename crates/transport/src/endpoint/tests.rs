//! The endpoint's work is proportional to the connections that have some
//! (module doc, "Work is proportional to the connections that have some").

use std::net::SocketAddr;

use wire::time::{Duration, Instant};

use super::{ConnectionHandle, Endpoint};
use crate::config::{ClientConfig, EndpointConfig};
use crate::TransportConfig;

const IDLE: usize = 1000;

fn server_addr() -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 1], 4433))
}

fn client_config() -> ClientConfig {
    crate::test_pair::client_config(TransportConfig::default())
}

/// A client endpoint with `n` connections to a silent server, opened 100
/// microseconds apart, each of which has sent its first flight: all idle,
/// each waiting on its own loss-detection timer. Returns the endpoint and
/// the time after the last first flight.
fn idle_endpoint(n: usize) -> (Endpoint, Instant) {
    let mut ep = Endpoint::new(EndpointConfig::client(7));
    let config = client_config();
    let mut buf = Vec::new();
    let mut now = Instant::ZERO;
    for _ in 0..n {
        now += Duration::from_micros(100);
        ep.connect(now, &config, server_addr()).expect("connect");
        while ep.poll_transmit(now, &mut buf).is_some() {}
    }
    // New connections are visited once by handle_timeout (their endpoint
    // events); after that, only expired ones are.
    ep.handle_timeout(now);
    assert_eq!(due(&ep, now), 0, "no loss detection timer fired yet");
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    (ep, now)
}

/// The connections whose timer is due at `now`, by scanning (the test may).
fn due(ep: &Endpoint, now: Instant) -> usize {
    ep.handles()
        .iter()
        .filter(|&&h| {
            ep.connection(h)
                .and_then(|c| c.poll_timeout())
                .is_some_and(|t| t <= now)
        })
        .count()
}

#[test]
fn one_active_connection_among_a_thousand_idle_ones_is_the_only_one_polled() {
    let (mut ep, now) = idle_endpoint(IDLE);
    assert_eq!(ep.len(), IDLE);
    let mut buf = Vec::new();

    // Nothing to send: no connection is polled at all.
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    assert_eq!(ep.work.polled, 0);
    ep.handle_timeout(now);
    assert_eq!(ep.work.visited, 0, "no timer is due, nothing was borrowed");

    // The application closes one connection: it, and only it, is polled.
    let h = ConnectionHandle(IDLE / 2);
    ep.connection_mut(h)
        .expect("connection")
        .close(now, 0, b"bye");
    let t = ep
        .poll_transmit(now, &mut buf)
        .expect("its CONNECTION_CLOSE");
    assert_eq!(t.destination, server_addr());
    assert_eq!(ep.work.polled, 1);
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    assert_eq!(ep.work.polled, 1, "polled once more, then dropped");
    assert!(ep.poll_transmit(now, &mut buf).is_none());
    assert_eq!(ep.work.polled, 0);
    // handle_timeout looks at the borrowed connection (its endpoint
    // events), not at the others.
    ep.handle_timeout(now);
    assert_eq!(ep.work.visited, 1);
}

#[test]
fn timers_are_kept_in_deadline_order_and_only_expired_ones_are_visited() {
    let (mut ep, now) = idle_endpoint(IDLE);
    let mut buf = Vec::new();
    let first = ep.poll_timeout().expect("loss detection timers");
    assert!(first > now);
    // The same answer as a scan over every connection.
    let scanned = ep
        .handles()
        .iter()
        .filter_map(|&h| ep.connection(h).and_then(|c| c.poll_timeout()))
        .min();
    assert_eq!(Some(first), scanned);

    // Past the first deadline by a little: the connections opened in that
    // time are due, the others are not.
    let later = first + Duration::from_micros(450);
    let expired = due(&ep, later);
    assert!((2..20).contains(&expired), "{expired} due");

    // poll_transmit before handle_timeout polls the expired connections
    // (a passed deadline may be a pacing release) and no other.
    let _ = ep.poll_transmit(later, &mut buf);
    assert_eq!(ep.work.polled, expired);

    ep.handle_timeout(later);
    assert_eq!(ep.work.visited, expired);
    assert_eq!(due(&ep, later), 0, "every due timer fired");
    // Their probes go out; the idle connections are not polled.
    let mut sent = 0;
    while ep.poll_transmit(later, &mut buf).is_some() {
        sent += 1;
        assert!(ep.work.polled <= expired);
    }
    assert!(sent >= expired, "{sent} probes from {expired} connections");
    // The deadlines moved on; the earliest is still the scan's minimum.
    let scanned = ep
        .handles()
        .iter()
        .filter_map(|&h| ep.connection(h).and_then(|c| c.poll_timeout()))
        .min();
    assert_eq!(ep.poll_timeout(), scanned);
}

#[test]
fn a_borrowed_connection_s_new_deadline_is_seen_before_it_is_settled() {
    let (mut ep, now) = idle_endpoint(3);
    let before = ep.poll_timeout().expect("a timer");
    // The earliest deadline is the first connection's; closing it replaces
    // its loss-detection timer by the closing period (three PTOs), so the
    // endpoint's next deadline moves, and poll_timeout (which takes &self)
    // must see it before any call that settles the borrowed connection.
    ep.connection_mut(ConnectionHandle(0))
        .expect("connection")
        .close(now, 0, b"");
    let scanned = ep
        .handles()
        .iter()
        .filter_map(|&h| ep.connection(h).and_then(|c| c.poll_timeout()))
        .min();
    assert_eq!(ep.poll_timeout(), scanned);
    assert_ne!(ep.poll_timeout(), Some(before));
}

#[test]
fn only_connections_that_acted_are_news_for_the_application() {
    let (mut ep, _) = idle_endpoint(IDLE);
    let mut buf = Vec::new();
    // The thousand new connections were news once; nothing happened since.
    assert_eq!(news_of(&mut ep).len(), IDLE);
    assert!(news_of(&mut ep).is_empty());

    // Timers fire for a few: those, and no other, are news.
    let later = ep.poll_timeout().expect("timers") + Duration::from_micros(450);
    let expired = due(&ep, later);
    ep.handle_timeout(later);
    let news = news_of(&mut ep);
    assert_eq!(news.len(), expired);
    while ep.poll_transmit(later, &mut buf).is_some() {}

    // The application borrows one to write nothing (no event queued): the
    // turn's settlement forgets it.
    let h = ConnectionHandle(7);
    ep.connection_mut(h).expect("connection");
    assert_eq!(news_of(&mut ep), vec![h], "a borrowed connection is news");
    ep.connection_mut(h).expect("connection");
    ep.settle_news();
    assert!(
        news_of(&mut ep).is_empty(),
        "borrowed, nothing queued: settled"
    );
}

#[test]
fn a_connection_with_unread_events_stays_news_after_the_turn() {
    let (mut ep, _) = idle_endpoint(3);
    let _ = news_of(&mut ep);
    let h = ConnectionHandle(1);
    // Asking for Writable on a stream that cannot be written (none was
    // opened) queues the event at once.
    let conn = ep.connection_mut(h).expect("connection");
    let id = wire::StreamId::new(wire::Side::Client, wire::Dir::Bi, 0);
    conn.streams().notify_writable(id);
    assert!(conn.has_events());
    ep.settle_news();
    assert_eq!(news_of(&mut ep), vec![h], "its event is still unread");
}

#[test]
fn news_list_takes_each_connection_once_in_handle_order_and_stays_bounded() {
    let mut news = super::NewsList::default();
    for round in 0..10_000usize {
        news.insert(round % 7 * 3);
        news.insert(5);
        assert!(news.handles.len() <= 2 * 8 + 64 + 1, "repeats are folded");
    }
    news.remove(9);
    let mut taken = Vec::new();
    news.take_into(&mut taken);
    let handles: Vec<usize> = taken.iter().map(|h| h.0).collect();
    assert_eq!(handles, vec![0, 3, 5, 6, 12, 15, 18]);
    taken.clear();
    news.take_into(&mut taken);
    assert!(taken.is_empty());
}

/// The endpoint's news, as a list.
fn news_of(ep: &mut Endpoint) -> Vec<ConnectionHandle> {
    let mut out = Vec::new();
    ep.take_news(&mut out);
    out
}

#[test]
fn a_connection_forgotten_leaves_no_reset_token_indexed() {
    let mut pair = crate::test_pair::Pair::default_pair();
    // A server with static keys gives its handshake ID's reset token.
    let keys = crate::StaticKeys {
        token: [1; 32],
        reset: [2; 32],
    };
    let config = crate::test_pair::server_config(TransportConfig::default());
    pair.server = Endpoint::new(EndpointConfig::server(3, config).with_static_keys(keys));
    pair.connect();
    assert!(
        !pair.client.reset_tokens.is_empty(),
        "the client indexes the server's reset token"
    );
    let now = pair.now;
    pair.client().close(now, 0, b"done");
    // Both sides drain (three PTOs) and the pair reads their last events.
    pair.drive_until(Duration::from_secs(5), |p| {
        while p.client_opt().and_then(|c| c.poll_event()).is_some() {}
        p.client.is_empty()
    });
    assert!(pair.client.is_empty(), "the client forgot its connection");
    assert!(
        pair.client.reset_tokens.is_empty(),
        "{} reset tokens still indexed for a forgotten connection",
        pair.client.reset_tokens.len()
    );
}
