//! One attempt of an operation: it starts (a lease held, the agent
//! resolved, its context and instruction made), its agent's events are
//! signalled as they come, and it completes, fails or panics without taking
//! the run down.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use petgraph::Direction;
use petgraph::stable_graph::NodeIndex;
use serde_json::{Map, Value};

use super::super::agent::{
    ActivityState, AgentEvent, AgentEvents, AgentFailure, AgentMsg, AgentOutcome, BoxFuture,
    CarryOn, Invocation, SpawnBudget,
};
use super::super::lease::Lease;
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::node::Conversation;
use super::{Executor, panic_message};

/// The failure of an attempt whose agent panicked.
fn panicked(payload: &(dyn std::any::Any + Send)) -> AgentFailure {
    AgentFailure::new(
        "agent_panic",
        format!("the agent panicked: {}", panic_message(payload)),
    )
}

/// An agent future tagged with the node and attempt it belongs to. A panic
/// in its poll fails the attempt (never the run), and the attempt can be
/// stopped alone: [`Tagged::stop`] drops the agent's future (which kills
/// its processes) and the next poll reports the stop.
///
/// Both are done here, in the future the executor already holds, rather
/// than by wrapping it in `catch_unwind`, `map` and `Abortable`: those cost
/// a second boxed future, a shared abort flag and a map entry for every
/// attempt, and the stop they serve is rare (a request flood).
pub(super) struct Tagged {
    ix: NodeIndex,
    attempt: u32,
    /// `None` once stopped.
    fut: Option<BoxFuture<AgentOutcome>>,
    /// Who to wake when stopped: the waker of the last poll that waited.
    /// A future not polled yet is already queued to be.
    waker: Option<Waker>,
}

impl Tagged {
    /// Stops the attempt: its future is dropped now, and it completes
    /// (with `None`) when next polled.
    fn stop(&mut self) {
        self.fut = None;
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }
}

impl Future for Tagged {
    /// `None` when the attempt was stopped.
    type Output = (NodeIndex, u32, Option<AgentOutcome>);
    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let (ix, attempt) = (this.ix, this.attempt);
        let Some(fut) = this.fut.as_mut() else {
            return Poll::Ready((ix, attempt, None));
        };
        // A panicking agent fails its own operation (ADR-0033 D4: an
        // unexpected error becomes an error result); a future that
        // panicked is not polled again (it is done).
        let outcome = match std::panic::catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(cx))) {
            Ok(Poll::Ready(outcome)) => outcome,
            Ok(Poll::Pending) => {
                match &this.waker {
                    Some(w) if w.will_wake(cx.waker()) => {}
                    _ => this.waker = Some(cx.waker().clone()),
                }
                return Poll::Pending;
            }
            Err(p) => Err(panicked(&*p)),
        };
        this.fut = None;
        Poll::Ready((ix, attempt, Some(outcome)))
    }
}

