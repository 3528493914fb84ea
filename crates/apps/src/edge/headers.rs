//! Which header fields cross the edge, in each direction, and which the edge
//! adds.
//!
//! Two hops meet at the edge: a QUIC connection to the client (HTTP/3 or
//! hq-interop) and a TCP connection to the origin (HTTP/1.1, [`super::http1`]).
//! Fields that describe one hop (RFC 9110 §7.6.1: `connection` and the
//! fields it names, `keep-alive`, `transfer-encoding`, ...) stay on their
//! hop; end-to-end fields are forwarded. HTTP/3 goes further and makes a
//! message carrying connection-specific fields malformed (RFC 9114 §4.2),
//! so a response forwarded with one would be refused by the client.
//!
//! The two functions here are pure: fields in, fields out. They never fail:
//! a field that cannot be carried (a name that is not a token, a value with
//! CR, LF or NUL, which HTTP/3 forbids and which in HTTP/1.1 would split a
//! message) is dropped, never forwarded and never "repaired".

use std::net::IpAddr;

use super::http1::{content_length, Framing};
use crate::http::{Field, Request, ResponseHead};
use crate::protocol::Protocol;

/// Fields that describe one connection, never forwarded in either direction
/// (RFC 9110 §7.6.1 and RFC 9114 §4.2), lowercase. Every name listed in a
/// message's own `connection` field is treated the same way.
///
/// `proxy-authenticate` and `proxy-authorization` are for the proxy they
/// are addressed to (RFC 9110 §11.7), which is this edge: the edge does not
/// authenticate, so they go no further. `te` is dropped whole, `trailers`
/// included: the edge drops trailers ([`super::http1`]).
pub const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
    "proxy-authenticate",
    "proxy-authorization",
];

/// The edge's name in `via` fields (RFC 9110 §7.6.3 allows a pseudonym in
/// place of a host name; it also keeps internal host names private).
pub const VIA_PSEUDONYM: &str = "artq";

/// The `via` received-protocol of what the edge received from the origin:
/// the edge always speaks HTTP/1.1 to origins. (An HTTP/1.0 origin's
/// answer is labelled `1.1` too: the head the edge forwards is its own
/// HTTP/1.1 reading of it.)
pub const ORIGIN_PROTOCOL: &str = "1.1";

/// The `via` received-protocol (RFC 9110 §7.6.3: a version alone means
/// HTTP) of a request received over `protocol`: `3` for HTTP/3, `0.9` for
/// hq-interop, which is HTTP/0.9's `GET /path` carried over QUIC streams.
/// This is what the proxy passes to [`origin_request_fields`].
pub fn received_protocol(protocol: Protocol) -> &'static str {
    match protocol {
        Protocol::H3 => "3",
        Protocol::HqInterop => "0.9",
    }
}

/// Whether `s` is a token (RFC 9110 §5.6.2: one or more tchar): what a
/// field name and a method must be.
pub fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'!' | b'#'
                        | b'$'
                        | b'%'
                        | b'&'
                        | b'\''
                        | b'*'
                        | b'+'
                        | b'-'
                        | b'.'
                        | b'^'
                        | b'_'
                        | b'`'
                        | b'|'
                        | b'~'
                )
        })
}

/// Whether `value` can be forwarded: no CR, LF or NUL (RFC 9114 §4.2 makes
/// a message with them malformed; in HTTP/1.1 a CR or LF would end the
/// field, which is how header injection works).
pub fn is_forwardable_value(value: &str) -> bool {
    !value.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0))
}

/// Whether a field may leave the edge at all: a lowercase token name (HTTP/3
/// forbids uppercase names, RFC 9114 §4.2) and a forwardable value.
fn is_carriable(field: &Field) -> bool {
    is_token(&field.name)
        && !field.name.bytes().any(|b| b.is_ascii_uppercase())
        && is_forwardable_value(&field.value)
}

/// The connection options of a message: every token of every `connection`
/// field, lowercased (RFC 9110 §7.6.1: a comma-separated list, names
/// compared case-insensitively). These names are hop-by-hop for this
/// message, on top of [`HOP_BY_HOP`].
pub fn connection_options(fields: &[Field]) -> Vec<String> {
    fields
        .iter()
        .filter(|f| f.name == "connection")
        .flat_map(|f| f.value.split(','))
        .map(|token| token.trim_matches([' ', '\t']).to_ascii_lowercase())
        .filter(|token| !token.is_empty())
        .collect()
}

