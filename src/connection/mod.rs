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
//!   and every later request, gets that same error, and the socket closes. The cluster layer
//!   then dials anew.
//! - A waiter learns whether its request could have reached the broker: if the socket took
//!   the whole frame before the connection failed, the error is [`Error::OutcomeUnknown`]
//!   (the broker may have applied it); otherwise it is the plain connection error (it cannot
//!   have: a broker ignores a partial frame). A request that only reads (Metadata,
//!   ListGroups, ShareGroupDescribe, ...) gets the plain error either way: it has nothing the
//!   broker could have applied. Bytes are counted as the socket takes them, under the lock
//!   that poisons, and nothing is written after the poison.
//!
//! The stream type is generic (`AsyncRead + AsyncWrite`), so TLS and SASL wrap the TCP stream
//! before it gets here, with no change to this module.

mod task;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{mpsc, oneshot, Notify};

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
    /// Signalled when the connection is poisoned: the writer stops and the socket closes.
    closed: Notify,
}

/// A handle to one broker connection. Clone it freely; the connection closes when the last
/// handle is dropped.
#[derive(Clone)]
pub struct Connection {
    tx: mpsc::Sender<Command>,
    /// Exclusive exchanges (SASL re-authentication): see [`Connection::exclusive`].
    ptx: mpsc::UnboundedSender<task::Priority>,
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
    /// TLS for this connection (`security.protocol` SSL or SASL_SSL), or plain TCP.
    #[cfg(feature = "tls")]
    pub tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

impl Default for ConnectionConfig {
    fn default() -> Self {
        ConnectionConfig {
            client_id: "kafka-share".into(),
            max_frame: DEFAULT_MAX_FRAME,
            #[cfg(feature = "tls")]
            tls: None,
        }
    }
}

impl Connection {
    /// Starts the reader and writer tasks on `stream` (must be called inside a tokio runtime).
    pub fn spawn<S>(stream: S, addr: impl Into<String>, config: ConnectionConfig) -> Connection
    where
        S: AsyncRead + AsyncWrite + Send + 'static,
    {
        let shared =
            Arc::new(Shared { addr: addr.into(), state: Mutex::new(task::State::default()), closed: Notify::new() });
        let (tx, rx) = mpsc::channel(1024);
        let (ptx, prx) = mpsc::unbounded_channel();
        task::start(stream, rx, prx, shared.clone(), config);
        Connection { tx, ptx, shared }
    }

    /// Dials `addr` over TCP (with TCP_NODELAY) and spawns the connection.
    pub async fn connect_tcp(addr: &str, config: ConnectionConfig, timeout: Duration) -> Result<Connection> {
        let stream = match tokio::time::timeout(timeout, tcp(addr)).await {
            Ok(s) => s?,
            Err(_) => return Err(Error::Timeout { what: format!("connecting to {addr}"), after: timeout }),
        };
        Ok(Connection::spawn(stream, addr, config))
    }

    /// Dials `addr` over TCP, then TLS when `config.tls` says so, all within `timeout`. TLS
    /// verifies the broker's certificate against the host in `addr` (the advertised one).
    pub async fn connect(addr: &str, config: ConnectionConfig, timeout: Duration) -> Result<Connection> {
        #[cfg(feature = "tls")]
        if let Some(tls) = config.tls.clone() {
            let setup = async {
                let stream = tcp(addr).await?;
                crate::security::tls_client::handshake(tls, addr, stream).await
            };
            return match tokio::time::timeout(timeout, setup).await {
                Ok(stream) => Ok(Connection::spawn(stream?, addr, config)),
                Err(_) => Err(Error::Timeout {
                    what: format!(
                        "connecting to {addr} over TLS (a PLAINTEXT listener may wait for more of our TLS hello: \
                         check security.protocol and the port)"
                    ),
                    after: timeout,
                }),
            };
        }
        Connection::connect_tcp(addr, config, timeout).await
    }

    /// A handle that does not keep the connection open.
    pub fn downgrade(&self) -> WeakConnection {
        WeakConnection { tx: self.tx.downgrade(), ptx: self.ptx.downgrade(), shared: Arc::downgrade(&self.shared) }
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
        let rx = self.send_request(request, version).await?;
        let frame = self.answer(rx).await?;
        self.decode::<R>(frame, version)
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
        let rx = self.send_request(request, version).await?;
        let conn = self.clone();
        Ok(async move {
            let frame = conn.answer(rx).await?;
            conn.decode::<R>(frame, version)
        })
    }

    /// Encodes `request` and queues it for the writer; the receiver gets the response frame.
    async fn send_request<R: ApiRequest>(&self, request: &R, version: i16) -> Result<oneshot::Receiver<Result<Bytes>>> {
        self.send_request_via(request, version, false).await
    }

    async fn send_request_via<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
        priority: bool,
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        let mut body = BytesMut::with_capacity(256);
        request
            .encode_body(version, &mut body)
            .map_err(|source| Error::Codec { context: Context::api(R::NAME), source })?;
        self.enqueue_raw(R::KEY, version, R::request_header_version(version), body.freeze(), priority).await
    }

    /// Decodes a response frame of `R`; a frame we cannot read poisons the connection.
    fn decode<R: ApiRequest>(&self, frame: Bytes, version: i16) -> Result<R::Response> {
        let body = frame::strip_response_header(frame, R::response_header_version(version))
            .and_then(|b| R::decode_response(b, version))
            .map_err(|source| Error::Malformed { context: Context::api(R::NAME), source });
        if let Err(e) = &body {
            // A response we cannot read means the stream may be out of step: poison it.
            self.close(Some(e.clone()));
        }
        body
    }

