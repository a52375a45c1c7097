//! Extraction and injection over record headers, and the spans `process_span` and
//! `batch_span` make, against an in-memory exporter (each test with its own subscriber,
//! thread-local: nothing global but the propagator, which every test sets the same).

use std::sync::Arc;

use bytes::Bytes;
use opentelemetry::trace::{SpanId, TraceContextExt, TraceId, Tracer, TracerProvider as _};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use tracing_subscriber::layer::SubscriberExt;

use super::*;

const TRACEPARENT: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

fn record_with(headers: Vec<Header>) -> ConsumerRecord {
    let mut r = ConsumerRecord::for_test(Arc::from("orders"), 3, 42);
    r.headers = headers;
    r.value = Some(Bytes::from_static(b"v"));
    r
}

fn header(key: &str, value: &[u8]) -> Header {
    Header::new(Bytes::copy_from_slice(key.as_bytes()), Some(Bytes::copy_from_slice(value)))
}

/// What a consumer would read back of a produced record's headers.
fn consumed(p: &ProducerRecord) -> ConsumerRecord {
    record_with(p.headers.iter().map(|(k, v)| Header::new(Bytes::from(k.clone()), v.clone())).collect())
}

fn span_ids(cx: &Context) -> (TraceId, SpanId) {
    let sc = cx.span().span_context().clone();
    (sc.trace_id(), sc.span_id())
}

/// An SDK tracer exporting to memory, and a subscriber with the OpenTelemetry layer on it.
fn otel() -> (SdkTracerProvider, InMemorySpanExporter, impl tracing::Subscriber + Send + Sync) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("kafka-share-test"));
    (provider, exporter, tracing_subscriber::registry().with(layer))
}

fn finished(provider: &SdkTracerProvider, exporter: &InMemorySpanExporter) -> Vec<SpanData> {
    provider.force_flush().expect("flush");
    exporter.get_finished_spans().expect("spans")
}

fn attr(span: &SpanData, key: &str) -> Option<Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| kv.value.clone())
}

#[test]
fn a_context_survives_the_round_trip_through_the_headers() {
    let (provider, _exporter, _) = otel();
    let tracer = provider.tracer("t");
    let parent = Context::new().with_span(tracer.start("produce"));
    let propagator = TraceContextPropagator::new();
    let mut p = ProducerRecord::new("orders", "v").header("app", "x");
    inject_with(&mut p, &parent, &propagator);
    let names: Vec<&str> = p.headers.iter().map(|(k, _)| k.as_str()).collect();
    // The W3C propagator's empty tracestate is not written.
    assert_eq!(names, ["app", "traceparent"]);
    let got = extract_with(&consumed(&p), &propagator);
    assert!(got.span().span_context().is_remote());
    assert_eq!(span_ids(&got), span_ids(&parent));
}

#[test]
fn tracestate_travels_with_traceparent() {
    let propagator = TraceContextPropagator::new();
    let r = record_with(vec![header("traceparent", TRACEPARENT.as_bytes()), header("tracestate", b"vendor=abc")]);
    let cx = extract_with(&r, &propagator);
    assert_eq!(cx.span().span_context().trace_state().header(), "vendor=abc");
    let mut p = ProducerRecord::new("next", "v");
    inject_with(&mut p, &cx, &propagator);
    assert_eq!(
        p.headers,
        vec![
            ("traceparent".into(), Some(Bytes::from(TRACEPARENT))),
            ("tracestate".into(), Some(Bytes::from("vendor=abc")))
        ]
    );
}

#[test]
fn injection_replaces_the_headers_it_writes_and_keeps_the_others() {
    let propagator = TraceContextPropagator::new();
    let old = "00-11111111111111111111111111111111-2222222222222222-01";
    let mut p = ProducerRecord::new("orders", "v")
        .header("traceparent", old)
        .header("a", "1")
        .header("tracestate", "old=1")
        .header("traceparent", old)
        .null_header("b");
    let cx = extract_with(&record_with(vec![header("traceparent", TRACEPARENT.as_bytes())]), &propagator);
    inject_with(&mut p, &cx, &propagator);
    assert_eq!(
        p.headers,
        vec![
            ("a".into(), Some(Bytes::from("1"))),
            ("b".into(), None),
            ("traceparent".into(), Some(Bytes::from(TRACEPARENT)))
        ]
    );
    // Injected twice: still one.
    inject_with(&mut p, &cx, &propagator);
    assert_eq!(p.headers.iter().filter(|(k, _)| k == "traceparent").count(), 1);
    // A context without a span: the stale ones go, nothing comes.
    inject_with(&mut p, &Context::new(), &propagator);
    assert_eq!(p.headers, vec![("a".into(), Some(Bytes::from("1"))), ("b".into(), None)]);
}

#[test]
fn malformed_headers_give_no_parent_and_no_error() {
    let propagator = TraceContextPropagator::new();
    let cases: Vec<Vec<Header>> = vec![
        vec![],
        vec![header("traceparent", b"\xff\xfe not utf-8")],
        vec![header("traceparent", b"garbage")],
        vec![header("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7")],
        vec![header("traceparent", b"00-00000000000000000000000000000000-0000000000000000-01")],
        vec![header("traceparent", b"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01")],
        vec![header("traceparent", b"")],
        vec![Header::new(Bytes::from_static(b"traceparent"), None)],
        // Keys are case-sensitive, as Kafka's are.
        vec![header("Traceparent", TRACEPARENT.as_bytes())],
        vec![header("traceparent", TRACEPARENT.as_bytes()), header("traceparent", b"\xff")],
    ];
    for headers in cases {
        let r = record_with(headers.clone());
        let cx = extract_with(&r, &propagator);
        assert!(!cx.has_active_span(), "{headers:?}");
    }
}

