//! The driver core on its own: no sockets, no tasks, no clock but the `now` each call gets.
//! What used to need a loopback broker and wall-clock waits is a few calls here, exact.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use uuid::Uuid;

use super::wire::Needs;
use super::Wire;
use super::{
    AckEntry, Command, CommitResults, DriverCore, Event, PollAnswer, Replies, ReplyId, Shared, Topology, Transmit,
};
use crate::acquire_mode::AcquireMode;
use crate::cluster::{ApiVersions, BrokerInfo};
use crate::consumer::config::ShareConsumerConfig;
use crate::error::{Error, Result};
use crate::protocol::share::{ShareAcknowledgeResponse, ShareFetchResponse};
use crate::share::acks::{AckKind, PartitionAcks};
use crate::share::TopicIdPartition;

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
    let shared = Arc::new(Shared::new(true, None));
    DriverCore::new(ShareConsumerConfig::new("broker1:9092", "g"), shared, Arc::new(OneTopic))
}

/// The replies among the outputs performed, by the id of the command that asked (what the
/// shell sends on each command's sender). A poll in `gone` gave up: what it is sent comes
/// back, as from a send on a dropped receiver.
#[derive(Default)]
struct Answers {
    gone: HashSet<ReplyId>,
    polls: HashMap<ReplyId, Result<PollAnswer>>,
    commits: HashMap<ReplyId, CommitResults>,
    closes: HashMap<ReplyId, Result<()>>,
}

impl Replies for Answers {
    fn polled(&mut self, id: ReplyId, answer: Result<PollAnswer>) -> Option<PollAnswer> {
        if self.gone.contains(&id) {
            return answer.ok();
        }
        self.polls.insert(id, answer);
        None
    }
    fn committed(&mut self, id: ReplyId, results: CommitResults) {
        self.commits.insert(id, results);
    }
    fn closed(&mut self, id: ReplyId, result: Result<()>) {
        self.closes.insert(id, result);
    }
}

/// Performs the outputs queued so far, as the shell does; returns the replies among them.
fn perform(core: &mut DriverCore) -> Answers {
    perform_to(core, Answers::default())
}

/// [`perform`], the replies going to `answers`.
fn perform_to(core: &mut DriverCore, mut answers: Answers) -> Answers {
    let shared = core.shared.clone();
    while let Some(out) = core.poll_event() {
        if let Some(back) = out.perform(&shared, &mut answers) {
            core.handle_command(Command::Requeue(back), Instant::now());
        }
    }
    answers
}

/// The poll command of the tests: waits for records (or not), asks for up to 10.
fn poll(id: u64, wait: bool, renewing: bool, acks: Vec<AckEntry>) -> Command {
    Command::Poll { max: 10, wait, renewing, acks, id: ReplyId(id) }
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
    joining_as(core(), t0)
}

/// [`joining`], for the core `c`.
fn joining_as(mut c: DriverCore, t0: Instant) -> DriverCore {
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
    let deadline = t0 + Duration::from_secs(5);
    c.handle_command(Command::Close { acks: Vec::new(), deadline, id: Some(ReplyId(1)) }, t0);
    c.drive(t0);
    assert!(!c.is_finished(t0), "the join heartbeat is unanswered: close waits");
    assert!(perform(&mut c).closes.is_empty(), "no answer before the deadline");
    assert!(c.poll_timeout(t0) <= deadline, "the core asks to be driven by the deadline");
    // Virtual time jumps to the deadline: no wall-clock wait.
    c.drive(deadline);
    assert!(c.is_finished(deadline));
    match perform(&mut c).closes.remove(&ReplyId(1)) {
        Some(Err(Error::Timeout { what, .. })) => assert!(what.contains("the group was not left"), "{what}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_poll_without_records_waits_and_a_zero_timeout_poll_is_answered_at_once() {
    let t0 = Instant::now();
    let mut c = joining(t0);
    c.handle_command(poll(1, true, false, Vec::new()), t0);
    c.drive(t0);
    assert!(perform(&mut c).polls.is_empty(), "nothing buffered: the poll waits");
    c.handle_command(poll(2, false, false, Vec::new()), t0);
    match perform(&mut c).polls.remove(&ReplyId(2)) {
        Some(Ok(answer)) => assert!(answer.is_empty()),
        other => panic!("{other:?}"),
    }
}

/// Joined with partition t-0 (led by broker 1), its share session open (the first fetch
/// answered, empty); a second fetch is in flight.
fn fetching(t0: Instant) -> DriverCore {
    let mut c = joining(t0);
    let (node, sent, sent_at) = opening_fetch(&mut c, t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t0);
    c
}

/// Assigns t-0 to the joining core `c`, a poll waiting: the first fetch (the session's
/// opening) is the one returned, with how it goes.
fn opening_fetch_wire(c: &mut DriverCore, t0: Instant) -> (i32, crate::share::session::Sent, Instant, Wire) {
    let assigned = ShareGroupHeartbeatResponse::default()
        .with_member_epoch(1)
        .with_heartbeat_interval_ms(5000)
        .with_assignment(Some(Assignment::default().with_topic_partitions(vec![
            TopicPartitions::default().with_topic_id(topic_id()).with_partitions(vec![0]),
        ])));
    c.handle_event(Event::Heartbeat(Ok(assigned)), t0);
    // A poll waits: pacing fetches for it (no poll, no prefetch).
    c.handle_command(poll(1, true, false, Vec::new()), t0); // it waits for the test's whole run
    c.drive(t0);
    let opening = drain(c);
    let Some(Transmit::Fetch { node: 1, sent, sent_at, wire, .. }) =
        opening.into_iter().find(|t| matches!(t, Transmit::Fetch { .. }))
    else {
        panic!("the assignment opens a share session with broker 1");
    };
    (1, sent, sent_at, wire)
}

/// [`opening_fetch_wire`] without the wire.
fn opening_fetch(c: &mut DriverCore, t0: Instant) -> (i32, crate::share::session::Sent, Instant) {
    let (node, sent, sent_at, _) = opening_fetch_wire(c, t0);
    (node, sent, sent_at)
}

#[test]
fn a_fetch_says_its_versions_and_timeout_and_record_limit_needs_v2() {
    let t0 = Instant::now();
    let cfg = ShareConsumerConfig::new("broker1:9092", "g");
    let fetch_timeout = cfg.cluster.request_timeout + cfg.fetch_max_wait;
    let v1 = ApiVersions::from_ranges(1, &[(78, 1, 1)], &[]);
    let v2 = ApiVersions::from_ranges(1, &[(78, 1, 2)], &[]);
    // batch_optimized (the default): v1 or v2, whichever the broker speaks.
    let mut c = joining(t0);
    let (.., wire) = opening_fetch_wire(&mut c, t0);
    assert_eq!((wire.versions, wire.timeout), ((1, 2), fetch_timeout));
    assert!(wire.needs.is_none());
    assert_eq!(wire.version(78, &v1).ok(), Some(1));
    // record_limit: a v2 field, refused on a broker that picks v1, naming it.
    let cfg = cfg.acquire_mode(AcquireMode::RecordLimit);
    let mut c = joining_as(DriverCore::new(cfg, Arc::new(Shared::new(true, None)), Arc::new(OneTopic)), t0);
    let (.., wire) = opening_fetch_wire(&mut c, t0);
    assert_eq!((wire.versions, wire.timeout), ((1, 2), fetch_timeout), "it carries the fetch timeout");
    assert!(matches!(wire.needs, Some(Needs { version: 2, .. })), "{:?}", wire.needs);
    assert_eq!(wire.version(78, &v2).ok(), Some(2));
    match wire.version(78, &v1) {
        Err(Error::AcquireModeUnsupported { mode: AcquireMode::RecordLimit, broker: Some(1) }) => {}
        other => panic!("{other:?}"),
    }
}

/// The fetch `drive` just sent (a long poll): its node, `Sent` and send time.
/// A member whose session is open, a poll waiting and its long poll in flight (returned).
fn long_polling(t0: Instant) -> (DriverCore, (i32, crate::share::session::Sent, Instant)) {
    let mut c = fetching(t0);
    c.drive(t0);
    let in_flight = long_poll(&mut c);
    (c, in_flight)
}

/// [`long_polling`], its long poll answered at `t0` with offsets `0..=last` (delivery 1),
/// which the waiting poll took.
fn delivered(t0: Instant, last: i64) -> DriverCore {
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, last)) }, t0);
    c.drive(t0);
    let _ = perform(&mut c);
    c
}

