//! The papers' metrics, measured where the papers measure them (DESIGN.md
//! principle 4, "Metrics").
//!
//! - At the **sender** (the server, which sends the file data): the
//!   connection's counters ([`ConnectionStats`]: `data_packets`,
//!   `lost_packets`, `replicas`, and the `n`/`k` figures its
//!   [`RecoveryTally`](transport::RecoveryTally) computed over the
//!   retransmission engine's records, the same numbers `artq serve`
//!   reports), and the same [`RecoveryRecord`]s, one per lost item, of
//!   which the delivered ones become [`ItemRecord`]s (first send, first
//!   loss detection, send time of the delivering copy).
//! - At the **receiver** (the client): the first arrival time of every
//!   stream byte ([`ArrivalMap`]), which ends `t_wait`, and the completion
//!   time of every file (`fct_ms`).
//!
//! Both ends live in one simulation, so one [`Recorder`] is shared by a
//! subscriber on each connection: when the sender learns that an item was
//! recovered, the receiver has already seen its bytes (the acknowledgement
//! that told the sender left the receiver after they arrived), and the
//! item's `t_wait` is computed at once ([`ItemRecord`]).
//!
//! [`RunMetrics`] is the JSON object of `artq sim --json`; [`Summary`] the
//! `{p50,p95,p99,max,mean}` of a distribution.

pub mod arrivals;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use apps::messages::{MessageParams, MessageReport};
use apps::workload::Playback;
use recovery::rcp::model::Utility;
use recovery::rcp::policy::SharedArrivalLog;
use serde::{Deserialize, Serialize};
use transport::connection::SpaceId;
use transport::events::{RecoveryOutcome, RecoveryRecord, Subscriber};
use transport::policy::ItemId;
use transport::ConnectionStats;
use wire::time::{Duration, Instant};
use wire::StreamId;

pub use arrivals::ArrivalMap;

/// One recovered item (the stream data of one lost packet), as the per-packet
/// CSV shows it.
///
/// Exists to keep what DESIGN.md defines per lost packet: `n`, `k`,
/// `t_wait`, `recovery_latency`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ItemRecord {
    /// The transport's item id (order of first loss).
    pub item: u64,
    /// Stream of the item's first chunk.
    pub stream: u64,
    /// Offset of the item's first chunk.
    pub offset: u64,
    /// Payload bytes of all the item's chunks.
    pub len: u64,
    /// Round that delivered the data (0: the original got through after all).
    pub n: u32,
    /// Retransmissions sent for the data (every replica counts).
    pub k: u32,
    /// Retransmissions sent up to and including the copy that delivered
    /// the data (0 for `n = 0`); `needed >= 2` is AutoRec's "recovery
    /// requires two or more retransmissions".
    pub needed: u32,
    /// First transmission of the data.
    pub first_sent: Instant,
    /// First loss detection.
    pub first_lost: Instant,
    /// `t_wait` (ART journal eq. 1-2): from the first transmission until every
    /// byte of the item had first arrived at the receiver. `None` when the
    /// receiver's record could not answer (a bare FIN, or data of a retired
    /// stream).
    pub t_wait: Option<Duration>,
    /// `recovery_latency` (AutoRec §2.3): from the first loss detection to the
    /// sending of the copy whose acknowledgement delivered the data. `None`
    /// for `n = 0`: the original got through, no recovery packet exists.
    pub recovery_latency: Option<Duration>,
}

impl ItemRecord {
    /// Builds the record for `r`, reading first arrivals from `arrivals`;
    /// `None` for an item that was abandoned (no `n`, no `t_wait`).
    pub fn from_record(r: &RecoveryRecord, arrivals: &ArrivalMap) -> Option<ItemRecord> {
        let RecoveryOutcome::Delivered { round, needed, .. } = r.outcome else {
            return None;
        };
        let first = r
            .chunks
            .iter()
            .find(|c| c.len > 0)
            .or_else(|| r.chunks.first());
        let len = r.chunks.iter().map(|c| u64::from(c.len)).sum();
        let mut latest: Option<Instant> = None;
        let mut complete = len > 0;
        for c in r.chunks.iter().filter(|c| c.len > 0) {
            match arrivals.all_arrived_at(c.id.0, c.offset, u64::from(c.len)) {
                Some(at) => latest = Some(latest.map_or(at, |l| l.max(at))),
                None => complete = false,
            }
        }
        let t_wait = latest
            .filter(|_| complete)
            .map(|at| at.saturating_duration_since(r.first_sent));
        Some(ItemRecord {
            item: r.item.0,
            stream: first.map_or(0, |c| c.id.0),
            offset: first.map_or(0, |c| c.offset),
            len,
            n: round,
            k: r.retransmissions,
            needed,
            first_sent: r.first_sent,
            first_lost: r.first_lost,
            t_wait,
            recovery_latency: r.recovery_latency(),
        })
    }
}

