//! Primitives of Kafka's flexible ("compact") encoding, the subset ShareFetch and
//! ShareAcknowledge need.
//!
//! Readers take `&mut Bytes` and advance it; every read checks the length first and returns
//! [`CodecError::Truncated`] or [`CodecError::Invalid`], never panics. Nothing allocates more
//! than the bytes actually left in the buffer, whatever a length prefix claims.
//!
//! Writers append to `BytesMut`. The ones that can fail (a string or array too long for the
//! wire) return [`CodecError::Invalid`].

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use crate::protocol::CodecError;

/// Longest string the Java decoder accepts (`0x7fff` bytes); we hold both directions to it so
/// we never send what the broker would refuse, nor accept what it could not have sent.
const MAX_STRING_LEN: usize = 0x7fff;

/// Fails with `Truncated` unless `buf` holds at least `n` more bytes.
fn ensure(buf: &Bytes, n: usize, what: &'static str) -> Result<(), CodecError> {
    if buf.remaining() < n {
        return Err(CodecError::Truncated { what, needed: n - buf.remaining(), remaining: buf.remaining() });
    }
    Ok(())
}

fn invalid(what: &'static str, detail: impl Into<String>) -> CodecError {
    CodecError::Invalid { what, detail: detail.into() }
}

pub(crate) fn get_i8(buf: &mut Bytes, what: &'static str) -> Result<i8, CodecError> {
    ensure(buf, 1, what)?;
    Ok(buf.get_i8())
}

pub(crate) fn get_i16(buf: &mut Bytes, what: &'static str) -> Result<i16, CodecError> {
    ensure(buf, 2, what)?;
    Ok(buf.get_i16())
}

pub(crate) fn get_i32(buf: &mut Bytes, what: &'static str) -> Result<i32, CodecError> {
    ensure(buf, 4, what)?;
    Ok(buf.get_i32())
}

pub(crate) fn get_i64(buf: &mut Bytes, what: &'static str) -> Result<i64, CodecError> {
    ensure(buf, 8, what)?;
    Ok(buf.get_i64())
}

/// Any non-zero byte is `true`, as in the Java reader.
pub(crate) fn get_bool(buf: &mut Bytes, what: &'static str) -> Result<bool, CodecError> {
    Ok(get_i8(buf, what)? != 0)
}

/// A UUID is 16 raw bytes, most significant first.
pub(crate) fn get_uuid(buf: &mut Bytes, what: &'static str) -> Result<Uuid, CodecError> {
    ensure(buf, 16, what)?;
    let mut raw = [0u8; 16];
    buf.copy_to_slice(&mut raw);
    Ok(Uuid::from_bytes(raw))
}

/// Unsigned LEB128 varint of at most 5 bytes (a u32).
pub(crate) fn get_uvarint(buf: &mut Bytes, what: &'static str) -> Result<u32, CodecError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        ensure(buf, 1, what)?;
        let byte = buf.get_u8();
        // The fifth byte may only carry the top 4 bits of a u32.
        if i == 4 && byte > 0x0f {
            return Err(invalid(what, "unsigned varint does not fit in 32 bits"));
        }
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(invalid(what, "unsigned varint longer than 5 bytes"))
}

/// A compact length prefix: `N + 1`, with 0 meaning null. Returns `None` for null.
fn get_compact_len(buf: &mut Bytes, what: &'static str) -> Result<Option<usize>, CodecError> {
    let raw = get_uvarint(buf, what)?;
    Ok(raw.checked_sub(1).map(|n| n as usize))
}

fn get_str_body(buf: &mut Bytes, len: usize, what: &'static str) -> Result<String, CodecError> {
    if len > MAX_STRING_LEN {
        return Err(invalid(what, format!("string length {len} exceeds {MAX_STRING_LEN}")));
    }
    ensure(buf, len, what)?;
    let raw = buf.split_to(len);
    String::from_utf8(raw.to_vec()).map_err(|e| invalid(what, format!("not UTF-8: {e}")))
}

/// A non-nullable compact string; null on the wire is `Invalid`.
pub(crate) fn get_string(buf: &mut Bytes, what: &'static str) -> Result<String, CodecError> {
    match get_compact_len(buf, what)? {
        Some(len) => get_str_body(buf, len, what),
        None => Err(invalid(what, "null in a non-nullable string")),
    }
}

