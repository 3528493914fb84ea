//! DASH video on demand (ART §7.5, Fig. 25): a generated origin (a
//! manifest and segments), a throughput-based rate adaptation and the
//! player.
//!
//! Content: a video of `seconds` in 2 s segments ([`SEGMENT`]) at the
//! bitrates of Big Buck Bunny in the ITEC DASH dataset ([`LADDER_BPS`]).
//! Segment `n` of a representation of bitrate `b` holds
//! `b * 2 s / 8 * f(n)` bytes, where `f(n)`, drawn uniformly from
//! [0.75, 1.25] for each segment number with the origin's seed, is the
//! scene's complexity: the same for every representation, as in an
//! encoded video. Payload bytes are [`FileContent`] for
//! [`PAYLOAD_SEED`], index `rep << 32 | n`, so the player checks every
//! byte without knowing the origin's seed.
//!
//! Paths under `/dash`: `/<seconds>/manifest.mpd` and
//! `/<seconds>/<rep>/<n>.m4s` (`rep` 0 = the lowest bitrate, `n` from 1).
//!
//! Player ([`DashPlayer`]): fetches the manifest, then every segment in
//! order over the same connection, one at a time. Before each segment the
//! rate adaptation ([`RateBasedAbr`]) picks the highest representation
//! whose bitrate is at most 0.9 times the harmonic mean of the last three
//! segments' download rates (the lowest for the first segment): the
//! "basic" adaptation driven by segment download rates alone that ART's
//! evaluation uses. Playback starts as soon as the first segment is in
//! and rebuffers whenever the next segment is not in when it is due
//! ([`Playout`]). The player stops requesting while more than
//! [`MAX_BUFFER`] of video is buffered (dash.js's default buffer target at
//! the top quality).

use wire::time::{Duration, Instant};

use crate::content::{Body, BodyChunk, BytesBody, Content, FileContent, Refusal, Resource};
use crate::files::{ClientError, Fetcher, Next};
use crate::http::ResponseHead;
use crate::video::draw;
use crate::video::mpd::{Manifest, Representation};
use crate::video::playout::{Playout, PlayoutStats};

/// The bitrate ladder, bit/s: Big Buck Bunny in the ITEC DASH dataset
/// (DASHDataset2014, `BigBuckBunny/2sec/bunny_<bitrate>bps`), from 45 kbit/s
/// to 3.84 Mbit/s (the paper: "44 Kbps to 3.9 Mbps").
pub const LADDER_BPS: [u64; 19] = [
    45_652, 89_283, 131_087, 178_351, 221_600, 262_537, 334_349, 396_126, 522_286, 595_491,
    791_182, 1_032_682, 1_244_778, 1_546_902, 2_133_691, 2_484_135, 3_078_587, 3_526_922,
    3_840_360,
];

/// Segment length: 2 s (the dataset's shortest common choice and the one
/// its authors found best over HTTP/1.1 with persistent connections;
/// short segments let the rate adaptation react within 2 s of playback).
pub const SEGMENT: Duration = Duration::from_secs(2);
/// Default video length (the paper's: about 600 s).
pub const DEFAULT_SECONDS: u32 = 600;
/// Longest video, seconds.
pub const MAX_SECONDS: u32 = 86_400;
/// Content seed of segment payloads.
pub const PAYLOAD_SEED: u64 = 0x6461_7368_7365_6773; // "dashsegs"
/// Most video the player buffers before it stops requesting.
pub const MAX_BUFFER: Duration = Duration::from_secs(30);

/// Size of segment `number` (from 1) of representation `rep`, bytes; `None`
/// for a segment or representation that does not exist.
pub fn segment_bytes(seed: u64, seconds: u32, rep: usize, number: u64) -> Option<u64> {
    let bps = *LADDER_BPS.get(rep)?;
    let count = u64::from(seconds).div_ceil(SEGMENT.as_secs());
    if number == 0 || number > count {
        return None;
    }
    // The last segment covers what is left of the video.
    let covered = (u64::from(seconds) - (number - 1) * SEGMENT.as_secs()).min(SEGMENT.as_secs());
    let factor = 0.75 + 0.5 * draw(seed, "dash/segment", number);
    let nominal = bps as f64 * covered as f64 / 8.0;
    Some(((nominal * factor).round() as u64).max(1))
}

