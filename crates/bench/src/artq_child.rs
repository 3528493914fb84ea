//! Driving the `artq` binary as child processes, through its output contract.
//!
//! Why here: the benchmark measures artq exactly as a user runs it (`artq serve`
//! and `artq get` as separate processes), and relies on the two lines the CLI
//! contract fixes (DESIGN.md, "Command line"):
//! - `artq serve --listen 127.0.0.1:0 ...` prints `listening on <ip:port>` as
//!   its first stdout line once bound;
//! - `artq get URL ...` prints `received N bytes in T s: G Mbit/s` to stderr.
//!
//! Spawning, the ready line and the deadlines are [`crate::process`], the
//! artq tests' own child-process harness; this module adds what only the
//! benchmark needs: locating the binary, reading `artq get`'s summary, and
//! running several `artq get` at once ([`run_gets`]). Every wait has a
//! deadline and every child is killed when dropped or when a sibling fails.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

use crate::content::Verifier;
use crate::process::{self, ChildGuard};
use crate::Span;

/// The `artq` binary next to the running executable (`target/release/artq`
/// when the benchmark itself runs from `target/release`).
pub fn artq_next_to_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("locating the benchmark executable")?;
    let dir = exe
        .parent()
        .ok_or_else(|| anyhow!("{} has no parent directory", exe.display()))?;
    Ok(dir.join("artq"))
}

/// Fails with a clear message, saying how to build it, if `path` is not a file.
pub fn ensure_artq_exists(path: &Path) -> Result<()> {
    if path.is_file() {
        return Ok(());
    }
    bail!(
        "artq binary not found at {}: build it first with `cargo build --release -p artq` \
         (or pass its path with --artq PATH)",
        path.display()
    )
}

/// A running `artq serve`, killed and reaped on drop (by its
/// `ChildGuard`), then its stderr log directory removed.
pub struct ArtqServer {
    guard: ChildGuard,
    /// Holds `artq-serve.stderr`; declared after `guard` so it outlives the
    /// child.
    _logs: TempDir,
    /// The address from its `listening on` line.
    pub addr: SocketAddr,
}

impl ArtqServer {
    /// The last few KiB the server wrote to stderr (lossy UTF-8).
    pub fn stderr(&self) -> String {
        self.guard.stderr_tail()
    }

    /// The server's process id (for [`crate::proc_cpu`]).
    pub fn pid(&self) -> u32 {
        self.guard.id()
    }
}

/// Starts `artq serve --listen 127.0.0.1:0 --root <root> [extra]` and waits at
/// most `deadline` for its ready line.
pub fn spawn_serve(
    artq: &Path,
    root: &Path,
    extra: &[String],
    deadline: Duration,
) -> Result<ArtqServer> {
    let logs = tempfile::tempdir().context("temp dir for artq serve's stderr")?;
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let (guard, addr) = process::spawn_artq_serve(artq, root, logs.path(), &extra, deadline)
        .map_err(anyhow::Error::msg)?;
    Ok(ArtqServer {
        guard,
        _logs: logs,
        addr,
    })
}

/// The outcome of one `artq get`.
#[derive(Debug, Clone, Copy)]
pub struct GetRun {
    /// Bytes reported by its summary line.
    pub bytes: u64,
    /// Transfer time reported by its summary line.
    pub transfer: Duration,
    /// Wall time of the whole process (start-up and handshake included).
    pub wall: Duration,
}

/// Parses `received N bytes in T s: G Mbit/s` anywhere in `text` into (N, T).
pub fn parse_summary(text: &str) -> Option<(u64, Duration)> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("received ")?;
        let (n, rest) = rest.split_once(" bytes in ")?;
        let (secs, rest) = rest.split_once(" s: ")?;
        rest.strip_suffix(" Mbit/s")?.parse::<f64>().ok()?;
        let secs: f64 = secs.parse().ok()?;
        let secs = Duration::try_from_secs_f64(secs).ok()?;
        Some((n.parse().ok()?, secs))
    })
}

/// Runs `artq get <url> --insecure -o /dev/null [extra]`, killing it after
/// `deadline`; fails unless it exits 0 with a summary line.
pub fn run_get(artq: &Path, url: &str, extra: &[String], deadline: Duration) -> Result<GetRun> {
    let mut cmd = Command::new(artq);
    cmd.arg("get")
        .arg(url)
        .args(["--insecure", "-o", "/dev/null"])
        .args(extra);
    let out = process::run_with_deadline(cmd, deadline).map_err(anyhow::Error::msg)?;
    if !out.status.success() {
        bail!("artq get failed ({}); stderr:\n{}", out.status, out.stderr);
    }
    let (bytes, transfer) = parse_summary(&out.stderr).ok_or_else(|| {
        anyhow!(
            "artq get printed no `received N bytes in T s: G Mbit/s` line; stderr:\n{}",
            out.stderr
        )
    })?;
    Ok(GetRun {
        bytes,
        transfer,
        wall: out.elapsed,
    })
}

