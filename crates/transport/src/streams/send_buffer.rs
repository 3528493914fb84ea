//! The one place a stream's outgoing bytes live until they are acknowledged.
//!
//! Packets never own stream data: a sent packet records a [`super::StreamChunk`]
//! (offsets), and the bytes are copied from here into each packet that carries
//! them, original or replica. The bytes sit in fixed-size blocks, so that
//! appending never moves what is already buffered (a contiguous ring has to
//! copy everything into a larger allocation each time it grows, which cost
//! the server 7% of its CPU in a bulk download whose buffer kept emptying
//! and refilling) and an acknowledged block is kept for the next append. A
//! stream's first block is sized to its first write, so a stream that only
//! ever carries a few bytes (an HTTP/3 control stream) holds a few bytes;
//! an emptied buffer keeps one block at most (freeing and faulting it in
//! again at each refill showed in the profile as page faults).

use std::collections::VecDeque;
use std::ops::Range;

/// Bytes per block: small beside the send buffer's limits (megabytes), large
/// beside a packet, so that a packet's bytes span at most two blocks.
const BLOCK: usize = 1 << 16;

/// Bytes `base..base + len` of a stream's send side.
#[derive(Clone, Debug, Default)]
pub(crate) struct SendBuffer {
    /// The bytes, in blocks of capacity [`BLOCK`]: every block but the last
    /// is full; `blocks[0][head]` is at stream offset `base`.
    blocks: VecDeque<Vec<u8>>,
    /// Where the first buffered byte sits in the first block.
    head: usize,
    /// Bytes buffered.
    len: u64,
    /// Stream offset of the first buffered byte (everything below was acked).
    base: u64,
    /// A freed block kept for the next append.
    spare: Option<Vec<u8>>,
}

