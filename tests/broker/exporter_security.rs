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
    assert!(s.group(&group).is_none());
    assert!(s.last_success.is_some(), "the refresh itself goes on: {s:?}");
}
