//! `artq serve`: the `apps` HTTP server (HTTP/3 and hq-interop, chosen per
//! connection by ALPN) on a UDP socket, answering from a directory, with
//! generated video under `/live` (live streams paced in real time) and
//! `/dash` (DASH manifests and segments).

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};
use apps::content::Directory;
use apps::edge::{Edge, EdgeCounters, EdgeOptions, Routes, Upstream, UpstreamSpec};
use apps::messages::{MessageParams, MessageSender};
use apps::server::{HttpServer, RequestRecord, ServerOptions};
use apps::{App, Host, Observer, Protocol};
use transport::events::QlogWriter;
use transport::{
    AdmissionConfig, Connection, ConnectionHandle, Endpoint, EndpointConfig, EndpointStats, Event,
    PreferredAddresses, RetryMode, RngSeed, ServerConfig, StaticKeys, TransportConfig,
};

use crate::metrics::{ConnectionMeter, ServerMetrics, SharedWorkerMeter, WorkerMeter};
use crate::udp::{Driver, Stop, WorkerLink};

/// Seed of the generated content (video frame and segment sizes, RPC
/// response bytes): fixed, so every `artq serve` serves the same streams
/// and answers (a client checks them without being told).
pub const CONTENT_SEED: u64 = 1;

/// Settings of `artq serve`.
pub struct ServeOptions {
    /// Address to bind.
    pub listen: SocketAddr,
    /// What the server answers with.
    pub app: ServeApp,
    /// Transport settings (recovery scheme, congestion control, windows):
    /// the same for every connection, whatever its protocol.
    pub transport: TransportConfig,
    /// PEM certificate chain and key; self-signed when absent.
    pub cert: Option<(PathBuf, PathBuf)>,
    /// Write one qlog file per connection here.
    pub qlog: Option<PathBuf>,
    /// Append one JSON line of statistics per ended connection here (`-`:
    /// stdout).
    pub stats_json: Option<PathBuf>,
    /// The `alt-svc` header value; `None` for the default (`h3` on the
    /// bound port), `Some("")` for none.
    pub alt_svc: Option<String>,
    /// When clients must prove their address with a Retry first.
    pub retry: RetryMode,
    /// Seeds connection IDs, reset tokens, the token key and every random
    /// choice of the stack (secret, from the OS, unless `--seed`).
    pub seed: RngSeed,
    /// Issue session tickets and accept resumption
    /// ([`transport::crypto::enable_server_resumption`]).
    pub resumption: bool,
    /// With `resumption`, also accept 0-RTT early data.
    pub zero_rtt: bool,
    /// Worker threads, each with its own socket and endpoint (1..=256).
    pub threads: usize,
    /// Serve Prometheus metrics on `GET /metrics` at this TCP address.
    pub metrics: Option<SocketAddr>,
    /// Append one JSON line per finished request to this file (`-`:
    /// stdout).
    pub access_log: Option<PathBuf>,
    /// A file of secret bytes the stateless reset key follows from, kept
    /// across restarts.
    pub host_key: Option<PathBuf>,
    /// Also listen on these addresses and offer them as the preferred
    /// address (RFC 9000 §9.6): at most one IPv4 and one IPv6.
    pub preferred_address: Vec<SocketAddr>,
}

/// What `artq serve` runs on each connection.
#[derive(Clone)]
pub enum ServeApp {
    /// HTTP/3 and hq-interop: the files of `root`, with generated video
    /// under `/live` and `/dash` and the RPC endpoint under `/rpc`, and,
    /// as an edge, the origins of `edge` under their prefixes.
    Http {
        /// Directory whose files are served.
        root: Option<PathBuf>,
        /// Origins in front of which the server stands.
        edge: Option<EdgeArgs>,
    },
    /// RCP's message workload (`apps::messages`), sent to every client
    /// that connects, whatever its ALPN.
    Messages(MessageParams),
}

/// The edge's settings as given on the command line.
#[derive(Clone, Debug)]
pub struct EdgeArgs {
    /// `--upstream` values, `[/PREFIX=]http://HOST:PORT`.
    pub upstreams: Vec<String>,
    /// `--cache-size` in bytes (0: none).
    pub cache_size: u64,
    /// `--upstream-timeout`.
    pub upstream_timeout: std::time::Duration,
}

