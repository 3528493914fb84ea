//! Issue 15, bug 6: real endpoints draw their identifiers from the OS RNG.
//! Two fresh `artq serve` processes choose different connection IDs and
//! stateless reset tokens, and `artq get` uses fresh connection IDs on every
//! run. With the same `--seed` (meant for tests) both are reproducible.
//!
//! Observed as a peer or an on-path observer would: the Source Connection
//! ID of a server's first Initial, the connection IDs and reset tokens the
//! server issues (its qlog's `connectivity:connection_id_updated` events),
//! and the header of `artq get`'s first datagram.

mod common;

use std::collections::BTreeSet;
use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::Scratch;
use transport::crypto::ServerVerification;
use wire::packet::{self, ProtectedHeader};

/// The long header's (DCID, SCID) of `d`, as hex strings.
fn long_cids(d: &[u8]) -> Option<(String, String)> {
    match packet::decode_protected(d, 8).ok()? {
        ProtectedHeader::Long {
            dst_cid, src_cid, ..
        } => Some((hex(&dst_cid), hex(&src_cid))),
        _ => None,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The SCID `server` chooses for a client: the first Initial of a client
/// endpoint with a fixed seed goes out, the answer's header is read.
fn server_scid(server: SocketAddr) -> String {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut client = transport::Endpoint::new(transport::EndpointConfig::client(11));
    let tls = transport::crypto::client_config(ServerVerification::Insecure, &[b"hq-interop"])
        .expect("client TLS config");
    let config = transport::ClientConfig {
        tls,
        transport: std::sync::Arc::new(transport::TransportConfig::default()),
        server_name: "localhost".into(),
    };
    client
        .connect(wire::time::Instant::ZERO, &config, server)
        .expect("connect");
    let mut buf = Vec::new();
    let t = client
        .poll_transmit(wire::time::Instant::ZERO, &mut buf)
        .expect("first flight");
    let mut answer = [0u8; 2048];
    for _ in 0..6 {
        sock.send_to(&buf[..t.size], server).expect("send");
        if let Ok((n, _)) = sock.recv_from(&mut answer) {
            if let Some((_, scid)) = long_cids(&answer[..n]) {
                return scid;
            }
        }
    }
    panic!("no answer from {server}");
}

/// `(cid, reset token)` pairs a server's qlog says it issued. Files still
/// being written may end in a partial record, which is skipped.
fn issued(qlog_dir: &std::path::Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir(qlog_dir) else {
        return out;
    };
    for entry in dir.flatten() {
        let Ok(text) = std::fs::read_to_string(entry.path()) else {
            continue;
        };
        for record in text.split('\x1e').filter(|r| !r.trim().is_empty()) {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(record.trim()) else {
                continue;
            };
            if v["name"] == "connectivity:connection_id_updated" {
                let d = &v["data"];
                out.push((
                    d["new"].as_str().unwrap_or_default().to_string(),
                    d["stateless_reset_token"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                ));
            }
        }
    }
    out
}

/// A running `artq serve` with a qlog directory.
struct Server {
    scratch: Scratch,
    guard: common::process::ChildGuard,
    addr: SocketAddr,
}

/// Starts `artq serve --qlog DIR` with `extra` flags.
fn start_server(extra: &[&str]) -> Server {
    let scratch = Scratch::new();
    scratch.served_file("f", 1000, 1);
    let qlog = scratch.path().join("qlog");
    let qlog_arg = qlog.to_str().expect("utf-8 temp path").to_string();
    let mut args = vec!["--qlog", qlog_arg.as_str()];
    args.extend_from_slice(extra);
    let (guard, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &args)
        .unwrap_or_else(|e| panic!("{e}"));
    Server {
        scratch,
        guard,
        addr,
    }
}

/// The connection IDs and reset tokens `server` issued to an `artq get`
/// that downloaded a file, from its qlog.
fn issued_to_a_client(server: &mut Server) -> Vec<(String, String)> {
    let out = server.scratch.out("f");
    let mut cmd = Command::new(common::artq_bin());
    cmd.arg("get")
        .arg(format!("https://{}/f", server.addr))
        .args([
            "--insecure",
            "--alpn",
            "hq-interop",
            "--timeout",
            "30",
            "-o",
        ])
        .arg(&out);
    let run = common::process::run_with_deadline(cmd, Duration::from_secs(40))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        run.status.success(),
        "artq get: {}\n{}",
        run.stderr,
        server.guard.describe()
    );
    // The connection's qlog is flushed once the server forgot it: wait
    // until it shows issued IDs and stops changing.
    let qlog = server.scratch.path().join("qlog");
    let start = std::time::Instant::now();
    let mut last = Vec::new();
    loop {
        let ids = issued(&qlog);
        if !ids.is_empty() && ids == last {
            return ids;
        }
        last = ids;
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "no issued connection IDs in the qlog: {}",
            server.guard.describe()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn fresh_servers_issue_unrelated_connection_ids_and_reset_tokens() {
    let mut a = start_server(&[]);
    let mut b = start_server(&[]);
    assert_ne!(
        server_scid(a.addr),
        server_scid(b.addr),
        "two fresh servers chose the same SCID for the same client"
    );
    let ids_a = issued_to_a_client(&mut a);
    let ids_b = issued_to_a_client(&mut b);
    let cids = |v: &[(String, String)]| v.iter().map(|p| p.0.clone()).collect::<BTreeSet<_>>();
    let tokens = |v: &[(String, String)]| v.iter().map(|p| p.1.clone()).collect::<BTreeSet<_>>();
    assert!(
        cids(&ids_a).is_disjoint(&cids(&ids_b)),
        "{ids_a:?} {ids_b:?}"
    );
    assert!(
        tokens(&ids_a).is_disjoint(&tokens(&ids_b)),
        "{ids_a:?} {ids_b:?}"
    );
    assert!(ids_a
        .iter()
        .all(|(_, t)| t.len() == 32 && t != &"0".repeat(32)));

    // --seed makes them reproducible (for tests only). One worker: each
    // worker draws from its own seed derived from --seed, and which worker
    // a client reaches is the kernel's choice.
    let mut a = start_server(&["--seed", "5", "--threads", "1"]);
    let mut b = start_server(&["--seed", "5", "--threads", "1"]);
    assert_eq!(server_scid(a.addr), server_scid(b.addr));
    assert_eq!(issued_to_a_client(&mut a), issued_to_a_client(&mut b));
}

/// The (DCID, SCID) of the first datagram of one `artq get` run with
/// `extra` flags, caught by a socket standing in for the server.
fn get_first_cids(extra: &[&str]) -> (String, String) {
    let sock = UdpSocket::bind("127.0.0.1:0").expect("bind");
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let mut child = Command::new(common::artq_bin())
        .arg("get")
        .arg(format!("https://{addr}/x"))
        .args(["--insecure", "--timeout", "5", "-o", "/dev/null"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn artq get");
    let mut buf = [0u8; 2048];
    let got = sock.recv_from(&mut buf);
    let _ = child.kill();
    let _ = child.wait();
    let (n, _) = got.expect("artq get sent nothing");
    long_cids(&buf[..n]).expect("a long header")
}

#[test]
fn artq_get_uses_fresh_connection_ids_every_run() {
    let a = get_first_cids(&[]);
    let b = get_first_cids(&[]);
    assert_ne!(a.0, b.0, "the same Destination Connection ID twice");
    assert_ne!(a.1, b.1, "the same Source Connection ID twice");
    // --seed makes them reproducible (for tests only).
    assert_eq!(
        get_first_cids(&["--seed", "3"]),
        get_first_cids(&["--seed", "3"])
    );
}
