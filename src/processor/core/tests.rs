//! The engine core in virtual time: no broker, no runtime, no clock. Each test feeds inputs
//! at chosen `Instant`s and reads the events.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::timers::Timer;
use super::*;
use crate::consumer::driver::{AckEntry, Delivered};
use crate::consumer::ConsumerRecord;
use crate::processor::Outcome;
use crate::share::acks::AckKind;
use crate::share::TopicIdPartition;

const LOCK: Duration = Duration::from_secs(30);

fn limits(slots: usize) -> Limits {
    Limits {
        slots,
        batch_size: 1,
        prefetch: slots,
        prefetch_follows_slots: false,
        prefetch_adapts: false,
        max_unstarted: None,
        max_retries: 3,
        backoff: Duration::from_millis(100),
        backoff_max: Duration::from_secs(1),
        on_exhausted: AckKind::Release,
    }
}

fn core_with(limits: Limits, t0: Instant) -> EngineCore {
    let mut c = EngineCore::new(limits, Arc::default(), false, None, "g".into(), true, 0, t0);
    c.handle_consumer(Some(LOCK), true, 0);
    c
}

fn core(slots: usize, t0: Instant) -> EngineCore {
    core_with(limits(slots), t0)
}

fn answer(offsets: std::ops::Range<i64>, now: Instant) -> PollAnswer {
    let topic: Arc<str> = "t".into();
    let tp = TopicIdPartition { topic_id: uuid::Uuid::nil(), partition: 0 };
    let records = offsets
        .map(|o| {
            let mut record = ConsumerRecord::for_test(topic.clone(), 0, o);
            record.lock_deadline = Some(now + LOCK);
            Delivered { record, tp, node: 1, generation: 1, batch: (o, o) }
        })
        .collect();
    PollAnswer { records, renewed: Vec::new() }
}

fn events(c: &mut EngineCore) -> Vec<Event> {
    std::iter::from_fn(|| c.poll_event()).collect()
}

/// The calls started, by unit and first offset.
fn starts(ev: &[Event]) -> Vec<(UnitId, i64)> {
    ev.iter()
        .filter_map(|e| match e {
            Event::Start { unit, deliveries } => Some((*unit, deliveries[0].record().offset)),
            _ => None,
        })
        .collect()
}

fn acks(ev: &[Event]) -> Vec<(i64, AckKind)> {
    ev.iter()
        .flat_map(|e| match e {
            Event::Poll { acks, .. } | Event::Acknowledge(acks) | Event::Close(acks) => acks.as_slice(),
            _ => &[] as &[AckEntry],
        })
        .flat_map(|a| a.clone().singles())
        .map(|a| (a.offset, a.kind))
        .collect()
}

