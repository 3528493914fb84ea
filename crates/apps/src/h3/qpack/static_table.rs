//! The QPACK static table (RFC 9204 Appendix A): 99 fixed (name, value)
//! entries that field lines reference by index, so common fields cost one
//! or two bytes.

/// Entries in the static table; an index at or past this is invalid
/// (QPACK_DECOMPRESSION_FAILED, RFC 9204 §3.1).
pub const LEN: usize = 99;

/// RFC 9204 Appendix A, in index order.
#[rustfmt::skip]
pub const ENTRIES: [(&[u8], &[u8]); LEN] = [
    /*  0 */ (b":authority", b""),
    /*  1 */ (b":path", b"/"),
    /*  2 */ (b"age", b"0"),
    /*  3 */ (b"content-disposition", b""),
    /*  4 */ (b"content-length", b"0"),
    /*  5 */ (b"cookie", b""),
    /*  6 */ (b"date", b""),
    /*  7 */ (b"etag", b""),
    /*  8 */ (b"if-modified-since", b""),
    /*  9 */ (b"if-none-match", b""),
    /* 10 */ (b"last-modified", b""),
    /* 11 */ (b"link", b""),
    /* 12 */ (b"location", b""),
    /* 13 */ (b"referer", b""),
    /* 14 */ (b"set-cookie", b""),
    /* 15 */ (b":method", b"CONNECT"),
    /* 16 */ (b":method", b"DELETE"),
    /* 17 */ (b":method", b"GET"),
    /* 18 */ (b":method", b"HEAD"),
    /* 19 */ (b":method", b"OPTIONS"),
    /* 20 */ (b":method", b"POST"),
    /* 21 */ (b":method", b"PUT"),
    /* 22 */ (b":scheme", b"http"),
    /* 23 */ (b":scheme", b"https"),
    /* 24 */ (b":status", b"103"),
    /* 25 */ (b":status", b"200"),
    /* 26 */ (b":status", b"304"),
    /* 27 */ (b":status", b"404"),
    /* 28 */ (b":status", b"503"),
    /* 29 */ (b"accept", b"*/*"),
    /* 30 */ (b"accept", b"application/dns-message"),
    /* 31 */ (b"accept-encoding", b"gzip, deflate, br"),
    /* 32 */ (b"accept-ranges", b"bytes"),
    /* 33 */ (b"access-control-allow-headers", b"cache-control"),
    /* 34 */ (b"access-control-allow-headers", b"content-type"),
    /* 35 */ (b"access-control-allow-origin", b"*"),
    /* 36 */ (b"cache-control", b"max-age=0"),
    /* 37 */ (b"cache-control", b"max-age=2592000"),
    /* 38 */ (b"cache-control", b"max-age=604800"),
    /* 39 */ (b"cache-control", b"no-cache"),
    /* 40 */ (b"cache-control", b"no-store"),
    /* 41 */ (b"cache-control", b"public, max-age=31536000"),
    /* 42 */ (b"content-encoding", b"br"),
    /* 43 */ (b"content-encoding", b"gzip"),
    /* 44 */ (b"content-type", b"application/dns-message"),
    /* 45 */ (b"content-type", b"application/javascript"),
    /* 46 */ (b"content-type", b"application/json"),
    /* 47 */ (b"content-type", b"application/x-www-form-urlencoded"),
    /* 48 */ (b"content-type", b"image/gif"),
    /* 49 */ (b"content-type", b"image/jpeg"),
    /* 50 */ (b"content-type", b"image/png"),
    /* 51 */ (b"content-type", b"text/css"),
    /* 52 */ (b"content-type", b"text/html; charset=utf-8"),
    /* 53 */ (b"content-type", b"text/plain"),
    /* 54 */ (b"content-type", b"text/plain;charset=utf-8"),
    /* 55 */ (b"range", b"bytes=0-"),
    /* 56 */ (b"strict-transport-security", b"max-age=31536000"),
    /* 57 */ (b"strict-transport-security", b"max-age=31536000; includesubdomains"),
    /* 58 */ (b"strict-transport-security", b"max-age=31536000; includesubdomains; preload"),
    /* 59 */ (b"vary", b"accept-encoding"),
    /* 60 */ (b"vary", b"origin"),
    /* 61 */ (b"x-content-type-options", b"nosniff"),
    /* 62 */ (b"x-xss-protection", b"1; mode=block"),
    /* 63 */ (b":status", b"100"),
    /* 64 */ (b":status", b"204"),
    /* 65 */ (b":status", b"206"),
    /* 66 */ (b":status", b"302"),
    /* 67 */ (b":status", b"400"),
    /* 68 */ (b":status", b"403"),
    /* 69 */ (b":status", b"421"),
    /* 70 */ (b":status", b"425"),
    /* 71 */ (b":status", b"500"),
    /* 72 */ (b"accept-language", b""),
    /* 73 */ (b"access-control-allow-credentials", b"FALSE"),
    /* 74 */ (b"access-control-allow-credentials", b"TRUE"),
    /* 75 */ (b"access-control-allow-headers", b"*"),
    /* 76 */ (b"access-control-allow-methods", b"get"),
    /* 77 */ (b"access-control-allow-methods", b"get, post, options"),
    /* 78 */ (b"access-control-allow-methods", b"options"),
    /* 79 */ (b"access-control-expose-headers", b"content-length"),
    /* 80 */ (b"access-control-request-headers", b"content-type"),
    /* 81 */ (b"access-control-request-method", b"get"),
    /* 82 */ (b"access-control-request-method", b"post"),
    /* 83 */ (b"alt-svc", b"clear"),
    /* 84 */ (b"authorization", b""),
    /* 85 */ (b"content-security-policy", b"script-src 'none'; object-src 'none'; base-uri 'none'"),
    /* 86 */ (b"early-data", b"1"),
    /* 87 */ (b"expect-ct", b""),
    /* 88 */ (b"forwarded", b""),
    /* 89 */ (b"if-range", b""),
    /* 90 */ (b"origin", b""),
    /* 91 */ (b"purpose", b"prefetch"),
    /* 92 */ (b"server", b""),
    /* 93 */ (b"timing-allow-origin", b"*"),
    /* 94 */ (b"upgrade-insecure-requests", b"1"),
    /* 95 */ (b"user-agent", b""),
    /* 96 */ (b"x-forwarded-for", b""),
    /* 97 */ (b"x-frame-options", b"deny"),
    /* 98 */ (b"x-frame-options", b"sameorigin"),
];

