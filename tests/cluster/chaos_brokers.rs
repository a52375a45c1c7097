//! No loss when brokers fail: the no-loss harness (tests/cluster/chaos_support) runs a producer and
//! two share consumers (explicit mode, ACCEPT after recording) on a 6-partition topic (RF 3,
//! min.insync.replicas 2) of the three-broker cluster while a scenario stops, kills and
//! restarts brokers with `scripts/kafka stop|kill|start --node N` (the pids the script
//! recorded). Each test prints the figures: produced / accepted / lost / redelivered and the
//! longest stall.
//!
//! The suite runs the short form (a few thousand records); scripts/chaos the full form
//! (CHAOS_RECORDS, CHAOS_RATE). Nothing else may use the cluster while a broker is down:
//! cargo runs test binaries one after the other, and the tests of this binary take turns
//! (`crate::disrupting`). Every test leaves all three brokers running and every replica in sync.

use crate::chaos_support;
use crate::common;

use std::time::Duration;

use chaos_support::brokers::{self, StartOnDrop};
use chaos_support::no_loss::{NoLoss, Options};

/// A broker leading at least two of the topic's partitions, the group coordinator or not as
/// asked when there is a choice.
async fn pick_leader(run: &NoLoss, coordinator: bool) -> (i32, Vec<i32>) {
    let coord = run.admin.cluster().find_group_coordinator(&run.group).await.expect("find the coordinator");
    let led = brokers::by_leader(&brokers::leaders(&run.admin, &run.topic).await);
    let mut choices: Vec<(i32, Vec<i32>)> = led.into_iter().filter(|(b, _)| *b >= 0).collect();
    // Most partitions first, then the wanted coordinator-ness.
    choices.sort_by_key(|(b, ps)| (std::cmp::Reverse(ps.len().min(2)), (*b == coord) != coordinator));
    choices.into_iter().next().expect("a broker leading partitions")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_of_several_partitions_killed_mid_consumption_nothing_is_lost() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    brokers::wait_all_in_sync(&admin).await;
    let run = NoLoss::start(Options::from_env(3000)).await;
    run.wait_accepted(run.options.records / 4).await;
    let (victim, led) = pick_leader(&run, false).await;
    run.note(format!("kill -9 broker {victim}, leader of partitions {led:?}"));
    brokers::kill(victim).await;
    let _restart = StartOnDrop(victim);
    let moved = brokers::wait_leaders_moved(&run.admin, &run.topic, victim, &led).await;
    run.note(format!("partitions {led:?} moved off broker {victim} after {:.1} s", moved.as_secs_f64()));
    brokers::start(victim).await;
    run.note(format!("broker {victim} serves again"));
    brokers::wait_all_in_sync(&run.admin).await;
    run.note(format!("broker {victim} back in every ISR"));
    let (figures, _) = run.finish("leader_killed").await;
    figures.assert_no_loss("leader_killed");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_restart_of_all_three_brokers_nothing_is_lost() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    brokers::wait_all_in_sync(&admin).await;
    // Long enough to keep producing through at least the first restart.
    let run = NoLoss::start(Options::from_env(6000)).await;
    run.wait_accepted(run.options.records / 10).await;
    for node in 1..=3 {
        run.note(format!("stop broker {node} (controlled shutdown)"));
        brokers::stop(node).await;
        let _restart = StartOnDrop(node);
        brokers::start(node).await;
        run.note(format!("broker {node} serves again"));
        brokers::wait_all_in_sync(&run.admin).await;
        run.note(format!("broker {node} back in every ISR"));
    }
    let (figures, _) = run.finish("rolling_restart").await;
    figures.assert_no_loss("rolling_restart");
}

