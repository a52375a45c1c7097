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
    let set = decode_acquired(data.into(), &[range(104, 104, 0)]).unwrap();
    assert!(set.records.is_empty() && set.gaps.is_empty(), "{set:?}");
    assert_eq!((set.corrupt.len(), set.corrupt[0].acquired.clone()), (1, vec![(104, 104)]));
    assert!(matches!(set.corrupt[0].error, CodecError::CrcMismatch { base_offset: 100, .. }));
}

#[test]
fn a_corrupt_batch_is_reported_and_the_others_decoded() {
    let mut bad = batch_at(5, 5, Compression::None); // 5..=9
    let last = bad.len() - 1;
    bad[last] ^= 0x40; // a flipped bit in the last record
    let mut data = batch_at(0, 5, Compression::Gzip);
    data.extend_from_slice(&bad);
    data.extend(batch_at(10, 5, Compression::None)); // 10..=14
    let ranges = [range(2, 6, 1), range(8, 12, 2)];
    let set = decode_acquired(data.into(), &ranges).unwrap();
    let offsets: Vec<i64> = set.records.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, [2, 3, 4, 10, 11, 12]);
    assert!(set.gaps.is_empty(), "corrupt offsets are no gaps: {:?}", set.gaps);
    let c = &set.corrupt[..];
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].first_offset, c[0].last_offset), (5, 9));
    assert_eq!(c[0].acquired, [(5, 6), (8, 9)], "only what was acquired");
    assert!(matches!(c[0].error, CodecError::CrcMismatch { base_offset: 5, .. }));
}

#[test]
fn unchecked_crcs_pass_a_batch_whose_only_fault_is_its_crc() {
    let mut data = batch_at(0, 5, Compression::None);
    data[17] ^= 0xff; // the stored CRC
    let set = decode_acquired(data.clone().into(), &[range(0, 4, 1)]).unwrap();
    assert!(matches!(set.corrupt[..], [CorruptBatch { error: CodecError::CrcMismatch { .. }, .. }]), "{set:?}");
    let unchecked = DecodeOptions { check_crcs: false, ..DecodeOptions::default() };
    let set = decode_acquired_with(data.into(), &[range(0, 4, 1)], unchecked).unwrap();
    assert_eq!((set.records.len(), set.corrupt.len()), (5, 0));
}

#[test]
fn records_that_do_not_parse_are_corrupt_even_unchecked() {
    let mut bad = batch_at(0, 3, Compression::None);
    let n = bad.len();
    bad[61..n].fill(0xff);
    fix_crc(&mut bad);
    let set = decode_acquired_with(bad.into(), &[range(0, 2, 1)], DecodeOptions { check_crcs: false, ..DecodeOptions::default() }).unwrap();
    assert!(set.records.is_empty() && set.gaps.is_empty());
    assert_eq!(set.corrupt[0].acquired, [(0, 2)]);
}

#[test]
fn broken_framing_makes_the_rest_one_corrupt_stretch() {
    let mut data = batch_at(0, 5, Compression::None);
    let mut second = batch_at(5, 5, Compression::None);
    second[16] = 1; // magic v1
    data.extend_from_slice(&second);
    data.extend(batch_at(10, 5, Compression::None)); // unreachable behind the broken one
    let set = decode_acquired(data.clone().into(), &[range(3, 7, 1), range(12, 20, 1)]).unwrap();
    assert_eq!(set.records.iter().map(|r| r.offset).collect::<Vec<_>>(), [3, 4]);
    assert!(set.gaps.is_empty(), "{:?}", set.gaps);
    assert_eq!((set.corrupt[0].first_offset, set.corrupt[0].last_offset), (5, 20));
    assert_eq!(set.corrupt[0].acquired, [(5, 7), (12, 20)]);
    // Nothing acquired behind the break: nothing is corrupt.
    let set = decode_acquired(data.into(), &[range(0, 4, 1)]).unwrap();
    assert_eq!((set.records.len(), set.corrupt.len()), (5, 0));
}

#[test]
fn subtract_removes_offsets() {
    use super::decode::subtract;
    assert_eq!(subtract(&[(0, 9)], &[(3, 4), (8, 20)]), [(0, 2), (5, 7)]);
    assert_eq!(subtract(&[(0, 2), (5, 6)], &[(0, 6)]), Vec::<(i64, i64)>::new());
    assert_eq!(subtract(&[(i64::MAX - 1, i64::MAX)], &[(i64::MIN, i64::MAX - 1)]), [(i64::MAX, i64::MAX)]);
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
    let set = decode_acquired(data.into(), &[range(max, max, 1)]).unwrap();
    assert_eq!(set.corrupt[0].acquired, [(max, max)]);
}
