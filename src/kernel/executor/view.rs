//! What the run looks like from outside: a consistent snapshot, the exact
//! blocker of an operation, the lane counts, and the result envelope when
//! it ends.

use std::sync::{Arc, Mutex};

use indexmap::IndexMap;
use petgraph::Direction;
use petgraph::stable_graph::NodeIndex;

use super::super::control::FinalState;
use super::super::envelope::Envelope;
use super::super::lane::Lane;
use super::super::ledger::{DroppedSpawn, LedgerOutcome};
use super::super::signal::{LaneCounts, Outcome, SignalKind};
use super::super::snapshot::{AskedNow, Deciding, NodeSnapshot, NodeStatus, RunState, Snapshot};
use super::Executor;

impl FinalState for Mutex<Executor> {
    fn snapshot(&self, nodes: bool) -> Snapshot {
        self.lock()
            .unwrap_or_else(|e| e.into_inner())
            .snapshot_with(nodes)
    }
}

impl Executor {
    /// The exact blocker of an operation that has not started.
    pub(super) fn waiting_for(&self, ix: NodeIndex) -> Option<String> {
        let n = &self.graph[ix];
        match n.status {
            NodeStatus::Pending => {
                let dep = self
                    .graph
                    .neighbors_directed(ix, Direction::Incoming)
                    .filter(|&p| !self.graph[p].status.is_terminal())
                    .last()?;
                Some(format!("dependency {}", self.graph[dep].op.reference_id))
            }
            NodeStatus::AwaitingApproval => Some("approval".into()),
            NodeStatus::Ready => Some(match self.gate.reason(ix) {
                _ if self.storage.is_some() => {
                    "storage: the event log cannot be written".to_string()
                }
                Some(r) => r.to_string(),
                None if n.held => "held by the operator".into(),
                None if n.parked => "paused".into(),
                None => format!(
                    "concurrency limit ({} of {} running)",
                    self.sched.running, self.cfg.max_concurrent
                ),
            }),
            _ => None,
        }
    }

    pub(super) fn snapshot_with(&self, with_nodes: bool) -> Snapshot {
        let nodes = self
            .graph
            .node_indices()
            // An overview lists only what went wrong: what a cause names.
            .filter(|&ix| {
                with_nodes || matches!(self.graph[ix].lane, Lane::Failed | Lane::Escalated)
            })
            .map(|ix| {
                let n = &self.graph[ix];
                NodeSnapshot {
                    op_id: n.op.op_id,
                    name: n.op.reference_id.clone(),
                    role: n.op.assignee.clone(),
                    instruction: n.op.instruction.clone(),
                    lane: n.lane,
                    status: n.status,
                    held: n.held,
                    approval: n.op.metadata.approval,
                    parent_id: n.op.metadata.spawned_from,
                    depends_on: n.depends_on.clone(),
                    attempt: n.attempt,
                    lane_since: n.lane_since.secs().unwrap_or(0.0),
                    queued_at: n.queued_at.secs().unwrap_or(0.0),
                    started_at: n.started_at.secs(),
                    finished_at: n.finished_at.secs(),
                    result: n.result.clone(),
                    error: n.error(),
                    waiting_for: self.waiting_for(ix),
                    deciding: self.basis_now(ix).map(|basis| {
                        let question =
                            self.questions
                                .get(&ix)
                                .filter(|a| a.seq == basis.seq)
                                .map(|a| AskedNow {
                                    kind: a.q.kind,
                                    what: a.q.tool.clone(),
                                    detail: a.q.detail.clone(),
                                });
                        let gate = (basis.kind == crate::kernel::BasisKind::Gate)
                            .then(|| self.gate_words(ix))
                            .flatten();
                        Box::new(Deciding {
                            basis,
                            question,
                            gate,
                        })
                    }),
                }
            })
            .collect();
        Snapshot {
            seq: self.bus.seq,
            elapsed: self.finished_at.unwrap_or_else(|| self.now()),
            run: RunState {
                run_id: self.cfg.run_id.clone(),
                play: self.cfg.play.clone(),
                paused: self.sched.paused,
                step_credits: self.sched.step_credits,
                round: self.round,
                running: self.sched.running,
                awaiting_operator: self
                    .questions
                    .values()
                    .filter(|a| !a.q.kind.is_permission())
                    .count(),
                max_concurrent: self.cfg.max_concurrent,
                reactive: self.cfg.reactive,
                max_spawn: self.cfg.max_spawn,
                spawn_accepted: self.adm.accepted,
                operator_added: self.adm.operator_added,
                finished: self.finished,
                storage: self.storage.clone(),
                spent: self.meter.run,
                budget: self.budget.clone(),
                held_by_cap: self.spend_wait.len(),
                workers: self.workers.clone(),
            },
            nodes,
            counts: self.counts(),
            // An overview's ledger: the drops, which a summary lists (the
            // accepted are counted in `run.spawn_accepted`; a million of
            // them cost 175 ms to copy).
            ledger: if with_nodes {
                self.adm.ledger.clone()
            } else {
                self.adm
                    .ledger
                    .iter()
                    .filter(|e| matches!(e.outcome, LedgerOutcome::Dropped { .. }))
                    .cloned()
                    .collect()
            },
        }
    }

