//! `--recovery` names to policy factories (the registry lives in the
//! recovery crate).

use std::sync::Arc;

use anyhow::Result;
use transport::policy::PolicyFactory;

/// The factory for a scheme name. `help` (or `list`) prints the schemes
/// on stdout and ends the program successfully: it is what the user asked.
pub fn factory(name: &str) -> Result<Arc<dyn PolicyFactory>> {
    if name == "help" || name == "list" {
        println!("available recovery schemes:");
        for (n, d) in recovery::SCHEMES {
            println!("  {n:<12} {d}");
        }
        std::process::exit(0);
    }
    Ok(recovery::parse_scheme(name)?)
}
