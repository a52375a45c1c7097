//! Trace propagation (feature `otel`): a producer writes its span's W3C `traceparent` into
//! each record, the processing engine opens each record's span as a child of it, and the
//! spans go to the console through OpenTelemetry's stdout exporter.
//!
//! ```text
//! cargo run --features otel --example traced -- [bootstrap] [topic]
//! ```
//!
//! Each `checkout` span (the producer side) sends one record; each `process <topic>` span
//! (the consumer side, one per record, made by the engine) has the checkout's trace id and
//! the checkout span as its parent. The exporter prints every span when it ends; the example
//! ends with a line per record comparing the two sides' ids.
//!
//! Bootstrap: argv[1], else env `KAFKA_BOOTSTRAP`, else 127.0.0.1:19092. Topic: argv[2], else
//! `kafka-share-traced`. Sends `DEMO_RECORDS` records (default 3, at most 10) and waits up to
//! 20 s for them.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::processor::{Delivery, Outcome, Processor, ProcessorConfig};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{trace, ShareConsumerConfig};
use opentelemetry::trace::{TraceContextExt, TracerProvider as _};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::layer::SubscriberExt;

type BoxError = Box<dyn std::error::Error>;

const DEADLINE: Duration = Duration::from_secs(20);

#[tokio::main]
async fn main() -> ExitCode {
    // The OpenTelemetry side: W3C trace context in headers, spans printed as they end.
    opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(opentelemetry_stdout::SpanExporter::default())
        .build();
    // The tracing side: every tracing span becomes an OpenTelemetry span.
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("traced-example"));
    let subscriber = tracing_subscriber::registry()
        .with(layer)
        .with(tracing_subscriber::EnvFilter::new("info,kafka_share=info"));
    if let Err(e) = tracing::subscriber::set_global_default(subscriber) {
        eprintln!("error: {e}");
        return ExitCode::FAILURE;
    }
    let result = run().await;
    // Flushes what is left (the simple exporter printed each span already).
    if let Err(e) = provider.shutdown() {
        eprintln!("exporter shutdown: {e}");
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A span's OpenTelemetry (trace id, span id), as hex.
fn ids(span: &tracing::Span) -> (String, String) {
    let cx = span.context();
    let sc = cx.span().span_context().clone();
    (sc.trace_id().to_string(), sc.span_id().to_string())
}

async fn run() -> Result<(), BoxError> {
    let mut args = std::env::args().skip(1);
    let bootstrap = args
        .next()
        .or_else(|| std::env::var("KAFKA_BOOTSTRAP").ok())
        .unwrap_or_else(|| "127.0.0.1:19092".into());
    let topic = args.next().unwrap_or_else(|| "kafka-share-traced".into());
    let n: usize = std::env::var("DEMO_RECORDS").ok().and_then(|v| v.parse().ok()).unwrap_or(3).clamp(1, 10);
    let group = format!("traced-example-{}", std::process::id());
    let admin = Admin::connect_to(&bootstrap).await?;
    if let Err(e) = admin.create_topic(&topic, 1).await {
        println!("topic {topic}: {e} (using it as it is)");
    }
    admin.set_share_auto_offset_reset(&group, "earliest").await?;

    // Producer side: one root span per order, its context written into the record.
    let producer = Producer::connect(ProducerConfig::new(&bootstrap)).await?;
    let mut sent: BTreeMap<String, (String, String)> = BTreeMap::new();
    for i in 0..n {
        let order = format!("order-{}-{i}", std::process::id());
        let checkout = tracing::info_span!("checkout", order = %order);
        let mut record = ProducerRecord::new(&topic, order.clone());
        checkout.in_scope(|| trace::inject(&mut record));
        producer.send(record).await?.instrument(checkout.clone()).await?;
        sent.insert(order, ids(&checkout));
    }
    producer.close(Duration::from_secs(10)).await?;

    // Consumer side: the engine opens `process <topic>` around each handler call.
    let seen: Arc<Mutex<BTreeMap<String, (String, String)>>> = Arc::default();
    let processor = Processor::connect(ShareConsumerConfig::new(&bootstrap, &group), ProcessorConfig::new()).await?;
    processor.consumer().subscribe([topic.clone()])?;
    let s = seen.clone();
    let running = processor.run(move |d: Delivery| {
        let s = s.clone();
        async move {
            // Inside the record's span: it is the current one.
            tracing::info!(offset = d.record().offset, "processing");
            let order = d.record().value_str().unwrap_or_default().to_string();
            s.lock().unwrap().insert(order, ids(&tracing::Span::current()));
            Outcome::Accept
        }
    });
    let start = Instant::now();
    while sent.keys().any(|k| !seen.lock().unwrap().contains_key(k)) && start.elapsed() < DEADLINE {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    running.close(Duration::from_secs(10)).await?;

    let seen = seen.lock().unwrap();
    let mut linked = 0;
    for (order, (trace_id, span_id)) in &sent {
        match seen.get(order) {
            Some((t, _)) => {
                let same = t == trace_id;
                linked += usize::from(same);
                println!(
                    "{order}: checkout span {span_id} in trace {trace_id}; processed in trace {t} (same trace: {same})"
                );
            }
            None => println!("{order}: not processed"),
        }
    }
    println!("{linked} of {n} records processed in their producer's trace");
    if linked < n {
        return Err(format!("only {linked} of {n} records were processed in their producer's trace").into());
    }
    Ok(())
}
