//! `cpu_cost`: the CPU overheads of ART's evaluation, measured as ratios
//! against plain QUIC in one process (issue 4's and issue 12's benchmark).
//!
//! Two comparisons, both by default:
//! - **§7.6** (ART journal): the sender's CPU with `quic`, `art` and `fec:9`
//!   at 5% loss "without limiting the bandwidth and delay" (an unlimited
//!   link with no propagation delay here); the paper: ART +0.18%, FEC
//!   +0.92%. FEC's rate is not stated in §7.6; 9:1 is the rate of Fig. 22.
//! - **§8.1**: `art`, `art-mab-eg`, `art-mab-ucb` and `art-dqn` against
//!   `quic`, server and client counted, over the Verizon LTE trace with
//!   30 ms RTT and 10% loss; the paper: ART +0.68%, ART-MAB +0.65%, ART-DQN
//!   +54.64%. The paper's trace is Verizon-LTE-driving; `../shared/traces`
//!   holds Verizon-LTE-short, which stands in. `art-dqn` starts untrained
//!   and learns online during each run (one learning step per settled
//!   round), as the paper's DQN process learned while serving.
//! - **decision**: the adapters alone ([`artq_bench::decisions`]): each
//!   policy fed the same seeded stream of losses, acknowledgements and
//!   replica fates (10% loss), microseconds per decision and the ratio to
//!   `art` measured in the same process (`art-dqn:online=false`: the forward
//!   pass without learning); and the learning steps per second
//!   of ART-DQN's learner (batch 32, memory filled).
//!
//! Every (seed, repeat) runs each scheme of a comparison one after another
//! in the same process, so machine load drifts hit them alike; one
//! unmeasured warm-up run per scheme comes first.
//!
//! What is measured: wall-clock time spent inside the measured nodes' code
//! (the QUIC connections, **including TLS/AEAD packet protection**, and the
//! applications generating and checking content) during the simulation;
//! the simulator's own event handling is not counted. It is a time, not the
//! paper's CPU utilisation, and it is noisy: compare ratios of repeated
//! runs (`--repeat`). Besides the ratio of all repeats, the ratio of the
//! fastest repeat of each seed is printed: on a machine shared with other
//! work it is the less disturbed of the two. The ratio per packet sent is printed too, since the
//! schemes send different numbers of packets for the same data.
//!
//! Run: `cargo run --release -p artq-bench --bin cpu_cost -- [--only 7.6|8.1|decision]
//! [--size 20MB] [--seeds 3] [--repeat 3] [--traces ../shared/traces]`.

use std::path::PathBuf;

use anyhow::{bail, Result};
use artq_bench::{decisions, size};
use clap::Parser;
use lab::{RunOptions, Scenario, Workload};
use netem::LinkSpec;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(about = "CPU time of ART, FEC and ART-MAB against QUIC (ART journal §7.6 and §8.1)")]
struct Args {
    /// Run only one comparison: `7.6`, `8.1` or `decision` [default: all].
    #[arg(long, value_parser = ["7.6", "8.1", "decision"])]
    only: Option<String>,
    /// decision: packets fed to each policy per repeat.
    #[arg(long, default_value_t = 200_000, value_parser = clap::value_parser!(u64).range(1..))]
    packets: u64,
    /// Bytes to transfer per run (`20MB`, `1GiB`).
    #[arg(long, default_value = "20MB", value_parser = parse_size_arg)]
    size: u64,
    /// Seeds 1..=N.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    seeds: u64,
    /// Times each (seed, scheme) run is repeated, alternating schemes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=100))]
    repeat: u64,
    /// §7.6's link rate, Mbit/s [default: unlimited, as the paper].
    #[arg(long, value_name = "MBPS")]
    bw: Option<f64>,
    /// §7.6's round-trip delay, ms (the paper: no delay).
    #[arg(long, default_value_t = 0.0, value_name = "MS")]
    rtt: f64,
    /// Directory of the Mahimahi traces (§8.1 uses Verizon-LTE-short.down
    /// and .up).
    #[arg(long, default_value = "../shared/traces")]
    traces: PathBuf,
}

fn parse_size_arg(s: &str) -> Result<u64, String> {
    size::parse_size(s).map_err(|e| e.to_string())
}

/// One comparison: schemes (the first is the baseline), a link, what is
/// counted and the paper's numbers.
struct Comparison {
    name: &'static str,
    setting: String,
    schemes: &'static [&'static str],
    link: LinkSpec,
    /// Count the receiver (client) too.
    both_ends: bool,
    /// The paper's overhead per scheme (after the baseline), percent; `None`
    /// where the paper gives none.
    paper: &'static [(&'static str, Option<f64>)],
    /// Schemes of the paper this build cannot run, and why.
    missing: &'static [(&'static str, &'static str)],
}

