//! A server as several workers behind one port (`artq serve --threads`),
//! and what they share: worker-shaped connection IDs that a driver routes
//! with `datagram_owner`, static keys that make address-validation tokens
//! and stateless reset tokens the same at every worker and after a
//! restart, and stateless resets (RFC 9000 §10.3) sent by an endpoint that
//! lost a connection's state and recognised by the client, which then ends
//! at once instead of after its idle timeout.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use ring::hmac;
use transport::events::Subscriber;
use transport::test_pair::{self, content, Pair};
use transport::{
    datagram_owner, AdmissionConfig, ConnectionError, Endpoint, EndpointConfig, Event,
    PreferredAddresses, RetryMode, StaticKeys, TransportConfig,
};
use wire::cid::ConnectionId;
use wire::packet::{self, LongType, ProtectedHeader};
use wire::time::{Duration, Instant};

const KEYS: StaticKeys = StaticKeys {
    token: [0x11; 32],
    reset: [0x22; 32],
};

/// The reset token a server with [`KEYS`] gives `cid`.
fn hmac_token(cid: &[u8]) -> [u8; 16] {
    let key = hmac::Key::new(hmac::HMAC_SHA256, &KEYS.reset);
    let mut t = [0u8; 16];
    t.copy_from_slice(&hmac::sign(&key, cid).as_ref()[..16]);
    t
}

/// A server endpoint with `seed`, static keys when `keys`, worker
/// `worker` of 3 when given, and `admission`.
fn server(
    seed: u64,
    keys: Option<StaticKeys>,
    worker: Option<usize>,
    admission: AdmissionConfig,
) -> Endpoint {
    server_with(
        seed,
        keys,
        worker,
        admission,
        test_pair::server_config(TransportConfig::default()),
    )
}

fn server_with(
    seed: u64,
    keys: Option<StaticKeys>,
    worker: Option<usize>,
    admission: AdmissionConfig,
    config: transport::ServerConfig,
) -> Endpoint {
    let mut c = EndpointConfig::server(seed, config).with_admission(admission);
    if let Some(k) = keys {
        c = c.with_static_keys(k);
    }
    if let Some(w) = worker {
        c = c.with_workers(w, 3).expect("a valid worker");
    }
    Endpoint::new(c)
}

/// Drive until the client connection is lost (within `limit`); its reason
/// and when.
fn client_loss(pair: &mut Pair, limit: Duration) -> Option<(ConnectionError, Instant)> {
    let mut reason = None;
    pair.drive_until(limit, |p| {
        let now = p.now;
        while let Some(ev) = p.client_opt().and_then(|c| c.poll_event()) {
            if let Event::ConnectionLost(e) = ev {
                reason = Some((e, now));
            }
        }
        reason.is_some()
    });
    reason
}

/// The client sends something (a DATAGRAM frame): a short-header packet.
fn poke(pair: &mut Pair) {
    pair.client()
        .send_datagram(vec![7; 100])
        .expect("datagrams are negotiated");
}

/// A connection ID issued: sequence number, ID, reset token.
type IssuedCid = (u64, Vec<u8>, [u8; 16]);

/// The connection IDs (and tokens) a server connection issues.
#[derive(Clone, Default)]
struct Issued(Arc<Mutex<Vec<IssuedCid>>>);

impl Subscriber for Issued {
    fn connection_id_issued(&mut self, _now: Instant, seq: u64, cid: &[u8], token: &[u8; 16]) {
        self.0.lock().unwrap().push((seq, cid.to_vec(), *token));
    }
}

/// Step until the server accepted the client, then watch what its
/// connection issues from then on.
fn subscribe_server(pair: &mut Pair) -> Issued {
    let issued = Issued::default();
    assert!(pair.drive_until(Duration::from_secs(1), |p| p.server_opt().is_some()));
    pair.server().subscribe(Box::new(issued.clone()));
    issued
}

/// Every datagram the client sends.
type Sent = Arc<Mutex<Vec<Vec<u8>>>>;

