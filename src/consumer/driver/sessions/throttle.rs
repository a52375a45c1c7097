//! Client-side throttling (KIP-219). A broker over a quota answers at once with
//! `throttle_time_ms` and mutes that connection for as long; the client must send nothing on
//! it meanwhile (Java's `NetworkClient` holds the connection back the same way). Requests
//! sent anyway would only wait in the broker's socket, holding a fetch's wait and a commit's
//! deadline hostage to a quota the client was told about.
//!
//! Two connections matter: a broker's share-session connection (ShareFetch,
//! ShareAcknowledge), kept here, and the coordinator's (ShareGroupHeartbeat), kept by the
//! group manager (`group/`). Kept here rather than only in `Node::retry_at` because a node
//! can be dropped and made again (an assignment change) while its connection stays muted.

use std::collections::HashMap;
use std::time::{Duration, Instant};

#[derive(Debug, Default)]
pub(super) struct Throttles {
    /// Per broker: its share-session connection is muted until then.
    share: HashMap<i32, Instant>,
}

/// The end of a throttle the broker asked for, if it asked for one.
pub(in crate::consumer::driver) fn until(throttle_ms: i32, now: Instant) -> Option<Instant> {
    (throttle_ms > 0).then(|| now + Duration::from_millis(throttle_ms as u64))
}

impl Throttles {
    /// A share-session answer from `node` asked for `throttle_ms`; returns until when.
    pub(super) fn note_share(&mut self, node: i32, throttle_ms: i32, now: Instant) -> Option<Instant> {
        let t = until(throttle_ms, now)?;
        let e = self.share.entry(node).or_insert(t);
        *e = (*e).max(t);
        Some(*e)
    }

    /// Until when `node`'s share-session connection is muted, if it still is.
    pub(super) fn share_until(&self, node: i32, now: Instant) -> Option<Instant> {
        self.share.get(&node).copied().filter(|t| *t > now)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_throttle_lasts_as_long_as_the_longest_asked_and_no_longer() {
        let now = Instant::now();
        let mut t = Throttles::default();
        assert_eq!(t.note_share(1, 0, now), None, "no throttle asked");
        assert_eq!(t.share_until(1, now), None);
        let a = t.note_share(1, 500, now).unwrap();
        assert_eq!(a, now + Duration::from_millis(500));
        // A shorter one later does not cut the first short.
        assert_eq!(t.note_share(1, 100, now + Duration::from_millis(10)), Some(a));
        assert_eq!(t.share_until(1, now + Duration::from_millis(499)), Some(a));
        assert_eq!(t.share_until(1, a), None, "over at its end");
        assert_eq!(t.share_until(2, now), None, "another broker's connection is not muted");
        assert_eq!(until(-1, now), None);
        assert_eq!(until(200, now), Some(now + Duration::from_millis(200)));
    }
}
