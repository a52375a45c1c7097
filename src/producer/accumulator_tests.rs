//! Batching logic: partition choice, batch boundaries, readiness, draining, retries, memory.

use bytes::Bytes;
use uuid::Uuid;

use super::*;
use crate::cluster::{PartitionInfo, TopicInfo};
use crate::producer::partitioner::murmur2;
use crate::protocol::records::Compression;

fn limits(batch_size: usize) -> Limits {
    Limits {
        batch_size,
        linger: Duration::from_millis(5),
        delivery_timeout: Duration::from_secs(120),
        max_request_size: 1 << 20,
        max_in_flight: 2,
        retry_backoff: (Duration::from_millis(100), Duration::from_millis(1000)),
    }
}

fn acc(batch_size: usize, partitions: usize) -> (Accumulator, Arc<Semaphore>) {
    let memory = Arc::new(Semaphore::new(1 << 20));
    let mut a = Accumulator::new(limits(batch_size), memory.clone());
    a.set_partitions("t", partitions);
    (a, memory)
}

fn rec(value: &'static str) -> RecordInput {
    RecordInput { value: Some(Bytes::from_static(value.as_bytes())), timestamp: 1, ..Default::default() }
}

/// Leaders: partition p of "t" led by broker p % brokers.
fn metadata(partitions: i32, brokers: i32) -> Metadata {
    let mut md = Metadata::default();
    let parts = (0..partitions)
        .map(|p| PartitionInfo { partition: p, leader: p % brokers, leader_epoch: 0, error_code: 0 })
        .collect();
    md.topics.insert("t".into(), TopicInfo { name: "t".into(), id: Uuid::nil(), partitions: parts });
    md
}

fn append(a: &mut Accumulator, choice: PartitionChoice, v: &'static str) -> Appended {
    a.append("t", choice, &rec(v), 0).unwrap().unwrap()
}

#[test]
fn explicit_and_keyed_partitions() {
    let (mut a, _) = acc(1 << 14, 3);
    let x = append(&mut a, PartitionChoice::Explicit(2), "a");
    let y = append(&mut a, PartitionChoice::Explicit(2), "b");
    assert_eq!((x.partition, x.index, y.index), (2, 0, 1));
    assert!(x.wake && !y.wake, "only the new batch wakes the sender");
    assert!(Arc::ptr_eq(&x.done, &y.done), "same batch");
    let k = append(&mut a, PartitionChoice::Hash(murmur2(b"21")), "c");
    assert_eq!(k.partition, 1173551340 % 3);
    let e = a.append("t", PartitionChoice::Explicit(3), &rec("d"), 0).err().unwrap();
    assert!(e.to_string().contains("partition 3 of topic t does not exist (it has 3 partitions)"), "{e}");
    assert!(a.append("other", PartitionChoice::Sticky, &rec("d"), 0).unwrap().is_none(), "unknown topic: load it");
    a.closing = true;
    assert!(matches!(a.append("t", PartitionChoice::Sticky, &rec("d"), 0), Err(Error::Closed)));
}

#[test]
fn full_batches_close_and_sticky_moves_on() {
    // Each record is ~70 bytes plus the 61-byte header: three fit in 300 bytes.
    let (mut a, _) = acc(300, 3);
    let v = "0123456789012345678901234567890123456789012345678901234567890123";
    let first = append(&mut a, PartitionChoice::Sticky, v);
    let p = first.partition;
    let mut last = first.index;
    let mut moved = None;
    for _ in 0..5 {
        let r = append(&mut a, PartitionChoice::Sticky, v);
        if r.partition != p {
            moved = Some(r);
            break;
        }
        assert!(Arc::ptr_eq(&r.done, &first.done));
        last = r.index;
    }
    let moved = moved.expect("sticky partition changes once its batch is full");
    assert_eq!(moved.partition, (p + 1) % 3, "round-robin");
    assert!(moved.wake);
    assert!(last >= 1);
    // The full batch is ready at once, without waiting for linger.
    let d = a.drain(Instant::now(), &metadata(3, 1), |_| 0);
    let sent: Vec<i32> = d.requests[&0].iter().map(|b| b.partition).collect();
    assert_eq!(sent, vec![p]);
    assert!(d.next_wakeup.is_some(), "the open batch's linger is the next wakeup");
}