/// The manifest of a `seconds`-long video.
pub fn manifest(seconds: u32) -> Manifest {
    Manifest {
        duration: Duration::from_secs(u64::from(seconds)),
        segment: SEGMENT,
        start_number: 1,
        media: "$RepresentationID$/$Number$.m4s".into(),
        representations: LADDER_BPS
            .iter()
            .enumerate()
            .map(|(i, &b)| Representation {
                id: i.to_string(),
                bandwidth: b,
            })
            .collect(),
    }
}

/// The DASH origin under `/dash`: manifests and segments of videos of any
/// length up to [`MAX_SECONDS`], generated; sizes seeded by `seed`.
#[derive(Clone, Copy, Debug)]
pub struct DashContent {
    /// Seed of the segment size variation.
    pub seed: u64,
}

impl Content for DashContent {
    fn resolve(&mut self, _now: Instant, target: &str) -> Result<Resource, Refusal> {
        let path = target.split(['?', '#']).next().unwrap_or("");
        let mut parts = path.trim_start_matches('/').split('/');
        let seconds: u32 = parts
            .next()
            .and_then(|s| s.parse().ok())
            .filter(|s| (1..=MAX_SECONDS).contains(s))
            .ok_or(Refusal::NotFound)?;
        match (parts.next(), parts.next(), parts.next()) {
            (Some("manifest.mpd"), None, None) => {
                let xml = manifest(seconds).to_xml().into_bytes();
                Ok(Resource {
                    content_type: "application/dash+xml",
                    length: Some(xml.len() as u64),
                    body: Box::new(BytesBody::new(xml)),
                })
            }
            (Some(rep), Some(file), None) => {
                let rep: usize = rep.parse().map_err(|_| Refusal::NotFound)?;
                let number: u64 = file
                    .strip_suffix(".m4s")
                    .and_then(|n| n.parse().ok())
                    .ok_or(Refusal::NotFound)?;
                let size =
                    segment_bytes(self.seed, seconds, rep, number).ok_or(Refusal::NotFound)?;
                Ok(Resource {
                    content_type: "video/iso.segment",
                    length: Some(size),
                    body: Box::new(SegmentBody(FileContent::new(
                        PAYLOAD_SEED,
                        payload_index(rep, number),
                        size,
                    ))),
                })
            }
            _ => Err(Refusal::NotFound),
        }
    }
}

fn payload_index(rep: usize, number: u64) -> u64 {
    ((rep as u64) << 32) | (number & 0xffff_ffff)
}

/// A segment's body.
struct SegmentBody(FileContent);

impl Body for SegmentBody {
    fn read(&mut self, now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        self.0.read(now, buf)
    }
}

/// The throughput-based rate adaptation: the highest bitrate below a
/// safety share of the recent download rate.
#[derive(Clone, Debug)]
pub struct RateBasedAbr {
    /// Download rates of the last segments, bit/s, newest last.
    samples: Vec<f64>,
}

impl RateBasedAbr {
    /// Segments whose rates are averaged.
    pub const WINDOW: usize = 3;
    /// Share of the estimate the chosen bitrate may use.
    pub const SAFETY: f64 = 0.9;

    /// No samples yet.
    pub fn new() -> RateBasedAbr {
        RateBasedAbr {
            samples: Vec::new(),
        }
    }

    /// A segment of `bytes` took `took` from request to last byte.
    pub fn sample(&mut self, bytes: u64, took: Duration) {
        let secs = took.as_secs_f64().max(1e-6);
        if self.samples.len() == Self::WINDOW {
            self.samples.remove(0);
        }
        self.samples.push(bytes as f64 * 8.0 / secs);
    }

