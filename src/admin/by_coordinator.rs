//! Group requests for many groups, by coordinator: one FindCoordinator (v4+) for all the
//! groups, then by default one request per coordinator carrying every group it coordinates
//! (ShareGroupDescribe and DescribeShareGroupOffsets both take a list), as Java's admin
//! batches them: a thousand groups on three brokers cost a handful of requests. A [`Fanout`]
//! may instead send one group per request, a bounded number in flight per coordinator, for
//! an API whose multi-group answer the broker delays (the exporter's offsets).
//!
//! Each group keeps its own result: a group whose coordinator moved (NOT_COORDINATOR,
//! COORDINATOR_NOT_AVAILABLE) or is loading is looked up and asked again, alone with the
//! others in the same case, until the cluster's request timeout; a group the broker refuses
//! (not found, not authorized) fails alone; a coordinator that cannot be reached fails only
//! the groups it coordinates.

use std::collections::{BTreeMap, BTreeSet};

use futures::stream::{self, StreamExt};
use tokio::time::Instant;
use tracing::debug;

use super::coordinator::{deadline_passed, retriable_group_code, CoordinatorResponse};
use super::Admin;
use crate::cluster::TrafficClass;
use crate::error::{Error, ErrorCode, Result};
use crate::protocol::api::ApiRequest;

/// One group's part of a coordinator's answer: its id, its group-level error code (0 when
/// none) and what it reads as.
pub(crate) type GroupPart<T> = (String, i16, Result<T>);

/// How many groups go in one request and how many requests are in flight at a time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fanout {
    /// Coordinators asked at a time.
    pub coordinators: usize,
    /// Groups carried by one request.
    pub groups_per_request: usize,
    /// Requests in flight at a time toward one coordinator.
    pub requests_per_coordinator: usize,
}

impl Fanout {
    /// One request per coordinator carrying all its groups, at most `coordinators` asked at
    /// a time: the fewest requests.
    pub(crate) fn batched(coordinators: usize) -> Fanout {
        Fanout { coordinators, groups_per_request: usize::MAX, requests_per_coordinator: 1 }
    }

    /// One group per request, at most `per_coordinator` in flight toward each of at most
    /// `coordinators` coordinators: for an API whose multi-group answer the broker delays
    /// (DescribeShareGroupOffsets on Kafka 4.4 answers several groups after ~2.5 s, one
    /// group in milliseconds).
    /// The exporter's (a feature); the unit tests use it in every build.
    #[cfg_attr(not(feature = "exporter"), allow(dead_code))]
    pub(crate) fn one_group_each(coordinators: usize, per_coordinator: usize) -> Fanout {
        Fanout { coordinators, groups_per_request: 1, requests_per_coordinator: per_coordinator }
    }
}

/// How a group stands between rounds.
enum Standing<T> {
    /// Answered for good (a value or an error that asking again would not change).
    Done(Result<T>),
    /// To ask again; the last retriable failure, `None` after a plain timeout.
    Retry(Option<String>),
}

