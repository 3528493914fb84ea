//! Mahimahi packet-delivery traces.
//!
//! A trace file has one non-negative integer per line: a time in milliseconds
//! from the start of the trace at which one delivery opportunity occurs. An
//! opportunity lets [`OPPORTUNITY_BYTES`] bytes leave the bottleneck queue;
//! several opportunities in one millisecond repeat the timestamp. When the
//! last line is reached the trace loops: Mahimahi adds the last timestamp to
//! the trace's base time and starts again from the first line, so the period
//! is the last timestamp (a trace containing just `1` is one opportunity per
//! millisecond, 12 Mbit/s).
//!
//! Mahimahi's `mm-link` counts an opportunity as 1504 bytes of TUN frame: its
//! TUN device is opened without `IFF_NO_PI`, so every frame carries a 4-byte
//! packet-information header in front of the IP packet, and an MTU-sized
//! (1500-byte) IP packet uses exactly one opportunity. artq sees datagrams,
//! not TUN frames, so it counts IP packet bytes and an opportunity carries
//! 1500 of them ([`Datagram::wire_len`](crate::link::Datagram::wire_len)).
//!
//! Parsing follows `mm-link`'s rules (empty lines, decreasing timestamps, an
//! empty file and a trace lasting zero time are rejected) but every error
//! names the file and the 1-based line.

use std::io::Read;
use std::path::Path;

use serde::Serialize;

/// Bytes of IP packet one delivery opportunity carries (Mahimahi's 1504-byte
/// TUN frame minus its 4-byte packet-information header).
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// Largest trace or loss-pattern file read, bytes (64 MiB; the real traces
/// in `../shared/traces` are 0.4-1.2 MB). A larger file, or one without an
/// end (`/dev/zero`), is refused after this many bytes, saying so.
pub const MAX_TRACE_FILE_BYTES: u64 = 64 << 20;

/// Most lines a trace or loss pattern may have (8 Mi: an 8 Mi-opportunity
/// trace holds 12 GB of capacity per period and takes 64 MiB in memory).
pub const MAX_TRACE_LINES: usize = 8 << 20;

/// Largest timestamp accepted, in ms: larger values would overflow the
/// nanosecond clock (`u64` ns is about 584 years).
const MAX_TIMESTAMP_MS: u64 = u64::MAX / 1_000_000;

/// Most opportunities [`Trace::constant`] generates for one period before it
/// falls back to a rounded, shorter period.
const MAX_GENERATED_OPPORTUNITIES: u64 = 1 << 20;

/// Bits per millisecond-long opportunity pattern: 1500 bytes * 8 bits * 1000 ms/s.
const OPPORTUNITY_BIT_MS: u64 = OPPORTUNITY_BYTES * 8 * 1000;

/// Why a trace-like file (capacity trace or loss pattern) could not be loaded.
///
/// Every variant names the file, and parse errors the 1-based line, so a user
/// can go straight to the broken line.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be read. The OS error is part of the message
    /// (not also a `source`, so error chains do not print it twice).
    #[error("{path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// What the OS said.
        error: std::io::Error,
    },
    /// A line is not what the format allows.
    #[error("{path}:{line}: {reason}")]
    Parse {
        /// The file (or the origin label given to `parse`).
        path: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// The file has no entries at all.
    #[error("{path}: empty file, no entries found")]
    Empty {
        /// The file.
        path: String,
    },
}

/// A Mahimahi delivery-opportunity trace: the capacity of one link direction
/// over time, looping.
///
/// Exists so the same recorded cellular capacity (or a generated constant
/// one) can drive both the simulator and the relay. Construct it with
/// [`Trace::from_file`], [`Trace::parse`] or [`Trace::constant`]; all uphold
/// that timestamps are non-decreasing, and the first two that the trace is
/// non-empty with a non-zero period.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Trace {
    /// Opportunity times in ms from the start of one period, non-decreasing.
    opportunities_ms: Vec<u64>,
    /// Where the trace came from (file path or a description), for messages.
    origin: String,
}

impl Trace {
    /// Loads a Mahimahi trace file (at most [`MAX_TRACE_FILE_BYTES`] bytes
    /// and [`MAX_TRACE_LINES`] lines).
    pub fn from_file(path: &Path) -> Result<Trace, TraceError> {
        let shown = path.display().to_string();
        let text = read_text_file(path, MAX_TRACE_FILE_BYTES, "trace")?;
        Trace::parse(&text, &shown)
    }

