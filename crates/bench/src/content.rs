//! The benchmark's test file: seeded random bytes.
//!
//! Why random and seeded: compressible or patterned content could flatter a
//! stack that special-cases it, and the seed makes two runs move the same bytes.
//! [`Verifier`] checks a received body against the file byte for byte.

use std::fs::File;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Size of the generation buffer (64 KiB).
const CHUNK: usize = 64 * 1024;

/// Writes `size` bytes of ChaCha8 output seeded with `seed` to `path`.
pub fn write_seeded_file(path: &Path, size: u64, seed: u64) -> io::Result<()> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = BufWriter::with_capacity(CHUNK, File::create(path)?);
    let mut buf = vec![0u8; CHUNK];
    let mut left = size;
    while left > 0 {
        let n = usize::try_from(left).map_or(CHUNK, |l| l.min(CHUNK));
        let chunk = &mut buf[..n];
        rng.fill_bytes(chunk);
        out.write_all(chunk)?;
        left -= n as u64;
    }
    out.flush()
}

/// A [`Write`] sink that compares everything written to it with a file, byte
/// for byte, as it arrives (the benchmark's `--verify`).
///
/// Why a sink rather than a hash of a saved copy: the body never touches the
/// disk, and the comparison reads the source from the page cache, so its cost
/// is one read and one `memcmp` per chunk, paid alike by every stack that is
/// verified. A write that differs from the file, or runs past its end, fails
/// with an error naming the first differing offset; [`Verifier::finish`]
/// fails if the body stopped short.
pub struct Verifier {
    expected: BufReader<File>,
    offset: u64,
    scratch: Vec<u8>,
}

impl Verifier {
    /// A verifier of a body that must equal the content of `path`.
    pub fn open(path: &Path) -> io::Result<Self> {
        Ok(Self {
            expected: BufReader::with_capacity(CHUNK, File::open(path)?),
            offset: 0,
            scratch: Vec::new(),
        })
    }

    /// Bytes compared so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Succeeds with the body's length if it was the whole file; fails if
    /// the file has bytes the body did not have.
    pub fn finish(mut self) -> io::Result<u64> {
        let mut one = [0u8; 1];
        match self.expected.read(&mut one)? {
            0 => Ok(self.offset),
            _ => Err(io::Error::other(format!(
                "body ended after {} bytes, before the end of the file",
                self.offset
            ))),
        }
    }
}

impl Write for Verifier {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.scratch.resize(data.len(), 0);
        let mut filled = 0;
        while filled < data.len() {
            match self.expected.read(&mut self.scratch[filled..])? {
                0 => {
                    return Err(io::Error::other(format!(
                        "body is longer than the file ({} bytes)",
                        self.offset + filled as u64
                    )))
                }
                n => filled += n,
            }
        }
        if let Some(i) = data.iter().zip(&self.scratch).position(|(a, b)| a != b) {
            return Err(io::Error::other(format!(
                "body differs from the file at byte {}",
                self.offset + i as u64
            )));
        }
        self.offset += data.len() as u64;
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verifier_accepts_the_file_and_rejects_any_other_body() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("f");
        write_seeded_file(&path, CHUNK as u64 + 10, 7).expect("write");
        let body = std::fs::read(&path).expect("read");

        let mut v = Verifier::open(&path).expect("open");
        for piece in body.chunks(1000) {
            v.write_all(piece).expect("same bytes");
        }
        assert_eq!(v.finish().expect("whole file"), body.len() as u64);

        let mut v = Verifier::open(&path).expect("open");
        let mut bad = body.clone();
        bad[5000] ^= 1;
        let err = v.write_all(&bad).expect_err("one flipped bit");
        assert!(err.to_string().contains("at byte 5000"), "{err}");

        let mut v = Verifier::open(&path).expect("open");
        v.write_all(&body[..100]).expect("prefix");
        assert!(v.finish().is_err(), "short body");

        let mut v = Verifier::open(&path).expect("open");
        v.write_all(&body).expect("whole");
        assert!(v.write_all(b"x").is_err(), "body longer than the file");
    }

    #[test]
    fn file_has_the_requested_size_and_depends_on_the_seed() {
        let dir = tempfile::tempdir().expect("temp dir");
        let size = CHUNK as u64 * 2 + 3;
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        write_seeded_file(&a, size, 1).expect("write a");
        write_seeded_file(&b, size, 1).expect("write b");
        write_seeded_file(&c, size, 2).expect("write c");
        let (a, b, c) = (
            std::fs::read(a).expect("a"),
            std::fs::read(b).expect("b"),
            std::fs::read(c).expect("c"),
        );
        assert_eq!(a.len() as u64, size);
        assert_eq!(a, b);
        assert_ne!(a, c);
        write_seeded_file(&dir.path().join("empty"), 0, 1).expect("empty file");
        assert_eq!(
            std::fs::metadata(dir.path().join("empty"))
                .expect("stat")
                .len(),
            0
        );
    }
}