/// Whether a field named `name` (lowercase) belongs to one hop only, given
/// the message's [`connection_options`].
fn is_hop_by_hop(name: &str, options: &[String]) -> bool {
    HOP_BY_HOP.contains(&name) || options.iter().any(|o| o == name)
}

/// The values of every field named `name`, forwardable ones only, for a list
/// the edge extends (`via`, `x-forwarded-for`): joined with `, ` as RFC 9110
/// §5.3 allows for list fields, with `addition` last.
fn extended_list(fields: &[Field], name: &str, addition: &str) -> String {
    let mut value = String::new();
    for f in fields.iter().filter(|f| f.name == name) {
        let existing = f.value.trim_matches([' ', '\t']);
        if existing.is_empty() || !is_forwardable_value(existing) {
            continue;
        }
        value.push_str(existing);
        value.push_str(", ");
    }
    value.push_str(addition);
    value
}

/// The fields of the request the edge sends to the origin for `request`,
/// received from `client` over a protocol whose `via` label is
/// `received_protocol` (see [`received_protocol`]: `3` or `0.9`).
///
/// In order:
/// - `host` first (RFC 9112 §3.2 asks clients for it first): the request's
///   `:authority`; else the `host` field the client sent (RFC 9114 §4.3.1
///   lets an HTTP/3 client send one instead); else `origin_authority`, for
///   requests that carry neither (hq-interop). An authority that could not
///   be carried (empty, or with CR/LF/NUL) falls to the next source, so
///   exactly one `host` always goes out (RFC 9112 §3.2 requires it).
/// - the client's end-to-end fields in their order, without the
///   [`HOP_BY_HOP`] ones, the ones its `connection` field names, its `host`
///   fields (replaced above), its `content-length` (the body's framing is
///   the caller's: it adds `content-length` or `transfer-encoding: chunked`
///   for a request body, [`super::http1::RequestFraming::field`]), and any
///   field that cannot be carried;
/// - `x-forwarded-for`: the client's values, then `client`'s address;
/// - `via`: the client's values, then `{received_protocol} artq`.
///
/// No `connection: keep-alive` is added: HTTP/1.1 connections persist by
/// default (RFC 9112 §9.3).
pub fn origin_request_fields(
    request: &Request,
    client: IpAddr,
    origin_authority: &str,
    received_protocol: &str,
) -> Vec<Field> {
    let usable = |a: &&str| !a.is_empty() && is_forwardable_value(a);
    let host = request
        .authority
        .as_deref()
        .filter(usable)
        .or_else(|| {
            request
                .headers
                .iter()
                .filter(|f| f.name == "host")
                .map(|f| f.value.trim_matches([' ', '\t']))
                .find(usable)
        })
        .unwrap_or(origin_authority);

    let options = connection_options(&request.headers);
    let mut out = vec![Field::new("host", host)];
    out.extend(
        request
            .headers
            .iter()
            .filter(|f| {
                !is_hop_by_hop(&f.name, &options)
                    && !matches!(
                        f.name.as_str(),
                        "host" | "content-length" | "x-forwarded-for" | "via"
                    )
            })
            .cloned(),
    );
    out.push(Field::new(
        "x-forwarded-for",
        extended_list(&request.headers, "x-forwarded-for", &client.to_string()),
    ));
    out.push(Field::new(
        "via",
        extended_list(
            &request.headers,
            "via",
            &format!("{received_protocol} {VIA_PSEUDONYM}"),
        ),
    ));
    out.retain(is_carriable);
    out
}

