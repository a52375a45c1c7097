//! A loopback TCP fault proxy between the client and the three brokers, 127.0.0.1 only.
//!
//! The cluster of `scripts/kafka up --nodes 3` has a PROXIED listener on each node
//! (29085-29087 + KAFKA_PORT_OFFSET) that advertises 29185-29187 (+ offset) instead: the
//! ports this proxy listens on, each forwarding to its node. A client bootstrapped at the
//! proxy learns the proxy's ports from Metadata and FindCoordinator itself, so every
//! connection it makes goes through here; nothing is rewritten and the library has no hook.
//!
//! Faults, switched on and off while connections run:
//! - latency: each chunk from the client waits this long before it goes on;
//! - a reset in the middle of a response: the next chunk of at least 64 bytes from a broker is
//!   cut in half, the half forwarded, and both sockets closed with RST;
//! - a black hole: nothing moves either way and new connections hang; when it ends, every
//!   connection that had something held (or was opened during it) is reset, as a real
//!   network would have broken it.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};

/// A chunk at least this long from a broker is a response worth cutting (not a heartbeat).
const CUT_AT_LEAST: usize = 64;

#[derive(Default)]
struct Faults {
    latency_ms: AtomicU64,
    reset_armed: AtomicBool,
    black_hole: AtomicBool,
    resets: AtomicUsize,
    connections: AtomicUsize,
}

/// The proxy, forwarding until dropped.
pub struct FaultProxy {
    /// The bootstrap a client uses to go through the proxy.
    pub bootstrap: String,
    faults: Arc<Faults>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn port_offset() -> u16 {
    std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|o| o.parse().ok()).unwrap_or(0)
}

