//! Resetting share-group start offsets: to earliest, latest, a timestamp, an explicit offset,
//! shifted from the current start offsets, or to per-partition offsets from a reset plan, with
//! a dry run that only plans.
//!
//! Follows the Java `GroupOffsetsResetter`: explicit, shifted and planned offsets are clamped
//! to the log's [earliest, latest] range; a timestamp after the last record falls back to
//! latest.

use std::collections::{BTreeMap, BTreeSet};

use super::groups::{non_empty, ShareGroupState};
use super::list_offsets::OffsetSpec;
use super::offsets::TopicPartition;
use super::Admin;
use crate::error::{Error, ErrorCode, Result};

/// Where to move the start offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OffsetResetSpec {
    /// The log start offset.
    Earliest,
    /// The log end offset (only records produced from now on).
    Latest,
    /// The first offset with a timestamp at or after this (ms since the epoch).
    Timestamp(i64),
    /// This offset (clamped to the log range).
    Offset(i64),
    /// The current start offset plus this (may be negative; clamped to the log range).
    ShiftBy(i64),
    /// The current start offset (a no-op, useful with a dry run).
    Current,
}

/// A topic, with some or all of its partitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicSelection {
    /// Topic name.
    pub topic: String,
    /// Partitions; `None` for all.
    pub partitions: Option<Vec<i32>>,
}

impl TopicSelection {
    /// Parses the tool's `topic` or `topic:0,1,2` form.
    pub fn parse(s: &str) -> Result<Self> {
        match s.split_once(':') {
            None if !s.is_empty() => Ok(TopicSelection { topic: s.to_string(), partitions: None }),
            Some((t, ps)) if !t.is_empty() => {
                let partitions = ps
                    .split(',')
                    .map(|p| p.trim().parse::<i32>().ok().filter(|p| *p >= 0))
                    .collect::<Option<Vec<_>>>()
                    .ok_or_else(|| Error::InvalidArgument(format!("invalid partitions in {s:?}; use topic:0,1,2")))?;
                Ok(TopicSelection { topic: t.to_string(), partitions: Some(partitions) })
            }
            _ => Err(Error::InvalidArgument(format!("invalid topic {s:?}; use topic or topic:0,1,2"))),
        }
    }
}

/// One partition of a reset plan.
#[derive(Debug, Clone)]
pub struct PlannedReset {
    /// The partition.
    pub tp: TopicPartition,
    /// Its start offset before the reset (`None`: no share state yet).
    pub current: Option<i64>,
    /// The start offset it gets.
    pub new: i64,
    /// `None` for a dry run; otherwise the broker's answer for this partition.
    pub applied: Option<Result<()>>,
    /// Why `new` is not the offset asked for (`None`: it is). Java's tool warns about each.
    pub adjusted: Option<ResetAdjustment>,
}

/// Why a planned start offset differs from the one asked for: the cases Java's
/// `GroupOffsetsResetter` warns about, so a tool can say what it did instead of clamping
/// silently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ResetAdjustment {
    /// The offset asked for is past the log end: the log end offset is used.
    AboveLatest {
        /// The offset asked for.
        requested: i64,
        /// The log end offset, used instead.
        latest: i64,
    },
    /// The offset asked for is before the log start: the log start offset is used.
    BelowEarliest {
        /// The offset asked for.
        requested: i64,
        /// The log start offset, used instead.
        earliest: i64,
    },
    /// No record has a timestamp at or after the one asked for: the log end offset is used.
    NoRecordAtTimestamp,
}

/// Planned offsets, with the partitions whose offset is not the one asked for.
type Planned = (BTreeMap<TopicPartition, i64>, BTreeMap<TopicPartition, ResetAdjustment>);

