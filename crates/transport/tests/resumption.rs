//! Session resumption and 0-RTT (RFC 9001 §4.6, RFC 9000 §7.4.1) between
//! two endpoints of the stack: tickets issued and used, early stream data
//! read by the server before the handshake completes, a ticket the server
//! never issued (0-RTT rejected, its data sent again in 1-RTT), a replayed
//! first flight (single-use tickets: nothing delivered twice), and 0-RTT
//! packets nobody can read.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use transport::streams::{ReadError, WriteError};
use transport::test_pair::{
    content, resumable_client_config, resumable_server_config, server_config, Pair,
};
use transport::{ClientConfig, TransportConfig, ZeroRttStatus};
use wire::time::Duration;
use wire::{Dir, StreamId};

const LIMIT: Duration = Duration::from_secs(20);

/// The length of the connection IDs the endpoints issue (the default
/// `EndpointConfig::local_cid_len`).
const CID_LEN: usize = 8;

/// The client sends `GET /` on a new stream (now: in 0-RTT when it can),
/// the server answers `data`; returns what the client received, and
/// whether the server read the request before its handshake completed.
fn fetch(p: &mut Pair, data: &[u8]) -> (Vec<u8>, bool) {
    let client = p.client();
    let id = client.streams().open(Dir::Bi).expect("a stream");
    assert_eq!(client.streams().write(id, b"GET /\r\n"), Ok(7));
    client.streams().finish(id).expect("finish");
    let mut early = false;
    let mut accepted: Option<StreamId> = None;
    let mut sent = 0;
    let mut received = Vec::new();
    let mut buf = vec![0u8; 65536];
    let done = p.drive_until(LIMIT, |p| {
        if let Some(server) = p.server_opt() {
            if accepted.is_none() {
                accepted = server.streams().accept(Dir::Bi);
                early |= accepted.is_some() && server.is_handshaking();
            }
            if let Some(sid) = accepted {
                while sent < data.len() {
                    match server.streams().write(sid, &data[sent..]) {
                        Ok(n) => sent += n,
                        Err(WriteError::Blocked) => break,
                        Err(e) => panic!("server write: {e:?}"),
                    }
                }
                if sent == data.len() {
                    let _ = server.streams().finish(sid);
                }
            }
        }
        loop {
            match p.client().streams().read(id, &mut buf) {
                Ok(Some(n)) => received.extend_from_slice(&buf[..n]),
                Ok(None) => return true,
                Err(ReadError::Blocked) => return false,
                Err(e) => panic!("client read: {e:?}"),
            }
        }
    });
    assert!(done, "download unfinished: {} bytes", received.len());
    (received, early)
}

/// Run long enough after a transfer for the server's NewSessionTicket to
/// reach the client.
fn settle(p: &mut Pair) {
    let end = p.now + Duration::from_millis(200);
    p.drive_until(Duration::from_millis(200), |p| p.now >= end);
}

/// A client configuration holding a ticket from a resumable server, and
/// the pair whose first connection issued it.
fn holding_a_ticket() -> (ClientConfig, Pair) {
    let client_cfg = resumable_client_config(TransportConfig::default());
    let mut p = Pair::with_configs(
        resumable_server_config(TransportConfig::default()),
        &client_cfg,
    );
    p.connect();
    settle(&mut p);
    (client_cfg, p)
}

#[test]
fn second_connection_resumes_and_its_request_travels_in_zero_rtt() {
    let client_cfg = resumable_client_config(TransportConfig::default());
    let mut p = Pair::with_configs(
        resumable_server_config(TransportConfig::default()),
        &client_cfg,
    );
    let data = content(300_000, 1);
    p.connect();
    assert!(!p.client().is_resumed());
    assert_eq!(p.client().zero_rtt_status(), ZeroRttStatus::NotAttempted);
    let (got, early) = fetch(&mut p, &data);
    assert!(got == data && !early);
    settle(&mut p);

    p.reconnect(&client_cfg);
    assert_eq!(p.client().zero_rtt_status(), ZeroRttStatus::Sending);
    assert!(p.client().is_sending_zero_rtt());
    let (got, early) = fetch(&mut p, &data);
    assert!(got == data, "byte-exact after 0-RTT");
    assert!(
        early,
        "the server read the 0-RTT request before the handshake completed"
    );
    assert!(p.client().is_resumed() && p.server().is_resumed());
    assert_eq!(p.client().zero_rtt_status(), ZeroRttStatus::Accepted);
    assert_eq!(p.server().zero_rtt_status(), ZeroRttStatus::Accepted);
    let (sent, read) = (
        p.client().stats().zero_rtt_packets_sent,
        p.server().stats().zero_rtt_packets_received,
    );
    assert!(
        sent >= 1 && read == sent,
        "0-RTT packets: {sent} sent, {read} read"
    );

    // The resumed connection got a ticket too: a third one resumes again.
    settle(&mut p);
    p.reconnect(&client_cfg);
    let (got, early) = fetch(&mut p, &data[..1000]);
    assert!(got == data[..1000] && early);
}

