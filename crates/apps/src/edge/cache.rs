//! The edge's HTTP cache: RFC 9111's plain cases and a bounded in-memory
//! store.
//!
//! Two halves:
//! - pure rules ([`request_may_use_cache`], [`request_may_store`],
//!   [`freshness_lifetime`], [`origin_age`], [`CacheControl`]) that say
//!   whether a request may be answered from the cache and whether (and for
//!   how long) a response may be kept;
//! - [`Cache`], a store keyed by a string the proxy builds (route plus
//!   request target), bounded in bytes, evicting the least recently used
//!   entries.
//!
//! This is a *shared* cache (RFC 9111 §1): one stored response is served to
//! many users, so anything personal is refused.
//!
//! # What is cached (the choices)
//!
//! A response is stored only when all of these hold, and each choice is
//! the simple, safe reading of RFC 9111 for a cache that never revalidates:
//! - the request is a `GET` that may use the cache (no `authorization`,
//!   no request `no-store`); `HEAD` responses carry no body and are not
//!   stored (a stored `GET` response may answer a later `HEAD`: that is
//!   the proxy's choice);
//! - the status is one of [`STORABLE_STATUSES`]: 200, 203, 204, 301, 404
//!   and 410, the "heuristically cacheable" codes of RFC 9110 §15.1 that a
//!   CDN meets (not 206: we do not combine ranges; not 300/308/405/414/501:
//!   rare at an edge);
//! - the response has no `no-store`, no `private` (any form: a shared cache
//!   must not keep it, §5.2.2.7), and no `no-cache` (any form: it allows
//!   storing only with revalidation on every use, §5.2.2.4, and this cache
//!   never revalidates: a stored response is either fresh or gone);
//! - no `vary` field, whatever its value: we keep one response per key, not
//!   variants (§4.1);
//! - no `set-cookie`: a shared cache must not hand one user's cookie to
//!   another; RFC 9111 §7.3 leaves it to the cache, and nginx's proxy cache
//!   also refuses such responses by default;
//! - an explicit freshness lifetime greater than zero, from the first of
//!   `s-maxage` (the shared-cache lifetime, §5.2.2.10), `max-age`
//!   (§5.2.2.1), `Expires - Date` (§4.2.1). No heuristic freshness (§4.2.2):
//!   a response that does not say how long it stays fresh is not stored.
//!
//! `must-revalidate`, `proxy-revalidate` and `s-maxage`'s implied
//! `proxy-revalidate` need nothing: a stale entry is never served (it is
//! dropped when found stale).
//!
//! # Time without a wall clock
//!
//! The core never reads a clock; `now` is the driver's monotonic
//! [`Instant`]. So:
//! - `Expires` counts only relative to the response's own `Date`
//!   (`Expires - Date`, §4.2.1). A response with `Expires` but no valid
//!   `Date` is treated as not fresh (not stored): without a wall clock we
//!   cannot place `Expires` in time. An `Expires` that does not parse, or
//!   that is not after `Date`, means already expired (§5.3).
//! - The age of a stored response is the origin's `Age` plus the time it has
//!   been resident here (`now - stored_at`): RFC 9111 §4.2.3's
//!   `corrected_initial_age` without the `Date`-based apparent age (which
//!   needs a wall clock) and without the request's transit time (the
//!   proxy inserts once the body is complete, which includes it only
//!   partly). A served hit carries `age` in whole seconds (§5.1).
//!
//! # Parsing
//!
//! `cache-control` is a comma-separated list of directives (§5.2), all
//! fields of that name combined in order; names are case-insensitive;
//! values are tokens or quoted strings (both accepted for every directive,
//! §5.2). When a directive repeats, the most restrictive value wins: the
//! smallest `max-age`/`s-maxage` (RFC 9111 §4.2.1 allows either the first
//! or treating the response as stale; the smallest is never fresher than
//! the first). A lifetime directive whose value is not delta-seconds makes
//! the response not storable. Delta-seconds beyond 2^31 are read as 2^31
//! (§1.2.2).

use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;

use wire::time::{Duration, Instant};

use crate::http::{Field, Method, Request, ResponseHead};

/// Response statuses this cache stores when the response gives an explicit
/// freshness lifetime (see the module doc for why these).
pub const STORABLE_STATUSES: [u16; 6] = [200, 203, 204, 301, 404, 410];

/// The largest object a [`Cache`] keeps is its capacity divided by this:
/// one object can never push out more than an eighth of the store, so a
/// single large download cannot flush everything else.
pub const MAX_OBJECT_FRACTION: u64 = 8;

