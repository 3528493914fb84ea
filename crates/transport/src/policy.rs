//! The recovery-policy seam (DESIGN.md principle 2).
//!
//! The transport owns packets; a [`RecoveryPolicy`] only decides. The
//! connection calls it when retransmittable stream data has been declared
//! lost (a *retransmission round* ended), and tells it the fate of every
//! packet it sent: originals and replicas alike. The policy answers with a
//! [`Decision`]: how many replicas to send and when to send each, or (for
//! data that may be abandoned, such as RCP's messages) not to send at all.
//!
//! What the transport guarantees to every policy:
//! - each replica travels in its own packet with a new packet number, carrying
//!   only the lost data that is still unacknowledged (plus perhaps an ACK);
//! - replicas still queued when their data gets acknowledged are cancelled;
//! - a round ends when every replica sent in it has been declared lost; the
//!   next [`RecoveryPolicy::on_data_lost`] call then has `round + 1`;
//! - replica losses reach congestion control only when they end a round (ART
//!   journal §6.4, "Interaction with congestion controller"), so plain QUIC
//!   (one replica per round) keeps RFC 9002 behaviour exactly; a
//!   reinjection's loss always does (see "Reinjection and off-mode");
//! - the number of replicas is capped at [`MAX_REPLICAS`] and `send_at` times
//!   earlier than `now` mean "now";
//! - `Drop` gives up DATAGRAM payloads (RFC 9221: unreliable by nature, so
//!   RCP may abandon a late message); it is refused for reliable stream data,
//!   which is then sent once, now.
//!
//! # Reinjection and off-mode
//!
//! Besides answering losses, a policy may *reinject*: ask for one more
//! replica of an item that is still being recovered (its data retransmitted
//! and not yet acknowledged), at a moment of its choosing. This is what
//! AutoRec (autorec.md §4.2) builds on. The transport offers the chance at
//! two moments, and only when congestion control and pacing would let a
//! packet go (a reinjection is a regular, congestion-controlled packet):
//! - [`SendingHooks::on_app_limited`]: the sender is *application-limited*
//!   (off-mode): no stream data, due replica or control frame waits, and
//!   neither the window nor pacing holds anything back;
//! - [`SendingHooks::on_reinjection_timer`]: the time the policy gave in
//!   [`SendingHooks::next_reinjection`] has come (on-mode included).
//!
//! Either returns the [`ItemId`] to reinject, or `None`. The replica is
//! tagged with the item's current round and the next index
//! ([`ReplicaRef`]), and leaves before new data, through the same path as
//! every replica ([`RecoveryPolicy::on_packet_sent`] reports it). It is not
//! part of the round: the round ends when the replicas of the policy's
//! decision are declared lost, whatever reinjections are still in flight,
//! so the next [`RecoveryPolicy::on_data_lost`] comes exactly when it
//! would without them (AutoRec is an add-on beside ARQ). An acknowledged
//! reinjection delivers the item (in the round it was sent in); a lost one
//! changes no round and is reported to congestion control as any lost
//! packet is in a stack without rounds (LSQUIC, AutoRec's base). The
//! transport refuses silently an item that has left recovery or still has
//! a replica queued; [`SendingHooks::on_recovery_ended`] tells the policy
//! when an item leaves, so it can forget it. A policy that implements none of these
//! methods (every scheme but AutoRec) is asked nothing that changes what it
//! sends.
//!
//! # Head-of-line copies while flow-control blocked
//!
//! When the sender has stream data but the peer's flow control (MAX_DATA
//! or MAX_STREAM_DATA) gives it no credit, it is idle on the link like an
//! application-limited sender, and what it waits for is the data at the
//! head of line: the receiver cannot raise its limits until it arrives.
//! The transport then offers [`SendingHooks::on_flow_blocked`] a
//! [`HeadOfLine`]: the lowest stretch of sent, unacknowledged stream data
//! not copied before (at most one packet of it), whether or not it has been
//! declared lost. A `true` sends it in a packet of its own, now, as a
//! congestion-controlled and paced packet (only offered when a packet may
//! go). Each byte is copied at most once per connection; acknowledged data
//! is never copied. A copy is counted as a replica (`replicas`,
//! `extra_replicas`, `head_copies` in the statistics); its loss starts no
//! recovery (the data's own packets do) and reaches congestion control as
//! any lost packet's. The default answers `false`: no scheme but `art+:stall=on`
//! sends anything different.

