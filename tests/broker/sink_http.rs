//! The `http` sink against a real broker's records and a real HTTP server on 127.0.0.1
//! (written here on a tokio TcpListener): batches POSTed as JSON, 5xx / timeouts /
//! refused connections retriable, 4xx failing the batch or, per record, just that record,
//! 401 fatal.

use crate::common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{HttpSink, Registry, SinkError, SinkTask, TaskConfig};
use kafka_share::{ConsumerRecord, ShareConsumer};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// The records as `put` takes them: lent, not copied.
fn lent(records: &[kafka_share::sink::SinkRecord]) -> Vec<&kafka_share::sink::SinkRecord> {
    records.iter().collect()
}

const N: usize = 5;

async fn delivered() -> Vec<ConsumerRecord> {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-http", 1).await;
    let p = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    for i in 0..N {
        let rec = ProducerRecord::new(&topic, format!("v-{i}")).key(format!("k{i}")).header("h", format!("x{i}"));
        p.send_and_wait(rec).await.expect("produce");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
    let group = common::new_group(&admin, "g-sink-http", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.expect("consumer");
    c.subscribe([topic]).expect("subscribe");
    let mut got = common::poll_until(&c, N, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), N);
    c.close(Duration::from_secs(10)).await.expect("close");
    got.sort_by_key(|r| r.offset);
    got
}

/// What the server saw: each request's headers (lower-cased names) and JSON body.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A one-request-per-connection HTTP/1.1 server answering `answer(body)` (a status code; 0
/// means never answer).
async fn server(answer: impl Fn(&Value) -> u16 + Send + Sync + 'static) -> (String, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let url = format!("http://{}/records", listener.local_addr().expect("addr"));
    let seen: Seen = Arc::default();
    let answer = Arc::new(answer);
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else { return };
            let s = s.clone();
            let answer = answer.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                let (head, body) = loop {
                    let n = match sock.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => n,
                    };
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else { continue };
                    let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() >= end + 4 + len {
                        break (head, buf[end + 4..end + 4 + len].to_vec());
                    }
                };
                let json: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let status = answer(&json);
                s.lock().unwrap().push((head, json));
                if status == 0 {
                    tokio::time::sleep(Duration::from_secs(30)).await;
                    return;
                }
                let reply = format!("HTTP/1.1 {status} X\r\ncontent-length: 2\r\nconnection: close\r\n\r\nno");
                let _ = sock.write_all(reply.as_bytes()).await;
                let _ = sock.shutdown().await;
            });
        }
    });
    (url, seen)
}

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn started(pairs: &[(&str, &str)]) -> Box<dyn SinkTask> {
    let cfg = config(pairs);
    let mut task = Registry::with_builtins().get("http").unwrap().create(&cfg).unwrap();
    task.start(&cfg).await.unwrap();
    task
}

#[tokio::test]
async fn a_batch_is_one_json_array_post() {
    let records = delivered().await;
    let (url, seen) = server(|_| 200).await;
    let mut task = started(&[("http.url", &url), ("http.headers", "Authorization:Bearer t0k|X-Source:kafka")]).await;
    task.put(&lent(&records)).await.unwrap();
    task.stop().await;
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "one POST for the batch");
    let (head, body) = &seen[0];
    assert!(head.starts_with("post /records "), "{head}");
    assert!(head.contains("authorization: bearer t0k") && head.contains("x-source: kafka"), "{head}");
    assert!(head.contains("content-type: application/json"), "{head}");
    let arr = body.as_array().expect("a JSON array");
    assert_eq!(arr.len(), N);
    for (r, j) in records.iter().zip(arr) {
        assert_eq!(j["topic"], &*r.topic);
        assert_eq!(j["partition"], r.partition);
        assert_eq!(j["offset"], r.offset);
        assert_eq!(j["timestamp"], r.timestamp);
        assert_eq!(j["key"], r.key_str().unwrap());
        assert_eq!(j["value"], r.value_str().unwrap());
        assert_eq!(j["headers"][0]["key"], "h");
        assert_eq!(j["headers"][0]["value"], format!("x{}", r.offset));
    }
}

#[tokio::test]
async fn base64_encoding_sends_bytes_as_base64() {
    let records = delivered().await;
    let (url, seen) = server(|_| 204).await;
    let mut task = started(&[("http.url", &url), ("http.encoding", "base64")]).await;
    task.put(&lent(&records[..1])).await.unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].1[0]["value"], "di0w", "base64 of v-0");
}

