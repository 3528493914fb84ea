//! The live stream (AutoRec's workload): a source producing frames in
//! (virtual) real time, the server body that sends each frame when it is
//! produced, and the client player.
//!
//! Source: video at `fps` frames per second and `kbps` kbit/s of payload,
//! in groups of `gop` frames whose first (the I-frame) is `iratio` times
//! as large as the others (P-frames); optionally audio, one frame every
//! 20 ms at `audio` kbit/s. Every video frame's size is its nominal size
//! times a factor drawn uniformly from [0.8, 1.2], seeded per frame, so
//! the schedule is deterministic for a seed. Frames of both kinds are
//! numbered together in capture order (video first on a tie) and sent on
//! one stream in the [`crate::video::frame`] format.
//!
//! Pacing: [`LiveBody`] gives out a frame's bytes only once its capture
//! time (counted from when the request was answered) has come, and
//! otherwise tells the server when the next one will be
//! ([`BodyChunk::Wait`]): the sender idles between frames (AutoRec's
//! off-mode) in the simulator's virtual time and in real time alike.
//!
//! The path `/live/<kbps>/<seconds>` with optional query keys `fps`,
//! `gop`, `iratio` and `audio` names a stream; [`LiveParams`] parses and
//! writes it.

use wire::time::{Duration, Instant};

use crate::content::{Body, BodyChunk, Content, FileContent, Refusal, Resource};
use crate::files::{ClientError, Fetcher, Next};
use crate::http::ResponseHead;
use crate::video::draw;
use crate::video::frame::{FrameHeader, FrameKind, FrameParser, HEADER_LEN, PAYLOAD_SEED};
use crate::video::playout::{Playout, PlayoutStats};

/// Audio frames per second (20 ms frames, as Opus and AAC-LD use).
pub const AUDIO_FPS: u32 = 50;
/// Longest stream, seconds (an hour: answering a request costs one pass
/// over the schedule to compute its length, at most 1.1 million frames).
pub const MAX_SECONDS: u32 = 3_600;

/// One live stream's settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveParams {
    /// Video payload bitrate, kbit/s (1 ..= 1,000,000).
    pub kbps: u32,
    /// Stream length, seconds (1 ..= [`MAX_SECONDS`]).
    pub seconds: u32,
    /// Video frames per second (1 ..= 240; default 30).
    pub fps: u32,
    /// Frames per group of pictures, the I-frame included (1 ..= 10,000;
    /// default 60, an I-frame every 2 s at 30 fps).
    pub gop: u32,
    /// I-frame size over P-frame size (1 ..= 100; default 5).
    pub iratio: u32,
    /// Audio payload bitrate, kbit/s (0 = no audio; default 0).
    pub audio_kbps: u32,
}

impl LiveParams {
    /// Default frame rate.
    pub const DEFAULT_FPS: u32 = 30;
    /// Default GOP length, frames.
    pub const DEFAULT_GOP: u32 = 60;
    /// Default I-frame to P-frame size ratio.
    pub const DEFAULT_IRATIO: u32 = 5;

    /// A stream of `kbps` for `seconds` with the default frame rate, GOP,
    /// ratio and no audio.
    pub fn new(kbps: u32, seconds: u32) -> LiveParams {
        LiveParams {
            kbps,
            seconds,
            fps: Self::DEFAULT_FPS,
            gop: Self::DEFAULT_GOP,
            iratio: Self::DEFAULT_IRATIO,
            audio_kbps: 0,
        }
    }

    /// Checks every value's range.
    pub fn validate(&self) -> Result<(), String> {
        let check = |name: &str, v: u32, lo: u32, hi: u32| {
            if (lo..=hi).contains(&v) {
                Ok(())
            } else {
                Err(format!("live {name} {v} is outside {lo}..={hi}"))
            }
        };
        check("bitrate (kbit/s)", self.kbps, 1, 1_000_000)?;
        check("duration (s)", self.seconds, 1, MAX_SECONDS)?;
        check("fps", self.fps, 1, 240)?;
        check("gop", self.gop, 1, 10_000)?;
        check("iratio", self.iratio, 1, 100)?;
        check("audio bitrate (kbit/s)", self.audio_kbps, 0, 10_000)
    }

