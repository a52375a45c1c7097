//! The exporter against the real broker: lag and the age of the oldest unacknowledged record
//! follow the work, a deleted topic's and group's series go away while the exporter runs on.
//! Fails when the broker is absent (`common::admin`).

use crate::common;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use kafka_share::consumer::{AcknowledgementMode, ShareConsumer};
use kafka_share::exporter::scaler::proto::external_scaler_client::ExternalScalerClient;
use kafka_share::exporter::scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use kafka_share::exporter::scaler::{serve_scaler, Scaler};
use kafka_share::exporter::{Exporter, ExporterConfig, GroupFilter, Snapshot, GROUP_LAG, PARTITION_OLDEST_AGE};
use kafka_share::prometheus::{render, Registry};

/// How long a wait for the broker's asynchronous state lasts before the test fails; a passing
/// test ends on its condition.
const WAIT: Duration = Duration::from_secs(90);

/// Records per poll: the bound on how far past half the consumer gets.
const BATCH: usize = 500;

fn exporter_for(admin: kafka_share::admin::Admin, groups: &[&str]) -> Exporter {
    let mut c = ExporterConfig::default();
    c.groups = GroupFilter::List(groups.iter().map(|g| g.to_string()).collect());
    c.refresh_interval = Duration::from_millis(200);
    Exporter::start(admin, c)
}

/// Waits for a refresh whose snapshot satisfies `ok`.
async fn wait_for(exporter: &Exporter, what: &str, ok: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let s = exporter.next_refresh().await;
        if ok(&s) {
            return s;
        }
        assert!(tokio::time::Instant::now() < end, "{what}: never seen; last snapshot {s:#?}");
    }
}

/// A ScaledObject's reference with this scaler metadata.
fn scaled_object(group: &str, topic: &str) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "worker".into(),
        namespace: "default".into(),
        scaler_metadata: [
            ("bootstrapServers", common::bootstrap()),
            ("group", group.to_string()),
            ("topic", topic.to_string()),
            ("lagThreshold", "1000".to_string()),
            ("ageThresholdSeconds", "30".to_string()),
            ("activationLagThreshold", "0".to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect(),
    }
}

/// (lag, age) as the scaler's GetMetrics gives them, by the names its GetMetricSpec gave.
async fn scaler_metrics(
    client: &mut ExternalScalerClient<tonic::transport::Channel>,
    obj: &ScaledObjectRef,
) -> (f64, f64) {
    let specs = client.get_metric_spec(obj.clone()).await.expect("GetMetricSpec").into_inner().metric_specs;
    assert_eq!(specs.len(), 2, "lag and age: {specs:?}");
    assert_eq!((specs[0].target_size_float, specs[1].target_size_float), (1000.0, 30.0));
    let mut values = Vec::new();
    for spec in &specs {
        let req = GetMetricsRequest { scaled_object_ref: Some(obj.clone()), metric_name: spec.metric_name.clone() };
        let v = client.get_metrics(req).await.expect("GetMetrics").into_inner().metric_values;
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].metric_name, spec.metric_name);
        values.push(v[0].metric_value_float);
    }
    (values[0], values[1])
}

/// Whether the text has a sample (not only HELP and TYPE) of the unlabelled series `name`.
fn has_sample(text: &str, name: &str) -> bool {
    text.lines().any(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with(' ')))
}

