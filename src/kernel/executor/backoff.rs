//! Automatic retries (the retry policy, `kernel::retry`): a failed attempt
//! whose cause the policy takes back waits, queued, for its backoff or the
//! provider's reset time, then starts again like any ready operation — so
//! a pause, a hold, a cancel or the concurrency limit apply to it as to
//! the rest.

use std::cmp::Reverse;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use petgraph::stable_graph::NodeIndex;
use tokio::time::Instant;

use super::super::agent::AgentFailure;
use super::super::retry::Decision;
use super::super::signal::SignalKind;
use super::super::snapshot::NodeStatus;
use super::Executor;

/// An operation's retry, due at `at`, valid while the operation still waits
/// for it after attempt `attempt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Due {
    pub at: Instant,
    pub node: u32,
    pub attempt: u32,
}

impl Executor {
    /// A failed attempt: retried after its wait when the policy says so,
    /// failed otherwise (with why the policy stopped, when it did).
    pub(super) fn failed_attempt(&mut self, ix: NodeIndex, mut f: AgentFailure) {
        let n = &self.graph[ix];
        let policy = self.cfg.retry.for_agent(&n.op.metadata.agent);
        let attempts = n.attempt - n.series_from;
        let seed = (n.op.op_id.as_u128() as u64) ^ u64::from(n.attempt).rotate_left(32);
        let of = policy.attempts;
        let decision = policy.decide(&f, attempts, seed);
        let wait = match &decision {
            Decision::Retry(d) => Some(*d),
            Decision::Fail { .. } => f.wait,
        };
        // A hold never outlasts max_wait: a provider asking for ten days
        // fails this operation and holds the agent's others no longer than
        // the policy would wait; an indefinite one (a refused key) ends
        // there too, so an unattended run ends.
        let hold = wait.unwrap_or(policy.max_wait).min(policy.max_wait);
        self.hold_provider(ix, &f.category, &f.message, Some(hold));
        match decision {
            Decision::Retry(wait) if !self.cancelled => self.wait_to_retry(ix, f, wait, of),
            Decision::Retry(_) | Decision::Fail { why: None } => self.fail(ix, f),
            Decision::Fail { why: Some(why) } => {
                f.message = format!("{} (not retried: {why})", f.message);
                self.fail(ix, f);
            }
        }
    }

    fn wait_to_retry(&mut self, ix: NodeIndex, f: AgentFailure, wait: Duration, of: u32) {
        let attempt = {
            let n = &mut self.graph[ix];
            n.status = NodeStatus::Pending;
            n.result = None;
            if let Some(c) = n.conversation.as_mut() {
                c.ended = Some(Arc::from(format!("{}: {}", f.category, f.message)));
            }
            n.attempt
        };
        self.backoff.push(Reverse(Due {
            at: Instant::now() + wait,
            node: ix.index() as u32,
            attempt,
        }));
        let until = SystemTime::now()
            .checked_add(wait)
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_millis() as u64);
        let node = self.header(ix);
        self.emit_node(
            ix,
            SignalKind::RetryScheduled {
                node,
                attempt,
                category: f.category,
                error: Arc::from(f.message),
                wait_ms: wait.as_millis() as u64,
                until,
                next: attempt + 1,
                of,
            },
        );
    }

    /// Whether an operation still waits for its retry; what no longer does
    /// (cancelled, skipped) is dropped from the front on the way.
    pub(super) fn retry_waiting(&mut self) -> bool {
        while let Some(Reverse(due)) = self.backoff.peek() {
            if self.still_due(due) {
                return true;
            }
            self.backoff.pop();
        }
        false
    }

    fn still_due(&self, due: &Due) -> bool {
        let n = &self.graph[NodeIndex::new(due.node as usize)];
        n.status == NodeStatus::Pending && n.attempt == due.attempt
    }

    /// When the soonest retry is due, if one waits.
    pub(super) fn next_retry(&mut self) -> Option<Instant> {
        self.retry_waiting()
            .then(|| self.backoff.peek().map(|Reverse(d)| d.at))
            .flatten()
    }

    /// Queues every operation whose wait is over.
    pub(super) fn retries_due(&mut self) {
        let now = Instant::now();
        while let Some(Reverse(due)) = self.backoff.peek().copied() {
            if due.at > now {
                break;
            }
            self.backoff.pop();
            if self.still_due(&due) && !self.cancelled {
                self.enqueue(NodeIndex::new(due.node as usize));
            }
        }
    }
}
