use super::*;
use proptest::prelude::*;

fn cid(b: &[u8]) -> ConnectionId {
    ConnectionId::new(b).unwrap()
}

fn param(out: &mut Vec<u8>, id: u64, value: &[u8]) {
    out.put_varint(id);
    out.put_varint(value.len() as u64);
    out.put_slice(value);
}

fn varint_bytes(v: u64) -> Vec<u8> {
    let mut out = Vec::new();
    out.put_varint(v);
    out
}

#[test]
fn defaults_encode_to_nothing_but_iscid() {
    let mut out = Vec::new();
    TransportParameters::default().encode(&mut out);
    assert!(out.is_empty());
    assert_eq!(
        TransportParameters::decode(&[], Side::Server),
        Ok(TransportParameters::default())
    );

    let p = TransportParameters {
        initial_source_connection_id: Some(ConnectionId::EMPTY),
        ..Default::default()
    };
    p.encode(&mut out);
    assert_eq!(out, [0x0f, 0x00]);
    assert_eq!(TransportParameters::decode(&out, Side::Client), Ok(p));
}

#[test]
fn known_encoding() {
    let p = TransportParameters {
        max_idle_timeout_ms: 30_000,
        initial_max_data: 1 << 20,
        initial_source_connection_id: Some(cid(&[1, 2, 3, 4])),
        max_datagram_frame_size: Some(1200),
        ..Default::default()
    };
    let mut out = Vec::new();
    p.encode(&mut out);
    assert_eq!(
        hex::encode(&out),
        "0104800075300404801000000f0401020304200244b0"
    );
}

#[test]
fn unknown_and_reserved_ids_are_ignored() {
    let mut out = Vec::new();
    param(&mut out, 27, b"grease");
    param(&mut out, 31 * 1000 + 27, &[]);
    param(&mut out, 0x7fff, &[1, 2, 3]);
    param(&mut out, 27, b"twice is fine for unknown ids");
    param(&mut out, param_id::INITIAL_MAX_DATA, &varint_bytes(100));
    let p = TransportParameters::decode(&out, Side::Client).unwrap();
    assert_eq!(p.initial_max_data, 100);
    assert!(param_id::is_reserved(27) && param_id::is_reserved(58) && !param_id::is_reserved(28));
}

#[test]
fn duplicates_are_rejected() {
    let mut out = Vec::new();
    param(&mut out, param_id::INITIAL_MAX_DATA, &varint_bytes(1));
    param(&mut out, param_id::INITIAL_MAX_DATA, &varint_bytes(1));
    let err = TransportParameters::decode(&out, Side::Server).unwrap_err();
    assert_eq!(
        err.error_code(),
        crate::TransportErrorCode::TRANSPORT_PARAMETER_ERROR
    );
}

#[test]
fn server_only_parameters_from_a_client() {
    let cases: [(u64, Vec<u8>); 4] = [
        (param_id::ORIGINAL_DESTINATION_CONNECTION_ID, vec![1, 2]),
        (param_id::STATELESS_RESET_TOKEN, vec![7; 16]),
        (param_id::RETRY_SOURCE_CONNECTION_ID, vec![3]),
        (param_id::PREFERRED_ADDRESS, {
            let mut a = vec![0; 24];
            a.push(4);
            a.extend_from_slice(&[9; 4 + 16]);
            a
        }),
    ];
    for (id, value) in cases {
        let mut out = Vec::new();
        param(&mut out, id, &value);
        assert!(
            TransportParameters::decode(&out, Side::Server).is_ok(),
            "id {id}"
        );
        assert!(
            matches!(
                TransportParameters::decode(&out, Side::Client),
                Err(DecodeError::InvalidTransportParameter(_))
            ),
            "id {id}"
        );
    }
}

