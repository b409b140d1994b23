//! Lifecycle lanes and `lane_for` (ADR-0033 D5): the pure fold from a
//! signal to the lane an operation is in. The executor and every observer
//! use this one function, so they cannot disagree about where a node is.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Lane {
    Queued,
    Running,
    AwaitingApproval,
    Paused,
    Succeeded,
    Failed,
    Escalated,
}

impl Lane {
    pub const ALL: [Lane; 7] = [
        Lane::Queued,
        Lane::Running,
        Lane::AwaitingApproval,
        Lane::Paused,
        Lane::Succeeded,
        Lane::Failed,
        Lane::Escalated,
    ];

    pub fn is_terminal(self) -> bool {
        matches!(self, Lane::Succeeded | Lane::Failed | Lane::Escalated)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Lane::Queued => "queued",
            Lane::Running => "running",
            Lane::AwaitingApproval => "awaiting_approval",
            Lane::Paused => "paused",
            Lane::Succeeded => "succeeded",
            Lane::Failed => "failed",
            Lane::Escalated => "escalated",
        }
    }

    /// Human title, as the console and summaries print it.
    pub fn title(self) -> &'static str {
        match self {
            Lane::Queued => "queued",
            Lane::Running => "running",
            Lane::AwaitingApproval => "awaiting approval",
            Lane::Paused => "paused",
            Lane::Succeeded => "succeeded",
            Lane::Failed => "failed",
            Lane::Escalated => "escalated",
        }
    }
}
