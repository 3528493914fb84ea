//! Packet number spaces (RFC 9000 §12.3) and what each remembers: packets
//! sent and not yet acknowledged or lost, packet numbers received (for ACKs),
//! and the CRYPTO stream of its encryption level.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Range;

use wire::time::{Duration, Instant};

use crate::congestion::PacketRateState;
use crate::policy::{PacketFate, ReplicaRef};
use crate::range_set::RangeSet;
use crate::streams::{ControlFrame, StreamChunk};

/// The three packet number spaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SpaceId {
    /// Initial packets.
    Initial = 0,
    /// Handshake packets.
    Handshake = 1,
    /// 0-RTT and 1-RTT packets.
    Data = 2,
}

impl SpaceId {
    /// All spaces, in sending order.
    pub const ALL: [SpaceId; 3] = [SpaceId::Initial, SpaceId::Handshake, SpaceId::Data];

    /// Name used in qlog.
    pub fn name(self) -> &'static str {
        match self {
            SpaceId::Initial => "initial",
            SpaceId::Handshake => "handshake",
            SpaceId::Data => "application_data",
        }
    }
}

/// Retransmittable content of a sent packet other than stream data, to be
/// re-queued when the packet is lost (what to resend, not which packet).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Retransmit {
    /// CRYPTO bytes `range` of this space's crypto stream.
    Crypto(Range<u64>),
    /// A stream-layer control frame (MAX_DATA, RESET_STREAM, ...).
    Control(ControlFrame),
    /// HANDSHAKE_DONE.
    HandshakeDone,
    /// NEW_CONNECTION_ID with this sequence number.
    NewConnectionId(u64),
    /// RETIRE_CONNECTION_ID with this sequence number.
    RetireConnectionId(u64),
    /// NEW_TOKEN (the server's one token for this client).
    NewToken,
    /// PATH_CHALLENGE with this data (sent again if the path is still
    /// being validated with it).
    PathChallenge([u8; 8]),
}

/// What we remember about a packet in flight. The default, an empty
/// record, is what a packet being sent leaves behind when its record moves
/// into the sent map (`Connection::finish_packet`).
#[derive(Debug, Default)]
pub(crate) struct SentPacket {
    pub time_sent: Instant,
    pub size: u16,
    pub ack_eliciting: bool,
    /// Counts toward bytes in flight (ack-eliciting or padding).
    pub in_flight: bool,
    /// Largest packet number acknowledged by an ACK frame in this packet.
    pub largest_acked: Option<u64>,
    pub stream_chunks: Vec<StreamChunk>,
    /// DATAGRAM frames carried (ids into the connection's datagram store).
    pub datagrams: Vec<u64>,
    pub retransmits: Vec<Retransmit>,
    pub rate: PacketRateState,
    /// Set when this packet carried a replica of lost data.
    pub replica: Option<ReplicaRef>,
    /// The replica was a reinjection (`Engine::reinject`, AutoRec): it
    /// holds no round, and its loss is a congestion signal like any lost
    /// packet's (`Recovery::on_data_packet_lost`).
    pub reinjection: bool,
    /// The packet carries first transmissions of stream data.
    pub new_data: bool,
    /// The packet carries a copy of data sent before any loss of it was
    /// declared: a head-of-line copy while flow-control blocked
    /// (policy.rs, "Head-of-line copies") or a probe's copy of the oldest
    /// data in flight (`Recovery::write_probe_copy`). Its loss starts no
    /// recovery: the data's own packets do.
    pub early_copy: bool,
    /// The recovery policy's label for it.
    pub tag: Option<crate::policy::PacketTag>,
    /// Sent marked ECT(0).
    pub ecn_marked: bool,
}

impl SentPacket {
    /// What the recovery policy is told about this packet, numbered `pn`.
    pub fn fate(&self, pn: u64) -> PacketFate {
        PacketFate {
            pn,
            time_sent: self.time_sent,
            size: self.size,
            tag: self.tag,
            replica: self.replica,
            carries_new_data: self.new_data,
        }
    }
}

