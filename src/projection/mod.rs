//! One projection of the signal stream. The checkpoint, the run report and
//! the console's view model all fold signals through [`RunProjection::apply`]
//! and read what they need from it, so an operation's lane, its attempts,
//! the ledger, the palette, capacity busy time and the lane counts are
//! worked out once, the same way live, on resume and in a replay.
//!
//! Folding is O(1) per signal (an index keeps operations by id) and
//! idempotent: signals at or below the last folded `seq` are ignored, so a
//! checkpoint plus the log's later lines folds to the same state as the
//! whole log.

mod capacity;
mod node;
mod palette;

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::kernel::{
    ActivityState, DropReason, Graph, Lane, LedgerEntry, LedgerOutcome, NodeStatus, OpId,
    OpMetadata, Operation, Outcome, PauseReason, RunConfig, Signal, SignalKind, Snapshot,
    deep_merge, lane_for,
    signal::{DepRecord, LaneCounts, NodeHeader},
};

pub use capacity::{CapacityState, Instance, Release};
pub use node::{Attempt, Decision, Node};
pub use palette::{Budgets, PaletteState, Rejection, RoleRow};

/// Why a run failed, worded once for every surface (the console's header
/// and exit line, `ctl status`, the report, the headless summary):
/// `1 failed: integration-tests · 1 escalated: security-review`, naming
/// the first two of each, `+N` for the rest. `ops` are the run's
/// operations in the order they joined it, as (lane, skipped, name);
/// skipped operations are a consequence, not a cause. `None` when none
/// failed or escalated.
pub fn failure_cause<'a>(ops: impl IntoIterator<Item = (Lane, bool, &'a str)>) -> Option<String> {
    const NAMED: usize = 2;
    let mut failed: (usize, Vec<&str>) = (0, Vec::new());
    let mut escalated: (usize, Vec<&str>) = (0, Vec::new());
    for (lane, skipped, name) in ops {
        let slot = match lane {
            Lane::Failed if !skipped => &mut failed,
            Lane::Escalated => &mut escalated,
            _ => continue,
        };
        slot.0 += 1;
        if slot.1.len() < NAMED {
            slot.1.push(name);
        }
    }
    let parts: Vec<String> = [("failed", failed), ("escalated", escalated)]
        .into_iter()
        .filter(|(_, (n, _))| *n > 0)
        .map(|(word, (n, names))| {
            let more = n - names.len();
            let more = if more > 0 {
                format!(" +{more}")
            } else {
                String::new()
            };
            format!("{n} {word}: {}{more}", names.join(", "))
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(" · "))
}

/// Why the run a kernel snapshot shows failed ([`failure_cause`]); `None`
/// unless it finished failed.
pub fn snapshot_cause(snap: &Snapshot) -> Option<String> {
    if snap.run.finished != Some(Outcome::Failed) {
        return None;
    }
    failure_cause(
        snap.nodes
            .iter()
            .map(|n| (n.lane, n.status == NodeStatus::Skipped, &*n.name)),
    )
}

/// The run as a whole.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    /// `run_started` (or a resume) was seen.
    #[serde(default)]
    pub started: bool,
    #[serde(default)]
    pub paused: bool,
    /// A step was taken whose operation has not started yet.
    #[serde(skip)]
    pub stepping: bool,
    /// The operation the last step let start.
    #[serde(skip)]
    pub stepped: Option<OpId>,
    pub round: u32,
    pub max_concurrent: usize,
    pub reactive: bool,
    pub max_spawn: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished: Option<Outcome>,
    /// `elapsed` of the last signal.
    pub elapsed: f64,
    /// How many times the run was resumed.
    #[serde(default)]
    pub resumes: u32,
    /// Why the event log cannot be written now (nothing new starts).
    #[serde(skip)]
    pub storage: Option<Arc<str>>,
}

/// What the run spent (every attempt's last totals, added) and the caps
/// in force, as the log tells; a resumed run's meter starts from it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SpendState {
    pub usd: f64,
    pub tokens: f64,
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub roles: std::collections::BTreeMap<Arc<str>, (f64, f64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::kernel::spend::Budget>,
    /// A reached cap holding work back, in words (`budget 10.02/10.00
    /// USD`, the spend kept current as running work reports), until it is
    /// raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
    /// The cap `held` speaks of: its role, measure and amount.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held_cap: Option<(Option<Arc<str>>, crate::kernel::spend::Measure, f64)>,
    /// Each cap reached and raised, in order, for the report.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub caps: Vec<CapEvent>,
}

/// A cap reached or raised (`reached`: `budget 3.02/3.00 USD`; `raised`:
/// `usd cap → 4.50`, with who).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CapEvent {
    pub at: f64,
    pub event: String,
    pub words: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<Arc<str>>,
}

