//! Path MTU discovery: DPLPMTUD (RFC 8899) as QUIC uses it (RFC 9000
//! §14.3). [`PathMtu`] owns the size of the datagrams a connection sends.
//!
//! Every connection starts at `TransportConfig::max_datagram_size` (1350 by
//! default, the *base*: assumed to pass every path). With discovery on
//! (`TransportConfig::mtu_discovery_ceiling`), once the handshake is
//! confirmed the sender probes for larger sizes up to the ceiling, lowered
//! to the peer's max_udp_payload_size:
//!
//! - A probe is one 1-RTT packet of the size under test: a PING and PADDING,
//!   no data, so losing it costs nothing to recover. It is ack-eliciting and
//!   counts in flight (it takes room in the window like any packet), but its
//!   loss is not a congestion signal (RFC 9000 §14.4), is not counted in
//!   `lost_packets`, and is never shown to the recovery policy: a probe that
//!   is too large is lost by design, and ART's loss statistics must not
//!   count it.
//! - One probe is in flight at a time. An acknowledged probe raises the
//!   size at once. [`MAX_PROBES`] probes of one size lost make that size
//!   too large (RFC 8899 §5.1.2's MAX_PROBES).
//! - The search tries the ceiling first (on most paths the whole of it
//!   passes, and one probe settles the matter), then halves the interval
//!   still in question, and stops when it spans fewer than [`SEARCH_STEP`]
//!   bytes. A search that stopped below the ceiling runs again after
//!   [`RAISE_INTERVAL`] (RFC 8899's PMTU_RAISE_TIMER, 600 s).
//! - Black holes (RFC 8899 §4.3): a path whose MTU shrinks after the search
//!   loses every large packet while small ones pass. While a probe timeout
//!   is pending, the sender caps its packets at the base, so the PTO's
//!   probes get through and their acknowledgements declare the large
//!   packets lost. [`BLACK_HOLE_EVENTS`] loss events in a row that each lose
//!   a large packet sent after the last acknowledged large one, with no
//!   large packet acknowledged in between, drop the size back to the base
//!   and start a new search below the size that failed. Random loss does
//!   not look like this: a later large packet is acknowledged before the
//!   loss is even detected; nor does an outage, after which large packets
//!   are acknowledged again.
//! - A new path (the peer's address changed) starts over from the base, as
//!   congestion control does (RFC 9000 §9.4).
//!
//! Sizes are UDP payloads. The UDP drivers turn discovery on with a ceiling
//! of 1452 bytes, the largest payload of a 1500-byte Ethernet MTU under
//! IPv6 (IPv4's is 1472) and where quinn stops by default; their sockets
//! forbid fragmentation (quinn-udp sets IP_PMTUDISC_PROBE), so a probe
//! larger than the path is dropped rather than fragmented. The simulator
//! leaves it off: its links carry any size, and its results do not depend
//! on it.

use wire::time::{Duration, Instant};

use super::spaces::SentPacket;
use super::{Connection, SpaceId};

/// Probes of one size lost before the size counts as too large (RFC 8899
/// §5.1.2, MAX_PROBES).
pub(super) const MAX_PROBES: u8 = 3;

/// The search stops once the sizes still in question span fewer bytes:
/// 20 bytes is 1.5% of a 1350-byte datagram, less than one more probe's
/// round trip is worth.
pub(super) const SEARCH_STEP: u16 = 20;

/// After a search that stopped below the ceiling, search again after this
/// long (RFC 8899 §5.1.1, PMTU_RAISE_TIMER).
pub(super) const RAISE_INTERVAL: Duration = Duration::from_secs(600);

/// Loss events of large packets in a row, with no large packet acknowledged
/// between them, that make the path a black hole for the current size.
pub(super) const BLACK_HOLE_EVENTS: u8 = 3;

/// The smallest UDP payload every QUIC path carries (RFC 9000 §14).
const QUIC_MIN: u16 = 1200;

/// Where the search stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Search {
    /// Search at the first chance (once the handshake is confirmed).
    Start,
    /// Not searching; search again at this instant, if ever.
    Done { again_at: Option<Instant> },
    /// Trying `size`; `lost` probes of it were lost so far.
    Trying { size: u16, lost: u8 },
}

/// A probe in flight.
#[derive(Clone, Copy, Debug)]
struct Probe {
    pn: u64,
    size: u16,
    /// The search it belongs to: one that started over since (a new path,
    /// a black hole) ignores its fate.
    epoch: u32,
}

