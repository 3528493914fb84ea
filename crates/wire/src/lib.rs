//! artq-wire: the QUIC v1 wire format, and nothing else.
//!
//! Pure codecs with no I/O, no clock and no allocation beyond what a decoded
//! value needs. Every decoder takes untrusted bytes and returns `Err` instead of
//! panicking (the fuzz targets in `fuzz/` hold it to that).
#![warn(missing_docs)]

pub mod time;
pub mod side;

pub use side::{Dir, Side, StreamId};
pub mod error;

pub use error::TransportErrorCode;
