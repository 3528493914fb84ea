//! Scheme names (DESIGN.md) to recovery policy factories.

use std::sync::Arc;

use anyhow::{bail, Result};
use transport::policy::{PolicyFactory, QuicPolicy};

/// Schemes available in this build, for `--recovery help`.
pub const AVAILABLE: &[(&str, &str)] = &[("quic", "plain QUIC: one retransmission per loss (RFC 9002)")];

/// The factory for a scheme name.
pub fn factory(name: &str) -> Result<Arc<dyn PolicyFactory>> {
    match name {
        "quic" => Ok(Arc::new(QuicPolicy)),
        "help" | "list" => {
            let list: Vec<String> = AVAILABLE.iter().map(|(n, d)| format!("  {n:<10} {d}")).collect();
            bail!("available recovery schemes:\n{}", list.join("\n"))
        }
        other => {
            let names: Vec<&str> = AVAILABLE.iter().map(|(n, _)| *n).collect();
            bail!("unknown recovery scheme '{other}' (available: {})", names.join(", "))
        }
    }
}
