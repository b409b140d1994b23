//! Capacity as the run's signals tell it: each instance's state, what it
//! ran and how long it was busy, the operations waiting, the last release.

use std::sync::Arc;

use indexmap::{IndexMap, IndexSet};
use rustc_hash::FxBuildHasher;
use serde::{Deserialize, Serialize};

use crate::kernel::SignalKind;
use crate::vocab::{InstanceState, Lifetime};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Instance {
    pub name: Arc<str>,
    pub profile: Arc<str>,
    pub role: Arc<str>,
    pub state: InstanceState,
    pub lifetime: Lifetime,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<Arc<str>>,
    /// Busy time so far, seconds (up to `busy_since`, when busy now).
    #[serde(default)]
    pub busy_secs: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_since: Option<f64>,
    /// The operations it ran, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Arc<str>>,
    /// When it entered its state (seconds since the run started): how
    /// long an idle instance has been idle, which the operator weighs
    /// before releasing it.
    #[serde(default)]
    pub since: f64,
}

impl Instance {
    /// Busy time up to `now` (for one still busy).
    pub fn busy_until(&self, now: f64) -> f64 {
        self.busy_secs + self.busy_since.map_or(0.0, |s| (now - s).max(0.0))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Release {
    pub trigger: Arc<str>,
    pub at: f64,
    pub released: Vec<Arc<str>>,
    /// (name, reason)
    pub retained: Vec<(Arc<str>, Arc<str>)>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CapacityState {
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub instances: IndexMap<Arc<str>, Instance, FxBuildHasher>,
    /// Operations (by index) waiting for capacity now.
    #[serde(skip)]
    pub waiting: IndexSet<u32, FxBuildHasher>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_release: Option<Release>,
    /// A `[cluster]` run's workers as last said, and when.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<(Arc<[crate::kernel::WorkerSeen]>, f64)>,
}

impl CapacityState {
    pub fn apply(&mut self, kind: &SignalKind, at: f64) {
        match kind {
            SignalKind::Instance {
                name,
                profile,
                role,
                state,
                lifetime,
                op,
                ..
            } => {
                let x = self
                    .instances
                    .entry(name.clone())
                    .or_insert_with(|| Instance {
                        name: name.clone(),
                        profile: profile.clone(),
                        role: role.clone(),
                        state: *state,
                        lifetime: *lifetime,
                        op: None,
                        busy_secs: 0.0,
                        busy_since: None,
                        operations: Vec::new(),
                        since: at,
                    });
                if let Some(since) = x.busy_since.take() {
                    x.busy_secs += (at - since).max(0.0);
                }
                if *state == InstanceState::Busy {
                    x.busy_since = Some(at);
                    if let Some(o) = op
                        && x.operations.last() != Some(o)
                    {
                        x.operations.push(o.clone());
                    }
                }
                if x.state != *state {
                    x.since = at;
                }
                x.state = *state;
                x.lifetime = *lifetime;
                x.op = op.clone();
            }
            SignalKind::CapacityReleased {
                trigger,
                released,
                retained,
            } => {
                self.last_release = Some(Release {
                    trigger: trigger.clone(),
                    at,
                    released: released.to_vec(),
                    retained: retained
                        .iter()
                        .map(|r| (r.name.clone(), r.reason.clone()))
                        .collect(),
                });
            }
            SignalKind::Workers { workers } => self.workers = Some((workers.clone(), at)),
            _ => {}
        }
    }

    /// Instances that count against the limits.
    pub fn active(&self) -> usize {
        self.instances
            .values()
            .filter(|i| i.state.is_active())
            .count()
    }
}