    /// The throughput estimate: harmonic mean of the samples, bit/s.
    pub fn estimate(&self) -> Option<f64> {
        if self.samples.is_empty() {
            return None;
        }
        let inv: f64 = self.samples.iter().map(|r| 1.0 / r.max(1e-9)).sum();
        Some(self.samples.len() as f64 / inv)
    }

    /// The representation (index into `ladder`, by increasing bitrate) to
    /// fetch next: the lowest before any sample.
    pub fn choose(&self, ladder: &[u64]) -> usize {
        let Some(est) = self.estimate() else {
            return 0;
        };
        ladder
            .iter()
            .rposition(|&b| b as f64 <= Self::SAFETY * est)
            .unwrap_or(0)
    }
}

impl Default for RateBasedAbr {
    fn default() -> Self {
        RateBasedAbr::new()
    }
}

/// What the DASH player measured.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct DashReport {
    /// Segments played.
    pub segments: u64,
    /// Mean bitrate of the played segments' representations, kbit/s.
    pub avg_bitrate_kbps: f64,
    /// Changes of representation between consecutive segments.
    pub switches: u64,
    /// Start-up time, rebufferings, playback.
    pub playout: PlayoutStats,
}

/// The segment being downloaded.
#[derive(Clone, Copy, Debug)]
struct Pending {
    rep: usize,
    number: u64,
    requested: Instant,
    length: Option<u64>,
}

/// The DASH player: manifest, then segments chosen by [`RateBasedAbr`],
/// played out by [`Playout`].
pub struct DashPlayer {
    manifest_path: String,
    manifest_text: Vec<u8>,
    manifest: Option<Manifest>,
    abr: RateBasedAbr,
    playout: Playout,
    pending: Option<Pending>,
    check: Option<FileContent>,
    played_bitrate_sum: u64,
    segments: u64,
    last_rep: Option<usize>,
    switches: u64,
    ended: bool,
}

impl DashPlayer {
    /// Plays the video whose manifest is at `manifest_path`.
    pub fn new(manifest_path: String) -> DashPlayer {
        DashPlayer {
            manifest_path,
            manifest_text: Vec::new(),
            manifest: None,
            abr: RateBasedAbr::new(),
            playout: Playout::new(Duration::ZERO),
            pending: None,
            check: None,
            played_bitrate_sum: 0,
            segments: 0,
            last_rep: None,
            switches: 0,
            ended: false,
        }
    }

    /// The manifest's path for a `seconds`-long video of our origin.
    pub fn path(seconds: u32) -> String {
        format!("/dash/{seconds}/manifest.mpd")
    }

    /// The statistics so far; with `cut_at`, the session broke off then.
    pub fn report(&self, cut_at: Option<Instant>) -> DashReport {
        DashReport {
            segments: self.segments,
            avg_bitrate_kbps: if self.segments == 0 {
                0.0
            } else {
                self.played_bitrate_sum as f64 / self.segments as f64 / 1e3
            },
            switches: self.switches,
            playout: self.playout.stats(cut_at.filter(|_| !self.ended)),
        }
    }

    fn base(&self) -> &str {
        self.manifest_path
            .rsplit_once('/')
            .map_or("", |(dir, _)| dir)
    }
}

impl Fetcher for DashPlayer {
    fn next(&mut self, now: Instant, index: u64) -> Next {
        if index == 0 {
            self.playout.requested(now);
            return Next::Get(self.manifest_path.clone());
        }
        let Some(m) = &self.manifest else {
            return Next::Done;
        };
        if index > m.segments() {
            self.ended = true;
            return Next::Done;
        }
        let buffered = self.playout.buffered(now);
        let room = MAX_BUFFER.saturating_sub(m.segment);
        if buffered > room {
            return Next::Wait(Some(now + (buffered - room)));
        }
        let ladder: Vec<u64> = m.representations.iter().map(|r| r.bandwidth).collect();
        let rep = self.abr.choose(&ladder);
        let number = m.start_number.saturating_add(index - 1);
        let url = format!("{}/{}", self.base(), m.segment_url(rep, number));
        self.pending = Some(Pending {
            rep,
            number,
            requested: now,
            length: None,
        });
        Next::Get(url)
    }

