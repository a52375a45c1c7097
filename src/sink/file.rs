//! The `file` sink task; its settings and behaviour are documented on [`FileSink`], the one
//! public path (`kafka_share::sink::FileSink`).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;

use futures::future::BoxFuture;

use super::task::{SinkError, SinkRecord, SinkTask, TaskConfig};
use super::writer_thread::WriterThread;

/// The path setting.
pub(crate) const FILE_CONFIG: &str = "file";
/// Sync after every `put` (`true`/`false`).
pub(crate) const FSYNC_ON_PUT_CONFIG: &str = "file.fsync.on.put";

/// Where the lines go.
enum Output {
    Stdout,
    File { file: File, path: PathBuf },
}

impl Output {
    fn name(&self) -> String {
        match self {
            Output::Stdout => "standard output".to_string(),
            Output::File { path, .. } => path.display().to_string(),
        }
    }
}

/// The `file` sink: one record per line, as Kafka Connect's `FileStreamSinkTask` writes it
/// (`connector.class=file`, or Connect's own class name
/// `org.apache.kafka.connect.file.FileStreamSinkConnector`, so a Connect user's file works).
///
/// # Settings
///
/// | key | default | meaning |
/// |---|---|---|
/// | `file` | (none: standard output) | the file to append to, created if missing; absent or empty writes to standard output, as FileStreamSink does |
/// | `file.fsync.on.put` | `false` | `true`: every `put` also syncs the file's data to disk before it returns |
///
/// # What a line is
/// FileStreamSink prints `record.value()` with `PrintStream.println`: the value's `toString`
/// and a newline. A value that is UTF-8 text is written as is; other bytes are written as
/// UTF-8 with invalid sequences replaced by U+FFFD (Connect would print `[B@1b6d3586` for a
/// byte array, which helps nobody); a null value is the line `null`. Keys, headers and
/// offsets are not written, as in FileStreamSink.
///
/// # Durability, and why ACCEPT after `put` is honest
/// A batch is formatted into one buffer and handed to the kernel with a single `write_all`
/// before `put` returns, so once the runtime ACCEPTs it the lines survive a crash (even
/// `kill -9`) of this process: that is what Connect's FileStreamSink gives too (its `flush`
/// only flushes the `PrintStream`), and `flush` here adds nothing for a file (the runtime
/// flushes before every acknowledgement: a disk sync there would be one per batch). With
/// `file.fsync.on.put=true` every `put` syncs before returning: the lines also survive a
/// crash of the machine at ACCEPT time, at the cost of one disk sync per batch.
///
/// The file is opened in append mode, and one batch is one `write` call, so several tasks
/// appending to the same file interleave whole batches, not parts of lines.
///
/// The `file` sink task. Build it with [`FileSink::new`] (the registry's `file` class does).
pub struct FileSink {
    /// The thread of this task that owns the output and writes (`writer_thread.rs`), so that
    /// file IO never blocks the runtime's worker threads; set by `start`.
    output: Option<Started>,
    fsync_on_put: bool,
}

/// What `start` made: the writer thread, and what it writes to (for messages).
struct Started {
    writer: WriterThread<Output>,
    name: String,
    is_file: bool,
}

impl Default for FileSink {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for FileSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let target = self.output.as_ref().map(|o| &o.name);
        f.debug_struct("FileSink")
            .field("output", &target)
            .field("fsync_on_put", &self.fsync_on_put)
            .finish()
    }
}

impl FileSink {
    /// The path setting.
    pub const FILE_CONFIG: &'static str = FILE_CONFIG;
    /// Sync after every `put` (`true`/`false`).
    pub const FSYNC_ON_PUT_CONFIG: &'static str = FSYNC_ON_PUT_CONFIG;

    /// A task that opens its file in `start`.
    pub fn new() -> FileSink {
        FileSink { output: None, fsync_on_put: false }
    }

    /// Checks the settings without opening anything (the registry's factory calls this, so
    /// a bad configuration is refused before any task starts).
    pub fn check_config(config: &TaskConfig) -> Result<(), SinkError> {
        parse_bool(config, FSYNC_ON_PUT_CONFIG, false).map(|_| ())
    }

    /// Runs `op` on the output, on the task's writer thread.
    async fn with_output<T, F>(&self, op: F) -> Result<T, SinkError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Output) -> Result<T, SinkError> + Send + 'static,
    {
        let Some(started) = &self.output else {
            return Err(SinkError::fatal("the file sink was used before start (or after stop)"));
        };
        match started.writer.run(op).await {
            Some(r) => r,
            None => Err(SinkError::fatal(format!(
                "the file sink's writer thread for {} stopped (it panicked: see the log); restart the task",
                started.name
            ))),
        }
    }
}

/// Reads a `true`/`false` setting.
pub(crate) fn parse_bool(config: &TaskConfig, key: &str, default: bool) -> Result<bool, SinkError> {
    match config.get(key).map(|v| v.trim()) {
        None | Some("") => Ok(default),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(SinkError::fatal(format!("{key}={v:?} is not a boolean: set it to true or false"))),
    }
}

