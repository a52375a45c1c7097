//! The `postgres` sink against a real broker and a real PostgreSQL (scripts/postgres; URL in
//! env KAFKA_SHARE_PG_URL): with forced redeliveries (released records polled again, and the
//! same batch put twice) the table holds exactly one row per produced record.

use crate::common;

use std::collections::BTreeSet;
use std::time::Duration;

use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{PostgresSink, Registry, SinkError, SinkTask, TaskConfig};
use kafka_share::{AcknowledgeType, ConsumerRecord, ShareConsumer};

/// The records as `put` takes them: lent, not copied.
fn lent(records: &[kafka_share::sink::SinkRecord]) -> Vec<&kafka_share::sink::SinkRecord> {
    records.iter().collect()
}

/// The database (scripts/postgres prints it; scripts/test exports it).
pub(crate) fn pg_url() -> String {
    std::env::var("KAFKA_SHARE_PG_URL").unwrap_or_else(|_| {
        let offset: u32 = std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|o| o.parse().ok()).unwrap_or(0);
        format!("postgres://postgres@127.0.0.1:{}/kafka_share", 15432 + offset)
    })
}

/// A client for checking the table; fails the test when PostgreSQL is not running.
pub(crate) async fn pg() -> tokio_postgres::Client {
    let url = pg_url();
    match tokio_postgres::connect(&url, tokio_postgres::NoTls).await {
        Ok((client, conn)) => {
            tokio::spawn(conn);
            client
        }
        Err(e) => panic!(
            "no PostgreSQL answered at {url}: {e}\nStart one with `scripts/postgres up` (it prints the URL; \
             export it as KAFKA_SHARE_PG_URL), or run the suite with `scripts/test`."
        ),
    }
}

