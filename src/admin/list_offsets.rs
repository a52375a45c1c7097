//! ListOffsets (key 2) to each partition's leader: a partition's earliest or latest offset,
//! the first offset at a timestamp, or the record with the largest timestamp, as Java's
//! `Admin.listOffsets` with its `OffsetSpec`.

use std::collections::BTreeMap;

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{BrokerId, ListOffsetsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::offsets::TopicPartition;
use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Context, Error, Result};

/// Which offset [`Admin::list_offsets`] asks each partition for (Java's `OffsetSpec`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum OffsetSpec {
    /// The log start offset (Java's `OffsetSpec.earliest()`).
    Earliest,
    /// The log end offset: the offset the next record gets (`OffsetSpec.latest()`).
    Latest,
    /// The first offset whose record has a timestamp at or after this, in ms since the epoch
    /// (`OffsetSpec.forTimestamp`); none when every record is older. Must not be negative.
    Timestamp(i64),
    /// The record with the largest timestamp, with that timestamp
    /// (`OffsetSpec.maxTimestamp()`; ListOffsets v7, Kafka 3.0+).
    MaxTimestamp,
}

impl OffsetSpec {
    /// The request's `Timestamp` field: the protocol's sentinels for the named specs.
    fn wire(self) -> i64 {
        match self {
            OffsetSpec::Earliest => -2,
            OffsetSpec::Latest => -1,
            OffsetSpec::MaxTimestamp => -3,
            OffsetSpec::Timestamp(ms) => ms,
        }
    }

    /// The oldest ListOffsets version that understands the spec (v1 answers with one offset
    /// per partition instead of v0's list; -3 came with v7, KIP-734).
    fn min_version(self) -> i16 {
        match self {
            OffsetSpec::MaxTimestamp => 7,
            _ => 1,
        }
    }
}

/// One partition's answer to [`Admin::list_offsets`] (Java's `ListOffsetsResultInfo`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListedOffset {
    /// The offset; `None` for a [`OffsetSpec::Timestamp`] after every record's (and for
    /// [`OffsetSpec::MaxTimestamp`] on an empty partition).
    pub offset: Option<i64>,
    /// The record's timestamp for [`OffsetSpec::Timestamp`] and [`OffsetSpec::MaxTimestamp`];
    /// `None` for earliest and latest, which name no record.
    pub timestamp: Option<i64>,
    /// The leader epoch of that offset, when the broker knows it.
    pub leader_epoch: Option<i32>,
}

impl Admin {
    /// The offset `spec` names in each partition, asked of each partition's leader. The
    /// result has every partition asked for; a leader that is moving is asked again (ten
    /// tries).
    ///
    /// ```no_run
    /// # async fn demo(admin: kafka_share::admin::Admin) -> kafka_share::Result<()> {
    /// use kafka_share::admin::{OffsetSpec, TopicPartition};
    /// let tps = [TopicPartition::new("orders", 0)];
    /// let end = admin.list_offsets(&tps, OffsetSpec::Latest).await?;
    /// println!("next offset: {:?}", end[&tps[0]].offset);
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative [`OffsetSpec::Timestamp`];
    /// [`Error::UnsupportedVersion`] for [`OffsetSpec::MaxTimestamp`] on a broker older than
    /// Kafka 3.0; a partition's error when it is not retriable.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait; ListOffsets changes nothing on the broker.
    pub async fn list_offsets(
        &self,
        tps: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, ListedOffset>> {
        if let OffsetSpec::Timestamp(ms) = spec {
            if ms < 0 {
                return Err(Error::InvalidArgument(format!(
                    "timestamp {ms} is negative; use OffsetSpec::Earliest or OffsetSpec::Latest for the log's ends"
                )));
            }
        }
        let parts: Vec<(TopicPartition, ())> = tps.iter().map(|tp| (tp.clone(), ())).collect();
        let answers = self
            .to_leaders("ListOffsets", &parts, |leader, parts| async move {
                let conn = self.cluster.broker(leader, TrafficClass::Control).await?;
                let resp = self.cluster.send(&conn, &request(&parts, spec), (spec.min_version(), 10)).await?;
                let answers = resp.topics.iter().flat_map(|t| {
                    t.partitions.iter().map(move |p| {
                        let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
                        let ctx = Context::api("ListOffsets").broker(leader).partition(&tp.topic, tp.partition);
                        let answer = match Error::from_code(p.error_code, None, ctx) {
                            // -1 is the protocol's "none" for each field.
                            None => Ok(ListedOffset {
                                offset: (p.offset >= 0).then_some(p.offset),
                                timestamp: (p.timestamp >= 0).then_some(p.timestamp),
                                leader_epoch: (p.leader_epoch >= 0).then_some(p.leader_epoch),
                            }),
                            Some(e) => Err(e),
                        };
                        (tp, answer)
                    })
                });
                Ok(answers.collect())
            })
            .await?;
        // One partition's failure fails the call: its error says which.
        answers.into_iter().map(|(tp, answer)| Ok((tp, answer?))).collect()
    }

    /// [`list_offsets`](Self::list_offsets) as bare offsets, `-1` where there is none (the
    /// form the reset planner compares and clamps).
    pub(super) async fn offsets_at(
        &self,
        tps: &[TopicPartition],
        spec: OffsetSpec,
    ) -> Result<BTreeMap<TopicPartition, i64>> {
        Ok(self
            .list_offsets(tps, spec)
            .await?
            .into_iter()
            .map(|(tp, l)| (tp, l.offset.unwrap_or(-1)))
            .collect())
    }
}

/// One leader's ListOffsets request for its partitions.
fn request(parts: &[(TopicPartition, ())], spec: OffsetSpec) -> ListOffsetsRequest {
    let mut topics: BTreeMap<&str, Vec<ListOffsetsPartition>> = BTreeMap::new();
    for (tp, ()) in parts {
        topics.entry(&tp.topic).or_default().push(
            ListOffsetsPartition::default()
                .with_partition_index(tp.partition)
                .with_current_leader_epoch(-1)
                .with_timestamp(spec.wire()),
        );
    }
    ListOffsetsRequest::default().with_replica_id(BrokerId(-1)).with_timeout_ms(30_000).with_topics(
        topics
            .into_iter()
            .map(|(t, ps)| {
                ListOffsetsTopic::default()
                    .with_name(TopicName(StrBytes::from_string(t.to_string())))
                    .with_partitions(ps)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_spec_is_sent_as_the_protocols_sentinel_at_a_version_that_knows_it() {
        let tps =
            [(TopicPartition::new("t", 0), ()), (TopicPartition::new("t", 1), ()), (TopicPartition::new("u", 0), ())];
        for (spec, wire, min) in [
            (OffsetSpec::Earliest, -2, 1),
            (OffsetSpec::Latest, -1, 1),
            (OffsetSpec::MaxTimestamp, -3, 7),
            (OffsetSpec::Timestamp(1_700_000_000_000), 1_700_000_000_000, 1),
        ] {
            assert_eq!(spec.min_version(), min, "{spec:?}");
            let req = request(&tps, spec);
            assert_eq!(req.topics.len(), 2, "one entry per topic");
            let sent: Vec<i64> = req.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.timestamp)).collect();
            assert_eq!(sent, [wire; 3], "{spec:?}");
        }
    }
}
