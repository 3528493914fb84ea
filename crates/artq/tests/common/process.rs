//! Child processes with deadlines.
//!
//! Why this exists: interop tests drive real programs (`artq serve`, `artq get`,
//! the aioquic client). A peer that hangs must fail the test, not hang CI, and a
//! server must not outlive its test. Every wait here has a deadline, every
//! spawned server is owned by a `ChildGuard` that kills it on drop, and output
//! goes to files (never a pipe nobody drains) so a chatty child cannot block.
//!
//! The benchmark crate (`crates/bench`) compiles this file by path to drive
//! `artq serve` and `artq get` the same way, so it must depend on nothing but
//! std and `tempfile` (no `super::`).

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// How often a deadline wait polls the child (fine enough for the
/// benchmark's wall-time measurement of `artq get`).
const POLL: Duration = Duration::from_millis(5);

/// How much of a child's stderr goes into an error message.
const TAIL_BYTES: u64 = 4096;

/// A running child that is killed and reaped when dropped.
///
/// Why: a test that panics half-way must not leave a server bound to a port
/// (or a CPU-burning peer) behind.
pub struct ChildGuard {
    child: Child,
    name: String,
    stderr_log: PathBuf,
}

impl ChildGuard {
    /// The child's OS process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The last few KiB of the child's stderr, for failure messages.
    pub fn stderr_tail(&self) -> String {
        tail_of(&self.stderr_log)
    }

    /// The exit status if the child has already exited.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// A one-line description for assertion messages: name, pid, stderr tail.
    pub fn describe(&mut self) -> String {
        let state = match self.try_status() {
            Some(s) => format!("exited with {s}"),
            None => "still running".to_string(),
        };
        format!(
            "{} (pid {}, {state}); stderr tail:\n{}",
            self.name,
            self.id(),
            self.stderr_tail()
        )
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        // Already-exited children make kill() fail; both results are irrelevant here.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The last [`TAIL_BYTES`] of a log file, lossily decoded.
fn tail_of(path: &Path) -> String {
    let Ok(mut f) = File::open(path) else {
        return String::from("<no stderr log>");
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL_BYTES)));
    let mut buf = Vec::new();
    let _ = f.read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Parses the server's ready line, `listening on <ip:port>` (the CLI contract).
pub fn parse_listening_line(line: &str) -> Result<SocketAddr, String> {
    let addr = line
        .trim_end_matches(['\r', '\n'])
        .strip_prefix("listening on ")
        .ok_or_else(|| {
            format!("expected first stdout line `listening on <ip:port>`, got {line:?}")
        })?;
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| format!("bad address in ready line {line:?}: {e}"))?;
    if addr.port() == 0 {
        return Err(format!("ready line reports port 0: {line:?}"));
    }
    Ok(addr)
}

/// Spawns a server that announces its bound address as its first stdout line.
///
/// Waits at most `deadline` for `listening on <ip:port>`; stderr goes to
/// `<log_dir>/<name>.stderr`. The rest of stdout is drained in the background so
/// the server never blocks on a full pipe. Fails with the child's status and
/// stderr if it exits, stays silent, or prints anything else first.
pub fn spawn_listening(
    mut cmd: Command,
    name: &str,
    log_dir: &Path,
    deadline: Duration,
) -> Result<(ChildGuard, SocketAddr), String> {
    let stderr_log = log_dir.join(format!("{name}.stderr"));
    let stderr =
        File::create(&stderr_log).map_err(|e| format!("create {}: {e}", stderr_log.display()))?;
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr);
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {name} ({cmd:?}): {e}"))?;
    let stdout = child
        .stdout
        .take()
        .expect("stdout was set to piped just above");
    let mut guard = ChildGuard {
        child,
        name: name.to_string(),
        stderr_log,
    };

    let (tx, rx) = mpsc::sync_channel::<io::Result<String>>(1);
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return, // EOF: dropping tx tells the waiter.
            Ok(_) => {
                let _ = tx.send(Ok(line));
            }
            Err(e) => {
                let _ = tx.send(Err(e));
                return;
            }
        }
        let _ = io::copy(&mut reader, &mut io::sink());
    });

    let line = match rx.recv_timeout(deadline) {
        Ok(Ok(line)) => line,
        Ok(Err(e)) => return Err(format!("reading stdout of {}: {e}", guard.describe())),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            return Err(format!(
                "{name} printed no `listening on <ip:port>` line within {deadline:?}: {}",
                guard.describe()
            ))
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // stdout closed: the child is exiting; give it a moment for a status.
            let until = Instant::now() + Duration::from_secs(2);
            while guard.try_status().is_none() && Instant::now() < until {
                thread::sleep(POLL);
            }
            return Err(format!(
                "{name} closed stdout without printing `listening on <ip:port>`: {}",
                guard.describe()
            ));
        }
    };
    let addr = parse_listening_line(&line).map_err(|e| format!("{e}; {}", guard.describe()))?;
    Ok((guard, addr))
}

