//! The sink metrics in Prometheus' text exposition format, and a tiny HTTP/1.1 server for
//! them on a loopback port (`GET /metrics`).
//!
//! Hand-written rather than an HTTP crate: one route, one answer per connection, so a few
//! dozen lines keep the default build free of a web stack. Names are KIP-1302's with `-`
//! turned to `_` under the prefix `kafka_connect_sink_task_`, labelled by connector.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::metrics::SinkMetricsSnapshot;
use crate::error::{Error, Result};

/// The prefix of every exposed metric name.
pub const PROMETHEUS_PREFIX: &str = "kafka_connect_sink_task_";

/// Renders snapshots as Prometheus text (version 0.0.4): one `# TYPE` line per metric, then
/// one sample per connector.
pub fn render(snapshots: &[SinkMetricsSnapshot]) -> String {
    let mut out = String::new();
    let Some(first) = snapshots.first() else { return out };
    for (name, _) in first.iter() {
        let prom = format!("{PROMETHEUS_PREFIX}{}", name.replace('-', "_"));
        let kind = if name.ends_with("-total") { "counter" } else { "gauge" };
        let _ = writeln!(out, "# TYPE {prom} {kind}");
        for s in snapshots {
            let v = s.get(name).unwrap_or(f64::NAN);
            let _ = writeln!(out, "{prom}{{connector=\"{}\"}} {}", escape(s.connector()), number(v));
        }
    }
    out
}

fn escape(label: &str) -> String {
    label.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// Where the server reads its metrics from on each scrape.
pub type MetricsSource = Arc<dyn Fn() -> Vec<SinkMetricsSnapshot> + Send + Sync>;

/// A running metrics endpoint; dropping it stops the server.
#[derive(Debug)]
pub struct PrometheusServer {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl PrometheusServer {
    /// Serves `GET /metrics` on 127.0.0.1:`port` (0 picks a free port; see
    /// [`local_addr`](Self::local_addr)).
    pub async fn bind(port: u16, source: MetricsSource) -> Result<PrometheusServer> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await.map_err(|e| {
            Error::config("--metrics-port", format!("cannot listen on 127.0.0.1:{port}: {e}; pick another port"))
        })?;
        let addr = listener.local_addr().map_err(|e| Error::config("--metrics-port", e.to_string()))?;
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    // Out of file descriptors or similar: wait a moment instead of spinning.
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                let source = source.clone();
                tokio::spawn(async move {
                    // A client that never sends a whole request must not hold a task forever.
                    let _ = tokio::time::timeout(Duration::from_secs(10), answer(stream, source)).await;
                });
            }
        });
        Ok(PrometheusServer { addr, task })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for PrometheusServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads one request head and answers it, then closes the connection.
async fn answer(mut stream: tokio::net::TcpStream, source: MetricsSource) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    // The head ends at an empty line; 16 KiB is plenty for any scraper's request.
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && !buf.windows(2).any(|w| w == b"\n\n") {
        let n = stream.read(&mut chunk).await?;
        if n == 0 || buf.len() > 16 * 1024 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    let head = String::from_utf8_lossy(&buf);
    let mut parts = head.lines().next().unwrap_or("").split_whitespace();
    let (method, path) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = path.split('?').next().unwrap_or("");
    let (status, ctype, body) = match (method, path) {
        ("GET", "/metrics") => ("200 OK", "text/plain; version=0.0.4; charset=utf-8", render(&source())),
        ("GET", _) => ("404 Not Found", "text/plain; charset=utf-8", "only /metrics is served here\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "use GET /metrics\n".to_string()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::metrics::SinkMetrics;

    #[test]
    fn names_are_prefixed_and_underscored() {
        let m = SinkMetrics::new("my \"c\"");
        m.acquired(3, 1);
        let text = render(&[m.snapshot()]);
        assert!(text.contains("# TYPE kafka_connect_sink_task_sink_record_acquire_total counter"), "{text}");
        assert!(
            text.contains("kafka_connect_sink_task_sink_record_acquire_total{connector=\"my \\\"c\\\"\"} 3"),
            "{text}"
        );
        assert!(text.contains("kafka_connect_sink_task_put_batch_time_avg{connector=\"my \\\"c\\\"\"} NaN"), "{text}");
    }

    #[tokio::test]
    async fn serves_get_metrics_only() {
        let m = Arc::new(SinkMetrics::new("c"));
        let src = m.clone();
        let server = PrometheusServer::bind(0, Arc::new(move || vec![src.snapshot()])).await.unwrap();
        for (req, want) in [("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "200 OK"), ("GET / HTTP/1.1\r\n\r\n", "404")] {
            let mut s = tokio::net::TcpStream::connect(server.local_addr()).await.unwrap();
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.starts_with("HTTP/1.1 ") && out.contains(want), "{out}");
            if want == "200 OK" {
                assert!(out.contains("sink_record_acquire_total"), "{out}");
            }
        }
    }
}
