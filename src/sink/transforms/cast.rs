//! Cast: fields (`spec=field:type,...`) or the whole key or value (`spec=type`) cast to
//! int8, int16, int32, int64, float32, float64, boolean or string, as Connect's Cast does
//! with Java's conversions (numbers wrap to the narrower integer, strings are parsed).

use serde_json::{Number, Value};

use super::super::data::{json_kind, ConnectRecord, Data};
use super::super::transform::{object_of, required, Side, TransformSettings, Transformation};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Type {
    Int8,
    Int16,
    Int32,
    Int64,
    Float32,
    Float64,
    Boolean,
    String,
}

fn parse_type(s: &str) -> Result<Type, String> {
    Ok(match s.trim() {
        "int8" => Type::Int8,
        "int16" => Type::Int16,
        "int32" => Type::Int32,
        "int64" => Type::Int64,
        "float32" => Type::Float32,
        "float64" => Type::Float64,
        "boolean" => Type::Boolean,
        "string" => Type::String,
        other => {
            return Err(format!(
                "{other:?} is not a type Cast supports: int8, int16, int32, int64, float32, float64, boolean, string"
            ))
        }
    })
}

pub(crate) struct Cast {
    side: Side,
    /// `None`: the whole key or value.
    fields: Option<Vec<(String, Type)>>,
    whole: Type,
}

impl Cast {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let spec = required(s, "spec")?;
        let parts: Vec<&str> = spec.split(',').map(str::trim).filter(|p| !p.is_empty()).collect();
        if parts.len() == 1 && !parts[0].contains(':') {
            return Ok(Cast { side, fields: None, whole: parse_type(parts[0])? });
        }
        let mut fields = Vec::new();
        for p in parts {
            let Some((f, t)) = p.split_once(':') else {
                return Err(format!("spec: {p:?} is not field:type (a whole-value cast is one type alone)"));
            };
            fields.push((f.trim().to_string(), parse_type(t)?));
        }
        Ok(Cast { side, fields: Some(fields), whole: Type::String })
    }
}

/// Java's `Double.toString` for the common cases: an integral double keeps its `.0`.
fn java_double(f: f64) -> String {
    if f.fract() == 0.0 && f.abs() < 1e7 {
        format!("{f:.1}")
    } else {
        f.to_string()
    }
}

fn cast(v: &Value, to: Type) -> Result<Value, String> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    let as_f64 = || -> Result<f64, String> {
        match v {
            Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a number Cast can read")),
            Value::Bool(b) => Ok(if *b { 1.0 } else { 0.0 }),
            Value::String(s) => s.trim().parse::<f64>().map_err(|_| format!("Cast cannot parse {s:?} as a number")),
            other => Err(format!("Cast cannot cast {} to {to:?}", json_kind(other))),
        }
    };
    let as_i64 = || -> Result<i64, String> {
        match v {
            Value::Number(n) => {
                n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)).ok_or_else(|| format!("{n} is out of range"))
            }
            Value::String(s) => s.trim().parse::<i64>().map_err(|_| format!("Cast cannot parse {s:?} as an integer")),
            _ => as_f64().map(|f| f as i64),
        }
    };
    Ok(match to {
        // Java's narrowing (`byteValue()` etc.) wraps.
        Type::Int8 => Value::from(as_i64()? as i8),
        Type::Int16 => Value::from(as_i64()? as i16),
        Type::Int32 => Value::from(as_i64()? as i32),
        Type::Int64 => Value::from(as_i64()?),
        Type::Float32 => Number::from_f64(as_f64()? as f32 as f64).map(Value::Number).unwrap_or(Value::Null),
        Type::Float64 => Number::from_f64(as_f64()?).map(Value::Number).unwrap_or(Value::Null),
        Type::Boolean => Value::Bool(match v {
            Value::Bool(b) => *b,
            // Java's Boolean.parseBoolean.
            Value::String(s) => s.eq_ignore_ascii_case("true"),
            _ => as_f64()? != 0.0,
        }),
        Type::String => Value::String(match v {
            Value::String(s) => s.clone(),
            Value::Number(n) if n.is_f64() => java_double(n.as_f64().unwrap_or_default()),
            Value::Number(n) => n.to_string(),
            Value::Bool(b) => b.to_string(),
            other => return Err(format!("Cast cannot cast {} to string", json_kind(other))),
        }),
    })
}

impl Transformation for Cast {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let slot = self.side.of(&mut r);
        let Some(data) = slot.as_mut() else { return Ok(Some(r)) };
        match &self.fields {
            None => {
                let Data::Json(v) = data else { return Err("Cast cannot cast bytes".to_string()) };
                *slot = Data::from_json(cast(v, self.whole)?);
            }
            Some(fields) => {
                let m = object_of(data, "cast types")?;
                for (f, t) in fields {
                    if let Some(v) = m.get(f) {
                        let c = cast(v, *t).map_err(|e| format!("field {f:?}: {e}"))?;
                        m.insert(f.clone(), c);
                    }
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

    fn apply(spec: &str, v: Value) -> Result<Option<Data>, String> {
        let s = [("spec".to_string(), spec.to_string())].into_iter().collect();
        let r = super::super::fields_tests_record(v);
        Cast::new(Side::Value, &s)?.apply(r).map(|r| r.and_then(|r| r.value))
    }

    #[test]
    fn fields_are_cast_as_java_casts_them() {
        let out = apply(
            "a:int8,b:string,c:float64,d:boolean,e:int64,f:string,g:boolean",
            json!({"a": 300, "b": 1.0, "c": "2.5", "d": "TRUE", "e": 7.9, "f": 12, "g": 0}),
        )
        .unwrap();
        assert_eq!(
            out,
            Some(Data::Json(json!({"a": 44, "b": "1.0", "c": 2.5, "d": true, "e": 7, "f": "12", "g": false})))
        );
    }

    #[test]
    fn the_whole_value_and_the_failures() {
        assert_eq!(apply("int32", json!("17")).unwrap(), Some(Data::Json(json!(17))));
        assert!(apply("int32", json!("x")).unwrap_err().contains("\"x\""));
        assert!(apply("a:int32", json!({"a": [1]})).is_err());
        assert!(apply("a:decimal", json!({})).unwrap_err().contains("not a type"));
        assert_eq!(apply("int32", Value::Null).unwrap(), None);
    }
}