/// Outgoing CRYPTO stream of one encryption level.
#[derive(Debug, Default)]
pub(crate) struct CryptoSend {
    /// Every byte ever queued (handshake messages are small).
    data: Vec<u8>,
    /// Offset of the first byte never sent.
    unsent: u64,
    /// Ranges declared lost, to send again first.
    retransmit: RangeSet,
    acked: RangeSet,
}

impl CryptoSend {
    pub fn push(&mut self, bytes: &[u8]) {
        self.data.extend_from_slice(bytes);
    }

    pub fn has_pending(&self) -> bool {
        !self.retransmit.is_empty() || self.unsent < self.data.len() as u64
    }

    /// Next range of at most `max` bytes to send: retransmissions first.
    pub fn poll(&mut self, max: usize) -> Option<Range<u64>> {
        if max == 0 {
            return None;
        }
        if let Some(r) = self.retransmit.pop_min() {
            let end = r.end.min(r.start + max as u64);
            if end < r.end {
                self.retransmit.insert(end..r.end);
            }
            return Some(r.start..end);
        }
        let len = self.data.len() as u64;
        if self.unsent < len {
            let start = self.unsent;
            let end = len.min(start + max as u64);
            self.unsent = end;
            return Some(start..end);
        }
        None
    }

    pub fn bytes(&self, r: &Range<u64>) -> &[u8] {
        let start = (r.start as usize).min(self.data.len());
        let end = (r.end as usize).clamp(start, self.data.len());
        &self.data[start..end]
    }

    pub fn on_lost(&mut self, r: Range<u64>) {
        for part in self.acked.subtract_from(r).collect::<Vec<_>>() {
            self.retransmit.insert(part);
        }
    }

    pub fn on_acked(&mut self, r: Range<u64>) {
        self.retransmit.remove(r.clone());
        self.acked.insert(r);
    }

    /// Some byte was sent and is not acknowledged yet.
    pub fn has_unacked(&self) -> bool {
        self.acked.subtract_from(0..self.unsent).next().is_some()
    }

    /// Queue everything sent but not acknowledged again (PTO probes during
    /// the handshake).
    pub fn requeue_unacked(&mut self) {
        if self.unsent == 0 {
            return;
        }
        for part in self.acked.subtract_from(0..self.unsent).collect::<Vec<_>>() {
            self.retransmit.insert(part);
        }
    }
}

/// Incoming CRYPTO stream of one encryption level: reassembles out-of-order
/// CRYPTO frames and hands contiguous bytes to TLS.
#[derive(Debug, Default)]
pub(crate) struct CryptoRecv {
    /// Offset up to which bytes were delivered to TLS.
    delivered: u64,
    pending: BTreeMap<u64, Vec<u8>>,
    buffered: usize,
}

/// How much out-of-order CRYPTO data we buffer before closing with
/// CRYPTO_BUFFER_EXCEEDED (RFC 9000 §7.5 allows us to choose; ≥ 4096).
pub(crate) const MAX_CRYPTO_BUFFER: usize = 64 * 1024;

impl CryptoRecv {
    /// Store a frame; returns false if the buffer limit is exceeded.
    pub fn insert(&mut self, offset: u64, data: &[u8]) -> bool {
        let end = offset.saturating_add(data.len() as u64);
        if end <= self.delivered {
            return true; // duplicate
        }
        let (offset, data) = if offset < self.delivered {
            let skip = (self.delivered - offset) as usize;
            (self.delivered, &data[skip.min(data.len())..])
        } else {
            (offset, data)
        };
        if end - self.delivered > MAX_CRYPTO_BUFFER as u64 {
            return false;
        }
        match self.pending.get(&offset) {
            Some(existing) if existing.len() >= data.len() => return true,
            _ => {}
        }
        if let Some(old) = self.pending.insert(offset, data.to_vec()) {
            self.buffered -= old.len();
        }
        self.buffered += data.len();
        self.buffered <= MAX_CRYPTO_BUFFER
    }

    /// Bytes delivered to TLS so far: whether a packet advanced the
    /// handshake.
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Pop the next contiguous bytes, if any.
    pub fn pop(&mut self) -> Option<Vec<u8>> {
        loop {
            let (&off, _) = self.pending.iter().next()?;
            let data = self.pending.remove(&off)?;
            self.buffered -= data.len();
            let end = off + data.len() as u64;
            if off > self.delivered {
                // A gap: put it back.
                self.buffered += data.len();
                self.pending.insert(off, data);
                return None;
            }
            if end <= self.delivered {
                continue;
            }
            let skip = (self.delivered - off) as usize;
            self.delivered = end;
            return Some(data[skip..].to_vec());
        }
    }
}

