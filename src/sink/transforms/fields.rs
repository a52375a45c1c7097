//! The field transforms: InsertField, ReplaceField, MaskField, ValueToKey, ExtractField,
//! HoistField, Flatten (each `$Key` / `$Value`, except ValueToKey), as Connect's schemaless
//! forms do them.

use serde_json::{Map, Value};

use super::super::data::{ConnectRecord, Data};
use super::super::transform::{list, object_of, required, Side, TransformSettings, Transformation};

/// Strips Connect's `!` (required) / `?` (optional) suffix of an InsertField field name.
fn field_name(s: &TransformSettings, key: &str) -> Option<String> {
    let v = s.get(key)?.trim();
    let v = v.strip_suffix(['!', '?']).unwrap_or(v);
    (!v.is_empty()).then(|| v.to_string())
}

/// InsertField: adds the record's topic, partition, offset, timestamp and a static value.
pub(crate) struct InsertField {
    pub(super) side: Side,
    pub(super) topic: Option<String>,
    pub(super) partition: Option<String>,
    pub(super) offset: Option<String>,
    pub(super) timestamp: Option<String>,
    pub(super) static_field: Option<(String, String)>,
}

impl InsertField {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let static_field = match (field_name(s, "static.field"), s.get("static.value")) {
            (Some(f), Some(v)) => Some((f, v.clone())),
            (Some(_), None) => return Err("static.field needs static.value".to_string()),
            _ => None,
        };
        let t = InsertField {
            side,
            topic: field_name(s, "topic.field"),
            partition: field_name(s, "partition.field"),
            offset: field_name(s, "offset.field"),
            timestamp: field_name(s, "timestamp.field"),
            static_field,
        };
        if t.topic.is_none()
            && t.partition.is_none()
            && t.offset.is_none()
            && t.timestamp.is_none()
            && t.static_field.is_none()
        {
            return Err(
                "set at least one of topic.field, partition.field, offset.field, timestamp.field, static.field".into(),
            );
        }
        Ok(t)
    }
}

impl Transformation for InsertField {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        // The topic is copied only when a field takes it (one allocation per record less).
        let topic = self.topic.as_ref().map(|_| r.topic.clone());
        let (partition, offset, ts) = (r.partition, r.offset, r.timestamp);
        let Some(data) = self.side.of(&mut r) else { return Ok(Some(r)) };
        let m = object_of(data, "field insertion")?;
        if let (Some(f), Some(topic)) = (&self.topic, topic) {
            m.insert(f.clone(), Value::String(topic));
        }
        if let Some(f) = &self.partition {
            m.insert(f.clone(), partition.into());
        }
        if let Some(f) = &self.offset {
            m.insert(f.clone(), offset.into());
        }
        if let (Some(f), true) = (&self.timestamp, ts >= 0) {
            m.insert(f.clone(), ts.into());
        }
        if let Some((f, v)) = &self.static_field {
            m.insert(f.clone(), Value::String(v.clone()));
        }
        Ok(Some(r))
    }
}

/// ReplaceField: `include` / `exclude` (or the old `whitelist` / `blacklist`) and
/// `renames` (`old:new,...`).
pub(crate) struct ReplaceField {
    pub(super) side: Side,
    include: Vec<String>,
    exclude: Vec<String>,
    renames: Vec<(String, String)>,
}

impl ReplaceField {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let mut include = list(s, "include");
        include.extend(list(s, "whitelist"));
        let mut exclude = list(s, "exclude");
        exclude.extend(list(s, "blacklist"));
        let mut renames = Vec::new();
        for pair in list(s, "renames") {
            match pair.split_once(':') {
                Some((a, b)) if !a.trim().is_empty() && !b.trim().is_empty() => {
                    renames.push((a.trim().to_string(), b.trim().to_string()))
                }
                _ => return Err(format!("renames: {pair:?} is not old:new")),
            }
        }
        Ok(ReplaceField { side, include, exclude, renames })
    }

    pub(super) fn keeps(&self, field: &str) -> bool {
        !self.exclude.iter().any(|f| f == field) && (self.include.is_empty() || self.include.iter().any(|f| f == field))
    }
}

impl Transformation for ReplaceField {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let Some(data) = self.side.of(&mut r) else { return Ok(Some(r)) };
        let m = object_of(data, "field replacement")?;
        self.replace_in_place(m);
        Ok(Some(r))
    }
}

impl ReplaceField {
    /// The new name of `field` (its first rename), if it has one.
    pub(super) fn rename_of(&self, field: &str) -> Option<&str> {
        self.renames.iter().find(|(a, _)| a == field).map(|(_, b)| b.as_str())
    }

