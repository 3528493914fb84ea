//! The body of the cargo-fuzz target `hq_request` (`fuzz/fuzz_targets/`):
//! the hq-interop request parser and the path resolver of `artq serve`.
//!
//! It lives in the library, like [`crate::h3::fuzzing`], so that plain tests
//! run the same code on stable Rust over the committed seeds and on random
//! inputs.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use wire::time::Instant;

use crate::content::{decode_path, Content, Directory, Refusal};
use crate::hq::{parse_request, MAX_REQUEST};
use crate::http::MessageError;

/// The files `hq_request` serves from: a small tree in the system's
/// temporary directory (`artq-fuzz-hq`, made once per process and the same
/// every time, so runs do not pile up trees), with a symbolic link out of
/// the tree (which must never be followed) and one inside it.
///
/// Returns `None` where the tree cannot be made (no writable temporary
/// directory); the body then checks the parser alone.
pub fn served_tree() -> Option<&'static Path> {
    static TREE: OnceLock<Option<PathBuf>> = OnceLock::new();
    TREE.get_or_init(|| {
        let root = std::env::temp_dir().join("artq-fuzz-hq");
        let make = || -> std::io::Result<PathBuf> {
            std::fs::create_dir_all(root.join("dir/sub"))?;
            std::fs::create_dir_all(root.join("empty"))?;
            std::fs::write(root.join("a.txt"), b"a")?;
            std::fs::write(root.join("dir/index.html"), b"<p>index</p>")?;
            std::fs::write(root.join("dir/sub/b.bin"), [0u8; 64])?;
            std::fs::write(root.join("sp ace%41.txt"), b"odd name")?;
            #[cfg(unix)]
            {
                let _ = std::os::unix::fs::symlink("/", root.join("out"));
                let _ = std::os::unix::fs::symlink(root.join("dir"), root.join("in"));
            }
            root.canonicalize()
        };
        make().ok()
    })
    .as_deref()
}

/// `hq_request`: arbitrary bytes as an hq-interop request stream.
///
/// The first byte (if any) says whether the stream ended (bit 0) and where
/// to cut the rest for a first, partial read (the parser is called as the
/// bytes arrive). The rest goes through [`parse_request`]; a path it
/// accepts goes through [`decode_path`], [`Directory::locate`] and
/// [`Content::resolve`] on [`served_tree`], as `artq serve` would.
///
/// Checks, besides never panicking:
/// - a request the parser decided on a prefix is decided the same way on
///   the whole stream (bytes after the line do not change it);
/// - a request accepted is `GET` and a path starting with `/`, without
///   spaces or line ends, at most [`MAX_REQUEST`] bytes;
/// - a decoded path has no NUL;
/// - a path that resolves lies inside the served tree (symbolic links
///   included), and a path with a `..` component is refused.
pub fn hq_request(data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let fin = selector & 1 == 1;
    let cut = usize::from(selector >> 1) % (stream.len() + 1);
    let partial = parse_request(stream.get(..cut).unwrap_or_default(), false);
    let whole = parse_request(stream, fin);
    if let (Some(early), Some(late)) = (&partial, &whole) {
        // The same decision (a too-large line may be measured differently).
        let same = match (early, late) {
            (Ok(a), Ok(b)) => a == b,
            (Err(MessageError::TooLarge(_)), Err(MessageError::TooLarge(_))) => true,
            (Err(MessageError::Malformed(_)), Err(MessageError::Malformed(_))) => true,
            _ => false,
        };
        assert!(same, "decided {early:?} on a prefix, {late:?} on the whole");
    }
    if partial.is_some() {
        assert!(
            whole.is_some(),
            "decided on a prefix, undecided on the whole"
        );
    }
    match whole {
        Some(Ok(target)) => {
            assert!(target.starts_with('/'), "target {target:?}");
            assert!(
                target.len() <= MAX_REQUEST,
                "target of {} bytes",
                target.len()
            );
            assert!(
                !target.contains([' ', '\n']),
                "target with a space or line end: {target:?}"
            );
            resolve(&target);
        }
        Some(Err(MessageError::TooLarge(n))) => assert!(n > MAX_REQUEST as u64),
        Some(Err(_)) | None => {}
    }
}

