//! Connection and endpoint configuration.

use std::sync::Arc;

use wire::time::Duration;

use crate::congestion::CongestionAlgorithm;
use crate::fec::FecConfig;
use crate::policy::{PolicyFactory, QuicPolicy};
use crate::rng::RngSeed;
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
    /// Largest UDP payload we send before path MTU discovery raises it,
    /// and what it falls back to (at least 1200, which every QUIC path
    /// carries; artq defaults to 1350, which loopback, the emulator and
    /// nearly every real path carry).
    pub max_datagram_size: u16,
    /// Path MTU discovery (DPLPMTUD, RFC 9000 §14.3, RFC 8899): the largest
    /// UDP payload to probe for once the handshake is confirmed, lowered to
    /// the peer's max_udp_payload_size. `None` (the default) turns it off:
    /// every datagram is at most `max_datagram_size`. The UDP drivers turn
    /// it on with 1452 bytes (`artq serve`/`get --no-mtu-discovery`,
    /// `--mtu-ceiling`); the simulator leaves it off, so its results do not
    /// depend on it (connection/path_mtu.rs).
    pub mtu_discovery_ceiling: Option<u16>,
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
    /// Block FEC (the `fec:K` baseline), as sender and as receiver.
    pub fec: FecConfig,
    /// Mark what we send ECT(0) and react to the peer's CE reports (RFC
    /// 9000 §13.4, RFC 9002 §7.1). Off by default; received ECN is always
    /// counted and reported.
    pub ecn: bool,
    /// Client: move to the server's preferred address (RFC 9000 §9.6) once
    /// the handshake is confirmed and the address validates. On by
    /// default; a server that offers none is unaffected.
    pub follow_preferred_address: bool,
    /// The QUIC versions this endpoint speaks (RFC 9000 v1, RFC 9369 v2),
    /// most preferred first; never empty (an empty list means `[V1]`).
    ///
    /// A client sends its first Initial in the first one, and offers only
    /// that one in its version_information (it does not follow a server's
    /// compatible switch to another version: RFC 9368 §2.3 lets a client
    /// disable that by listing its Chosen Version alone). A server accepts
    /// first flights of every listed version, answers a v1 client that
    /// offers v2 in v2 (compatible negotiation, RFC 9368 §2.3, RFC 9369
    /// §4: the client's first listed version it also supports), and lists
    /// them in Version Negotiation packets. An endpoint whose list is just
    /// `[V1]` (the default) sends no version_information at all, so a v1-only
    /// handshake is byte for byte what it was before v2 existed.
    pub versions: Vec<wire::Version>,
}

impl TransportConfig {
    /// The versions of [`Self::versions`], `[V1]` when it is empty.
    pub fn versions(&self) -> &[wire::Version] {
        if self.versions.is_empty() {
            &[wire::Version::V1]
        } else {
            &self.versions
        }
    }

    /// Whether this endpoint takes part in version negotiation by
    /// version_information (RFC 9368 §3): it speaks anything but v1 alone.
    pub fn negotiates_versions(&self) -> bool {
        self.versions() != [wire::Version::V1]
    }
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
            mtu_discovery_ceiling: None,
            max_datagram_frame_size: Some(65535),
            datagram_receive_frames: 1024,
            datagram_receive_buffer: 1 << 20,
            active_connection_id_limit: 4,
            fec: FecConfig::default(),
            ecn: false,
            follow_preferred_address: true,
            versions: vec![wire::Version::V1],
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
    /// The addresses offered to clients in the preferred_address transport
    /// parameter (RFC 9000 §9.6); none by default. The driver must also
    /// receive on them and send from them (see [`crate::Transmit::source`]).
    pub preferred_address: PreferredAddresses,
}

/// A server's preferred addresses (RFC 9000 §9.6, §18.2): at most one per
/// address family, as the transport parameter holds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PreferredAddresses {
    /// The IPv4 one.
    pub v4: Option<std::net::SocketAddrV4>,
    /// The IPv6 one.
    pub v6: Option<std::net::SocketAddrV6>,
}

impl PreferredAddresses {
    /// True when no address is offered.
    pub fn is_empty(&self) -> bool {
        self.v4.is_none() && self.v6.is_none()
    }

