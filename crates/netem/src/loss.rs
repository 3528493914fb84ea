//! Random loss models and the stateful process that applies one.
//!
//! A [`LossModel`] is a description (plain data, serialisable, checkable with
//! [`LossModel::validate`]); a [`LossProcess`] is one seeded run of it that
//! answers "drop this packet?" per packet. The process is a pure function of
//! the sequence of `(now)` calls and its seed, so the simulator and the relay
//! see the same pattern for the same packet arrival times.

use std::path::Path;
use std::sync::Arc;

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use wire::time::{Duration, Instant};

use crate::seed::{rng_from_seed, unit_f64};
use crate::trace::{TraceError, MAX_TRACE_FILE_BYTES, MAX_TRACE_LINES};

/// How packets are lost at random on a link, before they reach its queue.
///
/// Exists to express every loss pattern the papers evaluate: uniform loss,
/// bursts (ART journal §3.2, Fig. 4), slowly varying rates (ART journal
/// Fig. 15) and recorded patterns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossModel {
    /// Nothing is lost.
    None,
    /// Each packet is lost independently with probability `p`.
    Bernoulli {
        /// Loss probability, in [0, 1].
        p: f64,
    },
    /// Two-state Gilbert-Elliott chain, stepped once per packet: the state
    /// moves first, then the packet is lost with the new state's probability.
    GilbertElliott {
        /// Probability of moving from the good to the bad state.
        p_good_to_bad: f64,
        /// Probability of moving from the bad to the good state.
        p_bad_to_good: f64,
        /// Loss probability in the good state.
        loss_in_good: f64,
        /// Loss probability in the bad state.
        loss_in_bad: f64,
        /// When set, a packet that arrives this long or longer after the
        /// previous one first redraws the state from the chain's stationary
        /// distribution. A per-packet chain otherwise carries a burst across
        /// any silence: a sender reduced to backed-off PTO probes (one or two
        /// packets per PTO) can see a burst of 6 last for seconds, its probes
        /// all lost, until the connection's idle timeout ends it; real
        /// bursts are stretches of time. `None`: the plain per-packet chain
        /// (as Linux netem's Gilbert-Elliott model).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        idle_reset: Option<Duration>,
    },
    /// Bernoulli loss whose rate is redrawn every `interval` from a Gaussian
    /// with this mean and standard deviation, clamped to [0, 1] (ART journal
    /// Fig. 15, "the loss pattern follows Gaussian distribution"). Clamping
    /// biases the long-run mean when `mean` is within about 2 `std_dev` of 0
    /// or 1. A rate is drawn lazily, for the first packet of each interval
    /// that has packets; intervals without packets draw nothing, which
    /// changes no packet's odds and keeps long idle gaps O(1).
    Varying {
        /// Mean loss rate, in [0, 1].
        mean: f64,
        /// Standard deviation of the loss rate, >= 0.
        std_dev: f64,
        /// How long one drawn rate lasts; > 0. Rate periods are aligned to
        /// multiples of `interval` since the clock's epoch.
        interval: Duration,
    },
    /// A recorded per-packet pattern (`true` = lost), replayed in order and
    /// looping. Load one with [`LossModel::replay_from_file`].
    Replay {
        /// The pattern; must be non-empty.
        pattern: Arc<Vec<bool>>,
    },
}

impl LossModel {
    /// The Gilbert-Elliott model with a given mean loss rate and mean burst
    /// length, in its usual simple form: the bad state loses every packet,
    /// the good state none.
    ///
    /// Bursts are geometric with mean `1 / p_bad_to_good`, so
    /// `p_bad_to_good = 1 / mean_burst_len`; the stationary share of bad
    /// packets `p_gb / (p_gb + p_bg)` equals `loss_rate` when
    /// `p_good_to_bad = loss_rate * p_bad_to_good / (1 - loss_rate)`.
    /// Not every pair is reachable (bursts of mean 1 allow at most 50% loss);
    /// out-of-range inputs give a model that [`LossModel::validate`] rejects.
    /// A `loss_rate` of exactly 1 gives a chain that stays bad.
    pub fn gilbert_from_mean(loss_rate: f64, mean_burst_len: f64) -> LossModel {
        let p_bad_to_good = 1.0 / mean_burst_len;
        let (p_good_to_bad, p_bad_to_good) = if loss_rate == 1.0 {
            (1.0, 0.0)
        } else {
            (loss_rate * p_bad_to_good / (1.0 - loss_rate), p_bad_to_good)
        };
        LossModel::GilbertElliott {
            p_good_to_bad,
            p_bad_to_good,
            loss_in_good: 0.0,
            loss_in_bad: 1.0,
            idle_reset: None,
        }
    }

