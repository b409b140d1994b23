//! One operation as the executor holds it: its definition, where it stands
//! and the few moments the views need, kept small so a 100 000-node graph
//! stays in cache.

use std::sync::Arc;

use serde_json::Value;

use super::super::graph::{Condition, OpId, Operation};
use super::super::lane::Lane;
use super::super::snapshot::NodeStatus;

/// Where an approval gate stands.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Approval {
    NotRequired,
    Undecided,
    Approved,
    Denied,
}

pub(super) struct Node {
    /// Shared with the checkpoint's projection of the same operation: a
    /// large run holds each definition once.
    pub op: Arc<Operation>,
    pub depends_on: Arc<[OpId]>,
    pub status: NodeStatus,
    pub lane: Lane,
    pub lane_since: Ms,
    /// Incoming edges whose head has not settled yet.
    pub waiting: u32,
    pub has_preds: bool,
    /// At least one settled incoming edge was valid.
    pub any_valid: bool,
    pub approval: Approval,
    pub held: bool,
    pub parked: bool,
    /// Its last attempt failed on a merge conflict nobody resolved then:
    /// `resolve` may land its worktree's work without its agent.
    pub resolvable: bool,
    /// Its next attempt only lands what its worktree holds (`resolve`).
    pub land_only: bool,
    pub attempt: u32,
    /// Attempts before the current series began (an operator's retry
    /// begins one): the retry policy counts the series' attempts.
    pub series_from: u32,
    pub queued_at: Ms,
    pub started_at: Ms,
    pub finished_at: Ms,
    pub result: Option<Arc<Value>>,
    /// The latest attempt's conversation with its CLI, once it named one
    /// (boxed: most operations of a large graph never have one).
    pub conversation: Option<Box<Conversation>>,
}

/// An operation's conversation, and what a new attempt carries on from.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Conversation {
    pub session: Arc<str>,
    /// Set when the attempt that had it ended before its work was done
    /// (a retry, a resume): the next attempt continues it.
    pub ended: Option<Arc<str>>,
    /// What the operator said to the agent (who, and the words), for the
    /// next attempt to be told.
    pub note: Option<(Arc<str>, Arc<str>)>,
    /// The running attempt is in a tool call: a message waits for it to
    /// end (stopping a command halfway leaves its work half done).
    pub in_tool: bool,
    /// A message waits to be delivered: the attempt stops as soon as it is
    /// out of its tool call, or when it ends by itself.
    pub pending: bool,
    /// What the running attempt was told when it began, until its model
    /// is seen answering: an attempt stopped before that (a second message
    /// right after the first) hands it on, so nothing said is lost.
    pub unheard: Option<(Arc<str>, Arc<str>)>,
    /// The operator rejected its work at review, with a reason (who, and
    /// the reason): a later retry continues this conversation, told it.
    pub rejected: Option<(Arc<str>, Arc<str>)>,
}

impl Conversation {
    pub fn new(session: Arc<str>) -> Conversation {
        Conversation {
            session,
            ended: None,
            note: None,
            in_tool: false,
            pending: false,
            unheard: None,
            rejected: None,
        }
    }

    /// Adds what `by` said to what the next attempt is told, after what
    /// it already holds: the words of an attempt that never heard them
    /// first, then messages not delivered yet, in the order they came.
    pub fn add_note(&mut self, by: Arc<str>, text: &str) {
        let mut said: Vec<Arc<str>> = Vec::new();
        if let Some((_, w)) = self.unheard.take() {
            said.push(w);
        }
        if let Some((_, w)) = self.note.take() {
            said.push(w);
        }
        said.push(Arc::from(text));
        let words = said
            .iter()
            .map(|w| &**w)
            .collect::<Vec<&str>>()
            .join("\n\n");
        self.note = Some((by, Arc::from(words)));
    }
}

