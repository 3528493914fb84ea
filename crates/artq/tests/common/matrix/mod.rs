//! The interop-runner-style matrix: its cases, and how one case runs.
//!
//! Why this exists: the QUIC interop runner (quic-interop-runner) is how QUIC
//! stacks judge each other: a reference client downloads files from a server
//! over an emulated network, case by case, and the case passes when every
//! file arrived byte-exact and the traces show the behaviour the case is
//! about. This module is that matrix for `artq serve`, with quic-go's
//! unmodified interop client ([`super::quic_go_interop`]) and `artq link` as
//! the network. `interop_matrix.rs` runs every case against `artq serve`;
//! `harness_selfcheck/` runs the very same cases against quic-go's own
//! interop server, so a case that fails against artq fails because of artq.
//!
//! Each case is one [`Case`] value: what the client is asked to do (the
//! runner's test case name for each endpoint), the files (the runner's sizes
//! and counts, scaled where noted so the matrix takes a few minutes on a
//! 2-core machine), the network (none: loopback; else `artq link` options:
//! the runner's 10 Mbit/s, 15 ms each way, 25-packet queue, plus the case's
//! impairment), the checks beyond the files, and a deadline after which the
//! client is killed and the case fails. Every process of a case runs in the
//! case's own network namespace ([`super::netns`]).
//!
//! Extending the matrix: add a [`Case`] in `cases.rs` (and a [`Check`] if
//! the case's evidence is new), then one `#[test]` in `interop_matrix.rs`
//! and one in `harness_selfcheck/` unless its evidence is `artq serve`'s
//! own. A case the client or quic-go's server does not know fails with exit
//! code 127, never passes. A case quic-go's client cannot run names
//! aioquic's client ([`Client::Aioquic`]) and says why.

mod cases;

pub use cases::*;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use super::netns::NetNs;
use super::process::{self, ChildGuard};
use super::quic_go_interop::{ClientJail, ServerJail, SERVER_PORT};
use super::{capture, certs, compare_files, qlog, write_seeded_file, Scratch};

/// Set (to anything) to keep a failed case's scratch directory.
const KEEP_VAR: &str = "ARTQ_MATRIX_KEEP";

/// `artq serve --stats-json` file of a case, in its logs directory.
const SERVER_STATS: &str = "server-stats.json";

/// How long the server may take to write its `--stats-json` line once the
/// client is done (the connection must end first: idle timeout or close).
const SERVER_STATS_WAIT: Duration = Duration::from_secs(40);

/// How long a server may take to be ready.
const SERVER_READY: Duration = Duration::from_secs(30);

/// Which server a case runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServerUnderTest {
    /// This build's `artq serve`.
    Artq,
    /// quic-go's interop server (the harness self-check).
    QuicGo,
}

impl ServerUnderTest {
    fn name(self) -> &'static str {
        match self {
            ServerUnderTest::Artq => "artq serve",
            ServerUnderTest::QuicGo => "quic-go's interop server",
        }
    }
}

/// One served file: its name and size.
struct ServedFile {
    name: String,
    size: u64,
}

/// Runs `case` against `server`; panics with a full account when anything
/// fails, prints a one-line summary when it passes.
pub fn run(case: &Case, server: ServerUnderTest) {
    match run_case(case, server) {
        Ok(summary) => eprintln!("{}: {summary}", case.name),
        Err(report) => panic!(
            "interop case `{}` against {} failed:\n{report}",
            case.name,
            server.name()
        ),
    }
}

