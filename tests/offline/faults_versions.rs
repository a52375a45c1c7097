//! Fault injection: what the cluster supports (share.version, v1-only share RPCs).

use crate::fake_broker;

use std::time::Duration;

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

use fake_broker::{accept_and_commit, offsets, poll_until, FakeCluster, FakeConfig};
use kafka_share::consumer::{AcknowledgementMode, AcquireMode};
use kafka_share::{AcknowledgeType, Error, ShareConsumer};

#[tokio::test]
async fn connect_fails_naming_share_version_when_the_feature_is_off() {
    let fake = FakeCluster::start(FakeConfig::default().share_version(0)).await;
    let err = ShareConsumer::connect(fake.consumer_config("g")).await.expect_err("share.version=0 must refuse");
    assert!(matches!(err, Error::FeatureDisabled { .. }), "{err:?}");
    assert!(err.to_string().contains("share.version"), "{err}");
    assert_eq!(fake.count(|l| l.is_share()), 0, "nothing share-related was sent");
}

#[tokio::test]
async fn renew_on_a_v1_only_broker_is_refused_locally_and_nothing_is_sent() {
    let fake = FakeCluster::start(FakeConfig::default().max_share_version(1).records(5)).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_until(&c, 5, T).await;
    assert_eq!(got.len(), 5);
    let err = c.acknowledge_with(&got[0], AcknowledgeType::Renew).expect_err("RENEW needs v2");
    assert!(matches!(err, Error::RenewUnsupported), "{err:?}");
    assert!(err.to_string().contains("RENEW"), "{err}");
    // The record is still ours to acknowledge normally.
    accept_and_commit(&c, &got, T).await;
    c.close(T).await.unwrap();
    let log = fake.share_log();
    assert!(log.iter().all(|l| l.version == 1), "only v1 share requests on a v1 broker");
    assert!(log.iter().flat_map(|l| l.acks()).all(|a| a.kind != 4), "no Renew on the wire: {}", fake.dump());
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    fake.assert_clean();
}

#[tokio::test]
async fn renew_on_a_v2_broker_goes_by_share_acknowledge_with_is_renew_ack() {
    let fake = FakeCluster::single(1, 3).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let got = poll_until(&c, 3, T).await;
    assert_eq!(got.len(), 3);
    c.acknowledge_with(&got[0], AcknowledgeType::Renew).unwrap();
    c.acknowledge(&got[1]).unwrap();
    c.acknowledge(&got[2]).unwrap();
    c.commit_sync(T).await.unwrap();
    let log = fake.share_log();
    let renews: Vec<_> = log.iter().filter(|l| l.acks().iter().any(|a| a.kind == 4)).collect();
    assert_eq!(renews.len(), 1, "{}", fake.dump());
    match &renews[0].req {
        fake_broker::Req::Ack(r) => assert!(r.is_renew_ack && renews[0].version == 2),
        other => panic!("renew went by {other:?}"),
    }
    // Still held, and (as in Java 4.4) handed out again by the next poll: accept it there.
    let back = poll_until(&c, 1, T).await;
    assert_eq!(offsets(&back), vec![(0, 0)], "{}", fake.dump());
    c.acknowledge(&back[0]).unwrap();
    c.commit_sync(T).await.unwrap();
    c.close(T).await.unwrap();
    assert_eq!(fake.done(0), vec![0, 1, 2]);
    fake.assert_clean();
}

#[tokio::test]
async fn record_limit_mode_on_a_v1_only_broker_fails_at_connect() {
    let fake = FakeCluster::start(FakeConfig::default().max_share_version(1)).await;
    let cfg = fake.consumer_config("g").acquire_mode(AcquireMode::RecordLimit);
    let err = ShareConsumer::connect(cfg).await.expect_err("record_limit needs v2");
    assert!(matches!(err, Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: None }), "{err:?}");
    assert!(err.to_string().contains("share.acquire.mode record_limit"), "{err}");
    assert_eq!(fake.count(|l| l.is_share()), 0);
}
