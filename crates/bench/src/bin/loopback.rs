//! `loopback`: bulk goodput of artq vs quinn over 127.0.0.1, in one run.
//!
//! Why this exists: DESIGN.md puts speed targets in benchmarks measured as a
//! ratio against a peer on the same machine in the same run. This moves one
//! seeded file of `--size` bytes (default 1 GiB) four ways:
//! (a) quinn server -> quinn client (hq-interop), the reference: the server
//!     is this executable run as a child process ([`quinn_child`]), the
//!     clients are threads of this process (one current-thread runtime
//!     each, like the single-threaded `artq get` processes);
//! (b) the same quinn server -> `artq get --alpn hq-interop`, the clients
//!     of (c): (c)/(b) compares the two servers alone, where (c)/(a)
//!     compares the two stacks, clients included;
//! (c) `artq serve` -> `artq get --alpn hq-interop`, and
//! (d) `artq serve` -> `artq get --alpn h3`, as child processes of the
//!     release binary;
//! and prints the goodputs (request sent to last byte received), the ratios
//! artq/quinn, artq/quinn with the same clients and h3/hq-interop (the cost
//! of HTTP/3's framing), and each server's CPU time per megabyte delivered
//! (`/proc/<pid>/stat`), and the clients' (`getrusage`), so that a run shows
//! which side saturates.
//!
//! Concurrency: `--clients N` runs N downloads of the file at once (N quinn
//! clients, each its own endpoint and connection; N `artq get` processes)
//! against one server, and the goodput is the aggregate: all bytes over the
//! time from the first request to the last byte of the last download.
//! `--threads M` gives the server M threads: `artq serve --threads M`
//! (always passed: `artq serve` defaults to one worker per core), and M
//! tokio workers for the quinn server (a
//! current-thread runtime for M = 1). Both flags take comma-separated lists;
//! every (clients, threads) pair is measured in every round, and a summary
//! table at the end gives the ratios to one client and to one thread.
//!
//! Run: `cargo build --release -p artq -p artq-bench && target/release/loopback
//! [--size 1GiB] [--clients 1,4] [--threads 1,2] [--rounds 3] [--verify]
//! [--artq PATH] [--quinn-only]`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use artq_bench::{
    aggregate, artq_child, content, goodput_mbps, median, proc_cpu, quinn_child, size, Span,
};
use clap::Parser;

/// Most concurrent clients `--clients` accepts (each artq client is a process).
const MAX_CLIENTS: u32 = 64;

/// Most server threads `--threads` accepts.
const MAX_THREADS: u32 = 64;

/// How long a server may take to print its ready line.
const READY_DEADLINE: Duration = Duration::from_secs(30);

/// The automatic deadline of one measurement: this much ...
const DEADLINE_BASE: Duration = Duration::from_secs(30);

/// ... plus one second per this many bytes moved in all (5 MB/s, 40 Mbit/s:
/// far below any loopback, so only a stuck transfer reaches it).
const DEADLINE_FLOOR_BYTES_PER_S: u64 = 5_000_000;

const LONG_ABOUT: &str = "\
Loopback bulk goodput: quinn -> quinn, quinn -> artq get and artq serve -> artq get, in one run.

Each round moves one seeded file (--size) with the quinn reference (hq-interop;
its server is this executable run as a child process, its clients are threads
of this process, each with its own current-thread tokio runtime), with the
same quinn server and `artq get --alpn hq-interop` clients (so that artq's
hq-interop figure divided by this one compares the servers alone: /srv), and
with `artq serve` -> `artq get` over hq-interop and over h3 (child processes
of the artq binary), and reports per stack the median
goodput of the rounds, the ratio artq/quinn, the server's CPU time per MB
delivered (utime + stime of the server process from /proc/<pid>/stat) and the
clients' (the `artq get` processes' from getrusage(RUSAGE_CHILDREN); for quinn,
this process's own from RUSAGE_SELF), which tells which side is saturated.

