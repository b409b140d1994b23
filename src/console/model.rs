//! The console's view model: everything the panes show, folded from the
//! run's signals (the same stream as the event log, so a replay folds to
//! the same picture). Folding is O(1) per signal; lanes keep their members
//! in the order they entered, so a pane renders only the rows it shows.

use std::sync::Arc;

use indexmap::{IndexMap, IndexSet};
use rustc_hash::{FxBuildHasher, FxHashMap};
use serde_json::Value;

use crate::kernel::{
    ActivityState, DropReason, Lane, NodeStatus, OpId, Outcome, PauseReason, RoleOrigin, Signal,
    SignalKind, Snapshot, Usage, lane_for,
};

/// A node's lane history stays short; longer ones keep the latest.
const HISTORY_MAX: usize = 16;
const TOMB: u32 = u32::MAX;

#[derive(Debug, Clone, PartialEq)]
pub struct NodeView {
    pub op_id: OpId,
    pub name: Arc<str>,
    pub role: Option<Arc<str>>,
    pub instruction: Arc<str>,
    pub lane: Lane,
    pub skipped: bool,
    pub held: bool,
    pub approval: bool,
    pub parent: Option<OpId>,
    pub depends_on: Arc<[OpId]>,
    pub attempt: u32,
    pub queued_at: f64,
    pub started_at: Option<f64>,
    pub finished_at: Option<f64>,
    pub result: Option<Arc<Value>>,
    pub error: Option<Arc<str>>,
    pub escalation: Option<Arc<str>>,
    pub capacity_wait: Option<Arc<str>>,
    pub instance: Option<Arc<str>>,
    /// What its agent is doing, as its stream tells (agent CLIs).
    pub activity: Option<(ActivityState, Option<Arc<str>>)>,
    /// Its agent's cost and tokens so far.
    pub usage: Option<Usage>,
    /// How earlier attempts ended (after a retry).
    pub earlier: Vec<Arc<str>>,
    /// Lane entries, in order: (lane, when).
    pub history: Vec<(Lane, f64)>,
    /// Position in its lane's entry list.
    lane_pos: u32,
}

/// One lane's members in the order they entered. Leaving leaves a
/// tombstone; `compact` removes them between batches.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneList {
    entries: Vec<u32>,
    dead: usize,
}

impl LaneList {
    pub fn len(&self) -> usize {
        self.entries.len() - self.dead
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Members `[from, from + n)` (after `compact`).
    pub fn window(&self, from: usize, n: usize) -> &[u32] {
        debug_assert_eq!(self.dead, 0, "compact before reading");
        let from = from.min(self.entries.len());
        let to = (from + n).min(self.entries.len());
        &self.entries[from..to]
    }

    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.entries.iter().copied().filter(|&e| e != TOMB)
    }

    fn push(&mut self, node: u32) -> u32 {
        self.entries.push(node);
        (self.entries.len() - 1) as u32
    }

    fn remove(&mut self, pos: u32) {
        if let Some(e) = self.entries.get_mut(pos as usize)
            && *e != TOMB
        {
            *e = TOMB;
            self.dead += 1;
        }
    }