fn long_poll(c: &mut DriverCore) -> (i32, crate::share::session::Sent, Instant) {
    let fetch = drain(c).into_iter().find_map(|t| match t {
        Transmit::Fetch { node, sent, sent_at, .. } => Some((node, sent, sent_at)),
        _ => None,
    });
    fetch.expect("a long poll is in flight")
}

fn accept(offset: i64) -> AckEntry {
    AckEntry {
        tp: TopicIdPartition { topic_id: topic_id(), partition: 0 },
        offset,
        delivery_count: 1,
        lock_deadline: None,
        kind: AckKind::Accept,
        node: 1,
        generation: 0,
        len: 1,
    }
}

#[test]
fn acks_in_flight_when_the_member_is_fenced_are_still_reported() {
    // Found by the simulation (seed 1103): a reset failed only the acks still queued, and the
    // answer to the request in flight was dropped as stale, so a commit waited forever.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    c.handle_command(Command::Commit { acks: vec![accept(5)], id: Some(ReplyId(2)) }, t0);
    c.drive(t0);
    let sent = drain(&mut c);
    let ack = sent.into_iter().find_map(|t| match t {
        Transmit::Acknowledge { node, sent, .. } => Some((node, sent)),
        Transmit::Fetch { node, sent, .. } if !sent.acks.is_empty() => Some((node, sent)),
        _ => None,
    });
    let Some((node, sent)) = ack else { panic!("the commit's ack goes out") };
    // Fenced while the ack is in flight: the sessions reset.
    let fenced = ShareGroupHeartbeatResponse::default().with_error_code(110);
    c.handle_event(Event::Heartbeat(Ok(fenced)), t0);
    c.drive(t0);
    assert!(perform(&mut c).commits.is_empty(), "the ack is still in flight");
    // Its answer (applied) comes back to a session that has moved on.
    c.handle_event(Event::Ack { node, sent, result: Ok(ShareAcknowledgeResponse::default()) }, t0);
    c.drive(t0);
    match perform(&mut c).commits.remove(&ReplyId(2)) {
        Some(results) => assert!(results.is_ok(), "{results:?}"),
        None => panic!("the commit was never answered"),
    }
}

#[test]
fn a_fenced_members_close_still_ends_the_sessions_the_brokers_keep() {
    // Found by the engine's simulation (seeds 1518, 2619): fenced, the member reset its
    // sessions and rejoined; closed before fetching again, it sent no final acknowledgement,
    // since no session was open on its side. The brokers still held the old sessions and
    // the records they acquired (a share-partition leader does not hear of a fence), so a
    // close answered Ok left records locked until their locks lapsed.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    let fenced = ShareGroupHeartbeatResponse::default().with_error_code(110);
    c.handle_event(Event::Heartbeat(Ok(fenced)), t0);
    c.drive(t0);
    let mut closes = Vec::new();
    let mut answer = |c: &mut DriverCore, sent: Vec<Transmit>| {
        for t in sent {
            match t {
                Transmit::Fetch { node, sent, sent_at, .. } => {
                    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t0)
                }
                Transmit::Acknowledge { node, sent, .. } => {
                    closes.push((node, sent.epoch));
                    let result = Ok(ShareAcknowledgeResponse::default());
                    c.handle_event(Event::Ack { node, sent, result }, t0)
                }
                _ => {} // the rejoin heartbeat stays in flight
            }
        }
    };
    let sent = drain(&mut c);
    assert!(sent.iter().any(|t| matches!(t, Transmit::Heartbeat { .. })), "the rejoin: {:?}", kinds(&sent));
    answer(&mut c, sent);
    c.handle_command(
        Command::Close { acks: Vec::new(), deadline: t0 + Duration::from_secs(5), id: Some(ReplyId(9)) },
        t0,
    );
    for _ in 0..3 {
        c.drive(t0);
        let sent = drain(&mut c);
        answer(&mut c, sent);
    }
    assert_eq!(closes, [(1, -1)], "one final acknowledgement, to the broker that keeps the session");
}

#[test]
fn queued_acks_do_not_spin_the_core_while_a_fetch_is_in_flight() {
    // Found by the simulation (seed 1, strict): acks queued past their linger while the
    // session's fetch was in flight kept poll_timeout in the past, so the shell spun.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    c.drive(t0);
    let in_flight: Vec<_> = drain(&mut c);
    assert!(in_flight.iter().any(|t| matches!(t, Transmit::Fetch { .. })), "a long poll is in flight");
    c.handle_command(poll(2, true, false, vec![accept(5)]), t0);
    c.drive(t0);
    drain(&mut c);
    let later = t0 + Duration::from_millis(300); // past the 100 ms linger
    c.drive(later);
    assert!(drain(&mut c).is_empty(), "one request in flight per session");
    assert!(c.poll_timeout(later) > later, "nothing to do until the fetch answers: no deadline in the past");
}

#[test]
fn an_ack_linger_starts_when_the_ack_is_queued_not_when_the_first_ack_ever_was() {
    // bench-peers (issue 11): in a steady stream acks were queued while every fetch was in
    // flight, so the session always had some and their linger ran from the first one: every
    // pause of the prefetch then sent a ShareAcknowledge at once (13 in a 2M-record run
    // instead of 1), each holding the session from the next fetch.
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_command(poll(2, true, false, vec![accept(5)]), t0);
    c.drive(t0);
    // The long poll answers after the linger: the next fetch carries the ack.
    let t1 = t0 + Duration::from_millis(300);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t1);
    c.drive(t1);
    let carried = drain(&mut c).iter().any(|t| matches!(t, Transmit::Fetch { sent, .. } if !sent.acks.is_empty()));
    assert!(carried, "the fetch after the answer carries the queued ack");
    // A new ack, queued a moment later while that fetch is in flight, has its own linger.
    let t2 = t1 + Duration::from_millis(1);
    c.handle_command(poll(3, true, false, vec![accept(6)]), t2);
    c.drive(t2);
    assert!(!acks_overdue(&c, 1, t2), "an ack queued just now is not overdue");
    assert!(acks_overdue(&c, 1, t2 + Duration::from_millis(100)), "after its own linger it is");
}

#[test]
fn a_renewal_counts_only_the_answer_of_the_broker_it_went_to() {
    // Found by the simulation (seeds 2657, 8031, 8383): a RENEW queued to broker 1 behind a
    // hung request; the partition's leader moved, broker 3 delivered the offset again and the
    // application accepted it there. That answer was taken for the renewal, so poll handed
    // the older delivery back as renewed.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    let tp = TopicIdPartition { topic_id: topic_id(), partition: 0 };
    c.renewing.insert((tp, 5), 1);
    let answered = |offset| BTreeMap::from([(tp, (crate::share::acks::Settled::reported(vec![offset]), Ok(())))]);
    c.complete_acks(Some(3), answered(5));
    assert!(c.renewed.is_empty(), "another broker's answer is not the renewal's");
    c.complete_acks(Some(1), answered(5));
    assert_eq!(c.renewed.len(), 1, "the answer of the broker the RENEW went to is");
    assert!(c.renewing.is_empty());
}

fn renew(offset: i64, lock_deadline: Option<Instant>) -> AckEntry {
    AckEntry { kind: AckKind::Renew, lock_deadline, ..accept(offset) }
}

#[test]
fn a_renewal_that_fails_here_still_answers_the_poll_waiting_for_it() {
    // A poll hands out nothing while renewals are pending (Java 4.4): a RENEW that failed
    // before it was sent (its lock had lapsed) must still have an outcome, or every later poll
    // of the application would come back empty.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    let lapsed = Some(t0 - Duration::from_millis(1));
    c.handle_command(poll(2, true, true, vec![renew(5, lapsed)]), t0);
    assert_eq!(c.renewed.len(), 1, "the failed renewal is the poll's answer");
    assert!(c.renewed[0].result.is_err());
}

