//! `kafka-share-sink --validate`: Connect's validate answer from the command line, without a
//! broker (the check is the one a start makes before it connects).

use std::process::Command;

fn run(files: &[(&str, &str)]) -> (Option<i32>, String, String) {
    static RUNS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = RUNS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("ks-validate-cli-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let worker = dir.join("worker.properties");
    std::fs::write(&worker, "bootstrap.servers=127.0.0.1:1\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kafka-share-sink"));
    cmd.arg("--validate").arg(&worker);
    for (name, text) in files {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        cmd.arg(path);
    }
    let out = cmd.output().expect("run kafka-share-sink");
    std::fs::remove_dir_all(&dir).unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_good_file_exits_zero_and_a_refused_setting_exits_one_with_connects_answer() {
    let good = "name=f\nconnector.class=FileStreamSink\ntopics=t\nfile=/tmp/out.txt\n";
    let (code, out, err) = run(&[("good.properties", good)]);
    assert_eq!(code, Some(0), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    assert_eq!(v["error_count"], 0, "{out}");
    assert_eq!(v["name"], "FileStreamSink");

    let bad = r#"{"name":"f","config":{"connector.class":"FileStreamSinkConnector","tasks.max":"zero"}}"#;
    let (code, out, err) = run(&[("bad.json", bad)]);
    assert_eq!(code, Some(1), "{out}{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("JSON on stdout");
    let refused: Vec<&str> = v["configs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| !c["value"]["errors"].as_array().unwrap().is_empty())
        .map(|c| c["value"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(refused, ["tasks.max", "topics"], "{out}");
}

#[test]
fn a_file_without_a_class_is_bad_usage() {
    let (code, out, err) = run(&[("nameless.properties", "name=f\ntopics=t\n")]);
    assert_eq!(code, Some(2), "{out}{err}");
    assert!(err.contains("connector.class"), "{err}");
}
