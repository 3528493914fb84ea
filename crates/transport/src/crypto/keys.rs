//! Packet protection keys: what the connection installs per encryption level.
//!
//! The key types are rustls's own ([`Keys`], [`DirectionalKeys`],
//! [`PacketKey`], [`HeaderProtectionKey`], [`PacketKeySet`]), re-exported so
//! that the rest of the crate names them through this module only. What is
//! added here is the QUIC v1 Initial key derivation bound to [`wire::Side`],
//! and [`KeyChange`]/[`NextSecrets`], which wrap rustls's so that callers do
//! not depend on the rustls secrets type.

use core::fmt;

use rustls::quic;
use wire::{Side, Version};

pub use rustls::quic::{DirectionalKeys, HeaderProtectionKey, Keys, PacketKey, PacketKeySet};

/// Initial packet protection keys of `version` (RFC 9001 §5.2; RFC 9369
/// §3.3 for v2's salt and labels), derived from the Destination Connection
/// ID of the client's first Initial packet with TLS13_AES_128_GCM_SHA256
/// (ring). `local` protects what `side` sends, `remote` unprotects what its
/// peer sends.
///
/// Any byte string is accepted: a server calls this on a connection ID a
/// client chose (RFC 9000 §7.2 limits it to 20 bytes; the codec enforces it).
pub fn initial_keys(client_dst_cid: &[u8], side: Side, version: Version) -> Keys {
    let suite = rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|suite| suite.quic_suite())
        .expect("ring's TLS13_AES_128_GCM_SHA256 is a TLS 1.3 suite with QUIC support");
    suite.keys(client_dst_cid, rustls_side(side), rustls_version(version))
}

/// The version as rustls names it: rustls applies the version's salt and
/// HKDF labels itself (its own copy of the constants of
/// [`wire::Version`], checked against the RFC vectors in the tests).
pub(crate) fn rustls_version(version: Version) -> quic::Version {
    match version {
        Version::V1 => quic::Version::V1,
        Version::V2 => quic::Version::V2,
    }
}

/// Our role as rustls names it.
pub(crate) fn rustls_side(side: Side) -> rustls::Side {
    match side {
        Side::Client => rustls::Side::Client,
        Side::Server => rustls::Side::Server,
    }
}

/// New keys produced by the TLS handshake, in the order the levels are
/// reached (RFC 9001 §4.1.4).
pub enum KeyChange {
    /// Keys for the Handshake packet number space.
    Handshake {
        /// Header and packet keys, both directions.
        keys: Keys,
    },
    /// Keys for 1-RTT packets (the Application Data space).
    OneRtt {
        /// Header and packet keys, both directions, key phase 0.
        keys: Keys,
        /// Secrets for the key updates that follow (RFC 9001 §6).
        next: NextSecrets,
    },
}

impl From<quic::KeyChange> for KeyChange {
    fn from(change: quic::KeyChange) -> Self {
        match change {
            quic::KeyChange::Handshake { keys } => KeyChange::Handshake { keys },
            quic::KeyChange::OneRtt { keys, next } => KeyChange::OneRtt {
                keys,
                next: NextSecrets { secrets: next },
            },
        }
    }
}

impl fmt::Debug for KeyChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Keys are secret and rustls gives them no Debug: name the level only.
        match self {
            KeyChange::Handshake { .. } => f.write_str("KeyChange::Handshake"),
            KeyChange::OneRtt { .. } => f.write_str("KeyChange::OneRtt"),
        }
    }
}

/// The 1-RTT secrets of the *next* key phase, from which each key update's
/// packet keys are derived (RFC 9001 §6.1: HKDF-Expand-Label "quic ku").
///
/// Header protection keys never change on a key update (RFC 9001 §6), so only
/// packet keys come out of here: swap them into the 1-RTT [`DirectionalKeys`]
/// (`std::mem::replace(&mut keys.local.packet, set.local)`) or pass them to
/// [`seal_parts`](super::protect::seal_parts) and [`open`](super::protect::open)
/// beside the unchanged header key.
pub struct NextSecrets {
    secrets: quic::Secrets,
}

impl NextSecrets {
    /// The packet keys of the next key phase; advances the secrets so the
    /// following call yields the phase after that. The first call gives the
    /// keys of key phase 1 (the 1-RTT keys of [`KeyChange::OneRtt`] are phase
    /// 0). RFC 9001 §6.3 suggests deriving them ahead of need, so that a key
    /// update does not stall on derivation.
    pub fn next_packet_keys(&mut self) -> PacketKeySet {
        self.secrets.next_packet_keys()
    }
}

