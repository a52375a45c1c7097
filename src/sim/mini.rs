//! A stand-in driver core, only until the real sans-IO `Core` is wired in: the real
//! membership and share-session state machines (`share::membership`, `share::session`) with
//! the simplest policy around them (fetch for a waiting poll, acks ride on the next request,
//! close: final acks at epoch -1 then leave). It exercises the runner, the cluster and the
//! invariants end to end; it is not the client under test.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::consumer::driver::{Command, CommitResults, Delivered, Event, PollAnswer};
use crate::consumer::ConsumerRecord;
use crate::error::Result;
use crate::protocol::records::{decode_acquired, AcquiredRange};
use crate::share::membership::{Membership, Outcome};
use crate::share::session::{FetchParams, ShareSession};
use crate::share::TopicIdPartition;

use super::cluster::TOPIC;
use super::run::{Completion, Driven, SimTransmit};
use super::topology::SimTopology;

type Closing = (Instant, Option<oneshot::Sender<Result<()>>>, bool);

pub(crate) struct MiniCore {
    membership: Membership,
    topology: Arc<SimTopology>,
    completions: Arc<Mutex<Vec<Completion>>>,
    coordinator: Option<i32>,
    finding: bool,
    hb_in_flight: bool,
    metadata: Option<bool>,
    sessions: BTreeMap<i32, ShareSession>,
    retry_at: BTreeMap<i32, Instant>,
    buffer: VecDeque<Delivered>,
    /// The latest delivery count acquired per (broker, partition, offset): an ack of an older
    /// delivery would land on the newer one.
    latest: BTreeMap<(i32, TopicIdPartition, i64), i16>,
    waiter: Option<(usize, oneshot::Sender<Result<PollAnswer>>)>,
    /// Closing: (deadline, the reply, whether the final acks and the leave went).
    closing: Option<Closing>,
    out: VecDeque<SimTransmit>,
    finished: bool,
}

impl MiniCore {
    pub(crate) fn new(topology: Arc<SimTopology>, completions: Arc<Mutex<Vec<Completion>>>) -> MiniCore {
        MiniCore {
            membership: Membership::new("sim-group", None),
            topology,
            completions,
            coordinator: None,
            finding: false,
            hb_in_flight: false,
            metadata: None,
            sessions: BTreeMap::new(),
            retry_at: BTreeMap::new(),
            buffer: VecDeque::new(),
            latest: BTreeMap::new(),
            waiter: None,
            closing: None,
            out: VecDeque::new(),
            finished: false,
        }
    }

    fn complete(&self, tp: TopicIdPartition, offsets: Vec<i64>, r: Result<()>) {
        self.completions.lock().unwrap_or_else(|p| p.into_inner()).push((tp.partition, offsets, r));
    }

    fn route(&mut self, acks: Vec<crate::consumer::driver::AckEntry>, now: Instant) {
        for a in acks {
            // A lapsed lock: the broker may have handed the record out again (even to us).
            let superseded = self.latest.get(&(a.node, a.tp, a.offset)).is_some_and(|d| *d > a.delivery_count);
            if superseded || a.lock_deadline.is_some_and(|d| d <= now) {
                let e = crate::error::Error::LockExpired {
                    topic: TOPIC.into(),
                    partition: a.tp.partition,
                    offset: a.offset,
                    delivery_count: a.delivery_count,
                    redelivered: false,
                };
                self.complete(a.tp, vec![a.offset], Err(e));
                continue;
            }
            match self.sessions.get_mut(&a.node) {
                Some(s) if s.generation() == a.generation => s.queue_ack(a.tp, a.offset, a.kind),
                _ => self.complete(a.tp, vec![a.offset], Err(crate::consumer::driver::session_gone(a.node))),
            }
        }
    }

    fn reconcile(&mut self) {
        let mut per: BTreeMap<i32, std::collections::BTreeSet<TopicIdPartition>> = BTreeMap::new();
        for (id, parts) in self.membership.assignment() {
            for &p in parts {
                if let Some(l) = self.topology.leader(TOPIC, p) {
                    per.entry(l).or_default().insert(TopicIdPartition { topic_id: *id, partition: p });
                }
            }
        }
        for (id, s) in self.sessions.iter_mut() {
            s.set_wanted(per.remove(id).unwrap_or_default());
        }
        for (id, w) in per {
            let mut s = ShareSession::new(id);
            s.set_wanted(w);
            self.sessions.insert(id, s);
        }
    }

    fn reset(&mut self, node: i32, e: crate::error::Error) {
        if let Some(s) = self.sessions.get_mut(&node) {
            for (tp, a) in s.reset() {
                let offsets = a.iter().map(|(o, _)| o).collect();
                self.complete(tp, offsets, Err(e.clone()));
            }
        }
        self.buffer.retain(|d| d.node != node);
    }
}

