//! Scheme names (DESIGN.md: `quic`, `fixed:R`, `2n+1`, `or3`, `art`, ...)
//! to policy factories.

use std::sync::Arc;

use transport::policy::{PolicyFactory, QuicPolicy};

/// Every scheme name this build accepts, with a one-line description (for
/// `--help` and error messages).
pub const SCHEMES: &[(&str, &str)] = &[("quic", "plain QUIC: one retransmission per loss (RFC 9002)")];

/// An unknown or malformed scheme name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SchemeError(pub String);

/// The factory for a scheme name.
pub fn parse_scheme(name: &str) -> Result<Arc<dyn PolicyFactory>, SchemeError> {
    match name {
        "quic" => Ok(Arc::new(QuicPolicy)),
        other => {
            let names: Vec<&str> = SCHEMES.iter().map(|(n, _)| *n).collect();
            Err(SchemeError(format!("unknown recovery scheme '{other}' (available: {})", names.join(", "))))
        }
    }
}