#[test]
fn a_ticket_the_server_never_issued_means_a_full_handshake_and_data_resent() {
    let (client_cfg, _first) = holding_a_ticket();
    // Another server (its own ticket store and certificate) for the same
    // name: to it, the client's ticket is forged.
    let mut b = Pair::with_configs(
        resumable_server_config(TransportConfig::default()),
        &client_cfg,
    );
    assert_eq!(b.client().zero_rtt_status(), ZeroRttStatus::Sending);
    let data = content(50_000, 2);
    let (got, early) = fetch(&mut b, &data);
    assert!(
        got == data,
        "the rejected 0-RTT request was sent again in 1-RTT"
    );
    assert!(!early);
    assert_eq!(b.client().zero_rtt_status(), ZeroRttStatus::Rejected);
    assert_eq!(b.server().zero_rtt_status(), ZeroRttStatus::NotAttempted);
    assert!(!b.server().is_resumed());
    assert!(b.client().stats().zero_rtt_packets_sent >= 1);
    assert_eq!(b.server().stats().zero_rtt_packets_received, 0);
}

#[test]
fn a_server_without_resumption_rejects_zero_rtt_cleanly() {
    let (client_cfg, _first) = holding_a_ticket();
    let mut b = Pair::with_configs(server_config(TransportConfig::default()), &client_cfg);
    let data = content(20_000, 3);
    let (got, _) = fetch(&mut b, &data);
    assert!(got == data);
    assert_eq!(b.client().zero_rtt_status(), ZeroRttStatus::Rejected);
}

#[test]
fn a_replayed_first_flight_delivers_nothing_twice() {
    let (client_cfg, mut p) = holding_a_ticket();
    // Record what the client sends toward the server from now on.
    let captured: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let sink = Rc::clone(&captured);
    p.drop = Some(Box::new(move |_, to_server, data, _| {
        if to_server {
            sink.borrow_mut().push(data.to_vec());
        }
        false
    }));
    p.reconnect(&client_cfg);
    let data = content(10_000, 4);
    let (got, early) = fetch(&mut p, &data);
    assert!(got == data && early);
    p.drop = None;
    // An attacker replays the first datagrams (ClientHello with the ticket,
    // and the 0-RTT request) from another address.
    let attacker: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 6666));
    let flight: Vec<Vec<u8>> = captured.borrow().iter().take(3).cloned().collect();
    assert!(!flight.is_empty());
    let mut replayed = None;
    for mut d in flight {
        if let Some(h) = p.server.handle_datagram(p.now, attacker, None, &mut d) {
            replayed.get_or_insert(h);
        }
    }
    let h = replayed.expect("the replayed Initial opens a connection");
    let conn = p.server.connection_mut(h).expect("replayed connection");
    // The ticket was single-use: no resumption, no early data, no request.
    assert!(!conn.is_resumed());
    assert_eq!(conn.zero_rtt_status(), ZeroRttStatus::NotAttempted);
    assert_eq!(conn.streams().accept(Dir::Bi), None);
}

#[test]
fn zero_rtt_packets_without_a_ticket_are_dropped() {
    // A client without resumption; garbage 0-RTT packets (long header type
    // 1, the connection's own IDs) reach the server: dropped, no panic, the
    // download unaffected.
    let mut p = Pair::default_pair();
    let data = content(30_000, 5);
    // The server's connection ID, from the client's first 1-RTT packet.
    let dcid: Rc<RefCell<Option<Vec<u8>>>> = Rc::default();
    let sink = Rc::clone(&dcid);
    p.drop = Some(Box::new(move |_, to_server, data, _| {
        if to_server && data[0] & 0x80 == 0 && sink.borrow().is_none() {
            *sink.borrow_mut() = Some(data[1..1 + CID_LEN].to_vec());
        }
        false
    }));
    p.connect();
    let (got, _) = fetch(&mut p, &data[..100]);
    assert!(got == data[..100]);
    p.drop = None;
    let dcid = dcid.borrow().clone().expect("a 1-RTT packet");
    let before = p.server().stats().packets_dropped;
    for len in [30usize, 200, 1200] {
        let mut d = Vec::new();
        d.push(0xd0); // long header, fixed bit, type 0-RTT, pn length 1
        d.extend_from_slice(&1u32.to_be_bytes());
        d.push(dcid.len() as u8);
        d.extend_from_slice(&dcid);
        d.push(0);
        // Length (a 2-byte varint): the rest of the datagram.
        let rest = (len - d.len() - 2) as u16;
        d.extend_from_slice(&(0x4000 | rest).to_be_bytes());
        d.resize(len, 0xab);
        p.inject_to_server(d);
    }
    let (got, _) = fetch(&mut p, &data);
    assert!(got == data);
    let after = p.server().stats().packets_dropped;
    assert!(after >= before + 3, "{before} -> {after} dcid {dcid:?}");
    assert_eq!(p.server().zero_rtt_status(), ZeroRttStatus::NotAttempted);
}