use core::fmt;

use rand::RngCore;

use crate::events::RecoveryRecord;
use wire::time::{Duration, Instant};

/// Upper bound on replicas per round, whatever a policy asks for.
pub const MAX_REPLICAS: usize = 32;

/// Identifies one unit of lost data (the retransmittable stream data of one
/// lost packet) across all its rounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ItemId(pub u64);

/// What was lost: handed to [`RecoveryPolicy::on_data_lost`].
///
/// Built by the transport; code outside it (scheme tests, offline drivers
/// that replay losses into a policy) builds one with [`LostData::new`] and
/// the `with_` methods, so a field added here touches no scheme.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct LostData {
    /// The item (stable across rounds).
    pub item: ItemId,
    /// When the data was first transmitted.
    pub first_sent: Instant,
    /// When the data was first declared lost.
    pub first_lost: Instant,
    /// Retransmission round about to start: 1 for the first retransmission.
    pub round: u32,
    /// Retransmissions (replicas) already sent for this data (`k` so far).
    pub retransmissions: u32,
    /// Unacknowledged payload bytes that each replica will carry.
    pub bytes: u64,
    /// What kind of data it is: whether `Drop` is possible.
    pub kind: DataKind,
    /// Where the data sits in its stream (head-of-line blocking, flow
    /// control); `None` when it carries no stream data still
    /// unacknowledged, or when the caller does not know (tests, offline
    /// drivers). Only policies that weigh head-of-line blocking read it.
    pub position: Option<StreamPosition>,
}

impl LostData {
    /// Stream data of `item` first sent at `first_sent` and first declared
    /// lost at `first_lost`, about to enter `round` with `bytes` still
    /// unacknowledged; no retransmission sent yet, its stream position not
    /// known.
    pub fn new(
        item: ItemId,
        round: u32,
        first_sent: Instant,
        first_lost: Instant,
        bytes: u64,
    ) -> LostData {
        LostData {
            item,
            first_sent,
            first_lost,
            round,
            retransmissions: 0,
            bytes,
            kind: DataKind::Stream,
            position: None,
        }
    }

    /// The same, of another kind (DATAGRAM payloads may be dropped).
    pub fn with_kind(mut self, kind: DataKind) -> LostData {
        self.kind = kind;
        self
    }

    /// The same, with `k` retransmissions already sent.
    pub fn with_retransmissions(mut self, k: u32) -> LostData {
        self.retransmissions = k;
        self
    }

    /// The same, at `position` in its stream.
    pub fn with_position(mut self, position: Option<StreamPosition>) -> LostData {
        self.position = position;
        self
    }
}

/// Where lost stream data sits in its stream, as the sender sees it: how
/// much of what the receiver could deliver waits for it, and how much new
/// data flow control still lets the sender send. A policy can tell from it
/// whether the data blocks the receiver (and, through the receive window,
/// the sender) or lies far ahead and can wait a round at no cost to the
/// application (`art+`, docs/recovery.md).
///
/// For data spanning several streams (one packet may carry chunks of
/// more than one), the transport reports the chunk nearest its stream's
/// head.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamPosition {
    /// Unacknowledged stream bytes in front of this data: from the stream's
    /// acknowledged prefix to the data's first unacknowledged byte. 0 means
    /// the data is the head of line: nothing the receiver holds after it
    /// can be delivered until it arrives.
    pub behind_head: u64,
    /// New bytes the peer's flow control (stream and connection limits,
    /// the smaller) still lets the sender send right now.
    pub credit_left: u64,
}

/// The data a head-of-line copy would carry, offered to
/// [`SendingHooks::on_flow_blocked`] (module doc, "Head-of-line copies").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeadOfLine {
    /// Stream payload bytes the copy would carry (at most one packet's).
    pub bytes: u64,
    /// Where the data sits: `behind_head` 0 is the stream's head of line;
    /// `credit_left` is 0 or nearly, since the sender is blocked.
    pub position: StreamPosition,
}

/// The kind of lost data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataKind {
    /// Reliable stream data (possibly with datagrams in the same packet):
    /// must be delivered.
    Stream,
    /// DATAGRAM frames only: may be dropped.
    Datagram,
}