/// Spawns a long-running child that announces nothing (a server that does not
/// print its address, a namespace holder), owned by a `ChildGuard`.
///
/// stdout and stderr both go to `<log_dir>/<name>.log` (some programs report
/// their errors on stdout), which [`ChildGuard::describe`] shows.
pub fn spawn_guarded(mut cmd: Command, name: &str, log_dir: &Path) -> Result<ChildGuard, String> {
    let log = log_dir.join(format!("{name}.log"));
    let out = File::create(&log).map_err(|e| format!("create {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("clone {}: {e}", log.display()))?;
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {name} ({cmd:?}): {e}"))?;
    Ok(ChildGuard {
        child,
        name: name.to_string(),
        stderr_log: log,
    })
}

/// Spawns `<artq> serve --listen 127.0.0.1:0 --root <root> [extra...]` and
/// returns it with the address it bound, waiting at most `deadline` for it.
pub fn spawn_artq_serve(
    artq: &Path,
    root: &Path,
    log_dir: &Path,
    extra: &[&str],
    deadline: Duration,
) -> Result<(ChildGuard, SocketAddr), String> {
    let mut cmd = Command::new(artq);
    cmd.arg("serve")
        .args(["--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra);
    let (guard, addr) = spawn_listening(cmd, "artq-serve", log_dir, deadline)?;
    if !addr.ip().is_loopback() {
        return Err(format!(
            "artq serve was asked for 127.0.0.1 but reports {addr}"
        ));
    }
    Ok((guard, addr))
}

/// What a finished child left behind.
#[derive(Debug)]
pub struct RunOutput {
    /// Exit status.
    pub status: ExitStatus,
    /// Everything it wrote to stdout (lossy UTF-8).
    pub stdout: String,
    /// Everything it wrote to stderr (lossy UTF-8).
    pub stderr: String,
    /// Wall time from spawn to exit.
    pub elapsed: Duration,
}

/// Runs `cmd` to completion, killing it if it is still running after `deadline`.
///
/// stdout and stderr go to anonymous temp files, so output volume cannot
/// deadlock the child. A timeout is an `Err` that includes the child's stderr.
pub fn run_with_deadline(mut cmd: Command, deadline: Duration) -> Result<RunOutput, String> {
    let mut out = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let mut err = tempfile::tempfile().map_err(|e| format!("temp file: {e}"))?;
    let (out_w, err_w) = match (out.try_clone(), err.try_clone()) {
        (Ok(o), Ok(e)) => (o, e),
        (Err(e), _) | (_, Err(e)) => return Err(format!("clone temp file: {e}")),
    };
    cmd.stdin(Stdio::null()).stdout(out_w).stderr(err_w);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot spawn {cmd:?}: {e}"))?;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = read_back(&mut err);
                return Err(format!(
                    "{cmd:?} still running after {deadline:?}; killed it. stderr:\n{stderr}"
                ));
            }
            Ok(None) => thread::sleep(POLL),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("waiting for {cmd:?}: {e}"));
            }
        }
    };
    let elapsed = start.elapsed();
    Ok(RunOutput {
        status,
        stdout: read_back(&mut out),
        stderr: read_back(&mut err),
        elapsed,
    })
}

/// Reads a temp file from its start (lossy UTF-8).
fn read_back(f: &mut File) -> String {
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(0)).is_ok() {
        let _ = f.read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
}
