use super::*;
use proptest::prelude::*;

fn cid(hex_str: &str) -> ConnectionId {
    ConnectionId::new(&hex::decode(hex_str).unwrap()).unwrap()
}

/// RFC 9001 Appendix A.2: the client Initial's header, protected first byte
/// and all, padded to 1200 bytes.
#[test]
fn rfc9001_client_initial_header() {
    let mut pkt = hex::decode("c000000001088394c8f03e5157080000449e7b9aec34").unwrap();
    pkt.resize(1200, 0);
    let h = decode_protected(&pkt, 8).unwrap();
    assert_eq!(
        h,
        ProtectedHeader::Long {
            ty: LongType::Initial,
            version: Version::V1,
            dst_cid: cid("8394c8f03e515708"),
            src_cid: ConnectionId::EMPTY,
            token: &[],
            pn_offset: 18,
            len: 18 + 0x049e,
        }
    );
    assert_eq!(h.packet_len(), Some(1200));

    // Our writer produces the unprotected header of the same packet.
    let mut out = Vec::new();
    let layout = write_long_header(
        &mut out,
        LongType::Initial,
        Version::V1,
        &cid("8394c8f03e515708"),
        &ConnectionId::EMPTY,
        &[],
        2,
        4,
    );
    assert_eq!(
        layout,
        LongHeaderLayout {
            len_offset: 16,
            pn_offset: 18
        }
    );
    set_long_length(&mut out, &layout, 1200);
    assert_eq!(
        hex::encode(&out),
        "c300000001088394c8f03e5157080000449e00000002"
    );
}

/// RFC 9001 Appendix A.4: a Retry packet.
#[test]
fn rfc9001_retry() {
    let pkt =
        hex::decode("ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f0f2496ba")
            .unwrap();
    let h = decode_protected(&pkt, 0).unwrap();
    let tag: [u8; 16] = hex::decode("04a265ba2eff4d829058fb3f0f2496ba")
        .unwrap()
        .try_into()
        .unwrap();
    assert_eq!(
        h,
        ProtectedHeader::Retry {
            version: Version::V1,
            dst_cid: ConnectionId::EMPTY,
            src_cid: cid("f067a5502a4262b5"),
            token: b"token",
            integrity_tag: tag,
            len: pkt.len(),
        }
    );
    let mut out = Vec::new();
    write_retry(
        &mut out,
        Version::V1,
        &ConnectionId::EMPTY,
        &cid("f067a5502a4262b5"),
        b"token",
        0xff,
    );
    out.extend_from_slice(&tag);
    assert_eq!(out, pkt);
    let mut pseudo = Vec::new();
    write_retry_pseudo_packet(
        &mut pseudo,
        &cid("8394c8f03e515708"),
        &pkt[..pkt.len() - 16],
    );
    assert_eq!(
        &pseudo[..9],
        &hex::decode("088394c8f03e515708").unwrap()[..]
    );
    assert_eq!(&pseudo[9..], &pkt[..pkt.len() - 16]);
}

#[test]
fn version_negotiation_round_trip() {
    let mut out = Vec::new();
    write_version_negotiation(
        &mut out,
        &cid("0102"),
        &cid("aabbccdd"),
        &[QUIC_V1, 0x1a2a_3a4a],
        0x3f,
    );
    assert_eq!(out[0], 0xff);
    let h = decode_protected(&out, 0).unwrap();
    assert_eq!(
        h,
        ProtectedHeader::VersionNegotiation {
            dst_cid: cid("0102"),
            src_cid: cid("aabbccdd"),
            versions: vec![QUIC_V1, 0x1a2a_3a4a],
        }
    );
    out.push(0);
    assert!(matches!(
        decode_protected(&out, 0),
        Err(DecodeError::InvalidHeader(_))
    ));
}

#[test]
fn unsupported_version_keeps_invariant_fields() {
    let mut pkt = vec![0x80, 0x0a, 0x0a, 0x0a, 0x0a, 2, 1, 2, 1, 9];
    pkt.resize(1200, 0xee); // the rest is opaque
    assert_eq!(
        decode_protected(&pkt, 0),
        Ok(ProtectedHeader::UnsupportedVersion {
            version: 0x0a0a_0a0a,
            dst_cid: cid("0102"),
            src_cid: cid("09"),
        })
    );
}

