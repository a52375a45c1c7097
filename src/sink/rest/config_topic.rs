//! Distributed mode: the connector configurations in a compacted Kafka topic (the worker
//! setting `config.storage.topic`, as Connect's distributed workers keep them) instead of
//! a file. Every worker on the topic follows it from its start and applies each record to
//! its own connectors (start, reconfigure, pause, stop, delete); a REST call on any worker
//! writes a record and answers once this worker has applied it, so the answer (and a
//! `GET` right after it) shows the change.
//!
//! The topic has one partition, so every worker applies the changes in the same order.
//! The worker creates it when missing (`cleanup.policy=compact`, one partition,
//! `config.storage.replication.factor`). Records are in Connect's format
//! ([`config_records`](super::config_records)).

use std::collections::BTreeMap;
use std::sync::{Mutex, Weak};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config_records::{decode, ConfigRecord};
use super::error::RestError;
use super::herder::Herder;
use super::store::TargetState;
use crate::admin::{Admin, NewTopic, OffsetSpec, TopicPartition};
use crate::backoff::Backoff;
use crate::config::Properties;
use crate::error::{Error, ErrorCode, Result};
use crate::producer::{Producer, ProducerRecord};
use crate::sink::Worker;

/// How long a follower's Fetch waits at the broker for a new record. A record ends the
/// wait at once, so this bounds only the idle polling (a Fetch per worker every 5 s).
const POLL_WAIT: Duration = Duration::from_secs(5);

/// How long a REST call waits for this worker to read back what it wrote.
const PUBLISH_WAIT: Duration = Duration::from_secs(30);

/// How long a starting worker waits to read the topic up to its end.
const CATCH_UP_WAIT: Duration = Duration::from_secs(60);

/// Where a distributed worker keeps connector configurations: the worker settings
/// `config.storage.topic` and `config.storage.replication.factor`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigTopic {
    topic: String,
    replication_factor: i16,
}

impl ConfigTopic {
    /// The topic `topic`, created (when missing) with the cluster's default replication factor.
    pub fn new(topic: impl Into<String>) -> ConfigTopic {
        ConfigTopic { topic: topic.into(), replication_factor: -1 }
    }

    /// The replication factor the topic is created with (-1: the cluster's default).
    pub fn replication_factor(mut self, rf: i16) -> ConfigTopic {
        self.replication_factor = rf;
        self
    }

    /// The topic's name.
    pub fn topic(&self) -> &str {
        &self.topic
    }

    /// From a worker properties file: `None` without `config.storage.topic` (standalone).
    ///
    /// # Errors
    /// [`Error::Config`] saying what to change: `config.storage.topic` with
    /// `config.storage.file.filename` (give one), without `bootstrap.servers`, or a
    /// `config.storage.replication.factor` that is not -1 or 1..=32767.
    pub fn from_worker_properties(p: &Properties) -> Result<Option<ConfigTopic>> {
        let Some(topic) = p.get("config.storage.topic").map(str::trim).filter(|t| !t.is_empty()) else {
            return Ok(None);
        };
        if p.get("config.storage.file.filename").is_some_and(|f| !f.trim().is_empty()) {
            return Err(Error::config(
                "config.storage.topic",
                "given with config.storage.file.filename: keep connectors in a topic (distributed, \
                 several workers) or in a file (one worker); remove one of the two settings",
            ));
        }
        if p.get("bootstrap.servers").is_none_or(|b| b.trim().is_empty()) {
            return Err(Error::config(
                "config.storage.topic",
                "needs bootstrap.servers: the config topic lives on the cluster; add bootstrap.servers=HOST:PORT",
            ));
        }
        crate::topic_name::validate_topic_name(topic)
            .map_err(|why| Error::config("config.storage.topic", format!("{why}; name a legal topic")))?;
        let rf = match p.get("config.storage.replication.factor").map(str::trim) {
            None | Some("") => -1,
            Some(v) => match v.parse::<i16>() {
                Ok(n) if n == -1 || n >= 1 => n,
                _ => {
                    return Err(Error::config(
                        "config.storage.replication.factor",
                        format!("{v:?}: give the number of replicas (1 or more), or -1 for the cluster's default"),
                    ))
                }
            },
        };
        Ok(Some(ConfigTopic::new(topic).replication_factor(rf)))
    }
}