/// A seed per case, so each case's files differ and a failure reproduces.
fn case_seed(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The running pieces of a case, for failure messages.
struct Running {
    server: ChildGuard,
    server_jail: ServerJail,
    link: Option<ChildGuard>,
}

impl Running {
    fn describe(&mut self) -> String {
        let mut s = format!("server: {}", self.server.describe());
        let quic_go_log = self.server_jail.log_tail(15);
        if !quic_go_log.starts_with("<cannot read") {
            s += &format!("\nquic-go server log tail:\n{quic_go_log}");
        }
        if let Some(link) = &mut self.link {
            s += &format!("\nlink: {}", link.describe());
        }
        s
    }
}

/// Sets up, runs the client, checks; `Ok` is a summary, `Err` the report.
fn run_case(case: &Case, server: ServerUnderTest) -> Result<String, String> {
    let scratch = Scratch::new();
    let logs = scratch.logs();
    let ns = NetNs::new(&logs)?;
    // The client's directory first: the link's clock (blackhole windows)
    // starts with the link, and the client should start right after it.
    let client = ClientJail::new(&scratch.path().join("client"))?;
    let server_jail = ServerJail::new(&scratch.path().join("server"))?;
    let files = write_files(case, &server_jail.www())?;
    let (server_guard, server_addr) = start_server(case, server, &ns, &server_jail, &scratch)?;
    let mut running = Running {
        server: server_guard,
        server_jail,
        link: None,
    };
    let pcap = logs.join("link.pcap");
    let target = match case.link {
        None => server_addr,
        Some(options) => {
            let mut cmd = ns.command(super::artq_bin());
            cmd.args(["link", "--listen", "127.0.0.1:0", "--to"])
                .arg(server_addr.to_string())
                .args(options)
                .arg("--pcap")
                .arg(&pcap);
            let (link, addr) = process::spawn_listening(cmd, "artq-link", &logs, SERVER_READY)
                .map_err(|e| format!("{e}\n{}", running.describe()))?;
            running.link = Some(link);
            addr
        }
    };
    let urls: Vec<String> = files
        .iter()
        .map(|f| format!("https://{target}/{}", f.name))
        .collect();
    let started = Instant::now();
    let run = match case.client {
        Client::QuicGo => client.run(&ns, case.client_testcase, &urls, case.deadline),
        Client::Aioquic => run_aioquic(&ns, &files, &urls, &client, case.deadline),
    };
    let elapsed = started.elapsed();

    let mut problems = Vec::new();
    match &run {
        Err(e) => problems.push(format!("the client did not finish: {e}")),
        Ok(out) if out.status.code() == Some(127) => problems.push(format!(
            "the client does not know test case `{}`: {}",
            case.client_testcase,
            out.stdout.trim()
        )),
        Ok(out) if !out.status.success() => problems.push(format!(
            "the client exited with {} after {:.1} s: {}{}",
            out.status,
            out.elapsed.as_secs_f64(),
            out.stdout.trim(),
            out.stderr.trim()
        )),
        Ok(_) => {}
    }
    let (complete, file_problems) = check_files(&files, &running.server_jail.www(), &client);
    if complete < files.len() {
        problems.push(format!(
            "{complete} of {} files complete and byte-exact; {}",
            files.len(),
            file_problems.join("; ")
        ));
    }
    let connections = match case.client {
        Client::QuicGo => qlog::read_dir(&client.qlog_dir()).unwrap_or_else(|e| {
            problems.push(format!("cannot read the client's qlogs: {e}"));
            Vec::new()
        }),
        // aioquic's client writes no qlog.
        Client::Aioquic => Vec::new(),
    };
    let evidence_in = Evidence {
        connections: &connections,
        pcap: &pcap,
        server: server_addr,
        server_stats: &logs.join(SERVER_STATS),
        under_test: server,
    };
    let mut evidence = Vec::new();
    for check in case.checks {
        match check_one(check, case, &evidence_in) {
            Ok(Some(note)) => evidence.push(note),
            Ok(None) => {}
            Err(e) => problems.push(e),
        }
    }
    if problems.is_empty() {
        let mut summary = format!(
            "{} files byte-exact in {:.1} s over {} connection(s) against {}",
            files.len(),
            elapsed.as_secs_f64(),
            connections.len(),
            server.name()
        );
        for note in evidence {
            summary += "; ";
            summary += &note;
        }
        return Ok(summary);
    }
    let closes: Vec<String> = connections
        .iter()
        .rev()
        .take(3)
        .map(|c| {
            format!(
                "{}: {}",
                c.file,
                c.closed.as_deref().unwrap_or("no connection_closed event")
            )
        })
        .collect();
    let kept = if std::env::var_os(KEEP_VAR).is_some() {
        format!("kept the scratch directory: {}", scratch.keep().display())
    } else {
        format!(
            "set {KEEP_VAR}=1 to keep the scratch directory (qlogs, key log, the link's capture)"
        )
    };
    Err(format!(
        "- {}\n(after {:.1} s; {} client connection(s); how the last ended: {})\n\
         client log tail:\n{}\n{}\n{kept}",
        problems.join("\n- "),
        elapsed.as_secs_f64(),
        connections.len(),
        closes.join(" | "),
        client.log_tail(15),
        running.describe(),
    ))
}

/// Writes the case's seeded files into `www`.
fn write_files(case: &Case, www: &Path) -> Result<Vec<ServedFile>, String> {
    let seed = case_seed(case.name);
    let mut files = Vec::new();
    for &(count, size) in case.files {
        for _ in 0..count {
            let name = format!("f{:04}", files.len() + 1);
            let path = www.join(&name);
            write_seeded_file(&path, size, seed.wrapping_add(files.len() as u64))
                .map_err(|e| format!("writing {}: {e}", path.display()))?;
            files.push(ServedFile { name, size });
        }
    }
    Ok(files)
}

/// Starts the server under test in `ns`, serving `jail`'s `www`.
fn start_server(
    case: &Case,
    server: ServerUnderTest,
    ns: &NetNs,
    jail: &ServerJail,
    scratch: &Scratch,
) -> Result<(ChildGuard, SocketAddr), String> {
    if case.long_chain {
        let dir = scratch.path().join("chain");
        std::fs::create_dir(&dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
        let (cert, key) = certs::write_long_chain(&dir, 9)?;
        copy(&cert, &jail.cert())?;
        copy(&key, &jail.key())?;
    } else if server == ServerUnderTest::QuicGo {
        let cert = certs::TestCert::generate(scratch.path())?;
        copy(&cert.cert_pem, &jail.cert())?;
        copy(&cert.key_pem, &jail.key())?;
    }
    match server {
        ServerUnderTest::Artq => {
            let mut cmd: Command = ns.command(super::artq_bin());
            cmd.args(["serve", "--listen", "127.0.0.1:0", "--root"])
                .arg(jail.www());
            if case.long_chain {
                cmd.arg("--cert")
                    .arg(jail.cert())
                    .arg("--key")
                    .arg(jail.key());
            }
            cmd.arg("--stats-json")
                .arg(scratch.logs().join(SERVER_STATS));
            cmd.args(case.artq_args);
            process::spawn_listening(cmd, "artq-serve", &scratch.logs(), SERVER_READY)
        }
        ServerUnderTest::QuicGo => {
            let guard =
                jail.start_quic_go(ns, case.server_testcase, &scratch.logs(), SERVER_READY)?;
            Ok((guard, SocketAddr::from(([127, 0, 0, 1], SERVER_PORT))))
        }
    }
}

/// Copies a file, with both paths in the error.
fn copy(from: &Path, to: &Path) -> Result<(), String> {
    std::fs::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))
}