#[test]
fn header_checks() {
    // Fixed bit clear in a v1 long header and in a short header.
    let mut out = Vec::new();
    let layout = write_long_header(
        &mut out,
        LongType::Handshake,
        Version::V1,
        &cid("01"),
        &cid("02"),
        &[],
        0,
        1,
    );
    out.extend_from_slice(&[0; 20]);
    let end = out.len();
    set_long_length(&mut out, &layout, end);
    assert!(decode_protected(&out, 0).is_ok());
    out[0] &= !FIXED_BIT;
    assert_eq!(
        decode_protected(&out, 0),
        Err(DecodeError::InvalidHeader("fixed bit not set"))
    );
    assert!(decode_protected_with(&out, 0, false).is_ok());
    assert!(matches!(
        decode_protected(&[0x01, 0, 0, 0], 2),
        Err(DecodeError::InvalidHeader(_))
    ));
    assert!(decode_protected_with(&[0x01, 0, 0, 0], 2, false).is_ok());

    // A connection ID longer than 20 bytes in v1.
    let mut pkt = vec![0xc0, 0, 0, 0, 1, 21];
    pkt.extend_from_slice(&[0; 40]);
    assert!(matches!(
        decode_protected(&pkt, 0),
        Err(DecodeError::InvalidHeader(_))
    ));

    // Length beyond the datagram, and a zero Length.
    let hs = |length: u8| vec![0xe0, 0, 0, 0, 1, 0, 0, length, 0xaa, 0xbb];
    assert_eq!(decode_protected(&hs(3), 0), Err(DecodeError::UnexpectedEnd));
    assert!(matches!(
        decode_protected(&hs(2), 0),
        Ok(ProtectedHeader::Long {
            len: 10,
            pn_offset: 8,
            ..
        })
    ));
    assert!(matches!(
        decode_protected(&hs(0), 0),
        Err(DecodeError::InvalidHeader(_))
    ));

    // Short header without a packet number, and a bogus local CID length.
    assert_eq!(
        decode_protected(&[0x40, 1, 2], 2),
        Err(DecodeError::UnexpectedEnd)
    );
    assert!(matches!(
        decode_protected(&[0x40; 40], 21),
        Err(DecodeError::InvalidHeader(_))
    ));
    assert_eq!(decode_protected(&[], 0), Err(DecodeError::UnexpectedEnd));
}

#[test]
fn every_truncation_of_an_initial_is_rejected_cleanly() {
    let mut out = Vec::new();
    let layout = write_long_header(
        &mut out,
        LongType::Initial,
        Version::V1,
        &cid("0102030405060708"),
        &cid("0a0b"),
        b"tok",
        7,
        2,
    );
    out.extend_from_slice(&[0x55; 30]);
    let end = out.len();
    set_long_length(&mut out, &layout, end);
    for cut in 0..out.len() {
        assert_eq!(
            decode_protected(&out[..cut], 0),
            Err(DecodeError::UnexpectedEnd),
            "cut at {cut}"
        );
    }
}

#[test]
fn short_header_bits() {
    let mut out = vec![0xee; 3]; // earlier contents are left alone
    let pn_offset = write_short_header(&mut out, true, true, &cid("a1a2a3a4"), 0x1234_5678, 3);
    assert_eq!(pn_offset, 3 + 5);
    assert_eq!(out[3], FIXED_BIT | SPIN_BIT | KEY_PHASE_BIT | 2);
    assert_eq!(&out[pn_offset..], &[0x34, 0x56, 0x78]);
    out.push(0);
    assert_eq!(
        decode_protected(&out[3..], 4),
        Ok(ProtectedHeader::Short {
            dst_cid: cid("a1a2a3a4"),
            pn_offset: 5,
            len: 9
        })
    );
}

fn arb_cid() -> impl Strategy<Value = ConnectionId> {
    proptest::collection::vec(any::<u8>(), 0..=20).prop_map(|b| ConnectionId::new(&b).unwrap())
}

fn arb_long_type() -> impl Strategy<Value = LongType> {
    prop_oneof![
        Just(LongType::Initial),
        Just(LongType::ZeroRtt),
        Just(LongType::Handshake)
    ]
}

