//! The one naming convention for connecting and closing, against the real broker:
//! `connect_to(bootstrap ..)` on the admin, the producer and the consumer; `close` taking a
//! timeout or `None` (30 s) on the producer and the consumer; `Admin::close`.

use crate::common;

use std::time::Duration;

use kafka_share::admin::Admin;
use kafka_share::{Producer, ProducerRecord, ShareConsumer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_client_connects_to_a_bootstrap_string_and_closes_alike() {
    let bs = common::bootstrap();
    let admin = Admin::connect_to(&bs).await.expect("admin");
    let topic = common::new_topic(&admin, "connect-to", 1).await;
    let group = common::new_group(&admin, "g-connect-to", None).await;

    let producer = Producer::connect_to(&bs).await.expect("producer");
    producer.send_and_wait(ProducerRecord::new(topic.as_str(), "v")).await.expect("send");
    producer.close(None).await.expect("close with the default timeout");

    let consumer = ShareConsumer::connect_to(&bs, &group).await.expect("consumer");
    consumer.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&consumer, 1, Duration::from_secs(60), |_| {}).await;
    assert_eq!(got.len(), 1);
    consumer.close(Duration::from_secs(10)).await.expect("close");

    // Closing the admin drops its connections; a later call dials again.
    admin.close();
    let listed = admin.list_topics().await.expect("list after close");
    assert!(listed.iter().any(|t| t.name == topic), "{listed:?}");
}
