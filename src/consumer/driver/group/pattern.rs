//! A pattern subscription in the driver: list the cluster's topics, subscribe the member to
//! those that match, and list them again every `metadata.max.age.ms`.
//!
//! The listing is a Metadata request for all topics (`Cluster::list_topics`), as the Java
//! consumer makes for a pattern. One listing at a time; a failed one is tried again after a
//! backoff (`retry.backoff.ms` doubling to `retry.backoff.max.ms`), never in a loop. The
//! member's subscription changes only when the matched names do, so a quiet cluster costs
//! one Metadata request per interval and no heartbeat field.

use std::collections::{BTreeSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info};

use super::GroupManager;
use crate::backoff::Backoff;
use crate::consumer::driver::output::Output;
use crate::consumer::driver::topic_pattern::PatternSubscription;
use crate::consumer::driver::Transmit;
use crate::error::Result;

/// The shortest interval between listings, whatever `metadata.max.age.ms` says.
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The driver's side of a pattern subscription.
#[derive(Default)]
pub(super) struct PatternRefresh {
    /// The pattern subscribed to; `None` for a subscription by names (or none).
    current: Option<Arc<PatternSubscription>>,
    /// When to list the topics next.
    next_at: Option<Instant>,
    /// A listing is in flight. Its answer serves whichever pattern is current when it comes:
    /// the list of topics does not depend on the pattern.
    in_flight: bool,
    backoff: Backoff,
}

impl PatternRefresh {
    /// When the driver must wake up to list the topics.
    pub(super) fn wakeup(&self) -> Option<Instant> {
        self.next_at.filter(|_| self.current.is_some() && !self.in_flight)
    }

    /// A subscription by names replaces the pattern.
    pub(super) fn clear(&mut self) {
        self.current = None;
        self.next_at = None;
    }
}

impl GroupManager {
    /// A new pattern subscription: list the topics now.
    pub(in crate::consumer::driver) fn subscribe_pattern(&mut self, sub: Arc<PatternSubscription>, now: Instant) {
        self.stale = None;
        if self.closing {
            return;
        }
        debug!(pattern = sub.pattern.as_str(), "pattern subscription");
        let p = &mut self.pattern;
        p.current = Some(sub);
        p.next_at = Some(now);
        p.backoff = self.backoff.clone();
    }

    /// Sends the listing when it is due.
    pub(super) fn poll_pattern(&mut self, now: Instant, out: &mut VecDeque<Transmit>) {
        let due = self.pattern.wakeup().is_some_and(|t| t <= now);
        if !due || self.closing {
            return;
        }
        self.pattern.in_flight = true;
        out.push_back(Transmit::ListTopics);
    }

    /// A listing came back: subscribes the member to the topics that match, if they changed.
    /// Returns whether the subscription changed (the core then maps the assignment again).
    /// What the listing matched goes out as `Output::PatternMatched`, for the handle.
    pub(in crate::consumer::driver) fn handle_topic_list(
        &mut self,
        r: Result<Vec<String>>,
        now: Instant,
        out: &mut VecDeque<Output>,
    ) -> bool {
        self.pattern.in_flight = false;
        let Some(sub) = self.pattern.current.clone() else {
            return false; // the pattern was replaced by names (or dropped) meanwhile
        };
        let topics = match r {
            Ok(topics) => topics,
            Err(e) => {
                let delay = self.pattern.backoff.next_delay();
                debug!(error = %e, ?delay, "listing topics for the pattern subscription failed; trying again");
                self.pattern.next_at = Some(now + delay);
                return false;
            }
        };
        self.pattern.backoff.reset();
        self.pattern.next_at = Some(now + self.metadata_max_age.max(MIN_INTERVAL));
        let matched: BTreeSet<String> = sub.pattern.select(&topics);
        out.push_back(Output::PatternMatched { sub: sub.clone(), topics: matched.clone() });
        if self.closing || matched == *self.membership.subscription() {
            return false;
        }
        info!(pattern = sub.pattern.as_str(), topics = ?matched, "the topics matching the pattern changed");
        // As `Command::Subscribe`: an empty set leaves the group until a topic matches.
        self.membership.subscribe(matched, now);
        self.metadata.want();
        true
    }
}
