//! Bodies of the transport fuzz targets (`fuzz/fuzz_targets/`), public so
//! the cargo-fuzz crate can call them and so plain tests run them on stable
//! (STYLE.md: s2n's `check!()` habit).
//!
//! - [`server_datagrams`]: raw datagrams into a server endpoint (what an
//!   attacker without keys can send);
//! - `server_frames` and `client_datagrams` (with the `test-hooks`
//!   feature, which the fuzz crate enables): past a real handshake, so that
//!   arbitrary frames arrive inside correctly protected packets and reach
//!   the frame handlers, streams, flow control, loss recovery and key
//!   updates; and, for the client, arbitrary answers to its first Initial.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use wire::time::{Duration, Instant};

use crate::config::{EndpointConfig, ServerConfig, TransportConfig};
use crate::crypto;
use crate::endpoint::Endpoint;

fn server_config() -> Option<ServerConfig> {
    static CONFIG: OnceLock<Option<ServerConfig>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let (chain, key) = crypto::self_signed_from_seed(&["localhost"], [7; 32]).ok()?;
            let tls = crypto::server_config(chain, key, &[crypto::TEST_ALPN]).ok()?;
            Some(ServerConfig {
                tls,
                transport: Arc::new(TransportConfig::default()),
                preferred_address: Default::default(),
            })
        })
        .clone()
}

/// Arbitrary bytes as a sequence of datagrams into a server endpoint, in
/// virtual time: each datagram is a 2-byte big-endian length then that many
/// bytes; between datagrams the clock advances and timers fire. The server
/// must never panic, and every datagram it answers with must fit in a UDP
/// payload. The same datagrams then go to a server with static keys run as
/// worker 1 of 3 (stateless resets, worker-shaped IDs), and to
/// [`crate::datagram_owner`].
pub fn server_datagrams(data: &[u8]) {
    let Some(server) = server_config() else {
        return;
    };
    server_datagrams_into(data, EndpointConfig::server(1, server.clone()));
    let keys = crate::StaticKeys::from_secret(b"fuzzing static keys");
    if let Ok(config) = EndpointConfig::server(1, server)
        .with_static_keys(keys)
        .with_workers(1, 3)
    {
        server_datagrams_into(data, config);
    }
}

fn server_datagrams_into(data: &[u8], config: EndpointConfig) {
    let mut ep = Endpoint::new(config);
    let from: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 5000));
    let mut now = Instant::ZERO;
    let mut rest = data;
    let mut buf = Vec::new();
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let mut datagram = rest[2..2 + len].to_vec();
        rest = &rest[2 + len..];
        if let Some(owner) = crate::datagram_owner(&datagram, 8, 3) {
            assert!(owner < 3);
        }
        ep.handle_datagram(now, from, None, &mut datagram);
        for _ in 0..64 {
            match ep.poll_transmit(now, &mut buf) {
                Some(t) => assert!(t.size <= 65527 && t.size == buf.len()),
                None => break,
            }
        }
        now += Duration::from_millis(5);
        ep.handle_timeout(now);
    }
}

/// One step of a post-handshake fuzz input: an operation byte, a 2-byte
/// big-endian length, then that many bytes (cut short at the input's end).
/// At most [`MAX_RECORDS`] are read, so that an input's cost is bounded.
#[cfg(feature = "test-hooks")]
struct Records<'a> {
    rest: &'a [u8],
    read: usize,
}

/// Most records one input runs.
#[cfg(feature = "test-hooks")]
const MAX_RECORDS: usize = 48;

/// Bytes of raw frames put in one packet: what fits a 1200-byte datagram
/// with a short header, the AEAD tag and room for an ACK frame.
#[cfg(feature = "test-hooks")]
const MAX_FRAMES_PER_PACKET: usize = 1000;

