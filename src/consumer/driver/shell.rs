//! The driver's async shell: the only place that awaits. It owns the cluster connections, one
//! small task per request in flight, and the real clock; every decision is the core's.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use tokio::sync::mpsc;
use tokio::task::{Id, JoinError, JoinSet};
use tracing::{debug, warn};

use super::from_handle::{FromHandle, Waiting};
use super::{Command, DriverCore, Event, Shared, Transmit};
use crate::cluster::{Cluster, TrafficClass};
use crate::consumer::config::ShareConsumerConfig;
use crate::error::{Error, Result};
use crate::protocol::share::{
    ShareAcknowledgeResponse, ShareFetchResponse, SHARE_ACKNOWLEDGE_API_KEY, SHARE_FETCH_API_KEY,
    SHARE_GROUP_HEARTBEAT_API_KEY,
};
use crate::share::session::Sent;

/// The background task of one share consumer.
pub(crate) struct Driver {
    core: DriverCore,
    /// What the handle reads: the shell writes into it what the core outputs (`perform`).
    shared: Arc<Shared>,
    cluster: Arc<Cluster>,
    /// Requests in flight, each a task that ends in the broker's answer (or why none came).
    tasks: JoinSet<Reply>,
    /// What each task in `tasks` was sent for, by task id. The core counts its requests in
    /// flight (a session's one request, the heartbeat) and sends no other until it hears of
    /// each, so every task must end in an event: one that panics or is cancelled is answered
    /// from here as a lost request, which the core handles as a failed one.
    requests: HashMap<Id, Request>,
    /// The handle's senders for the commands the core has yet to answer, by reply id.
    waiting: Waiting,
    /// Request tasks a test makes panic.
    #[cfg(test)]
    faults: Arc<RequestPanics>,
}

