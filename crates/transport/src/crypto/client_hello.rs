//! Reading a client's QUIC transport parameters out of its ClientHello
//! before TLS does (RFC 8446 §4.1.2, RFC 9001 §8.2).
//!
//! Why: compatible version negotiation (RFC 9368 §2.3) lets a server answer
//! a v1 first flight in v2. The version decides the HKDF labels of every key
//! rustls derives, and rustls fixes it when its session is created, together
//! with the server's own transport parameters (which must name the chosen
//! version). So the server has to know the client's version_information
//! before it creates its TLS session, i.e. before TLS reads the ClientHello.
//!
//! This is the one place artq reads TLS syntax itself. It only walks the
//! length-prefixed structure to the quic_transport_parameters extension;
//! rustls still parses and checks the whole message afterwards. Never
//! panics; every length is checked against the bytes present.

use wire::coding::Reader;

/// TLS handshake message type of a ClientHello (RFC 8446 §4).
const CLIENT_HELLO: u8 = 1;
/// The quic_transport_parameters extension (RFC 9001 §8.2).
const QUIC_TRANSPORT_PARAMETERS: u16 = 0x39;
/// Longest ClientHello accepted for this peek: 64 KiB, far above real ones
/// (about 1.9 KB with post-quantum key shares). Bounds what a server
/// buffers before deciding the version.
pub const MAX_CLIENT_HELLO: usize = 64 * 1024;

/// What the start of the CRYPTO stream holds so far.
#[derive(Debug, PartialEq, Eq)]
pub enum Peek<'a> {
    /// Not all of the ClientHello has arrived.
    Incomplete,
    /// A complete ClientHello; its transport parameters extension, if any.
    Complete(Option<&'a [u8]>),
    /// Not a ClientHello, malformed, or longer than [`MAX_CLIENT_HELLO`].
    /// TLS will refuse it; the caller just stops peeking.
    Invalid,
}

/// Looks at the contiguous start of a client's Initial CRYPTO stream.
pub fn peek_transport_parameters(stream: &[u8]) -> Peek<'_> {
    let Some(&ty) = stream.first() else {
        return Peek::Incomplete;
    };
    if ty != CLIENT_HELLO {
        return Peek::Invalid;
    }
    let Some(len) = stream.get(1..4) else {
        return Peek::Incomplete;
    };
    let len = usize::from(len[0]) << 16 | usize::from(len[1]) << 8 | usize::from(len[2]);
    if len > MAX_CLIENT_HELLO {
        return Peek::Invalid;
    }
    let Some(body) = stream.get(4..4 + len) else {
        return Peek::Incomplete;
    };
    match find_extension(body) {
        Ok(ext) => Peek::Complete(ext),
        Err(_) => Peek::Invalid,
    }
}

/// RFC 8446 §4.1.2: legacy_version, random, legacy_session_id,
/// cipher_suites, legacy_compression_methods, then the extensions.
fn find_extension(body: &[u8]) -> Result<Option<&[u8]>, wire::DecodeError> {
    let mut r = Reader::new(body);
    r.skip(2 + 32)?;
    let session_id = r.u8()?;
    r.skip(usize::from(session_id))?;
    let suites = r.u16()?;
    r.skip(usize::from(suites))?;
    let compression = r.u8()?;
    r.skip(usize::from(compression))?;
    if r.is_empty() {
        return Ok(None);
    }
    let ext_len = r.u16()?;
    let mut exts = Reader::new(r.bytes(usize::from(ext_len))?);
    while !exts.is_empty() {
        let ty = exts.u16()?;
        let len = exts.u16()?;
        let data = exts.bytes(usize::from(len))?;
        if ty == QUIC_TRANSPORT_PARAMETERS {
            return Ok(Some(data));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 9001 A.2's ClientHello (the CRYPTO frame's data): its
    /// transport parameters are found, and every prefix is incomplete.
    #[test]
    fn finds_the_rfc_clienthellos_parameters() {
        let frame =
            hex::decode(crate::crypto::test_vectors::CLIENT_INITIAL_CRYPTO_FRAME).expect("hex");
        // CRYPTO frame: type 0x06, offset 0x00, length 0x40f1, data.
        let hello = &frame[4..];
        assert_eq!(hello.len(), 0xf1);
        let Peek::Complete(Some(params)) = peek_transport_parameters(hello) else {
            panic!("no parameters found");
        };
        assert_eq!(
            hex::encode(params),
            "0408ffffffffffffffff05048000ffff07048000ffff08011001048000\
             75300901100f088394c8f03e51570806048000ffff"
        );
        for end in 0..hello.len() {
            assert_eq!(
                peek_transport_parameters(&hello[..end]),
                Peek::Incomplete,
                "prefix of {end} bytes"
            );
        }
        assert_eq!(peek_transport_parameters(&[2, 0, 0, 0]), Peek::Invalid);
        assert_eq!(peek_transport_parameters(&[1, 0xff, 0, 0]), Peek::Invalid);
        assert_eq!(peek_transport_parameters(&[1, 0, 0, 1, 3]), Peek::Invalid);
    }

    proptest! {
        #[test]
        fn never_panics(data in proptest::collection::vec(any::<u8>(), 0..600)) {
            let _ = peek_transport_parameters(&data);
            let mut hello = vec![1, 0, (data.len() >> 8) as u8, data.len() as u8];
            hello.extend_from_slice(&data);
            let _ = peek_transport_parameters(&hello);
        }
    }
}
