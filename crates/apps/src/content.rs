//! What a server serves: [`Content`] resolves a request path to a
//! [`Resource`], whose [`Body`] yields bytes as the transport takes them.
//!
//! A body is pulled chunk by chunk, never held whole: a 1 GiB file costs one
//! chunk of memory. A body may also have nothing yet ([`BodyChunk::Wait`]),
//! so a live source can produce bytes in (virtual) real time.
//!
//! Sources here: [`Directory`] (files under a root, with an index page for
//! directories), [`GeneratedFiles`] (the simulator's seeded file bodies,
//! [`FileContent`]) and [`Mounts`], which puts several under one server.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use netem::derive_seed;
use wire::time::Instant;

/// One read from a [`Body`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyChunk {
    /// This many bytes were written to the start of the buffer (at least 1).
    Data(usize),
    /// Nothing now; more at the given time (`None`: when something else
    /// happens).
    Wait(Option<Instant>),
    /// The body is complete.
    End,
}

/// The bytes of a response, pulled as the transport can take them.
pub trait Body {
    /// Fills the start of `buf` (never empty) with the next bytes. An `Err`
    /// aborts the response (the server resets the stream).
    fn read(&mut self, now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String>;
}

/// A resolved request: what to answer with.
pub struct Resource {
    /// `content-type` of the body.
    pub content_type: &'static str,
    /// Body length in bytes, when known in advance (`content-length`).
    pub length: Option<u64>,
    /// The body.
    pub body: Box<dyn Body>,
}

impl core::fmt::Debug for Resource {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Resource")
            .field("content_type", &self.content_type)
            .field("length", &self.length)
            .finish_non_exhaustive()
    }
}

/// Why a path resolves to no resource: an HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// 400: the path cannot be decoded.
    BadPath,
    /// 403: the path leaves the served tree.
    Forbidden,
    /// 404: nothing there.
    NotFound,
}

impl Refusal {
    /// The HTTP status code.
    pub fn status(self) -> u16 {
        match self {
            Refusal::BadPath => 400,
            Refusal::Forbidden => 403,
            Refusal::NotFound => 404,
        }
    }
}

/// A tree of resources a server answers from.
pub trait Content {
    /// The resource at `path` (as requested: it may carry a query, and
    /// percent-encoding), for a GET or HEAD.
    fn resolve(&mut self, now: Instant, path: &str) -> Result<Resource, Refusal>;
}

/// The path part of a request target: without query and fragment,
/// percent-decoded. `None` if the encoding is broken or decodes to a NUL or
/// to something that is not UTF-8.
pub fn decode_path(target: &str) -> Option<String> {
    let path = target.split(['?', '#']).next().unwrap_or("");
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b);
            i += 1;
        }
    }
    if out.contains(&0) {
        return None;
    }
    String::from_utf8(out).ok()
}

/// The `content-type` for a file name, by extension (`application/octet-stream`
/// when unknown).
pub fn content_type(name: &str) -> &'static str {
    let ext = name
        .rsplit_once('.')
        .map(|(_, e)| e.to_ascii_lowercase())
        .unwrap_or_default();
    match ext.as_str() {
        "html" | "htm" => "text/html; charset=utf-8",
        "txt" | "md" | "log" => "text/plain; charset=utf-8",
        "css" => "text/css",
        "js" | "mjs" => "text/javascript",
        "json" => "application/json",
        "xml" => "application/xml",
        "csv" => "text/csv",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "ico" => "image/x-icon",
        "wasm" => "application/wasm",
        "mp4" | "m4v" => "video/mp4",
        "m4s" => "video/iso.segment",
        "m4a" => "audio/mp4",
        "webm" => "video/webm",
        "mpd" => "application/dash+xml",
        "m3u8" => "application/vnd.apple.mpegurl",
        "ts" => "video/mp2t",
        "pdf" => "application/pdf",
        "gz" => "application/gzip",
        "zip" => "application/zip",
        _ => "application/octet-stream",
    }
}

/// A body held in memory (index pages, small generated documents).
#[derive(Clone, Debug)]
pub struct BytesBody {
    bytes: Vec<u8>,
    pos: usize,
}

