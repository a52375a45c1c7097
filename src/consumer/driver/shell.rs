//! The driver's async shell: the only place that awaits. It owns the cluster connections, one
//! small task per request in flight, and the real clock; every decision is the core's.

use std::sync::Arc;
use std::time::Instant;

use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tracing::debug;

use super::{Command, DriverCore, Event, Shared, Transmit};
use crate::cluster::{Cluster, TrafficClass};
use crate::consumer::config::ShareConsumerConfig;
use crate::error::{Error, Result};
use crate::protocol::share::{SHARE_ACKNOWLEDGE_API_KEY, SHARE_FETCH_API_KEY};

/// The background task of one share consumer.
pub(crate) struct Driver {
    core: DriverCore,
    cluster: Arc<Cluster>,
    /// Requests in flight, each a task that ends in the event answering it.
    tasks: JoinSet<Event>,
}

impl Driver {
    /// Starts the driver task; returns the channel the public handle commands it through.
    pub(crate) fn spawn(
        cluster: Arc<Cluster>,
        cfg: ShareConsumerConfig,
        shared: Arc<Shared>,
    ) -> mpsc::UnboundedSender<Command> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (group, client) = (cfg.group_id.clone(), cfg.cluster.client_id.clone());
        let core = DriverCore::new(cfg, shared, cluster.clone());
        // Every event of this consumer's driver carries its group and member id.
        let span = tracing::info_span!("share_consumer", group = %group, member = %core.member_id(), client = %client);
        let driver = Driver { core, cluster, tasks: JoinSet::new() };
        tokio::spawn(tracing::Instrument::instrument(driver.run(rx), span));
        tx
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Command>) {
        let mut handle_gone = false;
        loop {
            let now = Instant::now();
            self.core.drive(now);
            while let Some(t) = self.core.poll_transmit() {
                self.send(t);
            }
            if self.core.is_finished(now) {
                break;
            }
            let wake = self.core.poll_timeout(now);
            tokio::select! {
                cmd = rx.recv(), if !handle_gone => match cmd {
                    Some(c) => self.core.handle_command(c, Instant::now()),
                    None => {
                        handle_gone = true;
                        self.core.handle_gone(Instant::now());
                    }
                },
                Some(done) = self.tasks.join_next(), if !self.tasks.is_empty() => {
                    if let Ok(ev) = done {
                        self.core.handle_event(ev, Instant::now());
                    }
                }
                _ = tokio::time::sleep_until(wake.into()) => {}
            }
        }
        self.tasks.abort_all();
        self.cluster.close();
        debug!("share consumer driver stopped");
    }

    /// Sends one request in a task of its own, which ends in the event answering it.
    fn send(&mut self, t: Transmit) {
        let cluster = self.cluster.clone();
        match t {
            Transmit::Metadata { topics } => {
                self.tasks.spawn(async move { Event::Metadata(cluster.refresh_metadata(&topics).await) });
            }
            Transmit::FindCoordinator { group } => {
                self.tasks
                    .spawn(async move { Event::Coordinator(cluster.find_group_coordinator_once(&group).await) });
            }
            Transmit::Heartbeat { node, request } => {
                self.tasks.spawn(async move {
                    let r = async {
                        let conn = cluster.broker(node, TrafficClass::Control).await?;
                        cluster.send(&conn, &request, (1, 1)).await
                    }
                    .await;
                    Event::Heartbeat(r)
                });
            }
            Transmit::Fetch { node, request, sent, sent_at } => {
                let timeout = cluster.config().request_timeout + self.core.fetch_max_wait();
                self.tasks.spawn(async move {
                    let result = async {
                        let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                        let v = conn.versions.pick(SHARE_FETCH_API_KEY, 1, 2)?;
                        if v < 2 && request.share_acquire_mode != 0 {
                            // record_limit, the only mode v1 lacks (connect checked the
                            // broker it asked; this one speaks less).
                            let mode = crate::consumer::AcquireMode::RecordLimit;
                            return Err(Error::AcquireModeUnsupported { mode, broker: Some(node) });
                        }
                        conn.conn.call_timeout(&request, v, timeout).await
                    }
                    .await;
                    Event::Fetch { node, sent, sent_at, result }
                });
            }
            Transmit::Acknowledge { node, request, sent } => {
                let timeout = cluster.config().request_timeout;
                self.tasks.spawn(async move {
                    let result: Result<_> = async {
                        // Same connection as the fetches: the broker ties a share session to
                        // the connection that opened it, and drops it when that connection
                        // closes.
                        let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                        let v = conn.versions.pick(SHARE_ACKNOWLEDGE_API_KEY, 1, 2)?;
                        conn.conn.call_timeout(&request, v, timeout).await
                    }
                    .await;
                    Event::Ack { node, sent, result }
                });
            }
            Transmit::ListTopics => {
                self.tasks.spawn(async move { Event::TopicList(cluster.list_topics().await) });
            }
        }
    }
}
