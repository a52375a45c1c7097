//! The postgres sink's `fields` layout (Connect's JDBC sink settings) against a real broker and
//! a real PostgreSQL: upsert by record key and deletes by tombstone through the
//! `kafka-share-sink` binary, killed with SIGKILL in the middle of a write and restarted;
//! `auto.create` / `auto.evolve` and a bad record failing alone through the library.
//! Waits are for conditions in the table, never for time.

use crate::common;
use crate::common::sink_bin::{SinkBin, SinkProc};

use std::collections::BTreeMap;
use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{PostgresSink, SinkError, SinkTask, TaskConfig};
use kafka_share::ShareConsumer;

use crate::sink_postgres::{pg, pg_url};

/// The records as `put` takes them: lent, not copied.
fn lent(records: &[kafka_share::sink::SinkRecord]) -> Vec<&kafka_share::sink::SinkRecord> {
    records.iter().collect()
}

pub(crate) fn table_name(prefix: &str) -> String {
    common::unique(prefix).replace('-', "_")
}

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// Waits until `cond` holds; fails the test after `deadline` (a bound on a hang, not a
/// timing assumption).
pub(crate) async fn wait_until<F, Fut>(what: &str, deadline: Duration, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let end = tokio::time::Instant::now() + deadline;
    while !cond().await {
        assert!(tokio::time::Instant::now() < end, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A scalar of `sql` on the table, 0 while the table does not exist yet.
pub(crate) async fn count(db: &tokio_postgres::Client, sql: &str) -> i64 {
    db.query_one(sql, &[]).await.map(|r| r.get::<_, i64>(0)).unwrap_or(0)
}

/// A value in Connect's JSON envelope: `{"schema": .., "payload": {"name": .., "version": ..}}`.
fn envelope(name: &str, version: i32) -> String {
    serde_json::json!({
        "schema": {"type": "struct", "optional": false, "fields": [
            {"field": "name", "type": "string", "optional": false},
            {"field": "version", "type": "int32", "optional": false},
        ]},
        "payload": {"name": name, "version": version},
    })
    .to_string()
}

/// The table's columns in order, each "name type nullable" as information_schema says them.
pub(crate) async fn columns(db: &tokio_postgres::Client, table: &str) -> Vec<String> {
    let rows = db
        .query(
            "SELECT column_name::text, data_type::text, is_nullable::text FROM information_schema.columns \
             WHERE table_name = $1 ORDER BY ordinal_position",
            &[&table],
        )
        .await
        .unwrap();
    rows.iter()
        .map(|r| format!("{} {} {}", r.get::<_, String>(0), r.get::<_, String>(1), r.get::<_, String>(2)))
        .collect()
}

/// (key, Some(value)) or (key, None) for a tombstone.
pub(crate) async fn produce(topic: &str, records: &[(String, Option<String>)]) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut futs = Vec::with_capacity(records.len());
    for (k, v) in records {
        let rec = match v {
            Some(v) => ProducerRecord::new(topic, v.clone()).key(k.clone()),
            None => ProducerRecord::tombstone(topic, k.clone()),
        };
        futs.push(p.send(rec).await.expect("send"));
    }
    for f in futs {
        f.await.expect("delivered");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

/// The binary on `worker` and `connector` (its metrics on a free port); killed when dropped.
pub(crate) fn start_sink(worker: &std::path::Path, connector: &std::path::Path) -> SinkProc {
    SinkBin::new().metrics().args([worker, connector]).start()
}

/// 10,000 records (8,000 keys, then 2,000 updates of earlier keys), then 2,000 tombstones,
/// through a JDBC-sink connector file (upsert, pk.mode=record_key, delete.enabled, auto.create
/// from the values' schema). The first process is killed with SIGKILL while a write of its
/// waits on a lock the test holds; a second one finishes. The table ends with exactly the
/// surviving keys and their last values.
///
/// Phases wait for the table between them because a share group gives no order per key: two
/// versions of a key in flight at once may be written in either order (see DESIGN.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_and_delete_by_key_end_with_the_last_values_across_a_kill_9() {
    const KEYS: usize = 8_000;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-fields", 3).await;
    // A 6 s lock: what the killed process held comes back to the group soon.
    let group = common::new_group(&admin, "g-sink-pg-fields", Some(6000)).await;
    let db = pg().await;
    let table = table_name("jdbc");
    let q = |sql: &str| sql.replace("{t}", &format!("\"{table}\""));

    let dir = std::env::temp_dir().join(common::unique("sink-pg-fields"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, format!("bootstrap.servers={}\n", common::bootstrap())).unwrap();
    let connector = dir.join("jdbc.json");
    let cfg = serde_json::json!({"name": "jdbc", "config": {
        "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
        "topics": topic,
        "tasks.max": "2",
        "share.group.id": group,
        "share.acquisition.lock.timeout.ms": "6000",
        "consumer.override.fetch.max.wait.ms": "200",
        "connection.url": format!("jdbc:{}", pg_url()),
        "table.name.format": table,
        "insert.mode": "upsert",
        "pk.mode": "record_key",
        "pk.fields": "id",
        "delete.enabled": "true",
        "auto.create": "true",
    }});
    std::fs::write(&connector, cfg.to_string()).unwrap();

    let key = |i: usize| format!("k{i}");
    let first: Vec<(String, Option<String>)> =
        (0..KEYS).map(|i| (key(i), Some(envelope(&format!("n{i}-v1"), 1)))).collect();

    // Half the keys, then the table locked, then the other half: the sink's next write waits
    // on the lock, and the process is killed there, with records acquired and not written.
    produce(&topic, &first[..KEYS / 2]).await;
    let a = start_sink(&worker, &connector);
    wait_until("the first half in the table", Duration::from_secs(120), || async {
        count(&db, &q("SELECT count(*) FROM {t}")).await == (KEYS / 2) as i64
    })
    .await;
    let (locker, conn) = tokio_postgres::connect(&pg_url(), tokio_postgres::NoTls).await.expect("locker");
    tokio::spawn(conn);
    locker.batch_execute(&q("BEGIN; LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")).await.unwrap();
    produce(&topic, &first[KEYS / 2..]).await;
    let waiting = format!("SELECT count(*) FROM pg_locks WHERE relation = to_regclass('\"{table}\"') AND NOT granted");
    wait_until("a write of the sink waiting on the lock", Duration::from_secs(120), || async {
        count(&db, &waiting).await > 0
    })
    .await;
    a.kill_9();
    locker.batch_execute("COMMIT").await.unwrap();
    let rows_at_kill = count(&db, &q("SELECT count(*) FROM {t}")).await;
    assert!(rows_at_kill < KEYS as i64, "the kill came in the middle ({rows_at_kill} rows)");

    // A new process finishes the first pass; then 2,000 updates; then the tombstones.
    let b = start_sink(&worker, &connector);
    wait_until("every key in the table", Duration::from_secs(120), || async {
        count(&db, &q("SELECT count(*) FROM {t}")).await == KEYS as i64
    })
    .await;
    let updates: Vec<(String, Option<String>)> =
        (0..KEYS).step_by(4).map(|i| (key(i), Some(envelope(&format!("n{i}-v2"), 2)))).collect();
    assert_eq!(updates.len(), 2_000);
    produce(&topic, &updates).await;
    wait_until("every update in the table", Duration::from_secs(120), || async {
        count(&db, &q("SELECT count(*) FROM {t} WHERE version = 2")).await == 2_000
    })
    .await;
    // Keys i with i % 8 in {0, 1}: 1,000 of them updated, 1,000 not.
    let deleted: Vec<usize> = (0..KEYS).filter(|i| i % 8 < 2).collect();
    let tombstones: Vec<(String, Option<String>)> = deleted.iter().map(|&i| (key(i), None)).collect();
    produce(&topic, &tombstones).await;
    let surviving = (KEYS - deleted.len()) as i64;
    wait_until("every tombstone applied", Duration::from_secs(120), || async {
        count(&db, &q("SELECT count(*) FROM {t}")).await == surviving
    })
    .await;
    let status = b.terminate().status;
    assert!(status.success(), "{status:?}");

    // Exactly the surviving keys, with their last values.
    let want: BTreeMap<String, (String, i32)> = (0..KEYS)
        .filter(|i| i % 8 >= 2)
        .map(|i| {
            let v = if i % 4 == 0 { 2 } else { 1 };
            (key(i), (format!("n{i}-v{v}"), v))
        })
        .collect();
    let rows = db.query(&q("SELECT id, name, version FROM {t}"), &[]).await.unwrap();
    let have: BTreeMap<String, (String, i32)> =
        rows.iter().map(|r| (r.get::<_, String>(0), (r.get::<_, String>(1), r.get::<_, i32>(2)))).collect();
    assert_eq!(have.len(), want.len());
    assert!(have == want, "the table differs from the keys' last values");
    // auto.create took the types and NOT NULL from the schema, and the key as primary key.
    assert_eq!(columns(&db, &table).await, ["id text NO", "name text NO", "version integer NO"]);
    db.batch_execute(&q("DROP TABLE {t}")).await.unwrap();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Schemaless JSON through the library: `auto.create` makes the table from the first
/// batch's fields, `auto.evolve` adds a column when a new field appears (a null one waits
/// until it has a value), one batch with several versions of a key ends with the last, a
/// value its column cannot take fails alone, and without `auto.evolve` a new field fails its
/// record saying what to do.
#[tokio::test]
async fn auto_evolve_adds_a_column_when_a_new_field_appears() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-evolve", 1).await;
    let records: Vec<(String, Option<String>)> = vec![
        ("k1".into(), Some(r#"{"a": 1}"#.into())),
        ("k2".into(), Some(r#"{"a": 2}"#.into())),
        ("k1".into(), Some(r#"{"a": 3, "b": "x"}"#.into())),
        ("k2".into(), None),
        ("k3".into(), Some(r#"{"a": 4, "c": {"n": [1, 2]}, "d": null}"#.into())),
        ("k5".into(), Some(r#"{"a": "not a number"}"#.into())),
        ("k4".into(), Some(r#"{"a": 5, "e": true}"#.into())),
    ];
    produce(&topic, &records).await;
    let group = common::new_group(&admin, "g-sink-pg-evolve", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");
    let mut polled = common::poll_until(&c, records.len(), Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");
    polled.sort_by_key(|r| r.offset);
    assert_eq!(polled.len(), records.len());

    let db = pg().await;
    let table = table_name("evolve");
    let url = pg_url();
    let settings = [
        ("connection.url", url.as_str()),
        ("table.layout", "fields"),
        ("table.name.format", table.as_str()),
        ("insert.mode", "upsert"),
        ("pk.mode", "record_key"),
        ("delete.enabled", "true"),
        ("auto.create", "true"),
        ("auto.evolve", "true"),
    ];
    let mut task = PostgresSink::new();
    task.start(&config(&settings)).await.unwrap();
    let columns = || async {
        let rows = db
            .query(
                "SELECT column_name::text, data_type::text FROM information_schema.columns WHERE table_name = $1 \
                 ORDER BY ordinal_position",
                &[&table],
            )
            .await
            .unwrap();
        rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(1))).collect::<Vec<_>>()
    };
    let pairs = |v: &[(&str, &str)]| v.iter().map(|(a, b)| (a.to_string(), b.to_string())).collect::<Vec<_>>();

    task.put(&lent(&polled[..2])).await.unwrap();
    assert_eq!(columns().await, pairs(&[("__connect_key", "text"), ("a", "bigint")]));

    // The rest but k4: b and c appear (d is null: no column yet); k5's "a" is not a bigint.
    match task.put(&lent(&polled[..6])).await {
        Err(SinkError::Records { failed }) => {
            assert_eq!(failed.iter().map(|f| f.index).collect::<Vec<_>>(), vec![5], "{failed:?}");
            assert!(failed[0].reason.contains("bigint"), "{}", failed[0].reason);
        }
        other => panic!("expected k5 to fail alone, got {other:?}"),
    }
    assert_eq!(columns().await, pairs(&[("__connect_key", "text"), ("a", "bigint"), ("b", "text"), ("c", "jsonb")]));
    let rows = db
        .query(&format!("SELECT __connect_key, a, b, c::text FROM \"{table}\" ORDER BY 1"), &[])
        .await
        .unwrap();
    let have: Vec<(String, i64, Option<String>, Option<String>)> =
        rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
    assert_eq!(
        have,
        vec![
            ("k1".to_string(), 3, Some("x".to_string()), None),
            ("k3".to_string(), 4, None, Some(r#"{"n": [1, 2]}"#.to_string())),
        ],
        "k1's last version, k2 deleted, k3 with its object as jsonb"
    );
    task.stop().await;

    // Without auto.evolve a new field fails its record and says what to do.
    let mut strict = PostgresSink::new();
    let without: Vec<(&str, &str)> = settings.iter().copied().filter(|(k, _)| *k != "auto.evolve").collect();
    strict.start(&config(&without)).await.unwrap();
    match strict.put(&lent(&polled[6..])).await {
        Err(SinkError::Records { failed }) => {
            assert_eq!(failed.len(), 1);
            assert!(
                failed[0].reason.contains("\"e\"") && failed[0].reason.contains("auto.evolve"),
                "{}",
                failed[0].reason
            );
        }
        other => panic!("expected the record to fail, got {other:?}"),
    }
    strict.stop().await;
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
}

/// Settings Connect refuses are refused before a task starts, saying what to change.
#[tokio::test]
async fn delete_enabled_without_a_record_key_is_refused() {
    let url = pg_url();
    let e = PostgresSink::check_jdbc_config(&config(&[
        ("connection.url", &url),
        ("delete.enabled", "true"),
        ("pk.mode", "record_value"),
    ]))
    .unwrap_err();
    assert!(matches!(e, SinkError::Fatal { .. }), "{e:?}");
    assert!(e.to_string().contains("pk.mode=record_key"), "{e}");
}

/// A value in Connect's schema envelope: `auto.create` makes each field's column from its
/// Connect type (logical types included), and the values land as those types.
#[tokio::test]
async fn connect_schema_types_land_as_postgres_types() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-types", 1).await;
    let field = |name: &str, ty: &str, logical: Option<&str>, optional: bool| {
        let mut f = serde_json::json!({"field": name, "type": ty, "optional": optional});
        if let Some(l) = logical {
            f["name"] = serde_json::json!(l);
        }
        f
    };
    let mut price = field("price", "bytes", Some("org.apache.kafka.connect.data.Decimal"), false);
    price["parameters"] = serde_json::json!({"scale": "2"});
    let value = serde_json::json!({
        "schema": {"type": "struct", "fields": [
            field("id", "int64", None, false),
            field("at", "int64", Some("org.apache.kafka.connect.data.Timestamp"), false),
            field("day", "int32", Some("org.apache.kafka.connect.data.Date"), false),
            field("t", "int32", Some("org.apache.kafka.connect.data.Time"), false),
            price,
            field("raw", "bytes", None, false),
            field("flag", "boolean", None, false),
            field("ratio", "double", None, false),
            field("small", "int16", None, false),
            {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": false},
            field("note", "string", None, true),
        ]},
        "payload": {
            "id": 1, "at": 1_700_000_000_000_i64, "day": 19000, "t": 3_723_004, "price": "MDk=", "raw": "AP8=",
            "flag": true, "ratio": 1.25, "small": 7, "tags": ["a", "b"], "note": null,
        },
    });
    produce(&topic, &[("ignored".to_string(), Some(value.to_string()))]).await;
    let group = common::new_group(&admin, "g-sink-pg-types", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");
    let polled = common::poll_until(&c, 1, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");

    let db = pg().await;
    let table = table_name("types");
    let url = pg_url();
    let mut task = PostgresSink::new();
    task.start(&config(&[
        ("connection.url", &url),
        ("table.layout", "fields"),
        ("table.name.format", &table),
        ("insert.mode", "upsert"),
        ("pk.mode", "record_value"),
        ("pk.fields", "id"),
        ("auto.create", "true"),
    ]))
    .await
    .unwrap();
    task.put(&lent(&polled)).await.unwrap();
    // Twice: an upsert of the same row changes nothing.
    task.put(&lent(&polled)).await.unwrap();
    task.stop().await;

    let cols = columns(&db, &table).await;
    assert_eq!(
        cols,
        [
            "id bigint NO",
            "at timestamp with time zone NO",
            "day date NO",
            "t time without time zone NO",
            "price numeric NO",
            "raw bytea NO",
            "flag boolean NO",
            "ratio double precision NO",
            "small smallint NO",
            "tags jsonb NO",
            "note text YES",
        ]
    );
    let row = db
        .query_one(
            &format!(
                "SELECT count(*) OVER (), id, (extract(epoch from at) * 1000)::bigint, day::text, t::text, price::text, \
                 raw, flag, ratio, small, tags::text, note FROM \"{table}\""
            ),
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1, "one row");
    assert_eq!(row.get::<_, i64>(1), 1);
    assert_eq!(row.get::<_, i64>(2), 1_700_000_000_000);
    assert_eq!(row.get::<_, String>(3), "2022-01-08");
    assert_eq!(row.get::<_, String>(4), "01:02:03.004");
    assert_eq!(row.get::<_, String>(5), "123.45");
    assert_eq!(row.get::<_, Vec<u8>>(6), vec![0u8, 0xff]);
    assert!(row.get::<_, bool>(7));
    assert_eq!(row.get::<_, f64>(8), 1.25);
    assert_eq!(row.get::<_, i16>(9), 7);
    assert_eq!(row.get::<_, String>(10), r#"["a", "b"]"#);
    assert_eq!(row.get::<_, Option<String>>(11), None);
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
}

/// `pk.mode=kafka` with `insert.mode=insert` skips a redelivered record (one row per record
/// however often it is put); `insert.mode=update` changes only rows that are there.
#[tokio::test]
async fn kafka_keys_skip_redeliveries_and_update_changes_only_existing_rows() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-update", 1).await;
    produce(&topic, &[("k1".into(), Some(r#"{"a": 1}"#.into())), ("k2".into(), Some(r#"{"a": 2}"#.into()))]).await;
    let group = common::new_group(&admin, "g-sink-pg-update", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");
    let polled = common::poll_until(&c, 2, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");

    let db = pg().await;
    let url = pg_url();
    let by_offset = table_name("kafka_pk");
    let mut task = PostgresSink::new();
    task.start(&config(&[
        ("connection.url", &url),
        ("table.layout", "fields"),
        ("table.name.format", &by_offset),
        ("pk.mode", "kafka"),
        ("auto.create", "true"),
    ]))
    .await
    .unwrap();
    task.put(&lent(&polled)).await.unwrap();
    task.put(&lent(&polled)).await.unwrap();
    task.stop().await;
    let rows = db
        .query(
            &format!(
                "SELECT __connect_topic, __connect_partition, __connect_offset, a FROM \"{by_offset}\" ORDER BY 3"
            ),
            &[],
        )
        .await
        .unwrap();
    let have: Vec<(String, i32, i64, i64)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
    let mut offsets: Vec<i64> = polled.iter().map(|r| r.offset).collect();
    offsets.sort();
    assert_eq!(have, vec![(topic.clone(), 0, offsets[0], 1), (topic.clone(), 0, offsets[1], 2)]);
    db.batch_execute(&format!("DROP TABLE \"{by_offset}\"")).await.unwrap();

    let existing = table_name("update");
    db.batch_execute(&format!(
        "CREATE TABLE \"{existing}\" (id text PRIMARY KEY, a bigint); INSERT INTO \"{existing}\" VALUES ('k1', 0)"
    ))
    .await
    .unwrap();
    let mut task = PostgresSink::jdbc();
    task.start(&config(&[
        ("connection.url", &url),
        ("table.name.format", &existing),
        ("insert.mode", "update"),
        ("pk.mode", "record_key"),
        ("pk.fields", "id"),
    ]))
    .await
    .unwrap();
    task.put(&lent(&polled)).await.unwrap();
    task.stop().await;
    let rows = db.query(&format!("SELECT id, a FROM \"{existing}\" ORDER BY 1"), &[]).await.unwrap();
    let have: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(have, vec![("k1".to_string(), 1)], "k1 updated, k2 not inserted");
    db.batch_execute(&format!("DROP TABLE \"{existing}\"")).await.unwrap();
}
