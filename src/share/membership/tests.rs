use std::time::{Duration, Instant};

use kafka_protocol::messages::share_group_heartbeat_response::{Assignment, TopicPartitions};
use kafka_protocol::messages::ShareGroupHeartbeatResponse;
use kafka_protocol::protocol::StrBytes;
use uuid::Uuid;

use super::*;

fn ok(epoch: i32, interval_ms: i32, assignment: Option<Vec<(Uuid, Vec<i32>)>>) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default()
        .with_member_epoch(epoch)
        .with_heartbeat_interval_ms(interval_ms)
        .with_assignment(assignment.map(|a| {
            Assignment::default().with_topic_partitions(
                a.into_iter()
                    .map(|(id, p)| TopicPartitions::default().with_topic_id(id).with_partitions(p))
                    .collect(),
            )
        }))
}

fn err(code: i16) -> ShareGroupHeartbeatResponse {
    ShareGroupHeartbeatResponse::default()
        .with_error_code(code)
        .with_error_message(Some(StrBytes::from_static_str("boom")))
}

#[test]
fn joins_at_epoch_zero_with_subscription_then_heartbeats_at_interval() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", Some("r1".into()));
    assert!(m.poll_heartbeat(t0).is_none(), "nothing before subscribe");
    m.subscribe(["b".to_string(), "a".to_string()], t0);
    let hb = m.poll_heartbeat(t0).expect("join heartbeat");
    assert_eq!(hb.member_epoch, 0);
    assert_eq!(hb.member_id.len(), 22, "client-generated UUID member id, Kafka's base64 form");
    assert_eq!(hb.rack_id.as_deref(), Some("r1"));
    let names: Vec<_> = hb.subscribed_topic_names.unwrap().iter().map(|n| n.0.to_string()).collect();
    assert_eq!(names, vec!["a", "b"]);
    assert!(m.poll_heartbeat(t0).is_none(), "one in flight at a time");

    let tid = Uuid::new_v4();
    let out = m.handle_response(&ok(3, 1000, Some(vec![(tid, vec![1, 0])])), t0);
    assert_eq!(out, Outcome::AssignmentChanged);
    assert_eq!(m.state(), &MemberState::Stable);
    assert_eq!(m.epoch(), 3);
    assert_eq!(m.assignment()[&tid].iter().copied().collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(m.poll_timeout(), Some(t0 + Duration::from_millis(1000)));
    assert!(m.poll_heartbeat(t0 + Duration::from_millis(999)).is_none());
    let hb = m.poll_heartbeat(t0 + Duration::from_millis(1000)).unwrap();
    assert_eq!(hb.member_epoch, 3);
    assert!(hb.subscribed_topic_names.is_none(), "unchanged subscription is null");
    assert!(hb.rack_id.is_none());
    // Null assignment = unchanged.
    assert_eq!(m.handle_response(&ok(3, 1000, None), t0), Outcome::Ok);
    assert_eq!(m.assignment().len(), 1);
    assert_eq!(m.rebalances(), 1);
}

#[test]
fn fenced_rejoins_with_same_member_id_and_drops_assignment() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    let id = m.poll_heartbeat(t0).unwrap().member_id.to_string();
    m.handle_response(&ok(5, 1000, Some(vec![(Uuid::new_v4(), vec![0])])), t0);
    let _ = m.poll_heartbeat(t0 + Duration::from_secs(1)).unwrap();
    assert_eq!(m.handle_response(&err(110), t0), Outcome::Fenced);
    assert!(m.assignment().is_empty());
    let hb = m.poll_heartbeat(t0).unwrap();
    assert_eq!(hb.member_epoch, 0);
    assert_eq!(hb.member_id.to_string(), id);
    assert!(hb.subscribed_topic_names.is_some(), "rejoin sends the subscription");
    // UNKNOWN_MEMBER_ID does the same.
    assert_eq!(m.handle_response(&err(25), t0), Outcome::Fenced);
}

#[test]
fn coordinator_moves_are_followed_with_backoff() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    assert_eq!(m.handle_response(&err(16), t0), Outcome::FindCoordinator);
    let next = m.poll_timeout().unwrap();
    assert!(next > t0 && next <= t0 + Duration::from_millis(200));
    assert!(m.poll_heartbeat(next).is_some());
    assert_eq!(m.handle_response(&err(14), t0), Outcome::Ok, "load in progress: retry");
    assert_eq!(m.state(), &MemberState::Joining);
}

#[test]
fn fatal_errors_stop_the_member() {
    let t0 = Instant::now();
    for code in [30i16, 42, 81, 35] {
        let mut m = Membership::new("g", None);
        m.subscribe(["a".to_string()], t0);
        m.poll_heartbeat(t0).unwrap();
        match m.handle_response(&err(code), t0) {
            Outcome::Fatal(e) => assert_eq!(e.code().unwrap().0, code),
            o => panic!("code {code}: {o:?}"),
        }
        assert!(matches!(m.state(), MemberState::Fatal(_)));
        assert!(m.poll_heartbeat(t0 + Duration::from_secs(60)).is_none());
    }
}

