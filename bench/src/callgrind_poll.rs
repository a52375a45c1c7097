//! The poll path for instruction counts: one consumer drains 300,000 records (4 partitions)
//! from the in-memory fake cluster (`test_util`) on a single-threaded runtime, in implicit or
//! explicit mode, then closes. Meant for `valgrind --tool=callgrind`, whose total is the
//! figure compared across changes (the fake's own work is in it too):
//!
//! ```text
//! cargo build --release -p kafka-share-bench
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.implicit \
//!     target/release/kafka-share-bench callgrind-poll implicit
//! ```

use std::time::Duration;

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::test_util::FakeCluster;

const PARTITIONS: i32 = 4;
const PER_PARTITION: i64 = 75_000;

pub fn entry(raw: Vec<String>) {
    let mode = match raw.first().map(String::as_str) {
        Some("explicit") => AcknowledgementMode::Explicit,
        Some("implicit") | None => AcknowledgementMode::Implicit,
        Some(other) => {
            eprintln!("callgrind_poll: mode is implicit or explicit, not {other}");
            std::process::exit(2);
        }
    };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let total = (PARTITIONS as i64 * PER_PARTITION) as usize;
        let fake = FakeCluster::single(PARTITIONS, PER_PARTITION).await;
        let cfg = fake.consumer_config("callgrind").acknowledgement_mode(mode);
        let c = kafka_share::ShareConsumer::connect(cfg).await.expect("connect to the fake broker");
        c.subscribe([fake.topic()]).expect("subscribe");
        let mut got = 0;
        while got < total {
            let records = c.poll(Duration::from_secs(5)).await.expect("poll");
            if mode == AcknowledgementMode::Explicit {
                for r in &records {
                    c.acknowledge(r).expect("acknowledge");
                }
            }
            got += records.len();
        }
        c.close(Duration::from_secs(5)).await.expect("close");
        println!("consumed {got} records");
    });
}
