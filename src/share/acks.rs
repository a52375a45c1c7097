//! Acknowledgement types and the batches they travel in.
//!
//! Acks are gathered per partition as `offset -> type`, then sent as
//! `AcknowledgementBatches`: ascending, non-overlapping ranges of contiguous offsets, each with
//! either one type for the whole range (when every offset has the same type) or one type per
//! offset. That is the form the broker validates (KafkaApis.validateAcknowledgementBatches)
//! and the one the Java client builds.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use crate::error::Error;
use crate::protocol::share::AcknowledgementBatch;

/// What to do with a delivered record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AcknowledgeType {
    /// Processed: never deliver it again.
    Accept,
    /// Not processed: make it available for redelivery (the delivery count goes up).
    Release,
    /// Unprocessable: never deliver it again (archived, or dead-lettered on 4.4 with a DLQ).
    Reject,
    /// Still working on it: extend the acquisition lock (brokers with ShareAcknowledge v2,
    /// Kafka 4.2+). The record stays held and must still be acknowledged later.
    Renew,
}

impl AcknowledgeType {
    /// The wire value (1 Accept, 2 Release, 3 Reject, 4 Renew).
    pub fn wire(self) -> i8 {
        match self {
            AcknowledgeType::Accept => 1,
            AcknowledgeType::Release => 2,
            AcknowledgeType::Reject => 3,
            AcknowledgeType::Renew => 4,
        }
    }

    /// Whether this type ends the consumer's hold on the record.
    pub fn is_final(self) -> bool {
        self != AcknowledgeType::Renew
    }
}

impl fmt::Display for AcknowledgeType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            AcknowledgeType::Accept => "ACCEPT",
            AcknowledgeType::Release => "RELEASE",
            AcknowledgeType::Reject => "REJECT",
            AcknowledgeType::Renew => "RENEW",
        })
    }
}

impl FromStr for AcknowledgeType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.to_ascii_uppercase().as_str() {
            "ACCEPT" => Ok(AcknowledgeType::Accept),
            "RELEASE" => Ok(AcknowledgeType::Release),
            "REJECT" => Ok(AcknowledgeType::Reject),
            "RENEW" => Ok(AcknowledgeType::Renew),
            _ => Err(Error::InvalidArgument(format!(
                "{s:?} is not an acknowledge type: use ACCEPT, RELEASE, REJECT or RENEW"
            ))),
        }
    }
}

/// Wire value of a Gap acknowledgement: an acquired offset with no record (compacted away or
/// an aborted transaction's). Sent by the client itself, never by the user.
pub const GAP: i8 = 0;

/// Acks for one partition, waiting to be sent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionAcks {
    by_offset: BTreeMap<i64, i8>,
}

impl PartitionAcks {
    /// Records (or overwrites) the ack of one offset with a wire type.
    pub fn add(&mut self, offset: i64, wire_type: i8) {
        self.by_offset.insert(offset, wire_type);
    }

    /// Records an inclusive range of offsets with one type.
    pub fn add_range(&mut self, first: i64, last: i64, wire_type: i8) {
        for o in first..=last {
            self.by_offset.insert(o, wire_type);
        }
    }

    /// Whether nothing is pending.
    pub fn is_empty(&self) -> bool {
        self.by_offset.is_empty()
    }

    /// Number of offsets.
    pub fn len(&self) -> usize {
        self.by_offset.len()
    }

    /// Whether any pending ack is a Renew.
    pub fn has_renew(&self) -> bool {
        self.by_offset.values().any(|&t| t == AcknowledgeType::Renew.wire())
    }

    /// Takes out the acks of one kind: renews (`true`) or everything else (`false`). Renews
    /// travel in requests of their own (IsRenewAck), so they are split off before sending.
    pub fn split_renew(&mut self, renew: bool) -> PartitionAcks {
        let r = AcknowledgeType::Renew.wire();
        let (taken, kept): (BTreeMap<_, _>, BTreeMap<_, _>) =
            std::mem::take(&mut self.by_offset).into_iter().partition(|&(_, t)| (t == r) == renew);
        self.by_offset = kept;
        PartitionAcks { by_offset: taken }
    }

