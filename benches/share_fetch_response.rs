//! Decoding a whole ShareFetch response body into records, as the consumer does on every
//! fetch: `ShareFetchResponse::decode` (v2), then `decode_acquired` for each partition.
//!
//! The response is shaped like those of `scripts/bench peers`: 4 partitions, each with one
//! 256 KiB batch of 100-byte records (our producer with `batch.size=262144`), every record
//! acquired by this member. A second case has 16 KiB batches (the Java producer's default),
//! and a third acquires only every other 100-offset slice (a partition shared with another
//! member).
//!
//! Run with `cargo bench --bench share_fetch_response`.

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kafka_share::protocol::records::{decode_acquired, AcquiredRange, BatchBuilder, Compression, RecordInput};
use kafka_share::protocol::share::{AcquiredRecords, FetchPartitionResponse, FetchTopicResponse, ShareFetchResponse};

const PARTITIONS: i32 = 4;
const PARTITION_BYTES: usize = 256 << 10;

/// Batches of 100-byte values (no key, no headers) totalling ~PARTITION_BYTES; the count.
fn partition_records(batch_bytes: usize) -> (Bytes, i64) {
    let mut out = Vec::with_capacity(PARTITION_BYTES + batch_bytes);
    let mut offset = 0i64;
    // Whole batches up to ~PARTITION_BYTES: one 256 KiB batch, or sixteen 16 KiB ones.
    while out.len() + batch_bytes / 2 < PARTITION_BYTES {
        let mut b = BatchBuilder::with_capacity(batch_bytes);
        while b.size_estimate() < batch_bytes - 128 {
            let rec = RecordInput {
                key: None,
                value: Some(Bytes::from(vec![b'x'; 100])),
                headers: vec![],
                timestamp: 1_700_000_000_000 + offset,
            };
            b.push(&rec).unwrap();
            offset += 1;
        }
        let base = offset - b.len() as i64;
        let mut batch = b.finish(Compression::None).unwrap().to_vec();
        batch[..8].copy_from_slice(&base.to_be_bytes()); // base offset: outside the CRC
        out.extend_from_slice(&batch);
    }
    (out.into(), offset)
}

/// An encoded v2 ShareFetch response body, and the number of records acquired in it.
fn response(batch_bytes: usize, slice: Option<i64>) -> (Bytes, u64) {
    let (records, n) = partition_records(batch_bytes);
    let acquired: Vec<AcquiredRecords> = match slice {
        None => vec![AcquiredRecords { first_offset: 0, last_offset: n - 1, delivery_count: 1 }],
        Some(s) => (0..n / (2 * s))
            .map(|i| AcquiredRecords { first_offset: i * 2 * s, last_offset: i * 2 * s + s - 1, delivery_count: 1 })
            .collect(),
    };
    let per: i64 = acquired.iter().map(|a| a.last_offset - a.first_offset + 1).sum();
    let resp = ShareFetchResponse {
        acquisition_lock_timeout_ms: 30_000,
        responses: vec![FetchTopicResponse {
            topic_id: uuid::Uuid::from_u128(0x932),
            partitions: (0..PARTITIONS)
                .map(|p| FetchPartitionResponse {
                    partition_index: p,
                    records: Some(records.clone()),
                    acquired_records: acquired.clone(),
                    ..Default::default()
                })
                .collect(),
        }],
        ..Default::default()
    };
    let mut buf = BytesMut::new();
    resp.encode(2, &mut buf).unwrap();
    (buf.freeze(), per as u64 * PARTITIONS as u64)
}

/// What the consumer does with a response body: decode it, then each partition's records.
fn decode_all(body: &Bytes) -> usize {
    let mut buf = body.clone();
    let resp = ShareFetchResponse::decode(&mut buf, 2).unwrap();
    let mut n = 0;
    for t in resp.responses {
        for p in t.partitions {
            let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| AcquiredRange::from(a)).collect();
            let set = decode_acquired(p.records.unwrap_or_default(), &ranges).unwrap();
            n += set.records.len();
            black_box(set);
        }
    }
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("share_fetch_response");
    for (name, batch, slice) in [
        ("4x256KiB_batches_all_acquired", 256 << 10, None),
        ("4x16KiB_batches_all_acquired", 16 << 10, None),
        ("4x256KiB_batches_half_acquired", 256 << 10, Some(100)),
    ] {
        let (body, n) = response(batch, slice);
        assert_eq!(decode_all(&body) as u64, n);
        g.throughput(Throughput::Elements(n));
        g.bench_function(name, |b| b.iter(|| decode_all(&body)));
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
