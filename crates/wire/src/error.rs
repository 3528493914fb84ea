//! Error codes and decode failures.
//!
//! [`TransportErrorCode`] is what goes on the wire in CONNECTION_CLOSE;
//! [`DecodeError`] is what every decoder in this crate returns, and
//! [`DecodeError::error_code`] says which code a connection should close with.

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
    VERSION_NEGOTIATION_ERROR = 0x11, "Version negotiation failed a downgrade check (RFC 9368 §6).";
}

impl TransportErrorCode {
    /// The CRYPTO_ERROR code for a TLS alert (RFC 9001 §4.8: 0x100 + alert).
    pub fn crypto(alert: u8) -> Self {
        TransportErrorCode(0x100 + u64::from(alert))
    }

    /// The TLS alert of a CRYPTO_ERROR code (RFC 9001 §4.8), if this is one.
    pub fn crypto_alert(self) -> Option<u8> {
        match self.0 {
            0x100..=0x1ff => u8::try_from(self.0 - 0x100).ok(),
            _ => None,
        }
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

/// Why bytes from the network (or a file) could not be decoded.
///
/// Decoders never panic on untrusted input; they return one of these. The
/// variants are coarse on purpose: callers need the close code (see
/// [`DecodeError::error_code`]) and a reason for logs, not a parse tree.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The input ended before the value being read did.
    ///
    /// Inside a frame or a transport parameter, truncation is reported as
    /// [`DecodeError::MalformedFrame`] or
    /// [`DecodeError::InvalidTransportParameter`] instead, so that
    /// [`DecodeError::error_code`] gives the code RFC 9000 asks for.
    #[error("unexpected end of input")]
    UnexpectedEnd,
    /// A value is outside the range its field allows.
    #[error("invalid value: {0}")]
    InvalidValue(&'static str),
    /// A frame type this implementation does not know (RFC 9000 §12.4).
    #[error("unknown frame type 0x{0:x}")]
    UnknownFrameType(u64),
    /// A frame of a known type is badly formed (truncated, out-of-range field).
    #[error("malformed frame (type 0x{frame_type:x}): {reason}")]
    MalformedFrame {
        /// The frame type as read from the wire.
        frame_type: u64,
        /// What was wrong with it.
        reason: &'static str,
    },
    /// The transport parameters extension is malformed or violates RFC 9000 §18.
    #[error("invalid transport parameter: {0}")]
    InvalidTransportParameter(&'static str),
    /// A QUIC version this implementation does not speak.
    #[error("unsupported QUIC version 0x{0:08x}")]
    UnsupportedVersion(u32),
    /// A packet header is invalid (RFC 9000 §17); the packet should be dropped.
    #[error("invalid packet header: {0}")]
    InvalidHeader(&'static str),
}

impl DecodeError {
    /// The RFC 9000 §20.1 code to close the connection with when this error
    /// comes from a packet's payload: frame errors give FRAME_ENCODING_ERROR
    /// (RFC 9000 §12.4), transport parameter errors TRANSPORT_PARAMETER_ERROR
    /// (RFC 9000 §7.4), everything else PROTOCOL_VIOLATION.
    pub fn error_code(&self) -> TransportErrorCode {
        match self {
            DecodeError::UnknownFrameType(_) | DecodeError::MalformedFrame { .. } => {
                TransportErrorCode::FRAME_ENCODING_ERROR
            }
            DecodeError::InvalidTransportParameter(_) => {
                TransportErrorCode::TRANSPORT_PARAMETER_ERROR
            }
            _ => TransportErrorCode::PROTOCOL_VIOLATION,
        }
    }

    /// The offending frame type, for the Frame Type field of CONNECTION_CLOSE
    /// (RFC 9000 §19.19).
    pub fn frame_type(&self) -> Option<u64> {
        match *self {
            DecodeError::UnknownFrameType(ty) => Some(ty),
            DecodeError::MalformedFrame { frame_type, .. } => Some(frame_type),
            _ => None,
        }
    }

    /// A short reason for logs and the CONNECTION_CLOSE reason phrase.
    pub fn reason(&self) -> &'static str {
        match self {
            DecodeError::UnexpectedEnd => "unexpected end of input",
            DecodeError::InvalidValue(r)
            | DecodeError::InvalidTransportParameter(r)
            | DecodeError::InvalidHeader(r)
            | DecodeError::MalformedFrame { reason: r, .. } => r,
            DecodeError::UnknownFrameType(_) => "unknown frame type",
            DecodeError::UnsupportedVersion(_) => "unsupported version",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_crypto_codes() {
        assert_eq!(TransportErrorCode::crypto(0x2a), TransportErrorCode(0x12a));
        assert_eq!(TransportErrorCode(0x12a).crypto_alert(), Some(0x2a));
        assert_eq!(TransportErrorCode::NO_VIABLE_PATH.crypto_alert(), None);
        assert_eq!(
            TransportErrorCode::FLOW_CONTROL_ERROR.to_string(),
            "FLOW_CONTROL_ERROR(0x3)"
        );
        assert_eq!(TransportErrorCode(0x12a).to_string(), "CRYPTO_ERROR(0x12a)");
        assert_eq!(TransportErrorCode(0x999).to_string(), "0x999");
        assert_eq!(TransportErrorCode::NO_VIABLE_PATH.0, 0x10);
        assert_eq!(TransportErrorCode::AEAD_LIMIT_REACHED.0, 0xf);
    }

    #[test]
    fn decode_error_codes() {
        let frame = DecodeError::MalformedFrame {
            frame_type: 0x08,
            reason: "x",
        };
        assert_eq!(frame.error_code(), TransportErrorCode::FRAME_ENCODING_ERROR);
        assert_eq!(frame.frame_type(), Some(0x08));
        assert_eq!(
            DecodeError::UnknownFrameType(0x40).error_code(),
            TransportErrorCode::FRAME_ENCODING_ERROR
        );
        assert_eq!(
            DecodeError::InvalidTransportParameter("x").error_code(),
            TransportErrorCode::TRANSPORT_PARAMETER_ERROR
        );
        assert_eq!(
            DecodeError::UnexpectedEnd.error_code(),
            TransportErrorCode::PROTOCOL_VIOLATION
        );
        assert_eq!(DecodeError::UnexpectedEnd.frame_type(), None);
        assert_eq!(DecodeError::InvalidHeader("bad").reason(), "bad");
    }
}
