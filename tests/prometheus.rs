//! A consumer's metrics scraped from the Prometheus endpoint (`kafka_share::prometheus`)
//! against the real broker: Java's names, the client's label, values that move.

mod common;

use std::sync::Arc;
use std::time::Duration;

use kafka_share::prometheus::{serve, Registry, SnapshotCollector};
use kafka_share::ShareConsumer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn scrape(addr: std::net::SocketAddr) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect to the endpoint");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n").await.unwrap();
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
    let endpoint = serve(0, Arc::new(registry)).await.expect("endpoint");

    let before = scrape(endpoint.local_addr()).await;
    let name = "kafka_consumer_share_fetch_manager_metrics_records_consumed_total";
    assert_eq!(value(&before, name), 0.0);
    assert!(before.contains(&format!("{name}{{client_id=\"prom-test\"}}")), "{before}");
    consumer.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&consumer, 50, Duration::from_secs(60), |_| {}).await;
    assert_eq!(got.len(), 50);
    let after = scrape(endpoint.local_addr()).await;
    assert_eq!(value(&after, name), 50.0, "{after}");
    assert!(value(&after, "kafka_consumer_share_fetch_manager_metrics_fetch_latency_max") > 0.0, "{after}");
    consumer.close(Duration::from_secs(10)).await.unwrap();
}
