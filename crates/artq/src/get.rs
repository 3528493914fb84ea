//! `artq get`: download one URL with the artq QUIC stack, over HTTP/3 or
//! hq-interop: the `apps` file client ([`FilesClient`]) with its bodies
//! written to a file, on a UDP socket; or play a live stream (`--live`) or
//! a DASH video (`--dash`) with the same players `artq sim` runs, and
//! report their statistics.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration as StdDuration;

use anyhow::{bail, Context, Result};
use apps::files::ClientError;
use apps::files::{FilesClient, Paths, WriteSink};
use apps::messages::{MessageParams, MessageReceiver, MessageReport};
use apps::rpc::{RpcClient, RPC_PREFIX};
use apps::video::dash::DashPlayer;
use apps::video::live::LivePlayer;
use apps::workload::Playback;
use apps::{App, Host, Observer, Protocol};
use transport::crypto::ServerVerification;
use transport::events::QlogWriter;
use transport::{
    ClientConfig, Connection, ConnectionHandle, Endpoint, EndpointConfig, RngSeed, TransportConfig,
};

use crate::udp::{Driver, Stop};

/// Settings of `artq get`.
pub struct GetOptions {
    /// `https://host:port/path`.
    pub url: String,
    /// Output file; standard output when absent.
    pub output: Option<PathBuf>,
    /// How long the handshake may take before `artq get` gives up, naming
    /// the address that did not answer.
    pub handshake_timeout: std::time::Duration,
    /// Transport settings (receive window, congestion control).
    pub transport: TransportConfig,
    /// Skip certificate verification.
    pub insecure: bool,
    /// Trust these PEM certificates (CA or self-signed server certificate).
    pub ca: Option<PathBuf>,
    /// Give up after this long.
    pub timeout: StdDuration,
    /// Write a qlog of the connection to this file.
    pub qlog: Option<PathBuf>,
    /// The application protocol to speak.
    pub protocol: Protocol,
    /// Seed of the client's random choices (connection IDs included):
    /// secret, from the OS, unless `--seed`.
    pub seed: RngSeed,
    /// What to do with the URL.
    pub mode: GetMode,
    /// Fetch the URL again this many times (file mode), each time on a new
    /// connection after the previous one ended, resuming its session with
    /// a ticket kept in memory and sending the request in 0-RTT when the
    /// server allows it (hq-interop). The output gets the last body.
    pub reconnect: u32,
}

/// How one connection of a run started (`artq get --reconnect`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionStart {
    /// The TLS session was resumed with a ticket.
    pub resumed: bool,
    /// Where the connection stood with 0-RTT at its end.
    pub zero_rtt: transport::ZeroRttStatus,
    /// 0-RTT packets it sent.
    pub zero_rtt_packets: u64,
    /// The QUIC version it ran in.
    pub version: wire::Version,
}

/// What `artq get` does with its URL.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GetMode {
    /// Download the body to the output.
    File,
    /// Play a live stream (`/live/...`) with this start-up delay.
    Live {
        /// The player's start-up delay.
        startup: StdDuration,
    },
    /// Play a DASH video from its manifest (`.../manifest.mpd`).
    Dash,
    /// Make RPC calls to the server's `/rpc` endpoint: ETC-sized requests
    /// and responses, Poisson arrivals (docs/apps.md), one FCT per call.
    Rpc {
        /// Number of calls.
        calls: u64,
        /// Calls per second.
        rate: u64,
    },
    /// Receive RCP's message workload from `artq serve --messages`
    /// (`apps::messages`): the same parameters as the server's.
    Messages {
        /// The workload the server sends.
        params: MessageParams,
    },
}

/// What `artq get --rpc` measured.
#[derive(Clone, Debug)]
pub struct RpcOutcome {
    /// Calls completed.
    pub calls: u64,
    /// Their completion times, from when each was due to its last
    /// response byte (`rpc_fct_ms` of `artq sim --json`).
    pub fct: Option<lab::Summary>,
}

