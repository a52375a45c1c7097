//! `kafka-share-bench`: the benchmark harnesses of kafka-share, one binary with a subcommand
//! each. `scripts/bench <case>` builds and runs it (and the Java peers), then writes
//! BENCHMARKS.md; each subcommand prints the lines the scripts parse (`RESULT {json}`, ...).
//!
//! ```text
//! kafka-share-bench <subcommand> [mode] [--key value ...]
//! ```
//!
//! Every subcommand takes `--key value` pairs (`args.rs`, the one parser); each module's
//! header comment lists its keys and what it prints.

mod args;
mod barrier;
mod callgrind_poll;
mod ceiling;
mod cli;
mod failover;
mod peers;
mod process;
mod scale;
mod sink;
mod work;

use std::process::ExitCode;

/// The subcommands: name, what it runs, one line.
const SUBCOMMANDS: &[(&str, &str)] = &[
    ("produce", "write the benchmark topic with our producer (peers.rs)"),
    ("group", "share.auto.offset.reset=earliest (and --config k=v) on share groups (peers.rs)"),
    ("consume", "our ShareConsumer until N records are acknowledged: RESULT (peers.rs)"),
    ("latency", "end-to-end latency at a fixed rate: LATENCY (peers.rs)"),
    ("cleanup", "delete topics and share groups (peers.rs)"),
    ("process", "the processing engine with simulated work: RESULT (process.rs)"),
    ("barrier", "the batch-barrier loop with simulated work: RESULT (barrier.rs)"),
    ("ceiling", "the engine's handlers on records from memory, no Kafka: RESULT (ceiling.rs)"),
    ("scale", "drain|idle: cost per partition and per consumer: RESULT (scale.rs)"),
    ("failover", "setup|consume|cleanup: a broker killed under one consumer (failover.rs)"),
    ("sink", "the sink runtime's library API with a slow file sink (sink.rs)"),
    ("callgrind-poll", "implicit|explicit: the poll path on the fake cluster, for valgrind (callgrind_poll.rs)"),
];

fn usage() -> String {
    let mut s = String::from("usage: kafka-share-bench <subcommand> [mode] [--key value ...]\n\nsubcommands:\n");
    for (name, what) in SUBCOMMANDS {
        s.push_str(&format!("  {name:<15} {what}\n"));
    }
    s
}

fn main() -> ExitCode {
    let mut raw = std::env::args().skip(1);
    let Some(cmd) = raw.next() else {
        eprint!("{}", usage());
        return ExitCode::from(2);
    };
    let rest: Vec<String> = raw.collect();
    match cmd.as_str() {
        // The modes of the former `bench_consumer` are subcommands of their own: the scripts
        // call `kafka-share-bench produce ...` where they called `bench_consumer produce ...`.
        "produce" | "group" | "consume" | "latency" | "cleanup" => {
            peers::entry(std::iter::once(cmd).chain(rest).collect())
        }
        "process" => process::entry(rest),
        "barrier" => barrier::entry(rest),
        "ceiling" => ceiling::entry(rest),
        "scale" => scale::entry(rest),
        "failover" => failover::entry(rest),
        "sink" => sink::entry(rest),
        "callgrind-poll" => callgrind_poll::entry(rest),
        "help" | "--help" | "-h" => {
            print!("{}", usage());
            return ExitCode::SUCCESS;
        }
        other => {
            eprint!("kafka-share-bench: unknown subcommand {other:?}\n\n{}", usage());
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
