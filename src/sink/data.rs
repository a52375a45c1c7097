//! A record as converters and transforms see it ([`ConnectRecord`]): key and value as data
//! ([`Data`]) instead of bytes, the way Connect's `SinkRecord` carries them after its
//! converters. The pipeline (`pipeline.rs`) makes one from each consumed record, runs the
//! transforms on it, and turns the result back into the bytes the sink gets
//! ([`Data::to_bytes`]).
//!
//! Data is JSON-shaped (`serde_json::Value`), which is what Connect's schemaless data is
//! (maps, lists, strings, numbers, booleans, null), plus raw bytes for ByteArrayConverter.
//! A Connect `Struct` from an enveloped JSON value is an object holding its schema's fields
//! (the schema checked by the converter, see `converter.rs`); the schema itself travels beside
//! the data ([`Schema`], `ConnectRecord::value_schema`) to the sink, which gets it with the
//! record ([`SinkTask::put_with_schemas`](super::SinkTask::put_with_schemas)): the converted
//! bytes alone no longer say that a number was an `int32` or a string a `Timestamp`.

use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::Value;

use crate::protocol::records::Header;

/// A key or value after its converter. `None` beside it (in [`ConnectRecord`]) is null.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Data {
    /// Bytes as they came (ByteArrayConverter): transforms that need fields refuse them.
    Bytes(Bytes),
    /// Structured data: a string (StringConverter), or any JSON value (JsonConverter). Never
    /// `Value::Null` at the top: null is `None`.
    Json(Value),
}

impl Data {
    /// What the sink gets: bytes as they are, a string as its UTF-8 text (as Connect's sinks
    /// print a `String`), anything else as compact JSON.
    pub fn to_bytes(&self) -> Bytes {
        self.to_bytes_in(&mut BytesMut::new())
    }

    /// As [`to_bytes`](Data::to_bytes), written at the end of `buf` and split off it: the
    /// pipeline gives every record of a batch the same buffer, so their bytes share a few
    /// allocations instead of one each (`buf` must hold no bytes of its own: what it held
    /// would come first). JSON is written straight into it (`serde_json::to_writer`: the
    /// same compact text as `Value`'s `Display`, without a `fmt::Formatter` per token).
    pub(crate) fn to_bytes_in(&self, buf: &mut BytesMut) -> Bytes {
        match self {
            Data::Bytes(b) => b.clone(),
            Data::Json(Value::String(s)) => {
                buf.extend_from_slice(s.as_bytes());
                buf.split().freeze()
            }
            Data::Json(v) => {
                if serde_json::to_writer((&mut *buf).writer(), v).is_err() {
                    // Writing a `Value` into memory does not fail (its keys are strings and
                    // the buffer grows); were it to, `Display` says the same text.
                    buf.clear();
                    return Bytes::from(v.to_string());
                }
                buf.split().freeze()
            }
        }
    }

    /// The JSON object, if the data is one (a Connect `Struct` or `Map`).
    pub fn as_object(&self) -> Option<&serde_json::Map<String, Value>> {
        match self {
            Data::Json(Value::Object(m)) => Some(m),
            _ => None,
        }
    }

    /// A short name of the data's kind, for error messages.
    pub fn kind(&self) -> &'static str {
        match self {
            Data::Bytes(_) => "bytes",
            Data::Json(v) => json_kind(v),
        }
    }

    /// Data from a JSON value (null is `None`).
    pub fn from_json(v: Value) -> Option<Data> {
        if v.is_null() {
            None
        } else {
            Some(Data::Json(v))
        }
    }
}

/// A Connect schema in its JSON form (what JsonConverter's envelope carries under `"schema"`:
/// `{"type": "struct", "fields": [{"field": "id", "type": "int64"}, ...], "optional": ..}`,
/// logical types by `"name"`). Cheap to clone: one schema is shared by every record that came
/// with it in a batch's conversion.
#[derive(Debug, Clone, PartialEq)]
pub struct Schema(Arc<Value>);

impl Schema {
    /// A schema from its JSON form (not checked here: the converter checked the payload
    /// against it, and a sink reads what it understands of it).
    pub fn from_json(schema: Value) -> Schema {
        Schema(Arc::new(schema))
    }

    /// Its JSON form.
    pub fn json(&self) -> &Value {
        &self.0
    }
}

