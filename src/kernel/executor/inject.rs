//! Trusted injection (ADR-0033 D5): operations an operator or a host adds
//! take admission's path without the node builder. An injected operation
//! that is already in the graph gains edges instead, the one case in which
//! admission checks for a cycle.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::control::NewOperation;
use super::super::graph::Edge;
use super::super::ledger::{DropReason, LedgerOutcome};
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::Executor;

impl Executor {
    /// Trusted injection: no builder, same admission. Returns the node
    /// that joined (`None` when it was dropped, with a ledger row).
    /// `operator`: the operator's own `add`, which `max_spawn` (the cap on
    /// what agents spawn) neither refuses nor counts.
    pub(super) fn inject(&mut self, new: NewOperation, operator: bool) -> Option<NodeIndex> {
        let NewOperation {
            mut op,
            depends_on,
            parent,
            independent,
        } = new;
        let emitter = parent.and_then(|p| self.index.get(&p).copied());
        let assignee = op.assignee.clone();
        if parent.is_some() && emitter.is_none() {
            let detail = "the parent is not in this run".into();
            self.drop_spawn(None, assignee, DropReason::BuilderError, detail, None, None);
            return None;
        }
        let mut deps = Vec::new();
        for (dep, cond) in depends_on {
            match self.index.get(&dep) {
                Some(&d) => deps.push((d, Edge::dependency(cond))),
                None => {
                    let detail = format!("dependency {dep} is not in this run");
                    self.drop_spawn(
                        emitter,
                        assignee,
                        DropReason::BuilderError,
                        detail,
                        None,
                        None,
                    );
                    return None;
                }
            }
        }
        if let Some(e) = emitter
            && !independent
        {
            deps.push((e, Edge::spawn()));
        }
        if !operator && self.adm.accepted >= self.cfg.max_spawn {
            // An operator's add without --name has no name yet (spawn-N
            // is given on admission): it is named by what it is.
            let what = if op.reference_id.is_empty() {
                let words: String = op.instruction.chars().take(40).collect();
                let more = if op.instruction.chars().count() > 40 {
                    "…"
                } else {
                    ""
                };
                match op.assignee.as_deref() {
                    Some(role) => format!("a new {role} operation (\"{words}{more}\")"),
                    None => format!("a new operation (\"{words}{more}\")"),
                }
            } else {
                op.reference_id.to_string()
            };
            let detail = format!(
                "injected {what} refused: {} of max_spawn {} already accepted",
                self.adm.accepted, self.cfg.max_spawn
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
                None,
            );
            return None;
        }
        if let Some(&existing) = self.index.get(&op.op_id) {
            return self.add_edges_into(existing, emitter, assignee, deps, operator);
        }
        if op.reference_id.is_empty() {
            op.reference_id = self.adm.next_name();
        }
        op.metadata.spawned_from = emitter.map(|e| self.graph[e].op.op_id);
        Some(self.accept_new(emitter, op, deps, independent, None, operator))
    }

    /// The injected child is already in the graph: new edges into it may
    /// close a cycle, so this is the one case that checks reachability. It
    /// must not have started; if it was about to, it waits again.
    pub(super) fn add_edges_into(
        &mut self,
        existing: NodeIndex,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        deps: Vec<(NodeIndex, Edge)>,
        operator: bool,
    ) -> Option<NodeIndex> {
        let target = self.graph[existing].op.reference_id.clone();
        let op_id = Some(self.graph[existing].op.op_id);
        let status = self.graph[existing].status;
        for (from, _) in &deps {
            if *from == existing
                || petgraph::algo::has_path_connecting(&self.graph, existing, *from, None)
            {
                let detail = format!(
                    "an edge {} -> {target} would close a cycle",
                    self.graph[*from].op.reference_id
                );
                self.drop_spawn(emitter, assignee, DropReason::Cycle, detail, op_id, None);
                return None;
            }
        }
        if status == NodeStatus::Running || status.is_terminal() {
            let detail = format!(
                "{target} has already started; dependencies can be added only to an operation that has not"
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::BuilderError,
                detail,
                op_id,
                None,
            );
            return None;
        }
        let records = self.dep_records(&deps);
        for (from, edge) in deps {
            self.graph.add_edge(from, existing, edge);
        }
        // About to start, or asking for approval: it waits for the new
        // dependencies first (and asks again after them).
        if matches!(status, NodeStatus::Ready | NodeStatus::AwaitingApproval) {
            self.sched.ready.retain(|&r| r != existing);
            self.sched.unpark(existing);
            self.gate.leave(existing);
            let n = &mut self.graph[existing];
            n.parked = false;
            n.status = NodeStatus::Pending;
        }
        self.relink(existing);
        if operator {
            self.adm.operator_added += 1;
        } else {
            self.adm.accepted += 1;
        }
        let kind = SignalKind::DependenciesAdded {
            node: self.header(existing),
            edges: records,
            emitter_id: self.op_id_of(emitter),
            operator,
        };
        let at = self.emit_node(existing, kind);
        let op = &self.graph[existing].op;
        let (assignee, op_id) = (op.assignee.clone(), op.op_id);
        let outcome = LedgerOutcome::Accepted {
            op_id,
            name: target,
        };
        self.ledger_row(at, emitter, assignee, outcome);
        self.emit_budget();
        Some(existing)
    }
}

