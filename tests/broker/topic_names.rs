//! Topic names against a real broker: the client refuses what Kafka refuses, before sending
//! anything; the broker, asked directly, refuses the same names with the same typed error;
//! a legal name that does not exist yet is no error (its records come once it is created).

use crate::common;

use std::time::{Duration, Instant};

use kafka_share::{Error, ErrorCode, ShareConsumer};

#[tokio::test]
async fn subscribe_refuses_illegal_names_with_a_typed_error() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "names-good", 1).await;
    common::produce(&bs, &topic, 1, 3, "v").await;
    let group = common::new_group(&admin, "g-names", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let long = "x".repeat(250);
    for bad in ["topic abc!", ".", "..", long.as_str()] {
        match c.subscribe([topic.clone(), bad.to_string()]) {
            Err(e @ Error::InvalidTopic { .. }) => {
                assert!(e.to_string().contains(&format!("{bad:?}")), "{e}");
                assert_eq!(e.code(), Some(ErrorCode::INVALID_TOPIC_EXCEPTION));
            }
            other => panic!("{bad:?}: expected InvalidTopic, got {other:?}"),
        }
    }
    // The refused calls left the subscription alone: the good topic is consumed.
    let got = common::poll_until(&c, 3, Duration::from_secs(60), |_| {}).await;
    assert_eq!(got.len(), 3);
    c.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn the_broker_refuses_the_same_names_with_the_same_error() {
    // Bypasses the client's check (the cluster layer sends any name) to show the broker
    // answers INVALID_TOPIC_EXCEPTION for what `subscribe` refuses, and that the answer
    // becomes the same typed error.
    let cluster = common::cluster().await;
    for bad in ["topic abc!", &"x".repeat(250)] {
        match cluster.ensure_topics(&[bad.to_string()]).await {
            Err(Error::InvalidTopic { topic, .. }) => assert_eq!(topic, bad),
            other => panic!("{bad:?}: expected InvalidTopic from the broker, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_topic_created_after_subscribe_is_consumed_without_errors() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let group = common::new_group(&admin, "g-later", None).await;
    let topic = common::unique("names-later");
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    // Polls before the topic exists return nothing, and no error.
    for _ in 0..3 {
        assert!(c.poll(Duration::from_millis(300)).await.unwrap().is_empty());
    }
    admin.create_topic(&topic, 1).await.expect("create topic");
    common::produce(&bs, &topic, 1, 2, "v").await;
    let end = Instant::now() + Duration::from_secs(90);
    let mut got = Vec::new();
    while got.len() < 2 && Instant::now() < end {
        got.extend(c.poll(Duration::from_millis(500)).await.expect("no error while the topic appears"));
    }
    assert_eq!(got.len(), 2, "the records of the new topic");
    c.close(Duration::from_secs(10)).await.unwrap();
}
