//! The bodies of the cargo-fuzz targets in `fuzz/fuzz_targets/`.
//!
//! Each function takes arbitrary bytes and panics only if a codec breaks its
//! contract (a decoder panicking is itself such a failure). They live here,
//! not in the fuzz crate, so that the property tests below run the very same
//! code on stable Rust in every `cargo test` (STYLE.md §Fuzz targets).

use crate::frame::{Frame, FrameIter};
use crate::packet::{decode_protected, ProtectedHeader};
use crate::side::Side;
use crate::transport_params::TransportParameters;

/// `wire_packet`: the first byte picks the local short-header CID length
/// (0..=20); the rest is a datagram. Walks its coalesced packets with
/// [`decode_protected`], checks the reported offsets stay inside the
/// datagram, and runs [`FrameIter`] over each packet's remaining bytes.
pub fn wire_packet(data: &[u8]) {
    let Some((&selector, mut datagram)) = data.split_first() else {
        return;
    };
    let short_dcid_len = usize::from(selector % 21);
    while !datagram.is_empty() {
        let Ok(header) = decode_protected(datagram, short_dcid_len) else {
            return;
        };
        let (pn_offset, len) = match header {
            ProtectedHeader::Long { pn_offset, len, .. }
            | ProtectedHeader::Short { pn_offset, len, .. } => (pn_offset, len),
            ProtectedHeader::Retry { len, .. } => {
                assert!(len <= datagram.len());
                return;
            }
            ProtectedHeader::VersionNegotiation { .. }
            | ProtectedHeader::UnsupportedVersion { .. } => return,
        };
        assert!(
            pn_offset < len && len <= datagram.len(),
            "offsets outside the datagram"
        );
        let payload = datagram.get(pn_offset..len).expect("checked just above");
        for frame in FrameIter::new(payload) {
            if frame.is_err() {
                break;
            }
        }
        datagram = datagram.get(len..).expect("checked just above");
    }
}

/// `wire_frames`: decodes `data` as a packet payload; every frame that
/// decodes must re-encode to bytes that decode to the same frame, alone.
pub fn wire_frames(data: &[u8]) {
    let mut buf = Vec::new();
    for frame in FrameIter::new(data) {
        let Ok(frame) = frame else {
            return;
        };
        let _ = (
            frame.ty(),
            frame.is_ack_eliciting(),
            frame.allowed_in_long_header(),
        );
        buf.clear();
        frame.encode(&mut buf);
        let again: Vec<_> = FrameIter::new(&buf).collect();
        assert_eq!(
            again.len(),
            1,
            "{frame:?} re-encoded as {} frames",
            again.len()
        );
        match &again[0] {
            Ok(f) => assert_eq!(f, &frame, "re-encoding changed the frame"),
            Err(e) => panic!("{frame:?} re-encoded into an invalid frame: {e}"),
        }
        if let Frame::Stream {
            id, offset, data, ..
        } = frame
        {
            assert_eq!(
                buf.len(),
                crate::frame::stream_header_len(id, offset, data.len()) + data.len()
            );
        }
    }
}

/// `transport_params`: decodes `data` as each side's parameters; whatever
/// decodes must re-encode to bytes that decode to the same parameters.
pub fn transport_params(data: &[u8]) {
    for side in [Side::Client, Side::Server] {
        if let Ok(params) = TransportParameters::decode(data, side) {
            let mut out = Vec::new();
            params.encode(&mut out);
            assert_eq!(TransportParameters::decode(&out, side), Ok(params));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cid::ConnectionId;
    use crate::packet::{set_long_length, write_long_header, write_short_header, LongType};
    use proptest::prelude::*;

    /// A datagram of valid coalesced packets around valid frames, then mutated:
    /// random bytes alone rarely get past the header checks.
    fn structured_datagram() -> impl Strategy<Value = Vec<u8>> {
        (
            proptest::collection::vec(crate::frame::tests::arb_payload(), 1..4),
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        )
            .prop_map(|(payloads, flips)| {
                let cid = ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
                let mut out = vec![8u8]; // selector: short CID length 8
                let last = payloads.len() - 1;
                for (i, payload) in payloads.iter().enumerate() {
                    if i == last {
                        write_short_header(&mut out, false, false, &cid, i as u64, 2);
                        out.extend_from_slice(payload);
                        out.push(0x01); // never empty
                    } else {
                        let ty = if i == 0 {
                            LongType::Initial
                        } else {
                            LongType::Handshake
                        };
                        let layout = write_long_header(
                            &mut out,
                            ty,
                            crate::Version::V1,
                            &cid,
                            &cid,
                            &[],
                            i as u64,
                            1,
                        );
                        out.extend_from_slice(payload);
                        out.push(0x01);
                        let end = out.len();
                        set_long_length(&mut out, &layout, end);
                    }
                }
                for (at, byte) in flips {
                    let i = at.index(out.len());
                    out[i] ^= byte;
                }
                out
            })
    }

    proptest! {
        #[test]
        fn wire_packet_random(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            wire_packet(&data);
        }

        #[test]
        fn wire_packet_structured(data in structured_datagram()) {
            wire_packet(&data);
        }

        #[test]
        fn wire_frames_random(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            wire_frames(&data);
        }

        #[test]
        fn wire_frames_structured(payload in crate::frame::tests::arb_payload(),
                                  flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3)) {
            let mut payload = payload;
            if !payload.is_empty() {
                for (at, byte) in flips {
                    let i = at.index(payload.len());
                    payload[i] ^= byte;
                }
            }
            wire_frames(&payload);
        }

        #[test]
        fn transport_params_random(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            transport_params(&data);
        }
    }

    /// The seed corpora in `fuzz/corpus/<target>/` are valid inputs: every
    /// seed decodes cleanly, and each target body runs on it.
    #[test]
    fn seed_corpora_are_valid() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
        if !root.is_dir() {
            return; // the crate was built outside the artq repository
        }
        let seeds = |target: &str| -> Vec<(String, Vec<u8>)> {
            let mut out: Vec<_> = std::fs::read_dir(root.join(target))
                .unwrap()
                .map(|e| e.unwrap().path())
                .filter(|p| p.is_file())
                .map(|p| (p.display().to_string(), std::fs::read(&p).unwrap()))
                .collect();
            out.sort();
            assert!(!out.is_empty(), "no seeds for {target}");
            out
        };
        for (name, data) in seeds("wire_packet") {
            wire_packet(&data);
            assert!(
                decode_protected(&data[1..], usize::from(data[0])).is_ok(),
                "{name}"
            );
        }
        for (name, data) in seeds("wire_frames") {
            wire_frames(&data);
            assert!(FrameIter::new(&data).all(|f| f.is_ok()), "{name}");
        }
        for (name, data) in seeds("transport_params") {
            transport_params(&data);
            let side = if name.ends_with("client") {
                Side::Client
            } else {
                Side::Server
            };
            assert!(TransportParameters::decode(&data, side).is_ok(), "{name}");
        }
    }

    #[test]
    fn transport_params_structured_seed() {
        let p = TransportParameters {
            initial_max_data: 1 << 20,
            initial_source_connection_id: Some(ConnectionId::new(&[9; 8]).unwrap()),
            original_destination_connection_id: Some(ConnectionId::new(&[1; 8]).unwrap()),
            max_datagram_frame_size: Some(65535),
            grease_quic_bit: true,
            ..Default::default()
        };
        let mut out = Vec::new();
        p.encode(&mut out);
        transport_params(&out);
        for cut in 0..out.len() {
            transport_params(&out[..cut]);
        }
    }
}
