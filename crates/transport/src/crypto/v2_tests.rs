//! RFC 9369 Appendix A: the QUIC v2 test vectors, byte for byte. Hex from
//! the RFC (spaces and line breaks removed). The Initial packets reuse RFC
//! 9001's plaintext (the same ClientHello and ServerHello) under v2's salt,
//! labels and packet type bits; the key schedule is recomputed with the
//! independent ring HKDF of [`super::test_vectors`] from the labels of
//! [`wire::Version::V2`].

use super::keys::initial_keys;
use super::protect::*;
use super::test_vectors::*;
use rustls::crypto::cipher::{AeadKey, Iv};
use wire::{Side, Version};

/// A.1: client_initial_secret.
const V2_CLIENT_INITIAL_SECRET: &str =
    "14ec9d6eb9fd7af83bf5a668bc17a7e283766aade7ecd0891f70f9ff7f4bf47b";
/// A.1: client key, iv, hp.
const V2_CLIENT_KEY: &str = "8b1a0bc121284290a29e0971b5cd045d";
const V2_CLIENT_IV: &str = "91f73e2351d8fa91660e909f";
const V2_CLIENT_HP: &str = "45b95e15235d6f45a6b19cbcb0294ba9";
/// A.1: server_initial_secret.
const V2_SERVER_INITIAL_SECRET: &str =
    "0263db1782731bf4588e7e4d93b7463907cb8cd8200b5da55a8bd488eafc37c1";
/// A.1: server key, iv, hp.
const V2_SERVER_KEY: &str = "82db637861d55e1d011f19ea71d5d2a7";
const V2_SERVER_IV: &str = "dd13c276499c0249d3310652";
const V2_SERVER_HP: &str = "edf6d05c83121201b436e16877593c3a";

