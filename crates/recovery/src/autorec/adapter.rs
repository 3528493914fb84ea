//! AutoRec's Redundancy Adapter (autorec.md §4.1): once per decision
//! interval, the utility of the interval (eq. 2), its change ratio R_Δ
//! (eq. 3), the receiver's expected waiting time E_waiting (eq. 4) against
//! Θ_thres, and the step rule (eq. 5) with random exploration after a run
//! of unchanged intervals and the paper's fall-back; off above a monitored
//! loss rate (§5.2, "Deployment experiences").
//!
//! Pure arithmetic over what one interval measured ([`Interval`]); the
//! policy feeds it, so every rule is testable on hand-made numbers.

use rand::RngCore;
use wire::time::Duration;

/// Highest redundancy level: "reinjecting 0~4 replicas can recover 98%+
/// packet losses" (§4.1).
pub const A_MAX: u32 = 4;

/// The adapter's parameters, with the paper's defaults.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdapterConfig {
    /// Θ_thres: below this E_waiting, no reinjection (default 50 ms, §5.1).
    pub theta: Duration,
    /// α of sigmoid_α in the utility (default 0.1, §4.1).
    pub alpha: f64,
    /// R_nor, the normal disturbance ratio (default 3%, §5.1).
    pub r_nor: f64,
    /// Unchanged intervals before a random exploration (default 10, §4.1).
    pub explore_after: u32,
    /// Above this monitored loss rate AutoRec is off (default 10%, §5.2).
    pub loss_cutoff: f64,
    /// Whether E_waiting gates reinjection (`autorec-nogate`: false).
    pub gate: bool,
}

impl Default for AdapterConfig {
    fn default() -> Self {
        AdapterConfig {
            theta: Duration::from_millis(50),
            alpha: 0.1,
            r_nor: 0.03,
            explore_after: 10,
            loss_cutoff: 0.10,
            gate: true,
        }
    }
}

/// What one decision interval measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Interval {
    /// Mean recovery latency (§2.3) of the items recovered in the interval,
    /// seconds; `None` when none was recovered.
    pub recovery_latency: Option<f64>,
    /// Highest round that delivered an item in the interval (eq. 4's `n`,
    /// the maximum retransmission times), at least 1.
    pub max_round: u32,
    /// Packets declared lost / packets sent in the interval (eq. 4's `r`).
    pub loss_rate: f64,
    /// Smoothed RTT at the end of the interval, seconds.
    pub srtt: f64,
    /// Minimum RTT, seconds.
    pub min_rtt: f64,
    /// Goodput of the interval: newly sent stream bytes acknowledged per
    /// second.
    pub goodput: f64,
}

/// sigmoid_α(x) = 1 / (1 + e^(−αx)).
pub fn sigmoid(alpha: f64, x: f64) -> f64 {
    1.0 / (1.0 + (-alpha * x).exp())
}

/// Eq. 2: U(A) = recovery latency · sigmoid_α(A − 2) / (minRTT · goodput).
/// Lower is better. `None` without a latency sample or with no goodput.
pub fn utility(alpha: f64, a_thres: u32, m: &Interval) -> Option<f64> {
    let latency = m.recovery_latency?;
    let denom = m.min_rtt * m.goodput;
    if denom <= 0.0 || !denom.is_finite() {
        return None;
    }
    Some(latency * sigmoid(alpha, f64::from(a_thres) - 2.0) / denom)
}

/// Eq. 3: R_Δ = (u_{i−1} − u_i) / u_{i−1}; positive is an improvement.
/// A previous utility of zero (no latency at all) gives no information: 0.
pub fn r_delta(previous: f64, current: f64) -> f64 {
    if previous <= 0.0 {
        return 0.0;
    }
    (previous - current) / previous
}

/// Eq. 4: E_waiting = (1 − r) · SRTT · Σ_{k=0}^{n−1} (k+1) r^k, seconds.
pub fn e_waiting(loss_rate: f64, srtt: f64, max_round: u32) -> f64 {
    let r = loss_rate.clamp(0.0, 1.0);
    let sum: f64 = (0..max_round.max(1))
        .map(|k| f64::from(k + 1) * r.powi(k as i32))
        .sum();
    (1.0 - r) * srtt * sum
}

/// Length of [`state`], the adapter's view of a closed interval.
pub const STATE_DIM: usize = 9;