fn polls(ev: &[Event]) -> Vec<(usize, bool)> {
    ev.iter()
        .filter_map(|e| match e {
            Event::Poll { max, wait, .. } => Some((*max, *wait)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_turn_polls_for_the_room_then_starts_what_came() {
    let t0 = Instant::now();
    let mut c = core(2, t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert_eq!(polls(&ev), vec![(4, true)], "two slots and two prefetched");
    c.handle_poll_answer(Ok(answer(0..3, t0)), t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert_eq!(starts(&ev).iter().map(|s| s.1).collect::<Vec<_>>(), vec![0, 1]);
    assert!(ev.iter().any(|e| matches!(e, Event::Busy(true))));
}

#[test]
fn no_record_waits_past_its_bound_while_a_slot_is_free() {
    // Slots free up at odd moments; a record may go back unstarted only while every slot is
    // busy, and none is started after it went back.
    let t0 = Instant::now();
    let mut c = core_with(Limits { max_unstarted: Some(Duration::from_millis(200)), ..limits(3) }, t0);
    c.drive(t0);
    events(&mut c);
    c.handle_poll_answer(Ok(answer(0..12, t0)), t0);
    let mut now = t0;
    let mut running: Vec<UnitId> = Vec::new();
    let mut released = Vec::new();
    let mut started = Vec::new();
    for step in 0..200u64 {
        c.drive(now);
        let ev = events(&mut c);
        for (unit, offset) in starts(&ev) {
            running.push(unit);
            started.push(offset);
        }
        for (offset, kind) in acks(&ev) {
            if kind == AckKind::Release {
                assert!(running.len() >= 3, "offset {offset} released unstarted while a slot was free");
                released.push(offset);
            }
        }
        // Every 7th step the oldest call ends.
        if step % 7 == 6 && !running.is_empty() {
            let unit = running.remove(0);
            c.handle_finished(unit, Finished::One(Outcome::Accept), Duration::ZERO, now);
        }
        now += Duration::from_millis(50);
    }
    assert!(started.iter().all(|o| !released.contains(o)), "a record started after it went back");
    assert!(!released.is_empty(), "the bound applied while every slot was busy");
}

#[test]
fn a_zero_bound_never_releases_a_record_a_free_slot_takes() {
    let t0 = Instant::now();
    let mut c = core_with(Limits { max_unstarted: Some(Duration::ZERO), ..limits(4) }, t0);
    c.handle_poll_answer(Ok(answer(0..4, t0)), t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert_eq!(starts(&ev).len(), 4);
    assert!(acks(&ev).is_empty(), "nothing released: every record had a slot");
}

#[test]
fn shutdown_releases_every_unstarted_record_and_counts_it() {
    let t0 = Instant::now();
    let mut c = core(2, t0);
    c.handle_poll_answer(Ok(answer(0..10, t0)), t0);
    c.drive(t0);
    let started = starts(&events(&mut c));
    assert_eq!(started.len(), 2);
    c.handle_shutdown(t0 + Duration::from_secs(5), t0);
    c.drive(t0);
    let ev = events(&mut c);
    let released: Vec<i64> = acks(&ev).into_iter().filter(|a| a.1 == AckKind::Release).map(|a| a.0).collect();
    assert_eq!(released, (2..10).collect::<Vec<_>>(), "every record not started goes back at once");
    assert!(polls(&ev).iter().all(|p| p.0 == 0), "no more records asked for");
    assert_eq!(c.report().released_unstarted, 8);
    for (unit, _) in started {
        c.handle_finished(unit, Finished::One(Outcome::Accept), Duration::ZERO, t0);
    }
    c.drive(t0);
    let ev = events(&mut c);
    assert!(matches!(ev.last(), Some(Event::Close(_))), "{ev:?}");
    assert!(c.is_closed());
    let r = c.report();
    assert_eq!((r.accepted, r.released, r.released_unstarted), (2, 8, 8));
}

#[test]
fn records_the_consumer_released_unseen_count_as_unstarted_releases_at_close_too() {
    let t0 = Instant::now();
    let mut c = EngineCore::new(limits(1), Arc::default(), false, None, "g".into(), true, 5, t0);
    c.handle_consumer(Some(LOCK), true, 7);
    assert_eq!(c.report().released_unstarted, 2, "only those since the engine started");
    c.handle_shutdown(t0, t0);
    c.drive(t0);
    assert!(events(&mut c).iter().any(|e| matches!(e, Event::Close(_))));
    c.handle_closed(40);
    let r = c.report();
    assert_eq!((r.released, r.released_unstarted), (35, 35), "the close's releases are counted");
}

#[test]
fn a_retry_waits_out_the_crates_backoff_doubling() {
    let t0 = Instant::now();
    let mut c = core(1, t0);
    c.handle_poll_answer(Ok(answer(0..1, t0)), t0);
    c.drive(t0);
    let (mut unit, _) = starts(&events(&mut c))[0];
    let mut now = t0;
    for wait in [100u64, 200, 400] {
        c.handle_finished(unit, Finished::One(Outcome::Retry), Duration::ZERO, now);
        c.drive(now);
        assert!(starts(&events(&mut c)).is_empty(), "not at once");
        let due = now + Duration::from_millis(wait);
        assert_eq!(c.next_timer(now).filter(|t| t.0 == Timer::Ledger).map(|t| t.1), Some(due));
        c.handle_timeout(due - Duration::from_millis(1));
        assert!(starts(&events(&mut c)).is_empty(), "not before its backoff");
        now = due;
        c.handle_timeout(now);
        let s = starts(&events(&mut c));
        assert_eq!(s.len(), 1, "tried again after {wait} ms");
        unit = s[0].0;
    }
}

#[test]
fn a_failed_poll_backs_off_and_a_fatal_one_stops() {
    let t0 = Instant::now();
    let mut c = core(1, t0);
    c.drive(t0);
    assert_eq!(polls(&events(&mut c)).len(), 1);
    c.handle_poll_failed(crate::error::Error::UnknownTopic("t".into()), t0);
    c.drive(t0);
    assert!(polls(&events(&mut c)).is_empty(), "backing off");
    let (timer, at) = c.next_timer(t0).expect("armed");
    assert_eq!(timer, Timer::PollRetry);
    assert!(at >= t0 + Duration::from_millis(80) && at <= t0 + Duration::from_millis(120), "{:?}", at - t0);
    c.handle_timeout(at);
    assert_eq!(polls(&events(&mut c)).len(), 1, "polled again");
    c.handle_poll_failed(crate::error::Error::Closed, at);
    c.drive(at);
    let ev = events(&mut c);
    assert!(matches!(ev.last(), Some(Event::Close(_))), "nothing runs: closes at once: {ev:?}");
    assert!(matches!(c.into_result(Ok(())), Err(crate::error::Error::Closed)));
}

#[test]
fn an_expired_poll_is_given_up_and_asked_again() {
    let t0 = Instant::now();
    let mut c = core(1, t0);
    c.drive(t0);
    events(&mut c);
    assert_eq!(c.next_timer(t0), Some((Timer::PollExpires, t0 + POLL_WAIT)));
    let t1 = t0 + POLL_WAIT;
    c.handle_timeout(t1);
    let ev = events(&mut c);
    assert!(matches!(ev.as_slice(), [Event::ExpirePoll]), "no new poll before the old one is settled: {ev:?}");
    c.handle_poll_expired();
    c.drive(t1);
    assert_eq!(polls(&events(&mut c)), vec![(2, true)]);
}

#[test]
fn a_call_that_ends_twice_is_counted_once() {
    let t0 = Instant::now();
    let mut c = core(1, t0);
    c.handle_poll_answer(Ok(answer(0..2, t0)), t0);
    c.drive(t0);
    let (unit, _) = starts(&events(&mut c))[0];
    c.handle_finished(unit, Finished::One(Outcome::Accept), Duration::ZERO, t0);
    c.drive(t0);
    let (second, _) = starts(&events(&mut c))[0];
    // The first call's id again (its slot now holds the second call): ignored.
    c.handle_finished(unit, Finished::One(Outcome::Reject), Duration::ZERO, t0);
    assert_eq!(c.running_units(), 1, "the second call still runs");
    c.handle_finished(second, Finished::One(Outcome::Accept), Duration::ZERO, t0);
    let r = c.report();
    assert_eq!((r.accepted, r.rejected), (2, 0));
}

#[test]
fn the_deadline_aborts_what_still_runs_then_the_close_releases_nothing_twice() {
    let t0 = Instant::now();
    let mut c = core(2, t0);
    c.handle_poll_answer(Ok(answer(0..2, t0)), t0);
    c.drive(t0);
    let started = starts(&events(&mut c));
    let deadline = t0 + Duration::from_secs(1);
    c.handle_shutdown(deadline, t0);
    c.drive(t0);
    events(&mut c);
    let mut armed = Vec::new();
    c.each_timer(t0, &mut |timer, at| armed.push((timer, at)));
    assert!(armed.contains(&(Timer::Stop, deadline)), "{armed:?}");
    c.handle_timeout(deadline);
    let ev = events(&mut c);
    assert!(ev.iter().any(|e| matches!(e, Event::AbortHandlers)), "{ev:?}");
    if ev.iter().any(|e| matches!(e, Event::ExpirePoll)) {
        // The keep-alive poll under way ran out too: settled before the close.
        c.handle_poll_expired();
    }
    assert_eq!(c.next_timeout(deadline), Some(deadline + Duration::from_secs(3600)), "waits for the calls alone");
    c.handle_finished(started[0].0, Finished::Aborted, Duration::ZERO, deadline);
    c.handle_finished(started[1].0, Finished::Panicked, Duration::ZERO, deadline);
    c.drive(deadline);
    let ev = events(&mut c);
    let Some(Event::Close(last)) = ev.last() else { panic!("{ev:?}") };
    let mut offsets: Vec<i64> = last.iter().flat_map(|a| a.clone().singles()).map(|a| a.offset).collect();
    offsets.sort_unstable();
    assert_eq!(offsets, vec![0, 1], "each aborted record released once");
    let r = c.report();
    assert_eq!((r.aborted, r.released, r.released_unstarted), (1, 2, 0));
}

#[test]
fn an_abort_while_idle_closes_at_once() {
    let t0 = Instant::now();
    let mut c = core(1, t0);
    c.handle_abort(t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert!(matches!(ev.last(), Some(Event::Close(_))), "{ev:?}");
    assert_eq!(c.next_timeout(t0), None, "closed: no timer");
}

#[test]
fn extreme_settings_neither_panic_nor_spin() {
    let t0 = Instant::now();
    let extreme = Limits {
        slots: usize::MAX,
        prefetch: usize::MAX,
        max_unstarted: Some(Duration::MAX),
        backoff: Duration::MAX,
        backoff_max: Duration::MAX,
        max_retries: u32::MAX,
        ..limits(1)
    };
    let mut c = core_with(extreme, t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert_eq!(polls(&ev), vec![(usize::MAX, true)], "as many as may come");
    c.handle_poll_answer(Ok(answer(0..3, t0)), t0);
    c.drive(t0);
    let s = starts(&events(&mut c));
    assert_eq!(s.len(), 3);
    c.handle_finished(s[0].0, Finished::Outcomes(vec![Outcome::Retry]), Duration::MAX, t0);
    c.drive(t0);
    assert!(c.next_timeout(t0).is_some_and(|t| t >= t0));
    // A shutdown with no deadline to speak of.
    c.handle_shutdown(crate::processor::deadline::later(t0, Duration::MAX), t0);
    c.drive(t0);
    let ev = events(&mut c);
    assert_eq!(acks(&ev).iter().filter(|a| a.1 == AckKind::Release).count(), 1, "the retrying one goes back");
    assert!(c.is_stopping());
}

#[test]
fn a_batch_handlers_stop_settles_what_it_finished_and_releases_the_rest() {
    let t0 = Instant::now();
    let mut c =
        EngineCore::new(Limits { batch_size: 4, ..limits(1) }, Arc::default(), true, None, "g".into(), true, 0, t0);
    c.handle_slots(1, true, t0);
    c.handle_poll_answer(Ok(answer(0..4, t0)), t0);
    c.drive(t0);
    let (unit, _) = starts(&events(&mut c))[0];
    // Two finished before the failed one: accepted; the failed one and the one after go back.
    c.handle_finished(unit, Finished::Stopped("bad".into(), vec![Outcome::Accept; 2]), Duration::ZERO, t0);
    let r = c.report();
    assert_eq!((r.accepted, r.released, r.rejected), (2, 2, 0));
}

#[test]
fn a_batch_handlers_stop_stops_the_engine_unless_the_pool_retires() {
    let t0 = Instant::now();
    for retiring in [false, true] {
        let mut c = EngineCore::new(limits(1), Arc::default(), true, None, "g".into(), true, 0, t0);
        c.handle_slots(1, retiring, t0);
        c.handle_poll_answer(Ok(answer(0..1, t0)), t0);
        c.drive(t0);
        let (unit, _) = starts(&events(&mut c))[0];
        c.handle_finished(unit, Finished::Stopped("full disk".into(), Vec::new()), Duration::ZERO, t0);
        assert_eq!(c.is_stopping(), !retiring);
    }
    let mut c = EngineCore::new(limits(1), Arc::default(), true, None, "g".into(), true, 0, t0);
    c.handle_slots(0, false, t0);
    assert!(c.is_stopping(), "an empty pool that waits for no handler stops");
}

#[test]
fn record_limit_asked_of_a_cluster_without_it_stops_with_a_typed_error() {
    let t0 = Instant::now();
    let mut c =
        EngineCore::new(limits(1), Arc::default(), false, Some(AcquireMode::RecordLimit), "g".into(), true, 0, t0);
    c.handle_start(false, AcquireMode::BatchOptimized, t0);
    c.drive(t0);
    assert!(matches!(events(&mut c).last(), Some(Event::Close(_))));
    assert!(matches!(c.into_result(Ok(())), Err(crate::error::Error::AcquireModeUnsupported { .. })));
    let mut c = core(1, t0);
    c.handle_start(true, AcquireMode::BatchOptimized, t0);
    let ev = events(&mut c);
    assert!(matches!(ev.as_slice(), [Event::AcquireMode { mode: AcquireMode::RecordLimit, sized: true }]), "{ev:?}");
}
