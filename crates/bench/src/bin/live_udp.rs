//! `live_udp`: freezes of a live stream over real UDP, `artq get --live`
//! playing from `artq serve` through `artq link`, per scheme over the same
//! seeds (issue 10: "fewer freezes with autorec than with quic, reported,
//! not asserted").
//!
//! Why a benchmark and not a test: over real sockets the outcome depends on
//! wall-clock timing (scheduling, a loaded machine), so a freeze count is a
//! measurement to report, not a property to assert. The simulator's
//! `autorec-fig11` is the deterministic counterpart.
//!
//! The default setting is AutoRec's default (autorec.md §5.1, as
//! `lab::experiments::autorec` models it): an 8 Mbit/s link, 50 ms RTT,
//! 5% Bernoulli loss both ways, a 500 KB drop-tail buffer, BBR at the
//! server, a 7000 kbit/s stream. Each run is three processes: `artq serve
//! --recovery S --cc bbr --seed N`, `artq link ... --seed N` (the seed fixes
//! the link's loss pattern, so the schemes of one seed face the same losses
//! packet by packet) and `artq get --live --stats`, whose statistics line
//! (the player's freezes, frozen time, start-up delay) is read back. Runs go
//! one after another, the schemes of a seed back to back, so machine load
//! drifts hit them alike.
//!
//! Printed: one row per run, then per scheme the mean freezes per run,
//! freezes per 100 s of playback and frozen time, and each scheme's frozen
//! time against the first scheme's.
//!
//! Run: `cargo build --release -p artq && cargo run --release -p artq-bench
//! --bin live_udp -- [--seeds 5] [--first-seed 1] [--scheme quic --scheme autorec]
//! [--seconds 20] [--kbps 7000] [--startup-delay 1000] [--artq PATH]`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use artq_bench::artq_child::{artq_next_to_exe, ensure_artq_exists, spawn_serve};
use artq_bench::process::{self, spawn_listening};
use clap::Parser;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    about = "Live-stream freezes over real UDP (artq serve -> artq link -> artq get --live), per scheme over the same seeds"
)]
struct Args {
    /// Schemes to compare (repeatable); the first is the baseline of the ratios.
    #[arg(long = "scheme", default_values_t = ["quic".to_string(), "autorec".to_string()])]
    schemes: Vec<String>,
    /// How many seeds: FIRST..FIRST+N; each seed fixes the link's loss pattern and the server's randomness.
    #[arg(long, default_value_t = 5)]
    seeds: u64,
    /// The first seed (to extend an earlier batch with new seeds).
    #[arg(long = "first-seed", default_value_t = 1)]
    first_seed: u64,
    /// Stream length, seconds.
    #[arg(long, default_value_t = 20)]
    seconds: u32,
    /// Stream payload bitrate, kbit/s.
    #[arg(long, default_value_t = 7000)]
    kbps: u32,
    /// The player's start-up delay, ms.
    #[arg(long = "startup-delay", default_value_t = 1000)]
    startup_delay: u32,
    /// Link bandwidth, Mbit/s.
    #[arg(long, default_value_t = 8.0)]
    bw: f64,
    /// Link round-trip time, ms.
    #[arg(long, default_value_t = 50.0)]
    rtt: f64,
    /// Loss probability each way.
    #[arg(long, default_value_t = 0.05)]
    loss: f64,
    /// Bottleneck buffer, bytes.
    #[arg(long = "queue-bytes", default_value_t = 500_000)]
    queue_bytes: u64,
    /// The server's congestion control.
    #[arg(long, default_value = "bbr")]
    cc: String,
    /// The artq binary (default: `artq` next to this executable).
    #[arg(long)]
    artq: Option<PathBuf>,
}

