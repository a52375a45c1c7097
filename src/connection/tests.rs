//! Connection tests over an in-memory duplex pipe, with a scripted fake broker on the far end.
//!
//! The tests that wait for a timeout run on paused time (`start_paused`): the pipe is
//! in-process, so the clock jumps only once every task waits, and the timeout fires at once,
//! deterministically, instead of after real time (2.3 s of it before).

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
    let r1 = tokio::spawn(async move { c1.call_raw(79, 2, 2, Bytes::new()).await });
    let r2 = tokio::spawn(async move { c2.call_raw(79, 2, 2, Bytes::new()).await });
    read_request(&mut broker).await.unwrap();
    read_request(&mut broker).await.unwrap();
    broker.write_all(&(-5i32).to_be_bytes()).await.unwrap();
    let e1 = r1.await.unwrap().unwrap_err();
    let e2 = r2.await.unwrap().unwrap_err();
    for e in [&e1, &e2] {
        // Both were written whole before the garbage came: the broker may have applied them.
        let Error::OutcomeUnknown { cause, .. } = e else { panic!("{e}") };
        assert!(matches!(&**cause, Error::ConnectionClosed { cause: Some(_), .. }), "{e}");
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
    let r = tokio::spawn(async move { c.call_raw(79, 2, 2, Bytes::new()).await });
    read_request(&mut broker).await.unwrap();
    drop(broker);
    let e = r.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::OutcomeUnknown { .. }), "{e}");
}

#[tokio::test]
async fn a_read_whose_answer_is_lost_is_a_plain_connection_error() {
    let (conn, mut broker) = pair();
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_raw(77, 1, 2, Bytes::from_static(b"describe")).await });
    // The broker read the whole ShareGroupDescribe, then died: nothing it could have applied.
    read_request(&mut broker).await.unwrap();
    drop(broker);
    let e = r.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::ConnectionClosed { .. }), "{e}");
    assert!(!e.is_outcome_unknown() && e.is_retriable() && e.is_connection_error());
    assert!(!e.to_string().contains("may have applied"), "{e}");
}

#[tokio::test]
async fn written_request_whose_answer_is_lost_has_an_unknown_outcome() {
    let (conn, mut broker) = pair();
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_raw(79, 2, 2, Bytes::from_static(b"acks")).await });
    // The broker read the whole request (and may have applied it), then died.
    let (key, _, body) = read_request(&mut broker).await.unwrap();
    assert_eq!((key, &body[..]), (79, &b"acks"[..]));
    drop(broker);
    let e = r.await.unwrap().unwrap_err();
    let Error::OutcomeUnknown { api, addr, cause } = &e else { panic!("{e}") };
    assert_eq!((*api, addr.as_str()), ("ShareAcknowledge", "fake:1"));
    assert!(matches!(&**cause, Error::ConnectionClosed { .. }), "{e}");
    assert!(e.is_outcome_unknown() && e.is_retriable() && e.is_connection_error());
    assert!(e.to_string().contains("may have applied it"), "{e}");
}

#[tokio::test]
async fn request_not_written_whole_is_a_plain_connection_error() {
    // A pipe of 64 bytes: the second request cannot be written before the broker reads.
    let (a, mut broker) = tokio::io::duplex(64);
    let conn = Connection::spawn(a, "fake:1", ConnectionConfig::default());
    let c1 = conn.clone();
    let first = tokio::spawn(async move { c1.call_raw(79, 2, 2, Bytes::from_static(b"small")).await });
    let (_, _, body) = read_request(&mut broker).await.unwrap();
    assert_eq!(&body[..], b"small");
    let c2 = conn.clone();
    let big = tokio::spawn(async move { c2.call_raw(79, 2, 2, Bytes::from(vec![7u8; 4096])).await });
    // The broker takes the first 100 bytes of the big one, then dies in the middle of it.
    let mut part = [0u8; 100];
    broker.read_exact(&mut part).await.unwrap();
    drop(broker);
    let e1 = first.await.unwrap().unwrap_err();
    let e2 = big.await.unwrap().unwrap_err();
    assert!(matches!(e1, Error::OutcomeUnknown { .. }), "written whole: {e1}");
    assert!(matches!(e2, Error::ConnectionClosed { .. } | Error::Io { .. }), "half written, never applied: {e2}");
    assert!(!e2.is_outcome_unknown() && e2.is_retriable());
}

