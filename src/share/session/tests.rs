use std::collections::BTreeSet;

use uuid::Uuid;

use super::*;

const P: FetchParams = FetchParams {
    max_wait_ms: 500,
    min_bytes: 1,
    max_bytes: 1 << 20,
    max_records: 500,
    batch_size: 500,
    acquire_mode: 0,
};

fn tp(id: Uuid, p: i32) -> TopicIdPartition {
    TopicIdPartition { topic_id: id, partition: p }
}

#[test]
fn epochs_open_increment_and_list_only_changes() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0), tp(t, 1)]));
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.share_session_epoch, 0);
    assert_eq!(req.topics[0].partitions.len(), 2);
    assert!(s.build_fetch("g", "m", P).is_none(), "one request in flight");
    s.on_success(&sent);
    assert_eq!(s.epoch(), 1);

    // Nothing changed: an epoch-1 fetch lists no partitions.
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.share_session_epoch, 1);
    assert!(req.topics.is_empty());
    s.on_success(&sent);

    // An ack on partition 1 rides on the next fetch; partition 2 added; partition 0 forgotten.
    s.queue_ack(tp(t, 1), 7, AckKind::Accept);
    s.set_wanted(BTreeSet::from([tp(t, 1), tp(t, 2)]));
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.share_session_epoch, 2);
    let parts: Vec<_> = req.topics[0].partitions.iter().map(|p| p.partition_index).collect();
    assert_eq!(parts, vec![1, 2]);
    assert_eq!(req.topics[0].partitions[0].acknowledgement_batches[0].first_offset, 7);
    assert_eq!(req.forgotten_topics_data[0].partitions, vec![0]);
    assert_eq!(sent.acks.len(), 1);
    assert!(!s.has_acks());
    s.on_success(&sent);
    assert!(!s.has_forgotten());
}

#[test]
fn no_acks_on_epoch_zero_and_reset_fails_queued_acks() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.on_success(&sent);
    s.queue_ack(tp(t, 0), 3, AckKind::Accept);
    let gen = s.generation();
    let failed = s.reset();
    assert_eq!(failed.len(), 1, "queued acks handed back to be failed");
    assert_eq!(s.generation(), gen + 1);
    assert_eq!(s.epoch(), 0);
    s.queue_ack(tp(t, 0), 4, AckKind::Accept);
    let (req, _) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.share_session_epoch, 0);
    assert!(req.topics[0].partitions[0].acknowledgement_batches.is_empty(), "no acks at epoch 0");
}

#[test]
fn ack_only_partitions_use_share_acknowledge() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.on_success(&sent);
    // Partition 5 is no longer fetched here but has acks.
    s.queue_ack(tp(t, 5), 10, AckKind::Reject);
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert!(req.topics.is_empty(), "not added to the fetch session");
    s.on_success(&sent);
    let (ack, sent) = s.build_ack("g", "m", false).unwrap();
    assert_eq!(ack.share_session_epoch, 2);
    assert_eq!(ack.topics[0].partitions[0].partition_index, 5);
    s.on_success(&sent);
    assert_eq!(s.epoch(), 3);
}

#[test]
fn renews_travel_alone_with_is_renew_ack() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.on_success(&sent);
    s.queue_ack(tp(t, 0), 1, AckKind::Renew);
    s.queue_ack(tp(t, 0), 2, AckKind::Accept);
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types, vec![1]);
    s.on_success(&sent);
    assert!(s.has_renew());
    let (ack, sent) = s.build_ack("g", "m", true).unwrap();
    assert!(ack.is_renew_ack);
    assert_eq!(ack.topics[0].partitions[0].acknowledgement_batches[0].acknowledge_types, vec![4]);
    s.on_success(&sent);
    assert!(!s.has_acks());
}

#[test]
fn close_uses_final_epoch_and_carries_acks() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    assert!(s.build_close("g", "m").is_none(), "nothing to close before open");
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.on_success(&sent);
    s.queue_ack(tp(t, 0), 9, AckKind::Release);
    let (req, sent) = s.build_close("g", "m").unwrap();
    assert_eq!(req.share_session_epoch, -1);
    assert_eq!(req.topics.len(), 1);
    s.on_success(&sent);
    assert!(!s.is_open());
}

#[test]
fn close_sends_queued_renewals_as_releases() {
    // A RENEW queued when the consumer closes: the close releases the record anyway, and the
    // acknowledgement must be sent (and its outcome reported), not dropped.
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.on_success(&sent);
    s.queue_ack(tp(t, 0), 4, AckKind::Renew);
    s.queue_ack(tp(t, 0), 5, AckKind::Accept);
    s.queue_ack(tp(t, 0), 6, AckKind::Renew);
    let (req, sent) = s.build_close("g", "m").unwrap();
    assert!(!req.is_renew_ack);
    let acked: Vec<(i64, AckKind)> = sent.acks[&tp(t, 0)].iter().collect();
    assert_eq!(acked, vec![(4, AckKind::Release), (5, AckKind::Accept), (6, AckKind::Release)]);
    assert!(!s.has_acks());
}

#[test]
fn epoch_wraps_to_one() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    s.epoch = i32::MAX;
    let (req, sent) = s.build_fetch("g", "m", P).unwrap();
    assert_eq!(req.share_session_epoch, i32::MAX);
    s.on_success(&sent);
    assert_eq!(s.epoch(), 1);
}

#[test]
fn stale_completion_after_reset_is_ignored() {
    let t = Uuid::new_v4();
    let mut s = ShareSession::new(1);
    s.set_wanted(BTreeSet::from([tp(t, 0)]));
    let (_, sent) = s.build_fetch("g", "m", P).unwrap();
    s.reset();
    s.on_success(&sent);
    assert_eq!(s.epoch(), 0, "a response from before the reset does not advance the new session");
}
