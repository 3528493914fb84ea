//! What one peer can make the server hold (issue 15, bug 3), measured
//! through real connections (`Pair`) with a counting allocator: this test
//! binary's global allocator counts the bytes live on the heap, so each
//! test compares what is allocated before and after the peer's doing.
//!
//! Every test takes [`MEASURE`] for its whole run, so no other test of this
//! binary allocates meanwhile; what the harness itself allocates is noise
//! well below the bounds asserted.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use transport::test_pair::Pair;
use transport::{ConnectionError, Event, TransportConfig};
use wire::coding::BufMutExt;
use wire::time::Duration;
use wire::{Dir, StreamId, TransportErrorCode};

/// The system allocator, counting live and peak bytes.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Ordering::Relaxed) + by;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counters are plain atomics.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded as received.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Held by each test for its whole run: one measurement at a time.
static MEASURE: Mutex<()> = Mutex::new(());

fn measure() -> MutexGuard<'static, ()> {
    MEASURE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Bytes live on the heap now.
fn live() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a peak measurement from now; returns the live bytes now.
fn reset_peak() -> usize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

fn peak() -> usize {
    PEAK.load(Ordering::Relaxed)
}

const MIB: usize = 1 << 20;

/// A STREAM frame with offset and length fields.
fn stream_frame(out: &mut Vec<u8>, id: StreamId, offset: u64, data: &[u8]) {
    out.put_u8(0x08 | 0x04 | 0x02);
    out.put_varint(id.0);
    out.put_varint(offset);
    out.put_varint(data.len() as u64);
    out.put_slice(data);
}

/// The transport error code the server closed with, as the client heard it.
fn server_close_code(pair: &mut Pair) -> Option<u64> {
    let mut code = None;
    while let Some(ev) = pair.client_opt().and_then(|c| c.poll_event()) {
        if let Event::ConnectionLost(ConnectionError::PeerClosed {
            code: c,
            application: false,
            ..
        }) = ev
        {
            code = Some(c);
        }
    }
    code
}

/// Lets everything in flight arrive and be answered.
fn settle(pair: &mut Pair) {
    pair.drive_until(Duration::from_millis(100), |_| false);
}

#[test]
fn a_far_offset_stream_frame_costs_about_what_it_carries() {
    let _m = measure();
    let mut pair = Pair::default_pair();
    pair.connect();
    settle(&mut pair);
    let before = live();
    // One byte at the last offset the default 16 MiB stream window allows.
    let mut f = Vec::new();
    stream_frame(&mut f, StreamId(0), (16 << 20) - 1, b"z");
    pair.client().inject_raw_frames(f);
    settle(&mut pair);
    let grown = live().saturating_sub(before);
    assert_eq!(
        pair.server().streams().recv_buffered(StreamId(0)),
        Some(1),
        "the byte arrived and is held"
    );
    assert!(
        grown < 64 * 1024,
        "one 1-byte frame at offset 16 MiB-1 grew the heap by {grown} bytes"
    );
}

#[test]
fn a_peer_fragmenting_its_data_is_closed_before_memory_grows() {
    let _m = measure();
    let mut pair = Pair::default_pair();
    pair.connect();
    settle(&mut pair);
    let before = reset_peak();
    // One byte at every other offset, never offset 0: nothing is readable,
    // every byte leaves a hole. 150 frames per packet, up to 200 000.
    let mut offset = 1u64;
    let mut code = None;
    for _ in 0..(200_000 / 150) {
        let mut f = Vec::new();
        for _ in 0..150 {
            stream_frame(&mut f, StreamId(0), offset, b"x");
            offset += 2;
        }
        pair.client().inject_raw_frames(f);
        pair.drive_until(Duration::from_millis(5), |_| false);
        code = server_close_code(&mut pair);
        if code.is_some() {
            break;
        }
    }
    let grown = peak().saturating_sub(before);
    assert_eq!(
        code,
        Some(TransportErrorCode::PROTOCOL_VIOLATION.0),
        "the server must close once the data is fragmented past its limit \
         ({} one-byte frames sent, heap peak +{grown} bytes)",
        offset / 2
    );
    let limit = TransportConfig::default().streams.max_receive_pieces;
    assert!(
        offset / 2 <= limit + 1000,
        "closed only after {} frames",
        offset / 2
    );
    assert!(
        grown < 4 * MIB,
        "heap peak grew by {grown} bytes before the close"
    );
}