    /// The request path: `/live/<kbps>/<seconds>?fps=..&gop=..&iratio=..&audio=..`.
    pub fn path(&self) -> String {
        format!(
            "/live/{}/{}?fps={}&gop={}&iratio={}&audio={}",
            self.kbps, self.seconds, self.fps, self.gop, self.iratio, self.audio_kbps
        )
    }

    /// Parses `/<kbps>/<seconds>[?key=value&...]` (the path under `/live`).
    pub fn parse(target: &str) -> Result<LiveParams, String> {
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        let mut parts = path.trim_start_matches('/').split('/');
        let mut number = |what: &str| -> Result<u32, String> {
            parts
                .next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("the live path needs /live/<kbps>/<seconds>: bad {what}"))
        };
        let mut p = LiveParams::new(number("kbps")?, number("seconds")?);
        if parts.next().is_some_and(|s| !s.is_empty()) {
            return Err("the live path is /live/<kbps>/<seconds>".into());
        }
        for pair in query.split('&').filter(|s| !s.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let v: u32 = v
                .parse()
                .map_err(|_| format!("live query key {k}: '{v}' is not a number"))?;
            match k {
                "fps" => p.fps = v,
                "gop" => p.gop = v,
                "iratio" => p.iratio = v,
                "audio" => p.audio_kbps = v,
                _ => return Err(format!("unknown live query key '{k}'")),
            }
        }
        p.validate()?;
        Ok(p)
    }

    /// Nominal P-frame payload, bytes: a GOP carries `kbps` for `gop / fps`
    /// seconds, in `iratio + gop - 1` P-frame units.
    fn p_frame_bytes(&self) -> f64 {
        let gop_bytes = f64::from(self.kbps) * 125.0 * f64::from(self.gop) / f64::from(self.fps);
        gop_bytes / f64::from(self.iratio + self.gop - 1)
    }
}

/// The frames of one stream, in order, computed on demand (constant
/// memory for any length).
#[derive(Clone, Debug)]
pub struct FrameSchedule {
    params: LiveParams,
    seed: u64,
    next_video: u64,
    next_audio: u64,
    number: u32,
}

impl FrameSchedule {
    /// The schedule of `params` with sizes drawn from `seed`.
    pub fn new(params: LiveParams, seed: u64) -> FrameSchedule {
        FrameSchedule {
            params,
            seed,
            next_video: 0,
            next_audio: 0,
            number: 0,
        }
    }

    fn video_frames(&self) -> u64 {
        u64::from(self.params.seconds) * u64::from(self.params.fps)
    }

    fn audio_frames(&self) -> u64 {
        if self.params.audio_kbps == 0 {
            0
        } else {
            u64::from(self.params.seconds) * u64::from(AUDIO_FPS)
        }
    }

    fn video_capture(&self, k: u64) -> u64 {
        k * 1_000_000 / u64::from(self.params.fps)
    }

    fn audio_capture(j: u64) -> u64 {
        j * 1_000_000 / u64::from(AUDIO_FPS)
    }

    /// Total bytes of the stream, headers included.
    pub fn total_bytes(&self) -> u64 {
        FrameSchedule::new(self.params, self.seed).fold(0u64, |total, h| {
            total.saturating_add(HEADER_LEN as u64 + u64::from(h.size))
        })
    }
}

impl Iterator for FrameSchedule {
    type Item = FrameHeader;

