//! Running one [`Scenario`]: two [`QuicNode`]s joined by an emulated link in
//! the discrete-event simulator, then the metrics. The nodes run the
//! workload's server and client applications (`apps::workload`); this module
//! never knows which.
//!
//! Topology: the client at `127.0.0.1:50000`, the server at
//! `127.0.0.1:4433` (the addresses are only labels), the "up" link carrying
//! client-to-server datagrams, the "down" link the other way. Extra flows
//! ([`Scenario::flows`]: each its own scheme, congestion control and
//! workload) put their client and server at the next ports and share both
//! links, so they compete at the same bottleneck queue (a dumbbell); their
//! seeds' labels start with `flow<i>/`. Seeds: links
//! `derive_seed(seed, "link/up" | "link/down")`, endpoints
//! `derive_seed(seed, "endpoint/client" | "endpoint/server")`, file contents
//! `derive_seed(seed, "workload/content")`.

use std::cell::RefCell;
use std::io::{self, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;

use apps::files::{ClientError, FileTimes};
use apps::messages::{MessageSender, StartGate};
use apps::workload::ClientReport;
use apps::Host;
use netem::seed::{LINK_DOWN, LINK_UP};
use netem::{derive_seed, LinkConfig, LinkStats, RunOutcome, SimStats, Simulator};
use transport::policy::PolicyFactory;
use transport::{ClientConfig, Endpoint, EndpointConfig, ServerConfig, TransportConfig};
use wire::time::{Duration, Instant};

use crate::metrics::{ms, ItemRecord, Recorder, RunFacts, RunMetrics};
use crate::node::{tls_configs, QuicNode, ReceiverObserver, SenderFacts, SenderObserver};
use crate::scenario::{FlowSpec, Scenario, ScenarioError};

/// The server's address in the simulation.
pub const SERVER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 4433);
/// The client's address in the simulation.
pub const CLIENT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 50000);

/// Virtual time between two progress reports.
const PROGRESS_SLICE: Duration = Duration::from_millis(250);

/// Where a run stands, for progress displays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Virtual time.
    pub now: Instant,
    /// Payload bytes the client has received and checked.
    pub bytes_received: u64,
    /// Payload bytes of the whole workload.
    pub total_bytes: u64,
    /// Items (files) completed.
    pub files_done: u64,
}

/// How to run a scenario, beyond the scenario itself.
#[derive(Default)]
pub struct RunOptions<'a> {
    /// Use these (client-to-server, server-to-client) links instead of
    /// building them from `scenario.link` (for callers that parse link
    /// options themselves, like `artq sim`'s flags).
    pub links: Option<(LinkConfig, LinkConfig)>,
    /// Measure the CPU time of both nodes (`cpu_ms` is the sender's; not
    /// deterministic).
    pub measure_cpu: bool,
    /// Called every 250 ms of virtual time.
    pub progress: Option<&'a mut dyn FnMut(&Progress)>,
    /// The sender's policy factory instead of a fresh one parsed from
    /// `scenario.scheme`: a caller that keeps state across runs (`artq
    /// train`'s learner, shared by every episode) passes its own.
    pub policy: Option<Arc<dyn PolicyFactory>>,
    /// Write qlog traces of the measured connection (both vantage points)
    /// here: the transport's events plus the recovery policy's
    /// `artq:policy_state` and `artq:policy_event`s.
    pub qlog: Option<QlogSinks>,
}

/// Where a run's qlog traces go: the caller opens them (this crate writes
/// no files), the run writes JSON-SEQ into them.
pub struct QlogSinks {
    /// The sender's (server's) trace.
    pub server: Box<dyn std::io::Write + Send>,
    /// The receiver's (client's) trace.
    pub client: Box<dyn std::io::Write + Send>,
}

