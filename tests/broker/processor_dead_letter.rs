//! The processing engine's dead-letter destination and decode step against the real broker:
//! records a handler gives up on (or that use up their retries, or fail to decode) are copied
//! to the dead-letter topic with the sink's error headers and ACCEPTed; a copy that fails
//! RELEASEs the record, which a later delivery copies. The same for a batch handler's
//! outcomes (`run_batches`).

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kafka_share::decode::Utf8;
use kafka_share::processor::{
    BatchHandler, DeadLetter, Delivery, Outcome, Processor, ProcessorConfig, Running, Stop, PROCESSOR,
};
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::ConsumerRecord;
use tokio::sync::watch;

fn metric(running: &Running, name: &str) -> f64 {
    running.metrics().get(PROCESSOR, name).unwrap_or(-1.0)
}

/// Waits for `cond`, looking every 50 ms, failing after `timeout` with `what`.
async fn wait_for(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + timeout;
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The records of `topic`, read by a new share group (all `n` of them, or the test fails).
async fn read_all(topic: &str, n: usize) -> Vec<ConsumerRecord> {
    let admin = common::admin().await;
    let group = common::new_group(&admin, "g-dlq-reader", None).await;
    let c = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("connect");
    c.subscribe([topic.to_string()]).expect("subscribe");
    let got = common::poll_until(&c, n, Duration::from_secs(60), |_| {}).await;
    c.close(None).await.expect("close");
    assert_eq!(got.len(), n, "the dead-letter topic {topic}: {got:?}");
    got
}

/// A record's header values by name (the last of each name).
fn headers(r: &ConsumerRecord) -> BTreeMap<String, String> {
    r.headers
        .iter()
        .map(|h| {
            let v = h.value.as_deref().map(|v| String::from_utf8_lossy(v).into_owned()).unwrap_or_default();
            (String::from_utf8_lossy(&h.key).into_owned(), v)
        })
        .collect()
}

async fn produce(topic: &str, records: Vec<ProducerRecord>) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    for r in records {
        p.send_and_wait(ProducerRecord { topic: topic.to_string(), partition: Some(0), ..r })
            .await
            .expect("send");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

/// Six orders on partition 0 of `topic`: value `order-i`, key `ki`, a `trace` header.
async fn produce_six_orders(topic: &str) {
    let records = (0..6)
        .map(|i| ProducerRecord::new("", format!("order-{i}")).key(format!("k{i}")).header("trace", "t"))
        .collect();
    produce(topic, records).await;
}

/// The dead-letter copies of [`produce_six_orders`]' records at `offsets` (sorted by
/// offset), each with its record's key, value and headers and the error headers of a put
/// stage at its first delivery; `handler` is part of the handler's type name.
#[track_caller]
fn assert_copies_of_orders(copies: &[ConsumerRecord], topic: &str, offsets: [&str; 3], handler: &str) {
    assert_eq!(copies.len(), offsets.len());
    for (copy, offset) in copies.iter().zip(offsets) {
        let h = headers(copy);
        assert_eq!(copy.value_str(), Some(format!("order-{offset}").as_str()), "the value kept");
        assert_eq!(copy.key_str(), Some(format!("k{offset}").as_str()), "the key kept");
        assert_eq!(h.get("trace").map(String::as_str), Some("t"), "the record's own headers kept: {h:?}");
        assert_eq!(h["__connect.errors.topic"], topic);
        assert_eq!(h["__connect.errors.partition"], "0");
        assert_eq!(h["__connect.errors.offset"], offset);
        assert_eq!(h["__connect.errors.stage"], "TASK_PUT");
        assert_eq!(h["__connect.errors.delivery.count"], "1");
        assert!(h["__connect.errors.class.name"].contains(handler), "the handler's type: {h:?}");
        assert!(!h.contains_key("__connect.errors.connector.name"), "no connector here: {h:?}");
    }
}

/// ACCEPTed for good: a new member of `group` gets nothing back from `topic`.
async fn assert_nothing_comes_back(group: &str, topic: &str) {
    let other = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), group))
        .await
        .expect("connect");
    other.subscribe([topic]).expect("subscribe");
    let got = common::poll_until(&other, 1, Duration::from_secs(4), |_| {}).await;
    assert!(got.is_empty(), "a dead-lettered record came back: {got:?}");
    other.close(None).await.expect("close");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn given_up_records_reach_the_dead_letter_topic_with_their_headers_and_are_accepted() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-dlq-in", 1).await;
    let dlq = common::new_topic(&admin, "proc-dlq", 1).await;
    let group = common::new_group(&admin, "g-proc-dlq", None).await;
    produce_six_orders(&topic).await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    // One retry, then the record goes to the dead-letter topic too.
    let pc = ProcessorConfig::new()
        .concurrency(4)
        .max_retries(1)
        .retry_backoff(Duration::from_millis(10), Duration::from_millis(10))
        .on_exhausted(Outcome::DeadLetter)
        .dead_letter(DeadLetter::topic(&dlq));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let calls: Arc<Mutex<Vec<(i64, u32, i16)>>> = Arc::default();
    let c = calls.clone();
    let running = processor.run(move |d: Delivery| {
        let c = c.clone();
        async move {
            let r = d.record();
            c.lock().unwrap().push((r.offset, d.attempt(), d.delivery_count()));
            match r.offset {
                0 | 3 => d.dead_letter(format!("order {} is invalid", r.offset)),
                5 => Outcome::Retry, // a failure that never passes
                _ => Outcome::Accept,
            }
        }
    });
    wait_for("three dead letters", Duration::from_secs(60), || metric(&running, "records-dead-lettered-total") >= 3.0)
        .await;
    wait_for("six outcomes", Duration::from_secs(30), || metric(&running, "records-accepted-total") >= 6.0).await;
    assert_eq!(metric(&running, "dead-letter-failures-total"), 0.0);
    assert_eq!(metric(&running, "records-retries-exhausted-total"), 1.0);
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.released, report.rejected), (6, 0, 0), "{report:?}");
    // One delivery each: the dead-lettered were not redelivered; offset 5 got max_retries + 1 calls.
    let mut calls = calls.lock().unwrap().clone();
    calls.sort();
    assert_eq!(calls, [(0, 1, 1), (1, 1, 1), (2, 1, 1), (3, 1, 1), (4, 1, 1), (5, 1, 1), (5, 2, 1)]);

    let mut copies = read_all(&dlq, 3).await;
    copies.sort_by_key(|r| headers(r).get("__connect.errors.offset").cloned());
    assert_copies_of_orders(&copies, &topic, ["0", "3", "5"], "processor_dead_letter");
    let h0 = headers(&copies[0]);
    assert_eq!(h0["__connect.errors.exception.message"], "order 0 is invalid");
    assert_eq!(h0["__connect.errors.exception.class.name"], "kafka_share::processor::Outcome::DeadLetter");
    let h5 = headers(&copies[2]);
    assert_eq!(h5["__connect.errors.exception.class.name"], "kafka_share::processor::RetriesExhausted");
    assert!(h5["__connect.errors.exception.message"].starts_with("retries exhausted: 2 handler calls"), "{h5:?}");

    assert_nothing_comes_back(&group, &topic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_copy_releases_the_record_and_its_next_delivery_is_copied() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-dlq-fail-in", 1).await;
    // Not created yet (the broker creates no topics on first use): the first copy fails.
    let dlq = common::unique("proc-dlq-fail");
    let group = common::new_group(&admin, "g-proc-dlq-fail", None).await;
    produce(&topic, vec![ProducerRecord::new("", "order-0")]).await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let pc = ProcessorConfig::new().dead_letter(DeadLetter::topic(&dlq));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    // The second delivery waits until the test has created the topic (no race with the clock).
    let (created_tx, created) = watch::channel(false);
    let counts: Arc<Mutex<Vec<i16>>> = Arc::default();
    let c = counts.clone();
    let running = processor.run(move |d: Delivery| {
        let (c, mut created) = (c.clone(), created.clone());
        async move {
            c.lock().unwrap().push(d.delivery_count());
            if d.delivery_count() > 1 {
                let _ = created.wait_for(|c| *c).await;
            }
            d.dead_letter("unprocessable")
        }
    });
    wait_for("a failed copy", Duration::from_secs(60), || metric(&running, "dead-letter-failures-total") >= 1.0).await;
    common::create_kept_topic(&admin, &dlq, 1).await;
    created_tx.send_replace(true);
    wait_for("the copy", Duration::from_secs(60), || metric(&running, "records-dead-lettered-total") >= 1.0).await;
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.released, report.rejected), (1, 1, 0), "{report:?}");
    assert_eq!(*counts.lock().unwrap(), [1, 2], "released once, delivered again");
    let copy = &read_all(&dlq, 1).await[0];
    assert_eq!(copy.value_str(), Some("order-0"));
    assert_eq!(headers(copy)["__connect.errors.delivery.count"], "2");
}

