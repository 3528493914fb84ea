//! The registry of workloads: every server/client application pair a
//! scenario can name, and how each is built.
//!
//! A driver never knows which workload it runs: the simulator's runner
//! (`lab`) asks a [`Workload`] for its two [`App`]s and for the client's
//! [`ClientReport`] at the end. Adding a workload means adding a variant
//! here, its keys to [`WorkloadOptions`] and its applications; neither
//! driver changes.
//!
//! Scenario files and `artq sim` flags describe a workload with the same
//! flat keys ([`WorkloadOptions`]): `kind` (default `files`), then the
//! kind's own keys (files: `files`, `size`; live: `bitrate`, `fps`,
//! `duration`, `gop`, `iratio`, `audio`, `startup_delay`; dash:
//! `video_duration`; rpc: `rpcs`, `rpc_rate`; messages: `messages`,
//! `message_size`, `message_rate`, `drain`).

use serde::{Deserialize, Serialize};

use crate::app::{App, Host};
use crate::content::GeneratedFiles;
use crate::files::{ClientError, FileTimes, FilesClient, Paths, VerifySink};
use crate::messages::{MessageParams, MessageReceiver, MessageReport, MessageSender};
use crate::protocol::Protocol;
use crate::rpc::{RpcClient, MAX_RATE};
use crate::server::{HttpServer, ServerOptions};
use crate::video::dash::{DashPlayer, DashReport};
use crate::video::live::{LiveParams, LivePlayer, LiveReport};
use wire::time::{Duration, Instant};

/// Most files one workload may hold: the per-file records are kept in
/// memory, so this bounds them (16 bytes each).
pub const MAX_FILES: u64 = 10_000_000;

/// The rpc workload's call rate when `rpc_rate` is not given, per second
/// (the request rate of ART journal §7.7's deployment clients).
pub const DEFAULT_RPC_RATE: u64 = 100;

/// The messages workload's message size when `message_size` is not given,
/// bytes: a small real-time update (a game's avatar position, rcp.md §I).
pub const DEFAULT_MESSAGE_SIZE: u32 = 100;

/// The messages workload's rate when `message_rate` is not given, per
/// second: one message per 1 ms slot (rcp.md Table I, "1 pkt/slot").
pub const DEFAULT_MESSAGE_RATE: u64 = 1000;

/// A workload's name and one line about it, for `--help` and errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkloadInfo {
    /// The `kind` / `--workload` name.
    pub name: &'static str,
    /// What it is.
    pub about: &'static str,
}

/// Every workload, in the order `--help` lists them.
pub const WORKLOADS: &[WorkloadInfo] = &[
    WorkloadInfo {
        name: "files",
        about: "`files` files of `size` bytes fetched one after another over one connection (a bulk transfer is one file)",
    },
    WorkloadInfo {
        name: "live",
        about: "a live stream of `duration` s at `bitrate` kbit/s and `fps` frames/s, sent as produced on one stream and played with a start-up delay (freezes, bitrate)",
    },
    WorkloadInfo {
        name: "dash",
        about: "a DASH video of `video_duration` s (Big Buck Bunny's ladder, 2 s segments) over one connection with rate-based adaptation (bitrate, rebuffering, start-up, switches)",
    },
    WorkloadInfo {
        name: "rpc",
        about: "`rpcs` request/response calls at `rpc_rate` per second (Poisson), memcached ETC key and value sizes, over one connection",
    },
    WorkloadInfo {
        name: "messages",
        about: "`messages` messages of `message_size` bytes (default 100) at `message_rate` per second (default 1000), stamped with their generation time, in DATAGRAM frames (the `tcp` scheme: on one reliable stream); `drain` ms (default 3000) after the last the sender closes (RCP's workload: delivery ratio and latency)",
    },
];

