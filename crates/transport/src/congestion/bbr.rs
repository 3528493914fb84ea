//! BBR version 1 (draft-cardwell-iccrg-bbr-congestion-control-00).
//!
//! BBR models the path by two numbers, the bottleneck bandwidth `BtlBw` (a
//! windowed maximum of delivery-rate samples over 10 round trips) and the
//! round-trip propagation time `RTprop` (a windowed minimum of RTT samples
//! over 10 seconds), and sends at `pacing_gain * BtlBw` with at most
//! `cwnd_gain * BtlBw * RTprop` (+ 3 datagrams) in flight. A state machine
//! varies the gains: Startup (2/ln 2) until the bandwidth stops growing,
//! Drain (ln 2 / 2) to empty the queue Startup built, ProbeBW (an 8-phase
//! cycle 1.25, 0.75, 1 × 6) in steady state, and ProbeRTT (4 datagrams for
//! 200 ms and one round) when `RTprop` has not been refreshed for 10 s.
//!
//! Choices the draft leaves open, and ours:
//! - Round trips are counted with the delivered counts of the ACK's
//!   [`RateSample`] (`prior_delivered` against `next_round_delivered`); an ACK
//!   without a valid sample does not advance the round count.
//! - Loss: no reduction (BBR v1's "conservation" recovery is not used), except
//!   that persistent congestion (RFC 9002 §7.6) collapses the window to the
//!   RFC minimum; BBR's 4-datagram floor applies again on the next ACK.
//!   Losses still end a ProbeBW 1.25 phase early, as the draft says.
//! - ECN-CE is ignored: BBR v1 does not respond to ECN.
//! - The quantization headroom is `3 * max_datagram_size` (QUIC sends no TSO
//!   super-segments; the draft's send quantum reduces to one datagram).
//! - The ProbeBW start phase is chosen with a ChaCha8 RNG seeded by the
//!   caller; no OS randomness.
//! - During ProbeRTT the draft marks the delivery-rate estimator
//!   application-limited ("ignore low rate samples during ProbeRTT",
//!   §4.3.5). The controller cannot reach the estimator, so it does the
//!   equivalent itself: a sample of a packet sent under ProbeRTT's clamp
//!   counts as application-limited (`Bbr::clamped`). The max filter
//!   does not make this redundant: after more than 10 rounds of
//!   application-limited samples (a flow-control-limited sender) its
//!   maximum has expired, and the first clamped sample would replace it.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use wire::time::{Duration, Instant};

use super::{initial_window, minimum_window, mul_div, Controller, RateSample};
use crate::rtt::RttEstimator;

mod filter;

use filter::MaxFilter;

/// Startup pacing and window gain, `2 / ln 2` (draft §4.3.2.1).
pub const HIGH_GAIN: f64 = 2.0 / core::f64::consts::LN_2;
/// Drain pacing gain, `ln 2 / 2`, the inverse of [`HIGH_GAIN`] (draft §4.3.3).
pub const DRAIN_GAIN: f64 = core::f64::consts::LN_2 / 2.0;
/// ProbeBW window gain (draft §4.3.4).
pub const CWND_GAIN: f64 = 2.0;
/// ProbeBW pacing gain cycle (draft §4.3.4.3).
pub const PACING_GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// Length of the bottleneck-bandwidth max filter, in round trips (§4.1.1.3).
pub const BTL_BW_FILTER_ROUNDS: u64 = 10;
/// Length of the RTprop min filter (draft §4.1.2.3).
pub const RTPROP_FILTER_LEN: Duration = Duration::from_secs(10);
/// Time spent at the minimum window in ProbeRTT (draft §4.3.5).
pub const PROBE_RTT_DURATION: Duration = Duration::from_millis(200);
/// BBR's window floor, in datagrams (`BBRMinPipeCwnd`, draft §4.2.3.1).
pub const MIN_PIPE_CWND_PACKETS: u64 = 4;
/// Datagrams of headroom added to the target window for quantization.
const QUANTA_PACKETS: u64 = 3;
/// Rounds without 25% bandwidth growth after which the pipe is full.
const FULL_BW_ROUNDS: u32 = 3;
/// Growth factor that counts as "still growing" in Startup.
const FULL_BW_THRESHOLD: f64 = 1.25;
/// RTT assumed for the initial pacing rate before any sample (draft §4.2.1).
const NO_RTT_PACING_RTT: Duration = Duration::from_millis(1);

