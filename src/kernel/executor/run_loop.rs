//! The event loop: one task takes every wake-up (operator commands, agent
//! events and completions, routed batches, reports from outside), commits
//! what it recorded to the event log, then lets ready work start. A burst
//! of wake-ups is one step and one commit.

use std::sync::Arc;

use futures_util::StreamExt;
use petgraph::stable_graph::NodeIndex;
use tokio::time::Instant;

use super::super::agent::{AgentMsg, AgentOutcome};
use super::super::command::CommandError;
use super::super::control::Command;
use super::super::envelope::Envelope;
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::routing::RoutedBatch;
use super::{Executor, External};

/// How long a run whose event log cannot be written waits before trying
/// again.
const STORAGE_RETRY: std::time::Duration = std::time::Duration::from_secs(1);

/// Agent events taken in one step of the loop, at most.
const AGENT_BATCH: usize = 1024;

/// Other wake-ups taken in one step of the loop, at most.
const STEP_BATCH: usize = 1024;

/// What woke the event loop.
pub(super) enum Wake {
    /// Time to try writing the event log again.
    Storage,
    /// An operation's retry may be due.
    Retry,
    Command(Option<Command>),
    External(External),
    Done((NodeIndex, u32, Option<AgentOutcome>)),
    Agent(AgentMsg),
    Routed(RoutedBatch),
}

impl Executor {
    pub(super) async fn run(mut self) -> Envelope {
        self.bus.t0 = Instant::now();
        self.begin();
        // After begin: a resumed run's offset is known by now.
        let _ = self.clock.set((self.bus.t0, self.bus.offset));
        loop {
            // What the last wake-up recorded (a completion, a decision) is on
            // disk before anything acts on it.
            self.commit();
            self.advance();
            self.check_round();
            // What is ready already (an agent that answered at once) is
            // taken before writing: its lines go out with what advance
            // wrote, in one write at the top of the loop.
            if self.take_ready(0).await {
                continue;
            }
            self.commit();
            if self.is_finished() {
                break;
            }
            let Some(wake) = self.next_wake(true).await else {
                continue;
            };
            self.bus.tick();
            self.wake(wake);
            self.take_ready(1).await;
        }
        self.bus.tick();
        self.finish()
    }

    /// Takes what is ready now, up to a step's worth (`taken` already):
    /// a burst of completions is one commit (one write) rather than one
    /// each. Nothing starts before the commit at the top of the loop.
    /// Whether anything was taken.
    async fn take_ready(&mut self, taken: usize) -> bool {
        let mut any = false;
        for _ in taken..STEP_BATCH {
            let Some(w) = self.next_wake(false).await else {
                break;
            };
            if !any && taken == 0 {
                self.bus.tick();
            }
            any = true;
            self.wake(w);
        }
        any
    }

    /// What wakes the loop next: waits for it (`wait`), or only takes what
    /// is ready now.
    async fn next_wake(&mut self, wait: bool) -> Option<Wake> {
        let failing = self.storage.is_some();
        let retry_at = if wait {
            match (self.next_retry(), self.next_provider_release()) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
        } else {
            None
        };
        // Only taking what is ready: an empty channel is not polled (its
        // recv would register a waker only to answer "not yet", at every
        // wake-up of a burst). Waiting polls every one.
        let control = self.control_open && (wait || !self.control_rx.is_empty());
        let external = wait || !self.external_rx.is_empty();
        let agent = wait || !self.agent_rx.is_empty();
        if !(wait || control || external || agent)
            && self.inflight.is_empty()
            && self.routing.is_empty()
        {
            // Nothing could be ready: the end of every burst (for a chain,
            // of every step) is found without the select.
            return None;
        }
        let wake = tokio::select! {
            biased;
            cmd = self.control_rx.recv(), if control => Wake::Command(cmd),
            // The timer is made when first polled, not at every call (a
            // branch's future is built even when the branch is off).
            () = async { tokio::time::sleep(STORAGE_RETRY).await }, if failing && wait => Wake::Storage,
            () = async { tokio::time::sleep_until(retry_at.unwrap_or_else(Instant::now)).await }, if retry_at.is_some() => Wake::Retry,
            Some(ext) = self.external_rx.recv(), if external => Wake::External(ext),
            Some(done) = self.inflight.next(), if !self.inflight.is_empty() => Wake::Done(done),
            Some(msg) = self.agent_rx.recv(), if agent => Wake::Agent(msg),
            Some(batch) = self.routing.next(), if !self.routing.is_empty() => Wake::Routed(batch),
            () = std::future::ready(()), if !wait => return None,
        };
        Some(wake)
    }