impl EdgeArgs {
    /// The edge of one of `workers` worker threads: parses the upstreams
    /// and resolves their hosts (once, now: the first address of each name
    /// is used). Each worker's cache holds its share of `--cache-size`, so
    /// that the flag bounds the server's memory whatever `--threads`.
    fn build(&self, workers: usize) -> Result<Edge> {
        let mut upstreams = Vec::new();
        for value in &self.upstreams {
            let spec = UpstreamSpec::parse(value).map_err(|e| anyhow::anyhow!("--upstream {e}"))?;
            let addr = (spec.host.as_str(), spec.port)
                .to_socket_addrs()
                .with_context(|| format!("--upstream {value}: cannot resolve {}", spec.host))?
                .next()
                .with_context(|| format!("--upstream {value}: {} has no address", spec.host))?;
            upstreams.push(Upstream {
                authority: spec.authority(),
                prefix: spec.prefix,
                addr,
            });
        }
        let routes = Routes::new(upstreams).map_err(|e| anyhow::anyhow!("--upstream {e}"))?;
        let mut options = EdgeOptions::new(routes);
        options.cache_size = self.cache_size / workers.max(1) as u64;
        options.upstream_timeout = self.upstream_timeout;
        Ok(Edge::new(options))
    }
}

/// Most worker threads (`--threads`): a worker's index lives in the first
/// byte of its connection IDs.
pub const MAX_THREADS: usize = 256;

/// Runs the server until SIGINT or SIGTERM, then shuts down gracefully
/// (HTTP/3 GOAWAY, in-flight responses finish, at most
/// [`crate::udp::SHUTDOWN_GRACE`]).
///
/// With `threads` above 1, every worker thread has its own socket on the
/// listening port (`SO_REUSEPORT`: the kernel spreads clients over them by
/// a hash of their addresses), its own sans-IO endpoint and its own
/// application (an edge's cache and live relays are per worker); they share
/// the TLS configuration (so a session ticket one issued is good at all),
/// the address-validation token key and the stateless reset key. A
/// connection's IDs name its worker, so a datagram the kernel hands to
/// another (after a NAT rebinding or a migration) is passed to its owner.
/// The first worker runs on the calling thread.
pub fn run(opts: ServeOptions) -> Result<()> {
    anyhow::ensure!(
        (1..=MAX_THREADS).contains(&opts.threads),
        "--threads must be between 1 and {MAX_THREADS}"
    );
    let threads = opts.threads;
    let scheme = opts.transport.policy.name();
    let tls = Arc::new(TlsSource::load(
        opts.cert.clone(),
        opts.resumption,
        opts.zero_rtt,
    )?);
    if let Some(dir) = &opts.qlog {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --qlog {}", dir.display()))?;
    }
    let bind = |addr| {
        if threads > 1 {
            Driver::bind_shared(addr)
        } else {
            Driver::bind(addr)
        }
    };
    let mut first = bind(opts.listen).with_context(|| format!("cannot bind {}", opts.listen))?;
    let addr = first.local_addr()?;
    let preferred_address = bind_preferred(&mut first, &opts.preferred_address)?;
    let mut drivers = vec![first];
    for _ in 1..threads {
        let mut d = bind(addr).with_context(|| format!("cannot bind another socket on {addr}"))?;
        for p in preferred_address.iter() {
            d.bind_also(p)
                .with_context(|| format!("cannot bind another socket on {p}"))?;
        }
        d.set_clock(drivers[0].clock());
        drivers.push(d);
    }
    if threads > 1 {
        let mut inboxes = Vec::new();
        let mut receivers = Vec::new();
        for d in &drivers {
            let (inbox, rx) = d.inbox()?;
            inboxes.push(inbox);
            receivers.push(rx);
        }
        let loads = WorkerLink::loads(threads);
        // The workers' endpoints issue IDs of the default length.
        let cid_len = transport::DEFAULT_LOCAL_CID_LEN;
        for (i, (d, rx)) in drivers.iter_mut().zip(receivers).enumerate() {
            let owner =
                Box::new(move |data: &[u8]| transport::datagram_owner(data, cid_len, threads));
            let link = WorkerLink::new(i, owner, inboxes.clone(), rx, Arc::clone(&loads), cid_len);
            d.link(link);
        }
        if let Err(e) = drivers[0].steer_by_connection_id(threads) {
            tracing::warn!(
                "the kernel does not steer datagrams by connection ID ({e}); workers pass them on"
            );
        }
    }
    let keys = static_keys(&opts.seed, opts.host_key.as_deref())?;
    let alt_svc = match &opts.alt_svc {
        None => Some(format!("h3=\":{}\"; ma=86400", addr.port())),
        Some(v) if v.is_empty() => None,
        Some(v) => Some(v.clone()),
    };
    let stats_json = open_append(opts.stats_json.as_deref(), "--stats-json")?;
    let access_log = open_append(opts.access_log.as_deref(), "--access-log")?;
    let metrics = ServerMetrics::new(&scheme);
    let metrics_addr = opts.metrics.map(|a| metrics.listen(a)).transpose()?;
    let shared = Arc::new(Shared {
        stats_json: stats_json.map(Mutex::new),
        access_log: access_log.map(Mutex::new),
        metrics: metrics_addr.map(|_| metrics),
        clock: drivers[0].clock(),
        accepted: AtomicU64::new(0),
        stop: Arc::new(AtomicBool::new(false)),
    });
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&shared.stop))
            .context("cannot install a signal handler")?;
    }
    if opts.cert.is_some() {
        tls.reload_on_sighup()?;
    }
    let worker = Worker {
        app: opts.app,
        alt_svc,
        transport: Arc::new(opts.transport),
        preferred_address,
        retry: opts.retry,
        seed: opts.seed,
        keys,
        threads,
        qlog: opts.qlog,
        scheme: scheme.clone(),
        tls: Arc::clone(&tls),
        shared: Arc::clone(&shared),
    };
    // Worker 0's application is built here, so that a bad --root or
    // --upstream fails before the ready line.
    let (app0, serving) = worker.app(true, 0)?;
    let mut handles = Vec::new();
    let mut rest = drivers.split_off(1);
    let driver0 = drivers.pop().expect("the first driver");
    for (i, driver) in rest.drain(..).enumerate() {
        let worker = worker.clone();
        let handle = std::thread::Builder::new()
            .name(format!("artq-worker-{}", i + 1))
            .spawn(move || -> Result<WorkerSummary> {
                let (app, _) = worker.app(false, i + 1)?;
                worker.run(i + 1, driver, app)
            })
            .context("cannot start a worker thread")?;
        handles.push(handle);
    }
    // The ready line is a contract (tests and scripts read the address).
    println!("listening on {addr}");
    for p in preferred_address.iter() {
        println!("preferred address {p}");
    }
    if let Some(a) = metrics_addr {
        println!("metrics on http://{a}/metrics");
    }
    io::stdout().flush()?;
    let workers = if threads > 1 {
        format!(", {threads} worker threads")
    } else {
        String::new()
    };
    eprintln!("artq serve: {serving}, recovery {scheme}{workers}");
    if let Some(a) = metrics_addr {
        eprintln!("artq serve: metrics on http://{a}/metrics");
    }
    let mut summary = worker.run(0, driver0, app0);
    for h in handles {
        let s = match h.join() {
            Ok(s) => s,
            Err(_) => Err(anyhow::anyhow!("a worker thread panicked")),
        };
        summary = match (summary, s) {
            (Ok(a), Ok(b)) => Ok(a.add(&b)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        };
    }
    summary?.print();
    Ok(())
}