--clients N runs N downloads of the file at once against one server (N quinn
clients on their own endpoints and connections; N `artq get` processes) and
reports the aggregate goodput: all bytes over the time from the first request
to the last byte of the last download. --threads M gives each server M
threads: `artq serve --threads M` (always passed: artq serve defaults to
one worker per core), and a tokio runtime of M workers for the quinn
server (current-thread for M = 1). Both take comma-separated lists; every
(clients, threads) pair is measured in each round, and a summary table ends
the output with artq/quinn per pair, and the aggregate goodput and server CPU
per MB relative to one client (same threads) and to one thread (same
clients), where those pairs were measured.

Build first: cargo build --release -p artq -p artq-bench
Example:     target/release/loopback --size 256MiB --clients 1,4 --threads 1,2";

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    about = "Loopback bulk goodput: quinn -> quinn, quinn -> artq get, artq serve -> artq get",
    long_about = LONG_ABOUT
)]
struct Args {
    /// Bytes each client downloads (`1GiB`, `100MB`, `1048576`).
    #[arg(long, default_value = "1GiB", value_parser = parse_size_arg)]
    size: u64,
    /// Concurrent downloads against one server; a comma-separated list
    /// measures each count (`1,4`).
    #[arg(
        long,
        value_name = "N[,N...]",
        value_delimiter = ',',
        default_value = "1",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_CLIENTS))
    )]
    clients: Vec<u32>,
    /// Server threads: `artq serve --threads M` (always passed; an artq
    /// that predates the flag fails with a message saying so) and the quinn
    /// server's tokio workers
    /// (current-thread runtime for 1); a comma-separated list measures each
    /// (`1,2`).
    #[arg(
        long,
        value_name = "M[,M...]",
        value_delimiter = ',',
        default_value = "1",
        value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_THREADS))
    )]
    threads: Vec<u32>,
    /// The artq binary (default: `artq` next to this executable).
    #[arg(long)]
    artq: Option<PathBuf>,
    /// Only measure quinn -> quinn (no artq binary needed).
    #[arg(long)]
    quinn_only: bool,
    /// Seed of the file's content.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Rounds of measurements (each round runs every configuration once,
    /// interleaved); the medians are reported. Loopback goodput varies by
    /// tens of percent from one transfer to the next.
    #[arg(long, visible_alias = "rounds", default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    repeat: u32,
    /// Compare every body with the file byte for byte as it arrives (the
    /// comparison runs in this process for both stacks; `artq get` then
    /// writes to a pipe instead of /dev/null). Without it only the sizes
    /// are checked.
    #[arg(long)]
    verify: bool,
    /// Give up on one measurement (all its clients) after this many seconds
    /// [default: 30 + 1 per 5 MB moved in all, i.e. clients x size; 10 times
    /// that in a debug build]. Passed to `artq get --timeout` too, unless a
    /// --get-arg sets it.
    #[arg(long, value_name = "SECONDS")]
    timeout_s: Option<u64>,
    /// Extra arguments for `artq serve` (repeatable), e.g. `--serve-arg=--cc=bbr`.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// Extra arguments for `artq get` (repeatable), e.g. `--get-arg=--recv-window=16MiB`.
    #[arg(long = "get-arg", allow_hyphen_values = true)]
    get_args: Vec<String>,
    /// Internal: run as the quinn server child serving ROOT (see
    /// `artq_bench::quinn_child`).
    #[arg(long = "internal-quinn-serve", hide = true, value_name = "ROOT")]
    internal_quinn_serve: Option<PathBuf>,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    size::parse_size(s).map_err(|e| e.to_string())
}

/// One (clients, threads) pair of the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Config {
    clients: u32,
    threads: u32,
}

/// What is measured in each configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stack {
    /// quinn server child -> quinn clients in this process, hq-interop.
    Quinn,
    /// quinn server child -> `artq get --alpn hq-interop`: the same clients
    /// as [`Stack::Artq`]`("hq-interop")`, so the two differ only in the
    /// server, where quinn -> quinn differs in both ends.
    QuinnToArtqGet,
    /// `artq serve` -> `artq get --alpn <alpn>`.
    Artq(&'static str),
}

/// The ALPN of the server-only comparison ([`Stack::QuinnToArtqGet`]).
const HQ: &str = "hq-interop";

