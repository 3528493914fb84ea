//! `artq sim`: one simulated scenario, the real transport over emulated
//! links in virtual time (crate `lab`), and its metrics.
//!
//! The scenario comes either from flags (link options shared with
//! `artq link`, workload, scheme) or from `--scenario FILE.toml`. The two
//! are exclusive, except `--seed`, which overrides the file's seed (to sweep
//! seeds over one scenario file); output options (`--json`, `--per-packet`,
//! `--measure-cpu`) apply to both.
//!
//! Output: a few aligned lines on stdout, or with `--json` exactly one JSON
//! object (DESIGN.md metric names). Progress goes to stderr, and only for
//! runs that take more than a couple of seconds of wall time: indicatif's
//! bar on a terminal, a line every few seconds otherwise.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use anyhow::{Context, Result};
use apps::workload::WorkloadOptions;
use apps::Protocol;
use clap::Args;
use lab::{RunOptions, RunResult, Scenario, Summary, Workload};
use netem::{Capacity, LinkConfig, LinkSpec, LossModel};
use transport::congestion::CongestionAlgorithm;

use crate::parse_size;
use crate::schemes;

/// `--bw` default for `artq sim`, Mbit/s (= `netem::spec::DEFAULT_BW_MBPS`).
const DEFAULT_BW: &str = "100";
/// `--rtt` default for `artq sim`, ms (= `netem::spec::DEFAULT_RTT_MS`).
const DEFAULT_RTT: &str = "30";
/// `--loss` default for `artq sim` (= `netem::spec::DEFAULT_LOSS`).
const DEFAULT_LOSS: &str = "0.01";

/// Wall time after which progress is shown.
const PROGRESS_AFTER: StdDuration = StdDuration::from_secs(2);
/// Wall time between progress updates.
const PROGRESS_EVERY: StdDuration = StdDuration::from_secs(1);

/// Options of `artq sim`.
#[derive(Args, Debug)]
pub struct SimArgs {
    /// What to run.
    #[command(flatten)]
    pub run: ScenarioArgs,
    /// Loss recovery scheme of the sender (the server); `--scheme help`
    /// lists them.
    #[arg(
        long,
        alias = "recovery",
        default_value = "quic",
        conflicts_with = "scenario"
    )]
    scheme: String,
    /// Print exactly one JSON object with the metrics on stdout.
    #[arg(long)]
    json: bool,
    /// Write one CSV row per recovered lost packet (item, stream, offset,
    /// len, n, k, first_sent_ms, t_wait_ms, recovery_latency_ms) to FILE.
    #[arg(long, value_name = "FILE")]
    per_packet: Option<PathBuf>,
    /// Write qlog traces of the run into DIR (created if missing):
    /// server.sqlog (the sender, with the recovery policy's
    /// artq:policy_state and artq:policy_event) and client.sqlog; open them
    /// in qvis.
    #[arg(long, value_name = "DIR")]
    qlog: Option<PathBuf>,
    /// Also measure the sender's CPU time (`cpu_ms`: wall time spent in the
    /// server's code; varies from run to run).
    #[arg(long)]
    measure_cpu: bool,
}

