//! The clients' metrics in Prometheus form (feature `prometheus`), through
//! [`prometheus-client`](https://docs.rs/prometheus-client), the Prometheus project's own Rust
//! client, and a small endpoint to serve them.
//!
//! Why `prometheus-client` and not the `metrics` facade: the consumer keeps its metrics as
//! atomics it reads into a [`MetricsSnapshot`] under Java's names; a `prometheus-client`
//! [`Collector`] reads that snapshot at each scrape, so nothing is pushed anywhere on the hot
//! path, and the metrics land in the application's own [`Registry`] beside its other
//! metrics. The `metrics` facade would need every update sent through its macros (or a
//! task copying snapshots into gauges on a timer, whose values lag).
//!
//! Names follow the Prometheus JMX exporter's rendering of Java's, `kafka_<group>_<name>`
//! with `-` as `_`, labelled `client_id`, and Prometheus' naming of units: every series is in
//! a base unit that its name ends with and its HELP says (a table in `units.rs` declares the
//! unit of every metric). A Java `-total` is a counter (`_total`), every other one a gauge;
//! Java's latencies in milliseconds are exported in seconds, e.g.
//! `kafka_consumer_share_fetch_manager_metrics_fetch_latency_avg_seconds` for Java's
//! `fetch-latency-avg`; sizes in bytes (`kafka_producer_metrics_batch_size_avg_bytes`), the
//! compression rate as `_ratio`; rates (`-rate`) are per second and counts unitless, under
//! Java's names. [`MetricsSnapshot::get`] still reads Java's units (milliseconds).
//! A snapshot's latency histograms ([`MetricsSnapshot::histograms`]) are Prometheus
//! histograms in seconds, `kafka_<group>_<name>_seconds` with its `_bucket{le=..}`
//! (128 µs .. 67 s, powers of two), `_sum` and `_count`, e.g.
//! `kafka_consumer_share_fetch_manager_metrics_fetch_latency_seconds_bucket`.
//!
//! The same collector renders a producer's [`Producer::metrics`](crate::Producer::metrics)
//! (group `producer-metrics`: `kafka_producer_metrics_record_send_total`, ...).
//!
//! ```no_run
//! # async fn demo() -> kafka_share::Result<()> {
//! use std::sync::Arc;
//! use kafka_share::prometheus::{serve, SnapshotCollector};
//! use kafka_share::{ShareConsumer, ShareConsumerConfig};
//!
//! let consumer = Arc::new(ShareConsumer::connect(ShareConsumerConfig::new("127.0.0.1:19092", "g")).await?);
//! let mut registry = prometheus_client::registry::Registry::default();
//! let c = consumer.clone();
//! registry.register_collector(Box::new(SnapshotCollector::new("orders-worker", move || c.metrics())));
//! // Every interface, so Prometheus on another host or pod can scrape it;
//! // "127.0.0.1:9464" keeps it to this machine.
//! let endpoint = serve("0.0.0.0:9464", Arc::new(registry)).await?; // GET http://<host>:9464/metrics
//! # drop(endpoint); Ok(()) }
//! ```
//!
//! The application's own metrics go into the same registry through [`client`], the
//! `prometheus-client` this crate is built with, re-exported so the application need not
//! depend on that crate at exactly the same version (a `Registry` or `Collector` of another
//! version is another type):
//!
//! ```
//! use kafka_share::prometheus::client::metrics::counter::Counter;
//! use kafka_share::prometheus::{render, Registry};
//!
//! let mut registry = Registry::default();
//! let orders: Counter = Counter::default();
//! registry.register("orders_rejected", "Orders rejected as invalid", orders.clone());
//! orders.inc();
//! assert!(render(&registry).contains("orders_rejected_total 1"));
//! ```

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric, NoLabelSet};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
pub use prometheus_client::registry::Registry;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, ToSocketAddrs};

/// The [`prometheus-client`](https://docs.rs/prometheus-client) crate this module is built
/// with (its [`Registry`] is this one), for the application's own metrics: register them
/// beside the clients' without naming `prometheus-client` at this crate's exact version.
pub use prometheus_client as client;

use crate::error::{Error, Result};
use crate::metrics::{HistogramSnapshot, MetricsSnapshot};