impl Stack {
    /// Short column name for the summary table.
    fn column(self) -> &'static str {
        match self {
            Stack::Quinn => "quinn",
            Stack::QuinnToArtqGet => "quinn-get",
            Stack::Artq("h3") => "artq-h3",
            Stack::Artq(_) => "artq-hq",
        }
    }

    /// Name in the CPU lines.
    fn label(self) -> String {
        match self {
            Stack::Quinn => "quinn".to_string(),
            Stack::QuinnToArtqGet => "quinn (artq get)".to_string(),
            Stack::Artq(alpn) => format!("artq {alpn}"),
        }
    }
}

/// One measurement: the aggregate of a configuration's downloads.
#[derive(Debug, Clone, Copy)]
struct Sample {
    /// Bytes of all downloads.
    bytes: u64,
    /// First request to the last byte of the last download.
    elapsed: Duration,
    /// Server CPU time during the downloads, if it could be read.
    server_cpu: Option<Duration>,
    /// The clients' CPU time during the downloads, if it could be read:
    /// the `artq get` processes, or this process for the in-process quinn
    /// clients (with this benchmark's own small share: timing, and the
    /// comparison with --verify).
    client_cpu: Option<Duration>,
}

impl Sample {
    fn from_spans(
        spans: &[Span],
        server_cpu: Option<Duration>,
        client_cpu: Option<Duration>,
    ) -> Result<Self> {
        let (bytes, elapsed) = aggregate(spans).context("no download was measured")?;
        Ok(Self {
            bytes,
            elapsed,
            server_cpu,
            client_cpu,
        })
    }

    fn mbps(&self) -> f64 {
        goodput_mbps(self.bytes, self.elapsed)
    }

    /// Server CPU milliseconds per MB (10^6 bytes) delivered.
    fn cpu_ms_per_mb(&self) -> Option<f64> {
        self.per_mb(self.server_cpu?)
    }

    /// Client CPU milliseconds per MB delivered (all clients together).
    fn client_cpu_ms_per_mb(&self) -> Option<f64> {
        self.per_mb(self.client_cpu?)
    }

    fn per_mb(&self, cpu: Duration) -> Option<f64> {
        (self.bytes > 0).then(|| cpu.as_secs_f64() * 1e3 / (self.bytes as f64 / 1e6))
    }
}

/// The median goodput of `runs`, Mbit/s (0 for none).
fn median_mbps(runs: &[Sample]) -> f64 {
    median(&runs.iter().map(Sample::mbps).collect::<Vec<_>>()).unwrap_or(0.0)
}

/// The median of `per_run` (a CPU per MB figure) over `runs`; `None`
/// unless every run has one.
fn median_of(runs: &[Sample], per_run: fn(&Sample) -> Option<f64>) -> Option<f64> {
    let v: Option<Vec<f64>> = runs.iter().map(per_run).collect();
    median(&v?)
}

/// Every run's goodput, for the record: `[a, b, c]`.
fn all_mbps(runs: &[Sample]) -> String {
    let v: Vec<String> = runs.iter().map(|m| format!("{:.0}", m.mbps())).collect();
    format!("[{}]", v.join(", "))
}

fn main() {
    let args = Args::parse();
    let result = match args.internal_quinn_serve.clone() {
        Some(root) => serve_quinn_child(root, &args),
        None => run(args),
    };
    if let Err(e) = result {
        eprintln!("loopback: error: {e:#}");
        std::process::exit(1);
    }
}

/// The quinn server child (`--internal-quinn-serve ROOT --threads M`).
fn serve_quinn_child(root: PathBuf, args: &Args) -> Result<()> {
    let [threads] = args.threads.as_slice() else {
        bail!("the quinn server child takes exactly one --threads value");
    };
    quinn_child::serve_until_parent_exits(root, *threads as usize)
}

/// `values` sorted, without repeats.
fn sorted_unique(values: &[u32]) -> Vec<u32> {
    let mut v = values.to_vec();
    v.sort_unstable();
    v.dedup();
    v
}

/// The deadline of one measurement moving `total` bytes.
fn measurement_deadline(timeout_s: Option<u64>, total: u64) -> Duration {
    if let Some(s) = timeout_s {
        return Duration::from_secs(s);
    }
    let d = DEADLINE_BASE + Duration::from_secs(total / DEADLINE_FLOOR_BYTES_PER_S);
    if cfg!(debug_assertions) {
        d * 10
    } else {
        d
    }
}