/// Everything one run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The JSON metrics.
    pub metrics: RunMetrics,
    /// One record per recovered item, in recovery order.
    pub items: Vec<ItemRecord>,
    /// Per-file request and completion times.
    pub files: Vec<FileTimes>,
    /// A video workload's playback statistics (also in `metrics`).
    pub playback: Option<apps::workload::Playback>,
    /// Virtual time when the simulation stopped (after the connection closed).
    pub end: Instant,
    /// Simulator counters (events, datagrams).
    pub sim: SimStats,
    /// Client-to-server link counters.
    pub up: LinkStats,
    /// Server-to-client link counters.
    pub down: LinkStats,
    /// Wall time spent in the sender's (server node's) code, when measured.
    pub sender_cpu: Option<std::time::Duration>,
    /// Wall time spent in the receiver's (client node's) code, when measured.
    pub receiver_cpu: Option<std::time::Duration>,
    /// First-arrival segments the recorder still held at the end: files the
    /// sender finished are dropped, so this stays small for any number of
    /// files (a memory check).
    pub arrival_segments: usize,
    /// The sender's (server's) connection counters at the end, for figures
    /// that need more than [`RunMetrics`] has (`fec_repairs`, the FEC
    /// repair packets that count towards `fec:K`'s redundancy cost).
    pub sender_stats: transport::ConnectionStats,
    /// The metrics of the scenario's extra flows ([`Scenario::flows`]), in
    /// order; empty for a one-flow run.
    pub flows: Vec<RunMetrics>,
    /// The message workload's retransmissions over time: when each
    /// retransmitted message's recovery ended, with its retransmissions
    /// (`Recorder::message_retransmissions`); empty for other workloads.
    pub message_retransmissions: Vec<(Instant, u32)>,
}

impl RunResult {
    /// The metrics as one line of JSON (fields in DESIGN.md order).
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.metrics).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// Writes the per-packet CSV: a header, then one row per recovered item
    /// (`item,stream,offset,len,n,k,first_sent_ms,t_wait_ms,recovery_latency_ms`;
    /// `stream` and `offset` are the item's first chunk's, `len` all its
    /// bytes; an empty cell where a value does not exist).
    pub fn write_per_packet_csv(&self, mut out: impl Write) -> io::Result<()> {
        writeln!(
            out,
            "item,stream,offset,len,n,k,first_sent_ms,t_wait_ms,recovery_latency_ms"
        )?;
        let cell = |v: Option<Duration>| v.map(|d| format!("{:.3}", ms(d))).unwrap_or_default();
        for i in &self.items {
            writeln!(
                out,
                "{},{},{},{},{},{},{:.3},{},{}",
                i.item,
                i.stream,
                i.offset,
                i.len,
                i.n,
                i.k,
                ms(i.first_sent.since_epoch()),
                cell(i.t_wait),
                cell(i.recovery_latency),
            )?;
        }
        out.flush()
    }
}

/// Runs `scenario` with default options.
pub fn run(scenario: &Scenario) -> Result<RunResult, ScenarioError> {
    run_with(scenario, RunOptions::default())
}

/// Runs `scenario`: builds the links, the nodes of every flow and the
/// simulator, runs until every client is done and its connection closed
/// (or the time limit), and computes the metrics: the scenario's own flow
/// in [`RunResult::metrics`], the extra flows' in [`RunResult::flows`].
pub fn run_with(scenario: &Scenario, options: RunOptions<'_>) -> Result<RunResult, ScenarioError> {
    let RunOptions {
        links,
        measure_cpu,
        mut progress,
        qlog,
        policy,
    } = options;
    let mut prepared = prepare(scenario, links, measure_cpu, qlog, policy)?;
    let workload = scenario.workload;
    let limit = prepared.limit;
    let first_client = prepared.placed[0].client_id;
    let sim = &mut prepared.sim;
    let outcome = match progress.as_mut() {
        None => sim.run_until(limit),
        Some(report) => loop {
            // Slicing the run changes nothing: run_until resumes exactly
            // where it stopped.
            let until = (sim.now() + PROGRESS_SLICE).min(limit);
            let outcome = sim.run_until(until);
            if let Some(c) = sim
                .node::<QuicNode>(first_client)
                .and_then(|n| workload.client_report(n.host()))
            {
                report(&Progress {
                    now: sim.now(),
                    bytes_received: c.bytes_received,
                    total_bytes: workload.total_bytes(),
                    files_done: c.items.len() as u64,
                });
            }
            if outcome != RunOutcome::DeadlineReached || until >= limit {
                break outcome;
            }
        },
    };
    finish(scenario, &prepared, outcome)
}

