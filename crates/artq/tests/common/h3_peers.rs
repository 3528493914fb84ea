//! The HTTP/3 peers of the interop harness: aioquic's H3Connection, quic-go's
//! http3 client, headless Chromium, and `artq get --alpn h3`.
//!
//! Why this exists: `interop_h3.rs` puts `artq serve` (and `artq get`) in
//! front of three independent HTTP/3 stacks, and `harness_selfcheck/` runs
//! the very same peers against the quinn + h3 reference server
//! ([`super::quinn_h3`]). Both go through the functions here, so the
//! self-check proves exactly what the interop tests run.
//!
//! Every peer is a child process with a deadline. A missing peer (no venv, no
//! Go build, no Chromium) is an `Err` that says how to get it: the tests fail
//! with it, never skip. `.ci/run` provides all three and exports their paths:
//! `ARTQ_PYTHON`, `ARTQ_H3_CLIENT`, `ARTQ_CHROMIUM`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use super::process::{self, RunOutput};
use super::{interop_python, workspace_root};

/// How to get every HTTP/3 peer at once.
const SETUP_HINT: &str = "run `bash .ci/run` from the repository root once: it creates .venv \
     (aioquic), installs Chromium (apt-get install chromium) and builds the quic-go client \
     into target/interop/h3client, and exports ARTQ_PYTHON, ARTQ_CHROMIUM and ARTQ_H3_CLIENT";

/// The `--timeout` handed to a peer: `deadline` less 5 s for start-up and
/// exit, at least 1 s, so the peer's own timeout (a clear message) fires
/// before [`process::run_with_deadline`] kills it.
fn inner_timeout(deadline: Duration) -> String {
    deadline
        .saturating_sub(Duration::from_secs(5))
        .max(Duration::from_secs(1))
        .as_secs()
        .to_string()
}

/// Path of the aioquic HTTP/3 client script.
pub fn aioquic_h3_script() -> PathBuf {
    workspace_root().join("tests/interop/aioquic_h3_client.py")
}

/// Runs the aioquic HTTP/3 client: `--insecure --timeout T URL -o out`.
pub fn aioquic_h3_download(url: &str, out: &Path, deadline: Duration) -> Result<RunOutput, String> {
    let python = interop_python()?;
    let mut cmd = Command::new(python);
    cmd.arg(aioquic_h3_script())
        .args([
            "--insecure",
            "--timeout",
            &inner_timeout(deadline),
            url,
            "-o",
        ])
        .arg(out);
    process::run_with_deadline(cmd, deadline)
}

/// The quic-go HTTP/3 client built from `tests/interop/go`:
/// `$ARTQ_H3_CLIENT`, else `<workspace>/target/interop/h3client`.
pub fn go_h3_client() -> Result<PathBuf, String> {
    let bin = std::env::var_os("ARTQ_H3_CLIENT")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/interop/h3client"));
    if !bin.is_file() {
        return Err(format!(
            "quic-go HTTP/3 client not found at {}; {SETUP_HINT} (or by hand: \
             `cd tests/interop/go && go build -o ../../../target/interop/h3client .`)",
            bin.display()
        ));
    }
    Ok(bin)
}

/// Runs the quic-go HTTP/3 client: `-insecure -timeout T -o out URL`.
pub fn go_h3_download(url: &str, out: &Path, deadline: Duration) -> Result<RunOutput, String> {
    let mut cmd = Command::new(go_h3_client()?);
    cmd.args(["-insecure", "-timeout", &inner_timeout(deadline), "-o"])
        .arg(out)
        .arg(url);
    process::run_with_deadline(cmd, deadline)
}

/// Runs `artq get URL --insecure --alpn h3 -o out` (the h3 client contract).
pub fn artq_get_h3(url: &str, out: &Path, deadline: Duration) -> Result<RunOutput, String> {
    let mut cmd = Command::new(super::artq_bin());
    cmd.arg("get")
        .arg(url)
        .args([
            "--insecure",
            "--alpn",
            "h3",
            "--timeout",
            &inner_timeout(deadline),
            "-o",
        ])
        .arg(out);
    process::run_with_deadline(cmd, deadline)
}

