//! The ledger's decisions in virtual time: no broker, no clock.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::*;
use crate::consumer::driver::{Delivered, PollAnswer, Renewed};
use crate::consumer::ConsumerRecord;
use crate::share::TopicIdPartition;

const LOCK: Duration = Duration::from_secs(30);

fn limits(slots: usize, batch_size: usize) -> Limits {
    Limits {
        slots,
        batch_size,
        prefetch: slots * batch_size,
        prefetch_follows_slots: false,
        prefetch_adapts: false,
        max_unstarted: None,
        max_retries: 2,
        backoff: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        on_exhausted: AckKind::Release,
    }
}

fn tp() -> TopicIdPartition {
    TopicIdPartition { topic_id: uuid::Uuid::nil(), partition: 0 }
}

fn answer(offsets: std::ops::Range<i64>, now: Instant) -> PollAnswer {
    let topic: Arc<str> = "t".into();
    let records = offsets
        .map(|o| {
            let mut record = ConsumerRecord::for_test(topic.clone(), 0, o);
            record.lock_deadline = Some(now + LOCK);
            // Each its own acquired batch: acknowledgements leave as they are decided (the
            // whole-batch hold has tests of its own, below and in whole_batches.rs).
            Delivered { record, tp: tp(), node: 1, generation: 1, batch: (o, o) }
        })
        .collect();
    PollAnswer { records, renewed: Vec::new() }
}

/// Like `answer`, every record delivered `count` times already.
fn redelivered(offsets: std::ops::Range<i64>, count: i16, now: Instant) -> PollAnswer {
    let mut a = answer(offsets, now);
    for d in &mut a.records {
        d.record.delivery_count = count;
    }
    a
}

fn ledger(slots: usize, batch: usize) -> Ledger {
    let mut l = Ledger::new(limits(slots, batch), true, Arc::default());
    l.set_lock(Some(LOCK));
    l
}

fn kinds(acks: &[AckEntry]) -> Vec<(i64, AckKind)> {
    acks.iter().flat_map(|a| a.clone().singles()).map(|a| (a.offset, a.kind)).collect()
}

#[test]
fn acquisition_follows_free_slots_and_outcomes_leave_one_by_one() {
    let t0 = Instant::now();
    let mut l = ledger(4, 1);
    assert_eq!(l.want(), 8, "4 slots and 4 prefetched");
    l.received(answer(0..8, t0), t0);
    assert_eq!(l.want(), 0);
    let units = l.start(t0);
    assert_eq!(units.len(), 4, "one handler per slot");
    assert!(l.start(t0).is_empty(), "no fifth handler");
    // The third finishes first: its outcome is decided at once, the others keep running.
    l.finished(&units[2].ids, &[Outcome::Accept], Duration::from_millis(5), t0);
    assert_eq!(kinds(&l.take_acks()), vec![(2, AckKind::Accept)]);
    assert_eq!(l.want(), 1);
    let next = l.start(t0);
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].deliveries[0].record().offset, 4, "the queue is FIFO");
}

#[test]
fn a_poll_waits_for_a_quarter_of_the_room_unless_the_queue_is_empty() {
    let t0 = Instant::now();
    let mut l = ledger(8, 1);
    assert!(l.should_poll());
    l.received(answer(0..16, t0), t0);
    let units = l.start(t0);
    l.finished(&units[0].ids, &[Outcome::Accept], Duration::ZERO, t0);
    assert!(!l.should_poll(), "one free record's worth is not worth a round trip");
    for u in &units[1..4] {
        l.finished(&u.ids, &[Outcome::Accept], Duration::ZERO, t0);
    }
    assert!(l.should_poll(), "a quarter of the room is");
}

