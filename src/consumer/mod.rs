//! The share consumer: [`ShareConsumer`].
//!
//! # Behaviour
//! - [`ShareConsumer::connect`] checks the cluster (share groups enabled, versions) and starts
//!   a background driver task; the first [`poll`](ShareConsumer::poll) after
//!   [`subscribe`](ShareConsumer::subscribe) joins the group.
//! - The driver heartbeats at the interval the broker sets, keeps one share session per
//!   leader broker, and acquires records only while the application takes them: for a poll,
//!   plus (in `batch_optimized` mode) one refill per poll, no more than the application takes
//!   in about 250 ms. In `record_limit` mode it fetches only for a poll and never more than
//!   `max.poll.records`. When the application stops polling, the consumer fetches nothing and
//!   gives what it had buffered back to the group after a quarter of the acquisition lock, so
//!   other members get those records without a wasted delivery attempt.
//! - `poll(Duration::ZERO)` returns what is buffered at once (perhaps nothing) and asks for a
//!   fetch; a later poll gets its records.
//! - Acknowledgements are recorded locally and sent with the next poll (piggybacked on the
//!   next ShareFetch to the broker that delivered the records), or at once by
//!   [`commit_sync`](ShareConsumer::commit_sync) / [`commit_async`](ShareConsumer::commit_async).
//!
//! # Delivery semantics
//! At least once. A record is held under an acquisition lock from the moment the broker
//! hands it out; if it is not acknowledged before the lock expires, it is delivered again
//! (to any member) with a higher delivery count. Acknowledging a delivery whose lock has
//! lapsed fails with [`Error::LockExpired`] (per partition in the commit results), never
//! applies to a newer delivery of the same record. `close` releases what was not acknowledged,
//! in both modes (as the Java client does): call `commit_sync` first to accept the last
//! poll's records in implicit mode.

mod busy;
mod callback;
mod config;
pub(crate) mod driver;
pub(crate) mod held;
pub(crate) mod metrics;
mod pattern;
mod raw;
mod record;
mod stream;
mod wakeup;

pub mod blocking;

use std::collections::BTreeSet;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{mpsc, oneshot};

pub use crate::acquire_mode::AcquireMode;
pub use crate::metrics::{HistogramSnapshot, MetricsSnapshot};
pub use callback::AckCallback;
pub use config::{AcknowledgementMode, ShareConsumerConfig};
pub use driver::CommitResults;
pub use metrics::{CONSUMER, COORDINATOR, FETCH_MANAGER};
pub use record::{ConsumerRecord, Header, TimestampType, TopicPartition};
pub use wakeup::WakeupHandle;

pub use crate::share::acks::AcknowledgeType;

use crate::cluster::Cluster;
use crate::config::Properties;
use crate::error::{Error, Result};
pub(crate) use busy::BusyGuard;
use driver::{Command, Driver, FromHandle, Shared};
use held::*;

/// Default `close` timeout, as Java's (30 s).
pub const DEFAULT_CLOSE_TIMEOUT: Duration = Duration::from_secs(30);

/// Tells consumers apart, so that a record can tell whether it is held by this one.
static NEXT_CONSUMER_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Default)]
struct Local {
    /// What this consumer handed out and has not acknowledged-and-sent yet (see [`Held`]).
    held: Held,
    subscription: BTreeSet<String>,
    /// The pattern subscribed to, if any (`subscription` is then empty; see `pattern.rs`).
    pattern: Option<Arc<driver::topic_pattern::PatternSubscription>>,
    /// A subscription change the driver has not heard of yet (sent by the next poll).
    subscription_pending: bool,
    /// Partitions the application paused.
    paused: BTreeSet<TopicPartition>,
}

