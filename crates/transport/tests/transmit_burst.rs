//! `EndpointConfig::transmit_burst`: how many datagrams a server's
//! endpoint takes from one connection in a row.
//!
//! Why it matters: a real driver batches consecutive datagrams to one
//! destination into one GSO send; if the endpoint alternates connections
//! at every datagram, no batch forms and every datagram costs a system
//! call (measured on `artq serve` with four clients: one datagram per
//! `sendmsg`, 2.6x the CPU per MB). The default (1) keeps the simulator's
//! order, so simulated results do not move.

use std::net::SocketAddr;

use transport::test_pair::{client_config, server_config};
use transport::{Endpoint, EndpointConfig, TransportConfig};
use wire::time::{Duration, Instant};
use wire::Dir;

const SERVER: ([u8; 4], u16) = ([10, 0, 0, 1], 4433);

fn addr(port: u16) -> SocketAddr {
    SocketAddr::from(([10, 0, 0, 2], port))
}

/// Two clients connected to a server whose endpoint takes `burst`
/// datagrams per connection in a row; each server connection has 200 KB
/// to send. Returns the destinations of the server's next `n` datagrams.
fn destinations(burst: usize, n: usize) -> Vec<SocketAddr> {
    let server_addr = SocketAddr::from(SERVER);
    let mut server = Endpoint::new(
        EndpointConfig::server(1, server_config(TransportConfig::default()))
            .with_transmit_burst(burst),
    );
    let mut clients: Vec<(SocketAddr, Endpoint)> = (0..2)
        .map(|i| {
            (
                addr(5000 + i),
                Endpoint::new(EndpointConfig::client(10 + u64::from(i))),
            )
        })
        .collect();
    let config = client_config(TransportConfig::default());
    let mut now = Instant::ZERO;
    let mut handles = Vec::new();
    for (_, ep) in clients.iter_mut() {
        handles.push(ep.connect(now, &config, server_addr).expect("connect"));
    }
    let mut buf = Vec::new();
    // Shuttle datagrams until both handshakes are done.
    for _ in 0..200 {
        now += Duration::from_millis(1);
        for (a, ep) in clients.iter_mut() {
            while let Some(t) = ep.poll_transmit(now, &mut buf) {
                let mut d = buf[..t.size].to_vec();
                server.handle_datagram(now, *a, None, &mut d);
            }
        }
        while let Some(t) = server.poll_transmit(now, &mut buf) {
            let mut d = buf[..t.size].to_vec();
            if let Some((_, ep)) = clients.iter_mut().find(|(a, _)| *a == t.destination) {
                ep.handle_datagram(now, server_addr, None, &mut d);
            }
        }
        while server.accept().is_some() {}
        let done = clients
            .iter()
            .zip(&handles)
            .all(|((_, ep), &h)| ep.connection(h).is_some_and(|c| !c.is_handshaking()))
            && server.handles().len() == 2
            && server
                .handles()
                .iter()
                .all(|&h| server.connection(h).is_some_and(|c| !c.is_handshaking()));
        if done {
            break;
        }
    }
    let server_handles = server.handles();
    assert_eq!(server_handles.len(), 2, "both clients connected");
    for &h in &server_handles {
        let conn = server.connection_mut(h).expect("a connection");
        assert!(!conn.is_handshaking(), "handshake done");
        let id = conn.streams().open(Dir::Uni).expect("a stream");
        let data = vec![7u8; 200_000];
        let _ = conn.streams().write(id, &data);
    }
    let mut out = Vec::new();
    while out.len() < n {
        match server.poll_transmit(now, &mut buf) {
            Some(t) => out.push(t.destination),
            None => break,
        }
    }
    out
}

/// The lengths of the runs of equal destinations.
fn runs(dst: &[SocketAddr]) -> Vec<usize> {
    let mut runs: Vec<usize> = Vec::new();
    for (i, d) in dst.iter().enumerate() {
        if i > 0 && dst[i - 1] == *d {
            if let Some(last) = runs.last_mut() {
                *last += 1;
            }
        } else {
            runs.push(1);
        }
    }
    runs
}

#[test]
fn the_default_alternates_connections_at_every_datagram() {
    let dst = destinations(1, 12);
    assert_eq!(dst.len(), 12, "both connections had data to send");
    assert!(runs(&dst).iter().all(|&r| r == 1), "{:?}", runs(&dst));
}

#[test]
fn a_burst_takes_that_many_datagrams_from_one_connection_in_a_row() {
    let dst = destinations(4, 16);
    assert_eq!(dst.len(), 16, "both connections had data to send");
    assert_eq!(runs(&dst), vec![4, 4, 4, 4], "{dst:?}");
    // Both connections are served.
    assert_ne!(dst[0], dst[4]);
}

#[test]
fn a_burst_of_zero_means_one() {
    assert_eq!(
        EndpointConfig::client(1)
            .with_transmit_burst(0)
            .transmit_burst,
        1
    );
}
