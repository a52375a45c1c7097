//! What the fake broker received, in arrival order, for assertions.

use std::collections::HashMap;
use std::time::Instant;

use crate::consumer::AcknowledgeType;
use crate::protocol::share::{AcknowledgementBatch, ShareAcknowledgeRequest, ShareFetchRequest};

/// One decoded request (or a connection event).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum Req {
    /// ApiVersions.
    ApiVersions,
    /// Metadata, with the topic names it asks for (None: all topics).
    Metadata(Option<Vec<String>>),
    /// FindCoordinator.
    FindCoordinator,
    /// ListGroups.
    ListGroups,
    /// ShareGroupHeartbeat.
    Heartbeat {
        /// MemberId.
        member: String,
        /// MemberEpoch.
        epoch: i32,
    },
    /// ShareFetch.
    Fetch(ShareFetchRequest),
    /// ShareAcknowledge.
    Ack(ShareAcknowledgeRequest),
    /// The client's connection closed (or the broker dropped it).
    ConnClosed,
}

/// The most offsets [`Logged::acks`] expands one acknowledgement batch into.
const MAX_EXPANDED: usize = 1 << 20;

/// One acknowledged offset as it appeared on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AckedOffset {
    /// Partition index.
    pub partition: i32,
    /// Offset.
    pub offset: i64,
    /// Wire type: 0 Gap, 1 Accept, 2 Release, 3 Reject, 4 Renew (see
    /// [`ack_type`](Self::ack_type)).
    pub kind: i8,
}

impl AckedOffset {
    /// The acknowledgement type; None for a gap (0: the client found no record at the offset)
    /// or a type no client should send.
    pub fn ack_type(&self) -> Option<AcknowledgeType> {
        [AcknowledgeType::Accept, AcknowledgeType::Release, AcknowledgeType::Reject, AcknowledgeType::Renew]
            .into_iter()
            .find(|t| t.wire() == self.kind)
    }

    /// Whether the client acknowledged the offset as a gap (it holds no record).
    pub fn is_gap(&self) -> bool {
        self.kind == 0
    }
}

/// A request as received.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Logged {
    /// Arrival order over the whole fake cluster.
    pub seq: usize,
    /// Arrival time.
    pub at: Instant,
    /// The node that received it.
    pub node: i32,
    /// The connection it came on (unique over the fake cluster).
    pub conn: u64,
    /// The API version.
    pub version: i16,
    /// The request.
    pub req: Req,
}

impl Logged {
    /// Whether this is a ShareFetch.
    pub fn is_fetch(&self) -> bool {
        matches!(self.req, Req::Fetch(_))
    }

    /// Whether this is a ShareAcknowledge.
    pub fn is_ack(&self) -> bool {
        matches!(self.req, Req::Ack(_))
    }

    /// Whether this is a ShareFetch or a ShareAcknowledge.
    pub fn is_share(&self) -> bool {
        self.is_fetch() || self.is_ack()
    }

    /// Whether this is a heartbeat with epoch -1.
    pub fn is_leave(&self) -> bool {
        matches!(self.req, Req::Heartbeat { epoch: -1, .. })
    }

    /// The member id of a share request or heartbeat.
    pub fn member(&self) -> Option<&str> {
        match &self.req {
            Req::Fetch(r) => Some(&r.member_id),
            Req::Ack(r) => Some(&r.member_id),
            Req::Heartbeat { member, .. } => Some(member),
            _ => None,
        }
    }

    /// The share session epoch (or member epoch of a heartbeat).
    pub fn epoch(&self) -> Option<i32> {
        match &self.req {
            Req::Fetch(r) => Some(r.share_session_epoch),
            Req::Ack(r) => Some(r.share_session_epoch),
            Req::Heartbeat { epoch, .. } => Some(*epoch),
            _ => None,
        }
    }

