//! Chaos on the real three-broker cluster: kill -9 one broker while a share consumer accepts
//! records from six partitions (RF 3) that producers keep filling. It measures, per
//! partition, the longest gap between accepted records around the kill, and prints every
//! figure with a timeline.
//!
//! The issue asked for live-led partitions to stall under 2 s. On Kafka 4.4 with RF 3 on three
//! brokers that is impossible, for reasons of the broker (measured with this test):
//! - until the controller fences the dead broker (`broker.session.timeout.ms`, 9 s by
//!   default; 8-13 s on a loaded 2-core machine) it stays in the ISR of every partition, so
//!   no high watermark advances: records produced after the kill are invisible everywhere;
//! - every acknowledgement is a share-state write to `__share_group_state` (RF 3), complete
//!   only once every ISR replica has it, so it waits for the same fencing; when the dead
//!   broker led a state partition, also for the share coordinator to move and reload it
//!   (1.3 s load; acks answered ~3 s after the fencing), and once a ShareFetch carrying acks
//!   to a live broker went unanswered until request.timeout.ms (30 s);
//! - a broker answers a connection's requests one at a time and a share session lives on one
//!   connection, so a session whose acknowledgement waits can fetch nothing meanwhile.
//!
//! The client's own part was measured from its trace: records flow again within ~0.3 s of the
//! live broker answering. So the test prints the figures (per-partition gaps, a timeline,
//! the fencing delay) and asserts what the client owes: every partition flows again.
//!
//! It kills and restarts a node with `scripts/kafka kill|start --node N` (the pids the script
//! recorded; KAFKA_PORT_OFFSET is passed through), so it needs the cluster from
//! `scripts/kafka up --nodes 3`. Its own test binary, its two tests one after the other:
//! nothing else runs on the cluster while a broker is down.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::admin::NewTopic;
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{Error, ShareConsumer};

const PARTITIONS: i32 = 6;
/// How long the consumer runs after the kill: past the fencing (~9 s) and the leader moves.
const AFTER_KILL: Duration = Duration::from_secs(20);
/// How long every partition gets to flow again after the kill: past the fencing, a share
/// coordinator move, and a ShareFetch the broker never answers (request.timeout.ms, 30 s).
const RESUME_DEADLINE: Duration = Duration::from_secs(75);

