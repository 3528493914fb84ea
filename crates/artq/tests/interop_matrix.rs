//! The interop-runner-style matrix against `artq serve`: quic-go's unmodified
//! interop client (`github.com/quic-go/quic-go/interop/client`, the client
//! the QUIC interop runner uses for quic-go) downloads the runner's files
//! from `artq serve`, over loopback or through `artq link`, case by case.
//!
//! Why this exists: a loss-recovery server must be the last thing to break
//! on a lossy path (issue 15). These are the runner's cases, which every
//! reference stack passes: each passes here only when every file arrived
//! byte-exact and the case's evidence holds (handshake count, Retry, key
//! phases, stream limit, amplification limit, the outage inside the
//! transfer). The cases are in `common/matrix/cases.rs`, how they run in
//! `common/matrix/mod.rs`; `harness_selfcheck/` runs the same cases
//! against quic-go's own interop server, so a failure here is artq's (not
//! `connectionmigration` and `ecn`, whose evidence is `artq serve`'s own
//! `--stats-json`).
//!
//! Needs the quic-go interop client and server that `.ci/run` builds into
//! `target/interop/` (`$ARTQ_INTEROP_CLIENT`, `$ARTQ_INTEROP_SERVER`), and
//! root or unprivileged user namespaces (each case runs in its own network
//! namespace). Without them every case fails and says how to get them.
//!
//! CLI contract relied on: `artq serve --listen 127.0.0.1:0 --root DIR
//! [--cert F --key F] [--retry] [--stats-json F] [--preferred-address A]
//! [--0rtt] [--threads N]` prints `listening on <ip:port>` first and serves hq-interop; `artq link --listen 127.0.0.1:0 --to ADDR [link
//! options] --pcap FILE` prints `listening on <ip:port>` and records the
//! server's side of the link.

mod common;

use common::matrix::{self, ServerUnderTest::Artq};

/// One connection, one 1 KB file.
#[test]
fn handshake() {
    matrix::run(&matrix::HANDSHAKE, Artq);
}

/// 2, 3 and 5 MB at once over one connection.
#[test]
fn transfer() {
    matrix::run(&matrix::TRANSFER, Artq);
}

/// 1999 small files over one connection, with a stream limit of at most 1000.
#[test]
fn multiplexing() {
    matrix::run(&matrix::MULTIPLEXING, Artq);
}

/// A client that offers only ChaCha20-Poly1305.
#[test]
fn chacha20() {
    matrix::run(&matrix::CHACHA20, Artq);
}

/// The client updates its keys; the server must follow.
#[test]
fn keyupdate() {
    matrix::run(&matrix::KEYUPDATE, Artq);
}

/// `artq serve --retry` sends a Retry; the connection then completes.
#[test]
fn retry() {
    matrix::run(&matrix::RETRY, Artq);
}

/// 50 handshakes through 30% loss each way.
#[test]
fn handshakeloss() {
    matrix::run(&matrix::HANDSHAKELOSS, Artq);
}

/// 2 MB through 2% loss each way.
#[test]
fn transferloss() {
    matrix::run(&matrix::TRANSFERLOSS, Artq);
}

/// 50 handshakes through 30% header-aimed corruption each way.
#[test]
fn handshakecorruption() {
    matrix::run(&matrix::HANDSHAKECORRUPTION, Artq);
}

/// 2 MB through 2% header-aimed corruption each way.
#[test]
fn transfercorruption() {
    matrix::run(&matrix::TRANSFERCORRUPTION, Artq);
}

/// 5 MB across a 2-second outage of the link.
#[test]
fn blackhole() {
    matrix::run(&matrix::BLACKHOLE, Artq);
}

/// The server obeys the 3x amplification limit with a 9-certificate chain.
#[test]
fn amplificationlimit() {
    matrix::run(&matrix::AMPLIFICATIONLIMIT, Artq);
}

/// The client's key update after the server saw corrupted copies of its
/// packets.
#[test]
fn keyupdate_after_corruption() {
    matrix::run(&matrix::KEYUPDATE_AFTER_CORRUPTION, Artq);
}

/// A NAT gives the client a new port every second; the server follows.
#[test]
fn rebind_port() {
    matrix::run(&matrix::REBIND_PORT, Artq);
}

/// A NAT gives the client a new address every second; the server
/// validates each path and follows.
#[test]
fn rebind_addr() {
    matrix::run(&matrix::REBIND_ADDR, Artq);
}

/// A second connection resumes the first one's TLS session (`artq serve
/// --resumption`).
#[test]
fn resumption() {
    matrix::run(&matrix::RESUMPTION, Artq);
}

/// A second connection resumes and sends its requests in 0-RTT; the
/// server reads and answers them.
#[test]
fn zerortt() {
    matrix::run(&matrix::ZERORTT, Artq);
}

/// `artq serve --preferred-address` offers a second address; the client
/// moves there after the handshake and the download finishes there.
/// aioquic's client runs this case: quic-go's interop client does not know
/// it (quic-go's client never follows a preferred address).
#[test]
fn connectionmigration() {
    matrix::run(&matrix::CONNECTIONMIGRATION, Artq);
}

/// `artq serve --ecn` marks ECT(0); quic-go's client (its `transfer` test
/// case: it does not know the name `ecn`, but uses ECN on every connection)
/// reports ECN counts that validate the marks.
#[test]
fn ecn() {
    matrix::run(&matrix::ECN, Artq);
}

/// QUIC v2 by compatible version negotiation (RFC 9368, RFC 9369 §4): the
/// client's first flight is v1 and offers v2; `artq serve` (v1 and v2 by
/// default) answers in v2, and the download completes in v2, byte-exact.
///
/// The runner's `v2` case with aioquic's client, not quic-go's: quic-go's
/// interop client (v0.65.0, interop/client/main.go) knows no `v2` test case
/// and exits 127 ("unsupported"), and quic-go does not implement compatible
/// version negotiation. aioquic's client offers v2 exactly as its example
/// client's `--negotiate-v2` does (tests/interop/client_cli.py). Evidence
/// of v2 on both sides: the client reports the version it ended in, and
/// `artq serve`'s `--stats-json` summary names the connection's version.
#[test]
fn v2() {
    common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let scratch = common::Scratch::new();
    let size = 1_000_000;
    let file = scratch.served_file("v2file", size, 16);
    let (mut server, addr, stats) =
        common::spawn_artq_serve_with_stats(&scratch.root(), &scratch.logs(), &[])
            .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("v2file");
    let url = format!("https://{addr}/v2file");
    let run = common::aioquic_download_with(
        &url,
        &out,
        std::time::Duration::from_secs(60),
        &["--negotiate-v2"],
    )
    .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    let context = format!("server: {}", server.describe());
    common::assert_downloaded(&run, "aioquic client", &context, size, &file, &out);
    assert!(
        run.stderr.contains("quic version: 0x6b3343cf"),
        "the client did not end in v2:\n{}\n{context}",
        run.stderr
    );
    let summary = stats.first(&mut server);
    assert_eq!(
        summary["quic_version"], "v2",
        "the server did not run v2: {summary}"
    );
}
