//! The `kafka-share-groups` binary against the real broker: text and JSON output, exit codes.

use crate::admin_support;
use crate::common;

use std::process::{Command, Output};

use admin_support::{produce, share_group_command_async, table_rows, Member};
use serde_json::Value;

fn cli(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--bootstrap-server", &common::bootstrap()])
        .args(args)
        .output()
        .expect("run kafka-share-groups")
}

fn ok(args: &[&str]) -> String {
    let out = cli(args);
    assert!(out.status.success(), "{args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

fn json(args: &[&str]) -> Value {
    let mut a = args.to_vec();
    a.extend(["--output", "json"]);
    serde_json::from_str(&ok(&a)).expect("valid JSON")
}

/// Fails with `code` and exactly one line on stderr; returns it.
fn fails(args: &[&str], code: i32) -> String {
    let out = cli(args);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.trim_end().lines().count(), 1, "one line on stderr: {err:?}");
    err
}

#[tokio::test]
async fn cli_list_describe_reset_configs() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-cli", 2).await;
    let group = common::unique("adm-cli-g");
    let out = ok(&[
        "--alter-config",
        "--group",
        &group,
        "--config",
        "share.auto.offset.reset=earliest,share.record.lock.duration.ms=20000",
    ]);
    assert!(out.contains("Completed updating config"), "{out}");
    produce(&cluster, &topic, 0, 3).await;
    let mut member = Member::join(&cluster, &group, &[&topic]).await;
    member.consume_and_accept(&cluster, &topic, 3).await;

    // --list, plain and with states, text and JSON.
    assert!(ok(&["--list"]).lines().any(|l| l == group));
    let t = ok(&["--list", "--state", "Stable"]);
    assert!(t.starts_with("GROUP"), "{t}");
    assert!(t.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == [group.as_str(), "Stable"]), "{t}");
    let j = json(&["--list"]);
    assert!(j.as_array().unwrap().iter().any(|g| g["group"] == group.as_str() && g["state"] == "Stable"), "{j}");

    // --describe (offsets by default), --members, --state.
    let t = ok(&["--describe", "--group", &group]);
    let rows = admin_support::table_rows(&t, "GROUP");
    assert_eq!(rows.len(), 2, "{t}");
    assert_eq!(rows[0][..3], [group.clone(), topic.clone(), "0".into()], "{t}");
    let j = json(&["--describe", "--group", &group, "--members"]);
    let m = &j[0]["members"][0];
    assert_eq!(m["member_id"], member.member_id.as_str(), "{j}");
    assert_eq!(m["assignment"][0]["topic"], topic.as_str(), "{j}");
    assert_eq!(m["assignment"][0]["partitions"], serde_json::json!([0, 1]), "{j}");
    let t = ok(&["--describe", "--group", &group, "--members", "--verbose"]);
    assert!(t.contains("MEMBER-EPOCH") && t.contains(&member.member_id) && t.contains(&format!("{topic}:0,1")), "{t}");
    let t = ok(&["--describe", "--group", &group, "--state"]);
    assert!(t.contains("COORDINATOR (ID)") && t.contains("Stable"), "{t}");
    let j = json(&["--describe", "--group", &group, "--offsets"]);
    assert_eq!(j[0]["offsets"].as_array().unwrap().len(), 2, "{j}");
    assert_eq!(j[0]["lag_supported"], common::broker_has_v2());
    if !common::broker_has_v2() {
        assert!(j[0]["lag_unavailable_reason"].as_str().unwrap().contains("lag needs Kafka 4.2+"), "{j}");
        let out = cli(&["--describe", "--group", &group, "--offsets"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && err.contains("note: lag needs Kafka 4.2+"), "{err}");
    }

    // Destructive operations on a live group: exit 1, one line naming the cause.
    let e = fails(&["--delete", "--group", &group], 1);
    assert!(e.contains("has active members; stop them first"), "{e}");
    let e = fails(&["--reset-offsets", "--group", &group, "--topic", &topic, "--to-earliest", "--execute"], 1);
    assert!(e.contains("has active members"), "{e}");
    member.leave(&cluster).await;

    // Reset: dry run plans, execute applies.
    let j = json(&[
        "--reset-offsets",
        "--group",
        &group,
        "--topic",
        &format!("{topic}:0"),
        "--to-offset",
        "1",
        "--dry-run",
    ]);
    assert_eq!(j["partitions"][0]["new_offset"], 1, "{j}");
    assert_eq!(j["dry_run"], true);
    let execute = ["--reset-offsets", "--group", &group, "--all-topics", "--to-earliest", "--execute"];
    if common::broker_has_v2() {
        let t = ok(&execute);
        assert!(t.contains("NEW-OFFSET"), "{t}");
        let j = json(&["--describe", "--group", &group]);
        assert!(j[0]["offsets"].as_array().unwrap().iter().all(|o| o["start_offset"] == 0), "{j}");
    } else {
        let e = fails(&execute, 1);
        assert!(e.contains("Kafka 4.1 brokers drop AlterShareGroupOffsets"), "{e}");
    }

    // Configs.
    let j = json(&["--describe-config", "--group", &group]);
    let reset = j["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "share.auto.offset.reset")
        .cloned()
        .unwrap();
    assert_eq!(reset["value"], "earliest");
    assert_eq!(reset["source"], "DYNAMIC_GROUP_CONFIG");
    let e = fails(&["--alter-config", "--group", &group, "--config", "share.auto.offset.reset=soonest"], 1);
    assert!(e.contains("latest | earliest | by_duration"), "{e}");
    ok(&["--alter-config", "--group", &group, "--delete-config", "share.record.lock.duration.ms"]);

    // Delete offsets, then the group; a missing group fails.
    let t = ok(&["--delete-offsets", "--group", &group, "--topic", &topic]);
    assert!(t.contains("Successful"), "{t}");
    let t = ok(&["--delete", "--group", &group]);
    assert!(t.contains("was successful"), "{t}");
    let e = fails(&["--describe", "--group", &group], 1);
    assert!(e.contains(&group), "{e}");
}

/// `--export` writes a plan as Java's tool does; `--from-file` applies it (or a plan in the
/// group,topic,partition,offset form), clamped to the log, refusing partitions that do not exist.
#[tokio::test]
async fn reset_plan_export_then_from_file() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-cli-plan", 2).await;
    let group = common::unique("adm-cli-plan-g");
    produce(&cluster, &topic, 0, 5).await;
    produce(&cluster, &topic, 1, 3).await;
    let dir = std::env::temp_dir().join(common::unique("adm-cli-plan"));
    std::fs::create_dir_all(&dir).unwrap();

    // A dry run exports topic,partition,offset lines and an empty line, as Java prints them;
    // Jackson (and so we) quote a topic longer than 24 characters.
    assert!(topic.len() > 24, "{topic}");
    let csv =
        ok(&["--reset-offsets", "--group", &group, "--topic", &topic, "--to-offset", "2", "--dry-run", "--export"]);
    assert_eq!(csv, format!("\"{topic}\",0,2\n\"{topic}\",1,2\n\n"));
    let plan = dir.join("plan.csv");
    std::fs::write(&plan, &csv).unwrap();
    let plan = plan.to_str().unwrap();

    // The group,topic,partition,offset form: only this group's lines count; 99 is past the
    // end of partition 1 (3 records), so it becomes 3.
    let multi = dir.join("multi.csv");
    std::fs::write(&multi, format!("other-group,{topic},0,1\n{group},{topic},0,4\n{group},{topic},1,99\n")).unwrap();
    let j = json(&["--reset-offsets", "--group", &group, "--from-file", multi.to_str().unwrap(), "--dry-run"]);
    let new: Vec<&Value> = j["partitions"].as_array().unwrap().iter().map(|p| &p["new_offset"]).collect();
    assert_eq!(new, [4, 3], "{j}");

    // Mistakes in the file: one line naming the file, the line and the fix; nothing applied.
    let bad = dir.join("bad.csv");
    std::fs::write(&bad, format!("{topic},0,2\n{topic},1,two\n")).unwrap();
    let e = fails(&["--reset-offsets", "--group", &group, "--from-file", bad.to_str().unwrap(), "--execute"], 1);
    assert!(e.contains("bad.csv: line 2: offset \"two\"") && e.contains("each line must be"), "{e}");
    std::fs::write(&bad, format!("{topic},7,0\n")).unwrap();
    let e = fails(&["--reset-offsets", "--group", &group, "--from-file", bad.to_str().unwrap(), "--execute"], 1);
    assert!(e.contains("has no partition 7"), "{e}");

    // Apply the exported plan and read the start offsets back.
    let execute = ["--reset-offsets", "--group", &group, "--from-file", plan, "--execute"];
    if common::broker_has_v2() {
        let t = ok(&execute);
        assert!(t.contains("NEW-OFFSET"), "{t}");
        let j = json(&["--describe", "--group", &group]);
        let starts: Vec<(&Value, &Value)> =
            j[0]["offsets"].as_array().unwrap().iter().map(|o| (&o["partition"], &o["start_offset"])).collect();
        assert_eq!(starts, [(&Value::from(0), &Value::from(2)), (&Value::from(1), &Value::from(2))], "{j}");
    } else {
        let e = fails(&execute, 1);
        assert!(e.contains("Kafka 4.1 brokers drop AlterShareGroupOffsets"), "{e}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_usage_exits_2_with_one_line() {
    for args in [
        vec!["--lst"],
        vec!["--list", "--describe"],
        vec!["--describe"],
        vec!["--reset-offsets", "--group", "g", "--topic", "t", "--to-earliest"],
        vec!["--reset-offsets", "--group", "g", "--topic", "t", "--to-datetime", "yesterday", "--dry-run"],
        vec!["--list", "--output", "yaml"],
        vec!["--reset-offsets", "--group", "g", "--from-file", "plan.csv", "--topic", "t", "--dry-run"],
    ] {
        let e = fails(&args, 2);
        assert!(e.starts_with("kafka-share-groups: "), "{e}");
        assert_eq!(e.matches("(see --help)").count(), 1, "the hint once: {e}");
    }
    let e = fails(&["--list", "--foo"], 2);
    assert_eq!(e, "kafka-share-groups: unknown option \"--foo\" (see --help)\n");
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-share-groups")).arg("--help").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--reset-offsets"));
}

