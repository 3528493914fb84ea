//! Reassembly of a stream's incoming bytes (RFC 9000 §2.2).
//!
//! STREAM frames arrive reordered, duplicated and overlapping. The assembler
//! writes each new byte once, at its place in a ring buffer that starts at the
//! read offset, and tracks what arrived in a [`RangeSet`]. Flow control (the
//! caller's job) guarantees that no frame reaches past `read + window`, so the
//! ring never grows beyond the receive window: the window really is the
//! receiver's buffer. No allocation per frame: the ring grows once to the
//! window's high-water mark and is reused.

use std::collections::VecDeque;

use crate::range_set::RangeSet;

/// Out-of-order receive buffer for one stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assembler {
    /// Bytes from offset `read` on; gaps not yet received hold zeros.
    buf: VecDeque<u8>,
    /// Offset of `buf[0]`: everything below was read by the application.
    read: u64,
    /// Offsets received so far (including those already read).
    received: RangeSet,
}

impl Assembler {
    /// Offset of the next byte the application will read.
    pub fn read_offset(&self) -> u64 {
        self.read
    }

    /// End of the contiguous data received from offset 0.
    pub fn contiguous_end(&self) -> u64 {
        match self.received.peek_min() {
            Some(r) if r.start == 0 => r.end,
            _ => 0,
        }
    }

    /// Bytes readable in order right now.
    pub fn readable(&self) -> u64 {
        self.contiguous_end().saturating_sub(self.read)
    }

    /// Bytes held in memory (including zero-filled holes).
    pub fn buffered(&self) -> u64 {
        self.buf.len() as u64
    }

    /// Stores `data` received at `offset`; bytes already received or already
    /// read are skipped. The caller checked `offset + data.len()` against flow
    /// control, which bounds the memory used. Returns true if any byte was new.
    pub fn insert(&mut self, offset: u64, data: &[u8]) -> bool {
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return false;
        };
        let start = offset.max(self.read);
        if start >= end {
            return false;
        }
        let Self {
            buf,
            read,
            received,
        } = self;
        let mut new = false;
        for gap in received.subtract_from(start..end) {
            // Gaps lie inside `offset..end`, so these fit the slice.
            let (Ok(from), Ok(to), Ok(pos)) = (
                usize::try_from(gap.start - offset),
                usize::try_from(gap.end - offset),
                usize::try_from(gap.start - *read),
            ) else {
                debug_assert!(false, "flow control let a frame past memory");
                return new;
            };
            if let Some(bytes) = data.get(from..to) {
                write_at(buf, pos, bytes);
                new = true;
            }
        }
        received.insert(start..end);
        new
    }

    /// Copies readable bytes into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let n = (self.readable().min(out.len() as u64) as usize).min(self.buf.len());
        if n == 0 {
            return 0;
        }
        let (a, b) = self.buf.as_slices();
        let from_a = n.min(a.len());
        if let (Some(dst), Some(src)) = (out.get_mut(..from_a), a.get(..from_a)) {
            dst.copy_from_slice(src);
        }
        if let (Some(dst), Some(src)) = (out.get_mut(from_a..n), b.get(..n - from_a)) {
            dst.copy_from_slice(src);
        }
        self.buf.drain(..n);
        self.read += n as u64;
        n
    }

    /// Drops all buffered bytes (reset or STOP_SENDING): they will never be
    /// read. Later inserts are still tracked so offsets stay consistent.
    pub fn discard(&mut self) {
        self.buf = VecDeque::new();
        self.read = self
            .received
            .max()
            .map_or(self.read, |m| m + 1)
            .max(self.read);
        self.received.insert(0..self.read);
    }
}