pub mod blocking;
mod format;
pub(crate) mod units;

pub use format::Format;

/// Renders a snapshot source (a consumer's `metrics()`, a processor's `Running::metrics()`, a
/// producer's `metrics()`) into the registry it is registered with, at each scrape.
pub struct SnapshotCollector {
    client_id: String,
    source: Box<dyn Fn() -> MetricsSnapshot + Send + Sync>,
}

impl std::fmt::Debug for SnapshotCollector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotCollector").field("client_id", &self.client_id).finish_non_exhaustive()
    }
}

impl SnapshotCollector {
    /// Reads `source` at each scrape; its metrics carry the label `client_id`.
    pub fn new(client_id: impl Into<String>, source: impl Fn() -> MetricsSnapshot + Send + Sync + 'static) -> Self {
        SnapshotCollector { client_id: client_id.into(), source: Box::new(source) }
    }
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> std::result::Result<(), std::fmt::Error> {
        let snapshot = (self.source)();
        let labels = [("client_id", self.client_id.as_str())];
        for (group, name, value) in snapshot.iter() {
            let series = units::series(&format!("kafka_{group}_"), group, name);
            let (value, unit) = (series.value(value), series.unit.as_ref());
            if series.counter {
                let metric = ConstCounter::new(value.max(0.0));
                let mut family = encoder.encode_descriptor(&series.name, &series.help, unit, metric.metric_type())?;
                metric.encode(family.encode_family(&labels)?)?;
            } else {
                let metric = ConstGauge::new(value);
                let mut family = encoder.encode_descriptor(&series.name, &series.help, unit, metric.metric_type())?;
                metric.encode(family.encode_family(&labels)?)?;
            }
        }
        for (group, name, histogram) in snapshot.histograms() {
            let series = units::histogram_series(&format!("kafka_{group}_"), group, name);
            let mut family =
                encoder.encode_descriptor(&series.name, &series.help, series.unit.as_ref(), MetricType::Histogram)?;
            let (sum, count, buckets) = prometheus_buckets(histogram);
            family.encode_family(&labels)?.encode_histogram::<NoLabelSet>(sum, count, &buckets, None)?;
        }
        Ok(())
    }
}

/// A histogram as `prometheus-client` encodes one: sum in seconds, count, and per bucket its
/// upper bound in seconds with the count of that bucket alone (the encoder adds them up),
/// `+Inf` last.
fn prometheus_buckets(h: &HistogramSnapshot) -> (f64, u64, Vec<(f64, u64)>) {
    let count = h.count();
    let mut below = 0;
    let mut buckets: Vec<(f64, u64)> = h
        .buckets()
        .map(|(bound, cumulative)| {
            let own = cumulative - below;
            below = cumulative;
            (bound.as_secs_f64(), own)
        })
        .collect();
    buckets.push((f64::INFINITY, count - below));
    (h.sum().as_secs_f64(), count, buckets)
}

/// The registry in OpenMetrics 1.0.0 text, as `prometheus-client` encodes it (HELP texts
/// escaped as OpenMetrics asks); [`render_as`] writes either format.
pub fn render(registry: &Registry) -> String {
    format::to_openmetrics(&encode(registry))
}

/// The registry in `format`: for a web framework's own `/metrics` route, with
/// [`Format::negotiate`] over the request's `Accept` header and
/// [`Format::content_type`] for the answer, as [`serve`] does.
///
/// ```
/// use kafka_share::prometheus::{render_as, Format, Registry};
///
/// let registry = Registry::default();
/// let format = Format::negotiate(Some("text/plain;version=0.0.4"));
/// assert_eq!(format.content_type(), "text/plain; version=0.0.4; charset=utf-8");
/// assert_eq!(render_as(&registry, format), ""); // no `# EOF` in the text format
/// ```
pub fn render_as(registry: &Registry, format: Format) -> String {
    match format {
        Format::Text => format::to_text(&encode(registry)),
        Format::OpenMetrics => render(registry),
    }
}

/// What `prometheus-client` writes for the registry (OpenMetrics, HELP as given).
fn encode(registry: &Registry) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; a collector's error leaves what was written.
    let _ = prometheus_client::encoding::text::encode(&mut out, registry);
    out
}

