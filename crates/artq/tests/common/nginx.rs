//! nginx as a real HTTP/1.1 origin for the edge tests.
//!
//! Why this exists: `artq serve --upstream` is a reverse proxy, and what it
//! proxies in production is a real web server: keep-alive, `Cache-Control`,
//! chunked live relays. The edge tests put nginx behind it, and count at
//! nginx what reached the origin (one request per cached object, one per
//! live path whatever the number of viewers).
//!
//! How: [`Nginx::start`] writes `nginx.conf` into a scratch directory and
//! runs `$ARTQ_NGINX` (else `nginx` on `PATH`, else `/usr/sbin/nginx`, where
//! Debian puts it outside a normal user's `PATH`) with `-p SCRATCH -c
//! nginx.conf -e error.log` in the foreground (`daemon off`) as one process
//! (`master_process off`, so killing the child leaves no worker behind).
//! Everything nginx writes is in the scratch directory: pid, error log,
//! access log, the five temp paths. It listens on 127.0.0.1 at a port picked
//! by binding port 0 and releasing it, retried when another process takes
//! the port first; it is ready once it accepts a TCP connection. Run as
//! root it is told `user root` (so it can read a test's 0700 temp dirs);
//! as a normal user the directive is left out.
//!
//! The access log has one line per finished request, tab-separated:
//! `msec status method request_uri bytes_sent request_time`. nginx writes a
//! line when the request ends: a live relay shows up only once it is over.

use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::process::{self, ChildGuard};

/// How to get nginx.
pub const NGINX_HINT: &str = "install nginx (Debian: `apt-get install -y nginx`; `bash .ci/run` \
     does it) or point $ARTQ_NGINX at an nginx binary";

/// How long nginx may take to accept its first connection.
const READY_DEADLINE: Duration = Duration::from_secs(20);

/// How many ports to try when another process takes the picked one.
const PORT_TRIES: usize = 5;

/// The nginx binary: `$ARTQ_NGINX`, else `nginx` on `PATH`, else
/// `/usr/sbin/nginx`; checked by running `nginx -v`. The error says how to
/// install it (the tests fail with it, never skip).
pub fn nginx_bin() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("ARTQ_NGINX") {
        Some(p) => PathBuf::from(p),
        None => super::which("nginx")
            .or_else(|| Some(PathBuf::from("/usr/sbin/nginx")).filter(|p| p.is_file()))
            .ok_or_else(|| format!("nginx not found (no $ARTQ_NGINX, no `nginx` on PATH or in /usr/sbin); {NGINX_HINT}"))?,
    };
    let mut cmd = Command::new(&bin);
    cmd.arg("-v");
    let out = process::run_with_deadline(cmd, Duration::from_secs(30))
        .map_err(|e| format!("cannot run {} -v: {e}; {NGINX_HINT}", bin.display()))?;
    if !out.status.success() || !out.stderr.contains("nginx version") {
        return Err(format!(
            "{} -v failed ({}): {}{}; {NGINX_HINT}",
            bin.display(),
            out.status,
            out.stdout,
            out.stderr
        ));
    }
    Ok(bin)
}

/// One request as the access log recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct AccessEntry {
    /// The response status nginx logged (499: the client went away first).
    pub status: u16,
    /// `GET`, `HEAD`, ...
    pub method: String,
    /// The request target as sent (path and query).
    pub uri: String,
    /// Bytes sent to the client, head included.
    pub bytes_sent: u64,
    /// From the request's first byte to the log line, seconds.
    pub request_time: f64,
}

/// A running nginx; stopped (killed) when dropped.
pub struct Nginx {
    guard: ChildGuard,
    addr: SocketAddr,
    dir: PathBuf,
}

