//! A load test of `artq serve --threads 2` (issue 24): 1000 connections,
//! 200 at a time from 4 client sockets, each fetching one small object with
//! quinn's hq-interop client. Every body must arrive byte-exact; the time
//! to first byte (from the start of the connection, handshake included) is
//! reported at p50 and p99; the server's resident memory must come back
//! near its baseline once the clients are gone. Bounded: at most 1000
//! connections and 180 s, then it stops by itself.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{quinn_hq, Scratch};

const CONNECTIONS: usize = 1000;
const AT_ONCE: usize = 200;
const OBJECT: u64 = 10_000;
const MIB: u64 = 1 << 20;
/// The client sockets' receive buffer: 50 handshakes at a time share one,
/// and with the default (about 208 KiB) the server's flights overflowed it
/// (hundreds of drops per run, all at the clients' sockets), so that the
/// p99 time to first byte was the clients' 1-s retransmission timer, not
/// the server.
const CLIENT_RECV_BUFFER: usize = 4 << 20;

/// The resident memory of process `pid`, bytes.
fn rss(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().strip_suffix("kB"))
                .and_then(|kb| kb.trim().parse::<u64>().ok())
        })
        .map(|kb| kb * 1024)
        .unwrap_or_else(|| panic!("no VmRSS for pid {pid}"))
}

/// One connection: connect, ask for /small, read it all. Returns the time
/// to the first body byte and the body.
async fn one(endpoint: quinn::Endpoint, server: SocketAddr) -> Result<(Duration, Vec<u8>), String> {
    let start = Instant::now();
    let conn = endpoint
        .connect(server, "localhost")
        .map_err(|e| format!("connect: {e}"))?
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| format!("open: {e}"))?;
    send.write_all(b"GET /small\r\n")
        .await
        .map_err(|e| format!("request: {e}"))?;
    send.finish().map_err(|e| format!("finish: {e}"))?;
    let mut body = Vec::new();
    let mut ttfb = None;
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| format!("read: {e}"))?
    {
        ttfb.get_or_insert_with(|| start.elapsed());
        body.extend_from_slice(&chunk.bytes);
        if body.len() as u64 > OBJECT {
            return Err("more bytes than the object has".into());
        }
    }
    conn.close(0u32.into(), b"done");
    Ok((ttfb.unwrap_or_else(|| start.elapsed()), body))
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

#[test]
fn a_thousand_connections_against_two_workers() {
    let scratch = Scratch::new();
    let object = scratch.served_file("small", OBJECT, 42);
    let expected = std::fs::read(&object).unwrap();
    let (mut server, addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--threads", "2", "--no-resumption"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pid = server.id();
    std::thread::sleep(Duration::from_millis(300));
    let baseline = rss(pid);
    let rt = common::runtime();
    let started = Instant::now();
    let results = rt.block_on(async {
        let endpoints: Vec<quinn::Endpoint> = (0..4)
            .map(|_| {
                quinn_hq::client_endpoint_with_recv_buffer(CLIENT_RECV_BUFFER)
                    .expect("client endpoint")
            })
            .collect();
        let limit = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
        let mut tasks = Vec::with_capacity(CONNECTIONS);
        for i in 0..CONNECTIONS {
            let permit = Arc::clone(&limit).acquire_owned().await.expect("semaphore");
            let endpoint = endpoints[i % endpoints.len()].clone();
            tasks.push(tokio::spawn(async move {
                let r = tokio::time::timeout(Duration::from_secs(60), one(endpoint, addr)).await;
                drop(permit);
                r.unwrap_or_else(|_| Err("no answer within 60 s".into()))
            }));
        }
        let mut results = Vec::with_capacity(CONNECTIONS);
        for t in tasks {
            results.push(t.await.unwrap_or_else(|e| Err(format!("task: {e}"))));
        }
        for e in &endpoints {
            tokio::time::timeout(Duration::from_secs(20), e.wait_idle())
                .await
                .ok();
        }
        results
    });
    let elapsed = started.elapsed();
    let peak = rss(pid);
    let mut ttfb = Vec::with_capacity(CONNECTIONS);
    let mut failures = Vec::new();
    for (i, r) in results.into_iter().enumerate() {
        match r {
            Ok((t, body)) if body == expected => ttfb.push(t),
            Ok((_, body)) => failures.push(format!("{i}: {} bytes, not the object", body.len())),
            Err(e) => failures.push(format!("{i}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {CONNECTIONS} connections failed, e.g. {:?}: {}",
        failures.len(),
        &failures[..failures.len().min(5)],
        server.describe()
    );
    ttfb.sort();
    let p50 = percentile(&ttfb, 0.5);
    let p99 = percentile(&ttfb, 0.99);
    eprintln!(
        "load: {CONNECTIONS} connections ({AT_ONCE} at once) in {:.1} s; time to first byte \
         p50 {:.1} ms, p99 {:.1} ms; server RSS baseline {} MiB, after the load {} MiB",
        elapsed.as_secs_f64(),
        p50.as_secs_f64() * 1e3,
        p99.as_secs_f64() * 1e3,
        baseline / MIB,
        peak / MIB,
    );
    // Closed connections drain for three PTOs; then the server forgets
    // them and hands the memory back (malloc_trim once none is left).
    let deadline = Instant::now() + Duration::from_secs(30);
    let target = baseline + 16 * MIB;
    let mut settled = rss(pid);
    while settled > target && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(250));
        settled = settled.min(rss(pid));
    }
    eprintln!("load: server RSS settled at {} MiB", settled / MIB);
    assert!(
        settled <= target,
        "the server kept {} MiB after the load (baseline {} MiB, peak {} MiB)",
        settled / MIB,
        baseline / MIB,
        peak / MIB
    );
    assert!(server.try_status().is_none(), "{}", server.describe());
}
