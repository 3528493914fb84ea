//! HTTP/3 frames (RFC 9114 §7): the frame header, the frame types, which
//! stream may carry which frame, and the SETTINGS payload.
//!
//! A frame is `Type (varint) | Length (varint) | Payload`. The header is at
//! most 16 bytes, and [`header_len_needed`] tells how many of them to read
//! before it can be parsed, so a reader never consumes a byte of the
//! payload it did not mean to (the client hands DATA payload straight to
//! the application).

use wire::coding::decode_varint;
use wire::BufMutExt;

use super::error::{H3Error, H3_FRAME_ERROR, H3_FRAME_UNEXPECTED, H3_SETTINGS_ERROR};

/// DATA: a piece of message content.
pub const DATA: u64 = 0x00;
/// HEADERS: a QPACK-encoded field section.
pub const HEADERS: u64 = 0x01;
/// CANCEL_PUSH: a server push is abandoned.
pub const CANCEL_PUSH: u64 = 0x03;
/// SETTINGS: the sender's configuration, first on its control stream.
pub const SETTINGS: u64 = 0x04;
/// PUSH_PROMISE: a server push is announced on a request stream.
pub const PUSH_PROMISE: u64 = 0x05;
/// GOAWAY: graceful shutdown, with the first ID that will not be processed.
pub const GOAWAY: u64 = 0x07;
/// MAX_PUSH_ID: how many pushes the client allows.
pub const MAX_PUSH_ID: u64 = 0x0d;

/// Longest frame header: two 8-byte varints.
pub const MAX_HEADER_LEN: usize = 16;

/// SETTINGS_QPACK_MAX_TABLE_CAPACITY (RFC 9204 §5).
pub const SETTING_QPACK_MAX_TABLE_CAPACITY: u64 = 0x01;
/// SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114 §7.2.4.1).
pub const SETTING_MAX_FIELD_SECTION_SIZE: u64 = 0x06;
/// SETTINGS_QPACK_BLOCKED_STREAMS (RFC 9204 §5).
pub const SETTING_QPACK_BLOCKED_STREAMS: u64 = 0x07;

/// Frame types HTTP/2 defined and HTTP/3 reserves: PRIORITY, PING,
/// WINDOW_UPDATE, CONTINUATION (RFC 9114 §7.2.8). Receiving one is
/// H3_FRAME_UNEXPECTED.
pub fn is_http2_only(ty: u64) -> bool {
    matches!(ty, 0x02 | 0x06 | 0x08 | 0x09)
}

/// A frame's type and payload length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHeader {
    /// The frame type.
    pub ty: u64,
    /// Payload bytes that follow the header.
    pub len: u64,
}

/// Bytes of a varint whose first byte is `first` (RFC 9000 §16).
fn varint_len_from_first(first: u8) -> usize {
    1 << (first >> 6)
}

/// How many header bytes must be read, given the `have` already read: 1
/// before anything is known, then the whole type varint plus the first
/// byte of the length, then the whole header. Equal to `have.len()` once
/// the header is complete.
pub fn header_len_needed(have: &[u8]) -> usize {
    let Some(&first) = have.first() else {
        return 1;
    };
    let type_len = varint_len_from_first(first);
    match have.get(type_len) {
        None => type_len + 1,
        Some(&len_first) => type_len + varint_len_from_first(len_first),
    }
}

/// Parses a complete frame header from the start of `buf`: the header and
/// its length in bytes, or `None` if `buf` holds only part of it.
pub fn parse_header(buf: &[u8]) -> Option<(FrameHeader, usize)> {
    let (ty, type_len) = decode_varint(buf).ok()?;
    let (len, len_len) = decode_varint(buf.get(type_len..)?).ok()?;
    Some((FrameHeader { ty, len }, type_len + len_len))
}

/// Appends a frame header.
pub fn write_header(out: &mut Vec<u8>, ty: u64, len: u64) {
    out.put_varint(ty);
    out.put_varint(len);
}

/// Appends a whole frame with `payload`.
pub fn write_frame(out: &mut Vec<u8>, ty: u64, payload: &[u8]) {
    write_header(out, ty, payload.len() as u64);
    out.extend_from_slice(payload);
}

/// Parses the payload of GOAWAY, MAX_PUSH_ID or CANCEL_PUSH: exactly one
/// varint (RFC 9114 §7.1: a payload with more or less is H3_FRAME_ERROR).
pub fn parse_single_varint(payload: &[u8]) -> Result<u64, H3Error> {
    match decode_varint(payload) {
        Ok((v, n)) if n == payload.len() => Ok(v),
        _ => Err(H3Error::frame("frame payload is not exactly one varint")),
    }
}

