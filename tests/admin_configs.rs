//! Group configs against the real broker: set, describe, delete, refused values.

mod common;

use kafka_share::admin::ConfigSource;
use kafka_share::Error;

#[tokio::test]
async fn set_describe_and_delete_group_configs() {
    let admin = common::admin().await;
    let group = common::unique("cfg");
    admin.set_share_auto_offset_reset(&group, "earliest").await.expect("set earliest");
    admin
        .set_group_config(&group, "share.record.lock.duration.ms", "20000")
        .await
        .expect("set lock duration");
    let cfg = admin.describe_group_configs(&group).await.expect("describe");
    let get = |k: &str| cfg.iter().find(|e| e.name == k).unwrap_or_else(|| panic!("{k} missing in {cfg:?}")).clone();
    let reset = get("share.auto.offset.reset");
    assert_eq!(reset.value.as_deref(), Some("earliest"));
    assert_eq!(reset.source, ConfigSource::Group);
    assert_eq!(get("share.record.lock.duration.ms").value.as_deref(), Some("20000"));
    // A default value is listed too, from the broker.
    assert_ne!(get("share.isolation.level").source, ConfigSource::Group);

    admin
        .alter_group_configs(
            &group,
            &[("share.record.lock.duration.ms", None), ("share.isolation.level", Some("read_committed"))],
        )
        .await
        .expect("delete + set");
    let cfg = admin.describe_group_configs(&group).await.unwrap();
    let lock = cfg.iter().find(|e| e.name == "share.record.lock.duration.ms").unwrap();
    assert_ne!(lock.source, ConfigSource::Group, "deleted key falls back: {lock:?}");
    let iso = cfg.iter().find(|e| e.name == "share.isolation.level").unwrap();
    assert_eq!(iso.value.as_deref(), Some("read_committed"));
}

#[tokio::test]
async fn bad_values_are_refused_locally_and_by_the_broker() {
    let admin = common::admin().await;
    let group = common::unique("cfg-bad");
    let e = admin.set_share_auto_offset_reset(&group, "none").await.unwrap_err();
    assert!(matches!(e, Error::Config { .. }), "{e:?}");
    assert!(e.to_string().contains("latest | earliest | by_duration"), "{e}");
    let e = admin.set_group_config(&group, "share.isolation.level", "dirty").await.unwrap_err();
    assert!(e.to_string().contains("read_uncommitted | read_committed"), "{e}");
    // In range locally, out of the broker's bounds (15000..=60000 by default): the broker refuses.
    let e = admin.set_group_config(&group, "share.record.lock.duration.ms", "1000000").await.unwrap_err();
    assert!(matches!(e, Error::Broker { .. }), "{e:?}");
    assert!(e.to_string().contains("share.record.lock.duration.ms"), "the broker's message is kept: {e}");
    // Nothing was set.
    let cfg = admin.describe_group_configs(&group).await.unwrap();
    assert!(cfg.iter().all(|c| c.source != ConfigSource::Group), "{cfg:?}");
}