/// The lines of a batch, as FileStreamSink prints them.
pub(crate) fn format_lines(records: &[&SinkRecord]) -> Vec<u8> {
    let capacity = records.iter().map(|r| r.value.as_ref().map_or(5, |v| v.len() + 1)).sum();
    let buf = write_lines(records, capacity, |buf, v| buf.extend_from_slice(v));
    // Text is what a file sink mostly gets, and ASCII text most of all: one check of the
    // whole buffer (a word at a time) instead of a UTF-8 decode of each value, which cost
    // more than the rest of the file sink's `put` (138 instructions a 100-byte record).
    // Each value is followed by a newline, so the whole is valid UTF-8 exactly when every
    // value is (a sequence cut short at a value's end meets the newline).
    if buf.is_ascii() || std::str::from_utf8(&buf).is_ok() {
        return buf;
    }
    // Some value is not UTF-8: the lines again, the bad values decoded lossily. A valid value
    // is checked with from_utf8 first (its word-at-a-time ASCII path): the lossy decode of a
    // valid value walks it a chunk at a time, 4x the instructions of this pass in all.
    write_lines(records, buf.len(), |buf, v| match std::str::from_utf8(v) {
        Ok(_) => buf.extend_from_slice(v),
        Err(_) => buf.extend_from_slice(String::from_utf8_lossy(v).as_bytes()),
    })
}

/// One line a record: `value` writes its value, `null` stands for none. Generic over `value`
/// so that the plain pass compiles to a copy, as if written out.
fn write_lines(records: &[&SinkRecord], capacity: usize, value: impl Fn(&mut Vec<u8>, &[u8])) -> Vec<u8> {
    let mut buf = Vec::with_capacity(capacity);
    for r in records {
        match &r.value {
            None => buf.extend_from_slice(b"null"),
            Some(v) => value(&mut buf, v),
        }
        buf.push(b'\n');
    }
    buf
}

fn io_error(what: &str, output: &Output, e: std::io::Error) -> SinkError {
    // A full disk or a lost mount may pass; the batch is released and tried again. A
    // permission problem does not, but it shows at `start` (open), not here.
    SinkError::retriable(format!("{what} {} failed: {e}", output.name()))
}

