//! Live responses shared by their viewers: one origin response (an
//! encoder's endless HTTP-FLV or MPEG-TS body) relayed once, read by every
//! viewer of the path, and the rule of where a late joiner starts.
//!
//! [`LiveRelay`] is sans-IO: the proxy [`push`](LiveRelay::push)es the
//! origin's bytes as they arrive, [`join`](LiveRelay::join)s viewers,
//! [`read`](LiveRelay::read)s each viewer's next bytes when its stream can
//! take them, and reports the origin's end with
//! [`finish`](LiveRelay::finish). Bytes are relayed unchanged (timestamps,
//! continuity counters and all are the origin's).
//!
//! # The join rule
//!
//! A player can decode from a point where it has every parameter it needs
//! and the next frame depends on no earlier one. So a viewer receives a
//! *preamble* and then the stream from the start of the most recent
//! *keyframe unit*:
//!
//! - **FLV** (`video/x-flv`). Preamble: the FLV file header (its
//!   `DataOffset` bytes, normally 9, plus PreviousTagSize0), then the latest
//!   `onMetaData` script tag, the latest video sequence header (AVC or HEVC
//!   decoder configuration: a video tag with codec 7 or 12 and
//!   AVCPacketType 0, or an enhanced-RTMP `SequenceStart`) and the latest
//!   AAC sequence header (an audio tag with sound format 10 and
//!   AACPacketType 0), each if seen, each tag whole with its
//!   PreviousTagSize. Keyframe unit: a video tag with frame type 1 that
//!   carries a frame (AVCPacketType 1, enhanced `CodedFrames(X)`; any tag
//!   for codecs without sequence headers). A codec that needs a sequence
//!   header gives no join point until one has been seen.
//! - **MPEG-TS** (`video/mp2t`). Preamble: the latest PAT packet and the
//!   latest packet of the PMT it names. Keyframe unit: a packet on the
//!   PMT's first video stream (stream types 0x01, 0x02, 0x10, 0x1B, 0x24,
//!   0x33) with payload_unit_start_indicator set and random_access_indicator
//!   set in its adaptation field. ffmpeg's muxer sets that indicator on the
//!   first packet of every video keyframe's PES, and also on every *audio*
//!   PES start: the rule therefore looks only at the video PID (checked on
//!   the committed ffmpeg fixture, see the tests). A PAT or PMT section
//!   that does not fit in its one packet is ignored (single-packet PSI is
//!   what live encoders write for one program); only the PAT's first
//!   program is followed.
//!
//! The preamble is the one *as of the keyframe*: a sequence header or PMT
//! that arrives after the keyframe reaches the viewer in the stream itself,
//! at its place, so the frames in between decode with the parameters they
//! were encoded with. A viewer's first bytes are therefore always a whole
//! header or packet, and then only whole tags or packets follow: bytes of a
//! tag or packet become readable once all of it has arrived and parsed (the
//! cost is at most one tag of latency).
//!
//! A viewer joined before any join point exists (no keyframe yet) reads
//! [`ViewerRead::Wait`] and starts at the first one. Streams without video
//! (or with a codec the rule does not know) therefore have no join point and
//! are not joinable: their viewers wait until the origin ends.
//!
//! # Memory
//!
//! Stream bytes are stored once, in one ring buffer with a base offset;
//! viewers are offsets into it, and the preamble is one shared `Rc` per
//! keyframe. The relay keeps bytes from the earliest of: the last join
//! point, the slowest viewer's position, and the start of the tag or packet
//! being parsed. When that would exceed `max_buffer` bytes
//! ([`DEFAULT_LIVE_BUFFER`]), the floor is raised to `max_buffer` bytes
//! before the end: viewers behind it are cut ([`ViewerRead::Cut`], the
//! proxy resets their streams), and a join point behind it is dropped (new
//! viewers wait for the next keyframe: a GOP larger than the buffer is
//! joinable only while its keyframe is still inside it). Between calls the
//! ring buffer never holds more than `max_buffer` bytes (during a
//! [`push`](LiveRelay::push), the pushed bytes come on top until they are
//! parsed); a single tag larger than `max_buffer` fails the stream, so the
//! unit being parsed always fits. Besides it, the relay holds
//! the preamble parts, each at most [`MAX_PREAMBLE_PART`] bytes (a larger
//! one fails the stream), and preamble snapshots still being sent.
//!
//! # Failure
//!
//! A stream that stops parsing fails the relay: an FLV tag of an unknown
//! type, reserved bits set, or a PreviousTagSize that does not match the tag
//! (FLV has no sync marker, so this is the only sign of lost framing); an
//! MPEG-TS packet that does not start with 0x47 (no resynchronisation: we
//! relay what we parsed, and a lost sync means bytes were lost); a tag
//! larger than `max_buffer`. Viewers then read what was complete before the
//! bad unit and then [`ViewerRead::Failed`] (the proxy resets their
//! streams); [`LiveRelay::error`] says why. [`LiveRelay::finish`] with
//! `clean = false` (the origin connection broke) does the same. A clean
//! end that cuts a tag or packet short is a failure too; a clean end at a
//! unit boundary gives every viewer [`ViewerRead::End`] after the rest.
//! After the end, failed or not, there is no join point: a viewer joining
//! then reads `End` or `Failed` at once.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::rc::Rc;

/// What a stream keeps in memory at most by default: 8 MiB, several
/// seconds of a few-Mbit/s stream with a two-second GOP, so that a late
/// joiner finds the last keyframe and a viewer may lag a few seconds
/// before it is cut.
pub const DEFAULT_LIVE_BUFFER: usize = 8 << 20;

/// The smallest `max_buffer` a relay accepts (smaller ones are raised to
/// it): room for an FLV file header (at most [`MAX_FLV_HEADER`] + 4 bytes)
/// or several TS packets, so a stream can always make progress.
pub const MIN_LIVE_BUFFER: usize = 4 << 10;

/// The largest preamble part (an FLV metadata or sequence-header tag) a
/// relay keeps; a larger one fails the stream (real ones are well under a
/// kilobyte).
pub const MAX_PREAMBLE_PART: usize = 64 << 10;

/// The largest FLV `DataOffset` (file header length) accepted.
pub const MAX_FLV_HEADER: u32 = 1024;

/// MPEG-TS packet length.
const TS_PACKET: usize = 188;
/// MPEG-TS sync byte.
const TS_SYNC: u8 = 0x47;
/// FLV tag header length.
const FLV_TAG_HEADER: usize = 11;
/// FLV tag types: audio, video, script data.
const FLV_AUDIO: u8 = 8;
const FLV_VIDEO: u8 = 9;
const FLV_SCRIPT: u8 = 18;
/// The start of an `onMetaData` script tag's data: AMF0 string marker,
/// length 10, the name.
const ON_METADATA: &[u8] = b"\x02\x00\x0aonMetaData";

/// The container of a live stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LiveFormat {
    /// HTTP-FLV: an FLV file header, then tags.
    Flv,
    /// MPEG-TS: 188-byte packets.
    MpegTs,
}

impl LiveFormat {
    /// The format a `content-type` names (`video/x-flv`, `video/mp2t`;
    /// parameters and case ignored), `None` for any other.
    pub fn from_content_type(ct: &str) -> Option<LiveFormat> {
        let media = ct.split(';').next().unwrap_or("").trim();
        if media.eq_ignore_ascii_case("video/x-flv") {
            Some(LiveFormat::Flv)
        } else if media.eq_ignore_ascii_case("video/mp2t") {
            Some(LiveFormat::MpegTs)
        } else {
            None
        }
    }

    /// The format the first bytes of a body look like, for origins that
    /// send a generic `content-type`: `FLV` followed by version 1, or a
    /// sync byte (and another 188 bytes later, when that many are given).
    pub fn sniff(start: &[u8]) -> Option<LiveFormat> {
        if start.starts_with(b"FLV\x01") {
            return Some(LiveFormat::Flv);
        }
        match (start.first(), start.get(TS_PACKET)) {
            (Some(&TS_SYNC), None | Some(&TS_SYNC)) => Some(LiveFormat::MpegTs),
            _ => None,
        }
    }
}

