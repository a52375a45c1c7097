//! What the no-loss harness saw: every produced id, every delivery (id, partition, offset,
//! delivery count), every acknowledgement result; and the figures and violations drawn from
//! them at the end.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

/// One delivery of a record to a member.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub id: u64,
    pub partition: i32,
    pub offset: i64,
    pub delivery_count: i16,
    /// Which member: the harness's consumers are 0.., a child process says its own.
    pub member: usize,
    pub at: Instant,
}

/// Everything recorded during one run.
#[derive(Debug, Default)]
pub struct Ledger {
    /// id -> where the producer wrote it (the first time; `produced_twice` counts the rest).
    pub produced: HashMap<u64, (i32, i64)>,
    /// Ids the idempotent producer wrote at a second offset (a retry after an unknown
    /// outcome): a producer duplicate, not a redelivery.
    pub produced_twice: usize,
    /// Ids given up on after the producer's own deadline.
    pub produce_failed: usize,
    /// (partition, offset) -> id, for the acknowledgement callback.
    pub at_offset: HashMap<(i32, i64), u64>,
    pub deliveries: Vec<Delivery>,
    /// (partition, offset) -> when its ACCEPT was reported committed, and how many times.
    pub accepted: HashMap<(i32, i64), (Instant, usize)>,
    /// Every committed ACCEPT, in order of report: the stall measure.
    pub accept_times: Vec<Instant>,
    /// ACCEPTs whose outcome the client reported unknown (the request may have been applied).
    pub unknown_outcome: HashSet<(i32, i64)>,
    /// Whether the broker showed the group with nothing left to acknowledge (lag 0 on every
    /// partition) at the end: then an ACCEPT of unknown outcome whose record never came back
    /// was applied.
    pub broker_done: bool,
    /// The last failed acknowledgement result of each record, by error kind.
    pub failed_at: HashMap<(i32, i64), String>,
    /// Failed acknowledgement results by error text (offsets counted).
    pub failed_acks: BTreeMap<String, usize>,
    /// Poll errors by text.
    pub poll_errors: BTreeMap<String, usize>,
    /// (member, partition, offset) of the records a member kept unacknowledged while told to
    /// hold (see `NoLoss::hold_acks`).
    pub held: Vec<(usize, i32, i64)>,
    /// (when seen, partition, new leader, its epoch): the leader changes a watcher saw.
    pub leader_changes: Vec<(Instant, i32, i32, i32)>,
    /// Labelled moments (a kill, a restart) for the timeline.
    pub events: Vec<(Instant, String)>,
}

/// The harness figures of one run.
#[derive(Debug, Clone)]
pub struct Figures {
    pub produced: usize,
    /// Records whose ACCEPT was reported committed.
    pub accepted: usize,
    /// Records whose ACCEPT had an unknown outcome, that never came back, and that the broker
    /// counts as acknowledged: applied, though the client could not know it.
    pub accepted_unconfirmed: usize,
    /// Produced, and neither of the above.
    pub lost: usize,
    /// Deliveries beyond the first of each (partition, offset).
    pub redelivered: usize,
    /// Redeliveries whose delivery count was not above the previous delivery's, the
    /// partition's leader having changed (or a broker having stopped) since that delivery:
    /// Kafka does not persist an acquisition, so the new leader hands the record out again
    /// with the same count.
    pub same_count_after_leader_change: usize,
    /// Redeliveries whose delivery count was not above the previous delivery's, a proxied
    /// connection having ended between the two deliveries (and no leader change): when a
    /// group's last share session on a broker closes, the broker drops the group's share
    /// partitions from memory and loads them again from persisted state, which holds no
    /// acquisition (see `proxy::connections_ended`). The proxy does not tell members or
    /// brokers apart, so any connection's end counts.
    pub same_count_after_dropped_connection: usize,
    /// Redeliveries whose delivery count was not above the previous delivery's, with no
    /// leader change or dropped connection to explain it.
    pub redelivered_without_higher_count: usize,
    /// Deliveries of a record after its ACCEPT was reported committed.
    pub delivered_after_accept: usize,
    /// Records whose ACCEPT was reported committed more than once.
    pub accepted_twice: usize,
    pub produced_twice: usize,
    pub failed_acks: usize,
    pub longest_stall: Duration,
}

impl Ledger {
    pub fn note(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("chaos: {what}");
        self.events.push((Instant::now(), what));
    }

    /// Produced ids not yet ACCEPTed.
    pub fn unaccepted(&self) -> usize {
        self.produced.values().filter(|po| !self.accepted.contains_key(po)).count()
    }

