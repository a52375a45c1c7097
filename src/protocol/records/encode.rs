//! Encoding one producer batch. Records are encoded as they are pushed, so the builder always
//! knows its exact uncompressed size (what a producer needs to decide when a batch is full).

use bytes::{BufMut, Bytes, BytesMut};

use super::batch::{ATTRIBUTES_AT, CRC_AT, HEADER_LEN, LOG_OVERHEAD, MAGIC_AT};
use super::compression::compress;
use super::wire::{put_varint, put_varlong, varlong_len};
use super::{Compression, Header};
use crate::protocol::CodecError;

/// A record to produce.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecordInput {
    /// The key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers, written in order.
    pub headers: Vec<Header>,
    /// Create time in milliseconds since the epoch.
    pub timestamp: i64,
}

/// The idempotent producer's stamp on a batch: who wrote it, and the sequence number of its
/// first record (the broker keeps each partition's batches in sequence order and drops
/// duplicates).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerStamp {
    /// The producer id from InitProducerId.
    pub producer_id: i64,
    /// The producer epoch.
    pub producer_epoch: i16,
    /// The sequence number of the batch's first record in its partition.
    pub base_sequence: i32,
}

impl ProducerStamp {
    /// No producer id, epoch or sequence: a producer that is not idempotent.
    pub const NONE: ProducerStamp = ProducerStamp { producer_id: -1, producer_epoch: -1, base_sequence: -1 };
}

/// Where the producer id sits in a v2 batch header (epoch and base sequence follow).
const PRODUCER_ID_AT: usize = 43;

/// Accumulates records into one magic-v2 batch: base offset 0 (the broker assigns offsets),
/// no producer id/epoch/sequence (-1) unless stamped, partition leader epoch -1, create-time
/// timestamps.
/// The first record's timestamp is the batch's base timestamp, as in the Java client.
#[derive(Debug)]
pub struct BatchBuilder {
    /// A header placeholder followed by the uncompressed records section.
    buf: BytesMut,
    count: i32,
    base_timestamp: i64,
    max_timestamp: i64,
}

impl Default for BatchBuilder {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchBuilder {
    /// An empty builder.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty builder with room for `bytes` bytes of records before it reallocates.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = BytesMut::with_capacity(HEADER_LEN + bytes);
        buf.resize(HEADER_LEN, 0);
        BatchBuilder { buf, count: 0, base_timestamp: 0, max_timestamp: 0 }
    }

    /// Number of records pushed.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// Whether no record was pushed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Exact size of the batch if finished uncompressed. Compression usually shrinks it, but
    /// can add a few dozen bytes of framing to tiny batches.
    pub fn size_estimate(&self) -> usize {
        self.buf.len()
    }

    /// What [`BatchBuilder::size_estimate`] would be after pushing `rec`, without pushing it
    /// (a record too large to encode counts as `usize::MAX`).
    pub fn size_with(&self, rec: &RecordInput) -> usize {
        let (_, ts_delta) = self.timestamps_with(rec.timestamp);
        match body_len(rec, self.count, ts_delta) {
            Ok(len) => self.buf.len() + varlong_len(len as i64) + len,
            Err(_) => usize::MAX,
        }
    }

    /// Appends a record, returning its offset delta within the batch (its index), from which
    /// the producer learns its offset once the broker reports the batch's base offset.
    pub fn push(&mut self, rec: &RecordInput) -> Result<i32, CodecError> {
        let offset_delta = self.count;
        let (max_timestamp, ts_delta) = self.timestamps_with(rec.timestamp);
        let len = body_len(rec, offset_delta, ts_delta)?;
        let total = self.buf.len() + varlong_len(len as i64) + len;
        if total - LOG_OVERHEAD > i32::MAX as usize || offset_delta == i32::MAX {
            return Err(too_large("record batch", total));
        }
        let out = &mut self.buf;
        out.reserve(total - out.len());
        put_varint(out, len as i32);
        out.put_i8(0); // record attributes: unused
        put_varlong(out, ts_delta);
        put_varint(out, offset_delta);
        put_nullable(out, rec.key.as_deref());
        put_nullable(out, rec.value.as_deref());
        put_varint(out, rec.headers.len() as i32);
        for h in &rec.headers {
            put_nullable(out, Some(&h.key));
            put_nullable(out, h.value.as_deref());
        }
        if self.count == 0 {
            self.base_timestamp = rec.timestamp;
        }
        self.max_timestamp = max_timestamp;
        self.count += 1;
        Ok(offset_delta)
    }

    /// (max timestamp, timestamp delta) if a record with `timestamp` were pushed next.
    fn timestamps_with(&self, timestamp: i64) -> (i64, i64) {
        if self.count == 0 {
            (timestamp, 0)
        } else {
            (
                self.max_timestamp.max(timestamp),
                // Wrapping, as the decoder adds it back wrapping: extreme values round-trip.
                timestamp.wrapping_sub(self.base_timestamp),
            )
        }
    }

    /// Writes the header and compresses the records, returning the complete batch. An empty
    /// batch is an error: brokers reject it.
    pub fn finish(self, compression: Compression) -> Result<Bytes, CodecError> {
        self.finish_stamped(compression, ProducerStamp::NONE)
    }

