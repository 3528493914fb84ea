//! Shared pieces of the interop harness.
//!
//! Why this exists: the interop tests (`interop_quinn.rs`, `interop_aioquic.rs`,
//! `interop_h3.rs`) and the harness self-check (`harness_selfcheck/`) all need the same
//! scaffolding: seeded test files, byte-exact comparison, child processes that
//! are killed when a test ends, and independent QUIC peers. Keeping it here
//! means a failure in an interop test is about artq, not about a copy of the
//! scaffolding that drifted.
//!
//! - [`process`]: child processes with deadlines (`artq serve`, `artq get`, python);
//!   also compiled into the benchmark crate by path.
//! - [`quinn_hq`]: an hq-interop server and client on quinn's public API.
//! - [`quinn_h3`]: an HTTP/3 file server on quinn + h3, the HTTP/3 reference.
//! - [`h3_peers`]: the HTTP/3 clients (aioquic, quic-go, Chromium, `artq get
//!   --alpn h3`) as child processes, and the browser's digest page.
//! - [`certs`]: a certificate written as PEM and its SPKI hash for Chromium;
//!   the interop runner's long certificate chain.
//! - [`matrix`]: the interop-runner-style matrix's cases and how one runs,
//!   with [`quic_go_interop`] (quic-go's interop client and server),
//!   [`netns`] (a network namespace per case, chroot jails), [`qlog`] (what
//!   the client's qlogs say) and [`capture`] (`artq link --pcap` captures).
//! - the edge (`artq serve --upstream`): [`nginx`] (a real HTTP/1.1 origin
//!   whose access log counts what reached it), [`ffmpeg`] (a real live
//!   encoder serving HTTP-FLV or MPEG-TS) and [`edge`] (the many-URL HTTP/3
//!   fetcher and the Chromium live player with mpegts.js).
//! - this module: test content, file comparison, locating binaries and python.

// Each test binary compiles this module and uses a different subset of it.
#![allow(dead_code)]

pub mod capture;
pub mod certs;
pub mod edge;
pub mod ffmpeg;
pub mod h3_peers;
pub mod matrix;
pub mod netns;
pub mod nginx;
pub mod process;
pub mod qlog;
pub mod quic_go_interop;
pub mod quinn_h3;
pub mod quinn_hq;

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rand::RngCore;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// Chunk size for generating, reading and comparing files (64 KiB).
pub const CHUNK: usize = 64 * 1024;

/// The `artq` binary built by cargo for this test run.
pub fn artq_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_artq"))
}

/// Spawns this test run's `artq serve --listen 127.0.0.1:0 --root <root>
/// [extra...]` (see [`process::spawn_artq_serve`]), allowing it 20 s to bind.
pub fn spawn_artq_serve(
    root: &Path,
    log_dir: &Path,
    extra: &[&str],
) -> Result<(process::ChildGuard, SocketAddr), String> {
    process::spawn_artq_serve(&artq_bin(), root, log_dir, extra, Duration::from_secs(20))
}

/// `artq serve --stats-json FILE`: one JSON object per finished connection
/// (`artq serve`'s `ConnectionSummary`), which tests read instead of
/// scraping the human-readable line on stderr.
pub struct ServeStats {
    path: PathBuf,
}

