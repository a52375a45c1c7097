//! Splitting a records buffer into v2 batches and reading their fixed 61-byte headers, without
//! touching the records inside (so batches can be skipped cheaply).

use bytes::Bytes;

use super::wire::{get_i16, get_i32, get_i64};
use super::Compression;
use crate::protocol::CodecError;

/// `base_offset` + `batch_length`: the part of a batch not counted by `batch_length`.
pub(crate) const LOG_OVERHEAD: usize = 12;
/// The whole v2 batch header, up to and including the record count.
pub(crate) const HEADER_LEN: usize = 61;
pub(crate) const MAGIC_AT: usize = 16;
pub(crate) const CRC_AT: usize = 17;
/// The CRC covers everything from the attributes to the end of the batch.
pub(crate) const ATTRIBUTES_AT: usize = 21;

pub(crate) const ATTR_LOG_APPEND_TIME: i16 = 1 << 3;
pub(crate) const ATTR_CONTROL: i16 = 1 << 5;

/// One complete batch: its header fields and the batch bytes (a slice of the input).
pub(crate) struct RawBatch {
    pub base_offset: i64,
    pub partition_leader_epoch: i32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub record_count: i32,
    /// The whole batch, `base_offset` included.
    pub bytes: Bytes,
}

impl RawBatch {
    fn parse(bytes: Bytes) -> Self {
        debug_assert!(bytes.len() >= HEADER_LEN);
        let b = &bytes[..];
        RawBatch {
            base_offset: get_i64(b, 0),
            partition_leader_epoch: get_i32(b, 12),
            attributes: get_i16(b, ATTRIBUTES_AT),
            last_offset_delta: get_i32(b, 23),
            base_timestamp: get_i64(b, 27),
            max_timestamp: get_i64(b, 35),
            record_count: get_i32(b, 57),
            bytes,
        }
    }

    pub(crate) fn is_control(&self) -> bool {
        self.attributes & ATTR_CONTROL != 0
    }

    /// The offset of the batch's last record. Batches never claim offsets below their base, and
    /// a claim past `i64::MAX` is corrupt.
    pub(crate) fn last_offset(&self) -> Result<i64, CodecError> {
        let invalid = || CodecError::Invalid {
            what: "record batch last offset delta",
            detail: format!("{} at base offset {}", self.last_offset_delta, self.base_offset),
        };
        if self.last_offset_delta < 0 {
            return Err(invalid());
        }
        self.base_offset.checked_add(i64::from(self.last_offset_delta)).ok_or_else(invalid)
    }

    pub(crate) fn compression(&self) -> Result<Compression, CodecError> {
        Compression::from_attributes(self.attributes)
    }

    pub(crate) fn verify_crc(&self) -> Result<(), CodecError> {
        let stored = get_i32(&self.bytes, CRC_AT) as u32;
        let computed = crc32c::crc32c(&self.bytes[ATTRIBUTES_AT..]);
        if stored != computed {
            return Err(CodecError::CrcMismatch { base_offset: self.base_offset, stored, computed });
        }
        Ok(())
    }

    /// The records section (possibly compressed), zero-copy.
    pub(crate) fn records_section(&self) -> Bytes {
        self.bytes.slice(HEADER_LEN..)
    }
}

/// Iterates the complete batches of a records buffer. A trailing partial batch ends the
/// iteration silently: brokers cut responses at the byte limit, mid-batch. Iteration also ends
/// after the first error.
pub(crate) struct Batches {
    buf: Bytes,
    pos: usize,
}

impl Batches {
    pub(crate) fn new(buf: Bytes) -> Self {
        Batches { buf, pos: 0 }
    }

    fn next_batch(&mut self) -> Result<Option<RawBatch>, CodecError> {
        let rest = &self.buf[self.pos..];
        if rest.len() < LOG_OVERHEAD {
            return Ok(None);
        }
        let batch_length = get_i32(rest, 8);
        if batch_length < 0 {
            return Err(CodecError::Invalid {
                what: "record batch length",
                detail: format!("negative length {batch_length}"),
            });
        }
        let total = LOG_OVERHEAD + batch_length as usize;
        if rest.len() < total {
            return Ok(None);
        }
        // Legacy message sets keep the magic byte at the same position, so this check is
        // meaningful before the v2 minimum size is.
        if total > MAGIC_AT && rest[MAGIC_AT] != 2 {
            return Err(CodecError::Invalid {
                what: "record batch magic",
                detail: format!("magic {} (only v2 batches are supported)", rest[MAGIC_AT]),
            });
        }
        if total < HEADER_LEN {
            return Err(CodecError::Invalid {
                what: "record batch length",
                detail: format!("{batch_length} is shorter than a v2 batch header"),
            });
        }
        let bytes = self.buf.slice(self.pos..self.pos + total);
        self.pos += total;
        Ok(Some(RawBatch::parse(bytes)))
    }
}

impl Iterator for Batches {
    type Item = Result<RawBatch, CodecError>;

    fn next(&mut self) -> Option<Self::Item> {
        let item = self.next_batch().transpose();
        if matches!(item, Some(Err(_))) {
            self.pos = self.buf.len();
        }
        item
    }
}
