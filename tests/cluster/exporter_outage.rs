//! The exporter through an outage it cannot read past, on the three-broker cluster reached
//! through a proxy of this test's own on the PROXIED listeners (`scripts/kafka help`: each
//! node advertises the proxy's port there, so every connection of a client bootstrapped at
//! the proxy goes through it; the brokers themselves are never stopped):
//! - the group's offsets never answered (the proxy swallows DescribeShareGroupOffsets while
//!   the listing and the descriptions go through): the exporter serves the group's last good
//!   reading with its age (`kafka_share_group_last_read_timestamp_seconds`), counts the
//!   timeouts, its last successful refresh stays where it was, and the scaler answers
//!   UNAVAILABLE (never lag 0, never inactive) until the offsets are read again;
//! - every broker cut off (connections closed, new ones refused), with the group named
//!   (`--group`) and by pattern (listing): the group is still exported as last read, the
//!   scaler answers UNAVAILABLE (not NotFound), and all comes back when the brokers do.
//!
//! Binds the PROXIED listeners' advertised ports as the chaos tests do: holds the cluster
//! alone (`crate::disrupting`).

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::ApiKey;
use kafka_share::admin::{Admin, TopicPartition};
use kafka_share::exporter::scaler::proto::external_scaler_client::ExternalScalerClient;
use kafka_share::exporter::scaler::proto::{GetMetricsRequest, ScaledObjectRef};
use kafka_share::exporter::scaler::{serve_scaler, Scaler, ScalerEndpoint};
use kafka_share::exporter::{Exporter, ExporterConfig, GroupFilter, Snapshot, GROUPS, GROUP_LAG, GROUP_LAST_READ};
use kafka_share::prometheus::{render, Registry};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const WAIT: Duration = Duration::from_secs(120);
const PARTITIONS: i32 = 2;
/// Records per partition; the group starts at offset 1.
const RECORDS: i32 = 3;

fn lag() -> i64 {
    i64::from(PARTITIONS * (RECORDS - 1))
}

/// The proxy: forwards each node's PROXIED listener, dropping the requests of the swallowed
/// API keys (they are never answered: a stalled broker, as the client sees it), or, while
/// down, closing every connection and refusing new ones.
struct Proxy {
    bootstrap: String,
    swallowed: Arc<Mutex<BTreeSet<i16>>>,
    down: watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

fn port_offset() -> u16 {
    std::env::var("KAFKA_PORT_OFFSET").ok().and_then(|o| o.parse().ok()).unwrap_or(0)
}

impl Proxy {
    async fn start() -> Proxy {
        let off = port_offset();
        let swallowed = Arc::new(Mutex::new(BTreeSet::new()));
        let (down, _) = watch::channel(false);
        let mut tasks = Vec::new();
        for node in 0..3u16 {
            let listen = format!("127.0.0.1:{}", 29185 + off + node);
            let target = format!("127.0.0.1:{}", 29085 + off + node);
            let listener = TcpListener::bind(&listen)
                .await
                .unwrap_or_else(|e| panic!("bind the proxy on {listen}: {e} (a chaos run beside this one?)"));
            let (swallowed, down) = (swallowed.clone(), down.subscribe());
            tasks.push(tokio::spawn(async move {
                while let Ok((client, _)) = listener.accept().await {
                    if *down.borrow() {
                        drop(client);
                        continue;
                    }
                    tokio::spawn(forward(client, target.clone(), swallowed.clone(), down.clone()));
                }
            }));
        }
        Proxy { bootstrap: format!("127.0.0.1:{}", 29185 + off), swallowed, down, tasks }
    }

    fn swallow(&self, api: ApiKey, on: bool) {
        let mut s = self.swallowed.lock().unwrap();
        if on {
            s.insert(api as i16);
        } else {
            s.remove(&(api as i16));
        }
    }

