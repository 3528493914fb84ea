//! ffmpeg as a real live encoder and origin for the edge's live tests.
//!
//! Why this exists: the edge relays live HTTP-FLV and MPEG-TS as it arrives
//! and shares one origin request among its viewers. Only a real encoder
//! produces what that has to survive: x264's keyframe cadence, FLV tags and
//! TS packets cut across arbitrary TCP reads, a stream with no end and no
//! length. [`LiveEncoder::start`] runs one.
//!
//! How: `ffmpeg -re -f lavfi -i testsrc2` (a moving test picture, in real
//! time), H.264 by libx264 `ultrafast`/`zerolatency` at a constant bitrate
//! (`-b:v = -minrate = -maxrate`, `nal-hrd=cbr`: x264 pads with filler, so
//! the wire really carries the configured rate, 2.5 Mbit/s by default), a
//! keyframe every `keyint` frames exactly (`-g`, `-keyint_min`,
//! `-sc_threshold 0`), no audio, muxed as FLV or MPEG-TS into ffmpeg's own
//! HTTP server: `-listen 1 http://127.0.0.1:PORT/live.flv`. 640x360 at 25
//! fps keeps the encoder near 10% of one core.
//!
//! What ffmpeg's server does on the wire (checked with curl): it accepts
//! exactly ONE client, answers any path `HTTP/1.1 200 OK` with
//! `Content-Type: <-content_type>` (set here to `video/x-flv` or
//! `video/mp2t`; ffmpeg's default is `application/octet-stream`) and
//! `Transfer-Encoding: chunked`, no `Content-Length`, and streams until the
//! client leaves; then ffmpeg exits. Encoding starts when that client
//! connects, so the first bytes are the stream's header and a keyframe.
//! Its listening socket is closed once the client is accepted: a second
//! request is refused. The tests put nginx in front
//! ([`super::nginx::Nginx::live_proxy_location`]) to count the origin
//! requests in its access log; a second request shows up there as a 502.
//!
//! Readiness cannot be probed by connecting (that would be the one
//! client), so [`LiveEncoder::start`] waits until `/proc/net/tcp` shows the
//! port in LISTEN state.

use std::fs;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::nginx::free_tcp_port;
use super::process::{self, ChildGuard};

/// How to get ffmpeg.
pub const FFMPEG_HINT: &str =
    "install ffmpeg (Debian: `apt-get install -y ffmpeg`; `bash .ci/run` \
     does it) or point $ARTQ_FFMPEG at an ffmpeg binary with libx264";

/// How long ffmpeg may take to listen.
const READY_DEADLINE: Duration = Duration::from_secs(20);

/// The ffmpeg binary: `$ARTQ_FFMPEG`, else `ffmpeg` on `PATH`; checked by
/// running `ffmpeg -version`. The error says how to install it.
pub fn ffmpeg_bin() -> Result<PathBuf, String> {
    let bin = match std::env::var_os("ARTQ_FFMPEG") {
        Some(p) => PathBuf::from(p),
        None => super::which("ffmpeg").ok_or_else(|| {
            format!("ffmpeg not found (no $ARTQ_FFMPEG, no `ffmpeg` on PATH); {FFMPEG_HINT}")
        })?,
    };
    let mut cmd = Command::new(&bin);
    cmd.args(["-hide_banner", "-version"]);
    let out = process::run_with_deadline(cmd, Duration::from_secs(30))
        .map_err(|e| format!("cannot run {} -version: {e}; {FFMPEG_HINT}", bin.display()))?;
    if !out.status.success() || !out.stdout.contains("libx264") {
        return Err(format!(
            "{} -version failed or lacks libx264 ({}): {}{}; {FFMPEG_HINT}",
            bin.display(),
            out.status,
            out.stdout.lines().take(3).collect::<Vec<_>>().join("\n"),
            out.stderr
        ));
    }
    Ok(bin)
}

/// The container the encoder muxes into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// HTTP-FLV (`video/x-flv`).
    Flv,
    /// MPEG transport stream (`video/mp2t`).
    MpegTs,
}

