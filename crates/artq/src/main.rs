//! The `artq` command-line program: a QUIC file server and client whose
//! sender-side loss recovery is pluggable (the papers' schemes), a network
//! emulator, and the papers' experiments.

mod config_file;
#[cfg(test)]
mod driver_tests;
mod get;
mod message_args;
mod metrics;
mod origins;
mod progress;
mod reproduce;
mod schemes;
mod serve;
mod sim;
mod train;
mod udp;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration as StdDuration;

use anyhow::Result;
use clap::{Args, Parser, Subcommand};
use transport::congestion::CongestionAlgorithm;
use transport::{RetryMode, RngSeed, TransportConfig};

/// Sender-side loss recovery for QUIC: ART, AutoRec and RCP on a real QUIC v1
/// stack, with a trace-driven network emulator.
#[derive(Parser, Debug)]
#[command(name = "artq", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of the largest variant costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Subcommand, Debug)]
enum Command {
    /// Serve a directory over HTTP/3 (ALPN "h3") and hq-interop (ALPN
    /// "hq-interop"), chosen per connection by ALPN.
    ///
    /// HTTP/3: GET and HEAD, 200 with content-type, content-length and
    /// alt-svc; 404 for a missing file, 405 for other methods, 400 for a
    /// malformed request; a directory answers with its index.html or an
    /// index page. hq-interop: `GET /path\r\n` on a bidirectional stream is
    /// answered with the file's bytes and FIN (a refusal resets the stream).
    /// Paths are confined to --root. Prints `listening on ADDR (protocols)`
    /// once bound; SIGINT/SIGTERM shut it down gracefully (GOAWAY).
    ///
    /// As a CDN edge (--upstream), requests under an upstream's prefix are
    /// forwarded to that HTTP/1.1 origin and its responses relayed as they
    /// arrive: every method but CONNECT, bodies both ways, cacheable
    /// responses kept in memory (--cache-size), live HTTP-FLV and MPEG-TS
    /// streams fetched once and shared by their viewers; 502 for an origin
    /// that cannot be reached or answers garbage, 504 for one slower than
    /// --upstream-timeout (docs/edge.md).
    Serve(ServeArgs),
    /// Download a URL (https://host:port/path) over HTTP/3 or hq-interop
    /// and print size, time and goodput.
    Get(GetArgs),
    /// Relay UDP both ways in real time through an emulated link, so any UDP
    /// program (artq, quinn, aioquic) can run behind it.
    ///
    /// The client is whoever sends to --listen; its datagrams cross the "up"
    /// link to --to, the replies cross the "down" link back.
    Link(Box<LinkCmdArgs>),
    /// Simulate one scenario: the real QUIC stack over emulated links in
    /// virtual time (deterministic for a given seed), and print its metrics.
    ///
    /// Defaults: 10 MB over 100 Mbit/s, 30 ms RTT, 1% loss both ways,
    /// scheme quic, Cubic, seed 1. `--json` prints one JSON object.
    Sim(Box<sim::SimArgs>),
    /// Regenerate the papers' evaluations in simulation: CSV, charts,
    /// results.json, report.md and report.html beside the papers' numbers.
    ///
    /// The experiments are named in `artq reproduce --help` (all run when
    /// none is named). Deterministic: the same command gives the same files.
    /// `--render DIR` redraws a previous run's charts and reports only.
    Reproduce(reproduce::ReproduceArgs),
    /// Train a learning recovery scheme offline over simulated runs and
    /// save the model: `artq train art-dqn [--distribution FILE | link and
    /// workload options | --scenario FILE] --episodes N --seed S --out FILE`.
    ///
    /// Each episode is a run through the real transport: drawn from a
    /// scenario distribution (a file, or without any scenario option the
    /// default one over the shared traces not held out for evaluation), or
    /// one scenario with seed S + k. One learner learns from all episodes
    /// (ART journal Appendix A.2), in batches (--batch) whose episodes run
    /// in parallel (--jobs) without changing the model. Use the model with
    /// `--scheme art-dqn:model=FILE` (it records its training options).
    Train(train::TrainArgs),
}

