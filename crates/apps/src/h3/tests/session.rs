//! A client session fetching from a server session.

use transport::test_pair::content;
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