/// Delta-seconds values above this are read as this (RFC 9111 §1.2.2).
const DELTA_SECONDS_CAP: u64 = 1 << 31;

/// Bytes charged for a response head besides its fields: the status line.
pub const HEAD_BASE_BYTES: u64 = 16;

/// Bytes charged per header field besides its name and value (`: ` and
/// CRLF, as HTTP/1.1 writes it).
pub const FIELD_OVERHEAD_BYTES: u64 = 4;

/// One `cache-control` directive: a lowercase name and its value, if any
/// (quotes removed, escapes resolved).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Directive {
    /// Directive name, lowercase.
    pub name: String,
    /// The argument after `=`, unquoted.
    pub value: Option<String>,
}

/// The parsed `cache-control` of a message: every `cache-control` field's
/// directives, in order. Exists so each rule asks about a directive by
/// name instead of re-parsing text.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CacheControl {
    directives: Vec<Directive>,
}

/// A lifetime directive's value (`max-age`, `s-maxage`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Seconds {
    /// Absent.
    Absent,
    /// Present and valid (the most restrictive of duplicates).
    Valid(u64),
    /// Present without a value, or a value that is not delta-seconds.
    Invalid,
}

impl CacheControl {
    /// The directives of every `cache-control` field in `fields`, combined
    /// in order (RFC 9110 §5.3).
    pub fn from_fields(fields: &[Field]) -> CacheControl {
        let mut directives = Vec::new();
        for field in fields.iter().filter(|f| f.name == "cache-control") {
            parse_directives(&field.value, &mut directives);
        }
        CacheControl { directives }
    }

    /// The directives of one field value.
    pub fn parse(value: &str) -> CacheControl {
        let mut directives = Vec::new();
        parse_directives(value, &mut directives);
        CacheControl { directives }
    }

    /// Every directive, in order.
    pub fn directives(&self) -> &[Directive] {
        &self.directives
    }

    /// Whether a directive named `name` (lowercase) is present, in any form.
    pub fn has(&self, name: &str) -> bool {
        self.directives.iter().any(|d| d.name == name)
    }

    /// The value of `name` as delta-seconds, the smallest of duplicates.
    fn seconds(&self, name: &str) -> Seconds {
        let mut result = Seconds::Absent;
        for d in self.directives.iter().filter(|d| d.name == name) {
            let Some(secs) = d.value.as_deref().and_then(delta_seconds) else {
                return Seconds::Invalid;
            };
            result = match result {
                Seconds::Valid(prev) => Seconds::Valid(prev.min(secs)),
                _ => Seconds::Valid(secs),
            };
        }
        result
    }
}

/// Appends the directives of one `cache-control` value to `out`. Never
/// fails: malformed pieces become directives no rule knows (an unknown
/// directive is ignored, RFC 9111 §5.2.3) or values that do not parse as
/// numbers.
fn parse_directives(value: &str, out: &mut Vec<Directive>) {
    let mut chars = value.chars().peekable();
    loop {
        // Skip separators and whitespace before a name.
        while matches!(chars.peek(), Some(',' | ' ' | '\t')) {
            chars.next();
        }
        if chars.peek().is_none() {
            return;
        }
        let mut name = String::new();
        while let Some(&c) = chars.peek() {
            if matches!(c, ',' | '=' | ' ' | '\t') {
                break;
            }
            name.push(c.to_ascii_lowercase());
            chars.next();
        }
        while matches!(chars.peek(), Some(' ' | '\t')) {
            chars.next();
        }
        let mut value = None;
        if chars.peek() == Some(&'=') {
            chars.next();
            while matches!(chars.peek(), Some(' ' | '\t')) {
                chars.next();
            }
            let mut v = String::new();
            let quoted = chars.peek() == Some(&'"');
            if quoted {
                chars.next();
                while let Some(c) = chars.next() {
                    match c {
                        '"' => break,
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                v.push(escaped);
                            }
                        }
                        other => v.push(other),
                    }
                }
            }
            // A token: everything up to the comma, trailing whitespace
            // dropped (inner whitespace stays and makes a number invalid).
            // What trails a quoted string is dropped below.
            if !quoted {
                while let Some(&c) = chars.peek() {
                    if c == ',' {
                        break;
                    }
                    v.push(c);
                    chars.next();
                }
                v.truncate(v.trim_end().len());
            }
            value = Some(v);
        }
        // Anything left before the next comma belongs to a malformed
        // directive: skip it.
        while let Some(&c) = chars.peek() {
            if c == ',' {
                break;
            }
            chars.next();
        }
        if !name.is_empty() {
            out.push(Directive { name, value });
        }
    }
}