    /// Add `addr` in its family's slot; an error names the family already
    /// taken.
    pub fn add(&mut self, addr: std::net::SocketAddr) -> Result<(), String> {
        match addr {
            std::net::SocketAddr::V4(a) if self.v4.is_none() => self.v4 = Some(a),
            std::net::SocketAddr::V6(a) if self.v6.is_none() => self.v6 = Some(a),
            std::net::SocketAddr::V4(_) => return Err("at most one IPv4 preferred address".into()),
            std::net::SocketAddr::V6(_) => return Err("at most one IPv6 preferred address".into()),
        }
        Ok(())
    }

    /// The offered addresses.
    pub fn iter(&self) -> impl Iterator<Item = std::net::SocketAddr> {
        let v4 = self.v4.map(std::net::SocketAddr::V4);
        let v6 = self.v6.map(std::net::SocketAddr::V6);
        v4.into_iter().chain(v6)
    }
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
    /// Seeds every random choice of the endpoint and its connections:
    /// connection IDs, stateless reset tokens, the address-validation token
    /// key, policies' coin flips, BBR's phase (with [`Self::static_keys`],
    /// the token key and reset tokens come from those instead).
    /// [`RngSeed::Secret`] (drawn
    /// from the OS by the caller) on a real network; [`RngSeed::Fixed`] for
    /// the simulator and for tests (see [`crate::rng`]).
    pub rng_seed: RngSeed,
    /// Length of the connection IDs we issue (routing depends on it).
    pub local_cid_len: usize,
    /// Present when the endpoint accepts connections.
    pub server: Option<ServerConfig>,
    /// How a server admits new connections: limits on state created for
    /// unvalidated addresses, Retry, address-validation tokens.
    pub admission: AdmissionConfig,
    /// Most datagrams [`crate::Endpoint::poll_transmit`] takes from one
    /// connection in a row before it moves on to the next (round robin).
    /// 1, the default, alternates at every datagram (the simulator's
    /// order). A real driver sets it to its GSO batch: consecutive
    /// datagrams of one connection share a destination and leave in one
    /// system call, where alternating destinations cost one call each.
    pub transmit_burst: usize,
    /// Server run as one of several workers behind one UDP port: every
    /// connection ID this endpoint issues names its worker in its first
    /// byte ([`CidWorkers`], [`crate::datagram_owner`]). `None` (the
    /// default): IDs are plain random bytes.
    pub workers: Option<CidWorkers>,
    /// Keys shared by every worker of one server, and across its restarts
    /// if the operator keeps them ([`StaticKeys`]). `None` (the default):
    /// the token key and reset tokens come from [`Self::rng_seed`], and no
    /// stateless reset is ever sent.
    pub static_keys: Option<StaticKeys>,
}

/// Length of the connection IDs an endpoint issues unless told otherwise:
/// what a driver that routes datagrams between workers by their
/// connection ID ([`crate::datagram_owner`]) must parse them with.
pub const DEFAULT_LOCAL_CID_LEN: usize = 8;

impl EndpointConfig {
    /// An endpoint with randomness from `rng_seed` that accepts connections
    /// when `server` is given; [`DEFAULT_LOCAL_CID_LEN`]-byte connection
    /// IDs, default admission.
    pub fn new(rng_seed: RngSeed, server: Option<ServerConfig>) -> Self {
        EndpointConfig {
            rng_seed,
            local_cid_len: DEFAULT_LOCAL_CID_LEN,
            server,
            admission: AdmissionConfig::default(),
            transmit_burst: 1,
            workers: None,
            static_keys: None,
        }
    }

    /// A client-only endpoint whose randomness follows from the number
    /// `rng_seed` (reproducible: the simulator, tests).
    pub fn client(rng_seed: u64) -> Self {
        EndpointConfig::new(RngSeed::Fixed(rng_seed), None)
    }

    /// An endpoint that accepts connections, its randomness following from
    /// the number `rng_seed` (reproducible: the simulator, tests).
    pub fn server(rng_seed: u64, server: ServerConfig) -> Self {
        EndpointConfig::new(RngSeed::Fixed(rng_seed), Some(server))
    }

    /// The same endpoint with another source of randomness (real endpoints
    /// pass [`RngSeed::Secret`] with 256 bits from the OS RNG).
    pub fn with_rng_seed(mut self, seed: RngSeed) -> Self {
        self.rng_seed = seed;
        self
    }

    /// The same endpoint taking up to `burst` datagrams from one
    /// connection in a row ([`EndpointConfig::transmit_burst`]).
    pub fn with_transmit_burst(mut self, burst: usize) -> Self {
        self.transmit_burst = burst.max(1);
        self
    }

