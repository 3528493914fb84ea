//! artq-recovery: the papers' sender-side loss recovery schemes as policies
//! behind the transport's [`RecoveryPolicy`](transport::policy::RecoveryPolicy)
//! seam, and a registry from the command-line names of DESIGN.md to
//! factories.
#![warn(missing_docs)]

pub mod registry;

pub use registry::{parse_scheme, SchemeError, SCHEMES};