/// A running `/metrics` endpoint ([`serve`]); dropping it stops the server.
#[derive(Debug)]
pub struct MetricsEndpoint {
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl MetricsEndpoint {
    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for MetricsEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Serves `GET /metrics` with the registry's metrics on `addr`: `"0.0.0.0:9464"` (or
/// `"[::]:9464"`) for every interface, so a Prometheus on another host or pod can scrape it;
/// `"127.0.0.1:9464"` for this machine only; port 0 picks a free port (see
/// [`MetricsEndpoint::local_addr`]). `addr` is anything tokio can resolve: a
/// [`SocketAddr`], `(IpAddr, u16)`, `"host:port"`; the first address that binds is used.
///
/// Each scrape is answered in the format its `Accept` header asks for
/// ([`Format::negotiate`]): OpenMetrics 1.0.0 when it prefers it (Prometheus does), else the
/// Prometheus text format 0.0.4 (`curl`, `promtool check metrics`, older scrapers).
///
/// One route, one answer per connection: a few dozen lines instead of a web framework
/// (`prometheus-client` serves no HTTP itself); put a framework's route in front of
/// [`render_as`] instead when the service has one.
pub async fn serve(addr: impl ToSocketAddrs, registry: Arc<Registry>) -> Result<MetricsEndpoint> {
    let text: TextSource = Arc::new(move || encode(&registry));
    serve_text(addr, text).await
}

/// What an endpoint answers with, rendered at each scrape: OpenMetrics as `prometheus-client`
/// writes it, rewritten in the format the scraper asks for.
type TextSource = Arc<dyn Fn() -> String + Send + Sync>;

/// The endpoint behind [`serve`] (the sink's `PrometheusServer` too): `GET /metrics`
/// answered with `text()` in the format the request negotiates.
async fn serve_text(addr: impl ToSocketAddrs, text: TextSource) -> Result<MetricsEndpoint> {
    // Resolved first so that an error names the addresses tried, not only the cause.
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|e| Error::config("metrics address", format!("cannot resolve the metrics address: {e}")))?
        .collect();
    let listener = TcpListener::bind(&addrs[..]).await.map_err(|e| {
        let tried = addrs.iter().map(SocketAddr::to_string).collect::<Vec<_>>().join(", ");
        Error::config("metrics address", format!("cannot listen on {tried}: {e}; pick another port or address"))
    })?;
    let addr = listener.local_addr().map_err(|e| Error::config("metrics address", e.to_string()))?;
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                // Out of file descriptors or similar: wait a moment instead of spinning.
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            };
            let text = text.clone();
            tokio::spawn(async move {
                // A client that never sends a whole request must not hold a task forever.
                let _ = tokio::time::timeout(Duration::from_secs(10), answer(stream, text)).await;
            });
        }
    });
    Ok(MetricsEndpoint { addr, task })
}

/// The `Accept` header of a request head (several joined as one list), `None` without one.
fn accept_header(head: &str) -> Option<String> {
    let values: Vec<&str> = head
        .lines()
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_once(':'))
        .filter(|(name, _)| name.trim().eq_ignore_ascii_case("accept"))
        .map(|(_, v)| v.trim())
        .collect();
    (!values.is_empty()).then(|| values.join(","))
}