    /// Connect's schemaless ReplaceField builds a new map of the kept fields under their new
    /// names; the result is the same when the dropped fields are removed and only the renamed
    /// ones move, which spares rebuilding the map (and a copy of every name) per record.
    ///
    /// When several kept fields end under one name (`renames=a:b` beside a kept `b`, or two
    /// renames to one name), the one visited last wins in the rebuilt map, that is, in our
    /// sorted map, the one with the greatest original name: the moves below keep that rule.
    fn replace_in_place(&self, m: &mut Map<String, Value>) {
        if !self.exclude.is_empty() || !self.include.is_empty() {
            m.retain(|k, _| self.keeps(k));
        }
        if self.renames.is_empty() {
            return;
        }
        // (original name, new name, value) of every kept field that is renamed; a field's
        // first rename applies, as `find` did.
        let mut moved: Vec<(&str, &str, Value)> = Vec::new();
        for (i, (from, to)) in self.renames.iter().enumerate() {
            if self.renames[..i].iter().any(|(a, _)| a == from) {
                continue;
            }
            if let Some(v) = m.remove(from.as_str()) {
                moved.push((from, to, v));
            }
        }
        moved.sort_by(|a, b| a.0.cmp(b.0));
        let mut placed: Vec<&str> = Vec::with_capacity(moved.len());
        for (from, to, v) in moved {
            // A kept field of that name not itself renamed came later in the rebuild when its
            // name is greater than `from`: it stays. A field moved here earlier had a smaller
            // original name: it is replaced.
            if to > from && !placed.contains(&to) && m.contains_key(to) {
                continue;
            }
            m.insert(to.to_string(), v);
            placed.push(to);
        }
    }
}

/// MaskField: the `fields` replaced by their type's empty value, or by `replacement`.
pub(crate) struct MaskField {
    side: Side,
    fields: Vec<String>,
    replacement: Option<String>,
}

impl MaskField {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let fields = list(s, "fields");
        if fields.is_empty() {
            return Err("missing setting \"fields\"".into());
        }
        let replacement = s.get("replacement").filter(|v| !v.is_empty()).cloned();
        Ok(MaskField { side, fields, replacement })
    }

    fn mask(&self, field: &str, v: &Value) -> Result<Value, String> {
        Ok(match (v, &self.replacement) {
            (Value::Null, _) => Value::Null,
            (Value::String(_), None) => Value::String(String::new()),
            (Value::String(_), Some(r)) => Value::String(r.clone()),
            (Value::Number(_), None) => 0.into(),
            (Value::Number(n), Some(r)) => {
                let parsed = if n.is_f64() {
                    r.trim().parse::<f64>().ok().and_then(|f| serde_json::Number::from_f64(f).map(Value::Number))
                } else {
                    r.trim().parse::<i64>().ok().map(Value::from)
                };
                parsed.ok_or_else(|| format!("Unable to convert {r:?} to the number type of field {field:?}"))?
            }
            (Value::Bool(_), None) => Value::Bool(false),
            (Value::Array(_), None) => Value::Array(Vec::new()),
            (Value::Object(_), None) => Value::Object(Map::new()),
            (_, Some(_)) => {
                return Err(format!(
                    "Cannot mask value of type {} with a replacement (field {field:?})",
                    super::super::data::json_kind(v)
                ))
            }
        })
    }
}

impl Transformation for MaskField {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let Some(data) = self.side.of(&mut r) else { return Ok(Some(r)) };
        let m = object_of(data, "masking fields")?;
        for f in &self.fields {
            if let Some(v) = m.get(f) {
                let masked = self.mask(f, v)?;
                m.insert(f.clone(), masked);
            }
        }
        Ok(Some(r))
    }
}

/// ValueToKey: the key becomes an object of the value's `fields`.
pub(crate) struct ValueToKey {
    fields: Vec<String>,
}

impl ValueToKey {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let fields = list(s, "fields");
        if fields.is_empty() {
            return Err("missing setting \"fields\"".into());
        }
        Ok(ValueToKey { fields })
    }
}

impl Transformation for ValueToKey {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let purpose = "copying fields from value to key";
        let Some(value) = r.value.as_mut() else {
            return Err(format!("Only Map objects supported in absence of schema for [{purpose}], found: null"));
        };
        let m = object_of(value, purpose)?;
        let key: Map<String, Value> =
            self.fields.iter().map(|f| (f.clone(), m.get(f).cloned().unwrap_or(Value::Null))).collect();
        r.key = Some(Data::Json(Value::Object(key)));
        Ok(Some(r))
    }
}