impl Container {
    /// ffmpeg's muxer name.
    pub fn muxer(self) -> &'static str {
        match self {
            Container::Flv => "flv",
            Container::MpegTs => "mpegts",
        }
    }

    /// The `Content-Type` the origin answers with.
    pub fn content_type(self) -> &'static str {
        match self {
            Container::Flv => "video/x-flv",
            Container::MpegTs => "video/mp2t",
        }
    }

    /// mpegts.js's `type` for it (`live_player.py --type`).
    pub fn player_type(self) -> &'static str {
        match self {
            Container::Flv => "flv",
            Container::MpegTs => "mpegts",
        }
    }

    /// The file extension of its paths.
    pub fn extension(self) -> &'static str {
        match self {
            Container::Flv => "flv",
            Container::MpegTs => "ts",
        }
    }
}

/// What the encoder produces.
#[derive(Clone, Debug)]
pub struct LiveConfig {
    /// FLV or MPEG-TS.
    pub container: Container,
    /// Video bitrate, kbit/s, held constant.
    pub kbps: u32,
    /// Picture width.
    pub width: u32,
    /// Picture height.
    pub height: u32,
    /// Frames per second.
    pub fps: u32,
    /// Frames from one keyframe to the next.
    pub keyint: u32,
    /// ffmpeg stops by itself after this long (a bound if a test leaks it).
    pub max_seconds: u32,
}

impl Default for LiveConfig {
    /// FLV, 2.5 Mbit/s, 640x360 at 25 fps, a keyframe every second, at most
    /// 300 s.
    fn default() -> LiveConfig {
        LiveConfig {
            container: Container::Flv,
            kbps: 2500,
            width: 640,
            height: 360,
            fps: 25,
            keyint: 25,
            max_seconds: 300,
        }
    }
}

/// A running ffmpeg live origin; killed when dropped.
pub struct LiveEncoder {
    guard: ChildGuard,
    addr: SocketAddr,
    config: LiveConfig,
}

