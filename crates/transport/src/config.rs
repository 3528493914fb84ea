//! Connection and endpoint configuration.

use std::sync::Arc;

use wire::time::Duration;

use crate::congestion::CongestionAlgorithm;
use crate::policy::{PolicyFactory, QuicPolicy};
use crate::streams::StreamsConfig;

/// Per-connection transport settings (both roles).
#[derive(Clone, Debug)]
pub struct TransportConfig {
    /// Stream and flow-control limits we advertise, and send buffering.
    pub streams: StreamsConfig,
    /// Congestion controller.
    pub congestion: CongestionAlgorithm,
    /// The loss recovery policy (default: plain QUIC).
    pub policy: Arc<dyn PolicyFactory>,
    /// RTT assumed before the first sample (RFC 9002 §6.2.2: 333 ms).
    pub initial_rtt: Duration,
    /// Our idle timeout (RFC 9000 §10.1); the effective one is the smaller of
    /// ours and the peer's.
    pub max_idle_timeout: Duration,
    /// How long we may delay an ACK (RFC 9000 §13.2.1), advertised to the peer.
    pub max_ack_delay: Duration,
    /// Ack every this many ack-eliciting packets at least (RFC 9000 §13.2.2: 2).
    pub ack_eliciting_threshold: u32,
    /// Largest UDP payload we send. 1200 is always safe; artq defaults to
    /// 1350 (the path MTU is not probed; loopback and the emulator carry it).
    pub max_datagram_size: u16,
    /// Largest DATAGRAM frame we accept (RFC 9221); `None` disables them.
    pub max_datagram_frame_size: Option<u64>,
    /// Most received DATAGRAM payloads kept unread; the oldest are dropped
    /// first when a new one arrives (RFC 9221 §5: delivery is unreliable).
    pub datagram_receive_frames: usize,
    /// Most bytes of received DATAGRAM payloads kept unread, the oldest
    /// dropped first: with `datagram_receive_frames`, what a peer sending
    /// datagrams nobody reads can make us hold.
    pub datagram_receive_buffer: usize,
    /// How many connection IDs we keep issued to the peer (at most).
    pub active_connection_id_limit: u64,
    /// Advertise that we decode artq's private FEC repair frames (the
    /// `fec:K` baseline). Off makes us look like any unmodified receiver.
    pub accept_fec: bool,
}

impl Default for TransportConfig {
    fn default() -> Self {
        TransportConfig {
            streams: StreamsConfig::default(),
            congestion: CongestionAlgorithm::default(),
            policy: Arc::new(QuicPolicy),
            initial_rtt: Duration::from_millis(333),
            max_idle_timeout: Duration::from_secs(30),
            max_ack_delay: Duration::from_millis(25),
            ack_eliciting_threshold: 2,
            max_datagram_size: 1350,
            max_datagram_frame_size: Some(65535),
            datagram_receive_frames: 1024,
            datagram_receive_buffer: 1 << 20,
            active_connection_id_limit: 4,
            accept_fec: true,
        }
    }
}

/// Server-side settings: TLS and transport.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// rustls server config (ALPN, certificate).
    pub tls: Arc<rustls::ServerConfig>,
    /// Transport settings for accepted connections.
    pub transport: Arc<TransportConfig>,
}

/// Client-side settings: TLS, transport, and the server name to verify.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// rustls client config (ALPN, verification).
    pub tls: Arc<rustls::ClientConfig>,
    /// Transport settings.
    pub transport: Arc<TransportConfig>,
    /// Server name for SNI and certificate verification.
    pub server_name: String,
}

/// Endpoint settings.
#[derive(Clone, Debug)]
pub struct EndpointConfig {
    /// Seeds every random choice of the endpoint and its connections
    /// (connection IDs, packet-number-free choices of policies, BBR phase).
    pub rng_seed: u64,
    /// Length of the connection IDs we issue (routing depends on it).
    pub local_cid_len: usize,
    /// Present when the endpoint accepts connections.
    pub server: Option<ServerConfig>,
}

impl EndpointConfig {
    /// A client-only endpoint.
    pub fn client(rng_seed: u64) -> Self {
        EndpointConfig {
            rng_seed,
            local_cid_len: 8,
            server: None,
        }
    }

    /// An endpoint that accepts connections.
    pub fn server(rng_seed: u64, server: ServerConfig) -> Self {
        EndpointConfig {
            rng_seed,
            local_cid_len: 8,
            server: Some(server),
        }
    }
}
