//! The simulated cluster driven by hand-written requests, and the runner's seeds.

use std::time::{Duration, Instant};

use kafka_protocol::messages::{GroupId, ShareGroupHeartbeatRequest, TopicName};
use kafka_protocol::protocol::StrBytes;

use crate::error::ErrorCode;
use crate::protocol::records::{decode_acquired, AcquiredRange};
use crate::protocol::share::{
    AcknowledgePartition, AcknowledgeTopic, AcknowledgementBatch, FetchPartition, FetchTopic, ShareAcknowledgeRequest,
    ShareFetchRequest, ShareFetchResponse,
};
use crate::share::acks::AckKind;

use super::cluster::{record_value, SimCluster, SimConfig, TOPIC};
use super::share::FetchOutcome;
use crate::broker_model::record_state::{Archived, ShareState};

fn cluster() -> (SimCluster, Instant) {
    cluster_with(|_| {})
}

/// The test cluster, with `f` changing its config first.
fn cluster_with(f: impl FnOnce(&mut SimConfig)) -> (SimCluster, Instant) {
    let mut cfg = SimConfig { partitions: 2, records_per_partition: 6, brokers: vec![1, 2], ..Default::default() };
    f(&mut cfg);
    (SimCluster::new(cfg), Instant::now())
}

fn join(c: &mut SimCluster, client: usize, now: Instant) -> Vec<i32> {
    let req = ShareGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_member_id(StrBytes::from_string(format!("member-{client}")))
        .with_member_epoch(0)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str(TOPIC))]));
    let coordinator = c.group.coordinator;
    let (topic_id, parts) = (c.topic_id, c.cfg.partitions);
    let (resp, _) = c.group.heartbeat(coordinator, client, &req, topic_id, parts, now);
    assert_eq!(resp.error_code, 0);
    resp.assignment.unwrap().topic_partitions.iter().flat_map(|t| t.partitions.clone()).collect()
}

fn fetch(c: &SimCluster, epoch: i32, parts: &[(i32, Vec<AcknowledgementBatch>)]) -> ShareFetchRequest {
    ShareFetchRequest {
        group_id: "g".into(),
        member_id: "m".into(),
        share_session_epoch: epoch,
        max_wait_ms: 0,
        max_records: 3,
        batch_size: 3,
        topics: vec![FetchTopic {
            topic_id: c.topic_id,
            partitions: parts
                .iter()
                .map(|(p, b)| FetchPartition { partition_index: *p, acknowledgement_batches: b.clone() })
                .collect(),
        }],
        ..Default::default()
    }
}

fn answer(o: FetchOutcome) -> ShareFetchResponse {
    match o {
        FetchOutcome::Answer(r) => r,
        FetchOutcome::Wait(..) => panic!("the fetch waits"),
    }
}

fn accept(first: i64, last: i64) -> Vec<AcknowledgementBatch> {
    vec![AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: vec![1] }]
}

#[test]
fn the_coordinator_assigns_round_robin_in_join_order() {
    let (mut c, now) = cluster();
    assert_eq!(join(&mut c, 0, now), vec![0, 1]);
    assert_eq!(join(&mut c, 1, now), vec![1]);
    assert_eq!(c.group.assignment(0, 2), vec![0]);
}

#[test]
fn fetch_acquires_and_a_piggybacked_ack_is_applied() {
    let (mut c, now) = cluster();
    join(&mut c, 0, now);
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now));
    assert_eq!(r.error_code, 0);
    let p = &r.responses[0].partitions[0];
    assert_eq!((p.acquired_records[0].first_offset, p.acquired_records[0].last_offset), (0, 2));
    let ranges: Vec<AcquiredRange> = p.acquired_records.iter().map(|&a| a.into()).collect();
    let set = decode_acquired(p.records.clone().unwrap(), &ranges).unwrap();
    let values: Vec<String> =
        set.records.iter().map(|r| String::from_utf8(r.value.clone().unwrap().to_vec()).unwrap()).collect();
    assert_eq!(values, vec![record_value(0, 0), record_value(0, 1), record_value(0, 2)]);
    for o in 0..3 {
        c.ledger.app_acked(0, 0, o, 1, AckKind::Accept);
    }
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 1, &[(0, accept(0, 2))]), now));
    assert_eq!(r.responses[0].partitions[0].acknowledge_error_code, 0);
    assert_eq!(c.parts[0].share.offsets()[1].state, ShareState::Acknowledged);
    assert!(c.violations.is_empty() && c.ledger.violations.is_empty(), "{:?} {:?}", c.violations, c.ledger.violations);
}