impl FaultProxy {
    /// Listens on the PROXIED listeners' advertised ports, one per node.
    pub async fn start() -> FaultProxy {
        let off = port_offset();
        let faults = Arc::new(Faults::default());
        let mut tasks = Vec::new();
        for node in 0..3u16 {
            let listen = format!("127.0.0.1:{}", 29185 + off + node);
            let target = format!("127.0.0.1:{}", 29085 + off + node);
            let listener = TcpListener::bind(&listen)
                .await
                .unwrap_or_else(|e| panic!("bind the fault proxy on {listen}: {e} (another chaos run?)"));
            let faults = faults.clone();
            tasks.push(tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    faults.connections.fetch_add(1, Ordering::Relaxed);
                    tokio::spawn(forward(client, target.clone(), faults.clone()));
                }
            }));
        }
        FaultProxy { bootstrap: format!("127.0.0.1:{}", 29185 + off), faults, tasks }
    }

    /// Delays every chunk from the client by `d` (zero: none).
    pub fn set_latency(&self, d: Duration) {
        self.faults.latency_ms.store(d.as_millis() as u64, Ordering::Relaxed);
    }

    /// Cuts the next response of at least 64 bytes in half and resets the connection.
    pub fn reset_next_response(&self) {
        self.faults.reset_armed.store(true, Ordering::Relaxed);
    }

    /// Whether the armed reset is still waiting for a response to cut.
    pub fn reset_pending(&self) -> bool {
        self.faults.reset_armed.load(Ordering::Relaxed)
    }

    /// Connections reset so far (mid-response and after a black hole).
    pub fn resets(&self) -> usize {
        self.faults.resets.load(Ordering::Relaxed)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.faults.connections.load(Ordering::Relaxed)
    }

    /// Starts or ends a black hole.
    pub fn black_hole(&self, on: bool) {
        self.faults.black_hole.store(on, Ordering::Relaxed);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// When each proxied connection ended (reset, or closed by either side), in this test
/// process. The ledger's explanation of a same-count redelivery (see `Ledger::figures`), read
/// in Kafka 4.4's broker: when a connection closes, the broker drops the share session opened
/// on it (`ShareSessionCache`'s disconnect listener). It releases that member's acquired records
/// (`releaseSession`, with the count kept), and when the group has no session left on the broker
/// it also drops the group's share partitions from memory (`onGroupEmpty`,
/// `removeSharePartitionFromCache`). A partition dropped before its release was written is
/// loaded again from the share coordinator's persisted state, which holds no acquisition, so an
/// acquired record comes back with the count it had, as after a leader change. The end of the
/// black hole resets every connection at once, which empties the group on every broker: a
/// race no client controls, met in one CI run out of many.
static ENDED: Mutex<Vec<Instant>> = Mutex::new(Vec::new());

/// The moments proxied connections ended, oldest first.
pub fn connections_ended() -> Vec<Instant> {
    ENDED.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn ended() {
    ENDED.lock().unwrap_or_else(|p| p.into_inner()).push(Instant::now());
}

/// Waits out a black hole; true if there was one (the caller then resets its connection).
async fn held_in_black_hole(faults: &Faults) -> bool {
    let mut held = false;
    while faults.black_hole.load(Ordering::Relaxed) {
        held = true;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    held
}

/// Closes both sockets with RST (SO_LINGER 0), as a broken network path would.
fn reset(client: &OwnedWriteHalf, server: &OwnedWriteHalf, faults: &Faults) {
    let _ = client.as_ref().set_zero_linger();
    let _ = server.as_ref().set_zero_linger();
    faults.resets.fetch_add(1, Ordering::Relaxed);
}

async fn forward(client: TcpStream, target: String, faults: Arc<Faults>) {
    // A connection opened in a black hole hangs, then breaks.
    if held_in_black_hole(&faults).await {
        let _ = client.set_zero_linger();
        faults.resets.fetch_add(1, Ordering::Relaxed);
        ended();
        return;
    }
    let Ok(server) = TcpStream::connect(&target).await else { return };
    let _ = (client.set_nodelay(true), server.set_nodelay(true));
    let (client_rx, client_tx) = client.into_split();
    let (server_rx, server_tx) = server.into_split();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let up = pump(client_rx, server_tx, Direction::Request, faults.clone(), stop_rx.clone());
    let down = pump(server_rx, client_tx, Direction::Response, faults.clone(), stop_rx);
    // The first pump to end ends the other (its own halves drop with it).
    let mut up = tokio::spawn(up);
    let mut down = tokio::spawn(down);
    let (a, b) = tokio::select! {
        r = &mut up => { let _ = stop_tx.send(true); (r.ok(), down.await.ok()) }
        r = &mut down => { let _ = stop_tx.send(true); (up.await.ok(), r.ok()) }
    };
    // Each pump hands back its write half; a reset needs both sockets.
    if let (Some((tx_server, reset_up)), Some((tx_client, reset_down))) = (a, b) {
        if reset_up || reset_down {
            reset(&tx_client, &tx_server, &faults);
        }
    }
    ended();
}

#[derive(Clone, Copy, PartialEq)]
enum Direction {
    Request,
    Response,
}

/// Copies `rx` to `tx` under the faults; returns the write half and whether the connection
/// is to be reset.
async fn pump(
    mut rx: OwnedReadHalf,
    mut tx: OwnedWriteHalf,
    dir: Direction,
    faults: Arc<Faults>,
    mut stop: tokio::sync::watch::Receiver<bool>,
) -> (OwnedWriteHalf, bool) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = tokio::select! {
            r = rx.read(&mut buf) => match r { Ok(0) | Err(_) => return (tx, false), Ok(n) => n },
            _ = stop.changed() => return (tx, false),
        };
        if held_in_black_hole(&faults).await {
            return (tx, true);
        }
        let chunk = &buf[..n];
        match dir {
            Direction::Request => {
                let ms = faults.latency_ms.load(Ordering::Relaxed);
                if ms > 0 {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                }
            }
            Direction::Response => {
                if n >= CUT_AT_LEAST
                    && faults.reset_armed.compare_exchange(true, false, Ordering::Relaxed, Ordering::Relaxed).is_ok()
                {
                    let _ = tx.write_all(&chunk[..n / 2]).await;
                    let _ = tx.flush().await;
                    return (tx, true);
                }
            }
        }
        if tx.write_all(chunk).await.is_err() {
            return (tx, false);
        }
    }
}