/// What the client and server of a run do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WorkloadOptions", into = "WorkloadOptions")]
pub enum Workload {
    /// N files of one size fetched sequentially over one connection (ART
    /// journal Figs. 20-21 fetch 1000 files; a bulk transfer is one file).
    /// File contents are generated ([`crate::content::FileContent`]) and
    /// every byte is checked by the client.
    Files {
        /// Number of files, fetched one after another (at least 1).
        files: u64,
        /// Size of each file, bytes.
        size: u64,
    },
    /// A live stream from a paced source, played with a start-up delay
    /// (`crate::video::live`).
    Live {
        /// The stream (bitrate, length, frame rate, GOP, audio).
        params: LiveParams,
        /// The player's start-up delay, ms.
        startup_delay_ms: u32,
    },
    /// DASH video on demand (`crate::video::dash`).
    Dash {
        /// Video length, seconds.
        seconds: u32,
    },
    /// Open-loop request/response calls over one connection (ART journal
    /// §7.7, Fig. 26): sizes and schedule in [`crate::rpc`].
    Rpc {
        /// Number of calls (at least 1).
        rpcs: u64,
        /// Calls per second (1..=[`MAX_RATE`]).
        rate: u64,
    },
    /// Fixed-size messages at a fixed rate, each of which may be abandoned
    /// (RCP, rcp.md §III-A): [`crate::messages`].
    Messages {
        /// Count, size, rate and drain period.
        params: MessageParams,
    },
}

impl Default for Workload {
    /// One 10 MB file: the default `artq sim` run.
    fn default() -> Self {
        Workload::bulk(10_000_000)
    }
}

impl Workload {
    /// One file of `size` bytes.
    pub fn bulk(size: u64) -> Self {
        Workload::Files { files: 1, size }
    }

    /// `files` files of `size` bytes.
    pub fn files(files: u64, size: u64) -> Self {
        Workload::Files { files, size }
    }

