//! Operator commands, carried out by the run's one owner: pause, resume,
//! step, approve, deny, hold, unhold, retry, cancel, and the approval
//! policy. Each answers with what it did or why it refused.

use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::NodeIndex;

use super::super::agent::{AgentFailure, QuestionKind};
use super::super::command::{Answer, CommandError, OPERATOR, Request};
use super::super::control::{ApprovalPolicy, NewOperation};
use super::super::graph::{Condition, Edge, OpMetadata, Operation, OperationKind, new_op_id};
use super::super::signal::{PauseReason, SignalKind, SkipReason};
use super::super::snapshot::NodeStatus;
use super::Executor;
use super::node::{Approval, Ms};
use crate::vocab::{is_spawn_name, is_valid_name};

impl Executor {
    /// Carries out one operator command for `by`; what was carried out is
    /// recorded with who asked (`operator_action`), so the log, the report
    /// and every console say who, not just "operator".
    pub(super) fn apply_by(&mut self, req: Request, by: Arc<str>) -> Result<Answer, CommandError> {
        let action = Arc::from(req.summary());
        let op_id = req
            .target()
            .and_then(|op| self.resolve(op).ok())
            .map(|ix| self.graph[ix].op.op_id);
        self.acting = by.clone();
        let answer = self.apply(req);
        self.acting = Arc::from(OPERATOR);
        if let Ok(a) = &answer {
            let op_id = match a {
                Answer::Added { op_id, .. } => Some(*op_id),
                _ => op_id,
            };
            self.bus
                .emit(SignalKind::OperatorAction { by, action, op_id });
        }
        answer
    }

    /// Carries out one operator command. Capacity and status requests are
    /// answered outside the kernel; here they are refused.
    pub(super) fn apply(&mut self, req: Request) -> Result<Answer, CommandError> {
        let done = |r: Result<(), CommandError>| r.map(|()| Answer::Done);
        match req {
            Request::Pause => done(self.pause()),
            Request::Resume => done(self.resume()),
            Request::Step { op } => self.step(op.as_deref()),
            Request::Approve { op, on } => self.decide(&op, on, |ex, ix| ex.approve(ix)),
            Request::Deny { op, on, reason } => {
                let reason = Request::deny_reason(&reason);
                // A reason reaches the agent when its work is sent back or
                // retried: what no agent's input can carry is refused here,
                // not by the operation failing later.
                if reason.contains('\0') {
                    return Err(CommandError::BadRequest(
                        "deny: the reason holds a NUL character, which no agent's input can carry"
                            .into(),
                    ));
                }
                self.decide(&op, on, |ex, ix| ex.deny(ix, &reason))
            }
            Request::Hold { op } => done(self.hold(&op)),
            Request::Unhold { op } => done(self.unhold(&op)),
            Request::Retry { op, on } => self.decide(&op, on, |ex, ix| ex.retry(ix)),
            Request::Say { op, on, text } => {
                let text = text.join(" ");
                self.decide(&op, on, |ex, ix| ex.say(ix, &text))
            }
            Request::Permit { op, on } => self.decide(&op, on, |ex, ix| {
                if ex.answer_question(ix, true, None) {
                    Ok(())
                } else {
                    Err(CommandError::NoQuestion {
                        name: ex.name_of(ix),
                    })
                }
            }),
            Request::Resolve { op, on } => self.decide(&op, on, |ex, ix| {
                // Its attempt failed on the conflict (nobody was there):
                // resolved by hand since, its work lands without its agent.
                if ex.graph[ix].status == NodeStatus::Failed && ex.graph[ix].resolvable {
                    if ex.cancelled {
                        return Err(CommandError::RunFinished);
                    }
                    ex.retried_by = Some(super::RetriedBy {
                        by: ex.acting.clone(),
                        note: None,
                        on: Some(Arc::from("its merge conflict, resolved by hand")),
                    });
                    ex.reopen_failed(ix);
                    ex.graph[ix].land_only = true;
                    return Ok(());
                }
                let conflict = ex
                    .questions
                    .get(&ix)
                    .is_some_and(|a| a.q.kind == QuestionKind::Conflict);
                if conflict && ex.answer_question(ix, true, None) {
                    Ok(())
                } else {
                    Err(CommandError::NoConflict {
                        name: ex.name_of(ix),
                    })
                }
            }),
            Request::Break { at, clear } => done(self.set_break(&at, clear)),
            Request::RunTo { op } => done(self.run_to(&op)),
            Request::Cancel => {
                self.cancel();
                Ok(Answer::Done)
            }
            Request::Add {
                after,
                role,
                instruction,
                name,
            } => self.add(&after, role, instruction, name),
            Request::Release(_) | Request::Ensure { .. } | Request::Capacity => {
                Err(CommandError::NoCapacity)
            }
            Request::Budget { raise } => match self.raise_caps(&raise) {
                Ok(caps) => Ok(Answer::Raised { caps }),
                Err(why) => Err(CommandError::BadRequest(why)),
            },
            Request::Status => Err(CommandError::BadRequest(
                "status is answered by the run's control surface, not the kernel".into(),
            )),
        }
    }