/// What the player reported for one run.
#[derive(Debug, Clone, Copy)]
struct Played {
    freezes: f64,
    per_100s: f64,
    frozen_ms: f64,
    startup_ms: f64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if args.schemes.is_empty() || args.seeds == 0 {
        bail!("nothing to run: give at least one --scheme and --seeds >= 1");
    }
    let artq = match &args.artq {
        Some(p) => p.clone(),
        None => artq_next_to_exe()?,
    };
    ensure_artq_exists(&artq)?;
    let root = tempfile::tempdir().context("temp dir for artq serve's --root")?;
    println!(
        "live stream {} kbit/s for {} s, start-up delay {} ms; link {} Mbit/s, {} ms RTT, {}% loss both ways, {} B buffer; server cc {}",
        args.kbps,
        args.seconds,
        args.startup_delay,
        args.bw,
        args.rtt,
        args.loss * 100.0,
        args.queue_bytes,
        args.cc
    );
    println!(
        "{:<10} {:>5} {:>8} {:>10} {:>10} {:>11}",
        "scheme", "seed", "freezes", "per_100s", "frozen_ms", "startup_ms"
    );
    let mut runs: Vec<Vec<Played>> = vec![Vec::new(); args.schemes.len()];
    for seed in args.first_seed..args.first_seed.saturating_add(args.seeds) {
        for (i, scheme) in args.schemes.iter().enumerate() {
            let p = run_once(&artq, root.path(), &args, scheme, seed)
                .with_context(|| format!("{scheme}, seed {seed}"))?;
            println!(
                "{:<10} {:>5} {:>8} {:>10.2} {:>10.1} {:>11.1}",
                scheme, seed, p.freezes, p.per_100s, p.frozen_ms, p.startup_ms
            );
            runs[i].push(p);
        }
    }
    println!();
    println!(
        "{:<10} {:>13} {:>14} {:>15} {:>17}",
        "scheme", "freezes/run", "freezes/100s", "frozen_ms/run", "frozen vs first"
    );
    let mean = |v: &[Played], f: fn(&Played) -> f64| v.iter().map(f).sum::<f64>() / v.len() as f64;
    let base = mean(&runs[0], |p| p.frozen_ms);
    for (scheme, v) in args.schemes.iter().zip(&runs) {
        let frozen = mean(v, |p| p.frozen_ms);
        let ratio = if base > 0.0 {
            format!("{:.2}x", frozen / base)
        } else {
            "-".to_string()
        };
        println!(
            "{:<10} {:>13.2} {:>14.2} {:>15.1} {:>17}",
            scheme,
            mean(v, |p| p.freezes),
            mean(v, |p| p.per_100s),
            frozen,
            ratio
        );
    }
    Ok(())
}

/// One run: a server and a link for this scheme and seed, and one player.
fn run_once(artq: &Path, root: &Path, args: &Args, scheme: &str, seed: u64) -> Result<Played> {
    let deadline = Duration::from_secs(20);
    let seed_s = seed.to_string();
    let server = spawn_serve(
        artq,
        root,
        &[
            "--recovery".into(),
            scheme.into(),
            "--cc".into(),
            args.cc.clone(),
            "--seed".into(),
            seed_s.clone(),
        ],
        deadline,
    )?;
    let logs = tempfile::tempdir().context("temp dir for artq link's stderr")?;
    let mut link = Command::new(artq);
    link.args(["link", "--listen", "127.0.0.1:0", "--to"])
        .arg(server.addr.to_string())
        .args(["--bw", &args.bw.to_string()])
        .args(["--rtt", &args.rtt.to_string()])
        .args(["--loss", &args.loss.to_string()])
        .args(["--queue-bytes", &args.queue_bytes.to_string()])
        .args(["--seed", &seed_s]);
    let (_link, link_addr) =
        spawn_listening(link, "artq-link", logs.path(), deadline).map_err(anyhow::Error::msg)?;
    let mut get = Command::new(artq);
    get.arg("get")
        .arg(format!(
            "https://{link_addr}/live/{}/{}",
            args.kbps, args.seconds
        ))
        .args(["--insecure", "--live", "--stats"])
        .args(["--startup-delay", &args.startup_delay.to_string()]);
    // The stream plays in real time; allow it three times its length.
    let limit = Duration::from_secs(u64::from(args.seconds) * 3 + 30);
    let out = process::run_with_deadline(get, limit).map_err(anyhow::Error::msg)?;
    if !out.status.success() {
        bail!("artq get failed ({}); stderr:\n{}", out.status, out.stderr);
    }
    parse_played(&out.stdout).ok_or_else(|| {
        anyhow!(
            "no player statistics line in artq get's stdout:\n{}",
            out.stdout
        )
    })
}

/// Reads the player's statistics from `artq get --live --stats`'s JSON line.
fn parse_played(stdout: &str) -> Option<Played> {
    stdout.lines().find_map(|line| {
        let v: serde_json::Value = serde_json::from_str(line).ok()?;
        if v.get("workload")?.as_str()? != "live" {
            return None;
        }
        Some(Played {
            freezes: v.get("freezes")?.as_f64()?,
            per_100s: v.get("freeze_count")?.as_f64()?,
            frozen_ms: v.get("frozen_ms")?.as_f64()?,
            startup_ms: v.get("startup_ms")?.as_f64()?,
        })
    })
}