/// The connection's datagram size and its discovery.
#[derive(Debug)]
pub(super) struct PathMtu {
    /// The largest datagram we send: the base, or a size a probe validated.
    current: u16,
    /// What every path is assumed to carry: where discovery starts and
    /// where a black hole sends it back.
    base: u16,
    /// The largest size to search for; `None` when discovery is off.
    ceiling: Option<u16>,
    /// The largest size not known to fail on this path.
    high: u16,
    search: Search,
    probe: Option<Probe>,
    epoch: u32,
    /// The largest packet number of an acknowledged packet above the base.
    largest_large_acked: Option<u64>,
    /// Black-hole evidence: loss events of large packets in a row.
    suspect_events: u8,
}

impl PathMtu {
    /// Sending `base`-byte datagrams (at least 1200), probing up to
    /// `ceiling` when it is above the base.
    pub(super) fn new(base: u16, ceiling: Option<u16>) -> Self {
        let base = base.max(QUIC_MIN);
        let ceiling = ceiling.filter(|&c| c > base);
        PathMtu {
            current: base,
            base,
            ceiling,
            high: ceiling.unwrap_or(base),
            search: match ceiling {
                Some(_) => Search::Start,
                None => Search::Done { again_at: None },
            },
            probe: None,
            epoch: 0,
            largest_large_acked: None,
            suspect_events: 0,
        }
    }

    /// The largest datagram to send now.
    pub(super) fn current(&self) -> u16 {
        self.current
    }

    /// The size assumed to pass every path: what packets are capped at
    /// while a probe timeout is pending (see the module doc).
    pub(super) fn base(&self) -> u16 {
        self.base
    }

    /// The peer's max_udp_payload_size transport parameter bounds every
    /// size (RFC 9000 §18.2).
    pub(super) fn limit_to_peer(&mut self, peer_max: u16) {
        let peer_max = peer_max.max(QUIC_MIN);
        self.base = self.base.min(peer_max);
        self.current = self.current.min(peer_max);
        self.ceiling = self
            .ceiling
            .map(|c| c.min(peer_max))
            .filter(|&c| c > self.base);
        self.high = self.high.min(peer_max);
        if self.ceiling.is_none() {
            self.search = Search::Done { again_at: None };
        }
    }

    /// The size to probe now, if a probe is due (none is in flight and a
    /// search is on or due at `now`).
    pub(super) fn probe_due(&mut self, now: Instant) -> Option<u16> {
        let ceiling = self.ceiling?;
        if self.probe.is_some() {
            return None;
        }
        match self.search {
            Search::Trying { size, .. } => Some(size),
            Search::Start => Some(self.begin(ceiling)),
            Search::Done { again_at: Some(at) } if at <= now => Some(self.begin(ceiling)),
            Search::Done { .. } => None,
        }
    }

    /// Start a search up to `ceiling`, trying the ceiling first.
    fn begin(&mut self, ceiling: u16) -> u16 {
        self.high = ceiling;
        self.search = Search::Trying {
            size: ceiling,
            lost: 0,
        };
        ceiling
    }

    /// The probe of `size` went out as packet `pn`.
    pub(super) fn on_probe_sent(&mut self, pn: u64, size: u16) {
        self.probe = Some(Probe {
            pn,
            size,
            epoch: self.epoch,
        });
    }

    /// Whether packet `pn` is the probe in flight.
    pub(super) fn is_probe(&self, pn: u64) -> bool {
        self.probe.is_some_and(|p| p.pn == pn)
    }

    /// The probe `pn` was acknowledged; true when the size went up.
    pub(super) fn on_probe_acked(&mut self, pn: u64, now: Instant) -> bool {
        let Some(probe) = self.take_probe(pn) else {
            return false;
        };
        if probe.size <= self.current {
            return false;
        }
        self.current = probe.size;
        self.next_size(now);
        true
    }

    /// The probe `pn` was declared lost.
    pub(super) fn on_probe_lost(&mut self, pn: u64, now: Instant) {
        let Some(probe) = self.take_probe(pn) else {
            return;
        };
        if let Search::Trying { size, lost } = self.search {
            if size != probe.size {
                return;
            }
            let lost = lost.saturating_add(1);
            if lost < MAX_PROBES {
                self.search = Search::Trying { size, lost };
                return;
            }
            self.high = size.saturating_sub(1);
            self.next_size(now);
        }
    }

    /// The probe numbered `pn`, if it belongs to the search under way
    /// (it is forgotten either way).
    fn take_probe(&mut self, pn: u64) -> Option<Probe> {
        let probe = self.probe.filter(|p| p.pn == pn)?;
        self.probe = None;
        (probe.epoch == self.epoch).then_some(probe)
    }

