//! AutoRec (autorec.md §3-§4): ARQ (one retransmission per loss, as plain
//! QUIC) plus *reinjection* of lost data that was retransmitted and is still
//! unacknowledged: during off-mode (the sender is application-limited), and
//! opportunistically in on-mode once an entry has been silent for
//! T_thres = T_unit / (A_thres + 1) (eq. 6). The Redundancy Adapter
//! ([`adapter`]) picks A_thres, the replicas per lost item, once per
//! decision interval.
//!
//! The reinjection queue ([`ReinjectionQueue`]) holds one entry per item
//! with the paper's status table (Data_ID = the transport's item id, A_i,
//! T_stmp); it is ordered by T_stmp: an entry goes to the tail whenever its
//! data is resent. An entry leaves when its item leaves recovery
//! (acknowledged, or given up by the transport) and stops being eligible
//! once A_i reaches A_thres; it is kept until then only to remember A_i
//! (so a later rise of A_thres does not restart it at 0).
//!
//! Choices where the paper is silent (docs/recovery.md repeats them):
//! - T_unit is measured, not modelled: the smoothed time from an item's
//!   first transmission to its loss detection (which is when ARQ
//!   retransmits it: "the time elapsed for a data packet from being sent to
//!   being retransmitted", §2.3), with 9/8·SRTT + 25 ms before any sample.
//! - The decision interval is [`DECISION_INTERVAL`] (1 s), and at least 10
//!   SRTT: at the default setting (~700 packets/s, 5% loss) one second
//!   holds ~35 recoveries, enough for a mean recovery latency whose noise
//!   is near R_nor; shorter intervals made A_thres a random walk. It is
//!   closed by the first loss after its end (an interval without losses
//!   has nothing to decide).
//! - The interval's recovery latency (eq. 2) is the mean over all items the
//!   interval saw recovered (a first retransmission that got through counts
//!   with its short latency), so the utility rewards turning second rounds
//!   into first-round recoveries; without any recovery the interval makes
//!   no decision.
//! - The monitored loss rate (the 10% cut-off, eq. 4's r) is packets
//!   declared lost over ack-eliciting packets sent in the interval.
//! - A_thres starts at 1 (eq. 1's x ≥ 1).
//! - Reinjections are regular packets: congestion control and pacing apply
//!   (the transport only offers the chance when a packet may go). They sit
//!   beside ARQ, not in its rounds (the transport's policy seam,
//!   "Reinjection and off-mode"): ARQ retransmits as soon as its own
//!   retransmission is declared lost, whatever reinjections are in flight,
//!   as an add-on over LSQUIC would; a reinjection that gets through first
//!   delivers the data; every reinjection's loss reaches congestion control
//!   (LSQUIC reports every lost packet to it) and starts no ARQ
//!   retransmission (ARQ sends one per loss of its own copy; the queue
//!   alone decides on further reinjections).
//! - The E_waiting gate is absolute (see [`adapter`]): a gated interval
//!   never reinjects, and its 0 is no "unchanged" level for the exploration.

pub mod adapter;
mod steered;

use std::collections::VecDeque;

use rand::RngCore;
use transport::events::RecoveryOutcome;
use transport::events::RecoveryRecord;
use transport::policy::{
    DataKind, Decision, ItemId, LostData, PacketFate, PacketTag, PathView, PolicyContext,
    PolicyState, RecoveryPolicy, SendingHooks, SentView,
};
use wire::time::{Duration, Instant};

use crate::error::SchemeError;
pub use adapter::{Adapter, AdapterConfig, Interval, A_MAX};
pub use steered::AutorecReward;

use crate::desk::SharedDesk;

/// The decision interval's floor (see the module doc).
pub const DECISION_INTERVAL: Duration = Duration::from_secs(1);
/// Decision interval in SRTTs, when that is longer than [`DECISION_INTERVAL`].
pub const DECISION_INTERVAL_SRTTS: u32 = 10;
/// Bound on the reinjection queue (entries beyond it push the oldest out).
pub const MAX_ENTRIES: usize = 4096;

/// Which of AutoRec's functions run (Fig. 12's variants).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    /// Everything (`autorec`).
    Full,
    /// Off-mode reinjection only, no opportunistic reinjection
    /// (`autorec-offmode`, Fig. 12's AutoRec (1)).
    OffModeOnly,
    /// Off-mode and opportunistic reinjection with A_thres fixed, no
    /// adapter (`autorec-fixed:A`, Fig. 12's AutoRec (2) with A = 2).
    Fixed(u32),
    /// The adapter without the E_waiting gate (`autorec-nogate`, Fig. 12's
    /// AutoRec (3)).
    NoGate,
}