/// The options that say what one simulated run is, apart from its scheme:
/// link, workload, transport, seed, or a scenario file. Shared by
/// `artq sim` and `artq train`, so both accept and refuse the same things.
#[derive(Args, Debug)]
#[command(
    mut_arg("bw", |a| a.default_value(DEFAULT_BW)),
    mut_arg("rtt", |a| a.default_value(DEFAULT_RTT)),
    mut_arg("loss", |a| a.default_value(DEFAULT_LOSS)),
    // The workload's keys are flags of the same name: `--scenario`
    // conflicts with each, as the workload table lists them.
    mut_arg("scenario", |a| a.conflicts_with_all(apps::workload::workload_keys())),
)]
pub struct ScenarioArgs {
    #[command(flatten)]
    link: LinkSpec,
    /// Workload: files (N files of --size fetched one after another over
    /// one connection), live (a live stream: --bitrate, --fps, --duration,
    /// --gop, --iratio, --audio, --startup-delay), dash (DASH video:
    /// --video-duration; see docs/video.md) or rpc (--rpcs request/response
    /// calls at --rpc-rate per second over one connection; sizes in
    /// docs/apps.md) or messages (--messages messages of --message-size
    /// bytes at --message-rate per second in DATAGRAM frames, for the RCP
    /// schemes rcp, udp, arq, tcp; see docs/recovery.md).
    #[arg(long, value_name = "KIND", default_value = "files", value_parser = workload_kind)]
    workload: String,
    /// live: video bitrate, kbit/s.
    #[arg(long, value_name = "KBPS")]
    bitrate: Option<u32>,
    /// live: video frames per second [default: 30].
    #[arg(long, value_name = "N")]
    fps: Option<u32>,
    /// live: stream length, seconds.
    #[arg(long, value_name = "S")]
    duration: Option<u32>,
    /// live: frames per group of pictures (an I-frame every N frames)
    /// [default: 60].
    #[arg(long, value_name = "N")]
    gop: Option<u32>,
    /// live: I-frame size over P-frame size [default: 5].
    #[arg(long, value_name = "RATIO")]
    iratio: Option<u32>,
    /// live: audio bitrate, kbit/s (50 frames/s) [default: 0, no audio].
    #[arg(long, value_name = "KBPS")]
    audio: Option<u32>,
    /// live: the player's start-up delay, ms [default: 1000].
    #[arg(long, value_name = "MS")]
    startup_delay: Option<u32>,
    /// dash: video length, seconds [default: 600].
    #[arg(long, value_name = "S")]
    video_duration: Option<u32>,
    /// files: size of each file: bytes, or with a unit (KB, MB, GB =
    /// powers of 1000; KiB, MiB, GiB = powers of 1024) [default: 10MB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    size: Option<u64>,
    /// files: number of files of --size fetched one after another over one
    /// connection [default: 1].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    files: Option<u64>,
    /// rpc: number of calls [default: 1000].
    #[arg(long, value_name = "N")]
    rpcs: Option<u64>,
    /// rpc: calls per second, Poisson arrivals [default: 100].
    #[arg(long, value_name = "PER_S")]
    rpc_rate: Option<u64>,
    #[command(flatten)]
    messages: crate::message_args::MessageArgs,
    /// The client's receive window (flow-control credit: its receive
    /// buffer), bytes or with a unit [default: 16MiB].
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    recv_window: Option<u64>,
    /// The client's application protocol: hq-interop (the papers' runs) or
    /// h3; the server speaks both.
    #[arg(long, value_name = "PROTOCOL", default_value = "hq-interop")]
    alpn: Protocol,
    /// Congestion control of both ends: cubic, newreno, bbr or none. The
    /// message schemes set their own (none for rcp, udp and arq, newreno
    /// for tcp: the senders of RCP's evaluation), whatever --cc says.
    #[arg(long, default_value = "cubic")]
    cc: CongestionAlgorithm,
    /// Both ends use ECN: mark ECT(0), report and react to CE (RFC 9000
    /// §13.4); links mark CE with --ecn-mark.
    #[arg(long)]
    ecn: bool,
    /// The client (the data's receiver) acknowledges after this many
    /// ack-eliciting packets (RFC 9000 §13.2.2) [default: 2]. With
    /// --max-ack-delay 0, 1 acknowledges every packet at once (the RCP
    /// authors' receiver).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=i64::from(lab::scenario::MAX_ACK_THRESHOLD)))]
    ack_threshold: Option<u32>,
    /// The client's max_ack_delay, ms: how long it may hold an ACK (and
    /// the transport parameter it announces) [default: 25].
    #[arg(long, value_name = "MS")]
    max_ack_delay: Option<f64>,
    /// Master seed of the run: links, loss models, endpoints and file
    /// contents all derive their seeds from it [default: 1, or the
    /// scenario file's]. Overrides the seed of --scenario.
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Give up after this much virtual time, seconds [default: 3600].
    #[arg(long, value_name = "SECS")]
    time_limit: Option<f64>,
    /// Run the scenario in this TOML file (see docs/sim.md) instead of the
    /// link, workload and scheme flags.
    // Its conflicts with the workload's flags are added from the workload
    // table (`mut_arg("scenario", ..)` above).
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = [
            "bw", "up_bw", "down_bw", "trace", "up_trace", "down_trace", "rtt", "loss", "up_loss",
            "down_loss", "loss_model", "burst", "loss_std", "loss_interval", "loss_pattern", "queue",
            "queue_bytes", "ecn_mark", "recv_window", "cc", "ecn", "ack_threshold", "max_ack_delay",
            "time_limit", "workload", "alpn", "burst_reset",
        ]
    )]
    scenario: Option<PathBuf>,
}