    /// An authored id, a `spawn-N` name or an op_id.
    pub(super) fn resolve(&self, name: &str) -> Result<NodeIndex, CommandError> {
        let names = self.names.get_or_init(|| {
            let mut names = rustc_hash::FxHashMap::with_capacity_and_hasher(
                self.index.len(),
                Default::default(),
            );
            // The first of a name, as when they were added.
            for ix in self.graph.node_indices() {
                names
                    .entry(self.graph[ix].op.reference_id.clone())
                    .or_insert(ix);
            }
            names
        });
        if let Some(&ix) = names.get(name) {
            return Ok(ix);
        }
        if let Ok(id) = name.parse()
            && let Some(&ix) = self.index.get(&id)
        {
            return Ok(ix);
        }
        Err(CommandError::UnknownOperation(name.to_string()))
    }

    fn name_of(&self, ix: NodeIndex) -> String {
        self.graph[ix].op.reference_id.to_string()
    }

    /// Trusted injection from the operator (ADR-0033 D3/D5): a new
    /// operation of a role the run has, or more dependencies for one that
    /// has not started. Admission still applies (cap, cycle, ledger).
    fn add(
        &mut self,
        after: &[String],
        role: Option<String>,
        instruction: Option<String>,
        name: Option<String>,
    ) -> Result<Answer, CommandError> {
        if !self.cfg.reactive {
            let message = Arc::from("add refused: the run is not reactive (reactive = false)");
            self.bus.emit(SignalKind::Warning {
                message,
                op_id: None,
            });
            return Err(CommandError::NotReactive);
        }
        if self.cancelled {
            return Err(CommandError::RunFinished);
        }
        let deps = after
            .iter()
            .map(|a| self.resolve(a))
            .collect::<Result<Vec<NodeIndex>, _>>()?;
        let bad = |m: String| Err(CommandError::BadRequest(m));
        if let Some(existing) = name.as_deref().and_then(|n| self.resolve(n).ok()) {
            if role.is_some() || instruction.is_some() {
                return bad(format!(
                    "{} exists: --role and --instruction describe a new operation; to add dependencies to it give only --after",
                    self.name_of(existing)
                ));
            }
            if deps.is_empty() {
                return bad(format!(
                    "{} exists: give --after OP to add dependencies to it",
                    self.name_of(existing)
                ));
            }
            let edges = deps
                .into_iter()
                .map(|d| (d, Edge::dependency(Condition::Succeeded)))
                .collect();
            return match self.add_edges_into(existing, None, None, edges, true) {
                Some(ix) => Ok(Answer::Added {
                    op_id: self.graph[ix].op.op_id,
                    name: self.name_of(ix),
                }),
                None => Err(self.last_drop()),
            };
        }
        let Some(role) = role.filter(|r| !r.trim().is_empty()) else {
            return bad("a new operation needs --role ROLE".into());
        };
        let Some(instruction) = instruction.filter(|i| !i.trim().is_empty()) else {
            return bad("a new operation needs --instruction TEXT".into());
        };
        if let Some(n) = &name
            && (!is_valid_name(n) || is_spawn_name(n))
        {
            return bad(format!(
                "--name {n:?} is not a name for a new operation; allowed: letters, digits, '.', '_' and '-', starting with a letter or digit, and not spawn-N"
            ));
        }
        let route = match self.builder.route_role(role.trim()) {
            Ok(route) => route,
            Err(rej) => {
                self.drop_spawn(
                    None,
                    Some(Arc::from(role.trim())),
                    rej.reason,
                    rej.detail,
                    None,
                    super::admission::Asked::operator(&instruction),
                );
                return Err(self.last_drop());
            }
        };
        let op = Operation {
            op_id: new_op_id(),
            reference_id: name.map(Arc::from).unwrap_or_else(|| Arc::from("")),
            instruction: Arc::from(instruction.trim()),
            assignee: Some(route.role.clone()),
            operation: OperationKind::Operate,
            metadata: OpMetadata {
                requester_role: Some(route.role.clone()),
                spawned_from: None,
                approval: false,
                agent: route.agent.clone(),
                params: route.params.clone(),
                spawn_reason: Some(Arc::from("added by the operator")),
                profile: None,
            },
        };
        let depends_on = deps
            .iter()
            .map(|&d| (self.graph[d].op.op_id, Condition::Succeeded))
            .collect();
        let new = NewOperation {
            op,
            depends_on,
            parent: None,
            independent: true,
        };
        match self.inject(new, true) {
            Some(ix) => Ok(Answer::Added {
                op_id: self.graph[ix].op.op_id,
                name: self.name_of(ix),
            }),
            None => Err(self.last_drop()),
        }
    }

