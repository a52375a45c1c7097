//! The wire layer against a real broker: versions, features, metadata, coordinators.

use crate::common;

use kafka_share::cluster::TrafficClass;

#[tokio::test]
async fn negotiates_versions_and_sees_share_feature() {
    let cluster = common::cluster().await;
    let conn = cluster.any_broker().await.unwrap();
    conn.versions.require_share_groups().expect("share.version must be enabled by scripts/kafka");
    let v = conn.versions.pick(78, 1, 2).unwrap();
    if common::broker_has_v2() {
        assert_eq!(v, 2, "ShareFetch v2 on 4.2+");
    } else {
        assert_eq!(v, 1, "ShareFetch v1 on 4.1");
    }
    assert!(conn.versions.pick(76, 1, 1).is_ok());
}

#[tokio::test]
async fn metadata_maps_names_ids_and_leaders() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "meta", 3).await;
    let cluster = admin.cluster();
    cluster.refresh_metadata(std::slice::from_ref(&topic)).await.unwrap();
    let md = cluster.metadata();
    let t = md.topics.get(&topic).expect("topic in metadata");
    assert_eq!(t.partitions.len(), 3);
    assert!(!t.id.is_nil());
    assert_eq!(md.topic_name(&t.id), Some(topic.as_str()));
    for p in &t.partitions {
        assert!(md.brokers.contains_key(&p.leader), "leader {} known", p.leader);
    }
    // A connection per traffic class to the leader.
    let leader = t.partitions[0].leader;
    let a = cluster.broker(leader, TrafficClass::Control).await.unwrap();
    let b = cluster.broker(leader, TrafficClass::Fetch).await.unwrap();
    assert_eq!(a.node_id, leader);
    assert_eq!(b.node_id, leader);
    assert!(!std::ptr::eq(&a.conn, &b.conn));
}

#[tokio::test]
async fn unknown_topic_is_an_error() {
    let cluster = common::cluster().await;
    let e = cluster.ensure_topics(&["no-such-topic-here".to_string()]).await.unwrap_err();
    assert!(e.to_string().contains("no-such-topic-here") || e.to_string().contains("UnknownTopicOrPartition"), "{e}");
}

#[tokio::test]
async fn finds_group_coordinator() {
    let cluster = common::cluster().await;
    let node = cluster.find_group_coordinator(&common::unique("g")).await.unwrap();
    assert!(cluster.metadata().brokers.contains_key(&node));
}

#[tokio::test]
async fn unreachable_bootstrap_is_a_clear_error() {
    let cfg = kafka_share::cluster::ClusterConfig {
        connect_timeout: std::time::Duration::from_millis(500),
        ..kafka_share::cluster::ClusterConfig::new("127.0.0.1:1")
    };
    let e = kafka_share::cluster::Cluster::connect(cfg).await.unwrap_err();
    assert!(e.to_string().contains("127.0.0.1:1"), "{e}");
}