    fn set_down(&self, down: bool) {
        self.down.send_replace(down);
    }
}

async fn forward(
    client: TcpStream,
    target: String,
    swallowed: Arc<Mutex<BTreeSet<i16>>>,
    mut down: watch::Receiver<bool>,
) {
    let Ok(server) = TcpStream::connect(&target).await else { return };
    let (mut client_rx, mut client_tx) = client.into_split();
    let (mut server_rx, mut server_tx) = server.into_split();
    // Requests frame by frame (4-byte size, then the API key first in the header).
    let up = async move {
        loop {
            let mut size = [0u8; 4];
            client_rx.read_exact(&mut size).await?;
            let mut frame = vec![0u8; u32::from_be_bytes(size) as usize];
            client_rx.read_exact(&mut frame).await?;
            let api = i16::from_be_bytes([frame[0], frame[1]]);
            if swallowed.lock().unwrap().contains(&api) {
                continue;
            }
            server_tx.write_all(&size).await?;
            server_tx.write_all(&frame).await?;
        }
        #[allow(unreachable_code)]
        Ok::<(), std::io::Error>(())
    };
    let back = tokio::io::copy(&mut server_rx, &mut client_tx);
    tokio::select! {
        _ = up => {}
        _ = back => {}
        _ = down.wait_for(|d| *d) => {}
    }
}

/// A topic with records and a share group with state on all its partitions from offset 1,
/// made directly (not through the proxy).
async fn exported_group(admin: &Admin) -> String {
    let topic = common::unique("exp-out");
    common::create_kept_topic(admin, &topic, PARTITIONS).await;
    common::described_with_leaders(admin, &topic).await;
    common::produce(&common::cluster_bootstrap(), &topic, PARTITIONS, (PARTITIONS * RECORDS) as usize, "v").await;
    let group = common::unique("exp-out-g");
    let offsets: BTreeMap<TopicPartition, i64> =
        (0..PARTITIONS).map(|p| (TopicPartition::new(topic.clone(), p), 1)).collect();
    for (tp, r) in admin.alter_share_group_offsets(&group, &offsets).await.expect("alter offsets") {
        r.unwrap_or_else(|e| panic!("start offset of {group} on {tp}: {e}"));
    }
    group
}

struct Exported {
    exporter: Exporter,
    registry: Registry,
    _scaler: ScalerEndpoint,
    client: ExternalScalerClient<tonic::transport::Channel>,
}

/// An exporter through the proxy, its registry and a scaler client.
async fn exporter(bootstrap: &str, groups: GroupFilter) -> Exported {
    let mut c = ExporterConfig::default();
    c.groups = groups;
    c.refresh_interval = Duration::from_millis(200);
    c.request_timeout = Duration::from_secs(2);
    let exporter = Exporter::start(Admin::connect_to(bootstrap).await.expect("admin through the proxy"), c);
    let mut registry = Registry::default();
    registry.register_collector(Box::new(exporter.collector()));
    let scaler = serve_scaler("127.0.0.1:0", Scaler::new(exporter.subscribe())).await.expect("scaler");
    let client = ExternalScalerClient::connect(format!("http://{}", scaler.local_addr())).await.expect("gRPC client");
    Exported { exporter, registry, _scaler: scaler, client }
}

fn scaled_object(group: &str) -> ScaledObjectRef {
    ScaledObjectRef {
        name: "worker".into(),
        namespace: "default".into(),
        scaler_metadata: [("group".to_string(), group.to_string()), ("lagThreshold".to_string(), "1".to_string())]
            .into(),
    }
}

async fn wait_for(exporter: &Exporter, what: &str, ok: impl Fn(&Snapshot) -> bool) -> Arc<Snapshot> {
    let end = tokio::time::Instant::now() + WAIT;
    loop {
        let s = exporter.next_refresh().await;
        if ok(&s) {
            return s;
        }
        assert!(tokio::time::Instant::now() < end, "{what}: never seen; last snapshot {s:#?}");
    }
}

/// Read in full at the last refresh, with the whole lag.
fn read(s: &Snapshot, group: &str) -> bool {
    !s.unread.contains_key(group) && s.group(group).and_then(|g| g.lag(None)) == Some((lag(), false))
}

/// The value of the series `name` whose labels contain `label`.
fn sample(text: &str, name: &str, label: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains(label))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

/// The value of the unlabelled series `name`.
fn plain(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

/// While `group` is unread in `e`: its last reading is served as it was, with its age, the
/// last success stays, and the scaler has no value for it (UNAVAILABLE saying `cause`).
/// Returns a snapshot of the group unread.
async fn unavailable_while_unread(e: &mut Exported, group: &str, good: &Snapshot, cause: &str) -> Arc<Snapshot> {
    let first = wait_for(&e.exporter, "the group unread", |s| s.unread.contains_key(group)).await;
    let s = wait_for(&e.exporter, "another refresh", |t| t.refreshes > first.refreshes).await;
    let unread = s.unread.get(group).expect("still unread");
    assert!(unread.cause.contains(cause), "{unread:?}");
    let kept = s.group(group).expect("the last good reading kept");
    assert_eq!(kept.partitions, good.group(group).unwrap().partitions, "as it was read");
    assert_eq!(unread.last_read, kept.last_read);
    // One group: its last full read was the last successful refresh, and none came since.
    assert_eq!(s.last_success, kept.last_read);
    assert_eq!(s.last_success, first.last_success, "no successful refresh while unread");
    let text = render(&e.registry);
    let label = format!("group=\"{group}\"");
    assert_eq!(sample(&text, GROUP_LAG, &label), Some(lag() as f64), "{text}");
    let read_at = kept.last_read.unwrap().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64();
    assert_eq!(sample(&text, GROUP_LAST_READ, &label), Some(read_at), "{text}");
    assert_eq!(plain(&text, GROUPS), Some(1.0), "still exported: {text}");
    let err = e.client.is_active(scaled_object(group)).await.expect_err("IsActive has no value");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(err.message().contains(cause) && err.message().contains("last read"), "{err:?}");
    let req =
        GetMetricsRequest { scaled_object_ref: Some(scaled_object(group)), metric_name: format!("share-lag-{group}") };
    let err = e.client.get_metrics(req).await.expect_err("GetMetrics has no value");
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offsets_that_never_answer_are_unavailable_not_zero() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    let group = exported_group(&admin).await;
    let proxy = Proxy::start().await;
    let mut e = exporter(&proxy.bootstrap, GroupFilter::pattern(&group).expect("pattern")).await;
    let mut stream = e.client.stream_is_active(scaled_object(&group)).await.expect("StreamIsActive").into_inner();
    let good = wait_for(&e.exporter, "the group read", |s| read(s, &group)).await;
    assert!(stream.message().await.expect("stream").expect("an answer").result, "active");

    proxy.swallow(ApiKey::DescribeShareGroupOffsets, true);
    let unread = unavailable_while_unread(&mut e, &group, &good, "offsets: timeout").await;
    assert!(e.exporter.snapshot().errors.get(&("offsets", "timeout".to_string())).is_some_and(|n| *n >= 1));
    // The stream says nothing from a backlog it could not read: KEDA keeps what it said.
    let s = e.exporter.snapshot();
    wait_for(&e.exporter, "two more refreshes", |t| t.refreshes >= s.refreshes + 2).await;
    let pushed = tokio::time::timeout(Duration::from_millis(500), stream.message()).await;
    assert!(pushed.is_err(), "the stream pushed {pushed:?} while the backlog was unread");

    proxy.swallow(ApiKey::DescribeShareGroupOffsets, false);
    let back =
        wait_for(&e.exporter, "the group read again", |s| read(s, &group) && s.last_success > unread.last_success)
            .await;
    assert!(back.unread.is_empty(), "{:?}", back.unread);
    assert!(e.client.is_active(scaled_object(&group)).await.expect("IsActive").into_inner().result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn brokers_cut_off_leave_the_group_unavailable_by_name_and_by_listing() {
    let _turn = crate::disrupting().await;
    let admin = common::cluster_admin().await;
    let group = exported_group(&admin).await;
    let proxy = Proxy::start().await;
    let mut named = exporter(&proxy.bootstrap, GroupFilter::List(vec![group.clone()])).await;
    let mut listing = exporter(&proxy.bootstrap, GroupFilter::pattern(&group).expect("pattern")).await;
    let named_good = wait_for(&named.exporter, "the group read by name", |s| read(s, &group)).await;
    let listing_good = wait_for(&listing.exporter, "the group read by listing", |s| read(s, &group)).await;

    proxy.set_down(true);
    // Named: its description fails (connection or timeout): unread, never NotFound.
    let named_unread = unavailable_while_unread(&mut named, &group, &named_good, "describe_group: ").await;
    // Listing: the listing fails: every group known is unread as it was last read.
    let listing_unread = unavailable_while_unread(&mut listing, &group, &listing_good, "list_groups: ").await;
    assert!(listing.exporter.snapshot().listing_failed.is_some());
    let err = listing.client.is_active(scaled_object("exp-out-never-made")).await.expect_err("unknown");
    assert_eq!(err.code(), tonic::Code::Unavailable, "a group not listed while nothing can be listed: {err:?}");

    proxy.set_down(false);
    for (name, e, unread) in [("named", &named, &named_unread), ("listing", &listing, &listing_unread)] {
        let back = wait_for(&e.exporter, name, |s| read(s, &group) && s.last_success > unread.last_success).await;
        assert!(back.unread.is_empty() && back.listing_failed.is_none(), "{name}: {back:?}");
    }
    let err = listing.client.is_active(scaled_object("exp-out-never-made")).await.expect_err("unknown");
    assert_eq!(err.code(), tonic::Code::NotFound, "absent from a listing that succeeded: {err:?}");
}
