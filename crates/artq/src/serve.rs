//! `artq serve`: the `apps` HTTP server (HTTP/3 and hq-interop, chosen per
//! connection by ALPN) on a UDP socket, answering from a directory, with
//! generated video under `/live` (live streams paced in real time) and
//! `/dash` (DASH manifests and segments).

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use anyhow::{Context, Result};
use apps::content::Directory;
use apps::edge::{Edge, EdgeOptions, Routes, Upstream, UpstreamSpec};
use apps::messages::{MessageParams, MessageSender};
use apps::server::{HttpServer, ServerOptions};
use apps::{App, Host, Observer, Protocol};
use transport::events::QlogWriter;
use transport::{
    AdmissionConfig, Connection, ConnectionHandle, Endpoint, EndpointConfig, Event,
    PreferredAddresses, RetryMode, RngSeed, ServerConfig, TransportConfig,
};

use crate::udp::{Driver, Stop};

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
    /// Issue session tickets and accept resumption and 0-RTT
    /// ([`transport::crypto::enable_server_resumption`]).
    pub resumption: bool,
    /// Also listen on these addresses and offer them as the preferred
    /// address (RFC 9000 §9.6): at most one IPv4 and one IPv6.
    pub preferred_address: Vec<SocketAddr>,
}

/// What `artq serve` runs on each connection.
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
    /// The edge: parses the upstreams and resolves their hosts (once, now:
    /// the first address of each name is used).
    fn build(&self) -> Result<Edge> {
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
        options.cache_size = self.cache_size;
        options.upstream_timeout = self.upstream_timeout;
        Ok(Edge::new(options))
    }
}

/// Runs the server until SIGINT or SIGTERM, then shuts down gracefully
/// (HTTP/3 GOAWAY, in-flight responses finish, at most
/// [`crate::udp::SHUTDOWN_GRACE`]).
pub fn run(opts: ServeOptions) -> Result<()> {
    let scheme = opts.transport.policy.name();
    let (chain, key) = match &opts.cert {
        Some((c, k)) => (
            transport::crypto::load_pem_chain(c)?,
            transport::crypto::load_pem_key(k)?,
        ),
        None => {
            // ECDSA P-256: the one algorithm every browser takes (Chromium
            // offers no Ed25519); the key comes from the OS RNG.
            let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)
                .context("cannot generate a key for the self-signed certificate")?;
            let spki = spki_sha256_base64(&key.public_key_der());
            eprintln!(
                "artq serve: self-signed certificate for localhost, 127.0.0.1 and ::1; \
                 its key's SPKI SHA-256 (for Chromium's --ignore-certificate-errors-spki-list): {spki}"
            );
            transport::crypto::self_signed_with_key(&["localhost", "127.0.0.1", "::1"], key)?
        }
    };
    let mut tls =
        transport::crypto::server_config(chain, key, &Protocol::alpn_list(&Protocol::ALL))?;
    if opts.resumption {
        tls = transport::crypto::enable_server_resumption(tls);
    }
    if let Some(dir) = &opts.qlog {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("cannot create --qlog {}", dir.display()))?;
    }
    let mut driver =
        Driver::bind(opts.listen).with_context(|| format!("cannot bind {}", opts.listen))?;
    let addr = driver.local_addr()?;
    let preferred_address = bind_preferred(&mut driver, &opts.preferred_address)?;
    let server = ServerConfig {
        tls,
        transport: Arc::new(opts.transport),
        preferred_address,
    };
    let alt_svc = match opts.alt_svc {
        None => Some(format!("h3=\":{}\"; ma=86400", addr.port())),
        Some(v) if v.is_empty() => None,
        Some(v) => Some(v),
    };
    let (app, serving): (Box<dyn App>, String) = match opts.app {
        ServeApp::Http { root, edge } => {
            let edge = edge.as_ref().map(EdgeArgs::build).transpose()?;
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
                    serving += &format!(", {} from http://{} ({})", u.prefix, u.authority, u.addr);
                }
                if directory.is_some() && edge.routes().claims_root() {
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
            let mut app = HttpServer::new(Box::new(content), ServerOptions { alt_svc });
            if let Some(edge) = edge {
                app = app.with_edge(edge);
            }
            (Box::new(app), serving)
        }
        ServeApp::Messages(params) => {
            let serving = format!(
                "{} messages of {} bytes at {}/s to every client",
                params.messages, params.size, params.rate
            );
            (Box::new(MessageSender::new(params, CONTENT_SEED)), serving)
        }
    };
    let admission = AdmissionConfig {
        retry: opts.retry,
        // A browser or a client that comes back within a day skips Retry.
        new_token_lifetime: Some(AdmissionConfig::DEFAULT_NEW_TOKEN_LIFETIME),
        ..AdmissionConfig::default()
    };
    let endpoint = Endpoint::new(
        EndpointConfig::new(opts.seed, Some(server))
            .with_admission(admission)
            .with_transmit_burst(crate::udp::MAX_BATCH),
    );
    let stats_json: Option<Box<dyn Write>> = match &opts.stats_json {
        None => None,
        Some(p) if p.as_os_str() == "-" => Some(Box::new(io::stdout())),
        Some(p) => Some(Box::new(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(p)
                .with_context(|| format!("cannot open --stats-json {}", p.display()))?,
        )),
    };
    let observer = ServeObserver {
        qlog: opts.qlog,
        stats_json,
        scheme: scheme.clone(),
        accepted: 0,
    };
    let mut host = Host::new(endpoint, app).with_observer(Box::new(observer));
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&stop))
            .context("cannot install a signal handler")?;
    }
    // The ready line is a contract (tests and scripts read the address).
    println!("listening on {addr}");
    for p in preferred_address.iter() {
        println!("preferred address {p}");
    }
    io::stdout().flush()?;
    eprintln!("artq serve: {serving}, recovery {scheme}");
    driver.run(
        &mut host,
        Stop {
            when_finished: false,
            deadline: None,
            signal: Some(&stop),
            handshake_of: None,
        },
    )?;
    if let Some(edge) = host.app::<HttpServer>().and_then(HttpServer::edge) {
        let c = edge.counters();
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
    let s = host.endpoint().stats();
    eprintln!(
        "artq serve: shut down; admission: {} Initials dropped without state, {} refused, \
         {} Retry sent, {} tokens accepted, {} rejected, {} half-open connections expired",
        s.initials_dropped,
        s.refused,
        s.retries_sent,
        s.tokens_accepted,
        s.tokens_rejected,
        s.half_open_expired,
    );
    Ok(())
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
    stats_json: Option<Box<dyn Write>>,
    scheme: String,
    accepted: u64,
}

