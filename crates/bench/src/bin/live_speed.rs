//! `live_speed`: how much faster than real time the simulator plays one
//! live stream at AutoRec's default setting (issue 10's speed target: a
//! 60 s, ~8 Mbit/s stream at least 20x faster than real time).
//!
//! Why this exists: `autorec-fig11` runs hundreds of 60 s streams, so one
//! must take a few seconds at most. The scenario is exactly the
//! experiment's default case (`lab::experiments::autorec`: 7000 kbit/s
//! payload, ~7.6 Mbit/s on the link, 8 Mbit/s, 50 ms, 5% loss both ways,
//! 500 KB buffer, BBR, 60 s at full scale), run once per scheme. Printed
//! per scheme: wall time, simulated time, the speed-up (simulated / wall),
//! and each scheme's wall time against the first scheme's, measured in the
//! same process.
//!
//! Run: `cargo run --release -p artq-bench --bin live_speed -- [--scheme
//! quic --scheme autorec] [--seed 1]`.

use std::time::Instant;

use anyhow::{anyhow, Result};
use clap::Parser;
use lab::experiments::{experiment, Scale};
use lab::RunOptions;

/// Command-line options.
#[derive(Parser, Debug)]
#[command(
    about = "Simulator speed on a live stream: AutoRec's default setting (60 s), wall time vs simulated time"
)]
struct Args {
    /// Schemes to run (repeatable); each must be a case of autorec-fig11's
    /// default setting (quic, art, autorec).
    #[arg(long = "scheme", default_values_t = ["quic".to_string(), "autorec".to_string()])]
    schemes: Vec<String>,
    /// Scenario seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> Result<()> {
    let args = Args::parse();
    let e = experiment("autorec-fig11", Scale::Full)
        .ok_or_else(|| anyhow!("autorec-fig11 is not registered"))?;
    println!("{}", e.setting);
    println!(
        "{:<10} {:>9} {:>11} {:>9} {:>12} {:>10}",
        "scheme", "wall_s", "simulated_s", "speedup", "vs_first", "freezes"
    );
    let mut first: Option<f64> = None;
    for scheme in &args.schemes {
        let Some(case) = e
            .cases
            .iter()
            .find(|c| c.group == "default" && &c.scheme == scheme)
        else {
            eprintln!("{scheme}: not a case of the default setting, skipped");
            continue;
        };
        let mut scenario = case.scenario.clone();
        scenario.seed = args.seed;
        let start = Instant::now();
        let r = lab::run_with(&scenario, RunOptions::default())?;
        let wall = start.elapsed().as_secs_f64();
        let simulated = r.metrics.fct_ms / 1e3;
        let base = *first.get_or_insert(wall);
        println!(
            "{:<10} {:>9.3} {:>11.1} {:>8.1}x {:>11.2}x {:>10.2}",
            scheme,
            wall,
            simulated,
            simulated / wall.max(1e-9),
            wall / base.max(1e-9),
            r.metrics.freeze_count.unwrap_or(0.0)
        );
    }
    Ok(())
}
