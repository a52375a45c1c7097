//! Building acknowledgement batches from 10,000 acks (`kafka_share::share::acks::PartitionAcks`):
//! in random order, what a consumer does when worker tasks acknowledge a poll's records in
//! whatever order they finish; and in offset order, the usual case (implicit mode, or one
//! task acknowledging as it goes).
//!
//! Run with `cargo bench --bench ack_batches`.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use kafka_share::share::acks::{AckKind, PartitionAcks};
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};

const N: i64 = 10_000;
const ACCEPT: AckKind = AckKind::Accept;
const RELEASE: AckKind = AckKind::Release;

/// (offset, wire type) pairs: offsets 1_000_000.. in a seeded random order.
fn acks(types: impl Fn(i64, &mut StdRng) -> AckKind, gap_every: Option<i64>) -> Vec<(i64, AckKind)> {
    let mut v = in_order(types, gap_every);
    v.shuffle(&mut StdRng::seed_from_u64(1206));
    v
}

/// The same pairs in offset order.
fn in_order(types: impl Fn(i64, &mut StdRng) -> AckKind, gap_every: Option<i64>) -> Vec<(i64, AckKind)> {
    let mut rng = StdRng::seed_from_u64(932);
    let v: Vec<(i64, AckKind)> = (0..N)
        .filter(|o| gap_every.is_none_or(|g| o % g != g - 1))
        .map(|o| (1_000_000 + o, types(o, &mut rng)))
        .collect();
    v
}

fn bench(c: &mut Criterion) {
    let cases = [
        // One contiguous run, one type: collapses to a single batch.
        ("accept_contiguous", acks(|_, _| ACCEPT, None)),
        // 1 in 10 released at random: one batch with a type per offset.
        ("mixed_10pct_release", acks(|_, r| if r.gen_ratio(1, 10) { RELEASE } else { ACCEPT }, None)),
        // Every 100th offset missing (another member holds it): 100 batches.
        ("accept_gaps_every_100", acks(|_, _| ACCEPT, Some(100))),
        // In offset order: each ack extends the last run.
        ("in_order_accept", in_order(|_, _| ACCEPT, None)),
        ("in_order_mixed_10pct_release", in_order(|_, r| if r.gen_ratio(1, 10) { RELEASE } else { ACCEPT }, None)),
    ];
    let mut g = c.benchmark_group("ack_batches");
    g.throughput(Throughput::Elements(N as u64));
    for (name, input) in &cases {
        g.bench_function(format!("{name}/add_and_build"), |b| {
            b.iter(|| {
                let mut a = PartitionAcks::default();
                for &(o, t) in input {
                    a.add(o, t);
                }
                black_box(a.to_batches())
            })
        });
        let mut filled = PartitionAcks::default();
        for &(o, t) in input {
            filled.add(o, t);
        }
        g.bench_function(format!("{name}/build_only"), |b| b.iter(|| black_box(filled.to_batches())));
        g.bench_function(format!("{name}/split_renew_then_build"), |b| {
            b.iter_batched(
                || filled.clone(),
                |mut a| black_box(a.split_renew(false).to_batches()),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