/// `--workload`: a name from the registry (`apps::workload::WORKLOADS`).
fn workload_kind(s: &str) -> Result<String, String> {
    apps::workload::WORKLOADS
        .iter()
        .find(|w| w.name == s)
        .map(|w| w.name.to_string())
        .ok_or_else(|| {
            let known: Vec<String> = apps::workload::WORKLOADS
                .iter()
                .map(|w| format!("{} ({})", w.name, w.help))
                .collect();
            format!("unknown workload '{s}'; known: {}", known.join("; "))
        })
}

/// `--qlog DIR`: the two trace files, buffered.
fn qlog_sinks(dir: &std::path::Path) -> Result<lab::QlogSinks> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create --qlog {}", dir.display()))?;
    let open = |name: &str| -> Result<Box<dyn std::io::Write + Send>> {
        let path = dir.join(name);
        let file = File::create(&path)
            .with_context(|| format!("cannot create --qlog {}", path.display()))?;
        Ok(Box::new(BufWriter::new(file)))
    };
    Ok(lab::QlogSinks {
        server: open("server.sqlog")?,
        client: open("client.sqlog")?,
    })
}

/// The terminal's progress bar of one `artq sim` run: over the workload's
/// bytes when it has a total, over its items (DASH segments) when it has
/// several, else a spinner (live, rpc, messages: paced by their own clock).
/// It starts at `at` with its rate and ETA measured from then on (it appears
/// only after PROGRESS_AFTER, not at 0 bytes).
fn sim_bar(total_bytes: u64, items: u64, at: u64) -> indicatif::ProgressBar {
    let hidden = indicatif::ProgressDrawTarget::hidden;
    let (bar, template) = if total_bytes > 0 {
        (
            indicatif::ProgressBar::with_draw_target(Some(total_bytes), hidden()),
            "artq sim [{bar:30.cyan/blue}] {bytes}/{total_bytes} {bytes_per_sec} ETA {eta}  {msg}",
        )
    } else if items > 1 {
        (
            indicatif::ProgressBar::with_draw_target(Some(items), hidden()),
            "artq sim [{bar:30.cyan/blue}] {pos}/{len} items ETA {eta}  {msg}",
        )
    } else {
        (
            indicatif::ProgressBar::with_draw_target(None, hidden()),
            "artq sim {spinner} {elapsed} {msg}",
        )
    };
    let style = indicatif::ProgressStyle::with_template(template)
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_position(at);
    bar.reset_eta();
    bar.set_draw_target(indicatif::ProgressDrawTarget::stderr());
    bar
}

