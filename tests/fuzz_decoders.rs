//! Fuzzing on stable Rust: every response decoder of the crate (the share RPC codecs, the
//! bounded walk and the `kafka-protocol` decoders behind it, DescribeShareGroupOffsets, the
//! compact readers, frame headers, record batches with every codec) and the SASL messages a
//! broker sends during a login (SCRAM server-first and server-final, OAUTHBEARER's answer), fed
//! mutations of valid encodings and random bytes.
//!
//! Per input: no panic, and a peak allocation bounded by the bytes present
//! (`ALLOC_PER_BYTE` x input length + `ALLOC_CONSTANT`, plus the decompression limit for each
//! compressed batch the input could hold). A failure prints the input's seed and bytes; the
//! seed replays it alone:
//!
//! ```text
//! FUZZ_SEED=<seed> FUZZ_INPUTS=1 cargo test --test fuzz_decoders
//! ```
//!
//! `FUZZ_INPUTS` (default 20,000) sets how many inputs a run tries, `FUZZ_SEED` the first seed
//! (default: a fixed one, so the suite is deterministic; printed). `scripts/fuzz` runs 1,000,000 in release mode.

mod fuzz;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Instant;

use bytes::Bytes;
use fuzz::alloc::Counting;
use fuzz::mutate;
use fuzz::targets::{self, Target, MAX_DECOMPRESSED};
use kafka_share::protocol::records::{decode_acquired_with, AcquiredRange, Compression, DecodeOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[global_allocator]
static ALLOC: Counting = Counting;

/// The first seed when FUZZ_SEED is not set.
const DEFAULT_SEED: u64 = 20_261_130;

/// Peak allocation allowed per input byte: decoded structs are bigger than their encodings
/// (a 7-byte record becomes a 112-byte `Record`), so a linear bound, not 1.
const ALLOC_PER_BYTE: usize = 16;
/// Peak allocation allowed whatever the input: error strings, small buffers.
const ALLOC_CONSTANT: usize = 64 * 1024;
/// ... and for the decoders that decompress: codec state (a gzip window and buffers).
const ALLOC_CONSTANT_CODECS: usize = 256 * 1024;
/// The smallest record batch (its header): how many batches an input can hold.
const BATCH_HEADER: usize = 61;

/// The seed of input `i` of a run starting at `base` (splitmix64, so neighbours differ).
fn input_seed(base: u64, i: u64) -> u64 {
    let mut z = base.wrapping_add(i.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{name}={v:?} is not a number")))
}

/// The input a seed stands for: its target, version and bytes.
fn generate(targets: &[Target], seed: u64) -> (&Target, StdRng, i16, Vec<u8>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let t = &targets[rng.gen_range(0..targets.len())];
    let (version, base) = &t.corpus[rng.gen_range(0..t.corpus.len())];
    let mut version = *version;
    if rng.gen_bool(0.05) {
        version = rng.gen_range(-1..=20);
    }
    let bytes = if rng.gen_bool(0.75) {
        let (_, other) = &t.corpus[rng.gen_range(0..t.corpus.len())];
        mutate::mutate(&mut rng, base, other)
    } else {
        mutate::random(&mut rng)
    };
    (t, rng, version, bytes)
}

fn bound(t: &Target, len: usize) -> usize {
    // Each batch may inflate to the limit, and its records take up to 16 times their bytes.
    match t.records {
        true => ALLOC_PER_BYTE * len + ALLOC_CONSTANT_CODECS + (len / BATCH_HEADER + 1) * MAX_DECOMPRESSED * (1 + 16),
        false => ALLOC_PER_BYTE * len + ALLOC_CONSTANT,
    }
}

struct Finding {
    target: &'static str,
    seed: u64,
    what: String,
    input: Vec<u8>,
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn every_decoder_survives_mutated_and_random_input() {
    let inputs = env_u64("FUZZ_INPUTS").unwrap_or(20_000);
    // A fixed default: the suite's run is the same every time (a finding never turns up on an
    // unrelated change); scripts/fuzz draws a new seed per run.
    let base = env_u64("FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    // One input alone (a replay) is its own seed.
    let seed_of = |i: u64| if inputs == 1 { base } else { input_seed(base, i) };
    let targets = targets::all();
    eprintln!("fuzz: {inputs} inputs over {} decoders, FUZZ_SEED={base}", targets.len());

    // Panics are caught and reported with their seed; the default hook would print each one.
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let started = Instant::now();
    let mut findings: Vec<Finding> = Vec::new();
    let mut peak: Vec<(usize, usize, f64)> = vec![(0, 0, 0.0); targets.len()]; // max peak, its len, max ratio
    for i in 0..inputs {
        let seed = seed_of(i);
        let (t, mut rng, version, bytes) = generate(&targets, seed);
        let input = Bytes::from(bytes.clone());
        let baseline = ALLOC.start(seed);
        let outcome = catch_unwind(AssertUnwindSafe(|| (t.run)(&mut rng, version, input)));
        let used = ALLOC.stop(baseline);
        let ti = targets.iter().position(|x| std::ptr::eq(x, t)).unwrap_or(0);
        let p = &mut peak[ti];
        if used > p.0 {
            (p.0, p.1) = (used, bytes.len());
        }
        p.2 = p.2.max(used as f64 / (bytes.len().max(1)) as f64);
        if let Err(panic) = outcome {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            findings.push(Finding { target: t.name, seed, what: format!("panic: {what}"), input: bytes });
        } else if used > bound(t, bytes.len()) {
            let what = format!(
                "allocated {used} bytes at peak for {} input bytes (bound {})",
                bytes.len(),
                bound(t, bytes.len())
            );
            findings.push(Finding { target: t.name, seed, what, input: bytes });
        }
    }
    std::panic::set_hook(hook);
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "fuzz: {inputs} inputs in {secs:.1} s ({:.0} inputs/s), {} findings",
        inputs as f64 / secs,
        findings.len()
    );
    for (t, (max, len, ratio)) in targets.iter().zip(&peak) {
        eprintln!("fuzz:   {:<40} peak {max:>9} B (input {len:>5} B), max peak/input {ratio:>7.1}", t.name);
    }
    for f in findings.iter().take(20) {
        eprintln!("fuzz: {} FUZZ_SEED={} {}\n      input {}", f.target, f.seed, f.what, hex(&f.input));
    }
    assert!(findings.is_empty(), "{} inputs failed; replay one with FUZZ_SEED=<seed> FUZZ_INPUTS=1", findings.len());
}

/// A decompression bomb costs at most the limit (and its decoded records), whatever it claims.
#[test]
fn decompression_bombs_allocate_no_more_than_the_limit() {
    let limit = 1 << 20;
    for c in [Compression::Gzip, Compression::Snappy, Compression::Lz4, Compression::Zstd] {
        let batch = bomb(c, 32 << 20);
        let options = DecodeOptions { check_crcs: true, max_decompressed: limit };
        let range = [AcquiredRange { first_offset: 0, last_offset: 0, delivery_count: 1 }];
        let baseline = ALLOC.start(0);
        let set = decode_acquired_with(batch, &range, options).expect("a bomb is a corrupt batch, not an error");
        let used = ALLOC.stop(baseline);
        assert_eq!(set.corrupt.len(), 1, "{c}");
        assert!(set.records.is_empty() && set.gaps.is_empty(), "{c}");
        assert!(used < limit + ALLOC_CONSTANT_CODECS, "{c}: {used} bytes at peak for a {limit}-byte limit");
    }
}

/// Regression (found by this harness): an array count claiming more elements than the input
/// holds reserved `count.min(bytes left)` elements, 80 bytes each for a DescribeShareGroupOffsets
/// group: 320 KB for a 4 KB body. The reservation is now capped by the bytes left.
#[test]
fn a_forged_array_count_reserves_no_more_than_the_input() {
    let mut body = vec![0, 0, 0, 0, 0xff, 0xff, 0x03]; // throttle, then 65534 groups
    body.extend(std::iter::repeat_n(1u8, 4000)); // about 440 tiny groups, then a cut one
    let len = body.len();
    let baseline = ALLOC.start(0);
    let decoded = kafka_share::protocol::private_decoders::describe_share_group_offsets(body.into(), 1);
    let used = ALLOC.stop(baseline);
    assert!(decoded.is_err());
    assert!(used < 4 * len + ALLOC_CONSTANT, "{used} bytes at peak for {len} input bytes");
}

/// One batch holding one record whose value is `size` zeros, compressed with `c`.
fn bomb(c: Compression, size: usize) -> Bytes {
    use kafka_share::protocol::records::{BatchBuilder, RecordInput};
    let mut b = BatchBuilder::new();
    b.push(&RecordInput { key: None, value: Some(vec![0u8; size].into()), headers: vec![], timestamp: 0 })
        .unwrap();
    b.finish(c).unwrap()
}