impl Admin {
    /// Plans (and with `execute`, applies) a reset of `group`'s start offsets. `scope` None
    /// means every partition the group has state for. Refused, even as a dry run, when the
    /// group has members (the plan would be stale by the time it ran).
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn reset_share_group_offsets(
        &self,
        group: &str,
        scope: Option<&[TopicSelection]>,
        spec: OffsetResetSpec,
        execute: bool,
    ) -> Result<Vec<PlannedReset>> {
        let (current, known) = self.inactive_group_offsets(group).await?;
        let tps: BTreeSet<TopicPartition> = match scope {
            None => known,
            Some(sel) => self.expand(sel).await?,
        };
        if tps.is_empty() {
            return Ok(Vec::new());
        }
        let tps: Vec<TopicPartition> = tps.into_iter().collect();
        let planned: Planned = match spec {
            OffsetResetSpec::Earliest => (self.offsets_at(&tps, OffsetSpec::Earliest).await?, BTreeMap::new()),
            OffsetResetSpec::Latest => (self.offsets_at(&tps, OffsetSpec::Latest).await?, BTreeMap::new()),
            OffsetResetSpec::Timestamp(ts) => {
                let mut at = self.offsets_at(&tps, OffsetSpec::Timestamp(ts)).await?;
                let missing: Vec<TopicPartition> =
                    at.iter().filter(|(_, o)| **o < 0).map(|(tp, _)| tp.clone()).collect();
                if !missing.is_empty() {
                    at.extend(self.offsets_at(&missing, OffsetSpec::Latest).await?);
                }
                let adjusted = missing.into_iter().map(|tp| (tp, ResetAdjustment::NoRecordAtTimestamp)).collect();
                (at, adjusted)
            }
            OffsetResetSpec::Offset(o) => self.clamp(tps.iter().map(|tp| (tp.clone(), o)).collect()).await?,
            OffsetResetSpec::ShiftBy(n) => {
                let starts = relative_starts(group, &current, &tps)?;
                self.clamp(starts.into_iter().map(|(tp, cur)| (tp, cur.saturating_add(n))).collect()).await?
            }
            OffsetResetSpec::Current => (relative_starts(group, &current, &tps)?, BTreeMap::new()),
        };
        self.plan_and_apply(group, &current, planned, execute).await
    }

    /// Plans (and with `execute`, applies) a reset of `group`'s start offsets to the given
    /// offsets: a reset plan, such as `kafka-share-groups --reset-offsets --from-file` reads.
    /// Every partition must exist; each offset is clamped to its log's [earliest, latest]
    /// range, as Java's `GroupOffsetsResetter.resetFromFile` does. Refused, like
    /// [`Admin::reset_share_group_offsets`], when the group has members.
    ///
    /// # Cancel safety
    /// Dropping the future stops the wait, not a request already sent: the broker may still
    /// apply it. Nothing is left half-done on this side.
    pub async fn reset_share_group_offsets_to(
        &self,
        group: &str,
        offsets: &BTreeMap<TopicPartition, i64>,
        execute: bool,
    ) -> Result<Vec<PlannedReset>> {
        let (current, _) = self.inactive_group_offsets(group).await?;
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
        for tp in offsets.keys() {
            by_topic.entry(&tp.topic).or_default().push(tp.partition);
        }
        let sel: Vec<TopicSelection> = by_topic
            .into_iter()
            .map(|(t, ps)| TopicSelection { topic: t.to_string(), partitions: Some(ps) })
            .collect();
        // Checks that each partition exists, so a stale plan fails with its name.
        self.expand(&sel).await?;
        let planned = self.clamp(offsets.clone()).await?;
        self.plan_and_apply(group, &current, planned, execute).await
    }

    /// The group's current start offsets and every partition it has state for, after checking
    /// that it has no members (the plan would be stale by the time it ran).
    async fn inactive_group_offsets(
        &self,
        group: &str,
    ) -> Result<(BTreeMap<TopicPartition, i64>, BTreeSet<TopicPartition>)> {
        match self.describe_share_group(group).await {
            Ok(d) if matches!(d.state, ShareGroupState::Empty | ShareGroupState::Dead) => {}
            Ok(_) => return Err(non_empty(group)),
            // A group that does not exist yet can get offsets before its first consumer.
            Err(e) if e.code() == Some(ErrorCode::GROUP_ID_NOT_FOUND) => {}
            Err(e) => return Err(e),
        }
        match self.list_share_group_offsets(group, None).await {
            // Partitions without a start offset yet are listed too, and reset with the rest.
            Ok(o) => Ok((o.start_offsets(), o.partitions.into_iter().map(|(tp, _)| tp).collect())),
            Err(e) if e.code() == Some(ErrorCode::GROUP_ID_NOT_FOUND) => Ok((BTreeMap::new(), BTreeSet::new())),
            Err(e) => Err(e),
        }
    }