#[test]
fn records_not_started_in_time_go_back_at_once() {
    let t0 = Instant::now();
    let mut l = ledger(1, 1);
    l.received(answer(0..3, t0), t0);
    let running = l.start(t0);
    assert_eq!(running.len(), 1);
    assert_eq!(l.next_deadline(t0), Some(t0 + LOCK / 4), "the queued ones' bound");
    l.tick(t0 + LOCK / 4 - Duration::from_millis(1));
    assert!(l.take_acks().is_empty());
    l.tick(t0 + LOCK / 4);
    assert_eq!(kinds(&l.take_acks()), vec![(1, AckKind::Release), (2, AckKind::Release)]);
    assert_eq!(l.held_records(), 1, "the running one stays");
    assert_eq!(l.want(), 0, "every slot still busy: nothing more is acquired to sit here");
    l.finished(&running[0].ids, &[Outcome::Accept], LOCK, t0 + LOCK / 2);
    assert_eq!(l.want(), 2, "a slot freed");
}

#[test]
fn a_record_that_went_back_once_is_kept_renewed_and_started_first() {
    // Each release of a record never started uses up one of its deliveries: a record bounced
    // by busy slots `share.delivery.count.limit` times would be archived unprocessed.
    let t0 = Instant::now();
    let mut l = ledger(1, 1);
    l.received(answer(0..2, t0), t0);
    let running = l.start(t0); // offset 0 runs, 1 waits
    l.received(redelivered(10..11, 2, t0), t0); // a record back from an earlier release
    l.tick(t0 + LOCK / 4);
    assert_eq!(kinds(&l.take_acks()), vec![(1, AckKind::Release)], "only the first delivery goes back");
    assert_eq!(l.held_records(), 2, "the running one and the kept one");
    assert!(l.next_deadline(t0).is_some_and(|d| d > t0 + LOCK / 4), "a kept record sets no past deadline");
    // Half its lock gone: renewed while it waits.
    l.tick(t0 + LOCK / 2);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Renew), (10, AckKind::Renew)]);
    // A newer record arrives; the kept one starts first when the slot frees.
    l.received(answer(20..21, t0 + LOCK / 2), t0 + LOCK / 2);
    l.finished(&running[0].ids, &[Outcome::Accept], LOCK / 2, t0 + LOCK / 2);
    let next = l.start(t0 + LOCK / 2);
    assert_eq!(next[0].deliveries[0].record().offset, 10);
}

#[test]
fn without_renew_a_kept_record_goes_back_before_its_lock_lapses() {
    let t0 = Instant::now();
    let mut l = Ledger::new(limits(1, 1), false, Arc::default());
    l.set_lock(Some(LOCK));
    l.received(answer(0..1, t0), t0);
    let _running = l.start(t0);
    l.received(redelivered(10..11, 3, t0), t0);
    l.tick(t0 + LOCK / 4);
    assert!(l.take_acks().is_empty(), "kept past the bound");
    assert_eq!(l.next_deadline(t0), Some(t0 + LOCK * 3 / 4), "until three quarters of its lock");
    l.tick(t0 + LOCK * 3 / 4);
    assert_eq!(kinds(&l.take_acks()), vec![(10, AckKind::Release)]);
}

#[test]
fn a_long_handler_is_renewed_alone_and_its_deadline_moves() {
    let t0 = Instant::now();
    let mut l = ledger(2, 1);
    l.received(answer(0..2, t0), t0);
    let units = l.start(t0);
    l.finished(&units[1].ids, &[Outcome::Accept], Duration::ZERO, t0);
    l.take_acks();
    let half = t0 + LOCK / 2;
    assert_eq!(l.next_deadline(t0), Some(half));
    l.tick(half - Duration::from_millis(1));
    assert!(l.take_acks().is_empty());
    l.tick(half);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Renew)]);
    assert!(l.renewals_in_flight());
    l.tick(half + Duration::from_secs(1));
    assert!(l.take_acks().is_empty(), "one RENEW at a time");
    let renewed_until = half + LOCK;
    let renewed = Renewed { tp: tp(), offset: 0, result: Ok(()), lock_deadline: Some(renewed_until) };
    l.received(PollAnswer { records: Vec::new(), renewed: vec![renewed] }, half);
    assert_eq!(units[0].deliveries[0].lock_deadline(), Some(renewed_until), "the handler sees it");
    l.tick(half + Duration::from_millis(1));
    assert_eq!(l.next_deadline(t0), Some(renewed_until - LOCK / 2), "the next renewal");
    l.finished(&units[0].ids, &[Outcome::Accept], LOCK, t0 + LOCK + Duration::from_secs(1));
    let acks = l.take_acks();
    assert_eq!(kinds(&acks), vec![(0, AckKind::Accept)]);
    assert_eq!(acks[0].lock_deadline, Some(renewed_until));
    assert_eq!(l.metrics.lapsed.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn without_renew_a_late_outcome_counts_as_a_lapse() {
    let t0 = Instant::now();
    let mut l = Ledger::new(limits(1, 1), false, Arc::default());
    l.set_lock(Some(LOCK));
    l.received(answer(0..1, t0), t0);
    let u = l.start(t0);
    l.tick(t0 + LOCK / 2);
    assert!(l.take_acks().is_empty(), "no RENEW on a v1 cluster");
    l.finished(&u[0].ids, &[Outcome::Accept], LOCK, t0 + LOCK);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Accept)], "sent, for the driver to refuse and report");
    assert_eq!(l.metrics.lapsed.load(std::sync::atomic::Ordering::Relaxed), 1);
}

