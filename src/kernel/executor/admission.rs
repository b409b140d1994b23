//! Admission (ADR-0033 D3 steps 2–7): a routed request is checked against
//! the spawn cap, named and joined to the graph, or dropped with a reason;
//! either way it is signalled and recorded in the ledger.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::builder::RouteResult;
use super::super::graph::OperationKind;
use super::super::graph::{Edge, OpId, OpMetadata, Operation, new_op_id};
use super::super::ledger::{
    DROP_DETAIL_MAX, DropReason, LedgerEntry, LedgerOutcome, RequestPayload,
    SPAWNED_INSTRUCTION_MAX, truncate_chars,
};
use super::super::request::RequestId;
use super::super::signal::{DepRecord, SignalKind, SpawnRecord};
use super::Executor;
use super::node::Node;
use super::routing::RequestMeta;

/// What a dropped request's ledger row says of the request itself.
pub(super) struct Asked {
    pub identity: Option<RequestId>,
    pub request: Option<Arc<RequestPayload>>,
}

impl Asked {
    /// What the operator asked for (no identity: it is not an agent's).
    pub(super) fn operator(instruction: &str) -> Asked {
        Asked {
            identity: None,
            request: Some(RequestPayload::new(
                instruction,
                OperationKind::Operate.as_str(),
                None,
                false,
            )),
        }
    }
}

impl From<Option<RequestId>> for Asked {
    fn from(identity: Option<RequestId>) -> Self {
        Asked {
            identity,
            request: None,
        }
    }
}

impl Executor {
    /// Makes room for `k` more operations at once, so a burst of admissions
    /// does not grow every table step by step.
    pub(super) fn reserve(&mut self, k: usize) {
        self.graph.reserve_nodes(k);
        self.graph.reserve_edges(k);
        self.index.reserve(k);
        if let Some(names) = self.names.get_mut() {
            names.reserve(k);
        }
        self.adm.ledger.reserve(k);
    }

    /// Records a dropped request in the ledger and signals it.
    pub(super) fn drop_spawn(
        &mut self,
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        reason: DropReason,
        detail: String,
        op_id: Option<OpId>,
        asked: impl Into<Asked>,
    ) {
        let Asked { identity, request } = asked.into();
        let detail: Arc<str> = Arc::from(truncate_chars(&detail, DROP_DETAIL_MAX));
        let emitter_id = self.op_id_of(emitter);
        let at = self.bus.emit(SignalKind::SpawnDropped {
            reason,
            assignee: assignee.clone(),
            emitter_id,
            detail: detail.clone(),
            op_id,
            identity,
            request: request.clone(),
        });
        let outcome = LedgerOutcome::Dropped {
            reason,
            detail,
            op_id,
            request,
        };
        self.ledger_row(at, emitter, assignee, outcome);
    }

    /// Records what became of a request in the ledger, under its emitter,
    /// at the seq and time of the signal that said so.
    pub(super) fn ledger_row(
        &mut self,
        (seq, elapsed): (u64, f64),
        emitter: Option<NodeIndex>,
        assignee: Option<Arc<str>>,
        outcome: LedgerOutcome,
    ) {
        let entry = LedgerEntry {
            seq,
            elapsed,
            emitter_id: self.op_id_of(emitter),
            emitter_name: emitter.map(|e| self.graph[e].op.reference_id.clone()),
            assignee,
            outcome,
            repeats: 0,
        };
        crate::kernel::ledger::record(&mut self.adm.ledger, entry);
    }

    pub(super) fn op_id_of(&self, ix: Option<NodeIndex>) -> Option<OpId> {
        ix.map(|e| self.graph[e].op.op_id)
    }

    /// The edges into a node as signals record them, by op id.
    pub(super) fn dep_records(&self, deps: &[(NodeIndex, Edge)]) -> Vec<DepRecord> {
        deps.iter()
            .map(|(from, edge)| DepRecord {
                from: self.graph[*from].op.op_id,
                edge: edge.clone(),
            })
            .collect()
    }