/// The server's TLS configuration, shared by its workers, and where it
/// came from: SIGHUP reads the certificate and key again, and connections
/// accepted after that present the new ones (existing ones keep theirs).
/// Session tickets survive a reload (the ticket store moves to the new
/// configuration).
struct TlsSource {
    cert: Option<(PathBuf, PathBuf)>,
    resumption: bool,
    zero_rtt: bool,
    current: Mutex<Arc<rustls::ServerConfig>>,
    /// Bumped by every reload; workers compare it with the one they use.
    generation: AtomicU64,
}

impl TlsSource {
    fn load(cert: Option<(PathBuf, PathBuf)>, resumption: bool, zero_rtt: bool) -> Result<Self> {
        let config = Self::build(&cert, resumption, zero_rtt, true)?;
        Ok(TlsSource {
            cert,
            resumption,
            zero_rtt,
            current: Mutex::new(config),
            generation: AtomicU64::new(0),
        })
    }

    /// A configuration from the files (or a fresh self-signed certificate).
    fn build(
        cert: &Option<(PathBuf, PathBuf)>,
        resumption: bool,
        zero_rtt: bool,
        announce: bool,
    ) -> Result<Arc<rustls::ServerConfig>> {
        let (chain, key) = match cert {
            Some((c, k)) => (
                transport::crypto::load_pem_chain(c)?,
                transport::crypto::load_pem_key(k)?,
            ),
            None => {
                // ECDSA P-256: the one algorithm every browser takes
                // (Chromium offers no Ed25519); the key comes from the OS RNG.
                let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                    .context("cannot generate a key for the self-signed certificate")?;
                let spki = spki_sha256_base64(&key.public_key_der());
                if announce {
                    eprintln!(
                        "artq serve: self-signed certificate for localhost, 127.0.0.1 and ::1; \
                         its key's SPKI SHA-256 (for Chromium's --ignore-certificate-errors-spki-list): {spki}"
                    );
                }
                transport::crypto::self_signed_with_key(&["localhost", "127.0.0.1", "::1"], key)?
            }
        };
        let mut tls =
            transport::crypto::server_config(chain, key, &Protocol::alpn_list(&Protocol::ALL))?;
        if resumption {
            tls = transport::crypto::enable_server_resumption(tls, zero_rtt);
        }
        Ok(tls)
    }