/// A share-group consumer, like Java's `KafkaShareConsumer`.
///
/// Methods take `&self`, so an `Arc<ShareConsumer>` can be shared with worker tasks that
/// acknowledge records while the main task polls (see `examples/concurrent_workers.rs`).
pub struct ShareConsumer {
    tx: mpsc::UnboundedSender<FromHandle>,
    shared: Arc<Shared>,
    cfg: ShareConsumerConfig,
    /// Tags this consumer's poll batches (see [`PollBatch`]).
    id: u64,
    local: Mutex<Local>,
    /// Set (under the `local` lock) by `close` and drop; read without it by `acknowledge`.
    closed: AtomicBool,
    /// Set while a poll runs (see `PollingGuard`).
    polling: AtomicBool,
    wakeup: WakeupHandle,
}

impl std::fmt::Debug for ShareConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShareConsumer").field("group_id", &self.cfg.group_id).finish()
    }
}

impl ShareConsumer {
    /// Connects and starts the background driver. Fails early, with a clear error, when the
    /// config is invalid, no broker answers, or share groups are off on the cluster.
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect(cfg: ShareConsumerConfig) -> Result<ShareConsumer> {
        ShareConsumer::connect_config(cfg).await
    }

    /// Connects to `bootstrap` (`host:port[,host:port]`) as a member of share group `group`,
    /// with default settings (implicit acknowledgement), as
    /// [`Admin::connect_to`](crate::admin::Admin::connect_to).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn connect_to(bootstrap: &str, group: &str) -> Result<ShareConsumer> {
        ShareConsumer::connect(ShareConsumerConfig::new(bootstrap, group)).await
    }

    async fn connect_config(cfg: ShareConsumerConfig) -> Result<ShareConsumer> {
        cfg.validate()?;
        let cluster = Cluster::connect(cfg.cluster.clone()).await?;
        let conn = cluster.any_broker().await?;
        conn.versions.require_share_groups()?;
        conn.versions.pick(crate::protocol::share::SHARE_FETCH_API_KEY, 1, 2)?;
        conn.versions.pick(crate::protocol::share::SHARE_GROUP_HEARTBEAT_API_KEY, 1, 1)?;
        let renew = conn.versions.pick(crate::protocol::share::SHARE_ACKNOWLEDGE_API_KEY, 2, 2).is_ok();
        if cfg.acquire_mode == AcquireMode::RecordLimit
            && conn.versions.pick(crate::protocol::share::SHARE_FETCH_API_KEY, 2, 2).is_err()
        {
            return Err(Error::AcquireModeUnsupported { mode: cfg.acquire_mode, broker: None });
        }
        let record_limit = conn.versions.pick(crate::protocol::share::SHARE_FETCH_API_KEY, 2, 2).is_ok();
        let shared = Arc::new(Shared::new(renew, Some(cluster.network_stats())));
        shared.record_limit_supported.store(record_limit, Ordering::Relaxed);
        let tx = Driver::spawn(cluster, cfg.clone(), shared.clone());
        Ok(ShareConsumer::new(tx, shared, cfg))
    }

    fn new(tx: mpsc::UnboundedSender<FromHandle>, shared: Arc<Shared>, cfg: ShareConsumerConfig) -> ShareConsumer {
        ShareConsumer {
            tx,
            shared,
            cfg,
            id: NEXT_CONSUMER_ID.fetch_add(1, Ordering::Relaxed),
            local: Mutex::new(Local::default()),
            closed: AtomicBool::new(false),
            polling: AtomicBool::new(false),
            wakeup: WakeupHandle::default(),
        }
    }

    /// Connects with Java-named properties (see [`ShareConsumerConfig::from_properties`]).
    ///
    /// # Cancel safety
    /// Cancel-safe: dropping the future closes the connections it opened; nothing was started.
    pub async fn from_properties(p: &Properties) -> Result<ShareConsumer> {
        ShareConsumer::connect(ShareConsumerConfig::from_properties(p)?).await
    }

    /// The settings in use.
    pub fn config(&self) -> &ShareConsumerConfig {
        &self.cfg
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Local> {
        self.local.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn send(&self, msg: impl Into<FromHandle>) -> Result<()> {
        self.tx.send(msg.into()).map_err(|_| Error::Closed)
    }

    /// Subscribes to `topics`, replacing any earlier subscription (names or
    /// [pattern](Self::subscribe_pattern)). An empty list unsubscribes.
    ///
    /// Each name is checked as Kafka checks topic names (ASCII letters, digits, '.', '_' and
    /// '-'; at most 249 characters; not "." or ".."): [`Error::InvalidTopic`] names the first
    /// that breaks a rule, and the subscription is left as it was. A topic the broker refuses
    /// later (not authorized, invalid) is reported by the next [`poll`](Self::poll).
    pub fn subscribe<I, S>(&self, topics: I) -> Result<()>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        callback::refuse_reentry()?;
        let topics: BTreeSet<String> = topics.into_iter().map(Into::into).collect();
        for t in &topics {
            crate::topic_name::validate_topic_name(t)?;
        }
        let mut local = self.lock();
        if self.is_closed() {
            return Err(Error::Closed);
        }
        local.subscription = topics.clone();
        local.pattern = None;
        if topics.is_empty() {
            // Unsubscribing leaves the group now.
            local.subscription_pending = false;
            drop(local);
            return self.send(Command::Subscribe(Vec::new()));
        }
        // As in Java, the group is joined (or the new subscription sent) by the next poll.
        local.subscription_pending = true;
        Ok(())
    }

    /// Leaves the group (records held are released when the session closes) and drops the
    /// subscription, topic names or pattern.
    pub fn unsubscribe(&self) -> Result<()> {
        self.subscribe(Vec::<String>::new())
    }

    /// The current subscription: the topics subscribed to by name, or those the
    /// [pattern](Self::subscribe_pattern) matched in the last listing.
    pub fn subscription(&self) -> BTreeSet<String> {
        let local = self.lock();
        local.pattern.as_ref().map_or_else(|| local.subscription.clone(), |p| p.matched())
    }

    /// Stops fetching from `partitions` until [`resume`](Self::resume) (franz-go's
    /// `PauseFetchPartitions`; Java's share consumer has no pause). Records this consumer
    /// already handed out stay held under their locks, to be acknowledged as usual; records
    /// fetched but not handed out yet go back to the group at once, so other members take
    /// them; no new ones are acquired. A partition not assigned (yet) is paused once it is.
    /// Takes effect with the next fetch; pausing twice is the same as once.
    pub fn pause<I>(&self, partitions: I) -> Result<()>
    where
        I: IntoIterator<Item = TopicPartition>,
    {
        self.set_paused(|paused| paused.extend(partitions))
    }

    /// Fetches again from `partitions` (see [`pause`](Self::pause)); resuming a partition that
    /// is not paused does nothing.
    pub fn resume<I>(&self, partitions: I) -> Result<()>
    where
        I: IntoIterator<Item = TopicPartition>,
    {
        self.set_paused(|paused| {
            for tp in partitions {
                paused.remove(&tp);
            }
        })
    }

    /// The partitions paused now.
    pub fn paused(&self) -> BTreeSet<TopicPartition> {
        self.lock().paused.clone()
    }

    fn set_paused(&self, change: impl FnOnce(&mut BTreeSet<TopicPartition>)) -> Result<()> {
        callback::refuse_reentry()?;
        let mut local = self.lock();
        if self.is_closed() {
            return Err(Error::Closed);
        }
        change(&mut local.paused);
        self.send(Command::Paused(local.paused.iter().cloned().collect()))
    }

    /// Fetches records, waiting up to `timeout` for some. Sends the acknowledgements made since
    /// the last poll (implicit mode: accepts every record of the last poll first).
    ///
    /// Errors: [`Error::Wakeup`] after [`wakeup`](Self::wakeup);
    /// [`Error::UnacknowledgedRecords`] in explicit mode while records of the last poll are
    /// unacknowledged; [`Error::NotSubscribed`] with no subscription; a fatal group error
    /// (authorization, ...) once it happened.
    ///
    /// A subscribed topic the broker refuses ([`Error::TopicAuthorizationFailed`],
    /// [`Error::InvalidTopic`]) is reported once, by the next poll, as Java's poll throws
    /// `TopicAuthorizationException` once per metadata answer; the consumer goes on with the
    /// other topics. It is reported again after a new `subscribe` that still names it, or if
    /// the broker refuses it again after having accepted it. A topic that does not exist
    /// yet is no error: its records come once it is created.
    ///
    /// One poll at a time: a poll started while another runs on the same consumer fails at
    /// once with [`Error::ConcurrentPoll`].
    ///
    /// # Cancel safety
    /// Cancel-safe. Dropping the future (a `select!` arm that lost, a `timeout`) loses no
    /// record: records the driver had handed over go back to the front of the buffer and come
    /// out of the next poll, with their locks running. The acknowledgements the poll took were
    /// already given to the driver before its first await, so they are sent either way.
    pub async fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        callback::refuse_reentry()?;
        // One poll at a time: a second one would race the first for the same records.
        let _polling = PollingGuard::enter(&self.polling)?;
        self.shared.callbacks.run();
        if self.wakeup.take() {
            return Err(Error::Wakeup);
        }
        let (acks, renewing) = {
            let mut local = self.lock();
            self.ready_to_poll(&mut local)?;
            local.held.start_poll(self.cfg.acknowledgement_mode)?
        };
        let (reply, rx) = oneshot::channel();
        let wait = !timeout.is_zero();
        self.send(FromHandle::Poll { max: self.cfg.max_poll_records, wait, renewing, acks, reply })?;
        // From here the future may be dropped at any await: the guard then gives back to the
        // driver whatever it handed over (see `PollReply`). Nothing above awaits.
        let mut rx = PollReply { rx, tx: &self.tx };
        if !wait {
            // The driver answers at once with what is buffered: no race with a timer.
            let answer = (&mut rx.rx).await.unwrap_or(Err(Error::Closed))?;
            let records = self.hand_out(answer);
            self.shared.callbacks.run();
            return Ok(records);
        }
        let mut woken = false;
        let result = tokio::select! {
            r = &mut rx.rx => r.unwrap_or(Err(Error::Closed)),
            _ = tokio::time::sleep(timeout) => late(&mut rx.rx),
            _ = self.wakeup.woken() => { woken = true; late(&mut rx.rx) }
        };
        let answer = result?;
        if woken && answer.is_empty() {
            self.wakeup.take();
            return Err(Error::Wakeup);
        }
        let records = self.hand_out(answer);
        self.shared.callbacks.run();
        Ok(records)
    }

    /// What every poll checks and sends first, under the lock: not closed, subscribed, and a
    /// subscription the driver has not heard of yet sent (as Java, the group is joined or
    /// the new subscription sent by the next poll).
    fn ready_to_poll(&self, local: &mut Local) -> Result<()> {
        if self.is_closed() {
            return Err(Error::Closed);
        }
        if local.subscription.is_empty() && local.pattern.is_none() {
            return Err(Error::NotSubscribed);
        }
        if local.subscription_pending {
            local.subscription_pending = false;
            self.send(match &local.pattern {
                Some(p) => Command::SubscribePattern(p.clone()),
                None => Command::Subscribe(local.subscription.iter().cloned().collect()),
            })?;
        }
        Ok(())
    }

    /// Holds and returns a poll's records: the renewed ones first (a record whose renewal
    /// failed is not returned: its lock is gone, and the callback and commit results say
    /// why), then the new ones.
    fn hand_out(&self, answer: driver::PollAnswer) -> Vec<ConsumerRecord> {
        self.lock().held.hand_out(self.id, answer)
    }

    /// Accepts a record (explicit mode), as Java's `acknowledge(record)`.
    pub fn acknowledge(&self, record: &ConsumerRecord) -> Result<()> {
        self.acknowledge_with(record, AcknowledgeType::Accept)
    }

    /// Acknowledges a record with `ack_type` (explicit mode).
    pub fn acknowledge_with(&self, record: &ConsumerRecord, ack_type: AcknowledgeType) -> Result<()> {
        self.check_acknowledge(ack_type)?;
        // The fast path: one compare-and-swap on the record's slot in its poll batch, no lock
        // (see `acknowledge_in_slot`). A record without a slot of this consumer (another
        // consumer's, one built by hand) is looked up by its coordinates, exactly as
        // `acknowledge_offset` does.
        if let Some(done) = acknowledge_in_slot(self.id, record, ack_type) {
            return done;
        }
        if ack_type == AcknowledgeType::Renew {
            return Err(renew_needs_the_record(&record.topic, record.partition, record.offset));
        }
        self.acknowledge_held(&record.topic, record.partition, record.offset, ack_type)
    }

    /// Acknowledges every record of earlier polls that is not acknowledged yet with `ack_type`
    /// (explicit mode), e.g. RELEASE them all on shutdown, or REJECT a batch that cannot be
    /// processed. Records already acknowledged keep their acknowledgement. Returns how many
    /// records it acknowledged. RENEW is refused here: renew each record with
    /// [`acknowledge_with`](Self::acknowledge_with).
    pub fn acknowledge_all(&self, ack_type: AcknowledgeType) -> Result<usize> {
        self.check_acknowledge(ack_type)?;
        if ack_type == AcknowledgeType::Renew {
            return Err(Error::InvalidArgument(
                "acknowledge_all cannot RENEW: a renewed record is handed out again, so renew each with acknowledge_with(&record, AcknowledgeType::Renew)".into(),
            ));
        }
        let local = self.lock();
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(local.held.acknowledge_unacknowledged(ack_type))
    }

    /// Acknowledges by topic, partition and offset (explicit mode), e.g. for a record that
    /// failed to deserialize in your code. RENEW needs the record itself
    /// ([`acknowledge_with`](Self::acknowledge_with)): a renewed record is handed out again.
    pub fn acknowledge_offset(
        &self,
        topic: &str,
        partition: i32,
        offset: i64,
        ack_type: AcknowledgeType,
    ) -> Result<()> {
        self.check_acknowledge(ack_type)?;
        if ack_type == AcknowledgeType::Renew {
            return Err(renew_needs_the_record(topic, partition, offset));
        }
        self.acknowledge_held(topic, partition, offset, ack_type)
    }

    /// The checks every acknowledgement passes first: mode, RENEW support, closed.
    fn check_acknowledge(&self, ack_type: AcknowledgeType) -> Result<()> {
        callback::refuse_reentry()?;
        if self.cfg.acknowledgement_mode == AcknowledgementMode::Implicit {
            return Err(Error::ImplicitAcknowledgement);
        }
        if ack_type == AcknowledgeType::Renew && !self.shared.renew_supported.load(Ordering::Relaxed) {
            return Err(Error::RenewUnsupported);
        }
        if self.is_closed() {
            return Err(Error::Closed);
        }
        Ok(())
    }

    /// Acknowledges the record this consumer holds at these coordinates, if any. The slow
    /// path: under the lock (so no slot is taken or superseded meanwhile), a scan of the held
    /// batches (few: usually the last poll's).
    fn acknowledge_held(&self, topic: &str, partition: i32, offset: i64, ack_type: AcknowledgeType) -> Result<()> {
        let local = self.lock();
        if self.is_closed() {
            return Err(Error::Closed);
        }
        local.held.acknowledge_at(topic, partition, offset, ack_type)
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// What a poll or commit does with the records not acknowledged.
    fn unacknowledged_on_poll(&self) -> Unacked {
        Unacked::on_poll(self.cfg.acknowledgement_mode)
    }

    /// Sends every pending acknowledgement now and waits for the results, per partition,
    /// up to `timeout` (`None`: `default.api.timeout.ms`, 60 s by default, as Java's
    /// `commitSync()`). Implicit mode: first accepts every record of the last poll.
    ///
    /// A partition whose records' locks expired reports INVALID_RECORD_STATE (final, never
    /// retried); acknowledgements the broker could not apply *yet* (its share coordinator
    /// loading) are retried until `default.api.timeout.ms`; one whose first attempt may have
    /// been applied reports [`Error::OutcomeUnknown`].
    ///
    /// # Cancel safety
    /// Cancel-safe: the acknowledgements were handed to the driver before the first await,
    /// so they are sent whether or not the future is polled to the end; their results then
    /// reach the acknowledgement commit callback (if set) on the next call.
    pub async fn commit_sync(&self, timeout: impl Into<Option<Duration>>) -> Result<CommitResults> {
        let timeout = timeout.into().unwrap_or(self.cfg.default_api_timeout);
        let rx = self.start_commit()?;
        // The application waits here, however long the broker holds the answer: its
        // buffered records stay buffered for the poll that follows.
        let _busy = self.busy_guard();
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => {
                self.shared.callbacks.run();
                Ok(r)
            }
            Ok(Err(_)) => Err(Error::Closed),
            Err(_) => Err(Error::Timeout { what: "commit_sync".into(), after: timeout }),
        }
    }

    /// Like `commit_sync`, but returns at once: the acknowledgements leave now. Await the
    /// returned handle for the per-partition results, or drop it and read them in the
    /// acknowledgement commit callback (as with Java's `commitAsync`).
    pub fn commit_async(&self) -> Result<CommitHandle> {
        Ok(CommitHandle { rx: self.start_commit()?, shared: self.shared.clone() })
    }

    /// Marks the application as inside a consumer call that waits until the guard is dropped
    /// (see [`BusyGuard`]): the driver then does not take the missing polls for an
    /// application that stopped. The guard owns a sender, so it may outlive this borrow.
    pub(crate) fn busy_guard(&self) -> BusyGuard {
        BusyGuard::enter(self.tx.clone())
    }

    fn start_commit(&self) -> Result<oneshot::Receiver<CommitResults>> {
        callback::refuse_reentry()?;
        self.shared.callbacks.run();
        let acks = {
            let mut local = self.lock();
            if self.is_closed() {
                return Err(Error::Closed);
            }
            local.held.take_acks(self.unacknowledged_on_poll())
        };
        let (reply, rx) = oneshot::channel();
        self.send(FromHandle::Commit { acks, reply })?;
        Ok(rx)
    }

    /// Sets the callback told of every completed acknowledgement (partition, offsets,
    /// result), as Java's `setAcknowledgementCommitCallback`.
    ///
    /// It reports the application's acknowledgements only: those of records a poll returned
    /// (explicit `acknowledge*` calls, or the implicit ACCEPTs of implicit mode). Records the
    /// consumer fetched ahead and gives back without ever returning them are never in it, nor
    /// in a commit's results: the RELEASEs of what was buffered when the application stopped
    /// polling for a quarter of the lock (counted by the metric
    /// `records-released-unseen-total`), at [`close`](Self::close), after `max.poll.interval.ms`,
    /// or when their partition was paused or revoked. Java's `KafkaShareConsumer` never
    /// acknowledges records it did not return, so its callback has none of them either.
    ///
    /// As in Java, it runs on the application's side: inside [`poll`](Self::poll),
    /// [`commit_sync`](Self::commit_sync), [`commit_async`](Self::commit_async) (for earlier
    /// completions; the returned handle, when awaited, for its own) and [`close`](Self::close),
    /// on the task that calls them, never on the background task. A panic in it is caught and
    /// logged and the consumer goes on. Calling the consumer from inside it fails with
    /// [`Error::CalledFromCallback`].
    pub fn set_acknowledgement_commit_callback<F>(&self, callback: F) -> Result<()>
    where
        F: Fn(&TopicPartition, &[i64], &Result<()>) + Send + Sync + 'static,
    {
        callback::refuse_reentry()?;
        self.shared.callbacks.set(Some(std::sync::Arc::new(callback)));
        Ok(())
    }

    /// Removes the acknowledgement commit callback.
    pub fn clear_acknowledgement_commit_callback(&self) -> Result<()> {
        callback::refuse_reentry()?;
        self.shared.callbacks.set(None);
        Ok(())
    }

    /// The acquisition lock duration the broker reported (None before the first fetch).
    pub fn acquisition_lock_timeout(&self) -> Option<Duration> {
        let ms = self.shared.acquisition_lock_timeout_ms.load(Ordering::Relaxed);
        (ms >= 0).then(|| Duration::from_millis(ms as u64))
    }

    /// The open share sessions: broker node id -> the epoch the next request will carry.
    /// One session per broker this consumer fetches from. (Feature `unstable-internals`.)
    #[cfg(feature = "unstable-internals")]
    pub fn share_sessions(&self) -> std::collections::BTreeMap<i32, i32> {
        self.shared.sessions.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Metrics under the Java names, and the share-fetch latency as a histogram
    /// ([`MetricsSnapshot::histogram`]`(FETCH_MANAGER, "fetch-latency")`).
    pub fn metrics(&self) -> MetricsSnapshot {
        let mut s = self.shared.metrics.snapshot();
        if let Some(n) = &self.shared.network {
            metrics::add_network(&mut s, n);
        }
        s
    }

    /// Makes the pending (or next) poll return [`Error::Wakeup`].
    pub fn wakeup(&self) {
        self.wakeup.wakeup();
    }

    /// A handle to call [`wakeup`](WakeupHandle::wakeup) from another thread or task.
    pub fn wakeup_handle(&self) -> WakeupHandle {
        self.wakeup.clone()
    }

    /// Closes the consumer within `timeout` (`None`: 30 s, as Java's `close()`): stops
    /// fetching, sends the acknowledgements made so far, releases every other record it holds
    /// (so other members get them at once), closes each share session (epoch -1), and leaves
    /// the group. A close that runs out of time fails with [`Error::Timeout`] saying what it
    /// could not finish; the consumer is closed either way.
    ///
    /// # Cancel safety
    /// Cancel-safe: once called, the consumer is closed and the driver finishes the close in
    /// the background (within the timeout) whether or not the future is awaited to the end.
    pub async fn close(&self, timeout: impl Into<Option<Duration>>) -> Result<()> {
        let timeout = timeout.into().unwrap_or(DEFAULT_CLOSE_TIMEOUT);
        callback::refuse_reentry()?;
        let acks = {
            let mut local = self.lock();
            if self.is_closed() {
                return Ok(());
            }
            self.closed.store(true, Ordering::Release);
            local.held.take_acks(Unacked::ReleaseAll)
        };
        self.send_close(acks, timeout).await
    }

    /// Sends the close with its final `acks` (the consumer is marked closed already) and
    /// waits up to `timeout` for the driver to finish it.
    async fn send_close(&self, acks: Vec<driver::AckEntry>, timeout: Duration) -> Result<()> {
        let (reply, rx) = oneshot::channel();
        let deadline = Instant::now() + timeout;
        self.send(FromHandle::Close { acks, deadline, reply })?;
        let outcome = tokio::time::timeout(timeout + Duration::from_millis(100), rx).await;
        // The last completions (the final acknowledgements) reach the callback now.
        self.shared.callbacks.run();
        match outcome {
            // The driver says what it could not finish; the limit is the caller's.
            Ok(Ok(Err(Error::Timeout { what, .. }))) => Err(Error::Timeout { what, after: timeout }),
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Ok(()),
            Err(_) => Err(Error::Timeout { what: "close".into(), after: timeout }),
        }
    }
}

