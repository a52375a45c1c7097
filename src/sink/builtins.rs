//! STUB until the sinks helper's built-ins land (issue 13): only a minimal `file` sink, so
//! the binary's tests have a sink to run. The real one replaces this file on merge.

use futures::future::BoxFuture;
use std::io::Write;

use super::registry::Registry;
use super::task::{SinkError, SinkRecord, SinkTask, TaskConfig};

impl Registry {
    /// The built-in sinks (in this stub: `file`, and Connect's FileStreamSinkConnector name).
    pub fn with_builtins() -> Registry {
        let mut r = Registry::new();
        r.register("file", |_: &TaskConfig| Ok(Box::new(FileSink { file: None }) as Box<dyn SinkTask>));
        r.register("org.apache.kafka.connect.file.FileStreamSinkConnector", |_: &TaskConfig| {
            Ok(Box::new(FileSink { file: None }) as Box<dyn SinkTask>)
        });
        r
    }
}

/// One record value per line, appended (so several tasks and processes can share a file).
struct FileSink {
    file: Option<std::fs::File>,
}

impl SinkTask for FileSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        let path = config.get("file").cloned();
        Box::pin(async move {
            let path = path.ok_or_else(|| SinkError::fatal("file: missing the `file` setting (the output path)"))?;
            let f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&path)
                .map_err(|e| SinkError::fatal(format!("file {path}: {e}")))?;
            self.file = Some(f);
            Ok(())
        })
    }

    fn put<'a>(&'a mut self, records: &'a [SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            let mut out = Vec::new();
            for r in records {
                match &r.value {
                    Some(v) => out.extend_from_slice(&String::from_utf8_lossy(v).into_owned().into_bytes()),
                    None => out.extend_from_slice(b"null"),
                }
                out.push(b'\n');
            }
            let f = self.file.as_mut().ok_or_else(|| SinkError::fatal("file: put before start"))?;
            // One write per batch: with O_APPEND, writers in other processes do not interleave.
            f.write_all(&out).map_err(|e| SinkError::retriable(format!("file write: {e}")))
        })
    }

    fn flush(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            if let Some(f) = self.file.as_mut() {
                f.sync_data().map_err(|e| SinkError::retriable(format!("file sync: {e}")))?;
            }
            Ok(())
        })
    }
}
