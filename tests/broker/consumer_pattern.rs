//! Pattern subscriptions (`subscribe_pattern`) against a real broker: the matching topics'
//! records and no others, a matching topic created later, and the subscription's life cycle.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kafka_share::{ConsumerRecord, Error, ShareConsumer};

/// Records per topic.
const N: usize = 20;

fn per_topic(records: &[ConsumerRecord]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for r in records {
        *m.entry(r.topic.to_string()).or_default() += 1;
    }
    m
}

#[tokio::test]
async fn pattern_receives_exactly_the_matching_topics_and_picks_up_new_ones() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    // Names unique to this run: `<prefix>.a` and `<prefix>.b` match; `x<prefix>.c` contains
    // the pattern's text but does not match as a whole (anchoring); `<prefix>.d` comes later.
    let prefix = common::unique("pattern");
    let [a, b, c, d] = [".a", ".b", ".c", ".d"].map(|s| format!("{prefix}{s}"));
    let c = format!("x{c}");
    for t in [&a, &b, &c] {
        admin.create_topic(t, 2).await.expect("create topic");
        common::produce(&bs, t, 2, N, "v").await;
    }
    let group = common::new_group(&admin, "g-pattern", None).await;
    let cfg = common::consumer_config(&bs, &group).metadata_max_age(Duration::from_millis(500));
    let consumer = ShareConsumer::connect(cfg).await.unwrap();
    consumer.subscribe_pattern(&format!(r"{}\..*", regex::escape(&prefix))).unwrap();

    let got = common::poll_until(&consumer, 2 * N, Duration::from_secs(60), |_| {}).await;
    let counts = per_topic(&got);
    assert_eq!(counts, BTreeMap::from([(a.clone(), N), (b.clone(), N)]), "only the matching topics");
    assert_eq!(consumer.subscription(), BTreeSet::from([a.clone(), b.clone()]));

    // A matching topic created after subscribing is consumed once a listing finds it.
    admin.create_topic(&d, 1).await.expect("create topic");
    common::produce(&bs, &d, 1, N, "late").await;
    let later = common::poll_until(&consumer, N, Duration::from_secs(60), |_| {}).await;
    assert_eq!(per_topic(&later), BTreeMap::from([(d.clone(), N)]), "the new topic's records, nothing else");
    assert_eq!(consumer.subscription(), BTreeSet::from([a, b, d]));
    // The non-matching topic stays unread, however long we look.
    let rest = consumer.poll(Duration::from_millis(1500)).await.unwrap();
    assert!(rest.is_empty(), "{:?}", per_topic(&rest));
    consumer.close(Duration::from_secs(10)).await.unwrap();
}

#[tokio::test]
async fn invalid_pattern_is_refused_and_subscriptions_replace_each_other() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "pattern-life", 1).await;
    let group = common::new_group(&admin, "g-pattern-life", None).await;
    let consumer = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.unwrap();

    consumer.subscribe([topic.clone()]).unwrap();
    let e = consumer.subscribe_pattern("orders(").unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("orders(")), "{e}");
    assert_eq!(consumer.subscription(), BTreeSet::from([topic.clone()]), "left as it was");

    // A pattern replaces the names: nothing matched until the next poll lists the topics.
    consumer.subscribe_pattern(&regex::escape(&topic)).unwrap();
    assert!(consumer.subscription().is_empty());
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while consumer.subscription().is_empty() && tokio::time::Instant::now() < end {
        consumer.poll(Duration::from_millis(200)).await.unwrap();
    }
    assert_eq!(consumer.subscription(), BTreeSet::from([topic.clone()]));

    // Names replace the pattern; unsubscribe clears everything.
    consumer.subscribe(["other"]).unwrap();
    assert_eq!(consumer.subscription(), BTreeSet::from(["other".to_string()]));
    consumer.subscribe_pattern(".*").unwrap();
    consumer.unsubscribe().unwrap();
    assert!(consumer.subscription().is_empty());
    assert!(matches!(consumer.poll(Duration::ZERO).await, Err(Error::NotSubscribed)), "not subscribed");
    consumer.close(Duration::from_secs(10)).await.unwrap();
}

#[test]
fn blocking_consumer_subscribes_to_a_pattern() {
    let bs = common::bootstrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (topic, group) = rt.block_on(async {
        let admin = common::admin().await;
        let topic = common::new_topic(&admin, "pattern-blocking", 1).await;
        common::produce(&bs, &topic, 1, N, "v").await;
        (topic.clone(), common::new_group(&admin, "g-pattern-blocking", None).await)
    });
    let consumer =
        kafka_share::consumer::blocking::ShareConsumer::connect(common::consumer_config(&bs, &group)).unwrap();
    assert!(matches!(consumer.subscribe_pattern("[").unwrap_err(), Error::InvalidArgument(_)));
    consumer.subscribe_pattern(&format!("{}|nothing-else", regex::escape(&topic))).unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < N && std::time::Instant::now() < end {
        got.extend(consumer.poll(Duration::from_millis(500)).unwrap());
    }
    assert_eq!(per_topic(&got), BTreeMap::from([(topic.clone(), N)]));
    assert_eq!(consumer.subscription(), BTreeSet::from([topic]));
    consumer.close(Duration::from_secs(10)).unwrap();
}

#[tokio::test]
async fn a_deleted_matching_topic_leaves_the_subscription_quietly() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let prefix = common::unique("pattern-del");
    let [a, b] = [".a", ".b"].map(|s| format!("{prefix}{s}"));
    for t in [&a, &b] {
        admin.create_topic(t, 1).await.expect("create topic");
        common::produce(&bs, t, 1, N, "v").await;
    }
    let group = common::new_group(&admin, "g-pattern-del", None).await;
    let cfg = common::consumer_config(&bs, &group).metadata_max_age(Duration::from_millis(500));
    let consumer = ShareConsumer::connect(cfg).await.unwrap();
    consumer.subscribe_pattern(&format!(r"{}\..*", regex::escape(&prefix))).unwrap();
    let got = common::poll_until(&consumer, 2 * N, Duration::from_secs(60), |_| {}).await;
    assert_eq!(per_topic(&got), BTreeMap::from([(a.clone(), N), (b.clone(), N)]));

    // Deleting a matching topic is the pattern's business, not an error: as in Java, the next
    // listing drops it from the subscription and polls carry on with the rest.
    for r in admin.delete_topics(&[&b]).await.expect("delete topics") {
        r.expect("delete topic");
    }
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while consumer.subscription() != BTreeSet::from([a.clone()]) {
        assert!(tokio::time::Instant::now() < end, "still subscribed to {:?}", consumer.subscription());
        let polled = consumer.poll(Duration::from_millis(200)).await;
        assert!(polled.as_ref().is_ok_and(|r| r.is_empty()), "{:?}", polled.map(|r| per_topic(&r)));
    }
    common::produce(&bs, &a, 1, N, "after").await;
    let later = common::poll_until(&consumer, N, Duration::from_secs(60), |_| {}).await;
    assert_eq!(per_topic(&later), BTreeMap::from([(a, N)]), "the remaining topic flows on");
    consumer.close(Duration::from_secs(10)).await.unwrap();
}