impl Drop for ShareConsumer {
    fn drop(&mut self) {
        let mut local = self.local.lock().unwrap_or_else(|p| p.into_inner());
        if self.is_closed() {
            return;
        }
        self.closed.store(true, Ordering::Release);
        tracing::warn!(
            group = self.cfg.group_id,
            "ShareConsumer dropped without close(): releasing its records in the background"
        );
        let acks = local.held.take_acks(Unacked::ReleaseAll);
        let _ = self
            .tx
            .send(Command::Close { acks, deadline: Instant::now() + Duration::from_secs(5), id: None }.into());
    }
}

/// The results of a [`ShareConsumer::commit_async`]: await it (it is `IntoFuture`) for the
/// per-partition results, or drop it; the acknowledgements were sent either way.
pub struct CommitHandle {
    rx: oneshot::Receiver<CommitResults>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for CommitHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CommitHandle").finish_non_exhaustive()
    }
}

impl std::future::IntoFuture for CommitHandle {
    type Output = Result<CommitResults>;
    type IntoFuture = std::pin::Pin<Box<dyn Future<Output = Result<CommitResults>> + Send>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(async move {
            let results = self.rx.await.map_err(|_| Error::Closed)?;
            // Its completions reach the callback here, on the awaiting task (as in Java).
            self.shared.callbacks.run();
            Ok(results)
        })
    }
}