/// A viewer of one [`LiveRelay`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ViewerId(u64);

/// The outcome of [`LiveRelay::read`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewerRead {
    /// This many bytes were written to the start of the buffer (0 only for
    /// an empty buffer).
    Data(usize),
    /// Nothing now: read again after the next [`LiveRelay::push`].
    Wait,
    /// The origin ended cleanly and the viewer has everything: finish the
    /// response.
    End,
    /// The viewer fell so far behind that keeping its bytes would exceed
    /// the buffer bound (or it is unknown): reset its stream.
    Cut,
    /// The origin failed or the stream was malformed, and the viewer has
    /// everything that was complete before: reset its stream.
    Failed,
}

/// Where a viewer is.
#[derive(Clone, Debug)]
enum Viewer {
    /// No join point yet.
    Waiting,
    /// Reading: the rest of its preamble, then the stream from `pos`.
    Reading {
        /// The preamble snapshot and how much of it was sent (dropped once
        /// all of it was).
        preamble: Option<(Rc<[u8]>, usize)>,
        /// Absolute stream offset of its next byte.
        pos: u64,
    },
    /// Fell behind the buffer bound.
    Cut,
}

/// Where a late joiner starts: a keyframe unit and the preamble as of it.
#[derive(Clone, Debug)]
struct JoinPoint {
    offset: u64,
    preamble: Rc<[u8]>,
}

/// Whether the origin is still sending.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Origin {
    Live,
    Ended,
    Failed(String),
}

/// One live origin response and its viewers (see the module doc for the
/// join rule, the memory bound and failures).
///
/// Calling protocol: [`push`](LiveRelay::push) origin bytes in order (any
/// split); after each push, [`read`](LiveRelay::read) every viewer that can
/// take bytes until it says `Wait`; [`finish`](LiveRelay::finish) once the
/// origin's body ends; [`leave`](LiveRelay::leave) every viewer whose
/// stream closes (including cut ones).
#[derive(Debug)]
pub struct LiveRelay {
    framer: Framer,
    max_buffer: usize,
    /// Stream bytes from offset `base`.
    data: VecDeque<u8>,
    base: u64,
    /// End of the last complete, parsed unit: viewers read up to here.
    parsed: u64,
    join: Option<JoinPoint>,
    viewers: HashMap<ViewerId, Viewer>,
    /// `(pos, id)` of every viewer reading the stream, slowest first.
    positions: BTreeSet<(u64, ViewerId)>,
    /// Viewers waiting for the first join point, in join order.
    waiting: Vec<ViewerId>,
    next_viewer: u64,
    origin: Origin,
    cuts: u64,
}

impl LiveRelay {
    /// A relay for a stream in `format` keeping at most `max_buffer` stream
    /// bytes (at least [`MIN_LIVE_BUFFER`]).
    pub fn new(format: LiveFormat, max_buffer: usize) -> LiveRelay {
        let framer = match format {
            LiveFormat::Flv => Framer::Flv(FlvFramer::default()),
            LiveFormat::MpegTs => Framer::Ts(TsFramer::default()),
        };
        LiveRelay {
            framer,
            max_buffer: max_buffer.max(MIN_LIVE_BUFFER),
            data: VecDeque::new(),
            base: 0,
            parsed: 0,
            join: None,
            viewers: HashMap::new(),
            positions: BTreeSet::new(),
            waiting: Vec::new(),
            next_viewer: 0,
            origin: Origin::Live,
            cuts: 0,
        }
    }

    /// Bytes from the origin, in order. Ignored once the relay has ended
    /// or failed.
    pub fn push(&mut self, data: &[u8]) {
        if self.origin != Origin::Live {
            return;
        }
        self.data.extend(data);
        if let Err(reason) = self.parse() {
            self.fail(reason);
            return;
        }
        self.enforce_bound();
        self.trim();
    }

    /// Parses every complete unit buffered, publishing it.
    fn parse(&mut self) -> Result<(), String> {
        loop {
            let start = usize::try_from(self.parsed - self.base).unwrap_or(usize::MAX);
            let window = Window {
                data: &self.data,
                start,
            };
            let Some(unit) = self.framer.next(&window, self.max_buffer)? else {
                return Ok(());
            };
            if unit.keyframe {
                if let Some(preamble) = self.framer.preamble() {
                    self.join = Some(JoinPoint {
                        offset: self.parsed,
                        preamble,
                    });
                    for id in std::mem::take(&mut self.waiting) {
                        self.start(id);
                    }
                }
            }
            self.parsed += unit.len as u64;
        }
    }

    /// The stream is over with `reason`: drop what did not parse, and the
    /// join point.
    fn fail(&mut self, reason: String) {
        self.origin = Origin::Failed(reason);
        self.end_stream();
    }

    fn end_stream(&mut self) {
        let keep = usize::try_from(self.parsed - self.base).unwrap_or(usize::MAX);
        self.data.truncate(keep);
        self.join = None;
        self.waiting.clear();
        self.trim();
    }

    /// Cuts the viewers (and drops the join point) that would hold more
    /// than `max_buffer` bytes.
    fn enforce_bound(&mut self) {
        let end = self.base + self.data.len() as u64;
        let floor = end.saturating_sub(self.max_buffer as u64);
        while let Some(&(pos, id)) = self.positions.first() {
            if pos >= floor {
                break;
            }
            self.positions.pop_first();
            self.viewers.insert(id, Viewer::Cut);
            self.cuts += 1;
        }
        if self.join.as_ref().is_some_and(|j| j.offset < floor) {
            self.join = None;
        }
    }

    /// Drops the bytes nobody needs any more.
    fn trim(&mut self) {
        let mut keep_from = self.parsed;
        if let Some(join) = &self.join {
            keep_from = keep_from.min(join.offset);
        }
        if let Some(&(pos, _)) = self.positions.first() {
            keep_from = keep_from.min(pos);
        }
        let drop = usize::try_from(keep_from.saturating_sub(self.base))
            .unwrap_or(usize::MAX)
            .min(self.data.len());
        self.data.drain(..drop);
        self.base += drop as u64;
    }

    /// A new viewer. It starts at the current join point, or, when there is
    /// none yet, at the next one the origin's bytes bring (until then its
    /// reads say [`ViewerRead::Wait`]).
    pub fn join(&mut self) -> ViewerId {
        let id = ViewerId(self.next_viewer);
        self.next_viewer += 1;
        self.viewers.insert(id, Viewer::Waiting);
        if self.join.is_some() {
            self.start(id);
        } else if self.origin == Origin::Live {
            self.waiting.push(id);
        }
        id
    }

    /// Moves a waiting viewer to the join point, if there is one.
    fn start(&mut self, id: ViewerId) {
        let Some(join) = &self.join else {
            return;
        };
        if let Some(viewer @ Viewer::Waiting) = self.viewers.get_mut(&id) {
            *viewer = Viewer::Reading {
                preamble: Some((Rc::clone(&join.preamble), 0)),
                pos: join.offset,
            };
            self.positions.insert((join.offset, id));
        }
    }

