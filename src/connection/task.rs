//! The reader and writer tasks behind a [`Connection`](super::Connection).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};
use tracing::{debug, trace};

use super::{Command, ConnectionConfig, Shared};
use crate::error::{Error, Result};
use crate::protocol::api::{api_name, is_read_only};
use crate::protocol::{frame, CodecError};

/// Largest response accepted by default: above `fetch.max.bytes` (50 MiB) with room to spare.
pub const DEFAULT_MAX_FRAME: usize = 256 * 1024 * 1024;

/// One in-flight request.
pub(super) struct Pending {
    api_key: i16,
    /// Byte position (in the connection's outgoing stream) just past this request's frame:
    /// once the socket took that many bytes, the broker may act on it.
    end: u64,
    reply: oneshot::Sender<Result<Bytes>>,
}

/// The waiter table, the poison flag and the count of bytes the socket took, under one lock:
/// no waiter can be registered after the table was drained on failure, and no byte reaches
/// the socket after that (so "was it written?" has one answer per waiter).
#[derive(Default)]
pub(super) struct State {
    pub(super) pending: HashMap<i32, Pending>,
    pub(super) poisoned: Option<Error>,
    /// Bytes of the outgoing stream the socket accepted.
    sent: u64,
}

pub(super) fn start<S>(
    stream: S,
    rx: mpsc::Receiver<Command>,
    prx: mpsc::UnboundedReceiver<Priority>,
    shared: Arc<Shared>,
    config: ConnectionConfig,
) where
    S: AsyncRead + AsyncWrite + Send + 'static,
{
    let (rd, wr) = tokio::io::split(stream);
    let reader = tokio::spawn(read_loop(BufReader::with_capacity(64 * 1024, rd), shared.clone(), config.max_frame));
    let wr = Counted { inner: wr, shared: shared.clone() };
    tokio::spawn(async move {
        write_loop(BufWriter::with_capacity(64 * 1024, wr), rx, prx, shared.clone(), config.client_id).await;
        // The handle is gone or the connection failed: stop reading too, and fail anything
        // still waiting (nothing can answer it any more).
        reader.abort();
        poison(&shared, None);
    });
}

/// Work that goes before the ordinary queue: an exclusive exchange (a SASL
/// re-authentication) pauses the ordinary queue, sends its own requests, and resumes it.
pub(super) enum Priority {
    /// Write nothing from the ordinary queue until `Resume`.
    Pause,
    /// A request of the exclusive exchange.
    Request(Command),
    /// Back to the ordinary queue.
    Resume,
}

/// Marks the connection failed, stops the writer (nothing more reaches the socket), and hands
/// `cause` to every waiter: as [`Error::OutcomeUnknown`] to those whose request the socket
/// took whole (the broker may have applied it), as is to the others (it cannot have) and to
/// read-only requests ([`is_read_only`]: there is nothing it could have applied).
pub(super) fn poison(shared: &Shared, cause: Option<Error>) {
    let err = match cause {
        // End of stream is a cause-less ConnectionClosed already: "closed: closed" says nothing.
        None | Some(Error::ConnectionClosed { cause: None, .. }) => {
            Error::ConnectionClosed { addr: shared.addr.clone(), cause: None }
        }
        Some(c) => Error::ConnectionClosed { addr: shared.addr.clone(), cause: Some(Arc::new(c)) },
    };
    let (drained, sent): (Vec<Pending>, u64) = {
        let mut st = shared.lock();
        if st.poisoned.is_none() {
            st.poisoned = Some(err.clone());
        }
        (st.pending.drain().map(|(_, p)| p).collect(), st.sent)
    };
    shared.closed.notify_one();
    if !drained.is_empty() {
        debug!(addr = %shared.addr, waiters = drained.len(), error = %err, "connection failed");
    }
    let cause = Arc::new(err.clone());
    for p in drained {
        let e = if p.end <= sent && !is_read_only(p.api_key) {
            Error::OutcomeUnknown { api: api_name(p.api_key), addr: shared.addr.clone(), cause: cause.clone() }
        } else {
            err.clone()
        };
        let _ = p.reply.send(Err(e));
    }
}

/// The write half, counting the bytes the socket takes (under the state lock, so a poison
/// sees an exact count) and refusing to write once the connection is poisoned.
struct Counted<W> {
    inner: W,
    shared: Arc<Shared>,
}