/// A scenario's simulator with every flow placed, not yet run: what
/// [`run_with`] runs to the end and `lab::steer` runs step by step.
pub(crate) struct Prepared {
    /// The simulator.
    pub sim: Simulator,
    /// The flows: the scenario's own first, then its extra flows.
    pub flows: Vec<FlowSpec>,
    /// Their nodes, in the same order.
    pub placed: Vec<PlacedFlow>,
    up_id: netem::LinkId,
    down_id: netem::LinkId,
    /// The scenario's time limit.
    pub limit: Instant,
}

/// Builds the links, the nodes of every flow and the simulator of
/// `scenario` (the measured flow with the caller's `qlog` and `policy`).
pub(crate) fn prepare(
    scenario: &Scenario,
    links: Option<(LinkConfig, LinkConfig)>,
    measure_cpu: bool,
    mut qlog: Option<QlogSinks>,
    mut policy: Option<Arc<dyn PolicyFactory>>,
) -> Result<Prepared, ScenarioError> {
    scenario.validate()?;
    let (up, down) = match links {
        Some(l) => l,
        None => scenario.link.configs()?,
    };
    let seed = scenario.seed;
    let mut sim = Simulator::new();
    let up_id = sim.add_link(up, derive_seed(seed, LINK_UP));
    let down_id = sim.add_link(down, derive_seed(seed, LINK_DOWN));
    let main = FlowSpec {
        scheme: scenario.scheme.clone(),
        cc: scenario.cc,
        workload: scenario.workload,
    };
    let flows: Vec<FlowSpec> = std::iter::once(main)
        .chain(scenario.flows.iter().cloned())
        .collect();
    // The message senders start together, after every handshake, as the
    // authors' clients all start in slot 1 (apps::messages::StartGate).
    let senders = flows
        .iter()
        .filter(|f| f.workload.kind().message_params().is_some())
        .count();
    let gate = (senders > 1).then(|| StartGate::new(senders));
    let mut placed = Vec::with_capacity(flows.len());
    for (i, flow) in flows.iter().enumerate() {
        placed.push(add_flow(
            &mut sim,
            scenario,
            i,
            flow,
            (up_id, down_id),
            measure_cpu,
            // Only the measured flow is traced, and only it runs a
            // caller's own policy factory.
            FlowExtras {
                qlog: if i == 0 { qlog.take() } else { None },
                policy: if i == 0 { policy.take() } else { None },
                gate: gate.clone(),
            },
        )?);
    }
    Ok(Prepared {
        sim,
        flows,
        placed,
        up_id,
        down_id,
        limit: Instant::ZERO + Duration::from_secs_f64(scenario.time_limit),
    })
}