/// A read-only view of the path, for decisions.
#[derive(Clone, Copy, Debug, Default)]
pub struct PathView {
    /// Smoothed RTT.
    pub srtt: Duration,
    /// Minimum RTT seen.
    pub min_rtt: Duration,
    /// RTT variation.
    pub rttvar: Duration,
    /// Latest RTT sample.
    pub latest_rtt: Duration,
    /// Congestion window, bytes.
    pub cwnd: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u64,
    /// Current pacing rate, bytes per second.
    pub pacing_rate: u64,
    /// Maximum datagram size in use, bytes.
    pub mtu: u64,
}

impl PathView {
    /// The interval of sending one packet at the current pacing rate: ART's
    /// "sending cycle" (journal §5.2).
    pub fn sending_cycle(&self) -> Duration {
        if self.pacing_rate == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos(self.mtu.saturating_mul(1_000_000_000) / self.pacing_rate)
    }

    /// Bandwidth-delay product in packets (pacing rate × min RTT / MTU), at least 1.
    pub fn bdp_packets(&self) -> u64 {
        let rtt = if self.min_rtt.is_zero() {
            self.srtt
        } else {
            self.min_rtt
        };
        let bytes = (self.pacing_rate as u128 * rtt.as_nanos()) / 1_000_000_000;
        let mtu = self.mtu.max(1) as u128;
        u64::try_from(bytes / mtu).unwrap_or(u64::MAX).max(1)
    }
}

/// Where a packet stands in loss recovery, for [`RecoveryPolicy`] callbacks.
#[derive(Clone, Copy, Debug)]
pub struct PacketFate {
    /// Packet number (1-RTT space).
    pub pn: u64,
    /// When it was sent.
    pub time_sent: Instant,
    /// Size on the wire, bytes.
    pub size: u16,
    /// The tag the policy returned from [`RecoveryPolicy::on_packet_sent`],
    /// if it gave one.
    pub tag: Option<PacketTag>,
    /// Set when the packet was a replica of lost data.
    pub replica: Option<ReplicaRef>,
    /// True when the packet carried first transmissions of stream data.
    pub carries_new_data: bool,
}

/// A policy's own label for a packet, handed back with the packet's fate
/// (ART numbers packets in send order with it).
///
/// A type rather than a bare `u64` with 0 meaning "none": "no tag" is
/// `None`, and every `u64`, 0 included, is a tag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PacketTag(pub u64);

/// Identifies a replica: which item, which round, which copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplicaRef {
    /// The lost data it carries.
    pub item: ItemId,
    /// Its round (1 = first retransmission round).
    pub round: u32,
    /// Its index within the round, from 0.
    pub index: u16,
}

/// What the transport tells [`RecoveryPolicy::on_packet_sent`].
#[derive(Clone, Copy, Debug)]
pub struct SentView {
    /// Packet number.
    pub pn: u64,
    /// Size on the wire, bytes.
    pub size: u16,
    /// Set when the packet is a replica.
    pub replica: Option<ReplicaRef>,
    /// True when it carries first transmissions of stream data.
    pub carries_new_data: bool,
}

/// The policy's answer to lost data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send one replica per entry, each at its `send_at` time.
    Retransmit {
        /// When to send each replica (earlier than now = now).
        send_at: Vec<Instant>,
        /// Replicas may be sent when the congestion window is full (still
        /// paced): ART's *opportunism* (journal §6.4). Plain QUIC: false.
        opportunistic: bool,
    },
    /// Give the data up. Only honoured for data that may be abandoned.
    Drop,
    /// Decide later, at this same instant: the round starts, nothing is
    /// queued for it, and the connection asks
    /// [`RecoveryPolicy::on_data_lost`] again (same [`LostData`]) when its
    /// driver calls [`crate::Connection::resume_round`]. For drivers that
    /// hand decisions to someone outside the transport (the Python
    /// environment of `lab::steer`); a round left deferred is never sent,
    /// so a policy that defers needs a driver that resumes.
    Defer,
}

impl Decision {
    /// One replica now, subject to congestion control: what QUIC does.
    pub fn single(now: Instant) -> Decision {
        Decision::Retransmit {
            send_at: vec![now],
            opportunistic: false,
        }
    }
}

