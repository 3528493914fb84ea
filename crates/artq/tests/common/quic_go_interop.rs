//! quic-go's interop-runner endpoints, unmodified: the `client` and `server`
//! programs of `github.com/quic-go/quic-go/interop`, built by `.ci/run` from
//! the Go module proxy (`tests/interop/go` pins the release).
//!
//! Why this exists: the interop matrix (`interop_matrix.rs`) puts `artq
//! serve` in front of the client the QUIC interop runner uses for quic-go,
//! and the harness self-check runs the same client against quic-go's own
//! server, so that a failing matrix case is artq's fault, not the harness's.
//!
//! How the programs are driven (read from their v0.65.0 sources):
//! - Both take the test case from `$TESTCASE`, write their log to
//!   `/logs/log.txt` (they exit 1 if they cannot), the TLS key log to
//!   `$SSLKEYLOGFILE` and one qlog per connection to `$QLOGDIR`. Both exit
//!   127 on a test case they do not know.
//! - The client takes the URLs as arguments (the runner's `$REQUESTS`) and
//!   writes each response to `/downloads/<path>`; it exits 0 when every
//!   download ended, 1 with `Downloading files failed: ...` on stdout. It
//!   skips certificate verification. Cases: `handshake`, `transfer`, `retry`
//!   (plain downloads over one connection, all URLs at once), `keyupdate`
//!   (the same; its first key update after 100 packets, which is also
//!   quic-go's default), `chacha20` (offers only TLS_CHACHA20_POLY1305_SHA256),
//!   `multiconnect` (one connection per URL, one after another),
//!   `resumption`, `zerortt`, `versionnegotiation`, and `http3` (ALPN `h3`;
//!   every other case uses `hq-interop`).
//! - The server listens on `:443`, serves `/www` over hq-interop (`http3`:
//!   h3) with the certificate chain `/certs/cert.pem` and key
//!   `/certs/priv.key`. Cases: `handshake`, `transfer`, `multiconnect`,
//!   `resumption`, `zerortt`, `versionnegotiation`, `retry` (a Retry for
//!   every connection), `chacha20` and `http3`.
//!
//! Hence [`super::netns`]: each program runs in a chroot directory laid out
//! as the runner's container ([`ClientJail`], [`ServerJail`]) inside the
//! test's own network namespace.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::netns::{self, NetNs};
use super::process::{self, ChildGuard, RunOutput};
use super::workspace_root;

/// How to get both programs.
const BUILD_HINT: &str = "run `bash .ci/run` from the repository root once: it builds quic-go's \
    interop client and server from tests/interop/go into target/interop/ and exports \
    ARTQ_INTEROP_CLIENT and ARTQ_INTEROP_SERVER (by hand: `cd tests/interop/go && \
    CGO_ENABLED=0 go build -o ../../../target/interop/quic-go-interop-client \
    github.com/quic-go/quic-go/interop/client`, and the same for `.../interop/server` into \
    quic-go-interop-server)";

/// The port quic-go's interop server listens on.
pub const SERVER_PORT: u16 = 443;

/// Finds one of the two programs: `$<var>`, else `target/interop/<file>`.
fn binary(var: &str, file: &str) -> Result<PathBuf, String> {
    let bin = std::env::var_os(var)
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/interop").join(file));
    if !bin.is_file() {
        return Err(format!(
            "quic-go interop program not found at {}; {BUILD_HINT}",
            bin.display()
        ));
    }
    Ok(bin)
}

/// quic-go's interop client: `$ARTQ_INTEROP_CLIENT`, else
/// `<workspace>/target/interop/quic-go-interop-client`.
pub fn client_binary() -> Result<PathBuf, String> {
    binary("ARTQ_INTEROP_CLIENT", "quic-go-interop-client")
}

/// quic-go's interop server: `$ARTQ_INTEROP_SERVER`, else
/// `<workspace>/target/interop/quic-go-interop-server`.
pub fn server_binary() -> Result<PathBuf, String> {
    binary("ARTQ_INTEROP_SERVER", "quic-go-interop-server")
}

/// Makes `dir` and the given subdirectories.
fn make_dirs(dir: &Path, subs: &[&str]) -> Result<(), String> {
    for sub in subs {
        let d = dir.join(sub);
        std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
    }
    Ok(())
}

/// Sets the environment both programs read: the test case, the key log and
/// the qlog directory (paths inside the jail).
fn interop_env(cmd: &mut Command, testcase: &str) {
    cmd.env("TESTCASE", testcase)
        .env("SSLKEYLOGFILE", "/logs/keys.log")
        .env("QLOGDIR", "/logs/qlog");
}

