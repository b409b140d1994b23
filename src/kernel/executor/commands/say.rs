//! The operator talks to an operation's agent, in the conversation its CLI
//! keeps: a running attempt is stopped at a safe point (not inside a tool
//! call) and the next one continues its session told what the operator
//! said; a failed operation — or a succeeded one nothing has built on yet —
//! is sent back, a new attempt in its session with the operator's note.
//! Only a conversation a CLI named can be spoken to.

use std::sync::Arc;

use petgraph::stable_graph::NodeIndex;

use super::super::super::agent::{Answer, QuestionKind};
use super::super::super::command::CommandError;
use super::super::super::control::ApprovalPolicy;
use super::super::super::signal::SignalKind;
use super::super::super::snapshot::NodeStatus;
use super::super::Executor;

/// How a state reads in a refusal.
fn state_word(s: NodeStatus) -> &'static str {
    match s {
        NodeStatus::Running => "running",
        NodeStatus::Failed => "failed",
        NodeStatus::Succeeded => "succeeded",
        NodeStatus::Escalated => "escalated",
        NodeStatus::Skipped => "skipped",
        NodeStatus::AwaitingApproval => "awaiting approval",
        _ => "not started",
    }
}

impl Executor {
    pub(super) fn say(&mut self, ix: NodeIndex, text: &str) -> Result<(), CommandError> {
        if self.cancelled {
            return Err(CommandError::RunFinished);
        }
        let text = text.trim();
        if text.is_empty() {
            return Err(CommandError::BadRequest(
                "say needs words to say: say OP TEXT".into(),
            ));
        }
        if text.contains('\0') {
            return Err(CommandError::BadRequest(
                "say: the message holds a NUL character, which no agent's input can carry".into(),
            ));
        }
        let by = self.acting.clone();
        let refuse = |n: &super::super::node::Node, why| CommandError::CannotSay {
            name: n.op.reference_id.to_string(),
            state: state_word(n.status),
            why,
        };
        // Work waiting for review, or that clashed as it landed: sent back
        // at once, in its conversation; nothing of it lands.
        let n = &self.graph[ix];
        let asked = self
            .questions
            .get(&ix)
            .filter(|a| a.attempt == n.attempt && !a.q.kind.is_permission())
            .map(|a| a.q.kind);
        if let Some(kind) = asked {
            if n.conversation.is_none() {
                return Err(refuse(
                    n,
                    "its agent has named no conversation to send it back into (its CLI names none)",
                ));
            }
            self.send_back_question(ix, kind, by, text);
            return Ok(());
        }
        // An attempt that reads messages live takes it where it is.
        if n.status == NodeStatus::Running && self.deliver(ix, text) {
            return Ok(());
        }
        let n = &self.graph[ix];
        let refuse = |why| refuse(n, why);
        // A succeeded one is sent back only while what depends on it has
        // not taken its result (every dependant still waits).
        let built_on = n.status == NodeStatus::Succeeded
            && self
                .graph
                .neighbors_directed(ix, petgraph::Direction::Outgoing)
                .any(|t| self.graph[t].status != NodeStatus::Pending);
        // An attempt about to continue the conversation (sent back, told
        // something, not started yet): it is told this too, after.
        let continuing = matches!(n.status, NodeStatus::Pending | NodeStatus::Ready)
            && n.conversation.as_ref().is_some_and(|c| c.ended.is_some());
        let landing = self.landing.get(&ix) == Some(&n.attempt);
        match n.status {
            _ if continuing => {
                let c = self.graph[ix].conversation.as_mut().expect("checked above");
                c.add_note(by, text);
                Ok(())
            }
            NodeStatus::Running | NodeStatus::Failed | NodeStatus::Succeeded
                if n.conversation.is_none() =>
            {
                Err(refuse(
                    "its agent has named no conversation to continue (not yet, or its CLI names none)",
                ))
            }
            NodeStatus::Succeeded if built_on => Err(refuse(
                "what depends on it has already taken its result: only a succeeded operation nothing has built on yet can be sent back",
            )),
            NodeStatus::Running => {
                let c = self.graph[ix].conversation.as_mut().expect("checked above");
                // Told before and not heard yet (stopped before its model
                // answered): said again, first, so nothing said is lost.
                c.add_note(by, text);
                c.pending = true;
                // Its work is landing: the message waits for it to end.
                if !c.in_tool && !landing {
                    self.interrupt_to_say(ix, "the operator stopped it to say something");
                }
                Ok(())
            }
            NodeStatus::Failed | NodeStatus::Succeeded => {
                let error = n.error();
                let succeeded = n.status == NodeStatus::Succeeded;
                let on = self.retried_on(ix);
                let mut c = self.graph[ix].conversation.take().expect("checked above");
                c.ended = Some(Arc::from(match error {
                    _ if succeeded => {
                        "it had finished; the operator sent it back to do more".to_string()
                    }
                    Some(e) => format!("it failed: {e}; the operator sent it back"),
                    None => "it failed; the operator sent it back".to_string(),
                }));
                c.rejected = None;
                c.note = None;
                c.add_note(by.clone(), text);
                c.pending = false;
                self.retried_by = Some(super::super::RetriedBy {
                    by,
                    note: Some(Arc::from(text)),
                    on,
                });
                self.reopen_failed(ix);
                // The operator's retry begins a new conversation; sending
                // back continues this one.
                self.graph[ix].conversation = Some(c);
                Ok(())
            }
            _ => Err(refuse(
                "only a running operation can be talked to, and a failed or succeeded one sent back",
            )),
        }
    }

