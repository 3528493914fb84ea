//! The sender's recovery of lost data, as one owner: [`Recovery`] holds
//! the retransmission engine (items, rounds, replicas), the lost-packet
//! history for spurious losses, what early copies delivered, the DATAGRAM
//! payloads a policy may still resend, the recovery policy with what it
//! publishes, and block FEC's sender. The policy is called from here and
//! from nowhere else.
//!
//! The connection talks to it through a few calls and a
//! [`RecoveryContext`] (the time, the path, the streams, the statistics,
//! the subscribers and the seeded RNG, all of them the connection's):
//! - losses in: [`Recovery::on_losses_detected`] once per detection pass,
//!   then [`Recovery::on_data_packet_lost`] for each lost 1-RTT packet;
//! - acknowledgements in: [`Recovery::on_packet_acked`],
//!   [`Recovery::detect_spurious`];
//! - what to send next within a packet's budget out:
//!   [`Recovery::plan_resend`] before the packet is built,
//!   [`Recovery::write_resend`], [`Recovery::write_probe_copy`] and
//!   [`Recovery::write_fec_repair`] while it is;
//! - sent: [`Recovery::on_packet_sent`], [`Recovery::on_new_data_sent`];
//! - timers: [`Recovery::next_wakeup`];
//! - records out: [`Recovery::publish`] hands every record of an item
//!   that left recovery to the policy, the statistics and the
//!   subscribers, once each.
//!
//! A lost 1-RTT packet carrying stream data or DATAGRAM payloads becomes
//! an engine item; a lost replica is reported to the engine, which says
//! whether its round is over; the next round asks the policy.
//!
//! Every resend of lost data is a replica of an engine item: the policy's
//! retransmissions and replicas, reinjections (queued by the engine into
//! the item's current round) and, once their data is declared lost, what
//! early copies carried (the engine starts the item with k counting them).
//! Head-of-line and probe copies go out before any loss is known; the
//! engine remembers what they carried so an item they deliver counts
//! them. FEC repair frames are not resends: one goes with every block of
//! K packets before anything is lost, the receiver rebuilds a missing
//! packet from it and acknowledges that packet, so the sender never
//! declares it lost and no item exists; they are counted in
//! `fec_repairs`, never in `replicas`.

mod copies;
mod engine;
mod lost;

use std::collections::BTreeMap;

use wire::frame::{self, Frame};
use wire::time::Instant;

use self::copies::write_unacked;
use self::engine::{Engine, Remaining, ReplicaAck, ReplicaLoss, RoundStart};
pub(crate) use self::lost::SPURIOUS_LOSS_WINDOW_PTOS;
use self::lost::{LostEntry, LostHistory};
use super::spaces::SentPacket;
use crate::congestion::Controller;
use crate::events::Subscriber;
use crate::fec::FecEncoder;
use crate::policy::{
    Carriage, Decision, HeadOfLine, ItemId, LostData, PacketTag, PathView, PolicyContext,
    PolicyEvents, PolicyState, RecoveryPolicy, ReplicaRef, SentView, StreamPosition,
};
use crate::rng::StackRng;
use crate::rtt::RttEstimator;
use crate::stats::ConnectionStats;
use crate::streams::{StreamChunk, Streams};

/// What of the connection recovery works with during one call: borrowed
/// from the connection for that call only, so that recovery owns none of
/// it and reads nothing else.
pub(crate) struct RecoveryContext<'a> {
    /// The time of the call.
    pub now: Instant,
    /// What the path the policy sees is measured from, read only when the
    /// policy is called.
    pub path: PathInputs<'a>,
    /// Stream data: what of it is unacknowledged, where it sits, writing
    /// it into packets, acknowledging it.
    pub streams: &'a mut Streams,
    /// The counters recovery keeps (replicas, copies, records).
    pub stats: &'a mut ConnectionStats,
    /// Who hears of scheduled replicas, records and the policy's events.
    pub subscribers: &'a mut [Box<dyn Subscriber>],
    /// The connection's seeded RNG, for the policy.
    pub rng: &'a mut StackRng,
}

