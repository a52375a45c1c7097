//! Batch-level tests: round trips, cross-checks with the `kafka-protocol` crate, integrity and
//! robustness against truncated, corrupted and random input.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records as kp;
use proptest::prelude::*;

use super::*;
use crate::protocol::CodecError;

/// Varied records: null and empty keys/values, headers with null values, timestamps going
/// backwards (negative deltas), values big enough for the codecs to do real work.
pub(super) fn inputs(n: usize) -> Vec<RecordInput> {
    (0..n)
        .map(|i| RecordInput {
            key: (i % 3 != 0).then(|| Bytes::from(format!("key-{i}"))),
            value: match i % 5 {
                0 => None,
                1 => Some(Bytes::new()),
                _ => Some(Bytes::from(format!("value {i} ").repeat(i % 40))),
            },
            headers: (0..i % 3).map(|h| Header::new(format!("h{h}"), (h != 1).then(|| Bytes::from("hv")))).collect(),
            timestamp: 1_700_000_000_000 + (i as i64 * 7919) % 1000 - 500,
        })
        .collect()
}

pub(super) fn build(recs: &[RecordInput], c: Compression) -> Bytes {
    let mut b = BatchBuilder::new();
    for (i, r) in recs.iter().enumerate() {
        let before = b.size_with(r);
        assert_eq!(b.push(r).unwrap(), i as i32);
        assert_eq!(b.size_estimate(), before);
    }
    b.finish(c).unwrap()
}

/// Recomputes the CRC after a test edited a batch.
pub(super) fn fix_crc(batch: &mut [u8]) {
    let crc = crc32c::crc32c(&batch[21..]);
    batch[17..21].copy_from_slice(&crc.to_be_bytes());
}

fn assert_matches(decoded: &[Record], inputs: &[RecordInput], first_offset: i64) {
    assert_eq!(decoded.len(), inputs.len());
    for (i, (d, r)) in decoded.iter().zip(inputs).enumerate() {
        assert_eq!(d.offset, first_offset + i as i64);
        assert_eq!(d.timestamp, r.timestamp);
        assert_eq!(d.timestamp_type, TimestampType::CreateTime);
        assert_eq!((&d.key, &d.value, &d.headers), (&r.key, &r.value, &r.headers));
        assert_eq!((d.delivery_count, d.leader_epoch), (0, -1));
    }
}

#[test]
fn round_trip_every_compression() {
    let recs = inputs(200);
    for c in Compression::ALL {
        let batch = build(&recs, c);
        assert_eq!(batch[22] & 0x07, c.id() as u8);
        assert_matches(&decode_batches(batch).unwrap(), &recs, 0);
    }
}

#[test]
fn uncompressed_fields_are_slices_of_the_input() {
    let recs = inputs(20);
    let batch = build(&recs, Compression::None);
    let span = batch.as_ptr_range();
    for r in decode_batches(batch.clone()).unwrap() {
        for v in r.value.iter().chain(r.key.iter()).filter(|v| !v.is_empty()) {
            assert!(span.contains(&v.as_ptr()));
        }
    }
}

#[test]
fn empty_batch_is_refused_and_headers_expose_str_keys() {
    assert!(BatchBuilder::new().finish(Compression::None).is_err());
    assert_eq!(Header::new("k", None).key_str(), Ok("k"));
    assert!(Header::new(vec![0xff], None).key_str().is_err());
}

fn kp_records(n: usize, base: i64, leader_epoch: i32) -> Vec<kp::Record> {
    inputs(n)
        .into_iter()
        .enumerate()
        .map(|(i, r)| kp::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: leader_epoch,
            producer_id: 42,
            producer_epoch: 1,
            timestamp_type: kp::TimestampType::Creation,
            offset: base + i as i64,
            sequence: i as i32,
            timestamp: r.timestamp,
            key: r.key,
            value: r.value,
            headers: r
                .headers
                .into_iter()
                .map(|h| (StrBytes::from_string(h.key_str().unwrap().into()), h.value))
                .collect::<IndexMap<_, _>>(),
        })
        .collect()
}

fn kp_encode(records: &[kp::Record], c: Compression) -> Bytes {
    let mut buf = BytesMut::new();
    let options = kp::RecordEncodeOptions { version: 2, compression: c.into() };
    kp::RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
    buf.freeze()
}

