//! Lifecycle signals (ADR-0033 D5, schema version 1). One stream feeds the
//! console, the event log, the headless printer and replay, so every field a
//! view needs is carried here, shared through `Arc`s so a signal is cheap to
//! build and to fan out.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::agent::{LandedWork, QuestionKind};
use super::graph::OpId;
use super::lane::Lane;
use super::ledger::DropReason;

pub mod log_line;

pub const SIGNAL_SCHEMA_VERSION: u32 = 1;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Signal {
    /// Schema version, on every line: 1 for a whole line, 2 for a compact
    /// one (see [`log_line`]).
    #[serde(serialize_with = "log_line::version")]
    pub v: u32,
    /// Position in the run's stream, from 1, without gaps.
    pub seq: u64,
    /// Seconds since the run started (a compact line leaves out the line
    /// before's).
    #[serde(
        default = "log_line::elapsed_before",
        skip_serializing_if = "log_line::elapsed_elided"
    )]
    pub elapsed: f64,
    #[serde(flatten)]
    pub kind: SignalKind,
}

/// The fields every node signal carries (D5: op_id, name, parent_id,
/// depends_on; `elapsed` is on the enclosing [`Signal`]). Its serde code is
/// in [`log_line`]: a compact line names it by `pos`.
#[derive(Debug, Clone)]
pub struct NodeHeader {
    pub op_id: OpId,
    pub name: Arc<str>,
    pub parent_id: Option<OpId>,
    pub depends_on: Arc<[OpId]>,
    /// The operation's position in the run (its graph index, the
    /// projection's too); [`log_line::NO_POS`] when unknown.
    pub pos: u32,
}