/// What the two connections' subscribers share.
#[derive(Debug, Default)]
struct Shared {
    arrivals: ArrivalMap,
    items: Vec<ItemRecord>,
    decisions: MessageDecisions,
    /// When each timed-out datagram-only item that was retransmitted ended,
    /// with its retransmissions.
    retransmit_times: Vec<(Instant, u32)>,
    /// Every retransmit-or-drop decision, in the order they were taken.
    decision_log: Vec<DecisionEvent>,
    /// Items that carried stream data: their decisions are not RCP's.
    stream_items: std::collections::BTreeSet<u64>,
    /// Where the receiver's packet arrivals go for the sender's message
    /// policy to measure one-way latency (message schemes only).
    packet_arrivals: Option<SharedArrivalLog>,
}

/// The sender's decisions on timed-out DATAGRAM-only data, counted from
/// the retransmission engine's records: every replica sent is one decision
/// to retransmit, every item the policy gave up one decision to drop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MessageDecisions {
    /// Retransmissions of datagram-only items.
    pub retransmit: u64,
    /// Datagram-only items given up by the policy.
    pub drop: u64,
}

impl MessageDecisions {
    /// The share of timeouts answered with a retransmission (rcp.md Fig.
    /// 6); `None` when nothing timed out.
    pub fn retransmission_probability(&self) -> Option<f64> {
        let all = self.retransmit + self.drop;
        (all > 0).then(|| self.retransmit as f64 / all as f64)
    }
}

/// One retransmit-or-drop decision on a timed-out message, when the
/// policy took it (a replica scheduled, or the item given up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecisionEvent {
    /// When.
    pub at: Instant,
    /// The item decided on.
    pub item: u64,
    /// Retransmit (true) or drop.
    pub retransmit: bool,
}

/// The weight of the decisions' running average (rcp.md §IV-B's 0.01).
pub const DECISION_EWMA_WEIGHT: f64 = 0.01;

/// The decisions' running average at the end of `log` (1 retransmit, 0
/// drop; weight [`DECISION_EWMA_WEIGHT`], from 0, in decision order): the
/// authors' `retranProb` (`_RL_retransUpdate` in their `mcp_v2.py`).
/// `None` without decisions.
pub fn decisions_ewma(log: &[DecisionEvent]) -> Option<f64> {
    (!log.is_empty()).then(|| {
        log.iter().fold(0.0, |avg, d| {
            let x = if d.retransmit { 1.0 } else { 0.0 };
            (1.0 - DECISION_EWMA_WEIGHT) * avg + DECISION_EWMA_WEIGHT * x
        })
    })
}

/// The retransmission probability as the authors' Table IV prints it: the
/// share of retransmissions among the decisions taken in the even tenths
/// of the generation period `[start, end)` (the 2nd, 4th, ..., 10th).
///
/// Their `SimulationEnvironment2.py` overwrites the running average with
/// `retrans / (retrans + ignored)` every tenth of the run, the two counts
/// taken as `count(t) - previous`, where `previous` is the value the same
/// assignment left a tenth earlier: an alternating sum, which at the last
/// tenth is the decisions of the even tenths. That overwritten value is
/// what their `summary_all.py` reads for the table. `None` without any
/// decision in them.
pub fn even_tenths_retransmission(
    log: &[DecisionEvent],
    start: Instant,
    end: Instant,
) -> Option<f64> {
    let span = end.saturating_duration_since(start).as_nanos();
    let (mut retx, mut drops) = (0u64, 0u64);
    for d in log.iter().filter(|d| d.at >= start) {
        let since = d.at.saturating_duration_since(start);
        let tenth = since.as_nanos() * 10 / span.max(1);
        // Tenths 1, 3, ..., 9 counted from 0 are the 2nd, 4th, ..., 10th.
        if tenth < 10 && tenth % 2 == 1 {
            if d.retransmit {
                retx += 1;
            } else {
                drops += 1;
            }
        }
    }
    (retx + drops > 0).then(|| retx as f64 / (retx + drops) as f64)
}

/// The metric recorder of one run: hands out a subscriber for each end and
/// keeps what they saw.
///
/// Exists because the sender's records need the receiver's arrival times;
/// cloning it shares the same state.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    shared: Arc<Mutex<Shared>>,
}

impl Recorder {
    /// A recorder with nothing recorded yet.
    pub fn new() -> Self {
        Recorder::default()
    }

    /// Also log the receiver's 1-RTT packet arrivals into `log`, which the
    /// sender's message policy reads to measure one-way latency
    /// (`recovery::parse_scheme_measuring`).
    pub fn with_packet_arrivals(self, log: SharedArrivalLog) -> Self {
        self.lock().packet_arrivals = Some(log);
        self
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic while holding the lock can only come from a bug in this
        // module; the data is still usable, so poisoning is ignored.
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The subscriber for the sender's (server's) connection.
    pub fn sender_subscriber(&self) -> Box<dyn Subscriber> {
        Box::new(SenderSubscriber {
            recorder: self.clone(),
        })
    }

    /// The subscriber for the receiver's (client's) connection.
    pub fn receiver_subscriber(&self) -> Box<dyn Subscriber> {
        Box::new(ReceiverSubscriber {
            recorder: self.clone(),
        })
    }

    /// The sender has had every byte of `stream` acknowledged: its arrival
    /// times are no longer needed.
    pub fn stream_finished(&self, stream: StreamId) {
        self.lock().arrivals.retire(stream.0);
    }