impl Node {
    pub fn new(op: impl Into<Arc<Operation>>, no_deps: Arc<[OpId]>) -> Self {
        let op = op.into();
        let approval = if op.metadata.approval {
            Approval::Undecided
        } else {
            Approval::NotRequired
        };
        Node {
            op,
            depends_on: no_deps,
            status: NodeStatus::Pending,
            lane: Lane::Queued,
            lane_since: Ms(0),
            waiting: 0,
            has_preds: false,
            any_valid: false,
            approval,
            held: false,
            parked: false,
            resolvable: false,
            land_only: false,
            attempt: 0,
            series_from: 0,
            queued_at: Ms(0),
            started_at: Ms::NONE,
            finished_at: Ms::NONE,
            result: None,
            conversation: None,
        }
    }

    /// The error a failed node's result carries.
    pub fn error(&self) -> Option<Arc<str>> {
        match (self.status, self.result.as_deref()) {
            (NodeStatus::Failed, Some(Value::Object(m))) => {
                m.get("error").and_then(Value::as_str).map(Arc::from)
            }
            _ => None,
        }
    }
}

/// A moment of the run in whole milliseconds (`u32::MAX` for "not yet"):
/// nodes keep four of them, and a quarter of the bytes keeps a large graph
/// in cache.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Ms(pub u32);

impl Ms {
    pub const NONE: Ms = Ms(u32::MAX);

    pub fn at(secs: f64) -> Ms {
        Ms((secs * 1000.0).round().clamp(0.0, f64::from(u32::MAX - 1)) as u32)
    }

    pub fn secs(self) -> Option<f64> {
        (self != Ms::NONE).then(|| f64::from(self.0) / 1000.0)
    }
}

/// Whether a settled node's outgoing edge with `cond` is valid (ADR-0033
/// D2): nothing is valid before the head settles.
pub(super) fn edge_valid(cond: &Condition, status: NodeStatus, result: Option<&Value>) -> bool {
    if !matches!(
        status,
        NodeStatus::Succeeded | NodeStatus::Escalated | NodeStatus::Failed
    ) {
        return false;
    }
    match cond {
        Condition::Succeeded => status != NodeStatus::Failed,
        Condition::Failed => status == NodeStatus::Failed,
        Condition::Always => true,
        Condition::Pointer(p) => result.and_then(|r| r.pointer(&p.pointer)) == Some(&p.equals),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn moments_round_to_milliseconds_and_never_reach_none() {
        assert_eq!(Ms::at(1.2344).secs(), Some(1.234));
        assert_eq!(Ms::at(-3.0).secs(), Some(0.0));
        assert_ne!(Ms::at(1e12), Ms::NONE);
        assert_eq!(Ms::NONE.secs(), None);
    }

    #[test]
    fn edges_are_valid_only_once_their_head_settled_as_the_condition_asks() {
        use NodeStatus::*;
        let ptr = Condition::pointer("/ok", json!(true));
        let yes = json!({"ok": true});
        let no = json!({"ok": false});
        for s in [Pending, Ready, Running, AwaitingApproval, Skipped] {
            for c in [
                &Condition::Succeeded,
                &Condition::Failed,
                &Condition::Always,
            ] {
                assert!(!edge_valid(c, s, None), "{s:?} {c:?}");
            }
        }
        assert!(edge_valid(&Condition::Succeeded, Succeeded, None));
        assert!(edge_valid(&Condition::Succeeded, Escalated, None));
        assert!(!edge_valid(&Condition::Succeeded, Failed, None));
        assert!(edge_valid(&Condition::Failed, Failed, None));
        assert!(!edge_valid(&Condition::Failed, Succeeded, None));
        assert!(edge_valid(&Condition::Always, Failed, None));
        assert!(edge_valid(&ptr, Succeeded, Some(&yes)));
        assert!(!edge_valid(&ptr, Succeeded, Some(&no)));
        assert!(!edge_valid(&ptr, Succeeded, None));
    }
}