    /// Parses trace text; `origin` names it in errors (usually the path).
    /// More than [`MAX_TRACE_LINES`] lines is an error.
    pub fn parse(text: &str, origin: &str) -> Result<Trace, TraceError> {
        let mut opportunities_ms: Vec<u64> = Vec::new();
        let mut last_line = 0;
        for (index, raw) in lines(text).enumerate() {
            let line = index.saturating_add(1);
            last_line = line;
            let err = |reason: String| TraceError::Parse {
                path: origin.to_string(),
                line,
                reason,
            };
            if line > MAX_TRACE_LINES {
                return Err(err(too_many_lines("trace")));
            }
            let ms = parse_timestamp(raw).map_err(err)?;
            if let Some(&prev) = opportunities_ms.last() {
                if ms < prev {
                    return Err(err(format!(
                        "timestamp {ms} is smaller than the previous one ({prev}); \
                         timestamps must be non-decreasing"
                    )));
                }
            }
            opportunities_ms.push(ms);
        }
        match opportunities_ms.last() {
            None => Err(TraceError::Empty {
                path: origin.to_string(),
            }),
            Some(0) => Err(TraceError::Parse {
                path: origin.to_string(),
                line: last_line,
                reason: "the trace must last a non-zero time (its last timestamp is 0)".to_string(),
            }),
            Some(_) => Ok(Trace {
                opportunities_ms,
                origin: origin.to_string(),
            }),
        }
    }

    /// A trace with the given constant rate of IP bytes, in Mahimahi's
    /// opportunity form.
    ///
    /// Exists so constant-rate links can be run through the same opportunity
    /// machinery as recorded traces (and written out for `mm-link`). For the
    /// exact fluid model use [`Capacity::Constant`](crate::link::Capacity)
    /// instead: the two differ by the 1500-byte, 1-ms granularity here.
    ///
    /// The pattern spreads `n` opportunities evenly over a period of `p` ms
    /// (the k-th at `ceil(k * p / n)`), with `n / p` = `bits_per_sec / 12e6`.
    /// When that ratio is reachable with at most 2^20 opportunities the period
    /// is the exact one (20 Mbit/s: 5 opportunities every 3 ms); otherwise the
    /// period is shortened to keep 2^20 opportunities and `n` is rounded, a
    /// rate error below 1e-6. Rates above 25 Tbit/s are capped there (2^21
    /// opportunities per ms). A rate of 0 gives a trace with no opportunities
    /// (a link that never delivers).
    pub fn constant(bits_per_sec: u64) -> Trace {
        let origin = format!("constant {bits_per_sec} bit/s");
        if bits_per_sec == 0 {
            return Trace {
                opportunities_ms: Vec::new(),
                origin,
            };
        }
        // n / p = bits_per_sec / OPPORTUNITY_BIT_MS, reduced.
        let g = gcd(bits_per_sec, OPPORTUNITY_BIT_MS);
        let exact_n = bits_per_sec / g;
        let exact_p = OPPORTUNITY_BIT_MS / g;
        let (n, p) = if exact_n <= MAX_GENERATED_OPPORTUNITIES {
            (exact_n, exact_p)
        } else {
            // Period giving about MAX opportunities; >= 1 ms.
            let p = (u128::from(MAX_GENERATED_OPPORTUNITIES) * u128::from(OPPORTUNITY_BIT_MS)
                / u128::from(bits_per_sec))
            .max(1);
            let n = (u128::from(bits_per_sec) * p + u128::from(OPPORTUNITY_BIT_MS) / 2)
                / u128::from(OPPORTUNITY_BIT_MS);
            // n is about 2^20 unless p was raised to 1 ms, i.e. above about
            // 12.6 Tbit/s; cap the memory there (and so the rate, at 25 Tbit/s).
            let n = n.clamp(1, u128::from(2 * MAX_GENERATED_OPPORTUNITIES));
            // Both fit in u64: p <= 2^20 * 12e6 and n <= 2^21.
            (
                u64::try_from(n).unwrap_or(u64::MAX),
                u64::try_from(p).unwrap_or(u64::MAX),
            )
        };
        let n128 = u128::from(n);
        let opportunities_ms = (1..=n128)
            .map(|k| {
                let ms = (k * u128::from(p)).div_ceil(n128);
                u64::try_from(ms).unwrap_or(u64::MAX)
            })
            .collect();
        Trace {
            opportunities_ms,
            origin,
        }
    }