/// Outcome of a download.
#[derive(Debug)]
pub struct GetReport {
    /// Payload bytes received.
    pub bytes: u64,
    /// From the connection attempt to the last byte.
    pub elapsed: StdDuration,
    /// The client connection's counters at the end of the download.
    pub stats: Option<transport::ConnectionStats>,
    /// The player's statistics (`--live`, `--dash`).
    pub playback: Option<Playback>,
    /// The calls' completion times (`--rpc`).
    pub rpc: Option<RpcOutcome>,
    /// What arrived of the message workload (`--messages`).
    pub messages: Option<MessageReport>,
    /// How each connection started, in order (one unless `--reconnect`).
    pub connections: Vec<ConnectionStart>,
    /// The server's preferred address the (last) connection moved to
    /// (RFC 9000 §9.6), if it did.
    pub moved_to: Option<std::net::SocketAddr>,
}

/// Split `https://host:port/path` into (host, port, path).
pub fn parse_url(url: &str) -> Result<(String, u16, String)> {
    let rest = url
        .strip_prefix("https://")
        .with_context(|| format!("'{url}': only https:// URLs are supported"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
        let (h, p) = v6
            .split_once(']')
            .with_context(|| format!("'{url}': bad IPv6 address"))?;
        (h.to_string(), p.strip_prefix(':').unwrap_or("443"))
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), p),
            None => (authority.to_string(), "443"),
        }
    };
    if host.is_empty() {
        bail!("'{url}': missing host");
    }
    let port: u16 = port
        .parse()
        .with_context(|| format!("'{url}': bad port '{port}'"))?;
    Ok((host, port, path.to_string()))
}

/// Downloads the URL.
pub fn run(opts: GetOptions) -> Result<GetReport> {
    let (host_name, port, path) = parse_url(&opts.url)?;
    let remote: SocketAddr = (host_name.as_str(), port)
        .to_socket_addrs()
        .with_context(|| format!("cannot resolve {host_name}"))?
        .next()
        .with_context(|| format!("{host_name} has no address"))?;
    let verification = if opts.insecure {
        ServerVerification::Insecure
    } else if let Some(ca) = &opts.ca {
        ServerVerification::Roots(transport::crypto::load_pem_chain(ca)?)
    } else {
        bail!("no way to verify the server: pass --ca FILE (its certificate) or --insecure");
    };
    let mut tls = transport::crypto::client_config(verification, &[opts.protocol.alpn()])?;
    if opts.reconnect > 0 {
        if opts.mode != GetMode::File {
            bail!("--reconnect fetches a file again: it does not combine with --live, --dash or --rpc");
        }
        tls = transport::crypto::enable_client_resumption(tls);
    }
    let client = ClientConfig {
        tls,
        transport: Arc::new(opts.transport.clone()),
        server_name: host_name.clone(),
    };
    let bind: SocketAddr = if remote.is_ipv6() {
        "[::]:0".parse()?
    } else {
        "0.0.0.0:0".parse()?
    };
    let mut sink: Option<Box<dyn Write>> = Some(match &opts.output {
        // As large as the body reads (files::CHUNK): a full read goes to
        // the file without a copy into the buffer, short ones are gathered.
        Some(p) => Box::new(BufWriter::with_capacity(
            apps::files::CHUNK,
            File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        )),
        None => Box::new(BufWriter::new(io::stdout())),
    });
    let authority = if port == 443 {
        host_name.clone()
    } else if host_name.contains(':') {
        format!("[{host_name}]:{port}")
    } else {
        format!("{host_name}:{port}")
    };
    let qlog = match &opts.qlog {
        Some(q) => {
            Some(File::create(q).with_context(|| format!("cannot create --qlog {}", q.display()))?)
        }
        None => None,
    };
    let mut driver = Driver::bind(bind).context("cannot bind a UDP socket")?;
    driver.report_unreachable();
    let mut run = ConnectionRun {
        opts: &opts,
        client: &client,
        remote,
        authority,
        path,
        qlog,
        seeds: None,
    };
    let mut connections = Vec::new();
    for _ in 0..opts.reconnect {
        // Earlier connections: their bodies are counted, not written.
        let (report, start) = run.once(&mut driver, Box::new(io::sink()))?;
        connections.push(start);
        drop(report);
    }
    let sink = sink.take().context("the output was already used")?;
    let (mut report, start) = run.once(&mut driver, sink)?;
    connections.push(start);
    report.connections = connections;
    Ok(report)
}