#[test]
fn retry_later_backs_off_then_runs_again_then_gives_up() {
    let t0 = Instant::now();
    let mut l = ledger(1, 1);
    l.received(answer(0..1, t0), t0);
    let u = l.start(t0);
    l.finished(&u[0].ids, &[Outcome::Retry], Duration::ZERO, t0);
    assert!(l.take_acks().is_empty(), "kept here");
    assert!(l.start(t0).is_empty(), "not before its backoff");
    assert_eq!(l.next_deadline(t0), Some(t0 + Duration::from_millis(100)));
    let t1 = t0 + Duration::from_millis(100);
    let u = l.start(t1);
    assert_eq!((u[0].deliveries[0].attempt(), u[0].deliveries[0].retries()), (2, 1));
    l.finished(&u[0].ids, &[Outcome::Retry], Duration::ZERO, t1);
    assert!(l.start(t1 + Duration::from_millis(199)).is_empty(), "the backoff doubled");
    let t2 = t1 + Duration::from_millis(200);
    let u = l.start(t2);
    l.finished(&u[0].ids, &[Outcome::Retry], Duration::ZERO, t2);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Release)], "max_retries 2: the third retry gives up");
    assert_eq!(l.held_records(), 0);
}

#[test]
fn a_failed_batch_is_split_until_the_failing_record_is_alone() {
    let t0 = Instant::now();
    let mut l = ledger(1, 8);
    l.received(answer(0..8, t0), t0);
    let mut now = t0;
    let mut calls = 0;
    // Record 5 always fails; a batch holding it fails as a whole.
    loop {
        let units = l.start(now);
        for u in &units {
            calls += 1;
            let offsets: Vec<i64> = u.deliveries.iter().map(|d| d.record().offset).collect();
            let outcome = if offsets.contains(&5) { Outcome::Retry } else { Outcome::Accept };
            let outcomes = vec![outcome; offsets.len()];
            l.finished(&u.ids, &outcomes, Duration::ZERO, now);
        }
        if l.held_records() == 0 || calls > 50 {
            break;
        }
        now = l.next_deadline(now).unwrap_or(now).max(now);
    }
    let acks = kinds(&l.take_acks());
    let accepted: Vec<i64> = acks.iter().filter(|a| a.1 == AckKind::Accept).map(|a| a.0).collect();
    assert_eq!(accepted.len(), 7, "every good record got through: {acks:?}");
    assert!(!accepted.contains(&5));
    assert_eq!(acks.iter().filter(|a| a.1 == AckKind::Release).map(|a| a.0).collect::<Vec<_>>(), vec![5]);
    assert!(calls <= 12, "8 -> 4 -> 2 -> 1, then the retries alone: {calls}");
}

#[test]
fn shutdown_releases_what_has_not_started_and_keeps_the_running() {
    let t0 = Instant::now();
    let mut l = ledger(2, 1);
    l.received(answer(0..4, t0), t0);
    let u = l.start(t0);
    l.finished(&u[0].ids, &[Outcome::Retry], Duration::ZERO, t0);
    l.release_unstarted(t0);
    let acks = kinds(&l.take_acks());
    assert_eq!(acks, vec![(2, AckKind::Release), (3, AckKind::Release), (0, AckKind::Release)]);
    assert_eq!(l.held_records(), 1, "the running one finishes first");
    l.finished(&u[1].ids, &[Outcome::Accept], Duration::ZERO, t0);
    assert_eq!(kinds(&l.take_acks()), vec![(1, AckKind::Accept)]);
}

