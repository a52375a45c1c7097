//! Scripted faults: "the next ShareFetch on node 1 answers error 122", "drop the connection
//! after the next request that carries acks", ...
//!
//! A [`Rule`] matches requests (by node, API, and whether they carry acknowledgements) and
//! fires its [`Action`] a number of times. Every matching rule fires (and uses up one of its
//! times); the first terminal action (error, drop, garbage, truncation) decides the answer.

use std::time::Duration;

/// What the fake broker does instead of (or on top of) answering normally.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Answer with this top-level error code (ShareFetch, ShareAcknowledge, heartbeat). For
    /// SHARE_SESSION_NOT_FOUND / INVALID_SHARE_SESSION_EPOCH the broker also forgets the share
    /// session and releases its records, as a real broker that lost the session would.
    TopLevelError(i16),
    /// ShareFetch: this partition answers `code`, naming `leader` as CurrentLeader (with its
    /// endpoint in NodeEndpoints); no records for it.
    PartitionError {
        /// Partition index.
        partition: i32,
        /// Error code.
        code: i16,
        /// CurrentLeader to report (None: -1, unknown).
        leader: Option<i32>,
    },
    /// The acknowledgements for `partition` in this request fail with `code` and are not
    /// applied.
    AckError {
        /// Partition index.
        partition: i32,
        /// Error code.
        code: i16,
    },
    /// Close the connection without answering.
    DropConnection,
    /// Answer with the right correlation id followed by 0xff bytes (length prefixes that
    /// claim far more than follows).
    Garbage,
    /// Answer with the right correlation id followed by a body too short for its first field.
    ShortBody,
    /// Send a frame that promises more bytes than follow, then close the connection.
    Truncated,
    /// Wait this long, then answer normally.
    Delay(Duration),
}

impl Action {
    /// Whether this action decides the whole answer.
    pub(crate) fn is_terminal(&self) -> bool {
        matches!(
            self,
            Action::TopLevelError(_) | Action::DropConnection | Action::Garbage | Action::ShortBody | Action::Truncated
        )
    }
}

/// A scripted fault and the requests it applies to. Make one with [`Rule::on`] or
/// [`Rule::any`] and narrow it with the builder methods; add it with
/// [`FakeCluster::script`](super::FakeCluster::script).
///
/// ```
/// use std::time::Duration;
/// use kafka_share::test_util::{code, Action, Rule, SHARE_FETCH};
///
/// // The next ShareFetch is answered SHARE_SESSION_NOT_FOUND (the session is forgotten).
/// let lost = Rule::on(SHARE_FETCH, Action::TopLevelError(code::SHARE_SESSION_NOT_FOUND));
/// // Every request carrying acknowledgements for partition 0 waits 2 s, three times.
/// let slow = Rule::any(Action::Delay(Duration::from_secs(2))).acks_for(0).times(3);
/// # let _ = (lost, slow);
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Rule {
    /// Only requests to this node (None: any).
    pub node: Option<i32>,
    /// Only this API key (None: any).
    pub api: Option<i16>,
    /// Only requests that carry acknowledgements.
    pub with_acks: bool,
    /// Only requests that carry acknowledgements for this partition.
    pub acks_for: Option<i32>,
    /// How many more times it fires (None: forever).
    pub times: Option<u32>,
    /// How many matching requests it lets pass before it starts firing.
    pub skip: u32,
    /// What it does.
    pub action: Action,
}

impl Rule {
    /// A rule for API `api` (e.g. [`SHARE_FETCH`](super::SHARE_FETCH)), firing once.
    pub fn on(api: i16, action: Action) -> Rule {
        Rule { node: None, api: Some(api), with_acks: false, acks_for: None, times: Some(1), skip: 0, action }
    }

    /// A rule for any API, firing once (combine with [`with_acks`](Self::with_acks)).
    pub fn any(action: Action) -> Rule {
        Rule { api: None, ..Rule::on(0, action) }
    }

    /// Only on node `node`.
    pub fn node(mut self, node: i32) -> Rule {
        self.node = Some(node);
        self
    }

    /// Only for requests carrying acknowledgements.
    pub fn with_acks(mut self) -> Rule {
        self.with_acks = true;
        self
    }

    /// Only for requests carrying acknowledgements for `partition`.
    pub fn acks_for(mut self, partition: i32) -> Rule {
        self.with_acks = true;
        self.acks_for = Some(partition);
        self
    }

    /// Lets the first `n` matching requests pass (so rules can take turns: one for the
    /// first attempt, another for the retry).
    pub fn after(mut self, n: u32) -> Rule {
        self.skip = n;
        self
    }

    /// Fires `n` times.
    pub fn times(mut self, n: u32) -> Rule {
        self.times = Some(n);
        self
    }

    /// Fires on every matching request until the script is cleared.
    pub fn always(mut self) -> Rule {
        self.times = None;
        self
    }

    pub(crate) fn matches(&self, node: i32, api: i16, ack_partitions: &[i32]) -> bool {
        self.times != Some(0)
            && self.node.is_none_or(|n| n == node)
            && self.api.is_none_or(|a| a == api)
            && (!self.with_acks || !ack_partitions.is_empty())
            && self.acks_for.is_none_or(|p| ack_partitions.contains(&p))
    }
}

/// The actions that fired for one request.
#[derive(Debug, Clone, Default)]
pub(super) struct Effects {
    /// The first terminal action, if any.
    pub terminal: Option<Action>,
    /// Total scripted delay.
    pub delay: Duration,
    /// Scripted partition errors: (partition, code, leader).
    pub partition_errors: Vec<(i32, i16, Option<i32>)>,
    /// Scripted ack errors: (partition, code).
    pub ack_errors: Vec<(i32, i16)>,
}

impl Effects {
    /// Fires every matching rule in `rules` (using up one of its times) and gathers the effects.
    pub(super) fn fire(rules: &mut [Rule], node: i32, api: i16, ack_partitions: &[i32]) -> Effects {
        let mut fx = Effects::default();
        for r in rules.iter_mut() {
            if !r.matches(node, api, ack_partitions) {
                continue;
            }
            if r.skip > 0 {
                r.skip -= 1;
                continue;
            }
            if let Some(t) = &mut r.times {
                *t -= 1;
            }
            match &r.action {
                a if a.is_terminal() => {
                    fx.terminal.get_or_insert_with(|| a.clone());
                }
                Action::Delay(d) => fx.delay += *d,
                Action::PartitionError { partition, code, leader } => {
                    fx.partition_errors.push((*partition, *code, *leader))
                }
                Action::AckError { partition, code } => fx.ack_errors.push((*partition, *code)),
                _ => {}
            }
        }
        fx
    }

    /// The scripted ack error for `partition`, if any.
    pub(super) fn ack_error(&self, partition: i32) -> Option<i16> {
        self.ack_errors.iter().find(|(p, _)| *p == partition).map(|(_, c)| *c)
    }

    /// The scripted fetch error for `partition`, if any.
    pub(super) fn partition_error(&self, partition: i32) -> Option<(i16, Option<i32>)> {
        self.partition_errors.iter().find(|(p, _, _)| *p == partition).map(|(_, c, l)| (*c, *l))
    }
}