    /// The plan for the partitions of `new`; with `execute`, applied, each with its result.
    async fn plan_and_apply(
        &self,
        group: &str,
        current: &BTreeMap<TopicPartition, i64>,
        (new, mut adjusted): Planned,
        execute: bool,
    ) -> Result<Vec<PlannedReset>> {
        let mut plan: Vec<PlannedReset> = new
            .into_iter()
            .map(|(tp, new)| PlannedReset {
                current: current.get(&tp).copied(),
                adjusted: adjusted.remove(&tp),
                tp,
                new,
                applied: None,
            })
            .collect();
        if execute {
            let offsets: BTreeMap<TopicPartition, i64> = plan.iter().map(|p| (p.tp.clone(), p.new)).collect();
            let results: BTreeMap<TopicPartition, Result<()>> =
                self.alter_share_group_offsets(group, &offsets).await?.into_iter().collect();
            for p in &mut plan {
                p.applied = Some(results.get(&p.tp).cloned().unwrap_or_else(|| {
                    Err(Error::IncompleteResponse { api: "AlterShareGroupOffsets", missing: p.tp.to_string() })
                }));
            }
        }
        Ok(plan)
    }

    async fn expand(&self, sel: &[TopicSelection]) -> Result<BTreeSet<TopicPartition>> {
        let names: Vec<String> = sel.iter().map(|s| s.topic.clone()).collect();
        self.cluster.ensure_topics(&names).await?;
        let mut out = BTreeSet::new();
        for s in sel {
            let all: Vec<i32> = self.cluster.with_metadata(|m| {
                m.topics
                    .get(&s.topic)
                    .map(|t| t.partitions.iter().map(|p| p.partition).collect())
                    .unwrap_or_default()
            });
            match &s.partitions {
                None => out.extend(all.into_iter().map(|p| TopicPartition::new(&s.topic, p))),
                Some(ps) => {
                    for p in ps {
                        if !all.contains(p) {
                            return Err(Error::InvalidArgument(format!("topic {} has no partition {p}", s.topic)));
                        }
                        out.insert(TopicPartition::new(&s.topic, *p));
                    }
                }
            }
        }
        Ok(out)
    }

    /// Clamps wanted offsets to each log's [earliest, latest], noting each one moved.
    async fn clamp(&self, wanted: BTreeMap<TopicPartition, i64>) -> Result<Planned> {
        let tps: Vec<TopicPartition> = wanted.keys().cloned().collect();
        let lo = self.offsets_at(&tps, OffsetSpec::Earliest).await?;
        let hi = self.offsets_at(&tps, OffsetSpec::Latest).await?;
        let mut out = BTreeMap::new();
        let mut adjusted = BTreeMap::new();
        for (tp, o) in wanted {
            let earliest = lo.get(&tp).copied().unwrap_or(0);
            let latest = hi.get(&tp).copied().unwrap_or(earliest).max(earliest);
            let (new, why) = clamp_one(o, earliest, latest);
            if let Some(why) = why {
                adjusted.insert(tp.clone(), why);
            }
            out.insert(tp, new);
        }
        Ok((out, adjusted))
    }
}

/// Parses the tool's `--to-datetime` value, `YYYY-MM-DDTHH:mm:SS[.sss]` with an optional
/// zone (`Z`, `+hh:mm`, `-hhmm`); without a zone it is UTC, as in Java's `Utils.getDateTime`.
/// Returns ms since the epoch.
pub fn parse_datetime(s: &str) -> Result<i64> {
    let bad = || {
        Error::InvalidArgument(format!(
            "invalid datetime {s:?}; use YYYY-MM-DDTHH:mm:SS.sss, optionally with Z or +hh:mm"
        ))
    };
    let (date, time) = s.split_once('T').ok_or_else(bad)?;
    let (time, offset_min) = match time.find(['Z', 'z', '+', '-']) {
        None => (time, 0),
        Some(i) => {
            let (t, z) = time.split_at(i);
            let off = if z.eq_ignore_ascii_case("z") {
                0
            } else {
                let sign = if z.starts_with('-') { -1 } else { 1 };
                let digits: String = z[1..].chars().filter(|c| *c != ':').collect();
                if digits.len() != 4 {
                    return Err(bad());
                }
                let h: i64 = digits[..2].parse().map_err(|_| bad())?;
                let m: i64 = digits[2..].parse().map_err(|_| bad())?;
                sign * (h * 60 + m)
            };
            (t, off)
        }
    };
    let num = |x: &str| x.parse::<i64>().map_err(|_| bad());
    let d: Vec<&str> = date.split('-').collect();
    let (sec_part, millis) = match time.split_once('.') {
        Some((a, f)) if !f.is_empty() && f.len() <= 3 && f.chars().all(|c| c.is_ascii_digit()) => {
            (a, num(&format!("{f:0<3}"))?)
        }
        Some(_) => return Err(bad()),
        None => (time, 0),
    };
    let t: Vec<&str> = sec_part.split(':').collect();
    if d.len() != 3 || d[0].len() != 4 || t.len() != 3 {
        return Err(bad());
    }
    let (y, mo, da, h, mi, se) = (num(d[0])?, num(d[1])?, num(d[2])?, num(t[0])?, num(t[1])?, num(t[2])?);
    let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = [31, if leap { 29 } else { 28 }, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&mo)
        || da < 1
        || da > days_in[(mo - 1) as usize]
        || h > 23
        || mi > 59
        || se > 59
        || h < 0
        || mi < 0
        || se < 0
    {
        return Err(bad());
    }
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Ok(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + se * 1000 + millis)
}