#[test]
fn without_share_acknowledge_v2_a_renew_fails_here_and_is_never_sent() {
    // LANDSCAPE bug 13: a RENEW sent to a broker without v2 had its whole batch rejected.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    c.shared.renew_supported.store(false, std::sync::atomic::Ordering::Relaxed);
    c.handle_command(poll(2, true, true, vec![renew(5, None)]), t0);
    c.drive(t0);
    let sent = drain(&mut c);
    assert!(!sent.iter().any(|t| matches!(t, Transmit::Acknowledge { .. })), "{:?}", kinds(&sent));
    match perform(&mut c).polls.remove(&ReplyId(2)) {
        Some(Ok(answer)) => {
            assert!(matches!(answer.renewed[..], [super::Renewed { result: Err(Error::RenewUnsupported), .. }]))
        }
        other => panic!("the poll waiting for the renewal is answered: {other:?}"),
    }
}

#[test]
fn a_throttled_share_session_sends_nothing_until_the_throttle_ends() {
    // KIP-219: the broker answers at once and mutes the connection for throttle_time_ms.
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    let throttled = ShareFetchResponse { throttle_time_ms: 700, ..Default::default() };
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(throttled) }, t0);
    // Even a commit's acks wait for the connection: the broker would hold them anyway.
    c.handle_command(Command::Commit { acks: vec![accept(5)], id: Some(ReplyId(2)) }, t0);
    for ms in [0, 100, 699] {
        let now = t0 + Duration::from_millis(ms);
        c.drive(now);
        assert!(drain(&mut c).is_empty(), "sent at +{ms} ms while muted");
    }
    let end = t0 + Duration::from_millis(700);
    assert!(c.poll_timeout(t0 + Duration::from_millis(699)) <= end, "the core wakes when the throttle ends");
    c.drive(end);
    let sent = drain(&mut c);
    assert!(
        sent.iter().any(|t| matches!(t, Transmit::Acknowledge { .. } | Transmit::Fetch { .. })),
        "sends again once the throttle is over: {:?}",
        kinds(&sent)
    );
}

#[test]
fn a_throttled_heartbeat_connection_holds_the_next_heartbeat_back() {
    let t0 = Instant::now();
    let mut c = joining(t0);
    // Joined, told to heartbeat again in 100 ms, but muted for 2 s.
    let joined = ShareGroupHeartbeatResponse::default()
        .with_member_epoch(1)
        .with_heartbeat_interval_ms(100)
        .with_throttle_time_ms(2_000);
    c.handle_event(Event::Heartbeat(Ok(joined)), t0);
    let t1 = t0 + Duration::from_millis(500);
    c.drive(t1);
    assert!(!kinds(&drain(&mut c)).contains(&"heartbeat"), "a heartbeat on the muted connection");
    assert!(c.poll_timeout(t1) > t1, "the due heartbeat does not make the core spin while muted");
    let t2 = t0 + Duration::from_secs(2);
    c.drive(t2);
    assert!(kinds(&drain(&mut c)).contains(&"heartbeat"), "the heartbeat goes once the throttle is over");
}

#[test]
fn a_failed_coordinator_lookup_is_retried_by_the_core_after_a_backoff() {
    // The shell sends one FindCoordinator per Transmit; the waits between lookups are the
    // core's, in the time it is given (no sleeping loop in the shell).
    let t0 = Instant::now();
    let mut c = core();
    c.handle_command(Command::Subscribe(vec!["t".into()]), t0);
    c.drive(t0);
    assert_eq!(kinds(&drain(&mut c)), ["metadata", "find-coordinator"]);
    let refused = || Error::Io {
        addr: "broker1:9092".into(),
        source: Arc::new(std::io::Error::from(std::io::ErrorKind::ConnectionRefused)),
    };
    c.handle_event(Event::Coordinator(Err(refused())), t0);
    c.drive(t0);
    assert!(drain(&mut c).is_empty(), "no lookup at once after a failure");
    let first = c.poll_timeout(t0);
    assert!(first > t0 && first <= t0 + Duration::from_millis(120), "wakes for the retry (100 ms backoff, jittered)");
    c.drive(first);
    assert_eq!(kinds(&drain(&mut c)), ["find-coordinator"]);
    // The next failure waits longer (the backoff doubles).
    c.handle_event(Event::Coordinator(Err(refused())), first);
    c.drive(first + Duration::from_millis(150));
    assert!(drain(&mut c).is_empty(), "the second retry waits longer (200 ms, jittered)");
    let second = c.poll_timeout(first);
    assert!(second >= first + Duration::from_millis(160), "{:?}", second - first);
    c.drive(second);
    assert_eq!(kinds(&drain(&mut c)), ["find-coordinator"]);
    // Found: the join heartbeat goes.
    c.handle_event(Event::Coordinator(Ok(1)), second);
    c.drive(second);
    assert_eq!(kinds(&drain(&mut c)), ["heartbeat"]);
}

#[test]
fn a_consumer_whose_login_fails_sends_nothing_more_until_it_closes() {
    // A coordinator lookup that cannot log in fails the consumer. Every poll says so from
    // then on, so nothing more is sent behind the application's back: each request would
    // dial, and ask the token provider, again (CI saw one a second, for as long as it lived).
    let t0 = Instant::now();
    let mut c = core();
    c.handle_command(Command::Subscribe(vec!["t".into()]), t0);
    c.drive(t0);
    assert_eq!(kinds(&drain(&mut c)), ["metadata", "find-coordinator"]);
    let login = Error::Authentication { mechanism: "OAUTHBEARER".into(), message: "revoked".into() };
    c.handle_event(Event::Coordinator(Err(login)), t0);
    c.handle_event(
        Event::Metadata(Err(Error::Authentication { mechanism: "OAUTHBEARER".into(), message: "revoked".into() })),
        t0,
    );
    c.handle_command(poll(1, true, false, Vec::new()), t0);
    c.drive(t0);
    let polled = perform(&mut c).polls.remove(&ReplyId(1));
    assert!(matches!(polled, Some(Err(Error::Authentication { .. }))), "{polled:?}");
    for later in [t0, t0 + Duration::from_secs(1), t0 + Duration::from_secs(60)] {
        c.drive(later);
        assert!(drain(&mut c).is_empty(), "nothing goes {:?} after the failure", later - t0);
        if let Some((timer, _)) = c.next_timer(later) {
            assert_eq!(timer, super::timers::Timer::PollInterval, "only the poll interval may wake it");
        }
    }
    // A close still tries to leave: the lookup goes again, and a failure backs off.
    let t1 = t0 + Duration::from_secs(61);
    c.handle_command(
        Command::Close { acks: Vec::new(), deadline: t1 + Duration::from_secs(5), id: Some(ReplyId(2)) },
        t1,
    );
    c.drive(t1);
    assert!(kinds(&drain(&mut c)).contains(&"find-coordinator"));
    let login = Error::Authentication { mechanism: "OAUTHBEARER".into(), message: "revoked".into() };
    c.handle_event(Event::Coordinator(Err(login)), t1);
    c.drive(t1);
    assert!(drain(&mut c).is_empty(), "no lookup at once after a failure, fatal or not");
}

/// The lock the answers of [`buffered`] report: a quarter is the idle time.
const LOCK: Duration = Duration::from_millis(4000);

/// A fetch answer acquiring offsets `first..=last` of t-0 (delivery 1), under [`LOCK`].
fn acquired(first: i64, last: i64) -> ShareFetchResponse {
    acquired_as(first, last, 1)
}

