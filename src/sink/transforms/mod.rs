//! The built-in transforms and predicates (see `transform.rs` for the traits), registered by
//! [`builtins`] and [`builtin_predicates`] under Connect's class names and the same names
//! without the package.

mod cast;
mod date_format;
mod fields;
pub(crate) mod flat;
mod headers;
mod predicates;
mod routing;
mod timestamp;

use std::sync::Arc;

use super::transform::{
    Predicate, PredicateFactory, Side, TransformFactory, TransformSettings, Transformation, CONNECT_PREDICATES_PACKAGE,
    CONNECT_TRANSFORMS_PACKAGE,
};

type Make = fn(&TransformSettings) -> Result<Box<dyn Transformation>, String>;

fn boxed<T: Transformation>(t: Result<T, String>) -> Result<Box<dyn Transformation>, String> {
    t.map(|t| Box::new(t) as Box<dyn Transformation>)
}

/// (name without the package, constructor), the `$Key` / `$Value` forms apart.
const TRANSFORMS: &[(&str, Make)] = &[
    ("InsertField$Key", |s| boxed(fields::InsertField::new(Side::Key, s))),
    ("InsertField$Value", |s| boxed(fields::InsertField::new(Side::Value, s))),
    ("ReplaceField$Key", |s| boxed(fields::ReplaceField::new(Side::Key, s))),
    ("ReplaceField$Value", |s| boxed(fields::ReplaceField::new(Side::Value, s))),
    ("MaskField$Key", |s| boxed(fields::MaskField::new(Side::Key, s))),
    ("MaskField$Value", |s| boxed(fields::MaskField::new(Side::Value, s))),
    ("ValueToKey", |s| boxed(fields::ValueToKey::new(s))),
    ("ExtractField$Key", |s| boxed(fields::ExtractField::new(Side::Key, s))),
    ("ExtractField$Value", |s| boxed(fields::ExtractField::new(Side::Value, s))),
    ("HoistField$Key", |s| boxed(fields::HoistField::new(Side::Key, s))),
    ("HoistField$Value", |s| boxed(fields::HoistField::new(Side::Value, s))),
    ("Flatten$Key", |s| boxed(fields::Flatten::new(Side::Key, s))),
    ("Flatten$Value", |s| boxed(fields::Flatten::new(Side::Value, s))),
    ("Cast$Key", |s| boxed(cast::Cast::new(Side::Key, s))),
    ("Cast$Value", |s| boxed(cast::Cast::new(Side::Value, s))),
    ("TimestampConverter$Key", |s| boxed(timestamp::TimestampConverter::new(Side::Key, s))),
    ("TimestampConverter$Value", |s| boxed(timestamp::TimestampConverter::new(Side::Value, s))),
    ("RegexRouter", |s| boxed(routing::RegexRouter::new(s))),
    ("TimestampRouter", |s| boxed(routing::TimestampRouter::new(s))),
    ("Filter", |_| boxed(Ok(routing::Filter))),
    ("DropHeaders", |s| boxed(headers::DropHeaders::new(s))),
    ("InsertHeader", |s| boxed(headers::InsertHeader::new(s))),
    ("HeaderFrom$Key", |s| boxed(headers::HeaderFrom::new(Side::Key, s))),
    ("HeaderFrom$Value", |s| boxed(headers::HeaderFrom::new(Side::Value, s))),
];

type MakePredicate = fn(&TransformSettings) -> Result<Box<dyn Predicate>, String>;

const PREDICATES: &[(&str, MakePredicate)] = &[
    ("TopicNameMatches", |s| predicates::TopicNameMatches::new(s).map(|p| Box::new(p) as Box<dyn Predicate>)),
    ("HasHeaderKey", |s| predicates::HasHeaderKey::new(s).map(|p| Box::new(p) as Box<dyn Predicate>)),
    ("RecordIsTombstone", |_| Ok(Box::new(predicates::RecordIsTombstone) as Box<dyn Predicate>)),
];

/// Every built-in transform's factory, under Connect's class name and the short name.
pub(crate) fn builtins() -> Vec<(String, TransformFactory)> {
    let mut out = Vec::with_capacity(TRANSFORMS.len() * 2);
    for &(name, make) in TRANSFORMS {
        let f: TransformFactory = Arc::new(make);
        out.push((format!("{CONNECT_TRANSFORMS_PACKAGE}{name}"), f.clone()));
        out.push((name.to_string(), f));
    }
    out
}

/// Every built-in predicate's factory, under Connect's class name and the short name.
pub(crate) fn builtin_predicates() -> Vec<(String, PredicateFactory)> {
    let mut out = Vec::with_capacity(PREDICATES.len() * 2);
    for &(name, make) in PREDICATES {
        let f: PredicateFactory = Arc::new(make);
        out.push((format!("{CONNECT_PREDICATES_PACKAGE}{name}"), f.clone()));
        out.push((name.to_string(), f));
    }
    out
}

/// A record of `orders`-2@42 with `value`, for the transforms' tests.
#[cfg(test)]
pub(crate) fn fields_tests_record(value: serde_json::Value) -> super::data::ConnectRecord {
    super::data::ConnectRecord {
        topic: "orders".into(),
        partition: 2,
        offset: 42,
        timestamp: 1_700_000_000_000,
        key: None,
        value: super::data::Data::from_json(value),
        headers: Vec::new(),
        key_schema: None,
        value_schema: None,
    }
}