/// The connection's parts a [`PathView`] is measured from, borrowed: the
/// connection builds its own view from them ([`PathInputs::view`]), and
/// recovery measures one only when it calls the policy, not for every
/// packet it is consulted about.
#[derive(Clone, Copy)]
pub(crate) struct PathInputs<'a> {
    /// The congestion controller (window, pacing rate).
    pub cc: &'a dyn Controller,
    /// The RTT estimates.
    pub rtt: &'a RttEstimator,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// The maximum datagram size in use.
    pub mtu: u16,
}

impl PathInputs<'_> {
    /// The path as it stands.
    pub fn view(&self) -> PathView {
        PathView {
            srtt: self.rtt.smoothed(),
            min_rtt: self.rtt.min(),
            rttvar: self.rtt.rttvar(),
            latest_rtt: self.rtt.latest(),
            cwnd: self.cc.window(),
            bytes_in_flight: self.bytes_in_flight,
            pacing_rate: self.pacing_rate(),
            mtu: u64::from(self.mtu),
        }
    }

    /// The controller's pacing rate, or the default one from its window
    /// and the smoothed RTT, bytes per second.
    pub fn pacing_rate(&self) -> u64 {
        self.cc.pacing_rate().unwrap_or_else(|| {
            crate::pacing::default_pacing_rate(self.cc.window(), self.rtt.smoothed())
        })
    }
}

/// What a 1-RTT packet about to be built carries before anything else,
/// from [`Recovery::plan_resend`].
#[derive(Clone, Copy, Debug)]
pub(crate) enum Resend {
    /// A replica of an item (the policy's, or a reinjection) due now.
    Replica(ReplicaRef),
    /// A head-of-line copy the policy asked for while flow control blocks
    /// the sender (policy.rs, "Head-of-line copies").
    HeadCopy(StreamChunk),
}

/// Where the packet about to be built stands, for [`Recovery::plan_resend`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct SendWindow {
    /// Congestion control and pacing let an ack-eliciting packet go.
    pub may_elicit: bool,
    /// Pacing lets a packet go (opportunistic replicas ignore the window,
    /// not pacing).
    pub pacing_ok: bool,
    /// A PTO probe is due: nothing is offered to the policy.
    pub probing: bool,
    /// Nothing else waits to be sent (off-mode, autorec.md §4.2).
    pub app_limited: bool,
    /// Frame bytes a head-of-line copy may take.
    pub room: usize,
}

/// The sender's recovery: see the module documentation.
#[derive(Debug)]
pub(crate) struct Recovery {
    /// Lost data being recovered: items, rounds, replicas.
    engine: Engine,
    /// 1-RTT packets declared lost, kept a while to spot spurious losses.
    lost_history: LostHistory,
    /// Payloads of DATAGRAM frames sent and neither acknowledged nor given
    /// up, by id: what a policy may retransmit (RCP).
    datagram_store: BTreeMap<u64, Vec<u8>>,
    next_datagram_id: u64,
    policy: Box<dyn RecoveryPolicy>,
    /// What the policy publishes during a callback, until handed on.
    policy_events: PolicyEvents,
    /// What the policy last reported of its state to the subscribers.
    last_policy_state: Option<PolicyState>,
    /// Block-FEC sender (when the policy asks for it and the peer decodes).
    fec_tx: Option<FecEncoder>,
}

impl Recovery {
    /// Recovery under `policy`, with nothing lost yet.
    pub fn new(policy: Box<dyn RecoveryPolicy>) -> Self {
        Recovery {
            engine: Engine::default(),
            lost_history: LostHistory::default(),
            datagram_store: BTreeMap::new(),
            next_datagram_id: 0,
            policy,
            policy_events: PolicyEvents::default(),
            last_policy_state: None,
            fec_tx: None,
        }
    }

