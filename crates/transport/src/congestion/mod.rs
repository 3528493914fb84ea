//! Congestion control: how many bytes may be in flight, and how fast to send.
//!
//! The transport owns the packets and the bytes-in-flight count; a
//! [`Controller`] only sees events (sent, acked, lost, ECN-CE, MTU change)
//! and answers with a window and, optionally, a pacing rate. One controller
//! lives in each connection, built from a [`CongestionAlgorithm`] chosen on the
//! command line (`--cc cubic|newreno|bbr`).
//!
//! Three algorithms are provided:
//! - [`NewReno`]: RFC 9002 §7 and Appendix B, the QUIC reference controller.
//! - [`Cubic`]: RFC 9438, the default (as in most deployed stacks).
//! - [`Bbr`]: BBR v1 (draft-cardwell-iccrg-bbr-congestion-control-00), which
//!   needs the delivery-rate samples of [`DeliveryRateEstimator`].
//!
//! Calling protocol, per ACK frame: [`Controller::on_ack`] once per newly
//! acknowledged in-flight packet, then [`Controller::on_congestion_event`] if
//! that ACK made the loss detector declare packets lost, then
//! [`Controller::on_end_acks`] once. Controllers tolerate other orders (and
//! time going backwards) without panicking; they just reason less precisely.
//!
//! Nothing here reads a clock: `now` is an argument.

use core::fmt;
use core::str::FromStr;

use wire::time::Instant;

use crate::rtt::RttEstimator;

pub mod bbr;
pub mod cubic;
pub mod delivery_rate;
pub mod newreno;
pub mod unlimited;

pub use bbr::Bbr;
pub use cubic::Cubic;
pub use delivery_rate::{DeliveryRateEstimator, PacketRateState, RateSample};
pub use newreno::NewReno;
pub use unlimited::Unlimited;

/// Packets in the initial window (RFC 9002 §7.2).
pub const INITIAL_WINDOW_PACKETS: u64 = 10;
/// Byte cap of the initial window, unless two datagrams exceed it
/// (RFC 9002 §7.2: `min(10 * mds, max(14720, 2 * mds))`).
pub const INITIAL_WINDOW_BYTES: u64 = 14_720;
/// Packets in the minimum window (`kMinimumWindow`, RFC 9002 §7.2).
pub const MINIMUM_WINDOW_PACKETS: u64 = 2;

/// The initial congestion window for a path with this maximum datagram size
/// (RFC 9002 §7.2).
pub fn initial_window(max_datagram_size: u64) -> u64 {
    let mds = max_datagram_size.max(1);
    (INITIAL_WINDOW_PACKETS.saturating_mul(mds))
        .min(INITIAL_WINDOW_BYTES.max(2u64.saturating_mul(mds)))
}

/// The smallest congestion window any controller may use: two datagrams
/// (`kMinimumWindow`, RFC 9002 §7.2).
pub fn minimum_window(max_datagram_size: u64) -> u64 {
    MINIMUM_WINDOW_PACKETS.saturating_mul(max_datagram_size.max(1))
}

/// A congestion controller: the per-connection policy deciding the window and
/// the pacing rate from acknowledgments and losses.
///
/// Time, RTT and delivery-rate samples are arguments; implementations hold no
/// clock and no OS randomness, so a simulated run is repeatable.
pub trait Controller: Send + fmt::Debug {
    /// A packet counted in bytes-in-flight was sent. `bytes_in_flight` is the
    /// total after adding it.
    fn on_packet_sent(&mut self, now: Instant, bytes: u64, bytes_in_flight: u64);

    /// One newly acknowledged in-flight packet (called for each, before
    /// [`Controller::on_end_acks`]). `app_limited` says whether the sender was
    /// application- or flow-control-limited (RFC 9002 §7.8): then the window
    /// must not grow.
    fn on_ack(
        &mut self,
        now: Instant,
        sent_time: Instant,
        bytes: u64,
        app_limited: bool,
        rtt: &RttEstimator,
    );

