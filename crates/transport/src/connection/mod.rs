//! One QUIC connection as a sans-IO state machine.
//!
//! # Calling protocol
//!
//! The driver (a UDP socket loop, or the simulator) owns time and I/O:
//! - input: [`Connection::handle_datagram`] for each datagram from the peer,
//!   [`Connection::handle_timeout`] once `now` reaches [`Connection::poll_timeout`];
//! - output: call [`Connection::poll_transmit`] until it returns `None`
//!   after every input, then [`Connection::poll_timeout`] for the next wake-up;
//! - application: [`Connection::poll_event`] for events, and the stream and
//!   datagram methods ([`Connection::streams`], [`Connection::send_datagram`]).
//!
//! The connection never reads a clock or the OS RNG: `now` is an argument and
//! randomness comes from a ChaCha RNG seeded by the endpoint.
//!
//! # Layout
//!
//! This file holds [`Connection`] and its public calls. Each module below
//! owns one part of the connection's state as a type of its own (named in
//! brackets), and the connection-wide steps that change it; the
//! connection holds one value of each.
//! - `spaces`: packet number spaces, sent-packet records, CRYPTO streams,
//!   packets kept until they may be read (`PacketSpace`);
//! - `recv`: datagram and frame processing (`ReceiveState`: the datagram
//!   being processed, RFC 9001 §6.6's authentication failures);
//! - `send`: packet assembly, coalescing, padding, protection
//!   (`SendState`: the pacer);
//! - `key_phase`: 1-RTT keys across key updates, RFC 9001 §6
//!   (`OneRttKeys`);
//! - `loss`: RFC 9002 loss detection, PTO and persistent congestion as pure
//!   functions over sent-packet records;
//! - `loss_detection`: applying RFC 9002 to the connection: ACK frames and
//!   RTT samples, what an acknowledged or lost packet releases, congestion
//!   events, the loss-detection timer, PTO probes (`LossDetection`: PTO
//!   count, first RTT sample, the peer's ack delay parameters);
//! - `recovery`: the sender's recovery of lost data as one owner
//!   (`Recovery`): the retransmission engine (items, rounds, replicas, one
//!   record per item), lost packets acknowledged after all (RFC 9002
//!   §6.1), early copies, the DATAGRAM payloads a policy may resend, FEC's
//!   sender, and the [`crate::policy::RecoveryPolicy`], which nothing else
//!   calls;
//! - `handshake`: TLS output and keys, peer transport parameters, handshake
//!   completion and confirmation, discarding the Initial/Handshake spaces
//!   (`HandshakeState`);
//! - `cids`: connection IDs issued and received, and the authentication
//!   of the handshake's connection IDs, RFC 9000 §7.3 (`CidState`);
//! - `validation`: address validation as the client sees it (following a
//!   Retry) and as the server offers it (NEW_TOKEN), RFC 9000 §8.1, and
//!   the server's anti-amplification budget until then
//!   (`AddressValidation`);
//! - `migration`: the peer moving to a new address (NAT rebinding,
//!   migration) and the validation of its new path, RFC 9000 §8.2, §9
//!   (`PathValidation`);
//! - `preferred_address`: the server's preferred address, offered by the
//!   server and followed by the client, RFC 9000 §9.6 (`PreferredPath`);
//! - `ecn`: ECN marking and its validation, RFC 9000 §13.4 (`EcnState`);
//! - `path_mtu`: the size of the datagrams we send and its discovery,
//!   DPLPMTUD, RFC 9000 §14.3 and RFC 8899 (`PathMtu`);
//! - `version`: the QUIC version and compatible version negotiation
//!   (`VersionState`);
//! - `close`: closing and draining, RFC 9000 §10.2 (`CloseState`: our
//!   CONNECTION_CLOSE, why the connection ended);
//! - `datagrams`: DATAGRAM frames, RFC 9221 (`Datagrams`: both queues and
//!   the peer's limit);
//! - `timer`: the timer table (`TimerTable`);
//! - `zero_rtt`: session resumption's 0-RTT: early keys, remembered
//!   transport parameters, acceptance and rejection, RFC 9001 §4.6
//!   (`ZeroRtt`).