/// Sums over the runs of one scheme.
#[derive(Default, Clone)]
struct Total {
    cpu_ms: f64,
    packets: u64,
    runs: u64,
    /// Sum over the seeds of the fastest repeat of each seed: less moved by
    /// other processes' load than the sum of all repeats.
    best_ms: f64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    if cfg!(debug_assertions) {
        eprintln!("cpu_cost: warning: this is a debug build; measure with --release");
    }
    let down = args.traces.join("Verizon-LTE-short.down");
    let up = args.traces.join("Verizon-LTE-short.up");
    let comparisons = [
        Comparison {
            name: "7.6",
            setting: format!(
                "sender CPU, {}, {} ms RTT, 5% loss both ways",
                args.bw
                    .map_or("unlimited link".to_string(), |b| format!("{b} Mbit/s")),
                args.rtt
            ),
            schemes: &["quic", "art", "fec:9"],
            link: LinkSpec {
                bw: args.bw,
                rtt: args.rtt,
                loss: Some(0.05),
                ..LinkSpec::default()
            },
            both_ends: false,
            paper: &[("art", Some(0.18)), ("fec:9", Some(0.92))],
            missing: &[],
        },
        Comparison {
            name: "8.1",
            setting: format!(
                "sender + receiver CPU, {} / {}, 30 ms RTT, 10% loss both ways",
                down.display(),
                up.display()
            ),
            schemes: &["quic", "art", "art-mab-eg", "art-mab-ucb", "art-dqn"],
            link: {
                let mut l = LinkSpec {
                    rtt: 30.0,
                    loss: Some(0.10),
                    ..LinkSpec::default()
                };
                l.down.trace = Some(down.clone());
                l.up.trace = Some(up.clone());
                l
            },
            both_ends: true,
            paper: &[
                ("art", Some(0.68)),
                ("art-mab-eg", Some(0.65)),
                ("art-mab-ucb", Some(0.65)),
                ("art-dqn", Some(54.64)),
            ],
            missing: &[],
        },
    ];
    for c in &comparisons {
        if args.only.as_deref().is_some_and(|o| o != c.name) {
            continue;
        }
        run_comparison(&args, c)?;
    }
    if args.only.as_deref().is_none_or(|o| o == "decision") {
        run_decisions(&args)?;
    }
    Ok(())
}

/// The adapters' cost per decision, as ratios to `art`, and ART-DQN's
/// learning speed.
fn run_decisions(args: &Args) -> Result<()> {
    // art-dqn:online=false decides with the same untrained network but
    // never learns: its cost is the forward pass alone.
    const SCHEMES: [&str; 6] = [
        "quic",
        "art",
        "art-mab-eg",
        "art-mab-ucb",
        "art-dqn",
        "art-dqn:online=false",
    ];
    const LOSS: f64 = 0.10;
    println!(
        "== decision: each policy alone, {} packets at {}% loss per repeat, seeds 1..={}, {} repeat(s)",
        args.packets,
        LOSS * 100.0,
        args.seeds,
        args.repeat
    );
    let factories = SCHEMES
        .iter()
        .map(|s| recovery::parse_scheme(s).map(|s| s.policy()))
        .collect::<Result<Vec<_>, _>>()?;
    let mut best = [f64::INFINITY; SCHEMES.len()];
    let mut decisions = [0u64; SCHEMES.len()];
    let mut replicas = [0u64; SCHEMES.len()];
    for seed in 1..=args.seeds {
        for _ in 0..args.repeat {
            for (i, f) in factories.iter().enumerate() {
                let c = decisions::feed(f.as_ref(), args.packets, LOSS, seed);
                best[i] = best[i].min(c.us_per_decision());
                decisions[i] = c.decisions;
                replicas[i] = c.replicas;
            }
        }
    }
    println!(
        "{:<22}{:>14}{:>12}{:>12}{:>10}",
        "scheme", "us/decision", "decisions", "replicas", "vs art"
    );
    let art = best[1];
    for (i, name) in SCHEMES.iter().enumerate() {
        println!(
            "{:<22}{:>14.3}{:>12}{:>12}{:>10.2}",
            name,
            best[i],
            decisions[i],
            replicas[i],
            best[i] / art
        );
    }
    for (i, name) in SCHEMES.iter().enumerate().skip(2) {
        println!(
            "ratio decision {name}/art: {:.2} (fastest repeat over all seeds; the paper: bandits about as cheap as ART, DQN far costlier)",
            best[i] / art
        );
    }
    let art = recovery::art::DqnAdapterConfig::default().dqn(8);
    let rate = decisions::dqn_learn_rate(art, 10_000, 2_000, 1)?;
    println!(
        "art-dqn learner: {rate:.0} learning steps/s (batch 32, memory 10000, network 7-64-64-8, Double DQN)"
    );
    let rcp = recovery::rcp::policy::table3_dqn();
    let rate = decisions::dqn_learn_rate(rcp, 10_000, 2_000, 1)?;
    println!(
        "rcp learner: {rate:.0} learning steps/s (Table III: batch 32, memory 100000 filled to 10000, network 5-20-30-2 sigmoid, Double DQN, Adam)"
    );
    Ok(())
}