fn record_client(pair: &mut Pair) -> Sent {
    let sent: Sent = Arc::default();
    let log = sent.clone();
    pair.drop = Some(Box::new(move |_, to_server, d, _| {
        if to_server {
            log.lock().unwrap().push(d.to_vec());
        }
        false
    }));
    sent
}

/// A server that lost the connection (a restart, or another worker, with
/// the same static keys) answers the client's next packet with a stateless
/// reset; the client recognises the token its server gave for the
/// handshake's connection ID (the stateless_reset_token transport
/// parameter) and ends within a round trip, not at the 30-s idle timeout.
#[test]
fn a_server_that_lost_state_resets_the_client_within_one_rtt() {
    let mut pair = Pair::default_pair();
    pair.server = server(7, Some(KEYS), None, AdmissionConfig::default());
    let data = content(10_000, 1);
    assert!(pair.download(&data, Duration::from_secs(10)) == data);
    // The restart: same keys, nothing else.
    pair.server = server(8, Some(KEYS), None, AdmissionConfig::default());
    let start = pair.now;
    poke(&mut pair);
    let (reason, at) = client_loss(&mut pair, Duration::from_secs(5)).expect("the client ends");
    assert_eq!(reason, ConnectionError::StatelessReset);
    assert_eq!(reason.to_string(), "stateless reset by the peer");
    // One round trip is 20 ms plus serialization.
    assert!(at - start <= Duration::from_millis(25), "{:?}", at - start);
    assert!(pair.server.stats().stateless_resets_sent >= 1);
    // Draining: the client sends nothing more, and is gone after it.
    let sent = record_client(&mut pair);
    assert!(pair.drive_until(Duration::from_secs(5), |p| p
        .client
        .poll_timeout()
        .is_none()));
    assert!(sent.lock().unwrap().is_empty());
}

/// Without static keys nobody can compute the token: no reset is sent and
/// the client does not end early.
#[test]
fn without_static_keys_no_reset_is_sent() {
    let mut pair = Pair::default_pair();
    pair.connect();
    pair.server = server(8, None, None, AdmissionConfig::default());
    poke(&mut pair);
    assert!(client_loss(&mut pair, Duration::from_secs(2)).is_none());
    let s = pair.server.stats();
    assert_eq!(s.stateless_resets_sent, 0);
    // Nor with the keys on the server only to be restarted without them.
    let mut pair = Pair::default_pair();
    pair.server = server(7, Some(KEYS), None, AdmissionConfig::default());
    pair.connect();
    pair.server = server(8, None, None, AdmissionConfig::default());
    poke(&mut pair);
    assert!(client_loss(&mut pair, Duration::from_secs(2)).is_none());
}

/// The size rules (RFC 9000 §10.3, §10.3.3): a reset is smaller than what
/// triggered it, at least 21 bytes, at most 43; a short header of 21 bytes
/// or fewer gets nothing. The token is HMAC(reset, cid) at every worker,
/// whatever its index.
#[test]
fn reset_sizes_and_tokens() {
    let remote = SocketAddr::from(([10, 0, 0, 1], 5000));
    let dcid = ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
    let short = |len: usize| {
        let mut d = Vec::new();
        packet::write_short_header(&mut d, false, false, &dcid, 0, 1);
        d.resize(len, 0x5a);
        d
    };
    for worker in [None, Some(0), Some(2)] {
        let mut ep = server(3, Some(KEYS), worker, AdmissionConfig::default());
        let mut buf = Vec::new();
        for (len, answer) in [
            (10, None),
            (21, None),
            (22, Some(21)),
            (40, Some(39)),
            (44, Some(43)),
            (1200, Some(43)),
        ] {
            let mut d = short(len);
            assert_eq!(
                ep.handle_datagram(Instant::ZERO, remote, None, &mut d),
                None
            );
            let got = ep.poll_transmit(Instant::ZERO, &mut buf).map(|t| t.size);
            assert_eq!(got, answer, "a {len}-byte trigger");
            if got.is_some() {
                assert_eq!(buf[0] & 0xc0, 0x40, "looks like a short header");
                assert_eq!(buf[buf.len() - 16..], hmac_token(&dcid));
            }
            assert!(ep.poll_transmit(Instant::ZERO, &mut buf).is_none());
        }
        assert_eq!(ep.stats().stateless_resets_sent, 4);
        // Long headers for unknown connections never get one.
        let mut long = Vec::new();
        let layout = packet::write_long_header(
            &mut long,
            LongType::Handshake,
            wire::Version::V1,
            &dcid,
            &dcid,
            &[],
            0,
            1,
        );
        long.resize(200, 0);
        packet::set_long_length(&mut long, &layout, 200);
        ep.handle_datagram(Instant::ZERO, remote, None, &mut long);
        assert!(ep.poll_transmit(Instant::ZERO, &mut buf).is_none());
    }
    // A client endpoint with static keys sends none either.
    let mut client = Endpoint::new(EndpointConfig::client(1).with_static_keys(KEYS));
    let mut d = short(200);
    client.handle_datagram(Instant::ZERO, remote, None, &mut d);
    assert!(client
        .poll_transmit(Instant::ZERO, &mut Vec::new())
        .is_none());
}

