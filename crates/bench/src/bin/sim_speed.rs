//! `sim_speed`: how much faster than real time the simulator runs the real
//! transport (issue 3's benchmark).
//!
//! Why this exists: experiments sweep many scenarios and seeds, so `artq sim`
//! must be far faster than the network it emulates (target: at least 100x
//! real time on one core). This simulates one bulk transfer (default: 100 MB
//! at 100 Mbit/s, 30 ms RTT, 4% loss both ways) for each scheme (default:
//! `quic`, then `art` when the registry has it) and prints the wall time,
//! the simulated time, the speed-up (simulated / wall) and the simulated
//! datagrams per wall-clock second. A second, instrumented run splits the
//! wall time into phases: the sender node (QUIC server, content generation,
//! recovery policy), the receiver node (QUIC client, byte checks) and the
//! rest (event heap, links, metric bookkeeping).
//!
//! Run: `cargo run --release -p artq-bench --bin sim_speed -- [--size 100MB]
//! [--loss 0.04] [--scheme quic --scheme art]`.

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use artq_bench::size;
use clap::Parser;
use lab::scenario::ScenarioError;
use lab::{RunOptions, RunResult, Scenario, Workload};
use netem::LinkSpec;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    about = "Simulator speed: one bulk transfer in virtual time, wall time vs simulated time"
)]
struct Args {
    /// Bytes to transfer (`100MB`, `1GiB`).
    #[arg(long, default_value = "100MB", value_parser = parse_size_arg)]
    size: u64,
    /// Link rate, Mbit/s.
    #[arg(long, default_value_t = 100.0)]
    bw: f64,
    /// Round-trip propagation delay, ms.
    #[arg(long, default_value_t = 30.0)]
    rtt: f64,
    /// Random loss probability, both directions.
    #[arg(long, default_value_t = 0.04)]
    loss: f64,
    /// Scenario seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Schemes to run (repeatable); unknown ones are reported and skipped.
    #[arg(long = "scheme", default_values_t = ["quic".to_string(), "art".to_string()])]
    schemes: Vec<String>,
    /// Skip the second, instrumented run that splits the time into phases.
    #[arg(long)]
    no_phases: bool,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    size::parse_size(s).map_err(|e| e.to_string())
}

/// One timed run.
struct Timed {
    result: RunResult,
    wall: Duration,
}

fn timed_run(scenario: &Scenario, measure_cpu: bool) -> Result<Timed, ScenarioError> {
    let start = Instant::now();
    let result = lab::run_with(
        scenario,
        RunOptions {
            measure_cpu,
            ..RunOptions::default()
        },
    )?;
    Ok(Timed {
        result,
        wall: start.elapsed(),
    })
}

fn main() -> Result<()> {
    let args = Args::parse();
    if cfg!(debug_assertions) {
        eprintln!("sim_speed: warning: this is a debug build; measure with --release");
    }
    println!(
        "sim_speed: {} MB at {} Mbit/s, {} ms RTT, {}% loss both ways, seed {}",
        args.size as f64 / 1e6,
        args.bw,
        args.rtt,
        args.loss * 100.0,
        args.seed
    );
    println!(
        "{:<8}{:>9}{:>12}{:>10}{:>12}{:>14}{:>12}{:>10}{:>9}",
        "scheme",
        "wall s",
        "simulated s",
        "speed-up",
        "datagrams",
        "datagrams/s",
        "events/s",
        "goodput",
        "lost"
    );
    let mut ran = 0;
    let mut phases = Vec::new();
    for scheme in &args.schemes {
        let scenario = Scenario {
            scheme: scheme.clone(),
            seed: args.seed,
            workload: Workload::bulk(args.size),
            link: LinkSpec {
                bw: Some(args.bw),
                rtt: args.rtt,
                loss: Some(args.loss),
                ..LinkSpec::default()
            },
            ..Scenario::default()
        };
        let t = match timed_run(&scenario, false) {
            Ok(t) => t,
            Err(ScenarioError::Scheme(e)) => {
                println!("{scheme:<8}skipped: {e}");
                continue;
            }
            Err(e) => bail!("{scheme}: {e}"),
        };
        ran += 1;
        let wall = t.wall.as_secs_f64();
        let simulated = t.result.end.since_epoch().as_secs_f64();
        let per_sec = |n: u64| {
            if wall > 0.0 {
                n as f64 / wall
            } else {
                f64::INFINITY
            }
        };
        println!(
            "{:<8}{:>9.3}{:>12.3}{:>9.0}x{:>12}{:>14.0}{:>12.0}{:>10.1}{:>9}",
            t.result.metrics.scheme,
            wall,
            simulated,
            simulated / wall,
            t.result.sim.transmitted,
            per_sec(t.result.sim.transmitted),
            per_sec(t.result.sim.events),
            t.result.metrics.goodput_mbps,
            t.result.metrics.lost_packets,
        );
        if !args.no_phases {
            phases.push((scheme.clone(), timed_run(&scenario, true)?));
        }
    }
    if !phases.is_empty() {
        println!("\nwhere the wall time goes (instrumented runs, clock reads add a little):");
        println!(
            "{:<8}{:>9}{:>16}{:>18}{:>16}",
            "scheme", "wall s", "sender node", "receiver node", "simulator+rest"
        );
        for (scheme, t) in &phases {
            let wall = t.wall.as_secs_f64();
            let sender = t.result.sender_cpu.unwrap_or_default().as_secs_f64();
            let receiver = t.result.receiver_cpu.unwrap_or_default().as_secs_f64();
            let rest = (wall - sender - receiver).max(0.0);
            let pct = |x: f64| if wall > 0.0 { x * 100.0 / wall } else { 0.0 };
            println!(
                "{scheme:<8}{wall:>9.3}{:>9.3} s {:>3.0}%{:>11.3} s {:>3.0}%{:>9.3} s {:>3.0}%",
                sender,
                pct(sender),
                receiver,
                pct(receiver),
                rest,
                pct(rest)
            );
        }
    }
    if ran == 0 {
        bail!("no scheme could run");
    }
    Ok(())
}