/// The share session on a broker vanishes while its members hold records of it: the members
/// stop acknowledging (`hold_acks`), the broker leading the partitions of most held records
/// is killed and started again at once, then the members ACCEPT what they held. Those
/// acknowledgements belong to a session that is gone: they must fail visibly (the commit
/// callback reports them), and the records come back with a higher delivery count.
///
/// Leadership: with RF 3 a real cluster does not restart a leader without moving its
/// leadership. A clean stop moves its leaders first (controlled shutdown); a killed node is
/// fenced after broker.session.timeout.ms (9 s), and its JVM takes longer than that to come
/// back here (about 30 s), so the other ISR replicas lead by then (measured: the leaders
/// printed before and after). A broker that leads nothing the consumer reads holds no share
/// session of it, so restarting it loses none. What the scenario keeps is the point: the
/// session and the acquisitions under it are lost while the application still holds the
/// records, and the application acknowledges them afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broker_restart_loses_the_share_session_its_acks_fail_visibly_nothing_is_lost() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    brokers::wait_all_in_sync(&admin).await;
    let run = NoLoss::start(Options::from_env(3000)).await;
    run.wait_accepted(run.options.records / 10).await;
    run.hold_acks(true);
    let members = run.options.consumers;
    run.wait_for("every member holds a batch", |l| {
        l.held.iter().map(|(m, _, _)| *m).collect::<std::collections::BTreeSet<_>>().len() == members
    })
    .await;
    let before = brokers::leaders(&run.admin, &run.topic).await;
    // The broker behind most held records.
    let victim = {
        let l = run.ledger.lock().unwrap_or_else(|p| p.into_inner());
        let mut count = std::collections::BTreeMap::<i32, usize>::new();
        for (_, p, _) in &l.held {
            *count.entry(before[p]).or_default() += 1;
        }
        count.into_iter().max_by_key(|(_, n)| *n).map(|(b, _)| b).expect("held records")
    };
    let held_before = run.ledger.lock().unwrap_or_else(|p| p.into_inner()).held.len();
    run.note(format!("kill -9 broker {victim} while the members hold {held_before} records; leaders {before:?}"));
    brokers::kill(victim).await;
    let _restart = StartOnDrop(victim);
    run.hold_acks(false);
    run.note("the members ACCEPT what they held");
    brokers::start(victim).await;
    run.note(format!("broker {victim} serves again; leaders {:?}", brokers::leaders(&run.admin, &run.topic).await));
    brokers::wait_all_in_sync(&run.admin).await;
    run.note(format!(
        "broker {victim} back in every ISR; leaders {:?}",
        brokers::leaders(&run.admin, &run.topic).await
    ));
    let (figures, ledger) = run.finish("broker_restart_session_lost").await;
    figures.assert_no_loss("broker_restart_session_lost");
    // The records held from the killed broker: each ACCEPT made after the kill must come back
    // failed (or of unknown outcome), never as committed by a session that is gone.
    let l = ledger.lock().unwrap_or_else(|p| p.into_inner());
    let lost_session: Vec<(i32, i64)> =
        l.held.iter().filter(|(_, p, _)| before[p] == victim).map(|(_, p, o)| (*p, *o)).collect();
    let mut outcomes = std::collections::BTreeMap::<String, usize>::new();
    for po in &lost_session {
        let first = l.deliveries.iter().find(|d| (d.partition, d.offset) == *po).map(|d| d.at);
        // A committed ACCEPT of the held delivery would come before any redelivery of it.
        let redelivered = l.deliveries.iter().filter(|d| (d.partition, d.offset) == *po).nth(1).map(|d| d.at);
        let outcome = match (l.failed_at.get(po), l.accepted.get(po)) {
            (Some(kind), _) => format!("failed: {kind}"),
            (None, Some((t, _))) if redelivered.is_none_or(|r| *t < r) && first.is_some() => "committed".to_string(),
            (None, _) => "no result".to_string(),
        };
        *outcomes.entry(outcome).or_default() += 1;
    }
    eprintln!(
        "chaos: broker_restart_session_lost: {} records held from broker {victim}; their ACCEPTs: {outcomes:?}",
        lost_session.len()
    );
    assert!(!lost_session.is_empty(), "no held record came from broker {victim}");
    assert!(
        outcomes.keys().all(|k| k.starts_with("failed")),
        "an ACCEPT under the lost session was not reported failed: {outcomes:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_coordinator_broker_killed_nothing_is_lost() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    brokers::wait_all_in_sync(&admin).await;
    let run = NoLoss::start(Options::from_env(3000)).await;
    run.wait_accepted(run.options.records / 4).await;
    let coordinator = run.admin.cluster().find_group_coordinator(&run.group).await.expect("find the coordinator");
    run.note(format!("kill -9 broker {coordinator}, the group coordinator"));
    brokers::kill(coordinator).await;
    let _restart = StartOnDrop(coordinator);
    // The group's coordinator moves once the controller fences the broker.
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    loop {
        let c = run.admin.cluster().find_group_coordinator(&run.group).await;
        if let Some(c) = c.as_ref().ok().filter(|c| **c != coordinator) {
            run.note(format!("the coordinator moved to broker {c}"));
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the coordinator did not move off broker {coordinator}: {c:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    brokers::start(coordinator).await;
    run.note(format!("broker {coordinator} serves again"));
    brokers::wait_all_in_sync(&run.admin).await;
    run.note(format!("broker {coordinator} back in every ISR"));
    let (figures, _) = run.finish("coordinator_killed").await;
    figures.assert_no_loss("coordinator_killed");
}
