//! Errors that end a connection.

use wire::TransportErrorCode;

/// A connection error detected locally: becomes a CONNECTION_CLOSE frame
/// carrying `code`, the offending `frame_type` (if any) and a short reason.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {reason}")]
pub struct TransportError {
    /// RFC 9000 §20.1 code sent to the peer.
    pub code: TransportErrorCode,
    /// The frame type that triggered the error, when one did.
    pub frame_type: Option<u64>,
    /// Human-readable reason, also sent to the peer.
    pub reason: &'static str,
}

impl TransportError {
    /// An error with the given code and reason.
    pub const fn new(code: TransportErrorCode, reason: &'static str) -> Self {
        TransportError {
            code,
            frame_type: None,
            reason,
        }
    }

    /// Attach the frame type that caused the error.
    pub fn with_frame(mut self, frame_type: u64) -> Self {
        self.frame_type = Some(frame_type);
        self
    }

    /// PROTOCOL_VIOLATION with a reason.
    pub const fn protocol_violation(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::PROTOCOL_VIOLATION, reason)
    }

    /// FLOW_CONTROL_ERROR with a reason.
    pub const fn flow_control(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::FLOW_CONTROL_ERROR, reason)
    }

    /// STREAM_STATE_ERROR with a reason.
    pub const fn stream_state(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::STREAM_STATE_ERROR, reason)
    }

    /// STREAM_LIMIT_ERROR with a reason.
    pub const fn stream_limit(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::STREAM_LIMIT_ERROR, reason)
    }

    /// FINAL_SIZE_ERROR with a reason.
    pub const fn final_size(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::FINAL_SIZE_ERROR, reason)
    }

    /// FRAME_ENCODING_ERROR with a reason.
    pub const fn frame_encoding(reason: &'static str) -> Self {
        Self::new(TransportErrorCode::FRAME_ENCODING_ERROR, reason)
    }
}