    /// Opportunity times of one period, in ms, non-decreasing.
    pub fn opportunities_ms(&self) -> &[u64] {
        &self.opportunities_ms
    }

    /// Length of one period in ms (the last timestamp); 0 for an empty trace.
    pub fn period_ms(&self) -> u64 {
        self.opportunities_ms.last().copied().unwrap_or(0)
    }

    /// Where the trace came from (file path or description).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Mean capacity over one period in bits per second of IP packets:
    /// opportunities * 1500 bytes * 8 / period.
    pub fn mean_rate_bps(&self) -> f64 {
        let period = self.period_ms();
        if period == 0 {
            return 0.0;
        }
        self.opportunities_ms.len() as f64 * (OPPORTUNITY_BYTES * 8) as f64 * 1000.0 / period as f64
    }

    /// Number of opportunities in the half-open window `(from_ms, to_ms]`
    /// when the trace loops from time 0, as a link replays it.
    ///
    /// Exists for checks and reports (capacity offered over a window).
    pub fn opportunities_between(&self, from_ms: u64, to_ms: u64) -> u64 {
        self.opportunities_up_to(to_ms)
            .saturating_sub(self.opportunities_up_to(from_ms))
    }

    /// Opportunities at times <= `t_ms` (time 0 included), looping.
    fn opportunities_up_to(&self, t_ms: u64) -> u64 {
        let period = self.period_ms();
        if period == 0 {
            return 0;
        }
        let per_period = self.opportunities_ms.len() as u64;
        let loops = t_ms / period;
        let rest = t_ms % period;
        let in_partial = self.opportunities_ms.partition_point(|&ms| ms <= rest) as u64;
        // The previous loop's last opportunity (at `period`) and this loop's
        // entries at 0 coincide in time; both are counted, as Mahimahi burns both.
        loops.saturating_mul(per_period).saturating_add(in_partial)
    }
}

/// The lines of `text` as [`str::lines`] cuts them (at `\n`, a `\r`
/// before it dropped, the last line's `\n` optional), found by a plain
/// scan of the bytes: trace lines are a few bytes long, and `lines`' search
/// for each line's end was a third of parsing a trace.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let Some(end) = rest.bytes().position(|b| b == b'\n') else {
            return Some(core::mem::take(&mut rest));
        };
        let (line, after) = rest.split_at_checked(end)?;
        rest = after.get(1..).unwrap_or_default();
        Some(line.strip_suffix('\r').unwrap_or(line))
    })
}

/// Parses one trace line into a timestamp, or says why not.
fn parse_timestamp(raw: &str) -> Result<u64, String> {
    // Every line of a real trace is a few digits: read them in one pass.
    // Traces are parsed for every run that uses them (tens of thousands of
    // lines each), and the checks below took 4.6% of art-fig27's quick
    // reproduction. At most 13 digits stay below MAX_TIMESTAMP_MS, so this
    // is what the checks would return.
    let digits = raw.as_bytes();
    if (1..=13).contains(&digits.len()) && digits.iter().all(u8::is_ascii_digit) {
        return Ok(digits.iter().fold(0, |ms, d| ms * 10 + u64::from(d - b'0')));
    }
    // Tolerate CRLF files and stray spaces; Mahimahi reads numbers the same.
    let s = raw.trim();
    if s.is_empty() {
        return Err("empty line; expected a timestamp in milliseconds".to_string());
    }
    if s.starts_with('-') {
        return Err(format!("negative timestamp {s:?}"));
    }
    if !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "{s:?} is not a non-negative integer number of milliseconds"
        ));
    }
    let ms: u64 = s
        .parse()
        .map_err(|_| format!("timestamp {s:?} is too large"))?;
    if ms > MAX_TIMESTAMP_MS {
        return Err(format!(
            "timestamp {ms} ms is too large (max {MAX_TIMESTAMP_MS})"
        ));
    }
    Ok(ms)
}