#[test]
fn expired_locks_redeliver_until_the_delivery_limit_archives() {
    let (mut c, mut now) = cluster_with(|cfg| cfg.delivery_limit = 2);
    join(&mut c, 0, now);
    for round in 1..=2 {
        let epoch = if round == 1 { 0 } else { 1 };
        let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, epoch, &[(0, vec![])]), now));
        assert_eq!(r.responses[0].partitions[0].acquired_records[0].delivery_count, round);
        now += c.cfg.lock;
        c.tick(now);
    }
    assert_eq!(
        c.parts[0].share.offsets()[0].state,
        ShareState::Archived(Archived::DeliveryLimit),
        "delivered twice with a limit of 2"
    );
    assert_eq!(c.parts[0].share.offsets()[3].state, ShareState::Available, "never delivered");
}

#[test]
fn session_errors_and_epochs() {
    let (mut c, now) = cluster();
    join(&mut c, 0, now);
    assert_eq!(answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now)).error_code, 0);
    // A wrong epoch is refused and the session kept as it was, as on Kafka.
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 5, &[]), now));
    assert_eq!(r.error_code, ErrorCode::INVALID_SHARE_SESSION_EPOCH.0);
    assert!(matches!(c.parts[0].share.offsets()[0].state, ShareState::Acquired { .. }));
    assert_eq!(answer(c.share_fetch(1, 0, 7, &fetch(&c, 1, &[]), now)).error_code, 0);
    // Closed (epoch -1), it is gone.
    answer(c.share_fetch(1, 0, 7, &fetch(&c, -1, &[]), now));
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 2, &[]), now));
    assert_eq!(r.error_code, ErrorCode::SHARE_SESSION_NOT_FOUND.0);
    c.session_limit.insert(1);
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now));
    assert_eq!(r.error_code, ErrorCode::SHARE_SESSION_LIMIT_REACHED.0);
    // A ShareAcknowledge cannot open a session.
    let ack = ShareAcknowledgeRequest { share_session_epoch: 0, ..Default::default() };
    assert_eq!(c.share_acknowledge(1, 0, 7, &ack, now).error_code, ErrorCode::INVALID_SHARE_SESSION_EPOCH.0);
}

#[test]
fn an_ack_on_a_newer_session_is_a_violation() {
    let (mut c, now) = cluster();
    join(&mut c, 0, now);
    answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now));
    // The connection drops: the session goes, a new one opens on a new connection.
    c.conn_closed(1, 7);
    answer(c.share_fetch(1, 0, 8, &fetch(&c, 0, &[(1, vec![])]), now));
    let ack = ShareAcknowledgeRequest {
        share_session_epoch: 1,
        topics: vec![AcknowledgeTopic {
            topic_id: c.topic_id,
            partitions: vec![AcknowledgePartition { partition_index: 0, acknowledgement_batches: accept(0, 0) }],
        }],
        ..Default::default()
    };
    let r = c.share_acknowledge(1, 0, 8, &ack, now);
    assert_eq!(r.responses[0].partitions[0].error_code, ErrorCode::INVALID_RECORD_STATE.0);
    assert!(c.violations[0].contains("session"), "{:?}", c.violations);
}

