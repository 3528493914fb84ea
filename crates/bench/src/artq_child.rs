//! Driving the `artq` binary as child processes, through its output contract.
//!
//! Why here: the benchmark measures artq exactly as a user runs it (`artq serve`
//! and `artq get` as separate processes), and relies on the two lines the CLI
//! contract fixes (DESIGN.md, "Command line"):
//! - `artq serve --listen 127.0.0.1:0 ...` prints `listening on <ip:port>` as
//!   its first stdout line once bound;
//! - `artq get URL ...` prints `received N bytes in T s: G Mbit/s` to stderr.
//!
//! Every wait has a deadline and the server is killed when dropped.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};

/// How often deadline waits poll a child.
const POLL: Duration = Duration::from_millis(5);

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

/// A running `artq serve`, killed and reaped on drop.
pub struct ArtqServer {
    child: Child,
    stderr: File,
    /// The address from its `listening on` line.
    pub addr: SocketAddr,
}

impl ArtqServer {
    /// Everything the server wrote to stderr so far (lossy UTF-8).
    pub fn stderr(&mut self) -> String {
        read_all(&mut self.stderr)
    }
}

impl Drop for ArtqServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Parses `listening on <ip:port>`.
pub fn parse_listening_line(line: &str) -> Result<SocketAddr> {
    let rest = line
        .trim_end()
        .strip_prefix("listening on ")
        .ok_or_else(|| {
            anyhow!("expected `listening on <ip:port>` as the first stdout line, got {line:?}")
        })?;
    let addr: SocketAddr = rest
        .parse()
        .with_context(|| format!("bad address in {line:?}"))?;
    if addr.port() == 0 {
        bail!("ready line reports port 0: {line:?}");
    }
    Ok(addr)
}

/// Starts `artq serve --listen 127.0.0.1:0 --root <root> [extra]` and waits at
/// most `deadline` for its ready line.
pub fn spawn_serve(
    artq: &Path,
    root: &Path,
    extra: &[String],
    deadline: Duration,
) -> Result<ArtqServer> {
    let stderr = tempfile::tempfile().context("temp file for artq serve's stderr")?;
    let mut child = Command::new(artq)
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--root"])
        .arg(root)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr.try_clone().context("cloning a temp file handle")?)
        .spawn()
        .with_context(|| format!("spawning {} serve", artq.display()))?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow!("artq serve has no stdout pipe"))?;
    let mut server = ArtqServer {
        child,
        stderr,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
    };

    let (tx, rx) = mpsc::sync_channel::<io::Result<String>>(1);
    thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) => return,
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
        Ok(Err(e)) => bail!("reading artq serve's stdout: {e}"),
        Err(mpsc::RecvTimeoutError::Timeout) => {
            bail!(
                "artq serve printed no ready line within {deadline:?}; stderr:\n{}",
                server.stderr()
            )
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            thread::sleep(Duration::from_millis(200));
            let status = match server.child.try_wait() {
                Ok(Some(status)) => status.to_string(),
                _ => "closed its stdout".to_string(),
            };
            bail!(
                "artq serve ({status}) ended without printing `listening on <ip:port>`; stderr:\n{}",
                server.stderr()
            )
        }
    };
    server.addr = parse_listening_line(&line)?;
    Ok(server)
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
    let mut stderr = tempfile::tempfile().context("temp file for artq get's stderr")?;
    let start = Instant::now();
    let mut child = Command::new(artq)
        .arg("get")
        .arg(url)
        .args(["--insecure", "-o", "/dev/null"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr.try_clone().context("cloning a temp file handle")?)
        .spawn()
        .with_context(|| format!("spawning {} get", artq.display()))?;
    let status = loop {
        if let Some(status) = child.try_wait().context("waiting for artq get")? {
            break status;
        }
        if start.elapsed() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "artq get still running after {deadline:?}; killed it. stderr:\n{}",
                read_all(&mut stderr)
            );
        }
        thread::sleep(POLL);
    };
    let wall = start.elapsed();
    let text = read_all(&mut stderr);
    if !status.success() {
        bail!("artq get failed ({status}); stderr:\n{text}");
    }
    let (bytes, transfer) = parse_summary(&text).ok_or_else(|| {
        anyhow!("artq get printed no `received N bytes in T s: G Mbit/s` line; stderr:\n{text}")
    })?;
    Ok(GetRun {
        bytes,
        transfer,
        wall,
    })
}

/// Reads a temp file from its start (lossy UTF-8).
fn read_all(f: &mut File) -> String {
    let mut buf = Vec::new();
    if f.seek(SeekFrom::Start(0)).is_ok() {
        let _ = f.read_to_end(&mut buf);
    }
    String::from_utf8_lossy(&buf).into_owned()
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
    fn listening_line_is_parsed() {
        let addr = parse_listening_line("listening on 127.0.0.1:4433\n").expect("valid line");
        assert_eq!(addr, SocketAddr::from(([127, 0, 0, 1], 4433)));
        assert!(parse_listening_line("listening on 127.0.0.1:0").is_err());
        assert!(parse_listening_line("ready 127.0.0.1:4433").is_err());
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