/// A herder's link to its config topic: the producer that writes changes, how far this
/// worker has applied the topic, and the task that follows it.
pub(crate) struct Distributed {
    topic: String,
    producer: Producer,
    admin: Admin,
    applied: watch::Receiver<i64>,
    feed: Mutex<Option<watch::Sender<i64>>>,
    follower: Mutex<Option<JoinHandle<()>>>,
    /// Target states read before their connector's configuration (Connect writes a new
    /// connector's `initial_state` first).
    pending: Mutex<BTreeMap<String, TargetState>>,
}

impl std::fmt::Debug for Distributed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Distributed").field("topic", &self.topic).finish_non_exhaustive()
    }
}

impl Drop for Distributed {
    fn drop(&mut self) {
        self.stop_following();
    }
}

fn tp(topic: &str) -> TopicPartition {
    TopicPartition::new(topic, 0)
}

impl Distributed {
    /// Connects to the worker's cluster and creates the topic when missing.
    pub(crate) async fn connect(worker: &Worker, topic: &ConfigTopic) -> Result<Distributed> {
        let admin = Admin::connect(Admin::config_from_properties(&worker.config().admin_properties())?).await?;
        let new = NewTopic::new(topic.topic.clone(), 1)
            .replication_factor(topic.replication_factor)
            .config("cleanup.policy", "compact");
        match admin.create_topics(&[new]).await?.pop() {
            Some(Err(e)) if e.code() != Some(ErrorCode::TOPIC_ALREADY_EXISTS) => {
                return Err(Error::config(
                    "config.storage.topic",
                    format!(
                        "cannot create {}: {e}; create it yourself (one partition, cleanup.policy=compact) \
                         or check config.storage.replication.factor",
                        topic.topic
                    ),
                ))
            }
            _ => {}
        }
        let mut props = worker.config().producer_properties();
        // A change is answered only once it is on every in-sync replica.
        props.set("acks", "all");
        let producer = Producer::from_properties(&props).await?;
        let (feed, applied) = watch::channel(0);
        Ok(Distributed {
            topic: topic.topic.clone(),
            producer,
            admin,
            applied,
            feed: Mutex::new(Some(feed)),
            follower: Mutex::new(None),
            pending: Mutex::new(BTreeMap::new()),
        })
    }

    /// Starts following the topic for `herder` and waits until it has applied every record
    /// there was.
    pub(crate) async fn follow(&self, herder: Weak<Herder>) -> Result<()> {
        let end = self.admin.list_offsets(&[tp(&self.topic)], OffsetSpec::Latest).await?;
        let end = end.get(&tp(&self.topic)).and_then(|l| l.offset).unwrap_or(0);
        let feed = self.feed.lock().map_err(|_| poisoned())?.take();
        if let Some(feed) = feed {
            let task = tokio::spawn(follow(self.admin.clone(), self.topic.clone(), herder, feed, end));
            *self.follower.lock().map_err(|_| poisoned())? = Some(task);
        }
        self.wait_applied(end, CATCH_UP_WAIT)
            .await
            .map_err(|e| Error::config("config.storage.topic", e.to_string()))
    }

    pub(crate) fn stop_following(&self) {
        if let Ok(mut f) = self.follower.lock() {
            if let Some(task) = f.take() {
                task.abort();
            }
        }
    }

    /// Writes the records (key, value; `None` a tombstone) in order and waits until this
    /// worker has applied them.
    pub(crate) async fn publish(&self, records: Vec<(String, Option<Vec<u8>>)>) -> std::result::Result<(), RestError> {
        let mut last = -1;
        for (key, value) in records {
            let mut r = ProducerRecord::tombstone(self.topic.clone(), key).partition(0);
            r.value = value.map(Bytes::from);
            let sent = self.producer.send_and_wait(r).await.map_err(|e| self.error(e.to_string()))?;
            last = sent.offset;
        }
        self.wait_applied(last + 1, PUBLISH_WAIT).await
    }

    async fn wait_applied(&self, offset: i64, wait: Duration) -> std::result::Result<(), RestError> {
        let mut applied = self.applied.clone();
        let waited = tokio::time::timeout(wait, async { applied.wait_for(|a| *a >= offset).await.is_ok() }).await;
        match waited {
            Ok(true) => Ok(()),
            Ok(false) => Err(self.error("this worker stopped following it".to_string())),
            Err(_) => Err(self.error(format!(
                "this worker has not read it up to offset {offset} after {}s (at {})",
                wait.as_secs(),
                *self.applied.borrow()
            ))),
        }
    }