impl BytesBody {
    /// A body of `bytes`.
    pub fn new(bytes: Vec<u8>) -> BytesBody {
        BytesBody { bytes, pos: 0 }
    }
}

impl Body for BytesBody {
    fn read(&mut self, _now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        let rest = self.bytes.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            return Ok(BodyChunk::End);
        }
        let n = rest.len().min(buf.len());
        if let (Some(dst), Some(src)) = (buf.get_mut(..n), rest.get(..n)) {
            dst.copy_from_slice(src);
        }
        self.pos += n;
        Ok(BodyChunk::Data(n))
    }
}

/// A file read from disk as the transport takes it.
#[derive(Debug)]
pub struct FileBody {
    file: File,
}

impl Body for FileBody {
    fn read(&mut self, _now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        loop {
            match self.file.read(buf) {
                Ok(0) => return Ok(BodyChunk::End),
                Ok(n) => return Ok(BodyChunk::Data(n)),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
}

/// Most entries an index page lists (a larger directory is cut, saying so).
pub const MAX_INDEX_ENTRIES: usize = 10_000;

/// The files under a root directory, as a static web server serves them.
///
/// A path may not leave the root: `..` components are refused and symlinks
/// are followed only to targets inside the root (canonical paths compared).
/// A directory is answered with its `index.html` if it has one, else with
/// a generated index page listing its entries.
#[derive(Clone, Debug)]
pub struct Directory {
    root: PathBuf,
}

impl Directory {
    /// Serves the tree under `root`, which must be a directory.
    pub fn new(root: &Path) -> Result<Directory, String> {
        let root = root
            .canonicalize()
            .map_err(|e| format!("{}: {e}", root.display()))?;
        if !root.is_dir() {
            return Err(format!("{} is not a directory", root.display()));
        }
        Ok(Directory { root })
    }

    /// The root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The canonical file-system path a decoded request path names.
    pub fn locate(&self, path: &str) -> Result<PathBuf, Refusal> {
        let mut out = self.root.clone();
        for c in Path::new(path.trim_start_matches('/')).components() {
            match c {
                Component::Normal(part) => out.push(part),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(Refusal::Forbidden)
                }
            }
        }
        let canon = out.canonicalize().map_err(|_| Refusal::NotFound)?;
        if !canon.starts_with(&self.root) {
            return Err(Refusal::Forbidden);
        }
        Ok(canon)
    }

    fn index_page(&self, dir: &Path, request_path: &str) -> Result<Resource, Refusal> {
        let mut entries: Vec<(String, bool, u64)> = Vec::new();
        let mut cut = false;
        let listing = std::fs::read_dir(dir).map_err(|_| Refusal::NotFound)?;
        for entry in listing.flatten() {
            if entries.len() >= MAX_INDEX_ENTRIES {
                cut = true;
                break;
            }
            let Ok(meta) = entry.metadata() else { continue };
            let name = entry.file_name().to_string_lossy().into_owned();
            entries.push((name, meta.is_dir(), meta.len()));
        }
        entries.sort();
        let base = if request_path.ends_with('/') {
            request_path.to_string()
        } else {
            format!("{request_path}/")
        };
        let title = html_escape(&base);
        let mut page = format!(
            "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>Index of {title}</title></head>\n<body><h1>Index of {title}</h1>\n<ul>\n"
        );
        if base != "/" {
            page.push_str("<li><a href=\"../\">../</a></li>\n");
        }
        for (name, is_dir, len) in &entries {
            let slash = if *is_dir { "/" } else { "" };
            let href = format!("{}{}{slash}", percent_encode(&base), percent_encode(name));
            let size = if *is_dir {
                String::new()
            } else {
                format!(" ({len} bytes)")
            };
            page.push_str(&format!(
                "<li><a href=\"{}\">{}{slash}</a>{size}</li>\n",
                html_escape(&href),
                html_escape(name)
            ));
        }
        page.push_str("</ul>\n");
        if cut {
            page.push_str(&format!(
                "<p>(only the first {MAX_INDEX_ENTRIES} entries are listed)</p>\n"
            ));
        }
        page.push_str("<p>served by artq</p></body></html>\n");
        let bytes = page.into_bytes();
        Ok(Resource {
            content_type: "text/html; charset=utf-8",
            length: Some(bytes.len() as u64),
            body: Box::new(BytesBody::new(bytes)),
        })
    }
}

impl Content for Directory {
    fn resolve(&mut self, _now: Instant, target: &str) -> Result<Resource, Refusal> {
        let path = decode_path(target).ok_or(Refusal::BadPath)?;
        let found = self.locate(&path)?;
        if found.is_dir() {
            let index = found.join("index.html");
            if index.is_file() {
                return open_file(&index);
            }
            return self.index_page(&found, &path);
        }
        if !found.is_file() {
            return Err(Refusal::NotFound);
        }
        open_file(&found)
    }
}

fn open_file(path: &Path) -> Result<Resource, Refusal> {
    let file = File::open(path).map_err(|_| Refusal::NotFound)?;
    let length = file.metadata().ok().map(|m| m.len());
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    Ok(Resource {
        content_type: content_type(name),
        length,
        body: Box::new(FileBody { file }),
    })
}

/// `&`, `<`, `>`, `"` and `'` as HTML entities.
pub fn html_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes everything but unreserved characters and `/`.
pub fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Several content trees under path prefixes, first match wins: how one
/// server serves a directory beside generated content.
#[derive(Default)]
pub struct Mounts {
    mounts: Vec<(String, Box<dyn Content>)>,
}

impl Mounts {
    /// No mounts (every path is 404).
    pub fn new() -> Mounts {
        Mounts::default()
    }

    /// Serves `content` for paths starting with `prefix` (`/` for all);
    /// `content` sees the path without the prefix (always starting with `/`).
    pub fn mount(mut self, prefix: &str, content: Box<dyn Content>) -> Mounts {
        self.mounts
            .push((prefix.trim_end_matches('/').to_string(), content));
        self
    }
}

impl Content for Mounts {
    fn resolve(&mut self, now: Instant, target: &str) -> Result<Resource, Refusal> {
        for (prefix, content) in &mut self.mounts {
            let Some(rest) = target.strip_prefix(prefix.as_str()) else {
                continue;
            };
            if rest.is_empty() {
                return content.resolve(now, "/");
            }
            if rest.starts_with(['/', '?', '#']) {
                return content.resolve(now, rest);
            }
        }
        Err(Refusal::NotFound)
    }
}

/// Bytes generated per refill of [`FileContent`]'s block (a multiple of 8:
/// the generator produces 64-bit words). Small enough to stay in the first
/// level cache: a simulation with many flows holds two generators per file
/// (the server's and the client's check), and the bytes do not depend on
/// the block's size.
const BLOCK: usize = 4 * 1024;

/// The bytes of one generated file: a pseudo-random stream, sequential,
/// generated on demand.
///
/// Exists so a server can send and a client can check files of any size in
/// constant memory. The generator is wyrand (64-bit words, little-endian),
/// seeded per file from a content seed and the file's index, so files differ
/// from each other and from run to run only through the seed. It is not
/// cryptographic and need not be: random-looking bytes only have to make a
/// misplaced, duplicated or dropped chunk visible, and generation runs twice
/// per byte in every simulation (a cipher keystream cost about a tenth of a
/// run's time). The bytes do not depend on how the reads are cut: they are
/// drawn in fixed blocks.
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
    ///
    /// Whole blocks are generated straight into `buf` (a server reads its
    /// body in chunks of many blocks); only a head that finishes the
    /// current block and a tail shorter than a block go through it. The
    /// stream of words does not depend on where blocks begin, so the bytes
    /// are the same either way.
    pub fn fill(&mut self, buf: &mut [u8]) -> usize {
        let n = usize::try_from(self.remaining).map_or(buf.len(), |r| r.min(buf.len()));
        let (buf, _) = buf.split_at_mut(n);
        // What is left of the current block; then, the block used up,
        // whole blocks in place; then a tail shorter than a block.
        let head = n.min(self.block.len().saturating_sub(self.pos));
        let (head, rest) = buf.split_at_mut(head);
        self.copy_out(head);
        let (whole, tail) = rest.split_at_mut(rest.len() - rest.len() % BLOCK);
        self.state = generate(self.state, whole);
        self.remaining -= whole.len() as u64;
        self.copy_out(tail);
        n
    }

    /// Copies the next `dst.len()` bytes (at most what is left) through the
    /// block into `dst`.
    fn copy_out(&mut self, dst: &mut [u8]) {
        let copied: Result<(), core::convert::Infallible> = self.walk(dst.len(), |at, run| {
            if let Some(d) = dst.get_mut(at..at + run.len()) {
                d.copy_from_slice(run);
            }
            Ok(())
        });
        let Ok(()) = copied;
    }

    /// Checks that `got` is the next `got.len()` bytes of the file, and
    /// moves past them: `Ok` when it is, `Err(Some(i))` at the first byte
    /// `i` that differs, `Err(None)` when the file ends first (then nothing
    /// is consumed). What [`FileContent::fill`] then a comparison would
    /// say, without writing the expected bytes out (a client checks every
    /// byte it receives).
    pub fn verify(&mut self, got: &[u8]) -> Result<(), Option<usize>> {
        if (got.len() as u64) > self.remaining {
            return Err(None);
        }
        self.walk(got.len(), |at, want| {
            let have = got.get(at..at + want.len()).unwrap_or_default();
            // Slice equality is one memcmp; the byte-by-byte search, which
            // the compiler does not vectorise, only runs to name a mismatch.
            if want == have {
                return Ok(());
            }
            match want.iter().zip(have).position(|(a, b)| a != b) {
                None if have.len() == want.len() => Ok(()),
                first => Err(Some(at + first.unwrap_or(0))),
            }
        })
    }

    /// Moves past the next `n` bytes (at most what is left), handing them
    /// to `each` run by run as the block holds them, with each run's offset
    /// among the `n`: what [`FileContent::fill`] copies out and
    /// [`FileContent::verify`] compares. An `Err` from `each` stops the walk
    /// before that run and is returned.
    fn walk<E>(
        &mut self,
        n: usize,
        mut each: impl FnMut(usize, &[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let mut done = 0;
        while done < n {
            if self.pos >= self.block.len() {
                self.refill();
            }
            let take = (n - done).min(self.block.len() - self.pos);
            each(
                done,
                self.block
                    .get(self.pos..self.pos + take)
                    .unwrap_or_default(),
            )?;
            self.pos += take;
            self.remaining -= take as u64;
            done += take;
        }
        Ok(())
    }

    /// The next block of the stream ([`generate`]).
    fn refill(&mut self) {
        self.state = generate(self.state, &mut self.block);
        self.pos = 0;
    }
}

/// Writes the next words of the stream whose state is `state` into `out`
/// (whole words: its length is a multiple of 8) and returns the state after
/// them: wyrand (Wang Yi's 64-bit generator: add a constant, fold a 128-bit
/// product), four words per turn. Each word depends only on the state after
/// its own addition, so the four products are independent; written one word
/// per turn, the compiler vectorised the additions and moved every word
/// between vector and scalar registers (12-13 instructions a word against
/// about 6 here).
fn generate(mut state: u64, out: &mut [u8]) -> u64 {
    let mut quads = out.chunks_exact_mut(32);
    for quad in &mut quads {
        for (k, word) in quad.chunks_exact_mut(8).enumerate() {
            let s = state.wrapping_add(WYRAND_ADD.wrapping_mul(k as u64 + 1));
            word.copy_from_slice(&wyrand_mix(s).to_le_bytes());
        }
        state = state.wrapping_add(WYRAND_ADD.wrapping_mul(4));
    }
    for word in quads.into_remainder().chunks_exact_mut(8) {
        state = state.wrapping_add(WYRAND_ADD);
        word.copy_from_slice(&wyrand_mix(state).to_le_bytes());
    }
    state
}

/// wyrand's state increment.
const WYRAND_ADD: u64 = 0xa076_1d64_78bd_642f;

/// wyrand's output for the state `s` (after its increment): the two halves
/// of `s * (s ^ constant)` folded by xor.
#[inline(always)]
fn wyrand_mix(s: u64) -> u64 {
    let t = u128::from(s).wrapping_mul(u128::from(s ^ 0xe703_7ed1_a0b4_28db));
    ((t >> 64) as u64) ^ (t as u64)
}

impl Body for FileContent {
    fn read(&mut self, _now: Instant, buf: &mut [u8]) -> Result<BodyChunk, String> {
        match self.fill(buf) {
            0 => Ok(BodyChunk::End),
            n => Ok(BodyChunk::Data(n)),
        }
    }
}

/// `files` generated files of `size` bytes each at paths `/0`, `/1`, ...:
/// what the simulated server serves for the file workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GeneratedFiles {
    /// Content seed (see [`FileContent`]).
    pub seed: u64,
    /// Number of files.
    pub files: u64,
    /// Size of each, bytes.
    pub size: u64,
}

impl GeneratedFiles {
    /// The path of file `index`.
    pub fn path(index: u64) -> String {
        format!("/{index}")
    }
}

impl Content for GeneratedFiles {
    fn resolve(&mut self, _now: Instant, target: &str) -> Result<Resource, Refusal> {
        let index: u64 = target
            .strip_prefix('/')
            .and_then(|n| n.parse().ok())
            .ok_or(Refusal::NotFound)?;
        if index >= self.files {
            return Err(Refusal::NotFound);
        }
        Ok(Resource {
            content_type: "application/octet-stream",
            length: Some(self.size),
            body: Box::new(FileContent::new(self.seed, index, self.size)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn body_bytes(mut r: Resource) -> Vec<u8> {
        let mut out = Vec::new();
        let mut buf = [0u8; 100];
        loop {
            match r.body.read(Instant::ZERO, &mut buf).expect("readable") {
                BodyChunk::Data(n) => out.extend_from_slice(&buf[..n]),
                BodyChunk::End => return out,
                BodyChunk::Wait(_) => panic!("a static body never waits"),
            }
        }
    }

    #[test]
    fn decodes_paths() {
        assert_eq!(decode_path("/a%20b?x=1#f").as_deref(), Some("/a b"));
        assert_eq!(decode_path("/%41").as_deref(), Some("/A"));
        assert_eq!(decode_path("/%4"), None);
        assert_eq!(decode_path("/%zz"), None);
        assert_eq!(decode_path("/%00"), None);
        assert_eq!(decode_path("/%ff"), None);
    }

    #[test]
    fn types_by_extension() {
        assert_eq!(content_type("a.HTML"), "text/html; charset=utf-8");
        assert_eq!(content_type("x.bin"), "application/octet-stream");
        assert_eq!(content_type("noext"), "application/octet-stream");
        assert_eq!(content_type("v.mpd"), "application/dash+xml");
    }

    #[test]
    fn directory_confines_paths_and_lists() {
        let dir = std::env::temp_dir().join(format!("artq-content-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).expect("mkdir");
        std::fs::write(dir.join("sub/f.txt"), b"hello").expect("write");
        std::fs::write(dir.join("a <b>.bin"), b"x").expect("write");
        let mut d = Directory::new(&dir).expect("a directory");
        let r = d.resolve(Instant::ZERO, "/sub/f.txt").expect("found");
        assert_eq!(r.length, Some(5));
        assert_eq!(r.content_type, "text/plain; charset=utf-8");
        assert_eq!(body_bytes(r), b"hello");
        assert!(d.resolve(Instant::ZERO, "sub/./f.txt?q=1").is_ok());
        let refusal = |d: &mut Directory, p: &str| d.resolve(Instant::ZERO, p).err();
        assert_eq!(refusal(&mut d, "/../etc/passwd"), Some(Refusal::Forbidden));
        assert_eq!(refusal(&mut d, "/sub/../../x"), Some(Refusal::Forbidden));
        assert_eq!(refusal(&mut d, "/%2e%2e/x"), Some(Refusal::Forbidden));
        assert_eq!(refusal(&mut d, "/missing"), Some(Refusal::NotFound));
        assert_eq!(refusal(&mut d, "/%zz"), Some(Refusal::BadPath));
        let page = String::from_utf8(body_bytes(d.resolve(Instant::ZERO, "/").expect("index")))
            .expect("utf-8");
        assert!(page.contains("href=\"/sub/\""), "{page}");
        assert!(page.contains("a &lt;b&gt;.bin"), "{page}");
        assert!(page.contains("href=\"/a%20%3Cb%3E.bin\""), "{page}");
        std::fs::write(dir.join("sub/index.html"), b"<p>mine</p>").expect("write");
        let own = body_bytes(d.resolve(Instant::ZERO, "/sub").expect("index.html"));
        assert_eq!(own, b"<p>mine</p>");
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn mounts_route_by_prefix() {
        let files = GeneratedFiles {
            seed: 1,
            files: 2,
            size: 10,
        };
        let mut m = Mounts::new().mount("/gen", Box::new(files));
        assert_eq!(
            m.resolve(Instant::ZERO, "/gen/1").map(|r| r.length).ok(),
            Some(Some(10))
        );
        assert_eq!(
            m.resolve(Instant::ZERO, "/gen/2").err(),
            Some(Refusal::NotFound)
        );
        assert_eq!(
            m.resolve(Instant::ZERO, "/general").err(),
            Some(Refusal::NotFound)
        );
        assert_eq!(
            m.resolve(Instant::ZERO, "/x").err(),
            Some(Refusal::NotFound)
        );
    }

    /// The generator's blocks are wyrand words in order, as the
    /// one-word-at-a-time definition gives them (the unrolled refill must
    /// not change a byte), across several blocks and a short last one.
    #[test]
    fn content_is_wyrand_words_in_order() {
        let seed = 11;
        let size = 3 * BLOCK as u64 + 21;
        let mut got = vec![0; size as usize];
        assert_eq!(FileContent::new(seed, 7, size).fill(&mut got), got.len());
        let mut state = derive_seed(
            seed.wrapping_add(7u64.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            "file",
        );
        let mut want = Vec::new();
        while want.len() < got.len() {
            state = state.wrapping_add(0xa076_1d64_78bd_642f);
            let t = u128::from(state).wrapping_mul(u128::from(state ^ 0xe703_7ed1_a0b4_28db));
            want.extend_from_slice(&(((t >> 64) as u64) ^ (t as u64)).to_le_bytes());
        }
        want.truncate(got.len());
        assert_eq!(got, want);
    }

    #[test]
    fn generated_files_are_the_file_contents() {
        let mut g = GeneratedFiles {
            seed: 5,
            files: 3,
            size: 1000,
        };
        let got = body_bytes(g.resolve(Instant::ZERO, "/2").expect("file 2"));
        let mut want = vec![0u8; 1000];
        assert_eq!(FileContent::new(5, 2, 1000).fill(&mut want), 1000);
        assert_eq!(got, want);
        assert!(g.resolve(Instant::ZERO, "/x").is_err());
    }

    #[test]
    fn verify_agrees_with_fill() {
        let mut bytes = vec![0; 10_000];
        assert_eq!(FileContent::new(3, 1, 10_000).fill(&mut bytes), 10_000);
        let mut check = FileContent::new(3, 1, 10_000);
        assert_eq!(check.verify(&bytes[..4100]), Ok(()));
        assert_eq!(check.verify(&bytes[4100..4100]), Ok(()));
        let mut wrong = bytes[4100..9000].to_vec();
        wrong[4500] ^= 1;
        assert_eq!(check.clone().verify(&wrong), Err(Some(4500)));
        assert_eq!(check.verify(&bytes[4100..]), Ok(()));
        assert_eq!(check.remaining(), 0);
        assert_eq!(check.verify(&[0]), Err(None), "past the end");
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
        fn chunking_does_not_change_content(size in 0u64..30_000, cuts in proptest::collection::vec(prop_oneof![1usize..700, 1usize..12_000], 1..20)) {
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

        /// Path decoding never panics.
        #[test]
        fn decode_path_never_panics(s in ".{0,60}") {
            let _ = decode_path(&s);
        }
    }
}