    /// The generation of the configuration in use: one atomic load, for
    /// the workers' every turn (the lock is taken only when it changed).
    fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The configuration in use and its generation.
    fn current(&self) -> (u64, Arc<rustls::ServerConfig>) {
        let config = self.current.lock().unwrap_or_else(|e| e.into_inner());
        (self.generation.load(Ordering::Acquire), Arc::clone(&config))
    }

    /// Reads the certificate and key again; on failure the old ones stay.
    fn reload(&self) -> Result<()> {
        let fresh = Self::build(&self.cert, self.resumption, self.zero_rtt, false)?;
        let mut fresh = Arc::unwrap_or_clone(fresh);
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        // Tickets issued before the reload stay good.
        fresh.session_storage = Arc::clone(&current.session_storage);
        fresh.ticketer = Arc::clone(&current.ticketer);
        *current = Arc::new(fresh);
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A thread that reloads on every SIGHUP, for as long as the process
    /// lives.
    fn reload_on_sighup(self: &Arc<Self>) -> Result<()> {
        let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
            .context("cannot install a SIGHUP handler")?;
        let tls = Arc::clone(self);
        std::thread::Builder::new()
            .name("artq-reload".into())
            .spawn(move || {
                for _ in signals.forever() {
                    match tls.reload() {
                        Ok(()) => eprintln!(
                            "artq serve: SIGHUP: certificate and key reloaded; new connections present them"
                        ),
                        Err(e) => eprintln!(
                            "artq serve: SIGHUP: cannot reload the certificate and key, keeping the old ones: {e:#}"
                        ),
                    }
                }
            })
            .context("cannot start the reload thread")?;
        Ok(())
    }
}

/// `path` opened for appending (`-`: stdout), for the flag `flag`.
fn open_append(
    path: Option<&std::path::Path>,
    flag: &str,
) -> Result<Option<Box<dyn Write + Send>>> {
    Ok(match path {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(io::stdout())),
        Some(p) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open {flag} {}", p.display()))?,
        )),
    })
}

/// Appends `line` as one JSON line to `out` (shared by the workers), or
/// warns that `flag`'s file cannot be written.
fn write_json_line(out: &Mutex<Box<dyn Write + Send>>, line: &impl serde::Serialize, flag: &str) {
    let mut out = out.lock().unwrap_or_else(|e| e.into_inner());
    let written = serde_json::to_string(line)
        .map_err(io::Error::other)
        .and_then(|text| writeln!(out, "{text}"))
        .and_then(|()| out.flush());
    if let Err(e) = written {
        eprintln!("warning: cannot write {flag}: {e}");
    }
}

/// What every worker shares beside the TLS configuration.
struct Shared {
    stats_json: Option<Mutex<Box<dyn Write + Send>>>,
    /// `--access-log`: one JSON line per finished request.
    access_log: Option<Mutex<Box<dyn Write + Send>>>,
    /// `--metrics`: the totals every worker adds to.
    metrics: Option<Arc<ServerMetrics>>,
    /// The workers' common clock (log times).
    clock: crate::udp::Clock,
    /// Connections accepted by all workers (qlog file names).
    accepted: AtomicU64,
    /// Set by SIGINT and SIGTERM.
    stop: Arc<AtomicBool>,
}

/// Everything a worker needs to build its endpoint and application.
#[derive(Clone)]
struct Worker {
    app: ServeApp,
    alt_svc: Option<String>,
    transport: Arc<TransportConfig>,
    preferred_address: PreferredAddresses,
    retry: RetryMode,
    seed: RngSeed,
    keys: StaticKeys,
    threads: usize,
    qlog: Option<PathBuf>,
    scheme: String,
    tls: Arc<TlsSource>,
    shared: Arc<Shared>,
}