    fn next(&mut self) -> Option<FrameHeader> {
        let video =
            (self.next_video < self.video_frames()).then(|| self.video_capture(self.next_video));
        let audio =
            (self.next_audio < self.audio_frames()).then(|| Self::audio_capture(self.next_audio));
        let p = self.params;
        let header = match (video, audio) {
            (Some(v), a) if a.is_none_or(|a| v <= a) => {
                let k = self.next_video;
                self.next_video += 1;
                let i_frame = k % u64::from(p.gop) == 0;
                let nominal = p.p_frame_bytes() * if i_frame { f64::from(p.iratio) } else { 1.0 };
                let factor = 0.8 + 0.4 * draw(self.seed, "live/frame", k);
                FrameHeader {
                    kind: if i_frame {
                        FrameKind::VideoI
                    } else {
                        FrameKind::VideoP
                    },
                    number: self.number,
                    capture_us: v,
                    duration_us: 1_000_000 / p.fps,
                    size: (nominal * factor).round().clamp(1.0, 8e6) as u32,
                }
            }
            (_, Some(a)) => {
                self.next_audio += 1;
                FrameHeader {
                    kind: FrameKind::Audio,
                    number: self.number,
                    capture_us: a,
                    duration_us: 1_000_000 / AUDIO_FPS,
                    size: ((f64::from(p.audio_kbps) * 125.0 / f64::from(AUDIO_FPS)).round() as u32)
                        .max(1),
                }
            }
            _ => return None,
        };
        self.number = self.number.wrapping_add(1);
        Some(header)
    }
}

/// The body of one live response: frames as the source produces them.
pub struct LiveBody {
    schedule: FrameSchedule,
    /// When the stream started (capture time 0).
    start: Instant,
    /// The frame being sent: header bytes left, payload generator.
    current: Option<(FrameHeader, usize, FileContent)>,
    peeked: Option<FrameHeader>,
}

impl LiveBody {
    /// The stream of `params` (sizes from `seed`) starting at `start`.
    pub fn new(params: LiveParams, seed: u64, start: Instant) -> LiveBody {
        LiveBody {
            schedule: FrameSchedule::new(params, seed),
            start,
            current: None,
            peeked: None,
        }
    }
}

impl Body for LiveBody {
    fn read(&mut self, now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        let mut n = 0;
        while n < buf.len() {
            if self.current.is_none() {
                let Some(h) = self.peeked.take().or_else(|| self.schedule.next()) else {
                    break;
                };
                let due = self.start + Duration::from_micros(h.capture_us);
                if due > now {
                    self.peeked = Some(h);
                    if n == 0 {
                        return Ok(BodyChunk::Wait(Some(due)));
                    }
                    break;
                }
                let payload =
                    FileContent::new(PAYLOAD_SEED, u64::from(h.number), u64::from(h.size));
                self.current = Some((h, 0, payload));
            }
            let Some((h, sent, payload)) = self.current.as_mut() else {
                break;
            };
            if *sent < HEADER_LEN {
                let bytes = h.encode();
                let rest = bytes.get(*sent..).unwrap_or_default();
                let take = rest.len().min(buf.len() - n);
                if let (Some(dst), Some(src)) = (buf.get_mut(n..n + take), rest.get(..take)) {
                    dst.copy_from_slice(src);
                }
                *sent += take;
                n += take;
                continue;
            }
            n += payload.fill(buf.get_mut(n..).unwrap_or_default());
            if payload.remaining() == 0 {
                self.current = None;
            }
        }
        Ok(if n == 0 {
            BodyChunk::End
        } else {
            BodyChunk::Data(n)
        })
    }
}

/// Live streams under `/live`: `/<kbps>/<seconds>?...`, started when the
/// request is answered, sizes seeded by `seed`.
#[derive(Clone, Copy, Debug)]
pub struct LiveContent {
    /// Seed of the frame size variation.
    pub seed: u64,
}

impl Content for LiveContent {
    fn resolve(&mut self, now: Instant, target: &str) -> Result<Resource, Refusal> {
        let params = LiveParams::parse(target).map_err(|_| Refusal::NotFound)?;
        let length = FrameSchedule::new(params, self.seed).total_bytes();
        Ok(Resource {
            content_type: "application/octet-stream",
            length: Some(length),
            body: Box::new(LiveBody::new(params, self.seed, now)),
        })
    }
}

/// What the live player measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LiveReport {
    /// Frames received whole (video and audio).
    pub frames: u64,
    /// Video frames among them.
    pub video_frames: u64,
    /// Payload bytes of all frames.
    pub payload_bytes: u64,
    /// The playout's start-up, playback and freezes.
    pub playout: PlayoutStats,
    /// Payload bits per second of playback, kbit/s.
    pub avg_bitrate_kbps: f64,
    /// Freezes per 100 s of playback.
    pub freeze_count: f64,
    /// Frozen time per 100 s of playback, ms.
    pub freeze_ms: f64,
}