/// AutoRec's configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AutorecConfig {
    /// The variant.
    pub variant: Variant,
    /// The adapter's parameters (Θ_thres, α, R_nor, ...).
    pub adapter: AdapterConfig,
    /// A_thres before the first decision.
    pub start_level: u32,
}

impl Default for AutorecConfig {
    fn default() -> Self {
        AutorecConfig {
            variant: Variant::Full,
            adapter: AdapterConfig::default(),
            start_level: 1,
        }
    }
}

impl AutorecConfig {
    /// Check the ranges: A in `0..=A_MAX`, α > 0, Θ ≥ 0, R_nor ≥ 0.
    pub fn validate(&self) -> Result<(), SchemeError> {
        let bad = |reason: &str| {
            Err(SchemeError::InvalidConfig {
                scheme: "autorec".into(),
                reason: reason.into(),
            })
        };
        if let Variant::Fixed(a) = self.variant {
            if a > A_MAX {
                return bad("A_thres must be in 0..=4");
            }
        }
        if self.start_level > A_MAX {
            return bad("the start level must be in 0..=4");
        }
        if !(self.adapter.alpha > 0.0 && self.adapter.alpha.is_finite()) {
            return bad("alpha must be a positive number");
        }
        if !(self.adapter.r_nor >= 0.0 && self.adapter.r_nor.is_finite()) {
            return bad("R_nor must be a non-negative number");
        }
        Ok(())
    }
}

/// One row of the status table (Fig. 9).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Data_ID: the transport's item.
    pub item: ItemId,
    /// A_i: reinjections done.
    pub reinjections: u32,
    /// T_stmp: the last (re)transmission of its data.
    pub last_sent: Instant,
}

/// The reinjection queue, ordered by T_stmp (head = silent longest).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ReinjectionQueue {
    entries: VecDeque<Entry>,
}

impl ReinjectionQueue {
    /// Data of `item` was (re)transmitted at `now`: insert it at the tail,
    /// or move it there with T_stmp = now.
    pub fn on_resent(&mut self, item: ItemId, now: Instant) {
        let fresh = Entry {
            item,
            reinjections: 0,
            last_sent: now,
        };
        let entry = match self.entries.iter().position(|e| e.item == item) {
            Some(i) => Entry {
                last_sent: now,
                ..self.entries.remove(i).unwrap_or(fresh)
            },
            None => fresh,
        };
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back(entry);
    }

    /// The item left recovery (acknowledged or given up).
    pub fn remove(&mut self, item: ItemId) -> Option<Entry> {
        let i = self.entries.iter().position(|e| e.item == item)?;
        self.entries.remove(i)
    }

    /// The entry of `item`.
    pub fn get(&self, item: ItemId) -> Option<&Entry> {
        self.entries.iter().find(|e| e.item == item)
    }

    /// The eligible entry silent longest (A_i < `a_thres`).
    pub fn head(&self, a_thres: u32) -> Option<&Entry> {
        self.entries.iter().find(|e| e.reinjections < a_thres)
    }

    /// Take the head for a reinjection at `now`: A_i + 1, T_stmp = now, to
    /// the tail. Entries whose A_i reached `a_thres` stay, ineligible.
    pub fn reinject_head(&mut self, a_thres: u32, now: Instant) -> Option<ItemId> {
        let i = self.entries.iter().position(|e| e.reinjections < a_thres)?;
        let mut e = self.entries.remove(i)?;
        e.reinjections += 1;
        e.last_sent = now;
        let item = e.item;
        self.entries.push_back(e);
        Some(item)
    }

    /// The transport refused the reinjection [`ReinjectionQueue::reinject_head`]
    /// just took for `item`: A_i goes back down. T_stmp and the place at the
    /// tail stay, so the refused entry is offered again no sooner than a
    /// sent one would be (what refused it, a replica waiting to go, takes
    /// about that long to clear).
    pub fn refund(&mut self, item: ItemId) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.item == item) {
            e.reinjections = e.reinjections.saturating_sub(1);
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the queue is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Items in queue order.
    pub fn items(&self) -> impl Iterator<Item = ItemId> + '_ {
        self.entries.iter().map(|e| e.item)
    }
}

/// What the current decision interval has measured so far.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Tally {
    sent: u64,
    lost: u64,
    acked_new_bytes: u64,
    latency_sum: f64,
    recovered: u64,
    max_round: u32,
}

/// T_unit's estimator: first transmission to loss detection, smoothed.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct TUnit {
    smoothed: Option<Duration>,
}

impl TUnit {
    fn observe(&mut self, sample: Duration) {
        self.smoothed = Some(match self.smoothed {
            None => sample,
            Some(s) => (s * 7 + sample) / 8,
        });
    }

    fn get(&self, path: &PathView) -> Duration {
        self.smoothed
            .unwrap_or_else(|| path.srtt * 9 / 8 + Duration::from_millis(25))
    }
}

