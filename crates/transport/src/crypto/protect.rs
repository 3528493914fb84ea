//! Packet protection applied in place on one QUIC packet's bytes
//! (RFC 9001 §5): payload AEAD, header protection, Retry integrity.
//!
//! This is the per-packet hot path: nothing here allocates (the Retry
//! functions excepted, which run once per connection at most). The functions
//! take byte offsets the caller already knows from building or parsing the
//! header; they parse nothing themselves, so they cannot disagree with the
//! packet codec.
//!
//! Packet layout used throughout (RFC 9000 §17):
//!
//! ```text
//! 0          pn_offset        pn_offset+pn_len = header_len      len-TAG_LEN   len
//! | flags ... | packet number |            payload             |   AEAD tag   |
//!                              <--- sample at pn_offset+4, SAMPLE_LEN bytes --->
//! ```
//!
//! A packet here is one QUIC packet: the caller splits coalesced packets in a
//! datagram (using each long header's Length field) before calling [`open`].

use core::ops::Range;

use ring::aead;
use wire::Version;

use super::keys::{DirectionalKeys, HeaderProtectionKey, PacketKey};
use super::CryptoError;

/// AEAD tag length of every QUIC v1 cipher suite (RFC 9001 §5.3: AES-GCM and
/// ChaCha20-Poly1305 both have 16-byte tags).
pub const TAG_LEN: usize = 16;

/// Header protection sample length of every QUIC v1 cipher suite
/// (RFC 9001 §5.4.2).
pub const SAMPLE_LEN: usize = 16;

/// The longest packet number encoding (RFC 9000 §17.1). The header protection
/// sample always starts this far past the packet number's start, whatever the
/// actual length (RFC 9001 §5.4.2).
pub const MAX_PACKET_NUMBER_LEN: usize = 4;

/// RFC 9000 §17.2: QUIC v1 connection IDs are at most 20 bytes.
const MAX_CID_LEN: usize = 20;

/// The AEAD tag length of `key`; always [`TAG_LEN`] for QUIC v1 suites.
pub fn tag_len(key: &dyn PacketKey) -> usize {
    key.tag_len()
}

/// Protect one packet in place: encrypt the payload, write the AEAD tag, then
/// apply header protection (RFC 9001 §5.3, §5.4).
///
/// `packet` holds the whole plaintext packet (header with the truncated packet
/// number written in clear at `pn_offset..pn_offset + pn_len`, then the
/// payload) *followed by* [`tag_len`] spare bytes the caller reserved for the
/// tag. `pn` is the full packet number, which forms the nonce.
///
/// The caller must make the packet long enough for the header protection
/// sample: `pn_offset + 4 + 16 <= packet.len()` (RFC 9001 §5.4.2; pad the
/// payload of small packets). Violating it is a bug in the caller: it trips a
/// debug assertion, and in release builds returns
/// [`CryptoError::PacketTooShort`] with the packet unchanged.
pub fn seal(
    keys: &DirectionalKeys,
    packet: &mut [u8],
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
) -> Result<(), CryptoError> {
    seal_parts(
        keys.header.as_ref(),
        keys.packet.as_ref(),
        packet,
        pn_offset,
        pn_len,
        pn,
    )
}

/// [`seal`] with the header protection key and the packet key given
/// separately: after a key update (RFC 9001 §6) the packet key changes while
/// the header protection key stays the one of the first 1-RTT keys.
pub fn seal_parts(
    header_key: &dyn HeaderProtectionKey,
    packet_key: &dyn PacketKey,
    packet: &mut [u8],
    pn_offset: usize,
    pn_len: usize,
    pn: u64,
) -> Result<(), CryptoError> {
    check_pn_fields(pn_offset, pn_len)?;
    let len = packet.len();
    let sample_len = header_key.sample_len();
    let sample_end = sample_range(pn_offset, sample_len)?.end;
    debug_assert!(
        sample_end <= len,
        "packet of {len} bytes too short for the header protection sample ending at {sample_end}; \
         the caller must pad it (RFC 9001 §5.4.2)"
    );
    if sample_end > len {
        return Err(CryptoError::PacketTooShort {
            len,
            needed: sample_end,
            what: "the header protection sample",
        });
    }
    // `header_len` <= `sample_end` <= `len`: no overflow.
    let header_len = pn_offset + pn_len;
    let tag_len = packet_key.tag_len();
    let needed = header_len.saturating_add(tag_len);
    if needed > len {
        return Err(CryptoError::PacketTooShort {
            len,
            needed,
            what: "the header and the AEAD tag",
        });
    }

    // RFC 9001 §5.3: the header, packet number included, is the AAD.
    let (header, rest) = packet.split_at_mut(header_len);
    let (payload, tag_space) = rest.split_at_mut(rest.len() - tag_len);
    let tag = packet_key
        .encrypt_in_place(pn, header, payload)
        .map_err(|_| CryptoError::EncryptFailed)?;
    let tag = tag.as_ref();
    if tag.len() != tag_space.len() {
        return Err(CryptoError::EncryptFailed);
    }
    tag_space.copy_from_slice(tag);

    // RFC 9001 §5.4.1: mask the first byte and the packet number with a mask
    // computed from the ciphertext sample.
    let (first, pn_bytes, sample) = split_for_header_protection(packet, pn_offset, sample_len)?;
    let pn_bytes = pn_bytes
        .get_mut(..pn_len)
        .ok_or_else(|| CryptoError::HeaderProtectionFailed)?;
    header_key
        .encrypt_in_place(sample, first, pn_bytes)
        .map_err(|_| CryptoError::HeaderProtectionFailed)
}