/// The live player: fetches one stream, checks every frame, and plays its
/// video frames out with a start-up delay ([`Playout`]).
pub struct LivePlayer {
    path: String,
    parser: FrameParser,
    playout: Playout,
    frames: u64,
    video_frames: u64,
    payload_bytes: u64,
    ended: bool,
}

impl LivePlayer {
    /// Default start-up delay (issue 10: 1 s).
    pub const DEFAULT_STARTUP: Duration = Duration::from_secs(1);

    /// Plays the stream at `path` (`/live/...`) after `startup_delay`.
    pub fn new(path: String, startup_delay: Duration) -> LivePlayer {
        LivePlayer {
            path,
            parser: FrameParser::new(),
            playout: Playout::new(startup_delay),
            frames: 0,
            video_frames: 0,
            payload_bytes: 0,
            ended: false,
        }
    }

    /// The statistics so far; with `cut_at`, the stream broke off then.
    pub fn report(&self, cut_at: Option<Instant>) -> LiveReport {
        let playout = self.playout.stats(cut_at.filter(|_| !self.ended));
        let secs = playout.played.as_secs_f64();
        LiveReport {
            frames: self.frames,
            video_frames: self.video_frames,
            payload_bytes: self.payload_bytes,
            playout,
            avg_bitrate_kbps: if secs > 0.0 {
                self.payload_bytes as f64 * 8.0 / secs / 1e3
            } else {
                0.0
            },
            freeze_count: playout.per_100s(playout.stalls as f64),
            freeze_ms: playout.per_100s(playout.stalled.as_secs_f64() * 1e3),
        }
    }
}

impl Fetcher for LivePlayer {
    fn next(&mut self, now: Instant, index: u64) -> Next {
        if index == 0 {
            self.playout.requested(now);
            Next::Get(self.path.clone())
        } else {
            Next::Done
        }
    }

    fn start(&mut self, _now: Instant, index: u64, head: &ResponseHead) -> Result<(), ClientError> {
        if head.status != 200 {
            return Err(ClientError::Status {
                file: index,
                status: head.status,
            });
        }
        Ok(())
    }