#[derive(Args, Debug)]
struct LinkCmdArgs {
    /// Address clients send to.
    #[arg(long)]
    listen: SocketAddr,
    /// The server behind the link.
    #[arg(long)]
    to: SocketAddr,
    #[command(flatten)]
    link: netem::LinkSpec,
    /// Seeds every random model (the same seed gives the same loss pattern).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Record the server's side of the link in this pcap file: client
    /// datagrams as delivered to --to, server datagrams as they arrive;
    /// timestamps from the relay's start (Wireshark decrypts QUIC in it with
    /// the client's SSLKEYLOGFILE).
    #[arg(long, value_name = "FILE")]
    pcap: Option<std::path::PathBuf>,
    /// Simulate a NAT rebinding every MS milliseconds: the relay's side
    /// toward --to moves to a new port (the server sees its client move)
    /// and datagrams sent to the old one are lost.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    rebind_every: Option<u64>,
    /// With --rebind-every: change the address too (127.0.0.2, .3, ...;
    /// loopback servers only), as the interop runner's rebind-addr does.
    #[arg(long, requires = "rebind_every")]
    rebind_address: bool,
}

/// Transport options shared by `serve` and `get`.
#[derive(Args, Debug, Clone)]
struct TransportArgs {
    /// Congestion control: cubic, newreno, bbr or none. The message
    /// schemes set their own (none for rcp, udp and arq, newreno for tcp).
    #[arg(long, default_value = "cubic")]
    cc: CongestionAlgorithm,
    /// The receiver's flow-control window (its receive buffer), e.g. 8MB.
    #[arg(long, value_parser = parse_size)]
    recv_window: Option<u64>,
    /// Most bytes the application may have written and not yet sent, over
    /// all streams (0: no limit but the peer's credit and the send buffers).
    /// The server reads a response body no further ahead of its packets than
    /// this, and is woken to read on when half of it has gone out: less
    /// memory per connection than buffering all the peer's credit (16 MiB
    /// windows are common).
    #[arg(long, value_name = "BYTES", default_value = "1MiB", value_parser = parse_size)]
    unsent_limit: u64,
    /// Largest UDP payload to send before path MTU discovery raises it,
    /// and what a path MTU black hole falls back to, bytes (1200..=65527).
    #[arg(long, default_value_t = 1350, value_parser = clap::value_parser!(u16).range(1200..=65527))]
    max_datagram_size: u16,
    /// Largest UDP payload path MTU discovery probes for, bytes
    /// (1200..=65527). The default, 1452, is the largest payload of a
    /// 1500-byte Ethernet MTU under IPv6; the peer's max_udp_payload_size
    /// lowers it.
    #[arg(long, value_name = "BYTES", default_value_t = 1452, value_parser = clap::value_parser!(u16).range(1200..=65527))]
    mtu_ceiling: u16,
    /// Do not probe the path MTU. By default, once the handshake is
    /// confirmed, padded PING packets test sizes from --max-datagram-size
    /// up to --mtu-ceiling (DPLPMTUD, RFC 8899, RFC 9000 §14.3): a few
    /// packets per connection, none of them congestion if lost, and data
    /// then goes in the largest size the path carries (7% fewer packets at
    /// 1452 bytes than at 1350).
    #[arg(long)]
    no_mtu_discovery: bool,
    /// Do not use ECN. By default what we send is marked ECT(0), the
    /// peer's ECN counts are validated (marking stops on a path that drops
    /// or mangles the marks) and its CE reports count as congestion (RFC
    /// 9000 §13.4, RFC 9002 §7.1). Received ECN is counted and reported
    /// either way.
    #[arg(long)]
    no_ecn: bool,
    /// Close a connection after this many seconds without a packet from
    /// the peer (the max_idle_timeout transport parameter, RFC 9000
    /// §10.1; the smaller of the two peers' values applies). It also
    /// bounds how long a server keeps a connection whose client left
    /// without a CONNECTION_CLOSE reaching it.
    #[arg(long, value_name = "SECONDS", default_value_t = 30.0, value_parser = parse_idle_timeout)]
    idle_timeout: f64,
    /// Fix the seed of connection IDs, stateless reset tokens, token keys
    /// and every random choice of the stack, for reproducible tests. It
    /// makes all of them guessable: without it they come from the OS RNG.
    /// A server's first worker uses it as is, the others seeds derived
    /// from it (which worker a client reaches is the kernel's choice).
    #[arg(long, value_name = "N")]
    seed: Option<u64>,
}

