//! The example of `kafka_share::test_util` (README.md, "Testing your consumer without a
//! broker", and the module's documentation): an application's consumer loop tested against
//! the fake cluster. Keep the three copies the same.

use std::time::Duration;

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::test_util::FakeCluster;
use kafka_share::{AcknowledgeType, Result, ShareConsumer};

/// The code under test: one round of the application's consumer loop. It processes what one
/// poll returns, accepts each record it could process and rejects the others, and commits.
/// Returns how many records it handled.
async fn process_batch(consumer: &ShareConsumer) -> Result<usize> {
    let records = consumer.poll(Duration::from_secs(1)).await?;
    for record in &records {
        let processed = record.value.is_some(); // the application's work
        let ack = if processed { AcknowledgeType::Accept } else { AcknowledgeType::Reject };
        consumer.acknowledge_with(record, ack)?;
    }
    consumer.commit_sync(Duration::from_secs(5)).await?.into_result()?;
    Ok(records.len())
}

#[tokio::test]
async fn process_batch_accepts_what_it_polls() -> Result<()> {
    let fake = FakeCluster::single(1, 0).await; // one node, one empty partition
    for i in 0..3 {
        fake.produce(0, format!("key-{i}"), format!("value-{i}"));
    }
    let config = fake.consumer_config("my-group").acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(config).await?;
    consumer.subscribe([fake.topic()])?;

    let mut handled = 0;
    for _ in 0..30 {
        handled += process_batch(&consumer).await?;
        if handled == 3 {
            break;
        }
    }
    consumer.close(Duration::from_secs(5)).await?;

    assert_eq!(handled, 3);
    assert_eq!(fake.accepted(0), [0, 1, 2]); // the broker's view: all three ACCEPTed
    fake.assert_clean(); // and the consumer broke no protocol rule
    Ok(())
}

/// Faults are scripted: here the broker refuses the acknowledgement, and the loop says so.
#[tokio::test]
async fn process_batch_reports_acknowledgements_the_broker_refused() -> Result<()> {
    use kafka_share::test_util::{code, Action, Rule};
    use kafka_share::ErrorCode;

    let fake = FakeCluster::single(1, 0).await;
    fake.produce(0, "key", "value");
    let refuse = Action::AckError { partition: 0, code: code::INVALID_RECORD_STATE };
    fake.script(Rule::any(refuse).acks_for(0));
    let config = fake.consumer_config("my-group").acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = ShareConsumer::connect(config).await?;
    consumer.subscribe([fake.topic()])?;

    let mut outcome = Ok(0);
    for _ in 0..30 {
        outcome = process_batch(&consumer).await;
        if !matches!(outcome, Ok(0)) {
            break;
        }
    }
    let err = outcome.expect_err("the refused acknowledgement is an error");
    assert_eq!(err.code(), Some(ErrorCode::INVALID_RECORD_STATE), "{err}");
    assert!(fake.accepted(0).is_empty());
    consumer.close(Duration::from_secs(5)).await?;
    Ok(())
}
