//! Kafka's primitive wire types and its flexible ("compact") encoding: the one bounds-checked
//! reader and writer behind the codecs this crate writes itself (ShareFetch and
//! ShareAcknowledge in [`super::share`], DescribeShareGroupOffsets in
//! [`super::share_group_offsets`]), also read by the response headers ([`super::frame`]) and
//! the pre-walk of the `kafka-protocol` crate's responses ([`super::bounded`]).
//!
//! Compact strings, bytes and arrays carry their length as an unsigned varint `N + 1`, 0 for
//! null; every struct ends in a tagged-field section (a count, then tag, size and payload for
//! each field).
//!
//! Readers take a [`Buf`] cursor and advance it: `Bytes` for the codecs (strings, bytes and
//! tagged fields are then zero-copy slices of the input), `&[u8]` for the pre-walk. Every read
//! checks the length first and returns [`CodecError::Truncated`] (`needed`: the bytes missing)
//! or [`CodecError::Invalid`], never panics. Nothing allocates more than the bytes actually
//! left in the buffer, whatever a length prefix claims.
//!
//! Writers append to `BytesMut`. The ones that can fail (a string or array too long for the
//! wire) return [`CodecError::Invalid`].

use bytes::{Buf, BufMut, Bytes, BytesMut};
use uuid::Uuid;

use super::CodecError;

/// Longest string the Java decoder accepts (`0x7fff` bytes); we hold both directions to it so
/// we never send what the broker would refuse, nor accept what it could not have sent.
pub(crate) const MAX_STRING_LEN: usize = 0x7fff;

/// Fails with `Truncated` unless `buf` holds at least `n` more bytes.
#[inline]
pub(crate) fn ensure<B: Buf>(buf: &B, n: usize, what: &'static str) -> Result<(), CodecError> {
    if buf.remaining() < n {
        return Err(CodecError::Truncated { what, needed: n - buf.remaining(), remaining: buf.remaining() });
    }
    Ok(())
}

fn invalid(what: &'static str, detail: impl Into<String>) -> CodecError {
    CodecError::Invalid { what, detail: detail.into() }
}

// ---- Readers: fixed width ----

pub(crate) fn get_i8<B: Buf>(buf: &mut B, what: &'static str) -> Result<i8, CodecError> {
    ensure(buf, 1, what)?;
    Ok(buf.get_i8())
}

pub(crate) fn get_i16<B: Buf>(buf: &mut B, what: &'static str) -> Result<i16, CodecError> {
    ensure(buf, 2, what)?;
    Ok(buf.get_i16())
}

pub(crate) fn get_i32<B: Buf>(buf: &mut B, what: &'static str) -> Result<i32, CodecError> {
    ensure(buf, 4, what)?;
    Ok(buf.get_i32())
}

pub(crate) fn get_i64<B: Buf>(buf: &mut B, what: &'static str) -> Result<i64, CodecError> {
    ensure(buf, 8, what)?;
    Ok(buf.get_i64())
}

/// Any non-zero byte is `true`, as in the Java reader.
pub(crate) fn get_bool<B: Buf>(buf: &mut B, what: &'static str) -> Result<bool, CodecError> {
    Ok(get_i8(buf, what)? != 0)
}

/// A UUID is 16 raw bytes, most significant first.
pub(crate) fn get_uuid<B: Buf>(buf: &mut B, what: &'static str) -> Result<Uuid, CodecError> {
    ensure(buf, 16, what)?;
    let mut raw = [0u8; 16];
    buf.copy_to_slice(&mut raw);
    Ok(Uuid::from_bytes(raw))
}

// ---- Readers: varints and compact lengths ----

/// How an unsigned varint reader treats the fifth byte, the only one that can overflow a u32.
/// Kafka's readers disagree here; each of ours names the one it must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Our own codecs: the fifth byte may only carry the top 4 bits of a u32, without a
    /// continuation bit; anything else is `Invalid`.
    Reject,
    /// Java's `ByteUtils.readUnsignedVarint`: bits past 32 are dropped; a continuation bit on
    /// the fifth byte is `Invalid`.
    DropBits,
    /// The `kafka-protocol` crate: the fifth byte is read whole whatever its continuation bit,
    /// bits past 32 dropped. Only for the pre-walk, which must find every prefix where the
    /// crate will.
    AsCrate,
}

