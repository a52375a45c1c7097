//! The `kafka-console-share-consumer` binary against the real broker, side by side with
//! Java's `ConsoleShareConsumer` (run through `scripts/kafka tool`, which finds java on PATH
//! or JAVA_HOME and downloads Kafka's jars into the cache if they are missing): the same
//! topic and options give the same bytes; `--timeout-ms`, `--reject`, `--release`, SIGTERM
//! and bad usage end as Java's tool does.

use crate::common;

use std::process::{Output, Stdio};
use std::time::Duration;

use kafka_share::admin::Admin;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// Longest a tool run may take before the test gives up on it (it is killed).
const RUN_LIMIT: Duration = Duration::from_secs(120);

const STRING_DESERIALIZER: &str = "org.apache.kafka.common.serialization.StringDeserializer";

async fn finish(mut cmd: Command, what: &str) -> Output {
    cmd.kill_on_drop(true).stdin(Stdio::null());
    let run = cmd.output();
    match tokio::time::timeout(RUN_LIMIT, run).await {
        Ok(out) => out.unwrap_or_else(|e| panic!("cannot run {what}: {e}")),
        Err(_) => panic!("{what} did not finish within {RUN_LIMIT:?}"),
    }
}

/// Our binary with `args` (the bootstrap added).
async fn ours(args: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-console-share-consumer"));
    cmd.args(["--bootstrap-server", &common::bootstrap()]).args(args);
    finish(cmd, "kafka-console-share-consumer").await
}

