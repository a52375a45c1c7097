//! Listing and describing topics and describing the cluster, and listing a partition's
//! offsets, against the real single-node broker (`scripts/kafka up`).

use crate::common;

use kafka_share::admin::{ListedOffset, NewTopic, OffsetSpec, TopicPartition};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::Error;

#[tokio::test]
async fn describe_cluster_names_the_broker_we_reach() {
    let admin = common::admin().await;
    let cluster = admin.describe_cluster().await.expect("describe cluster");
    assert!(!cluster.cluster_id.is_empty(), "{cluster:?}");
    assert_eq!(cluster.brokers.len(), 1, "a single-node broker: {cluster:?}");
    let broker = &cluster.brokers[0];
    // The PLAINTEXT listener advertises itself as the address we bootstrapped from.
    assert_eq!(broker.addr(), common::bootstrap(), "{cluster:?}");
    assert_eq!(broker.rack, None, "scripts/kafka sets no rack: {cluster:?}");
    // KRaft names one of the brokers; there is only one.
    assert_eq!(cluster.controller_id, Some(broker.id), "{cluster:?}");
}

#[tokio::test]
async fn describe_topics_shows_partitions_leaders_and_replicas() {
    let admin = common::admin().await;
    let node = admin.describe_cluster().await.expect("describe cluster").brokers[0].id;
    let a = common::unique("describe-a");
    let b = common::unique("describe-b");
    for r in admin.create_topics(&[NewTopic::new(&a, 3), NewTopic::new(&b, 1)]).await.expect("create") {
        r.expect("created");
    }
    let missing = common::unique("describe-missing");

    // One result per name, in the order asked; the missing topic is not created. The broker
    // answers CreateTopics once the controller has the topic; its own metadata may learn of it
    // a moment later (seen on a busy CI machine), so wait until it describes both with leaders.
    common::described_with_leaders(&admin, &a).await;
    common::described_with_leaders(&admin, &b).await;
    let described = admin.describe_topics(&[&b, &missing, &a]).await.expect("describe");
    assert_eq!(described.len(), 3);
    let tb = described[0].as_ref().expect("b described");
    assert!(matches!(&described[1], Err(Error::UnknownTopic(t)) if *t == missing), "{:?}", described[1]);
    let ta = described[2].as_ref().expect("a described");
    assert_eq!((ta.name.as_str(), tb.name.as_str()), (a.as_str(), b.as_str()));
    assert_ne!(ta.topic_id, tb.topic_id);
    assert!(!ta.internal);
    assert_eq!(ta.partitions.iter().map(|p| p.partition).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(tb.partitions.len(), 1);
    for p in &ta.partitions {
        assert_eq!(p.leader, Some(node), "{p:?}");
        assert_eq!(p.replicas, [node], "{p:?}");
        assert_eq!(p.isr, [node], "{p:?}");
        assert!(p.offline_replicas.is_empty(), "{p:?}");
        assert!(p.leader_epoch >= 0, "{p:?}");
    }
    let e = admin.describe_topic(&missing).await.unwrap_err();
    assert!(matches!(&e, Error::UnknownTopic(t) if *t == missing), "{e:?}");
    assert!(!admin.list_topics().await.expect("list").iter().any(|t| t.name == missing), "describe created {missing}");

    // The topic id is the topic's: a topic made again under its name has a new one.
    admin.delete_topics(&[&b]).await.expect("delete")[0].clone().expect("deleted");
    let recreated = async {
        loop {
            match admin.create_topics(&[NewTopic::new(&b, 1)]).await.expect("create again").pop() {
                Some(Ok(())) => return,
                // The deletion is still going on.
                Some(Err(e)) if e.is_retriable() || e.code() == Some(kafka_share::ErrorCode::TOPIC_ALREADY_EXISTS) => {
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await
                }
                other => panic!("create {b} again: {other:?}"),
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(60), recreated)
        .await
        .expect("recreated in time");
    let again = common::described_with_leaders(&admin, &b).await;
    assert_ne!(again.topic_id, tb.topic_id, "a new topic, a new id");
}

#[tokio::test]
async fn list_topics_leaves_out_internal_topics() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "list", 2).await;
    // A share group's state lives in the internal __share_group_state topic: make sure it
    // exists by consuming once.
    let group = common::new_group(&admin, "g-list", None).await;
    common::produce(&common::bootstrap(), &topic, 2, 4, "l").await;
    let consumer = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    consumer.subscribe([topic.clone()]).expect("subscribe");
    let got = common::poll_until(&consumer, 4, std::time::Duration::from_secs(60), |_| {}).await;
    assert_eq!(got.len(), 4, "records consumed");
    consumer.close(std::time::Duration::from_secs(10)).await.expect("close");

    let listed = admin.list_topics().await.expect("list");
    let all = admin.list_topics_with_internal().await.expect("list with internal");
    let described = admin.describe_topic(&topic).await.expect("describe");
    let ours = listed.iter().find(|t| t.name == topic).unwrap_or_else(|| panic!("{topic} not in {listed:?}"));
    assert_eq!(ours.topic_id, described.topic_id);
    assert!(!ours.internal);
    assert!(listed.iter().all(|t| !t.internal), "{listed:?}");
    assert!(listed.windows(2).all(|w| w[0].name < w[1].name), "sorted by name");
    let internal: Vec<&str> = all.iter().filter(|t| t.internal).map(|t| t.name.as_str()).collect();
    assert!(internal.contains(&"__share_group_state"), "{internal:?}");
    assert_eq!(all.len(), listed.len() + internal.len(), "the same listing plus the internal topics");
}

#[tokio::test]
async fn list_offsets_finds_each_spec_as_javas_offset_spec() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "list-offsets", 2).await;
    // Three records on partition 0, out of timestamp order, all recent (an old timestamp
    // would put the segment past retention): offsets 0, 1, 2 at now-60 s, now-20 s, now-40 s.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
    let stamps = [now - 60_000, now - 20_000, now - 40_000];
    let producer = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    for ts in stamps {
        let sent = producer.send(ProducerRecord::new(&topic, "v").partition(0).timestamp(ts)).await.expect("send");
        sent.await.expect("delivered");
    }
    producer.close(std::time::Duration::from_secs(10)).await.expect("producer close");
    let (p0, p1) = (TopicPartition::new(&topic, 0), TopicPartition::new(&topic, 1));
    let tps = [p0.clone(), p1.clone()];
    let at = |spec| {
        let admin = admin.clone();
        let tps = tps.clone();
        async move { admin.list_offsets(&tps, spec).await.unwrap_or_else(|e| panic!("list_offsets {spec:?}: {e}")) }
    };
    let offset = |l: &ListedOffset| l.offset;

    let earliest = at(OffsetSpec::Earliest).await;
    assert_eq!((offset(&earliest[&p0]), offset(&earliest[&p1])), (Some(0), Some(0)), "{earliest:?}");
    let latest = at(OffsetSpec::Latest).await;
    assert_eq!((offset(&latest[&p0]), offset(&latest[&p1])), (Some(3), Some(0)), "{latest:?}");
    assert_eq!(latest[&p0].timestamp, None, "latest names no record: {latest:?}");

    // The first offset whose timestamp is at or after: offset 1 for any time in (now-60 s,
    // now-20 s], though offset 2's timestamp is closer; none after the newest.
    let after_first = at(OffsetSpec::Timestamp(stamps[0] + 1)).await;
    assert_eq!((after_first[&p0].offset, after_first[&p0].timestamp), (Some(1), Some(stamps[1])), "{after_first:?}");
    let exact = at(OffsetSpec::Timestamp(stamps[0])).await;
    assert_eq!(exact[&p0].offset, Some(0), "{exact:?}");
    let future = at(OffsetSpec::Timestamp(now + 3_600_000)).await;
    assert_eq!((future[&p0].offset, future[&p1].offset), (None, None), "{future:?}");

    let newest = at(OffsetSpec::MaxTimestamp).await;
    assert_eq!((newest[&p0].offset, newest[&p0].timestamp), (Some(1), Some(stamps[1])), "{newest:?}");
    assert!(newest[&p0].leader_epoch.is_some_and(|e| e >= 0), "{newest:?}");
    assert_eq!(newest[&p1].offset, None, "an empty partition has no newest record: {newest:?}");

    let e = admin.list_offsets(&tps, OffsetSpec::Timestamp(-1)).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "a negative timestamp is refused, not sent as a sentinel: {e:?}");
}