/// Most packets one space keeps for later. RFC 9001 §5.7 lets an endpoint
/// buffer or drop packets it may not process yet; buffering spares the peer
/// a retransmission timeout. An honest peer sends at most about one initial
/// congestion window before it hears back (RFC 9002 §7.2: ten full-size
/// packets, 14,720 bytes), so twice that in bytes, and a packet count for
/// small packets, hold all of it; what exceeds the bound is dropped, and
/// the peer retransmits it like any lost packet.
pub(crate) const MAX_DEFERRED_PACKETS: usize = 32;
/// Most bytes of packets one space keeps for later ([`MAX_DEFERRED_PACKETS`]).
pub(crate) const MAX_DEFERRED_BYTES: usize = 2 * 14_720;

/// Packets that arrived before they could be read: before their keys (a
/// Handshake or 1-RTT packet overtaking the packet whose processing yields
/// them), or, at a server, 1-RTT packets before the handshake is complete
/// (RFC 9001 §5.7: a server must not process them before it has the
/// client's Finished). Kept as received, still protected, and read in order
/// once possible; bounded by [`MAX_DEFERRED_PACKETS`] and
/// [`MAX_DEFERRED_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct DeferredPackets {
    /// (protected packet, offset of its packet number).
    packets: VecDeque<(Vec<u8>, usize)>,
    bytes: usize,
}

impl DeferredPackets {
    /// Keep a copy of `packet`; false (and nothing kept) when full.
    pub fn push(&mut self, packet: &[u8], pn_offset: usize) -> bool {
        if self.packets.len() >= MAX_DEFERRED_PACKETS
            || self.bytes + packet.len() > MAX_DEFERRED_BYTES
        {
            return false;
        }
        self.bytes += packet.len();
        self.packets.push_back((packet.to_vec(), pn_offset));
        true
    }

    /// Nothing kept.
    pub fn is_empty(&self) -> bool {
        self.packets.is_empty()
    }

    /// The packets kept and their packet-number offsets, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &(Vec<u8>, usize)> {
        self.packets.iter()
    }

    /// Everything kept, oldest first; empties the buffer.
    pub fn take(&mut self) -> VecDeque<(Vec<u8>, usize)> {
        self.bytes = 0;
        core::mem::take(&mut self.packets)
    }
}

/// The packets of one space sent and not yet acknowledged or lost, by
/// packet number. Packet numbers only grow, so they index a ring: sending
/// appends, an acknowledgement or a loss empties a slot, and the empty
/// slots at the front are dropped. A tree (what this replaced) paid a node
/// split or merge and a memory move per packet sent and per packet
/// acknowledged: 6% of a busy server's time.
#[derive(Debug, Default)]
pub(crate) struct SentPackets {
    /// `slots[i]` is packet number `base + i`; the first slot, if any, is
    /// occupied.
    slots: VecDeque<Option<SentPacket>>,
    base: u64,
}

impl SentPackets {
    /// Records packet `pn`. Packet numbers are sent in increasing order; a
    /// number below the first kept, or one already kept, is placed all the
    /// same (replacing), so no order of calls corrupts the ring.
    pub fn insert(&mut self, pn: u64, packet: SentPacket) {
        if self.slots.is_empty() {
            self.base = pn;
        }
        if pn < self.base {
            for _ in pn..self.base {
                self.slots.push_front(None);
            }
            self.base = pn;
        }
        let Ok(i) = usize::try_from(pn - self.base) else {
            return;
        };
        while self.slots.len() <= i {
            self.slots.push_back(None);
        }
        if let Some(slot) = self.slots.get_mut(i) {
            *slot = Some(packet);
        }
    }

    /// Forgets packet `pn` and returns it, if it was kept.
    pub fn remove(&mut self, pn: u64) -> Option<SentPacket> {
        let i = usize::try_from(pn.checked_sub(self.base)?).ok()?;
        let p = self.slots.get_mut(i)?.take()?;
        self.trim_front();
        Some(p)
    }