#[cfg(feature = "test-hooks")]
impl<'a> Iterator for Records<'a> {
    type Item = (u8, &'a [u8]);

    fn next(&mut self) -> Option<(u8, &'a [u8])> {
        if self.read >= MAX_RECORDS {
            return None;
        }
        let (&op, rest) = self.rest.split_first()?;
        let (len, rest) = match rest {
            [hi, lo, rest @ ..] => (usize::from(u16::from_be_bytes([*hi, *lo])), rest),
            _ => (0, &[][..]),
        };
        let (bytes, rest) = rest.split_at(len.min(rest.len()));
        self.rest = rest;
        self.read += 1;
        Some((op, bytes))
    }
}

/// The transport error code a connection closed with, if it closed itself
/// on a protocol error. Panics on a code that no peer input may cause: one
/// outside RFC 9000 §20.1 and the TLS alert range (RFC 9001 §4.8), or
/// INTERNAL_ERROR, which would be a bug of ours.
#[cfg(feature = "test-hooks")]
fn checked_close_code(conn: Option<&crate::Connection>) -> Option<u64> {
    let Some(crate::ConnectionError::Transport(e)) = conn?.close_reason() else {
        return None;
    };
    let code = e.code.0;
    let defined = code <= 0x10 || (0x0100..=0x01ff).contains(&code);
    assert!(
        defined,
        "closed with an undefined transport error code {code:#x}"
    );
    assert_ne!(
        code,
        wire::TransportErrorCode::INTERNAL_ERROR.0,
        "closed with INTERNAL_ERROR: {}",
        e.reason
    );
    Some(code)
}

/// What a post-handshake fuzz input led to, for the tests that run the
/// bodies over their seeds.
#[cfg(feature = "test-hooks")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FuzzOutcome {
    /// The handshake completed (it always should: it runs before any input).
    pub connected: bool,
    /// The transport error code the fuzzed endpoint closed with, if any.
    pub close_code: Option<u64>,
    /// Key updates the fuzzed endpoint went through (started or followed).
    pub key_updates: u64,
}

/// A client and a server, everything seeded, connected in memory.
#[cfg(feature = "test-hooks")]
fn connected_pair() -> (crate::test_pair::Pair, bool) {
    let mut pair =
        crate::test_pair::Pair::seeded(TransportConfig::default(), TransportConfig::default(), 1);
    let connected = pair.try_connect_within(Duration::from_secs(5));
    (pair, connected)
}

/// Both applications: the server accepts every stream the client opened and
/// answers on it; the client opens a stream and writes `bytes`; both read
/// what arrived. The first byte's bits 0 and 1 also ask the client and the
/// server to start a key update (refused unless allowed at that moment).
#[cfg(feature = "test-hooks")]
fn app_activity(pair: &mut crate::test_pair::Pair, bytes: &[u8]) {
    use wire::Dir;
    let mut buf = [0u8; 4096];
    let key_updates = bytes.first().copied().unwrap_or(0);
    if key_updates & 1 == 1 {
        if let Some(c) = pair.client_opt() {
            let _ = c.initiate_key_update();
        }
    }
    if key_updates & 2 == 2 {
        if let Some(s) = pair.server_opt() {
            let _ = s.initiate_key_update();
        }
    }
    if let Some(server) = pair.server_opt() {
        for dir in [Dir::Bi, Dir::Uni] {
            while let Some(id) = server.streams().accept(dir) {
                while let Ok(Some(_)) = server.streams().read(id, &mut buf) {}
                if dir == Dir::Bi {
                    let _ = server.streams().write(id, bytes);
                    let _ = server.streams().finish(id);
                }
            }
        }
        while server.recv_datagram().is_some() {}
    }
    if let Some(client) = pair.client_opt() {
        if let Some(id) = client.streams().open(Dir::Bi) {
            let _ = client.streams().write(id, bytes);
            let _ = client.streams().finish(id);
        }
        for dir in [Dir::Bi, Dir::Uni] {
            while let Some(id) = client.streams().accept(dir) {
                while let Ok(Some(_)) = client.streams().read(id, &mut buf) {}
            }
        }
        while client.recv_datagram().is_some() {}
    }
}

