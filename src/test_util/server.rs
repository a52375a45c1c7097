//! Listening, framing and the two tasks behind each connection.
//!
//! A reader task reads and decodes each request the moment it arrives, logs it and marks its
//! share session in flight (so a second request of the same session sent before the first
//! was answered is caught even though answers go out in order). A processor task answers the
//! requests one at a time, as a Kafka broker does per connection.

use std::sync::Arc;

use crate::protocol::share::{ShareAcknowledgeRequest, ShareFetchRequest};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    FindCoordinatorRequest, ListGroupsRequest, MetadataRequest, RequestHeader, ShareGroupHeartbeatRequest,
};
use kafka_protocol::protocol::Decodable;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

use super::handlers;
use super::log::Req;
use super::state::Shared;
use super::wire::{Decoded, Incoming, Out};

pub(super) async fn serve(listener: TcpListener, node: i32, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let _ = stream.set_nodelay(true);
        let conn = {
            let mut st = shared.lock();
            st.next_conn += 1;
            st.next_conn
        };
        shared.track(tokio::spawn(connection(stream, node, conn, shared.clone())).abort_handle());
    }
}

async fn connection(stream: TcpStream, node: i32, conn: u64, shared: Arc<Shared>) {
    let (rd, wr) = stream.into_split();
    let (tx, rx) = mpsc::unbounded_channel();
    let reader = tokio::spawn(read_loop(rd, node, conn, shared.clone(), tx));
    shared.track(reader.abort_handle());
    process_loop(wr, rx, node, conn, &shared).await;
    // Forget the connection's sessions before the client can see it closed, so a reopen on a
    // new connection is never mistaken for the old session.
    shared.lock().conn_closed(node, conn);
    reader.abort();
}

async fn read_loop(
    mut rd: OwnedReadHalf,
    node: i32,
    conn: u64,
    shared: Arc<Shared>,
    tx: mpsc::UnboundedSender<Incoming>,
) {
    loop {
        let mut len = [0u8; 4];
        if rd.read_exact(&mut len).await.is_err() {
            break;
        }
        let len = i32::from_be_bytes(len);
        if !(8..=64 * 1024 * 1024).contains(&len) {
            shared.lock().violation(format!("node {node}: request frame of {len} bytes"));
            break;
        }
        let mut frame = vec![0u8; len as usize];
        if rd.read_exact(&mut frame).await.is_err() {
            break;
        }
        match decode(Bytes::from(frame)) {
            Ok((inc, logged)) => {
                {
                    let mut st = shared.lock();
                    let seq = st.record(node, conn, inc.version, logged);
                    if let Some(m) = &inc.share_member {
                        let summary = st.log[seq].summary();
                        st.start_request(node, m, conn, summary);
                    }
                }
                if tx.send(inc).is_err() {
                    break;
                }
            }
            Err(e) => {
                shared.lock().violation(format!("node {node}: undecodable request: {e}"));
                break;
            }
        }
    }
    shared.lock().conn_closed(node, conn);
}

fn decode(mut frame: Bytes) -> Result<(Incoming, Req), String> {
    let header = kafka_protocol::protocol::decode_request_header_from_buffer(&mut frame)
        .map_err(|e| format!("request header: {e}"))?;
    let RequestHeader { request_api_key: api, request_api_version: version, correlation_id, .. } = header;
    let err = |e: String| format!("api {api} v{version}: {e}");
    let (body, logged) = match api {
        18 => (Decoded::ApiVersions, Req::ApiVersions),
        3 => {
            let r = MetadataRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            let names = r
                .topics
                .as_ref()
                .map(|ts| ts.iter().map(|t| t.name.as_ref().map(|n| n.0.to_string()).unwrap_or_default()).collect());
            (Decoded::Metadata(r), Req::Metadata(names))
        }
        10 => {
            let r = FindCoordinatorRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            (Decoded::FindCoordinator(r), Req::FindCoordinator)
        }
        16 => {
            ListGroupsRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            (Decoded::ListGroups, Req::ListGroups)
        }
        76 => {
            let r = ShareGroupHeartbeatRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            let logged = Req::Heartbeat { member: r.member_id.to_string(), epoch: r.member_epoch };
            (Decoded::Heartbeat(r), logged)
        }
        78 => {
            let r = ShareFetchRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            (Decoded::Fetch(r.clone()), Req::Fetch(r))
        }
        79 => {
            let r = ShareAcknowledgeRequest::decode(&mut frame, version).map_err(|e| err(e.to_string()))?;
            (Decoded::Ack(r.clone()), Req::Ack(r))
        }
        _ => return Err(err("API not served by the fake broker".into())),
    };
    if api != 18 && frame.has_remaining() {
        return Err(err(format!("{} bytes left after the body", frame.remaining())));
    }
    let probe =
        super::log::Logged { seq: 0, at: std::time::Instant::now(), node: 0, conn: 0, version, req: logged.clone() };
    let inc = Incoming {
        api,
        version,
        correlation_id,
        share_member: probe.is_share().then(|| probe.member().unwrap_or_default().to_string()),
        ack_partitions: probe.ack_partitions(),
        body,
    };
    Ok((inc, logged))
}

async fn process_loop(
    mut wr: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Incoming>,
    node: i32,
    conn: u64,
    shared: &Arc<Shared>,
) {
    while let Some(inc) = rx.recv().await {
        let out = handlers::handle(shared, node, conn, &inc).await;
        // Out of flight before the client can read the answer and send its next request.
        if let Some(m) = &inc.share_member {
            shared.lock().finish_request(node, m, conn);
        }
        let header_version = if inc.api == 18 { 0 } else { 1 };
        let mut frame = BytesMut::new();
        let close = match out {
            Out::Reply(body) => {
                put_frame(&mut frame, inc.correlation_id, header_version, &body);
                false
            }
            Out::Raw(body) => {
                put_frame(&mut frame, inc.correlation_id, header_version, body);
                false
            }
            Out::Truncated => {
                frame.put_i32(100);
                frame.put_i32(inc.correlation_id);
                frame.put_slice(&[0, 0, 0]);
                true
            }
            Out::Drop => {
                shared.lock().conn_closed(node, conn);
                return;
            }
        };
        if close {
            shared.lock().conn_closed(node, conn);
        }
        if wr.write_all(&frame).await.is_err() || close {
            return;
        }
    }
}

fn put_frame(frame: &mut BytesMut, correlation_id: i32, header_version: i16, body: &[u8]) {
    let header_len = if header_version >= 1 { 5 } else { 4 };
    frame.put_i32((header_len + body.len()) as i32);
    frame.put_i32(correlation_id);
    if header_version >= 1 {
        frame.put_u8(0);
    }
    frame.put_slice(body);
}
