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
mod node_fold;
mod palette;
mod run_fold;

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
pub use node::{Asked, Attempt, Decision, DecisionKind, Node};
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
    /// What paused it, when a breakpoint did (`impl-api is about to start
    /// (breakpoint impl-api)`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_by: Option<Arc<str>>,
    /// The run's breakpoints, as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub breakpoints: Vec<Arc<str>>,
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
    /// Where its work lands, and what of the checkout it left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<Arc<Workspace>>,
}

/// The run's branch, as its `workspace` signal said.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Workspace {
    pub branch: Arc<str>,
    pub base: Arc<str>,
    /// Paths changed in the checkout and not committed when the run
    /// began: not part of its base.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub uncommitted: Vec<Arc<str>>,
}

impl Workspace {
    /// `2 uncommitted files are not in the run's base: a.txt, b.txt`.
    pub fn left_out(&self) -> Option<String> {
        left_out(&self.base, &self.uncommitted)
    }
}

/// What a base (`base`) leaves out of the checkout, in words:
/// `2 uncommitted files are not in the run's base (5e6f7a8b9c0d): a.txt,
/// b.txt`; none when nothing was left uncommitted.
pub fn left_out(base: &str, uncommitted: &[Arc<str>]) -> Option<String> {
    let n = uncommitted.len();
    if n == 0 {
        return None;
    }
    const NAMED: usize = 5;
    let mut names = uncommitted[..n.min(NAMED)].join(", ");
    if n > NAMED {
        names.push_str(&format!(" and {} more", n - NAMED));
    }
    Some(format!(
        "{n} uncommitted file{} {} not in the run's base ({}): {names}",
        if n == 1 { "" } else { "s" },
        if n == 1 { "is" } else { "are" },
        &base[..base.len().min(12)]
    ))
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
    /// The operator's own adds, which `spawn_accepted` leaves out.
    #[serde(default)]
    pub operator_added: usize,
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
    /// What each operation waiting for the operator was asked (a gate, a
    /// question): few at a time, so a map beside the nodes.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub asked: std::collections::BTreeMap<u32, Asked>,
    #[serde(skip)]
    index: LazyIndex,
    /// Operations whose `held` flag is set: few, and counted every frame
    /// (a scan of the queued lane was a 100 000-operation run's largest
    /// cost in an attached console).
    #[serde(skip)]
    held: std::collections::BTreeSet<u32>,
}

/// Operations by id, made when first asked for: a run's signals name
/// each operation's position, so a checkpoint writer or a console that is
/// never asked by id holds no map of a million ids (40 MB). Derived data:
/// two projections are equal whether or not theirs is made yet.
#[derive(Debug, Clone, Default)]
struct LazyIndex(std::sync::OnceLock<crate::kernel::graph::OpIdMap<u32>>);

impl PartialEq for LazyIndex {
    fn eq(&self, _: &Self) -> bool {
        true
    }
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
        // Positions are the nodes' own: the index by id is made when a
        // lookup by id first needs it (signals name their position).
        debug_assert_eq!(index.len(), p.nodes.len());
        drop(index);
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
        self.index = LazyIndex::default();
        self.held = (0..self.nodes.len() as u32)
            .filter(|&i| self.nodes[i as usize].held)
            .collect();
    }

    /// What a decision on operation `ix` answers now, as this projection
    /// shows it: the question its running attempt asks, its gate (with its
    /// dependencies' outcomes), its failure or its escalation. The kernel
    /// works out the same from its own state and refuses a decision whose
    /// basis differs (`stale_decision`).
    pub fn basis_of(&self, ix: u32) -> Option<crate::kernel::Basis> {
        use crate::kernel::{Basis, BasisKind};
        let n = self.nodes.get(ix as usize)?;
        match n.status {
            NodeStatus::Running => {
                n.asking.as_ref()?;
                let a = self.asked.get(&ix)?;
                Some(Basis {
                    kind: BasisKind::of_question(n.asked),
                    seq: a.seq,
                    what: a.on.clone(),
                })
            }
            NodeStatus::AwaitingApproval => {
                let a = self.asked.get(&ix)?;
                let deps = n
                    .depends_on
                    .iter()
                    .filter_map(|id| self.find(id).map(|d| (*id, d.status)));
                Some(Basis {
                    kind: BasisKind::Gate,
                    seq: a.seq,
                    what: Some(Arc::from(crate::kernel::snapshot::deps_digest(deps))),
                })
            }
            NodeStatus::Failed => Some(Basis {
                kind: BasisKind::Failure,
                seq: n.settled_seq?,
                what: None,
            }),
            NodeStatus::Escalated => Some(Basis {
                kind: BasisKind::Escalation,
                seq: n.settled_seq?,
                what: None,
            }),
            _ => None,
        }
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
        if let Some(index) = self.index.0.get_mut() {
            index.insert(n.op.op_id, ix);
        }
        self.nodes.push(n);
        ix
    }

    /// The index by id, made on first use.
    fn by_id(&self) -> &crate::kernel::graph::OpIdMap<u32> {
        self.index.0.get_or_init(|| {
            self.nodes
                .iter()
                .enumerate()
                .map(|(i, n)| (n.op.op_id, i as u32))
                .collect()
        })
    }

    pub fn ix(&self, id: &OpId) -> Option<u32> {
        self.by_id().get(id).copied()
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
        let i = self.ix(id)?;
        Some(&mut self.nodes[i as usize])
    }

    /// The node a header names, added from the header when it is new (a
    /// projection read from a log alone learns operations as they come).
    fn ensure(&mut self, h: &NodeHeader) -> u32 {
        // By the position the signal names, when it is this operation's.
        if self
            .nodes
            .get(h.pos as usize)
            .is_some_and(|n| n.op.op_id == h.op_id)
        {
            return h.pos;
        }
        if let Some(ix) = self.ix(&h.op_id) {
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
            if next != Lane::AwaitingApproval {
                // Out of the approval lane, nothing is asked any more (an
                // attempt stopped with its question open says no answer).
                self.nodes[ix as usize].asking = None;
                if !self.asked.is_empty() {
                    self.asked.remove(&ix);
                }
            }
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
                // Not in the snapshot: what this observer last saw.
                paused_by: if snap.run.paused {
                    self.run.paused_by.take()
                } else {
                    None
                },
                breakpoints: std::mem::take(&mut self.run.breakpoints),
                workspace: self.run.workspace.take(),
            },
            seq: snap.seq,
            events: self.events,
            spawn_seq: self.spawn_seq,
            spawn_accepted: snap.run.spawn_accepted,
            operator_added: snap.run.operator_added,
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
            // What it waits on the operator with, and by which signal: a
            // decision from this view still names what it shows.
            let asked = s.deciding.as_deref().map(|d| {
                use crate::kernel::BasisKind;
                match (&d.question, d.basis.kind) {
                    (Some(q), _) => {
                        n.asking = Some(q.what.clone());
                        n.asked = q.kind;
                    }
                    (None, BasisKind::Failure | BasisKind::Escalation) => {
                        n.settled_seq = Some(d.basis.seq);
                    }
                    _ => {}
                }
                Asked {
                    seq: d.basis.seq,
                    on: d.question.as_ref().and(d.basis.what.clone()),
                    detail: d.question.as_ref().and_then(|q| q.detail.clone()),
                }
            });
            p.counts.add(n.lane, n.skipped());
            let waits = n.capacity_wait.is_some();
            let held = n.held;
            let ix = p.insert(n);
            if let Some(a) = asked.filter(|_| p.nodes[ix as usize].lane == Lane::AwaitingApproval) {
                p.asked.insert(ix, a);
            }
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
