//! Bodies of the transport fuzz targets (`fuzz/fuzz_targets/`), public so
//! the cargo-fuzz crate can call them and so plain tests run them on stable
//! (STYLE.md: s2n's `check!()` habit).

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
            })
        })
        .clone()
}

/// Arbitrary bytes as a sequence of datagrams into a server endpoint, in
/// virtual time: each datagram is a 2-byte big-endian length then that many
/// bytes; between datagrams the clock advances and timers fire. The server
/// must never panic, and every datagram it answers with must fit in a UDP
/// payload.
pub fn server_datagrams(data: &[u8]) {
    let Some(server) = server_config() else {
        return;
    };
    let mut ep = Endpoint::new(EndpointConfig::server(1, server));
    let from: SocketAddr = SocketAddr::from(([127, 0, 0, 1], 5000));
    let mut now = Instant::ZERO;
    let mut rest = data;
    let mut buf = Vec::new();
    while rest.len() >= 2 {
        let len = usize::from(u16::from_be_bytes([rest[0], rest[1]])).min(rest.len() - 2);
        let mut datagram = rest[2..2 + len].to_vec();
        rest = &rest[2 + len..];
        ep.handle_datagram(now, from, &mut datagram);
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
