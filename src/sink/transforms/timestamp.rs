//! TimestampConverter: a timestamp field (or the whole key or value) between a formatted
//! string, a Unix number and Connect's `Timestamp` / `Date` / `Time`. JSON has no date
//! type: those three are written as ms since the epoch (`Date`: midnight UTC of the day;
//! `Time`: ms since midnight), where Connect's sink would see a `java.util.Date`.

use serde_json::Value;

use super::super::data::{json_kind, ConnectRecord, Data};
use super::super::transform::{object_of, required, Side, TransformSettings, Transformation};
use super::date_format::{format_timestamp, parse_date_format, parse_timestamp, Piece};

const DAY_MS: i64 = 86_400_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    String,
    Unix,
    Timestamp,
    Date,
    Time,
}

pub(crate) struct TimestampConverter {
    side: Side,
    field: Option<String>,
    target: Target,
    format: Option<Vec<Piece>>,
    /// ms per Unix unit: 1000 for seconds; for micro/nanoseconds the divisor (negative).
    precision: i64,
}

impl TimestampConverter {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let target = match required(s, "target.type")? {
            "string" => Target::String,
            "unix" => Target::Unix,
            "Timestamp" => Target::Timestamp,
            "Date" => Target::Date,
            "Time" => Target::Time,
            other => return Err(format!("target.type={other:?}: use string, unix, Date, Time or Timestamp")),
        };
        let format = match s.get("format").map(|f| f.trim()).filter(|f| !f.is_empty()) {
            Some(f) => Some(parse_date_format(f)?),
            None if target == Target::String => return Err("target.type=string needs format".into()),
            None => None,
        };
        let precision = match s.get("unix.precision").map(|p| p.trim()).unwrap_or("milliseconds") {
            "seconds" => 1000,
            "milliseconds" => 1,
            "microseconds" => -1000,
            "nanoseconds" => -1_000_000,
            other => {
                return Err(format!("unix.precision={other:?}: use seconds, milliseconds, microseconds or nanoseconds"))
            }
        };
        let field = s.get("field").map(|f| f.trim().to_string()).filter(|f| !f.is_empty());
        Ok(TimestampConverter { side, field, target, format, precision })
    }

    fn ms_of(&self, unix: i64) -> i64 {
        if self.precision > 0 {
            unix.saturating_mul(self.precision)
        } else {
            unix.div_euclid(-self.precision)
        }
    }

    fn unix_of(&self, ms: i64) -> i64 {
        if self.precision > 0 {
            ms.div_euclid(self.precision)
        } else {
            ms.saturating_mul(-self.precision)
        }
    }

    fn convert(&self, v: &Value) -> Result<Value, String> {
        let ms = match v {
            Value::Null => return Ok(Value::Null),
            Value::Number(n) => self.ms_of(n.as_i64().ok_or_else(|| format!("{n} is not a whole Unix time"))?),
            Value::String(text) => {
                let Some(f) = &self.format else {
                    return Err(format!("{text:?} is a string: set format to read it"));
                };
                parse_timestamp(f, text)?
            }
            other => return Err(format!("a timestamp cannot be {}", json_kind(other))),
        };
        Ok(match self.target {
            Target::String => Value::String(format_timestamp(self.format.as_deref().unwrap_or(&[]), ms)),
            Target::Unix => Value::from(self.unix_of(ms)),
            Target::Timestamp => Value::from(ms),
            Target::Date => Value::from(ms.div_euclid(DAY_MS) * DAY_MS),
            Target::Time => Value::from(ms.rem_euclid(DAY_MS)),
        })
    }
}

impl Transformation for TimestampConverter {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let slot = self.side.of(&mut r);
        let Some(data) = slot.as_mut() else { return Ok(Some(r)) };
        match &self.field {
            None => {
                let Data::Json(v) = data else { return Err("TimestampConverter cannot read bytes".into()) };
                *slot = Data::from_json(self.convert(v)?);
            }
            Some(f) => {
                let m = object_of(data, "converting timestamp formats")?;
                if let Some(v) = m.get(f) {
                    let c = self.convert(v).map_err(|e| format!("field {f:?}: {e}"))?;
                    m.insert(f.clone(), c);
                }
            }
        }
        Ok(Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(pairs: &[(&str, &str)], v: Value) -> Result<Option<Data>, String> {
        let s: TransformSettings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let t = TimestampConverter::new(Side::Value, &s)?;
        t.apply(super::super::fields_tests_record(v)).map(|r| r.and_then(|r| r.value))
    }

    #[test]
    fn between_strings_unix_and_connects_types() {
        let f = ("format", "yyyy-MM-dd HH:mm:ss");
        assert_eq!(
            run(&[("field", "at"), ("target.type", "string"), f], json!({"at": 1_700_000_000_000i64})).unwrap(),
            Some(Data::Json(json!({"at": "2023-11-14 22:13:20"})))
        );
        assert_eq!(
            run(&[("target.type", "unix"), ("unix.precision", "seconds"), f], json!("2023-11-14 22:13:20")).unwrap(),
            Some(Data::Json(json!(1_700_000_000)))
        );
        assert_eq!(
            run(&[("target.type", "Date")], json!(1_700_000_000_000i64)).unwrap(),
            Some(Data::Json(json!(1_699_920_000_000i64)))
        );
        assert_eq!(
            run(&[("target.type", "Time")], json!(1_700_000_000_000i64)).unwrap(),
            Some(Data::Json(json!(80_000_000)))
        );
        assert_eq!(
            run(&[("target.type", "Timestamp"), ("unix.precision", "microseconds")], json!(1_700_000_000_000_000i64))
                .unwrap(),
            Some(Data::Json(json!(1_700_000_000_000i64)))
        );
    }

    #[test]
    fn refusals() {
        assert!(run(&[("target.type", "string")], json!(1)).unwrap_err().contains("format"));
        assert!(run(&[("target.type", "unix")], json!("2023")).unwrap_err().contains("set format"));
        assert!(run(&[("target.type", "weekday")], json!(1)).is_err());
        assert!(run(&[("target.type", "unix"), ("format", "yyyy")], json!("20x3")).is_err());
        assert_eq!(run(&[("target.type", "unix")], Value::Null).unwrap(), None);
    }
}
