//! The video workloads over real UDP (issues 10 and 12): `artq get --dash`
//! and `artq get --live` play from `artq serve` through `artq link`, and
//! unmodified third-party clients (aioquic, quinn) receive a live stream
//! from `artq serve` byte-exact and in order.
//!
//! Kept short: a 20 s DASH video (its segments download well ahead of
//! playback) and live streams of a few seconds (they take their length in
//! real time: the server is paced by the source clock).

mod common;

use std::path::PathBuf;
use std::time::Duration;

use apps::content::{Body, BodyChunk};
use apps::video::live::{LiveBody, LiveParams};
use common::{process, Scratch};
use wire::time::Instant;

/// `artq serve`'s seed of generated content (`serve::CONTENT_SEED`).
const VIDEO_SEED: u64 = 1;

/// The shared traces (`netem::trace::shared_traces_for_test`: a missing
/// trace fails the test unless ARTQ_SKIP_MISSING_TRACES is set).
fn traces(test: &str) -> Option<PathBuf> {
    netem::trace::shared_traces_for_test(test, &["Verizon-LTE-short.down", "Verizon-LTE-short.up"])
}

#[test]
fn get_dash_plays_a_video_through_the_verizon_link() {
    let Some(traces) = traces("get_dash_plays_a_video_through_the_verizon_link") else {
        return;
    };
    let scratch = Scratch::new();
    let (mut server, server_addr) =
        common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &["--recovery", "art"])
            .unwrap_or_else(|e| panic!("{e}"));
    let link_args: Vec<String> = vec![
        "--down-trace".into(),
        traces.join("Verizon-LTE-short.down").display().to_string(),
        "--up-trace".into(),
        traces.join("Verizon-LTE-short.up").display().to_string(),
        "--rtt".into(),
        "30".into(),
        "--loss".into(),
        "0.1".into(),
        "--seed".into(),
        "3".into(),
    ];
    let (mut link, link_addr) = common::spawn_link(&scratch, server_addr, &link_args);
    let stats = common::artq_get_json(
        &format!("https://{link_addr}/dash/20/manifest.mpd"),
        &["--dash"],
        &mut || format!("link: {}\nserver: {}", link.describe(), server.describe()),
    );
    assert_eq!(stats["workload"], "dash");
    assert_eq!(stats["segments"], 10, "{stats}");
    assert_eq!(stats["played_s"].as_f64(), Some(20.0), "{stats}");
    let kbps = stats["avg_bitrate_kbps"].as_f64().unwrap_or(0.0);
    assert!((45.0..=3841.0).contains(&kbps), "{stats}");
    assert!(
        stats["startup_ms"].as_f64().is_some_and(|v| v > 0.0),
        "{stats}"
    );
    assert!(stats["rebuffer_count"].as_u64().is_some(), "{stats}");
    assert!(stats["bitrate_switches"].as_u64().is_some(), "{stats}");
}