/// The results of a run that stopped with `outcome`: the scenario's own
/// flow must have completed; extra flows report what they got.
pub(crate) fn finish(
    scenario: &Scenario,
    prepared: &Prepared,
    outcome: RunOutcome,
) -> Result<RunResult, ScenarioError> {
    let Prepared {
        sim,
        flows,
        placed,
        up_id,
        down_id,
        ..
    } = prepared;
    let end = sim.now();
    let sim_stats = sim.stats();
    let up_stats = sim.link_stats(*up_id).unwrap_or_default();
    let down_stats = sim.link_stats(*down_id).unwrap_or_default();
    let mut results = Vec::with_capacity(placed.len());
    for (i, (flow, nodes)) in flows.iter().zip(placed).enumerate() {
        let measured = measure_flow(sim, scenario, flow, nodes, outcome, end);
        match measured {
            Ok(m) => results.push(m),
            // The scenario's own flow must complete; an extra flow that did
            // not is reported with what it got.
            Err(e) if i == 0 => return Err(e),
            Err(_) => results.push(measure_flow_anyway(sim, scenario, flow, nodes, end)?),
        }
    }
    let mut results = results.into_iter();
    let Some(main) = results.next() else {
        return Err(ScenarioError::Setup("no flow was run".into()));
    };
    Ok(RunResult {
        metrics: main.metrics,
        items: main.items,
        files: main.files,
        playback: main.playback,
        end,
        sim: sim_stats,
        up: up_stats,
        down: down_stats,
        sender_cpu: main.sender_cpu,
        receiver_cpu: main.receiver_cpu,
        arrival_segments: main.arrival_segments,
        sender_stats: main.sender_stats,
        message_retransmissions: main.message_retransmissions,
        flows: results.map(|f| f.metrics).collect(),
    })
}

/// One flow's nodes in the simulator and what measures them.
pub(crate) struct PlacedFlow {
    /// The sender's node.
    pub server_id: netem::NodeId,
    /// The receiver's node.
    pub client_id: netem::NodeId,
    recorder: Recorder,
    /// What the sender's observer learned (the measured connection).
    pub sender: Rc<RefCell<SenderFacts>>,
    /// The congestion controller both ends use: the flow's, unless its
    /// scheme sets one.
    cc: transport::congestion::CongestionAlgorithm,
}

/// Flow `index`'s addresses: the scenario's own flow (0) at
/// [`SERVER_ADDR`] and [`CLIENT_ADDR`], flow `i` at the ports `i` above.
pub fn flow_addrs(index: usize) -> (SocketAddr, SocketAddr) {
    let i = u16::try_from(index).unwrap_or(u16::MAX);
    let mut server = SERVER_ADDR;
    server.set_port(SERVER_ADDR.port().saturating_add(i));
    let mut client = CLIENT_ADDR;
    client.set_port(CLIENT_ADDR.port().saturating_add(i));
    (server, client)
}

/// A seed label of flow `index`: the scenario's own flow keeps the plain
/// labels (so a one-flow run is what it always was), flow `i` prefixes
/// `flow<i>/`.
fn flow_label(index: usize, label: &str) -> String {
    if index == 0 {
        label.to_string()
    } else {
        format!("flow{index}/{label}")
    }
}

/// What a flow gets beside its spec: the measured flow (flow 0) alone its
/// qlog and a caller's policy factory ([`RunOptions`]); every message
/// sender the run's [`StartGate`], when it has two or more.
struct FlowExtras {
    qlog: Option<QlogSinks>,
    policy: Option<Arc<dyn PolicyFactory>>,
    gate: Option<StartGate>,
}