/// Reads one request head and answers it, then closes the connection.
async fn answer(mut stream: tokio::net::TcpStream, text: TextSource) -> std::io::Result<()> {
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
        ("GET", "/metrics") => {
            let format = Format::negotiate(accept_header(&head).as_deref());
            let body = match format {
                Format::Text => format::to_text(&text()),
                Format::OpenMetrics => format::to_openmetrics(&text()),
            };
            ("200 OK", format.content_type(), body)
        }
        ("GET", _) => ("404 Not Found", "text/plain; charset=utf-8", "only /metrics is served here\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain; charset=utf-8", "use GET /metrics\n".to_string()),
    };
    // The head and the body written apart: the body of a large exporter is megabytes, and
    // one string holding both would copy it. `Vary`: a cache between must not answer one
    // format's request with the other's.
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nVary: Accept\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot() -> MetricsSnapshot {
        let mut s = MetricsSnapshot::default();
        s.put(crate::consumer::FETCH_MANAGER, "records-consumed-total", 42.0);
        s.put(crate::consumer::FETCH_MANAGER, "fetch-latency-avg", 1.5);
        let h = crate::metrics::Histogram::default();
        for d in
            [Duration::from_micros(100), Duration::from_millis(3), Duration::from_millis(3), Duration::from_secs(90)]
        {
            h.record(d);
        }
        s.put_histogram(crate::consumer::FETCH_MANAGER, "fetch-latency", h.snapshot());
        s
    }

    #[test]
    fn a_histogram_renders_as_a_prometheus_histogram_in_seconds() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector::new("w", snapshot)));
        let text = render(&registry);
        let name = "kafka_consumer_share_fetch_manager_metrics_fetch_latency_seconds";
        assert!(text.contains(&format!("# TYPE {name} histogram\n")), "{text}");
        assert!(text.contains(&format!("# UNIT {name} seconds\n")), "{text}");
        let lines: Vec<&str> = text.lines().filter(|l| l.starts_with(&format!("{name}_"))).collect();
        // 20 bounds and +Inf, cumulative: 100 us under the first, 3 ms twice under 4.096 ms,
        // 90 s past the last bound.
        let buckets: Vec<&str> = lines.iter().copied().filter(|l| l.contains("_bucket{")).collect();
        assert_eq!(buckets.len(), 21, "{text}");
        assert_eq!(buckets[0], format!("{name}_bucket{{le=\"0.000128\",client_id=\"w\"}} 1"));
        assert_eq!(buckets[4], format!("{name}_bucket{{le=\"0.002048\",client_id=\"w\"}} 1"));
        assert_eq!(buckets[5], format!("{name}_bucket{{le=\"0.004096\",client_id=\"w\"}} 3"));
        assert_eq!(buckets[19], format!("{name}_bucket{{le=\"67.108864\",client_id=\"w\"}} 3"));
        assert_eq!(buckets[20], format!("{name}_bucket{{le=\"+Inf\",client_id=\"w\"}} 4"));
        assert!(lines.contains(&format!("{name}_count{{client_id=\"w\"}} 4").as_str()), "{text}");
        assert!(lines.contains(&format!("{name}_sum{{client_id=\"w\"}} 90.0061").as_str()), "{text}");
        // The Java-named gauge is still there, in seconds.
        assert!(text.contains("fetch_latency_avg_seconds{client_id=\"w\"} 0.0015"), "{text}");
    }

    #[test]
    fn a_snapshot_renders_under_javas_names_with_its_client_id() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector::new("worker \"1\"", snapshot)));
        let text = render(&registry);
        assert!(text.contains("# TYPE kafka_consumer_share_fetch_manager_metrics_records_consumed counter"), "{text}");
        assert!(
            text.contains(
                "kafka_consumer_share_fetch_manager_metrics_records_consumed_total{client_id=\"worker \\\"1\\\"\"} 42"
            ),
            "{text}"
        );
        let avg = "kafka_consumer_share_fetch_manager_metrics_fetch_latency_avg_seconds";
        assert!(text.contains(&format!("# TYPE {avg} gauge\n")), "{text}");
        assert!(text.contains(&format!("# UNIT {avg} seconds\n")), "{text}");
        assert!(
            text.contains(&format!(
                "# HELP {avg} consumer-share-fetch-manager-metrics fetch-latency-avg, in seconds (the client keeps milliseconds)\n"
            )),
            "{text}"
        );
        assert!(text.contains(&format!("{avg}{{client_id=\"worker \\\"1\\\"\"}} 0.0015")), "{text}");
    }

    #[test]
    fn a_producers_metrics_render_under_the_java_producers_group() {
        let producer = || {
            let mut s = MetricsSnapshot::default();
            s.put(crate::producer::PRODUCER, "record-send-total", 7.0);
            s.put(crate::producer::PRODUCER, "request-latency-avg", 2.5);
            s.put_histogram(crate::producer::PRODUCER, "request-latency", Default::default());
            s
        };
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector::new("p", producer)));
        let text = render(&registry);
        assert!(text.contains("kafka_producer_metrics_record_send_total{client_id=\"p\"} 7"), "{text}");
        assert!(text.contains("kafka_producer_metrics_request_latency_avg_seconds{client_id=\"p\"} 0.0025"), "{text}");
        // An empty histogram still has its buckets, all zero.
        let name = "kafka_producer_metrics_request_latency_seconds";
        assert!(text.contains(&format!("{name}_count{{client_id=\"p\"}} 0")), "{text}");
        assert!(text.contains(&format!("{name}_bucket{{le=\"+Inf\",client_id=\"p\"}} 0")), "{text}");
    }

    /// One request with `accept` (none when `None`): (Content-Type, body).
    async fn scrape(addr: SocketAddr, accept: Option<&str>) -> (String, String) {
        let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
        let accept = accept.map(|a| format!("Accept: {a}\r\n")).unwrap_or_default();
        s.write_all(format!("GET /metrics HTTP/1.1\r\nHost: x\r\n{accept}\r\n").as_bytes()).await.unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).await.unwrap();
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK") && head.contains("\r\nVary: Accept"), "{head}");
        let ctype = head.lines().find_map(|l| l.strip_prefix("Content-Type: ")).unwrap().to_string();
        (ctype, body.to_string())
    }

    #[tokio::test]
    async fn the_endpoint_answers_the_format_the_scraper_asks_for() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector::new("c", snapshot)));
        let endpoint = serve("127.0.0.1:0", Arc::new(registry)).await.unwrap();
        let counter = "kafka_consumer_share_fetch_manager_metrics_records_consumed";
        let prometheus =
            "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                          text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let (ctype, body) = scrape(endpoint.local_addr(), Some(prometheus)).await;
        assert_eq!(ctype, "application/openmetrics-text; version=1.0.0; charset=utf-8");
        assert!(body.ends_with("# EOF\n"), "{body}");
        assert!(body.contains(&format!("# TYPE {counter} counter\n{counter}_total{{client_id=\"c\"}} 42")), "{body}");
        assert!(body.contains("# UNIT "), "{body}");
        for accept in
            [None, Some("text/plain;version=0.0.4"), Some("*/*"), Some("application/openmetrics-text;q=0,*/*")]
        {
            let (ctype, body) = scrape(endpoint.local_addr(), accept).await;
            assert_eq!(ctype, "text/plain; version=0.0.4; charset=utf-8", "{accept:?}");
            assert!(!body.contains("# EOF") && !body.contains("# UNIT"), "{body}");
            assert!(
                body.contains(&format!("# TYPE {counter}_total counter\n{counter}_total{{client_id=\"c\"}} 42")),
                "{body}"
            );
            assert!(body.contains(&format!("# HELP {counter}_total ")), "{body}");
            // The histogram the same in both.
            assert!(body.contains("fetch_latency_seconds_bucket{le=\"+Inf\",client_id=\"c\"} 4\n"), "{body}");
        }
    }

    #[test]
    fn the_accept_header_is_read_whatever_its_case_and_count() {
        let head = "GET /metrics HTTP/1.1\r\nHost: x\r\naccept: text/plain;q=0.2\r\nACCEPT: application/openmetrics-text\r\n\r\n";
        let accept = accept_header(head);
        assert_eq!(accept.as_deref(), Some("text/plain;q=0.2,application/openmetrics-text"));
        assert_eq!(Format::negotiate(accept.as_deref()), Format::OpenMetrics);
        assert_eq!(accept_header("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"), None);
    }

    #[tokio::test]
    async fn the_endpoint_serves_get_metrics_only() {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector::new("c", snapshot)));
        let endpoint = serve("127.0.0.1:0", Arc::new(registry)).await.unwrap();
        for (req, want) in
            [("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", "200 OK"), ("POST /metrics HTTP/1.1\r\n\r\n", "405")]
        {
            let mut s = tokio::net::TcpStream::connect(endpoint.local_addr()).await.unwrap();
            s.write_all(req.as_bytes()).await.unwrap();
            let mut out = String::new();
            s.read_to_string(&mut out).await.unwrap();
            assert!(out.starts_with("HTTP/1.1 ") && out.contains(want), "{out}");
            if want == "200 OK" {
                assert!(out.contains("records_consumed_total{client_id=\"c\"} 42"), "{out}");
            }
        }
    }
}