#[test]
fn get_live_plays_a_stream_through_a_lossy_link() {
    let scratch = Scratch::new();
    let (mut server, server_addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let link_args: Vec<String> = ["--bw", "8", "--rtt", "50", "--loss", "0.05", "--seed", "4"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (mut link, link_addr) = common::spawn_link(&scratch, server_addr, &link_args);
    let started = std::time::Instant::now();
    let stats = common::artq_get_json(
        &format!("https://{link_addr}/live/2000/4"),
        &["--live"],
        &mut || format!("link: {}\nserver: {}", link.describe(), server.describe()),
    );
    // Paced by the source: 4 s of stream take at least 4 s to arrive.
    assert!(started.elapsed() >= Duration::from_secs(4), "{stats}");
    assert_eq!(stats["workload"], "live");
    assert_eq!(stats["frames"], 120, "4 s at 30 fps: {stats}");
    let kbps = stats["avg_bitrate_kbps"].as_f64().unwrap_or(0.0);
    assert!((1700.0..2300.0).contains(&kbps), "{stats}");
    assert!(
        stats["freeze_count"].as_f64().is_some_and(|v| v >= 0.0),
        "{stats}"
    );
    assert!(
        stats["freeze_ms"].as_f64().is_some_and(|v| v >= 0.0),
        "{stats}"
    );
    assert!(
        stats["startup_ms"].as_f64().is_some_and(|v| v >= 1000.0),
        "1 s start-up delay after the first frame: {stats}"
    );
}

/// The bytes of `/live/<kbps>/<seconds>` as `artq serve` sends them.
fn live_bytes(kbps: u32, seconds: u32) -> Vec<u8> {
    let mut body = LiveBody::new(LiveParams::new(kbps, seconds), VIDEO_SEED, Instant::ZERO);
    let mut out = Vec::new();
    let mut buf = vec![0; 1 << 16];
    // Far in the future: every frame is due.
    while let Ok(BodyChunk::Data(n)) = body.read(Instant::MAX, &mut buf) {
        out.extend_from_slice(&buf[..n]);
    }
    out
}

#[test]
fn aioquic_receives_the_live_stream_byte_exact() {
    common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let out = scratch.out("live");
    let run = common::aioquic_download(
        &format!("https://{addr}/live/1500/3"),
        &out,
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert!(
        run.status.success(),
        "aioquic client failed ({}):\n{}\nserver: {}",
        run.status,
        run.stderr,
        server.describe()
    );
    let got = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    check_live(&got, 1500, 3, 90);
}

/// Checks a received live stream against the source: same bytes, and
/// every frame in order with its payload.
fn check_live(got: &[u8], kbps: u32, seconds: u32, frames: u32) {
    let expected = live_bytes(kbps, seconds);
    assert_eq!(got.len(), expected.len(), "stream length");
    assert!(
        got == expected.as_slice(),
        "the stream's bytes differ from the source's"
    );
    let mut parser = apps::video::frame::FrameParser::new();
    let mut seen = 0;
    parser
        .push(got, |_| seen += 1)
        .and_then(|()| parser.finish())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(seen, frames);
}

#[test]
fn quinn_receives_the_live_stream_byte_exact() {
    let scratch = Scratch::new();
    let (mut server, addr) = common::spawn_artq_serve(&scratch.root(), &scratch.logs(), &[])
        .unwrap_or_else(|e| panic!("{e}"));
    let rt = common::runtime();
    let out = scratch.out("live");
    let started = std::time::Instant::now();
    let fetched = common::quinn_download(&rt, addr, "/live/3000/3", &out, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert!(
        started.elapsed() >= Duration::from_millis(2900),
        "a 3 s live stream is sent as it is produced"
    );
    let got = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    assert_eq!(fetched.bytes, got.len() as u64);
    check_live(&got, 3000, 3, 90);
}

/// `artq serve --recovery autorec` behind `artq link` at AutoRec's setting
/// (8 Mbit/s, 50 ms, 5% loss both ways): returns the guards and the link's
/// address.
fn autorec_behind_lossy_link(
    scratch: &Scratch,
) -> (
    process::ChildGuard,
    process::ChildGuard,
    std::net::SocketAddr,
) {
    let (server, server_addr) = common::spawn_artq_serve(
        &scratch.root(),
        &scratch.logs(),
        &["--recovery", "autorec", "--cc", "bbr"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let link_args: Vec<String> = ["--bw", "8", "--rtt", "50", "--loss", "0.05", "--seed", "7"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let (link, link_addr) = common::spawn_link(scratch, server_addr, &link_args);
    (server, link, link_addr)
}

#[test]
fn quinn_receives_autorecs_live_stream_through_a_lossy_link() {
    let scratch = Scratch::new();
    let (mut server, mut link, addr) = autorec_behind_lossy_link(&scratch);
    let rt = common::runtime();
    let out = scratch.out("live");
    let fetched = common::quinn_download(&rt, addr, "/live/3000/3", &out, Duration::from_secs(60))
        .unwrap_or_else(|e| {
            panic!(
                "{e}\nlink: {}\nserver: {}",
                link.describe(),
                server.describe()
            )
        });
    let got = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    assert_eq!(fetched.bytes, got.len() as u64);
    check_live(&got, 3000, 3, 90);
}

#[test]
fn aioquic_receives_autorecs_live_stream_through_a_lossy_link() {
    common::interop_python().unwrap_or_else(|e| panic!("{e}"));
    let scratch = Scratch::new();
    let (mut server, mut link, addr) = autorec_behind_lossy_link(&scratch);
    let out = scratch.out("live");
    let run = common::aioquic_download(
        &format!("https://{addr}/live/3000/3"),
        &out,
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("{e}\nserver: {}", server.describe()));
    assert!(
        run.status.success(),
        "aioquic client failed ({}):\n{}\nlink: {}\nserver: {}",
        run.status,
        run.stderr,
        link.describe(),
        server.describe()
    );
    let got = std::fs::read(&out).unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    check_live(&got, 3000, 3, 90);
}