impl ServeStats {
    /// The connections that ended so far, in order.
    pub fn ended(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.path)
            .unwrap_or_default()
            .lines()
            .map(|l| {
                serde_json::from_str(l).unwrap_or_else(|e| panic!("bad --stats-json line {l}: {e}"))
            })
            .collect()
    }

    /// The first connection's summary, waiting up to 40 s for it to end
    /// (its line is written then); fails naming `server`.
    pub fn first(&self, server: &mut process::ChildGuard) -> serde_json::Value {
        let start = std::time::Instant::now();
        loop {
            if let Some(v) = self.ended().into_iter().next() {
                return v;
            }
            assert!(
                start.elapsed() < Duration::from_secs(40),
                "no --stats-json line in {}: {}",
                self.path.display(),
                server.describe()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// [`spawn_artq_serve`] with `--stats-json` into `log_dir`.
pub fn spawn_artq_serve_with_stats(
    root: &Path,
    log_dir: &Path,
    extra: &[&str],
) -> Result<(process::ChildGuard, SocketAddr, ServeStats), String> {
    let path = log_dir.join("serve-stats.jsonl");
    let arg = path.to_string_lossy().into_owned();
    let args: Vec<&str> = extra
        .iter()
        .copied()
        .chain(["--stats-json", &arg])
        .collect();
    let (server, addr) = spawn_artq_serve(root, log_dir, &args)?;
    Ok((server, addr, ServeStats { path }))
}

/// The workspace root (two levels above this crate's manifest).
pub fn workspace_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("crates/artq has a grandparent: the workspace root")
}

/// Finds the program `name` in `$PATH`.
pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Writes `size` bytes from ChaCha8 seeded with `seed` to `path`.
///
/// Random content (not zeros or a counter) makes any misplaced, duplicated or
/// dropped chunk visible to a byte-exact comparison; the seed makes a failing
/// case reproducible.
pub fn write_seeded_file(path: &Path, size: u64, seed: u64) -> io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = BufWriter::new(File::create(path)?);
    let mut buf = vec![0u8; CHUNK];
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
        rng.fill_bytes(&mut buf[..n]);
        out.write_all(&buf[..n])?;
        left -= n as u64;
    }
    out.into_inner()
        .map_err(io::IntoInnerError::into_error)?
        .sync_all()
}

/// Checks that `actual` has exactly the bytes of `expected`.
///
/// On mismatch the error names the first differing offset (or the sizes), which
/// tells a truncated transfer from a corrupted one at a glance.
pub fn compare_files(expected: &Path, actual: &Path) -> Result<(), String> {
    let open = |p: &Path| File::open(p).map_err(|e| format!("cannot open {}: {e}", p.display()));
    let (mut a, mut b) = (open(expected)?, open(actual)?);
    let len = |f: &File, p: &Path| {
        f.metadata()
            .map(|m| m.len())
            .map_err(|e| format!("cannot stat {}: {e}", p.display()))
    };
    let (len_a, len_b) = (len(&a, expected)?, len(&b, actual)?);
    let mut buf_a = vec![0u8; CHUNK];
    let mut buf_b = vec![0u8; CHUNK];
    let mut offset: u64 = 0;
    loop {
        let n_a = read_full(&mut a, &mut buf_a)
            .map_err(|e| format!("read {}: {e}", expected.display()))?;
        let n_b =
            read_full(&mut b, &mut buf_b).map_err(|e| format!("read {}: {e}", actual.display()))?;
        let common = n_a.min(n_b);
        if let Some(i) = buf_a[..common]
            .iter()
            .zip(&buf_b[..common])
            .position(|(x, y)| x != y)
        {
            return Err(format!(
                "{} differs from {} at byte {} (sizes {len_b} and {len_a})",
                actual.display(),
                expected.display(),
                offset + i as u64
            ));
        }
        if n_a != n_b {
            return Err(format!(
                "{} has {len_b} bytes, expected {len_a} (identical up to byte {})",
                actual.display(),
                offset + common as u64
            ));
        }
        if n_a == 0 {
            return Ok(());
        }
        offset += n_a as u64;
    }
}

