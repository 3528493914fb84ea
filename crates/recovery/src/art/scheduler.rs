//! ART's Replica Scheduler: spread the replicas of a round over the *escape
//! space* so a loss burst cannot take them all (ART journal §6.2, eq. 6,
//! Figs. 17–18).
//!
//! `escape_space = min(bdp, α · B_max)` (eq. 6), in packets, where `B_max` is
//! the largest burst of consecutive losses seen over the last W RTTs. The
//! first replica goes at `now`; each other replica goes `c_i` sending cycles
//! later, `c_i` drawn uniformly from `0..escape_space` (journal §6.3: "we
//! randomly select a time interval less than escape_space"), one cycle being
//! the time to send one packet at the current pacing rate (§5.2).
//!
//! Choices where the paper is vague (also in docs/recovery.md):
//! - **Burst**: a run of *consecutive ack-eliciting 1-RTT packets* declared
//!   lost, originals and replicas alike. Consecutiveness is judged by send
//!   order, counted by the tag the policy returns from `on_packet_sent`, so a
//!   packet number used by a non-ack-eliciting packet (a pure ACK, which the
//!   policy never sees) does not split a burst. Losses declared out of send
//!   order start a new run.
//! - **Window**: W = 8 RTTs by default (the paper says 5–10), measured with
//!   the current smoothed RTT (1 ms if there is none yet) back from `now`, on
//!   the time each burst last grew.
//! - **Rounding and floor**: `α · B_max` is rounded up; the escape space is
//!   at least 1 (all replicas at `now` when no burst is known).
//! - **One RTT**: offsets are capped at the smoothed RTT ("all replicas should
//!   be sent in one RTT", §6.2), so every `send_at` is in `[now, now + srtt]`.
//! - **Draws**: the `c_i` are independent (two replicas may share a cycle);
//!   the returned times are sorted.

use std::collections::VecDeque;

use rand::{Rng, RngCore};
use transport::policy::PathView;
use wire::time::{Duration, Instant};

/// At most this many bursts are remembered (the oldest go first); the
/// monotonic queue rarely holds more than a handful.
const MAX_TRACKED_BURSTS: usize = 4096;

/// One run of consecutive losses, as remembered for `B_max`.
#[derive(Clone, Copy, Debug)]
struct Burst {
    id: u64,
    /// When the run last grew.
    at: Instant,
    len: u64,
}

/// The run of losses being extended.
#[derive(Clone, Copy, Debug)]
struct CurrentRun {
    id: u64,
    last_index: u64,
    len: u64,
}

/// Largest loss burst over a sliding window of RTTs (the `B_max` of eq. 6).
///
/// A monotonic queue: burst lengths strictly decrease from front (oldest) to
/// back, so the front is the maximum and expiry pops from the front.
#[derive(Clone, Debug)]
pub struct BurstTracker {
    window_rtts: u32,
    bursts: VecDeque<Burst>,
    current: Option<CurrentRun>,
    next_id: u64,
}

impl BurstTracker {
    /// A tracker remembering bursts for `window_rtts` RTTs (at least 1).
    pub fn new(window_rtts: u32) -> Self {
        BurstTracker {
            window_rtts: window_rtts.max(1),
            bursts: VecDeque::new(),
            current: None,
            next_id: 0,
        }
    }

    /// The packet with send index `index` (consecutive for consecutive
    /// ack-eliciting packets) was declared lost at `now`.
    pub fn on_packet_lost(&mut self, now: Instant, index: u64, srtt: Duration) {
        let run = match self.current {
            Some(c) if index == c.last_index.wrapping_add(1) => CurrentRun {
                id: c.id,
                last_index: index,
                len: c.len.saturating_add(1),
            },
            _ => {
                let id = self.next_id;
                self.next_id = self.next_id.wrapping_add(1);
                CurrentRun {
                    id,
                    last_index: index,
                    len: 1,
                }
            }
        };
        self.current = Some(run);
        if self.bursts.back().is_some_and(|b| b.id == run.id) {
            self.bursts.pop_back();
        }
        while self.bursts.back().is_some_and(|b| b.len <= run.len) {
            self.bursts.pop_back();
        }
        self.bursts.push_back(Burst {
            id: run.id,
            at: now,
            len: run.len,
        });
        if self.bursts.len() > MAX_TRACKED_BURSTS {
            self.bursts.pop_front();
        }
        self.expire(now, srtt);
    }

