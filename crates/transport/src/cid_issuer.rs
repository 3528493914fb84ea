//! Where every connection ID an endpoint issues comes from, with its
//! stateless reset token, and how a multi-worker driver tells which worker
//! owns a datagram.
//!
//! One [`CidIssuer`] per endpoint, shared (by `Arc`) with its connections:
//! the endpoint's own IDs (a client's, a server's first one), the Source
//! Connection ID of a Retry, the IDs of NEW_CONNECTION_ID frames and the
//! preferred address's ID are all drawn by [`CidIssuer::new_cid`], so the
//! worker shape ([`CidWorkers`]) and the reset-token rule cannot differ
//! between them.
//!
//! Randomness is always the caller's generator (the endpoint's or the
//! connection's), and an issuer without workers and static keys draws
//! exactly what the code before it drew: `len` bytes for an ID, then 16 for
//! its token. Simulated runs therefore do not move.
//!
//! Stateless resets (RFC 9000 §10.3): with [`StaticKeys`] a token is
//! `HMAC-SHA256(reset, cid)[..16]`, computable by any worker or a restarted
//! server, which is what lets an endpoint without state for a connection
//! end it (`stateless_reset`). Without them a token is random and only
//! the connection knows it.

use rand::{Rng, RngCore};
use ring::hmac;
use wire::cid::ConnectionId;
use wire::packet::{self, LongType, ProtectedHeader};

use crate::config::{CidWorkers, StaticKeys};

/// Length of a stateless reset token (RFC 9000 §10.3).
pub const RESET_TOKEN_LEN: usize = 16;

/// Smallest stateless reset: a first byte and 4 more unpredictable bytes
/// (at least 38 unpredictable bits), then the token (RFC 9000 §10.3).
pub const MIN_STATELESS_RESET: usize = 5 + RESET_TOKEN_LEN;

/// Largest stateless reset we send: RFC 9000 §10.3 suggests answering a
/// packet of 43 bytes or fewer with one a byte shorter; larger triggers get
/// this size (small: a reset is an answer to a stranger, never an
/// amplifier).
pub const MAX_STATELESS_RESET: usize = 43;

/// Draws the connection IDs of one endpoint and its connections, and their
/// stateless reset tokens (see the module doc).
#[derive(Clone, Debug)]
pub struct CidIssuer {
    /// Length of every ID issued (1 to 20).
    len: usize,
    /// The worker shape of the IDs, when the server has several workers.
    workers: Option<CidWorkers>,
    /// `StaticKeys::reset` as an HMAC key, when static keys are set.
    reset_key: Option<hmac::Key>,
}

impl CidIssuer {
    /// IDs of `len` bytes (clamped to 1..=20, as endpoints always did),
    /// shaped for `workers`, with reset tokens from `keys` when given.
    pub fn new(len: usize, workers: Option<CidWorkers>, keys: Option<&StaticKeys>) -> Self {
        CidIssuer {
            len: len.clamp(1, ConnectionId::MAX_LEN),
            workers,
            reset_key: keys.map(|k| hmac::Key::new(hmac::HMAC_SHA256, &k.reset)),
        }
    }

    /// Length of the IDs issued.
    pub fn cid_len(&self) -> usize {
        self.len
    }

    /// The worker shape, if any.
    pub fn workers(&self) -> Option<CidWorkers> {
        self.workers
    }

    /// Whether reset tokens come from static keys (and so stateless resets
    /// can be sent).
    pub fn has_static_keys(&self) -> bool {
        self.reset_key.is_some()
    }

    /// A fresh ID: `len` random bytes from `rng`; with more than one
    /// worker, the first byte is then replaced by one drawn uniformly among
    /// the bytes whose remainder modulo `workers` is this worker.
    pub fn new_cid(&self, rng: &mut dyn RngCore) -> ConnectionId {
        self.new_cid_of_len(rng, self.len)
    }

    /// [`CidIssuer::new_cid`] with another length (1 to 20).
    pub(crate) fn new_cid_of_len(&self, rng: &mut dyn RngCore, len: usize) -> ConnectionId {
        let len = len.clamp(1, ConnectionId::MAX_LEN);
        let mut bytes = [0u8; ConnectionId::MAX_LEN];
        rng.fill_bytes(&mut bytes[..len]);
        if let Some(w) = self.workers.filter(|w| w.workers() > 1) {
            bytes[0] = shaped_first_byte(rng, w);
        }
        ConnectionId::new(&bytes[..len]).expect("len is clamped to ConnectionId::MAX_LEN")
    }

    /// The stateless reset token of `cid`: `HMAC-SHA256(reset, cid)[..16]`
    /// with static keys (nothing drawn), else 16 bytes from `rng`.
    pub fn reset_token(&self, rng: &mut dyn RngCore, cid: &ConnectionId) -> [u8; 16] {
        match self.static_reset_token(cid) {
            Some(t) => t,
            None => {
                let mut t = [0u8; RESET_TOKEN_LEN];
                rng.fill_bytes(&mut t);
                t
            }
        }
    }