#[tokio::test]
async fn server_errors_timeouts_and_refused_connections_are_retriable() {
    let records = delivered().await;
    let (url, _) = server(|_| 503).await;
    let mut task = started(&[("http.url", &url)]).await;
    let e = task.put(&lent(&records)).await.unwrap_err();
    assert!(matches!(e, SinkError::Retriable { .. }) && e.to_string().contains("503"), "{e:?}");

    let (url, _) = server(|_| 0).await;
    let mut task = started(&[("http.url", &url), ("http.timeout.ms", "300")]).await;
    let e = task.put(&lent(&records)).await.unwrap_err();
    assert!(matches!(e, SinkError::Retriable { .. }), "{e:?}");

    // A port nobody listens on: bind one, note it, close it.
    let port = TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let url = format!("http://127.0.0.1:{port}/");
    let mut task = started(&[("http.url", &url)]).await;
    let e = task.put(&lent(&records)).await.unwrap_err();
    assert!(matches!(e, SinkError::Retriable { .. }), "{e:?}");
}

#[tokio::test]
async fn a_4xx_fails_the_batch_or_only_its_record_and_401_is_fatal() {
    let records = delivered().await;
    // Batch mode: every record of the batch fails.
    let (url, _) = server(|_| 400).await;
    let mut task = started(&[("http.url", &url)]).await;
    match task.put(&lent(&records)).await.unwrap_err() {
        SinkError::Records { failed } => {
            assert_eq!(failed.iter().map(|f| f.index).collect::<Vec<_>>(), (0..N).collect::<Vec<_>>());
            assert!(failed[0].reason.contains("400"), "{}", failed[0].reason);
        }
        e => panic!("expected per-record failures, got {e:?}"),
    }

    // Per-record mode: only the record the server refuses fails; the others are posted.
    let (url, seen) = server(|body| if body["value"] == "v-2" { 422 } else { 200 }).await;
    let mut task = started(&[("http.url", &url), ("http.batch", "false")]).await;
    match task.put(&lent(&records)).await.unwrap_err() {
        SinkError::Records { failed } => assert_eq!(failed.iter().map(|f| f.index).collect::<Vec<_>>(), vec![2]),
        e => panic!("expected one failed record, got {e:?}"),
    }
    {
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), N, "one POST per record");
        assert!(seen.iter().all(|(_, b)| b.is_object()), "per-record bodies are objects");
    }

    let (url, _) = server(|_| 401).await;
    let mut task = started(&[("http.url", &url)]).await;
    let e = task.put(&lent(&records)).await.unwrap_err();
    assert!(matches!(e, SinkError::Fatal { .. }) && e.to_string().contains("http.headers"), "{e:?}");
}

#[tokio::test]
async fn bad_settings_are_refused_before_start() {
    let factory = Registry::with_builtins().get("http").unwrap();
    let e = factory.create(&config(&[])).err().unwrap();
    assert!(e.to_string().contains("http.url"), "{e}");
    let e = factory.create(&config(&[("http.url", "not a url")])).err().unwrap();
    assert!(e.to_string().contains("http.url"), "{e}");
    let mut t = HttpSink::new();
    assert!(t.put(&lent(&[])).await.is_err(), "put before start is an error, not a panic");
}

/// The poison case through the worker: 1,000 records, one that the endpoint always answers
/// 500, `share.max.delivery.count=3`, a dead-letter topic. Exactly the poison record reaches
/// the DLQ, and every good record reaches the endpoint (per record and in batches).
async fn poison_case(batch: bool) {
    poison_case_with(batch, false).await
}

