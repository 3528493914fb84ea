//! HTTP message rules of RFC 9114 §4.1.2, §4.2 and §4.3: turning decoded
//! field lines into a [`Request`] or [`ResponseHead`] (or saying why the
//! message is malformed), and the field lines we send for them.

use crate::http::{Field, MessageError, Method, Request, ResponseHead};

use super::frame;
use super::qpack::{self, field_size, FieldLine};

/// Fields that are connection-specific in HTTP/1.1 and malformed in
/// HTTP/3 (RFC 9114 §4.2); `te` is allowed with the value `trailers` only.
const CONNECTION_SPECIFIC: [&str; 5] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

fn malformed(reason: impl Into<String>) -> MessageError {
    MessageError::Malformed(reason.into())
}

/// RFC 9110 §5.6.2 tchar, lowercase only (RFC 9114 §4.2: uppercase names
/// are malformed).
fn is_name_byte(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Checks a regular field name; `Err` says why it is malformed.
fn check_name(name: &[u8]) -> Result<(), MessageError> {
    if name.is_empty() {
        return Err(malformed("empty field name"));
    }
    if name.iter().any(u8::is_ascii_uppercase) {
        return Err(malformed("uppercase character in a field name"));
    }
    if !name.iter().all(|&b| is_name_byte(b)) {
        return Err(malformed("invalid character in a field name"));
    }
    Ok(())
}

/// A field value as text: NUL, CR and LF are malformed (RFC 9110 §5.5,
/// RFC 9114 §4.1.2); so are bytes that are not UTF-8, which [`Field`]
/// cannot hold.
fn value_text(value: Vec<u8>) -> Result<String, MessageError> {
    if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err(malformed("NUL, CR or LF in a field value"));
    }
    String::from_utf8(value).map_err(|_| malformed("field value is not UTF-8"))
}

/// Regular (non-pseudo) fields of a message, checked.
fn regular_field(name: Vec<u8>, value: Vec<u8>) -> Result<Field, MessageError> {
    check_name(&name)?;
    let name = String::from_utf8(name).map_err(|_| malformed("invalid field name"))?;
    let value = value_text(value)?;
    if CONNECTION_SPECIFIC.contains(&name.as_str()) {
        return Err(malformed(format!("connection-specific field '{name}'")));
    }
    if name == "te" && value != "trailers" {
        return Err(malformed("te other than 'trailers'"));
    }
    Ok(Field { name, value })
}

/// Splits field lines into pseudo-header fields and regular fields,
/// checking that every pseudo-header comes first (RFC 9114 §4.3).
fn split_pseudo(fields: Vec<FieldLine>) -> Result<(Vec<FieldLine>, Vec<Field>), MessageError> {
    let mut pseudo = Vec::new();
    let mut regular = Vec::new();
    for (name, value) in fields {
        if name.first() == Some(&b':') {
            if !regular.is_empty() {
                return Err(malformed("pseudo-header field after a regular field"));
            }
            pseudo.push((name, value));
        } else {
            regular.push(regular_field(name, value)?);
        }
    }
    Ok((pseudo, regular))
}

/// The `content-length` of a message's fields, if any: every value must be
/// the same decimal number (RFC 9110 §8.6).
pub fn content_length(fields: &[Field]) -> Result<Option<u64>, MessageError> {
    let mut length = None;
    for f in fields.iter().filter(|f| f.name == "content-length") {
        let v: u64 = f
            .value
            .trim()
            .parse()
            .map_err(|_| malformed("content-length is not a number"))?;
        if length.is_some_and(|l| l != v) {
            return Err(malformed("conflicting content-length values"));
        }
        length = Some(v);
    }
    Ok(length)
}

/// Builds a request from a decoded field section (RFC 9114 §4.3.1):
/// `:method`, `:scheme` and `:path` exactly once (`:authority` at most
/// once), pseudo-headers first, no other pseudo-header, valid regular
/// fields; an authority (`:authority` or `host`, equal if both) for http
/// and https. CONNECT (§4.4) is reported as malformed: this server does not
/// proxy.
pub fn parse_request(fields: Vec<FieldLine>) -> Result<Request, MessageError> {
    let (pseudo, headers) = split_pseudo(fields)?;
    let (mut method, mut scheme, mut path, mut authority) = (None, None, None, None);
    for (name, value) in pseudo {
        let slot = match name.as_slice() {
            b":method" => &mut method,
            b":scheme" => &mut scheme,
            b":path" => &mut path,
            b":authority" => &mut authority,
            _ => return Err(malformed("unknown or response pseudo-header in a request")),
        };
        if slot.is_some() {
            return Err(malformed("repeated pseudo-header field"));
        }
        *slot = Some(value_text(value)?);
    }
    let method = method.ok_or_else(|| malformed("missing :method"))?;
    if method == "CONNECT" {
        return Err(malformed("CONNECT is not supported"));
    }
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(malformed("invalid :method"));
    }
    let scheme = scheme.ok_or_else(|| malformed("missing :scheme"))?;
    let path = path.ok_or_else(|| malformed("missing :path"))?;
    let path_ok = path.starts_with('/') || (path == "*" && method == "OPTIONS");
    if !path_ok {
        return Err(malformed("invalid :path"));
    }
    let host = headers
        .iter()
        .find(|f| f.name == "host")
        .map(|f| f.value.clone());
    let authority = match (authority, host) {
        (Some(a), Some(h)) if a != h => {
            return Err(malformed(":authority and host differ"));
        }
        (Some(a), _) | (None, Some(a)) => Some(a),
        (None, None) => None,
    };
    let needs_authority = scheme == "http" || scheme == "https";
    match &authority {
        Some(a) if a.is_empty() => return Err(malformed("empty :authority or host")),
        None if needs_authority => return Err(malformed("missing :authority and host")),
        _ => {}
    }
    content_length(&headers)?;
    Ok(Request {
        method: Method::from_token(&method),
        path,
        authority,
        headers,
    })
}