/// Runs `scripts/kafka ARGS` on the cluster (the caller's KAFKA_PORT_OFFSET goes along).
fn kafka_script(args: &[&str]) -> std::process::Output {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka");
    let out = std::process::Command::new(script).args(args).output().expect("run scripts/kafka");
    assert!(
        out.status.success(),
        "scripts/kafka {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Starts the killed node again when the test ends, passed or failed.
struct Restart(i32);

impl Drop for Restart {
    fn drop(&mut self) {
        let n = self.0.to_string();
        eprintln!("chaos: restarting node {n}");
        let out = std::process::Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka"))
            .args(["start", "--nodes", "3", "--node", &n])
            .output();
        if let Ok(o) = out {
            eprint!("{}", String::from_utf8_lossy(&o.stderr));
        }
    }
}

/// What the consumer saw: (partition, when accepted) per record, and ack outcomes.
#[derive(Default)]
struct Seen {
    accepted: Vec<(i32, Instant)>,
    /// (partition, when its produce was acknowledged): a stall there is the producer's.
    produced: Vec<(i32, Instant)>,
    unknown_outcome: usize,
    failed: BTreeMap<String, usize>,
}

/// The longest stretch in [from, to] without an accepted record of `partition`.
fn longest_gap(seen: &[(i32, Instant)], partition: i32, from: Instant, to: Instant) -> Duration {
    let mut last = from;
    let mut gap = Duration::ZERO;
    for &(_, t) in seen.iter().filter(|(p, t)| *p == partition && *t >= from && *t <= to) {
        gap = gap.max(t - last);
        last = t;
    }
    gap.max(to.saturating_duration_since(last))
}

async fn kill_one_broker(kill_coordinator: bool) {
    // CHAOS_LOG=kafka_share=debug shows what the client did around the kill.
    if let Ok(filter) = std::env::var("CHAOS_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
    let bs = common::cluster_bootstrap();
    let admin = common::cluster_admin().await;
    let topic = common::unique("chaos");
    let r = admin.create_topics(&[NewTopic::new(&topic, PARTITIONS).replication_factor(3)]).await.unwrap();
    r.into_iter().next().unwrap().unwrap();
    let leaders: BTreeMap<i32, i32> = common::described_with_leaders(&admin, &topic)
        .await
        .partitions
        .iter()
        .map(|p| (p.partition, p.leader.unwrap_or(-1)))
        .collect();
    let group = common::new_group(&admin, "g-chaos", None).await;

    let coordinator = admin.cluster().find_group_coordinator(&group).await.unwrap();

    // Producers: one per partition, so a partition whose leader died holds up no other.
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let mut producers = Vec::new();
    for p in 0..PARTITIONS {
        let (bs, topic, stop, seen) = (bs.clone(), topic.clone(), stop.clone(), seen.clone());
        producers.push(tokio::spawn(async move {
            let prod = Producer::connect(ProducerConfig::new(&bs)).await.unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let r = prod.send_and_wait(ProducerRecord::new(topic.as_str(), format!("v{i}")).partition(p)).await;
                if r.is_ok() {
                    seen.lock().unwrap().produced.push((p, Instant::now()));
                }
                i += 1;
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            let _ = prod.close(Duration::from_secs(5)).await;
        }));
    }

    // The consumer: explicit mode, accepts everything, notes when.
    let cfg = common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let consumer = {
        let (topic, stop, seen) = (topic.clone(), stop.clone(), seen.clone());
        tokio::spawn(async move {
            let c = ShareConsumer::connect(cfg).await.unwrap();
            let s = seen.clone();
            c.set_acknowledgement_commit_callback(move |_tp, offsets, r| {
                let mut s = s.lock().unwrap();
                match r {
                    Ok(()) => {}
                    Err(Error::OutcomeUnknown { .. }) => s.unknown_outcome += offsets.len(),
                    Err(e) => *s.failed.entry(e.to_string()).or_default() += offsets.len(),
                }
            })
            .unwrap();
            c.subscribe([topic]).unwrap();
            while !stop.load(Ordering::Relaxed) {
                let recs = c.poll(Duration::from_millis(200)).await.unwrap();
                let now = Instant::now();
                for r in &recs {
                    c.acknowledge(r).unwrap();
                }
                seen.lock().unwrap().accepted.extend(recs.iter().map(|r| (r.partition, now)));
            }
            let _ = c.commit_sync(Duration::from_secs(10)).await;
            let _ = c.close(Duration::from_secs(10)).await;
        })
    };

    // Warm up: every partition flowing.
    let warm = Instant::now() + Duration::from_secs(90);
    loop {
        let parts: BTreeSet<i32> = seen.lock().unwrap().accepted.iter().map(|(p, _)| *p).collect();
        if parts.len() == PARTITIONS as usize {
            break;
        }
        assert!(Instant::now() < warm, "not every partition flowed before the kill: {parts:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The victim: a broker leading two partitions, the group coordinator or not as asked.
    let mut led: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, l) in &leaders {
        led.entry(*l).or_default().push(*p);
    }
    let pick = |want_coord: bool| {
        led.iter()
            .filter(|(b, ps)| ps.len() == 2 && (**b == coordinator) == want_coord)
            .map(|(b, _)| *b)
            .next()
    };
    let victim = pick(kill_coordinator)
        .or_else(|| led.keys().copied().find(|b| (*b == coordinator) == kill_coordinator))
        .or_else(|| led.iter().filter(|(_, ps)| ps.len() == 2).map(|(b, _)| *b).next())
        .expect("a broker leading partitions");
    let dead_led: BTreeSet<i32> = led.get(&victim).cloned().unwrap_or_default().into_iter().collect();
    eprintln!(
        "chaos: leaders {leaders:?}, group coordinator {coordinator}; killing broker {victim} \
         (leads {dead_led:?}, coordinator: {})",
        victim == coordinator
    );
    let state_topic = "__share_group_state".to_string();
    admin.cluster().refresh_metadata(std::slice::from_ref(&state_topic)).await.unwrap();
    let victim_led_state = admin
        .cluster()
        .with_metadata(|m| m.topics.get(&state_topic).is_some_and(|t| t.partitions.iter().any(|p| p.leader == victim)));
    let killed_at = Instant::now();
    tracing::info!(victim, "chaos: kill");
    kafka_script(&["kill", "--nodes", "3", "--node", &victim.to_string()]);
    let _restart = Restart(victim);
    // Kafka's own stall ends when the controller fences the broker: its partitions then get
    // new leaders (and it leaves every ISR).
    let fenced_after = {
        let deadline = killed_at + AFTER_KILL;
        loop {
            let moved = admin.cluster().refresh_metadata(std::slice::from_ref(&topic)).await.is_ok()
                && admin.cluster().with_metadata(|m| {
                    m.topics[&topic]
                        .partitions
                        .iter()
                        .filter(|p| dead_led.contains(&p.partition))
                        .all(|p| p.leader != victim)
                });
            if moved || Instant::now() >= deadline {
                break killed_at.elapsed();
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    // Run the whole window, then until every partition flowed again since the fencing.
    let resumed = loop {
        let now = Instant::now();
        let fenced_at = killed_at + fenced_after;
        let flowing: BTreeSet<i32> =
            seen.lock().unwrap().accepted.iter().filter(|(_, t)| *t > fenced_at).map(|(p, _)| *p).collect();
        let all = flowing.len() == PARTITIONS as usize;
        if (all && now >= killed_at + AFTER_KILL) || now >= killed_at + RESUME_DEADLINE {
            break all;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let end = Instant::now();
    stop.store(true, Ordering::Relaxed);
    consumer.await.unwrap();
    for p in producers {
        let _ = p.await;
    }

    let s = seen.lock().unwrap();
    let from = killed_at - Duration::from_secs(1);
    // Records accepted per partition in each half second around the kill.
    for p in 0..PARTITIONS {
        let bins: Vec<String> = (-4..36)
            .map(|i| {
                let lo = if i < 0 {
                    killed_at - Duration::from_millis(500 * (-i) as u64)
                } else {
                    killed_at + Duration::from_millis(500 * i as u64)
                };
                let hi = lo + Duration::from_millis(500);
                s.accepted.iter().filter(|(q, t)| *q == p && *t >= lo && *t < hi).count().to_string()
            })
            .collect();
        eprintln!("chaos: partition {p} per 0.5 s from kill-2s: {}", bins.join(" "));
    }
    for p in 0..PARTITIONS {
        let before = longest_gap(&s.accepted, p, killed_at - Duration::from_secs(4), killed_at);
        eprintln!("chaos: partition {p}: longest gap in the 4 s before the kill {:.2} s", before.as_secs_f64());
    }
    let mut worst_live = Duration::ZERO;
    for p in 0..PARTITIONS {
        let gap = longest_gap(&s.accepted, p, from, end);
        let produce_gap = longest_gap(&s.produced, p, from, end);
        let after = s.accepted.iter().filter(|(q, t)| *q == p && *t >= killed_at).count();
        let kind = if dead_led.contains(&p) { "dead-led" } else { "live-led" };
        eprintln!(
            "chaos: partition {p} ({kind}, leader {}): longest gap {:.2} s (producer's {:.2} s), \
             {after} records accepted after the kill",
            leaders[&p],
            gap.as_secs_f64(),
            produce_gap.as_secs_f64()
        );
        if !dead_led.contains(&p) {
            worst_live = worst_live.max(gap);
        }
    }
    eprintln!(
        "chaos: killed broker {victim} (group coordinator: {}, led a __share_group_state partition: \
         {victim_led_state}); its partitions moved after {:.2} s; longest gap on live-led partitions {:.2} s \
         ({:.2} s past the move); acks with unknown outcome {}, failed {:?}",
        victim == coordinator,
        fenced_after.as_secs_f64(),
        worst_live.as_secs_f64(),
        worst_live.saturating_sub(fenced_after).as_secs_f64(),
        s.unknown_outcome,
        s.failed
    );
    // Under 2 s is impossible here (module docs); what the client owes is to resume every
    // partition, live-led and moved, once Kafka lets it.
    assert!(resumed, "not every partition flowed again within {RESUME_DEADLINE:?} of the kill of broker {victim}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_broker_that_is_not_the_coordinator_every_partition_flows_again() {
    let _turn = crate::disrupting().await;
    kill_one_broker(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_group_coordinator_every_partition_flows_again() {
    let _turn = crate::disrupting().await;
    kill_one_broker(true).await;
}
