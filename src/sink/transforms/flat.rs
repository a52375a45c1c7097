//! Schemaless JSON objects through InsertField$Value and ReplaceField$Value without a
//! `serde_json::Value` tree: the pipeline's fast path (`pipeline.rs` takes it when the value
//! converter is the built-in JsonConverter with `schemas.enable=false` and every transform is
//! one of these two, built-in, without a predicate; the bench-sink json-transforms case).
//!
//! The generic path parses each value into a tree (a `String` per name and per text, a map
//! node), edits the map and prints it again. Here the top-level object becomes a list of
//! (name, field) borrowed from the record's bytes: a text without escapes is a slice of them,
//! a number or a boolean is held inline, only a nested object or array is a `Value`. The list
//! is kept as the tree's map would be, sorted by name with the last of equal names winning,
//! so that the printed text is the generic path's byte for byte (`pipeline_tests.rs` checks
//! both on the same inputs): every scalar and name is printed by serde_json's own serialiser.
//!
//! Anything else (a value that is not a JSON object, bytes that are not JSON, a tombstone)
//! is declined (`None`), and the record takes the generic path, which says why it fails.

use std::borrow::Cow;
use std::fmt;

use bytes::{BufMut, Bytes, BytesMut};
use serde::de::value::{MapAccessDeserializer, SeqAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer as _, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::{Number, Value};

use super::super::task::SinkRecord;
use super::super::transform::Side;
use super::fields::{InsertField, ReplaceField};

/// A name or a text.
#[derive(Debug)]
enum Text<'a> {
    /// A slice of the record's JSON that had no escape: it holds no `"`, `\` or control
    /// character (serde_json refuses those unescaped), so serde_json would print it as it is.
    Verbatim(&'a str),
    /// Any other text (unescaped from the record, or from the settings), printed by serde_json.
    Other(Cow<'a, str>),
}

impl Text<'_> {
    fn as_str(&self) -> &str {
        match self {
            Text::Verbatim(s) => s,
            Text::Other(s) => s,
        }
    }
}

/// One field's value, borrowed from the record where it can be.
#[derive(Debug)]
enum Field<'a> {
    Str(Text<'a>),
    Num(Number),
    Bool(bool),
    Null,
    /// A nested object or array.
    Tree(Value),
}

/// The top-level object's fields.
type Fields<'a> = Vec<(Text<'a>, Field<'a>)>;

/// A transform the fast path does.
pub(crate) enum FlatOp {
    Insert(InsertField),
    Replace(ReplaceField),
}

impl FlatOp {
    /// The fast form of a built-in transform class (short name), if it has one.
    pub(crate) fn of(class: &str, settings: &super::super::transform::TransformSettings) -> Option<FlatOp> {
        match class {
            "InsertField$Value" => InsertField::new(Side::Value, settings).ok().map(FlatOp::Insert),
            "ReplaceField$Value" => ReplaceField::new(Side::Value, settings).ok().map(FlatOp::Replace),
            _ => None,
        }
    }
}

/// The chain of field transforms on schemaless JSON values.
pub(crate) struct FlatChain {
    pub(crate) ops: Vec<FlatOp>,
}

impl FlatChain {
    /// The record's value converted and transformed, its text written into `buf` (empty) and
    /// split off it; `None`: not a JSON object, let the generic path have it.
    pub(crate) fn value(&self, record: &SinkRecord, buf: &mut BytesMut) -> Option<Bytes> {
        let bytes = record.value.as_ref()?;
        let mut fields = parse_object(bytes)?;
        for op in &self.ops {
            match op {
                FlatOp::Insert(t) => insert(t, record, &mut fields),
                FlatOp::Replace(t) => replace(t, &mut fields),
            }
        }
        if write(&fields, buf).is_err() {
            buf.clear();
            return None;
        }
        Some(buf.split().freeze())
    }
}

/// The object in `bytes`, sorted by name, the last of equal names kept (as a map built by
/// inserting them in order would hold them); `None` for anything that is not one.
fn parse_object(bytes: &[u8]) -> Option<Fields<'_>> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let mut fields = de.deserialize_any(ObjectVisitor).ok()?;
    de.end().ok()?;
    sort(&mut fields);
    Some(fields)
}

/// Sorts by name (stable), of equal names keeping the last, in place.
fn sort(fields: &mut Fields<'_>) {
    if fields.windows(2).all(|w| w[0].0.as_str() < w[1].0.as_str()) {
        return; // already a map's order: the common case after the first sort
    }
    fields.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    // `dedup_by` keeps the first of a run; the swap leaves the later field in its place.
    fields.dedup_by(|later, kept| {
        let same = later.0.as_str() == kept.0.as_str();
        if same {
            std::mem::swap(later, kept);
        }
        same
    });
}