/// Delta-seconds (RFC 9111 §1.2.2): ASCII digits only, capped at 2^31.
fn delta_seconds(text: &str) -> Option<u64> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut n: u64 = 0;
    for b in text.bytes() {
        n = n
            .saturating_mul(10)
            .saturating_add(u64::from(b - b'0'))
            .min(DELTA_SECONDS_CAP);
    }
    Some(n)
}

/// The first value of the request field `name` (lowercase).
fn request_header<'a>(request: &'a Request, name: &str) -> Option<&'a str> {
    request
        .headers
        .iter()
        .find(|f| f.name == name)
        .map(|f| f.value.as_str())
}

/// Whether the edge may answer `request` from the cache (look it up).
///
/// Only `GET` and `HEAD`; never with `authorization` (a shared cache serves
/// authenticated requests only under conditions we do not track, RFC 9111
/// §3.5); never when the client asks for `no-cache` or `max-age=0` (the
/// client wants the origin's answer: we fetch it, and may store it). Other
/// request directives (`max-age=N`, `min-fresh`, `max-stale`,
/// `only-if-cached`) are ignored, and so is the deprecated `Pragma`.
pub fn request_may_use_cache(request: &Request) -> bool {
    if !matches!(request.method, Method::Get | Method::Head) {
        return false;
    }
    if request_header(request, "authorization").is_some() {
        return false;
    }
    let cc = CacheControl::from_fields(&request.headers);
    !(cc.has("no-cache") || cc.seconds("max-age") == Seconds::Valid(0))
}

/// Whether a response to `request` may be stored at all, whatever the
/// response: a `GET` without `authorization` whose client did not say
/// `no-store` (RFC 9111 §5.2.1.5). A request with `no-cache` may still
/// store the fresh answer it gets.
pub fn request_may_store(request: &Request) -> bool {
    request.method == Method::Get
        && request_header(request, "authorization").is_none()
        && !CacheControl::from_fields(&request.headers).has("no-store")
}

/// How long the response `head` to `request` stays fresh in this shared
/// cache; `None` when it must not be stored (see the module doc for every
/// rule). Never zero: a zero lifetime is `None`.
pub fn freshness_lifetime(request: &Request, head: &ResponseHead) -> Option<Duration> {
    if !request_may_store(request) || !STORABLE_STATUSES.contains(&head.status) {
        return None;
    }
    let has = |name: &str| head.headers.iter().any(|f| f.name == name);
    if has("vary") || has("set-cookie") {
        return None;
    }
    let cc = CacheControl::from_fields(&head.headers);
    if cc.has("no-store") || cc.has("private") || cc.has("no-cache") {
        return None;
    }
    let secs = match cc.seconds("s-maxage") {
        Seconds::Valid(s) => s,
        Seconds::Invalid => return None,
        Seconds::Absent => match cc.seconds("max-age") {
            Seconds::Valid(s) => s,
            Seconds::Invalid => return None,
            Seconds::Absent => return expires_lifetime(head),
        },
    };
    (secs > 0).then(|| Duration::from_secs(secs))
}

/// `Expires - Date` (RFC 9111 §4.2.1), from the response's own fields; see
/// the module doc for why a missing `Date` means not fresh.
fn expires_lifetime(head: &ResponseHead) -> Option<Duration> {
    let expires = httpdate::parse_http_date(head.header("expires")?.trim()).ok()?;
    let date = httpdate::parse_http_date(head.header("date")?.trim()).ok()?;
    let lifetime = expires.duration_since(date).ok()?;
    // Whole seconds: HTTP-dates have no finer grain.
    (lifetime.as_secs() > 0).then(|| Duration::from_secs(lifetime.as_secs()))
}

/// The origin's `Age` (RFC 9111 §5.1): how old the response already was
/// when we received it. Absent or not delta-seconds counts as zero.
pub fn origin_age(head: &ResponseHead) -> Duration {
    head.header("age")
        .and_then(|v| delta_seconds(v.trim()))
        .map_or(Duration::ZERO, Duration::from_secs)
}

/// A fresh stored response, as [`Cache::get`] gives it.
#[derive(Clone, Debug)]
pub struct Hit {
    /// The stored head, its `age` field set to the current age in seconds.
    pub head: ResponseHead,
    /// The body, shared with the store: a hit copies no body bytes.
    pub body: Rc<[u8]>,
}

