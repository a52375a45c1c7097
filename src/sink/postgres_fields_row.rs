//! A record as a row of the postgres sink's `fields` layout: which columns it writes, with
//! which values, and (for `auto.create` / `auto.evolve`) which column types.
//!
//! The key and value are JSON. A value that is Connect's envelope
//! (`{"schema": {...}, "payload": {...}}`, what a JsonConverter with `schemas.enable` writes,
//! seen here when the connector's value converter passes bytes through) gives each field its
//! schema's type; any other JSON object is schemaless, and a field's type is inferred from
//! its JSON value (`infer`). A key that is not a JSON object is one column, as its text.
//!
//! A value that went through a JsonConverter with `schemas.enable` comes as its payload's
//! JSON with the envelope's schema beside it ([`RecordSchemas`], from the converter): each
//! field whose data still fits its schema field (the transforms are schemaless and may have
//! renamed, added or changed fields) gets the schema's type and nullability; any other field
//! is inferred from its value, as a schemaless one.
//!
//! Pure functions: no IO, unit-tested here.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value};

use super::converter::conform;
use super::data::{json_kind, RecordSchemas};
use super::postgres_fields_config::{FieldsSettings, PkMode, KAFKA_PK_DEFAULT, KEY_COLUMN_DEFAULT};
use super::task::SinkRecord;

/// A column type the sink creates (`auto.create`, `auto.evolve`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ColType {
    SmallInt,
    Integer,
    BigInt,
    Real,
    Double,
    Boolean,
    Text,
    Bytea,
    Jsonb,
    TimestampTz,
    Date,
    Time,
    Numeric,
}

impl ColType {
    /// The SQL type (a constant: never from a record).
    pub(super) fn sql(self) -> &'static str {
        match self {
            ColType::SmallInt => "smallint",
            ColType::Integer => "integer",
            ColType::BigInt => "bigint",
            ColType::Real => "real",
            ColType::Double => "double precision",
            ColType::Boolean => "boolean",
            ColType::Text => "text",
            ColType::Bytea => "bytea",
            ColType::Jsonb => "jsonb",
            ColType::TimestampTz => "timestamp with time zone",
            ColType::Date => "date",
            ColType::Time => "time without time zone",
            ColType::Numeric => "numeric",
        }
    }

    /// The type of a field from its Connect schema (`{"type": "int32", "name": ...}`); None
    /// for a schema this mapping does not know.
    pub(super) fn from_schema(schema: &Value) -> Option<ColType> {
        let name = schema.get("name").and_then(Value::as_str).unwrap_or("");
        match name {
            "org.apache.kafka.connect.data.Timestamp" => return Some(ColType::TimestampTz),
            "org.apache.kafka.connect.data.Date" => return Some(ColType::Date),
            "org.apache.kafka.connect.data.Time" => return Some(ColType::Time),
            "org.apache.kafka.connect.data.Decimal" => return Some(ColType::Numeric),
            _ => {}
        }
        Some(match schema.get("type").and_then(Value::as_str)? {
            "int8" | "int16" => ColType::SmallInt,
            "int32" => ColType::Integer,
            "int64" => ColType::BigInt,
            "float" | "float32" => ColType::Real,
            "double" | "float64" => ColType::Double,
            "boolean" => ColType::Boolean,
            "string" => ColType::Text,
            "bytes" => ColType::Bytea,
            "struct" | "map" | "array" => ColType::Jsonb,
            _ => return None,
        })
    }

    /// The type of a schemaless JSON value; None for null (no type to infer).
    pub(super) fn infer(v: &Value) -> Option<ColType> {
        Some(match v {
            Value::Null => return None,
            Value::Bool(_) => ColType::Boolean,
            Value::Number(n) if n.is_i64() => ColType::BigInt,
            // A u64 above i64::MAX and any fraction.
            Value::Number(_) => ColType::Double,
            Value::String(_) => ColType::Text,
            Value::Array(_) | Value::Object(_) => ColType::Jsonb,
        })
    }
}

/// One column of a row.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Field {
    pub(super) name: String,
    /// The column type it asks for (None: a schemaless null, which says nothing).
    pub(super) ty: Option<ColType>,
    /// Whether the column may be NULL (a schema's `optional`; schemaless fields always may).
    pub(super) optional: bool,
    pub(super) value: Value,
}

