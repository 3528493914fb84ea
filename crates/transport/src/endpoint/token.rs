//! Address-validation tokens (RFC 9000 §8.1.2-§8.1.4): what a server puts in
//! a Retry packet or a NEW_TOKEN frame, and checks when a client's Initial
//! brings it back.
//!
//! A token is opaque to the client and sealed by the server alone, so it
//! carries its own state and the server keeps none:
//!
//! ```text
//! kind (1) | nonce (12) | AES-256-GCM( issued_at (8) [| odcid_len (1) | odcid] ) | tag (16)
//! ```
//!
//! - `kind` is 1 for a Retry token, 2 for a NEW_TOKEN token. It is in the
//!   clear because the server must tell an invalid Retry token (close with
//!   INVALID_TOKEN, RFC 9000 §8.1.2) from an unusable NEW_TOKEN token
//!   (ignore it, §8.1.3) even when the token does not open; it is
//!   authenticated as part of the associated data.
//! - The associated data also binds the client's address: IP and port for
//!   a Retry token (the client answers at once, from the same socket), the
//!   IP alone for a NEW_TOKEN token (a later connection comes from another
//!   port). A token used from another address fails authentication.
//! - `issued_at` is the endpoint's `now` (the driver's clock, never read
//!   here), so tokens expire ([`crate::config::AdmissionConfig`]'s
//!   lifetimes). A token from the future is refused.
//! - A Retry token carries the Destination Connection ID of the client's
//!   first Initial, which the server must echo as
//!   original_destination_connection_id (RFC 9000 §7.3).
//!
//! The key (256 bits) comes from the endpoint's generator, itself seeded
//! from the OS in real endpoints, or, with [`crate::StaticKeys`], is
//! derived from the operator's `token` key, so that every worker of a
//! server and the server after a restart open each other's tokens. The
//! 96-bit nonce is drawn per token (random nonces from several workers
//! under one key: 2^-32 collision odds only after 2^32 tokens, far beyond
//! any token lifetime's worth).
//! Tokens are not remembered, so a NEW_TOKEN token can be replayed until it
//! expires, but only from the address it names, which is the address it
//! proves (RFC 9000 §8.1.4 leaves replay protection to the server's
//! judgement; a replay gains an attacker nothing it could not get by
//! connecting from that address).

use std::net::{IpAddr, SocketAddr};

use rand::RngCore;
use ring::aead;
use wire::cid::ConnectionId;
use wire::time::{Duration, Instant};

/// The two kinds of token, by their leading byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TokenKind {
    /// Sent in a Retry packet; proves the address for the retried Initial.
    Retry,
    /// Sent in a NEW_TOKEN frame; proves the address for later connections.
    NewToken,
}

impl TokenKind {
    fn byte(self) -> u8 {
        match self {
            TokenKind::Retry => 1,
            TokenKind::NewToken => 2,
        }
    }

    fn from_byte(b: u8) -> Option<TokenKind> {
        match b {
            1 => Some(TokenKind::Retry),
            2 => Some(TokenKind::NewToken),
            _ => None,
        }
    }
}

/// A token that opened, was issued for this address and has not expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ValidToken {
    /// A Retry token, with the client's original Destination Connection ID.
    Retry {
        /// What the server must send as original_destination_connection_id.
        original_dcid: ConnectionId,
    },
    /// A NEW_TOKEN token.
    NewToken,
}

/// Why a token was refused; the kind is known whenever the leading byte
/// named one, even if nothing else about the token holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct InvalidToken {
    /// The kind its leading byte claims, if any.
    pub kind: Option<TokenKind>,
}

const NONCE_LEN: usize = 12;
const TAG_LEN: usize = 16;
/// Longest token we ever issue: kind, nonce, issue time, a 20-byte ODCID
/// with its length, tag. Anything longer is refused before any crypto.
const MAX_TOKEN_LEN: usize = 1 + NONCE_LEN + 8 + 1 + ConnectionId::MAX_LEN + TAG_LEN;

/// Seals and opens address-validation tokens with one AES-256-GCM key.
pub(crate) struct TokenKey {
    key: aead::LessSafeKey,
}

impl core::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("TokenKey(..)")
    }
}

impl TokenKey {
    /// A key drawn from `rng` (the endpoint's).
    pub fn new(rng: &mut dyn RngCore) -> Self {
        let mut bytes = [0u8; 32];
        rng.fill_bytes(&mut bytes);
        let key = aead::UnboundKey::new(&aead::AES_256_GCM, &bytes)
            .expect("32 bytes is the AES-256-GCM key length");
        TokenKey {
            key: aead::LessSafeKey::new(key),
        }
    }

