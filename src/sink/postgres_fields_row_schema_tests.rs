//! The fields layout with a converter's schema (JsonConverter, `schemas.enable=true`): the
//! whole path a record takes, envelope bytes -> converter -> (transforms) -> the bytes and
//! schemas the sink gets -> the row's column types.

use bytes::Bytes;
use serde_json::{json, Value};

use super::*;
use crate::sink::converter::{Converter, JsonConverter};
use crate::sink::data::{Data, RecordSchemas};
use crate::sink::postgres_fields_config::fields_settings;

fn settings(pairs: &[(&str, &str)]) -> FieldsSettings {
    fields_settings(&pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()).unwrap()
}

/// What the pipeline hands the sink for an enveloped value: the converted data as bytes, and
/// the schema beside them. `change` stands for the transforms.
fn converted(envelope: &Value, change: impl FnOnce(&mut Value)) -> (SinkRecord, RecordSchemas) {
    let conv = JsonConverter::new(true);
    let bytes = Bytes::from(envelope.to_string());
    let (data, schema) = conv.to_data_and_schema("orders", Some(&bytes)).unwrap();
    let Some(Data::Json(mut v)) = data else { panic!("JSON data") };
    change(&mut v);
    let mut r = SinkRecord::for_test("orders".into(), 2, 40);
    r.value = Some(Data::Json(v).to_bytes());
    (r, RecordSchemas::new(None, schema))
}

fn types(op: Op) -> Vec<(String, Option<&'static str>, bool)> {
    let Op::Write { fields, .. } = op else { panic!("a write") };
    fields.into_iter().map(|f| (f.name, f.ty.map(ColType::sql), f.optional)).collect()
}

fn every_type() -> Value {
    let logical = |name: &str, ty: &str| json!({"type": ty, "name": name, "optional": true});
    json!({
        "schema": {"type": "struct", "fields": [
            {"field": "i8", "type": "int8"},
            {"field": "i16", "type": "int16"},
            {"field": "i32", "type": "int32"},
            {"field": "i64", "type": "int64"},
            {"field": "f32", "type": "float"},
            {"field": "f64", "type": "double"},
            {"field": "ok", "type": "boolean"},
            {"field": "s", "type": "string", "optional": true},
            {"field": "raw", "type": "bytes", "optional": true},
            {"field": "price", "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
             "parameters": {"scale": "2"}, "optional": true},
            dict_field("day", logical("org.apache.kafka.connect.data.Date", "int32")),
            dict_field("at", logical("org.apache.kafka.connect.data.Time", "int32")),
            dict_field("ts", logical("org.apache.kafka.connect.data.Timestamp", "int64")),
        ]},
        "payload": {"i8": 1, "i16": 2, "i32": 3, "i64": 4, "f32": 1.5, "f64": 2.5, "ok": true, "s": null,
                    "raw": "AQI=", "price": "AQI=", "day": 19000, "at": 3600000, "ts": 1700000000000_i64},
    })
}

fn dict_field(name: &str, mut schema: Value) -> Value {
    schema["field"] = json!(name);
    schema
}

#[test]
fn a_converters_schema_types_the_columns_as_connects_jdbc_sink_does() {
    let (r, schemas) = converted(&every_type(), |_| {});
    let got = types(record_op(&settings(&[]), &r, Some(&schemas)).unwrap());
    let want: Vec<(String, Option<&str>, bool)> = [
        ("i8", "smallint", false),
        ("i16", "smallint", false),
        ("i32", "integer", false),
        ("i64", "bigint", false),
        ("f32", "real", false),
        ("f64", "double precision", false),
        ("ok", "boolean", false),
        ("s", "text", true),
        ("raw", "bytea", true),
        ("price", "numeric", true),
        ("day", "date", true),
        ("at", "time without time zone", true),
        ("ts", "timestamp with time zone", true),
    ]
    .into_iter()
    .map(|(n, t, o)| (n.to_string(), Some(t), o))
    .collect();
    assert_eq!(got, want);
    // The decimal's value is its text, as from an envelope in the bytes.
    let Op::Write { fields, .. } = record_op(&settings(&[]), &r, Some(&schemas)).unwrap() else { panic!() };
    assert_eq!(fields.iter().find(|f| f.name == "price").map(|f| &f.value), Some(&json!("2.58")));
    // Without the schema the same bytes are schemaless: every number a bigint or a double.
    let plain = types(record_op(&settings(&[]), &r, None).unwrap());
    assert!(plain.iter().any(|(n, t, _)| n == "i8" && *t == Some("bigint")), "{plain:?}");
}

#[test]
fn fields_a_transform_changed_are_inferred_and_removed_ones_left_out() {
    let env = json!({
        "schema": {"type": "struct", "fields": [
            {"field": "id", "type": "int32"},
            {"field": "name", "type": "string"},
            {"field": "tag", "type": "string"},
            {"field": "n", "type": "int16"},
        ]},
        "payload": {"id": 1, "name": "a", "tag": "t", "n": 5},
    });
    // As InsertField (source), ReplaceField (exclude tag, rename name to customer) and Cast
    // (n to a string) would leave it.
    let (r, schemas) = converted(&env, |v| {
        let o = v.as_object_mut().unwrap();
        o.insert("source".into(), json!("bench"));
        o.remove("tag");
        let name = o.remove("name").unwrap();
        o.insert("customer".into(), name);
        o.insert("n".into(), json!("5"));
    });
    let got = types(record_op(&settings(&[]), &r, Some(&schemas)).unwrap());
    assert_eq!(
        got,
        vec![
            ("id".to_string(), Some("integer"), false),
            ("n".to_string(), Some("text"), true),
            ("customer".to_string(), Some("text"), true),
            ("source".to_string(), Some("text"), true),
        ]
    );
}

#[test]
fn a_converted_key_is_typed_by_its_schema() {
    let s = settings(&[("pk.mode", "record_key"), ("pk.fields", "k")]);
    let mut r = SinkRecord::for_test("orders".into(), 2, 40);
    r.key = Some(Bytes::from_static(b"7"));
    r.value = Some(Bytes::from_static(br#"{"a":1}"#));
    let int = RecordSchemas::new(Some(crate::sink::Schema::from_json(json!({"type": "int32"}))), None);
    let Op::Write { pk, .. } = record_op(&s, &r, Some(&int)).unwrap() else { panic!() };
    assert_eq!((pk[0].ty, &pk[0].value), (Some(ColType::Integer), &json!(7)));
    // A key that no longer fits its schema (a transform made it text) is text.
    let string = RecordSchemas::new(Some(crate::sink::Schema::from_json(json!({"type": "boolean"}))), None);
    let Op::Write { pk, .. } = record_op(&s, &r, Some(&string)).unwrap() else { panic!() };
    assert_eq!((pk[0].ty, &pk[0].value), (Some(ColType::Text), &json!("7")));
    // A struct key: its fields, typed.
    r.key = Some(Bytes::from_static(br#"{"k":3}"#));
    let st = json!({"type": "struct", "fields": [{"field": "k", "type": "int64"}]});
    let key = RecordSchemas::new(Some(crate::sink::Schema::from_json(st)), None);
    let Op::Write { pk, .. } = record_op(&s, &r, Some(&key)).unwrap() else { panic!() };
    assert_eq!((pk[0].ty, pk[0].optional), (Some(ColType::BigInt), false));
}