impl Admin {
    /// Sends `build(groups)` to each coordinator of `groups` as `fanout` says (by default one
    /// request per coordinator carrying all its groups) and reads each group's part with
    /// `split` as each answer arrives, so no more than the answers in flight are held
    /// undecoded. One result per group, in the order given; a group named twice is asked once.
    pub(crate) async fn call_coordinators<R: ApiRequest, T: Clone>(
        &self,
        groups: &[&str],
        versions: (i16, i16),
        fanout: Fanout,
        build: impl Fn(&[&str]) -> R,
        split: impl Fn(CoordinatorResponse<R::Response>) -> Vec<GroupPart<T>>,
    ) -> Vec<Result<T>> {
        let timeout = self.cluster.config().request_timeout;
        let deadline = Instant::now() + timeout;
        let mut backoff = self.cluster.config().backoff();
        let mut standing: BTreeMap<&str, Standing<T>> = BTreeMap::new();
        for g in groups {
            let s = if g.is_empty() {
                Standing::Done(Err(Error::InvalidArgument("the group id must not be empty".into())))
            } else {
                Standing::Retry(None)
            };
            standing.insert(g, s);
        }
        loop {
            let pending: Vec<&str> =
                standing.iter().filter(|(_, s)| matches!(s, Standing::Retry(_))).map(|(g, _)| *g).collect();
            if pending.is_empty() {
                break;
            }
            let by_node = self.coordinators_of(&pending, &mut standing).await;
            // The futures built in loops, not in a closure over the stream: a closure's
            // borrowed group names defeat the `Send` check of the task that awaits this.
            let mut per_node = Vec::with_capacity(by_node.len());
            for (node, chunks) in plan(by_node, fanout) {
                let mut requests = Vec::with_capacity(chunks.len());
                for chunk in chunks {
                    let req = build(&chunk);
                    requests.push(async move {
                        let r = self.send_to_coordinator(node, &req, versions).await;
                        (chunk, r)
                    });
                }
                per_node.push(stream::iter(requests).buffer_unordered(fanout.requests_per_coordinator.max(1)));
            }
            let mut answers = stream::iter(per_node).flatten_unordered(fanout.coordinators.max(1));
            // Each answer is read as it comes and dropped: a thousand groups' answers are
            // never all held at once.
            while let Some((gs, answer)) = answers.next().await {
                match answer {
                    Ok(r) => read_answer(R::NAME, &gs, r, &split, &mut standing),
                    Err(e) => {
                        let s = retry_or_fail(e);
                        for g in gs {
                            standing.insert(g, s.clone());
                        }
                    }
                }
            }
            let still: Vec<&str> =
                standing.iter().filter(|(_, s)| matches!(s, Standing::Retry(_))).map(|(g, _)| *g).collect();
            if still.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                for g in still {
                    if let Some(Standing::Retry(why)) = standing.remove(g) {
                        standing.insert(g, Standing::Done(Err(deadline_passed(R::NAME, g, why, timeout))));
                    }
                }
                break;
            }
            debug!(api = R::NAME, groups = still.len(), "retrying at the coordinators");
            tokio::time::sleep(backoff.next_delay()).await;
        }
        groups
            .iter()
            .map(|g| match standing.get(g) {
                Some(Standing::Done(r)) => r.clone(),
                // Every group ends Done: the loop leaves only when none is Retry.
                _ => Err(Error::IncompleteResponse { api: R::NAME, missing: format!("group {g}") }),
            })
            .collect()
    }

    /// The pending groups by coordinator, from one FindCoordinator; a group whose lookup
    /// failed is marked to retry or failed in `standing`, and left out.
    async fn coordinators_of<'g, T: Clone>(
        &self,
        pending: &[&'g str],
        standing: &mut BTreeMap<&'g str, Standing<T>>,
    ) -> BTreeMap<i32, Vec<&'g str>> {
        let mut by_node: BTreeMap<i32, Vec<&str>> = BTreeMap::new();
        match self.cluster.find_group_coordinators(pending).await {
            Ok(found) => {
                for (g, r) in pending.iter().zip(found) {
                    match r {
                        Ok(node) => by_node.entry(node).or_default().push(g),
                        Err(e) => {
                            standing.insert(g, retry_or_fail(e));
                        }
                    }
                }
            }
            Err(e) => {
                let s = retry_or_fail(e);
                for g in pending {
                    standing.insert(g, s.clone());
                }
            }
        }
        by_node
    }

    /// `req` to coordinator `node`.
    async fn send_to_coordinator<R: ApiRequest>(
        &self,
        node: i32,
        req: &R,
        versions: (i16, i16),
    ) -> Result<CoordinatorResponse<R::Response>> {
        let conn = self.cluster.broker(node, TrafficClass::Control).await?;
        let version = conn.versions.pick(R::KEY, versions.0, versions.1)?;
        let response = self.cluster.send(&conn, req, versions).await?;
        Ok(CoordinatorResponse { node, version, response, versions: conn.versions.clone() })
    }
}

/// The groups of each request, by coordinator, as `fanout` splits them.
fn plan(by_node: BTreeMap<i32, Vec<&str>>, fanout: Fanout) -> Vec<(i32, Vec<Vec<&str>>)> {
    by_node
        .into_iter()
        .map(|(node, gs)| (node, gs.chunks(fanout.groups_per_request.max(1)).map(<[&str]>::to_vec).collect()))
        .collect()
}

impl<T: Clone> Clone for Standing<T> {
    fn clone(&self) -> Self {
        match self {
            Standing::Done(r) => Standing::Done(r.clone()),
            Standing::Retry(why) => Standing::Retry(why.clone()),
        }
    }
}

/// Each asked group's part of one coordinator's answer into `standing`.
fn read_answer<'g, R, T>(
    api: &'static str,
    asked: &[&'g str],
    r: CoordinatorResponse<R>,
    split: impl Fn(CoordinatorResponse<R>) -> Vec<GroupPart<T>>,
    standing: &mut BTreeMap<&'g str, Standing<T>>,
) {
    let versions = r.versions.clone();
    let asked_set: BTreeSet<&'g str> = asked.iter().copied().collect();
    let mut answered = BTreeSet::new();
    for (g, code, result) in split(r) {
        let Some(g) = asked_set.get(g.as_str()).copied() else { continue };
        answered.insert(g);
        let s = if code == ErrorCode::UNSUPPORTED_VERSION.0 {
            // Share groups switched off (`share.version` 0): name the feature and how to
            // turn it on, as every single-group call does.
            Standing::Done(versions.require_share_groups().and(result))
        } else if retriable_group_code(code).is_some() {
            Standing::Retry(Some(format!("group-level error {code}")))
        } else {
            Standing::Done(result)
        };
        standing.insert(g, s);
    }
    for g in asked.iter().filter(|g| !answered.contains(*g)) {
        let missing = Error::IncompleteResponse { api, missing: format!("group {g}") };
        standing.insert(g, Standing::Done(Err(missing)));
    }
}

