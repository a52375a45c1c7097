//! The exporter over many groups against the real broker: 200 share groups on 50 topics of 4
//! partitions. A refresh describes them in batches (one ShareGroupDescribe per coordinator,
//! not per group) and reads their offsets one group per request (no more requests than
//! groups), which the exporter's own request series show; every group's series are served,
//! and a scrape renders them from the cache.
//! Fails when the broker is absent (`common::admin`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use kafka_share::admin::{Admin, NewTopic, TopicPartition};
use kafka_share::exporter::{
    Exporter, ExporterConfig, GroupFilter, Snapshot, COORDINATORS, GROUP_STATE, PARTITION_LAG, PARTITION_START_OFFSET,
    REFRESH_REQUESTS, SCRAPE_DURATION,
};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::prometheus::{render, Registry};

const TOPICS: usize = 50;
const PARTITIONS: i32 = 4;
const GROUPS: usize = 200;
/// Records per partition; each group starts at offset 1, so its lag is one less.
const RECORDS: i32 = 3;

/// How long a wait for the broker's asynchronous state lasts before the test fails; a passing
/// test ends on its condition.
const WAIT: Duration = Duration::from_secs(120);

/// The value of the series `name` whose labels contain every one of `labels`.
fn sample(text: &str, name: &str, labels: &[String]) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && labels.iter().all(|x| l.contains(x.as_str())))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The value of the unlabelled series `name`.
fn plain(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// 50 topics with records in every partition, and 200 groups (four per topic) whose share
/// state starts at offset 1 of each partition: AlterShareGroupOffsets makes an empty group
/// with state, no consumer needed.
async fn many_groups(admin: &Admin, prefix: &str) -> (Vec<String>, Vec<String>) {
    let topics: Vec<String> = (0..TOPICS).map(|i| format!("{prefix}-t{i}")).collect();
    let new: Vec<NewTopic> = topics.iter().map(|t| NewTopic::new(t, PARTITIONS).config("retention.ms", "-1")).collect();
    for (t, r) in topics.iter().zip(admin.create_topics(&new).await.expect("create topics")) {
        r.unwrap_or_else(|e| panic!("create topic {t}: {e}"));
    }
    for t in &topics {
        common::described_with_leaders(admin, t).await;
    }
    let producer = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut sent = Vec::new();
    for t in &topics {
        for p in 0..PARTITIONS {
            for i in 0..RECORDS {
                sent.push(producer.send(ProducerRecord::new(t, format!("v{i}")).partition(p)).await.expect("send"));
            }
        }
    }
    for s in sent {
        s.await.expect("delivered");
    }
    producer.close(Duration::from_secs(10)).await.expect("producer close");

    let groups: Vec<String> = (0..GROUPS).map(|i| format!("{prefix}-g{i}")).collect();
    for (i, g) in groups.iter().enumerate() {
        let topic = &topics[i % TOPICS];
        let offsets: BTreeMap<TopicPartition, i64> =
            (0..PARTITIONS).map(|p| (TopicPartition::new(topic.clone(), p), 1)).collect();
        for (tp, r) in admin.alter_share_group_offsets(g, &offsets).await.expect("alter offsets") {
            r.unwrap_or_else(|e| panic!("start offset of {g} on {tp}: {e}"));
        }
    }
    (topics, groups)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_groups_are_described_per_coordinator_and_all_are_served() {
    let admin = common::admin().await;
    let prefix = common::unique("exp-many");
    let (topics, groups) = many_groups(&admin, &prefix).await;

    // Its own admin client: the requests it counts are the exporter's only.
    let mut c = ExporterConfig::default();
    c.groups = GroupFilter::pattern(&format!("{}-g[0-9]+", regex_escape(&prefix))).expect("pattern");
    c.refresh_interval = Duration::from_millis(200);
    let exporter = Exporter::start(Admin::connect_to(&common::bootstrap()).await.expect("admin"), c);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.collector()));

    // The first refresh that sees every group with all its partitions (the listing can lag
    // the last group made by a moment).
    let complete =
        |s: &Snapshot| s.groups.len() == GROUPS && s.groups.iter().all(|g| g.partitions.len() == PARTITIONS as usize);
    let s = wait_for(&exporter, "every group with its partitions", complete).await;

    // The coordinators of the groups, as the broker names them.
    let names: Vec<&str> = groups.iter().map(String::as_str).collect();
    let coordinators: BTreeSet<i32> = admin
        .describe_share_groups(&names)
        .await
        .expect("describe")
        .into_iter()
        .map(|d| d.expect("described").coordinator.node_id)
        .collect();
    assert_eq!(s.coordinators, coordinators.len(), "{:?}", s.requests);

    // Requests per refresh. The descriptions: one per coordinator, not per group. The offsets:
    // one per group at most, never more (no group asked twice in a refresh that went well):
    // Kafka 4.4 answers a DescribeShareGroupOffsets carrying several groups only after ~2.5 s
    // and one group in milliseconds, so the exporter asks them one group per request
    // (1,000 groups: 1.2 s a refresh against 3.4 s batched, scripts/bench exporter).
    let sent = |api: &str| s.requests.get(api).copied().unwrap_or(0);
    assert!(sent("DescribeShareGroupOffsets") >= 1, "{:?}", s.requests);
    assert!(sent("DescribeShareGroupOffsets") <= GROUPS as u64, "{:?}", s.requests);
    assert!(sent("ShareGroupDescribe") <= s.coordinators as u64, "{:?}", s.requests);
    assert!(sent("FindCoordinator") <= 2, "one lookup for each of the two reads: {:?}", s.requests);
    let others: u64 = s.requests.iter().filter(|(api, _)| **api != "DescribeShareGroupOffsets").map(|(_, n)| n).sum();
    assert!(others < (GROUPS / 10) as u64, "{others} other requests for {GROUPS} groups: {:?}", s.requests);

    // Every group's series from the cache, with the lag of the records past offset 1.
    let text = render(&registry);
    for (i, g) in groups.iter().enumerate() {
        let group = format!("group=\"{g}\"");
        assert_eq!(sample(&text, GROUP_STATE, std::slice::from_ref(&group)), Some(1.0), "{g}: no state series");
        for p in 0..PARTITIONS {
            let labels = [group.clone(), format!("topic=\"{}\"", topics[i % TOPICS]), format!("partition=\"{p}\"")];
            assert_eq!(sample(&text, PARTITION_START_OFFSET, &labels), Some(1.0), "{g} partition {p}");
            assert_eq!(sample(&text, PARTITION_LAG, &labels), Some(f64::from(RECORDS - 1)), "{g} partition {p}");
        }
    }
    assert_eq!(
        sample(&text, REFRESH_REQUESTS, &["api=\"DescribeShareGroupOffsets\"".to_string()]).map(|v| v >= 1.0),
        Some(true),
        "the request series is served"
    );
    assert!(plain(&text, COORDINATORS).is_some_and(|v| v >= 1.0), "coordinators served");

    // A scrape renders from the cache: its own duration series (of the scrape before it)
    // stays far under a second for all 200 groups.
    let text = render(&registry);
    let took = plain(&text, SCRAPE_DURATION).expect("scrape duration served");
    assert!(took < 1.0, "a scrape of {GROUPS} groups took {took} s");
}

/// Waits for a refresh whose snapshot satisfies `ok`.
async fn wait_for(exporter: &Exporter, what: &str, ok: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let s = exporter.next_refresh().await;
        if ok(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "{what}: never seen; last snapshot has {} groups, errors {:?}, requests {:?}, the first {:#?}",
            s.groups.len(),
            s.errors,
            s.requests,
            s.groups.first()
        );
    }
}

/// `s` with the regex metacharacters escaped (the prefix has `-` and hex digits only today).
fn regex_escape(s: &str) -> String {
    s.chars()
        .flat_map(|c| if c.is_ascii_alphanumeric() || c == '-' { vec![c] } else { vec!['\\', c] })
        .collect()
}
