//! Converters and single message transforms against a real broker (`scripts/kafka up`; fails
//! without one), with Kafka Connect 4.4 standalone as the oracle: the same records (JSON with
//! and without Connect's schema envelope, tombstones, headers, a value that is not JSON) go
//! through the same chains on both runtimes into a file sink, and the lines are compared as
//! data (the `fields` case takes our fast path for InsertField/ReplaceField on schemaless
//! JSON, `src/sink/transforms/flat.rs`). Connect's FileStreamSink prints `record.value()`
//! with Java's `toString` (`{a=1, b=x}` for a map, `Struct{a=1,b=x}` for a struct, null
//! fields left out); ours prints JSON: both are read into one shape (scalars as text, null
//! fields dropped) before the comparison.
//!
//! `ours_through_converters_and_transforms` runs our side alone and checks the values it
//! expects. `connect_agrees_on_converters_transforms_and_dead_letters` also starts Connect
//! the way `scripts/bench sink` does (peers/java-connect, built with `mvn` if
//! `target/bench-sink/java-connect/classpath.txt` is missing; fails when it cannot be), its
//! REST listener on 8083 + `KAFKA_PORT_OFFSET`. Every wait is for a condition with a
//! generous deadline.

use crate::common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::sink::{ConnectorConfig, Registry, Worker, WorkerConfig};
use serde_json::{json, Value};

const N: usize = 1000;

/// A record to produce: value (None: tombstone), headers.
type Rec = (Option<String>, Vec<(String, String)>);

/// Schemaless JSON objects; a tombstone every 100th; one value that is not JSON.
fn plain_json() -> Vec<Rec> {
    (0..N)
        .map(|i| match i {
            _ if i % 100 == 50 => (None, vec![]),
            777 => (Some("not json".to_string()), vec![]),
            _ => (
                Some(json!({"id": i, "name": format!("name-{i}"), "secret": format!("s-{i}"), "n": i, "nested": {"x": i, "y": "why"}}).to_string()),
                vec![],
            ),
        })
        .collect()
}

fn envelope_schema() -> Value {
    json!({"type": "struct", "optional": false, "fields": [
        {"field": "id", "type": "int64", "optional": false},
        {"field": "name", "type": "string", "optional": true},
        {"field": "n", "type": "int32", "optional": true},
        {"field": "extra", "type": "string", "optional": true}
    ]})
}

/// Connect's envelope around a struct; one value that is not JSON.
fn enveloped_json() -> Vec<Rec> {
    (0..N)
        .map(|i| match i {
            333 => (Some("{not json".to_string()), vec![]),
            _ => (
                Some(
                    json!({"schema": envelope_schema(), "payload": {"id": i, "name": format!("name-{i}"), "n": i}})
                        .to_string(),
                ),
                vec![],
            ),
        })
        .collect()
}

/// Lines of text; a `skip` header on every 10th, a tombstone every 100th.
fn strings() -> Vec<Rec> {
    (0..N)
        .map(|i| match i {
            _ if i % 100 == 99 => (None, vec![]),
            _ if i % 10 == 3 => (Some(format!("line-{i}")), vec![("skip".to_string(), "1".to_string())]),
            _ => (Some(format!("line-{i}")), vec![("src".to_string(), "test".to_string())]),
        })
        .collect()
}

