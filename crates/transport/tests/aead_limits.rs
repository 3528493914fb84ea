//! RFC 9001 §6.6, limits on AEAD usage: a connection closes with
//! AEAD_LIMIT_REACHED once more packets failed authentication than the
//! integrity limit allows (counted over all its keys, key updates
//! included), and once its sending key nears the confidentiality limit
//! without a key update. The real limits are 2^52 and 2^36 forgeries, and
//! 2^23 packets; test hooks lower them.

use std::cell::RefCell;
use std::rc::Rc;

use transport::test_pair::Pair;
use transport::ConnectionError;
use wire::time::Duration;
use wire::{Dir, TransportErrorCode};

/// True for a short-header (1-RTT) datagram.
fn is_short(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0x80 == 0)
}

/// A connected, confirmed pair whose client's 1-RTT datagrams toward the
/// server are copied into the returned list as they leave.
fn pair_capturing_client_packets() -> (Pair, Rc<RefCell<Vec<Vec<u8>>>>) {
    let captured: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let capture = captured.clone();
    let mut pair = Pair::default_pair();
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        if to_server && is_short(datagram) {
            capture.borrow_mut().push(datagram.to_vec());
        }
        false
    }));
    pair.connect();
    let confirmed = pair.drive_until(Duration::from_secs(5), |p| {
        p.client().is_handshake_confirmed()
    });
    assert!(confirmed, "the client never confirmed the handshake");
    // Some client 1-RTT packets to forge from.
    let id = pair.client().streams().open(Dir::Bi).expect("a stream");
    pair.client().streams().write(id, b"hello").expect("write");
    let sent = pair.drive_until(Duration::from_secs(1), |_| !captured.borrow().is_empty());
    assert!(sent, "the client sent no 1-RTT packet");
    pair.drive_until(Duration::from_millis(200), |_| false);
    (pair, captured)
}

/// `n` forgeries toward the server: copies of a real client packet (valid
/// header, its connection ID) whose AEAD tag is damaged.
fn inject_forgeries(pair: &mut Pair, original: &[u8], n: usize) {
    for i in 0..n {
        let mut d = original.to_vec();
        let last = d.len() - 1;
        d[last] ^= 0x55 ^ (i as u8);
        d[last - 1] ^= 0x01;
        pair.inject_to_server(d);
        pair.step();
    }
}

#[test]
fn forged_packets_below_the_integrity_limit_are_only_dropped() {
    let (mut pair, captured) = pair_capturing_client_packets();
    let original = captured.borrow().last().cloned().expect("a packet");
    let before = pair.server().authentication_failures();
    pair.server().set_integrity_limit(before + 8);
    // Exactly the limit: "exceeds" has not happened yet.
    inject_forgeries(&mut pair, &original, 8);
    assert_eq!(pair.server().authentication_failures(), before + 8);
    assert!(!pair.server().is_closed(), "closed at the limit");
    // The connection still works.
    let id = pair.client().streams().open(Dir::Uni).expect("a stream");
    pair.client()
        .streams()
        .write(id, b"still here")
        .expect("write");
    pair.client().streams().finish(id).expect("finish");
    let read = pair.drive_until(Duration::from_secs(2), |p| {
        p.server().streams().accept(Dir::Uni).is_some()
    });
    assert!(read, "the connection stopped working below the limit");
    assert!(!pair.server().is_closed());
}

#[test]
fn one_forgery_past_the_integrity_limit_closes_with_aead_limit_reached() {
    let (mut pair, captured) = pair_capturing_client_packets();
    let original = captured.borrow().last().cloned().expect("a packet");
    let before = pair.server().authentication_failures();
    pair.server().set_integrity_limit(before + 8);
    inject_forgeries(&mut pair, &original, 8);
    assert!(!pair.server().is_closed());
    inject_forgeries(&mut pair, &original, 1);
    let server = pair.server();
    assert!(server.is_closed(), "the connection must close");
    match server.close_reason() {
        Some(ConnectionError::Transport(e)) => {
            assert_eq!(e.code, TransportErrorCode::AEAD_LIMIT_REACHED);
        }
        other => panic!("closed for {other:?}"),
    }
    // The peer learns why.
    let told = pair.drive_until(Duration::from_secs(2), |p| {
        p.client_opt().is_none_or(|c| c.is_closed())
    });
    assert!(told, "the client never heard of the close");
    if let Some(c) = pair.client_opt() {
        match c.close_reason() {
            Some(ConnectionError::PeerClosed {
                code,
                application: false,
                ..
            }) => assert_eq!(*code, TransportErrorCode::AEAD_LIMIT_REACHED.0),
            other => panic!("client saw {other:?}"),
        }
    }
}

#[test]
fn failures_count_across_key_updates() {
    let (mut pair, captured) = pair_capturing_client_packets();
    let old_phase = captured.borrow().last().cloned().expect("a packet");
    let before = pair.server().authentication_failures();
    pair.server().set_integrity_limit(before + 6);
    inject_forgeries(&mut pair, &old_phase, 4);
    // A key update, followed by the server.
    pair.client().initiate_key_update().expect("key update");
    let followed = pair.drive_until(Duration::from_secs(2), |p| p.server().key_updates() == 1);
    assert!(followed, "the server did not follow the key update");
    let new_phase = captured.borrow().last().cloned().expect("a packet");
    inject_forgeries(&mut pair, &new_phase, 2);
    assert!(!pair.server().is_closed(), "6 failures, limit 6");
    inject_forgeries(&mut pair, &new_phase, 1);
    assert!(
        pair.server().is_closed(),
        "failures under both keys count together"
    );
}

/// RFC 9001 §6.6: a key that has protected as many packets as the
/// confidentiality limit allows (here lowered to 60, far below the point
/// where the connection would update by itself) is not used further: the
/// connection closes with AEAD_LIMIT_REACHED instead of sending on.
#[test]
fn a_key_at_its_confidentiality_limit_is_not_used_further() {
    let mut pair = Pair::default_pair();
    pair.connect();
    let confirmed = pair.drive_until(Duration::from_secs(5), |p| {
        p.client().is_handshake_confirmed()
    });
    assert!(confirmed);
    pair.server().set_confidentiality_limit(60);
    let id = pair.server().streams().open(Dir::Uni).expect("a stream");
    let _ = pair.server().streams().write(id, &vec![1u8; 400_000]);
    let closed = pair.drive_until(Duration::from_secs(30), |p| {
        p.server_opt().is_none_or(|c| c.is_closed())
    });
    assert!(closed, "the server kept using its worn-out key");
    let server = pair.server();
    match server.close_reason() {
        Some(ConnectionError::Transport(e)) => {
            assert_eq!(e.code, TransportErrorCode::AEAD_LIMIT_REACHED);
        }
        other => panic!("closed for {other:?}"),
    }
    // Packet numbers of the 1-RTT space, the handshake's few included.
    let sent = server.stats().packets_sent;
    assert!(sent < 100, "{sent} packets under a 60-packet limit");
    assert_eq!(server.key_updates(), 0);
}