    /// The next bytes for `viewer`, into `buf`: the rest of its preamble,
    /// then stream bytes up to the last complete unit. An unknown viewer
    /// (one that left) reads [`ViewerRead::Cut`].
    pub fn read(&mut self, viewer: ViewerId, buf: &mut [u8]) -> ViewerRead {
        let over = match &self.origin {
            Origin::Live => ViewerRead::Wait,
            Origin::Ended => ViewerRead::End,
            Origin::Failed(_) => ViewerRead::Failed,
        };
        let (preamble, pos) = match self.viewers.get_mut(&viewer) {
            None | Some(Viewer::Cut) => return ViewerRead::Cut,
            Some(Viewer::Waiting) => return over,
            Some(Viewer::Reading { preamble, pos }) => (preamble, pos),
        };
        if buf.is_empty() {
            return ViewerRead::Data(0);
        }
        let mut n = 0;
        if let Some((bytes, sent)) = preamble {
            let rest = bytes.get(*sent..).unwrap_or(&[]);
            n = rest.len().min(buf.len());
            buf[..n].copy_from_slice(&rest[..n]);
            *sent += n;
            if *sent >= bytes.len() {
                *preamble = None;
            }
        }
        let old = *pos;
        let available = usize::try_from(self.parsed - old).unwrap_or(usize::MAX);
        let take = available.min(buf.len() - n);
        if take > 0 {
            let from = usize::try_from(old - self.base).unwrap_or(usize::MAX);
            copy_out(&self.data, from, &mut buf[n..n + take]);
            n += take;
            *pos = old + take as u64;
            let new = *pos;
            self.positions.remove(&(old, viewer));
            self.positions.insert((new, viewer));
            self.trim();
        }
        if n > 0 {
            ViewerRead::Data(n)
        } else {
            over
        }
    }

    /// Forgets `viewer` (its stream closed), releasing what only it held.
    pub fn leave(&mut self, viewer: ViewerId) {
        match self.viewers.remove(&viewer) {
            Some(Viewer::Reading { pos, .. }) => {
                self.positions.remove(&(pos, viewer));
                self.trim();
            }
            Some(Viewer::Waiting) => self.waiting.retain(|&id| id != viewer),
            _ => {}
        }
    }

    /// The origin's body ended: `clean` for its normal end (then viewers
    /// read `End` after the rest, unless the end cut a tag or packet short),
    /// otherwise viewers read `Failed` after what was complete. Ignored
    /// after the relay already ended or failed.
    pub fn finish(&mut self, clean: bool) {
        if self.origin != Origin::Live {
            return;
        }
        let at_boundary = self.parsed == self.base + self.data.len() as u64;
        self.origin = match (clean, at_boundary) {
            (true, true) => Origin::Ended,
            (true, false) => Origin::Failed("origin ended inside a tag or packet".into()),
            (false, _) => Origin::Failed("origin failed".into()),
        };
        self.end_stream();
    }

    /// Viewers joined and not yet left (cut ones included until they leave).
    pub fn viewers(&self) -> usize {
        self.viewers.len()
    }

    /// Stream bytes held in memory (at most the buffer bound).
    pub fn buffered(&self) -> usize {
        self.data.len()
    }

    /// The buffer bound in use.
    pub fn max_buffer(&self) -> usize {
        self.max_buffer
    }

    /// Viewers cut for falling behind, since the relay began.
    pub fn cuts(&self) -> u64 {
        self.cuts
    }

    /// Whether a viewer joining now would start at once (a join point
    /// exists).
    pub fn joinable(&self) -> bool {
        self.join.is_some()
    }

    /// Why the relay failed, once it has.
    pub fn error(&self) -> Option<&str> {
        match &self.origin {
            Origin::Failed(reason) => Some(reason),
            _ => None,
        }
    }

    /// Whether the origin's stream is over (ended or failed).
    pub fn is_over(&self) -> bool {
        self.origin != Origin::Live
    }
}

/// Copies `out.len()` bytes of `data` from index `from` (the caller checked
/// they exist).
fn copy_out(data: &VecDeque<u8>, from: usize, out: &mut [u8]) {
    let (a, b) = data.as_slices();
    let mut skip = from;
    let mut copied = 0;
    for part in [a, b] {
        if copied == out.len() {
            break;
        }
        let Some(src) = part.get(skip..) else {
            skip -= part.len();
            continue;
        };
        skip = 0;
        let k = src.len().min(out.len() - copied);
        out[copied..copied + k].copy_from_slice(&src[..k]);
        copied += k;
    }
}

/// The unparsed bytes of a relay's buffer, read without panicking.
struct Window<'a> {
    data: &'a VecDeque<u8>,
    start: usize,
}

impl Window<'_> {
    fn len(&self) -> usize {
        self.data.len().saturating_sub(self.start)
    }

    fn byte(&self, i: usize) -> Option<u8> {
        self.data.get(self.start.checked_add(i)?).copied()
    }

    /// `n` (at most 4) bytes at `i` as a big-endian number.
    fn be(&self, i: usize, n: usize) -> Option<u32> {
        let mut v = 0u32;
        for k in 0..n {
            v = (v << 8) | u32::from(self.byte(i.checked_add(k)?)?);
        }
        Some(v)
    }

    /// A copy of `n` bytes at `i`.
    fn copy(&self, i: usize, n: usize) -> Option<Vec<u8>> {
        let from = self.start.checked_add(i)?;
        let to = from.checked_add(n)?;
        (to <= self.data.len()).then(|| self.data.range(from..to).copied().collect())
    }

    /// Whether the bytes at `i` start with `prefix`.
    fn starts_with(&self, i: usize, prefix: &[u8]) -> bool {
        prefix
            .iter()
            .enumerate()
            .all(|(k, &b)| self.byte(i + k) == Some(b))
    }
}

/// One parsed unit (FLV header or tag, TS packet).
struct Unit {
    len: usize,
    keyframe: bool,
}

/// The format's parser: finds units, keeps the preamble parts.
#[derive(Debug)]
enum Framer {
    Flv(FlvFramer),
    Ts(TsFramer),
}

impl Framer {
    /// The next complete unit at the window's start, `None` until all of it
    /// arrived, `Err` when the stream is malformed.
    fn next(&mut self, w: &Window, max_unit: usize) -> Result<Option<Unit>, String> {
        match self {
            Framer::Flv(f) => f.next(w, max_unit),
            Framer::Ts(t) => t.next(w),
        }
    }

    /// The preamble as of now, shared; `None` while a join point would not
    /// be decodable (no header, or no PAT and PMT).
    fn preamble(&mut self) -> Option<Rc<[u8]>> {
        match self {
            Framer::Flv(f) => {
                f.header.as_ref()?;
                let parts = [&f.header, &f.metadata, &f.video_seq, &f.audio_seq];
                Some(cached_preamble(&mut f.cached, &parts))
            }
            Framer::Ts(t) => {
                t.pat.as_ref()?;
                t.pmt.as_ref()?;
                Some(cached_preamble(&mut t.cached, &[&t.pat, &t.pmt]))
            }
        }
    }
}

/// The parts present, concatenated once into a shared preamble and kept in
/// `cache` until a part changes.
fn cached_preamble(cache: &mut Option<Rc<[u8]>>, parts: &[&Option<Vec<u8>>]) -> Rc<[u8]> {
    let bytes = cache.get_or_insert_with(|| {
        let joined: Vec<u8> = parts.iter().copied().flatten().flatten().copied().collect();
        Rc::from(joined)
    });
    Rc::clone(bytes)
}

/// FLV parsing state and preamble parts (each a whole header or tag).
#[derive(Debug, Default)]
struct FlvFramer {
    header: Option<Vec<u8>>,
    metadata: Option<Vec<u8>>,
    video_seq: Option<Vec<u8>>,
    audio_seq: Option<Vec<u8>>,
    /// The preamble built from the parts; cleared when one changes.
    cached: Option<Rc<[u8]>>,
}

/// What a video tag is, for the join rule.
enum VideoKind {
    SequenceHeader,
    /// A keyframe; `true` when its codec needs a sequence header first.
    Keyframe(bool),
    Other,
}