    /// Every acknowledged offset in the request, expanded (a batch up to its first
    /// 1,048,576 offsets: no client acknowledges more at once, and a wild range must not
    /// exhaust memory).
    pub fn acks(&self) -> Vec<AckedOffset> {
        let mut out = Vec::new();
        let mut add = |partition: i32, batches: &[AcknowledgementBatch]| {
            for b in batches {
                for (i, offset) in (b.first_offset..=b.last_offset).take(MAX_EXPANDED).enumerate() {
                    let kind = if b.acknowledge_types.len() == 1 {
                        b.acknowledge_types[0]
                    } else {
                        b.acknowledge_types.get(i).copied().unwrap_or(-1)
                    };
                    out.push(AckedOffset { partition, offset, kind });
                }
            }
        };
        match &self.req {
            Req::Fetch(r) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| add(p.partition_index, &p.acknowledgement_batches)),
            Req::Ack(r) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .for_each(|p| add(p.partition_index, &p.acknowledgement_batches)),
            _ => {}
        }
        out
    }

    /// The partitions carrying acknowledgements (ascending).
    pub fn ack_partitions(&self) -> Vec<i32> {
        let acked = |p: i32, batches: &[AcknowledgementBatch]| {
            batches.iter().any(|b| b.first_offset <= b.last_offset).then_some(p)
        };
        let mut p: Vec<i32> = match &self.req {
            Req::Fetch(r) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| acked(p.partition_index, &p.acknowledgement_batches))
                .collect(),
            Req::Ack(r) => r
                .topics
                .iter()
                .flat_map(|t| &t.partitions)
                .filter_map(|p| acked(p.partition_index, &p.acknowledgement_batches))
                .collect(),
            _ => Vec::new(),
        };
        p.sort_unstable();
        p.dedup();
        p
    }

    /// ShareFetch: the partitions listed in Topics.
    pub fn listed(&self) -> Vec<i32> {
        match &self.req {
            Req::Fetch(r) => r.topics.iter().flat_map(|t| &t.partitions).map(|p| p.partition_index).collect(),
            _ => Vec::new(),
        }
    }

    /// ShareFetch: the partitions in ForgottenTopicsData.
    pub fn forgotten(&self) -> Vec<i32> {
        match &self.req {
            Req::Fetch(r) => r.forgotten_topics_data.iter().flat_map(|t| t.partitions.iter().copied()).collect(),
            _ => Vec::new(),
        }
    }

    /// A one-line summary for failure messages.
    pub fn summary(&self) -> String {
        let what = match &self.req {
            Req::Fetch(_) => "ShareFetch",
            Req::Ack(_) => "ShareAck",
            Req::Heartbeat { .. } => "Heartbeat",
            Req::ApiVersions => "ApiVersions",
            Req::Metadata(_) => "Metadata",
            Req::FindCoordinator => "FindCoordinator",
            Req::ListGroups => "ListGroups",
            Req::ConnClosed => "ConnClosed",
        };
        let mut s = format!("#{} node {} conn {} {what}", self.seq, self.node, self.conn);
        if let Some(e) = self.epoch() {
            s += &format!(" epoch {e}");
        }
        let acks = self.acks();
        if !acks.is_empty() {
            let a: Vec<String> = acks.iter().map(|a| format!("{}:{}={}", a.partition, a.offset, a.kind)).collect();
            s += &format!(" acks [{}]", a.join(" "));
        }
        if self.is_fetch() {
            s += &format!(" listed {:?} forgotten {:?}", self.listed(), self.forgotten());
        }
        s
    }
}

/// Checks the epoch sequence of every share session in `log` (by node and member): a session
/// opens with a ShareFetch at epoch 0, each later request carries the previous epoch + 1, a
/// reopen is epoch 0, a close is -1 and is followed by nothing but a reopen. Acks never ride on
/// an epoch-0 request. Returns one message per problem.
pub(crate) fn check_epochs(log: &[Logged]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut last: HashMap<(i32, String), i32> = HashMap::new();
    for l in log.iter().filter(|l| l.is_share()) {
        let key = (l.node, l.member().unwrap_or_default().to_string());
        let e = l.epoch().unwrap_or(i32::MIN);
        let prev = last.get(&key).copied();
        let ok = match (prev, e) {
            (_, 0) => l.is_fetch(),
            (None, _) | (Some(-1), _) => false,
            (Some(_), -1) => true,
            (Some(p), e) => e == if p == i32::MAX { 1 } else { p + 1 },
        };
        if !ok {
            problems.push(format!("epoch {e} after {prev:?}: {}", l.summary()));
        }
        if e == 0 && !l.acks().is_empty() {
            problems.push(format!("acks on an epoch-0 request: {}", l.summary()));
        }
        last.insert(key, e);
    }
    problems
}
