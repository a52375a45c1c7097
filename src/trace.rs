//! Trace propagation through record headers (feature `otel`): the W3C trace context
//! (`traceparent`, `tracestate`) a producer writes is read back on the consumer side, and
//! each record's processing span becomes a child of the span that produced it, in
//! [OpenTelemetry](https://docs.rs/opentelemetry) terms.
//!
//! The spans are [`tracing`] spans (the crate logs through `tracing` already), given their
//! OpenTelemetry parent through [`tracing-opentelemetry`](https://docs.rs/tracing-opentelemetry):
//! the application installs its `OpenTelemetryLayer` and its exporter, as for any other
//! `tracing` span. The [processor](crate::processor) opens [`process_span`] around every
//! handler call by itself; a poll loop calls it per record.
//!
//! ```no_run
//! # async fn demo() -> kafka_share::Result<()> {
//! use std::time::Duration;
//! use kafka_share::{trace, Producer, ProducerRecord, ShareConsumer, ShareConsumerConfig};
//!
//! // At start, beside the tracer provider and the tracing-opentelemetry layer:
//! opentelemetry::global::set_text_map_propagator(
//!     opentelemetry_sdk::propagation::TraceContextPropagator::new(),
//! );
//!
//! // Producer side, inside the span the record belongs to:
//! # let producer = Producer::connect(kafka_share::producer::ProducerConfig::new("127.0.0.1:19092")).await?;
//! let mut record = ProducerRecord::new("orders", "order-1");
//! trace::inject(&mut record); // traceparent (and tracestate) from the current span
//! producer.send(record).await?.await?;
//!
//! // Consumer side:
//! let config = ShareConsumerConfig::new("127.0.0.1:19092", "orders-workers");
//! let group = config.group_id.clone();
//! let consumer = ShareConsumer::connect(config).await?;
//! for record in consumer.poll(Duration::from_secs(1)).await? {
//!     let _span = trace::process_span(&record, Some(&group)).entered(); // child of the producer's span
//!     // ... process the record ...
//! }
//! # Ok(()) }
//! ```
//!
//! # Which propagator
//! Every function without a propagator argument uses the one the application set with
//! [`opentelemetry::global::set_text_map_propagator`], as the OpenTelemetry specification
//! asks of instrumentation: the application decides the format once for all its
//! instrumentations (W3C trace context, W3C plus baggage through a
//! `TextMapCompositePropagator`, B3 for a Zipkin shop), and this crate needs no SDK of its
//! own, only the API crate. The default global propagator writes and reads nothing, so an
//! application that forgets to set one gets a warning from this module, once. The `_with`
//! forms take a propagator explicitly (`TraceContextPropagator` from `opentelemetry_sdk` for
//! W3C).
//!
//! # What a record's span carries
//! `process_span` makes an INFO span, target `kafka_share::trace`, named
//! `kafka.share.process` for `tracing` and `process <topic>` for OpenTelemetry
//! (`otel.name`), kind consumer, with the messaging semantic conventions' attributes:
//! `messaging.system` = `kafka`, `messaging.operation.name` and `messaging.operation.type` =
//! `process`, `messaging.destination.name` (the topic), `messaging.destination.partition.id`,
//! `messaging.kafka.offset`, `messaging.consumer.group.name` (when given),
//! `messaging.kafka.message.tombstone` (for a null value), and
//! `messaging.kafka.message.delivery_count` (the share group's delivery count: the conventions
//! have no Kafka name for it yet; this one follows Service Bus's
//! `messaging.servicebus.message.delivery_count`).
//!
//! A record without a trace context, or with one the propagator cannot read (a header that
//! is not UTF-8, a malformed `traceparent`), is no error: its span has no remote parent, and
//! keeps whatever parent `tracing` gives it (the span current where it is made; none in the
//! processor).
//!
//! The types are those of `opentelemetry` 0.33 and `tracing-opentelemetry` 0.34: the
//! application's SDK and layer must be of the same releases.

use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::TraceContextExt;
use opentelemetry::Context;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::consumer::{ConsumerRecord, Header};
use crate::producer::ProducerRecord;

/// A consumer record's headers as a propagator reads them: the last header of a key wins
/// (as Java's `Headers.lastHeader`), keys compare exactly (Kafka header keys are
/// case-sensitive), and a null or non-UTF-8 value reads as absent.
struct HeaderExtractor<'a>(&'a [Header]);

impl Extractor for HeaderExtractor<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        let header = self.0.iter().rev().find(|h| h.key.as_ref() == key.as_bytes())?;
        std::str::from_utf8(header.value.as_deref()?).ok()
    }

    fn keys(&self) -> Vec<&str> {
        self.0.iter().filter_map(|h| std::str::from_utf8(&h.key).ok()).collect()
    }
}

/// A producer record's headers as a propagator writes them: setting a key replaces every
/// header of that key (a record forwarded with its old `traceparent` carries one, the new).
/// An empty value (the W3C propagator writes an empty `tracestate`) is left out.
struct HeaderInjector<'a>(&'a mut Vec<(String, Option<Bytes>)>);

impl Injector for HeaderInjector<'_> {
    fn set(&mut self, key: &str, value: String) {
        self.0.retain(|(k, _)| k != key);
        if !value.is_empty() {
            self.0.push((key.to_owned(), Some(Bytes::from(value))));
        }
    }
}

/// Whether the application never set a global propagator (the default one has no fields):
/// then nothing is read or written, which this module says once.
fn warn_if_noop(propagator: &dyn TextMapPropagator) {
    static WARNED: AtomicBool = AtomicBool::new(false);
    if propagator.fields().next().is_none() && !WARNED.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            "no OpenTelemetry text map propagator is set: record headers carry no trace context \
             (call opentelemetry::global::set_text_map_propagator at start, e.g. with \
             opentelemetry_sdk::propagation::TraceContextPropagator)"
        );
    }
}