    /// The token of `cid` under static keys; `None` without them.
    pub fn static_reset_token(&self, cid: &ConnectionId) -> Option<[u8; 16]> {
        let key = self.reset_key.as_ref()?;
        let tag = hmac::sign(key, cid);
        let mut t = [0u8; RESET_TOKEN_LEN];
        t.copy_from_slice(&tag.as_ref()[..RESET_TOKEN_LEN]);
        Some(t)
    }
}

/// A first byte with remainder `w.worker()` modulo `w.workers()`, uniform
/// among the bytes that have it: `r * workers + worker` for `r` uniform in
/// `0..count`, where `count` is how many such bytes there are.
fn shaped_first_byte(rng: &mut dyn RngCore, w: CidWorkers) -> u8 {
    let (worker, workers) = (w.worker(), w.workers());
    // Bytes b in 0..256 with b % workers == worker (worker < workers <= 256).
    let count = (256 - worker).div_ceil(workers);
    let r = rng.gen_range(0..count);
    // r * workers + worker <= 255 by the choice of count.
    u8::try_from(r * workers + worker).unwrap_or(u8::MAX)
}

/// The worker that owns the connection of `datagram`, for a driver running
/// `workers` endpoints behind one port, each configured with
/// [`crate::EndpointConfig::with_workers`] (and IDs of `local_cid_len`
/// bytes): read from the Destination Connection ID of its first packet
/// when that ID is one of ours, that is for a short header or a Handshake
/// long header.
///
/// `None`, and the driver handles the datagram where the kernel delivered
/// it, for:
/// - Initial and 0-RTT packets: their DCID may be the client's own choice.
///   The kernel's SO_REUSEPORT hash of the 4-tuple keeps a client's
///   handshake on one socket, and so on one worker;
/// - Retry and Version Negotiation (never sent to a server), unknown
///   versions, anything unparseable, zero-length IDs;
/// - `workers` outside 2..=256 (one worker owns everything).
///
/// Never panics, whatever the bytes.
pub fn datagram_owner(datagram: &[u8], local_cid_len: usize, workers: usize) -> Option<usize> {
    if !(2..=CidWorkers::MAX_WORKERS).contains(&workers) {
        return None;
    }
    let dcid = match packet::decode_protected(datagram, local_cid_len).ok()? {
        ProtectedHeader::Short { dst_cid, .. } => dst_cid,
        ProtectedHeader::Long {
            ty: LongType::Handshake,
            dst_cid,
            ..
        } => dst_cid,
        _ => return None,
    };
    dcid.first().map(|&b| usize::from(b) % workers)
}

/// The connection ID a client chose for a connection it is opening: the
/// destination ID of `datagram`'s first packet when that is an Initial
/// (`Some((dcid, true))`) or a 0-RTT packet (`Some((dcid, false))`), the
/// packets that name a connection before the server has given it IDs of
/// its own. A multi-worker driver places a new connection on a worker of
/// its choice with it, and sends the client's later Initial and 0-RTT
/// packets, which carry the same ID, after the first.
pub fn opening_cid(datagram: &[u8], local_cid_len: usize) -> Option<(ConnectionId, bool)> {
    match packet::decode_protected(datagram, local_cid_len).ok()? {
        ProtectedHeader::Long {
            ty: LongType::Initial,
            dst_cid,
            ..
        } => Some((dst_cid, true)),
        ProtectedHeader::Long {
            ty: LongType::ZeroRtt,
            dst_cid,
            ..
        } => Some((dst_cid, false)),
        _ => None,
    }
}