#[test]
fn decodes_what_kafka_protocol_encodes() {
    for c in Compression::ALL {
        let recs = kp_records(150, 1000, 7);
        let decoded = decode_batches(kp_encode(&recs, c)).unwrap();
        assert_eq!(decoded.len(), recs.len(), "{c}");
        for (d, r) in decoded.iter().zip(&recs) {
            assert_eq!((d.offset, d.timestamp, d.leader_epoch), (r.offset, r.timestamp, 7));
            assert_eq!((&d.key, &d.value), (&r.key, &r.value));
            let headers: Vec<_> = r.headers.iter().map(|(k, v)| (k.as_bytes(), v)).collect();
            let ours: Vec<_> = d.headers.iter().map(|h| (&h.key[..], &h.value)).collect();
            assert_eq!(ours, headers);
        }
    }
}

#[test]
fn kafka_protocol_decodes_what_we_encode() {
    let recs = inputs(150);
    for c in Compression::ALL {
        let batch = build(&recs, c);
        let sets = kp::RecordBatchDecoder::decode_all(&mut batch.clone()).unwrap();
        assert_eq!(sets.len(), 1);
        assert_eq!(sets[0].compression, c.into());
        assert_eq!(batch[53..57], (-1i32).to_be_bytes()); // base sequence
        for (i, (d, r)) in sets[0].records.iter().zip(&recs).enumerate() {
            assert_eq!((d.offset, d.timestamp, d.producer_id), (i as i64, r.timestamp, -1));
            assert_eq!((d.producer_epoch, d.partition_leader_epoch), (-1, -1));
            assert_eq!((&d.key, &d.value), (&r.key, &r.value));
            let ours: Vec<_> = r.headers.iter().map(|h| (&h.key[..], &h.value)).collect();
            let theirs: Vec<_> = d.headers.iter().map(|(k, v)| (k.as_bytes(), v)).collect();
            assert_eq!(ours, theirs);
        }
        assert_eq!(sets[0].records.len(), recs.len());
    }
}

#[test]
fn control_batches_are_skipped() {
    let mut recs = kp_records(3, 5, 0);
    recs.iter_mut().for_each(|r| r.control = true);
    let mut data = kp_encode(&recs, Compression::None).to_vec();
    data.extend_from_slice(&kp_encode(&kp_records(2, 8, 0), Compression::None));
    let offsets: Vec<_> = decode_batches(data.into()).unwrap().iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [8, 9]);
}

#[test]
fn log_append_time_uses_the_max_timestamp() {
    let recs = inputs(10);
    let mut batch = build(&recs, Compression::Lz4).to_vec();
    batch[22] |= 1 << 3;
    fix_crc(&mut batch);
    let max = recs.iter().map(|r| r.timestamp).max().unwrap();
    for r in decode_batches(batch.into()).unwrap() {
        assert_eq!((r.timestamp, r.timestamp_type), (max, TimestampType::LogAppendTime));
    }
}

#[test]
fn corruption_is_detected_by_crc() {
    for c in Compression::ALL {
        let mut batch = build(&inputs(30), c).to_vec();
        let last = batch.len() - 1;
        batch[last] ^= 0x40;
        assert!(matches!(decode_batches(batch.into()), Err(CodecError::CrcMismatch { base_offset: 0, .. })));
    }
}

#[test]
fn old_magic_is_refused() {
    let mut batch = build(&inputs(3), Compression::None).to_vec();
    batch[16] = 1;
    assert!(matches!(decode_batches(batch.into()), Err(CodecError::Invalid { .. })));
}

#[test]
fn trailing_partial_batch_is_ignored() {
    let first = build(&inputs(10), Compression::Gzip);
    let second = build(&inputs(10), Compression::None);
    for cut in 0..second.len() {
        let mut data = first.to_vec();
        data.extend_from_slice(&second[..cut]);
        assert_eq!(decode_batches(data.into()).unwrap().len(), 10, "cut at {cut}");
    }
}