    /// Called once after all packets newly acknowledged by one ACK frame;
    /// `sample` is the delivery-rate sample of that ACK (BBR needs it),
    /// `bytes_in_flight` is the total after removing acked and lost packets.
    /// The default does nothing: only rate-based controllers (BBR) need it.
    fn on_end_acks(
        &mut self,
        _now: Instant,
        _bytes_in_flight: u64,
        _app_limited: bool,
        _sample: Option<&RateSample>,
        _rtt: &RttEstimator,
    ) {
    }

    /// A congestion event: packets were declared lost. `sent_time` is the send
    /// time of the newest lost packet; events for packets sent before the
    /// current recovery period started are ignored (RFC 9002 §7.3.2).
    /// `persistent` means persistent congestion was established (RFC 9002
    /// §7.6): collapse to the minimum window.
    fn on_congestion_event(
        &mut self,
        now: Instant,
        sent_time: Instant,
        lost_bytes: u64,
        persistent: bool,
        rtt: &RttEstimator,
    );

    /// The peer's ECN-CE count rose (RFC 9002 §7.1, §B.7): a congestion event
    /// without loss. `sent_time` is the send time of the largest packet
    /// acknowledged by the ACK frame that reported the increase. The default
    /// treats it like a loss event of zero bytes.
    fn on_ecn_ce(&mut self, now: Instant, sent_time: Instant, rtt: &RttEstimator) {
        self.on_congestion_event(now, sent_time, 0, false, rtt);
    }

    /// The path MTU (maximum datagram size) changed.
    fn on_mtu_update(&mut self, max_datagram_size: u64);

    /// Current congestion window in bytes.
    fn window(&self) -> u64;

    /// Pacing rate in bytes per second chosen by the algorithm, or `None` to
    /// let the transport derive one ([`crate::pacing::default_pacing_rate`]:
    /// `1.25 * cwnd / srtt`, RFC 9002 §7.7).
    fn pacing_rate(&self) -> Option<u64>;

    /// Short name for logs and JSON (`"newreno"`, `"cubic"`, `"bbr"`).
    fn name(&self) -> &'static str;

    /// Whether the algorithm is in slow start (BBR: Startup), for qlog and
    /// stats.
    fn in_slow_start(&self) -> bool;

    /// The slow-start threshold in bytes, for qlog's `metrics_updated`, or
    /// `None` when the algorithm has none or it is still unset (infinite).
    fn ssthresh(&self) -> Option<u64> {
        None
    }
}

/// The congestion control algorithms artq can run, by their command-line name.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum CongestionAlgorithm {
    /// RFC 9002 NewReno (`newreno`, alias `reno`).
    #[serde(alias = "reno")]
    NewReno,
    /// RFC 9438 CUBIC (`cubic`), the default.
    #[default]
    Cubic,
    /// BBR v1 (`bbr`, alias `bbr1`).
    #[serde(alias = "bbr1")]
    Bbr,
    /// No congestion control (`none`): rcp.md's UDP, ARQ and RCP send at
    /// once ([`Unlimited`]). Not in [`CongestionAlgorithm::ALL`].
    None,
}

impl CongestionAlgorithm {
    /// Every algorithm, in a stable order (for help texts and sweeps).
    pub const ALL: [CongestionAlgorithm; 3] = [
        CongestionAlgorithm::NewReno,
        CongestionAlgorithm::Cubic,
        CongestionAlgorithm::Bbr,
    ];

    /// The canonical name, as accepted by `FromStr` and printed by `Display`.
    pub const fn name(self) -> &'static str {
        match self {
            CongestionAlgorithm::NewReno => "newreno",
            CongestionAlgorithm::Cubic => "cubic",
            CongestionAlgorithm::Bbr => "bbr",
            CongestionAlgorithm::None => "none",
        }
    }

    /// A new controller of this kind for a path whose maximum datagram size is
    /// `max_datagram_size`. BBR's random start phase is seeded from `now`
    /// (deterministic for a given start time); use
    /// [`CongestionAlgorithm::build_seeded`] to pass a seed explicitly.
    pub fn build(self, now: Instant, max_datagram_size: u64) -> Box<dyn Controller> {
        self.build_seeded(now, max_datagram_size, now.as_nanos())
    }

    /// Like [`CongestionAlgorithm::build`], with an explicit seed for the
    /// algorithm's randomness (only BBR uses it, for its ProbeBW start phase).
    pub fn build_seeded(
        self,
        now: Instant,
        max_datagram_size: u64,
        seed: u64,
    ) -> Box<dyn Controller> {
        match self {
            CongestionAlgorithm::NewReno => Box::new(NewReno::new(max_datagram_size)),
            CongestionAlgorithm::Cubic => Box::new(Cubic::new(max_datagram_size)),
            CongestionAlgorithm::Bbr => Box::new(Bbr::new(now, max_datagram_size, seed)),
            CongestionAlgorithm::None => Box::new(Unlimited),
        }
    }
}