/// A Retry token from one worker admits the client at another with the
/// same keys; a NEW_TOKEN token from one server process is honoured by its
/// restart. Keys differ: refused.
#[test]
fn tokens_work_across_workers_and_restarts() {
    let always = AdmissionConfig {
        retry: RetryMode::Always,
        new_token_lifetime: Some(Duration::from_secs(3600)),
        ..AdmissionConfig::default()
    };
    // Retry at worker A, the retried Initial at worker B.
    let mut pair = Pair::default_pair();
    pair.server = server(7, Some(KEYS), Some(0), always.clone());
    assert!(
        pair.drive_until(Duration::from_secs(1), |p| p.server.stats().retries_sent
            == 1)
    );
    pair.server = server(8, Some(KEYS), Some(1), always.clone());
    pair.connect();
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_accepted), (0, 1), "{s:?}");
    assert!(pair.server().was_retried());
    // NEW_TOKEN: kept by the client, honoured by a restarted server.
    assert!(
        pair.drive_until(Duration::from_secs(2), |p| p.client.stats().stored_tokens
            == 1)
    );
    pair.server = server(9, Some(KEYS), Some(2), always.clone());
    let cfg = test_pair::client_config(TransportConfig::default());
    let h = pair
        .client
        .connect(pair.now, &cfg, pair.server_addr)
        .expect("connect");
    pair.client_conn = Some(h);
    pair.server_conn = None;
    pair.connect();
    let s = pair.server.stats();
    assert_eq!((s.retries_sent, s.tokens_accepted), (0, 1), "{s:?}");
    assert!(!pair.server().was_retried());
    // Another server's keys: the Retry token is refused.
    let mut pair = Pair::default_pair();
    pair.server = server(7, Some(KEYS), None, always.clone());
    assert!(
        pair.drive_until(Duration::from_secs(1), |p| p.server.stats().retries_sent
            == 1)
    );
    let other = StaticKeys {
        token: [0x33; 32],
        reset: KEYS.reset,
    };
    pair.server = server(8, Some(other), None, always);
    assert!(
        pair.drive_until(Duration::from_secs(1), |p| p.server.stats().tokens_rejected
            == 1)
    );
    assert_eq!(pair.server.stats().stateless_closes, 1);
}