/// What a record does to its table.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Op {
    /// Insert, upsert or update (by `insert.mode`) a row: the key's columns, then the others.
    Write { table: String, pk: Vec<Field>, fields: Vec<Field> },
    /// Delete the row of this key (a tombstone, `delete.enabled`).
    Delete { table: String, pk: Vec<Field> },
    /// Nothing (a tombstone without `delete.enabled`).
    Skip,
}

/// JSON data and, for an envelope, its schema.
/// (A converter's schema is borrowed: one is shared by every record of a batch.)
struct Parsed<'s> {
    value: Value,
    schema: Option<Cow<'s, Value>>,
    /// The schema is a converter's (checked before the transforms), not the bytes' envelope.
    converted: bool,
}

/// Connect's envelope, or plain JSON. `what` is "key" or "value", for the error. With a
/// converter's schema the bytes are the converted payload: never an envelope.
fn parse<'s>(bytes: &[u8], what: &str, converted: Option<&'s Value>) -> Result<Parsed<'s>, String> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        format!(
            "the {what} is not JSON ({e}); the fields layout reads JSON objects (a JsonConverter's output, or \
             bytes that are JSON)"
        )
    })?;
    Ok(match converted {
        Some(schema) => Parsed { value: v, schema: Some(Cow::Borrowed(schema)), converted: true },
        None => unwrap_envelope(v),
    })
}

fn unwrap_envelope(v: Value) -> Parsed<'static> {
    match v {
        Value::Object(mut m)
            if m.len() == 2
                && m.get("schema").is_some_and(|s| s.is_object() || s.is_null())
                && m.contains_key("payload") =>
        {
            let schema = m.remove("schema").filter(|s| !s.is_null());
            Parsed {
                value: m.remove("payload").unwrap_or(Value::Null),
                schema: schema.map(Cow::Owned),
                converted: false,
            }
        }
        v => Parsed { value: v, schema: None, converted: false },
    }
}

/// The fields of a JSON object, typed by its struct schema if it has one. `only` keeps the
/// named ones.
fn object_fields(parsed: &Parsed, obj: &Map<String, Value>, only: Option<&dyn Fn(&str) -> bool>) -> Vec<Field> {
    let keep = |name: &str| only.is_none_or(|f| f(name));
    let defs = parsed.schema.as_deref().and_then(|s| s.get("fields")).and_then(Value::as_array);
    if parsed.converted {
        return fitted_fields(obj, defs.map(Vec::as_slice).unwrap_or(&[]), &keep);
    }
    match defs {
        Some(defs) => defs
            .iter()
            .filter_map(|d| {
                let name = d.get("field").and_then(Value::as_str)?;
                if !keep(name) {
                    return None;
                }
                Some(typed_field(d, name, obj.get(name).cloned().unwrap_or(Value::Null)))
            })
            .collect(),
        None => obj
            .iter()
            .filter(|(name, _)| keep(name))
            .map(|(name, v)| Field { name: name.clone(), ty: ColType::infer(v), optional: true, value: v.clone() })
            .collect(),
    }
}

/// A field typed by its schema field `def`.
fn typed_field(def: &Value, name: &str, value: Value) -> Field {
    let ty = ColType::from_schema(def);
    let value = if ty == Some(ColType::Numeric) { decimal(def, value) } else { value };
    Field { name: name.to_string(), ty, optional: def.get("optional").and_then(Value::as_bool).unwrap_or(false), value }
}

/// The fields of a converted object whose schema (`defs`) was read before the transforms: the
/// schema's fields in its order, typed by it where the data still fits (`conform`), then the
/// fields the schema does not name (added or renamed by a transform), inferred. A field a
/// transform removed is not written.
fn fitted_fields(obj: &Map<String, Value>, defs: &[Value], keep: &dyn Fn(&str) -> bool) -> Vec<Field> {
    let mut out = Vec::with_capacity(obj.len());
    let inferred = |name: &str, v: &Value| Field {
        name: name.to_string(),
        ty: ColType::infer(v),
        optional: true,
        value: v.clone(),
    };
    for d in defs {
        let Some(name) = d.get("field").and_then(Value::as_str) else { continue };
        let Some(v) = obj.get(name).filter(|_| keep(name)) else { continue };
        out.push(match conform(d, v.clone(), name) {
            Ok(_) => typed_field(d, name, v.clone()),
            Err(_) => inferred(name, v),
        });
    }
    for (name, v) in obj {
        let named = defs.iter().any(|d| d.get("field").and_then(Value::as_str) == Some(name.as_str()));
        if !named && keep(name) {
            out.push(inferred(name, v));
        }
    }
    out
}