    /// Admission (ADR-0033 D3 steps 1–7) of a routed request.
    pub(super) fn admit(
        &mut self,
        emitter: Option<NodeIndex>,
        meta: RequestMeta,
        routed: RouteResult,
    ) {
        // The router's signals about this request come before its outcome.
        self.drain_external();
        let candidate = match routed {
            Err(rej) => {
                self.drop_spawn(
                    emitter,
                    meta.assignee.clone(),
                    rej.reason,
                    rej.detail,
                    None,
                    meta.asked(),
                );
                return;
            }
            Ok(None) => {
                let detail = "the node builder made no operation of the request".into();
                self.drop_spawn(
                    emitter,
                    meta.assignee.clone(),
                    DropReason::NullChild,
                    detail,
                    None,
                    meta.asked(),
                );
                return;
            }
            Ok(Some(c)) => c,
        };
        // Identity is allocated after routing, before the cap: a refused
        // candidate leaves a gap in the spawn-N sequence, as the spec allows.
        let name = self.adm.next_name();
        let assignee = candidate.assignee.clone().or_else(|| meta.assignee.clone());
        if self.adm.accepted >= self.cfg.max_spawn {
            let detail = format!(
                "{name} refused: {} of max_spawn {} already accepted",
                self.adm.accepted, self.cfg.max_spawn
            );
            self.drop_spawn(
                emitter,
                assignee,
                DropReason::MaxSpawnExceeded,
                detail,
                None,
                meta.asked(),
            );
            return;
        }
        let op = Operation {
            op_id: new_op_id(),
            reference_id: name,
            instruction: candidate.instruction,
            assignee: candidate.assignee,
            operation: candidate.operation,
            metadata: OpMetadata {
                requester_role: candidate.requester_role,
                spawned_from: emitter.map(|e| self.graph[e].op.op_id),
                approval: false,
                agent: candidate.agent,
                params: candidate.params,
                spawn_reason: meta.reason,
                profile: None,
            },
        };
        let deps: Vec<(NodeIndex, Edge)> = match emitter {
            Some(e) if !meta.independent => vec![(e, Edge::spawn())],
            _ => Vec::new(),
        };
        self.accept_new(emitter, op, deps, meta.independent, meta.identity, false);
    }

    /// Inserts a brand-new node. It has only incoming edges, so it cannot
    /// close a cycle and no reachability check is needed: admission costs
    /// the same however large the graph is.
    pub(super) fn accept_new(
        &mut self,
        emitter: Option<NodeIndex>,
        op: Operation,
        deps: Vec<(NodeIndex, Edge)>,
        independent: bool,
        identity: Option<RequestId>,
        operator: bool,
    ) -> NodeIndex {
        let op_id = op.op_id;
        let name = op.reference_id.clone();
        let assignee = op.assignee.clone();
        let cut = truncate_chars(&op.instruction, SPAWNED_INSTRUCTION_MAX);
        let instruction: Arc<str> = if cut.len() == op.instruction.len() {
            op.instruction.clone()
        } else {
            Arc::from(cut)
        };
        let record = Box::new(SpawnRecord {
            agent: op.metadata.agent.clone(),
            params: op.metadata.params.clone(),
            requester_role: op.metadata.requester_role.clone(),
            reason: op.metadata.spawn_reason.clone(),
            kind: op.operation,
            profile: op.metadata.profile.clone(),
            edges: self.dep_records(&deps),
            identity,
            operator,
        });
        let ix = self.graph.add_node(Node::new(op, self.empty_deps.clone()));
        self.index.insert(op_id, ix);
        if let Some(names) = self.names.get_mut() {
            names.entry(name.clone()).or_insert(ix);
        }
        for (from, edge) in deps {
            self.graph.add_edge(from, ix, edge);
        }
        // The operator's own add is not an agent's spawn: max_spawn does
        // not count it.
        if operator {
            self.adm.operator_added += 1;
        } else {
            self.adm.accepted += 1;
        }
        self.emit_budget();
        let at = self.bus.emit(SignalKind::Spawned {
            op_id,
            name: name.clone(),
            parent_id: self.op_id_of(emitter),
            independent,
            assignee: assignee.clone(),
            instruction,
            record,
        });
        // An agent's request (not the operator's own add).
        if let Some(e) = emitter {
            let (by, spawned) = (self.graph[e].op.reference_id.clone(), name.clone());
            self.break_on(super::super::breakpoint::Breakpoint::Spawn, || {
                format!("{spawned} was spawned by {by} (breakpoint spawn)")
            });
        }
        self.ledger_row(
            at,
            emitter,
            assignee,
            LedgerOutcome::Accepted { op_id, name },
        );
        self.node_added(ix);
        // Settle it while it is still in cache: a burst of admissions
        // otherwise walks every new node twice.
        self.drain_worklist();
        ix
    }

