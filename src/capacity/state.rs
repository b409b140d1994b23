//! The capacity records and their JSON contract: instances, the state file
//! `capacity.json`, and the results of ensure / status / release. The
//! release rule (what a release selects; idle-only, busy retained with
//! reasons; a worktree holding work kept) lives here, so a live run and a
//! finished run's file release the same way.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;

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
    /// What the operator can do about it (for `uncommitted_changes`: the
    /// files, and how to let the instance go).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The reason a release keeps a worktree that holds work nobody committed.
pub const UNCOMMITTED_CHANGES: &str = "uncommitted_changes";

/// A release's reason for keeping an instance, in words for people:
/// `runtime_state=busy queue_depth=396` reads `busy: 396 operations
/// queued`. The reason itself is the machine's (capacity.json, `--json`,
/// the event log) and stays as it is; every surface that shows it to a
/// person words it here, so the console, `ctl` and the status line agree.
/// A reason this code does not write is returned unchanged.
pub fn reason_words(reason: &str) -> String {
    if reason == UNCOMMITTED_CHANGES {
        return "its worktree holds uncommitted changes".into();
    }
    let mut state = None;
    let mut depth = 0usize;
    for part in reason.split_whitespace() {
        match part.split_once('=') {
            Some(("runtime_state", v)) => state = Some(v),
            Some(("queue_depth", v)) => match v.parse() {
                Ok(n) => depth = n,
                Err(_) => return reason.to_string(),
            },
            _ => return reason.to_string(),
        }
    }
    let Some(state) = state else {
        return reason.to_string();
    };
    let what = match state {
        "busy" => "busy",
        "starting" => "still starting",
        "idle" => "idle",
        other => other,
    };
    match depth {
        0 => what.to_string(),
        1 => format!("{what}: 1 operation queued"),
        n => format!("{what}: {n} operations queued"),
    }
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
    /// An instance of a `reuse = "pinned"` profile: long-lived, so a
    /// release leaves it unless it is named or its lifetime is asked for.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub pinned: bool,
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `ok` when everything selected went, `partial` when something selected
/// was kept (busy, starting, uncommitted changes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Ok,
    Partial,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Partial => "partial",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReleaseResult {
    pub status: Outcome,
    pub loop_id: String,
    pub capacity_ref: String,
    /// The lifetimes the release selected.
    pub lifetimes: Vec<Lifetime>,
    /// The instances it was asked for by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<String>,
    pub released_count: usize,
    pub retained_count: usize,
    pub released: Vec<String>,
    pub retained: Vec<RetainedEntry>,
}

/// Why an ensure could not give a profile everything it asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RejectReason {
    /// More than the profile's `max_instances`.
    OverMaxInstances,
    /// Every node of `max_nodes` is taken.
    OverMaxNodes,
    /// A pinned profile keeps to its declared `pinned = N` instances.
    Pinned,
    /// The profile's instances cannot start (a worktree failed).
    ProfileBroken,
}

impl RejectReason {
    pub fn as_str(self) -> &'static str {
        match self {
            RejectReason::OverMaxInstances => "over_max_instances",
            RejectReason::OverMaxNodes => "over_max_nodes",
            RejectReason::Pinned => "pinned",
            RejectReason::ProfileBroken => "profile_broken",
        }
    }
}

/// One profile an ensure could not satisfy, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rejected {
    pub profile: String,
    pub requested: u32,
    /// Instances it has now toward the request (reused and created).
    pub granted: u32,
    pub reason: RejectReason,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EnsureResult {
    pub status: Outcome,
    pub loop_id: String,
    pub capacity_ref: String,
    pub agents: Vec<InstanceRecord>,
    pub rejected: Vec<Rejected>,
    /// Instances still starting when the answer was given (the status is
    /// then `partial`): ready targets, or these named.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starting: Vec<String>,
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

/// Which instances a release takes (role-profiles-and-capacity: "only
/// agents ... matching the requested lifetime", "preserve long-lived
/// pinned agents"). Asked for by lifetime or by name, it takes exactly
/// those, pinned and `manual_release` ones included; asked for nothing, it
/// takes the lifetimes due now, never a pinned or `manual_release`
/// instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Selection {
    lifetimes: Vec<Lifetime>,
    names: Vec<String>,
    explicit: bool,
}