#[test]
fn range_and_shape_checks() {
    let bad: Vec<(u64, Vec<u8>)> = vec![
        (param_id::MAX_UDP_PAYLOAD_SIZE, varint_bytes(1199)),
        (param_id::ACK_DELAY_EXPONENT, varint_bytes(21)),
        (param_id::MAX_ACK_DELAY, varint_bytes(1 << 14)),
        (param_id::ACTIVE_CONNECTION_ID_LIMIT, varint_bytes(1)),
        (
            param_id::INITIAL_MAX_STREAMS_BIDI,
            varint_bytes((1 << 60) + 1),
        ),
        (
            param_id::INITIAL_MAX_STREAMS_UNI,
            varint_bytes((1 << 60) + 1),
        ),
        (param_id::INITIAL_MAX_DATA, vec![0x40]), // truncated varint
        (param_id::INITIAL_MAX_DATA, vec![0x01, 0x02]), // trailing byte
        (param_id::STATELESS_RESET_TOKEN, vec![0; 15]),
        (param_id::DISABLE_ACTIVE_MIGRATION, vec![0]),
        (param_id::GREASE_QUIC_BIT, vec![0]),
        (param_id::INITIAL_SOURCE_CONNECTION_ID, vec![0; 21]),
        (param_id::PREFERRED_ADDRESS, vec![0; 41]), // zero-length CID
        (param_id::PREFERRED_ADDRESS, vec![0; 20]), // too short
    ];
    for (id, value) in bad {
        let mut out = Vec::new();
        param(&mut out, id, &value);
        let res = TransportParameters::decode(&out, Side::Server);
        assert!(
            matches!(res, Err(DecodeError::InvalidTransportParameter(_))),
            "id {id} {value:?}: {res:?}"
        );
    }
    let ok: Vec<(u64, Vec<u8>)> = vec![
        (param_id::MAX_UDP_PAYLOAD_SIZE, varint_bytes(1200)),
        (param_id::ACK_DELAY_EXPONENT, varint_bytes(20)),
        (param_id::MAX_ACK_DELAY, varint_bytes((1 << 14) - 1)),
        (param_id::INITIAL_MAX_STREAMS_BIDI, varint_bytes(1 << 60)),
        (param_id::INITIAL_MAX_DATA, vec![0x40, 0x05]), // non-minimal is fine
    ];
    for (id, value) in ok {
        let mut out = Vec::new();
        param(&mut out, id, &value);
        assert!(
            TransportParameters::decode(&out, Side::Server).is_ok(),
            "id {id}"
        );
    }
}

#[test]
fn truncated_extension() {
    let p = TransportParameters {
        initial_max_data: 1 << 20,
        initial_source_connection_id: Some(cid(&[5; 8])),
        ..Default::default()
    };
    let mut out = Vec::new();
    p.encode(&mut out);
    // Two parameters: initial_max_data (6 bytes) then the 10-byte CID.
    assert_eq!(out.len(), 16);
    for cut in (1..out.len()).filter(|&c| c != 6) {
        let res = TransportParameters::decode(&out[..cut], Side::Server);
        assert!(
            matches!(res, Err(DecodeError::InvalidTransportParameter(_))),
            "cut {cut}: {res:?}"
        );
    }
}

#[test]
fn helpers() {
    let p = TransportParameters::default();
    assert_eq!(p.max_idle_timeout(), None);
    assert_eq!(p.max_ack_delay(), Duration::from_millis(25));
    let p = TransportParameters {
        max_idle_timeout_ms: 10,
        ..p
    };
    assert_eq!(p.max_idle_timeout(), Some(Duration::from_millis(10)));
}

fn arb_cid() -> impl Strategy<Value = ConnectionId> {
    proptest::collection::vec(any::<u8>(), 0..=20).prop_map(|b| ConnectionId::new(&b).unwrap())
}

fn arb_varint() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..100, 0u64..(1 << 62)]
}

fn arb_preferred_address() -> impl Strategy<Value = Vec<u8>> {
    (
        proptest::collection::vec(any::<u8>(), 24),
        proptest::collection::vec(any::<u8>(), 1..=20),
        any::<[u8; 16]>(),
    )
        .prop_map(|(addrs, cid, token)| {
            let mut v = addrs;
            v.push(cid.len() as u8);
            v.extend_from_slice(&cid);
            v.extend_from_slice(&token);
            v
        })
}

/// A valid version_information: non-zero versions, and from a client a
/// Chosen Version among the Available ones.
fn arb_version_information(server: bool) -> impl Strategy<Value = VersionInformation> {
    (
        1u32..,
        proptest::collection::vec(1u32.., 0..=MAX_AVAILABLE_VERSIONS - 1),
        any::<prop::sample::Index>(),
    )
        .prop_map(move |(chosen, mut available, at)| {
            if !server {
                let i = at.index(available.len() + 1);
                available.insert(i, chosen);
            }
            VersionInformation { chosen, available }
        })
}

