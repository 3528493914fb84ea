//! The DASH manifest (MPD) our DASH origin writes and our player reads:
//! one period, one adaptation set, a `SegmentTemplate` with `$Number$`
//! addressing and one `Representation` per rung of the ladder.
//!
//! The reader is not a general XML parser: it scans start tags for the
//! attributes it needs (`mediaPresentationDuration` on `MPD`, `timescale`,
//! `duration`, `startNumber` and `media` on `SegmentTemplate`, `id` and
//! `bandwidth` on `Representation`), which is enough for manifests of this
//! shape (dash.js and ffmpeg write the same attributes). It bounds what it
//! accepts: at most [`MAX_MPD_BYTES`] of text, [`MAX_REPRESENTATIONS`]
//! representations, [`MAX_SEGMENTS`] segments.

use wire::time::Duration;

/// Largest manifest the reader accepts.
pub const MAX_MPD_BYTES: usize = 64 * 1024;
/// Most representations the reader keeps.
pub const MAX_REPRESENTATIONS: usize = 64;
/// Most segments a presentation may have.
pub const MAX_SEGMENTS: u64 = 1_000_000;

/// One representation: an encoding of the video at one bitrate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Representation {
    /// `id`, substituted for `$RepresentationID$`.
    pub id: String,
    /// `bandwidth`, bit/s.
    pub bandwidth: u64,
}

/// What a player needs from a manifest.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Manifest {
    /// The presentation's length.
    pub duration: Duration,
    /// Length of one segment.
    pub segment: Duration,
    /// Number of the first segment.
    pub start_number: u64,
    /// The segment URL template, relative to the manifest.
    pub media: String,
    /// Representations, by increasing bandwidth.
    pub representations: Vec<Representation>,
}

impl Manifest {
    /// Number of segments (the last may be shorter than the others).
    pub fn segments(&self) -> u64 {
        let seg = self.segment.as_nanos().max(1);
        u64::try_from(self.duration.as_nanos().div_ceil(seg)).unwrap_or(u64::MAX)
    }

    /// The URL of segment `number` of representation `rep` (an index into
    /// `representations`), relative to the manifest.
    pub fn segment_url(&self, rep: usize, number: u64) -> String {
        let id = self.representations.get(rep).map_or("", |r| r.id.as_str());
        self.media
            .replace("$RepresentationID$", id)
            .replace("$Number$", &number.to_string())
    }

    /// The manifest as MPD XML (segment template with whole seconds).
    pub fn to_xml(&self) -> String {
        let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        x.push_str(&format!(
            "<MPD xmlns=\"urn:mpeg:dash:schema:mpd:2011\" type=\"static\" \
             profiles=\"urn:mpeg:dash:profile:isoff-live:2011\" \
             mediaPresentationDuration=\"PT{}S\" minBufferTime=\"PT{}S\">\n",
            self.duration.as_secs(),
            self.segment.as_secs()
        ));
        x.push_str(" <Period id=\"0\" start=\"PT0S\">\n");
        x.push_str("  <AdaptationSet contentType=\"video\" mimeType=\"video/mp4\" segmentAlignment=\"true\">\n");
        x.push_str(&format!(
            "   <SegmentTemplate timescale=\"1000\" duration=\"{}\" startNumber=\"{}\" media=\"{}\"/>\n",
            self.segment.as_millis(),
            self.start_number,
            self.media
        ));
        for r in &self.representations {
            x.push_str(&format!(
                "   <Representation id=\"{}\" bandwidth=\"{}\" codecs=\"avc1.64001f\"/>\n",
                r.id, r.bandwidth
            ));
        }
        x.push_str("  </AdaptationSet>\n </Period>\n</MPD>\n");
        x
    }