/// `server_frames`: a server endpoint past a real handshake (seeded client
/// and server in memory), then fed arbitrary frames inside correctly
/// protected 1-RTT packets from the client.
///
/// The input is a list of records ([`Records`]: op, 2-byte length, bytes):
/// op 0 (mod 4): the bytes as the frames of the client's next 1-RTT packet
/// (at most 1000 bytes per packet, the rest in the packets after); 1: the
/// bytes as a raw datagram to the server; 2: advance the clock by
/// `4 * bytes[0]` ms, timers firing; 3: application activity (the client
/// opens a stream and writes the bytes, the server answers every stream;
/// `bytes[0]` bits 0 and 1 start key updates at the client and the server).
/// Between records the pair runs 20 ms of virtual time.
///
/// Checks: nothing panics; a server that closes does so with a defined
/// transport error code and never INTERNAL_ERROR.
#[cfg(feature = "test-hooks")]
pub fn server_frames(data: &[u8]) -> FuzzOutcome {
    let (mut pair, connected) = connected_pair();
    if connected {
        run_records(&mut pair, data, Toward::Server);
    }
    let server = pair.server_opt().map(|c| &*c);
    FuzzOutcome {
        connected,
        close_code: checked_close_code(server),
        key_updates: server.map_or(0, |c| c.key_updates()),
    }
}

/// Which endpoint of a connected pair the fuzz input is aimed at.
#[cfg(feature = "test-hooks")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Toward {
    Server,
    Client,
}

/// The records of a post-handshake input, aimed at one endpoint: op (mod
/// 4) 0: frames in the other endpoint's next 1-RTT packet(s); 1: a raw
/// datagram to the target; 2: the clock advances `4 * bytes[0]` ms; 3:
/// application activity. 20 ms of virtual time pass after each record,
/// 500 ms after the last.
#[cfg(feature = "test-hooks")]
fn run_records(pair: &mut crate::test_pair::Pair, data: &[u8], toward: Toward) {
    for (op, bytes) in (Records {
        rest: data,
        read: 0,
    }) {
        match op % 4 {
            0 => {
                for frames in bytes.chunks(MAX_FRAMES_PER_PACKET) {
                    let sender = match toward {
                        Toward::Server => pair.client_opt(),
                        Toward::Client => pair.server_opt(),
                    };
                    if let Some(c) = sender {
                        c.inject_raw_frames(frames.to_vec());
                    }
                    pair.step();
                }
            }
            1 => match toward {
                Toward::Server => pair.inject_to_server(bytes.to_vec()),
                Toward::Client => {
                    let (now, from) = (pair.now, pair.server_addr);
                    pair.client
                        .handle_datagram(now, from, None, &mut bytes.to_vec());
                }
            },
            2 => {
                let ms = u64::from(bytes.first().copied().unwrap_or(0)) * 4;
                pair.drive_until(Duration::from_millis(ms), |_| false);
            }
            _ => app_activity(pair, bytes),
        }
        pair.drive_until(Duration::from_millis(20), |_| false);
    }
    pair.drive_until(Duration::from_millis(500), |_| false);
}

/// `client_datagrams`: a client endpoint fed arbitrary input, in one of two
/// modes chosen by the first byte's low bit.
///
/// - Handshake (0): a client that has sent its first Initial and gets
///   answers in place of a server: the records ([`Records`]) are, by op
///   (mod 3), 0: frames in a server Initial packet protected with the
///   Initial keys of the client's connection ID (so they reach the frame
///   and TLS parsers: ACK, CRYPTO with a ServerHello, CONNECTION_CLOSE,
///   forbidden frame types); 1: a raw datagram; 2: the clock advances by
///   `4 * bytes[0]` ms.
/// - Connected (1): a client past a real handshake with a seeded server;
///   op (mod 4) 0: frames in the server's next 1-RTT packet; 1: a raw
///   datagram to the client; 2: the clock advances; 3: application
///   activity on both sides.
///
/// Checks: nothing panics; every datagram the client sends fits in a UDP
/// payload; a client that closes does so with a defined transport error
/// code, never INTERNAL_ERROR.
#[cfg(feature = "test-hooks")]
pub fn client_datagrams(data: &[u8]) -> FuzzOutcome {
    let Some((&mode, rest)) = data.split_first() else {
        return FuzzOutcome::default();
    };
    if mode & 1 == 0 {
        client_handshake(rest)
    } else {
        client_connected(rest)
    }
}

