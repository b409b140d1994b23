//! An agent CLI's attempt in its operation's own worktree, and its work
//! landed once it succeeds: the agent runs as ever (the kernel sees the
//! same agent), with what happens around it added.
//!
//! The operation is reported succeeded only once its work is on the run's
//! branch, so an operation that depends on it starts from a tree that has
//! it. A review or a conflict is a question to the operator, as a
//! permission prompt is: the operation waits in the approval lane, and
//! `approve`/`resolve`/`deny` answer it (a run with nobody to ask answers
//! by its policy). Saying something to it meanwhile sends it back to its
//! agent, in the same session and worktree.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use super::Landing;
use super::worktree::NotReady;
use crate::agents::AgentParams;
use crate::kernel::agent::{Answer, Question, QuestionKind, Replier};
use crate::kernel::{
    Agent, AgentEvent, AgentEvents, AgentFailure, AgentOutcome, BoxFuture, Invocation,
};

/// An agent whose attempts work in worktrees and land their work.
pub struct Isolated {
    inner: Arc<dyn Agent>,
    landing: Arc<Landing>,
}

impl Isolated {
    pub fn new(inner: Arc<dyn Agent>, landing: Arc<Landing>) -> Isolated {
        Isolated { inner, landing }
    }
}

/// Failure categories of landing, for the retry policy and the report.
pub mod cause {
    /// `[workspace] setup` failed in the new worktree.
    pub const SETUP_FAILED: &str = "setup_failed";
    /// Its work clashes with what landed before it, and nobody resolved it.
    pub const MERGE_CONFLICT: &str = "merge_conflict";
    /// The operator rejected its work at review.
    pub const REVIEW_REJECTED: &str = "review_rejected";
    /// git failed at something else (a worktree, a commit).
    pub const WORKSPACE_ERROR: &str = "workspace_error";
}

impl Agent for Isolated {
    fn wants_context(&self) -> bool {
        self.inner.wants_context()
    }

    fn invoke(&self, mut inv: Invocation) -> BoxFuture<AgentOutcome> {
        let inner = self.inner.clone();
        let landing = self.landing.clone();
        Box::pin(async move {
            let op = inv.name.to_string();
            let attempt = inv.attempt;
            let events = inv.events.clone();
            let subject = first_line(&inv.instruction);
            let review = landing.reviews(
                AgentParams::from_value(&inv.params).review,
                inv.profile.as_deref(),
            );
            let wt = landing.prepare(&op, attempt).await.map_err(|e| match e {
                NotReady::Setup { .. } => AgentFailure::new(cause::SETUP_FAILED, e.to_string()),
                e => AgentFailure::new(cause::WORKSPACE_ERROR, e.to_string()),
            })?;
            inv.workspace = Some(wt.path.clone());
            let result = inner.invoke(inv).await?;
            let git_failed = |e: super::git::GitError| {
                AgentFailure::new(
                    cause::WORKSPACE_ERROR,
                    format!(
                        "its work could not land: {e}; the worktree {} is kept",
                        wt.path.display()
                    ),
                )
            };
            landing
                .commit_left(&op, &wt, &subject)
                .await
                .map_err(git_failed)?;
            if review {
                let what = landing.review_words(&wt).await;
                if let Err(why) = ask(&events, QuestionKind::Review, &what).await {
                    return Err(AgentFailure::new(
                        cause::REVIEW_REJECTED,
                        format!("its work did not land: {why}"),
                    ));
                }
            }
            loop {
                match landing.land(&op, &wt, &subject).await.map_err(git_failed)? {
                    Ok(work) => {
                        if work.commit.is_some() {
                            events.emit(AgentEvent::Landed(Arc::new(work)));
                        }
                        break;
                    }
                    Err(clash) => {
                        let what = format!("{} clash with {}", clash.named(), landing.branch);
                        match ask(&events, QuestionKind::Conflict, &what).await {
                            // Resolved in the worktree: what is left there
                            // is committed, and it lands again.
                            Ok(()) => landing
                                .commit_left(&op, &wt, &subject)
                                .await
                                .map_err(git_failed)?,
                            Err(why) => {
                                return Err(AgentFailure::new(
                                    cause::MERGE_CONFLICT,
                                    format!(
                                        "its work clashes with what landed on {} before it, in {} ({why}); the worktree {} is kept",
                                        landing.branch,
                                        clash.named(),
                                        wt.path.display()
                                    ),
                                ));
                            }
                        }
                    }
                }
            }
            if let Some(kept) = landing.finish(&op, attempt, &wt).await {
                events.emit(AgentEvent::Warning(Arc::from(kept)));
            }
            Ok(result)
        })
    }
}

/// Asks the operator, through the kernel, and waits: `Ok` when allowed,
/// else why not.
async fn ask(events: &AgentEvents, kind: QuestionKind, what: &str) -> Result<(), String> {
    static IDS: AtomicU32 = AtomicU32::new(1 << 20);
    let (tx, rx) = tokio::sync::oneshot::channel();
    events.emit(AgentEvent::Asking(Question {
        id: IDS.fetch_add(1, Ordering::Relaxed),
        tool: Arc::from(what),
        kind,
        reply: Replier::new(tx),
    }));
    match rx.await {
        Ok(Answer { allow: true, .. }) => Ok(()),
        Ok(Answer { why, .. }) => Err(why.to_string()),
        Err(_) => Err("nobody answered".into()),
    }
}

/// The instruction's first line that says something, for commit subjects.
fn first_line(instruction: &str) -> String {
    let line = instruction
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("work");
    let mut s: String = line.chars().take(72).collect();
    if line.chars().count() > 72 {
        s.push('…');
    }
    s
}

impl Landing {
    /// What a review would land, in a line: `3 files changed, 10
    /// insertions(+), 2 deletions(-)`.
    async fn review_words(&self, wt: &super::worktree::OpWorktree) -> String {
        let range = format!("{}...HEAD", super::refname(&self.branch));
        match super::git::line(&wt.path, &["diff", "--shortstat", &range]).await {
            Ok(s) if !s.is_empty() => s,
            Ok(_) => "no changes".into(),
            Err(e) => format!("cannot tell what changed: {}", e.said),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::first_line;

    #[test]
    fn a_commit_subject_is_the_instructions_first_line_that_says_something() {
        assert_eq!(
            first_line("\n  write the parser\nthen test it"),
            "write the parser"
        );
        assert_eq!(first_line(""), "work");
        assert_eq!(first_line(&"x".repeat(80)).chars().count(), 73);
    }
}
