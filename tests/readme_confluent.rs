//! The Confluent Cloud client file shown in README.md, with only the bootstrap address and the
//! credentials changed, reaches the local broker's SASL_SSL listener (PLAIN): admin, producer
//! and share consumer all work from it. The broker's test CA is trusted through
//! `SSL_CERT_FILE`, the variable OpenSSL-based clients read, so the file needs no trust store
//! line (Confluent Cloud's certificates are publicly signed).
//!
//! One test in its own binary: it sets `SSL_CERT_FILE` for the whole process before anything
//! else runs.
#![cfg(feature = "tls")]

mod common;

use std::time::Duration;

use kafka_share::admin::Admin;
use kafka_share::config::Properties;
use kafka_share::producer::{Producer, ProducerRecord};
use kafka_share::ShareConsumer;

/// The ```properties block after the README's confluent-cloud-properties marker.
fn readme_confluent_file() -> String {
    let readme = include_str!("../README.md");
    let after = readme.split("<!-- confluent-cloud-properties").nth(1).expect("the README marker");
    let block = after.split("```properties\n").nth(1).expect("a properties block after the marker");
    block.split("\n```").next().expect("the end of the block").to_string()
}

#[test]
fn readme_confluent_cloud_file_reaches_the_local_sasl_ssl_listener() {
    let local = common::secured::props("sasl_ssl-plain");
    let bootstrap = local.get("bootstrap.servers").expect("bootstrap").to_string();
    std::env::set_var("SSL_CERT_FILE", common::secured::file("ca.pem"));

    let text = readme_confluent_file();
    assert!(text.contains("pkc-xxxxx.us-east-1.aws.confluent.cloud:9092"), "{text}");
    let text = text
        .replace("pkc-xxxxx.us-east-1.aws.confluent.cloud:9092", &bootstrap)
        .replace("{{ CLUSTER_API_KEY }}", "alice")
        .replace("{{ CLUSTER_API_SECRET }}", "alice-secret");
    let props = Properties::parse(&text).expect("the README file parses");

    tokio::runtime::Runtime::new().expect("runtime").block_on(async {
        let admin = Admin::from_properties(&props).await.expect("admin from the README file");
        let topic = common::new_topic(&admin, "confluent", 1).await;
        let group = common::new_group(&admin, "confluent", None).await;
        let producer = Producer::from_properties(&props).await.expect("producer from the README file");
        for i in 0..5 {
            producer.send_and_wait(ProducerRecord::new(&topic, format!("r{i}"))).await.expect("send");
        }
        producer.close(Duration::from_secs(10)).await.expect("producer close");
        let mut cp = props.clone();
        cp.set("group.id", &group);
        let consumer = ShareConsumer::from_properties(&cp).await.expect("consumer from the README file");
        consumer.subscribe([&topic]).expect("subscribe");
        let got = common::poll_until(&consumer, 5, Duration::from_secs(60), |_| {}).await;
        assert_eq!(got.len(), 5);
        consumer.close(Duration::from_secs(10)).await.expect("close");
    });
}
