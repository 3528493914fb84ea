//! RFC 9001 Appendix A test vectors, and an independent HKDF-Expand-Label
//! (RFC 8446 §7.1) written on ring, used to check what rustls keeps hidden.
//!
//! Test-only. Every hex string is taken verbatim from RFC 9001 Appendix A
//! (spaces and line breaks removed).

use ring::hkdf;

/// RFC 9001 §5.2: the QUIC v1 initial salt.
pub(crate) const INITIAL_SALT: &str = "38762cf7f55934b34d179ae6a4c80cadccbb7f0a";

/// Appendix A: the client-chosen Destination Connection ID.
pub(crate) const CLIENT_DCID: &str = "8394c8f03e515708";

/// A.1: HkdfLabel encodings (the `info` passed to HKDF-Expand).
pub(crate) const LABEL_CLIENT_IN: &str = "00200f746c73313320636c69656e7420696e00";
/// A.1: HkdfLabel for "server in".
pub(crate) const LABEL_SERVER_IN: &str = "00200f746c7331332073657276657220696e00";
/// A.1: HkdfLabel for "quic key" (16 bytes).
pub(crate) const LABEL_QUIC_KEY: &str = "00100e746c7331332071756963206b657900";
/// A.1: HkdfLabel for "quic iv".
pub(crate) const LABEL_QUIC_IV: &str = "000c0d746c733133207175696320697600";
/// A.1: HkdfLabel for "quic hp" (16 bytes).
pub(crate) const LABEL_QUIC_HP: &str = "00100d746c733133207175696320687000";

/// A.1: initial_secret = HKDF-Extract(initial_salt, cid).
pub(crate) const INITIAL_SECRET: &str =
    "7db5df06e7a69e432496adedb00851923595221596ae2ae9fb8115c1e9ed0a44";
/// A.1: client_initial_secret.
pub(crate) const CLIENT_INITIAL_SECRET: &str =
    "c00cf151ca5be075ed0ebfb5c80323c42d6b7db67881289af4008f1f6c357aea";
/// A.1: client Initial packet key.
pub(crate) const CLIENT_KEY: &str = "1f369613dd76d5467730efcbe3b1a22d";
/// A.1: client Initial IV.
pub(crate) const CLIENT_IV: &str = "fa044b2f42a3fd3b46fb255c";
/// A.1: client Initial header protection key.
pub(crate) const CLIENT_HP: &str = "9f50449e04a0e810283a1e9933adedd2";
/// A.1: server_initial_secret.
pub(crate) const SERVER_INITIAL_SECRET: &str =
    "3c199828fd139efd216c155ad844cc81fb82fa8d7446fa7d78be803acdda951b";
/// A.1: server Initial packet key.
pub(crate) const SERVER_KEY: &str = "cf3a5331653c364c88f0f379b6067e37";
/// A.1: server Initial IV.
pub(crate) const SERVER_IV: &str = "0ac1493ca1905853b0bba03e";
/// A.1: server Initial header protection key.
pub(crate) const SERVER_HP: &str = "c206b8d9b9f0f37644430b490eeaa314";

/// A.2: the unprotected client header (packet number 2, 4 bytes, at offset 18).
pub(crate) const CLIENT_INITIAL_HEADER: &str = "c300000001088394c8f03e5157080000449e00000002";
/// A.2: the header protection sample.
pub(crate) const CLIENT_INITIAL_SAMPLE: &str = "d1b1c98dd7689fb8ec11d242b123dc9b";
/// A.2: the header protection mask (first 5 bytes).
pub(crate) const CLIENT_INITIAL_MASK: &str = "437b9aec36";
/// A.2: size of the client's unprotected payload (CRYPTO frame plus PADDING).
pub(crate) const CLIENT_INITIAL_PAYLOAD_LEN: usize = 1162;

/// A.3: the unprotected server header (packet number 1, 2 bytes, at offset 18).
pub(crate) const SERVER_INITIAL_HEADER: &str = "c1000000010008f067a5502a4262b50040750001";

/// A.4: the Original Destination Connection ID the Retry answers.
pub(crate) const RETRY_ODCID: &str = CLIENT_DCID;
/// RFC 9001 §5.8: the secret the Retry key and nonce are derived from.
pub(crate) const RETRY_SECRET: &str =
    "d9c9943e6101fd200021506bcc02814c73030f25c79d71ce876eca876e6fca8e";

/// A.5: the server's 1-RTT application write secret (ChaCha20-Poly1305).
pub(crate) const CHACHA_SECRET: &str =
    "9ac312a7f877468ebe69422748ad00a15443f18203a07d6060f688f30f21632b";
/// A.5: key = HKDF-Expand-Label(secret, "quic key", "", 32).
pub(crate) const CHACHA_KEY: &str =
    "c6d98ff3441c3fe1b2182094f69caa2ed4b716b65488960a7a984979fb23e1c8";
/// A.5: iv = HKDF-Expand-Label(secret, "quic iv", "", 12).
pub(crate) const CHACHA_IV: &str = "e0459b3474bdd0e44a41c144";
/// A.5: hp = HKDF-Expand-Label(secret, "quic hp", "", 32).
pub(crate) const CHACHA_HP: &str =
    "25a282b9e82f06f21f488917a4fc8f1b73573685608597d0efcb076b0ab7a7a4";