/// Adds flow `index`'s server and client, routed over the shared links.
fn add_flow(
    sim: &mut Simulator,
    scenario: &Scenario,
    index: usize,
    flow: &FlowSpec,
    (up_id, down_id): (netem::LinkId, netem::LinkId),
    measure_cpu: bool,
    extras: FlowExtras,
) -> Result<PlacedFlow, ScenarioError> {
    let FlowExtras { qlog, policy, gate } = extras;
    let seed = scenario.seed;
    let recorder = Recorder::new();
    // Both ends share the simulator's clock: a message scheme measures its
    // messages' one-way latency from the receiver's packet arrivals rather
    // than estimating it (recovery::rcp::policy::LatencySource).
    let scheme = match policy {
        Some(f) => recovery::Scheme::from_policy(f),
        None if recovery::rcp::parse(&flow.scheme).is_some() => {
            let log = recovery::rcp::policy::SharedArrivalLog::default();
            recorder.clone().with_packet_arrivals(log.clone());
            recovery::parse_scheme_measuring(&flow.scheme, &log)
                .map_err(|e| ScenarioError::Scheme(e.to_string()))?
        }
        None => recovery::parse_scheme(&flow.scheme)
            .map_err(|e| ScenarioError::Scheme(e.to_string()))?,
    };
    let (server_qlog, client_qlog) = match qlog {
        Some(q) => (Some(q.server), Some(q.client)),
        None => (None, None),
    };
    let (server_addr, client_addr) = flow_addrs(index);
    let route = |e: netem::RouteError| ScenarioError::Setup(e.to_string());
    sim.route(client_addr, server_addr, &[up_id])
        .map_err(route)?;
    sim.route(server_addr, client_addr, &[down_id])
        .map_err(route)?;
    let (server_tls, client_tls) = tls_configs(scenario.alpn).map_err(ScenarioError::Setup)?;
    let mut server_transport = TransportConfig {
        congestion: flow.cc,
        ecn: scenario.ecn,
        ..TransportConfig::default()
    };
    // The scheme may set the congestion controller (RCP's message schemes
    // do: `recovery::Scheme::congestion`); both ends then use its choice.
    scheme.configure(&mut server_transport);
    let cc = server_transport.congestion;
    let mut client_transport = TransportConfig {
        congestion: cc,
        ecn: scenario.ecn,
        ..TransportConfig::default()
    };
    if let Some(w) = scenario.recv_window {
        client_transport.streams = client_transport.streams.with_receive_window(w);
    }
    if let Some(n) = scenario.ack_threshold {
        client_transport.ack_eliciting_threshold = n;
    }
    if let Some(ms) = scenario.max_ack_delay {
        client_transport.max_ack_delay = Duration::from_secs_f64(ms / 1e3);
    }
    let content_seed = derive_seed(seed, &flow_label(index, "workload/content"));
    let sender = Rc::new(RefCell::new(SenderFacts::default()));
    let server_endpoint = Endpoint::new(EndpointConfig::server(
        derive_seed(seed, &flow_label(index, "endpoint/server")),
        ServerConfig {
            tls: server_tls,
            transport: Arc::new(server_transport),
            preferred_address: Default::default(),
        },
    ));
    let mut server_host = Host::new(server_endpoint, flow.workload.server_app(content_seed))
        .with_observer(Box::new(
            SenderObserver::new(recorder.clone(), sender.clone()).with_qlog(server_qlog),
        ));
    if let (Some(gate), Some(app)) = (gate, server_host.app_mut::<MessageSender>()) {
        app.set_gate(gate);
    }
    let mut server = QuicNode::new(server_addr, server_host);
    server.set_measure_cpu(measure_cpu);
    let client_config = ClientConfig {
        tls: client_tls,
        transport: Arc::new(client_transport),
        server_name: "localhost".into(),
    };
    let client_endpoint = Endpoint::new(EndpointConfig::client(derive_seed(
        seed,
        &flow_label(index, "endpoint/client"),
    )));
    let client_app = flow
        .workload
        .client_app(content_seed, scenario.alpn)
        .map_err(ScenarioError::Setup)?;
    let mut client_host = Host::new(client_endpoint, client_app).with_observer(Box::new(
        ReceiverObserver::new(recorder.clone()).with_qlog(client_qlog),
    ));
    client_host
        .connect(Instant::ZERO, &client_config, server_addr)
        .map_err(|e| ScenarioError::Setup(e.to_string()))?;
    let mut client = QuicNode::new(client_addr, client_host);
    client.set_measure_cpu(measure_cpu);
    let server_id = sim.add_node(server_addr, server);
    let client_id = sim.add_node(client_addr, client);
    Ok(PlacedFlow {
        server_id,
        client_id,
        recorder,
        sender,
        cc,
    })
}