mod cids;
mod close;
mod datagrams;
mod ecn;
mod handshake;
mod key_phase;
mod loss;
mod loss_detection;
mod migration;
mod path_mtu;
mod preferred_address;
mod recovery;
mod recv;
mod send;
pub(crate) mod spaces;
mod timer;
mod validation;
mod version;
mod zero_rtt;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::Arc;

use rand::RngCore;
use wire::cid::ConnectionId;
use wire::time::{Duration, Instant};
use wire::{Side, Version};

use crate::cid_issuer::CidIssuer;
use crate::config::{ClientConfig, ServerConfig, TransportConfig};
use crate::congestion::{Controller, DeliveryRateEstimator};
use crate::crypto::{self, Keys, TlsSession};
use crate::error::TransportError;
use crate::events::Subscriber;
use crate::rng::{RngSeed, StackRng};
use crate::rtt::RttEstimator;
use crate::stats::ConnectionStats;
use crate::streams::{StreamEvent, Streams};

use self::cids::CidState;
pub use self::datagrams::DatagramError;
use self::datagrams::Datagrams;
use self::handshake::local_params;
pub use self::key_phase::KeyUpdateError;
use self::key_phase::OneRttKeys;
use self::recovery::Recovery;
use self::spaces::PacketSpace;
pub use self::spaces::SpaceId;
use self::timer::{Timer, TimerTable};
use self::validation::AddressValidation;
pub use self::zero_rtt::ZeroRttStatus;

/// Why a connection ended, as the application sees it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// We detected a protocol error and closed the connection.
    #[error("transport error: {0}")]
    Transport(TransportError),
    /// The peer closed the connection.
    #[error("closed by peer: {code} {reason}")]
    PeerClosed {
        /// The peer's error code.
        code: u64,
        /// True for an application close (0x1d), false for a transport close.
        application: bool,
        /// The peer's reason phrase (lossily decoded).
        reason: String,
    },
    /// The local application closed the connection.
    #[error("closed locally")]
    LocallyClosed,
    /// No packet arrived for the idle timeout.
    #[error("idle timeout")]
    TimedOut,
    /// The peer ended the connection with a stateless reset (RFC 9000
    /// §10.3): it holds no state for it any more (it restarted, or the
    /// connection ended there), so the connection drains at once instead
    /// of waiting for the idle timeout.
    #[error("stateless reset by the peer")]
    StatelessReset,
}

/// Something the application should know about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// The TLS handshake completed: streams can be opened.
    Connected,
    /// A stream changed state.
    Stream(StreamEvent),
    /// A DATAGRAM frame arrived ([`Connection::recv_datagram`]).
    DatagramReceived,
    /// The connection is over; no more events follow.
    ConnectionLost(ConnectionError),
}

/// What the endpoint must do for the connection (routing table changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointEvent {
    /// Route datagrams addressed to this connection ID to the connection.
    NewLocalCid(ConnectionId),
    /// Stop routing this connection ID.
    RetireLocalCid(ConnectionId),
    /// The connection is gone; forget it.
    Drained,
    /// Client: the server sent this token in a NEW_TOKEN frame, for a later
    /// connection to the same server (RFC 9000 §8.1.3).
    NewToken(Vec<u8>),
}

/// One datagram produced by [`Connection::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Where to send it.
    pub destination: SocketAddr,
    /// Which of our addresses to send it from: a server with a preferred
    /// address answers from the one its client sends to (RFC 9000 §9.6).
    /// `None`: the endpoint's usual one (a driver with a single socket
    /// ignores it).
    pub source: Option<SocketAddr>,
    /// The ECN codepoint to send it with (`None`: Not-ECT).
    pub ecn: Option<wire::ecn::Ecn>,
    /// Its length (the bytes are in the caller's buffer).
    pub size: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Handshake,
    Established,
    /// We sent CONNECTION_CLOSE and answer further packets with it.
    Closing,
    /// The peer sent CONNECTION_CLOSE: silence until the timer ends.
    Draining,
    Drained,
}

