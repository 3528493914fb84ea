//! 1-RTT key updates (RFC 9001 §6) through real connections: an update
//! started by either side is followed by the other, packets that fail to
//! decrypt change no key state (§6.3, §9.5), and the previous read key
//! serves reordered packets for a while and is then discarded (§6.5).

use std::cell::RefCell;
use std::rc::Rc;

use transport::connection::KeyUpdateError;
use transport::test_pair::{content, Pair};
use transport::ConnectionError;
use wire::packet::KEY_PHASE_BIT;
use wire::time::Duration;
use wire::{Dir, StreamId, TransportErrorCode};

/// One download driven step by step, so that a test can act between steps:
/// the client asks for an object on a bidirectional stream, the server
/// answers with `data` and FIN.
struct Transfer {
    id: StreamId,
    accepted: Option<StreamId>,
    sent: usize,
    received: Vec<u8>,
    finished: bool,
}

impl Transfer {
    fn start(pair: &mut Pair) -> Transfer {
        let client = pair.client();
        let id = client.streams().open(Dir::Bi).expect("a stream");
        client.streams().write(id, b"GET /\r\n").expect("request");
        client.streams().finish(id).expect("finish");
        Transfer {
            id,
            accepted: None,
            sent: 0,
            received: Vec::new(),
            finished: false,
        }
    }

    /// Let the server write what it can and the client read what arrived;
    /// true once the client has read FIN.
    fn pump(&mut self, p: &mut Pair, data: &[u8]) -> bool {
        if let Some(server) = p.server_opt() {
            if self.accepted.is_none() {
                self.accepted = server.streams().accept(Dir::Bi);
            }
            if let Some(sid) = self.accepted {
                while self.sent < data.len() {
                    match server.streams().write(sid, &data[self.sent..]) {
                        Ok(n) => self.sent += n,
                        Err(_) => break,
                    }
                }
                if self.sent == data.len() {
                    let _ = server.streams().finish(sid);
                }
            }
        }
        let mut buf = vec![0u8; 65536];
        if let Some(client) = p.client_opt() {
            while !self.finished {
                match client.streams().read(self.id, &mut buf) {
                    Ok(Some(n)) => self.received.extend_from_slice(&buf[..n]),
                    Ok(None) => self.finished = true,
                    Err(_) => break,
                }
            }
        }
        self.finished
    }
}

/// True for a short-header (1-RTT) datagram.
fn is_short(datagram: &[u8]) -> bool {
    datagram.first().is_some_and(|b| b & 0x80 == 0)
}

/// Connect and wait until the client has the server's HANDSHAKE_DONE: a
/// key update may start only then (RFC 9001 §6.1).
fn connected_and_confirmed(pair: &mut Pair) {
    pair.connect();
    let confirmed = pair.drive_until(Duration::from_secs(5), |p| {
        p.client().is_handshake_confirmed()
    });
    assert!(confirmed, "the client never confirmed the handshake");
}

/// Regression (issue 15, bug 2): the server sees corrupted copies of client
/// packets, some with the key phase bit flipped, before the client starts a
/// key update. A packet that fails to decrypt must not advance the next
/// phase's keys (RFC 9001 §6.3): the server must still follow the update,
/// and a second one, and the transfer must finish byte-exact.
#[test]
fn key_update_is_followed_after_corrupted_packets() {
    let captured: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let capture = captured.clone();
    let mut pair = Pair::default_pair();
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        if to_server && is_short(datagram) {
            let mut c = capture.borrow_mut();
            if c.len() < 64 {
                c.push(datagram.to_vec());
            }
        }
        false
    }));
    connected_and_confirmed(&mut pair);
    captured.borrow_mut().clear();
    let data = content(3_000_000, 71);
    let mut transfer = Transfer::start(&mut pair);
    let mut corrupted = 0;
    let mut first_update = false;
    let mut second_update = false;
    let done = pair.drive_until(Duration::from_secs(60), |p| {
        if corrupted < 12 {
            // A copy of the newest client packet, corrupted, arrives before
            // the original: its packet number is the largest yet seen.
            let copy = captured.borrow_mut().pop();
            if let Some(mut d) = copy {
                if corrupted % 2 == 0 {
                    // Protected header bits flip the unprotected ones: this
                    // packet claims the next key phase.
                    d[0] ^= KEY_PHASE_BIT;
                } else {
                    let last = d.len() - 1;
                    d[last] ^= 0x55;
                }
                p.inject_to_server(d);
                corrupted += 1;
            }
        } else if !first_update {
            p.client().initiate_key_update().expect("first key update");
            first_update = true;
        } else if !second_update && p.server().key_updates() == 1 {
            second_update = p.client().initiate_key_update().is_ok();
        }
        transfer.pump(p, &data)
    });
    assert_eq!(corrupted, 12, "the test must inject its corrupted packets");
    assert!(
        done,
        "transfer stalled after the key update: {} of {} bytes (server followed {} updates)",
        transfer.received.len(),
        data.len(),
        pair.server().key_updates()
    );
    assert!(transfer.received == data, "corrupted transfer");
    assert!(second_update, "the second key update never became possible");
    assert_eq!(pair.client().key_updates(), 2);
    assert_eq!(pair.server().key_updates(), 2, "the server did not follow");
}