/// Builds a response head from a decoded field section (RFC 9114 §4.3.2):
/// exactly one `:status` of three digits (101 is not allowed in HTTP/3),
/// no other pseudo-header, valid regular fields.
pub fn parse_response(fields: Vec<FieldLine>) -> Result<ResponseHead, MessageError> {
    let (pseudo, headers) = split_pseudo(fields)?;
    let mut status = None;
    for (name, value) in pseudo {
        if name != b":status" {
            return Err(malformed("pseudo-header other than :status in a response"));
        }
        if status.is_some() {
            return Err(malformed("repeated :status"));
        }
        status = Some(value);
    }
    let status = status.ok_or_else(|| malformed("missing :status"))?;
    let code = match status.as_slice() {
        [a, b, c] if [a, b, c].iter().all(|d| d.is_ascii_digit()) => {
            u16::from(a - b'0') * 100 + u16::from(b - b'0') * 10 + u16::from(c - b'0')
        }
        _ => return Err(malformed("invalid :status")),
    };
    if !(100..=599).contains(&code) || code == 101 {
        return Err(malformed("invalid :status"));
    }
    content_length(&headers)?;
    Ok(ResponseHead {
        status: code,
        headers,
    })
}

/// Checks a field the application asks us to send; a reason if HTTP/3
/// cannot carry it.
fn check_outgoing(field: &Field) -> Result<(), &'static str> {
    if check_name(field.name.as_bytes()).is_err() {
        return Err("a field name that HTTP/3 forbids (empty, uppercase or not a token)");
    }
    if field.value.bytes().any(|b| matches!(b, 0 | b'\r' | b'\n')) {
        return Err("NUL, CR or LF in a field value");
    }
    if CONNECTION_SPECIFIC.contains(&field.name.as_str())
        || (field.name == "te" && field.value != "trailers")
    {
        return Err("a connection-specific field");
    }
    Ok(())
}

/// The field lines of a request: `:method`, `:scheme` https, `:authority`,
/// `:path`, then the headers. `Err` if the request has no authority (HTTP/3
/// requires one for https) or carries a field HTTP/3 forbids.
pub fn request_fields(request: &Request) -> Result<Vec<(String, String)>, &'static str> {
    let authority = request
        .authority
        .as_deref()
        .ok_or("HTTP/3 requests need an authority (Request::authority)")?;
    if !request.path.starts_with('/') && request.path != "*" {
        return Err("the path must start with '/'");
    }
    let method = request.method.as_str();
    if method.is_empty() || !method.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("invalid method token");
    }
    let mut out = vec![
        (":method".to_string(), method.to_string()),
        (":scheme".to_string(), "https".to_string()),
        (":authority".to_string(), authority.to_string()),
        (":path".to_string(), request.path.clone()),
    ];
    for f in &request.headers {
        check_outgoing(f)?;
        out.push((f.name.clone(), f.value.clone()));
    }
    Ok(out)
}

/// The field lines of a response head: `:status`, then the headers.
pub fn response_fields(head: &ResponseHead) -> Result<Vec<(String, String)>, &'static str> {
    if !(100..=599).contains(&head.status) || head.status == 101 {
        return Err("status outside 100..=599, or 101 (not in HTTP/3)");
    }
    let mut out = vec![(":status".to_string(), head.status.to_string())];
    for f in &head.headers {
        check_outgoing(f)?;
        out.push((f.name.clone(), f.value.clone()));
    }
    Ok(out)
}

/// RFC 9114 §4.2.2 size of fields we are about to send.
pub fn section_size(fields: &[(String, String)]) -> u64 {
    fields
        .iter()
        .map(|(n, v)| field_size(n.as_bytes(), v.as_bytes()))
        .fold(0u64, u64::saturating_add)
}

