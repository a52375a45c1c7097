//! Share-group administration against the real broker: list, describe (members, assignment,
//! start offsets), destructive operations refused on a live group and working on an empty
//! one, resets, deletion, and deleting records below a group's start offset.

use crate::admin_support;
use crate::common;

use std::collections::BTreeMap;

use admin_support::{produce, Member};
use kafka_share::admin::{OffsetResetSpec, ShareGroupState, TopicPartition, TopicSelection};
use kafka_share::{Error, ErrorCode};

fn is_non_empty(e: &Error, group: &str) -> bool {
    matches!(e, Error::GroupNotEmpty { group: g } if g == group)
}

/// How long a wait for the broker's asynchronous state lasts before the test fails: generous
/// (a loaded machine is slow); a passing test ends on its condition.
const WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Polls the start offsets until they equal `want` (the share coordinator persists acks
/// asynchronously).
async fn wait_offsets(admin: &kafka_share::admin::Admin, group: &str, want: &BTreeMap<TopicPartition, i64>) {
    let mut last = BTreeMap::new();
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < end {
        last = admin.list_share_group_offsets(group, None).await.expect("offsets").start_offsets();
        if &last == want {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    panic!("start offsets of {group}: {last:?}, wanted {want:?}");
}

#[tokio::test]
async fn live_group_then_empty_group_lifecycle() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-life", 2).await;
    let group = common::unique("adm-life-g");
    admin.set_share_auto_offset_reset(&group, "earliest").await.unwrap();
    produce(&cluster, &topic, 0, 10).await;
    produce(&cluster, &topic, 1, 6).await;
    let tp0 = TopicPartition::new(&topic, 0);
    let tp1 = TopicPartition::new(&topic, 1);

    let mut member = Member::join(&cluster, &group, &[&topic]).await;
    member.consume_and_accept(&cluster, &topic, 16).await;
    // The broker persists a share partition's new start offset with its *next* state write,
    // so right after the last acknowledgement the start offset may still read 0 while the lag
    // (4.2+) already says 0. One more record per partition, consumed, makes the first 16
    // records' advance durable.
    produce(&cluster, &topic, 0, 1).await;
    produce(&cluster, &topic, 1, 1).await;
    member.consume_and_accept(&cluster, &topic, 2).await;
    let mut consumed = BTreeMap::new();
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < end {
        consumed = admin.list_share_group_offsets(&group, None).await.unwrap().start_offsets();
        if consumed.get(&tp0).is_some_and(|o| *o >= 10) && consumed.get(&tp1).is_some_and(|o| *o >= 6) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(matches!(consumed.get(&tp0), Some(10 | 11)) && matches!(consumed.get(&tp1), Some(6 | 7)), "{consumed:?}");

    // Listed and described with its member.
    let listed = admin.list_share_groups().await.unwrap();
    let l = listed.iter().find(|g| g.group_id == group).expect("group listed");
    assert_eq!(l.state, ShareGroupState::Stable);
    let d = admin.describe_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
    assert_eq!(d.state, ShareGroupState::Stable);
    assert_eq!(d.members.len(), 1);
    let m = &d.members[0];
    assert_eq!(m.member_id, member.member_id);
    assert_eq!(m.assignment, vec![(topic.clone(), vec![0, 1])]);
    assert_eq!(m.subscribed_topic_names, vec![topic.clone()]);
    assert_eq!(m.partition_count(), 2);
    assert!(m.member_epoch > 0);
    assert!(d.group_epoch >= 1 && d.assignment_epoch >= 1);
    let offsets = admin.list_share_group_offsets(&group, Some(&[topic.as_str()])).await.unwrap();
    // 4.2+ reports lag; 4.1 lacks DescribeShareGroupOffsets v1 and says why.
    let has_lag = common::broker_has_v2();
    assert_eq!(offsets.lag_supported, has_lag);
    assert_eq!(offsets.lag_unavailable_reason().is_some(), !has_lag);
    for (tp, r) in &offsets.partitions {
        let o = r.as_ref().unwrap();
        assert_eq!(o.lag, has_lag.then_some(0), "{tp}: everything was acknowledged");
        assert!(o.leader_epoch.is_some());
    }

    // Every destructive operation is refused while the member is there, and changes nothing.
    let e = admin.alter_share_group_offsets(&group, &BTreeMap::from([(tp0.clone(), 0)])).await.unwrap_err();
    assert!(if has_lag { is_non_empty(&e, &group) } else { is_unsupported_alter(&e) }, "{e:?}");
    let e = admin.delete_share_group_offsets(&group, &[&topic]).await.unwrap_err();
    assert!(is_non_empty(&e, &group), "{e:?}");
    let e = admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap_err();
    assert!(is_non_empty(&e, &group), "{e:?}");
    let e = admin.reset_share_group_offsets(&group, None, OffsetResetSpec::Earliest, false).await.unwrap_err();
    assert!(is_non_empty(&e, &group), "{e:?}");
    wait_offsets(&admin, &group, &consumed).await;
    member.beat(&cluster).await;

    // Empty group: everything works.
    member.leave(&cluster).await;
    let d = admin.describe_share_group(&group).await.unwrap();
    assert_eq!(d.state, ShareGroupState::Empty);
    assert!(d.members.is_empty());

    let plan = admin.reset_share_group_offsets(&group, None, OffsetResetSpec::Earliest, false).await.unwrap();
    let p: Vec<_> = plan.iter().map(|p| (p.tp.clone(), p.current, p.new, p.applied.is_none())).collect();
    assert_eq!(p, vec![(tp0.clone(), Some(consumed[&tp0]), 0, true), (tp1.clone(), Some(consumed[&tp1]), 0, true)]);
    wait_offsets(&admin, &group, &consumed).await; // a dry run changes nothing

    if common::broker_has_v2() {
        alter_and_reset_an_empty_group(&admin, &group, &topic).await;
    } else {
        // Kafka 4.1 brokers drop AlterShareGroupOffsets (fixed in 4.2): refused, nothing changes.
        let e = admin.reset_share_group_offsets(&group, None, OffsetResetSpec::Earliest, true).await.unwrap_err();
        assert!(is_unsupported_alter(&e), "{e:?}");
        let e = admin.alter_share_group_offsets(&group, &BTreeMap::from([(tp0.clone(), 4)])).await.unwrap_err();
        assert!(is_unsupported_alter(&e), "{e:?}");
        wait_offsets(&admin, &group, &consumed).await;
    }

    let r = admin.delete_share_group_offsets(&group, &[&topic]).await.unwrap();
    assert!(r[0].1.is_ok(), "{r:?}");
    wait_offsets(&admin, &group, &BTreeMap::new()).await;

    admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
    let e = admin.describe_share_group(&group).await.unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::GROUP_ID_NOT_FOUND), "{e:?}");
    assert!(!admin.list_share_groups().await.unwrap().iter().any(|g| g.group_id == group));
}

/// The 4.2+ part of the lifecycle: reset, alter, shift and clamp on an empty group whose two
/// partitions hold 11 and 7 records.
async fn alter_and_reset_an_empty_group(admin: &kafka_share::admin::Admin, group: &str, topic: &str) {
    let (tp0, tp1) = (TopicPartition::new(topic, 0), TopicPartition::new(topic, 1));
    let plan = admin.reset_share_group_offsets(group, None, OffsetResetSpec::Earliest, true).await.unwrap();
    assert!(plan.iter().all(|p| matches!(p.applied, Some(Ok(())))), "{plan:?}");
    wait_offsets(admin, group, &BTreeMap::from([(tp0.clone(), 0), (tp1.clone(), 0)])).await;

    let r = admin.alter_share_group_offsets(group, &BTreeMap::from([(tp0.clone(), 4)])).await.unwrap();
    assert!(r.iter().all(|(_, r)| r.is_ok()), "{r:?}");
    wait_offsets(admin, group, &BTreeMap::from([(tp0.clone(), 4), (tp1.clone(), 0)])).await;

    // Shift: 4-2 = 2; 0-2 clamps to the log start 0. Explicit offset beyond the end clamps to it.
    let scope = [TopicSelection::parse(topic).unwrap()];
    admin
        .reset_share_group_offsets(group, Some(&scope), OffsetResetSpec::ShiftBy(-2), true)
        .await
        .unwrap();
    wait_offsets(admin, group, &BTreeMap::from([(tp0.clone(), 2), (tp1.clone(), 0)])).await;
    let one = [TopicSelection::parse(&format!("{topic}:1")).unwrap()];
    let plan = admin
        .reset_share_group_offsets(group, Some(&one), OffsetResetSpec::Offset(1000), true)
        .await
        .unwrap();
    assert_eq!(plan.len(), 1);
    assert_eq!(plan[0].new, 7, "clamped to the log end");
    admin.reset_share_group_offsets(group, Some(&scope), OffsetResetSpec::Latest, true).await.unwrap();
    wait_offsets(admin, group, &BTreeMap::from([(tp0.clone(), 11), (tp1.clone(), 7)])).await;
}

fn is_unsupported_alter(e: &Error) -> bool {
    matches!(e, Error::Unsupported { needs, .. } if needs.contains("fixed in Kafka 4.2"))
}

#[tokio::test]
async fn reset_to_datetime_and_unknown_groups() {
    let admin = common::admin().await;
    let cluster = admin.cluster().clone();
    let topic = common::new_topic(&admin, "adm-dt", 1).await;
    let group = common::unique("adm-dt-g");
    // 5 old records (year 2001), then 5 new ones.
    admin_support::produce_at(&cluster, &topic, 0, 5, 1_000_000_000_000).await;
    produce(&cluster, &topic, 0, 5).await;
    let scope = [TopicSelection::parse(&topic).unwrap()];
    let ts = kafka_share::admin::parse_datetime("2010-01-01T00:00:00.000").unwrap();
    // A group that does not exist yet can be given offsets before its first consumer (4.2+;
    // Kafka 4.1 brokers drop the request, which is refused as Unsupported).
    let dry = admin
        .reset_share_group_offsets(&group, Some(&scope), OffsetResetSpec::Timestamp(ts), false)
        .await
        .unwrap();
    assert_eq!((dry[0].current, dry[0].new, dry[0].applied.is_none()), (None, 5, true));
    let executed = admin.reset_share_group_offsets(&group, Some(&scope), OffsetResetSpec::Timestamp(ts), true).await;
    let current = if common::broker_has_v2() {
        assert!(matches!(executed.unwrap()[0].applied, Some(Ok(()))));
        wait_offsets(&admin, &group, &BTreeMap::from([(TopicPartition::new(&topic, 0), 5)])).await;
        Some(5)
    } else {
        assert!(is_unsupported_alter(&executed.unwrap_err()));
        None
    };
    // After the last record: latest.
    let future = admin_support::now_ms() + 3_600_000;
    let plan = admin
        .reset_share_group_offsets(&group, Some(&scope), OffsetResetSpec::Timestamp(future), false)
        .await
        .unwrap();
    assert_eq!((plan[0].current, plan[0].new), (current, 10));

    let missing = common::unique("adm-missing");
    let e = admin.describe_share_groups(&[&missing]).await.unwrap().pop().unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::GROUP_ID_NOT_FOUND), "{e:?}");
    let e = admin.delete_share_groups(&[&missing]).await.unwrap().pop().unwrap().unwrap_err();
    assert_eq!(e.code(), Some(ErrorCode::GROUP_ID_NOT_FOUND), "{e:?}");
    if common::broker_has_v2() {
        admin.delete_share_groups(&[&group]).await.unwrap().pop().unwrap().unwrap();
    }
}