    fn expire(&mut self, now: Instant, srtt: Duration) {
        let rtt = if srtt.is_zero() {
            Duration::from_millis(1)
        } else {
            srtt
        };
        let Some(horizon) = now.checked_sub(rtt.saturating_mul(self.window_rtts)) else {
            return;
        };
        while self.bursts.front().is_some_and(|b| b.at < horizon) {
            self.bursts.pop_front();
        }
    }

    /// `B_max`: the longest burst that grew within the last W RTTs (0 if
    /// none).
    pub fn max_burst(&mut self, now: Instant, srtt: Duration) -> u64 {
        self.expire(now, srtt);
        self.bursts.front().map_or(0, |b| b.len)
    }
}

/// The Replica Scheduler: escape space (eq. 6) and random send times.
#[derive(Clone, Debug)]
pub struct ReplicaScheduler {
    alpha: f64,
    bursts: BurstTracker,
}

impl ReplicaScheduler {
    /// A scheduler with scaling coefficient `alpha` (eq. 6; values below 1 or
    /// not finite are read as 1) and a burst window of `window_rtts` RTTs.
    pub fn new(alpha: f64, window_rtts: u32) -> Self {
        let alpha = if alpha.is_finite() && alpha >= 1.0 {
            alpha
        } else {
            1.0
        };
        ReplicaScheduler {
            alpha,
            bursts: BurstTracker::new(window_rtts),
        }
    }

    /// Feed a lost packet (see [`BurstTracker::on_packet_lost`]).
    pub fn on_packet_lost(&mut self, now: Instant, index: u64, path: &PathView) {
        self.bursts.on_packet_lost(now, index, path.srtt);
    }

    /// `B_max` now.
    pub fn max_burst(&mut self, now: Instant, path: &PathView) -> u64 {
        self.bursts.max_burst(now, path.srtt)
    }

    /// `escape_space = max(1, min(bdp, ⌈α · B_max⌉))` packets (eq. 6).
    pub fn escape_space(&mut self, now: Instant, path: &PathView) -> u64 {
        let b_max = self.max_burst(now, path);
        // Float to integer casts saturate; alpha is finite and ≥ 1.
        let scaled = (self.alpha * b_max as f64).ceil() as u64;
        path.bdp_packets().min(scaled).max(1)
    }

    /// Send times of `r` replicas: the first at `now`, the others `c_i`
    /// cycles later with `c_i` uniform in `0..escape_space`, capped at one
    /// smoothed RTT; sorted. Empty for `r == 0`.
    pub fn schedule(
        &mut self,
        now: Instant,
        r: usize,
        path: &PathView,
        rng: &mut dyn RngCore,
    ) -> Vec<Instant> {
        if r == 0 {
            return Vec::new();
        }
        let space = self.escape_space(now, path);
        spread(now, r, space, path, rng)
    }
}

