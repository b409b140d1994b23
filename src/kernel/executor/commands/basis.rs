//! Decisions bound to what was shown: the basis a decision names is
//! checked against the state it answers before anything is done, and a
//! decision made without one says what it was made on.

use std::sync::Arc;

use petgraph::Direction;
use petgraph::stable_graph::NodeIndex;

use super::super::super::basis::{Basis, BasisKind};
use super::super::super::command::{Answer, CommandError};
use super::super::super::snapshot::{NodeStatus, deps_digest};
use super::super::Executor;

/// Dependencies named in words before the rest are counted.
const NAMED: usize = 6;

impl Executor {
    /// Carries out one decision on `op`: on the basis the surface showed
    /// (`on`), refused as stale when that is not what is there now; or,
    /// without one, on what is there now, which the answer says.
    pub(super) fn decide(
        &mut self,
        op: &str,
        on: Option<Basis>,
        act: impl FnOnce(&mut Executor, NodeIndex) -> Result<(), CommandError>,
    ) -> Result<Answer, CommandError> {
        let ix = self.resolve(op)?;
        let now = self.basis_now(ix);
        match (on, now) {
            (Some(seen), Some(now)) if seen != now => Err(self.stale(ix, &seen, &now)),
            (Some(seen), None) => Err(CommandError::StaleDecision {
                name: self.name_of(ix),
                changed: format!(
                    "you decided on {} (event {}), and it waits for no decision now",
                    seen.kind.words(),
                    seen.seq
                ),
                now: self.state_words(ix),
            }),
            (Some(_), Some(_)) => act(self, ix).map(|()| Answer::Done),
            (None, now) => {
                let words = now.as_ref().map(|b| self.basis_words(ix, b));
                act(self, ix)?;
                Ok(match (now, words) {
                    (Some(on), Some(now)) => Answer::Decided { on, now },
                    _ => Answer::Done,
                })
            }
        }
    }

    /// What a decision on `ix` would answer now: the question its running
    /// attempt asks, its gate, its failure or its escalation; none when
    /// nothing about it waits for the operator.
    pub(in crate::kernel::executor) fn basis_now(&self, ix: NodeIndex) -> Option<Basis> {
        let n = &self.graph[ix];
        if n.status == NodeStatus::Running {
            let a = self.questions.get(&ix).filter(|a| a.attempt == n.attempt)?;
            return Some(Basis {
                kind: BasisKind::of_question(a.q.kind),
                seq: a.seq,
                what: a.q.on.clone(),
            });
        }
        let seq = *self.shown.get(&ix)?;
        let (kind, what) = match n.status {
            NodeStatus::AwaitingApproval => (BasisKind::Gate, Some(Arc::from(self.digest(ix)))),
            NodeStatus::Failed => (BasisKind::Failure, None),
            NodeStatus::Escalated => (BasisKind::Escalation, None),
            _ => return None,
        };
        Some(Basis { kind, seq, what })
    }

    /// `ix`'s dependencies' outcomes as a gate's basis digests them.
    fn digest(&self, ix: NodeIndex) -> String {
        deps_digest(
            self.graph[ix]
                .depends_on
                .iter()
                .filter_map(|id| self.index.get(id).map(|&d| (*id, self.graph[d].status))),
        )
    }