impl Executor {
    pub(super) fn start(&mut self, ix: NodeIndex, lease: Option<Lease>) {
        let now = self.now_ms();
        let attempt = {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Running;
            n.attempt += 1;
            n.started_at = now;
            n.attempt
        };
        self.sched.running += 1;
        self.round_active = true;
        let node = self.header(ix);
        let role = self.graph[ix].op.assignee.clone();
        let instance = lease.as_ref().map(|l| l.instance.clone());
        let workspace = lease.as_ref().and_then(|l| l.workspace.clone());
        let leased_agent = lease.as_ref().and_then(|l| l.agent.clone());
        let profile = lease.as_ref().and_then(|l| l.profile.clone());
        if let Some(lease) = lease {
            self.gate.hold(ix, lease);
            // The lease's own signals (its instance made ready, then busy
            // with this operation) are already on their way: they go
            // first, so the record reads in the order things happened.
            self.drain_external();
        }
        let started = SignalKind::Started {
            node,
            attempt,
            role,
            instance: instance.clone(),
        };
        self.emit_node(ix, started);

        let agent_name = leased_agent.unwrap_or_else(|| self.graph[ix].op.metadata.agent.clone());
        let Some(agent) = self.agents.resolve(&agent_name) else {
            self.sched.running -= 1;
            self.gate.release(ix);
            let f = AgentFailure::new("agent_not_found", format!("no agent named {agent_name:?}"));
            self.fail(ix, f);
            return;
        };
        let context = if agent.wants_context() {
            self.context_for(ix)
        } else {
            Map::new()
        };
        let usd_headroom = self.budget.as_ref().and_then(|b| {
            self.meter
                .usd_headroom(b, self.graph[ix].op.assignee.as_deref())
        });
        let carry_on = self.carry_on(ix);
        let n = &self.graph[ix];
        let instruction = match &self.decorator {
            Some(d) => d.decorate(
                n.op.assignee.as_deref(),
                &n.op.instruction,
                SpawnBudget {
                    accepted: self.adm.accepted,
                    max: self.cfg.max_spawn,
                },
            ),
            None => n.op.instruction.clone(),
        };
        let inv = Invocation {
            op_id: n.op.op_id,
            name: n.op.reference_id.clone(),
            role: n.op.assignee.clone(),
            instruction,
            params: n.op.metadata.params.clone(),
            context,
            attempt,
            carry_on,
            events: AgentEvents::new(
                ix.index() as u32,
                attempt,
                self.agent_tx.clone(),
                self.backlog.clone(),
            ),
            instance,
            workspace,
            profile,
            usd_headroom,
            land_only: std::mem::take(&mut self.graph[ix].land_only),
        };
        // A panicking agent fails its own operation (ADR-0033 D4: an
        // unexpected error becomes an error result), never the run.
        let invoked = match std::panic::catch_unwind(AssertUnwindSafe(|| agent.invoke(inv))) {
            Ok(fut) => fut,
            Err(p) => {
                self.sched.running -= 1;
                self.gate.release(ix);
                self.fail(ix, panicked(&*p));
                return;
            }
        };
        self.inflight.push(Tagged {
            ix,
            attempt,
            fut: Some(invoked),
            waker: None,
        });
    }

    /// Stops `ix`'s running attempt alone: its agent's future is dropped
    /// (killing its processes). A scan of what is in flight: stopping is
    /// rare, and a map from node to attempt would cost every start.
    pub(super) fn stop_attempt(&mut self, ix: NodeIndex) {
        let attempt = self.graph[ix].attempt;
        if let Some(t) = self
            .inflight
            .iter_mut()
            .find(|t| t.ix == ix && t.attempt == attempt)
        {
            t.stop();
        }
        // Its questions go with it (the asker is told the attempt ended),
        // and so does its leave to land.
        self.questions.remove(&ix);
        self.landing.remove(&ix);
    }

    /// The conversation a new attempt continues: the one an attempt before
    /// it ended with. Taken once: the attempt names its session again.
    pub(super) fn carry_on(&mut self, ix: NodeIndex) -> Option<CarryOn> {
        let c = self.graph[ix].conversation.as_mut()?;
        let ended = c.ended.take()?;
        c.unheard = c.note.clone();
        let (by, note) = c.note.take().unzip();
        Some(CarryOn {
            session: c.session.clone(),
            ended,
            note,
            by,
        })
    }

    /// `<pred_op_id>_result` for each predecessor with a result, then the flow
    /// context merged in.
    fn context_for(&self, ix: NodeIndex) -> Map<String, Value> {
        let mut ctx = Map::new();
        for pred in self.graph.neighbors_directed(ix, Direction::Incoming) {
            let p = &self.graph[pred];
            if let Some(r) = &p.result {
                ctx.insert(format!("{}_result", p.op.op_id), Value::clone(r));
            }
        }
        for (k, v) in &self.flow_context {
            ctx.insert(k.clone(), v.clone());
        }
        ctx
    }

