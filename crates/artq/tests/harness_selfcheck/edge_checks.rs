//! Self-check of the edge tests' real components, with no artq code in the
//! path: nginx as an origin, ffmpeg as a live encoder behind it, the
//! many-URL HTTP/3 fetcher against the quinn + h3 reference server, and
//! Chromium playing the live stream with mpegts.js over plain HTTP/1.1
//! through nginx.
//!
//! Why this exists: `edge_origin.rs` and `edge_live.rs` put `artq serve
//! --upstream` between these pieces. When one of those fails, these tests
//! say whether the pieces themselves work (and how well: the player's
//! stalls and position over a clean HTTP/1.1 path are the baseline of the
//! live test's numbers), so the failure is the edge's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use super::common::edge::{self, PlayerRun};
use super::common::ffmpeg::{self, Container, LiveConfig, LiveEncoder};
use super::common::nginx::Nginx;
use super::common::{certs, Scratch};

/// A response head and up to a bounded amount of its (de-chunked) body.
struct Http1Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Http1Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// `GET path` over HTTP/1.1 (`Connection: close`); reads the body for at
/// most `read_for`, keeping at most `max_body` bytes (chunked bodies are
/// de-chunked). Returns also how many body bytes arrived in all.
fn http1_get(
    addr: SocketAddr,
    path: &str,
    read_for: Duration,
    max_body: usize,
) -> Result<(Http1Response, u64), String> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .map_err(|e| format!("connect {addr}: {e}"))?;
    stream
        .set_read_timeout(Some(Duration::from_millis(200)))
        .map_err(|e| e.to_string())?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| format!("send request: {e}"))?;
    let start = Instant::now();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let read_line = |reader: &mut BufReader<TcpStream>, line: &mut String| loop {
        line.clear();
        match reader.read_line(line) {
            Ok(_) => return Ok(()),
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut =>
            {
                if start.elapsed() > read_for + Duration::from_secs(5) {
                    return Err("no response head in time".to_string());
                }
            }
            Err(e) => return Err(format!("read: {e}")),
        }
    };
    read_line(&mut reader, &mut line)?;
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line {line:?}"))?;
    let mut headers = Vec::new();
    loop {
        read_line(&mut reader, &mut line)?;
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    let mut response = Http1Response {
        status,
        headers,
        body: Vec::new(),
    };
    let chunked = response
        .header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
    // Raw bytes after the head; de-chunked below (bounded by max_body).
    let mut raw = Vec::new();
    let mut total_raw: u64 = 0;
    let mut buf = vec![0u8; 64 * 1024];
    while start.elapsed() < read_for {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                total_raw += n as u64;
                let room = (max_body + 64 * 1024).saturating_sub(raw.len());
                raw.extend_from_slice(&buf[..n.min(room)]);
            }
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(e) => return Err(format!("read body: {e}")),
        }
    }
    response.body = if chunked {
        dechunk(&raw, max_body)?
    } else {
        raw
    };
    response.body.truncate(max_body);
    Ok((response, total_raw))
}

/// The data of a chunked body's complete chunks, at most `max` bytes.
fn dechunk(raw: &[u8], max: usize) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let mut at = 0;
    while out.len() < max {
        let Some(eol) = raw[at..].windows(2).position(|w| w == b"\r\n") else {
            break;
        };
        let size_text = String::from_utf8_lossy(&raw[at..at + eol]).to_string();
        let size = usize::from_str_radix(size_text.split(';').next().unwrap_or("").trim(), 16)
            .map_err(|e| format!("bad chunk size {size_text:?}: {e}"))?;
        let data = at + eol + 2;
        if size == 0 || data + size > raw.len() {
            break;
        }
        out.extend_from_slice(&raw[data..data + size]);
        at = data + size + 2;
    }
    Ok(out)
}

/// nginx serves files from its root, sends `Cache-Control: max-age` where
/// told, and its access log counts every request by path prefix.
#[test]
fn nginx_serves_files_sets_cache_control_and_counts_requests() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.root().join("cache")).expect("mkdir");
    let a = scratch.served_file("a", 10_000, 1);
    let b = scratch.served_file("cache/b", 5_000, 2);
    let mut nginx = Nginx::start(
        &scratch.root(),
        scratch.path(),
        &Nginx::cache_control_location("/cache/", 300),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    for _ in 0..3 {
        let (r, _) = http1_get(nginx.addr(), "/a", Duration::from_secs(2), 1 << 20)
            .unwrap_or_else(|e| panic!("{e}\n{}", nginx.describe()));
        assert_eq!(r.status, 200);
        assert_eq!(r.body, std::fs::read(&a).expect("read a"));
        assert_eq!(r.header("cache-control"), None);
    }
    let (r, _) = http1_get(nginx.addr(), "/cache/b", Duration::from_secs(2), 1 << 20)
        .unwrap_or_else(|e| panic!("{e}\n{}", nginx.describe()));
    assert_eq!(r.status, 200);
    assert_eq!(r.body, std::fs::read(&b).expect("read b"));
    assert_eq!(r.header("cache-control"), Some("max-age=300"));
    let (r, _) = http1_get(nginx.addr(), "/missing", Duration::from_secs(2), 1 << 20)
        .unwrap_or_else(|e| panic!("{e}\n{}", nginx.describe()));
    assert_eq!(r.status, 404);
    assert_eq!(nginx.wait_access_count("/", 5, Duration::from_secs(5)), 5);
    assert_eq!(nginx.access_log_count("/a"), 3);
    assert_eq!(nginx.access_log_count("/cache/"), 1);
    assert_eq!(nginx.access_log_count("/missing"), 1);
}

