//! The `file` sink against a real broker: records produced, consumed with a share consumer
//! and handed to the sink are written one per line, as Connect's FileStreamSink writes them.

use crate::common;

use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{FileSink, Registry, SinkError, SinkTask, TaskConfig, CONNECT_FILE_SINK_CLASS};
use kafka_share::{ConsumerRecord, ShareConsumer};

/// The records as `put` takes them: lent, not copied.
fn lent(records: &[kafka_share::sink::SinkRecord]) -> Vec<&kafka_share::sink::SinkRecord> {
    records.iter().collect()
}

/// Produces `values` in order to a new one-partition topic and returns them as a share
/// consumer delivers them (ordered by offset).
async fn delivered(values: Vec<Option<Vec<u8>>>) -> Vec<ConsumerRecord> {
    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-file", 1).await;
    let p = Producer::connect(ProducerConfig::new(&bs)).await.expect("producer");
    let n = values.len();
    for v in values {
        let rec = match v {
            Some(v) => ProducerRecord::new(&topic, v),
            None => ProducerRecord::tombstone(&topic, "k"),
        };
        p.send_and_wait(rec).await.expect("produce");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
    let group = common::new_group(&admin, "g-sink-file", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&bs, &group)).await.expect("consumer");
    c.subscribe([topic]).expect("subscribe");
    let mut got = common::poll_until(&c, n, Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), n, "every produced record delivered");
    c.close(Duration::from_secs(10)).await.expect("close");
    got.sort_by_key(|r| r.offset);
    got
}

fn temp_path(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!("{}.txt", common::unique(name)))
}

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[tokio::test]
async fn writes_one_line_per_record_as_file_stream_sink_does() {
    let records = delivered(vec![
        Some(b"first".to_vec()),
        None,
        Some("ünïcode".as_bytes().to_vec()),
        Some(vec![b'a', 0xff, b'b']),
        Some(Vec::new()),
    ])
    .await;
    let path = temp_path("sink-file");
    let cfg = config(&[("file", path.to_str().unwrap()), ("connector.class", CONNECT_FILE_SINK_CLASS)]);
    // Through the registry under Connect's class name, as a Connect user's config would.
    let mut task = Registry::with_builtins().get(CONNECT_FILE_SINK_CLASS).unwrap().create(&cfg).unwrap();
    task.start(&cfg).await.unwrap();
    task.put(&lent(&records[..2])).await.unwrap();
    // `put` alone already handed the lines to the kernel: visible before any flush.
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\nnull\n");
    task.put(&lent(&records[2..])).await.unwrap();
    task.flush().await.unwrap();
    task.stop().await;
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "first\nnull\nünïcode\na\u{FFFD}b\n\n");

    // A second task on the same file appends (FileStreamSink opens with CREATE, APPEND).
    let mut again = FileSink::new();
    again
        .start(&config(&[("file", path.to_str().unwrap()), ("file.fsync.on.put", "true")]))
        .await
        .unwrap();
    again.put(&lent(&records[..1])).await.unwrap();
    again.stop().await;
    let text = std::fs::read_to_string(&path).unwrap();
    assert_eq!(text.lines().count(), 6, "{text:?}");
    assert!(text.ends_with("first\n"));
    let _ = std::fs::remove_file(&path);
}

#[tokio::test]
async fn without_a_file_it_writes_to_standard_output() {
    let records = delivered(vec![Some(b"to stdout".to_vec())]).await;
    let mut task = FileSink::new();
    task.start(&TaskConfig::new()).await.unwrap();
    task.put(&lent(&records)).await.unwrap();
    task.flush().await.unwrap();
    task.stop().await;
}

#[tokio::test]
async fn a_file_that_cannot_be_opened_is_fatal_and_names_the_setting() {
    let mut task = FileSink::new();
    let e = task.start(&config(&[("file", "/nonexistent-dir/sink.txt")])).await.unwrap_err();
    assert!(matches!(e, SinkError::Fatal { .. }), "{e:?}");
    assert!(e.to_string().contains("file=/nonexistent-dir/sink.txt"), "{e}");
    let e = Registry::with_builtins().get("file").unwrap().create(&config(&[("file.fsync.on.put", "maybe")]));
    assert!(e.err().unwrap().to_string().contains("file.fsync.on.put"));
}