/// What the Redundancy Adapter decides from at the end of an interval,
/// as one vector (the observation of the Python environment's `autorec`
/// decision, [`crate::steer`]): `[A_thres in force, recovery latency s
/// (0 without a sample), n (max round), r (loss rate), SRTT s, minRTT s,
/// goodput Mbit/s, E_waiting s (eq. 4), R_Δ (eq. 3, 0 without a previous
/// utility)]`. `a_thres` is the level the interval ran with, `previous`
/// the utility (eq. 2) of the interval before.
pub fn state(m: &Interval, a_thres: u32, alpha: f64, previous: Option<f64>) -> [f32; STATE_DIM] {
    let rd = match (previous, utility(alpha, a_thres, m)) {
        (Some(prev), Some(cur)) => r_delta(prev, cur),
        _ => 0.0,
    };
    [
        a_thres as f32,
        m.recovery_latency.unwrap_or(0.0) as f32,
        m.max_round as f32,
        m.loss_rate as f32,
        m.srtt as f32,
        m.min_rtt as f32,
        (m.goodput * 8e-6) as f32,
        e_waiting(m.loss_rate, m.srtt, m.max_round) as f32,
        rd as f32,
    ]
}

/// The adapter's state across intervals.
#[derive(Clone, Debug, PartialEq)]
pub struct Adapter {
    config: AdapterConfig,
    /// A_thres of the current interval.
    a: u32,
    /// A_thres of the interval before (for λ).
    a_prev: u32,
    /// Utility of the last interval that had one.
    last_utility: Option<f64>,
    /// Intervals in a row that kept A_thres.
    unchanged: u32,
    /// During an exploration: the level to fall back to.
    explored_from: Option<u32>,
    /// Off for this interval: the monitored loss rate was above the cut-off.
    off: bool,
    /// The last E_waiting computed, seconds (for traces).
    last_e_waiting: f64,
}

impl Adapter {
    /// Start at A_thres = `start` (clamped to `0..=A_MAX`).
    pub fn new(config: AdapterConfig, start: u32) -> Self {
        let a = start.min(A_MAX);
        Adapter {
            config,
            a,
            a_prev: a,
            last_utility: None,
            unchanged: 0,
            explored_from: None,
            off: false,
            last_e_waiting: 0.0,
        }
    }

    /// The redundancy level in force: A_thres, or 0 while off.
    pub fn level(&self) -> u32 {
        if self.off {
            0
        } else {
            self.a
        }
    }

    /// A_thres as learnt (what [`Adapter::level`] returns when not off).
    pub fn a_thres(&self) -> u32 {
        self.a
    }

    /// Whether the loss-rate cut-off holds AutoRec off.
    pub fn is_off(&self) -> bool {
        self.off
    }

    /// The last utility computed.
    pub fn utility(&self) -> Option<f64> {
        self.last_utility
    }

    /// The last E_waiting computed, seconds.
    pub fn e_waiting(&self) -> f64 {
        self.last_e_waiting
    }

    /// λ: +1 if the last decision raised A_thres, −1 otherwise (eq. 5).
    pub fn lambda(&self) -> i64 {
        if self.a > self.a_prev {
            1
        } else {
            -1
        }
    }

    /// The end of an interval: decide A_thres for the next one.
    pub fn decide(&mut self, m: &Interval, rng: &mut dyn RngCore) {
        self.off = m.loss_rate > self.config.loss_cutoff;
        let u = utility(self.config.alpha, self.a, m);
        let rd = match (self.last_utility, u) {
            (Some(prev), Some(cur)) => r_delta(prev, cur),
            _ => 0.0,
        };
        if u.is_some() {
            self.last_utility = u;
        }
        self.last_e_waiting = e_waiting(m.loss_rate, m.srtt, m.max_round);
        if self.config.gate && self.last_e_waiting < self.config.theta.as_secs_f64() {
            // §4.1: "if E_waiting < Θ_thres ... we will set A^{i+1} equal
            // to 0 (i.e., do not perform reinjection). Else, ... eq. 5".
            // The gate is absolute: the next interval reinjects nothing.
            // It is no choice of eq. 5's, so it is not an "unchangeable"
            // level for the exploration (which would draw a level in 1..4
            // after 10 gated intervals and reinject in a gated interval):
            // the run of unchanged levels starts again, and an exploration
            // under way ends. Once the gate lifts, eq. 5 goes on from
            // A^i = 0.
            self.explored_from = None;
            self.unchanged = 0;
            self.a_prev = self.a;
            self.a = 0;
            return;
        }
        let next = if let Some(old) = self.explored_from.take() {
            // The interval after a random jump: keep exploring only if it
            // clearly paid off (§4.1).
            if rd <= self.config.r_nor {
                old
            } else {
                self.step(rd)
            }
        } else {
            self.step(rd)
        };
        let next = if next == self.a {
            self.unchanged += 1;
            if self.unchanged >= self.config.explore_after {
                self.unchanged = 0;
                let other = rng.next_u32() % A_MAX; // one of the A_MAX others
                let rand = if other >= next { other + 1 } else { other };
                self.explored_from = Some(next);
                rand
            } else {
                next
            }
        } else {
            self.unchanged = 0;
            next
        };
        self.a_prev = self.a;
        self.a = next;
    }

