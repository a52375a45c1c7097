//! The two exposition formats a scraper may ask for, and how one is chosen from its `Accept`
//! header the way Prometheus' own client libraries choose (client_golang's
//! `expfmt.NegotiateIncludingOpenMetrics`): the Prometheus text format 0.0.4 unless the
//! scraper prefers OpenMetrics 1.0.0.
//!
//! `prometheus-client` writes OpenMetrics only; the text format is rewritten from it line by
//! line ([`to_text`]). Where the two differ:
//! - a counter's family is named without `_total` in OpenMetrics (`# TYPE foo counter`,
//!   samples `foo_total`) and with it in the text format (`# TYPE foo_total counter`): a
//!   text-format reader takes `foo_total` for another family, untyped and without HELP;
//! - an info family `foo` (samples `foo_info`) is a gauge `foo_info`, `unknown` is `untyped`;
//! - `# UNIT` and `# EOF` do not exist in the text format, nor do `_created` samples and
//!   exemplars; a sample's timestamp is in milliseconds there, in seconds in OpenMetrics;
//! - HELP escapes `\` and line feeds in both, and `"` too in OpenMetrics
//!   (`prometheus-client` writes HELP as given: both formats get it escaped here).

/// An exposition format of the `/metrics` endpoint ([`super::serve`]), as chosen from a
/// scraper's `Accept` header by [`Format::negotiate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Format {
    /// The Prometheus text format 0.0.4: what a scraper gets unless it asks for OpenMetrics
    /// (Prometheus' client libraries answer so too).
    Text,
    /// OpenMetrics 1.0.0 text, as Prometheus asks for it first.
    OpenMetrics,
}

impl Format {
    /// The `Content-Type` of an answer in this format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }

    /// The format to answer a request whose `Accept` header is `accept` (`None` when it sent
    /// none) with: the acceptable media range of the highest `q` (the more specific first on a
    /// tie, then the first listed) that is `text/plain` (version 0.0.4 or none) or
    /// `application/openmetrics-text` (version 1.0.0 or none); the text format when none is.
    /// A range with `q=0` is not acceptable. `*/*` alone gets the text format, as from
    /// Prometheus' client libraries.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else { return Format::Text };
        let mut ranges: Vec<(f64, u8, usize, Option<Format>)> = Vec::new();
        for (i, item) in accept.split(',').enumerate() {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            if media.is_empty() {
                continue;
            }
            let (mut q, mut version, mut params) = (1.0, None, 0u8);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else { continue };
                let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().trim_matches('"'));
                match k.as_str() {
                    // An unreadable q counts as 0, not acceptable.
                    "q" => q = v.parse::<f64>().ok().filter(|q| q.is_finite()).unwrap_or(0.0),
                    "version" => version = Some(v.to_string()),
                    _ => {}
                }
                if k != "q" {
                    params = params.saturating_add(1);
                }
            }
            if q <= 0.0 {
                continue;
            }
            let format = match (media.as_str(), version.as_deref()) {
                ("text/plain", None | Some("0.0.4")) => Some(Format::Text),
                ("application/openmetrics-text", None | Some("1.0.0")) => Some(Format::OpenMetrics),
                _ => None,
            };
            let specificity = match media.as_str() {
                "*/*" => 0,
                m if m.ends_with("/*") => 1,
                _ => 2u8.saturating_add(params),
            };
            ranges.push((q, specificity, i, format));
        }
        // Highest q first, then the more specific, then the order given (a stable sort).
        ranges.sort_by(|a, b| b.0.total_cmp(&a.0).then(b.1.cmp(&a.1)));
        ranges.into_iter().find_map(|r| r.3).unwrap_or(Format::Text)
    }
}

