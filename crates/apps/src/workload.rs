//! The registry of workloads: every server/client application pair a
//! scenario can name, and how each is built.
//!
//! A driver never knows which workload it runs: the simulator's runner
//! (`lab`) asks a [`Workload`] for its two [`App`]s and for the client's
//! [`ClientReport`] at the end, and the metrics ask it what it declares
//! ([`WorkloadKind`]). Each kind lives in its own module
//! (`workload/files.rs`, `live.rs`, `dash.rs`, `rpc.rs`, `messages.rs`):
//! its numbers as a type implementing [`WorkloadKind`] and its parser.
//!
//! Adding a workload touches: its module here (the type, its
//! [`WorkloadKind`] and its `parse`), one row of [`WORKLOADS`] (name,
//! help, keys, parser), one [`Workload`] variant and its arm in
//! [`Workload::kind`], and its keys as fields of [`WorkloadOptions`] (and
//! in [`WorkloadOptions::given`], which a test checks). Its applications
//! live in their own modules of `apps`; neither driver changes. `artq
//! sim` takes each key as a flag of the same name (`crates/artq/src/sim.rs`:
//! the flag, and its line in `workload_of`); `--scenario`'s conflicts
//! with them are read from the table.
//!
//! Scenario files and `artq sim` flags describe a workload with the same
//! flat keys ([`WorkloadOptions`]): `kind` (default `files`), then the
//! kind's own keys (files: `files`, `size`; live: `bitrate`, `fps`,
//! `duration`, `gop`, `iratio`, `audio`, `startup_delay`; dash:
//! `video_duration`; rpc: `rpcs`, `rpc_rate`; messages: `messages`,
//! `message_size`, `message_rate`, `drain`).

use serde::{Deserialize, Serialize};

use crate::app::{App, Host};
use crate::files::{ClientError, Fetcher, FileTimes, FilesClient};
use crate::messages::{MessageParams, MessageReport};
use crate::protocol::Protocol;
use crate::server::{HttpServer, ServerOptions};
use crate::video::dash::DashReport;
use crate::video::live::LiveReport;
use wire::time::Instant;

mod dash;
mod files;
mod live;
mod messages;
mod rpc;

pub use dash::DashWorkload;
pub use files::FilesWorkload;
pub use live::LiveWorkload;
pub use messages::{DEFAULT_MESSAGE_RATE, DEFAULT_MESSAGE_SIZE};
pub use rpc::{RpcWorkload, DEFAULT_RPC_RATE};

/// Most files one workload may hold: the per-file records are kept in
/// memory, so this bounds them (16 bytes each). Also the most rpc calls.
pub const MAX_FILES: u64 = 10_000_000;

/// The kind a workload's keys name when they give no `kind`, and whose
/// name [`WorkloadOptions`] leaves out when it writes a workload back.
pub const DEFAULT_KIND: &str = "files";

/// One row of [`WORKLOADS`]: a kind's name, its help, the keys it owns
/// and its parser.
#[derive(Clone, Copy)]
pub struct WorkloadRow {
    /// The `kind` / `--workload` name.
    pub name: &'static str,
    /// One line about it, for `--help` and errors.
    pub help: &'static str,
    /// The [`WorkloadOptions`] keys this kind reads; any other key given
    /// with it is an error, and `artq sim --scenario` conflicts with each
    /// of them (they are `artq sim` flags too).
    pub keys: &'static [&'static str],
    /// Builds the workload from the keys (defaults filled in), before
    /// [`Workload::validate`]; only called with no key outside
    /// [`WorkloadRow::keys`] given.
    parse: fn(&WorkloadOptions) -> Result<Workload, String>,
}

impl core::fmt::Debug for WorkloadRow {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("WorkloadRow")
            .field("name", &self.name)
            .field("keys", &self.keys)
            .finish_non_exhaustive()
    }
}