/// The value of the series `name` whose labels include `label` in the text `text`.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lag_and_age_follow_the_work_then_go_to_zero() {
    let admin = common::admin().await;
    let bs = common::bootstrap();
    let topic = common::new_topic(&admin, "exp-lag", 1).await;
    let group = common::new_group(&admin, "exp-lag-g", None).await;
    common::produce(&bs, &topic, 1, 10_000, "v").await;

    let exporter = exporter_for(admin.clone(), &[&group]);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.collector()));
    let scaler = serve_scaler("127.0.0.1:0", Scaler::new(exporter.subscribe())).await.expect("scaler");
    let mut client =
        ExternalScalerClient::connect(format!("http://{}", scaler.local_addr())).await.expect("gRPC client");
    let obj = scaled_object(&group, &topic);
    let mut active_stream = client.stream_is_active(obj.clone()).await.expect("StreamIsActive").into_inner();

    // A consumer accepts half, a poll at a time, then stops.
    let explicit = || {
        common::consumer_config(&bs, &group)
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(BATCH)
    };
    let first = ShareConsumer::connect(explicit()).await.expect("consumer");
    first.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&first, 5_000, WAIT, |r| first.acknowledge(r).expect("accept")).await;
    let accepted = got.len() as i64;
    assert!((5_000..5_000 + BATCH as i64).contains(&accepted), "accepted {accepted}");
    first.commit_sync(Duration::from_secs(10)).await.expect("commit");
    first.close(Duration::from_secs(10)).await.expect("close");

    // Kafka 4.1 reports no lag: the exporter estimates it from the (persisted) start offset.
    let estimated = common::kafka_version() < (4, 2);
    if estimated {
        // Kafka 4.1 reports no lag: the estimate is log end minus the *persisted* start
        // offset, which trails the acknowledgements (an empty group's last ones are written
        // with the next state write, which may never come): it never counts fewer records
        // than wait, and is labelled.
        let s = wait_for(&exporter, "an estimated lag", |s| {
            s.group(&group)
                .is_some_and(|g| g.partitions.first().is_some_and(|p| p.lag.is_some() && p.lag_estimated))
        })
        .await;
        let p = &s.group(&group).unwrap().partitions[0];
        assert_eq!(p.lag, Some(10_000 - p.start_offset), "{p:?}");
        assert!(p.lag >= Some(10_000 - accepted), "{p:?}");
        let text = render(&registry);
        assert!(text.contains(&format!("{GROUP_LAG}{{group=\"{group}\",estimate=\"true\"}}")), "{text}");
        return;
    }
    let s = wait_for(&exporter, "lag of the records not accepted", |s| {
        s.group(&group).and_then(|g| g.lag(None)) == Some((10_000 - accepted, false))
    })
    .await;
    let g = s.group(&group).expect("group exported");
    let p = &g.partitions[0];
    assert_eq!(p.end_offset, Some(10_000));
    let lag = 10_000 - accepted;
    assert!((lag - 5_000).abs() <= BATCH as i64, "lag {lag} within one fetch batch of 5,000");
    let oldest = p.oldest_timestamp_ms.expect("the record at the start offset was read");
    let now = SystemTime::now();
    assert!(p.oldest_age(now).is_some_and(|a| a > Duration::ZERO), "{p:?}");

    // The age grows in real time between refreshes: each scrape computes it anew.
    let text = render(&registry);
    let first_age = sample(&text, PARTITION_OLDEST_AGE, &format!("group=\"{group}\"")).expect("age served");
    assert_eq!(sample(&text, GROUP_LAG, &format!("group=\"{group}\"")), Some(lag as f64), "{text}");
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let later = sample(&render(&registry), PARTITION_OLDEST_AGE, &format!("group=\"{group}\"")).expect("age");
        if later > first_age {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "the age stayed at {first_age}");
    }
    // The scaler says the same from the same cache: active, the lag, an age.
    assert!(client.is_active(obj.clone()).await.expect("IsActive").into_inner().result);
    let (scaler_lag, scaler_age) = scaler_metrics(&mut client, &obj).await;
    assert_eq!(scaler_lag, lag as f64);
    assert!(scaler_age > 0.0, "age {scaler_age}");
    // The stream began before the group had members (inactive), and turned active.
    while !active_stream.message().await.expect("stream").expect("an answer").result {}
    let unknown =
        ScaledObjectRef { scaler_metadata: [("group".to_string(), "no-such-group".to_string())].into(), ..obj.clone() };
    let e = client.is_active(unknown).await.expect_err("an unknown group is an error");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");
    let bad = ScaledObjectRef { scaler_metadata: Default::default(), ..obj.clone() };
    let e = client.get_metric_spec(bad).await.expect_err("no group");
    assert_eq!(e.code(), tonic::Code::InvalidArgument, "{e:?}");

    // The same record stays the oldest while nobody consumes.
    let s = exporter.next_refresh().await;
    assert_eq!(s.group(&group).unwrap().partitions[0].oldest_timestamp_ms, Some(oldest));

    // Another consumer finishes the work: lag 0, age 0.
    let second = ShareConsumer::connect(explicit()).await.expect("consumer");
    second.subscribe([topic.clone()]).unwrap();
    let rest = common::poll_until(&second, lag as usize, WAIT, |r| second.acknowledge(r).expect("accept")).await;
    assert_eq!(rest.len() as i64, lag);
    second.commit_sync(Duration::from_secs(10)).await.expect("commit");
    second.close(Duration::from_secs(10)).await.expect("close");
    let s = wait_for(&exporter, "lag 0", |s| s.group(&group).and_then(|g| g.lag(None)) == Some((0, false))).await;
    let g = s.group(&group).unwrap();
    assert_eq!(g.oldest_age(None, SystemTime::now()), Some(Duration::ZERO));
    let text = render(&registry);
    assert_eq!(sample(&text, GROUP_LAG, &format!("group=\"{group}\"")), Some(0.0), "{text}");
    assert_eq!(sample(&text, PARTITION_OLDEST_AGE, &format!("group=\"{group}\"")), Some(0.0), "{text}");
    // Before the consumer joined the group did not exist: counted as such, and nothing else.
    assert!(
        s.errors.keys().all(|(op, kind)| *op == "describe_group" && kind == "group_id_not_found"),
        "{:?}",
        s.errors
    );

    // The scaler: inactive, nothing to scale on; the stream said so too.
    assert!(!client.is_active(obj.clone()).await.expect("IsActive").into_inner().result);
    assert_eq!(scaler_metrics(&mut client, &obj).await, (0.0, 0.0));
    let next = active_stream.message().await.expect("stream").expect("an answer");
    assert!(!next.result, "the stream turned inactive");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_topic_and_group_drop_their_series_and_the_exporter_runs_on() {
    let admin = common::admin().await;
    let bs = common::bootstrap();
    let kept = common::new_topic(&admin, "exp-kept", 1).await;
    let doomed = common::new_topic(&admin, "exp-doomed", 1).await;
    let group = common::new_group(&admin, "exp-del-g", None).await;
    common::produce(&bs, &kept, 1, 20, "k").await;
    common::produce(&bs, &doomed, 1, 20, "d").await;
    let exporter = exporter_for(admin.clone(), &[&group]);

    // Five records of each topic accepted: both share partitions get state.
    let c = ShareConsumer::connect(
        common::consumer_config(&bs, &group)
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(5),
    )
    .await
    .expect("consumer");
    c.subscribe([kept.clone(), doomed.clone()]).unwrap();
    let mut seen = std::collections::BTreeMap::<String, usize>::new();
    let end = tokio::time::Instant::now() + WAIT;
    while seen.len() < 2 || seen.values().any(|n| *n < 5) {
        assert!(tokio::time::Instant::now() < end, "records of both topics: {seen:?}");
        for r in c.poll(Duration::from_millis(500)).await.expect("poll") {
            c.acknowledge(&r).expect("accept");
            *seen.entry(r.topic.to_string()).or_default() += 1;
        }
    }
    c.commit_sync(Duration::from_secs(10)).await.expect("commit");
    c.close(Duration::from_secs(10)).await.expect("close");
    wait_for(&exporter, "both topics exported", |s| {
        s.group(&group).is_some_and(|g| g.partitions.iter().filter(|p| p.end_offset.is_some()).count() == 2)
    })
    .await;

    admin.delete_topics(&[&doomed]).await.expect("delete topic").pop().unwrap().expect("deleted");
    let s = wait_for(&exporter, "the deleted topic's series gone", |s| {
        s.group(&group)
            .is_some_and(|g| g.partitions.iter().all(|p| p.topic != doomed) && !g.partitions.is_empty())
    })
    .await;
    let before = s.refreshes;

    admin.delete_share_groups(&[&group]).await.expect("delete group").pop().unwrap().expect("deleted");
    let s = wait_for(&exporter, "the deleted group's series gone", |s| s.group(&group).is_none()).await;
    assert!(s.refreshes > before && s.last_success.is_some(), "still refreshing: {s:?}");
    let s = exporter.next_refresh().await;
    assert!(s.group(&group).is_none());
    // Named with --group, the deleted group is counted as missing at every refresh.
    let missing = s.errors.get(&("describe_group", "group_id_not_found".to_string())).copied().unwrap_or(0);
    let t = exporter.next_refresh().await;
    assert!(
        t.errors.get(&("describe_group", "group_id_not_found".to_string())).copied().unwrap_or(0) > missing,
        "{:?}",
        t.errors
    );
}