proptest! {
    #[test]
    fn long_headers_round_trip_coalesced(
        packets in proptest::collection::vec(
            (arb_long_type(), arb_cid(), arb_cid(), proptest::collection::vec(any::<u8>(), 0..100),
             0..=MAX_PACKET_NUMBER, 1usize..=4, 0usize..1500),
            1..4),
        trailing in proptest::collection::vec(any::<u8>(), 0..10),
    ) {
        let mut out = Vec::new();
        let mut expected = Vec::new();
        for (ty, dcid, scid, token, pn, pn_len, payload) in &packets {
            let token: &[u8] = if *ty == LongType::Initial { token } else { &[] };
            let start = out.len();
            let layout = write_long_header(&mut out, *ty, Version::V1, dcid, scid, token, *pn, *pn_len);
            out.resize(out.len() + payload, 0x5a);
            let end = out.len();
            set_long_length(&mut out, &layout, end);
            expected.push((start, layout, end));
        }
        out.extend_from_slice(&trailing);
        let mut at = 0;
        for ((ty, dcid, scid, token, pn, pn_len, _), (start, layout, end)) in packets.iter().zip(&expected) {
            prop_assert_eq!(at, *start);
            let h = decode_protected(&out[at..], 0).unwrap();
            let ProtectedHeader::Long { ty: dty, version, dst_cid, src_cid, token: dtok, pn_offset, len } = h else {
                panic!("not a long header: {h:?}");
            };
            prop_assert_eq!(dty, *ty);
            prop_assert_eq!(version, Version::V1);
            prop_assert_eq!(dst_cid, *dcid);
            prop_assert_eq!(src_cid, *scid);
            let want_tok: &[u8] = if *ty == LongType::Initial { token } else { &[] };
            prop_assert_eq!(dtok, want_tok);
            prop_assert_eq!(at + pn_offset, layout.pn_offset);
            prop_assert_eq!(at + len, *end);
            // The packet number bytes and the pn-length bits are what we asked for.
            prop_assert_eq!(usize::from(out[at] & 3) + 1, *pn_len);
            let mut pn_bytes = [0u8; 4];
            pn_bytes[4 - pn_len..].copy_from_slice(&out[at + pn_offset..at + pn_offset + pn_len]);
            prop_assert_eq!(u32::from_be_bytes(pn_bytes), truncate_pn(*pn, *pn_len));
            at += len;
        }
        prop_assert_eq!(&out[at..], &trailing[..]);
    }

    #[test]
    fn short_headers_round_trip(dcid in arb_cid(), spin in any::<bool>(), kp in any::<bool>(),
                                pn in 0..=MAX_PACKET_NUMBER, pn_len in 1usize..=4,
                                payload in proptest::collection::vec(any::<u8>(), 1..50)) {
        let mut out = Vec::new();
        let pn_offset = write_short_header(&mut out, spin, kp, &dcid, pn, pn_len);
        out.extend_from_slice(&payload);
        let h = decode_protected(&out, dcid.len()).unwrap();
        prop_assert_eq!(h, ProtectedHeader::Short { dst_cid: dcid, pn_offset, len: out.len() });
        prop_assert_eq!(out[0] & SPIN_BIT != 0, spin);
        prop_assert_eq!(out[0] & KEY_PHASE_BIT != 0, kp);
    }

    #[test]
    fn decode_protected_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200),
                                     dcid_len in 0usize..25) {
        if let Ok(h) = decode_protected(&data, dcid_len) {
            if let Some(len) = h.packet_len() {
                prop_assert!(len <= data.len());
            }
            if let (Some(pn), Some(len)) = (h.pn_offset(), h.packet_len()) {
                prop_assert!(pn < len);
            }
        }
    }
}

/// RFC 9369 Appendix A.2: the v2 client Initial's unprotected header is
/// what `write_long_header` produces (type bits 0b01), and its protected
/// form decodes as a v2 Initial.
#[test]
fn rfc9369_client_initial_header() {
    let dcid = cid("8394c8f03e515708");
    let mut out = Vec::new();
    let layout = write_long_header(
        &mut out,
        LongType::Initial,
        Version::V2,
        &dcid,
        &ConnectionId::EMPTY,
        &[],
        2,
        4,
    );
    set_long_length(&mut out, &layout, layout.pn_offset + 1182);
    assert_eq!(
        hex::encode(&out),
        "d36b3343cf088394c8f03e5157080000449e00000002"
    );

    let mut pkt = hex::decode("d76b3343cf088394c8f03e5157080000449ea0c95e82").unwrap();
    pkt.resize(1200, 0);
    let h = decode_protected(&pkt, 0).unwrap();
    assert!(matches!(
        h,
        ProtectedHeader::Long {
            ty: LongType::Initial,
            version: Version::V2,
            pn_offset: 18,
            len: 1200,
            ..
        }
    ));
}

/// RFC 9369 Appendix A.3 and A.4: the v2 server Initial (first byte 0xdc)
/// and the v2 Retry (0xcf) decode with the rotated type bits.
#[test]
fn rfc9369_server_initial_and_retry_headers() {
    let mut pkt = hex::decode("dc6b3343cf0008f067a5502a4262b5004075d92faaf16f").unwrap();
    pkt.resize(20 + 0x75, 0);
    let h = decode_protected(&pkt, 0).unwrap();
    assert!(matches!(
        h,
        ProtectedHeader::Long {
            ty: LongType::Initial,
            version: Version::V2,
            pn_offset: 18,
            ..
        }
    ));

    let retry =
        hex::decode("cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665dcc7b6")
            .unwrap();
    let ProtectedHeader::Retry {
        version,
        src_cid,
        token,
        ..
    } = decode_protected(&retry, 0).unwrap()
    else {
        panic!("not a Retry");
    };
    assert_eq!(version, Version::V2);
    assert_eq!(src_cid, cid("f067a5502a4262b5"));
    assert_eq!(token, b"token");
    let mut written = Vec::new();
    write_retry(
        &mut written,
        Version::V2,
        &ConnectionId::EMPTY,
        &src_cid,
        token,
        0x0f,
    );
    assert_eq!(written[..], retry[..retry.len() - 16]);
}
