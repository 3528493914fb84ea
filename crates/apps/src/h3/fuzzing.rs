//! The body of the cargo-fuzz target `h3_frames` (`fuzz/fuzz_targets/`).
//!
//! It panics only if a decoder breaks its contract (a panic inside one is
//! such a failure). It lives here, not in the fuzz crate, so the property
//! tests below run the very same code on stable Rust in every `cargo test`
//! (STYLE.md, fuzz targets).

use wire::{Dir, Side, StreamId};

use super::control::{Control, UniOutcome};
use super::frame::Settings;
use super::qpack::streams::{DecoderStreamChecker, EncoderStreamChecker};
use super::qpack::{self, huffman, SectionError};
use super::reader::SliceSource;
use super::request_reader::{RequestRead, RequestReader};
use super::response_reader::{BodyRead, HeadRead, ResponseReader};
use crate::http::MAX_FIELD_SECTION;

/// `h3_frames`: arbitrary bytes through every HTTP/3 and QPACK decoder.
///
/// The first byte (if any) picks a split point: the rest is offered as two
/// reads, the first without FIN, so partial frames and instructions are
/// carried between reads. Runs the rest as: a field section (what decodes
/// must re-encode to the same fields), a SETTINGS payload (likewise), a
/// Huffman string, a server request stream, a client response stream, a
/// unidirectional stream at either side (type byte first: control, QPACK
/// encoder/decoder, push, unknown), and the QPACK encoder and decoder
/// stream checkers.
pub fn frames_and_qpack(data: &[u8]) {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(selector) % (rest.len() + 1);
    let (first, second) = rest.split_at(split);

    match qpack::decode_section(rest, MAX_FIELD_SECTION) {
        Ok(fields) => {
            let mut again = Vec::new();
            qpack::encode_section(fields.iter().map(|(n, v)| (&n[..], &v[..])), &mut again);
            assert_eq!(
                qpack::decode_section(&again, u64::MAX),
                Ok(fields),
                "re-encoded field section decodes differently"
            );
        }
        Err(SectionError::TooLarge(size)) => assert!(size > MAX_FIELD_SECTION),
        Err(SectionError::Failed(_)) => {}
    }
    if let Ok(settings) = Settings::decode(rest) {
        let mut again = Vec::new();
        settings.encode(&mut again);
        assert_eq!(Settings::decode(&again), Ok(settings));
    }
    let mut decoded = Vec::new();
    if huffman::decode(rest, &mut decoded).is_ok() {
        let mut again = Vec::new();
        huffman::encode(&decoded, &mut again);
        assert_eq!(again, rest, "Huffman re-encoding differs");
    }

    request_stream(first, second);
    response_stream(first, second);
    for side in [Side::Server, Side::Client] {
        uni_stream(side, first, second);
    }
    let mut encoder = EncoderStreamChecker::default();
    let _ = encoder.feed(first).and_then(|()| encoder.feed(second));
    let mut decoder = DecoderStreamChecker::default();
    let _ = decoder.feed(first).and_then(|()| decoder.feed(second));
}

/// Reads a request stream offered as `first` (no FIN yet) then `second`
/// (FIN); every read makes progress or stops.
fn request_stream(first: &[u8], second: &[u8]) {
    let mut reader = RequestReader::default();
    for (chunk, fin) in [(first, false), (second, true)] {
        let mut src = SliceSource::new(chunk, fin);
        // Each read returns an event, blocks, or ends: bounded by the bytes.
        for _ in 0..=chunk.len() + 2 {
            match reader.read(&mut src) {
                Ok(RequestRead::Blocked) => break,
                // A connection error: nothing is read after it.
                Err(_) => return,
                Ok(RequestRead::Request(r)) => assert!(r.path.starts_with('/') || r.path == "*"),
                Ok(_) => {}
            }
            if reader.is_done() {
                break;
            }
        }
    }
}