fn run_comparison(args: &Args, c: &Comparison) -> Result<()> {
    // The trace size also bounds the transfer: LTE traces carry a few
    // Mbit/s, so §8.1 moves a tenth of --size.
    let size = if c.both_ends {
        (args.size / 10).max(1)
    } else {
        args.size
    };
    println!(
        "== §{}: {}; {} MB per run, seeds 1..={}, {} repeat(s)",
        c.name,
        c.setting,
        size as f64 / 1e6,
        args.seeds,
        args.repeat
    );
    println!(
        "{:<12}{:>6}{:>12}{:>12}{:>10}{:>10}",
        "scheme", "seed", "cpu_ms", "packets", "replicas", "fct s"
    );
    for scheme in c.schemes {
        if let Err(e) = lab::run_with(&scenario(c, scheme, 1, size), RunOptions::default()) {
            bail!("§{} {scheme} warm-up: {e}", c.name);
        }
    }
    let mut totals = vec![Total::default(); c.schemes.len()];
    for seed in 1..=args.seeds {
        let mut best = vec![f64::INFINITY; c.schemes.len()];
        for _ in 0..args.repeat {
            for ((scheme, total), best) in c.schemes.iter().zip(totals.iter_mut()).zip(&mut best) {
                let options = RunOptions {
                    measure_cpu: true,
                    ..RunOptions::default()
                };
                let r = match lab::run_with(&scenario(c, scheme, seed, size), options) {
                    Ok(r) => r,
                    Err(e) => bail!("§{} {scheme} seed {seed}: {e}", c.name),
                };
                let (Some(sender), receiver) = (r.sender_cpu, r.receiver_cpu) else {
                    bail!("{scheme} seed {seed}: the lab did not measure the CPU time");
                };
                let mut cpu = sender;
                if c.both_ends {
                    let Some(rx) = receiver else {
                        bail!("{scheme} seed {seed}: no receiver CPU time");
                    };
                    cpu += rx;
                }
                let cpu_ms = cpu.as_secs_f64() * 1e3;
                let packets = r.sender_stats.packets_sent;
                println!(
                    "{:<12}{:>6}{:>12.1}{:>12}{:>10}{:>10.1}",
                    scheme,
                    seed,
                    cpu_ms,
                    packets,
                    r.metrics.replicas,
                    r.metrics.fct_ms / 1e3
                );
                total.cpu_ms += cpu_ms;
                total.packets = total.packets.saturating_add(packets);
                total.runs += 1;
                *best = best.min(cpu_ms);
            }
        }
        for (total, b) in totals.iter_mut().zip(best) {
            total.best_ms += b;
        }
    }
    for (name, t) in c.schemes.iter().zip(&totals) {
        println!(
            "total {:<12} cpu_ms {:>10.1} over {} runs, {} packets ({:.3} us/packet)",
            name,
            t.cpu_ms,
            t.runs,
            t.packets,
            per_packet_us(t)
        );
    }
    let base = &totals[0];
    let base_name = c.schemes[0];
    for (name, t) in c.schemes.iter().zip(&totals).skip(1) {
        if base.cpu_ms <= 0.0 {
            continue;
        }
        let ratio = t.cpu_ms / base.cpu_ms;
        let paper = c
            .paper
            .iter()
            .find(|(s, _)| s == name)
            .and_then(|(_, p)| *p)
            .map_or("no number".to_string(), |p| format!("{p:+.2}%"));
        let (pb, po) = (per_packet_us(base), per_packet_us(t));
        let per_packet = if pb > 0.0 {
            format!("{:+.2}% per packet sent", (po / pb - 1.0) * 100.0)
        } else {
            "-".into()
        };
        let best = if base.best_ms > 0.0 {
            format!(
                "fastest repeats {:+.2}%",
                (t.best_ms / base.best_ms - 1.0) * 100.0
            )
        } else {
            "-".into()
        };
        println!(
            "ratio §{} {name}/{base_name} cpu: {ratio:.4} ({:+.2}%; {best}; {per_packet}; the paper: {paper})",
            c.name,
            (ratio - 1.0) * 100.0
        );
    }
    for (name, why) in c.missing {
        println!("ratio §{} {name}/{base_name}: not measured: {why}", c.name);
    }
    Ok(())
}

/// The benchmark's scenario for `scheme` and `seed`.
fn scenario(c: &Comparison, scheme: &str, seed: u64, size: u64) -> Scenario {
    Scenario {
        scheme: scheme.to_string(),
        seed,
        workload: Workload::bulk(size),
        link: c.link.clone(),
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
