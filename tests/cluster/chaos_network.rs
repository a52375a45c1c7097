//! No loss through a faulty network: the no-loss harness (tests/cluster/chaos_support) with its
//! consumers bootstrapped at the loopback fault proxy (tests/cluster/chaos_support/proxy.rs), so that
//! every connection they make to any broker goes through it (the cluster's PROXIED listener
//! advertises the proxy's ports). The producer and the admin go straight to the brokers.
//! In turn: added latency, resets in the middle of responses, and a black hole longer than
//! the consumers' request.timeout.ms. Prints the figures.
//!
//! Its own test binary: the proxy listens on fixed ports (29185-29187 + KAFKA_PORT_OFFSET).

use crate::chaos_support;

use std::time::{Duration, Instant};

use chaos_support::no_loss::{NoLoss, Options};
use chaos_support::proxy::FaultProxy;

/// The consumers' request.timeout.ms: the black hole lasts longer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latency_resets_and_a_black_hole_between_consumer_and_brokers_nothing_is_lost() {
    let _turn = crate::disrupting().await;
    let proxy = FaultProxy::start().await;
    let mut options = Options::from_env(4000);
    options.consumer_bootstrap = Some(proxy.bootstrap.clone());
    options.request_timeout = Some(REQUEST_TIMEOUT);
    let run = NoLoss::start(options).await;
    let step = run.options.records / 8;
    run.wait_accepted(step).await;

    run.note("latency 150 ms on every request");
    proxy.set_latency(Duration::from_millis(150));
    run.wait_accepted(2 * step).await;
    proxy.set_latency(Duration::ZERO);
    run.note("latency off");

    for i in 1..=3 {
        let before = proxy.resets();
        proxy.reset_next_response();
        let deadline = Instant::now() + Duration::from_secs(60);
        while proxy.resets() == before {
            assert!(Instant::now() < deadline, "no response to cut within 60 s");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        run.note(format!("reset {i} in the middle of a response"));
        run.wait_accepted((2 + i) * step).await;
    }

    // A black hole is a duration by definition: it must outlast request.timeout.ms.
    let hole = REQUEST_TIMEOUT + Duration::from_secs(3);
    run.note(format!("black hole for {:.0} s", hole.as_secs_f64()));
    proxy.black_hole(true);
    tokio::time::sleep(hole).await;
    proxy.black_hole(false);
    run.note(format!("black hole over; {} connections reset so far", proxy.resets()));

    let (figures, _) = run.finish("network_faults").await;
    eprintln!("chaos: network_faults: proxy accepted {} connections, reset {}", proxy.connections(), proxy.resets());
    figures.assert_no_loss("network_faults");
}