/// A.5: ku = HKDF-Expand-Label(secret, "quic ku", "", 32), the next secret.
pub(crate) const CHACHA_KU: &str =
    "1223504755036d556342ee9361d253421a826c9ecdf3c7148684b36b714881f9";
/// A.5: the packet number.
pub(crate) const CHACHA_PN: u64 = 654_360_564;
/// A.5: the AEAD nonce for that packet number.
pub(crate) const CHACHA_NONCE: &str = "e0459b3474bdd0e46d417eb0";
/// A.5: the unprotected short header (3-byte packet number 0x00bff4).
pub(crate) const CHACHA_HEADER: &str = "4200bff4";
/// A.5: the plaintext payload (one PING frame).
pub(crate) const CHACHA_PLAINTEXT: &str = "01";
/// A.5: the payload ciphertext, tag included.
pub(crate) const CHACHA_CIPHERTEXT: &str = "655e5cd55c41f69080575d7999c25a5bfb";
/// A.5: the header protection sample.
pub(crate) const CHACHA_SAMPLE: &str = "5e5cd55c41f69080575d7999c25a5bfb";
/// A.5: the header protection mask (first 5 bytes).
pub(crate) const CHACHA_MASK: &str = "aefefe7d03";
/// A.5: the protected packet, 21 bytes.
pub(crate) const CHACHA_PACKET: &str = "4cfe4189655e5cd55c41f69080575d7999c25a5bfb";

/// A.2: the client's CRYPTO frame (the rest of the 1162-byte payload is PADDING).
pub(crate) const CLIENT_INITIAL_CRYPTO_FRAME: &str = concat!(
    "060040f1010000ed0303ebf8fa56f12939b9584a3896472ec40bb863cfd3e868",
    "04fe3a47f06a2b69484c00000413011302010000c000000010000e00000b6578",
    "616d706c652e636f6dff01000100000a00080006001d00170018001000070005",
    "04616c706e000500050100000000003300260024001d00209370b2c9caa47fba",
    "baf4559fedba753de171fa71f50f1ce15d43e994ec74d748002b000302030400",
    "0d0010000e0403050306030203080408050806002d00020101001c0002400100",
    "3900320408ffffffffffffffff05048000ffff07048000ffff08011001048000",
    "75300901100f088394c8f03e51570806048000ffff",
);

/// A.2: the client's protected Initial packet, 1200 bytes.
pub(crate) const CLIENT_INITIAL_PROTECTED: &str = concat!(
    "c000000001088394c8f03e5157080000449e7b9aec34d1b1c98dd7689fb8ec11",
    "d242b123dc9bd8bab936b47d92ec356c0bab7df5976d27cd449f63300099f399",
    "1c260ec4c60d17b31f8429157bb35a1282a643a8d2262cad67500cadb8e7378c",
    "8eb7539ec4d4905fed1bee1fc8aafba17c750e2c7ace01e6005f80fcb7df6212",
    "30c83711b39343fa028cea7f7fb5ff89eac2308249a02252155e2347b63d58c5",
    "457afd84d05dfffdb20392844ae812154682e9cf012f9021a6f0be17ddd0c208",
    "4dce25ff9b06cde535d0f920a2db1bf362c23e596d11a4f5a6cf3948838a3aec",
    "4e15daf8500a6ef69ec4e3feb6b1d98e610ac8b7ec3faf6ad760b7bad1db4ba3",
    "485e8a94dc250ae3fdb41ed15fb6a8e5eba0fc3dd60bc8e30c5c4287e53805db",
    "059ae0648db2f64264ed5e39be2e20d82df566da8dd5998ccabdae053060ae6c",
    "7b4378e846d29f37ed7b4ea9ec5d82e7961b7f25a9323851f681d582363aa5f8",
    "9937f5a67258bf63ad6f1a0b1d96dbd4faddfcefc5266ba6611722395c906556",
    "be52afe3f565636ad1b17d508b73d8743eeb524be22b3dcbc2c7468d54119c74",
    "68449a13d8e3b95811a198f3491de3e7fe942b330407abf82a4ed7c1b311663a",
    "c69890f4157015853d91e923037c227a33cdd5ec281ca3f79c44546b9d90ca00",
    "f064c99e3dd97911d39fe9c5d0b23a229a234cb36186c4819e8b9c5927726632",
    "291d6a418211cc2962e20fe47feb3edf330f2c603a9d48c0fcb5699dbfe58964",
    "25c5bac4aee82e57a85aaf4e2513e4f05796b07ba2ee47d80506f8d2c25e50fd",
    "14de71e6c418559302f939b0e1abd576f279c4b2e0feb85c1f28ff18f58891ff",
    "ef132eef2fa09346aee33c28eb130ff28f5b766953334113211996d20011a198",
    "e3fc433f9f2541010ae17c1bf202580f6047472fb36857fe843b19f5984009dd",
    "c324044e847a4f4a0ab34f719595de37252d6235365e9b84392b061085349d73",
    "203a4a13e96f5432ec0fd4a1ee65accdd5e3904df54c1da510b0ff20dcc0c77f",
    "cb2c0e0eb605cb0504db87632cf3d8b4dae6e705769d1de354270123cb11450e",
    "fc60ac47683d7b8d0f811365565fd98c4c8eb936bcab8d069fc33bd801b03ade",
    "a2e1fbc5aa463d08ca19896d2bf59a071b851e6c239052172f296bfb5e724047",
    "90a2181014f3b94a4e97d117b438130368cc39dbb2d198065ae3986547926cd2",
    "162f40a29f0c3c8745c0f50fba3852e566d44575c29d39a03f0cda721984b6f4",
    "40591f355e12d439ff150aab7613499dbd49adabc8676eef023b15b65bfc5ca0",
    "6948109f23f350db82123535eb8a7433bdabcb909271a6ecbcb58b936a88cd4e",
    "8f2e6ff5800175f113253d8fa9ca8885c2f552e657dc603f252e1a8e308f76f0",
    "be79e2fb8f5d5fbbe2e30ecadd220723c8c0aea8078cdfcb3868263ff8f09400",
    "54da48781893a7e49ad5aff4af300cd804a6b6279ab3ff3afb64491c85194aab",
    "760d58a606654f9f4400e8b38591356fbf6425aca26dc85244259ff2b19c41b9",
    "f96f3ca9ec1dde434da7d2d392b905ddf3d1f9af93d1af5950bd493f5aa731b4",
    "056df31bd267b6b90a079831aaf579be0a39013137aac6d404f518cfd4684064",
    "7e78bfe706ca4cf5e9c5453e9f7cfd2b8b4c8d169a44e55c88d4a9a7f9474241",
    "e221af44860018ab0856972e194cd934",
);