    fn error(&self, reason: String) -> RestError {
        RestError::ConfigTopic { topic: self.topic.clone(), reason }
    }

    /// A target state read for a connector not (yet) known: kept for its configuration.
    pub(crate) fn hold_target(&self, name: &str, state: Option<TargetState>) {
        if let Ok(mut p) = self.pending.lock() {
            match state {
                Some(s) => p.insert(name.to_string(), s),
                None => p.remove(name),
            };
        }
    }

    /// The target state held for a connector whose configuration just arrived.
    pub(crate) fn take_target(&self, name: &str) -> Option<TargetState> {
        self.pending.lock().ok().and_then(|mut p| p.remove(name))
    }
}

fn poisoned() -> Error {
    Error::config("config.storage.topic", "an earlier start of the follower panicked; restart the worker")
}

/// Reads the topic from its start, applying each record to the herder, until the herder is
/// gone. A broker error is logged and the read asked again after a backoff. A restart
/// request before `history_end` (the topic's end when this worker started) is history, not
/// applied (as Connect): the restart it asked for happened, before this worker ran anything,
/// and the compacted topic keeps the last one of each connector for ever.
async fn follow(admin: Admin, topic: String, herder: Weak<Herder>, applied: watch::Sender<i64>, history_end: i64) {
    let tp = tp(&topic);
    let mut offset = 0;
    let mut backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(5));
    loop {
        match admin.read_log(&tp, offset, POLL_WAIT).await {
            Ok(chunk) => {
                backoff.reset();
                for r in chunk.records {
                    let Some(h) = herder.upgrade() else { return };
                    match decode(r.key.as_deref(), r.value.as_deref()) {
                        Ok(ConfigRecord::Other(key)) => tracing::debug!(%topic, %key, "config record not used here"),
                        Ok(ConfigRecord::Restart { name, .. }) if r.offset < history_end => {
                            tracing::debug!(%topic, connector = %name, "a restart from before this worker started: history")
                        }
                        Ok(record) => h.apply(record).await,
                        Err(why) => tracing::warn!(%topic, offset = r.offset, "config record skipped: {why}"),
                    }
                }
                offset = chunk.next_offset;
                applied.send_replace(offset);
            }
            Err(e) => {
                tracing::warn!(%topic, offset, "reading the config topic: {e}; trying again");
                tokio::time::sleep(backoff.next_delay()).await;
            }
        }
        if herder.strong_count() == 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn props(pairs: &[(&str, &str)]) -> Properties {
        Properties::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn settings_are_read_and_refused_with_what_to_do() {
        assert_eq!(ConfigTopic::from_worker_properties(&props(&[("bootstrap.servers", "b:9092")])).unwrap(), None);
        let t = ConfigTopic::from_worker_properties(&props(&[
            ("bootstrap.servers", "b:9092"),
            ("config.storage.topic", "connect-configs"),
            ("config.storage.replication.factor", "3"),
        ]))
        .unwrap();
        assert_eq!(t, Some(ConfigTopic::new("connect-configs").replication_factor(3)));
        let e = ConfigTopic::from_worker_properties(&props(&[("config.storage.topic", "c")])).unwrap_err();
        assert!(e.to_string().contains("bootstrap.servers"), "{e}");
        let e = ConfigTopic::from_worker_properties(&props(&[
            ("bootstrap.servers", "b:9092"),
            ("config.storage.topic", "c"),
            ("config.storage.file.filename", "/tmp/c.json"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("remove one"), "{e}");
        for bad in ["0", "x", "-2"] {
            let e = ConfigTopic::from_worker_properties(&props(&[
                ("bootstrap.servers", "b:9092"),
                ("config.storage.topic", "c"),
                ("config.storage.replication.factor", bad),
            ]))
            .unwrap_err();
            assert!(e.to_string().contains("config.storage.replication.factor"), "{e}");
        }
        let e = ConfigTopic::from_worker_properties(&props(&[
            ("bootstrap.servers", "b:9092"),
            ("config.storage.topic", "a/b"),
        ]))
        .unwrap_err();
        assert!(e.to_string().contains("config.storage.topic"), "{e}");
    }
}
