//! The no-loss harness: a producer writes N records with unique ids (the value is the id) at
//! a fixed rate into a 6-partition topic (RF 3, min.insync.replicas 2); share consumers in
//! explicit mode record each delivery (id, partition, offset, delivery count) and ACCEPT it;
//! the acknowledgement callback records which ACCEPTs were committed. `finish` waits until
//! every produced id is ACCEPTed (a condition, under a generous failure limit) and returns
//! the figures.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kafka_share::admin::{Admin, NewTopic};
use kafka_share::consumer::AcknowledgementMode;
use kafka_share::producer::{Producer, ProducerConfig, ProducerRecord};
use kafka_share::{Error, ShareConsumer};

use super::ledger::{Delivery, Figures, Ledger};
use crate::common;

pub const PARTITIONS: i32 = 6;
/// Failure limit for every produced id to be ACCEPTed once the faults are over: past a
/// fencing, a lock expiry and a request timeout or two.
const FINISH_DEADLINE: Duration = Duration::from_secs(180);
/// Failure limit for one produce (its retries included) before the id is given up.
const PRODUCE_DEADLINE: Duration = Duration::from_secs(120);

/// What one run does.
#[derive(Debug, Clone)]
pub struct Options {
    pub records: usize,
    /// Records per second the producer writes.
    pub rate: u32,
    pub consumers: usize,
    /// The group's share.record.lock.duration.ms.
    pub lock_ms: u32,
    /// The consumers' bootstrap when not the cluster's (a fault proxy's).
    pub consumer_bootstrap: Option<String>,
    pub request_timeout: Option<Duration>,
}

impl Options {
    /// The short form the suite runs (`records`, 200 records/s), or the full form
    /// scripts/chaos asks for with CHAOS_RECORDS and CHAOS_RATE.
    pub fn from_env(records: usize) -> Options {
        let env = |k: &str| std::env::var(k).ok().and_then(|v| v.parse::<u64>().ok());
        Options {
            records: env("CHAOS_RECORDS").map_or(records, |n| n as usize),
            rate: env("CHAOS_RATE").map_or(200, |n| n as u32),
            consumers: 2,
            lock_ms: 15_000,
            consumer_bootstrap: None,
            request_timeout: None,
        }
    }
}

/// A running producer and its consumers.
pub struct NoLoss {
    pub admin: Admin,
    pub topic: String,
    pub group: String,
    pub ledger: Arc<Mutex<Ledger>>,
    pub options: Options,
    stop: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    producer: Option<tokio::task::JoinHandle<()>>,
    consumers: Vec<tokio::task::JoinHandle<()>>,
    leaders: tokio::task::JoinHandle<()>,
}

/// A short name for an error, to count failures by kind.
pub fn kind(e: &Error) -> String {
    match e {
        Error::Broker { code, .. } => code.to_string(),
        other => format!("{other:?}").split(['(', ' ', '{']).next().unwrap_or("?").to_string(),
    }
}

/// Turns on the client's log when CHAOS_LOG says (e.g. CHAOS_LOG=kafka_share=debug).
pub fn init_log() {
    if let Ok(filter) = std::env::var("CHAOS_LOG") {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .try_init();
    }
}

impl NoLoss {
    /// Creates the topic and the group, starts the producer and the consumers.
    pub async fn start(options: Options) -> NoLoss {
        let mut run = NoLoss::create(options).await;
        run.start_producer();
        run.start_consumers(run.options.consumers);
        run
    }

    /// Creates the topic and the group; nothing runs yet.
    pub async fn create(options: Options) -> NoLoss {
        init_log();
        let admin = common::cluster_admin().await;
        let topic = common::unique("chaos");
        let r = admin
            .create_topics(&[NewTopic::new(&topic, PARTITIONS)
                .replication_factor(3)
                .config("min.insync.replicas", "2")])
            .await
            .expect("create the chaos topic");
        r.into_iter().next().expect("one result").expect("the chaos topic");
        let group = common::new_group(&admin, "g-chaos", Some(options.lock_ms)).await;
        let ledger = Arc::new(Mutex::new(Ledger::default()));
        let leaders = tokio::spawn(watch_leaders(topic.clone(), ledger.clone()));
        NoLoss {
            admin,
            topic,
            group,
            ledger,
            leaders,
            options,
            stop: Arc::new(AtomicBool::new(false)),
            hold: Arc::new(AtomicBool::new(false)),
            producer: None,
            consumers: Vec::new(),
        }
    }

    /// Starts the producer.
    pub fn start_producer(&mut self) {
        self.producer = Some(tokio::spawn(produce(self.topic.clone(), self.options.clone(), self.ledger.clone())));
    }

    /// Starts `n` more members.
    pub fn start_consumers(&mut self, n: usize) {
        for _ in 0..n {
            let member = self.consumers.len();
            let cfg = config(&self.options, &self.group);
            let (topic, ledger, stop, hold) =
                (self.topic.clone(), self.ledger.clone(), self.stop.clone(), self.hold.clone());
            self.consumers.push(tokio::spawn(consume(member, cfg, topic, ledger, stop, hold)));
        }
    }

    /// While on, each member keeps the next batch it gets without acknowledging it (and polls
    /// no more: explicit mode wants a batch acknowledged before the next poll); its delivery
    /// is recorded and `Ledger::held` lists it. Off, they ACCEPT what they held.
    pub fn hold_acks(&self, on: bool) {
        self.hold.store(on, Ordering::Relaxed);
    }