#[test]
fn a_batch_answer_of_the_wrong_length_releases_the_missing_records() {
    let t0 = Instant::now();
    let mut l = ledger(1, 3);
    l.received(answer(0..3, t0), t0);
    let u = l.start(t0);
    l.finished(&u[0].ids, &[Outcome::Accept], Duration::ZERO, t0);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Accept), (1, AckKind::Release), (2, AckKind::Release)]);
}

#[test]
fn a_running_batch_smaller_than_the_batch_size_leaves_no_room_to_start_more() {
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { prefetch: 0, ..limits(1, 500) }, true, Arc::default());
    l.set_lock(Some(LOCK));
    assert_eq!(l.want(), 500);
    l.received(answer(0..200, t0), t0);
    let u = l.start(t0);
    assert_eq!(u[0].ids.len(), 200);
    assert_eq!(l.want(), 0, "300 more could only wait behind the running call");
    l.finished(&u[0].ids, &[Outcome::Accept; 200], Duration::from_millis(1), t0);
    assert_eq!(l.want(), 500);
    let mut p = Ledger::new(limits(1, 500), true, Arc::default());
    p.received(answer(0..200, t0), t0);
    p.start(t0);
    assert_eq!(p.want(), 500, "with a prefetch of one batch: that batch");
}

#[test]
fn a_pool_spreads_what_is_queued_over_its_free_handlers_and_follows_its_size() {
    // Twelve sink tasks on one engine: a fetch of 600 records goes to every free task, not
    // to the first one in a batch of 500 while eleven stay idle (a slow put would hold
    // them all).
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { prefetch_follows_slots: true, ..limits(12, 500) }, true, Arc::default());
    l.set_lock(Some(LOCK));
    l.received(answer(0..600, t0), t0);
    let units = l.start(t0);
    assert_eq!(units.len(), 12);
    assert!(units.iter().all(|u| u.ids.len() == 50), "{:?}", units.iter().map(|u| u.ids.len()).collect::<Vec<_>>());
    // Records come in while all but two are busy: those two share them, at most 500 each.
    for u in &units[..2] {
        l.finished(&u.ids, &vec![Outcome::Accept; u.ids.len()], Duration::ZERO, t0);
    }
    l.received(answer(600..1700, t0), t0);
    let sizes: Vec<usize> = l.start(t0).iter().map(|u| u.ids.len()).collect();
    assert_eq!(sizes, vec![500, 500]);
    // A task removed (a slot less) shrinks the room, the prefetch with it.
    let before = l.want();
    l.set_slots(11);
    assert_eq!(before - l.want(), 500, "one batch of prefetch less");
}

/// Records `offsets` acquired as one batch (first and last offset of the range).
fn one_batch(offsets: std::ops::Range<i64>, now: Instant) -> PollAnswer {
    let batch = (offsets.start, offsets.end - 1);
    let mut a = answer(offsets, now);
    for d in &mut a.records {
        d.batch = batch;
    }
    a
}

