//! Readiness and settling (ADR-0033 D1, D2, D4): which operations wait for
//! dependencies, an approval, a pause, an operator hold, a concurrency slot
//! or capacity, and what settling one releases. A slot is taken only at the
//! moment an operation starts; everything that releases nodes only queues
//! them, and `advance` drains the queue, so a long chain of skips never
//! recurses.

use std::collections::VecDeque;
use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::NodeIndex;
use serde_json::{Value, json};

use super::super::agent::AgentFailure;
use super::super::breakpoint::Breakpoint;
use super::super::control::ApprovalPolicy;
use super::super::graph::Condition;
use super::super::lease::{CAPACITY_UNAVAILABLE, LeaseRequest};
use super::super::request;
use super::super::signal::{PauseReason, SignalKind, SkipReason};
use super::super::snapshot::NodeStatus;
use super::Executor;
use super::capacity::Ask;
use super::node::{Approval, edge_valid};

/// Where operations wait to start, and the run-wide counters of it.
#[derive(Debug, Default)]
pub(super) struct Schedule {
    /// Ready and allowed to start, waiting for a concurrency slot (FIFO).
    pub ready: VecDeque<NodeIndex>,
    /// Ready but held back by a pause or an operator hold (FIFO).
    pub parked: VecDeque<NodeIndex>,
    /// Nodes whose dependencies just settled.
    pub worklist: VecDeque<NodeIndex>,
    pub paused: bool,
    /// Steps taken while nothing waited: the next ones to become ready
    /// start.
    pub step_credits: u32,
    pub running: usize,
    pub terminal: usize,
}

/// Where a node that became ready goes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Place {
    Ready,
    /// Ready, on a step credit taken while nothing waited.
    Stepped,
    Park(PauseReason),
}

impl Schedule {
    pub fn place(&mut self, held: bool) -> Place {
        if held {
            Place::Park(PauseReason::Held)
        } else if !self.paused {
            Place::Ready
        } else if self.step_credits > 0 {
            self.step_credits -= 1;
            Place::Stepped
        } else {
            Place::Park(PauseReason::RunPaused)
        }
    }

    /// True when it changed. Pausing forgets unused step credits.
    pub fn pause(&mut self) -> bool {
        let changed = !self.paused;
        self.paused = true;
        self.step_credits = 0;
        changed
    }

    pub fn resume(&mut self) -> bool {
        let changed = self.paused;
        self.paused = false;
        self.step_credits = 0;
        changed
    }

    /// Takes `ix` off the parked queue.
    pub fn unpark(&mut self, ix: NodeIndex) {
        self.parked.retain(|&p| p != ix);
    }

    pub fn clear(&mut self) {
        self.ready.clear();
        self.parked.clear();
    }
}

impl Executor {
    /// Announces a node that is now part of the graph and works out how many
    /// of its dependencies are still outstanding.
    pub(super) fn node_added(&mut self, ix: NodeIndex) {
        let waiting = self.link(ix);
        let node = self.header(ix);
        let n = &self.graph[ix];
        let kind = SignalKind::Queued {
            node,
            role: n.op.assignee.clone(),
            instruction: n.op.instruction.clone(),
            approval: n.op.metadata.approval,
        };
        self.emit_node(ix, kind);
        if waiting == 0 {
            self.sched.worklist.push_back(ix);
        }
    }

    /// Counts a node's outstanding dependencies and whether a settled one
    /// already gives it a valid path; returns how many it waits for.
    pub(super) fn link(&mut self, ix: NodeIndex) -> u32 {
        let mut waiting = 0;
        let mut any_valid = false;
        let mut has_preds = false;
        // Reused buffer: most nodes have one or two predecessors, and the
        // only allocation should be the shared slice itself.
        let mut preds = std::mem::take(&mut self.pred_buf);
        preds.clear();
        for e in self.graph.edges_directed(ix, Direction::Incoming) {
            use petgraph::visit::EdgeRef;
            has_preds = true;
            let head = &self.graph[e.source()];
            preds.push(head.op.op_id);
            if head.status.is_terminal() {
                any_valid |= edge_valid(&e.weight().condition, head.status, head.result.as_deref());
            } else {
                waiting += 1;
            }
        }
        preds.reverse();
        let now = self.now_ms();
        {
            let n = &mut self.graph[ix];
            n.waiting = waiting;
            n.any_valid = any_valid;
            n.has_preds = has_preds;
            if !preds.is_empty() {
                n.depends_on = Arc::from(&preds[..]);
            }
            n.queued_at = now;
            n.lane_since = now;
        }
        self.pred_buf = preds;
        waiting
    }