    /// An op_id two nodes of the graph share, if any: the index holds one
    /// entry per id, so a shared one leaves it shorter than the graph.
    fn shared_op_id(&self) -> Option<crate::kernel::OpId> {
        if self.index.len() == self.graph.node_count() {
            return None;
        }
        self.graph
            .node_indices()
            .map(|ix| (ix, self.graph[ix].op.op_id))
            .find(|(ix, id)| self.index.get(id) != Some(ix))
            .map(|(_, id)| id)
    }

    pub(super) fn counts(&self) -> LaneCounts {
        let mut c = LaneCounts::default();
        for n in self.graph.node_weights() {
            c.add(n.lane, n.status == NodeStatus::Skipped);
        }
        c
    }

    /// Emits `run_finished` and builds the envelope; the executor then
    /// becomes the run's final state, which snapshots are taken from.
    pub(super) fn finish(mut self) -> Envelope {
        let any_failed = self
            .graph
            .node_weights()
            .any(|n| matches!(n.status, NodeStatus::Failed | NodeStatus::Escalated));
        let mut outcome = if self.cancelled {
            Outcome::Cancelled
        } else if any_failed {
            Outcome::Failed
        } else {
            Outcome::Succeeded
        };
        self.gate.run_finished();
        // What the capacity seam reported as it wound down comes first.
        self.drain_external();
        // ADR-0033: completed and skipped never overlap, and every failed
        // operation is a completed one. The envelope sorts each node into
        // exactly one of them by its status, so that holds as long as no
        // two nodes share an op_id: checked in every build, and a broken
        // run is a failed run that says why, not a result a script would
        // trust. (Counting the index is enough; the envelope itself is
        // built once the sinks are gone, see below.)
        if let Some(id) = self.shared_op_id() {
            let name = self.graph[self.index[&id]].op.reference_id.clone();
            let message = Arc::from(format!(
                "internal error: operation {name} ({id}) is both completed and skipped, or failed but not completed, in the run's result; the run is reported failed"
            ));
            tracing::error!("{message}");
            self.bus.emit(SignalKind::Warning {
                message,
                op_id: Some(id),
            });
            outcome = Outcome::Failed;
        }
        self.finished = Some(outcome);
        let counts = self.counts();
        let spent = (self.meter.run != (0.0, 0.0)).then_some(self.meter.run);
        let (_, at) = self.bus.emit(SignalKind::RunFinished {
            outcome,
            counts,
            spent,
        });
        self.finished_at = Some(at);
        self.commit();
        // Sinks are dropped (the headless printer sees its channel end) and
        // observers are told the run is over.
        self.bus.close();
        // Built after the sinks are closed: the checkpoint writer has let
        // go of its copy of the run by now, so a large run's envelope (a
        // million names and results) is not allocated beside it, at the
        // run's peak.
        let mut env = self.envelope(outcome);
        // The graph's check above is what keeps the lists apart; test
        // builds check the lists themselves too (three sets of every id).
        if cfg!(debug_assertions) && env.check_disjoint().is_err() {
            env.outcome = Outcome::Failed;
        }
        // Commands sent from now on fail at once, and handles fall back to
        // the final state; commands already queued are answered "finished".
        self.control_rx.close();
        while let Ok(cmd) = self.control_rx.try_recv() {
            self.refuse(cmd);
        }
        let state = self.final_state.clone();
        let _ = state.set(Box::new(Mutex::new(self)));
        env
    }

