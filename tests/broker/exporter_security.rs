//! The exporter over SASL_SSL with a Confluent-style client file (`security.protocol`,
//! `sasl.jaas.config`, a PEM trust store), and as a principal that may not describe the group:
//! that group is counted as unauthorised, and the exporter runs on. Needs the broker's secured
//! listeners (`scripts/kafka up`); fails when they are absent.

use crate::common;

use std::time::Duration;

use common::secured;
use kafka_share::admin::Admin;
use kafka_share::exporter::{Exporter, ExporterConfig, GroupFilter, Snapshot};

const WAIT: Duration = Duration::from_secs(60);

async fn wait_for(exporter: &Exporter, what: &str, ok: impl Fn(&Snapshot) -> bool) -> std::sync::Arc<Snapshot> {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let s = exporter.next_refresh().await;
        if ok(&s) {
            return s;
        }
        assert!(tokio::time::Instant::now() < end, "{what}: never seen; last snapshot {s:#?}");
    }
}

fn exporter(admin: Admin, group: &str) -> Exporter {
    let mut c = ExporterConfig::default();
    c.groups = GroupFilter::List(vec![group.to_string()]);
    c.refresh_interval = Duration::from_millis(200);
    Exporter::start(admin, c)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_sasl_ssl_the_group_is_exported_and_a_principal_without_describe_is_told_so() {
    // As alice (all rights) over SASL_SSL, with the file a user would write.
    let group = secured::round_trip("sasl_ssl-plain", 5).await;
    let alice = Admin::from_properties(&secured::props("sasl_ssl-plain")).await.expect("admin over SASL_SSL");
    let e = exporter(alice, &group);
    let s = wait_for(&e, "the group exported over SASL_SSL", |s| {
        s.group(&group)
            .is_some_and(|g| g.lag(None).is_some() && g.partitions.iter().all(|p| p.end_offset == Some(5)))
    })
    .await;
    assert!(s.errors.is_empty(), "{:?}", s.errors);

    // As bob (topics only): the group cannot be described; counted by kind, nothing exported.
    let jaas =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="bob" password="bob-secret";"#;
    let bob = Admin::from_properties(&secured::props_with("sasl_ssl-plain", &[("sasl.jaas.config", jaas)]))
        .await
        .expect("admin as bob");
    let e = exporter(bob, &group);
    let s = wait_for(&e, "the group counted as unauthorised", |s| {
        s.errors.get(&("describe_group", "group_authorization_failed".to_string())).is_some_and(|n| *n >= 2)
    })
    .await;
    // Unread, not absent: a backlog that could not be read is not "no backlog".
    assert!(s.group(&group).is_none(), "never read, so no series");
    assert_eq!(s.unread.get(&group).map(|u| u.cause.as_str()), Some("describe_group: group_authorization_failed"));
    assert!(s.last_success.is_none(), "no refresh read everything: {s:?}");
    assert!(s.refreshes >= 2, "the refreshes go on");
}

/// As carol (groups only: she may describe the group, not its topics). Kafka 4.4 answers her
/// DescribeShareGroupOffsets without the topics she may not describe, and no error; while the
/// group has a member, it refuses her ShareGroupDescribe with TOPIC_AUTHORIZATION_FAILED. The
/// exporter must not read either as a group with no backlog, nor as a group that does not
/// exist: the group is unread, UNAVAILABLE to the scaler, `topic_authorization_failed` is
/// counted. (Were the description answered with the member's assignment, the exporter would
/// see the assigned topic missing from the offsets, with the same outcome.) An *empty* group
/// shows carol what a group without share state shows; as she may describe no topic at all,
/// the exporter reads no backlog as hers (one with rights on some topics is not told apart).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_principal_that_may_not_describe_the_topics_reads_no_backlog_rather_than_zero() {
    use kafka_share::exporter::scaler::proto::external_scaler_client::ExternalScalerClient;
    use kafka_share::exporter::scaler::proto::ScaledObjectRef;
    use kafka_share::exporter::scaler::{serve_scaler, Scaler};
    use kafka_share::ShareConsumer;

    let group = secured::round_trip("sasl_ssl-plain", 5).await;
    let jaas =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="carol-secret";"#;
    let as_carol = || async {
        Admin::from_properties(&secured::props_with("sasl_ssl-plain", &[("sasl.jaas.config", jaas)]))
            .await
            .expect("admin as carol")
    };
    // The group empty: its description and offsets say nothing of its topics, and carol
    // may describe no topic at all: unread.
    let e = exporter(as_carol().await, &group);
    let s = wait_for(&e, "the empty group unread", |s| s.unread.contains_key(&group)).await;
    assert_eq!(s.unread[&group].cause, "offsets: topic_authorization_failed", "{s:?}");
    assert!(s.group(&group).is_none() && s.last_success.is_none(), "{s:?}");
    drop(e);

    let alice = Admin::from_properties(&secured::props("sasl_ssl-plain")).await.expect("admin as alice");
    let topic = alice.list_share_group_offsets(&group, None).await.expect("offsets as alice").partitions[0]
        .0
        .topic
        .clone();
    // A member (as alice) holds an assignment of the topic while carol's exporter reads.
    let mut cp = secured::props("sasl_ssl-plain");
    cp.set("group.id", &group);
    let member = std::sync::Arc::new(ShareConsumer::from_properties(&cp).await.expect("consumer as alice"));
    member.subscribe([&topic]).expect("subscribe");
    let polling = {
        let member = member.clone();
        tokio::spawn(async move {
            loop {
                let _ = member.poll(Duration::from_millis(200)).await;
            }
        })
    };
    common::wait_for_members(&alice, &group, 1, WAIT).await;

    let jaas =
        r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="carol" password="carol-secret";"#;
    let carol = Admin::from_properties(&secured::props_with("sasl_ssl-plain", &[("sasl.jaas.config", jaas)]))
        .await
        .expect("admin as carol");
    // What the broker tells carol: the group, no partitions, no error.
    let offsets = carol.list_share_group_offsets(&group, None).await.expect("offsets as carol");
    assert!(offsets.partitions.is_empty(), "Kafka now tells carol about the topics: {offsets:?}");
    let e = exporter(carol, &group);
    let scaler = serve_scaler("127.0.0.1:0", Scaler::new(e.subscribe())).await.expect("scaler");
    let s = wait_for(&e, "the group unread", |s| s.unread.contains_key(&group)).await;
    eprintln!("carol's exporter: unread {:?}, errors {:?}", s.unread, s.errors);
    assert!(
        s.errors.keys().any(|(_, kind)| kind == "topic_authorization_failed"),
        "the refusal counted: {:?}",
        s.errors
    );
    assert!(s.last_success.is_none(), "{s:?}");
    let mut client =
        ExternalScalerClient::connect(format!("http://{}", scaler.local_addr())).await.expect("gRPC client");
    let obj = ScaledObjectRef {
        name: "worker".into(),
        namespace: "default".into(),
        scaler_metadata: [("group".to_string(), group.clone())].into(),
    };
    let err = client.is_active(obj).await.expect_err("no value for a backlog not read");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(err.message().contains("topic_authorization_failed"), "{err:?}");
    polling.abort();
    let _ = polling.await;
    member.close(Duration::from_secs(10)).await.expect("close");
}
