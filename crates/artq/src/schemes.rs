//! `--recovery` names to policy factories (the registry lives in the
//! recovery crate).

use std::sync::Arc;

use anyhow::{bail, Result};
use transport::policy::PolicyFactory;

/// The factory for a scheme name; `help` lists them.
pub fn factory(name: &str) -> Result<Arc<dyn PolicyFactory>> {
    if name == "help" || name == "list" {
        let list: Vec<String> = recovery::SCHEMES.iter().map(|(n, d)| format!("  {n:<12} {d}")).collect();
        bail!("available recovery schemes:\n{}", list.join("\n"));
    }
    Ok(recovery::parse_scheme(name)?)
}