/// One chain: its name, its records, its settings (both runtimes), the lines and
/// dead-lettered records it should end with.
struct Case {
    name: &'static str,
    records: Vec<Rec>,
    settings: Vec<(&'static str, &'static str)>,
    lines: usize,
    dead: usize,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "plain",
            records: plain_json(),
            settings: vec![
                ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
                ("value.converter.schemas.enable", "false"),
                ("transforms", "tomb,insert,replace,mask,cast,flat,ts"),
                ("transforms.tomb.type", "org.apache.kafka.connect.transforms.Filter"),
                ("transforms.tomb.predicate", "isTomb"),
                ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
                ("transforms.insert.static.field", "origin"),
                ("transforms.insert.static.value", "ks"),
                ("transforms.insert.offset.field", "o"),
                ("transforms.replace.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
                ("transforms.replace.exclude", "secret"),
                ("transforms.replace.renames", "id:ident"),
                ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
                ("transforms.mask.fields", "name"),
                ("transforms.cast.type", "org.apache.kafka.connect.transforms.Cast$Value"),
                ("transforms.cast.spec", "n:string"),
                ("transforms.flat.type", "org.apache.kafka.connect.transforms.Flatten$Value"),
                ("transforms.flat.delimiter", "_"),
                ("transforms.ts.type", "org.apache.kafka.connect.transforms.TimestampConverter$Value"),
                ("transforms.ts.field", "o"),
                ("transforms.ts.target.type", "string"),
                ("transforms.ts.format", "yyyy-MM-dd'T'HH:mm:ss.SSS"),
                ("predicates", "isTomb"),
                ("predicates.isTomb.type", "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"),
            ],
            lines: N - 10 - 1,
            dead: 1,
        },
        // Only InsertField$Value and ReplaceField$Value on schemaless JSON: our fast path
        // (no Value tree); tombstones pass both as `null` lines.
        Case {
            name: "fields",
            records: plain_json(),
            settings: vec![
                ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
                ("value.converter.schemas.enable", "false"),
                ("transforms", "insert,replace"),
                ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
                ("transforms.insert.static.field", "origin"),
                ("transforms.insert.static.value", "ks"),
                ("transforms.insert.offset.field", "o"),
                ("transforms.replace.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
                ("transforms.replace.exclude", "secret"),
                ("transforms.replace.renames", "id:ident"),
            ],
            lines: N - 1,
            dead: 1,
        },
        Case {
            name: "envelope",
            records: enveloped_json(),
            settings: vec![
                ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
                ("value.converter.schemas.enable", "true"),
                ("transforms", "replace,insert,cast"),
                ("transforms.replace.type", "org.apache.kafka.connect.transforms.ReplaceField$Value"),
                ("transforms.replace.include", "id,name,extra"),
                ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
                ("transforms.insert.partition.field", "p"),
                ("transforms.cast.type", "org.apache.kafka.connect.transforms.Cast$Value"),
                ("transforms.cast.spec", "id:string"),
            ],
            lines: N - 1,
            dead: 1,
        },
        Case {
            name: "extract",
            records: plain_json(),
            settings: vec![
                ("value.converter", "org.apache.kafka.connect.json.JsonConverter"),
                ("value.converter.schemas.enable", "false"),
                ("transforms", "tomb,hf,vtk,ext,mask,cast,tsr,insert"),
                ("transforms.tomb.type", "org.apache.kafka.connect.transforms.Filter"),
                ("transforms.tomb.predicate", "isTomb"),
                ("transforms.hf.type", "org.apache.kafka.connect.transforms.HeaderFrom$Value"),
                ("transforms.hf.fields", "name"),
                ("transforms.hf.headers", "hname"),
                ("transforms.hf.operation", "move"),
                ("transforms.vtk.type", "org.apache.kafka.connect.transforms.ValueToKey"),
                ("transforms.vtk.fields", "id"),
                ("transforms.ext.type", "org.apache.kafka.connect.transforms.ExtractField$Value"),
                ("transforms.ext.field", "nested"),
                ("transforms.mask.type", "org.apache.kafka.connect.transforms.MaskField$Value"),
                ("transforms.mask.fields", "y"),
                ("transforms.mask.replacement", "hidden"),
                ("transforms.cast.type", "org.apache.kafka.connect.transforms.Cast$Value"),
                ("transforms.cast.spec", "x:float64"),
                ("transforms.tsr.type", "org.apache.kafka.connect.transforms.TimestampRouter"),
                ("transforms.tsr.topic.format", "${topic}-at-${timestamp}"),
                ("transforms.tsr.timestamp.format", "yyyy.MM.dd"),
                ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
                ("transforms.insert.topic.field", "t"),
                ("predicates", "isTomb"),
                ("predicates.isTomb.type", "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone"),
            ],
            lines: N - 10 - 1,
            dead: 1,
        },
        Case {
            name: "strings",
            records: strings(),
            settings: vec![
                ("value.converter", "org.apache.kafka.connect.storage.StringConverter"),
                ("transforms", "skip,route,hoist,insert,hdr,drophdr"),
                ("transforms.skip.type", "org.apache.kafka.connect.transforms.Filter"),
                ("transforms.skip.predicate", "hasSkip"),
                ("transforms.route.type", "org.apache.kafka.connect.transforms.RegexRouter"),
                ("transforms.route.regex", "(.*)"),
                ("transforms.route.replacement", "routed-$1"),
                ("transforms.hoist.type", "org.apache.kafka.connect.transforms.HoistField$Value"),
                ("transforms.hoist.field", "line"),
                ("transforms.insert.type", "org.apache.kafka.connect.transforms.InsertField$Value"),
                ("transforms.insert.topic.field", "t"),
                ("transforms.insert.predicate", "elsewhere"),
                ("transforms.insert.negate", "true"),
                ("transforms.hdr.type", "org.apache.kafka.connect.transforms.InsertHeader"),
                ("transforms.hdr.header", "h"),
                ("transforms.hdr.value.literal", "v"),
                ("transforms.drophdr.type", "org.apache.kafka.connect.transforms.DropHeaders"),
                ("transforms.drophdr.headers", "h,src"),
                ("predicates", "hasSkip,elsewhere"),
                ("predicates.hasSkip.type", "org.apache.kafka.connect.transforms.predicates.HasHeaderKey"),
                ("predicates.hasSkip.name", "skip"),
                ("predicates.elsewhere.type", "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"),
                ("predicates.elsewhere.pattern", "nowhere-.*"),
            ],
            // A skip header on i % 10 == 3 (100 records; none of them a tombstone).
            lines: N - 100,
            dead: 0,
        },
    ]
}

