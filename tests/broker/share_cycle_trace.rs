//! The share-cycle trace (`RUST_LOG=kafka_share::cycle=trace`, read by scripts/share-cycle):
//! one `fetch answered` event per ShareFetch answer, naming each partition's records and
//! marking with `a` the partitions whose acks the fetch carried (real broker; issue 36).

use crate::common;

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::ShareConsumer;

const RECORDS: usize = 200;

/// Each partition's records over the trace's `fetch answered` lines, and whether any fetch
/// carried acks, from lines such as `... fetch answered node=1 latency_us=812 partitions=" 0:120a 1:80"`.
fn traced(text: &str) -> (BTreeMap<i32, usize>, bool) {
    let mut records = BTreeMap::new();
    let mut carried = false;
    for line in text.lines().filter(|l| l.contains("fetch answered")) {
        let parts = line.split("partitions=\"").nth(1).and_then(|s| s.split('"').next()).unwrap_or("");
        for item in parts.split_whitespace() {
            let (p, rest) = item.split_once(':').unwrap_or_else(|| panic!("partition item {item:?} in {line}"));
            carried |= rest.ends_with('a');
            let n: usize = rest.trim_end_matches('a').parse().unwrap_or_else(|_| panic!("records in {item:?}"));
            *records.entry(p.parse().unwrap_or_else(|_| panic!("partition in {item:?}"))).or_default() += n;
        }
    }
    (records, carried)
}

#[tokio::test]
async fn the_cycle_trace_names_each_partitions_records_and_the_acks_a_fetch_carried() {
    let (logs, _guard) = crate::logs::Logs::filtered("kafka_share::cycle=trace");
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "cycle-trace", 2).await;
    common::produce(&bs, &topic, 2, RECORDS, "cycle").await;
    let group = common::new_group(&admin, "g-cycle-trace", None).await;
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let c = ShareConsumer::connect(cfg).await.expect("connect");
    c.subscribe([topic.clone()]).expect("subscribe");
    let got = common::poll_until(&c, RECORDS, Duration::from_secs(60), |r| c.acknowledge(r).expect("ack")).await;
    assert_eq!(got.len(), RECORDS, "records consumed");
    // The acks of the last records ride on the next fetch: poll until the trace shows one.
    let end = tokio::time::Instant::now() + Duration::from_secs(30);
    while !traced(&logs.text()).1 {
        assert!(tokio::time::Instant::now() < end, "no fetch carried acks within 30 s:\n{}", logs.text());
        let more = c.poll(Duration::from_millis(200)).await.expect("poll");
        assert!(more.is_empty(), "a record came twice: {:?}", more.first().map(|r| r.offset));
    }
    c.close(Duration::from_secs(10)).await.expect("close");
    let (records, carried) = traced(&logs.text());
    assert!(carried);
    assert_eq!(records.values().sum::<usize>(), RECORDS, "records per partition in the trace: {records:?}");
    assert_eq!(records.len(), 2, "both partitions answered: {records:?}");
}