/// One line of `--stats-json`: who the connection was, and its counters
/// (the transport's `ConnectionStats`, whose recovery figures come from
/// the retransmission engine's records as `artq sim`'s do).
#[derive(serde::Serialize)]
struct ConnectionSummary<'a> {
    connection: usize,
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
    /// The QUIC version the connection ran in ("v1", "v2").
    quic_version: &'static str,
    #[serde(flatten)]
    stats: &'a transport::ConnectionStats,
}

impl Observer for ServeObserver {
    fn on_connection(&mut self, _h: ConnectionHandle, conn: &mut Connection) {
        self.accepted += 1;
        let Some(dir) = &self.qlog else { return };
        let path = dir.join(format!("server-{}.sqlog", self.accepted));
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
        let Event::ConnectionLost(reason) = event else {
            return;
        };
        let s = conn.stats();
        let alpn = conn
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned())
            .unwrap_or_else(|| "-".into());
        if let Some(out) = &mut self.stats_json {
            let line = ConnectionSummary {
                connection: h.0,
                remote: conn.remote_address().to_string(),
                local: conn.local_address().map(|a| a.to_string()),
                ecn_validated: conn.ecn_validated(),
                alpn: &alpn,
                scheme: &self.scheme,
                ended: reason.to_string(),
                retried: conn.was_retried(),
                quic_version: conn.version().name(),
                stats: &s,
            };
            let written = serde_json::to_string(&line)
                .map_err(io::Error::other)
                .and_then(|text| writeln!(out, "{text}"))
                .and_then(|()| out.flush());
            if let Err(e) = written {
                eprintln!("warning: cannot write --stats-json: {e}");
            }
        }
        let retried = if conn.was_retried() {
            ", after Retry"
        } else {
            ""
        };
        eprintln!(
            "connection {} from {} ({alpn}, QUIC {}) ended ({reason}): sent {} packets ({} bytes), lost {}, replicas {}, n_max {}, n_hist {:?}, cwnd {} B, srtt {:.1} ms, min_rtt {:.1} ms{retried}",
            h.0,
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
