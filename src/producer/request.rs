//! One ProduceRequest: building it from drained batches, sending it, and reading the
//! broker's answer for each batch.

use std::sync::Arc;

use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::produce_response::PartitionProduceResponse;
use kafka_protocol::messages::{
    InitProducerIdRequest, ProduceRequest, ProduceResponse, ProducerId as ProducerIdNum, TopicName,
};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::batch::Batch;
use super::metrics::{ProducerMetrics, SentBatch};
use super::record::BatchOutcome;
use super::sequences::ProducerId;
use crate::cluster::{Cluster, TrafficClass};
use crate::error::{check, Context, Error, ErrorCode, Result};
use crate::protocol::records::Compression;

/// Produce versions: v3 is the first with record batches v2 (and the oldest Kafka 4 accepts);
/// v13 names topics by id only, which this client does not build yet. v12 is v11 plus the
/// transactions-v2 signal, irrelevant without transactions.
pub(crate) const PRODUCE_VERSIONS: (i16, i16) = (3, 12);

/// What a finished request task hands back.
pub(crate) enum Done {
    Produce {
        node: i32,
        batches: Vec<Batch>,
        /// Batches that could not be encoded (already failed), to leave `in_flight`.
        failed: Vec<Batch>,
        result: Result<ProduceResponse>,
    },
    Metadata {
        topics: Vec<Arc<str>>,
        result: Result<()>,
    },
    ProducerId(Result<ProducerId>),
}

/// InitProducerId versions: v0 is enough without transactions; newer ones only add fields
/// this producer leaves at their defaults.
const INIT_PRODUCER_ID_VERSIONS: (i16, i16) = (0, 5);

/// Asks any broker for a producer id (no transactional id: an idempotent producer).
pub(crate) async fn init_producer_id(cluster: Arc<Cluster>) -> Done {
    let result = async {
        let conn = cluster.any_broker().await?;
        let req = InitProducerIdRequest::default()
            .with_transactional_id(None)
            .with_transaction_timeout_ms(i32::MAX)
            .with_producer_id(ProducerIdNum(-1))
            .with_producer_epoch(-1);
        let resp = cluster.send(&conn, &req, INIT_PRODUCER_ID_VERSIONS).await?;
        check(resp.error_code, None, || Context::api("InitProducerId").broker(conn.node_id))?;
        if resp.producer_id.0 < 0 || resp.producer_epoch < 0 {
            return Err(Error::IncompleteResponse {
                api: "InitProducerId",
                missing: format!(
                    "a producer id (broker {} answered id {} epoch {})",
                    conn.node_id, resp.producer_id.0, resp.producer_epoch
                ),
            });
        }
        Ok(ProducerId { id: resp.producer_id.0, epoch: resp.producer_epoch })
    }
    .await;
    Done::ProducerId(result)
}

pub(crate) fn find_partition<'a>(resp: &'a ProduceResponse, b: &Batch) -> Option<&'a PartitionProduceResponse> {
    let topic = resp.responses.iter().find(|t| t.name.0.as_str() == &*b.topic)?;
    topic.partition_responses.iter().find(|p| p.index == b.partition)
}

/// The broker's answer for one batch.
pub(crate) fn partition_result(resp: &ProduceResponse, node: i32, b: &Batch) -> Result<BatchOutcome> {
    let context = || Context::api("Produce").broker(node).partition(&*b.topic, b.partition);
    let Some(p) = find_partition(resp, b) else {
        return Err(Error::IncompleteResponse { api: "Produce", missing: format!("{} (broker {node})", context()) });
    };
    match ErrorCode::from_code(p.error_code) {
        None => Ok(BatchOutcome { base_offset: p.base_offset, log_append_time: p.log_append_time_ms }),
        Some(code) => {
            // Per-record errors (INVALID_RECORD) say which record was at fault.
            let record_msg = p.record_errors.first().map(|r| {
                let msg = r.batch_index_error_message.as_ref().map(|m| m.to_string()).unwrap_or_default();
                format!("record {} of the batch: {msg}", r.batch_index)
            });
            let message = p.error_message.as_ref().map(|m| m.to_string()).or(record_msg);
            Err(Error::Broker { context: context(), code, message })
        }
    }
}

