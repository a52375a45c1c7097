//! The share consumer on more members than partitions, and on the three-broker cluster.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_share::admin::NewTopic;
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::ShareConsumer;

/// Runs `members` explicit-mode consumers until `n` records were accepted; returns
/// (offsets seen per (partition, offset) -> member, records per member).
#[allow(clippy::too_many_arguments)]
async fn run_members(
    sessions_seen: Arc<std::sync::Mutex<BTreeSet<i32>>>,
    bs: &str,
    admin: &kafka_share::admin::Admin,
    group: &str,
    topic: &str,
    members: usize,
    n: usize,
    produce: impl std::future::Future<Output = ()>,
) -> (BTreeMap<(i32, i64), usize>, Vec<usize>) {
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, i32, i64)>();
    let mut handles = Vec::new();
    for i in 0..members {
        let cfg = common::consumer_config(bs, group)
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(10);
        let (topic, tx, stop, sessions_seen) = (topic.to_string(), tx.clone(), stop.clone(), sessions_seen.clone());
        handles.push(tokio::spawn(async move {
            let c = ShareConsumer::connect(cfg).await.unwrap();
            c.subscribe([topic]).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let recs = c.poll(Duration::from_millis(300)).await.unwrap();
                for r in &recs {
                    c.acknowledge(r).unwrap();
                    tx.send((i, r.partition, r.offset)).unwrap();
                }
                sessions_seen.lock().unwrap().extend(c.share_sessions().keys());
                if !recs.is_empty() {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
            }
            let res = c.commit_sync(Duration::from_secs(10)).await.unwrap();
            assert!(res.values().all(|r| r.is_ok()), "{res:?}");
            c.close(Duration::from_secs(10)).await.unwrap();
        }));
    }
    drop(tx);
    common::wait_for_members(admin, group, members, Duration::from_secs(45)).await;
    produce.await;
    let mut seen = BTreeMap::new();
    let mut per = vec![0usize; members];
    let end = tokio::time::Instant::now() + Duration::from_secs(90);
    while seen.len() < n && tokio::time::Instant::now() < end {
        if let Ok(Some((i, p, o))) = tokio::time::timeout(Duration::from_millis(500), rx.recv()).await {
            assert!(seen.insert((p, o), i).is_none(), "{p}@{o} delivered twice");
            per[i] += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        h.await.unwrap();
    }
    while let Ok((i, p, o)) = rx.try_recv() {
        assert!(seen.insert((p, o), i).is_none(), "{p}@{o} delivered twice");
        per[i] += 1;
    }
    (seen, per)
}

#[tokio::test]
async fn eight_consumers_on_two_partitions_all_get_work() {
    let _turn = crate::sharing().await;
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "eight", 2).await;
    let group = common::new_group(&admin, "g-eight", None).await;
    let n = 400;
    let (bs2, topic2) = (bs.clone(), topic.clone());
    let produce = async move {
        use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
        let p = Producer::connect(ProducerConfig::new(&bs2)).await.unwrap();
        for i in 0..n {
            p.send_and_wait(ProducerRecord::new(topic2.as_str(), format!("v{i}")).partition((i % 2) as i32))
                .await
                .unwrap();
        }
        p.close(Duration::from_secs(10)).await.unwrap();
    };
    let (seen, per) = run_members(Default::default(), &bs, &admin, &group, &topic, 8, n, produce).await;
    assert_eq!(seen.len(), n, "every record accepted exactly once");
    let busy = per.iter().filter(|&&c| c > 0).count();
    assert!(busy >= 6, "more consumers than partitions, and (nearly) all get work: {per:?}");
}

#[tokio::test]
async fn three_brokers_one_session_each_all_records_once() {
    let _turn = crate::sharing().await;
    let bs = common::cluster_bootstrap();
    let admin = common::cluster_admin().await;
    let topic = common::unique("three");
    let r = admin.create_topics(&[NewTopic::new(&topic, 6).replication_factor(3)]).await.unwrap();
    r.into_iter().next().unwrap().unwrap();
    let leaders: BTreeSet<i32> = common::described_with_leaders(&admin, &topic)
        .await
        .partitions
        .iter()
        .map(|p| p.leader.expect("every partition has a leader after create_topics"))
        .collect();
    assert!(leaders.len() >= 2, "partitions led by different brokers: {leaders:?}");
    let group = common::new_group(&admin, "g-three", None).await;
    let n = 600;
    let (bs2, topic2) = (bs.clone(), topic.clone());
    let produce = async move { common::produce(&bs2, &topic2, 6, n, "c").await };
    let sessions = Arc::new(std::sync::Mutex::new(BTreeSet::new()));
    let (seen, _) = run_members(sessions.clone(), &bs, &admin, &group, &topic, 2, n, produce).await;
    assert_eq!(seen.len(), n);
    let sessions = sessions.lock().unwrap().clone();
    assert_eq!(sessions, leaders, "one share session per leader broker, none elsewhere");
    let parts: BTreeSet<i32> = seen.keys().map(|(p, _)| *p).collect();
    assert_eq!(parts.len(), 6, "records from every partition, hence from every leader");
}
