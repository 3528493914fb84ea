//! Reassembly of a stream's incoming bytes (RFC 9000 §2.2).
//!
//! STREAM frames arrive reordered, duplicated and overlapping. The assembler
//! keeps each new byte once, in *pieces* stored by offset, and tracks what
//! arrived in a [`RangeSet`]. Storage is sparse: a frame far ahead of the
//! reader costs its own bytes, not the hole before it (RFC 9000 §21.6: a
//! peer that leaves holes must not make us commit memory for them).
//!
//! Memory of one stream: the bytes held (never more than the receive window,
//! which flow control enforces: the caller's job), at most twice that while a
//! piece grows, plus [`MAX_PIECE`] for the piece being read, one for the
//! piece being filled and one emptied piece kept for the next, plus a
//! bookkeeping cost of about 100 bytes per piece.
//! Data arriving in order is appended to the piece it continues, up to
//! [`MAX_PIECE`] bytes, so pieces multiply only when the peer fragments its
//! data (holes, or bytes filled in from the back); the caller caps the number
//! of pieces per connection ([`Assembler::pieces`]). A piece that continues
//! a full one is given its whole size at once, and the piece being read is
//! freed when read to its end rather than compacted: in-order data is then
//! copied once into the assembler and once out of it (growing by doubling
//! and compacting copied it up to twice more: the reallocations alone were
//! 2.6% of `artq get`'s CPU in a 1 GiB loopback download).

use std::collections::BTreeMap;

use crate::range_set::RangeSet;

/// Largest piece grown by appending in-order data, bytes. Small enough that
/// compacting a partly read piece is a short copy, large enough that a full
/// receive window of in-order data is a few pieces per megabyte.
pub(crate) const MAX_PIECE: usize = 16 * 1024;

/// Out-of-order receive buffer for one stream.
#[derive(Clone, Debug, Default)]
pub(crate) struct Assembler {
    /// Received bytes not yet read, by the stream offset of their first
    /// byte. Disjoint; only the first may start below `read` (its first
    /// `read - offset` bytes were read and await compaction).
    pieces: BTreeMap<u64, Vec<u8>>,
    /// Offset of the next byte the application reads.
    read: u64,
    /// Bytes held at or above `read`.
    held: u64,
    /// Offsets received so far (including those already read).
    received: RangeSet,
    /// The last piece read to its end, emptied, for the next piece stored:
    /// a reader that keeps up (the usual case) empties a piece per packet,
    /// and allocating a new one each time was 1.1% of a simulated bulk
    /// transfer (perf). At most [`MAX_PIECE`] bytes of capacity.
    spare: Option<Vec<u8>>,
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

    /// Bytes held in memory, received and not yet read (holes cost nothing).
    pub fn buffered(&self) -> u64 {
        self.held
    }

    /// Number of pieces the bytes are stored in (each costs bookkeeping).
    pub fn pieces(&self) -> usize {
        self.pieces.len()
    }

    /// Stores `data` received at `offset`; bytes already received or already
    /// read are skipped. The caller checked `offset + data.len()` against flow
    /// control, which bounds the bytes held. Returns true if any byte was new.
    pub fn insert(&mut self, offset: u64, data: &[u8]) -> bool {
        let Some(end) = offset.checked_add(data.len() as u64) else {
            return false;
        };
        let start = offset.max(self.read);
        if start >= end {
            return false;
        }
        let Self {
            pieces,
            held,
            received,
            spare,
            ..
        } = self;
        let mut new = false;
        for gap in received.subtract_from(start..end) {
            // Gaps lie inside `offset..end`, so these fit the slice.
            let (Ok(from), Ok(to)) = (
                usize::try_from(gap.start - offset),
                usize::try_from(gap.end - offset),
            ) else {
                debug_assert!(false, "a gap outside the frame");
                return new;
            };
            if let Some(bytes) = data.get(from..to) {
                store(pieces, spare, gap.start, bytes);
                *held += bytes.len() as u64;
                new = true;
            }
        }
        received.insert(start..end);
        new
    }

    /// Copies readable bytes into `out`; returns how many.
    pub fn read(&mut self, out: &mut [u8]) -> usize {
        let mut n = 0;
        while n < out.len() {
            let Some(mut entry) = self.pieces.first_entry() else {
                break;
            };
            let at = *entry.key();
            if at > self.read {
                break; // a hole at the read offset
            }
            let piece = entry.get_mut();
            let Ok(skip) = usize::try_from(self.read - at) else {
                break;
            };
            let avail = piece.get(skip..).unwrap_or_default();
            let take = avail.len().min(out.len() - n);
            if let (Some(dst), Some(src)) = (out.get_mut(n..n + take), avail.get(..take)) {
                dst.copy_from_slice(src);
            }
            n += take;
            self.read += take as u64;
            self.held -= take as u64;
            // A piece read to its end goes; one read partly stays, its
            // first bytes read (at most MAX_PIECE of them, except for a
            // piece stored whole from a larger frame, compacted below).
            let consumed = skip + take;
            if consumed >= piece.len() {
                let mut emptied = entry.remove();
                if emptied.capacity() <= MAX_PIECE {
                    emptied.clear();
                    self.spare = Some(emptied);
                }
            } else if consumed > MAX_PIECE && consumed * 2 >= piece.len() {
                let mut rest = entry.remove();
                rest.drain(..consumed);
                self.pieces.insert(self.read, rest);
            }
            if take == 0 {
                break;
            }
        }
        n
    }