fn run(args: Args) -> Result<()> {
    let artq = if args.quinn_only {
        None
    } else {
        let path = match &args.artq {
            Some(p) => p.clone(),
            None => artq_child::artq_next_to_exe()?,
        };
        artq_child::ensure_artq_exists(&path)?;
        Some(path)
    };
    let exe = std::env::current_exe().context("locating this executable")?;
    if cfg!(debug_assertions) {
        eprintln!("loopback: warning: this is a debug build; measure with --release");
    }
    let clients = sorted_unique(&args.clients);
    let threads = sorted_unique(&args.threads);
    if args.serve_args.iter().any(|a| a.starts_with("--threads")) {
        bail!("--serve-arg=--threads conflicts with --threads: give the thread counts with --threads only");
    }
    let configs: Vec<Config> = clients
        .iter()
        .flat_map(|&c| {
            threads.iter().map(move |&t| Config {
                clients: c,
                threads: t,
            })
        })
        .collect();

    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let file = dir.path().join("file");
    eprintln!(
        "loopback: writing {} of seeded data to {}",
        size::format_size(args.size),
        file.display()
    );
    content::write_seeded_file(&file, args.size, args.seed).context("writing the test file")?;
    let verify = args.verify.then_some(file.as_path());

    let mut stacks = vec![Stack::Quinn];
    if artq.is_some() {
        stacks.extend([Stack::QuinnToArtqGet, Stack::Artq(HQ), Stack::Artq("h3")]);
    }
    // samples[config][stack]: one per round.
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); stacks.len()]; configs.len()];
    for round in 1..=args.repeat {
        for (cfg, per_stack) in configs.iter().zip(&mut samples) {
            let total = args.size.saturating_mul(u64::from(cfg.clients));
            let deadline = measurement_deadline(args.timeout_s, total);
            for (&stack, runs) in stacks.iter().zip(per_stack.iter_mut()) {
                eprintln!(
                    "loopback: round {round}/{}: {} ...",
                    args.repeat,
                    progress_label(stack, *cfg)
                );
                let sample = match (stack, &artq) {
                    (Stack::Quinn, _) => {
                        measure_quinn(&exe, dir.path(), *cfg, args.size, verify, deadline)?
                    }
                    (Stack::QuinnToArtqGet, Some(bin)) => measure_quinn_to_artq_get(
                        &exe,
                        bin,
                        dir.path(),
                        &args,
                        *cfg,
                        verify,
                        deadline,
                    )?,
                    (Stack::Artq(alpn), Some(bin)) => {
                        measure_artq(bin, dir.path(), &args, *cfg, alpn, verify, deadline)?
                    }
                    (Stack::QuinnToArtqGet | Stack::Artq(_), None) => continue,
                };
                runs.push(sample);
            }
        }
    }

    println!(
        "loopback bulk goodput, {} ({} bytes), seed {}, median of {} round(s)",
        size::format_size(args.size),
        args.size,
        args.seed,
        args.repeat
    );
    let default_only = configs
        == [Config {
            clients: 1,
            threads: 1,
        }];
    for (cfg, per_stack) in configs.iter().zip(&samples) {
        if !default_only {
            print_config_heading(*cfg);
        }
        print_config(&stacks, per_stack);
    }
    if !default_only {
        print_summary(&args, &configs, &stacks, &samples);
    }
    Ok(())
}

/// `quinn -> quinn (hq-interop), 4 clients, 2 threads`.
fn progress_label(stack: Stack, cfg: Config) -> String {
    let what = match stack {
        Stack::Quinn => "quinn -> quinn (hq-interop)".to_string(),
        Stack::QuinnToArtqGet => format!("quinn -> artq get --alpn {HQ}"),
        Stack::Artq(alpn) => format!("artq serve -> artq get --alpn {alpn}"),
    };
    if cfg
        == (Config {
            clients: 1,
            threads: 1,
        })
    {
        what
    } else {
        format!(
            "{what}, {} client(s), {} thread(s)",
            cfg.clients, cfg.threads
        )
    }
}

/// The line above a configuration's block when several are measured.
fn print_config_heading(cfg: Config) {
    if cfg.clients > 1 {
        println!(
            "clients {}, threads {} (aggregate goodput of {} concurrent downloads):",
            cfg.clients, cfg.threads, cfg.clients
        );
    } else {
        println!("clients {}, threads {}:", cfg.clients, cfg.threads);
    }
}