    /// What admission said of the last thing it dropped, as a refusal.
    pub(super) fn last_drop(&self) -> crate::kernel::CommandError {
        match self.adm.ledger.last().map(|e| &e.outcome) {
            Some(LedgerOutcome::Dropped { reason, detail, .. }) => {
                crate::kernel::CommandError::Dropped {
                    reason: reason.as_str(),
                    detail: detail.to_string(),
                }
            }
            _ => crate::kernel::CommandError::RunFinished,
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::RunConfig;
    use super::super::testkit::{executor, started_emitter};
    use super::*;
    use crate::kernel::CommandError;
    use crate::kernel::builder::{Candidate, Rejection};
    use crate::kernel::graph::OperationKind;

    fn meta() -> RequestMeta {
        RequestMeta {
            assignee: Some(Arc::from("worker")),
            independent: false,
            reason: Some(Arc::from("needs tests")),
            identity: Some(RequestId(9)),
            instruction: Arc::from("write the tests"),
            operation: OperationKind::Operate,
        }
    }

    fn candidate(instruction: &str) -> RouteResult {
        Ok(Some(Candidate {
            instruction: Arc::from(instruction),
            assignee: Some(Arc::from("worker")),
            requester_role: Some(Arc::from("worker")),
            agent: Arc::from("forever"),
            params: Arc::new(Value::Null),
            operation: OperationKind::Operate,
        }))
    }

    #[test]
    fn a_refused_candidate_leaves_a_gap_in_the_names_and_is_the_last_drop() {
        let (mut ex, tape) = started_emitter(1);
        tape.take();
        let a = ex.ix("a");
        ex.admit(Some(a), meta(), candidate("one"));
        ex.admit(Some(a), meta(), candidate("two"));
        ex.admit(Some(a), meta(), candidate("three"));
        assert_eq!(ex.adm.accepted, 1);
        assert_eq!(
            tape.take(),
            [
                "spawned spawn-1",
                "queued spawn-1",
                "spawn_dropped",
                "spawn_dropped"
            ]
        );
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "max_spawn_exceeded",
                detail: "spawn-3 refused: 1 of max_spawn 1 already accepted".into(),
            }
        );
        // Each refusal keeps a row of its own (their details differ), and
        // the second's name is spent all the same.
        assert_eq!(ex.adm.ledger.len(), 3);
        assert_eq!(ex.adm.ledger.last().unwrap().repeats, 0);
        assert_eq!(ex.adm.spawn_seq, 3);
        let spawned = &ex.graph[ex.ix("spawn-1")].op;
        assert_eq!(spawned.metadata.spawned_from, Some(ex.graph[a].op.op_id));
        assert_eq!(
            spawned.metadata.spawn_reason.as_deref(),
            Some("needs tests")
        );
        assert!(
            ex.graph.contains_edge(a, ex.ix("spawn-1")),
            "a dependent request waits for its emitter"
        );
    }

    #[test]
    fn an_overview_keeps_the_drops_and_counts_the_accepted() {
        let (mut ex, _tape) = started_emitter(2);
        let a = ex.ix("a");
        for i in ["one", "two", "three"] {
            ex.admit(Some(a), meta(), candidate(i));
        }
        ex.admit(Some(a), meta(), Ok(None));
        let full = ex.snapshot_with(true);
        assert_eq!(full.ledger.len(), 4);
        let over = ex.snapshot_with(false);
        assert_eq!(over.run.spawn_accepted, 2);
        let kept: Vec<_> = full
            .ledger
            .iter()
            .filter(|e| matches!(e.outcome, LedgerOutcome::Dropped { .. }))
            .collect();
        assert_eq!(over.ledger.iter().collect::<Vec<_>>(), kept);
        assert_eq!(kept.len(), 2);
    }

    #[test]
    fn null_children_and_rejections_are_dropped_before_a_name_is_given() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        let a = ex.ix("a");
        ex.admit(Some(a), meta(), Ok(None));
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "null_child",
                detail: "the node builder made no operation of the request".into(),
            }
        );
        let no = Rejection::new(DropReason::PaletteBudgetExhausted, "no room");
        ex.admit(Some(a), meta(), Err(no));
        assert_eq!(
            ex.last_drop(),
            CommandError::Dropped {
                reason: "palette_budget_exhausted",
                detail: "no room".into(),
            }
        );
        assert_eq!(ex.adm.spawn_seq, 0, "no name was used");
        let asked: Vec<_> = ex
            .adm
            .ledger
            .iter()
            .map(|e| match &e.outcome {
                LedgerOutcome::Dropped { request, .. } => {
                    request.as_ref().and_then(|r| r.instruction.clone())
                }
                LedgerOutcome::Accepted { .. } => None,
            })
            .collect();
        assert_eq!(
            asked,
            [
                Some(Arc::from("write the tests")),
                Some(Arc::from("write the tests"))
            ],
            "each row keeps what was asked"
        );
        assert!(
            ex.adm
                .ledger
                .iter()
                .all(|e| e.emitter_name.as_deref() == Some("a"))
        );
    }

    #[test]
    fn the_signal_carries_a_cut_instruction_and_the_operation_keeps_it_whole() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        tape.take();
        let long = "x".repeat(SPAWNED_INSTRUCTION_MAX + 10);
        ex.admit(None, meta(), candidate(&long));
        let ix = ex.ix("spawn-1");
        assert_eq!(ex.graph[ix].op.instruction.len(), long.len());
        let signals = tape.0.lock().unwrap();
        let v = serde_json::to_value(&*signals[0]).unwrap();
        assert_eq!(v["type"], "spawned");
        let cut = v["instruction"].as_str().unwrap();
        assert!(
            cut.chars().count() <= SPAWNED_INSTRUCTION_MAX,
            "{}",
            cut.len()
        );
        assert!(
            ex.graph
                .neighbors_directed(ix, petgraph::Direction::Incoming)
                .next()
                .is_none(),
            "without an emitter there is nothing to wait for"
        );
    }

    #[test]
    fn a_long_drop_detail_is_cut_in_the_ledger() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        let detail = "y".repeat(DROP_DETAIL_MAX * 2);
        ex.drop_spawn(None, None, DropReason::BuilderError, detail, None, None);
        let CommandError::Dropped { detail, .. } = ex.last_drop() else {
            panic!("a drop was recorded");
        };
        assert!(detail.chars().count() <= DROP_DETAIL_MAX);
    }
}