/// The AutoRec policy (one per connection).
#[derive(Clone, Debug)]
pub struct AutorecPolicy {
    config: AutorecConfig,
    adapter: Adapter,
    queue: ReinjectionQueue,
    t_unit: TUnit,
    tally: Tally,
    interval_start: Option<Instant>,
    /// SRTT and min RTT as last seen (for the timer, which has no path).
    srtt: Duration,
    min_rtt: Duration,
    /// The monitored loss rate of the last closed interval.
    loss_rate: f64,
    /// A_thres from outside (the Python environment) instead of the
    /// adapter; `None` for the schemes.
    steer: Option<steered::Steered>,
}

impl AutorecPolicy {
    /// A policy with `config` (validated).
    pub fn new(config: AutorecConfig) -> Result<Self, SchemeError> {
        config.validate()?;
        Ok(Self::build(config))
    }

    /// The policy of a validated `config`.
    fn build(config: AutorecConfig) -> Self {
        let mut adapter_config = config.adapter;
        if config.variant == Variant::NoGate {
            adapter_config.gate = false;
        }
        let start = match config.variant {
            Variant::Fixed(a) => a,
            _ => config.start_level,
        };
        AutorecPolicy {
            config,
            adapter: Adapter::new(adapter_config, start),
            queue: ReinjectionQueue::default(),
            t_unit: TUnit::default(),
            tally: Tally::default(),
            interval_start: None,
            srtt: Duration::ZERO,
            min_rtt: Duration::ZERO,
            loss_rate: 0.0,
            steer: None,
        }
    }

    /// AutoRec whose A_thres is decided outside the transport, through
    /// `desk` ([`crate::steer`], `steered`): at the end of each decision
    /// interval the adapter's state is posted and the loss that closed the
    /// interval deferred; the answer (A_thres in `0..=A_MAX`) holds for the
    /// next interval; each interval's outcome is rewarded by `reward`.
    /// Everything else is the full `autorec` scheme with its defaults.
    pub fn steered(desk: SharedDesk, reward: AutorecReward) -> Self {
        let config = AutorecConfig::default();
        let mut policy = AutorecPolicy::build(config);
        policy.steer = Some(steered::Steered::new(desk, reward, config.start_level));
        policy
    }

    /// The redundancy level in force.
    pub fn level(&self) -> u32 {
        if let Some(st) = &self.steer {
            return st.level();
        }
        match self.config.variant {
            Variant::Fixed(a) => a,
            _ => self.adapter.level(),
        }
    }

    /// T_thres = T_unit / (A_thres + 1) (eq. 6).
    pub fn t_thres(&self, path: &PathView) -> Duration {
        self.t_unit.get(path) / (self.level() + 1)
    }

    /// The reinjection queue (for tests and traces).
    pub fn queue(&self) -> &ReinjectionQueue {
        &self.queue
    }

    fn opportunistic(&self) -> bool {
        self.config.variant != Variant::OffModeOnly
    }

    fn path_of_last(&self) -> PathView {
        PathView {
            srtt: self.srtt,
            min_rtt: self.min_rtt,
            ..PathView::default()
        }
    }

    /// Close the decision interval when it is over: the adapter decides
    /// (or, steered, the interval is returned for the driver to decide).
    fn maybe_decide(
        &mut self,
        now: Instant,
        path: &PathView,
        rng: &mut dyn RngCore,
    ) -> Option<Interval> {
        self.srtt = path.srtt;
        self.min_rtt = path.min_rtt;
        let start = *self.interval_start.get_or_insert(now);
        let length = DECISION_INTERVAL.max(path.srtt * DECISION_INTERVAL_SRTTS);
        if now.saturating_duration_since(start) < length {
            return None;
        }
        let elapsed = now.saturating_duration_since(start).as_secs_f64();
        let t = self.tally;
        let interval = Interval {
            recovery_latency: (t.recovered > 0).then(|| t.latency_sum / t.recovered as f64),
            max_round: t.max_round.max(1),
            loss_rate: if t.sent == 0 {
                0.0
            } else {
                t.lost as f64 / t.sent as f64
            },
            srtt: path.srtt.as_secs_f64(),
            min_rtt: path.min_rtt.as_secs_f64(),
            goodput: t.acked_new_bytes as f64 / elapsed,
        };
        self.loss_rate = interval.loss_rate;
        let decides = !matches!(self.config.variant, Variant::Fixed(_))
            && interval.recovery_latency.is_some();
        self.tally = Tally::default();
        self.interval_start = Some(now);
        if !decides {
            None
        } else if self.steer.is_some() {
            Some(interval)
        } else {
            self.adapter.decide(&interval, rng);
            None
        }
    }