fn config(pairs: &[(&str, &str)]) -> TaskConfig {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

fn table_name() -> String {
    common::unique("records").replace('-', "_")
}

async fn produce(topic: &str, n: usize, partitions: i32) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut futs = Vec::new();
    for i in 0..n {
        let mut rec = ProducerRecord::new(topic, format!("v-{i}"))
            .key(format!("k{i}"))
            .partition(i as i32 % partitions)
            .timestamp(1_700_000_000_000 + i as i64)
            .header("h", format!("x{i}"));
        if i == 0 {
            rec = rec.header("bin", vec![0u8, 0xff]).null_header("none");
        }
        futs.push(p.send(rec).await.expect("send"));
    }
    for f in futs {
        f.await.expect("delivered");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

#[tokio::test]
async fn redeliveries_never_duplicate_rows() {
    const N: usize = 60;
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg", 3).await;
    produce(&topic, N, 3).await;
    let db = pg().await;
    let table = table_name();
    let url = pg_url();
    let cfg = config(&[("connection.url", &url), ("table", &table), ("auto.create", "true")]);
    let mut task = Registry::with_builtins().get("postgres").unwrap().create(&cfg).unwrap();
    task.start(&cfg).await.unwrap();

    let group = common::new_group(&admin, "g-sink-pg", None).await;
    let c = ShareConsumer::connect(
        common::consumer_config(&common::bootstrap(), &group).acknowledgement_mode(AcknowledgementMode::Explicit),
    )
    .await
    .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");

    // Each first delivery is put and then RELEASEd, as if the task had died before its
    // ACCEPT reached the broker: the broker delivers it again, and it is put again (and put
    // twice in a row, for good measure) before being ACCEPTed.
    let mut accepted: BTreeSet<(i32, i64)> = BTreeSet::new();
    let mut redelivered = 0usize;
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    while accepted.len() < N && tokio::time::Instant::now() < end {
        let batch: Vec<ConsumerRecord> = c.poll(Duration::from_millis(500)).await.expect("poll");
        if batch.is_empty() {
            continue;
        }
        task.put(&lent(&batch)).await.unwrap();
        for r in &batch {
            if r.delivery_count == 1 {
                c.acknowledge_with(r, AcknowledgeType::Release).unwrap();
            } else {
                redelivered += 1;
                accepted.insert((r.partition, r.offset));
                c.acknowledge(r).unwrap();
            }
        }
        if batch.iter().any(|r| r.delivery_count > 1) {
            task.put(&lent(&batch)).await.unwrap();
        }
        let res = c.commit_sync(Duration::from_secs(10)).await.expect("commit");
        assert!(res.values().all(|r| r.is_ok()), "{res:?}");
    }
    c.close(Duration::from_secs(10)).await.expect("close");
    task.flush().await.unwrap();
    task.stop().await;
    assert_eq!(accepted.len(), N, "every record redelivered and accepted");
    assert!(redelivered >= N);

    let q = format!("SELECT count(*), count(DISTINCT (\"partition\", \"offset\")) FROM \"{table}\" WHERE topic = $1");
    let row = db.query_one(&q, &[&topic]).await.unwrap();
    let (rows, distinct): (i64, i64) = (row.get(0), row.get(1));
    assert_eq!((rows, distinct), (N as i64, N as i64), "exactly one row per produced record");

    // The columns of one row: key, value, headers as JSON, timestamp.
    let q = format!(
        "SELECT key, value, headers::text, (extract(epoch from \"timestamp\") * 1000)::bigint \
         FROM \"{table}\" WHERE topic = $1 AND value = 'v-0'::bytea"
    );
    let row = db.query_one(&q, &[&topic]).await.unwrap();
    assert_eq!(row.get::<_, Vec<u8>>(0), b"k0");
    assert_eq!(row.get::<_, Vec<u8>>(1), b"v-0");
    let headers: serde_json::Value = serde_json::from_str(row.get::<_, &str>(2)).unwrap();
    assert_eq!(
        headers,
        serde_json::json!([
            {"key": "h", "value": "x0"},
            {"key": "bin", "value_base64": "AP8="},
            {"key": "none", "value": null},
        ])
    );
    assert_eq!(row.get::<_, i64>(3), 1_700_000_000_000);
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
}

#[tokio::test]
async fn a_record_the_table_refuses_fails_alone() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-bad", 1).await;
    produce(&topic, 5, 1).await;
    let group = common::new_group(&admin, "g-sink-pg-bad", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");
    let mut records = common::poll_until(&c, 5, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");
    records.sort_by_key(|r| r.offset);
    assert_eq!(records.len(), 5);

    // A table of the user's own, with a constraint the record "v-3" breaks.
    let db = pg().await;
    let table = table_name();
    db.batch_execute(&format!(
        "CREATE TABLE \"{table}\" (topic text NOT NULL, \"partition\" integer NOT NULL, \"offset\" bigint NOT NULL, \
         key bytea, value bytea CHECK (value <> 'v-3'::bytea), headers jsonb NOT NULL, \"timestamp\" timestamptz, \
         PRIMARY KEY (topic, \"partition\", \"offset\"))"
    ))
    .await
    .unwrap();
    let mut task = PostgresSink::new();
    task.start(&config(&[("connection.url", &pg_url()), ("table", &table)])).await.unwrap();
    match task.put(&lent(&records)).await.unwrap_err() {
        SinkError::Records { failed } => {
            assert_eq!(failed.iter().map(|f| f.index).collect::<Vec<_>>(), vec![3]);
            assert!(failed[0].reason.contains("check constraint"), "{}", failed[0].reason);
        }
        e => panic!("expected one failed record, got {e:?}"),
    }
    let n: i64 = db.query_one(&format!("SELECT count(*) FROM \"{table}\""), &[]).await.unwrap().get(0);
    assert_eq!(n, 4, "the other records are in");
    // Put again (a redelivery): still one row each, the bad one still refused alone.
    assert!(matches!(task.put(&lent(&records)).await, Err(SinkError::Records { .. })));
    let n: i64 = db.query_one(&format!("SELECT count(*) FROM \"{table}\""), &[]).await.unwrap().get(0);
    assert_eq!(n, 4);
    task.stop().await;
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
}

#[tokio::test]
async fn a_missing_table_is_fatal_and_a_dead_server_retriable() {
    let _db = pg().await; // the server must be up, so the first error is about the table
    let url = pg_url();
    let mut task = PostgresSink::new();
    let e = task.start(&config(&[("connection.url", &url), ("table", &table_name())])).await.unwrap_err();
    assert!(matches!(e, SinkError::Fatal { .. }) && e.to_string().contains("auto.create"), "{e:?}");

    // Nobody listens on this port: start succeeds (the server may come later), put is
    // retriable.
    let port = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap().local_addr().unwrap().port();
    let dead = format!("postgres://postgres@127.0.0.1:{port}/kafka_share");
    let mut task = PostgresSink::new();
    task.start(&config(&[("connection.url", &dead), ("table", "t")])).await.unwrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-dead", 1).await;
    produce(&topic, 1, 1).await;
    let group = common::new_group(&admin, "g-sink-pg-dead", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic]).expect("subscribe");
    let records = common::poll_until(&c, 1, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");
    let e = task.put(&lent(&records)).await.unwrap_err();
    assert!(matches!(e, SinkError::Retriable { .. }), "{e:?}");
}

#[tokio::test]
async fn a_killed_connection_is_retriable_and_the_next_put_reconnects() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-kill", 1).await;
    produce(&topic, 4, 1).await;
    let group = common::new_group(&admin, "g-sink-pg-kill", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic.clone()]).expect("subscribe");
    let mut records = common::poll_until(&c, 4, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");
    records.sort_by_key(|r| r.offset);

    let db = pg().await;
    let table = table_name();
    let app = table.clone(); // names the sink's session in pg_stat_activity
    let url = format!("{}?application_name={app}", pg_url());
    let mut task = PostgresSink::new();
    task.start(&config(&[("connection.url", &url), ("table", &table), ("auto.create", "true")]))
        .await
        .unwrap();
    task.put(&lent(&records[..2])).await.unwrap();

    // The server ends the sink's session, as a restart or an admin would.
    let killed: i64 = db
        .query_one("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", &[&app])
        .await
        .unwrap()
        .get(0);
    assert_eq!(killed, 1);
    // The first put after it may find the connection already closed (and reconnect at once)
    // or fail retriably; within two puts the batch is in.
    let mut ok = false;
    for _ in 0..2 {
        match task.put(&lent(&records)).await {
            Ok(()) => {
                ok = true;
                break;
            }
            Err(SinkError::Retriable { .. }) => continue,
            Err(e) => panic!("a lost connection must be retriable, got {e:?}"),
        }
    }
    assert!(ok, "the sink reconnected");
    task.stop().await;
    let n: i64 = db.query_one(&format!("SELECT count(*) FROM \"{table}\""), &[]).await.unwrap().get(0);
    assert_eq!(n, 4, "one row per record, the two put before the kill not duplicated");
    db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
}

/// The test CA that signed the server's certificate (scripts/postgres makes it; scripts/test
/// exports its path).
fn pg_ca() -> String {
    std::env::var("KAFKA_SHARE_PG_CA")
        .unwrap_or_else(|_| format!("{}/target/postgres/tls/ca.pem", env!("CARGO_MANIFEST_DIR")))
}

/// Whether the connection named `app` (its application_name) is encrypted, as the server
/// sees it.
async fn encrypted(db: &tokio_postgres::Client, app: &str) -> bool {
    let row = db
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    row.get::<_, Option<bool>>(0).unwrap_or_else(|| panic!("no connection named {app}"))
}

/// TLS with libpq's sslmode meanings: verify-full against the test CA, require without a CA
/// (encrypted, unchecked), disable; verify-full against the default roots is refused, fatal,
/// saying why.
#[tokio::test]
async fn tls_follows_libpqs_sslmode() {
    let db = pg().await;
    let ca = pg_ca();
    assert!(std::path::Path::new(&ca).exists(), "no test CA at {ca}: run scripts/postgres up");
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "sink-pg-tls", 1).await;
    produce(&topic, 3, 1).await;
    let group = common::new_group(&admin, "g-sink-pg-tls", None).await;
    let c = ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .expect("consumer");
    c.subscribe([topic]).expect("subscribe");
    let records = common::poll_until(&c, 3, Duration::from_secs(30), |_| {}).await;
    c.close(Duration::from_secs(10)).await.expect("close");
    assert_eq!(records.len(), 3);

    let sep = if pg_url().contains('?') { '&' } else { '?' };
    for (mode, extra, want_tls) in [
        ("verify-full", format!("&sslrootcert={ca}"), true),
        ("verify-ca", format!("&sslrootcert={ca}"), true),
        ("require", String::new(), true),
        ("disable", String::new(), false),
    ] {
        let app = common::unique("sink-tls").replace('-', "_");
        let url = format!("{}{sep}sslmode={mode}{extra}&application_name={app}", pg_url());
        let table = table_name();
        let mut task = PostgresSink::new();
        task.start(&config(&[("connection.url", &url), ("table", &table), ("auto.create", "true")]))
            .await
            .unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        task.put(&lent(&records)).await.unwrap_or_else(|e| panic!("sslmode={mode}: {e}"));
        assert_eq!(encrypted(&db, &app).await, want_tls, "sslmode={mode}");
        let n: i64 = db.query_one(&format!("SELECT count(*) FROM \"{table}\""), &[]).await.unwrap().get(0);
        assert_eq!(n, 3, "sslmode={mode}");
        task.stop().await;
        db.batch_execute(&format!("DROP TABLE \"{table}\"")).await.unwrap();
    }

    // The test CA is not among the bundled roots: verify-full without sslrootcert refuses the
    // server's certificate, and retrying would not help.
    let app = common::unique("sink-tls-refused").replace('-', "_");
    let url = format!("{}{sep}sslmode=verify-full&application_name={app}", pg_url());
    let mut task = PostgresSink::new();
    let started = task
        .start(&config(&[("connection.url", &url), ("table", &table_name()), ("auto.create", "true")]))
        .await;
    if started.is_ok() {
        panic!("verify-full without the CA connected; encrypted: {}", encrypted(&db, &app).await);
    }
    let e = started.unwrap_err();
    assert!(matches!(e, SinkError::Fatal { .. }), "{e:?}");
    assert!(e.to_string().to_lowercase().contains("certificate"), "says it is the certificate: {e}");
}