/// A QUIC connection. See the module documentation for the calling protocol.
pub struct Connection {
    side: Side,
    config: Arc<TransportConfig>,
    state: State,
    tls: TlsSession,
    /// The QUIC version, and the server's compatible negotiation.
    version: version::VersionState,
    initial_keys: Option<Keys>,
    handshake_keys: Option<Keys>,
    one_rtt: Option<OneRttKeys>,
    /// 0-RTT keys and status (session resumption).
    zero_rtt: zero_rtt::ZeroRtt,
    /// The handshake's progress: TLS output level, completion,
    /// confirmation, the peer's transport parameters.
    handshake: handshake::HandshakeState,
    spaces: [PacketSpace; 3],
    remote: SocketAddr,
    /// The DCID of the client's first Initial, before any Retry: what the
    /// server echoes in original_destination_connection_id (RFC 9000 §7.3).
    original_dcid: ConnectionId,
    /// Address validation: the amplification budget, Retry and tokens.
    validation: AddressValidation,
    cids: CidState,
    idle_timeout: Option<Duration>,
    /// The size of the datagrams we send, and path MTU discovery.
    path_mtu: path_mtu::PathMtu,
    rtt: RttEstimator,
    cc: Box<dyn Controller>,
    rate: DeliveryRateEstimator,
    /// The send path's state: the pacer, the test hook's raw frames.
    tx: send::SendState,
    bytes_in_flight: u64,
    /// RFC 9002's per-connection loss-detection state (PTO backoff, first
    /// RTT sample, the peer's ack delay parameters).
    loss_detection: loss_detection::LossDetection,
    /// The receive path's state: the datagram being processed, packets
    /// that failed authentication.
    rx: recv::ReceiveState,
    /// The sender's recovery of lost data (engine, lost history, early
    /// copies, DATAGRAM store, policy, FEC sender): the one owner.
    recovery: Recovery,
    streams: Streams,
    /// Unreliable DATAGRAM frames, both ways (RFC 9221).
    datagrams: Datagrams,
    /// PATH_CHALLENGE data to echo, with the path each came on.
    path_responses: VecDeque<preferred_address::PendingResponse>,
    /// The peer's new address while we validate it (RFC 9000 §8.2, §9).
    path_validation: Option<migration::PathValidation>,
    /// Our address on the current path, as the driver reports it (the
    /// server's primary or preferred address); `None` until a datagram
    /// says, and on a client.
    local: Option<SocketAddr>,
    /// Client: the server's preferred address and our move to it.
    preferred: preferred_address::PreferredPath,
    /// Our ECN marking (RFC 9000 §13.4).
    ecn: ecn::EcnState,
    events: VecDeque<Event>,
    endpoint_events: VecDeque<EndpointEvent>,
    timers: TimerTable,
    /// How the connection ends: our CONNECTION_CLOSE and the reason.
    close: close::CloseState,
    stats: ConnectionStats,
    /// Event subscribers (qlog, metric recorders).
    subscribers: Vec<Box<dyn Subscriber>>,
    /// Connection IDs, reset tokens, the policy's and the controller's
    /// random choices.
    rng: StackRng,
    /// The endpoint's issuer of connection IDs and reset tokens (worker
    /// shape, static reset key).
    cid_issuer: Arc<CidIssuer>,
    /// Block-FEC receiver.
    fec_rx: crate::fec::FecDecoder,
}

impl core::fmt::Debug for Connection {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Connection")
            .field("side", &self.side)
            .field("state", &self.state)
            .field("remote", &self.remote)
            .finish_non_exhaustive()
    }
}

/// The connection IDs a connection starts with (RFC 9000 §7.2), the
/// version of its first Initial, and where address validation starts.
struct HandshakeIds {
    local: ConnectionId,
    remote: ConnectionId,
    /// The DCID of the client's first Initial (RFC 9000 §7.3).
    original_dcid: ConnectionId,
    /// The DCID the Initial keys derive from (RFC 9001 §5.2): the original
    /// one, or after a Retry the SCID of that Retry.
    initial_dcid: ConnectionId,
    /// The version of the client's first Initial.
    version: Version,
    /// Draws the IDs (and reset tokens) issued later: the endpoint's.
    issuer: Arc<CidIssuer>,
    /// The client's token for its Initials, or what the server's endpoint
    /// decided (Retry, validated address, NEW_TOKEN token).
    validation: AddressValidation,
}