#[tokio::test(start_paused = true)]
async fn timeout_of_a_request_never_written_whole_is_a_plain_timeout() {
    use kafka_protocol::messages::{DeleteGroupsRequest, GroupId};
    let (a, mut broker) = tokio::io::duplex(64);
    let conn = Connection::spawn(a, "fake:1", ConnectionConfig::default());
    // A request that changes something (a read would be a plain timeout anyway).
    let groups = (0..50).map(|i| GroupId(format!("group-with-a-long-name-{i}").into())).collect();
    let req = DeleteGroupsRequest::default().with_groups_names(groups);
    // Nobody reads: the request sticks in the pipe, so the broker cannot have seen it whole.
    let e = conn.call_timeout(&req, 2, Duration::from_millis(100)).await.unwrap_err();
    assert!(matches!(e, Error::Timeout { .. }), "{e}");
    assert!(conn.is_closed());
    // The timed-out connection really closes: the broker side reads to its end.
    let mut rest = Vec::new();
    tokio::time::timeout(Duration::from_secs(5), broker.read_to_end(&mut rest)).await.unwrap().unwrap();
}

#[tokio::test]
async fn closed_connection_closes_its_socket_while_handles_remain() {
    let (conn, mut broker) = pair();
    conn.close(None);
    let mut buf = [0u8; 1];
    let n = tokio::time::timeout(Duration::from_secs(5), broker.read(&mut buf)).await.unwrap().unwrap();
    assert_eq!(n, 0);
    let e = conn.call_raw(3, 12, 2, Bytes::new()).await.unwrap_err();
    assert!(matches!(e, Error::ConnectionClosed { .. }), "{e}");
}

#[tokio::test(start_paused = true)]
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

#[tokio::test(start_paused = true)]
async fn timeout_of_a_written_request_is_an_unknown_outcome_and_closes_connection() {
    use kafka_protocol::messages::{DeleteGroupsRequest, GroupId};
    let (conn, mut broker) = pair();
    let req = DeleteGroupsRequest::default().with_groups_names(vec![GroupId("g".into())]);
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_timeout(&req, 2, Duration::from_secs(2)).await });
    // The broker got it whole and never answers.
    read_request(&mut broker).await.unwrap();
    let e = r.await.unwrap().unwrap_err();
    let Error::OutcomeUnknown { api, cause, .. } = &e else { panic!("{e}") };
    assert_eq!(*api, "DeleteGroups");
    assert!(matches!(&**cause, Error::Timeout { .. }), "{e}");
    assert!(conn.is_closed());
}

#[tokio::test(start_paused = true)]
async fn timeout_of_a_written_read_is_a_plain_timeout_and_closes_connection() {
    let (conn, mut broker) = pair();
    let req = kafka_protocol::messages::ListGroupsRequest::default();
    let c = conn.clone();
    let r = tokio::spawn(async move { c.call_timeout(&req, 5, Duration::from_millis(200)).await });
    // The broker got it whole and never answers: a read, so nothing can have been applied.
    read_request(&mut broker).await.unwrap();
    let e = r.await.unwrap().unwrap_err();
    let Error::Timeout { what, .. } = &e else { panic!("{e}") };
    assert_eq!(what, "ListGroups to fake:1");
    assert_eq!(e.to_string(), "ListGroups to fake:1 timed out after 200ms");
    assert!(conn.is_closed());
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

#[tokio::test]
async fn exclusive_exchange_pauses_other_requests_until_it_ends() {
    use kafka_protocol::messages::{SaslHandshakeRequest, SaslHandshakeResponse};
    let (conn, mut broker) = pair();
    let guard = conn.exclusive().unwrap();
    // An ordinary request queued while the exchange runs must wait for it.
    let c = conn.clone();
    let ordinary = tokio::spawn(async move { c.call_raw(3, 12, 2, Bytes::from_static(b"meta")).await });
    let hs = SaslHandshakeRequest::default().with_mechanism("PLAIN".into());
    let exchange = guard.call_timeout(&hs, 1, Duration::from_secs(30));
    let broker_side = async {
        let (key, id, _) = read_request(&mut broker).await.unwrap();
        assert_eq!(key, 17, "the exchange's request goes first");
        let mut body = BytesMut::new();
        kafka_protocol::protocol::Encodable::encode(&SaslHandshakeResponse::default(), &mut body, 1).unwrap();
        write_response(&mut broker, id, &body).await;
    };
    let (resp, ()) = tokio::join!(exchange, broker_side);
    assert_eq!(resp.unwrap().error_code, 0);
    // Still paused: nothing else reaches the broker while the guard lives.
    assert!(tokio::time::timeout(Duration::from_millis(100), read_request(&mut broker)).await.is_err());
    drop(guard);
    let (key, id, body) = read_request(&mut broker).await.unwrap();
    assert_eq!(key, 3);
    write_response(&mut broker, id, &body).await;
    assert_eq!(&ordinary.await.unwrap().unwrap()[4..], b"meta");
}

#[tokio::test]
async fn a_weak_handle_does_not_keep_the_connection_open() {
    let (conn, mut broker) = pair();
    let weak = conn.downgrade();
    assert!(weak.upgrade().is_some());
    drop(conn);
    // The writer stops and the socket closes once the last strong handle is gone.
    assert!(read_request(&mut broker).await.is_none());
    assert!(weak.upgrade().is_none_or(|c| c.is_closed()));
}