    /// Reads a manifest.
    pub fn parse(text: &str) -> Result<Manifest, String> {
        if text.len() > MAX_MPD_BYTES {
            return Err(format!("manifest larger than {MAX_MPD_BYTES} bytes"));
        }
        let mut duration = None;
        let mut template: Option<(u64, u64, u64, String)> = None;
        let mut reps = Vec::new();
        for tag in text.split('<').skip(1) {
            let tag = tag.split('>').next().unwrap_or("");
            let name = tag.split_whitespace().next().unwrap_or("");
            match name {
                "MPD" => {
                    let d = attr(tag, "mediaPresentationDuration")
                        .ok_or("MPD without mediaPresentationDuration")?;
                    duration = Some(iso_duration(d).ok_or_else(|| format!("bad duration '{d}'"))?);
                }
                "SegmentTemplate" => {
                    let num = |k: &str, default: Option<u64>| -> Result<u64, String> {
                        match attr(tag, k) {
                            Some(v) => v.parse().map_err(|_| format!("bad {k} '{v}'")),
                            None => default.ok_or_else(|| format!("SegmentTemplate without {k}")),
                        }
                    };
                    let media = attr(tag, "media").ok_or("SegmentTemplate without media")?;
                    template = Some((
                        num("timescale", Some(1))?,
                        num("duration", None)?,
                        num("startNumber", Some(1))?,
                        media.to_string(),
                    ));
                }
                "Representation" => {
                    if reps.len() >= MAX_REPRESENTATIONS {
                        return Err(format!("more than {MAX_REPRESENTATIONS} representations"));
                    }
                    let id = attr(tag, "id").ok_or("Representation without id")?;
                    let bw = attr(tag, "bandwidth").ok_or("Representation without bandwidth")?;
                    reps.push(Representation {
                        id: id.to_string(),
                        bandwidth: bw.parse().map_err(|_| format!("bad bandwidth '{bw}'"))?,
                    });
                }
                _ => {}
            }
        }
        let duration = duration.ok_or("no MPD element")?;
        let (timescale, seg, start_number, media) = template.ok_or("no SegmentTemplate")?;
        if timescale == 0 || seg == 0 {
            return Err("segment duration or timescale of zero".into());
        }
        let segment = Duration::from_nanos(
            u64::try_from(u128::from(seg) * 1_000_000_000 / u128::from(timescale))
                .map_err(|_| "segment duration too long")?,
        );
        if segment.is_zero() {
            return Err("segment shorter than a nanosecond".into());
        }
        if reps.is_empty() {
            return Err("no Representation".into());
        }
        reps.sort_by_key(|r| r.bandwidth);
        let m = Manifest {
            duration,
            segment,
            start_number,
            media,
            representations: reps,
        };
        if m.segments() == 0 || m.segments() > MAX_SEGMENTS {
            return Err(format!("{} segments (1 ..= {MAX_SEGMENTS})", m.segments()));
        }
        Ok(m)
    }
}

/// The value of attribute `name` in a start tag's text.
fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
    let mut rest = tag;
    while let Some(i) = rest.find(name) {
        let before_ok = i == 0
            || rest
                .as_bytes()
                .get(i - 1)
                .is_some_and(|b| b.is_ascii_whitespace());
        let after = rest.get(i + name.len()..).unwrap_or("");
        if before_ok {
            if let Some(v) = after.trim_start().strip_prefix('=') {
                let v = v.trim_start();
                let quote = v.chars().next()?;
                if quote == '"' || quote == '\'' {
                    let body = v.get(1..)?;
                    return body.find(quote).and_then(|end| body.get(..end));
                }
            }
        }
        rest = after;
    }
    None
}