impl Nginx {
    /// Starts nginx serving `root` on a free 127.0.0.1 port, its config,
    /// logs and temp files in `scratch` (which must exist), with
    /// `extra_server_conf` pasted into the `server` block (locations: see
    /// [`Nginx::cache_control_location`] and [`Nginx::live_proxy_location`]).
    pub fn start(root: &Path, scratch: &Path, extra_server_conf: &str) -> Result<Nginx, String> {
        let bin = nginx_bin()?;
        let dir = scratch.join("nginx");
        fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        let as_root = fs::metadata(&dir)
            .map_err(|e| format!("stat {}: {e}", dir.display()))?
            .uid()
            == 0;
        let mut last_error = String::new();
        for _ in 0..PORT_TRIES {
            let port = free_tcp_port()?;
            let conf = config(&dir, root, port, as_root, extra_server_conf);
            let conf_path = dir.join("nginx.conf");
            fs::write(&conf_path, conf)
                .map_err(|e| format!("write {}: {e}", conf_path.display()))?;
            let _ = fs::remove_file(dir.join("error.log"));
            let mut cmd = Command::new(&bin);
            cmd.arg("-p")
                .arg(&dir)
                .arg("-c")
                .arg(&conf_path)
                .arg("-e")
                .arg(dir.join("error.log"));
            let guard = process::spawn_guarded(cmd, "nginx", &dir)?;
            let mut nginx = Nginx {
                guard,
                addr: SocketAddr::from(([127, 0, 0, 1], port)),
                dir: dir.clone(),
            };
            match nginx.wait_ready() {
                Ok(()) => return Ok(nginx),
                Err(e) if e.contains("Address already in use") => last_error = e,
                Err(e) => return Err(e),
            }
        }
        Err(format!(
            "nginx could not bind a free port in {PORT_TRIES} tries: {last_error}"
        ))
    }

