//! Interop of `artq serve` with aioquic, a second independent QUIC stack.
//!
//! Why this exists: passing against quinn alone could hide a bug both Rust
//! stacks share (same rustls, same habits). aioquic is Python with its own TLS
//! 1.3 and QUIC code, so a 5 MB byte-exact download from `artq serve` through
//! `tests/interop/aioquic_client.py` is a stronger claim that the receiver really
//! is unmodified and standard. The script is validated against quinn in
//! `harness_selfcheck/`.
//!
//! Needs the venv python with aioquic (`$ARTQ_PYTHON`, default
//! `<workspace>/.venv/bin/python`); `.ci/run` creates it. Without it the test
//! fails and says so: it never passes silently.

mod common;

use std::time::Duration;

use common::Scratch;

/// Size of the transfer (the brief's 5 MB; aioquic is pure Python and slower).
const SIZE: u64 = 5_000_000;

/// The aioquic client downloads 5 MB from `artq serve`, byte-exact.
#[test]
fn aioquic_client_downloads_5mb_from_artq_serve() {
    // Check the python first: a missing venv is a setup problem to report as such.
    common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 21);
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let url = format!("https://{addr}/file");
    let run = common::aioquic_download(&url, &out, Duration::from_secs(120))
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "aioquic client", &context, SIZE, &file, &out);
}