    /// The recovered items so far, in the order the sender recovered them.
    pub fn items(&self) -> Vec<ItemRecord> {
        self.lock().items.clone()
    }

    /// The sender's decisions on timed-out datagrams so far.
    pub fn message_decisions(&self) -> MessageDecisions {
        self.lock().decisions
    }

    /// When each retransmitted datagram-only item's recovery ended (its
    /// delivery acknowledged, or given up), with its retransmissions, in
    /// that order: RCP's retransmission attempts over time (rcp.md Fig. 13).
    pub fn message_retransmissions(&self) -> Vec<(Instant, u32)> {
        self.lock().retransmit_times.clone()
    }

    /// The retransmit-or-drop decisions on DATAGRAM-only items, in the
    /// order they were taken.
    pub fn message_decision_log(&self) -> Vec<DecisionEvent> {
        let shared = self.lock();
        shared
            .decision_log
            .iter()
            .filter(|d| !shared.stream_items.contains(&d.item))
            .copied()
            .collect()
    }

    /// Arrival segments held now (for memory checks).
    pub fn arrival_segments(&self) -> usize {
        self.lock().arrivals.segments()
    }
}

/// Sender side: turns [`RecoveryRecord`]s into [`ItemRecord`]s.
struct SenderSubscriber {
    recorder: Recorder,
}

impl Subscriber for SenderSubscriber {
    fn replica_scheduled(
        &mut self,
        now: Instant,
        item: ItemId,
        _round: u32,
        _index: u16,
        _at: Instant,
    ) {
        self.recorder.lock().decision_log.push(DecisionEvent {
            at: now,
            item: item.0,
            retransmit: true,
        });
    }

    fn recovery_ended(&mut self, now: Instant, record: &RecoveryRecord) {
        let mut shared = self.recorder.lock();
        if record.chunks.is_empty() {
            shared.decisions.retransmit += u64::from(record.retransmissions);
            if record.retransmissions > 0 {
                shared.retransmit_times.push((now, record.retransmissions));
            }
            if let RecoveryOutcome::Abandoned {
                reason: transport::events::AbandonReason::Dropped,
                ..
            } = record.outcome
            {
                shared.decisions.drop += 1;
                shared.decision_log.push(DecisionEvent {
                    at: now,
                    item: record.item.0,
                    retransmit: false,
                });
            }
        } else {
            shared.stream_items.insert(record.item.0);
        }
        if let Some(item) = ItemRecord::from_record(record, &shared.arrivals) {
            shared.items.push(item);
        }
    }
}

/// Receiver side: first arrival of every stream byte, and of every 1-RTT
/// packet when the sender measures one-way latency from them.
struct ReceiverSubscriber {
    recorder: Recorder,
}

impl Subscriber for ReceiverSubscriber {
    fn stream_data_received(&mut self, now: Instant, id: StreamId, offset: u64, len: u64) {
        self.recorder.lock().arrivals.record(id.0, offset, len, now);
    }

    fn packet_received(&mut self, now: Instant, space: SpaceId, pn: u64, _size: usize) {
        if space != SpaceId::Data {
            return;
        }
        let log = self.recorder.lock().packet_arrivals.clone();
        if let Some(log) = log {
            log.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .record(pn, now);
        }
    }
}

/// Delivery and mean latency of the messages arriving in a window.
struct Window {
    /// Arrivals in the window over the messages it is measured against.
    delivery: f64,
    /// Their mean latency; `None` when none arrived.
    latency: Option<Duration>,
}

/// The first arrivals of `r` at instants in `[from, to]`, against
/// `messages` messages: rcp.md's windows count by arrival time, as the
/// authors' receiver counts the packets it received in the window's
/// slots, whenever they were generated.
fn window(r: &MessageReport, from: Instant, to: Instant, messages: u64) -> Window {
    let (mut n, mut sum) = (0u64, 0u128);
    for a in r.arrivals.iter().filter(|a| a.at >= from && a.at <= to) {
        n += 1;
        sum += a.latency.as_nanos();
    }
    Window {
        delivery: if messages == 0 {
            0.0
        } else {
            n as f64 / messages as f64
        },
        latency: (n > 0)
            .then(|| Duration::from_nanos(u64::try_from(sum / u128::from(n)).unwrap_or(u64::MAX))),
    }
}

/// `{p50, p95, p99, max, mean}` of a distribution of durations, in ms.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Median (nearest rank).
    pub p50: f64,
    /// 95th percentile (nearest rank).
    pub p95: f64,
    /// 99th percentile (nearest rank).
    pub p99: f64,
    /// Largest value.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
}

