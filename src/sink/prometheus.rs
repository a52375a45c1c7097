//! The sink metrics in Prometheus' text exposition format, served on a loopback port
//! (`GET /metrics`) by the crate's endpoint ([`crate::prometheus`]). Names are KIP-1302's
//! with `-` turned to `_` under the prefix `kafka_connect_sink_task_`, labelled by connector.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::Arc;

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
    endpoint: crate::prometheus::MetricsEndpoint,
}

impl PrometheusServer {
    /// Serves `GET /metrics` on 127.0.0.1:`port` (0 picks a free port; see
    /// [`local_addr`](Self::local_addr)).
    pub async fn bind(port: u16, source: MetricsSource) -> Result<PrometheusServer> {
        let text: crate::prometheus::TextSource = Arc::new(move || render(&source()));
        let endpoint = crate::prometheus::serve_text(port, "text/plain; version=0.0.4; charset=utf-8", text)
            .await
            .map_err(|e| match e {
                Error::Config { message, .. } => Error::config("--metrics-port", message),
                e => e,
            })?;
        Ok(PrometheusServer { endpoint })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.endpoint.local_addr()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::metrics::SinkMetrics;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

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