#[test]
fn version_prints_name_and_version() {
    // No action and no broker needed, as with Java's --version.
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-share-groups")).arg("--version").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let expected = format!("kafka-share-groups {}\n", env!("CARGO_PKG_VERSION"));
    assert_eq!(String::from_utf8_lossy(&out.stdout), expected);
}

#[test]
fn command_config_file() {
    let dir = std::env::temp_dir().join(common::unique("adm-cli-props"));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("admin.properties");
    std::fs::write(&good, format!("# connection\nbootstrap.servers={}\nclient.id=cli-test\n", common::bootstrap()))
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--command-config", good.to_str().unwrap(), "--list", "--output", "json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(serde_json::from_slice::<Value>(&out.stdout).unwrap().is_array());
    // A setting the admin client does not know (here a typo) is refused with its name.
    let bad = dir.join("bad.properties");
    std::fs::write(&bad, "request.timout.ms=5000\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kafka-share-groups"))
        .args(["--bootstrap-server", &common::bootstrap(), "--command-config", bad.to_str().unwrap(), "--list"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("request.timout.ms") && err.trim_end().lines().count() == 1, "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

/// `--describe --verbose` of partitions that have no start offset yet (assigned, never
/// fetched: the broker answers start -1 with leader epoch 0): Java prints `-` for the leader
/// epoch, the start offset and the lag; so do we, byte for byte.
#[tokio::test]
async fn verbose_describe_without_start_offset_prints_what_java_prints() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-java-nostart", 3).await;
    let group = common::unique("adm-java-nostart-g");
    let member = Member::join(&cluster, &group, &[&topic]).await;
    let alive = member.keep_alive(cluster.clone());
    // Wait until the group has state for every partition, none with a start offset.
    let end = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let o = admin.list_share_group_offsets(&group, None).await.unwrap();
        if o.partitions.len() == 3 {
            for (tp, r) in &o.partitions {
                let r = r.as_ref().unwrap();
                assert_eq!((r.start_offset, r.leader_epoch, r.lag), (None, None, None), "{tp}: {r:?}");
            }
            break;
        }
        assert!(tokio::time::Instant::now() < end, "no state for 3 partitions: {o:?}");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }

    let args = ["--describe", "--group", &group, "--offsets", "--verbose"];
    let java = share_group_command_async(&args).await;
    assert!(java.ok, "{}", java.stderr);
    let ours = ok(&args);
    let rows = table_rows(&ours, "GROUP");
    assert_eq!(rows.len(), 3, "{ours}");
    // GROUP TOPIC PARTITION LEADER-EPOCH START-OFFSET [LAG]: all unknown.
    assert!(rows.iter().all(|r| r[3..].iter().all(|c| c == "-")), "{ours}");
    let java_rows = table_rows(&java.stdout, "GROUP");
    // Kafka 4.1's tool has no LAG column.
    let java_rows: Vec<Vec<String>> = java_rows
        .into_iter()
        .map(|mut r| {
            if r.len() == 5 {
                r.push("-".into());
            }
            r
        })
        .collect();
    let mut sorted = java_rows.clone();
    sorted.sort();
    assert_eq!(rows, sorted, "java:\n{}\nours:\n{ours}", java.stdout);
    if common::broker_has_v2() {
        assert_eq!(ours, java.stdout, "byte for byte");
    }

    alive.stop().await.leave(&cluster).await;
    admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
}