/// The binary as a user runs it: it prints where it listens, serves /metrics and the scaler,
/// and stops on SIGTERM with exit code 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_serves_metrics_and_the_scaler_and_stops_on_sigterm() {
    use std::io::{BufRead, BufReader};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let _ = common::admin().await; // fails when the broker is absent
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_kafka-share-exporter"))
        .args(["--bootstrap-server", &common::bootstrap(), "--listen", "127.0.0.1:0"])
        .args(["--scaler-listen", "127.0.0.1:0", "--refresh-interval", "0.2"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start kafka-share-exporter");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let metrics = lines.next().expect("a line").expect("read");
    let scaler = lines.next().expect("a line").expect("read");
    let metrics_addr =
        metrics.strip_prefix("metrics: http://").and_then(|m| m.strip_suffix("/metrics")).expect(&metrics);
    let scaler_addr = scaler.strip_prefix("scaler: ").expect(&scaler).to_string();

    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let mut s = tokio::net::TcpStream::connect(metrics_addr).await.expect("connect /metrics");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
        let mut body = String::new();
        s.read_to_string(&mut body).await.unwrap();
        if has_sample(&body, "kafka_share_exporter_last_successful_refresh_timestamp_seconds") {
            assert!(body.contains("# HELP kafka_share_group_partition_oldest_unacknowledged_age_seconds"), "{body}");
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no successful refresh served: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut client = ExternalScalerClient::connect(format!("http://{scaler_addr}")).await.expect("gRPC client");
    let spec = client.get_metric_spec(scaled_object("g", "t")).await.expect("GetMetricSpec").into_inner();
    assert_eq!(spec.metric_specs[0].metric_name, "share-lag-g-t");

    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a clean stop");
}

/// grpcurl, the Go tool a user would poke the scaler with: `GRPCURL`, else on the PATH, else
/// where `go install` puts it. Fails saying how to install it (.ci/run does).
fn grpcurl() -> std::path::PathBuf {
    let candidates = std::env::var_os("GRPCURL")
        .map(std::path::PathBuf::from)
        .into_iter()
        .chain(
            std::env::var_os("PATH")
                .into_iter()
                .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
                .map(|d| d.join("grpcurl")),
        )
        .chain(std::env::var_os("HOME").map(|h| std::path::PathBuf::from(h).join("go/bin/grpcurl")));
    for c in candidates {
        if c.is_file() {
            return c;
        }
    }
    panic!("grpcurl not found: go install github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.3 (or set GRPCURL)");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpcurl_reads_the_scaler_from_kedas_proto() {
    let admin = common::admin().await;
    let exporter = exporter_for(admin, &["no-such-group"]);
    let scaler = serve_scaler("127.0.0.1:0", Scaler::new(exporter.subscribe())).await.expect("scaler");
    exporter.next_refresh().await;
    let proto_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/proto");
    let call = |method: &str, body: &str| {
        std::process::Command::new(grpcurl())
            .args(["-plaintext", "-import-path", proto_dir, "-proto", "externalscaler.proto", "-d", body])
            .arg(scaler.local_addr().to_string())
            .arg(format!("externalscaler.ExternalScaler/{method}"))
            .output()
            .expect("run grpcurl")
    };
    let spec = call("GetMetricSpec", r#"{"scalerMetadata":{"group":"orders","topic":"t","lagThreshold":"5"}}"#);
    let out = String::from_utf8_lossy(&spec.stdout);
    assert!(spec.status.success(), "{out} {}", String::from_utf8_lossy(&spec.stderr));
    let v: serde_json::Value = serde_json::from_str(&out).expect("grpcurl prints JSON");
    assert_eq!(v["metricSpecs"][0]["metricName"], "share-lag-orders-t", "{v}");
    assert_eq!(v["metricSpecs"][0]["targetSizeFloat"], 5.0, "{v}");

    let missing = call("IsActive", r#"{"scalerMetadata":{"group":"no-such-group"}}"#);
    let err = String::from_utf8_lossy(&missing.stderr);
    assert!(!missing.status.success());
    assert!(err.contains("NotFound") && err.contains("no-such-group"), "{err}");
}
