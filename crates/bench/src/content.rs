//! The benchmark's test file: seeded random bytes.
//!
//! Why random and seeded: compressible or patterned content could flatter a
//! stack that special-cases it, and the seed makes two runs move the same bytes.

use std::fs::File;
use std::io::{self, BufWriter, Write};
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

#[cfg(test)]
mod tests {
    use super::*;

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