/// Runs our tool and Java's with the same arguments: (our output, Java's).
async fn both(args: &[&str]) -> (Output, admin_support::ToolOutput) {
    let java = share_group_command_async(args).await;
    (cli(args), java)
}

/// Java's log lines (`[time] WARN message (logger)`) as we print them: `WARN message`.
fn java_log_lines(stderr: &str, level: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.split_once("] ").map(|(_, rest)| rest))
        .filter(|l| l.starts_with(level))
        .map(|l| l.rsplit_once(" (").map(|(m, _)| m).unwrap_or(l).to_string())
        .collect()
}

/// Stdout lines sorted: Java's rows follow a hash map, ours the partition order.
fn sorted_lines(s: &str) -> Vec<String> {
    let mut v: Vec<String> = s.lines().map(str::to_string).collect();
    v.sort();
    v
}

/// Whether Java's `kafka-share-groups` of the broker's version has the reset options these
/// side-by-side tests compare with (`--to-offset`, `--to-current`, `--export`, ...): checked
/// against 4.4's tool; 4.1's refuses them as unrecognized options, so there the comparison
/// is skipped, and said so.
fn java_tool_resets() -> bool {
    let has = common::kafka_version() >= (4, 4);
    if !has {
        eprintln!(
            "skipped: Java's kafka-share-groups of Kafka {:?} has no reset options to compare with",
            common::kafka_version()
        );
    }
    has
}