    /// A review or a conflict sent back to its agent with the operator's
    /// note: the question is answered "sent back" (nothing lands), the
    /// attempt ends, and the next continues its conversation told why.
    fn send_back_question(&mut self, ix: NodeIndex, kind: QuestionKind, by: Arc<str>, text: &str) {
        let asked = self.questions.remove(&ix);
        let what = asked.as_ref().and_then(|a| a.q.on.clone());
        if let Some(a) = asked {
            // Its asker is told, though its attempt ends now.
            a.q.reply.answer(Answer {
                allow: false,
                why: Arc::from(format!("the operator ({by}) sent it back: {text}")),
            });
        }
        let (ended, on) = match kind {
            QuestionKind::Conflict => (
                "your work clashed with what landed on the run's branch before it, and did not land; the operator sent it back",
                "merge conflict",
            ),
            _ => (
                "the operator reviewed your work and sent it back; it did not land",
                "review",
            ),
        };
        let on = match what {
            Some(w) => format!("{on} of {w}"),
            None => on.to_string(),
        };
        if let Some(c) = self.graph[ix].conversation.as_mut() {
            c.add_note(by.clone(), text);
        }
        self.retried_by = Some(super::super::RetriedBy {
            by,
            note: Some(Arc::from(text)),
            on: Some(Arc::from(on)),
        });
        self.interrupt_to_say(ix, ended);
    }

    /// What a retry or a send-back of `ix` answers, in words: `failed:
    /// merge_conflict`.
    pub(in crate::kernel::executor) fn retried_on(&self, ix: NodeIndex) -> Option<Arc<str>> {
        let n = &self.graph[ix];
        let first = n
            .error()
            .and_then(|e| e.lines().next().map(str::to_string))
            .unwrap_or_else(|| "no error given".into());
        match n.status {
            // A gate denied before it ran failed with no attempt.
            NodeStatus::Failed if n.attempt == 0 => Some(Arc::from(format!("failed: {first}"))),
            NodeStatus::Failed => Some(Arc::from(format!("attempt {} failed: {first}", n.attempt))),
            NodeStatus::Escalated => Some(Arc::from(format!("attempt {} escalated", n.attempt))),
            NodeStatus::Succeeded => Some(Arc::from(format!("attempt {} succeeded", n.attempt))),
            _ => None,
        }
    }

    /// Hands `text` to `ix`'s running attempt where it reads messages live
    /// (claude's stream-json input): it takes it at its next turn, in the
    /// same process and conversation. `false` where it does not, or no
    /// longer does (its input was closed as its last turn ended).
    fn deliver(&mut self, ix: NodeIndex, text: &str) -> bool {
        let attempt = self.graph[ix].attempt;
        match self.inboxes.get(&ix) {
            Some((a, inbox)) if *a == attempt => {
                if inbox.say(Arc::from(text)) {
                    return true;
                }
                self.inboxes.remove(&ix);
                false
            }
            _ => false,
        }
    }

    /// Stops `ix`'s running attempt now and starts the next, which
    /// continues its conversation told what the operator said.
    pub(in crate::kernel::executor) fn interrupt_to_say(&mut self, ix: NodeIndex, ended: &str) {
        self.stop_attempt(ix);
        self.inboxes.remove(&ix);
        self.sched.running -= 1;
        self.gate.release(ix);
        self.talk_again(ix, ended);
    }