#[test]
fn a_leader_move_answers_not_leader_and_names_the_new_one() {
    let (mut c, now) = cluster();
    join(&mut c, 0, now);
    answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now));
    c.move_leader(0, Some(2));
    assert_eq!(c.parts[0].share.offsets()[0].state, ShareState::Available, "the new leader knows no acquisitions");
    c.ledger.app_acked(0, 0, 0, 1, AckKind::Accept);
    let r = answer(c.share_fetch(1, 0, 7, &fetch(&c, 1, &[(0, accept(0, 0))]), now));
    let p = &r.responses[0].partitions[0];
    assert_eq!(p.acknowledge_error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.0);
    assert_eq!(p.error_code, ErrorCode::NOT_LEADER_OR_FOLLOWER.0);
    assert_eq!(p.current_leader.leader_id, 2);
    assert_eq!(r.node_endpoints[0].node_id, 2);
    assert!(c.violations.is_empty(), "the ack went to the broker that delivered it: {:?}", c.violations);
    // The same ack sent to the new leader is LANDSCAPE bug 2.
    answer(c.share_fetch(2, 0, 9, &fetch(&c, 0, &[(1, vec![])]), now));
    answer(c.share_fetch(2, 0, 9, &fetch(&c, 1, &[(0, accept(0, 0))]), now));
    assert!(c.violations.iter().any(|v| v.contains("delivered by broker 1")), "{:?}", c.violations);
}

#[test]
fn a_crash_ends_sessions_and_moves_leadership_and_the_coordinator() {
    let (mut c, now) = cluster();
    join(&mut c, 0, now);
    answer(c.share_fetch(1, 0, 7, &fetch(&c, 0, &[(0, vec![])]), now));
    c.crash(1);
    assert!(c.sessions.keys().next().is_none());
    assert_eq!(c.parts[0].leader, Some(2));
    assert_eq!(c.group.coordinator, 2);
    assert_eq!(c.parts[0].share.offsets()[0].state, ShareState::Available);
    c.restart(1);
    assert!(c.is_up(1));
}

#[test]
fn a_fetch_with_nothing_to_give_waits_until_records_come_back() {
    let (mut c, now) = cluster_with(|cfg| cfg.records_per_partition = 2);
    join(&mut c, 0, now);
    let mut req = fetch(&c, 0, &[(0, vec![])]);
    answer(c.share_fetch(1, 0, 7, &req, now));
    req.share_session_epoch = 1;
    req.max_wait_ms = 500;
    req.topics.clear();
    let FetchOutcome::Wait(w) = c.share_fetch(1, 0, 7, &req, now) else { panic!("answered at once") };
    assert!(c.retry_parked(&w, now + Duration::from_millis(10)).is_none());
    let later = now + c.cfg.lock;
    c.tick(later);
    let r = c.retry_parked(&w, later).expect("records are back");
    assert_eq!(r.responses[0].partitions[0].acquired_records[0].delivery_count, 2);
}

#[test]
fn gaps_are_served_as_nothing_or_as_empty_batches_and_decode_as_gaps() {
    use crate::protocol::share::AcquiredRecords;
    let (c, _) = cluster();
    // Runs of gaps at 1..=2 (left out: odd) and 4 (an empty batch: even).
    let c = c.with_gaps(&[(0, 1), (0, 2), (0, 4)]);
    let decode = |first: i64, last: i64| {
        let acquired = [AcquiredRecords { first_offset: first, last_offset: last, delivery_count: 1 }];
        let (bytes, corrupted) = c.records(0, &acquired, false);
        assert_eq!(corrupted, None);
        let ranges: Vec<AcquiredRange> = acquired.iter().map(|&a| a.into()).collect();
        (bytes.clone(), decode_acquired(bytes.unwrap_or_default(), &ranges).unwrap())
    };
    let (_, set) = decode(0, 5);
    assert_eq!(set.records.iter().map(|r| r.offset).collect::<Vec<_>>(), vec![0, 3, 5]);
    assert_eq!(set.gaps, vec![(1, 2), (4, 4)]);
    assert!(set.corrupt.is_empty());
    // Only gaps: an empty batch alone, or no records at all.
    let (bytes, set) = decode(4, 4);
    assert_eq!(bytes.map(|b| b.len()), Some(61), "one empty batch: its header only");
    assert!(set.records.is_empty() && set.gaps == vec![(4, 4)], "{set:?}");
    let (bytes, set) = decode(1, 2);
    assert!(bytes.is_none());
    assert!(set.records.is_empty() && set.gaps == vec![(1, 2)], "{set:?}");
    // A corrupted first batch says which offsets it held.
    let acquired = [AcquiredRecords { first_offset: 3, last_offset: 5, delivery_count: 1 }];
    assert_eq!(c.records(0, &acquired, true).1, Some((3, 3)));
}