/// What one flow produced.
struct FlowResult {
    metrics: RunMetrics,
    items: Vec<ItemRecord>,
    files: Vec<FileTimes>,
    playback: Option<apps::workload::Playback>,
    sender_cpu: Option<std::time::Duration>,
    receiver_cpu: Option<std::time::Duration>,
    arrival_segments: usize,
    sender_stats: transport::ConnectionStats,
    message_retransmissions: Vec<(Instant, u32)>,
}

/// The metrics of a flow that must have completed.
fn measure_flow(
    sim: &Simulator,
    scenario: &Scenario,
    flow: &FlowSpec,
    nodes: &PlacedFlow,
    outcome: RunOutcome,
    end: Instant,
) -> Result<FlowResult, ScenarioError> {
    let client = sim
        .node::<QuicNode>(nodes.client_id)
        .ok_or_else(|| ScenarioError::Setup("client node vanished".into()))?;
    let report = flow
        .workload
        .client_report(client.host())
        .unwrap_or_default();
    check_complete(&report, outcome, end, flow.workload.items())?;
    measure_flow_anyway(sim, scenario, flow, nodes, end)
}

/// The metrics of a flow, complete or not (an unfinished one ends at `end`).
fn measure_flow_anyway(
    sim: &Simulator,
    scenario: &Scenario,
    flow: &FlowSpec,
    nodes: &PlacedFlow,
    end: Instant,
) -> Result<FlowResult, ScenarioError> {
    let (seed, ecn) = (scenario.seed, scenario.ecn);
    let workload = flow.workload;
    let server = sim
        .node::<QuicNode>(nodes.server_id)
        .ok_or_else(|| ScenarioError::Setup("server node vanished".into()))?;
    let client = sim
        .node::<QuicNode>(nodes.client_id)
        .ok_or_else(|| ScenarioError::Setup("client node vanished".into()))?;
    let report = workload.client_report(client.host()).unwrap_or_default();
    let done_at = report.done_at.unwrap_or(end);
    let facts = nodes.sender.borrow().clone();
    // The measured connection's live counters if it is still there, else
    // those it had when it ended.
    let stats = facts
        .first
        .and_then(|h| server.host().endpoint().connection(h))
        .map(|c| c.stats())
        .or(facts.final_stats)
        .unwrap_or_default();
    let items = nodes.recorder.items();
    let facts = RunFacts {
        scheme: facts.scheme.unwrap_or_else(|| flow.scheme.clone()),
        seed,
        cc: nodes.cc.name().to_string(),
        files: workload.items(),
        // Workloads whose size only the run knows (a video's adaptation,
        // rpc's drawn sizes) count what arrived.
        bytes: workload.kind().delivered_bytes(report.bytes_received),
        started: Instant::ZERO,
        finished: done_at,
        per_file: report
            .items
            .iter()
            .map(|f| f.completed.saturating_duration_since(f.requested))
            .collect(),
        cpu: server.cpu_time(),
        rpc: workload.kind().items_are_calls(),
    };
    let utility = recovery::rcp::parse(&flow.scheme)
        .and_then(Result::ok)
        .map(|c| c.utility);
    // The message sender's schedule: when the run of messages ends, and
    // its last quarter.
    let schedule = workload.kind().message_params().and_then(|params| {
        server
            .host()
            .app::<apps::messages::MessageSender>()
            .and_then(apps::messages::MessageSender::started_at)
            .map(|start| (start, params))
    });
    let metrics = RunMetrics::compute(facts, &stats, &items)
        .with_playback(report.playback.as_ref(), &items)
        .with_ecn(ecn, &stats)
        .with_messages(
            report.messages.as_ref(),
            nodes.recorder.message_decisions(),
            &nodes.recorder.message_decision_log(),
            utility.as_ref(),
            schedule,
        );
    Ok(FlowResult {
        metrics,
        items,
        files: report.items,
        playback: report.playback,
        sender_cpu: server.cpu_time(),
        receiver_cpu: client.cpu_time(),
        arrival_segments: nodes.recorder.arrival_segments(),
        sender_stats: stats,
        message_retransmissions: nodes.recorder.message_retransmissions(),
    })
}