    /// `ix`'s attempt is over (stopped, or ended by itself with a message
    /// still to deliver): a new attempt waits to start at once, continuing
    /// the conversation. It begins a new series: the retry policy counts
    /// from the operator's word.
    pub(in crate::kernel::executor) fn talk_again(&mut self, ix: NodeIndex, ended: &str) {
        let n = &mut self.graph[ix];
        n.status = NodeStatus::Pending;
        n.result = None;
        n.series_from = n.attempt;
        let mut note = None;
        if let Some(c) = n.conversation.as_mut() {
            c.ended = Some(Arc::from(ended));
            c.pending = false;
            c.in_tool = false;
            note = c.note.clone();
        }
        if let Some((by, note)) = note
            && self.retried_by.is_none()
        {
            self.retried_by = Some(super::super::RetriedBy {
                by,
                note: Some(note),
                on: Some(Arc::from(ended)),
            });
        }
        self.emit_retried(ix, None);
        self.enqueue(ix);
        self.round_active = true;
    }

    /// What the approval policy answers to a question of `kind`, when it is
    /// not the operator's: a review under `--approve all` lands; a conflict
    /// has nobody to resolve it there; under a policy that denies (nobody
    /// left on a headless run's stdin) neither waits. A permission question
    /// is always the operator's (its ToolSet's `ask_timeout` ends it).
    pub(in crate::kernel::executor) fn policy_answer(
        &self,
        kind: QuestionKind,
    ) -> Option<(bool, Option<String>)> {
        match (&self.cfg.approvals, kind) {
            (_, QuestionKind::Permission) | (ApprovalPolicy::Ask, _) => None,
            (ApprovalPolicy::ApproveAll, QuestionKind::Review) => Some((true, None)),
            (ApprovalPolicy::ApproveAll, QuestionKind::Conflict) => Some((
                false,
                Some("nobody is there to resolve it (approvals are given by policy)".into()),
            )),
            (ApprovalPolicy::DenyAll { reason }, _) => Some((false, Some(reason.to_string()))),
        }
    }

    /// Answers the permission question `ix`'s running attempt asked, if it
    /// asked one: allowed, or denied with `reason`; said with who answered.
    pub(in crate::kernel::executor) fn answer_question(
        &mut self,
        ix: NodeIndex,
        allow: bool,
        reason: Option<&str>,
    ) -> bool {
        let attempt = self.graph[ix].attempt;
        if self.graph[ix].status != NodeStatus::Running
            || self.questions.get(&ix).is_none_or(|a| a.attempt != attempt)
        {
            return false;
        }
        let Some(super::super::Asked { q, .. }) = self.questions.remove(&ix) else {
            return false;
        };
        let by = self.acting.clone();
        let why = match reason {
            Some(r) if &*by == "policy" => format!("nobody was there to decide: {r}"),
            Some(r) => format!("the operator ({by}) denied it: {r}"),
            None => format!("allowed by {by}"),
        };
        // A question whose asker stopped waiting (its time ran out just
        // now) is answered on the record all the same.
        q.reply.answer(Answer {
            allow,
            why: Arc::from(why),
        });
        // A review rejected with a reason: a later retry continues the
        // conversation, told it.
        if q.kind == QuestionKind::Review
            && !allow
            && let Some(r) = reason
            && let Some(c) = self.graph[ix].conversation.as_mut()
        {
            c.rejected = Some((by.clone(), Arc::from(r)));
        }
        let node = self.header(ix);
        self.emit_node(
            ix,
            SignalKind::PermissionAnswered {
                node,
                attempt,
                tool: q.tool,
                allowed: allow,
                by,
                reason: reason.map(Arc::from),
                kind: q.kind,
                on: q.on,
            },
        );
        true
    }