#[test]
fn unread_datagrams_are_bounded_and_the_newest_kept() {
    let _m = measure();
    let mut pair = Pair::default_pair();
    pair.connect();
    settle(&mut pair);
    let before = live();
    let defaults = TransportConfig::default();
    let (frames, bytes) = (
        defaults.datagram_receive_frames,
        defaults.datagram_receive_buffer,
    );
    // 2000 datagrams of 1100 bytes (2.2 MB) that the server never reads.
    let payload = |i: u32| {
        let mut d = vec![(i % 251) as u8; 1100];
        d[..4].copy_from_slice(&i.to_be_bytes());
        d
    };
    for i in 0..2000u32 {
        pair.client()
            .send_datagram(payload(i))
            .expect("datagram queued");
        if i % 100 == 99 {
            pair.drive_until(Duration::from_millis(50), |_| false);
        }
    }
    // Until the client has sent everything (its congestion window paces it).
    pair.drive_until(Duration::from_secs(5), |_| false);
    let grown = live().saturating_sub(before);
    let server = pair.server();
    let mut kept = Vec::new();
    while let Some(d) = server.recv_datagram() {
        kept.push(d);
    }
    let held: usize = kept.iter().map(Vec::len).sum();
    assert!(
        kept.len() <= frames && held <= bytes,
        "{} datagrams, {held} bytes kept (limits {frames}, {bytes})",
        kept.len()
    );
    assert_eq!(
        kept.last().map(|d| d[..4].to_vec()),
        Some(1999u32.to_be_bytes().to_vec()),
        "the newest datagram is kept (the oldest are dropped)"
    );
    assert_eq!(server.datagrams_dropped(), 2000 - kept.len() as u64);
    assert!(
        grown < bytes + MIB / 2,
        "unread datagrams grew the heap by {grown} bytes"
    );
}

/// The scenario at the transport level: a client with small
/// flow-control windows opens 100 streams; the server has 20 MB to send on
/// each and writes until the transport refuses. It must hold about what
/// the client's windows grant, not 100 x 16 MiB; and as the client reads,
/// `Writable` tells the server when to write again.
#[test]
fn a_hundred_streams_with_small_windows_hold_what_flow_control_grants() {
    let _m = measure();
    let mut client_cfg = TransportConfig::default();
    client_cfg.streams.receive_window = 256 * 1024;
    client_cfg.streams.stream_receive_window = 16 * 1024;
    let mut pair = Pair::new(TransportConfig::default(), client_cfg);
    pair.connect();
    let ids: Vec<StreamId> = (0..100)
        .map(|_| {
            let c = pair.client();
            let id = c.streams().open(Dir::Bi).expect("stream");
            c.streams().write(id, b"GET /big\r\n").expect("request");
            c.streams().finish(id).expect("fin");
            id
        })
        .collect();
    settle(&mut pair);
    let source = vec![7u8; MIB];
    let file = 20_000_000usize;
    let before = reset_peak();
    let mut written = vec![0usize; ids.len()];
    let write_all = |pair: &mut Pair, written: &mut [usize]| {
        let server = pair.server();
        while server.streams().accept(Dir::Bi).is_some() {}
        for (k, &id) in ids.iter().enumerate() {
            while written[k] < file {
                let n = (file - written[k]).min(source.len());
                match server.streams().write(id, &source[..n]) {
                    Ok(n) => written[k] += n,
                    Err(_) => break,
                }
            }
        }
    };
    for _ in 0..20 {
        write_all(&mut pair, &mut written);
        pair.drive_until(Duration::from_millis(20), |_| false);
    }
    let held = pair.server().streams().send_buffered_total();
    let grown = peak().saturating_sub(before);
    let total: usize = written.iter().sum();
    // Granted: the client's 256 KiB connection window (each stream 16 KiB);
    // allowed ahead: StreamsConfig::send_ahead past the connection's credit,
    // past the streams' credit, and per stream (each may hold that much).
    let bound = 256 * 1024 + (2 + 100) * TransportConfig::default().streams.send_ahead;
    assert!(
        held <= bound,
        "the server holds {held} bytes for sending (bound {bound})"
    );
    assert!(
        total as u64 <= bound + 256 * 1024,
        "the server took {total} bytes of writes ahead of the client's windows"
    );
    assert!(grown < 12 * MIB, "the heap grew by {grown} bytes");

    // The client reads everything that arrived; credit flows back, and the
    // server hears `Writable` on the streams it was blocked on.
    let mut buf = vec![0u8; 64 * 1024];
    let mut read = 0usize;
    for _ in 0..5 {
        let client = pair.client();
        for &id in &ids {
            while let Ok(Some(n)) = client.streams().read(id, &mut buf) {
                read += n;
            }
        }
        pair.drive_until(Duration::from_millis(50), |_| false);
    }
    let mut writable = 0;
    while let Some(ev) = pair.server().poll_event() {
        if let Event::Stream(transport::streams::StreamEvent::Writable { .. }) = ev {
            writable += 1;
        }
    }
    assert!(read > 256 * 1024, "the client read only {read} bytes");
    assert!(
        writable > 0,
        "no Writable after the client's credit came back"
    );
    write_all(&mut pair, &mut written);
    let more: usize = written.iter().sum::<usize>() - total;
    assert!(more > 0, "the server could not write after the credit grew");
    assert!(
        pair.server().streams().send_buffered_total() <= bound + read as u64,
        "still within what was granted"
    );
}