impl SinkTask for FileSink {
    fn start(&mut self, config: &TaskConfig) -> BoxFuture<'_, Result<(), SinkError>> {
        let path = config.get(FILE_CONFIG).map(|p| p.trim().to_string()).filter(|p| !p.is_empty());
        let fsync = parse_bool(config, FSYNC_ON_PUT_CONFIG, false);
        Box::pin(async move {
            self.fsync_on_put = fsync?;
            let output = match path {
                None => Output::Stdout,
                Some(path) => {
                    let path = PathBuf::from(path);
                    let opened = {
                        let path = path.clone();
                        tokio::task::spawn_blocking(move || OpenOptions::new().create(true).append(true).open(path))
                            .await
                    };
                    match opened {
                        Ok(Ok(file)) => Output::File { file, path },
                        Ok(Err(e)) => {
                            return Err(SinkError::fatal(format!(
                                "file={}: cannot open it for appending: {e}; check the path and its permissions",
                                path.display()
                            )))
                        }
                        Err(e) => return Err(SinkError::fatal(format!("opening file={} failed: {e}", path.display()))),
                    }
                }
            };
            let (name, is_file) = (output.name(), matches!(output, Output::File { .. }));
            let writer = WriterThread::spawn("kafka-share-file-sink", output).map_err(|e| {
                SinkError::fatal(format!("the file sink cannot start its writer thread for {name}: {e}"))
            })?;
            self.output = Some(Started { writer, name, is_file });
            Ok(())
        })
    }

    fn put<'a>(&'a mut self, records: &'a [&'a SinkRecord]) -> BoxFuture<'a, Result<(), SinkError>> {
        Box::pin(async move {
            if records.is_empty() {
                return Ok(());
            }
            let buf = format_lines(records);
            let fsync = self.fsync_on_put;
            self.with_output(move |out| {
                match out {
                    Output::Stdout => {
                        let mut stdout = std::io::stdout().lock();
                        stdout.write_all(&buf).and_then(|_| stdout.flush())
                    }
                    Output::File { file, .. } => {
                        file.write_all(&buf).and_then(|_| if fsync { file.sync_data() } else { Ok(()) })
                    }
                }
                .map_err(|e| io_error("writing to", out, e))
            })
            .await
        })
    }

    fn flush(&mut self) -> BoxFuture<'_, Result<(), SinkError>> {
        Box::pin(async move {
            let Some(started) = &self.output else {
                return Ok(()); // never started: nothing to make durable
            };
            if started.is_file {
                // `put` handed every line to the kernel already; syncing here, per batch (the
                // runtime flushes before each acknowledgement), would cost a disk sync per
                // batch that Connect's FileStreamSink never pays (`file.fsync.on.put` asks
                // for it). Nothing to do, so no hop to the writer thread either.
                return Ok(());
            }
            self.with_output(|out| match out {
                Output::Stdout => std::io::stdout().flush().map_err(|e| io_error("flushing", out, e)),
                Output::File { .. } => Ok(()),
            })
            .await
        })
    }

    fn stop(&mut self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            if self.output.is_some() {
                // Best effort: stop has no error path, and the runtime flushed already.
                if let Err(e) = self.flush().await {
                    tracing::warn!(error = %e, "file sink: final sync failed");
                }
            }
            self.output = None;
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn booleans_name_the_key() {
        let mut c = TaskConfig::new();
        c.insert(FSYNC_ON_PUT_CONFIG.into(), "yes".into());
        let e = parse_bool(&c, FSYNC_ON_PUT_CONFIG, false).unwrap_err().to_string();
        assert!(e.contains("file.fsync.on.put"), "{e}");
        c.insert(FSYNC_ON_PUT_CONFIG.into(), "TRUE".into());
        assert!(parse_bool(&c, FSYNC_ON_PUT_CONFIG, false).unwrap());
    }

    #[tokio::test]
    async fn puts_reach_the_file_through_the_writer_thread_and_none_after_stop() {
        let path = std::env::temp_dir().join(format!("kafka-share-file-sink-{}.txt", std::process::id()));
        let mut c = TaskConfig::new();
        c.insert(FILE_CONFIG.into(), path.display().to_string());
        let mut sink = FileSink::new();
        sink.start(&c).await.expect("the file opens");
        let mut records: Vec<SinkRecord> = (0..2).map(|o| SinkRecord::for_test("t".into(), 0, o)).collect();
        records[0].value = Some(bytes::Bytes::from_static(b"one"));
        let lent: Vec<&SinkRecord> = records.iter().collect();
        sink.put(&lent).await.expect("written");
        sink.put(&lent[..1]).await.expect("written");
        assert_eq!(std::fs::read_to_string(&path).expect("the file"), "one\nnull\none\n");
        sink.stop().await;
        let e = sink.put(&lent).await.expect_err("stopped");
        assert!(matches!(&e, SinkError::Fatal { reason } if reason.contains("after stop")), "{e}");
        let _ = std::fs::remove_file(&path);
    }

    #[test]
    fn lines_are_values_lossy_utf8_or_null() {
        let mut records: Vec<SinkRecord> = (0..4).map(|o| SinkRecord::for_test("t".into(), 0, o)).collect();
        records[0].value = Some(bytes::Bytes::from_static(b"text"));
        records[2].value = Some(bytes::Bytes::from_static(&[b'a', 0xff]));
        records[3].value = Some(bytes::Bytes::new());
        let lent: Vec<&SinkRecord> = records.iter().collect();
        assert_eq!(format_lines(&lent), "text\nnull\na\u{FFFD}\n\n".as_bytes());
        // Valid UTF-8 that is not ASCII is written as it came, beside a value that is not.
        records[1].value = Some(bytes::Bytes::from("h\u{e9}".as_bytes().to_vec()));
        let lent: Vec<&SinkRecord> = records.iter().collect();
        assert_eq!(format_lines(&lent), "text\nh\u{e9}\na\u{FFFD}\n\n".as_bytes());
        let ascii: Vec<&SinkRecord> = records[..1].iter().collect();
        assert_eq!(format_lines(&ascii), b"text\n");
    }

    #[test]
    fn a_sequence_cut_at_a_value_end_is_not_joined_with_the_next_value() {
        // 0xC3 0xA9 is "\u{e9}", split across two values: each half is invalid on its own.
        let mut records: Vec<SinkRecord> = (0..3).map(|o| SinkRecord::for_test("t".into(), 0, o)).collect();
        records[0].value = Some(bytes::Bytes::from_static(&[0xc3]));
        records[1].value = Some(bytes::Bytes::from_static(&[0xa9]));
        records[2].value = Some(bytes::Bytes::from("\u{e9}".as_bytes().to_vec()));
        let lent: Vec<&SinkRecord> = records.iter().collect();
        assert_eq!(format_lines(&lent), "\u{FFFD}\n\u{FFFD}\n\u{e9}\n".as_bytes());
    }

    #[test]
    fn a_batch_of_invalid_values_only_and_an_empty_batch() {
        let mut records: Vec<SinkRecord> = (0..2).map(|o| SinkRecord::for_test("t".into(), 0, o)).collect();
        records[0].value = Some(bytes::Bytes::from_static(&[0xff, 0xfe]));
        records[1].value = Some(bytes::Bytes::from_static(&[b'x', 0x80, b'y']));
        let lent: Vec<&SinkRecord> = records.iter().collect();
        assert_eq!(format_lines(&lent), "\u{FFFD}\u{FFFD}\nx\u{FFFD}y\n".as_bytes());
        assert_eq!(format_lines(&[]), b"");
    }
}