    /// The key for the operator's static `token` key
    /// ([`crate::StaticKeys::token`]): HMAC-SHA256 of a label under it, so
    /// the AES key is never the configured bytes themselves.
    pub fn from_static(token: &[u8; 32]) -> Self {
        let kdf = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, token);
        let derived = ring::hmac::sign(&kdf, b"artq address-validation token key v1");
        let key = aead::UnboundKey::new(&aead::AES_256_GCM, derived.as_ref())
            .expect("HMAC-SHA256 gives 32 bytes, the AES-256-GCM key length");
        TokenKey {
            key: aead::LessSafeKey::new(key),
        }
    }

    /// A Retry token for `client`, recording the DCID of its first Initial.
    pub fn seal_retry(
        &self,
        rng: &mut dyn RngCore,
        client: SocketAddr,
        original_dcid: &ConnectionId,
        now: Instant,
    ) -> Vec<u8> {
        let mut plain = now.as_nanos().to_be_bytes().to_vec();
        // A connection ID is at most 20 bytes: its length fits a byte.
        plain.push(original_dcid.len() as u8);
        plain.extend_from_slice(original_dcid);
        self.seal(rng, TokenKind::Retry, &address_aad(client, true), plain)
    }

    /// A NEW_TOKEN token for a client at `client`'s IP address.
    pub fn seal_new_token(
        &self,
        rng: &mut dyn RngCore,
        client: SocketAddr,
        now: Instant,
    ) -> Vec<u8> {
        let plain = now.as_nanos().to_be_bytes().to_vec();
        self.seal(rng, TokenKind::NewToken, &address_aad(client, false), plain)
    }

    fn seal(
        &self,
        rng: &mut dyn RngCore,
        kind: TokenKind,
        address: &[u8],
        mut plain: Vec<u8>,
    ) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let aad = aad(kind, address);
        let tag = self
            .key
            .seal_in_place_separate_tag(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad),
                &mut plain,
            )
            .expect("a token's few bytes are far below AES-GCM's limit");
        let mut token = Vec::with_capacity(1 + NONCE_LEN + plain.len() + TAG_LEN);
        token.push(kind.byte());
        token.extend_from_slice(&nonce);
        token.extend_from_slice(&plain);
        token.extend_from_slice(tag.as_ref());
        token
    }

    /// Opens `token` brought by a client at `client` at time `now`; it must
    /// have been issued at most `retry_lifetime` (Retry) or
    /// `new_token_lifetime` (NEW_TOKEN; `None`: such tokens are refused)
    /// ago. Never panics on any input.
    pub fn open(
        &self,
        token: &[u8],
        client: SocketAddr,
        now: Instant,
        retry_lifetime: Duration,
        new_token_lifetime: Option<Duration>,
    ) -> Result<ValidToken, InvalidToken> {
        let kind = token.first().copied().and_then(TokenKind::from_byte);
        let invalid = InvalidToken { kind };
        let Some(kind) = kind else {
            return Err(invalid);
        };
        if token.len() > MAX_TOKEN_LEN || token.len() < 1 + NONCE_LEN + 8 + TAG_LEN {
            return Err(invalid);
        }
        let mut nonce = [0u8; NONCE_LEN];
        nonce.copy_from_slice(&token[1..1 + NONCE_LEN]);
        let mut sealed = token[1 + NONCE_LEN..].to_vec();
        let address = address_aad(client, kind == TokenKind::Retry);
        let plain = self
            .key
            .open_in_place(
                aead::Nonce::assume_unique_for_key(nonce),
                aead::Aad::from(&aad(kind, &address)),
                &mut sealed,
            )
            .map_err(|_| invalid)?;
        // Authentic from here on: the layout is ours.
        let (time, rest) = plain.split_at(8);
        let mut t = [0u8; 8];
        t.copy_from_slice(time);
        let issued = Instant::from_nanos(u64::from_be_bytes(t));
        let lifetime = match kind {
            TokenKind::Retry => retry_lifetime,
            TokenKind::NewToken => new_token_lifetime.ok_or(invalid)?,
        };
        if issued > now || now.saturating_duration_since(issued) > lifetime {
            return Err(invalid);
        }
        match kind {
            TokenKind::NewToken if rest.is_empty() => Ok(ValidToken::NewToken),
            TokenKind::Retry => {
                let (&len, cid) = rest.split_first().ok_or(invalid)?;
                if usize::from(len) != cid.len() {
                    return Err(invalid);
                }
                let original_dcid = ConnectionId::new(cid).map_err(|_| invalid)?;
                Ok(ValidToken::Retry { original_dcid })
            }
            TokenKind::NewToken => Err(invalid),
        }
    }
}

/// The address a token is bound to, as bytes: the IP, and the port too
/// when `with_port`.
fn address_aad(client: SocketAddr, with_port: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(19);
    match client.ip() {
        IpAddr::V4(ip) => {
            out.push(4);
            out.extend_from_slice(&ip.octets());
        }
        IpAddr::V6(ip) => {
            out.push(6);
            out.extend_from_slice(&ip.octets());
        }
    }
    if with_port {
        out.extend_from_slice(&client.port().to_be_bytes());
    }
    out
}