    /// Forgets and returns the kept packets numbered in `range`, in order.
    pub fn remove_range(
        &mut self,
        range: std::ops::RangeInclusive<u64>,
        out: &mut Vec<(u64, SentPacket)>,
    ) {
        let (lo, hi) = (*range.start().max(&self.base), *range.end());
        if hi < lo {
            return;
        }
        let (Ok(from), Ok(to)) = (
            usize::try_from(lo - self.base),
            usize::try_from(hi - self.base),
        ) else {
            return;
        };
        let to = to.min(self.slots.len().saturating_sub(1));
        for i in from..=to {
            if let Some(p) = self.slots.get_mut(i).and_then(Option::take) {
                out.push((self.base + i as u64, p));
            }
        }
        self.trim_front();
    }

    fn trim_front(&mut self) {
        while matches!(self.slots.front(), Some(None)) {
            self.slots.pop_front();
            self.base += 1;
        }
    }

    /// The smallest packet number kept.
    pub fn first_pn(&self) -> Option<u64> {
        (!self.slots.is_empty()).then_some(self.base)
    }

    /// The packets kept, with their numbers, in increasing order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SentPacket)> + '_ {
        let base = self.base;
        self.slots
            .iter()
            .enumerate()
            .filter_map(move |(i, p)| p.as_ref().map(|p| (base + i as u64, p)))
    }

    /// The packets kept, in increasing packet-number order.
    pub fn values(&self) -> impl Iterator<Item = &SentPacket> + '_ {
        self.slots.iter().flatten()
    }
}

impl IntoIterator for SentPackets {
    type Item = (u64, SentPacket);
    type IntoIter = Box<dyn Iterator<Item = (u64, SentPacket)>>;

    fn into_iter(self) -> Self::IntoIter {
        let base = self.base;
        Box::new(
            self.slots
                .into_iter()
                .enumerate()
                .filter_map(move |(i, p)| p.map(|p| (base + i as u64, p))),
        )
    }
}

/// State of one packet number space.
#[derive(Debug, Default)]
pub(crate) struct PacketSpace {
    pub next_pn: u64,
    /// Largest of our packet numbers the peer acknowledged.
    pub largest_acked: Option<u64>,
    pub sent: SentPackets,
    /// Tracked packet numbers the peer acknowledged, kept from the oldest
    /// packet still in flight on: what persistent-congestion detection
    /// needs to apply the contiguity rule (RFC 9002 §7.6.2).
    pub acked: RangeSet,
    pub ack_eliciting_in_flight: u64,
    pub time_of_last_ack_eliciting: Option<Instant>,
    /// Earliest time a packet may be declared lost by the time threshold.
    pub loss_time: Option<Instant>,
    /// Packet numbers received (duplicates detection and ACK ranges).
    pub received: RangeSet,
    /// Packet numbers below this are treated as duplicates.
    pub received_floor: u64,
    pub largest_received: Option<(u64, Instant)>,
    /// An ACK frame should be sent.
    pub ack_pending: bool,
    /// Ack-eliciting packets received since our last ACK.
    pub unacked_eliciting: u32,
    /// When a delayed ACK must go out.
    pub ack_deadline: Option<Instant>,
    /// PTO probes still to send in this space.
    pub probes: u8,
    /// The next probe carries a copy of the oldest stream data in flight
    /// (1-RTT only: the probe timeout found no new data to send).
    pub probe_copy: bool,
    /// ECN codepoints of the packets received (what our ACKs report).
    pub ecn_received: wire::frame::EcnCounts,
    /// The peer's ECN counts as last validated (RFC 9000 §13.4.2).
    pub ecn_reported: wire::frame::EcnCounts,
    /// A PING is wanted (probe with nothing else to send).
    pub ping_pending: bool,
    pub crypto_send: CryptoSend,
    pub crypto_recv: CryptoRecv,
    /// Packets of this space received before they could be read.
    pub deferred: DeferredPackets,
}