/// The schemas a record's key and value came with from their converters (both `None` for a
/// converter without schemas: ByteArrayConverter, StringConverter, JsonConverter with
/// `schemas.enable=false`, or an envelope whose schema is null).
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct RecordSchemas {
    /// The key's schema.
    pub key: Option<Schema>,
    /// The value's schema.
    pub value: Option<Schema>,
}

impl RecordSchemas {
    /// Schemas for a key and a value.
    pub fn new(key: Option<Schema>, value: Option<Schema>) -> RecordSchemas {
        RecordSchemas { key, value }
    }
}

/// A short name of a JSON value's kind, for error messages.
pub(crate) fn json_kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A record between the converters and the sink, as Connect's `ConnectRecord`: what a
/// [`Transformation`](super::Transformation) and a [`Predicate`](super::Predicate) get.
/// `#[non_exhaustive]`: build one with [`ConnectRecord::new`] (e.g. to test a transform).
///
/// The built-in transforms are schemaless: they change the data and leave the schemas as the
/// converters made them. A sink that reads a schema therefore types only the fields whose data
/// still fits it (see the postgres sink's `fields` layout) and infers the rest.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ConnectRecord {
    /// The topic (RegexRouter and TimestampRouter change it: the sink sees the new name).
    pub topic: String,
    /// The partition it was read from.
    pub partition: i32,
    /// Its offset there.
    pub offset: i64,
    /// Timestamp, ms since the epoch (-1: none).
    pub timestamp: i64,
    /// The key after the key converter (`None`: null).
    pub key: Option<Data>,
    /// The value after the value converter (`None`: null, a tombstone).
    pub value: Option<Data>,
    /// Headers, in order, as bytes (as Connect's `SimpleHeaderConverter` would print them).
    pub headers: Vec<Header>,
    /// The key's schema from its converter (JsonConverter with `schemas.enable`), if any.
    pub key_schema: Option<Schema>,
    /// The value's schema from its converter, if any.
    pub value_schema: Option<Schema>,
}

impl ConnectRecord {
    /// A record of `topic`-`partition`@`offset` with no timestamp, key, value or headers.
    pub fn new(topic: impl Into<String>, partition: i32, offset: i64) -> ConnectRecord {
        ConnectRecord {
            topic: topic.into(),
            partition,
            offset,
            timestamp: -1,
            key: None,
            value: None,
            headers: Vec::new(),
            key_schema: None,
            value_schema: None,
        }
    }

    /// The value of the last header named `key` (`Some(None)`: present with a null value).
    pub fn header(&self, key: &str) -> Option<Option<&Bytes>> {
        self.headers.iter().rev().find(|h| h.key.as_ref() == key.as_bytes()).map(|h| h.value.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_sink_gets_strings_as_text_and_the_rest_as_json() {
        assert_eq!(Data::Json(json!("a b")).to_bytes(), Bytes::from_static(b"a b"));
        assert_eq!(Data::Json(json!({"a": 1})).to_bytes(), Bytes::from_static(br#"{"a":1}"#));
        assert_eq!(Data::Json(json!(12)).to_bytes(), Bytes::from_static(b"12"));
        assert_eq!(Data::Bytes(Bytes::from_static(&[0xff])).to_bytes(), Bytes::from_static(&[0xff]));
        assert_eq!(Data::from_json(Value::Null), None);
    }

    #[test]
    fn bytes_written_into_one_buffer_are_each_values_own_text() {
        let values = [
            json!({"b": [1, 2.5, -0.0, 1e300, null], "a": {"z": "\"q\"\n\u{1}", "é": true}}),
            json!("plain text, not JSON-quoted"),
            json!(18446744073709551615u64),
            json!([]),
        ];
        let mut buf = BytesMut::with_capacity(8);
        let got: Vec<Bytes> = values.iter().map(|v| Data::Json(v.clone()).to_bytes_in(&mut buf)).collect();
        for (v, b) in values.iter().zip(&got) {
            let want = match v {
                Value::String(s) => s.clone(),
                v => v.to_string(),
            };
            assert_eq!(std::str::from_utf8(b).unwrap(), want);
            assert_eq!(Data::Json(v.clone()).to_bytes(), *b);
        }
        assert!(buf.is_empty());
    }
}
