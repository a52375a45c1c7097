//! The `kafka-share-exporter` binary started before its cluster is reachable: it serves
//! /metrics and the scaler at once, counts the failed connects (`operation="connect"`), the
//! scaler answers UNAVAILABLE (not 0, not NotFound), it logs that the cluster is unreachable,
//! and once the cluster answers it refreshes, logs so, and serves a successful refresh; a
//! SIGTERM stops it with exit code 0. The cluster is reached through a TCP forwarder of the
//! test's own that refuses (closes) connections until told to forward them to the broker:
//! the shared broker is never stopped. Fails when the broker is absent.

use crate::common;

use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use kafka_share::exporter::scaler::proto::external_scaler_client::ExternalScalerClient;
use kafka_share::exporter::scaler::proto::ScaledObjectRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const WAIT: Duration = Duration::from_secs(90);

/// A loopback listener that closes every connection until `open` is set, then forwards each
/// to `target`.
async fn gate(target: String) -> (String, Arc<AtomicBool>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind the gate");
    let addr = listener.local_addr().unwrap().to_string();
    let open = Arc::new(AtomicBool::new(false));
    let is_open = open.clone();
    tokio::spawn(async move {
        while let Ok((mut client, _)) = listener.accept().await {
            if !is_open.load(Ordering::Relaxed) {
                drop(client);
                continue;
            }
            let target = target.clone();
            tokio::spawn(async move {
                if let Ok(mut server) = tokio::net::TcpStream::connect(&target).await {
                    let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                }
            });
        }
    });
    (addr, open)
}

async fn scrape(addr: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.expect("connect /metrics");
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body
}

/// The value of the first sample of `name` whose line contains `label`.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

fn scaled_object(group: &str) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "worker".into(),
        namespace: "default".into(),
        scaler_metadata: [("group".to_string(), group.to_string())].into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn started_before_the_cluster_it_serves_counts_and_retries_then_refreshes() {
    let _ = common::admin().await; // fails when the broker is absent
    let (bootstrap, open) = gate(common::bootstrap()).await;
    // `$KAFKA_SHARE_EXPORTER` names another build of it (a target directory shared by several
    // checkouts may hold another's), as tests/broker/deploy_support.rs reads it.
    let bin = std::env::var_os("KAFKA_SHARE_EXPORTER")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from(env!("CARGO_BIN_EXE_kafka-share-exporter")));
    let mut child = std::process::Command::new(bin)
        .args(["--bootstrap-server", &bootstrap, "--listen", "127.0.0.1:0"])
        .args(["--scaler-listen", "127.0.0.1:0", "--refresh-interval", "0.2", "--request-timeout", "5"])
        .env_remove("RUST_LOG")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start kafka-share-exporter");
    let mut stderr = child.stderr.take().expect("stderr");
    let logs = std::thread::spawn(move || {
        let mut all = String::new();
        let _ = stderr.read_to_string(&mut all);
        all
    });
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let metrics = lines.next().expect("a line").expect("read");
    let scaler = lines.next().expect("a line").expect("read");
    let metrics_addr = metrics
        .strip_prefix("metrics: http://")
        .and_then(|m| m.strip_suffix("/metrics"))
        .expect(&metrics)
        .to_string();
    let scaler_addr = scaler.strip_prefix("scaler: ").expect(&scaler).to_string();

    // Unreachable: the connects are counted, nothing is read, the scaler has no value.
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let body = scrape(&metrics_addr).await;
        if sample(&body, "kafka_share_exporter_errors_total", "operation=\"connect\"").is_some_and(|n| n >= 2.0) {
            assert!(
                sample(&body, "kafka_share_exporter_last_successful_refresh_timestamp_seconds", "").is_none(),
                "{body}"
            );
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no connect errors served: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let mut client = ExternalScalerClient::connect(format!("http://{scaler_addr}")).await.expect("gRPC client");
    let e = client.is_active(scaled_object("orders")).await.expect_err("no value while unreachable");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    assert!(e.message().contains("connect"), "{e:?}");

    // Reachable: a successful refresh; an unknown group is now NotFound (the listing said so).
    open.store(true, Ordering::Relaxed);
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let body = scrape(&metrics_addr).await;
        if sample(&body, "kafka_share_exporter_last_successful_refresh_timestamp_seconds", "").is_some() {
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no successful refresh once reachable: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let e = client.is_active(scaled_object("no-such-group-here")).await.expect_err("unknown group");
    assert_eq!(e.code(), tonic::Code::NotFound, "{e:?}");

    let killed = std::process::Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert_eq!(status.code(), Some(0), "a clean stop");
    let logs = logs.join().expect("stderr");
    assert!(logs.contains("starting"), "a line at start:\n{logs}");
    assert!(logs.contains("the cluster is unreachable"), "{logs}");
    assert!(logs.contains("the cluster is reachable"), "{logs}");
    let connect_lines = logs
        .lines()
        .filter(|l| l.contains("operation=\"connect\"") || l.contains("operation=connect"))
        .count();
    assert_eq!(connect_lines, 1, "the same failure logged once a minute at most:\n{logs}");
}
