//! The fake cluster's acquisition locks and delivery limit, seen through a `ShareConsumer`
//! as an application's tests would (`kafka_share::test_util`, feature `test-util`): a record
//! whose lock lapses is delivered again, one count higher, to whoever fetches next; a record
//! given back after its last allowed delivery is archived.

use std::time::{Duration, Instant};

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::test_util::{FakeCluster, FakeConfig, RecordState};
use kafka_share::{AcknowledgeType, ConsumerRecord, Result, ShareConsumer};

const T: Duration = Duration::from_secs(30);

/// Polls until a poll returns records (or `T` passed: none).
async fn poll_some(c: &ShareConsumer) -> Result<Vec<ConsumerRecord>> {
    let deadline = Instant::now() + T;
    while Instant::now() < deadline {
        let got = c.poll(Duration::from_millis(200)).await?;
        if !got.is_empty() {
            return Ok(got);
        }
    }
    Ok(Vec::new())
}

#[tokio::test]
async fn a_record_whose_lock_lapses_is_redelivered_with_delivery_count_2() -> Result<()> {
    let fake = FakeCluster::start(FakeConfig::default().records(0).lock_timeout_ms(1000)).await;
    fake.produce(0, "key", "value");
    let explicit = || fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);

    // A member takes the record, then stalls: it neither acknowledges nor polls.
    let stalled = fake.consumer(explicit()).await;
    let first = poll_some(&stalled).await?;
    assert_eq!((first.len(), first[0].delivery_count), (1, 1));
    assert_eq!(fake.state(0, 0), RecordState::Acquired);

    // A second after it was acquired its lock lapses: another member of the group gets it,
    // as its second delivery.
    let other = fake.consumer(explicit()).await;
    let again = poll_some(&other).await?;
    assert_eq!(again.len(), 1, "{}", fake.dump());
    assert_eq!((again[0].offset, again[0].delivery_count), (0, 2));
    assert_eq!(fake.delivery(0, 0), 2);
    other.acknowledge(&again[0])?;
    other.commit_sync(T).await?.into_result()?;
    assert_eq!(fake.accepted(0), [0]);

    // The stalled member's acknowledgement comes too late: refused, and the record stays
    // accepted by the other member.
    let late = match stalled.acknowledge(&first[0]) {
        Ok(()) => stalled.commit_sync(T).await?.into_result(),
        Err(e) => Err(e),
    };
    assert!(late.is_err(), "a late acknowledgement succeeded");
    assert_eq!(fake.state(0, 0), RecordState::Accepted);

    let _ = stalled.close(T).await; // its record is gone: the close may report that
    other.close(T).await?;
    fake.assert_clean();
    Ok(())
}

#[tokio::test]
async fn a_record_released_at_its_delivery_limit_is_archived() -> Result<()> {
    let fake = FakeCluster::start(FakeConfig::default().records(0).delivery_limit(2)).await;
    fake.produce(0, "key", "value");
    let c = fake.consumer(fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit)).await;

    // The application gives the record back each time: once per allowed delivery.
    for delivery in 1..=2 {
        let got = poll_some(&c).await?;
        assert_eq!(got.len(), 1, "{}", fake.dump());
        assert_eq!(got[0].delivery_count, delivery);
        c.acknowledge_with(&got[0], AcknowledgeType::Release)?;
        c.commit_sync(T).await?.into_result()?;
    }

    // Released after its second delivery, it is archived: never delivered again, and the
    // share-partition start offset moves past it.
    assert_eq!(fake.state(0, 0), RecordState::Archived);
    assert!(c.poll(Duration::from_millis(300)).await?.is_empty());
    assert_eq!(fake.delivery(0, 0), 2);
    assert_eq!(fake.share_window(0), 1..1);
    c.close(T).await?;
    fake.assert_clean();
    Ok(())
}
