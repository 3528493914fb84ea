//! Workloads: what the simulated client fetches from the simulated server.
//!
//! A [`Workload`] is `files` files of `size` bytes each, requested one after
//! another over one connection (ART journal Figs. 20-21 fetch 1000 files);
//! a bulk transfer is the one-file case. File contents are deterministic
//! pseudo-random bytes ([`FileContent`]): the server generates them on the
//! fly in chunks and the client regenerates the same stream to check every
//! byte, so a 100 MB file is never held in memory whole.

use netem::derive_seed;
use serde::{Deserialize, Deserializer, Serialize};

/// Most files one workload may hold: the per-file records are kept in
/// memory, so this bounds them (16 bytes each).
pub const MAX_FILES: u64 = 10_000_000;

/// N files of one size fetched sequentially over one connection.
///
/// Exists so a scenario can say "one 100 MB bulk transfer" or "1000 files of
/// 100 KB" with the same two numbers. In TOML, `size` is a number of bytes
/// or a string with a unit (`"100KB"`, `"1MiB"`, see [`parse_size`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// Number of files, fetched one after another (at least 1).
    #[serde(default = "one")]
    pub files: u64,
    /// Size of each file in bytes.
    #[serde(deserialize_with = "deserialize_size")]
    pub size: u64,
}

fn one() -> u64 {
    1
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
        Workload { files: 1, size }
    }

    /// `files` files of `size` bytes.
    pub fn files(files: u64, size: u64) -> Self {
        Workload { files, size }
    }

    /// Bytes the client receives in total (saturating).
    pub fn total_bytes(&self) -> u64 {
        self.files.saturating_mul(self.size)
    }

    /// Checks the numbers: at least one file, at most [`MAX_FILES`], and a
    /// total that fits a QUIC stream offset space per file.
    pub fn validate(&self) -> Result<(), String> {
        if self.files == 0 {
            return Err("the workload needs at least one file".into());
        }
        if self.files > MAX_FILES {
            return Err(format!(
                "{} files is more than the {MAX_FILES} a workload may hold",
                self.files
            ));
        }
        // RFC 9000 §19.8: stream offsets stay below 2^62.
        if self.size >= 1 << 62 {
            return Err(format!(
                "file size {} bytes exceeds a QUIC stream's 2^62 bytes",
                self.size
            ));
        }
        Ok(())
    }
}

/// Parses a byte size: a plain number of bytes, or a number with a unit,
/// `KB`/`MB`/`GB` (powers of 1000) or `KiB`/`MiB`/`GiB` (powers of 1024), as
/// DESIGN.md's workload options say.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" | "k" => 1_000,
        "mb" | "m" => 1_000_000,
        "gb" | "g" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit '{other}' in '{s}' (use B, KB, MB, GB, KiB, MiB, GiB)"
            ))
        }
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 1200, 200KB, 1MiB)"))?;
    let bytes = value * mult as f64;
    // u64::MAX as f64 rounds up to 2^64, so `<` keeps the cast exact.
    if !bytes.is_finite() || bytes < 0.0 || bytes >= u64::MAX as f64 {
        return Err(format!("size '{s}' is out of range"));
    }
    Ok(bytes.round() as u64)
}

/// A size in a TOML or JSON file: an integer number of bytes or a string
/// with a unit.
#[derive(Deserialize)]
#[serde(untagged)]
enum SizeRepr {
    Bytes(u64),
    Text(String),
}