impl Worker {
    /// The application a worker runs, and a description of what it serves
    /// (`announce`: print warnings, once for all workers).
    fn app(&self, announce: bool, index: usize) -> Result<(Box<dyn App>, String)> {
        Ok(match &self.app {
            ServeApp::Http { root, edge } => {
                let edge = edge.as_ref().map(|e| e.build(self.threads)).transpose()?;
                let directory = root
                    .as_ref()
                    .map(|root| Directory::new(root).map_err(|e| anyhow::anyhow!("--root {e}")))
                    .transpose()?;
                let mut serving = Protocol::ALL.map(Protocol::name).join(" and ");
                if let Some(d) = &directory {
                    serving += &format!(" from {}", d.root().display());
                }
                if let Some(edge) = &edge {
                    for u in edge.routes().upstreams() {
                        serving +=
                            &format!(", {} from http://{} ({})", u.prefix, u.authority, u.addr);
                    }
                    if announce && directory.is_some() && edge.routes().claims_root() {
                        eprintln!(
                            "artq serve: warning: an upstream claims every path (/), so --root is never used"
                        );
                    }
                }
                // Generated content beside the directory: /live/<kbps>/<seconds>
                // and /dash/<seconds>/manifest.mpd (docs/video.md), and the RPC
                // endpoint /rpc/<index>/<size> (docs/apps.md).
                let mut content = apps::video::video_content(CONTENT_SEED).mount(
                    apps::rpc::RPC_PREFIX,
                    Box::new(apps::rpc::RpcContent { seed: CONTENT_SEED }),
                );
                if let Some(directory) = directory {
                    content = content.mount("/", Box::new(directory));
                }
                let mut app = HttpServer::new(
                    Box::new(content),
                    ServerOptions {
                        alt_svc: self.alt_svc.clone(),
                    },
                );
                if let Some(edge) = edge {
                    app = app.with_edge(edge);
                }
                if self.shared.access_log.is_some() {
                    app = app.with_request_log(self.request_log(index));
                }
                (Box::new(app), serving)
            }
            ServeApp::Messages(params) => {
                let serving = format!(
                    "{} messages of {} bytes at {}/s to every client",
                    params.messages, params.size, params.rate
                );
                (Box::new(MessageSender::new(*params, CONTENT_SEED)), serving)
            }
        })
    }

    /// Worker `index`'s writer of `--access-log` lines.
    fn request_log(&self, index: usize) -> apps::server::RequestLog {
        let shared = Arc::clone(&self.shared);
        let scheme = self.scheme.clone();
        let worker = (self.threads > 1).then_some(index);
        Box::new(move |r: &RequestRecord| {
            let Some(out) = &shared.access_log else {
                return;
            };
            let line = AccessLogLine {
                time: humantime::format_rfc3339_millis(shared.clock.wall(r.started)).to_string(),
                client: r.remote.to_string(),
                alpn: &r.alpn,
                method: &r.method,
                path: &r.path,
                status: r.status,
                bytes: r.bytes,
                duration_ms: r.ended.saturating_duration_since(r.started).as_secs_f64() * 1e3,
                completed: r.completed,
                scheme: &scheme,
                lost_packets: r.lost_packets,
                replicas: r.replicas,
                connection: r.connection.0,
                worker,
            };
            write_json_line(out, &line, "--access-log");
        })
    }