    /// Eq. 5 with the direction λ, clamped to `0..=A_MAX`.
    fn step(&self, rd: f64) -> u32 {
        let a = i64::from(self.a);
        let next = if rd < -self.config.r_nor {
            a - self.lambda()
        } else if rd > self.config.r_nor {
            a + self.lambda()
        } else {
            a
        };
        next.clamp(0, i64::from(A_MAX)) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn interval(latency: f64) -> Interval {
        Interval {
            recovery_latency: Some(latency),
            max_round: 3,
            loss_rate: 0.05,
            srtt: 0.080,
            min_rtt: 0.050,
            goodput: 1_000_000.0,
        }
    }

    #[test]
    fn equations_two_to_four() {
        assert!((sigmoid(0.1, 0.0) - 0.5).abs() < 1e-12);
        let m = interval(0.040);
        // 0.040 · 0.5 / (0.05 · 1e6)
        assert!((utility(0.1, 2, &m).unwrap() - 4e-7).abs() < 1e-18);
        assert!(utility(0.1, 4, &m).unwrap() > utility(0.1, 2, &m).unwrap());
        assert_eq!(utility(0.1, 2, &Interval::default()), None);
        assert!((r_delta(2.0, 1.0) - 0.5).abs() < 1e-12);
        assert_eq!(r_delta(0.0, 1.0), 0.0);
        // (1 − 0.1) · 0.1 · (1 + 2·0.1) = 0.108
        assert!((e_waiting(0.1, 0.1, 2) - 0.108).abs() < 1e-12);
        assert!((e_waiting(0.0, 0.1, 5) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn the_state_is_what_the_adapter_decides_from() {
        let m = interval(0.040);
        let s = state(&m, 2, 0.1, None);
        assert_eq!(s.len(), STATE_DIM);
        assert_eq!(s[0], 2.0);
        assert_eq!(s[1], 0.040);
        assert_eq!(s[2], 3.0);
        assert_eq!(s[3], 0.05);
        assert_eq!(s[6], 8.0, "1e6 bytes/s = 8 Mbit/s");
        assert_eq!(s[7], e_waiting(0.05, 0.080, 3) as f32);
        assert_eq!(s[8], 0.0, "no R_Δ without a previous utility");
        // Twice the previous utility: R_Δ = −1.
        let u = utility(0.1, 2, &m).unwrap();
        assert_eq!(state(&m, 2, 0.1, Some(u / 2.0))[8], -1.0);
    }

    #[test]
    fn the_step_rule_follows_lambda() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut a = Adapter::new(AdapterConfig::default(), 1);
        a.decide(&interval(0.100), &mut rng); // first utility: no R_Δ
        assert_eq!(a.a_thres(), 1);
        assert_eq!(a.lambda(), -1, "unchanged counts as not raised");
        // Better by 50% with λ = −1: A + λ = 0.
        a.decide(&interval(0.050), &mut rng);
        assert_eq!(a.a_thres(), 0);
        assert_eq!(a.lambda(), -1);
        // Worse: A − λ = 1, now λ = +1.
        a.decide(&interval(0.100), &mut rng);
        assert_eq!(a.a_thres(), 1);
        assert_eq!(a.lambda(), 1);
        // Better: A + λ = 2; within ±R_nor: unchanged.
        a.decide(&interval(0.040), &mut rng);
        assert_eq!(a.a_thres(), 2);
        // u(2, 38 ms) / u(1, 40 ms) = 0.038·0.5 / (0.040·0.475) = 1.0.
        a.decide(&interval(0.038), &mut rng);
        assert_eq!(a.a_thres(), 2);
        // Clamped at A_MAX.
        let mut b = Adapter::new(AdapterConfig::default(), 4);
        b.a_prev = 3;
        b.last_utility = utility(0.1, 4, &interval(0.1));
        b.decide(&interval(0.01), &mut rng);
        assert_eq!(b.a_thres(), 4);
    }

    #[test]
    fn small_e_waiting_turns_reinjection_off_unless_ungated() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let calm = Interval {
            srtt: 0.020,
            ..interval(0.030)
        };
        let mut a = Adapter::new(AdapterConfig::default(), 3);
        a.decide(&calm, &mut rng);
        assert_eq!(a.level(), 0);
        let mut b = Adapter::new(
            AdapterConfig {
                gate: false,
                ..AdapterConfig::default()
            },
            3,
        );
        b.decide(&calm, &mut rng);
        assert_eq!(b.level(), 3);
    }

    #[test]
    fn a_gated_interval_never_reinjects_and_never_explores() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let calm = Interval {
            srtt: 0.020,
            ..interval(0.030)
        };
        assert!(e_waiting(calm.loss_rate, calm.srtt, calm.max_round) < 0.050);
        let mut a = Adapter::new(AdapterConfig::default(), 2);
        // Far more than the 10 unchanged intervals that start an
        // exploration: a gated 0 is not an unchanged level.
        for i in 0..100 {
            a.decide(&calm, &mut rng);
            assert_eq!(a.level(), 0, "gated interval {i} reinjects");
        }
        // The gate lifts: eq. 5 goes on from 0, and only then do unchanged
        // intervals count toward an exploration.
        // (The same latency, minRTT and goodput as the calm intervals: the
        // same utility, R_Δ = 0.)
        let mut b = a.clone();
        for _ in 0..9 {
            b.decide(&interval(0.030), &mut rng);
            assert_eq!(b.a_thres(), 0);
        }
        b.decide(&interval(0.030), &mut rng);
        assert_ne!(b.a_thres(), 0, "ten unchanged ungated intervals explore");
        // An exploration under way ends at the gate.
        b.decide(&calm, &mut rng);
        assert_eq!(b.level(), 0);
        b.decide(&calm, &mut rng);
        assert_eq!(b.level(), 0);
    }

    #[test]
    fn high_loss_turns_autorec_off_for_an_interval() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut a = Adapter::new(AdapterConfig::default(), 2);
        let lossy = Interval {
            loss_rate: 0.2,
            ..interval(0.1)
        };
        a.decide(&lossy, &mut rng);
        assert!(a.is_off());
        assert_eq!(a.level(), 0);
        assert!(a.a_thres() > 0, "the learnt level is kept");
        a.decide(&interval(0.1), &mut rng);
        assert!(!a.is_off());
        assert_eq!(a.level(), a.a_thres());
    }

    #[test]
    fn exploration_after_ten_unchanged_intervals_then_fall_back() {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut a = Adapter::new(AdapterConfig::default(), 2);
        for _ in 0..9 {
            a.decide(&interval(0.05), &mut rng);
            assert_eq!(a.a_thres(), 2);
        }
        a.decide(&interval(0.05), &mut rng);
        let explored = a.a_thres();
        assert_ne!(explored, 2, "the tenth unchanged interval explores");
        assert!(explored <= A_MAX);
        // No gain (20% more latency outweighs the cost term's ±10%): back to 2.
        a.decide(&interval(0.06), &mut rng);
        assert_eq!(a.a_thres(), 2);

        // A clear gain keeps the explored level moving by eq. 5 instead.
        let mut b = Adapter::new(AdapterConfig::default(), 2);
        for _ in 0..10 {
            b.decide(&interval(0.05), &mut rng);
        }
        let explored = b.a_thres();
        b.decide(&interval(0.01), &mut rng);
        assert_ne!(b.a_thres(), 2);
        let lambda = if explored > 2 { 1 } else { -1 };
        assert_eq!(
            i64::from(b.a_thres()),
            (i64::from(explored) + lambda).clamp(0, 4)
        );
    }
}