/// An error unless the client received every file intact.
fn check_complete(
    report: &ClientReport,
    outcome: RunOutcome,
    end: Instant,
    files: u64,
) -> Result<(), ScenarioError> {
    let incomplete = |reason: String| ScenarioError::Incomplete {
        reason,
        at_ms: ms(end.since_epoch()),
        files_done: report.items.len() as u64,
        files,
        bytes_received: report.bytes_received,
    };
    match &report.error {
        Some(e @ (ClientError::Mismatch { .. } | ClientError::WrongLength { .. })) => {
            return Err(ScenarioError::Data(e.to_string()))
        }
        Some(e) => return Err(incomplete(e.to_string())),
        None => {}
    }
    if report.done_at.is_some() {
        return Ok(());
    }
    Err(incomplete(match outcome {
        RunOutcome::DeadlineReached => "time limit reached".to_string(),
        RunOutcome::Idle => "nothing left to simulate".to_string(),
        RunOutcome::Stalled => "the simulation stalled (no progress at one instant)".to_string(),
        RunOutcome::Finished => "the nodes stopped early".to_string(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use apps::messages::{MessageParams, MessageReceiver};
    use apps::workload::Workload;
    use transport::congestion::CongestionAlgorithm;

    #[test]
    fn the_message_senders_of_a_run_start_at_one_instant_after_every_handshake() {
        let messages = Workload::Messages(MessageParams {
            messages: 300,
            size: 100,
            rate: 1000,
            drain_ms: 200,
        });
        let flow = FlowSpec {
            scheme: "udp".into(),
            cc: CongestionAlgorithm::None,
            workload: messages,
        };
        // 30% loss both ways: some handshakes need a retransmission, so
        // they complete at different instants.
        let scenario = Scenario {
            scheme: "udp".into(),
            cc: CongestionAlgorithm::None,
            seed: 3,
            workload: messages,
            link: netem::LinkSpec {
                bw: Some(10.0),
                rtt: 100.0,
                loss: Some(0.3),
                ..netem::LinkSpec::default()
            },
            flows: vec![flow; 5],
            ..Scenario::default()
        };
        let mut p = prepare(&scenario, None, false, None, None).expect("prepared");
        let limit = p.limit;
        p.sim.run_until(limit);
        let mut starts = Vec::new();
        let mut connected = Vec::new();
        for f in &p.placed {
            let host = |id| p.sim.node::<QuicNode>(id).map(QuicNode::host);
            let sender = host(f.server_id).and_then(|h| h.app::<MessageSender>());
            starts.push(sender.and_then(MessageSender::started_at));
            let receiver = host(f.client_id).and_then(|h| h.app::<MessageReceiver>());
            connected.push(receiver.and_then(|r| r.report().connected_at));
        }
        let connected: Vec<Instant> = connected
            .into_iter()
            .map(|c| c.expect("connected"))
            .collect();
        let (first, last) = (
            connected.iter().min().unwrap(),
            connected.iter().max().unwrap(),
        );
        assert!(
            *last > *first + Duration::from_millis(100),
            "the handshakes should end apart for this test to show anything: {connected:?}"
        );
        let start = starts[0].expect("started");
        assert!(starts.iter().all(|s| *s == Some(start)), "{starts:?}");
        // The server completes its handshake after the client: the start is
        // at or after every client's, on a 1 ms boundary.
        assert!(start >= *last, "{start:?} before {last:?}");
        assert_eq!(start.as_nanos() % 1_000_000, 0);
    }
}
