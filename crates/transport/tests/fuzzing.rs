//! The transport's fuzz target bodies (`transport::fuzzing`) on stable
//! Rust: over every committed seed in `fuzz/corpus/<target>/`, whose names
//! say what each must lead to, and over random inputs.
//!
//! Seed names: `ok-*` must leave the fuzzed endpoint open (or closed by its
//! peer), `close-0xNN-*` must make it close with transport error code NN,
//! `close-crypto-*` with a TLS alert (0x0100..=0x01ff); a name containing
//! `key-updates` must take the endpoint through at least two key updates.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use transport::fuzzing::{self, FuzzOutcome};

/// The seeds of `target`, sorted; fails when there are none (a missing
/// corpus must not pass vacuously).
fn seeds(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    assert!(paths.len() >= 3, "too few seeds in {}", dir.display());
    paths
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read(&p).unwrap())
        })
        .collect()
}

/// Check an outcome against what the seed's name promises.
fn check_named(name: &str, outcome: FuzzOutcome, handshake: bool) {
    if handshake {
        assert!(outcome.connected, "{name}: the handshake did not complete");
    }
    if name.contains("key-updates") {
        assert!(outcome.key_updates >= 2, "{name}: {outcome:?}");
    }
    let code = outcome.close_code;
    if name.starts_with("ok-") {
        assert_eq!(code, None, "{name}: closed");
    } else if let Some(rest) = name.strip_prefix("close-crypto-") {
        assert!(
            code.is_some_and(|c| (0x0100..=0x01ff).contains(&c)),
            "{name} ({rest}): closed with {code:?}, not a TLS alert"
        );
    } else if let Some(rest) = name.strip_prefix("close-0x") {
        let hex = rest.split('-').next().unwrap_or("");
        let want = u64::from_str_radix(hex, 16).expect("close-0xNN- seed name");
        assert_eq!(code, Some(want), "{name}: closed with {code:?}");
    } else {
        panic!("seed {name}: name must start with ok-, close-0xNN- or close-crypto-");
    }
}

#[test]
fn server_frames_seeds() {
    for (name, data) in seeds("server_frames") {
        check_named(&name, fuzzing::server_frames(&data), true);
    }
}

#[test]
fn client_datagrams_seeds() {
    for (name, data) in seeds("client_datagrams") {
        let connected_mode = data.first().is_some_and(|m| m & 1 == 1);
        check_named(&name, fuzzing::client_datagrams(&data), connected_mode);
    }
}

#[test]
fn server_datagrams_seeds() {
    for (name, data) in seeds("server_datagrams") {
        let _ = name;
        fuzzing::server_datagrams(&data);
    }
}

/// A record list of the post-handshake targets: (op, bytes) pairs encoded
/// as op, 2-byte length, bytes. Frames are drawn as plausible frame type
/// bytes followed by anything, which reaches the frame handlers far more
/// often than uniform bytes do.
fn records() -> impl Strategy<Value = Vec<u8>> {
    let frame_types = prop_oneof![
        Just(0x00u8),
        Just(0x01),
        Just(0x02),
        Just(0x04),
        Just(0x05),
        Just(0x06),
        Just(0x07),
        Just(0x08),
        Just(0x0b),
        Just(0x0f),
        Just(0x10),
        Just(0x11),
        Just(0x12),
        Just(0x14),
        Just(0x16),
        Just(0x18),
        Just(0x19),
        Just(0x1a),
        Just(0x1b),
        Just(0x1c),
        Just(0x1e),
        Just(0x30),
        Just(0x31),
        any::<u8>(),
    ];
    let record = (
        0u8..8,
        frame_types,
        proptest::collection::vec(any::<u8>(), 0..60),
    )
        .prop_map(|(op, ty, rest)| {
            let mut bytes = vec![ty];
            bytes.extend(rest);
            let mut out = vec![op];
            out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            out.extend(bytes);
            out
        });
    proptest::collection::vec(record, 1..6).prop_map(|r| r.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn server_frames_on_random_records(data in records()) {
        fuzzing::server_frames(&data);
    }

    #[test]
    fn server_frames_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::server_frames(&data);
    }

    #[test]
    fn client_datagrams_on_random_records(mode in 0u8..2, data in records()) {
        let mut input = vec![mode];
        input.extend(data);
        fuzzing::client_datagrams(&input);
    }

    #[test]
    fn client_datagrams_on_random_bytes(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        fuzzing::client_datagrams(&data);
    }
}
