//! The network's side of a run: a core's `Transmit`s put on the simulated network with their
//! fates, requests reaching their brokers, answers (or timeouts, resets, refusals) coming
//! back to the client, and the lines a traced run prints for them.

use super::*;

impl Sim<'_> {
    /// A connection closes: its requests fail, the broker ends the sessions opened on it.
    pub(super) fn close_conn(&mut self, node: i32, conn: u64) {
        for id in self.net.close(conn) {
            if let Some(r) = self.net.inflight.remove(&id) {
                self.parked.remove(&id);
                let e = net::reset(r.body.api(), node);
                self.fail(r, e);
            }
        }
        self.cluster.conn_closed(node, conn);
    }

    /// Hands a request's failure to its client.
    fn fail(&mut self, r: InFlight, e: Error) {
        self.log(|| format!("c{} <- b{} {} failed: {e}", r.client, r.node, r.body.api()));
        let now = self.now;
        let ev = match r.body {
            Body::Fetch { sent, sent_at, .. } => Event::Fetch { node: r.node, sent, sent_at, result: Err(e) },
            Body::Ack { sent, .. } => Event::Ack { node: r.node, sent, result: Err(e) },
            Body::Heartbeat(_) => Event::Heartbeat(Err(e)),
        };
        if let Some(c) = self.clients.get_mut(r.client) {
            if !c.finished {
                c.core.handle_event(ev, now);
                c.dirty = true;
            }
        }
    }

    pub(super) fn transmit(&mut self, client: ClientId, t: SimTransmit) -> std::result::Result<(), String> {
        self.transmits += 1;
        let ms = self.elapsed().as_millis() as u64;
        let in_settle = self.now >= self.base + self.plan.horizon;
        self.rate
            .note(client, ms)
            .map_err(|e| if in_settle { format!("{e} (after the last fault)") } else { e })?;
        let now = self.now;
        let quick = now + Duration::from_millis(1);
        match t {
            SimTransmit::Metadata { topics } => {
                self.log(|| format!("c{client} -> Metadata {topics:?}"));
                let ev = if self.cluster.up.values().any(|u| *u) {
                    self.clients[client].topology.refresh(&self.cluster);
                    Event::Metadata(Ok(Vec::new()))
                } else {
                    Event::Metadata(Err(net::refused(self.cluster.cfg.brokers[0])))
                };
                self.schedule(quick, Due::Direct(client, Box::new(ev)));
            }
            SimTransmit::ListTopics => {
                self.schedule(
                    quick,
                    Due::Direct(client, Box::new(Event::TopicList(Ok(vec![super::super::cluster::TOPIC.into()])))),
                );
            }
            SimTransmit::FindCoordinator => {
                let c = self.cluster.group.coordinator;
                self.log(|| format!("c{client} -> FindCoordinator: b{c}"));
                // One lookup (the core schedules its own retries).
                let answer = if self.cluster.is_up(c) { Ok(c) } else { Err(net::refused(c)) };
                self.schedule(quick, Due::Direct(client, Box::new(Event::Coordinator(answer))));
            }
            SimTransmit::Heartbeat { node, request } => {
                self.log(|| format!("c{client} -> b{node} Heartbeat epoch {}", request.member_epoch));
                self.net.check_not_muted(client, node, Class::Control, now)?;
                let timeout = Duration::from_secs(30);
                self.send(client, node, Class::Control, Body::Heartbeat(request), timeout);
            }
            SimTransmit::Fetch { node, request, sent, sent_at, timeout } => {
                self.log(|| format!("c{client} -> b{node} {}", describe_fetch(&request)));
                self.net.check_not_muted(client, node, Class::Share, now)?;
                self.cluster.fetch_sent(client, node, &request);
                self.send(client, node, Class::Share, Body::Fetch { request, sent, sent_at }, timeout);
            }
            SimTransmit::Acknowledge { node, request, sent, timeout } => {
                self.log(|| format!("c{client} -> b{node} {}", describe_ack(&request)));
                // The close's final acknowledgements do not wait for a throttle: the broker
                // holds them while the connection is muted, within the close's deadline.
                if request.share_session_epoch != -1 {
                    self.net.check_not_muted(client, node, Class::Share, now)?;
                }
                let acked = request.topics.iter().flat_map(|t| t.partitions.iter().map(|p| p.partition_index));
                self.cluster.ledger.acks_sent(client, acked);
                self.send(client, node, Class::Share, Body::Ack { request, sent }, timeout);
            }
        }
        Ok(())
    }

    /// Puts a request on the network with its fate.
    fn send(&mut self, client: ClientId, node: i32, class: Class, body: Body, timeout: Duration) {
        let now = self.now;
        if !self.cluster.is_up(node) {
            // Refused: nothing was written. Told on the next turn, as the shell's task would.
            self.seq += 1;
            let id = self.seq;
            let r = InFlight { client, node, conn: 0, body, fate: Fate::DropRequest, deadline: now, timeout };
            self.net.inflight.insert(id, r);
            self.schedule(now + Duration::from_millis(1), Due::Refused(id));
            return;
        }
        let conn = self.net.conn(client, node, class);
        let n = self.net.count(client, node);
        let fate = self.plan.fate(client, node, n, self.elapsed());
        self.seq += 1;
        let id = self.seq;
        let deadline = now + timeout;
        self.net.inflight.insert(id, InFlight { client, node, conn, body, fate, deadline, timeout });
        match fate {
            Fate::DropRequest => self.schedule(deadline, Due::Timeout(id)),
            Fate::Normal { there, .. }
            | Fate::DropResponse { there }
            | Fate::Reset { there, .. }
            | Fate::Throttled { there, .. } => self.schedule(now + there, Due::Arrive(id)),
        }
    }

    pub(super) fn deliver(&mut self, d: Due) {
        let now = self.now;
        match d {
            Due::Direct(client, ev) => {
                if let Some(c) = self.clients.get_mut(client).filter(|c| !c.finished) {
                    c.core.handle_event(*ev, now);
                    c.dirty = true;
                }
            }
            Due::Arrive(id) => self.arrive(id),
            Due::Refused(id) => {
                if let Some(r) = self.net.inflight.remove(&id) {
                    let node = r.node;
                    self.fail(r, net::refused(node));
                }
            }
            Due::Answer(id, a) => {
                let Some(r) = self.net.inflight.remove(&id) else { return };
                self.log(|| format!("c{} <- b{} {}", r.client, r.node, describe_answer(&a)));
                let (class, throttle_ms) = match &*a {
                    Answer::Fetch(x) => (Class::Share, x.throttle_time_ms),
                    Answer::Ack(x) => (Class::Share, x.throttle_time_ms),
                    Answer::Heartbeat(x) => (Class::Control, x.throttle_time_ms),
                };
                if self.clients.get(r.client).is_some_and(|c| !c.finished) {
                    self.net.throttled(r.client, r.node, class, throttle_ms, now);
                }
                let ev = match (*a, r.body) {
                    (Answer::Fetch(resp), Body::Fetch { sent, sent_at, .. }) => {
                        Event::Fetch { node: r.node, sent, sent_at, result: Ok(resp) }
                    }
                    (Answer::Ack(resp), Body::Ack { sent, .. }) => Event::Ack { node: r.node, sent, result: Ok(resp) },
                    (Answer::Heartbeat(resp), Body::Heartbeat(_)) => {
                        if let Some(a) = resp.assignment.as_ref().filter(|_| resp.error_code == 0) {
                            let parts = a.topic_partitions.iter().flat_map(|t| t.partitions.iter().copied());
                            self.cluster.ledger.assigned(r.client, parts.collect());
                        }
                        Event::Heartbeat(Ok(resp))
                    }
                    _ => unreachable!("an answer of another kind than its request"),
                };
                if let Some(c) = self.clients.get_mut(r.client).filter(|c| !c.finished) {
                    c.core.handle_event(ev, now);
                    c.dirty = true;
                }
            }
            Due::Timeout(id) => {
                let Some(r) = self.net.inflight.get(&id) else { return };
                let (node, conn, api) = (r.node, r.conn, r.body.api());
                let after = r.timeout;
                // The client gives up and closes the connection (src/connection does), which
                // ends the broker's session on it; the other requests on it fail too.
                if let Some(r) = self.net.inflight.remove(&id) {
                    self.parked.remove(&id);
                    self.fail(r, net::timed_out(api, node, after));
                }
                self.close_conn(node, conn);
            }
            Due::Reset(id) => {
                let Some(r) = self.net.inflight.get(&id) else { return };
                let (node, conn) = (r.node, r.conn);
                self.log(|| format!("connection {conn} to b{node} reset mid-response"));
                self.close_conn(node, conn);
            }
        }
    }

    /// A request reaches its broker, which acts on it.
    fn arrive(&mut self, id: u64) {
        let now = self.now;
        let Some(r) = self.net.inflight.get(&id) else { return };
        let (client, node, conn) = (r.client, r.node, r.conn);
        if !self.cluster.is_up(node) {
            return; // the crash failed it already
        }
        let answer = match &r.body {
            Body::Heartbeat(req) => {
                let (topic_id, parts) = (self.cluster.topic_id, self.cluster.cfg.partitions);
                let (resp, left) = self.cluster.group.heartbeat(node, client, req, topic_id, parts, now);
                if let Some(c) = left {
                    self.cluster.release_client(c);
                }
                Answer::Heartbeat(resp)
            }
            Body::Ack { request, .. } => {
                let request = request.clone();
                Answer::Ack(self.cluster.share_acknowledge(node, client, conn, &request, now))
            }
            Body::Fetch { request, .. } => {
                let request = request.clone();
                match self.cluster.share_fetch(node, client, conn, &request, now) {
                    FetchOutcome::Answer(resp) => Answer::Fetch(resp),
                    FetchOutcome::Wait(p) => {
                        self.parked.insert(id, p);
                        return;
                    }
                }
            }
        };
        self.answered(id, answer);
    }

    /// The broker has its answer: the network decides what the client sees and when.
    pub(super) fn answered(&mut self, id: u64, mut a: Answer) {
        let now = self.now;
        let Some(r) = self.net.inflight.get(&id) else { return };
        let deadline = r.deadline;
        match r.fate {
            Fate::Normal { back, .. } | Fate::Throttled { back, .. } => {
                if let Fate::Throttled { throttle_ms, .. } = r.fate {
                    match &mut a {
                        Answer::Fetch(x) => x.throttle_time_ms = throttle_ms,
                        Answer::Ack(x) => x.throttle_time_ms = throttle_ms,
                        Answer::Heartbeat(x) => x.throttle_time_ms = throttle_ms,
                    }
                }
                if now + back > deadline {
                    self.schedule(deadline, Due::Timeout(id));
                } else {
                    self.schedule(now + back, Due::Answer(id, Box::new(a)));
                }
            }
            Fate::DropRequest | Fate::DropResponse { .. } => self.schedule(deadline, Due::Timeout(id)),
            Fate::Reset { back, .. } => self.schedule((now + back).min(deadline), Due::Reset(id)),
        }
    }
}