    fn wake(&mut self, wake: Wake) {
        match wake {
            // The commit at the top of the loop tries again.
            Wake::Storage => {}
            Wake::Retry => {
                self.retries_due();
                self.release_providers(false);
            }
            Wake::Command(Some(cmd)) => self.command(cmd),
            Wake::Command(None) => self.control_open = false,
            Wake::External(ext) => self.external(ext),
            Wake::Done((ix, attempt, Some(outcome))) => self.complete(ix, attempt, outcome),
            // Stopped: the node was settled when it was stopped.
            Wake::Done((_, _, None)) => {}
            Wake::Agent(msg) => {
                self.agent_event(msg);
                // What else agents sent is taken in the same step: one
                // commit for a burst.
                for _ in 0..AGENT_BATCH {
                    match self.agent_rx.try_recv() {
                        Ok(msg) => self.agent_event(msg),
                        Err(_) => break,
                    }
                }
            }
            Wake::Routed(batch) => self.admit_batch(batch),
        }
    }

    /// `run_started` (or `resumed`) and the initial graph.
    pub(super) fn begin(&mut self) {
        let set = std::mem::take(&mut self.cfg.budget_set);
        if let Some(r) = self.restored.take() {
            self.resume_from(r);
            self.configured_breaks();
            if !set.is_empty() {
                self.acting = Arc::from("--budget");
                if let Err(why) = self.raise_caps(&set) {
                    self.bus.emit(SignalKind::Warning {
                        message: Arc::from(format!("--budget not applied: {why}")),
                        op_id: None,
                    });
                }
                self.acting = Arc::from(super::super::command::OPERATOR);
            }
        } else {
            if !set.is_empty() {
                let b = self
                    .budget
                    .get_or_insert_with(|| super::super::spend::Budget {
                        warn_at: super::super::spend::default_warn_at(),
                        ..Default::default()
                    });
                for c in &set {
                    b.apply(c);
                }
            }
            self.bus.emit(SignalKind::RunStarted {
                run_id: self.cfg.run_id.clone(),
                play: self.cfg.play.clone(),
                operations: self.graph.node_count(),
                max_concurrent: self.cfg.max_concurrent,
                reactive: self.cfg.reactive,
                max_spawn: self.cfg.max_spawn,
                paused: self.sched.paused,
                budget: self.budget.clone(),
            });
            if self.sched.paused {
                self.bus.emit(SignalKind::RunPaused { cause: None });
            }
            // What was reported before the start (initial provisioning).
            self.drain_external();
            // Before anything is ready: the first operations meet them too.
            self.configured_breaks();
            let seeds: Vec<NodeIndex> = self.graph.node_indices().collect();
            for ix in seeds {
                self.node_added(ix);
            }
        }
        for (ix, failure) in std::mem::take(&mut self.preset) {
            if self.graph[ix].status == NodeStatus::Pending {
                self.fail(ix, failure);
            }
        }
    }

    /// A commit point. When the event log cannot be written, the run stops
    /// starting anything (a pause with the reason `storage`, shown to the
    /// operator) and tries again each wake-up and every second; when the
    /// write goes through, it goes on.
    pub(super) fn commit(&mut self) {
        match self.bus.flush() {
            Ok(()) => {
                if self.storage.take().is_some() {
                    tracing::info!("the event log is written again; the run goes on");
                    self.bus.emit(SignalKind::StorageRecovered);
                }
            }
            Err(e) => {
                if self.storage.is_none() {
                    tracing::error!("{e}; nothing new starts until it can be written");
                    let error: Arc<str> = Arc::from(e.to_string());
                    self.storage = Some(error.clone());
                    self.bus.emit(SignalKind::StorageFailed { error });
                }
            }
        }
    }

    /// All settled, nothing routing — and recorded: a run whose log cannot
    /// be written has not finished (unless the operator gave up on it).
    pub(super) fn is_finished(&self) -> bool {
        self.sched.running == 0
            && self.routing.is_empty()
            && self.sched.terminal == self.graph.node_count()
            && (self.storage.is_none() || self.cancelled)
    }

    pub(super) fn command(&mut self, cmd: Command) {
        match cmd {
            Command::Request { req, by, reply } => {
                let _ = reply.send(self.apply_by(req, by));
            }
            Command::SetApprovalPolicy(policy, reply) => {
                self.set_approval_policy(policy);
                let _ = reply.send(());
            }
            Command::Record { by, action } => {
                self.bus.emit(SignalKind::OperatorAction {
                    by,
                    action,
                    op_id: None,
                });
            }
            Command::Warn { message } => {
                self.bus.emit(SignalKind::Warning {
                    message,
                    op_id: None,
                });
            }
            Command::Inject { op, reply } => {
                // ADR-0033 D5: outside an active reactive run, inject()
                // returns nothing and says why; there is no ledger to
                // record it in (a non-reactive envelope has none).
                let refused = if !self.cfg.reactive {
                    Some("inject refused: the run is not reactive (reactive = false)")
                } else if self.cancelled {
                    Some("inject refused: the run was cancelled")
                } else if self.finished.is_some() {
                    Some("inject refused: the run has ended")
                } else {
                    None
                };
                let joined = match refused {
                    Some(why) => {
                        tracing::warn!(operation = %op.op.reference_id, "{why}");
                        self.bus.emit(SignalKind::Warning {
                            message: Arc::from(why),
                            op_id: None,
                        });
                        None
                    }
                    None => self.inject(*op, false),
                };
                let _ = reply.send(joined.map(|ix| self.graph[ix].op.op_id));
            }
            Command::Snapshot { nodes, reply } => {
                let _ = reply.send(self.snapshot_with(nodes));
            }
        }
        // The answer goes out after the signals it caused are durable.
        self.commit();
    }

