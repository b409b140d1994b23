//! Breakpoints in the executor: checked where an operation becomes ready
//! to start (not at all while none is set: the common run pays one test),
//! and where a spawn, an escalation or a final failure is recorded. A
//! breakpoint pauses the run as the operator's pause does, its cause said
//! on `run_paused`.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::breakpoint::Breakpoint;
use super::super::command::CommandError;
use super::super::signal::{PauseReason, SignalKind};
use super::super::snapshot::NodeStatus;
use super::Executor;

impl Executor {
    /// `break AT` / `break --clear AT` (`--clear all`: every one).
    pub(super) fn set_break(&mut self, at: &str, clear: bool) -> Result<(), CommandError> {
        if clear && at.trim() == "all" {
            self.breaks.clear();
            self.run_to = None;
            self.emit_breakpoints();
            return Ok(());
        }
        // A run to here, as the list names it.
        if clear
            && let Some(op) = at.trim().strip_prefix("until ")
            && self
                .run_to
                .is_some_and(|ix| *self.graph[ix].op.reference_id == *op.trim())
        {
            self.run_to = None;
            self.emit_breakpoints();
            return Ok(());
        }
        let b: Breakpoint = at.parse().map_err(CommandError::BadRequest)?;
        if let Breakpoint::Op(name) = &b
            && !clear
        {
            self.resolve(name)?;
        }
        if clear {
            if !self.breaks.remove(&b) {
                let set = self.breakpoint_words();
                return Err(CommandError::BadRequest(format!(
                    "no breakpoint {b} to clear; set: {}",
                    if set.is_empty() {
                        "none".to_string()
                    } else {
                        set.join(", ")
                    }
                )));
            }
        } else if !self.breaks.insert(b) {
            return Ok(());
        }
        self.emit_breakpoints();
        Ok(())
    }

    /// `run_to OP`: a breakpoint before `op` that goes once it is hit, and
    /// the run resumed.
    pub(super) fn run_to(&mut self, op: &str) -> Result<(), CommandError> {
        let ix = self.resolve(op)?;
        let n = &self.graph[ix];
        let state = match n.status {
            NodeStatus::Pending if !n.held => None,
            NodeStatus::Pending => Some("held by the operator; unhold it first"),
            NodeStatus::Ready if n.parked => Some("about to start already (step starts it)"),
            NodeStatus::Ready => Some("about to start already"),
            NodeStatus::Running => Some("running"),
            NodeStatus::AwaitingApproval => Some("awaiting approval"),
            _ => Some("settled"),
        };
        if let Some(state) = state {
            return Err(CommandError::NotWaiting {
                name: self.graph[ix].op.reference_id.to_string(),
                state,
            });
        }
        self.run_to = Some(ix);
        self.emit_breakpoints();
        self.resume_run();
        Ok(())
    }

    /// The breakpoints as written, a run to here last.
    fn breakpoint_words(&self) -> Vec<Arc<str>> {
        let mut v: Vec<Arc<str>> = self
            .breaks
            .iter()
            .map(|b| Arc::from(b.to_string()))
            .collect();
        if let Some(ix) = self.run_to {
            v.push(Arc::from(format!(
                "until {}",
                self.graph[ix].op.reference_id
            )));
        }
        v
    }

    pub(super) fn emit_breakpoints(&mut self) {
        let set = Arc::from(self.breakpoint_words());
        self.bus.emit(SignalKind::Breakpoints { set });
    }

    /// The breakpoints of the run's configuration (`--break`), at its
    /// start: one naming no operation of the run is said, and kept (a
    /// spawned operation may take the name).
    pub(super) fn configured_breaks(&mut self) {
        let set = std::mem::take(&mut self.cfg.breakpoints);
        if set.is_empty() {
            return;
        }
        for b in set {
            if let Breakpoint::Op(name) = &b
                && self.resolve(name).is_err()
            {
                self.bus.emit(SignalKind::Warning {
                    message: Arc::from(format!(
                        "--break {name}: no operation of the run has that name (yet): kept, for one that takes it"
                    )),
                    op_id: None,
                });
            }
            self.breaks.insert(b);
        }
        self.emit_breakpoints();
    }

    /// Whether `ix`, about to become ready, meets a breakpoint (and which);
    /// a run to here goes once it is met.
    pub(super) fn break_before(&mut self, ix: NodeIndex) -> Option<String> {
        if self.breaks.is_empty() && self.run_to.is_none() {
            return None;
        }
        let n = &self.graph[ix];
        let name = n.op.reference_id.clone();
        if self.run_to == Some(ix) {
            self.run_to = None;
            self.emit_breakpoints();
            return Some(format!("{name} is about to start (run to here)"));
        }
        if self.breaks.contains(&Breakpoint::Op(name.clone())) {
            return Some(format!("{name} is about to start (breakpoint {name})"));
        }
        let role = n.op.assignee.clone()?;
        self.breaks
            .contains(&Breakpoint::Role(role.clone()))
            .then(|| format!("{name} is about to start (breakpoint role:{role})"))
    }

    /// A spawn, an escalation or a failure happened: the run pauses when a
    /// breakpoint asks for it (and it is not paused already).
    pub(super) fn break_on(&mut self, b: Breakpoint, cause: impl FnOnce() -> String) {
        if self.sched.paused || self.cancelled || !self.breaks.contains(&b) {
            return;
        }
        self.pause_for(Some(cause()));
    }

