//! `decide`, case by case: each `SinkError` kind under each tolerance and dead-letter setting,
//! a batch of one against a batch of many, and retries under and at the limit.

use super::*;
use Decision::{Accept, BrokerDeadLetter, DeadLetter, Reject, Retry};

fn policy(tolerance: ErrorTolerance, dead_letter: DeadLetterTo) -> Policy {
    Policy { tolerance, dead_letter, max_failures: 3 }
}

/// errors.tolerance=all, a dead-letter topic written by the runtime.
fn dlq() -> Policy {
    policy(ErrorTolerance::All, DeadLetterTo::Topic)
}

fn fail(index: usize, reason: &str) -> RecordFailure {
    RecordFailure { index, reason: reason.to_string() }
}

fn records(v: Verdict<'_>) -> Vec<Decision<'_>> {
    match v {
        Verdict::Records(d) => d,
        Verdict::Stop { record, why, .. } => panic!("stopped at {record:?}: {why}"),
    }
}

fn stop(v: Verdict<'_>) -> (Option<usize>, String) {
    match v {
        Verdict::Stop { record, why, .. } => (record, why),
        Verdict::Records(d) => panic!("no stop: {d:?}"),
    }
}

#[test]
fn ok_accepts_every_record() {
    let r = Ok(());
    assert_eq!(records(decide(&r, &[0, 2, 0], &dlq())), vec![Accept; 3]);
    // Whatever the tolerance and the retries before.
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    assert_eq!(records(decide(&r, &[5], &none)), vec![Accept]);
    assert_eq!(records(decide(&r, &[], &none)), Vec::<Decision>::new());
}

#[test]
fn retriable_batch_of_many_retries_every_record_whatever_its_past() {
    // In a batch of more than one the failure may be a batch-mate's: no one has used up
    // anything, however often it failed alone before (the caller splits the batch).
    let r = Err(SinkError::retriable("down"));
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    for p in [dlq(), none] {
        assert_eq!(records(decide(&r, &[0, 2, 9], &p)), vec![Retry { reason: "down" }; 3]);
    }
}

#[test]
fn retriable_alone_retries_under_the_limit() {
    let r = Err(SinkError::retriable("down"));
    // max_failures 3: failures alone number 1 and 2 try again.
    assert_eq!(records(decide(&r, &[0], &dlq())), vec![Retry { reason: "down" }]);
    assert_eq!(records(decide(&r, &[1], &dlq())), vec![Retry { reason: "down" }]);
}

#[test]
fn retriable_alone_at_the_limit_takes_the_dead_letter_path() {
    let r = Err(SinkError::retriable("down"));
    assert_eq!(records(decide(&r, &[2], &dlq())), vec![DeadLetter { reason: "down" }]);
    let broker = policy(ErrorTolerance::All, DeadLetterTo::Broker);
    assert_eq!(records(decide(&r, &[2], &broker)), vec![BrokerDeadLetter { reason: "down" }]);
    let nowhere = policy(ErrorTolerance::All, DeadLetterTo::Nowhere);
    assert_eq!(records(decide(&r, &[7], &nowhere)), vec![Reject { reason: "down" }]);
}

#[test]
fn retriable_alone_at_the_limit_stops_under_tolerance_none() {
    let r = Err(SinkError::retriable("down"));
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    let (record, why) = stop(decide(&r, &[2], &none));
    assert_eq!(record, Some(0));
    assert!(why.contains("failed 3 times on its own (share.max.delivery.count=3)"), "{why}");
    assert!(why.contains("errors.tolerance=none: down"), "{why}");
}

#[test]
fn a_limit_of_one_gives_up_at_the_first_failure_alone_and_zero_counts_as_one() {
    let r = Err(SinkError::retriable("down"));
    for max in [0, 1] {
        let p = Policy { max_failures: max, ..dlq() };
        assert_eq!(records(decide(&r, &[0], &p)), vec![DeadLetter { reason: "down" }]);
        // Still split first when it is in a batch.
        assert_eq!(records(decide(&r, &[0, 0], &p)), vec![Retry { reason: "down" }; 2]);
    }
}

#[test]
fn retriable_records_retry_the_named_ones_as_alone_and_accept_the_rest() {
    let r = Err(SinkError::RetriableRecords { retriable: vec![fail(1, "503")], failed: vec![] });
    assert_eq!(records(decide(&r, &[0, 0, 0], &dlq())), vec![Accept, Retry { reason: "503" }, Accept]);
    // Counted as alone even in a batch: at the limit it has failed for good.
    assert_eq!(records(decide(&r, &[0, 2, 0], &dlq())), vec![Accept, DeadLetter { reason: "503" }, Accept]);
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    assert_eq!(stop(decide(&r, &[0, 2, 0], &none)).0, Some(1));
}

#[test]
fn retriable_records_dead_letter_the_failed_ones() {
    let r = Err(SinkError::RetriableRecords { retriable: vec![fail(0, "503")], failed: vec![fail(2, "400")] });
    assert_eq!(
        records(decide(&r, &[0, 0, 0], &dlq())),
        vec![Retry { reason: "503" }, Accept, DeadLetter { reason: "400" }]
    );
    // Under tolerance none the failed one stops the task (the retriable one would not).
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    let (record, why) = stop(decide(&r, &[0, 0, 0], &none));
    assert_eq!(record, Some(2));
    assert!(why.contains("errors.tolerance=none") && why.ends_with("400"), "{why}");
}

#[test]
fn a_record_named_retriable_and_failed_has_failed_for_good() {
    let r = Err(SinkError::RetriableRecords { retriable: vec![fail(0, "503")], failed: vec![fail(0, "400")] });
    assert_eq!(records(decide(&r, &[0, 0], &dlq())), vec![DeadLetter { reason: "400" }, Accept]);
}

#[test]
fn records_with_a_dead_letter_topic_copy_the_failed_ones_and_accept_the_rest() {
    let r = Err(SinkError::Records { failed: vec![fail(0, "bad"), fail(3, "worse")] });
    assert_eq!(
        records(decide(&r, &[0; 4], &dlq())),
        vec![DeadLetter { reason: "bad" }, Accept, Accept, DeadLetter { reason: "worse" }]
    );
}

#[test]
fn records_without_a_dead_letter_queue_reject_the_failed_ones() {
    let r = Err(SinkError::Records { failed: vec![fail(1, "bad")] });
    let nowhere = policy(ErrorTolerance::All, DeadLetterTo::Nowhere);
    assert_eq!(records(decide(&r, &[0; 3], &nowhere)), vec![Accept, Reject { reason: "bad" }, Accept]);
}

#[test]
fn records_in_broker_mode_reject_for_the_broker_to_copy() {
    let r = Err(SinkError::Records { failed: vec![fail(1, "bad")] });
    let broker = policy(ErrorTolerance::All, DeadLetterTo::Broker);
    assert_eq!(records(decide(&r, &[0; 2], &broker)), vec![Accept, BrokerDeadLetter { reason: "bad" }]);
}

#[test]
fn records_under_tolerance_none_stop_at_the_earliest_named_record() {
    // The batch's order, not the order the sink named them in: the task stops where a
    // Connect task would have.
    let r = Err(SinkError::Records { failed: vec![fail(2, "bad"), fail(0, "worse")] });
    for dl in [DeadLetterTo::Nowhere, DeadLetterTo::Topic, DeadLetterTo::Broker] {
        let (record, why) = stop(decide(&r, &[0; 3], &policy(ErrorTolerance::None, dl)));
        assert_eq!(record, Some(0));
        assert!(why.ends_with(": worse"), "{why}");
    }
    // A record of a batch of one is no different.
    let one = Err(SinkError::record(0, "bad"));
    assert_eq!(stop(decide(&one, &[0], &policy(ErrorTolerance::None, DeadLetterTo::Nowhere))).0, Some(0));
}

#[test]
fn records_keep_the_first_reason_of_a_record_named_twice() {
    let r = Err(SinkError::Records { failed: vec![fail(0, "first"), fail(0, "second")] });
    assert_eq!(records(decide(&r, &[0], &dlq())), vec![DeadLetter { reason: "first" }]);
}

#[test]
fn indexes_outside_the_batch_are_ignored_and_named() {
    let r = Err(SinkError::Records { failed: vec![fail(5, "bad"), fail(1, "worse")] });
    assert_eq!(records(decide(&r, &[0; 2], &dlq())), vec![Accept, DeadLetter { reason: "worse" }]);
    // Under tolerance none an index outside the batch stops nothing.
    let only_stray = Err(SinkError::record(9, "bad"));
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    assert_eq!(records(decide(&only_stray, &[0; 2], &none)), vec![Accept; 2]);
    assert_eq!(stray_indexes(&r, 2), vec![5]);
    let mixed = Err(SinkError::RetriableRecords { retriable: vec![fail(4, "x")], failed: vec![fail(0, "y")] });
    assert_eq!(stray_indexes(&mixed, 2), vec![4]);
    assert!(stray_indexes(&Err(SinkError::retriable("x")), 0).is_empty());
    assert!(stray_indexes(&Ok(()), 0).is_empty());
}

#[test]
fn fatal_stops_the_task_and_names_no_record() {
    let r = Err(SinkError::fatal("credentials gone"));
    for p in [dlq(), policy(ErrorTolerance::None, DeadLetterTo::Nowhere)] {
        let (record, why) = stop(decide(&r, &[0, 0], &p));
        assert_eq!(record, None);
        assert_eq!(why, "fatal: credentials gone");
    }
}

fn written(v: Verdict<'_>) -> Vec<bool> {
    match v {
        Verdict::Stop { written, .. } => written,
        Verdict::Records(d) => panic!("no stop: {d:?}"),
    }
}

#[test]
fn tolerance_none_stops_at_the_earliest_failed_record_keeping_what_the_sink_has() {
    let none = policy(ErrorTolerance::None, DeadLetterTo::Nowhere);
    // Named out of order: the stop is at the earliest, with its own reason.
    let r = Err(SinkError::Records { failed: vec![fail(4, "late"), fail(2, "early")] });
    let (record, why) = stop(decide(&r, &[0; 6], &none));
    assert_eq!(record, Some(2));
    assert!(why.ends_with("early"), "{why}");
    // Every record the sink did not name is written: accepted before the stop, so a restart
    // writes none of them again; the named ones go back.
    assert_eq!(written(decide(&r, &[0; 6], &none)), vec![true, true, false, true, false, true]);
    let r = Err(SinkError::RetriableRecords { retriable: vec![fail(0, "503")], failed: vec![fail(3, "400")] });
    assert_eq!(written(decide(&r, &[0; 4], &none)), vec![false, true, true, false]);
    // A whole-batch answer names nothing written.
    assert!(written(decide(&Err(SinkError::fatal("gone")), &[0; 3], &none)).is_empty());
    assert!(written(decide(&Err(SinkError::retriable("down")), &[2], &none)).is_empty());
}