/// Runs `artq sim`.
pub fn run(a: SimArgs) -> Result<()> {
    let (scenario, links) = scenario_of(&a.run, &a.scheme)?;
    // The registry's error lists the schemes (`--scheme help` too).
    schemes::scheme(&scenario.scheme)?;
    let link_text = describe_links(&links.0, &links.1);
    let started = StdInstant::now();
    let mut last_shown: Option<StdInstant> = None;
    let terminal = std::io::stderr().is_terminal();
    // On a terminal: indicatif's bar (bytes or items with rate and ETA, or
    // a spinner when the workload has no total), from PROGRESS_AFTER on.
    let mut bar: Option<indicatif::ProgressBar> = None;
    let mut show = |p: &lab::Progress| {
        let wall = started.elapsed();
        if wall < PROGRESS_AFTER {
            return;
        }
        let virt = p.now.since_epoch().as_secs_f64();
        let items = scenario.workload.items();
        if terminal {
            let b = bar.get_or_insert_with(|| {
                let at = if p.total_bytes > 0 {
                    p.bytes_received
                } else {
                    p.files_done
                };
                sim_bar(p.total_bytes, items, at)
            });
            if p.total_bytes > 0 {
                b.set_position(p.bytes_received);
                b.set_message(format!("{} files, {virt:.1} s virtual", p.files_done));
            } else if items > 1 {
                b.set_position(p.files_done);
                b.set_message(format!("{virt:.1} s virtual"));
            } else {
                b.set_message(format!(
                    "{} received, {virt:.1} s virtual",
                    human_bytes(p.bytes_received)
                ));
                b.tick();
            }
            return;
        }
        if last_shown.is_some_and(|t| t.elapsed() < PROGRESS_EVERY) {
            return;
        }
        last_shown = Some(StdInstant::now());
        let wall = wall.as_secs_f64();
        let line = if p.total_bytes > 0 {
            let pct = p.bytes_received as f64 * 100.0 / p.total_bytes as f64;
            format!(
                "artq sim: {pct:5.1}% ({} of {}, {} files), {virt:.1} s virtual, {wall:.1} s wall",
                human_bytes(p.bytes_received),
                human_bytes(p.total_bytes),
                p.files_done,
            )
        } else if items > 1 {
            // DASH: its bytes are not known in advance; count segments.
            let pct = p.files_done as f64 * 100.0 / items as f64;
            format!(
                "artq sim: {pct:5.1}% ({} of {items} items), {virt:.1} s virtual, {wall:.1} s wall",
                p.files_done,
            )
        } else {
            // Live, rpc, messages: paced by their own clock; no total.
            format!(
                "artq sim: {} received, {virt:.1} s virtual, {wall:.1} s wall",
                human_bytes(p.bytes_received),
            )
        };
        eprintln!("{line}");
    };
    let qlog = match &a.qlog {
        Some(dir) => Some(qlog_sinks(dir)?),
        None => None,
    };
    let options = RunOptions {
        links: Some(links),
        measure_cpu: a.measure_cpu,
        progress: Some(&mut show),
        qlog,
        policy: None,
    };
    let result = lab::run_with(&scenario, options);
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let result = result?;
    if let Some(path) = &a.per_packet {
        let file = File::create(path)
            .with_context(|| format!("cannot create --per-packet {}", path.display()))?;
        result
            .write_per_packet_csv(BufWriter::new(file))
            .with_context(|| format!("cannot write --per-packet {}", path.display()))?;
    }
    let mut out = std::io::stdout().lock();
    if a.json {
        writeln!(out, "{}", result.to_json())?;
    } else {
        write!(out, "{}", summary(&link_text, &result))?;
    }
    out.flush()?;
    Ok(())
}

/// The scenario to run and its (up, down) links, from the file or the
/// flags; `scheme` is the scheme of a scenario built from flags (a file
/// names its own).
pub fn scenario_of(a: &ScenarioArgs, scheme: &str) -> Result<(Scenario, (LinkConfig, LinkConfig))> {
    if let Some(path) = &a.scenario {
        let mut s = Scenario::from_toml_file(path)?;
        if let Some(seed) = a.seed {
            s.seed = seed;
        }
        let links = s
            .link
            .configs()
            .with_context(|| format!("in scenario {}", path.display()))?;
        return Ok((s, links));
    }
    let links = a.link.configs()?;
    let defaults = Scenario::default();
    let s = Scenario {
        scheme: scheme.to_string(),
        cc: a.cc,
        seed: a.seed.unwrap_or(defaults.seed),
        recv_window: a.recv_window,
        ecn: a.ecn,
        ack_threshold: a.ack_threshold,
        max_ack_delay: a.max_ack_delay,
        time_limit: a.time_limit.unwrap_or(defaults.time_limit),
        alpn: a.alpn,
        workload: workload_of(a)?,
        ..defaults
    };
    Ok((s, links))
}

/// The workload of the flags, through the registry's flat keys (so flags
/// and scenario files accept and refuse the same things).
fn workload_of(a: &ScenarioArgs) -> Result<Workload> {
    let files_kind = a.workload == "files";
    let mut options = WorkloadOptions {
        kind: Some(a.workload.clone()),
        files: a.files,
        size: a.size.or(files_kind.then_some(DEFAULT_SIZE)),
        rpcs: a.rpcs.or((a.workload == "rpc").then_some(DEFAULT_RPCS)),
        rpc_rate: a.rpc_rate,
        bitrate: a.bitrate,
        fps: a.fps,
        duration: a.duration,
        gop: a.gop,
        iratio: a.iratio,
        audio: a.audio,
        startup_delay: a.startup_delay,
        video_duration: a.video_duration,
        ..WorkloadOptions::default()
    };
    a.messages.options(a.workload == "messages", &mut options);
    Workload::try_from(options).map_err(|e| anyhow::anyhow!("--workload {}: {e}", a.workload))
}