/// How many files arrived complete and byte-exact, and what is wrong with
/// the first few others.
fn check_files(files: &[ServedFile], www: &Path, client: &ClientJail) -> (usize, Vec<String>) {
    let mut complete = 0;
    let mut problems = Vec::new();
    for f in files {
        let got = client.download(&f.name);
        let result = match std::fs::metadata(&got) {
            Err(_) => Err(format!("{} ({} bytes) missing", f.name, f.size)),
            Ok(m) if m.len() != f.size => {
                Err(format!("{} has {} of {} bytes", f.name, m.len(), f.size))
            }
            Ok(_) => compare_files(&www.join(&f.name), &got),
        };
        match result {
            Ok(()) => complete += 1,
            Err(e) if problems.len() < 3 => problems.push(e),
            Err(_) => {}
        }
    }
    if files.len() - complete > problems.len() {
        problems.push(format!(
            "and {} more",
            files.len() - complete - problems.len()
        ));
    }
    (complete, problems)
}

/// The `--blackhole FROM-TO` window (ms) of a case's link options.
fn blackhole_window(case: &Case) -> Option<(Duration, Duration)> {
    let options = case.link?;
    let at = options.iter().position(|o| *o == "--blackhole")?;
    let (from, to) = options.get(at + 1)?.split_once('-')?;
    Some((
        Duration::from_millis(from.parse().ok()?),
        Duration::from_millis(to.parse().ok()?),
    ))
}

