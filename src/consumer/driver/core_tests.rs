//! The driver core on its own: no sockets, no tasks, no clock but the `now` each call gets.
//! What used to need a loopback broker and wall-clock waits is a few calls here, exact.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;
use uuid::Uuid;

use super::{Command, DriverCore, Event, Shared, Topology, Transmit};
use crate::cluster::BrokerInfo;
use crate::consumer::config::ShareConsumerConfig;
use crate::consumer::metrics::Metrics;
use crate::error::Error;

/// One topic `t`, partition 0 led by broker 1.
struct OneTopic;

impl Topology for OneTopic {
    fn topic_name(&self, id: &Uuid) -> Option<Arc<str>> {
        (*id == topic_id()).then(|| Arc::from("t"))
    }
    fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        (topic == "t" && partition == 0).then_some(1)
    }
    fn broker_addr(&self, node: i32) -> Option<String> {
        Some(format!("broker{node}:9092"))
    }
    fn learn_leader(&self, _: &str, _: i32, _: i32, _: i32) {}
    fn learn_brokers(&self, _: Vec<BrokerInfo>) {}
}

fn topic_id() -> Uuid {
    Uuid::from_u128(7)
}

fn core() -> DriverCore {
    let shared = Arc::new(Shared {
        metrics: Metrics::new(),
        acquisition_lock_timeout_ms: AtomicI64::new(-1),
        renew_supported: AtomicBool::new(true),
        sessions: Mutex::new(BTreeMap::new()),
        network: None,
        callbacks: Default::default(),
    });
    DriverCore::new(ShareConsumerConfig::new("broker1:9092", "g"), shared, Arc::new(OneTopic))
}

fn drain(core: &mut DriverCore) -> Vec<Transmit> {
    std::iter::from_fn(|| core.poll_transmit()).collect()
}

fn kinds(ts: &[Transmit]) -> Vec<&'static str> {
    ts.iter()
        .map(|t| match t {
            Transmit::Metadata { .. } => "metadata",
            Transmit::FindCoordinator { .. } => "find-coordinator",
            Transmit::Heartbeat { .. } => "heartbeat",
            Transmit::Fetch { .. } => "fetch",
            Transmit::Acknowledge { .. } => "acknowledge",
            Transmit::ListTopics => "list-topics",
        })
        .collect()
}

/// Subscribes and answers the coordinator lookup: the join heartbeat is in flight, unanswered.
fn joining(t0: Instant) -> DriverCore {
    let mut c = core();
    c.handle_command(Command::Subscribe(vec!["t".into()]), t0);
    c.drive(t0);
    assert_eq!(kinds(&drain(&mut c)), ["metadata", "find-coordinator"]);
    c.handle_event(Event::Coordinator(Ok(1)), t0);
    c.drive(t0);
    let sent = drain(&mut c);
    assert!(matches!(sent[..], [Transmit::Heartbeat { node: 1, .. }]), "{:?}", kinds(&sent));
    c
}

#[test]
fn a_subscription_asks_for_metadata_the_coordinator_then_joins() {
    joining(Instant::now());
}

#[test]
fn nothing_is_sent_twice_while_requests_are_in_flight() {
    // No hot loop: driven again and again with nothing answered, the core sends nothing new
    // and asks to be driven no sooner than a timer of its own.
    let t0 = Instant::now();
    let mut c = joining(t0);
    for ms in 0..50 {
        let now = t0 + Duration::from_millis(ms * 10);
        c.drive(now);
        assert!(drain(&mut c).is_empty(), "at +{ms}0 ms");
        assert!(c.poll_timeout(now) >= now);
    }
}

#[test]
fn close_gives_up_at_its_deadline_and_says_what_is_unfinished() {
    let t0 = Instant::now();
    let mut c = joining(t0);
    let (tx, mut rx) = oneshot::channel();
    let deadline = t0 + Duration::from_secs(5);
    c.handle_command(Command::Close { acks: Vec::new(), deadline, reply: Some(tx) }, t0);
    c.drive(t0);
    assert!(!c.is_finished(t0), "the join heartbeat is unanswered: close waits");
    assert!(rx.try_recv().is_err(), "no answer before the deadline");
    assert!(c.poll_timeout(t0) <= deadline, "the core asks to be driven by the deadline");
    // Virtual time jumps to the deadline: no wall-clock wait.
    c.drive(deadline);
    assert!(c.is_finished(deadline));
    match rx.try_recv() {
        Ok(Err(Error::Timeout { what, .. })) => assert!(what.contains("the group was not left"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_poll_without_records_waits_and_a_zero_timeout_poll_is_answered_at_once() {
    let t0 = Instant::now();
    let mut c = joining(t0);
    let (tx, mut rx) = oneshot::channel();
    c.handle_command(Command::Poll { max: 10, wait: true, renewing: false, acks: Vec::new(), reply: tx }, t0);
    c.drive(t0);
    assert!(rx.try_recv().is_err(), "nothing buffered: the poll waits");
    let (tx, mut rx) = oneshot::channel();
    c.handle_command(Command::Poll { max: 10, wait: false, renewing: false, acks: Vec::new(), reply: tx }, t0);
    match rx.try_recv() {
        Ok(Ok(answer)) => assert!(answer.is_empty()),
        other => panic!("{other:?}"),
    }
}