/// The end-to-end check: records consumed and accepted, the group reset to earliest,
/// and a new consumer in the same group really receives the old records again.
#[tokio::test]
async fn reset_to_earliest_redelivers_to_a_new_consumer() {
    let admin = common::admin().await;
    let bootstrap = common::bootstrap();
    let topic = common::new_topic(&admin, "adm-redo", 1).await;
    let group = common::new_group(&admin, "adm-redo-g", None).await;
    common::produce(&bootstrap, &topic, 1, 5, "old").await;

    let first = kafka_share::ShareConsumer::connect(common::consumer_config(&bootstrap, &group)).await.unwrap();
    first.subscribe([topic.as_str()]).unwrap();
    let got = common::poll_until(&first, 5, std::time::Duration::from_secs(30), |_| {}).await;
    assert_eq!(got.len(), 5);
    first.commit_sync(std::time::Duration::from_secs(10)).await.unwrap().into_result().unwrap();
    first.close(std::time::Duration::from_secs(10)).await.unwrap();

    // The member has left; the reset is refused only while members remain.
    let mut plan = None;
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < end {
        match admin.reset_share_group_offsets(&group, None, OffsetResetSpec::Earliest, true).await {
            Ok(p) => {
                plan = Some(p);
                break;
            }
            Err(e) if !common::broker_has_v2() => {
                assert!(is_unsupported_alter(&e), "{e:?}");
                return;
            }
            Err(e) if e.to_string().contains("has active members") => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await
            }
            Err(e) => panic!("reset: {e:?}"),
        }
    }
    let plan = plan.expect("the group never became empty");
    assert!(plan.iter().all(|p| p.new == 0 && matches!(p.applied, Some(Ok(())))), "{plan:?}");

    let second = kafka_share::ShareConsumer::connect(common::consumer_config(&bootstrap, &group)).await.unwrap();
    second.subscribe([topic.as_str()]).unwrap();
    let again = common::poll_until(&second, 5, std::time::Duration::from_secs(30), |_| {}).await;
    let values: Vec<String> = again.iter().map(|r| r.value_str().unwrap().to_string()).collect();
    assert_eq!(values, (0..5).map(|i| format!("old-{i}")).collect::<Vec<_>>());
    second.commit_sync(std::time::Duration::from_secs(10)).await.unwrap().into_result().unwrap();
    second.close(std::time::Duration::from_secs(10)).await.unwrap();
}

