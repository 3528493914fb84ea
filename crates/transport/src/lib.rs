//! artq-transport: a sans-IO QUIC v1 connection and endpoint.
//!
//! Datagrams in, datagrams out, timers: the code here never reads a clock, a
//! socket or the OS random number generator. Time is passed in as
//! [`wire::time::Instant`]; randomness comes from RNGs seeded by the caller.
//! The same connection therefore runs over real UDP sockets (`artq serve`,
//! `artq get`) and inside the discrete-event simulator (`artq sim`).
#![warn(missing_docs)]

pub mod error;

pub use error::TransportError;