    fn data(
        &mut self,
        now: Instant,
        index: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ClientError> {
        let (playout, frames, video, payload) = (
            &mut self.playout,
            &mut self.frames,
            &mut self.video_frames,
            &mut self.payload_bytes,
        );
        self.parser
            .push(bytes, |h| {
                *frames += 1;
                *payload += u64::from(h.size);
                if h.kind.is_video() {
                    *video += 1;
                    playout.arrived(
                        now,
                        Duration::from_micros(h.capture_us),
                        Duration::from_micros(u64::from(h.duration_us)),
                    );
                }
            })
            .map_err(|e| frame_error(index, offset, e))
    }

    fn end(&mut self, _now: Instant, index: u64, received: u64) -> Result<(), ClientError> {
        self.ended = true;
        self.parser
            .finish()
            .map_err(|e| frame_error(index, received, e))
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

fn frame_error(index: u64, offset: u64, e: crate::video::frame::FrameError) -> ClientError {
    use crate::video::frame::FrameError;
    match e {
        FrameError::Payload { .. } => ClientError::Mismatch {
            file: index,
            offset,
        },
        e => ClientError::Stream {
            file: index,
            reason: format!("live stream: {e}"),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_round_trips_and_bad_ones_are_refused() {
        let mut p = LiveParams::new(8000, 60);
        p.audio_kbps = 64;
        p.gop = 30;
        let path = p.path();
        assert_eq!(
            LiveParams::parse(path.strip_prefix("/live").unwrap_or("")),
            Ok(p)
        );
        assert_eq!(LiveParams::parse("/800/10"), Ok(LiveParams::new(800, 10)));
        for bad in [
            "/",
            "/800",
            "/800/x",
            "/0/10",
            "/800/10/3",
            "/800/10?fps=0",
            "/8/1?spin=3",
            "/8/1?fps=x",
        ] {
            assert!(LiveParams::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_schedule_meets_the_bitrate_with_large_i_frames() {
        let p = LiveParams::new(8000, 10);
        let frames: Vec<FrameHeader> = FrameSchedule::new(p, 7).collect();
        assert_eq!(frames.len(), 300);
        let payload: u64 = frames.iter().map(|h| u64::from(h.size)).sum();
        let kbps = payload as f64 * 8.0 / 10.0 / 1e3;
        assert!((kbps - 8000.0).abs() < 8000.0 * 0.03, "{kbps}");
        let i: Vec<&FrameHeader> = frames
            .iter()
            .filter(|h| h.kind == FrameKind::VideoI)
            .collect();
        assert_eq!(i.len(), 5, "one I-frame every 60 frames");
        let mean_p = frames
            .iter()
            .filter(|h| h.kind == FrameKind::VideoP)
            .map(|h| f64::from(h.size))
            .sum::<f64>()
            / 295.0;
        let mean_i = i.iter().map(|h| f64::from(h.size)).sum::<f64>() / 5.0;
        assert!(
            (3.0..8.0).contains(&(mean_i / mean_p)),
            "{}",
            mean_i / mean_p
        );
        // Seeded: the same seed gives the same sizes, another seed others.
        let again: Vec<FrameHeader> = FrameSchedule::new(p, 7).collect();
        assert_eq!(frames, again);
        let other: Vec<FrameHeader> = FrameSchedule::new(p, 8).collect();
        assert_ne!(frames, other);
    }

    #[test]
    fn audio_interleaves_in_capture_order() {
        let mut p = LiveParams::new(100, 1);
        p.audio_kbps = 32;
        let frames: Vec<FrameHeader> = FrameSchedule::new(p, 1).collect();
        assert_eq!(frames.len(), 30 + 50);
        assert!(frames
            .windows(2)
            .all(|w| w[0].capture_us <= w[1].capture_us));
        assert!(frames
            .iter()
            .enumerate()
            .all(|(i, h)| h.number as usize == i));
        assert_eq!(
            frames.iter().filter(|h| h.kind == FrameKind::Audio).count(),
            50
        );
        assert_eq!(
            frames
                .iter()
                .find(|h| h.kind == FrameKind::Audio)
                .map(|h| h.size),
            Some(80)
        );
    }

    #[test]
    fn the_body_is_paced_by_the_source_clock_and_parses_back() {
        let p = LiveParams::new(800, 2);
        let start = Instant::from_millis(1000);
        let mut body = LiveBody::new(p, 3, start);
        let mut buf = vec![0; 1 << 16];
        let mut parser = FrameParser::new();
        let mut seen = Vec::new();
        let mut now = start;
        let mut bytes = 0u64;
        loop {
            match body.read(now, &mut buf).expect("reads") {
                BodyChunk::Data(n) => {
                    bytes += n as u64;
                    parser
                        .push(&buf[..n], |h| seen.push((h.number, now, h.capture_us)))
                        .expect("valid frames");
                }
                BodyChunk::Wait(Some(at)) => {
                    assert!(at > now, "waits for a later frame");
                    now = at;
                }
                BodyChunk::Wait(None) => panic!("a live body always knows its next frame"),
                BodyChunk::End => break,
            }
        }
        parser.finish().expect("ends on a frame boundary");
        assert_eq!(seen.len(), 60);
        assert_eq!(bytes, FrameSchedule::new(p, 3).total_bytes());
        for (_, sent_at, capture_us) in &seen {
            assert_eq!(
                *sent_at,
                start + Duration::from_micros(*capture_us),
                "sent when produced"
            );
        }
        // Nothing before the first frame's time... and the first frame at once.
        let mut early = LiveBody::new(p, 3, start);
        assert!(matches!(
            early.read(start, &mut buf),
            Ok(BodyChunk::Data(_))
        ));
        assert_eq!(
            early.read(start, &mut buf),
            Ok(BodyChunk::Wait(Some(start + Duration::from_micros(33_333))))
        );
    }
}