    fn pause(&mut self) -> Result<(), CommandError> {
        self.pause_for(None);
        Ok(())
    }

    fn resume(&mut self) -> Result<(), CommandError> {
        self.resume_run();
        Ok(())
    }

    pub(super) fn resume_run(&mut self) {
        // Resuming also says the provider's trouble is dealt with (a key
        // fixed): its held work goes on, paused run or not.
        self.release_providers(true);
        if !self.sched.resume() {
            return;
        }
        self.bus.emit(SignalKind::RunResumed);
        let parked: Vec<NodeIndex> = self
            .sched
            .parked
            .iter()
            .copied()
            .filter(|&ix| !self.graph[ix].held)
            .collect();
        for ix in parked {
            self.unpark(ix);
        }
    }

    /// While paused, lets `op` (or the first waiting operation) start; with
    /// none waiting, the next one to become ready starts.
    fn step(&mut self, op: Option<&str>) -> Result<Answer, CommandError> {
        if !self.sched.paused {
            return Err(CommandError::NotPaused);
        }
        let chosen = match op {
            Some(name) => {
                let ix = self.resolve(name)?;
                let n = &self.graph[ix];
                let state = match n.status {
                    _ if n.held => Some("held by the operator; unhold it first"),
                    NodeStatus::Ready if n.parked => None,
                    NodeStatus::Ready => Some("about to start already"),
                    NodeStatus::Running => Some("running"),
                    NodeStatus::AwaitingApproval => Some("awaiting approval"),
                    NodeStatus::Pending => Some("waiting for its dependencies"),
                    _ => Some("settled"),
                };
                if let Some(state) = state {
                    return Err(CommandError::NotWaiting {
                        name: self.name_of(ix),
                        state,
                    });
                }
                Some(ix)
            }
            None => self
                .sched
                .parked
                .iter()
                .copied()
                .find(|&ix| !self.graph[ix].held),
        };
        match chosen {
            Some(ix) => {
                let op_id = Some(self.graph[ix].op.op_id);
                self.bus.emit(SignalKind::Stepped { op_id });
                self.unpark(ix);
                Ok(Answer::Stepped {
                    op: Some(self.name_of(ix)),
                })
            }
            None => {
                self.sched.step_credits += 1;
                self.bus.emit(SignalKind::Stepped { op_id: None });
                Ok(Answer::Stepped { op: None })
            }
        }
    }

    fn check_gate(&self, ix: NodeIndex) -> Result<(), CommandError> {
        let n = &self.graph[ix];
        let name = self.name_of(ix);
        if !n.op.metadata.approval {
            return Err(CommandError::NoApprovalGate { name });
        }
        let decision = match n.approval {
            Approval::Approved => "approved",
            Approval::Denied => "denied",
            _ if n.status.is_terminal() => "settled",
            _ => return Ok(()),
        };
        Err(CommandError::AlreadyDecided { name, decision })
    }

    fn approve(&mut self, ix: NodeIndex) -> Result<(), CommandError> {
        // A running agent's question is what waits for approval.
        if self.answer_question(ix, true, None) {
            return Ok(());
        }
        self.check_gate(ix)?;
        self.graph[ix].approval = Approval::Approved;
        let node = self.header(ix);
        let by = self.acting.clone();
        let on = self.gate_words(ix);
        self.emit_node(ix, SignalKind::Approved { node, by, on });
        if self.graph[ix].status == NodeStatus::AwaitingApproval {
            self.graph[ix].status = NodeStatus::Pending;
            self.enqueue(ix);
        }
        Ok(())
    }

    fn deny(&mut self, ix: NodeIndex, reason: &str) -> Result<(), CommandError> {
        if self.answer_question(ix, false, Some(reason)) {
            return Ok(());
        }
        self.check_gate(ix)?;
        self.deny_node(ix, self.acting.clone(), Arc::from(reason));
        Ok(())
    }