/// What one connection of `artq get` needs.
struct ConnectionRun<'a> {
    opts: &'a GetOptions,
    client: &'a ClientConfig,
    remote: SocketAddr,
    authority: String,
    path: String,
    /// The qlog file, for the first connection only.
    qlog: Option<File>,
    /// Seeds of the connections after the first.
    seeds: Option<transport::rng::StackRng>,
}

impl ConnectionRun<'_> {
    /// One connection: fetch (or play, or call) the URL until done.
    fn once(
        &mut self,
        driver: &mut Driver,
        sink: Box<dyn Write>,
    ) -> Result<(GetReport, ConnectionStart)> {
        let opts = self.opts;
        let (authority, path) = (self.authority.clone(), self.path.clone());
        let app = self.app(sink, authority, path)?;
        // The first connection's endpoint takes the seed as given; each
        // later one a child of it, so connection IDs never repeat.
        let seed = match self.seeds.as_mut() {
            None => {
                self.seeds = Some(transport::rng::StackRng::new(opts.seed));
                opts.seed
            }
            Some(rng) => rng.child_seed(),
        };
        let endpoint = Endpoint::new(EndpointConfig::new(seed, None));
        let observer = GetObserver {
            qlog: self.qlog.take(),
        };
        let mut host = Host::new(endpoint, app).with_observer(Box::new(observer));
        let started = driver.clock().now();
        let h = host.connect(started, self.client, self.remote)?;
        let report = fetch(opts, driver, &mut host, h, started)?;
        let start = host
            .endpoint()
            .connection(h)
            .map(|c| ConnectionStart {
                resumed: c.is_resumed(),
                zero_rtt: c.zero_rtt_status(),
                zero_rtt_packets: c.stats().zero_rtt_packets_sent,
                version: c.version(),
            })
            .unwrap_or(ConnectionStart {
                resumed: false,
                zero_rtt: transport::ZeroRttStatus::NotAttempted,
                zero_rtt_packets: 0,
                version: wire::Version::V1,
            });
        Ok((report, start))
    }

    /// The application for the mode.
    fn app(&self, sink: Box<dyn Write>, authority: String, path: String) -> Result<Box<dyn App>> {
        let opts = self.opts;
        Ok(match opts.mode {
            GetMode::File => Box::new(FilesClient::new(
                opts.protocol,
                Some(authority),
                Paths::List(vec![path]),
                Box::new(WriteSink::new(sink)),
            )),
            GetMode::Live { startup } => Box::new(FilesClient::with_fetcher(
                opts.protocol,
                Some(authority),
                Box::new(LivePlayer::new(path, startup)),
            )),
            GetMode::Dash => Box::new(FilesClient::with_fetcher(
                opts.protocol,
                Some(authority),
                Box::new(DashPlayer::new(path)),
            )),
            GetMode::Rpc { calls, rate } => {
                let endpoint = path.trim_end_matches('/');
                if endpoint != RPC_PREFIX {
                    bail!(
                    "--rpc calls the server's RPC endpoint: the URL's path must be {RPC_PREFIX} \
                     (artq serve's), not '{path}'"
                );
                }
                if calls == 0 || rate == 0 || rate > apps::rpc::MAX_RATE {
                    bail!(
                        "--rpcs must be at least 1 and --rpc-rate in 1..={}",
                        apps::rpc::MAX_RATE
                    );
                }
                // The server generates its answers from its content seed; the
                // calls' sizes and schedule derive from the same seed.
                Box::new(RpcClient::new(
                    opts.protocol,
                    Some(authority),
                    crate::serve::CONTENT_SEED,
                    calls,
                    rate,
                ))
            }
            GetMode::Messages { params } => Box::new(MessageReceiver::new(params)),
        })
    }
}

