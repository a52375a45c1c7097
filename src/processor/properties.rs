//! The engine's settings from Java-style properties ([`ProcessorConfig::from_properties`]),
//! so a service keeps them in the same file as its clients' (under a prefix of its own:
//! [`Properties::with_prefix`]).

use std::time::Duration;

use super::{DeadLetter, Outcome, ProcessorConfig};
use crate::acquire_mode::AcquireMode;
use crate::config::Properties;
use crate::error::Result;

impl ProcessorConfig {
    /// Reads the engine's settings from properties; the keys have no prefix of their own,
    /// so take the engine's part of a file with [`Properties::with_prefix`]:
    ///
    /// | key | setter | default |
    /// |---|---|---|
    /// | `concurrency` | [`concurrency`](Self::concurrency) | 16 |
    /// | `prefetch` | [`prefetch`](Self::prefetch) | one per handler |
    /// | `batch.size` | [`batch_size`](Self::batch_size) | the consumer's `max.poll.records` |
    /// | `max.unstarted.ms` | [`max_unstarted`](Self::max_unstarted) | a quarter of the lock |
    /// | `max.retries` | [`max_retries`](Self::max_retries) | 3 |
    /// | `retry.backoff.ms`, `retry.backoff.max.ms` | [`retry_backoff`](Self::retry_backoff) | 100, 10000 |
    /// | `on.exhausted` (`release`, `reject`, `dead_letter`) | [`on_exhausted`](Self::on_exhausted) | `release` |
    /// | `dead.letter.topic` | [`dead_letter`](Self::dead_letter) (`DeadLetter::topic`) | none |
    /// | `shutdown.timeout.ms` | [`close_timeout`](Self::close_timeout) | 30000 |
    /// | `acquire.mode` (`auto`, `record_limit`, `batch_optimized`) | [`acquire_mode`](Self::acquire_mode) | `auto` (None) |
    ///
    /// A count or time that is not a number, or is negative, is refused naming the key;
    /// a large one is clamped as its setter clamps it. Any other key is refused (a typo
    /// must not pass silently: the view holds the engine's keys only).
    ///
    /// ```
    /// use kafka_share::config::Properties;
    /// use kafka_share::processor::ProcessorConfig;
    ///
    /// let file = Properties::parse("consumer.group.id=orders\nprocessor.concurrency=64\nprocessor.on.exhausted=reject\n")?;
    /// let config = ProcessorConfig::from_properties(&file.with_prefix("processor."))?;
    /// # Ok::<(), kafka_share::Error>(())
    /// ```
    pub fn from_properties(p: &Properties) -> Result<ProcessorConfig> {
        let d = ProcessorConfig::default();
        let count = |key: &str, default: usize| -> Result<usize> {
            let n = p.int(key, i64::try_from(default).unwrap_or(i64::MAX), 0, i64::MAX)?;
            Ok(usize::try_from(n).unwrap_or(usize::MAX))
        };
        let millis = |key: &str, default: Duration| p.millis(key, default, 0, i64::MAX);
        let mut c = d.clone().concurrency(count("concurrency", d.concurrency)?);
        if p.contains("prefetch") {
            c = c.prefetch(count("prefetch", 0)?);
        }
        if p.contains("batch.size") {
            c = c.batch_size(count("batch.size", 1)?);
        }
        if p.contains("max.unstarted.ms") {
            c = c.max_unstarted(millis("max.unstarted.ms", Duration::ZERO)?);
        }
        let retries = p.int("max.retries", i64::from(d.max_retries), 0, i64::from(u32::MAX))?;
        c = c.max_retries(u32::try_from(retries).unwrap_or(u32::MAX));
        c = c.retry_backoff(
            millis("retry.backoff.ms", d.retry_backoff)?,
            millis("retry.backoff.max.ms", d.retry_backoff_max)?,
        );
        c = c.on_exhausted(
            match p.choice("on.exhausted", "release", &["release", "reject", "dead_letter"])?.as_str() {
                "reject" => Outcome::Reject,
                "dead_letter" => Outcome::DeadLetter,
                _ => Outcome::Release,
            },
        );
        if let Some(topic) = p.get("dead.letter.topic").map(str::trim).filter(|t| !t.is_empty()) {
            c = c.dead_letter(DeadLetter::topic(topic));
        }
        c = c.close_timeout(millis("shutdown.timeout.ms", d.shutdown_timeout)?);
        c = c.acquire_mode(
            match p.choice("acquire.mode", "auto", &["auto", "record_limit", "batch_optimized"])?.as_str() {
                "record_limit" => Some(AcquireMode::RecordLimit),
                "batch_optimized" => Some(AcquireMode::BatchOptimized),
                _ => None,
            },
        );
        p.reject_unused("processing engine", &[])?;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_documented_key_is_read() {
        let p = Properties::from_pairs([
            ("concurrency", "64"),
            ("prefetch", "8"),
            ("batch.size", "100"),
            ("max.unstarted.ms", "2000"),
            ("max.retries", "5"),
            ("retry.backoff.ms", "50"),
            ("retry.backoff.max.ms", "5000"),
            ("on.exhausted", "REJECT"),
            ("shutdown.timeout.ms", "10000"),
            ("acquire.mode", "record_limit"),
            ("dead.letter.topic", "orders.dlq"),
        ]);
        let c = ProcessorConfig::from_properties(&p).expect("valid settings");
        assert_eq!((c.concurrency, c.prefetch, c.batch_size), (64, Some(8), Some(100)));
        assert_eq!(c.max_unstarted, Some(Duration::from_secs(2)));
        assert_eq!(
            (c.max_retries, c.retry_backoff, c.retry_backoff_max),
            (5, Duration::from_millis(50), Duration::from_secs(5))
        );
        assert_eq!(c.on_exhausted, Outcome::Reject);
        assert_eq!(c.shutdown_timeout, Duration::from_secs(10));
        assert_eq!(c.acquire_mode, Some(AcquireMode::RecordLimit));
        assert_eq!(c.dead_letter.as_ref().map(DeadLetter::topic_name), Some("orders.dlq"));
        let c = ProcessorConfig::from_properties(&Properties::from_pairs([("on.exhausted", "dead_letter")]));
        assert_eq!(c.expect("valid").on_exhausted, Outcome::DeadLetter);
    }

    #[test]
    fn no_keys_are_the_defaults() {
        let c = ProcessorConfig::from_properties(&Properties::new()).expect("defaults");
        let d = ProcessorConfig::default();
        assert_eq!(format!("{c:?}"), format!("{d:?}"));
    }

    #[test]
    fn from_a_shared_file_through_its_prefix() {
        let file = Properties::from_pairs([("consumer.group.id", "g"), ("processor.concurrency", "4"), ("app.x", "1")]);
        let c = ProcessorConfig::from_properties(&file.with_prefix("processor.")).expect("the engine's part");
        assert_eq!(c.concurrency, 4);
    }

    #[test]
    fn bad_values_and_unknown_keys_are_refused_naming_the_key() {
        for (k, v) in
            [("concurrency", "-1"), ("max.retries", "many"), ("on.exhausted", "accept"), ("acquire.mode", "x")]
        {
            let e = ProcessorConfig::from_properties(&Properties::from_pairs([(k, v)])).expect_err(k);
            assert!(e.to_string().contains(k), "{e}");
        }
        let e = ProcessorConfig::from_properties(&Properties::from_pairs([("concurency", "4")])).expect_err("a typo");
        assert!(e.to_string().contains("concurency"), "{e}");
        // Past the ranges: clamped as the setters clamp.
        let c = ProcessorConfig::from_properties(&Properties::from_pairs([("concurrency", "9999999999")]))
            .expect("clamped");
        assert_eq!(c.concurrency, ProcessorConfig::MAX_CONCURRENCY);
    }
}
