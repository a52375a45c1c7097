//! One connection to one broker: framing, correlation ids, pipelining.
//!
//! A [`Connection`] is a cheap, cloneable handle. Requests go over a channel to a writer task
//! that owns the write half; a reader task owns the read half and hands each response frame to
//! the waiter registered under its correlation id. Any number of requests may be in flight.
//!
//! ```text
//!  caller ──Command──▶ writer task ──frame──▶ socket
//!     ▲                    │ registers waiter (corr id) in `Shared`
//!     └──── oneshot ◀── reader task ◀──frame── socket
//! ```
//!
//! Invariants:
//! - A request is written whole or not at all: only the writer task writes, so a caller that
//!   gives up (drops its future) can never leave half a frame on the socket.
//! - A waiter whose caller gave up is removed when its response arrives (or skipped before it
//!   is written), so no waiter leaks.
//! - The first framing, decode-of-header or IO error *poisons* the connection: every waiter,
//!   and every later request, gets that same error. The cluster layer then dials anew.
//!
//! The stream type is generic (`AsyncRead + AsyncWrite`), so TLS and SASL wrap the TCP stream
//! before it gets here, with no change to this module.

mod task;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot};

use crate::error::{Context, Error, Result};
use crate::protocol::api::ApiRequest;
use crate::protocol::frame;

pub use task::DEFAULT_MAX_FRAME;

/// A request ready to be framed: the writer task adds the header with its correlation id.
struct Command {
    api_key: i16,
    api_version: i16,
    header_version: i16,
    body: Bytes,
    reply: oneshot::Sender<Result<Bytes>>,
}

/// State shared by the handle, the writer and the reader.
struct Shared {
    addr: String,
    state: Mutex<task::State>,
}

/// A handle to one broker connection. Clone it freely; the connection closes when the last
/// handle is dropped.
#[derive(Clone)]
pub struct Connection {
    tx: mpsc::Sender<Command>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection").field("addr", &self.shared.addr).finish()
    }
}

/// Settings of one connection.
#[derive(Debug, Clone)]
pub struct ConnectionConfig {
    /// `client.id` sent in every request header.
    pub client_id: String,
    /// Largest response frame accepted; a bigger length poisons the connection.
    pub max_frame: usize,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig { client_id: "kafka-share".into(), max_frame: DEFAULT_MAX_FRAME }
    }
}

impl Connection {
    /// Starts the reader and writer tasks on `stream` (must be called inside a tokio runtime).
    pub fn spawn<S>(stream: S, addr: impl Into<String>, config: ConnectionConfig) -> Connection
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let shared = Arc::new(Shared { addr: addr.into(), state: Mutex::new(task::State::default()) });
        let (tx, rx) = mpsc::channel(1024);
        task::start(stream, rx, shared.clone(), config);
        Connection { tx, shared }
    }

    /// Dials `addr` over TCP (with TCP_NODELAY) and spawns the connection.
    pub async fn connect_tcp(addr: &str, config: ConnectionConfig, timeout: Duration) -> Result<Connection> {
        let stream = match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::io(addr, e)),
            Err(_) => return Err(Error::Timeout { what: format!("connecting to {addr}"), after: timeout }),
        };
        stream.set_nodelay(true).map_err(|e| Error::io(addr, e))?;
        Ok(Connection::spawn(stream, addr, config))
    }

    /// The host:port this connection talks to.
    pub fn addr(&self) -> &str {
        &self.shared.addr
    }

    /// Whether the connection was poisoned or closed (requests would fail at once).
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed() || self.shared.lock().poisoned.is_some()
    }

    /// Closes the connection: in-flight requests fail with `cause` (or ConnectionClosed).
    pub fn close(&self, cause: Option<Error>) {
        task::poison(&self.shared, cause);
    }

    /// Sends `request` at `version` and waits for its decoded response.
    pub async fn call<R: ApiRequest>(&self, request: &R, version: i16) -> Result<R::Response> {
        self.enqueue(request, version).await?.await
    }

    /// Queues `request` for the writer and returns a future of its response. Requests one
    /// caller enqueues one after another reach the socket in that order (the queue is FIFO and
    /// has one writer), which [`call`](Self::call) from concurrent tasks cannot promise: a
    /// producer needs it to keep a partition's batches in order.
    pub async fn enqueue<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
    ) -> Result<impl std::future::Future<Output = Result<R::Response>> + Send + 'static> {
        let mut body = BytesMut::with_capacity(256);
        request
            .encode_body(version, &mut body)
            .map_err(|source| Error::Codec { context: Context::api(R::NAME), source })?;
        let rx = self.enqueue_raw(R::KEY, version, R::request_header_version(version), body.freeze()).await?;
        let conn = self.clone();
        Ok(async move {
            let frame = match rx.await {
                Ok(r) => r?,
                Err(_) => return Err(conn.closed_error()),
            };
            let body = frame::strip_response_header(frame, R::response_header_version(version))
                .and_then(|b| R::decode_response(b, version))
                .map_err(|source| Error::Malformed { context: Context::api(R::NAME), source });
            if let Err(e) = &body {
                // A response we cannot read means the stream may be out of step: poison it.
                conn.close(Some(e.clone()));
            }
            body
        })
    }

    /// Like [`call`](Self::call), but gives up after `timeout`. A timed-out connection is
    /// closed, as the Java client does: the broker is not answering, and a late response must
    /// not be matched to anything.
    pub async fn call_timeout<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        match tokio::time::timeout(timeout, self.call(request, version)).await {
            Ok(r) => r,
            Err(_) => {
                let e = Error::Timeout { what: format!("{} to {}", R::NAME, self.addr()), after: timeout };
                self.close(Some(e.clone()));
                Err(e)
            }
        }
    }

    /// Sends an already encoded body; returns the response frame after the length prefix
    /// (starting with the correlation id).
    pub async fn call_raw(&self, api_key: i16, api_version: i16, header_version: i16, body: Bytes) -> Result<Bytes> {
        let rx = self.enqueue_raw(api_key, api_version, header_version, body).await?;
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(self.closed_error()),
        }
    }

    /// Puts one request on the writer's queue; the receiver gets the response frame.
    async fn enqueue_raw(
        &self,
        api_key: i16,
        api_version: i16,
        header_version: i16,
        body: Bytes,
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        if let Some(e) = self.shared.lock().poisoned.clone() {
            return Err(e);
        }
        let (reply, rx) = oneshot::channel();
        let cmd = Command { api_key, api_version, header_version, body, reply };
        if self.tx.send(cmd).await.is_err() {
            return Err(self.closed_error());
        }
        Ok(rx)
    }

    fn closed_error(&self) -> Error {
        self.shared
            .lock()
            .poisoned
            .clone()
            .unwrap_or(Error::ConnectionClosed { addr: self.shared.addr.clone(), cause: None })
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, task::State> {
        // A poisoned std mutex only means another task panicked while holding it; the map is
        // still consistent (every operation on it is a single insert/remove).
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests;