    /// The policy's name (the scheme on the command line).
    pub fn scheme(&self) -> String {
        self.policy.name()
    }

    /// How the policy wants an application's messages carried.
    pub fn message_carriage(&self) -> Carriage {
        self.policy.message_carriage()
    }

    /// The peer decodes block FEC and the configuration asks for it: FEC's
    /// sender from now on.
    pub fn set_fec_encoder(&mut self, encoder: Option<FecEncoder>) {
        self.fec_tx = encoder;
    }

    // ---- losses ----

    /// A detection pass declared `packets` of the 1-RTT space lost: the
    /// policy hears of every one before any round starts, so a burst is
    /// known whole when the first of its items is scheduled (ART's B_max,
    /// journal §6.2).
    pub fn on_losses_detected(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        packets: &[(u64, SentPacket)],
    ) {
        for (pn, p) in packets {
            let fate = p.fate(*pn);
            self.call_policy(cx, |policy, pcx| policy.on_packet_lost(pcx, &fate));
        }
    }

    /// A 1-RTT packet was declared lost: its data becomes an item (or its
    /// replica's round may end). Returns whether this loss should reach
    /// congestion control. Takes the packet's record: its chunks and
    /// DATAGRAM ids move into the lost history (one copy goes to the
    /// engine's item).
    pub fn on_data_packet_lost(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        pn: u64,
        mut p: SentPacket,
    ) -> bool {
        let now = cx.now;
        let fate = p.fate(pn);
        let mut entry = LostEntry {
            item: None,
            round: 0,
            fate,
            lost_at: now,
            chunks: core::mem::take(&mut p.stream_chunks),
            datagrams: core::mem::take(&mut p.datagrams),
        };
        if let Some(r) = p.replica {
            entry.item = Some(r.item);
            entry.round = r.round;
            self.lost_history.remember(pn, entry);
            let round_over =
                self.engine.on_replica_lost(now, &r, p.time_sent) == ReplicaLoss::RoundOver;
            if round_over {
                // Every replica the policy decided for the round is lost:
                // next round, whatever reinjections are in flight.
                self.start_round(cx, r.item);
            }
            // Congestion control hears a replica's loss when it ends a
            // round (ART journal §6.4: one signal per round, so plain QUIC
            // keeps RFC 9002 exactly), and always for a reinjection:
            // AutoRec is an add-on over LSQUIC, whose reinjected copies are
            // ordinary packets, and LSQUIC's loss detection reports every
            // lost packet to congestion control (`cci_lost`, and a loss
            // event when it was sent after the last cut-back). Congestion
            // controllers here take one reduction per recovery period
            // (RFC 9002 §7.3.2), as LSQUIC's cut-back rule does.
            return round_over || p.reinjection;
        }
        if p.early_copy {
            // The data's own packets still carry it: their loss, if it
            // comes, starts recovery. The chunks are remembered so that a
            // late acknowledgement still acknowledges them.
            self.lost_history.remember(pn, entry);
            return p.ack_eliciting;
        }
        let datagrams: Vec<u64> = entry
            .datagrams
            .iter()
            .copied()
            .filter(|id| self.datagram_store.contains_key(id))
            .collect();
        if entry.chunks.is_empty() && datagrams.is_empty() {
            entry.datagrams.clear();
            self.lost_history.remember(pn, entry);
            return p.ack_eliciting;
        }
        let by_copy = if datagrams.is_empty() {
            self.engine.delivered_early(&entry.chunks)
        } else {
            None
        };
        let id = self
            .engine
            .create(p.time_sent, now, entry.chunks.clone(), datagrams);
        entry.item = Some(id);
        self.lost_history.remember(pn, entry);
        match by_copy {
            // A copy sent before the loss was declared already delivered
            // the data: recovered in round 1, no round to run.
            Some(copy_sent) => self.engine.delivered_by_copy(now, id, copy_sent),
            None => self.start_round(cx, id),
        }
        true
    }