    /// The registry name (`files`, `live`, `dash`).
    pub fn name(&self) -> &'static str {
        match self {
            Workload::Files { .. } => "files",
            Workload::Live { .. } => "live",
            Workload::Dash { .. } => "dash",
            Workload::Rpc { .. } => "rpc",
            Workload::Messages { .. } => "messages",
        }
    }

    /// Number of items the client completes (files; the live stream is
    /// one; DASH: the manifest and every segment).
    pub fn items(&self) -> u64 {
        match *self {
            Workload::Files { files, .. } => files,
            Workload::Live { .. } => 1,
            Workload::Dash { seconds } => {
                1 + u64::from(seconds).div_ceil(crate::video::dash::SEGMENT.as_secs())
            }
            Workload::Rpc { rpcs, .. } => rpcs,
            // One message session; its messages are counted apart.
            Workload::Messages { .. } => 1,
        }
    }

    /// Body bytes the client receives in total (saturating); for the
    /// live stream its nominal size (bitrate x length), 0 where only the
    /// run knows (DASH: the rate adaptation decides; rpc: sizes are drawn
    /// from the seed).
    pub fn total_bytes(&self) -> u64 {
        match *self {
            Workload::Files { files, size } => files.saturating_mul(size),
            Workload::Live { params, .. } => {
                (u64::from(params.kbps) + u64::from(params.audio_kbps))
                    * 125
                    * u64::from(params.seconds)
            }
            Workload::Dash { .. } | Workload::Rpc { .. } | Workload::Messages { .. } => 0,
        }
    }

    /// The message size of the messages workload (0 for the others).
    pub fn message_size(&self) -> u32 {
        match self {
            Workload::Messages { params } => params.size,
            _ => 0,
        }
    }

    /// A video workload (its client reports playback).
    pub fn is_video(&self) -> bool {
        matches!(self, Workload::Live { .. } | Workload::Dash { .. })
    }

    /// Checks the numbers: at least one file, at most [`MAX_FILES`], and a
    /// size that fits a QUIC stream.
    pub fn validate(&self) -> Result<(), String> {
        match *self {
            Workload::Files { files, size } => {
                if files == 0 {
                    return Err("the workload needs at least one file".into());
                }
                if files > MAX_FILES {
                    return Err(format!(
                        "{files} files is more than the {MAX_FILES} a workload may hold"
                    ));
                }
                // RFC 9000 §19.8: stream offsets stay below 2^62.
                if size >= 1 << 62 {
                    return Err(format!(
                        "file size {size} bytes exceeds a QUIC stream's 2^62 bytes"
                    ));
                }
                Ok(())
            }
            Workload::Live {
                params,
                startup_delay_ms,
            } => {
                params.validate()?;
                if startup_delay_ms > 60_000 {
                    return Err(format!(
                        "start-up delay {startup_delay_ms} ms is more than a minute"
                    ));
                }
                Ok(())
            }
            Workload::Dash { seconds } => {
                if !(1..=crate::video::dash::MAX_SECONDS).contains(&seconds) {
                    return Err(format!(
                        "video duration {seconds} s is outside 1..={}",
                        crate::video::dash::MAX_SECONDS
                    ));
                }
                Ok(())
            }
            Workload::Rpc { rpcs, rate } => {
                if rpcs == 0 || rpcs > MAX_FILES {
                    return Err(format!("the rpc workload needs 1..={MAX_FILES} calls"));
                }
                if rate == 0 || rate > MAX_RATE {
                    return Err(format!(
                        "rpc_rate must be in 1..={MAX_RATE} calls per second"
                    ));
                }
                Ok(())
            }
            Workload::Messages { params } => params.validate(),
        }
    }

    /// The server application of a simulated run; `content_seed` seeds the
    /// generated content.
    pub fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        match *self {
            Workload::Files { files, size } => {
                let content = GeneratedFiles {
                    seed: content_seed,
                    files,
                    size,
                };
                Box::new(HttpServer::new(Box::new(content), ServerOptions::default()))
            }
            Workload::Live { .. } | Workload::Dash { .. } => Box::new(HttpServer::new(
                Box::new(crate::video::video_content(content_seed)),
                ServerOptions::default(),
            )),
            Workload::Rpc { .. } => Box::new(HttpServer::new(
                Box::new(crate::rpc::rpc_content(content_seed)),
                ServerOptions::default(),
            )),
            Workload::Messages { params } => Box::new(MessageSender::new(params, content_seed)),
        }
    }

    /// The client application of a simulated run, speaking `protocol`.
    pub fn client_app(
        &self,
        content_seed: u64,
        protocol: Protocol,
    ) -> Result<Box<dyn App>, String> {
        match *self {
            Workload::Files { files, size } => {
                let client = FilesClient::new(
                    protocol,
                    Some("localhost".into()),
                    Paths::Indexed(files),
                    Box::new(VerifySink::new(content_seed, size)),
                );
                Ok(Box::new(client))
            }
            Workload::Live {
                params,
                startup_delay_ms,
            } => {
                let player = LivePlayer::new(
                    params.path(),
                    Duration::from_millis(u64::from(startup_delay_ms)),
                );
                Ok(Box::new(FilesClient::with_fetcher(
                    protocol,
                    Some("localhost".into()),
                    Box::new(player),
                )))
            }
            Workload::Dash { seconds } => Ok(Box::new(FilesClient::with_fetcher(
                protocol,
                Some("localhost".into()),
                Box::new(DashPlayer::new(DashPlayer::path(seconds))),
            ))),
            Workload::Rpc { rpcs, rate } => Ok(Box::new(RpcClient::new(
                protocol,
                Some("localhost".into()),
                content_seed,
                rpcs,
                rate,
            ))),
            Workload::Messages { params } => Ok(Box::new(MessageReceiver::new(params))),
        }
    }

    /// What the client application of `host` (built by
    /// [`Workload::client_app`]) has done.
    pub fn client_report(&self, host: &Host) -> Option<ClientReport> {
        if let Workload::Messages { .. } = self {
            return host.app::<MessageReceiver>().map(|c| {
                let r = c.report();
                ClientReport {
                    items: match (r.connected_at, r.done_at) {
                        (Some(requested), Some(completed)) => vec![FileTimes {
                            requested,
                            completed,
                        }],
                        _ => Vec::new(),
                    },
                    bytes_received: r.delivered * u64::from(self.message_size()),
                    done_at: r.done_at,
                    error: r.error.clone().map(ClientError::Connection),
                    playback: None,
                    messages: Some(r.clone()),
                }
            });
        }
        if let Workload::Rpc { .. } = self {
            return host.app::<RpcClient>().map(|c| {
                let r = c.report();
                ClientReport {
                    items: r.calls.clone(),
                    bytes_received: r.bytes_received,
                    done_at: r.done_at,
                    error: r.error.clone(),
                    playback: None,
                    messages: None,
                }
            });
        }
        let c = host.app::<FilesClient>()?;
        let r = c.report();
        let playback = match self {
            Workload::Files { .. } | Workload::Rpc { .. } | Workload::Messages { .. } => None,
            Workload::Live { .. } => c
                .fetcher::<LivePlayer>()
                .map(|p| Playback::Live(p.report(None))),
            Workload::Dash { .. } => c
                .fetcher::<DashPlayer>()
                .map(|p| Playback::Dash(p.report(None))),
        };
        Some(ClientReport {
            items: r.files.clone(),
            bytes_received: r.bytes_received,
            done_at: r.done_at,
            error: r.error.clone(),
            playback,
            messages: None,
        })
    }
}