    /// Waits until the producer wrote every id (or gave some up).
    pub async fn wait_produced(&self) {
        let deadline = Instant::now() + PRODUCE_DEADLINE * 2;
        while !self.producer.as_ref().is_none_or(|p| p.is_finished()) {
            assert!(Instant::now() < deadline, "the producer did not finish within {:?}", PRODUCE_DEADLINE * 2);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `f` holds for the ledger.
    pub async fn wait_for(&self, what: &str, f: impl Fn(&Ledger) -> bool) {
        let deadline = Instant::now() + FINISH_DEADLINE;
        while !f(&self.ledger.lock().unwrap_or_else(|p| p.into_inner())) {
            assert!(Instant::now() < deadline, "not within {FINISH_DEADLINE:?}: {what}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Notes a labelled moment (a kill, a restart) in the timeline.
    pub fn note(&self, what: impl Into<String>) {
        self.ledger.lock().unwrap_or_else(|p| p.into_inner()).note(what);
    }

    /// Waits until `n` records were ACCEPTed (committed) in all.
    pub async fn wait_accepted(&self, n: usize) {
        let deadline = Instant::now() + FINISH_DEADLINE;
        loop {
            let got = self.ledger.lock().unwrap_or_else(|p| p.into_inner()).accept_times.len();
            if got >= n {
                return;
            }
            assert!(Instant::now() < deadline, "only {got} of {n} records ACCEPTed within {FINISH_DEADLINE:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits until the producer is done and every id it wrote is ACCEPTed, or the broker shows
    /// nothing left to acknowledge and every id not confirmed had an ACCEPT of unknown outcome
    /// (or the failure limit); stops the consumers and returns the figures, printed.
    pub async fn finish(mut self, scenario: &str) -> (Figures, Arc<Mutex<Ledger>>) {
        let deadline = Instant::now() + FINISH_DEADLINE + PRODUCE_DEADLINE;
        loop {
            let (left, unknown) = {
                let l = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
                let left: Vec<(i32, i64)> =
                    l.produced.values().filter(|po| !l.accepted.contains_key(po)).copied().collect();
                let unknown = left.iter().all(|po| l.unknown_outcome.contains(po));
                (left.len(), unknown)
            };
            let produced = self.producer.as_ref().is_none_or(|p| p.is_finished());
            if produced && left == 0 {
                break;
            }
            if produced && unknown && self.nothing_left_to_acknowledge().await {
                self.ledger.lock().unwrap_or_else(|p| p.into_inner()).broker_done = true;
                break;
            }
            if Instant::now() >= deadline {
                eprintln!("chaos: {scenario}: giving up with {left} records not ACCEPTed");
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.stop.store(true, Ordering::Relaxed);
        for c in self.consumers.drain(..) {
            let _ = c.await;
        }
        if let Some(p) = &self.producer {
            p.abort();
        }
        self.leaders.abort();
        let ledger = self.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let figures = ledger.figures();
        figures.print(scenario, &ledger);
        drop(ledger);
        (figures, self.ledger)
    }
}

impl NoLoss {
    /// Whether the broker counts every record of the topic as acknowledged (lag 0 on every
    /// partition: DescribeShareGroupOffsets v1, Kafka 4.2+; false where lag is not reported).
    async fn nothing_left_to_acknowledge(&self) -> bool {
        match self.admin.list_share_group_offsets(&self.group, Some(&[self.topic.as_str()])).await {
            Ok(o) => {
                o.partitions.len() == PARTITIONS as usize
                    && o.partitions.iter().all(|(_, r)| r.as_ref().is_ok_and(|p| p.lag == Some(0)))
            }
            Err(_) => false,
        }
    }
}

/// Notes every change of a partition's leader (or its epoch), read from metadata every 200 ms.
async fn watch_leaders(topic: String, ledger: Arc<Mutex<Ledger>>) {
    let admin = common::cluster_admin().await;
    let topics = [topic.clone()];
    let mut last: std::collections::BTreeMap<i32, (i32, i32)> = Default::default();
    loop {
        if admin.cluster().refresh_metadata(&topics).await.is_ok() {
            let now: Vec<(i32, i32, i32)> = admin.cluster().with_metadata(|m| {
                m.topics.get(&topic).map_or(Vec::new(), |t| {
                    t.partitions.iter().map(|p| (p.partition, p.leader, p.leader_epoch)).collect()
                })
            });
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

/// The consumers' configuration: explicit acknowledgement.
pub fn config(options: &Options, group: &str) -> kafka_share::ShareConsumerConfig {
    let bs = options.consumer_bootstrap.clone().unwrap_or_else(common::cluster_bootstrap);
    let mut cfg = common::consumer_config(&bs, group).acknowledgement_mode(AcknowledgementMode::Explicit);
    if let Some(t) = options.request_timeout {
        cfg = cfg.request_timeout(t);
    }
    cfg
}

/// Writes ids 0..records at `rate` per second, partition id % 6; a failed send is retried
/// with the same id until it is written or PRODUCE_DEADLINE passes.
async fn produce(topic: String, options: Options, ledger: Arc<Mutex<Ledger>>) {
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
async fn consume(
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