    pub fn figures(&self) -> Figures {
        let accepted = self.produced.values().filter(|po| self.accepted.contains_key(po)).count();
        let accepted_unconfirmed = if self.broker_done {
            self.produced
                .values()
                .filter(|po| !self.accepted.contains_key(po) && self.unknown_outcome.contains(po))
                .count()
        } else {
            0
        };
        let mut by_offset: HashMap<(i32, i64), Vec<&Delivery>> = HashMap::new();
        for d in &self.deliveries {
            by_offset.entry((d.partition, d.offset)).or_default().push(d);
        }
        let broker_downs = super::brokers::went_down();
        let connection_ends = super::proxy::connections_ended();
        let (mut redelivered, mut not_higher, mut after_move, mut after_drop, mut after_accept) = (0, 0, 0, 0, 0);
        for (po, ds) in &mut by_offset {
            ds.sort_by_key(|d| d.at);
            redelivered += ds.len() - 1;
            for w in ds.windows(2).filter(|w| w[1].delivery_count <= w[0].delivery_count) {
                // A change seen after the earlier delivery (seen late, never early). A broker
                // stopped or killed after it counts too: the watcher samples leaders, and a
                // leadership that moves away and back between two samples (a restarted
                // broker becoming preferred leader again) is not seen.
                let moved = self.leader_changes.iter().any(|(t, p, _, _)| *p == po.0 && *t > w[0].at)
                    || broker_downs.iter().any(|t| *t > w[0].at);
                let dropped = connection_ends.iter().any(|t| *t > w[0].at && *t < w[1].at);
                if moved {
                    after_move += 1;
                } else if dropped {
                    after_drop += 1;
                } else {
                    not_higher += 1;
                }
            }
            if let Some((t, _)) = self.accepted.get(po) {
                after_accept += ds.iter().filter(|d| d.at > *t).count();
            }
        }
        let mut longest_stall = Duration::ZERO;
        for w in self.accept_times.windows(2) {
            longest_stall = longest_stall.max(w[1].saturating_duration_since(w[0]));
        }
        Figures {
            produced: self.produced.len(),
            accepted,
            accepted_unconfirmed,
            lost: self.produced.len() - accepted - accepted_unconfirmed,
            redelivered,
            same_count_after_leader_change: after_move,
            same_count_after_dropped_connection: after_drop,
            redelivered_without_higher_count: not_higher,
            delivered_after_accept: after_accept,
            accepted_twice: self.accepted.values().filter(|(_, n)| *n > 1).count(),
            produced_twice: self.produced_twice,
            failed_acks: self.failed_acks.values().sum(),
            longest_stall,
        }
    }

    /// The timeline of labelled events, relative to the first delivery.
    pub fn timeline(&self) -> String {
        let Some(t0) = self.deliveries.iter().map(|d| d.at).min() else {
            return String::new();
        };
        self.events
            .iter()
            .map(|(t, w)| format!("{:+.1}s {w}", t.saturating_duration_since(t0).as_secs_f64()))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl Figures {
    /// One line for people and one `CHAOS-FIGURES` line for scripts/chaos.
    pub fn print(&self, scenario: &str, ledger: &Ledger) {
        eprintln!(
            "chaos: {scenario}: produced {} accepted {} (+{} of unknown outcome the broker applied) lost {} redelivered {} (same count after a leader \
             change: {}, after a dropped connection: {}, not a higher count otherwise: {}, after the accept: {}, accepted twice: {}) produced twice {} failed acks {} {:?} poll errors {:?} \
             longest stall {:.2} s; timeline: {}",
            self.produced,
            self.accepted,
            self.accepted_unconfirmed,
            self.lost,
            self.redelivered,
            self.same_count_after_leader_change,
            self.same_count_after_dropped_connection,
            self.redelivered_without_higher_count,
            self.delivered_after_accept,
            self.accepted_twice,
            self.produced_twice,
            self.failed_acks,
            ledger.failed_acks,
            ledger.poll_errors,
            self.longest_stall.as_secs_f64(),
            ledger.timeline()
        );
        println!(
            "CHAOS-FIGURES {scenario} produced={} accepted={} unconfirmed={} lost={} redelivered={} failed_acks={} stall_s={:.2}",
            self.produced,
            self.accepted,
            self.accepted_unconfirmed,
            self.lost,
            self.redelivered,
            self.failed_acks,
            self.longest_stall.as_secs_f64()
        );
    }

    /// What the client owes whatever the fault: nothing lost, a redelivery only with a higher
    /// delivery count (or the same after a leader change or a dropped connection: Kafka's, see
    /// the fields), no record
    /// handed out again after its ACCEPT was committed.
    pub fn assert_no_loss(&self, scenario: &str) {
        assert_eq!(self.lost, 0, "{scenario}: records lost: {self:?}");
        assert_eq!(
            self.redelivered_without_higher_count, 0,
            "{scenario}: redelivered without a higher count: {self:?}"
        );
        assert_eq!(self.delivered_after_accept, 0, "{scenario}: delivered again after the accept: {self:?}");
        assert_eq!(self.accepted_twice, 0, "{scenario}: accepted twice: {self:?}");
    }
}
