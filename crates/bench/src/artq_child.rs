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
//! benchmark needs: locating the binary and reading `artq get`'s summary.
//! Every wait has a deadline and the server is killed when dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use tempfile::TempDir;

use crate::process::{self, ChildGuard};

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