    // ---- acknowledgements ----

    /// A 1-RTT packet was acknowledged (its stream data already
    /// acknowledged in the stream layer): what it delivered, the policy's
    /// callback, the item its replica carried.
    pub fn on_packet_acked(&mut self, cx: &mut RecoveryContext<'_>, pn: u64, p: &SentPacket) {
        if p.early_copy {
            self.engine.on_copy_acked(&p.stream_chunks, p.time_sent);
        }
        for id in &p.datagrams {
            self.datagram_store.remove(id);
        }
        let fate = p.fate(pn);
        self.call_policy(cx, |policy, pcx| policy.on_packet_acked(pcx, &fate));
        if let Some(r) = p.replica {
            let remaining = self.remaining(cx.streams, r.item);
            if self
                .engine
                .on_replica_acked(cx.now, &r, p.time_sent, remaining)
                == ReplicaAck::NeedsRound
            {
                self.start_round(cx, r.item);
            }
        }
    }

    /// An ACK frame acknowledged `ranges` of the 1-RTT space: the packets
    /// among them that were declared lost were not (spurious losses). Then
    /// forget the losses declared before `horizon`.
    pub fn detect_spurious(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        ranges: &[std::ops::RangeInclusive<u64>],
        horizon: Instant,
    ) {
        if self.lost_history.is_empty() {
            return;
        }
        for (_, e) in self.lost_history.take_acked(ranges) {
            cx.stats.spurious_retransmissions += 1;
            // Lost, then acknowledged: the policy gets both callbacks
            // (the seam's promise), so that it can correct the fate it
            // recorded.
            let fate = e.fate;
            self.call_policy(cx, |policy, pcx| policy.on_packet_acked(pcx, &fate));
            for c in &e.chunks {
                cx.streams.on_chunk_acked(c);
            }
            for d in &e.datagrams {
                self.datagram_store.remove(d);
            }
            if let Some(item) = e.item {
                // The packet got through after all: the round it was
                // sent in delivered the data (0 for the original), if
                // it carried all that was left of it.
                let remaining = self.remaining(cx.streams, item);
                self.engine.on_late_ack(
                    cx.now,
                    item,
                    e.round,
                    e.fate.replica.map_or(0, |r| r.index),
                    e.fate.time_sent,
                    remaining,
                );
            }
        }
        self.lost_history.forget_before(horizon);
    }

    /// The peer moved to another address (RFC 9000 §9): the policy hears
    /// of it with the new path's view.
    pub fn on_path_change(&mut self, cx: &mut RecoveryContext<'_>) {
        self.call_policy(cx, |policy, pcx| policy.on_path_change(pcx));
    }

    // ---- rounds ----

    /// What of an item is still unacknowledged.
    fn remaining(&self, streams: &Streams, id: ItemId) -> Remaining {
        let Some(data) = self.engine.data(id) else {
            return Remaining::default();
        };
        let mut parts = Vec::new();
        let mut stream = 0u64;
        let mut position: Option<StreamPosition> = None;
        for c in data.chunks {
            streams.unacked_parts(c, &mut parts);
            stream += parts
                .iter()
                .map(|p| u64::from(p.len).max(u64::from(p.fin)))
                .sum::<u64>();
            // The chunk's first unacknowledged byte; the item's position is
            // its chunk nearest a stream's head.
            if let Some(here) = parts.first().and_then(|p| streams.position(p.id, p.offset)) {
                if position.is_none_or(|q| here.behind_head < q.behind_head) {
                    position = Some(here);
                }
            }
        }
        let datagram = data
            .datagrams
            .iter()
            .filter_map(|d| self.datagram_store.get(d))
            .map(|d| d.len() as u64)
            .sum();
        Remaining {
            stream,
            datagram,
            position,
        }
    }

