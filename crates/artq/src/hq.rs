//! hq-interop (HTTP/0.9 over QUIC): `GET /path\r\n` on a bidirectional
//! stream, answered with the file's bytes and FIN.

use std::path::{Component, Path, PathBuf};

/// ALPN of hq-interop.
pub const ALPN: &[u8] = b"hq-interop";

/// Longest request line accepted.
pub const MAX_REQUEST: usize = 4096;

/// Why a request cannot be served.
#[derive(Debug, PartialEq, Eq)]
pub enum RequestError {
    /// Not `GET <path>`.
    Malformed,
    /// The path leaves the root or names something that is not a file.
    Forbidden,
}

/// The path of a complete request line (`GET /a/b\r\n`, or without CRLF
/// when the stream ended), or `None` if more bytes are needed.
pub fn parse_request(buf: &[u8], fin: bool) -> Option<Result<String, RequestError>> {
    let line_end = buf
        .windows(2)
        .position(|w| w == b"\r\n")
        .or_else(|| buf.iter().position(|&b| b == b'\n'));
    let line = match line_end {
        Some(end) => &buf[..end],
        None if fin => buf,
        None if buf.len() > MAX_REQUEST => return Some(Err(RequestError::Malformed)),
        None => return None,
    };
    let Ok(line) = std::str::from_utf8(line) else {
        return Some(Err(RequestError::Malformed));
    };
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next()) {
        (Some("GET"), Some(path)) => Some(Ok(path.to_string())),
        _ => Some(Err(RequestError::Malformed)),
    }
}

/// Resolve a request path under `root`, refusing anything that would leave
/// it (`..`, absolute prefixes) and anything but regular files.
pub fn resolve(root: &Path, request_path: &str) -> Result<PathBuf, RequestError> {
    let path = request_path.split(['?', '#']).next().unwrap_or("");
    let rel = Path::new(path.trim_start_matches('/'));
    let mut out = root.to_path_buf();
    for c in rel.components() {
        match c {
            Component::Normal(part) => out.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(RequestError::Forbidden)
            }
        }
    }
    // Symlinks could still point outside: compare canonical forms.
    let canon_root = root.canonicalize().map_err(|_| RequestError::Forbidden)?;
    let canon = out.canonicalize().map_err(|_| RequestError::Forbidden)?;
    if !canon.starts_with(&canon_root) || !canon.is_file() {
        return Err(RequestError::Forbidden);
    }
    Ok(canon)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_requests() {
        assert_eq!(
            parse_request(b"GET /a.bin\r\n", false),
            Some(Ok("/a.bin".into()))
        );
        assert_eq!(parse_request(b"GET /a.bin", false), None);
        assert_eq!(
            parse_request(b"GET /a.bin", true),
            Some(Ok("/a.bin".into()))
        );
        assert_eq!(
            parse_request(b"PUT /x\r\n", false),
            Some(Err(RequestError::Malformed))
        );
        assert_eq!(
            parse_request(&[0xff, b'\r', b'\n'], false),
            Some(Err(RequestError::Malformed))
        );
        assert_eq!(
            parse_request(&vec![b'a'; MAX_REQUEST + 1], false),
            Some(Err(RequestError::Malformed))
        );
    }

    #[test]
    fn confines_paths_to_root() {
        let dir = std::env::temp_dir().join(format!("artq-hq-test-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("sub/f.txt"), b"x").unwrap();
        assert!(resolve(&dir, "/sub/f.txt").is_ok());
        assert!(resolve(&dir, "sub/./f.txt").is_ok());
        assert_eq!(
            resolve(&dir, "/../etc/passwd"),
            Err(RequestError::Forbidden)
        );
        assert_eq!(resolve(&dir, "/sub/../../x"), Err(RequestError::Forbidden));
        assert_eq!(resolve(&dir, "/sub"), Err(RequestError::Forbidden));
        assert_eq!(resolve(&dir, "/missing"), Err(RequestError::Forbidden));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
