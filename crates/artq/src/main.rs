//! The `artq` command-line program.
fn main() {}
