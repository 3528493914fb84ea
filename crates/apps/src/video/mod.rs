//! The video workloads: a live stream (AutoRec's evaluation) and DASH
//! video on demand (ART's Fig. 25), each a server content tree and a
//! client player, run unchanged by the simulator and over real UDP.
//!
//! - [`playout`]: the player model both share (start-up, buffer, stalls);
//! - [`frame`]: the live stream's frame format and its checking parser;
//! - [`live`]: the live source, its paced body and the live player;
//! - [`mpd`]: the DASH manifest, written and read;
//! - [`dash`]: the DASH origin, the rate adaptation and the DASH player.
//!
//! [`video_content`] mounts both origins under `/live` and `/dash`, for
//! `artq serve` and the simulated server alike.

pub mod dash;
pub mod frame;
pub mod live;
pub mod mpd;
pub mod playout;

use crate::content::Mounts;

/// The live and DASH origins under `/live` and `/dash`, their sizes
/// seeded by `seed`.
pub fn video_content(seed: u64) -> Mounts {
    Mounts::new()
        .mount("/live", Box::new(live::LiveContent { seed }))
        .mount("/dash", Box::new(dash::DashContent { seed }))
}

/// A number in [0, 1) drawn for `index` from `seed` and `label`: the
/// seeded per-frame and per-segment variation.
pub(crate) fn draw(seed: u64, label: &str, index: u64) -> f64 {
    let x = netem::derive_seed(seed ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15), label);
    (x >> 11) as f64 / (1u64 << 53) as f64
}