/// The current start offset of each of `tps`, for a reset relative to it; every partition
/// without one is named in one error.
fn relative_starts(
    group: &str,
    current: &BTreeMap<TopicPartition, i64>,
    tps: &[TopicPartition],
) -> Result<BTreeMap<TopicPartition, i64>> {
    let missing: Vec<TopicPartition> = tps.iter().filter(|tp| !current.contains_key(*tp)).cloned().collect();
    if !missing.is_empty() {
        return Err(Error::NoStartOffset { group: group.to_string(), partitions: missing });
    }
    Ok(tps.iter().filter_map(|tp| current.get(tp).map(|c| (tp.clone(), *c))).collect())
}

/// `wanted` within [`earliest`, `latest`], and why it moved if it did. Above the end is
/// checked first, as Java's `checkOffsetsRange` does.
fn clamp_one(wanted: i64, earliest: i64, latest: i64) -> (i64, Option<ResetAdjustment>) {
    if wanted > latest {
        (latest, Some(ResetAdjustment::AboveLatest { requested: wanted, latest }))
    } else if wanted < earliest {
        (earliest, Some(ResetAdjustment::BelowEarliest { requested: wanted, earliest }))
    } else {
        (wanted, None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_resets_name_every_partition_without_a_start() {
        let tp = |p| TopicPartition::new("ta", p);
        let current = BTreeMap::from([(tp(0), 4)]);
        assert_eq!(relative_starts("g", &current, &[tp(0)]).unwrap(), current);
        let e = relative_starts("g", &current, &[tp(0), tp(1), tp(2)]).unwrap_err();
        assert!(
            matches!(&e, Error::NoStartOffset { group, partitions } if group == "g" && *partitions == [tp(1), tp(2)])
        );
        let text = e.to_string();
        assert!(text.contains("share group g has no start offset yet for ta-1, ta-2"), "{text}");
        assert!(!text.contains("invalid argument"), "{text}");
    }

    #[test]
    fn clamping_says_why() {
        assert_eq!(clamp_one(5, 2, 10), (5, None));
        assert_eq!(clamp_one(10, 2, 10), (10, None));
        assert_eq!(clamp_one(100, 2, 10), (10, Some(ResetAdjustment::AboveLatest { requested: 100, latest: 10 })));
        assert_eq!(clamp_one(-3, 2, 10), (2, Some(ResetAdjustment::BelowEarliest { requested: -3, earliest: 2 })));
        // An empty log: start and end are one offset.
        assert_eq!(clamp_one(1, 0, 0), (0, Some(ResetAdjustment::AboveLatest { requested: 1, latest: 0 })));
    }

    #[test]
    fn datetimes() {
        assert_eq!(parse_datetime("1970-01-01T00:00:00.000").unwrap(), 0);
        assert_eq!(parse_datetime("2024-02-29T12:34:56.789Z").unwrap(), 1_709_210_096_789);
        assert_eq!(parse_datetime("2024-02-29T14:34:56.789+02:00").unwrap(), 1_709_210_096_789);
        assert_eq!(parse_datetime("2024-02-29T10:34:56.7-0200").unwrap(), 1_709_210_096_700);
        assert_eq!(parse_datetime("2024-02-29T12:34:56").unwrap(), 1_709_210_096_000);
        for bad in ["2023-02-29T00:00:00", "2024-01-01", "2024-01-01T25:00:00", "x", "2024-01-01T00:00:00.1234"] {
            assert!(parse_datetime(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn topic_selection() {
        assert_eq!(TopicSelection::parse("t").unwrap(), TopicSelection { topic: "t".into(), partitions: None });
        assert_eq!(TopicSelection::parse("t:0,2").unwrap().partitions, Some(vec![0, 2]));
        assert!(TopicSelection::parse("t:a").is_err());
        assert!(TopicSelection::parse(":1").is_err());
    }
}