    /// A new attempt of a failed or denied operation; what was skipped only
    /// because of it waits again (and is decided again when it settles).
    fn retry(&mut self, ix: NodeIndex) -> Result<(), CommandError> {
        let n = &self.graph[ix];
        if n.status == NodeStatus::Escalated {
            return self.retry_escalated(ix);
        }
        if n.status != NodeStatus::Failed {
            let state = match n.status {
                NodeStatus::Succeeded | NodeStatus::Escalated => "completed",
                NodeStatus::Skipped => "skipped",
                NodeStatus::Running => "running",
                _ => "not started",
            };
            return Err(CommandError::CannotRetry {
                name: self.name_of(ix),
                state,
            });
        }
        if self.cancelled {
            return Err(CommandError::RunFinished);
        }
        self.retried_by = Some(super::RetriedBy {
            by: self.acting.clone(),
            note: None,
            on: self.retried_on(ix),
        });
        self.reopen_failed(ix);
        Ok(())
    }

    /// An escalated operation asks a human; the operator may answer by
    /// running it again (issue 42). Its result counted as done, so what
    /// depends on it may have begun: then it is refused, naming them (a
    /// new attempt would change what they already built on). Dependants
    /// that have not begun wait again for the new attempt.
    fn retry_escalated(&mut self, ix: NodeIndex) -> Result<(), CommandError> {
        if self.cancelled {
            return Err(CommandError::RunFinished);
        }
        let dependants: Vec<NodeIndex> = self
            .graph
            .neighbors_directed(ix, Direction::Outgoing)
            .collect();
        let begun: Vec<String> = dependants
            .iter()
            // Begun: running, finished, or started at least once (one
            // waiting to be retried has a result of its own behind it).
            .filter(|&&t| {
                let n = &self.graph[t];
                n.status == NodeStatus::Running
                    || (n.status.is_terminal() && n.status != NodeStatus::Skipped)
                    || n.attempt > 0
            })
            .map(|&t| self.name_of(t))
            .collect();
        if !begun.is_empty() {
            return Err(CommandError::BuiltOn {
                name: self.name_of(ix),
                begun: begun.join(", "),
            });
        }
        // About to start, or asking for approval: they wait again, and
        // say so (a gate leaves the approval lane until it is asked again).
        let because = self.graph[ix].op.reference_id.clone();
        for t in dependants {
            if matches!(
                self.graph[t].status,
                NodeStatus::Ready | NodeStatus::AwaitingApproval
            ) {
                self.sched.ready.retain(|&r| r != t);
                self.sched.unpark(t);
                self.gate.leave(t);
                let n = &mut self.graph[t];
                n.parked = false;
                n.status = NodeStatus::Pending;
                self.emit_retried(t, Some(because.clone()));
            }
        }
        self.retried_by = Some(super::RetriedBy {
            by: self.acting.clone(),
            note: None,
            on: self.retried_on(ix),
        });
        self.reopen_failed(ix);
        Ok(())
    }

    /// A failed operation waits again for a new attempt, and what it
    /// caused to be skipped waits again too.
    pub(super) fn reopen_failed(&mut self, ix: NodeIndex) {
        let because = self.graph[ix].op.reference_id.clone();
        // Every status first, then the counts: a node reached by two paths
        // must see all of its reopened predecessors as unsettled.
        let mut reopened = vec![ix];
        self.reopen(ix, None);
        let mut stack = vec![ix];
        while let Some(from) = stack.pop() {
            let succ: Vec<NodeIndex> = self
                .graph
                .neighbors_directed(from, Direction::Outgoing)
                .collect();
            for t in succ {
                if self.graph[t].status == NodeStatus::Skipped {
                    self.reopen(t, Some(because.clone()));
                    reopened.push(t);
                    stack.push(t);
                }
            }
        }
        // Waiting dependents of what reopened count it again.
        let mut relink: Vec<NodeIndex> = reopened.clone();
        for &r in &reopened {
            for t in self.graph.neighbors_directed(r, Direction::Outgoing) {
                if self.graph[t].status == NodeStatus::Pending && !relink.contains(&t) {
                    relink.push(t);
                }
            }
        }
        for t in relink {
            self.relink(t);
        }
        self.round_active = true;
    }

    /// Says that `ix` waits again: for a new attempt (`because` is none:
    /// it is the one retried), or re-opened because of another.
    pub(super) fn emit_retried(&mut self, ix: NodeIndex, because: Option<Arc<str>>) {
        let node = self.header(ix);
        let attempt = self.graph[ix].attempt + u32::from(because.is_none());
        let who = if because.is_none() {
            self.retried_by.take()
        } else {
            None
        };
        let (by, note, on) = match who {
            Some(w) => (Some(w.by), w.note, w.on),
            None => (None, None, None),
        };
        self.emit_node(
            ix,
            SignalKind::Retried {
                node,
                attempt,
                because,
                by,
                note,
                on,
            },
        );
    }