/// A request's place in its broker's line: requests to one broker must reach the socket in
/// the order the sender created them, or a partition's batches could be written out of order.
pub(crate) struct Turn {
    /// Resolves (or is dropped) once the previous request to the broker is queued.
    pub after: Option<oneshot::Receiver<()>>,
    /// Dropped once this request is queued (or gave up), letting the next one go.
    pub mine: oneshot::Sender<()>,
}

/// One request: seals (compresses) the batches off the sender loop, waits for its turn, queues
/// it on the broker's connection, and returns the answer.
pub(crate) async fn produce(
    cluster: Arc<Cluster>,
    node: i32,
    batches: Vec<Batch>,
    acks: i16,
    compression: Compression,
    turn: Turn,
    metrics: Arc<ProducerMetrics>,
) -> Done {
    let mut topics: Vec<TopicProduceData> = Vec::new();
    let mut sent = Vec::with_capacity(batches.len());
    let mut failed = Vec::new();
    for mut b in batches {
        let bytes = match b.finish(compression) {
            Ok(bytes) => bytes,
            Err(source) => {
                let context = Context::api("Produce").partition(&*b.topic, b.partition);
                metrics.failed(b.records);
                b.done.complete(Err(Error::Codec { context, source }));
                failed.push(b);
                continue;
            }
        };
        let data = PartitionProduceData::default().with_index(b.partition).with_records(Some(bytes));
        match topics.iter_mut().find(|t| t.name.0.as_str() == &*b.topic) {
            Some(t) => t.partition_data.push(data),
            None => topics.push(
                TopicProduceData::default()
                    .with_name(TopicName(StrBytes::from_string(b.topic.to_string())))
                    .with_partition_data(vec![data]),
            ),
        }
        sent.push(b);
    }
    if let Some(after) = turn.after {
        let _ = after.await; // Err: the previous request gave up, which also frees the line
    }
    if sent.is_empty() {
        return Done::Produce { node, batches: sent, failed, result: Ok(ProduceResponse::default()) };
    }
    let timeout = cluster.config().request_timeout;
    let timeout_ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    let req = ProduceRequest::default().with_acks(acks).with_timeout_ms(timeout_ms).with_topic_data(topics);
    let queued = async {
        let conn = cluster.broker(node, TrafficClass::Control).await?;
        let version = conn.versions.pick(<ProduceRequest as Request>::KEY, PRODUCE_VERSIONS.0, PRODUCE_VERSIONS.1)?;
        let response = conn.conn.enqueue(&req, version).await?;
        Ok::<_, Error>((conn, response))
    }
    .await;
    drop(turn.mine); // queued (or failed): the next request may go
    let result = match queued {
        Err(e) => Err(e),
        Ok((conn, response)) => {
            let now = Instant::now();
            metrics.request_sent(sent.iter().map(|b| SentBatch {
                records: b.records,
                bytes: b.size(),
                uncompressed: b.uncompressed,
                queued: now.saturating_duration_since(b.created),
            }));
            match tokio::time::timeout(timeout, response).await {
                Ok(r) => {
                    if r.is_ok() {
                        metrics.request_answered(now.elapsed());
                    }
                    r
                }
                Err(_) => {
                    // As `Connection::call_timeout`: a broker that does not answer gets a new
                    // connection, and a late answer is never matched to anything.
                    let e = Error::Timeout { what: format!("Produce to broker {node}"), after: timeout };
                    conn.conn.close(Some(e.clone()));
                    Err(e)
                }
            }
        }
    };
    Done::Produce { node, batches: sent, failed, result }
}