    /// Begin the next round of `id`: the engine asks the policy.
    fn start_round(&mut self, cx: &mut RecoveryContext<'_>, id: ItemId) {
        let start = self.round_with_policy(cx, id, |e, now, id, remaining, decide| {
            e.start_round(now, id, remaining, decide)
        });
        self.round_started(cx, id, start);
    }

    /// Ask the policy again for the round of `id` whose decision it
    /// deferred ([`Decision::Defer`]). False when the item is gone or its
    /// round is not deferred.
    pub fn resume_round(&mut self, cx: &mut RecoveryContext<'_>, id: ItemId) -> bool {
        let start = self.round_with_policy(cx, id, |e, now, id, remaining, decide| {
            e.resume_round(now, id, remaining, decide)
        });
        let known = start != RoundStart::Unknown;
        self.round_started(cx, id, start);
        self.publish(cx, false);
        known
    }

    /// Runs `round` (the engine's start or resumption of `id`'s round)
    /// with the policy's `on_data_lost` as its decision, then hands on
    /// what the policy published.
    fn round_with_policy(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        id: ItemId,
        round: impl FnOnce(
            &mut Engine,
            Instant,
            ItemId,
            Remaining,
            &mut dyn FnMut(&LostData) -> Decision,
        ) -> RoundStart,
    ) -> RoundStart {
        let remaining = self.remaining(cx.streams, id);
        self.policy_events.set_listening(!cx.subscribers.is_empty());
        let policy = &mut self.policy;
        let path = cx.path.view();
        let mut pcx = PolicyContext::new(cx.now, &path, cx.rng, &mut self.policy_events);
        let start = round(&mut self.engine, cx.now, id, remaining, &mut |lost| {
            policy.on_data_lost(&mut pcx, lost)
        });
        self.flush_policy_events(cx);
        start
    }

    /// What a round's decision led to, for the subscribers and the datagram
    /// store.
    fn round_started(&mut self, cx: &mut RecoveryContext<'_>, id: ItemId, start: RoundStart) {
        match start {
            RoundStart::Scheduled { round, replicas } => {
                for s in cx.subscribers.iter_mut() {
                    for &(index, send_at) in &replicas {
                        s.replica_scheduled(cx.now, id, round, index, send_at);
                    }
                }
            }
            RoundStart::Ended { dropped_datagrams } => {
                for d in &dropped_datagrams {
                    if self.datagram_store.remove(d).is_some() {
                        cx.stats.datagrams_dropped += 1;
                    }
                }
            }
            RoundStart::Deferred { .. } | RoundStart::Unknown => {}
        }
    }

    /// The connection is closing: lost data still being recovered never
    /// will be, and its items say so.
    pub fn abandon_all(&mut self, cx: &mut RecoveryContext<'_>) {
        self.engine.abandon_all(cx.now);
        self.publish(cx, false);
    }

    // ---- the send path ----

    /// Whether a replica waits to be sent (due or not).
    pub fn has_queued(&self) -> bool {
        self.engine.has_queued()
    }

    /// Whether a due replica could go now; `allow_non_opportunistic`:
    /// whether congestion control lets a regular packet go.
    pub fn has_due(&self, now: Instant, allow_non_opportunistic: bool) -> bool {
        self.engine.has_due(now, allow_non_opportunistic)
    }

    /// Whether a completed FEC block's repair waits to be sent.
    pub fn fec_pending(&self) -> bool {
        self.fec_tx.as_ref().is_some_and(|f| f.ready.is_some())
    }

    /// Bytes a packet of new stream data leaves free for the FEC repair
    /// frame of its block (0 without FEC).
    pub fn fec_frame_overhead(&self) -> usize {
        self.fec_tx.as_ref().map_or(0, FecEncoder::frame_overhead)
    }

