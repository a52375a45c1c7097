//! `kafka-console-share-consumer`: Java's `kafka-console-share-consumer.sh`
//! (ConsoleShareConsumer) in Rust. Joins a share group, prints each record as Java's
//! DefaultMessageFormatter does, and acknowledges it (accept, or `--release` / `--reject`)
//! once it is written. Exit codes as Java's tool: 0 when the run ends normally
//! (`--max-messages`, `--timeout-ms`, Ctrl-C / SIGTERM, stdout closed), 1 on bad usage or an
//! error; `--help` and `--version` exit 0 (Java's `--help` exits 1).

mod kafka_console_share_consumer;
#[path = "support/stop_signal.rs"]
mod stop_signal;
#[path = "support/usage.rs"]
mod usage;

use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kafka_console_share_consumer::args::{self, Ack, Args};
use kafka_console_share_consumer::format::{Formatter, Message};
use kafka_share::{AcknowledgeType, ConsumerRecord, ShareConsumer};
use stop_signal::stop_signal;

const PROG: &str = "kafka-console-share-consumer";

/// The longest single poll: the loop comes back at least this often.
const POLL_SLICE: Duration = Duration::from_secs(1);

#[tokio::main]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.is_empty() {
        // As Java: no arguments prints the usage.
        eprintln!("{}", args::HELP);
        return ExitCode::from(1);
    }
    let a = match args::parse(&argv) {
        Ok(a) => a,
        Err(u) => return usage(&u.0),
    };
    if a.help {
        println!("{}", args::HELP);
        return ExitCode::SUCCESS;
    }
    if a.version {
        println!("{PROG} {}", env!("CARGO_PKG_VERSION"));
        return ExitCode::SUCCESS;
    }
    for w in &a.warnings {
        eprintln!("{PROG}: {w}");
    }
    let (formatter, props) = match (a.formatter(), a.consumer_properties()) {
        (Ok(f), Ok(p)) => (f, p),
        (Err(u), _) | (_, Err(u)) => return usage(&u.0),
    };
    for w in &formatter.warnings {
        eprintln!("{PROG}: {w}");
    }
    // Watched from before the connect: a SIGTERM while connecting ends the run cleanly instead
    // of killing the process by the signal's default action.
    let stop = stop_signal(|m| eprintln!("{PROG}: {m}"));
    tokio::pin!(stop);
    let consumer = tokio::select! {
        biased;
        _ = &mut stop => {
            eprintln!("Processed a total of 0 messages");
            return ExitCode::SUCCESS;
        }
        c = ShareConsumer::from_properties(&props) => match c {
            Ok(c) => c,
            Err(e) => return failed(&e.to_string()),
        },
    };
    let mut count = 0u64;
    let end = consume(&consumer, &a, &formatter, &mut count, stop).await;
    // Acknowledgements made so far go with the close; every record not printed is released.
    let closed = consumer.close(None).await;
    eprintln!("Processed a total of {count} messages");
    match (end, closed) {
        (Err(m), _) => failed(&m),
        (Ok(()), Err(e)) => failed(&format!("close: {e}")),
        (Ok(()), Ok(())) => ExitCode::SUCCESS,
    }
}

fn usage(m: &str) -> ExitCode {
    eprintln!("{PROG}: {m} (see --help)");
    ExitCode::from(1)
}

fn failed(m: &str) -> ExitCode {
    eprintln!("{PROG}: {}", m.replace('\n', " "));
    ExitCode::from(1)
}

/// Polls, prints and acknowledges until the run ends: Ok for the normal ends, Err(message)
/// for an error.
async fn consume(
    consumer: &ShareConsumer,
    a: &Args,
    formatter: &Formatter,
    count: &mut u64,
    mut stop: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
) -> Result<(), String> {
    let topic = a.topic.clone().unwrap_or_default();
    consumer.subscribe([topic]).map_err(|e| e.to_string())?;
    let ack = match a.ack {
        Ack::Accept => AcknowledgeType::Accept,
        Ack::Release => AcknowledgeType::Release,
        Ack::Reject => AcknowledgeType::Reject,
    };
    let timeout = a.timeout_ms.map(Duration::from_millis);
    let mut waiting_since = Instant::now();
    loop {
        if a.max_messages.is_some_and(|max| *count >= max) {
            return Ok(());
        }
        let wait = match timeout {
            Some(t) => t.saturating_sub(waiting_since.elapsed()).min(POLL_SLICE),
            None => POLL_SLICE,
        };
        // poll is cancel-safe: a poll that loses to the signal gives its records back.
        let records = tokio::select! {
            biased;
            _ = &mut stop => return Ok(()),
            r = consumer.poll(wait) => r.map_err(|e| e.to_string())?,
        };
        if records.is_empty() {
            if let Some(t) = timeout.filter(|t| waiting_since.elapsed() >= *t) {
                // Java logs the timeout that ends its loop at ERROR, then exits 0; so do we,
                // in one line, without the time stamp and logger name.
                eprintln!(
                    "ERROR Error processing message, terminating consumer process: TimeoutException: \
                     no record for {} ms (--timeout-ms)",
                    t.as_millis()
                );
                return Ok(());
            }
            continue;
        }
        let room = a.max_messages.map_or(usize::MAX, |max| usize::try_from(max - *count).unwrap_or(usize::MAX));
        let printed = &records[..records.len().min(room)];
        if let Err(e) = write_out(formatter, printed) {
            // As Java: a closed stdout ends the run (nothing of this poll is acknowledged, so
            // close releases it all).
            eprintln!("Unable to write to standard out, closing consumer. ({e})");
            return Ok(());
        }
        *count += printed.len() as u64;
        for r in printed {
            if let Err(e) = consumer.acknowledge_with(r, ack) {
                if !a.reject_message_on_error {
                    return Err(format!("acknowledging {}-{}@{}: {e}", r.topic, r.partition, r.offset));
                }
                eprintln!("{PROG}: error acknowledging {}-{}@{}, rejecting it: {e}", r.topic, r.partition, r.offset);
                if let Err(e) = consumer.acknowledge_with(r, AcknowledgeType::Reject) {
                    eprintln!("{PROG}: rejecting {}-{}@{} failed too: {e}", r.topic, r.partition, r.offset);
                }
            }
        }
        waiting_since = Instant::now();
    }
}

/// Formats `records` and writes them to stdout in one go, flushed: a record is acknowledged
/// only once its bytes were handed to stdout.
fn write_out(formatter: &Formatter, records: &[ConsumerRecord]) -> std::io::Result<()> {
    let mut buf = Vec::new();
    for r in records {
        formatter.write(&message(r), &mut buf);
    }
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()
}

/// What Java's tool hands its formatter: the record's fields, its delivery count, and no
/// leader epoch (ConsoleShareConsumer builds the formatter's record with an empty epoch, so
/// `print.epoch` always prints `Epoch:NOT_PRESENT` there; the same here, byte for byte).
fn message(r: &ConsumerRecord) -> Message<'_> {
    Message {
        timestamp: Some((r.timestamp_type, r.timestamp)),
        partition: r.partition,
        offset: r.offset,
        delivery_count: Some(r.delivery_count),
        leader_epoch: None,
        headers: &r.headers,
        key: r.key.as_deref(),
        value: r.value.as_deref(),
    }
}