impl Summary {
    /// The summary of `values` (reordered in place); `None` when empty.
    /// Percentiles use the nearest-rank definition, so every reported value
    /// is one of the samples; the mean is computed in integer nanoseconds.
    pub fn of(values: &mut [Duration]) -> Option<Summary> {
        values.sort_unstable();
        let n = values.len();
        let last = *values.last()?;
        let rank = |p: usize| -> f64 {
            // Nearest rank: the ceil(p/100 * n)-th smallest, 1-based.
            let r = (p * n).div_ceil(100).clamp(1, n);
            values.get(r - 1).map_or(0.0, |d| ms(*d))
        };
        let total: u128 = values.iter().map(Duration::as_nanos).sum();
        let mean_ns = total / n as u128;
        Some(Summary {
            p50: rank(50),
            p95: rank(95),
            p99: rank(99),
            max: ms(last),
            mean: mean_ns as f64 / 1e6,
        })
    }
}

/// A duration in milliseconds.
pub fn ms(d: Duration) -> f64 {
    d.as_nanos() as f64 / 1e6
}

/// The JSON object of one run (`artq sim --json`): DESIGN.md's metric names,
/// in a fixed order.
///
/// Exists as one typed struct so the CLI, the experiments and the tests read
/// and write the same fields.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunMetrics {
    /// The recovery scheme, as the registry names it.
    pub scheme: String,
    /// The scenario's master seed.
    pub seed: u64,
    /// Congestion controller (`cubic`, `newreno`, `bbr`).
    pub cc: String,
    /// Number of files in the workload.
    pub files: u64,
    /// Whole workload: from the client's connection start to the last byte
    /// of the last file at the client.
    pub fct_ms: f64,
    /// Per-file completion times (request sent to last byte received), when
    /// the workload has more than one file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fct_ms_per_file: Option<Summary>,
    /// Application bytes delivered over `fct_ms`, in Mbit/s.
    pub goodput_mbps: f64,
    /// Application bytes delivered (files x size).
    pub bytes: u64,
    /// Packets carrying first transmissions of stream data (sender).
    pub data_packets: u64,
    /// Packets declared lost, replicas included (sender).
    pub lost_packets: u64,
    /// Packets sent to recover lost data, every replica (sender).
    pub replicas: u64,
    /// Replicas beyond one per round (sender).
    pub extra_replicas: u64,
    /// Largest round that delivered lost data.
    pub n_max: u32,
    /// Mean over the files of each file's own `n_max` (a file with no lost
    /// data counts 0), when the workload has more than one file: the
    /// "average value" of N_max over 1000 files in ART journal Figs. 20-21.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub n_max_file_mean: Option<f64>,
    /// Most retransmissions of one item.
    pub k_max: u32,
    /// `n_hist[n]`: recovered items delivered in round `n` (0: spurious loss).
    pub n_hist: Vec<u64>,
    /// `t_wait` of the recovered items; `null` when nothing was lost.
    pub t_wait_ms: Option<Summary>,
    /// `recovery_latency` of the items recovered by a retransmission;
    /// `null` when there were none.
    pub recovery_latency_ms: Option<Summary>,
    /// AutoRec's recovery deterioration rate (§5): the share of recovered
    /// items whose recovery latency was at least T_unit
    /// ([`transport::events::RecoveryRecord::deteriorated`]).
    pub recovery_deterioration_rate: f64,
    /// Share of recovered items that needed two rounds or more (counts
    /// rounds, not time).
    pub share_n_ge_2: f64,
    /// Live: `recovery_latency` of the items whose recovery needed two or
    /// more retransmissions (`needed >= 2`), what AutoRec reports (§5);
    /// absent for other workloads and when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery_latency_multi_ms: Option<Summary>,
    /// `replicas / data_packets`.
    pub retransmission_ratio: f64,
    /// Packets declared lost and acknowledged afterwards.
    pub spurious_retransmissions: u64,
    /// Wall-clock time spent in the sender's (server node's) code, ms. Not
    /// deterministic: present only when asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ms: Option<f64>,
    /// Video workloads: mean bitrate of what was played, kbit/s (live: the
    /// payload's bits per second of playback; DASH: the mean nominal
    /// bitrate of the played segments' representations).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avg_bitrate_kbps: Option<f64>,
    /// Video workloads: from the player's first request to the start of
    /// playback, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_ms: Option<f64>,
    /// Live: freezes per 100 s of playback.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_count: Option<f64>,
    /// Live: frozen time per 100 s of playback, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub freeze_ms: Option<f64>,
    /// DASH: rebuffering events over the whole video.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuffer_count: Option<u64>,
    /// DASH: total rebuffering time, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rebuffer_ms: Option<f64>,
    /// DASH: changes of representation between consecutive segments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate_switches: Option<u64>,
    /// rpc workload only: the distribution of per-call completion times
    /// (from when a call was due to its last response byte), ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_fct_ms: Option<Summary>,
    /// messages workload: distinct messages delivered over messages
    /// generated (rcp.md's 1 - ε).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_ratio: Option<f64>,
    /// messages workload: mean latency of the delivered messages, from
    /// generation to first arrival, ms (rcp.md's l).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_latency_ms: Option<f64>,
    /// messages workload: the application's utility U(ε, l) (rcp.md eq.
    /// 1) with the scheme's α, β and normalisation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utility: Option<f64>,
    /// messages workload: the share of timed-out messages the sender
    /// retransmitted (rcp.md Fig. 6); absent when none timed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmission_probability: Option<f64>,
    /// messages workload: the running average of those decisions at the
    /// end of the run (weight 0.01, the authors' `retranProb`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmission_probability_ewma: Option<f64>,
    /// messages workload: the share of retransmissions among the decisions
    /// of the even tenths of the generation period: what Table IV's
    /// "Retrans Prob" column holds ([`even_tenths_retransmission`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmission_probability_tenths: Option<f64>,
    /// messages workload: ε over the last 25% of the generation period
    /// (rcp.md Table IV's "Final"): one minus the messages arriving in it
    /// over the messages generated in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss_final: Option<f64>,
    /// messages workload: mean latency of the messages arriving in the
    /// last 25% of the generation period, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mean_latency_final_ms: Option<f64>,
    /// messages workload: the utility of `loss_final` and
    /// `mean_latency_final_ms`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub utility_final: Option<f64>,
    /// ECN runs only: packets the receiver reported CE-marked to the
    /// sender (RFC 9000 §13.4), each a congestion signal without a loss.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ecn_ce_reported: Option<u64>,
}

