//! Command-line parsing, with the Java `kafka-share-groups.sh` flag names and checks.
//!
//! Hand-written rather than with a parser crate: the Java tool has quirks to keep (an
//! optional value for `--state` with `--list`, repeatable `--group` / `--topic`, both
//! `--flag value` and `--flag=value`), and every mistake must become one clear line.

/// The one action a run performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    List,
    Describe,
    Delete,
    DeleteOffsets,
    ResetOffsets,
    DescribeConfig,
    AlterConfig,
}

/// What `--describe` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DescribeWhat {
    Offsets,
    Members,
    State,
}

/// Where `--reset-offsets` moves offsets to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResetTo {
    Earliest,
    Latest,
    Current,
    Datetime(String),
    Offset(i64),
    ShiftBy(i64),
    /// The offsets of a reset plan file (`--from-file`), as `--export` writes it.
    FromFile(String),
}

impl ResetTo {
    /// The option that asks for it.
    pub fn flag(&self) -> &'static str {
        match self {
            ResetTo::Earliest => "--to-earliest",
            ResetTo::Latest => "--to-latest",
            ResetTo::Current => "--to-current",
            ResetTo::Datetime(_) => "--to-datetime",
            ResetTo::Offset(_) => "--to-offset",
            ResetTo::ShiftBy(_) => "--shift-by",
            ResetTo::FromFile(_) => "--from-file",
        }
    }
}

/// A parsed command line.
#[derive(Debug, Clone, Default)]
pub struct Args {
    pub bootstrap: Option<String>,
    pub command_config: Option<String>,
    pub action: Option<Action>,
    pub groups: Vec<String>,
    pub all_groups: bool,
    pub topics: Vec<String>,
    pub all_topics: bool,
    pub describe: Option<DescribeWhat>,
    /// `--state` given (with `--list`: its optional comma-separated value).
    pub state: Option<Option<String>>,
    pub verbose: bool,
    pub dry_run: bool,
    pub execute: bool,
    /// `--export`: the reset plan as CSV (`reset_plan::export`) instead of a table.
    pub export: bool,
    pub reset_to: Vec<ResetTo>,
    pub set_configs: Vec<(String, String)>,
    pub delete_configs: Vec<String>,
    pub json: bool,
    pub timeout_ms: Option<u64>,
    pub help: bool,
    pub version: bool,
    /// Options given that this action ignores, as Java's tool ignores them: one warning line
    /// each for main to print.
    pub warnings: Vec<String>,
}

// A usage mistake is printed as one line, exit code 2.
use crate::usage::usage;
pub use crate::usage::Usage;

pub const HELP: &str = "kafka-share-groups: list, describe, delete share groups and manage their offsets and configs.

Usage: kafka-share-groups --bootstrap-server HOST:PORT ACTION [OPTIONS]

Actions (exactly one):
  --list [--state [Empty,Stable,Dead]]      list share groups (with states)
  --describe (--group G ... | --all-groups) [--offsets | --members | --state] [--verbose]
  --delete (--group G ... | --all-groups)   delete empty share groups
  --delete-offsets --group G --topic T ...  delete a group's share state for topics
  --reset-offsets --group G (--topic T[:P,P] ... | --all-topics)
      (--to-earliest | --to-latest | --to-current | --to-datetime YYYY-MM-DDTHH:mm:SS.sss
       | --to-offset N | --shift-by N) (--dry-run | --execute) [--export]
  --reset-offsets --group G --from-file FILE (--dry-run | --execute) [--export]
      --export prints the plan as CSV (topic,partition,offset lines, as Java's tool), which
      --from-file reads back (also group,topic,partition,offset lines)
  --describe-config --group G               show the group's configs
  --alter-config --group G [--config k=v[,k=v]] [--delete-config k[,k]]

Other options:
  --command-config FILE   client properties (bootstrap.servers, client.id, request.timeout.ms, ...)
  --output json|text      machine-readable output (default text)
  --timeout MS            request timeout (default 30000)
  --version               print the version and exit
  --help

As Java's tool, the reset options (--dry-run, --execute, --export, --to-*, --shift-by,
--from-file) beside another action, --all-groups with --list and --all-topics with --list or
--describe do nothing; here each says so in a warning on stderr.