fn describe_fetch(r: &ShareFetchRequest) -> String {
    let mut s = format!("ShareFetch e{} wait {} max {}", r.share_session_epoch, r.max_wait_ms, r.max_records);
    for p in r.topics.iter().flat_map(|t| &t.partitions) {
        let _ = write!(s, " p{}", p.partition_index);
        for b in &p.acknowledgement_batches {
            let _ = write!(s, " [{}..={} {:?}]", b.first_offset, b.last_offset, b.acknowledge_types);
        }
    }
    for p in r.forgotten_topics_data.iter().flat_map(|t| &t.partitions) {
        let _ = write!(s, " forget p{p}");
    }
    s
}

fn describe_ack(r: &ShareAcknowledgeRequest) -> String {
    let mut s = format!("ShareAcknowledge e{}{}", r.share_session_epoch, if r.is_renew_ack { " renew" } else { "" });
    for p in r.topics.iter().flat_map(|t| &t.partitions) {
        let _ = write!(s, " p{}", p.partition_index);
        for b in &p.acknowledgement_batches {
            let _ = write!(s, " [{}..={} {:?}]", b.first_offset, b.last_offset, b.acknowledge_types);
        }
    }
    s
}

fn describe_answer(a: &Answer) -> String {
    let throttle = match a {
        Answer::Fetch(r) => r.throttle_time_ms,
        Answer::Ack(r) => r.throttle_time_ms,
        Answer::Heartbeat(r) => r.throttle_time_ms,
    };
    let mut s = describe_answer_body(a);
    if throttle > 0 {
        let _ = write!(s, " (throttle {throttle} ms)");
    }
    s
}

fn describe_answer_body(a: &Answer) -> String {
    match a {
        Answer::Fetch(r) => {
            let mut s = format!("ShareFetch answer error {}", r.error_code);
            for p in r.responses.iter().flat_map(|t| &t.partitions) {
                let _ = write!(s, " p{} e{} ack-e{}", p.partition_index, p.error_code, p.acknowledge_error_code);
                for a in &p.acquired_records {
                    let _ = write!(s, " got {}..={} d{}", a.first_offset, a.last_offset, a.delivery_count);
                }
            }
            s
        }
        Answer::Ack(r) => {
            let mut s = format!("ShareAcknowledge answer error {}", r.error_code);
            for p in r.responses.iter().flat_map(|t| &t.partitions) {
                let _ = write!(s, " p{} e{}", p.partition_index, p.error_code);
            }
            s
        }
        Answer::Heartbeat(r) => format!(
            "Heartbeat answer error {} epoch {} assignment {:?}",
            r.error_code,
            r.member_epoch,
            r.assignment.as_ref().map(|a| a
                .topic_partitions
                .iter()
                .flat_map(|t| t.partitions.clone())
                .collect::<Vec<_>>())
        ),
    }
}