    /// Like [`finish`](Self::finish), with an idempotent producer's id, epoch and sequence.
    pub fn finish_stamped(self, compression: Compression, stamp: ProducerStamp) -> Result<Bytes, CodecError> {
        if self.count == 0 {
            return Err(CodecError::Invalid { what: "record batch", detail: "no records".into() });
        }
        let mut buf = self.buf;
        if compression != Compression::None {
            let records = buf.split_off(HEADER_LEN);
            compress(compression, records, &mut buf)?;
        }
        let batch_length =
            i32::try_from(buf.len() - LOG_OVERHEAD).map_err(|_| too_large("compressed record batch", buf.len()))?;

        let mut header = &mut buf[..HEADER_LEN];
        header.put_i64(0); // base offset
        header.put_i32(batch_length);
        header.put_i32(-1); // partition leader epoch
        debug_assert_eq!(HEADER_LEN - header.len(), MAGIC_AT);
        header.put_i8(2); // magic
        header.put_u32(0); // CRC, filled below
        debug_assert_eq!(HEADER_LEN - header.len(), ATTRIBUTES_AT);
        header.put_i16(compression.id()); // create time, not transactional, not control
        header.put_i32(self.count - 1); // last offset delta
        header.put_i64(self.base_timestamp);
        header.put_i64(self.max_timestamp);
        debug_assert_eq!(HEADER_LEN - header.len(), PRODUCER_ID_AT);
        header.put_i64(stamp.producer_id);
        header.put_i16(stamp.producer_epoch);
        header.put_i32(stamp.base_sequence);
        header.put_i32(self.count);
        debug_assert!(header.is_empty());

        let crc = crc32c::crc32c(&buf[ATTRIBUTES_AT..]);
        buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
        Ok(buf.freeze())
    }
}

/// A copy of a finished batch with another producer stamp (and its CRC recomputed): what the
/// idempotent producer resends after an epoch bump restarted the partition's sequences.
pub fn restamp(batch: &[u8], stamp: ProducerStamp) -> Result<Bytes, CodecError> {
    if batch.len() < HEADER_LEN || batch[MAGIC_AT] != 2 {
        return Err(CodecError::Invalid { what: "record batch", detail: "not a finished v2 batch".into() });
    }
    let mut buf = BytesMut::from(batch);
    let mut at = &mut buf[PRODUCER_ID_AT..PRODUCER_ID_AT + 14];
    at.put_i64(stamp.producer_id);
    at.put_i16(stamp.producer_epoch);
    at.put_i32(stamp.base_sequence);
    let crc = crc32c::crc32c(&buf[ATTRIBUTES_AT..]);
    buf[CRC_AT..CRC_AT + 4].copy_from_slice(&crc.to_be_bytes());
    Ok(buf.freeze())
}

/// The encoded size of a record without its length prefix.
fn body_len(rec: &RecordInput, offset_delta: i32, ts_delta: i64) -> Result<usize, CodecError> {
    let header_count = i32::try_from(rec.headers.len()).map_err(|_| too_large("header count", rec.headers.len()))?;
    let mut len = 1 // attributes
        + varlong_len(ts_delta)
        + varlong_len(offset_delta.into())
        + nullable_len(rec.key.as_deref(), "record key")?
        + nullable_len(rec.value.as_deref(), "record value")?
        + varlong_len(header_count.into());
    for h in &rec.headers {
        len +=
            nullable_len(Some(&h.key), "record header key")? + nullable_len(h.value.as_deref(), "record header value")?;
    }
    if len > i32::MAX as usize {
        return Err(too_large("record", len));
    }
    Ok(len)
}

fn nullable_len(b: Option<&[u8]>, what: &'static str) -> Result<usize, CodecError> {
    match b {
        None => Ok(1),
        Some(b) if b.len() <= i32::MAX as usize => Ok(varlong_len(b.len() as i64) + b.len()),
        Some(b) => Err(too_large(what, b.len())),
    }
}

/// Writes a length-prefixed field whose length `nullable_len` already checked.
fn put_nullable(out: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => put_varint(out, -1),
        Some(b) => {
            put_varint(out, b.len() as i32);
            out.put_slice(b);
        }
    }
}

fn too_large(what: &'static str, len: usize) -> CodecError {
    CodecError::Invalid { what, detail: format!("{len} bytes exceeds the protocol's i32 limit") }
}

/// A batch with no records covering `first..=last`: a v2 header claiming those offsets, as
/// compaction leaves of a batch whose records all went (LANDSCAPE bug 9: a client panicked on
/// one). `BatchBuilder` refuses to make one, so fake brokers (the simulation's and
/// `test_util`'s) get it here, written field by field.
#[cfg(any(test, feature = "test-util"))]
pub(crate) fn empty_batch(first: i64, last: i64) -> Bytes {
    let mut b = BytesMut::with_capacity(61);
    b.put_i64(first); // base offset
    b.put_i32(61 - 12); // batch length: the header after it
    b.put_i32(-1); // partition leader epoch
    b.put_i8(2); // magic
    b.put_u32(0); // CRC, below
    b.put_i16(0); // attributes: no compression, create time, not control
    b.put_i32((last - first) as i32); // last offset delta
    b.put_i64(1_700_000_000_000 + first); // base timestamp
    b.put_i64(1_700_000_000_000 + last); // max timestamp
    b.put_i64(-1); // producer id
    b.put_i16(-1); // producer epoch
    b.put_i32(-1); // base sequence
    b.put_i32(0); // record count
    let crc = crc32c::crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b.freeze()
}