    /// Serves on `driver` until the shutdown; what the worker did.
    fn run(&self, index: usize, mut driver: Driver, app: Box<dyn App>) -> Result<WorkerSummary> {
        let (mut generation, tls) = self.tls.current();
        let server = ServerConfig {
            tls,
            transport: Arc::clone(&self.transport),
            preferred_address: self.preferred_address,
        };
        let admission = AdmissionConfig {
            retry: self.retry,
            // A browser or a client that comes back within a day skips Retry.
            new_token_lifetime: Some(AdmissionConfig::DEFAULT_NEW_TOKEN_LIFETIME),
            ..AdmissionConfig::default()
        };
        let mut config = EndpointConfig::new(worker_seed(&self.seed, index), Some(server))
            .with_admission(admission)
            .with_transmit_burst(crate::udp::MAX_BATCH)
            .with_static_keys(self.keys.clone());
        if self.threads > 1 {
            config = config
                .with_workers(index, self.threads)
                .map_err(|e| anyhow::anyhow!("--threads: {e}"))?;
        }
        let meter = self
            .shared
            .metrics
            .as_ref()
            .map(|m| Rc::new(RefCell::new(WorkerMeter::new(Arc::clone(m)))));
        let observer = ServeObserver {
            qlog: self.qlog.clone(),
            shared: Arc::clone(&self.shared),
            scheme: self.scheme.clone(),
            worker: (self.threads > 1).then_some(index),
            meter: meter.clone(),
        };
        let mut host = Host::new(Endpoint::new(config), app).with_observer(Box::new(observer));
        let tls = &self.tls;
        let each_turn = |host: &mut Host, forwarded: u64| {
            if tls.generation() != generation {
                let (g, config) = tls.current();
                generation = g;
                host.endpoint_mut().set_server_tls(config);
            }
            if let Some(meter) = &meter {
                let heads = host
                    .app_mut::<HttpServer>()
                    .and_then(HttpServer::edge_mut)
                    .map(Edge::take_head_times)
                    .unwrap_or_default();
                let mut meter = meter.borrow_mut();
                meter.upstream_heads(&heads);
                let edge = host
                    .app::<HttpServer>()
                    .and_then(HttpServer::edge)
                    .map(Edge::counters);
                meter.sample(host.endpoint(), edge, forwarded);
            }
        };
        let mut each_turn = each_turn;
        driver.run_with(
            &mut host,
            Stop {
                when_finished: false,
                deadline: None,
                signal: Some(&self.shared.stop),
                handshake_of: None,
            },
            Some(&mut each_turn),
        )?;
        Ok(WorkerSummary {
            endpoint: host.endpoint().stats(),
            edge: host
                .app::<HttpServer>()
                .and_then(HttpServer::edge)
                .map(Edge::counters),
            forwarded: driver.worker_link().map_or(0, |l| l.forwarded),
            forward_dropped: driver.worker_link().map_or(0, |l| l.forward_dropped),
            accepted: vec![host.app::<HttpServer>().map_or(0, HttpServer::accepted)],
            placed_elsewhere: driver.worker_link().map_or(0, |l| l.placed_elsewhere),
        })
    }
}

/// What the workers did, summed, for the lines at shutdown.
#[derive(Default)]
struct WorkerSummary {
    endpoint: EndpointStats,
    edge: Option<EdgeCounters>,
    forwarded: u64,
    forward_dropped: u64,
    /// Connections each worker accepted, in worker order.
    accepted: Vec<u64>,
    /// New connections placed on another worker than the one that got
    /// their first Initial.
    placed_elsewhere: u64,
}

impl WorkerSummary {
    fn add(mut self, o: &WorkerSummary) -> WorkerSummary {
        self.endpoint += &o.endpoint;
        self.edge = match (self.edge, o.edge) {
            (Some(mut a), Some(b)) => {
                a += &b;
                Some(a)
            }
            (a, b) => a.or(b),
        };
        self.forwarded += o.forwarded;
        self.forward_dropped += o.forward_dropped;
        self.accepted.extend_from_slice(&o.accepted);
        self.placed_elsewhere += o.placed_elsewhere;
        self
    }

    fn print(&self) {
        if let Some(c) = &self.edge {
            eprintln!(
                "artq serve: edge: {} requests, {} sent to origins ({} on reused connections), \
                 {} cache hits, {} stored, {} shared another's origin response; {} answered 502, \
                 {} 504, {} 503; {} cut after the head; {} live viewers cut for falling behind",
                c.requests,
                c.origin_requests,
                c.connections_reused,
                c.cache_hits,
                c.cache_stores,
                c.coalesced,
                c.bad_gateway,
                c.gateway_timeout,
                c.unavailable,
                c.aborted,
                c.live_cut,
            );
        }
        let s = &self.endpoint;
        eprintln!(
            "artq serve: shut down; admission: {} Initials dropped without state, {} refused, \
             {} Retry sent, {} tokens accepted, {} rejected, {} half-open connections expired; \
             {} stateless resets sent; {} datagrams passed between workers ({} dropped)",
            s.initials_dropped,
            s.refused,
            s.retries_sent,
            s.tokens_accepted,
            s.tokens_rejected,
            s.half_open_expired,
            s.stateless_resets_sent,
            self.forwarded,
            self.forward_dropped,
        );
        if self.accepted.len() > 1 {
            let by_worker: Vec<String> = self.accepted.iter().map(u64::to_string).collect();
            eprintln!(
                "artq serve: connections accepted by worker: {}; {} placed on another worker \
                 than the one that got their first Initial",
                by_worker.join(", "),
                self.placed_elsewhere,
            );
        }
    }
}

