//! `loopback`: bulk goodput of artq vs quinn over 127.0.0.1, in one run.
//!
//! Why this exists: DESIGN.md puts speed targets in benchmarks measured as a
//! ratio against a peer on the same machine in the same run. This moves one
//! seeded file of `--size` bytes (default 1 GiB) twice:
//! (a) quinn server -> quinn client, in this process (the reference);
//! (b) `artq serve` -> `artq get`, as child processes of the release binary;
//! and prints both goodputs (request sent to last byte received) and the ratio
//! artq/quinn.
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

    eprintln!("loopback: quinn -> quinn ...");
    let quinn = measure_quinn(dir.path().to_path_buf(), args.size, deadline)?;
    let artq_result = match &artq {
        Some(bin) => {
            eprintln!("loopback: artq serve -> artq get ({}) ...", bin.display());
            Some(measure_artq(bin, dir.path(), &args, deadline)?)
        }
        None => None,
    };

    println!(
        "loopback bulk goodput, {} ({} bytes), seed {}",
        size::format_size(args.size),
        args.size,
        args.seed
    );
    println!(
        "  quinn -> quinn : {:>9.1} Mbit/s  ({:.3} s)",
        quinn.mbps(),
        quinn.transfer.as_secs_f64()
    );
    if let Some((m, wall)) = &artq_result {
        println!(
            "  artq  -> artq  : {:>9.1} Mbit/s  ({:.3} s per artq get's summary; process wall time {:.3} s)",
            m.mbps(),
            m.transfer.as_secs_f64(),
            wall.as_secs_f64()
        );
        println!("  ratio artq/quinn: {:.3}", m.mbps() / quinn.mbps());
    } else {
        println!("  artq  -> artq  : skipped (--quinn-only)");
    }
    Ok(())
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

/// (b) `artq serve` and `artq get` as child processes; the transfer time is the
/// one `artq get` reports (request to last byte), its wall time is shown too.
fn measure_artq(
    artq: &Path,
    root: &Path,
    args: &Args,
    deadline: Duration,
) -> Result<(Measured, Duration)> {
    let server = artq_child::spawn_serve(artq, root, &args.serve_args, Duration::from_secs(30))?;
    let url = format!("https://{}/file", server.addr);
    let get = artq_child::run_get(artq, &url, &args.get_args, deadline)
        .with_context(|| format!("artq serve stderr:\n{}", server.stderr()))?;
    if get.bytes != args.size {
        bail!(
            "artq get received {} bytes, expected {}",
            get.bytes,
            args.size
        );
    }
    Ok((
        Measured {
            bytes: get.bytes,
            transfer: get.transfer,
        },
        get.wall,
    ))
}
