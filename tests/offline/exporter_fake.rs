//! The exporter's failure path on the fake cluster: a listing that never comes back is counted
//! as a timeout on every refresh, and the refreshes go on. A real broker cannot be made to
//! stay silent on one request (a 1 ns timeout against it raced its answer), the fake can.

use std::time::Duration;

use kafka_share::admin::Admin;
use kafka_share::exporter::{Exporter, ExporterConfig};
use kafka_share::prometheus::{render, Registry};
use kafka_share::test_util::{Action, FakeCluster, FakeConfig, Req, Rule, LIST_GROUPS};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_step_is_counted_by_kind_and_the_refreshes_go_on() {
    let fake = FakeCluster::start(FakeConfig::default().records(0)).await;
    // Every ListGroups waits an hour: far past the exporter's 100 ms timeout.
    fake.script(Rule::on(LIST_GROUPS, Action::Delay(Duration::from_secs(3600))).times(u32::MAX));
    let admin = Admin::connect_to(&fake.bootstrap()).await.expect("admin on the fake");
    let mut c = ExporterConfig::default();
    c.refresh_interval = Duration::from_millis(20);
    c.request_timeout = Duration::from_millis(100);
    let exporter = Exporter::start(admin, c);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.collector()));

    let s = loop {
        let s = exporter.next_refresh().await;
        if s.refreshes >= 3 {
            break s;
        }
    };
    assert_eq!(s.errors.get(&("list_groups", "timeout".to_string())).copied(), Some(s.refreshes), "{:?}", s.errors);
    assert!(s.last_success.is_none());
    assert!(fake.log().iter().any(|l| matches!(l.req, Req::ListGroups)), "the exporter asked for the groups");
    let text = render(&registry);
    assert!(text.contains("kafka_share_exporter_errors_total{operation=\"list_groups\",kind=\"timeout\"}"), "{text}");
    let last_success = "kafka_share_exporter_last_successful_refresh_timestamp_seconds";
    assert!(!text.lines().any(|l| l.strip_prefix(last_success).is_some_and(|r| r.starts_with(' '))), "{text}");
}

/// A listing that succeeded (without group `g`: the cluster said it does not exist), then one
/// that never comes back: `g` is now unknown, not absent (the old exporter kept answering
/// NotFound from the last listing), and the scaler says UNAVAILABLE; the last successful
/// refresh stays where it was.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_not_found_is_unavailable_once_the_listing_fails() {
    use kafka_share::exporter::scaler::proto::external_scaler_client::ExternalScalerClient;
    use kafka_share::exporter::scaler::proto::ScaledObjectRef;
    use kafka_share::exporter::scaler::{serve_scaler, Scaler};

    let fake = FakeCluster::start(FakeConfig::default().records(0)).await;
    // The first ListGroups is answered (no groups); every later one waits an hour.
    fake.script(Rule::on(LIST_GROUPS, Action::Delay(Duration::from_secs(3600))).after(1).always());
    let admin = Admin::connect_to(&fake.bootstrap()).await.expect("admin on the fake");
    let mut c = ExporterConfig::default();
    c.refresh_interval = Duration::from_millis(20);
    c.request_timeout = Duration::from_millis(100);
    let exporter = Exporter::start(admin, c);
    let scaler = serve_scaler("127.0.0.1:0", Scaler::new(exporter.subscribe())).await.expect("scaler");
    let mut client =
        ExternalScalerClient::connect(format!("http://{}", scaler.local_addr())).await.expect("gRPC client");
    let obj = ScaledObjectRef {
        name: "worker".into(),
        namespace: "default".into(),
        scaler_metadata: [("group".to_string(), "g".to_string())].into(),
    };
    let listed = loop {
        let s = exporter.next_refresh().await;
        if s.last_success.is_some() {
            break s;
        }
        assert!(s.refreshes < 100, "never listed: {s:?}");
    };
    // (The snapshot seen may already be a later one, whose listing failed: the success is
    // the first refresh's either way.)
    let failed = loop {
        let s = exporter.next_refresh().await;
        if s.listing_failed.is_some() {
            break s;
        }
        assert!(s.refreshes < 100, "the listing never failed: {s:?}");
    };
    assert_eq!(failed.listing_failed.as_deref(), Some("list_groups: timeout"));
    assert_eq!(failed.last_success, listed.last_success, "a failed listing is no success");
    let e = client.is_active(obj).await.expect_err("no answer for a group nothing could look for");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("list_groups: timeout"), "{e:?}");
}