/// [`acquired`], as delivery `delivery_count`.
fn acquired_as(first: i64, last: i64, delivery_count: i16) -> ShareFetchResponse {
    use crate::protocol::records::{BatchBuilder, Compression, RecordInput};
    use crate::protocol::share::{AcquiredRecords, FetchPartitionResponse, FetchTopicResponse};
    let mut b = BatchBuilder::new();
    for o in first..=last {
        let rec = RecordInput { key: None, value: Some(format!("v{o}").into()), headers: Vec::new(), timestamp: o };
        b.push(&rec).expect("a small record fits a batch");
    }
    let mut batch = bytes::BytesMut::from(&b.finish(Compression::None).expect("an uncompressed batch")[..]);
    // The base offset is outside the CRC: patching it keeps the batch valid.
    batch[..8].copy_from_slice(&first.to_be_bytes());
    let partition = FetchPartitionResponse {
        records: Some(batch.freeze()),
        acquired_records: vec![AcquiredRecords { first_offset: first, last_offset: last, delivery_count }],
        ..Default::default()
    };
    ShareFetchResponse {
        acquisition_lock_timeout_ms: LOCK.as_millis() as i32,
        responses: vec![FetchTopicResponse { topic_id: topic_id(), partitions: vec![partition] }],
        ..Default::default()
    }
}

/// Joined and fetching; the waiting poll took 10 of 30 records acquired at `t0`, and the
/// other 20 are buffered with no poll waiting. Fetches sent meanwhile are answered empty.
fn buffered(t0: Instant) -> DriverCore {
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 29)) }, t0);
    c.drive(t0);
    answer_fetches(&mut c, t0);
    assert_eq!(c.buffer.iter().map(|f| f.records.len()).sum::<usize>(), 20, "the poll took 10 of 30");
    assert!(c.waiter.is_none(), "no poll waits");
    c
}

/// Answers every fetch `drive` sent with nothing; panics on a RELEASE in anything sent.
#[track_caller]
fn answer_fetches(c: &mut DriverCore, now: Instant) {
    for t in drain(c) {
        let sent = match &t {
            Transmit::Fetch { sent, .. } | Transmit::Acknowledge { sent, .. } => sent,
            _ => continue,
        };
        let released = sent
            .acks
            .values()
            .flat_map(|a| a.iter())
            .any(|(_, k)| matches!(k, AckKind::Release | AckKind::ReleaseUnseen));
        assert!(!released, "a RELEASE was sent: the application was taken for idle");
        if let Transmit::Fetch { node, sent, sent_at, .. } = t {
            c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, now);
            c.drive(now);
        }
    }
}

/// Whether broker `id`'s queued acks would go on their own now (the session manager's
/// decision, given the core's demand).
fn acks_overdue(c: &DriverCore, id: i32, now: Instant) -> bool {
    let d = super::sessions::Demand {
        buffer: &c.buffer,
        waiting: c.waiting_for_records(),
        app_idle: c.app_idle(now),
        drain_per_sec: c.drain.per_sec(now),
        poll_size: c.poll_size,
        lock: c.lock_duration(),
        can_fetch: c.fatal.is_none() && c.group.is_active(),
        commits: &c.commits,
        eager_acks: c.eager_acks,
        member: c.group.member_id(),
        renew_ok: true,
    };
    c.sessions.acks_overdue(id, now, &d)
}

fn released_unseen(c: &DriverCore) -> f64 {
    c.shared
        .metrics
        .snapshot()
        .get(crate::consumer::FETCH_MANAGER, "records-released-unseen-total")
        .unwrap_or(0.0)
}

/// Whether RELEASE acks are queued on broker 1's session.
fn releases_queued(c: &DriverCore) -> bool {
    c.sessions.releases_queued(1)
}

#[test]
fn an_application_inside_commit_sync_is_not_idle_and_its_buffered_records_stay() {
    // A commit the broker holds for seconds (a leader failover): the application waits inside
    // commit_sync. Released meanwhile, its prefetched records would come back with delivery
    // count 2, and the RELEASEs would go to the stuck broker and fail in the commit callback.
    let t0 = Instant::now();
    let mut c = buffered(t0);
    c.handle_command(Command::Busy(true), t0);
    for ms in [LOCK.as_millis() as u64 / 4, LOCK.as_millis() as u64 / 2 + 100, LOCK.as_millis() as u64 * 3 / 4] {
        let now = t0 + Duration::from_millis(ms);
        c.drive(now);
        answer_fetches(&mut c, now);
        assert!(!releases_queued(&c), "RELEASE queued at +{ms} ms");
        assert_eq!(c.buffer.iter().map(|f| f.records.len()).sum::<usize>(), 20, "at +{ms} ms");
        assert!(!c.app_idle(now), "idle at +{ms} ms while inside commit_sync");
    }
    assert_eq!(released_unseen(&c), 0.0);
    assert_eq!(c.idle_deadline(), None, "no idle deadline while the application is busy");
}

#[test]
fn after_a_waiting_call_returns_the_idle_quarter_lock_starts_then() {
    let t0 = Instant::now();
    let mut c = buffered(t0);
    c.handle_command(Command::Busy(true), t0);
    // Two calls at once (a commit_sync and a processing engine's wait): both must end.
    c.handle_command(Command::Busy(true), t0);
    let back = t0 + LOCK / 2;
    c.handle_command(Command::Busy(false), back);
    c.drive(back);
    answer_fetches(&mut c, back);
    assert!(!releases_queued(&c) && released_unseen(&c) == 0.0, "released while one call still waits");
    assert!(!c.app_idle(back + LOCK), "one call still waits");
    c.handle_command(Command::Busy(false), back);
    c.drive(back);
    answer_fetches(&mut c, back);
    assert!(!releases_queued(&c), "released at once when the call returned");
    assert_eq!(c.idle_deadline(), Some(back + LOCK / 4), "the idle time counts from the return");
    let almost = back + LOCK / 4 - Duration::from_millis(1);
    c.drive(almost);
    answer_fetches(&mut c, almost);
    assert!(!releases_queued(&c) && released_unseen(&c) == 0.0, "released before a quarter lock");
    // A quarter lock after the return, no poll came: the application did stop.
    let idle = back + LOCK / 4;
    c.drive(idle);
    let released: usize = drain(&mut c)
        .iter()
        .filter_map(|t| match t {
            Transmit::Acknowledge { sent, .. } => Some(sent),
            _ => None,
        })
        .flat_map(|sent| sent.acks.values().flat_map(|a| a.iter()))
        .filter(|(_, k)| *k == AckKind::ReleaseUnseen)
        .count();
    assert!(c.buffer.is_empty(), "nothing left buffered");
    assert_eq!(released, 20, "the 20 buffered records go back at once, by ShareAcknowledge");
    assert_eq!(released_unseen(&c), 20.0);
    // A stray Busy(false) (more than entered) changes nothing and does not panic.
    c.handle_command(Command::Busy(false), idle);
    assert_eq!(c.activity.busy, 0);
}

/// The offsets of the RELEASEs among `ts`, with the request that carries them.
fn releases_in(ts: Vec<Transmit>) -> (Vec<i64>, Option<(i32, crate::share::session::Sent)>) {
    for t in ts {
        if let Transmit::Acknowledge { node, sent, .. } = t {
            let released: Vec<i64> = sent
                .acks
                .values()
                .flat_map(|a| a.iter())
                .filter(|(_, k)| *k == AckKind::ReleaseUnseen)
                .map(|(o, _)| o)
                .collect();
            return (released, Some((node, sent)));
        }
    }
    (Vec::new(), None)
}

/// The offsets the completions queued so far report, with their results (what the
/// acknowledgement commit callback is told).
fn completed(c: &mut DriverCore) -> Vec<(i64, bool)> {
    std::iter::from_fn(|| c.poll_event())
        .filter_map(|o| match o {
            super::Output::AckCompleted { offsets, result, .. } => {
                Some(offsets.into_iter().map(move |o| (o, result.is_ok())).collect::<Vec<_>>())
            }
            _ => None,
        })
        .flatten()
        .collect()
}