/// The fields of the response the edge sends to the client for the origin's
/// head `origin`, whose body is framed as `framing` (the pair
/// [`super::http1::ResponseDecoder`] reported).
///
/// The origin's fields in their order, without:
/// - the [`HOP_BY_HOP`] ones and those its `connection` field names (RFC
///   9114 §4.2 makes them malformed in HTTP/3);
/// - `content-length` unless it still describes what the client gets: kept
///   (as one field with the single value) for [`Framing::Length`], and for
///   [`Framing::Empty`] where a valid value is present (a HEAD or 304
///   response tells the length of the representation, RFC 9110 §8.6),
///   except on a 204, which must not carry one; dropped for chunked and
///   close-delimited bodies, whose length is unknown until their end (the
///   HTTP/3 client then reads to the stream's end);
/// - fields that cannot be carried (names not lowercase tokens; values with
///   CR, LF or NUL);
///
/// then `via`: the origin's values and `1.1 artq` ([`ORIGIN_PROTOCOL`]).
pub fn client_response_fields(origin: &ResponseHead, framing: &Framing) -> Vec<Field> {
    let length = match framing {
        Framing::Length(n) => Some(*n),
        Framing::Empty if origin.status != 204 => content_length(&origin.headers).ok().flatten(),
        Framing::Empty | Framing::Chunked | Framing::Close => None,
    };
    let options = connection_options(&origin.headers);
    let mut out = Vec::with_capacity(origin.headers.len() + 1);
    let mut length_written = false;
    for f in &origin.headers {
        if is_hop_by_hop(&f.name, &options) || f.name == "via" {
            continue;
        }
        if f.name == "content-length" {
            // One field with the checked value, where the first one was.
            if let (Some(n), false) = (length, length_written) {
                out.push(Field::new("content-length", n.to_string()));
                length_written = true;
            }
            continue;
        }
        out.push(f.clone());
    }
    if let (Some(n), false) = (length, length_written) {
        out.push(Field::new("content-length", n.to_string()));
    }
    out.push(Field::new(
        "via",
        extended_list(
            &origin.headers,
            "via",
            &format!("{ORIGIN_PROTOCOL} {VIA_PSEUDONYM}"),
        ),
    ));
    out.retain(is_carriable);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Method;
    use std::net::{Ipv4Addr, Ipv6Addr};

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7));

    fn request(authority: Option<&str>, fields: &[(&str, &str)]) -> Request {
        Request {
            method: Method::Get,
            path: "/a".into(),
            authority: authority.map(str::to_string),
            headers: fields.iter().map(|(n, v)| Field::new(*n, *v)).collect(),
        }
    }

    fn names(fields: &[Field]) -> Vec<&str> {
        fields.iter().map(|f| f.name.as_str()).collect()
    }

    fn value<'a>(fields: &'a [Field], name: &str) -> Option<&'a str> {
        let mut found = fields.iter().filter(|f| f.name == name);
        let first = found.next().map(|f| f.value.as_str());
        assert!(found.next().is_none(), "{name} appears more than once");
        first
    }

    #[test]
    fn tokens_and_values() {
        assert!(is_token("x-forwarded-for"));
        assert!(is_token("GET"));
        for bad in ["", "a b", "a:b", ":path", "é", "a\r", "(x)"] {
            assert!(!is_token(bad), "{bad:?}");
        }
        assert!(is_forwardable_value("a, b\tc é"));
        for bad in ["a\rb", "a\nb", "a\0b"] {
            assert!(!is_forwardable_value(bad), "{bad:?}");
        }
    }

    #[test]
    fn host_comes_from_the_authority() {
        let req = request(
            Some("cdn.example"),
            &[("host", "other.example"), ("accept", "*/*")],
        );
        let out = origin_request_fields(&req, CLIENT, "origin:8080", "3");
        assert_eq!(names(&out), ["host", "accept", "x-forwarded-for", "via"]);
        assert_eq!(value(&out, "host"), Some("cdn.example"));
    }

    #[test]
    fn host_falls_back_to_the_host_field_then_the_origin() {
        let req = request(None, &[("host", " h.example ")]);
        let out = origin_request_fields(&req, CLIENT, "origin:8080", "3");
        assert_eq!(value(&out, "host"), Some("h.example"));

        // hq-interop: no authority, no fields.
        let out = origin_request_fields(&Request::get("/x"), CLIENT, "origin:8080", "0.9");
        assert_eq!(value(&out, "host"), Some("origin:8080"));
        assert_eq!(value(&out, "via"), Some("0.9 artq"));

        // An authority that cannot be carried is not used.
        let req = request(Some("evil\r\nx: y"), &[]);
        let out = origin_request_fields(&req, CLIENT, "origin:8080", "3");
        assert_eq!(value(&out, "host"), Some("origin:8080"));
    }

    #[test]
    fn request_hop_by_hop_and_connection_listed_fields_are_dropped() {
        let mut fields: Vec<(&str, &str)> = HOP_BY_HOP.iter().map(|n| (*n, "x")).collect();
        fields.push(("connection", "X-Secret, , Close"));
        fields.push(("x-secret", "1"));
        fields.push(("x-kept", "2"));
        fields.push(("content-length", "5"));
        fields.push(("close", "3"));
        let req = request(Some("a"), &fields);
        let out = origin_request_fields(&req, CLIENT, "o", "3");
        assert_eq!(names(&out), ["host", "x-kept", "x-forwarded-for", "via"]);
    }

    #[test]
    fn request_fields_that_cannot_be_carried_are_dropped() {
        let req = Request {
            headers: vec![
                Field {
                    name: "Upper".into(),
                    value: "1".into(),
                },
                Field::new("bad name", "1"),
                Field::new("x-inject", "a\r\nhost: evil"),
                Field::new("x-nul", "a\0"),
                Field::new("x-ok", "a"),
            ],
            ..request(Some("a"), &[])
        };
        let out = origin_request_fields(&req, CLIENT, "o", "3");
        assert_eq!(names(&out), ["host", "x-ok", "x-forwarded-for", "via"]);
    }

    #[test]
    fn x_forwarded_for_appends_the_client() {
        let out = origin_request_fields(&request(Some("a"), &[]), CLIENT, "o", "3");
        assert_eq!(value(&out, "x-forwarded-for"), Some("192.0.2.7"));

        let req = request(
            Some("a"),
            &[
                ("x-forwarded-for", "203.0.113.1"),
                ("x-forwarded-for", " 203.0.113.2, 203.0.113.3 "),
                ("x-forwarded-for", "bad\r\n"),
            ],
        );
        let v6 = IpAddr::V6(Ipv6Addr::LOCALHOST);
        let out = origin_request_fields(&req, v6, "o", "3");
        assert_eq!(
            value(&out, "x-forwarded-for"),
            Some("203.0.113.1, 203.0.113.2, 203.0.113.3, ::1")
        );
    }

    #[test]
    fn via_appends_the_edge_in_both_directions() {
        let req = request(Some("a"), &[("via", "1.1 first"), ("via", "2 second")]);
        let out = origin_request_fields(&req, CLIENT, "o", received_protocol(Protocol::H3));
        assert_eq!(value(&out, "via"), Some("1.1 first, 2 second, 3 artq"));
        assert_eq!(received_protocol(Protocol::HqInterop), "0.9");

        let head = ResponseHead::new(200).with("via", "1.0 origin-cache");
        let out = client_response_fields(&head, &Framing::Close);
        assert_eq!(value(&out, "via"), Some("1.0 origin-cache, 1.1 artq"));
        let out = client_response_fields(&ResponseHead::new(200), &Framing::Close);
        assert_eq!(value(&out, "via"), Some("1.1 artq"));
    }

    #[test]
    fn response_hop_by_hop_and_connection_listed_fields_are_dropped() {
        let mut head = ResponseHead::new(200);
        for name in HOP_BY_HOP {
            head = head.with(name, "x");
        }
        head = head
            .with("connection", "x-hop")
            .with("x-hop", "1")
            .with("content-type", "text/plain")
            .with("set-cookie", "a=1")
            .with("set-cookie", "b=2");
        let out = client_response_fields(&head, &Framing::Chunked);
        assert_eq!(
            names(&out),
            ["content-type", "set-cookie", "set-cookie", "via"]
        );
    }

    #[test]
    fn content_length_follows_the_framing() {
        let head = ResponseHead::new(200)
            .with("content-length", "5")
            .with("x", "1")
            .with("content-length", "5");
        let out = client_response_fields(&head, &Framing::Length(5));
        assert_eq!(names(&out), ["content-length", "x", "via"]);
        assert_eq!(value(&out, "content-length"), Some("5"));

        // Chunked with a content-length (ignored by the decoder) and
        // close-delimited bodies: the length is not the client's.
        for framing in [Framing::Chunked, Framing::Close] {
            let out = client_response_fields(&head, &framing);
            assert_eq!(value(&out, "content-length"), None, "{framing:?}");
        }

        // HEAD and 304: the representation's length is kept; 204: never.
        let head = ResponseHead::new(200).with("content-length", "1234, 1234");
        let out = client_response_fields(&head, &Framing::Empty);
        assert_eq!(value(&out, "content-length"), Some("1234"));
        let head = ResponseHead::new(204).with("content-length", "0");
        let out = client_response_fields(&head, &Framing::Empty);
        assert_eq!(value(&out, "content-length"), None);
    }

    #[test]
    fn response_fields_that_cannot_be_carried_are_dropped() {
        let head = ResponseHead {
            status: 200,
            headers: vec![
                Field {
                    name: "X-Upper".into(),
                    value: "1".into(),
                },
                Field::new("x-cr", "a\rb"),
                Field::new("x-ok", "fine"),
            ],
        };
        let out = client_response_fields(&head, &Framing::Close);
        assert_eq!(names(&out), ["x-ok", "via"]);
    }
}