/// The client's root directory: `/client`, `/logs`, `/downloads`.
pub struct ClientJail {
    dir: PathBuf,
}

impl ClientJail {
    /// Lays out `dir` (created) with the client program in it.
    pub fn new(dir: &Path) -> Result<ClientJail, String> {
        let bin = client_binary()?;
        make_dirs(dir, &["logs/qlog", "downloads"])?;
        netns::install_jail_binary(&bin, dir, "client")?;
        Ok(ClientJail {
            dir: dir.to_path_buf(),
        })
    }

    /// Where the client wrote the response for the URL path `/<name>`.
    pub fn download(&self, name: &str) -> PathBuf {
        self.dir.join("downloads").join(name)
    }

    /// The client's qlog directory (one `.sqlog` per connection).
    pub fn qlog_dir(&self) -> PathBuf {
        self.dir.join("logs/qlog")
    }

    /// The client's TLS key log (for Wireshark, with a capture of `artq link
    /// --pcap`).
    pub fn keylog(&self) -> PathBuf {
        self.dir.join("logs/keys.log")
    }

    /// The last lines of the client's `/logs/log.txt`, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.dir.join("logs/log.txt"), lines)
    }

    /// Runs the client in `ns` with `TESTCASE=testcase` on `urls`, killed
    /// after `deadline`.
    pub fn run(
        &self,
        ns: &NetNs,
        testcase: &str,
        urls: &[String],
        deadline: Duration,
    ) -> Result<RunOutput, String> {
        let mut cmd = ns.jailed_command(&self.dir, "client");
        interop_env(&mut cmd, testcase);
        cmd.args(urls);
        process::run_with_deadline(cmd, deadline)
    }
}

/// The server's root directory, laid out as the runner's container:
/// `/server`, `/certs/cert.pem` + `/certs/priv.key`, `/www`, `/logs`.
/// `artq serve` serves the same `www` (not jailed), so both servers of a
/// case serve the same files.
pub struct ServerJail {
    dir: PathBuf,
}

impl ServerJail {
    /// Creates `dir` with empty `www`, `certs` and `logs`.
    pub fn new(dir: &Path) -> Result<ServerJail, String> {
        make_dirs(dir, &["www", "certs", "logs/qlog"])?;
        Ok(ServerJail {
            dir: dir.to_path_buf(),
        })
    }

    /// The served directory.
    pub fn www(&self) -> PathBuf {
        self.dir.join("www")
    }

    /// The certificate chain (PEM, leaf first).
    pub fn cert(&self) -> PathBuf {
        self.dir.join("certs/cert.pem")
    }

    /// The leaf's private key (PEM).
    pub fn key(&self) -> PathBuf {
        self.dir.join("certs/priv.key")
    }

    /// Starts quic-go's interop server with `TESTCASE=testcase` in `ns` and
    /// waits (at most `deadline`) until it has bound UDP port 443. Its
    /// stdout and stderr go to `<log_dir>/quic-go-server.log`.
    pub fn start_quic_go(
        &self,
        ns: &NetNs,
        testcase: &str,
        log_dir: &Path,
        deadline: Duration,
    ) -> Result<ChildGuard, String> {
        netns::install_jail_binary(&server_binary()?, &self.dir, "server")?;
        let mut cmd = ns.jailed_command(&self.dir, "server");
        interop_env(&mut cmd, testcase);
        let mut server = process::spawn_guarded(cmd, "quic-go-server", log_dir)?;
        let until = Instant::now() + deadline;
        loop {
            if let Some(status) = server.try_status() {
                return Err(format!(
                    "quic-go's interop server exited with {status} before binding port \
                     {SERVER_PORT}: {}\nits log: {}",
                    server.stderr_tail().trim(),
                    self.log_tail(20)
                ));
            }
            if netns::udp_port_bound(server.id(), SERVER_PORT) {
                return Ok(server);
            }
            if Instant::now() >= until {
                return Err(format!(
                    "quic-go's interop server did not bind port {SERVER_PORT} within \
                     {deadline:?}: {}",
                    server.describe()
                ));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The last lines of quic-go's server log (`/logs/log.txt`).
    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.dir.join("logs/log.txt"), lines)
    }
}

/// The last `n` lines of a text file, or a note that it cannot be read.
fn tail_lines(path: &Path, n: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(n)..].join("\n")
        }
        Err(e) => format!("<cannot read {}: {e}>", path.display()),
    }
}