/// BBR's state machine modes (draft §4.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BbrMode {
    /// Exponential search for the bottleneck bandwidth.
    Startup,
    /// Draining the queue built during Startup.
    Drain,
    /// Steady state, cycling the pacing gain to probe for bandwidth.
    ProbeBw,
    /// Briefly at a minimal window to re-measure RTprop.
    ProbeRtt,
}

/// The BBR v1 congestion controller.
#[derive(Clone, Debug)]
pub struct Bbr {
    max_datagram_size: u64,
    mode: BbrMode,
    cwnd: u64,
    /// Window saved on entering ProbeRTT, restored on leaving it.
    prior_cwnd: u64,
    pacing_rate: u64,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// `BtlBw`, bytes per second, from `btl_bw_filter`.
    btl_bw: u64,
    btl_bw_filter: MaxFilter,
    /// `RTprop`, `None` until the first sample.
    rtprop: Option<Duration>,
    rtprop_stamp: Instant,
    rtprop_expired: bool,
    /// Delivered count (from the latest rate sample) and round accounting.
    delivered: u64,
    next_round_delivered: u64,
    round_count: u64,
    round_start: bool,
    /// Startup exit detection (draft §4.3.2.2).
    filled_pipe: bool,
    full_bw: u64,
    full_bw_count: u32,
    /// ProbeBW gain cycle position and the start of the current phase.
    cycle_index: usize,
    cycle_stamp: Instant,
    /// ProbeRTT progress (draft §4.3.5).
    probe_rtt_done_stamp: Option<Instant>,
    probe_rtt_round_done: bool,
    /// Delivered counts between which packets were sent under ProbeRTT's
    /// window of 4 packets (the end `u64::MAX` while still in it): their
    /// rate samples measure that clamp, not the path ([`Bbr::clamped`]).
    probe_rtt_sent: Option<(u64, u64)>,
    /// Sending restarted from idle while application-limited.
    idle_restart: bool,
    /// Whether the initial pacing rate was recomputed from a real RTT.
    has_seen_rtt: bool,
    /// The last application-limited state reported by the transport.
    app_limited: bool,
    /// Bytes newly acknowledged by the ACK frame being processed.
    acked_in_frame: u64,
    /// Whether losses were declared since the last `on_end_acks`.
    lost_since_ack: bool,
    rng: ChaCha8Rng,
}

impl Bbr {
    /// A controller in Startup at the initial window (RFC 9002 §7.2). `seed`
    /// drives the random ProbeBW start phase.
    pub fn new(now: Instant, max_datagram_size: u64, seed: u64) -> Self {
        let cwnd = initial_window(max_datagram_size);
        Bbr {
            max_datagram_size,
            mode: BbrMode::Startup,
            cwnd,
            prior_cwnd: cwnd,
            // draft §4.2.1: initial pacing rate from the initial window and a
            // nominal 1 ms RTT; recomputed once an RTT is known.
            pacing_rate: rate_with_gain(
                mul_div(cwnd, 1_000_000_000, nanos(NO_RTT_PACING_RTT)),
                HIGH_GAIN,
            )
            .max(1),
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            btl_bw: 0,
            btl_bw_filter: MaxFilter::new(BTL_BW_FILTER_ROUNDS),
            rtprop: None,
            rtprop_stamp: now,
            rtprop_expired: false,
            delivered: 0,
            next_round_delivered: 0,
            round_count: 0,
            round_start: false,
            filled_pipe: false,
            full_bw: 0,
            full_bw_count: 0,
            cycle_index: 0,
            cycle_stamp: now,
            probe_rtt_done_stamp: None,
            probe_rtt_round_done: false,
            probe_rtt_sent: None,
            idle_restart: false,
            has_seen_rtt: false,
            app_limited: false,
            acked_in_frame: 0,
            lost_since_ack: false,
            rng: ChaCha8Rng::seed_from_u64(seed),
        }
    }