    pub(super) fn complete(&mut self, ix: NodeIndex, attempt: u32, outcome: AgentOutcome) {
        // Requests the agent put on its stream before finishing come first,
        // so a repeat of them in the result is recognised as a duplicate.
        while let Ok(msg) = self.agent_rx.try_recv() {
            self.agent_event(msg);
        }
        if self.graph[ix].status != NodeStatus::Running || self.graph[ix].attempt != attempt {
            return;
        }
        self.sched.running -= 1;
        self.gate.release(ix);
        self.inboxes.remove(&ix);
        self.questions.remove(&ix);
        let landed = self.landing.remove(&ix) == Some(attempt);
        if self.message_waits(ix) {
            // The operator spoke while it was in a tool call (or while its
            // work landed), and it ended before it came out: what they
            // said is still said, in the same conversation. Its answer
            // stands when its work landed: it is not said to be set aside.
            let ended = match &outcome {
                Ok(_) if landed => "it finished and its work landed on the run's branch before the operator's message reached it; the message is for what comes next".to_string(),
                Ok(_) => "it finished before the operator's message reached it; that answer was set aside and nothing of it landed".to_string(),
                Err(f) => format!("{}: {}", f.category, f.message),
            };
            self.talk_again(ix, &ended);
            return;
        }
        match outcome {
            Ok(value) => self.succeed(ix, value),
            Err(f) => self.failed_attempt(ix, f),
        }
    }

    pub(super) fn agent_event(&mut self, msg: AgentMsg) {
        self.backlog.took();
        let ix = NodeIndex::new(msg.node as usize);
        let Some(n) = self.graph.node_weight(ix) else {
            return;
        };
        // Events from an earlier attempt or a finished node are stale.
        if n.status != NodeStatus::Running || n.attempt != msg.attempt {
            return;
        }
        let (op_id, name, attempt) = (n.op.op_id, n.op.reference_id.clone(), n.attempt);
        // A review or a conflict the approval policy decides for nobody.
        let mut auto = None;
        let kind = match msg.event {
            AgentEvent::Emitted(v) => {
                if self.cfg.reactive {
                    self.emitted(ix, &v);
                }
                return;
            }
            AgentEvent::ResultRestatesStream => {
                self.adm.restates(ix, attempt);
                return;
            }
            AgentEvent::Listening(inbox) => {
                self.inboxes.insert(ix, (attempt, inbox));
                return;
            }
            AgentEvent::Asking(q) => {
                // One question waits at a time: a second never replaces
                // the first (whose asker would be denied unseen), it is
                // refused at once and leaves no record.
                if self
                    .questions
                    .get(&ix)
                    .is_some_and(|a| a.attempt == attempt)
                {
                    q.reply.answer(crate::kernel::agent::Answer {
                        allow: false,
                        why: Arc::from(
                            "another question of this operation waits for the operator; ask again once it is answered",
                        ),
                    });
                    return;
                }
                let (tool, kind) = (q.tool.clone(), q.kind);
                let (on, detail) = (q.on.clone(), q.detail.clone());
                auto = self.policy_answer(kind);
                let node = self.header(ix);
                let (seq, _) = self.emit_node(
                    ix,
                    SignalKind::PermissionAsked {
                        node,
                        attempt,
                        tool,
                        kind,
                        on,
                        detail,
                    },
                );
                self.questions.insert(ix, super::Asked { attempt, q, seq });
                self.after_event(ix, auto);
                return;
            }
            AgentEvent::Landed(work) => {
                let node = self.header(ix);
                SignalKind::Landed {
                    node,
                    attempt,
                    work,
                }
            }
            AgentEvent::AskEnded { id, why } => {
                match self.questions.get(&ix) {
                    Some(a) if a.attempt == attempt && a.q.id == id => {}
                    _ => return,
                }
                let Some(super::Asked { q, .. }) = self.questions.remove(&ix) else {
                    return;
                };
                let node = self.header(ix);
                SignalKind::PermissionAnswered {
                    node,
                    attempt,
                    tool: q.tool,
                    allowed: false,
                    by: Arc::from("timeout"),
                    reason: Some(why),
                    kind: q.kind,
                    on: q.on,
                }
            }
            AgentEvent::MayLand(reply) => {
                // Its work lands only if nothing the operator said waits
                // for it: a message disputes the attempt it was sent to.
                let go = !self.message_waits(ix);
                if go {
                    self.landing.insert(ix, attempt);
                }
                reply.answer(go);
                return;
            }
            AgentEvent::Activity { state, tool } => {
                if let Some(c) = self.graph[ix].conversation.as_mut() {
                    c.in_tool = state == ActivityState::Tool;
                    // Its model answers: what it was told was heard.
                    if state != ActivityState::Waiting && state != ActivityState::WaitingForWorker {
                        c.unheard = None;
                    }
                }
                SignalKind::AgentActivity {
                    op_id,
                    name,
                    attempt,
                    state,
                    tool,
                }
            }
            AgentEvent::Usage(usage) => {
                let usage = self.metered(ix, attempt, &usage);
                SignalKind::AgentUsage {
                    op_id,
                    name,
                    attempt,
                    usage,
                }
            }
            AgentEvent::Warning(message) => SignalKind::Warning {
                message,
                op_id: Some(op_id),
            },
            AgentEvent::Process { pgid } => SignalKind::AgentProcess {
                op_id,
                name,
                attempt,
                pgid,
            },
            AgentEvent::Session(session) => {
                // The same conversation goes on (what the operator said
                // and it has not heard yet stays with it), or a new one.
                match self.graph[ix].conversation.as_mut() {
                    Some(c) => {
                        c.session = session.clone();
                        c.in_tool = false;
                    }
                    None => {
                        self.graph[ix].conversation =
                            Some(Box::new(Conversation::new(session.clone())));
                    }
                }
                SignalKind::AgentSession {
                    op_id,
                    name,
                    attempt,
                    session,
                }
            }
        };
        if kind.node().is_some() {
            // A question moves it between lanes.
            self.emit_node(ix, kind);
        } else {
            self.bus.emit(kind);
        }
        self.after_event(ix, auto);
    }

