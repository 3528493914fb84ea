//! The clients of the edge tests: the many-URL HTTP/3 fetcher and the
//! Chromium live player, as child processes with deadlines.
//!
//! Why this exists: `edge_origin.rs` and `edge_live.rs` judge `artq serve
//! --upstream` by what its clients and its origin see. The clients are
//! scripts under `tests/edge/` (`h3_fetch.py` on aioquic, `live_player.py`
//! driving Chromium with mpegts.js); this module runs them, parses their
//! JSON, and prepares the player page's directory, so the tests and the
//! harness self-check (`harness_selfcheck/edge_checks.rs`) run exactly the
//! same clients. A missing piece (venv, Chromium, `npm ci`) is an `Err`
//! that says how to get it: the tests fail with it, never skip.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use super::ffmpeg::Container;
use super::process::{self, RunOutput};
use super::{h3_peers, interop_python, workspace_root};

/// How to get the player library.
pub const NPM_HINT: &str = "run `bash .ci/run` (it runs `npm ci` in tests/edge when \
     package-lock.json changed), or by hand: `cd tests/edge && npm ci`";

/// One URL's outcome as `h3_fetch.py` reports it.
#[derive(Clone, Debug)]
pub struct Fetched {
    /// The URL.
    pub url: String,
    /// The response status; `None` when no response head arrived.
    pub status: Option<u16>,
    /// The response's `content-length`, if sent.
    pub content_length: Option<u64>,
    /// The response's `content-type` (empty if none).
    pub content_type: String,
    /// From sending the request to the response head, ms.
    pub head_ms: Option<f64>,
    /// From sending the request to the stream's end, ms.
    pub ms: Option<f64>,
    /// Body bytes received.
    pub bytes: u64,
    /// SHA-256 (hex) of the body bytes received.
    pub sha256: String,
    /// How the stream ended: `fin`, `reset`, `cancelled`, `closed` or `timeout`.
    pub end: String,
    /// With `end == "cancelled"`: when the client cancelled, Unix seconds.
    pub cancel_unix: Option<f64>,
    /// The whole JSON line, for messages.
    pub raw: String,
}

impl Fetched {
    fn parse(line: &str) -> Result<Fetched, String> {
        let v: Value = serde_json::from_str(line).map_err(|e| format!("{e}: {line}"))?;
        let s = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        Ok(Fetched {
            url: s("url"),
            status: v
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|n| u16::try_from(n).ok()),
            content_length: v.get("content_length").and_then(Value::as_u64),
            content_type: s("content_type"),
            head_ms: v.get("head_ms").and_then(Value::as_f64),
            ms: v.get("ms").and_then(Value::as_f64),
            bytes: v.get("bytes").and_then(Value::as_u64).unwrap_or(0),
            sha256: s("sha256"),
            end: s("end"),
            cancel_unix: v.get("cancel_unix").and_then(Value::as_f64),
            raw: line.to_string(),
        })
    }
}

/// Path of the many-URL HTTP/3 client.
pub fn h3_fetch_script() -> PathBuf {
    workspace_root().join("tests/edge/h3_fetch.py")
}

/// Runs `h3_fetch.py --insecure --timeout T [extra...] URL...` (all URLs on
/// one connection) and returns its run and one [`Fetched`] per URL it
/// reported. `Err` when it could not run or printed no parsable lines for
/// URLs it was given (its stderr is in the message).
pub fn h3_fetch(
    urls: &[String],
    extra: &[&str],
    deadline: Duration,
) -> Result<(RunOutput, Vec<Fetched>), String> {
    let python = interop_python()?;
    let inner = deadline
        .saturating_sub(Duration::from_secs(5))
        .max(Duration::from_secs(1));
    let mut cmd = Command::new(python);
    cmd.arg(h3_fetch_script())
        .args(["--insecure", "--timeout", &inner.as_secs().to_string()])
        .args(extra)
        .args(urls);
    let run = process::run_with_deadline(cmd, deadline)?;
    let fetched = run
        .stdout
        .lines()
        .filter(|l| l.starts_with('{'))
        .map(Fetched::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if fetched.len() != urls.len() && run.status.code() != Some(3) {
        return Err(format!(
            "h3_fetch.py reported {} of {} URLs ({}):\nstdout: {}\nstderr: {}",
            fetched.len(),
            urls.len(),
            run.status,
            run.stdout,
            run.stderr
        ));
    }
    Ok((run, fetched))
}

/// Copies the player page and mpegts.js into `root` as the page expects
/// them: `live_player.html` and `node_modules/mpegts.js/dist/mpegts.js`.
/// `Err` (with [`NPM_HINT`]) when `tests/edge/node_modules` lacks mpegts.js.
pub fn install_player(root: &Path) -> Result<(), String> {
    let edge = workspace_root().join("tests/edge");
    let lib = Path::new("node_modules/mpegts.js/dist/mpegts.js");
    let src_lib = edge.join(lib);
    if !src_lib.is_file() {
        return Err(format!("{} is missing; {NPM_HINT}", src_lib.display()));
    }
    let dst_lib = root.join(lib);
    let parent = dst_lib.parent().expect("the library path has a parent");
    std::fs::create_dir_all(parent).map_err(|e| format!("create {}: {e}", parent.display()))?;
    for (from, to) in [
        (src_lib, dst_lib.clone()),
        (edge.join("live_player.html"), root.join("live_player.html")),
    ] {
        std::fs::copy(&from, &to)
            .map_err(|e| format!("copy {} to {}: {e}", from.display(), to.display()))?;
    }
    Ok(())
}

/// Path of the Chromium live player driver.
pub fn live_player_script() -> PathBuf {
    workspace_root().join("tests/edge/live_player.py")
}

/// How a live player run is set up (see `tests/edge/live_player.py`).
pub struct PlayerRun<'a> {
    /// URL of `live_player.html` (https for HTTP/3, http for a plain run).
    pub page_url: &'a str,
    /// The stream's URL (absolute or relative to the page).
    pub stream_url: &'a str,
    /// The container, for mpegts.js.
    pub container: Container,
    /// Wall time the page plays.
    pub seconds: u32,
    /// The protocol page, player and stream must come over (`h3`, `http/1.1`).
    pub protocol: &'a str,
    /// The server key's SPKI hash to accept (https only).
    pub spki: Option<&'a str>,
    /// Where Chromium writes its netlog.
    pub netlog: Option<&'a Path>,
}

