//! The stop signal of the long-running binaries (`kafka-share-sink`,
//! `kafka-console-share-consumer`), included by each with `#[path]`.

use std::future::Future;

/// Resolves on SIGINT (Ctrl-C) or SIGTERM. The handlers are installed when this is called,
/// not when the future is first awaited: a signal that arrives in between (a supervisor
/// stopping the process right after it printed that it runs) is seen, instead of killing
/// the process by the default action. Call it first thing in `main`. A signal that cannot
/// be watched is reported through `warn` and then waited for no more (the run must not end
/// for that).
pub fn stop_signal(warn: fn(&str)) -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {}
                        _ = int.recv() => {}
                    }
                }
                (Ok(mut term), Err(e)) => {
                    warn(&format!("cannot watch SIGINT ({e}); stopping on SIGTERM only"));
                    term.recv().await;
                }
                (Err(e), Ok(mut int)) => {
                    warn(&format!("cannot watch SIGTERM ({e}); stopping on Ctrl-C only"));
                    int.recv().await;
                }
                (Err(e), Err(_)) => {
                    warn(&format!("cannot watch SIGTERM or SIGINT ({e})"));
                    std::future::pending::<()>().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        // Elsewhere only Ctrl-C, whose handler tokio installs on the first poll.
        async move {
            if let Err(e) = tokio::signal::ctrl_c().await {
                warn(&format!("cannot watch Ctrl-C ({e})"));
                std::future::pending::<()>().await;
            }
        }
    }
}