    /// Like [`call`](Self::call), but gives up after `timeout`. A timed-out connection is
    /// closed, as the Java client does: the broker is not answering, and a late response must
    /// not be matched to anything.
    ///
    /// The error is [`Error::OutcomeUnknown`] (with the timeout as its cause) when the request
    /// was written whole before the time ran out, [`Error::Timeout`] when it never was, or
    /// when it only reads ([`is_read_only`](crate::protocol::api::is_read_only)).
    pub async fn call_timeout<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        self.call_timeout_via(request, version, timeout, false).await
    }

    /// Pauses every other request on this connection until the returned guard is dropped:
    /// requests already written are answered as usual, later ones wait, and only the
    /// guard's requests are written. A SASL re-authentication needs this (KIP-368): once the
    /// broker has read a SaslHandshake on an authenticated connection, any request but the
    /// exchange's own breaks it.
    pub fn exclusive(&self) -> Result<Exclusive<'_>> {
        if self.ptx.send(task::Priority::Pause).is_err() {
            return Err(self.closed_error());
        }
        Ok(Exclusive { conn: self })
    }

    async fn call_timeout_via<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
        priority: bool,
    ) -> Result<R::Response> {
        let deadline = tokio::time::Instant::now() + timeout;
        let timed_out = || Error::Timeout { what: format!("{} to {}", R::NAME, self.addr()), after: timeout };
        let mut rx = match tokio::time::timeout_at(deadline, self.send_request_via(request, version, priority)).await {
            Ok(rx) => rx?,
            Err(_) => return Err(timed_out()), // the writer's queue was full: nothing sent
        };
        let frame = match tokio::time::timeout_at(deadline, &mut rx).await {
            Ok(r) => r.unwrap_or_else(|_| Err(self.closed_error()))?,
            Err(_) => {
                // Closing hands every registered waiter, ours included, its outcome at once:
                // written whole (unknown outcome) or not. Still queued means never written.
                let e = timed_out();
                self.close(Some(e.clone()));
                return Err(match rx.try_recv() {
                    Ok(Err(Error::OutcomeUnknown { api, addr, .. })) => {
                        Error::OutcomeUnknown { api, addr, cause: Arc::new(e) }
                    }
                    Ok(Ok(frame)) => return self.decode::<R>(frame, version), // answered just in time
                    _ => e,
                });
            }
        };
        self.decode::<R>(frame, version)
    }

    /// Sends an already encoded body; returns the response frame after the length prefix
    /// (starting with the correlation id).
    pub async fn call_raw(&self, api_key: i16, api_version: i16, header_version: i16, body: Bytes) -> Result<Bytes> {
        let rx = self.enqueue_raw(api_key, api_version, header_version, body, false).await?;
        self.answer(rx).await
    }

    /// Queues one request for the writer task: on the ordinary queue, or (`priority`) as a
    /// request of an exclusive exchange (see [`Connection::exclusive`]).
    async fn enqueue_raw(
        &self,
        api_key: i16,
        api_version: i16,
        header_version: i16,
        body: Bytes,
        priority: bool,
    ) -> Result<oneshot::Receiver<Result<Bytes>>> {
        if let Some(e) = self.shared.lock().poisoned.clone() {
            return Err(e);
        }
        let (reply, rx) = oneshot::channel();
        let cmd = Command { api_key, api_version, header_version, body, reply };
        let queued = if priority {
            self.ptx.send(task::Priority::Request(cmd)).is_ok()
        } else {
            self.tx.send(cmd).await.is_ok()
        };
        if !queued {
            return Err(self.closed_error());
        }
        Ok(rx)
    }

    /// Waits for the answer to a queued request.
    async fn answer(&self, rx: oneshot::Receiver<Result<Bytes>>) -> Result<Bytes> {
        match rx.await {
            Ok(r) => r,
            Err(_) => Err(self.closed_error()),
        }
    }

    fn closed_error(&self) -> Error {
        self.shared
            .lock()
            .poisoned
            .clone()
            .unwrap_or(Error::ConnectionClosed { addr: self.shared.addr.clone(), cause: None })
    }
}

async fn tcp(addr: &str) -> Result<tokio::net::TcpStream> {
    let stream = tokio::net::TcpStream::connect(addr).await.map_err(|e| Error::io(addr, e))?;
    stream.set_nodelay(true).map_err(|e| Error::io(addr, e))?;
    Ok(stream)
}

/// A handle that does not keep the connection open (for background work such as
/// re-authentication, which must stop when everyone else is done with the connection).
#[derive(Clone)]
pub struct WeakConnection {
    tx: mpsc::WeakSender<Command>,
    ptx: mpsc::WeakUnboundedSender<task::Priority>,
    shared: std::sync::Weak<Shared>,
}

impl WeakConnection {
    /// The connection, if some [`Connection`] handle still holds it open.
    pub fn upgrade(&self) -> Option<Connection> {
        Some(Connection { tx: self.tx.upgrade()?, ptx: self.ptx.upgrade()?, shared: self.shared.upgrade()? })
    }
}

/// The other requests of a connection are paused while this lives (see
/// [`Connection::exclusive`]); dropping it resumes them.
pub struct Exclusive<'a> {
    conn: &'a Connection,
}

impl Exclusive<'_> {
    /// Sends `request` ahead of (and alone among) the paused requests, and waits at most
    /// `timeout` for its answer.
    pub async fn call_timeout<R: ApiRequest>(
        &self,
        request: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        self.conn.call_timeout_via(request, version, timeout, true).await
    }
}

impl Drop for Exclusive<'_> {
    fn drop(&mut self) {
        let _ = self.conn.ptx.send(task::Priority::Resume);
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