/// Send times of `r` replicas over an escape space of `space` packets
/// (§6.3): the first at `now`, the others `c_i` sending cycles later with
/// `c_i` uniform in `0..space`, each capped at one smoothed RTT; sorted.
/// Empty for `r == 0`; a `space` of 0 is read as 1. Shared by ART's
/// scheduler and `art+`, which sizes the space differently.
pub fn spread(
    now: Instant,
    r: usize,
    space: u64,
    path: &PathView,
    rng: &mut dyn RngCore,
) -> Vec<Instant> {
    if r == 0 {
        return Vec::new();
    }
    let space = space.max(1);
    let cycle = path.sending_cycle().as_nanos();
    let cap = path.srtt.as_nanos();
    let mut times = Vec::with_capacity(r);
    times.push(now);
    for _ in 1..r {
        let c = rng.gen_range(0..space);
        let offset = (u128::from(c) * cycle).min(cap);
        // The cap is a Duration's nanos, so it fits a u64.
        times.push(now + Duration::from_nanos(u64::try_from(offset).unwrap_or(u64::MAX)));
    }
    times.sort_unstable();
    times
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn path(rate: u64, rtt_ms: u64) -> PathView {
        PathView {
            srtt: Duration::from_millis(rtt_ms),
            min_rtt: Duration::from_millis(rtt_ms),
            pacing_rate: rate,
            mtu: 1250,
            ..Default::default()
        }
    }

    fn lose(s: &mut ReplicaScheduler, now: Instant, first: u64, n: u64, p: &PathView) {
        for i in first..first + n {
            s.on_packet_lost(now, i, p);
        }
    }

    #[test]
    fn bursts_are_runs_of_consecutive_sends() {
        let mut t = BurstTracker::new(8);
        let rtt = Duration::from_millis(10);
        let now = Instant::from_millis(100);
        for i in [1, 2, 3, 7, 8, 20] {
            t.on_packet_lost(now, i, rtt);
        }
        assert_eq!(t.max_burst(now, rtt), 3);
        for i in 21..=24 {
            t.on_packet_lost(now, i, rtt);
        }
        assert_eq!(t.max_burst(now, rtt), 5);
        // Out of order starts a new run.
        t.on_packet_lost(now, 4, rtt);
        assert_eq!(t.max_burst(now, rtt), 5);
    }

    #[test]
    fn b_max_expires_after_w_rtts() {
        let mut t = BurstTracker::new(8);
        let rtt = Duration::from_millis(10);
        let t0 = Instant::from_millis(1000);
        for i in 0..6 {
            t.on_packet_lost(t0, i, rtt);
        }
        let later = t0 + Duration::from_millis(50);
        t.on_packet_lost(later, 100, rtt);
        t.on_packet_lost(later, 101, rtt);
        // Still within 8 RTTs (80 ms) of the six-packet burst.
        assert_eq!(t.max_burst(t0 + Duration::from_millis(80), rtt), 6);
        // Past it: the two-packet burst is the largest left.
        assert_eq!(t.max_burst(t0 + Duration::from_millis(81), rtt), 2);
        assert_eq!(t.max_burst(later + Duration::from_millis(81), rtt), 0);
    }

    #[test]
    fn escape_space_is_min_of_bdp_and_alpha_b_max() {
        // 100 Mbit/s, 30 ms: BDP = 300 packets of 1250 bytes; cycle 100 µs.
        let p = path(12_500_000, 30);
        let now = Instant::from_millis(10);
        let mut s = ReplicaScheduler::new(1.0, 8);
        assert_eq!(s.escape_space(now, &p), 1, "no burst yet: floor of 1");
        lose(&mut s, now, 0, 7, &p);
        assert_eq!(s.escape_space(now, &p), 7);
        let mut s = ReplicaScheduler::new(2.5, 8);
        lose(&mut s, now, 0, 7, &p);
        assert_eq!(s.escape_space(now, &p), 18, "⌈2.5 · 7⌉");
        // A small BDP bounds it: 1 Mbit/s, 30 ms → 3 packets.
        let small = path(125_000, 30);
        assert_eq!(small.bdp_packets(), 3);
        assert_eq!(s.escape_space(now, &small), 3);
    }

    #[test]
    fn replicas_spread_over_the_escape_space() {
        let p = path(12_500_000, 30);
        let now = Instant::from_millis(10);
        let mut s = ReplicaScheduler::new(1.0, 8);
        lose(&mut s, now, 0, 50, &p);
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let mut seen_late = false;
        for _ in 0..200 {
            let t = s.schedule(now, 4, &p, &mut rng);
            assert_eq!(t.len(), 4);
            assert_eq!(t[0], now);
            assert!(t.windows(2).all(|w| w[0] <= w[1]));
            for x in &t {
                let off = *x - now;
                // Multiples of the 100 µs cycle, below 50 cycles.
                assert_eq!(off.as_nanos() % 100_000, 0);
                assert!(off < Duration::from_millis(5));
                seen_late |= off >= Duration::from_millis(4);
            }
        }
        assert!(
            seen_late,
            "offsets never reached the far end of the escape space"
        );
    }

    #[test]
    fn offsets_capped_at_srtt_and_zero_rate_is_now() {
        // 1 ms RTT but a slow pacing rate: 10 ms cycles. Offsets cap at srtt.
        let p = PathView {
            srtt: Duration::from_millis(1),
            min_rtt: Duration::from_millis(100),
            pacing_rate: 125_000,
            mtu: 1250,
            ..Default::default()
        };
        let now = Instant::from_millis(1);
        let mut s = ReplicaScheduler::new(1.0, 8);
        lose(&mut s, now, 0, 9, &p);
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let t = s.schedule(now, 8, &p, &mut rng);
        assert!(t
            .iter()
            .all(|x| *x >= now && *x <= now + Duration::from_millis(1)));
        assert!(t.iter().any(|x| *x == now + Duration::from_millis(1)));
        let zero = PathView {
            pacing_rate: 0,
            ..p
        };
        assert!(s
            .schedule(now, 5, &zero, &mut rng)
            .iter()
            .all(|x| *x == now));
        assert!(s.schedule(now, 0, &zero, &mut rng).is_empty());
    }

    fn arb_path() -> impl Strategy<Value = PathView> {
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            prop_oneof![Just(0u64), 1u64..100_000, any::<u64>()],
        )
            .prop_map(|(srtt, min_rtt, rate, mtu, pick)| PathView {
                srtt: Duration::from_nanos(srtt % (1 << 40)),
                min_rtt: Duration::from_nanos(min_rtt),
                pacing_rate: rate,
                mtu: if pick == 0 { 0 } else { mtu % 100_000 },
                ..Default::default()
            })
    }

    proptest! {
        #[test]
        fn schedule_invariants(
            alpha in prop_oneof![Just(1.0f64), 1.0f64..10.0, Just(f64::NAN), Just(f64::INFINITY)],
            window in 0u32..20,
            lost in proptest::collection::vec((any::<u64>(), 0u64..1_000_000_000), 0..100),
            p in arb_path(),
            now_ns in any::<u64>(),
            r in 0usize..40,
            seed in any::<u64>(),
        ) {
            let mut s = ReplicaScheduler::new(alpha, window);
            let mut now = Instant::from_nanos(now_ns / 2);
            for (index, dt) in lost {
                now += Duration::from_nanos(dt);
                s.on_packet_lost(now, index % 64, &p);
            }
            let space = s.escape_space(now, &p);
            prop_assert!(space >= 1 && space <= p.bdp_packets().max(1));
            let b_max = s.max_burst(now, &p);
            let a = if alpha.is_finite() && alpha >= 1.0 { alpha } else { 1.0 };
            prop_assert_eq!(space, p.bdp_packets().min((a * b_max as f64).ceil() as u64).max(1));
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let t = s.schedule(now, r, &p, &mut rng);
            prop_assert_eq!(t.len(), r);
            prop_assert!(t.windows(2).all(|w| w[0] <= w[1]));
            for x in &t {
                prop_assert!(*x >= now && *x <= now + p.srtt);
            }
            if r > 0 {
                prop_assert_eq!(t[0], now);
            }
        }
    }
}
