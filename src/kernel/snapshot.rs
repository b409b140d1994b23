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
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    pub paused: bool,
    pub step_credits: u32,
    pub round: u32,
    pub running: usize,
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
