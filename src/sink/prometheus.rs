//! The sink metrics in Prometheus form, through the crate's [`crate::prometheus`] module: a
//! `prometheus-client` collector ([`SinkCollector`]) reads the connectors' snapshots at each
//! scrape, and [`PrometheusServer`] serves it (`GET /metrics`) with the crate's endpoint, on
//! a loopback port or the address given. Names are KIP-1302's with `-` turned to `_` under the prefix
//! `kafka_connect_sink_task_`, labelled by connector, in base units as the crate's
//! [`crate::prometheus`] names every series: a name ending in `-total` is a counter
//! (OpenMetrics writes its `_total`), every other one a gauge; the times kept in
//! milliseconds are exported in seconds (`put-batch-time-avg` is
//! `kafka_connect_sink_task_put_batch_time_avg_seconds`).

use std::net::SocketAddr;
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use tokio::net::ToSocketAddrs;

use super::metrics::SinkMetricsSnapshot;
use crate::error::{Error, Result};
use crate::prometheus::{MetricsEndpoint, Registry};

/// The prefix of every exposed metric name.
pub const PROMETHEUS_PREFIX: &str = "kafka_connect_sink_task_";

/// Where the server reads its metrics from on each scrape.
pub type MetricsSource = Arc<dyn Fn() -> Vec<SinkMetricsSnapshot> + Send + Sync>;

/// The connectors' metrics as a `prometheus-client` collector: register it in an
/// application's own [`Registry`] to serve them beside its other metrics.
pub struct SinkCollector {
    source: MetricsSource,
}

impl std::fmt::Debug for SinkCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinkCollector").finish_non_exhaustive()
    }
}

impl SinkCollector {
    /// Reads `source` at each scrape.
    pub fn new(source: MetricsSource) -> SinkCollector {
        SinkCollector { source }
    }
}

impl Collector for SinkCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::fmt::Result {
        let snapshots = (self.source)();
        let Some(first) = snapshots.first() else { return Ok(()) };
        // One family per metric, one sample per connector in it.
        for (name, _) in first.iter() {
            let series = crate::prometheus::units::series(PROMETHEUS_PREFIX, "KIP-1302", name);
            let unit = series.unit.as_ref();
            if series.counter {
                let metric_type = ConstCounter::new(0.0).metric_type();
                let mut family = encoder.encode_descriptor(&series.name, &series.help, unit, metric_type)?;
                for s in &snapshots {
                    let labels = [("connector", s.connector())];
                    let v = series.value(s.get(name).unwrap_or(0.0)).max(0.0);
                    ConstCounter::new(v).encode(family.encode_family(&labels)?)?;
                }
            } else {
                let metric_type = ConstGauge::new(0.0).metric_type();
                let mut family = encoder.encode_descriptor(&series.name, &series.help, unit, metric_type)?;
                for s in &snapshots {
                    let labels = [("connector", s.connector())];
                    let v = series.value(s.get(name).unwrap_or(f64::NAN));
                    ConstGauge::new(v).encode(family.encode_family(&labels)?)?;
                }
            }
        }
        Ok(())
    }
}

/// Renders snapshots in Prometheus' text format (OpenMetrics text, as the crate's
/// [`crate::prometheus::render`] writes it).
pub fn render(snapshots: &[SinkMetricsSnapshot]) -> String {
    let snapshots = snapshots.to_vec();
    crate::prometheus::render(&registry(Arc::new(move || snapshots.clone())))
}

fn registry(source: MetricsSource) -> Registry {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(SinkCollector::new(source)));
    registry
}

/// A running metrics endpoint; dropping it stops the server.
#[derive(Debug)]
pub struct PrometheusServer {
    endpoint: MetricsEndpoint,
}

impl PrometheusServer {
    /// Serves `GET /metrics` on 127.0.0.1:`port`, this host only (0 picks a free port; see
    /// [`local_addr`](Self::local_addr)); [`bind_to`](Self::bind_to) takes the address.
    pub async fn bind(port: u16, source: MetricsSource) -> Result<PrometheusServer> {
        let endpoint = crate::prometheus::serve((std::net::Ipv4Addr::LOCALHOST, port), Arc::new(registry(source)))
            .await
            .map_err(|e| match e {
                Error::Config { message, .. } => Error::config("--metrics-port", message),
                e => e,
            })?;
        Ok(PrometheusServer { endpoint })
    }

    /// Serves `GET /metrics` on `addr`: `"0.0.0.0:9464"` (or `"[::]:9464"`) for every
    /// interface, so a Prometheus on another host or pod can scrape it; anything
    /// [`crate::prometheus::serve`] takes (port 0 picks a free port).
    pub async fn bind_to(addr: impl ToSocketAddrs, source: MetricsSource) -> Result<PrometheusServer> {
        let endpoint = crate::prometheus::serve(addr, Arc::new(registry(source))).await?;
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
        assert!(text.contains("# TYPE kafka_connect_sink_task_sink_record_acquire counter"), "{text}");
        assert!(
            text.contains("kafka_connect_sink_task_sink_record_acquire_total{connector=\"my \\\"c\\\"\"} 3"),
            "{text}"
        );
        assert!(text.contains("# TYPE kafka_connect_sink_task_task_count gauge"), "{text}");
        let avg = "kafka_connect_sink_task_put_batch_time_avg_seconds";
        assert!(text.contains(&format!("{avg}{{connector=\"my \\\"c\\\"\"}} NaN")), "{text}");
        assert!(text.contains(&format!("# UNIT {avg} seconds\n")), "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn one_family_per_metric_one_sample_per_connector() {
        let (a, b) = (SinkMetrics::new("a"), SinkMetrics::new("b"));
        a.acquired(1, 0);
        b.acquired(2, 0);
        let text = render(&[a.snapshot(), b.snapshot()]);
        let family = "# TYPE kafka_connect_sink_task_sink_record_acquire counter";
        assert_eq!(text.matches(family).count(), 1, "{text}");
        assert!(text.contains("kafka_connect_sink_task_sink_record_acquire_total{connector=\"a\"} 1"), "{text}");
        assert!(text.contains("kafka_connect_sink_task_sink_record_acquire_total{connector=\"b\"} 2"), "{text}");
        // Nothing to render without a connector.
        assert_eq!(render(&[]), "# EOF\n");
    }

    #[tokio::test]
    async fn binds_the_address_given_every_interface_too() {
        let m = Arc::new(SinkMetrics::new("c"));
        let src = m.clone();
        let server = PrometheusServer::bind_to("0.0.0.0:0", Arc::new(move || vec![src.snapshot()])).await.unwrap();
        assert!(server.local_addr().ip().is_unspecified(), "{}", server.local_addr());
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", server.local_addr().port())).await.unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        assert!(out.starts_with("HTTP/1.1 200") && out.contains("kafka_connect_sink_task_task_count"), "{out}");
        let e = PrometheusServer::bind_to("not-an-address", Arc::new(Vec::new)).await.unwrap_err();
        assert!(e.to_string().contains("metrics address"), "{e}");
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