/// What the endpoint decided about a client before creating the server's
/// side of its connection (RFC 9000 §7.2, §7.3, §8.1).
#[derive(Clone, Debug)]
pub struct ServerSetup {
    /// The connection ID we chose for ourselves.
    pub local_cid: ConnectionId,
    /// The Destination Connection ID of the Initial that creates the
    /// connection: the Initial keys derive from it.
    pub initial_dcid: ConnectionId,
    /// The client's Source Connection ID.
    pub client_scid: ConnectionId,
    /// The DCID of the client's very first Initial: `initial_dcid`, or the
    /// one recorded in the Retry token the client came back with.
    pub original_dcid: ConnectionId,
    /// The SCID of our Retry, when the client came back with a Retry token.
    pub retry_scid: Option<ConnectionId>,
    /// A token already proved the client's address: no amplification
    /// limit (RFC 9000 §8.1).
    pub address_validated: bool,
    /// A token to give the client in a NEW_TOKEN frame once the handshake
    /// is complete.
    pub new_token: Option<Vec<u8>>,
    /// The version of the client's first Initial (one the server speaks).
    pub version: Version,
}

/// Failure to create a connection.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// TLS could not be set up (bad server name, bad config).
    #[error("TLS setup failed: {0}")]
    Tls(#[from] crypto::CryptoError),
}

impl Connection {
    // One private constructor shared by `client` and `server`; the arguments
    // are the identities each side has already chosen, not options.
    fn new(
        now: Instant,
        side: Side,
        config: Arc<TransportConfig>,
        tls: TlsSession,
        ids: HandshakeIds,
        remote: SocketAddr,
        rng_seed: RngSeed,
    ) -> Self {
        let mds = u64::from(config.max_datagram_size);
        // The handshake ID's token: only sent (by a server, as a transport
        // parameter) under static keys, so only computed then.
        let local_reset_token = ids.issuer.static_reset_token(&ids.local);
        let mut rng = StackRng::new(rng_seed);
        let cc_seed = rng.next_u64();
        let mut conn = Connection {
            side,
            state: State::Handshake,
            tls,
            initial_keys: Some(crypto::initial_keys(&ids.initial_dcid, side, ids.version)),
            version: version::VersionState::new(ids.version, ids.initial_dcid),
            handshake_keys: None,
            one_rtt: None,
            zero_rtt: zero_rtt::ZeroRtt::new(),
            handshake: handshake::HandshakeState::default(),
            spaces: Default::default(),
            remote,
            original_dcid: ids.original_dcid,
            validation: ids.validation,
            cids: CidState::new(ids.local, local_reset_token, ids.remote),
            idle_timeout: nonzero(config.max_idle_timeout),
            path_mtu: path_mtu::PathMtu::new(
                config.max_datagram_size,
                config.mtu_discovery_ceiling,
            ),
            rtt: RttEstimator::new(config.initial_rtt),
            cc: config.congestion.build_seeded(now, mds, cc_seed),
            tx: send::SendState::new(now, mds),
            rate: DeliveryRateEstimator::default(),
            bytes_in_flight: 0,
            loss_detection: loss_detection::LossDetection::default(),
            rx: recv::ReceiveState::new(remote),
            recovery: Recovery::new(config.policy.build()),
            streams: Streams::new(side, config.streams.clone()),
            datagrams: Datagrams::new(&config),
            path_responses: VecDeque::new(),
            path_validation: None,
            local: None,
            preferred: preferred_address::PreferredPath::None,
            ecn: if config.ecn {
                ecn::EcnState::Testing
            } else {
                ecn::EcnState::Off
            },
            events: VecDeque::new(),
            endpoint_events: VecDeque::new(),
            timers: TimerTable::default(),
            close: close::CloseState::default(),
            stats: ConnectionStats::default(),
            subscribers: Vec::new(),
            rng,
            cid_issuer: ids.issuer,
            fec_rx: crate::fec::FecDecoder::default(),
            config,
        };
        conn.cids
            .set_local_limit(conn.config.active_connection_id_limit);
        conn.reset_idle_timer(now);
        conn
    }