/// Worker 1 of 3: every connection ID it issues (its first one, the
/// Retry's, the preferred address's, those of NEW_CONNECTION_ID, and the
/// ones replacing retired ones) has `cid[0] % 3 == 1`, every reset token is
/// HMAC(reset, cid), and `datagram_owner` gives 1 for every client packet
/// but Initials. Then another worker, with no state, resets the client
/// that has moved to the preferred address (its token came in the
/// preferred_address parameter).
#[test]
fn worker_shaped_ids_route_to_their_worker() {
    let preferred: SocketAddr = "127.0.0.2:4434".parse().unwrap();
    let mut config = test_pair::server_config(TransportConfig::default());
    let mut addresses = PreferredAddresses::default();
    addresses.add(preferred).unwrap();
    config.preferred_address = addresses;
    let always = AdmissionConfig {
        retry: RetryMode::Always,
        ..AdmissionConfig::default()
    };
    let mut pair = Pair::default_pair();
    pair.server = server_with(7, Some(KEYS), Some(1), always, config);
    pair.server_also_at.push(preferred);
    let sent = record_client(&mut pair);
    let issued = subscribe_server(&mut pair);
    let data = content(300_000, 2);
    assert!(pair.download(&data, Duration::from_secs(30)) == data);
    assert_eq!(pair.client().moved_to_preferred_address(), Some(preferred));

    let issued = issued.0.lock().unwrap().clone();
    let seqs: Vec<u64> = issued.iter().map(|i| i.0).collect();
    // NEW_CONNECTION_ID's (2, 3), and the one replacing the handshake's ID
    // once the client retired it (4). (The preferred address's, 1, was
    // issued with the connection, before the subscription: the client's
    // packets to it are checked below, its token by the reset at the end.)
    assert_eq!(seqs, [2, 3, 4]);
    for (seq, cid, token) in &issued {
        assert_eq!(cid[0] % 3, 1, "connection ID {seq}");
        assert_eq!(*token, hmac_token(cid), "reset token {seq}");
    }
    let sent = sent.lock().unwrap().clone();
    let (mut initials, mut others) = (0, 0);
    for d in &sent {
        let header = packet::decode_protected(d, 8).expect("the client's packets parse");
        // The client's DCIDs: its own choice in its first Initial, then
        // the Retry's, the server's first one, the preferred address's...
        let dcid = *header.dst_cid();
        match header {
            ProtectedHeader::Long {
                ty: LongType::Initial,
                ..
            } => {
                initials += 1;
                assert_eq!(datagram_owner(d, 8, 3), None);
                if initials > 1 {
                    // After the Retry: the Retry's SCID.
                    assert_eq!(dcid[0] % 3, 1);
                }
            }
            _ => {
                others += 1;
                assert_eq!(dcid[0] % 3, 1);
                assert_eq!(datagram_owner(d, 8, 3), Some(1));
                assert_eq!(datagram_owner(d, 8, 1), None);
            }
        }
    }
    assert!(initials >= 2 && others > 10, "{initials} {others}");

    // Worker 0 gets the client's next packet (nothing else would route it
    // there, but a restarted server is in the same place): a reset.
    pair.server = server(8, Some(KEYS), Some(0), AdmissionConfig::default());
    poke(&mut pair);
    let (reason, _) = client_loss(&mut pair, Duration::from_secs(1)).expect("reset");
    assert_eq!(reason, ConnectionError::StatelessReset);
}

/// A client that closed and hears a stateless reset for its close stops
/// repeating it (RFC 9000 §10.3.1: it drains), instead of answering each
/// reset with another close until its closing period ends.
#[test]
fn a_closing_client_drains_at_a_reset() {
    let mut pair = Pair::default_pair();
    pair.server = server(7, Some(KEYS), None, AdmissionConfig::default());
    pair.connect();
    // Let the handshake's last acknowledgements settle.
    let settle = pair.now + Duration::from_millis(500);
    pair.drive_until(Duration::from_secs(1), |p| p.now >= settle);
    pair.server = server(8, Some(KEYS), None, AdmissionConfig::default());
    let sent = record_client(&mut pair);
    let now = pair.now;
    pair.client().close(now, 0, b"bye");
    assert!(pair.drive_until(Duration::from_secs(5), |p| p
        .client
        .poll_timeout()
        .is_none()));
    assert_eq!(sent.lock().unwrap().len(), 1, "the close, once");
    assert_eq!(pair.server.stats().stateless_resets_sent, 1);
}
