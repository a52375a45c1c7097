//! Our side of the head-of-line case of `scripts/bench sink`: the sink runtime through its
//! library API, with a file sink of which one record in N is slow.
//!
//! ```text
//! cargo run --release -p kafka-share-bench -- sink --bootstrap B --topic T \
//!     --group G --file PATH [--tasks 12] [--slow-every 1000] [--slow-ms 200] [--set k=v,k=v]
//! ```
//!
//! Registers `slow-file`: the built-in `file` sink (what Connect's FileStreamSink writes, one
//! value per line) wrapped so that the record at offset `o` sleeps `--slow-ms` before its
//! batch is written when `(o + 1) % slow-every == 0` (the same records that
//! `peers/java-connect`'s connector makes slow). The sleep is an async one inside `put`: that
//! task waits, as a Connect task does in `Thread.sleep`, and the others go on. Starts one
//! connector with `--tasks` tasks in share group `--group` and runs until SIGTERM or Ctrl-C,
//! then shuts down cleanly (the benchmark watches the file and stops the process).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use kafka_share::sink::{
    ConnectorConfig, Registry, SinkError, SinkRecord, SinkTask, SinkTaskFactory, TaskConfig, Worker, WorkerConfig,
};

use crate::args::{Args, BoxError};
use crate::cli;

/// The built-in file task with slow records.
struct SlowSink {
    inner: Box<dyn SinkTask>,
    every: i64,
    pause: Duration,
}

impl SinkTask for SlowSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        self.inner.start(config)
    }

    fn open<'a>(&'a mut self, topics: &'a [String]) -> BoxFuture<'a, Result<(), SinkError>> {
        self.inner.open(topics)
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if self.every > 0 {
                for r in records {
                    if (r.offset + 1) % self.every == 0 {
                        tokio::time::sleep(self.pause).await;
                    }
                }
            }
            self.inner.put(records).await
        })
    }

    fn flush(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        self.inner.flush()
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        self.inner.stop()
    }
}

#[tokio::main]
pub async fn entry(raw: Vec<String>) {
    cli::traces_from_env();
    cli::exit_on_error("sink_bench: ", run(raw).await);
}

async fn run(raw: Vec<String>) -> Result<(), BoxError> {
    let a = Args::parse(raw)?;
    let bootstrap = a.req("bootstrap")?;
    let topic = a.req("topic")?;
    let group = a.req("group")?;
    let file = a.req("file")?;
    let tasks: usize = a.num("tasks", 12)?;
    let every: i64 = a.num("slow-every", 1000)?;
    let pause = Duration::from_millis(a.num("slow-ms", 200)?);

    let mut registry = Registry::with_builtins();
    let file_sink: Arc<dyn SinkTaskFactory> = registry.get("file")?;
    registry.register("slow-file", move |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
        let inner = file_sink.create(config)?;
        Ok(Box::new(SlowSink { inner, every, pause }))
    });

    let worker = Worker::new(WorkerConfig::new(bootstrap), registry);
    let mut pairs = vec![
        ("name".to_string(), group.to_string()),
        ("connector.class".to_string(), "slow-file".to_string()),
        ("topics".to_string(), topic.to_string()),
        ("tasks.max".to_string(), tasks.to_string()),
        ("share.group.id".to_string(), group.to_string()),
        ("file".to_string(), file.to_string()),
    ];
    // More connector settings, `--set key=value,key=value` (e.g. consumer.override.*).
    for kv in a.get("set").unwrap_or_default().split(',').filter(|kv| !kv.is_empty()) {
        let (k, v) = kv.split_once('=').ok_or_else(|| format!("--set: {kv:?} is not key=value"))?;
        pairs.push((k.to_string(), v.to_string()));
    }
    let connector = worker.start_connector(ConnectorConfig::from_pairs(pairs)?).await?;
    eprintln!("sink_bench: connector {} running with {} tasks", connector.name(), connector.tasks());

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        r = tokio::signal::ctrl_c() => r?,
    }
    eprintln!("sink_bench: stopping");
    if std::env::var_os("SINK_BENCH_METRICS").is_some() {
        for (k, v) in connector.metrics().iter() {
            eprintln!("sink_bench: metric {k} = {v}");
        }
    }
    worker.close(Duration::from_secs(30)).await?;
    Ok(())
}