/// What every [`RecoveryPolicy`] callback gets besides its own arguments:
/// the time, the path, the connection's seeded RNG and a publisher for the
/// policy's own trace events.
///
/// One context rather than a parameter list per callback, so that a policy
/// can draw randomness or trace a decision wherever it makes one (the
/// seam's promise), and so that adding to what policies may see changes one
/// struct, not every policy.
pub struct PolicyContext<'a> {
    /// The time of the event (the caller's clock: virtual in the simulator).
    pub now: Instant,
    /// The path as it stands.
    pub path: &'a PathView,
    /// The connection's RNG: seeded, so a simulated run is repeatable.
    pub rng: &'a mut dyn RngCore,
    events: &'a mut PolicyEvents,
}

impl<'a> PolicyContext<'a> {
    /// A context over `events` (the connection keeps one [`PolicyEvents`]
    /// and hands its content to its subscribers after each callback).
    pub fn new(
        now: Instant,
        path: &'a PathView,
        rng: &'a mut dyn RngCore,
        events: &'a mut PolicyEvents,
    ) -> Self {
        PolicyContext {
            now,
            path,
            rng,
            events,
        }
    }

    /// Whether anyone listens to [`PolicyContext::publish`]: a policy can
    /// skip building trace data when nobody reads it.
    pub fn tracing(&self) -> bool {
        self.events.listening
    }

    /// Publish a named event of the policy with named numbers (qlog event
    /// `artq:policy_event`, `{"name": name, ...fields}`). Dropped when
    /// nobody listens; at most [`MAX_EVENTS_PER_CALLBACK`] per callback.
    pub fn publish(&mut self, name: &'static str, fields: &[(&'static str, f64)]) {
        self.events.push(name, fields);
    }
}

impl fmt::Debug for PolicyContext<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PolicyContext")
            .field("now", &self.now)
            .field("path", self.path)
            .field("tracing", &self.events.listening)
            .finish_non_exhaustive()
    }
}

/// Bound on the events one policy callback may publish: a policy bug must
/// not grow the trace without limit.
pub const MAX_EVENTS_PER_CALLBACK: usize = 16;

/// One event a policy published ([`PolicyContext::publish`]).
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyEvent {
    /// What happened, in the policy's words (`"level_changed"`).
    pub name: &'static str,
    /// Its numbers.
    pub fields: PolicyState,
}

/// The events published during one callback, for the connection to hand to
/// its subscribers; bounded by [`MAX_EVENTS_PER_CALLBACK`].
#[derive(Debug, Default)]
pub struct PolicyEvents {
    listening: bool,
    pending: Vec<PolicyEvent>,
    /// Events refused because a callback published too many.
    dropped: u64,
}

impl PolicyEvents {
    /// An empty buffer; `listening` says whether events are wanted at all.
    pub fn new(listening: bool) -> Self {
        PolicyEvents {
            listening,
            ..Default::default()
        }
    }

    /// Whether events are wanted.
    pub fn set_listening(&mut self, listening: bool) {
        self.listening = listening;
    }

    fn push(&mut self, name: &'static str, fields: &[(&'static str, f64)]) {
        if !self.listening {
            return;
        }
        if self.pending.len() >= MAX_EVENTS_PER_CALLBACK {
            self.dropped += 1;
            return;
        }
        let mut state = PolicyState::default();
        for &(k, v) in fields {
            state.set(k, v);
        }
        self.pending.push(PolicyEvent {
            name,
            fields: state,
        });
    }

    /// Take the events published since the last call.
    pub fn drain(&mut self) -> std::vec::Drain<'_, PolicyEvent> {
        self.pending.drain(..)
    }

    /// Whether an event waits.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// Events refused for exceeding [`MAX_EVENTS_PER_CALLBACK`].
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

/// Run `f` with a context that publishes nowhere: for driving a policy
/// outside a connection (unit tests, benchmarks, offline training).
pub fn with_context<R>(
    now: Instant,
    path: &PathView,
    rng: &mut dyn RngCore,
    f: impl FnOnce(&mut PolicyContext<'_>) -> R,
) -> R {
    let mut events = PolicyEvents::default();
    let mut cx = PolicyContext::new(now, path, rng, &mut events);
    f(&mut cx)
}

/// How messages travel under a scheme ([`RecoveryPolicy::message_carriage`]).
///
/// Exists so that a message application (RCP's workload) asks the scheme
/// rather than testing its name: the baselines that decide per message
/// take datagrams, a reliable in-order baseline (rcp.md's TCP) a stream.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Carriage {
    /// One DATAGRAM frame per message (RFC 9221): the policy may abandon
    /// a lost one.
    #[default]
    Datagram,
    /// Back to back on one reliable stream: every message is delivered, in
    /// order.
    Stream,
}