    /// Whether a message waits for `ix`'s attempt.
    pub(in crate::kernel::executor) fn message_waits(&self, ix: NodeIndex) -> bool {
        self.graph[ix]
            .conversation
            .as_ref()
            .is_some_and(|c| c.pending)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::super::super::super::agent::{ActivityState, AgentEvent, AgentFailure, AgentMsg};
    use super::super::super::super::command::{CommandError, Request};
    use super::super::super::RunConfig;
    use super::super::super::testkit::executor;
    use super::*;

    fn say(op: &str, text: &str) -> Request {
        Request::Say {
            on: None,
            op: op.into(),
            text: vec![text.into()],
        }
    }

    fn event(ex: &mut Executor, ix: NodeIndex, attempt: u32, event: AgentEvent) {
        ex.agent_event(AgentMsg {
            node: ix.index() as u32,
            attempt,
            event,
        });
    }

    fn running_with_session() -> (Executor, NodeIndex) {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        event(&mut ex, a, 1, AgentEvent::Session(Arc::from("s-1")));
        (ex, a)
    }

    #[test]
    fn a_running_agent_out_of_a_tool_is_stopped_and_continues_with_the_message() {
        let (mut ex, a) = running_with_session();
        ex.apply_by(say("a", "use the other parser"), Arc::from("ctl (ana)"))
            .unwrap();
        assert_eq!(
            ex.graph[a].status,
            NodeStatus::Ready,
            "the next attempt waits to start"
        );
        assert_eq!(ex.sched.running, 0);
        let c = ex.carry_on(a).expect("it continues its conversation");
        assert_eq!(&*c.session, "s-1");
        assert_eq!(c.note.as_deref(), Some("use the other parser"));
        assert_eq!(c.by.as_deref(), Some("ctl (ana)"));
        assert_eq!(&*c.ended, "the operator stopped it to say something");
    }

    #[test]
    fn a_message_waits_for_the_tool_call_to_end() {
        let (mut ex, a) = running_with_session();
        event(
            &mut ex,
            a,
            1,
            AgentEvent::Activity {
                state: ActivityState::Tool,
                tool: Some(Arc::from("Bash")),
            },
        );
        ex.apply_by(say("a", "first"), Arc::from("ana")).unwrap();
        ex.apply_by(say("a", "second"), Arc::from("ana")).unwrap();
        assert_eq!(
            ex.graph[a].status,
            NodeStatus::Running,
            "not inside its tool call"
        );
        event(
            &mut ex,
            a,
            1,
            AgentEvent::Activity {
                state: ActivityState::Thinking,
                tool: None,
            },
        );
        assert_eq!(ex.graph[a].status, NodeStatus::Ready);
        let c = ex.carry_on(a).unwrap();
        assert_eq!(c.note.as_deref(), Some("first\n\nsecond"), "both, in order");
        assert!(c.ended.contains("after a tool call"));
    }

    #[test]
    fn an_attempt_that_ends_with_a_message_waiting_continues_anyway() {
        let (mut ex, a) = running_with_session();
        event(
            &mut ex,
            a,
            1,
            AgentEvent::Activity {
                state: ActivityState::Tool,
                tool: None,
            },
        );
        ex.apply_by(say("a", "also add tests"), Arc::from("ana"))
            .unwrap();
        ex.complete(a, 1, Ok(serde_json::json!({"summary": "done"})));
        assert_eq!(
            ex.graph[a].status,
            NodeStatus::Ready,
            "not succeeded: told more"
        );
        assert!(ex.graph[a].result.is_none());
        let c = ex.carry_on(a).unwrap();
        assert_eq!(c.note.as_deref(), Some("also add tests"));
        assert!(c.ended.contains("set aside"), "{}", c.ended);
    }

    #[test]
    fn a_failed_operation_is_sent_back_in_its_conversation() {
        let (mut ex, a) = running_with_session();
        ex.complete(a, 1, Err(AgentFailure::new("auth", "401: bad key")));
        assert_eq!(ex.graph[a].status, NodeStatus::Failed);
        ex.apply_by(say("a", "the key is fixed, try again"), Arc::from("ana"))
            .unwrap();
        assert_eq!(ex.graph[a].status, NodeStatus::Pending, "waits again");
        let c = ex.carry_on(a).expect("sent back: the same conversation");
        assert_eq!(&*c.session, "s-1");
        assert_eq!(c.note.as_deref(), Some("the key is fixed, try again"));
        assert!(c.ended.starts_with("it failed: "), "{}", c.ended);
    }

    #[test]
    fn a_succeeded_operation_is_sent_back_only_while_nothing_built_on_it() {
        let (mut ex, _tape) = executor(
            &[("a", &[], false), ("b", &["a"], false), ("c", &[], false)],
            RunConfig::default(),
        );
        ex.begin();
        ex.advance();
        let (a, c) = (ex.ix("a"), ex.ix("c"));
        for ix in [a, c] {
            event(&mut ex, ix, 1, AgentEvent::Session(Arc::from("s-1")));
            ex.complete(ix, 1, Ok(serde_json::json!({"summary": "done"})));
        }
        ex.advance();
        // b took a's result: a is not sent back.
        assert_ne!(ex.graph[ex.ix("b")].status, NodeStatus::Pending);
        let e = ex.apply_by(say("a", "more"), Arc::from("ana")).unwrap_err();
        assert!(e.to_string().contains("already taken its result"), "{e}");
        // Nothing waits on c: it is, in its conversation.
        ex.apply_by(say("c", "also update the docs"), Arc::from("ana"))
            .unwrap();
        assert_eq!(ex.graph[c].status, NodeStatus::Pending);
        assert!(ex.graph[c].result.is_none());
        let carried = ex.carry_on(c).unwrap();
        assert_eq!(carried.note.as_deref(), Some("also update the docs"));
        assert!(carried.ended.contains("had finished"), "{}", carried.ended);
    }

    #[test]
    fn what_has_no_conversation_or_is_done_cannot_be_spoken_to() {
        let (mut ex, _tape) = executor(
            &[("a", &[], false), ("b", &["a"], false)],
            RunConfig::default(),
        );
        ex.begin();
        ex.advance();
        let refused = |r: Result<_, CommandError>| match r {
            Err(e @ CommandError::CannotSay { .. }) => e.to_string(),
            other => panic!("{other:?}"),
        };
        let e = refused(ex.apply_by(say("a", "hi"), Arc::from("ana")));
        assert!(
            e.starts_with("a is running; its agent has named no conversation"),
            "{e}"
        );
        let e = refused(ex.apply_by(say("b", "hi"), Arc::from("ana")));
        assert!(
            e.starts_with("b is not started; only a running operation can be talked to, and a failed or succeeded one sent back"),
            "{e}"
        );
        assert!(matches!(
            ex.apply_by(say("a", "  "), Arc::from("ana")),
            Err(CommandError::BadRequest(_))
        ));
    }
}

#[cfg(test)]
mod question_tests {
    use std::sync::Arc;