/// A HEADERS frame carrying `fields`, QPACK-encoded. Refused if the field
/// section exceeds the peer's SETTINGS_MAX_FIELD_SECTION_SIZE (RFC 9114
/// §4.2.2: an endpoint must not send what the peer said it would refuse).
pub fn headers_frame(
    fields: &[(String, String)],
    peer_limit: Option<u64>,
) -> Result<Vec<u8>, &'static str> {
    if peer_limit.is_some_and(|limit| section_size(fields) > limit) {
        return Err("the field section exceeds the peer's SETTINGS_MAX_FIELD_SECTION_SIZE");
    }
    let mut section = Vec::new();
    qpack::encode_section(
        fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())),
        &mut section,
    );
    let mut frame = Vec::with_capacity(section.len() + 16);
    frame::write_frame(&mut frame, frame::HEADERS, &section);
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(fields: &[(&str, &str)]) -> Vec<FieldLine> {
        fields
            .iter()
            .map(|(n, v)| (n.as_bytes().to_vec(), v.as_bytes().to_vec()))
            .collect()
    }

    const GOOD: [(&str, &str); 4] = [
        (":method", "GET"),
        (":scheme", "https"),
        (":authority", "example.com"),
        (":path", "/a?b=1"),
    ];

    #[test]
    fn good_request() {
        let mut fields = GOOD.to_vec();
        fields.push(("user-agent", "artq"));
        let req = parse_request(lines(&fields)).unwrap();
        assert_eq!(req.method, Method::Get);
        assert_eq!(req.path, "/a?b=1");
        assert_eq!(req.authority.as_deref(), Some("example.com"));
        assert_eq!(req.headers, vec![Field::new("user-agent", "artq")]);
        // host instead of :authority.
        let req = parse_request(lines(&[
            (":method", "HEAD"),
            (":scheme", "https"),
            (":path", "/"),
            ("host", "h.example"),
        ]))
        .unwrap();
        assert_eq!(req.method, Method::Head);
        assert_eq!(req.authority.as_deref(), Some("h.example"));
    }

    #[test]
    fn malformed_requests() {
        let bad = |fields: &[(&str, &str)]| parse_request(lines(fields)).is_err();
        fn with(extra: (&'static str, &'static str)) -> Vec<(&'static str, &'static str)> {
            let mut f = GOOD.to_vec();
            f.push(extra);
            f
        }
        assert!(bad(&GOOD[1..])); // no :method
        assert!(bad(&[GOOD[0], GOOD[2], GOOD[3]])); // no :scheme
        assert!(bad(&GOOD[..3])); // no :path
        assert!(bad(&[GOOD[0], GOOD[1], GOOD[3]])); // no authority for https
        assert!(bad(&with((":method", "GET")))); // repeated
        assert!(bad(&with((":status", "200")))); // response pseudo-header
        assert!(bad(&with((":protocol", "websocket")))); // unknown pseudo-header
        assert!(bad(&with(("User-Agent", "x")))); // uppercase
        assert!(bad(&with(("connection", "close"))));
        assert!(bad(&with(("transfer-encoding", "chunked"))));
        assert!(bad(&with(("te", "gzip"))));
        assert!(!bad(&with(("te", "trailers"))));
        assert!(bad(&with(("x", "a\nb"))));
        assert!(bad(&with(("bad name", "x"))));
        assert!(bad(&with(("host", "other.example"))));
        assert!(bad(&with(("content-length", "ten"))));
        // A pseudo-header after a regular field.
        assert!(bad(&[
            GOOD[0],
            GOOD[1],
            ("accept", "*/*"),
            GOOD[2],
            GOOD[3]
        ]));
        assert!(bad(&[
            (":method", "GET"),
            (":scheme", "https"),
            (":authority", "a"),
            (":path", "")
        ]));
        assert!(bad(&[(":method", "CONNECT"), (":authority", "a:443")]));
        // Non-UTF-8 value.
        let mut raw = lines(&GOOD);
        raw.push((b"x".to_vec(), vec![0xff]));
        assert!(parse_request(raw).is_err());
    }

    #[test]
    fn responses() {
        let head = parse_response(lines(&[(":status", "200"), ("content-length", "5")])).unwrap();
        assert_eq!(head.status, 200);
        assert_eq!(head.content_length(), Some(5));
        let bad = |fields: &[(&str, &str)]| parse_response(lines(fields)).is_err();
        assert!(bad(&[]));
        assert!(bad(&[(":status", "20")]));
        assert!(bad(&[(":status", "2000")]));
        assert!(bad(&[(":status", "101")]));
        assert!(bad(&[(":status", "099")]));
        assert!(bad(&[(":status", "200"), (":status", "200")]));
        assert!(bad(&[(":status", "200"), (":path", "/")]));
        assert!(bad(&[("server", "x"), (":status", "200")]));
        assert!(bad(&[(":status", "200"), ("Server", "x")]));
    }

    #[test]
    fn outgoing_fields() {
        let req = Request {
            authority: Some("localhost:4433".into()),
            ..Request::get("/file")
        };
        let fields = request_fields(&req).unwrap();
        assert_eq!(fields[1], (":scheme".to_string(), "https".to_string()));
        assert!(request_fields(&Request::get("/")).is_err());
        let mut with_conn = req.clone();
        with_conn.headers.push(Field::new("connection", "close"));
        assert!(request_fields(&with_conn).is_err());
        let head = ResponseHead::new(404).with("content-length", "0");
        assert_eq!(response_fields(&head).unwrap().len(), 2);
        assert!(response_fields(&ResponseHead::new(600)).is_err());
        assert_eq!(section_size(&[("a".into(), "bc".into())]), 35);
    }
}
