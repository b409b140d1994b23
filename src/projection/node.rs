//! One operation as the signal stream tells it: its definition, where it
//! stands, every attempt, its decision and what it emitted.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use thin_vec::ThinVec;

use crate::kernel::request::RequestId;
use crate::kernel::{
    ActivityState, DepRecord, Lane, NodeStatus, OpId, Operation, SkipReason, Usage,
};

/// One attempt of an operation and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub started_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// `running` (still, or when the process died), `succeeded`,
    /// `escalated`, `failed`: a static word (16 bytes, not a string's 24:
    /// an attempt fits 128 bytes, a million of them 32 MB less).
    pub outcome: Word,
    /// An earlier attempt's result; the last attempt's is the node's own
    /// `result` (held once).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub result: Option<Arc<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Arc<str>>,
    /// Its agent's cost and tokens, as last reported (boxed: most
    /// attempts have none, and a run holds one record per attempt).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Box<Usage>>,
    /// Its agent's process group, when it ran one (never 0: four bytes,
    /// beside `attempt`, which keep an attempt at 128).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pgid: Option<std::num::NonZeroI32>,
    /// The agent CLI's own id of the conversation it was in, when its
    /// stream named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<Arc<str>>,
}

/// An operator's (or the policy's, or a timeout's) decision about an
/// operation: on its gate, on a call its agent asked about, on its work
/// waiting for review or clashing as it landed, a retry, a send-back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Allowed (approved, landed, resolved, retried, sent back) or not.
    pub approved: bool,
    pub by: Arc<str>,
    pub at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<Arc<str>>,
    /// What was decided (absent in older checkpoints: a gate).
    #[serde(default, skip_serializing_if = "DecisionKind::is_gate")]
    pub kind: DecisionKind,
    /// What it was decided on, in words: a gate's dependencies' outcomes,
    /// a review's commits, the call asked about, the failure retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Arc<str>>,
}

/// What a [`Decision`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// Its approval gate.
    #[default]
    Gate,
    /// A call its agent asked about (a ToolSet's `ask`).
    Call,
    /// Its work, waiting for review: landed or rejected.
    Review,
    /// Its work, clashing as it landed: resolved or left unlanded.
    Conflict,
    /// A new attempt the operator started.
    Retry,
    /// The operator spoke to it: sent back (from review, a conflict, a
    /// failure) or told something while it ran; `reason` is what they said.
    SentBack,
}

impl DecisionKind {
    pub fn is_gate(&self) -> bool {
        *self == DecisionKind::Gate
    }

    /// How a report or an inspector names it: `approved`, `landed`.
    pub fn words(self, approved: bool) -> &'static str {
        match (self, approved) {
            (DecisionKind::Gate, true) => "approved",
            (DecisionKind::Gate, false) => "denied",
            (DecisionKind::Call, true) => "call allowed",
            (DecisionKind::Call, false) => "call denied",
            (DecisionKind::Review, true) => "review approved: landed",
            (DecisionKind::Review, false) => "review rejected",
            (DecisionKind::Conflict, true) => "conflict resolved",
            (DecisionKind::Conflict, false) => "conflict left unlanded",
            (DecisionKind::Retry, _) => "retried",
            (DecisionKind::SentBack, _) => "sent back",
        }
    }
}

