//! What waits on a person, across a run: gates, questions (permission, a
//! review, a merge conflict), escalations, failures a retry could take up
//! and a spend cap that holds work back — each with the basis a decision
//! on it must carry (`--on`), so every surface asks the same things and
//! binds its answers the same way.

use std::sync::Arc;

use super::model::ViewModel;
use crate::kernel::agent::QuestionKind;
use crate::kernel::{Basis, Lane, NodeStatus};

/// What kind of wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NeedKind {
    Gate,
    Permission,
    Review,
    Conflict,
    Escalation,
    Failure,
    /// A spend cap holds work back: `budget` raises it.
    SpendCap,
}

impl NeedKind {
    pub fn words(self) -> &'static str {
        match self {
            NeedKind::Gate => "approval gate",
            NeedKind::Permission => "asks permission",
            NeedKind::Review => "review",
            NeedKind::Conflict => "merge conflict",
            NeedKind::Escalation => "escalated",
            NeedKind::Failure => "failed",
            NeedKind::SpendCap => "spend cap",
        }
    }
}

/// One thing that waits on a person.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    pub kind: NeedKind,
    /// The operation (none for a spend cap).
    pub ix: Option<u32>,
    pub op: Option<Arc<str>>,
    pub role: Option<Arc<str>>,
    pub agent: Option<Arc<str>>,
    /// What it is about, in a line.
    pub what: String,
    /// What answering allows, whole (a call's command or content).
    pub detail: Option<Arc<str>>,
    /// What a decision on it must carry.
    pub basis: Option<Basis>,
    /// Run time it began to wait.
    pub since: f64,
}

/// Everything in `v` that waits on a person, the run's spend cap first,
/// then in the order the lanes list them.
pub fn needs(v: &ViewModel) -> Vec<Need> {
    let mut out = Vec::new();
    if let Some(held) = &v.spend.held {
        out.push(Need {
            kind: NeedKind::SpendCap,
            ix: None,
            op: None,
            role: None,
            agent: None,
            what: format!("a spend cap holds work back: {held}"),
            detail: None,
            basis: None,
            since: v.run.elapsed,
        });
    }
    let of = |ix: u32, kind: NeedKind, what: String| {
        let n = v.node(ix);
        Need {
            kind,
            ix: Some(ix),
            op: Some(n.name().clone()),
            role: n.role().cloned(),
            agent: Some(n.op.metadata.agent.clone()).filter(|a| !a.is_empty()),
            what,
            detail: v.asked.get(&ix).and_then(|a| a.detail.clone()),
            basis: v.basis_of(ix),
            since: n.lane_since,
        }
    };
    // A question of a running agent waits in the approval lane too (the
    // operation is not running while its agent waits for the answer).
    for ix in v
        .lane(Lane::AwaitingApproval)
        .iter()
        .chain(v.lane(Lane::Running).iter())
    {
        let n = v.node(ix);
        if let Some(call) = &n.asking {
            let kind = match n.asked {
                QuestionKind::Permission => NeedKind::Permission,
                QuestionKind::Review => NeedKind::Review,
                QuestionKind::Conflict => NeedKind::Conflict,
            };
            // The kind is said apart (a card's heading, a column): what is
            // asked is the call itself.
            out.push(of(ix, kind, call.to_string()));
            continue;
        }
        if n.lane != Lane::AwaitingApproval {
            continue;
        }
        let deps: Vec<String> = n
            .depends_on
            .iter()
            .filter_map(|id| v.find(id))
            .map(|d| {
                let mark = if d.status == NodeStatus::Succeeded {
                    "✓"
                } else {
                    "✗"
                };
                format!("{} {mark}", d.name())
            })
            .collect();
        let what = match (v.failed_deps(ix), deps.is_empty()) {
            (Some(f), _) => format!("may {} start? {}", n.name(), f.words()),
            (None, true) => format!("may {} start?", n.name()),
            (None, false) => format!("may {} start? after {}", n.name(), deps.join(", ")),
        };
        out.push(of(ix, NeedKind::Gate, what));
    }
    for ix in v.lane(Lane::Escalated).iter() {
        let n = v.node(ix);
        let why = n.escalation.as_deref().unwrap_or("escalated");
        out.push(of(ix, NeedKind::Escalation, format!("escalated: {why}")));
    }
    for ix in v.lane(Lane::Failed).iter() {
        let n = v.node(ix);
        if n.skipped() || n.status != NodeStatus::Failed {
            continue;
        }
        let why = n.error.as_deref().unwrap_or("failed");
        out.push(of(ix, NeedKind::Failure, format!("failed: {why}")));
    }
    out
}