    /// Links `ix` again keeping its lane (a resumed or reopened node), and
    /// queues it when nothing is outstanding.
    pub(super) fn relink(&mut self, ix: NodeIndex) {
        let lane = self.graph[ix].lane;
        let waiting = self.link(ix);
        self.graph[ix].lane = lane;
        if waiting == 0 {
            self.sched.worklist.push_back(ix);
        }
    }

    pub(super) fn drain_worklist(&mut self) {
        while let Some(ix) = self.sched.worklist.pop_front() {
            self.deps_settled(ix);
        }
    }

    /// Every dependency has settled: skip, ask for approval, or get ready.
    fn deps_settled(&mut self, ix: NodeIndex) {
        let n = &self.graph[ix];
        if n.status != NodeStatus::Pending {
            return;
        }
        if n.has_preds && !n.any_valid {
            let because = self.why_no_path(ix);
            self.skip_because(ix, SkipReason::NoValidPath, Some(because), true);
            return;
        }
        if n.approval == Approval::Undecided {
            match self.cfg.approvals.clone() {
                ApprovalPolicy::Ask => {
                    self.graph[ix].status = NodeStatus::AwaitingApproval;
                    let node = self.header(ix);
                    self.emit_node(ix, SignalKind::AwaitingApproval { node });
                    return;
                }
                ApprovalPolicy::ApproveAll => {
                    self.graph[ix].approval = Approval::Approved;
                    let node = self.header(ix);
                    let by = Arc::from("policy");
                    let on = self.gate_words(ix);
                    self.emit_node(ix, SignalKind::Approved { node, by, on });
                }
                ApprovalPolicy::DenyAll { reason } => {
                    self.deny_node(ix, Arc::from("policy"), reason);
                    return;
                }
            }
        }
        self.enqueue(ix);
    }

    pub(super) fn enqueue(&mut self, ix: NodeIndex) {
        if !self.sched.paused
            && !self.graph[ix].held
            && let Some(cause) = self.break_before(ix)
        {
            self.pause_for(Some(cause));
        }
        self.graph[ix].status = NodeStatus::Ready;
        match self.sched.place(self.graph[ix].held) {
            Place::Ready => self.sched.ready.push_back(ix),
            Place::Stepped => {
                let op_id = Some(self.graph[ix].op.op_id);
                self.bus.emit(SignalKind::Stepped { op_id });
                self.sched.ready.push_back(ix);
            }
            Place::Park(reason) => self.park(ix, reason),
        }
    }