/// ExtractField: the key or value becomes one of its fields (null if missing).
pub(crate) struct ExtractField {
    side: Side,
    field: String,
}

impl ExtractField {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        Ok(ExtractField { side, field: required(s, "field")?.to_string() })
    }
}

impl Transformation for ExtractField {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let slot = self.side.of(&mut r);
        let Some(data) = slot.as_mut() else { return Ok(Some(r)) };
        let m = object_of(data, "field extraction")?;
        let v = m.remove(&self.field).unwrap_or(Value::Null);
        *slot = Data::from_json(v);
        Ok(Some(r))
    }
}

/// HoistField: the key or value wrapped in an object under `field`.
pub(crate) struct HoistField {
    side: Side,
    field: String,
}

impl HoistField {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        Ok(HoistField { side, field: required(s, "field")?.to_string() })
    }
}

impl Transformation for HoistField {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let slot = self.side.of(&mut r);
        let inner = match slot.take() {
            None => Value::Null,
            Some(Data::Json(v)) => v,
            Some(Data::Bytes(b)) => {
                // Connect would wrap a byte[]; JSON has no bytes: base64, as JsonConverter writes bytes.
                use base64::Engine as _;
                Value::String(base64::engine::general_purpose::STANDARD.encode(&b))
            }
        };
        let mut m = Map::new();
        m.insert(self.field.clone(), inner);
        *slot = Some(Data::Json(Value::Object(m)));
        Ok(Some(r))
    }
}

/// Flatten: nested objects become top-level fields named with `delimiter` (default `.`).
pub(crate) struct Flatten {
    side: Side,
    delimiter: String,
}

impl Flatten {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        Ok(Flatten { side, delimiter: s.get("delimiter").cloned().unwrap_or_else(|| ".".to_string()) })
    }

    fn flatten_into(&self, prefix: &str, m: Map<String, Value>, out: &mut Map<String, Value>) {
        for (k, v) in m {
            let name = if prefix.is_empty() { k } else { format!("{prefix}{}{k}", self.delimiter) };
            match v {
                Value::Object(inner) => self.flatten_into(&name, inner, out),
                other => {
                    out.insert(name, other);
                }
            }
        }
    }
}