/// `broker_dlq`: `errors.deadletterqueue.mode=broker` (Kafka 4.4): the runtime REJECTs the
/// poison record and the broker writes it to the dead-letter topic.
async fn poison_case_with(batch: bool, broker_dlq: bool) {
    use kafka_share::sink::{ConnectorConfig, Worker, WorkerConfig};
    const RECORDS: usize = 1000;
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-http-poison", 1).await;
    let dlq = if broker_dlq { format!("dlq.{}", common::unique("sink-http")) } else { common::unique("sink-http-dlq") };
    let group = common::new_group(&admin, "g-sink-http-poison", None).await;
    common::produce(&bs, &topic, 1, RECORDS, "v").await;
    let poison = "v-500";
    let (url, seen) = server(move |body| {
        let poisoned = match body {
            Value::Array(items) => items.iter().any(|v| v["value"] == poison),
            v => v["value"] == poison,
        };
        if poisoned {
            500
        } else {
            200
        }
    })
    .await;
    let mode = if broker_dlq { "broker" } else { "client" };
    let pairs: Vec<(String, String)> = [
        ("name", "http-poison"),
        ("connector.class", "http"),
        ("topics", topic.as_str()),
        ("tasks.max", "1"),
        ("share.group.id", group.as_str()),
        ("http.url", url.as_str()),
        ("http.batch", if batch { "true" } else { "false" }),
        ("share.max.delivery.count", "3"),
        ("errors.tolerance", "all"),
        ("errors.deadletterqueue.topic.name", dlq.as_str()),
        ("errors.deadletterqueue.mode", mode),
        ("consumer.override.fetch.max.wait.ms", "200"),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    let w = Worker::new(WorkerConfig::new(&bs), Registry::with_builtins());
    let c = w.start_connector(ConnectorConfig::from_pairs(pairs).expect("config")).await.expect("start");
    let good = |seen: &Seen| {
        let s = seen.lock().unwrap();
        let mut values = std::collections::BTreeSet::new();
        for (_, body) in s.iter() {
            let items = match body {
                Value::Array(items) => items.clone(),
                v => vec![v.clone()],
            };
            // A batch the endpoint refused was not taken.
            if items.iter().any(|v| v["value"] == poison) {
                continue;
            }
            for v in items {
                values.insert(v["value"].as_str().unwrap_or_default().to_string());
            }
        }
        values
    };
    let end = std::time::Instant::now() + Duration::from_secs(120);
    while good(&seen).len() < RECORDS - 1 {
        assert!(std::time::Instant::now() < end, "only {} good records reached the endpoint", good(&seen).len());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let dead = c.metrics().get("sink-record-dead-letter-total");
    let end = std::time::Instant::now() + Duration::from_secs(60);
    while c.metrics().get("sink-record-dead-letter-total").unwrap_or(0.0) < 1.0 {
        assert!(std::time::Instant::now() < end, "the poison record never reached the DLQ ({dead:?})");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(c.failures().is_empty(), "{:?}", c.failures());
    w.close(Duration::from_secs(30)).await.expect("shutdown");
    // The DLQ holds exactly the poison record.
    let read = common::new_group(&admin, "g-read-dlq", None).await;
    let cons = ShareConsumer::connect(common::consumer_config(&bs, &read)).await.expect("consumer");
    cons.subscribe([dlq.clone()]).expect("subscribe");
    let got = common::poll_until(&cons, 2, Duration::from_secs(8), |_| {}).await;
    cons.close(Duration::from_secs(10)).await.expect("close");
    let values: Vec<_> = got.iter().map(|r| r.value_str().unwrap_or_default().to_string()).collect();
    assert_eq!(values, vec![poison.to_string()], "the DLQ holds exactly the poison record");
    if broker_dlq {
        let written_by_broker = got[0].headers.iter().any(|h| h.key.as_ref() == b"__dlq.errors.topic");
        assert!(written_by_broker, "the broker's headers: {:?}", got[0].headers);
    }
    assert_eq!(good(&seen).len(), RECORDS - 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_alone_reaches_the_dead_letter_topic_per_record() {
    poison_case(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_poison_record_alone_reaches_the_dead_letter_topic_in_batches() {
    poison_case(true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_brokers_dead_letter_queue_the_poison_record_alone_lands_there() {
    if common::kafka_version() < (4, 4) {
        // Before 4.4 the connector refuses to start, saying so.
        use kafka_share::sink::{ConnectorConfig, Worker, WorkerConfig};
        let admin = common::admin().await;
        let topic = common::new_topic(&admin, "sink-http-old", 1).await;
        let cfg = ConnectorConfig::from_pairs(
            [
                ("name", "old"),
                ("connector.class", "http"),
                ("topics", topic.as_str()),
                ("http.url", "http://127.0.0.1:9/"),
                ("errors.tolerance", "all"),
                ("errors.deadletterqueue.topic.name", "dlq.old"),
                ("errors.deadletterqueue.mode", "broker"),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<Vec<(String, String)>>(),
        )
        .expect("config");
        let w = Worker::new(WorkerConfig::new(common::bootstrap()), Registry::with_builtins());
        let e = w.start_connector(cfg).await.map(|_| ()).unwrap_err();
        assert!(e.to_string().contains("Kafka 4.4+"), "{e}");
        return;
    }
    poison_case_with(false, true).await;
}