/// Equal when they name the same operation the same way: `pos` is how a
/// line was written, not what it says.
impl PartialEq for NodeHeader {
    fn eq(&self, o: &Self) -> bool {
        self.op_id == o.op_id
            && self.name == o.name
            && self.parent_id == o.parent_id
            && self.depends_on == o.depends_on
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Failed,
    Cancelled,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Failed => "failed",
            Outcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// Every incoming path failed its condition or came from a skipped node.
    NoValidPath,
    /// The run was cancelled before the operation started.
    Cancelled,
}

impl SkipReason {
    pub fn describe(self) -> &'static str {
        match self {
            SkipReason::NoValidPath => "no incoming path is valid",
            SkipReason::Cancelled => "the run was cancelled",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoleOrigin {
    Initial,
    Expanded,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseReason {
    RunPaused,
    Held,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LaneCounts {
    pub queued: usize,
    pub running: usize,
    pub awaiting_approval: usize,
    pub paused: usize,
    pub succeeded: usize,
    pub failed: usize,
    pub skipped: usize,
    pub escalated: usize,
}

impl LaneCounts {
    /// Takes one operation out of its count.
    pub fn remove(&mut self, lane: Lane, skipped: bool) {
        let slot = match lane {
            Lane::Queued => &mut self.queued,
            Lane::Running => &mut self.running,
            Lane::AwaitingApproval => &mut self.awaiting_approval,
            Lane::Paused => &mut self.paused,
            Lane::Succeeded => &mut self.succeeded,
            Lane::Failed if skipped => &mut self.skipped,
            Lane::Failed => &mut self.failed,
            Lane::Escalated => &mut self.escalated,
        };
        debug_assert!(*slot > 0, "{lane:?} (skipped {skipped}) counted below zero");
        *slot = slot.saturating_sub(1);
    }

    /// (name, count) of every count, in lane order with skipped after
    /// failed.
    pub fn parts(&self) -> [(&'static str, usize); 8] {
        [
            ("queued", self.queued),
            ("running", self.running),
            ("awaiting approval", self.awaiting_approval),
            ("paused", self.paused),
            ("succeeded", self.succeeded),
            ("failed", self.failed),
            ("skipped", self.skipped),
            ("escalated", self.escalated),
        ]
    }

    /// `succeeded 3 · failed 1 · skipped 2`: the counts that are not zero.
    pub fn describe(&self) -> String {
        let parts: Vec<String> = self
            .parts()
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        parts.join(" · ")
    }

    /// Operations counted, in every lane.
    pub fn total(&self) -> usize {
        self.queued
            + self.running
            + self.awaiting_approval
            + self.paused
            + self.succeeded
            + self.failed
            + self.skipped
            + self.escalated
    }

    /// Operations in a final lane (skipped included).
    pub fn settled(&self) -> usize {
        self.succeeded + self.failed + self.escalated + self.skipped
    }

    /// Counts one operation: skipped ones apart from failed (one rule for
    /// the kernel, the views and the report).
    pub fn add(&mut self, lane: Lane, skipped: bool) {
        match lane {
            Lane::Queued => self.queued += 1,
            Lane::Running => self.running += 1,
            Lane::AwaitingApproval => self.awaiting_approval += 1,
            Lane::Paused => self.paused += 1,
            Lane::Succeeded => self.succeeded += 1,
            Lane::Failed if skipped => self.skipped += 1,
            Lane::Failed => self.failed += 1,
            Lane::Escalated => self.escalated += 1,
        }
    }
}

/// The `type` of an events.jsonl line is serde's tag; `type_name` gives the
/// same word without serialising, from strum's derive under the same
/// snake_case rule (a test holds the two together).
#[derive(
    Debug, Clone, Serialize, Deserialize, PartialEq, strum::IntoStaticStr, strum::VariantNames,
)]
#[serde(tag = "type", rename_all = "snake_case")]
#[strum(serialize_all = "snake_case")]
pub enum SignalKind {
    RunStarted {
        run_id: Arc<str>,
        play: Arc<str>,
        operations: usize,
        max_concurrent: usize,
        reactive: bool,
        max_spawn: usize,
        paused: bool,
        /// The spend caps it starts with.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        budget: Option<super::spend::Budget>,
    },
    Queued {
        #[serde(flatten)]
        node: NodeHeader,
        role: Option<Arc<str>>,
        instruction: Arc<str>,
        #[serde(default, skip_serializing_if = "log_line::false_left_out")]
        approval: bool,
    },
    Started {
        #[serde(flatten)]
        node: NodeHeader,
        #[serde(
            default = "log_line::first",
            skip_serializing_if = "log_line::first_left_out"
        )]
        attempt: u32,
        role: Option<Arc<str>>,
        /// The capacity instance it runs on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        instance: Option<Arc<str>>,
    },
    Completed {
        #[serde(flatten)]
        node: NodeHeader,
        #[serde(default, skip_serializing_if = "log_line::null_left_out")]
        result: Arc<Value>,
    },
    Failed {
        #[serde(flatten)]
        node: NodeHeader,
        error: Arc<str>,
        category: Arc<str>,
    },
    Skipped {
        #[serde(flatten)]
        node: NodeHeader,
        reason: SkipReason,
        /// Which dependency made it so, in words (`integration-tests
        /// failed`); absent in logs written before it was recorded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        because: Option<Arc<str>>,
    },
    Paused {
        #[serde(flatten)]
        node: NodeHeader,
        reason: PauseReason,
    },
    /// A parked operation (paused run, operator hold) may go on.
    Unpaused {
        #[serde(flatten)]
        node: NodeHeader,
    },
    AwaitingApproval {
        #[serde(flatten)]
        node: NodeHeader,
    },
    Approved {
        #[serde(flatten)]
        node: NodeHeader,
        by: Arc<str>,
        /// What it was approved on, in words (its dependencies' outcomes:
        /// `✗ 1 of 2 dependencies failed: lint`); absent in older logs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Arc<str>>,
    },
    Denied {
        #[serde(flatten)]
        node: NodeHeader,
        by: Arc<str>,
        reason: Arc<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Arc<str>>,
    },
    Escalated {
        #[serde(flatten)]
        node: NodeHeader,
        reason: Arc<str>,
        result: Arc<Value>,
    },
    /// A failed or denied operation goes back to the queue for a new
    /// attempt (`attempt` is the one it will start), or an operation skipped
    /// only because of it is re-opened (`attempt` unchanged).
    Retried {
        #[serde(flatten)]
        node: NodeHeader,
        attempt: u32,
        /// The operation whose retry re-opened it (for re-opened ones).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        because: Option<Arc<str>>,
        /// The operator who retried it or sent it back (absent for a
        /// retry the policy made, or a re-opening).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        by: Option<Arc<str>>,
        /// What the operator said sending it back, in its conversation.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<Arc<str>>,
        /// What it was retried or sent back from, in words (`failed:
        /// merge_conflict`, `review of 1a2b..3c4d`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Arc<str>>,
    },
    /// Spend passed a warning level of a cap (`role`: a role's own cap).
    SpendWarning {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Arc<str>>,
        measure: super::spend::Measure,
        spent: f64,
        cap: f64,
        level: f64,
    },
    /// Spend reached a cap: no new attempt of what it covers starts until
    /// the cap is raised (running ones finish).
    SpendCapReached {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Arc<str>>,
        measure: super::spend::Measure,
        spent: f64,
        cap: f64,
    },
    /// The operator raised or set a cap.
    SpendCapRaised {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        role: Option<Arc<str>>,
        measure: super::spend::Measure,
        cap: f64,
        by: Arc<str>,
    },
    /// An agent CLI's provider refused work: nothing more starts on that
    /// agent until `until` (a rate limit's reset; Unix ms), or, without
    /// one (authentication), until the operator resumes.
    ProviderHeld {
        agent: Arc<str>,
        category: Arc<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        until: Option<u64>,
        message: Arc<str>,
    },
    /// Work on the agent starts again.
    ProviderReleased {
        agent: Arc<str>,
    },
    /// An attempt failed for a cause the retry policy takes back (a rate
    /// limit, an overloaded provider): the operation waits `wait_ms`, then
    /// its attempt `next` starts (`of` attempts at most in this series).
    RetryScheduled {
        #[serde(flatten)]
        node: NodeHeader,
        /// The attempt that failed.
        attempt: u32,
        category: Arc<str>,
        error: Arc<str>,
        wait_ms: u64,
        /// Wall-clock time (Unix milliseconds) the next attempt may start.
        until: u64,
        next: u32,
        of: u32,
    },
    /// The operator added dependencies to an operation that had not
    /// started: it waits for them too (`edges` are the new incoming ones).
    DependenciesAdded {
        #[serde(flatten)]
        node: NodeHeader,
        edges: Vec<DepRecord>,
        /// The operation whose injection added them (none: the operator).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        emitter_id: Option<OpId>,
        /// The operator's own `add` (not counted against `max_spawn`).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        operator: bool,
    },
    /// An operator's command was carried out: who asked and what (the
    /// signals it caused follow or precede it in the same batch).
    OperatorAction {
        by: Arc<str>,
        action: Arc<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        op_id: Option<OpId>,
    },
    /// An operator hold was placed on an operation that has not started.
    Held {
        #[serde(flatten)]
        node: NodeHeader,
    },
    Unheld {
        #[serde(flatten)]
        node: NodeHeader,
    },
    Spawned {
        op_id: OpId,
        name: Arc<str>,
        parent_id: Option<OpId>,
        independent: bool,
        assignee: Option<Arc<str>>,
        /// Cut to SPAWNED_INSTRUCTION_MAX; `queued` has it whole.
        instruction: Arc<str>,
        /// What rebuilds the operation on resume.
        #[serde(flatten)]
        record: Box<SpawnRecord>,
    },
    SpawnDropped {
        reason: DropReason,
        assignee: Option<Arc<str>>,
        emitter_id: Option<OpId>,
        detail: Arc<str>,
        op_id: Option<OpId>,
        /// The request's identity, when it was read (duplicate detection
        /// survives a resume).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        identity: Option<super::request::RequestId>,
        /// What the request asked for, when it could be read (absent in
        /// logs written before it was recorded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request: Option<Arc<super::ledger::RequestPayload>>,
    },
    /// A role route was published: an initial palette role before the run,
    /// or an expansion (ADR-0036 D2, D3).
    RoleProvisioned {
        role: Arc<str>,
        origin: RoleOrigin,
        /// The operation whose request recruited it (expansions).
        by: Option<Arc<str>>,
        disposition: Arc<str>,
        model: Option<Arc<str>>,
        effort: Option<Arc<str>>,
        modes: Arc<[Arc<str>]>,
    },
    /// A new-role unit was reserved and provisioning began.
    RoleReserved {
        role: Arc<str>,
        by: Option<Arc<str>>,
    },
    /// A request for a role outside the palette was refused.
    ExpansionRejected {
        role: Arc<str>,
        reason: DropReason,
        detail: Arc<str>,
        by: Option<Arc<str>>,
    },
    /// Both budgets, whenever either changes (ADR-0036 D4).
    Budget {
        initial_roles: Arc<[Arc<str>]>,
        expanded_roles: Arc<[Arc<str>]>,
        reserved_roles: Arc<[Arc<str>]>,
        consumed_new_roles: u32,
        max_new_roles: u32,
        spawns_accepted: usize,
        max_spawn: usize,
    },
    /// An operation is ready but waits for capacity (holding no slot).
    CapacityWait {
        #[serde(flatten)]
        node: NodeHeader,
        reason: Arc<str>,
    },
    /// A capacity instance changed state.
    Instance {
        name: Arc<str>,
        profile: Arc<str>,
        role: Arc<str>,
        state: crate::vocab::InstanceState,
        lifetime: crate::vocab::Lifetime,
        source: crate::vocab::InstanceSource,
        node_id: Arc<str>,
        /// The operation it runs, when busy.
        op: Option<Arc<str>>,
    },
    /// A release of capacity: what went, what stayed and why.
    CapacityReleased {
        /// `round_end`, `run_end` or `operator`.
        trigger: Arc<str>,
        released: Arc<[Arc<str>]>,
        retained: Arc<[super::lease::Retained]>,
    },
    /// A running agent's live state, when it changes.
    AgentActivity {
        op_id: OpId,
        name: Arc<str>,
        attempt: u32,
        state: super::agent::ActivityState,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tool: Option<Arc<str>>,
    },
    /// A running agent's process group started.
    AgentProcess {
        op_id: OpId,
        name: Arc<str>,
        attempt: u32,
        pgid: i32,
    },
    /// The agent CLI's own id of the conversation an attempt is in, as its
    /// stream named it (claude's `session_id`, codex's `thread_id`, …).
    AgentSession {
        op_id: OpId,
        name: Arc<str>,
        attempt: u32,
        session: Arc<str>,
    },
    /// A running agent asks the operator whether it may make a call its
    /// ToolSet leaves to them (`Bash(rm -rf build)`): the operation waits
    /// in the approval lane until it is answered.
    /// A review (`kind: review`: the work would land, the operator
    /// decides) or a merge conflict (`kind: conflict`: the operator
    /// resolves it, or it does not land) waits the same way, `tool` saying
    /// what would land or what clashed.
    PermissionAsked {
        #[serde(flatten)]
        node: NodeHeader,
        attempt: u32,
        tool: Arc<str>,
        #[serde(default, skip_serializing_if = "QuestionKind::is_permission")]
        kind: QuestionKind,
        /// What an answer binds to: a call's tool and input digest, a
        /// review's or a conflict's commits (`base..tip`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Arc<str>>,
        /// What answering allows, whole up to 64 KiB (`(cut)` past it): a
        /// Write's content, an Edit's diff, a Bash command, a review's
        /// commits and files.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<Arc<str>>,
    },
    /// The question was answered: allowed or denied, by whom (an
    /// operator, or `timeout`), and why; the agent runs on.
    PermissionAnswered {
        #[serde(flatten)]
        node: NodeHeader,
        attempt: u32,
        tool: Arc<str>,
        allowed: bool,
        by: Arc<str>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Arc<str>>,
        #[serde(default, skip_serializing_if = "QuestionKind::is_permission")]
        kind: QuestionKind,
        /// What the answer was given on (the question's `on`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<Arc<str>>,
    },
    /// A succeeded operation's work went into the run's branch
    /// (`[workspace] isolation = "worktree"`): its commits and the files
    /// they change, and the branch's new tip.
    Landed {
        #[serde(flatten)]
        node: NodeHeader,
        attempt: u32,
        #[serde(flatten)]
        work: Arc<LandedWork>,
    },
    /// A running agent's cost and token totals so far.
    AgentUsage {
        op_id: OpId,
        name: Arc<str>,
        attempt: u32,
        #[serde(flatten)]
        usage: super::agent::Usage,
    },
    /// The run's breakpoints now, as written (`impl-api`, `role:tester`,
    /// `spawn`, …; `until OP` for a run to here), whenever they change.
    Breakpoints {
        set: Arc<[Arc<str>]>,
    },
    /// The run continues in a new process from its checkpoint and log.
    Resumed {
        /// The last signal of the stopped process.
        from_seq: u64,
        /// The how-many-th resume this is.
        resumes: u32,
        /// Operations that were running and start a new attempt.
        reattempted: Arc<[Arc<str>]>,
        /// Roles whose provisioning was in flight: dropped, nothing charged.
        dropped_reservations: Arc<[Arc<str>]>,
    },
    /// The event log cannot be written: nothing new starts until it can
    /// (running work goes on; its signals wait in memory).
    StorageFailed {
        error: Arc<str>,
    },
    /// The event log is written again: the run goes on.
    StorageRecovered,
    /// Nothing new starts: the operator paused the run, or (`cause`) a
    /// breakpoint did.
    RunPaused {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cause: Option<Arc<str>>,
    },
    RunResumed,
    /// While paused, the operator let one waiting operation start.
    Stepped {
        op_id: Option<OpId>,
    },
    /// The run drained: nothing runnable or running (DESIGN: a round ends).
    RoundEnded {
        round: u32,
    },
    Warning {
        message: Arc<str>,
        op_id: Option<OpId>,
    },
    /// The run's work lands on a branch of its own (`[workspace] isolation
    /// = "worktree"`): which branch, made from which commit, and what was
    /// changed in the checkout and not committed then — not part of the
    /// run's base, which is what its operations start from.
    Workspace {
        branch: Arc<str>,
        base: Arc<str>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        uncommitted: Vec<Arc<str>>,
    },
    /// The cluster's workers as a `[cluster]` run sees them, when that
    /// changes: one joins, leaves, goes silent, or its load moves.
    Workers {
        workers: Arc<[WorkerSeen]>,
    },
    RunFinished {
        outcome: Outcome,
        counts: LaneCounts,
        /// What it spent (USD, tokens), when anything was: the runs list
        /// reads it from the log's last line.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        spent: Option<(f64, f64)>,
    },
}

/// One `playdeck worker` as a run last saw it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerSeen {
    pub id: Arc<str>,
    pub host: Arc<str>,
    pub slots: usize,
    /// Slots taken, by any run's jobs.
    pub busy: usize,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<Arc<str>>,
    /// Seconds since its last heartbeat, when this was said.
    pub beat_age: f64,
    /// Stopping: it finishes the jobs it has and takes no new one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub draining: bool,
}

/// Workers beat every 2 s: three beats missed and a worker is silent.
pub const WORKER_SILENT_SECS: f64 = 6.0;

impl WorkerSeen {
    pub fn silent(&self) -> bool {
        self.beat_age >= WORKER_SILENT_SECS
    }
}

/// The durable part of a spawned operation: with its `queued` signal, all
/// that resume needs to rebuild it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpawnRecord {
    pub agent: Arc<str>,
    #[serde(default, skip_serializing_if = "is_null")]
    pub params: Arc<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requester_role: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "is_operate")]
    pub kind: super::graph::OperationKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<Arc<str>>,
    /// Incoming edges (the spawn edge from the parent, or injected
    /// dependencies).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub edges: Vec<DepRecord>,
    /// The identity of the request it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<super::request::RequestId>,
    /// The operator's own `add`: admitted like any injection, but not
    /// counted against `max_spawn`, which bounds what agents spawn.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub operator: bool,
}

