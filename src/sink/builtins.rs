//! The built-in connector classes: [`Registry::with_builtins`].
//!
//! | `connector.class` | sink | feature |
//! |---|---|---|
//! | `file`, `org.apache.kafka.connect.file.FileStreamSinkConnector` | [`FileSink`](super::FileSink) | `sink` |
//! | `kafka` | [`KafkaSink`](super::KafkaSink) | `sink` |
//! | `http` | `HttpSink` | `sink-http` |
//! | `postgres` | `PostgresSink` | `sink-postgres` |
//! | `io.confluent.connect.jdbc.JdbcSinkConnector` | `PostgresSink::jdbc` (`table.layout=fields`) | `sink-postgres` |
//!
//! Also the converters (`converter.rs`), transforms and predicates (`transforms/`), under
//! their short names and Connect's class names.
//!
//! Each factory checks its settings before it makes a task, so a connector with a bad
//! configuration is refused before any of its tasks starts.

use super::file::FileSink;
use super::kafka::KafkaSink;
use super::registry::Registry;
use super::task::{SinkError, SinkTask, TaskConfig};

/// Kafka Connect's class name for its file sink, accepted so a Connect user's file works.
pub const CONNECT_FILE_SINK_CLASS: &str = "org.apache.kafka.connect.file.FileStreamSinkConnector";

fn file_task(config: &TaskConfig) -> Result<Box<dyn SinkTask>, SinkError> {
    FileSink::check_config(config)?;
    Ok(Box::new(FileSink::new()))
}

impl Registry {
    /// A registry with every built-in sink this build has (see the module docs).
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        r.register("file", file_task);
        r.register(CONNECT_FILE_SINK_CLASS, file_task);
        r.register("kafka", KafkaSink::factory());
        // Converters, transforms and predicates: built-ins under short and Connect's names.
        for (name, f) in super::converter::builtins() {
            r.converters.insert(name.to_string(), f);
        }
        for (name, f) in super::transforms::builtins() {
            r.transforms.insert(name, f);
        }
        for (name, f) in super::transforms::builtin_predicates() {
            r.predicates.insert(name, f);
        }
        #[cfg(feature = "sink-http")]
        r.register("http", |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
            super::http::HttpSink::check_config(config)?;
            Ok(Box::new(super::http::HttpSink::new()))
        });
        #[cfg(feature = "sink-postgres")]
        r.register("postgres", |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
            super::postgres::PostgresSink::check_config(config)?;
            Ok(Box::new(super::postgres::PostgresSink::new()))
        });
        #[cfg(feature = "sink-postgres")]
        r.register(
            super::postgres::CONNECT_JDBC_SINK_CLASS,
            |config: &TaskConfig| -> Result<Box<dyn SinkTask>, SinkError> {
                super::postgres::PostgresSink::check_jdbc_config(config)?;
                Ok(Box::new(super::postgres::PostgresSink::jdbc()))
            },
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_registered_and_check_their_settings() {
        let r = Registry::with_builtins();
        let classes: Vec<&str> = r.classes().collect();
        for c in ["file", CONNECT_FILE_SINK_CLASS, "kafka"] {
            assert!(classes.contains(&c), "{c} missing from {classes:?}");
        }
        assert_eq!(classes.contains(&"http"), cfg!(feature = "sink-http"));
        assert_eq!(classes.contains(&"postgres"), cfg!(feature = "sink-postgres"));
        let jdbc = "io.confluent.connect.jdbc.JdbcSinkConnector";
        assert_eq!(classes.contains(&jdbc), cfg!(feature = "sink-postgres"));
        let empty = TaskConfig::new();
        assert!(r.get("file").unwrap().create(&empty).is_ok(), "no file setting means standard output");
        let e = r.get("kafka").unwrap().create(&empty).err().unwrap().to_string();
        assert!(e.contains("target.topic"), "{e}");
    }
}
