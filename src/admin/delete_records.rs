//! DeleteRecords (key 21) to each partition's leader: moves a partition's log start offset
//! up, as Java's `Admin.deleteRecords` with `RecordsToDelete.beforeOffset`. A share group
//! whose start offset is below the new log start moves up with it (the records it had not
//! delivered are gone), which is how Kafka's own share tests skip records.

use std::collections::{BTreeMap, BTreeSet};

use kafka_protocol::messages::delete_records_request::{DeleteRecordsPartition, DeleteRecordsTopic};
use kafka_protocol::messages::{DeleteRecordsRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use super::offsets::TopicPartition;
use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Context, Error, Result};

impl Admin {
    /// Deletes every record below the given offset in each partition: the log start offset
    /// becomes that offset (Java's `deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(o)))`).
    /// Answers each partition's new low watermark (its log start offset), or its error, in the
    /// order asked. An offset past the partition's high watermark is that partition's
    /// `OFFSET_OUT_OF_RANGE`; to delete everything, ask
    /// [`list_offsets`](Self::list_offsets) for [`OffsetSpec::Latest`](super::OffsetSpec::Latest)
    /// first. A leader that is moving is asked again (ten tries).
    ///
    /// ```no_run
    /// # async fn demo(admin: kafka_share::admin::Admin) -> kafka_share::Result<()> {
    /// use kafka_share::admin::TopicPartition;
    /// for (tp, r) in admin.delete_records(&[(TopicPartition::new("orders", 0), 100)]).await? {
    ///     println!("{tp}: log start offset {}", r?);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a negative offset or a partition named twice, before
    /// anything is sent; a request-level failure (connection, timeout) for the whole call;
    /// otherwise per partition.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn delete_records(&self, before: &[(TopicPartition, i64)]) -> Result<Vec<(TopicPartition, Result<i64>)>> {
        let mut seen = BTreeSet::new();
        for (tp, offset) in before {
            if *offset < 0 {
                return Err(Error::InvalidArgument(format!(
                    "cannot delete records of {tp} below offset {offset}; give an offset of 0 or more"
                )));
            }
            if !seen.insert(tp) {
                return Err(Error::InvalidArgument(format!("{tp} is named twice; give one offset per partition")));
            }
        }
        let mut done = self
            .to_leaders("DeleteRecords", before, |leader, parts| async move {
                let conn = self.cluster.broker(leader, TrafficClass::Control).await?;
                let resp = self.cluster.send(&conn, &request(&parts), (0, 2)).await?;
                let answers = resp.topics.iter().flat_map(|t| {
                    t.partitions.iter().map(move |p| {
                        let tp = TopicPartition::new(t.name.0.as_str(), p.partition_index);
                        let ctx = Context::api("DeleteRecords").broker(leader).partition(&tp.topic, tp.partition);
                        let answer = match Error::from_code(p.error_code, None, ctx) {
                            None => Ok(p.low_watermark),
                            Some(e) => Err(e),
                        };
                        (tp, answer)
                    })
                });
                Ok(answers.collect())
            })
            .await?;
        Ok(before
            .iter()
            .map(|(tp, _)| {
                let r = done.remove(tp).unwrap_or_else(|| {
                    Err(Error::IncompleteResponse { api: "DeleteRecords", missing: tp.to_string() })
                });
                (tp.clone(), r)
            })
            .collect())
    }
}

/// One leader's DeleteRecords request for its partitions.
fn request(parts: &[(TopicPartition, i64)]) -> DeleteRecordsRequest {
    let mut topics: BTreeMap<&str, Vec<DeleteRecordsPartition>> = BTreeMap::new();
    for (tp, offset) in parts {
        topics
            .entry(&tp.topic)
            .or_default()
            .push(DeleteRecordsPartition::default().with_partition_index(tp.partition).with_offset(*offset));
    }
    DeleteRecordsRequest::default().with_timeout_ms(30_000).with_topics(
        topics
            .into_iter()
            .map(|(t, ps)| {
                DeleteRecordsTopic::default()
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
    fn one_request_entry_per_topic_with_each_partitions_offset() {
        let parts =
            [(TopicPartition::new("b", 1), 7), (TopicPartition::new("a", 0), 3), (TopicPartition::new("b", 0), 0)];
        let req = request(&parts);
        let sent: Vec<(&str, Vec<(i32, i64)>)> = req
            .topics
            .iter()
            .map(|t| (t.name.0.as_str(), t.partitions.iter().map(|p| (p.partition_index, p.offset)).collect()))
            .collect();
        assert_eq!(sent, [("a", vec![(0, 3)]), ("b", vec![(1, 7), (0, 0)])]);
    }
}