    /// After a probe's outcome: try the middle of what is still in
    /// question, or stop.
    fn next_size(&mut self, now: Instant) {
        if self.high < self.current.saturating_add(SEARCH_STEP) {
            let below_ceiling = self.ceiling.is_some_and(|c| self.current < c);
            self.search = Search::Done {
                again_at: below_ceiling.then(|| now + RAISE_INTERVAL),
            };
            return;
        }
        let size = self.current + (self.high - self.current).div_ceil(2);
        self.search = Search::Trying { size, lost: 0 };
    }

    /// A packet of `size` bytes numbered `pn` (not a probe) was
    /// acknowledged: a large one clears the black-hole evidence.
    pub(super) fn on_acked(&mut self, pn: u64, size: u16) {
        if size > self.base {
            self.largest_large_acked = Some(self.largest_large_acked.map_or(pn, |l| l.max(pn)));
            self.suspect_events = 0;
        }
    }

    /// One loss event declared `lost` (packet numbers and sizes, probes
    /// excluded). True when it makes the path a black hole: the size is back
    /// at the base and a search below the size that failed begins.
    pub(super) fn on_loss_event(
        &mut self,
        lost: impl IntoIterator<Item = (u64, u16)>,
        now: Instant,
    ) -> bool {
        if self.current <= self.base {
            return false;
        }
        let after = self.largest_large_acked;
        let suspect = lost
            .into_iter()
            .any(|(pn, size)| size > self.base && after.is_none_or(|a| pn > a));
        if !suspect {
            return false;
        }
        self.suspect_events = self.suspect_events.saturating_add(1);
        if self.suspect_events < BLACK_HOLE_EVENTS {
            return false;
        }
        let failed = self.current;
        self.restart();
        self.high = failed.saturating_sub(1);
        self.next_size(now);
        true
    }

    /// The peer's address changed: a new path starts from the base.
    pub(super) fn on_new_path(&mut self) {
        self.restart();
        if self.ceiling.is_some() {
            self.search = Search::Start;
        }
    }

    /// Back to the base; the fate of a probe in flight no longer counts.
    fn restart(&mut self) {
        self.current = self.base;
        self.epoch = self.epoch.wrapping_add(1);
        self.largest_large_acked = None;
        self.suspect_events = 0;
        self.search = Search::Done { again_at: None };
    }
}

impl Connection {
    /// The largest UDP payload this connection sends now: the configured
    /// size, or what path MTU discovery validated since.
    pub fn max_datagram_size(&self) -> u16 {
        self.path_mtu.current()
    }

    /// The datagram size changed: congestion control and pacing count in
    /// it, and queued DATAGRAM payloads that no longer fit are dropped.
    pub(super) fn on_datagram_size_changed(&mut self) {
        let mds = u64::from(self.path_mtu.current());
        self.cc.on_mtu_update(mds);
        self.tx.pacer.on_mtu_update(mds);
        if let Some(max) = self.datagrams.max_payload(self.path_mtu.current()) {
            let dropped = self.datagrams.drop_longer_than(max);
            if dropped > 0 {
                tracing::debug!(
                    dropped,
                    max,
                    "queued datagrams too large for the path dropped"
                );
            }
        }
    }

    /// A 1-RTT packet was acknowledged; true when it was the path MTU
    /// probe (which is then done with: it carried nothing else).
    pub(super) fn on_mtu_acked(&mut self, now: Instant, pn: u64, p: &SentPacket) -> bool {
        if !self.path_mtu.is_probe(pn) {
            self.path_mtu.on_acked(pn, p.size);
            return false;
        }
        if self.path_mtu.on_probe_acked(pn, now) {
            tracing::debug!(size = self.path_mtu.current(), "path MTU raised");
            self.on_datagram_size_changed();
        }
        true
    }