#[test]
fn accepts_leave_when_their_acquired_batch_is_whole_or_the_hold_is_over() {
    // A partial acknowledgement makes the broker track the batch offset by offset (twice its
    // CPU for the sink's stream): the engine's ACCEPTs wait for their batch-mates, briefly.
    let t0 = Instant::now();
    let mut l = ledger(2, 5);
    l.received(one_batch(0..10, t0), t0);
    let units = l.start(t0);
    assert_eq!(units.len(), 2);
    l.finished(&units[1].ids, &[Outcome::Accept; 5], Duration::ZERO, t0);
    assert!(l.take_acks().is_empty(), "half the batch is done: held");
    assert_eq!(l.next_deadline(t0), Some(t0 + super::super::whole_batches::HOLD));
    l.finished(&units[0].ids, &[Outcome::Accept; 5], Duration::ZERO, t0);
    let acks = l.take_acks();
    assert_eq!(kinds(&acks), (0..10).map(|o| (o, AckKind::Accept)).collect::<Vec<_>>(), "the whole batch at once");
    assert_eq!(acks.len(), 1, "as one run, though its halves finished out of order");
    // A batch whose last record runs long: the others go after the hold.
    l.received(one_batch(10..20, t0), t0);
    let units = l.start(t0);
    l.finished(&units[0].ids, &[Outcome::Accept; 5], Duration::ZERO, t0);
    l.tick(t0 + super::super::whole_batches::HOLD);
    assert_eq!(kinds(&l.take_acks()).len(), 5, "not held longer than the hold");
    l.finished(&units[1].ids, &[Outcome::Accept; 5], Duration::ZERO, t0 + LOCK / 8);
    assert_eq!(kinds(&l.take_acks()).len(), 5, "the rest at once: the batch is split on the broker anyway");
}

/// Limits no config can reach any more (it clamps them), to show the ledger's own
/// arithmetic saturates: no setting overflows it, whatever reaches it.
fn extreme(slots: usize, batch_size: usize, prefetch: usize) -> Ledger {
    let limits = Limits { slots, batch_size, prefetch, prefetch_follows_slots: true, ..limits(1, 1) };
    let mut l = Ledger::new(limits, true, Arc::default());
    l.set_lock(Some(LOCK));
    l
}

#[test]
fn usize_max_slots_and_prefetch_do_not_overflow_the_room() {
    let t0 = Instant::now();
    let mut l = extreme(usize::MAX, 1, usize::MAX);
    assert_eq!(l.want(), usize::MAX);
    assert!(l.should_poll());
    l.received(answer(0..3, t0), t0);
    assert_eq!(l.start(t0).len(), 3);
    assert_eq!(l.want(), usize::MAX);
}

#[test]
fn a_usize_max_batch_size_that_the_prefetch_follows_does_not_overflow() {
    let t0 = Instant::now();
    let mut l = extreme(2, usize::MAX, usize::MAX);
    l.set_slots(3);
    assert_eq!(l.want(), usize::MAX);
    assert!(l.should_poll());
    l.received(answer(0..4, t0), t0);
    assert_eq!(l.start(t0).len(), 3, "spread over the free slots");
}

#[test]
fn a_duration_max_bound_keeps_queued_records_and_does_not_overflow() {
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { max_unstarted: Some(Duration::MAX), ..limits(1, 1) }, true, Arc::default());
    l.set_lock(Some(LOCK));
    l.received(answer(0..2, t0), t0);
    let _running = l.start(t0);
    assert_eq!(l.next_deadline(t0), Some(t0 + LOCK / 2), "the running one's renewal: the bound is far away");
    l.tick(t0 + LOCK / 2);
    assert_eq!(l.take_acks().len(), 1, "the running record renewed, the queued one kept");
    assert_eq!(l.held_records(), 2);
}

#[test]
fn a_duration_max_backoff_waits_without_overflow() {
    let t0 = Instant::now();
    let mut l = Ledger::new(
        Limits { backoff: Duration::MAX, backoff_max: Duration::MAX, ..limits(1, 1) },
        true,
        Arc::default(),
    );
    l.set_lock(Some(LOCK));
    l.received(answer(0..1, t0), t0);
    let u = l.start(t0);
    l.finished(&u[0].ids, &[Outcome::Retry], Duration::ZERO, t0);
    assert!(l.take_acks().is_empty(), "kept here, waiting");
    assert!(l.start(t0 + LOCK).is_empty(), "not before its (far) backoff");
    l.release_unstarted(t0 + LOCK);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Release)], "given back at shutdown");
}

