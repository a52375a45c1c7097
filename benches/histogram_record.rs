//! One record into the lock-free latency histogram (`kafka_share::metrics::Histogram`), the
//! cost the consumer's fetch path, the processor's handler path and the producer's request
//! path pay per measurement: alone on its cache line, and with another thread recording
//! into the same histogram all the while (the processor's handlers finish on any thread).
//!
//! Run with `cargo bench --bench histogram_record`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use kafka_share::metrics::Histogram;

fn bench(c: &mut Criterion) {
    // Latencies spread over the buckets a consumer sees (0.1 ms .. 500 ms), cycled through.
    let durations: Vec<Duration> = (0..1024u64).map(|i| Duration::from_micros(100 + (i * 7919) % 500_000)).collect();
    let h = Histogram::default();
    let mut i = 0;
    c.bench_function("record_uncontended", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            h.record(black_box(durations[i]));
        })
    });

    let shared = Arc::new(Histogram::default());
    let stop = Arc::new(AtomicBool::new(false));
    let other = {
        let (shared, stop, durations) = (shared.clone(), stop.clone(), durations.clone());
        std::thread::spawn(move || {
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) {
                i = (i + 1) & 1023;
                shared.record(durations[i]);
            }
        })
    };
    c.bench_function("record_contended_2_threads", |b| {
        b.iter(|| {
            i = (i + 1) & 1023;
            shared.record(black_box(durations[i]));
        })
    });
    stop.store(true, Ordering::Relaxed);
    let _ = other.join();

    c.bench_function("snapshot", |b| b.iter(|| black_box(h.snapshot())));
}

criterion_group!(benches, bench);
criterion_main!(benches);
