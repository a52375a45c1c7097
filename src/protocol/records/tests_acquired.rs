//! `decode_acquired` tests: range filtering, delivery counts, gaps and batch skipping.

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::records as kp;

use super::tests::{build, fix_crc, inputs, range};
use super::*;
use crate::protocol::CodecError;

/// A batch of `n` records whose base offset is `base` (the base offset is outside the CRC, so
/// it can be patched freely).
fn batch_at(base: i64, n: usize, c: Compression) -> Vec<u8> {
    let mut b = build(&inputs(n), c).to_vec();
    b[..8].copy_from_slice(&base.to_be_bytes());
    b
}

/// A kafka-protocol batch holding exactly `offsets` (as after compaction), or a control batch.
fn kp_batch(offsets: &[i64], control: bool) -> Vec<u8> {
    let records: Vec<_> = offsets
        .iter()
        .map(|&offset| kp::Record {
            transactional: control,
            control,
            delete_horizon: false,
            partition_leader_epoch: 3,
            producer_id: 9,
            producer_epoch: 0,
            timestamp_type: kp::TimestampType::Creation,
            offset,
            sequence: offset as i32,
            timestamp: 5,
            key: None,
            value: Some(Bytes::from(format!("v{offset}"))),
            headers: IndexMap::new(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let options = kp::RecordEncodeOptions { version: 2, compression: kp::Compression::None };
    kp::RecordBatchEncoder::encode(&mut buf, &records, &options).unwrap();
    buf.to_vec()
}

fn offsets_and_counts(set: &AcquiredSet) -> Vec<(i64, i16)> {
    set.records.iter().map(|r| (r.offset, r.delivery_count)).collect()
}

#[test]
fn filters_by_range_and_reports_gaps() {
    let mut data = batch_at(0, 10, Compression::Gzip); // 0..=9
    data.extend(kp_batch(&[10, 12, 15], false)); // compacted
    data.extend(kp_batch(&[16, 17], true)); // transaction markers
    data.extend(batch_at(18, 10, Compression::Snappy)); // 18..=27
    let partial = batch_at(28, 5, Compression::None);
    data.extend_from_slice(&partial[..partial.len() / 2]);

    let ranges = [range(3, 5, 1), range(8, 12, 2), range(14, 19, 3), range(26, 30, 4)];
    let set = decode_acquired(data.into(), &ranges).unwrap();
    assert_eq!(
        offsets_and_counts(&set),
        [(3, 1), (4, 1), (5, 1), (8, 2), (9, 2), (10, 2), (12, 2), (15, 3), (18, 3), (19, 3), (26, 4), (27, 4)]
    );
    assert_eq!(set.gaps, [(11, 11), (14, 14), (16, 17), (28, 30)]);
    let kp_record = &set.records[6];
    assert_eq!(kp_record.value.as_deref(), Some(&b"v12"[..]));
    assert_eq!(kp_record.leader_epoch, 3);
    // Same records as a full decode, restricted to the ranges.
    let recs = inputs(10);
    assert_eq!(set.records[0].value, recs[3].value);
    assert_eq!(set.records[8].headers, recs[0].headers);
}

#[test]
fn batches_outside_the_ranges_are_not_read() {
    // Garbage records, a bad CRC and an unknown codec: fine as long as nothing is acquired there.
    let mut outside = batch_at(100, 5, Compression::None);
    outside[22] = 7;
    let n = outside.len();
    outside[61..n].fill(0xff);
    let mut data = batch_at(0, 5, Compression::Zstd);
    data.extend_from_slice(&outside);

    let set = decode_acquired(data.clone().into(), &[range(0, 99, 0)]).unwrap();
    assert_eq!(set.records.len(), 5);
    assert_eq!(set.gaps, [(5, 99)]);
    assert!(matches!(
        decode_acquired(data.into(), &[range(104, 104, 0)]),
        Err(CodecError::CrcMismatch { base_offset: 100, .. })
    ));
}

#[test]
fn unchecked_crcs_pass_a_batch_whose_only_fault_is_its_crc() {
    let mut data = batch_at(0, 5, Compression::None);
    data[17] ^= 0xff; // the stored CRC
    assert!(matches!(decode_acquired(data.clone().into(), &[range(0, 4, 1)]), Err(CodecError::CrcMismatch { .. })));
    let unchecked = DecodeOptions { check_crcs: false };
    let set = decode_acquired_with(data.into(), &[range(0, 4, 1)], unchecked).unwrap();
    assert_eq!(set.records.len(), 5);
}

#[test]
fn adjacent_gaps_merge_and_missing_data_is_a_gap() {
    let set = decode_acquired(Bytes::new(), &[range(5, 9, 2), range(0, 4, 1)]).unwrap();
    assert_eq!((set.records.len(), set.gaps), (0, vec![(0, 9)]));
    let data = Bytes::from(batch_at(10, 3, Compression::None));
    let set = decode_acquired(data, &[range(8, 10, 1), range(11, 11, 2), range(13, 14, 3)]).unwrap();
    assert_eq!(offsets_and_counts(&set), [(10, 1), (11, 2)]);
    assert_eq!(set.gaps, [(8, 9), (13, 14)]);
}

#[test]
fn no_ranges_means_nothing_is_read() {
    let set = decode_acquired(Bytes::from_static(&[0xff; 100]), &[]).unwrap();
    assert_eq!(set, AcquiredSet::default());
}

#[test]
fn overlapping_unsorted_ranges_first_start_wins() {
    let data = Bytes::from(batch_at(0, 10, Compression::Lz4));
    let set = decode_acquired(data, &[range(5, 9, 2), range(0, 6, 1), range(2, 3, 7)]).unwrap();
    let counts: Vec<_> = set.records.iter().map(|r| r.delivery_count).collect();
    assert_eq!(counts, [1, 1, 1, 1, 1, 1, 1, 2, 2, 2]);
    assert!(set.gaps.is_empty());
}

#[test]
fn inverted_range_is_an_error() {
    assert!(matches!(decode_acquired(Bytes::new(), &[range(5, 4, 1)]), Err(CodecError::Invalid { .. })));
}

#[test]
fn offsets_at_i64_max_do_not_overflow() {
    let max = i64::MAX;
    let data = Bytes::from(batch_at(max - 1, 2, Compression::None));
    let set = decode_acquired(data, &[range(max - 3, max, 1)]).unwrap();
    assert_eq!(offsets_and_counts(&set), [(max - 1, 1), (max, 1)]);
    assert_eq!(set.gaps, [(max - 3, max - 2)]);
    // A batch claiming offsets past i64::MAX is corrupt, not a panic.
    let mut data = batch_at(max, 2, Compression::None);
    fix_crc(&mut data);
    assert!(decode_acquired(data.into(), &[range(max, max, 1)]).is_err());
}