/// Associated data: a label, the kind byte and the bound address.
fn aad(kind: TokenKind, address: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + address.len());
    out.extend_from_slice(b"artq token v1");
    out.push(kind.byte());
    out.extend_from_slice(address);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::{RngSeed, StackRng};

    fn setup() -> (TokenKey, StackRng) {
        let mut rng = StackRng::new(RngSeed::Fixed(5));
        (TokenKey::new(&mut rng), rng)
    }

    const LIFE: Duration = Duration::from_secs(10);
    const DAY: Option<Duration> = Some(Duration::from_secs(86_400));

    #[test]
    fn retry_token_round_trip_and_binding() {
        let (key, mut rng) = setup();
        let client: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let odcid = ConnectionId::new(&[1, 2, 3, 4, 5, 6, 7, 8]).unwrap();
        let t0 = Instant::from_millis(1000);
        let token = key.seal_retry(&mut rng, client, &odcid, t0);
        assert!(token.len() <= MAX_TOKEN_LEN);
        assert_eq!(
            key.open(&token, client, t0 + Duration::from_secs(1), LIFE, DAY),
            Ok(ValidToken::Retry {
                original_dcid: odcid
            })
        );
        let retry = Err(InvalidToken {
            kind: Some(TokenKind::Retry),
        });
        // Other port, other IP, expired, from the future, tampered.
        let other_port: SocketAddr = "10.0.0.1:5001".parse().unwrap();
        let other_ip: SocketAddr = "10.0.0.2:5000".parse().unwrap();
        assert_eq!(key.open(&token, other_port, t0, LIFE, DAY), retry);
        assert_eq!(key.open(&token, other_ip, t0, LIFE, DAY), retry);
        assert_eq!(
            key.open(&token, client, t0 + Duration::from_secs(11), LIFE, DAY),
            retry
        );
        assert_eq!(
            key.open(&token, client, Instant::from_millis(999), LIFE, DAY),
            retry
        );
        let mut bad = token.clone();
        bad[20] ^= 1;
        assert_eq!(key.open(&bad, client, t0, LIFE, DAY), retry);
        // Another endpoint's key.
        let mut other_rng = StackRng::new(RngSeed::Fixed(6));
        let other = TokenKey::new(&mut other_rng);
        assert_eq!(other.open(&token, client, t0, LIFE, DAY), retry);
    }

    #[test]
    fn new_token_binds_ip_not_port_and_kinds_do_not_mix() {
        let (key, mut rng) = setup();
        let client: SocketAddr = "[2001:db8::1]:443".parse().unwrap();
        let t0 = Instant::from_millis(5);
        let token = key.seal_new_token(&mut rng, client, t0);
        let later: SocketAddr = "[2001:db8::1]:9999".parse().unwrap();
        assert_eq!(
            key.open(&token, later, t0 + Duration::from_secs(3600), LIFE, DAY),
            Ok(ValidToken::NewToken)
        );
        let invalid = Err(InvalidToken {
            kind: Some(TokenKind::NewToken),
        });
        assert_eq!(key.open(&token, later, t0, LIFE, None), invalid);
        // Relabelled as a Retry token, it no longer authenticates.
        let mut relabelled = token.clone();
        relabelled[0] = TokenKind::Retry.byte();
        assert_eq!(
            key.open(&relabelled, later, t0, LIFE, DAY),
            Err(InvalidToken {
                kind: Some(TokenKind::Retry)
            })
        );
    }

    /// Two keys from the same static key open each other's tokens; the
    /// endpoint's random key does not.
    #[test]
    fn static_keys_open_each_others_tokens() {
        let (random, mut rng) = setup();
        let a = TokenKey::from_static(&[3; 32]);
        let b = TokenKey::from_static(&[3; 32]);
        let other = TokenKey::from_static(&[4; 32]);
        let client: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        let t0 = Instant::from_millis(5);
        let token = a.seal_new_token(&mut rng, client, t0);
        assert_eq!(
            b.open(&token, client, t0, LIFE, DAY),
            Ok(ValidToken::NewToken)
        );
        let invalid = Err(InvalidToken {
            kind: Some(TokenKind::NewToken),
        });
        assert_eq!(other.open(&token, client, t0, LIFE, DAY), invalid);
        assert_eq!(random.open(&token, client, t0, LIFE, DAY), invalid);
    }

    #[test]
    fn garbage_never_panics() {
        let (key, mut rng) = setup();
        let client: SocketAddr = "10.0.0.1:5000".parse().unwrap();
        for len in 0..80 {
            let mut t = vec![0u8; len];
            rng.fill_bytes(&mut t);
            for first in [0u8, 1, 2, 3] {
                if let Some(b) = t.first_mut() {
                    *b = first;
                }
                assert!(key
                    .open(&t, client, Instant::from_millis(1), LIFE, DAY)
                    .is_err());
            }
        }
    }
}