/// The inputs of [`RunMetrics::compute`] that are not counters.
#[derive(Clone, Debug)]
pub struct RunFacts {
    /// Scheme name.
    pub scheme: String,
    /// Master seed.
    pub seed: u64,
    /// Congestion controller name.
    pub cc: String,
    /// Files in the workload.
    pub files: u64,
    /// Application bytes delivered.
    pub bytes: u64,
    /// Connection start at the client.
    pub started: Instant,
    /// Last byte of the last file at the client.
    pub finished: Instant,
    /// Per-file completion times.
    pub per_file: Vec<Duration>,
    /// Sender CPU time, when measured.
    pub cpu: Option<std::time::Duration>,
    /// The items are calls of the rpc workload: `per_file` is reported as
    /// `rpc_fct_ms` instead of `fct_ms_per_file`.
    pub rpc: bool,
}

impl RunMetrics {
    /// Aggregates one run: `facts` from the client, `stats` of the sender's
    /// connection, the recovered `items`.
    pub fn compute(facts: RunFacts, stats: &ConnectionStats, items: &[ItemRecord]) -> RunMetrics {
        let fct = facts.finished.saturating_duration_since(facts.started);
        let fct_s = fct.as_secs_f64();
        let goodput_mbps = if fct_s > 0.0 {
            facts.bytes as f64 * 8.0 / fct_s / 1e6
        } else {
            0.0
        };
        let mut per_file = facts.per_file;
        let per_item = Summary::of(&mut per_file);
        let (fct_ms_per_file, rpc_fct_ms) = match (facts.rpc, facts.files > 1) {
            (true, _) => (None, per_item),
            (false, true) => (per_item, None),
            (false, false) => (None, None),
        };
        let mut t_wait: Vec<Duration> = items.iter().filter_map(|i| i.t_wait).collect();
        let mut latency: Vec<Duration> = items.iter().filter_map(|i| i.recovery_latency).collect();
        let tally = &stats.recovery;
        RunMetrics {
            scheme: facts.scheme,
            seed: facts.seed,
            cc: facts.cc,
            files: facts.files,
            fct_ms: ms(fct),
            fct_ms_per_file,
            goodput_mbps,
            bytes: facts.bytes,
            data_packets: stats.data_packets,
            lost_packets: stats.lost_packets,
            replicas: stats.replicas,
            extra_replicas: stats.extra_replicas,
            n_max: tally.n_max,
            n_max_file_mean: (facts.files > 1).then(|| n_max_file_mean(items, facts.files)),
            k_max: tally.k_max,
            n_hist: tally.n_hist.clone(),
            t_wait_ms: Summary::of(&mut t_wait),
            recovery_latency_ms: Summary::of(&mut latency),
            recovery_deterioration_rate: tally.deterioration_rate(),
            share_n_ge_2: tally.share_n_ge_2(),
            recovery_latency_multi_ms: None,
            retransmission_ratio: ratio(stats.replicas, stats.data_packets),
            spurious_retransmissions: stats.spurious_retransmissions,
            cpu_ms: facts.cpu.map(|d| d.as_secs_f64() * 1e3),
            avg_bitrate_kbps: None,
            startup_ms: None,
            freeze_count: None,
            freeze_ms: None,
            rebuffer_count: None,
            rebuffer_ms: None,
            bitrate_switches: None,
            rpc_fct_ms,
            delivery_ratio: None,
            mean_latency_ms: None,
            utility: None,
            retransmission_probability: None,
            retransmission_probability_ewma: None,
            retransmission_probability_tenths: None,
            loss_final: None,
            mean_latency_final_ms: None,
            utility_final: None,
            ecn_ce_reported: None,
        }
    }

    /// Adds the ECN figures of an ECN run (other runs' JSON is unchanged).
    pub fn with_ecn(mut self, ecn: bool, stats: &ConnectionStats) -> RunMetrics {
        if ecn {
            self.ecn_ce_reported = Some(stats.ecn_ce_reported);
        }
        self
    }

