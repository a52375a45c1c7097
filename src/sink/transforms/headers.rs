//! The header transforms: DropHeaders, InsertHeader, HeaderFrom. A header's value is bytes
//! here: a string field is copied as its text, any other value as JSON.

use bytes::Bytes;
use serde_json::Value;

use super::super::data::ConnectRecord;
use super::super::transform::{list, object_of, required, Side, TransformSettings, Transformation};
use crate::protocol::records::Header;

/// DropHeaders: removes every header named in `headers`.
pub(crate) struct DropHeaders {
    names: Vec<String>,
}

impl DropHeaders {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let names = list(s, "headers");
        if names.is_empty() {
            return Err("missing setting \"headers\"".into());
        }
        Ok(DropHeaders { names })
    }
}

impl Transformation for DropHeaders {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        r.headers.retain(|h| !self.names.iter().any(|n| n.as_bytes() == h.key.as_ref()));
        Ok(Some(r))
    }
}

/// InsertHeader: adds `header` with the text `value.literal`.
pub(crate) struct InsertHeader {
    name: String,
    value: String,
}

impl InsertHeader {
    pub(crate) fn new(s: &TransformSettings) -> Result<Self, String> {
        let value = s.get("value.literal").ok_or("missing setting \"value.literal\"")?.clone();
        Ok(InsertHeader { name: required(s, "header")?.to_string(), value })
    }
}

impl Transformation for InsertHeader {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        r.headers.push(Header::new(Bytes::from(self.name.clone()), Some(Bytes::from(self.value.clone()))));
        Ok(Some(r))
    }
}

/// HeaderFrom: copies (or moves, `operation=move`) the key's or value's `fields` into the
/// `headers` of the same position.
pub(crate) struct HeaderFrom {
    side: Side,
    pairs: Vec<(String, String)>,
    remove: bool,
}

impl HeaderFrom {
    pub(crate) fn new(side: Side, s: &TransformSettings) -> Result<Self, String> {
        let (fields, headers) = (list(s, "fields"), list(s, "headers"));
        if fields.is_empty() || fields.len() != headers.len() {
            return Err(format!(
                "fields and headers must name as many entries each, at least one (got {} and {})",
                fields.len(),
                headers.len()
            ));
        }
        let remove = match required(s, "operation")? {
            "copy" => false,
            "move" => true,
            other => return Err(format!("operation={other:?}: use copy or move")),
        };
        Ok(HeaderFrom { side, pairs: fields.into_iter().zip(headers).collect(), remove })
    }
}

impl Transformation for HeaderFrom {
    fn apply(&self, mut r: ConnectRecord) -> Result<Option<ConnectRecord>, String> {
        let mut new_headers = Vec::with_capacity(self.pairs.len());
        if let Some(data) = self.side.of(&mut r) {
            let m = object_of(data, "header from field")?;
            for (field, header) in &self.pairs {
                let v = if self.remove { m.remove(field) } else { m.get(field).cloned() };
                let bytes = match v.unwrap_or(Value::Null) {
                    Value::Null => None,
                    Value::String(s) => Some(Bytes::from(s)),
                    other => Some(Bytes::from(other.to_string())),
                };
                new_headers.push(Header::new(Bytes::from(header.clone()), bytes));
            }
        }
        r.headers.extend(new_headers);
        Ok(Some(r))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn settings(pairs: &[(&str, &str)]) -> TransformSettings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn insert_then_drop() {
        let r = super::super::fields_tests_record(json!({}));
        let r = InsertHeader::new(&settings(&[("header", "h"), ("value.literal", "v")]))
            .unwrap()
            .apply(r)
            .unwrap()
            .unwrap();
        assert_eq!(r.header("h"), Some(Some(&Bytes::from_static(b"v"))));
        let r = DropHeaders::new(&settings(&[("headers", "x, h")])).unwrap().apply(r).unwrap().unwrap();
        assert!(r.headers.is_empty());
    }

    #[test]
    fn header_from_copies_or_moves_fields() {
        let s = settings(&[("fields", "id,n"), ("headers", "hid,hn"), ("operation", "move")]);
        let r = super::super::fields_tests_record(json!({"id": "a", "n": 3, "k": 1}));
        let r = HeaderFrom::new(Side::Value, &s).unwrap().apply(r).unwrap().unwrap();
        assert_eq!(r.header("hid"), Some(Some(&Bytes::from_static(b"a"))));
        assert_eq!(r.header("hn"), Some(Some(&Bytes::from_static(b"3"))));
        assert_eq!(r.value, Some(super::super::super::data::Data::Json(json!({"k": 1}))));
        assert!(HeaderFrom::new(Side::Value, &settings(&[("fields", "a"), ("headers", "x,y"), ("operation", "copy")]))
            .is_err());
    }
}