/// Key updates started by either side, several times during one transfer,
/// are followed by the peer (RFC 9001 §6.2), and a new update waits until a
/// packet of the current phase is acknowledged (§6.1). The client also
/// writes a little on a second stream now and then, as an application
/// would: an endpoint that sends only ACKs never has a packet acknowledged,
/// so it could follow updates but not start one.
#[test]
fn repeated_key_updates_from_both_sides_keep_the_transfer_byte_exact() {
    let mut pair = Pair::default_pair().with_random_loss(0.02);
    connected_and_confirmed(&mut pair);
    let data = content(4_000_000, 72);
    let mut transfer = Transfer::start(&mut pair);
    let upload = pair.client().streams().open(Dir::Bi).expect("a stream");
    let mut next_tick = pair.now;
    let mut updates = 0u64;
    let mut refused = 0u64;
    let mut next_try = pair.now + Duration::from_millis(30);
    let done = pair.drive_until(Duration::from_secs(120), |p| {
        if p.now >= next_tick {
            let _ = p.client().streams().write(upload, b"tick");
            next_tick = p.now + Duration::from_millis(10);
        }
        if updates < 6 && p.now >= next_try {
            let side = if updates % 2 == 0 {
                p.client()
            } else {
                p.server()
            };
            match side.initiate_key_update() {
                Ok(()) => {
                    updates += 1;
                    // At once again: refused until the peer acknowledges
                    // a packet of the new phase.
                    assert_eq!(side.initiate_key_update(), Err(KeyUpdateError::Pending));
                    refused += 1;
                    next_try = p.now + Duration::from_millis(40);
                }
                Err(KeyUpdateError::Pending) => {}
                Err(e) => panic!("key update refused: {e}"),
            }
        }
        transfer.pump(p, &data) && updates == 6
    });
    assert!(
        done,
        "transfer or updates unfinished: {} of {} bytes, {updates} updates",
        transfer.received.len(),
        data.len()
    );
    assert!(transfer.received == data, "corrupted transfer");
    assert_eq!(refused, 6);
    let followed = pair.drive_until(Duration::from_secs(5), |p| {
        p.client().key_updates() == 6 && p.server().key_updates() == 6
    });
    assert!(followed, "an update was not followed");
}

/// RFC 9001 §6.5: after a key update, a packet of the previous phase that
/// was delayed is still read with the previous key; three PTOs after the
/// first packet of the new phase arrived, that key is gone and such a
/// packet is dropped. The connection is otherwise idle, so that each
/// injected packet is the only thing the server handles in its step.
#[test]
fn previous_read_key_serves_late_packets_then_is_discarded() {
    let withheld: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
    let withhold = withheld.clone();
    let want = Rc::new(RefCell::new(0usize));
    let wanted = want.clone();
    let mut pair = Pair::default_pair();
    pair.drop = Some(Box::new(move |_, to_server, datagram, _| {
        let mut w = wanted.borrow_mut();
        if to_server && is_short(datagram) && *w > 0 {
            *w -= 1;
            withhold.borrow_mut().push(datagram.to_vec());
            return true;
        }
        false
    }));
    connected_and_confirmed(&mut pair);
    pair.drive_until(Duration::from_millis(200), |_| false);
    // Two client packets of key phase 0 are held back by the network.
    *want.borrow_mut() = 2;
    let id = pair.client().streams().open(Dir::Bi).expect("a stream");
    pair.client().streams().write(id, b"a").expect("write");
    let held = pair.drive_until(Duration::from_secs(1), |_| withheld.borrow().len() == 2);
    assert!(held, "no client packets to hold back");
    pair.client().initiate_key_update().expect("key update");
    // The client's retransmissions of the held-back data go out in the new
    // phase; the server follows, and the connection goes quiet.
    let followed = pair.drive_until(Duration::from_secs(2), |p| p.server().key_updates() == 1);
    assert!(followed, "the server did not follow the key update");
    pair.drive_until(Duration::from_millis(100), |_| false);

    let inject_one = |pair: &mut Pair, datagram: Vec<u8>| {
        let before = (pair.server().stats(), pair.delivered[1]);
        pair.inject_to_server(datagram);
        pair.step();
        let after = (pair.server().stats(), pair.delivered[1]);
        assert_eq!(after.1, before.1 + 1, "the connection must be idle");
        (before.0, after.0)
    };
    // Soon after (well within three PTOs): the old key still opens it.
    let first = withheld.borrow_mut().remove(0);
    let (before, after) = inject_one(&mut pair, first);
    assert_eq!(
        after.packets_received,
        before.packets_received + 1,
        "a delayed packet of the previous phase must still be read"
    );
    // Seconds later, far past three PTOs: the old key is gone.
    pair.drive_until(Duration::from_secs(3), |_| false);
    let second = withheld.borrow_mut().remove(0);
    let (before, after) = inject_one(&mut pair, second);
    assert_eq!(
        after.packets_received, before.packets_received,
        "the previous phase's key must be discarded after three PTOs"
    );
    assert_eq!(after.packets_dropped, before.packets_dropped + 1);
    assert!(!pair.server().is_closed());
}

