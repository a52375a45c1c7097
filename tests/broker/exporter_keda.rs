//! kafka-share-exporter's KEDA scaler asked by KEDA's own generated gRPC client (tests/keda,
//! `kedaprobe`) as KEDA asks it, against the binary with a real share group on the broker:
//! the lag, the activation, the metric spec, a pushed change of activity, bad metadata, an
//! unknown group, and the metadata of deploy/keda's manifests as KEDA sends it. Fails when
//! the broker is absent.

use crate::common;
use crate::deploy_support::{probe, repo, Answer, ExporterBin, Running, Sent};

use std::time::Duration;

use kafka_share::consumer::{AcknowledgementMode, ShareConsumer};

/// How long a wait for the broker's or the exporter's state lasts; a passing test ends on
/// its condition.
const WAIT: Duration = Duration::from_secs(90);

/// Records produced; the consumer accepts at least [`ACCEPT`] of them and leaves the rest.
const RECORDS: usize = 100;
const ACCEPT: usize = 40;

/// The int64 fields of the proto's JSON mapping are strings.
fn int(v: &serde_json::Value) -> i64 {
    v.as_str()
        .and_then(|s| s.parse().ok())
        .or_else(|| v.as_i64())
        .unwrap_or_else(|| panic!("not an int64: {v}"))
}

/// A topic of one partition with [`RECORDS`] records, and a share group that accepted the
/// first `ACCEPT` or more of them and left: (topic, group, records waiting).
async fn group_with_a_backlog(prefix: &str) -> (String, String, i64) {
    let admin = common::admin().await;
    let bs = common::bootstrap();
    let topic = common::new_topic(&admin, &format!("{prefix}-t"), 1).await;
    let group = common::new_group(&admin, &format!("{prefix}-g"), None).await;
    common::produce(&bs, &topic, 1, RECORDS, "v").await;
    let c = ShareConsumer::connect(
        common::consumer_config(&bs, &group)
            .acknowledgement_mode(AcknowledgementMode::Explicit)
            .max_poll_records(ACCEPT),
    )
    .await
    .expect("consumer");
    c.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&c, ACCEPT, WAIT, |r| c.acknowledge(r).expect("accept")).await;
    assert!(got.len() >= ACCEPT, "accepted {}", got.len());
    c.commit_sync(Duration::from_secs(10)).await.expect("commit");
    c.close(Duration::from_secs(10)).await.expect("close");
    (topic, group, (RECORDS - got.len()) as i64)
}