#[test]
fn an_ack_waiting_behind_a_fetch_that_brings_its_record_again_is_not_sent() {
    // Simulation seed 4087 (the engine's, past the first 4,000): an ack waited behind a fetch
    // in flight; that fetch's answer brought the same offset again (its lock had lapsed:
    // delivery 2), and the next fetch carried the ack, which the broker applied to the new
    // delivery, one the application had not seen.
    let t0 = Instant::now();
    let mut c = delivered(t0, 4);
    let t1 = t0 + Duration::from_millis(10);
    c.handle_command(poll(2, true, false, Vec::new()), t1);
    c.drive(t1);
    let (node, sent, sent_at) = long_poll(&mut c);
    // Offsets 2 and 3 are accepted while the long poll is out: queued behind it.
    c.handle_command(Command::Outcomes(vec![accept(2), accept(3)]), t1);
    c.drive(t1);
    assert!(drain(&mut c).is_empty(), "one request at a time on a share session");
    // The answer brings offset 2 again, as delivery 2.
    let t2 = t1 + Duration::from_secs(5);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired_as(2, 2, 2)) }, t2);
    c.drive(t2);
    let acked: Vec<i64> = drain(&mut c)
        .into_iter()
        .filter_map(|t| match t {
            Transmit::Fetch { sent, .. } | Transmit::Acknowledge { sent, .. } => Some(sent),
            _ => None,
        })
        .flat_map(|sent| sent.acks.into_values().flat_map(|a| a.settled().reported))
        .collect();
    assert_eq!(acked, [3], "offset 2's ack was for the delivery before: not sent");
    assert_eq!(completed(&mut c), [(2, false)], "it fails (LockExpired, redelivered) at once");
}

