//! `kafka-share-groups`: the Java `kafka-share-groups.sh` (ShareGroupCommand) in Rust, plus
//! group configs and JSON output. Exit codes: 0 success, 1 an operation failed, 2 bad usage;
//! every failure prints one line on stderr.

mod kafka_share_groups;
#[path = "support/usage.rs"]
mod usage;

use std::collections::BTreeMap;
use std::process::ExitCode;

use kafka_share::admin::{
    parse_datetime, Admin, OffsetResetSpec, PlannedReset, ShareGroupDescription, ShareGroupState, TopicPartition,
    TopicSelection,
};
use kafka_share::config::Properties;
use kafka_share::Error;
use kafka_share_groups::args::{self, Action, Args, DescribeWhat, ResetTo, Usage};
use kafka_share_groups::reset_plan::{self, PlanFileError};
use kafka_share_groups::{errors, json, text};
use serde_json::Value;

const PROG: &str = "kafka-share-groups";

/// Why a run failed: bad usage (exit 2) or a failed operation (exit 1), said on stderr, or
/// said already on stdout where Java's tool says it (a STATUS column, an `Error:` line).
enum Failure {
    Usage(String),
    Op(String),
    Shown,
}

impl From<Error> for Failure {
    fn from(e: Error) -> Self {
        Failure::Op(errors::user_text(&e))
    }
}

impl From<Usage> for Failure {
    fn from(u: Usage) -> Self {
        Failure::Usage(u.0)
    }
}

impl From<PlanFileError> for Failure {
    fn from(e: PlanFileError) -> Self {
        Failure::Op(e.to_string())
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let result = match args::parse(&argv) {
        Ok(a) if a.help => {
            println!("{}", args::HELP);
            return ExitCode::SUCCESS;
        }
        Ok(a) if a.version => {
            println!("{PROG} {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Ok(a) => {
            for w in &a.warnings {
                eprintln!("{PROG}: {w}");
            }
            run(a).await
        }
        Err(u) => Err(u.into()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("{PROG}: {m} (see --help)");
            ExitCode::from(2)
        }
        Err(Failure::Op(m)) => {
            eprintln!("{PROG}: {}", m.replace('\n', " "));
            ExitCode::from(1)
        }
        Err(Failure::Shown) => ExitCode::from(1),
    }
}

async fn connect(a: &Args) -> Result<Admin, Failure> {
    let mut p = match &a.command_config {
        Some(f) => Properties::load(f)?,
        None => Properties::new(),
    };
    // As in the Java tool, --bootstrap-server wins over the file.
    if let Some(b) = &a.bootstrap {
        p.set("bootstrap.servers", b.clone());
    }
    if let Some(t) = a.timeout_ms {
        p.set("request.timeout.ms", t.to_string());
    }
    Ok(Admin::from_properties(&p).await?)
}

fn emit(a: &Args, v: Value, human: String) {
    if a.json {
        println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        print!("{human}");
    }
}

async fn run(a: Args) -> Result<(), Failure> {
    // A reset plan file is read before connecting: a mistake in it needs no broker to show.
    let planned = match (a.reset_to.first(), a.groups.first()) {
        (Some(ResetTo::FromFile(path)), Some(g)) => Some(reset_plan::load(path, g)?),
        _ => None,
    };
    let admin = connect(&a).await?;
    let action = a.action.expect("checked by args::parse");
    match action {
        Action::List => list(&admin, &a).await,
        Action::Describe => describe(&admin, &a).await,
        Action::Delete => delete(&admin, &a).await,
        Action::DeleteOffsets => delete_offsets(&admin, &a).await,
        Action::ResetOffsets => reset(&admin, &a, planned).await,
        Action::DescribeConfig => {
            let g = &a.groups[0];
            let entries = admin.describe_group_configs(g).await?;
            emit(&a, json::configs(g, &entries), text::configs(g, &entries));
            Ok(())
        }
        Action::AlterConfig => {
            let g = &a.groups[0];
            let mut changes: Vec<(&str, Option<&str>)> =
                a.set_configs.iter().map(|(k, v)| (k.as_str(), Some(v.as_str()))).collect();
            changes.extend(a.delete_configs.iter().map(|k| (k.as_str(), None)));
            admin.alter_group_configs(g, &changes).await?;
            emit(
                &a,
                serde_json::json!({"group": g, "altered": true}),
                format!("Completed updating config for group {g}.\n"),
            );
            Ok(())
        }
    }
}

async fn list(admin: &Admin, a: &Args) -> Result<(), Failure> {
    let mut states = Vec::new();
    if let Some(Some(s)) = &a.state {
        for x in s.split(',').map(str::trim).filter(|x| !x.is_empty()) {
            match ShareGroupState::parse(x) {
                ShareGroupState::Unknown(_) => {
                    return Err(Failure::Usage(format!(
                        "invalid state list '{s}'; valid states are Empty, Stable, Dead"
                    )))
                }
                st => states.push(st),
            }
        }
    }
    let groups = admin.list_share_groups_in(&states).await?;
    emit(a, json::list(&groups), text::list(&groups, a.state.is_some()));
    Ok(())
}

async fn group_ids(admin: &Admin, a: &Args) -> Result<Vec<String>, Failure> {
    if a.all_groups {
        Ok(admin.list_share_groups().await?.into_iter().map(|g| g.group_id).collect())
    } else {
        Ok(a.groups.clone())
    }
}

async fn describe(admin: &Admin, a: &Args) -> Result<(), Failure> {
    let what = if a.state.is_some() { DescribeWhat::State } else { a.describe.unwrap_or(DescribeWhat::Offsets) };
    let mut groups = group_ids(admin, a).await?;
    groups.sort();
    let mut docs = Vec::new();
    let mut failed = Vec::new();
    let mut lag_note = None;
    for g in &groups {
        let d: ShareGroupDescription = match admin.describe_share_group(g).await {
            Ok(d) => d,
            Err(e) => {
                failed.push(group_failure(g, &e));
                docs.push(serde_json::json!({"group": g, "error": e.to_string()}));
                continue;
            }
        };
        match what {
            DescribeWhat::Members => {
                match text::members(&d, a.verbose) {
                    Some(t) if !a.json => print!("{t}"),
                    None if !a.json => eprintln!("\nShare group '{g}' has no active members."),
                    _ => {}
                }
                docs.push(json::description(&d));
            }
            DescribeWhat::State => {
                if d.state == ShareGroupState::Empty && !a.json {
                    eprintln!("\nShare group '{g}' has no active members.");
                }
                if !a.json {
                    print!("{}", text::state(&d, a.verbose));
                }
                docs.push(json::description(&d));
            }
            DescribeWhat::Offsets => match admin.list_share_group_offsets(g, None).await {
                Ok(o) => {
                    lag_note = lag_note.or(o.lag_unavailable_reason());
                    if !a.json {
                        print!("{}", text::offsets(&o, a.verbose));
                    }
                    let mut v = json::offsets(&o);
                    v["state"] = Value::String(d.state.to_string());
                    docs.push(v);
                }
                Err(e) => {
                    failed.push(group_failure(g, &e));
                    docs.push(serde_json::json!({"group": g, "error": e.to_string()}));
                }
            },
        }
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&Value::Array(docs)).unwrap_or_default());
    }
    if let Some(n) = lag_note {
        eprintln!("note: {n}");
    }
    match failed.len() {
        0 => Ok(()),
        _ => Err(Failure::Op(failed.join("; "))),
    }
}