impl TransportArgs {
    /// Where the endpoint's randomness comes from: `--seed`, or 256 bits
    /// from the OS.
    fn rng_seed(&self) -> Result<RngSeed> {
        match self.seed {
            Some(n) => Ok(RngSeed::Fixed(n)),
            None => os_seed(),
        }
    }

    fn config(&self, recovery: &str) -> Result<TransportConfig> {
        let mut c = TransportConfig {
            congestion: self.cc,
            ecn: !self.no_ecn,
            max_datagram_size: self.max_datagram_size,
            mtu_discovery_ceiling: (!self.no_mtu_discovery).then_some(self.mtu_ceiling),
            max_idle_timeout: wire::time::Duration::from_micros((self.idle_timeout * 1e6) as u64),
            ..TransportConfig::default()
        };
        c.streams.unsent_limit = (self.unsent_limit > 0).then_some(self.unsent_limit);
        schemes::scheme(recovery)?.configure(&mut c);
        if let Some(w) = self.recv_window {
            anyhow::ensure!(w >= 1200, "--recv-window must be at least 1200 bytes");
            c.streams.receive_window = w;
            c.streams.stream_receive_window = w;
        }
        Ok(c)
    }
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// Read options from a TOML file: each key is a flag's name without
    /// the dashes (`listen = "0.0.0.0:443"`, `cache-size = "64MB"`,
    /// `no-ecn = true`, `upstream = ["/live=http://10.0.0.2:8080"]`).
    /// Flags on the command line win over the file's keys
    /// (docs/operations.md).
    #[arg(long, value_name = "FILE.toml")]
    config: Option<PathBuf>,
    /// Address to listen on, e.g. 127.0.0.1:4433 (port 0 picks one).
    #[arg(long)]
    listen: SocketAddr,
    /// Directory to serve (not with --messages). With --upstream, its
    /// files answer the paths no upstream claims.
    #[arg(
        long,
        required_unless_present_any = ["messages", "upstream"],
        conflicts_with = "messages"
    )]
    root: Option<PathBuf>,
    /// Put the server in front of an HTTP/1.1 origin, as a CDN edge:
    /// `http://HOST:PORT` takes every path, `/PREFIX=http://HOST:PORT` the
    /// paths under PREFIX (repeatable; the longest matching prefix wins;
    /// the rest go to --root). Requests are forwarded with their method,
    /// path, query and end-to-end headers (plus via and x-forwarded-for),
    /// responses relayed as they arrive; an endless FLV or MPEG-TS response
    /// is a live stream shared by all its viewers. HOST is resolved once,
    /// at start. See docs/edge.md.
    #[arg(long, value_name = "[/PREFIX=]URL", conflicts_with = "messages")]
    upstream: Vec<String>,
    /// Keep cacheable origin responses (Cache-Control max-age or s-maxage,
    /// Expires) in memory, up to SIZE bytes in all (e.g. 64MB; 0: no
    /// cache), shared equally by the worker threads (each has its own
    /// cache); one response at most an eighth of a worker's share.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "0", requires = "upstream")]
    cache_size: u64,
    /// Seconds an origin may take to answer a request's head (then 504) or
    /// stall a body (then the client's stream is reset).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 10.0,
        requires = "upstream"
    )]
    upstream_timeout: f64,
    /// Loss recovery scheme (see `--recovery help`).
    #[arg(long, default_value = "quic")]
    recovery: String,
    /// Instead of HTTP, send every client that connects the message
    /// workload of RCP (rcp.md): --messages messages of --message-size bytes
    /// at --message-rate per second, each in a DATAGRAM frame (RFC 9221; on
    /// a stream with `--recovery tcp`), stamped with its sequence number and
    /// generation time (docs/apps.md), then close the connection --drain ms
    /// after the last. Meant for the message schemes (rcp, udp, arq, tcp);
    /// `artq get --messages` receives them.
    #[command(flatten, next_help_heading = "Message workload (with --messages)")]
    messages: message_args::MessageArgs,
    /// PEM certificate chain (with --key); a self-signed one is made if absent.
    #[arg(long, requires = "key")]
    cert: Option<PathBuf>,
    /// PEM private key for --cert.
    #[arg(long, requires = "cert")]
    key: Option<PathBuf>,
    /// Write a qlog (JSON-SEQ) file per connection into this directory.
    #[arg(long)]
    qlog: Option<PathBuf>,
    /// Append one JSON object per ended connection to FILE (`-`: stdout,
    /// after the listening line): its counters with the field names of
    /// `artq sim --json` (lost_packets, replicas, n_hist, n_max, k_max, ...),
    /// computed by the same code from the same recovery records.
    #[arg(long, value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// The alt-svc header of every HTTP/3 response [default: h3 on the
    /// bound port, e.g. `h3=":4433"; ma=86400`]; an empty value sends none.
    #[arg(long, value_name = "VALUE")]
    alt_svc: Option<String>,
    /// Ask every client without a valid token to prove its address with a
    /// Retry round trip first (RFC 9000 §8.1.2). Without it, Retry is sent
    /// only under load (see --retry-threshold).
    #[arg(long)]
    retry: bool,
    /// Send Retry once this many connections wait for their client's
    /// address to be validated (or one IP address has 16 waiting).
    #[arg(long, value_name = "N", default_value_t = 64, conflicts_with = "retry")]
    retry_threshold: usize,
    /// Issue no TLS session tickets. By default tickets are issued and
    /// resumption accepted (RFC 9001 §4.6): a returning client skips the
    /// certificate. Tickets are single-use and kept in memory (at most 4096,
    /// about 1 MB; shared by the worker threads; lost on restart).
    #[arg(long, conflicts_with = "zero_rtt")]
    no_resumption: bool,
    /// Accept 0-RTT early data from resuming clients (off by default): a
    /// returning client's requests arrive with its first flight. A replayed
    /// first flight gets a full handshake (tickets are single-use), and
    /// only safe requests (GET, HEAD, OPTIONS) are answered from early
    /// data: others get 425 Too Early and the client repeats them after
    /// the handshake (RFC 8470) (docs/endpoint.md, "Resumption and 0-RTT").
    #[arg(long = "0rtt", id = "zero_rtt")]
    zero_rtt: bool,
    /// Worker threads, each with its own UDP socket on the port
    /// (SO_REUSEPORT) and its own connections [default: the number of
    /// cores, at most 256]. A connection stays on the worker that accepted
    /// it: its connection IDs name the worker, so a datagram the kernel
    /// hands to another (after a NAT rebinding or a migration) is passed
    /// on. An edge's cache and live relays are per worker.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    threads: Option<u16>,
    /// Serve Prometheus metrics (text exposition) on GET /metrics at this
    /// TCP address, e.g. 127.0.0.1:9090: connections, bytes, packets sent
    /// and lost, replicas, recovery latency, handshake failures, Retry,
    /// 0-RTT and the edge's upstream and cache figures
    /// (docs/operations.md). Prints `metrics on http://ADDR/metrics`.
    #[arg(long, value_name = "ADDR:PORT")]
    metrics: Option<SocketAddr>,
    /// Append one JSON line per finished request to FILE (`-`: stdout):
    /// time, client, ALPN, method, path, status, bytes, duration, and the
    /// connection's recovery scheme, lost packets and replicas so far
    /// (docs/operations.md).
    #[arg(long, value_name = "FILE")]
    access_log: Option<PathBuf>,
    /// A file of 32 or more secret bytes (e.g. `head -c 32 /dev/urandom`)
    /// the stateless reset key is derived from. Keep it across restarts:
    /// a restarted server then answers packets of connections its
    /// predecessor held with stateless resets the clients recognise, and
    /// they stop at once instead of waiting for their idle timeout (RFC
    /// 9000 §10.3). Without it the key lives as long as the process.
    #[arg(long, value_name = "FILE")]
    host_key: Option<PathBuf>,
    /// Also listen on ADDR:PORT and offer it to clients as the server's
    /// preferred address (RFC 9000 §9.6): a client that follows moves its
    /// connection there after the handshake. At most one IPv4 and one IPv6
    /// address (repeat the flag for both); port 0 picks one.
    #[arg(long, value_name = "ADDR:PORT")]
    preferred_address: Vec<SocketAddr>,
    /// QUIC versions to accept, comma-separated: v1 (RFC 9000), v2 (RFC
    /// 9369). With both (the default), a v2 client is served in v2, and a
    /// v1 client that offers v2 in its version_information is switched to
    /// v2 (compatible version negotiation, RFC 9368); a v1 client that
    /// offers nothing stays in v1. Clients of an unlisted version get a
    /// Version Negotiation packet.
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "v1,v2"
    )]
    quic_versions: Vec<wire::Version>,
    #[command(flatten)]
    transport: TransportArgs,
}