impl fmt::Debug for NextSecrets {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("NextSecrets(..)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crypto::test_vectors::*;
    use ring::aead;

    /// RFC 9001 A.1: every intermediate value of the Initial key schedule,
    /// recomputed with an HKDF written here on ring.
    #[test]
    fn a1_key_schedule_matches_rfc() {
        assert_eq!(hkdf_label("client in", 32), unhex(LABEL_CLIENT_IN));
        assert_eq!(hkdf_label("server in", 32), unhex(LABEL_SERVER_IN));
        assert_eq!(hkdf_label("quic key", 16), unhex(LABEL_QUIC_KEY));
        assert_eq!(hkdf_label("quic iv", 12), unhex(LABEL_QUIC_IV));
        assert_eq!(hkdf_label("quic hp", 16), unhex(LABEL_QUIC_HP));

        let initial = extract(&unhex(INITIAL_SALT), &unhex(CLIENT_DCID));
        assert_eq!(initial, unhex(INITIAL_SECRET));
        let client = expand_label(&initial, "client in", 32);
        assert_eq!(client, unhex(CLIENT_INITIAL_SECRET));
        assert_eq!(expand_label(&client, "quic key", 16), unhex(CLIENT_KEY));
        assert_eq!(expand_label(&client, "quic iv", 12), unhex(CLIENT_IV));
        assert_eq!(expand_label(&client, "quic hp", 16), unhex(CLIENT_HP));
        let server = expand_label(&initial, "server in", 32);
        assert_eq!(server, unhex(SERVER_INITIAL_SECRET));
        assert_eq!(expand_label(&server, "quic key", 16), unhex(SERVER_KEY));
        assert_eq!(expand_label(&server, "quic iv", 12), unhex(SERVER_IV));
        assert_eq!(expand_label(&server, "quic hp", 16), unhex(SERVER_HP));
    }

    /// AES-128-GCM under the RFC's key and IV (nonce = IV xor packet number,
    /// RFC 9001 §5.3), computed with ring alone.
    fn reference_seal(key: &str, iv: &str, pn: u64, header: &[u8], payload: &[u8]) -> Vec<u8> {
        let key = aead::LessSafeKey::new(
            aead::UnboundKey::new(&aead::AES_128_GCM, &unhex(key)).expect("16-byte key"),
        );
        let mut nonce = [0u8; 12];
        nonce.copy_from_slice(&unhex(iv));
        for (n, p) in nonce[4..].iter_mut().zip(pn.to_be_bytes()) {
            *n ^= p;
        }
        let mut out = payload.to_vec();
        key.seal_in_place_append_tag(
            aead::Nonce::assume_unique_for_key(nonce),
            aead::Aad::from(header),
            &mut out,
        )
        .expect("small payload");
        out
    }

    /// AES-ECB header protection mask under the RFC's hp key (RFC 9001 §5.4.3).
    fn reference_mask(hp: &str, sample: &[u8]) -> [u8; 5] {
        aead::quic::HeaderProtectionKey::new(&aead::quic::AES_128, &unhex(hp))
            .expect("16-byte key")
            .new_mask(sample)
            .expect("16-byte sample")
    }

    /// Apply `key`'s header protection to a zeroed first byte and packet
    /// number, which exposes the mask bits it uses.
    fn mask_of(key: &dyn HeaderProtectionKey, sample: &[u8]) -> (u8, [u8; 4]) {
        // 0x83: long header, packet number length 4, so all 4 pn bytes are masked.
        let mut first = 0x83u8;
        let mut pn = [0u8; 4];
        key.encrypt_in_place(sample, &mut first, &mut pn)
            .expect("valid sample");
        (first ^ 0x83, pn)
    }

    /// RFC 9001 A.1: the keys rustls derives for each side are the RFC's, checked
    /// by comparing their output with ring keyed by the RFC's values.
    #[test]
    fn a1_initial_keys_are_the_rfc_keys() {
        let dcid = unhex(CLIENT_DCID);
        let header = b"any header bytes";
        let payload = b"any payload, long enough to span two AES blocks....";
        let sample = unhex(CLIENT_INITIAL_SAMPLE);
        for side in [Side::Client, Side::Server] {
            let keys = initial_keys(&dcid, side, Version::V1);
            let (local, remote) = match side {
                Side::Client => (
                    (CLIENT_KEY, CLIENT_IV, CLIENT_HP),
                    (SERVER_KEY, SERVER_IV, SERVER_HP),
                ),
                Side::Server => (
                    (SERVER_KEY, SERVER_IV, SERVER_HP),
                    (CLIENT_KEY, CLIENT_IV, CLIENT_HP),
                ),
            };
            let pn = 0x1234_5678;
            let mut buf = payload.to_vec();
            let tag = keys
                .local
                .packet
                .encrypt_in_place(pn, header, &mut buf)
                .expect("seal");
            buf.extend_from_slice(tag.as_ref());
            assert_eq!(
                buf,
                reference_seal(local.0, local.1, pn, header, payload),
                "{side:?} local key/iv"
            );

            let mut theirs = reference_seal(remote.0, remote.1, pn, header, payload);
            let plain = keys
                .remote
                .packet
                .decrypt_in_place(pn, header, &mut theirs)
                .expect("open");
            assert_eq!(plain, payload, "{side:?} remote key/iv");

            for (hp_key, hp) in [
                (&keys.local.header, local.2),
                (&keys.remote.header, remote.2),
            ] {
                let mask = reference_mask(hp, &sample);
                let (first, pn_mask) = mask_of(hp_key.as_ref(), &sample);
                assert_eq!(first, mask[0] & 0x0f, "{side:?} hp first byte");
                assert_eq!(pn_mask, mask[1..5], "{side:?} hp packet number bytes");
            }
        }
        // The RFC's own mask for its sample (A.2).
        assert_eq!(
            reference_mask(CLIENT_HP, &sample)[..],
            unhex(CLIENT_INITIAL_MASK)[..]
        );
    }

    /// Initial keys depend on the connection ID: another one gives keys that
    /// cannot open the first one's packets.
    #[test]
    fn initial_keys_depend_on_the_connection_id() {
        let client = initial_keys(&[1, 2, 3, 4], Side::Client, Version::V1);
        let other = initial_keys(&[1, 2, 3, 5], Side::Server, Version::V1);
        let server = initial_keys(&[1, 2, 3, 4], Side::Server, Version::V1);
        let mut buf = b"hello".to_vec();
        let tag = client
            .local
            .packet
            .encrypt_in_place(7, b"hdr", &mut buf)
            .expect("seal");
        buf.extend_from_slice(tag.as_ref());
        assert!(other
            .remote
            .packet
            .decrypt_in_place(7, b"hdr", &mut buf.clone())
            .is_err());
        assert_eq!(
            server
                .remote
                .packet
                .decrypt_in_place(7, b"hdr", &mut buf)
                .expect("open"),
            b"hello"
        );
    }
}
