//! No loss when a consumer process dies mid-batch: a child process (this test binary run
//! again, its one ignored test) joins the group, takes a batch, ACCEPTs the first half, commits,
//! and is killed with SIGKILL while it holds the rest. Another member (the no-loss harness's
//! consumer, in this process) must receive every record the child held, with delivery count 2,
//! once the broker takes them back (the share session closes with the connection, or at the
//! latest when the acquisition lock expires). Prints the figures and how long that took.

use crate::chaos_support;
use crate::common;

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use chaos_support::ledger::Delivery;
use chaos_support::no_loss::{NoLoss, Options};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::ShareConsumer;

const CHILD_TEST: &str = "child_member_holding_a_batch";

/// [`CHILD_TEST`]'s name in this test binary: its module path without the crate's name.
fn child_test_name() -> String {
    format!("{}::{CHILD_TEST}", module_path!().split_once("::").map_or("", |(_, m)| m))
}
/// The group's acquisition lock: short, so the test does not wait long if the broker keeps
/// the child's records until it expires.
const LOCK_MS: u32 = 8000;
/// The member id the ledger gives the child.
const CHILD: usize = 100;

/// The child: prints `DELIVERED id partition offset delivery_count` per record of its first
/// batch, `ACCEPTED partition offset` per committed ACCEPT, `HELD partition offset` per record
/// it keeps unacknowledged, then `READY`, and waits to be killed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the child process of consumer_killed_mid_batch_another_member_gets_its_records_with_delivery_count_2"]
async fn child_member_holding_a_batch() {
    let group = std::env::var("CHAOS_CHILD_GROUP").expect("run by the consumer kill test (CHAOS_CHILD_GROUP)");
    let topic = std::env::var("CHAOS_CHILD_TOPIC").expect("run by the consumer kill test (CHAOS_CHILD_TOPIC)");
    let cfg = common::consumer_config(&common::cluster_bootstrap(), &group)
        .acknowledgement_mode(AcknowledgementMode::Explicit)
        .max_poll_records(40);
    let c = ShareConsumer::connect(cfg).await.expect("child connect");
    c.set_acknowledgement_commit_callback(|tp, offsets, r| {
        if r.is_ok() {
            let mut out = std::io::stdout().lock();
            for o in offsets {
                let _ = writeln!(out, "ACCEPTED {} {o}", tp.partition);
            }
        }
    })
    .expect("callback");
    c.subscribe([topic]).expect("subscribe");
    let recs = loop {
        let recs = c.poll(Duration::from_millis(500)).await.expect("child poll");
        if recs.len() >= 2 {
            break recs;
        }
    };
    let (accept, keep) = recs.split_at(recs.len() / 2);
    {
        let mut out = std::io::stdout().lock();
        for r in &recs {
            let id = r.value_str().unwrap_or("?");
            let _ = writeln!(out, "DELIVERED {id} {} {} {}", r.partition, r.offset, r.delivery_count);
        }
    }
    for r in accept {
        c.acknowledge(r).expect("child acknowledge");
    }
    c.commit_sync(Duration::from_secs(30)).await.expect("child commit");
    let mut out = std::io::stdout().lock();
    for r in keep {
        let _ = writeln!(out, "HELD {} {}", r.partition, r.offset);
    }
    let _ = writeln!(out, "READY");
    let _ = out.flush();
    drop(out);
    // Holds the rest (and keeps heartbeating) until killed.
    loop {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consumer_killed_mid_batch_another_member_gets_its_records_with_delivery_count_2() {
    let _turn = crate::disrupting().await;
    let mut options = Options::from_env(1000);
    options.lock_ms = LOCK_MS;
    options.consumers = 1;
    let mut run = NoLoss::create(options).await;
    run.start_producer();
    run.wait_produced().await;

    let exe = std::env::current_exe().expect("this test binary");
    let mut child = Command::new(exe)
        .args(["--exact", &child_test_name(), "--ignored", "--nocapture", "--test-threads=1"])
        .env("CHAOS_CHILD_GROUP", &run.group)
        .env("CHAOS_CHILD_TOPIC", &run.topic)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn the child member");
    let stdout = child.stdout.take().expect("child stdout");
    // Read its lines off the runtime; a child that never gets ready fails the test.
    let lines = tokio::time::timeout(
        Duration::from_secs(120),
        tokio::task::spawn_blocking(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let ready = line == "READY";
                lines.push(line);
                if ready {
                    break;
                }
            }
            lines
        }),
    )
    .await;
    let lines = match lines {
        Ok(Ok(lines)) if lines.last().is_some_and(|l| l == "READY") => lines,
        other => {
            let _ = child.kill();
            panic!("the child member did not get ready: {other:?}");
        }
    };
    // SIGKILL: no close, no leave, no release.
    child.kill().expect("kill -9 the child");
    let _ = child.wait();
    let killed_at = Instant::now();

    let mut held: BTreeMap<(i32, i64), i16> = BTreeMap::new();
    {
        let mut l = run.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let mut child_counts = BTreeMap::new();
        for line in &lines {
            let f: Vec<&str> = line.split_whitespace().collect();
            let num = |i: usize| f.get(i).and_then(|x| x.parse::<i64>().ok()).unwrap_or(-1);
            match f.first() {
                Some(&"DELIVERED") => {
                    let po = (num(2) as i32, num(3));
                    child_counts.insert(po, num(4) as i16);
                    l.deliveries.push(Delivery {
                        id: num(1) as u64,
                        partition: po.0,
                        offset: po.1,
                        delivery_count: num(4) as i16,
                        member: CHILD,
                        at: killed_at - Duration::from_millis(1),
                    });
                }
                Some(&"ACCEPTED") => {
                    let e = l.accepted.entry((num(1) as i32, num(2))).or_insert((killed_at, 0));
                    e.1 += 1;
                    l.accept_times.push(killed_at);
                }
                Some(&"HELD") => {
                    let po = (num(1) as i32, num(2));
                    held.insert(po, child_counts.get(&po).copied().unwrap_or(-1));
                }
                _ => {}
            }
        }
        let accepted = l.accepted.len();
        l.note(format!("kill -9 the child member holding {} records (it ACCEPTed {accepted})", held.len()));
    }
    assert!(!held.is_empty(), "the child held nothing: {lines:?}");

    run.start_consumers(1);
    let (figures, ledger) = run.finish("consumer_killed").await;
    figures.assert_no_loss("consumer_killed");
    let l = ledger.lock().unwrap_or_else(|p| p.into_inner());
    let mut first_back: Option<Duration> = None;
    for (po, child_count) in &held {
        let again: Vec<&Delivery> =
            l.deliveries.iter().filter(|d| d.member != CHILD && (d.partition, d.offset) == *po).collect();
        assert_eq!(*child_count, 1, "the child got {po:?} with delivery count {child_count}");
        let first = again.first().unwrap_or_else(|| panic!("{po:?}, held by the killed child, never came back"));
        assert_eq!(first.delivery_count, 2, "{po:?} came back with delivery count {}", first.delivery_count);
        let after = first.at.saturating_duration_since(killed_at);
        first_back = Some(first_back.map_or(after, |f| f.min(after)));
    }
    // The killed member stays in the group, with its share of the partitions, until its
    // heartbeats are missed for share.session.timeout.ms: the longest stall is that.
    let first_accept = l.accept_times.iter().find(|t| **t > killed_at).map(|t| t.saturating_duration_since(killed_at));
    eprintln!(
        "chaos: consumer_killed: {} held records came back to the other member with delivery count 2, the first \
         {:.2} s after the kill (acquisition lock {:.1} s); the other member's first committed ACCEPT {:.2} s after it",
        held.len(),
        first_back.unwrap_or_default().as_secs_f64(),
        LOCK_MS as f64 / 1000.0,
        first_accept.unwrap_or_default().as_secs_f64()
    );
}