/// Java's ConsoleShareConsumer of the Kafka version under test with `args` (the bootstrap added).
async fn java(args: &[&str]) -> Output {
    let version = std::env::var("KAFKA_VERSION").unwrap_or_else(|_| "4.4.0".into());
    let mut cmd = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"));
    cmd.args(["tool", "--version", &version, "org.apache.kafka.tools.consumer.ConsoleShareConsumer"])
        .args(["--bootstrap-server", &common::bootstrap()])
        .args(args);
    let out = finish(cmd, "scripts/kafka tool ... ConsoleShareConsumer").await;
    assert!(
        out.status.success(),
        "Java's ConsoleShareConsumer failed (it needs java 17+ on PATH and Kafka's jars, which \
         `scripts/kafka up` downloads): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Our tool, started with its output piped (killed if the test ends first).
fn spawn_ours(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kafka-console-share-consumer"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .expect("start kafka-console-share-consumer")
}

/// Sends SIGTERM (as a service manager would) and waits for the exit.
async fn terminate(child: Child) -> Output {
    let pid = child.id().expect("running").to_string();
    let kill = std::process::Command::new("kill").args(["-TERM", &pid]).status().expect("run kill");
    assert!(kill.success());
    tokio::time::timeout(RUN_LIMIT, child.wait_with_output())
        .await
        .expect("exits after SIGTERM")
        .expect("wait")
}

fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn assert_ok(out: &Output, what: &str) {
    assert!(out.status.success(), "{what} failed ({:?}): {}", out.status, stderr(out));
}

/// The output's lines, sorted (records of different partitions come in any order).
fn sorted_lines(text: &str, line_end: &str) -> Vec<String> {
    let mut lines: Vec<String> = text.split_inclusive(line_end).map(str::to_string).collect();
    lines.sort();
    lines
}

/// Produces `n` records over `partitions` partitions: keys, headers (one null-valued, and
/// none at all on every fourth record), a null key on record 1, a null value on record 2,
/// non-ASCII text, and fixed create times.
async fn produce_varied(topic: &str, partitions: i32, n: usize) {
    let p = Producer::connect(ProducerConfig::new(common::bootstrap())).await.expect("producer");
    for i in 0..n {
        let mut r = ProducerRecord::new(topic, format!("valeur-é-{i}"))
            .partition(i as i32 % partitions)
            .timestamp(1_700_000_000_000 + i as i64);
        if i != 1 {
            r = r.key(format!("k{i}"));
        }
        if i == 2 {
            r.value = None;
        }
        if i % 4 != 0 {
            r = r.header("trace", format!("t-{i}")).null_header("empty").header("n", i.to_string());
        }
        p.send_and_wait(r).await.expect("send");
    }
    p.close(Duration::from_secs(10)).await.expect("producer close");
}

async fn group(admin: &Admin, prefix: &str) -> String {
    common::new_group(admin, prefix, None).await
}

/// Waits until every record of `topic` is acknowledged by `group` for good (accepted or
/// rejected): the broker's lag (Kafka 4.2+) is 0 on every partition. The start offset is no
/// measure: the broker reports it unmoved while acknowledged records stay in its state.
async fn wait_all_acknowledged(admin: &Admin, group: &str, topic: &str) {
    let end = tokio::time::Instant::now() + Duration::from_secs(60);
    let mut last = String::new();
    loop {
        if let Ok(o) = admin.list_share_group_offsets(group, Some(&[topic])).await {
            if !o.lag_supported {
                // Kafka 4.1 reports no lag: a consumer of the group must find nothing left.
                let out = ours(&["--topic", topic, "--group", group, "--timeout-ms", "3000"]).await;
                assert_ok(&out, "kafka-console-share-consumer after the acknowledgements");
                assert_eq!(stdout(&out), "", "records of {topic} not acknowledged for good");
                return;
            }
            let lags: Vec<Option<i64>> =
                o.partitions.iter().map(|(_, r)| r.as_ref().ok().and_then(|r| r.lag)).collect();
            if !lags.is_empty() && lags.iter().all(|l| *l == Some(0)) {
                return;
            }
            last = format!("{lags:?}");
        }
        assert!(tokio::time::Instant::now() < end, "group {group} never acknowledged all of {topic}: lags {last}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn prints_what_java_prints() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-java", 3).await;
    produce_varied(&topic, 3, 12).await;

    // Every field, with separators and a null literal of our own.
    let every: &[&str] = &[
        "--max-messages",
        "12",
        "--timeout-ms",
        "60000",
        "--formatter-property",
        "print.timestamp=true",
        "--formatter-property",
        "print.partition=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.delivery=true",
        "--formatter-property",
        "print.epoch=true",
        "--formatter-property",
        "print.headers=true",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "key.separator= | ",
        "--formatter-property",
        "headers.separator=;",
        "--formatter-property",
        "null.literal=<null>",
    ];
    // No value, the key as text, another line end.
    let keys_only: &[&str] = &[
        "--max-messages",
        "12",
        "--timeout-ms",
        "60000",
        "--formatter-property",
        "print.value=false",
        "--formatter-property",
        "print.key=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "line.separator=|\n",
        "--key-deserializer",
        STRING_DESERIALIZER,
    ];
    for (options, line_end, first_line) in [
        (every, "\n", None),
        (keys_only, "|\n", None),
        // The defaults: the value and a newline.
        (&["--max-messages", "12", "--timeout-ms", "60000"][..], "\n", Some("valeur-é-")),
    ] {
        let (g_ours, g_java) = (group(&admin, "console-ours").await, group(&admin, "console-java").await);
        let with_group = |g: &str| -> Vec<String> {
            let mut v: Vec<String> = ["--topic", &topic, "--group", g].iter().map(|s| s.to_string()).collect();
            v.extend(options.iter().map(|s| s.to_string()));
            v
        };
        let a = with_group(&g_ours);
        let b = with_group(&g_java);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        let b: Vec<&str> = b.iter().map(String::as_str).collect();
        let (out_ours, out_java) = tokio::join!(ours(&a), java(&b));
        assert_ok(&out_ours, "kafka-console-share-consumer");
        let (text_ours, text_java) = (stdout(&out_ours), stdout(&out_java));
        let (lines_ours, lines_java) = (sorted_lines(&text_ours, line_end), sorted_lines(&text_java, line_end));
        assert_eq!(lines_java.len(), 12, "Java printed:\n{text_java}\nstderr: {}", stderr(&out_java));
        assert_eq!(lines_ours, lines_java, "options {options:?}\nours:\n{text_ours}\njava:\n{text_java}");
        assert!(stderr(&out_ours).contains("Processed a total of 12 messages"), "{}", stderr(&out_ours));
        if let Some(prefix) = first_line {
            assert!(lines_ours.iter().any(|l| l.starts_with(prefix)), "{text_ours}");
        }
    }
}

#[tokio::test]
async fn every_field_looks_as_documented() {
    // The same bytes as Java's, checked by content too: one known record, one partition.
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-fields", 1).await;
    produce_varied(&topic, 1, 4).await;
    let g = group(&admin, "console-fields").await;
    let out = ours(&[
        "--topic",
        &topic,
        "--group",
        &g,
        "--max-messages",
        "4",
        "--formatter-property",
        "print.timestamp=true",
        "--formatter-property",
        "print.partition=true",
        "--formatter-property",
        "print.offset=true",
        "--formatter-property",
        "print.delivery=true",
        "--formatter-property",
        "print.headers=true",
        "--formatter-property",
        "print.key=true",
    ])
    .await;
    assert_ok(&out, "kafka-console-share-consumer");
    assert_eq!(
        stdout(&out),
        "CreateTime:1700000000000\tPartition:0\tOffset:0\tDelivery:1\tNO_HEADERS\tk0\tvaleur-é-0\n\
         CreateTime:1700000000001\tPartition:0\tOffset:1\tDelivery:1\ttrace:t-1,empty:null,n:1\tnull\tvaleur-é-1\n\
         CreateTime:1700000000002\tPartition:0\tOffset:2\tDelivery:1\ttrace:t-2,empty:null,n:2\tk2\tnull\n\
         CreateTime:1700000000003\tPartition:0\tOffset:3\tDelivery:1\ttrace:t-3,empty:null,n:3\tk3\tvaleur-é-3\n"
    );
}

#[tokio::test]
async fn timeout_on_an_empty_topic_exits_zero() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-empty", 1).await;
    let g = group(&admin, "console-empty").await;
    let out = ours(&["--topic", &topic, "--group", &g, "--timeout-ms", "2000"]).await;
    assert_ok(&out, "kafka-console-share-consumer --timeout-ms");
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("Processed a total of 0 messages"), "{}", stderr(&out));
}

#[tokio::test]
async fn reject_leaves_records_rejected() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-reject", 1).await;
    produce_varied(&topic, 1, 5).await;
    let g = group(&admin, "console-reject").await;
    let out = ours(&["--topic", &topic, "--group", &g, "--max-messages", "5", "--reject"]).await;
    assert_ok(&out, "kafka-console-share-consumer --reject");
    assert_eq!(stdout(&out).lines().count(), 5, "{}", stdout(&out));
    // Rejected records are done with: nothing is left to deliver...
    wait_all_acknowledged(&admin, &g, &topic).await;
    // ...and a second consumer of the group gets nothing.
    let again = ours(&["--topic", &topic, "--group", &g, "--timeout-ms", "2000"]).await;
    assert_ok(&again, "second kafka-console-share-consumer");
    assert_eq!(stdout(&again), "", "rejected records came back");
}