/// A failure of a whole request: asked again when it may pass (a lost connection, a
/// timeout, a coordinator moving), final otherwise.
fn retry_or_fail<T>(e: Error) -> Standing<T> {
    match e {
        // A request that timed out adds nothing to the deadline's own "timed out".
        Error::Timeout { .. } => Standing::Retry(None),
        e if e.is_retriable() => Standing::Retry(Some(e.to_string())),
        e => Standing::Done(Err(e)),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::sync::Arc;

    use super::{plan, read_answer, retry_or_fail, Fanout, Standing};
    use crate::admin::coordinator::CoordinatorResponse;
    use crate::cluster::ApiVersions;
    use crate::error::{Context, Error, ErrorCode};

    /// A coordinator's answer naming each group with its group-level code.
    fn answer(parts: &[(&str, ErrorCode)], share_version: i16) -> CoordinatorResponse<Vec<(String, i16)>> {
        CoordinatorResponse {
            node: 1,
            version: 1,
            response: parts.iter().map(|(g, c)| (g.to_string(), c.0)).collect(),
            versions: Arc::new(ApiVersions::from_ranges(1, &[], &[("share.version", share_version)])),
        }
    }

    fn split(r: CoordinatorResponse<Vec<(String, i16)>>) -> Vec<super::GroupPart<u32>> {
        r.response
            .into_iter()
            .map(|(g, code)| {
                let res = match Error::from_code(code, None, Context::api("Test")) {
                    Some(e) => Err(e),
                    None => Ok(7),
                };
                (g, code, res)
            })
            .collect()
    }

    fn kind(s: Option<&Standing<u32>>) -> String {
        match s {
            Some(Standing::Done(Ok(v))) => format!("ok {v}"),
            Some(Standing::Done(Err(e))) => format!("err {}", e.code().map_or("none".into(), |c| c.name())),
            Some(Standing::Retry(_)) => "retry".into(),
            None => "absent".into(),
        }
    }

    #[test]
    fn each_group_keeps_its_own_answer() {
        let asked = ["a", "b", "c", "d", "e"];
        let mut standing = BTreeMap::new();
        let r = answer(
            &[
                ("a", ErrorCode(0)),
                ("b", ErrorCode::NOT_COORDINATOR),
                ("c", ErrorCode::GROUP_AUTHORIZATION_FAILED),
                ("d", ErrorCode::COORDINATOR_LOAD_IN_PROGRESS),
                ("not-asked", ErrorCode(0)),
            ],
            1,
        );
        read_answer("Test", &asked, r, split, &mut standing);
        assert_eq!(kind(standing.get("a")), "ok 7");
        assert_eq!(kind(standing.get("b")), "retry", "its coordinator moved: looked up again");
        assert_eq!(kind(standing.get("c")), "err GROUP_AUTHORIZATION_FAILED");
        assert_eq!(kind(standing.get("d")), "retry", "loading: asked again after a backoff");
        assert!(
            matches!(standing.get("e"), Some(Standing::Done(Err(Error::IncompleteResponse { .. })))),
            "a group the answer left out is an incomplete answer"
        );
        assert!(!standing.contains_key("not-asked"), "only asked groups are read");
    }

    #[test]
    fn share_groups_switched_off_say_how_to_turn_them_on() {
        let mut standing = BTreeMap::new();
        read_answer("Test", &["a"], answer(&[("a", ErrorCode::UNSUPPORTED_VERSION)], 0), split, &mut standing);
        let Some(Standing::Done(Err(e))) = standing.get("a") else { panic!("{}", kind(standing.get("a"))) };
        assert!(e.to_string().contains("share.version"), "{e}");
    }

    #[test]
    fn batched_is_one_request_per_coordinator_and_one_group_each_one_per_group() {
        let by_node = || BTreeMap::from([(1, vec!["a", "b", "c"]), (2, vec!["d"])]);
        assert_eq!(plan(by_node(), Fanout::batched(8)), vec![(1, vec![vec!["a", "b", "c"]]), (2, vec![vec!["d"]])]);
        assert_eq!(
            plan(by_node(), Fanout::one_group_each(8, 16)),
            vec![(1, vec![vec!["a"], vec!["b"], vec!["c"]]), (2, vec![vec!["d"]])]
        );
        let zero = Fanout { coordinators: 0, groups_per_request: 0, requests_per_coordinator: 0 };
        assert_eq!(plan(by_node(), zero).len(), 2, "a zero bound still sends every group, one each");
    }

    #[test]
    fn a_whole_request_is_retried_only_when_it_may_pass() {
        let timeout = Error::Timeout { what: "x".into(), after: std::time::Duration::from_secs(1) };
        assert!(matches!(retry_or_fail::<u32>(timeout), Standing::Retry(None)));
        let closed = Error::ConnectionClosed { addr: "b:1".into(), cause: None };
        assert!(matches!(retry_or_fail::<u32>(closed), Standing::Retry(Some(_))));
        let refused = Error::InvalidArgument("bad".into());
        assert!(matches!(retry_or_fail::<u32>(refused), Standing::Done(Err(_))));
    }
}
