//! `loopback`: bulk goodput of artq vs quinn over 127.0.0.1, in one run.
//!
//! Why this exists: DESIGN.md puts speed targets in benchmarks measured as a
//! ratio against a peer on the same machine in the same run. This moves one
//! seeded file of `--size` bytes (default 1 GiB) three times:
//! (a) quinn server -> quinn client (hq-interop), in this process (the
//!     reference);
//! (b) `artq serve` -> `artq get --alpn hq-interop`, and
//! (c) `artq serve` -> `artq get --alpn h3`, as child processes of the
//!     release binary;
//! and prints the goodputs (request sent to last byte received) and the
//! ratios artq/quinn and h3/hq-interop (the cost of HTTP/3's framing).
//!
//! Run: `cargo build --release -p artq && cargo run --release -p artq-bench
//! --bin loopback -- [--size 1GiB] [--artq PATH] [--quinn-only]`.

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use artq_bench::{artq_child, content, goodput_mbps, quinn_hq, size};
use clap::Parser;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Loopback bulk goodput: quinn -> quinn vs artq serve -> artq get")]
struct Args {
    /// Bytes to move (`1GiB`, `100MB`, `1048576`).
    #[arg(long, default_value = "1GiB", value_parser = parse_size_arg)]
    size: u64,
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
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    repeat: u32,
    /// Give up on any one transfer after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_s: u64,
    /// Extra arguments for `artq serve` (repeatable), e.g. `--serve-arg=--cc=bbr`.
    #[arg(long = "serve-arg", allow_hyphen_values = true)]
    serve_args: Vec<String>,
    /// Extra arguments for `artq get` (repeatable), e.g. `--get-arg=--recv-window=16MiB`.
    #[arg(long = "get-arg", allow_hyphen_values = true)]
    get_args: Vec<String>,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    size::parse_size(s).map_err(|e| e.to_string())
}

/// One measured transfer.
struct Measured {
    bytes: u64,
    transfer: Duration,
}

impl Measured {
    fn mbps(&self) -> f64 {
        goodput_mbps(self.bytes, self.transfer)
    }
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("loopback: error: {e:#}");
        std::process::exit(1);
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
    if cfg!(debug_assertions) {
        eprintln!("loopback: warning: this is a debug build; measure with --release");
    }
    let deadline = Duration::from_secs(args.timeout_s);

    let dir = tempfile::tempdir().context("creating a temp dir")?;
    let file = dir.path().join("file");
    eprintln!(
        "loopback: writing {} of seeded data to {}",
        size::format_size(args.size),
        file.display()
    );
    content::write_seeded_file(&file, args.size, args.seed).context("writing the test file")?;

    let alpns: &[&str] = if artq.is_some() {
        &["hq-interop", "h3"]
    } else {
        &[]
    };
    let mut quinn_runs = Vec::new();
    let mut artq_runs: Vec<Vec<Measured>> = alpns.iter().map(|_| Vec::new()).collect();
    for round in 1..=args.repeat {
        eprintln!(
            "loopback: round {round}/{}: quinn -> quinn ...",
            args.repeat
        );
        quinn_runs.push(measure_quinn(
            dir.path().to_path_buf(),
            args.size,
            deadline,
        )?);
        if let Some(bin) = &artq {
            for (runs, alpn) in artq_runs.iter_mut().zip(alpns) {
                eprintln!(
                    "loopback: round {round}/{}: artq serve -> artq get --alpn {alpn} ...",
                    args.repeat
                );
                runs.push(measure_artq(bin, dir.path(), &args, alpn, deadline)?);
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
    let quinn = median_mbps(&quinn_runs);
    println!(
        "  quinn -> quinn (hq-interop): {:>8.1} Mbit/s  {}",
        quinn,
        all_mbps(&quinn_runs)
    );
    let mut medians = Vec::new();
    for (runs, alpn) in artq_runs.iter().zip(alpns) {
        let m = median_mbps(runs);
        medians.push(m);
        println!(
            "  artq  -> artq  ({alpn:<10}): {m:>8.1} Mbit/s  {}  ratio artq/quinn {:.3}",
            all_mbps(runs),
            m / quinn
        );
    }
    match medians.as_slice() {
        [hq, h3] => println!("  ratio h3/hq-interop: {:.3}", h3 / hq),
        _ => println!("  artq  -> artq  : skipped (--quinn-only)"),
    }
    Ok(())
}

/// The median goodput of `runs`, Mbit/s.
fn median_mbps(runs: &[Measured]) -> f64 {
    let mut v: Vec<f64> = runs.iter().map(Measured::mbps).collect();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Every run's goodput, for the record: `[a, b, c]`.
fn all_mbps(runs: &[Measured]) -> String {
    let v: Vec<String> = runs.iter().map(|m| format!("{:.0}", m.mbps())).collect();
    format!("[{}]", v.join(", "))
}

/// (a) quinn server and client in this process; times request to last byte.
fn measure_quinn(root: PathBuf, size: u64, deadline: Duration) -> Result<Measured> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("building the tokio runtime")?;
    let fetched = rt.block_on(async {
        let server = quinn_hq::spawn_server(root).map_err(|e| anyhow!(e))?;
        let endpoint = quinn_hq::client_endpoint().map_err(|e| anyhow!(e))?;
        let fetched = tokio::time::timeout(
            deadline,
            quinn_hq::fetch(&endpoint, server.addr, "/file", &mut io::sink()),
        )
        .await
        .with_context(|| format!("quinn transfer took longer than {deadline:?}"))?
        .map_err(|e| anyhow!(e))?;
        let _ = tokio::time::timeout(Duration::from_secs(5), endpoint.wait_idle()).await;
        drop(server);
        Ok::<_, anyhow::Error>(fetched)
    })?;
    if fetched.bytes != size {
        bail!(
            "quinn client received {} bytes, expected {size}",
            fetched.bytes
        );
    }
    Ok(Measured {
        bytes: fetched.bytes,
        transfer: fetched.transfer,
    })
}

/// (b), (c) `artq serve` and `artq get --alpn <alpn>` as child processes;
/// the transfer time is the one `artq get` reports (request to last byte).
fn measure_artq(
    artq: &Path,
    root: &Path,
    args: &Args,
    alpn: &str,
    deadline: Duration,
) -> Result<Measured> {
    let server = artq_child::spawn_serve(artq, root, &args.serve_args, Duration::from_secs(30))?;
    let url = format!("https://{}/file", server.addr);
    let mut get_args = vec!["--alpn".to_string(), alpn.to_string()];
    get_args.extend(args.get_args.iter().cloned());
    let get = artq_child::run_get(artq, &url, &get_args, deadline)
        .with_context(|| format!("artq serve stderr:\n{}", server.stderr()))?;
    if get.bytes != args.size {
        bail!(
            "artq get received {} bytes, expected {}",
            get.bytes,
            args.size
        );
    }
    Ok(Measured {
        bytes: get.bytes,
        transfer: get.transfer,
    })
}
