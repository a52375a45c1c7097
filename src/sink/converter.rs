//! `key.converter` / `value.converter`: what a record's bytes become before the transforms
//! and the sink, as Connect's `Converter.toConnectData`. A converter is a small type behind
//! the [`Registry`](super::Registry) (`Registry::register_converter`), as sinks are; the
//! built-ins are registered under short names and Connect's class names:
//!
//! | name | Connect class | the bytes become |
//! |---|---|---|
//! | `bytes` | `org.apache.kafka.connect.converters.ByteArrayConverter` | themselves (the default: sinks see the record as consumed) |
//! | `string` | `org.apache.kafka.connect.storage.StringConverter` | a string (UTF-8; invalid sequences replaced, as Java decodes) |
//! | `json` | `org.apache.kafka.connect.json.JsonConverter` | the JSON value; with `schemas.enable=true` (Connect's default) the `{"schema":..,"payload":..}` envelope is required and the payload is checked against the schema |
//!
//! A converter's own settings are the keys under its prefix (`value.converter.schemas.enable`
//! reaches the value converter as `schemas.enable`). A failure is the record's, not the
//! batch's: it takes the dead-letter path under `errors.tolerance` with the stage
//! `KEY_CONVERTER` or `VALUE_CONVERTER`.
//!
//! A converter that reads a schema (JsonConverter with `schemas.enable`) hands it on
//! ([`Converter::to_data_and_schema`]): it travels with the record to the sink
//! ([`SinkTask::put_with_schemas`](super::SinkTask::put_with_schemas)), so that a schema-aware
//! sink (postgres, `table.layout=fields`) types its columns by it.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::data::{json_kind, Data, Schema};

/// Turns a key's or value's bytes into data (Connect's `Converter.toConnectData`).
pub trait Converter: Send + Sync + 'static {
    /// `bytes` of a record of `topic` as data (`None`: null). An error says why the bytes are
    /// not what this converter reads; it becomes the record's failure.
    fn to_data(&self, topic: &str, bytes: Option<&Bytes>) -> Result<Option<Data>, String>;

    /// As [`to_data`](Converter::to_data), with the schema the bytes came with (Connect's
    /// `SchemaAndValue`), for a converter that reads one. The default has none.
    fn to_data_and_schema(&self, topic: &str, bytes: Option<&Bytes>) -> Result<(Option<Data>, Option<Schema>), String> {
        Ok((self.to_data(topic, bytes)?, None))
    }
}

/// A converter's own settings (the keys under `key.converter.` or `value.converter.`, prefix
/// removed), and whether it converts keys.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct ConverterConfig {
    /// The settings, prefix removed.
    pub settings: BTreeMap<String, String>,
    /// True for `key.converter`.
    pub is_key: bool,
}

/// Makes a converter from its settings; an error names the setting and what to do.
pub(crate) type ConverterFactory =
    std::sync::Arc<dyn Fn(&ConverterConfig) -> Result<Box<dyn Converter>, String> + Send + Sync>;

/// Connect's class names of the built-in converters.
pub const CONNECT_BYTE_ARRAY_CONVERTER: &str = "org.apache.kafka.connect.converters.ByteArrayConverter";
/// Connect's StringConverter.
pub const CONNECT_STRING_CONVERTER: &str = "org.apache.kafka.connect.storage.StringConverter";
/// Connect's JsonConverter.
pub const CONNECT_JSON_CONVERTER: &str = "org.apache.kafka.connect.json.JsonConverter";

/// ByteArrayConverter: the bytes as they are.
#[derive(Debug, Clone, Copy, Default)]
pub struct ByteArrayConverter;

impl Converter for ByteArrayConverter {
    fn to_data(&self, _topic: &str, bytes: Option<&Bytes>) -> Result<Option<Data>, String> {
        Ok(bytes.map(|b| Data::Bytes(b.clone())))
    }
}

/// StringConverter: UTF-8 text.
#[derive(Debug, Clone, Copy, Default)]
pub struct StringConverter;

impl Converter for StringConverter {
    fn to_data(&self, _topic: &str, bytes: Option<&Bytes>) -> Result<Option<Data>, String> {
        Ok(bytes.map(|b| Data::Json(Value::String(String::from_utf8_lossy(b).into_owned()))))
    }
}

/// JsonConverter, with or without Connect's schema envelope.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct JsonConverter {
    /// `schemas.enable` (default true, as Connect).
    pub schemas_enable: bool,
}

impl JsonConverter {
    /// A JSON converter, with or without the schema envelope.
    pub fn new(schemas_enable: bool) -> JsonConverter {
        JsonConverter { schemas_enable }
    }

