//! The cluster layout as the client sees it: what the last Metadata answer said, corrected
//! by the leaders and brokers that share answers name. The driver core reads it through its
//! `Topology` trait; the runner refreshes it from the simulated cluster when the core asks
//! for Metadata.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::cluster::{SimCluster, TOPIC};

#[derive(Debug, Default)]
struct View {
    topic_id: Option<uuid::Uuid>,
    /// Partition -> (leader, leader epoch).
    leaders: BTreeMap<i32, (i32, i32)>,
}

/// The client's view of the simulated cluster.
#[derive(Debug, Default)]
pub(crate) struct SimTopology {
    view: Mutex<View>,
}

impl SimTopology {
    fn view(&self) -> std::sync::MutexGuard<'_, View> {
        self.view.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A Metadata answer: the view becomes the cluster's truth.
    pub(crate) fn refresh(&self, c: &SimCluster) {
        let mut v = self.view();
        v.topic_id = Some(c.topic_id);
        v.leaders = c
            .parts
            .iter()
            .enumerate()
            .filter_map(|(i, p)| p.leader.map(|l| (i as i32, (l, p.leader_epoch))))
            .collect();
    }

    pub(crate) fn topic_name(&self, id: &uuid::Uuid) -> Option<Arc<str>> {
        (self.view().topic_id == Some(*id)).then(|| Arc::from(TOPIC))
    }

    pub(crate) fn leader(&self, topic: &str, partition: i32) -> Option<i32> {
        if topic != TOPIC {
            return None;
        }
        self.view().leaders.get(&partition).map(|(l, _)| *l)
    }

    pub(crate) fn learn_leader(&self, topic: &str, partition: i32, leader: i32, leader_epoch: i32) {
        if topic != TOPIC || leader < 0 {
            return;
        }
        let mut v = self.view();
        let newer = v.leaders.get(&partition).is_none_or(|(_, e)| *e < leader_epoch);
        if newer {
            v.leaders.insert(partition, (leader, leader_epoch));
        }
    }
}
