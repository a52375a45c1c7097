//! Group configs against the real broker: set, describe, delete, refused values.

use crate::common;

use kafka_share::admin::ConfigSource;
use kafka_share::Error;

#[tokio::test]
async fn set_describe_and_delete_group_configs() {
    let admin = common::admin().await;
    let group = common::unique("cfg");
    admin.set_share_auto_offset_reset(&group, "earliest").await.expect("set earliest");
    admin
        .set_group_config(&group, "share.record.lock.duration.ms", "20000")
        .await
        .expect("set lock duration");
    let cfg = admin.describe_group_configs(&group).await.expect("describe");
    let get = |k: &str| cfg.iter().find(|e| e.name == k).unwrap_or_else(|| panic!("{k} missing in {cfg:?}")).clone();
    let reset = get("share.auto.offset.reset");
    assert_eq!(reset.value.as_deref(), Some("earliest"));
    assert_eq!(reset.source, ConfigSource::Group);
    assert_eq!(get("share.record.lock.duration.ms").value.as_deref(), Some("20000"));
    // A default value is listed too, from the broker.
    assert_ne!(get("share.isolation.level").source, ConfigSource::Group);

    admin
        .alter_group_configs(
            &group,
            &[("share.record.lock.duration.ms", None), ("share.isolation.level", Some("read_committed"))],
        )
        .await
        .expect("delete + set");
    let cfg = admin.describe_group_configs(&group).await.unwrap();
    let lock = cfg.iter().find(|e| e.name == "share.record.lock.duration.ms").unwrap();
    assert_ne!(lock.source, ConfigSource::Group, "deleted key falls back: {lock:?}");
    let iso = cfg.iter().find(|e| e.name == "share.isolation.level").unwrap();
    assert_eq!(iso.value.as_deref(), Some("read_committed"));
}

#[tokio::test]
async fn bad_values_are_refused_locally_and_by_the_broker() {
    let admin = common::admin().await;
    let group = common::unique("cfg-bad");
    let e = admin.set_share_auto_offset_reset(&group, "none").await.unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("latest | earliest | by_duration"), "{e}");
    let e = admin.set_group_config(&group, "share.isolation.level", "dirty").await.unwrap_err();
    assert!(e.to_string().contains("read_uncommitted | read_committed"), "{e}");
    // In range locally, out of the broker's bounds (15000..=60000 by default): the broker refuses.
    let e = admin.set_group_config(&group, "share.record.lock.duration.ms", "1000000").await.unwrap_err();
    assert!(matches!(e, Error::Broker { .. }), "{e:?}");
    assert!(e.to_string().contains("share.record.lock.duration.ms"), "the broker's message is kept: {e}");
    // Nothing was set.
    let cfg = admin.describe_group_configs(&group).await.unwrap();
    assert!(cfg.iter().all(|c| c.source != ConfigSource::Group), "{cfg:?}");
}

/// The broker's dead-letter queue (Kafka 4.4): the admin sets it up (the topic with
/// `errors.deadletterqueue.group.enable=true`, the group pointed at it), a REJECTed record
/// lands there with the broker's `__dlq.errors.*` headers, an ACCEPTed one does not. Older
/// brokers refuse with a typed error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_brokers_dead_letter_queue_takes_rejected_records() {
    use kafka_share::admin::{DeadLetterQueue, DLQ_TOPIC_ENABLE_KEY};
    use kafka_share::consumer::{AcknowledgeType, AcknowledgementMode, ShareConsumer};
    use std::time::Duration;

    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "dlq-src", 1).await;
    let group = common::new_group(&admin, "g-dlq", None).await;
    let dlq = format!("dlq.{}", common::unique("admin"));
    let enabled = admin.enable_share_dead_letter_queue(&group, &DeadLetterQueue::new(&dlq)).await;
    if common::kafka_version() < (4, 4) {
        assert!(matches!(&enabled, Err(Error::Unsupported { needs: "Kafka 4.4+", .. })), "{enabled:?}");
        return;
    }
    enabled.expect("enable the dead-letter queue");
    // A name without the broker's prefix would be ignored by the broker: refused here.
    let e = admin.enable_share_dead_letter_queue(&group, &DeadLetterQueue::new("no-prefix")).await.unwrap_err();
    assert!(matches!(&e, Error::Config { .. }) && e.to_string().contains("\"dlq.\""), "{e}");
    let settings = admin.share_group_settings(&group).await.expect("settings");
    assert_eq!(settings.dead_letter_topic.as_deref(), Some(dlq.as_str()));
    assert_eq!(settings.dead_letter_copy_record, Some(true));
    let topic_cfg = admin.describe_topic_configs(&dlq).await.expect("topic configs");
    let flag = topic_cfg.iter().find(|e| e.name == DLQ_TOPIC_ENABLE_KEY).and_then(|e| e.value.clone());
    assert_eq!(flag.as_deref(), Some("true"));

    common::produce(&bs, &topic, 1, 3, "v").await;
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(cfg).await.expect("consumer");
    consumer.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&consumer, 3, Duration::from_secs(60), |r| {
        let t = if r.offset == 1 { AcknowledgeType::Reject } else { AcknowledgeType::Accept };
        consumer.acknowledge_with(r, t).unwrap();
    })
    .await;
    assert_eq!(got.len(), 3);
    consumer
        .commit_sync(Duration::from_secs(30))
        .await
        .expect("commit")
        .into_result()
        .expect("acks applied");
    consumer.close(Duration::from_secs(10)).await.unwrap();

    let reader_group = common::new_group(&admin, "g-dlq-read", None).await;
    let reader = ShareConsumer::connect(common::consumer_config(&bs, &reader_group)).await.expect("reader");
    reader.subscribe([dlq.clone()]).unwrap();
    let dead = common::poll_until(&reader, 1, Duration::from_secs(60), |_| {}).await;
    // Anything more would come within a poll or two: look once more.
    let more = reader.poll(Duration::from_secs(2)).await.expect("poll");
    reader.close(Duration::from_secs(10)).await.unwrap();
    assert_eq!(dead.len() + more.len(), 1, "only the rejected record: {dead:?} {more:?}");
    let r = &dead[0];
    assert_eq!(r.value_str(), Some("v-1"), "the record's value is copied");
    let header = |k: &str| {
        r.headers
            .iter()
            .find(|h| h.key.as_ref() == k.as_bytes())
            .and_then(|h| h.value.as_ref())
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    assert_eq!(header("__dlq.errors.topic").as_deref(), Some(topic.as_str()));
    assert_eq!(header("__dlq.errors.offset").as_deref(), Some("1"));
    assert_eq!(header("__dlq.errors.group").as_deref(), Some(group.as_str()));

    admin.disable_share_dead_letter_queue(&group).await.expect("disable");
    assert_eq!(admin.share_group_settings(&group).await.unwrap().dead_letter_topic, None);
}