    /// Drops all buffered bytes (reset or STOP_SENDING): they will never be
    /// read. Later inserts are still tracked so offsets stay consistent.
    pub fn discard(&mut self) {
        self.pieces = BTreeMap::new();
        self.held = 0;
        self.read = self
            .received
            .max()
            .map_or(self.read, |m| m + 1)
            .max(self.read);
        self.received.insert(0..self.read);
    }
}

/// Stores `bytes` received at offset `at` (not held yet): appended to the
/// piece they continue when it has room, else as a piece of their own.
fn store(pieces: &mut BTreeMap<u64, Vec<u8>>, spare: &mut Option<Vec<u8>>, at: u64, bytes: &[u8]) {
    let mut after_full = false;
    if let Some((&start, piece)) = pieces.range_mut(..at).next_back() {
        let continues = start.checked_add(piece.len() as u64) == Some(at);
        after_full = continues && piece.len() >= MAX_PIECE / 2;
        if continues && piece.len() + bytes.len() <= MAX_PIECE {
            let need = piece.len() + bytes.len();
            if need > piece.capacity() {
                // Double, but never past MAX_PIECE: memory stays within
                // twice the bytes held.
                let target = need.max(piece.capacity() * 2).min(MAX_PIECE);
                piece.reserve_exact(target - piece.len());
            }
            piece.extend_from_slice(bytes);
            return;
        }
    }
    // In-order data past a piece at least half full (at least MAX_PIECE / 2
    // bytes held for it): the next piece's whole size at once, which keeps
    // memory within twice the bytes held plus one piece.
    // A new piece: the spare one when there is one (its capacity does not
    // change what the piece holds, only when it reallocates).
    let mut piece = spare.take().unwrap_or_default();
    if after_full && bytes.len() <= MAX_PIECE {
        piece.reserve_exact(MAX_PIECE);
    }
    piece.extend_from_slice(bytes);
    pieces.insert(at, piece);
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
        assert_eq!((a.buffered(), a.pieces()), (0, 0));
    }

    #[test]
    fn a_far_frame_costs_its_bytes_not_the_hole() {
        let mut a = Assembler::default();
        assert!(a.insert((16 << 20) - 1, b"z"));
        assert_eq!((a.buffered(), a.pieces()), (1, 1));
        assert_eq!(a.readable(), 0);
    }

    #[test]
    fn in_order_data_grows_few_pieces_and_partial_reads_compact() {
        let mut a = Assembler::default();
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for (i, chunk) in data.chunks(1000).enumerate() {
            a.insert(i as u64 * 1000, chunk);
        }
        assert_eq!(a.buffered(), 100_000);
        assert!(
            a.pieces() <= 100_000 / (MAX_PIECE - 1000) + 1,
            "{}",
            a.pieces()
        );
        let mut out = vec![0u8; 3];
        let mut got = Vec::new();
        while a.read(&mut out) > 0 {
            got.extend_from_slice(&out);
        }
        got.truncate(100_000);
        assert_eq!(got, data);
        assert_eq!((a.buffered(), a.pieces()), (0, 0));
    }

    #[test]
    fn filling_holes_from_the_back_makes_one_piece_each() {
        let mut a = Assembler::default();
        for i in (0..100u64).rev() {
            a.insert(i, &[i as u8]);
        }
        assert_eq!(a.pieces(), 100);
        assert_eq!(read_all(&mut a), (0..100u8).collect::<Vec<_>>());
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
        /// reads interleaved, yields exactly the original bytes, and the
        /// bytes held are never more than those received and unread.
        #[test]
        fn reassembles_exact_bytes(
            len in 1usize..40_000,
            pieces in proptest::collection::vec((0usize..40_000, 1usize..3000), 1..60),
            order in proptest::collection::vec(any::<u32>(), 0..80),
            read_every in 1usize..10,
            read_len in 1usize..5000,
        ) {
            let data: Vec<u8> = (0..len).map(|i| (i * 31 + i / 256) as u8).collect();
            // Pieces plus a covering set, so everything arrives eventually.
            let mut frames: Vec<(usize, usize)> = pieces.into_iter()
                .map(|(s, l)| (s % len, (s % len + l).min(len)))
                .collect();
            frames.extend((0..len).step_by(1200).map(|s| (s, (s + 1200).min(len))));
            // Shuffle deterministically from `order`, then duplicate some.
            for (i, k) in order.iter().enumerate() {
                let n = frames.len();
                frames.swap(i % n, *k as usize % n);
            }
            let dups: Vec<_> = frames.iter().step_by(3).cloned().collect();
            frames.extend(dups);
            let mut a = Assembler::default();
            let mut got = Vec::new();
            let mut buf = vec![0u8; read_len];
            for (i, (s, e)) in frames.into_iter().enumerate() {
                a.insert(s as u64, &data[s..e]);
                if i % read_every == 0 {
                    loop {
                        let n = a.read(&mut buf);
                        if n == 0 {
                            break;
                        }
                        got.extend_from_slice(&buf[..n]);
                    }
                }
                let unread = a.received.total() - a.read_offset();
                prop_assert_eq!(a.buffered(), unread);
            }
            got.extend(read_all(&mut a));
            prop_assert_eq!(got, data);
            prop_assert_eq!(a.pieces(), 0);
        }
    }
}