/// The seeds to run: `SIM_SEED=<n>` one, `SIM_SEEDS=<n>` that many (from `SIM_FIRST`, else
/// 1), else `default`.
fn seeds(default: u64) -> Vec<u64> {
    let var = |k: &str| std::env::var(k).ok().and_then(|s| s.parse::<u64>().ok());
    if let Some(s) = var("SIM_SEED") {
        return vec![s];
    }
    let first = var("SIM_FIRST").unwrap_or(1);
    (first..first + var("SIM_SEEDS").unwrap_or(default)).collect()
}

/// Runs `seeds` with cores from `factory`; panics with the first failure's report.
fn run_seeds(seeds: &[u64], factory: &super::run::CoreFactory) {
    run_seeds_on(seeds, &SimConfig::default(), factory);
}

/// [`run_seeds`] on a cluster set up as `cfg` says. The seeds are spread over a few threads
/// (each seed's run is its own: its jitter, fate tally and handle ids are per thread or
/// per run), so the default 10,000 stay well under CI's two minutes on two cores; a
/// failure stops the others and the lowest failing seed is reported.
fn run_seeds_on(seeds: &[u64], cfg: &SimConfig, factory: &super::run::CoreFactory) {
    let started = std::time::Instant::now();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get()).clamp(1, 4).min(seeds.len().max(1));
    let stop = std::sync::atomic::AtomicBool::new(false);
    let results: Vec<std::result::Result<SeedTotals, (u64, String)>> = std::thread::scope(|s| {
        let stop = &stop;
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                let chunk: Vec<u64> = seeds.iter().copied().skip(w).step_by(workers).collect();
                s.spawn(move || run_chunk(&chunk, cfg, factory, stop))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    let mut total = SeedTotals::default();
    let mut failures = Vec::new();
    for r in results {
        match r {
            Ok(t) => total.add(t),
            Err(f) => failures.push(f),
        }
    }
    if let Some((seed, first)) = failures.into_iter().min_by_key(|(seed, _)| *seed) {
        // Again with the trace kept: the same seed replays the same run.
        let again = super::run::Sim::new(seed, cfg.clone(), factory).traced().run();
        match again.failure {
            Some(f) => panic!("{f}"),
            None => panic!("seed {seed} failed, then passed on replay (not deterministic): {first}"),
        }
    }
    let SeedTotals { steps, transmits, spins, open, corrupt_rejected, virtual_time, scenarios: s, faults, fates } =
        total;
    eprintln!(
        "{} seeds in {:?} ({workers} threads): {steps} steps, {transmits} requests, {virtual_time:?} of virtual time, {spins} core spins tolerated, {open} closes with a share session left open, {corrupt_rejected} corrupt records rejected by the client; {} applications failed mid-batch, {} acks of partitions moved away, {} fetches forgetting partitions, {} stale acks refused by the handle, {} gaps acknowledged",
        seeds.len(),
        started.elapsed(),
        s.failures,
        s.moved_partition_acks,
        s.forgets,
        s.stale_acks_refused,
        s.gaps_acked,
    );
    eprintln!("{}", faults.summary(&fates));
}

/// What one thread's seeds add up to.
#[derive(Default)]
struct SeedTotals {
    steps: u64,
    transmits: u64,
    spins: u64,
    open: u64,
    corrupt_rejected: u64,
    virtual_time: Duration,
    scenarios: super::run::Scenarios,
    faults: FaultTally,
    fates: super::faults::FateTally,
}

impl SeedTotals {
    fn add(&mut self, o: SeedTotals) {
        self.steps += o.steps;
        self.transmits += o.transmits;
        self.spins += o.spins;
        self.open += o.open;
        self.corrupt_rejected += o.corrupt_rejected;
        self.virtual_time += o.virtual_time;
        self.scenarios += o.scenarios;
        self.faults.add(o.faults);
        self.fates.add(o.fates);
    }
}

/// Runs `chunk` on this thread until one fails (or another thread's did): its totals, or the
/// failing seed and its report.
fn run_chunk(
    chunk: &[u64],
    cfg: &SimConfig,
    factory: &super::run::CoreFactory,
    stop: &std::sync::atomic::AtomicBool,
) -> std::result::Result<SeedTotals, (u64, String)> {
    use std::sync::atomic::Ordering;
    let mut t = SeedTotals::default();
    super::faults::FateTally::take();
    for &seed in chunk {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let out = super::run::Sim::new(seed, cfg.clone(), factory).run();
        if let Some(f) = out.failure {
            stop.store(true, Ordering::Relaxed);
            return Err((seed, f));
        }
        t.faults.note(&super::faults::FaultPlan::from_seed(seed, &cfg.brokers, cfg.partitions), cfg.lock);
        t.steps += out.steps;
        t.spins += out.spins_tolerated;
        t.open += out.sessions_left_open;
        t.corrupt_rejected += out.corrupt_rejected;
        t.scenarios += out.scenarios;
        t.transmits += out.transmits;
        t.virtual_time += out.virtual_time;
    }
    t.fates = super::faults::FateTally::take();
    Ok(t)
}

/// What the plans of a run's seeds drew (counted from the plans: a fault is applied at its
/// time, and some are no-ops, e.g. a session error for a client the run does not have).
#[derive(Debug, Default)]
struct FaultTally {
    seeds: u64,
    calm: u64,
    kinds: std::collections::BTreeMap<String, u64>,
}

impl FaultTally {
    fn note(&mut self, plan: &super::faults::FaultPlan, lock: Duration) {
        use super::faults::Fault;
        self.seeds += 1;
        let mut add = |k: &str| *self.kinds.entry(k.to_string()).or_default() += 1;
        let code = |c: i16| {
            [
                (ErrorCode::SHARE_SESSION_NOT_FOUND, "SHARE_SESSION_NOT_FOUND"),
                (ErrorCode::INVALID_SHARE_SESSION_EPOCH, "INVALID_SHARE_SESSION_EPOCH"),
                (ErrorCode::UNKNOWN_TOPIC_OR_PARTITION, "UNKNOWN_TOPIC_OR_PARTITION"),
                (ErrorCode::UNKNOWN_TOPIC_ID, "UNKNOWN_TOPIC_ID"),
                (ErrorCode::COORDINATOR_LOAD_IN_PROGRESS, "COORDINATOR_LOAD_IN_PROGRESS"),
                (ErrorCode::REQUEST_TIMED_OUT, "REQUEST_TIMED_OUT"),
            ]
            .into_iter()
            .find(|(e, _)| e.0 == c)
            .map_or_else(|| c.to_string(), |(_, n)| n.to_string())
        };
        for (_, f) in &plan.faults {
            match f {
                Fault::Crash(_) => add("broker crash (restarted before the horizon)"),
                Fault::Restart(_) | Fault::SessionLimitEnds(_) => {}
                Fault::MoveLeader(_) => add("leader move"),
                Fault::MoveCoordinator => add("coordinator move"),
                Fault::CoordinatorLoading(_) => add("COORDINATOR_LOAD_IN_PROGRESS window"),
                Fault::SessionError { code: c, .. } => add(&format!("forced {}", code(*c))),
                Fault::SessionLimit { .. } => add("SHARE_SESSION_LIMIT_REACHED window"),
                Fault::Disconnect { .. } => add("client connections dropped"),
                Fault::AckError { code: c, .. } => add(&format!("acks refused with {}", code(*c))),
                Fault::CorruptBatch(_) => add("corrupt batch (byte flipped under the CRC)"),
            }
        }
        let app = &plan.app;
        if plan.faults.is_empty()
            && plan.drop_permille + plan.reset_permille + plan.delay_permille + plan.throttle_permille == 0
        {
            self.calm += 1;
        }
        let mut seed_with = |k: &str, on: bool| {
            if on {
                *self.kinds.entry(format!("app: {k}")).or_default() += 1;
            }
        };
        seed_with("slow (20-49 ms per record)", app.per_record >= Duration::from_millis(20));
        seed_with("stalls, shorter than the lock", app.stall.is_some_and(|s| s < lock));
        seed_with("stalls past the lock (locks expire)", app.stall.is_some_and(|s| s >= lock));
        seed_with("crashes (dropped without close)", app.crash_at.is_some());
        seed_with("acks a poll late", app.late_acks);
        seed_with("renews", app.renew);
        seed_with("releases some records", app.release_permille > 0);
        seed_with("rejects some records", app.reject_permille > 0);
    }

    fn add(&mut self, o: FaultTally) {
        self.seeds += o.seeds;
        self.calm += o.calm;
        for (k, n) in o.kinds {
            *self.kinds.entry(k).or_default() += n;
        }
    }

    fn summary(&self, fates: &super::faults::FateTally) -> String {
        let mut s = format!(
            "faults over {} seeds ({} calm): network, of {} requests ({} after the horizon): {} requests dropped, {} answers dropped, {} connections reset mid-answer, {} answers throttled, {} answers delayed 10 ms-5 s",
            self.seeds,
            self.calm,
            fates.requests,
            fates.after_horizon,
            fates.drop_request,
            fates.drop_response,
            fates.reset,
            fates.throttled,
            fates.delayed
        );
        for (k, n) in &self.kinds {
            let unit = if k.starts_with("app: ") { "seeds" } else { "drawn" };
            s.push_str(&format!("\n  {k}: {n} {unit}"));
        }
        s
    }
}

fn real_core(
    client: usize,
    topology: std::sync::Arc<super::topology::SimTopology>,
    completions: std::sync::Arc<std::sync::Mutex<Vec<super::run::Completion>>>,
) -> Box<dyn super::run::Driven> {
    super::core::new_core(client, topology, completions, super::core::CoreOptions::default())
}

/// Real cores set up as `options` says.
fn core_with(options: super::core::CoreOptions) -> Box<super::run::CoreFactory> {
    Box::new(move |client, topology, completions| super::core::new_core(client, topology, completions, options))
}

/// Brokers without ShareFetch/ShareAcknowledge v2 (Kafka 4.1): the core is told RENEW is
/// not supported (as the shell learns from ApiVersions) and must never send one, however the
/// application asks (LANDSCAPE bug 13: a RENEW to such a broker had its whole batch rejected
/// with INVALID_REQUEST). `SIM_SEEDS` sets how many seeds (300 by default).
#[test]
fn v1_brokers_never_get_a_renew() {
    let v1 = SimConfig { v2: false, ..SimConfig::default() };
    run_seeds_on(&seeds(300), &v1, &*core_with(super::core::CoreOptions { renew: false, ..Default::default() }));
}

/// `share.acquire.mode=record_limit`: the core fetches only for a waiting poll, from one
/// broker at a time, never more than `max.poll.records` (LANDSCAPE bug 10: a poll that hung
/// with a strict record limit). `SIM_SEEDS` sets how many seeds (300 by default).
#[test]
fn record_limit_mode_keeps_every_invariant() {
    let options =
        super::core::CoreOptions { acquire_mode: crate::consumer::AcquireMode::RecordLimit, ..Default::default() };
    run_seeds(&seeds(300), &*core_with(options));
}

/// Every application goes through the handle's bookkeeping (`consumer::held::Held`, as
/// `ShareConsumer` does), implicit or explicit, and more seeds fail mid-batch and serve gaps
/// than in the default run (where one seed in four has such an application):
/// - LANDSCAPE bug 6: an application whose processing fails mid-batch closes or drops its
///   consumer; what it did not finish is never ACCEPTed (released, it comes back);
/// - LANDSCAPE bug 9: offsets without records, served as nothing or as empty batches, are
///   acknowledged GAP by the client alone; a late acknowledgement through a record of an
///   earlier poll (often delivered again since) is refused, never applied to another
///   delivery; no panic.
///
/// Six partitions on three brokers, so a broker a member still fetches from leads one of the
/// partitions that moved away from it too: LANDSCAPE bug 8 (that partition left listed in the
/// share session, its records acquired for the member forever) is checked on every fetch of
/// every run. `SIM_SEEDS` sets how many seeds (300 by default).
#[test]
fn handle_apps_keep_every_invariant() {
    let cfg = SimConfig {
        handle_scenarios: super::cluster::HandleScenarios::All,
        partitions: 6,
        records_per_partition: 10,
        ..SimConfig::default()
    };
    run_seeds_on(&seeds(300), &cfg, &real_core);
}

/// Seeds that find a client bug not fixed yet: left out of the default run (each would fail
/// it), replayed by `known_client_bugs`. Remove a seed once its bug is fixed.
///
/// None now. (2657, 8031 and 8383 were: see `fixed_client_bugs_stay_fixed`.)
const KNOWN_OPEN: &[u64] = &[];

/// The real driver core under the seeds' faults: `SIM_SEED=<n>` replays one, `SIM_SEEDS=<n>`
/// runs that many (10,000 by default; `SIM_FIRST` picks the first), but for the seeds of
/// `KNOWN_OPEN`.
#[test]
fn the_driver_core_keeps_every_invariant() {
    let seeds: Vec<u64> = seeds(10_000).into_iter().filter(|s| !KNOWN_OPEN.contains(s)).collect();
    run_seeds(&seeds, &real_core);
}

/// Seeds that found client bugs. Fixed (kept here as regressions, also in the default run):
/// - 2657, 8031, 8383: a renewal was taken as answered when an ack of the same offset was
///   answered by another broker (the record delivered again there after a leader move): the
///   renewed, older delivery came back from poll, the application acknowledged it, and that
///   ack replaced the RENEW still queued behind a hung request, so the RENEW was never
///   reported. A renewal now counts only the answer of the broker it went to.
/// - 1103: acks in flight when the member is fenced were never reported (a ShareAcknowledge
///   answered after `reset_session` met a newer session generation and was dropped); 2619:
///   the same with acks piggybacked on a ShareFetch; 7721: with the request's answer lost.
/// - 1 and 6291 (strict): the core spun, `poll_timeout` in the past while `drive` had nothing
///   to do (a heartbeat due during a coordinator lookup; a parked session past its limit with
///   nothing to fetch; acks lingering while a fetch was in flight; retries and pacing during
///   close; a wanted metadata refresh with no subscription to send it for).
/// - 4803 (found with the handle scenarios): a RENEW the application made before closing was
///   handed to the close and dropped there unsent, never reported.
/// - 361473, 425791, 430649 (found past CI's range): the client released a record it had
///   fetched ahead twice (two deliveries, two brokers, after leader moves); the answer of one
///   release cleared the client's note of the offset, and the other, timed out with its
///   outcome unknown, was reported to the callback as the application's. A completion now
///   carries the kind each ack was queued with (`AckKind::ReleaseUnseen`), so no path can.
///
/// Not fixed yet: `KNOWN_OPEN`. `cargo test --lib sim::tests::known -- --ignored`.
#[test]
#[ignore = "client bugs found by the simulation, not fixed yet (KNOWN_OPEN)"]
fn known_client_bugs() {
    let failures: Vec<String> = KNOWN_OPEN
        .iter()
        .filter_map(|&seed| super::run::Sim::new(seed, SimConfig::default(), &real_core).traced().run().failure)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seeds of fixed client bugs, strict about spins: each as it ran when it found its bug
/// (the handle scenarios off), and as the default run draws it.
#[test]
fn fixed_client_bugs_stay_fixed() {
    let mut failures = Vec::new();
    let before = SimConfig { handle_scenarios: super::cluster::HandleScenarios::Off, ..SimConfig::default() };
    for seed in [1, 1103, 2619, 2657, 6291, 7721, 8031, 8383] {
        failures.extend(super::run::Sim::new(seed, before.clone(), &real_core).strict().run().failure);
    }
    for seed in [1, 1103, 2619, 2657, 4803, 6291, 7721, 8031, 8383, 361473, 425791, 430649] {
        failures.extend(super::run::Sim::new(seed, SimConfig::default(), &real_core).strict().run().failure);
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The same seed twice gives the same run (same steps, requests, virtual time, outcome).
/// `SIM_SEED=<n>` picks the seed, `SIM_SEEDS=<n>` how many to compare.
#[test]
fn the_driver_core_replays_a_seed_exactly() {
    let factory = real_core;
    let mut differ = Vec::new();
    for seed in seeds(20) {
        let runs: Vec<_> = (0..3)
            .map(|_| {
                let o = super::run::Sim::new(seed, SimConfig::default(), &factory).run();
                (o.steps, o.transmits, o.virtual_time, o.failure.map(|f| f.lines().next().unwrap_or("").to_string()))
            })
            .collect();
        if runs.iter().any(|r| *r != runs[0]) {
            differ.push(format!("seed {seed}: {runs:?}"));
        }
    }
    assert!(differ.is_empty(), "not deterministic:\n{}", differ.join("\n"));
}

/// The processing engine's core over the driver core, as its application: every seed's
/// faults, with handlers slow past the lock, stuck, panicking, retries, and a first
/// consumer shutting down or aborting at any point (`engine_app.rs` checks its invariants
/// every step). `SIM_SEEDS` sets how many seeds (10,000 by default, as the driver's).
#[test]
fn the_engine_keeps_every_invariant() {
    let cfg = SimConfig { handle_scenarios: super::cluster::HandleScenarios::Engine(None), ..SimConfig::default() };
    let seeds: Vec<u64> = seeds(10_000).into_iter().filter(|s| !ENGINE_KNOWN_OPEN.contains(s)).collect();
    run_seeds_on(&seeds, &cfg, &real_core);
}

/// Engine seeds that find a bug not fixed yet, left out of the default run (none now: 2619,
/// a fenced member's close that left records locked, is fixed).
const ENGINE_KNOWN_OPEN: &[u64] = &[];

/// The engine's seeds of fixed client bugs, replayed whatever `SIM_SEEDS` says: 2619 (a
/// fenced member's close), 4087 (a queued ack sent after its record came again), 9329 (a
/// superseded delivery's RENEW after the newer one was accepted).
#[test]
fn fixed_engine_bugs_stay_fixed() {
    let cfg = SimConfig { handle_scenarios: super::cluster::HandleScenarios::Engine(None), ..SimConfig::default() };
    let failures: Vec<String> = [2619, 4087, 9329]
        .into_iter()
        .filter_map(|seed| super::run::Sim::new(seed, cfg.clone(), &real_core).run().failure)
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The engine on a 4.1 cluster: no RENEW, no record_limit (a handler past the lock loses its
/// record; the engine must still never hand an outcome on twice or lose one).
#[test]
fn the_engine_keeps_every_invariant_without_renew() {
    let cfg = SimConfig {
        v2: false,
        handle_scenarios: super::cluster::HandleScenarios::Engine(None),
        ..SimConfig::default()
    };
    run_seeds_on(&seeds(1_000), &cfg, &*core_with(super::core::CoreOptions { renew: false, ..Default::default() }));
}

/// The engine's checks fail on purpose when a fault is injected into its core's events.
#[test]
fn the_engine_checks_catch_a_double_outcome_and_a_lost_release() {
    use super::engine_app::Injected;
    for (injected, what) in
        [(Injected::DoubleOutcome, "double outcome"), (Injected::LostRelease, "not released at the close")]
    {
        let cfg = SimConfig {
            handle_scenarios: super::cluster::HandleScenarios::Engine(Some(injected)),
            ..SimConfig::default()
        };
        let caught = (1..=40u64).find_map(|seed| super::run::Sim::new(seed, cfg.clone(), &real_core).run().failure);
        let Some(failure) = caught else { panic!("{injected:?} was never caught") };
        assert!(failure.contains(what), "{injected:?}: {failure}");
    }
}