    fn take_reinjection(&mut self, now: Instant) -> Option<ItemId> {
        self.queue.reinject_head(self.level(), now)
    }
}

impl RecoveryPolicy for AutorecPolicy {
    fn name(&self) -> String {
        if self.steer.is_some() {
            return "env:autorec".into();
        }
        match self.config.variant {
            Variant::Full => {
                let d = AdapterConfig::default();
                let mut opts = Vec::new();
                if self.config.adapter.theta != d.theta {
                    opts.push(format!("theta={}", self.config.adapter.theta.as_millis()));
                }
                if self.config.adapter.alpha != d.alpha {
                    opts.push(format!("alpha={}", self.config.adapter.alpha));
                }
                if opts.is_empty() {
                    "autorec".into()
                } else {
                    format!("autorec:{}", opts.join(","))
                }
            }
            Variant::OffModeOnly => "autorec-offmode".into(),
            Variant::Fixed(a) => format!("autorec-fixed:{a}"),
            Variant::NoGate => "autorec-nogate".into(),
        }
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        if lost.kind == DataKind::Datagram {
            return Decision::Drop;
        }
        if let Some(st) = &mut self.steer {
            if st.resume(lost.item, lost.round) {
                // The deferred loss that closed an interval: the driver's
                // A_thres is in; retransmit it as below.
                return Decision::single(cx.now);
            }
        }
        if lost.round == 1 {
            self.t_unit
                .observe(lost.first_lost.saturating_duration_since(lost.first_sent));
        }
        if let Some(interval) = self.maybe_decide(cx.now, cx.path, cx.rng) {
            if let Some(st) = &mut self.steer {
                if !st.is_waiting() {
                    st.post(lost.item, lost.round, &interval, self.config.adapter.alpha);
                    return Decision::Defer;
                }
            }
        }
        // ARQ: one retransmission now; its departure enters the queue.
        Decision::single(cx.now)
    }

    fn on_packet_sent(&mut self, cx: &mut PolicyContext<'_>, sent: &SentView) -> Option<PacketTag> {
        self.tally.sent += 1;
        if let Some(r) = sent.replica {
            self.queue.on_resent(r.item, cx.now);
        }
        None
    }

    fn on_packet_acked(&mut self, _cx: &mut PolicyContext<'_>, fate: &PacketFate) {
        if fate.carries_new_data {
            self.tally.acked_new_bytes += u64::from(fate.size);
        }
    }

    fn on_packet_lost(&mut self, _cx: &mut PolicyContext<'_>, _fate: &PacketFate) {
        self.tally.lost += 1;
    }

    fn report_state(&self, out: &mut PolicyState) {
        out.set("a_thres", f64::from(self.level()));
        out.set("utility", self.adapter.utility().unwrap_or(0.0));
        out.set("loss_rate", self.loss_rate);
        out.set("e_waiting_ms", self.adapter.e_waiting() * 1e3);
        out.set("off", f64::from(u8::from(self.adapter.is_off())));
        out.set("queue", self.queue.len() as f64);
    }

    fn sending_hooks(&mut self) -> Option<&mut dyn SendingHooks> {
        Some(self)
    }
}

impl SendingHooks for AutorecPolicy {
    fn on_app_limited(&mut self, cx: &mut PolicyContext<'_>) -> Option<ItemId> {
        self.take_reinjection(cx.now)
    }
    fn next_reinjection(&self) -> Option<Instant> {
        if !self.opportunistic() {
            return None;
        }
        let head = self.queue.head(self.level())?;
        Some(head.last_sent + self.t_thres(&self.path_of_last()))
    }
    fn on_reinjection_timer(&mut self, cx: &mut PolicyContext<'_>) -> Option<ItemId> {
        if !self.opportunistic() {
            return None;
        }
        let head = self.queue.head(self.level())?;
        if cx.now.saturating_duration_since(head.last_sent) < self.t_thres(cx.path) {
            return None;
        }
        self.take_reinjection(cx.now)
    }
    fn on_reinjection_refused(&mut self, _cx: &mut PolicyContext<'_>, item: ItemId) {
        self.queue.refund(item);
    }
    fn on_recovery_ended(&mut self, _cx: &mut PolicyContext<'_>, record: &RecoveryRecord) {
        self.queue.remove(record.item);
        if let RecoveryOutcome::Delivered {
            round,
            recovery_sent,
            ..
        } = record.outcome
        {
            if round > 0 {
                self.tally.latency_sum += recovery_sent
                    .saturating_duration_since(record.first_lost)
                    .as_secs_f64();
                self.tally.recovered += 1;
                self.tally.max_round = self.tally.max_round.max(round);
            }
        }
    }
}

#[cfg(test)]
mod tests;