/// One stored response.
#[derive(Debug)]
struct Entry {
    head: ResponseHead,
    body: Rc<[u8]>,
    stored_at: Instant,
    lifetime: Duration,
    origin_age: Duration,
    /// Bytes charged against the capacity.
    size: u64,
    /// The LRU tick of its last use (key into `Cache::lru`).
    tick: u64,
}

impl Entry {
    /// Current age: the origin's `Age` plus the time resident here.
    fn age(&self, now: Instant) -> Duration {
        self.origin_age.saturating_add(now - self.stored_at)
    }
}

/// A bounded in-memory response store with least-recently-used eviction.
///
/// Single-threaded (one per worker): bodies are shared with hits as
/// `Rc<[u8]>`. Keys are the proxy's (route plus request target, say). Each
/// entry is charged its key, head (names, values, [`FIELD_OVERHEAD_BYTES`]
/// per field and [`HEAD_BASE_BYTES`]) and body bytes; the sum never exceeds
/// the capacity. An object larger than capacity / [`MAX_OBJECT_FRACTION`]
/// is not stored. Every operation is O(log n): the recency order is a
/// `BTreeMap` of use ticks beside the `HashMap` of entries, no scans.
///
/// Stale entries are dropped when looked up; until then they occupy room
/// and age out through LRU eviction like any other entry.
#[derive(Debug)]
pub struct Cache {
    capacity: u64,
    max_object: u64,
    entries: HashMap<Rc<str>, Entry>,
    /// Use tick → key, oldest first.
    lru: BTreeMap<u64, Rc<str>>,
    next_tick: u64,
    bytes: u64,
    hits: u64,
    misses: u64,
    stores: u64,
    evictions: u64,
}

impl Cache {
    /// A store of at most `capacity_bytes`; 0 disables it (nothing is
    /// stored, every lookup misses).
    pub fn new(capacity_bytes: u64) -> Cache {
        Cache {
            capacity: capacity_bytes,
            max_object: capacity_bytes / MAX_OBJECT_FRACTION,
            entries: HashMap::new(),
            lru: BTreeMap::new(),
            next_tick: 0,
            bytes: 0,
            hits: 0,
            misses: 0,
            stores: 0,
            evictions: 0,
        }
    }

    /// The fresh response stored under `key`, its `age` field set; `None`
    /// (a miss) when there is none or it has gone stale (then it is
    /// removed). A hit makes the entry the most recently used.
    pub fn get(&mut self, key: &str, now: Instant) -> Option<Hit> {
        let fresh = match self.entries.get(key) {
            None => {
                self.misses += 1;
                return None;
            }
            Some(entry) => entry.age(now) < entry.lifetime,
        };
        if !fresh {
            self.remove(key);
            self.misses += 1;
            return None;
        }
        let tick = self.tick();
        let entry = self.entries.get_mut(key)?;
        let old = std::mem::replace(&mut entry.tick, tick);
        let age = entry.age(now).as_secs();
        let mut head = entry.head.clone();
        let body = Rc::clone(&entry.body);
        if let Some(k) = self.lru.remove(&old) {
            self.lru.insert(tick, k);
        }
        head.headers.retain(|f| f.name != "age");
        head.headers.push(Field::new("age", age.to_string()));
        self.hits += 1;
        Some(Hit { head, body })
    }

    /// Stores a response under `key` (replacing what was there), fresh for
    /// `lifetime` ([`freshness_lifetime`]) counted from an age of
    /// `origin_age` ([`origin_age`]) at `now`. Evicts the least recently
    /// used entries until it fits. Not stored: anything when the cache is
    /// disabled, an object over [`Cache::max_object`], a response already
    /// stale (`origin_age >= lifetime`).
    pub fn insert(
        &mut self,
        key: String,
        head: ResponseHead,
        body: impl Into<Rc<[u8]>>,
        now: Instant,
        lifetime: Duration,
        origin_age: Duration,
    ) {
        let body: Rc<[u8]> = body.into();
        let size = entry_size(&key, &head, body.len());
        if self.capacity == 0 || size > self.max_object || origin_age >= lifetime {
            return;
        }
        self.remove(&key);
        while self.bytes.saturating_add(size) > self.capacity {
            let Some((_, oldest)) = self.lru.pop_first() else {
                break;
            };
            if let Some(gone) = self.entries.remove(&oldest) {
                self.bytes = self.bytes.saturating_sub(gone.size);
                self.evictions += 1;
            }
        }
        let key: Rc<str> = Rc::from(key);
        let tick = self.tick();
        self.lru.insert(tick, Rc::clone(&key));
        self.entries.insert(
            key,
            Entry {
                head,
                body,
                stored_at: now,
                lifetime,
                origin_age,
                size,
                tick,
            },
        );
        self.bytes += size;
        self.stores += 1;
    }

