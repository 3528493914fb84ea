//! The one place a stream's outgoing bytes live until they are acknowledged.
//!
//! Packets never own stream data: a sent packet records a [`super::StreamChunk`]
//! (offsets), and the bytes are copied from here into each packet that carries
//! them, original or replica. The buffer is a ring ([`VecDeque`]) so that
//! appending at the back and freeing the acknowledged prefix at the front are
//! both plain memory copies or pointer moves, with no per-chunk allocation.

use std::collections::VecDeque;
use std::ops::Range;

/// Bytes `base..base + len` of a stream's send side.
#[derive(Clone, Debug, Default)]
pub(crate) struct SendBuffer {
    /// The bytes; `data[0]` is at stream offset `base`.
    data: VecDeque<u8>,
    /// Stream offset of the first buffered byte (everything below was acked).
    base: u64,
}

impl SendBuffer {
    /// Stream offset of the first byte still buffered.
    pub fn base(&self) -> u64 {
        self.base
    }

    /// Stream offset just past the last byte written.
    pub fn end(&self) -> u64 {
        self.base.saturating_add(self.data.len() as u64)
    }

    /// Number of bytes buffered.
    pub fn len(&self) -> u64 {
        self.data.len() as u64
    }

    /// True if nothing is buffered.
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Appends `bytes` at the end of the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        // `Extend<&u8>` on a VecDeque of `Copy` items is a memcpy, not a byte loop.
        self.data.extend(bytes);
    }

    /// Forgets every byte below `offset` (they were acknowledged).
    pub fn free_to(&mut self, offset: u64) {
        let n = offset.saturating_sub(self.base).min(self.len());
        if n == 0 {
            return;
        }
        // Draining a prefix only moves the ring's head (nothing after it moves).
        self.data.drain(..n as usize);
        self.base += n;
        if self.data.is_empty() && self.data.capacity() > (1 << 20) {
            // A finished burst should not pin megabytes for an idle stream.
            self.data = VecDeque::new();
        }
    }

    /// Drops everything (stream reset); later offsets continue from `end`.
    pub fn clear(&mut self) {
        self.base = self.end();
        self.data = VecDeque::new();
    }

    /// The bytes of `range` as at most two slices (the ring may wrap), or
    /// `None` unless the whole range is buffered.
    pub fn slices(&self, range: Range<u64>) -> Option<(&[u8], &[u8])> {
        if range.start < self.base || range.end > self.end() || range.start > range.end {
            return None;
        }
        // Both fit in usize: they are at most `data.len()`.
        let start = (range.start - self.base) as usize;
        let end = (range.end - self.base) as usize;
        let (a, b) = self.data.as_slices();
        if end <= a.len() {
            Some((a.get(start..end)?, &[]))
        } else if start >= a.len() {
            Some((b.get(start - a.len()..end - a.len())?, &[]))
        } else {
            Some((a.get(start..)?, b.get(..end - a.len())?))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(buf: &SendBuffer, r: Range<u64>) -> Option<Vec<u8>> {
        buf.slices(r).map(|(a, b)| [a, b].concat())
    }

    #[test]
    fn slices_follow_offsets_across_wraparound() {
        let mut buf = SendBuffer::default();
        let bytes: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        buf.push(&bytes[..1000]);
        buf.free_to(900);
        buf.push(&bytes[1000..3000]); // wraps inside the ring
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
}