/// `--size` default of the files workload, bytes.
const DEFAULT_SIZE: u64 = 10_000_000;
/// `--rpcs` default of the rpc workload.
const DEFAULT_RPCS: u64 = 1000;
/// The human-readable result: a few aligned lines.
fn summary(link: &str, r: &RunResult) -> String {
    let m = &r.metrics;
    let files = if m.freeze_count.is_some() {
        "a live stream".to_string()
    } else if m.rebuffer_count.is_some() {
        format!("a DASH video ({} segments)", m.files.saturating_sub(1))
    } else if m.files == 1 {
        "1 file".to_string()
    } else {
        format!("{} files", m.files)
    };
    let mut out = String::new();
    let mut line = |l: String| {
        out.push_str(l.trim_end());
        out.push('\n');
    };
    let what = if m.rpc_fct_ms.is_some() {
        format!(
            "{} rpc calls, {} of responses",
            m.files,
            human_bytes(m.bytes)
        )
    } else if m.avg_bitrate_kbps.is_some() {
        format!("{files} of {} in all", human_bytes(m.bytes))
    } else {
        format!("{} of {}", files, human_bytes(m.bytes / m.files.max(1)))
    };
    line(format!(
        "artq sim: {} ({}), seed {}: {what} over {link}",
        m.scheme, m.cc, m.seed,
    ));
    line(format!(
        "  {:<22}{:>12.1} ms      {:<14}{:>8.2} Mbit/s",
        "flow completion time", m.fct_ms, "goodput", m.goodput_mbps
    ));
    if let Some(f) = &m.fct_ms_per_file {
        line(format!("  {:<22}{}", "per-file fct", dist(f)));
    }
    if let Some(f) = &m.rpc_fct_ms {
        line(format!("  {:<22}{}", "per-call fct", dist(f)));
    }
    if let Some(d) = m.delivery_ratio {
        line(format!(
            "  {:<22}{:>12.4}         {:<14}{:>8.1} ms",
            "delivery ratio",
            d,
            "mean latency",
            m.mean_latency_ms.unwrap_or(f64::NAN)
        ));
        line(format!(
            "  {:<22}{:>12.4}         {:<14}{:>8}",
            "utility",
            m.utility.unwrap_or(f64::NAN),
            "retransmit p",
            m.retransmission_probability
                .map_or("-".into(), |p| format!("{p:.3}"))
        ));
    }
    line(format!(
        "  {:<22}{:>12}         {:<14}{:>8}",
        "data packets", m.data_packets, "lost packets", m.lost_packets
    ));
    line(format!(
        "  {:<22}{:>12}         {:<14}{:>8}   (ratio {:.4})",
        "replicas", m.replicas, "extra replicas", m.extra_replicas, m.retransmission_ratio
    ));
    line(format!(
        "  {:<22}{:>12}         {:<14}{:>8}   (n >= 2: {:.2}%, latency >= T_unit: {:.2}%)",
        "n_max",
        m.n_max,
        "k_max",
        m.k_max,
        m.share_n_ge_2 * 100.0,
        m.recovery_deterioration_rate * 100.0
    ));
    line(format!(
        "  {:<22}{}",
        "t_wait",
        m.t_wait_ms.as_ref().map_or("-".into(), dist)
    ));
    line(format!(
        "  {:<22}{}",
        "recovery latency",
        m.recovery_latency_ms.as_ref().map_or("-".into(), dist)
    ));
    line(format!(
        "  {:<22}{:>12}",
        "spurious losses", m.spurious_retransmissions
    ));
    if let Some(cpu) = m.cpu_ms {
        line(format!("  {:<22}{:>12.1} ms", "sender cpu", cpu));
    }
    if let Some(kbps) = m.avg_bitrate_kbps {
        line(format!(
            "  {:<22}{:>12.1} kbit/s  {:<14}{:>8}",
            "avg bitrate",
            kbps,
            "startup",
            m.startup_ms.map_or("-".into(), |v| format!("{v:.0} ms"))
        ));
    }
    if let (Some(n), Some(t)) = (m.freeze_count, m.freeze_ms) {
        line(format!(
            "  {:<22}{:>12.2}         {:<14}{:>8.1} ms  (per 100 s of playback)",
            "freezes", n, "frozen", t
        ));
    }
    if let (Some(n), Some(t), Some(sw)) = (m.rebuffer_count, m.rebuffer_ms, m.bitrate_switches) {
        line(format!(
            "  {:<22}{:>12}         {:<14}{:>8.1} s   (switches {sw})",
            "rebufferings",
            n,
            "rebuffering",
            t / 1e3
        ));
    }
    out
}