    /// Waits until nginx accepts a TCP connection, or fails with its logs.
    fn wait_ready(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.guard.try_status() {
                return Err(format!(
                    "nginx exited ({status}) before accepting connections:\n{}",
                    self.error_log_tail()
                ));
            }
            if TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok() {
                return Ok(());
            }
            if start.elapsed() > READY_DEADLINE {
                return Err(format!(
                    "nginx did not accept on {} within {READY_DEADLINE:?}: {}\n{}",
                    self.addr,
                    self.guard.describe(),
                    self.error_log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The address nginx listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`: the form `artq serve --upstream` takes.
    pub fn origin_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The access log's path.
    pub fn access_log(&self) -> PathBuf {
        self.dir.join("access.log")
    }

    /// Every request logged so far (lines that do not parse are skipped:
    /// the format is this module's own).
    pub fn access_entries(&self) -> Vec<AccessEntry> {
        let Ok(file) = fs::File::open(self.access_log()) else {
            return Vec::new();
        };
        BufReader::new(file)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| parse_access_line(&line))
            .collect()
    }

    /// How many logged requests have a URI starting with `path_prefix`.
    pub fn access_log_count(&self, path_prefix: &str) -> usize {
        self.access_entries()
            .iter()
            .filter(|e| e.uri.starts_with(path_prefix))
            .count()
    }

    /// Waits up to `deadline` until at least `at_least` requests under
    /// `path_prefix` are logged (nginx logs a request when it ends), then
    /// returns how many there are.
    pub fn wait_access_count(
        &self,
        path_prefix: &str,
        at_least: usize,
        deadline: Duration,
    ) -> usize {
        let start = Instant::now();
        loop {
            let n = self.access_log_count(path_prefix);
            if n >= at_least || start.elapsed() >= deadline {
                return n;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The end of nginx's error log (and its stderr), for failure messages.
    pub fn error_log_tail(&self) -> String {
        let log = fs::read(self.dir.join("error.log")).unwrap_or_default();
        let from = log.len().saturating_sub(4096);
        format!(
            "nginx error.log tail:\n{}",
            String::from_utf8_lossy(&log[from..])
        )
    }

    /// One line for assertion messages: the process and its error log.
    pub fn describe(&mut self) -> String {
        format!("{}\n{}", self.guard.describe(), self.error_log_tail())
    }

    /// A `location` answering `prefix` from the root with
    /// `Cache-Control: max-age=SECS` (`expires` also sets `Expires`).
    pub fn cache_control_location(prefix: &str, max_age_secs: u32) -> String {
        format!("location {prefix} {{ expires {max_age_secs}s; }}\n")
    }

    /// A `location` relaying `prefix` to the HTTP/1.1 server at `upstream`
    /// as it arrives (`proxy_buffering off`): how nginx fronts a live
    /// encoder and counts its viewers' origin requests. The request URI is
    /// passed on unchanged; long reads are allowed (a live stream has no
    /// end).
    pub fn live_proxy_location(prefix: &str, upstream: SocketAddr) -> String {
        format!(
            "location {prefix} {{\n\
             \x20   proxy_pass http://{upstream};\n\
             \x20   proxy_http_version 1.1;\n\
             \x20   proxy_buffering off;\n\
             \x20   proxy_read_timeout 60s;\n\
             \x20   proxy_send_timeout 60s;\n\
             }}\n"
        )
    }
}

/// nginx's configuration for one run (see the module doc).
fn config(dir: &Path, root: &Path, port: u16, as_root: bool, extra: &str) -> String {
    let d = |name: &str| quoted(&dir.join(name));
    let mut c = String::new();
    c.push_str("daemon off;\nmaster_process off;\n");
    if as_root {
        c.push_str("user root;\n");
    }
    let _ = writeln!(c, "pid {};", d("nginx.pid"));
    let _ = writeln!(c, "error_log {} info;", d("error.log"));
    c.push_str("events { worker_connections 512; }\n");
    c.push_str("http {\n");
    c.push_str(
        "    types { text/html html; text/javascript js; application/json json; \
         video/x-flv flv; video/mp2t ts; text/plain txt; }\n",
    );
    c.push_str("    default_type application/octet-stream;\n");
    for (directive, sub) in [
        ("client_body_temp_path", "client_body"),
        ("proxy_temp_path", "proxy"),
        ("fastcgi_temp_path", "fastcgi"),
        ("uwsgi_temp_path", "uwsgi"),
        ("scgi_temp_path", "scgi"),
    ] {
        let _ = writeln!(c, "    {directive} {};", d(sub));
    }
    c.push_str(
        "    log_format artq '$msec\\t$status\\t$request_method\\t$request_uri\\t\
         $bytes_sent\\t$request_time';\n",
    );
    let _ = writeln!(c, "    access_log {} artq;", d("access.log"));
    c.push_str("    keepalive_timeout 65s;\n    keepalive_requests 100000;\n");
    c.push_str("    server {\n");
    let _ = writeln!(c, "        listen 127.0.0.1:{port};");
    let _ = writeln!(c, "        root {};", quoted(root));
    for line in extra.lines() {
        let _ = writeln!(c, "        {line}");
    }
    c.push_str("    }\n}\n");
    c
}

/// A path as a double-quoted nginx string.
fn quoted(p: &Path) -> String {
    let s = p.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Parses one line of the `artq` log format.
fn parse_access_line(line: &str) -> Option<AccessEntry> {
    let mut f = line.split('\t');
    let _msec = f.next()?;
    let status = f.next()?.parse().ok()?;
    let method = f.next()?.to_string();
    let uri = f.next()?.to_string();
    let bytes_sent = f.next()?.parse().ok()?;
    let request_time = f.next()?.parse().ok()?;
    Some(AccessEntry {
        status,
        method,
        uri,
        bytes_sent,
        request_time,
    })
}

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0,
/// then released): for servers that cannot report the port they bound.
pub fn free_tcp_port() -> Result<u16, String> {
    let listener = TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("bind 127.0.0.1:0 to pick a port: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("local_addr of a bound listener: {e}"))
}
