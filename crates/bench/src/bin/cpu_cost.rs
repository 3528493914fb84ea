//! `cpu_cost`: the sender's CPU cost of `art` against `quic` in one process
//! (issue 4's benchmark; ART journal §7.6 reports +0.18% CPU for ART).
//!
//! Why this exists: ART adds work at the sender (the adapter's bitmap, the
//! scheduler's timers, the replicas themselves), and the paper's claim is
//! that this work is negligible. This simulates the same scenario (default:
//! 50 MB at 100 Mbit/s, 30 ms RTT, 5% loss both ways, seeds 1-3) with each
//! scheme, seed by seed and scheme after scheme in the same process, with
//! `RunOptions { measure_cpu: true, .. }`, and prints the sender's `cpu_ms`
//! per run, the totals, and the ratio art/quic (overall and per packet
//! sent, since ART sends more packets for the same data).
//!
//! What `cpu_ms` is: wall-clock time spent inside the sender node's code
//! (the server's QUIC connection, **including the TLS/AEAD packet protection
//! work** and the server application generating the file content) during the
//! simulation; the simulator's own event handling and the receiver are not
//! counted. It is a time, not the paper's CPU utilisation, and it is noisy:
//! repeat (`--repeat`) and compare ratios, not absolute values.
//!
//! Run: `cargo run --release -p artq-bench --bin cpu_cost -- [--size 50MB]
//! [--loss 0.05] [--seeds 3] [--repeat 1]`.

use anyhow::{bail, Result};
use artq_bench::size;
use clap::Parser;
use lab::{RunOptions, Scenario, Workload};
use netem::LinkSpec;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "Sender CPU time of art against quic on the same simulated scenario")]
struct Args {
    /// Bytes to transfer (`50MB`, `1GiB`).
    #[arg(long, default_value = "50MB", value_parser = parse_size_arg)]
    size: u64,
    /// Link rate, Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    bw: f64,
    /// Round-trip propagation delay, ms.
    #[arg(long, default_value_t = 30.0)]
    rtt: f64,
    /// Random loss probability, both directions (§7.6: 5%).
    #[arg(long, default_value_t = 0.05)]
    loss: f64,
    /// Seeds 1..=N.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
    /// Times each (seed, scheme) run is repeated, alternating schemes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeat: u64,
    /// The baseline scheme.
    #[arg(long, default_value = "quic")]
    base: String,
    /// The scheme measured against the baseline.
    #[arg(long, default_value = "art")]
    scheme: String,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    size::parse_size(s).map_err(|e| e.to_string())
}

/// Sums over the runs of one scheme.
#[derive(Default)]
struct Total {
    cpu_ms: f64,
    packets: u64,
    runs: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if cfg!(debug_assertions) {
        eprintln!("cpu_cost: warning: this is a debug build; measure with --release");
    }
    println!(
        "cpu_cost: {} MB at {} Mbit/s, {} ms RTT, {}% loss both ways, seeds 1..={}, {} repeat(s)",
        args.size as f64 / 1e6,
        args.bw,
        args.rtt,
        args.loss * 100.0,
        args.seeds,
        args.repeat
    );
    println!(
        "{:<8}{:>6}{:>12}{:>12}{:>10}{:>10}{:>8}",
        "scheme", "seed", "cpu_ms", "packets", "replicas", "fct s", "n_max"
    );
    let schemes = [args.base.clone(), args.scheme.clone()];
    // One unmeasured run of each scheme first: the first run of a process
    // pays for cold caches and lazy initialisation.
    for scheme in &schemes {
        if let Err(e) = lab::run_with(&scenario(&args, scheme, 1), RunOptions::default()) {
            bail!("{scheme} warm-up: {e}");
        }
    }
    let mut totals = [Total::default(), Total::default()];
    for seed in 1..=args.seeds {
        for _ in 0..args.repeat {
            for (scheme, total) in schemes.iter().zip(totals.iter_mut()) {
                let scenario = scenario(&args, scheme, seed);
                let options = RunOptions {
                    measure_cpu: true,
                    ..RunOptions::default()
                };
                let r = match lab::run_with(&scenario, options) {
                    Ok(r) => r,
                    Err(e) => bail!("{scheme} seed {seed}: {e}"),
                };
                let Some(cpu_ms) = r.metrics.cpu_ms else {
                    bail!("{scheme} seed {seed}: the lab did not measure the sender's CPU time");
                };
                let packets = r.sender_stats.packets_sent;
                println!(
                    "{:<8}{:>6}{:>12.1}{:>12}{:>10}{:>10.1}{:>8}",
                    scheme,
                    seed,
                    cpu_ms,
                    packets,
                    r.metrics.replicas,
                    r.metrics.fct_ms / 1e3,
                    r.metrics.n_max
                );
                total.cpu_ms += cpu_ms;
                total.packets = total.packets.saturating_add(packets);
                total.runs += 1;
            }
        }
    }
    let [base, ours] = &totals;
    for (name, t) in schemes.iter().zip(totals.iter()) {
        println!(
            "total {:<8} cpu_ms {:>10.1} over {} runs, {} packets ({:.3} us/packet)",
            name,
            t.cpu_ms,
            t.runs,
            t.packets,
            per_packet_us(t)
        );
    }
    if base.cpu_ms > 0.0 {
        let ratio = ours.cpu_ms / base.cpu_ms;
        println!(
            "ratio {}/{} cpu_ms: {:.4} ({:+.2}%; the paper, §7.6: +0.18%)",
            args.scheme,
            args.base,
            ratio,
            (ratio - 1.0) * 100.0
        );
    }
    let (pb, po) = (per_packet_us(base), per_packet_us(ours));
    if pb > 0.0 {
        println!(
            "ratio {}/{} cpu per packet sent: {:.4} ({:+.2}%)",
            args.scheme,
            args.base,
            po / pb,
            (po / pb - 1.0) * 100.0
        );
    }
    Ok(())
}

/// The benchmark's scenario for `scheme` and `seed`.
fn scenario(args: &Args, scheme: &str, seed: u64) -> Scenario {
    Scenario {
        scheme: scheme.to_string(),
        seed,
        workload: Workload::bulk(args.size),
        link: LinkSpec {
            bw: Some(args.bw),
            rtt: args.rtt,
            loss: Some(args.loss),
            ..LinkSpec::default()
        },
        ..Scenario::default()
    }
}

/// CPU microseconds per packet sent, 0 without packets.
fn per_packet_us(t: &Total) -> f64 {
    if t.packets == 0 {
        0.0
    } else {
        t.cpu_ms * 1e3 / t.packets as f64
    }
}