#[test]
fn a_record_that_comes_between_back_to_back_polls_is_delivered_not_released() {
    // Issue 34: a poll waits longer than a quarter of the lock and gives up empty; its long
    // poll is still on the broker. A record produced just then answers that fetch while no
    // poll waits, and the application polls again 15 ms later. Taking the age of the last
    // poll's arrival as idle time, the core released the record unseen (delivery count 2 on
    // its way back) although the application never stopped polling.
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    assert!(c.waiter.is_none(), "the first poll took offsets 0..=9");
    let _ = perform(&mut c);
    // The next poll, 15 ms later, waits: a long poll leaves for it.
    let second = t0 + Duration::from_millis(15);
    c.handle_command(poll(2, true, false, Vec::new()), second);
    c.drive(second);
    let (node, sent, sent_at) = long_poll(&mut c);
    // It gives up after 1.5 s (the lock is 4 s: idle after 1 s); the shell hears of that only
    // when the fetch's answer comes, with offset 10, 5 ms later.
    let answered = second + Duration::from_millis(1505);
    c.handle_command(Command::PollAbandoned(ReplyId(2)), answered);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(10, 10)) }, answered);
    c.drive(answered);
    let (released, _) = releases_in(drain(&mut c));
    assert!(released.is_empty(), "released {released:?} while the application polls");
    assert!(!releases_queued(&c), "RELEASE queued for a polling application");
    assert_eq!(released_unseen(&c), 0.0);
    assert_eq!(c.idle_deadline(), Some(answered + LOCK / 4), "idle counts from the end of the poll");
    // The application's next poll, 15 ms on, gets the record at its first delivery.
    let third = answered + Duration::from_millis(15);
    c.handle_command(poll(3, false, false, Vec::new()), third);
    match perform(&mut c).polls.remove(&ReplyId(3)) {
        Some(Ok(answer)) => {
            let got: Vec<(i64, i16)> =
                answer.records.iter().map(|d| (d.record.offset, d.record.delivery_count)).collect();
            assert_eq!(got, [(10, 1)]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_poll_waiting_for_renewals_that_gives_up_does_not_count_as_taking_records() {
    // Such a poll takes no records (see `waiting_for_records`): its end leaves the idle
    // clock where the last poll for records put it.
    let t0 = Instant::now();
    let mut c = buffered(t0);
    c.handle_command(poll(2, true, true, Vec::new()), t0);
    let later = t0 + LOCK / 2;
    c.handle_command(Command::PollAbandoned(ReplyId(2)), later);
    c.drive(later);
    assert!(c.waiter.is_none());
    assert!(c.buffer.is_empty() && released_unseen(&c) == 20.0, "idle since t0: the 20 buffered records went back");
}

#[test]
fn the_clients_own_releases_are_not_reported_as_the_applications_acknowledgements() {
    // The application stops polling with 20 records buffered: the core RELEASEs them. The
    // acknowledgement commit callback and a commit must hear only of the application's own
    // acknowledgement (offset 5, accepted), not of the 20 the application never saw.
    let t0 = Instant::now();
    let mut c = buffered(t0);
    let _ = completed(&mut c);
    let idle = t0 + LOCK / 4;
    c.handle_command(Command::Commit { acks: vec![accept(5)], id: Some(ReplyId(9)) }, idle);
    c.drive(idle);
    let (released, request) = releases_in(drain(&mut c));
    assert_eq!(released, (10..30).collect::<Vec<i64>>(), "the unseen records go back");
    assert_eq!(released_unseen(&c), 20.0);
    let (node, sent) = request.expect("a ShareAcknowledge carries them");
    assert!(sent.acks.values().flat_map(|a| a.iter()).any(|(o, k)| o == 5 && k == AckKind::Accept));
    c.handle_event(Event::Ack { node, sent, result: Ok(ShareAcknowledgeResponse::default()) }, idle);
    c.drive(idle);
    let shared = c.shared.clone();
    let mut answers = Answers::default();
    let mut told = Vec::new();
    while let Some(out) = c.poll_event() {
        if let super::Output::AckCompleted { offsets, result, .. } = &out {
            told.extend(offsets.iter().map(|o| (*o, result.is_ok())));
        }
        assert!(out.perform(&shared, &mut answers).is_none());
    }
    assert_eq!(told, [(5, true)], "the callback hears of the application's acknowledgement only");
    let commit = answers.commits.remove(&ReplyId(9)).expect("the commit is answered");
    assert!(commit.is_ok() && commit.len() == 1, "{commit:?}");
}

#[test]
fn the_clients_releases_that_fail_are_not_reported_either() {
    // The session is lost with the RELEASEs queued: they fail here, and the callback still
    // hears nothing of records the application never saw.
    let t0 = Instant::now();
    let mut c = buffered(t0);
    let _ = completed(&mut c);
    let idle = t0 + LOCK / 4;
    c.drive(idle);
    let (released, request) = releases_in(drain(&mut c));
    assert_eq!(released.len(), 20);
    let (node, sent) = request.expect("a ShareAcknowledge carries them");
    c.handle_event(Event::Ack { node, sent, result: Err(Error::Closed) }, idle);
    c.drive(idle);
    assert_eq!(completed(&mut c), [], "no completion for the client's own releases");
}

#[test]
fn two_releases_of_one_offset_by_the_client_are_never_the_applications() {
    // Simulation seeds 361473, 425791 and 430649: the client released offset 15 fetched ahead
    // from broker 2 (delivery 1) when the leader moved, then released it again as delivery 2
    // from broker 3 when the partition went. The second release was answered first and took
    // away the client's note of the offset, so the first one, timed out 30 s later with its
    // outcome unknown, was reported to the callback as the application's. Each completion
    // now carries the kind its acks were queued with: however the two end, in whatever
    // order, neither is reported. The application's own ack of that offset still is.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    let tp = TopicIdPartition { topic_id: topic_id(), partition: 1 };
    let release = |first, last| {
        let mut a = PartitionAcks::default();
        a.add_range(first, last, AckKind::ReleaseUnseen);
        a.settled()
    };
    let unknown =
        Error::OutcomeUnknown { api: "ShareAcknowledge", addr: "broker-2:9092".into(), cause: Arc::new(Error::Closed) };
    c.complete_acks(Some(3), BTreeMap::from([(tp, (release(10, 16), Ok(())))]));
    c.complete_acks(Some(2), BTreeMap::from([(tp, (release(15, 19), Err(unknown.clone())))]));
    assert_eq!(completed(&mut c), [], "the client's releases are reported by no path");
    let mut app = PartitionAcks::default();
    app.add(15, AckKind::Accept);
    app.add(16, AckKind::ReleaseUnseen);
    c.complete_acks(Some(3), BTreeMap::from([(tp, (app.settled(), Err(unknown)))]));
    assert_eq!(completed(&mut c), [(15, false)], "the application's ack of the same offset is");
}

#[test]
fn the_engines_outcomes_do_not_linger_and_the_public_acks_still_do() {
    // The processing engine asks for records only as slots free, so a fetch to carry its
    // acks may not come soon; lingering, they kept the partition's lock budget taken
    // (bench-sink, one task: 672-698k records/s lingering, 788-870k not).
    let t0 = Instant::now();
    let (mut c, _) = long_polling(t0);
    c.handle_command(Command::Commit { acks: vec![accept(5)], id: None }, t0);
    assert!(!acks_overdue(&c, 1, t0), "a public ack nobody waits for lingers");
    c.handle_command(Command::Outcomes(vec![accept(6)]), t0);
    assert!(acks_overdue(&c, 1, t0), "from the engine's first outcome, queued acks go at once");
}

#[test]
fn an_idle_member_wakes_for_its_heartbeat_only() {
    // A stable member with a poll waiting and its long poll in flight: nothing to do but
    // the next heartbeat (interval 5 s). No one-second tick on top.
    let t0 = Instant::now();
    let (mut c, _in_flight) = long_polling(t0);
    let (timer, at) = c.next_timer(t0).expect("the heartbeat is armed");
    assert_eq!(timer, super::timers::Timer::Heartbeat);
    assert_eq!(at, t0 + Duration::from_millis(5000));
    assert_eq!(c.poll_timeout(t0), at);
    // Driven early (a spurious wake) it sends nothing and still waits for the heartbeat.
    c.drive(t0 + Duration::from_secs(1));
    assert!(drain(&mut c).is_empty());
    assert_eq!(c.poll_timeout(t0 + Duration::from_secs(1)), at);
    c.drive(at);
    assert_eq!(kinds(&drain(&mut c)), ["heartbeat"]);
}

#[test]
fn a_consumer_subscribed_to_nothing_arms_no_timer() {
    let c = core();
    assert_eq!(c.next_timer(Instant::now()), None);
}

#[test]
fn closing_a_consumer_with_nothing_to_end_finishes_in_the_same_turn() {
    // Never subscribed: no session to end, no group to leave. Nothing will come back to drive
    // the core again (no request is sent, no timer but the close's deadline is armed), so
    // the close must finish in the turn that started it, not at its deadline.
    let t0 = Instant::now();
    let mut c = core();
    c.handle_command(
        Command::Close { acks: Vec::new(), deadline: t0 + Duration::from_secs(5), id: Some(ReplyId(1)) },
        t0,
    );
    c.drive(t0);
    assert!(drain(&mut c).is_empty());
    assert!(c.is_finished(t0), "finished at once, not at the deadline");
    assert!(matches!(perform(&mut c).closes.remove(&ReplyId(1)), Some(Ok(()))), "the close succeeded");
}

/// The fetches `drive` sent: (node, sent, sent_at, max_wait_ms).
fn fetches(c: &mut DriverCore) -> Vec<(i32, crate::share::session::Sent, Instant, i32)> {
    drain(c)
        .into_iter()
        .filter_map(|t| match t {
            Transmit::Fetch { node, request, sent, sent_at, .. } => Some((node, sent, sent_at, request.max_wait_ms)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_parked_session_whose_records_are_out_does_not_long_poll_over_their_acks() {
    // The processing engine holds records in running handlers and a poll waits for more; the
    // broker has nothing more (a slow record pins the partition's window). A long poll then
    // would hold the handlers' acks behind it for fetch.max.wait.ms, and they are what frees
    // the window (bench-sink's head-of-line case: 19k records/s, 51k without).
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    assert!(c.buffer.is_empty() && c.waiter.is_none(), "the waiting poll took all 10");
    drain(&mut c);
    // The next poll waits; its fetch (no wait: records are out) comes back empty and parks.
    let t1 = t0 + Duration::from_millis(10);
    c.handle_command(poll(2, true, false, Vec::new()), t1);
    c.drive(t1);
    let sent = fetches(&mut c);
    assert_eq!(sent.iter().map(|f| f.3).collect::<Vec<_>>(), vec![0], "one no-wait fetch");
    for (node, sent, sent_at, _) in sent {
        c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t1);
    }
    assert!(c.sessions.parked(1));
    c.drive(t1);
    assert!(fetches(&mut c).is_empty(), "no long poll over the records that are out");
    // After the quiet time: a no-wait look, not a long poll.
    let t2 = t1 + c.sessions.park_limit();
    c.drive(t2);
    assert_eq!(fetches(&mut c).iter().map(|f| f.3).collect::<Vec<_>>(), vec![0]);
}

#[test]
fn record_limit_does_not_long_poll_over_the_acks_of_records_that_are_out() {
    // Issue 36: the engine under record_limit (its default on 4.2+) holds records in running
    // handlers while its next poll waits. A long poll for that poll, when the broker has
    // nothing to give (a slow record pins the partition's window), held the handlers' acks
    // (the slow record's among them: the very ack that frees the window) behind it for
    // fetch.max.wait.ms: bench-process saw fetches of 505 ms beside a mean of 2.5 ms.
    let wait = super::sessions::ACK_CARRYING_WAIT.as_millis() as i32;
    let t0 = Instant::now();
    let cfg = ShareConsumerConfig::new("broker1:9092", "g").acquire_mode(AcquireMode::RecordLimit);
    let mut c = joining_as(DriverCore::new(cfg, Arc::new(Shared::new(true, None)), Arc::new(OneTopic)), t0);
    let (node, sent, sent_at) = opening_fetch(&mut c, t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    assert!(c.buffer.is_empty() && c.waiter.is_none(), "the waiting poll took all 10");
    drain(&mut c);
    // An outcome, then the engine's next poll: its fetch carries the ack and waits a little.
    let t1 = t0 + Duration::from_millis(10);
    c.handle_command(Command::Outcomes(vec![accept(0)]), t1);
    c.handle_command(poll(2, true, false, Vec::new()), t1);
    c.drive(t1);
    let sent = fetches(&mut c);
    assert_eq!(sent.iter().map(|f| (f.3, !f.1.acks.is_empty())).collect::<Vec<_>>(), vec![(wait, true)]);
    for (node, sent, sent_at, _) in sent {
        c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t1);
    }
    assert!(!c.sessions.parked(1), "an empty answer to a fetch that carried acks does not park");
    // The poll still waits: a look without waiting, which comes back empty and parks.
    c.drive(t1);
    let sent = fetches(&mut c);
    assert_eq!(sent.iter().map(|f| (f.3, !f.1.acks.is_empty())).collect::<Vec<_>>(), vec![(0, false)]);
    for (node, sent, sent_at, _) in sent {
        c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t1);
    }
    assert!(c.sessions.parked(1));
    c.drive(t1);
    assert!(drain(&mut c).is_empty(), "parked: no spinning on empty answers, no long poll over the records out");
    // The next outcome un-parks it: its fetch carries it.
    let t2 = t1 + Duration::from_millis(1);
    c.handle_command(Command::Outcomes(vec![accept(1)]), t2);
    c.drive(t2);
    let sent = fetches(&mut c);
    assert_eq!(sent.iter().map(|f| (f.3, !f.1.acks.is_empty())).collect::<Vec<_>>(), vec![(wait, true)]);
}

#[test]
fn record_limit_acks_wait_briefly_for_the_next_polls_fetch() {
    // Issue 36: sent at once, the engine's outcomes under record_limit went alone
    // (ShareAcknowledge) about as often as it fetched, each holding the session from the
    // fetch of its next poll for a round trip. They wait a little for that fetch now.
    let t0 = Instant::now();
    let cfg = ShareConsumerConfig::new("broker1:9092", "g").acquire_mode(AcquireMode::RecordLimit);
    let mut c = joining_as(DriverCore::new(cfg, Arc::new(Shared::new(true, None)), Arc::new(OneTopic)), t0);
    let (node, sent, sent_at) = opening_fetch(&mut c, t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    drain(&mut c);
    c.handle_command(Command::Outcomes(vec![accept(0)]), t0);
    c.drive(t0);
    assert!(drain(&mut c).is_empty(), "no ShareAcknowledge at once");
    assert!(!acks_overdue(&c, 1, t0 + Duration::from_millis(1)));
    // The next poll comes: its fetch carries the ack.
    let t1 = t0 + Duration::from_millis(1);
    c.handle_command(poll(2, true, false, Vec::new()), t1);
    c.drive(t1);
    let sent = fetches(&mut c);
    assert_eq!(sent.len(), 1);
    assert!(!sent[0].1.acks.is_empty(), "the poll's fetch carries the ack");
    // With no poll coming, an ack goes alone after the short linger.
    let (node, sent, sent_at, _) = sent.into_iter().next().expect("one fetch");
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(10, 19)) }, t1);
    c.drive(t1);
    drain(&mut c);
    c.handle_command(Command::Outcomes(vec![accept(1)]), t1);
    c.drive(t1);
    assert!(drain(&mut c).is_empty());
    let (_, at) = c.next_timer(t1).expect("a timer for the linger");
    assert!(at <= t1 + Duration::from_millis(2), "woken when the linger ends");
    c.drive(t1 + Duration::from_millis(2));
    assert_eq!(kinds(&drain(&mut c)), ["acknowledge"]);
}

#[test]
fn a_no_wait_fetch_that_carries_acks_waits_a_little_for_them_to_free_records() {
    // Answered at once, such a fetch often comes back empty: the broker looks for records
    // before the acks beside them free any, and the next fetch gets them a round trip later
    // (39% of the sink's fetches were empty; 71% of the public consumer's fetches carrying
    // acks on a 3-node cluster). A short wait lets the broker answer once they do: the
    // engine's acks and the public poll's alike.
    let wait = super::sessions::ACK_CARRYING_WAIT.as_millis() as i32;
    for (engine, expected) in [(false, wait), (true, wait)] {
        let t0 = Instant::now();
        let (mut c, (node, sent, sent_at)) = long_polling(t0);
        c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
        c.drive(t0);
        drain(&mut c);
        // Records are out with the application; a poll waits, with acks for some of them.
        let t1 = t0 + Duration::from_millis(10);
        let acks = vec![accept(0), accept(1)];
        if engine {
            c.handle_command(Command::Outcomes(acks), t1);
            c.handle_command(poll(2, true, false, Vec::new()), t1);
        } else {
            c.handle_command(poll(2, true, false, acks), t1);
        }
        c.drive(t1);
        let sent: Vec<(i32, bool)> = fetches(&mut c).iter().map(|f| (f.3, !f.1.acks.is_empty())).collect();
        assert_eq!(sent, vec![(expected, true)], "engine {engine}: one fetch carrying the acks");
    }
}

#[test]
fn each_acquired_range_of_a_response_is_buffered_as_its_own_batch() {
    // The engine holds ACCEPTs until their acquired batch is whole (`processor/whole_batches.rs`),
    // so a record must say which range it came in, even when one answer has several.
    use crate::protocol::share::AcquiredRecords;
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    let mut answer = acquired(0, 9);
    answer.responses[0].partitions[0].acquired_records = vec![
        AcquiredRecords { first_offset: 0, last_offset: 3, delivery_count: 1 },
        AcquiredRecords { first_offset: 4, last_offset: 9, delivery_count: 2 },
    ];
    // No poll takes them: they stay buffered as they came.
    c.waiter = None;
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(answer) }, t0);
    let batches: Vec<((i64, i64), usize)> = c.buffer.iter().map(|f| (f.batch, f.records.len())).collect();
    assert_eq!(batches, vec![((0, 3), 4), ((4, 9), 6)]);
}

/// The epochs outputs queued so far (other outputs dropped).
fn epochs_told(c: &mut DriverCore) -> Vec<BTreeMap<i32, i32>> {
    std::iter::from_fn(|| c.poll_event())
        .filter_map(|o| match o {
            super::Output::SessionEpochs(e) => Some(e),
            _ => None,
        })
        .collect()
}

#[test]
fn session_epochs_are_told_when_they_change_and_not_on_every_turn() {
    let t0 = Instant::now();
    let mut c = fetching(t0);
    c.drive(t0);
    assert_eq!(epochs_told(&mut c), [BTreeMap::from([(1, 1)])], "the session opened: its next epoch");
    for ms in 1..20 {
        c.drive(t0 + Duration::from_millis(ms));
    }
    assert!(epochs_told(&mut c).is_empty(), "nothing changed: nothing told");
    let (node, sent, sent_at) = long_poll(&mut c);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(ShareFetchResponse::default()) }, t0);
    c.drive(t0);
    assert_eq!(epochs_told(&mut c), [BTreeMap::from([(1, 2)])], "the answer moved the epoch");
}

