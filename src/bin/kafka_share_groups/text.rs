//! Human output: left-aligned columns at least 15 wide, as the Java tool prints them.

use kafka_share::admin::{
    ConfigEntry, PlannedReset, ResetAdjustment, ShareGroupDescription, ShareGroupListing, ShareGroupOffsets,
    ShareGroupState,
};

/// Prints rows as left-aligned columns; each width is max(min, longest cell). The last
/// column is not padded.
pub fn table(header: &[&str], rows: &[Vec<String>], min: &[usize]) -> String {
    let mut widths: Vec<usize> =
        header.iter().enumerate().map(|(i, h)| h.len().max(min.get(i).copied().unwrap_or(0))).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            widths[i] = widths[i].max(c.len());
        }
    }
    let line = |cells: Vec<&str>| {
        let n = cells.len();
        let mut s = String::new();
        for (i, c) in cells.into_iter().enumerate() {
            if i + 1 == n {
                s.push_str(c);
            } else {
                s.push_str(&format!("{c:<w$} ", w = widths[i]));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header.to_vec());
    for r in rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out
}

fn dash<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

pub fn list(groups: &[ShareGroupListing], with_state: bool) -> String {
    if !with_state {
        return groups.iter().map(|g| format!("{}\n", g.group_id)).collect();
    }
    let rows: Vec<Vec<String>> = groups.iter().map(|g| vec![g.group_id.clone(), g.state.to_string()]).collect();
    table(&["GROUP", "STATE"], &rows, &[15])
}

pub fn offsets(o: &ShareGroupOffsets, verbose: bool) -> String {
    if o.partitions.is_empty() {
        return format!("\nShare group '{}' has no offset information.\n", o.group_id);
    }
    let rows: Vec<Vec<String>> = o
        .partitions
        .iter()
        .map(|(tp, r)| {
            let (start, epoch, lag) = match r {
                Ok(p) => (dash(p.start_offset), dash(p.leader_epoch), dash(p.lag)),
                Err(_) => ("-".into(), "-".into(), "-".into()),
            };
            let mut row = vec![o.group_id.clone(), tp.topic.clone(), tp.partition.to_string()];
            if verbose {
                row.push(epoch);
            }
            row.extend([start, lag]);
            row
        })
        .collect();
    let t = if verbose {
        table(&["GROUP", "TOPIC", "PARTITION", "LEADER-EPOCH", "START-OFFSET", "LAG"], &rows, &[15, 15, 10, 13, 13])
    } else {
        table(&["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"], &rows, &[15, 15, 10, 13])
    };
    format!("\n{t}")
}

fn assignment_string(a: &[(String, Vec<i32>)]) -> String {
    a.iter()
        .map(|(t, ps)| format!("{t}:{}", ps.iter().map(i32::to_string).collect::<Vec<_>>().join(",")))
        .collect::<Vec<_>>()
        .join(";")
}

/// Members table, or `None` when the group has none (the caller says so on stderr, as Java).
pub fn members(d: &ShareGroupDescription, verbose: bool) -> Option<String> {
    if d.members.is_empty() || d.state == ShareGroupState::Dead {
        return None;
    }
    let rows: Vec<Vec<String>> = d
        .members
        .iter()
        .map(|m| {
            let mut row = vec![
                d.group_id.clone(),
                m.member_id.clone(),
                m.client_host.clone(),
                m.client_id.clone(),
                m.partition_count().to_string(),
            ];
            if verbose {
                row.push(m.member_epoch.to_string());
            }
            row.push(assignment_string(&m.assignment));
            row
        })
        .collect();
    let t = if verbose {
        table(
            &["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "MEMBER-EPOCH", "ASSIGNMENT"],
            &rows,
            &[15, 15, 15, 15, 12, 13],
        )
    } else {
        table(&["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"], &rows, &[15, 15, 15, 15, 12])
    };
    Some(format!("\n{t}"))
}

pub fn state(d: &ShareGroupDescription, verbose: bool) -> String {
    let c = &d.coordinator;
    let coord = format!("{}:{}  ({})", c.host, c.port, c.node_id);
    let t = if verbose {
        table(
            &["GROUP", "COORDINATOR (ID)", "STATE", "GROUP-EPOCH", "ASSIGNMENT-EPOCH", "#MEMBERS"],
            &[vec![
                d.group_id.clone(),
                coord,
                d.state.to_string(),
                d.group_epoch.to_string(),
                d.assignment_epoch.to_string(),
                d.members.len().to_string(),
            ]],
            &[15, 25, 15, 12, 17],
        )
    } else {
        table(
            &["GROUP", "COORDINATOR (ID)", "STATE", "#MEMBERS"],
            &[vec![d.group_id.clone(), coord, d.state.to_string(), d.members.len().to_string()]],
            &[15, 25, 15],
        )
    };
    format!("\n{t}")
}

/// The reset plan with Java's columns (GROUP TOPIC PARTITION NEW-OFFSET); a STATUS column,
/// which Java does not have, only when a partition failed to apply. The current offset is
/// in `--output json`.
pub fn reset(group: &str, plan: &[PlannedReset]) -> String {
    let rows: Vec<Vec<String>> = plan
        .iter()
        .map(|p| {
            let mut row = vec![group.to_string(), p.tp.topic.clone(), p.tp.partition.to_string(), p.new.to_string()];
            if let Some(Err(e)) = &p.applied {
                row.push(format!("Error: {}", crate::kafka_share_groups::errors::user_text(e)));
            }
            row
        })
        .collect();
    let failed = plan.iter().any(|p| matches!(p.applied, Some(Err(_))));
    let mut header = vec!["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"];
    if failed {
        header.push("STATUS");
    }
    format!("\n{}", table(&header, &rows, &[15, 15, 10, 11]))
}

/// What Java's tool prints on stdout before the plan (table or CSV): one block per partition
/// whose timestamp matched no record (`getLogTimestampOffsets`).
pub fn reset_fallbacks(plan: &[PlannedReset]) -> String {
    plan.iter()
        .filter(|p| p.adjusted == Some(ResetAdjustment::NoRecordAtTimestamp))
        .map(|p| {
            format!(
                "\nWarn: Partition {} from topic {} is empty. Falling back to latest known offset.\n",
                p.tp.partition, p.tp.topic
            )
        })
        .collect()
}

/// What Java's tool logs at WARN (on stderr) for each offset moved into the log's range
/// (`checkOffsetsRange`), without the log line's time stamp and logger name.
pub fn reset_clamp_warnings(plan: &[PlannedReset]) -> Vec<String> {
    plan.iter()
        .filter_map(|p| {
            let (requested, edge, set) = match p.adjusted? {
                ResetAdjustment::AboveLatest { requested, latest } => (requested, "higher than latest", latest),
                ResetAdjustment::BelowEarliest { requested, earliest } => (requested, "lower than earliest", earliest),
                _ => return None,
            };
            Some(format!(
                "WARN New offset ({requested}) is {edge} offset for topic partition {}. Value will be set to {set}.",
                p.tp
            ))
        })
        .collect()
}

pub fn configs(group: &str, entries: &[ConfigEntry]) -> String {
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            let v = if e.is_sensitive { "(sensitive)".to_string() } else { dash(e.value.clone()) };
            vec![e.name.clone(), v, e.source.label()]
        })
        .collect();
    format!("Configs for group {group}:\n{}", table(&["KEY", "VALUE", "SOURCE"], &rows, &[40, 15]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_grow() {
        let t = table(
            &["GROUP", "STATE"],
            &[vec!["a-very-long-group-name".into(), "Stable".into()], vec!["g".into(), "Empty".into()]],
            &[15],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "GROUP                  STATE");
        assert_eq!(lines[1], "a-very-long-group-name Stable");
        assert_eq!(lines[2], "g                      Empty");
    }
}