impl LiveEncoder {
    /// Starts ffmpeg serving `config`'s stream at `http://127.0.0.1:PORT/live.EXT`
    /// (a free port), its log in `log_dir/ffmpeg.log`, and waits until it
    /// listens.
    pub fn start(config: &LiveConfig, log_dir: &Path) -> Result<LiveEncoder, String> {
        let bin = ffmpeg_bin()?;
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_tcp_port()?;
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let mut cmd = Command::new(&bin);
            cmd.args(encoder_args(config, addr));
            let guard = process::spawn_guarded(cmd, "ffmpeg", log_dir)?;
            let mut encoder = LiveEncoder {
                guard,
                addr,
                config: config.clone(),
            };
            match encoder.wait_listening() {
                Ok(()) => return Ok(encoder),
                Err(e) if e.contains("Address already in use") => last_error = e,
                Err(e) => return Err(e),
            }
        }
        Err(format!("ffmpeg could not bind a free port: {last_error}"))
    }

    fn wait_listening(&mut self) -> Result<(), String> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.guard.try_status() {
                return Err(format!(
                    "ffmpeg exited ({status}) before listening: {}",
                    self.guard.describe()
                ));
            }
            if tcp_listening(self.addr.port())? {
                return Ok(());
            }
            if start.elapsed() > READY_DEADLINE {
                return Err(format!(
                    "ffmpeg did not listen on {} within {READY_DEADLINE:?}: {}",
                    self.addr,
                    self.guard.describe()
                ));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The address ffmpeg's HTTP server listens on (for its one client).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The stream's path at the origin, `/live.flv` or `/live.ts` (ffmpeg
    /// answers any path).
    pub fn path(&self) -> String {
        format!("/live.{}", self.config.container.extension())
    }

    /// What it produces.
    pub fn config(&self) -> &LiveConfig {
        &self.config
    }

    /// Whether ffmpeg has taken its one client (it no longer listens).
    pub fn has_accepted_client(&mut self) -> bool {
        self.guard.try_status().is_some() || !tcp_listening(self.addr.port()).unwrap_or(true)
    }

    /// ffmpeg's state and log tail, for failure messages.
    pub fn describe(&mut self) -> String {
        self.guard.describe()
    }
}

/// ffmpeg's arguments for `config`, serving at `addr` (see the module doc).
fn encoder_args(config: &LiveConfig, addr: SocketAddr) -> Vec<String> {
    let kbps = format!("{}k", config.kbps);
    let bufsize = format!("{}k", (config.kbps / 2).max(1));
    let keyint = config.keyint.to_string();
    let source = format!(
        "testsrc2=size={}x{}:rate={}:duration={}",
        config.width, config.height, config.fps, config.max_seconds
    );
    let url = format!("http://{addr}/live.{}", config.container.extension());
    [
        "-hide_banner",
        "-nostdin",
        "-loglevel",
        "warning",
        "-re",
        "-f",
        "lavfi",
        "-i",
        &source,
        "-an",
        "-c:v",
        "libx264",
        "-preset",
        "ultrafast",
        "-tune",
        "zerolatency",
        "-pix_fmt",
        "yuv420p",
        "-b:v",
        &kbps,
        "-minrate",
        &kbps,
        "-maxrate",
        &kbps,
        "-bufsize",
        &bufsize,
        "-x264-params",
        "nal-hrd=cbr",
        "-g",
        &keyint,
        "-keyint_min",
        &keyint,
        "-sc_threshold",
        "0",
        "-f",
        config.container.muxer(),
        "-content_type",
        config.container.content_type(),
        "-listen",
        "1",
        &url,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Whether `/proc/net/tcp` shows a socket listening on 127.0.0.1:`port`
/// (or on any address).
pub fn tcp_listening(port: u16) -> Result<bool, String> {
    let table = fs::read_to_string("/proc/net/tcp")
        .map_err(|e| format!("read /proc/net/tcp (Linux only): {e}"))?;
    let wanted = [
        format!("0100007F:{port:04X}"),
        format!("00000000:{port:04X}"),
    ];
    Ok(table.lines().skip(1).any(|line| {
        let mut f = line.split_whitespace();
        let (_slot, local, _remote, state) = (f.next(), f.next(), f.next(), f.next());
        state == Some("0A") && local.is_some_and(|l| wanted.iter().any(|w| w == l))
    }))
}

/// How an FLV stream's first bytes begin (see [`flv_start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlvStart {
    /// An `onMetaData` script tag came before the first video frame.
    pub metadata: bool,
    /// The AVC sequence header (SPS/PPS) came before the first video frame.
    pub sequence_header: bool,
    /// The first video frame is a keyframe.
    pub keyframe_first: bool,
    /// The first video frame's timestamp, ms.
    pub first_frame_ms: u32,
    /// Complete tags in `bytes`.
    pub tags: usize,
    /// Keyframes among them.
    pub keyframes: usize,
    /// Video frames among them.
    pub frames: usize,
}

/// Walks the FLV header and tags at the start of a stream, as a viewer's
/// decoder needs them: header, metadata, the AVC sequence header, then a
/// keyframe. `Err` says what is wrong (not FLV, a broken tag, no video frame
/// in `bytes`).
pub fn flv_start(bytes: &[u8]) -> Result<FlvStart, String> {
    if bytes.len() < 13 || &bytes[..3] != b"FLV" || bytes[3] != 1 {
        return Err(format!(
            "not an FLV stream: first bytes {:02x?}",
            &bytes[..bytes.len().min(16)]
        ));
    }
    let header = u32::from_be_bytes([bytes[5], bytes[6], bytes[7], bytes[8]]) as usize;
    if header < 9 || header + 4 > bytes.len() {
        return Err(format!("bad FLV header size {header}"));
    }
    let mut at = header + 4; // after PreviousTagSize0
    let mut start = FlvStart {
        metadata: false,
        sequence_header: false,
        keyframe_first: false,
        first_frame_ms: 0,
        tags: 0,
        keyframes: 0,
        frames: 0,
    };
    let mut seen_frame = false;
    while at + 11 <= bytes.len() {
        let kind = bytes[at] & 0x1f;
        let size = u32::from_be_bytes([0, bytes[at + 1], bytes[at + 2], bytes[at + 3]]) as usize;
        let ts = u32::from_be_bytes([bytes[at + 7], bytes[at + 4], bytes[at + 5], bytes[at + 6]]);
        let end = at + 11 + size + 4;
        if end > bytes.len() {
            break;
        }
        let data = &bytes[at + 11..at + 11 + size];
        let prev = u32::from_be_bytes([
            bytes[end - 4],
            bytes[end - 3],
            bytes[end - 2],
            bytes[end - 1],
        ]);
        if prev as usize != size + 11 {
            return Err(format!(
                "FLV tag at byte {at}: PreviousTagSize {prev}, expected {}",
                size + 11
            ));
        }
        match kind {
            18 if !seen_frame => start.metadata = true,
            9 if data.len() >= 2 && data[0] & 0x0f == 7 => {
                let keyframe = data[0] >> 4 == 1;
                if data[1] == 0 {
                    if !seen_frame {
                        start.sequence_header = true;
                    }
                } else if data[1] == 1 {
                    if !seen_frame {
                        seen_frame = true;
                        start.keyframe_first = keyframe;
                        start.first_frame_ms = ts;
                    }
                    start.frames += 1;
                    start.keyframes += usize::from(keyframe);
                }
            }
            8 | 9 | 18 => {}
            other => return Err(format!("FLV tag at byte {at} has unknown type {other}")),
        }
        start.tags += 1;
        at = end;
    }
    if !seen_frame {
        return Err(format!(
            "no complete H.264 video frame in the first {} bytes ({} tags)",
            bytes.len(),
            start.tags
        ));
    }
    Ok(start)
}

/// How an MPEG-TS stream's first bytes begin (see [`ts_start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TsStart {
    /// A PAT (PID 0) came before the first PES.
    pub pat: bool,
    /// The PMT the PAT names came before the first PES.
    pub pmt: bool,
    /// The first PES start carries the random access indicator (a keyframe).
    pub random_access_first: bool,
    /// Complete 188-byte packets in the bytes.
    pub packets: usize,
}

/// Walks the 188-byte packets at the start of an MPEG-TS stream as a
/// viewer's demuxer needs them: PAT, PMT, then a PES that starts at a
/// keyframe (random access indicator, which ffmpeg sets on keyframes).
/// `Err` when the bytes are not TS packets (lost sync) or hold no PES start.
pub fn ts_start(bytes: &[u8]) -> Result<TsStart, String> {
    let mut start = TsStart {
        pat: false,
        pmt: false,
        random_access_first: false,
        packets: 0,
    };
    let mut pmt_pid = None;
    for (i, p) in bytes.chunks_exact(188).enumerate() {
        if p[0] != 0x47 {
            return Err(format!(
                "TS packet {i} (byte {}) has no sync byte 0x47: {:02x?}",
                i * 188,
                &p[..4]
            ));
        }
        start.packets += 1;
        let pusi = p[1] & 0x40 != 0;
        let pid = (u16::from(p[1] & 0x1f) << 8) | u16::from(p[2]);
        let afc = (p[3] >> 4) & 3;
        let mut payload = 4;
        let mut random_access = false;
        if afc & 2 != 0 {
            let len = usize::from(p[4]);
            random_access = len > 0 && p[5] & 0x40 != 0;
            payload = 5 + len;
        }
        if afc & 1 == 0 || payload >= 188 || !pusi {
            continue;
        }
        let data = &p[payload..];
        if pid == 0 {
            // pointer_field, then the PAT section: 8 bytes of header, then
            // (program number, PMT PID) pairs.
            let at = 1 + usize::from(data[0]);
            if let Some(entry) = data.get(at + 8..at + 12) {
                pmt_pid = Some((u16::from(entry[2] & 0x1f) << 8) | u16::from(entry[3]));
                start.pat = true;
            }
        } else if Some(pid) == pmt_pid {
            start.pmt = true;
        } else if data.starts_with(&[0, 0, 1]) {
            start.random_access_first = random_access;
            return Ok(start);
        }
    }
    Err(format!(
        "no PES start in the first {} bytes ({} packets)",
        bytes.len(),
        start.packets
    ))
}