/// Writes `bytes` at ring position `pos`, growing the ring (zero-filling any
/// hole before `pos`) as needed.
fn write_at(buf: &mut VecDeque<u8>, pos: usize, bytes: &[u8]) {
    if pos > buf.len() {
        buf.resize(pos, 0);
    }
    let overlap = (buf.len() - pos).min(bytes.len());
    if overlap > 0 {
        let (a, b) = buf.as_mut_slices();
        let head = bytes.get(..overlap).unwrap_or_default();
        if pos < a.len() {
            let in_a = (a.len() - pos).min(overlap);
            if let (Some(dst), Some(src)) = (a.get_mut(pos..pos + in_a), head.get(..in_a)) {
                dst.copy_from_slice(src);
            }
            if let (Some(dst), Some(src)) = (b.get_mut(..overlap - in_a), head.get(in_a..)) {
                dst.copy_from_slice(src);
            }
        } else if let Some(dst) = b.get_mut(pos - a.len()..pos - a.len() + overlap) {
            dst.copy_from_slice(head);
        }
    }
    if let Some(rest) = bytes.get(overlap..) {
        buf.extend(rest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn read_all(a: &mut Assembler) -> Vec<u8> {
        let mut out = Vec::new();
        let mut tmp = [0u8; 7];
        loop {
            let n = a.read(&mut tmp);
            if n == 0 {
                return out;
            }
            out.extend_from_slice(&tmp[..n]);
        }
    }

    #[test]
    fn in_order_out_of_order_and_duplicates() {
        let mut a = Assembler::default();
        assert!(a.insert(5, b"fghij"));
        assert_eq!(a.readable(), 0);
        assert!(a.insert(0, b"abc"));
        assert_eq!(read_all(&mut a), b"abc");
        assert!(a.insert(2, b"cde")); // overlaps read data and the hole
        assert!(!a.insert(6, b"gh"));
        assert_eq!(read_all(&mut a), b"defghij");
        assert!(!a.insert(0, b"abcdefghij"), "all old");
        assert_eq!(a.buffered(), 0);
    }

    #[test]
    fn wraps_around_the_ring() {
        let mut a = Assembler::default();
        let data: Vec<u8> = (0..200u8).collect();
        a.insert(0, &data[..100]);
        let mut tmp = [0u8; 90];
        assert_eq!(a.read(&mut tmp), 90);
        a.insert(150, &data[150..]);
        a.insert(100, &data[100..150]);
        assert_eq!(read_all(&mut a), &data[90..]);
    }

    #[test]
    fn discard_skips_everything_received() {
        let mut a = Assembler::default();
        a.insert(10, b"xyz");
        a.discard();
        assert_eq!((a.read_offset(), a.buffered(), a.readable()), (13, 0, 0));
        assert!(!a.insert(0, b"old"));
        assert!(a.insert(13, b"new"));
    }

    proptest! {
        /// Any mix of reordered, overlapping and duplicated pieces, read with
        /// reads interleaved, yields exactly the original bytes.
        #[test]
        fn reassembles_exact_bytes(
            len in 1usize..3000,
            pieces in proptest::collection::vec((0usize..3000, 1usize..400), 1..60),
            order in proptest::collection::vec(any::<u32>(), 0..80),
            read_every in 1usize..10,
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + i / 256) as u8).collect();
            // Pieces plus a covering set, so everything arrives eventually.
            let mut frames: Vec<(usize, usize)> = pieces.into_iter()
                .map(|(s, l)| (s % len, (s % len + l).min(len)))
                .collect();
            frames.extend((0..len).step_by(500).map(|s| (s, (s + 500).min(len))));
            // Shuffle deterministically from `order`, then duplicate some.
            for (i, k) in order.iter().enumerate() {
                let n = frames.len();
                frames.swap(i % n, *k as usize % n);
            }
            let dups: Vec<_> = frames.iter().step_by(3).cloned().collect();
            frames.extend(dups);
            let mut a = Assembler::default();
            let mut got = Vec::new();
            for (i, (s, e)) in frames.into_iter().enumerate() {
                a.insert(s as u64, &data[s..e]);
                if i % read_every == 0 {
                    got.extend(read_all(&mut a));
                }
                prop_assert!(a.buffered() <= len as u64);
            }
            got.extend(read_all(&mut a));
            prop_assert_eq!(got, data);
        }
    }
}