/// Worker `index`'s seed: the server's for the first, a distinct one
/// derived from it for the others (their connection IDs and secrets must
/// not repeat each other's).
fn worker_seed(seed: &RngSeed, index: usize) -> RngSeed {
    if index == 0 {
        return *seed;
    }
    let mut input = Vec::with_capacity(41);
    match seed {
        RngSeed::Fixed(n) => input.extend_from_slice(&n.to_le_bytes()),
        RngSeed::Secret(s) => input.extend_from_slice(s),
    }
    input.extend_from_slice(&(index as u64).to_le_bytes());
    let digest = ring::digest::digest(&ring::digest::SHA256, &input);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    match seed {
        RngSeed::Fixed(_) => {
            RngSeed::Fixed(u64::from_le_bytes(out[..8].try_into().unwrap_or_default()))
        }
        RngSeed::Secret(_) => RngSeed::Secret(out),
    }
}

/// Largest `--host-key` file read.
const MAX_HOST_KEY: u64 = 4096;

/// The keys every worker shares. The address-validation token key follows
/// from the process's seed (tokens die with the process: their times are
/// the process's clock). The stateless reset key follows from `--host-key`
/// when given, so that a restarted server resets the connections its
/// predecessor held (RFC 9000 §10.3), else from the seed too.
fn static_keys(seed: &RngSeed, host_key: Option<&std::path::Path>) -> Result<StaticKeys> {
    let mut secret = b"artq serve keys".to_vec();
    match seed {
        RngSeed::Fixed(n) => secret.extend_from_slice(&n.to_le_bytes()),
        RngSeed::Secret(s) => secret.extend_from_slice(s),
    }
    let mut keys = StaticKeys::from_secret(&secret);
    if let Some(path) = host_key {
        let shown = path.display();
        let len = std::fs::metadata(path)
            .with_context(|| format!("cannot read --host-key {shown}"))?
            .len();
        anyhow::ensure!(
            (32..=MAX_HOST_KEY).contains(&len),
            "--host-key {shown}: {len} bytes; it must hold 32 to {MAX_HOST_KEY} bytes of secret \
             (e.g. `head -c 32 /dev/urandom > {shown}`)"
        );
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read --host-key {shown}"))?;
        keys.reset = StaticKeys::from_secret(&bytes).reset;
    }
    Ok(keys)
}

/// Bind the preferred addresses (`--preferred-address`) beside the first
/// socket; what to offer is what was bound (port 0 picks one).
fn bind_preferred(driver: &mut Driver, addrs: &[SocketAddr]) -> Result<PreferredAddresses> {
    let mut wanted = PreferredAddresses::default();
    for a in addrs {
        wanted
            .add(*a)
            .map_err(|e| anyhow::anyhow!("--preferred-address {a}: {e}"))?;
        anyhow::ensure!(
            !a.ip().is_unspecified(),
            "--preferred-address {a}: a client needs an address it can send to, not {}",
            a.ip()
        );
    }
    let mut bound = PreferredAddresses::default();
    for a in wanted.iter() {
        let b = driver
            .bind_also(a)
            .with_context(|| format!("cannot bind --preferred-address {a}"))?;
        bound
            .add(b)
            .map_err(|e| anyhow::anyhow!("--preferred-address {a}: {e}"))?;
    }
    Ok(bound)
}

/// base64(SHA-256(SubjectPublicKeyInfo DER)): how Chromium names a key to
/// trust (`--ignore-certificate-errors-spki-list`).
fn spki_sha256_base64(spki_der: &[u8]) -> String {
    use base64::Engine;
    let digest = ring::digest::digest(&ring::digest::SHA256, spki_der);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// What `artq serve` does beside serving: a qlog file per connection, and
/// one statistics line on stderr (and a JSON line with `--stats-json`)
/// when a connection ends.
struct ServeObserver {
    qlog: Option<PathBuf>,
    shared: Arc<Shared>,
    scheme: String,
    /// This worker's index when there are several (it prefixes the
    /// connection numbers in the lines, which each worker counts alone).
    worker: Option<usize>,
    /// `--metrics`: this worker's meter.
    meter: Option<SharedWorkerMeter>,
}

/// One line of `--access-log` (docs/operations.md lists the fields).
#[derive(serde::Serialize)]
struct AccessLogLine<'a> {
    /// When the request was read (RFC 3339, UTC).
    time: String,
    client: String,
    alpn: &'a str,
    method: &'a str,
    path: &'a str,
    /// 0 when no response head was sent.
    status: u16,
    /// Response body bytes sent.
    bytes: u64,
    duration_ms: f64,
    /// False when the response was cut (client cancelled, connection
    /// ended, origin failed mid-body).
    completed: bool,
    scheme: &'a str,
    /// The connection's lost packets and replicas so far.
    lost_packets: u64,
    replicas: u64,
    connection: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<usize>,
}

