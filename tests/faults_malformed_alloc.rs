//! Fault injection: a malformed FindCoordinator response whose array length claims billions of
//! entries. Kept in its own test binary: today the `kafka-protocol` decoder pre-allocates by
//! that claimed length and the allocation failure aborts the whole process.

#[path = "offline/fake_broker/mod.rs"]
mod fake_broker;

use std::time::Duration;

use fake_broker::{poll_until, poll_while_not, Action, FakeCluster, Rule, FIND_COORDINATOR};

/// Overall limit of a wait: generous (a loaded machine is slow); tests end on the condition.
const T: Duration = Duration::from_secs(30);

#[tokio::test]
async fn huge_length_prefix_in_a_find_coordinator_response_is_an_error_not_an_abort() {
    let fake = FakeCluster::single(1, 5).await;
    fake.script(Rule::on(FIND_COORDINATOR, Action::Garbage));
    let c = fake.consumer(fake.consumer_config("g")).await;
    let mut got = poll_until(&c, 5, T).await;
    assert!(poll_while_not(&c, T, &mut got, || fake.done(0).len() == 5).await, "{}", fake.dump());
    c.close(T).await.unwrap();
    fake.assert_clean();
}