/// Remove header protection in place (RFC 9001 §5.4.1) from a received packet
/// whose packet number starts at `pn_offset` (known from the unprotected part
/// of the header). Returns the unprotected first byte, the packet number
/// length it encodes and the truncated packet number, which the caller
/// expands (RFC 9000 §A.3) before calling [`open`].
///
/// Only the first byte and the packet number bytes change. A packet too short
/// to hold the sample is an error, not a panic: `packet` is untrusted.
pub fn remove_header_protection(
    header_key: &dyn HeaderProtectionKey,
    packet: &mut [u8],
    pn_offset: usize,
) -> Result<(u8, usize, u32), CryptoError> {
    if pn_offset == 0 {
        return Err(CryptoError::InvalidPacketNumberOffset);
    }
    let sample_len = header_key.sample_len();
    let sample_end = sample_range(pn_offset, sample_len)?.end;
    if sample_end > packet.len() {
        return Err(CryptoError::PacketTooShort {
            len: packet.len(),
            needed: sample_end,
            what: "the header protection sample",
        });
    }
    let (first, pn_bytes, sample) = split_for_header_protection(packet, pn_offset, sample_len)?;
    // All four candidate bytes are passed; only the `pn_len` decoded from the
    // unmasked first byte are unmasked, the rest stay ciphertext.
    header_key
        .decrypt_in_place(sample, first, pn_bytes)
        .map_err(|_| CryptoError::HeaderProtectionFailed)?;
    let first = *first;
    let pn_len = usize::from(first & 0x03) + 1;
    let truncated = pn_bytes
        .iter()
        .take(pn_len)
        .fold(0u32, |acc, &b| (acc << 8) | u32::from(b));
    Ok((first, pn_len, truncated))
}

/// Decrypt and authenticate a packet's payload in place (RFC 9001 §5.3), after
/// [`remove_header_protection`]. `packet[..header_len]` is the unprotected
/// header (the AAD), `packet[header_len..]` the ciphertext and tag; `pn` is
/// the full, decoded packet number. Returns where the plaintext payload now
/// lies within `packet`.
///
/// Any mismatch (tampering, wrong keys, wrong packet number) is
/// [`CryptoError::DecryptFailed`]; the packet must then be dropped (RFC 9001
/// §5.5). After a failure the payload bytes are unspecified, so a second
/// `open` of the same buffer with other keys cannot work: pick one key per
/// packet (from the Key Phase bit and packet number, RFC 9001 §6.3), or copy
/// the packet first.
pub fn open(
    key: &dyn PacketKey,
    packet: &mut [u8],
    header_len: usize,
    pn: u64,
) -> Result<Range<usize>, CryptoError> {
    let needed = header_len.saturating_add(key.tag_len());
    if needed > packet.len() {
        return Err(CryptoError::PacketTooShort {
            len: packet.len(),
            needed,
            what: "the header and the AEAD tag",
        });
    }
    let (header, payload) = packet.split_at_mut(header_len);
    let plaintext_len = key
        .decrypt_in_place(pn, header, payload)
        .map_err(|_| CryptoError::DecryptFailed)?
        .len();
    // plaintext_len <= payload.len(), so the end is within `packet`.
    Ok(header_len..header_len + plaintext_len)
}

/// The Retry Integrity Tag (RFC 9001 §5.8) of a Retry packet: AES-128-GCM
/// with `version`'s fixed key and nonce (RFC 9369 §3.3.3 for v2) over the
/// Retry Pseudo-Packet, i.e.
/// the Original Destination Connection ID (with its length) followed by the
/// Retry packet up to, not including, its tag.
///
/// `original_dst_cid` longer than 20 bytes is refused (RFC 9000 §17.2).
pub fn retry_integrity_tag(
    version: Version,
    original_dst_cid: &[u8],
    retry_without_tag: &[u8],
) -> Result<[u8; TAG_LEN], CryptoError> {
    let pseudo = retry_pseudo_packet(original_dst_cid, retry_without_tag)?;
    let tag = retry_key(version)
        .seal_in_place_separate_tag(retry_nonce(version), aead::Aad::from(&pseudo), &mut [])
        .map_err(|_| CryptoError::EncryptFailed)?;
    <[u8; TAG_LEN]>::try_from(tag.as_ref()).map_err(|_| CryptoError::EncryptFailed)
}