#[tokio::test]
async fn release_gives_records_back() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-release", 1).await;
    produce_varied(&topic, 1, 5).await;
    let g = group(&admin, "console-release").await;
    let delivery: &[&str] =
        &["--formatter-property", "print.delivery=true", "--formatter-property", "print.value=false"];
    let mut first = vec!["--topic", &topic, "--group", &g, "--max-messages", "5", "--release"];
    first.extend(delivery);
    let out = ours(&first).await;
    assert_ok(&out, "kafka-console-share-consumer --release");
    assert_eq!(stdout(&out), "Delivery:1\n".repeat(5));
    let mut second = vec!["--topic", &topic, "--group", &g, "--max-messages", "5"];
    second.extend(delivery);
    let out = ours(&second).await;
    assert_ok(&out, "second kafka-console-share-consumer");
    assert_eq!(stdout(&out), "Delivery:2\n".repeat(5), "released records come back, delivered a second time");
    wait_all_acknowledged(&admin, &g, &topic).await;
}

#[tokio::test]
async fn sigterm_acknowledges_what_was_printed() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-term", 1).await;
    produce_varied(&topic, 1, 6).await;
    let g = group(&admin, "console-term").await;
    let mut child = spawn_ours(&["--bootstrap-server", &common::bootstrap(), "--topic", &topic, "--group", &g]);
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let read_six = async {
        for _ in 0..6 {
            lines.next_line().await.expect("read stdout").expect("a record line before the end");
        }
    };
    tokio::time::timeout(RUN_LIMIT, read_six).await.expect("six records printed");
    let out = terminate(child).await;
    assert!(out.status.success(), "exit after SIGTERM: {:?} {}", out.status, stderr(&out));
    assert!(stderr(&out).contains("Processed a total of 6 messages"), "{}", stderr(&out));
    // The close sent the acceptances.
    wait_all_acknowledged(&admin, &g, &topic).await;
}

#[tokio::test]
async fn sigterm_while_connecting_ends_the_run_cleanly() {
    // A listener that accepts and never answers: the tool is still connecting when the
    // signal comes. Its handlers are installed before it connects, so the accepted
    // connection says they are in place; the default action would kill it instead.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr").to_string();
    let child =
        spawn_ours(&["--bootstrap-server", &addr, "--topic", "console-connecting", "--group", "console-connecting"]);
    let (_held, _) = tokio::time::timeout(RUN_LIMIT, listener.accept()).await.expect("it connects").expect("accept");
    let out = terminate(child).await;
    assert!(out.status.success(), "exit after SIGTERM while connecting: {:?} {}", out.status, stderr(&out));
    assert!(stderr(&out).contains("Processed a total of 0 messages"), "{}", stderr(&out));
}

