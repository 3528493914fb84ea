//! `--recovery` names to schemes (the registry lives in the recovery
//! crate).

use anyhow::Result;
use recovery::Scheme;

/// The scheme for a name. `help` (or `list`) prints the schemes
/// on stdout and ends the program successfully: it is what the user asked.
pub fn scheme(name: &str) -> Result<Scheme> {
    if name == "help" || name == "list" {
        println!("available recovery schemes:");
        for row in recovery::SCHEMES {
            println!("  {:<12} {}", row.name, row.help);
        }
        std::process::exit(0);
    }
    Ok(recovery::parse_scheme(name)?)
}