    /// From its settings: `schemas.enable` (`true`/`false`).
    pub fn from_config(config: &ConverterConfig) -> Result<JsonConverter, String> {
        let schemas_enable = match config.settings.get("schemas.enable").map(|s| s.trim().to_ascii_lowercase()) {
            None => true,
            Some(v) if v == "true" => true,
            Some(v) if v == "false" => false,
            Some(v) => return Err(format!("schemas.enable={v:?}: use true or false")),
        };
        Ok(JsonConverter { schemas_enable })
    }
}

impl Converter for JsonConverter {
    fn to_data(&self, topic: &str, bytes: Option<&Bytes>) -> Result<Option<Data>, String> {
        Ok(self.to_data_and_schema(topic, bytes)?.0)
    }

    fn to_data_and_schema(
        &self,
        _topic: &str,
        bytes: Option<&Bytes>,
    ) -> Result<(Option<Data>, Option<Schema>), String> {
        let Some(bytes) = bytes else { return Ok((None, None)) };
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| format!("Converting byte[] to Kafka Connect data failed due to serialization error: {e}"))?;
        if !self.schemas_enable {
            return Ok((Data::from_json(v), None));
        }
        let envelope = match v {
            // Connect reads a null record as null with or without the envelope.
            Value::Null => return Ok((None, None)),
            Value::Object(m) if m.len() == 2 && m.contains_key("schema") && m.contains_key("payload") => m,
            _ => {
                return Err("JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields and may not \
                            contain additional fields; for plain JSON set schemas.enable=false in the converter's settings"
                    .to_string())
            }
        };
        let mut envelope = envelope;
        let schema = envelope.remove("schema").unwrap_or(Value::Null);
        let payload = envelope.remove("payload").unwrap_or(Value::Null);
        if schema.is_null() {
            return Ok((Data::from_json(payload), None));
        }
        let data = conform(&schema, payload, "")?;
        Ok((Data::from_json(data), Some(Schema::from_json(schema))))
    }
}

/// `payload` checked against a Connect JSON schema, as JsonConverter's `convertToConnect`:
/// types must match, a missing required field takes its default or fails, and a struct
/// keeps exactly its schema's fields (missing optional ones are null). `at` names the place
/// for the error.
pub(crate) fn conform(schema: &Value, payload: Value, at: &str) -> Result<Value, String> {
    let place = if at.is_empty() { "the value".to_string() } else { format!("field {at:?}") };
    let Some(s) = schema.as_object() else {
        return Err(format!("the schema of {place} is {}, not a schema object", json_kind(schema)));
    };
    let optional = s.get("optional").and_then(Value::as_bool).unwrap_or(false);
    let payload = match payload {
        Value::Null => match s.get("default") {
            Some(d) if !d.is_null() => d.clone(),
            _ if optional => return Ok(Value::Null),
            _ => return Err(format!("Invalid null value for required {place} (the schema is not optional)")),
        },
        p => p,
    };
    let ty = s.get("type").and_then(Value::as_str).unwrap_or("");
    let ok = match ty {
        "int8" | "int16" | "int32" | "int64" => payload.is_i64() || payload.is_u64(),
        "float" | "float32" | "double" | "float64" => payload.is_number(),
        "boolean" => payload.is_boolean(),
        "string" | "bytes" => payload.is_string(),
        "array" => {
            let Value::Array(items) = payload else {
                return Err(format!("{place}: schema type array, but the payload is {}", json_kind(&payload)));
            };
            let item = s.get("items").unwrap_or(&Value::Null);
            let out: Result<Vec<Value>, String> =
                items.into_iter().map(|v| conform(item, v, &format!("{at}[]"))).collect();
            return out.map(Value::Array);
        }
        "map" => payload.is_object() || payload.is_array(),
        "struct" => {
            let Value::Object(mut given) = payload else {
                return Err(format!("{place}: schema type struct, but the payload is {}", json_kind(&payload)));
            };
            let mut out = Map::new();
            for f in s.get("fields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(name) = f.get("field").and_then(Value::as_str) else {
                    return Err(format!("a field of the schema of {place} has no \"field\" name"));
                };
                let v = given.remove(name).unwrap_or(Value::Null);
                let path = if at.is_empty() { name.to_string() } else { format!("{at}.{name}") };
                out.insert(name.to_string(), conform(f, v, &path)?);
            }
            return Ok(Value::Object(out));
        }
        other => return Err(format!("unknown schema type {other:?} for {place}")),
    };
    if ok {
        Ok(payload)
    } else {
        Err(format!("{place}: schema type {ty}, but the payload is {}", json_kind(&payload)))
    }
}

