//! The sink's one decision: what a batch's answer (`put` then `flush`) means for each of its
//! records, under the connector's `errors.tolerance`, `errors.deadletterqueue.*` and
//! `share.max.delivery.count`. Both modes act on it (`batch_handler.rs` on the engine,
//! `task_runner.rs` in implicit mode); this file does no IO, so every case is tested here.
//!
//! The rules (the module doc of `sink` promises them):
//! - `Ok`: every record is ACCEPTed.
//! - `Retriable` (the whole batch): every record is tried again here. In a batch of more than
//!   one it may have been a batch-mate's failure, so it does not count; the caller splits the
//!   batch in halves per retry. A record that failed *alone* `share.max.delivery.count` times
//!   has failed for good.
//! - `RetriableRecords`: the named records count as failed alone (the sink said they were
//!   theirs) and are tried again until that limit; `failed` ones have failed for good; the
//!   rest are ACCEPTed. A record named in both lists has failed for good.
//! - `Records { failed }`: those have failed for good; the rest are ACCEPTed.
//! - `Fatal`: the task stops and the batch goes back to the group.
//!
//! A record that failed for good takes the dead-letter path: a copy to the dead-letter topic
//! then ACCEPT (client mode), REJECT with the broker writing the copy (broker mode), or
//! REJECT. With `errors.tolerance=none` it stops the task instead, at the first such record
//! by batch index: the records the sink answered for as written (those its error does not
//! name) are ACCEPTed, so a restart writes none of them twice, and the rest of the batch,
//! the failed record with it, goes back (RELEASE). A `Retriable` or `Fatal` stop names no
//! record written, and the whole batch goes back. A batch-mate of a failed record is never
//! dead-lettered for it.
//!
//! Indexes outside the batch are ignored ([`stray_indexes`] names them for the log).

use super::config::ErrorTolerance;
use super::task::{RecordFailure, SinkError};

/// Where a record that failed for good goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DeadLetterTo {
    /// No dead-letter queue: REJECT.
    Nowhere,
    /// `errors.deadletterqueue.topic.name` written by the runtime, then ACCEPT.
    Topic,
    /// `errors.deadletterqueue.mode=broker`: REJECT, the broker writes the copy.
    Broker,
}

/// The settings the decision reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Policy {
    pub(crate) tolerance: ErrorTolerance,
    pub(crate) dead_letter: DeadLetterTo,
    /// `share.max.delivery.count`: failures alone before a retriable record has failed for
    /// good (at least 1).
    pub(crate) max_failures: u32,
}

/// What becomes of one record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision<'e> {
    /// The sink has it: ACCEPT.
    Accept,
    /// Failed for a passing reason: try it again here, after a backoff.
    Retry { reason: &'e str },
    /// Failed for good: copy it to the dead-letter topic, then ACCEPT.
    DeadLetter { reason: &'e str },
    /// Failed for good: REJECT, and the broker writes it to the group's dead-letter topic.
    BrokerDeadLetter { reason: &'e str },
    /// Failed for good, no dead-letter queue: REJECT.
    Reject { reason: &'e str },
}

/// What becomes of a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict<'e> {
    /// One decision per record, in the batch's order.
    Records(Vec<Decision<'e>>),
    /// The task stops. `record`: the batch index of the record that caused it, if one did
    /// (the caller names it in `why`'s front). `written[i]`: the sink has record `i` (its
    /// error did not name it), so it is ACCEPTed before the stop; every other record of the
    /// batch (missing ones too) goes back to the group (RELEASE, or the consumer's close).
    Stop { record: Option<usize>, why: String, written: Vec<bool> },
}

/// Decides a batch of `retries.len()` records from `result`; `retries[i]` is how often
/// record `i` failed alone (retriably) before this call.
pub(crate) fn decide<'e>(result: &'e Result<(), SinkError>, retries: &[u32], policy: &Policy) -> Verdict<'e> {
    match decide_each(result, retries, policy) {
        Verdict::Stop { record, why, .. } => Verdict::Stop { record, why, written: written(result, retries.len()) },
        records => records,
    }
}

/// Which records of a batch of `n` the sink has by its answer: those its error does not
/// name. None for a whole-batch error.
fn written(result: &Result<(), SinkError>, n: usize) -> Vec<bool> {
    let named: Vec<&RecordFailure> = match result {
        Ok(()) => return vec![true; n],
        Err(SinkError::Retriable { .. } | SinkError::Fatal { .. }) => return Vec::new(),
        Err(SinkError::Records { failed }) => failed.iter().collect(),
        Err(SinkError::RetriableRecords { retriable, failed }) => retriable.iter().chain(failed).collect(),
    };
    let mut out = vec![true; n];
    for f in named {
        if let Some(w) = out.get_mut(f.index) {
            *w = false;
        }
    }
    out
}

/// `decide` but for what a stop keeps.
fn decide_each<'e>(result: &'e Result<(), SinkError>, retries: &[u32], policy: &Policy) -> Verdict<'e> {
    let n = retries.len();
    let mut out = vec![Decision::Accept; n];
    let err = match result {
        Ok(()) => return Verdict::Records(out),
        Err(e) => e,
    };
    match err {
        SinkError::Retriable { reason } => {
            for (i, &tried) in retries.iter().enumerate() {
                out[i] = match retry_or_give_up(i, n, tried, reason, policy) {
                    Ok(d) => d,
                    Err(stop) => return stop,
                };
            }
        }
        SinkError::RetriableRecords { retriable, failed } => {
            // Failed for good first: with tolerance none they stop the task, whatever the
            // retriable ones would do, and they win over a retriable mention of the same record.
            let mut settled = vec![false; n];
            if let Err(stop) = give_up_all(failed, &mut out, &mut settled, policy) {
                return stop;
            }
            for f in retriable {
                if f.index >= n || settled[f.index] {
                    continue;
                }
                // The sink named it: its own failure, counted as alone.
                match retry_or_give_up(f.index, 1, retries[f.index], &f.reason, policy) {
                    Ok(d) => out[f.index] = d,
                    Err(stop) => return stop,
                }
                settled[f.index] = true;
            }
        }
        SinkError::Records { failed } => {
            let mut settled = vec![false; n];
            if let Err(stop) = give_up_all(failed, &mut out, &mut settled, policy) {
                return stop;
            }
        }
        SinkError::Fatal { .. } => return Verdict::Stop { record: None, why: err.to_string(), written: Vec::new() },
    }
    Verdict::Records(out)
}