impl SpendState {
    /// What `role` (none: the run) has spent of `m`.
    pub fn spent(&self, role: Option<&str>, m: crate::kernel::spend::Measure) -> f64 {
        let (u, t) = match role {
            None => (self.usd, self.tokens),
            Some(r) => self.roles.get(r).copied().unwrap_or_default(),
        };
        match m {
            crate::kernel::spend::Measure::Usd => u,
            crate::kernel::spend::Measure::Tokens => t,
        }
    }

    /// The held cap's words again, with what is spent now (running work
    /// goes on reporting after the cap was reached).
    fn refresh_held(&mut self) {
        if let Some((role, m, cap)) = self.held_cap.clone() {
            let spent = self.spent(role.as_deref(), m);
            self.held = Some(crate::kernel::spend::held_words(
                role.as_deref(),
                m,
                spent,
                cap,
            ));
        }
    }
}

/// What keeps a ready operation from starting ([`RunProjection::start_hold`]),
/// with its words.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum StartHold<'a> {
    /// Its agent's provider: `rate limit until 14:05:03`.
    Provider(&'a str),
    /// A spend cap that covers it: `tester budget 1.00/0.80 USD`.
    Spend(&'a str),
}

impl<'a> StartHold<'a> {
    pub fn words(self) -> &'a str {
        match self {
            StartHold::Provider(w) | StartHold::Spend(w) => w,
        }
    }
}

/// What one signal changed that a view keeps its own order for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moved {
    pub node: u32,
    /// `None` when the operation is new.
    pub from: Option<Lane>,
    pub to: Lane,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RunProjection {
    pub run: RunInfo,
    /// The last signal folded in.
    pub seq: u64,
    /// Signals folded in (a resumed process's included).
    #[serde(default)]
    pub events: u64,
    /// Operations in the order they joined the run.
    pub nodes: Vec<Node>,
    /// Operations per lane (skipped apart from failed).
    #[serde(default)]
    pub counts: LaneCounts,
    /// The flow context: the play's, with results' `context` merged in.
    #[serde(default)]
    pub context: Map<String, Value>,
    /// The last `spawn-N` number given.
    pub spawn_seq: u64,
    pub spawn_accepted: usize,
    /// Folded in memory; every drop a row of its own in the checkpoint.
    #[serde(with = "crate::kernel::ledger::unfolded")]
    pub ledger: Vec<LedgerEntry>,
    #[serde(default)]
    pub palette: PaletteState,
    #[serde(default)]
    pub capacity: CapacityState,
    /// (when, message), oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<(f64, Arc<str>)>,
    /// What the run spent, against its caps.
    #[serde(default)]
    pub spend: SpendState,
    /// Agents whose provider holds their work, in words (`rate limit until
    /// 14:05:03`): live state, not kept (a resumed run starts without).
    #[serde(skip)]
    pub provider_holds: std::collections::BTreeMap<Arc<str>, String>,
    /// Why each skipped operation was skipped, in words (few operations
    /// have one, so a map beside the nodes).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub skip_causes: std::collections::BTreeMap<u32, Arc<str>>,
    #[serde(skip)]
    index: crate::kernel::graph::OpIdMap<u32>,
    /// Operations whose `held` flag is set: few, and counted every frame
    /// (a scan of the queued lane was a 100 000-operation run's largest
    /// cost in an attached console).
    #[serde(skip)]
    held: std::collections::BTreeSet<u32>,
}

impl RunProjection {
    /// The state before the first signal of a run of `graph`: every
    /// initial operation with its edges, and the run's settings.
    pub fn seed(graph: &Graph, cfg: &RunConfig) -> RunProjection {
        RunProjection::seed_from(
            cfg,
            graph.len(),
            graph.operations().map(|op| Arc::new(op.clone())),
            graph.edges_to_positions(),
            graph.positions(),
        )
    }

    /// [`RunProjection::seed`] from the `n` operations and the edges of a
    /// graph in any form (a run's own, once the built graph is gone). An
    /// edge's target is its position in `operations`; `index` is each
    /// operation's position by id, taken from the graph's own index: in
    /// its order, a map of the same hasher fills front to back, where
    /// inserting a million random ids one by one misses the cache each time.
    pub fn seed_from<'a>(
        cfg: &RunConfig,
        n: usize,
        operations: impl Iterator<Item = Arc<Operation>>,
        edges: impl Iterator<Item = (OpId, usize, &'a crate::kernel::Edge)>,
        index: impl ExactSizeIterator<Item = (OpId, u32)>,
    ) -> RunProjection {
        let mut p = RunProjection {
            run: RunInfo {
                run_id: cfg.run_id.clone(),
                play: cfg.play.clone(),
                round: 1,
                max_concurrent: cfg.max_concurrent,
                reactive: cfg.reactive,
                max_spawn: cfg.max_spawn,
                ..RunInfo::default()
            },
            context: cfg.context.clone(),
            ..RunProjection::default()
        };
        p.nodes.reserve_exact(n);
        p.nodes.extend(operations.map(Node::new));
        p.index.reserve(index.len());
        p.index.extend(index);
        debug_assert_eq!(p.index.len(), p.nodes.len());
        // By position: no lookup of a random op id per edge.
        for (from, to, edge) in edges {
            if let Some(n) = p.nodes.get_mut(to) {
                n.deps.push(DepRecord {
                    from,
                    edge: edge.clone(),
                });
            }
        }
        p
    }