/// The error for a RENEW without the record (by coordinates, or a record of another consumer).
fn renew_needs_the_record(topic: &str, partition: i32, offset: i64) -> Error {
    Error::InvalidArgument(format!(
        "RENEW {topic}-{partition} offset {offset}: renew with acknowledge_with(&record, AcknowledgeType::Renew), passing a record this consumer's poll returned (the renewed record is returned again by a later poll)"
    ))
}

/// The driver's answer to a poll, given back if the poll's future is dropped before taking it.
///
/// Dropping a poll (a `select!` arm that lost, a `timeout`) must not strand records: the
/// broker counts them as acquired by this member, so lost ones would come back only when their
/// lock expires, with a delivery attempt burnt. On drop the channel is closed (from then on
/// the driver's send fails and it keeps the records itself) and anything already sent is sent
/// back with `Command::Requeue`, to the front of the buffer.
struct PollReply<'a> {
    rx: oneshot::Receiver<Result<driver::PollAnswer>>,
    tx: &'a mpsc::UnboundedSender<FromHandle>,
}

impl Drop for PollReply<'_> {
    fn drop(&mut self) {
        self.rx.close();
        if let Ok(Ok(back)) = self.rx.try_recv() {
            if !back.is_empty() {
                let _ = self.tx.send(Command::Requeue(back).into());
            }
        }
    }
}

/// Marks a poll in progress; a second concurrent poll gets a clear error.
struct PollingGuard<'a>(&'a AtomicBool);

impl<'a> PollingGuard<'a> {
    fn enter(flag: &'a AtomicBool) -> Result<PollingGuard<'a>> {
        if flag.swap(true, Ordering::AcqRel) {
            return Err(Error::ConcurrentPoll);
        }
        Ok(PollingGuard(flag))
    }
}

impl Drop for PollingGuard<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The answer of a poll that gave up (timeout or wakeup): whatever the driver sent in the
/// meantime is taken, never dropped.
fn late(rx: &mut oneshot::Receiver<Result<driver::PollAnswer>>) -> Result<driver::PollAnswer> {
    rx.close();
    match rx.try_recv() {
        Ok(r) => r,
        Err(_) => Ok(driver::PollAnswer::default()),
    }
}