/// One record in one batch handler call.
#[derive(Debug, Clone, Copy)]
struct Call {
    offset: i64,
    /// Records in the call.
    batch: usize,
    retries: u32,
    delivery_count: i16,
}

type Calls = Arc<Mutex<Vec<Call>>>;

/// A batch handler that answers each record with `decide`, noting each [`Call`].
struct Batches<F> {
    calls: Calls,
    decide: F,
}

impl<F, Fut> BatchHandler for Batches<F>
where
    F: FnMut(&Delivery) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = Outcome> + Send + 'static,
{
    fn handle<'a>(&'a mut self, batch: &'a [Delivery]) -> BoxFuture<'a, Result<Vec<Outcome>, Stop>> {
        Box::pin(async move {
            let mut out = Vec::with_capacity(batch.len());
            for d in batch {
                let r = d.record();
                let call = Call {
                    offset: r.offset,
                    batch: batch.len(),
                    retries: d.retries(),
                    delivery_count: d.delivery_count(),
                };
                self.calls.lock().unwrap().push(call);
                out.push((self.decide)(d).await);
            }
            Ok(out)
        })
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_handlers_dead_letters_reach_the_topic_with_their_headers_and_are_accepted() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-dlq-batch-in", 1).await;
    let dlq = common::new_topic(&admin, "proc-dlq-batch", 1).await;
    let group = common::new_group(&admin, "g-proc-dlq-batch", None).await;
    produce_six_orders(&topic).await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    // One retry for a record handled alone, then it goes to the dead-letter topic too.
    let pc = ProcessorConfig::new()
        .batch_size(6)
        .max_retries(1)
        .retry_backoff(Duration::from_millis(10), Duration::from_millis(10))
        .on_exhausted(Outcome::DeadLetter)
        .dead_letter(DeadLetter::topic(&dlq));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let calls: Calls = Arc::default();
    let running = processor.run_batches(Batches {
        calls: calls.clone(),
        decide: |d: &Delivery| {
            let r = d.record();
            let outcome = match r.offset {
                1 => d.dead_letter(format!("order {} is invalid", r.offset)),
                4 => Outcome::DeadLetter, // no reason given
                5 => Outcome::Retry,      // a failure that never passes
                _ => Outcome::Accept,
            };
            async move { outcome }
        },
    });
    wait_for("three dead letters", Duration::from_secs(60), || metric(&running, "records-dead-lettered-total") >= 3.0)
        .await;
    wait_for("six outcomes", Duration::from_secs(30), || metric(&running, "records-accepted-total") >= 6.0).await;
    assert_eq!(metric(&running, "dead-letter-failures-total"), 0.0);
    assert_eq!(metric(&running, "records-retries-exhausted-total"), 1.0);
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.released, report.rejected), (6, 0, 0), "{report:?}");
    let calls = calls.lock().unwrap().clone();
    assert!(calls.iter().all(|c| c.delivery_count == 1), "nothing was delivered twice: {calls:?}");
    for offset in 0..5 {
        assert_eq!(calls.iter().filter(|c| c.offset == offset).count(), 1, "offset {offset} had one call: {calls:?}");
    }
    // Offset 5's Retry counts only where it was handled alone (in a larger batch it may have
    // been a batch-mate's failure), as in the per-record form: max_retries + 1 calls alone.
    let alone: Vec<u32> = calls.iter().filter(|c| c.offset == 5 && c.batch == 1).map(|c| c.retries).collect();
    assert_eq!(alone, [0, 1], "{calls:?}");

    let mut copies = read_all(&dlq, 3).await;
    copies.sort_by_key(|r| headers(r).get("__connect.errors.offset").cloned());
    assert_copies_of_orders(&copies, &topic, ["1", "4", "5"], "Batches");
    let h1 = headers(&copies[0]);
    assert_eq!(h1["__connect.errors.exception.message"], "order 1 is invalid");
    assert_eq!(h1["__connect.errors.exception.class.name"], "kafka_share::processor::Outcome::DeadLetter");
    assert_eq!(headers(&copies[1])["__connect.errors.exception.message"], "dead-lettered by the handler");
    let h5 = headers(&copies[2]);
    assert_eq!(h5["__connect.errors.exception.class.name"], "kafka_share::processor::RetriesExhausted");
    assert!(h5["__connect.errors.exception.message"].starts_with("retries exhausted: "), "{h5:?}");

    assert_nothing_comes_back(&group, &topic).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_handlers_failed_copy_releases_the_record_and_its_batch_mate_is_accepted() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-dlq-batch-fail-in", 1).await;
    // Not created yet (the broker creates no topics on first use): the first copy fails.
    let dlq = common::unique("proc-dlq-batch-fail");
    let group = common::new_group(&admin, "g-proc-dlq-batch-fail", None).await;
    produce(&topic, vec![ProducerRecord::new("", "order-0"), ProducerRecord::new("", "order-1")]).await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let pc = ProcessorConfig::new().batch_size(2).dead_letter(DeadLetter::topic(&dlq));
    let processor = Processor::connect(cfg, pc).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    // The second delivery waits until the test has created the topic (no race with the clock).
    let (created_tx, created) = watch::channel(false);
    let calls: Calls = Arc::default();
    let running = processor.run_batches(Batches {
        calls: calls.clone(),
        decide: move |d: &Delivery| {
            let (offset, count) = (d.record().offset, d.delivery_count());
            let outcome = if offset == 1 { d.dead_letter("unprocessable") } else { Outcome::Accept };
            let mut created = created.clone();
            async move {
                if count > 1 {
                    let _ = created.wait_for(|c| *c).await;
                }
                outcome
            }
        },
    });
    wait_for("a failed copy", Duration::from_secs(60), || metric(&running, "dead-letter-failures-total") >= 1.0).await;
    common::create_kept_topic(&admin, &dlq, 1).await;
    created_tx.send_replace(true);
    wait_for("the copy", Duration::from_secs(60), || metric(&running, "records-dead-lettered-total") >= 1.0).await;
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.released, report.rejected), (2, 1, 0), "{report:?}");
    let calls = calls.lock().unwrap().clone();
    let counts = |offset| calls.iter().filter(|c| c.offset == offset).map(|c| c.delivery_count).collect::<Vec<i16>>();
    assert_eq!(counts(0), [1], "accepted at its first delivery: {calls:?}");
    assert_eq!(counts(1), [1, 2], "released once, delivered again: {calls:?}");
    let copy = &read_all(&dlq, 1).await[0];
    assert_eq!(copy.value_str(), Some("order-1"));
    assert_eq!(headers(copy)["__connect.errors.delivery.count"], "2");
    assert_eq!(headers(copy)["__connect.errors.exception.message"], "unprocessable");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_that_fails_to_decode_is_dead_lettered_with_its_coordinates_and_the_others_reach_the_handler() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-decode-in", 1).await;
    let dlq = common::new_topic(&admin, "proc-decode-dlq", 1).await;
    let group = common::new_group(&admin, "g-proc-decode", None).await;
    let bad: &'static [u8] = &[0x6f, 0xff, 0xfe];
    produce(&topic, vec![ProducerRecord::new("", "a"), ProducerRecord::new("", bad), ProducerRecord::new("", "c")])
        .await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new().dead_letter(DeadLetter::topic(&dlq)))
        .await
        .expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let s = seen.clone();
    let running = processor.run_decoded(Utf8, move |_d: Delivery, text: String| {
        let s = s.clone();
        async move {
            s.lock().unwrap().push(text);
            Outcome::Accept
        }
    });
    wait_for("three outcomes", Duration::from_secs(60), || metric(&running, "records-accepted-total") >= 3.0).await;
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.released, report.rejected), (3, 0, 0), "{report:?}");
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["a", "c"], "the good ones, typed");
    let copy = &read_all(&dlq, 1).await[0];
    assert_eq!(copy.value.as_deref(), Some(bad), "the bytes as they were");
    let h = headers(copy);
    assert_eq!(h["__connect.errors.stage"], "VALUE_CONVERTER");
    assert_eq!(h["__connect.errors.offset"], "1");
    assert_eq!(h["__connect.errors.exception.class.name"], "kafka_share::decode::DecodeError");
    let message = &h["__connect.errors.exception.message"];
    assert!(message.starts_with(&format!("cannot decode {topic}-0 at offset 1 with Utf8: ")), "{message}");
}

