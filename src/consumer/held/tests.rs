//! The held set's tests: the handle's bookkeeping on its own, no driver.

use super::super::*;
use super::*;

fn consumer(mode: AcknowledgementMode) -> (ShareConsumer, mpsc::UnboundedReceiver<FromHandle>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared::new(true, None));
    let cfg = ShareConsumerConfig::new("127.0.0.1:9092", "g").acknowledgement_mode(mode);
    (ShareConsumer::new(tx, shared, cfg), rx)
}

fn tp(partition: i32) -> TopicIdPartition {
    TopicIdPartition { topic_id: uuid::Uuid::from_u128(7), partition }
}

/// Records of topic "t" as a poll hands them out: (partition, offset), from node 1.
fn deliver(c: &ShareConsumer, records: &[(i32, i64)]) -> Vec<ConsumerRecord> {
    let topic: Arc<str> = Arc::from("t");
    let delivered = records
        .iter()
        .map(|&(partition, offset)| Delivered {
            record: ConsumerRecord::for_test(topic.clone(), partition, offset),
            tp: tp(partition),
            node: 1,
            generation: 0,
            batch: (offset, offset),
        })
        .collect();
    c.lock().held.hold(c.id, delivered)
}

fn take(c: &ShareConsumer, unacked: Unacked) -> Vec<(i32, i64, i8)> {
    c.lock().held.take_acks(unacked).iter().map(|a| (a.tp.partition, a.offset, a.kind.wire())).collect()
}

fn pending(c: &ShareConsumer) -> usize {
    c.lock().held.unacknowledged()
}

const ACCEPT: i8 = AcknowledgeType::Accept.wire();
const RELEASE: i8 = AcknowledgeType::Release.wire();
const REJECT: i8 = AcknowledgeType::Reject.wire();
const RENEW_WIRE: i8 = AcknowledgeType::Renew.wire();

#[test]
fn acks_are_taken_in_delivery_order_and_then_no_longer_held() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 5), (0, 6), (1, 3), (0, 7)]);
    assert_eq!(pending(&c), 4);
    c.acknowledge(&recs[1]).unwrap();
    c.acknowledge_with(&recs[2], AcknowledgeType::Reject).unwrap();
    c.acknowledge_offset("t", 0, 7, AcknowledgeType::Release).unwrap();
    assert_eq!(pending(&c), 1);
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 6, ACCEPT), (1, 3, REJECT), (0, 7, RELEASE)]);
    assert_eq!(c.lock().held.batches.len(), 1, "offset 5 is still held");
    let e = c.acknowledge(&recs[1]).unwrap_err();
    assert!(e.to_string().contains("t-0 offset 6 was already acknowledged and the acknowledgement sent"), "{e}");
    let e = c.acknowledge_offset("t", 1, 3, AcknowledgeType::Accept).unwrap_err();
    assert!(e.to_string().contains("not held"), "{e}");
    c.acknowledge(&recs[0].clone()).unwrap();
    assert_eq!(pending(&c), 0);
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 5, ACCEPT)]);
    assert!(c.lock().held.batches.is_empty(), "the batch goes once everything in it is sent");
    assert!(take(&c, Unacked::Keep).is_empty());
}

#[test]
fn the_last_acknowledgement_wins_until_sent_then_none_changes_it() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 1), (0, 2)]);
    c.acknowledge(&recs[0]).unwrap();
    c.acknowledge(&recs[0]).unwrap(); // the same again is fine
    c.acknowledge_with(&recs[0], AcknowledgeType::Release).unwrap(); // as in Java: last wins
    c.acknowledge_offset("t", 0, 1, AcknowledgeType::Reject).unwrap();
    c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap();
    c.acknowledge_with(&recs[1], AcknowledgeType::Accept).unwrap(); // a renewal too
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, REJECT), (0, 2, ACCEPT)]);
    assert!(c.lock().held.renewing.is_empty(), "the RENEW was replaced before it was sent");
    for e in [c.acknowledge(&recs[0]).unwrap_err(), c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap_err()] {
        assert!(matches!(&e, Error::AlreadyAcknowledged { partition: 0, .. }), "{e}");
    }
    let e = c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept).unwrap_err();
    assert!(e.to_string().contains("not held"), "{e}");
}