/// An unsigned LEB128 varint of at most 5 bytes (a u32), strict ([`Overflow::Reject`]).
#[inline]
pub(crate) fn get_uvarint<B: Buf>(buf: &mut B, what: &'static str) -> Result<u32, CodecError> {
    get_uvarint_with(buf, what, Overflow::Reject)
}

/// An unsigned LEB128 varint of at most 5 bytes, its fifth byte read as `overflow` says.
#[inline]
pub(crate) fn get_uvarint_with<B: Buf>(buf: &mut B, what: &'static str, overflow: Overflow) -> Result<u32, CodecError> {
    let mut value: u32 = 0;
    for i in 0..5 {
        ensure(buf, 1, what)?;
        let byte = buf.get_u8();
        if i == 4 {
            match overflow {
                Overflow::Reject if byte > 0x0f => {
                    return Err(invalid(what, "unsigned varint does not fit in 32 bits"));
                }
                Overflow::AsCrate => return Ok(value | u32::from(byte & 0x7f) << 28),
                _ => {}
            }
        }
        // Shifting a u32 left drops the bits that do not fit (only reachable for DropBits).
        value |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok(value);
        }
    }
    Err(invalid(what, "unsigned varint longer than 5 bytes"))
}

/// The length a compact prefix stands for: the raw varint is `N + 1`, with 0 meaning null.
#[inline]
pub(crate) const fn compact_len(raw: u32) -> Option<usize> {
    match raw.checked_sub(1) {
        Some(n) => Some(n as usize),
        None => None,
    }
}

/// A compact length prefix (strict varint). Returns `None` for null.
#[inline]
pub(crate) fn get_compact_len<B: Buf>(buf: &mut B, what: &'static str) -> Result<Option<usize>, CodecError> {
    Ok(compact_len(get_uvarint(buf, what)?))
}

// ---- Readers: strings, bytes, arrays, tagged fields ----

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
/// Pre-allocation is capped so that it takes no more memory than the bytes left: a forged
/// count of four billion costs nothing before the buffer runs out. (Capping the *count* by the
/// bytes left, since every element takes at least one, still let a forged count reserve
/// `size_of::<T>()` times the input: 80 times for a DescribeShareGroupOffsets group, found by
/// `tests/fuzz_decoders.rs`.) A real array past the cap grows as any `Vec` does.
pub(crate) fn get_array<T>(
    buf: &mut Bytes,
    what: &'static str,
    mut item: impl FnMut(&mut Bytes) -> Result<T, CodecError>,
) -> Result<Vec<T>, CodecError> {
    let len = get_compact_len(buf, what)?.ok_or_else(|| invalid(what, "null in a non-nullable array"))?;
    let mut out = Vec::with_capacity(prealloc::<T>(len, buf.remaining()));
    for _ in 0..len {
        out.push(item(buf)?);
    }
    Ok(out)
}

/// How many elements of `T` to reserve for an array claiming `count` with `remaining` bytes
/// left: never more than `remaining` bytes' worth.
pub(crate) fn prealloc<T>(count: usize, remaining: usize) -> usize {
    count.min(remaining / std::mem::size_of::<T>().max(1))
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

/// Runs `decode` on a copy of `buf` and requires it to consume every byte. On success `buf` is
/// left empty; on any error it is left as it was, so the caller can log or dump the frame.
pub(crate) fn decode_whole<T>(
    buf: &mut Bytes,
    what: &'static str,
    decode: impl FnOnce(&mut Bytes) -> Result<T, CodecError>,
) -> Result<T, CodecError> {
    // Cloning `Bytes` bumps a reference count; no data is copied.
    let mut cur = buf.clone();
    let value = decode(&mut cur)?;
    if !cur.is_empty() {
        return Err(CodecError::TrailingBytes { what, extra: cur.len() });
    }
    *buf = cur;
    Ok(value)
}

// ---- Writers ----

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
mod tests;