    /// The current mode.
    pub fn mode(&self) -> BbrMode {
        self.mode
    }

    /// The bottleneck bandwidth estimate, bytes per second (0 before any
    /// sample).
    pub fn btl_bw(&self) -> u64 {
        self.btl_bw
    }

    /// The round-trip propagation time estimate, once measured.
    pub fn rtprop(&self) -> Option<Duration> {
        self.rtprop
    }

    /// Round trips counted so far.
    pub fn round_count(&self) -> u64 {
        self.round_count
    }

    fn min_pipe_cwnd(&self) -> u64 {
        MIN_PIPE_CWND_PACKETS.saturating_mul(self.max_datagram_size.max(1))
    }

    /// `BBRInflight(gain)`: `gain * BtlBw * RTprop + quanta` (draft
    /// §4.2.3.2), or the initial window before RTprop is known.
    fn inflight(&self, gain: f64) -> u64 {
        match self.rtprop {
            None => initial_window(self.max_datagram_size),
            Some(rtprop) => {
                let bdp = mul_div(self.btl_bw, nanos(rtprop), 1_000_000_000);
                let quanta = QUANTA_PACKETS.saturating_mul(self.max_datagram_size.max(1));
                rate_with_gain(bdp, gain).saturating_add(quanta)
            }
        }
    }

    /// Whether `rs` measures a packet sent under ProbeRTT's clamp. Such a
    /// sample is limited by the sender, and the draft (§4.3.5) has it
    /// counted as application-limited: it may raise BtlBw, never lower
    /// it, and it says nothing about whether the pipe is full. Without
    /// this, after a long flow-control-limited stretch (every sample
    /// application-limited, so the windowed maximum not refreshed for over
    /// 10 rounds) the first such sample replaced the maximum, and BtlBw
    /// fell to 4 packets per RTT: at Fig. 24's setting from about 98
    /// Mbit/s to under 1 Mbit/s, regrown by 1.25x per 8-RTT cycle
    /// (docs/recovery.md, "art+").
    fn clamped(&self, rs: &RateSample) -> bool {
        self.probe_rtt_sent
            .is_some_and(|(from, to)| (from..=to).contains(&rs.prior_delivered))
    }