    /// The offsets and types, ascending.
    pub fn iter(&self) -> impl Iterator<Item = (i64, i8)> + '_ {
        self.by_offset.iter().map(|(&o, &t)| (o, t))
    }

    /// Builds wire batches: contiguous offsets merged; a run of one type collapses to one
    /// element; a mixed run carries one type per offset.
    pub fn to_batches(&self) -> Vec<AcknowledgementBatch> {
        let mut out: Vec<AcknowledgementBatch> = Vec::new();
        let mut cur: Option<(i64, i64, Vec<i8>)> = None;
        for (&offset, &t) in &self.by_offset {
            match &mut cur {
                Some((_, last, types)) if *last + 1 == offset => {
                    *last = offset;
                    types.push(t);
                }
                _ => {
                    if let Some(done) = cur.take() {
                        out.push(finish(done));
                    }
                    cur = Some((offset, offset, vec![t]));
                }
            }
        }
        if let Some(done) = cur {
            out.push(finish(done));
        }
        out
    }
}

fn finish((first, last, mut types): (i64, i64, Vec<i8>)) -> AcknowledgementBatch {
    if types.iter().all(|&t| t == types[0]) {
        types.truncate(1);
    }
    AcknowledgementBatch { first_offset: first, last_offset: last, acknowledge_types: types }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn merges_contiguous_and_collapses_runs() {
        let mut a = PartitionAcks::default();
        for o in [5, 3, 4, 10, 11] {
            a.add(o, 1);
        }
        a.add(12, 2);
        let b = a.to_batches();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].first_offset, b[0].last_offset, b[0].acknowledge_types.clone()), (3, 5, vec![1]));
        assert_eq!((b[1].first_offset, b[1].last_offset, b[1].acknowledge_types.clone()), (10, 12, vec![1, 1, 2]));
    }

    #[test]
    fn renews_split_off() {
        let mut a = PartitionAcks::default();
        a.add(1, 1);
        a.add(2, 4);
        a.add(3, 4);
        let r = a.split_renew(true);
        assert_eq!(r.iter().collect::<Vec<_>>(), vec![(2, 4), (3, 4)]);
        assert_eq!(a.iter().collect::<Vec<_>>(), vec![(1, 1)]);
        assert!(!a.has_renew());
    }

    #[test]
    fn parses_java_names() {
        assert_eq!("accept".parse::<AcknowledgeType>().unwrap(), AcknowledgeType::Accept);
        assert!("ok".parse::<AcknowledgeType>().unwrap_err().to_string().contains("ACCEPT"));
    }

    proptest! {
        /// Whatever order acks arrive in, the batches are valid for the broker and carry
        /// exactly the acks given (last write wins per offset).
        #[test]
        fn batches_are_valid_and_lossless(acks in proptest::collection::vec((0i64..300, 0i8..5), 0..400)) {
            let mut a = PartitionAcks::default();
            let mut expect = BTreeMap::new();
            for &(o, t) in &acks {
                a.add(o, t);
                expect.insert(o, t);
            }
            let batches = a.to_batches();
            let mut got = BTreeMap::new();
            let mut prev_last = i64::MIN;
            for b in &batches {
                prop_assert!(b.first_offset <= b.last_offset);
                prop_assert!(b.first_offset > prev_last.saturating_add(1) || prev_last == i64::MIN,
                    "batches must be ascending, non-overlapping and maximal");
                let n = (b.last_offset - b.first_offset + 1) as usize;
                prop_assert!(b.acknowledge_types.len() == 1 || b.acknowledge_types.len() == n);
                if b.acknowledge_types.len() == n && n > 1 {
                    prop_assert!(b.acknowledge_types.iter().any(|&t| t != b.acknowledge_types[0]));
                }
                for (i, o) in (b.first_offset..=b.last_offset).enumerate() {
                    let t = if b.acknowledge_types.len() == 1 { b.acknowledge_types[0] } else { b.acknowledge_types[i] };
                    got.insert(o, t);
                }
                prev_last = b.last_offset;
            }
            prop_assert_eq!(got, expect);
        }
    }
}