    /// Drops tombstones; returns the moves so nodes can update positions.
    fn compact(&mut self) -> bool {
        if self.dead == 0 {
            return false;
        }
        self.entries.retain(|&e| e != TOMB);
        self.dead = 0;
        true
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum LedgerKind {
    Accepted {
        name: Arc<str>,
    },
    Dropped {
        reason: DropReason,
        detail: Arc<str>,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct LedgerRow {
    pub at: f64,
    pub emitter: Option<Arc<str>>,
    pub assignee: Option<Arc<str>>,
    pub kind: LedgerKind,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RoleRow {
    pub role: Arc<str>,
    pub disposition: Arc<str>,
    pub modes: Arc<[Arc<str>]>,
    pub model: Option<Arc<str>>,
    pub effort: Option<Arc<str>>,
    pub at: f64,
    pub by: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    pub role: Arc<str>,
    pub reason: DropReason,
    pub detail: Arc<str>,
    pub by: Option<Arc<str>>,
    pub at: f64,
    /// Its spawn_dropped entry has been seen (the two describe one refusal).
    pub in_ledger: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Budgets {
    pub consumed_new_roles: u32,
    pub reserved: usize,
    pub max_new_roles: u32,
    pub spawns_accepted: usize,
    pub max_spawn: usize,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct PaletteView {
    pub initial: Vec<RoleRow>,
    pub expanded: Vec<RoleRow>,
    /// Reservations in flight: (role, when, by).
    pub reserved: Vec<(Arc<str>, f64, Option<Arc<str>>)>,
    pub rejections: Vec<Rejection>,
    pub budgets: Option<Budgets>,
    /// Catalog roles a request could still recruit (from the play).
    pub expansion_only: Vec<Arc<str>>,
    pub orchestrator_may_expand: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InstanceView {
    pub name: Arc<str>,
    pub profile: Arc<str>,
    pub role: Arc<str>,
    pub state: Arc<str>,
    pub lifetime: Arc<str>,
    pub op: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProfileView {
    pub name: Arc<str>,
    pub role: Arc<str>,
    pub max_instances: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ReleaseView {
    pub trigger: Arc<str>,
    pub at: f64,
    pub released: Vec<Arc<str>>,
    /// (name, reason)
    pub retained: Vec<(Arc<str>, Arc<str>)>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct CapacityView {
    pub enabled: bool,
    pub max_nodes: u32,
    pub profiles: Vec<ProfileView>,
    pub instances: IndexMap<Arc<str>, InstanceView, FxBuildHasher>,
    /// Nodes waiting for capacity now.
    pub waiting: IndexSet<u32, FxBuildHasher>,
    pub last_release: Option<ReleaseView>,
}

impl CapacityView {
    pub fn active(&self) -> usize {
        self.instances
            .values()
            .filter(|i| !matches!(&*i.state, "released" | "failed"))
            .count()
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunView {
    pub run_id: Arc<str>,
    pub play: Arc<str>,
    pub started: bool,
    pub paused: bool,
    /// A step was taken whose operation has not started yet.
    pub stepping: bool,
    /// The operation the last step let start.
    pub stepped: Option<OpId>,
    pub round: u32,
    pub max_concurrent: usize,
    pub max_spawn: usize,
    pub finished: Option<Outcome>,
    /// `elapsed` of the latest signal.
    pub elapsed: f64,
}

/// Static facts from the play the signals do not repeat.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlayFacts {
    pub expansion_only: Vec<Arc<str>>,
    pub orchestrator_may_expand: bool,
    pub max_nodes: u32,
    pub profiles: Vec<ProfileView>,
    pub capacity: bool,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ViewModel {
    pub run: RunView,
    pub nodes: Vec<NodeView>,
    pub by_id: FxHashMap<OpId, u32>,
    pub lanes: [LaneList; 7],
    pub skipped: usize,
    pub ledger: Vec<LedgerRow>,
    pub palette: PaletteView,
    pub capacity: CapacityView,
    /// Warnings, newest last.
    pub warnings: Vec<(f64, Arc<str>)>,
    /// The last signal folded.
    pub seq: u64,
}

fn palette_reason(r: DropReason) -> bool {
    matches!(
        r,
        DropReason::UnknownCatalogRole
            | DropReason::RequesterNotAuthorized
            | DropReason::PaletteBudgetExhausted
            | DropReason::RoleProvisionFailed
    )
}

pub fn lane_index(l: Lane) -> usize {
    match l {
        Lane::Queued => 0,
        Lane::Running => 1,
        Lane::AwaitingApproval => 2,
        Lane::Paused => 3,
        Lane::Succeeded => 4,
        Lane::Failed => 5,
        Lane::Escalated => 6,
    }
}

impl ViewModel {
    pub fn new(facts: &PlayFacts) -> Self {
        let mut vm = ViewModel::default();
        vm.palette.expansion_only = facts.expansion_only.clone();
        vm.palette.orchestrator_may_expand = facts.orchestrator_may_expand;
        vm.capacity.enabled = facts.capacity;
        vm.capacity.max_nodes = facts.max_nodes;
        vm.capacity.profiles = facts.profiles.clone();
        vm
    }

    pub fn lane(&self, l: Lane) -> &LaneList {
        &self.lanes[lane_index(l)]
    }

    pub fn count(&self, l: Lane) -> usize {
        self.lane(l).len()
    }

    pub fn node(&self, ix: u32) -> &NodeView {
        &self.nodes[ix as usize]
    }

    pub fn find(&self, id: &OpId) -> Option<&NodeView> {
        self.by_id.get(id).map(|&i| &self.nodes[i as usize])
    }

    pub fn name_of(&self, id: &OpId) -> Option<Arc<str>> {
        self.find(id).map(|n| n.name.clone())
    }

    pub fn approvals_waiting(&self) -> usize {
        self.count(Lane::AwaitingApproval)
    }

    pub fn running(&self) -> usize {
        self.count(Lane::Running)
    }

    /// Whether operations are still in flight (quitting would cancel them).
    pub fn work_in_progress(&self) -> bool {
        self.run.finished.is_none()
    }

    fn move_lane(&mut self, ix: u32, to: Lane, at: f64) {
        let n = &mut self.nodes[ix as usize];
        if n.lane == to && n.lane_pos != TOMB {
            return;
        }
        let from = n.lane;
        let pos = n.lane_pos;
        let was_skipped = n.skipped;
        self.lanes[lane_index(from)].remove(pos);
        let n = &mut self.nodes[ix as usize];
        n.lane = to;
        if n.history.len() >= HISTORY_MAX {
            n.history.remove(0);
        }
        n.history.push((to, at));
        let _ = was_skipped;
        n.lane_pos = self.lanes[lane_index(to)].push(ix);
    }

    fn ensure_node(&mut self, node: &crate::kernel::NodeHeader) -> u32 {
        if let Some(&ix) = self.by_id.get(&node.op_id) {
            return ix;
        }
        let ix = self.nodes.len() as u32;
        self.nodes.push(NodeView {
            op_id: node.op_id,
            name: node.name.clone(),
            role: None,
            instruction: Arc::from(""),
            lane: Lane::Queued,
            skipped: false,
            held: false,
            approval: false,
            parent: node.parent_id,
            depends_on: node.depends_on.clone(),
            attempt: 0,
            queued_at: 0.0,
            started_at: None,
            finished_at: None,
            result: None,
            error: None,
            escalation: None,
            capacity_wait: None,
            instance: None,
            activity: None,
            usage: None,
            earlier: Vec::new(),
            history: Vec::new(),
            lane_pos: TOMB,
        });
        self.by_id.insert(node.op_id, ix);
        ix
    }

    /// Folds one signal. Signals at or below the last folded sequence
    /// number (a resynchronisation overlap) are ignored.
    pub fn fold(&mut self, s: &Signal) {
        if s.seq <= self.seq && self.seq != 0 {
            return;
        }
        self.seq = s.seq;
        self.run.elapsed = s.elapsed;
        let at = s.elapsed;
        if let Some(h) = s.kind.node() {
            let ix = self.ensure_node(h);
            let prev = self.nodes[ix as usize].lane;
            let first = self.nodes[ix as usize].lane_pos == TOMB;
            let next = lane_for(prev, &s.kind);
            self.node_detail(ix, &s.kind, at);
            if first || next != prev {
                self.move_lane(ix, next, at);
            }
            return;
        }
        match &s.kind {
            SignalKind::RunStarted {
                run_id,
                play,
                max_concurrent,
                max_spawn,
                paused,
                ..
            } => {
                self.run.run_id = run_id.clone();
                self.run.play = play.clone();
                self.run.started = true;
                self.run.max_concurrent = *max_concurrent;
                self.run.max_spawn = *max_spawn;
                self.run.paused = *paused;
                self.run.round = 1;
            }
            SignalKind::RunPaused => self.run.paused = true,
            // Taken up again: whatever ended it before is over.
            SignalKind::Resumed { .. } => {
                self.run.finished = None;
                self.run.paused = false;
            }
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
                if let Some(&ix) = self.by_id.get(op_id) {
                    let n = &mut self.nodes[ix as usize];
                    if n.attempt == *attempt {
                        n.activity = Some((*state, tool.clone()));
                    }
                }
            }
            SignalKind::AgentUsage {
                op_id,
                attempt,
                usage,
                ..
            } => {
                if let Some(&ix) = self.by_id.get(op_id) {
                    let n = &mut self.nodes[ix as usize];
                    if n.attempt == *attempt {
                        n.usage = Some(*usage);
                    }
                }
            }
            SignalKind::Spawned {
                name,
                parent_id,
                assignee,
                ..
            } => {
                let emitter = parent_id.and_then(|p| self.name_of(&p));
                self.ledger.push(LedgerRow {
                    at,
                    emitter,
                    assignee: assignee.clone(),
                    kind: LedgerKind::Accepted { name: name.clone() },
                });
            }
            SignalKind::SpawnDropped {
                reason,
                assignee,
                emitter_id,
                detail,
                ..
            } => {
                let emitter = emitter_id.and_then(|p| self.name_of(&p));
                // A palette refusal: the router announced it already when the
                // role was outside the palette; a terminal requester's refusal
                // shows up here only.
                if palette_reason(*reason) {
                    let role = assignee
                        .clone()
                        .unwrap_or_else(|| Arc::from("(its own role)"));
                    match self
                        .palette
                        .rejections
                        .iter_mut()
                        .rev()
                        .find(|r| !r.in_ledger && r.reason == *reason && r.role == role)
                    {
                        Some(r) => r.in_ledger = true,
                        None => self.palette.rejections.push(Rejection {
                            role,
                            reason: *reason,
                            detail: detail.clone(),
                            by: emitter.clone(),
                            at,
                            in_ledger: true,
                        }),
                    }
                }
                self.ledger.push(LedgerRow {
                    at,
                    emitter,
                    assignee: assignee.clone(),
                    kind: LedgerKind::Dropped {
                        reason: *reason,
                        detail: detail.clone(),
                    },
                });
            }
            SignalKind::RoleProvisioned {
                role,
                origin,
                by,
                disposition,
                model,
                effort,
                modes,
            } => {
                let row = RoleRow {
                    role: role.clone(),
                    disposition: disposition.clone(),
                    modes: modes.clone(),
                    model: model.clone(),
                    effort: effort.clone(),
                    at,
                    by: by.clone(),
                };
                self.palette.reserved.retain(|(r, _, _)| r != role);
                self.palette.expansion_only.retain(|r| r != role);
                match origin {
                    RoleOrigin::Initial => self.palette.initial.push(row),
                    RoleOrigin::Expanded => self.palette.expanded.push(row),
                }
            }
            SignalKind::RoleReserved { role, by } => {
                self.palette.reserved.push((role.clone(), at, by.clone()));
            }
            SignalKind::ExpansionRejected {
                role,
                reason,
                detail,
                by,
            } => {
                self.palette.reserved.retain(|(r, _, _)| r != role);
                self.palette.rejections.push(Rejection {
                    role: role.clone(),
                    reason: *reason,
                    detail: detail.clone(),
                    by: by.clone(),
                    at,
                    in_ledger: false,
                });
            }
            SignalKind::Budget {
                reserved_roles,
                consumed_new_roles,
                max_new_roles,
                spawns_accepted,
                max_spawn,
                ..
            } => {
                self.palette.budgets = Some(Budgets {
                    consumed_new_roles: *consumed_new_roles,
                    reserved: reserved_roles.len(),
                    max_new_roles: *max_new_roles,
                    spawns_accepted: *spawns_accepted,
                    max_spawn: *max_spawn,
                });
            }
            SignalKind::Instance {
                name,
                profile,
                role,
                state,
                lifetime,
                op,
                ..
            } => {
                self.capacity.instances.insert(
                    name.clone(),
                    InstanceView {
                        name: name.clone(),
                        profile: profile.clone(),
                        role: role.clone(),
                        state: state.clone(),
                        lifetime: lifetime.clone(),
                        op: op.clone(),
                    },
                );
            }
            SignalKind::CapacityReleased {
                trigger,
                released,
                retained,
            } => {
                self.capacity.last_release = Some(ReleaseView {
                    trigger: trigger.clone(),
                    at,
                    released: released.to_vec(),
                    retained: retained
                        .iter()
                        .map(|r| (r.name.clone(), r.reason.clone()))
                        .collect(),
                });
            }
            _ => {}
        }
    }

    /// What a node signal says besides its lane.
    fn node_detail(&mut self, ix: u32, kind: &SignalKind, at: f64) {
        let mut leave_wait = false;
        let mut unskip = false;
        {
            let n = &mut self.nodes[ix as usize];
            match kind {
                SignalKind::Queued {
                    node,
                    role,
                    instruction,
                    approval,
                } => {
                    n.role = role.clone();
                    n.instruction = instruction.clone();
                    n.approval = *approval;
                    n.depends_on = node.depends_on.clone();
                    n.parent = node.parent_id;
                    n.queued_at = at;
                }
                SignalKind::Started {
                    attempt, instance, ..
                } => {
                    n.attempt = *attempt;
                    n.started_at = Some(at);
                    n.instance = instance.clone();
                    n.activity = None;
                    n.usage = None;
                    leave_wait = true;
                }
                SignalKind::Completed { result, .. } => {
                    n.result = Some(result.clone());
                    n.finished_at = Some(at);
                }
                SignalKind::Failed { error, .. } => {
                    n.error = Some(error.clone());
                    n.finished_at = Some(at);
                    leave_wait = true;
                }
                SignalKind::Skipped { .. } => {
                    n.skipped = true;
                    n.finished_at = Some(at);
                    leave_wait = true;
                }
                SignalKind::Escalated { reason, result, .. } => {
                    n.escalation = Some(reason.clone());
                    n.result = Some(result.clone());
                    n.finished_at = Some(at);
                }
                SignalKind::Retried { because, .. } => {
                    if because.is_none() {
                        let how = n.error.as_deref().unwrap_or("failed");
                        n.earlier
                            .push(Arc::from(format!("attempt {}: {how}", n.attempt.max(1))));
                    }
                    n.error = None;
                    n.result = None;
                    n.escalation = None;
                    n.finished_at = None;
                    if std::mem::take(&mut n.skipped) {
                        unskip = true;
                    }
                }
                SignalKind::Held { .. } => n.held = true,
                SignalKind::Unheld { .. } => n.held = false,
                SignalKind::Paused { reason, .. } => {
                    n.held = *reason == PauseReason::Held || n.held;
                    leave_wait = true;
                }
                SignalKind::CapacityWait { reason, .. } => n.capacity_wait = Some(reason.clone()),
                _ => {}
            }
            if leave_wait {
                n.capacity_wait = None;
            }
        }
        match kind {
            SignalKind::CapacityWait { .. } => {
                self.capacity.waiting.insert(ix);
            }
            _ if leave_wait => {
                self.capacity.waiting.shift_remove(&ix);
            }
            _ => {}
        }
        if matches!(kind, SignalKind::Skipped { .. }) {
            self.skipped += 1;
        }
        if unskip {
            self.skipped -= 1;
        }
    }

    /// Between batches: drops lane tombstones so panes can slice windows.
    pub fn settle(&mut self) {
        for l in 0..7 {
            if self.lanes[l].compact() {
                for (pos, &ix) in self.lanes[l].entries.iter().enumerate() {
                    self.nodes[ix as usize].lane_pos = pos as u32;
                }
            }
        }
    }

    /// Rebuilds nodes, lanes and the ledger from a kernel snapshot (after
    /// the console fell behind). Palette and capacity views are kept: their
    /// owners are asked separately.
    pub fn resync(&mut self, snap: &Snapshot) {
        let keep_palette = std::mem::take(&mut self.palette);
        let keep_capacity = std::mem::take(&mut self.capacity);
        let warnings = std::mem::take(&mut self.warnings);
        let mut vm = ViewModel {
            palette: keep_palette,
            capacity: keep_capacity,
            warnings,
            ..ViewModel::default()
        };
        vm.capacity.waiting.clear();
        vm.run.run_id = snap.run.run_id.clone();
        vm.run.play = snap.run.play.clone();
        vm.run.started = true;
        vm.run.paused = snap.run.paused;
        vm.run.stepping = snap.run.step_credits > 0;
        vm.run.round = snap.run.round;
        vm.run.max_concurrent = snap.run.max_concurrent;
        vm.run.max_spawn = snap.run.max_spawn;
        vm.run.finished = snap.run.finished;
        vm.run.elapsed = snap.elapsed;
        for n in &snap.nodes {
            let ix = vm.nodes.len() as u32;
            vm.nodes.push(NodeView {
                op_id: n.op_id,
                name: n.name.clone(),
                role: n.role.clone(),
                instruction: n.instruction.clone(),
                lane: n.lane,
                skipped: n.status == NodeStatus::Skipped,
                held: n.held,
                approval: n.approval,
                parent: n.parent_id,
                depends_on: n.depends_on.clone(),
                attempt: n.attempt,
                queued_at: n.queued_at,
                started_at: n.started_at,
                finished_at: n.finished_at,
                result: n.result.clone(),
                error: n.error.clone(),
                escalation: None,
                capacity_wait: n
                    .waiting_for
                    .clone()
                    .filter(|w| w.starts_with("capacity"))
                    .map(Arc::from),
                instance: None,
                activity: None,
                usage: None,
                earlier: Vec::new(),
                history: vec![(n.lane, n.lane_since)],
                lane_pos: TOMB,
            });
            vm.by_id.insert(n.op_id, ix);
            if vm.nodes[ix as usize].skipped {
                vm.skipped += 1;
            }
            if vm.nodes[ix as usize].capacity_wait.is_some() {
                vm.capacity.waiting.insert(ix);
            }
            let pos = vm.lanes[lane_index(n.lane)].push(ix);
            vm.nodes[ix as usize].lane_pos = pos;
        }
        for e in &snap.ledger {
            vm.ledger.push(LedgerRow {
                at: e.elapsed,
                emitter: e.emitter_name.clone(),
                assignee: e.assignee.clone(),
                kind: match &e.outcome {
                    crate::kernel::LedgerOutcome::Accepted { name, .. } => {
                        LedgerKind::Accepted { name: name.clone() }
                    }
                    crate::kernel::LedgerOutcome::Dropped { reason, detail, .. } => {
                        LedgerKind::Dropped {
                            reason: *reason,
                            detail: detail.clone(),
                        }
                    }
                },
            });
        }
        vm.seq = snap.seq;
        *self = vm;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::NodeHeader;

    fn sig(seq: u64, kind: SignalKind) -> Signal {
        Signal {
            v: 1,
            seq,
            elapsed: seq as f64 / 10.0,
            kind,
        }
    }

    fn header(n: u128) -> NodeHeader {
        NodeHeader {
            op_id: uuid::Uuid::from_u128(n),
            name: Arc::from(format!("op{n}")),
            parent_id: None,
            depends_on: Arc::from(Vec::new()),
        }
    }

    #[test]
    fn lanes_keep_entry_order_and_move_nodes() {
        let mut vm = ViewModel::default();
        let q = |n| SignalKind::Queued {
            node: header(n),
            role: None,
            instruction: "x".into(),
            approval: false,
        };
        let st = |n| SignalKind::Started {
            node: header(n),
            attempt: 1,
            role: None,
            instance: None,
        };
        vm.fold(&sig(1, q(1)));
        vm.fold(&sig(2, q(2)));
        vm.fold(&sig(3, q(3)));
        vm.fold(&sig(4, st(2)));
        vm.settle();
        let names = |vm: &ViewModel, l| {
            vm.lane(l)
                .window(0, 10)
                .iter()
                .map(|&i| vm.node(i).name.to_string())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&vm, Lane::Queued), ["op1", "op3"]);
        assert_eq!(names(&vm, Lane::Running), ["op2"]);
        vm.fold(&sig(5, st(1)));
        vm.settle();
        assert_eq!(names(&vm, Lane::Running), ["op2", "op1"]);
        assert_eq!(
            vm.node(0)
                .history
                .iter()
                .map(|(l, _)| *l)
                .collect::<Vec<_>>(),
            [Lane::Queued, Lane::Running]
        );
        // An old signal (seq <= last) is ignored.
        vm.fold(&sig(3, q(9)));
        assert!(vm.find(&uuid::Uuid::from_u128(9)).is_none());
    }
}