    /// What follows an agent's event: the policy's answer to a question
    /// nobody is asked, and a message that waited for a tool call to end.
    fn after_event(&mut self, ix: NodeIndex, auto: Option<(bool, Option<String>)>) {
        if let Some((allow, reason)) = auto {
            let operator = std::mem::replace(&mut self.acting, Arc::from("policy"));
            self.answer_question(ix, allow, reason.as_deref());
            self.acting = operator;
        }
        // A message waited for the tool call to end: it has.
        if self.message_waits(ix)
            && self.graph[ix]
                .conversation
                .as_ref()
                .is_some_and(|c| !c.in_tool)
        {
            self.interrupt_to_say(
                ix,
                "the operator stopped it, after a tool call, to say something",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::super::RunConfig;
    use super::super::testkit::executor;
    use super::*;
    use crate::kernel::agent::{Agent, AgentResolver};

    fn failure(ex: &Executor, name: &str) -> Option<String> {
        ex.graph[ex.ix(name)]
            .result
            .as_ref()
            .map(|r| r["error"].to_string())
    }

    #[test]
    fn a_retry_carries_on_the_conversation_once_and_the_operators_retry_does_not() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        ex.agent_event(AgentMsg {
            node: a.index() as u32,
            attempt: 1,
            event: AgentEvent::Session(Arc::from("s-1")),
        });
        // Named but not ended: nothing to carry on yet.
        assert_eq!(ex.carry_on(a), None);
        ex.complete(
            a,
            1,
            Err(AgentFailure::new("rate_limit", "429 from the provider")),
        );
        assert_eq!(
            ex.graph[a].status,
            NodeStatus::Pending,
            "waits for its retry"
        );
        let carried = ex.carry_on(a).expect("the retry continues it");
        assert_eq!(&*carried.session, "s-1");
        assert_eq!(&*carried.ended, "rate_limit: 429 from the provider");
        assert_eq!(ex.carry_on(a), None, "taken once");
        // A failure that is not retried, then the operator's retry: a new
        // conversation.
        ex.graph[a].conversation.as_mut().unwrap().ended = Some(Arc::from("auth: 401"));
        ex.graph[a].status = NodeStatus::Failed;
        ex.sched.terminal += 1;
        ex.reopen(a, None);
        assert_eq!(ex.carry_on(a), None);
        assert!(ex.graph[a].conversation.is_none());
    }

    struct Panics;

    impl Agent for Panics {
        fn invoke(&self, _inv: Invocation) -> BoxFuture<AgentOutcome> {
            panic!("no such model");
        }
    }

    impl AgentResolver for Panics {
        fn resolve(&self, _name: &str) -> Option<Arc<dyn Agent>> {
            Some(Arc::new(Panics))
        }
    }

    #[test]
    fn an_agent_that_panics_fails_its_operation_and_gives_back_its_slot() {
        let (mut ex, tape) = executor(
            &[("a", &[], false), ("b", &[], false)],
            RunConfig::default(),
        );
        ex.agents = Arc::new(Panics);
        ex.begin();
        ex.advance();
        assert_eq!(ex.sched.running, 0);
        assert_eq!(ex.graph[ex.ix("a")].status, NodeStatus::Failed);
        assert!(
            failure(&ex, "a")
                .unwrap()
                .contains("the agent panicked: no such model"),
            "{:?}",
            failure(&ex, "a")
        );
        assert!(
            tape.lines().contains(&"failed b".to_string()),
            "the run goes on to start the next"
        );
    }

    /// Its futures hold the `Arc` while they live: its count says how many
    /// were not dropped.
    struct Held(Arc<()>);

    impl Agent for Held {
        fn invoke(&self, _inv: Invocation) -> BoxFuture<AgentOutcome> {
            let alive = self.0.clone();
            Box::pin(async move {
                let _alive = alive;
                std::future::pending::<()>().await;
                Ok(json!(null))
            })
        }
    }

    impl AgentResolver for Held {
        fn resolve(&self, _name: &str) -> Option<Arc<dyn Agent>> {
            Some(Arc::new(Held(self.0.clone())))
        }
    }

    #[tokio::test]
    async fn a_stopped_attempt_drops_its_future_at_once_and_then_reports_the_stop() {
        use futures_util::{FutureExt, StreamExt};
        let (mut ex, _tape) = executor(
            &[("a", &[], false), ("b", &[], false)],
            RunConfig::default(),
        );
        let alive = Arc::new(());
        ex.agents = Arc::new(Held(alive.clone()));
        ex.begin();
        ex.advance();
        // Ours, the resolver's and one for each running attempt.
        assert_eq!(Arc::strong_count(&alive), 4);
        // Both polled once: they wait. Then `a` is stopped while waiting.
        assert!(ex.inflight.next().now_or_never().is_none());
        let (a, b) = (ex.ix("a"), ex.ix("b"));
        ex.stop_attempt(a);
        assert_eq!(Arc::strong_count(&alive), 3, "a's future is gone");
        let stopped = ex.inflight.next().await.unwrap();
        assert_eq!((stopped.0, stopped.1), (a, 1));
        assert!(stopped.2.is_none());
        assert!(ex.inflight.next().now_or_never().is_none(), "b still runs");
        // Stopped before it is polled again, the same way.
        ex.stop_attempt(b);
        assert_eq!(Arc::strong_count(&alive), 2);
        assert!(ex.inflight.next().await.unwrap().2.is_none());
        assert!(ex.inflight.is_empty());
    }

    #[test]
    fn an_agent_that_is_not_there_fails_only_its_operation() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        let a = ex.ix("a");
        Arc::make_mut(&mut ex.graph[a].op).metadata.agent = Arc::from("missing");
        ex.begin();
        ex.advance();
        assert_eq!(ex.graph[a].status, NodeStatus::Failed);
        assert_eq!(ex.sched.running, 0);
        assert!(
            failure(&ex, "a")
                .unwrap()
                .contains(r#"no agent named \"missing\""#)
        );
    }

    #[test]
    fn a_completion_of_an_earlier_attempt_is_stale() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let attempt = ex.graph[a].attempt;
        ex.complete(a, attempt - 1, Ok(json!(1)));
        assert_eq!(ex.graph[a].status, NodeStatus::Running);
        assert_eq!(ex.sched.running, 1);
        ex.complete(a, attempt, Ok(json!(2)));
        assert_eq!(ex.graph[a].status, NodeStatus::Succeeded);
        assert_eq!(ex.sched.running, 0);
    }

    #[test]
    fn the_context_has_each_predecessor_result_and_the_flow_context_wins() {
        let mut cfg = RunConfig::default();
        cfg.context.insert("goal".into(), json!("ship"));
        let (mut ex, _tape) = executor(&[("a", &[], false), ("b", &["a"], false)], cfg);
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let attempt = ex.graph[a].attempt;
        ex.complete(a, attempt, Ok(json!({"answer": 42})));
        let ctx = ex.context_for(ex.ix("b"));
        let key = format!("{}_result", ex.graph[a].op.op_id);
        assert_eq!(ctx[&key], json!({"answer": 42}));
        assert_eq!(ctx["goal"], json!("ship"));
        assert_eq!(ctx.len(), 2);
    }
}
