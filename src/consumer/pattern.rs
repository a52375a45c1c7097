//! Pattern subscriptions: [`ShareConsumer::subscribe_pattern`].
//!
//! The handle compiles the pattern (so a bad one is an error at once) and hands it to the
//! driver, which lists the cluster's topics now and every `metadata.max.age.ms`
//! (`driver/pattern.rs`) and subscribes the member to the names that match. The names matched
//! last are kept in the subscription (`driver/topic_pattern.rs`), for
//! [`ShareConsumer::subscription`].

use std::sync::Arc;

use super::callback;
use super::driver::topic_pattern::{PatternSubscription, TopicPattern};
use super::ShareConsumer;
use crate::error::{Error, Result};

impl ShareConsumer {
    /// Subscribes to every topic whose whole name matches `pattern`, now and later, replacing
    /// any earlier subscription (topic names or pattern), as franz-go's regex consumption or
    /// the Java consumer's `subscribe(Pattern)` (Java's share consumer has no pattern
    /// subscription).
    ///
    /// - `pattern` is a [`regex`](https://docs.rs/regex) crate regex, matched against the
    ///   **whole** topic name (as Java's `Pattern.matcher(name).matches()`): `orders\..*`
    ///   matches `orders.eu` but not `old-orders.eu`; `orders` matches only `orders`. Java
    ///   patterns of the usual kinds (`.`, `*`, `+`, `[a-z]`, `\d`, `|`, `(?i)`) mean the same;
    ///   look-around and back-references do not exist in this syntax.
    /// - Internal topics (names starting with `__`, such as `__consumer_offsets`) never match.
    /// - An invalid pattern fails at once with [`Error::InvalidArgument`] (naming the pattern
    ///   and what is wrong with it), and the subscription is left as it was.
    /// - As with [`subscribe`](Self::subscribe), the next [`poll`](Self::poll) sends it: the
    ///   consumer then lists the cluster's topics (a Metadata request for all topics) and joins
    ///   the group with the names that match. It lists them again every `metadata.max.age.ms`
    ///   (5 minutes): a matching topic created later is consumed from the next listing on, and
    ///   a deleted one is dropped. While no topic matches, the member stays out of the group;
    ///   polls return nothing.
    /// - [`subscription`](Self::subscription) returns the topics matched by the last listing
    ///   (none until the first, after the next poll). [`subscribe`](Self::subscribe) with topic
    ///   names replaces the pattern; [`unsubscribe`](Self::unsubscribe) drops it.
    ///
    /// ```no_run
    /// # async fn f(consumer: &kafka_share::ShareConsumer) -> kafka_share::Result<()> {
    /// consumer.subscribe_pattern(r"orders\..*")?;
    /// let records = consumer.poll(std::time::Duration::from_secs(1)).await?;
    /// # Ok(()) }
    /// ```
    pub fn subscribe_pattern(&self, pattern: &str) -> Result<()> {
        callback::refuse_reentry()?;
        let pattern = TopicPattern::new(pattern)?;
        let mut local = self.lock();
        if self.is_closed() {
            return Err(Error::Closed);
        }
        local.subscription.clear();
        local.pattern = Some(Arc::new(PatternSubscription::new(pattern)));
        // As with names, the next poll hands it to the driver (and so joins the group).
        local.subscription_pending = true;
        Ok(())
    }
}