/// A.2: the unprotected client header (type bits 0b01: Initial in v2).
const V2_CLIENT_INITIAL_HEADER: &str = "d36b3343cf088394c8f03e5157080000449e00000002";
/// A.2: the protected client Initial.
const V2_CLIENT_INITIAL_PROTECTED: &str = concat!(
    "d76b3343cf088394c8f03e5157080000449ea0c95e82ffe67b6abcdb4298b485",
    "dd04de806071bf03dceebfa162e75d6c96058bdbfb127cdfcbf903388e99ad04",
    "9f9a3dd4425ae4d0992cfff18ecf0fdb5a842d09747052f17ac2053d21f57c5d",
    "250f2c4f0e0202b70785b7946e992e58a59ac52dea6774d4f03b55545243cf1a",
    "12834e3f249a78d395e0d18f4d766004f1a2674802a747eaa901c3f10cda5500",
    "cb9122faa9f1df66c392079a1b40f0de1c6054196a11cbea40afb6ef5253cd68",
    "18f6625efce3b6def6ba7e4b37a40f7732e093daa7d52190935b8da58976ff33",
    "12ae50b187c1433c0f028edcc4c2838b6a9bfc226ca4b4530e7a4ccee1bfa2a3",
    "d396ae5a3fb512384b2fdd851f784a65e03f2c4fbe11a53c7777c023462239dd",
    "6f7521a3f6c7d5dd3ec9b3f233773d4b46d23cc375eb198c63301c21801f6520",
    "bcfb7966fc49b393f0061d974a2706df8c4a9449f11d7f3d2dcbb90c6b877045",
    "636e7c0c0fe4eb0f697545460c806910d2c355f1d253bc9d2452aaa549e27a1f",
    "ac7cf4ed77f322e8fa894b6a83810a34b361901751a6f5eb65a0326e07de7c12",
    "16ccce2d0193f958bb3850a833f7ae432b65bc5a53975c155aa4bcb4f7b2c4e5",
    "4df16efaf6ddea94e2c50b4cd1dfe06017e0e9d02900cffe1935e0491d77ffb4",
    "fdf85290fdd893d577b1131a610ef6a5c32b2ee0293617a37cbb08b847741c3b",
    "8017c25ca9052ca1079d8b78aebd47876d330a30f6a8c6d61dd1ab5589329de7",
    "14d19d61370f8149748c72f132f0fc99f34d766c6938597040d8f9e2bb522ff9",
    "9c63a344d6a2ae8aa8e51b7b90a4a806105fcbca31506c446151adfeceb51b91",
    "abfe43960977c87471cf9ad4074d30e10d6a7f03c63bd5d4317f68ff325ba3bd",
    "80bf4dc8b52a0ba031758022eb025cdd770b44d6d6cf0670f4e990b22347a7db",
    "848265e3e5eb72dfe8299ad7481a408322cac55786e52f633b2fb6b614eaed18",
    "d703dd84045a274ae8bfa73379661388d6991fe39b0d93debb41700b41f90a15",
    "c4d526250235ddcd6776fc77bc97e7a417ebcb31600d01e57f32162a8560cacc",
    "7e27a096d37a1a86952ec71bd89a3e9a30a2a26162984d7740f81193e8238e61",
    "f6b5b984d4d3dfa033c1bb7e4f0037febf406d91c0dccf32acf423cfa1e70710",
    "10d3f270121b493ce85054ef58bada42310138fe081adb04e2bd901f2f13458b",
    "3d6758158197107c14ebb193230cd1157380aa79cae1374a7c1e5bbcb80ee23e",
    "06ebfde206bfb0fcbc0edc4ebec309661bdd908d532eb0c6adc38b7ca7331dce",
    "8dfce39ab71e7c32d318d136b6100671a1ae6a6600e3899f31f0eed19e3417d1",
    "34b90c9058f8632c798d4490da4987307cba922d61c39805d072b589bd52fdf1",
    "e86215c2d54e6670e07383a27bbffb5addf47d66aa85a0c6f9f32e59d85a44dd",
    "5d3b22dc2be80919b490437ae4f36a0ae55edf1d0b5cb4e9a3ecabee93dfc6e3",
    "8d209d0fa6536d27a5d6fbb17641cde27525d61093f1b28072d111b2b4ae5f89",
    "d5974ee12e5cf7d5da4d6a31123041f33e61407e76cffcdcfd7e19ba58cf4b53",
    "6f4c4938ae79324dc402894b44faf8afbab35282ab659d13c93f70412e85cb19",
    "9a37ddec600545473cfb5a05e08d0b209973b2172b4d21fb69745a262ccde96b",
    "a18b2faa745b6fe189cf772a9f84cbfc",
);
/// A.3: the unprotected server header.
const V2_SERVER_INITIAL_HEADER: &str = "d16b3343cf0008f067a5502a4262b50040750001";
/// A.3: the protected server Initial.
const V2_SERVER_INITIAL_PROTECTED: &str = concat!(
    "dc6b3343cf0008f067a5502a4262b5004075d92faaf16f05d8a4398c47089698",
    "baeea26b91eb761d9b89237bbf87263017915358230035f7fd3945d88965cf17",
    "f9af6e16886c61bfc703106fbaf3cb4cfa52382dd16a393e42757507698075b2",
    "c984c707f0a0812d8cd5a6881eaf21ceda98f4bd23f6fe1a3e2c43edd9ce7ca8",
    "4bed8521e2e140",
);
/// A.4: the v2 Retry (token "token").
const V2_RETRY_PACKET: &str =
    "cf6b3343cf0008f067a5502a4262b5746f6b656ec8646ce8bfe33952d955543665dcc7b6";
