//! Decoding records for share consumers: whole-batch skipping by acquired ranges, CRC check,
//! decompression, and zero-copy record parsing.

use bytes::Bytes;

use super::batch::{Batches, RawBatch, ATTR_LOG_APPEND_TIME};
use super::compression::decompress;
use super::wire::Reader;
use super::{AcquiredRange, AcquiredSet, CorruptBatch, Header, Record, TimestampType};
use crate::protocol::CodecError;

/// The smallest record: length, attributes, timestamp delta, offset delta, key length,
/// value length, header count, one byte each. Bounds pre-allocation by the bytes present.
const MIN_RECORD_LEN: usize = 7;

/// The default limit on one decompressed batch: 50 MiB, the Java consumer's default
/// `fetch.max.bytes`.
pub const DEFAULT_MAX_DECOMPRESSED: usize = 52_428_800;

/// What [`decode_acquired_with`] checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecodeOptions {
    /// Verify the CRC-32C of every batch that is read (`check.crcs`, default true).
    pub check_crcs: bool,
    /// The most bytes one compressed batch may inflate to (default
    /// [`DEFAULT_MAX_DECOMPRESSED`]); past it the batch is corrupt with
    /// [`CodecError::DecompressedTooLarge`]. A few hostile bytes can claim gigabytes.
    pub max_decompressed: usize,
}

impl Default for DecodeOptions {
    fn default() -> Self {
        DecodeOptions { check_crcs: true, max_decompressed: DEFAULT_MAX_DECOMPRESSED }
    }
}

/// Decodes every data record of every complete batch in `records` (a fetch response's
/// `records` field), with `delivery_count` 0. Control batches are skipped and a trailing
/// partial batch is ignored. The first bad batch fails the whole decode. CRCs are checked and
/// decompression is limited as [`DecodeOptions::default`] says.
pub fn decode_batches(records: Bytes) -> Result<Vec<Record>, CodecError> {
    let options = DecodeOptions::default();
    let mut out = Vec::new();
    for batch in Batches::new(records) {
        let batch = batch?;
        if !batch.is_control() {
            decode_batch(&batch, |_| Some(0), options, &mut out)?;
        }
    }
    Ok(out)
}

/// [`decode_acquired_with`] with the default options (CRCs checked).
pub fn decode_acquired(records: Bytes, acquired: &[AcquiredRange]) -> Result<AcquiredSet, CodecError> {
    decode_acquired_with(records, acquired, DecodeOptions::default())
}

/// Decodes the records a share consumer acquired: those of `records` (a ShareFetch partition's
/// `records` field) whose offsets lie in one of `acquired`, each with its range's delivery
/// count, plus the acquired offsets that have no data record as gaps.
///
/// * Batches entirely outside the acquired ranges are skipped unread: not decompressed, not
///   parsed, and not CRC-checked (their payload is never handed out).
/// * Every other batch must be magic v2 and, with `check_crcs`, pass its CRC-32C check.
/// * A batch that fails (CRC, decompression, inflating past `max_decompressed`, a record that
///   does not parse) is reported in
///   [`AcquiredSet::corrupt`] with its acquired offsets, which are then in neither `records`
///   nor `gaps`; the batches after it are still decoded. When the framing itself breaks (a
///   negative length, another magic), nothing after that point can be read: the acquired
///   offsets from there on are reported as one corrupt stretch.
/// * Control batches (transaction markers) are skipped; their acquired offsets become gaps.
/// * A trailing partial batch is ignored; its acquired offsets become gaps too, as anything
///   acquired but absent from the bytes does (the Java share consumer does the same).
/// * Ranges may come in any order; where ranges overlap, the one with the lower
///   `first_offset` decides the delivery count. A range with `first_offset > last_offset` is an
///   error, the only one.
pub fn decode_acquired_with(
    records: Bytes,
    acquired: &[AcquiredRange],
    options: DecodeOptions,
) -> Result<AcquiredSet, CodecError> {
    let ranges = Ranges::new(acquired)?;
    let mut out = Vec::new();
    let mut corrupt = Vec::new();
    if !ranges.0.is_empty() {
        let mut hint = 0;
        // The first offset no batch read so far covers: where a broken framing starts.
        let mut unread_from = i64::MIN;
        for batch in Batches::new(records) {
            let batch = match batch {
                Ok(b) => b,
                Err(error) => {
                    corrupt.extend(ranges.corrupt_from(unread_from, error));
                    break;
                }
            };
            let last = match batch.last_offset() {
                Ok(last) => last,
                Err(error) => {
                    corrupt.extend(ranges.corrupt_from(batch.base_offset.max(unread_from), error));
                    break;
                }
            };
            unread_from = unread_from.max(last.saturating_add(1));
            if batch.is_control() || !ranges.intersects(batch.base_offset, last) {
                continue;
            }
            let before = out.len();
            let select = |offset| ranges.delivery_count(offset, &mut hint);
            if let Err(error) = decode_batch(&batch, select, options, &mut out) {
                out.truncate(before);
                let acquired = ranges.within(batch.base_offset, last);
                corrupt.push(CorruptBatch { first_offset: batch.base_offset, last_offset: last, acquired, error });
            }
        }
    }
    // Brokers return batches in offset order, but the contract must not depend on it.
    if !out.windows(2).all(|w| w[0].offset < w[1].offset) {
        out.sort_by_key(|r| r.offset);
        out.dedup_by_key(|r| r.offset);
    }
    let mut gaps = ranges.gaps(&out);
    if !corrupt.is_empty() {
        // A corrupt batch's offsets are rejected, never delivered nor acknowledged as gaps,
        // even if another (overlapping) batch holds them too.
        let bad: Vec<(i64, i64)> = corrupt.iter().flat_map(|c| c.acquired.iter().copied()).collect();
        let is_bad = |o: i64| bad.iter().any(|&(a, b)| a <= o && o <= b);
        out.retain(|r| !is_bad(r.offset));
        gaps = subtract(&gaps, &bad);
    }
    Ok(AcquiredSet { records: out, gaps, corrupt })
}