#[test]
fn the_last_header_of_a_key_wins() {
    let propagator = TraceContextPropagator::new();
    let other = "00-11111111111111111111111111111111-2222222222222222-01";
    let r = record_with(vec![header("traceparent", other.as_bytes()), header("traceparent", TRACEPARENT.as_bytes())]);
    let cx = extract_with(&r, &propagator);
    assert_eq!(cx.span().span_context().trace_id(), TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap());
    // A malformed traceparent around a good tracestate: still nothing.
    let r = record_with(vec![header("tracestate", b"a=b")]);
    assert!(!extract_with(&r, &propagator).has_active_span());
}

#[test]
fn a_records_span_is_a_child_of_its_producers_span_with_the_messaging_attributes() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let (provider, exporter, subscriber) = otel();
    let (producer_ids, consumed_record) = tracing::subscriber::with_default(subscriber, || {
        let produce = tracing::info_span!("produce");
        let mut p = ProducerRecord::new("orders", "v");
        produce.in_scope(|| inject(&mut p));
        (span_ids(&produce.context()), consumed(&p))
    });
    // The consumer in a process of its own: only the headers connect the two.
    let (provider2, exporter2, subscriber) = otel();
    tracing::subscriber::with_default(subscriber, || {
        let outer = tracing::info_span!("poll loop");
        let _outer = outer.enter();
        let span = process_span(&consumed_record, Some("workers"));
        span.in_scope(|| tracing::info!("processing"));
    });
    let spans = finished(&provider2, &exporter2);
    let s = spans.iter().find(|s| s.name == "process orders").expect("the process span");
    assert_eq!(s.span_context.trace_id(), producer_ids.0);
    assert_eq!(s.parent_span_id, producer_ids.1);
    assert!(s.parent_span_is_remote);
    assert_eq!(s.span_kind, opentelemetry::trace::SpanKind::Consumer);
    assert_eq!(attr(s, "messaging.system"), Some("kafka".into()));
    assert_eq!(attr(s, "messaging.operation.type"), Some("process".into()));
    assert_eq!(attr(s, "messaging.destination.name"), Some("orders".into()));
    assert_eq!(attr(s, "messaging.destination.partition.id"), Some("3".into()));
    assert_eq!(attr(s, "messaging.kafka.offset"), Some(42i64.into()));
    assert_eq!(attr(s, "messaging.kafka.message.delivery_count"), Some(1i64.into()));
    assert_eq!(attr(s, "messaging.consumer.group.name"), Some("workers".into()));
    assert_eq!(attr(s, "messaging.kafka.message.tombstone"), None);
    // The first process exported nothing of ours.
    assert!(finished(&provider, &exporter).iter().all(|s| s.name == "produce"));
}

#[test]
fn a_record_without_a_readable_context_keeps_the_tracing_parent() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let (provider, exporter, subscriber) = otel();
    let mut r = record_with(vec![header("traceparent", b"\xff\xff")]);
    r.value = None;
    let outer_ids = tracing::subscriber::with_default(subscriber, || {
        let outer = tracing::info_span!("poll loop");
        let ids = span_ids(&outer.context());
        outer.in_scope(|| process_span(&r, None).in_scope(|| {}));
        ids
    });
    let spans = finished(&provider, &exporter);
    let s = spans.iter().find(|s| s.name == "process orders").expect("the process span");
    assert_eq!((s.span_context.trace_id(), s.parent_span_id), outer_ids);
    assert!(!s.parent_span_is_remote);
    assert_eq!(attr(s, "messaging.consumer.group.name"), None);
    assert_eq!(attr(s, "messaging.kafka.message.tombstone"), Some(true.into()));
}

#[test]
fn without_a_layer_nothing_fails() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let r = record_with(vec![header("traceparent", TRACEPARENT.as_bytes())]);
    // No OpenTelemetry layer (no subscriber at all on this thread): a span with no
    // OpenTelemetry context, and nothing written from it.
    let span = process_span(&r, Some("g"));
    assert!(!span.context().has_active_span());
    let mut p = ProducerRecord::new("t", "v");
    inject(&mut p);
    assert!(p.headers.is_empty());
    // The record's context, written from outside any span.
    inject_context(&mut p, &extract(&r));
    assert_eq!(p.headers, vec![("traceparent".into(), Some(Bytes::from(TRACEPARENT)))]);
}

#[test]
fn a_batch_span_links_to_every_records_producer() {
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let (provider, exporter, subscriber) = otel();
    let other = "00-11111111111111111111111111111111-2222222222222222-01";
    let records = [
        record_with(vec![header("traceparent", TRACEPARENT.as_bytes())]),
        record_with(vec![header("traceparent", b"bad")]),
        record_with(vec![header("traceparent", other.as_bytes())]),
    ];
    tracing::subscriber::with_default(subscriber, || batch_span(&records, "sinks").in_scope(|| {}));
    let spans = finished(&provider, &exporter);
    let s = spans.iter().find(|s| s.name == "process orders").expect("the batch span");
    assert_eq!(s.parent_span_id, SpanId::INVALID);
    let linked: Vec<TraceId> = s.links.iter().map(|l| l.span_context.trace_id()).collect();
    assert_eq!(
        linked,
        [
            TraceId::from_hex("4bf92f3577b34da6a3ce929d0e0e4736").unwrap(),
            TraceId::from_hex("11111111111111111111111111111111").unwrap()
        ]
    );
    assert_eq!(attr(s, "messaging.batch.message_count"), Some(3i64.into()));
    assert_eq!(attr(s, "messaging.destination.name"), Some("orders".into()));
    assert_eq!(attr(s, "messaging.consumer.group.name"), Some(Value::from("sinks")));
}