/// A.5: key, iv, hp and ku from the ChaCha20 secret under "quicv2" labels.
const V2_CHACHA_KEY: &str = "3bfcddd72bcf02541d7fa0dd1f5f9eeea817e09a6963a0e6c7df0f9a1bab90f2";
const V2_CHACHA_IV: &str = "a6b5bc6ab7dafce30ffff5dd";
const V2_CHACHA_HP: &str = "d659760d2ba434a226fd37b35c69e2da8211d10c4f12538787d65645d5d1b8e2";
const V2_CHACHA_KU: &str = "c69374c49e3d2a9466fa689e49d476db5d0dfbc87d32ceeaa6343fd0ae4c7d88";
/// A.5: the nonce and the protected packet.
const V2_CHACHA_NONCE: &str = "a6b5bc6ab7dafce328ff4a29";
const V2_CHACHA_PACKET: &str = "5558b1c60ae7b6b932bc27d786f4bc2bb20f2162ba";

/// A.1: the key schedule from v2's salt and labels (those of
/// `Version::V2`), recomputed on ring.
#[test]
fn a1_v2_key_schedule() {
    let v = Version::V2;
    let initial = extract(v.initial_salt(), &unhex(CLIENT_DCID));
    let client = expand_label(&initial, "client in", 32);
    assert_eq!(client, unhex(V2_CLIENT_INITIAL_SECRET));
    assert_eq!(
        expand_label(&client, v.key_label(), 16),
        unhex(V2_CLIENT_KEY)
    );
    assert_eq!(expand_label(&client, v.iv_label(), 12), unhex(V2_CLIENT_IV));
    assert_eq!(expand_label(&client, v.hp_label(), 16), unhex(V2_CLIENT_HP));
    let server = expand_label(&initial, "server in", 32);
    assert_eq!(server, unhex(V2_SERVER_INITIAL_SECRET));
    assert_eq!(
        expand_label(&server, v.key_label(), 16),
        unhex(V2_SERVER_KEY)
    );
    assert_eq!(expand_label(&server, v.iv_label(), 12), unhex(V2_SERVER_IV));
    assert_eq!(expand_label(&server, v.hp_label(), 16), unhex(V2_SERVER_HP));
}

/// A.2: the client Initial sealed with rustls's v2 Initial keys is the
/// RFC's packet, and the server's keys open it.
#[test]
fn a2_v2_client_initial() {
    let dcid = unhex(CLIENT_DCID);
    let client = initial_keys(&dcid, Side::Client, Version::V2);
    let mut packet = unhex(V2_CLIENT_INITIAL_HEADER);
    let mut payload = unhex(CLIENT_INITIAL_CRYPTO_FRAME);
    payload.resize(CLIENT_INITIAL_PAYLOAD_LEN, 0);
    packet.extend_from_slice(&payload);
    packet.extend_from_slice(&[0; TAG_LEN]);
    assert_eq!(packet.len(), 1200);
    seal(&client.local, &mut packet, 18, 4, 2).expect("seal");
    assert_eq!(hex::encode(&packet), V2_CLIENT_INITIAL_PROTECTED);

    let server = initial_keys(&dcid, Side::Server, Version::V2);
    let (first, pn_len, pn) =
        remove_header_protection(server.remote.header.as_ref(), &mut packet, 18)
            .expect("unprotect");
    assert_eq!((first, pn_len, pn), (0xd3, 4, 2));
    let range = open(server.remote.packet.as_ref(), &mut packet, 22, 2).expect("open");
    assert_eq!(packet[range], payload[..]);

    // v1 keys cannot open it: the versions' keys differ.
    let v1 = initial_keys(&dcid, Side::Server, Version::V1);
    let mut again = unhex(V2_CLIENT_INITIAL_PROTECTED);
    let opened = remove_header_protection(v1.remote.header.as_ref(), &mut again, 18)
        .ok()
        .and_then(|(_, pn_len, pn)| {
            open(
                v1.remote.packet.as_ref(),
                &mut again,
                18 + pn_len,
                u64::from(pn),
            )
            .ok()
        });
    assert!(opened.is_none());
}