#[test]
fn a_zero_bound_releases_nothing_a_free_slot_can_start() {
    // The engine's turn: tick, then start. A zero bound must not release the records that
    // the free slots are about to start; it applies to records waiting while no slot is free.
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { max_unstarted: Some(Duration::ZERO), ..limits(2, 1) }, true, Arc::default());
    l.set_lock(Some(LOCK));
    l.received(answer(0..3, t0), t0);
    l.tick(t0);
    assert!(l.take_acks().is_empty(), "two slots are free: nothing released");
    let units = l.start(t0);
    assert_eq!(units.len(), 2);
    l.tick(t0);
    assert_eq!(kinds(&l.take_acks()), vec![(2, AckKind::Release)], "the third waits with no slot free");
    assert_eq!(l.want(), 0, "no more acquired while every slot stays busy");
    // A slot frees: what comes in next is started, not released.
    l.finished(&units[0].ids, &[Outcome::Accept], Duration::ZERO, t0);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Accept)]);
    l.received(answer(3..4, t0), t0);
    l.tick(t0);
    assert!(l.take_acks().is_empty(), "a slot is free");
    assert_eq!(l.start(t0).len(), 1);
    // Shutting down with a slot free: nothing starts any more, what comes in goes back.
    l.finished(&units[1].ids, &[Outcome::Accept], Duration::ZERO, t0);
    assert_eq!(kinds(&l.take_acks()), vec![(1, AckKind::Accept)]);
    l.release_unstarted(t0);
    l.received(answer(4..5, t0), t0);
    l.tick(t0);
    assert_eq!(kinds(&l.take_acks()), vec![(4, AckKind::Release)], "nothing starts once stopping");
}

#[test]
fn the_default_prefetch_follows_the_outcome_rate_within_its_bounds() {
    // 4 slots, a default prefetch of 4, a 2 s lock (a 500 ms bound): handlers finishing
    // 8,000 records a second may have 40 ahead (what they finish in `PREFETCH_AHEAD`, 5 ms,
    // shorter than a quarter of the bound), capped at 8 x 4.
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { prefetch: 4, prefetch_adapts: true, ..limits(4, 1) }, true, Arc::default());
    l.set_lock(Some(Duration::from_secs(2)));
    assert_eq!(l.want(), 8, "4 free slots and the prefetch");
    l.tick(t0);
    let mut next = 0;
    let mut now = t0;
    for _ in 0..500 {
        l.received(answer(next..next + 4, now), now);
        next += 4;
        let units = l.start(now);
        now += Duration::from_micros(500);
        for u in units {
            l.finished(&u.ids, &[Outcome::Accept], Duration::from_millis(1), now);
        }
        l.tick(now);
    }
    // 2,000 records in 250 ms: 8,000 a second, 40 ahead would start within 5 ms; capped at 32.
    assert_eq!(l.want(), 4 + 32, "the prefetch grew to its cap");
    // Slow handlers: nothing finishes for a window, the prefetch falls back to its base.
    now += Duration::from_millis(300);
    l.tick(now);
    assert_eq!(l.want(), 8);
}

#[test]
fn the_adapted_prefetch_reaches_only_a_few_round_trips_ahead() {
    // Issue 36: sized by a quarter of the unstarted bound (here 7.5 s of a 30 s lock's
    // quarter), fast handlers always had 8 x the base ahead, and each record waited in the
    // queue (bench-process: p50 32.8 ms for ~2 ms of work). 4,000 records a second in 5 ms:
    // 20 ahead, not the cap.
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { prefetch: 4, prefetch_adapts: true, ..limits(4, 1) }, true, Arc::default());
    l.set_lock(Some(Duration::from_secs(30)));
    l.tick(t0);
    let (mut next, mut now) = (0, t0);
    for _ in 0..300 {
        l.received(answer(next..next + 4, now), now);
        next += 4;
        let units = l.start(now);
        now += Duration::from_millis(1);
        for u in units {
            l.finished(&u.ids, &[Outcome::Accept], Duration::from_micros(500), now);
        }
        l.tick(now);
    }
    let ahead = l.want() - 4;
    assert!((19..=21).contains(&ahead), "{ahead} ahead, not 20");
}

#[test]
fn a_prefetch_the_user_set_does_not_adapt() {
    let t0 = Instant::now();
    let mut l = Ledger::new(Limits { prefetch: 4, ..limits(4, 1) }, true, Arc::default());
    l.set_lock(Some(Duration::from_secs(2)));
    let mut now = t0;
    l.tick(now);
    for i in 0..100 {
        l.received(answer(i..i + 1, now), now);
        for u in l.start(now) {
            l.finished(&u.ids, &[Outcome::Accept], Duration::from_millis(1), now);
        }
        now += Duration::from_millis(3);
        l.tick(now);
    }
    assert_eq!(l.want(), 8);
}