/// Drive `host` (its client connection `h`, opened at `started`) until the
/// application is done, and say what it got.
fn fetch(
    opts: &GetOptions,
    driver: &mut Driver,
    host: &mut Host,
    h: ConnectionHandle,
    started: wire::time::Instant,
) -> Result<GetReport> {
    let deadline = std::time::Instant::now() + opts.timeout;
    let params_size = match opts.mode {
        GetMode::Messages { params } => params.size,
        _ => 0,
    };
    let report = |host: &Host| -> Progress {
        if let Some(c) = host.app::<MessageReceiver>() {
            let r = c.report();
            return Progress {
                bytes_received: r.delivered.saturating_mul(u64::from(params_size)),
                done_at: r.done_at,
                error: r.error.clone().map(ClientError::Connection),
            };
        }
        if let Some(c) = host.app::<RpcClient>() {
            let r = c.report();
            return Progress {
                bytes_received: r.bytes_received,
                done_at: r.done_at,
                error: r.error.clone(),
            };
        }
        host.app::<FilesClient>()
            .map(|c| {
                let r = c.report();
                Progress {
                    bytes_received: r.bytes_received,
                    done_at: r.done_at,
                    error: r.error.clone(),
                }
            })
            .unwrap_or_default()
    };
    // First the handshake, within its own timeout: a server that does
    // not answer is named at once, not after the idle timeout.
    let handshake_by = (std::time::Instant::now() + opts.handshake_timeout).min(deadline);
    let first = driver.run(
        host,
        Stop {
            when_finished: true,
            deadline: Some(handshake_by),
            signal: None,
            handshake_of: Some(h),
        },
    );
    match first {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            let remote = host
                .endpoint()
                .connection(h)
                .map(|c| c.remote_address().to_string())
                .unwrap_or_default();
            bail!(
                "timed out after {:?}: no answer from {remote}, the handshake did not \
                 complete (--handshake-timeout {:?}, --timeout {:?})",
                opts.handshake_timeout.min(opts.timeout),
                opts.handshake_timeout,
                opts.timeout
            )
        }
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
            let remote = host
                .endpoint()
                .connection(h)
                .map(|c| c.remote_address().to_string())
                .unwrap_or_default();
            bail!("connection refused: nothing listens on UDP {remote} (ICMP port unreachable)")
        }
        Err(e) => return Err(e.into()),
    }
    match driver.run(
        host,
        Stop {
            when_finished: true,
            deadline: Some(deadline),
            signal: None,
            handshake_of: None,
        },
    ) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::TimedOut => {
            bail!(
                "timed out after {:?} ({} bytes received)",
                opts.timeout,
                report(host).bytes_received
            )
        }
        Err(e) => return Err(e.into()),
    }
    let r = report(host);
    if let Some(e) = r.error {
        bail!(explain(&e));
    }
    let rpc = host.app::<RpcClient>().map(|c| {
        let mut fct: Vec<wire::time::Duration> = c
            .report()
            .calls
            .iter()
            .map(|t| t.completed.saturating_duration_since(t.requested))
            .collect();
        RpcOutcome {
            calls: fct.len() as u64,
            fct: lab::Summary::of(&mut fct),
        }
    });
    let playback = host.app::<FilesClient>().and_then(|c| match opts.mode {
        GetMode::File | GetMode::Rpc { .. } | GetMode::Messages { .. } => None,
        GetMode::Live { .. } => c
            .fetcher::<LivePlayer>()
            .map(|p| Playback::Live(p.report(None))),
        GetMode::Dash => c
            .fetcher::<DashPlayer>()
            .map(|p| Playback::Dash(p.report(None))),
    });
    let Some(done) = r.done_at else {
        bail!("connection ended before the download completed");
    };
    Ok(GetReport {
        bytes: r.bytes_received,
        elapsed: done.saturating_duration_since(started),
        stats: host.endpoint().connection(h).map(Connection::stats),
        moved_to: host
            .endpoint()
            .connection(h)
            .and_then(Connection::moved_to_preferred_address),
        playback,
        rpc,
        messages: host.app::<MessageReceiver>().map(|c| c.report().clone()),
        connections: Vec::new(),
    })
}