/// Reads the whole of `path` if it holds at most `limit` bytes.
///
/// Exists so that no file a user points at (a trace, a loss pattern, a
/// scenario) can make artq read without end: a larger file, or one that
/// never ends (`/dev/zero`, `/dev/urandom`), fails after `limit + 1` bytes
/// with an error that says so (`ErrorKind::InvalidData`), instead of
/// exhausting memory. `what` names the kind of file in that message.
pub fn read_capped(path: &Path, limit: u64, what: &str) -> std::io::Result<Vec<u8>> {
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(limit.saturating_add(1)).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "larger than {}, the most artq reads from a {what} file",
                describe_bytes(limit)
            ),
        ));
    }
    Ok(bytes)
}

/// `67108864 bytes (64 MiB)`: a limit as users read it.
fn describe_bytes(n: u64) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{n} bytes ({} MiB)", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{n} bytes ({} KiB)", n >> 10),
        n => format!("{n} bytes"),
    }
}

/// A file as UTF-8 text, at most `limit` bytes ([`read_capped`]); a file
/// that is not text is an `InvalidData` error saying where it stops being.
pub fn read_capped_text(path: &Path, limit: u64, what: &str) -> std::io::Result<String> {
    let bytes = read_capped(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "not a text file (invalid UTF-8 at byte {})",
                e.utf8_error().valid_up_to()
            ),
        )
    })
}

/// A trace-like file as text, at most `limit` bytes; errors name the file.
pub(crate) fn read_text_file(path: &Path, limit: u64, what: &str) -> Result<String, TraceError> {
    read_capped_text(path, limit, what).map_err(|error| TraceError::Io {
        path: path.display().to_string(),
        error,
    })
}

/// The reason given for a trace-like file past [`MAX_TRACE_LINES`].
pub(crate) fn too_many_lines(what: &str) -> String {
    format!("more than {MAX_TRACE_LINES} lines, the most artq reads from a {what} file")
}

/// Greatest common divisor (Euclid).
fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The variable that lets the test suite run without the shared traces:
/// set (to anything but empty or `0`), a test that needs them skips with a
/// note instead of failing.
#[cfg(any(test, feature = "test-support"))]
pub const SKIP_MISSING_TRACES_VAR: &str = "ARTQ_SKIP_MISSING_TRACES";