/// A sender-side loss recovery policy. One instance per connection.
///
/// Calling protocol: `on_packet_sent` for every ack-eliciting 1-RTT packet;
/// later exactly one of `on_packet_acked` / `on_packet_lost` for it, except
/// that a packet declared lost and acknowledged later gets both, in that
/// order and with the same [`PacketFate`] (a spurious loss: the policy may
/// correct what it recorded). The connection remembers a lost packet for
/// four PTOs after its loss (RFC 9002 §6.1); an acknowledgement later than
/// that is not reported. `on_data_lost` when a round of an item ends with
/// its data still unacknowledged. Every callback gets a [`PolicyContext`].
pub trait RecoveryPolicy: Send + fmt::Debug {
    /// The scheme's name as on the command line (`quic`, `art`, `fixed:3`).
    fn name(&self) -> String;

    /// How an application that sends discrete messages should carry them
    /// for this scheme: a declaration, read once per connection
    /// ([`Connection::message_carriage`](crate::Connection::message_carriage)),
    /// not a hook. Default: one DATAGRAM frame per message, whose loss
    /// the policy decides on.
    fn message_carriage(&self) -> Carriage {
        Carriage::Datagram
    }

    /// Decide how to retransmit lost data.
    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision;

    /// A packet was sent; the returned tag, if any, comes back in its
    /// [`PacketFate`].
    fn on_packet_sent(
        &mut self,
        _cx: &mut PolicyContext<'_>,
        _sent: &SentView,
    ) -> Option<PacketTag> {
        None
    }

