//! Taking up a stopped run: the numbering and the clock go on, terminal
//! operations stand with their results, the rest wait as they did and
//! running ones are queued again for a new attempt.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::lane::Lane;
use super::super::request;
use super::super::restore::Restore;
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::Executor;
use super::node::{Approval, Conversation, Ms};

impl Executor {
    pub(super) fn resume_from(&mut self, r: Restore) {
        self.bus.seq = r.seq;
        if r.elapsed.is_finite() && r.elapsed > 0.0 {
            self.bus.offset = r.elapsed;
        }
        self.bus.tick();
        self.adm.spawn_seq = r.spawn_seq;
        self.adm.accepted = r.spawn_accepted;
        self.adm.operator_added = r.operator_added;
        self.adm.ledger = r.ledger;
        self.flow_context = r.flow_context;
        self.round = r.round.max(1);
        self.meter.restore(r.spent, &r.spent_by_role);
        // The caps the log says were in force win over the play's: a raise
        // outlives the process that took it.
        if let Some(b) = r.budget {
            self.budget = Some(b);
        }
        let order: Vec<NodeIndex> = self.graph.node_indices().collect();
        let mut reattempt = Vec::new();
        for &ix in &order {
            let op_id = self.graph[ix].op.op_id;
            let Some(rn) = r.nodes.get(&op_id) else {
                continue;
            };
            self.adm.restore(ix, rn.attempt, &rn.seen, &rn.handled);
            let n = &mut self.graph[ix];
            n.attempt = rn.attempt;
            n.held = rn.held;
            n.resolvable = rn.resolvable;
            n.land_only = rn.land_only;
            n.conversation = rn.carry.as_ref().map(|(session, ended)| {
                Box::new(Conversation {
                    ended: Some(ended.clone()),
                    ..Conversation::new(session.clone())
                })
            });
            n.queued_at = Ms::at(rn.queued_at);
            n.approval = match (n.approval, rn.approved) {
                (Approval::NotRequired, _) => Approval::NotRequired,
                (_, Some(true)) => Approval::Approved,
                (_, Some(false)) => Approval::Denied,
                (a, None) => a,
            };
            if rn.status.is_terminal() {
                n.status = rn.status;
                n.result = rn.result.clone();
                n.finished_at = rn.finished_at.map_or(Ms::NONE, Ms::at);
                n.lane = match rn.status {
                    NodeStatus::Succeeded => Lane::Succeeded,
                    NodeStatus::Escalated => Lane::Escalated,
                    _ => Lane::Failed,
                };
                if let (Some(seq), NodeStatus::Failed | NodeStatus::Escalated) =
                    (rn.settled_seq, rn.status)
                {
                    self.shown.insert(ix, seq);
                }
                self.sched.terminal += 1;
            } else if rn.status == NodeStatus::Running {
                reattempt.push(ix);
            }
        }
        let names: Vec<Arc<str>> = reattempt
            .iter()
            .map(|&ix| self.graph[ix].op.reference_id.clone())
            .collect();
        self.bus.emit(SignalKind::Resumed {
            from_seq: r.seq,
            resumes: r.resumes,
            reattempted: Arc::from(names),
            dropped_reservations: Arc::from(r.dropped_reservations),
        });
        if self.sched.paused {
            self.bus.emit(SignalKind::RunPaused { cause: None });
        }
        // What the resume opens again is announced first, so views stop
        // counting it settled (a retry's new attempt, what a cancel or the
        // retried failure skipped).
        for (op_id, because) in &r.reopened {
            if let Some(&ix) = self.index.get(op_id) {
                if because.is_none() {
                    // Retried (or resolved) by whoever resumed it.
                    self.retried_by = Some(super::RetriedBy {
                        by: Arc::from(crate::paths::me("resume")),
                        note: None,
                        on: self.graph[ix]
                            .land_only
                            .then(|| Arc::from("its merge conflict, resolved by hand")),
                    });
                }
                self.emit_retried(ix, because.clone());
            }
        }
        self.drain_external();
        for ix in order {
            if self.graph[ix].status.is_terminal() {
                continue;
            }
            if reattempt.contains(&ix) {
                // Back to the queue, where the console shows it.
                self.node_added(ix);
            } else {
                self.relink(ix);
            }
        }
        // Requests in settled results that were still being routed when the
        // process stopped: read them again (the recorded ones are passed
        // over).
        if self.cfg.reactive {
            let settled: Vec<NodeIndex> = self
                .graph
                .node_indices()
                .filter(|&ix| {
                    matches!(
                        self.graph[ix].status,
                        NodeStatus::Succeeded | NodeStatus::Escalated
                    )
                })
                .collect();
            for ix in settled {
                let Some(result) = self.graph[ix].result.clone() else {
                    continue;
                };
                let found = request::extract(&result);
                if !found.spawns.is_empty() {
                    self.route_spawns(ix, &found.spawns, true);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::super::testkit::executor;
    use crate::kernel::restore::{Restore, RestoredNode};
    use crate::kernel::{NodeStatus, RunConfig};

    fn node(status: NodeStatus, attempt: u32) -> RestoredNode {
        RestoredNode {
            status,
            attempt,
            result: (status == NodeStatus::Succeeded).then(|| Arc::new(serde_json::json!(1))),
            approved: None,
            held: false,
            seen: vec![],
            handled: vec![],
            queued_at: 1.0,
            finished_at: None,
            carry: None,
            settled_seq: None,
            resolvable: false,
            land_only: false,
        }
    }

    #[test]
    fn settled_work_stands_running_work_gets_a_new_attempt_and_numbering_goes_on() {
        let (mut ex, tape) = executor(
            &[
                ("done", &[], false),
                ("busy", &[], false),
                ("after", &["done"], false),
            ],
            RunConfig::default(),
        );
        let id = |n: &str| ex.graph[ex.ix(n)].op.op_id;
        let nodes: HashMap<_, _> = [
            (id("done"), node(NodeStatus::Succeeded, 1)),
            (id("busy"), node(NodeStatus::Running, 1)),
        ]
        .into_iter()
        .collect();
        ex.restored = Some(Restore {
            nodes,
            seq: 41,
            elapsed: 12.5,
            round: 1,
            ..Restore::default()
        });
        ex.begin();
        ex.advance();
        let sigs = tape.0.lock().unwrap().clone();
        assert_eq!(sigs[0].seq, 42, "numbering goes on without a gap");
        assert!(sigs[0].elapsed >= 12.5, "so does the clock");
        assert_eq!(
            tape.lines(),
            ["resumed", "queued busy", "started busy", "started after"],
            "done is never invoked again; after may start at once"
        );
        assert_eq!(ex.graph[ex.ix("busy")].attempt, 2);
        assert_eq!(ex.sched.terminal, 1);
    }
}