/// `p50 .. p95 .. p99 .. max .. mean .. ms`.
fn dist(s: &Summary) -> String {
    format!(
        "p50 {:.1}  p95 {:.1}  p99 {:.1}  max {:.1}  mean {:.1} ms",
        s.p50, s.p95, s.p99, s.max, s.mean
    )
}

/// `10.0 MB`, `512 B`: powers of 1000, as the size flags.
pub(crate) fn human_bytes(b: u64) -> String {
    match b {
        b if b >= 1_000_000_000 => format!("{:.2} GB", b as f64 / 1e9),
        b if b >= 1_000_000 => format!("{:.1} MB", b as f64 / 1e6),
        b if b >= 1_000 => format!("{:.1} KB", b as f64 / 1e3),
        b => format!("{b} B"),
    }
}

/// `100 Mbit/s, 30 ms RTT, 1% bernoulli loss` (directions shown apart when
/// they differ).
fn describe_links(up: &LinkConfig, down: &LinkConfig) -> String {
    let rate = |c: &Capacity| match c {
        Capacity::Constant { bits_per_sec } => format!("{} Mbit/s", *bits_per_sec as f64 / 1e6),
        Capacity::Stepped {
            bits_per_sec,
            changes,
        } => format!(
            "{} Mbit/s, then {changes} (ms:Mbit/s)",
            *bits_per_sec as f64 / 1e6
        ),
        Capacity::Trace(t) => format!("trace {}", t.origin()),
        Capacity::Slotted(s) => {
            let mut words = format!(
                "{} packets per {} ms slot after a {} ms sojourn",
                s.per_slot,
                s.slot.as_secs_f64() * 1e3,
                s.sojourn.as_secs_f64() * 1e3
            );
            if !s.changes.is_empty() {
                words.push_str(&format!(", then {} (ms:packets)", s.changes));
            }
            words
        }
        Capacity::Unlimited => "unlimited rate".to_string(),
    };
    let loss = |l: &LossModel| match l {
        LossModel::None => "no loss".to_string(),
        LossModel::Bernoulli { p } if *p == 0.0 => "no loss".to_string(),
        LossModel::Bernoulli { p } => format!("{}% loss", p * 100.0),
        LossModel::GilbertElliott { .. } => {
            format!("{:.3}% burst loss", l.mean_loss_rate() * 100.0)
        }
        LossModel::Varying { mean, .. } => format!("{}% varying loss", mean * 100.0),
        LossModel::Replay { .. } => format!("replayed loss ({:.3}%)", l.mean_loss_rate() * 100.0),
    };
    let rtt_ms = (up.delay + down.delay).as_secs_f64() * 1e3;
    let both = |f: &dyn Fn(&LinkConfig) -> String| {
        let (u, d) = (f(up), f(down));
        if u == d {
            u
        } else {
            format!("{d} down / {u} up")
        }
    };
    format!(
        "{}, {rtt_ms} ms RTT, {}",
        both(&|l| rate(&l.capacity)),
        both(&|l| loss(&l.loss))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        sim: SimArgs,
    }

    fn parse(args: &[&str]) -> Result<SimArgs, clap::Error> {
        let mut all = vec!["sim"];
        all.extend_from_slice(args);
        Cli::try_parse_from(all).map(|c| c.sim)
    }

    #[test]
    fn defaults_are_the_lab_defaults() {
        let a = parse(&[]).expect("no flags");
        let (s, (up, down)) = scenario_of(&a.run, &a.scheme).expect("default scenario");
        let lab_default = Scenario::default();
        assert_eq!(s, lab_default, "flag defaults = lab::Scenario::default()");
        let (lab_up, lab_down) = lab_default.link.configs().expect("lab links");
        assert_eq!((&up, &down), (&lab_up, &lab_down));
        assert_eq!(
            describe_links(&lab_up, &lab_down),
            "100 Mbit/s, 30 ms RTT, 1% loss"
        );
    }

    #[test]
    fn flags_and_toml_build_the_same_links() {
        let a = parse(&[
            "--bw",
            "20",
            "--down-bw",
            "12",
            "--rtt",
            "40",
            "--loss",
            "0.02",
            "--up-loss",
            "0",
            "--loss-model",
            "gilbert",
            "--burst",
            "4",
            "--queue",
            "64",
        ])
        .expect("flags");
        let text = "[link]\nbw = 20\nrtt = 40\nloss = 0.02\nloss_model = \"gilbert\"\nburst = 4\nqueue = 64\n\
                    [link.down]\nbw = 12\n[link.up]\nloss = 0\n";
        let from_toml = Scenario::from_toml_str(text, "<test>").expect("toml");
        assert_eq!(
            a.run.link.configs().expect("flag links"),
            from_toml.link.configs().expect("toml links")
        );
    }

    #[test]
    fn scenario_file_excludes_scenario_flags_but_not_seed() {
        assert!(parse(&["--scenario", "s.toml", "--loss", "0.1"]).is_err());
        assert!(parse(&["--scenario", "s.toml", "--size", "1MB"]).is_err());
        assert!(parse(&["--scenario", "s.toml", "--scheme", "quic"]).is_err());
        let a = parse(&["--scenario", "s.toml", "--seed", "9", "--json"])
            .expect("seed and output flags combine");
        assert_eq!(a.run.seed, Some(9));
    }

    /// `--scenario`'s conflicts with the workload's flags are read from
    /// the workload table: every key of every row is a flag, refused with
    /// a scenario file.
    #[test]
    fn scenario_file_excludes_every_workload_key_of_the_table() {
        for key in apps::workload::workload_keys() {
            let flag = format!("--{}", key.replace('_', "-"));
            assert!(parse(&[&flag, "1"]).is_ok(), "{flag} is a flag");
            let err = parse(&["--scenario", "s.toml", &flag, "1"]).expect_err(&flag);
            assert_eq!(
                err.kind(),
                clap::error::ErrorKind::ArgumentConflict,
                "{flag}"
            );
        }
    }

    /// Every workload flag reaches the workload's keys (`workload_of`
    /// passes it on): given with a kind that does not own it, the flag is
    /// refused by name. A flag `workload_of` forgot would be silently
    /// ignored instead.
    #[test]
    fn every_workload_flag_reaches_the_workload() {
        for row in apps::workload::WORKLOADS {
            let other = apps::workload::WORKLOADS
                .iter()
                .find(|r| r.name != row.name)
                .expect("more than one workload");
            for key in row.keys {
                let flag = format!("--{}", key.replace('_', "-"));
                let a = parse(&["--workload", other.name, &flag, "1"]).expect(&flag);
                let err = workload_of(&a.run).expect_err(&flag).to_string();
                assert!(
                    err.contains(&format!("no key `{key}`")),
                    "{flag} with --workload {}: {err}",
                    other.name
                );
            }
        }
    }

    #[test]
    fn bad_flags_are_refused() {
        assert!(parse(&["--files", "0"]).is_err());
        assert!(parse(&["--size", "ten"]).is_err());
        assert!(parse(&["--cc", "vegas"]).is_err());
        let a = parse(&["--loss", "2"]).expect("parses");
        assert!(
            scenario_of(&a.run, &a.scheme).is_err(),
            "loss 2 is out of range"
        );
    }

    #[test]
    fn missing_trace_is_named_once() {
        let a = parse(&["--trace", "/nonexistent/artq.trace"]).expect("parses");
        let message = format!(
            "{:#}",
            scenario_of(&a.run, &a.scheme).expect_err("no such file")
        );
        assert!(
            message.starts_with("/nonexistent/artq.trace: "),
            "{message}"
        );
        assert_eq!(message.matches("os error").count(), 1, "{message}");
    }

    #[test]
    fn burst_reset_flag_defaults_to_100_ms_and_takes_none() {
        let a = parse(&["--loss-model", "gilbert"]).expect("flags");
        assert_eq!(a.run.link.burst_reset, netem::BurstReset::AfterMs(100.0));
        let a = parse(&["--loss-model", "gilbert", "--burst-reset", "none"]).expect("flags");
        assert_eq!(a.run.link.burst_reset, netem::BurstReset::None);
        let a = parse(&["--burst-reset", "250"]).expect("flags");
        assert_eq!(a.run.link.burst_reset, netem::BurstReset::AfterMs(250.0));
        assert!(parse(&["--burst-reset", "later"]).is_err());
        let a = parse(&["--loss-model", "gilbert", "--burst-reset", "0"]).expect("parses");
        assert!(
            scenario_of(&a.run, &a.scheme).is_err(),
            "a reset of 0 ms is refused"
        );
    }

    #[test]
    fn sizes_print_in_powers_of_1000() {
        assert_eq!(human_bytes(10_000_000), "10.0 MB");
        assert_eq!(human_bytes(1500), "1.5 KB");
        assert_eq!(human_bytes(12), "12 B");
    }
}
