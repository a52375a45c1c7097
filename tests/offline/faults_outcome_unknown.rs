//! Fault injection: a broker reads a request that carries acknowledgements and the connection
//! dies before it answers. The client cannot know whether the broker applied them, so it
//! reports them as `Error::OutcomeUnknown` (per partition, in commit results and the
//! callback), never as a plain failure.

use crate::fake_broker;

use std::time::Duration;

use fake_broker::{
    accept_and_commit, ack_recorder, poll_all_at_once, poll_until, poll_while_not, Action, FakeCluster, Rule,
    SHARE_FETCH,
};
use kafka_share::consumer::{AcknowledgementMode, TopicPartition};
use kafka_share::Error;

const T: Duration = Duration::from_secs(5);

fn assert_unknown_outcome(e: &Error, api: &str) {
    let Error::OutcomeUnknown { api: a, cause, .. } = e else { panic!("want an unknown outcome, got: {e}") };
    assert_eq!(*a, api, "{e}");
    assert!(matches!(&**cause, Error::ConnectionClosed { .. }), "{e}");
    assert!(e.to_string().contains("may have applied"), "the message says what may have happened: {e}");
}

#[tokio::test]
async fn commit_whose_ack_request_was_read_then_dropped_reports_unknown_outcome() {
    let fake = FakeCluster::single(1, 5).await;
    let cfg = fake.consumer_config("g").acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = fake.consumer(cfg).await;
    let (cb, seen) = ack_recorder();
    c.set_acknowledgement_commit_callback(move |t, o, r| cb(t, o, r)).unwrap();
    let got = poll_all_at_once(&fake, &c, 5).await;
    // The broker reads the ShareAcknowledge whole, then the connection dies unanswered.
    fake.script(Rule::any(Action::DropConnection).with_acks());
    for r in &got {
        c.acknowledge(r).unwrap();
    }
    let results = c.commit_sync(T).await.unwrap();
    let r = &results[&TopicPartition::new(fake.topic(), 0)];
    assert_unknown_outcome(r.as_ref().unwrap_err(), "ShareAcknowledge");
    let outcome = seen.lock().unwrap().iter().find(|o| o.result.is_err()).cloned().expect("callback told");
    assert_eq!(outcome.offsets, vec![0, 1, 2, 3, 4]);
    assert_unknown_outcome(outcome.result.as_ref().unwrap_err(), "ShareAcknowledge");
    // This fake did not apply them: the records come back and are accepted on a new session.
    let again = poll_all_at_once(&fake, &c, 5).await;
    accept_and_commit(&c, &again, T).await;
    assert_eq!(fake.done(0), vec![0, 1, 2, 3, 4]);
    c.close(T).await.unwrap();
    fake.assert_clean();
}

#[tokio::test]
async fn acks_riding_on_a_fetch_that_was_read_then_dropped_report_unknown_outcome() {
    let fake = FakeCluster::single(1, 5).await;
    let c = fake.consumer(fake.consumer_config("g")).await;
    let (cb, seen) = ack_recorder();
    c.set_acknowledgement_commit_callback(move |t, o, r| cb(t, o, r)).unwrap();
    assert_eq!(poll_until(&c, 5, T).await.len(), 5);
    // Implicit mode: the next poll accepts the five, and they ride on the next ShareFetch.
    fake.script(Rule::on(SHARE_FETCH, Action::DropConnection).with_acks());
    let failed = || seen.lock().unwrap().iter().any(|o| o.result.is_err());
    let mut again = Vec::new();
    assert!(poll_while_not(&c, T, &mut again, failed).await, "acks lost silently:\n{}", fake.dump());
    let outcome = seen.lock().unwrap().iter().find(|o| o.result.is_err()).cloned().unwrap();
    assert_eq!(outcome.offsets, vec![0, 1, 2, 3, 4]);
    assert_unknown_outcome(outcome.result.as_ref().unwrap_err(), "ShareFetch");
    assert!(poll_while_not(&c, T, &mut again, || fake.done(0).len() == 5).await, "{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}