    /// draft §4.1.1.2 `BBRUpdateRound` and §4.1.1.3 `BBRUpdateBtlBw`.
    fn update_btl_bw(&mut self, rs: &RateSample) {
        self.delivered = rs.prior_delivered.saturating_add(rs.delivered);
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = self.delivered;
            self.round_count += 1;
            self.round_start = true;
        } else {
            self.round_start = false;
        }
        // An application-limited (or clamped) sample only counts if it
        // raises the max.
        if rs.delivery_rate >= self.btl_bw || !(rs.is_app_limited || self.clamped(rs)) {
            self.btl_bw = self
                .btl_bw_filter
                .update(self.round_count, rs.delivery_rate);
        }
    }

    /// draft §4.3.4.4 `BBRCheckCyclePhase`.
    fn check_cycle_phase(&mut self, now: Instant, prior_inflight: u64, lost: bool) {
        if self.mode != BbrMode::ProbeBw {
            return;
        }
        let rtprop = self.rtprop.unwrap_or(Duration::ZERO);
        let full_length = now.saturating_duration_since(self.cycle_stamp) > rtprop;
        let next = if self.pacing_gain == 1.0 {
            full_length
        } else if self.pacing_gain > 1.0 {
            full_length && (lost || prior_inflight >= self.inflight(self.pacing_gain))
        } else {
            full_length || prior_inflight <= self.inflight(1.0)
        };
        if next {
            self.advance_cycle_phase(now);
        }
    }

    fn advance_cycle_phase(&mut self, now: Instant) {
        self.cycle_stamp = now;
        self.cycle_index = (self.cycle_index + 1) % PACING_GAIN_CYCLE.len();
        self.pacing_gain = PACING_GAIN_CYCLE[self.cycle_index];
    }

    /// draft §4.3.2.2 `BBRCheckFullPipe`.
    fn check_full_pipe(&mut self, rs: &RateSample) {
        if self.filled_pipe || !self.round_start || rs.is_app_limited || self.clamped(rs) {
            return;
        }
        if self.btl_bw as f64 >= self.full_bw as f64 * FULL_BW_THRESHOLD {
            self.full_bw = self.btl_bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= FULL_BW_ROUNDS {
            self.filled_pipe = true;
        }
    }

    /// draft §4.3.3 `BBRCheckDrain`.
    fn check_drain(&mut self, now: Instant, bytes_in_flight: u64) {
        if self.mode == BbrMode::Startup && self.filled_pipe {
            self.mode = BbrMode::Drain;
            self.pacing_gain = DRAIN_GAIN;
            self.cwnd_gain = HIGH_GAIN;
        }
        if self.mode == BbrMode::Drain && bytes_in_flight <= self.inflight(1.0) {
            self.enter_probe_bw(now);
        }
    }

    /// draft §4.3.4.3 `BBREnterProbeBW`: start at a random phase other than
    /// the 0.75 one.
    fn enter_probe_bw(&mut self, now: Instant) {
        self.mode = BbrMode::ProbeBw;
        self.pacing_gain = 1.0;
        self.cwnd_gain = CWND_GAIN;
        let len = PACING_GAIN_CYCLE.len();
        self.cycle_index = len - 1 - self.rng.gen_range(0..len - 1);
        self.advance_cycle_phase(now);
    }

    fn enter_startup(&mut self) {
        self.mode = BbrMode::Startup;
        self.pacing_gain = HIGH_GAIN;
        self.cwnd_gain = HIGH_GAIN;
    }

    /// draft §4.1.2.3 `BBRUpdateRTprop`.
    fn update_rtprop(&mut self, now: Instant, sample_rtt: Option<Duration>) {
        self.rtprop_expired = now > self.rtprop_stamp + RTPROP_FILTER_LEN;
        if let Some(rtt) = sample_rtt {
            if self.rtprop.is_none_or(|min| rtt <= min) || self.rtprop_expired {
                self.rtprop = Some(rtt);
                self.rtprop_stamp = now;
            }
        }
    }

    /// draft §4.3.5 `BBRCheckProbeRTT` and `BBRHandleProbeRTT`.
    fn check_probe_rtt(&mut self, now: Instant, bytes_in_flight: u64) {
        if self.mode != BbrMode::ProbeRtt && self.rtprop_expired && !self.idle_restart {
            self.mode = BbrMode::ProbeRtt;
            self.pacing_gain = 1.0;
            self.cwnd_gain = 1.0;
            self.prior_cwnd = self.cwnd;
            self.probe_rtt_done_stamp = None;
            self.probe_rtt_sent = Some((self.delivered, u64::MAX));
        }
        if self.mode == BbrMode::ProbeRtt {
            match self.probe_rtt_done_stamp {
                None if bytes_in_flight <= self.min_pipe_cwnd() => {
                    self.probe_rtt_done_stamp = Some(now + PROBE_RTT_DURATION);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = self.delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now > done {
                        self.rtprop_stamp = now;
                        self.cwnd = self.cwnd.max(self.prior_cwnd);
                        self.probe_rtt_done_stamp = None;
                        self.probe_rtt_sent =
                            self.probe_rtt_sent.map(|(from, _)| (from, self.delivered));
                        if self.filled_pipe {
                            self.enter_probe_bw(now);
                        } else {
                            self.enter_startup();
                        }
                    }
                }
            }
        }
        self.idle_restart = false;
    }

    /// draft §4.2.1 `BBRSetPacingRate`.
    fn set_pacing_rate(&mut self, rtt: &RttEstimator) {
        if !self.has_seen_rtt && rtt.has_sample() {
            // draft §4.2.1 BBRInitPacingRate, now with a measured RTT.
            self.has_seen_rtt = true;
            let srtt = nanos(rtt.smoothed()).max(1);
            let nominal = mul_div(self.cwnd, 1_000_000_000, srtt);
            self.pacing_rate = rate_with_gain(nominal, HIGH_GAIN).max(1);
        }
        let rate = rate_with_gain(self.btl_bw, self.pacing_gain);
        if rate > 0 && (self.filled_pipe || rate > self.pacing_rate) {
            self.pacing_rate = rate;
        }
    }

    /// draft §4.2.3 `BBRSetCwnd`, without the loss-recovery modulation.
    fn set_cwnd(&mut self, acked: u64) {
        let target = self.inflight(self.cwnd_gain);
        if self.filled_pipe {
            self.cwnd = self.cwnd.saturating_add(acked).min(target);
        } else if self.cwnd < target || self.delivered < initial_window(self.max_datagram_size) {
            self.cwnd = self.cwnd.saturating_add(acked);
        }
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
        if self.mode == BbrMode::ProbeRtt {
            self.cwnd = self.cwnd.min(self.min_pipe_cwnd());
        }
    }
}