/// Sets `name` to `field` in sorted `fields` (a map's insert).
fn set<'a>(fields: &mut Fields<'a>, name: &'a str, field: Field<'a>) {
    match fields.binary_search_by(|(k, _)| k.as_str().cmp(name)) {
        Ok(i) => fields[i].1 = field,
        Err(i) => fields.insert(i, (Text::Other(Cow::Borrowed(name)), field)),
    }
}

/// InsertField$Value, as `InsertField::apply` does it on a map.
fn insert<'a>(t: &'a InsertField, r: &'a SinkRecord, fields: &mut Fields<'a>) {
    if let Some(f) = &t.topic {
        set(fields, f, Field::Str(Text::Other(Cow::Borrowed(&r.topic))));
    }
    if let Some(f) = &t.partition {
        set(fields, f, Field::Num(r.partition.into()));
    }
    if let Some(f) = &t.offset {
        set(fields, f, Field::Num(r.offset.into()));
    }
    if let (Some(f), true) = (&t.timestamp, r.timestamp >= 0) {
        set(fields, f, Field::Num(r.timestamp.into()));
    }
    if let Some((f, v)) = &t.static_field {
        set(fields, f, Field::Str(Text::Other(Cow::Borrowed(v))));
    }
}

/// ReplaceField$Value, as Connect does it: the kept fields under their new names, in the
/// map's order, a later one replacing an earlier one of the same new name.
fn replace<'a>(t: &'a ReplaceField, fields: &mut Fields<'a>) {
    fields.retain(|(k, _)| t.keeps(k.as_str()));
    for (k, _) in fields.iter_mut() {
        if let Some(name) = t.rename_of(k.as_str()) {
            *k = Text::Other(Cow::Borrowed(name));
        }
    }
    // Renamed fields move to their place; of equal new names the later (in the map's
    // order before) stays, as in the rebuilt map.
    sort(fields);
}

/// The object as compact JSON, every name and scalar printed by serde_json.
fn write(fields: &Fields<'_>, buf: &mut BytesMut) -> serde_json::Result<()> {
    buf.put_u8(b'{');
    for (i, (k, v)) in fields.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        write_text(k, buf)?;
        buf.put_u8(b':');
        match v {
            Field::Str(s) => write_text(s, buf)?,
            Field::Num(n) => serde_json::to_writer((&mut *buf).writer(), n)?,
            Field::Bool(true) => buf.extend_from_slice(b"true"),
            Field::Bool(false) => buf.extend_from_slice(b"false"),
            Field::Null => buf.extend_from_slice(b"null"),
            Field::Tree(t) => serde_json::to_writer((&mut *buf).writer(), t)?,
        }
    }
    buf.put_u8(b'}');
    Ok(())
}

/// A name or text as serde_json prints it.
fn write_text(t: &Text<'_>, buf: &mut BytesMut) -> serde_json::Result<()> {
    match t {
        Text::Verbatim(s) => {
            buf.put_u8(b'"');
            buf.extend_from_slice(s.as_bytes());
            buf.put_u8(b'"');
            Ok(())
        }
        Text::Other(s) => serde_json::to_writer((&mut *buf).writer(), s.as_ref()),
    }
}

/// The top level: an object, or an error (declined).
struct ObjectVisitor;

impl<'de> Visitor<'de> for ObjectVisitor {
    type Value = Fields<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut fields = Vec::with_capacity(map.size_hint().unwrap_or(8).max(8));
        while let Some(k) = map.next_key_seed(NameSeed)? {
            let v = map.next_value_seed(FieldSeed)?;
            fields.push((k, v));
        }
        Ok(fields)
    }
}

/// A name, borrowed when it has no escapes.
struct NameSeed;

impl<'de> DeserializeSeed<'de> for NameSeed {
    type Value = Text<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(TextVisitor)
    }
}

struct TextVisitor;

impl<'de> Visitor<'de> for TextVisitor {
    type Value = Text<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a string")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Text::Verbatim(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Text::Other(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Text::Other(Cow::Owned(v)))
    }
}

/// A field's value: scalars as they are, nested data as a `Value` (read by `Value`'s own
/// deserialiser, so it is the tree the generic path would hold).
struct FieldSeed;

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Field<'de>;

    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_any(FieldVisitor)
    }
}

struct FieldVisitor;

impl<'de> Visitor<'de> for FieldVisitor {
    type Value = Field<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Field::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Field::Num(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Field::Num(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        // As `Value` reads a float (JSON text has no NaN or infinity).
        Ok(Number::from_f64(v).map_or(Field::Null, Field::Num))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Field::Str(Text::Verbatim(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Field::Str(Text::Other(Cow::Owned(v.to_string()))))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Field::Str(Text::Other(Cow::Owned(v))))
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Field::Null)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(MapAccessDeserializer::new(map)).map(Field::Tree)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        Value::deserialize(SeqAccessDeserializer::new(seq)).map(Field::Tree)
    }
}