    /// Pauses the run (the operator's pause, or a breakpoint's with its
    /// cause): what was about to start waits.
    pub(super) fn pause_for(&mut self, cause: Option<String>) {
        if !self.sched.pause() {
            return;
        }
        self.bus.emit(SignalKind::RunPaused {
            cause: cause.map(Arc::from),
        });
        // Operations waiting for a slot or for capacity were about to start:
        // they wait here.
        let mut waiting: Vec<NodeIndex> = self.sched.ready.drain(..).collect();
        waiting.extend(self.gate.drain());
        for ix in waiting {
            self.park(ix, PauseReason::RunPaused);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::RunConfig;
    use super::super::testkit::executor;
    use super::*;
    use crate::kernel::Request;

    fn apply(ex: &mut Executor, r: Request) -> Result<(), CommandError> {
        ex.apply_by(r, Arc::from("ana")).map(|_| ())
    }

    fn brk(at: &str) -> Request {
        Request::Break {
            at: at.into(),
            clear: false,
        }
    }

    #[test]
    fn a_breakpoint_pauses_the_run_before_its_operation_starts_and_step_goes_on() {
        let (mut ex, tape) = executor(
            &[("a", &[], false), ("b", &["a"], false)],
            RunConfig::default(),
        );
        ex.begin();
        apply(&mut ex, brk("b")).unwrap();
        ex.advance();
        assert_eq!(ex.graph[ex.ix("a")].status, NodeStatus::Running);
        tape.take();
        ex.finish_ok("a");
        ex.advance();
        let b = ex.ix("b");
        assert!(ex.sched.paused, "paused before b");
        assert_eq!(ex.graph[b].status, NodeStatus::Ready);
        assert!(ex.graph[b].parked);
        let log = tape.take();
        assert!(log.contains(&"run_paused".to_string()), "{log:?}");
        // Stepped, it starts; the breakpoint does not hold it twice.
        apply(&mut ex, Request::Step { op: None }).unwrap();
        ex.advance();
        assert_eq!(ex.graph[b].status, NodeStatus::Running);
        // Cleared; an unknown one is refused; a bad one says what may be.
        apply(
            &mut ex,
            Request::Break {
                at: "b".into(),
                clear: true,
            },
        )
        .unwrap();
        assert!(ex.breaks.is_empty());
        assert!(matches!(
            apply(&mut ex, brk("nope")),
            Err(CommandError::UnknownOperation(_))
        ));
        match apply(&mut ex, brk("role:")) {
            Err(CommandError::BadRequest(e)) => assert!(e.contains("role:ROLE"), "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_pause_says_its_cause_and_role_and_failure_breakpoints_meet_theirs() {
        let cfg = RunConfig {
            breakpoints: vec!["role:worker".parse().unwrap()],
            ..RunConfig::default()
        };
        let (mut ex, tape) = executor(&[("a", &[], false)], cfg);
        ex.begin();
        ex.advance();
        assert!(ex.sched.paused, "a is of role worker: paused before it");
        let said: Vec<String> = tape
            .0
            .lock()
            .unwrap()
            .iter()
            .filter_map(|s| match &s.kind {
                SignalKind::RunPaused { cause: Some(c) } => Some(c.to_string()),
                _ => None,
            })
            .collect();
        assert_eq!(said, vec!["a is about to start (breakpoint role:worker)"]);
        // Failure: the run pauses when it is recorded.
        apply(
            &mut ex,
            Request::Break {
                at: "all".into(),
                clear: true,
            },
        )
        .unwrap();
        apply(&mut ex, brk("failure")).unwrap();
        apply(&mut ex, Request::Resume).unwrap();
        ex.advance();
        let a = ex.ix("a");
        let attempt = ex.graph[a].attempt;
        ex.complete(
            a,
            attempt,
            Err(crate::kernel::AgentFailure::new("boom", "it broke")),
        );
        assert!(ex.sched.paused);
        let paused = tape.0.lock().unwrap().iter().any(|s| {
            s.kind
                == SignalKind::RunPaused {
                    cause: Some(Arc::from("a failed (breakpoint failure)")),
                }
        });
        assert!(paused, "{:?}", tape.lines());
    }

    #[test]
    fn run_to_here_resumes_and_pauses_once_before_it() {
        let (mut ex, tape) = executor(
            &[
                ("a", &[], false),
                ("b", &["a"], false),
                ("c", &["b"], false),
            ],
            RunConfig {
                start_paused: true,
                ..RunConfig::default()
            },
        );
        ex.begin();
        ex.advance();
        assert!(ex.sched.paused);
        // Already about to start: said so.
        assert!(matches!(
            apply(&mut ex, Request::RunTo { op: "a".into() }),
            Err(CommandError::NotWaiting { .. })
        ));
        apply(&mut ex, Request::RunTo { op: "c".into() }).unwrap();
        assert!(!ex.sched.paused);
        ex.advance();
        ex.finish_ok("a");
        ex.advance();
        ex.finish_ok("b");
        ex.advance();
        assert!(ex.sched.paused, "before c");
        assert_eq!(ex.run_to, None, "once");
        assert!(tape.lines().iter().any(|l| l == "breakpoints"));
    }
}