/// What the page measured, and what the driver added (`result: {json}`).
#[derive(Clone, Debug)]
pub struct PlayerResult {
    /// The video fired `playing`.
    pub playing: bool,
    /// Start of the player to the first `playing`, ms.
    pub startup_ms: Option<f64>,
    /// `waiting` events after the first `playing`.
    pub stalls: u64,
    /// Time spent in them, ms.
    pub stall_ms: f64,
    /// `video.currentTime` at the end, s.
    pub position: f64,
    /// Total length of `video.played`, s.
    pub played_s: f64,
    /// Frames the video element counted.
    pub frames: u64,
    /// Errors the page recorded (mpegts.js ERROR events, media errors).
    pub errors: Vec<Value>,
    /// The stream's protocol as DevTools saw it.
    pub stream_protocol: String,
    /// The whole JSON object.
    pub raw: Value,
}

impl PlayerResult {
    /// The one-line summary the tests print.
    pub fn summary(&self) -> String {
        format!(
            "player: playing={} startup_ms={:?} stalls={} stall_ms={:.0} position={:.2} s \
             played={:.2} s frames={} errors={} stream_protocol={:?}",
            self.playing,
            self.startup_ms,
            self.stalls,
            self.stall_ms,
            self.position,
            self.played_s,
            self.frames,
            self.errors.len(),
            self.stream_protocol
        )
    }
}

/// Runs the Chromium live player (one browser at a time per test binary,
/// like [`h3_peers::chromium_fetch`]); returns the run and the parsed
/// `result:` line when the driver printed one (it does whenever the page
/// reported, even on failure).
pub fn live_player(
    run: &PlayerRun<'_>,
    deadline: Duration,
) -> Result<(RunOutput, Option<PlayerResult>), String> {
    let python = interop_python()?;
    let chromium = h3_peers::chromium()?;
    let _one_browser = h3_peers::one_browser();
    let mut cmd = Command::new(python);
    cmd.arg(live_player_script())
        .arg("--chromium")
        .arg(&chromium)
        .args(["--seconds", &run.seconds.to_string()])
        .args(["--type", run.container.player_type()])
        .args(["--protocol", run.protocol])
        .args([
            "--timeout",
            &deadline
                .saturating_sub(Duration::from_secs(5))
                .as_secs()
                .to_string(),
        ]);
    if let Some(spki) = run.spki {
        cmd.args(["--spki", spki]);
    }
    if let Some(netlog) = run.netlog {
        cmd.arg("--netlog").arg(netlog);
    }
    cmd.arg(run.page_url).arg(run.stream_url);
    let out = process::run_with_deadline(cmd, deadline)?;
    let result = out
        .stdout
        .lines()
        .find_map(|l| l.strip_prefix("result: "))
        .map(|json| {
            let v: Value = serde_json::from_str(json).map_err(|e| format!("{e}: {json}"))?;
            let f = |k: &str| v.get(k).and_then(Value::as_f64).unwrap_or(0.0);
            Ok::<_, String>(PlayerResult {
                playing: v.get("playing").and_then(Value::as_bool).unwrap_or(false),
                startup_ms: v.get("startup_ms").and_then(Value::as_f64),
                stalls: v.get("stalls").and_then(Value::as_u64).unwrap_or(0),
                stall_ms: f("stall_ms"),
                position: f("position"),
                played_s: f("played_s"),
                frames: v.get("frames").and_then(Value::as_u64).unwrap_or(0),
                errors: v
                    .get("errors")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                stream_protocol: v
                    .get("stream_protocol")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                raw: v,
            })
        })
        .transpose()?;
    Ok((out, result))
}