#[cfg(feature = "json")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_json_is_rejected_without_a_destination_and_orders_arrive_typed() {
    use kafka_share::decode::JsonDecoder;

    #[derive(Debug, serde::Deserialize)]
    struct Order {
        id: u32,
        qty: u32,
    }

    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "proc-json-in", 1).await;
    let group = common::new_group(&admin, "g-proc-json", None).await;
    let values = [r#"{"id":1,"qty":2}"#, r#"{"id":2,"#, r#"{"id":3,"qty":4}"#, r#"{"id":"x","qty":1}"#];
    produce(&topic, values.iter().map(|v| ProducerRecord::new("", *v)).collect()).await;

    let cfg = common::consumer_config(&common::bootstrap(), &group);
    let processor = Processor::connect(cfg, ProcessorConfig::new()).await.expect("connect");
    processor.consumer().subscribe([topic.clone()]).expect("subscribe");
    let seen: Arc<Mutex<Vec<(u32, u32)>>> = Arc::default();
    let s = seen.clone();
    let running = processor.run_decoded(JsonDecoder::<Order>::new(), move |_d: Delivery, order: Order| {
        let s = s.clone();
        async move {
            s.lock().unwrap().push((order.id, order.qty));
            Outcome::Accept
        }
    });
    wait_for("four outcomes", Duration::from_secs(60), || {
        metric(&running, "records-accepted-total") + metric(&running, "records-rejected-total") >= 4.0
    })
    .await;
    let report = running.close(Duration::from_secs(10)).await.expect("shutdown");
    assert_eq!((report.accepted, report.rejected), (2, 2), "{report:?}");
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, [(1, 2), (3, 4)]);
}
