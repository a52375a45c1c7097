//! Per-topic Metadata errors: a subscribed topic the broker refuses is reported by poll as a
//! typed error, once, and the consumer goes on with its other topics. A topic that does not
//! exist (yet) or has no leader is no error.

use crate::fake_broker;

use std::time::{Duration, Instant};

use fake_broker::{code, FakeCluster, FakeConfig, Req};
use kafka_share::{ConsumerRecord, Error, ErrorCode, ShareConsumer};

/// Overall limit of every wait: generous, a loaded machine is slow; tests end on the condition.
const T: Duration = Duration::from_secs(30);

/// Polls until a poll fails or `want` records came; returns the records and the error.
async fn poll_until_error(c: &ShareConsumer, want: usize) -> (Vec<ConsumerRecord>, Option<Error>) {
    let deadline = Instant::now() + T;
    let mut got = Vec::new();
    while Instant::now() < deadline {
        match c.poll(Duration::from_millis(200)).await {
            Ok(rs) => got.extend(rs),
            Err(e) => return (got, Some(e)),
        }
        if got.len() >= want {
            break;
        }
    }
    (got, None)
}

/// Polls until `want` records came; panics on an error or after `T`.
async fn poll_records(c: &ShareConsumer, want: usize) -> Vec<ConsumerRecord> {
    let (got, err) = poll_until_error(c, want).await;
    assert!(err.is_none(), "no error expected, got {err:?}");
    assert!(got.len() >= want, "{} of {want} records", got.len());
    got
}

async fn connect(fake: &FakeCluster, topics: &[&str]) -> ShareConsumer {
    let c = ShareConsumer::connect(fake.consumer_config("g")).await.expect("connect");
    c.subscribe(topics.iter().copied()).expect("subscribe");
    c
}

#[tokio::test]
async fn subscribe_refuses_illegal_names_before_sending_anything() {
    let fake = FakeCluster::single(1, 1).await;
    let c = connect(&fake, &[&fake.topic()]).await;
    let long = "x".repeat(250);
    for bad in ["topic abc!", "", ".", "..", long.as_str(), "a/b"] {
        match c.subscribe([fake.topic(), bad.to_string()]) {
            Err(Error::InvalidTopic { topic, reason }) => {
                assert_eq!(topic, bad);
                assert!(!reason.is_empty());
            }
            other => panic!("{bad:?}: expected InvalidTopic, got {other:?}"),
        }
    }
    // The subscription is the one before the refused calls, and it works.
    assert_eq!(c.subscription().into_iter().collect::<Vec<_>>(), vec![fake.topic()]);
    poll_records(&c, 1).await;
    // No refused name ever reached the broker.
    for l in fake.log() {
        if let Req::Metadata(Some(names)) = &l.req {
            assert!(names.iter().all(|n| *n == fake.topic()), "Metadata asked for {names:?}");
        }
    }
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn invalid_topic_from_metadata_is_returned_by_poll() {
    // A name that passes the local rules but the broker refuses (what a broker with stricter
    // rules, or one the client's rules lag behind, answers).
    let fake = FakeCluster::single(1, 5).await;
    fake.set_topic_error("refused", code::INVALID_TOPIC_EXCEPTION);
    let c = connect(&fake, &[&fake.topic(), "refused"]).await;
    let (_, err) = poll_until_error(&c, usize::MAX).await;
    match err {
        Some(Error::InvalidTopic { ref topic, .. }) if topic == "refused" => {}
        other => panic!("expected InvalidTopic for \"refused\", got {other:?}"),
    }
    assert_eq!(err.and_then(|e| e.code()), Some(ErrorCode::INVALID_TOPIC_EXCEPTION));
    // Reported once: the consumer goes on with the good topic.
    poll_records(&c, 5).await;
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn unauthorized_topic_is_reported_once_per_subscription() {
    let fake = FakeCluster::single(1, 4).await;
    fake.set_topic_error("secret", code::TOPIC_AUTHORIZATION_FAILED);
    let c = connect(&fake, &[&fake.topic(), "secret"]).await;
    let (_, err) = poll_until_error(&c, usize::MAX).await;
    match &err {
        Some(Error::TopicAuthorizationFailed { topic }) if topic == "secret" => {}
        other => panic!("expected TopicAuthorizationFailed for \"secret\", got {other:?}"),
    }
    assert!(!err.as_ref().is_some_and(|e| e.is_retriable()));
    let first = poll_records(&c, 4).await;
    assert_eq!(first.len(), 4);
    // A new subscription that still names the topic hears of it again.
    c.subscribe([fake.topic(), "secret".to_string()]).unwrap();
    let (_, again) = poll_until_error(&c, usize::MAX).await;
    assert!(matches!(again, Some(Error::TopicAuthorizationFailed { .. })), "{again:?}");
    // Once access is granted and the topic left and named again, it is fine.
    fake.clear_topic_error("secret");
    c.subscribe([fake.topic()]).unwrap();
    c.subscribe([fake.topic(), "secret".to_string()]).unwrap();
    fake.produce_generated(0, 2);
    poll_records(&c, 2).await;
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn several_refused_topics_come_one_per_poll() {
    let fake = FakeCluster::single(1, 1).await;
    fake.set_topic_error("a-secret", code::TOPIC_AUTHORIZATION_FAILED);
    fake.set_topic_error("b-refused", code::INVALID_TOPIC_EXCEPTION);
    let c = connect(&fake, &[&fake.topic(), "a-secret", "b-refused"]).await;
    let mut errors = Vec::new();
    while errors.len() < 2 {
        let (_, e) = poll_until_error(&c, usize::MAX).await;
        errors.push(e.expect("an error for each refused topic"));
    }
    assert!(matches!(&errors[0], Error::TopicAuthorizationFailed { topic } if topic == "a-secret"), "{errors:?}");
    assert!(matches!(&errors[1], Error::InvalidTopic { topic, .. } if topic == "b-refused"), "{errors:?}");
    poll_records(&c, 1).await;
    c.close(T).await.unwrap();
}

#[tokio::test]
async fn missing_and_leaderless_topics_are_not_errors() {
    let fake = FakeCluster::start(FakeConfig::default().records(3)).await;
    // "later" is unknown to the fake (UNKNOWN_TOPIC_OR_PARTITION); "moving" has no leader.
    fake.set_topic_error("moving", code::LEADER_NOT_AVAILABLE);
    let c = connect(&fake, &[&fake.topic(), "later", "moving"]).await;
    // Every record of the good topic comes, and no poll fails on the way.
    let got = poll_records(&c, 3).await;
    assert_eq!(got.len(), 3);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn zero_timeout_polls_hear_of_refusals_too() {
    let fake = FakeCluster::single(1, 1).await;
    fake.set_topic_error("secret", code::TOPIC_AUTHORIZATION_FAILED);
    let c = connect(&fake, &[&fake.topic(), "secret"]).await;
    // An application that only ever polls with a zero timeout (between other work).
    let deadline = Instant::now() + T;
    let err = loop {
        match c.poll(Duration::ZERO).await {
            Err(e) => break e,
            Ok(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(10)).await,
            Ok(_) => panic!("no zero-timeout poll reported the refusal within {T:?}"),
        }
    };
    assert!(matches!(&err, Error::TopicAuthorizationFailed { topic } if topic == "secret"), "{err:?}");
    c.close(T).await.unwrap();
    fake.assert_clean();
}