/// Whether `a` and `b` are equal, in time that does not depend on where
/// they differ (RFC 9000 §10.3.1: comparing reset tokens must not leak
/// them).
pub(crate) fn constant_time_eq(a: &[u8; 16], b: &[u8; 16]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A stateless reset answering a datagram of `trigger_len` bytes (RFC 9000
/// §10.3): a first byte `0b01xxxxxx` and random bytes from `rng`, so it
/// looks like a short-header packet, then `token`. It is smaller than the
/// trigger (§10.3.3: two endpoints that both lost state cannot loop), at
/// most [`MAX_STATELESS_RESET`] bytes; `None` when that leaves less than
/// [`MIN_STATELESS_RESET`].
pub(crate) fn stateless_reset(
    rng: &mut dyn RngCore,
    token: &[u8; 16],
    trigger_len: usize,
) -> Option<Vec<u8>> {
    let size = trigger_len.checked_sub(1)?.min(MAX_STATELESS_RESET);
    if size < MIN_STATELESS_RESET {
        return None;
    }
    let mut out = vec![0u8; size];
    let (random, tail) = out.split_at_mut(size - RESET_TOKEN_LEN);
    rng.fill_bytes(random);
    // Short header form (0), fixed bit (1), six unpredictable bits.
    random[0] = 0x40 | (random[0] & 0x3f);
    tail.copy_from_slice(token);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngSeed, StackRng};
    use proptest::prelude::{any, prop_assert, proptest};

    fn rng() -> StackRng {
        StackRng::new(RngSeed::Fixed(11))
    }

    /// Without workers or keys, the issuer draws what the endpoint always
    /// drew: `len` bytes for an ID, then 16 for its token.
    #[test]
    fn plain_issuer_draws_as_before() {
        let issuer = CidIssuer::new(8, None, None);
        let mut a = rng();
        let mut b = rng();
        let cid = issuer.new_cid(&mut a);
        let token = issuer.reset_token(&mut a, &cid);
        let mut bytes = [0u8; 8];
        b.fill_bytes(&mut bytes);
        let mut t = [0u8; 16];
        b.fill_bytes(&mut t);
        assert_eq!(&cid[..], &bytes[..]);
        assert_eq!(token, t);
        assert_eq!(a.next_u64(), b.next_u64());
        // A single worker is no shape at all.
        let one = CidIssuer::new(8, Some(CidWorkers::new(0, 1).unwrap()), None);
        let (mut a, mut b) = (rng(), rng());
        assert_eq!(one.new_cid(&mut a), issuer.new_cid(&mut b));
    }

    /// Every first byte of the residue comes up, and no other.
    #[test]
    fn shaped_ids_cover_their_residue_and_only_it() {
        for (worker, workers) in [(0, 3), (2, 3), (0, 2), (5, 7), (255, 256), (0, 256)] {
            let issuer = CidIssuer::new(4, Some(CidWorkers::new(worker, workers).unwrap()), None);
            let mut r = rng();
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..4000 {
                let cid = issuer.new_cid(&mut r);
                assert_eq!(usize::from(cid[0]) % workers, worker);
                seen.insert(cid[0]);
            }
            let all = (0..=255u8)
                .filter(|b| usize::from(*b) % workers == worker)
                .count();
            assert_eq!(seen.len(), all, "{worker}/{workers}");
        }
    }

    #[test]
    fn static_tokens_are_hmac_of_the_cid_and_draw_nothing() {
        let keys = StaticKeys {
            token: [1; 32],
            reset: [2; 32],
        };
        let issuer = CidIssuer::new(8, None, Some(&keys));
        let cid = ConnectionId::new(&[9; 8]).unwrap();
        let key = hmac::Key::new(hmac::HMAC_SHA256, &[2; 32]);
        let want = hmac::sign(&key, &[9; 8]);
        let (mut a, mut b) = (rng(), rng());
        assert_eq!(issuer.reset_token(&mut a, &cid), want.as_ref()[..16]);
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn reset_size_rules() {
        let token = [7u8; 16];
        let mut r = rng();
        assert_eq!(stateless_reset(&mut r, &token, 0), None);
        assert_eq!(stateless_reset(&mut r, &token, 21), None);
        let small = stateless_reset(&mut r, &token, 22).unwrap();
        assert_eq!(small.len(), 21);
        let big = stateless_reset(&mut r, &token, 1350).unwrap();
        assert_eq!(big.len(), MAX_STATELESS_RESET);
        for d in [&small, &big] {
            assert_eq!(d[0] & 0xc0, 0x40);
            assert!(d.ends_with(&token));
        }
        assert!(constant_time_eq(&token, &[7; 16]));
        let mut other = token;
        other[15] = 8;
        assert!(!constant_time_eq(&token, &other));
    }

    #[test]
    fn owner_of_short_and_handshake_packets() {
        let cid = ConnectionId::new(&[7, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        let mut short = Vec::new();
        packet::write_short_header(&mut short, false, false, &cid, 0, 1);
        short.resize(40, 0);
        assert_eq!(datagram_owner(&short, 8, 3), Some(1));
        assert_eq!(datagram_owner(&short, 8, 1), None);
        assert_eq!(datagram_owner(&short, 8, 257), None);
        assert_eq!(datagram_owner(&short, 0, 3), None);
        for (ty, owner) in [
            (LongType::Handshake, Some(1)),
            (LongType::Initial, None),
            (LongType::ZeroRtt, None),
        ] {
            let mut long = Vec::new();
            let layout =
                packet::write_long_header(&mut long, ty, wire::Version::V1, &cid, &cid, &[], 0, 1);
            long.resize(60, 0);
            packet::set_long_length(&mut long, &layout, 60);
            assert_eq!(datagram_owner(&long, 8, 3), owner, "{ty:?}");
        }
    }

    proptest! {
        /// Any bytes: no panic, and an owner is always a valid index.
        #[test]
        fn owner_never_panics(
            d in proptest::collection::vec(any::<u8>(), 0..80),
            len in 0usize..24,
            workers in 0usize..300,
        ) {
            if let Some(w) = datagram_owner(&d, len, workers) {
                prop_assert!(w < workers);
            }
        }
    }
}