impl<W: AsyncWrite + Unpin> AsyncWrite for Counted<W> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let this = self.get_mut();
        let mut st = this.shared.lock();
        if st.poisoned.is_some() {
            return Poll::Ready(Err(std::io::Error::new(std::io::ErrorKind::BrokenPipe, "connection closed")));
        }
        let r = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = &r {
            st.sent += *n as u64;
        }
        r
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut wr: BufWriter<W>,
    mut rx: mpsc::Receiver<Command>,
    mut prx: mpsc::UnboundedReceiver<Priority>,
    shared: Arc<Shared>,
    client_id: String,
) {
    let mut out = Outgoing { next_id: 0, queued: 0, header: BytesMut::with_capacity(64) };
    let mut paused = false;
    loop {
        // A poisoned connection stops here, even while a write waits on a full socket: the
        // socket closes (the broker drops our share sessions) instead of lingering until
        // every handle is gone. While paused, only the exclusive exchange's requests are
        // written. (No bias is needed: whatever the ordinary queue hands over before the Pause
        // is taken is written before the exchange begins, which the broker accepts.)
        let (cmd, drain) = tokio::select! {
            p = prx.recv() => match p {
                Some(Priority::Pause) => { paused = true; continue }
                Some(Priority::Resume) => { paused = false; continue }
                Some(Priority::Request(c)) => (c, false),
                None => return,
            },
            cmd = rx.recv(), if !paused => match cmd {
                Some(c) => (c, true),
                None => return,
            },
            _ = shared.closed.notified() => return,
        };
        let batch = write_batch(&mut wr, drain.then_some(&mut rx), cmd, &shared, &client_id, &mut out);
        let result = tokio::select! {
            r = batch => r,
            _ = shared.closed.notified() => return,
        };
        if let Err(e) = result {
            poison(&shared, Some(e));
            return;
        }
    }
}

/// The writer's running numbers.
struct Outgoing {
    next_id: i32,
    /// Bytes handed to the buffered writer so far (the end of the last frame).
    queued: u64,
    header: BytesMut,
}

/// Writes `cmd` and (with `rx`) everything already queued behind it, then flushes once
/// (pipelining).
async fn write_batch<W: AsyncWrite + Unpin>(
    wr: &mut BufWriter<W>,
    mut rx: Option<&mut mpsc::Receiver<Command>>,
    mut cmd: Command,
    shared: &Shared,
    client_id: &str,
    out: &mut Outgoing,
) -> Result<()> {
    loop {
        write_one(wr, cmd, shared, client_id, out).await?;
        match rx.as_mut().map(|rx| rx.try_recv()) {
            Some(Ok(c)) => cmd = c,
            _ => break,
        }
    }
    wr.flush().await.map_err(|e| Error::io(shared.addr.clone(), e))
}

async fn write_one<W: AsyncWrite + Unpin>(
    wr: &mut BufWriter<W>,
    cmd: Command,
    shared: &Shared,
    client_id: &str,
    out: &mut Outgoing,
) -> Result<()> {
    if cmd.reply.is_closed() {
        return Ok(()); // the caller gave up before we wrote anything: send nothing
    }
    let id = out.next_id;
    out.next_id = out.next_id.wrapping_add(1) & i32::MAX;
    let header = &mut out.header;
    header.clear();
    header.put_i32(0); // length placeholder
    frame::encode_request_header(header, cmd.api_key, cmd.api_version, cmd.header_version, id, client_id);
    let len = header.len() - 4 + cmd.body.len();
    let len = i32::try_from(len).map_err(|_| Error::InvalidArgument(format!("request of {len} bytes is too large")))?;
    header[..4].copy_from_slice(&len.to_be_bytes());
    {
        let mut st = shared.lock();
        if let Some(e) = &st.poisoned {
            let _ = cmd.reply.send(Err(e.clone()));
            return Ok(());
        }
        out.queued += 4 + len as u64;
        st.pending.insert(id, Pending { api_key: cmd.api_key, end: out.queued, reply: cmd.reply });
    }
    trace!(addr = %shared.addr, api = api_name(cmd.api_key), version = cmd.api_version, correlation_id = id, bytes = len, "send");
    wr.write_all(header).await.map_err(|e| Error::io(shared.addr.clone(), e))?;
    wr.write_all(&cmd.body).await.map_err(|e| Error::io(shared.addr.clone(), e))?;
    Ok(())
}

async fn read_loop<R: AsyncRead + Unpin>(mut rd: BufReader<R>, shared: Arc<Shared>, max_frame: usize) {
    let err = loop {
        match read_frame(&mut rd, &shared.addr, max_frame).await {
            Ok(frame) => {
                if let Err(e) = dispatch(&shared, frame) {
                    break e;
                }
            }
            Err(e) => break e,
        }
    };
    poison(&shared, Some(err));
}