/// One configuration's lines: each stack's goodput (the first and the last
/// two as in earlier versions of this benchmark), the ratios, then the
/// servers' and clients' CPU per MB.
fn print_config(stacks: &[Stack], per_stack: &[Vec<Sample>]) {
    let median_for = |s: Stack| {
        let i = stacks.iter().position(|&x| x == s)?;
        per_stack.get(i).map(|runs| median_mbps(runs))
    };
    let quinn = median_for(Stack::Quinn).unwrap_or(0.0);
    for (stack, runs) in stacks.iter().zip(per_stack) {
        let m = median_mbps(runs);
        let all = all_mbps(runs);
        match *stack {
            Stack::Quinn => println!("  quinn -> quinn    (hq-interop): {m:>8.1} Mbit/s  {all}"),
            Stack::QuinnToArtqGet => {
                println!("  quinn -> artq get ({HQ}): {m:>8.1} Mbit/s  {all}");
            }
            Stack::Artq(alpn) => {
                let mut line = format!(
                    "  artq  -> artq get ({alpn:<10}): {m:>8.1} Mbit/s  {all}  ratio artq/quinn {:.3}",
                    m / quinn
                );
                if alpn == HQ {
                    if let Some(q) = median_for(Stack::QuinnToArtqGet) {
                        line.push_str(&format!(", server only (same artq get) {:.3}", m / q));
                    }
                }
                println!("{line}");
            }
        }
    }
    match (median_for(Stack::Artq(HQ)), median_for(Stack::Artq("h3"))) {
        (Some(hq), Some(h3)) => println!("  ratio h3/hq-interop: {:.3}", h3 / hq),
        _ => println!("  artq  -> artq get: skipped (--quinn-only)"),
    }
    for (side, per_run) in [
        (
            "server",
            Sample::cpu_ms_per_mb as fn(&Sample) -> Option<f64>,
        ),
        ("client", Sample::client_cpu_ms_per_mb),
    ] {
        let cpu: Vec<String> = stacks
            .iter()
            .zip(per_stack)
            .map(|(stack, runs)| format!("{} {}", stack.label(), fmt_cpu(median_of(runs, per_run))))
            .collect();
        println!("  {side} CPU per MB delivered: {}", cpu.join(", "));
    }
}

/// `3.12 ms`, or `n/a` where /proc could not be read.
fn fmt_cpu(ms: Option<f64>) -> String {
    ms.map_or_else(|| "n/a".to_string(), |ms| format!("{ms:.2} ms"))
}

/// `a / b` to three decimals, `-` where either is unknown.
fn fmt_ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.3}", a / b),
        _ => "-".to_string(),
    }
}

/// Prints `rows` (the first one the header) with right-aligned columns.
fn print_table(rows: &[Vec<String>]) {
    let cols = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..cols)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c).map(String::len))
                .max()
                .unwrap_or(0)
        })
        .collect();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, w)| format!("{cell:>w$}"))
            .collect();
        println!("  {}", cells.join("  "));
    }
}

