//! artq-transport: a sans-IO QUIC v1 connection and endpoint.
//!
//! Datagrams in, datagrams out, timers: the code here never reads a clock, a
//! socket or the OS random number generator. Time is passed in as
//! [`wire::time::Instant`]; randomness comes from RNGs seeded by the caller.
//! The same connection therefore runs over real UDP sockets (`artq serve`,
//! `artq get`) and inside the discrete-event simulator (`artq sim`).
//!
//! Layers, bottom up:
//! - [`crypto`]: TLS 1.3 through rustls, packet and header protection;
//! - [`rtt`], [`congestion`], [`pacing`]: RFC 9002 estimators and
//!   controllers (NewReno, Cubic, BBRv1);
//! - [`range_set`], [`streams`]: stream state, reassembly, flow control;
//! - [`policy`]: the loss-recovery policy seam the papers' schemes plug into;
//!   the path of a lost packet through the connection (detection, policy
//!   decision, replica sent, fate reported, metric recorded; one file per
//!   stage) is written down in `docs/recovery.md`, "The lost-packet path in
//!   the transport";
//! - [`connection`]: the connection state machine; [`endpoint`]: routing,
//!   admission of new clients (Retry, address-validation tokens, bounds on
//!   unvalidated state);
//! - [`cid_issuer`]: the connection IDs and stateless reset tokens an
//!   endpoint issues (shaped for multi-worker servers, tokens from static
//!   keys), and [`datagram_owner`] for drivers that run several endpoints;
//! - [`rng`]: where randomness comes from (a fixed seed for the simulator
//!   and tests, a secret one from the OS for real endpoints).
#![warn(missing_docs)]

pub mod cid_issuer;
pub mod config;
pub mod congestion;
pub mod connection;
pub mod crypto;
pub mod endpoint;
pub mod error;
pub mod events;
pub mod fec;
#[doc(hidden)]
pub mod fuzzing;
pub mod pacing;
pub mod policy;
pub mod range_set;
pub mod rng;
pub mod rtt;
pub mod stats;
pub mod streams;
#[cfg(feature = "test-hooks")]
pub mod test_pair;

pub use cid_issuer::{datagram_owner, opening_cid, CidIssuer};
pub use config::{
    AdmissionConfig, CidWorkers, ClientConfig, EndpointConfig, InvalidWorkers, PreferredAddresses,
    RetryMode, ServerConfig, StaticKeys, TransportConfig, DEFAULT_LOCAL_CID_LEN,
};
pub use connection::{Connection, ConnectionError, Event, Transmit, ZeroRttStatus};
pub use endpoint::{ConnectionHandle, Endpoint, EndpointStats};
pub use error::TransportError;
pub use rng::RngSeed;
pub use stats::{ConnectionStats, RecoveryTally};
