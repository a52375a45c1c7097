//! [`ShareConsumer::stream`]: the poll loop as a [`futures::Stream`] of records.
//!
//! ```no_run
//! # async fn demo() -> kafka_share::Result<()> {
//! use std::time::Duration;
//! use futures::StreamExt;
//! use kafka_share::{ShareConsumer, ShareConsumerConfig};
//!
//! let consumer = ShareConsumer::connect(ShareConsumerConfig::new("127.0.0.1:19092", "g")).await?;
//! consumer.subscribe(["orders"])?;
//! let mut records = consumer.stream(Duration::from_secs(1));
//! while let Some(record) = records.next().await {
//!     let record = record?; // or match: a failed poll is yielded, and the stream goes on
//!     println!("{}-{}@{}", record.topic, record.partition, record.offset);
//! }
//! // The stream ends once the consumer is closed (e.g. by another task).
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::Duration;

use futures::stream::{Stream, StreamExt};

use super::{ConsumerRecord, ShareConsumer};
use crate::error::{Error, Result};

impl ShareConsumer {
    /// The records of successive [`poll`](Self::poll)s, one by one.
    ///
    /// - It polls (waiting up to `poll_timeout`) only when the last batch is used up and the
    ///   next item is asked for. Polls that return no records yield nothing: the stream just
    ///   polls again.
    /// - A failed poll is yielded as `Err` and the stream goes on (the next item polls again),
    ///   so decide in your loop whether to stop. That includes [`Error::Wakeup`] after
    ///   [`wakeup`](Self::wakeup), and a fatal group error, which every later poll repeats.
    /// - [`Error::Closed`] is not yielded: the stream ends once the consumer is closed.
    ///
    /// Acknowledgement works as with `poll`: in implicit mode the next poll accepts the last
    /// batch; in explicit mode acknowledge each record before asking for the record after the
    /// last one of its batch (the next poll fails with [`Error::UnacknowledgedRecords`] otherwise).
    ///
    /// Dropping a pending `next()` (e.g. in `tokio::select!`) is safe: the poll in flight
    /// lives in the stream and its records come out of the next `next()`. Dropping the stream
    /// while a poll is in flight leaves those records held until `close` releases them.
    pub fn stream(&self, poll_timeout: Duration) -> impl Stream<Item = Result<ConsumerRecord>> + Send + Unpin + '_ {
        records(move || self.poll(poll_timeout))
    }
}

/// The stream over any poll function (a scripted one in the tests).
fn records<'a, F, Fut>(poll: F) -> impl Stream<Item = Result<ConsumerRecord>> + Send + Unpin + 'a
where
    F: FnMut() -> Fut + Send + 'a,
    Fut: Future<Output = Result<Vec<ConsumerRecord>>> + Send + 'a,
{
    struct State<F> {
        poll: F,
        batch: std::vec::IntoIter<ConsumerRecord>,
    }
    let start = State { poll, batch: Vec::new().into_iter() };
    futures::stream::unfold(start, |mut s| async move {
        loop {
            if let Some(r) = s.batch.next() {
                return Some((Ok(r), s));
            }
            match (s.poll)().await {
                Ok(batch) => s.batch = batch.into_iter(),
                Err(Error::Closed) => return None,
                Err(e) => return Some((Err(e), s)),
            }
        }
    })
    // Boxed once so the stream is Unpin (`stream.next().await` works without pinning), and
    // fused so asking again after the end is a harmless `None`.
    .boxed()
    .fuse()
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use super::*;

    fn rec(offset: i64) -> ConsumerRecord {
        ConsumerRecord::for_test(Arc::from("t"), 0, offset)
    }

    /// A poll function that answers from a script and counts its calls; once the script is
    /// used up it answers `Closed`.
    fn scripted(
        script: Vec<Result<Vec<ConsumerRecord>>>,
    ) -> (impl FnMut() -> futures::future::Ready<Result<Vec<ConsumerRecord>>> + Send, Arc<AtomicUsize>) {
        let calls = Arc::new(AtomicUsize::new(0));
        let script = Mutex::new(VecDeque::from(script));
        let c = calls.clone();
        let poll = move || {
            c.fetch_add(1, Ordering::SeqCst);
            futures::future::ready(script.lock().unwrap().pop_front().unwrap_or(Err(Error::Closed)))
        };
        (poll, calls)
    }

    fn offset(item: Option<Result<ConsumerRecord>>) -> i64 {
        item.expect("an item").expect("a record").offset
    }

    #[tokio::test]
    async fn yields_records_one_by_one_skipping_empty_polls_and_ends_on_closed() {
        let (poll, calls) = scripted(vec![Ok(vec![rec(0), rec(1)]), Ok(vec![]), Ok(vec![]), Ok(vec![rec(2)])]);
        let mut s = records(poll);
        assert_eq!(offset(s.next().await), 0);
        assert_eq!(offset(s.next().await), 1);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "no poll while the batch lasts");
        assert_eq!(offset(s.next().await), 2);
        assert_eq!(calls.load(Ordering::SeqCst), 4, "the empty polls were polled through");
        assert!(s.next().await.is_none(), "Closed ends the stream");
        assert!(s.next().await.is_none(), "and it stays ended");
        assert_eq!(calls.load(Ordering::SeqCst), 5, "no poll after the end");
    }

    #[tokio::test]
    async fn errors_are_yielded_and_the_stream_goes_on() {
        let (poll, _) = scripted(vec![
            Err(Error::Wakeup),
            Ok(vec![rec(7)]),
            Err(Error::InvalidArgument("x".into())),
            Err(Error::Timeout { what: "poll".into(), after: Duration::from_secs(1) }),
            Ok(vec![rec(8)]),
        ]);
        let mut s = records(poll);
        assert!(matches!(s.next().await, Some(Err(Error::Wakeup))));
        assert_eq!(offset(s.next().await), 7);
        assert!(matches!(s.next().await, Some(Err(Error::InvalidArgument(_)))));
        assert!(matches!(s.next().await, Some(Err(Error::Timeout { .. }))));
        assert_eq!(offset(s.next().await), 8);
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn closed_as_the_first_answer_is_an_empty_stream() {
        let (poll, calls) = scripted(vec![]);
        let items: Vec<_> = records(poll).collect().await;
        assert!(items.is_empty());
        assert_eq!(calls.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn nothing_is_polled_until_the_first_item_is_asked_for() {
        let (poll, calls) = scripted(vec![Ok(vec![rec(0)])]);
        let s = records(poll);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
        drop(s);
        assert_eq!(calls.load(Ordering::SeqCst), 0);
    }

    // Paused time: the 5 ms give-up must come before the poll's 50 ms answer. On the real
    // clock a loaded machine can stall past both, and then the answer wins.
    #[tokio::test(start_paused = true)]
    async fn a_dropped_next_keeps_the_poll_in_flight() {
        // The first poll answers only after a while; a `next()` given up on (as a losing
        // select! branch does) must not lose that poll's records.
        let calls = Arc::new(AtomicUsize::new(0));
        let c = calls.clone();
        let mut s = records(move || {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                match n {
                    0 => {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok(vec![rec(42)])
                    }
                    _ => Err(Error::Closed),
                }
            }
        });
        let first = tokio::time::timeout(Duration::from_millis(5), s.next()).await;
        assert!(first.is_err(), "timed out while the poll was in flight");
        assert_eq!(offset(s.next().await), 42);
        assert_eq!(calls.load(Ordering::SeqCst), 1, "the same poll, not a second one");
        assert!(s.next().await.is_none());
    }
}
