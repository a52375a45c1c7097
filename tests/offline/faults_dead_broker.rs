//! Fault injection: a broker that stops answering (no refusal, no reset: a hung process or a
//! network partition) while it is still in the metadata. Metadata refreshes and coordinator
//! lookups must not keep going to it first and wait for its timeout every time.

use crate::fake_broker;

use std::time::Duration;

use fake_broker::{Action, FakeCluster, FakeConfig, Rule};
use kafka_share::cluster::{Cluster, ClusterConfig};

// Paused time: the hung node's 500 ms request timeout is a tokio timer (the connection's),
// so it fires as soon as every task waits, not after real time.
#[tokio::test(start_paused = true)]
async fn metadata_refreshes_skip_a_broker_that_just_failed() {
    let fake = FakeCluster::start(FakeConfig::cluster(&[1, 2], &[1, 2])).await;
    let mut cfg = ClusterConfig::new(fake.addr(2));
    cfg.request_timeout = Duration::from_millis(500);
    let cluster = Cluster::connect(cfg).await.expect("connect to the fake cluster");
    assert_eq!(cluster.with_metadata(|m| m.brokers.len()), 2);
    // Node 1 hangs: it reads every request and never answers.
    fake.script(Rule::any(Action::Delay(Duration::from_secs(60))).node(1).always());
    // The first refresh learns it the hard way (node 1 comes first), then asks node 2.
    cluster.refresh_metadata(&[]).await.expect("refresh through node 2");
    let hung = |fake: &FakeCluster| fake.count(|l| l.node == 1);
    let before = hung(&fake);
    assert!(before > 0, "the first refresh tried node 1");
    for _ in 0..3 {
        cluster.refresh_metadata(&[]).await.expect("refresh through node 2");
        cluster.find_group_coordinator("g").await.expect("coordinator lookup through node 2");
    }
    assert_eq!(hung(&fake), before, "refreshes and lookups went to the broker that had just failed");
}