#[test]
fn a_renewed_record_waits_for_its_renewal_and_then_comes_back() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 1), (0, 2)]);
    c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
    c.acknowledge(&recs[1]).unwrap();
    assert_eq!(pending(&c), 0, "a renewal counts as acknowledged");
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, RENEW_WIRE), (0, 2, ACCEPT)]);
    assert_eq!(pending(&c), 0);
    assert!(c.lock().held.batches.is_empty(), "the renewed record is not held by its old batch");
    assert_eq!(c.lock().held.renewing.iter().map(|d| d.record.offset).collect::<Vec<_>>(), vec![1]);
    // The broker renewed it: the next poll returns it again, held anew.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let answer = driver::PollAnswer {
        records: Vec::new(),
        renewed: vec![driver::Renewed { tp: tp(0), offset: 1, result: Ok(()), lock_deadline: Some(deadline) }],
    };
    let again = c.hand_out(answer);
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].offset, again[0].lock_deadline), (1, Some(deadline)));
    assert!(c.lock().held.renewing.is_empty());
    assert_eq!(pending(&c), 1, "the returned record must be acknowledged again");
    c.acknowledge(&again[0]).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, ACCEPT)]);
    // RENEW needs the record: by coordinates it is refused.
    let recs = deliver(&c, &[(0, 3)]);
    let e = c.acknowledge_offset("t", 0, 3, AcknowledgeType::Renew).unwrap_err();
    assert!(matches!(&e, Error::InvalidArgument(m) if m.contains("acknowledge_with")), "{e}");
    // A renewal that failed: the record is not returned.
    c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 3, RENEW_WIRE)]);
    let answer = driver::PollAnswer {
        records: Vec::new(),
        renewed: vec![driver::Renewed { tp: tp(0), offset: 3, result: Err(Error::Closed), lock_deadline: None }],
    };
    assert!(c.hand_out(answer).is_empty());
    assert!(c.lock().held.renewing.is_empty());
}

#[test]
fn implicit_mode_accepts_everything_and_refuses_acknowledge() {
    let (c, _rx) = consumer(AcknowledgementMode::Implicit);
    let recs = deliver(&c, &[(0, 1), (2, 9)]);
    assert!(matches!(c.acknowledge(&recs[0]), Err(Error::ImplicitAcknowledgement)));
    assert!(matches!(c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept), Err(Error::ImplicitAcknowledgement)));
    assert_eq!(take(&c, c.unacknowledged_on_poll()), vec![(0, 1, ACCEPT), (2, 9, ACCEPT)]);
    assert!(c.lock().held.batches.is_empty());
}

#[test]
fn renew_needs_broker_support() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    c.shared.renew_supported.store(false, Ordering::Relaxed);
    let recs = deliver(&c, &[(0, 1)]);
    assert!(matches!(c.acknowledge_with(&recs[0], AcknowledgeType::Renew), Err(Error::RenewUnsupported)));
    c.acknowledge(&recs[0]).unwrap();
}

#[test]
fn close_releases_the_rest_and_then_acknowledge_says_closed() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 1), (0, 2), (0, 3)]);
    c.acknowledge_with(&recs[0], AcknowledgeType::Renew).unwrap();
    c.acknowledge(&recs[2]).unwrap();
    let acks = {
        let mut local = c.lock();
        c.closed.store(true, Ordering::Release);
        local.held.take_acks(Unacked::ReleaseAll)
    };
    let acks: Vec<_> = acks.iter().map(|a| (a.offset, a.kind.wire())).collect();
    assert_eq!(acks, vec![(1, RENEW_WIRE), (2, RELEASE), (3, ACCEPT)]);
    assert!(c.lock().held.batches.is_empty());
    assert!(matches!(c.acknowledge(&recs[1]), Err(Error::Closed)));
    assert!(matches!(c.acknowledge_offset("t", 0, 1, AcknowledgeType::Accept), Err(Error::Closed)));
}