#[derive(Args, Debug)]
struct GetArgs {
    /// https://host:port/path
    url: String,
    /// Write the body here instead of standard output.
    #[arg(short, long, conflicts_with = "messages")]
    output: Option<PathBuf>,
    /// Do not verify the server's certificate (testing only).
    #[arg(long)]
    insecure: bool,
    /// Trust this PEM certificate (the server's, or its CA).
    #[arg(long, conflicts_with = "insecure")]
    ca: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 120.0)]
    timeout: f64,
    /// Give up when the handshake has not completed after this many
    /// seconds (nothing answers at the address, or every answer is lost),
    /// naming the address.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    handshake_timeout: f64,
    /// Write a qlog (JSON-SEQ) of the connection to this file.
    #[arg(long)]
    qlog: Option<PathBuf>,
    /// Print the connection's counters as JSON on stderr after the summary.
    #[arg(long)]
    stats: bool,
    /// Application protocol: h3 (HTTP/3) or hq-interop (HTTP/0.9 over
    /// QUIC).
    #[arg(long, default_value = "h3", value_name = "PROTOCOL")]
    alpn: apps::Protocol,
    /// Play the URL as a live stream (`artq serve`'s /live/KBPS/SECONDS)
    /// and print the player's statistics (freezes per 100 s, bitrate)
    /// instead of writing the body.
    #[arg(long, conflicts_with_all = ["dash", "output", "messages"])]
    live: bool,
    /// Play the URL as a DASH manifest (`artq serve`'s
    /// /dash/SECONDS/manifest.mpd) with rate-based adaptation and print
    /// the quality of experience (bitrate, rebuffering, start-up, switches).
    #[arg(long, conflicts_with_all = ["output", "messages"])]
    dash: bool,
    /// Call the server's RPC endpoint (the URL's path must be /rpc, as
    /// `artq serve` has it): --rpcs calls with memcached ETC request and
    /// response sizes at --rpc-rate calls per second (Poisson), one
    /// connection; prints the calls' completion times (FCT p50/p95/p99).
    #[arg(long, conflicts_with_all = ["live", "dash", "output", "messages"])]
    rpc: bool,
    /// --rpc: number of calls.
    #[arg(long, value_name = "N", default_value_t = 1000, requires = "rpc")]
    rpcs: u64,
    /// --rpc: calls per second.
    #[arg(long, value_name = "PER_S", default_value_t = 100, requires = "rpc")]
    rpc_rate: u64,
    /// --live: the player's start-up delay, ms.
    #[arg(long, value_name = "MS", default_value_t = 1000, requires = "live")]
    startup_delay: u64,
    /// Fetch the URL N more times, each on a new connection once the
    /// previous one ended, resuming the TLS session with the ticket the
    /// server gave (kept in memory for this run) and, with --alpn
    /// hq-interop, sending the request in 0-RTT when the server accepts
    /// early data. Prints how each connection started; the output gets
    /// the last body.
    #[arg(long, value_name = "N", default_value_t = 0, conflicts_with_all = ["live", "dash", "rpc"])]
    reconnect: u32,
    /// Receive the message workload from `artq serve --messages` (give it
    /// the server's --messages, --message-size, --message-rate and --drain;
    /// the URL's path is not used) and print what arrived: messages
    /// delivered, the delivery ratio, duplicates. Over real UDP the two
    /// ends' clocks differ, so no latency is reported.
    #[command(flatten, next_help_heading = "Message workload (with --messages)")]
    messages: message_args::MessageArgs,
    /// Stay on the address in the URL even when the server offers a
    /// preferred address (RFC 9000 §9.6). By default the client probes that
    /// address once the handshake is confirmed and moves there if it
    /// answers (the address of the URL's family; no answer within three
    /// PTOs: it stays).
    #[arg(long)]
    no_preferred_address: bool,
    /// The QUIC version to connect with: v1 (RFC 9000) or v2 (RFC 9369).
    /// The whole connection runs in it, first Initial included; with v2 the
    /// client sends a version_information transport parameter offering v2
    /// alone (RFC 9368), so a server cannot switch it to another version.
    /// A server without v2 answers with Version Negotiation and the
    /// connection fails. The version used is printed on stderr when not v1.
    #[arg(long, value_name = "VERSION", default_value = "v1")]
    quic_version: wire::Version,
    #[command(flatten)]
    transport: TransportArgs,
}

