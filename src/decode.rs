//! A typed decode step: a record's bytes into the application's type, with a failure that
//! names the record (topic, partition, offset) instead of being lost.
//!
//! A [`Decode`] says how ([`Utf8`], and with the `json` feature `JsonDecoder` for any serde
//! type); [`ConsumerRecord::decode`] runs it on a polled record and the processing engine's
//! [`Processor::run_decoded`](crate::processor::Processor::run_decoded) on each record before
//! its handler, sending the records that fail to the engine's dead-letter destination
//! (or REJECTing them without one). The failure is a [`DecodeError`], Java's
//! `RecordDeserializationException`: the record's coordinates and the decoder's own error.
//!
//! ```rust
//! use kafka_share::decode::Utf8;
//! # fn f(record: kafka_share::ConsumerRecord) {
//! match record.decode(&Utf8) {
//!     Ok(text) => println!("{text}"),
//!     // e.g. "cannot decode orders-2 at offset 41 with Utf8: ..."; REJECT it, or dead-letter it.
//!     Err(e) => eprintln!("{e} ({}-{} offset {})", e.topic, e.partition, e.offset),
//! }
//! # }
//! ```

use std::sync::Arc;

use crate::consumer::ConsumerRecord;

/// A decoder's own error, before the record's coordinates are added.
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Turns a record into the application's type.
///
/// Implement it for a format of yours (Avro, Protobuf, a key and a value together): return
/// what went wrong, and [`ConsumerRecord::decode`] adds which record it was.
///
/// ```rust
/// use kafka_share::decode::{BoxError, Decode};
/// use kafka_share::ConsumerRecord;
///
/// /// A value that is a decimal number.
/// struct Amount;
///
/// impl Decode for Amount {
///     type Output = u64;
///     fn decode(&self, record: &ConsumerRecord) -> Result<u64, BoxError> {
///         Ok(record.value_str().ok_or("the value is not UTF-8 text")?.trim().parse()?)
///     }
/// }
/// ```
pub trait Decode: Send + Sync + 'static {
    /// What a record becomes.
    type Output: Send + 'static;

    /// Decodes `record` (any of its parts: value, key, headers).
    fn decode(&self, record: &ConsumerRecord) -> Result<Self::Output, BoxError>;

    /// The decoder's name in a [`DecodeError`] and on a dead-letter copy (default: its type).
    fn name(&self) -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// A record that could not be decoded: which one, by which decoder, and why (Java's
/// `RecordDeserializationException`). Its record is unprocessable as it is: a consumer
/// REJECTs it (or copies it to a dead-letter topic first); the engine does so itself.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot decode {topic}-{partition} at offset {offset} with {decoder}: {source} \
     (the record is not in the format this decoder reads: reject or dead-letter it, \
     or fix its producer)"
)]
#[non_exhaustive]
pub struct DecodeError {
    /// The record's topic.
    pub topic: Arc<str>,
    /// Its partition.
    pub partition: i32,
    /// Its offset.
    pub offset: i64,
    /// The decoder ([`Decode::name`]).
    pub decoder: &'static str,
    /// The decoder's own error.
    #[source]
    pub source: BoxError,
}

impl ConsumerRecord {
    /// Decodes this record with `decoder`; a failure names the record (see [`DecodeError`]).
    pub fn decode<D: Decode + ?Sized>(&self, decoder: &D) -> Result<D::Output, DecodeError> {
        decoder.decode(self).map_err(|source| DecodeError {
            topic: self.topic.clone(),
            partition: self.partition,
            offset: self.offset,
            decoder: decoder.name(),
            source,
        })
    }
}

/// The value as UTF-8 text (`String`); a null value or invalid UTF-8 is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct Utf8;

impl Decode for Utf8 {
    type Output = String;

    fn decode(&self, record: &ConsumerRecord) -> Result<String, BoxError> {
        let value = record.value.as_deref().ok_or(NULL_VALUE)?;
        Ok(std::str::from_utf8(value)?.to_string())
    }

