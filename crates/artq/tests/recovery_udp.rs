//! ART over real UDP (issue 4 acceptance): `artq serve --recovery art`
//! behind `artq link` (5% loss each way) serves an unmodified quinn client
//! byte-exact and its statistics show replicas being sent; and its n_max is
//! no higher than plain QUIC's on the same links. The comparison runs at 15%
//! loss: at 5% both schemes usually end at n_max = 2 and a single real-time
//! sample of each is a coin flip. At 15% the comparison uses 2 MB per run:
//! with 500 KB, ART reached n_max 4 on one seed in one CI run while QUIC's
//! three runs stopped at 3 (ART's rounds on that seed ranged 2-4 over
//! repeated runs). With 2 MB, two repeated runs measured QUIC n_max 3-4
//! (max 4 both times) and ART 2-3, with items needing ≥ 2 rounds at 91 and
//! 92 for QUIC against 44 and 41 for ART. Everything binds 127.0.0.1.
//!
//! `art+` (issue 14) is served the same way, at 5% loss, to quinn and to
//! aioquic (a second unmodified stack; it needs the interop venv that
//! `.ci/run` sets up, as `interop_aioquic.rs` does).

mod common;

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use common::{process, Scratch};

const SIZE: u64 = 2_000_000;
const SIZE_AT_5_PERCENT: u64 = 1_000_000;
const DEADLINE: Duration = Duration::from_secs(120);

/// Real-time transfers run one at a time: the tests of this file would
/// otherwise run theirs in parallel, two servers, two links and two quinn
/// clients on a 2-core machine, and scheduling delays are one more source of
/// spurious losses and rounds that no scheme controls.
static ONE_TRANSFER_AT_A_TIME: Mutex<()> = Mutex::new(());

/// (replicas, n_max, items delivered in round >= 2) from the server's
/// `--stats-json` summary of the connection.
fn recovery_figures(summary: &serde_json::Value) -> (u64, u64, u64) {
    let u = |key: &str| {
        summary[key]
            .as_u64()
            .unwrap_or_else(|| panic!("no {key} in {summary}"))
    };
    let hist = summary["n_hist"]
        .as_array()
        .unwrap_or_else(|| panic!("no n_hist in {summary}"));
    let later: u64 = hist
        .iter()
        .skip(2)
        .filter_map(serde_json::Value::as_u64)
        .sum();
    (u("replicas"), u("n_max"), later)
}

/// The unmodified client that downloads.
#[derive(Clone, Copy, Debug)]
enum Client {
    Quinn,
    Aioquic,
}

/// One download of `size` bytes by quinn through a link losing `loss` each
/// way; returns the server's stats.
fn run(scheme: &str, seed: u32, loss: &str, size: u64) -> (u64, u64, u64) {
    run_with(Client::Quinn, scheme, seed, loss, size)
}

/// One download of `size` bytes by `client` through a link losing `loss`
/// each way, checked byte-exact; returns the server's stats.
fn run_with(client: Client, scheme: &str, seed: u32, loss: &str, size: u64) -> (u64, u64, u64) {
    if let Client::Aioquic = client {
        // A missing venv is a setup problem, reported as such.
        common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    }
    // A panic in another test's transfer poisons the lock; the next transfer
    // still runs alone.
    let _alone = ONE_TRANSFER_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let scratch = Scratch::new();
    let file = scratch.served_file("file", size, 31);
    let (mut server, server_addr, stats) = common::spawn_artq_serve_with_stats(
        &scratch.root(),
        &scratch.logs(),
        &["--recovery", scheme],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let mut link_cmd = Command::new(common::artq_bin());
    link_cmd
        .args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server_addr.to_string())
        .args(["--bw", "20", "--rtt", "40", "--loss", loss, "--seed"])
        .arg(seed.to_string());
    let (mut link, link_addr) = process::spawn_listening(
        link_cmd,
        "artq-link",
        &scratch.logs(),
        Duration::from_secs(20),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("file");
    let mut context = || format!("link: {}\nserver: {}", link.describe(), server.describe());
    match client {
        Client::Quinn => {
            let rt = common::runtime();
            let fetched = common::quinn_download(&rt, link_addr, "/file", &out, DEADLINE)
                .unwrap_or_else(|e| panic!("{e}\n{}", context()));
            assert_eq!(fetched.bytes, size);
            common::compare_files(&file, &out).unwrap_or_else(|e| panic!("{e}"));
        }
        Client::Aioquic => {
            let url = format!("https://{link_addr}/file");
            let fetched = common::aioquic_download(&url, &out, DEADLINE)
                .unwrap_or_else(|e| panic!("{e}\n{}", context()));
            common::assert_downloaded(&fetched, "aioquic client", &context(), size, &file, &out);
        }
    }
    // The server reports the connection once the client's close reaches it.
    recovery_figures(&stats.first(&mut server))
}

#[test]
fn art_behind_a_5_percent_loss_link_serves_quinn_byte_exact() {
    let (replicas, n_max, _) = run("art", 7, "0.05", SIZE_AT_5_PERCENT);
    assert!(replicas > 0, "ART sent no replica at 5% loss");
    assert!(n_max >= 1);
}

/// `art+` (issue 14) behind the same link serves quinn byte-exact, and
/// its statistics show replicas.
#[test]
fn art_plus_behind_a_5_percent_loss_link_serves_quinn_byte_exact() {
    let (replicas, n_max, _) = run_with(Client::Quinn, "art+", 7, "0.05", SIZE_AT_5_PERCENT);
    assert!(replicas > 0, "art+ sent no replica at 5% loss");
    assert!(n_max >= 1);
}

/// `art+` serves aioquic, a second unmodified stack, byte-exact at 5% loss.
#[test]
fn art_plus_behind_a_5_percent_loss_link_serves_aioquic_byte_exact() {
    let (replicas, n_max, _) = run_with(Client::Aioquic, "art+", 7, "0.05", SIZE_AT_5_PERCENT);
    assert!(replicas > 0, "art+ sent no replica at 5% loss");
    assert!(n_max >= 1);
}

#[test]
fn art_needs_no_more_rounds_than_quic_on_the_same_links() {
    let mut quic = Vec::new();
    let mut art = Vec::new();
    for seed in [1, 2, 3] {
        quic.push(run("quic", seed, "0.15", SIZE));
        art.push(run("art", seed, "0.15", SIZE));
    }
    eprintln!("quic (replicas, n_max, items with n>=2): {quic:?}");
    eprintln!("art  (replicas, n_max, items with n>=2): {art:?}");
    assert!(
        art.iter().all(|r| r.0 > 0),
        "ART sent no replica at 5% loss"
    );
    let max_n = |v: &[(u64, u64, u64)]| v.iter().map(|r| r.1).max().unwrap_or(0);
    assert!(
        max_n(&art) <= max_n(&quic),
        "ART's n_max {} above QUIC's {}",
        max_n(&art),
        max_n(&quic)
    );
    let late = |v: &[(u64, u64, u64)]| v.iter().map(|r| r.2).sum::<u64>();
    assert!(
        late(&art) <= late(&quic),
        "ART needed more second rounds ({}) than QUIC ({})",
        late(&art),
        late(&quic)
    );
}

#[test]
fn recovery_figures_read_the_summary() {
    let summary = serde_json::json!({"replicas": 4, "n_max": 2, "n_hist": [0, 2, 1, 3]});
    assert_eq!(recovery_figures(&summary), (4, 2, 4));
}
