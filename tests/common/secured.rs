//! The secured listeners of `scripts/kafka up` (see `scripts/kafka help`, "Secured
//! listeners"): their client properties files, and one round trip every client makes over them.
#![allow(dead_code)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use kafka_share::admin::Admin;
use kafka_share::config::Properties;
use kafka_share::producer::{Producer, ProducerRecord};
use kafka_share::{Error, ShareConsumer};

/// The directory with the CA, the client certificate and a properties file per listener
/// (env `KAFKA_SECURITY_DIR`, which scripts/test sets).
pub fn security_dir() -> PathBuf {
    match std::env::var("KAFKA_SECURITY_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/kafka/single/security"),
    }
}

/// The client properties file `name` (e.g. "sasl_ssl-plain") of the running broker. Fails the
/// test, saying how to start the broker, when it is not there.
pub fn props(name: &str) -> Properties {
    let path = security_dir().join(format!("{name}.properties"));
    Properties::load(&path).unwrap_or_else(|e| {
        panic!(
            "no client file {} ({e}): start the broker with its secured listeners: `scripts/kafka up` \
             (or run the suite with scripts/test)",
            path.display()
        )
    })
}

/// `props(name)` with some settings replaced.
pub fn props_with(name: &str, overrides: &[(&str, &str)]) -> Properties {
    let mut p = props(name);
    for (k, v) in overrides {
        p.set(*k, *v);
    }
    p
}

/// A path in the security directory, as a string for a properties value.
pub fn file(name: &str) -> String {
    security_dir().join(name).display().to_string()
}

/// Over the listener of the client file `name`: the admin client creates a topic and a group,
/// the producer writes `n` records, a share consumer reads, acknowledges and commits them all
/// (each delivered once), closes, the admin client finds the group, and (feature `cli`) the
/// CLI describes it with the same file. Returns the group.
pub async fn round_trip(name: &str, n: usize) -> String {
    let props = &props(name);
    let admin = Admin::from_properties(props).await.expect("admin over the secured listener");
    let topic = super::new_topic(&admin, "sec", 1).await;
    let group = super::new_group(&admin, "sec", None).await;

    let producer = Producer::from_properties(props).await.expect("producer over the secured listener");
    for i in 0..n {
        producer.send_and_wait(ProducerRecord::new(&topic, format!("r{i}"))).await.expect("send");
    }
    producer.close(Duration::from_secs(10)).await.expect("producer close");

    let mut cp = props.clone();
    cp.set("group.id", &group);
    cp.set("share.acknowledgement.mode", "explicit");
    let consumer = ShareConsumer::from_properties(&cp).await.expect("consumer over the secured listener");
    consumer.subscribe([&topic]).expect("subscribe");
    let got = super::poll_until(&consumer, n, Duration::from_secs(60), |r| consumer.acknowledge(r).expect("ack")).await;
    assert_eq!(got.len(), n, "records read over the secured listener");
    assert!(got.iter().all(|r| r.delivery_count == 1), "a record was delivered twice");
    consumer
        .commit_sync(Duration::from_secs(10))
        .await
        .expect("commit")
        .into_result()
        .expect("acks applied");
    consumer.close(Duration::from_secs(10)).await.expect("close");

    let groups = admin.list_share_groups().await.expect("list share groups");
    assert!(groups.iter().any(|g| g.group_id == group), "group {group} not listed");

    #[cfg(feature = "cli")]
    cli_describes(name, &group, &topic);
    group
}

/// The CLI, given the client file `name`, describes `group` and shows `topic`. The binary is
/// built only with the `cli` feature (scripts/test enables it).
#[cfg(feature = "cli")]
fn cli_describes(name: &str, group: &str, topic: &str) {
    let file = security_dir().join(format!("{name}.properties"));
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--command-config", &file.display().to_string(), "--describe", "--group", group, "--offsets"])
        .output()
        .expect("run kafka-share-groups");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "kafka-share-groups over {name}: {}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout.contains(topic), "the CLI over {name} did not show {topic}: {stdout}");
}

/// Connecting an admin client with `props` must fail, fast, with a fatal error: returns it.
pub async fn admin_error(props: &Properties) -> Error {
    let started = Instant::now();
    let e = match Admin::from_properties(props).await {
        Ok(_) => panic!("connecting should have failed"),
        Err(e) => e,
    };
    assert!(started.elapsed() < Duration::from_secs(15), "took {:?} to fail: {e}", started.elapsed());
    assert!(!e.is_retriable(), "a retriable error for a setting retrying cannot fix: {e:?}");
    e
}

/// [`admin_error`] with `props`, dialed through a counting proxy in front of its
/// `bootstrap.servers`: the client must also have made at most two connection attempts (no
/// redial loop on an error retrying cannot fix).
pub async fn admin_error_via_proxy(mut props: Properties) -> Error {
    let target = props.get("bootstrap.servers").expect("bootstrap.servers").to_string();
    let proxy = super::proxy::CountingProxy::start(&target).await;
    props.set("bootstrap.servers", &proxy.addr);
    let e = admin_error(&props).await;
    assert!(proxy.accepted() <= 2, "{} connection attempts for a fatal error: {e}", proxy.accepted());
    e
}