    fn name(&self) -> &'static str {
        "Utf8"
    }
}

const NULL_VALUE: &str = "the value is null (a tombstone or an empty record)";

/// The value as JSON, into any serde type (feature `json`); a null value is an error.
///
/// ```rust
/// # #[cfg(feature = "json")] {
/// use kafka_share::decode::JsonDecoder;
/// # fn f(record: kafka_share::ConsumerRecord) -> Result<(), kafka_share::decode::DecodeError> {
/// let order: serde_json::Value = record.decode(&JsonDecoder::new())?;
/// # Ok(()) }
/// # }
/// ```
#[cfg(feature = "json")]
#[cfg_attr(docsrs, doc(cfg(feature = "json")))]
pub struct JsonDecoder<T> {
    // `fn() -> T`: the decoder holds no T, so it is Send and Sync whatever T is.
    _output: std::marker::PhantomData<fn() -> T>,
}

#[cfg(feature = "json")]
impl<T> JsonDecoder<T> {
    /// A decoder of `T` from JSON values.
    pub fn new() -> Self {
        JsonDecoder { _output: std::marker::PhantomData }
    }
}

#[cfg(feature = "json")]
impl<T> Default for JsonDecoder<T> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(feature = "json")]
impl<T> Clone for JsonDecoder<T> {
    fn clone(&self) -> Self {
        Self::new()
    }
}

#[cfg(feature = "json")]
impl<T> std::fmt::Debug for JsonDecoder<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "JsonDecoder<{}>", std::any::type_name::<T>())
    }
}

#[cfg(feature = "json")]
impl<T: serde::de::DeserializeOwned + Send + 'static> Decode for JsonDecoder<T> {
    type Output = T;

    fn decode(&self, record: &ConsumerRecord) -> Result<T, BoxError> {
        let value = record.value.as_deref().ok_or(NULL_VALUE)?;
        Ok(serde_json::from_slice(value)?)
    }

    fn name(&self) -> &'static str {
        "JsonDecoder"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(value: Option<&'static [u8]>) -> ConsumerRecord {
        let mut r = ConsumerRecord::for_test("orders".into(), 2, 41);
        r.value = value.map(bytes::Bytes::from_static);
        r
    }

    #[test]
    fn a_failure_names_the_record_and_the_decoder() {
        let e = record(Some(&[0xff, 0xfe])).decode(&Utf8).unwrap_err();
        assert_eq!((&*e.topic, e.partition, e.offset, e.decoder), ("orders", 2, 41, "Utf8"));
        let text = e.to_string();
        assert!(text.starts_with("cannot decode orders-2 at offset 41 with Utf8: invalid utf-8"), "{text}");
        assert!(std::error::Error::source(&e).is_some());
        let null = record(None).decode(&Utf8).unwrap_err();
        assert!(null.to_string().contains("the value is null"), "{null}");
        assert_eq!(record(Some(b"hi")).decode(&Utf8).unwrap(), "hi");
    }

    #[cfg(feature = "json")]
    #[test]
    fn json_decodes_serde_types_and_names_a_malformed_value() {
        let d = JsonDecoder::<std::collections::BTreeMap<String, u32>>::new();
        let ok = record(Some(br#"{"id":7}"#)).decode(&d).unwrap();
        assert_eq!(ok.get("id"), Some(&7));
        let e = record(Some(b"{not json")).decode(&d).unwrap_err();
        assert_eq!((e.offset, e.decoder), (41, "JsonDecoder"));
        assert!(e.to_string().contains("key must be a string"), "{e}");
        assert!(record(None).decode(&d).is_err());
        assert_eq!(
            format!("{d:?}"),
            "JsonDecoder<alloc::collections::btree::map::BTreeMap<alloc::string::String, u32>>"
        );
    }
}
