//! The live workload: a live stream from a paced source, sent as
//! produced on one stream and played with a start-up delay
//! ([`crate::video::live`]).

use super::{ClientReport, Playback, Workload, WorkloadKind, WorkloadOptions};
use crate::app::{App, Host};
use crate::protocol::Protocol;
use crate::video::live::{LiveParams, LivePlayer};
use wire::time::Duration;

/// The live workload's stream and player ([`Workload::Live`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveWorkload {
    /// The stream (bitrate, length, frame rate, GOP, audio).
    pub params: LiveParams,
    /// The player's start-up delay, ms.
    pub startup_delay_ms: u32,
}

/// The workload of the keys `bitrate` and `duration` (required), `fps`,
/// `gop`, `iratio`, `audio` ([`LiveParams::new`]'s defaults) and
/// `startup_delay` (default [`LivePlayer::DEFAULT_STARTUP`]).
pub(super) fn parse(o: &WorkloadOptions) -> Result<Workload, String> {
    let kbps = o
        .bitrate
        .ok_or("the live workload needs `bitrate` (kbit/s)")?;
    let seconds = o.duration.ok_or("the live workload needs `duration` (s)")?;
    let mut params = LiveParams::new(kbps, seconds);
    params.fps = o.fps.unwrap_or(params.fps);
    params.gop = o.gop.unwrap_or(params.gop);
    params.iratio = o.iratio.unwrap_or(params.iratio);
    params.audio_kbps = o.audio.unwrap_or(params.audio_kbps);
    Ok(Workload::Live(LiveWorkload {
        params,
        startup_delay_ms: o
            .startup_delay
            .unwrap_or(LivePlayer::DEFAULT_STARTUP.as_millis() as u32),
    }))
}

impl WorkloadKind for LiveWorkload {
    fn name(&self) -> &'static str {
        "live"
    }

    /// The stream is one item.
    fn items(&self) -> u64 {
        1
    }

    /// The nominal size: bitrate x length, audio included.
    fn total_bytes(&self) -> u64 {
        let p = self.params;
        (u64::from(p.kbps) + u64::from(p.audio_kbps)) * 125 * u64::from(p.seconds)
    }

    /// What arrived: the frames' sizes are drawn around the nominal
    /// bitrate, so [`WorkloadKind::total_bytes`] is only an estimate.
    fn delivered_bytes(&self, received: u64) -> u64 {
        received
    }

    /// The stream's numbers, and a start-up delay of at most a minute.
    fn validate(&self) -> Result<(), String> {
        self.params.validate()?;
        let startup_delay_ms = self.startup_delay_ms;
        if startup_delay_ms > 60_000 {
            return Err(format!(
                "start-up delay {startup_delay_ms} ms is more than a minute"
            ));
        }
        Ok(())
    }

    fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        super::video_server(content_seed)
    }

    fn client_app(&self, _content_seed: u64, protocol: Protocol) -> Result<Box<dyn App>, String> {
        let player = LivePlayer::new(
            self.params.path(),
            Duration::from_millis(u64::from(self.startup_delay_ms)),
        );
        Ok(super::player_client(protocol, Box::new(player)))
    }

    fn client_report(&self, host: &Host) -> Option<ClientReport> {
        super::files_client_report(host, |c| {
            c.fetcher::<LivePlayer>()
                .map(|p| Playback::Live(p.report(None)))
        })
    }

    fn options(&self) -> WorkloadOptions {
        let p = self.params;
        WorkloadOptions {
            bitrate: Some(p.kbps),
            fps: Some(p.fps),
            duration: Some(p.seconds),
            gop: Some(p.gop),
            iratio: Some(p.iratio),
            audio: Some(p.audio_kbps),
            startup_delay: Some(self.startup_delay_ms),
            ..WorkloadOptions::default()
        }
    }
}