    /// The same model with a Gilbert-Elliott chain's idle reset set to `gap`
    /// (see [`LossModel::GilbertElliott`]); other models are unchanged.
    pub fn with_idle_reset(mut self, gap: Option<Duration>) -> LossModel {
        if let LossModel::GilbertElliott { idle_reset, .. } = &mut self {
            *idle_reset = gap;
        }
        self
    }

    /// Checks the parameters: probabilities and rates finite and in [0, 1],
    /// standard deviation >= 0, interval > 0, replay pattern non-empty.
    ///
    /// Exists so the CLI and scenario loader can reject bad flags with a
    /// message; a [`LossProcess`] built from an invalid model still never
    /// panics (it clamps, and treats NaN as 0).
    pub fn validate(&self) -> Result<(), String> {
        match self {
            LossModel::None => Ok(()),
            LossModel::Bernoulli { p } => check_probability("loss probability p", *p),
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
                idle_reset,
            } => {
                if idle_reset.is_some_and(|d| d.is_zero()) {
                    return Err("the Gilbert-Elliott idle reset must be longer than 0".into());
                }
                check_probability("p_good_to_bad", *p_good_to_bad)?;
                check_probability(
                    "p_bad_to_good (1 / mean burst length; bursts must average >= 1 packet)",
                    *p_bad_to_good,
                )?;
                check_probability("loss_in_good", *loss_in_good)?;
                check_probability("loss_in_bad", *loss_in_bad)
            }
            LossModel::Varying {
                mean,
                std_dev,
                interval,
            } => {
                check_probability("mean loss rate", *mean)?;
                if !(std_dev.is_finite() && *std_dev >= 0.0) {
                    return Err(format!("std_dev must be finite and >= 0, got {std_dev}"));
                }
                if interval.is_zero() {
                    return Err("the rate interval must be > 0".to_string());
                }
                Ok(())
            }
            LossModel::Replay { pattern } => {
                if pattern.is_empty() {
                    Err("the replayed loss pattern is empty".to_string())
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The long-run fraction of packets this model loses (for Varying, before
    /// clamping effects).
    ///
    /// Exists for reports and for checks that a configured model means what
    /// the user asked for.
    pub fn mean_loss_rate(&self) -> f64 {
        match self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => *p,
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
                ..
            } => {
                let total = p_good_to_bad + p_bad_to_good;
                if total <= 0.0 {
                    // The chain never moves; it starts in the good state.
                    return *loss_in_good;
                }
                let bad = p_good_to_bad / total;
                bad * loss_in_bad + (1.0 - bad) * loss_in_good
            }
            LossModel::Varying { mean, .. } => *mean,
            LossModel::Replay { pattern } => {
                if pattern.is_empty() {
                    0.0
                } else {
                    pattern.iter().filter(|&&lost| lost).count() as f64 / pattern.len() as f64
                }
            }
        }
    }

    /// Loads a recorded loss pattern: one `0` (delivered) or `1` (lost) per
    /// line, at most [`MAX_TRACE_FILE_BYTES`] bytes and [`MAX_TRACE_LINES`]
    /// lines. Errors name the file and line.
    pub fn replay_from_file(path: &Path) -> Result<LossModel, TraceError> {
        let shown = path.display().to_string();
        let text = crate::trace::read_text_file(path, MAX_TRACE_FILE_BYTES, "loss-pattern")?;
        LossModel::parse_replay(&text, &shown)
    }

    /// Parses a loss pattern (see [`LossModel::replay_from_file`]); `origin`
    /// names it in errors.
    pub fn parse_replay(text: &str, origin: &str) -> Result<LossModel, TraceError> {
        let mut pattern = Vec::new();
        for (index, raw) in text.lines().enumerate() {
            if index >= MAX_TRACE_LINES {
                return Err(TraceError::Parse {
                    path: origin.to_string(),
                    line: index.saturating_add(1),
                    reason: crate::trace::too_many_lines("loss-pattern"),
                });
            }
            let lost = match raw.trim() {
                "0" => false,
                "1" => true,
                other => {
                    return Err(TraceError::Parse {
                        path: origin.to_string(),
                        line: index.saturating_add(1),
                        reason: format!("expected 0 (delivered) or 1 (lost), got {other:?}"),
                    })
                }
            };
            pattern.push(lost);
        }
        if pattern.is_empty() {
            return Err(TraceError::Empty {
                path: origin.to_string(),
            });
        }
        Ok(LossModel::Replay {
            pattern: Arc::new(pattern),
        })
    }
}

/// `Ok` if `x` is a finite probability.
/// The long-run share of packets a chain with these (clamped) transition
/// probabilities spends in the bad state; 0 for a chain that never moves
/// (it starts, and stays, good).
fn stationary_bad(p_gb: f64, p_bg: f64) -> f64 {
    let total = p_gb + p_bg;
    if total > 0.0 {
        p_gb / total
    } else {
        0.0
    }
}

fn check_probability(what: &str, x: f64) -> Result<(), String> {
    if x.is_finite() && (0.0..=1.0).contains(&x) {
        Ok(())
    } else {
        Err(format!("{what} must be in [0, 1], got {x}"))
    }
}

/// Clamps to [0, 1]; NaN becomes 0 (a process never panics on a bad model).
fn clamp_probability(x: f64) -> f64 {
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

/// One seeded run of a [`LossModel`]: decides packet by packet.
///
/// Exists so loss state (the Gilbert-Elliott state, the current varying rate,
/// the replay position) lives in one place with its own RNG stream.
#[derive(Clone, Debug)]
pub struct LossProcess {
    state: State,
    rng: ChaCha8Rng,
}

/// The per-model state of a [`LossProcess`], parameters already clamped.
#[derive(Clone, Debug)]
enum State {
    None,
    Bernoulli {
        p: f64,
    },
    Gilbert {
        p_gb: f64,
        p_bg: f64,
        loss_good: f64,
        loss_bad: f64,
        bad: bool,
        idle_reset: Option<Duration>,
        /// Arrival time of the previous packet.
        last: Option<Instant>,
    },
    Varying {
        mean: f64,
        std_dev: f64,
        interval_ns: u64,
        rate: f64,
        /// The rate is valid until (excluding) this time; `None` before the
        /// first packet.
        valid_until: Option<Instant>,
    },
    Replay {
        pattern: Arc<Vec<bool>>,
        next: usize,
    },
}

impl LossProcess {
    /// Starts a run of `model` with the RNG stream `seed`.
    ///
    /// A Gilbert-Elliott chain starts in a state drawn from its stationary
    /// distribution, so short runs are not biased towards the good state.
    pub fn new(model: &LossModel, seed: u64) -> LossProcess {
        let mut rng = rng_from_seed(seed);
        let state = match model {
            LossModel::None => State::None,
            LossModel::Bernoulli { p } => State::Bernoulli {
                p: clamp_probability(*p),
            },
            LossModel::GilbertElliott {
                p_good_to_bad,
                p_bad_to_good,
                loss_in_good,
                loss_in_bad,
                idle_reset,
            } => {
                let p_gb = clamp_probability(*p_good_to_bad);
                let p_bg = clamp_probability(*p_bad_to_good);
                State::Gilbert {
                    p_gb,
                    p_bg,
                    loss_good: clamp_probability(*loss_in_good),
                    loss_bad: clamp_probability(*loss_in_bad),
                    bad: unit_f64(&mut rng) < stationary_bad(p_gb, p_bg),
                    idle_reset: *idle_reset,
                    last: None,
                }
            }
            LossModel::Varying {
                mean,
                std_dev,
                interval,
            } => State::Varying {
                mean: clamp_probability(*mean),
                std_dev: if std_dev.is_finite() {
                    std_dev.max(0.0)
                } else {
                    0.0
                },
                interval_ns: u64::try_from(interval.as_nanos()).unwrap_or(u64::MAX),
                rate: 0.0,
                valid_until: None,
            },
            LossModel::Replay { pattern } => State::Replay {
                pattern: Arc::clone(pattern),
                next: 0,
            },
        };
        LossProcess { state, rng }
    }

    /// Decides the fate of the packet arriving at `now`: `true` = drop it.
    ///
    /// Call exactly once per offered packet, in arrival order.
    pub fn should_drop(&mut self, now: Instant) -> bool {
        let rng = &mut self.rng;
        match &mut self.state {
            State::None => false,
            // unit_f64 < 1 always, so p = 1 drops all and p = 0 none.
            State::Bernoulli { p } => unit_f64(rng) < *p,
            State::Gilbert {
                p_gb,
                p_bg,
                loss_good,
                loss_bad,
                bad,
                idle_reset,
                last,
            } => {
                let idle = last.map(|l| now.saturating_duration_since(l));
                *last = Some(now);
                if let (Some(gap), Some(reset)) = (idle, *idle_reset) {
                    if gap >= reset {
                        *bad = unit_f64(rng) < stationary_bad(*p_gb, *p_bg);
                    }
                }
                let flip = if *bad { *p_bg } else { *p_gb };
                if unit_f64(rng) < flip {
                    *bad = !*bad;
                }
                let p = if *bad { *loss_bad } else { *loss_good };
                // Skip the draw for the deterministic 0/1 cases.
                if p <= 0.0 {
                    false
                } else if p >= 1.0 {
                    true
                } else {
                    unit_f64(rng) < p
                }
            }
            State::Varying {
                mean,
                std_dev,
                interval_ns,
                rate,
                valid_until,
            } => {
                if valid_until.is_none_or(|until| now >= until) {
                    *rate = clamp_probability(*mean + *std_dev * standard_normal(rng));
                    // The period containing `now` on the grid of multiples of
                    // `interval`; one draw covers any idle gap.
                    let step = (*interval_ns).max(1);
                    let period_end = (now.as_nanos() / step)
                        .saturating_add(1)
                        .saturating_mul(step);
                    *valid_until = Some(Instant::from_nanos(period_end));
                }
                unit_f64(rng) < *rate
            }
            State::Replay { pattern, next } => {
                let Some(&lost) = pattern.get(*next) else {
                    // Only an empty pattern gets here: never drop.
                    return false;
                };
                *next = if next.saturating_add(1) >= pattern.len() {
                    0
                } else {
                    *next + 1
                };
                lost
            }
        }
    }
}

/// An approximately standard normal draw: the sum of 12 uniforms minus 6
/// (Irwin-Hall), mean 0 and variance exactly 1, bounded to +-6.
///
/// Chosen over Box-Muller because it needs only additions, which IEEE 754
/// makes bit-exact on every platform (`ln`/`cos` come from the platform's libm
/// and may differ in the last bit), so a varying-loss run is reproducible
/// across machines. The +-6 sigma bound is irrelevant once the rate is
/// clamped to [0, 1].
fn standard_normal(rng: &mut ChaCha8Rng) -> f64 {
    (0..12).map(|_| unit_f64(rng)).sum::<f64>() - 6.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Runs `n` packets one per `spacing` and returns the drop pattern.
    fn run(model: &LossModel, seed: u64, n: usize, spacing: Duration) -> Vec<bool> {
        let mut p = LossProcess::new(model, seed);
        (0..n)
            .map(|i| p.should_drop(Instant::ZERO + spacing * i as u32))
            .collect()
    }

    fn bursts(pattern: &[bool]) -> Vec<usize> {
        pattern
            .split(|&lost| !lost)
            .map(|run| run.len())
            .filter(|&l| l > 0)
            .collect()
    }

    #[test]
    fn bernoulli_matches_p_within_five_sigma() {
        let n = 200_000;
        let p = 0.04;
        let pattern = run(&LossModel::Bernoulli { p }, 1, n, Duration::from_micros(10));
        let measured = pattern.iter().filter(|&&l| l).count() as f64 / n as f64;
        let sigma = (p * (1.0 - p) / n as f64).sqrt();
        assert!(
            (measured - p).abs() < 5.0 * sigma,
            "measured {measured}, sigma {sigma}"
        );
    }

    #[test]
    fn bernoulli_edges_are_exact() {
        let all = run(
            &LossModel::Bernoulli { p: 1.0 },
            3,
            1000,
            Duration::from_millis(1),
        );
        assert!(all.iter().all(|&l| l));
        let none = run(
            &LossModel::Bernoulli { p: 0.0 },
            3,
            1000,
            Duration::from_millis(1),
        );
        assert!(none.iter().all(|&l| !l));
        let none = run(&LossModel::None, 3, 1000, Duration::from_millis(1));
        assert!(none.iter().all(|&l| !l));
    }

    #[test]
    fn gilbert_idle_reset_ends_bursts_across_silences() {
        // Bursts of mean 50 packets at 3%: probes 1 s apart would all fall
        // into the same burst without a reset.
        let plain = LossModel::gilbert_from_mean(0.03, 50.0);
        let reset = plain
            .clone()
            .with_idle_reset(Some(Duration::from_millis(100)));
        reset.validate().expect("valid");
        let sparse = |m: &LossModel, seed| run(m, seed, 20_000, Duration::from_secs(1));
        let longest = |p: &[bool]| bursts(p).into_iter().max().unwrap_or(0);
        let (mut plain_max, mut reset_max) = (0, 0);
        for seed in 0..5 {
            plain_max = plain_max.max(longest(&sparse(&plain, seed)));
            reset_max = reset_max.max(longest(&sparse(&reset, seed)));
        }
        // Without the reset, ~12 bursts of mean 50 per run; with it every
        // sparse packet is a fresh 3% draw (a run of 5 has odds ~5e-4 per
        // 20 000 packets x 5 seeds).
        assert!(
            plain_max >= 50,
            "plain chain's longest sparse burst {plain_max}"
        );
        assert!(
            reset_max <= 4,
            "reset chain's longest sparse burst {reset_max}"
        );
        let rate = |p: &[bool]| p.iter().filter(|&&l| l).count() as f64 / p.len() as f64;
        let r = rate(&sparse(&reset, 9));
        assert!((r - 0.03).abs() < 0.006, "sparse loss rate with reset {r}");
        // Back-to-back packets (1 µs apart) never trigger it: same pattern.
        let dense = |m: &LossModel| run(m, 4, 10_000, Duration::from_micros(1));
        assert_eq!(dense(&plain), dense(&reset));
        // Zero is rejected; the field round-trips and defaults to absent.
        assert!(plain
            .clone()
            .with_idle_reset(Some(Duration::ZERO))
            .validate()
            .is_err());
        let json = serde_json::to_string(&reset).expect("serialises");
        assert_eq!(serde_json::from_str::<LossModel>(&json).ok(), Some(reset));
        let json = serde_json::to_string(&plain).expect("serialises");
        assert!(!json.contains("idle_reset"), "{json}");
    }

    #[test]
    fn gilbert_matches_mean_rate_and_burst_length() {
        let (rate, burst) = (0.05, 4.0);
        let model = LossModel::gilbert_from_mean(rate, burst);
        model.validate().expect("valid parameters");
        assert!((model.mean_loss_rate() - rate).abs() < 1e-12);
        let n = 1_000_000;
        let pattern = run(&model, 11, n, Duration::from_micros(1));
        let measured = pattern.iter().filter(|&&l| l).count() as f64 / n as f64;
        let b = bursts(&pattern);
        let mean_burst = b.iter().sum::<usize>() as f64 / b.len() as f64;
        // Bursts are geometric (sd ~ 3.5 for mean 4) and ~12 500 of them:
        // standard error ~ 0.03 on the burst mean, ~ 0.0006 on the rate.
        assert!((measured - rate).abs() < 0.004, "loss rate {measured}");
        assert!((mean_burst - burst).abs() < 0.2, "mean burst {mean_burst}");
        // A Bernoulli pattern of the same rate has bursts of mean ~1.05.
        let iid = run(
            &LossModel::Bernoulli { p: rate },
            11,
            n,
            Duration::from_micros(1),
        );
        let b = bursts(&iid);
        let iid_burst = b.iter().sum::<usize>() as f64 / b.len() as f64;
        assert!(iid_burst < 1.1, "iid burst {iid_burst}");
    }

    #[test]
    fn gilbert_general_form_mean() {
        let model = LossModel::GilbertElliott {
            p_good_to_bad: 0.01,
            p_bad_to_good: 0.1,
            loss_in_good: 0.01,
            loss_in_bad: 0.5,
            idle_reset: None,
        };
        let expected = model.mean_loss_rate();
        let n = 1_000_000;
        let pattern = run(&model, 5, n, Duration::from_micros(1));
        let measured = pattern.iter().filter(|&&l| l).count() as f64 / n as f64;
        assert!(
            (measured - expected).abs() < 0.1 * expected,
            "{measured} vs {expected}"
        );
    }

    #[test]
    fn gilbert_from_mean_rejects_unreachable_pairs() {
        assert!(LossModel::gilbert_from_mean(0.9, 1.0).validate().is_err());
        assert!(LossModel::gilbert_from_mean(0.1, 0.5).validate().is_err());
        assert!(LossModel::gilbert_from_mean(0.1, f64::NAN)
            .validate()
            .is_err());
        let always = LossModel::gilbert_from_mean(1.0, 3.0);
        always.validate().expect("loss 1 is representable");
        let pattern = run(&always, 2, 100, Duration::from_millis(1));
        assert!(pattern[1..].iter().all(|&l| l));
    }

    #[test]
    fn varying_long_run_mean_matches_and_rate_really_varies() {
        let (mean, std_dev) = (0.05, 0.02);
        let interval = Duration::from_millis(100);
        let model = LossModel::Varying {
            mean,
            std_dev,
            interval,
        };
        model.validate().expect("valid");
        // One packet per ms for 1000 s: 10 000 rate periods of 100 packets.
        let n = 1_000_000;
        let pattern = run(&model, 9, n, Duration::from_millis(1));
        let measured = pattern.iter().filter(|&&l| l).count() as f64 / n as f64;
        // sd of the mean ~ sqrt(0.02^2/1e4 + 0.05/1e6) ~ 3e-4.
        assert!((measured - mean).abs() < 0.002, "long-run mean {measured}");
        // Per-period rates spread like sqrt(sd^2 + p(1-p)/100) ~ 0.030, while
        // a constant rate would only give the binomial ~ 0.022.
        let per_period: Vec<f64> = pattern
            .chunks(100)
            .map(|c| c.iter().filter(|&&l| l).count() as f64 / 100.0)
            .collect();
        let m = per_period.iter().sum::<f64>() / per_period.len() as f64;
        let var = per_period.iter().map(|x| (x - m).powi(2)).sum::<f64>() / per_period.len() as f64;
        assert!(var.sqrt() > 0.026, "per-period sd {}", var.sqrt());
    }

    #[test]
    fn varying_rate_holds_within_an_interval() {
        // With sd large, the rate changes between intervals but stays
        // fixed inside one: many packets at one instant share a rate.
        let model = LossModel::Varying {
            mean: 0.5,
            std_dev: 10.0,
            interval: Duration::from_millis(10),
        };
        let mut p = LossProcess::new(&model, 4);
        let mut fully_lost_or_kept = 0;
        for period in 0..200u64 {
            let t = Instant::from_millis(period * 10 + 3);
            let lost = (0..50).filter(|_| p.should_drop(t)).count();
            // sd 10 clamps the rate to 0 or 1 nearly always.
            if lost == 0 || lost == 50 {
                fully_lost_or_kept += 1;
            }
        }
        assert!(fully_lost_or_kept > 190, "{fully_lost_or_kept}");
    }

    #[test]
    fn replay_loops_and_parses_with_line_numbers() {
        let model = LossModel::parse_replay("0\n1\n1\n", "pat").expect("valid");
        let pattern = run(&model, 0, 7, Duration::from_millis(1));
        assert_eq!(pattern, [false, true, true, false, true, true, false]);
        assert!((model.mean_loss_rate() - 2.0 / 3.0).abs() < 1e-12);

        match LossModel::parse_replay("0\n1\n2\n", "pat.txt") {
            Err(TraceError::Parse { path, line, .. }) => {
                assert_eq!((path.as_str(), line), ("pat.txt", 3));
            }
            other => panic!("expected parse error, got {other:?}"),
        }
        assert!(matches!(
            LossModel::parse_replay("", "e"),
            Err(TraceError::Empty { .. })
        ));
        let e = LossModel::replay_from_file(Path::new("/nonexistent/p.txt")).expect_err("missing");
        assert!(e.to_string().contains("/nonexistent/p.txt"));
    }

    #[test]
    fn replay_files_are_read_with_limits() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            if !Path::new(dev).exists() {
                continue;
            }
            let e = LossModel::replay_from_file(Path::new(dev)).expect_err("no end");
            let text = e.to_string();
            assert!(
                text.starts_with(dev) && text.contains("64 MiB") && text.contains("loss-pattern"),
                "{text}"
            );
        }
        let text = "0\n".repeat(MAX_TRACE_LINES + 1);
        match LossModel::parse_replay(&text, "long") {
            Err(TraceError::Parse { line, reason, .. }) => {
                assert_eq!(line, MAX_TRACE_LINES + 1);
                assert!(reason.contains("more than"), "{reason}");
            }
            other => panic!("expected a line-limit error, got {other:?}"),
        }
    }

    #[test]
    fn validate_rejects_bad_parameters() {
        assert!(LossModel::Bernoulli { p: 1.5 }.validate().is_err());
        assert!(LossModel::Bernoulli { p: -0.1 }.validate().is_err());
        assert!(LossModel::Bernoulli { p: f64::NAN }.validate().is_err());
        assert!(LossModel::Bernoulli { p: 0.3 }.validate().is_ok());
        let v = |mean, std_dev, ms| LossModel::Varying {
            mean,
            std_dev,
            interval: Duration::from_millis(ms),
        };
        assert!(v(0.1, 0.01, 100).validate().is_ok());
        assert!(v(0.1, -0.01, 100).validate().is_err());
        assert!(v(0.1, 0.01, 0).validate().is_err());
        assert!(v(1.1, 0.01, 10).validate().is_err());
        assert!(LossModel::Replay {
            pattern: Arc::new(vec![])
        }
        .validate()
        .is_err());
    }

    #[test]
    fn same_seed_same_pattern_different_seed_different() {
        let m = LossModel::gilbert_from_mean(0.1, 3.0);
        let a = run(&m, 77, 5000, Duration::from_millis(1));
        let b = run(&m, 77, 5000, Duration::from_millis(1));
        let c = run(&m, 78, 5000, Duration::from_millis(1));
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn serde_round_trips_with_stable_names() {
        let models = [
            LossModel::None,
            LossModel::Bernoulli { p: 0.25 },
            LossModel::gilbert_from_mean(0.02, 3.0),
            LossModel::Varying {
                mean: 0.05,
                std_dev: 0.01,
                interval: Duration::from_millis(250),
            },
            LossModel::Replay {
                pattern: Arc::new(vec![true, false]),
            },
        ];
        for m in &models {
            let json = serde_json::to_string(m).expect("serialises");
            let back: LossModel = serde_json::from_str(&json).expect("deserialises");
            assert_eq!(&back, m, "{json}");
        }
        let json = serde_json::to_string(&models[1]).expect("serialises");
        assert_eq!(json, r#"{"model":"bernoulli","p":0.25}"#);
    }

    proptest! {
        #[test]
        fn invalid_models_never_panic(p in proptest::num::f64::ANY, q in proptest::num::f64::ANY,
                                      ms in 0u64..10, seed: u64) {
            let models = [
                LossModel::Bernoulli { p },
                LossModel::GilbertElliott { p_good_to_bad: p, p_bad_to_good: q, loss_in_good: q, loss_in_bad: p, idle_reset: None },
                LossModel::Varying { mean: p, std_dev: q, interval: Duration::from_millis(ms) },
                LossModel::Replay { pattern: Arc::new(vec![]) },
                LossModel::gilbert_from_mean(p, q),
            ];
            for m in &models {
                let _ = m.validate();
                let _ = m.mean_loss_rate();
                let mut proc_ = LossProcess::new(m, seed);
                for i in 0..20u64 {
                    let _ = proc_.should_drop(Instant::from_millis(i));
                }
            }
        }
    }
}
