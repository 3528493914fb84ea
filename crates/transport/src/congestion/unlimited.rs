//! No congestion control (`--cc none`): the window never limits and packets
//! are not paced.
//!
//! Exists for the message protocols of rcp.md, whose UDP, ARQ and RCP send
//! each packet as soon as it is generated ("RCP sends out packets
//! immediately, just as UDP", §IV; "RCP does not have an explicit design of
//! a congestion control function", §VI). Never a sensible choice on a
//! shared real network; on an emulated one it is how the paper's senders
//! behave.

use wire::time::Instant;

use super::Controller;
use crate::rtt::RttEstimator;

/// The window of [`Unlimited`]: far beyond any bytes in flight.
pub const UNLIMITED_WINDOW: u64 = u64::MAX / 4;

/// A controller that never limits.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unlimited;

impl Controller for Unlimited {
    fn on_packet_sent(&mut self, _now: Instant, _bytes: u64, _bytes_in_flight: u64) {}

    fn on_ack(
        &mut self,
        _now: Instant,
        _sent_time: Instant,
        _bytes: u64,
        _app_limited: bool,
        _rtt: &RttEstimator,
    ) {
    }

    fn on_congestion_event(
        &mut self,
        _now: Instant,
        _sent_time: Instant,
        _lost_bytes: u64,
        _persistent: bool,
        _rtt: &RttEstimator,
    ) {
    }

    fn on_mtu_update(&mut self, _max_datagram_size: u64) {}

    fn window(&self) -> u64 {
        UNLIMITED_WINDOW
    }

    fn pacing_rate(&self) -> Option<u64> {
        Some(u64::MAX)
    }

    fn name(&self) -> &'static str {
        "none"
    }

    fn in_slow_start(&self) -> bool {
        false
    }
}
