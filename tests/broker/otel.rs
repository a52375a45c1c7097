//! Trace propagation through the real broker (feature `otel`): a producer span's W3C
//! context written into a record with `trace::inject` comes back on the consumer side, where
//! the record's span (made by `trace::process_span` in a poll loop, or by the processor
//! around its handler) is that producer span's child, as an in-memory exporter sees it.
//!
//! One tracing subscriber and one tracer provider for the whole binary (the processor's
//! handlers run on tokio's worker threads, where a thread-local subscriber would not reach);
//! each test finds its own spans by its own topic.

use crate::common;

use std::sync::OnceLock;
use std::time::Duration;

use kafka_share::processor::{Delivery, Outcome, Processor, ProcessorConfig};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{trace, ShareConsumer};
use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, TracerProvider as _};
use opentelemetry::Value;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

const WAIT: Duration = Duration::from_secs(60);

struct Otel {
    provider: SdkTracerProvider,
    exporter: InMemorySpanExporter,
}

/// Installs (once) the W3C propagator, a tracer provider exporting to memory, and a global
/// subscriber with the OpenTelemetry layer.
fn otel() -> &'static Otel {
    static OTEL: OnceLock<Otel> = OnceLock::new();
    OTEL.get_or_init(|| {
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        let exporter = InMemorySpanExporter::default();
        let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
        let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("kafka-share-otel-test"));
        tracing::subscriber::set_global_default(tracing_subscriber::registry().with(layer))
            .expect("the only global subscriber");
        Otel { provider, exporter }
    })
}

fn ids(span: &tracing::Span) -> (TraceId, SpanId) {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    (sc.trace_id(), sc.span_id())
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
}