/// `--reset-offsets` prints Java's columns and Java's warnings: an offset past the log end
/// is logged at WARN on stderr and clamped; a timestamp after the last record falls back to
/// the log end with a `Warn:` block on stdout, before the table and before --export's CSV.
#[tokio::test]
async fn reset_offsets_warns_as_java() {
    if !java_tool_resets() {
        return;
    }
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let ta = common::new_topic(&admin, "adm-rw-a", 2).await;
    let tb = common::new_topic(&admin, "adm-rw-b", 1).await;
    let group = common::unique("adm-rw-g");
    produce(&cluster, &ta, 0, 10).await;

    for args in [
        vec!["--reset-offsets", "--group", &group, "--topic", &ta, "--to-offset", "100", "--dry-run"],
        vec!["--reset-offsets", "--group", &group, "--topic", &ta, "--topic", &tb, "--to-offset", "3", "--dry-run"],
        vec![
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &ta,
            "--topic",
            &tb,
            "--to-datetime",
            "2099-01-01T00:00:00.000",
            "--dry-run",
        ],
        vec![
            "--reset-offsets",
            "--group",
            &group,
            "--topic",
            &format!("{ta}:0"),
            "--to-datetime",
            "2099-01-01T00:00:00.000",
            "--dry-run",
            "--export",
        ],
    ] {
        let (ours, java) = both(&args).await;
        assert!(java.ok, "java {args:?}: {}", java.stderr);
        assert!(ours.status.success(), "{args:?}: {}", String::from_utf8_lossy(&ours.stderr));
        let out = String::from_utf8_lossy(&ours.stdout);
        let err = String::from_utf8_lossy(&ours.stderr);
        assert_eq!(sorted_lines(&out), sorted_lines(&java.stdout), "{args:?}\njava:\n{}\nours:\n{out}", java.stdout);
        assert!(!out.contains("CURRENT-OFFSET"), "{out}");
        let mut java_warns = java_log_lines(&java.stderr, "WARN");
        java_warns.sort();
        assert_eq!(sorted_lines(&err), java_warns, "{args:?}\njava:\n{}\nours:\n{err}", java.stderr);
    }
    // The clamped offsets are what the warnings say.
    let (ours, _) =
        both(&["--reset-offsets", "--group", &group, "--topic", &ta, "--to-offset", "100", "--dry-run"]).await;
    let err = String::from_utf8_lossy(&ours.stderr);
    assert!(
        err.contains(&format!(
            "WARN New offset (100) is higher than latest offset for topic partition {ta}-0. Value will be set to 10."
        )),
        "{err}"
    );
}