/// Deleting records below an offset moves a share group's start offset past them: the
/// records the group had not yet accepted below it are never delivered, and the start offset
/// the coordinator keeps follows (Java's `deleteRecords`, as Kafka's own share tests use it).
#[tokio::test]
async fn delete_records_moves_the_share_groups_start_offset() {
    use kafka_share::consumer::{AcknowledgementMode, ShareConsumer};
    use std::time::Duration;

    let bs = common::bootstrap();
    let admin = common::admin().await;
    let topic = common::new_topic(&admin, "adm-delrec", 1).await;
    let group = common::new_group(&admin, "adm-delrec-g", None).await;
    let tp = TopicPartition::new(&topic, 0);
    common::produce(&bs, &topic, 1, 10, "v").await;

    // The group accepts offsets 0 and 1 and gives the rest back: its start offset is 2.
    let explicit = || common::consumer_config(&bs, &group).acknowledgement_mode(AcknowledgementMode::Explicit);
    let first = ShareConsumer::connect(explicit()).await.expect("consumer");
    first.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&first, 2, WAIT, |r| {
        if r.offset < 2 {
            first.acknowledge(r).expect("accept");
        }
    })
    .await;
    assert!(got.iter().any(|r| r.offset == 1), "{:?}", got.iter().map(|r| r.offset).collect::<Vec<_>>());
    first.commit_sync(Duration::from_secs(10)).await.expect("commit");
    first.close(Duration::from_secs(10)).await.expect("close");
    wait_offsets(&admin, &group, &BTreeMap::from([(tp.clone(), 2)])).await;

    // Records below 6 deleted: the log starts at 6.
    let deleted = admin.delete_records(&[(tp.clone(), 6)]).await.expect("delete records");
    assert_eq!(deleted.len(), 1);
    assert_eq!(deleted[0].0, tp);
    assert_eq!(*deleted[0].1.as_ref().expect("partition deleted"), 6, "the new low watermark");
    let earliest = admin
        .list_offsets(std::slice::from_ref(&tp), kafka_share::admin::OffsetSpec::Earliest)
        .await
        .expect("list");
    assert_eq!(earliest[&tp].offset, Some(6));

    // The group's next delivery starts at 6, not at its old start offset 2. The stored start
    // offset follows only once the share partition reads the log again (a fetch), not at the
    // deletion: with no consumer it read 2 for 6 s after it (Kafka 4.4). After the fetch it is
    // 6, or 10 once the acceptances of 6..9 are written too.
    let second = ShareConsumer::connect(explicit()).await.expect("consumer");
    second.subscribe([topic.clone()]).unwrap();
    let got = common::poll_until(&second, 4, WAIT, |r| second.acknowledge(r).expect("accept")).await;
    assert_eq!(got.iter().map(|r| r.offset).collect::<Vec<_>>(), [6, 7, 8, 9]);
    second.commit_sync(Duration::from_secs(10)).await.expect("commit");
    second.close(Duration::from_secs(10)).await.expect("close");
    let mut last = BTreeMap::new();
    let end = tokio::time::Instant::now() + WAIT;
    while tokio::time::Instant::now() < end {
        last = admin.list_share_group_offsets(&group, None).await.expect("offsets").start_offsets();
        if last.get(&tp).is_some_and(|o| (6..=10).contains(o)) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(last.get(&tp).is_some_and(|o| (6..=10).contains(o)), "start offset of {group} did not move to 6: {last:?}");

    // Refused before anything is sent.
    let e = admin.delete_records(&[(tp.clone(), -1)]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    let e = admin.delete_records(&[(tp.clone(), 1), (tp.clone(), 2)]).await.unwrap_err();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}");
    // Past the high watermark: that partition's error.
    let past = admin.delete_records(&[(tp.clone(), 1_000)]).await.expect("delete records");
    let e = past[0].1.as_ref().unwrap_err();
    assert_eq!(e.code().map(ErrorCode::value), Some(1), "OFFSET_OUT_OF_RANGE: {e:?}");
}