/// The compact table of every configuration, then the ratios to one client
/// and to one thread where the run measured those baselines.
fn print_summary(args: &Args, configs: &[Config], stacks: &[Stack], samples: &[Vec<Vec<Sample>>]) {
    let gp = |ci: usize, si: usize| samples.get(ci)?.get(si).map(|r| median_mbps(r));
    let cpu = |ci: usize, si: usize| median_of(samples.get(ci)?.get(si)?, Sample::cpu_ms_per_mb);
    let client_cpu =
        |ci: usize, si: usize| median_of(samples.get(ci)?.get(si)?, Sample::client_cpu_ms_per_mb);
    let index = |s: Stack| stacks.iter().position(|&x| x == s);
    let (quinn, quinn_get) = (index(Stack::Quinn), index(Stack::QuinnToArtqGet));
    let (hq, h3) = (index(Stack::Artq(HQ)), index(Stack::Artq("h3")));
    let ratio_at = |ci: usize, a: Option<usize>, b: Option<usize>| {
        fmt_ratio(a.and_then(|a| gp(ci, a)), b.and_then(|b| gp(ci, b)))
    };

    println!();
    println!(
        "summary, median of {} round(s): Mbit/s = aggregate goodput; cpu = server CPU ms per MB \
         delivered; ccpu = the clients' CPU ms per MB; /quinn = artq/quinn (quinn's server and \
         client); /srv = artq/quinn-get (quinn's server, the same artq get clients: the servers \
         alone)",
        args.repeat
    );
    let mut header: Vec<String> = ["clients", "threads"].map(String::from).to_vec();
    for stack in stacks {
        header.push(format!("{} Mbit/s", stack.column()));
        header.push("cpu".into());
        header.push("ccpu".into());
        if matches!(stack, Stack::Artq(_)) {
            header.push("/quinn".into());
        }
        if *stack == Stack::Artq(HQ) {
            header.push("/srv".into());
        }
    }
    if h3.is_some() {
        header.push("h3/hq".into());
    }
    let mut rows = vec![header];
    for (ci, cfg) in configs.iter().enumerate() {
        let mut row = vec![cfg.clients.to_string(), cfg.threads.to_string()];
        for (si, stack) in stacks.iter().enumerate() {
            row.push(gp(ci, si).map_or("-".into(), |m| format!("{m:.1}")));
            row.push(cpu(ci, si).map_or("n/a".into(), |c| format!("{c:.2}")));
            row.push(client_cpu(ci, si).map_or("n/a".into(), |c| format!("{c:.2}")));
            if matches!(stack, Stack::Artq(_)) {
                row.push(ratio_at(ci, Some(si), quinn));
            }
            if *stack == Stack::Artq(HQ) {
                row.push(ratio_at(ci, Some(si), quinn_get));
            }
        }
        if h3.is_some() {
            row.push(ratio_at(ci, h3, hq));
        }
        rows.push(row);
    }
    print_table(&rows);

    // Ratios of each configuration to a baseline one measured in this run.
    let relative = |title: &str, baseline: &dyn Fn(Config) -> Option<Config>| {
        let pairs: Vec<(usize, usize)> = configs
            .iter()
            .enumerate()
            .filter_map(|(ci, cfg)| {
                let base = baseline(*cfg)?;
                let bi = configs.iter().position(|c| *c == base)?;
                Some((ci, bi))
            })
            .collect();
        if pairs.is_empty() {
            return;
        }
        println!();
        println!("{title}");
        let mut header: Vec<String> = ["clients", "threads"].map(String::from).to_vec();
        for stack in stacks {
            header.push(format!("{} goodput", stack.column()));
            header.push("cpu/MB".into());
        }
        let mut rows = vec![header];
        for (ci, bi) in pairs {
            let cfg = configs.get(ci).copied().unwrap_or(Config {
                clients: 0,
                threads: 0,
            });
            let mut row = vec![cfg.clients.to_string(), cfg.threads.to_string()];
            for si in 0..stacks.len() {
                row.push(fmt_ratio(gp(ci, si), gp(bi, si)));
                row.push(fmt_ratio(cpu(ci, si), cpu(bi, si)));
            }
            rows.push(row);
        }
        print_table(&rows);
    };
    relative(
        "relative to one client at the same threads (aggregate goodput ratio, server CPU per MB ratio)",
        &|c| (c.clients > 1).then_some(Config { clients: 1, ..c }),
    );
    relative(
        "relative to one thread with the same clients (aggregate goodput ratio, server CPU per MB ratio)",
        &|c| (c.threads > 1).then_some(Config { threads: 1, ..c }),
    );
}

/// (a) the quinn server child with `cfg.threads` workers, `cfg.clients`
/// clients in this process.
fn measure_quinn(
    exe: &Path,
    root: &Path,
    cfg: Config,
    size: u64,
    verify: Option<&Path>,
    deadline: Duration,
) -> Result<Sample> {
    let server = quinn_child::spawn_server(exe, root, cfg.threads as usize, READY_DEADLINE)?;
    let cpu_before = proc_cpu::process_cpu_time(server.pid()).ok();
    let clients_before = proc_cpu::own_cpu_time().ok();
    let spans =
        quinn_child::download_concurrently(server.addr, cfg.clients as usize, verify, deadline)
            .with_context(|| server_context("quinn server", &server.stderr()))?;
    let cpu_after = proc_cpu::process_cpu_time(server.pid()).ok();
    let clients_after = proc_cpu::own_cpu_time().ok();
    for (i, span) in spans.iter().enumerate() {
        if span.bytes != size {
            bail!(
                "quinn client #{} received {} bytes, expected {size}",
                i + 1,
                span.bytes
            );
        }
    }
    Sample::from_spans(
        &spans,
        cpu_delta(cpu_before, cpu_after),
        cpu_delta(clients_before, clients_after),
    )
}

