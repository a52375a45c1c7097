//! ShareFetch (key 78) as both fake brokers answer it: the rules that do not depend on how a
//! broker holds its state (the simulation's `sim/share.rs`, the public fake's
//! `test_util/share.rs`), so the two cannot disagree on them: how many records a fetch may
//! acquire, the blank partition entry an error or an ack result goes into, and the answer's
//! topic list.

use std::collections::BTreeMap;

use crate::protocol::share::{
    FetchPartitionResponse, FetchTopicResponse, LeaderIdAndEpoch, ShareFetchRequest, ACQUIRE_MODE_RECORD_LIMIT,
};

/// What a broker acquires for a batch_optimized fetch that names no `MaxRecords`.
const DEFAULT_MAX_RECORDS: usize = 500;

/// How many records `r` may acquire, across its partitions. A renewing fetch acquires none;
/// record_limit acquires exactly `MaxRecords` at most; batch_optimized takes `MaxRecords`
/// (500 when none) but at least `whole_batch` (a real broker hands out whole batches: the
/// public fake's `min_fetch_records`; 0 for none).
pub(crate) fn fetch_budget(r: &ShareFetchRequest, whole_batch: usize) -> usize {
    let asked = usize::try_from(r.max_records).unwrap_or(0);
    if r.is_renew_ack {
        return 0;
    }
    if r.share_acquire_mode == ACQUIRE_MODE_RECORD_LIMIT {
        return asked;
    }
    let asked = if asked == 0 { DEFAULT_MAX_RECORDS } else { asked };
    asked.max(whole_batch)
}

/// "No leader known", as a partition's `CurrentLeader` says it.
pub(crate) fn no_leader() -> LeaderIdAndEpoch {
    LeaderIdAndEpoch { leader_id: -1, leader_epoch: -1 }
}

/// Partition `p`'s entry in an answer, before anything is written into it.
pub(crate) fn blank(p: i32) -> FetchPartitionResponse {
    FetchPartitionResponse { partition_index: p, current_leader: no_leader(), ..Default::default() }
}

/// The answer's topics: the one topic both fakes serve, with its partitions in order, or
/// none when no partition has anything to say.
pub(crate) fn topic_responses(
    topic_id: uuid::Uuid,
    parts: BTreeMap<i32, FetchPartitionResponse>,
) -> Vec<FetchTopicResponse> {
    if parts.is_empty() {
        return Vec::new();
    }
    vec![FetchTopicResponse { topic_id, partitions: parts.into_values().collect() }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::share::ACQUIRE_MODE_BATCH_OPTIMIZED;

    fn fetch(max_records: i32, mode: i8, renew: bool) -> ShareFetchRequest {
        ShareFetchRequest { max_records, share_acquire_mode: mode, is_renew_ack: renew, ..Default::default() }
    }

    #[test]
    fn record_limit_is_exact_and_batch_optimized_takes_whole_batches() {
        assert_eq!(fetch_budget(&fetch(3, ACQUIRE_MODE_RECORD_LIMIT, false), 10), 3, "record_limit: exactly");
        assert_eq!(fetch_budget(&fetch(0, ACQUIRE_MODE_RECORD_LIMIT, false), 0), 0);
        assert_eq!(fetch_budget(&fetch(3, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 10), 10, "a whole batch");
        assert_eq!(fetch_budget(&fetch(0, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 0), DEFAULT_MAX_RECORDS);
        assert_eq!(fetch_budget(&fetch(-5, ACQUIRE_MODE_BATCH_OPTIMIZED, false), 0), DEFAULT_MAX_RECORDS);
        assert_eq!(
            fetch_budget(&fetch(0, ACQUIRE_MODE_BATCH_OPTIMIZED, true), 10),
            0,
            "a renewing fetch acquires nothing"
        );
    }

    #[test]
    fn an_answer_with_nothing_to_say_lists_no_topic() {
        let id = uuid::Uuid::from_u128(7);
        assert!(topic_responses(id, BTreeMap::new()).is_empty());
        let parts = BTreeMap::from([(2, blank(2)), (0, blank(0))]);
        let topics = topic_responses(id, parts);
        let order: Vec<i32> = topics[0].partitions.iter().map(|p| p.partition_index).collect();
        assert_eq!((topics.len(), order), (1, vec![0, 2]));
        assert_eq!(topics[0].partitions[0].current_leader, no_leader());
    }
}
