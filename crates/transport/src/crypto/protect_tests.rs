//! Tests of packet protection: RFC 9001 Appendix A.2–A.5 byte for byte, bad
//! input, and round-trip / tamper properties.

use super::*;
use crate::crypto::keys::{initial_keys, Keys};
use crate::crypto::test_vectors::*;
use proptest::prelude::*;
use rustls::crypto::cipher::{AeadKey, Iv};
use wire::{Side, Version};

/// The client Initial of A.2 before protection: header, 1162-byte payload
/// (CRYPTO frame then PADDING), 16 spare bytes for the tag.
fn a2_plaintext() -> (Vec<u8>, Vec<u8>) {
    let mut payload = unhex(CLIENT_INITIAL_CRYPTO_FRAME);
    payload.resize(CLIENT_INITIAL_PAYLOAD_LEN, 0); // PADDING frames are zero bytes
    let mut packet = unhex(CLIENT_INITIAL_HEADER);
    packet.extend_from_slice(&payload);
    packet.extend_from_slice(&[0; TAG_LEN]);
    (packet, payload)
}

/// RFC 9001 A.2: sealing the client Initial gives the RFC's protected packet,
/// and the server's keys reverse it.
#[test]
fn a2_client_initial() {
    let dcid = unhex(CLIENT_DCID);
    let client = initial_keys(&dcid, Side::Client, Version::V1);
    let (mut packet, payload) = a2_plaintext();
    assert_eq!(packet.len(), 1200);
    seal(&client.local, &mut packet, 18, 4, 2).expect("seal");
    assert_eq!(packet[22..38], unhex(CLIENT_INITIAL_SAMPLE)[..], "sample");
    assert_eq!(hex::encode(&packet), CLIENT_INITIAL_PROTECTED);

    let server = initial_keys(&dcid, Side::Server, Version::V1);
    let (first, pn_len, pn) =
        remove_header_protection(server.remote.header.as_ref(), &mut packet, 18)
            .expect("unprotect");
    assert_eq!((first, pn_len, pn), (0xc3, 4, 2));
    assert_eq!(packet[..22], unhex(CLIENT_INITIAL_HEADER)[..]);
    let range = open(server.remote.packet.as_ref(), &mut packet, 22, 2).expect("open");
    assert_eq!(range, 22..22 + CLIENT_INITIAL_PAYLOAD_LEN);
    assert_eq!(packet[range], payload[..]);
}

/// RFC 9001 A.3: the server Initial (2-byte packet number) likewise.
#[test]
fn a3_server_initial() {
    let dcid = unhex(CLIENT_DCID);
    let server = initial_keys(&dcid, Side::Server, Version::V1);
    let payload = unhex(SERVER_INITIAL_PAYLOAD);
    let mut packet = unhex(SERVER_INITIAL_HEADER);
    let header_len = packet.len();
    assert_eq!(header_len, 20);
    packet.extend_from_slice(&payload);
    packet.extend_from_slice(&[0; TAG_LEN]);
    seal(&server.local, &mut packet, 18, 2, 1).expect("seal");
    assert_eq!(hex::encode(&packet), SERVER_INITIAL_PROTECTED);

    let client = initial_keys(&dcid, Side::Client, Version::V1);
    let (first, pn_len, pn) =
        remove_header_protection(client.remote.header.as_ref(), &mut packet, 18)
            .expect("unprotect");
    assert_eq!((first, pn_len, pn), (0xc1, 2, 1));
    let range = open(client.remote.packet.as_ref(), &mut packet, header_len, 1).expect("open");
    assert_eq!(packet[range], payload[..]);
}

/// RFC 9001 A.4 and §5.8: the Retry integrity tag, its fixed key and nonce.
#[test]
fn a4_retry_integrity() {
    let secret = unhex(RETRY_SECRET);
    assert_eq!(
        expand_label(&secret, "quic key", 16),
        Version::V1.retry_key()
    );
    assert_eq!(
        expand_label(&secret, "quic iv", 12),
        Version::V1.retry_nonce()
    );

    let odcid = unhex(RETRY_ODCID);
    let retry = unhex(RETRY_PACKET);
    let (body, tag) = retry.split_at(retry.len() - TAG_LEN);
    assert_eq!(
        retry_integrity_tag(Version::V1, &odcid, body).expect("tag")[..],
        tag[..]
    );
    assert!(verify_retry_integrity(Version::V1, &odcid, &retry));

    let mut other_cid = odcid.clone();
    other_cid[0] ^= 1;
    assert!(
        !verify_retry_integrity(Version::V1, &other_cid, &retry),
        "bound to the ODCID"
    );
    for i in 0..retry.len() {
        let mut bad = retry.clone();
        bad[i] ^= 0x40;
        assert!(
            !verify_retry_integrity(Version::V1, &odcid, &bad),
            "flip at byte {i} accepted"
        );
    }
    assert!(
        !verify_retry_integrity(Version::V1, &odcid, &retry[..TAG_LEN - 1]),
        "shorter than a tag"
    );
    assert!(matches!(
        retry_integrity_tag(Version::V1, &[0; 21], body),
        Err(CryptoError::ConnectionIdTooLong(21))
    ));
    assert!(!verify_retry_integrity(Version::V1, &[0; 21], &retry));
}