    /// The same endpoint with other admission settings.
    pub fn with_admission(mut self, admission: AdmissionConfig) -> Self {
        self.admission = admission;
        self
    }

    /// The same endpoint as worker `worker` of `workers` sharing one UDP
    /// port (`artq serve --threads`): every connection ID it issues then
    /// satisfies `cid[0] as usize % workers == worker`, so the driver can
    /// hand each datagram to its owner ([`crate::datagram_owner`]). An error
    /// unless `1 <= workers <= 256` and `worker < workers`.
    pub fn with_workers(mut self, worker: usize, workers: usize) -> Result<Self, InvalidWorkers> {
        self.workers = Some(CidWorkers::new(worker, workers)?);
        Ok(self)
    }

    /// The same endpoint with keys shared by every worker of the server and
    /// kept across restarts ([`StaticKeys`]): address-validation tokens and
    /// stateless reset tokens then do not depend on which worker or which
    /// process issued them, and the endpoint answers packets for
    /// connections it does not know with a stateless reset (RFC 9000
    /// §10.3).
    pub fn with_static_keys(mut self, keys: StaticKeys) -> Self {
        self.static_keys = Some(keys);
        self
    }
}

/// Which worker of a multi-threaded server an endpoint is, as its
/// connection IDs show it: every ID it issues has `cid[0] as usize %
/// workers == worker` (the rest of the ID, and which of the bytes with that
/// remainder comes first, are random).
///
/// The worker index is therefore visible in plaintext, as in the plaintext
/// mode of QUIC-LB (draft-ietf-quic-load-balancers): whoever sees a packet
/// learns which of the server's threads serves its connection. That is
/// acceptable here: the index is shared by about one connection in
/// `workers`, so it tells nothing about the client and links IDs across a
/// migration only to that coarse class (at most 8 bits); the other bytes
/// (7 of the default 8) and the choice among the first bytes of the
/// residue stay unpredictable, so IDs still cannot be guessed; and the
/// threads are one process behind one address, so no topology is exposed.
/// Hiding the index would take encrypted IDs (QUIC-LB's encrypted modes),
/// which this endpoint does not implement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CidWorkers {
    worker: usize,
    workers: usize,
}

/// Why [`CidWorkers::new`] (or [`EndpointConfig::with_workers`]) refused a
/// worker index: what an operator's `--threads` must satisfy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("worker {worker} of {workers}: need 1 <= workers <= 256 and worker < workers")]
pub struct InvalidWorkers {
    /// The worker index asked for.
    pub worker: usize,
    /// The number of workers asked for.
    pub workers: usize,
}

impl CidWorkers {
    /// Most workers: one byte of the connection ID names the worker.
    pub const MAX_WORKERS: usize = 256;

    /// Worker `worker` of `workers`; an error unless `1 <= workers <= 256`
    /// and `worker < workers`.
    pub fn new(worker: usize, workers: usize) -> Result<Self, InvalidWorkers> {
        if (1..=Self::MAX_WORKERS).contains(&workers) && worker < workers {
            Ok(CidWorkers { worker, workers })
        } else {
            Err(InvalidWorkers { worker, workers })
        }
    }

    /// This endpoint's index.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// How many workers share the port.
    pub fn workers(&self) -> usize {
        self.workers
    }

    /// Whether `cid` has this worker's shape (an empty ID has none).
    pub fn owns(&self, cid: &[u8]) -> bool {
        cid.first()
            .is_some_and(|&b| usize::from(b) % self.workers == self.worker)
    }
}

/// Secrets shared by every worker of one server, and across restarts when
/// the operator keeps them (a key file): with them, the address-validation
/// tokens of Retry and NEW_TOKEN and the stateless reset tokens are the
/// same whichever worker or process computes them, so a token one worker
/// issued validates a client at another, and a worker (or a restarted
/// server) that holds no state for a connection can still end it with a
/// stateless reset the client recognises (RFC 9000 §10.3).
///
/// Draw them once from the OS RNG (or derive both from one secret with
/// [`StaticKeys::from_secret`]) and give the same value to every worker.
/// Anyone who knows `reset` can end any connection of the server: keep it
/// as secret as the TLS key.
#[derive(Clone, PartialEq, Eq)]
pub struct StaticKeys {
    /// Seals and opens address-validation tokens (Retry, NEW_TOKEN); the
    /// AES-256-GCM key is derived from it.
    pub token: [u8; 32],
    /// The stateless reset token of a connection ID is
    /// `HMAC-SHA256(reset, cid)[..16]` (RFC 9000 §10.3.2).
    pub reset: [u8; 32],
}