/// Cuts a batch short and makes its length and CRC agree, so the record parser itself meets
/// the truncation: it must error or return fewer records, never panic.
#[test]
fn every_consistent_truncation_errors_or_yields_fewer() {
    for c in Compression::ALL {
        let batch = build(&inputs(25), c);
        for cut in 12..batch.len() {
            let mut b = batch[..cut].to_vec();
            if cut >= 61 {
                let len = (cut - 12) as i32;
                b[8..12].copy_from_slice(&len.to_be_bytes());
                fix_crc(&mut b);
            }
            if let Ok(records) = decode_batches(b.into()) {
                assert!(records.len() < 25, "{c} cut at {cut}");
            }
        }
    }
}

/// Every single-byte change with a matching CRC decodes or errors, without panicking.
#[test]
fn every_byte_flip_with_valid_crc_is_handled() {
    for c in [Compression::None, Compression::Snappy, Compression::Zstd] {
        let batch = build(&inputs(8), c);
        for at in 0..batch.len() {
            for flip in [0x01, 0x80, 0xff] {
                let mut b = batch.to_vec();
                b[at] ^= flip;
                fix_crc(&mut b);
                let _ = decode_batches(b.clone().into());
                let _ = decode_acquired(b.into(), &[range(0, 5, 1)]);
            }
        }
    }
}

pub(super) fn range(first: i64, last: i64, delivery_count: i16) -> AcquiredRange {
    AcquiredRange { first_offset: first, last_offset: last, delivery_count }
}

fn arb_input() -> impl Strategy<Value = RecordInput> {
    let bytes = |max| proptest::option::of(proptest::collection::vec(any::<u8>(), 0..max).prop_map(Bytes::from));
    // UTF-8 keys, as the kafka-protocol crate insists on them.
    let header = ("[a-z]{0,6}", bytes(8)).prop_map(|(k, v)| Header { key: k.into(), value: v });
    let timestamp = prop_oneof![any::<i64>(), -1i64..1 << 45];
    (bytes(40), bytes(300), proptest::collection::vec(header, 0..3), timestamp)
        .prop_map(|(key, value, headers, timestamp)| RecordInput { key, value, headers, timestamp })
}

proptest! {
    /// Random records survive our encoder and both decoders, with every codec.
    #[test]
    fn random_records_round_trip(recs in proptest::collection::vec(arb_input(), 1..20), codec in 0usize..5) {
        let c = Compression::ALL[codec];
        let batch = build(&recs, c);
        let decoded = decode_batches(batch.clone()).unwrap();
        assert_matches(&decoded, &recs, 0);
        // The crate adds timestamp deltas unchecked: keep it away from overflow.
        if recs.iter().all(|r| r.timestamp.unsigned_abs() < 1 << 61) {
            let theirs = kp::RecordBatchDecoder::decode_all(&mut batch.clone()).unwrap();
            let values: Vec<_> = theirs[0].records.iter().map(|r| (r.timestamp, &r.key, &r.value)).collect();
            let ours: Vec<_> = decoded.iter().map(|r| (r.timestamp, &r.key, &r.value)).collect();
            prop_assert_eq!(ours, values);
        }
    }

    #[test]
    fn random_bytes_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..512),
        ranges in proptest::collection::vec((-5i64..50, 0i64..20, 0i16..5), 0..4),
    ) {
        let ranges: Vec<_> = ranges.iter().map(|&(f, l, d)| range(f, f + l, d)).collect();
        let _ = decode_acquired(data.clone().into(), &ranges);
        let _ = decode_batches(data.into());
    }

    /// Random bytes behind a valid v2 header with a matching CRC reach the record parser
    /// and the decompressors.
    #[test]
    fn random_records_section_never_panics(
        body in proptest::collection::vec(any::<u8>(), 0..512),
        codec in 0u8..8,
        count in -2i32..40,
    ) {
        let mut b = build(&inputs(1), Compression::None)[..61].to_vec();
        b.extend_from_slice(&body);
        let len = (b.len() - 12) as i32;
        b[8..12].copy_from_slice(&len.to_be_bytes());
        b[22] = codec;
        b[57..61].copy_from_slice(&count.to_be_bytes());
        fix_crc(&mut b);
        let _ = decode_acquired(b.clone().into(), &[range(0, 100, 1)]);
        let _ = decode_batches(b.into());
    }
}
