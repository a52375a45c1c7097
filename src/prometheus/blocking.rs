//! The `/metrics` endpoint for programs without an async runtime: [`serve`] starts the same
//! endpoint as the async [`super::serve`] on a small runtime of its own (one worker thread),
//! so a blocking service (a `consumer::blocking::ShareConsumer`, a
//! `producer::blocking::Producer`) needs no tokio of its own for its metrics.
//!
//! ```no_run
//! use std::sync::Arc;
//! use kafka_share::consumer::{blocking::ShareConsumer, ShareConsumerConfig};
//! use kafka_share::prometheus::{blocking, Registry, SnapshotCollector};
//!
//! let consumer = Arc::new(ShareConsumer::connect(ShareConsumerConfig::new("127.0.0.1:19092", "g"))?);
//! let mut registry = Registry::default();
//! let c = consumer.clone();
//! registry.register_collector(Box::new(SnapshotCollector::new("worker", move || c.metrics())));
//! let endpoint = blocking::serve("0.0.0.0:9464", Arc::new(registry))?; // every interface
//! println!("metrics on http://{}/metrics", endpoint.local_addr());
//! # Ok::<(), kafka_share::Error>(())
//! ```

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::net::ToSocketAddrs;

use super::Registry;
use crate::blocking_runtime::OwnedRuntime;
use crate::error::Result;

/// A running `/metrics` endpoint and the runtime it runs on ([`serve`]); dropping it stops
/// both, without panicking wherever it is dropped.
#[derive(Debug)]
pub struct MetricsEndpoint {
    endpoint: super::MetricsEndpoint,
    // Declared after `endpoint`: the server task is aborted before its runtime stops.
    _rt: OwnedRuntime,
}

impl MetricsEndpoint {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }
}

/// Serves `GET /metrics` with the registry's metrics on `addr`, as [`super::serve`] does
/// (`"0.0.0.0:9464"` for every interface, port 0 for a free port), blocking until it
/// listens. In async code [`super::serve`] needs no runtime of its own.
pub fn serve(addr: impl ToSocketAddrs, registry: Arc<Registry>) -> Result<MetricsEndpoint> {
    let rt = OwnedRuntime::new("kafka-share-metrics")?;
    let endpoint = rt.block_on(super::serve(addr, registry))??;
    Ok(MetricsEndpoint { endpoint, _rt: rt })
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};

    use super::*;

    #[test]
    fn serves_without_a_runtime_of_the_callers() {
        let mut registry = Registry::default();
        let c = prometheus_client::metrics::counter::Counter::<u64>::default();
        registry.register("blocking_served", "a test counter", c.clone());
        c.inc();
        let endpoint = serve("0.0.0.0:0", Arc::new(registry)).unwrap();
        let mut s = std::net::TcpStream::connect(("127.0.0.1", endpoint.local_addr().port())).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert!(out.contains("blocking_served_total 1"), "{out}");
    }

    #[tokio::test]
    async fn started_and_dropped_on_a_runtimes_thread_without_panicking() {
        let endpoint = serve("127.0.0.1:0", Arc::new(Registry::default())).unwrap();
        let mut s = tokio::net::TcpStream::connect(endpoint.local_addr()).await.unwrap();
        tokio::io::AsyncWriteExt::write_all(&mut s, b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut s, &mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        drop(endpoint); // on a runtime's thread: tokio's own runtime drop would panic here
    }
}