    /// Adds the messages workload's metrics: the receiver's `report`, the
    /// sender's `decisions`, and the utility if the scheme defines one.
    /// With `schedule` (the sender's start and the workload's parameters)
    /// the run ends at the sender's close, `drain` after the last period:
    /// a message arriving later is not delivered (with no drain, the
    /// authors' end of simulation), and the last 25% of the generation
    /// period gives the `*_final` figures. Without it (or when the report
    /// could not list every arrival) every arrival counts and there are no
    /// final figures.
    pub fn with_messages(
        mut self,
        report: Option<&MessageReport>,
        decisions: MessageDecisions,
        log: &[DecisionEvent],
        utility: Option<&Utility>,
        schedule: Option<(Instant, MessageParams)>,
    ) -> RunMetrics {
        let Some(r) = report else {
            return self;
        };
        let schedule = schedule.filter(|_| r.arrivals_complete);
        let (delivered, latency) = match schedule {
            Some((start, p)) => {
                let end = p.closes_at(start);
                let w = window(r, start, end, p.messages);
                (w.delivery, w.latency)
            }
            None => (r.delivery_ratio(), r.mean_latency()),
        };
        self.delivery_ratio = Some(delivered);
        self.mean_latency_ms = latency.map(ms);
        self.utility = utility.map(|u| u.value(1.0 - delivered, latency.unwrap_or(Duration::ZERO)));
        self.retransmission_probability = decisions.retransmission_probability();
        self.retransmission_probability_ewma = decisions_ewma(log);
        if let Some((start, p)) = schedule {
            self.retransmission_probability_tenths =
                even_tenths_retransmission(log, start, p.generated_at(start, p.messages));
            let first = p.messages - p.messages / 4;
            let from = p.generated_at(start, first);
            let to = p.generated_at(start, p.messages);
            let w = window(r, from, to, p.messages - first);
            self.loss_final = Some(1.0 - w.delivery);
            self.mean_latency_final_ms = w.latency.map(ms);
            self.utility_final = w
                .latency
                .and_then(|l| utility.map(|u| u.value(1.0 - w.delivery, l)));
        }
        self
    }

    /// Adds a video player's statistics (only video workloads have them:
    /// the other workloads' JSON is unchanged); a live stream also gets
    /// `recovery_latency_multi_ms` over `items`.
    pub fn with_playback(
        mut self,
        playback: Option<&Playback>,
        items: &[ItemRecord],
    ) -> RunMetrics {
        match playback {
            None => {}
            Some(Playback::Live(r)) => {
                let mut multi: Vec<Duration> = items
                    .iter()
                    .filter(|i| i.needed >= 2)
                    .filter_map(|i| i.recovery_latency)
                    .collect();
                self.recovery_latency_multi_ms = Summary::of(&mut multi);
                self.avg_bitrate_kbps = Some(r.avg_bitrate_kbps);
                self.startup_ms = r.playout.startup.map(ms);
                self.freeze_count = Some(r.freeze_count);
                self.freeze_ms = Some(r.freeze_ms);
            }
            Some(Playback::Dash(r)) => {
                self.avg_bitrate_kbps = Some(r.avg_bitrate_kbps);
                self.startup_ms = r.playout.startup.map(ms);
                self.rebuffer_count = Some(r.playout.stalls);
                self.rebuffer_ms = Some(ms(r.playout.stalled));
                self.bitrate_switches = Some(r.switches);
            }
        }
        self
    }
}

/// Mean over `files` files of each file's largest delivering round. Every
/// file has its own stream, so items are grouped by stream; files without a
/// lost item count 0.
fn n_max_file_mean(items: &[ItemRecord], files: u64) -> f64 {
    let mut per_stream: BTreeMap<u64, u32> = BTreeMap::new();
    for i in items {
        let m = per_stream.entry(i.stream).or_insert(0);
        *m = (*m).max(i.n);
    }
    let sum: u64 = per_stream.values().map(|&n| u64::from(n)).sum();
    sum as f64 / files.max(1) as f64
}