/// What an operation waiting for the operator was asked, as its signal
/// said: the seq of that signal (a decision's basis names it) and, for a
/// question, what an answer binds to and what it allows, whole.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Asked {
    pub seq: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<Arc<str>>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node {
    /// Shared with the run's graph while they agree.
    pub op: Arc<Operation>,
    /// Incoming edges with their conditions (from the initial graph or the
    /// spawn record); empty when only the log was read.
    #[serde(default, skip_serializing_if = "ThinVec::is_empty", with = "thin")]
    pub deps: ThinVec<DepRecord>,
    /// What it depends on, as its signals tell.
    #[serde(default, skip_serializing_if = "none_before")]
    pub depends_on: Arc<[OpId]>,
    pub status: NodeStatus,
    #[serde(default = "queued")]
    pub lane: Lane,
    /// Its first lifecycle signal was seen: it is in a lane and counted.
    #[serde(default)]
    pub placed: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub held: bool,
    #[serde(default)]
    pub attempt: u32,
    #[serde(default, skip_serializing_if = "ThinVec::is_empty", with = "thin")]
    pub attempts: ThinVec<Attempt>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub result: Option<Arc<Value>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub escalation: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_reason: Option<SkipReason>,
    /// Every decision on its gate, in order (a retry asks again).
    #[serde(default, skip_serializing_if = "ThinVec::is_empty", with = "thin")]
    pub decisions: ThinVec<Decision>,
    /// Every sighting of a spawn request it emitted that reached the
    /// ledger: (seq, identity, whether it was dropped as a duplicate).
    /// Resume passes over these when they come again.
    #[serde(default, skip_serializing_if = "ThinVec::is_empty", with = "thin")]
    pub sightings: ThinVec<(u64, RequestId, bool)>,
    /// The seq of the signal that settled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_seq: Option<u64>,
    #[serde(default)]
    pub queued_at: f64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<f64>,
    /// When it entered its lane.
    #[serde(default)]
    pub lane_since: f64,
    // What follows is live state a view shows; a checkpoint does not keep
    // it (a resumed run starts it afresh).
    #[serde(skip)]
    pub capacity_wait: Option<Arc<str>>,
    /// Waiting to be retried: why and until when.
    #[serde(skip)]
    pub retry_wait: Option<Arc<RetryWait>>,
    #[serde(skip)]
    pub activity: Option<(ActivityState, Option<Arc<str>>)>,
    /// The call its running agent asks the operator about
    /// (`Bash(rm -rf build)`), until it is answered.
    #[serde(skip)]
    pub asking: Option<Arc<str>>,
    /// What `asking` is: a permission, a review, a merge conflict.
    #[serde(skip)]
    pub asked: crate::kernel::agent::QuestionKind,
    /// Each landing of its work on the run's branch, in order (a review
    /// approved in parts, a send-back after landing, lands again).
    #[serde(
        default,
        skip_serializing_if = "ThinVec::is_empty",
        serialize_with = "thin::serialize",
        deserialize_with = "landings"
    )]
    pub landed: ThinVec<Arc<crate::kernel::agent::LandedWork>>,
}

/// Landings as a checkpoint keeps them: a list, or (written before an
/// operation could land twice) the one landing.
fn landings<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<ThinVec<Arc<crate::kernel::agent::LandedWork>>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMore {
        More(Vec<Arc<crate::kernel::agent::LandedWork>>),
        One(Arc<crate::kernel::agent::LandedWork>),
        None(()),
    }
    Ok(match OneOrMore::deserialize(d)? {
        OneOrMore::More(v) => v.into_iter().collect(),
        OneOrMore::One(w) => std::iter::once(w).collect(),
        OneOrMore::None(()) => ThinVec::new(),
    })
}

/// An operation waiting for its retry, as views show it.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryWait {
    /// `rate limit`
    pub cause: &'static str,
    /// `14:05:03` (UTC)
    pub clock: String,
    /// `rate limit — attempt 2 of 3 at 14:05:03`
    pub words: String,
    /// Run time (seconds) it comes back at: views count down to it, live
    /// and in a replay alike.
    pub due_at: f64,
}

/// A result that is there, even when it is `null` (a missing one is
/// `None`): operations may legitimately return null.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Arc<Value>>, D::Error> {
    Value::deserialize(d).map(|v| Some(Arc::new(v)))
}

fn none_before(d: &Arc<[OpId]>) -> bool {
    d.is_empty()
}

fn queued() -> Lane {
    Lane::Queued
}

impl Node {
    /// Back to waiting for a new attempt (or re-opened): what settled it
    /// goes, and the attempt that made its result keeps it.
    pub(super) fn reopen(&mut self, at: f64) {
        if let Some(r) = self.result.take()
            && let Some(a) = self.attempts.last_mut()
            && a.result.is_none()
        {
            a.result = Some(r);
        }
        self.status = NodeStatus::Pending;
        self.result = None;
        self.error = None;
        self.category = None;
        self.escalation = None;
        self.skip_reason = None;
        self.finished_at = None;
        self.settled_seq = None;
        self.queued_at = at;
    }