/// A nullable compact string.
pub(crate) fn get_nullable_string(buf: &mut Bytes, what: &'static str) -> Result<Option<String>, CodecError> {
    match get_compact_len(buf, what)? {
        Some(len) => get_str_body(buf, len, what).map(Some),
        None => Ok(None),
    }
}

/// Nullable compact bytes (the `records` type). Zero-copy: the result shares `buf`'s storage.
pub(crate) fn get_nullable_bytes(buf: &mut Bytes, what: &'static str) -> Result<Option<Bytes>, CodecError> {
    match get_compact_len(buf, what)? {
        Some(len) => {
            ensure(buf, len, what)?;
            Ok(Some(buf.split_to(len)))
        }
        None => Ok(None),
    }
}

/// A non-nullable compact array, each element read by `item`.
///
/// Pre-allocation is capped by the bytes left, since every element takes at least one byte:
/// a forged count of four billion costs nothing before the buffer runs out.
pub(crate) fn get_array<T>(
    buf: &mut Bytes,
    what: &'static str,
    mut item: impl FnMut(&mut Bytes) -> Result<T, CodecError>,
) -> Result<Vec<T>, CodecError> {
    let len = get_compact_len(buf, what)?.ok_or_else(|| invalid(what, "null in a non-nullable array"))?;
    let mut out = Vec::with_capacity(len.min(buf.remaining()));
    for _ in 0..len {
        out.push(item(buf)?);
    }
    Ok(out)
}

/// Reads a tagged-field section, handing each field's tag and payload to `on_field`, which
/// decodes the tags it knows and ignores the rest. Ignoring unknown tags is what the protocol
/// requires: a newer broker may add tags without a version bump.
pub(crate) fn get_tagged_fields(
    buf: &mut Bytes,
    what: &'static str,
    mut on_field: impl FnMut(u32, Bytes) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    let count = get_uvarint(buf, what)?;
    // Each field costs at least two bytes (tag, size), so a forged count fails on truncation
    // after at most `remaining / 2` iterations; nothing is allocated per field.
    for _ in 0..count {
        let tag = get_uvarint(buf, what)?;
        let size = get_uvarint(buf, what)? as usize;
        ensure(buf, size, what)?;
        let payload = buf.split_to(size);
        on_field(tag, payload)?;
    }
    Ok(())
}

/// Reads a tagged-field section of a struct that defines no tags: every tag is skipped.
pub(crate) fn skip_tagged_fields(buf: &mut Bytes, what: &'static str) -> Result<(), CodecError> {
    get_tagged_fields(buf, what, |_, _| Ok(()))
}

pub(crate) fn put_uvarint(buf: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        buf.put_u8((value as u8 & 0x7f) | 0x80);
        value >>= 7;
    }
    buf.put_u8(value as u8);
}

pub(crate) fn put_bool(buf: &mut BytesMut, value: bool) {
    buf.put_u8(u8::from(value));
}

pub(crate) fn put_uuid(buf: &mut BytesMut, value: &Uuid) {
    buf.put_slice(value.as_bytes());
}

/// Writes a compact length (`N + 1`). Kafka lengths are Java ints, so `N` must fit an i32.
fn put_compact_len(buf: &mut BytesMut, len: usize, what: &'static str) -> Result<(), CodecError> {
    match u32::try_from(len) {
        Ok(n) if n < i32::MAX as u32 => {
            put_uvarint(buf, n + 1);
            Ok(())
        }
        _ => Err(invalid(what, format!("length {len} too large to encode"))),
    }
}

/// A non-nullable compact string.
pub(crate) fn put_string(buf: &mut BytesMut, s: &str, what: &'static str) -> Result<(), CodecError> {
    if s.len() > MAX_STRING_LEN {
        return Err(invalid(what, format!("string of {} bytes exceeds {MAX_STRING_LEN}", s.len())));
    }
    put_compact_len(buf, s.len(), what)?;
    buf.put_slice(s.as_bytes());
    Ok(())
}

/// A nullable compact string: `None` is written as length 0.
pub(crate) fn put_nullable_string(buf: &mut BytesMut, s: Option<&str>, what: &'static str) -> Result<(), CodecError> {
    match s {
        Some(s) => put_string(buf, s, what),
        None => {
            put_uvarint(buf, 0);
            Ok(())
        }
    }
}

/// Nullable compact bytes: `None` is written as length 0.
pub(crate) fn put_nullable_bytes(buf: &mut BytesMut, b: Option<&Bytes>, what: &'static str) -> Result<(), CodecError> {
    match b {
        Some(b) => {
            put_compact_len(buf, b.len(), what)?;
            buf.put_slice(b);
            Ok(())
        }
        None => {
            put_uvarint(buf, 0);
            Ok(())
        }
    }
}