    /// A gate's dependencies in words, as its approval records them:
    /// `2 dependencies succeeded`, `✗ 1 of 2 dependencies failed: lint`.
    pub(in crate::kernel::executor) fn gate_words(&self, ix: NodeIndex) -> Option<Arc<str>> {
        let n = &self.graph[ix];
        if !n.op.metadata.approval {
            return None;
        }
        let deps: Vec<NodeIndex> = self
            .graph
            .neighbors_directed(ix, Direction::Incoming)
            .collect();
        if deps.is_empty() {
            return Some(Arc::from("no dependencies"));
        }
        let mut by: [Vec<String>; 5] = Default::default();
        for &d in &deps {
            let i = match self.graph[d].status {
                NodeStatus::Succeeded => 0,
                NodeStatus::Failed => 1,
                NodeStatus::Skipped => 2,
                NodeStatus::Escalated => 3,
                _ => 4,
            };
            by[i].push(self.name_of(d));
        }
        let total = deps.len();
        let named = |v: &[String]| {
            let mut s = v[..v.len().min(NAMED)].join(", ");
            if v.len() > NAMED {
                s.push_str(&format!(" and {} more", v.len() - NAMED));
            }
            s
        };
        let mut parts = Vec::new();
        for (i, word) in [
            (1, "failed"),
            (2, "skipped"),
            (3, "escalated"),
            (4, "not settled"),
        ] {
            if !by[i].is_empty() {
                parts.push(format!(
                    "{} of {total} {word}: {}",
                    by[i].len(),
                    named(&by[i])
                ));
            }
        }
        let ok = by[0].len();
        let ok = match ok {
            _ if ok == total && total == 1 => "its dependency succeeded".to_string(),
            _ if ok == total => format!("all {total} dependencies succeeded"),
            0 => String::new(),
            _ => format!("{ok} of {total} succeeded"),
        };
        Some(Arc::from(if parts.is_empty() {
            ok
        } else {
            let mut s = format!("✗ {}", parts.join("; "));
            if !ok.is_empty() {
                s.push_str(&format!("; {ok}"));
            }
            s
        }))
    }

    /// What `b` (a basis of `ix` now) is, in words.
    fn basis_words(&self, ix: NodeIndex, b: &Basis) -> String {
        match b.kind {
            BasisKind::Gate => format!(
                "its approval gate, {}",
                self.gate_words(ix).as_deref().unwrap_or("")
            ),
            BasisKind::Call | BasisKind::Review | BasisKind::Conflict => {
                let a = self.questions.get(&ix);
                let tool = a.map(|a| a.q.tool.to_string()).unwrap_or_default();
                let kind = a.map(|a| a.q.kind.say(&tool)).unwrap_or(tool);
                match &b.what {
                    Some(w) if b.kind != BasisKind::Call => format!("{kind} ({w})"),
                    _ => kind,
                }
            }
            BasisKind::Failure | BasisKind::Escalation => self
                .retried_on(ix)
                .map_or_else(|| b.kind.words().to_string(), |w| w.to_string()),
        }
    }

    /// Where `ix` stands, for a refusal that names it.
    fn state_words(&self, ix: NodeIndex) -> String {
        let n = &self.graph[ix];
        let s = match n.status {
            NodeStatus::Pending if n.attempt > 0 => "waiting for its next attempt",
            NodeStatus::Pending => "waiting for its dependencies",
            NodeStatus::Ready => "about to start",
            NodeStatus::Running => "running",
            NodeStatus::AwaitingApproval => "awaiting approval",
            NodeStatus::Succeeded => "succeeded",
            NodeStatus::Escalated => "escalated",
            NodeStatus::Failed => "failed",
            NodeStatus::Skipped => "skipped",
        };
        format!("{} is {s}", self.name_of(ix))
    }

    /// The refusal of a decision made on `seen` when `now` is there: what
    /// changed, what is there now and the basis to decide on it.
    fn stale(&self, ix: NodeIndex, seen: &Basis, now: &Basis) -> CommandError {
        let changed = if seen.kind != now.kind {
            format!(
                "you decided on {} (event {}), and it waits now on {}",
                seen.kind.words(),
                seen.seq,
                now.kind.words()
            )
        } else if seen.seq != now.seq {
            let again = match now.kind {
                BasisKind::Gate => "its gate was asked again",
                BasisKind::Call => "its agent asks about another call",
                BasisKind::Review => "its work came back for review with other commits",
                BasisKind::Conflict => "its work clashed again",
                BasisKind::Failure => "it failed again",
                BasisKind::Escalation => "it escalated again",
            };
            format!(
                "{again} since you saw it (event {} then, event {} now)",
                seen.seq, now.seq
            )
        } else {
            let what = |b: &Basis| b.what.as_deref().unwrap_or("nothing").to_string();
            match now.kind {
                BasisKind::Gate => "its dependencies' outcomes changed since you saw them".into(),
                BasisKind::Review | BasisKind::Conflict => format!(
                    "you saw the commits {}; what waits is {}",
                    what(seen),
                    what(now)
                ),
                _ => format!("you saw {}; what waits is {}", what(seen), what(now)),
            }
        };
        CommandError::StaleDecision {
            name: self.name_of(ix),
            changed,
            now: format!("{} (--on {now})", self.basis_words(ix, now)),
        }
    }
}