    pub fn new(op: impl Into<Arc<Operation>>) -> Node {
        let op = op.into();
        Node {
            op,
            deps: ThinVec::new(),
            depends_on: Arc::from(Vec::new()),
            status: NodeStatus::Pending,
            lane: Lane::Queued,
            placed: false,
            held: false,
            attempt: 0,
            attempts: ThinVec::new(),
            result: None,
            error: None,
            category: None,
            escalation: None,
            skip_reason: None,
            decisions: ThinVec::new(),
            sightings: ThinVec::new(),
            settled_seq: None,
            queued_at: 0.0,
            started_at: None,
            finished_at: None,
            lane_since: 0.0,
            capacity_wait: None,
            retry_wait: None,
            activity: None,
            asking: None,
            asked: Default::default(),
            landed: ThinVec::new(),
        }
    }

    pub fn name(&self) -> &Arc<str> {
        &self.op.reference_id
    }

    pub fn role(&self) -> Option<&Arc<str>> {
        self.op.assignee.as_ref()
    }

    pub fn skipped(&self) -> bool {
        self.status == NodeStatus::Skipped
    }

    /// Where it is, in the console's words: its lane's title, `skipped`
    /// for one that never ran (the kernel keeps it in the failed lane; the
    /// console shows it apart, and never calls it failed).
    pub fn place(&self) -> &'static str {
        if self.skipped() {
            "skipped"
        } else {
            self.lane.title()
        }
    }

    /// Whether its work waits for the operator: for review, or clashing as
    /// it landed (not a call its agent asks about).
    pub fn waits_with_work(&self) -> bool {
        self.asking.is_some() && !self.asked.is_permission()
    }

    /// Whether it has an approval gate.
    pub fn gated(&self) -> bool {
        self.op.metadata.approval
    }

    pub fn parent(&self) -> Option<OpId> {
        self.op.metadata.spawned_from
    }

    /// The last decision on its gate.
    pub fn decision(&self) -> Option<&Decision> {
        self.decisions.iter().rfind(|d| d.kind.is_gate())
    }

    /// The current attempt's record.
    pub fn current(&self) -> Option<&Attempt> {
        self.attempts.last().filter(|a| a.attempt == self.attempt)
    }

    /// Its agent's usage in the current attempt.
    pub fn usage(&self) -> Option<Usage> {
        self.current().and_then(|a| a.usage.as_deref().copied())
    }

    /// How earlier attempts ended, for the inspector.
    pub fn earlier(&self) -> impl Iterator<Item = &Attempt> {
        let current = self.attempt;
        self.attempts
            .iter()
            .filter(move |a| a.attempt < current && a.outcome != "running")
    }

    /// What it depends on: its dependencies and the operation that spawned
    /// it.
    pub fn predecessors(&self) -> impl Iterator<Item = OpId> + '_ {
        self.depends_on.iter().copied().chain(self.parent())
    }
}

/// Serde for a [`ThinVec`]: the same JSON array a `Vec` is.
mod thin {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use thin_vec::ThinVec;

    pub fn serialize<T: Serialize, S: Serializer>(v: &ThinVec<T>, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(v.iter())
    }

    pub fn deserialize<'de, T: Deserialize<'de>, D: Deserializer<'de>>(
        d: D,
    ) -> Result<ThinVec<T>, D::Error> {
        Vec::<T>::deserialize(d).map(ThinVec::from)
    }
}

/// The words an attempt's outcome is written with.
const OUTCOME_WORDS: [&str; 4] = ["running", "succeeded", "escalated", "failed"];

/// One of [`OUTCOME_WORDS`], read and written as the word itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Word(pub &'static str);

impl std::ops::Deref for Word {
    type Target = str;
    fn deref(&self) -> &str {
        self.0
    }
}

impl From<&'static str> for Word {
    fn from(w: &'static str) -> Word {
        Word(w)
    }
}

impl PartialEq<&str> for Word {
    fn eq(&self, o: &&str) -> bool {
        self.0 == *o
    }
}

impl std::fmt::Display for Word {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0)
    }
}

impl<'de> Deserialize<'de> for Word {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Word, D::Error> {
        let w = std::borrow::Cow::<'de, str>::deserialize(d)?;
        OUTCOME_WORDS
            .iter()
            .find(|k| **k == w)
            .map(|k| Word(k))
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "attempt outcome {w:?} is not one of {}",
                    OUTCOME_WORDS.join(", ")
                ))
            })
    }
}
