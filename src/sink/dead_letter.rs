//! The dead-letter path: a record that failed for good (a per-record failure, or a failure at
//! `share.max.delivery.count` deliveries) is copied to `errors.deadletterqueue.topic.name`
//! and then ACCEPTed; without a dead-letter topic it is REJECTed (the runtime decides which;
//! this file only writes the copy).
//!
//! The copy and its headers are the crate's shared ones (`crate::dead_letter`: Connect's
//! `__connect.errors.*` names, with `errors.deadletterqueue.context.headers.enable=true`), the
//! same as the processing engine's dead-letter destination writes.

use crate::dead_letter::ErrorContext;
use crate::error::Result;
use crate::producer::{Producer, ProducerRecord};

use super::task::SinkRecord;

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
    /// `stage`: Connect's name of where it failed (`TASK_PUT`, or the pipeline's, `pipeline.rs`).
    pub(crate) fn copy_of(&self, record: &SinkRecord, task_id: usize, reason: &str, stage: &str) -> ProducerRecord {
        let context = ErrorContext {
            connector: Some((&self.connector, task_id)),
            stage,
            class: &self.class,
            exception: "kafka_share::sink::SinkError",
            message: reason,
        };
        crate::dead_letter::copy_of(&self.topic, record, self.context_headers.then_some(&context))
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
