//! A private network namespace per test, and chroot jails inside it.
//!
//! Why this exists: quic-go's interop endpoints are made for the interop
//! runner's Docker containers. The server binds `:443` on every interface,
//! and both write to fixed paths (`/logs/log.txt`, `/downloads/<path>`) and
//! read fixed ones (`/certs`, `/www`). Run unmodified on a test machine they
//! would bind beyond 127.0.0.1, clash with each other when tests run in
//! parallel, and write into the machine's root directory. So each matrix
//! test gets its own network namespace ([`NetNs`]: nothing but a loopback
//! interface, reachable by no other process), and each quic-go endpoint its
//! own root directory ([`install_jail_binary`], run with `chroot`). Every
//! process of a test (server, `artq link`, client) runs in the test's
//! namespace through `nsenter`, so `127.0.0.1:443` there is that test's alone.
//!
//! Needs root (CI runs as root) or, for an ordinary user, unprivileged user
//! namespaces: then the namespace also gets a user namespace in which the
//! user is root, which is what `chroot` needs. Tools: `unshare` and `nsenter`
//! (util-linux), `chroot` (coreutils), `ip` (iproute2) to bring the loopback
//! interface up. A missing tool or permission is an error that says so.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::process::{self, ChildGuard};

/// How long the namespace holder sleeps: longer than any test, so it only
/// outlives its test when the test process itself is killed.
const HOLDER_SECONDS: &str = "3600";

/// What to install when a tool is missing or not permitted.
const HINT: &str = "the interop matrix runs each test in its own network namespace \
    (`unshare --net`, `nsenter`: util-linux; `ip`: iproute2; `chroot`: coreutils) and needs \
    root or unprivileged user namespaces (`.ci/run` runs as root in CI)";

/// A network namespace holding only a loopback interface, alive as long as
/// this value.
///
/// Exists so a test's servers, relay and clients share an address space no
/// other test or host process can reach (see the module doc).
pub struct NetNs {
    /// `sleep` in the namespace; the namespace lives as long as it does.
    holder: ChildGuard,
    /// Whether a user namespace was needed too (not running as root).
    with_user_ns: bool,
}

impl NetNs {
    /// Creates the namespace and brings its loopback interface up. The
    /// holder's output goes to `<log_dir>/netns-holder.log`.
    pub fn new(log_dir: &Path) -> Result<NetNs, String> {
        let with_user_ns = !running_as_root();
        let mut cmd = Command::new("unshare");
        if with_user_ns {
            cmd.args(["--user", "--map-root-user"]);
        }
        cmd.args(["--net", "--", "sleep", HOLDER_SECONDS]);
        let mut holder = process::spawn_guarded(cmd, "netns-holder", log_dir)
            .map_err(|e| format!("{e}; {HINT}"))?;
        // `unshare` enters the namespace, then execs `sleep`: wait until the
        // holder's namespace differs from ours, or it fails.
        let ours = std::fs::read_link("/proc/self/ns/net")
            .map_err(|e| format!("readlink /proc/self/ns/net: {e}"))?;
        let theirs = PathBuf::from(format!("/proc/{}/ns/net", holder.id()));
        let until = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(status) = holder.try_status() {
                return Err(format!(
                    "cannot create a network namespace: unshare exited with {status}: {}; {HINT}",
                    holder.stderr_tail().trim()
                ));
            }
            if std::fs::read_link(&theirs).is_ok_and(|ns| ns != ours) {
                break;
            }
            if Instant::now() >= until {
                return Err(format!(
                    "unshare did not enter a new network namespace within 10 s: {}; {HINT}",
                    holder.describe()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let ns = NetNs {
            holder,
            with_user_ns,
        };
        let mut up = ns.command("ip");
        up.args(["link", "set", "lo", "up"]);
        let run = process::run_with_deadline(up, Duration::from_secs(30))
            .map_err(|e| format!("bringing up the namespace's loopback: {e}; {HINT}"))?;
        if !run.status.success() {
            return Err(format!(
                "`ip link set lo up` in the namespace failed ({}): {}; {HINT}",
                run.status,
                run.stderr.trim()
            ));
        }
        Ok(ns)
    }

    /// A command that runs `program` inside the namespace (`nsenter`, which
    /// execs it: the child's pid is the program's).
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--target={}", self.holder.id()));
        if self.with_user_ns {
            // Keep our uid, which the namespace maps to root; nsenter's
            // default (setgroups, then uid 0) is refused once unshare has
            // denied setgroups for an unprivileged map.
            cmd.args(["--user", "--preserve-credentials"]);
        }
        cmd.arg("--net").arg("--").arg(program);
        cmd
    }

    /// A command that runs `/<name>` of the jail directory `jail` (see
    /// [`install_jail_binary`]) inside the namespace with `jail` as its root
    /// directory.
    pub fn jailed_command(&self, jail: &Path, name: &str) -> Command {
        let mut cmd = self.command("chroot");
        cmd.arg(jail).arg(format!("/{name}"));
        cmd
    }
}

/// Whether this process runs with effective uid 0 (from `/proc/self/status`).
fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|ids| ids.split_whitespace().nth(1))
            == Some("0")
    })
}

/// Puts the static binary `src` into the jail directory `jail` as `/<name>`:
/// a hard link when both are on one file system, else a copy.
pub fn install_jail_binary(src: &Path, jail: &Path, name: &str) -> Result<(), String> {
    let dst = jail.join(name);
    if std::fs::hard_link(src, &dst).is_ok() {
        return Ok(());
    }
    std::fs::copy(src, &dst)
        .map(|_| ())
        .map_err(|e| format!("copy {} to {}: {e}", src.display(), dst.display()))
}

/// Whether a UDP socket bound to local `port` exists in the network
/// namespace of process `pid` (from its `/proc/<pid>/net/udp` and `udp6`).
///
/// Exists because quic-go's interop server prints nothing when it is ready.
pub fn udp_port_bound(pid: u32, port: u16) -> bool {
    let want = format!(":{port:04X}");
    ["udp", "udp6"].iter().any(|table| {
        std::fs::read_to_string(format!("/proc/{pid}/net/{table}")).is_ok_and(|text| {
            text.lines().skip(1).any(|line| {
                line.split_whitespace()
                    .nth(1)
                    .is_some_and(|local| local.ends_with(&want))
            })
        })
    })
}