/// Where a frame arrived, to decide whether it may be there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamKind {
    /// A control stream.
    Control,
    /// A request stream (client-initiated bidirectional).
    Request,
}

/// RFC 9114 §7.2 Table 1: an error if a frame of type `ty` may never
/// appear on a stream of `kind`. Frames that are allowed there (or are
/// unknown) give `Ok`; whether they come in the right order is the stream's
/// business. PUSH_PROMISE is left to the caller, whose error depends on the
/// role (a server never accepts one; a client that sent no MAX_PUSH_ID
/// answers H3_ID_ERROR).
pub fn check_allowed(ty: u64, kind: StreamKind) -> Result<(), H3Error> {
    let allowed = match ty {
        DATA | HEADERS => kind == StreamKind::Request,
        PUSH_PROMISE => true,
        CANCEL_PUSH | SETTINGS | GOAWAY | MAX_PUSH_ID => kind == StreamKind::Control,
        t if is_http2_only(t) => false,
        _ => true,
    };
    if allowed {
        Ok(())
    } else {
        Err(H3Error::new(
            H3_FRAME_UNEXPECTED,
            match kind {
                StreamKind::Control => "frame not allowed on a control stream",
                StreamKind::Request => "frame not allowed on a request stream",
            },
        ))
    }
}

/// The settings a peer sent (RFC 9114 §7.2.4); `None` for each one it
/// left at its default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// SETTINGS_MAX_FIELD_SECTION_SIZE (default: unlimited).
    pub max_field_section_size: Option<u64>,
    /// SETTINGS_QPACK_MAX_TABLE_CAPACITY (default 0).
    pub qpack_max_table_capacity: Option<u64>,
    /// SETTINGS_QPACK_BLOCKED_STREAMS (default 0).
    pub qpack_blocked_streams: Option<u64>,
}

impl Settings {
    /// Decodes a SETTINGS payload. Errors: a truncated pair
    /// (H3_FRAME_ERROR), a repeated identifier or an HTTP/2 identifier
    /// 0x00, 0x02..=0x05 (H3_SETTINGS_ERROR). Unknown identifiers,
    /// reserved ones included, are ignored (RFC 9114 §7.2.4).
    pub fn decode(payload: &[u8]) -> Result<Settings, H3Error> {
        let mut settings = Settings::default();
        let mut seen = Vec::new();
        let mut rest = payload;
        while !rest.is_empty() {
            let (id, n) = decode_varint(rest)
                .map_err(|_| H3Error::new(H3_FRAME_ERROR, "truncated setting identifier"))?;
            rest = rest.get(n..).unwrap_or_default();
            let (value, n) = decode_varint(rest)
                .map_err(|_| H3Error::new(H3_FRAME_ERROR, "truncated setting value"))?;
            rest = rest.get(n..).unwrap_or_default();
            seen.push(id);
            match id {
                0x00 | 0x02..=0x05 => {
                    return Err(H3Error::new(H3_SETTINGS_ERROR, "HTTP/2 setting identifier"))
                }
                SETTING_QPACK_MAX_TABLE_CAPACITY => settings.qpack_max_table_capacity = Some(value),
                SETTING_MAX_FIELD_SECTION_SIZE => settings.max_field_section_size = Some(value),
                SETTING_QPACK_BLOCKED_STREAMS => settings.qpack_blocked_streams = Some(value),
                _ => {}
            }
        }
        seen.sort_unstable();
        if seen.windows(2).any(|w| w[0] == w[1]) {
            return Err(H3Error::new(
                H3_SETTINGS_ERROR,
                "duplicate setting identifier",
            ));
        }
        Ok(settings)
    }