/// A.3: the server Initial likewise.
#[test]
fn a3_v2_server_initial() {
    let dcid = unhex(CLIENT_DCID);
    let server = initial_keys(&dcid, Side::Server, Version::V2);
    let payload = unhex(SERVER_INITIAL_PAYLOAD);
    let mut packet = unhex(V2_SERVER_INITIAL_HEADER);
    packet.extend_from_slice(&payload);
    packet.extend_from_slice(&[0; TAG_LEN]);
    seal(&server.local, &mut packet, 18, 2, 1).expect("seal");
    assert_eq!(hex::encode(&packet), V2_SERVER_INITIAL_PROTECTED);

    let client = initial_keys(&dcid, Side::Client, Version::V2);
    let (first, pn_len, pn) =
        remove_header_protection(client.remote.header.as_ref(), &mut packet, 18)
            .expect("unprotect");
    assert_eq!((first, pn_len, pn), (0xd1, 2, 1));
    let range = open(client.remote.packet.as_ref(), &mut packet, 20, 1).expect("open");
    assert_eq!(packet[range], payload[..]);
}

/// A.4: the v2 Retry's integrity tag, under v2's key and nonce (RFC 9369
/// §3.3.3).
#[test]
fn a4_v2_retry() {
    let v = Version::V2;
    let odcid = unhex(RETRY_ODCID);
    let retry = unhex(V2_RETRY_PACKET);
    let (body, tag) = retry.split_at(retry.len() - TAG_LEN);
    assert_eq!(
        retry_integrity_tag(v, &odcid, body).expect("tag")[..],
        tag[..]
    );
    assert!(verify_retry_integrity(v, &odcid, &retry));
    assert!(
        !verify_retry_integrity(Version::V1, &odcid, &retry),
        "a v1 check refuses a v2 tag"
    );
}

/// A.5: the ChaCha20-Poly1305 short header packet under v2's labels,
/// the key update label included.
#[test]
fn a5_v2_chacha20_short_header() {
    let v = Version::V2;
    let secret = unhex(CHACHA_SECRET);
    let key = expand_label(&secret, v.key_label(), 32);
    let iv = expand_label(&secret, v.iv_label(), 12);
    let hp = expand_label(&secret, v.hp_label(), 32);
    assert_eq!(key, unhex(V2_CHACHA_KEY));
    assert_eq!(iv, unhex(V2_CHACHA_IV));
    assert_eq!(hp, unhex(V2_CHACHA_HP));
    assert_eq!(expand_label(&secret, v.ku_label(), 32), unhex(V2_CHACHA_KU));
    let mut nonce = iv.clone();
    for (n, p) in nonce[4..].iter_mut().zip(CHACHA_PN.to_be_bytes()) {
        *n ^= p;
    }
    assert_eq!(nonce, unhex(V2_CHACHA_NONCE));

    let alg = rustls::crypto::ring::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256
        .tls13()
        .and_then(|s| s.quic)
        .expect("ChaCha20 suite supports QUIC");
    let as_key = |b: &[u8]| AeadKey::from(<[u8; 32]>::try_from(b).expect("32 bytes"));
    let keys = super::DirectionalKeys {
        header: alg.header_protection_key(as_key(&hp)),
        packet: alg.packet_key(as_key(&key), Iv::copy(&iv)),
    };
    let mut packet = unhex(CHACHA_HEADER);
    packet.extend_from_slice(&unhex(CHACHA_PLAINTEXT));
    packet.extend_from_slice(&[0; TAG_LEN]);
    seal(&keys, &mut packet, 1, 3, CHACHA_PN).expect("seal");
    assert_eq!(hex::encode(&packet), V2_CHACHA_PACKET);
    let (first, pn_len, truncated) =
        remove_header_protection(keys.header.as_ref(), &mut packet, 1).expect("unprotect");
    assert_eq!((first, pn_len, truncated), (0x42, 3, 0x00bff4));
}