impl StaticKeys {
    /// Both keys derived from one secret (at least 32 random bytes, e.g. a
    /// key file), each with HMAC-SHA256 under its own label, so one file
    /// configures a whole server.
    pub fn from_secret(secret: &[u8]) -> Self {
        let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
        let derive = |label: &[u8]| {
            let mut out = [0u8; 32];
            out.copy_from_slice(ring::hmac::sign(&key, label).as_ref());
            out
        };
        StaticKeys {
            token: derive(b"artq static token key"),
            reset: derive(b"artq static reset key"),
        }
    }
}

impl core::fmt::Debug for StaticKeys {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        // Secrets: never printed.
        f.write_str("StaticKeys(..)")
    }
}

/// When a server answers a new client with Retry (RFC 9000 §8.1.2) instead
/// of creating state for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryMode {
    /// Never: beyond the limits of [`AdmissionConfig`], Initials are dropped.
    Never,
    /// Every client without a valid token first proves its address with a
    /// Retry round trip (`artq serve --retry`).
    Always,
    /// Retry once this many connections wait for their address to be
    /// validated (or a source address passes
    /// [`AdmissionConfig::max_unvalidated_per_source`]): clients pay the
    /// extra round trip only when the server is under load.
    WhenUnvalidatedAtLeast(usize),
}

/// How a server admits new connections (bug 4 and 5 of issue 15): what it
/// asks of an Initial before it creates any state, how much state it keeps
/// for addresses it has not validated, and when it sends Retry.
///
/// A connection is *unvalidated* until the client proved it receives at its
/// address (a Handshake packet from it, or a valid Retry or NEW_TOKEN token;
/// RFC 9000 §8.1). It is *half-open* while its ClientHello is incomplete
/// (a ClientHello may span several Initial packets that arrive out of
/// order). The defaults bound the state an attacker with spoofed addresses
/// can pin to `max_unvalidated` connections, and with the default Retry
/// threshold to 64 of them.
#[derive(Clone, Debug)]
pub struct AdmissionConfig {
    /// Most connections the endpoint holds (4096).
    pub max_connections: usize,
    /// Most unvalidated connections in total (256); beyond it a new client
    /// gets Retry (unless [`RetryMode::Never`]) or nothing.
    pub max_unvalidated: usize,
    /// Most unvalidated connections from one IP address (16); beyond it as
    /// for `max_unvalidated`.
    pub max_unvalidated_per_source: usize,
    /// A half-open connection that receives nothing for this long is
    /// dropped silently (3 s: three times a client's first PTO at the
    /// RFC 9002 initial RTT of 333 ms; the client's next retransmission
    /// starts over).
    pub half_open_timeout: Duration,
    /// When to send Retry (default: once 64 connections are unvalidated).
    pub retry: RetryMode,
    /// How long a Retry token stays valid after it was issued (10 s: a
    /// client answers a Retry within one round trip).
    pub retry_token_lifetime: Duration,
    /// Send each client a NEW_TOKEN token, valid this long for a later
    /// connection from the same IP address (RFC 9000 §8.1.3). `None` (the
    /// default) sends none: a token only helps a client that comes back,
    /// and costs every connection a frame. `artq serve` sends them, valid
    /// [`AdmissionConfig::DEFAULT_NEW_TOKEN_LIFETIME`]. The token key lives
    /// as long as the endpoint, so a restarted server honours no earlier
    /// tokens, unless it has the same [`StaticKeys`].
    pub new_token_lifetime: Option<Duration>,
}

impl Default for AdmissionConfig {
    fn default() -> Self {
        AdmissionConfig {
            max_connections: 4096,
            max_unvalidated: 256,
            max_unvalidated_per_source: 16,
            half_open_timeout: Duration::from_secs(3),
            retry: RetryMode::WhenUnvalidatedAtLeast(64),
            retry_token_lifetime: Duration::from_secs(10),
            new_token_lifetime: None,
        }
    }
}

impl AdmissionConfig {
    /// A lifetime for NEW_TOKEN tokens that covers a user coming back the
    /// same day (24 h).
    pub const DEFAULT_NEW_TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);
}
