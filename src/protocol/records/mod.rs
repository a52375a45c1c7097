//! Record batch (magic v2) codec.
//!
//! Decoding is zero-copy where the wire allows it: keys, values and header fields of
//! uncompressed batches are [`Bytes::slice`]s of the fetch response buffer; for compressed
//! batches they are slices of the single decompressed buffer of their batch.
//!
//! * [`decode_acquired`] turns a ShareFetch partition's `records` plus its acquired ranges into
//!   the records this consumer owns, their delivery counts, the acquired offsets that had no
//!   record (gaps, which a share consumer must still acknowledge), and the batches that could
//!   not be decoded (which it rejects). [`decode_acquired_with`] can skip the CRC check.
//! * [`decode_batches`] decodes every data record, for tests and tools.
//! * [`BatchBuilder`] encodes one producer batch with any [`Compression`].

use bytes::Bytes;

mod batch;
mod compression;
mod decode;
mod encode;
mod wire;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_acquired;

pub use compression::Compression;
pub use decode::{decode_acquired, decode_acquired_with, decode_batches, DecodeOptions, DEFAULT_MAX_DECOMPRESSED};
pub use encode::{restamp, BatchBuilder, ProducerStamp, RecordInput};
#[cfg(feature = "sink")]
pub(crate) use batch::Batches;
#[cfg(any(test, feature = "test-util"))]
pub(crate) use encode::empty_batch;

/// How a record's timestamp was assigned (batch attribute bit 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum TimestampType {
    /// Set by the producer when the record was created.
    #[default]
    CreateTime,
    /// Set by the broker when the batch was appended to the log; every record of the batch
    /// carries the batch's max timestamp.
    LogAppendTime,
}

/// A record header. Kafka header keys are strings on the Java side, but nothing on the wire
/// enforces UTF-8, so the key is kept as bytes; see [`Header::key_str`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Header {
    /// The header key.
    pub key: Bytes,
    /// The header value; `None` is distinct from an empty value on the wire.
    pub value: Option<Bytes>,
}

impl Header {
    /// A header from a key and an optional value.
    pub fn new(key: impl Into<Bytes>, value: Option<Bytes>) -> Self {
        Header { key: key.into(), value }
    }

    /// The key as UTF-8, as the Java client would see it.
    pub fn key_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.key)
    }
}

/// One decoded data record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Absolute offset in the partition.
    pub offset: i64,
    /// Timestamp in milliseconds since the epoch, see [`Record::timestamp_type`].
    pub timestamp: i64,
    /// Whether `timestamp` is the create time or the log append time.
    pub timestamp_type: TimestampType,
    /// The key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The value; `None` for a null value (a tombstone).
    pub value: Option<Bytes>,
    /// Headers in wire order (keys may repeat).
    pub headers: Vec<Header>,
    /// How many times this record has been delivered to a share consumer (from the acquired
    /// range holding the offset); 0 from [`decode_batches`].
    pub delivery_count: i16,
    /// The partition leader epoch stored in the record's batch, -1 if none.
    pub leader_epoch: i32,
}

/// An inclusive range of offsets a share consumer acquired, as in ShareFetch's
/// `AcquiredRecords`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AcquiredRange {
    /// First acquired offset.
    pub first_offset: i64,
    /// Last acquired offset (inclusive).
    pub last_offset: i64,
    /// Delivery count of every offset in the range.
    pub delivery_count: i16,
}

/// What [`decode_acquired`] found for a set of acquired ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AcquiredSet {
    /// The acquired data records, ascending by offset, each offset at most once.
    pub records: Vec<Record>,
    /// Acquired offsets with no data record (compacted away, control records, or not in the
    /// returned bytes): inclusive `(first, last)` ranges, ascending, adjacent ranges merged.
    pub gaps: Vec<(i64, i64)>,
    /// Batches holding acquired offsets that could not be decoded, in the order met. Their
    /// acquired offsets are in neither `records` nor `gaps`: a share consumer rejects them,
    /// or they would come back forever.
    pub corrupt: Vec<CorruptBatch>,
}

/// A record batch [`decode_acquired`] could not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptBatch {
    /// The batch's first offset; where the framing broke, the first acquired offset after the
    /// last batch read.
    pub first_offset: i64,
    /// The batch's last offset; where the framing broke, the last acquired offset.
    pub last_offset: i64,
    /// The acquired offsets inside it: inclusive `(first, last)` ranges, ascending.
    pub acquired: Vec<(i64, i64)>,
    /// What is wrong with it.
    pub error: crate::protocol::CodecError,
}