    fn envelope(&mut self, outcome: Outcome) -> Envelope {
        let n = self.graph.node_count();
        let mut env = Envelope {
            outcome,
            completed_operations: Vec::new(),
            failed_operations: Vec::new(),
            skipped_operations: Vec::new(),
            operation_results: IndexMap::with_capacity_and_hasher(n, Default::default()),
            final_context: std::mem::take(&mut self.flow_context),
            operation_names: IndexMap::with_capacity_and_hasher(n, Default::default()),
            spawned_operations: None,
            escalated_operations: None,
            dropped_spawns: None,
        };
        let mut escalated = Vec::new();
        for n in self.graph.node_weights() {
            let id = n.op.op_id;
            env.operation_names.insert(id, n.op.reference_id.clone());
            match n.status {
                NodeStatus::Succeeded | NodeStatus::Escalated => {
                    env.completed_operations.push(id);
                    if n.status == NodeStatus::Escalated {
                        escalated.push(id);
                    }
                }
                // ADR-0033: every settled operation not skipped is
                // completed, failed ones too (a consumer written to the
                // record must see them); playdeck adds which failed.
                NodeStatus::Failed => {
                    env.completed_operations.push(id);
                    env.failed_operations.push(id);
                }
                _ => env.skipped_operations.push(id),
            }
            if n.status != NodeStatus::Skipped
                && let Some(r) = &n.result
            {
                env.operation_results.insert(id, Arc::clone(r));
            }
        }
        if self.cfg.reactive {
            // Every spawned operation, the operator's adds too (which
            // max_spawn does not count).
            env.spawned_operations = Some(self.adm.accepted + self.adm.operator_added);
            env.escalated_operations = Some(escalated);
            env.dropped_spawns = Some(
                self.adm
                    .ledger
                    .iter()
                    // A33-59: every drop an entry of its own (the ledger
                    // folds exact repeats in memory; the record does not).
                    .filter_map(|e| match &e.outcome {
                        LedgerOutcome::Dropped {
                            reason,
                            detail,
                            op_id,
                            ..
                        } => Some((
                            DroppedSpawn {
                                reason: *reason,
                                assignee: e.assignee.clone(),
                                emitter_id: e.emitter_id,
                                detail: detail.clone(),
                                op_id: *op_id,
                            },
                            1 + e.repeats as usize,
                        )),
                        LedgerOutcome::Accepted { .. } => None,
                    })
                    .flat_map(|(d, n)| std::iter::repeat_n(d, n))
                    .collect(),
            );
        }
        env
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::executor;
    use crate::kernel::{Request, RunConfig};

    #[test]
    fn the_snapshot_names_each_blocker() {
        let cfg = RunConfig {
            max_concurrent: 1,
            ..RunConfig::default()
        };
        let (mut ex, _) = executor(
            &[
                ("a", &[], false),
                ("b", &[], false),
                ("c", &["a"], false),
                ("g", &[], true),
            ],
            cfg,
        );
        ex.begin();
        ex.advance();
        ex.apply(Request::Hold { op: "b".into() }).unwrap();
        let snap = ex.snapshot_with(true);
        let why = |n: &str| {
            snap.nodes
                .iter()
                .find(|x| &*x.name == n)
                .unwrap()
                .waiting_for
                .clone()
        };
        assert_eq!(why("a"), None, "running");
        assert_eq!(why("b").as_deref(), Some("held by the operator"));
        assert_eq!(why("c").as_deref(), Some("dependency a"));
        assert_eq!(why("g").as_deref(), Some("approval"));
        assert_eq!((snap.run.running, snap.seq), (1, ex.bus.seq));
    }

    #[test]
    fn counts_keep_skipped_apart_from_failed_and_the_envelope_is_disjoint() {
        let (mut ex, _) = executor(
            &[("a", &[], false), ("b", &["a"], false)],
            RunConfig::default(),
        );
        ex.begin();
        ex.advance();
        ex.apply(Request::Cancel).unwrap();
        let c = ex.counts();
        assert_eq!((c.failed, c.skipped, c.succeeded), (1, 1, 0));
        let env = ex.finish();
        assert_eq!(env.outcome, crate::kernel::Outcome::Cancelled);
        assert!(env.check_disjoint().is_ok());
        assert_eq!(
            (env.failed_operations.len(), env.skipped_operations.len()),
            (1, 1)
        );
        // The failed one is completed too (ADR-0033); the skipped one not.
        assert_eq!(env.completed_operations, env.failed_operations);
    }

    /// Two nodes sharing an op_id would put one id in two lists of the
    /// envelope: the run says so and is reported failed (the envelope is
    /// built after the sinks close, so this is checked on the graph).
    #[test]
    fn a_shared_op_id_fails_the_run_and_says_why() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        let twin = ex.graph[ex.index[&ex.graph.node_weights().next().unwrap().op.op_id]]
            .op
            .clone();
        let no_deps = ex.empty_deps.clone();
        ex.graph
            .add_node(super::super::node::Node::new(twin, no_deps));
        ex.begin();
        ex.apply(Request::Cancel).unwrap();
        let env = ex.finish();
        assert_eq!(env.outcome, crate::kernel::Outcome::Failed);
        let lines = tape.lines();
        let warned = lines.iter().position(|l| l == "warning");
        let finished = lines.iter().position(|l| l == "run_finished");
        assert!(warned.is_some() && warned < finished, "{lines:?}");
    }
}
