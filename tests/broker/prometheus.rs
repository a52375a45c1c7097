//! A consumer's and a producer's metrics scraped from the Prometheus endpoint
//! (`kafka_share::prometheus`) against the real broker: Java's names, the client's label,
//! values that move, latency histograms with their buckets. And, offline, the endpoint on an
//! address of the application's choosing with the application's own metrics beside ours.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::prometheus::client::metrics::counter::Counter;
use kafka_share::prometheus::{serve, Registry, SnapshotCollector};
use kafka_share::ShareConsumer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the endpoint");
    // OpenMetrics, as Prometheus asks for it: the checks below read its `# UNIT` lines.
    s.write_all(
        b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: application/openmetrics-text;version=1.0.0\r\n\r\n",
    )
    .await
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text
}

fn value(text: &str, name: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with('{'))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {text}"))
}

/// A histogram's `_count`, `_sum` and `+Inf` bucket, checked to be one histogram.
fn histogram(text: &str, name: &str) -> (f64, f64) {
    let count = value(text, &format!("{name}_count"));
    let sum = value(text, &format!("{name}_sum"));
    let inf = text
        .lines()
        .find(|l| l.starts_with(&format!("{name}_bucket{{le=\"+Inf\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or_else(|| panic!("no +Inf bucket of {name} in {text}"));
    assert_eq!(inf, count, "the +Inf bucket of {name} is its count: {text}");
    assert!(text.contains(&format!("# TYPE {name} histogram")), "{text}");
    (count, sum)
}

/// Every family of a scrape says its unit: a `# UNIT` line and the unit at the end of its
/// name (seconds, bytes, ratio), or HELP saying it is per second, a count, or in seconds
/// under Java's own name (`last-poll-seconds-ago`); none is left undeclared.
fn every_series_says_its_unit(text: &str) {
    let body = text.split("\r\n\r\n").nth(1).unwrap_or(text);
    let mut families = 0;
    for help in body.lines().filter(|l| l.starts_with("# HELP kafka_")) {
        let name = help["# HELP ".len()..].split(' ').next().unwrap_or("");
        let unit = body.lines().find_map(|l| l.strip_prefix(&format!("# UNIT {name} "))).map(str::to_string);
        match unit {
            Some(u) => assert!(name.ends_with(&format!("_{u}")), "{name} does not end with its unit {u}"),
            None => assert!(
                help.ends_with(", per second")
                    || help.ends_with(", a count (unitless)")
                    || help.ends_with(", in seconds"),
                "{help}: no unit"
            ),
        }
        families += 1;
    }
    assert!(families > 10, "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consumers_metrics_are_scraped_under_javas_names() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "prom", 2).await;
    let group = common::new_group(&admin, "g-prom", None).await;
    common::produce(&bs, &topic, 2, 50, "v").await;
    let consumer = Arc::new(ShareConsumer::connect(common::consumer_config(&bs, &group)).await.expect("consumer"));
    let mut registry = Registry::default();
    let c = consumer.clone();
    registry.register_collector(Box::new(SnapshotCollector::new("prom-test", move || c.metrics())));
    let endpoint = serve("127.0.0.1:0", Arc::new(registry)).await.expect("endpoint");

    let before = scrape(endpoint.local_addr()).await;
    let name = "kafka_consumer_share_fetch_manager_metrics_records_consumed_total";
    assert_eq!(value(&before, name), 0.0);
    assert!(before.contains(&format!("{name}{{client_id=\"prom-test\"}}")), "{before}");
    consumer.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&consumer, 50, Duration::from_secs(60), |_| {}).await;
    assert_eq!(got.len(), 50);
    let after = scrape(endpoint.local_addr()).await;
    assert_eq!(value(&after, name), 50.0, "{after}");
    let max = value(&after, "kafka_consumer_share_fetch_manager_metrics_fetch_latency_max_seconds");
    assert!(max > 0.0, "{after}");
    // Every ShareFetch that delivered the records is in the histogram, and in fetch-total:
    // both come from one snapshot.
    let (fetches, seconds) = histogram(&after, "kafka_consumer_share_fetch_manager_metrics_fetch_latency_seconds");
    assert!(fetches > 0.0 && seconds > 0.0, "{after}");
    // Java's gauge in milliseconds is exported in seconds: the longest fetch is at most the
    // sum of them all (in milliseconds it would be 1000 times more).
    // With one answer the two are the same duration, read through two roundings (ns -> ms ->
    // s for the gauge, ns -> s for the sum): equal to within a few units in the last place.
    assert!(max <= seconds * (1.0 + 1e-12), "fetch-latency-max {max} s, sum {seconds} s: {after}");
    every_series_says_its_unit(&after);
    assert_eq!(fetches, value(&after, "kafka_consumer_share_fetch_manager_metrics_fetch_total"), "{after}");
    consumer.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_producers_metrics_are_scraped_under_javas_names() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "prom-producer", 3).await;
    let producer = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    let mut registry = Registry::default();
    let p = producer.clone();
    registry.register_collector(Box::new(SnapshotCollector::new("prom-producer", move || p.metrics())));
    let endpoint = serve("127.0.0.1:0", Arc::new(registry)).await.expect("endpoint");

    let sent_total = "kafka_producer_metrics_record_send_total";
    let before = scrape(endpoint.local_addr()).await;
    assert_eq!(value(&before, sent_total), 0.0, "{before}");
    assert!(before.contains(&format!("{sent_total}{{client_id=\"prom-producer\"}}")), "{before}");

    const N: usize = 120;
    let mut deliveries = Vec::with_capacity(N);
    for i in 0..N {
        let record = ProducerRecord::new(&topic, format!("v-{i}")).key(format!("k{i}"));
        deliveries.push(producer.send(record).await.expect("send"));
    }
    for d in deliveries {
        d.await.expect("delivered");
    }
    // Every record is answered: each request's metrics were counted before its answer reached
    // the futures.
    let after = scrape(endpoint.local_addr()).await;
    let retried = value(&after, "kafka_producer_metrics_record_retry_total");
    // A retried batch is sent again (as Java counts it); on a healthy broker there is none.
    assert_eq!(value(&after, sent_total), N as f64 + retried, "{after}");
    assert_eq!(value(&after, "kafka_producer_metrics_record_error_total"), 0.0, "{after}");
    let requests = value(&after, "kafka_producer_metrics_request_total");
    assert!(requests >= 1.0, "{after}");
    assert_eq!(value(&after, "kafka_producer_metrics_requests_in_flight"), 0.0, "{after}");
    let max = value(&after, "kafka_producer_metrics_request_latency_max_seconds");
    assert!(max > 0.0, "{after}");
    assert!(value(&after, "kafka_producer_metrics_batch_size_avg_bytes") > 0.0, "{after}");
    let (answered, seconds) = histogram(&after, "kafka_producer_metrics_request_latency_seconds");
    assert!(answered >= 1.0 && answered <= requests && seconds > 0.0, "{after}");
    // With one answer the two are the same duration, read through two roundings (ns -> ms ->
    // s for the gauge, ns -> s for the sum): equal to within a few units in the last place.
    assert!(max <= seconds * (1.0 + 1e-12), "request-latency-max {max} s, sum {seconds} s: {after}");
    every_series_says_its_unit(&after);
    let (batches, _) = histogram(&after, "kafka_producer_metrics_record_queue_time_seconds");
    assert!(batches >= 3.0, "three partitions, a batch each at least: {after}");
    producer.close(Duration::from_secs(10)).await.unwrap();
}

/// A registry with one counter of the application's, made with the re-exported
/// `prometheus-client` (the test crate has no dependency of its own on that crate).
fn app_registry() -> (Registry, Counter) {
    let mut registry = Registry::default();
    let rejected: Counter = Counter::default();
    registry.register("orders_rejected", "Orders rejected as invalid", rejected.clone());
    (registry, rejected)
}

#[tokio::test]
async fn the_endpoint_listens_on_the_address_given_with_the_apps_metrics_beside_ours() {
    // 127.0.0.2 is loopback on Linux too, but not the address serve used to pin: the
    // endpoint must be where it was asked to be, and nowhere else.
    let producer = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let (mut registry, rejected) = app_registry();
    let p = producer.clone();
    registry.register_collector(Box::new(SnapshotCollector::new("app", move || p.metrics())));
    let endpoint = serve("127.0.0.2:0", Arc::new(registry)).await.expect("endpoint on 127.0.0.2");
    let addr = endpoint.local_addr();
    assert_eq!(addr.ip().to_string(), "127.0.0.2");
    rejected.inc_by(2);
    let text = scrape(addr).await;
    assert!(text.contains("orders_rejected_total 2"), "{text}");
    assert!(text.contains("kafka_producer_metrics_record_send_total{client_id=\"app\"} 0"), "{text}");
    let elsewhere = std::net::SocketAddr::from(([127, 0, 0, 1], addr.port()));
    if let Ok(mut s) = tokio::net::TcpStream::connect(elsewhere).await {
        // Something else may hold that port on 127.0.0.1; it must not be our endpoint.
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n\r\n").await;
        let mut other = String::new();
        let _ = s.read_to_string(&mut other).await;
        assert!(!other.contains("orders_rejected_total"), "served on 127.0.0.1 too: {other}");
    }
    producer.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn the_endpoint_on_every_interface_is_scraped_through_any_of_them() {
    let (registry, _) = app_registry();
    let endpoint = serve(("0.0.0.0", 0), Arc::new(registry)).await.expect("endpoint on 0.0.0.0");
    assert!(endpoint.local_addr().ip().is_unspecified(), "{}", endpoint.local_addr());
    for ip in [[127, 0, 0, 1], [127, 0, 0, 3]] {
        let text = scrape(std::net::SocketAddr::from((ip, endpoint.local_addr().port()))).await;
        assert!(text.contains("orders_rejected_total 0"), "{text}");
    }
}

#[tokio::test]
async fn an_address_that_cannot_be_bound_is_a_config_error_naming_it() {
    // 192.0.2.1 (TEST-NET-1) is on no interface of this machine.
    let err = serve("192.0.2.1:0", Arc::new(Registry::default())).await.expect_err("not this machine's address");
    assert!(matches!(err, kafka_share::Error::Config { .. }), "{err:?}");
    assert!(err.to_string().contains("192.0.2.1:0"), "{err}");
}
