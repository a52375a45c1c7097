//! Connection tests over an in-memory duplex pipe, with a scripted fake broker on the far end.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::*;

/// Reads one request frame; returns (api_key, correlation_id, body after header v2).
async fn read_request(s: &mut DuplexStream) -> Option<(i16, i32, Bytes)> {
    let len = s.read_i32().await.ok()? as usize;
    let mut buf = vec![0u8; len];
    s.read_exact(&mut buf).await.ok()?;
    let mut b = Bytes::from(buf);
    let key = b.get_i16();
    let _ver = b.get_i16();
    let id = b.get_i32();
    let cl = b.get_i16() as usize;
    b.advance(cl);
    b.advance(1); // tagged fields
    Some((key, id, b))
}

async fn write_response(s: &mut DuplexStream, id: i32, body: &[u8]) {
    let mut f = BytesMut::new();
    f.put_i32(4 + body.len() as i32);
    f.put_i32(id);
    f.put_slice(body);
    s.write_all(&f).await.unwrap();
}

fn pair() -> (Connection, DuplexStream) {
    let (a, b) = tokio::io::duplex(1 << 16);
    (Connection::spawn(a, "fake:1", ConnectionConfig::default()), b)
}

#[tokio::test]
async fn pipelined_requests_answered_out_of_order() {
    let (conn, mut broker) = pair();
    let c1 = conn.clone();
    let c2 = conn.clone();
    let r1 = tokio::spawn(async move { c1.call_raw(78, 2, 2, Bytes::from_static(b"one")).await });
    let r2 = tokio::spawn(async move { c2.call_raw(79, 2, 2, Bytes::from_static(b"two")).await });
    let (_, id_a, body_a) = read_request(&mut broker).await.unwrap();
    let (_, id_b, body_b) = read_request(&mut broker).await.unwrap();
    // Answer the second first.
    write_response(&mut broker, id_b, &body_b).await;
    write_response(&mut broker, id_a, &body_a).await;
    let f1 = r1.await.unwrap().unwrap();
    let f2 = r2.await.unwrap().unwrap();
    assert_eq!(&f1[4..], b"one");
    assert_eq!(&f2[4..], b"two");
}

#[tokio::test]
async fn garbage_length_poisons_every_waiter() {
    let (conn, mut broker) = pair();
    let c1 = conn.clone();
    let c2 = conn.clone();
    let r1 = tokio::spawn(async move { c1.call_raw(3, 12, 2, Bytes::new()).await });
    let r2 = tokio::spawn(async move { c2.call_raw(3, 12, 2, Bytes::new()).await });
    read_request(&mut broker).await.unwrap();
    read_request(&mut broker).await.unwrap();
    broker.write_all(&(-5i32).to_be_bytes()).await.unwrap();
    let e1 = r1.await.unwrap().unwrap_err();
    let e2 = r2.await.unwrap().unwrap_err();
    for e in [&e1, &e2] {
        assert!(matches!(e, Error::ConnectionClosed { cause: Some(_), .. }), "{e}");
        assert!(e.to_string().contains("response frame length"), "{e}");
    }
    // Later requests fail at once with the same cause.
    let e3 = conn.call_raw(3, 12, 2, Bytes::new()).await.unwrap_err();
    assert!(e3.to_string().contains("response frame length"), "{e3}");
    assert!(conn.is_closed());
}

#[tokio::test]
async fn unknown_correlation_id_poisons() {
    let (conn, mut broker) = pair();
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_raw(3, 12, 2, Bytes::new()).await });
    let (_, id, _) = read_request(&mut broker).await.unwrap();
    write_response(&mut broker, id + 100, b"").await;
    let e = r.await.unwrap().unwrap_err();
    assert!(e.to_string().contains("unknown correlation id"), "{e}");
}

#[tokio::test]
async fn peer_close_fails_waiters() {
    let (conn, mut broker) = pair();
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_raw(3, 12, 2, Bytes::new()).await });
    read_request(&mut broker).await.unwrap();
    drop(broker);
    let e = r.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::ConnectionClosed { .. }), "{e}");
}

#[tokio::test]
async fn cancelled_request_leaves_no_waiter_and_no_partial_frame() {
    let (conn, mut broker) = pair();
    // Start a request and cancel it after it was written.
    let fut = conn.call_raw(3, 12, 2, Bytes::from_static(b"first"));
    let _ = tokio::time::timeout(Duration::from_millis(20), fut).await;
    let (_, id1, body1) = read_request(&mut broker).await.unwrap();
    assert_eq!(&body1[..], b"first");
    // Its late response is dropped quietly and the connection stays usable.
    write_response(&mut broker, id1, b"late").await;
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_raw(3, 12, 2, Bytes::from_static(b"second")).await });
    let (_, id2, body2) = read_request(&mut broker).await.unwrap();
    assert_eq!(&body2[..], b"second");
    write_response(&mut broker, id2, b"ok").await;
    let f = r.await.unwrap().unwrap();
    assert_eq!(&f[4..], b"ok");
    assert!(conn.shared.lock().pending.is_empty());
}

#[tokio::test]
async fn timeout_closes_connection() {
    let (conn, mut broker) = pair();
    let req = kafka_protocol::messages::ApiVersionsRequest::default();
    let e = conn.call_timeout(&req, 3, Duration::from_millis(50)).await.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(conn.is_closed());
    let _ = read_request(&mut broker).await;
}

#[tokio::test]
async fn malformed_body_is_an_error_not_a_panic() {
    let (conn, mut broker) = pair();
    let c = conn.clone();
    let r = tokio::spawn(async move {
        let req = kafka_protocol::messages::MetadataRequest::default();
        c.call(&req, 12).await
    });
    let (_, id, _) = read_request(&mut broker).await.unwrap();
    // Response header v1 (empty tags) then a truncated Metadata body.
    write_response(&mut broker, id, &[0, 0, 0, 0]).await;
    let e = r.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    assert!(e.is_retriable());
}

#[tokio::test]
async fn dropping_all_handles_closes_socket() {
    let (conn, mut broker) = pair();
    drop(conn);
    let mut buf = [0u8; 1];
    // A generous limit that only turns a hang into a failure.
    let n = tokio::time::timeout(Duration::from_secs(30), broker.read(&mut buf)).await.unwrap().unwrap();
    assert_eq!(n, 0);
}