    /// Drops the entry under `key`, if any (not counted as an eviction).
    pub fn remove(&mut self, key: &str) {
        if let Some(entry) = self.entries.remove(key) {
            self.lru.remove(&entry.tick);
            self.bytes = self.bytes.saturating_sub(entry.size);
        }
    }

    /// A new, larger LRU tick.
    fn tick(&mut self) -> u64 {
        self.next_tick += 1;
        self.next_tick
    }

    /// The capacity in bytes (0: disabled).
    pub fn capacity(&self) -> u64 {
        self.capacity
    }

    /// The largest object (key, head and body bytes) stored: the proxy can
    /// stop buffering a body for the cache once it grows past this.
    pub fn max_object(&self) -> u64 {
        self.max_object
    }

    /// Lookups answered with a fresh entry.
    pub fn hits(&self) -> u64 {
        self.hits
    }

    /// Lookups that found nothing fresh.
    pub fn misses(&self) -> u64 {
        self.misses
    }

    /// Responses stored.
    pub fn stores(&self) -> u64 {
        self.stores
    }

    /// Entries pushed out to make room.
    pub fn evictions(&self) -> u64 {
        self.evictions
    }

    /// Bytes charged by the stored entries (at most the capacity).
    pub fn bytes_in_use(&self) -> u64 {
        self.bytes
    }

    /// Stored entries, fresh or not yet found stale.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// The bytes an entry is charged (see [`Cache`]).
fn entry_size(key: &str, head: &ResponseHead, body_len: usize) -> u64 {
    let fields: u64 = head
        .headers
        .iter()
        .map(|f| (f.name.len() + f.value.len()) as u64 + FIELD_OVERHEAD_BYTES)
        .sum();
    (key.len() as u64)
        .saturating_add(HEAD_BASE_BYTES)
        .saturating_add(fields)
        .saturating_add(body_len as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(headers: &[(&str, &str)]) -> Request {
        let mut r = Request::get("/x");
        for (n, v) in headers {
            r.headers.push(Field::new(*n, *v));
        }
        r
    }

    fn head(status: u16, headers: &[(&str, &str)]) -> ResponseHead {
        let mut h = ResponseHead::new(status);
        for (n, v) in headers {
            h = h.with(n, *v);
        }
        h
    }

    fn lifetime(headers: &[(&str, &str)]) -> Option<u64> {
        freshness_lifetime(&req(&[]), &head(200, headers)).map(|d| d.as_secs())
    }

    #[test]
    fn directives_parse_with_case_quotes_and_junk() {
        let cc = CacheControl::parse(
            r#" Max-Age=60 , no-cache="set-cookie, x", PRIVATE,,s-maxage = "5" "#,
        );
        let names: Vec<_> = cc.directives().iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["max-age", "no-cache", "private", "s-maxage"]);
        assert_eq!(cc.directives()[0].value.as_deref(), Some("60"));
        assert_eq!(cc.directives()[1].value.as_deref(), Some("set-cookie, x"));
        assert_eq!(cc.directives()[2].value, None);
        assert_eq!(cc.directives()[3].value.as_deref(), Some("5"));
        assert_eq!(cc.seconds("s-maxage"), Seconds::Valid(5));
        // Escapes inside quotes, an unterminated quote, stray bytes.
        let cc = CacheControl::parse("a=\"x\\\"y\", b=\"open, c=é=,=d");
        assert_eq!(cc.directives()[0].value.as_deref(), Some("x\"y"));
        assert_eq!(cc.directives()[1].name, "b");
        assert!(CacheControl::parse("").directives().is_empty());
        assert!(CacheControl::parse(" , ,, ").directives().is_empty());
    }

    #[test]
    fn delta_seconds_rules() {
        assert_eq!(delta_seconds("0"), Some(0));
        assert_eq!(delta_seconds("120"), Some(120));
        assert_eq!(delta_seconds("99999999999999999999999"), Some(1 << 31));
        assert_eq!(delta_seconds("-1"), None);
        assert_eq!(delta_seconds("1.5"), None);
        assert_eq!(delta_seconds(""), None);
        assert_eq!(delta_seconds("+3"), None);
    }

    #[test]
    fn lifetime_precedence_s_maxage_then_max_age_then_expires() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        let expires = "Sun, 06 Nov 1994 08:59:37 GMT"; // Date + 600 s
        assert_eq!(lifetime(&[("cache-control", "max-age=60")]), Some(60));
        assert_eq!(
            lifetime(&[("cache-control", "max-age=60, s-maxage=30")]),
            Some(30)
        );
        assert_eq!(
            lifetime(&[
                ("cache-control", "max-age=60"),
                ("date", date),
                ("expires", expires)
            ]),
            Some(60)
        );
        assert_eq!(lifetime(&[("date", date), ("expires", expires)]), Some(600));
        // Fields split over several lines combine.
        assert_eq!(
            lifetime(&[("cache-control", "public"), ("cache-control", "max-age=7")]),
            Some(7)
        );
    }

