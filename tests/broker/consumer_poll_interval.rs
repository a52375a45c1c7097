//! `max.poll.interval.ms` against a real broker: a member that stops polling leaves the
//! group and its records go back at once; its next poll rejoins.

use crate::common;

use std::time::Duration;

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::ShareConsumer;

const T: Duration = Duration::from_secs(10);

#[tokio::test]
async fn a_member_that_stops_polling_leaves_releases_and_rejoins_on_its_next_poll() {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "pollint", 1).await;
    common::produce(&bs, &topic, 1, 5, "v").await;
    // Locks of 60 s: anything B gets well before that was released, not expired.
    let group = common::new_group(&admin, "g-pollint", Some(60_000)).await;
    let explicit = |client: &str| {
        common::consumer_config(&bs, &group)
            .client_id(format!("{client}-{group}"))
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_interval(Duration::from_secs(2))
    };
    let a = ShareConsumer::connect(explicit("a")).await.unwrap();
    a.subscribe([topic.clone()]).unwrap();
    let held = common::poll_until(&a, 5, Duration::from_secs(30), |_| {}).await;
    assert_eq!(held.len(), 5);
    // A stops polling. B, polling, gets A's five records once A's poll interval has passed:
    // at delivery count 2, long before their 60 s locks would run out.
    let b = ShareConsumer::connect(explicit("b").max_poll_interval(Duration::from_secs(300))).await.unwrap();
    b.subscribe([topic.clone()]).unwrap();
    let started = std::time::Instant::now();
    let at_b = common::poll_until(&b, 5, Duration::from_secs(40), |r| b.acknowledge(r).unwrap()).await;
    assert_eq!(at_b.len(), 5, "A's records were not released");
    assert!(
        at_b.iter().all(|r| r.delivery_count == 2),
        "{:?}",
        at_b.iter().map(|r| r.delivery_count).collect::<Vec<_>>()
    );
    assert!(started.elapsed() < Duration::from_secs(55), "released, not expired: {:?}", started.elapsed());
    b.commit_sync(T).await.unwrap();
    // A's late acknowledgements fail (its session went with the leave); its next poll rejoins.
    for r in &held {
        a.acknowledge(r).unwrap();
    }
    let results = a.commit_sync(T).await.unwrap();
    assert!(results.values().all(|r| r.is_err()), "{results:?}");
    assert!(a.poll(Duration::from_millis(500)).await.is_ok());
    common::wait_for_members(&admin, &group, 2, Duration::from_secs(30)).await;
    a.close(T).await.unwrap();
    b.close(T).await.unwrap();
}