Exit codes: 0 success; 1 an operation failed (Java's tool: 0, after an Error: block on
stdout); 2 bad usage, one line on stderr (Java's tool: 1, with its option table); --help
exits 0 (Java's tool: 1).";

/// Parses `argv` (without the program name).
pub fn parse(argv: &[String]) -> Result<Args, Usage> {
    let mut a = Args::default();
    let mut it = argv.iter().peekable();
    let set_action = |a: &mut Args, act: Action, flag: &str| -> Result<(), Usage> {
        if a.action.is_some_and(|x| x != act) {
            return usage(format!("only one action is allowed; {flag} conflicts with an earlier action"));
        }
        a.action = Some(act);
        Ok(())
    };
    while let Some(raw) = it.next() {
        let (flag, inline) = match raw.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
            _ => (raw.clone(), None),
        };
        let mut value = |name: &str| -> Result<String, Usage> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            match it.next() {
                Some(v) if !v.starts_with("--") => Ok(v.clone()),
                _ => usage(format!("{name} needs a value")),
            }
        };
        match flag.as_str() {
            "--bootstrap-server" => a.bootstrap = Some(value("--bootstrap-server")?),
            "--command-config" => a.command_config = Some(value("--command-config")?),
            "--list" => set_action(&mut a, Action::List, "--list")?,
            "--describe" => set_action(&mut a, Action::Describe, "--describe")?,
            "--delete" => set_action(&mut a, Action::Delete, "--delete")?,
            "--delete-offsets" => set_action(&mut a, Action::DeleteOffsets, "--delete-offsets")?,
            "--reset-offsets" => set_action(&mut a, Action::ResetOffsets, "--reset-offsets")?,
            "--describe-config" => set_action(&mut a, Action::DescribeConfig, "--describe-config")?,
            "--alter-config" => set_action(&mut a, Action::AlterConfig, "--alter-config")?,
            "--group" => a.groups.push(value("--group")?),
            "--all-groups" => a.all_groups = true,
            "--topic" => a.topics.push(value("--topic")?),
            "--all-topics" => a.all_topics = true,
            "--members" => set_describe(&mut a, DescribeWhat::Members)?,
            "--offsets" => set_describe(&mut a, DescribeWhat::Offsets)?,
            "--state" => {
                // Optional value: taken only when the next word is not a flag.
                let v = match inline.clone() {
                    Some(v) => Some(v),
                    None => match it.peek() {
                        Some(n) if !n.starts_with("--") => it.next().cloned(),
                        _ => None,
                    },
                };
                a.state = Some(v);
            }
            "--verbose" => a.verbose = true,
            "--dry-run" => a.dry_run = true,
            "--execute" => a.execute = true,
            "--export" => a.export = true,
            "--from-file" => a.reset_to.push(ResetTo::FromFile(value("--from-file")?)),
            "--to-earliest" => a.reset_to.push(ResetTo::Earliest),
            "--to-latest" => a.reset_to.push(ResetTo::Latest),
            "--to-current" => a.reset_to.push(ResetTo::Current),
            "--to-datetime" => a.reset_to.push(ResetTo::Datetime(value("--to-datetime")?)),
            "--to-offset" => a.reset_to.push(ResetTo::Offset(number("--to-offset", &value("--to-offset")?)?)),
            "--shift-by" => {
                // A negative shift looks like a flag to `value`: accept it explicitly.
                let v = match inline.clone() {
                    Some(v) => v,
                    None => it.next().cloned().ok_or_else(|| Usage("--shift-by needs a value".into()))?,
                };
                a.reset_to.push(ResetTo::ShiftBy(number("--shift-by", &v)?));
            }
            "--config" => {
                for kv in value("--config")?.split(',').filter(|s| !s.trim().is_empty()) {
                    let (k, v) =
                        kv.split_once('=').ok_or_else(|| Usage(format!("--config expects key=value, got {kv:?}")))?;
                    a.set_configs.push((k.trim().to_string(), v.trim().to_string()));
                }
            }
            "--delete-config" => {
                let v = value("--delete-config")?;
                a.delete_configs.extend(v.split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()));
            }
            "--output" => match value("--output")?.as_str() {
                "json" => a.json = true,
                "text" => a.json = false,
                other => return usage(format!("--output must be json or text, not {other:?}")),
            },
            "--timeout" => a.timeout_ms = Some(number("--timeout", &value("--timeout")?)?.max(1) as u64),
            "--help" | "-h" => a.help = true,
            "--version" => a.version = true,
            // main adds "(see --help)" to every usage line.
            other => return usage(format!("unknown option {other:?}")),
        }
    }
    // As in Java (CommandLineUtils.maybePrintHelpOrVersion), --help and --version need no
    // action or --bootstrap-server.
    if !a.help && !a.version {
        ignore_what_java_ignores(&mut a);
        check(&a)?;
    }
    Ok(a)
}