#[cfg(feature = "test-hooks")]
fn client_connected(data: &[u8]) -> FuzzOutcome {
    let (mut pair, connected) = connected_pair();
    if connected {
        run_records(&mut pair, data, Toward::Client);
    }
    let client = pair.client_opt().map(|c| &*c);
    FuzzOutcome {
        connected,
        close_code: checked_close_code(client),
        key_updates: client.map_or(0, |c| c.key_updates()),
    }
}

#[cfg(feature = "test-hooks")]
fn client_handshake(data: &[u8]) -> FuzzOutcome {
    use wire::cid::ConnectionId;
    use wire::packet::{self, LongType, ProtectedHeader};

    let server: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 4433));
    let config = crate::test_pair::client_config(TransportConfig::default());
    let mut ep = Endpoint::new(EndpointConfig::client(1));
    let mut now = Instant::ZERO;
    let Ok(handle) = ep.connect(now, &config, server) else {
        return FuzzOutcome::default();
    };
    let mut buf = Vec::new();
    // The client's first Initial: its connection IDs give the keys and the
    // addresses of the answers.
    let Some(first) = ep.poll_transmit(now, &mut buf) else {
        return FuzzOutcome::default();
    };
    let (original_dcid, client_scid) = match packet::decode_protected(&buf[..first.size], 8) {
        Ok(ProtectedHeader::Long {
            dst_cid, src_cid, ..
        }) => (dst_cid, src_cid),
        _ => panic!("the client's first datagram is not a long-header packet"),
    };
    let keys = crypto::initial_keys(&original_dcid, wire::Side::Server, wire::Version::V1);
    let server_cid = ConnectionId::new(&[0x5e; 8]).unwrap_or_default();
    let mut pn = 0u64;
    for (op, bytes) in (Records {
        rest: data,
        read: 0,
    }) {
        match op % 3 {
            0 => {
                let mut d = Vec::with_capacity(bytes.len() + 64);
                let layout = packet::write_long_header(
                    &mut d,
                    LongType::Initial,
                    wire::Version::V1,
                    &client_scid,
                    &server_cid,
                    &[],
                    pn,
                    4,
                );
                d.extend_from_slice(&bytes[..bytes.len().min(MAX_FRAMES_PER_PACKET)]);
                // Room for the header protection sample (RFC 9001 §5.4.2):
                // PADDING frames.
                let min_end = layout.pn_offset + 4 + crypto::SAMPLE_LEN;
                if d.len() + crypto::TAG_LEN < min_end {
                    d.resize(min_end - crypto::TAG_LEN, 0);
                }
                d.resize(d.len() + crypto::TAG_LEN, 0);
                let end = d.len();
                packet::set_long_length(&mut d, &layout, end);
                if crypto::seal(&keys.local, &mut d, layout.pn_offset, 4, pn).is_ok() {
                    ep.handle_datagram(now, server, None, &mut d);
                }
                pn += 1;
            }
            1 => {
                ep.handle_datagram(now, server, None, &mut bytes.to_vec());
            }
            _ => {
                now += Duration::from_millis(u64::from(bytes.first().copied().unwrap_or(0)) * 4);
                ep.handle_timeout(now);
            }
        }
        for _ in 0..64 {
            match ep.poll_transmit(now, &mut buf) {
                Some(t) => assert!(t.size <= 65527 && t.size == buf.len()),
                None => break,
            }
        }
    }
    FuzzOutcome {
        connected: false,
        close_code: checked_close_code(ep.connection(handle)),
        key_updates: 0,
    }
}