/// The context a failed measurement's error gets: the server's stderr tail.
fn server_context(server: &str, stderr: &str) -> String {
    if stderr.trim().is_empty() {
        format!("measuring {server} (its stderr is empty)")
    } else {
        format!("measuring {server}; its stderr ends with:\n{stderr}\n")
    }
}

/// `after - before` when both were read.
fn cpu_delta(before: Option<Duration>, after: Option<Duration>) -> Option<Duration> {
    after?.checked_sub(before?)
}

/// (b), (c) one `artq serve` and `cfg.clients` `artq get --alpn <alpn>` at
/// once, as child processes; each transfer time is the one `artq get`
/// reports (request to last byte), placed in time by its exit.
fn measure_artq(
    artq: &Path,
    root: &Path,
    args: &Args,
    cfg: Config,
    alpn: &str,
    verify: Option<&Path>,
    deadline: Duration,
) -> Result<Sample> {
    let mut serve_args = args.serve_args.clone();
    serve_args.extend(["--threads".to_string(), cfg.threads.to_string()]);
    let server = artq_child::spawn_serve(artq, root, &serve_args, READY_DEADLINE).map_err(|e| {
        if format!("{e:#}").contains("--threads") {
            e.context(format!(
                "`artq serve` refused `--threads {}`: this artq binary ({}) may predate \
                     that flag; build an artq that has it",
                cfg.threads,
                artq.display()
            ))
        } else {
            e
        }
    })?;
    let gets = Gets {
        artq,
        args,
        cfg,
        alpn,
        verify,
        deadline,
    };
    gets.against(server.addr, server.pid(), || {
        server_context("artq serve", &server.stderr())
    })
}

/// quinn's server with `cfg.threads` workers -> `cfg.clients` `artq get
/// --alpn hq-interop` processes: the clients of [`measure_artq`] against the
/// server of [`measure_quinn`], so that its ratio to artq's hq-interop
/// figure compares the servers alone.
fn measure_quinn_to_artq_get(
    exe: &Path,
    artq: &Path,
    root: &Path,
    args: &Args,
    cfg: Config,
    verify: Option<&Path>,
    deadline: Duration,
) -> Result<Sample> {
    let server = quinn_child::spawn_server(exe, root, cfg.threads as usize, READY_DEADLINE)?;
    let gets = Gets {
        artq,
        args,
        cfg,
        alpn: HQ,
        verify,
        deadline,
    };
    gets.against(server.addr, server.pid(), || {
        server_context("quinn server (artq get clients)", &server.stderr())
    })
}

/// The `artq get` side of a measurement: `cfg.clients` downloads of
/// `/file` with `--alpn <alpn>`, the same against either server.
struct Gets<'a> {
    artq: &'a Path,
    args: &'a Args,
    cfg: Config,
    alpn: &'a str,
    verify: Option<&'a Path>,
    deadline: Duration,
}

impl Gets<'_> {
    /// Runs the downloads from the server at `addr` (process `pid`, whose
    /// CPU time they are measured by), each checked for the file's size;
    /// `context` describes the server for an error.
    fn against(
        &self,
        addr: SocketAddr,
        pid: u32,
        context: impl FnOnce() -> String,
    ) -> Result<Sample> {
        let url = format!("https://{addr}/file");
        let get_args = get_args_for(self.args, self.alpn, self.deadline);
        let cpu_before = proc_cpu::process_cpu_time(pid).ok();
        // The gets are waited for inside run_gets; the server is not, so
        // the ended children's delta is the clients'.
        let clients_before = proc_cpu::ended_children_cpu_time().ok();
        let gets = artq_child::run_gets(
            self.artq,
            &url,
            &get_args,
            self.cfg.clients as usize,
            self.verify,
            self.deadline,
        )
        .with_context(context)?;
        let cpu_after = proc_cpu::process_cpu_time(pid).ok();
        let clients_after = proc_cpu::ended_children_cpu_time().ok();
        let size = self.args.size;
        for (i, get) in gets.iter().enumerate() {
            if get.bytes != size {
                bail!(
                    "artq get #{} received {} bytes, expected {size}",
                    i + 1,
                    get.bytes
                );
            }
        }
        let spans: Vec<Span> = gets.iter().map(artq_child::ConcurrentGet::span).collect();
        Sample::from_spans(
            &spans,
            cpu_delta(cpu_before, cpu_after),
            cpu_delta(clients_before, clients_after),
        )
    }
}