    #[test]
    fn no_explicit_freshness_is_not_stored() {
        assert_eq!(lifetime(&[]), None);
        assert_eq!(lifetime(&[("cache-control", "public")]), None);
        assert_eq!(
            lifetime(&[("last-modified", "Sun, 06 Nov 1994 08:49:37 GMT")]),
            None
        );
    }

    #[test]
    fn expires_needs_a_valid_date_and_a_later_expiry() {
        let date = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert_eq!(
            lifetime(&[("expires", "Sun, 06 Nov 1994 08:59:37 GMT")]),
            None
        );
        assert_eq!(
            lifetime(&[
                ("date", "yesterday"),
                ("expires", "Sun, 06 Nov 1994 08:59:37 GMT")
            ]),
            None
        );
        assert_eq!(lifetime(&[("date", date), ("expires", "0")]), None);
        assert_eq!(lifetime(&[("date", date), ("expires", date)]), None);
        assert_eq!(
            lifetime(&[("date", date), ("expires", "Sun, 06 Nov 1994 08:00:00 GMT")]),
            None
        );
    }

    #[test]
    fn zero_and_invalid_lifetimes_are_not_stored() {
        assert_eq!(lifetime(&[("cache-control", "max-age=0")]), None);
        assert_eq!(
            lifetime(&[("cache-control", "s-maxage=0, max-age=60")]),
            None
        );
        assert_eq!(lifetime(&[("cache-control", "max-age=abc")]), None);
        assert_eq!(lifetime(&[("cache-control", "max-age")]), None);
        assert_eq!(lifetime(&[("cache-control", "max-age=-5")]), None);
        // An invalid s-maxage is not rescued by a valid max-age.
        assert_eq!(
            lifetime(&[("cache-control", "s-maxage=x, max-age=60")]),
            None
        );
        assert_eq!(lifetime(&[("cache-control", "max-age=\"60\"")]), Some(60));
        assert_eq!(lifetime(&[("cache-control", "max-age = 60 ")]), Some(60));
        assert_eq!(lifetime(&[("cache-control", "max-age=6 0")]), None);
    }

    #[test]
    fn duplicates_take_the_most_restrictive() {
        assert_eq!(
            lifetime(&[("cache-control", "max-age=60, max-age=10")]),
            Some(10)
        );
        assert_eq!(
            lifetime(&[("cache-control", "max-age=10, max-age=60")]),
            Some(10)
        );
        assert_eq!(
            lifetime(&[
                ("cache-control", "max-age=10"),
                ("cache-control", "max-age=bad")
            ]),
            None
        );
    }

    #[test]
    fn refusing_directives_and_fields() {
        for cc in [
            "no-store, max-age=60",
            "private, max-age=60",
            "max-age=60, private=\"x-user\"",
            "no-cache, max-age=60",
            "NO-CACHE=\"set-cookie\", max-age=60",
        ] {
            assert_eq!(lifetime(&[("cache-control", cc)]), None, "{cc}");
        }
        let ok = ("cache-control", "max-age=60");
        assert_eq!(lifetime(&[ok, ("vary", "accept-encoding")]), None);
        assert_eq!(lifetime(&[ok, ("vary", "")]), None);
        assert_eq!(lifetime(&[ok, ("set-cookie", "id=1")]), None);
        assert_eq!(lifetime(&[ok, ("must-revalidate", "")]), Some(60));
        assert_eq!(
            lifetime(&[("cache-control", "max-age=60, must-revalidate, public")]),
            Some(60)
        );
    }