    fn start(&mut self, _now: Instant, index: u64, head: &ResponseHead) -> Result<(), ClientError> {
        if head.status != 200 {
            return Err(ClientError::Status {
                file: index,
                status: head.status,
            });
        }
        if let Some(p) = self.pending.as_mut() {
            p.length = head.content_length();
            // Our origin's payloads are checked; another origin's bodies
            // are taken as they come.
            self.check = p.length.map(|len| {
                let rep = self
                    .manifest
                    .as_ref()
                    .and_then(|m| m.representations.get(p.rep))
                    .and_then(|r| r.id.parse::<usize>().ok())
                    .unwrap_or(p.rep);
                FileContent::new(PAYLOAD_SEED, payload_index(rep, p.number), len)
            });
        }
        Ok(())
    }

    fn data(
        &mut self,
        _now: Instant,
        index: u64,
        offset: u64,
        bytes: &[u8],
    ) -> Result<(), ClientError> {
        if index == 0 {
            if self.manifest_text.len() + bytes.len() > crate::video::mpd::MAX_MPD_BYTES {
                return Err(ClientError::Stream {
                    file: 0,
                    reason: "the manifest is too large".into(),
                });
            }
            self.manifest_text.extend_from_slice(bytes);
            return Ok(());
        }
        if let Some(check) = self.check.as_mut() {
            if check.verify(bytes).is_err() {
                return Err(ClientError::Mismatch {
                    file: index,
                    offset,
                });
            }
        }
        Ok(())
    }