/// A retriable failure of record `i` in a batch of `batch`: tried again, unless it has now
/// failed alone `max_failures` times.
fn retry_or_give_up<'e>(
    i: usize,
    batch: usize,
    tried: u32,
    reason: &'e str,
    policy: &Policy,
) -> Result<Decision<'e>, Verdict<'e>> {
    let max = policy.max_failures.max(1);
    if batch > 1 || tried.saturating_add(1) < max {
        return Ok(Decision::Retry { reason });
    }
    give_up(reason, policy).ok_or_else(|| Verdict::Stop {
        written: Vec::new(),
        record: Some(i),
        why: format!(
            "failed {} times on its own (share.max.delivery.count={max}) and errors.tolerance=none: {reason}",
            tried.saturating_add(1)
        ),
    })
}

/// The records of `failed` (the first reason of each, in range, not settled yet) on the
/// dead-letter path; under tolerance none the first of them by batch index stops the task.
fn give_up_all<'e>(
    failed: &'e [RecordFailure],
    out: &mut [Decision<'e>],
    settled: &mut [bool],
    policy: &Policy,
) -> Result<(), Verdict<'e>> {
    let n = out.len();
    let in_range = |f: &&RecordFailure| f.index < n && !settled[f.index];
    if policy.tolerance == ErrorTolerance::None {
        // Stable: the first reason of the earliest record.
        return match failed.iter().filter(in_range).min_by_key(|f| f.index) {
            Some(f) => Err(Verdict::Stop {
                record: Some(f.index),
                // The configuration refuses a dead-letter queue with tolerance none, so all
                // would reject it (or skip it, in implicit mode).
                why: format!(
                    "failed and errors.tolerance=none (errors.tolerance=all would go on without it): {}",
                    f.reason
                ),
                written: Vec::new(),
            }),
            None => Ok(()),
        };
    }
    for f in failed {
        if f.index >= n || settled[f.index] {
            continue;
        }
        if let Some(d) = give_up(&f.reason, policy) {
            out[f.index] = d;
        }
        settled[f.index] = true;
    }
    Ok(())
}

/// A record failed for good: its dead-letter path, or None under tolerance none.
fn give_up<'e>(reason: &'e str, policy: &Policy) -> Option<Decision<'e>> {
    match policy.tolerance {
        ErrorTolerance::None => None,
        ErrorTolerance::All => Some(match policy.dead_letter {
            DeadLetterTo::Topic => Decision::DeadLetter { reason },
            DeadLetterTo::Broker => Decision::BrokerDeadLetter { reason },
            DeadLetterTo::Nowhere => Decision::Reject { reason },
        }),
    }
}

/// The indexes a sink named in its error that are not in a batch of `n` (for the log).
pub(crate) fn stray_indexes(result: &Result<(), SinkError>, n: usize) -> Vec<usize> {
    let named: Vec<&RecordFailure> = match result {
        Ok(()) | Err(SinkError::Retriable { .. } | SinkError::Fatal { .. }) => Vec::new(),
        Err(SinkError::Records { failed }) => failed.iter().collect(),
        Err(SinkError::RetriableRecords { retriable, failed }) => retriable.iter().chain(failed).collect(),
    };
    named.into_iter().map(|f| f.index).filter(|&i| i >= n).collect()
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