/// RFC 9001 A.5: a ChaCha20-Poly1305 short header packet. rustls cannot turn
/// a raw secret into keys, so the key schedule runs on the ring HKDF of the
/// tests, and the keys themselves are rustls's (ring provider's ChaCha20
/// `quic::Algorithm`), built from the derived key, IV and hp key.
#[test]
fn a5_chacha20_short_header() {
    let secret = unhex(CHACHA_SECRET);
    let key = expand_label(&secret, "quic key", 32);
    let iv = expand_label(&secret, "quic iv", 12);
    let hp = expand_label(&secret, "quic hp", 32);
    assert_eq!(key, unhex(CHACHA_KEY));
    assert_eq!(iv, unhex(CHACHA_IV));
    assert_eq!(hp, unhex(CHACHA_HP));
    assert_eq!(expand_label(&secret, "quic ku", 32), unhex(CHACHA_KU));
    // RFC 9001 §5.3: nonce = IV xor the packet number, left-padded.
    let mut nonce = iv.clone();
    for (n, p) in nonce[4..].iter_mut().zip(CHACHA_PN.to_be_bytes()) {
        *n ^= p;
    }
    assert_eq!(nonce, unhex(CHACHA_NONCE));

    let alg = rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256
        .tls13()
        .and_then(|s| s.quic)
        .expect("ChaCha20 suite supports QUIC");
    let as_key = |b: &[u8]| AeadKey::from(<[u8; 32]>::try_from(b).expect("32 bytes"));
    let keys = DirectionalKeys {
        header: alg.header_protection_key(as_key(&hp)),
        packet: alg.packet_key(as_key(&key), Iv::copy(&iv)),
    };

    let mut packet = unhex(CHACHA_HEADER);
    packet.extend_from_slice(&unhex(CHACHA_PLAINTEXT));
    packet.extend_from_slice(&[0; TAG_LEN]);
    assert_eq!(packet.len(), 21, "smallest packet with a sample");
    seal(&keys, &mut packet, 1, 3, CHACHA_PN).expect("seal");
    assert_eq!(packet[4..], unhex(CHACHA_CIPHERTEXT)[..]);
    assert_eq!(
        packet[5..],
        unhex(CHACHA_SAMPLE)[..],
        "one byte skipped before the sample"
    );
    assert_eq!(hex::encode(&packet), CHACHA_PACKET);
    let mask = unhex(CHACHA_MASK);
    assert_eq!(
        packet[0] ^ 0x42,
        mask[0] & 0x1f,
        "short header: 5 bits masked"
    );

    let (first, pn_len, truncated) =
        remove_header_protection(keys.header.as_ref(), &mut packet, 1).expect("unprotect");
    assert_eq!((first, pn_len, truncated), (0x42, 3, 0x00bff4));
    let range = open(keys.packet.as_ref(), &mut packet, 4, CHACHA_PN).expect("open");
    assert_eq!(packet[range], unhex(CHACHA_PLAINTEXT)[..]);
}

/// A sealed short-header packet for the bad-input tests.
fn sealed_packet(keys: &Keys, payload_len: usize) -> Vec<u8> {
    let mut packet = vec![0x41, 1, 2, 3, 4, 0x12, 0x34];
    packet.extend((0..payload_len).map(|i| i as u8));
    packet.extend_from_slice(&[0; TAG_LEN]);
    seal(&keys.local, &mut packet, 5, 2, 0x1234).expect("seal");
    packet
}