fn main() -> ExitCode {
    one_thread_per_tensor_product();
    init_tracing();
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let command = <Cli as clap::CommandFactory>::command();
    let args = match command.find_subcommand("serve") {
        Some(serve) => match config_file::expand(args, serve) {
            Ok(args) => args,
            Err(e) => {
                eprintln!("artq: error: {e:#}");
                return ExitCode::FAILURE;
            }
        },
        None => args,
    };
    let matches = command.get_matches_from(args);
    let mut cli = match <Cli as clap::FromArgMatches>::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    if let (Command::Train(t), Some(m)) = (&mut cli.command, matches.subcommand_matches("train")) {
        t.scenario_flags = train_scenario_flags(m);
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("artq: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The scenario options given on `artq train`'s command line (by their
/// ids, not counting defaults): any of them means one scenario rather than
/// a distribution. Its own options and `--seed` (the training seed in both
/// forms) do not count.
fn train_scenario_flags(m: &clap::ArgMatches) -> Vec<String> {
    const OWN: &[&str] = &[
        "scheme",
        "distribution",
        "episodes",
        "batch",
        "jobs",
        "print_distribution",
        "out",
        "seed",
    ];
    m.ids()
        .map(|id| id.as_str())
        .filter(|id| !OWN.contains(id))
        .filter(|id| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine))
        .map(|id| id.replace('_', "-"))
        .collect()
}

/// `--size`-style values: the one size grammar (`apps::size`).
/// `--idle-timeout`: positive seconds, at most a day (the transport
/// parameter is in milliseconds; a longer timeout is a leak, not a
/// setting).
fn parse_idle_timeout(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .parse()
        .map_err(|_| format!("`{s}` is not a number of seconds"))?;
    if v.is_finite() && (0.001..=86_400.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "`{s}`: the idle timeout must be between 0.001 and 86400 seconds"
        ))
    }
}

pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    apps::size::parse_size(s).map_err(|e| e.to_string())
}

/// 256 bits from the operating system's CSPRNG: the seed of a real
/// endpoint's connection IDs, reset tokens and token key.
fn os_seed() -> Result<RngSeed> {
    use ring::rand::SecureRandom;
    let mut seed = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut seed)
        .map_err(|_| anyhow::anyhow!("the operating system's random number generator failed"))?;
    Ok(RngSeed::Secret(seed))
}

/// Runs the learners' matrix products on the calling thread, unless the
/// user set `RAYON_NUM_THREADS`. candle (the DQN learners' tensor library,
/// crates/learn) reads that variable at every matrix product and, when it
/// is unset, asks the OS for the CPU count instead: a system call and a
/// scan of a 1024-bit CPU set per product. The networks of ART-DQN and RCP
/// are too small for a product to gain from threads, and `artq reproduce`
/// already keeps every core busy with whole runs. One thread also takes
/// the machine's core count out of the runs' path altogether. Measured on an
/// RCP run (20,000 messages): 6% fewer instructions and 7% less wall time,
/// the same output. Set here, before any thread exists, as the variable
/// must be.
fn one_thread_per_tensor_product() {
    if std::env::var_os("RAYON_NUM_THREADS").is_none() {
        std::env::set_var("RAYON_NUM_THREADS", "1");
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_env("ARTQ_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Serve(a) => {
            let mut transport = a.transport.config(&a.recovery)?;
            anyhow::ensure!(
                !a.quic_versions.is_empty(),
                "--quic-versions needs a version"
            );
            transport.versions = a.quic_versions.clone();
            anyhow::ensure!(
                a.upstream_timeout.is_finite() && a.upstream_timeout > 0.0,
                "--upstream-timeout must be a positive number of seconds"
            );
            let edge = if a.upstream.is_empty() {
                None
            } else {
                Some(serve::EdgeArgs {
                    upstreams: a.upstream,
                    cache_size: a.cache_size,
                    upstream_timeout: StdDuration::from_secs_f64(a.upstream_timeout.min(1e6)),
                })
            };
            let app = match a.messages.params()? {
                Some(params) => serve::ServeApp::Messages(params),
                None if a.root.is_some() || edge.is_some() => {
                    serve::ServeApp::Http { root: a.root, edge }
                }
                None => anyhow::bail!("--root DIR, --upstream URL or --messages N is needed"),
            };
            serve::run(serve::ServeOptions {
                listen: a.listen,
                app,
                transport,
                cert: a.cert.zip(a.key),
                qlog: a.qlog,
                stats_json: a.stats_json,
                alt_svc: a.alt_svc,
                retry: if a.retry {
                    RetryMode::Always
                } else {
                    RetryMode::WhenUnvalidatedAtLeast(a.retry_threshold)
                },
                seed: a.transport.rng_seed()?,
                resumption: !a.no_resumption,
                zero_rtt: a.zero_rtt,
                threads: match a.threads {
                    Some(n) => usize::from(n),
                    None => std::thread::available_parallelism()
                        .map_or(1, |n| n.get())
                        .min(serve::MAX_THREADS),
                },
                preferred_address: a.preferred_address,
                metrics: a.metrics,
                access_log: a.access_log,
                host_key: a.host_key,
            })
        }
        Command::Get(a) => {
            anyhow::ensure!(
                a.timeout.is_finite() && a.timeout > 0.0,
                "--timeout must be a positive number of seconds"
            );
            anyhow::ensure!(
                a.handshake_timeout.is_finite() && a.handshake_timeout > 0.0,
                "--handshake-timeout must be a positive number of seconds"
            );
            let mut transport = a.transport.config("quic")?;
            transport.follow_preferred_address = !a.no_preferred_address;
            transport.versions = vec![a.quic_version];
            let report = get::run(get::GetOptions {
                url: a.url,
                output: a.output,
                transport,
                insecure: a.insecure,
                ca: a.ca,
                timeout: StdDuration::from_secs_f64(a.timeout.min(1e9)),
                handshake_timeout: StdDuration::from_secs_f64(a.handshake_timeout.min(1e9)),
                qlog: a.qlog,
                protocol: a.alpn,
                seed: a.transport.rng_seed()?,
                mode: if a.live {
                    get::GetMode::Live {
                        startup: StdDuration::from_millis(a.startup_delay),
                    }
                } else if a.dash {
                    get::GetMode::Dash
                } else if let Some(params) = a.messages.params()? {
                    get::GetMode::Messages { params }
                } else if a.rpc {
                    get::GetMode::Rpc {
                        calls: a.rpcs,
                        rate: a.rpc_rate,
                    }
                } else {
                    get::GetMode::File
                },
                reconnect: a.reconnect,
            })?;
            if report.connections.len() > 1 {
                for (i, c) in report.connections.iter().enumerate() {
                    eprintln!("{}", get::connection_line(i + 1, c));
                }
            }
            let secs = report.elapsed.as_secs_f64();
            let mbps = if secs > 0.0 {
                report.bytes as f64 * 8.0 / secs / 1e6
            } else {
                0.0
            };
            eprintln!(
                "received {} bytes in {:.3} s: {:.1} Mbit/s",
                report.bytes, secs, mbps
            );
            if let Some(addr) = report.moved_to {
                // A contract too: tests read it.
                eprintln!("moved to the server's preferred address {addr}");
            }
            if let Some(c) = report
                .connections
                .last()
                .filter(|c| c.version != wire::Version::V1)
            {
                eprintln!("QUIC version: {}", c.version);
            }
            if let Some(p) = &report.playback {
                if a.stats {
                    println!("{}", get::playback_json(p));
                } else {
                    println!("{}", get::playback_line(p));
                }
            }
            if let Some(r) = &report.messages {
                if a.stats {
                    println!("{}", get::messages_json(r));
                } else {
                    println!("{}", get::messages_line(r));
                }
            }
            if let Some(r) = &report.rpc {
                if a.stats {
                    println!("{}", get::rpc_json(r));
                } else {
                    println!("{}", get::rpc_line(r));
                }
            }
            if a.stats {
                if let Some(s) = &report.stats {
                    eprintln!("{}", serde_json::to_string(s)?);
                }
            }
            Ok(())
        }
        Command::Link(a) => run_link(*a),
        Command::Sim(a) => sim::run(*a),
        Command::Reproduce(a) => reproduce::run(a),
        Command::Train(a) => train::run(a),
    }
}

fn run_link(a: LinkCmdArgs) -> Result<()> {
    use std::io::Write;
    let (up, down) = a.link.configs()?;
    let config = netem::RelayConfig {
        listen: a.listen,
        to: a.to,
        up,
        down,
        seed: a.seed,
        pcap: a.pcap,
        rebind: a.rebind_every.map(|ms| netem::relay::Rebind {
            every: wire::time::Duration::from_millis(ms),
            address: a.rebind_address,
        }),
    };
    let handle = netem::relay::spawn(config)
        .map_err(|e| anyhow::anyhow!("cannot start the relay on {}: {e}", a.listen))?;
    println!("listening on {}", handle.local_addr());
    std::io::stdout().flush()?;
    // Runs until the process is killed; the relay thread does the work.
    loop {
        std::thread::park();
    }
}