/// ffmpeg's live FLV through nginx (`proxy_buffering off`): 200,
/// `video/x-flv`, chunked, FLV header then the H.264 sequence header then a
/// keyframe, at about the configured 2.5 Mbit/s; nginx logs the request
/// once it ends, and a second request (ffmpeg serves one client) shows up
/// as a 502: a second origin request cannot go unnoticed.
#[test]
fn ffmpeg_live_flv_through_nginx_is_real_time_and_counted() {
    let scratch = Scratch::new();
    let config = LiveConfig::default();
    let mut encoder =
        LiveEncoder::start(&config, &scratch.logs()).unwrap_or_else(|e| panic!("{e}"));
    let mut nginx = Nginx::start(
        &scratch.root(),
        scratch.path(),
        &Nginx::live_proxy_location("/live/", encoder.addr()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let read_for = Duration::from_secs(6);
    let (r, raw_bytes) = http1_get(nginx.addr(), "/live/stream.flv", read_for, 1 << 20)
        .unwrap_or_else(|e| panic!("{e}\n{}\n{}", encoder.describe(), nginx.describe()));
    assert_eq!(r.status, 200, "{}", encoder.describe());
    assert_eq!(r.header("content-type"), Some("video/x-flv"));
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.header("content-length"), None);
    let start = ffmpeg::flv_start(&r.body).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        start.metadata && start.sequence_header && start.keyframe_first,
        "{start:?}"
    );
    // The first second is sent as soon as it is encoded: about 6.5 s of
    // stream in 6 s; allow a loaded machine's slower start.
    let mbps = raw_bytes as f64 * 8.0 / read_for.as_secs_f64() / 1e6;
    assert!(
        (1.5..4.0).contains(&mbps),
        "live origin delivered {raw_bytes} bytes in {read_for:?} = {mbps:.2} Mbit/s, \
         configured {} kbit/s\n{}",
        config.kbps,
        encoder.describe()
    );
    eprintln!("ffmpeg through nginx: {mbps:.2} Mbit/s, {start:?}");
    assert!(encoder.has_accepted_client());
    assert_eq!(
        nginx.wait_access_count("/live/", 1, Duration::from_secs(5)),
        1,
        "{}",
        nginx.describe()
    );
    let (second, _) = http1_get(
        nginx.addr(),
        "/live/stream.flv",
        Duration::from_secs(1),
        1024,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", nginx.describe()));
    assert_eq!(second.status, 502, "ffmpeg serves one client only");
    assert_eq!(
        nginx.wait_access_count("/live/", 2, Duration::from_secs(5)),
        2
    );
    let statuses: Vec<u16> = nginx.access_entries().iter().map(|e| e.status).collect();
    assert_eq!(statuses, vec![200, 502]);
}

/// The many-URL fetcher against the quinn + h3 reference server: statuses,
/// SHA-256 of each body, a clean end, and a cancelled read under `--for`
/// (2 s: at 0.3 s a loaded 2-core machine sometimes had no response head
/// yet, and the run failed; aioquic reads 200 MB far slower than that).
#[test]
fn h3_fetch_reports_status_digest_end_and_cancels() {
    let scratch = Scratch::new();
    let small = scratch.served_file("small", 30_000, 3);
    scratch.served_file("big", 200_000_000, 4);
    let rt = super::common::runtime();
    let server = super::common::quinn_h3_server(&rt, &scratch);
    let base = format!("https://{}", server.addr);
    let urls = vec![
        format!("{base}/small"),
        format!("{base}/missing"),
        format!("{base}/small"),
    ];
    let (run, got) = edge::h3_fetch(&urls, &[], Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert_eq!(
        run.status.code(),
        Some(1),
        "a 404 is a failed URL: {}",
        run.stderr
    );
    let digest = certs::sha256_file_hex(&small).expect("hash");
    for i in [0, 2] {
        assert_eq!(got[i].status, Some(200), "{}", got[i].raw);
        assert_eq!(got[i].end, "fin", "{}", got[i].raw);
        assert_eq!(got[i].bytes, 30_000);
        assert_eq!(got[i].sha256, digest);
    }
    assert_eq!(got[1].status, Some(404), "{}", got[1].raw);
    let (run, got) = edge::h3_fetch(
        &[format!("{base}/big")],
        &["--for", "2"],
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(got[0].end, "cancelled", "{}", got[0].raw);
    assert!(
        got[0].bytes < 200_000_000 && got[0].cancel_unix.is_some(),
        "{}",
        got[0].raw
    );
    // The same, leaving by closing the connection.
    let (run, got) = edge::h3_fetch(
        &[format!("{base}/big")],
        &["--for", "2", "--abort", "close"],
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", server.describe()));
    assert!(run.status.success(), "{}\n{}", run.stdout, run.stderr);
    assert_eq!(got[0].end, "cancelled", "{}", got[0].raw);
    assert!(got[0].bytes < 200_000_000, "{}", got[0].raw);
}

/// Chromium plays ffmpeg's live FLV with mpegts.js over plain HTTP/1.1
/// through nginx for 20 s (page and library from nginx's root): it starts,
/// plays about as long as it ran, and barely stalls. The baseline of the
/// live edge test's numbers.
#[test]
fn chromium_plays_live_flv_from_ffmpeg_through_nginx_over_http1() {
    let scratch = Scratch::new();
    edge::install_player(&scratch.root()).unwrap_or_else(|e| panic!("{e}"));
    let mut encoder = LiveEncoder::start(&LiveConfig::default(), &scratch.logs())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut nginx = Nginx::start(
        &scratch.root(),
        scratch.path(),
        &Nginx::live_proxy_location("/live/", encoder.addr()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let page = format!("http://{}/live_player.html", nginx.addr());
    let seconds = 20;
    let (run, result) = edge::live_player(
        &PlayerRun {
            page_url: &page,
            stream_url: "/live/stream.flv",
            container: Container::Flv,
            seconds,
            protocol: "http/1.1",
            spki: None,
            netlog: None,
        },
        Duration::from_secs(u64::from(seconds) + 60),
    )
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", encoder.describe(), nginx.describe()));
    let context = format!(
        "driver ({}):\n{}\n{}\n{}\n{}",
        run.status,
        run.stdout,
        run.stderr,
        encoder.describe(),
        nginx.describe()
    );
    let result = result.unwrap_or_else(|| panic!("no result line: {context}"));
    eprintln!("{}", result.summary());
    assert!(run.status.success(), "{context}");
    assert!(
        result.played_s >= f64::from(seconds) - 4.0,
        "played {:.2} s of {seconds}: {context}",
        result.played_s
    );
    assert!(result.stall_ms < 2000.0, "{}: {context}", result.summary());
    assert!(result.errors.is_empty(), "{}: {context}", result.summary());
}

/// ffmpeg's live MPEG-TS through nginx: 200, `video/mp2t`, chunked, and
/// the stream starts as the TS start check wants it (PAT, PMT, then a
/// random-access PES): the check the live edge test applies to late
/// joiners holds for the encoder's own start.
#[test]
fn ffmpeg_live_mpegts_through_nginx_starts_with_pat_pmt_and_a_keyframe() {
    let scratch = Scratch::new();
    let config = LiveConfig {
        container: Container::MpegTs,
        ..LiveConfig::default()
    };
    let mut encoder =
        LiveEncoder::start(&config, &scratch.logs()).unwrap_or_else(|e| panic!("{e}"));
    let mut nginx = Nginx::start(
        &scratch.root(),
        scratch.path(),
        &Nginx::live_proxy_location("/live/", encoder.addr()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let (r, raw_bytes) = http1_get(
        nginx.addr(),
        "/live/stream.ts",
        Duration::from_secs(3),
        1 << 20,
    )
    .unwrap_or_else(|e| panic!("{e}\n{}\n{}", encoder.describe(), nginx.describe()));
    assert_eq!(r.status, 200, "{}", encoder.describe());
    assert_eq!(r.header("content-type"), Some("video/mp2t"));
    assert_eq!(r.header("content-length"), None);
    let start = ffmpeg::ts_start(&r.body).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("ffmpeg mpegts through nginx: {raw_bytes} bytes in 3 s, {start:?}");
    assert!(
        start.pat && start.pmt && start.random_access_first,
        "{start:?}"
    );
    // Cut after the first PES start, the stream is no longer a clean
    // start: the check must say so (the next PES is not a keyframe).
    let cut = &r.body[start.packets * 188..];
    let later = ffmpeg::ts_start(cut);
    assert!(
        later
            .as_ref()
            .map_or(true, |s| !(s.pat && s.pmt && s.random_access_first)),
        "{later:?}"
    );
}