/// "Give up after 5 tries in all" with `max_retries` 2 and the default RELEASE when they are
/// used up: 3 calls in the first delivery, the record comes back (delivery count 2), and
/// `attempt` restarts at 1 there while `total_attempts` goes on: exactly 5 calls, then REJECT.
#[test]
fn total_attempts_counts_across_a_redelivery_so_a_cap_holds() {
    const CAP: u32 = 5;
    let t0 = Instant::now();
    let mut l = ledger(1, 1);
    let mut calls = Vec::new();
    let mut now = t0;
    l.received(answer(0..1, now), now);
    for delivery in 1..=2i16 {
        if delivery == 2 {
            assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Release)], "retries used up: released");
            l.received(redelivered(0..1, 2, now), now);
        }
        loop {
            now += Duration::from_secs(2);
            let u = l.start(now);
            let Some(unit) = u.first() else { break };
            let d = &unit.deliveries[0];
            calls.push((d.delivery_count(), d.attempt(), d.total_attempts()));
            let outcome = if d.total_attempts() >= CAP { Outcome::Reject } else { Outcome::Retry };
            l.finished(&unit.ids, &[outcome], Duration::ZERO, now);
            if outcome == Outcome::Reject || l.held_records() == 0 {
                break;
            }
        }
    }
    assert_eq!(calls, vec![(1, 1, 1), (1, 2, 2), (1, 3, 3), (2, 1, 4), (2, 2, 5)]);
    assert_eq!(kinds(&l.take_acks()), vec![(0, AckKind::Reject)]);
}

#[test]
fn an_answer_is_held_in_one_batch_until_its_last_record_is_settled() {
    let t0 = Instant::now();
    let mut l = ledger(1, 4);
    l.received(answer(0..3, t0), t0);
    l.received(answer(3..4, t0), t0);
    assert_eq!(l.blocks.len(), 2, "one batch per answer, not one allocation per record");
    let units = l.start(t0);
    assert_eq!(units.len(), 1);
    let offsets: Vec<i64> = units[0].deliveries.iter().map(|d| d.record().offset).collect();
    assert_eq!(offsets, vec![0, 1, 2, 3], "a call may take records of several answers");
    l.finished(&units[0].ids, &[Outcome::Accept, Outcome::Retry, Outcome::Accept, Outcome::Accept], Duration::ZERO, t0);
    assert_eq!(l.blocks.len(), 1, "the batch of the record waiting to be tried again stays");
    let later = t0 + Duration::from_millis(100);
    l.tick(later);
    let again = l.start(later);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].deliveries[0].record().offset, 1);
    assert_eq!(again[0].deliveries[0].attempt(), 2);
    l.finished(&again[0].ids, &[Outcome::Accept], Duration::ZERO, later);
    assert_eq!(l.blocks.len(), 0, "every record settled: the batches are let go");
    assert_eq!(l.held_records(), 0);
    // A handler may keep its deliveries past their outcome: they hold the batch themselves.
    assert_eq!(units[0].deliveries[2].record().offset, 2);
    assert_eq!(units[0].deliveries[2].clone().into_record().offset, 2);
}

// --- outcomes as runs: a call whose consecutive records get one outcome is one ack ---

/// The acks as (first offset, records, kind, partition): the runs themselves.
fn runs(acks: &[AckEntry]) -> Vec<(i64, u32, AckKind, i32)> {
    acks.iter().map(|a| (a.offset, a.len, a.kind, a.tp.partition)).collect()
}

/// Records at `offsets` of partition `p`, all acquired in the batch `batch`.
fn acquired(p: i32, offsets: &[i64], batch: (i64, i64), now: Instant) -> Vec<Delivered> {
    let topic: Arc<str> = "t".into();
    offsets
        .iter()
        .map(|&o| {
            let mut record = ConsumerRecord::for_test(topic.clone(), p, o);
            record.lock_deadline = Some(now + LOCK);
            Delivered { record, tp: TopicIdPartition { partition: p, ..tp() }, node: 1, generation: 1, batch }
        })
        .collect()
}

