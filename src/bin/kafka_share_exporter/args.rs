//! The exporter's command line.

use std::time::Duration;

use crate::usage::{usage, Usage};

pub const HELP: &str = "\
usage: kafka-share-exporter (--bootstrap-server HOST:PORT | --command-config FILE) [options]

Serves share-group lag and the age of the oldest unacknowledged record as Prometheus metrics,
and (with --scaler-listen) a KEDA external scaler over gRPC.

  --bootstrap-server HOST:PORT  the cluster (wins over bootstrap.servers in the file)
  --command-config FILE         client properties: bootstrap.servers, security.protocol, sasl.*, ssl.*
  --listen ADDR                 where /metrics is served (default 0.0.0.0:9464; port 0 picks one)
  --scaler-listen ADDR          serve KEDA's external scaler (gRPC) on ADDR, e.g. 0.0.0.0:9465
  --group ID                    export this group (repeatable); default: every share group
  --group-pattern REGEX         export the groups whose whole id matches REGEX
  --refresh-interval SECONDS    time between refreshes (default 15; fractions allowed)
  --max-in-flight N             group coordinators asked at a time (default 8)
  --offsets-in-flight N         offset reads (one group each) in flight per coordinator (default 16)
  --request-timeout SECONDS     longest one refresh step may take (default 30)
";

#[derive(Debug, Default, PartialEq)]
pub struct Args {
    pub bootstrap: Option<String>,
    pub command_config: Option<String>,
    pub listen: String,
    pub scaler_listen: Option<String>,
    pub groups: Vec<String>,
    pub pattern: Option<String>,
    pub refresh_interval: Duration,
    pub max_in_flight: usize,
    pub offsets_in_flight: usize,
    pub request_timeout: Duration,
    pub help: bool,
}

fn seconds(flag: &str, v: &str) -> Result<Duration, Usage> {
    match v.parse::<f64>() {
        Ok(s) if s.is_finite() && s > 0.0 && s < 1e9 => Ok(Duration::from_secs_f64(s)),
        _ => usage(format!("{flag} needs a number of seconds above 0, not {}", shown(v))),
    }
}

fn above_zero(flag: &str, v: &str) -> Result<usize, Usage> {
    match v.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => usage(format!("{flag} needs a whole number above 0, not {}", shown(v))),
    }
}

/// Longest value quoted whole in a message.
const SHOWN: usize = 256;

/// `v` quoted, cut (with its length said) when longer than [`SHOWN`] bytes.
fn shown(v: &str) -> String {
    if v.len() <= SHOWN {
        return format!("{v:?}");
    }
    let mut cut = SHOWN;
    while !v.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{:?}... ({} bytes)", &v[..cut], v.len())
}

pub fn parse(argv: impl IntoIterator<Item = String>) -> Result<Args, Usage> {
    let mut a = Args {
        listen: "0.0.0.0:9464".into(),
        refresh_interval: Duration::from_secs(15),
        max_in_flight: 8,
        offsets_in_flight: 16,
        request_timeout: Duration::from_secs(30),
        ..Args::default()
    };
    let mut it = argv.into_iter();
    while let Some(flag) = it.next() {
        if flag == "--help" || flag == "-h" {
            a.help = true;
            continue;
        }
        let Some(v) = it.next() else {
            return usage(format!("{flag} needs a value (see --help)"));
        };
        match flag.as_str() {
            "--bootstrap-server" => a.bootstrap = Some(v),
            "--command-config" => a.command_config = Some(v),
            "--listen" => a.listen = v,
            "--scaler-listen" => a.scaler_listen = Some(v),
            "--group" => a.groups.push(v),
            "--group-pattern" => a.pattern = Some(v),
            "--refresh-interval" => a.refresh_interval = seconds(&flag, &v)?,
            "--request-timeout" => a.request_timeout = seconds(&flag, &v)?,
            "--max-in-flight" => a.max_in_flight = above_zero(&flag, &v)?,
            "--offsets-in-flight" => a.offsets_in_flight = above_zero(&flag, &v)?,
            _ => return usage(format!("unknown option {} (see --help)", shown(&flag))),
        }
    }
    if a.help {
        return Ok(a);
    }
    if a.bootstrap.is_none() && a.command_config.is_none() {
        return usage("name the cluster: --bootstrap-server HOST:PORT or --command-config FILE with bootstrap.servers");
    }
    if !a.groups.is_empty() && a.pattern.is_some() {
        return usage("--group and --group-pattern exclude each other: put the ids in the pattern (a|b|c)");
    }
    if let Some(p) = &a.pattern {
        if let Err(e) = kafka_share::exporter::GroupFilter::pattern(p) {
            return usage(format!("--group-pattern: {e}"));
        }
    }
    Ok(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Args, Usage> {
        parse(s.split_whitespace().map(String::from))
    }

    #[test]
    fn defaults_and_mistakes() {
        let a = p("--bootstrap-server b:9092").unwrap();
        assert_eq!(
            (a.listen.as_str(), a.refresh_interval, a.max_in_flight, a.offsets_in_flight),
            ("0.0.0.0:9464", Duration::from_secs(15), 8, 16)
        );
        assert!(p("").is_err(), "no cluster");
        assert!(p("--bootstrap-server").is_err(), "no value");
        assert!(p("--bootstrap-server b --refresh-interval 0").is_err());
        assert!(p("--bootstrap-server b --refresh-interval nan").is_err());
        assert!(p("--bootstrap-server b --max-in-flight 0").is_err());
        assert!(p("--bootstrap-server b --offsets-in-flight 0").is_err());
        assert_eq!(p("--bootstrap-server b --offsets-in-flight 32").unwrap().offsets_in_flight, 32);
        assert!(p("--bootstrap-server b --group a --group-pattern x").is_err());
        assert!(p("--bootstrap-server b --wat 1").is_err());
        let a = p("--command-config f --group a --group b --refresh-interval 0.5").unwrap();
        assert_eq!(a.groups, ["a", "b"]);
        assert_eq!(a.refresh_interval, Duration::from_millis(500));
        assert!(p("--help").unwrap().help);
        let e = p("--bootstrap-server b --group-pattern (").unwrap_err();
        assert!(e.0.contains("--group-pattern"), "a bad pattern is bad usage: {}", e.0);
        let huge = format!("--{}", "x".repeat(3_000_000));
        let e = parse(["--bootstrap-server".to_string(), "b".into(), huge, "1".into()]).unwrap_err();
        assert!(e.0.len() < 400 && e.0.contains("3000002 bytes"), "{}", &e.0[..400.min(e.0.len())]);
    }
}
