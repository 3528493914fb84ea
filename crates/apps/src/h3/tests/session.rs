//! A client session fetching from a server session.

use transport::test_pair::{content, Pair};
use transport::TransportConfig;
use wire::time::Duration;

use super::Harness;
use crate::h3::control::our_settings;
use crate::http::{
    ClientSession, Field, Method, Request, SendError, ServerEvent, ServerSession, MAX_FIELD_SECTION,
};

#[test]
fn settings_are_exchanged() {
    let mut h = Harness::sessions();
    assert!(h.run(Duration::from_secs(2), |h| {
        h.server.as_ref().unwrap().peer_settings().is_some()
            && h.client.as_ref().unwrap().peer_settings().is_some()
    }));
    let settings = h.client.as_ref().unwrap().peer_settings().unwrap();
    assert_eq!(settings, our_settings());
    assert_eq!(settings.max_field_section_size, Some(MAX_FIELD_SECTION));
}

#[test]
fn fetches_a_large_body_byte_exact() {
    let mut h = Harness::sessions();
    let body = content(5 << 20, 1);
    h.files.insert("/big".into(), body.clone());
    let id = h.get("/big");
    assert!(h.finish_downloads(Duration::from_secs(30)));
    let d = &h.downloads[&id];
    let head = d.head.as_ref().expect("a response head");
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(body.len() as u64));
    assert!(d.done && d.error.is_none(), "{d:?}");
    assert!(
        d.body == body,
        "body differs ({} of {} bytes)",
        d.body.len(),
        body.len()
    );
    // The server saw exactly one request, with its authority.
    match &h.server_events[..] {
        [ServerEvent::Request { request, .. }] => {
            assert_eq!(request.method, Method::Get);
            assert_eq!(request.path, "/big");
            assert_eq!(request.authority.as_deref(), Some("localhost:4433"));
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn concurrent_requests_each_get_their_body() {
    let mut h = Harness::sessions();
    let sizes = [0usize, 1, 1000, 70_000, 1 << 20, 3 << 20, 12_345, 2];
    let mut ids = Vec::new();
    for (i, &size) in sizes.iter().enumerate() {
        let path = format!("/f{i}");
        h.files.insert(path.clone(), content(size, i as u64));
        ids.push((h.get(&path), path));
    }
    let missing = h.get("/missing");
    assert!(h.finish_downloads(Duration::from_secs(60)));
    for (id, path) in &ids {
        let d = &h.downloads[id];
        assert_eq!(d.head.as_ref().map(|h| h.status), Some(200), "{path}");
        assert!(d.done, "{path}: {d:?}");
        assert!(d.body == h.files[path], "{path}: body differs");
    }
    let d = &h.downloads[&missing];
    assert_eq!(d.head.as_ref().map(|h| h.status), Some(404));
    assert!(d.done && d.body.is_empty());
}

#[test]
fn head_response_has_no_body() {
    let mut h = Harness::sessions();
    h.files.insert("/doc".into(), content(5000, 3));
    let id = h.request(Request {
        method: Method::Head,
        authority: Some("localhost".into()),
        headers: vec![Field::new("User-Agent", "artq-test")],
        ..Request::get("/doc")
    });
    assert!(h.finish_downloads(Duration::from_secs(5)));
    let d = &h.downloads[&id];
    let head = d.head.as_ref().unwrap();
    assert_eq!(head.status, 200);
    assert_eq!(head.content_length(), Some(5000));
    assert!(d.done && d.body.is_empty());
    match &h.server_events[..] {
        [ServerEvent::Request { request, .. }] => {
            assert_eq!(request.method, Method::Head);
            // Field::new lowercased the name; it arrived as sent.
            assert_eq!(request.headers, vec![Field::new("user-agent", "artq-test")]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn other_methods_reach_the_application() {
    let mut h = Harness::sessions();
    let id = h.request(Request {
        method: Method::Other("DELETE".into()),
        authority: Some("localhost".into()),
        ..Request::get("/x")
    });
    assert!(h.finish_downloads(Duration::from_secs(5)));
    assert_eq!(h.downloads[&id].head.as_ref().unwrap().status, 405);
}

#[test]
fn requests_need_an_authority() {
    let mut h = Harness::sessions();
    let conn = h.pair.client();
    let client = h.client.as_mut().unwrap();
    assert!(matches!(
        client.send_request(conn, &Request::get("/")),
        Err(SendError::NotReady(_))
    ));
}

#[test]
fn goaway_refuses_new_requests_and_lets_old_ones_finish() {
    let mut h = Harness::sessions();
    h.files.insert("/a".into(), content(2 << 20, 4));
    let first = h.get("/a");
    // Let the request reach the server, then shut down.
    assert!(h.run(Duration::from_secs(2), |h| !h.server_events.is_empty()));
    let conn = h.pair.server();
    h.server.as_mut().unwrap().shutdown(conn);
    assert!(h.run(Duration::from_secs(2), |h| h
        .client
        .as_ref()
        .unwrap()
        .is_going_away()));
    let conn = h.pair.client();
    let refused = h.client.as_mut().unwrap().send_request(
        conn,
        &Request {
            authority: Some("localhost".into()),
            ..Request::get("/a")
        },
    );
    assert!(
        matches!(refused, Err(SendError::NotReady(_))),
        "{refused:?}"
    );
    assert!(h.finish_downloads(Duration::from_secs(30)));
    let d = &h.downloads[&first];
    assert!(d.done && d.body == h.files["/a"]);
}

#[test]
fn shutdown_rejects_streams_opened_after_goaway() {
    let mut h = Harness::sessions();
    h.files.insert("/a".into(), b"x".to_vec());
    let conn = h.pair.server();
    h.server.as_mut().unwrap().shutdown(conn);
    // The client sends before it hears of the GOAWAY (ID 0: everything
    // is refused): the server resets the stream as rejected.
    let id = h.get("/a");
    assert!(h.finish_downloads(Duration::from_secs(5)));
    let d = &h.downloads[&id];
    assert!(d.failed.is_some(), "{d:?}");
    assert!(h.server_events.is_empty());
}

#[test]
fn server_keeps_serving_while_it_cannot_open_its_control_stream() {
    // The client lets the server open no unidirectional stream at all: the
    // server's control stream waits (retried on every poll), requests are
    // still served.
    let mut client_transport = TransportConfig::default();
    client_transport.streams.max_concurrent_uni_streams = 0;
    let pair = Pair::new(TransportConfig::default(), client_transport);
    let mut h = Harness::over(pair, true, true);
    h.files.insert("/".into(), content(10_000, 5));
    let id = h.get("/");
    assert!(h.finish_downloads(Duration::from_secs(5)));
    assert!(h.downloads[&id].done && h.downloads[&id].body == h.files["/"]);
    assert!(h.server.as_ref().unwrap().peer_settings().is_some());
    assert!(h.client.as_ref().unwrap().peer_settings().is_none());
    assert!(h.pair.client().close_reason().is_none());
}

#[test]
fn partial_writes_never_tear_frames() {
    // A send buffer smaller than a response head and than the DATA frames:
    // every write falls short, often inside a frame header.
    let mut server_transport = TransportConfig::default();
    server_transport.streams.send_buffer = 7_777;
    let pair = Pair::new(server_transport, TransportConfig::default());
    let mut h = Harness::over(pair, true, true);
    h.extra_fields = vec![Field::new("x-padding", "p".repeat(9_000))];
    let mut ids = Vec::new();
    for (i, size) in [1usize, 7_776, 7_777, 300_000, 1_100_000]
        .into_iter()
        .enumerate()
    {
        let path = format!("/p{i}");
        h.files.insert(path.clone(), content(size, 10 + i as u64));
        ids.push((h.get(&path), path));
    }
    assert!(h.finish_downloads(Duration::from_secs(60)));
    for (id, path) in &ids {
        let d = &h.downloads[id];
        let head = d.head.as_ref().expect("a head");
        assert_eq!(head.header("x-padding").map(str::len), Some(9_000));
        assert!(d.done && d.body == h.files[path], "{path}: {d:?}");
    }
}

#[test]
fn tiny_send_buffer_tears_every_write() {
    // Three bytes of send buffer: frame headers themselves are written in
    // pieces, and each DATA frame's payload over many calls.
    let mut server_transport = TransportConfig::default();
    server_transport.streams.send_buffer = 3;
    let pair = Pair::new(server_transport, TransportConfig::default());
    let mut h = Harness::over(pair, true, true);
    let mut ids = Vec::new();
    for (i, size) in [1usize, 63, 64, 2_000].into_iter().enumerate() {
        let path = format!("/t{i}");
        h.files.insert(path.clone(), content(size, 20 + i as u64));
        ids.push((h.get(&path), path));
    }
    assert!(h.finish_downloads(Duration::from_secs(120)));
    for (id, path) in &ids {
        let d = &h.downloads[id];
        assert_eq!(d.head.as_ref().map(|h| h.status), Some(200), "{path}");
        assert!(d.done && d.body == h.files[path], "{path}: {d:?}");
    }
}