/// `ranges` (inclusive, ascending, disjoint) without the offsets of `remove` (inclusive).
pub(super) fn subtract(ranges: &[(i64, i64)], remove: &[(i64, i64)]) -> Vec<(i64, i64)> {
    let mut out = Vec::with_capacity(ranges.len());
    for &(first, last) in ranges {
        let mut pieces = vec![(first, last)];
        for &(a, b) in remove {
            pieces = pieces
                .into_iter()
                .flat_map(|(f, l)| {
                    let left = (f < a).then(|| (f, l.min(a - 1)));
                    let right = (l > b).then(|| (f.max(b + 1), l));
                    left.into_iter().chain(right)
                })
                .filter(|(f, l)| f <= l)
                .collect();
        }
        out.extend(pieces);
    }
    out
}

/// Acquired ranges, sorted and made disjoint.
struct Ranges(Vec<AcquiredRange>);

impl Ranges {
    fn new(acquired: &[AcquiredRange]) -> Result<Self, CodecError> {
        if let Some(bad) = acquired.iter().find(|r| r.first_offset > r.last_offset) {
            return Err(CodecError::Invalid {
                what: "acquired records range",
                detail: format!("first offset {} > last offset {}", bad.first_offset, bad.last_offset),
            });
        }
        let mut sorted = acquired.to_vec();
        sorted.sort_by_key(|r| r.first_offset);
        let mut out: Vec<AcquiredRange> = Vec::with_capacity(sorted.len());
        for mut r in sorted {
            if let Some(prev) = out.last() {
                if prev.last_offset >= r.first_offset {
                    // Trim the overlap off the later range; drop it if nothing is left.
                    match prev.last_offset.checked_add(1) {
                        Some(next) if next <= r.last_offset => r.first_offset = next,
                        _ => continue,
                    }
                }
            }
            out.push(r);
        }
        Ok(Ranges(out))
    }

    /// The index of the first range ending at or after `offset`.
    fn first_ending_at_or_after(&self, offset: i64) -> usize {
        self.0.partition_point(|r| r.last_offset < offset)
    }

    fn intersects(&self, first: i64, last: i64) -> bool {
        let i = self.first_ending_at_or_after(first);
        self.0.get(i).is_some_and(|r| r.first_offset <= last)
    }

    /// The delivery count of `offset` if acquired. `hint` remembers the last range hit, so the
    /// usual ascending lookups cost O(1) instead of a binary search each.
    fn delivery_count(&self, offset: i64, hint: &mut usize) -> Option<i16> {
        let hit = |r: &AcquiredRange| r.first_offset <= offset && offset <= r.last_offset;
        if let Some(r) = self.0.get(*hint).filter(|r| hit(r)) {
            return Some(r.delivery_count);
        }
        *hint = self.first_ending_at_or_after(offset);
        self.0.get(*hint).filter(|r| hit(r)).map(|r| r.delivery_count)
    }

    /// The acquired offsets within `first..=last`, as inclusive ranges.
    fn within(&self, first: i64, last: i64) -> Vec<(i64, i64)> {
        let i = self.first_ending_at_or_after(first);
        self.0[i..]
            .iter()
            .take_while(|r| r.first_offset <= last)
            .map(|r| (r.first_offset.max(first), r.last_offset.min(last)))
            .collect()
    }