/// Reads until `buf` is full or EOF; returns how many bytes were read.
fn read_full(f: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match f.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The python that has aioquic: `$ARTQ_PYTHON`, else `<workspace>/.venv/bin/python`.
///
/// Fails (never skips) when it is missing, so an interop gap cannot hide as a
/// green run: `.ci/run` creates the venv and exports `ARTQ_PYTHON`.
pub fn interop_python() -> Result<PathBuf, String> {
    let python = std::env::var_os("ARTQ_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join(".venv/bin/python"));
    let hint = "run `.ci/run` from the repository root once: it creates .venv with aioquic \
                (tests/interop/requirements.txt) and exports ARTQ_PYTHON";
    if !python.exists() {
        return Err(format!(
            "python for the aioquic peer not found at {}; {hint}",
            python.display()
        ));
    }
    let mut check = Command::new(&python);
    check.args(["-c", "import aioquic"]);
    let out = process::run_with_deadline(check, Duration::from_secs(60))
        .map_err(|e| format!("cannot run {}: {e}; {hint}", python.display()))?;
    if !out.status.success() {
        return Err(format!(
            "{} cannot import aioquic ({}): {}; {hint}",
            python.display(),
            out.status,
            out.stderr.trim()
        ));
    }
    Ok(python)
}

/// aioquic's hq-interop server (`tests/interop/aioquic_server.py`)
/// serving `scratch`'s root with a fresh certificate, `flags` added
/// (`--retry`, `--resumption`): its guard and address. Panics when the
/// venv is missing or the server does not start.
pub fn spawn_aioquic_server(
    scratch: &Scratch,
    flags: &[&str],
) -> (process::ChildGuard, SocketAddr) {
    let python = interop_python().unwrap_or_else(|e| panic!("{e}"));
    let cert = certs::TestCert::generate(scratch.path()).unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = Command::new(python);
    cmd.arg(workspace_root().join("tests/interop/aioquic_server.py"))
        .arg("--root")
        .arg(scratch.root())
        .arg("--cert")
        .arg(&cert.cert_pem)
        .arg("--key")
        .arg(&cert.key_pem)
        .args(flags);
    process::spawn_listening(
        cmd,
        "aioquic-server",
        &scratch.logs(),
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Path of the aioquic hq-interop client script.
pub fn aioquic_client_script() -> PathBuf {
    workspace_root().join("tests/interop/aioquic_client.py")
}

/// The byte count in a `received N bytes in T s: G Mbit/s` summary line, if
/// `text` holds one (the line `artq get` and the aioquic client print).
pub fn summary_bytes(text: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let rest = line.trim().strip_prefix("received ")?;
        let (n, rest) = rest.split_once(" bytes in ")?;
        let (secs, rest) = rest.split_once(" s: ")?;
        secs.parse::<f64>().ok()?;
        rest.strip_suffix(" Mbit/s")?.parse::<f64>().ok()?;
        n.parse().ok()
    })
}

/// Asserts that a download client finished: it exited successfully, printed
/// a summary line of exactly `size` bytes, and `actual` holds the bytes of
/// `expected`. `client` names it in messages; `context` (peers' logs) is
/// appended to them.
pub fn assert_downloaded(
    run: &process::RunOutput,
    client: &str,
    context: &str,
    size: u64,
    expected: &Path,
    actual: &Path,
) {
    assert!(
        run.status.success(),
        "{client} failed ({}):\n{}\n{context}",
        run.status,
        run.stderr
    );
    assert_eq!(
        summary_bytes(&run.stderr),
        Some(size),
        "expected `received {size} bytes in T s: G Mbit/s` in {client}'s stderr:\n{}\n{context}",
        run.stderr
    );
    compare_files(expected, actual).unwrap_or_else(|e| panic!("{e}"));
}

/// A two-worker tokio runtime for the in-test quinn peer (the machine has 2 cores).
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("building a tokio runtime only fails if the OS refuses threads or an epoll fd")
}

/// The quinn hq-interop reference server on `scratch`'s root, on `rt`.
pub fn quinn_hq_server(rt: &tokio::runtime::Runtime, scratch: &Scratch) -> quinn_hq::HqServer {
    rt.block_on(async { quinn_hq::spawn_server(scratch.root()) })
        .expect("starting the quinn hq-interop server")
}

/// The quinn + h3 reference server on `scratch`'s root with its own
/// self-signed certificate, on `rt`.
pub fn quinn_h3_server(rt: &tokio::runtime::Runtime, scratch: &Scratch) -> quinn_h3::H3Server {
    rt.block_on(async { quinn_h3::spawn_server(scratch.root(), None) })
        .expect("starting the quinn h3 server")
}

/// A test's scratch space: `root/` (served files), `out/` (downloads), `logs/`
/// (children's stderr). Removed when dropped.
pub struct Scratch {
    dir: tempfile::TempDir,
}

impl Scratch {
    /// Creates the directories.
    pub fn new() -> Scratch {
        let dir = tempfile::tempdir().expect("creating a temp dir");
        for sub in ["root", "out", "logs"] {
            std::fs::create_dir(dir.path().join(sub))
                .expect("creating a dir inside a fresh temp dir");
        }
        Scratch { dir }
    }

    /// Keeps the directory on disk (for a look after a failure) and returns
    /// its path.
    pub fn keep(self) -> PathBuf {
        self.dir.keep()
    }

    /// The scratch directory itself.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Directory whose files the servers serve.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("root")
    }

    /// Where a download named `name` is written.
    pub fn out(&self, name: &str) -> PathBuf {
        self.dir.path().join("out").join(name)
    }

    /// Where children's stderr logs go.
    pub fn logs(&self) -> PathBuf {
        self.dir.path().join("logs")
    }

    /// Creates `root/<name>` with `size` seeded bytes and returns its path.
    pub fn served_file(&self, name: &str, size: u64, seed: u64) -> PathBuf {
        let path = self.root().join(name);
        write_seeded_file(&path, size, seed)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        path
    }
}