/// RFC 9001 §6.6: an endpoint updates its keys by itself before a key has
/// protected as many packets as the AEAD's confidentiality limit allows.
/// The limit is millions of packets; a test hook lowers the point at which
/// the server updates to 200 packets.
#[test]
fn keys_are_updated_before_the_confidentiality_limit() {
    let mut pair = Pair::default_pair().with_random_loss(0.01);
    connected_and_confirmed(&mut pair);
    pair.server().set_key_update_interval(200);
    let data = content(3_000_000, 74);
    let mut transfer = Transfer::start(&mut pair);
    let done = pair.drive_until(Duration::from_secs(60), |p| transfer.pump(p, &data));
    assert!(done && transfer.received == data, "corrupted transfer");
    let sent = pair.server().stats().packets_sent;
    let updates = pair.server().key_updates();
    // One update every 200 packets at most, and not many fewer: each
    // waits only for the acknowledgement of the previous phase.
    assert!(
        updates <= sent / 200 && updates + 4 >= sent / 200,
        "{updates} key updates for {sent} packets"
    );
    assert_eq!(
        pair.client().key_updates(),
        updates,
        "the client must follow"
    );
}

/// Hand what the client has to send now straight to the server, without
/// letting the server send anything (no acknowledgement goes back).
fn client_to_server_now(pair: &mut Pair) -> usize {
    let now = pair.now;
    let mut buf = Vec::new();
    let mut n = 0;
    while let Some(t) = pair.client.poll_transmit(now, &mut buf) {
        let mut d = buf[..t.size].to_vec();
        pair.server
            .handle_datagram(now, pair.client_addr, None, &mut d);
        n += 1;
    }
    n
}

/// RFC 9001 §6.2: "If an endpoint detects a second update before it has
/// sent any packets with updated keys containing an acknowledgment for the
/// packet that initiated the key update, it indicates that its peer has
/// updated keys twice without awaiting confirmation. An endpoint MAY treat
/// such consecutive key updates as a connection error of type
/// KEY_UPDATE_ERROR." A client that flips its key phase twice in a row
/// (a test hook skips its own §6.1 check) meets that error.
#[test]
fn two_key_updates_in_a_row_without_an_acknowledgement_are_a_key_update_error() {
    let mut pair = Pair::default_pair();
    connected_and_confirmed(&mut pair);
    pair.drive_until(Duration::from_millis(200), |_| false);
    pair.client().force_key_update();
    assert!(client_to_server_now(&mut pair) > 0);
    assert_eq!(pair.server().key_updates(), 1, "the server followed");
    assert!(!pair.server().is_closed());
    // Again, before the server sent anything under the new keys.
    pair.client().force_key_update();
    assert!(client_to_server_now(&mut pair) > 0);
    let server = pair.server();
    match server.close_reason() {
        Some(ConnectionError::Transport(e)) => {
            assert_eq!(e.code, TransportErrorCode::KEY_UPDATE_ERROR);
        }
        other => panic!("expected KEY_UPDATE_ERROR, closed for {other:?}"),
    }
    assert_eq!(server.key_updates(), 1, "the second update is not followed");
}

/// The legitimate sequence next to the one above: flip, the server
/// acknowledges under the new keys, flip again. Both are followed, and the
/// connection stays open.
#[test]
fn a_key_update_after_the_acknowledgement_of_the_previous_one_is_followed() {
    let mut pair = Pair::default_pair();
    connected_and_confirmed(&mut pair);
    pair.drive_until(Duration::from_millis(200), |_| false);
    pair.client()
        .initiate_key_update()
        .expect("first key update");
    let followed = pair.drive_until(Duration::from_secs(2), |p| p.server().key_updates() == 1);
    assert!(followed, "the server did not follow the first update");
    // The client may update again once the server acknowledged a packet of
    // the new phase; that acknowledgement left under the new keys.
    let again = pair.drive_until(Duration::from_secs(2), |p| {
        p.client().initiate_key_update().is_ok()
    });
    assert!(again, "the second update never became possible");
    let followed = pair.drive_until(Duration::from_secs(2), |p| p.server().key_updates() == 2);
    assert!(followed, "the server did not follow the second update");
    pair.drive_until(Duration::from_millis(500), |_| false);
    assert!(
        !pair.server().is_closed(),
        "{:?}",
        pair.server().close_reason()
    );
    assert!(
        !pair.client().is_closed(),
        "{:?}",
        pair.client().close_reason()
    );
}