    use super::super::super::super::agent::{AgentEvent, AgentMsg, Question, Replier};
    use super::super::super::super::command::{CommandError, Request};
    use super::super::super::RunConfig;
    use super::super::super::testkit::executor;
    use super::*;
    use crate::kernel::Lane;

    fn ask(ex: &mut Executor, ix: NodeIndex, id: u32) -> tokio::sync::oneshot::Receiver<Answer> {
        ask_of(ex, ix, id, QuestionKind::Permission)
    }

    fn ask_of(
        ex: &mut Executor,
        ix: NodeIndex,
        id: u32,
        kind: QuestionKind,
    ) -> tokio::sync::oneshot::Receiver<Answer> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        ex.agent_event(AgentMsg {
            node: ix.index() as u32,
            attempt: 1,
            event: AgentEvent::Asking(Question {
                on: None,
                detail: None,
                id,
                tool: Arc::from("Bash(rm -rf build)"),
                kind,
                reply: Replier::new(tx),
            }),
        });
        rx
    }

    /// A message or a reason holding a NUL is refused at the command,
    /// and nothing changes: no agent's input can carry it.
    #[test]
    fn a_nul_is_refused_at_the_command() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let mut rx = ask(&mut ex, a, 1);
        tape.take();
        for req in [
            Request::Say {
                op: "a".into(),
                on: None,
                text: vec!["stop\0now".into()],
            },
            Request::Deny {
                op: "a".into(),
                on: None,
                reason: vec!["no\0way".into()],
            },
        ] {
            let err = ex.apply_by(req, Arc::from("ana")).unwrap_err();
            assert!(
                matches!(&err, CommandError::BadRequest(w) if w.contains("NUL")),
                "{err:?}"
            );
        }
        assert!(rx.try_recv().is_err(), "the question still waits");
        assert!(tape.take().is_empty(), "nothing recorded");
    }

    /// A second question while one waits is refused at once and leaves
    /// no record; the first still waits for the operator.
    #[test]
    fn a_second_question_never_replaces_the_one_waiting() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let mut first = ask(&mut ex, a, 1);
        tape.take();
        let mut second = ask(&mut ex, a, 2);
        let no = second.try_recv().unwrap();
        assert!(
            !no.allow && no.why.contains("another question"),
            "{}",
            no.why
        );
        assert!(first.try_recv().is_err(), "the first still waits");
        assert!(tape.take().is_empty(), "nothing recorded for the second");
        assert_eq!(ex.questions[&a].q.id, 1);
    }

    #[test]
    fn a_conflict_is_resolved_by_resolve_and_nothing_else_is() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let mut rx = ask(&mut ex, a, 1);
        // A permission question is not a conflict.
        assert_eq!(
            ex.apply_by(
                Request::Resolve {
                    op: "a".into(),
                    on: None
                },
                Arc::from("ana")
            ),
            Err(CommandError::NoConflict { name: "a".into() })
        );
        assert!(rx.try_recv().is_err(), "still unanswered");
        ex.stop_attempt(a);
        let mut rx = ask_of(&mut ex, a, 2, QuestionKind::Conflict);
        assert_eq!(ex.graph[a].lane, Lane::AwaitingApproval);
        ex.apply_by(
            Request::Resolve {
                op: "a".into(),
                on: None,
            },
            Arc::from("ana"),
        )
        .unwrap();
        assert!(rx.try_recv().unwrap().allow);
        let log = tape.take();
        assert_eq!(
            log.iter()
                .filter(|l| l.contains("permission_answered"))
                .count(),
            1,
            "only the conflict was answered: {log:?}"
        );
        assert!(ex.questions.is_empty());
    }

    #[test]
    fn reviews_and_conflicts_are_answered_by_the_policy_when_nobody_is_asked() {
        use crate::kernel::control::ApprovalPolicy;
        // --approve all: a review lands, a conflict has nobody to resolve it.
        let cfg = RunConfig {
            approvals: ApprovalPolicy::ApproveAll,
            ..RunConfig::default()
        };
        let (mut ex, _tape) = executor(&[("a", &[], false)], cfg);
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let mut rx = ask_of(&mut ex, a, 1, QuestionKind::Review);
        assert!(rx.try_recv().unwrap().allow);
        let mut rx = ask_of(&mut ex, a, 2, QuestionKind::Conflict);
        let no = rx.try_recv().unwrap();
        assert!(!no.allow && no.why.contains("nobody"), "{}", no.why);
        // A permission question still waits for a person.
        let mut rx = ask(&mut ex, a, 3);
        assert!(rx.try_recv().is_err());
        ex.stop_attempt(a);
        // Asking the operator: a review waits, until nobody is left to.
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let mut rx = ask_of(&mut ex, a, 1, QuestionKind::Review);
        assert!(rx.try_recv().is_err());
        ex.set_approval_policy(ApprovalPolicy::DenyAll {
            reason: Arc::from("no operator"),
        });
        let no = rx.try_recv().unwrap();
        assert!(!no.allow && no.why.contains("no operator"), "{}", no.why);
        assert_eq!(ex.graph[a].lane, Lane::Running);
    }

    #[test]
    fn a_question_waits_in_the_approval_lane_for_the_operators_answer() {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        tape.take();
        // Nothing asked: permit says so.
        assert_eq!(
            ex.apply_by(
                Request::Permit {
                    op: "a".into(),
                    on: None
                },
                Arc::from("ana")
            ),
            Err(CommandError::NoQuestion { name: "a".into() })
        );
        let mut rx = ask(&mut ex, a, 1);
        assert_eq!(
            ex.graph[a].lane,
            Lane::AwaitingApproval,
            "shown where decisions wait"
        );
        assert_eq!(ex.graph[a].status, NodeStatus::Running, "and still running");
        ex.apply_by(
            Request::Approve {
                op: "a".into(),
                on: None,
            },
            Arc::from("ana"),
        )
        .unwrap();
        let answer = rx.try_recv().expect("answered");
        assert!(answer.allow && answer.why.contains("ana"));
        assert_eq!(ex.graph[a].lane, Lane::Running, "it runs on");
        // Denied, with the reason the agent is told.
        let mut rx = ask(&mut ex, a, 2);
        ex.apply_by(
            Request::Deny {
                on: None,
                op: "a".into(),
                reason: vec!["not here".into()],
            },
            Arc::from("ana"),
        )
        .unwrap();
        let answer = rx.try_recv().unwrap();
        assert!(
            !answer.allow && answer.why.ends_with("denied it: not here"),
            "{}",
            answer.why
        );
        let log = tape.take();
        assert!(
            log.iter().any(|l| l.contains("permission_asked")),
            "{log:?}"
        );
        assert_eq!(
            log.iter()
                .filter(|l| l.contains("permission_answered"))
                .count(),
            2,
            "{log:?}"
        );
    }

    #[test]
    fn a_question_that_timed_out_is_said_denied_and_a_late_answer_finds_none() {
        let (mut ex, _tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        let _rx = ask(&mut ex, a, 7);
        ex.agent_event(AgentMsg {
            node: a.index() as u32,
            attempt: 1,
            event: AgentEvent::AskEnded {
                id: 7,
                why: Arc::from("no answer within 3 s: denied"),
            },
        });
        assert_eq!(ex.graph[a].lane, Lane::Running);
        assert!(matches!(
            ex.apply_by(
                Request::Permit {
                    op: "a".into(),
                    on: None
                },
                Arc::from("ana")
            ),
            Err(CommandError::NoQuestion { .. })
        ));
        // An attempt that stops takes its open question with it.
        let _rx = ask(&mut ex, a, 8);
        ex.stop_attempt(a);
        assert!(ex.questions.is_empty());
    }
}

