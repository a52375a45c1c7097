//! The idempotent bookkeeping, driven with made-up answers.

use super::*;
use crate::error::Context;

const PID: ProducerId = ProducerId { id: 7, epoch: 0 };

fn seqs() -> Sequences {
    Sequences { current: Some(PID), ..Default::default() }
}

fn queue(n: usize) -> VecDeque<Batch> {
    (0..n).map(|_| Batch::for_test("t", 0)).collect()
}

fn broker_error(code: i16) -> Error {
    Error::from_code(code, None, Context::api("Produce")).unwrap()
}

/// Drains the front batch if allowed, as the accumulator does.
fn drain(s: &mut Sequences, q: &mut VecDeque<Batch>) -> Option<Batch> {
    let topic: Arc<str> = Arc::from("t");
    if !s.prepare(&topic, 0, q) {
        return None;
    }
    let b = q.pop_front()?;
    s.sent(&b);
    Some(b)
}

fn seq_of(b: &Batch) -> (i16, i32) {
    let s = b.stamp.unwrap();
    (s.producer_epoch, s.base_sequence)
}

#[test]
fn nothing_goes_without_a_producer_id() {
    let mut s = Sequences::default();
    let mut q = queue(1);
    assert!(drain(&mut s, &mut q).is_none());
}

#[test]
fn batches_get_consecutive_sequences_and_keep_them_on_retry() {
    let mut s = seqs();
    let mut q = queue(3);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!((seq_of(&a), seq_of(&b)), ((0, 0), (0, 1)));
    // `a`'s connection broke: it is retried with its sequence, and `b` (also failed) waits
    // behind it even though its answer came first.
    assert_eq!(s.refused(&b, &broker_error(45)), Verdict::Retry, "b is not next: an earlier batch failed");
    assert_eq!(s.refused(&a, &Error::Closed), Verdict::Default);
    q.push_front(b);
    q.push_front(a);
    let a = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&a), (0, 0));
    assert!(drain(&mut s, &mut q).is_none(), "b must not overtake a");
    s.acked(&a);
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&b), (0, 1));
    s.acked(&b);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (0, 2));
}

#[test]
fn a_gap_bumps_the_epoch_and_restarts_sequences_once_nothing_is_on_the_wire() {
    let mut s = seqs();
    let mut q = queue(3);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    s.acked(&a);
    // b is the next batch, yet out of order: the broker lost something.
    assert_eq!(s.refused(&b, &broker_error(45)), Verdict::Retry);
    q.push_front(b);
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&b), (1, 0), "new epoch, sequence 0");
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (1, 1));
    assert_eq!(s.current, Some(ProducerId { id: 7, epoch: 1 }));
}

#[test]
fn a_failed_batch_resets_its_partition_and_invalid_epoch_asks_for_a_new_id() {
    let mut s = seqs();
    let mut q = queue(3);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    s.failed(&a, true); // e.g. MESSAGE_TOO_LARGE: sequence 0 never made it
    assert_eq!(s.refused(&b, &broker_error(45)), Verdict::Retry);
    q.push_front(b);
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&b), (1, 0));
    assert_eq!(s.refused(&b, &broker_error(47)), Verdict::Retry);
    assert_eq!(s.current, None, "INVALID_PRODUCER_EPOCH: a new producer id is needed");
    q.push_front(b);
    assert!(drain(&mut s, &mut q).is_none());
    s.current = Some(ProducerId { id: 8, epoch: 0 });
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!((b.stamp.unwrap().producer_id, seq_of(&b)), (8, (0, 0)));
}