    /// When recovery wants to send next after `now`: the earliest queued
    /// replica, or the policy's reinjection time.
    pub fn next_wakeup(&mut self, now: Instant) -> Option<Instant> {
        let queued = self.engine.next_send_at().filter(|t| *t > now);
        let reinjection = self
            .policy
            .sending_hooks()
            .and_then(|h| h.next_reinjection())
            .filter(|t| *t > now);
        match (queued, reinjection) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// A 1-RTT packet may be built: what it should carry first. The policy
    /// may reinject an item being recovered when the sender is
    /// application-limited (off-mode) or its reinjection time has come
    /// (policy.rs, "Reinjection and off-mode"): the engine queues that
    /// replica due now, so this very packet carries it. Idle and blocked by
    /// flow control with nothing reinjected, the policy may instead ask for
    /// a head-of-line copy (policy.rs, "Head-of-line copies"). Otherwise the
    /// next due replica, when pacing (and, unless it is opportunistic,
    /// congestion control) lets it go.
    pub fn plan_resend(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        window: SendWindow,
    ) -> Option<Resend> {
        let head_copy = if window.may_elicit && !window.probing {
            self.offer_reinjection(cx, window)
        } else {
            None
        };
        let replica = if window.pacing_ok {
            self.engine.pop_due(cx.now, window.may_elicit)
        } else {
            None
        };
        // The head-of-line copy only when nothing was due, so it never
        // drops a replica.
        replica
            .map(Resend::Replica)
            .or(head_copy.map(Resend::HeadCopy))
    }

    /// The policy's chance to reinject or to ask for a head-of-line copy
    /// ([`Recovery::plan_resend`]).
    fn offer_reinjection(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        window: SendWindow,
    ) -> Option<StreamChunk> {
        let now = cx.now;
        let timer_due = self
            .policy
            .sending_hooks()
            .and_then(|h| h.next_reinjection())
            .is_some_and(|t| t <= now);
        let item = if window.app_limited {
            self.call_policy(cx, |policy, pcx| {
                policy.sending_hooks().and_then(|h| h.on_app_limited(pcx))
            })
        } else if timer_due {
            self.call_policy(cx, |policy, pcx| {
                policy
                    .sending_hooks()
                    .and_then(|h| h.on_reinjection_timer(pcx))
            })
        } else {
            None
        };
        if let Some(id) = item {
            // Refused when the item is gone or a replica of it still waits;
            // the policy hears of it (it may count reinjections).
            if !self.engine.reinject(now, id) {
                self.call_policy(cx, |policy, pcx| {
                    if let Some(h) = policy.sending_hooks() {
                        h.on_reinjection_refused(pcx, id);
                    }
                });
            }
            return None;
        }
        if !window.app_limited || !cx.streams.flow_blocked() {
            return None;
        }
        let (chunk, position) = cx.streams.head_copy(window.room)?;
        let head = HeadOfLine {
            bytes: u64::from(chunk.len),
            position,
        };
        self.call_policy(cx, |policy, pcx| {
            policy
                .sending_hooks()
                .is_some_and(|h| h.on_flow_blocked(pcx, &head))
        })
        .then_some(chunk)
    }

    /// Write what [`Recovery::plan_resend`] planned into the packet being
    /// built, within `max_end`; `may_elicit` as in the plan. A replica
    /// whose data was acknowledged meanwhile carries nothing: the next due
    /// one takes its place (a replica left in the queue would wait for a
    /// timer that nothing arms). A replica with data left of which not a
    /// byte fits waits for the next packet. Returns whether anything was
    /// written; the record says what.
    pub fn write_resend(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        resend: Resend,
        buf: &mut Vec<u8>,
        max_end: usize,
        may_elicit: bool,
        record: &mut SentPacket,
    ) -> bool {
        let r = match resend {
            Resend::HeadCopy(chunk) => {
                let wrote = write_unacked(
                    cx.streams,
                    buf,
                    max_end,
                    std::slice::from_ref(&chunk),
                    record,
                );
                // Offered once, sent or not.
                cx.streams.on_head_copied(&chunk);
                if wrote {
                    self.engine.on_copy_sent(&record.stream_chunks);
                    cx.stats.head_copies += 1;
                    cx.stats.replicas += 1;
                    cx.stats.extra_replicas += 1;
                    record.early_copy = true;
                    record.ack_eliciting = true;
                }
                return wrote;
            }
            Resend::Replica(r) => r,
        };
        let mut next = Some(r);
        while let Some(r) = next {
            if self.write_replica(cx, buf, max_end, &r, record) {
                record.replica = Some(r);
                record.ack_eliciting = true;
                return true;
            }
            if !self.remaining(cx.streams, r.item).is_empty() {
                // Data is left but not a byte of it fit this packet: the
                // replica waits for the next one (abandoning it here would
                // leave that data unsent for good).
                self.engine.put_back(cx.now, &r);
                return false;
            }
            self.engine.on_replica_empty(cx.now, &r);
            self.publish(cx, false);
            next = self.engine.pop_due(cx.now, may_elicit);
        }
        false
    }

    /// Write the unacknowledged parts of a replica's item. False if
    /// nothing is left to carry.
    fn write_replica(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        buf: &mut Vec<u8>,
        max_end: usize,
        r: &ReplicaRef,
        record: &mut SentPacket,
    ) -> bool {
        let Some(item) = self.engine.data(r.item) else {
            return false;
        };
        let mut wrote = false;
        for id in item.datagrams {
            let Some(d) = self.datagram_store.get(id) else {
                continue;
            };
            let need = frame::datagram_header_len(d.len()) + d.len();
            if buf.len() + need > max_end {
                continue;
            }
            frame::write_datagram_header(buf, d.len());
            buf.extend_from_slice(d);
            record.datagrams.push(*id);
            wrote = true;
        }
        wrote |= write_unacked(cx.streams, buf, max_end, item.chunks, record);
        if wrote {
            let reinjection = self.engine.on_replica_sent(r);
            if reinjection {
                cx.stats.reinjections += 1;
            }
            cx.stats.replicas += 1;
            if r.index > 0 {
                cx.stats.extra_replicas += 1;
            }
            record.reinjection = reinjection;
        }
        wrote
    }

    /// Write into a probe the stream data of the oldest packet in flight
    /// that still has some unacknowledged (RFC 9002 §6.2.4: "Previously
    /// sent data MAY be sent if no new data can be sent"; quinn and
    /// Chromium's QUIC do the same), counted as a replica and in
    /// `probe_copies`. `candidates`: the stream data of the oldest
    /// ack-eliciting packets in flight, oldest first. A probe that carries
    /// data gets it through even when every acknowledgement that would
    /// declare the original lost is itself lost. False if nothing fit or
    /// nothing was left.
    pub fn write_probe_copy(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        candidates: &[Vec<StreamChunk>],
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &mut SentPacket,
    ) -> bool {
        for chunks in candidates {
            if write_unacked(cx.streams, buf, max_end, chunks, record) {
                self.engine.on_copy_sent(&record.stream_chunks);
                cx.stats.probe_copies += 1;
                cx.stats.replicas += 1;
                record.early_copy = true;
                record.ack_eliciting = true;
                return true;
            }
        }
        false
    }

    /// Write a completed FEC block's repair symbol, which travels in a
    /// packet of its own: `true` when a repair was due (written, or skipped
    /// for not fitting a packet), and the packet then carries nothing else
    /// that elicits.
    pub fn write_fec_repair(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        buf: &mut Vec<u8>,
        max_end: usize,
        record: &mut SentPacket,
    ) -> bool {
        let Some((pns, repair)) = self.fec_tx.as_mut().and_then(|f| f.ready.take()) else {
            return false;
        };
        let deltas = FecEncoder::deltas(&pns);
        let first_pn = pns.first().copied().unwrap_or(0);
        let f = Frame::ArtqFec(wire::frame::FecRepair {
            first_pn,
            count: pns.len() as u64,
            deltas: &deltas,
            repair: &repair,
        });
        let mut tmp = Vec::with_capacity(repair.len() + 16);
        f.encode(&mut tmp);
        if buf.len() + tmp.len() <= max_end {
            buf.extend_from_slice(&tmp);
            record.ack_eliciting = true;
            cx.stats.fec_repairs += 1;
        } else {
            tracing::debug!(
                len = tmp.len(),
                "FEC repair frame does not fit a packet; block skipped"
            );
        }
        true
    }

    /// A DATAGRAM frame's payload left in a packet: kept, under the id
    /// returned, until acknowledged or given up, for the policy to resend.
    pub fn store_datagram(&mut self, payload: Vec<u8>) -> u64 {
        let id = self.next_datagram_id;
        self.next_datagram_id += 1;
        self.datagram_store.insert(id, payload);
        id
    }

    /// A packet of first transmissions of stream data left, `payload` its
    /// plaintext frames: FEC's sender adds it to the current block.
    pub fn on_new_data_sent(&mut self, pn: u64, payload: &[u8]) {
        if let Some(enc) = self.fec_tx.as_mut() {
            enc.add(pn, payload);
        }
    }

    /// An ack-eliciting 1-RTT packet left: the policy hears of it and may
    /// tag it.
    pub fn on_packet_sent(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        view: &SentView,
    ) -> Option<PacketTag> {
        self.call_policy(cx, |policy, pcx| policy.on_packet_sent(pcx, view))
    }

    // ---- the policy and the records ----

    /// Call the policy with a [`PolicyContext`]; then hand what it
    /// published to the subscribers.
    fn call_policy<R>(
        &mut self,
        cx: &mut RecoveryContext<'_>,
        f: impl FnOnce(&mut dyn RecoveryPolicy, &mut PolicyContext<'_>) -> R,
    ) -> R {
        self.policy_events.set_listening(!cx.subscribers.is_empty());
        let out = {
            let path = cx.path.view();
            let mut pcx = PolicyContext::new(cx.now, &path, cx.rng, &mut self.policy_events);
            f(self.policy.as_mut(), &mut pcx)
        };
        self.flush_policy_events(cx);
        out
    }

    /// Hand the events the policy published to the subscribers.
    fn flush_policy_events(&mut self, cx: &mut RecoveryContext<'_>) {
        if self.policy_events.is_empty() {
            return;
        }
        for e in self.policy_events.drain() {
            for s in cx.subscribers.iter_mut() {
                s.policy_event(cx.now, &e);
            }
        }
    }

    /// Hand the records of items that left the engine to the policy, the
    /// statistics and the subscribers, once each; with `state`, then tell
    /// the subscribers the policy's state if it changed since the last
    /// report (nothing asked without subscribers).
    pub fn publish(&mut self, cx: &mut RecoveryContext<'_>, state: bool) {
        if self.engine.has_records() {
            for record in self.engine.take_records() {
                self.call_policy(cx, |policy, pcx| {
                    if let Some(h) = policy.sending_hooks() {
                        h.on_recovery_ended(pcx, &record);
                    }
                });
                cx.stats.recovery.observe(&record);
                for s in cx.subscribers.iter_mut() {
                    s.recovery_ended(cx.now, &record);
                }
            }
        }
        if !state || cx.subscribers.is_empty() {
            return;
        }
        let mut report = PolicyState::default();
        self.policy.report_state(&mut report);
        if report.is_empty() || self.last_policy_state.as_ref() == Some(&report) {
            return;
        }
        for s in cx.subscribers.iter_mut() {
            s.policy_state(cx.now, &report);
        }
        self.last_policy_state = Some(report);
    }
}

#[cfg(test)]
mod tests;