/// Checks one piece of evidence; `Ok(Some(note))` adds to the summary.
fn check_one(check: &Check, case: &Case, e: &Evidence<'_>) -> Result<Option<String>, String> {
    let (connections, pcap, server) = (e.connections, e.pcap, e.server);
    match *check {
        Check::Connections(n) if connections.len() == n => Ok(None),
        Check::Connections(n) => Err(format!(
            "expected {n} connection(s) (qlog files), the client made {}",
            connections.len()
        )),
        Check::NoRetry => match connections.iter().find(|c| c.retries_received > 0) {
            None => Ok(None),
            Some(c) => Err(format!("unexpected Retry on connection {}", c.file)),
        },
        Check::RetryReceived => {
            if connections.iter().any(|c| c.retries_received > 0) {
                Ok(Some("Retry received".into()))
            } else {
                Err("the client received no Retry".into())
            }
        }
        Check::KeyPhase1BothWays => {
            let sent: u64 = connections.iter().map(|c| c.sent_key_phase_1).sum();
            let received: u64 = connections.iter().map(|c| c.received_key_phase_1).sum();
            let all: u64 = connections.iter().map(|c| c.received_1rtt).sum();
            if sent > 0 && received > 0 {
                Ok(Some(format!(
                    "key phase 1: client sent {sent}, server sent {received} of {all} 1-RTT packets"
                )))
            } else {
                Err(format!(
                    "expected 1-RTT packets in key phase 1 from both sides: the client sent \
                     {sent}, the server {received} (of {all} 1-RTT packets it sent)"
                ))
            }
        }
        Check::MaxStreamsBidiAtMost(limit) => {
            let limits: Vec<Option<u64>> = connections
                .iter()
                .map(|c| c.peer_max_streams_bidi)
                .collect();
            match limits.as_slice() {
                [Some(n)] if *n <= limit => Ok(Some(format!("initial_max_streams_bidi {n}"))),
                [Some(n)] => Err(format!(
                    "the server's initial_max_streams_bidi is {n}, more than {limit}: the client \
                     never had to wait for MAX_STREAMS"
                )),
                _ => Err(format!(
                    "cannot tell the server's initial_max_streams_bidi from the client's qlogs \
                     ({limits:?})"
                )),
            }
        }
        Check::AmplificationLimit {
            min_handshake_bytes,
        } => {
            let records = capture::read_pcap(pcap)?;
            capture::check_amplification(&records, server, min_handshake_bytes).map(Some)
        }
        Check::SecondResumed => check_resumed(connections).map(Some),
        Check::ZeroRttSent => match connections {
            [a, b] if (a.sent_0rtt > 0) != (b.sent_0rtt > 0) => {
                let c = if a.sent_0rtt > 0 { a } else { b };
                if c.acked_0rtt == 0 {
                    return Err(format!(
                        "the server acknowledged none of the {} 0-RTT packets: early data \
                         rejected",
                        c.sent_0rtt
                    ));
                }
                Ok(Some(format!(
                    "{} 0-RTT packets sent on the resumed connection, {} acknowledged",
                    c.sent_0rtt, c.acked_0rtt
                )))
            }
            [a, b] => Err(format!(
                "expected 0-RTT packets on exactly one of the 2 connections: {} and {}",
                a.sent_0rtt, b.sent_0rtt
            )),
            _ => Err(format!(
                "expected 2 connections, the client made {}",
                connections.len()
            )),
        },
        Check::MovedToPreferredAddress => {
            let s = server_stats(e)?;
            let local = s["local"].as_str().unwrap_or("");
            let moved = local
                .parse::<SocketAddr>()
                .is_ok_and(|a| a.ip() != server.ip() || a.port() != server.port());
            if moved && s["path_changes"] == 1 {
                Ok(Some(format!(
                    "the connection moved from {server} to the preferred address {local}"
                )))
            } else {
                Err(format!(
                    "the connection did not end on the server's preferred address (it \
                     listens on {server}): {s}"
                ))
            }
        }
        Check::EcnValidated => {
            let s = server_stats(e)?;
            let marked = s["ecn_marked_sent"].as_u64().unwrap_or(0);
            if marked > 0 && s["ecn_validated"] == true {
                Ok(Some(format!(
                    "{marked} ECT(0) datagrams sent, validated by the client's ECN counts"
                )))
            } else {
                Err(format!(
                    "expected ECT(0)-marked datagrams validated by the client's ACK ECN \
                     counts: {s}"
                ))
            }
        }
        Check::OutageSpanned => {
            let (from, until) = blackhole_window(case)
                .ok_or_else(|| format!("case {} has no `--blackhole FROM-TO` option", case.name))?;
            let records = capture::read_pcap(pcap)?;
            capture::check_outage_spanned(&records, server, from, until).map(Some)
        }
    }
}

