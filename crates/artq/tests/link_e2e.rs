//! `artq get` through `artq link` to `artq serve`, over real UDP sockets on
//! 127.0.0.1 (issue 3 acceptance): the relay emulates 20 Mbit/s, 40 ms RTT
//! and 2% random loss each way in real time, and the download must still be
//! byte-exact.
//!
//! CLI contract relied on: `artq serve` and `artq link` each print
//! `listening on <ip:port>` as their first stdout line once bound; `artq get`
//! exits 0 after a complete download.

mod common;

use std::process::Command;
use std::time::Duration;

use common::{process, Scratch};

/// File size: ~800 packets, so 2% loss hits a few dozen of them.
const SIZE: u64 = 2_000_000;

/// Bound on the download through the lossy link (loss-limited to a few
/// Mbit/s, so a few seconds; generous for a loaded CI machine).
const GET_DEADLINE: Duration = Duration::from_secs(150);

#[test]
fn get_through_a_lossy_link_is_byte_exact() {
    let scratch = Scratch::new();
    let file = scratch.served_file("file", SIZE, 21);
    let (mut server, server_addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));

    let mut link_cmd = Command::new(common::artq_bin());
    link_cmd
        .args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server_addr.to_string())
        .args(["--bw", "20", "--rtt", "40", "--loss", "0.02", "--seed", "1"]);
    let (mut link, link_addr) = process::spawn_listening(
        link_cmd,
        "artq-link",
        &scratch.logs(),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        link_addr.ip().is_loopback(),
        "artq link reports {link_addr}"
    );

    let out = scratch.out("file");
    let mut get = Command::new(common::artq_bin());
    get.arg("get")
        .arg(format!("https://{link_addr}/file"))
        .args(["--insecure", "--timeout", "140", "-o"])
        .arg(&out);
    let result = process::run_with_deadline(get, GET_DEADLINE).unwrap_or_else(|e| {
        panic!(
            "{e}\nlink: {}\nserver: {}",
            link.describe(),
            server.describe()
        )
    });
    let context = format!("link: {}\nserver: {}", link.describe(), server.describe());
    common::assert_downloaded(&result, "artq get", &context, SIZE, &file, &out);
    // Both long-running children are still up: neither crashed on the way.
    assert!(
        server.try_status().is_none(),
        "server exited: {}",
        server.describe()
    );
    assert!(
        link.try_status().is_none(),
        "link exited: {}",
        link.describe()
    );
}