    /// Start a client connection to `remote`. `rng_seed` determines every
    /// random choice of the connection (its first Destination Connection ID
    /// included). `token` goes into every Initial packet (RFC 9000
    /// §17.2.2): a NEW_TOKEN token from an earlier connection to the same
    /// server, or empty. `cid_issuer` draws the connection IDs it issues
    /// later (the endpoint's).
    pub fn connect(
        now: Instant,
        config: &ClientConfig,
        remote: SocketAddr,
        local_cid: ConnectionId,
        rng_seed: RngSeed,
        token: Vec<u8>,
        cid_issuer: Arc<CidIssuer>,
    ) -> Result<Self, ConnectError> {
        // A fixed seed keeps its historic derivation (simulated runs do not move).
        let seed = match rng_seed {
            RngSeed::Fixed(n) => RngSeed::Fixed(n ^ 0x5eed_c11e),
            secret => secret,
        };
        let mut rng = StackRng::new(seed);
        // RFC 9000 §7.2: at least 8 unpredictable bytes.
        let mut dcid_bytes = [0u8; 8];
        rng.fill_bytes(&mut dcid_bytes);
        let dcid = ConnectionId::new(&dcid_bytes).expect("8 bytes fit a connection ID");
        let version = config.transport.versions()[0];
        let mut params = local_params(&config.transport, local_cid, None);
        if config.transport.negotiates_versions() {
            params.version_information = Some(version::local_version_information(
                Side::Client,
                version,
                config.transport.versions(),
            ));
        }
        let mut encoded = Vec::new();
        params.encode(&mut encoded);
        let tls = TlsSession::client(config.tls.clone(), version, &config.server_name, encoded)?;
        let ids = HandshakeIds {
            local: local_cid,
            remote: dcid,
            original_dcid: dcid,
            initial_dcid: dcid,
            version,
            issuer: cid_issuer,
            validation: AddressValidation::client(token),
        };
        let mut conn = Connection::new(
            now,
            Side::Client,
            config.transport.clone(),
            tls,
            ids,
            remote,
            rng.child_seed(),
        );
        conn.start_zero_rtt();
        conn.process_tls_output();
        Ok(conn)
    }

    /// Accept a client whose Initial the endpoint admitted (see
    /// [`ServerSetup`]). The caller then hands that Initial's datagram to
    /// [`Connection::handle_datagram`]. `cid_issuer` draws the connection
    /// IDs it issues (the endpoint's).
    pub fn accept(
        now: Instant,
        config: &ServerConfig,
        remote: SocketAddr,
        setup: ServerSetup,
        rng_seed: RngSeed,
        cid_issuer: Arc<CidIssuer>,
    ) -> Result<Self, ConnectError> {
        let mut params = local_params(
            &config.transport,
            setup.local_cid,
            Some(setup.original_dcid),
        );
        params.retry_source_connection_id = setup.retry_scid;
        // RFC 9000 §18.2: a server MAY send the handshake ID's token. Only
        // under static keys, where any worker can answer with a reset; a
        // random token would change what a default server sends.
        params.stateless_reset_token = cid_issuer.static_reset_token(&setup.local_cid);
        let offer = preferred_address::server_offer(
            &config.preferred_address,
            setup.local_cid.len(),
            &cid_issuer,
            rng_seed,
        );
        params.preferred_address = offer.as_ref().map(|o| o.encode());
        let negotiates = config.transport.negotiates_versions();
        if negotiates {
            params.version_information = Some(version::local_version_information(
                Side::Server,
                setup.version,
                config.transport.versions(),
            ));
        }
        let mut encoded = Vec::new();
        params.encode(&mut encoded);
        let tls = TlsSession::server(config.tls.clone(), setup.version, encoded)?;
        let ids = HandshakeIds {
            local: setup.local_cid,
            remote: setup.client_scid,
            original_dcid: setup.original_dcid,
            initial_dcid: setup.initial_dcid,
            version: setup.version,
            issuer: cid_issuer,
            validation: AddressValidation::server(
                setup.address_validated,
                setup.retry_scid,
                setup.new_token,
            ),
        };
        let mut conn = Connection::new(
            now,
            Side::Server,
            config.transport.clone(),
            tls,
            ids,
            remote,
            rng_seed,
        );
        if let Some(offer) = &offer {
            conn.register_preferred_cid(now, offer);
        }
        if negotiates {
            // The ClientHello may ask for another version: TLS waits for it.
            conn.version.hold_server_setup(config.tls.clone(), params);
        }
        Ok(conn)
    }

