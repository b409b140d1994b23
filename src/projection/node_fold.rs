//! Folding what a signal about one operation says besides its lane: its
//! attempts, result, decision, hold, usage and what its settling means
//! for the run.

use super::*;
use crate::kernel::agent::QuestionKind;

impl RunProjection {
    /// What a node signal says besides its lane.
    pub(super) fn node_signal(&mut self, ix: u32, s: &Signal) {
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
            SignalKind::Retried { .. } => {
                self.skip_causes.remove(&ix);
            }
            // What the operator is asked, and by which signal: a decision's
            // basis names it.
            SignalKind::AwaitingApproval { .. } => {
                self.asked.insert(
                    ix,
                    Asked {
                        seq,
                        on: None,
                        detail: None,
                    },
                );
            }
            SignalKind::PermissionAsked { on, detail, .. } => {
                self.asked.insert(
                    ix,
                    Asked {
                        seq,
                        on: on.clone(),
                        detail: detail.clone(),
                    },
                );
            }
            SignalKind::DependenciesAdded {
                node,
                emitter_id,
                operator,
                ..
            } => {
                // Admission counts it as an accepted injection (not the
                // operator's own add: max_spawn does not count that).
                if *operator {
                    self.operator_added += 1;
                } else {
                    self.spawn_accepted += 1;
                }
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
                    session: None,
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
            SignalKind::Approved { by, on, .. } => {
                n.decisions.push(Decision {
                    approved: true,
                    by: by.clone(),
                    at,
                    reason: None,
                    kind: DecisionKind::Gate,
                    on: on.clone(),
                });
                if n.status == NodeStatus::AwaitingApproval {
                    n.status = NodeStatus::Ready;
                }
            }
            SignalKind::Denied { by, reason, on, .. } => n.decisions.push(Decision {
                approved: false,
                by: by.clone(),
                at,
                reason: Some(reason.clone()),
                kind: DecisionKind::Gate,
                on: on.clone(),
            }),
            SignalKind::Retried {
                by,
                note,
                on,
                because: None,
                ..
            } if by.is_some() => {
                n.decisions.push(Decision {
                    approved: true,
                    by: by.clone().unwrap_or_default(),
                    at,
                    reason: note.clone(),
                    kind: if note.is_some() {
                        DecisionKind::SentBack
                    } else {
                        DecisionKind::Retry
                    },
                    on: on.clone(),
                });
                n.reopen(at);
            }
            SignalKind::Retried { .. } => n.reopen(at),
            SignalKind::DependenciesAdded { node, edges, .. } => {
                n.deps.extend(edges.iter().cloned());
                n.depends_on = node.depends_on.clone();
                if matches!(n.status, NodeStatus::Ready | NodeStatus::AwaitingApproval) {
                    n.status = NodeStatus::Pending;
                }
            }
            SignalKind::PermissionAsked { tool, kind, .. } => {
                n.asking = Some(tool.clone());
                n.asked = *kind;
            }
            SignalKind::PermissionAnswered {
                by,
                allowed,
                reason,
                kind,
                on,
                tool,
                ..
            } => {
                n.asking = None;
                n.decisions.push(Decision {
                    approved: *allowed,
                    by: by.clone(),
                    at,
                    reason: reason.clone(),
                    kind: match kind {
                        QuestionKind::Permission => DecisionKind::Call,
                        QuestionKind::Review => DecisionKind::Review,
                        QuestionKind::Conflict => DecisionKind::Conflict,
                    },
                    // The call by name; a review or conflict by its commits.
                    on: match kind {
                        QuestionKind::Permission => Some(tool.clone()),
                        _ => on.clone().or_else(|| Some(tool.clone())),
                    },
                });
            }
            SignalKind::Landed { work, .. } => n.landed.push(work.clone()),
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

    pub(super) fn merge_context(&mut self, result: &Value) {
        if let Some(Value::Object(ctx)) = result.get("context") {
            deep_merge(&mut self.context, ctx);
        }
    }

    pub(super) fn settle(
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
}