/// What a case's evidence is read from.
struct Evidence<'a> {
    /// The client's connections (its qlogs).
    connections: &'a [qlog::ConnectionLog],
    /// The link's capture.
    pcap: &'a Path,
    /// The server's address.
    server: SocketAddr,
    /// `artq serve --stats-json`.
    server_stats: &'a Path,
    under_test: ServerUnderTest,
}

/// The server's one `--stats-json` line, waiting for it a while (it is
/// written when the connection ends).
fn server_stats(e: &Evidence<'_>) -> Result<serde_json::Value, String> {
    if e.under_test != ServerUnderTest::Artq {
        return Err("this evidence comes from `artq serve --stats-json` only".into());
    }
    let until = Instant::now() + SERVER_STATS_WAIT;
    loop {
        let text = std::fs::read_to_string(e.server_stats).unwrap_or_default();
        if let Some(line) = text.lines().next() {
            return serde_json::from_str(line)
                .map_err(|err| format!("bad --stats-json line `{line}`: {err}"));
        }
        if Instant::now() >= until {
            return Err(format!(
                "the server wrote no --stats-json line to {} within {SERVER_STATS_WAIT:?}",
                e.server_stats.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Runs aioquic's client in `ns` on each URL in turn (one connection per
/// file), writing each body where the quic-go client would; the first
/// failure ends the run.
fn run_aioquic(
    ns: &NetNs,
    files: &[ServedFile],
    urls: &[String],
    client: &ClientJail,
    deadline: Duration,
) -> Result<process::RunOutput, String> {
    let end = Instant::now() + deadline;
    let mut last = None;
    for (f, url) in files.iter().zip(urls) {
        let left = end.saturating_duration_since(Instant::now());
        let out = client.download(&f.name);
        let run = super::aioquic_download_in(Some(ns), url, &out, left, &[])?;
        let ok = run.status.success();
        last = Some(run);
        if !ok {
            break;
        }
    }
    last.ok_or_else(|| "no file to download".into())
}

/// The runner's `resumption` evidence, from the client's qlogs (whose
/// order on disk is not the order the connections were made): of two
/// connections, one received a full handshake and the other a resumed one,
/// which carries no Certificate and no CertificateVerify (RFC 8446 §2.2),
/// so the server's Handshake CRYPTO data shrinks by at least 300 bytes
/// (the smallest certificate artq or quic-go presents is over 400).
pub fn check_resumed(connections: &[qlog::ConnectionLog]) -> Result<String, String> {
    let [a, b] = connections else {
        return Err(format!(
            "expected 2 connections to compare, the client made {}",
            connections.len()
        ));
    };
    let full = a.received_handshake_crypto.max(b.received_handshake_crypto);
    let resumed = a.received_handshake_crypto.min(b.received_handshake_crypto);
    if resumed > 0 && resumed + 300 <= full {
        Ok(format!(
            "one connection resumed: the server's Handshake CRYPTO data {resumed} bytes \
             against {full} in the full handshake"
        ))
    } else {
        Err(format!(
            "no connection resumed: the server's Handshake CRYPTO data was {resumed} and \
             {full} bytes (a resumed handshake sends no certificate)"
        ))
    }
}
