//! What every subcommand does around its own work: traces on stderr when `RUST_LOG` asks,
//! an error printed under the subcommand's own prefix (the scripts grep for it) and exit 1,
//! and the cleanup of a run's topics and share groups.

use kafka_share::admin::Admin;

use crate::args::{Args, BoxError};

/// `RUST_LOG=kafka_share::connection=trace` shows every request on the wire, timed; without
/// `RUST_LOG` nothing is set up (the subscriber's cost stays out of the figures).
pub fn traces_from_env() {
    if std::env::var_os("RUST_LOG").is_some() {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_writer(std::io::stderr)
            .init();
    }
}

/// Ends the process with exit code 1 after `{prefix}{error}` on stderr if `result` failed.
pub fn exit_on_error(prefix: &str, result: Result<(), BoxError>) {
    if let Err(e) = result {
        eprintln!("{prefix}{e}");
        std::process::exit(1);
    }
}

/// Deletes the topics of `--topic` (they hold gigabytes on a broker other tests share) and
/// the share groups of `--group` (both repeatable; the groups are empty by then: their members
/// have left). A topic or group that cannot be deleted is reported under `who` and skipped.
pub async fn cleanup(a: &Args, who: &str) -> Result<(), BoxError> {
    let admin = Admin::connect_to(a.req("bootstrap")?).await?;
    let topics = a.all("topic");
    if !topics.is_empty() {
        for (t, r) in topics.iter().zip(admin.delete_topics(&topics).await?) {
            if let Err(e) = r {
                eprintln!("{who}: deleting topic {t}: {e}");
            }
        }
    }
    let groups = a.all("group");
    if !groups.is_empty() {
        for (g, r) in groups.iter().zip(admin.delete_share_groups(&groups).await?) {
            if let Err(e) = r {
                eprintln!("{who}: deleting share group {g}: {e}");
            }
        }
    }
    Ok(())
}