/// `artq get`'s arguments: `--alpn`, the measurement's deadline as its
/// `--timeout` (artq get's own limit, 120 s by default, must not end a
/// slow but healthy run before this benchmark's deadline does) unless a
/// `--get-arg` sets one, and the `--get-arg`s.
fn get_args_for(args: &Args, alpn: &str, deadline: Duration) -> Vec<String> {
    let mut get_args = vec!["--alpn".to_string(), alpn.to_string()];
    if !args.get_args.iter().any(|a| a.starts_with("--timeout")) {
        get_args.extend(["--timeout".to_string(), deadline.as_secs().to_string()]);
    }
    get_args.extend(args.get_args.iter().cloned());
    get_args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_the_rounds_alias_parse() {
        let args = Args::try_parse_from([
            "loopback",
            "--clients",
            "4,1",
            "--threads",
            "1,2",
            "--rounds",
            "1",
        ])
        .expect("valid flags");
        assert_eq!(sorted_unique(&args.clients), [1, 4]);
        assert_eq!(args.threads, [1, 2]);
        assert_eq!(args.repeat, 1);
        let defaults = Args::try_parse_from(["loopback"]).expect("defaults");
        assert_eq!((defaults.clients, defaults.threads), (vec![1], vec![1]));
        assert!(Args::try_parse_from(["loopback", "--clients", "0"]).is_err());
    }

    #[test]
    fn the_quinn_child_flag_is_the_one_this_binary_parses() {
        let args = Args::try_parse_from([
            "loopback",
            quinn_child::SERVE_FLAG,
            "/srv",
            "--threads",
            "2",
        ])
        .expect("child flags");
        assert_eq!(args.internal_quinn_serve, Some(PathBuf::from("/srv")));
        assert_eq!(args.threads, [2]);
    }

    #[test]
    fn get_args_carry_the_deadline_unless_a_get_arg_sets_a_timeout() {
        let plain = Args::try_parse_from(["loopback"]).expect("defaults");
        assert_eq!(
            get_args_for(&plain, HQ, Duration::from_secs(42)),
            ["--alpn", HQ, "--timeout", "42"]
        );
        let own = Args::try_parse_from(["loopback", "--get-arg=--timeout=5"]).expect("get-arg");
        assert_eq!(
            get_args_for(&own, "h3", Duration::from_secs(42)),
            ["--alpn", "h3", "--timeout=5"]
        );
    }

    #[test]
    fn deadline_grows_with_the_bytes_moved() {
        let one = measurement_deadline(None, 1 << 30);
        let four = measurement_deadline(None, 4 << 30);
        assert!(four > one * 3, "{one:?} {four:?}");
        assert_eq!(
            measurement_deadline(Some(7), 1 << 40),
            Duration::from_secs(7)
        );
    }

    #[test]
    fn cpu_per_mb_is_milliseconds_per_million_bytes() {
        let s = Sample {
            bytes: 4_000_000,
            elapsed: Duration::from_secs(1),
            server_cpu: Some(Duration::from_millis(10)),
            client_cpu: Some(Duration::from_millis(20)),
        };
        assert!((s.cpu_ms_per_mb().expect("cpu") - 2.5).abs() < 1e-9);
        assert!((s.client_cpu_ms_per_mb().expect("client cpu") - 5.0).abs() < 1e-9);
        assert_eq!(fmt_ratio(Some(1.0), None), "-");
        assert_eq!(fmt_ratio(Some(3.0), Some(2.0)), "1.500");
    }
}