/// A failure says the broker's words once, as Java's tool does: in the STATUS column
/// (`Error: There is no offset information to delete.`) with nothing again on stderr, or as
/// one line, without the request, broker id or error code behind it.
#[tokio::test]
async fn errors_say_the_brokers_words_once_as_java() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let ta = common::new_topic(&admin, "adm-err-a", 1).await;
    let tb = common::new_topic(&admin, "adm-err-b", 1).await;
    let group = common::unique("adm-err-g");
    let no_group = common::unique("adm-err-none");
    let no_topic = common::unique("adm-err-none-t");
    // The group exists (Empty) with state for tb only.
    Member::join(&cluster, &group, &[&tb]).await.leave(&cluster).await;

    for args in [
        vec!["--delete-offsets", "--group", &group, "--topic", &ta],
        vec!["--delete-offsets", "--group", &group, "--topic", &no_topic],
        vec!["--delete-offsets", "--group", &no_group, "--topic", &ta],
    ] {
        let (ours, java) = both(&args).await;
        let out = String::from_utf8_lossy(&ours.stdout);
        assert_eq!(out, java.stdout, "{args:?}: stdout as Java's");
        assert!(out.contains("Error: "), "{out}");
        assert_eq!(ours.status.code(), Some(1), "{args:?}");
        assert!(ours.stderr.is_empty(), "{args:?}: said once: {}", String::from_utf8_lossy(&ours.stderr));
    }
    let (ours, _) = both(&["--delete-offsets", "--group", &group, "--topic", &ta]).await;
    assert!(
        String::from_utf8_lossy(&ours.stdout).contains("Error: There is no offset information to delete."),
        "{}",
        String::from_utf8_lossy(&ours.stdout)
    );

    // One line on stderr, the end of Java's `Error:` line, no protocol internals.
    for (args, says) in [
        (vec!["--describe", "--group", no_group.as_str()], format!("Group {no_group} not found.")),
        (vec!["--describe", "--group", no_group.as_str(), "--members"], format!("Group {no_group} not found.")),
        (
            vec![
                "--reset-offsets",
                "--group",
                group.as_str(),
                "--topic",
                no_topic.as_str(),
                "--to-earliest",
                "--dry-run",
            ],
            format!("Topic {no_topic} does not exist."),
        ),
    ] {
        let (ours, java) = both(&args).await;
        assert!(java.stdout.contains("Error: "), "java {args:?}: {}", java.stdout);
        let err = fails(&args, 1);
        assert_eq!(err, format!("kafka-share-groups: {says}\n"), "{args:?}");
        if args[0] == "--describe" {
            assert!(java.stdout.trim_end().ends_with(&says), "java: {}", java.stdout);
        }
        assert!(ours.stdout.is_empty());
    }
    admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
}

/// Options Java's tool accepts and ignores (`--list --all-groups`, `--describe --export`,
/// `--describe --dry-run`, ...) run here too: the same output, and one warning line each.
#[tokio::test]
async fn options_java_ignores_run_with_a_warning() {
    if !java_tool_resets() {
        return;
    }
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-ign", 1).await;
    let group = common::unique("adm-ign-g");
    produce(&cluster, &topic, 0, 3).await;
    Member::join(&cluster, &group, &[&topic]).await.leave(&cluster).await;

    let (ours, java) = both(&["--list", "--all-groups"]).await;
    assert!(java.ok, "{}", java.stderr);
    assert!(ours.status.success(), "{}", String::from_utf8_lossy(&ours.stderr));
    for out in [String::from_utf8_lossy(&ours.stdout).into_owned(), java.stdout] {
        assert!(out.lines().any(|l| l == group), "{out}");
    }
    assert_eq!(
        String::from_utf8_lossy(&ours.stderr),
        "kafka-share-groups: warning: --all-groups does nothing with --list; ignored\n"
    );

    for (extra, flag) in [("--export", "--export"), ("--dry-run", "--dry-run"), ("--execute", "--execute")] {
        let args = ["--describe", "--group", &group, extra];
        let (ours, java) = both(&args).await;
        assert!(java.ok, "{}", java.stderr);
        assert!(ours.status.success(), "{args:?}: {}", String::from_utf8_lossy(&ours.stderr));
        let out = String::from_utf8_lossy(&ours.stdout);
        assert_eq!(sorted_lines(&out), sorted_lines(&java.stdout), "{args:?}\njava:\n{}\nours:\n{out}", java.stdout);
        assert_eq!(
            String::from_utf8_lossy(&ours.stderr),
            format!("kafka-share-groups: warning: {flag} does nothing with --describe; ignored\n")
        );
    }
    admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
}