    /// Puts a settled node back to waiting (its counts are redone after).
    pub(in crate::kernel::executor) fn reopen(&mut self, ix: NodeIndex, because: Option<Arc<str>>) {
        {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Pending;
            n.result = None;
            n.finished_at = Ms::NONE;
            n.parked = false;
            n.resolvable = false;
            if because.is_none() {
                // The operator's retry begins a new series of attempts,
                // in a new conversation ("send back" continues the old) —
                // but for work they rejected at review with a reason: the
                // retry continues, told why it was rejected.
                n.series_from = n.attempt;
                n.conversation = n.conversation.take().and_then(|mut c| {
                    let (by, why) = c.rejected.take()?;
                    c.ended = Some(Arc::from(format!(
                        "the operator ({by}) rejected your work at review, and it did not land; they retried the operation"
                    )));
                    c.note = Some((by, why));
                    c.pending = false;
                    Some(c)
                });
            }
            if because.is_none() && n.approval == Approval::Denied {
                // A denied gate asks again.
                n.approval = Approval::Undecided;
            }
        }
        // Dedup outlives the attempt: what it spawned before is not spawned
        // again.
        self.sched.terminal -= 1;
        self.emit_retried(ix, because);
    }

    fn hold(&mut self, op: &str) -> Result<(), CommandError> {
        let ix = self.resolve(op)?;
        let n = &self.graph[ix];
        let state = match n.status {
            NodeStatus::Running => Some("running"),
            s if s.is_terminal() => Some("settled"),
            _ => None,
        };
        if let Some(state) = state {
            return Err(CommandError::CannotHold {
                name: self.name_of(ix),
                state,
            });
        }
        if n.held {
            return Ok(());
        }
        self.graph[ix].held = true;
        let node = self.header(ix);
        self.bus.emit(SignalKind::Held { node });
        if self.graph[ix].status == NodeStatus::Ready && !self.graph[ix].parked {
            self.sched.ready.retain(|&r| r != ix);
            self.gate.leave(ix);
            self.park(ix, PauseReason::Held);
        }
        Ok(())
    }

    fn unhold(&mut self, op: &str) -> Result<(), CommandError> {
        let ix = self.resolve(op)?;
        if !self.graph[ix].held {
            return Err(CommandError::NotHeld {
                name: self.name_of(ix),
            });
        }
        self.graph[ix].held = false;
        let node = self.header(ix);
        self.bus.emit(SignalKind::Unheld { node });
        if self.graph[ix].parked && !self.sched.paused {
            self.unpark(ix);
        }
        Ok(())
    }

    pub(super) fn set_approval_policy(&mut self, policy: ApprovalPolicy) {
        self.cfg.approvals = policy.clone();
        if let ApprovalPolicy::DenyAll { reason } = policy {
            let waiting: Vec<NodeIndex> = self
                .graph
                .node_indices()
                .filter(|&ix| self.graph[ix].status == NodeStatus::AwaitingApproval)
                .collect();
            for ix in waiting {
                self.deny_node(ix, Arc::from("policy"), reason.clone());
            }
            // Reviews and conflicts wait for nobody now either.
            let asking: Vec<NodeIndex> = self
                .questions
                .iter()
                .filter(|(_, a)| !a.q.kind.is_permission())
                .map(|(ix, _)| *ix)
                .collect();
            let operator = std::mem::replace(&mut self.acting, Arc::from("policy"));
            for ix in asking {
                self.answer_question(ix, false, Some(&reason));
            }
            self.acting = operator;
            self.end_refused_holds();
        }
    }

    /// Stops the run: running work is cancelled and reported failed, work
    /// that never started is skipped.
    pub(super) fn cancel(&mut self) {
        if self.cancelled {
            return;
        }
        self.cancelled = true;
        // Dropping the futures cancels the agents (and kills their processes).
        self.inflight = Default::default();
        self.drop_routing();
        self.sched.clear();
        self.gate.drain();
        let all: Vec<NodeIndex> = self.graph.node_indices().collect();
        for &ix in &all {
            if self.graph[ix].status == NodeStatus::Running {
                self.sched.running -= 1;
                self.gate.release(ix);
                self.mark_failed(ix, AgentFailure::new("cancelled", "cancelled"));
            }
        }
        for ix in all {
            if !self.graph[ix].status.is_terminal() {
                self.skip(ix, SkipReason::Cancelled, false);
            }
        }
    }
}

mod basis;
mod say;
#[cfg(test)]
mod tests;