    #[test]
    fn statuses() {
        let cc = [("cache-control", "max-age=60")];
        for status in [200, 203, 204, 301, 404, 410] {
            assert!(
                freshness_lifetime(&req(&[]), &head(status, &cc)).is_some(),
                "{status}"
            );
        }
        for status in [201, 206, 302, 304, 307, 400, 403, 500, 502, 503] {
            assert!(
                freshness_lifetime(&req(&[]), &head(status, &cc)).is_none(),
                "{status}"
            );
        }
    }

    #[test]
    fn request_rules() {
        let ok = head(200, &[("cache-control", "max-age=60")]);
        assert!(request_may_use_cache(&req(&[])));
        let mut head_req = req(&[]);
        head_req.method = Method::Head;
        assert!(request_may_use_cache(&head_req));
        assert_eq!(freshness_lifetime(&head_req, &ok), None);
        let mut post = req(&[]);
        post.method = Method::Other("POST".into());
        assert!(!request_may_use_cache(&post));
        assert_eq!(freshness_lifetime(&post, &ok), None);

        let auth = req(&[("authorization", "Bearer x")]);
        assert!(!request_may_use_cache(&auth));
        assert_eq!(freshness_lifetime(&auth, &ok), None);

        // no-cache: fetch from the origin, but the answer may be stored.
        let no_cache = req(&[("cache-control", "no-cache")]);
        assert!(!request_may_use_cache(&no_cache));
        assert!(request_may_store(&no_cache));
        assert!(freshness_lifetime(&no_cache, &ok).is_some());
        let reload = req(&[("cache-control", "max-age=0")]);
        assert!(!request_may_use_cache(&reload));
        assert!(request_may_use_cache(&req(&[(
            "cache-control",
            "max-age=5"
        )])));

        // no-store: may be answered from the cache, the answer is not stored.
        let no_store = req(&[("cache-control", "No-Store")]);
        assert!(request_may_use_cache(&no_store));
        assert!(!request_may_store(&no_store));
        assert_eq!(freshness_lifetime(&no_store, &ok), None);
    }

    #[test]
    fn origin_age_parses_or_is_zero() {
        assert_eq!(
            origin_age(&head(200, &[("age", "42")])),
            Duration::from_secs(42)
        );
        assert_eq!(
            origin_age(&head(200, &[("age", " 7 ")])),
            Duration::from_secs(7)
        );
        assert_eq!(origin_age(&head(200, &[("age", "x")])), Duration::ZERO);
        assert_eq!(origin_age(&head(200, &[])), Duration::ZERO);
    }

    const T0: Instant = Instant::from_millis(1_000);

    fn at(secs: u64) -> Instant {
        T0 + Duration::from_secs(secs)
    }

    fn plain() -> ResponseHead {
        head(200, &[("content-type", "text/plain")])
    }

    #[test]
    fn hit_shares_body_and_sets_age() {
        let mut cache = Cache::new(1 << 20);
        let h = head(200, &[("age", "5"), ("content-type", "text/plain")]);
        let age = origin_age(&h);
        cache.insert(
            "k".into(),
            h,
            b"hello".to_vec(),
            T0,
            Duration::from_secs(60),
            age,
        );
        assert_eq!(cache.stores(), 1);
        let a = cache.get("k", at(10)).unwrap();
        let b = cache.get("k", at(12)).unwrap();
        assert!(
            Rc::ptr_eq(&a.body, &b.body),
            "body bytes are shared, not copied"
        );
        assert_eq!(&a.body[..], b"hello");
        assert_eq!(a.head.header("age"), Some("15"));
        assert_eq!(b.head.header("age"), Some("17"));
        assert_eq!(a.head.headers.iter().filter(|f| f.name == "age").count(), 1);
        assert_eq!(a.head.header("content-type"), Some("text/plain"));
        assert_eq!(cache.hits(), 2);
        assert!(cache.get("other", at(10)).is_none());
        assert_eq!(cache.misses(), 1);
    }