    /// A packet was acknowledged.
    fn on_packet_acked(&mut self, _cx: &mut PolicyContext<'_>, _fate: &PacketFate) {}

    /// A packet was declared lost.
    fn on_packet_lost(&mut self, _cx: &mut PolicyContext<'_>, _fate: &PacketFate) {}

    /// The peer moved to another address (or back, after a failed path
    /// validation; RFC 9000 §9): what the policy learned about the old
    /// path (loss bursts, say) no longer describes the one its packets now
    /// take. `cx.path` is the new path's (RTT and congestion state reset
    /// when the IP address changed). The default keeps everything.
    fn on_path_change(&mut self, _cx: &mut PolicyContext<'_>) {}

    /// The policy's hooks for sending beyond its decisions (reinjection,
    /// head-of-line copies; module doc), when it has them: a policy that
    /// only decides leaves the default, `None`, and is never offered those
    /// moments.
    fn sending_hooks(&mut self) -> Option<&mut dyn SendingHooks> {
        None
    }

    /// Write what the policy wants traced about its own state (ART's
    /// redundancy levels, say) into `out`, as named numbers. The connection
    /// asks after each ACK frame and loss-detection pass, only when a
    /// subscriber listens, and publishes the state to subscribers (qlog
    /// event `artq:policy_state`) when it changed: a time series of the
    /// policy's variables, where [`PolicyContext::publish`] is for discrete
    /// events. The default reports nothing.
    fn report_state(&self, _out: &mut PolicyState) {}
}

/// The moments the transport offers a policy to send something its
/// decisions did not ask for (module doc, "Reinjection and off-mode" and
/// "Head-of-line copies"), and the end of an item's recovery, which tells
/// a reinjecting policy to forget the item. Reached through
/// [`RecoveryPolicy::sending_hooks`]; every method has a default that
/// sends nothing, so a policy implements the ones it uses.
///
/// Exists as its own trait so that the seam a decision-only scheme
/// implements stays small: `name` and `on_data_lost`, and the fate
/// callbacks it wants.
pub trait SendingHooks {
    /// The sender is application-limited (off-mode, see the module doc):
    /// return an item to reinject now, or `None`. Asked again each time the
    /// sender finds itself idle, so one item per call is enough.
    fn on_app_limited(&mut self, _cx: &mut PolicyContext<'_>) -> Option<ItemId> {
        None
    }

    /// The sender is blocked by flow control with a packet's room free
    /// (module doc, "Head-of-line copies"): return `true` to send a copy of
    /// `head` now. Asked again for the next stretch each time the sender
    /// finds itself blocked and idle. The default: never.
    fn on_flow_blocked(&mut self, _cx: &mut PolicyContext<'_>, _head: &HeadOfLine) -> bool {
        false
    }

    /// When the policy wants [`SendingHooks::on_reinjection_timer`]
    /// called, whatever the sender is doing; `None` (the default): never.
    fn next_reinjection(&self) -> Option<Instant> {
        None
    }

    /// The time of [`SendingHooks::next_reinjection`] has come and a
    /// packet may go: return an item to reinject now, or `None`.
    fn on_reinjection_timer(&mut self, _cx: &mut PolicyContext<'_>) -> Option<ItemId> {
        None
    }

    /// An item left recovery (delivered or abandoned), with the record the
    /// statistics get (the round that delivered it, when that packet was
    /// sent): the transport refuses to reinject it from now on.
    fn on_recovery_ended(&mut self, _cx: &mut PolicyContext<'_>, _record: &RecoveryRecord) {}

    /// The transport did not queue the reinjection of `item` that
    /// [`SendingHooks::on_app_limited`] or
    /// [`SendingHooks::on_reinjection_timer`] just returned: the item has
    /// left recovery, its round waits for its first replica or the policy's
    /// resumption, a replica or reinjection of it still waits to be sent,
    /// or its round has the most replicas one may have. Nothing was sent:
    /// a policy that counts its reinjections takes this one back.
    fn on_reinjection_refused(&mut self, _cx: &mut PolicyContext<'_>, _item: ItemId) {}
}

/// A policy's state as named numbers, for traces
/// ([`RecoveryPolicy::report_state`]).
///
/// Exists so that a scheme's internal variables (ART's R_n and replica-loss
/// share) can be watched over time in qvis without the transport knowing
/// what they mean.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PolicyState {
    fields: Vec<(&'static str, f64)>,
}

impl PolicyState {
    /// Add one named value.
    pub fn set(&mut self, name: &'static str, value: f64) {
        self.fields.push((name, value));
    }

    /// The values, in the order they were set.
    pub fn fields(&self) -> &[(&'static str, f64)] {
        &self.fields
    }

    /// Whether nothing was reported.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }
}

/// Builds a policy per connection (set in the transport config).
///
/// Every policy that is `Clone` is its own factory (the blanket impl
/// below): each connection gets a clone of the configured value, so a
/// scheme writes no factory of its own. A hand-written factory is for
/// policies built some other way (a wrapper around another factory's
/// policies, say).
pub trait PolicyFactory: Send + Sync + fmt::Debug {
    /// A fresh policy for a new connection.
    fn build(&self) -> Box<dyn RecoveryPolicy>;
    /// The scheme's name, as [`RecoveryPolicy::name`].
    fn name(&self) -> String;
}

impl<P> PolicyFactory for P
where
    P: RecoveryPolicy + Clone + Sync + 'static,
{
    fn build(&self) -> Box<dyn RecoveryPolicy> {
        Box::new(self.clone())
    }

    fn name(&self) -> String {
        RecoveryPolicy::name(self)
    }
}

/// Plain QUIC (RFC 9002 / RFC 9221): one retransmission per lost stream
/// packet, subject to congestion control; lost DATAGRAM frames are not
/// retransmitted. The default policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct QuicPolicy;

impl RecoveryPolicy for QuicPolicy {
    fn name(&self) -> String {
        "quic".into()
    }

    fn on_data_lost(&mut self, cx: &mut PolicyContext<'_>, lost: &LostData) -> Decision {
        match lost.kind {
            DataKind::Stream => Decision::single(cx.now),
            DataKind::Datagram => Decision::Drop,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_view_cycle_and_bdp() {
        let p = PathView {
            srtt: Duration::from_millis(30),
            min_rtt: Duration::from_millis(30),
            pacing_rate: 12_500_000, // 100 Mbit/s
            mtu: 1250,
            ..Default::default()
        };
        assert_eq!(p.sending_cycle(), Duration::from_micros(100));
        assert_eq!(p.bdp_packets(), 300);
        assert_eq!(PathView::default().sending_cycle(), Duration::ZERO);
        assert_eq!(PathView::default().bdp_packets(), 1);
    }
}