/// Every workload, in the order `--help` and errors list them: the one
/// table that parsing, the unused-key check, `artq sim`'s `--workload`
/// and its `--scenario` conflicts read.
pub const WORKLOADS: &[WorkloadRow] = &[
    WorkloadRow {
        name: "files",
        help: "`files` files of `size` bytes fetched one after another over one connection (a bulk transfer is one file)",
        keys: &["files", "size"],
        parse: files::parse,
    },
    WorkloadRow {
        name: "live",
        help: "a live stream of `duration` s at `bitrate` kbit/s and `fps` frames/s, sent as produced on one stream and played with a start-up delay (freezes, bitrate)",
        keys: &["bitrate", "fps", "duration", "gop", "iratio", "audio", "startup_delay"],
        parse: live::parse,
    },
    WorkloadRow {
        name: "dash",
        help: "a DASH video of `video_duration` s (Big Buck Bunny's ladder, 2 s segments) over one connection with rate-based adaptation (bitrate, rebuffering, start-up, switches)",
        keys: &["video_duration"],
        parse: dash::parse,
    },
    WorkloadRow {
        name: "rpc",
        help: "`rpcs` request/response calls at `rpc_rate` per second (Poisson), memcached ETC key and value sizes, over one connection",
        keys: &["rpcs", "rpc_rate"],
        parse: rpc::parse,
    },
    WorkloadRow {
        name: "messages",
        help: "`messages` messages of `message_size` bytes (default 100) at `message_rate` per second (default 1000), stamped with their generation time, in DATAGRAM frames (the `tcp` scheme: on one reliable stream); `drain` ms (default 3000) after the last the sender closes (RCP's workload: delivery ratio and latency)",
        keys: &["messages", "message_size", "message_rate", "drain"],
        parse: messages::parse,
    },
];

/// Every key of every row of [`WORKLOADS`], in table order (`artq sim`'s
/// `--scenario` conflicts with each).
pub fn workload_keys() -> impl Iterator<Item = &'static str> {
    WORKLOADS.iter().flat_map(|row| row.keys.iter().copied())
}

/// What one kind of workload does, written once in the kind's module:
/// [`Workload`]'s methods dispatch to it through [`Workload::kind`].
pub trait WorkloadKind {
    /// Its [`WorkloadRow::name`].
    fn name(&self) -> &'static str;

    /// Number of items the client completes (files; the live stream is
    /// one; DASH: the manifest and every segment).
    fn items(&self) -> u64;

    /// Body bytes the client receives in total (saturating); for the live
    /// stream its nominal size (bitrate x length), 0 where only the run
    /// knows.
    fn total_bytes(&self) -> u64;

    /// The bytes a run counts as delivered, given the body bytes the
    /// client `received`: [`WorkloadKind::total_bytes`] where it is known
    /// (not 0), else what arrived.
    fn delivered_bytes(&self, received: u64) -> u64 {
        match self.total_bytes() {
            0 => received,
            total => total,
        }
    }

    /// Whether the items are calls, whose completion times the metrics
    /// report as one distribution (`rpc_fct_ms`) instead of per file.
    fn items_are_calls(&self) -> bool {
        false
    }

    /// The message schedule of a workload of timed messages (its metrics
    /// measure delivery against it); `None` for the others.
    fn message_params(&self) -> Option<MessageParams> {
        None
    }

    /// Checks the numbers; the error says which and why.
    fn validate(&self) -> Result<(), String>;

    /// The server application of a simulated run; `content_seed` seeds
    /// the generated content.
    fn server_app(&self, content_seed: u64) -> Box<dyn App>;

    /// The client application of a simulated run, speaking `protocol`.
    fn client_app(&self, content_seed: u64, protocol: Protocol) -> Result<Box<dyn App>, String>;

    /// What the client application of `host` (built by
    /// [`WorkloadKind::client_app`]) has done.
    fn client_report(&self, host: &Host) -> Option<ClientReport>;

    /// Its own keys, set ([`WorkloadOptions::kind`] left `None`).
    fn options(&self) -> WorkloadOptions;
}