/// Reads a response stream (head, then body) offered in two parts.
fn response_stream(first: &[u8], second: &[u8]) {
    let mut reader = ResponseReader::default();
    let mut buf = [0u8; 64];
    for (chunk, fin) in [(first, false), (second, true)] {
        let mut src = SliceSource::new(chunk, fin);
        for _ in 0..=chunk.len() + 2 {
            if !reader.has_head() {
                match reader.read_head(&mut src) {
                    Ok(HeadRead::Response(head)) => assert!((200..=599).contains(&head.status)),
                    Ok(HeadRead::Blocked) => break,
                    Ok(_) | Err(_) => return,
                }
                continue;
            }
            match reader.read_body(&mut src, &mut buf) {
                Ok(BodyRead::Data(n)) => assert!(n <= buf.len()),
                Ok(BodyRead::Blocked) => break,
                Ok(_) | Err(_) => return,
            }
        }
    }
}

/// Reads a peer unidirectional stream (type varint first) at `side`.
fn uni_stream(side: Side, first: &[u8], second: &[u8]) {
    let mut control = Control::new(side);
    let id = StreamId::new(side.opposite(), Dir::Uni, 0);
    for (chunk, fin) in [(first, false), (second, true)] {
        let mut src = SliceSource::new(chunk, fin);
        match control.read_uni(id, &mut src) {
            Ok(UniOutcome::Keep) => {}
            Ok(UniOutcome::Refuse) | Err(_) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::h3::frame::{self, write_frame};
    use proptest::prelude::*;

    /// A valid request stream (HEADERS with a QPACK section, DATA), to be
    /// mutated: random bytes rarely get past a frame header.
    fn structured() -> impl Strategy<Value = Vec<u8>> {
        (
            any::<u8>(),
            proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        )
            .prop_map(|(selector, flips)| {
                let mut out = vec![selector];
                let mut section = Vec::new();
                qpack::encode_section(
                    [
                        (&b":method"[..], &b"GET"[..]),
                        (b":scheme", b"https"),
                        (b":authority", b"localhost"),
                        (b":path", b"/index.html"),
                        (b"x-test", b"fuzz"),
                    ],
                    &mut section,
                );
                write_frame(&mut out, frame::HEADERS, &section);
                write_frame(&mut out, frame::DATA, b"body");
                for (at, byte) in flips {
                    let i = at.index(out.len());
                    out[i] ^= byte;
                }
                out
            })
    }

    proptest! {
        #[test]
        fn random_bytes(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            frames_and_qpack(&data);
        }

        #[test]
        fn mutated_requests(data in structured()) {
            frames_and_qpack(&data);
        }
    }

    /// The seeds in `fuzz/corpus/h3_frames/` are valid inputs and the body
    /// runs on each.
    #[test]
    fn seed_corpus_is_valid() {
        for path in crate::fuzzing::tests::seed_files("h3_frames") {
            let data = std::fs::read(&path).unwrap();
            frames_and_qpack(&data);
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let body = &data[1..];
            // Each seed is a whole valid stream of the kind its name says.
            if name.starts_with("request") {
                let mut reader = RequestReader::default();
                let read = reader.read(&mut SliceSource::new(body, true)).unwrap();
                assert!(matches!(read, RequestRead::Request(_)), "{name}: {read:?}");
            } else if name.starts_with("control") {
                let mut control = Control::new(Side::Server);
                let id = StreamId::new(Side::Client, Dir::Uni, 0);
                let outcome = control.read_uni(id, &mut SliceSource::new(body, false));
                assert_eq!(outcome, Ok(UniOutcome::Keep), "{name}");
                assert!(control.peer.settings.is_some(), "{name}");
            } else if name.starts_with("section") {
                assert!(
                    qpack::decode_section(body, MAX_FIELD_SECTION).is_ok(),
                    "{name}"
                );
            } else {
                panic!("seed {name} names no known kind (request, control, section)");
            }
        }
    }
}
