//! The tasks of a no-loss run: the fixed-rate producer, the consuming members (record each
//! delivery, ACCEPT it, note every acknowledgement result), and a watcher of the topic's
//! partition leaders.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{Error, ShareConsumer};

use super::ledger::{Delivery, Ledger};
use super::no_loss::{Options, PARTITIONS, PRODUCE_DEADLINE};
use crate::common;

/// A short name for an error, to count failures by kind.
pub fn kind(e: &Error) -> String {
    match e {
        Error::Broker { code, .. } => code.to_string(),
        other => format!("{other:?}").split(['(', ' ', '{']).next().unwrap_or("?").to_string(),
    }
}

/// Notes every change of a partition's leader (or its epoch), read from metadata every 200 ms.
pub(super) async fn watch_leaders(topic: String, ledger: Arc<Mutex<Ledger>>) {
    let admin = common::cluster_admin().await;
    let mut last: std::collections::BTreeMap<i32, (i32, i32)> = Default::default();
    loop {
        if let Ok(t) = admin.describe_topic(&topic).await {
            let now: Vec<(i32, i32, i32)> =
                t.partitions.iter().map(|p| (p.partition, p.leader.unwrap_or(-1), p.leader_epoch)).collect();
            let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
            for (p, leader, epoch) in now {
                if last.insert(p, (leader, epoch)).is_some_and(|was| was != (leader, epoch)) {
                    l.leader_changes.push((Instant::now(), p, leader, epoch));
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Writes ids 0..records at `rate` per second, partition id % 6; a failed send is retried
/// with the same id until it is written or PRODUCE_DEADLINE passes.
pub(super) async fn produce(topic: String, options: Options, ledger: Arc<Mutex<Ledger>>) {
    let producer = loop {
        match Producer::connect(ProducerConfig::new(common::cluster_bootstrap())).await {
            Ok(p) => break Arc::new(p),
            Err(e) => {
                eprintln!("chaos: producer connect: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
    };
    let started = Instant::now();
    let mut tasks = Vec::with_capacity(options.records);
    for id in 0..options.records as u64 {
        // Paced from the start, not from the last send, so a stall does not lower the rate.
        let due = started + Duration::from_secs_f64(id as f64 / options.rate.max(1) as f64);
        tokio::time::sleep_until(due.into()).await;
        let (producer, topic, ledger) = (producer.clone(), topic.clone(), ledger.clone());
        tasks.push(tokio::spawn(async move {
            let partition = (id % PARTITIONS as u64) as i32;
            let give_up = Instant::now() + PRODUCE_DEADLINE;
            let written = loop {
                let rec = ProducerRecord::new(topic.as_str(), id.to_string()).partition(partition);
                let r = match producer.send(rec).await {
                    Ok(delivery) => delivery.await,
                    Err(e) => Err(e),
                };
                match r {
                    Ok(md) => break Some((md.partition, md.offset)),
                    Err(_) if Instant::now() < give_up => tokio::time::sleep(Duration::from_millis(200)).await,
                    Err(e) => {
                        eprintln!("chaos: gave up producing id {id}: {e}");
                        break None;
                    }
                }
            };
            let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
            match written {
                Some(po) => {
                    l.at_offset.insert(po, id);
                    if l.produced.insert(id, po).is_some() {
                        l.produced_twice += 1;
                    }
                }
                None => l.produce_failed += 1,
            }
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let _ = producer.close(Duration::from_secs(10)).await;
}

/// One member: records and ACCEPTs every record until told to stop, then commits and closes.
pub(super) async fn consume(
    member: usize,
    cfg: kafka_share::ShareConsumerConfig,
    topic: String,
    ledger: Arc<Mutex<Ledger>>,
    stop: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
) {
    let c = loop {
        match ShareConsumer::connect(cfg.clone()).await {
            Ok(c) => break c,
            Err(e) if !stop.load(Ordering::Relaxed) => {
                eprintln!("chaos: member {member} connect: {e}");
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(_) => return,
        }
    };
    let l = ledger.clone();
    c.set_acknowledgement_commit_callback(move |tp, offsets, r| {
        let mut l = l.lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        match r {
            Ok(()) => {
                for o in offsets {
                    let e = l.accepted.entry((tp.partition, *o)).or_insert((now, 0));
                    e.1 += 1;
                    l.accept_times.push(now);
                }
            }
            Err(e) => {
                if matches!(e, Error::OutcomeUnknown { .. }) {
                    l.unknown_outcome.extend(offsets.iter().map(|o| (tp.partition, *o)));
                }
                for o in offsets {
                    l.failed_at.insert((tp.partition, *o), kind(e));
                }
                *l.failed_acks.entry(kind(e)).or_default() += offsets.len();
            }
        }
    })
    .expect("set the callback");
    c.subscribe([topic]).expect("subscribe");
    let mut held: Vec<kafka_share::ConsumerRecord> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let holding = hold.load(Ordering::Relaxed);
        if !holding && !held.is_empty() {
            accept(&c, &held, &ledger);
            held.clear();
        }
        // In explicit mode a poll needs the records of the last one acknowledged: a member
        // that holds a batch polls no more until told to let go.
        if holding && !held.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        }
        match c.poll(Duration::from_millis(200)).await {
            Ok(recs) => {
                let now = Instant::now();
                let mut l = ledger.lock().unwrap_or_else(|p| p.into_inner());
                for r in &recs {
                    let id = r.value_str().and_then(|v| v.parse::<u64>().ok()).unwrap_or(u64::MAX);
                    l.deliveries.push(Delivery {
                        id,
                        partition: r.partition,
                        offset: r.offset,
                        delivery_count: r.delivery_count,
                        member,
                        at: now,
                    });
                    if holding {
                        l.held.push((member, r.partition, r.offset));
                    }
                }
                drop(l);
                if holding {
                    held.extend(recs);
                } else {
                    accept(&c, &recs, &ledger);
                }
            }
            Err(e) => {
                *ledger.lock().unwrap_or_else(|p| p.into_inner()).poll_errors.entry(kind(&e)).or_default() += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let _ = c.commit_sync(Duration::from_secs(10)).await;
    let _ = c.close(Duration::from_secs(10)).await;
}

/// ACCEPTs `recs`; a refusal (e.g. a lock that expired) is counted with the poll errors.
fn accept(c: &ShareConsumer, recs: &[kafka_share::ConsumerRecord], ledger: &Mutex<Ledger>) {
    for r in recs {
        if let Err(e) = c.acknowledge(r) {
            *ledger
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .poll_errors
                .entry(format!("acknowledge: {}", kind(&e)))
                .or_default() += 1;
        }
    }
}