prop_compose! {
    fn arb_params(server: bool)(
        odcid in proptest::option::of(arb_cid()),
        idle in arb_varint(),
        token in proptest::option::of(any::<[u8; 16]>()),
        udp in 1200u64..(1 << 62),
        data in proptest::array::uniform4(arb_varint()),
        streams in proptest::array::uniform2(0u64..=(1 << 60)),
        ade in 0u64..=20,
        mad in 0u64..(1 << 14),
        dam in any::<bool>(),
        pa in proptest::option::of(arb_preferred_address()),
        acl in 2u64..(1 << 62),
        iscid in proptest::option::of(arb_cid()),
        rscid in proptest::option::of(arb_cid()),
        dgram in proptest::option::of(arb_varint()),
        (grease, vi) in (any::<bool>(), proptest::option::of(arb_version_information(server))),
    ) -> TransportParameters {
        TransportParameters {
            original_destination_connection_id: odcid.filter(|_| server),
            max_idle_timeout_ms: idle,
            stateless_reset_token: token.filter(|_| server),
            max_udp_payload_size: udp,
            initial_max_data: data[0],
            initial_max_stream_data_bidi_local: data[1],
            initial_max_stream_data_bidi_remote: data[2],
            initial_max_stream_data_uni: data[3],
            initial_max_streams_bidi: streams[0],
            initial_max_streams_uni: streams[1],
            ack_delay_exponent: ade,
            max_ack_delay_ms: mad,
            disable_active_migration: dam,
            preferred_address: pa.filter(|_| server),
            active_connection_id_limit: acl,
            initial_source_connection_id: iscid,
            retry_source_connection_id: rscid.filter(|_| server),
            max_datagram_frame_size: dgram,
            grease_quic_bit: grease,
            artq_fec: grease && dam,
            version_information: vi,
        }
    }
}

proptest! {
    #[test]
    fn round_trip_server(p in arb_params(true)) {
        let mut out = Vec::new();
        p.encode(&mut out);
        prop_assert_eq!(TransportParameters::decode(&out, Side::Server), Ok(p));
    }

    #[test]
    fn round_trip_client(p in arb_params(false)) {
        let mut out = Vec::new();
        p.encode(&mut out);
        prop_assert_eq!(TransportParameters::decode(&out, Side::Client), Ok(p));
    }

    #[test]
    fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        for side in [Side::Client, Side::Server] {
            if let Err(e) = TransportParameters::decode(&data, side) {
                prop_assert_eq!(e.error_code(), crate::TransportErrorCode::TRANSPORT_PARAMETER_ERROR);
            }
        }
    }
}

/// RFC 9368 §4: every malformed version_information is refused (a parsing
/// failure, TRANSPORT_PARAMETER_ERROR), and a good one round-trips.
#[test]
fn version_information_hostile_values() {
    let words = |ws: &[u32]| ws.iter().flat_map(|w| w.to_be_bytes()).collect::<Vec<u8>>();
    let decode = |value: &[u8], side| {
        let mut out = Vec::new();
        param(&mut out, param_id::VERSION_INFORMATION, value);
        TransportParameters::decode(&out, side)
    };
    for side in [Side::Client, Side::Server] {
        for bad in [
            vec![],                                  // empty
            vec![0, 0, 0],                           // shorter than a Chosen Version
            vec![0, 0, 0, 1, 0x6b],                  // odd length
            words(&[0, 1]),                          // Chosen Version 0
            words(&[1, 1, 0]),                       // an Available Version 0
            words(&[1; MAX_AVAILABLE_VERSIONS + 2]), // too many
        ] {
            let e = decode(&bad, side).expect_err("hostile version_information accepted");
            assert_eq!(
                e.error_code(),
                crate::TransportErrorCode::TRANSPORT_PARAMETER_ERROR,
                "{bad:?}"
            );
        }
    }
    // A client must list its Chosen Version; a server need not (§3).
    let v2_first = words(&[1, 0x6b33_43cf]);
    assert!(decode(&v2_first, Side::Client).is_err());
    let p = decode(&v2_first, Side::Server).expect("server list");
    assert_eq!(
        p.version_information,
        Some(VersionInformation {
            chosen: 1,
            available: vec![0x6b33_43cf]
        })
    );
    let client = words(&[1, 0x6b33_43cf, 1, 0x1a2a_3a4a]);
    let p = decode(&client, Side::Client).expect("client list");
    let mut out = Vec::new();
    p.encode(&mut out);
    assert_eq!(TransportParameters::decode(&out, Side::Client), Ok(p));
    // Sent twice: a duplicate parameter.
    let mut twice = Vec::new();
    param(&mut twice, param_id::VERSION_INFORMATION, &client);
    param(&mut twice, param_id::VERSION_INFORMATION, &client);
    assert!(TransportParameters::decode(&twice, Side::Client).is_err());
}