/// A Connect `Decimal` (base64 of the unscaled value, big-endian two's complement; the scale
/// in the schema's `parameters`) as its decimal text. A value that is not one (a number a
/// converter already made, or bytes too long for 128 bits) is kept: the column's cast then
/// takes it or fails the record alone.
fn decimal(schema: &Value, v: Value) -> Value {
    let Value::String(b64) = &v else { return v };
    let scale = schema
        .get("parameters")
        .and_then(|p| p.get("scale"))
        .and_then(|s| s.as_str().and_then(|t| t.parse::<u32>().ok()).or_else(|| s.as_u64().map(|n| n as u32)))
        .unwrap_or(0);
    let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(b64) else { return v };
    if bytes.is_empty() || bytes.len() > 16 {
        return v;
    }
    // Sign-extend to 16 bytes.
    let fill = if bytes[0] & 0x80 != 0 { 0xff } else { 0 };
    let mut wide = [fill; 16];
    wide[16 - bytes.len()..].copy_from_slice(&bytes);
    let unscaled = i128::from_be_bytes(wide);
    Value::String(scaled_text(unscaled, scale))
}

/// `unscaled` / 10^`scale` as decimal text, exactly.
fn scaled_text(unscaled: i128, scale: u32) -> String {
    let digits = unscaled.unsigned_abs().to_string();
    let sign = if unscaled < 0 { "-" } else { "" };
    let scale = scale as usize;
    if scale == 0 {
        return format!("{sign}{digits}");
    }
    let padded = format!("{digits:0>width$}", width = scale + 1);
    let (int, frac) = padded.split_at(padded.len() - scale);
    format!("{sign}{int}.{frac}")
}

/// The primary-key columns of a record's key (`pk.mode=record_key`).
fn key_pk(s: &FieldsSettings, key: Option<&[u8]>, converted: Option<&Value>) -> Result<Vec<Field>, String> {
    let Some(bytes) = key else {
        return Err("the record has no key, and pk.mode=record_key takes the primary key from it".to_string());
    };
    // A key that is not JSON (a StringConverter's text, raw bytes) is one column as it is.
    let parsed = match serde_json::from_slice::<Value>(bytes) {
        Ok(v) => match converted {
            Some(schema) => Parsed { value: v, schema: Some(Cow::Borrowed(schema)), converted: true },
            None => unwrap_envelope(v),
        },
        // A converted string key is its text (the sink gets a string as text, not JSON).
        Err(_) => match std::str::from_utf8(bytes) {
            Ok(t) => Parsed {
                value: Value::String(t.to_string()),
                schema: converted.map(Cow::Borrowed),
                converted: converted.is_some(),
            },
            Err(_) => {
                let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
                let name = s.pk_fields.first().map(String::as_str).unwrap_or(KEY_COLUMN_DEFAULT);
                return Ok(vec![Field {
                    name: name.to_string(),
                    ty: Some(ColType::Bytea),
                    optional: false,
                    value: Value::String(b64),
                }]);
            }
        },
    };
    match &parsed.value {
        Value::Object(obj) => {
            let fields = object_fields(&parsed, obj, None);
            pick(fields, &s.pk_fields, "key")
        }
        Value::Null => {
            Err("the record's key is null, and pk.mode=record_key takes the primary key from it".to_string())
        }
        other => {
            if s.pk_fields.len() > 1 {
                return Err(format!(
                    "the key is {} (one column), but pk.fields names {}: a key that is not an object has one column",
                    json_kind(other),
                    s.pk_fields.len()
                ));
            }
            let name = s.pk_fields.first().map(String::as_str).unwrap_or(KEY_COLUMN_DEFAULT);
            // A non-object key is its text (a JSON string without quotes), so "7" and 7 are
            // one key; an envelope's schema may type it.
            let fits = |schema: &&Value| !parsed.converted || conform(schema, other.clone(), "").is_ok();
            let (ty, value) = match parsed.schema.as_deref().filter(fits).and_then(ColType::from_schema) {
                Some(ty) => (ty, other.clone()),
                None => (ColType::Text, Value::String(text_of(other))),
            };
            Ok(vec![Field { name: name.to_string(), ty: Some(ty), optional: false, value }])
        }
    }
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    }
}

