//! Shape checks on response bodies, run before the `kafka-protocol` crate decodes them.
//!
//! The crate's array decoders call `Vec::with_capacity(count)` with the count read from the wire,
//! before reading a single element. A response that claims billions of elements makes the process
//! abort on allocation failure ("memory allocation of ... bytes failed"), which no `Result` can
//! catch. Our rule is that nothing a broker sends may panic or abort the client, so every response
//! body of an API listed in `schemas` is first walked here, without allocating, against a small
//! description of its layout:
//!
//! - every array count must fit in the bytes left (every element takes at least one byte), and
//!   every element is then walked, so a count that passes is the true number of elements;
//! - every string and bytes length must fit in the bytes left (record sets are skipped by their
//!   length prefix, never walked);
//! - known tagged fields are walked inside their size prefix and must fill it exactly (the crate
//!   decodes them from the main buffer, ignoring the size, so a size that disagrees with the
//!   content would desynchronise the two readings); unknown tags are skipped by their size.
//!
//! A body that passes can make the crate allocate only in proportion to its own length. The walk
//! mirrors the crate's generated decoders (`src/messages/*_response.rs` in kafka-protocol 0.18)
//! field by field, so it reads every prefix exactly where the crate will. It does not check values:
//! nullability, UTF-8, trailing bytes and the like are left to the crate, which reports them as
//! errors. An API or version without a schema passes unchecked.

use super::compact::{compact_len, get_uvarint_with, Overflow};
use super::CodecError;

mod schemas;
#[cfg(test)]
mod tests;

/// Checks that a response body (header already stripped) of API `key` at `version` has a shape the
/// `kafka-protocol` decoder can read without unbounded allocation.
///
/// Passes (`Ok`) for APIs and versions that have no schema here.
pub fn check(key: i16, version: i16, body: &[u8]) -> Result<(), CodecError> {
    match schemas::lookup(key, version) {
        Some(schema) => Walk::new(schema, version, body).message().map(|_| ()),
        None => Ok(()),
    }
}