/// Serde helper: accepts `1000000` or `"1MB"`.
pub(crate) fn deserialize_size<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match SizeRepr::deserialize(d)? {
        SizeRepr::Bytes(n) => Ok(n),
        SizeRepr::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

/// Serde helper: an optional size (`None` when absent).
pub(crate) fn deserialize_opt_size<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<u64>, D::Error> {
    deserialize_size(d).map(Some)
}

/// Bytes generated per refill of [`FileContent`]'s block (a multiple of 8:
/// the generator produces 64-bit words).
const BLOCK: usize = 16 * 1024;

/// The bytes of one file: a pseudo-random stream, sequential, generated on
/// demand.
///
/// Exists so the server can send and the client can check files of any size
/// in constant memory. The generator is wyrand (64-bit words, little-endian),
/// seeded per file from the workload's content seed and the file's index, so
/// files differ from each other and from run to run only through the seed.
/// It is not cryptographic and need not be: random-looking bytes only have
/// to make a misplaced, duplicated or dropped chunk visible, and generation
/// runs twice per byte in every simulation (a cipher keystream cost about a
/// tenth of a run's time). The bytes do not depend on how the reads are cut:
/// they are drawn in fixed blocks.
#[derive(Clone, Debug)]
pub struct FileContent {
    state: u64,
    remaining: u64,
    block: Vec<u8>,
    /// Next unused byte of `block` (`block.len()` when it is used up).
    pos: usize,
}

impl FileContent {
    /// The content of file `index` (`size` bytes) for content seed `seed`.
    pub fn new(seed: u64, index: u64, size: u64) -> Self {
        let state = derive_seed(
            seed.wrapping_add(index.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            "file",
        );
        FileContent {
            state,
            remaining: size,
            block: vec![0; BLOCK],
            pos: BLOCK,
        }
    }

    /// Bytes not generated yet.
    pub fn remaining(&self) -> u64 {
        self.remaining
    }

    /// Fills the start of `buf` with the next bytes of the file; returns how
    /// many (fewer than `buf.len()` only at the end of the file).
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = usize::try_from(self.remaining).map_or(buf.len(), |r| r.min(buf.len()));
        let mut done = 0;
        while done < n {
            if self.pos >= self.block.len() {
                self.refill();
            }
            let take = (n - done).min(self.block.len() - self.pos);
            if let (Some(dst), Some(src)) = (
                buf.get_mut(done..done + take),
                self.block.get(self.pos..self.pos + take),
            ) {
                dst.copy_from_slice(src);
            }
            self.pos += take;
            done += take;
        }
        self.remaining -= n as u64;
        n
    }

    /// The next block of the stream: wyrand (Wang Yi's 64-bit generator:
    /// add a constant, fold a 128-bit product).
    fn refill(&mut self) {
        for word in self.block.chunks_exact_mut(8) {
            self.state = self.state.wrapping_add(0xa076_1d64_78bd_642f);
            let t =
                u128::from(self.state).wrapping_mul(u128::from(self.state ^ 0xe703_7ed1_a0b4_28db));
            word.copy_from_slice(&(((t >> 64) as u64) ^ (t as u64)).to_le_bytes());
        }
        self.pos = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("1200"), Ok(1200));
        assert_eq!(parse_size("200KB"), Ok(200_000));
        assert_eq!(parse_size(" 1MB "), Ok(1_000_000));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5GB"), Ok(1_500_000_000));
        assert!(parse_size("12XB").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("MB").is_err());
        assert!(parse_size("1e30GB").is_err());
        assert!(parse_size("-1").is_err());
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
    fn workload_size_accepts_numbers_and_units() {
        let w: Workload = toml::from_str("files = 3\nsize = \"2KB\"").expect("parses");
        assert_eq!(w, Workload::files(3, 2000));
        let w: Workload = toml::from_str("size = 5").expect("parses");
        assert_eq!(w, Workload::bulk(5));
        assert!(toml::from_str::<Workload>("size = \"5 parsecs\"").is_err());
        assert!(toml::from_str::<Workload>("size = 5\nextra = 1").is_err());
    }

    #[test]
    fn files_differ_and_are_reproducible() {
        let gen = |seed, index| {
            let mut c = FileContent::new(seed, index, 1000);
            let mut v = vec![0u8; 1000];
            assert_eq!(c.fill(&mut v), 1000);
            assert_eq!(c.remaining(), 0);
            v
        };
        assert_eq!(gen(1, 0), gen(1, 0));
        assert_ne!(gen(1, 0), gen(1, 1));
        assert_ne!(gen(1, 0), gen(2, 0));
    }

    proptest! {
        /// However the file is cut into reads, the bytes are the same and
        /// exactly `size` of them come out.
        #[test]
        fn chunking_does_not_change_content(size in 0u64..5000, cuts in proptest::collection::vec(1usize..700, 1..20)) {
            let mut whole = vec![0u8; size as usize];
            let mut c = FileContent::new(9, 4, size);
            prop_assert_eq!(c.fill(&mut whole), size as usize);
            let mut pieces = Vec::new();
            let mut c = FileContent::new(9, 4, size);
            let mut i = 0;
            loop {
                let mut buf = vec![0u8; cuts[i % cuts.len()]];
                let n = c.fill(&mut buf);
                if n == 0 {
                    break;
                }
                pieces.extend_from_slice(&buf[..n]);
                i += 1;
            }
            prop_assert_eq!(pieces, whole);
        }
    }
}