    /// Why a skipped operation was skipped, in words: the dependency that
    /// failed, was skipped, or did not meet its edge's condition; else the
    /// reason's general words.
    pub fn skip_cause(&self, ix: u32) -> Option<String> {
        let n = self.nodes.get(ix as usize)?;
        if !n.skipped() {
            return None;
        }
        let general = n.skip_reason.map(|r| r.describe());
        match (self.skip_causes.get(&ix), general) {
            (Some(c), _) => Some(c.to_string()),
            (None, g) => g.map(str::to_string),
        }
    }

    /// Rebuilds the op-id index after deserialising.
    pub fn reindex(&mut self) {
        self.index = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.op.op_id, i as u32))
            .collect();
        self.held = (0..self.nodes.len() as u32)
            .filter(|&i| self.nodes[i as usize].held)
            .collect();
    }

    /// A gate's dependencies that did not succeed, when some did (one
    /// valid edge is enough for it to become ready): what the operator
    /// must know before approving it.
    pub fn failed_deps(&self, ix: u32) -> Option<FailedDeps<'_>> {
        let n = self.nodes.get(ix as usize)?;
        let mut ids: Vec<&OpId> = n.deps.iter().map(|d| &d.from).collect();
        ids.extend(n.depends_on.iter());
        ids.sort_unstable();
        ids.dedup();
        let mut failed = Vec::new();
        let mut skipped = Vec::new();
        for id in &ids {
            if let Some(p) = self.find(id)
                && p.lane == Lane::Failed
            {
                if p.skipped() {
                    skipped.push(&**p.name());
                } else {
                    failed.push(&**p.name());
                }
            }
        }
        (!failed.is_empty() || !skipped.is_empty()).then_some(FailedDeps {
            failed,
            skipped,
            total: ids.len(),
        })
    }

    /// What keeps a queued operation whose dependencies are all settled
    /// from starting, when the run says so: its agent's provider held
    /// (`rate limit until 14:05:03`) or a spend cap that covers it
    /// (`budget 10.02/10.00 USD`). A retry wait and the operator's hold
    /// have their own marks.
    pub fn start_hold(&self, ix: u32) -> Option<StartHold<'_>> {
        if self.provider_holds.is_empty() && self.spend.held.is_none() {
            return None;
        }
        let n = self.nodes.get(ix as usize)?;
        if n.lane != Lane::Queued || n.held || n.retry_wait.is_some() {
            return None;
        }
        let settled = n
            .deps
            .iter()
            .map(|d| &d.from)
            .chain(n.depends_on.iter())
            .all(|id| self.find(id).is_none_or(|p| p.lane.is_terminal()));
        if !settled {
            return None;
        }
        if let Some(words) = self.provider_holds.get(&n.op.metadata.agent) {
            return Some(StartHold::Provider(words));
        }
        let held = self.spend.held.as_deref()?;
        let covers = held.starts_with("budget ")
            || n.role().is_some_and(|r| {
                held.strip_prefix(&**r)
                    .is_some_and(|rest| rest.starts_with(" budget "))
            });
        covers.then_some(StartHold::Spend(held))
    }

    /// Operations held by the operator, whatever their lane.
    pub fn held(&self) -> impl Iterator<Item = u32> + '_ {
        self.held.iter().copied()
    }

    fn insert(&mut self, n: Node) -> u32 {
        let ix = self.nodes.len() as u32;
        self.index.insert(n.op.op_id, ix);
        self.nodes.push(n);
        ix
    }

    pub fn ix(&self, id: &OpId) -> Option<u32> {
        self.index.get(id).copied()
    }

    pub fn node(&self, ix: u32) -> &Node {
        &self.nodes[ix as usize]
    }

    pub fn find(&self, id: &OpId) -> Option<&Node> {
        self.ix(id).map(|i| self.node(i))
    }

    pub fn by_name(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| &**n.name() == name)
    }

    pub fn name_of(&self, id: &OpId) -> Option<Arc<str>> {
        self.find(id).map(|n| n.name().clone())
    }

    fn node_mut(&mut self, id: &OpId) -> Option<&mut Node> {
        self.index.get(id).map(|&i| &mut self.nodes[i as usize])
    }

    /// The node a header names, added from the header when it is new (a
    /// projection read from a log alone learns operations as they come).
    fn ensure(&mut self, h: &NodeHeader) -> u32 {
        if let Some(&ix) = self.index.get(&h.op_id) {
            return ix;
        }
        let mut op = Operation::new(h.name.clone(), "");
        op.op_id = h.op_id;
        op.metadata.spawned_from = h.parent_id;
        let mut n = Node::new(op);
        n.depends_on = h.depends_on.clone();
        self.insert(n)
    }

    /// Moves a node to `lane` (placing it, the first time).
    fn set_lane(&mut self, ix: u32, lane: Lane, at: f64) -> Option<Moved> {
        let n = &mut self.nodes[ix as usize];
        let from = n.placed.then_some(n.lane);
        if from == Some(lane) {
            return None;
        }
        n.placed = true;
        n.lane = lane;
        n.lane_since = at;
        Some(Moved {
            node: ix,
            from,
            to: lane,
        })
    }

    /// Folds one signal in; returns the lane move it made, if any. Signals
    /// at or below the last folded `seq` are already in.
    pub fn apply(&mut self, s: &Signal) -> Option<Moved> {
        if s.seq <= self.seq && self.seq != 0 {
            return None;
        }
        self.seq = s.seq;
        self.events += 1;
        self.run.elapsed = s.elapsed;
        if let Some(h) = s.kind.node() {
            let ix = self.ensure(h);
            let n = &self.nodes[ix as usize];
            let (placed, prev) = (n.placed, n.lane);
            let before = placed.then(|| (prev, n.skipped()));
            self.node_signal(ix, s);
            let next = lane_for(prev, &s.kind);
            // The count it is in: its lane, and for failed whether skipped.
            let after = (next, self.nodes[ix as usize].skipped());
            if before != Some(after) {
                if let Some((lane, skipped)) = before {
                    self.counts.remove(lane, skipped);
                }
                self.counts.add(after.0, after.1);
            }
            return if !placed || next != prev {
                self.set_lane(ix, next, s.elapsed)
            } else {
                None
            };
        }
        self.run_signal(s);
        None
    }

    /// What a node signal says besides its lane.
    fn node_signal(&mut self, ix: u32, s: &Signal) {
        let at = s.elapsed;
        let seq = s.seq;
        match &s.kind {
            SignalKind::Completed { result, .. } => {
                let result = result.clone();
                self.merge_context(&result);
                // The node's result is its last attempt's: held once (a
                // checkpoint wrote a 50 MB answer twice). A retry moves it
                // to the attempt before it opens the node again.
                self.settle(ix, NodeStatus::Succeeded, seq, at, |n, _| {
                    n.result = Some(result);
                });
                return;
            }
            SignalKind::Escalated { reason, result, .. } => {
                let (reason, result) = (reason.clone(), result.clone());
                self.merge_context(&result);
                self.settle(ix, NodeStatus::Escalated, seq, at, |n, _| {
                    n.result = Some(result);
                    n.escalation = Some(reason);
                });
                return;
            }
            SignalKind::Failed {
                error, category, ..
            } => {
                let (error, category) = (error.clone(), category.clone());
                self.capacity.waiting.shift_remove(&ix);
                self.settle(ix, NodeStatus::Failed, seq, at, |n, a| {
                    n.result = Some(Arc::new(serde_json::json!({ "error": &*error })));
                    n.error = Some(error.clone());
                    n.category = Some(category.clone());
                    n.capacity_wait = None;
                    if let Some(a) = a {
                        a.error = Some(error);
                        a.category = Some(category);
                    }
                });
                return;
            }
            SignalKind::Skipped { .. } | SignalKind::Paused { .. } | SignalKind::Started { .. } => {
                self.capacity.waiting.shift_remove(&ix);
            }
            SignalKind::CapacityWait { .. } => {
                self.capacity.waiting.insert(ix);
            }
            SignalKind::DependenciesAdded {
                node, emitter_id, ..
            } => {
                // Admission counts it as an accepted injection.
                self.spawn_accepted += 1;
                let assignee = self.nodes[ix as usize].op.assignee.clone();
                self.capacity.waiting.shift_remove(&ix);
                self.ledger_row(
                    s,
                    *emitter_id,
                    &assignee,
                    LedgerOutcome::Accepted {
                        op_id: node.op_id,
                        name: node.name.clone(),
                    },
                );
            }
            _ => {}
        }
        let n = &mut self.nodes[ix as usize];
        match &s.kind {
            SignalKind::Queued {
                node,
                role,
                instruction,
                approval,
            } => {
                // Written only when it changed: the definition is shared
                // with the run's graph until then.
                if n.op.instruction != *instruction {
                    Arc::make_mut(&mut n.op).instruction = instruction.clone();
                }
                if role.is_some() && n.op.assignee != *role {
                    Arc::make_mut(&mut n.op).assignee = role.clone();
                }
                if n.op.metadata.approval != *approval {
                    Arc::make_mut(&mut n.op).metadata.approval = *approval;
                }
                n.depends_on = node.depends_on.clone();
                n.queued_at = at;
                // Re-queued for a new attempt after a resume.
                if n.status == NodeStatus::Running {
                    n.status = NodeStatus::Pending;
                }
            }
            SignalKind::Started {
                attempt,
                instance,
                role,
                ..
            } => {
                n.status = NodeStatus::Running;
                n.attempt = *attempt;
                n.started_at = Some(at);
                n.capacity_wait = None;
                n.activity = None;
                if role.is_some() && n.op.assignee != *role {
                    Arc::make_mut(&mut n.op).assignee = role.clone();
                }
                // Most operations run once: no room for four attempts each.
                n.attempts.reserve_exact(1);
                n.attempts.push(Attempt {
                    attempt: *attempt,
                    started_at: at,
                    finished_at: None,
                    outcome: "running".into(),
                    result: None,
                    error: None,
                    category: None,
                    instance: instance.clone(),
                    usage: None,
                    pgid: None,
                });
            }
            SignalKind::Skipped {
                reason, because, ..
            } => {
                if let Some(b) = because {
                    self.skip_causes.insert(ix, b.clone());
                }
                n.status = NodeStatus::Skipped;
                n.skip_reason = Some(*reason);
                n.finished_at = Some(at);
                n.capacity_wait = None;
            }
            SignalKind::AwaitingApproval { .. } => n.status = NodeStatus::AwaitingApproval,
            SignalKind::Approved { by, .. } => {
                n.decisions.push(Decision {
                    approved: true,
                    by: by.clone(),
                    at,
                    reason: None,
                });
                if n.status == NodeStatus::AwaitingApproval {
                    n.status = NodeStatus::Ready;
                }
            }
            SignalKind::Denied { by, reason, .. } => n.decisions.push(Decision {
                approved: false,
                by: by.clone(),
                at,
                reason: Some(reason.clone()),
            }),
            SignalKind::Retried { .. } => {
                self.skip_causes.remove(&ix);
                // The attempt that made the result keeps it.
                if let Some(r) = n.result.take()
                    && let Some(a) = n.attempts.last_mut()
                    && a.result.is_none()
                {
                    a.result = Some(r);
                }
                n.status = NodeStatus::Pending;
                n.result = None;
                n.error = None;
                n.category = None;
                n.escalation = None;
                n.skip_reason = None;
                n.finished_at = None;
                n.settled_seq = None;
                n.queued_at = at;
            }
            SignalKind::DependenciesAdded { node, edges, .. } => {
                n.deps.extend(edges.iter().cloned());
                n.depends_on = node.depends_on.clone();
                if matches!(n.status, NodeStatus::Ready | NodeStatus::AwaitingApproval) {
                    n.status = NodeStatus::Pending;
                }
            }
            SignalKind::Held { .. } => n.held = true,
            SignalKind::Unheld { .. } => n.held = false,
            SignalKind::Paused { reason, .. } => {
                n.held |= *reason == PauseReason::Held;
                n.capacity_wait = None;
            }
            SignalKind::CapacityWait { reason, .. } => n.capacity_wait = Some(reason.clone()),
            SignalKind::RetryScheduled {
                attempt,
                category,
                error,
                until,
                next,
                of,
                wait_ms,
                ..
            } => {
                n.status = NodeStatus::Pending;
                n.queued_at = at;
                n.activity = None;
                if let Some(a) = n.attempts.iter_mut().rfind(|a| a.attempt == *attempt) {
                    a.finished_at = Some(at);
                    a.outcome = "failed".into();
                    a.error = Some(error.clone());
                    a.category = Some(category.clone());
                }
                n.retry_wait = Some(Arc::new(node::RetryWait {
                    cause: crate::kernel::retry::cause::words(category),
                    clock: crate::kernel::retry::clock(*until),
                    words: crate::kernel::retry::waiting_words(category, *until, *next, *of),
                    due_at: at + *wait_ms as f64 / 1000.0,
                }));
            }
            _ => {}
        }
        if n.retry_wait.is_some()
            && matches!(
                s.kind,
                SignalKind::Started { .. }
                    | SignalKind::Skipped { .. }
                    | SignalKind::Failed { .. }
                    | SignalKind::Retried { .. }
            )
        {
            n.retry_wait = None;
        }
        if n.held {
            self.held.insert(ix);
        } else if !self.held.is_empty() {
            self.held.remove(&ix);
        }
    }

    fn merge_context(&mut self, result: &Value) {
        if let Some(Value::Object(ctx)) = result.get("context") {
            deep_merge(&mut self.context, ctx);
        }
    }

    fn settle(
        &mut self,
        ix: u32,
        status: NodeStatus,
        seq: u64,
        at: f64,
        f: impl FnOnce(&mut Node, Option<&mut Attempt>),
    ) {
        let n = &mut self.nodes[ix as usize];
        n.status = status;
        n.settled_seq = Some(seq);
        n.finished_at = Some(at);
        let attempt = n.attempt;
        // Take the attempt out to lend both mutably.
        let mut last = n.attempts.pop();
        if last.as_ref().is_some_and(|a| a.attempt != attempt) {
            n.attempts.extend(last.take());
        }
        if let Some(a) = &mut last {
            a.finished_at = Some(at);
            a.outcome = match status {
                NodeStatus::Succeeded => "succeeded",
                NodeStatus::Escalated => "escalated",
                _ => "failed",
            }
            .into();
        }
        f(n, last.as_mut());
        n.attempts.extend(last);
    }

    /// Signals about the run, the ledger, the palette and capacity.
    fn run_signal(&mut self, s: &Signal) {
        let at = s.elapsed;
        match &s.kind {
            SignalKind::RunStarted {
                run_id,
                play,
                max_concurrent,
                reactive,
                max_spawn,
                paused,
                budget,
                ..
            } => {
                self.spend.budget = budget.clone();
                self.run.run_id = run_id.clone();
                self.run.play = play.clone();
                self.run.started = true;
                self.run.max_concurrent = *max_concurrent;
                self.run.reactive = *reactive;
                self.run.max_spawn = *max_spawn;
                self.run.paused = *paused;
                self.run.round = self.run.round.max(1);
            }
            SignalKind::Resumed { resumes, .. } => {
                // Taken up again: whatever ended it before is over.
                self.run.resumes = *resumes;
                self.run.started = true;
                self.run.finished = None;
                self.run.paused = false;
                self.run.stepping = false;
            }
            SignalKind::StorageFailed { error } => self.run.storage = Some(error.clone()),
            SignalKind::StorageRecovered => self.run.storage = None,
            SignalKind::RunPaused => self.run.paused = true,
            SignalKind::RunResumed => {
                self.run.paused = false;
                self.run.stepping = false;
                self.run.stepped = None;
            }
            SignalKind::Stepped { op_id } => {
                self.run.stepping = op_id.is_none();
                if op_id.is_some() {
                    self.run.stepped = *op_id;
                }
            }
            SignalKind::RoundEnded { round } => self.run.round = round + 1,
            SignalKind::RunFinished { outcome, .. } => {
                self.run.finished = Some(*outcome);
                self.run.stepping = false;
            }
            SignalKind::Warning { message, .. } => self.warnings.push((at, message.clone())),
            SignalKind::AgentActivity {
                op_id,
                attempt,
                state,
                tool,
                ..
            } => {
                if let Some(n) = self.node_mut(op_id)
                    && n.attempt == *attempt
                {
                    // Taken by a worker: its run time counts from here,
                    // not from when the job was put on the queue.
                    if matches!(n.activity, Some((ActivityState::WaitingForWorker, _)))
                        && *state != ActivityState::WaitingForWorker
                    {
                        n.started_at = Some(at);
                    }
                    n.activity = Some((*state, tool.clone()));
                }
            }
            SignalKind::AgentProcess {
                op_id,
                attempt,
                pgid,
                ..
            } => {
                if let Some(n) = self.node_mut(op_id)
                    && let Some(a) = n.attempts.iter_mut().rev().find(|a| a.attempt == *attempt)
                {
                    a.pgid = Some(*pgid);
                }
            }
            SignalKind::AgentUsage {
                op_id,
                attempt,
                usage,
                ..
            } => {
                let tokens = crate::kernel::spend::tokens_of(usage);
                let usd = usage.cost_usd.unwrap_or(0.0);
                let mut grew = None;
                if let Some(n) = self.node_mut(op_id) {
                    let role = n.op.assignee.clone();
                    if let Some(a) = n.attempts.iter_mut().rev().find(|a| a.attempt == *attempt) {
                        let (pu, pt) = a.usage.as_deref().map_or((0.0, 0.0), |p| {
                            (
                                p.cost_usd.unwrap_or(0.0),
                                crate::kernel::spend::tokens_of(p),
                            )
                        });
                        a.usage = Some(Box::new(*usage));
                        grew = Some((role, (usd - pu).max(0.0), (tokens - pt).max(0.0)));
                    }
                }
                // Totals so far per attempt: only the growth is spent.
                if let Some((role, du, dt)) = grew {
                    self.spend.usd += du;
                    self.spend.tokens += dt;
                    if let Some(r) = role {
                        let e = self.spend.roles.entry(r).or_default();
                        e.0 += du;
                        e.1 += dt;
                    }
                    self.spend.refresh_held();
                }
            }
            SignalKind::ProviderHeld {
                agent,
                category,
                until,
                ..
            } => {
                let words = crate::kernel::retry::cause::words(category);
                let when = match until {
                    // A refused key waits for the operator, and ends at
                    // max_wait so an unattended run ends.
                    Some(u) if **category == *crate::kernel::retry::cause::AUTH => format!(
                        "until resumed (r), at most until {}",
                        crate::kernel::retry::clock(*u)
                    ),
                    Some(u) => format!("until {}", crate::kernel::retry::clock(*u)),
                    None => "until resumed (r)".into(),
                };
                self.provider_holds
                    .insert(agent.clone(), format!("{words} {when}"));
            }
            SignalKind::ProviderReleased { agent } => {
                self.provider_holds.remove(agent);
            }
            SignalKind::SpendCapReached {
                role,
                measure,
                spent,
                cap,
            } => {
                let words =
                    crate::kernel::spend::held_words(role.as_deref(), *measure, *spent, *cap);
                self.spend.caps.push(CapEvent {
                    at: s.elapsed,
                    event: "reached".into(),
                    words: words.clone(),
                    by: None,
                });
                self.spend.held = Some(words);
                self.spend.held_cap = Some((role.clone(), *measure, *cap));
                self.spend.refresh_held();
            }
            SignalKind::SpendCapRaised {
                role,
                measure,
                cap,
                by,
            } => {
                self.spend.caps.push(CapEvent {
                    at: s.elapsed,
                    event: "raised".into(),
                    words: format!(
                        "{}{} cap → {}",
                        role.as_deref().map(|r| format!("{r} ")).unwrap_or_default(),
                        measure.as_str(),
                        measure.amount(*cap)
                    ),
                    by: Some(by.clone()),
                });
                let b = self
                    .spend
                    .budget
                    .get_or_insert_with(|| crate::kernel::spend::Budget {
                        warn_at: crate::kernel::spend::default_warn_at(),
                        ..Default::default()
                    });
                b.apply(&crate::kernel::spend::CapChange {
                    role: role.as_deref().map(str::to_string),
                    measure: *measure,
                    amount: *cap,
                    relative: false,
                });
                self.spend.held = None;
                self.spend.held_cap = None;
            }
            SignalKind::Spawned {
                op_id,
                name,
                parent_id,
                assignee,
                instruction,
                record,
                ..
            } => {
                let op = Operation {
                    op_id: *op_id,
                    reference_id: name.clone(),
                    instruction: instruction.clone(),
                    assignee: assignee.clone(),
                    operation: record.kind,
                    metadata: OpMetadata {
                        requester_role: record.requester_role.clone(),
                        spawned_from: *parent_id,
                        approval: false,
                        agent: record.agent.clone(),
                        params: record.params.clone(),
                        spawn_reason: record.reason.clone(),
                        profile: record.profile.clone(),
                    },
                };
                if self.index.contains_key(op_id) {
                    // Already known (a replayed overlap): keep what is there.
                } else {
                    let mut n = Node::new(op);
                    n.deps = record.edges.clone();
                    n.queued_at = at;
                    self.insert(n);
                }
                // Only generated names take a number (a named injection
                // does not).
                self.note_spawn_number(name);
                self.spawn_accepted += 1;
                if let (Some(p), Some(id)) = (parent_id, &record.identity) {
                    self.see(p, s.seq, *id, false);
                }
                self.ledger_row(
                    s,
                    *parent_id,
                    assignee,
                    LedgerOutcome::Accepted {
                        op_id: *op_id,
                        name: name.clone(),
                    },
                );
            }
            SignalKind::SpawnDropped {
                reason,
                assignee,
                emitter_id,
                detail,
                op_id,
                identity,
                request,
            } => {
                // Admission numbers a candidate before the cap refuses it
                // ("spawn-N refused: ...").
                if *reason == DropReason::MaxSpawnExceeded {
                    let name = detail.split_whitespace().next().unwrap_or("");
                    self.note_spawn_number(name);
                }
                if let (Some(e), Some(id)) = (emitter_id, identity) {
                    self.see(e, s.seq, *id, *reason == DropReason::Duplicate);
                }
                let by = emitter_id.and_then(|e| self.name_of(&e));
                self.palette
                    .dropped(*reason, assignee.as_ref(), detail, by, at);
                self.ledger_row(
                    s,
                    *emitter_id,
                    assignee,
                    LedgerOutcome::Dropped {
                        reason: *reason,
                        detail: detail.clone(),
                        op_id: *op_id,
                        request: request.clone(),
                    },
                );
            }
            SignalKind::RoleProvisioned { .. }
            | SignalKind::RoleReserved { .. }
            | SignalKind::ExpansionRejected { .. }
            | SignalKind::Budget { .. } => self.palette.apply(&s.kind, at),
            SignalKind::Instance { .. }
            | SignalKind::CapacityReleased { .. }
            | SignalKind::Workers { .. } => {
                self.capacity.apply(&s.kind, at);
            }
            _ => {}
        }
    }

    /// A ledger row as the kernel keeps it, from the signal that recorded it.
    fn ledger_row(
        &mut self,
        s: &Signal,
        emitter: Option<OpId>,
        assignee: &Option<Arc<str>>,
        outcome: LedgerOutcome,
    ) {
        let emitter_name = emitter.and_then(|e| self.name_of(&e));
        crate::kernel::ledger::record(
            &mut self.ledger,
            LedgerEntry {
                seq: s.seq,
                elapsed: s.elapsed,
                emitter_id: emitter,
                emitter_name,
                assignee: assignee.clone(),
                outcome,
                repeats: 0,
            },
        );
    }

    fn note_spawn_number(&mut self, name: &str) {
        if let Some(n) = name
            .strip_prefix("spawn-")
            .and_then(|n| n.parse::<u64>().ok())
        {
            self.spawn_seq = self.spawn_seq.max(n);
        }
    }

    fn see(
        &mut self,
        emitter: &OpId,
        seq: u64,
        identity: crate::kernel::request::RequestId,
        duplicate: bool,
    ) {
        if let Some(n) = self.node_mut(emitter) {
            n.sightings.push((seq, identity, duplicate));
        }
    }

    /// Operations currently running.
    pub fn running(&self) -> usize {
        self.counts.running
    }

    /// Why the run failed (see [`failure_cause`]); `None` unless it
    /// finished failed.
    pub fn cause(&self) -> Option<String> {
        if self.run.finished != Some(Outcome::Failed) {
            return None;
        }
        failure_cause(
            self.nodes
                .iter()
                .map(|n| (n.lane, n.skipped(), &**n.name())),
        )
    }

    /// Rebuilds the operations, lanes and ledger from a kernel snapshot
    /// (an observer fell behind). The palette, capacity and warnings are
    /// kept: their owners are asked separately.
    pub fn resync(&mut self, snap: &Snapshot) {
        let mut p = RunProjection {
            palette: std::mem::take(&mut self.palette),
            capacity: std::mem::take(&mut self.capacity),
            warnings: std::mem::take(&mut self.warnings),
            context: std::mem::take(&mut self.context),
            run: RunInfo {
                run_id: snap.run.run_id.clone(),
                play: snap.run.play.clone(),
                started: true,
                paused: snap.run.paused,
                stepping: snap.run.step_credits > 0,
                stepped: None,
                round: snap.run.round,
                max_concurrent: snap.run.max_concurrent,
                reactive: snap.run.reactive,
                max_spawn: snap.run.max_spawn,
                finished: snap.run.finished,
                elapsed: snap.elapsed,
                resumes: self.run.resumes,
                storage: snap.run.storage.clone(),
            },
            seq: snap.seq,
            events: self.events,
            spawn_seq: self.spawn_seq,
            spawn_accepted: snap.run.spawn_accepted,
            ledger: snap.ledger.clone(),
            ..RunProjection::default()
        };
        p.capacity.waiting.clear();
        for s in &snap.nodes {
            let mut op = Operation::new(s.name.clone(), s.instruction.clone());
            op.op_id = s.op_id;
            op.assignee = s.role.clone();
            op.metadata.approval = s.approval;
            op.metadata.spawned_from = s.parent_id;
            let mut n = Node::new(op);
            n.depends_on = s.depends_on.clone();
            n.status = s.status;
            n.lane = s.lane;
            n.lane_since = s.lane_since;
            n.held = s.held;
            n.attempt = s.attempt;
            n.queued_at = s.queued_at;
            n.started_at = s.started_at;
            n.finished_at = s.finished_at;
            n.result = s.result.clone();
            n.error = s.error.clone();
            n.placed = true;
            n.capacity_wait = s
                .waiting_for
                .as_deref()
                .filter(|w| w.starts_with("capacity"))
                .map(Arc::from);
            p.counts.add(n.lane, n.skipped());
            let waits = n.capacity_wait.is_some();
            let held = n.held;
            let ix = p.insert(n);
            if waits {
                p.capacity.waiting.insert(ix);
            }
            if held {
                p.held.insert(ix);
            }
        }
        *self = p;
    }
}

#[cfg(test)]
mod tests;

/// A gate's dependencies that did not succeed ([`Projection::failed_deps`]).
#[derive(Debug, Clone, PartialEq)]
pub struct FailedDeps<'a> {
    pub failed: Vec<&'a str>,
    pub skipped: Vec<&'a str>,
    pub total: usize,
}

impl FailedDeps<'_> {
    /// `✗ 1 of 2 dependencies failed: svc12-integration`.
    pub fn words(&self) -> String {
        let mut parts = Vec::new();
        if !self.failed.is_empty() {
            parts.push(format!(
                "{} of {} dependencies failed: {}",
                self.failed.len(),
                self.total,
                self.failed.join(", ")
            ));
        }
        if !self.skipped.is_empty() {
            parts.push(format!(
                "{} of {} skipped: {}",
                self.skipped.len(),
                self.total,
                self.skipped.join(", ")
            ));
        }
        format!("✗ {}", parts.join("; "))
    }

    /// For a lane row: `1/2 deps failed`.
    pub fn short(&self) -> String {
        let n = self.failed.len() + self.skipped.len();
        let what = if self.failed.is_empty() {
            "skipped"
        } else {
            "failed"
        };
        format!("{n}/{} deps {what}", self.total)
    }
}