/// Issue 55: the review loop holds — a review or conflict is sent back at
/// once in its conversation, a message keeps the work it disputes from
/// landing and is never said to set aside work that landed, two messages
/// in quick succession both reach the agent, and a review rejected with a
/// reason is told to a later retry.
#[cfg(test)]
mod loop_tests {
    use std::sync::Arc;

    use super::super::super::super::agent::{
        ActivityState, AgentEvent, AgentFailure, AgentMsg, Question, Replier,
    };
    use super::super::super::super::command::Request;
    use super::super::super::RunConfig;
    use super::super::super::testkit::executor;
    use super::*;

    fn event(ex: &mut Executor, ix: NodeIndex, event: AgentEvent) {
        let attempt = ex.graph[ix].attempt;
        ex.agent_event(AgentMsg {
            node: ix.index() as u32,
            attempt,
            event,
        });
    }

    fn say(ex: &mut Executor, text: &str) {
        ex.apply_by(
            Request::Say {
                op: "a".into(),
                on: None,
                text: vec![text.into()],
            },
            Arc::from("ana"),
        )
        .unwrap();
    }

    /// `a` running with a conversation its CLI named.
    fn running() -> (Executor, NodeIndex, super::super::super::testkit::Tape) {
        let (mut ex, tape) = executor(&[("a", &[], false)], RunConfig::default());
        ex.begin();
        ex.advance();
        let a = ex.ix("a");
        event(&mut ex, a, AgentEvent::Session(Arc::from("s-1")));
        (ex, a, tape)
    }