async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R, addr: &str, max_frame: usize) -> Result<Bytes> {
    let mut len = [0u8; 4];
    if let Err(e) = rd.read_exact(&mut len).await {
        return Err(if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::ConnectionClosed { addr: addr.to_string(), cause: None }
        } else {
            io_error(addr, e)
        });
    }
    if looks_like_tls_record(&len) {
        return Err(Error::Tls {
            addr: addr.to_string(),
            message: "the broker answered in TLS: this is an SSL or SASL_SSL listener; set security.protocol to SSL \
                      or SASL_SSL (or use the PLAINTEXT listener's port)"
                .to_string(),
        });
    }
    let len = i32::from_be_bytes(len);
    if len < 4 || len as usize > max_frame {
        return Err(Error::Codec {
            context: Default::default(),
            source: CodecError::Invalid {
                what: "response frame length",
                detail: format!("{len} bytes (allowed 4..={max_frame}) from {addr}"),
            },
        });
    }
    let len = len as usize;
    let mut buf = frame_buffer(len);
    while buf.len() < len {
        let want = len - buf.len();
        // Grows with what arrives (doubling, as a Vec does), never by what the length claims.
        buf.reserve(want.min(FRAME_READ_AHEAD));
        let mut limited = (&mut buf).limit(want);
        let n = rd.read_buf(&mut limited).await.map_err(|e| io_error(addr, e))?;
        if n == 0 {
            return Err(Error::ConnectionClosed { addr: addr.to_string(), cause: None });
        }
    }
    Ok(buf.freeze())
}

/// The most a frame's buffer reserves before its bytes arrive: a hostile length prefix (up
/// to `max_frame`, 256 MiB by default) followed by nothing must not reserve all of it.
/// Bigger frames grow as they arrive.
pub(super) const FRAME_READ_AHEAD: usize = 1 << 20;

/// The buffer a frame of `len` bytes starts in.
fn frame_buffer(len: usize) -> BytesMut {
    BytesMut::with_capacity(len.min(FRAME_READ_AHEAD))
}

/// Whether a response "length" is in fact a TLS record header (alert 0x15 or handshake 0x16,
/// version 3.x): what a TLS listener sends a client that does not speak TLS. As a length it
/// is over 300 MB, so a real response never starts this way.
fn looks_like_tls_record(len: &[u8; 4]) -> bool {
    matches!(len[0], 0x15 | 0x16) && len[1] == 0x03 && len[2] <= 0x04
}

/// An IO error of the read half: a TLS failure after the handshake (a TLS 1.3 broker refuses
/// a missing client certificate only then) becomes [`Error::Tls`].
fn io_error(addr: &str, e: std::io::Error) -> Error {
    #[cfg(feature = "tls")]
    if let Some(tls) = crate::security::tls_client::late_tls_error(addr, &e) {
        return tls;
    }
    Error::io(addr, e)
}

fn dispatch(shared: &Shared, frame: Bytes) -> Result<()> {
    let id =
        frame::peek_correlation_id(&frame).map_err(|source| Error::Codec { context: Default::default(), source })?;
    let pending = shared.lock().pending.remove(&id);
    match pending {
        Some(p) => {
            trace!(addr = %shared.addr, api = api_name(p.api_key), correlation_id = id, bytes = frame.len(), "recv");
            // The caller may have given up; then the response is simply dropped.
            let _ = p.reply.send(Ok(frame));
            Ok(())
        }
        // A response nobody asked for means we no longer know where frames start.
        None => Err(Error::Codec {
            context: Default::default(),
            source: CodecError::Invalid {
                what: "correlation id",
                detail: format!("response with unknown correlation id {id} from {}", shared.addr),
            },
        }),
    }
}

#[cfg(test)]
mod frame_tests {
    use super::*;

    /// A length prefix claiming 200 MB followed by a few bytes and the end of the stream: a
    /// closed connection, and the buffer never reserved the claimed size.
    #[tokio::test]
    async fn a_frame_reserves_only_what_arrives() {
        assert!(frame_buffer(200_000_000).capacity() <= FRAME_READ_AHEAD);
        let (mut tx, mut rx) = tokio::io::duplex(1 << 16);
        tx.write_all(&200_000_000i32.to_be_bytes()).await.unwrap();
        tx.write_all(&[7; 10]).await.unwrap();
        drop(tx);
        let err = read_frame(&mut rx, "b:9092", DEFAULT_MAX_FRAME).await.unwrap_err();
        assert!(matches!(err, Error::ConnectionClosed { .. }), "{err}");

        // A real frame bigger than the read-ahead arrives whole.
        let (mut tx, mut rx) = tokio::io::duplex(1 << 16);
        let body: Vec<u8> = (0..3 * FRAME_READ_AHEAD + 5).map(|i| i as u8).collect();
        let writer = tokio::spawn(async move {
            tx.write_all(&(body.len() as i32).to_be_bytes()).await.unwrap();
            tx.write_all(&body).await.unwrap();
            body
        });
        let frame = read_frame(&mut rx, "b:9092", DEFAULT_MAX_FRAME).await.unwrap();
        assert_eq!(frame, writer.await.unwrap());
    }
}
