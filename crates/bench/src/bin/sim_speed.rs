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
//! Two presets measure what issue 27 asks of the simulator:
//! - `--preset saturated`: a saturated link (100 MB over 100 Mbit/s, 30 ms
//!   RTT, BBR), without loss and with 1% loss both ways, `quic`: the
//!   speed-up over real time and the data packets per wall-clock second,
//!   then the same transfers by quinn-proto's two endpoints alone
//!   (`artq_bench::quinn_pair`, a floor: no simulator, no content
//!   generated or checked) and artq's wall time per data packet against
//!   theirs;
//! - `--preset flows`: N flows (1, 10, 100) sharing one 100 Mbit/s, 30 ms
//!   bottleneck, BBR, no random loss, 100 MB in all (each flow 100 MB / N):
//!   the wall time per simulated datagram, and its ratio to one flow's, which
//!   stays flat when no per-event work grows with the number of flows;
//!   then the same for quinn-proto's pairs alone, whose ratio shows what
//!   more connections cost a QUIC stack by themselves (their state and
//!   handshakes).
//!
//! Run: `cargo run --release -p artq-bench --bin sim_speed -- [--size 100MB]
//! [--loss 0.04] [--scheme quic --scheme art]`, or `-- --preset saturated`
//! (`--preset flows`).

use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use artq_bench::quinn_pair::{self, PairSpec};
use artq_bench::size;
use clap::Parser;
use lab::scenario::FlowSpec;
use lab::scenario::ScenarioError;
use lab::{RunOptions, RunResult, Scenario, Workload};
use netem::LinkSpec;
use transport::congestion::CongestionAlgorithm;

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
    /// Run a preset instead of the link and scheme flags (module doc):
    /// `saturated` (100 MB, 100 Mbit/s, 30 ms, BBR, 0% and 1% loss) or
    /// `flows` (1, 10 and 100 flows on one such bottleneck).
    #[arg(long, value_enum, conflicts_with_all = ["size", "bw", "rtt", "loss", "schemes"])]
    preset: Option<Preset>,
}

/// The presets of issue 27 (module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Preset {
    /// A saturated 100 Mbit/s link, without and with 1% loss.
    Saturated,
    /// 1, 10 and 100 flows sharing one 100 Mbit/s bottleneck.
    Flows,
}

/// The presets' link rate, Mbit/s, and RTT, ms.
const PRESET_BW: f64 = 100.0;
const PRESET_RTT: f64 = 30.0;
/// The presets' bytes in all.
const PRESET_BYTES: u64 = 100_000_000;
/// The saturated preset's random loss rates.
const SATURATED_LOSS: [f64; 2] = [0.0, 0.01];
/// The UDP payload size of the reference pair: the simulator's datagrams
/// are 1350 bytes (the transport's default, with no path MTU discovery in
/// the presets' scenarios).
const PAIR_MTU: u16 = 1350;
/// The flows preset's flow counts.
const FLOW_COUNTS: [usize; 3] = [1, 10, 100];

/// A bulk scenario of the presets: `flows` flows of `quic` with BBR over
/// one link of [`PRESET_BW`] and [`PRESET_RTT`] with random `loss`,
/// [`PRESET_BYTES`] in all.
fn preset_scenario(flows: usize, loss: f64, seed: u64) -> Scenario {
    let per_flow = PRESET_BYTES / flows.max(1) as u64;
    Scenario {
        scheme: "quic".into(),
        cc: CongestionAlgorithm::Bbr,
        seed,
        workload: Workload::bulk(per_flow),
        link: LinkSpec {
            bw: Some(PRESET_BW),
            rtt: PRESET_RTT,
            loss: Some(loss),
            ..LinkSpec::default()
        },
        flows: (1..flows)
            .map(|_| FlowSpec {
                scheme: "quic".into(),
                cc: CongestionAlgorithm::Bbr,
                workload: Workload::bulk(per_flow),
            })
            .collect(),
        ..Scenario::default()
    }
}

/// The quinn-proto reference of [`preset_scenario`]: the same flows,
/// bytes, link and loss (`artq_bench::quinn_pair`).
fn preset_pair(flows: usize, loss: f64, seed: u64) -> PairSpec {
    PairSpec {
        flows,
        bytes: PRESET_BYTES,
        rate_bps: PRESET_BW * 1e6,
        rtt: Duration::from_secs_f64(PRESET_RTT / 1e3),
        loss,
        mtu: PAIR_MTU,
        seed,
    }
}