/// Asks GetMetrics (by the names GetMetricSpec gives, as KEDA does) until the lag is `want`.
async fn wait_for_lag(scaler: &str, metadata: &[(&str, &str)], want: i64) -> Vec<Answer> {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let answers = probe(scaler, Sent::Metadata(metadata), &["metrics"]).await;
        let lag = answers
            .first()
            .and_then(|a| a.result.as_ref().ok())
            .map(|v| int(&v["metricValues"][0]["metricValue"]));
        // Kafka 4.1 has no lag of its own: the exporter's estimate never counts fewer.
        let seen = if common::kafka_version() < (4, 2) { lag.is_some_and(|l| l >= want) } else { lag == Some(want) };
        if seen {
            return answers;
        }
        assert!(tokio::time::Instant::now() < end, "lag {want} never read through KEDA's client: {answers:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kedas_client_reads_the_lag_the_spec_the_activity_and_a_pushed_change() {
    let (topic, group, waiting) = group_with_a_backlog("keda-happy").await;
    let exporter = ExporterBin::start(&["--group", &group]);
    let bs = common::bootstrap();
    let md = [
        ("scalerAddress", exporter.scaler.as_str()),
        ("bootstrapServers", bs.as_str()),
        ("group", group.as_str()),
        ("topic", topic.as_str()),
        ("lagThreshold", "10"),
        ("ageThresholdSeconds", "30"),
        ("activationLagThreshold", "0"),
    ];
    let lag = wait_for_lag(&exporter.scaler, &md, waiting).await;
    let lag_value = lag[0].ok()["metricValues"][0].clone();
    assert_eq!(lag_value["metricName"], format!("share-lag-{group}-{topic}"), "{lag_value}");
    assert_eq!(lag_value["metricValueFloat"].as_f64(), Some(int(&lag_value["metricValue"]) as f64));

    // What KEDA calls for a trigger of type `external`: the spec, then per metric its value
    // and the activity.
    let answers = probe(&exporter.scaler, Sent::Metadata(&md), &["keda"]).await;
    let calls: Vec<&str> = answers.iter().map(|a| a.call.as_str()).collect();
    assert_eq!(calls, ["GetMetricSpec", "GetMetrics", "IsActive", "GetMetrics", "IsActive"], "{answers:?}");
    let specs = answers[0].ok()["metricSpecs"].as_array().expect("metricSpecs").clone();
    assert_eq!(specs.len(), 2, "{specs:?}");
    assert_eq!(specs[0]["metricName"], format!("share-lag-{group}-{topic}"));
    assert_eq!((int(&specs[0]["targetSize"]), specs[0]["targetSizeFloat"].as_f64()), (10, Some(10.0)));
    assert_eq!(specs[1]["metricName"], format!("share-age-{group}-{topic}"));
    assert_eq!((int(&specs[1]["targetSize"]), specs[1]["targetSizeFloat"].as_f64()), (30, Some(30.0)));
    assert!(int(&answers[1].ok()["metricValues"][0]["metricValue"]) >= waiting);
    let age = answers[3].ok()["metricValues"][0].clone();
    assert_eq!(age["metricName"], format!("share-age-{group}-{topic}"));
    assert!(age["metricValueFloat"].as_f64().is_some_and(|a| a > 0.0), "the oldest record waits: {age}");
    assert_eq!(answers[2].ok()["result"], true);

    // Records waiting, but not more than the activation threshold: inactive.
    let high = waiting.to_string();
    let mut quiet = md;
    quiet[6] = ("activationLagThreshold", high.as_str());
    let a = probe(&exporter.scaler, Sent::Metadata(&quiet), &["isactive"]).await;
    assert_eq!(a[0].ok()["result"], false, "{a:?}");

    // The push: the stream says active at once, then inactive when another consumer has
    // finished the work.
    let mut stream = Running::start(&exporter.scaler, Sent::Metadata(&md), &["stream=2"]);
    let first = tokio::time::timeout(WAIT, stream.next()).await.expect("the first answer").expect("an answer");
    assert_eq!((first.call.as_str(), &first.ok()["result"]), ("StreamIsActive", &serde_json::json!(true)));
    let c = ShareConsumer::connect(
        common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit),
    )
    .await
    .expect("consumer");
    c.subscribe([topic.clone()]).unwrap();
    let rest = common::poll_until(&c, waiting as usize, WAIT, |r| c.acknowledge(r).expect("accept")).await;
    assert_eq!(rest.len() as i64, waiting);
    c.commit_sync(Duration::from_secs(10)).await.expect("commit");
    c.close(Duration::from_secs(10)).await.expect("close");
    let second = tokio::time::timeout(WAIT, stream.next()).await.expect("a pushed change").expect("an answer");
    assert_eq!(second.ok()["result"], false, "{second:?}");
    // And the pull agrees.
    wait_for_lag(&exporter.scaler, &md, 0).await;
    let a = probe(&exporter.scaler, Sent::Metadata(&md), &["isactive"]).await;
    assert_eq!(a[0].ok()["result"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_metadata_is_invalid_argument_in_every_call() {
    let _ = common::admin().await; // fails when the broker is absent
    let exporter = ExporterBin::start(&["--group", &common::unique("keda-bad")]);
    for (md, says) in [
        (&[("topic", "t")][..], "group"),
        (&[("group", "g"), ("lagThreshold", "ten")][..], "lagThreshold"),
        (&[("group", "g"), ("lagThreshold", "0")][..], "lagThreshold"),
        (&[("group", "g"), ("ageThresholdSeconds", "-1")][..], "ageThresholdSeconds"),
        (&[("group", "g"), ("activationLagThreshold", "NaN")][..], "activationLagThreshold"),
    ] {
        let answers =
            probe(&exporter.scaler, Sent::Metadata(md), &["isactive", "spec", "metrics=share-lag-g", "stream"]).await;
        assert_eq!(answers.len(), 4, "{answers:?}");
        for a in &answers {
            let e = a.err();
            assert_eq!(e.code, tonic::Code::InvalidArgument, "{md:?} {a:?}");
            assert!(e.message.contains(says), "{md:?}: {} says nothing of {says}", e.message);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_that_never_existed_is_not_found() {
    let _ = common::admin().await; // fails when the broker is absent
                                   // Every group whose id starts so: none exists, and the one asked about never did.
    let prefix = common::unique("keda-none");
    let exporter = ExporterBin::start(&["--group-pattern", &format!("{prefix}.*")]);
    let missing = format!("{prefix}-missing");
    let md = [("group", missing.as_str()), ("lagThreshold", "5")];
    // Before its first refresh the scaler cannot say: wait for it to.
    let end = tokio::time::Instant::now() + WAIT;
    let answers = loop {
        let answers = probe(&exporter.scaler, Sent::Metadata(&md), &["isactive", "metrics"]).await;
        if answers.iter().all(|a| a.result.as_ref().err().is_none_or(|e| e.code != tonic::Code::Unavailable)) {
            break answers;
        }
        assert!(tokio::time::Instant::now() < end, "the scaler never finished a refresh: {answers:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let calls: Vec<&str> = answers.iter().map(|a| a.call.as_str()).collect();
    assert_eq!(calls, ["IsActive", "GetMetrics"], "{answers:?}");
    for a in &answers {
        let e = a.err();
        assert_eq!(e.code, tonic::Code::NotFound, "{a:?}");
        assert!(e.message.contains(&missing), "{}", e.message);
    }
    // The spec needs no group read: KEDA can set up its HPA before the group exists.
    let spec = probe(&exporter.scaler, Sent::Metadata(&md), &["spec"]).await;
    assert_eq!(spec[0].ok()["metricSpecs"][0]["metricName"], format!("share-lag-{missing}"));
}

/// The scaler metadata keys the exporter reads (src/exporter/scaler/metadata.rs), and KEDA's
/// own of an external trigger (it sends them too).
const SCALER_KEYS: &[&str] =
    &["group", "topic", "lagThreshold", "ageThresholdSeconds", "activationLagThreshold", "bootstrapServers"];
const KEDA_KEYS: &[&str] = &["scalerAddress", "enableTLS", "unsafeSsl"];

/// A manifest's external triggers as KEDA sends them: (trigger index, type, metadata).
async fn sent_by_keda(scaler: &str, manifest: &std::path::Path) -> Vec<(usize, String, serde_json::Value)> {
    let refs = probe(scaler, Sent::Manifest(manifest), &["ref"]).await;
    refs.iter().map(|a| (a.trigger, a.kind.clone(), a.ok()["scalerMetadata"].clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_manifests_metadata_is_accepted_and_scales_as_their_comments_say() {
    let (topic, group, waiting) = group_with_a_backlog("keda-manifest").await;
    let exporter = ExporterBin::start(&["--group", &group]);
    let dir = repo().join("deploy/keda");
    let external = dir.join("scaledobject-external.yaml");
    let push = dir.join("scaledobject-external-push.yaml");

    // The pull and the push manifests send the same metadata, of keys the scaler reads.
    let pulled = sent_by_keda(&exporter.scaler, &external).await;
    let pushed = sent_by_keda(&exporter.scaler, &push).await;
    assert_eq!(pulled.len(), 1, "{pulled:?}");
    assert_eq!((pulled[0].1.as_str(), pushed[0].1.as_str()), ("external", "external-push"));
    assert_eq!(pulled[0].2, pushed[0].2, "the two manifests scale on the same thing");
    let md = pulled[0].2.as_object().expect("metadata").clone();
    for k in md.keys() {
        assert!(SCALER_KEYS.contains(&k.as_str()) || KEDA_KEYS.contains(&k.as_str()), "{k}: no such scaler key");
    }
    let (m_group, m_topic) = (md["group"].as_str().unwrap().to_string(), md["topic"].as_str().unwrap().to_string());
    let threshold = |k: &str| md[k].as_str().and_then(|v| v.parse::<f64>().ok()).expect(k);

    // The Prometheus variant scales on the same group and topic, with the same thresholds.
    let prom = std::fs::read_to_string(dir.join("scaledobject-prometheus.yaml")).expect("read");
    let scope = format!("{{group=\"{m_group}\",topic=\"{m_topic}\"}}");
    assert!(prom.contains(&format!("query: sum(kafka_share_group_partition_lag{scope})")), "{prom}");
    assert!(
        prom.contains(&format!("query: max(kafka_share_group_partition_oldest_unacknowledged_age_seconds{scope})")),
        "{prom}"
    );
    let thresholds: Vec<f64> = prom
        .lines()
        .filter_map(|l| l.trim().strip_prefix("threshold: "))
        .filter_map(|v| v.trim_matches('"').parse().ok())
        .collect();
    assert_eq!(thresholds, [threshold("lagThreshold"), threshold("ageThresholdSeconds")], "{prom}");

    // The same manifests naming this test's group and topic instead: every call KEDA makes
    // for the trigger's type answers, with the backlog.
    let tmp = std::env::temp_dir().join(common::unique("keda-manifests"));
    std::fs::create_dir_all(&tmp).unwrap();
    for manifest in [&external, &push] {
        let text = std::fs::read_to_string(manifest).unwrap();
        let text = text
            .replace(&format!("group: {m_group}\n"), &format!("group: {group}\n"))
            .replace(&format!("topic: {m_topic}\n"), &format!("topic: {topic}\n"));
        let copy = tmp.join(manifest.file_name().unwrap());
        std::fs::write(&copy, text).unwrap();
        let end = tokio::time::Instant::now() + WAIT;
        let answers = loop {
            let answers = probe(&exporter.scaler, Sent::Manifest(&copy), &["keda"]).await;
            if answers.iter().all(|a| a.result.is_ok()) {
                break answers;
            }
            assert!(tokio::time::Instant::now() < end, "{}: {answers:?}", manifest.display());
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        let calls: Vec<&str> = answers.iter().map(|a| a.call.as_str()).collect();
        let mut want = vec!["GetMetricSpec", "GetMetrics", "IsActive", "GetMetrics", "IsActive"];
        if answers[0].kind == "external-push" {
            want.push("StreamIsActive");
        }
        assert_eq!(calls, want, "{}", manifest.display());
        assert!(int(&answers[1].ok()["metricValues"][0]["metricValue"]) >= waiting.min(1), "{answers:?}");
        assert!(answers.iter().filter(|a| a.call.ends_with("IsActive")).all(|a| a.ok()["result"] == true));
    }
    // As the manifests stand (the scaler has refreshed: it answered above), KEDA's calls are
    // accepted: the spec from their thresholds, and the group, which does not exist on this
    // broker, not found (never InvalidArgument).
    for manifest in [&external, &push] {
        let answers = probe(&exporter.scaler, Sent::Manifest(manifest), &["spec", "isactive"]).await;
        let specs = answers[0].ok()["metricSpecs"].clone();
        assert_eq!(specs[0]["metricName"], format!("share-lag-{m_group}-{m_topic}"));
        assert_eq!(specs[0]["targetSizeFloat"].as_f64(), Some(threshold("lagThreshold")));
        assert_eq!(specs[1]["targetSizeFloat"].as_f64(), Some(threshold("ageThresholdSeconds")));
        assert_eq!(answers[1].err().code, tonic::Code::NotFound, "{answers:?}");
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