impl Selection {
    /// `lifetimes` and `names` as asked; `due` when both are empty.
    pub fn new(lifetimes: &[Lifetime], names: &[String], due: &[Lifetime]) -> Selection {
        let explicit = !lifetimes.is_empty() || !names.is_empty();
        let mut l: Vec<Lifetime> = if explicit {
            lifetimes.to_vec()
        } else {
            due.to_vec()
        };
        l.dedup();
        let mut n = names.to_vec();
        n.dedup();
        Selection {
            lifetimes: l,
            names: n,
            explicit,
        }
    }

    /// Whether the release takes `r`. A pinned instance is long-lived: a
    /// lifetime never takes it, only its name does (the capacity record:
    /// pinned agents are preserved, a release only detaches the loop).
    pub fn takes(&self, r: &InstanceRecord) -> bool {
        if self.explicit {
            self.names.contains(&r.name) || (self.lifetimes.contains(&r.lifetime) && !r.pinned)
        } else {
            self.lifetimes.contains(&r.lifetime)
                && !r.pinned
                && r.lifetime != Lifetime::ManualRelease
        }
    }

    pub fn lifetimes(&self) -> &[Lifetime] {
        &self.lifetimes
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// A name that is no instance of the run is a mistake in the request.
    pub fn check_names(&self, agents: &[InstanceRecord]) -> Result<(), CapacityError> {
        let unknown: Vec<&str> = self
            .names
            .iter()
            .filter(|n| !agents.iter().any(|a| &a.name == *n))
            .map(String::as_str)
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let known: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
        Err(CapacityError::new(
            "unknown_instance",
            format!(
                "no instance named {}; this run's instances: {}",
                unknown.join(", "),
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ),
        ))
    }
}

/// Where an instance stands for a release.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Nothing runs on it: it may go.
    Idle,
    /// It works (`busy`) or is starting: kept, with this runtime state.
    Working(&'static str),
    /// Another release is letting it go right now.
    Leaving,
}

/// What a release will do, decided before any `git` runs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReleasePlan {
    /// Selected idle instances: released, unless the worktree they would
    /// remove holds work.
    pub idle: Vec<usize>,
    /// Selected instances kept because they work or start.
    pub working: Vec<(usize, &'static str)>,
    /// Worktrees the release would remove, each with the instance that
    /// stays if the worktree holds work (the last of its group).
    pub checks: Vec<(PathBuf, usize)>,
}

/// Plans a release, idle-only: what `sel` takes and `standing` says is
/// idle goes; busy or starting instances stay. A git worktree goes with
/// the last instance on it, so a worktree every instance of which would
/// go is checked for work first (see [`settle_idle`]).
pub fn plan_release(
    agents: &[InstanceRecord],
    sel: &Selection,
    standing: impl Fn(usize, &InstanceRecord) -> Standing,
) -> ReleasePlan {
    let mut plan = ReleasePlan::default();
    for (i, a) in agents.iter().enumerate() {
        if !a.state.is_active() || !sel.takes(a) {
            continue;
        }
        match standing(i, a) {
            Standing::Idle => plan.idle.push(i),
            Standing::Working(s) => plan.working.push((i, s)),
            Standing::Leaving => {}
        }
    }
    let mut seen: Vec<&str> = Vec::new();
    for &i in &plan.idle {
        let a = &agents[i];
        let Some(path) = a.placement.workspace.as_deref() else {
            continue;
        };
        if a.workspace_mode != WorkspaceMode::GitWorktree || seen.contains(&path) {
            continue;
        }
        seen.push(path);
        let members: Vec<usize> = (0..agents.len())
            .filter(|&j| {
                agents[j].state.is_active()
                    && agents[j].workspace_mode == WorkspaceMode::GitWorktree
                    && agents[j].placement.workspace.as_deref() == Some(path)
            })
            .collect();
        if members.iter().all(|j| plan.idle.contains(j)) {
            let last = *members.last().expect("i is a member");
            plan.checks.push((PathBuf::from(path), last));
        }
    }
    plan
}

fn retained_entry(a: &InstanceRecord) -> Option<RetainedEntry> {
    a.retained.as_ref().map(|r| RetainedEntry {
        name: a.name.clone(),
        reason: r.reason.clone(),
        runtime_state: r.runtime_state.clone(),
        queue_depth: r.queue_depth,
        detail: r.detail.clone(),
    })
}

/// Keeps the working instances of a plan, with their reason: "Refuse to
/// unload busy agents".
pub fn retain_working(
    agents: &mut [InstanceRecord],
    plan: &ReleasePlan,
    queue_depth: impl Fn(&str) -> usize,
) -> Vec<RetainedEntry> {
    let at = now();
    let mut kept = Vec::new();
    for &(i, runtime_state) in &plan.working {
        let a = &mut agents[i];
        let depth = queue_depth(&a.profile);
        let mut reason = format!("runtime_state={runtime_state}");
        if depth > 0 {
            reason.push_str(&format!(" queue_depth={depth}"));
        }
        if a.state == InstanceState::Busy {
            a.state = InstanceState::Retained;
        }
        a.retained = Some(RetainFields {
            reason,
            runtime_state: runtime_state.to_string(),
            queue_depth: depth,
            detail: None,
        });
        a.updated_at = at.clone();
        kept.extend(retained_entry(a));
    }
    kept
}

/// Lets the idle instances of a plan go, except the one that would remove
/// a worktree holding work: `dirty` maps such worktrees to what is in them
/// (`git status`). That instance stays idle, with the reason
/// `uncommitted_changes`. Returns the released names and the kept.
pub fn settle_idle(
    agents: &mut [InstanceRecord],
    plan: &ReleasePlan,
    dirty: &HashMap<PathBuf, String>,
    queue_depth: impl Fn(&str) -> usize,
) -> (Vec<String>, Vec<RetainedEntry>) {
    let at = now();
    let mut released = Vec::new();
    let mut kept = Vec::new();
    for &i in &plan.idle {
        let holds_work = plan
            .checks
            .iter()
            .find(|(_, keeper)| *keeper == i)
            .and_then(|(path, _)| dirty.get(path));
        let a = &mut agents[i];
        match holds_work {
            Some(files) => {
                // Its process is gone (a finished run's file): idle now.
                a.state = InstanceState::Ready;
                a.op = None;
                a.retained = Some(RetainFields {
                    reason: UNCOMMITTED_CHANGES.into(),
                    runtime_state: "idle".into(),
                    queue_depth: queue_depth(&a.profile),
                    detail: Some(format!(
                        "{files} — commit them on branch {} (or remove them), then release it again",
                        a.placement.branch.as_deref().unwrap_or("?")
                    )),
                });
                a.updated_at = at.clone();
                kept.extend(retained_entry(a));
            }
            None => {
                a.state = InstanceState::Released;
                a.retained = None;
                a.op = None;
                a.updated_at = at.clone();
                released.push(a.name.clone());
            }
        }
    }
    (released, kept)
}

impl RetainedEntry {
    /// Why it was kept, in words ([`reason_words`]).
    pub fn words(&self) -> String {
        reason_words(&self.reason)
    }
}

impl ReleaseResult {
    pub fn new(
        sel: &Selection,
        loop_id: &str,
        capacity_ref: &str,
        released: Vec<String>,
        retained: Vec<RetainedEntry>,
    ) -> ReleaseResult {
        ReleaseResult {
            status: if retained.is_empty() {
                Outcome::Ok
            } else {
                Outcome::Partial
            },
            loop_id: loop_id.to_string(),
            capacity_ref: capacity_ref.to_string(),
            lifetimes: sel.lifetimes().to_vec(),
            names: sel.names().to_vec(),
            released_count: released.len(),
            retained_count: retained.len(),
            released,
            retained,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retain_reasons_read_as_words_and_unknown_ones_stay() {
        assert_eq!(
            reason_words("runtime_state=busy queue_depth=396"),
            "busy: 396 operations queued"
        );
        assert_eq!(
            reason_words("runtime_state=busy queue_depth=1"),
            "busy: 1 operation queued"
        );
        assert_eq!(reason_words("runtime_state=busy"), "busy");
        assert_eq!(reason_words("runtime_state=starting"), "still starting");
        assert_eq!(
            reason_words(UNCOMMITTED_CHANGES),
            "its worktree holds uncommitted changes"
        );
        // Not a reason this code writes: shown as it came.
        assert_eq!(reason_words("operator said so"), "operator said so");
        assert_eq!(
            reason_words("runtime_state=busy queue_depth=many"),
            "runtime_state=busy queue_depth=many"
        );
    }
}