/// The entry at `index`, if there is one.
pub fn get(index: u64) -> Option<(&'static [u8], &'static [u8])> {
    usize::try_from(index)
        .ok()
        .and_then(|i| ENTRIES.get(i))
        .copied()
}

/// What the table holds for a field: the index of an entry with the same
/// name and value, or else of the first entry with the same name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    /// An entry equal to the field: an indexed field line.
    Full(u64),
    /// An entry with the field's name: a literal with a name reference.
    Name(u64),
    /// Nothing: a literal with a literal name.
    None,
}

/// Looks `name` and `value` up (a linear scan: 99 short entries, a few
/// fields per message).
pub fn find(name: &[u8], value: &[u8]) -> Match {
    let mut by_name = None;
    for (i, (n, v)) in (0u64..).zip(ENTRIES.iter()) {
        if *n == name {
            if *v == value {
                return Match::Full(i);
            }
            by_name.get_or_insert(i);
        }
    }
    by_name.map_or(Match::None, Match::Name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn landmarks_of_appendix_a() {
        assert_eq!(get(0), Some((&b":authority"[..], &b""[..])));
        assert_eq!(get(17), Some((&b":method"[..], &b"GET"[..])));
        assert_eq!(get(25), Some((&b":status"[..], &b"200"[..])));
        assert_eq!(get(98), Some((&b"x-frame-options"[..], &b"sameorigin"[..])));
        assert_eq!(get(99), None);
        assert_eq!(get(u64::MAX), None);
    }

    #[test]
    fn names_are_lowercase_and_lookups_agree() {
        for (i, (name, value)) in (0u64..).zip(ENTRIES.iter()) {
            assert!(!name.iter().any(u8::is_ascii_uppercase), "{i}");
            match find(name, value) {
                Match::Full(j) => assert_eq!(get(j), Some((*name, *value))),
                other => panic!("{i}: {other:?}"),
            }
        }
        assert_eq!(find(b":status", b"299"), Match::Name(24));
        assert_eq!(find(b"x-custom", b"1"), Match::None);
    }
}