#[cfg(test)]
mod tests {
    use super::super::RunConfig;
    use super::super::testkit::{executor, started_emitter};
    use super::*;
    use crate::kernel::CommandError;
    use crate::kernel::graph::{Condition, Operation, new_op_id};

    fn new(name: &str, depends_on: Vec<(crate::kernel::graph::OpId, Condition)>) -> NewOperation {
        NewOperation {
            op: Operation::new(name, "x").with_agent("forever", serde_json::Value::Null),
            depends_on,
            parent: None,
            independent: false,
        }
    }

    #[test]
    fn what_is_not_in_the_run_is_named_in_the_refusal() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        let stranger = new_op_id();
        let mut orphan = new("b", Vec::new());
        orphan.parent = Some(stranger);
        assert_eq!(ex.inject(orphan, false), None);
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "builder_error",
                detail: "the parent is not in this run".into(),
            }
        );
        // For another role, so it is a ledger row of its own.
        let mut waiting = new("c", vec![(stranger, Condition::Succeeded)]);
        waiting.op = waiting.op.with_role("worker");
        assert_eq!(ex.inject(waiting, false), None);
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "builder_error",
                detail: format!("dependency {stranger} is not in this run"),
            }
        );
        assert_eq!(ex.adm.accepted, 0);
    }

    #[test]
    fn an_unnamed_injection_is_named_like_a_spawn_and_hangs_under_its_parent() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        tape.take();
        let a = ex.ix("a");
        let mut child = new("", Vec::new());
        child.parent = Some(ex.graph[a].op.op_id);
        let ix = ex.inject(child, false).expect("admitted");
        assert_eq!(&*ex.graph[ix].op.reference_id, "spawn-1");
        assert_eq!(
            ex.graph[ix].op.metadata.spawned_from,
            Some(ex.graph[a].op.op_id)
        );
        assert!(ex.graph.contains_edge(a, ix));
        assert_eq!(tape.take(), ["spawned spawn-1", "queued spawn-1"]);
    }

    /// Issue 42: max_spawn bounds what agents (and code) spawn; the
    /// operator's own add goes through admission (cycle, ledger) but is
    /// neither refused nor counted by it.
    #[test]
    fn the_operators_add_is_not_counted_against_max_spawn() {
        let (mut ex, _tape) = started_emitter(1);
        assert!(ex.inject(new("b", Vec::new()), false).is_some());
        assert!(ex.inject(new("mine", Vec::new()), true).is_some());
        assert_eq!((ex.adm.accepted, ex.adm.operator_added), (1, 1));
        assert_eq!(ex.inject(new("c", Vec::new()), false), None);
        let env = ex.snapshot_with(false);
        assert_eq!(env.run.spawn_accepted, 1);
        assert_eq!(env.run.operator_added, 1);
    }

    #[test]
    fn injection_counts_against_max_spawn() {
        let (mut ex, _tape) = started_emitter(1);
        assert!(ex.inject(new("b", Vec::new()), false).is_some());
        assert_eq!(ex.inject(new("c", Vec::new()), false), None);
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "max_spawn_exceeded",
                detail: "injected c refused: 1 of max_spawn 1 already accepted".into(),
            }
        );
        // An operator's add has no name yet: it is named by what it is
        // (issue 27: "injected  refused").
        let mut unnamed = new("", Vec::new());
        unnamed.op.assignee = Some("tester".into());
        unnamed.op.instruction = "check the build".into();
        assert_eq!(ex.inject(unnamed, false), None);
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "max_spawn_exceeded",
                detail: "injected a new tester operation (\"check the build\") refused: 1 of max_spawn 1 already accepted".into(),
            }
        );
    }

    #[test]
    fn an_operation_cannot_wait_for_itself() {
        let (mut ex, _tape) = executor(
            &[("a", &[], false), ("b", &[], false)],
            RunConfig::default(),
        );
        ex.begin();
        let b = ex.ix("b");
        let mut again = new("b", Vec::new());
        again.op.op_id = ex.graph[b].op.op_id;
        again.depends_on = vec![(again.op.op_id, Condition::Succeeded)];
        assert_eq!(ex.inject(again, false), None);
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "cycle",
                detail: "an edge b -> b would close a cycle".into(),
            }
        );
        assert_eq!(ex.graph.edge_count(), 0);
    }
}
