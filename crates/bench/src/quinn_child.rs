//! The quinn reference of the loopback benchmark: its server as a child
//! process, its clients as concurrent threads of the benchmark's process.
//!
//! Why a child process: `artq serve` runs as its own process, so its CPU time
//! can be read from `/proc/<pid>/stat` and its threads are its own. Running
//! the quinn server ([`crate::quinn_hq`], the interop tests' peer) the same
//! way makes both measurements alike: the server's CPU time per megabyte is
//! read the same way for both, and the server's runtime has exactly the
//! worker threads it is given (`--threads`), never the clients' as well.
//!
//! The child is the benchmark's own executable run with the hidden flag
//! [`SERVE_FLAG`] (so no second binary has to be built and found); it prints
//! `listening on <ip:port>` like `artq serve`, so [`crate::process`] starts it
//! and reads its ready line, and it exits when killed or when its parent is
//! gone (it polls its parent pid), so it never outlives the benchmark.

use std::future::{poll_fn, Future};
use std::io::{self, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::pin;
use std::process::Command;
use std::task::Poll;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use tempfile::TempDir;
use tokio::sync::watch;

use crate::content::Verifier;
use crate::process::{self, ChildGuard};
use crate::{quinn_hq, Span};

/// The hidden command-line flag that makes the benchmark executable run as a
/// quinn server child: `<exe> --internal-quinn-serve ROOT --threads M`.
pub const SERVE_FLAG: &str = "--internal-quinn-serve";

/// How often the child checks that its parent is still there.
const PARENT_POLL: Duration = Duration::from_millis(250);

/// A tokio runtime with `threads` workers: a current-thread runtime for one
/// (everything on the thread that calls `block_on`, like a single-threaded
/// event loop: no work-stealing hand-offs), a multi-thread one otherwise.
pub fn runtime(threads: usize) -> io::Result<tokio::runtime::Runtime> {
    let mut builder = if threads <= 1 {
        tokio::runtime::Builder::new_current_thread()
    } else {
        let mut b = tokio::runtime::Builder::new_multi_thread();
        b.worker_threads(threads);
        b
    };
    builder.enable_all().build()
}

/// The child's side: serves the files under `root` over hq-interop on
/// 127.0.0.1:0 with a runtime of `threads` workers (see [`runtime`]), prints
/// `listening on <ip:port>`, and serves until killed or until its parent
/// process exits.
pub fn serve_until_parent_exits(root: PathBuf, threads: usize) -> Result<()> {
    let rt = runtime(threads).context("building the quinn server's tokio runtime")?;
    rt.block_on(async move {
        let server = quinn_hq::spawn_server(root).map_err(|e| anyhow!(e))?;
        let mut out = io::stdout().lock();
        writeln!(out, "listening on {}", server.addr).context("writing the ready line")?;
        out.flush().context("writing the ready line")?;
        drop(out);
        let parent = std::os::unix::process::parent_id();
        while std::os::unix::process::parent_id() == parent {
            tokio::time::sleep(PARENT_POLL).await;
        }
        drop(server);
        Ok(())
    })
}

/// A running quinn server child, killed and reaped on drop.
pub struct QuinnServer {
    guard: ChildGuard,
    /// Holds the child's stderr log; declared after `guard` so it outlives it.
    _logs: TempDir,
    /// The address from its `listening on` line.
    pub addr: SocketAddr,
}

impl QuinnServer {
    /// The child's process id (for [`crate::proc_cpu`]).
    pub fn pid(&self) -> u32 {
        self.guard.id()
    }

    /// The last few KiB the child wrote to stderr.
    pub fn stderr(&self) -> String {
        self.guard.stderr_tail()
    }
}

/// Starts `<exe> --internal-quinn-serve <root> --threads <threads>` and waits
/// at most `deadline` for its ready line.
pub fn spawn_server(
    exe: &Path,
    root: &Path,
    threads: usize,
    deadline: Duration,
) -> Result<QuinnServer> {
    let logs = tempfile::tempdir().context("temp dir for the quinn server's stderr")?;
    let mut cmd = Command::new(exe);
    cmd.arg(SERVE_FLAG)
        .arg(root)
        .args(["--threads", &threads.to_string()]);
    let (guard, addr) = process::spawn_listening(cmd, "quinn-serve", logs.path(), deadline)
        .map_err(anyhow::Error::msg)?;
    Ok(QuinnServer {
        guard,
        _logs: logs,
        addr,
    })
}

/// Downloads `/file` from `server` with `clients` quinn clients at once,
/// each on its own endpoint (its own UDP socket) and connection, and each on
/// its own thread with a current-thread runtime: the same shape as the
/// `clients` single-threaded `artq get` processes of the artq side. With
/// `verify`, every body is compared byte for byte with that file as it
/// arrives; without, only sizes are known. When a client fails the others are
/// cancelled; a client not finished within `deadline` fails.
pub fn download_concurrently(
    server: SocketAddr,
    clients: usize,
    verify: Option<&Path>,
    deadline: Duration,
) -> Result<Vec<Span>> {
    let (cancel_tx, cancel_rx) = watch::channel(false);
    let cancel_tx = &cancel_tx;
    let results: Vec<Result<Span>> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..clients)
            .map(|i| {
                let cancel = cancel_rx.clone();
                scope.spawn(move || {
                    let r = client_thread(server, verify, deadline, cancel)
                        .with_context(|| format!("quinn client #{} of {clients}", i + 1));
                    if r.is_err() {
                        // No receiver left is fine: everyone has finished.
                        let _ = cancel_tx.send(true);
                    }
                    r
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| {
                t.join()
                    .unwrap_or_else(|_| Err(anyhow!("a quinn client thread panicked")))
            })
            .collect()
    });
    // Report the failure that caused the cancellations, not a cancellation.
    let mut spans = Vec::with_capacity(clients);
    let mut cancelled = None;
    for r in results {
        match r {
            Ok(span) => spans.push(span),
            Err(e) if e.root_cause().is::<Cancelled>() => cancelled = Some(e),
            Err(e) => return Err(e),
        }
    }
    match cancelled {
        Some(e) => Err(e),
        None => Ok(spans),
    }
}

/// The error of a client stopped because another one failed.
#[derive(Debug, thiserror::Error)]
#[error("cancelled: another quinn client failed")]
struct Cancelled;

/// One client's thread: its runtime, its download, its deadline, and the
/// cancellation by a failed sibling.
fn client_thread(
    server: SocketAddr,
    verify: Option<&Path>,
    deadline: Duration,
    mut cancel: watch::Receiver<bool>,
) -> Result<Span> {
    let rt = runtime(1).context("building a quinn client's tokio runtime")?;
    rt.block_on(async {
        let mut work = pin!(tokio::time::timeout(deadline, one_download(server, verify)));
        let mut cancelled = pin!(cancel.wait_for(|c| *c));
        poll_fn(|cx| {
            if let Poll::Ready(done) = work.as_mut().poll(cx) {
                return Poll::Ready(match done {
                    Ok(r) => r,
                    Err(_) => Err(anyhow!("not finished within {deadline:?}")),
                });
            }
            match cancelled.as_mut().poll(cx) {
                Poll::Ready(_) => Poll::Ready(Err(Cancelled.into())),
                Poll::Pending => Poll::Pending,
            }
        })
        .await
    })
}

/// One client: connect, fetch `/file` (into a [`Verifier`] or nowhere),
/// close.
async fn one_download(server: SocketAddr, verify: Option<&Path>) -> Result<Span> {
    let endpoint = quinn_hq::client_endpoint().map_err(|e| anyhow!(e))?;
    let conn = endpoint
        .connect(server, "localhost")
        .map_err(|e| anyhow!(e))?
        .await
        .context("quinn handshake")?;
    let mut verifier = verify.map(Verifier::open).transpose()?;
    let mut sink = io::sink();
    let sink: &mut dyn Write = match &mut verifier {
        Some(v) => v,
        None => &mut sink,
    };
    let fetched = quinn_hq::fetch_on(&conn, "/file", sink).await;
    let last_byte = Instant::now();
    conn.close(quinn::VarInt::from_u32(0), b"done");
    let fetched = fetched.map_err(|e| anyhow!(e))?;
    if let Some(v) = verifier {
        v.finish().context("quinn body")?;
    }
    let _ = tokio::time::timeout(Duration::from_secs(5), endpoint.wait_idle()).await;
    Ok(Span {
        bytes: fetched.bytes,
        request: last_byte.checked_sub(fetched.transfer).unwrap_or(last_byte),
        last_byte,
    })
}