    fn end(&mut self, now: Instant, index: u64, received: u64) -> Result<(), ClientError> {
        if index == 0 {
            let text =
                std::str::from_utf8(&self.manifest_text).map_err(|_| ClientError::Stream {
                    file: 0,
                    reason: "the manifest is not UTF-8".into(),
                })?;
            let m = Manifest::parse(text).map_err(|e| ClientError::Stream {
                file: 0,
                reason: format!("manifest: {e}"),
            })?;
            self.manifest = Some(m);
            self.manifest_text = Vec::new();
            return Ok(());
        }
        let Some(p) = self.pending.take() else {
            return Ok(());
        };
        if let Some(expected) = p.length.filter(|&l| l != received) {
            return Err(ClientError::WrongLength {
                file: index,
                received,
                expected,
            });
        }
        self.check = None;
        let (segment, bitrate) = match &self.manifest {
            Some(m) => (
                m.segment,
                m.representations.get(p.rep).map_or(0, |r| r.bandwidth),
            ),
            None => (Duration::ZERO, 0),
        };
        let media_time = segment.saturating_mul(u32::try_from(index - 1).unwrap_or(u32::MAX));
        self.playout.arrived(now, media_time, segment);
        self.abr
            .sample(received, now.saturating_duration_since(p.requested));
        self.segments += 1;
        self.played_bitrate_sum += bitrate;
        if self.last_rep.is_some_and(|r| r != p.rep) {
            self.switches += 1;
        }
        self.last_rep = Some(p.rep);
        Ok(())
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ladder_spans_the_datasets_range() {
        assert_eq!(LADDER_BPS.first(), Some(&45_652));
        assert_eq!(LADDER_BPS.last(), Some(&3_840_360));
        assert!(LADDER_BPS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn segment_sizes_vary_around_the_bitrate_with_the_seed() {
        let seconds = 600;
        for rep in [0, 9, 18] {
            let sizes: Vec<u64> = (1..=300)
                .map(|n| segment_bytes(5, seconds, rep, n).expect("exists"))
                .collect();
            let nominal = LADDER_BPS[rep] as f64 * 2.0 / 8.0;
            let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
            assert!(
                (mean / nominal - 1.0).abs() < 0.05,
                "rep {rep}: {mean} vs {nominal}"
            );
            assert!(sizes
                .iter()
                .all(|&s| (s as f64) >= nominal * 0.74 && (s as f64) <= nominal * 1.26));
            assert!(sizes.windows(2).any(|w| w[0] != w[1]), "sizes vary");
        }
        // The scene's complexity is shared by the representations.
        let ratio = |n| {
            segment_bytes(5, seconds, 18, n).unwrap_or(0) as f64
                / segment_bytes(5, seconds, 9, n).unwrap_or(1) as f64
        };
        assert!((ratio(3) - ratio(200)).abs() < 1e-3);
        assert_ne!(
            segment_bytes(5, seconds, 9, 3),
            segment_bytes(6, seconds, 9, 3)
        );
        assert_eq!(
            segment_bytes(5, seconds, 9, 3),
            segment_bytes(5, seconds, 9, 3)
        );
        // A 5 s video: segments of 2, 2 and 1 s; nothing past them.
        let last = segment_bytes(1, 5, 0, 3).unwrap_or(0) as f64;
        assert!((last - 45_652.0 / 8.0).abs() < 45_652.0 / 8.0 * 0.26);
        assert_eq!(segment_bytes(1, 5, 0, 4), None);
        assert_eq!(segment_bytes(1, 5, 0, 0), None);
        assert_eq!(segment_bytes(1, 5, LADDER_BPS.len(), 1), None);
    }

    #[test]
    fn the_abr_follows_the_harmonic_mean_of_recent_rates() {
        let mut abr = RateBasedAbr::new();
        assert_eq!(abr.choose(&LADDER_BPS), 0, "lowest before any sample");
        // 1 Mbit/s: 0.9 Mbit/s allowed -> 791 kbit/s.
        abr.sample(125_000, Duration::from_secs(1));
        assert_eq!(LADDER_BPS[abr.choose(&LADDER_BPS)], 791_182);
        // Rates 1, 4, 4 Mbit/s: harmonic mean 2 Mbit/s -> 1.8 allowed.
        abr.sample(500_000, Duration::from_secs(1));
        abr.sample(500_000, Duration::from_secs(1));
        assert!((abr.estimate().unwrap_or(0.0) - 2e6).abs() < 1.0);
        assert_eq!(LADDER_BPS[abr.choose(&LADDER_BPS)], 1_546_902);
        // The oldest sample leaves the window: 4, 4, 4 Mbit/s.
        abr.sample(500_000, Duration::from_secs(1));
        assert_eq!(LADDER_BPS[abr.choose(&LADDER_BPS)], 3_526_922);
        // Collapse: one very slow segment pulls the harmonic mean down.
        abr.sample(1_000, Duration::from_secs(1));
        assert_eq!(abr.choose(&LADDER_BPS), 0);
        // A zero-time download does not divide by zero.
        let mut fast = RateBasedAbr::new();
        fast.sample(1, Duration::ZERO);
        assert_eq!(fast.choose(&LADDER_BPS), LADDER_BPS.len() - 1);
    }

    /// Plays `seconds` of our origin's video through the player's Fetcher
    /// calls: each segment takes `took(n)` to download, starting when the
    /// player asks for it (or when it said to wait until).
    fn play(seconds: u32, took: impl Fn(u64) -> Duration) -> (DashPlayer, Vec<Instant>) {
        let mut origin = DashContent { seed: 2 };
        let mut p = DashPlayer::new(DashPlayer::path(seconds));
        let mut now = Instant::ZERO;
        let mut waits = Vec::new();
        let mut buf = vec![0; 1 << 16];
        let mut index = 0;
        loop {
            let path = match p.next(now, index) {
                Next::Get(path) => path,
                Next::Wait(Some(at)) => {
                    assert!(at > now);
                    waits.push(now);
                    now = at;
                    continue;
                }
                Next::Wait(None) => panic!("the player always knows when to ask again"),
                Next::Done => break,
            };
            let target = path.strip_prefix("/dash").expect("our origin's path");
            let mut r = origin.resolve(now, target).expect("exists");
            let head =
                ResponseHead::new(200).with("content-length", r.length.unwrap_or(0).to_string());
            p.start(now, index, &head).expect("200");
            now += if index == 0 {
                Duration::from_millis(50)
            } else {
                took(index)
            };
            let mut offset = 0;
            while let Ok(BodyChunk::Data(n)) = r.body.read(now, &mut buf) {
                p.data(now, index, offset, &buf[..n]).expect("valid bytes");
                offset += n as u64;
            }
            p.end(now, index, offset).expect("complete");
            index += 1;
        }
        (p, waits)
    }

    #[test]
    fn the_player_fills_its_buffer_then_paces_requests() {
        // Fast downloads: 100 ms per segment. The buffer fills to the
        // target, then the player waits between requests.
        let (p, waits) = play(120, |_| Duration::from_millis(100));
        let r = p.report(None);
        assert_eq!(r.segments, 60);
        assert_eq!(r.playout.played, Duration::from_secs(120));
        assert_eq!(r.playout.stalls, 0);
        assert_eq!(r.playout.startup, Some(Duration::from_millis(150)));
        assert!(!waits.is_empty(), "a full buffer makes the player wait");
        assert!(r.switches >= 1, "it climbs from the lowest rung");
        assert!(r.avg_bitrate_kbps > 1000.0, "{r:?}");
    }

    #[test]
    fn slow_segments_rebuffer_and_lower_the_bitrate() {
        // Segment 2 takes 6 s while only the first 2 s segment is
        // buffered: a 4 s rebuffering; every eighth one after is slow too,
        // and the rate estimate falls each time.
        let (p, _) = play(40, |n| {
            if n % 8 == 2 {
                Duration::from_secs(6)
            } else {
                Duration::from_millis(300)
            }
        });
        let r = p.report(None);
        assert_eq!(r.segments, 20);
        assert!(r.playout.stalls >= 1, "{r:?}");
        assert!(r.playout.stalled >= Duration::from_secs(4), "{r:?}");
        assert!(r.switches >= 2, "{r:?}");
    }

    #[test]
    fn a_corrupt_segment_is_refused() {
        let mut p = DashPlayer::new(DashPlayer::path(4));
        let now = Instant::ZERO;
        let Next::Get(_) = p.next(now, 0) else {
            panic!("manifest first")
        };
        let xml = manifest(4).to_xml();
        let head = ResponseHead::new(200);
        p.start(now, 0, &head).expect("200");
        p.data(now, 0, 0, xml.as_bytes()).expect("text");
        p.end(now, 0, xml.len() as u64).expect("parses");
        let Next::Get(path) = p.next(now, 1) else {
            panic!("a segment")
        };
        assert_eq!(path, "/dash/4/0/1.m4s");
        let head = ResponseHead::new(200).with("content-length", "100");
        p.start(now, 1, &head).expect("200");
        assert!(matches!(
            p.data(now, 1, 0, &[0u8; 100]),
            Err(ClientError::Mismatch { .. })
        ));
        assert!(matches!(
            p.end(now, 1, 99),
            Err(ClientError::WrongLength { .. })
        ));
    }

    #[test]
    fn the_origin_answers_manifests_and_segments() {
        let mut origin = DashContent { seed: 1 };
        let m = origin
            .resolve(Instant::ZERO, "/10/manifest.mpd")
            .expect("manifest");
        assert_eq!(m.content_type, "application/dash+xml");
        let s = origin
            .resolve(Instant::ZERO, "/10/18/5.m4s")
            .expect("segment");
        assert_eq!(s.length, segment_bytes(1, 10, 18, 5));
        for bad in [
            "/10/18/6.m4s",
            "/10/19/1.m4s",
            "/0/manifest.mpd",
            "/x/manifest.mpd",
            "/10/1/1.mp4",
            "/10",
        ] {
            assert!(origin.resolve(Instant::ZERO, bad).is_err(), "{bad}");
        }
    }
}
