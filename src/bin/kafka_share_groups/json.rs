//! `--output json`: one JSON document on stdout per run, snake_case keys, `null` for
//! unknown values (never "-").

use kafka_share::admin::{
    ConfigEntry, PlannedReset, ResetAdjustment, ShareGroupDescription, ShareGroupListing, ShareGroupOffsets,
};
use kafka_share::Error;
use serde_json::{json, Value};

fn err(e: &Error) -> Value {
    json!(e.to_string())
}

pub fn list(groups: &[ShareGroupListing]) -> Value {
    Value::Array(groups.iter().map(|g| json!({"group": g.group_id, "state": g.state.to_string()})).collect())
}

pub fn offsets(o: &ShareGroupOffsets) -> Value {
    let parts: Vec<Value> = o
        .partitions
        .iter()
        .map(|(tp, r)| match r {
            Ok(p) => json!({
                "topic": tp.topic, "partition": tp.partition, "start_offset": p.start_offset,
                "leader_epoch": p.leader_epoch, "lag": p.lag, "error": null,
            }),
            Err(e) => json!({
                "topic": tp.topic, "partition": tp.partition, "start_offset": null,
                "leader_epoch": null, "lag": null, "error": err(e),
            }),
        })
        .collect();
    json!({
        "group": o.group_id,
        "offsets": parts,
        "lag_supported": o.lag_supported,
        "lag_unavailable_reason": o.lag_unavailable_reason(),
    })
}

pub fn description(d: &ShareGroupDescription) -> Value {
    let members: Vec<Value> = d
        .members
        .iter()
        .map(|m| {
            json!({
                "member_id": m.member_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rack_id": m.rack_id,
                "member_epoch": m.member_epoch,
                "subscribed_topic_names": m.subscribed_topic_names,
                "assignment": m.assignment.iter().map(|(t, ps)| json!({"topic": t, "partitions": ps})).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "group": d.group_id,
        "state": d.state.to_string(),
        "coordinator": {"id": d.coordinator.node_id, "host": d.coordinator.host, "port": d.coordinator.port},
        "group_epoch": d.group_epoch,
        "assignment_epoch": d.assignment_epoch,
        "assignor": d.assignor_name,
        "members": members,
    })
}

pub fn reset(group: &str, dry_run: bool, plan: &[PlannedReset]) -> Value {
    let parts: Vec<Value> = plan
        .iter()
        .map(|p| {
            json!({
                "topic": p.tp.topic, "partition": p.tp.partition, "current_offset": p.current,
                "new_offset": p.new, "adjusted": adjusted(p.adjusted),
                "error": match &p.applied { Some(Err(e)) => err(e), _ => Value::Null },
            })
        })
        .collect();
    json!({"group": group, "dry_run": dry_run, "partitions": parts})
}

/// Why the new offset is not the one asked for, as Java's tool warns (`null`: it is).
fn adjusted(a: Option<ResetAdjustment>) -> Value {
    match a {
        None => Value::Null,
        Some(ResetAdjustment::AboveLatest { requested, latest }) => {
            json!({"reason": "above_latest", "requested": requested, "latest": latest})
        }
        Some(ResetAdjustment::BelowEarliest { requested, earliest }) => {
            json!({"reason": "below_earliest", "requested": requested, "earliest": earliest})
        }
        Some(ResetAdjustment::NoRecordAtTimestamp) => json!({"reason": "no_record_at_timestamp"}),
        Some(_) => json!({"reason": "other"}),
    }
}

pub fn results(key: &str, items: &[(String, Result<(), Error>)]) -> Value {
    Value::Array(
        items
            .iter()
            .map(|(name, r)| json!({ key: name, "ok": r.is_ok(), "error": r.as_ref().err().map(err) }))
            .collect(),
    )
}

pub fn configs(group: &str, entries: &[ConfigEntry]) -> Value {
    let e: Vec<Value> = entries
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "value": if c.is_sensitive { None } else { c.value.clone() },
                "source": c.source.label(),
                "read_only": c.read_only,
                "sensitive": c.is_sensitive,
            })
        })
        .collect();
    json!({"group": group, "configs": e})
}
