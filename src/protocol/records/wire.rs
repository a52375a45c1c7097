//! Bounds-checked primitives of the record format: fixed-width big-endian integers and Kafka's
//! zigzag varints. Every read is checked against the buffer so malformed input becomes a
//! [`CodecError`], never a panic.

use bytes::BufMut;

use crate::protocol::CodecError;

/// A cursor over a byte slice. Positions are absolute indexes into `buf`, so callers can turn a
/// returned range into a zero-copy `Bytes::slice` of the buffer `buf` was borrowed from.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader over `buf[pos..]`.
    pub(crate) fn new(buf: &'a [u8], pos: usize) -> Self {
        Reader { buf, pos }
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len().saturating_sub(self.pos)
    }

    /// Claims the next `len` bytes, returning their range.
    #[inline]
    pub(crate) fn take(&mut self, len: usize, what: &'static str) -> Result<std::ops::Range<usize>, CodecError> {
        let remaining = self.remaining();
        if len > remaining {
            return Err(truncated(what, len - remaining, remaining));
        }
        let start = self.pos;
        self.pos += len;
        Ok(start..self.pos)
    }

    #[inline]
    pub(crate) fn i8(&mut self, what: &'static str) -> Result<i8, CodecError> {
        let r = self.take(1, what)?;
        Ok(self.buf[r.start] as i8)
    }

    /// A zigzag varint of at most 5 bytes, like Java's `ByteUtils.readVarint` (bits beyond 32
    /// in the fifth byte are dropped, as Java does).
    #[inline(always)]
    pub(crate) fn varint(&mut self, what: &'static str) -> Result<i32, CodecError> {
        let raw = self.unsigned(5, what)? as u32;
        Ok((raw >> 1) as i32 ^ -((raw & 1) as i32))
    }

    /// A zigzag varlong of at most 10 bytes.
    #[inline(always)]
    pub(crate) fn varlong(&mut self, what: &'static str) -> Result<i64, CodecError> {
        let raw = self.unsigned(10, what)?;
        Ok((raw >> 1) as i64 ^ -((raw & 1) as i64))
    }

    /// One- and two-byte varints inline, longer ones out of line. Record parsing reads six
    /// varints a record, nearly all of one or two bytes (a 100-byte value's length and its
    /// record's take two): left to the inliner, all of it was called out of line once the
    /// decoder around it grew (+15% instructions per record decoded).
    #[inline(always)]
    fn unsigned(&mut self, max_len: usize, what: &'static str) -> Result<u64, CodecError> {
        match self.buf.get(self.pos..) {
            Some([b0, ..]) if *b0 < 0x80 => {
                self.pos += 1;
                Ok(u64::from(*b0))
            }
            Some([b0, b1, ..]) if *b1 < 0x80 => {
                self.pos += 2;
                Ok(u64::from(b0 & 0x7f) | (u64::from(*b1) << 7))
            }
            _ => self.unsigned_long(max_len, what),
        }
    }

    #[inline(never)]
    fn unsigned_long(&mut self, max_len: usize, what: &'static str) -> Result<u64, CodecError> {
        let mut value = 0u64;
        for i in 0..max_len {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(CodecError::Truncated { what, needed: 1, remaining: 0 });
            };
            self.pos += 1;
            value |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(value);
            }
        }
        Err(CodecError::Invalid { what, detail: format!("varint longer than {max_len} bytes") })
    }

    /// A varint length that may be -1 (null). Longer than the rest of the buffer is an error,
    /// so no caller ever allocates or slices from an unchecked length.
    #[inline(always)]
    pub(crate) fn nullable_len(&mut self, what: &'static str) -> Result<Option<std::ops::Range<usize>>, CodecError> {
        match self.varint(what)? {
            -1 => Ok(None),
            len if len < -1 => Err(negative_length(what, len)),
            len => self.take(len as usize, what).map(Some),
        }
    }
}

// The errors out of line: the record loop inlines the reads, not their error formatting.
#[cold]
#[inline(never)]
fn negative_length(what: &'static str, len: i32) -> CodecError {
    CodecError::Invalid { what, detail: format!("negative length {len}") }
}

#[cold]
#[inline(never)]
fn truncated(what: &'static str, needed: usize, remaining: usize) -> CodecError {
    CodecError::Truncated { what, needed, remaining }
}

pub(crate) fn get_i16(buf: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([buf[at], buf[at + 1]])
}

pub(crate) fn get_i32(buf: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

pub(crate) fn get_i64(buf: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(buf[at..at + 8].try_into().expect("8 bytes"))
}

/// Bytes a zigzag varint (or varlong) takes on the wire.
pub(crate) fn varlong_len(v: i64) -> usize {
    let raw = ((v << 1) ^ (v >> 63)) as u64;
    // 1 byte per started group of 7 significant bits, at least one byte.
    (64 - (raw | 1).leading_zeros() as usize).div_ceil(7)
}

pub(crate) fn put_varlong(out: &mut impl BufMut, v: i64) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    while raw >= 0x80 {
        out.put_u8((raw as u8) | 0x80);
        raw >>= 7;
    }
    out.put_u8(raw as u8);
}

/// A varint is a varlong of an `i32`: zigzag of a sign-extended value gives the same bytes.
pub(crate) fn put_varint(out: &mut impl BufMut, v: i32) {
    put_varlong(out, i64::from(v));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_match_lengths() {
        for v in [0i64, 1, -1, 63, -64, 64, 300, -300, i32::MAX as i64, i32::MIN as i64] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v), "{v}");
            assert_eq!(Reader::new(&out, 0).varlong("t").unwrap(), v);
            assert_eq!(Reader::new(&out, 0).varint("t").unwrap() as i64, v);
        }
        for v in [i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), 10);
            assert_eq!(varlong_len(v), 10);
            assert_eq!(Reader::new(&out, 0).varlong("t").unwrap(), v);
        }
    }

    #[test]
    fn overlong_and_truncated_varints_are_errors() {
        assert!(Reader::new(&[0x80; 6], 0).varint("t").is_err());
        assert!(Reader::new(&[0x80; 11], 0).varlong("t").is_err());
        assert!(Reader::new(&[0x80, 0x80], 0).varint("t").is_err());
        assert!(Reader::new(&[], 0).varint("t").is_err());
        // A length past the end of the buffer is refused before anything is sliced.
        assert!(Reader::new(&[0x7e, 1, 2], 0).nullable_len("t").is_err());
        assert!(Reader::new(&[0x03], 0).nullable_len("t").is_err()); // -2
        assert_eq!(Reader::new(&[0x01], 0).nullable_len("t").unwrap(), None);
    }
}