#[test]
fn a_completion_is_queued_before_the_commit_reply_it_settles() {
    // The handle runs the callback when the reply wakes it: the completion must be recorded
    // first, so it comes first in the one queue the shell performs in order.
    let t0 = Instant::now();
    let mut c = fetching(t0);
    let _ = std::iter::from_fn(|| c.poll_event()).count();
    c.handle_command(Command::Commit { acks: vec![accept(5)], id: Some(ReplyId(2)) }, t0);
    c.drive(t0);
    for t in drain(&mut c) {
        match t {
            Transmit::Acknowledge { node, sent, .. } => {
                c.handle_event(Event::Ack { node, sent, result: Ok(ShareAcknowledgeResponse::default()) }, t0)
            }
            Transmit::Fetch { node, sent, sent_at, .. } => {
                let result = Ok(ShareFetchResponse::default());
                c.handle_event(Event::Fetch { node, sent, sent_at, result }, t0)
            }
            _ => {}
        }
    }
    c.drive(t0);
    let order: Vec<&str> = std::iter::from_fn(|| c.poll_event())
        .filter_map(|o| match o {
            super::Output::AckCompleted { offsets, result, .. } => {
                assert_eq!((offsets, result.is_ok()), (vec![5], true));
                Some("completed")
            }
            super::Output::Committed { .. } => Some("committed"),
            _ => None,
        })
        .collect();
    assert_eq!(order, ["completed", "committed"]);
}

#[test]
fn records_of_a_poll_gone_before_its_answer_is_sent_come_back() {
    let t0 = Instant::now();
    let mut c = buffered(t0);
    c.handle_command(poll(2, true, false, Vec::new()), t0);
    c.drive(t0);
    assert_eq!(c.buffer.iter().map(|f| f.records.len()).sum::<usize>(), 10, "the poll's answer is decided");
    // The poll gave up before the shell sent it.
    let gone = Answers { gone: HashSet::from([ReplyId(2)]), ..Default::default() };
    assert!(!perform_to(&mut c, gone).polls.contains_key(&ReplyId(2)));
    assert_eq!(c.buffer.iter().map(|f| f.records.len()).sum::<usize>(), 20, "all of it is back");
    assert_eq!(c.buffer.front().and_then(|f| f.records.front()).map(|r| r.offset), Some(10), "in order");
}

#[test]
fn a_poll_abandoned_before_records_came_is_never_answered_and_they_stay_buffered() {
    let t0 = Instant::now();
    let mut c = buffered(t0);
    c.handle_command(poll(2, true, false, Vec::new()), t0);
    c.handle_command(Command::PollAbandoned(ReplyId(7)), t0);
    assert!(c.waiter.as_ref().is_some_and(|w| !w.abandoned), "another poll's id changes nothing");
    c.handle_command(Command::PollAbandoned(ReplyId(2)), t0);
    c.drive(t0);
    assert!(c.waiter.is_none(), "the core forgot the poll");
    assert!(!perform(&mut c).polls.contains_key(&ReplyId(2)), "and answered nothing");
    assert_eq!(c.buffer.iter().map(|f| f.records.len()).sum::<usize>(), 20, "the records stay for the next poll");
}

// --- what `drive` decides on each wake (every decider runs; those with nothing to do do nothing) ---