/// `help` escaped for a HELP line: `\` and line feed in both formats, `"` in OpenMetrics.
fn escape_help(help: &str, format: Format, out: &mut String) {
    for c in help.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if format == Format::OpenMetrics => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

/// OpenMetrics text as `prometheus-client` writes it, with its HELP texts escaped.
pub(crate) fn to_openmetrics(text: &str) -> String {
    if !text.lines().any(|l| l.strip_prefix("# HELP ").is_some_and(|h| h.contains(['\\', '"']))) {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 64);
    for line in text.lines() {
        match line.strip_prefix("# HELP ").and_then(|h| h.split_once(' ')) {
            Some((name, help)) => {
                out.push_str("# HELP ");
                out.push_str(name);
                out.push(' ');
                escape_help(help, Format::OpenMetrics, &mut out);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// What the text format calls a family that OpenMetrics calls `name` of `kind`, and its type.
fn text_family<'a>(name: &str, kind: &'a str) -> (String, &'a str) {
    match kind {
        "counter" => (format!("{name}_total"), "counter"),
        "info" => (format!("{name}_info"), "gauge"),
        "unknown" => (name.to_string(), "untyped"),
        "stateset" => (name.to_string(), "gauge"),
        "gaugehistogram" => (name.to_string(), "histogram"),
        k => (name.to_string(), k),
    }
}

/// Where a sample line's name and labels end: past the closing `}` of its labels (label
/// values may hold `#`, spaces and escaped quotes), else at its first space.
fn series_end(line: &str) -> usize {
    let bytes = line.as_bytes();
    let Some(open) = line.find(['{', ' ']) else { return line.len() };
    if bytes[open] == b' ' {
        return open;
    }
    let (mut i, mut quoted) = (open + 1, false);
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quoted => i += 1,
            b'"' => quoted = !quoted,
            b'}' if !quoted => return i + 1,
            _ => {}
        }
        i += 1;
    }
    line.len()
}

/// OpenMetrics text (as `prometheus-client` writes it) rewritten in the Prometheus text
/// format 0.0.4; see the module's notes for what changes.
pub(crate) fn to_text(openmetrics: &str) -> String {
    let mut out = String::with_capacity(openmetrics.len());
    // The HELP of the family whose TYPE comes next, and the family being written: its
    // OpenMetrics name and type.
    let mut help: Option<(&str, &str)> = None;
    let mut family: Option<(&str, &str)> = None;
    for line in openmetrics.lines() {
        if let Some(h) = line.strip_prefix("# HELP ") {
            if let Some((name, text)) = help.take() {
                // A HELP without a TYPE after it: kept as it is.
                push_help(&mut out, name, text);
            }
            help = Some(h.split_once(' ').unwrap_or((h, "")));
            continue;
        }
        if let Some(t) = line.strip_prefix("# TYPE ") {
            let (name, kind) = t.split_once(' ').unwrap_or((t, "unknown"));
            let (text_name, text_kind) = text_family(name, kind.trim());
            if let Some((h_name, h_text)) = help.take() {
                push_help(&mut out, if h_name == name { &text_name } else { h_name }, h_text);
            }
            out.push_str("# TYPE ");
            out.push_str(&text_name);
            out.push(' ');
            out.push_str(text_kind);
            out.push('\n');
            family = Some((name, kind.trim()));
            continue;
        }
        if let Some((name, text)) = help.take() {
            push_help(&mut out, name, text);
        }
        if line.starts_with('#') || line.trim().is_empty() {
            // `# UNIT`, `# EOF`, other comments: not in the text format.
            continue;
        }
        let end = series_end(line);
        let series = &line[..end];
        let sample_name = &series[..series.find('{').unwrap_or(series.len())];
        if let Some((fam, kind)) = family {
            let created = sample_name.strip_suffix("_created").is_some_and(|n| n == fam);
            if created && matches!(kind, "counter" | "histogram" | "summary" | "gaugehistogram") {
                continue;
            }
        }
        // The value, an optional timestamp, and an exemplar after `#` that is dropped.
        let mut rest = line[end..].split_whitespace().take_while(|t| !t.starts_with('#'));
        let Some(value) = rest.next() else { continue };
        out.push_str(series);
        out.push(' ');
        out.push_str(value);
        if let Some(ts) = rest.next() {
            match ts.parse::<f64>() {
                Ok(s) if s.is_finite() => {
                    out.push(' ');
                    out.push_str(&format!("{}", (s * 1000.0).round() as i64));
                }
                _ => {}
            }
        }
        out.push('\n');
    }
    if let Some((name, text)) = help.take() {
        push_help(&mut out, name, text);
    }
    out
}

fn push_help(out: &mut String, name: &str, text: &str) {
    out.push_str("# HELP ");
    out.push_str(name);
    out.push(' ');
    escape_help(text, Format::Text, out);
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prometheus_asks_for_openmetrics_and_gets_it() {
        // Prometheus 2.42's and 3.x's scrape Accept headers.
        let p2 = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,\
                  text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        let p3 = "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.6,\
                  application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;escaping=allow-utf-8;q=0.4,\
                  text/plain;version=0.0.4;q=0.3,*/*;q=0.2";
        assert_eq!(Format::negotiate(Some(p2)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some(p3)), Format::OpenMetrics);
    }

    #[test]
    fn the_text_format_unless_openmetrics_is_preferred() {
        for (accept, want) in [
            (None, Format::Text),
            (Some(""), Format::Text),
            (Some("*/*"), Format::Text),
            (Some("text/plain"), Format::Text),
            (Some("text/plain;version=0.0.4"), Format::Text),
            (Some("text/plain; version=0.0.4; charset=utf-8"), Format::Text),
            (Some("application/json"), Format::Text),
            (Some("application/openmetrics-text"), Format::OpenMetrics),
            (Some("Application/OpenMetrics-Text; Version=\"1.0.0\""), Format::OpenMetrics),
            // A version we do not write is not what was asked for.
            (Some("application/openmetrics-text;version=0.0.1"), Format::Text),
            (Some("application/openmetrics-text;version=2.0.0,text/plain;q=0.1"), Format::Text),
            // q-values, whatever the order.
            (Some("text/plain;version=0.0.4;q=0.5,application/openmetrics-text;version=1.0.0"), Format::OpenMetrics),
            (Some("application/openmetrics-text;q=0.4,text/plain;q=0.9"), Format::Text),
            (Some("application/openmetrics-text;q=0.9,text/plain;q=0.4"), Format::OpenMetrics),
            // q=0 is not acceptable; a q that does not read counts as 0.
            (Some("application/openmetrics-text;q=0,*/*"), Format::Text),
            (Some("application/openmetrics-text;q=x"), Format::Text),
            // On a tie, the first listed.
            (Some("application/openmetrics-text,text/plain"), Format::OpenMetrics),
            (Some("text/plain,application/openmetrics-text"), Format::Text),
            // The more specific first on a tie: a version beats none.
            (Some("text/plain,application/openmetrics-text;version=1.0.0"), Format::OpenMetrics),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
    }

    const OPENMETRICS: &str = "\
# HELP app_requests Requests served, \"all\" of them, C:\\ too
# TYPE app_requests counter
app_requests_total{path=\"/a # b\",q=\"x\\\"}\"} 3 # {trace_id=\"1\"} 1.0 1700000000.5
app_requests_created{path=\"/a # b\",q=\"x\\\"}\"} 1700000000.25
# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
# UNIT app_latency_seconds seconds
app_latency_seconds_bucket{le=\"0.1\"} 1
app_latency_seconds_bucket{le=\"+Inf\"} 2
app_latency_seconds_sum 0.5
app_latency_seconds_count 2
# HELP app_build Build.
# TYPE app_build info
app_build_info{version=\"1.2\"} 1
# HELP app_temp Temperature.
# TYPE app_temp gauge
app_temp 21.5 1700000000.123
# HELP app_odd Something.
# TYPE app_odd unknown
app_odd NaN
# EOF
";

    #[test]
    fn openmetrics_is_rewritten_in_the_text_format() {
        let text = to_text(OPENMETRICS);
        let want = "\
# HELP app_requests_total Requests served, \"all\" of them, C:\\\\ too
# TYPE app_requests_total counter
app_requests_total{path=\"/a # b\",q=\"x\\\"}\"} 3
# HELP app_latency_seconds Latency.
# TYPE app_latency_seconds histogram
app_latency_seconds_bucket{le=\"0.1\"} 1
app_latency_seconds_bucket{le=\"+Inf\"} 2
app_latency_seconds_sum 0.5
app_latency_seconds_count 2
# HELP app_build_info Build.
# TYPE app_build_info gauge
app_build_info{version=\"1.2\"} 1
# HELP app_temp Temperature.
# TYPE app_temp gauge
app_temp 21.5 1700000000123
# HELP app_odd Something.
# TYPE app_odd untyped
app_odd NaN
";
        assert_eq!(text, want);
    }

    #[test]
    fn openmetrics_help_gets_its_quotes_and_backslashes_escaped() {
        let om = to_openmetrics(OPENMETRICS);
        assert!(om.starts_with("# HELP app_requests Requests served, \\\"all\\\" of them, C:\\\\ too\n"), "{om}");
        // Everything else as it was, `# EOF` last.
        assert_eq!(om.lines().count(), OPENMETRICS.lines().count());
        assert!(om.ends_with("app_odd NaN\n# EOF\n"), "{om}");
        let plain = "# HELP a b\n# TYPE a gauge\na 1\n# EOF\n";
        assert_eq!(to_openmetrics(plain), plain);
    }

    #[test]
    fn an_empty_registry_is_an_empty_text() {
        assert_eq!(to_text("# EOF\n"), "");
        assert_eq!(to_text(""), "");
    }
}
