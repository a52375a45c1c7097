//! A TCP forwarder that counts the connections it accepts: how tests check that a client
//! does not redial in a loop after an error retrying cannot fix.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpStream};

/// A forwarder on 127.0.0.1 (so TLS names still match) to one target address.
pub struct CountingProxy {
    /// host:port to dial instead of the target.
    pub addr: String,
    accepted: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    /// Starts forwarding to `target`.
    pub async fn start(target: &str) -> CountingProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().expect("proxy address").to_string();
        let accepted = Arc::new(AtomicUsize::new(0));
        let (count, target) = (accepted.clone(), target.to_string());
        let task = tokio::spawn(async move {
            while let Ok((mut client, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let target = target.clone();
                tokio::spawn(async move {
                    if let Ok(mut server) = TcpStream::connect(&target).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        });
        CountingProxy { addr, accepted, task }
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
