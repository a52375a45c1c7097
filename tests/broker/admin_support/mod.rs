//! Helpers for the admin tests: raw Produce, a raw share-group member (ShareGroupHeartbeat),
//! raw ShareFetch + ShareAcknowledge to consume records, and the Java ShareGroupCommand.
//! Everything goes through `Cluster::send` with the `kafka-protocol` crate's v1 messages, so
//! these tests depend on nothing but the wire layer.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::share_acknowledge_request::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch as AckBatch,
};
use kafka_protocol::messages::share_fetch_request::{AcknowledgementBatch, FetchPartition, FetchTopic};
use kafka_protocol::messages::{
    GroupId, ProduceRequest, ShareAcknowledgeRequest, ShareFetchRequest, ShareGroupHeartbeatRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use kafka_share::cluster::{Cluster, TrafficClass};
use kafka_share::protocol::records::{BatchBuilder, Compression, RecordInput};
use uuid::Uuid;

/// Produces `n` records ("v0".."vN-1") to one partition; returns the base offset.
pub async fn produce(cluster: &Cluster, topic: &str, partition: i32, n: usize) -> i64 {
    produce_at(cluster, topic, partition, n, now_ms()).await
}

/// As [`produce`], with every record's timestamp set to `ts` (ms).
pub async fn produce_at(cluster: &Cluster, topic: &str, partition: i32, n: usize, ts: i64) -> i64 {
    // The crate's own batch encoder (the one the producer uses).
    let mut b = BatchBuilder::new();
    for i in 0..n {
        b.push(&RecordInput {
            key: None,
            value: Some(Bytes::from(format!("v{i}"))),
            headers: Vec::new(),
            timestamp: ts,
        })
        .expect("encode record");
    }
    let batch = b.finish(Compression::None).expect("encode batch");
    let req = ProduceRequest::default().with_acks(-1).with_timeout_ms(10_000).with_topic_data(vec![
        TopicProduceData::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partition_data(vec![PartitionProduceData::default().with_index(partition).with_records(Some(batch))]),
    ]);
    // A topic just created may not have its leader ready yet (older brokers answer
    // NOT_LEADER_OR_FOLLOWER or LEADER_NOT_AVAILABLE for a moment, and the metadata may be
    // stale): ask again until the leader takes the batch, within a generous limit.
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        cluster.refresh_metadata(&[topic.to_string()]).await.expect("metadata");
        let leader = cluster.with_metadata(|m| m.leader(topic, partition));
        if let Some(leader) = leader {
            let conn = cluster.broker(leader, TrafficClass::Control).await.expect("connect leader");
            // v3..=12 name topics (v13 switches to ids).
            let resp = cluster.send(&conn, &req, (3, 12)).await.expect("produce");
            let p = &resp.responses[0].partition_responses[0];
            // UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER: nothing
            // was written, so sending again cannot duplicate.
            let not_ready = matches!(p.error_code, 3 | 5 | 6);
            if !not_ready || tokio::time::Instant::now() >= end {
                assert_eq!(p.error_code, 0, "produce error {:?} {:?}", p.error_message, p.record_errors);
                return p.base_offset;
            }
        } else {
            assert!(tokio::time::Instant::now() < end, "no leader for {topic}-{partition} after 60 s");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

/// One share session: partitions, session epoch, pending acks (partition, first, last).
type Session = (Vec<i32>, i32, Vec<(i32, i64, i64)>);

/// A share-group member driven by raw heartbeats. It stays in the group until `leave` or
/// until the session timeout (45 s by default) passes without heartbeats.
pub struct Member {
    pub group: String,
    pub member_id: String,
    pub epoch: i32,
    /// Assigned (topic id, partitions).
    pub assignment: Vec<(Uuid, Vec<i32>)>,
}

impl Member {
    /// Joins `group` subscribed to `topics` and heartbeats until it has an assignment.
    pub async fn join(cluster: &Cluster, group: &str, topics: &[&str]) -> Member {
        let mut m = Member {
            group: group.to_string(),
            member_id: kafka_share::share::membership::new_member_id(),
            epoch: 0,
            assignment: Vec::new(),
        };
        let subs = Some(topics.iter().map(|t| TopicName(StrBytes::from_string(t.to_string()))).collect());
        m.heartbeat(cluster, subs).await;
        // Until assigned, however slow the broker is today (a generous limit, not a pace).
        let end = tokio::time::Instant::now() + Duration::from_secs(60);
        while tokio::time::Instant::now() < end {
            if !m.assignment.is_empty() {
                return m;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
            m.heartbeat(cluster, None).await;
        }
        panic!("member {} got no assignment in {group}", m.member_id);
    }

    async fn heartbeat(&mut self, cluster: &Cluster, subs: Option<Vec<TopicName>>) {
        let req = ShareGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(self.group.clone())))
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_member_epoch(self.epoch)
            .with_subscribed_topic_names(subs);
        // A freshly started broker may still be loading the group coordinator, or move it:
        // retry those (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
        // NOT_COORDINATOR) as a real member would, for a bounded time.
        let mut tries = 0;
        let resp = loop {
            let node = cluster.find_group_coordinator(&self.group).await.expect("coordinator");
            let conn = cluster.broker(node, TrafficClass::Control).await.expect("connect");
            let resp = cluster.send(&conn, &req, (1, 1)).await.expect("heartbeat");
            if matches!(resp.error_code, 14..=16) && tries < 100 {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
            break resp;
        };
        assert_eq!(resp.error_code, 0, "heartbeat: {:?}", resp.error_message);
        self.epoch = resp.member_epoch;
        if let Some(a) = resp.assignment {
            self.assignment = a.topic_partitions.into_iter().map(|tp| (tp.topic_id, tp.partitions)).collect();
        }
    }

    /// Heartbeats once, to stay in the group while slow things (Java tools) run.
    pub async fn beat(&mut self, cluster: &Cluster) {
        self.heartbeat(cluster, None).await;
    }

    /// Leaves the group (epoch -1).
    pub async fn leave(mut self, cluster: &Cluster) {
        self.epoch = -1;
        self.heartbeat(cluster, None).await;
    }

    /// Fetches the assigned partitions of `topic` from their leaders (one share session per
    /// leader) and accepts every acquired record, until `n` were acknowledged.
    pub async fn consume_and_accept(&mut self, cluster: &Cluster, topic: &str, n: i64) {
        cluster.refresh_metadata(&[topic.to_string()]).await.unwrap();
        let topic_id = cluster.with_metadata(|m| m.topics[topic].id);
        let parts: Vec<i32> =
            self.assignment.iter().filter(|(id, _)| *id == topic_id).flat_map(|(_, p)| p.clone()).collect();
        // leader -> (partitions, session epoch, pending (partition, first, last))
        let mut sessions: BTreeMap<i32, Session> = BTreeMap::new();
        for p in parts {
            let leader = cluster.with_metadata(|m| m.leader(topic, p)).expect("leader");
            sessions.entry(leader).or_default().0.push(p);
        }
        let mut acked = 0;
        let mut acquired = 0;
        for _ in 0..100 {
            for (leader, (parts, epoch, pending)) in sessions.iter_mut() {
                let conn = cluster.broker(*leader, TrafficClass::Control).await.unwrap();
                let req = ShareFetchRequest::default()
                    .with_group_id(Some(self.group_id()))
                    .with_member_id(Some(StrBytes::from_string(self.member_id.clone())))
                    .with_share_session_epoch(*epoch)
                    .with_max_wait_ms(100)
                    .with_min_bytes(1)
                    .with_max_bytes(1 << 20)
                    .with_max_records(500)
                    .with_batch_size(500)
                    .with_topics(vec![FetchTopic::default().with_topic_id(topic_id).with_partitions(
                        parts
                            .iter()
                            .map(|p| {
                                FetchPartition::default().with_partition_index(*p).with_acknowledgement_batches(
                                    pending
                                        .iter()
                                        .filter(|(pp, _, _)| pp == p)
                                        .map(|(_, f, l)| {
                                            AcknowledgementBatch::default()
                                                .with_first_offset(*f)
                                                .with_last_offset(*l)
                                                .with_acknowledge_types(vec![1])
                                        })
                                        .collect(),
                                )
                            })
                            .collect(),
                    )]);
                let resp = cluster.send(&conn, &req, (1, 1)).await.expect("share fetch");
                assert_eq!(resp.error_code, 0, "share fetch: {:?}", resp.error_message);
                *epoch += 1;
                acked += pending.iter().map(|(_, f, l)| l - f + 1).sum::<i64>();
                pending.clear();
                for t in &resp.responses {
                    for p in &t.partitions {
                        assert_eq!(p.error_code, 0, "fetch partition: {:?}", p.error_message);
                        assert_eq!(p.acknowledge_error_code, 0, "ack: {:?}", p.acknowledge_error_message);
                        for a in &p.acquired_records {
                            pending.push((p.partition_index, a.first_offset, a.last_offset));
                            acquired += a.last_offset - a.first_offset + 1;
                        }
                    }
                }
            }
            if acquired >= n {
                break;
            }
        }
        // The last acknowledgements, on their own requests.
        for (leader, (parts, epoch, pending)) in sessions.iter_mut() {
            let conn = cluster.broker(*leader, TrafficClass::Control).await.unwrap();
            let req = ShareAcknowledgeRequest::default()
                .with_group_id(Some(self.group_id()))
                .with_member_id(Some(StrBytes::from_string(self.member_id.clone())))
                .with_share_session_epoch(*epoch)
                .with_topics(vec![AcknowledgeTopic::default().with_topic_id(topic_id).with_partitions(
                    parts
                        .iter()
                        .map(|p| {
                            AcknowledgePartition::default().with_partition_index(*p).with_acknowledgement_batches(
                                pending
                                    .iter()
                                    .filter(|(pp, _, _)| pp == p)
                                    .map(|(_, f, l)| {
                                        AckBatch::default()
                                            .with_first_offset(*f)
                                            .with_last_offset(*l)
                                            .with_acknowledge_types(vec![1])
                                    })
                                    .collect(),
                            )
                        })
                        .collect(),
                )]);
            let resp = cluster.send(&conn, &req, (1, 1)).await.expect("share acknowledge");
            assert_eq!(resp.error_code, 0, "share acknowledge: {:?}", resp.error_message);
            for t in &resp.responses {
                for p in &t.partitions {
                    assert_eq!(p.error_code, 0, "acknowledge {}: {:?}", p.partition_index, p.error_message);
                }
            }
            *epoch += 1;
            acked += pending.iter().map(|(_, f, l)| l - f + 1).sum::<i64>();
            pending.clear();
        }
        assert!(acked >= n, "acknowledged only {acked} of {n}");
    }

    fn group_id(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.group.clone()))
    }
}

/// Output of a Java tool run.
pub struct ToolOutput {
    pub ok: bool,
    /// The exit code (`None`: ended by a signal).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `ShareGroupCommand` with these args (bootstrap added).
pub fn share_group_command(args: &[&str]) -> ToolOutput {
    let root = env!("CARGO_MANIFEST_DIR");
    let bootstrap = crate::common::bootstrap();
    let out = Command::new(format!("{root}/scripts/kafka"))
        .arg("tool")
        .arg("org.apache.kafka.tools.consumer.group.ShareGroupCommand")
        .args(["--bootstrap-server", &bootstrap])
        .args(args)
        .output()
        .expect("run scripts/kafka tool");
    ToolOutput {
        ok: out.status.success(),
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// The data rows of an aligned table printed by the Java tool, after its header row whose
/// first column is `GROUP` (or `TOPIC`), split on whitespace.
pub fn table_rows(text: &str, header_first: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in text.lines() {
        let cols: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        if cols.is_empty() {
            continue;
        }
        if cols[0] == header_first {
            in_table = true;
            continue;
        }
        if in_table && !line.starts_with('[') {
            rows.push(cols);
        }
    }
    rows
}

/// A member heartbeating in the background (every second) while slow things run.
pub struct KeepAlive {
    stop: std::sync::Arc<tokio::sync::Notify>,
    handle: tokio::task::JoinHandle<Member>,
}

impl Member {
    /// Starts heartbeating in the background; `stop` gives the member back.
    pub fn keep_alive(mut self, cluster: std::sync::Arc<Cluster>) -> KeepAlive {
        let stop = std::sync::Arc::new(tokio::sync::Notify::new());
        let s = stop.clone();
        let handle = tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = s.notified() => return self,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => self.beat(&cluster).await,
                }
            }
        });
        KeepAlive { stop, handle }
    }
}

impl KeepAlive {
    /// Stops the heartbeats and returns the member (still in the group).
    pub async fn stop(self) -> Member {
        self.stop.notify_one();
        self.handle.await.expect("keep-alive task")
    }
}

/// Runs the Java ShareGroupCommand off the async threads.
pub async fn share_group_command_async(args: &[&str]) -> ToolOutput {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    tokio::task::spawn_blocking(move || share_group_command(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .expect("tool task")
}
