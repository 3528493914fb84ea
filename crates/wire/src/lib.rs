//! artq-wire: the QUIC v1 and v2 wire format, and nothing else.
//!
//! Pure codecs with no I/O, no clock and no allocation beyond what a decoded
//! value needs. Every decoder takes untrusted bytes and returns `Err` instead of
//! panicking (the fuzz targets in `fuzz/` hold it to that).
//!
//! Layers, bottom up:
//! - [`varint`] and [`coding`]: variable-length integers (RFC 9000 §16), a
//!   bounds-checked [`Reader`] and the [`BufMutExt`] writer.
//! - [`cid`], [`side`]: connection IDs, endpoint roles and stream IDs.
//! - [`packet`]: long and short headers up to the (still protected) packet
//!   number, packet number encoding (RFC 9000 §17).
//! - [`frame`]: every RFC 9000 frame plus DATAGRAM (RFC 9221), decoded as
//!   borrowed values by [`FrameIter`], with header-only writers for the send path.
//! - [`transport_params`]: the TLS transport parameters extension (RFC 9000 §18).
//! - [`version`]: QUIC v1 and v2 (RFC 9369) and every constant that differs
//!   between them.
//! - [`time`]: the sans-IO [`time::Instant`].
//! - [`fuzzing`]: the bodies of the fuzz targets, also run as property tests.
//!
//! Not here: packet protection (keys, AEAD, header protection; that is
//! rustls's and the transport's job), connection state, and anything that
//! touches a socket.
#![warn(missing_docs)]

pub mod cid;
pub mod coding;
pub mod ecn;
pub mod error;
pub mod frame;
pub mod fuzzing;
pub mod packet;
pub mod side;
pub mod time;
pub mod transport_params;
pub mod varint;
pub mod version;

pub use cid::{ConnectionId, ResetToken};
pub use coding::{BufMutExt, Reader};
pub use error::{DecodeError, TransportErrorCode};
pub use frame::{AckFrame, EcnCounts, Frame, FrameIter};
pub use packet::{LongType, ProtectedHeader, QUIC_V1};
pub use side::{Dir, Side, StreamId};
pub use transport_params::TransportParameters;
pub use varint::{varint_len, VarInt};
pub use version::Version;