/// How connection `n` (from 1) of a `--reconnect` run started, in words:
/// `connection 2: resumed, 0-RTT accepted, 1 0-RTT packets sent`.
pub fn connection_line(n: usize, c: &ConnectionStart) -> String {
    let session = if c.resumed {
        "resumed"
    } else {
        "full handshake"
    };
    let early = match c.zero_rtt {
        transport::ZeroRttStatus::NotAttempted => "no 0-RTT",
        transport::ZeroRttStatus::Sending => "0-RTT unanswered",
        transport::ZeroRttStatus::Accepted => "0-RTT accepted",
        transport::ZeroRttStatus::Rejected => "0-RTT rejected",
    };
    format!(
        "connection {n}: {session}, {early}, {} 0-RTT packets sent",
        c.zero_rtt_packets
    )
}

/// What the client has done so far, whichever application it runs.
#[derive(Default)]
struct Progress {
    bytes_received: u64,
    done_at: Option<wire::time::Instant>,
    error: Option<apps::files::ClientError>,
}

/// The RPC calls' outcome as one JSON object (`artq get --rpc --stats`),
/// with the metric names of `artq sim --json`.
pub fn rpc_json(r: &RpcOutcome) -> serde_json::Value {
    serde_json::json!({
        "workload": "rpc",
        "rpcs": r.calls,
        "rpc_fct_ms": r.fct,
    })
}

/// What arrived of the message workload as one JSON object (`artq get
/// --messages --stats`), with the names of `artq sim --json` where they
/// exist. No latency: the sender's generation stamps are read from its own
/// clock, which the receiver's does not share.
pub fn messages_json(r: &MessageReport) -> serde_json::Value {
    serde_json::json!({
        "workload": "messages",
        "messages": r.generated,
        "delivered": r.delivered,
        "delivery_ratio": r.delivery_ratio(),
        "duplicates": r.duplicates,
        "malformed": r.malformed,
    })
}

/// What arrived of the message workload in words (one line).
pub fn messages_line(r: &MessageReport) -> String {
    format!(
        "messages: {} of {} delivered (ratio {:.4}), {} duplicates, {} malformed",
        r.delivered,
        r.generated,
        r.delivery_ratio(),
        r.duplicates,
        r.malformed
    )
}

/// The RPC calls' outcome in words (one line).
pub fn rpc_line(r: &RpcOutcome) -> String {
    match &r.fct {
        Some(s) => format!(
            "rpc: {} calls, FCT p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms, mean {:.1} ms",
            r.calls, s.p50, s.p95, s.p99, s.max, s.mean
        ),
        None => "rpc: no call completed".into(),
    }
}