impl fmt::Display for CongestionAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// An unknown congestion control name was given (for example to `--cc`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown congestion control algorithm `{0}`; valid names: newreno (or reno), cubic, bbr (or bbr1), none")]
pub struct UnknownCongestionAlgorithm(pub String);

impl FromStr for CongestionAlgorithm {
    type Err = UnknownCongestionAlgorithm;

    /// Parses `newreno`/`reno`, `cubic`, `bbr`/`bbr1`, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let lower = s.trim().to_ascii_lowercase();
        match lower.as_str() {
            "newreno" | "reno" => Ok(CongestionAlgorithm::NewReno),
            "cubic" => Ok(CongestionAlgorithm::Cubic),
            "bbr" | "bbr1" => Ok(CongestionAlgorithm::Bbr),
            "none" => Ok(CongestionAlgorithm::None),
            _ => Err(UnknownCongestionAlgorithm(s.to_owned())),
        }
    }
}

/// `a * num / den` in 128-bit arithmetic, saturating at `u64::MAX`; zero if
/// `den` is zero. Shared by the controllers for byte/rate/time products.
pub(crate) fn mul_div(a: u64, num: u64, den: u64) -> u64 {
    if den == 0 {
        return 0;
    }
    u64::try_from(u128::from(a) * u128::from(num) / u128::from(den)).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use wire::time::Duration;

    #[test]
    fn initial_and_minimum_windows_follow_rfc_9002() {
        assert_eq!(initial_window(1200), 12_000);
        assert_eq!(initial_window(1472), 14_720);
        assert_eq!(initial_window(1500), 14_720);
        assert_eq!(initial_window(9000), 18_000);
        assert_eq!(minimum_window(1200), 2400);
        // Degenerate sizes do not panic or give a zero window.
        assert!(initial_window(0) > 0);
        assert!(minimum_window(0) > 0);
        let _ = initial_window(u64::MAX);
        let _ = minimum_window(u64::MAX);
    }

    #[test]
    fn names_parse_and_print() {
        for (s, a) in [
            ("newreno", CongestionAlgorithm::NewReno),
            ("reno", CongestionAlgorithm::NewReno),
            ("cubic", CongestionAlgorithm::Cubic),
            ("CUBIC", CongestionAlgorithm::Cubic),
            ("bbr", CongestionAlgorithm::Bbr),
            ("bbr1", CongestionAlgorithm::Bbr),
        ] {
            assert_eq!(s.parse::<CongestionAlgorithm>(), Ok(a));
        }
        for a in CongestionAlgorithm::ALL {
            assert_eq!(a.to_string().parse::<CongestionAlgorithm>(), Ok(a));
            assert_eq!(a.build(Instant::ZERO, 1200).name(), a.name());
        }
        assert_eq!(CongestionAlgorithm::default(), CongestionAlgorithm::Cubic);
        let err = "vegas"
            .parse::<CongestionAlgorithm>()
            .unwrap_err()
            .to_string();
        for name in ["vegas", "newreno", "cubic", "bbr"] {
            assert!(err.contains(name), "{err}");
        }
    }

    #[test]
    fn serde_uses_the_cli_names() {
        let json = serde_json::to_string(&CongestionAlgorithm::NewReno).expect("serialises");
        assert_eq!(json, "\"newreno\"");
        let back: CongestionAlgorithm = serde_json::from_str("\"bbr1\"").expect("alias parses");
        assert_eq!(back, CongestionAlgorithm::Bbr);
    }

    #[test]
    fn every_controller_starts_at_the_initial_window() {
        for a in CongestionAlgorithm::ALL {
            let c = a.build(Instant::ZERO, 1200);
            assert_eq!(c.window(), 12_000, "{a}");
            assert!(c.in_slow_start(), "{a}");
        }
    }

    #[test]
    fn mul_div_saturates() {
        assert_eq!(mul_div(u64::MAX, u64::MAX, 1), u64::MAX);
        assert_eq!(mul_div(10, 3, 4), 7);
        assert_eq!(mul_div(10, 3, 0), 0);
    }

    /// One input to a controller in the fuzz-style property test below.
    #[derive(Clone, Debug)]
    enum Op {
        Send(u64),
        Ack {
            age_ms: u64,
            bytes: u64,
            app_limited: bool,
        },
        Loss {
            age_ms: u64,
            bytes: u64,
            persistent: bool,
        },
        Ecn {
            age_ms: u64,
        },
        Advance(u64),
        Rewind(u64),
        Mtu(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0u64..70_000).prop_map(Op::Send),
            (0u64..5_000, 0u64..70_000, any::<bool>()).prop_map(|(age_ms, bytes, app_limited)| {
                Op::Ack {
                    age_ms,
                    bytes,
                    app_limited,
                }
            }),
            (0u64..5_000, 0u64..70_000, any::<bool>()).prop_map(|(age_ms, bytes, persistent)| {
                Op::Loss {
                    age_ms,
                    bytes,
                    persistent,
                }
            }),
            (0u64..5_000).prop_map(|age_ms| Op::Ecn { age_ms }),
            (0u64..20_000).prop_map(Op::Advance),
            (0u64..1_000).prop_map(Op::Rewind),
            prop_oneof![Just(0u64), 1u64..1500, Just(u64::MAX)].prop_map(Op::Mtu),
        ]
    }

    proptest! {
        /// Whatever the event sequence (including time going backwards, zero
        /// or absurd sizes), no controller panics and the window never drops
        /// below the minimum window (RFC 9002 §7.2).
        #[test]
        fn controllers_survive_arbitrary_events(ops in proptest::collection::vec(op(), 0..200), seed in any::<u64>()) {
            for algo in CongestionAlgorithm::ALL {
                let mut now = Instant::from_millis(1_000);
                let mut mds = 1200u64;
                let mut c = algo.build_seeded(now, mds, seed);
                let mut rtt = RttEstimator::new(Duration::from_millis(100));
                let mut rate = DeliveryRateEstimator::default();
                let mut in_flight = 0u64;
                for op in &ops {
                    match *op {
                        Op::Send(b) => {
                            let _ = rate.on_packet_sent(now, in_flight);
                            in_flight = in_flight.saturating_add(b);
                            c.on_packet_sent(now, b, in_flight);
                        }
                        Op::Ack { age_ms, bytes, app_limited } => {
                            let sent = now - Duration::from_millis(age_ms);
                            let state = rate.on_packet_sent(sent, in_flight);
                            rtt.update(Duration::ZERO, now - sent, Duration::from_millis(25), true);
                            rate.on_packet_acked(now, &state, sent, bytes);
                            c.on_ack(now, sent, bytes, app_limited, &rtt);
                            in_flight = in_flight.saturating_sub(bytes);
                            let sample = rate.take_sample(now, rtt.min());
                            c.on_end_acks(now, in_flight, app_limited, sample.as_ref(), &rtt);
                        }
                        Op::Loss { age_ms, bytes, persistent } => {
                            in_flight = in_flight.saturating_sub(bytes);
                            c.on_congestion_event(now, now - Duration::from_millis(age_ms), bytes, persistent, &rtt);
                        }
                        Op::Ecn { age_ms } => c.on_ecn_ce(now, now - Duration::from_millis(age_ms), &rtt),
                        Op::Advance(ms) => now += Duration::from_millis(ms),
                        Op::Rewind(ms) => now = now - Duration::from_millis(ms),
                        Op::Mtu(m) => {
                            mds = m;
                            c.on_mtu_update(m);
                        }
                    }
                    prop_assert!(c.window() >= minimum_window(mds), "{} window {} < min", algo, c.window());
                    if let Some(r) = c.pacing_rate() {
                        prop_assert!(r > 0, "{} pacing rate 0", algo);
                    }
                }
            }
        }
    }
}