/// Whether a received Retry packet (tag included, as the last 16 bytes)
/// carries a valid integrity tag for the connection ID the client first sent
/// (RFC 9001 §5.8; RFC 9000 §17.2.5.2: discard it otherwise). The comparison
/// is ring's AEAD verification, so it takes the same time whatever the tag.
pub fn verify_retry_integrity(
    version: Version,
    original_dst_cid: &[u8],
    retry_packet: &[u8],
) -> bool {
    let Some(body_len) = retry_packet.len().checked_sub(TAG_LEN) else {
        return false;
    };
    let (body, tag) = retry_packet.split_at(body_len);
    let Ok(pseudo) = retry_pseudo_packet(original_dst_cid, body) else {
        return false;
    };
    // An empty plaintext: the "ciphertext" is the tag alone.
    let mut in_out = [0u8; TAG_LEN];
    in_out.copy_from_slice(tag);
    retry_key(version)
        .open_in_place(retry_nonce(version), aead::Aad::from(&pseudo), &mut in_out)
        .is_ok()
}

/// RFC 9001 §5.8, Figure 8: ODCID Length, ODCID, then the Retry packet
/// without its tag.
fn retry_pseudo_packet(odcid: &[u8], retry_without_tag: &[u8]) -> Result<Vec<u8>, CryptoError> {
    if odcid.len() > MAX_CID_LEN {
        return Err(CryptoError::ConnectionIdTooLong(odcid.len()));
    }
    let odcid_len =
        u8::try_from(odcid.len()).map_err(|_| CryptoError::ConnectionIdTooLong(odcid.len()))?;
    let mut pseudo = Vec::with_capacity(1 + odcid.len() + retry_without_tag.len());
    pseudo.push(odcid_len);
    pseudo.extend_from_slice(odcid);
    pseudo.extend_from_slice(retry_without_tag);
    Ok(pseudo)
}

fn retry_key(version: Version) -> aead::LessSafeKey {
    aead::LessSafeKey::new(
        aead::UnboundKey::new(&aead::AES_128_GCM, version.retry_key())
            .expect("a Retry key is 16 bytes, the AES-128-GCM key length"),
    )
}

fn retry_nonce(version: Version) -> aead::Nonce {
    // The fixed nonce is the protocol's choice (RFC 9001 §5.8): the tag only
    // proves the sender saw the Initial, it protects no secret.
    aead::Nonce::assume_unique_for_key(*version.retry_nonce())
}

/// Validate locally chosen packet number fields.
fn check_pn_fields(pn_offset: usize, pn_len: usize) -> Result<(), CryptoError> {
    if !(1..=MAX_PACKET_NUMBER_LEN).contains(&pn_len) {
        return Err(CryptoError::InvalidPacketNumberLength(pn_len));
    }
    if pn_offset == 0 {
        return Err(CryptoError::InvalidPacketNumberOffset);
    }
    Ok(())
}

/// Where the header protection sample lies (RFC 9001 §5.4.2).
fn sample_range(pn_offset: usize, sample_len: usize) -> Result<Range<usize>, CryptoError> {
    let start = pn_offset.checked_add(MAX_PACKET_NUMBER_LEN);
    match start.and_then(|s| s.checked_add(sample_len).map(|e| s..e)) {
        Some(range) => Ok(range),
        None => Err(CryptoError::PacketTooShort {
            len: 0,
            needed: usize::MAX,
            what: "the header protection sample",
        }),
    }
}

/// Borrow, all at once, the first byte (mutable), the four bytes a packet
/// number may occupy (mutable) and the sample (shared). The caller has checked
/// `pn_offset >= 1` and that the sample fits; a failed check still yields an
/// error rather than a panic.
fn split_for_header_protection(
    packet: &mut [u8],
    pn_offset: usize,
    sample_len: usize,
) -> Result<(&mut u8, &mut [u8], &[u8]), CryptoError> {
    let range = sample_range(pn_offset, sample_len)?;
    // Errors are built only when returned (`ok_or_else`): built eagerly,
    // each was dropped on every packet, about 0.4% of a simulated bulk
    // transfer's instructions (the drop glue of a large enum).
    let len = packet.len();
    if range.end > len || pn_offset == 0 {
        return Err(CryptoError::PacketTooShort {
            len,
            needed: range.end,
            what: "the header protection sample",
        });
    }
    let (head, tail) = packet.split_at_mut(range.start);
    let sample = tail
        .get(..sample_len)
        .ok_or_else(|| CryptoError::HeaderProtectionFailed)?;
    let (first, after_first) = head
        .split_first_mut()
        .ok_or_else(|| CryptoError::HeaderProtectionFailed)?;
    let pn_bytes = after_first
        .get_mut(pn_offset - 1..)
        .ok_or_else(|| CryptoError::HeaderProtectionFailed)?;
    Ok((first, pn_bytes, sample))
}

#[cfg(test)]
#[path = "protect_tests.rs"]
mod tests;