/// The trace context a record carries (its producer's span), read with the global
/// propagator; an empty context when it carries none, or none readable. Never the current
/// context: a record's parent is the record's.
pub fn extract(record: &ConsumerRecord) -> Context {
    opentelemetry::global::get_text_map_propagator(|p| {
        warn_if_noop(p);
        extract_with(record, p)
    })
}

/// [`extract`] with the given propagator.
pub fn extract_with(record: &ConsumerRecord, propagator: &dyn TextMapPropagator) -> Context {
    propagator.extract_with_context(&Context::new(), &HeaderExtractor(&record.headers))
}

/// The context to write into a record sent from here: the current `tracing` span's
/// OpenTelemetry context, or, where there is none (no span, or no OpenTelemetry layer), the
/// current OpenTelemetry context (`Context::current`, for code that uses the API directly).
pub fn current_context() -> Context {
    let cx = tracing::Span::current().context();
    if cx.span().span_context().is_valid() {
        cx
    } else {
        Context::current()
    }
}

/// Writes the [current context](current_context) into the record's headers with the global
/// propagator (see [`inject_context`]).
pub fn inject(record: &mut ProducerRecord) {
    inject_context(record, &current_context());
}

/// Writes `cx` into the record's headers with the global propagator. The propagator's
/// headers (`traceparent`, `tracestate` for W3C) are replaced, never repeated: those the
/// record already had are removed first, so a forwarded record carries `cx` alone, and none
/// at all when `cx` has no span.
pub fn inject_context(record: &mut ProducerRecord, cx: &Context) {
    opentelemetry::global::get_text_map_propagator(|p| {
        warn_if_noop(p);
        inject_with(record, cx, p)
    })
}

/// [`inject_context`] with the given propagator.
pub fn inject_with(record: &mut ProducerRecord, cx: &Context, propagator: &dyn TextMapPropagator) {
    let headers = &mut record.headers;
    headers.retain(|(k, _)| propagator.fields().all(|f| f != k));
    propagator.inject_context(cx, &mut HeaderInjector(headers));
}

/// Opens a record's processing span (not entered): a child of the span that produced the
/// record when its headers carry a trace context ([`extract`]), with the messaging
/// attributes the [module docs](self) list. `group` is the share group's name, for
/// `messaging.consumer.group.name`. Enter it, or `.instrument(span)` the processing future.
pub fn process_span(record: &ConsumerRecord, group: Option<&str>) -> tracing::Span {
    let span = new_span(record, group);
    if !span.is_disabled() {
        set_remote_parent(&span, extract(record));
    }
    span
}

/// The span itself, no parent set yet.
fn new_span(record: &ConsumerRecord, group: Option<&str>) -> tracing::Span {
    let span = tracing::info_span!(
        target: "kafka_share::trace",
        "kafka.share.process",
        otel.name = format!("process {}", record.topic),
        otel.kind = "consumer",
        messaging.system = "kafka",
        messaging.operation.name = "process",
        messaging.operation.type = "process",
        messaging.destination.name = &*record.topic,
        messaging.destination.partition.id = %record.partition,
        messaging.kafka.offset = record.offset,
        messaging.kafka.message.delivery_count = i64::from(record.delivery_count),
        messaging.consumer.group.name = tracing::field::Empty,
        messaging.kafka.message.tombstone = tracing::field::Empty,
    );
    if let Some(group) = group {
        span.record("messaging.consumer.group.name", group);
    }
    if record.value.is_none() {
        span.record("messaging.kafka.message.tombstone", true);
    }
    span
}

/// Makes `cx` the span's parent if it has a span: otherwise the span keeps the parent
/// `tracing` gave it. (Fails only when no OpenTelemetry layer is installed: nothing to do.)
fn set_remote_parent(span: &tracing::Span, cx: Context) {
    if cx.span().span_context().is_valid() {
        let _ = span.set_parent(cx);
    }
}

/// The span of one batch handler call (the processor's batch form): a batch has no single
/// parent, so, as the messaging conventions say for batches, the span links to each record's
/// producer span instead, and counts the records (`messaging.batch.message_count`); the topic
/// is named when the batch has one.
pub(crate) fn batch_span<'a>(records: impl IntoIterator<Item = &'a ConsumerRecord>, group: &str) -> tracing::Span {
    let records: Vec<&ConsumerRecord> = records.into_iter().collect();
    let topic = records.first().map(|r| &*r.topic).filter(|t| records.iter().all(|r| &*r.topic == *t));
    let span = tracing::info_span!(
        target: "kafka_share::trace",
        "kafka.share.process",
        otel.name = match topic {
            Some(t) => format!("process {t}"),
            None => "process".to_owned(),
        },
        otel.kind = "consumer",
        messaging.system = "kafka",
        messaging.operation.name = "process",
        messaging.operation.type = "process",
        messaging.batch.message_count = records.len() as i64,
        messaging.consumer.group.name = group,
        messaging.destination.name = tracing::field::Empty,
    );
    if let Some(topic) = topic {
        span.record("messaging.destination.name", topic);
    }
    if !span.is_disabled() {
        opentelemetry::global::get_text_map_propagator(|p| {
            warn_if_noop(p);
            for record in &records {
                let cx = extract_with(record, p);
                let sc = cx.span().span_context().clone();
                if sc.is_valid() {
                    span.add_link(sc);
                }
            }
        });
    }
    span
}

#[cfg(test)]
#[path = "trace_tests.rs"]
mod tests;
