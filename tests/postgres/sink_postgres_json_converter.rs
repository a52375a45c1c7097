//! Connect's schema through a JsonConverter with `schemas.enable=true` into the postgres
//! sink's `fields` layout, through the `kafka-share-sink` binary: the converter reads the
//! envelope, a transform adds a field, and `auto.create` makes each column of its schema's
//! type (not of the type the converted JSON alone would suggest), optional fields nullable.
//! Waits are for the rows in the table, never for time.

use crate::common;

use std::time::Duration;

use serde_json::{json, Value};

use crate::sink_postgres::{pg, pg_url};
use crate::sink_postgres_fields::{columns, count, produce, start_sink, table_name, wait_until};

fn field(name: &str, ty: &str, logical: Option<&str>, optional: bool) -> Value {
    let mut f = json!({"field": name, "type": ty, "optional": optional});
    if let Some(l) = logical {
        f["name"] = json!(l);
    }
    f
}

/// Record `id` in Connect's envelope, one field of every type the JDBC sink maps.
fn envelope(id: i64, note: Option<&str>) -> String {
    let mut price = field("price", "bytes", Some("org.apache.kafka.connect.data.Decimal"), false);
    price["parameters"] = json!({"scale": "2"});
    json!({
        "schema": {"type": "struct", "optional": false, "fields": [
            field("id", "int64", None, false),
            field("i8", "int8", None, false),
            field("i16", "int16", None, false),
            field("i32", "int32", None, false),
            field("f32", "float", None, false),
            field("f64", "double", None, false),
            field("flag", "boolean", None, false),
            field("name", "string", None, false),
            field("note", "string", None, true),
            field("raw", "bytes", None, false),
            price,
            field("day", "int32", Some("org.apache.kafka.connect.data.Date"), false),
            field("t", "int32", Some("org.apache.kafka.connect.data.Time"), false),
            field("at", "int64", Some("org.apache.kafka.connect.data.Timestamp"), false),
        ]},
        "payload": {
            "id": id, "i8": 1, "i16": 2, "i32": 3, "f32": 0.5, "f64": 1.25, "flag": true, "name": format!("n{id}"),
            "note": note, "raw": "AP8=", "price": "MDk=", "day": 19000, "t": 3_723_004, "at": 1_700_000_000_000_i64,
        },
    })
    .to_string()
}

#[tokio::test]
async fn json_converter_schemas_type_the_columns_auto_create_makes() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-jsonconv", 1).await;
    let group = common::new_group(&admin, "g-sink-pg-jsonconv", None).await;
    let db = pg().await;
    let table = table_name("jsonconv");

    let dir = std::env::temp_dir().join(common::unique("sink-pg-jsonconv"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let connector = dir.join("jdbc.json");
    let cfg = json!({"name": "jdbc-json", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": topic,
        "tasks.max": "1",
        "share.group.id": group,
        "consumer.override.fetch.max.wait.ms": "200",
        "connection.url": format!("jdbc:{}", pg_url()),
        "table.name.format": table,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "transforms": "origin",
        "transforms.origin.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.origin.static.field": "origin",
        "transforms.origin.static.value": "kafka",
        "insert.mode": "upsert",
        "pk.mode": "record_value",
        "pk.fields": "id",
        "auto.create": "true",
    }});
    std::fs::write(&connector, cfg.to_string()).unwrap();
    let records: Vec<(String, Option<String>)> =
        (1..=3).map(|i| (format!("k{i}"), Some(envelope(i, (i == 2).then_some("second"))))).collect();
    produce(&topic, &records).await;

    let sink = start_sink(&worker, &connector);
    let rows = format!("SELECT count(*) FROM \"{table}\"");
    wait_until("the 3 rows in the table", Duration::from_secs(120), || async { count(&db, &rows).await == 3 }).await;
    assert!(sink.terminate().status.success(), "a clean exit on SIGTERM");

    let cols = columns(&db, &table).await;
    assert_eq!(
        cols,
        [
            "id bigint NO",
            "i8 smallint NO",
            "i16 smallint NO",
            "i32 integer NO",
            "f32 real NO",
            "f64 double precision NO",
            "flag boolean NO",
            "name text NO",
            "note text YES",
            "raw bytea NO",
            "price numeric NO",
            "day date NO",
            "t time without time zone NO",
            "at timestamp with time zone NO",
            // Added by the transform, so not in the schema: inferred, nullable.
            "origin text YES",
        ]
    );
    let got = db
        .query(
            &format!(
                "SELECT id, i8, i32, f32, price::text, day::text, t::text, (extract(epoch from at) * 1000)::bigint, \
                 raw, note, origin FROM \"{table}\" ORDER BY id"
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(got.len(), 3);
    let second = &got[1];
    assert_eq!(second.get::<_, i64>(0), 2);
    assert_eq!(second.get::<_, i16>(1), 1);
    assert_eq!(second.get::<_, i32>(2), 3);
    assert_eq!(second.get::<_, f32>(3), 0.5);
    assert_eq!(second.get::<_, String>(4), "123.45");
    assert_eq!(second.get::<_, String>(5), "2022-01-08");
    assert_eq!(second.get::<_, String>(6), "01:02:03.004");
    assert_eq!(second.get::<_, i64>(7), 1_700_000_000_000);
    assert_eq!(second.get::<_, Vec<u8>>(8), vec![0u8, 0xff]);
    assert_eq!(second.get::<_, Option<String>>(9).as_deref(), Some("second"));
    assert_eq!(second.get::<_, String>(10), "kafka");
    assert_eq!(got[0].get::<_, Option<String>>(9), None);
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}