#[test]
fn a_heartbeat_with_nothing_else_going_on_sends_the_heartbeat_only() {
    // A stable member with a poll waiting and its long poll in flight: its heartbeat timer
    // expires, and later the answer comes. Neither sends anything else nor answers the poll.
    let t0 = Instant::now();
    let (mut c, _in_flight) = long_polling(t0);
    let at = t0 + Duration::from_millis(5000);
    c.drive(at - Duration::from_millis(1));
    assert!(drain(&mut c).is_empty(), "a spurious wake decides nothing");
    c.drive(at);
    assert_eq!(kinds(&drain(&mut c)), ["heartbeat"]);
    let ok = ShareGroupHeartbeatResponse::default().with_member_epoch(1).with_heartbeat_interval_ms(5000);
    let answered = at + Duration::from_millis(3);
    c.handle_event(Event::Heartbeat(Ok(ok)), answered);
    c.drive(answered);
    assert!(drain(&mut c).is_empty());
    assert!(c.waiter.is_some(), "the poll still waits for records");
    assert_eq!(c.poll_timeout(answered), answered + Duration::from_millis(5000), "next: the heartbeat again");
}

#[test]
fn a_fetch_answer_answers_the_waiting_poll_and_arms_the_poll_interval() {
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    assert!(c.waiter.is_none(), "the waiting poll took the records");
    // The poll answered, none waits: the poll interval's deadline is armed now.
    assert_eq!(c.poll_interval_deadline(), Some(t0 + c.cfg.max_poll_interval));
}

#[test]
fn an_expired_poll_interval_makes_the_member_leave() {
    let t0 = Instant::now();
    let (mut c, (node, sent, sent_at)) = long_polling(t0);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 9)) }, t0);
    c.drive(t0);
    answer_fetches(&mut c, t0);
    assert!(c.buffer.is_empty() && c.waiter.is_none(), "the poll took all 10 and none waits");
    let deadline = t0 + c.cfg.max_poll_interval;
    assert_eq!(c.poll_interval_deadline(), Some(deadline));
    c.drive(deadline - Duration::from_millis(1));
    assert!(!c.group.is_stale());
    // The heartbeat that went meanwhile is answered: the next is due in 5 s.
    assert!(kinds(&drain(&mut c)).contains(&"heartbeat"));
    let ok = ShareGroupHeartbeatResponse::default().with_member_epoch(1).with_heartbeat_interval_ms(5000);
    c.handle_event(Event::Heartbeat(Ok(ok)), deadline - Duration::from_millis(1));
    c.drive(deadline);
    assert!(c.group.is_stale(), "no poll within max.poll.interval.ms: the member left");
    // The leave heartbeat goes with the next drive (the group decided before the poll
    // interval did), which its timer, due now, brings at once.
    assert_eq!(c.poll_timeout(deadline), deadline);
    c.drive(deadline);
    assert!(kinds(&drain(&mut c)).contains(&"heartbeat"), "the leave heartbeat");
}

#[test]
fn a_poll_that_gave_up_is_dropped_by_the_drive_after_the_shell_says_so() {
    // The shell says a poll's future was dropped (`PollAbandoned`): the next drive's delivery
    // drops the poll, so the fetch plan no longer counts a poll as waiting.
    let t0 = Instant::now();
    let (mut c, _in_flight) = long_polling(t0);
    c.handle_command(poll(3, true, false, Vec::new()), t0);
    c.drive(t0);
    assert!(c.waiter.is_some());
    let later = t0 + Duration::from_secs(1);
    c.handle_command(Command::PollAbandoned(ReplyId(3)), later);
    c.drive(later);
    assert!(c.waiter.is_none(), "the poll that gave up is dropped");
    assert!(!perform(&mut c).polls.contains_key(&ReplyId(3)), "and never answered");
}

#[test]
fn record_limit_acquires_no_more_after_a_poll_that_gave_up_while_its_fetch_was_out() {
    // A poll gave up while the fetch for it was in flight; the next poll found nothing
    // buffered and waited; the answer served it. That answer drew a second fetch, which
    // acquired one record more than max.poll.records: held unseen behind a slow record, it
    // went back to the group and came back at delivery count 2 (the renewal_loop example).
    let t0 = Instant::now();
    let cfg = ShareConsumerConfig::new("broker1:9092", "g")
        .acquire_mode(AcquireMode::RecordLimit)
        .max_poll_records(1);
    let mut c = joining_as(DriverCore::new(cfg, Arc::new(Shared::new(true, None)), Arc::new(OneTopic)), t0);
    let (node, sent, sent_at) = opening_fetch(&mut c, t0);
    c.handle_command(Command::PollAbandoned(ReplyId(1)), t0);
    c.handle_command(Command::Poll { max: 1, wait: true, renewing: false, acks: Vec::new(), id: ReplyId(2) }, t0);
    c.drive(t0);
    assert!(fetches(&mut c).is_empty(), "the fetch in flight serves the new poll");
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired(0, 0)) }, t0);
    c.drive(t0);
    assert!(c.waiter.is_none(), "the poll took the record");
    assert!(fetches(&mut c).is_empty(), "no fetch until the next poll: one poll's worth acquired");
    // The next poll asks again.
    let t1 = t0 + Duration::from_millis(10);
    c.handle_command(Command::Poll { max: 1, wait: true, renewing: false, acks: Vec::new(), id: ReplyId(3) }, t1);
    c.drive(t1);
    assert_eq!(fetches(&mut c).len(), 1, "the next poll's fetch");
}

// --- acknowledgements as runs (the processing engine's whole batches) ---

/// ACCEPT of offsets `first..first + len` of t-0, delivery 1: one run.
fn accept_run(first: i64, len: u32) -> AckEntry {
    AckEntry { len, ..accept(first) }
}

/// The acks `ts` carry, as the wire's batches (first, last, types).
fn ack_batches(ts: Vec<Transmit>) -> Vec<(i64, i64, Vec<i8>)> {
    ts.into_iter()
        .filter_map(|t| match t {
            Transmit::Fetch { sent, .. } | Transmit::Acknowledge { sent, .. } => Some(sent),
            _ => None,
        })
        .flat_map(|sent| sent.acks.into_values().flat_map(|a| a.to_batches()))
        .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types))
        .collect()
}

#[test]
fn a_run_of_outcomes_is_routed_as_one_range() {
    let t0 = Instant::now();
    let mut c = delivered(t0, 9);
    c.handle_command(Command::Outcomes(vec![accept_run(0, 6), accept_run(6, 4)]), t0);
    c.drive(t0);
    assert_eq!(ack_batches(drain(&mut c)), vec![(0, 9, vec![AckKind::Accept.wire()])]);
}

#[test]
fn a_run_with_a_redelivered_record_inside_is_routed_record_by_record() {
    let t0 = Instant::now();
    let mut c = delivered(t0, 4);
    // Offset 2 comes again (its lock lapsed): delivery 2 is the one held now.
    let t1 = t0 + Duration::from_millis(10);
    c.handle_command(poll(2, true, false, Vec::new()), t1);
    c.drive(t1);
    let (node, sent, sent_at) = long_poll(&mut c);
    c.handle_event(Event::Fetch { node, sent, sent_at, result: Ok(acquired_as(2, 2, 2)) }, t1);
    c.drive(t1);
    let _ = perform(&mut c);
    // The run of delivery 1 covers offset 2: that one is refused, the rest go.
    c.handle_command(Command::Outcomes(vec![accept_run(0, 5)]), t1);
    c.drive(t1);
    let accept = AckKind::Accept.wire();
    assert_eq!(ack_batches(drain(&mut c)), vec![(0, 1, vec![accept]), (3, 4, vec![accept])]);
    assert_eq!(completed(&mut c), [(2, false)], "it fails (LockExpired, redelivered) on its own");
}

#[test]
fn a_run_of_a_session_reset_since_fails_record_by_record() {
    let t0 = Instant::now();
    let mut c = delivered(t0, 2);
    c.handle_command(Command::Outcomes(vec![AckEntry { generation: 7, ..accept_run(0, 3) }]), t0);
    c.drive(t0);
    assert!(ack_batches(drain(&mut c)).is_empty());
    assert_eq!(completed(&mut c), [(0, false), (1, false), (2, false)], "each record reported");
}