/// What the client and server of a run do: one variant per row of
/// [`WORKLOADS`], each holding its kind's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "WorkloadOptions", into = "WorkloadOptions")]
pub enum Workload {
    /// N files of one size fetched sequentially over one connection
    /// ([`FilesWorkload`]).
    Files(FilesWorkload),
    /// A live stream from a paced source, played with a start-up delay
    /// ([`LiveWorkload`]).
    Live(LiveWorkload),
    /// DASH video on demand ([`DashWorkload`]).
    Dash(DashWorkload),
    /// Open-loop request/response calls over one connection
    /// ([`RpcWorkload`]).
    Rpc(RpcWorkload),
    /// Fixed-size messages at a fixed rate, each of which may be abandoned
    /// (RCP, rcp.md §III-A): [`crate::messages`].
    Messages(MessageParams),
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
        Workload::files(1, size)
    }

    /// `files` files of `size` bytes.
    pub fn files(files: u64, size: u64) -> Self {
        Workload::Files(FilesWorkload { files, size })
    }

    /// The kind's behaviour: the one place that looks at the variant.
    pub fn kind(&self) -> &dyn WorkloadKind {
        match self {
            Workload::Files(w) => w,
            Workload::Live(w) => w,
            Workload::Dash(w) => w,
            Workload::Rpc(w) => w,
            Workload::Messages(w) => w,
        }
    }

    /// The registry name (`files`, `live`, `dash`, `rpc`, `messages`).
    pub fn name(&self) -> &'static str {
        self.kind().name()
    }

    /// Number of items the client completes ([`WorkloadKind::items`]).
    pub fn items(&self) -> u64 {
        self.kind().items()
    }

    /// Body bytes the client receives in total, 0 where only the run knows
    /// ([`WorkloadKind::total_bytes`]).
    pub fn total_bytes(&self) -> u64 {
        self.kind().total_bytes()
    }

    /// Checks the numbers ([`WorkloadKind::validate`]).
    pub fn validate(&self) -> Result<(), String> {
        self.kind().validate()
    }

    /// The server application of a simulated run; `content_seed` seeds the
    /// generated content.
    pub fn server_app(&self, content_seed: u64) -> Box<dyn App> {
        self.kind().server_app(content_seed)
    }

    /// The client application of a simulated run, speaking `protocol`.
    pub fn client_app(
        &self,
        content_seed: u64,
        protocol: Protocol,
    ) -> Result<Box<dyn App>, String> {
        self.kind().client_app(content_seed, protocol)
    }

    /// What the client application of `host` (built by
    /// [`Workload::client_app`]) has done.
    pub fn client_report(&self, host: &Host) -> Option<ClientReport> {
        self.kind().client_report(host)
    }
}

/// The server of both video workloads (live, dash): the generated video
/// content, served over HTTP.
fn video_server(content_seed: u64) -> Box<dyn App> {
    Box::new(HttpServer::new(
        Box::new(crate::video::video_content(content_seed)),
        ServerOptions::default(),
    ))
}

/// The client of both video workloads: `player` fetching from the
/// simulated server over `protocol`.
fn player_client(protocol: Protocol, player: Box<dyn Fetcher>) -> Box<dyn App> {
    Box::new(FilesClient::with_fetcher(
        protocol,
        Some("localhost".into()),
        player,
    ))
}

/// The report of a [`FilesClient`] on `host` (files, live, dash), with
/// the `playback` its fetcher measured.
fn files_client_report(
    host: &Host,
    playback: impl FnOnce(&FilesClient) -> Option<Playback>,
) -> Option<ClientReport> {
    let c = host.app::<FilesClient>()?;
    let r = c.report();
    Some(ClientReport {
        items: r.files.clone(),
        bytes_received: r.bytes_received,
        done_at: r.done_at,
        error: r.error.clone(),
        playback: playback(c),
        messages: None,
    })
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

impl WorkloadOptions {
    /// The keys given, in the order an unused one is reported (the
    /// messages workload's, then files', live's, dash's and rpc's: the
    /// order of the checks before the table). Lists every field but
    /// `kind`; a test checks it against the fields and [`WORKLOADS`].
    pub fn given(&self) -> impl Iterator<Item = &'static str> {
        [
            ("messages", self.messages.is_some()),
            ("message_size", self.message_size.is_some()),
            ("message_rate", self.message_rate.is_some()),
            ("drain", self.drain.is_some()),
            ("files", self.files.is_some()),
            ("size", self.size.is_some()),
            ("bitrate", self.bitrate.is_some()),
            ("fps", self.fps.is_some()),
            ("duration", self.duration.is_some()),
            ("gop", self.gop.is_some()),
            ("iratio", self.iratio.is_some()),
            ("audio", self.audio.is_some()),
            ("startup_delay", self.startup_delay.is_some()),
            ("video_duration", self.video_duration.is_some()),
            ("rpcs", self.rpcs.is_some()),
            ("rpc_rate", self.rpc_rate.is_some()),
        ]
        .into_iter()
        .filter_map(|(key, given)| given.then_some(key))
    }
}