/// `a / b`, 0 when `b` is 0.
fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use transport::streams::StreamChunk;

    fn d(ms: u64) -> Duration {
        Duration::from_millis(ms)
    }

    #[test]
    fn summary_uses_nearest_rank() {
        let mut v: Vec<Duration> = (1..=100).map(d).collect();
        let s = Summary::of(&mut v).expect("non-empty");
        assert_eq!((s.p50, s.p95, s.p99, s.max), (50.0, 95.0, 99.0, 100.0));
        assert!((s.mean - 50.5).abs() < 1e-9);
        let mut one = vec![d(7)];
        let s = Summary::of(&mut one).expect("non-empty");
        assert_eq!((s.p50, s.p99, s.max, s.mean), (7.0, 7.0, 7.0, 7.0));
        assert!(Summary::of(&mut []).is_none());
    }

    fn record(round: u32, chunks: Vec<StreamChunk>) -> RecoveryRecord {
        RecoveryRecord {
            item: ItemId(3),
            chunks,
            first_sent: Instant::from_millis(100),
            first_lost: Instant::from_millis(150),
            t_unit: None,
            retransmissions: round,
            outcome: RecoveryOutcome::Delivered {
                round,
                recovery_sent: Instant::from_millis(170),
                needed: 1,
                acked_at: Instant::from_millis(220),
            },
        }
    }

    fn chunk(offset: u64, len: u32) -> StreamChunk {
        StreamChunk {
            id: StreamId(0),
            offset,
            len,
            fin: false,
        }
    }

    #[test]
    fn item_takes_t_wait_from_the_receiver_and_latency_from_the_sender() {
        let mut arrivals = ArrivalMap::new();
        arrivals.record(0, 0, 1000, Instant::from_millis(115));
        arrivals.record(0, 1000, 1000, Instant::from_millis(185));
        let r = record(1, vec![chunk(500, 1000)]);
        let item = ItemRecord::from_record(&r, &arrivals).expect("delivered");
        assert_eq!(item.t_wait, Some(d(85)), "last byte first arrived at 185");
        assert_eq!(item.recovery_latency, Some(d(20)));
        assert_eq!(
            (item.stream, item.offset, item.len, item.n, item.k),
            (0, 500, 1000, 1, 1)
        );
        // n = 0: the original got through, no recovery packet.
        let item =
            ItemRecord::from_record(&record(0, vec![chunk(0, 10)]), &arrivals).expect("delivered");
        assert_eq!(item.recovery_latency, None);
        assert_eq!(item.t_wait, Some(d(15)));
        // Bytes the receiver never saw, or a bare FIN: no t_wait.
        let item = ItemRecord::from_record(&record(1, vec![chunk(1500, 1000)]), &arrivals)
            .expect("delivered");
        assert_eq!(item.t_wait, None);
        let item = ItemRecord::from_record(&record(1, vec![chunk(2000, 0)]), &arrivals)
            .expect("delivered");
        assert_eq!((item.t_wait, item.len), (None, 0));
    }

    #[test]
    fn abandoned_items_have_no_item_record() {
        let mut r = record(1, vec![chunk(0, 10)]);
        r.outcome = RecoveryOutcome::Abandoned {
            reason: transport::events::AbandonReason::NothingLeft,
            at: Instant::from_millis(300),
        };
        assert_eq!(ItemRecord::from_record(&r, &ArrivalMap::new()), None);
    }

    #[test]
    fn per_file_n_max_takes_each_streams_worst_item() {
        let item = |stream: u64, n: u32| {
            let mut i = ItemRecord::from_record(&record(n, vec![chunk(0, 10)]), &ArrivalMap::new())
                .expect("delivered");
            i.stream = stream;
            i
        };
        // Stream 0: rounds 1 and 3; stream 4: round 2; stream 8: a spurious
        // loss (n = 0); a fourth file lost nothing.
        let items = [item(0, 1), item(0, 3), item(4, 2), item(8, 0)];
        assert_eq!(n_max_file_mean(&items, 4), 5.0 / 4.0);
        assert_eq!(n_max_file_mean(&[], 0), 0.0);
    }

    #[test]
    fn run_metrics_follow_design_definitions() {
        let mut stats = ConnectionStats::default();
        stats.data_packets = 200;
        stats.lost_packets = 6;
        stats.replicas = 5;
        stats.recovery.n_hist = vec![1, 3, 1];
        stats.recovery.recovered_items = 5;
        stats.recovery.deteriorated_items = 2;
        stats.recovery.n_max = 2;
        stats.recovery.k_max = 2;
        let items =
            vec![
                ItemRecord::from_record(&record(1, vec![chunk(0, 10)]), &ArrivalMap::new())
                    .expect("delivered"),
            ];
        let facts = RunFacts {
            scheme: "quic".into(),
            seed: 1,
            cc: "cubic".into(),
            files: 2,
            bytes: 1_000_000,
            started: Instant::ZERO,
            finished: Instant::from_millis(800),
            per_file: vec![d(300), d(500)],
            cpu: None,
            rpc: false,
        };
        let m = RunMetrics::compute(facts, &stats, &items);
        assert_eq!(m.fct_ms, 800.0);
        assert!((m.goodput_mbps - 10.0).abs() < 1e-9);
        assert!((m.recovery_deterioration_rate - 0.4).abs() < 1e-12);
        assert!((m.share_n_ge_2 - 0.2).abs() < 1e-12);
        assert!((m.retransmission_ratio - 0.025).abs() < 1e-12);
        assert_eq!(m.fct_ms_per_file.map(|s| s.max), Some(500.0));
        // One file's worst item took round 1, the other file lost nothing.
        assert_eq!(m.n_max_file_mean, Some(0.5));
        assert_eq!(m.t_wait_ms, None, "the receiver saw nothing");
        assert_eq!(m.recovery_latency_ms.map(|s| s.p50), Some(20.0));
        let json = serde_json::to_string(&m).expect("serialises");
        assert!(!json.contains("cpu_ms"), "cpu_ms only when measured");
        assert!(
            json.starts_with("{\"scheme\":\"quic\",\"seed\":1,"),
            "{json}"
        );
        let back: RunMetrics = serde_json::from_str(&json).expect("parses back");
        assert_eq!(back, m);
    }

    /// A run of 400 one-ms messages from 10 ms, drain 5 ms (the sender
    /// closes at 414 ms): messages 0-299 arrive 100 ms after generation,
    /// the others are lost, except message 349, which arrives 300 ms late,
    /// after the close.
    fn message_run() -> (MessageReport, Instant, MessageParams) {
        let p = MessageParams {
            messages: 400,
            size: 100,
            rate: 1000,
            drain_ms: 5,
        };
        let start = Instant::ZERO + d(10);
        let mut arrivals: Vec<apps::messages::Arrival> = (0..300)
            .map(|i| apps::messages::Arrival {
                at: p.generated_at(start, i) + d(100),
                latency: d(100),
            })
            .collect();
        // Message 349, 300 ms late: after the close.
        arrivals.push(apps::messages::Arrival {
            at: p.generated_at(start, 349) + d(300),
            latency: d(300),
        });
        arrivals.sort_by_key(|a| a.at);
        let report = MessageReport {
            generated: 400,
            delivered: arrivals.len() as u64,
            latency_sum: arrivals.iter().map(|a| a.latency).sum(),
            arrivals,
            arrivals_complete: true,
            ..MessageReport::default()
        };
        (report, start, p)
    }

    fn metrics_of(
        report: &MessageReport,
        schedule: Option<(Instant, MessageParams)>,
    ) -> RunMetrics {
        use recovery::rcp::model::Normalisation;
        let utility = Utility {
            beta: 0.5,
            alpha: 2.0,
            normalisation: Normalisation::Simple { tau_r_max: d(1000) },
        };
        let facts = RunFacts {
            scheme: "arq".into(),
            seed: 1,
            cc: "none".into(),
            files: 1,
            bytes: 0,
            started: Instant::ZERO,
            finished: Instant::ZERO + d(500),
            per_file: Vec::new(),
            cpu: None,
            rpc: false,
        };
        RunMetrics::compute(facts, &ConnectionStats::default(), &[]).with_messages(
            Some(report),
            MessageDecisions::default(),
            &[],
            Some(&utility),
            schedule,
        )
    }

    #[test]
    fn the_final_window_counts_arrivals_in_the_last_quarter_of_the_slots() {
        let (report, start, p) = message_run();
        let m = metrics_of(&report, Some((start, p)));
        // The run ends at the close (414 ms): messages 0-299 arrived by
        // then (at 110-409 ms); 349 did not.
        assert!((m.delivery_ratio.unwrap_or(0.0) - 300.0 / 400.0).abs() < 1e-12);
        // Last quarter: messages 300-399's slots, [310, 410] ms. Arrivals
        // in it: messages 200-299 (100 of the 100 generated there), all
        // 100 ms late: epsilon 0, l 100 ms.
        assert_eq!(m.loss_final, Some(0.0));
        assert_eq!(m.mean_latency_final_ms, Some(100.0));
        // U(0, 100 ms) with the simple normalisation, beta 0.5, alpha 2:
        // -0.5 x 0 - 0.5 x 0.1^2.
        let u = m.utility_final.expect("final utility");
        assert!((u + 0.005).abs() < 1e-12, "{u}");
        // The whole run's utility uses the whole run's figures.
        let whole = m.utility.expect("utility");
        assert!(
            (whole - (-0.5 * 0.25f64.powi(2) - 0.5 * 0.01)).abs() < 1e-12,
            "{whole}"
        );
        // Without the schedule: every arrival counts, no final figures.
        let m = metrics_of(&report, None);
        assert!((m.delivery_ratio.unwrap_or(0.0) - 301.0 / 400.0).abs() < 1e-12);
        assert_eq!((m.loss_final, m.utility_final), (None, None));
    }

    #[test]
    fn the_decisions_running_average_and_the_even_tenths() {
        let at = |ms| Instant::ZERO + d(ms);
        let decide = |ms, retransmit| DecisionEvent {
            at: at(ms),
            item: ms,
            retransmit,
        };
        assert_eq!(decisions_ewma(&[]), None);
        let one = decisions_ewma(&[decide(1, true)]).expect("one");
        assert!((one - 0.01).abs() < 1e-15, "it starts from 0");
        // Two retransmissions in three decisions; the last ones weigh most.
        let mut log: Vec<DecisionEvent> = (0..3000).map(|i| decide(i, i % 3 != 0)).collect();
        let e = decisions_ewma(&log).expect("set");
        assert!((e - 2.0 / 3.0).abs() < 0.01, "{e}");
        log.extend((3000..3100).map(|i| decide(i, true)));
        let e = decisions_ewma(&log).expect("set");
        assert!(e > 0.85, "the last hundred decisions dominate: {e}");
        // Even tenths of [0, 100 ms): decisions in [10, 20), [30, 40), ...
        // count; the others do not.
        let log = [
            decide(5, true),
            decide(15, true),
            decide(16, false),
            decide(35, false),
            decide(55, true),
            decide(56, true),
            decide(95, false),
            decide(105, true),
        ];
        let p = even_tenths_retransmission(&log, at(0), at(100)).expect("some");
        assert!((p - 3.0 / 6.0).abs() < 1e-12, "{p}");
        assert_eq!(even_tenths_retransmission(&log[..1], at(0), at(100)), None);
    }
}