#[test]
fn open_rejects_tampered_packets() {
    let (client, server) = (
        initial_keys(b"cid", Side::Client, Version::V1),
        initial_keys(b"cid", Side::Server, Version::V1),
    );
    let packet = sealed_packet(&client, 40);
    let header_len = 7;

    let mut good = packet.clone();
    let (_, pn_len, pn) =
        remove_header_protection(server.remote.header.as_ref(), &mut good, 5).expect("unprotect");
    assert_eq!((pn_len, pn), (2, 0x1234));
    let unprotected = good.clone();
    assert_eq!(
        open(server.remote.packet.as_ref(), &mut good, header_len, 0x1234).expect("open"),
        7..47
    );

    for (what, i) in [
        ("payload", 20),
        ("tag", unprotected.len() - 1),
        ("header", 2),
    ] {
        let mut bad = unprotected.clone();
        bad[i] ^= 1;
        let err = open(server.remote.packet.as_ref(), &mut bad, header_len, 0x1234);
        assert!(
            matches!(err, Err(CryptoError::DecryptFailed)),
            "{what}: {err:?}"
        );
    }
    let err = open(
        server.remote.packet.as_ref(),
        &mut unprotected.clone(),
        header_len,
        0x1235,
    );
    assert!(
        matches!(err, Err(CryptoError::DecryptFailed)),
        "wrong packet number"
    );
    let err = open(
        client.remote.packet.as_ref(),
        &mut unprotected.clone(),
        header_len,
        0x1234,
    );
    assert!(matches!(err, Err(CryptoError::DecryptFailed)), "wrong keys");
}

#[test]
fn short_packets_are_errors_not_panics() {
    let keys = initial_keys(b"cid", Side::Server, Version::V1);
    for len in 0..(5 + 4 + SAMPLE_LEN) {
        let mut packet = vec![0x40; len];
        let err = remove_header_protection(keys.remote.header.as_ref(), &mut packet, 5);
        assert!(
            matches!(err, Err(CryptoError::PacketTooShort { .. })),
            "len {len}: {err:?}"
        );
        assert!(packet.iter().all(|&b| b == 0x40), "unchanged on error");
    }
    let mut packet = vec![0x40; 64];
    assert!(matches!(
        remove_header_protection(keys.remote.header.as_ref(), &mut packet, 0),
        Err(CryptoError::InvalidPacketNumberOffset)
    ));
    assert!(matches!(
        remove_header_protection(keys.remote.header.as_ref(), &mut packet, usize::MAX),
        Err(CryptoError::PacketTooShort { .. })
    ));
    for (header_len, len) in [(10, 25), (30, 20), (usize::MAX, 20)] {
        let mut packet = vec![0; len];
        let err = open(keys.remote.packet.as_ref(), &mut packet, header_len, 0);
        assert!(
            matches!(err, Err(CryptoError::PacketTooShort { .. })),
            "{header_len}/{len}: {err:?}"
        );
    }
}

#[test]
fn seal_rejects_bad_packet_number_fields() {
    let keys = initial_keys(b"cid", Side::Client, Version::V1);
    let mut packet = vec![0x40; 64];
    for pn_len in [0, 5] {
        let err = seal(&keys.local, &mut packet, 5, pn_len, 1);
        assert!(matches!(err, Err(CryptoError::InvalidPacketNumberLength(n)) if n == pn_len));
    }
    assert!(matches!(
        seal(&keys.local, &mut packet, 0, 1, 1),
        Err(CryptoError::InvalidPacketNumberOffset)
    ));
    assert!(packet.iter().all(|&b| b == 0x40), "unchanged on error");
}

/// A packet without room for the sample is the caller's bug: caught by a
/// debug assertion in tests...
#[cfg(debug_assertions)]
#[test]
#[should_panic(expected = "too short for the header protection sample")]
fn seal_without_room_for_the_sample_asserts() {
    let keys = initial_keys(b"cid", Side::Client, Version::V1);
    let mut packet = vec![0x40; 5 + 4 + SAMPLE_LEN - 1];
    let _ = seal(&keys.local, &mut packet, 5, 1, 1);
}

/// ...and an error, the packet untouched, in release builds.
#[cfg(not(debug_assertions))]
#[test]
fn seal_without_room_for_the_sample_errors() {
    let keys = initial_keys(b"cid", Side::Client, Version::V1);
    let mut packet = vec![0x40; 5 + 4 + SAMPLE_LEN - 1];
    assert!(matches!(
        seal(&keys.local, &mut packet, 5, 1, 1),
        Err(CryptoError::PacketTooShort { .. })
    ));
    assert!(packet.iter().all(|&b| b == 0x40));
}

/// Bits header protection may change in the first byte (RFC 9001 §5.4.1).
fn masked_bits(first: u8) -> u8 {
    if first & 0x80 != 0 {
        0x0f // long header: reserved bits and packet number length
    } else {
        0x1f // short header: also the key phase
    }
}