#[test]
fn leave_sends_minus_one_then_left() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    m.handle_response(&ok(2, 1000, Some(vec![(Uuid::new_v4(), vec![0])])), t0);
    m.leave(t0);
    assert!(m.assignment().is_empty());
    let hb = m.poll_heartbeat(t0).unwrap();
    assert_eq!(hb.member_epoch, -1);
    assert_eq!(m.handle_response(&ok(-1, 0, None), t0), Outcome::Left);
    assert_eq!(m.state(), &MemberState::Left);
    assert!(m.poll_heartbeat(t0 + Duration::from_secs(10)).is_none());
}

#[test]
fn leave_while_a_heartbeat_is_in_flight_still_sends_the_leave() {
    // Found by the fake-broker close tests on a loaded machine: the answer to the regular
    // heartbeat in flight at close was taken for the leave's, and no leave was ever sent.
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    m.handle_response(&ok(2, 100, None), t0);
    let t1 = t0 + Duration::from_millis(100);
    assert_eq!(m.poll_heartbeat(t1).unwrap().member_epoch, 2);
    m.leave(t1);
    assert_eq!(m.handle_response(&ok(2, 100, None), t1), Outcome::Ok);
    assert_eq!(m.state(), &MemberState::Leaving);
    assert_eq!(m.poll_heartbeat(t1).expect("the leave").member_epoch, -1);
    assert_eq!(m.handle_response(&ok(-1, 0, None), t1), Outcome::Left);
    // The same when the earlier heartbeat fails.
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    m.handle_response(&ok(2, 100, None), t0);
    m.poll_heartbeat(t1).unwrap();
    m.leave(t1);
    let e = Error::Timeout { what: "heartbeat".into(), after: Duration::from_secs(1) };
    assert_eq!(m.handle_error(e, t1), Outcome::Ok);
    assert_eq!(m.poll_heartbeat(t1).expect("the leave").member_epoch, -1);
    assert_eq!(m.handle_response(&ok(-1, 0, None), t1), Outcome::Left);
}

#[test]
fn leave_while_a_rejoin_is_in_flight_sends_the_leave_after_its_answer() {
    // Found by the engine's simulation (seeds 1518, 2619): fenced, the member rejoined; the
    // engine closed while the join was in flight, and the leave was skipped as if the member
    // had never joined. The join's answer made it a member again, with partitions, and the
    // records it held stayed locked until their locks lapsed.
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    m.handle_response(&ok(2, 100, None), t0);
    let t1 = t0 + Duration::from_millis(100);
    m.poll_heartbeat(t1).unwrap();
    assert_eq!(m.handle_response(&err(110), t1), Outcome::Fenced);
    assert_eq!(m.poll_heartbeat(t1).expect("the rejoin").member_epoch, 0);
    m.leave(t1);
    assert_eq!(m.state(), &MemberState::Leaving);
    assert!(m.poll_heartbeat(t1).is_none(), "one heartbeat in flight at a time");
    let id = Uuid::from_u128(1);
    assert_eq!(m.handle_response(&ok(4, 100, Some(vec![(id, vec![1])])), t1), Outcome::Ok);
    assert!(m.assignment().is_empty(), "leaving: nothing to fetch");
    assert_eq!(m.poll_heartbeat(t1).expect("the leave").member_epoch, -1);
    assert_eq!(m.handle_response(&ok(-1, 0, None), t1), Outcome::Left);
}

#[test]
fn leave_before_joined_needs_no_heartbeat() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.leave(t0);
    assert_eq!(m.state(), &MemberState::Left);
    assert!(m.poll_heartbeat(t0).is_none());
}

#[test]
fn resubscribe_sends_new_names_once() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    m.handle_response(&ok(1, 1000, None), t0);
    m.subscribe(["a".to_string(), "c".to_string()], t0);
    let hb = m.poll_heartbeat(t0).expect("immediate heartbeat on change");
    assert_eq!(hb.subscribed_topic_names.unwrap().len(), 2);
    m.handle_response(&ok(2, 1000, None), t0);
    let hb = m.poll_heartbeat(t0 + Duration::from_secs(1)).unwrap();
    assert!(hb.subscribed_topic_names.is_none());
}

#[test]
fn transport_errors_retry_via_coordinator_lookup() {
    let t0 = Instant::now();
    let mut m = Membership::new("g", None);
    m.subscribe(["a".to_string()], t0);
    m.poll_heartbeat(t0).unwrap();
    let e = Error::ConnectionClosed { addr: "x".into(), cause: None };
    assert_eq!(m.handle_error(e, t0), Outcome::FindCoordinator);
    assert!(m.is_active());
}

#[test]
fn kafka_uuid_text_form_matches_java() {
    // Java: new Uuid(0x0123456789abcdefL, 0xfedcba9876543210L).toString()
    let id = Uuid::from_u128(0x0123456789abcdef_fedcba9876543210);
    assert_eq!(kafka_uuid_string(&id), "ASNFZ4mrze_-3LqYdlQyEA");
    assert_eq!(kafka_uuid_string(&Uuid::nil()), "AAAAAAAAAAAAAAAAAAAAAA");
    for _ in 0..100 {
        let m = new_member_id();
        assert_eq!(m.len(), 22);
        assert!(!m.starts_with('-'));
    }
}