/// The settings every connector of a case gets on both runtimes.
fn common_settings(name: &str, topic: &str, file: &Path, dlq: &str) -> Vec<(String, String)> {
    vec![
        ("name".into(), name.into()),
        ("topics".into(), topic.into()),
        ("tasks.max".into(), "1".into()),
        ("file".into(), file.display().to_string()),
        ("key.converter".into(), "org.apache.kafka.connect.storage.StringConverter".into()),
        ("errors.tolerance".into(), "all".into()),
        ("errors.deadletterqueue.topic.name".into(), dlq.into()),
        ("errors.deadletterqueue.topic.replication.factor".into(), "1".into()),
        ("errors.deadletterqueue.context.headers.enable".into(), "true".into()),
    ]
}

async fn produce(topic: &str, records: &[Rec]) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    let mut sent = Vec::with_capacity(records.len());
    for (value, headers) in records {
        let mut r = match value {
            Some(v) => ProducerRecord::new(topic, v.clone().into_bytes()),
            None => ProducerRecord::tombstone(topic, "k"),
        };
        for (k, v) in headers {
            r.headers.push((k.clone(), Some(v.clone().into_bytes().into())));
        }
        sent.push(p.send(r).await.expect("send"));
    }
    p.flush().await;
    for d in sent {
        d.await.expect("delivered");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

/// A prepared case: topics produced, paths chosen.
struct Prepared {
    case: Case,
    topic: String,
    file_ours: PathBuf,
    file_connect: PathBuf,
    dlq_ours: String,
    dlq_connect: String,
}

async fn prepare() -> Vec<Prepared> {
    let admin = common::admin().await;
    let mut out = Vec::new();
    for case in cases() {
        let topic = common::new_topic(&admin, &format!("oracle-{}", case.name), 1).await;
        produce(&topic, &case.records).await;
        let dir = std::env::temp_dir();
        out.push(Prepared {
            file_ours: dir.join(format!("{}.txt", common::unique(&format!("oracle-{}-ours", case.name)))),
            file_connect: dir.join(format!("{}.txt", common::unique(&format!("oracle-{}-connect", case.name)))),
            dlq_ours: common::unique(&format!("oracle-dlq-{}-ours", case.name)),
            dlq_connect: common::unique(&format!("oracle-dlq-{}-connect", case.name)),
            topic,
            case,
        });
    }
    out
}

/// Starts our side of every case: one worker, one connector per case.
async fn run_ours(prepared: &[Prepared]) -> Worker {
    let admin = common::admin().await;
    let worker = Worker::new(WorkerConfig::new(common::bootstrap()), Registry::with_builtins());
    for p in prepared {
        let name = common::unique(&format!("oracle-{}", p.case.name));
        let group = common::new_group(&admin, &format!("g-oracle-{}", p.case.name), None).await;
        let mut settings = common_settings(&name, &p.topic, &p.file_ours, &p.dlq_ours);
        settings.push(("connector.class".into(), "org.apache.kafka.connect.file.FileStreamSinkConnector".into()));
        settings.push(("share.group.id".into(), group));
        settings.extend(p.case.settings.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let config = ConnectorConfig::from_pairs(settings).expect("connector config");
        worker.start_connector(config).await.expect("start connector");
    }
    worker
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path).map(|t| t.lines().map(str::to_string).collect()).unwrap_or_default()
}

async fn wait_for_lines(path: &Path, n: usize, deadline: Duration, log: &str) -> Vec<String> {
    let end = tokio::time::Instant::now() + deadline;
    loop {
        let got = lines(path);
        if got.len() >= n {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < end,
            "timed out: {} of {n} lines in {}; {log}",
            got.len(),
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Reads `n` records of `topic` from the start, with a fresh share group.
async fn read_topic(topic: &str, n: usize) -> Vec<kafka_share::ConsumerRecord> {
    let admin = common::admin().await;
    let group = common::new_group(&admin, "g-oracle-read", None).await;
    let c = kafka_share::ShareConsumer::connect(common::consumer_config(&common::bootstrap(), &group))
        .await
        .unwrap();
    c.subscribe([topic.to_string()]).unwrap();
    let got = common::poll_until(&c, n, Duration::from_secs(60), |_| {}).await;
    c.close(Duration::from_secs(10)).await.unwrap();
    got
}

fn header(r: &kafka_share::ConsumerRecord, key: &str) -> Option<String> {
    r.headers
        .iter()
        .find(|h| h.key.as_ref() == key.as_bytes())
        .and_then(|h| h.value.as_ref())
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Data in one shape for both sides: scalars as text, null fields left out.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Shape {
    Text(String),
    Null,
    List(Vec<Shape>),
    Map(BTreeMap<String, Shape>),
}

fn shape_of_json(v: &Value) -> Shape {
    match v {
        Value::Null => Shape::Null,
        Value::String(s) => Shape::Text(s.clone()),
        Value::Array(a) => Shape::List(a.iter().map(shape_of_json).collect()),
        Value::Object(m) => {
            Shape::Map(m.iter().filter(|(_, v)| !v.is_null()).map(|(k, v)| (k.clone(), shape_of_json(v))).collect())
        }
        other => Shape::Text(other.to_string()),
    }
}

/// A line of ours: JSON, or the text itself (a string value).
fn shape_of_ours(line: &str) -> Shape {
    match serde_json::from_str::<Value>(line) {
        Ok(v @ (Value::Object(_) | Value::Array(_))) => shape_of_json(&v),
        _ if line == "null" => Shape::Null,
        _ => Shape::Text(line.to_string()),
    }
}

/// A line of Connect's: Java's `toString` of a map (`{a=1, b=x}`), a `Struct{a=1,b=x}`, a
/// list (`[1, 2]`) or a scalar. The test data has no `,`, `=`, `{` or `[` inside a text.
fn shape_of_java(line: &str) -> Shape {
    fn parse(s: &str) -> (Shape, &str) {
        let s = s.trim_start();
        let body = s.strip_prefix("Struct{").or_else(|| s.strip_prefix('{'));
        if let Some(mut rest) = body {
            let mut m = BTreeMap::new();
            loop {
                rest = rest.trim_start();
                if let Some(r) = rest.strip_prefix('}') {
                    return (Shape::Map(m), r);
                }
                let eq = rest.find('=').expect("a map entry has =");
                let key = rest[..eq].trim().to_string();
                let (v, r) = parse(&rest[eq + 1..]);
                if v != Shape::Null {
                    m.insert(key, v);
                }
                rest = r.trim_start().strip_prefix(',').unwrap_or(r);
            }
        }
        if let Some(mut rest) = s.strip_prefix('[') {
            let mut l = Vec::new();
            loop {
                rest = rest.trim_start();
                if let Some(r) = rest.strip_prefix(']') {
                    return (Shape::List(l), r);
                }
                let (v, r) = parse(rest);
                l.push(v);
                rest = r.trim_start().strip_prefix(',').unwrap_or(r);
            }
        }
        let end = s.find([',', '}', ']']).unwrap_or(s.len());
        let text = &s[..end];
        (if text == "null" { Shape::Null } else { Shape::Text(text.to_string()) }, &s[end..])
    }
    parse(line).0
}

fn sorted(mut v: Vec<Shape>) -> Vec<Shape> {
    v.sort();
    v
}

/// `got` is `want`, where a text of `want` ending in `-at-` stands for any text it starts.
fn like(got: &Shape, want: &Shape) -> bool {
    match (got, want) {
        (Shape::Text(g), Shape::Text(w)) if w.ends_with("-at-") => g.starts_with(w.as_str()),
        (Shape::Map(g), Shape::Map(w)) => {
            g.len() == w.len() && w.iter().all(|(k, v)| g.get(k).is_some_and(|x| like(x, v)))
        }
        (g, w) => g == w,
    }
}

/// What record 5 of a case becomes.
fn sample(p: &Prepared) -> Shape {
    match p.case.name {
        "plain" => shape_of_json(
            &json!({"ident": 5, "name": "", "n": "5", "nested_x": 5, "nested_y": "why", "origin": "ks", "o": "1970-01-01T00:00:00.005"}),
        ),
        "fields" => shape_of_json(
            &json!({"ident": 5, "name": "name-5", "n": 5, "nested": {"x": 5, "y": "why"}, "origin": "ks", "o": 5}),
        ),
        "envelope" => shape_of_json(&json!({"id": "5", "name": "name-5", "p": 0})),
        "extract" => {
            let Shape::Map(m) = shape_of_json(&json!({"x": 5.0, "y": "hidden"})) else { unreachable!() };
            // The topic carries the day the record was produced: any `t` that starts right.
            let mut m = m;
            m.insert("t".into(), Shape::Text(format!("{}-at-", p.topic)));
            Shape::Map(m)
        }
        _ => shape_of_json(&json!({"line": "line-5", "t": format!("routed-{}", p.topic)})),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ours_through_converters_and_transforms() {
    let prepared = prepare().await;
    let worker = run_ours(&prepared).await;
    for p in &prepared {
        let got = wait_for_lines(&p.file_ours, p.case.lines, Duration::from_secs(120), "ours").await;
        assert_eq!(got.len(), p.case.lines, "{}: {got:?}", p.case.name);
        let shapes: Vec<Shape> = got.iter().map(|l| shape_of_ours(l)).collect();
        let want = sample(p);
        assert!(shapes.iter().any(|s| like(s, &want)), "{}: {want:?} not in {:?}", p.case.name, &shapes[..3]);
        if p.case.dead > 0 {
            let dead = read_topic(&p.dlq_ours, p.case.dead).await;
            assert_eq!(dead.len(), p.case.dead);
            assert_eq!(header(&dead[0], "__connect.errors.stage").as_deref(), Some("VALUE_CONVERTER"), "{:?}", dead[0]);
            let original = p.case.records.iter().find(|(v, _)| v.as_deref().is_some_and(|v| v.contains("not json")));
            assert_eq!(dead[0].value_str(), original.and_then(|(v, _)| v.as_deref()), "the record as consumed");
        }
    }
    worker.close(Duration::from_secs(30)).await.unwrap();
    for p in &prepared {
        let _ = std::fs::remove_file(&p.file_ours);
    }
}

/// Connect's classpath, built as `scripts/bench sink` builds it when missing.
pub(crate) fn connect_classpath() -> String {
    // Two oracle tests (this one and sink_rest_oracle) run at once in this binary: on a clean
    // checkout both would find no build and run Maven into the same directory together.
    static BUILD: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = BUILD.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("target/bench-sink/java-connect");
    if !dir.join("classpath.txt").exists() {
        let version = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
        let out = Command::new("mvn")
            .args(["-q", "-B", "-Dstyle.color=never"])
            .arg(format!("-Dkafka.version={version}"))
            .args(["-f", "peers/java-connect/pom.xml", "package", "dependency:build-classpath"])
            .current_dir(root)
            .output()
            .expect(
                "mvn (Connect is the oracle: install Maven, or build peers/java-connect as scripts/bench sink does)",
            );
        assert!(out.status.success(), "mvn failed: {}", String::from_utf8_lossy(&out.stdout));
    }
    let cp = std::fs::read_to_string(dir.join("classpath.txt")).expect("classpath.txt");
    format!("{}:{}", dir.join("connect-bench.jar").display(), cp.trim())
}

pub(crate) struct KillOnDrop(pub(crate) Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts Connect standalone with one connector per case (its file sink writes what
/// FileStreamSink writes), the REST listener on 8083 + KAFKA_PORT_OFFSET.
fn run_connect(prepared: &[Prepared], dir: &Path) -> (KillOnDrop, PathBuf) {
    let offset: u16 = std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let worker = dir.join("worker.properties");
    std::fs::write(
        &worker,
        format!(
            "bootstrap.servers={}\nkey.converter=org.apache.kafka.connect.storage.StringConverter\n\
             value.converter=org.apache.kafka.connect.storage.StringConverter\n\
             offset.storage.file.filename={}\noffset.flush.interval.ms=500\nlisteners=http://127.0.0.1:{}\n\
             plugin.discovery=service_load\n",
            common::bootstrap(),
            dir.join("connect.offsets").display(),
            8083 + offset
        ),
    )
    .unwrap();
    let mut args = vec![worker.display().to_string()];
    for p in prepared {
        let file = dir.join(format!("{}.properties", p.case.name));
        let mut text = String::new();
        let name = common::unique(&format!("oracle-connect-{}", p.case.name));
        for (k, v) in common_settings(&name, &p.topic, &p.file_connect, &p.dlq_connect) {
            text.push_str(&format!("{k}={v}\n"));
        }
        text.push_str("connector.class=bench.connect.BenchFileSinkConnector\n");
        for (k, v) in &p.case.settings {
            text.push_str(&format!("{k}={v}\n"));
        }
        std::fs::write(&file, text).unwrap();
        args.push(file.display().to_string());
    }
    let log = dir.join("connect.log");
    let out = std::fs::File::create(&log).unwrap();
    let child = Command::new("java")
        .args(["-Xms256M", "-Xmx1G", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", &connect_classpath()])
        .arg("org.apache.kafka.connect.cli.ConnectStandalone")
        .args(&args)
        .stdout(Stdio::from(out.try_clone().unwrap()))
        .stderr(Stdio::from(out))
        .spawn()
        .expect("java (Connect is the oracle)");
    (KillOnDrop(child), log)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_agrees_on_converters_transforms_and_dead_letters() {
    let prepared = prepare().await;
    let dir = std::env::temp_dir().join(common::unique("oracle-connect"));
    std::fs::create_dir_all(&dir).unwrap();
    let (connect, log) = run_connect(&prepared, &dir);
    let worker = run_ours(&prepared).await;
    let log_tail = || {
        let t = std::fs::read_to_string(&log).unwrap_or_default();
        t.lines().rev().take(30).collect::<Vec<_>>().into_iter().rev().collect::<Vec<_>>().join("\n")
    };
    for p in &prepared {
        let ours = wait_for_lines(&p.file_ours, p.case.lines, Duration::from_secs(120), "ours").await;
        let theirs = wait_for_lines(&p.file_connect, p.case.lines, Duration::from_secs(180), &log_tail()).await;
        assert_eq!(ours.len(), theirs.len(), "{}: as many lines", p.case.name);
        let (ours_s, theirs_s) = (
            sorted(ours.iter().map(|l| shape_of_ours(l)).collect()),
            sorted(theirs.iter().map(|l| shape_of_java(l)).collect()),
        );
        eprintln!("{}: ours {:?}, Connect {:?}", p.case.name, ours.get(5), theirs.get(5));
        assert!(theirs_s.iter().any(|s| like(s, &sample(p))), "{}: Connect has no {:?}", p.case.name, sample(p));
        if ours_s != theirs_s {
            let first = ours_s.iter().zip(&theirs_s).position(|(a, b)| a != b);
            panic!(
                "{}: Connect and ours disagree; first difference (sorted) at {first:?}: ours {:?}, Connect {:?}\nours line: {:?}\nConnect line: {:?}",
                p.case.name,
                first.map(|i| &ours_s[i]),
                first.map(|i| &theirs_s[i]),
                ours.first(),
                theirs.first()
            );
        }
        if p.case.dead > 0 {
            let (mine, connects) =
                (read_topic(&p.dlq_ours, p.case.dead).await, read_topic(&p.dlq_connect, p.case.dead).await);
            assert_eq!(mine.len(), connects.len(), "{}: as many dead letters", p.case.name);
            for (a, b) in mine.iter().zip(&connects) {
                assert_eq!(a.value, b.value, "{}: the same record dead-lettered", p.case.name);
                let stage = |r| header(r, "__connect.errors.stage");
                assert_eq!(stage(a), stage(b), "{}: the same stage", p.case.name);
                assert_eq!(stage(a).as_deref(), Some("VALUE_CONVERTER"));
            }
        }
    }
    worker.close(Duration::from_secs(30)).await.unwrap();
    drop(connect);
    for p in &prepared {
        let _ = std::fs::remove_file(&p.file_ours);
        let _ = std::fs::remove_file(&p.file_connect);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