/// Finds `name` in `$PATH`.
fn which(name: &OsStr) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The Chromium binary: `$ARTQ_CHROMIUM`, else `chromium` on `PATH`; checked
/// by running `--version`.
pub fn chromium() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("ARTQ_CHROMIUM") {
        Some(p) => PathBuf::from(p),
        None => which(OsStr::new("chromium")).ok_or_else(|| {
            format!("Chromium not found (no $ARTQ_CHROMIUM, no `chromium` on PATH); {SETUP_HINT}")
        })?,
    };
    let mut cmd = Command::new(&bin);
    cmd.arg("--version");
    let out = process::run_with_deadline(cmd, Duration::from_secs(60))
        .map_err(|e| format!("cannot run {} --version: {e}; {SETUP_HINT}", bin.display()))?;
    if !out.status.success() || !out.stdout.contains("Chromium") {
        return Err(format!(
            "{} --version failed ({}): {}{}; {SETUP_HINT}",
            bin.display(),
            out.status,
            out.stdout,
            out.stderr
        ));
    }
    Ok(bin)
}

/// Path of the Chromium driver script.
pub fn chromium_driver() -> PathBuf {
    workspace_root().join("tests/interop/chromium_fetch.py")
}

/// Copies the digest page (`tests/interop/sha256_page.html`) into `root` as
/// `name`; load it as `https://ORIGIN/<name>#/<file>`.
pub fn install_digest_page(root: &Path, name: &str) -> PathBuf {
    let src = workspace_root().join("tests/interop/sha256_page.html");
    let dst = root.join(name);
    std::fs::copy(&src, &dst)
        .unwrap_or_else(|e| panic!("copy {} to {}: {e}", src.display(), dst.display()));
    dst
}

/// One browser at a time per test binary: Chromium starts about ten
/// processes, and two of them beside 5 MB transfers on a 2-core machine would
/// only make each run slower and its timing less telling.
static BROWSER: Mutex<()> = Mutex::new(());

/// Holds this test binary's one browser slot until dropped (see
/// [`BROWSER`]); every Chromium driver run takes it.
pub fn one_browser() -> std::sync::MutexGuard<'static, ()> {
    // A test that panicked while holding the lock poisons it; the lock guards
    // no data, so carry on.
    BROWSER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs the Chromium driver on `page_url`, accepting the key with SPKI hash
/// `spki`, forcing QUIC on `origin`, writing Chromium's netlog to `netlog`.
/// Waits for any other browser run of this test binary to finish first (the
/// `deadline` starts when this run does).
pub fn chromium_fetch(
    page_url: &str,
    spki: &str,
    origin: &str,
    netlog: &Path,
    deadline: Duration,
) -> Result<RunOutput, String> {
    let python = interop_python()?;
    let chromium = chromium()?;
    let _one_browser = one_browser();
    let mut cmd = Command::new(python);
    cmd.arg(chromium_driver())
        .arg("--chromium")
        .arg(&chromium)
        .args(["--spki", spki, "--origin", origin])
        .args(["--timeout", &inner_timeout(deadline)])
        .arg("--netlog")
        .arg(netlog)
        .arg(page_url);
    process::run_with_deadline(cmd, deadline)
}

/// The digest the driver printed (its stdout's first line), if it looks like one.
pub fn printed_digest(run: &RunOutput) -> Option<&str> {
    let line = run.stdout.lines().next()?.trim();
    (line.len() == 64 && line.bytes().all(|b| b.is_ascii_hexdigit())).then_some(line)
}

/// Whether the Chromium driver succeeded and printed `expected` (the served
/// file's SHA-256, hex); the error says what went wrong, with the driver's
/// output and `context` (peers' logs).
pub fn check_browser_digest(run: &RunOutput, expected: &str, context: &str) -> Result<(), String> {
    if !run.status.success() {
        return Err(format!(
            "Chromium driver failed ({}):\nstdout: {}\nstderr:\n{}\n{context}",
            run.status, run.stdout, run.stderr
        ));
    }
    match printed_digest(run) {
        Some(d) if d == expected => Ok(()),
        got => Err(format!(
            "SHA-256 computed in the page is {got:?}, the served file's is {expected}:\n\
             stdout: {}\nstderr:\n{}\n{context}",
            run.stdout, run.stderr
        )),
    }
}

/// Asserts [`check_browser_digest`].
pub fn assert_browser_digest(run: &RunOutput, expected: &str, context: &str) {
    check_browser_digest(run, expected, context).unwrap_or_else(|e| panic!("{e}"));
}