/// The built-in converters' factories, by every name they answer to.
pub(crate) fn builtins() -> Vec<(&'static str, ConverterFactory)> {
    let bytes: ConverterFactory =
        std::sync::Arc::new(|_: &ConverterConfig| Ok(Box::new(ByteArrayConverter) as Box<dyn Converter>));
    let string: ConverterFactory =
        std::sync::Arc::new(|_: &ConverterConfig| Ok(Box::new(StringConverter) as Box<dyn Converter>));
    let json: ConverterFactory =
        std::sync::Arc::new(|c: &ConverterConfig| Ok(Box::new(JsonConverter::from_config(c)?) as Box<dyn Converter>));
    vec![
        ("bytes", bytes.clone()),
        (CONNECT_BYTE_ARRAY_CONVERTER, bytes),
        ("string", string.clone()),
        (CONNECT_STRING_CONVERTER, string),
        ("json", json.clone()),
        (CONNECT_JSON_CONVERTER, json),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn json_conv(schemas: bool) -> JsonConverter {
        JsonConverter { schemas_enable: schemas }
    }

    fn b(s: &str) -> Bytes {
        Bytes::copy_from_slice(s.as_bytes())
    }

    #[test]
    fn string_and_bytes_keep_what_came_and_null_stays_null() {
        assert_eq!(StringConverter.to_data("t", Some(&b("héllo"))).unwrap(), Some(Data::Json(json!("héllo"))));
        assert_eq!(
            StringConverter.to_data("t", Some(&Bytes::from_static(&[0xff]))).unwrap(),
            Some(Data::Json(json!("\u{fffd}")))
        );
        assert_eq!(ByteArrayConverter.to_data("t", Some(&b("x"))).unwrap(), Some(Data::Bytes(b("x"))));
        for c in [&StringConverter as &dyn Converter, &ByteArrayConverter, &json_conv(true), &json_conv(false)] {
            assert_eq!(c.to_data("t", None).unwrap(), None);
        }
    }

    #[test]
    fn schemaless_json_is_the_value_and_bad_json_is_the_records_failure() {
        let c = json_conv(false);
        assert_eq!(c.to_data("t", Some(&b(r#"{"a":[1,"x"]}"#))).unwrap(), Some(Data::Json(json!({"a": [1, "x"]}))));
        assert_eq!(c.to_data("t", Some(&b("null"))).unwrap(), None);
        let e = c.to_data("t", Some(&b("not json"))).unwrap_err();
        assert!(e.contains("serialization error"), "{e}");
    }

    #[test]
    fn the_envelope_is_required_with_schemas_and_the_payload_checked() {
        let c = json_conv(true);
        let e = c.to_data("t", Some(&b(r#"{"a":1}"#))).unwrap_err();
        assert!(e.contains("schemas.enable=false"), "{e}");
        let schema = json!({"type": "struct", "fields": [
            {"field": "id", "type": "int64"},
            {"field": "name", "type": "string", "optional": true},
            {"field": "n", "type": "int32", "optional": true, "default": 7}
        ]});
        let v = json!({"schema": schema, "payload": {"id": 1, "extra": true}});
        assert_eq!(
            c.to_data("t", Some(&b(&v.to_string()))).unwrap(),
            Some(Data::Json(json!({"id": 1, "name": null, "n": 7})))
        );
        let bad = json!({"schema": schema, "payload": {"id": "one"}});
        let e = c.to_data("t", Some(&b(&bad.to_string()))).unwrap_err();
        assert!(e.contains("\"id\"") && e.contains("int64"), "{e}");
        let missing = json!({"schema": schema, "payload": {"name": "x"}});
        assert!(c.to_data("t", Some(&b(&missing.to_string()))).unwrap_err().contains("required"));
        // The schema comes with the data; a null schema: the payload as is, and no schema.
        let (_, with) = c.to_data_and_schema("t", Some(&b(&v.to_string()))).unwrap();
        assert_eq!(with.map(|s| s.json().clone()), Some(schema.clone()));
        let plain = json!({"schema": null, "payload": [1, 2]});
        assert_eq!(c.to_data_and_schema("t", Some(&b(&plain.to_string()))).unwrap().1, None);
        assert_eq!(json_conv(false).to_data_and_schema("t", Some(&b(r#"{"a":1}"#))).unwrap().1, None);
        let plain = json!({"schema": null, "payload": [1, 2]});
        assert_eq!(c.to_data("t", Some(&b(&plain.to_string()))).unwrap(), Some(Data::Json(json!([1, 2]))));
    }

    #[test]
    fn schemas_enable_must_be_a_boolean() {
        let mut cfg = ConverterConfig::default();
        cfg.settings.insert("schemas.enable".into(), "False".into());
        assert!(!JsonConverter::from_config(&cfg).unwrap().schemas_enable);
        cfg.settings.insert("schemas.enable".into(), "maybe".into());
        assert!(JsonConverter::from_config(&cfg).unwrap_err().contains("true or false"));
    }
}