    /// Takes the path MTU probe out of 1-RTT packets declared lost (its
    /// loss is no congestion signal and no data to recover: RFC 9000
    /// §14.4), and looks at the rest for a black hole.
    pub(super) fn on_mtu_losses(&mut self, now: Instant, packets: &mut Vec<(u64, SentPacket)>) {
        if let Some(i) = packets
            .iter()
            .position(|(pn, _)| self.path_mtu.is_probe(*pn))
        {
            let (pn, probe) = packets.remove(i);
            self.leave_flight(SpaceId::Data, &probe);
            self.stats.mtu_probes_lost += 1;
            self.path_mtu.on_probe_lost(pn, now);
        }
        let lost = packets.iter().map(|(pn, p)| (*pn, p.size));
        if self.path_mtu.on_loss_event(lost, now) {
            tracing::debug!(
                size = self.path_mtu.current(),
                "path MTU black hole: back to the base size"
            );
            self.stats.mtu_black_holes += 1;
            self.on_datagram_size_changed();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> Instant {
        Instant::from_micros(ms * 1000)
    }

    /// Runs one search against a path carrying `path` bytes at most; the
    /// sizes probed, in order.
    fn search(mtu: &mut PathMtu, path: u16, now: Instant) -> Vec<u16> {
        let mut tried = Vec::new();
        let mut pn = 100;
        while let Some(size) = mtu.probe_due(now) {
            assert!(tried.len() < 40, "the search does not end: {tried:?}");
            tried.push(size);
            mtu.on_probe_sent(pn, size);
            if size <= path {
                assert!(mtu.on_probe_acked(pn, now));
            } else {
                mtu.on_probe_lost(pn, now);
            }
            pn += 1;
        }
        tried
    }

    #[test]
    fn off_without_a_ceiling_or_with_one_below_the_base() {
        for ceiling in [None, Some(1350), Some(1300)] {
            let mut m = PathMtu::new(1350, ceiling);
            assert_eq!(m.probe_due(t(0)), None);
            assert_eq!(m.current(), 1350);
        }
    }

    #[test]
    fn the_ceiling_first_and_one_probe_when_it_passes() {
        let mut m = PathMtu::new(1350, Some(1452));
        assert_eq!(search(&mut m, 1500, t(0)), vec![1452]);
        assert_eq!(m.current(), 1452);
        // Nothing above the ceiling: no search ever again.
        assert_eq!(m.probe_due(t(10_000_000)), None);
    }

    #[test]
    fn a_smaller_path_is_found_to_within_the_step_and_searched_again_later() {
        let mut m = PathMtu::new(1350, Some(1452));
        let tried = search(&mut m, 1400, t(0));
        // The ceiling three times, then halving.
        assert_eq!(&tried[..3], &[1452, 1452, 1452]);
        assert!(
            m.current() <= 1400 && m.current() + SEARCH_STEP > 1400,
            "{tried:?} -> {}",
            m.current()
        );
        assert!(m.current() > 1350);
        let later = t(0) + RAISE_INTERVAL;
        assert_eq!(m.probe_due(later - Duration::from_millis(1)), None);
        assert_eq!(m.probe_due(later), Some(1452));
    }

    #[test]
    fn a_path_at_the_base_keeps_the_base() {
        let mut m = PathMtu::new(1350, Some(1452));
        search(&mut m, 1350, t(0));
        assert_eq!(m.current(), 1350);
    }

    #[test]
    fn the_peer_lowers_every_size() {
        let mut m = PathMtu::new(1350, Some(1452));
        m.limit_to_peer(1400);
        assert_eq!(search(&mut m, 1500, t(0)), vec![1400]);
        let mut m = PathMtu::new(1350, Some(1452));
        m.limit_to_peer(1250);
        assert_eq!(
            (m.current(), m.base(), m.probe_due(t(0))),
            (1250, 1250, None)
        );
    }

    #[test]
    fn only_a_run_of_large_losses_after_the_last_large_ack_is_a_black_hole() {
        let mut m = PathMtu::new(1350, Some(1452));
        search(&mut m, 1500, t(0));
        m.on_acked(10, 1452);
        // Random loss: packet 5 lost after 10 was acknowledged.
        for _ in 0..5 {
            assert!(!m.on_loss_event([(5, 1452)], t(1)));
        }
        // Small packets lost: congestion, not the size.
        for _ in 0..5 {
            assert!(!m.on_loss_event([(20, 1200)], t(1)));
        }
        // Large packets lost after the last large ack, but a large ack in
        // between clears the count.
        assert!(!m.on_loss_event([(20, 1452)], t(1)));
        assert!(!m.on_loss_event([(21, 1452)], t(1)));
        m.on_acked(22, 1452);
        assert!(!m.on_loss_event([(23, 1452)], t(1)));
        assert!(!m.on_loss_event([(24, 1452)], t(1)));
        assert!(m.on_loss_event([(25, 1452)], t(1)));
        assert_eq!(m.current(), 1350);
        // The new search stays below the size that failed.
        let tried = search(&mut m, 1400, t(2));
        assert!(tried.iter().all(|&s| s < 1452), "{tried:?}");
        assert!(m.current() > 1350 && m.current() <= 1400);
    }

    #[test]
    fn a_new_path_starts_over_and_ignores_the_old_probe() {
        let mut m = PathMtu::new(1350, Some(1452));
        search(&mut m, 1500, t(0));
        m.on_new_path();
        assert_eq!(m.current(), 1350);
        assert_eq!(m.probe_due(t(1)), Some(1452));
        m.on_probe_sent(7, 1452);
        m.on_new_path();
        // The old path's probe is acknowledged late: it proves nothing here.
        assert!(!m.on_probe_acked(7, t(2)));
        assert_eq!(m.current(), 1350);
        assert_eq!(m.probe_due(t(2)), Some(1452));
    }
}