impl Controller for Bbr {
    fn on_packet_sent(&mut self, _now: Instant, bytes: u64, bytes_in_flight: u64) {
        // draft §4.3.4.4 BBRHandleRestartFromIdle: the flight was empty.
        if bytes_in_flight <= bytes && self.app_limited {
            self.idle_restart = true;
            if self.mode == BbrMode::ProbeBw {
                let rate = rate_with_gain(self.btl_bw, 1.0);
                if rate > 0 {
                    self.pacing_rate = rate;
                }
            }
        }
    }

    fn on_ack(
        &mut self,
        _now: Instant,
        _sent_time: Instant,
        bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
        self.acked_in_frame = self.acked_in_frame.saturating_add(bytes);
    }

    fn on_end_acks(
        &mut self,
        now: Instant,
        bytes_in_flight: u64,
        app_limited: bool,
        sample: Option<&RateSample>,
        rtt: &RttEstimator,
    ) {
        let acked = core::mem::take(&mut self.acked_in_frame);
        let lost = core::mem::take(&mut self.lost_since_ack);
        let prior_inflight = bytes_in_flight.saturating_add(acked);
        self.app_limited = app_limited;

        // draft §4.1 BBRUpdateModelAndState.
        match sample {
            Some(rs) => self.update_btl_bw(rs),
            None => self.round_start = false,
        }
        self.check_cycle_phase(now, prior_inflight, lost);
        if let Some(rs) = sample {
            self.check_full_pipe(rs);
        }
        self.check_drain(now, bytes_in_flight);
        self.update_rtprop(now, sample.map(|rs| rs.rtt));
        self.check_probe_rtt(now, bytes_in_flight);

        // draft §4.2 BBRUpdateControlParameters.
        self.set_pacing_rate(rtt);
        self.set_cwnd(acked);
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent_time: Instant,
        _lost_bytes: u64,
        persistent: bool,
        _rtt: &RttEstimator,
    ) {
        self.lost_since_ack = true;
        if persistent {
            // RFC 9002 §7.6.2: persistent congestion collapses the window.
            self.cwnd = minimum_window(self.max_datagram_size);
        }
    }

    fn on_ecn_ce(&mut self, _now: Instant, _sent_time: Instant, _rtt: &RttEstimator) {
        // BBR v1 does not react to ECN.
    }

    fn on_mtu_update(&mut self, max_datagram_size: u64) {
        self.max_datagram_size = max_datagram_size;
        self.cwnd = self.cwnd.max(self.min_pipe_cwnd());
    }

    fn window(&self) -> u64 {
        self.cwnd
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(self.pacing_rate)
    }

    fn name(&self) -> &'static str {
        "bbr"
    }

    fn in_slow_start(&self) -> bool {
        self.mode == BbrMode::Startup
    }
}

/// `value * gain`, saturating, for non-negative finite gains.
fn rate_with_gain(value: u64, gain: f64) -> u64 {
    // `as` saturates out-of-range floats (and maps NaN to 0).
    (value as f64 * gain) as u64
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests;