#[test]
fn a_record_of_another_consumer_is_not_held_by_this_one() {
    let (a, _rxa) = consumer(AcknowledgementMode::Explicit);
    let (b, _rxb) = consumer(AcknowledgementMode::Explicit);
    let from_a = deliver(&a, &[(0, 1), (0, 2)]);
    let e = b.acknowledge(&from_a[0]).unwrap_err();
    assert!(e.to_string().contains("not held by this consumer"), "{e}");
    assert_eq!(pending(&a), 2, "a's slots are untouched");
    // As before, by its coordinates: when b holds the same offset, that is what it acks.
    let _from_b = deliver(&b, &[(0, 2)]);
    b.acknowledge(&from_a[1]).unwrap();
    assert_eq!(pending(&b), 0);
    assert_eq!(pending(&a), 2);
    // And a record without a slot (built by hand) goes by its coordinates too.
    let mut bare = from_a[0].clone();
    bare.ack_slot = None;
    a.acknowledge(&bare).unwrap();
    assert_eq!(pending(&a), 1);
}

#[test]
fn a_record_delivered_again_while_held_is_held_once_by_its_newest_delivery() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let first = deliver(&c, &[(0, 1), (0, 2), (1, 1)]);
    c.acknowledge(&first[1]).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 2, ACCEPT)]);
    // The lock of t-0@1 expired while it was held: it comes again, along with new offsets.
    let second = deliver(&c, &[(0, 0), (0, 1), (0, 3)]);
    assert_eq!(pending(&c), 4, "t-0@1 counts once, t-1@1 is still held");
    // Through the old record, the acknowledgement is refused: it would land on the newer
    // delivery, which the application has not processed.
    let e = c.acknowledge(&first[0]).unwrap_err();
    assert!(matches!(e, Error::LockExpired { offset: 1, redelivered: true, .. }), "{e}");
    assert_eq!(e.code(), Some(crate::error::ErrorCode::INVALID_RECORD_STATE));
    c.acknowledge_with(&second[1], AcknowledgeType::Release).unwrap();
    c.acknowledge(&second[1]).unwrap();
    c.acknowledge(&second[0]).unwrap();
    c.acknowledge(&second[2]).unwrap();
    c.acknowledge(&first[2]).unwrap();
    assert_eq!(pending(&c), 0);
    assert_eq!(take(&c, Unacked::Keep), vec![(1, 1, ACCEPT), (0, 0, ACCEPT), (0, 1, ACCEPT), (0, 3, ACCEPT)]);
    assert!(c.lock().held.batches.is_empty());
}

#[test]
fn runs_split_where_offsets_do_not_ascend() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    // The same offset twice in one poll: the later delivery is the one held.
    let recs = deliver(&c, &[(0, 4), (0, 5), (0, 5), (0, 6)]);
    assert_eq!(c.lock().held.batches[0].runs.len(), 2);
    assert_eq!(pending(&c), 3);
    c.acknowledge_offset("t", 0, 5, AcknowledgeType::Reject).unwrap();
    let e = c.acknowledge(&recs[1]).unwrap_err();
    assert!(matches!(e, Error::LockExpired { offset: 5, .. }), "the earlier delivery is superseded: {e}");
    c.acknowledge(&recs[0]).unwrap();
    c.acknowledge(&recs[3]).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 4, ACCEPT), (0, 5, REJECT), (0, 6, ACCEPT)]);
}

#[test]
fn acknowledgements_racing_with_takes_are_each_sent_once() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let records: Vec<(i32, i64)> = (0..4).flat_map(|p| (0..2_000).map(move |o| (p, o))).collect();
    let recs = deliver(&c, &records);
    let mut sent = Vec::new();
    std::thread::scope(|s| {
        for chunk in recs.chunks(recs.len() / 4) {
            let c = &c;
            s.spawn(move || {
                for r in chunk {
                    c.acknowledge(r).unwrap();
                }
            });
        }
        while sent.len() < records.len() {
            sent.extend(take(&c, Unacked::Keep));
            std::thread::yield_now();
        }
    });
    assert!(sent.iter().all(|a| a.2 == ACCEPT));
    let mut got: Vec<(i32, i64)> = sent.iter().map(|a| (a.0, a.1)).collect();
    got.sort_unstable();
    assert_eq!(got, records, "each record exactly once");
    assert!(c.lock().held.batches.is_empty());
}