impl Driven for MiniCore {
    fn handle_command(&mut self, cmd: Command, now: Instant) {
        match cmd {
            Command::Subscribe(t) => {
                self.membership.subscribe(t, now);
                self.metadata = Some(false);
            }
            Command::Poll { max, acks, reply, .. } => {
                self.route(acks, now);
                self.waiter = Some((max, reply));
            }
            Command::Commit { acks, reply } => {
                self.route(acks, now);
                if let Some(r) = reply {
                    let _ = r.send(CommitResults::default());
                }
            }
            Command::Close { acks, deadline, reply } => {
                self.route(acks, now);
                self.closing = Some((deadline, reply, false));
            }
            _ => {}
        }
    }

    fn handle_gone(&mut self, now: Instant) {
        if self.closing.is_none() {
            self.closing = Some((now + Duration::from_secs(5), None, false));
        }
    }

    fn handle_event(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::Coordinator(r) => {
                self.finding = false;
                self.coordinator = r.ok();
            }
            Event::Heartbeat(r) => {
                self.hb_in_flight = false;
                let o = match r {
                    Ok(resp) => self.membership.handle_response(&resp, now),
                    Err(e) => self.membership.handle_error(e, now),
                };
                match o {
                    Outcome::AssignmentChanged => self.reconcile(),
                    Outcome::FindCoordinator => self.coordinator = None,
                    Outcome::Fenced => {
                        let ids: Vec<i32> = self.sessions.keys().copied().collect();
                        for id in ids {
                            self.reset(id, crate::consumer::driver::session_gone(id));
                        }
                        self.reconcile();
                    }
                    _ => {}
                }
            }
            Event::Metadata(r) => {
                if r.is_err() {
                    // Retried after a pause, not at once (the rate guard catches that).
                    self.retry_at.insert(-1, now + Duration::from_millis(200));
                }
                self.metadata = Some(r.is_ok());
                self.reconcile();
            }
            Event::Fetch { node, sent, sent_at, result } => {
                let resp = match result.and_then(|r| {
                    crate::error::check(r.error_code, None, || crate::error::Context::api("ShareFetch")).map(|_| r)
                }) {
                    Ok(r) => r,
                    Err(e) => {
                        for (tp, a) in &sent.acks {
                            self.complete(*tp, a.iter().map(|(o, _)| o).collect(), Err(e.clone()));
                        }
                        if let Some(s) = self.sessions.get_mut(&node) {
                            s.clear_in_flight();
                        }
                        // Acks still queued were never sent: they fail with the plain cause.
                        let unsent = match &e {
                            crate::error::Error::OutcomeUnknown { cause, .. } => (**cause).clone(),
                            _ => e,
                        };
                        self.reset(node, unsent);
                        self.retry_at.insert(node, now + Duration::from_millis(100));
                        self.metadata = Some(false);
                        return;
                    }
                };
                let Some(s) = self.sessions.get_mut(&node) else { return };
                if sent.generation != s.generation() {
                    s.clear_in_flight();
                    // The session was reset meanwhile: the broker released these records.
                    for (tp, a) in &sent.acks {
                        let e = crate::consumer::driver::session_gone(node);
                        self.complete(*tp, a.iter().map(|(o, _)| o).collect(), Err(e));
                    }
                    return;
                }
                s.on_success(&sent);
                let generation = s.generation();
                let mut moved = false;
                for (tp, a) in &sent.acks {
                    let code = resp
                        .responses
                        .iter()
                        .flat_map(|t| &t.partitions)
                        .find(|p| p.partition_index == tp.partition)
                        .map_or(0, |p| p.acknowledge_error_code);
                    let r = crate::error::check(code, None, || crate::error::Context::api("ShareFetch"));
                    self.complete(*tp, a.iter().map(|(o, _)| o).collect(), r);
                }
                for t in resp.responses {
                    for p in t.partitions {
                        let tp = TopicIdPartition { topic_id: t.topic_id, partition: p.partition_index };
                        if p.error_code != 0 {
                            moved = true;
                            self.topology.learn_leader(
                                TOPIC,
                                tp.partition,
                                p.current_leader.leader_id,
                                p.current_leader.leader_epoch,
                            );
                        }
                        let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| a.into()).collect();
                        if ranges.is_empty() {
                            continue;
                        }
                        if let Ok(set) = decode_acquired(p.records.unwrap_or_default(), &ranges) {
                            for r in set.records {
                                self.latest.insert((node, tp, r.offset), r.delivery_count);
                                let record = ConsumerRecord {
                                    topic: Arc::from(TOPIC),
                                    partition: tp.partition,
                                    offset: r.offset,
                                    timestamp: r.timestamp,
                                    timestamp_type: r.timestamp_type,
                                    key: r.key,
                                    value: r.value,
                                    headers: r.headers,
                                    delivery_count: r.delivery_count,
                                    leader_epoch: None,
                                    lock_deadline: Some(sent_at + Duration::from_secs(30)),
                                    ack_slot: None,
                                };
                                self.buffer.push_back(Delivered { record, tp, node, generation });
                            }
                        }
                    }
                }
                if moved {
                    self.retry_at.insert(node, now + Duration::from_millis(100));
                    self.reconcile();
                }
            }
            Event::Ack { node, sent, result } => {
                let r = result.and_then(|r| {
                    crate::error::check(r.error_code, None, || crate::error::Context::api("ShareAcknowledge"))
                        .map(|_| r)
                });
                for (tp, a) in &sent.acks {
                    let res = match &r {
                        Ok(resp) => {
                            let code = resp
                                .responses
                                .iter()
                                .flat_map(|t| &t.partitions)
                                .find(|p| p.partition_index == tp.partition)
                                .map_or(0, |p| p.error_code);
                            crate::error::check(code, None, || crate::error::Context::api("ShareAcknowledge"))
                        }
                        Err(e) => Err(e.clone()),
                    };
                    self.complete(*tp, a.iter().map(|(o, _)| o).collect(), res);
                }
                match r {
                    Ok(_) => {
                        if let Some(s) = self.sessions.get_mut(&node) {
                            s.on_success(&sent);
                        }
                    }
                    Err(e) => {
                        if let Some(s) = self.sessions.get_mut(&node) {
                            s.clear_in_flight();
                        }
                        let unsent = match &e {
                            crate::error::Error::OutcomeUnknown { cause, .. } => (**cause).clone(),
                            _ => e,
                        };
                        self.reset(node, unsent);
                    }
                }
            }
            _ => {}
        }
    }

    fn drive(&mut self, now: Instant) {
        if self.finished {
            return;
        }
        if self.metadata == Some(false) && self.retry_at.get(&-1).is_none_or(|t| *t <= now) {
            self.metadata = None;
            self.out.push_back(SimTransmit::Metadata { topics: vec![TOPIC.into()] });
        }
        if !self.hb_in_flight && self.membership.poll_timeout().is_some_and(|t| t <= now) {
            match self.coordinator {
                None if !self.finding => {
                    self.finding = true;
                    self.out.push_back(SimTransmit::FindCoordinator);
                }
                Some(node) => {
                    if let Some(request) = self.membership.poll_heartbeat(now) {
                        self.hb_in_flight = true;
                        self.out.push_back(SimTransmit::Heartbeat { node, request });
                    }
                }
                None => {}
            }
        }
        if let Some((max, _)) = &self.waiter {
            if !self.buffer.is_empty() {
                let n = (*max).min(self.buffer.len());
                let records: Vec<Delivered> = self.buffer.drain(..n).collect();
                if let Some((_, reply)) = self.waiter.take() {
                    let _ = reply.send(Ok(PollAnswer { records, renewed: Vec::new() }));
                }
            }
        }
        let member = self.membership.member_id().to_string();
        if let Some((deadline, _, leaving)) = &mut self.closing {
            let all_idle = self.sessions.values().all(|s| !s.in_flight());
            if !*leaving && all_idle {
                *leaving = true;
                for (id, s) in self.sessions.iter_mut() {
                    if let Some((request, sent)) = s.build_close("sim-group", &member) {
                        self.out.push_back(SimTransmit::Acknowledge {
                            node: *id,
                            request,
                            sent,
                            timeout: Duration::from_secs(30),
                        });
                    }
                }
                self.membership.leave(now);
            }
            let done = *leaving
                && self.sessions.values().all(|s| !s.in_flight())
                && !self.membership.is_active()
                && !self.hb_in_flight;
            if done || now >= *deadline {
                if let Some((_, Some(r), _)) = self.closing.take() {
                    let _ = r.send(Ok(()));
                }
                self.finished = true;
            }
            return;
        }
        let want = self.waiter.is_some() && self.buffer.is_empty();
        for (id, s) in self.sessions.iter_mut() {
            if s.in_flight() || self.retry_at.get(id).is_some_and(|t| *t > now) {
                continue;
            }
            if want || s.has_acks() || s.has_changes() {
                let p = FetchParams {
                    max_wait_ms: 500,
                    min_bytes: 1,
                    max_bytes: 1 << 20,
                    max_records: 10,
                    batch_size: 10,
                    acquire_mode: 0,
                };
                if let Some((request, sent)) = s.build_fetch("sim-group", &member, p) {
                    self.out.push_back(SimTransmit::Fetch {
                        node: *id,
                        request,
                        sent,
                        sent_at: now,
                        timeout: Duration::from_millis(30_500),
                    });
                } else if let Some((request, sent)) = s.build_ack("sim-group", &member, false) {
                    self.out.push_back(SimTransmit::Acknowledge {
                        node: *id,
                        request,
                        sent,
                        timeout: Duration::from_secs(30),
                    });
                }
            }
        }
    }

    fn poll_transmit(&mut self) -> Option<SimTransmit> {
        self.out.pop_front()
    }

    fn poll_timeout(&self, now: Instant) -> Instant {
        let mut t = now + Duration::from_secs(1);
        // A heartbeat due while the coordinator is being looked up waits for that answer.
        if let Some(h) = self.membership.poll_timeout().filter(|_| !self.finding && !self.hb_in_flight) {
            t = t.min(h);
        }
        for r in self.retry_at.values() {
            if *r > now {
                t = t.min(*r);
            }
        }
        t.max(now)
    }

    fn is_finished(&mut self, _now: Instant) -> bool {
        self.finished
    }
}