    /// The acquired offsets from `first` on, as one corrupt stretch (none if nothing acquired
    /// lies there).
    fn corrupt_from(&self, first: i64, error: CodecError) -> Option<CorruptBatch> {
        let acquired = self.within(first, i64::MAX);
        let (start, end) = (acquired.first()?.0, acquired.last()?.1);
        Some(CorruptBatch { first_offset: start, last_offset: end, acquired, error })
    }

    /// Acquired offsets not covered by `records` (sorted, unique, all acquired).
    fn gaps(&self, records: &[Record]) -> Vec<(i64, i64)> {
        let mut gaps: Vec<(i64, i64)> = Vec::new();
        let mut push = |first: i64, last: i64| match gaps.last_mut() {
            Some(prev) if prev.1.checked_add(1) == Some(first) => prev.1 = last,
            _ => gaps.push((first, last)),
        };
        let mut recs = records.iter().map(|r| r.offset).peekable();
        for range in &self.0 {
            // `next` is the first offset of the range not yet accounted for; None once the
            // range is exhausted (which also covers a range ending at i64::MAX).
            let mut next = Some(range.first_offset);
            while let Some(offset) = recs.next_if(|&o| o <= range.last_offset) {
                if let Some(n) = next.filter(|&n| n < offset) {
                    push(n, offset - 1);
                }
                next = offset.checked_add(1).filter(|&n| n <= range.last_offset);
            }
            if let Some(n) = next {
                push(n, range.last_offset);
            }
        }
        gaps
    }
}

/// Verifies, decompresses and parses one batch, appending the records whose offset `select`
/// gives a delivery count for.
fn decode_batch(
    batch: &RawBatch,
    mut select: impl FnMut(i64) -> Option<i16>,
    options: DecodeOptions,
    out: &mut Vec<Record>,
) -> Result<(), CodecError> {
    if options.check_crcs {
        batch.verify_crc()?;
    }
    let data = decompress(batch.compression()?, batch.records_section(), options.max_decompressed)?;
    let count = usize::try_from(batch.record_count).map_err(|_| CodecError::Invalid {
        what: "record batch record count",
        detail: format!("{} at base offset {}", batch.record_count, batch.base_offset),
    })?;
    out.reserve(count.min(data.len() / MIN_RECORD_LEN));
    let timestamp_type = if batch.attributes & ATTR_LOG_APPEND_TIME != 0 {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    };
    let mut reader = Reader::new(&data, 0);
    for _ in 0..count {
        let len = reader.varint("record length")?;
        let len = usize::try_from(len)
            .map_err(|_| CodecError::Invalid { what: "record length", detail: format!("negative length {len}") })?;
        let body = reader.take(len, "record")?;
        // A reader confined to this record: no field can run into the next one.
        let mut r = Reader::new(&data[..body.end], body.start);
        let _attributes = r.i8("record attributes")?;
        let timestamp_delta = r.varlong("record timestamp delta")?;
        let offset_delta = r.varint("record offset delta")?;
        let offset = batch.base_offset.checked_add(i64::from(offset_delta)).ok_or_else(|| CodecError::Invalid {
            what: "record offset delta",
            detail: format!("{offset_delta} overflows base offset {}", batch.base_offset),
        })?;
        let Some(delivery_count) = select(offset) else {
            continue;
        };
        let slice = |range: std::ops::Range<usize>| data.slice(range);
        let key = r.nullable_len("record key")?.map(slice);
        let value = r.nullable_len("record value")?.map(slice);
        let headers = read_headers(&mut r, &data)?;
        if r.remaining() != 0 {
            return Err(CodecError::Invalid {
                what: "record length",
                detail: format!("{} unread bytes in record at offset {offset}", r.remaining()),
            });
        }
        out.push(Record {
            offset,
            timestamp: match timestamp_type {
                TimestampType::LogAppendTime => batch.max_timestamp,
                TimestampType::CreateTime => batch.base_timestamp.wrapping_add(timestamp_delta),
            },
            timestamp_type,
            key,
            value,
            headers,
            delivery_count,
            leader_epoch: batch.partition_leader_epoch,
        });
    }
    Ok(())
}

fn read_headers(r: &mut Reader<'_>, data: &Bytes) -> Result<Vec<Header>, CodecError> {
    let count = r.varint("record header count")?;
    let count = usize::try_from(count)
        .map_err(|_| CodecError::Invalid { what: "record header count", detail: format!("negative count {count}") })?;
    // Each header takes at least two bytes (two lengths).
    let mut headers = Vec::with_capacity(count.min(r.remaining() / 2));
    for _ in 0..count {
        let key = r
            .nullable_len("record header key")?
            .ok_or_else(|| CodecError::Invalid { what: "record header key", detail: "null key".into() })?;
        let value = r.nullable_len("record header value")?;
        headers.push(Header { key: data.slice(key), value: value.map(|v| data.slice(v)) });
    }
    Ok(headers)
}