impl Driver {
    /// Starts the driver task; returns the channel the public handle commands it through.
    pub(crate) fn spawn(
        cluster: Arc<Cluster>,
        cfg: ShareConsumerConfig,
        shared: Arc<Shared>,
    ) -> mpsc::UnboundedSender<FromHandle> {
        let (tx, rx) = mpsc::unbounded_channel();
        let (group, client) = (cfg.group_id.clone(), cfg.cluster.client_id.clone());
        #[cfg(test)]
        let faults = shared.request_panics.clone();
        let core = DriverCore::new(cfg, shared.clone(), cluster.clone());
        // Every event of this consumer's driver carries its group and member id.
        let span = tracing::info_span!("share_consumer", group = %group, member = %core.member_id(), client = %client);
        let driver = Driver {
            core,
            shared,
            cluster,
            tasks: JoinSet::new(),
            requests: HashMap::new(),
            waiting: Waiting::default(),
            #[cfg(test)]
            faults,
        };
        tokio::spawn(tracing::Instrument::instrument(driver.run(rx), span));
        tx
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<FromHandle>) {
        let mut handle_gone = false;
        loop {
            let now = Instant::now();
            self.drive(now);
            // Records handed back are driven at once, as they were when the core itself
            // found the poll gone: the fetch plan sees them in the same turn.
            while self.perform(now) {
                self.drive(now);
            }
            while let Some(t) = self.core.poll_transmit() {
                self.send(t);
            }
            if self.core.is_finished(now) {
                self.perform(now);
                break;
            }
            let wake = self.core.poll_timeout(now);
            tokio::select! {
                cmd = rx.recv(), if !handle_gone => match cmd {
                    Some(msg) => self.command(msg, Instant::now()),
                    None => {
                        handle_gone = true;
                        self.core.handle_gone(Instant::now());
                    }
                },
                Some(done) = self.tasks.join_next_with_id(), if !self.tasks.is_empty() => {
                    if let Some(ev) = self.answer(done) {
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

    /// Drives the core, after telling it of the polls that gave up since it last looked.
    fn drive(&mut self, now: Instant) {
        self.abandoned_polls(now);
        self.core.drive(now);
    }

    /// Tells the core of every poll whose receiver closed (the handle's poll timed out, was
    /// woken or dropped): it then keeps its records for the next one.
    fn abandoned_polls(&mut self, now: Instant) {
        let core = &mut self.core;
        self.waiting.abandoned_polls(|id| core.handle_command(Command::PollAbandoned(id), now));
    }

    /// A message from the handle, as the core's command; a sender it carries is kept until
    /// the core answers.
    fn command(&mut self, msg: FromHandle, now: Instant) {
        if matches!(msg, FromHandle::Poll { .. }) {
            // The poll before it may have given up since the last turn: the core hears of
            // that first, so that no sender is kept for a poll the new one replaces.
            self.abandoned_polls(now);
        }
        let cmd = self.waiting.command(msg);
        self.core.handle_command(cmd, now);
    }

    /// Performs the core's outputs, in the order it decided them (replies, callback
    /// completions, what the handle reads). Records a poll could not take go back to the
    /// core; returns whether any did.
    fn perform(&mut self, now: Instant) -> bool {
        let mut handed_back = false;
        while let Some(out) = self.core.poll_event() {
            if let Some(back) = out.perform(&self.shared, &mut self.waiting) {
                self.core.handle_command(Command::Requeue(back), now);
                handed_back = true;
            }
        }
        handed_back
    }

    /// The event answering a finished task, whichever way it ended.
    fn answer(&mut self, done: std::result::Result<(Id, Reply), JoinError>) -> Option<Event> {
        let (id, reply) = match done {
            Ok((id, reply)) => (id, Ok(reply)),
            Err(e) => (e.id(), Err(e)),
        };
        // Every task is started with its request (`start`): none is missing.
        let request = self.requests.remove(&id)?;
        Some(match reply {
            Ok(reply) => request.answer(reply),
            Err(e) => {
                let how = if e.is_panic() { "panicked" } else { "was cancelled" };
                warn!(api = request.api(), node = ?request.node(), "a request task {how}: answered as lost");
                let lost = lost(request.api(), request.node(), how);
                request.fail(lost)
            }
        })
    }

    /// Runs `io` as the task of `request`.
    fn start(&mut self, request: Request, io: impl Future<Output = Reply> + Send + 'static) {
        #[cfg(test)]
        let io = {
            let api = request.api();
            let panics = self.faults.take(api);
            async move {
                if panics {
                    panic!("a test made this {api} task panic");
                }
                io.await
            }
        };
        let id = self.tasks.spawn(io).id();
        self.requests.insert(id, request);
    }

    /// Sends one request in a task of its own, which ends in the broker's answer. A request
    /// to a broker goes as its `Wire` says (the core decided the versions, the timeout and
    /// what the content needs): nothing is decided here.
    fn send(&mut self, t: Transmit) {
        let cluster = self.cluster.clone();
        match t {
            Transmit::Metadata { topics } => {
                self.start(Request::Metadata, async move { Reply::Metadata(cluster.refresh_metadata(&topics).await) });
            }
            Transmit::FindCoordinator { group } => {
                self.start(Request::FindCoordinator, async move {
                    Reply::Coordinator(cluster.find_group_coordinator_once(&group).await)
                });
            }
            Transmit::Heartbeat { node, request, wire } => {
                self.start(Request::Heartbeat { node }, async move {
                    let r = async {
                        let conn = cluster.broker(node, TrafficClass::Control).await?;
                        let v = wire.version(SHARE_GROUP_HEARTBEAT_API_KEY, &conn.versions)?;
                        cluster.send_at(&conn, &request, v, wire.timeout).await
                    }
                    .await;
                    Reply::Heartbeat(r)
                });
            }
            Transmit::Fetch { node, request, sent, sent_at, wire } => {
                self.start(Request::Fetch { node, sent, sent_at }, async move {
                    let result = async {
                        let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                        let v = wire.version(SHARE_FETCH_API_KEY, &conn.versions)?;
                        conn.conn.call_timeout(&request, v, wire.timeout).await
                    }
                    .await;
                    Reply::Fetch(result)
                });
            }
            Transmit::Acknowledge { node, request, sent, wire } => {
                self.start(Request::Acknowledge { node, sent }, async move {
                    let result: Result<_> = async {
                        // Same connection as the fetches: the broker ties a share session to
                        // the connection that opened it, and drops it when that connection
                        // closes.
                        let conn = cluster.broker(node, TrafficClass::Fetch).await?;
                        let v = wire.version(SHARE_ACKNOWLEDGE_API_KEY, &conn.versions)?;
                        conn.conn.call_timeout(&request, v, wire.timeout).await
                    }
                    .await;
                    Reply::Acknowledge(result)
                });
            }
            Transmit::ListTopics => {
                self.start(Request::ListTopics, async move { Reply::TopicList(cluster.list_topics().await) });
            }
        }
    }
}

/// A request in flight, as its event will need it: what went out stays with the shell, not
/// inside the request's task, so that it comes back to the core however the task ends.
enum Request {
    Metadata,
    FindCoordinator,
    Heartbeat { node: i32 },
    Fetch { node: i32, sent: Sent, sent_at: Instant },
    Acknowledge { node: i32, sent: Sent },
    ListTopics,
}

/// What a request's task ends in: the broker's answer, or the error that came instead.
enum Reply {
    Metadata(Result<Vec<(String, i16)>>),
    Coordinator(Result<i32>),
    Heartbeat(Result<ShareGroupHeartbeatResponse>),
    Fetch(Result<ShareFetchResponse>),
    Acknowledge(Result<ShareAcknowledgeResponse>),
    TopicList(Result<Vec<String>>),
}

impl Request {
    /// The event of this request answered with `reply`, which its own task returned.
    fn answer(self, reply: Reply) -> Event {
        match (self, reply) {
            (Request::Metadata, Reply::Metadata(r)) => Event::Metadata(r),
            (Request::FindCoordinator, Reply::Coordinator(r)) => Event::Coordinator(r),
            (Request::Heartbeat { .. }, Reply::Heartbeat(r)) => Event::Heartbeat(r),
            (Request::Fetch { node, sent, sent_at }, Reply::Fetch(result)) => {
                Event::Fetch { node, sent, sent_at, result }
            }
            (Request::Acknowledge { node, sent }, Reply::Acknowledge(result)) => Event::Ack { node, sent, result },
            (Request::ListTopics, Reply::TopicList(r)) => Event::TopicList(r),
            // `send` gives each request the task of its kind; were that broken, the request
            // would still be answered, as lost.
            (request, _) => {
                let lost = lost(request.api(), request.node(), "answered another request");
                request.fail(lost)
            }
        }
    }

    /// The event of this request failed with `e`.
    fn fail(self, e: Error) -> Event {
        match self {
            Request::Metadata => Event::Metadata(Err(e)),
            Request::FindCoordinator => Event::Coordinator(Err(e)),
            Request::Heartbeat { .. } => Event::Heartbeat(Err(e)),
            Request::Fetch { node, sent, sent_at } => Event::Fetch { node, sent, sent_at, result: Err(e) },
            Request::Acknowledge { node, sent } => Event::Ack { node, sent, result: Err(e) },
            Request::ListTopics => Event::TopicList(Err(e)),
        }
    }

    fn api(&self) -> &'static str {
        match self {
            Request::Metadata => "Metadata",
            Request::FindCoordinator => "FindCoordinator",
            Request::Heartbeat { .. } => "ShareGroupHeartbeat",
            Request::Fetch { .. } => "ShareFetch",
            Request::Acknowledge { .. } => "ShareAcknowledge",
            Request::ListTopics => "ListTopics",
        }
    }

    /// The broker it went to, where it names one.
    fn node(&self) -> Option<i32> {
        match self {
            Request::Heartbeat { node } | Request::Fetch { node, .. } | Request::Acknowledge { node, .. } => {
                Some(*node)
            }
            _ => None,
        }
    }
}

/// The error of a request whose task ended without an answer. It may have been written, so
/// its outcome is unknown (acks it carried are reported so); the request is not answered,
/// as when its connection closes under it, and the core retries as it does then.
fn lost(api: &'static str, node: Option<i32>, how: &str) -> Error {
    let addr = node.map_or_else(|| "the cluster".to_string(), |n| format!("broker {n}"));
    let why = Error::TaskFailed { task: format!("{api} request"), detail: how.to_string() };
    let closed = Error::ConnectionClosed { addr: addr.clone(), cause: Some(Arc::new(why)) };
    Error::OutcomeUnknown { api, addr, cause: Arc::new(closed) }
}

/// The APIs whose next request task panics, each named once per panic (tests only).
#[cfg(test)]
#[derive(Default)]
pub(crate) struct RequestPanics(std::sync::Mutex<Vec<&'static str>>);

#[cfg(test)]
// Its tests run against the fake cluster (feature `test-util`).
#[cfg_attr(not(feature = "test-util"), allow(dead_code))]
impl RequestPanics {
    /// The next task of `api` panics before it sends anything.
    pub(crate) fn next(&self, api: &'static str) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).push(api);
    }

    /// Whether a panic of `api` is due (then it is taken).
    fn take(&self, api: &str) -> bool {
        let mut due = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let at = due.iter().position(|a| *a == api);
        at.map(|i| due.remove(i)).is_some()
    }

    /// How many panics are still due.
    pub(crate) fn due(&self) -> usize {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).len()
    }
}