/// Java's tool lets these through its checks and does nothing with them: the reset options
/// (`--dry-run`, `--execute`, `--export`, `--to-*`, `--shift-by`, `--from-file`) beside
/// another of its actions, `--all-groups` with `--list`, `--all-topics` with `--list` or
/// `--describe`. A command line written for it runs here too: each is dropped with a warning
/// (Java says nothing). Our own actions (`--describe-config`, `--alter-config`) still refuse them.
fn ignore_what_java_ignores(a: &mut Args) {
    let Some(action) = a.action else { return };
    let name = match action {
        Action::List => "--list",
        Action::Describe => "--describe",
        Action::Delete => "--delete",
        Action::DeleteOffsets => "--delete-offsets",
        Action::ResetOffsets | Action::DescribeConfig | Action::AlterConfig => return,
    };
    let mut ignored: Vec<&str> = Vec::new();
    for (given, flag) in [(&mut a.dry_run, "--dry-run"), (&mut a.execute, "--execute"), (&mut a.export, "--export")] {
        if std::mem::take(given) {
            ignored.push(flag);
        }
    }
    ignored.extend(a.reset_to.drain(..).map(|r| r.flag()));
    if action == Action::List && std::mem::take(&mut a.all_groups) {
        ignored.push("--all-groups");
    }
    if matches!(action, Action::List | Action::Describe) && std::mem::take(&mut a.all_topics) {
        ignored.push("--all-topics");
    }
    ignored.dedup();
    a.warnings
        .extend(ignored.into_iter().map(|f| format!("warning: {f} does nothing with {name}; ignored")));
}

fn set_describe(a: &mut Args, w: DescribeWhat) -> Result<(), Usage> {
    if a.describe.is_some_and(|x| x != w) {
        return usage("--describe takes at most one of --members, --offsets, --state");
    }
    a.describe = Some(w);
    Ok(())
}

fn number(flag: &str, v: &str) -> Result<i64, Usage> {
    v.trim().parse().map_err(|_| Usage(format!("{flag} expects a whole number, got {v:?}")))
}