/// What a video player measured.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Playback {
    /// The live player's freezes and bitrate.
    Live(LiveReport),
    /// The DASH player's quality of experience.
    Dash(DashReport),
}

/// What a workload's client has done, in the terms every workload shares.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientReport {
    /// Completed items (files), in order, with their request and completion
    /// times.
    pub items: Vec<FileTimes>,
    /// Body bytes received and accepted so far.
    pub bytes_received: u64,
    /// When the last item completed.
    pub done_at: Option<Instant>,
    /// Why the client gave up, if it did.
    pub error: Option<ClientError>,
    /// A video workload's playback statistics.
    pub playback: Option<Playback>,
    /// The messages workload's delivery and latency.
    pub messages: Option<MessageReport>,
}

/// The workload keys, flat, as scenario files and `artq sim` flags give
/// them. `kind` picks the workload (default `files`); a key that the kind
/// does not use is an error.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkloadOptions {
    /// The workload's registry name ([`WORKLOADS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// files: number of files (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u64>,
    /// files: size of each file, bytes or with a unit (`"100KB"`).
    #[serde(
        default,
        deserialize_with = "crate::size::deserialize_opt_size",
        skip_serializing_if = "Option::is_none"
    )]
    pub size: Option<u64>,
    /// live: video bitrate, kbit/s (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bitrate: Option<u32>,
    /// live: video frames per second (default 30).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fps: Option<u32>,
    /// live: stream length, seconds (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration: Option<u32>,
    /// live: frames per group of pictures (default 60).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gop: Option<u32>,
    /// live: I-frame size over P-frame size (default 5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iratio: Option<u32>,
    /// live: audio bitrate, kbit/s (default 0: no audio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audio: Option<u32>,
    /// live: the player's start-up delay, ms (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_delay: Option<u32>,
    /// dash: video length, seconds (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub video_duration: Option<u32>,
    /// rpc: number of calls.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpcs: Option<u64>,
    /// rpc: calls per second.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rpc_rate: Option<u64>,
    /// messages: number of messages (required).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<u64>,
    /// messages: bytes per message (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_size: Option<u32>,
    /// messages: messages per second (default 1000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_rate: Option<u64>,
    /// messages: ms after the last message before the sender closes
    /// (default 3000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain: Option<u32>,
}

impl TryFrom<WorkloadOptions> for Workload {
    type Error = String;