    fn review(ex: &mut Executor, a: NodeIndex) -> tokio::sync::oneshot::Receiver<Answer> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        event(
            ex,
            a,
            AgentEvent::Asking(Question {
                id: 9,
                tool: Arc::from("1 file changed"),
                kind: QuestionKind::Review,
                on: Some(Arc::from("b1..t1")),
                detail: None,
                reply: Replier::new(tx),
            }),
        );
        rx
    }

    fn may_land(ex: &mut Executor, a: NodeIndex) -> bool {
        let (tx, mut rx) = tokio::sync::oneshot::channel();
        event(ex, a, AgentEvent::MayLand(Replier::new(tx)));
        rx.try_recv().unwrap_or(true)
    }

    #[test]
    fn a_review_said_to_is_sent_back_at_once_in_its_conversation() {
        let (mut ex, a, tape) = running();
        let mut rx = review(&mut ex, a);
        tape.take();
        say(&mut ex, "use blue");
        let told = rx.try_recv().expect("the asker is answered");
        assert!(!told.allow && told.why.contains("sent it back: use blue"));
        assert_ne!(ex.graph[a].status, NodeStatus::Running, "its attempt ended");
        let c = ex.carry_on(a).expect("the same conversation");
        assert_eq!(c.note.as_deref(), Some("use blue"));
        assert!(
            c.ended.contains("sent it back; it did not land"),
            "{}",
            c.ended
        );
        let sigs = tape.0.lock().unwrap().clone();
        let retried = sigs
            .iter()
            .map(|s| serde_json::to_value(&**s).unwrap())
            .find(|v| v["type"] == "retried")
            .expect("retried");
        assert_eq!(retried["by"], "ana");
        assert_eq!(retried["note"], "use blue");
        assert_eq!(retried["on"], "review of b1..t1");
    }

    #[test]
    fn a_message_keeps_the_work_it_disputes_from_landing() {
        let (mut ex, a, _tape) = running();
        event(
            &mut ex,
            a,
            AgentEvent::Activity {
                state: ActivityState::Tool,
                tool: None,
            },
        );
        say(&mut ex, "not that file");
        assert!(!may_land(&mut ex, a), "a message waits: it does not land");
        ex.complete(a, 1, Ok(serde_json::json!({"ok": true})));
        let c = ex.carry_on(a).unwrap();
        assert!(
            c.ended.contains("set aside and nothing of it landed"),
            "{}",
            c.ended
        );
        assert_eq!(c.note.as_deref(), Some("not that file"));
    }

    #[test]
    fn work_that_landed_before_the_message_is_never_said_to_be_set_aside() {
        let (mut ex, a, _tape) = running();
        assert!(may_land(&mut ex, a), "nothing waits: it lands");
        // Said while it lands: the attempt is not stopped halfway.
        say(&mut ex, "also update the docs");
        assert_eq!(ex.graph[a].status, NodeStatus::Running);
        ex.complete(a, 1, Ok(serde_json::json!({"ok": true})));
        let c = ex.carry_on(a).expect("it goes on, told");
        assert!(
            c.ended.contains("its work landed") && !c.ended.contains("set aside"),
            "{}",
            c.ended
        );
        assert_eq!(c.note.as_deref(), Some("also update the docs"));
    }

    #[test]
    fn two_messages_in_quick_succession_both_reach_the_agent_in_order() {
        let (mut ex, a, _tape) = running();
        let _rx = review(&mut ex, a);
        say(&mut ex, "first");
        ex.advance();
        assert_eq!(ex.graph[a].status, NodeStatus::Running, "attempt 2 began");
        assert_eq!(ex.graph[a].attempt, 2);
        // Attempt 2 was told "first"; stopped before its model answered,
        // the next attempt is told it again, then the second.
        say(&mut ex, "second");
        let c = ex.carry_on(a).unwrap();
        assert_eq!(c.note.as_deref(), Some("first\n\nsecond"));
        // Its CLI names the conversation again as attempt 3 begins: what
        // it was told is still not heard.
        ex.advance();
        event(&mut ex, a, AgentEvent::Session(Arc::from("s-1")));
        assert_eq!(ex.graph[a].attempt, 3);
        say(&mut ex, "again");
        assert_eq!(
            ex.carry_on(a).unwrap().note.as_deref(),
            Some("first\n\nsecond\n\nagain")
        );
        // Once its model is seen answering, what it was told was heard.
        ex.advance();
        event(&mut ex, a, AgentEvent::Session(Arc::from("s-1")));
        assert_eq!(ex.graph[a].attempt, 4);
        event(
            &mut ex,
            a,
            AgentEvent::Activity {
                state: ActivityState::Thinking,
                tool: None,
            },
        );
        event(
            &mut ex,
            a,
            AgentEvent::Activity {
                state: ActivityState::Tool,
                tool: None,
            },
        );
        say(&mut ex, "third");
        event(
            &mut ex,
            a,
            AgentEvent::Activity {
                state: ActivityState::Writing,
                tool: None,
            },
        );
        let c = ex.carry_on(a).unwrap();
        assert_eq!(
            c.note.as_deref(),
            Some("third"),
            "heard ones are not said again"
        );
    }

    #[test]
    fn a_review_rejected_with_a_reason_is_told_to_a_later_retry() {
        let (mut ex, a, _tape) = running();
        let _rx = review(&mut ex, a);
        ex.apply_by(
            Request::Deny {
                op: "a".into(),
                on: None,
                reason: vec!["no new dependencies".into()],
            },
            Arc::from("ana"),
        )
        .unwrap();
        ex.complete(
            a,
            1,
            Err(AgentFailure::new(
                "review_rejected",
                "its work did not land",
            )),
        );
        assert_eq!(ex.graph[a].status, NodeStatus::Failed);
        ex.apply_by(
            Request::Retry {
                op: "a".into(),
                on: None,
            },
            Arc::from("bo"),
        )
        .unwrap();
        let c = ex
            .carry_on(a)
            .expect("the retry continues its conversation");
        assert_eq!(&*c.session, "s-1");
        assert_eq!(c.note.as_deref(), Some("no new dependencies"));
        assert_eq!(c.by.as_deref(), Some("ana"));
        assert!(
            c.ended.contains("rejected your work at review"),
            "{}",
            c.ended
        );
    }
}