/// An ISO 8601 duration of the form `PT[nH][nM][n[.f]S]` (what MPDs use).
fn iso_duration(s: &str) -> Option<Duration> {
    let mut rest = s.strip_prefix("PT")?;
    let mut total = 0f64;
    while !rest.is_empty() {
        let end = rest.find(|c: char| c.is_ascii_alphabetic())?;
        let value: f64 = rest.get(..end)?.parse().ok()?;
        let unit = rest.get(end..end + 1)?;
        total += value
            * match unit {
                "H" => 3600.0,
                "M" => 60.0,
                "S" => 1.0,
                _ => return None,
            };
        rest = rest.get(end + 1..)?;
    }
    (total.is_finite() && (0.0..1e9).contains(&total)).then(|| Duration::from_secs_f64(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            duration: Duration::from_secs(600),
            segment: Duration::from_secs(2),
            start_number: 1,
            media: "$RepresentationID$/$Number$.m4s".into(),
            representations: vec![
                Representation {
                    id: "0".into(),
                    bandwidth: 45_652,
                },
                Representation {
                    id: "1".into(),
                    bandwidth: 89_283,
                },
            ],
        }
    }

    #[test]
    fn written_manifests_read_back() {
        let m = manifest();
        let xml = m.to_xml();
        assert_eq!(Manifest::parse(&xml), Ok(m.clone()));
        assert_eq!(m.segments(), 300);
        assert_eq!(m.segment_url(1, 17), "1/17.m4s");
    }

    #[test]
    fn foreign_shapes_and_durations() {
        let xml = r#"<MPD mediaPresentationDuration="PT1M3.5S"><Period><AdaptationSet>
            <SegmentTemplate media='v_$RepresentationID$_$Number$.m4s' duration="4"/>
            <Representation bandwidth="2000" id="hi"/><Representation id="lo" bandwidth="100"/>
            </AdaptationSet></Period></MPD>"#;
        let m = Manifest::parse(xml).expect("parses");
        assert_eq!(m.duration, Duration::from_secs_f64(63.5));
        assert_eq!((m.segment, m.start_number), (Duration::from_secs(4), 1));
        assert_eq!(m.representations[0].id, "lo", "sorted by bandwidth");
        assert_eq!(m.segments(), 16);
        assert_eq!(m.segment_url(1, 3), "v_hi_3.m4s");
        assert_eq!(iso_duration("PT1H"), Some(Duration::from_secs(3600)));
    }

    #[test]
    fn broken_manifests_are_refused() {
        for bad in [
            "",
            "<MPD>",
            r#"<MPD mediaPresentationDuration="PT10S"><SegmentTemplate media="x" duration="0"/><Representation id="a" bandwidth="1"/>"#,
            r#"<MPD mediaPresentationDuration="PT10S"><SegmentTemplate media="x" duration="2"/>"#,
            r#"<MPD mediaPresentationDuration="P1D"><SegmentTemplate media="x" duration="2"/><Representation id="a" bandwidth="1"/>"#,
            r#"<MPD mediaPresentationDuration="PT1e12S"><SegmentTemplate media="x" duration="2"/><Representation id="a" bandwidth="1"/>"#,
            r#"<MPD mediaPresentationDuration="PT10S"><SegmentTemplate media="x" duration="2"/><Representation id="a" bandwidth="-1"/>"#,
            r#"<MPD mediaPresentationDuration="PT10000000S"><SegmentTemplate media="x" timescale="1000" duration="1"/><Representation id="a" bandwidth="1"/>"#,
        ] {
            assert!(Manifest::parse(bad).is_err(), "{bad}");
        }
        let many = format!(
            r#"<MPD mediaPresentationDuration="PT10S"><SegmentTemplate media="x" duration="2"/>{}"#,
            r#"<Representation id="a" bandwidth="1"/>"#.repeat(MAX_REPRESENTATIONS + 1)
        );
        assert!(Manifest::parse(&many).is_err());
        assert!(Manifest::parse(&" ".repeat(MAX_MPD_BYTES + 1)).is_err());
    }

    proptest::proptest! {
        #[test]
        fn hostile_text_never_panics(s in "\\PC{0,300}") {
            let _ = Manifest::parse(&s);
            let _ = iso_duration(&s);
        }
    }
}