/// Waits until `n` process spans of `topic` were exported, and returns them.
async fn process_spans(topic: &str, n: usize) -> Vec<SpanData> {
    let otel = otel();
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        otel.provider.force_flush().expect("flush");
        let spans: Vec<SpanData> = otel
            .exporter
            .get_finished_spans()
            .expect("spans")
            .into_iter()
            .filter(|s| s.name == format!("process {topic}"))
            .collect();
        if spans.len() >= n {
            return spans;
        }
        assert!(tokio::time::Instant::now() < end, "{} of {n} process spans of {topic} exported", spans.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Sends `record` inside a fresh root span, with that span's context injected; returns the
/// span's ids.
async fn send_traced(producer: &Producer, mut record: ProducerRecord) -> (TraceId, SpanId) {
    let span = tracing::info_span!(parent: None, "checkout");
    span.in_scope(|| trace::inject(&mut record));
    assert!(record.headers.iter().any(|(k, _)| k == "traceparent"), "{:?}", record.headers);
    producer.send_and_wait(record).await.expect("delivered");
    ids(&span)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polled_records_span_is_a_child_of_its_producers_span() {
    otel();
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "otel-poll", 1).await;
    let group = common::new_group(&admin, "g-otel-poll", None).await;
    let producer = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    // A stale traceparent on the record as built: replaced, not repeated.
    let record = ProducerRecord::new(&topic, "order-1")
        .header("traceparent", "00-11111111111111111111111111111111-2222222222222222-01");
    let (trace_id, span_id) = send_traced(&producer, record).await;
    producer.close(Duration::from_secs(10)).await.expect("producer close");

    let consumer = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.expect("consumer");
    consumer.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&consumer, 1, WAIT, |_| {}).await;
    assert_eq!(got.len(), 1);
    let traceparents: Vec<_> = got[0].headers.iter().filter(|h| h.key.as_ref() == b"traceparent").collect();
    assert_eq!(traceparents.len(), 1, "{:?}", got[0].headers);
    assert_eq!(trace::extract(&got[0]).span().span_context().trace_id(), trace_id);
    let inside = {
        let span = trace::process_span(&got[0], Some(&group));
        let _entered = span.enter();
        ids(&tracing::Span::current())
    };
    consumer.close(Duration::from_secs(10)).await.unwrap();

    let spans = process_spans(&topic, 1).await;
    let s = &spans[0];
    assert_eq!(s.span_context.trace_id(), trace_id, "the producer's trace");
    assert_eq!(s.parent_span_id, span_id, "the producer's span as parent");
    assert!(s.parent_span_is_remote);
    assert_eq!((s.span_context.trace_id(), s.span_context.span_id()), inside);
    assert_eq!(attr(s, "messaging.system"), Some("kafka".into()));
    assert_eq!(attr(s, "messaging.destination.name"), Some(topic.clone().into()));
    assert_eq!(attr(s, "messaging.destination.partition.id"), Some("0".into()));
    assert_eq!(attr(s, "messaging.kafka.offset"), Some(0i64.into()));
    assert_eq!(attr(s, "messaging.consumer.group.name"), Some(group.clone().into()));
    assert_eq!(attr(s, "messaging.kafka.message.delivery_count"), Some(1i64.into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_processor_runs_each_handler_in_a_child_of_the_records_producer_span() {
    otel();
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "otel-proc", 2).await;
    let group = common::new_group(&admin, "g-otel-proc", None).await;
    let producer = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    let mut sent = Vec::new();
    for i in 0..4 {
        let ids = send_traced(&producer, ProducerRecord::new(&topic, format!("job-{i}")).partition(i % 2)).await;
        sent.push((format!("job-{i}"), ids));
    }
    // Two records whose traceparent is not readable: processed all the same, without a parent.
    producer
        .send_and_wait(ProducerRecord::new(&topic, "bad-utf8").partition(0).header("traceparent", &b"\xff\xfe\x00"[..]))
        .await
        .expect("delivered");
    producer
        .send_and_wait(ProducerRecord::new(&topic, "bad-format").partition(1).header("traceparent", "00-zz-yy-01"))
        .await
        .expect("delivered");
    producer.close(Duration::from_secs(10)).await.expect("producer close");

    let processor = Processor::connect(common::consumer_config(&bs, &group), ProcessorConfig::new().concurrency(4))
        .await
        .expect("processor");
    processor.consumer().subscribe([topic.clone()]).unwrap();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let running = processor.run(move |d: Delivery| {
        let tx = tx.clone();
        async move {
            // The handler's current span is the record's.
            let _ = tx.send((d.record().value_str().unwrap_or_default().to_string(), ids(&tracing::Span::current())));
            Outcome::Accept
        }
    });
    let mut seen = std::collections::HashMap::new();
    let end = tokio::time::Instant::now() + WAIT;
    while seen.len() < 6 {
        match tokio::time::timeout_at(end, rx.recv()).await {
            Ok(Some((value, ids))) => {
                seen.insert(value, ids);
            }
            _ => panic!("only {} of 6 records handled: {seen:?}", seen.len()),
        }
    }
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!(report.accepted, 6, "{report:?}");

    let spans = process_spans(&topic, 6).await;
    let by_span_id = |id: SpanId| spans.iter().find(|s| s.span_context.span_id() == id);
    for (value, (trace_id, span_id)) in &sent {
        let (inside_trace, inside_span) = seen[value];
        let s = by_span_id(inside_span).unwrap_or_else(|| panic!("no exported span for {value}"));
        assert_eq!(inside_trace, *trace_id, "{value}: the handler runs in the producer's trace");
        assert_eq!(s.span_context.trace_id(), *trace_id, "{value}");
        assert_eq!(s.parent_span_id, *span_id, "{value}: the producer's span as parent");
        assert_eq!(attr(s, "messaging.consumer.group.name"), Some(group.clone().into()));
    }
    for value in ["bad-utf8", "bad-format"] {
        let (inside_trace, inside_span) = seen[value];
        let s = by_span_id(inside_span).unwrap_or_else(|| panic!("no exported span for {value}"));
        assert_eq!(s.parent_span_id, SpanId::INVALID, "{value}: no parent");
        assert!(sent.iter().all(|(_, (t, _))| *t != inside_trace), "{value}: a trace of its own");
    }
}