/// `--to-current` / `--shift-by` on partitions without a start offset: Java's tool ends in a
/// NullPointerException; ours says which partitions, why, and which options work.
#[tokio::test]
async fn relative_reset_without_start_offset_says_why() {
    if !java_tool_resets() {
        return;
    }
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "adm-nostart", 2).await;
    let group = common::unique("adm-nostart-g");
    // The group has state for both partitions, neither with a start offset (assigned, never
    // fetched), and no members.
    let cluster = admin.cluster().clone();
    let member = Member::join(&cluster, &group, &[&topic]).await;
    let alive = member.keep_alive(cluster.clone());
    let end = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while admin.list_share_group_offsets(&group, None).await.unwrap().partitions.len() < 2 {
        assert!(tokio::time::Instant::now() < end, "no state for 2 partitions");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    alive.stop().await.leave(&cluster).await;
    let args = ["--reset-offsets", "--group", &group, "--topic", &topic, "--to-current", "--dry-run"];
    let java = share_group_command_async(&args).await;
    assert!(
        java.stdout.contains("Error:") && java.stderr.contains("NullPointerException"),
        "java: {}\n{}",
        java.stdout,
        java.stderr
    );
    let e = fails(&args, 1);
    assert!(
        e.starts_with(&format!(
            "kafka-share-groups: Share group '{group}' has no start offset yet for {topic}-0, {topic}-1"
        )),
        "{e}"
    );
    assert!(e.contains("--to-earliest") && !e.contains("invalid argument"), "{e}");
    let e = fails(
        &["--reset-offsets", "--group", &group, "--topic", &format!("{topic}:1"), "--shift-by", "-1", "--dry-run"],
        1,
    );
    assert!(e.contains(&format!("has no start offset yet for {topic}-1 (")), "{e}");
}

/// Every exit code that differs from Java's tool is stated in `--help` and in the README, and
/// is what both tools do: `--help`, a usage mistake, a failed operation.
#[tokio::test]
async fn exit_codes_differ_from_java_only_as_stated() {
    let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    let help = Command::new(env!("CARGO_BIN_EXE_kafka-share-groups")).arg("--help").output().unwrap();
    assert_eq!(help.status.code(), Some(0));
    let help = words(&String::from_utf8_lossy(&help.stdout));
    let readme = words(&std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap());
    let no_group = common::unique("adm-exit-none");
    for (args, ours_code, java_code, in_help, in_readme) in [
        (vec!["--help"], 0, 1, "--help exits 0 (Java's tool: 1)", "`--help` exits 0 (Java: 1)"),
        (vec!["--lst"], 2, 1, "2 bad usage, one line on stderr (Java's tool: 1", "2 bad usage (Java: 1)"),
        (
            vec!["--describe", "--group", no_group.as_str()],
            1,
            0,
            "1 an operation failed (Java's tool: 0, after an Error: block on stdout)",
            "1 an operation failed (Java: 0, after an `Error:` block on stdout)",
        ),
    ] {
        let (ours, java) = both(&args).await;
        assert_eq!(java.code, Some(java_code), "java {args:?}: {}{}", java.stdout, java.stderr);
        assert_eq!(ours.status.code(), Some(ours_code), "{args:?}: {}", String::from_utf8_lossy(&ours.stderr));
        assert!(help.contains(in_help), "--help does not state {in_help:?}:\n{help}");
        assert!(readme.contains(in_readme), "README does not state {in_readme:?}");
    }
}
