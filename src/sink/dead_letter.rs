//! The dead-letter path: a record that failed for good (a per-record failure, or a failure at
//! `share.max.delivery.count` deliveries) is copied to `errors.deadletterqueue.topic.name`
//! and then ACCEPTed; without a dead-letter topic it is REJECTed (the runtime decides which;
//! this file only writes the copy).
//!
//! The copy keeps the key, value, timestamp and headers, and with
//! `errors.deadletterqueue.context.headers.enable=true` gets the headers Connect's
//! `DeadLetterQueueReporter` adds, under the same names, so tools that read Connect's DLQs
//! read ours.

use crate::error::Result;
use crate::producer::{Producer, ProducerRecord};

use super::task::SinkRecord;

/// Connect's error-context header prefix.
pub const ERROR_HEADER_PREFIX: &str = "__connect.errors.";

/// Where a failure happened, in Connect's `Stage` names (the ones before `put`: `pipeline.rs`).
pub(crate) const STAGE_TASK_PUT: &str = "TASK_PUT";

/// A connector's dead-letter writer (one producer, shared by its tasks).
pub(crate) struct DeadLetter {
    pub(crate) topic: String,
    producer: Producer,
    context_headers: bool,
    connector: String,
    class: String,
}

impl DeadLetter {
    pub(crate) fn new(topic: String, producer: Producer, context_headers: bool, connector: &str, class: &str) -> Self {
        DeadLetter { topic, producer, context_headers, connector: connector.to_string(), class: class.to_string() }
    }

    /// The copy of `record` that goes to the dead-letter topic.
    pub(crate) fn copy_of(&self, record: &SinkRecord, task_id: usize, reason: &str, stage: &str) -> ProducerRecord {
        let mut out = ProducerRecord {
            topic: self.topic.clone(),
            partition: None,
            key: record.key.clone(),
            value: record.value.clone(),
            headers: Vec::with_capacity(record.headers.len() + 10),
            timestamp: (record.timestamp >= 0).then_some(record.timestamp),
        };
        for h in &record.headers {
            out.headers.push((String::from_utf8_lossy(&h.key).into_owned(), h.value.clone()));
        }
        if self.context_headers {
            let p = ERROR_HEADER_PREFIX;
            let context = [
                ("topic", record.topic.to_string()),
                ("partition", record.partition.to_string()),
                ("offset", record.offset.to_string()),
                ("connector.name", self.connector.clone()),
                ("task.id", task_id.to_string()),
                ("stage", stage.to_string()),
                ("class.name", self.class.clone()),
                ("exception.class.name", "kafka_share::sink::SinkError".to_string()),
                ("exception.message", reason.to_string()),
                // Not Connect's: share groups add the delivery count, which says how often
                // the record was tried before it was dead-lettered.
                ("delivery.count", record.delivery_count.to_string()),
            ];
            for (k, v) in context {
                out.headers.push((format!("{p}{k}"), Some(v.into())));
            }
        }
        out
    }

    /// Writes the copy and waits for the broker to have it (the original is ACCEPTed only
    /// after this returns `Ok`, so a crash in between redelivers instead of losing it).
    pub(crate) async fn send(&self, record: &SinkRecord, task_id: usize, reason: &str, stage: &str) -> Result<()> {
        self.producer.send_and_wait(self.copy_of(record, task_id, reason, stage)).await.map(|_| ())
    }

    pub(crate) async fn close(&self) {
        let _ = self.producer.close(std::time::Duration::from_secs(10)).await;
    }
}