/// A player's statistics as one JSON object (`artq get --stats`), with
/// the metric names of `artq sim --json`.
pub fn playback_json(p: &Playback) -> serde_json::Value {
    let ms = |d: Option<wire::time::Duration>| d.map(|d| d.as_secs_f64() * 1e3);
    match p {
        Playback::Live(r) => serde_json::json!({
            "workload": "live",
            "frames": r.frames,
            "video_frames": r.video_frames,
            "played_s": r.playout.played.as_secs_f64(),
            "avg_bitrate_kbps": r.avg_bitrate_kbps,
            "startup_ms": ms(r.playout.startup),
            "freezes": r.playout.stalls,
            "frozen_ms": r.playout.stalled.as_secs_f64() * 1e3,
            "freeze_count": r.freeze_count,
            "freeze_ms": r.freeze_ms,
        }),
        Playback::Dash(r) => serde_json::json!({
            "workload": "dash",
            "segments": r.segments,
            "played_s": r.playout.played.as_secs_f64(),
            "avg_bitrate_kbps": r.avg_bitrate_kbps,
            "startup_ms": ms(r.playout.startup),
            "rebuffer_count": r.playout.stalls,
            "rebuffer_ms": r.playout.stalled.as_secs_f64() * 1e3,
            "bitrate_switches": r.switches,
        }),
    }
}

/// A player's statistics in words (one line).
pub fn playback_line(p: &Playback) -> String {
    let startup = |d: Option<wire::time::Duration>| {
        d.map_or("-".into(), |d| format!("{:.0} ms", d.as_secs_f64() * 1e3))
    };
    match p {
        Playback::Live(r) => format!(
            "live: {} frames, {:.1} s played at {:.1} kbit/s, start-up {}, {} freezes ({:.1} ms frozen): {:.2} freezes and {:.1} ms per 100 s",
            r.frames,
            r.playout.played.as_secs_f64(),
            r.avg_bitrate_kbps,
            startup(r.playout.startup),
            r.playout.stalls,
            r.playout.stalled.as_secs_f64() * 1e3,
            r.freeze_count,
            r.freeze_ms
        ),
        Playback::Dash(r) => format!(
            "dash: {} segments, {:.1} s played at {:.1} kbit/s average, start-up {}, {} rebufferings ({:.2} s), {} bitrate switches",
            r.segments,
            r.playout.played.as_secs_f64(),
            r.avg_bitrate_kbps,
            startup(r.playout.startup),
            r.playout.stalls,
            r.playout.stalled.as_secs_f64(),
            r.switches
        ),
    }
}

/// A client error in a user's words.
fn explain(e: &apps::files::ClientError) -> String {
    use apps::files::ClientError;
    match e {
        ClientError::Status { status: 404, .. } => {
            "the server answered 404 Not Found: is the path right?".into()
        }
        ClientError::Status { status, .. } => format!("the server answered {status}"),
        ClientError::Stream { reason, .. } if reason.contains("reset") => {
            format!("the server refused the request ({reason}): is the path right?")
        }
        ClientError::Stream { reason, .. } => format!("stream error: {reason}"),
        ClientError::Output { reason, .. } => format!("cannot write output: {reason}"),
        ClientError::Connection(reason) => format!("connection lost: {reason}"),
        other => other.to_string(),
    }
}

/// `--qlog`: subscribes a qlog writer to the connection.
struct GetObserver {
    qlog: Option<File>,
}

impl Observer for GetObserver {
    fn on_connection(&mut self, _h: ConnectionHandle, conn: &mut Connection) {
        if let Some(f) = self.qlog.take() {
            conn.subscribe(Box::new(QlogWriter::new(
                BufWriter::new(f),
                "artq get",
                false,
            )));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::parse_url;

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("https://127.0.0.1:4433/a/b").unwrap(),
            ("127.0.0.1".into(), 4433, "/a/b".into())
        );
        assert_eq!(
            parse_url("https://localhost").unwrap(),
            ("localhost".into(), 443, "/".into())
        );
        assert_eq!(
            parse_url("https://[::1]:5/x").unwrap(),
            ("::1".into(), 5, "/x".into())
        );
        assert!(parse_url("http://x/").is_err());
        assert!(parse_url("https://:4/").is_err());
        assert!(parse_url("https://h:99999/").is_err());
    }
}