    #[test]
    fn stale_entries_are_removed_as_misses() {
        let mut cache = Cache::new(1 << 20);
        cache.insert(
            "k".into(),
            plain(),
            vec![1; 10],
            T0,
            Duration::from_secs(60),
            Duration::from_secs(20),
        );
        assert!(cache.get("k", at(39)).is_some());
        assert!(
            cache.get("k", at(40)).is_none(),
            "age 20 + 40 = lifetime: stale"
        );
        assert_eq!(cache.len(), 0);
        assert_eq!(cache.bytes_in_use(), 0);
        assert_eq!((cache.hits(), cache.misses(), cache.evictions()), (1, 1, 0));
        // Already stale on arrival: not stored.
        cache.insert(
            "s".into(),
            plain(),
            vec![],
            T0,
            Duration::from_secs(5),
            Duration::from_secs(5),
        );
        assert_eq!(cache.stores(), 1);
        assert!(cache.is_empty());
    }

    #[test]
    fn lru_eviction_keeps_within_capacity() {
        let one = entry_size("a", &plain(), 100);
        let mut cache = Cache::new(one * 8); // max object = one entry
        let life = Duration::from_secs(60);
        for key in ["a", "b", "c", "d", "e", "f", "g", "h"] {
            cache.insert(key.into(), plain(), vec![0; 100], T0, life, Duration::ZERO);
        }
        assert_eq!(cache.bytes_in_use(), one * 8);
        assert_eq!(cache.evictions(), 0);
        // Use "a": "b" becomes the least recently used.
        assert!(cache.get("a", T0).is_some());
        cache.insert("i".into(), plain(), vec![0; 100], T0, life, Duration::ZERO);
        assert_eq!(cache.evictions(), 1);
        assert!(cache.get("b", T0).is_none());
        assert!(cache.get("a", T0).is_some());
        assert!(cache.get("i", T0).is_some());
        assert!(cache.bytes_in_use() <= cache.capacity());
        assert_eq!(cache.len(), 8);
    }

    #[test]
    fn replacing_a_key_does_not_double_count() {
        let mut cache = Cache::new(1 << 20);
        let life = Duration::from_secs(60);
        cache.insert("k".into(), plain(), vec![0; 100], T0, life, Duration::ZERO);
        let before = cache.bytes_in_use();
        cache.insert("k".into(), plain(), vec![1; 100], T0, life, Duration::ZERO);
        assert_eq!(cache.bytes_in_use(), before);
        assert_eq!(cache.len(), 1);
        assert_eq!(cache.evictions(), 0);
        assert_eq!(cache.get("k", T0).unwrap().body[0], 1);
        cache.remove("k");
        assert_eq!(cache.bytes_in_use(), 0);
        assert!(cache.lru.is_empty());
    }

    #[test]
    fn objects_over_an_eighth_are_not_stored() {
        let mut cache = Cache::new(8_000);
        assert_eq!(cache.max_object(), 1_000);
        let life = Duration::from_secs(60);
        let fits = 1_000 - entry_size("k", &plain(), 0) as usize;
        cache.insert(
            "k".into(),
            plain(),
            vec![0; fits + 1],
            T0,
            life,
            Duration::ZERO,
        );
        assert!(cache.is_empty());
        cache.insert("k".into(), plain(), vec![0; fits], T0, life, Duration::ZERO);
        assert_eq!(cache.bytes_in_use(), 1_000);
    }

    #[test]
    fn disabled_cache_stores_nothing() {
        let mut cache = Cache::new(0);
        cache.insert(
            "k".into(),
            plain(),
            vec![],
            T0,
            Duration::from_secs(60),
            Duration::ZERO,
        );
        assert!(cache.get("k", T0).is_none());
        assert_eq!(
            (cache.stores(), cache.misses(), cache.bytes_in_use()),
            (0, 1, 0)
        );
    }

    #[test]
    fn many_operations_keep_index_and_bytes_consistent() {
        // A small deterministic generator (xorshift), enough to mix the
        // operations.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |below: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % below
        };
        let mut cache = Cache::new(20_000);
        for step in 0..5_000u64 {
            let key = format!("/k{}", next(60));
            let now = T0 + Duration::from_millis(step * 10);
            match next(3) {
                0 => {
                    let len = next(3_000) as usize;
                    let life = Duration::from_secs(1 + next(19));
                    cache.insert(key, plain(), vec![0; len], now, life, Duration::ZERO);
                }
                1 => {
                    cache.get(&key, now);
                }
                _ => cache.remove(&key),
            }
            assert!(cache.bytes_in_use() <= cache.capacity());
            assert_eq!(cache.lru.len(), cache.entries.len());
            let total: u64 = cache.entries.values().map(|e| e.size).sum();
            assert_eq!(total, cache.bytes_in_use());
        }
        assert!(cache.evictions() > 0 && cache.hits() > 0 && cache.misses() > 0);
    }
}