    /// Answers a command that arrived after the run ended.
    pub(super) fn refuse(&self, cmd: Command) {
        match cmd {
            Command::Request { reply, .. } => {
                let _ = reply.send(Err(CommandError::RunFinished));
            }
            Command::SetApprovalPolicy(_, reply) => {
                let _ = reply.send(());
            }
            Command::Record { .. } | Command::Warn { .. } => {}
            Command::Inject { op, reply } => {
                tracing::warn!(
                    operation = %op.op.reference_id,
                    "inject refused: the run has ended"
                );
                let _ = reply.send(None);
            }
            Command::Snapshot { nodes, reply } => {
                let _ = reply.send(self.snapshot_with(nodes));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::sync::oneshot;

    use super::super::RunConfig;
    use super::super::testkit::executor;
    use super::*;
    use crate::kernel::agent::{Agent, AgentResolver, BoxFuture, Invocation};
    use crate::kernel::command::Request;
    use crate::kernel::signal::{Outcome, Signal, SignalSink, SinkError};

    /// A sink that fails its next `failing` flushes and counts them all.
    #[derive(Clone, Default)]
    struct Disk(Arc<Mutex<(u32, u32)>>);

    impl SignalSink for Disk {
        fn write(&mut self, _s: &Arc<Signal>) {}
        fn flush(&mut self) -> Result<(), SinkError> {
            let mut d = self.0.lock().unwrap();
            d.1 += 1;
            if d.0 > 0 {
                d.0 -= 1;
                return Err(SinkError {
                    what: "events.jsonl".into(),
                    message: "no space left on device".into(),
                });
            }
            Ok(())
        }
    }

    #[test]
    fn a_log_that_cannot_be_written_stops_new_work_until_it_can() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        let disk = Disk(Arc::new(Mutex::new((2, 0))));
        ex.bus.sinks.push(Box::new(disk.clone()));
        ex.begin();
        ex.commit();
        ex.commit();
        assert_eq!(
            ex.storage.as_deref(),
            Some("events.jsonl: no space left on device")
        );
        ex.advance();
        assert_eq!(ex.sched.running, 0, "nothing starts while the log fails");
        assert!(
            tape.take()
                .iter()
                .filter(|l| *l == "storage_failed")
                .count()
                == 1,
            "said once, not at every try"
        );
        ex.commit();
        assert!(ex.storage.is_none());
        assert_eq!(tape.take(), ["storage_recovered"]);
        ex.advance();
        assert_eq!(ex.sched.running, 1);
        assert_eq!(disk.0.lock().unwrap().1, 3);
    }

    #[test]
    fn a_run_whose_log_fails_has_not_finished_unless_cancelled() {
        let (mut ex, _tape) = executor(&[], RunConfig::default());
        ex.bus
            .sinks
            .push(Box::new(Disk(Arc::new(Mutex::new((1, 0))))));
        ex.begin();
        assert!(ex.is_finished());
        ex.commit();
        assert!(!ex.is_finished());
        ex.cancelled = true;
        assert!(ex.is_finished());
    }

    #[test]
    fn commands_after_the_end_are_answered_not_carried_out() {
        let (ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        let (tx, mut rx) = oneshot::channel();
        ex.refuse(Command::Request {
            req: Request::Pause,
            by: Arc::from("test"),
            reply: tx,
        });
        assert_eq!(rx.try_recv().unwrap(), Err(CommandError::RunFinished));
        assert!(!ex.sched.paused);
    }

    struct Answers;

    impl Agent for Answers {
        fn invoke(&self, inv: Invocation) -> BoxFuture<AgentOutcome> {
            Box::pin(std::future::ready(Ok(
                serde_json::json!({"done": &*inv.name}),
            )))
        }
    }

    impl AgentResolver for Answers {
        fn resolve(&self, _name: &str) -> Option<Arc<dyn crate::kernel::agent::Agent>> {
            Some(Arc::new(Answers))
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_loop_runs_a_graph_to_its_end_committing_each_step() {
        let (mut ex, tape) = executor(
            &[
                ("a", &[], false),
                ("b", &["a"], false),
                ("c", &["a"], false),
            ],
            RunConfig::default(),
        );
        ex.agents = Arc::new(Answers);
        let disk = Disk::default();
        ex.bus.sinks.push(Box::new(disk.clone()));
        let envelope = ex.run().await;
        assert_eq!(envelope.outcome, Outcome::Succeeded);
        assert_eq!(envelope.completed_operations.len(), 3);
        let lines = tape.lines();
        assert_eq!(lines.first().map(String::as_str), Some("run_started"));
        assert_eq!(lines.last().map(String::as_str), Some("run_finished"));
        let flushes = disk.0.lock().unwrap().1;
        assert!(
            (2..=lines.len() as u32 + 1).contains(&flushes),
            "{flushes} commits for {} signals",
            lines.len()
        );
    }
}
