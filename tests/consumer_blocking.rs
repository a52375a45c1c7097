//! The blocking consumer against the real broker: its iterator, `wakeup()` from another
//! thread ending a blocked poll, and `commit_async`'s handle waited on.

mod common;

use std::sync::Arc;
use std::time::Duration;

use kafka_share::consumer::{blocking, AcknowledgeType, AcknowledgementMode};
use kafka_share::Error;

const N: usize = 50;

#[test]
fn iter_yields_every_record_wakeup_ends_it_and_commit_async_can_be_waited_on() {
    let bs = common::bootstrap();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (topic, group) = rt.block_on(async {
        let admin = common::admin().await;
        let topic = common::new_topic(&admin, "blocking-iter", 2).await;
        common::produce(&bs, &topic, 2, N, "v").await;
        (topic.clone(), common::new_group(&admin, "g-blocking-iter", None).await)
    });
    drop(rt);
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = Arc::new(blocking::ShareConsumer::connect(cfg).unwrap());
    consumer.subscribe([topic.as_str()]).unwrap();

    // Every record, acknowledged one by one; the commit's results waited on.
    let mut got = 0;
    for record in consumer.iter(Duration::from_millis(500)) {
        let record = record.expect("a record");
        consumer.acknowledge_with(&record, AcknowledgeType::Accept).unwrap();
        got += 1;
        if got == N {
            break;
        }
    }
    let results = consumer.commit_async().unwrap().wait().expect("commit results");
    assert!(results.is_ok(), "{:?}", results.first_error());
    let partitions = results.into_inner();
    assert!(!partitions.is_empty() && partitions.len() <= 2, "the topic's partitions: {partitions:?}");

    // Nothing left to read: the iterator's poll ends with Wakeup when another thread says
    // so. No race either way: a wakeup before the poll starts ends the next poll.
    let waker = {
        let c = consumer.clone();
        std::thread::spawn(move || c.wakeup())
    };
    let mut it = consumer.iter(Duration::from_secs(60));
    match it.next() {
        Some(Err(Error::Wakeup)) => {}
        other => panic!("expected Wakeup, got {other:?}"),
    }
    waker.join().unwrap();
    drop(it);
    Arc::try_unwrap(consumer).ok().expect("one owner").close(Duration::from_secs(10)).unwrap();
}