/// How often [`run_gets`] polls its children: the resolution of each
/// download's end time.
const GETS_POLL: Duration = Duration::from_millis(1);

/// How much of a failed `artq get`'s stderr goes into the error.
const GET_TAIL: usize = 4096;

/// One `artq get` of a concurrent batch.
#[derive(Debug, Clone, Copy)]
pub struct ConcurrentGet {
    /// Bytes reported by its summary line.
    pub bytes: u64,
    /// Transfer time reported by its summary line (request to last byte).
    pub transfer: Duration,
    /// When the benchmark saw the process exit (within the 1 ms it polls at).
    pub exited: Instant,
}

impl ConcurrentGet {
    /// The download's span, placed in time by its exit: the last byte at
    /// the exit and the request `transfer` before it. Each end is late by the
    /// client's close and exit (a few milliseconds, about the same for every
    /// client), so an aggregate over several spans is off by the difference
    /// of two such delays, not by their sum; for one download the span is
    /// exactly its reported transfer time.
    pub fn span(&self) -> Span {
        Span {
            bytes: self.bytes,
            request: self
                .exited
                .checked_sub(self.transfer)
                .unwrap_or(self.exited),
            last_byte: self.exited,
        }
    }
}

/// A started `artq get` of [`run_gets`].
struct RunningGet {
    child: Child,
    stderr: File,
    /// Compares stdout with the file under `--verify`; `None` otherwise.
    verifier: Option<JoinHandle<io::Result<u64>>>,
    exited: Option<(ExitStatus, Instant)>,
}

/// The children of one [`run_gets`]: any still running when this is dropped
/// (an error, a deadline, a panic) is killed and reaped.
struct Batch(Vec<RunningGet>);

impl Drop for Batch {
    fn drop(&mut self) {
        for get in &mut self.0 {
            if get.exited.is_none() {
                // Both results are irrelevant: it may have just exited.
                let _ = get.child.kill();
                let _ = get.child.wait();
            }
        }
    }
}

/// The last [`GET_TAIL`] bytes of a child's stderr file.
fn stderr_of(file: &mut File) -> String {
    let mut buf = Vec::new();
    if file.seek(SeekFrom::Start(0)).is_ok() {
        let _ = file.read_to_end(&mut buf);
    }
    let tail = buf.len().saturating_sub(GET_TAIL);
    String::from_utf8_lossy(buf.get(tail..).unwrap_or_default()).into_owned()
}

