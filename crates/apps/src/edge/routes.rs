//! Which origin a request goes to: `--upstream [/PREFIX=]http://HOST:PORT`.
//!
//! Each upstream claims a path prefix (`/` when none is given); a request
//! goes to the upstream with the longest prefix that matches its path, and
//! to the server's local content when none does. A prefix matches a path
//! equal to it, or one that continues it with `/` (so `/live` claims
//! `/live` and `/live/a.flv` but not `/lively`); a prefix ending in `/`
//! matches every path that starts with it. The path is forwarded as the
//! client sent it (no rewriting).
//!
//! Names are resolved by the driver when the server starts (the edge never
//! reads the network, and a resolver is I/O): an upstream here carries both
//! the authority as written (for `Host` when a client sends no
//! `:authority`) and the address to connect to.

use std::net::SocketAddr;

/// Why an `--upstream` value was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamError {
    /// The value does not have the `[/PREFIX=]http://HOST[:PORT]` shape.
    #[error("{0}")]
    Malformed(String),
}

/// An `--upstream` value as written, before its host is resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamSpec {
    /// The path prefix it claims (`/` when none was given).
    pub prefix: String,
    /// The origin's host (a name, an IPv4 address, or an IPv6 address
    /// without brackets).
    pub host: String,
    /// The origin's port (80 when none was given).
    pub port: u16,
}

impl UpstreamSpec {
    /// Parses `[/PREFIX=]http://HOST[:PORT][/]`. Only plain `http`: the edge
    /// speaks HTTP/1.1 over TCP to its origins (TLS to origins is not
    /// supported), and a path after the authority is refused because the
    /// edge forwards paths unchanged.
    pub fn parse(spec: &str) -> Result<UpstreamSpec, UpstreamError> {
        let bad = |why: &str| UpstreamError::Malformed(format!("{spec:?}: {why}"));
        let (prefix, url) = if spec.starts_with('/') {
            let (p, u) = spec
                .split_once('=')
                .ok_or_else(|| bad("a prefix must be followed by =http://HOST:PORT"))?;
            (p.to_string(), u)
        } else {
            ("/".to_string(), spec)
        };
        if prefix
            .chars()
            .any(|c| c.is_whitespace() || c == '?' || c == '#')
        {
            return Err(bad("the prefix must be a plain path"));
        }
        let rest = match url.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") => rest,
            Some((scheme, _)) if scheme.eq_ignore_ascii_case("https") => {
                return Err(bad(
                    "origins are reached over plain HTTP/1.1 (TLS to origins is not supported)",
                ))
            }
            _ => return Err(bad("expected http://HOST:PORT")),
        };
        let authority = rest.strip_suffix('/').unwrap_or(rest);
        if authority.contains(['/', '?', '#', '@']) || authority.is_empty() {
            return Err(bad(
                "only http://HOST[:PORT] (paths are forwarded unchanged, not rewritten)",
            ));
        }
        let (host, port) = split_authority(authority).ok_or_else(|| bad("bad HOST:PORT"))?;
        Ok(UpstreamSpec { prefix, host, port })
    }

    /// `HOST:PORT` as it goes into a `Host` field (IPv6 in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// `host[:port]` or `[v6][:port]`; port 80 by default.
fn split_authority(authority: &str) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (host, port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => (h, Some(p)),
            Some(_) => return None,
            None => (authority, None),
        }
    };
    if host.is_empty()
        || !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':'))
    {
        return None;
    }
    let port = match port {
        None => 80,
        Some(p) => p.parse().ok().filter(|&p| p != 0)?,
    };
    Some((host.to_string(), port))
}

/// One origin behind a prefix, resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// The path prefix it claims.
    pub prefix: String,
    /// `HOST:PORT` as written (the `Host` of requests that carry no
    /// authority).
    pub authority: String,
    /// Where to connect.
    pub addr: SocketAddr,
}

/// The upstreams, longest prefix first.
#[derive(Clone, Debug, Default)]
pub struct Routes {
    upstreams: Vec<Upstream>,
}