#[tokio::test]
async fn bad_usage_exits_one_with_a_message() {
    let topic = "console-usage";
    for (args, message) in [
        (vec!["--topic", topic, "--bogus"], "unknown option --bogus"),
        (vec!["--topic", topic, "--max-messages", "ten"], "--max-messages needs a whole number"),
        (vec!["--topic", topic, "--formatter-property", "print.key=yes"], "print.key must be true or false"),
        (vec!["--topic", topic, "--value-deserializer", "com.example.AvroDeserializer"], "is not supported"),
        (vec!["--topic", topic, "--reject", "--release"], "at most one of --reject and --release"),
        (vec![], "--topic is required"),
    ] {
        let out = ours(&args).await;
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "", "{args:?}");
        let err = stderr(&out);
        assert!(err.contains(message), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "one line: {err:?}");
    }
    let help = ours(&["--help"]).await;
    assert!(help.status.success());
    assert!(stdout(&help).contains("--formatter-property"));
}

/// Java's log line `[time] ERROR message (logger)` as we print it: `ERROR message`.
fn java_log_line(line: &str) -> Option<&str> {
    let (_, rest) = line.split_once("] ")?;
    Some(rest.rsplit_once(" (").map(|(m, _)| m).unwrap_or(rest))
}

/// Side by side with Java's tool: `header.deserializer` (the spelling of Java's --help) is
/// accepted and ignored as Java ignores it; `--max-messages -3` reads nothing and exits 0;
/// an expired `--timeout-ms` is logged at ERROR, and the run still exits 0.
#[tokio::test]
async fn java_spellings_negative_max_and_timeout_log_as_java() {
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "console-quirks", 1).await;
    produce_varied(&topic, 1, 4).await;

    // header.deserializer=IntegerDeserializer would fail on "t-1": ignored, the headers print
    // as bytes, the same as Java's.
    let args = |g: &str| -> Vec<String> {
        [
            "--topic",
            &topic,
            "--group",
            g,
            "--max-messages",
            "4",
            "--timeout-ms",
            "60000",
            "--formatter-property",
            "print.headers=true",
            "--formatter-property",
            "header.deserializer=org.apache.kafka.common.serialization.IntegerDeserializer",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };
    let (g_ours, g_java) = (group(&admin, "console-quirks-o").await, group(&admin, "console-quirks-j").await);
    let a_ours = args(&g_ours);
    let a_java = args(&g_java);
    let out_ours = ours(&a_ours.iter().map(String::as_str).collect::<Vec<_>>()).await;
    let out_java = java(&a_java.iter().map(String::as_str).collect::<Vec<_>>()).await;
    assert_ok(&out_ours, "header.deserializer");
    assert_eq!(stdout(&out_ours), stdout(&out_java));
    assert!(stdout(&out_ours).contains("trace:t-1"), "{}", stdout(&out_ours));
    assert!(stderr(&out_ours).contains("header.deserializer="), "a warning: {}", stderr(&out_ours));

    // --max-messages -3: nothing read, exit 0 (java() checks Java's exit).
    let g = group(&admin, "console-quirks-neg").await;
    for out in [
        ours(&["--topic", &topic, "--group", &g, "--max-messages", "-3"]).await,
        java(&["--topic", &topic, "--group", &g, "--max-messages", "-3"]).await,
    ] {
        assert_ok(&out, "--max-messages -3");
        assert_eq!(stdout(&out), "");
        assert!(stderr(&out).contains("Processed a total of 0 messages"), "{}", stderr(&out));
    }

    // --timeout-ms on a group with nothing left (g_ours read all 4): the timeout is logged.
    let out_ours = ours(&["--topic", &topic, "--group", &g_ours, "--timeout-ms", "2000"]).await;
    let out_java = java(&["--topic", &topic, "--group", &g_java, "--timeout-ms", "2000"]).await;
    assert_ok(&out_ours, "--timeout-ms");
    let java_error = stderr(&out_java).lines().find_map(java_log_line).map(str::to_string);
    let java_error = java_error.unwrap_or_else(|| panic!("Java logged no timeout: {}", stderr(&out_java)));
    assert!(java_error.starts_with("ERROR Error processing message, terminating consumer process:"), "{java_error}");
    let err = stderr(&out_ours);
    let ours_error = err.lines().find(|l| l.starts_with("ERROR ")).unwrap_or_else(|| panic!("no ERROR line: {err}"));
    assert!(ours_error.starts_with(java_error.trim_end()), "ours: {ours_error}\njava: {java_error}");
    assert!(ours_error.contains("TimeoutException"), "{ours_error}");
    assert!(err.ends_with("Processed a total of 0 messages\n"), "{err}");
}