impl TryFrom<WorkloadOptions> for Workload {
    type Error = String;

    /// The row of `kind`, no key it does not own, its parser, then
    /// [`Workload::validate`].
    fn try_from(o: WorkloadOptions) -> Result<Self, Self::Error> {
        let kind = o.kind.as_deref().unwrap_or(DEFAULT_KIND);
        let Some(row) = WORKLOADS.iter().find(|row| row.name == kind) else {
            return Err(format!(
                "unknown workload '{kind}' (known: {})",
                WORKLOADS
                    .iter()
                    .map(|row| row.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        };
        if let Some(key) = o.given().find(|key| !row.keys.contains(key)) {
            return Err(format!("the {kind} workload has no key `{key}`"));
        }
        let w = (row.parse)(&o)?;
        w.validate()?;
        Ok(w)
    }
}

impl From<Workload> for WorkloadOptions {
    /// The kind's keys, and its name unless it is [`DEFAULT_KIND`].
    fn from(w: Workload) -> Self {
        let name = w.name();
        WorkloadOptions {
            kind: (name != DEFAULT_KIND).then(|| name.to_string()),
            ..w.kind().options()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::video::live::LiveParams;

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
            Workload::Live(LiveWorkload {
                params,
                startup_delay_ms: 500,
            }),
            Workload::Dash(DashWorkload { seconds: 60 }),
            Workload::Rpc(RpcWorkload { rpcs: 9, rate: 40 }),
            Workload::Messages(MessageParams {
                messages: 500,
                size: 64,
                rate: 1000,
                drain_ms: 200,
            }),
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
            Ok(Workload::Rpc(RpcWorkload {
                rpcs: 50,
                rate: DEFAULT_RPC_RATE
            }))
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
            Ok(Workload::Messages(MessageParams {
                messages: 50,
                size: DEFAULT_MESSAGE_SIZE,
                rate: DEFAULT_MESSAGE_RATE,
                drain_ms: 3000
            }))
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
            Ok(Workload::Live(LiveWorkload {
                params: LiveParams::new(8000, 60),
                startup_delay_ms: 1000
            }))
        );
        assert_eq!(
            parse(r#"{"workload": {"kind": "dash"}}"#),
            Ok(Workload::Dash(DashWorkload { seconds: 600 }))
        );
        assert_eq!(Workload::Dash(DashWorkload { seconds: 600 }).items(), 301);
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

    /// One workload of each kind, for the checks on the table.
    fn one_of_each() -> Vec<Workload> {
        vec![
            Workload::files(2, 10),
            Workload::Live(LiveWorkload {
                params: LiveParams::new(1000, 5),
                startup_delay_ms: 100,
            }),
            Workload::Dash(DashWorkload { seconds: 4 }),
            Workload::Rpc(RpcWorkload { rpcs: 3, rate: 10 }),
            Workload::Messages(MessageParams {
                messages: 10,
                size: 64,
                rate: 100,
                drain_ms: 10,
            }),
        ]
    }

    #[test]
    fn the_table_has_one_row_per_variant_and_owns_every_key_once() {
        let names: Vec<&str> = WORKLOADS.iter().map(|row| row.name).collect();
        let variants: Vec<&str> = one_of_each().iter().map(Workload::name).collect();
        assert_eq!(names, variants);
        assert_eq!(WORKLOADS[0].name, DEFAULT_KIND);
        let mut keys: Vec<&str> = workload_keys().collect();
        keys.sort_unstable();
        let owned = keys.len();
        keys.dedup();
        assert_eq!(keys.len(), owned, "a key owned by two rows");
        // Every field of the options but `kind`, as serde names them, is
        // listed by `given` and owned by a row.
        let all = WorkloadOptions {
            kind: Some("files".into()),
            files: Some(1),
            size: Some(1),
            bitrate: Some(1),
            fps: Some(1),
            duration: Some(1),
            gop: Some(1),
            iratio: Some(1),
            audio: Some(1),
            startup_delay: Some(1),
            video_duration: Some(1),
            rpcs: Some(1),
            rpc_rate: Some(1),
            messages: Some(1),
            message_size: Some(1),
            message_rate: Some(1),
            drain: Some(1),
        };
        let json = serde_json::to_value(&all).expect("options serialise");
        let mut fields: Vec<String> = json
            .as_object()
            .map(|m| m.keys().filter(|k| *k != "kind").cloned().collect())
            .unwrap_or_default();
        fields.sort_unstable();
        assert_eq!(fields, keys);
        let mut given: Vec<&str> = all.given().collect();
        given.sort_unstable();
        assert_eq!(given, keys);
        for w in one_of_each() {
            let row = WORKLOADS.iter().find(|row| row.name == w.name());
            let own: Vec<&str> = WorkloadOptions::from(w).given().collect();
            assert_eq!(row.map(|row| row.keys.to_vec()), Some(own), "{w:?}");
        }
    }

    #[test]
    fn an_unused_key_is_reported_in_the_order_of_before_the_table() {
        // Messages' keys first, then files', live's, dash's, rpc's.
        for (json, key) in [
            (
                r#"{"kind": "rpc", "rpcs": 5, "size": 3, "drain": 2}"#,
                "drain",
            ),
            (r#"{"kind": "rpc", "rpcs": 5, "fps": 3, "size": 2}"#, "size"),
            (
                r#"{"size": 5, "rpc_rate": 3, "video_duration": 2}"#,
                "video_duration",
            ),
            (
                r#"{"kind": "messages", "messages": 5, "rpcs": 3, "gop": 2}"#,
                "gop",
            ),
            (r#"{"kind": "dash", "rpcs": 3, "audio": 2}"#, "audio"),
        ] {
            let err = parse(&format!(r#"{{"workload": {json}}}"#)).unwrap_err();
            assert!(
                err.contains(&format!("workload has no key `{key}`")),
                "{json}: {err}"
            );
        }
    }

    /// The keys written back and the errors, pinned as they were before
    /// the table (scenario files and `artq sim --json` depend on them).
    #[test]
    fn keys_written_back_and_errors_are_those_of_before_the_table() {
        let written: Vec<String> = one_of_each()
            .iter()
            .map(|w| serde_json::to_string(w).unwrap_or_default())
            .collect();
        assert_eq!(
            written,
            [
                r#"{"files":2,"size":10}"#,
                r#"{"kind":"live","bitrate":1000,"fps":30,"duration":5,"gop":60,"iratio":5,"audio":0,"startup_delay":100}"#,
                r#"{"kind":"dash","video_duration":4}"#,
                r#"{"kind":"rpc","rpcs":3,"rpc_rate":10}"#,
                r#"{"kind":"messages","messages":10,"message_size":64,"message_rate":100,"drain":10}"#,
            ]
        );
        for (json, error) in [
            (
                r#"{"kind": "teleport"}"#,
                "unknown workload 'teleport' (known: files, live, dash, rpc, messages)",
            ),
            (
                r#"{"files": 2}"#,
                "the files workload needs `size` (bytes, or with a unit: \"10MB\")",
            ),
            (
                r#"{"kind": "live", "size": 2}"#,
                "the live workload has no key `size`",
            ),
            (
                r#"{"kind": "live", "duration": 2}"#,
                "the live workload needs `bitrate` (kbit/s)",
            ),
            (
                r#"{"kind": "rpc"}"#,
                "the rpc workload needs `rpcs` (number of calls)",
            ),
            (
                r#"{"kind": "messages"}"#,
                "the messages workload needs `messages` (how many)",
            ),
            (
                r#"{"kind": "dash", "video_duration": 0}"#,
                "video duration 0 s is outside 1..=86400",
            ),
        ] {
            let err = parse(&format!(r#"{{"workload": {json}}}"#)).unwrap_err();
            assert!(err.starts_with(error), "{json}: {err}");
        }
    }
}