/// The Java tool's cross-option checks (ShareGroupCommandOptions.checkArgs).
fn check(a: &Args) -> Result<(), Usage> {
    let Some(action) = a.action else {
        return usage("exactly one action is needed: --list, --describe, --delete, --delete-offsets, --reset-offsets, --describe-config or --alter-config");
    };
    if a.bootstrap.is_none() && a.command_config.is_none() {
        return usage("--bootstrap-server is required");
    }
    let groups_given = !a.groups.is_empty() || a.all_groups;
    if a.all_groups && !a.groups.is_empty() {
        return usage("give either --group or --all-groups, not both");
    }
    if a.describe.is_some() && action != Action::Describe {
        return usage("--members and --offsets go with --describe only");
    }
    if a.verbose && action != Action::Describe {
        return usage("--verbose goes with --describe only");
    }
    if a.state.is_some() && !matches!(action, Action::List | Action::Describe) {
        return usage("--state goes with --list or --describe only");
    }
    if action != Action::ResetOffsets && (!a.reset_to.is_empty() || a.dry_run || a.execute || a.all_topics || a.export)
    {
        return usage(
            "--to-*, --shift-by, --from-file, --dry-run, --execute, --export and --all-topics go with --reset-offsets only",
        );
    }
    if a.export && a.json {
        return usage("--export prints CSV; it does not go with --output json");
    }
    if action != Action::AlterConfig && (!a.set_configs.is_empty() || !a.delete_configs.is_empty()) {
        return usage("--config and --delete-config go with --alter-config only");
    }
    if !a.topics.is_empty() && !matches!(action, Action::DeleteOffsets | Action::ResetOffsets) {
        return usage("--topic goes with --delete-offsets or --reset-offsets only");
    }
    let one_group = |what: &str| -> Result<(), Usage> {
        if a.groups.len() != 1 || a.all_groups {
            return usage(format!("{what} takes exactly one --group"));
        }
        Ok(())
    };
    match action {
        Action::List => {
            if groups_given {
                return usage("--list does not take --group or --all-groups");
            }
        }
        Action::Describe => {
            if !groups_given {
                return usage("--describe takes --group G (repeatable) or --all-groups");
            }
            if matches!(a.state, Some(Some(_))) {
                return usage("--describe does not take a value for --state");
            }
            if a.state.is_some() && a.describe.is_some() {
                return usage("--describe takes at most one of --members, --offsets, --state");
            }
        }
        Action::Delete => {
            if !groups_given {
                return usage("--delete takes --group G (repeatable) or --all-groups");
            }
        }
        Action::DeleteOffsets => {
            one_group("--delete-offsets")?;
            if a.topics.is_empty() {
                return usage("--delete-offsets takes --group and --topic");
            }
        }
        Action::ResetOffsets => {
            one_group("--reset-offsets")?;
            if a.dry_run == a.execute {
                return usage("--reset-offsets takes exactly one of --dry-run or --execute");
            }
            if a.reset_to.len() != 1 {
                return usage("--reset-offsets takes exactly one of --to-earliest, --to-latest, --to-current, --to-datetime, --to-offset, --shift-by, --from-file");
            }
            // As in Java, the file names the partitions: it is the scope as well.
            let from_file = matches!(a.reset_to[0], ResetTo::FromFile(_));
            if from_file && (!a.topics.is_empty() || a.all_topics) {
                return usage("--from-file takes the partitions from the file; leave out --topic and --all-topics");
            }
            if !from_file && a.topics.is_empty() != a.all_topics {
                return usage("--reset-offsets takes either --topic T (repeatable), --all-topics or --from-file");
            }
        }
        Action::DescribeConfig => one_group("--describe-config")?,
        Action::AlterConfig => {
            one_group("--alter-config")?;
            if a.set_configs.is_empty() && a.delete_configs.is_empty() {
                return usage("--alter-config takes --config k=v[,k=v] and/or --delete-config k");
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, Usage> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn java_style_flags() {
        let a = p("--bootstrap-server h:1 --list --state Stable,Empty").unwrap();
        assert_eq!(a.state, Some(Some("Stable,Empty".into())));
        let a = p("--bootstrap-server h:1 --describe --group g --state --verbose").unwrap();
        assert_eq!(a.state, Some(None));
        let a = p("--bootstrap-server=h:1 --reset-offsets --group g --topic t:0,1 --shift-by -3 --execute").unwrap();
        assert_eq!(a.reset_to, vec![ResetTo::ShiftBy(-3)]);
        let a = p("--bootstrap-server h:1 --alter-config --group g --config a=1,b=2 --delete-config c").unwrap();
        assert_eq!(a.set_configs.len(), 2);
    }

    #[test]
    fn export_and_from_file() {
        let a = p("--bootstrap-server h:1 --reset-offsets --group g --all-topics --to-earliest --dry-run --export")
            .unwrap();
        assert!(a.export);
        let a = p("--bootstrap-server h:1 --reset-offsets --group g --from-file plan.csv --execute").unwrap();
        assert_eq!(a.reset_to, vec![ResetTo::FromFile("plan.csv".into())]);
        for bad in [
            // The file is the scope: no --topic or --all-topics beside it (as Java).
            "--bootstrap-server h:1 --reset-offsets --group g --from-file f --topic t --execute",
            "--bootstrap-server h:1 --reset-offsets --group g --from-file f --all-topics --execute",
            // One reset specification only.
            "--bootstrap-server h:1 --reset-offsets --group g --from-file f --to-earliest --execute",
            "--bootstrap-server h:1 --reset-offsets --group g --from-file --execute",
            "--bootstrap-server h:1 --reset-offsets --group g --all-topics --to-latest --dry-run --export --output json",
            "--bootstrap-server h:1 --describe-config --group g --export",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn options_java_ignores_are_dropped_with_a_warning() {
        let a = p("--bootstrap-server h:1 --list --all-groups").unwrap();
        assert!(!a.all_groups);
        assert_eq!(a.warnings, ["warning: --all-groups does nothing with --list; ignored"]);
        let a = p("--bootstrap-server h:1 --describe --group g --export --dry-run --to-earliest").unwrap();
        assert!(!a.export && !a.dry_run && a.reset_to.is_empty());
        assert_eq!(a.warnings.len(), 3, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("--dry-run does nothing with --describe"), "{:?}", a.warnings);
        // With --reset-offsets they mean something: no warning.
        let a = p("--bootstrap-server h:1 --reset-offsets --group g --all-topics --to-earliest --dry-run --export")
            .unwrap();
        assert!(a.warnings.is_empty() && a.export && a.dry_run);
        // What Java refuses, we refuse.
        assert!(p("--bootstrap-server h:1 --list --group g").is_err());
        assert!(p("--bootstrap-server h:1 --list --verbose").is_err());
    }

    #[test]
    fn help_and_version_need_nothing_else() {
        assert!(p("--version").unwrap().version);
        assert!(p("--help").unwrap().help);
        // Other mistakes on the line are still caught while parsing.
        assert!(p("--version --bogus").is_err());
    }

    #[test]
    fn mistakes_are_usage_errors() {
        for bad in [
            "--list",
            "--bootstrap-server h:1",
            "--bootstrap-server h:1 --list --describe",
            "--bootstrap-server h:1 --describe",
            "--bootstrap-server h:1 --reset-offsets --group g --topic t --to-earliest",
            "--bootstrap-server h:1 --reset-offsets --group g --to-earliest --execute",
            "--bootstrap-server h:1 --list --bogus",
            "--bootstrap-server h:1 --describe --group g --members --offsets",
            "--bootstrap-server h:1 --output yaml --list",
        ] {
            assert!(p(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn unknown_option_names_it_without_the_help_hint() {
        // The hint is added once, by main, to every usage line.
        let e = p("--bootstrap-server h:1 --list --foo").unwrap_err();
        assert_eq!(e.0, "unknown option \"--foo\"");
    }
}