/// For tests: the project's real traces, `../shared/traces` beside the
/// repository (found from this crate's manifest directory, so any checkout,
/// a worktree or CI's clone, finds its own), when every file of `files` is
/// there.
///
/// Exists so that no test can pass without the traces it needs: a missing
/// directory or file fails the calling test `test`, naming the path and the
/// opt-out, unless [`SKIP_MISSING_TRACES_VAR`] is set, in which case it
/// returns `None` after a note on stderr and the test skips. Every test of
/// the workspace that reads the shared traces goes through here.
///
/// # Panics
/// When a trace is missing and the opt-out is not set (it is a test's
/// failure).
#[cfg(any(test, feature = "test-support"))]
pub fn shared_traces_for_test(test: &str, files: &[&str]) -> Option<std::path::PathBuf> {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let dir = repo.canonicalize().unwrap_or(repo).join("../shared/traces");
    let missing: Vec<&str> = files
        .iter()
        .copied()
        .filter(|f| !dir.join(f).is_file())
        .collect();
    if missing.is_empty() && dir.is_dir() {
        return Some(dir);
    }
    let missing = if dir.is_dir() {
        format!("{} in {}", missing.join(", "), dir.display())
    } else {
        format!("no directory {}", dir.display())
    };
    let opted_out = std::env::var(SKIP_MISSING_TRACES_VAR).is_ok_and(|v| {
        let v = v.trim();
        !v.is_empty() && v != "0"
    });
    assert!(
        opted_out,
        "{test}: the shared traces are missing ({missing}): this test needs ../shared/traces \
         beside the repository; set {SKIP_MISSING_TRACES_VAR}=1 to skip the tests that need them"
    );
    eprintln!(
        "note: {test} SKIPPED: the shared traces are missing ({missing}) and \
         {SKIP_MISSING_TRACES_VAR} is set"
    );
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn parse_err(text: &str) -> (String, usize, String) {
        match Trace::parse(text, "t.down") {
            Err(TraceError::Parse { path, line, reason }) => (path, line, reason),
            other => panic!("expected a parse error, got {other:?}"),
        }
    }

    #[test]
    fn parses_and_loops() {
        let t = Trace::parse("1\n1\n3\n", "x").expect("valid trace");
        assert_eq!(t.opportunities_ms(), &[1, 1, 3]);
        assert_eq!(t.period_ms(), 3);
        // 3 opportunities * 12000 bits per 3 ms.
        assert_eq!(t.mean_rate_bps(), 12_000_000.0);
        assert_eq!(t.opportunities_between(0, 3), 3);
        assert_eq!(t.opportunities_between(0, 6), 6);
        assert_eq!(t.opportunities_between(3, 4), 2);
        assert_eq!(t.opportunities_between(0, 0), 0);
    }

    #[test]
    fn crlf_and_spaces_are_tolerated() {
        let t = Trace::parse("0\r\n 2 \r\n", "x").expect("valid trace");
        assert_eq!(t.opportunities_ms(), &[0, 2]);
    }

    #[test]
    fn malformed_lines_name_file_and_line() {
        let (path, line, reason) = parse_err("1\n2\nabc\n4\n");
        assert_eq!((path.as_str(), line), ("t.down", 3));
        assert!(reason.contains("abc"), "{reason}");

        let (_, line, reason) = parse_err("1\n-5\n");
        assert_eq!(line, 2);
        assert!(reason.contains("negative"), "{reason}");

        let (_, line, reason) = parse_err("1\n5\n4\n");
        assert_eq!(line, 3);
        assert!(reason.contains("non-decreasing"), "{reason}");

        let (_, line, reason) = parse_err("1\n\n2\n");
        assert_eq!(line, 2);
        assert!(reason.contains("empty line"), "{reason}");

        let (_, line, _) = parse_err("1.5\n");
        assert_eq!(line, 1);

        let (_, line, reason) = parse_err("0\n0\n0\n");
        assert_eq!(line, 3);
        assert!(reason.contains("non-zero"), "{reason}");

        let (_, line, reason) = parse_err("1\n99999999999999999999999\n");
        assert_eq!(line, 2);
        assert!(reason.contains("too large"), "{reason}");

        let (_, line, _) = parse_err("1\n18446744073709552\n");
        assert_eq!(line, 2);
    }

    /// The one-pass reading of digit lines gives what the checks give, at
    /// the edges of both: 13 digits (the longest it reads), 14 (the checks'
    /// largest accepted value, and one above it), and with the spaces and
    /// carriage return the checks trim.
    #[test]
    fn digit_lines_read_as_the_checks_read_them() {
        for text in ["0", "7", "0042", "9999999999999", "18446744073709"] {
            let want: u64 = text.parse().expect("digits");
            assert_eq!(parse_timestamp(text), Ok(want), "{text}");
            assert_eq!(parse_timestamp(&format!(" {text}\r")), Ok(want), "{text}");
        }
        assert!(parse_timestamp("18446744073710").is_err());
        let t = Trace::parse("0\r\n5\r\n9999999999999", "x").expect("valid trace");
        assert_eq!(t.opportunities_ms, vec![0, 5, 9_999_999_999_999]);
    }

    /// The byte scan cuts lines as `str::lines` does.
    #[test]
    fn lines_are_cut_as_str_lines_cuts_them() {
        for text in [
            "",
            "\n",
            "1",
            "1\n",
            "1\n2",
            "1\r\n2\r\n",
            "1\r",
            "1\r\r\n",
            "\r\n\n",
            "a\rb\n",
            "é\n9",
        ] {
            assert_eq!(
                lines(text).collect::<Vec<_>>(),
                text.lines().collect::<Vec<_>>(),
                "{text:?}"
            );
        }
    }

    #[test]
    fn error_messages_show_file_and_line() {
        let e = Trace::parse("1\nx\n", "/tmp/a.up").expect_err("malformed");
        assert!(e.to_string().starts_with("/tmp/a.up:2: "), "{e}");
        let e = Trace::parse("", "/tmp/b.up").expect_err("empty");
        assert!(matches!(e, TraceError::Empty { .. }));
        assert!(e.to_string().contains("/tmp/b.up"), "{e}");
    }

    #[test]
    fn missing_file_is_an_io_error_naming_it() {
        let e = Trace::from_file(Path::new("/nonexistent/dir/x.down")).expect_err("missing");
        assert!(matches!(e, TraceError::Io { .. }));
        assert!(e.to_string().contains("/nonexistent/dir/x.down"), "{e}");
    }

    #[test]
    fn endless_and_oversized_files_are_refused_saying_why() {
        for dev in ["/dev/zero", "/dev/urandom"] {
            if !Path::new(dev).exists() {
                continue;
            }
            let e = Trace::from_file(Path::new(dev)).expect_err("no end");
            let text = e.to_string();
            assert!(matches!(e, TraceError::Io { .. }), "{e:?}");
            assert!(text.starts_with(dev) && text.contains("64 MiB"), "{text}");
        }
        let dir = tempfile_dir();
        let big = dir.join("big.down");
        let f = std::fs::File::create(&big).expect("create");
        f.set_len(MAX_TRACE_FILE_BYTES + 1).expect("sparse file");
        let e = Trace::from_file(&big).expect_err("one byte too many");
        assert!(e.to_string().contains("larger than 67108864 bytes"), "{e}");
        let binary = dir.join("bin.down");
        std::fs::write(&binary, [b'1', b'\n', 0xff, b'\n']).expect("write");
        let e = Trace::from_file(&binary).expect_err("not text");
        assert!(e.to_string().contains("not a text file"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn more_lines_than_the_limit_are_refused() {
        let text = "1\n".repeat(MAX_TRACE_LINES + 1);
        let (_, line, reason) = parse_err(&text);
        assert_eq!(line, MAX_TRACE_LINES + 1);
        assert!(reason.contains("more than"), "{reason}");
        let exactly = "1\n".repeat(MAX_TRACE_LINES);
        assert!(Trace::parse(&exactly, "x").is_ok());
    }

    /// A fresh directory under the system's temporary directory.
    fn tempfile_dir() -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "artq-netem-trace-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn constant_traces_have_the_requested_rate() {
        let t = Trace::constant(12_000_000);
        assert_eq!(t.opportunities_ms(), &[1]);
        let t = Trace::constant(20_000_000);
        assert_eq!(t.opportunities_ms(), &[1, 2, 2, 3, 3]);
        assert_eq!(t.period_ms(), 3);
        for bps in [
            1_000u64,
            999_999,
            1_000_000,
            7_777_777,
            100_000_000,
            1_000_000_007,
        ] {
            let t = Trace::constant(bps);
            let rel = (t.mean_rate_bps() - bps as f64).abs() / bps as f64;
            assert!(rel < 1e-6, "{bps}: {} ({rel})", t.mean_rate_bps());
            assert!(t.opportunities_ms().len() as u64 <= 2 * MAX_GENERATED_OPPORTUNITIES);
        }
        let zero = Trace::constant(0);
        assert_eq!(zero.mean_rate_bps(), 0.0);
        assert_eq!(zero.opportunities_between(0, 1000), 0);
    }

    #[test]
    fn real_traces_parse() {
        let Some(dir) = shared_traces_for_test(
            "real_traces_parse",
            &[
                "Verizon-LTE-short.down",
                "Verizon-LTE-short.up",
                "TMobile-LTE-short.down",
            ],
        ) else {
            return;
        };
        for name in [
            "Verizon-LTE-short.down",
            "Verizon-LTE-short.up",
            "TMobile-LTE-short.down",
        ] {
            let t = Trace::from_file(&dir.join(name)).expect("real trace parses");
            assert!(
                t.mean_rate_bps() > 100_000.0,
                "{name}: {}",
                t.mean_rate_bps()
            );
            assert!(t.period_ms() > 1000);
        }
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in "[0-9\\-a\\n\\r ]{0,64}") {
            let _ = Trace::parse(&text, "fuzz");
        }

        #[test]
        fn sorted_input_round_trips(mut v in proptest::collection::vec(0u64..100_000, 1..50)) {
            v.sort_unstable();
            prop_assume!(*v.last().unwrap_or(&0) > 0);
            let text: String = v.iter().map(|x| format!("{x}\n")).collect();
            let t = Trace::parse(&text, "p").expect("sorted, non-zero");
            prop_assert_eq!(t.opportunities_ms(), v.as_slice());
        }

        #[test]
        fn constant_rate_is_exact_enough(bps in 1u64..10_000_000_000) {
            let t = Trace::constant(bps);
            let rel = (t.mean_rate_bps() - bps as f64).abs() / bps as f64;
            prop_assert!(rel < 1e-6, "{} vs {}", t.mean_rate_bps(), bps);
            prop_assert!(t.opportunities_ms().windows(2).all(|w| w[0] <= w[1]));
        }
    }
}