/// `--preset saturated`: one line per loss rate.
fn run_saturated(seed: u64) -> Result<()> {
    println!(
        "sim_speed --preset saturated: {} MB, {PRESET_BW} Mbit/s, {PRESET_RTT} ms RTT, BBR, quic, seed {seed}",
        PRESET_BYTES / 1_000_000
    );
    println!(
        "{:>6}{:>9}{:>12}{:>10}{:>14}{:>16}{:>10}",
        "loss", "wall s", "simulated s", "speed-up", "data packets", "data packets/s", "goodput"
    );
    let row = |loss: f64, wall: f64, simulated: f64, packets: u64, goodput: f64| {
        println!(
            "{:>5.0}%{wall:>9.3}{simulated:>12.3}{:>9.1}x{packets:>14}{:>16.0}{goodput:>10.1}",
            loss * 100.0,
            ratio(simulated, wall),
            ratio(packets as f64, wall),
        );
    };
    let mut artq_cost = Vec::new();
    for loss in SATURATED_LOSS {
        let t = timed_run(&preset_scenario(1, loss, seed), false)?;
        let wall = t.wall.as_secs_f64();
        let packets = t.result.metrics.data_packets;
        row(
            loss,
            wall,
            t.result.end.since_epoch().as_secs_f64(),
            packets,
            t.result.metrics.goodput_mbps,
        );
        artq_cost.push(ratio(wall, packets as f64));
    }
    println!(
        "reference: quinn-proto's client and server alone, same crypto, datagram size, BBR and bottleneck,\n\
         \x20          with no simulator, no body generated and none checked (data packets: the server's datagrams)"
    );
    let mut against = Vec::new();
    for (loss, artq) in SATURATED_LOSS.into_iter().zip(artq_cost) {
        let run = quinn_pair::run(&preset_pair(1, loss, seed))?;
        let wall = run.wall.as_secs_f64();
        let simulated = run.simulated.as_secs_f64();
        row(
            loss,
            wall,
            simulated,
            run.server_datagrams,
            ratio(PRESET_BYTES as f64 * 8.0 / 1e6, simulated),
        );
        let quinn = ratio(wall, run.server_datagrams as f64);
        against.push(format!("{:.2} at {:.0}%", ratio(artq, quinn), loss * 100.0));
    }
    println!(
        "artq's wall time per data packet / quinn-proto's: {}",
        against.join(", ")
    );
    Ok(())
}

/// `--preset flows`: one line per flow count, with the cost per simulated
/// datagram against one flow's.
fn run_flows(seed: u64) -> Result<()> {
    println!(
        "sim_speed --preset flows: {} MB in all over one {PRESET_BW} Mbit/s, {PRESET_RTT} ms bottleneck, BBR, quic, no random loss, seed {seed}",
        PRESET_BYTES / 1_000_000
    );
    println!(
        "{:>6}{:>9}{:>12}{:>10}{:>12}{:>14}{:>14}{:>12}",
        "flows",
        "wall s",
        "simulated s",
        "speed-up",
        "datagrams",
        "datagrams/s",
        "us/datagram",
        "vs 1 flow"
    );
    let row = |flows: usize, wall: f64, simulated: f64, datagrams: u64, base: &mut Option<f64>| {
        let cost = ratio(wall * 1e6, datagrams as f64);
        let against = ratio(cost, *base.get_or_insert(cost));
        println!(
            "{flows:>6}{wall:>9.3}{simulated:>12.3}{:>9.1}x{datagrams:>12}{:>14.0}{cost:>14.3}{against:>11.2}x",
            ratio(simulated, wall),
            ratio(datagrams as f64, wall),
        );
    };
    let mut base = None;
    for flows in FLOW_COUNTS {
        let t = timed_run(&preset_scenario(flows, 0.0, seed), false)?;
        row(
            flows,
            t.wall.as_secs_f64(),
            t.result.end.since_epoch().as_secs_f64(),
            t.result.sim.transmitted,
            &mut base,
        );
    }
    println!(
        "reference: quinn-proto's clients and servers alone, same crypto, datagram size, BBR and bottleneck,\n\
         \x20          with no simulator, no body generated and none checked (datagrams: both directions)"
    );
    let mut base = None;
    for flows in FLOW_COUNTS {
        let run = quinn_pair::run(&preset_pair(flows, 0.0, seed))?;
        row(
            flows,
            run.wall.as_secs_f64(),
            run.simulated.as_secs_f64(),
            run.datagrams(),
            &mut base,
        );
    }
    Ok(())
}

/// `a / b`, infinite when `b` is 0 (a run too fast for the clock).
fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        a / b
    } else {
        f64::INFINITY
    }
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
    match args.preset {
        Some(Preset::Saturated) => return run_saturated(args.seed),
        Some(Preset::Flows) => return run_flows(args.seed),
        None => {}
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