#[test]
fn a_poll_refuses_unacknowledged_records_in_explicit_mode_and_accepts_them_in_implicit() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 1), (0, 2)]);
    c.acknowledge(&recs[0]).unwrap();
    let e = c.lock().held.start_poll(AcknowledgementMode::Explicit).unwrap_err();
    assert!(matches!(&e, Error::UnacknowledgedRecords { count: 1 }), "{e}");
    c.acknowledge_with(&recs[1], AcknowledgeType::Renew).unwrap();
    let (acks, renewing) = c.lock().held.start_poll(AcknowledgementMode::Explicit).unwrap();
    assert_eq!(acks.iter().map(|a| (a.offset, a.kind.wire())).collect::<Vec<_>>(), vec![(1, ACCEPT), (2, RENEW_WIRE)]);
    assert!(renewing, "the next poll waits for the renewal");
    let (c, _rx) = consumer(AcknowledgementMode::Implicit);
    deliver(&c, &[(0, 1), (0, 2)]);
    let (acks, renewing) = c.lock().held.start_poll(AcknowledgementMode::Implicit).unwrap();
    assert_eq!(acks.iter().map(|a| (a.offset, a.kind.wire())).collect::<Vec<_>>(), vec![(1, ACCEPT), (2, ACCEPT)]);
    assert!(!renewing);
}

#[test]
fn close_in_implicit_mode_releases_what_the_last_poll_handed_out() {
    // LANDSCAPE bug 6: the application's processing of these failed, or never ran; a
    // close that accepted them would lose them. Only a poll or commit accepts.
    let (c, _rx) = consumer(AcknowledgementMode::Implicit);
    deliver(&c, &[(0, 1), (1, 5)]);
    let acks: Vec<_> = c.lock().held.take_acks(Unacked::ReleaseAll).iter().map(|a| (a.offset, a.kind.wire())).collect();
    assert_eq!(acks, vec![(1, RELEASE), (5, RELEASE)]);
    assert!(c.lock().held.batches.is_empty());
}

#[test]
fn a_late_acknowledgement_of_a_record_delivered_again_is_refused_and_leaves_the_new_delivery_alone() {
    // LANDSCAPE bug 9: a record recycled (delivered again) while an old handle on it is
    // acknowledged. The old slot was sent: the acknowledgement must not reach the new one.
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let first = deliver(&c, &[(0, 1), (0, 2)]);
    c.acknowledge_with(&first[0], AcknowledgeType::Release).unwrap();
    c.acknowledge(&first[1]).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, RELEASE), (0, 2, ACCEPT)]);
    let again = deliver(&c, &[(0, 1)]);
    for kind in [AcknowledgeType::Accept, AcknowledgeType::Reject, AcknowledgeType::Release] {
        let e = c.acknowledge_with(&first[0], kind).unwrap_err();
        assert!(matches!(&e, Error::AlreadyAcknowledged { .. }), "{e}");
    }
    assert_eq!(pending(&c), 1, "the new delivery is untouched");
    assert!(take(&c, Unacked::Keep).is_empty());
    c.acknowledge(&again[0]).unwrap();
    assert_eq!(take(&c, Unacked::Keep), vec![(0, 1, ACCEPT)]);
}

#[test]
fn every_slot_reads_back_as_packed() {
    use AcknowledgeType::*;
    for slot in [
        Slot::Unacked,
        Slot::Acked(Accept),
        Slot::Acked(Release),
        Slot::Acked(Reject),
        Slot::Acked(Renew),
        Slot::Sent,
        Slot::Superseded,
    ] {
        assert_eq!(Slot::unpack(slot.pack()), slot);
    }
}

#[test]
fn debug_leaves_the_slot_out() {
    let (c, _rx) = consumer(AcknowledgementMode::Explicit);
    let recs = deliver(&c, &[(0, 1)]);
    let s = format!("{:?}", recs[0]);
    assert!(s.starts_with("ConsumerRecord { topic: \"t\", partition: 0, offset: 1,"), "{s}");
    assert!(s.ends_with("lock_deadline: None }"), "{s}");
}