#[test]
fn a_whole_batch_accepted_is_one_run() {
    let t0 = Instant::now();
    let mut l = ledger(1, 10);
    l.received(one_batch(0..10, t0), t0);
    let units = l.start(t0);
    l.finished(&units[0].ids, &[Outcome::Accept; 10], Duration::ZERO, t0);
    assert_eq!(runs(&l.take_acks()), vec![(0, 10, AckKind::Accept, 0)]);
}

#[test]
fn one_other_outcome_in_the_middle_splits_the_run_around_it() {
    let t0 = Instant::now();
    let mut l = ledger(1, 10);
    l.received(one_batch(0..10, t0), t0);
    let units = l.start(t0);
    let mut outcomes = [Outcome::Accept; 10];
    outcomes[4] = Outcome::Reject;
    l.finished(&units[0].ids, &outcomes, Duration::ZERO, t0);
    // The REJECT splits the batch on the broker anyway: nothing is held after it.
    let acks = l.take_acks();
    assert_eq!(runs(&acks), vec![(0, 4, AckKind::Accept, 0), (4, 1, AckKind::Reject, 0), (5, 5, AckKind::Accept, 0)]);
    // A retry in the middle: that record waits, its neighbours still go as runs.
    l.received(one_batch(10..20, t0), t0);
    let units = l.start(t0);
    let mut outcomes = [Outcome::Accept; 10];
    outcomes[3] = Outcome::Retry;
    l.finished(&units[0].ids, &outcomes, Duration::ZERO, t0);
    l.tick(t0 + super::super::whole_batches::HOLD);
    assert_eq!(runs(&l.take_acks()), vec![(10, 3, AckKind::Accept, 0), (14, 6, AckKind::Accept, 0)]);
}

#[test]
fn gaps_and_other_deliveries_end_a_run() {
    let t0 = Instant::now();
    let mut l = ledger(1, 10);
    // Offsets 3, 4 and 8 were never handed out (gaps the driver acknowledged itself): the
    // batch (0, 9) never completes here, so its runs leave after the hold.
    let mut records = acquired(0, &[0, 1, 2, 5, 6, 7, 9], (0, 9), t0);
    records[6].record.delivery_count = 2; // offset 9, delivered before
    l.received(PollAnswer { records, renewed: Vec::new() }, t0);
    let units = l.start(t0);
    l.finished(&units[0].ids, &[Outcome::Accept; 7], Duration::ZERO, t0);
    assert!(l.take_acks().is_empty(), "held for the rest of the batch");
    l.tick(t0 + super::super::whole_batches::HOLD);
    let acks = l.take_acks();
    assert_eq!(runs(&acks), vec![(0, 3, AckKind::Accept, 0), (5, 3, AckKind::Accept, 0), (9, 1, AckKind::Accept, 0)]);
    assert_eq!(acks[2].delivery_count, 2, "a run is of one delivery");
}

#[test]
fn a_call_across_two_partitions_gives_a_run_for_each() {
    let t0 = Instant::now();
    let mut l = ledger(1, 8);
    let mut records = acquired(0, &[0, 1, 2, 3], (0, 3), t0);
    records.extend(acquired(1, &[0, 1, 2, 3], (0, 3), t0));
    l.received(PollAnswer { records, renewed: Vec::new() }, t0);
    let units = l.start(t0);
    assert_eq!(units[0].ids.len(), 8);
    l.finished(&units[0].ids, &[Outcome::Accept; 8], Duration::ZERO, t0);
    assert_eq!(runs(&l.take_acks()), vec![(0, 4, AckKind::Accept, 0), (0, 4, AckKind::Accept, 1)]);
}

#[test]
fn releases_of_unstarted_records_go_as_runs_too() {
    let t0 = Instant::now();
    let mut l = ledger(1, 2);
    l.received(answer(0..6, t0), t0);
    let _running = l.start(t0);
    l.release_unstarted(t0);
    assert_eq!(runs(&l.take_acks()), vec![(2, 4, AckKind::Release, 0)], "the queue, one run");
}