/// A random packet: first byte, bytes up to the packet number, packet number
/// length and value, payload long enough for the sample.
fn arb_packet() -> impl Strategy<Value = (u8, Vec<u8>, usize, u64, Vec<u8>)> {
    (any::<u8>(), 0usize..40, 1usize..=4, any::<u64>()).prop_flat_map(
        |(first, rest_len, pn_len, pn)| {
            (
                Just(first),
                proptest::collection::vec(any::<u8>(), rest_len),
                Just(pn_len),
                Just(pn),
                // pn_len + payload >= 4 so that the sample fits behind the tag space.
                proptest::collection::vec(any::<u8>(), (MAX_PACKET_NUMBER_LEN - pn_len)..200),
            )
        },
    )
}

/// Build the plaintext packet: first byte with the pn length in its low bits.
fn build(first: u8, rest: &[u8], pn_len: usize, pn: u64, payload: &[u8]) -> (Vec<u8>, usize) {
    let first = (first & !0x03) | (pn_len as u8 - 1);
    let mut packet = vec![first];
    packet.extend_from_slice(rest);
    packet.extend_from_slice(&pn.to_be_bytes()[8 - pn_len..]);
    packet.extend_from_slice(payload);
    packet.extend_from_slice(&[0; TAG_LEN]);
    (packet, 1 + rest.len())
}

proptest! {
    /// seal then remove_header_protection then open gives back every byte.
    #[test]
    fn seal_open_round_trip((first, rest, pn_len, pn, payload) in arb_packet()) {
        let (client, server) = (initial_keys(b"prop", Side::Client, Version::V1), initial_keys(b"prop", Side::Server, Version::V1));
        let (plain, pn_offset) = build(first, &rest, pn_len, pn, &payload);
        let mut packet = plain.clone();
        seal(&client.local, &mut packet, pn_offset, pn_len, pn).expect("seal");
        prop_assert_eq!(packet[0] & !masked_bits(plain[0]), plain[0] & !masked_bits(plain[0]));
        prop_assert_eq!(&packet[1..pn_offset], &plain[1..pn_offset]);

        let (first_out, pn_len_out, truncated) =
            remove_header_protection(server.remote.header.as_ref(), &mut packet, pn_offset).expect("unprotect");
        prop_assert_eq!(first_out, plain[0]);
        prop_assert_eq!(pn_len_out, pn_len);
        let pn_mask = if pn_len == 4 { u64::from(u32::MAX) } else { (1u64 << (8 * pn_len)) - 1 };
        prop_assert_eq!(u64::from(truncated), pn & pn_mask);
        let header_len = pn_offset + pn_len;
        prop_assert_eq!(&packet[..header_len], &plain[..header_len]);
        let range = open(server.remote.packet.as_ref(), &mut packet, header_len, pn).expect("open");
        prop_assert_eq!(&packet[range], &payload[..]);
    }

    /// Any single flipped bit of a protected packet makes it fail somewhere:
    /// everything, first byte and packet number included, is authenticated.
    #[test]
    fn any_bit_flip_is_rejected((first, rest, pn_len, pn, payload) in arb_packet(), at in any::<prop::sample::Index>(), bit in 0u8..8) {
        let (client, server) = (initial_keys(b"prop", Side::Client, Version::V1), initial_keys(b"prop", Side::Server, Version::V1));
        let (mut packet, pn_offset) = build(first, &rest, pn_len, pn, &payload);
        seal(&client.local, &mut packet, pn_offset, pn_len, pn).expect("seal");
        let i = at.index(packet.len());
        packet[i] ^= 1 << bit;
        let opened = remove_header_protection(server.remote.header.as_ref(), &mut packet, pn_offset)
            .and_then(|(_, len, truncated)| {
                // Expand as a receiver would if it expected exactly `pn`.
                let bits = 8 * len as u32;
                let full = (pn >> bits << bits) | u64::from(truncated);
                open(server.remote.packet.as_ref(), &mut packet, pn_offset + len, full)
            });
        prop_assert!(opened.is_err(), "flip of bit {} at byte {} accepted", bit, i);
    }

    /// Arbitrary bytes and offsets never panic.
    #[test]
    fn garbage_never_panics(mut bytes in proptest::collection::vec(any::<u8>(), 0..120), pn_offset in 0usize..130, header_len in 0usize..130, pn in any::<u64>()) {
        let keys = initial_keys(b"prop", Side::Server, Version::V1);
        let _ = remove_header_protection(keys.remote.header.as_ref(), &mut bytes, pn_offset);
        let _ = open(keys.remote.packet.as_ref(), &mut bytes, header_len, pn);
        let _ = verify_retry_integrity(Version::V1, &bytes[..bytes.len().min(20)], &bytes);
    }
}
