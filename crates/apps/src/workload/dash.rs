//! The dash workload: DASH video on demand over one connection with
//! rate-based adaptation ([`crate::video::dash`]).

use super::{ClientReport, Playback, Workload, WorkloadKind, WorkloadOptions};
use crate::app::{App, Host};
use crate::protocol::Protocol;
use crate::video::dash::{DashPlayer, DEFAULT_SECONDS, MAX_SECONDS, SEGMENT};

/// The dash workload's video ([`Workload::Dash`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DashWorkload {
    /// Video length, seconds.
    pub seconds: u32,
}

/// The workload of the key `video_duration` (default
/// [`DEFAULT_SECONDS`]).
pub(super) fn parse(o: &WorkloadOptions) -> Result<Workload, String> {
    Ok(Workload::Dash(DashWorkload {
        seconds: o.video_duration.unwrap_or(DEFAULT_SECONDS),
    }))
}

impl WorkloadKind for DashWorkload {
    fn name(&self) -> &'static str {
        "dash"
    }

    /// The manifest and every segment.
    fn items(&self) -> u64 {
        1 + u64::from(self.seconds).div_ceil(SEGMENT.as_secs())
    }

    /// Unknown in advance: the rate adaptation decides.
    fn total_bytes(&self) -> u64 {
        0
    }

    /// A length in 1..=[`MAX_SECONDS`].
    fn validate(&self) -> Result<(), String> {
        let seconds = self.seconds;
        if !(1..=MAX_SECONDS).contains(&seconds) {
            return Err(format!(
                "video duration {seconds} s is outside 1..={MAX_SECONDS}"
            ));
        }
        Ok(())
    }

    fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        super::video_server(content_seed)
    }

    fn client_app(&self, _content_seed: u64, protocol: Protocol) -> Result<Box<dyn App>, String> {
        let player = DashPlayer::new(DashPlayer::path(self.seconds));
        Ok(super::player_client(protocol, Box::new(player)))
    }

    fn client_report(&self, host: &Host) -> Option<ClientReport> {
        super::files_client_report(host, |c| {
            c.fetcher::<DashPlayer>()
                .map(|p| Playback::Dash(p.report(None)))
        })
    }

    fn options(&self) -> WorkloadOptions {
        WorkloadOptions {
            video_duration: Some(self.seconds),
            ..WorkloadOptions::default()
        }
    }
}