    pub(super) fn park(&mut self, ix: NodeIndex, reason: PauseReason) {
        self.graph[ix].parked = true;
        self.sched.parked.push_back(ix);
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Paused { node, reason });
    }

    pub(super) fn unpark(&mut self, ix: NodeIndex) {
        self.graph[ix].parked = false;
        self.sched.unpark(ix);
        let node = self.header(ix);
        self.emit_node(ix, SignalKind::Unpaused { node });
        self.sched.ready.push_back(ix);
    }

    /// Settles released nodes, then starts ready operations while slots are
    /// free. Operations that waited for capacity go first when it changed.
    pub(super) fn advance(&mut self) {
        loop {
            self.drain_worklist();
            if self.cancelled
                || self.storage.is_some()
                || self.sched.running >= self.cfg.max_concurrent
            {
                break;
            }
            if let Some((q, ix)) = self.gate.retry_candidate() {
                // A cap or a provider hold reached while it waited for
                // capacity holds it as it would any ready operation: it
                // leaves the capacity queue (a raise or a release puts it
                // back ahead of the rest) and takes no lease.
                if self.held_by_cap(ix) || self.held_by_provider(ix) {
                    self.gate.granted(q);
                    continue;
                }
                match self.ask_lease(ix, true) {
                    Ask::Go(lease) => {
                        self.gate.granted(q);
                        self.start(ix, lease);
                    }
                    Ask::Wait { reason, .. } => {
                        if let Some(reason) = self.gate.still_waiting(q, reason) {
                            self.signal_capacity_wait(ix, reason);
                        }
                    }
                    Ask::Unavailable(reason) => {
                        self.gate.granted(q);
                        self.capacity_unavailable(ix, &reason);
                    }
                }
                continue;
            }
            let Some(ix) = self.sched.ready.pop_front() else {
                break;
            };
            if self.held_by_cap(ix) || self.held_by_provider(ix) {
                continue;
            }
            match self.ask_lease(ix, false) {
                Ask::Go(lease) => self.start(ix, lease),
                Ask::Wait { queue, reason } => {
                    if let Some(reason) = self.gate.wait(ix, queue, reason) {
                        self.signal_capacity_wait(ix, reason);
                    }
                }
                Ask::Unavailable(reason) => self.capacity_unavailable(ix, &reason),
            }
        }
    }

    /// Capacity can never serve `ix`: it fails now instead of waiting
    /// forever (what depends on it settles as after any failure).
    fn capacity_unavailable(&mut self, ix: NodeIndex, reason: &str) {
        self.fail(ix, AgentFailure::new(CAPACITY_UNAVAILABLE, reason));
    }

    fn ask_lease(&self, ix: NodeIndex, queued: bool) -> Ask {
        let n = &self.graph[ix];
        self.gate.ask(&LeaseRequest {
            op_id: n.op.op_id,
            name: &n.op.reference_id,
            role: n.op.assignee.as_deref(),
            profile: n.op.metadata.profile.as_deref(),
            queued,
        })
    }

    fn signal_capacity_wait(&mut self, ix: NodeIndex, reason: Arc<str>) {
        let node = self.header(ix);
        self.bus.emit(SignalKind::CapacityWait { node, reason });
    }

    // ----- settling -------------------------------------------------------

    pub(super) fn succeed(&mut self, ix: NodeIndex, value: Value) {
        let result = if value.is_null() {
            self.null_result.clone()
        } else {
            Arc::new(value)
        };
        let attempt = self.graph[ix].attempt;
        let mut escalations = self.adm.take_escalations(ix, attempt);
        let found = if self.cfg.reactive {
            request::extract(&result)
        } else {
            request::Extracted::default()
        };
        // A result with more requests than an attempt may make fails the
        // attempt, as a stream over the cap does.
        let n = found.spawns.len() + found.escalations.len();
        if n > 0 && self.adm.read(ix, attempt, n) > self.cfg.max_requests {
            let message = format!(
                "the agent made more than {} requests in one attempt (max_requests); its result was not used",
                self.cfg.max_requests
            );
            self.fail(ix, AgentFailure::new("request_flood", message));
            return;
        }
        if let Value::Object(m) = &*result
            && let Some(Value::Object(ctx)) = m.get("context")
        {
            super::deep_merge(&mut self.flow_context, ctx);
        }
        for esc in &found.escalations {
            if self
                .adm
                .first_sighting(ix, attempt, request::identity(esc) ^ u64::from(b'e'))
            {
                escalations.push(Arc::from(request::escalation_reason(esc)));
            }
        }
        let now = self.now_ms();
        {
            let n = &mut self.graph[ix];
            n.result = Some(result.clone());
            n.finished_at = now;
            n.status = if escalations.is_empty() {
                NodeStatus::Succeeded
            } else {
                NodeStatus::Escalated
            };
        }
        self.sched.terminal += 1;
        let node = self.header(ix);
        let kind = if escalations.is_empty() {
            SignalKind::Completed {
                node,
                result: result.clone(),
            }
        } else {
            let reason: Vec<&str> = escalations.iter().map(|s| &**s).collect();
            SignalKind::Escalated {
                node,
                reason: Arc::from(reason.join("; ")),
                result: result.clone(),
            }
        };
        let escalated = !escalations.is_empty();
        self.emit_node(ix, kind);
        if escalated {
            let name = self.graph[ix].op.reference_id.clone();
            self.break_on(Breakpoint::Escalation, || {
                format!("{name} escalated (breakpoint escalation)")
            });
        }
        if !found.spawns.is_empty() {
            self.route_spawns(ix, &found.spawns, true);
        }
        self.settle(ix);
    }

    pub(super) fn fail(&mut self, ix: NodeIndex, f: AgentFailure) {
        self.mark_failed(ix, f);
        self.settle(ix);
    }

    pub(super) fn mark_failed(&mut self, ix: NodeIndex, f: AgentFailure) {
        let now = self.now_ms();
        let error: Arc<str> = Arc::from(f.message);
        {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Failed;
            n.finished_at = now;
            n.result = Some(Arc::new(json!({ "error": &*error })));
            n.resolvable = *f.category == *super::super::retry::cause::MERGE_CONFLICT;
        }
        self.sched.terminal += 1;
        let node = self.header(ix);
        let category = f.category;
        self.emit_node(
            ix,
            SignalKind::Failed {
                node,
                error,
                category,
            },
        );
        let name = self.graph[ix].op.reference_id.clone();
        self.break_on(Breakpoint::Failure, || {
            format!("{name} failed (breakpoint failure)")
        });
    }

    pub(super) fn skip(&mut self, ix: NodeIndex, reason: SkipReason, propagate: bool) {
        self.skip_because(ix, reason, None, propagate);
    }

    /// Why no incoming path of `ix` is valid, in words: each dependency
    /// and what it did against what its edge asked (the first few).
    fn why_no_path(&self, ix: NodeIndex) -> Arc<str> {
        use petgraph::visit::EdgeRef;
        const SHOWN: usize = 3;
        let mut parts = Vec::new();
        let mut total = 0;
        for e in self.graph.edges_directed(ix, Direction::Incoming) {
            total += 1;
            if parts.len() == SHOWN {
                continue;
            }
            let head = &self.graph[e.source()];
            let name = &head.op.reference_id;
            let did = match head.status {
                NodeStatus::Skipped => "was skipped",
                NodeStatus::Failed => "failed",
                _ => "succeeded",
            };
            parts.push(match &e.weight().condition {
                Condition::Failed if head.status != NodeStatus::Skipped => {
                    format!("{name} {did} (its edge waits for a failure)")
                }
                Condition::Pointer(p) if head.status != NodeStatus::Skipped => format!(
                    "{name} {did} without {} at {} in its result",
                    p.equals, p.pointer
                ),
                _ => format!("{name} {did}"),
            });
        }
        // Incoming edges are listed newest first; the play's order reads better.
        parts.reverse();
        let mut s = parts.join("; ");
        if total > SHOWN {
            s.push_str(&format!(" (+{} more)", total - SHOWN));
        }
        Arc::from(s)
    }

    pub(super) fn skip_because(
        &mut self,
        ix: NodeIndex,
        reason: SkipReason,
        because: Option<Arc<str>>,
        propagate: bool,
    ) {
        let now = self.now_ms();
        {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Skipped;
            n.finished_at = now;
            n.parked = false;
        }
        self.sched.terminal += 1;
        let node = self.header(ix);
        self.emit_node(
            ix,
            SignalKind::Skipped {
                node,
                reason,
                because,
            },
        );
        if propagate {
            self.settle(ix);
        }
    }

    /// Evaluates the settled node's outgoing edges and releases successors
    /// whose last dependency this was.
    pub(super) fn settle(&mut self, ix: NodeIndex) {
        let status = self.graph[ix].status;
        let result = self.graph[ix].result.clone();
        let mut walk = self
            .graph
            .neighbors_directed(ix, Direction::Outgoing)
            .detach();
        let mut released = std::mem::take(&mut self.scratch);
        while let Some((e, t)) = walk.next(&self.graph) {
            let valid = edge_valid(&self.graph[e].condition, status, result.as_deref());
            let n = &mut self.graph[t];
            n.waiting = n.waiting.saturating_sub(1);
            n.any_valid |= valid;
            if n.waiting == 0 && n.status == NodeStatus::Pending {
                released.push(t);
            }
        }
        // petgraph walks newest edges first; release in authored order.
        self.sched.worklist.extend(released.drain(..).rev());
        self.scratch = released;
    }

    pub(super) fn deny_node(&mut self, ix: NodeIndex, by: Arc<str>, reason: Arc<str>) {
        self.graph[ix].approval = Approval::Denied;
        let node = self.header(ix);
        let message = format!("denied by {by}: {reason}");
        let on = self.gate_words(ix);
        self.emit_node(
            ix,
            SignalKind::Denied {
                node,
                by,
                reason,
                on,
            },
        );
        self.fail(ix, AgentFailure::new("denied", message));
    }

    /// The run drained (nothing runs, waits for a slot or is being routed):
    /// a round ends and round-scoped capacity may go.
    pub(super) fn check_round(&mut self) {
        if self.round_active
            && self.sched.running == 0
            && self.sched.ready.is_empty()
            && self.routing.is_empty()
            && !self.gate.pending()
            && !self.retry_waiting()
            && self.spend_wait.is_empty()
            && self.provider_wait.is_empty()
        {
            self.bus.emit(SignalKind::RoundEnded { round: self.round });
            self.gate.round_ended(self.round);
            self.round += 1;
            self.round_active = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ready_node_starts_unless_held_or_paused_and_steps_spend_credits() {
        let mut s = Schedule::default();
        assert_eq!(s.place(false), Place::Ready);
        assert_eq!(s.place(true), Place::Park(PauseReason::Held));
        assert!(s.pause());
        assert!(!s.pause(), "pausing twice changes nothing");
        assert_eq!(s.place(false), Place::Park(PauseReason::RunPaused));
        s.step_credits = 2;
        assert_eq!(
            s.place(true),
            Place::Park(PauseReason::Held),
            "a hold wins over a step"
        );
        assert_eq!(s.place(false), Place::Stepped);
        assert_eq!(s.place(false), Place::Stepped);
        assert_eq!(s.place(false), Place::Park(PauseReason::RunPaused));
        s.step_credits = 1;
        assert!(s.resume());
        assert_eq!(s.step_credits, 0, "credits do not outlive the pause");
        assert!(!s.resume());
    }

    #[test]
    fn unparking_keeps_the_others_in_order() {
        let mut s = Schedule::default();
        for i in 0..4 {
            s.parked.push_back(NodeIndex::new(i));
        }
        s.unpark(NodeIndex::new(1));
        assert_eq!(
            s.parked.iter().map(|i| i.index()).collect::<Vec<_>>(),
            [0, 2, 3]
        );
    }
}