/// One line of `--stats-json`: who the connection was, and its counters
/// (the transport's `ConnectionStats`, whose recovery figures come from
/// the retransmission engine's records as `artq sim`'s do).
#[derive(serde::Serialize)]
struct ConnectionSummary<'a> {
    connection: usize,
    /// The worker thread that served it (`--threads`), when there are
    /// several: `connection` numbers are per worker.
    #[serde(skip_serializing_if = "Option::is_none")]
    worker: Option<usize>,
    remote: String,
    /// Which of the server's addresses the connection ended on (its
    /// preferred address if the client moved there).
    local: Option<String>,
    /// Our ECT(0) marks were validated by the client's ECN counts
    /// (`--ecn`).
    ecn_validated: bool,
    alpn: &'a str,
    scheme: &'a str,
    ended: String,
    retried: bool,
    /// The TLS session was resumed with a ticket (by any worker's).
    resumed: bool,
    /// The QUIC version the connection ran in ("v1", "v2").
    quic_version: &'static str,
    #[serde(flatten)]
    stats: &'a transport::ConnectionStats,
}

impl Observer for ServeObserver {
    fn on_connection(&mut self, h: ConnectionHandle, conn: &mut Connection) {
        if let (Some(meter), Some(metrics)) = (&self.meter, &self.shared.metrics) {
            meter.borrow_mut().opened(h);
            conn.subscribe(Box::new(ConnectionMeter::new(Arc::clone(metrics))));
        }
        let accepted = self.shared.accepted.fetch_add(1, Ordering::Relaxed) + 1;
        let Some(dir) = &self.qlog else { return };
        let path = dir.join(format!("server-{accepted}.sqlog"));
        match File::create(&path) {
            Ok(f) => conn.subscribe(Box::new(QlogWriter::new(
                BufWriter::new(f),
                "artq serve",
                true,
            ))),
            Err(e) => eprintln!("warning: cannot write qlog {}: {e}", path.display()),
        }
    }

    fn on_event(&mut self, h: ConnectionHandle, conn: &mut Connection, event: &Event) {
        if let (Event::Connected, Some(meter)) = (event, &self.meter) {
            meter.borrow_mut().connected(conn);
        }
        let Event::ConnectionLost(reason) = event else {
            return;
        };
        if let Some(meter) = &self.meter {
            meter.borrow_mut().ended(h, conn, reason);
        }
        let s = conn.stats();
        let alpn = conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_else(|| "-".into());
        if let Some(out) = &self.shared.stats_json {
            let line = ConnectionSummary {
                connection: h.0,
                worker: self.worker,
                remote: conn.remote_address().to_string(),
                local: conn.local_address().map(|a| a.to_string()),
                ecn_validated: conn.ecn_validated(),
                alpn: &alpn,
                scheme: &self.scheme,
                ended: reason.to_string(),
                retried: conn.was_retried(),
                resumed: conn.is_resumed(),
                quic_version: conn.version().name(),
                stats: &s,
            };
            write_json_line(out, &line, "--stats-json");
        }
        let retried = if conn.was_retried() {
            ", after Retry"
        } else {
            ""
        };
        let number = match self.worker {
            Some(w) => format!("{w}.{}", h.0),
            None => h.0.to_string(),
        };
        eprintln!(
            "connection {number} from {} ({alpn}, QUIC {}) ended ({reason}): sent {} packets ({} bytes), lost {}, replicas {}, n_max {}, n_hist {:?}, cwnd {} B, srtt {:.1} ms, min_rtt {:.1} ms{retried}",
            conn.remote_address(),
            conn.version(),
            s.packets_sent,
            s.bytes_sent,
            s.lost_packets,
            s.replicas,
            s.recovery.n_max,
            s.recovery.n_hist,
            s.cwnd,
            s.srtt.as_secs_f64() * 1e3,
            s.min_rtt.as_secs_f64() * 1e3,
        );
    }
}
