//! The deploy/ examples (KEDA ScaledObjects, Grafana dashboard, Prometheus alerts) name only
//! series the exporter serves: a renamed metric fails here, not in a user's dashboard. Offline.

use std::path::Path;

use kafka_share::exporter::SERIES;

/// Every query expression in the file: Grafana targets' `expr`, and the YAML's `expr:` and
/// `query:` values.
fn expressions(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if path.extension().is_some_and(|e| e == "json") {
        let v: serde_json::Value = serde_json::from_str(&text).expect("dashboard JSON");
        let mut out = Vec::new();
        collect_exprs(&v, &mut out);
        out
    } else {
        text.lines()
            .map(str::trim)
            .filter_map(|l| l.strip_prefix("expr:").or_else(|| l.strip_prefix("query:")))
            .map(|e| e.trim().to_string())
            .collect()
    }
}

fn collect_exprs(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                match (k.as_str(), x) {
                    ("expr", serde_json::Value::String(e)) => out.push(e.clone()),
                    _ => collect_exprs(x, out),
                }
            }
        }
        serde_json::Value::Array(a) => a.iter().for_each(|x| collect_exprs(x, out)),
        _ => {}
    }
}

/// The metric names an expression uses: the identifiers starting `kafka_share_`.
fn names(expr: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = expr;
    while let Some(i) = rest.find("kafka_share_") {
        let tail = &rest[i..];
        let end = tail.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn every_expression_in_deploy_names_a_served_series() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy");
    let files = ["keda/scaledobject-prometheus.yaml", "grafana/kafka-share-groups.json", "prometheus/alerts.yaml"];
    let mut checked = 0;
    for f in files {
        let exprs = expressions(&root.join(f));
        assert!(!exprs.is_empty(), "{f}: no expressions found");
        for e in exprs {
            let used = names(&e);
            assert!(!used.is_empty(), "{f}: {e:?} names no exporter series");
            for n in used {
                assert!(SERIES.contains(&n.as_str()), "{f}: {e:?} names {n}, which the exporter does not serve");
                checked += 1;
            }
        }
    }
    assert!(checked >= 15, "only {checked} names checked");
    // The external scalers' manifests (polled and pushed) name the scaler's metadata keys;
    // tests/broker/exporter_keda.rs sends them to the scaler through KEDA's own client.
    for f in ["keda/scaledobject-external.yaml", "keda/scaledobject-external-push.yaml"] {
        let external = std::fs::read_to_string(root.join(f)).unwrap();
        for key in ["scalerAddress", "group:", "lagThreshold", "ageThresholdSeconds", "activationLagThreshold"] {
            assert!(external.contains(key), "{f} lacks {key}");
        }
    }
}

#[test]
fn names_are_read_out_of_expressions() {
    assert_eq!(
        names("time() - kafka_share_exporter_last_successful_refresh_timestamp_seconds > 300"),
        ["kafka_share_exporter_last_successful_refresh_timestamp_seconds"]
    );
    assert_eq!(
        names("sum(kafka_share_group_lag{group=\"g\"}) / kafka_share_group_members"),
        ["kafka_share_group_lag", "kafka_share_group_members"]
    );
}