/// The server side of a request for `target`: decode, locate, resolve.
fn resolve(target: &str) {
    let Some(path) = decode_path(target) else {
        return;
    };
    assert!(!path.contains('\0'), "decoded path with NUL: {path:?}");
    let Some(root) = served_tree() else {
        return;
    };
    let Ok(mut dir) = Directory::new(root) else {
        return;
    };
    let climbs = Path::new(path.trim_start_matches('/'))
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir));
    match dir.locate(&path) {
        Ok(found) => {
            assert!(!climbs, "{path:?} climbs out but resolved to {found:?}");
            assert!(
                found.starts_with(dir.root()),
                "{path:?} resolved outside the tree: {found:?}"
            );
        }
        Err(Refusal::Forbidden | Refusal::NotFound | Refusal::BadPath) => {}
    }
    if let Ok(mut resource) = dir.resolve(Instant::ZERO, target) {
        // Read a little of the body, as the server's pump would.
        let mut buf = [0u8; 256];
        let _ = resource.body.read(Instant::ZERO, &mut buf);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            hq_request(&data);
        }

        /// Request lines made of path-like pieces: the resolver's cases.
        #[test]
        fn request_lines(
            fin in any::<bool>(),
            parts in proptest::collection::vec(
                prop_oneof![
                    Just("a.txt"), Just(".."), Just("."), Just("dir"), Just("sub"),
                    Just("out"), Just("in"), Just("%2e%2e"), Just("%2F"), Just("%00"),
                    Just("empty"), Just("b.bin"), Just("index.html"), Just("sp%20ace%2541.txt"),
                    Just("?q=1"), Just("#f"), Just(""), Just("%"), Just("%zz"), Just("%c3%a9"),
                ],
                0..6,
            ),
            end in prop_oneof![Just("\r\n"), Just("\n"), Just(""), Just(" x\r\n")],
        ) {
            let line = format!("GET /{}{end}", parts.join("/"));
            let mut data = vec![u8::from(fin) | 0xfe];
            data.extend_from_slice(line.as_bytes());
            hq_request(&data);
        }
    }

    /// Paths that must stay inside the tree, through the body's checks and
    /// by name.
    #[test]
    fn escapes_are_refused_and_the_tree_is_served() {
        let Some(root) = served_tree() else {
            return; // no writable temporary directory
        };
        let dir = Directory::new(root).unwrap();
        for path in ["/../etc/passwd", "/dir/../../x", "/out/etc/passwd", "/out"] {
            assert!(dir.locate(path).is_err(), "{path} must be refused");
        }
        for path in [
            "/a.txt",
            "/dir/sub/b.bin",
            "/in/index.html",
            "/sp ace%41.txt",
        ] {
            assert!(dir.locate(path).is_ok(), "{path} must be served");
        }
    }

    /// The seeds in `fuzz/corpus/hq_request/` run through the body; those
    /// named `get-*` are complete requests the parser accepts.
    #[test]
    fn seed_corpus_is_valid() {
        for path in seed_files("hq_request") {
            let data = std::fs::read(&path).unwrap();
            hq_request(&data);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if name.starts_with("get-") {
                let parsed = parse_request(&data[1..], data[0] & 1 == 1);
                assert!(matches!(parsed, Some(Ok(_))), "{name}: {parsed:?}");
            }
        }
    }

    /// The committed seed files of fuzz target `target`, sorted (at least
    /// three; a missing corpus fails: it is part of the repository).
    pub(crate) fn seed_files(target: &str) -> Vec<std::path::PathBuf> {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fuzz/corpus")
            .join(target);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| {
                panic!(
                    "the seed corpus {} is part of the repository: {e}",
                    dir.display()
                )
            })
            .map(|e| e.expect("a directory entry").path())
            .filter(|p| p.is_file())
            .collect();
        seeds.sort();
        assert!(seeds.len() >= 3, "too few seeds in {}", dir.display());
        seeds
    }
}
