//! The capacity records and their JSON contract: instances, the state file
//! `capacity.json`, and the results of ensure / status / release. The
//! release rule (idle-only, busy retained with reasons) lives here, so a
//! live run and a finished run's file release the same way.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::vocab::{InstanceSource as Source, InstanceState};
use crate::vocab::{Lifetime, Thinking, WorkspaceMode};

pub const SCHEMA_VERSION: u32 = 1;
pub const RECORD_TYPE: &str = "playdeck_capacity_state";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
}

/// Why a release kept an instance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainFields {
    pub reason: String,
    pub runtime_state: String,
    pub queue_depth: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InstanceRecord {
    pub name: String,
    pub profile: String,
    pub role: String,
    pub provider: String,
    pub model: Option<String>,
    pub thinking: Option<Thinking>,
    pub workspace_mode: WorkspaceMode,
    pub lifetime: Lifetime,
    pub loop_id: String,
    pub node_id: String,
    pub placement: Placement,
    pub source: Source,
    pub state: InstanceState,
    /// The operation it runs, when busy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub op: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: String,
    pub updated_at: String,
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub retained: Option<RetainFields>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FileStatus {
    Ensured,
    Released,
    Missing,
}

/// An ensure or release request, kept in the state file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RequestRecord {
    pub kind: String,
    pub at: String,
    pub detail: serde_json::Value,
}

/// `capacity.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapacityFile {
    pub schema_version: u32,
    pub record_type: String,
    pub loop_id: String,
    pub status: FileStatus,
    pub max_nodes: u32,
    /// Whether the run has ended (releases then work on this file).
    pub run_finished: bool,
    /// The git repository worktrees were added to, for cleanup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo_root: Option<String>,
    pub agents: Vec<InstanceRecord>,
    pub requests: Vec<RequestRecord>,
    pub created_at: String,
    pub updated_at: String,
}

impl CapacityFile {
    pub fn status_of(agents: &[InstanceRecord]) -> FileStatus {
        if agents.is_empty() {
            FileStatus::Missing
        } else if agents.iter().any(|a| a.state.is_active()) {
            FileStatus::Ensured
        } else {
            FileStatus::Released
        }
    }
}

pub fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// One kept instance in a release result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetainedEntry {
    pub name: String,
    pub reason: String,
    pub runtime_state: String,
    pub queue_depth: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseResult {
    pub status: String,
    pub loop_id: String,
    pub capacity_ref: String,
    pub released_count: usize,
    pub retained_count: usize,
    pub released: Vec<String>,
    pub retained: Vec<RetainedEntry>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsureResult {
    pub status: String,
    pub loop_id: String,
    pub capacity_ref: String,
    pub agents: Vec<InstanceRecord>,
    pub rejected: Vec<serde_json::Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StatusResult {
    pub status: String,
    pub loop_id: String,
    pub capacity_ref: String,
    pub state: FileStatus,
    pub live: bool,
    pub max_nodes: u32,
    pub active_nodes: usize,
    pub agents: Vec<InstanceRecord>,
    /// Operations waiting for each profile.
    pub waiting: BTreeMap<String, usize>,
    /// Instances each profile needs now: busy plus waiting.
    pub desired: BTreeMap<String, usize>,
    /// Why a release would keep something, or why work waits.
    pub blocked: Vec<String>,
}

/// An error of the capacity commands, machine-readable with `--json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct CapacityError {
    pub code: String,
    pub message: String,
}

impl CapacityError {
    pub fn new(code: &str, message: impl Into<String>) -> Self {
        CapacityError {
            code: code.to_string(),
            message: message.into(),
        }
    }
}

/// The release rule, idle-only: ready instances matching `select` are
/// released (their retain fields stripped); busy or starting ones are
/// retained with the reason. Releasing twice changes nothing more.
/// Returns the released names (for workspace cleanup) and the result.
pub fn release_records(
    agents: &mut [InstanceRecord],
    select: impl Fn(&InstanceRecord) -> bool,
    queue_depth: impl Fn(&str) -> usize,
    loop_id: &str,
    capacity_ref: &str,
) -> ReleaseResult {
    let at = now();
    let mut released = Vec::new();
    let mut retained = Vec::new();
    for a in agents
        .iter_mut()
        .filter(|a| a.state.is_active() && select(a))
    {
        match a.state {
            InstanceState::Ready | InstanceState::Planned => {
                a.state = InstanceState::Released;
                a.retained = None;
                a.op = None;
                a.updated_at = at.clone();
                released.push(a.name.clone());
            }
            InstanceState::Busy | InstanceState::Retained | InstanceState::Starting => {
                let runtime_state = match a.state {
                    InstanceState::Starting => "starting",
                    _ => "busy",
                };
                let depth = queue_depth(&a.profile);
                let mut reason = format!("runtime_state={runtime_state}");
                if depth > 0 {
                    reason.push_str(&format!(" queue_depth={depth}"));
                }
                if a.state == InstanceState::Busy {
                    a.state = InstanceState::Retained;
                }
                a.retained = Some(RetainFields {
                    reason: reason.clone(),
                    runtime_state: runtime_state.to_string(),
                    queue_depth: depth,
                });
                a.updated_at = at.clone();
                retained.push(RetainedEntry {
                    name: a.name.clone(),
                    reason,
                    runtime_state: runtime_state.to_string(),
                    queue_depth: depth,
                });
            }
            InstanceState::Released | InstanceState::Failed => {}
        }
    }
    ReleaseResult {
        status: "ok".into(),
        loop_id: loop_id.to_string(),
        capacity_ref: capacity_ref.to_string(),
        released_count: released.len(),
        retained_count: retained.len(),
        released,
        retained,
    }
}
