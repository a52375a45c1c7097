//! The stop signal of the long-running binaries (`kafka-share-sink`,
//! `kafka-console-share-consumer`), included by each with `#[path]`.

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. A signal that cannot be watched is reported
/// through `warn` and then waited for no more (the run must not end for that).
pub async fn stop_signal(warn: fn(&str)) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = ctrl_c(warn) => {}
                    _ = term.recv() => {}
                }
            }
            Err(e) => {
                warn(&format!("cannot watch SIGTERM ({e}); stopping on Ctrl-C only"));
                ctrl_c(warn).await;
            }
        }
    }
    #[cfg(not(unix))]
    ctrl_c(warn).await;
}

async fn ctrl_c(warn: fn(&str)) {
    if let Err(e) = tokio::signal::ctrl_c().await {
        warn(&format!("cannot watch Ctrl-C ({e})"));
        std::future::pending::<()>().await;
    }
}