/// The wire type of a field. Strings, bytes and arrays are compact (unsigned varint length plus
/// one) in the message's flexible versions and have a fixed-width signed length before them.
#[derive(Debug, Clone, Copy)]
enum Ty {
    /// `int8`.
    I8,
    /// `int16`.
    I16,
    /// `uint16`.
    #[allow(dead_code)] // the full set of Kafka field types, for schemas yet to come
    U16,
    /// `int32`.
    I32,
    /// `uint32`.
    #[allow(dead_code)]
    U32,
    /// `int64`.
    I64,
    /// `float64`.
    #[allow(dead_code)]
    F64,
    /// `bool`.
    Bool,
    /// `uuid`.
    Uuid,
    /// `string`, nullable or not (an `int16` length before flexible versions). A null where the
    /// protocol allows none passes here; the crate rejects it.
    Str,
    /// `bytes` or `records`, nullable or not (an `int32` length before flexible versions). The
    /// content is skipped, never walked.
    Bytes,
    /// An array of the given element type (an `int32` count before flexible versions). A null
    /// array passes here as it does for strings.
    Array(&'static Ty),
    /// A struct written inline: its fields, then (in flexible versions) its tagged fields.
    Struct(&'static [Field]),
    /// A nullable struct: an `int8` marker, and the struct only if the marker is 1 (the crate
    /// reads any other marker as null).
    NullableStruct(&'static [Field]),
}

impl Ty {
    /// The encoded width of a fixed-size type.
    const fn fixed_width(&self) -> Option<usize> {
        match self {
            Ty::I8 | Ty::Bool => Some(1),
            Ty::I16 | Ty::U16 => Some(2),
            Ty::I32 | Ty::U32 => Some(4),
            Ty::I64 | Ty::F64 => Some(8),
            Ty::Uuid => Some(16),
            _ => None,
        }
    }
}

/// One field of a struct: present in versions `min..=max`, in the tagged-field section under
/// `tag` if it has one, else in line in declaration order.
#[derive(Debug, Clone, Copy)]
struct Field {
    name: &'static str,
    min: i16,
    max: i16,
    tag: Option<u32>,
    ty: Ty,
}

/// A field present in every version; narrow it with [`Field::since`] and [`Field::until`].
const fn f(name: &'static str, ty: Ty) -> Field {
    Field { name, min: 0, max: i16::MAX, tag: None, ty }
}

impl Field {
    /// Present from version `v` on.
    const fn since(mut self, v: i16) -> Field {
        self.min = v;
        self
    }

    /// Present up to version `v` included.
    const fn until(mut self, v: i16) -> Field {
        self.max = v;
        self
    }

    /// A tagged field with tag `tag` (in the versions it is present in).
    const fn tag(mut self, tag: u32) -> Field {
        self.tag = Some(tag);
        self
    }

    fn present(&self, version: i16) -> bool {
        self.min <= version && version <= self.max
    }
}

/// The layout of one response message.
#[derive(Debug)]
struct Schema {
    /// The message name, for errors.
    name: &'static str,
    /// The API key.
    key: i16,
    /// The versions described (those the crate decodes).
    min: i16,
    max: i16,
    /// The first flexible version (compact lengths, tagged fields); `i16::MAX` for none.
    flexible: i16,
    /// The top-level fields.
    fields: &'static [Field],
}

/// Where a length or count prefix sits in the body, recorded for the tests that corrupt them.
#[cfg(test)]
#[derive(Debug, Clone, Copy)]
struct Prefix {
    at: usize,
    /// 0: an unsigned varint (of `len` bytes); 2 or 4: a big-endian signed integer of that width.
    width: usize,
    len: usize,
}

/// A cursor over a body, walking it against a [`Schema`].
struct Walk<'a> {
    schema: &'static Schema,
    version: i16,
    flexible: bool,
    buf: &'a [u8],
    pos: usize,
    /// The end of the region being walked: the body, or a tagged field's content.
    end: usize,
    #[cfg(test)]
    prefixes: Vec<Prefix>,
}

impl<'a> Walk<'a> {
    fn new(schema: &'static Schema, version: i16, buf: &'a [u8]) -> Walk<'a> {
        Walk {
            schema,
            version,
            flexible: version >= schema.flexible,
            buf,
            pos: 0,
            end: buf.len(),
            #[cfg(test)]
            prefixes: Vec::new(),
        }
    }

    /// Walks the whole message; returns how many bytes it takes.
    fn message(&mut self) -> Result<usize, CodecError> {
        self.fields(self.schema.fields)?;
        Ok(self.pos)
    }

    fn left(&self) -> usize {
        self.end - self.pos
    }

    fn invalid(&self, detail: String) -> CodecError {
        CodecError::Invalid { what: self.schema.name, detail: format!("v{} {detail}", self.version) }
    }

    fn skip(&mut self, n: usize, what: &'static str) -> Result<(), CodecError> {
        if n > self.left() {
            return Err(CodecError::Truncated { what, needed: n, remaining: self.left() });
        }
        self.pos += n;
        Ok(())
    }

    /// Reads a big-endian signed integer of `width` (1, 2 or 4) bytes.
    fn int(&mut self, width: usize, what: &'static str) -> Result<i32, CodecError> {
        let at = self.pos;
        self.skip(width, what)?;
        let v = self.buf[at..at + width].iter().fold(0u32, |acc, b| acc << 8 | u32::from(*b));
        let shift = 32 - 8 * width as u32;
        Ok(((v << shift) as i32) >> shift)
    }

    /// Reads an unsigned varint exactly as the crate does ([`Overflow::AsCrate`]): at most five
    /// bytes, the fifth read whole whatever its continuation bit, high bits past 32 dropped.
    fn uvarint(&mut self, what: &'static str) -> Result<u32, CodecError> {
        let mut rest = &self.buf[self.pos..self.end];
        let value = get_uvarint_with(&mut rest, what, Overflow::AsCrate)?;
        self.pos = self.end - rest.len();
        Ok(value)
    }

    /// Reads a length or count: compact in flexible versions, else a signed integer of `width`
    /// bytes. `None` for null.
    fn length(&mut self, width: usize, what: &'static str) -> Result<Option<usize>, CodecError> {
        let at = self.pos;
        let n = if self.flexible {
            compact_len(self.uvarint(what)?)
        } else {
            match self.int(width, what)? {
                -1 => None,
                n if n < 0 => return Err(self.invalid(format!("{what}: negative length {n}"))),
                n => Some(n as usize),
            }
        };
        self.record(at, if self.flexible { 0 } else { width });
        Ok(n)
    }

    #[cfg(test)]
    fn record(&mut self, at: usize, width: usize) {
        self.prefixes.push(Prefix { at, width, len: self.pos - at });
    }

    #[cfg(not(test))]
    fn record(&mut self, _at: usize, _width: usize) {}

    /// Walks a struct's fields present at this version, then its tagged fields.
    fn fields(&mut self, fields: &'static [Field]) -> Result<(), CodecError> {
        for field in fields {
            if field.tag.is_none() && field.present(self.version) {
                self.value(&field.ty, field.name)?;
            }
        }
        if self.flexible {
            self.tagged(fields)?;
        }
        Ok(())
    }

    /// Walks a tagged-field section: a count, then (tag, size, content) for each.
    fn tagged(&mut self, fields: &'static [Field]) -> Result<(), CodecError> {
        let n = self.uvarint("tagged field count")? as usize;
        // Each tagged field takes at least two bytes (tag and size).
        if n > self.left() {
            return Err(self.invalid(format!("{n} tagged fields in {} bytes", self.left())));
        }
        for _ in 0..n {
            let tag = self.uvarint("tag")?;
            let at = self.pos;
            let size = self.uvarint("tagged field size")? as usize;
            self.record(at, 0);
            if size > self.left() {
                return Err(CodecError::Truncated { what: "tagged field", needed: size, remaining: self.left() });
            }
            match fields.iter().find(|f| f.tag == Some(tag)) {
                None => self.pos += size,
                Some(field) if !field.present(self.version) => {
                    return Err(self.invalid(format!("tag {tag} ({}) is not valid in this version", field.name)));
                }
                Some(field) => {
                    let outer = self.end;
                    self.end = self.pos + size;
                    self.value(&field.ty, field.name)?;
                    if self.pos != self.end {
                        return Err(self.invalid(format!(
                            "tagged field {} declares {size} bytes but its content takes {}",
                            field.name,
                            size - self.left()
                        )));
                    }
                    self.end = outer;
                }
            }
        }
        Ok(())
    }

    /// Walks one value of type `ty`.
    fn value(&mut self, ty: &'static Ty, name: &'static str) -> Result<(), CodecError> {
        match ty {
            Ty::I8 | Ty::Bool => self.skip(1, name)?,
            Ty::I16 | Ty::U16 => self.skip(2, name)?,
            Ty::I32 | Ty::U32 => self.skip(4, name)?,
            Ty::I64 | Ty::F64 => self.skip(8, name)?,
            Ty::Uuid => self.skip(16, name)?,
            Ty::Str => {
                if let Some(n) = self.length(2, name)? {
                    self.skip(n, name)?;
                }
            }
            Ty::Bytes => {
                if let Some(n) = self.length(4, name)? {
                    self.skip(n, name)?;
                }
            }
            Ty::Array(elem) => {
                if let Some(n) = self.length(4, name)? {
                    if n > self.left() {
                        return Err(self.invalid(format!("{name}: array of {n} elements in {} bytes", self.left())));
                    }
                    match elem.fixed_width() {
                        // Saturates only on 32-bit targets, and then is too long anyway.
                        Some(width) => self.skip(n.saturating_mul(width), name)?,
                        None => {
                            for _ in 0..n {
                                self.value(elem, name)?;
                            }
                        }
                    }
                }
            }
            Ty::Struct(fields) => self.fields(fields)?,
            Ty::NullableStruct(fields) => {
                if self.int(1, name)? == 1 {
                    self.fields(fields)?;
                }
            }
        }
        Ok(())
    }
}