/// One group's failure in a multi-group line, naming the group once: the broker's words
/// (`Group g not found.`) and a timeout (`ShareGroupDescribe for group g timed out ..`)
/// already name it.
fn group_failure(g: &str, e: &Error) -> String {
    match e {
        Error::Timeout { .. } => e.to_string(),
        _ if errors::names_group(e, g) => errors::user_text(e),
        _ => format!("group {g}: {}", errors::user_text(e)),
    }
}

async fn delete(admin: &Admin, a: &Args) -> Result<(), Failure> {
    let groups = group_ids(admin, a).await?;
    let refs: Vec<&str> = groups.iter().map(String::as_str).collect();
    let results: Vec<(String, Result<(), Error>)> =
        groups.iter().cloned().zip(admin.delete_share_groups(&refs).await?).collect();
    let ok: Vec<String> = results.iter().filter(|(_, r)| r.is_ok()).map(|(g, _)| format!("'{g}'")).collect();
    let bad: Vec<String> = results.iter().filter_map(|(g, r)| r.as_ref().err().map(|e| group_failure(g, e))).collect();
    let mut human = String::new();
    if bad.is_empty() {
        human.push_str(&format!("Deletion of requested share groups ({}) was successful.\n", ok.join(", ")));
    } else if !ok.is_empty() {
        human.push_str(&format!("These share groups were deleted successfully: {}\n", ok.join(", ")));
    }
    emit(a, json::results("group", &results), human);
    if bad.is_empty() {
        Ok(())
    } else {
        Err(Failure::Op(format!("could not delete: {}", bad.join("; "))))
    }
}