/// An incoming edge as the durable record keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DepRecord {
    pub from: OpId,
    #[serde(flatten)]
    pub edge: super::graph::Edge,
}

fn is_null(v: &Arc<Value>) -> bool {
    v.is_null()
}

fn is_operate(k: &super::graph::OperationKind) -> bool {
    *k == super::graph::OperationKind::Operate
}

impl SignalKind {
    /// The `type` string as serialised.
    pub fn type_name(&self) -> &'static str {
        self.into()
    }

    /// The node header of a lifecycle signal about one operation.
    pub fn node(&self) -> Option<&NodeHeader> {
        match self {
            SignalKind::Queued { node, .. }
            | SignalKind::Started { node, .. }
            | SignalKind::Completed { node, .. }
            | SignalKind::Failed { node, .. }
            | SignalKind::Skipped { node, .. }
            | SignalKind::Paused { node, .. }
            | SignalKind::Unpaused { node }
            | SignalKind::AwaitingApproval { node }
            | SignalKind::Approved { node, .. }
            | SignalKind::Denied { node, .. }
            | SignalKind::Escalated { node, .. }
            | SignalKind::DependenciesAdded { node, .. }
            | SignalKind::Held { node }
            | SignalKind::Unheld { node }
            | SignalKind::Retried { node, .. }
            | SignalKind::RetryScheduled { node, .. }
            | SignalKind::CapacityWait { node, .. }
            | SignalKind::PermissionAsked { node, .. }
            | SignalKind::PermissionAnswered { node, .. }
            | SignalKind::Landed { node, .. } => Some(node),
            _ => None,
        }
    }
}