/// A.3: the server's Initial payload (ACK and CRYPTO frames).
pub(crate) const SERVER_INITIAL_PAYLOAD: &str = concat!(
    "02000000000600405a020000560303eefce7f7b37ba1d1632e96677825ddf739",
    "88cfc79825df566dc5430b9a045a1200130100002e00330024001d00209d3c94",
    "0d89690b84d08a60993c144eca684d1081287c834d5311bcf32bb9da1a002b00",
    "020304",
);

/// A.3: the server's protected Initial packet.
pub(crate) const SERVER_INITIAL_PROTECTED: &str = concat!(
    "cf000000010008f067a5502a4262b5004075c0d95a482cd0991cd25b0aac406a",
    "5816b6394100f37a1c69797554780bb38cc5a99f5ede4cf73c3ec2493a1839b3",
    "dbcba3f6ea46c5b7684df3548e7ddeb9c3bf9c73cc3f3bded74b562bfb19fb84",
    "022f8ef4cdd93795d77d06edbb7aaf2f58891850abbdca3d20398c276456cbc4",
    "2158407dd074ee",
);

/// A.4: a Retry packet, integrity tag included (last 16 bytes).
pub(crate) const RETRY_PACKET: &str = concat!(
    "ff000000010008f067a5502a4262b5746f6b656e04a265ba2eff4d829058fb3f",
    "0f2496ba",
);

/// Decode a hex test vector.
pub(crate) fn unhex(s: &str) -> Vec<u8> {
    hex::decode(s).expect("test vectors are valid hex")
}

/// The `info` of HKDF-Expand-Label (RFC 8446 §7.1): a `HkdfLabel` with an
/// empty context, as QUIC uses it (RFC 9001 §5.1).
pub(crate) fn hkdf_label(label: &str, len: usize) -> Vec<u8> {
    let full = format!("tls13 {label}");
    let mut info = Vec::with_capacity(4 + full.len());
    info.extend_from_slice(&u16::try_from(len).expect("short output").to_be_bytes());
    info.push(u8::try_from(full.len()).expect("short label"));
    info.extend_from_slice(full.as_bytes());
    info.push(0); // empty context
    info
}

/// An output length for ring's HKDF.
struct OutLen(usize);

impl hkdf::KeyType for OutLen {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label(secret, label, "", len) with SHA-256.
pub(crate) fn expand_label(secret: &[u8], label: &str, len: usize) -> Vec<u8> {
    let prk = hkdf::Prk::new_less_safe(hkdf::HKDF_SHA256, secret);
    let info = hkdf_label(label, len);
    let info_parts = [info.as_slice()];
    let okm = prk
        .expand(&info_parts, OutLen(len))
        .expect("length within HKDF limits");
    let mut out = vec![0u8; len];
    okm.fill(&mut out).expect("buffer has the requested length");
    out
}

/// HKDF-Extract(salt, ikm) with SHA-256, returned as raw bytes.
pub(crate) fn extract(salt: &[u8], ikm: &[u8]) -> Vec<u8> {
    // ring hides the PRK bytes; HKDF-Extract is HMAC(salt, ikm) (RFC 5869 §2.2).
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, salt);
    ring::hmac::sign(&key, ikm).as_ref().to_vec()
}