    /// Appends the SETTINGS payload (the settings that are `Some`).
    pub fn encode(&self, out: &mut Vec<u8>) {
        let pairs = [
            (
                SETTING_QPACK_MAX_TABLE_CAPACITY,
                self.qpack_max_table_capacity,
            ),
            (SETTING_MAX_FIELD_SECTION_SIZE, self.max_field_section_size),
            (SETTING_QPACK_BLOCKED_STREAMS, self.qpack_blocked_streams),
        ];
        for (id, value) in pairs {
            if let Some(v) = value {
                out.put_varint(id);
                out.put_varint(v);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn header_round_trip_and_needed_bytes() {
        for (ty, len) in [
            (0, 0),
            (1, 63),
            (0x21, 64),
            (0x3fff, 1 << 20),
            (1 << 40, (1 << 62) - 1),
        ] {
            let mut buf = Vec::new();
            write_header(&mut buf, ty, len);
            assert!(buf.len() <= MAX_HEADER_LEN);
            // Reading as told never reads past the header.
            let mut have = 0;
            loop {
                let need = header_len_needed(&buf[..have]);
                assert!(need <= buf.len());
                if need == have {
                    break;
                }
                have = need;
            }
            assert_eq!(have, buf.len());
            assert_eq!(
                parse_header(&buf),
                Some((FrameHeader { ty, len }, buf.len()))
            );
            assert_eq!(parse_header(&buf[..buf.len() - 1]), None);
        }
    }

    #[test]
    fn settings_round_trip() {
        let s = Settings {
            max_field_section_size: Some(16384),
            qpack_max_table_capacity: Some(0),
            qpack_blocked_streams: Some(0),
        };
        let mut buf = Vec::new();
        s.encode(&mut buf);
        assert_eq!(Settings::decode(&buf), Ok(s));
        assert_eq!(Settings::decode(&[]), Ok(Settings::default()));
    }

    #[test]
    fn settings_errors() {
        let code = |bytes: &[u8]| Settings::decode(bytes).map_err(|e| e.code);
        // Duplicates, also of unknown identifiers.
        assert_eq!(code(&[0x06, 0x01, 0x06, 0x02]), Err(H3_SETTINGS_ERROR));
        assert_eq!(code(&[0x21, 0x01, 0x21, 0x02]), Err(H3_SETTINGS_ERROR));
        for h2 in [0x00, 0x02, 0x03, 0x04, 0x05] {
            assert_eq!(code(&[h2, 0x00]), Err(H3_SETTINGS_ERROR), "{h2}");
        }
        // Unknown and reserved identifiers are ignored.
        assert_eq!(
            code(&[0x21, 0x05, 0x08, 0x01, 0x33, 0x01]),
            Ok(Settings::default())
        );
        // A pair cut short is a frame error.
        assert_eq!(code(&[0x06]), Err(H3_FRAME_ERROR));
        assert_eq!(code(&[0x06, 0x40]), Err(H3_FRAME_ERROR));
    }

    #[test]
    fn single_varint_payloads() {
        assert_eq!(parse_single_varint(&[0x04]), Ok(4));
        assert_eq!(parse_single_varint(&[0x40, 0x04]), Ok(4));
        assert_eq!(
            parse_single_varint(&[]).map_err(|e| e.code),
            Err(H3_FRAME_ERROR)
        );
        assert_eq!(
            parse_single_varint(&[4, 0]).map_err(|e| e.code),
            Err(H3_FRAME_ERROR)
        );
        assert_eq!(
            parse_single_varint(&[0x40]).map_err(|e| e.code),
            Err(H3_FRAME_ERROR)
        );
    }

    #[test]
    fn frame_placement() {
        use StreamKind::*;
        assert!(check_allowed(DATA, Request).is_ok());
        assert!(check_allowed(HEADERS, Request).is_ok());
        assert!(check_allowed(SETTINGS, Control).is_ok());
        assert!(check_allowed(0x21, Control).is_ok());
        assert!(check_allowed(0x21, Request).is_ok());
        let unexpected = |ty, kind| check_allowed(ty, kind).map_err(|e| e.code);
        assert_eq!(unexpected(DATA, Control), Err(H3_FRAME_UNEXPECTED));
        assert_eq!(unexpected(SETTINGS, Request), Err(H3_FRAME_UNEXPECTED));
        assert_eq!(unexpected(GOAWAY, Request), Err(H3_FRAME_UNEXPECTED));
        for h2 in [0x02, 0x06, 0x08, 0x09] {
            assert_eq!(unexpected(h2, Control), Err(H3_FRAME_UNEXPECTED));
            assert_eq!(unexpected(h2, Request), Err(H3_FRAME_UNEXPECTED));
        }
    }

    proptest! {
        #[test]
        fn settings_decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(s) = Settings::decode(&data) {
                let mut again = Vec::new();
                s.encode(&mut again);
                prop_assert_eq!(Settings::decode(&again), Ok(s));
            }
        }

        #[test]
        fn header_parse_never_panics(data in proptest::collection::vec(any::<u8>(), 0..20)) {
            let need = header_len_needed(&data);
            prop_assert!(need <= MAX_HEADER_LEN);
            if let Some((_, n)) = parse_header(&data) {
                prop_assert!(n <= data.len());
                prop_assert_eq!(header_len_needed(&data[..n]), n);
            }
        }
    }
}
