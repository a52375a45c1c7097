//! The poll path end to end over an in-memory broker: `ShareConsumer::poll` in implicit and
//! explicit mode against `kafka_share::test_util`'s fake cluster (records and share state held in memory, served
//! over loopback TCP), from the first poll that returns records until 100,000 records were
//! handed out, their acks riding on the fetches. It measures our driver, decoding, buffer, held set and acks, plus
//! the loopback socket and the fake's own work (which is not free: it keeps per-offset state);
//! not a real broker's.
//!
//! Run with `cargo bench --features test-util --bench poll_path` (the fake needs the feature).

use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::test_util::FakeCluster;

const PARTITIONS: i32 = 4;
const PER_PARTITION: i64 = 25_000;
const TOTAL: usize = (PARTITIONS as i64 * PER_PARTITION) as usize;

async fn consume_all(mode: AcknowledgementMode) -> Duration {
    let fake = FakeCluster::single(PARTITIONS, PER_PARTITION).await;
    let cfg = fake.consumer_config("bench").acknowledgement_mode(mode);
    let c = kafka_share::ShareConsumer::connect(cfg).await.expect("connect to the fake broker");
    c.subscribe([fake.topic()]).expect("subscribe");
    // The clock starts when the first records arrive: joining the group is not the poll path.
    let mut start = None;
    let mut got = 0;
    while got < TOTAL {
        let records = c.poll(Duration::from_secs(5)).await.expect("poll");
        assert!(!records.is_empty() || start.is_none(), "the fake broker stopped handing out records at {got}");
        if start.is_none() && !records.is_empty() {
            start = Some(Instant::now());
        }
        if mode == AcknowledgementMode::Explicit {
            for r in &records {
                c.acknowledge(r).expect("acknowledge");
            }
        }
        got += records.len();
    }
    let elapsed = start.map(|s| s.elapsed()).unwrap_or_default();
    c.close(Duration::from_secs(5)).await.expect("close");
    elapsed
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    let mut g = c.benchmark_group("poll_path");
    g.throughput(Throughput::Elements(TOTAL as u64));
    g.sample_size(10);
    for (name, mode) in [("implicit", AcknowledgementMode::Implicit), ("explicit", AcknowledgementMode::Explicit)] {
        g.bench_function(format!("{name}/100k_records_4_partitions"), |b| {
            b.iter_custom(|iters| {
                rt.block_on(async {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        total += consume_all(mode).await;
                    }
                    total
                })
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