impl FlvFramer {
    fn next(&mut self, w: &Window, max_unit: usize) -> Result<Option<Unit>, String> {
        if self.header.is_none() {
            if w.len() < 9 {
                return Ok(None);
            }
            if !w.starts_with(0, b"FLV") {
                return Err("not an FLV stream (no FLV signature)".into());
            }
            let offset = w.be(5, 4).unwrap_or(0);
            if !(9..=MAX_FLV_HEADER).contains(&offset) {
                return Err(format!("FLV header length {offset} out of range"));
            }
            let len = offset as usize + 4;
            let Some(header) = w.copy(0, len) else {
                return Ok(None);
            };
            self.header = Some(header);
            self.cached = None;
            return Ok(Some(Unit {
                len,
                keyframe: false,
            }));
        }
        let Some(kind) = w.byte(0) else {
            return Ok(None);
        };
        let Some(size) = w.be(1, 3) else {
            return Ok(None);
        };
        if kind & 0xc0 != 0 {
            return Err(format!("FLV tag with reserved bits set ({kind:#04x})"));
        }
        let tag_type = kind & 0x1f;
        if !matches!(tag_type, FLV_AUDIO | FLV_VIDEO | FLV_SCRIPT) {
            return Err(format!("FLV tag of unknown type {tag_type}"));
        }
        let size = size as usize;
        let len = FLV_TAG_HEADER + size + 4;
        if len > max_unit {
            return Err(format!("FLV tag of {len} bytes exceeds the buffer"));
        }
        if w.len() < len {
            return Ok(None);
        }
        let previous = w.be(FLV_TAG_HEADER + size, 4).unwrap_or(0);
        if previous as usize != FLV_TAG_HEADER + size {
            return Err(format!(
                "FLV PreviousTagSize {previous} does not match the tag ({})",
                FLV_TAG_HEADER + size
            ));
        }
        let encrypted = kind & 0x20 != 0;
        let data = |i: usize| w.byte(FLV_TAG_HEADER + i);
        let mut keyframe = false;
        let part = match tag_type {
            _ if encrypted => None,
            FLV_SCRIPT if w.starts_with(FLV_TAG_HEADER, ON_METADATA) => Some(&mut self.metadata),
            FLV_AUDIO if data(0).map(|b| b >> 4) == Some(10) && data(1) == Some(0) => {
                Some(&mut self.audio_seq)
            }
            FLV_VIDEO => match video_kind(data(0), data(1)) {
                VideoKind::SequenceHeader => Some(&mut self.video_seq),
                VideoKind::Keyframe(needs_seq) => {
                    keyframe = !needs_seq || self.video_seq.is_some();
                    None
                }
                VideoKind::Other => None,
            },
            _ => None,
        };
        if let Some(part) = part {
            if len > MAX_PREAMBLE_PART {
                return Err(format!("FLV preamble tag of {len} bytes is too large"));
            }
            *part = w.copy(0, len);
            self.cached = None;
        }
        Ok(Some(Unit { len, keyframe }))
    }
}

/// Classifies a video tag by its first two data bytes.
fn video_kind(b0: Option<u8>, b1: Option<u8>) -> VideoKind {
    let Some(b0) = b0 else {
        return VideoKind::Other;
    };
    if b0 & 0x80 != 0 {
        // Enhanced RTMP: frame type in bits 4-6, packet type in bits 0-3
        // (0 SequenceStart, 1 CodedFrames, 3 CodedFramesX).
        let frame_type = (b0 >> 4) & 0x07;
        return match b0 & 0x0f {
            0 => VideoKind::SequenceHeader,
            1 | 3 if frame_type == 1 => VideoKind::Keyframe(true),
            _ => VideoKind::Other,
        };
    }
    let frame_type = b0 >> 4;
    match b0 & 0x0f {
        // AVC (7) and the common HEVC extension (12): AVCPacketType.
        7 | 12 => match b1 {
            Some(0) => VideoKind::SequenceHeader,
            Some(1) if frame_type == 1 => VideoKind::Keyframe(true),
            _ => VideoKind::Other,
        },
        _ if frame_type == 1 => VideoKind::Keyframe(false),
        _ => VideoKind::Other,
    }
}

/// MPEG-TS parsing state and preamble parts (each one packet).
#[derive(Debug, Default)]
struct TsFramer {
    pat: Option<Vec<u8>>,
    pmt_pid: Option<u16>,
    pmt: Option<Vec<u8>>,
    video_pid: Option<u16>,
    /// The preamble built from the parts; cleared when one changes.
    cached: Option<Rc<[u8]>>,
}

/// Stream types of video elementary streams (ISO/IEC 13818-1 table 2-34):
/// MPEG-1, MPEG-2, MPEG-4 part 2, H.264, H.265, H.266.
const TS_VIDEO_TYPES: [u8; 6] = [0x01, 0x02, 0x10, 0x1b, 0x24, 0x33];

impl TsFramer {
    fn next(&mut self, w: &Window) -> Result<Option<Unit>, String> {
        // One packet onto the stack: no allocation per packet.
        if w.len() < TS_PACKET {
            return Ok(None);
        }
        let mut packet = [0u8; TS_PACKET];
        for (i, byte) in packet.iter_mut().enumerate() {
            *byte = w.byte(i).unwrap_or(0);
        }
        if packet.first() != Some(&TS_SYNC) {
            return Err("MPEG-TS sync byte lost".into());
        }
        let b = |i: usize| packet.get(i).copied().unwrap_or(0);
        let start = b(1) & 0x40 != 0;
        let pid = (u16::from(b(1) & 0x1f) << 8) | u16::from(b(2));
        let control = (b(3) >> 4) & 0x03;
        let mut payload_at = 4;
        let mut random_access = false;
        if control & 0x02 != 0 {
            let length = usize::from(b(4));
            payload_at = 5 + length;
            if payload_at > TS_PACKET {
                return Err("MPEG-TS adaptation field longer than its packet".into());
            }
            random_access = length > 0 && b(5) & 0x40 != 0;
        }
        let payload = if control & 0x01 != 0 {
            packet.get(payload_at..).unwrap_or(&[])
        } else {
            &[]
        };
        let mut keyframe = false;
        if start && !payload.is_empty() {
            if pid == 0 {
                if let Some(pmt_pid) = psi_section(payload, 0x00).and_then(pat_first_program) {
                    if self.pmt_pid != Some(pmt_pid) {
                        self.pmt = None;
                        self.video_pid = None;
                    }
                    self.pmt_pid = Some(pmt_pid);
                    self.pat = Some(packet.to_vec());
                    self.cached = None;
                }
            } else if Some(pid) == self.pmt_pid {
                if let Some(section) = psi_section(payload, 0x02) {
                    self.video_pid = pmt_first_video(section);
                    self.pmt = Some(packet.to_vec());
                    self.cached = None;
                }
            } else if Some(pid) == self.video_pid && random_access {
                keyframe = self.pat.is_some() && self.pmt.is_some();
            }
        }
        Ok(Some(Unit {
            len: TS_PACKET,
            keyframe,
        }))
    }
}

/// The PSI section with `table_id` that starts in `payload` (after the
/// pointer field), without its CRC, if it fits in this packet.
fn psi_section(payload: &[u8], table_id: u8) -> Option<&[u8]> {
    let pointer = usize::from(*payload.first()?);
    let section = payload.get(1 + pointer..)?;
    if *section.first()? != table_id {
        return None;
    }
    let length = (usize::from(*section.get(1)? & 0x0f) << 8) | usize::from(*section.get(2)?);
    // Header after the length (5 bytes) and CRC (4) at least.
    if length < 9 {
        return None;
    }
    section.get(..3 + length - 4)
}

/// The PMT PID of the PAT's first program (program number not 0).
fn pat_first_program(section: &[u8]) -> Option<u16> {
    section.get(8..)?.chunks_exact(4).find_map(|e| {
        let number = u16::from_be_bytes([e[0], e[1]]);
        (number != 0).then(|| (u16::from(e[2] & 0x1f) << 8) | u16::from(e[3]))
    })
}

