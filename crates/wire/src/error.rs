//! Error codes and decode failures.

use core::fmt;

/// A QUIC transport error code (RFC 9000 §20.1), carried in CONNECTION_CLOSE.
///
/// Unknown values are kept as they are (they are data, not a failure).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TransportErrorCode(pub u64);

macro_rules! codes {
    ($($name:ident = $val:expr, $doc:expr;)*) => {
        impl TransportErrorCode {
            $(#[doc = $doc] pub const $name: TransportErrorCode = TransportErrorCode($val);)*

            /// The RFC name of a known code.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($val => Some(stringify!($name)),)*
                    0x100..=0x1ff => Some("CRYPTO_ERROR"),
                    _ => None,
                }
            }
        }
    };
}

codes! {
    NO_ERROR = 0x0, "Graceful close without error.";
    INTERNAL_ERROR = 0x1, "The endpoint hit an internal error.";
    CONNECTION_REFUSED = 0x2, "The server refused the connection.";
    FLOW_CONTROL_ERROR = 0x3, "The peer sent more than it was allowed to.";
    STREAM_LIMIT_ERROR = 0x4, "The peer opened more streams than allowed.";
    STREAM_STATE_ERROR = 0x5, "A frame arrived for a stream in a state that forbids it.";
    FINAL_SIZE_ERROR = 0x6, "A stream's final size changed or was exceeded.";
    FRAME_ENCODING_ERROR = 0x7, "A frame was badly formatted.";
    TRANSPORT_PARAMETER_ERROR = 0x8, "Transport parameters were malformed or invalid.";
    CONNECTION_ID_LIMIT_ERROR = 0x9, "The peer issued more connection IDs than allowed.";
    PROTOCOL_VIOLATION = 0xa, "A generic protocol violation.";
    INVALID_TOKEN = 0xb, "An invalid Retry or NEW_TOKEN token.";
    APPLICATION_ERROR = 0xc, "The application closed the connection.";
    CRYPTO_BUFFER_EXCEEDED = 0xd, "Too much buffered CRYPTO data.";
    KEY_UPDATE_ERROR = 0xe, "A key update went wrong.";
    AEAD_LIMIT_REACHED = 0xf, "The AEAD integrity limit was reached.";
    NO_VIABLE_PATH = 0x10, "No usable network path.";
}

impl TransportErrorCode {
    /// The CRYPTO_ERROR code for a TLS alert (RFC 9001 §4.8: 0x100 + alert).
    pub fn crypto(alert: u8) -> Self {
        TransportErrorCode(0x100 + alert as u64)
    }
}

impl fmt::Debug for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => write!(f, "{n}(0x{:x})", self.0),
            None => write!(f, "0x{:x}", self.0),
        }
    }
}

impl fmt::Display for TransportErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}
