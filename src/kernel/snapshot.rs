//! A consistent picture of a run at one sequence number: what a lagging
//! observer resynchronises from, and what the final state looks like.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::graph::OpId;
use super::lane::Lane;
use super::ledger::LedgerEntry;
use super::signal::Outcome;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeStatus {
    /// Waiting for dependencies.
    Pending,
    AwaitingApproval,
    /// Dependencies met and approved: waiting for a slot, a step or a release.
    Ready,
    Running,
    Succeeded,
    /// Completed with an escalation.
    Escalated,
    Failed,
    Skipped,
}

impl NodeStatus {
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            NodeStatus::Succeeded
                | NodeStatus::Escalated
                | NodeStatus::Failed
                | NodeStatus::Skipped
        )
    }
}

/// A dependency's outcome as a gate's basis sees it: settled one way or
/// another, or not yet (pending, ready, running and waiting are one: a
/// view may see them a moment apart, and none of them is an outcome).
fn outcome(s: NodeStatus) -> u8 {
    match s {
        NodeStatus::Succeeded => b's',
        NodeStatus::Escalated => b'e',
        NodeStatus::Failed => b'f',
        NodeStatus::Skipped => b'k',
        _ => b'-',
    }
}

/// A gate's dependencies' outcomes, as eight hex digits: the kernel and
/// every view compute it the same way from what they hold, so a view that
/// showed another outcome sends another digest. Order does not matter.
pub fn deps_digest(deps: impl Iterator<Item = (OpId, NodeStatus)>) -> String {
    let mut v: Vec<(OpId, u8)> = deps.map(|(id, s)| (id, outcome(s))).collect();
    v.sort_unstable();
    let mut h = crc32fast::Hasher::new();
    for (id, o) in v {
        h.update(id.as_bytes());
        h.update(&[o]);
    }
    format!("{:08x}", h.finalize())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeSnapshot {
    pub op_id: OpId,
    pub name: Arc<str>,
    pub role: Option<Arc<str>>,
    pub instruction: Arc<str>,
    pub lane: Lane,
    pub status: NodeStatus,
    pub held: bool,
    pub approval: bool,
    pub parent_id: Option<OpId>,
    pub depends_on: Arc<[OpId]>,
    pub attempt: u32,
    pub lane_since: f64,
    pub queued_at: f64,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub result: Option<Arc<Value>>,
    pub error: Option<Arc<str>>,
    /// The exact blocker of an operation that has not started.
    pub waiting_for: Option<String>,
    /// What a decision on it answers now, and the question it waits on
    /// (boxed: few operations wait for the operator).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deciding: Option<Box<Deciding>>,
}

/// What an operation waiting for the operator (or failed, or escalated)
/// is decided on: the basis a decision names, and for a question what it
/// asks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Deciding {
    pub basis: super::basis::Basis,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<AskedNow>,
    /// A gate's dependencies' outcomes, in words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gate: Option<Arc<str>>,
}

/// A question as it waits: its kind, what it is about in a line, and what
/// answering it allows, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AskedNow {
    pub kind: super::agent::QuestionKind,
    pub what: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    pub paused: bool,
    pub step_credits: u32,
    pub round: u32,
    pub running: usize,
    /// Of `running`, attempts whose work waits for the operator: a review,
    /// a merge conflict (their agents are done; the operator decides).
    #[serde(default)]
    pub awaiting_operator: usize,
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    pub spawn_accepted: usize,
    /// The operator's own adds (not counted in `spawn_accepted`).
    #[serde(default)]
    pub operator_added: usize,
    pub finished: Option<Outcome>,
    /// Why the event log cannot be written now (nothing new starts).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Arc<str>>,
    /// What the run spent (USD, tokens) and the caps in force.
    #[serde(default)]
    pub spent: (f64, f64),
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<super::spend::Budget>,
    /// Ready work a reached cap holds back.
    #[serde(default)]
    pub held_by_cap: usize,
    /// A `[cluster]` run's workers as last said, and when (run seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<(Arc<[super::signal::WorkerSeen]>, f64)>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The last signal this snapshot includes.
    pub seq: u64,
    pub elapsed: f64,
    pub run: RunState,
    /// In insertion order (an overview: only failed and escalated ones).
    pub nodes: Vec<NodeSnapshot>,
    /// How many operations are in each lane.
    #[serde(default)]
    pub counts: super::signal::LaneCounts,
    /// Every row (an overview: only the dropped ones).
    pub ledger: Vec<LedgerEntry>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deps_digest_changes_with_an_outcome_and_not_with_order_or_waiting() {
        let (a, b) = (OpId::new_v4(), OpId::new_v4());
        let d1 = deps_digest([(a, NodeStatus::Succeeded), (b, NodeStatus::Failed)].into_iter());
        let d2 = deps_digest([(b, NodeStatus::Failed), (a, NodeStatus::Succeeded)].into_iter());
        assert_eq!(d1, d2);
        let d3 = deps_digest([(a, NodeStatus::Succeeded), (b, NodeStatus::Running)].into_iter());
        assert_ne!(d1, d3);
        let d4 = deps_digest([(a, NodeStatus::Succeeded), (b, NodeStatus::Pending)].into_iter());
        assert_eq!(d3, d4, "not settled is one outcome");
        assert_eq!(d1.len(), 8);
    }
}