/// The PID of the PMT's first video stream.
fn pmt_first_video(section: &[u8]) -> Option<u16> {
    let info = (usize::from(*section.get(10)? & 0x0f) << 8) | usize::from(*section.get(11)?);
    let mut i = 12usize.checked_add(info)?;
    while let Some(entry) = section.get(i..i.checked_add(5)?) {
        let stream_type = entry[0];
        let pid = (u16::from(entry[1] & 0x1f) << 8) | u16::from(entry[2]);
        if TS_VIDEO_TYPES.contains(&stream_type) {
            return Some(pid);
        }
        let es_info = (usize::from(entry[3] & 0x0f) << 8) | usize::from(entry[4]);
        i = i.checked_add(5 + es_info)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    // ---- synthetic FLV ----

    fn flv_header() -> Vec<u8> {
        let mut v = b"FLV\x01\x05\x00\x00\x00\x09".to_vec();
        v.extend([0, 0, 0, 0]);
        v
    }

    fn tag(kind: u8, ts: u32, data: &[u8]) -> Vec<u8> {
        let size = data.len() as u32;
        let mut v = vec![kind];
        v.extend(&size.to_be_bytes()[1..]);
        v.extend(&ts.to_be_bytes()[1..]);
        v.push((ts >> 24) as u8);
        v.extend([0, 0, 0]);
        v.extend(data);
        v.extend((size + 11).to_be_bytes());
        v
    }

    fn metadata(n: u8) -> Vec<u8> {
        let mut d = ON_METADATA.to_vec();
        d.extend([0x08, 0, 0, 0, 0, 0, 0, 9, n]);
        tag(FLV_SCRIPT, 0, &d)
    }

    fn avc_seq(n: u8) -> Vec<u8> {
        tag(FLV_VIDEO, 0, &[0x17, 0, 0, 0, 0, 1, 0x64, n])
    }

    fn aac_seq() -> Vec<u8> {
        tag(FLV_AUDIO, 0, &[0xaf, 0, 0x12, 0x10])
    }

    fn video(key: bool, ts: u32, size: usize) -> Vec<u8> {
        let mut d = vec![if key { 0x17 } else { 0x27 }, 1, 0, 0, 0];
        d.extend((0..size).map(|i| (i as u32 ^ ts) as u8));
        tag(FLV_VIDEO, ts, &d)
    }

    fn audio(ts: u32) -> Vec<u8> {
        tag(FLV_AUDIO, ts, &[0xaf, 1, 0x21, 0x10, ts as u8])
    }

    /// Header, metadata, sequence headers, then `gops` GOPs of a keyframe
    /// and `frames` other frames (with audio between).
    fn flv_stream(gops: u32, frames: u32, size: usize) -> Vec<u8> {
        let mut s = flv_header();
        s.extend(metadata(1));
        s.extend(avc_seq(1));
        s.extend(aac_seq());
        for g in 0..gops {
            for f in 0..=frames {
                let ts = (g * (frames + 1) + f) * 40;
                s.extend(video(f == 0, ts, size));
                s.extend(audio(ts));
            }
        }
        s
    }

    /// Reads everything `viewer` can get now.
    fn drain(relay: &mut LiveRelay, viewer: ViewerId) -> (Vec<u8>, ViewerRead) {
        let mut out = Vec::new();
        let mut buf = [0u8; 1000];
        loop {
            match relay.read(viewer, &mut buf) {
                ViewerRead::Data(n) => out.extend(&buf[..n]),
                other => return (out, other),
            }
        }
    }

    /// Offsets of every unit in `bytes` and whether it is a keyframe,
    /// by this module's own parser; `Err` if it does not parse to the end.
    fn units(format: LiveFormat, bytes: &[u8]) -> Result<Vec<(usize, bool)>, String> {
        let mut framer = match format {
            LiveFormat::Flv => Framer::Flv(FlvFramer::default()),
            LiveFormat::MpegTs => Framer::Ts(TsFramer::default()),
        };
        let data: VecDeque<u8> = bytes.iter().copied().collect();
        let mut at = 0;
        let mut out = Vec::new();
        while at < data.len() {
            let w = Window {
                data: &data,
                start: at,
            };
            let unit = framer
                .next(&w, usize::MAX)?
                .ok_or_else(|| format!("truncated unit at {at}"))?;
            out.push((at, unit.keyframe));
            at += unit.len;
        }
        Ok(out)
    }

    fn keyframes(format: LiveFormat, bytes: &[u8]) -> Vec<usize> {
        units(format, bytes)
            .unwrap()
            .into_iter()
            .filter_map(|(at, key)| key.then_some(at))
            .collect()
    }

    fn preamble_flv() -> Vec<u8> {
        [flv_header(), metadata(1), avc_seq(1), aac_seq()].concat()
    }

    #[test]
    fn formats_from_content_type_and_bytes() {
        assert_eq!(
            LiveFormat::from_content_type("video/x-flv"),
            Some(LiveFormat::Flv)
        );
        assert_eq!(
            LiveFormat::from_content_type(" Video/MP2T ; charset=x"),
            Some(LiveFormat::MpegTs)
        );
        assert_eq!(LiveFormat::from_content_type("video/mp4"), None);
        assert_eq!(LiveFormat::from_content_type(""), None);
        assert_eq!(LiveFormat::sniff(&flv_header()), Some(LiveFormat::Flv));
        assert_eq!(LiveFormat::sniff(&[0x47, 0, 0]), Some(LiveFormat::MpegTs));
        assert_eq!(
            LiveFormat::sniff(&ts_stream(1)[..400]),
            Some(LiveFormat::MpegTs)
        );
        let mut bad = ts_stream(1);
        bad[188] = 0;
        assert_eq!(LiveFormat::sniff(&bad), None);
        assert_eq!(LiveFormat::sniff(b"<html>"), None);
        assert_eq!(LiveFormat::sniff(b""), None);
    }

    #[test]
    fn flv_viewer_from_the_start_gets_the_whole_stream() {
        let stream = flv_stream(3, 4, 50);
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        let early = relay.join();
        let mut got = Vec::new();
        for chunk in stream.chunks(37) {
            relay.push(chunk);
            got.extend(drain(&mut relay, early).0);
        }
        assert_eq!(got, stream);
        assert_eq!(relay.read(early, &mut [0; 10]), ViewerRead::Wait);
        assert_eq!(relay.viewers(), 1);
    }

    #[test]
    fn flv_late_joiner_gets_preamble_then_last_keyframe() {
        let stream = flv_stream(3, 4, 50);
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&stream);
        let late = relay.join();
        let (got, last) = drain(&mut relay, late);
        assert_eq!(last, ViewerRead::Wait);
        let keys = keyframes(LiveFormat::Flv, &stream);
        assert_eq!(keys.len(), 3);
        let mut want = preamble_flv();
        want.extend(&stream[keys[2]..]);
        assert_eq!(got, want);
        // The joiner's stream parses, and its first keyframe follows the
        // preamble directly.
        assert_eq!(keyframes(LiveFormat::Flv, &got), [preamble_flv().len()]);
        // Only the last GOP is kept when nobody lags.
        assert_eq!(relay.buffered(), stream.len() - keys[2]);
    }

    #[test]
    fn flv_preamble_is_the_one_as_of_the_keyframe() {
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        let mut s = flv_header();
        s.extend(metadata(1));
        s.extend(avc_seq(1));
        let k1 = s.len();
        s.extend(video(true, 0, 20));
        s.extend(video(false, 40, 20));
        // New parameters mid-GOP, before the next keyframe.
        s.extend(metadata(2));
        s.extend(avc_seq(2));
        s.extend(video(false, 80, 20));
        relay.push(&s);
        let a = relay.join();
        let mut want = [flv_header(), metadata(1), avc_seq(1)].concat();
        want.extend(&s[k1..]);
        assert_eq!(drain(&mut relay, a).0, want);
        // After the next keyframe a joiner gets the new parameters.
        let key2 = video(true, 120, 20);
        relay.push(&key2);
        let b = relay.join();
        let want = [flv_header(), metadata(2), avc_seq(2), key2].concat();
        assert_eq!(drain(&mut relay, b).0, want);
    }

    #[test]
    fn flv_joiner_before_first_keyframe_waits() {
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&preamble_flv());
        relay.push(&video(false, 0, 10)); // a delta frame: no join point
        let v = relay.join();
        assert!(!relay.joinable());
        assert_eq!(relay.read(v, &mut [0; 100]), ViewerRead::Wait);
        let key = video(true, 40, 10);
        relay.push(&key[..5]);
        assert_eq!(relay.read(v, &mut [0; 100]), ViewerRead::Wait);
        relay.push(&key[5..]);
        assert!(relay.joinable());
        assert_eq!(drain(&mut relay, v).0, [preamble_flv(), key].concat());
    }

    #[test]
    fn flv_avc_keyframe_before_sequence_header_is_no_join_point() {
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&flv_header());
        relay.push(&video(true, 0, 10));
        assert!(!relay.joinable());
        relay.push(&avc_seq(1));
        let key = video(true, 40, 10);
        relay.push(&key);
        let v = relay.join();
        assert_eq!(
            drain(&mut relay, v).0,
            [flv_header(), avc_seq(1), key].concat()
        );
        // The end-of-sequence tag (frame type 1, AVCPacketType 2) and a
        // sequence header are not keyframes.
        let before = relay.join.as_ref().map(|j| j.offset);
        relay.push(&tag(FLV_VIDEO, 80, &[0x17, 2, 0, 0, 0]));
        relay.push(&avc_seq(3));
        assert!(before.is_some());
        assert_eq!(relay.join.as_ref().map(|j| j.offset), before);
    }

    #[test]
    fn video_tag_classification() {
        use VideoKind::*;
        let kind = |b0: u8, b1: Option<u8>| match video_kind(Some(b0), b1) {
            SequenceHeader => "seq",
            Keyframe(true) => "key+seq",
            Keyframe(false) => "key",
            Other => "other",
        };
        assert_eq!(kind(0x17, Some(0)), "seq");
        assert_eq!(kind(0x17, Some(1)), "key+seq");
        assert_eq!(kind(0x27, Some(1)), "other");
        assert_eq!(kind(0x1c, Some(0)), "seq"); // HEVC, codec 12
        assert_eq!(kind(0x17, None), "other");
        assert_eq!(kind(0x12, None), "key"); // Sorenson H.263
        assert_eq!(kind(0x22, None), "other");
        assert_eq!(kind(0x90, None), "seq"); // enhanced SequenceStart
        assert_eq!(kind(0x91, None), "key+seq"); // enhanced key CodedFrames
        assert_eq!(kind(0x93, None), "key+seq"); // CodedFramesX
        assert_eq!(kind(0xa1, None), "other"); // enhanced inter frame
        assert!(matches!(video_kind(None, None), Other));
    }

    #[test]
    fn split_pushes_give_the_same_bytes() {
        for (format, stream) in [
            (LiveFormat::Flv, flv_stream(4, 3, 300)),
            (LiveFormat::MpegTs, ts_stream(4)),
            (LiveFormat::Flv, FLV_SAMPLE.to_vec()),
            (LiveFormat::MpegTs, TS_SAMPLE.to_vec()),
        ] {
            let reference = {
                let mut relay = LiveRelay::new(format, DEFAULT_LIVE_BUFFER);
                relay.push(&stream);
                let v = relay.join();
                drain(&mut relay, v).0
            };
            assert!(!reference.is_empty());
            let mut first_early: Option<Vec<u8>> = None;
            let mut seed = 0x2545_f491_4f6c_dd1du64;
            for split in [1usize, 3, 11, 188, 189, 4096, 0] {
                let mut relay = LiveRelay::new(format, DEFAULT_LIVE_BUFFER);
                let early = relay.join();
                let mut early_bytes = Vec::new();
                let mut rest = &stream[..];
                while !rest.is_empty() {
                    let n = if split == 0 {
                        // Pseudo-random sizes 1..=500.
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        1 + (seed % 500) as usize
                    } else {
                        split
                    }
                    .min(rest.len());
                    relay.push(&rest[..n]);
                    rest = &rest[n..];
                    early_bytes.extend(drain(&mut relay, early).0);
                }
                let late = relay.join();
                assert_eq!(
                    drain(&mut relay, late).0,
                    reference,
                    "{format:?} split {split}"
                );
                // The early viewer saw the preamble then everything from
                // the first keyframe, the same whatever the split.
                let first_key = keyframes(format, &stream)[0];
                assert!(
                    early_bytes.ends_with(&stream[first_key..]),
                    "{format:?} {split}"
                );
                assert!(units(format, &early_bytes).is_ok());
                let first = first_early.get_or_insert_with(|| early_bytes.clone());
                assert_eq!(*first, early_bytes, "{format:?} split {split}");
            }
        }
    }

    #[test]
    fn slow_viewer_is_cut_fast_one_is_not() {
        let max = 64 << 10;
        let stream = flv_stream(20, 9, 2000); // ~420 KB, GOPs of ~20 KB
        let mut relay = LiveRelay::new(LiveFormat::Flv, max);
        let fast = relay.join();
        let slow = relay.join();
        let mut fast_bytes = Vec::new();
        // The slow one reads 100 bytes per push of 1000.
        let mut cut_at = None;
        for (i, chunk) in stream.chunks(1000).enumerate() {
            relay.push(chunk);
            assert!(relay.buffered() <= max, "buffer bound held");
            fast_bytes.extend(drain(&mut relay, fast).0);
            match relay.read(slow, &mut [0; 100]) {
                ViewerRead::Cut => {
                    cut_at.get_or_insert(i);
                }
                ViewerRead::Data(_) | ViewerRead::Wait => assert!(cut_at.is_none()),
                other => panic!("unexpected {other:?}"),
            }
        }
        // Lagging 900 bytes per push, the slow one passes 64 KiB behind
        // after about 73 pushes.
        let cut_at = cut_at.expect("slow viewer cut");
        assert!((60..80).contains(&cut_at), "cut at push {cut_at}");
        assert_eq!(relay.cuts(), 1);
        assert_eq!(fast_bytes, stream);
        assert_eq!(relay.read(slow, &mut [0; 10]), ViewerRead::Cut);
        assert_eq!(relay.viewers(), 2);
        relay.leave(slow);
        assert_eq!(relay.viewers(), 1);
        relay.finish(true);
        assert_eq!(relay.read(fast, &mut [0; 10]), ViewerRead::End);
    }

    #[test]
    fn lagging_viewer_pins_memory_until_it_leaves() {
        let stream = flv_stream(10, 4, 100);
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&stream[..200]);
        let lag = relay.join();
        relay.push(&stream[200..]);
        assert_eq!(relay.buffered(), stream.len() - preamble_flv().len());
        relay.leave(lag);
        let last_key = *keyframes(LiveFormat::Flv, &stream).last().unwrap();
        assert_eq!(relay.buffered(), stream.len() - last_key);
        assert_eq!(relay.read(lag, &mut [0; 10]), ViewerRead::Cut);
        assert_eq!(relay.viewers(), 0);
    }

    #[test]
    fn gop_larger_than_the_buffer_drops_the_join_point() {
        let max = MIN_LIVE_BUFFER;
        let mut relay = LiveRelay::new(LiveFormat::Flv, max);
        relay.push(&preamble_flv());
        relay.push(&video(true, 0, 100));
        assert!(relay.joinable());
        let v = relay.join();
        for i in 1..100 {
            relay.push(&video(false, i * 40, 100));
            assert!(relay.buffered() <= max);
            drain(&mut relay, v);
        }
        assert!(!relay.joinable(), "keyframe fell out of the buffer");
        let w = relay.join();
        assert_eq!(relay.read(w, &mut [0; 10]), ViewerRead::Wait);
        let key = video(true, 4000, 100);
        relay.push(&key);
        assert_eq!(drain(&mut relay, w).0, [preamble_flv(), key].concat());
        assert_eq!(relay.cuts(), 0, "a viewer keeping up is never cut");
    }

    #[test]
    fn finish_clean_and_not() {
        let stream = flv_stream(2, 2, 30);
        // Clean: the rest, then End; a waiting viewer ends too.
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&stream);
        let v = relay.join();
        relay.finish(true);
        let (got, last) = drain(&mut relay, v);
        assert!(!got.is_empty());
        assert_eq!(last, ViewerRead::End);
        let after = relay.join();
        assert_eq!(relay.read(after, &mut [0; 10]), ViewerRead::End);
        assert!(relay.is_over() && relay.error().is_none());
        relay.push(&stream); // ignored
        assert_eq!(relay.read(v, &mut [0; 10]), ViewerRead::End);

        // Not clean: what was complete, then Failed.
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&stream);
        let v = relay.join();
        relay.push(&video(false, 999, 10)[..7]);
        relay.finish(false);
        let (got2, last) = drain(&mut relay, v);
        assert_eq!(got2, got);
        assert_eq!(last, ViewerRead::Failed);
        assert_eq!(relay.error(), Some("origin failed"));

        // Clean EOF inside a tag is a failure.
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(&stream[..stream.len() - 3]);
        let v = relay.join();
        relay.finish(true);
        assert_eq!(drain(&mut relay, v).1, ViewerRead::Failed);
        assert!(relay.error().unwrap().contains("inside"));
        assert_eq!(relay.buffered(), 0);
    }

    #[test]
    fn malformed_flv_fails_after_the_good_part() {
        let good = [preamble_flv(), video(true, 0, 20)].concat();
        let cases: [(&str, Vec<u8>); 5] = [
            ("unknown type", tag(7, 40, &[1, 2, 3])),
            ("reserved", tag(0x49, 40, &[1, 2, 3])),
            ("PreviousTagSize", {
                let mut t = video(false, 40, 5);
                let n = t.len();
                t[n - 1] ^= 1;
                t
            }),
            ("exceeds", {
                let mut t = vec![FLV_VIDEO, 0xff, 0xff, 0xff];
                t.extend([0; 7]);
                t
            }),
            ("too large", {
                let mut d = ON_METADATA.to_vec();
                d.resize(MAX_PREAMBLE_PART, 0);
                tag(FLV_SCRIPT, 0, &d)
            }),
        ];
        for (what, bad) in cases {
            let mut relay = LiveRelay::new(LiveFormat::Flv, 1 << 20);
            let v = relay.join();
            relay.push(&[good.clone(), bad, video(false, 80, 5)].concat());
            let (got, last) = drain(&mut relay, v);
            assert_eq!(got, good, "{what}");
            assert_eq!(last, ViewerRead::Failed, "{what}");
            let error = relay.error().unwrap();
            assert!(error.contains(what), "{what}: {error}");
        }
        let mut relay = LiveRelay::new(LiveFormat::Flv, 1 << 20);
        relay.push(b"<html><body>not a stream</body></html>");
        assert!(relay.error().unwrap().contains("signature"));
        let mut relay = LiveRelay::new(LiveFormat::Flv, 1 << 20);
        relay.push(b"FLV\x01\x05\xff\xff\xff\xff");
        assert!(relay.error().unwrap().contains("header length"));
    }

    #[test]
    fn unknown_viewer_and_empty_buffer() {
        let mut relay = LiveRelay::new(LiveFormat::Flv, 0);
        assert_eq!(relay.max_buffer(), MIN_LIVE_BUFFER);
        assert_eq!(relay.read(ViewerId(99), &mut [0; 10]), ViewerRead::Cut);
        relay.leave(ViewerId(99));
        relay.push(&flv_stream(1, 1, 10));
        let v = relay.join();
        assert_eq!(relay.read(v, &mut []), ViewerRead::Data(0));
        assert!(matches!(relay.read(v, &mut [0; 1]), ViewerRead::Data(1)));
    }

    // ---- synthetic MPEG-TS ----

    const PMT_PID: u16 = 0x1000;
    const VIDEO_PID: u16 = 0x100;
    const AUDIO_PID: u16 = 0x101;

    /// A packet on `pid`; `rai` adds an adaptation field with the random
    /// access indicator; `payload` is padded with 0xff.
    fn ts_packet(pid: u16, start: bool, rai: bool, cc: u8, payload: &[u8]) -> Vec<u8> {
        let mut p = vec![TS_SYNC, (pid >> 8) as u8 & 0x1f, pid as u8];
        if start {
            p[1] |= 0x40;
        }
        if rai {
            p.push(0x30 | (cc & 0x0f));
            p.extend([1, 0x40]);
        } else {
            p.push(0x10 | (cc & 0x0f));
        }
        p.extend(payload);
        p.resize(TS_PACKET, 0xff);
        p
    }

    fn psi(table_id: u8, body: &[u8]) -> Vec<u8> {
        let length = body.len() + 5 + 4;
        let mut s = vec![0, table_id, 0xb0 | (length >> 8) as u8, length as u8];
        s.extend([0, 1, 0xc1, 0, 0]);
        s.extend(body);
        s.extend([0xde, 0xad, 0xbe, 0xef]); // CRC, not checked
        s
    }

    fn pat() -> Vec<u8> {
        let body = [0, 1, 0xe0 | (PMT_PID >> 8) as u8, PMT_PID as u8];
        ts_packet(0, true, false, 0, &psi(0x00, &body))
    }

    fn pmt(version: u8) -> Vec<u8> {
        let mut body = vec![0xe1, 0x00, 0xf0, 0x00]; // PCR PID, no program info
        body.extend([0x0f, 0xe1, 0x01, 0xf0, 0x00]); // AAC first, on AUDIO_PID
        body.extend([0x1b, 0xe1, 0x00, 0xf0, 0x01, version]); // H.264, 1-byte info
        ts_packet(PMT_PID, true, false, 0, &psi(0x02, &body))
    }

    fn pes_start(pid: u16, rai: bool, n: u8) -> Vec<u8> {
        let sid = if pid == VIDEO_PID { 0xe0 } else { 0xc0 };
        ts_packet(pid, true, rai, n, &[0, 0, 1, sid, 0, 0, 0x80, 0x80, 5, n])
    }

    fn ts_stream(gops: u8) -> Vec<u8> {
        let mut s = Vec::new();
        for g in 0..gops {
            s.extend(pat());
            s.extend(pmt(0));
            s.extend(pes_start(VIDEO_PID, true, g));
            for f in 0..4u8 {
                s.extend(ts_packet(VIDEO_PID, false, false, f, &[g, f]));
                s.extend(pes_start(AUDIO_PID, true, f)); // audio RAI: no join
                s.extend(pes_start(VIDEO_PID, false, f));
            }
        }
        s
    }

    #[test]
    fn ts_late_joiner_gets_pat_pmt_then_video_keyframe() {
        let stream = ts_stream(3);
        let mut relay = LiveRelay::new(LiveFormat::MpegTs, DEFAULT_LIVE_BUFFER);
        let early = relay.join();
        relay.push(&stream);
        assert_eq!(
            drain(&mut relay, early).0,
            [pat(), pmt(0), stream[2 * 188..].to_vec()].concat()
        );
        let keys = keyframes(LiveFormat::MpegTs, &stream);
        let gop = stream.len() / 3;
        assert_eq!(keys, [2 * 188, gop + 2 * 188, 2 * gop + 2 * 188]);
        let late = relay.join();
        let (got, last) = drain(&mut relay, late);
        assert_eq!(last, ViewerRead::Wait);
        assert_eq!(got, [pat(), pmt(0), stream[keys[2]..].to_vec()].concat());
    }

    #[test]
    fn ts_needs_pat_and_pmt_and_uses_the_latest() {
        let mut relay = LiveRelay::new(LiveFormat::MpegTs, DEFAULT_LIVE_BUFFER);
        // A keyframe before any PSI is no join point.
        relay.push(&pes_start(VIDEO_PID, true, 0));
        relay.push(&pat());
        relay.push(&pes_start(VIDEO_PID, true, 1));
        assert!(!relay.joinable());
        relay.push(&pmt(1));
        relay.push(&pmt(2));
        let key = pes_start(VIDEO_PID, true, 2);
        relay.push(&key);
        let v = relay.join();
        assert_eq!(drain(&mut relay, v).0, [pat(), pmt(2), key].concat());
        // A PMT whose section does not fit its packet is ignored.
        let mut long = pmt(3);
        long[6] = 0xbf; // section_length 0xfxx
        relay.push(&long);
        relay.push(&pes_start(VIDEO_PID, true, 3));
        let w = relay.join();
        assert!(drain(&mut relay, w)
            .0
            .starts_with(&[pat(), pmt(2)].concat()));
    }

    #[test]
    fn ts_lost_sync_and_bad_adaptation_fail() {
        let stream = ts_stream(1);
        let mut relay = LiveRelay::new(LiveFormat::MpegTs, DEFAULT_LIVE_BUFFER);
        let v = relay.join();
        relay.push(&stream);
        relay.push(&[0x47; 100]);
        relay.push(&[0x00; 100]); // the packet started with 0x47 but ...
        relay.push(&[0x12; 188]); // ... the next one has no sync byte
        let (got, last) = drain(&mut relay, v);
        assert_eq!(last, ViewerRead::Failed);
        // The stream (it begins with PAT and PMT) and the one good packet.
        assert_eq!(got.len(), stream.len() + 188);
        assert!(relay.error().unwrap().contains("sync"));

        let mut relay = LiveRelay::new(LiveFormat::MpegTs, DEFAULT_LIVE_BUFFER);
        let mut p = ts_packet(VIDEO_PID, true, true, 0, &[]);
        p[4] = 184; // adaptation field longer than the packet
        relay.push(&p);
        assert!(relay.error().unwrap().contains("adaptation"));
    }

    #[test]
    fn psi_parsers_survive_garbage() {
        assert_eq!(psi_section(&[], 0), None);
        assert_eq!(psi_section(&[200], 0), None);
        assert_eq!(psi_section(&[0, 0, 0xb0, 3], 0), None);
        assert_eq!(pat_first_program(&[0; 5]), None);
        assert_eq!(
            pat_first_program(&[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            None
        );
        assert_eq!(pmt_first_video(&[0; 11]), None);
        let mut section = vec![0; 12];
        section.extend([0x1b, 0xff, 0xff, 0xff, 0xff]); // es_info runs off the end
        assert_eq!(pmt_first_video(&section), Some(0x1fff));
        section[12] = 0x0f;
        assert_eq!(pmt_first_video(&section), None);
    }

    // ---- real ffmpeg output ----

    /// `ffmpeg -f lavfi -i testsrc2=size=160x90:rate=10 -f lavfi -i
    /// sine=frequency=440:sample_rate=22050 -t 3 -c:v libx264 -preset
    /// veryfast -g 10 -pix_fmt yuv420p -c:a aac -b:a 32k -f flv` (ffmpeg
    /// 5.1): three GOPs of 10 frames with AAC audio.
    const FLV_SAMPLE: &[u8] = include_bytes!("../../tests/data/edge/testsrc2-160x90.flv");
    /// The same with `-f mpegts`.
    const TS_SAMPLE: &[u8] = include_bytes!("../../tests/data/edge/testsrc2-160x90.ts");

    #[test]
    fn ffmpeg_flv_sample() {
        let units = units(LiveFormat::Flv, FLV_SAMPLE).unwrap();
        assert_eq!(units.len(), 101, "the header and 100 tags");
        let keys = keyframes(LiveFormat::Flv, FLV_SAMPLE);
        assert_eq!(keys.len(), 3, "-g 10 over 30 frames");
        let mut relay = LiveRelay::new(LiveFormat::Flv, DEFAULT_LIVE_BUFFER);
        relay.push(FLV_SAMPLE);
        // Everything before the first keyframe is the preamble: header,
        // onMetaData, AVC and AAC sequence headers.
        let preamble = &FLV_SAMPLE[..keys[0]];
        assert_eq!(units.iter().take_while(|u| u.0 < keys[0]).count(), 4);
        let v = relay.join();
        let (got, _) = drain(&mut relay, v);
        assert_eq!(got, [preamble, &FLV_SAMPLE[keys[2]..]].concat());
        assert_eq!(keyframes(LiveFormat::Flv, &got), [preamble.len()]);
        relay.finish(true);
        assert_eq!(relay.read(v, &mut [0; 10]), ViewerRead::End);
    }

    #[test]
    fn ffmpeg_ts_sample_sets_random_access_on_video_keyframes() {
        let units = units(LiveFormat::MpegTs, TS_SAMPLE).unwrap();
        assert_eq!(units.len(), TS_SAMPLE.len() / TS_PACKET);
        // ffmpeg sets random_access_indicator on every audio PES start too;
        // only the three video keyframes are join points.
        let rai_starts = TS_SAMPLE
            .chunks(TS_PACKET)
            .filter(|p| p[1] & 0x40 != 0 && p[3] & 0x20 != 0 && p[4] > 0 && p[5] & 0x40 != 0)
            .count();
        let keys = keyframes(LiveFormat::MpegTs, TS_SAMPLE);
        assert_eq!(keys.len(), 3, "-g 10 over 30 frames");
        assert!(rai_starts > keys.len());
        for &k in &keys {
            // A video PES (stream id 0xe0) starts in the keyframe packet.
            let p = &TS_SAMPLE[k..k + TS_PACKET];
            let payload = &p[5 + usize::from(p[4])..];
            assert_eq!(&payload[..4], &[0, 0, 1, 0xe0]);
        }
        let mut relay = LiveRelay::new(LiveFormat::MpegTs, DEFAULT_LIVE_BUFFER);
        relay.push(TS_SAMPLE);
        let v = relay.join();
        let (got, _) = drain(&mut relay, v);
        let pat_at = keys[2] - 2 * TS_PACKET; // ffmpeg writes PAT, PMT before it
        let mut want = TS_SAMPLE[pat_at..keys[2]].to_vec();
        want.extend(&TS_SAMPLE[keys[2]..]);
        assert_eq!(got, want);
        assert_eq!(keyframes(LiveFormat::MpegTs, &got), [2 * TS_PACKET]);
    }

    #[test]
    fn garbage_never_panics_and_stays_bounded() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        for round in 0..200 {
            let format = if round % 2 == 0 {
                LiveFormat::Flv
            } else {
                LiveFormat::MpegTs
            };
            // A real stream with bytes flipped, or raw noise.
            let base = if format == LiveFormat::Flv {
                FLV_SAMPLE
            } else {
                TS_SAMPLE
            };
            let mut bytes = base.to_vec();
            for _ in 0..(next() % 4) {
                let i = (next() as usize) % bytes.len();
                bytes[i] = next() as u8;
            }
            if round % 10 == 9 {
                bytes.iter_mut().for_each(|b| *b = next() as u8);
            }
            let mut relay = LiveRelay::new(format, MIN_LIVE_BUFFER * 4);
            let viewers: Vec<_> = (0..3).map(|_| relay.join()).collect();
            let mut rest = &bytes[..];
            while !rest.is_empty() {
                let n = (1 + next() as usize % 3000).min(rest.len());
                relay.push(&rest[..n]);
                rest = &rest[n..];
                assert!(relay.buffered() <= relay.max_buffer());
                for (i, &v) in viewers.iter().enumerate() {
                    let mut buf = vec![0; 1 + 700 * i];
                    relay.read(v, &mut buf);
                }
                if next() % 50 == 0 {
                    relay.join();
                }
            }
            relay.finish(next() % 2 == 0);
            for &v in &viewers {
                drain(&mut relay, v);
            }
        }
    }
}