    fn try_from(o: WorkloadOptions) -> Result<Self, Self::Error> {
        let kind = o.kind.as_deref().unwrap_or("files");
        let unused = |keys: &[(&str, bool)]| -> Result<(), String> {
            match keys.iter().find(|(_, set)| *set) {
                Some((k, _)) => Err(format!("the {kind} workload has no key `{k}`")),
                None => Ok(()),
            }
        };
        let live_keys = [
            ("bitrate", o.bitrate.is_some()),
            ("fps", o.fps.is_some()),
            ("duration", o.duration.is_some()),
            ("gop", o.gop.is_some()),
            ("iratio", o.iratio.is_some()),
            ("audio", o.audio.is_some()),
            ("startup_delay", o.startup_delay.is_some()),
        ];
        let file_keys = [("files", o.files.is_some()), ("size", o.size.is_some())];
        let dash_keys = [("video_duration", o.video_duration.is_some())];
        let rpc_keys = [
            ("rpcs", o.rpcs.is_some()),
            ("rpc_rate", o.rpc_rate.is_some()),
        ];
        let message_keys = [
            ("messages", o.messages.is_some()),
            ("message_size", o.message_size.is_some()),
            ("message_rate", o.message_rate.is_some()),
            ("drain", o.drain.is_some()),
        ];
        match kind {
            "files" => {
                unused(&message_keys)?;
                unused(&live_keys)?;
                unused(&dash_keys)?;
                unused(&rpc_keys)?;
                let size = o
                    .size
                    .ok_or("the files workload needs `size` (bytes, or with a unit: \"10MB\")")?;
                let w = Workload::files(o.files.unwrap_or(1), size);
                w.validate()?;
                Ok(w)
            }
            "live" => {
                unused(&message_keys)?;
                unused(&file_keys)?;
                unused(&dash_keys)?;
                unused(&rpc_keys)?;
                let kbps = o
                    .bitrate
                    .ok_or("the live workload needs `bitrate` (kbit/s)")?;
                let seconds = o.duration.ok_or("the live workload needs `duration` (s)")?;
                let mut params = LiveParams::new(kbps, seconds);
                params.fps = o.fps.unwrap_or(params.fps);
                params.gop = o.gop.unwrap_or(params.gop);
                params.iratio = o.iratio.unwrap_or(params.iratio);
                params.audio_kbps = o.audio.unwrap_or(params.audio_kbps);
                let w = Workload::Live {
                    params,
                    startup_delay_ms: o
                        .startup_delay
                        .unwrap_or(LivePlayer::DEFAULT_STARTUP.as_millis() as u32),
                };
                w.validate()?;
                Ok(w)
            }
            "dash" => {
                unused(&message_keys)?;
                unused(&file_keys)?;
                unused(&live_keys)?;
                unused(&rpc_keys)?;
                let w = Workload::Dash {
                    seconds: o
                        .video_duration
                        .unwrap_or(crate::video::dash::DEFAULT_SECONDS),
                };
                w.validate()?;
                Ok(w)
            }
            "rpc" => {
                unused(&message_keys)?;
                unused(&file_keys)?;
                unused(&live_keys)?;
                unused(&dash_keys)?;
                let w = Workload::Rpc {
                    rpcs: o
                        .rpcs
                        .ok_or("the rpc workload needs `rpcs` (number of calls)")?,
                    rate: o.rpc_rate.unwrap_or(DEFAULT_RPC_RATE),
                };
                w.validate()?;
                Ok(w)
            }
            "messages" => {
                unused(&file_keys)?;
                unused(&live_keys)?;
                unused(&dash_keys)?;
                unused(&rpc_keys)?;
                let w = Workload::Messages {
                    params: MessageParams {
                        messages: o
                            .messages
                            .ok_or("the messages workload needs `messages` (how many)")?,
                        size: o.message_size.unwrap_or(DEFAULT_MESSAGE_SIZE),
                        rate: o.message_rate.unwrap_or(DEFAULT_MESSAGE_RATE),
                        drain_ms: o
                            .drain
                            .unwrap_or(crate::messages::DEFAULT_DRAIN.as_millis() as u32),
                    },
                };
                w.validate()?;
                Ok(w)
            }
            other => Err(format!(
                "unknown workload '{other}' (known: {})",
                WORKLOADS
                    .iter()
                    .map(|w| w.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
}

impl From<Workload> for WorkloadOptions {
    fn from(w: Workload) -> Self {
        match w {
            Workload::Files { files, size } => WorkloadOptions {
                kind: None,
                files: Some(files),
                size: Some(size),
                ..WorkloadOptions::default()
            },
            Workload::Live {
                params,
                startup_delay_ms,
            } => WorkloadOptions {
                kind: Some("live".into()),
                bitrate: Some(params.kbps),
                fps: Some(params.fps),
                duration: Some(params.seconds),
                gop: Some(params.gop),
                iratio: Some(params.iratio),
                audio: Some(params.audio_kbps),
                startup_delay: Some(startup_delay_ms),
                ..WorkloadOptions::default()
            },
            Workload::Dash { seconds } => WorkloadOptions {
                kind: Some("dash".into()),
                video_duration: Some(seconds),
                ..WorkloadOptions::default()
            },
            Workload::Rpc { rpcs, rate } => WorkloadOptions {
                kind: Some("rpc".into()),
                rpcs: Some(rpcs),
                rpc_rate: Some(rate),
                ..WorkloadOptions::default()
            },
            Workload::Messages { params } => WorkloadOptions {
                kind: Some("messages".into()),
                messages: Some(params.messages),
                message_size: Some(params.size),
                message_rate: Some(params.rate),
                drain: Some(params.drain_ms),
                ..WorkloadOptions::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize)]
    struct Holder {
        workload: Workload,
    }

    fn parse(json: &str) -> Result<Workload, String> {
        serde_json::from_str::<Holder>(json)
            .map(|h| h.workload)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn workload_keys_parse_and_validate() {
        assert_eq!(
            parse(r#"{"workload": {"files": 3, "size": "2KB"}}"#),
            Ok(Workload::files(3, 2000))
        );
        assert_eq!(
            parse(r#"{"workload": {"kind": "files", "size": 5}}"#),
            Ok(Workload::bulk(5))
        );
        for bad in [
            r#"{"workload": {"size": "5 parsecs"}}"#,
            r#"{"workload": {"size": 5, "extra": 1}}"#,
            r#"{"workload": {"files": 2}}"#,
            r#"{"workload": {"files": 0, "size": 1}}"#,
            r#"{"workload": {"kind": "teleport", "size": 1}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let err = parse(r#"{"workload": {"kind": "teleport", "size": 1}}"#).unwrap_err();
        assert!(err.contains("files"), "{err}");
    }

    #[test]
    fn workload_validation() {
        assert!(Workload::bulk(0).validate().is_ok());
        assert!(Workload::files(0, 10).validate().is_err());
        assert!(Workload::files(MAX_FILES + 1, 10).validate().is_err());
        assert!(Workload::bulk(1 << 62).validate().is_err());
        assert_eq!(Workload::files(u64::MAX, 2).total_bytes(), u64::MAX);
    }

    #[test]
    fn round_trips_through_its_keys() {
        let mut params = LiveParams::new(8000, 60);
        params.audio_kbps = 64;
        for w in [
            Workload::files(7, 1234),
            Workload::Live {
                params,
                startup_delay_ms: 500,
            },
            Workload::Dash { seconds: 60 },
            Workload::Rpc { rpcs: 9, rate: 40 },
            Workload::Messages {
                params: MessageParams {
                    messages: 500,
                    size: 64,
                    rate: 1000,
                    drain_ms: 200,
                },
            },
        ] {
            let json = serde_json::to_string(&w).expect("serialises");
            assert_eq!(
                serde_json::from_str::<Workload>(&json).ok(),
                Some(w),
                "{json}"
            );
        }
    }

    #[test]
    fn rpc_keys_parse_with_defaults_and_refuse_strangers() {
        assert_eq!(
            parse(r#"{"workload": {"kind": "rpc", "rpcs": 50}}"#),
            Ok(Workload::Rpc {
                rpcs: 50,
                rate: DEFAULT_RPC_RATE
            })
        );
        for bad in [
            r#"{"workload": {"kind": "rpc"}}"#,
            r#"{"workload": {"kind": "rpc", "rpcs": 5, "size": 3}}"#,
            r#"{"workload": {"kind": "rpc", "rpcs": 5, "rpc_rate": 0}}"#,
            r#"{"workload": {"kind": "rpc", "rpcs": 5, "fps": 30}}"#,
            r#"{"workload": {"size": 3, "rpcs": 5}}"#,
            r#"{"workload": {"kind": "dash", "rpc_rate": 5}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn message_keys_parse_with_defaults_and_refuse_strangers() {
        assert_eq!(
            parse(r#"{"workload": {"kind": "messages", "messages": 50}}"#),
            Ok(Workload::Messages {
                params: MessageParams {
                    messages: 50,
                    size: DEFAULT_MESSAGE_SIZE,
                    rate: DEFAULT_MESSAGE_RATE,
                    drain_ms: 3000
                }
            })
        );
        for bad in [
            r#"{"workload": {"kind": "messages"}}"#,
            r#"{"workload": {"kind": "messages", "messages": 5, "size": 3}}"#,
            r#"{"workload": {"kind": "messages", "messages": 5, "message_size": 2}}"#,
            r#"{"workload": {"kind": "messages", "messages": 5, "message_rate": 0}}"#,
            r#"{"workload": {"kind": "rpc", "rpcs": 5, "messages": 3}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn video_keys_parse_with_defaults_and_refuse_strangers() {
        assert_eq!(
            parse(r#"{"workload": {"kind": "live", "bitrate": 8000, "duration": 60}}"#),
            Ok(Workload::Live {
                params: LiveParams::new(8000, 60),
                startup_delay_ms: 1000
            })
        );
        assert_eq!(
            parse(r#"{"workload": {"kind": "dash"}}"#),
            Ok(Workload::Dash { seconds: 600 })
        );
        assert_eq!(Workload::Dash { seconds: 600 }.items(), 301);
        for bad in [
            r#"{"workload": {"kind": "live", "duration": 60}}"#,
            r#"{"workload": {"kind": "live", "bitrate": 8000}}"#,
            r#"{"workload": {"kind": "live", "bitrate": 8000, "duration": 60, "size": 5}}"#,
            r#"{"workload": {"kind": "live", "bitrate": 8000, "duration": 60, "fps": 0}}"#,
            r#"{"workload": {"kind": "dash", "fps": 30}}"#,
            r#"{"workload": {"kind": "dash", "video_duration": 0}}"#,
            r#"{"workload": {"size": 5, "gop": 3}}"#,
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