impl PacketSpace {
    /// Record a received packet number; false if it is a duplicate.
    pub fn on_packet_received(&mut self, pn: u64, now: Instant) -> bool {
        if pn < self.received_floor || self.received.contains(pn) {
            return false;
        }
        self.received.insert_one(pn);
        // Keep ACK state bounded: remember at most 64 ranges (the oldest are
        // the least useful to the peer, RFC 9000 §13.2.3).
        while self.received.len() > 64 {
            if let Some(r) = self.received.pop_min() {
                self.received_floor = self.received_floor.max(r.end);
            }
        }
        if self.largest_received.is_none_or(|(l, _)| pn > l) {
            self.largest_received = Some((pn, now));
        }
        true
    }

    /// ACK delay to report, encoded with `exponent`.
    pub fn ack_delay(&self, now: Instant, exponent: u8) -> u64 {
        let d = self
            .largest_received
            .map_or(Duration::ZERO, |(_, t)| now.saturating_duration_since(t));
        (d.as_micros() as u64) >> exponent
    }

    /// The peer has seen our ACK covering up to `largest` (RFC 9000
    /// §13.2.4): stop reporting those packet numbers. Anything at or below
    /// it arriving later is treated as a duplicate.
    pub fn forget_received_up_to(&mut self, largest: u64) {
        let floor = largest.saturating_add(1);
        if floor > self.received_floor {
            self.received.remove(0..floor);
            self.received_floor = floor;
        }
    }

    pub fn has_ack_eliciting_in_flight(&self) -> bool {
        self.ack_eliciting_in_flight > 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(size: u16) -> SentPacket {
        SentPacket {
            time_sent: Instant::ZERO,
            size,
            ack_eliciting: true,
            in_flight: true,
            largest_acked: None,
            stream_chunks: Vec::new(),
            datagrams: Vec::new(),
            retransmits: Vec::new(),
            rate: PacketRateState {
                delivered: 0,
                delivered_time: Instant::ZERO,
                first_sent_time: Instant::ZERO,
                is_app_limited: false,
            },
            replica: None,
            reinjection: false,
            new_data: false,
            early_copy: false,
            tag: None,
            ecn_marked: false,
        }
    }

    fn pns(s: &SentPackets) -> Vec<u64> {
        s.iter().map(|(pn, _)| pn).collect()
    }

    #[test]
    fn sent_packets_behave_as_an_ordered_map() {
        // Against a BTreeMap, through sends, single removals (losses) and
        // range removals (ACK ranges), including numbers never sent.
        let mut ring = SentPackets::default();
        let mut map: BTreeMap<u64, u16> = BTreeMap::new();
        let mut x = 99u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut pn = 5u64;
        for _ in 0..3000 {
            match next(4) {
                0 | 1 => {
                    ring.insert(pn, packet((pn % 1000) as u16));
                    map.insert(pn, (pn % 1000) as u16);
                    pn += 1 + next(3); // gaps, as skipped numbers leave
                }
                2 => {
                    let victim = next(pn + 2);
                    assert_eq!(ring.remove(victim).map(|p| p.size), map.remove(&victim));
                }
                _ => {
                    let lo = next(pn + 2);
                    let hi = lo + next(40);
                    let mut out = Vec::new();
                    ring.remove_range(lo..=hi, &mut out);
                    let want: Vec<u64> = map.range(lo..=hi).map(|(k, _)| *k).collect();
                    for k in &want {
                        map.remove(k);
                    }
                    assert_eq!(out.iter().map(|(k, _)| *k).collect::<Vec<_>>(), want);
                }
            }
            assert_eq!(pns(&ring), map.keys().copied().collect::<Vec<_>>());
            assert_eq!(ring.first_pn(), map.keys().next().copied());
        }
        let all: Vec<u64> = ring.into_iter().map(|(k, _)| k).collect();
        assert_eq!(all, map.keys().copied().collect::<Vec<_>>());
    }

    #[test]
    fn an_emptied_ring_restarts_at_the_next_number() {
        let mut ring = SentPackets::default();
        ring.insert(10, packet(1));
        assert!(ring.remove(10).is_some());
        assert_eq!(ring.first_pn(), None);
        ring.insert(20, packet(2));
        assert_eq!(pns(&ring), vec![20]);
        // Out of order still lands in order.
        ring.insert(15, packet(3));
        assert_eq!(pns(&ring), vec![15, 20]);
    }
}