/// A non-nullable compact array, each element written by `item`.
pub(crate) fn put_array<T>(
    buf: &mut BytesMut,
    items: &[T],
    what: &'static str,
    mut item: impl FnMut(&mut BytesMut, &T) -> Result<(), CodecError>,
) -> Result<(), CodecError> {
    put_compact_len(buf, items.len(), what)?;
    items.iter().try_for_each(|t| item(buf, t))
}

/// An empty tagged-field section: we never send tags.
pub(crate) fn put_empty_tagged_fields(buf: &mut BytesMut) {
    put_uvarint(buf, 0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[u8]) -> Bytes {
        Bytes::copy_from_slice(v)
    }

    #[test]
    fn uvarint_round_trips_at_every_width() {
        for v in [0, 1, 127, 128, 300, 16_383, 16_384, 2_097_151, 2_097_152, u32::MAX] {
            let mut out = BytesMut::new();
            put_uvarint(&mut out, v);
            let mut b = out.freeze();
            assert_eq!(get_uvarint(&mut b, "v").unwrap(), v);
            assert!(b.is_empty());
        }
    }

    #[test]
    fn uvarint_known_encodings() {
        let mut out = BytesMut::new();
        put_uvarint(&mut out, 300);
        assert_eq!(&out[..], &[0xac, 0x02]);
    }

    #[test]
    fn uvarint_rejects_overlong_and_overflowing() {
        assert!(matches!(
            get_uvarint(&mut bytes(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]), "v"),
            Err(CodecError::Invalid { .. })
        ));
        assert!(matches!(
            get_uvarint(&mut bytes(&[0xff, 0xff, 0xff, 0xff, 0x1f]), "v"),
            Err(CodecError::Invalid { .. })
        ));
        assert!(matches!(get_uvarint(&mut bytes(&[0x80]), "v"), Err(CodecError::Truncated { .. })));
    }

    #[test]
    fn strings_nulls_and_bounds() {
        assert_eq!(get_nullable_string(&mut bytes(&[0]), "s").unwrap(), None);
        assert!(matches!(get_string(&mut bytes(&[0]), "s"), Err(CodecError::Invalid { .. })));
        assert_eq!(get_string(&mut bytes(&[3, b'h', b'i']), "s").unwrap(), "hi");
        assert!(matches!(
            get_string(&mut bytes(&[4, b'h', b'i']), "s"),
            Err(CodecError::Truncated { needed: 1, remaining: 2, .. })
        ));
        assert!(matches!(get_string(&mut bytes(&[3, 0xff, 0xfe]), "s"), Err(CodecError::Invalid { .. })));
        let mut long = BytesMut::new();
        assert!(put_string(&mut long, &"x".repeat(MAX_STRING_LEN + 1), "s").is_err());
    }

    #[test]
    fn nullable_bytes_are_zero_copy() {
        let input = bytes(&[4, 1, 2, 3, 9]);
        let mut b = input.clone();
        let got = get_nullable_bytes(&mut b, "r").unwrap().unwrap();
        assert_eq!(&got[..], &[1, 2, 3]);
        assert_eq!(got.as_ptr(), input[1..].as_ptr());
        assert_eq!(&b[..], &[9]);
    }

    #[test]
    fn huge_array_count_does_not_allocate_or_panic() {
        // Count 0xffff_fffe elements, then nothing.
        let mut b = bytes(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
        let r = get_array(&mut b, "a", |b| get_i32(b, "x"));
        assert!(matches!(r, Err(CodecError::Truncated { .. })));
    }

    #[test]
    fn tagged_fields_are_offered_then_skipped() {
        // Two fields: tag 0 with [0xaa], tag 5 with [0xbb, 0xcc]; then a trailing byte.
        let mut b = bytes(&[2, 0, 1, 0xaa, 5, 2, 0xbb, 0xcc, 0x42]);
        let mut seen = Vec::new();
        get_tagged_fields(&mut b, "t", |tag, data| {
            seen.push((tag, data.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, vec![(0, vec![0xaa]), (5, vec![0xbb, 0xcc])]);
        assert_eq!(&b[..], &[0x42]);
        assert!(skip_tagged_fields(&mut bytes(&[1, 0, 5, 1]), "t").is_err());
    }
}