impl SendBuffer {
    /// Stream offset of the first byte still buffered.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Stream offset just past the last byte written.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.len)
    }

    /// Number of bytes buffered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True if nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Appends `bytes` at the end of the stream.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.len += bytes.len() as u64;
        while !bytes.is_empty() {
            let room = self.blocks.back().map_or(0, |b| BLOCK - b.len());
            if room == 0 {
                let capacity = if self.blocks.is_empty() {
                    bytes.len().min(BLOCK)
                } else {
                    BLOCK
                };
                let block = self
                    .spare
                    .take()
                    .unwrap_or_else(|| Vec::with_capacity(capacity));
                self.blocks.push_back(block);
                continue;
            }
            let (now, rest) = bytes.split_at(room.min(bytes.len()));
            if let Some(last) = self.blocks.back_mut() {
                last.extend_from_slice(now);
            }
            bytes = rest;
        }
    }

    /// Forgets every byte below `offset` (they were acknowledged).
    pub fn free_to(&mut self, offset: u64) {
        let n = offset.saturating_sub(self.base).min(self.len());
        if n == 0 {
            return;
        }
        self.base += n;
        self.len -= n;
        if self.len == 0 {
            // Nothing left: keep one full-size block for the next burst.
            let keep = (self.blocks.pop_front())
                .filter(|b| b.capacity() >= BLOCK)
                .or_else(|| self.spare.take());
            self.blocks = VecDeque::new();
            self.spare = keep.map(|mut b| {
                b.clear();
                b
            });
            self.head = 0;
            return;
        }
        // `n` < len <= blocks x BLOCK, so it fits in usize.
        self.head += n as usize;
        while self.head >= BLOCK {
            let Some(mut block) = self.blocks.pop_front() else {
                break;
            };
            self.head -= BLOCK;
            block.clear();
            self.spare = Some(block);
        }
    }

    /// Drops everything (stream reset); later offsets continue from `end`.
    pub fn clear(&mut self) {
        self.base = self.end();
        self.len = 0;
        self.head = 0;
        self.blocks = VecDeque::new();
        self.spare = None;
    }

    /// True when every byte of `range` is buffered.
    pub fn contains(&self, range: &Range<u64>) -> bool {
        range.start >= self.base && range.end <= self.end() && range.start <= range.end
    }

    /// Appends the bytes of `range` to `out`; false, with nothing appended,
    /// unless the whole range is buffered.
    pub fn append_to(&self, range: Range<u64>, out: &mut Vec<u8>) -> bool {
        if !self.contains(&range) {
            return false;
        }
        // Both are at most `len`, which the blocks hold in memory.
        let mut at = self.head + (range.start - self.base) as usize;
        let mut left = (range.end - range.start) as usize;
        out.reserve(left);
        while left > 0 {
            let Some(block) = self.blocks.get(at / BLOCK) else {
                return false;
            };
            let from = at % BLOCK;
            let take = left.min(block.len().saturating_sub(from));
            let Some(bytes) = block.get(from..from + take) else {
                return false;
            };
            if take == 0 {
                return false;
            }
            out.extend_from_slice(bytes);
            at += take;
            left -= take;
        }
        self.prefetch_after(at, (range.end - range.start) as usize);
        true
    }

    /// Asks the CPU to bring the `n` bytes after buffer position `at` into
    /// cache: new data is read in order, one packet after another, and
    /// was written long before (up to the flow-control window ahead), so
    /// the next packet's bytes are otherwise fetched from memory while the
    /// packet waits.
    fn prefetch_after(&self, at: usize, n: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let mut pos = at;
            let end = at.saturating_add(n);
            while pos < end {
                let from = pos % BLOCK;
                let Some(bytes) = (self.blocks.get(pos / BLOCK))
                    .and_then(|block| block.get(from..block.len().min(from + (end - pos))))
                    .filter(|bytes| !bytes.is_empty())
                else {
                    return;
                };
                for line in bytes.chunks(64) {
                    // SAFETY: a prefetch is a hint that neither reads nor
                    // writes memory as far as the program can tell (it
                    // cannot fault), and SSE, which it needs, is in every
                    // x86_64 CPU.
                    unsafe { _mm_prefetch::<_MM_HINT_T0>(line.as_ptr().cast::<i8>()) };
                }
                pos += bytes.len();
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (at, n);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(buf: &SendBuffer, r: Range<u64>) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        buf.append_to(r, &mut out).then_some(out)
    }

    #[test]
    fn bytes_follow_offsets_across_frees() {
        let mut buf = SendBuffer::default();
        let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        buf.push(&bytes[..1000]);
        buf.free_to(900);
        buf.push(&bytes[1000..3000]);
        assert_eq!(buf.base(), 900);
        assert_eq!(buf.end(), 3000);
        for (s, e) in [(900, 3000), (950, 1200), (2999, 3000), (1500, 1500)] {
            assert_eq!(collect(&buf, s..e).unwrap(), &bytes[s as usize..e as usize]);
        }
        assert_eq!(collect(&buf, 899..950), None, "freed bytes are gone");
        assert_eq!(collect(&buf, 2990..3001), None, "unwritten bytes");
    }

    #[test]
    fn free_and_clear_keep_offsets() {
        let mut buf = SendBuffer::default();
        buf.push(b"hello world");
        buf.free_to(6);
        assert_eq!(collect(&buf, 6..11).unwrap(), b"world");
        buf.free_to(3); // below base: no effect
        assert_eq!(buf.len(), 5);
        buf.free_to(100); // past end: clamps
        assert!(buf.is_empty());
        assert_eq!(buf.base(), 11);
        buf.push(b"abc");
        buf.clear();
        assert_eq!((buf.base(), buf.end()), (14, 14));
    }

    #[test]
    fn blocks_follow_offsets_across_frees_and_appends_of_any_size() {
        // A reference model (one Vec) against the blocks, through appends
        // and frees that cross block boundaries, and reads of every shape.
        let mut buf = SendBuffer::default();
        let mut model: Vec<u8> = Vec::new();
        let mut model_base = 0u64;
        let mut x = 12345u64;
        let mut next = |m: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % m
        };
        let mut written = 0u64;
        for round in 0..400 {
            let n = [1, 1200, 70_000, 200_000][next(4) as usize] as u64 / (1 + next(3));
            let bytes: Vec<u8> = (written..written + n).map(|i| (i % 251) as u8).collect();
            written += n;
            buf.push(&bytes);
            model.extend_from_slice(&bytes);
            let end = model_base + model.len() as u64;
            assert_eq!(buf.end(), end, "round {round}");
            for _ in 0..4 {
                let s = model_base + next(model.len() as u64 + 1);
                let e = s + next(end - s + 1);
                let want = &model[(s - model_base) as usize..(e - model_base) as usize];
                assert_eq!(collect(&buf, s..e).as_deref(), Some(want), "{s}..{e}");
            }
            let to = model_base + next(model.len() as u64 + 1);
            buf.free_to(to);
            model.drain(..(to - model_base) as usize);
            model_base = to;
            assert_eq!((buf.base(), buf.len()), (model_base, model.len() as u64));
            if model.is_empty() {
                assert!(buf.blocks.is_empty(), "no block in use");
            }
            let held = buf.spare.iter().chain(&buf.blocks).count();
            assert!(held <= model.len() / BLOCK + 3, "blocks freed");
            assert!(buf.blocks.len() <= model.len() / BLOCK + 2, "blocks freed");
        }
        assert_eq!(
            collect(&buf, model_base.saturating_sub(1)..model_base + 1),
            None
        );
    }

    #[test]
    fn a_stream_of_a_few_bytes_holds_a_few_bytes() {
        let mut buf = SendBuffer::default();
        buf.push(b"settings");
        let held: usize = buf.blocks.iter().map(Vec::capacity).sum();
        assert!(held < 64, "{held} bytes held for 8 buffered");
        buf.free_to(8);
        assert!(buf.blocks.is_empty() && buf.spare.is_none(), "nothing kept");
    }
}
