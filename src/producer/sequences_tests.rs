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
    let mut q = queue(4);
    let first = drain(&mut s, &mut q).unwrap();
    s.acked(&first);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!((seq_of(&a), seq_of(&b)), ((0, 1), (0, 2)));
    // `a`'s connection broke: it is retried with its sequence, and `b` (also failed) waits
    // behind it even though its answer came first.
    assert_eq!(s.refused(&b, &broker_error(45)), Verdict::Retry, "b is not next: an earlier batch failed");
    assert_eq!(s.refused(&a, &Error::Closed), Verdict::Default);
    q.push_front(b);
    q.push_front(a);
    let a = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&a), (0, 1));
    assert!(drain(&mut s, &mut q).is_none(), "b must not overtake a");
    s.acked(&a);
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&b), (0, 2));
    s.acked(&b);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (0, 3));
}

#[test]
fn a_gap_bumps_the_epoch_and_restarts_sequences_once_nothing_is_on_the_wire() {
    let mut s = seqs();
    let mut q = queue(3);
    let a = drain(&mut s, &mut q).unwrap();
    s.acked(&a);
    let b = drain(&mut s, &mut q).unwrap();
    // b is the next batch, yet out of order: the broker lost something.
    assert_eq!(s.refused(&b, &broker_error(45)), Verdict::Retry);
    q.push_front(b);
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&b), (1, 0), "new epoch, sequence 0");
    s.acked(&b);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (1, 1));
    assert_eq!(s.current, Some(ProducerId { id: 7, epoch: 1 }));
}

#[test]
fn a_failed_batch_resets_its_partition_and_invalid_epoch_asks_for_a_new_id() {
    let mut s = seqs();
    let mut q = queue(4);
    let first = drain(&mut s, &mut q).unwrap();
    s.acked(&first);
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

/// The stall of `hundred_thousand_records_over_ten_partitions_keep_order`: right after the
/// topic was created, the first batch met NOT_LEADER_OR_FOLLOWER, the second (already in
/// flight) found the leader ready and, the broker holding no state for the producer yet, was
/// written with sequence 55; the first one was then refused as out of order until it expired.
/// So the first batch of an epoch must go alone.
#[test]
fn the_first_batch_of_an_epoch_goes_alone_until_acknowledged() {
    let mut s = seqs();
    let mut q = queue(3);
    let a = drain(&mut s, &mut q).unwrap();
    assert!(drain(&mut s, &mut q).is_none(), "b must wait: the broker would take any sequence");
    let not_leader = broker_error(6);
    assert_eq!(s.refused(&a, &not_leader), Verdict::Default);
    q.push_front(a);
    let a = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&a), (0, 0));
    assert!(drain(&mut s, &mut q).is_none());
    s.acked(&a);
    // From now on the broker checks the order itself: several batches may be in flight.
    let b = drain(&mut s, &mut q).unwrap();
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!((seq_of(&b), seq_of(&c)), ((0, 1), (0, 2)));
    // The same after a new epoch.
    s.failed(&b, true);
    assert_eq!(s.refused(&c, &broker_error(45)), Verdict::Retry);
    q.push_front(c);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (1, 0));
    q.extend(queue(1));
    assert!(drain(&mut s, &mut q).is_none(), "first batch of epoch 1 not acknowledged yet");
    s.acked(&c);
    assert_eq!(seq_of(&drain(&mut s, &mut q).unwrap()), (1, 1));
}

/// How the stall showed, and what a resend refused as out of order means once the broker
/// acknowledged a later batch: the broker writes sequences without gaps, so it has this batch
/// too. Retrying it until `delivery.timeout.ms` only held the whole partition back; it is a
/// success with an unknown offset, and leaves no gap to reset for.
#[test]
fn a_resend_the_broker_went_past_is_written_not_retried_forever() {
    let mut s = seqs();
    let mut q = queue(4);
    let first = drain(&mut s, &mut q).unwrap();
    s.acked(&first);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(s.refused(&a, &Error::Closed), Verdict::Default, "a's answer was lost");
    s.acked(&b);
    q.push_front(a);
    let a = drain(&mut s, &mut q).unwrap();
    assert_eq!(s.refused(&a, &broker_error(45)), Verdict::Written);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (0, 3), "no reset: the sequences go on");
}

/// `cut_connections_neither_duplicate_nor_reorder` wrote batches twice: a batch whose answer
/// a cut connection lost was resent while new batches kept going; six newer batches were
/// written before the resend arrived, the broker (which remembers 5) refused it as out of
/// order, and the reset that followed restamped batches the broker already had. So no new
/// batch goes while a refused one is unanswered.
#[test]
fn no_new_batch_goes_while_a_refused_one_is_unanswered() {
    let mut s = seqs();
    let mut q = queue(4);
    let first = drain(&mut s, &mut q).unwrap();
    s.acked(&first);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    assert_eq!(s.refused(&a, &Error::Closed), Verdict::Default);
    q.push_front(a);
    let a = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&a), (0, 1));
    assert!(drain(&mut s, &mut q).is_none(), "no new batch while a's resend is unanswered");
    s.acked(&b);
    assert!(drain(&mut s, &mut q).is_none());
    s.acked(&a);
    let c = drain(&mut s, &mut q).unwrap();
    assert_eq!(seq_of(&c), (0, 3));
}

/// Answers are handled in any order: an older batch acknowledged last must not move the
/// last acknowledged sequence back (it would make a later batch look next in line).
#[test]
fn an_older_answer_handled_last_keeps_the_last_acknowledged_sequence() {
    let mut s = seqs();
    let mut q = queue(4);
    let first = drain(&mut s, &mut q).unwrap();
    s.acked(&first);
    let a = drain(&mut s, &mut q).unwrap();
    let b = drain(&mut s, &mut q).unwrap();
    let c = drain(&mut s, &mut q).unwrap();
    s.acked(&b);
    s.acked(&a);
    // c refused as out of order is next in line after b (a real gap): reset.
    assert_eq!(s.refused(&c, &broker_error(45)), Verdict::Retry);
    q.push_front(c);
    assert_eq!(seq_of(&drain(&mut s, &mut q).unwrap()), (1, 0));
}