async fn delete_offsets(admin: &Admin, a: &Args) -> Result<(), Failure> {
    let g = &a.groups[0];
    let topics: Vec<&str> = a.topics.iter().map(String::as_str).collect();
    let results = match admin.delete_share_group_offsets(g, &topics).await {
        Ok(r) => r,
        // The whole request failed (an unknown group): as Java, one `Error:` line, then each
        // topic with that error.
        Err(e) if !a.json && e.code().is_some() => {
            let m = errors::user_text(&e);
            let rows: Vec<Vec<String>> = a.topics.iter().map(|t| vec![t.clone(), format!("Error: {m}")]).collect();
            print!("\nError: {m}\n\n{}", text::table(&["TOPIC", "STATUS"], &rows, &[15]));
            return Err(Failure::Shown);
        }
        Err(e) => return Err(e.into()),
    };
    let rows: Vec<Vec<String>> = results
        .iter()
        .map(|(t, r)| {
            let status = match r {
                Ok(()) => "Successful".to_string(),
                Err(e) => format!("Error: {}", errors::user_text(e)),
            };
            vec![t.clone(), status]
        })
        .collect();
    emit(a, json::results("topic", &results), format!("\n{}", text::table(&["TOPIC", "STATUS"], &rows, &[15])));
    if results.iter().all(|(_, r)| r.is_ok()) {
        Ok(())
    } else if a.json {
        // The JSON has each error; say on stderr that some failed, as for the other actions.
        let bad: Vec<String> = results
            .iter()
            .filter_map(|(t, r)| r.as_ref().err().map(|e| format!("topic {t}: {}", errors::user_text(e))))
            .collect();
        Err(Failure::Op(format!("could not delete offsets of {}", bad.join("; "))))
    } else {
        // Each error is in the STATUS column: not again on stderr.
        Err(Failure::Shown)
    }
}

/// `--reset-offsets`; `planned` holds the offsets of `--from-file`, read by `run`.
async fn reset(admin: &Admin, a: &Args, planned: Option<BTreeMap<TopicPartition, i64>>) -> Result<(), Failure> {
    let g = &a.groups[0];
    let plan = match planned {
        Some(offsets) => admin.reset_share_group_offsets_to(g, &offsets, a.execute).await?,
        None => reset_by_spec(admin, a, g).await?,
    };
    if plan.is_empty() && !a.json {
        eprintln!("Share group '{g}' has no offsets to reset.");
    }
    // Java's warnings, where Java prints them: the clamped offsets logged on stderr, the
    // timestamp fallbacks on stdout before the plan (also before --export's CSV).
    for w in text::reset_clamp_warnings(&plan) {
        eprintln!("{w}");
    }
    if !a.json {
        print!("{}", text::reset_fallbacks(&plan));
    }
    if a.export {
        // Java: `System.out.println(exportOffsetsToCsv(..))`, the lines then an empty one.
        println!("{}", reset_plan::export(&plan));
    } else {
        emit(a, json::reset(g, a.dry_run, &plan), if plan.is_empty() { String::new() } else { text::reset(g, &plan) });
    }
    let bad: Vec<String> = plan
        .iter()
        .filter_map(|p| match &p.applied {
            Some(Err(e)) => Some(format!("{}: {}", p.tp, errors::user_text(e))),
            _ => None,
        })
        .collect();
    if bad.is_empty() {
        Ok(())
    } else if a.json || a.export {
        Err(Failure::Op(format!("could not reset {}", bad.join("; "))))
    } else {
        // Each error is in the STATUS column: not again on stderr.
        Err(Failure::Shown)
    }
}

/// The plan for `--to-*` / `--shift-by` over `--topic` / `--all-topics`.
async fn reset_by_spec(admin: &Admin, a: &Args, g: &str) -> Result<Vec<PlannedReset>, Failure> {
    let spec = match &a.reset_to[0] {
        ResetTo::Earliest => OffsetResetSpec::Earliest,
        ResetTo::Latest => OffsetResetSpec::Latest,
        ResetTo::Current => OffsetResetSpec::Current,
        ResetTo::Offset(o) => OffsetResetSpec::Offset(*o),
        ResetTo::ShiftBy(n) => OffsetResetSpec::ShiftBy(*n),
        ResetTo::Datetime(s) => {
            OffsetResetSpec::Timestamp(parse_datetime(s).map_err(|e| Failure::Usage(e.to_string()))?)
        }
        ResetTo::FromFile(_) => {
            return Err(Failure::Op("internal error: the --from-file plan was not read before the reset".into()))
        }
    };
    let scope: Option<Vec<TopicSelection>> = if a.all_topics {
        None
    } else {
        Some(
            a.topics
                .iter()
                .map(|t| TopicSelection::parse(t))
                .collect::<Result<_, _>>()
                .map_err(|e| Failure::Usage(e.to_string()))?,
        )
    };
    Ok(admin.reset_share_group_offsets(g, scope.as_deref(), spec, a.execute).await?)
}