/// Downloads `path` from `server` with the quinn client into the file `out`,
/// within `deadline` (handshake, transfer and close included).
pub fn quinn_download(
    rt: &tokio::runtime::Runtime,
    server: std::net::SocketAddr,
    path: &str,
    out: &Path,
    deadline: Duration,
) -> Result<quinn_hq::Fetched, String> {
    let mut file = BufWriter::with_capacity(
        CHUNK,
        File::create(out).map_err(|e| format!("create {}: {e}", out.display()))?,
    );
    let result = rt.block_on(async {
        tokio::time::timeout(deadline, async {
            let endpoint = quinn_hq::client_endpoint()?;
            let fetched = quinn_hq::fetch(&endpoint, server, path, &mut file).await;
            endpoint.wait_idle().await;
            fetched
        })
        .await
    });
    let fetched = match result {
        Err(_) => {
            return Err(format!(
                "quinn download of {path} from {server} took longer than {deadline:?}"
            ))
        }
        Ok(Err(e)) => {
            return Err(format!(
                "quinn download of {path} from {server} failed: {e}"
            ))
        }
        Ok(Ok(f)) => f,
    };
    file.flush()
        .map_err(|e| format!("flush {}: {e}", out.display()))?;
    Ok(fetched)
}

/// Runs the aioquic hq-interop client: `--insecure --timeout <deadline-5s> URL -o out`,
/// killed if still running after `deadline`.
pub fn aioquic_download(
    url: &str,
    out: &Path,
    deadline: Duration,
) -> Result<process::RunOutput, String> {
    aioquic_download_in(None, url, out, deadline, &[])
}

/// [`aioquic_download`] with more arguments for the script (e.g.
/// `--negotiate-v2`).
pub fn aioquic_download_with(
    url: &str,
    out: &Path,
    deadline: Duration,
    extra: &[&str],
) -> Result<process::RunOutput, String> {
    aioquic_download_in(None, url, out, deadline, extra)
}

/// [`aioquic_download`] inside the network namespace `ns` when given, with
/// `extra` arguments for the script.
pub fn aioquic_download_in(
    ns: Option<&netns::NetNs>,
    url: &str,
    out: &Path,
    deadline: Duration,
    extra: &[&str],
) -> Result<process::RunOutput, String> {
    let python = interop_python()?;
    let inner = deadline
        .saturating_sub(Duration::from_secs(5))
        .max(Duration::from_secs(1));
    let mut cmd = match ns {
        Some(ns) => ns.command(python),
        None => Command::new(python),
    };
    cmd.arg(aioquic_client_script())
        .args([
            "--insecure",
            "--timeout",
            &inner.as_secs().to_string(),
            url,
            "-o",
        ])
        .arg(out)
        .args(extra);
    process::run_with_deadline(cmd, deadline)
}

/// Starts `artq link` in front of `server` with `link_args`.
pub fn spawn_link(
    scratch: &Scratch,
    server: std::net::SocketAddr,
    link_args: &[String],
) -> (process::ChildGuard, SocketAddr) {
    let mut cmd = Command::new(artq_bin());
    cmd.args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server.to_string())
        .args(link_args);
    process::spawn_listening(cmd, "artq-link", &scratch.logs(), Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Runs `artq get URL --insecure --stats` with `mode_args` and returns the
/// JSON line it prints on stdout (a player's or a workload's statistics);
/// panics with `context()` if it fails.
pub fn artq_get_json(
    url: &str,
    mode_args: &[&str],
    context: &mut dyn FnMut() -> String,
) -> serde_json::Value {
    let mut get = Command::new(artq_bin());
    get.arg("get")
        .args(mode_args)
        .arg(url)
        .args(["--insecure", "--stats", "--timeout", "100"]);
    let run = process::run_with_deadline(get, Duration::from_secs(110))
        .unwrap_or_else(|e| panic!("{e}\n{}", context()));
    assert!(
        run.status.success(),
        "artq get failed ({}):\n{}\n{}",
        run.status,
        run.stderr,
        context()
    );
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("no JSON statistics in stdout:\n{}", run.stdout));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"))
}