/// Something the kernel writes every signal to, synchronously and in order
/// (the event log). Unlike broadcast observers a sink never misses a signal,
/// so it must be cheap: buffer, and do the slow part in `flush`.
pub trait SignalSink: Send {
    fn write(&mut self, signal: &Arc<Signal>);
    /// Called at commit points: before the kernel acts on what it wrote
    /// (starts an operation, answers a command) and when the run ends. An
    /// error means what was written is not durable yet: the sink keeps it
    /// and tries again at the next flush; the kernel starts nothing new
    /// meanwhile.
    fn flush(&mut self) -> Result<(), SinkError> {
        Ok(())
    }
}

/// A sink could not make its signals durable (the disk is full, the file
/// system went read-only).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{what}: {message}")]
pub struct SinkError {
    /// What could not be written (`events.jsonl`).
    pub what: String,
    pub message: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::ledger::{SPAWNED_INSTRUCTION_MAX, truncate_chars};

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_chars("héllo", 2), "hé");
        assert_eq!(truncate_chars("abc", 10), "abc");
        let long = "ü".repeat(600);
        assert_eq!(
            truncate_chars(&long, SPAWNED_INSTRUCTION_MAX)
                .chars()
                .count(),
            512
        );
    }

    #[test]
    fn node_signal_serialises_flat_with_type_tag() {
        let id = uuid::Uuid::nil();
        let s = Signal {
            v: 1,
            seq: 3,
            elapsed: 1.5,
            kind: SignalKind::Started {
                node: NodeHeader {
                    op_id: id,
                    name: "build".into(),
                    parent_id: None,
                    depends_on: Arc::from(vec![id]),
                    pos: 0,
                },
                attempt: 1,
                role: Some("implementer".into()),
                instance: None,
            },
        };
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(
            json,
            r#"{"v":1,"seq":3,"elapsed":1.5,"type":"started","op_id":"00000000-0000-0000-0000-000000000000","name":"build","parent_id":null,"depends_on":["00000000-0000-0000-0000-000000000000"],"attempt":1,"role":"implementer"}"#
        );
        let back: Signal = serde_json::from_str(&json).unwrap();
        assert_eq!(back, s);
    }

    /// The `type` words events.jsonl files already carry: renaming one
    /// would make existing logs unreadable.
    const LOGGED: &[&str] = &[
        "run_started",
        "queued",
        "started",
        "completed",
        "failed",
        "skipped",
        "paused",
        "unpaused",
        "resumed",
        "awaiting_approval",
        "approved",
        "denied",
        "escalated",
        "retried",
        "dependencies_added",
        "retry_scheduled",
        "provider_held",
        "provider_released",
        "spend_warning",
        "spend_cap_reached",
        "spend_cap_raised",
        "held",
        "operator_action",
        "unheld",
        "spawned",
        "spawn_dropped",
        "role_provisioned",
        "role_reserved",
        "expansion_rejected",
        "budget",
        "capacity_wait",
        "instance",
        "capacity_released",
        "agent_activity",
        "agent_usage",
        "agent_process",
        "agent_session",
        "permission_asked",
        "permission_answered",
        "landed",
        "storage_failed",
        "storage_recovered",
        "run_paused",
        "run_resumed",
        "breakpoints",
        "stepped",
        "round_ended",
        "warning",
        "workspace",
        "workers",
        "run_finished",
    ];

    #[test]
    fn every_signal_type_name_is_serdes_tag_and_stays_what_logs_carry() {
        use strum::VariantNames;
        let mut ours: Vec<&str> = SignalKind::VARIANTS.to_vec();
        ours.sort_unstable();
        let mut logged = LOGGED.to_vec();
        logged.sort_unstable();
        assert_eq!(ours, logged, "a signal was renamed, added or removed");
        // serde lists its own names, in declaration order, when it meets
        // one it does not know.
        let err = serde_json::from_str::<SignalKind>(r#"{"type":"no_such_signal"}"#)
            .unwrap_err()
            .to_string();
        let serde_names: Vec<&str> = err.split('`').skip(3).step_by(2).collect();
        assert_eq!(serde_names, SignalKind::VARIANTS, "{err}");
        for name in LOGGED {
            match serde_json::from_value::<SignalKind>(serde_json::json!({ "type": name })) {
                // A signal without fields goes all the way round.
                Ok(kind) => {
                    assert_eq!(kind.type_name(), *name);
                    assert_eq!(serde_json::to_value(&kind).unwrap()["type"], *name);
                }
                // One with fields is known by its name and asks for them.
                Err(e) => assert!(e.to_string().starts_with("missing field"), "{name}: {e}"),
            }
        }
    }
}