impl Routes {
    /// The table; two upstreams with the same prefix are refused.
    pub fn new(mut upstreams: Vec<Upstream>) -> Result<Routes, UpstreamError> {
        upstreams.sort_by_key(|u| std::cmp::Reverse(u.prefix.len()));
        for pair in upstreams.windows(2) {
            if let [a, b] = pair {
                if a.prefix == b.prefix {
                    return Err(UpstreamError::Malformed(format!(
                        "two upstreams claim the prefix {}",
                        a.prefix
                    )));
                }
            }
        }
        Ok(Routes { upstreams })
    }

    /// The upstreams, longest prefix first.
    pub fn upstreams(&self) -> &[Upstream] {
        &self.upstreams
    }

    /// The upstream `path` (decoded, without query) goes to, by index into
    /// [`Routes::upstreams`]; `None` for local content.
    pub fn route(&self, path: &str) -> Option<usize> {
        self.upstreams
            .iter()
            .position(|u| prefix_matches(&u.prefix, path))
    }

    /// Whether some upstream claims every path (`/`): local content is then
    /// never reached.
    pub fn claims_root(&self) -> bool {
        self.upstreams.iter().any(|u| u.prefix == "/")
    }
}

/// Whether `prefix` claims `path` (see the module documentation).
pub fn prefix_matches(prefix: &str, path: &str) -> bool {
    if prefix.ends_with('/') {
        return path.starts_with(prefix);
    }
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || rest.starts_with('/'),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_values_parse_with_and_without_a_prefix() {
        assert_eq!(
            UpstreamSpec::parse("http://127.0.0.1:8080").unwrap(),
            UpstreamSpec {
                prefix: "/".into(),
                host: "127.0.0.1".into(),
                port: 8080
            }
        );
        let s = UpstreamSpec::parse("/live=http://origin.example/").unwrap();
        assert_eq!(
            (s.prefix.as_str(), s.host.as_str(), s.port),
            ("/live", "origin.example", 80)
        );
        assert_eq!(s.authority(), "origin.example:80");
        let v6 = UpstreamSpec::parse("/a/=http://[::1]:81").unwrap();
        assert_eq!((v6.host.as_str(), v6.port), ("::1", 81));
        assert_eq!(v6.authority(), "[::1]:81");
    }

    #[test]
    fn bad_upstream_values_are_refused_with_a_reason() {
        for bad in [
            "https://o:443",
            "ftp://o",
            "o:80",
            "/live",
            "/live=o:80",
            "http://o:80/base",
            "http://user@o:80",
            "http://o:0",
            "http://o:99999",
            "http://",
            "http://[::1",
            "http://a b:80",
            "/l ive=http://o",
        ] {
            assert!(UpstreamSpec::parse(bad).is_err(), "{bad} was accepted");
        }
    }

    fn upstream(prefix: &str, port: u16) -> Upstream {
        Upstream {
            prefix: prefix.into(),
            authority: format!("o:{port}"),
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    #[test]
    fn the_longest_matching_prefix_wins() {
        let routes = Routes::new(vec![
            upstream("/", 1),
            upstream("/live", 2),
            upstream("/live/hd/", 3),
        ])
        .unwrap();
        let port = |path: &str| {
            routes
                .route(path)
                .map(|i| routes.upstreams()[i].addr.port())
        };
        assert_eq!(port("/index.html"), Some(1));
        assert_eq!(port("/live"), Some(2));
        assert_eq!(port("/live/a.flv"), Some(2));
        assert_eq!(port("/lively"), Some(1));
        assert_eq!(port("/live/hd/a.flv"), Some(3));
        assert_eq!(port("/live/hd"), Some(2));
        assert!(routes.claims_root());
    }

    #[test]
    fn without_a_root_upstream_other_paths_are_local() {
        let routes = Routes::new(vec![upstream("/live", 2)]).unwrap();
        assert_eq!(routes.route("/page.html"), None);
        assert_eq!(routes.route("/live/x"), Some(0));
        assert!(!routes.claims_root());
        assert!(Routes::new(vec![upstream("/a", 1), upstream("/a", 2)]).is_err());
    }
}