impl Transformation for Flatten {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let Some(data) = self.side.of(&mut r) else { return Ok(Some(r)) };
        let m = object_of(data, "flattening")?;
        let old = std::mem::take(m);
        self.flatten_into("", old, m);
        Ok(Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    pub(crate) fn rec(value: Value) -> ConnectRecord {
        ConnectRecord {
            topic: "orders".into(),
            partition: 2,
            offset: 42,
            timestamp: 1_700_000_000_000,
            key: None,
            value: Data::from_json(value),
            headers: Vec::new(),
            key_schema: None,
            value_schema: None,
        }
    }

    fn settings(pairs: &[(&str, &str)]) -> TransformSettings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn value(t: &dyn Transformation, v: Value) -> Value {
        match t.apply(rec(v)).unwrap().unwrap().value {
            Some(Data::Json(v)) => v,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn insert_field_adds_the_records_coordinates_and_passes_tombstones() {
        let t = InsertField::new(
            Side::Value,
            &settings(&[
                ("topic.field", "t!"),
                ("partition.field", "p"),
                ("offset.field", "o?"),
                ("timestamp.field", "ts"),
                ("static.field", "s"),
                ("static.value", "v"),
            ]),
        )
        .unwrap();
        assert_eq!(
            value(&t, json!({"a": 1})),
            json!({"a": 1, "t": "orders", "p": 2, "o": 42, "ts": 1_700_000_000_000i64, "s": "v"})
        );
        assert_eq!(t.apply(rec(Value::Null)).unwrap().unwrap().value, None);
        let e = t.apply(rec(json!("text"))).unwrap_err();
        assert!(e.contains("Only Map objects"), "{e}");
        assert!(InsertField::new(Side::Value, &settings(&[])).is_err());
    }

    #[test]
    fn replace_field_includes_excludes_and_renames() {
        let t = ReplaceField::new(Side::Value, &settings(&[("exclude", "b"), ("renames", "a:x, c:y")])).unwrap();
        assert_eq!(value(&t, json!({"a": 1, "b": 2, "c": 3})), json!({"x": 1, "y": 3}));
        let t = ReplaceField::new(Side::Value, &settings(&[("include", "a,c")])).unwrap();
        assert_eq!(value(&t, json!({"a": 1, "b": 2, "c": 3})), json!({"a": 1, "c": 3}));
        assert!(ReplaceField::new(Side::Value, &settings(&[("renames", "a")])).is_err());
    }

    /// The map Connect's ReplaceField builds (every kept field under its new name, in the
    /// map's order, a later one replacing an earlier one of the same name): what the in-place
    /// edit must equal.
    fn rebuilt(t: &ReplaceField, m: &Map<String, Value>) -> Map<String, Value> {
        let mut out = Map::new();
        for (k, v) in m {
            if t.keeps(k) {
                let name = t.renames.iter().find(|(a, _)| a == k).map_or(k, |(_, b)| b);
                out.insert(name.clone(), v.clone());
            }
        }
        out
    }

    #[test]
    fn replace_field_in_place_equals_the_rebuilt_map_when_names_collide() {
        let names = ["a", "b", "c", "d"];
        let mut m = Map::new();
        for (i, n) in names.iter().enumerate() {
            m.insert(n.to_string(), json!(i));
        }
        // Every rename list of up to two pairs over the names (collisions, chains, swaps,
        // a field renamed twice), with and without an exclusion or an inclusion.
        let pairs: Vec<String> = names
            .iter()
            .flat_map(|a| names.iter().map(move |b| format!("{a}:{b}")))
            .chain(["x:a".into()])
            .collect();
        let mut lists = vec![String::new()];
        for p in &pairs {
            lists.push(p.clone());
            for q in &pairs {
                lists.push(format!("{p},{q}"));
            }
        }
        let filters: [&[(&str, &str)]; 3] = [&[], &[("exclude", "b")], &[("include", "a,c,d")]];
        for renames in &lists {
            for filter in filters {
                let mut s = settings(filter);
                if !renames.is_empty() {
                    s.insert("renames".into(), renames.clone());
                }
                let t = ReplaceField::new(Side::Value, &s).unwrap();
                let mut got = m.clone();
                t.replace_in_place(&mut got);
                assert_eq!(got, rebuilt(&t, &m), "renames={renames} {filter:?}");
            }
        }
    }

    #[test]
    fn mask_field_empties_by_type_or_uses_the_replacement() {
        let t = MaskField::new(Side::Value, &settings(&[("fields", "s,n,b,l,m,missing")])).unwrap();
        assert_eq!(
            value(&t, json!({"s": "secret", "n": 5, "b": true, "l": [1], "m": {"a": 1}, "k": "kept"})),
            json!({"s": "", "n": 0, "b": false, "l": [], "m": {}, "k": "kept"})
        );
        let t = MaskField::new(Side::Value, &settings(&[("fields", "s,n"), ("replacement", "9")])).unwrap();
        assert_eq!(value(&t, json!({"s": "secret", "n": 5})), json!({"s": "9", "n": 9}));
        let t = MaskField::new(Side::Value, &settings(&[("fields", "n"), ("replacement", "x")])).unwrap();
        assert!(t.apply(rec(json!({"n": 5}))).is_err());
    }

    #[test]
    fn value_to_key_then_extract_field_makes_a_key_of_one_field() {
        let t = ValueToKey::new(&settings(&[("fields", "id,missing")])).unwrap();
        let r = t.apply(rec(json!({"id": 7, "x": 1}))).unwrap().unwrap();
        assert_eq!(r.key, Some(Data::Json(json!({"id": 7, "missing": null}))));
        let e = ExtractField::new(Side::Key, &settings(&[("field", "id")])).unwrap();
        assert_eq!(e.apply(r).unwrap().unwrap().key, Some(Data::Json(json!(7))));
        assert!(t.apply(rec(Value::Null)).is_err(), "Connect refuses a null value");
    }

    #[test]
    fn extract_and_hoist_are_inverse() {
        let h = HoistField::new(Side::Value, &settings(&[("field", "line")])).unwrap();
        assert_eq!(value(&h, json!("text")), json!({"line": "text"}));
        let e = ExtractField::new(Side::Value, &settings(&[("field", "line")])).unwrap();
        assert_eq!(value(&e, json!({"line": "text"})), json!("text"));
        assert_eq!(e.apply(rec(json!({"other": 1}))).unwrap().unwrap().value, None);
        assert!(ExtractField::new(Side::Value, &settings(&[])).is_err());
    }

    #[test]
    fn flatten_joins_nested_names() {
        let t = Flatten::new(Side::Value, &settings(&[("delimiter", "_")])).unwrap();
        assert_eq!(value(&t, json!({"a": {"b": {"c": 1}, "d": [1]}, "e": 2})), json!({"a_b_c": 1, "a_d": [1], "e": 2}));
    }
}
