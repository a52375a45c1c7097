//! The dead-letter copy of a record, shared by the sink runtime (`sink::dead_letter`) and the
//! processing engine (`processor::dead_letter`): one header layout, so a tool that reads one
//! dead-letter topic reads the other.
//!
//! The copy keeps the key, value, timestamp and headers, and the error-context headers get the
//! names Connect's `DeadLetterQueueReporter` writes (`__connect.errors.*`), so tools that read
//! Connect's DLQs read ours.

use crate::consumer::ConsumerRecord;
use crate::producer::ProducerRecord;

/// Connect's error-context header prefix.
pub const ERROR_HEADER_PREFIX: &str = "__connect.errors.";

/// Where a failure happened, in Connect's `Stage` names: a sink task's `put` (the sink), or a
/// handler (the engine's counterpart of `put`).
pub(crate) const STAGE_TASK_PUT: &str = "TASK_PUT";
/// The value could not be converted (Connect's stage for a value converter): the engine's
/// decode step failed.
pub(crate) const STAGE_VALUE_CONVERTER: &str = "VALUE_CONVERTER";

/// What the error-context headers say about a failure.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ErrorContext<'a> {
    /// A connector's name and task id (the sink's); None leaves both headers out.
    pub(crate) connector: Option<(&'a str, usize)>,
    /// Connect's stage name (`STAGE_*`).
    pub(crate) stage: &'a str,
    /// What ran: the connector class, or the handler's type.
    pub(crate) class: &'a str,
    /// The failure's type (Connect: the exception's class).
    pub(crate) exception: &'a str,
    /// The failure, in words.
    pub(crate) message: &'a str,
}

/// The copy of `record` for dead-letter topic `topic`, with the error-context headers when
/// `context` is given.
pub(crate) fn copy_of(topic: &str, record: &ConsumerRecord, context: Option<&ErrorContext<'_>>) -> ProducerRecord {
    let mut out = ProducerRecord {
        topic: topic.to_string(),
        partition: None,
        key: record.key.clone(),
        value: record.value.clone(),
        headers: Vec::with_capacity(record.headers.len() + 10),
        timestamp: (record.timestamp >= 0).then_some(record.timestamp),
    };
    for h in &record.headers {
        out.headers.push((String::from_utf8_lossy(&h.key).into_owned(), h.value.clone()));
    }
    let Some(c) = context else { return out };
    let mut put = |k: &str, v: String| out.headers.push((format!("{ERROR_HEADER_PREFIX}{k}"), Some(v.into())));
    put("topic", record.topic.to_string());
    put("partition", record.partition.to_string());
    put("offset", record.offset.to_string());
    if let Some((connector, task)) = c.connector {
        put("connector.name", connector.to_string());
        put("task.id", task.to_string());
    }
    put("stage", c.stage.to_string());
    put("class.name", c.class.to_string());
    put("exception.class.name", c.exception.to_string());
    put("exception.message", c.message.to_string());
    // Not Connect's: share groups add the delivery count, which says how often the record
    // was delivered before it was dead-lettered.
    put("delivery.count", record.delivery_count.to_string());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record() -> ConsumerRecord {
        let mut r = ConsumerRecord::for_test("orders".into(), 2, 41);
        r.key = Some("k".into());
        r.value = Some("v".into());
        r.delivery_count = 3;
        r.headers.push(crate::protocol::records::Header { key: "trace".into(), value: Some("t1".into()) });
        r
    }

    fn names(p: &ProducerRecord) -> Vec<&str> {
        p.headers.iter().map(|(k, _)| k.strip_prefix(ERROR_HEADER_PREFIX).unwrap_or(k)).collect()
    }

    #[test]
    fn the_sink_layout_keeps_connect_order_and_the_delivery_count() {
        let c = ErrorContext {
            connector: Some(("files", 1)),
            stage: STAGE_TASK_PUT,
            class: "FileSink",
            exception: "kafka_share::sink::SinkError",
            message: "disk full",
        };
        let p = copy_of("dlq", &record(), Some(&c));
        assert_eq!((p.topic.as_str(), p.key.as_deref(), p.value.as_deref()), ("dlq", Some(&b"k"[..]), Some(&b"v"[..])));
        assert_eq!(
            names(&p),
            [
                "trace",
                "topic",
                "partition",
                "offset",
                "connector.name",
                "task.id",
                "stage",
                "class.name",
                "exception.class.name",
                "exception.message",
                "delivery.count"
            ]
        );
        let get = |k: &str| p.headers.iter().find(|(n, _)| n == k).and_then(|(_, v)| v.clone());
        assert_eq!(get("__connect.errors.offset").as_deref(), Some(&b"41"[..]));
        assert_eq!(get("__connect.errors.delivery.count").as_deref(), Some(&b"3"[..]));
        assert_eq!(get("__connect.errors.exception.message").as_deref(), Some(&b"disk full"[..]));
    }

    #[test]
    fn without_a_connector_its_headers_are_left_out_and_without_context_all_are() {
        let c =
            ErrorContext { connector: None, stage: STAGE_VALUE_CONVERTER, class: "h", exception: "e", message: "m" };
        let p = copy_of("dlq", &record(), Some(&c));
        assert!(!names(&p).contains(&"connector.name") && !names(&p).contains(&"task.id"));
        assert_eq!(names(&copy_of("dlq", &record(), None)), ["trace"]);
    }
}
