//! Pausing partitions and acknowledging a whole poll at once, against a real broker.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, TopicPartition};
use kafka_share::{AcknowledgeType, ShareConsumer};

const T: Duration = Duration::from_secs(10);

/// A paused partition is not fetched (nothing of it is acquired, so nothing of it burns a
/// delivery attempt); resumed, its records come at delivery count 1.
#[tokio::test]
async fn a_paused_partition_is_not_fetched_until_resumed() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "pause", 2).await;
    common::produce(&bs, &topic, 2, 40, "v").await;
    let group = common::new_group(&admin, "g-pause", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();
    let p1 = TopicPartition::new(&topic, 1);
    c.pause([p1.clone()]).unwrap();
    assert_eq!(c.paused(), BTreeSet::from([p1.clone()]));
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 20, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), 20);
    assert!(got.iter().all(|r| r.partition == 0), "only the unpaused partition");
    // Partition 0 is drained; partition 1 stays quiet while paused (polls return nothing).
    for _ in 0..3 {
        let more = c.poll(Duration::from_millis(500)).await.unwrap();
        assert!(
            more.is_empty(),
            "records of a paused partition: {:?}",
            more.iter().map(|r| (r.partition, r.offset)).collect::<Vec<_>>()
        );
    }
    c.resume([p1.clone()]).unwrap();
    assert!(c.paused().is_empty());
    let rest = common::poll_until(&c, 20, Duration::from_secs(30), |_| {}).await;
    assert_eq!(rest.len(), 20);
    assert!(rest.iter().all(|r| r.partition == 1 && r.delivery_count == 1), "never acquired while paused");
    c.commit_sync(T).await.unwrap();
    c.close(T).await.unwrap();
}

/// acknowledge_all RELEASEs what is left of a poll in one call (e.g. on shutdown); the
/// records come again at delivery count 2, those acknowledged before keep their ACCEPT.
#[tokio::test]
async fn acknowledge_all_releases_the_rest_of_a_poll() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "ackall", 1).await;
    common::produce(&bs, &topic, 1, 10, "v").await;
    let group = common::new_group(&admin, "g-ackall", None).await;
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = ShareConsumer::connect(cfg).await.unwrap();
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, 10, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), 10);
    c.acknowledge(&got[0]).unwrap();
    assert_eq!(c.acknowledge_all(AcknowledgeType::Release).unwrap(), 9);
    assert_eq!(c.acknowledge_all(AcknowledgeType::Release).unwrap(), 0, "nothing left");
    assert!(c.acknowledge_all(AcknowledgeType::Renew).is_err());
    let results = c.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_ok()), "{results:?}");
    let again = common::poll_until(&c, 9, Duration::from_secs(30), |r| c.acknowledge(r).unwrap()).await;
    assert_eq!(again.len(), 9);
    assert!(again.iter().all(|r| r.delivery_count == 2 && r.offset != got[0].offset));
    c.commit_sync(T).await.unwrap();
    c.close(T).await.unwrap();
}