/// The fields named by `names` (all when empty), in that order; each must be there and not
/// null (a primary key column cannot be).
fn pick(fields: Vec<Field>, names: &[String], from: &str) -> Result<Vec<Field>, String> {
    let picked: Vec<Field> = if names.is_empty() {
        fields
    } else {
        let mut by_name: BTreeMap<String, Field> = fields.into_iter().map(|f| (f.name.clone(), f)).collect();
        names
            .iter()
            .map(|n| {
                by_name
                    .remove(n)
                    .ok_or_else(|| format!("pk.fields names {n:?}, which the record's {from} does not have"))
            })
            .collect::<Result<_, _>>()?
    };
    if picked.is_empty() {
        return Err(format!("the record's {from} has no fields for the primary key"));
    }
    if let Some(f) = picked.iter().find(|f| f.value.is_null()) {
        return Err(format!("primary key field {:?} of the record's {from} is null", f.name));
    }
    Ok(picked.into_iter().map(|f| Field { optional: false, ..f }).collect())
}

/// What `record` does, or why it cannot be written (the record's failure). `schemas`: what
/// its converters read (None: no converter with schemas).
pub(super) fn record_op(
    s: &FieldsSettings,
    record: &SinkRecord,
    schemas: Option<&RecordSchemas>,
) -> Result<Op, String> {
    let table = s.table_for(&record.topic);
    let key_schema = schemas.and_then(|x| x.key.as_ref()).map(|x| x.json());
    let Some(value) = record.value.as_deref() else {
        if !s.delete_enabled {
            return Ok(Op::Skip);
        }
        return Ok(Op::Delete { table, pk: key_pk(s, record.key.as_deref(), key_schema)? });
    };
    let parsed = parse(value, "value", schemas.and_then(|x| x.value.as_ref()).map(|x| x.json()))?;
    let Value::Object(obj) = &parsed.value else {
        return Err(format!(
            "the value is {}, not an object: the fields layout writes an object's fields to columns (wrap it in \
             one with the HoistField transform, or use the records layout)",
            json_kind(&parsed.value)
        ));
    };
    let include = |name: &str| s.include.as_ref().is_none_or(|i| i.contains(name));
    let (pk, fields) = match s.pk_mode {
        PkMode::None => (Vec::new(), object_fields(&parsed, obj, Some(&include))),
        PkMode::Kafka => {
            let names: Vec<&str> = if s.pk_fields.len() == 3 {
                s.pk_fields.iter().map(String::as_str).collect()
            } else {
                KAFKA_PK_DEFAULT.to_vec()
            };
            let coord =
                |i: usize, ty, value| Field { name: names[i].to_string(), ty: Some(ty), optional: false, value };
            let pk = vec![
                coord(0, ColType::Text, Value::String(record.topic.to_string())),
                coord(1, ColType::Integer, Value::from(record.partition)),
                coord(2, ColType::BigInt, Value::from(record.offset)),
            ];
            (pk, object_fields(&parsed, obj, Some(&include)))
        }
        PkMode::RecordKey => {
            (key_pk(s, record.key.as_deref(), key_schema)?, object_fields(&parsed, obj, Some(&include)))
        }
        PkMode::RecordValue => {
            let all = object_fields(&parsed, obj, None);
            let pk = pick(all.clone(), &s.pk_fields, "value")?;
            let fields = all.into_iter().filter(|f| include(&f.name)).collect();
            (pk, fields)
        }
    };
    // A value field named as a key column is the key's.
    let fields: Vec<Field> = fields.into_iter().filter(|f| !pk.iter().any(|p| p.name == f.name)).collect();
    if let Some(f) = pk.iter().chain(&fields).find(|f| f.name.contains('\0') || f.name.is_empty()) {
        return Err(format!("field name {:?} cannot be a column name (empty, or holding NUL)", f.name));
    }
    Ok(Op::Write { table, pk, fields })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::postgres_fields_config::fields_settings;
    use serde_json::json;

    fn op(s: &FieldsSettings, r: &SinkRecord) -> Result<Op, String> {
        record_op(s, r, None)
    }

    fn settings(pairs: &[(&str, &str)]) -> FieldsSettings {
        fields_settings(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
    }

    fn record(key: Option<&str>, value: Option<&str>) -> SinkRecord {
        let mut r = SinkRecord::for_test("orders".into(), 2, 40);
        r.key = key.map(|k| bytes::Bytes::copy_from_slice(k.as_bytes()));
        r.value = value.map(|v| bytes::Bytes::copy_from_slice(v.as_bytes()));
        r
    }

    fn names(fields: &[Field]) -> Vec<&str> {
        fields.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn schemaless_types_are_inferred_from_the_json() {
        assert_eq!(ColType::infer(&json!(true)), Some(ColType::Boolean));
        assert_eq!(ColType::infer(&json!(-3)), Some(ColType::BigInt));
        assert_eq!(ColType::infer(&json!(u64::MAX)), Some(ColType::Double));
        assert_eq!(ColType::infer(&json!(1.5)), Some(ColType::Double));
        assert_eq!(ColType::infer(&json!("x")), Some(ColType::Text));
        assert_eq!(ColType::infer(&json!([1])), Some(ColType::Jsonb));
        assert_eq!(ColType::infer(&json!({"a": 1})), Some(ColType::Jsonb));
        assert_eq!(ColType::infer(&Value::Null), None);
    }

    #[test]
    fn connect_schemas_map_to_postgres_types() {
        for (schema, ty) in [
            (json!({"type": "int8"}), ColType::SmallInt),
            (json!({"type": "int16"}), ColType::SmallInt),
            (json!({"type": "int32"}), ColType::Integer),
            (json!({"type": "int64"}), ColType::BigInt),
            (json!({"type": "float"}), ColType::Real),
            (json!({"type": "double"}), ColType::Double),
            (json!({"type": "boolean"}), ColType::Boolean),
            (json!({"type": "string"}), ColType::Text),
            (json!({"type": "bytes"}), ColType::Bytea),
            (json!({"type": "struct", "fields": []}), ColType::Jsonb),
            (json!({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}), ColType::TimestampTz),
            (json!({"type": "int32", "name": "org.apache.kafka.connect.data.Date"}), ColType::Date),
        ] {
            assert_eq!(ColType::from_schema(&schema), Some(ty), "{schema}");
        }
        assert_eq!(ColType::from_schema(&json!({"type": "decimal128"})), None);
        let time = json!({"type": "int32", "name": "org.apache.kafka.connect.data.Time"});
        assert_eq!(ColType::from_schema(&time), Some(ColType::Time));
        let dec = json!({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"});
        assert_eq!(ColType::from_schema(&dec), Some(ColType::Numeric));
    }

    #[test]
    fn connect_decimals_become_their_decimal_text() {
        let schema = |scale: &str| json!({"parameters": {"scale": scale}});
        let b64 = |b: &[u8]| json!(base64::engine::general_purpose::STANDARD.encode(b));
        // 12345 (0x3039) at scale 2, and -1 (0xff) at scale 3.
        assert_eq!(decimal(&schema("2"), b64(&[0x30, 0x39])), json!("123.45"));
        assert_eq!(decimal(&schema("3"), b64(&[0xff])), json!("-0.001"));
        assert_eq!(decimal(&schema("0"), b64(&[0x00, 0x80])), json!("128"));
        assert_eq!(decimal(&json!({}), b64(&[0x07])), json!("7"));
        // Not a Connect decimal: kept for the cast to judge.
        assert_eq!(decimal(&schema("2"), json!(1.5)), json!(1.5));
        assert_eq!(decimal(&schema("2"), json!("not base64!")), json!("not base64!"));
        assert_eq!(decimal(&schema("0"), b64(&[1; 17])), b64(&[1; 17]));
        assert_eq!(scaled_text(i128::MIN, 0), i128::MIN.to_string());
    }

    #[test]
    fn an_envelope_types_its_fields_and_keeps_optional() {
        let s = settings(&[]);
        let v = json!({
            "schema": {"type": "struct", "fields": [
                {"field": "id", "type": "int32", "optional": false},
                {"field": "note", "type": "string", "optional": true},
            ]},
            "payload": {"id": 7, "note": null},
        });
        let Op::Write { fields, pk, .. } = op(&s, &record(None, Some(&v.to_string()))).unwrap() else {
            panic!("a write")
        };
        assert!(pk.is_empty());
        assert_eq!(
            fields[0],
            Field { name: "id".into(), ty: Some(ColType::Integer), optional: false, value: json!(7) }
        );
        assert_eq!(
            fields[1],
            Field { name: "note".into(), ty: Some(ColType::Text), optional: true, value: Value::Null }
        );
    }

    #[test]
    fn record_key_takes_an_objects_fields_or_a_keys_text() {
        let s = settings(&[("pk.mode", "record_key"), ("insert.mode", "upsert")]);
        let Op::Write { pk, fields, table } =
            op(&s, &record(Some(r#"{"id": 5}"#), Some(r#"{"id": 9, "n": "a"}"#))).unwrap()
        else {
            panic!("a write")
        };
        assert_eq!(table, "\"orders\"");
        assert_eq!(pk, vec![Field { name: "id".into(), ty: Some(ColType::BigInt), optional: false, value: json!(5) }]);
        assert_eq!(names(&fields), vec!["n"], "the key's id wins over the value's");
        // A plain text key: one text column, default name.
        let Op::Write { pk, .. } = op(&s, &record(Some("k-1"), Some("{}"))).unwrap() else { panic!() };
        assert_eq!(
            pk,
            vec![Field {
                name: KEY_COLUMN_DEFAULT.into(),
                ty: Some(ColType::Text),
                optional: false,
                value: json!("k-1")
            }]
        );
        // A number key is its text too, so 7 and "7" are one row.
        let Op::Write { pk, .. } = op(&s, &record(Some("7"), Some("{}"))).unwrap() else { panic!() };
        assert_eq!(pk[0].value, json!("7"));
        assert!(op(&s, &record(None, Some("{}"))).unwrap_err().contains("no key"));
    }

    #[test]
    fn tombstones_delete_only_with_delete_enabled() {
        let s = settings(&[("pk.mode", "record_key")]);
        assert_eq!(op(&s, &record(Some("k"), None)).unwrap(), Op::Skip);
        let s = settings(&[("pk.mode", "record_key"), ("delete.enabled", "true"), ("pk.fields", "sku")]);
        let Op::Delete { pk, .. } = op(&s, &record(Some("k"), None)).unwrap() else { panic!("a delete") };
        assert_eq!(names(&pk), vec!["sku"]);
    }

    #[test]
    fn kafka_and_value_keys_and_the_whitelist() {
        let s = settings(&[("pk.mode", "kafka"), ("fields.whitelist", "a")]);
        let Op::Write { pk, fields, .. } = op(&s, &record(None, Some(r#"{"a":1,"b":2}"#))).unwrap() else { panic!() };
        assert_eq!(names(&pk), KAFKA_PK_DEFAULT.to_vec());
        assert_eq!(pk[1].value, json!(2));
        assert_eq!(pk[2].value, json!(40));
        assert_eq!(names(&fields), vec!["a"]);
        let s = settings(&[("pk.mode", "record_value"), ("pk.fields", "b"), ("fields.include", "a")]);
        let Op::Write { pk, fields, .. } = op(&s, &record(None, Some(r#"{"a":1,"b":2,"c":3}"#))).unwrap() else {
            panic!()
        };
        assert_eq!((names(&pk), names(&fields)), (vec!["b"], vec!["a"]));
        let e = op(&s, &record(None, Some(r#"{"a":1}"#))).unwrap_err();
        assert!(e.contains("\"b\""), "{e}");
    }

    #[test]
    fn values_that_are_not_objects_fail_alone_saying_why() {
        let s = settings(&[]);
        assert!(op(&s, &record(None, Some("not json"))).unwrap_err().contains("not JSON"));
        assert!(op(&s, &record(None, Some("[1]"))).unwrap_err().contains("HoistField"));
        assert!(op(&s, &record(None, Some(r#"{"":1}"#))).unwrap_err().contains("column name"));
    }
}

#[cfg(test)]
#[path = "postgres_fields_row_schema_tests.rs"]
mod schema_tests;
