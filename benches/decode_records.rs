//! Decoding a 1 MB ShareFetch partition of 100-byte records, in 16 KB batches (the Java
//! producer's default `batch.size`).
//!
//! Run with `cargo bench --bench decode_records`. Each iteration includes dropping the decoded
//! records, as a consumer eventually does.

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use kafka_share::protocol::records::{
    decode_acquired, decode_batches, AcquiredRange, BatchBuilder, Compression, Header, RecordInput,
};

const RESPONSE_BYTES: usize = 1 << 20;
const BATCH_BYTES: usize = 16 << 10;

/// Concatenated batches of ~100-byte records totalling about 1 MB, and the offset count.
fn response(compression: Compression) -> (Bytes, i64) {
    let mut out = Vec::with_capacity(RESPONSE_BYTES + BATCH_BYTES);
    let mut offset = 0i64;
    let mut uncompressed = 0;
    while uncompressed < RESPONSE_BYTES {
        let mut b = BatchBuilder::with_capacity(BATCH_BYTES);
        while b.size_estimate() < BATCH_BYTES {
            let rec = RecordInput {
                key: Some(Bytes::from(format!("key-{offset:08}"))),
                value: Some(Bytes::from(format!("{offset:064}"))),
                headers: vec![Header::new("trace", Some(Bytes::from_static(b"abc")))],
                timestamp: 1_700_000_000_000 + offset,
            };
            b.push(&rec).unwrap();
            offset += 1;
        }
        uncompressed += b.size_estimate();
        let base = offset - b.len() as i64;
        let mut batch = b.finish(compression).unwrap().to_vec();
        batch[..8].copy_from_slice(&base.to_be_bytes()); // outside the CRC
        out.extend_from_slice(&batch);
    }
    (out.into(), offset)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decode_records");
    g.throughput(Throughput::Bytes(RESPONSE_BYTES as u64));
    for compression in [Compression::None, Compression::Lz4, Compression::Zstd] {
        let (data, n) = response(compression);
        let all = [AcquiredRange { first_offset: 0, last_offset: n - 1, delivery_count: 1 }];
        // A shared partition: this consumer owns every fourth slice of 100 offsets.
        let quarter: Vec<_> = (0..n / 400)
            .map(|i| AcquiredRange { first_offset: i * 400, last_offset: i * 400 + 99, delivery_count: 1 })
            .collect();
        g.bench_function(format!("{compression}/decode_batches"), |b| b.iter(|| decode_batches(data.clone()).unwrap()));
        g.bench_function(format!("{compression}/acquired_all"), |b| {
            b.iter(|| decode_acquired(data.clone(), &all).unwrap())
        });
        g.bench_function(format!("{compression}/acquired_quarter"), |b| {
            b.iter(|| decode_acquired(data.clone(), &quarter).unwrap())
        });
        // One range in the last batch: every other batch is skipped unread.
        let tail = [AcquiredRange { first_offset: n - 1, last_offset: n - 1, delivery_count: 1 }];
        g.bench_function(format!("{compression}/acquired_last_only"), |b| {
            b.iter(|| decode_acquired(data.clone(), &tail).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