    /// Our role.
    pub fn side(&self) -> Side {
        self.side
    }

    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.remote
    }

    /// Our address on the current path, when the driver reports it
    /// ([`Connection::handle_datagram_on`]): which of a server's addresses
    /// its client sends to.
    pub fn local_address(&self) -> Option<SocketAddr> {
        self.local
    }

    /// True until the TLS handshake completes.
    pub fn is_handshaking(&self) -> bool {
        !self.handshake.complete
    }

    /// True once the connection is closing, draining or gone.
    pub fn is_closed(&self) -> bool {
        matches!(
            self.state,
            State::Closing | State::Draining | State::Drained
        )
    }

    /// True once the connection is gone entirely and may be dropped.
    pub fn is_drained(&self) -> bool {
        self.state == State::Drained
    }

    /// Why the connection ended, once it has.
    pub fn close_reason(&self) -> Option<&ConnectionError> {
        self.close.error()
    }

    /// The negotiated ALPN protocol.
    pub fn alpn_protocol(&self) -> Option<&[u8]> {
        self.tls.alpn_protocol()
    }

    /// The name of the loss recovery policy in use.
    pub fn recovery_scheme(&self) -> String {
        self.recovery.scheme()
    }

    /// How the recovery scheme wants an application's messages carried
    /// ([`crate::policy::RecoveryPolicy::message_carriage`]).
    pub fn message_carriage(&self) -> crate::policy::Carriage {
        self.recovery.message_carriage()
    }

    /// The congestion controller's name.
    pub fn congestion_algorithm(&self) -> &'static str {
        self.cc.name()
    }

    /// Counters, with the current RTT and window filled in.
    pub fn stats(&self) -> ConnectionStats {
        let mut s = self.stats.clone();
        s.cwnd = self.cc.window();
        s.srtt = self.rtt.smoothed();
        s.min_rtt = self.rtt.min();
        s.latest_rtt = self.rtt.latest();
        s.bytes_in_flight = self.bytes_in_flight;
        s
    }

    /// Stream operations (open, accept, read, write, finish, reset, stop).
    pub fn streams(&mut self) -> &mut Streams {
        &mut self.streams
    }
    /// Largest DATAGRAM payload the peer accepts, once known (None: no support).
    pub fn max_datagram_payload(&self) -> Option<usize> {
        self.datagrams.max_payload(self.path_mtu.current())
    }

    /// Queue an unreliable DATAGRAM (RFC 9221). Fails when the peer does not
    /// accept datagrams or the payload does not fit in one packet.
    pub fn send_datagram(&mut self, data: Vec<u8>) -> Result<(), DatagramError> {
        self.datagrams.send(data, self.path_mtu.current())
    }

    /// DATAGRAM payloads queued by [`Connection::send_datagram`] and not yet
    /// sent (congestion control holds them back): an application that
    /// produces datagrams at its own pace bounds its backlog with this.
    pub fn datagrams_queued(&self) -> usize {
        self.datagrams.queued()
    }

    /// Take a received DATAGRAM payload, oldest first.
    pub fn recv_datagram(&mut self) -> Option<Vec<u8>> {
        self.datagrams.recv()
    }

    /// Received DATAGRAM payloads dropped unread because the receive queue
    /// was full ([`TransportConfig::datagram_receive_frames`],
    /// [`TransportConfig::datagram_receive_buffer`]).
    pub fn datagrams_dropped(&self) -> u64 {
        self.datagrams.dropped()
    }

    /// Attach an event subscriber (a qlog writer, a metrics recorder).
    pub fn subscribe(&mut self, subscriber: Box<dyn Subscriber>) {
        self.subscribers.push(subscriber);
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        if let Some(e) = self.events.pop_front() {
            return Some(e);
        }
        self.streams.poll_event().map(Event::Stream)
    }

    /// Test hook: send these raw bytes as frames in the next 1-RTT packet,
    /// to check how a peer handles malformed or hostile frames.
    #[cfg(feature = "test-hooks")]
    #[doc(hidden)]
    pub fn inject_raw_frames(&mut self, bytes: Vec<u8>) {
        self.tx.raw_frames.push(bytes);
    }

    /// Whether events are waiting for [`Connection::poll_event`].
    pub fn has_events(&self) -> bool {
        !self.events.is_empty() || self.streams.has_events()
    }

    /// Whether routing changes wait for [`Connection::poll_endpoint_event`]
    /// (the endpoint asks after every packet; most of the time none do).
    pub(crate) fn has_endpoint_events(&self) -> bool {
        !self.endpoint_events.is_empty()
    }

    /// The next routing change for the endpoint.
    pub fn poll_endpoint_event(&mut self) -> Option<EndpointEvent> {
        self.endpoint_events.pop_front()
    }

    /// When [`Connection::handle_timeout`] must be called next.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next()
    }

    /// Fire expired timers.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.timers.is_expired(Timer::Close, now) {
            self.timers.stop_all();
            self.set_drained();
            return;
        }
        if self.state == State::Drained {
            return;
        }
        if self.timers.is_expired(Timer::Idle, now) {
            self.timers.stop_all();
            self.close.set_error_if_none(ConnectionError::TimedOut);
            self.events
                .push_back(Event::ConnectionLost(ConnectionError::TimedOut));
            self.set_drained();
            return;
        }
        if self.timers.is_expired(Timer::KeyDiscard, now) {
            self.timers.stop(Timer::KeyDiscard);
            if let Some(k) = self.one_rtt.as_mut() {
                k.prev_remote = None;
            }
        }
        if self.timers.is_expired(Timer::Ack, now) {
            // The deadline stays in the past: the next poll_transmit sends the ACK.
            self.timers.stop(Timer::Ack);
        }
        if self.timers.is_expired(Timer::Pacing, now) {
            self.timers.stop(Timer::Pacing);
        }
        if self.timers.is_expired(Timer::Replica, now) {
            self.timers.stop(Timer::Replica);
        }
        if self.timers.is_expired(Timer::PathValidation, now) {
            if self.side.is_client() {
                self.on_preferred_probe_timeout(now);
            } else {
                self.on_path_validation_timeout(now);
            }
        }
        if self.timers.is_expired(Timer::LossDetection, now) && !self.is_closed() {
            self.on_loss_detection_timeout(now);
        }
    }

    // ---- internals shared by the submodules ----

    fn space(&self, id: SpaceId) -> &PacketSpace {
        &self.spaces[id as usize]
    }

    fn space_mut(&mut self, id: SpaceId) -> &mut PacketSpace {
        &mut self.spaces[id as usize]
    }

    fn has_keys(&self, id: SpaceId) -> bool {
        match id {
            SpaceId::Initial => self.initial_keys.is_some(),
            SpaceId::Handshake => self.handshake_keys.is_some(),
            SpaceId::Data => self.one_rtt.is_some(),
        }
    }

    fn reset_idle_timer(&mut self, now: Instant) {
        if let Some(t) = self.idle_timeout {
            // RFC 9000 §10.1: at least 3 PTOs.
            let t = t.max(self.pto_duration(SpaceId::Data) * 3);
            self.timers.set(Timer::Idle, now + t);
        }
    }
}

fn nonzero(d: Duration) -> Option<Duration> {
    if d.is_zero() {
        None
    } else {
        Some(d)
    }
}

/// Ack delay exponent we advertise (RFC 9000 §18.2 default).
const LOCAL_ACK_DELAY_EXPONENT: u8 = 3;