#[test]
fn a_record_larger_than_batch_size_gets_its_own_batch() {
    let (mut a, _) = acc(10, 1);
    let x = append(&mut a, PartitionChoice::Explicit(0), "a long value, longer than batch.size");
    let y = append(&mut a, PartitionChoice::Explicit(0), "b");
    assert!(!Arc::ptr_eq(&x.done, &y.done));
    assert_eq!((x.index, y.index), (0, 0));
}

#[test]
fn linger_flush_and_one_batch_per_partition_per_request() {
    let (mut a, _) = acc(1 << 14, 4);
    for p in 0..4 {
        append(&mut a, PartitionChoice::Explicit(p), "x");
    }
    let md = metadata(4, 2);
    let now = Instant::now();
    let d = a.drain(now, &md, |_| 0);
    assert!(d.requests.is_empty(), "lingering");
    let wake = d.next_wakeup.unwrap();
    assert!(wake > now && wake <= now + Duration::from_millis(5));
    let d = a.drain(now + Duration::from_millis(6), &md, |_| 0);
    let mut by_node: Vec<(i32, Vec<i32>)> =
        d.requests.iter().map(|(n, bs)| (*n, bs.iter().map(|b| b.partition).collect())).collect();
    by_node.sort();
    assert_eq!(by_node, vec![(0, vec![0, 2]), (1, vec![1, 3])]);
    assert!(a.is_empty());
    // A flush ignores linger.
    append(&mut a, PartitionChoice::Explicit(0), "y");
    a.flushing = 1;
    assert_eq!(a.drain(Instant::now(), &md, |_| 0).requests[&0].len(), 1);
}

#[test]
fn in_flight_limit_size_limit_and_unknown_leader() {
    let (mut a, _) = acc(1 << 14, 2);
    a.flushing = 1;
    append(&mut a, PartitionChoice::Explicit(0), "x");
    append(&mut a, PartitionChoice::Explicit(1), "y");
    let md = metadata(2, 1);
    let d = a.drain(Instant::now(), &md, |_| 2);
    assert!(d.requests.is_empty(), "broker 0 has max.in.flight requests out");
    a.limits.max_request_size = 1;
    let d = a.drain(Instant::now(), &md, |_| 0);
    assert_eq!(d.requests[&0].len(), 1, "the first batch always goes, the rest wait for the next request");
    let mut no_leader = metadata(2, 1);
    no_leader.topics.get_mut("t").unwrap().partitions[1].leader = -1;
    let d = a.drain(Instant::now(), &no_leader, |_| 0);
    assert!(d.requests.is_empty());
    assert_eq!(d.no_leader, vec![Arc::<str>::from("t")]);
}

#[test]
fn expired_batches_and_retries() {
    let (mut a, memory) = acc(1 << 14, 1);
    a.append("t", PartitionChoice::Explicit(0), &rec("x"), 1000).unwrap().unwrap();
    assert_eq!(memory.available_permits(), (1 << 20), "the caller reserved the memory, not the accumulator");
    let later = Instant::now() + Duration::from_secs(121);
    let d = a.drain(later, &metadata(1, 1), |_| 0);
    assert_eq!(d.expired.len(), 1);
    drop(d);
    assert_eq!(memory.available_permits(), (1 << 20) + 1000, "dropping a batch gives its memory back");

    let x = append(&mut a, PartitionChoice::Explicit(0), "y");
    let now = Instant::now() + Duration::from_millis(10);
    let mut d = a.drain(now, &metadata(1, 1), |_| 0);
    let mut b = d.requests.remove(&0).unwrap().pop().unwrap();
    assert!(b.finish(Compression::None).is_ok());
    b.retry_at = Some(now + Duration::from_millis(100));
    a.requeue(b);
    let y = append(&mut a, PartitionChoice::Explicit(0), "z");
    assert!(!Arc::ptr_eq(&x.done, &y.done), "a retried batch takes no more records");
    let d = a.drain(now, &metadata(1, 1), |_| 0);
    assert!(d.requests.is_empty(), "backing off");
    assert_eq!(d.next_wakeup, Some(now + Duration::from_millis(100)));
    assert_eq!(a.incomplete().len(), 2);
    let d = a.drain(now + Duration::from_millis(100), &metadata(1, 1), |_| 0);
    assert!(Arc::ptr_eq(&d.requests[&0][0].done, &x.done), "the retry goes first");
}

#[test]
fn dropped_batches_fail_their_futures() {
    let (mut a, _) = acc(1 << 14, 1);
    let x = append(&mut a, PartitionChoice::Explicit(0), "x");
    drop(a.take_all());
    assert!(x.done.is_done());
}
