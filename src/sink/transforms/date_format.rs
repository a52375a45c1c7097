//! Java's `SimpleDateFormat` letters that Connect's TimestampRouter and TimestampConverter
//! users write (`yyyy`, `yy`, `MM`, `dd`, `HH`, `mm`, `ss`, `SSS`, `'text'`), in UTC: format
//! and parse. Other letters are refused when the transform is configured.

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Piece {
    Text(String),
    Year4,
    Year2,
    Month,
    Day,
    Hour,
    Minute,
    Second,
    Millis,
}

pub(crate) fn parse_date_format(f: &str) -> Result<Vec<Piece>, String> {
    let chars: Vec<char> = f.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let run = chars[i..].iter().take_while(|&&x| x == c).count();
        if c == '\'' {
            let end = chars[i + 1..].iter().position(|&x| x == '\'').ok_or("an unclosed quote in timestamp.format")?;
            let text: String = chars[i + 1..i + 1 + end].iter().collect();
            out.push(Piece::Text(if text.is_empty() { "'".into() } else { text }));
            i += end + 2;
            continue;
        }
        let piece = match (c, run) {
            ('y', 2) => Piece::Year2,
            ('y', _) => Piece::Year4,
            ('M', 2) => Piece::Month,
            ('d', 2) => Piece::Day,
            ('H', 2) => Piece::Hour,
            ('m', 2) => Piece::Minute,
            ('s', 2) => Piece::Second,
            ('S', 3) => Piece::Millis,
            (c, _) if c.is_ascii_alphabetic() => {
                return Err(format!(
                    "timestamp.format: {} is not supported here (yyyy, yy, MM, dd, HH, mm, ss, SSS and 'text' are)",
                    std::iter::repeat_n(c, run).collect::<String>()
                ))
            }
            (c, n) => Piece::Text(std::iter::repeat_n(c, n).collect()),
        };
        out.push(piece);
        i += run;
    }
    Ok(out)
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's
/// `civil_from_days`).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

pub(crate) fn format_timestamp(pieces: &[Piece], ms: i64) -> String {
    let (days, in_day) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let (y, mo, d) = civil(days);
    let mut out = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => out.push_str(t),
            Piece::Year4 => out.push_str(&format!("{y:04}")),
            Piece::Year2 => out.push_str(&format!("{:02}", y.rem_euclid(100))),
            Piece::Month => out.push_str(&format!("{mo:02}")),
            Piece::Day => out.push_str(&format!("{d:02}")),
            Piece::Hour => out.push_str(&format!("{:02}", in_day / 3_600_000)),
            Piece::Minute => out.push_str(&format!("{:02}", in_day / 60_000 % 60)),
            Piece::Second => out.push_str(&format!("{:02}", in_day / 1000 % 60)),
            Piece::Millis => out.push_str(&format!("{:03}", in_day % 1000)),
        }
    }
    out
}

/// Days since 1970-01-01 of a (year, month, day), proleptic Gregorian (Hinnant's
/// `days_from_civil`).
fn days(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `text` read with `pieces` as ms since the epoch (UTC); fields not in the format are the
/// epoch's (1970-01-01 00:00:00.000), as SimpleDateFormat leaves them.
pub(crate) fn parse_timestamp(pieces: &[Piece], text: &str) -> Result<i64, String> {
    let bad = || format!("{text:?} does not match the format");
    let (mut y, mut mo, mut d, mut h, mut mi, mut s, mut ms) = (1970i64, 1u32, 1u32, 0i64, 0i64, 0i64, 0i64);
    let mut rest = text;
    let digits = |rest: &mut &str, n: usize| -> Result<i64, String> {
        let take: String = rest.chars().take(n).collect();
        if take.len() != n || !take.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        *rest = &rest[n..];
        take.parse::<i64>().map_err(|_| bad())
    };
    for p in pieces {
        match p {
            Piece::Text(t) => rest = rest.strip_prefix(t.as_str()).ok_or_else(bad)?,
            Piece::Year4 => y = digits(&mut rest, 4)?,
            Piece::Year2 => y = 2000 + digits(&mut rest, 2)?,
            Piece::Month => mo = digits(&mut rest, 2)? as u32,
            Piece::Day => d = digits(&mut rest, 2)? as u32,
            Piece::Hour => h = digits(&mut rest, 2)?,
            Piece::Minute => mi = digits(&mut rest, 2)?,
            Piece::Second => s = digits(&mut rest, 2)?,
            Piece::Millis => ms = digits(&mut rest, 3)?,
        }
    }
    if !rest.is_empty() || !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return Err(bad());
    }
    Ok(days(y, mo, d) * 86_400_000 + h * 3_600_000 + mi * 60_000 + s * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_both_ways() {
        assert_eq!(civil(-1), (1969, 12, 31));
        assert_eq!(civil(11_016), (2000, 2, 29));
        for d in [-800_000, -1, 0, 59, 11_016, 19_675, 2_000_000] {
            let (y, m, dd) = civil(d);
            assert_eq!(days(y, m, dd), d);
        }
    }

    #[test]
    fn parse_is_format_backwards() {
        let p = parse_date_format("yyyy-MM-dd'T'HH:mm:ss.SSS").unwrap();
        let ms = 1_700_000_000_123;
        assert_eq!(format_timestamp(&p, ms), "2023-11-14T22:13:20.123");
        assert_eq!(parse_timestamp(&p, "2023-11-14T22:13:20.123").unwrap(), ms);
        assert!(parse_timestamp(&p, "2023-11-14").is_err());
        assert!(parse_timestamp(&p, "2023-13-14T22:13:20.123").is_err());
        let day = parse_date_format("yyyyMMdd").unwrap();
        assert_eq!(parse_timestamp(&day, "19700102").unwrap(), 86_400_000);
    }
}
