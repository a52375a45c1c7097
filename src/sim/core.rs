//! The real driver core (`consumer::driver::DriverCore`) as the runner drives it, and the
//! simulated topology as the core reads it. The timeouts are the shell's (`shell.rs`):
//! `request.timeout.ms` + `fetch.max.wait.ms` for a ShareFetch, `request.timeout.ms` for a
//! ShareAcknowledge.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::cluster::BrokerInfo;
use crate::consumer::driver::{Command, DriverCore, Event, Output, Shared, Topology, Transmit};
use crate::consumer::AckCallback;
use crate::consumer::{AcquireMode, ShareConsumerConfig};

use super::run::{Completion, Driven, SimTransmit};
use super::state::ClientId;
use super::topology::SimTopology;

impl Topology for SimTopology {
    fn topic_name(&self, id: &uuid::Uuid) -> Option<Arc<str>> {
        SimTopology::topic_name(self, id)
    }

    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        SimTopology::leader(self, topic, partition)
    }

    fn broker_addr(&self, node: i32) -> Option<String> {
        Some(super::net::addr(node))
    }

    fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32) {
        SimTopology::learn_leader(self, topic, partition, leader, leader_epoch)
    }

    fn learn_brokers(&self, _brokers: Vec<BrokerInfo>) {}
}

/// A driver core with its config's timeouts.
pub(crate) struct RealCore {
    core: DriverCore,
    request_timeout: Duration,
    fetch_timeout: Duration,
}

/// How the simulated consumer is set up: whether its brokers take RENEW (ShareAcknowledge v2,
/// as the shell learns from ApiVersions) and its `share.acquire.mode`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CoreOptions {
    pub renew: bool,
    pub acquire_mode: AcquireMode,
}

impl Default for CoreOptions {
    fn default() -> Self {
        CoreOptions { renew: true, acquire_mode: AcquireMode::BatchOptimized }
    }
}

/// A new consumer's core: its config (defaults, group `sim-group`), its topology, and an
/// acknowledgement commit callback that records every completion for the invariants.
pub(crate) fn new_core(
    _client: ClientId,
    topology: Arc<SimTopology>,
    completions: Arc<Mutex<Vec<Completion>>>,
    options: CoreOptions,
) -> Box<dyn Driven> {
    let renew = options.renew;
    let cfg = ShareConsumerConfig::new("sim-broker-1:9092", "sim-group").acquire_mode(options.acquire_mode);
    let shared = Arc::new(Shared::new(renew, None));
    let sink = completions.clone();
    let callback: AckCallback = Arc::new(move |tp, offsets, r| {
        sink.lock().unwrap_or_else(|p| p.into_inner()).push((tp.partition, offsets.to_vec(), r.clone()));
    });
    shared.callbacks.set(Some(callback));
    let request_timeout = cfg.cluster.request_timeout;
    let fetch_timeout = request_timeout + cfg.fetch_max_wait;
    let shared_for_runs = shared.clone();
    Box::new(RealCore { core: DriverCore::new(cfg, shared, topology), request_timeout, fetch_timeout })
        .with_callbacks(shared_for_runs)
}

/// A core whose callback completions are collected after every call (the handle runs the
/// callback on the application's side; here the runner does, after each step).
struct WithCallbacks {
    inner: Box<RealCore>,
    shared: Arc<Shared>,
}

impl RealCore {
    fn with_callbacks(self: Box<Self>, shared: Arc<Shared>) -> Box<dyn Driven> {
        Box::new(WithCallbacks { inner: self, shared })
    }
}

impl Driven for WithCallbacks {
    fn handle_command(&mut self, cmd: Command, now: Instant) {
        self.inner.core.handle_command(cmd, now);
    }

    fn handle_gone(&mut self, now: Instant) {
        self.inner.core.handle_gone(now);
    }

    fn handle_event(&mut self, ev: Event, now: Instant) {
        self.inner.core.handle_event(ev, now);
    }

    fn drive(&mut self, now: Instant) {
        self.inner.core.drive(now);
        while let Some(out) = self.inner.core.poll_event() {
            match out {
                // The runner reads the brokers' sessions, not the client's view of them.
                Output::SessionEpochs(_) => {}
            }
        }
        self.shared.callbacks.run();
    }

    fn poll_transmit(&mut self) -> Option<SimTransmit> {
        let t = self.inner.core.poll_transmit()?;
        Some(match t {
            Transmit::Metadata { topics } => SimTransmit::Metadata { topics },
            Transmit::FindCoordinator { .. } => SimTransmit::FindCoordinator,
            Transmit::Heartbeat { node, request } => SimTransmit::Heartbeat { node, request },
            Transmit::Fetch { node, request, sent, sent_at } => {
                SimTransmit::Fetch { node, request, sent, sent_at, timeout: self.inner.fetch_timeout }
            }
            Transmit::Acknowledge { node, request, sent } => {
                SimTransmit::Acknowledge { node, request, sent, timeout: self.inner.request_timeout }
            }
            Transmit::ListTopics => SimTransmit::ListTopics,
        })
    }

    fn poll_timeout(&self, now: Instant) -> Instant {
        self.inner.core.poll_timeout(now)
    }

    fn is_finished(&mut self, now: Instant) -> bool {
        let done = self.inner.core.is_finished(now);
        self.shared.callbacks.run();
        done
    }
}