/// Runs `clients` copies of `artq get <url> --insecure [extra]` at once and
/// waits for all of them, at most `deadline` in all.
///
/// Without `verify` each writes its body to `/dev/null` (`-o /dev/null`, as
/// [`run_get`]); with `verify` each writes it to its stdout, a pipe whose
/// bytes a thread of this process compares with that file as they come
/// ([`Verifier`]). Fails, after killing the others, as soon as one exits
/// non-zero, without a summary line, or with a body that is not the file;
/// fails after killing all of them if any is still running at `deadline`.
pub fn run_gets(
    artq: &Path,
    url: &str,
    extra: &[String],
    clients: usize,
    verify: Option<&Path>,
    deadline: Duration,
) -> Result<Vec<ConcurrentGet>> {
    let start = Instant::now();
    let mut batch = Batch(Vec::with_capacity(clients));
    for _ in 0..clients {
        let stderr = tempfile::tempfile().context("temp file for artq get's stderr")?;
        let mut cmd = Command::new(artq);
        cmd.arg("get").arg(url).arg("--insecure");
        if verify.is_none() {
            cmd.args(["-o", "/dev/null"]);
        }
        cmd.args(extra)
            .stdin(Stdio::null())
            .stdout(if verify.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stderr(stderr.try_clone().context("cloning a temp file handle")?);
        let mut child = cmd
            .spawn()
            .with_context(|| format!("cannot spawn {cmd:?}"))?;
        let verifier = match (verify, child.stdout.take()) {
            (Some(path), Some(mut stdout)) => {
                let mut v = Verifier::open(path)
                    .with_context(|| format!("opening {} to verify", path.display()))?;
                Some(thread::spawn(move || {
                    io::copy(&mut stdout, &mut v)?;
                    v.finish()
                }))
            }
            _ => None,
        };
        batch.0.push(RunningGet {
            child,
            stderr,
            verifier,
            exited: None,
        });
    }

    loop {
        let mut running = 0;
        for (i, get) in batch.0.iter_mut().enumerate() {
            if get.exited.is_some() {
                continue;
            }
            match get.child.try_wait() {
                Ok(Some(status)) => {
                    get.exited = Some((status, Instant::now()));
                    if !status.success() {
                        bail!(
                            "artq get #{} of {clients} failed ({status}); stderr:\n{}",
                            i + 1,
                            stderr_of(&mut get.stderr)
                        );
                    }
                }
                Ok(None) => running += 1,
                Err(e) => bail!("waiting for artq get #{}: {e}", i + 1),
            }
        }
        if running == 0 {
            break;
        }
        if start.elapsed() >= deadline {
            let first = batch.0.iter_mut().position(|g| g.exited.is_none());
            let tail = first
                .and_then(|i| batch.0.get_mut(i))
                .map(|g| stderr_of(&mut g.stderr))
                .unwrap_or_default();
            bail!(
                "{running} of {clients} artq get still running after {deadline:?}; killed them. \
                 stderr of #{}:\n{tail}",
                first.map_or(0, |i| i + 1)
            );
        }
        thread::sleep(GETS_POLL);
    }

    let mut out = Vec::with_capacity(clients);
    for (i, get) in batch.0.iter_mut().enumerate() {
        let n = i + 1;
        let stderr = stderr_of(&mut get.stderr);
        if let Some(verifier) = get.verifier.take() {
            let verified = verifier
                .join()
                .map_err(|_| anyhow!("the verifier of artq get #{n} panicked"))?;
            verified.with_context(|| format!("artq get #{n}'s body is not the file"))?;
        }
        let (bytes, transfer) = parse_summary(&stderr).ok_or_else(|| {
            anyhow!(
                "artq get #{n} printed no `received N bytes in T s: G Mbit/s` line; \
                 stderr:\n{stderr}"
            )
        })?;
        let exited = get.exited.map_or(start, |(_, at)| at);
        out.push(ConcurrentGet {
            bytes,
            transfer,
            exited,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_line_is_parsed() {
        let text = "connecting\nreceived 20000000 bytes in 1.234 s: 129.6 Mbit/s\n";
        assert_eq!(
            parse_summary(text),
            Some((20_000_000, Duration::from_millis(1234)))
        );
        assert_eq!(parse_summary("received 5 bytes in -1 s: 1 Mbit/s"), None);
        assert_eq!(parse_summary("received 5 bytes in 1 s"), None);
        assert_eq!(parse_summary(""), None);
    }

    #[test]
    fn missing_binary_error_says_how_to_build_it() {
        let err = ensure_artq_exists(Path::new("/nonexistent/artq")).expect_err("missing binary");
        let msg = err.to_string();
        assert!(
            msg.contains("cargo build --release -p artq") && msg.contains("--artq"),
            "{msg}"
        );
    }

    #[test]
    fn failing_get_is_reported_with_its_number() {
        // `false` ignores its arguments and exits 1.
        let err = run_gets(
            Path::new("false"),
            "https://127.0.0.1:1/x",
            &[],
            3,
            None,
            Duration::from_secs(10),
        )
        .expect_err("`false` is not a client");
        let msg = err.to_string();
        assert!(msg.contains("of 3 failed"), "{msg}");
    }

    #[test]
    fn gets_past_the_deadline_are_killed() {
        // `sleep get URL ...` fails at once (bad arguments), so use a shell
        // script that ignores them and sleeps.
        let dir = tempfile::tempdir().expect("temp dir");
        let script = dir.path().join("slow");
        std::fs::write(&script, "#!/bin/sh\nexec sleep 30\n").expect("script");
        let mut perm = std::fs::metadata(&script).expect("stat").permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
        std::fs::set_permissions(&script, perm).expect("chmod");
        // A parallel test's fork can hold the script's write handle open for
        // a moment (ETXTBSY, "Text file busy"): retry the spawn then.
        let (err, elapsed) = (0..20)
            .find_map(|_| {
                let start = Instant::now();
                let err = run_gets(
                    &script,
                    "https://127.0.0.1:1/x",
                    &[],
                    2,
                    None,
                    Duration::from_millis(300),
                )
                .expect_err("deadline");
                if format!("{err:#}").contains("busy") {
                    thread::sleep(Duration::from_millis(50));
                    return None;
                }
                Some((err, start.elapsed()))
            })
            .expect("the script could be run");
        assert!(elapsed < Duration::from_secs(10), "was not killed");
        assert!(
            err.to_string().contains("2 of 2 artq get still running"),
            "{err}"
        );
    }

    #[test]
    fn serve_that_exits_early_is_reported() {
        let dir = tempfile::tempdir().expect("temp dir");
        // `false` ignores its arguments and exits 1 without output.
        let err = spawn_serve(Path::new("false"), dir.path(), &[], Duration::from_secs(10))
            .err()
            .expect("`false` is not a server");
        assert!(
            err.to_string().contains("without printing `listening on"),
            "{err}"
        );
    }
}
