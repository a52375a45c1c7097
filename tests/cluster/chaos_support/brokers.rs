//! The cluster's brokers as the chaos tests see them: stop, kill and start nodes through
//! `scripts/kafka` (which acts only on the pids it recorded), and wait for the conditions
//! that make the next step safe (every replica back in its ISR, a partition's leader moved).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kafka_protocol::messages::MetadataRequest;
use kafka_share::admin::Admin;

/// How long a node may take to come back into every ISR after it serves again: a failure
/// limit, not an expectation.
const ISR_DEADLINE: Duration = Duration::from_secs(180);

/// Runs `scripts/kafka CMD --nodes 3 --node N` (the caller's KAFKA_PORT_OFFSET goes along).
fn node_command(cmd: &str, node: i32) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka");
    let out = std::process::Command::new(script)
        .args([cmd, "--nodes", "3", "--node", &node.to_string()])
        .output()
        .expect("run scripts/kafka");
    eprint!("{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "scripts/kafka {cmd} --node {node} failed: {}", String::from_utf8_lossy(&out.stdout));
}

/// Runs the script off the runtime's workers: a start takes tens of seconds, and the
/// consumers must go on meanwhile.
async fn node_command_async(cmd: &'static str, node: i32) {
    tokio::task::spawn_blocking(move || node_command(cmd, node)).await.expect("scripts/kafka ran");
}

/// When a broker was killed or stopped, in this test process (the ledger's explanation of a
/// same-count redelivery: see `Ledger::figures`).
static WENT_DOWN: std::sync::Mutex<Vec<Instant>> = std::sync::Mutex::new(Vec::new());

/// The moments brokers were killed or stopped, oldest first.
pub fn went_down() -> Vec<Instant> {
    WENT_DOWN.lock().unwrap_or_else(|p| p.into_inner()).clone()
}

fn going_down() {
    WENT_DOWN.lock().unwrap_or_else(|p| p.into_inner()).push(Instant::now());
}

/// kill -9 one node, as a crash.
pub async fn kill(node: i32) {
    going_down();
    node_command_async("kill", node).await;
}

/// Stops one node cleanly (controlled shutdown: its leaders move first).
pub async fn stop(node: i32) {
    going_down();
    node_command_async("stop", node).await;
}

/// Starts a stopped or killed node and waits until it serves.
pub async fn start(node: i32) {
    node_command_async("start", node).await;
}

/// Starts a node again when dropped, passed or failed, so the next test finds three brokers.
pub struct StartOnDrop(pub i32);

impl Drop for StartOnDrop {
    fn drop(&mut self) {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/kafka");
        // `start` does nothing for a node that runs.
        let _ = std::process::Command::new(script)
            .args(["start", "--nodes", "3", "--node", &self.0.to_string()])
            .output();
    }
}

/// Leader of each partition of `topic`, from fresh metadata.
pub async fn leaders(admin: &Admin, topic: &str) -> BTreeMap<i32, i32> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(t) = admin.describe_topic(topic).await {
            return t.partitions.iter().map(|p| (p.partition, p.leader.unwrap_or(-1))).collect();
        }
        assert!(Instant::now() < deadline, "no metadata for {topic}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The node id of every broker leading at least one of `partitions` of `topic`, with them.
pub fn by_leader(leaders: &BTreeMap<i32, i32>) -> BTreeMap<i32, Vec<i32>> {
    let mut led: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for (p, l) in leaders {
        led.entry(*l).or_default().push(*p);
    }
    led
}

/// Whether every partition of every topic (internal ones too) has all its replicas in sync
/// and a leader, and `brokers` brokers are registered.
async fn fully_in_sync(admin: &Admin, brokers: usize) -> Result<bool, String> {
    let cluster = admin.cluster();
    let conn = cluster.any_broker().await.map_err(|e| e.to_string())?;
    let req = MetadataRequest::default().with_topics(None).with_allow_auto_topic_creation(false);
    let resp = cluster.send(&conn, &req, (1, 12)).await.map_err(|e| e.to_string())?;
    if resp.brokers.len() < brokers {
        return Ok(false);
    }
    Ok(resp.topics.iter().all(|t| {
        t.error_code == 0
            && t.partitions
                .iter()
                .all(|p| p.error_code == 0 && p.leader_id.0 >= 0 && p.isr_nodes.len() == p.replica_nodes.len())
    }))
}

/// Waits until all three brokers are registered and back in every ISR: only then may the next
/// broker go down without taking a partition under min.insync.replicas.
pub async fn wait_all_in_sync(admin: &Admin) {
    let deadline = Instant::now() + ISR_DEADLINE;
    loop {
        let last = match fully_in_sync(admin, 3).await {
            Ok(true) => return,
            Ok(false) => "a replica out of sync".to_string(),
            Err(e) => e,
        };
        assert!(Instant::now() < deadline, "the cluster was not fully in sync within {ISR_DEADLINE:?}: {last}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until none of `partitions` of `topic` is led by `node` (the controller fenced it
/// or moved its leaders); returns how long that took.
pub async fn wait_leaders_moved(admin: &Admin, topic: &str, node: i32, partitions: &[i32]) -> Duration {
    let start = Instant::now();
    let deadline = start + Duration::from_secs(90);
    loop {
        let l = leaders(admin, topic).await;
        if partitions.iter().all(|p| l.get(p).is_some_and(|x| *x != node && *x >= 0)) {
            return start.elapsed();
        }
        assert!(Instant::now() < deadline, "partitions {partitions:?} of {topic} still led by {node}: {l:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
