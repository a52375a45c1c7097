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

use super::ledger::{Figures, Ledger};
use super::workers::{consume, produce, watch_leaders};
use crate::common;

pub const PARTITIONS: i32 = 6;
/// Failure limit for every produced id to be ACCEPTed once the faults are over: past a
/// fencing, a lock expiry and a request timeout or two.
const FINISH_DEADLINE: Duration = Duration::from_secs(180);
/// Failure limit for one produce (its retries included) before the id is given up.
pub(super) const PRODUCE_DEADLINE: Duration = Duration::from_secs(120);

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

/// The consumers' configuration: explicit acknowledgement.
pub fn config(options: &Options, group: &str) -> kafka_share::ShareConsumerConfig {
    let bs = options.consumer_bootstrap.clone().unwrap_or_else(common::cluster_bootstrap);
    let mut cfg = common::consumer_config(&bs, group).acknowledgement_mode(AcknowledgementMode::Explicit);
    if let Some(t) = options.request_timeout {
        cfg = cfg.request_timeout(t);
    }
    cfg
}
