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
    pub const MERGE_CONFLICT: &str = crate::kernel::retry::cause::MERGE_CONFLICT;
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
            let land_only = inv.land_only;
            let wt = landing.prepare(&op, attempt).await.map_err(|e| match e {
                NotReady::Setup { .. } => AgentFailure::new(cause::SETUP_FAILED, e.to_string()),
                e => AgentFailure::new(cause::WORKSPACE_ERROR, e.to_string()),
            })?;
            inv.workspace = Some(wt.path.clone());
            let git_failed = |e: super::git::GitError| {
                AgentFailure::new(
                    cause::WORKSPACE_ERROR,
                    format!(
                        "its work could not land: {e}; the worktree {} is kept",
                        wt.path.display()
                    ),
                )
            };
            // A conflict resolved by hand after its attempt failed: what
            // the worktree holds lands, its agent is not run again.
            let result = if land_only {
                landing.kept_result(&op).ok_or_else(|| {
                    AgentFailure::new(
                        cause::WORKSPACE_ERROR,
                        format!(
                            "nothing to land for {op}: the answer of the attempt whose work clashed was not kept; retry it instead"
                        ),
                    )
                })?
            } else {
                let result = inner.invoke(inv).await?;
                landing.keep_result(&op, &result);
                result
            };
            // What an attempt did to the run's branch, the shared
            // repository and the user's branches is seen as it ends,
            // before anything of it lands.
            let _ = landing.check_branch().await;
            for said in landing.look_around().await {
                events.emit(AgentEvent::Warning(Arc::from(format!("{op}: {said}"))));
            }
            landing
                .on_its_branch(&wt)
                .await
                .map_err(|e| AgentFailure::new(cause::WORKSPACE_ERROR, e))?;
            landing
                .commit_left(&op, &wt, &subject)
                .await
                .map_err(git_failed)?;
            // A message from the operator waiting for this attempt
            // disputes its answer: nothing of it lands, and the kernel
            // continues its conversation, told the message.
            if !may_land(&events).await {
                return Ok(result);
            }
            // After a conflict the operator resolved, the commits are
            // theirs: they land without a second review.
            let mut ask_review = review && !land_only;
            loop {
                let tip = landing.head(&wt).await.map_err(git_failed)?;
                if ask_review {
                    let shown = landing.review_of(&wt, &tip).await;
                    if let Err(why) = ask(
                        &events,
                        QuestionKind::Review,
                        &shown.words,
                        shown.on,
                        shown.detail,
                    )
                    .await
                    {
                        return Err(AgentFailure::new(
                            cause::REVIEW_REJECTED,
                            format!("its work did not land: {why}"),
                        ));
                    }
                    if !may_land(&events).await {
                        return Ok(result);
                    }
                    // A rebase replays what the worktree holds: when it
                    // holds more than was shown, it is shown again.
                    if landing.cfg.land == super::LandMode::Rebase
                        && landing.head(&wt).await.map_err(git_failed)? != tip
                    {
                        events.emit(AgentEvent::Warning(Arc::from(format!(
                            "{op}: a commit was made in its worktree after its review was shown; nothing landed, and its review is asked again with it"
                        ))));
                        continue;
                    }
                }
                match landing
                    .land(&op, &wt, &subject, &tip)
                    .await
                    .map_err(git_failed)?
                {
                    Ok(work) => {
                        if work.commit.is_some() {
                            events.emit(AgentEvent::Landed(Arc::new(work)));
                        }
                        // What was committed after the review was shown
                        // is not part of what landed: it comes back for
                        // review on its own.
                        if ask_review && landing.head(&wt).await.map_err(git_failed)? != tip {
                            events.emit(AgentEvent::Warning(Arc::from(format!(
                                "{op}: a commit was made in its worktree after its review was shown; what was shown landed, and the rest is asked for review"
                            ))));
                            continue;
                        }
                        break;
                    }
                    Err(clash) => {
                        let what = format!("{} clash with {}", clash.named(), landing.branch);
                        let on = Some(landing.range(&tip).await);
                        let detail = Some(format!(
                            "its commits clash with what landed on {} before it, in:\n{}",
                            landing.branch,
                            clash.paths.join("\n")
                        ));
                        match ask(&events, QuestionKind::Conflict, &what, on, detail).await {
                            // Resolved in the worktree: what is left there
                            // is committed, and it lands again.
                            Ok(()) => {
                                landing
                                    .commit_left(&op, &wt, &subject)
                                    .await
                                    .map_err(git_failed)?;
                                ask_review = false;
                                if !may_land(&events).await {
                                    return Ok(result);
                                }
                            }
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
            landing.forget_result(&op);
            if let Some(kept) = landing.finish(&op, attempt, &wt).await {
                events.emit(AgentEvent::Warning(Arc::from(kept)));
            }
            Ok(result)
        })
    }
}

/// Asks the kernel whether the attempt's work may be offered or land:
/// not while a message from the operator waits for it. Yes where nobody
/// holds the question (an attempt outside a run).
async fn may_land(events: &AgentEvents) -> bool {
    let (tx, rx) = tokio::sync::oneshot::channel();
    events.emit(AgentEvent::MayLand(Replier::new(tx)));
    rx.await.unwrap_or(true)
}

/// Asks the operator, through the kernel, and waits: `Ok` when allowed,
/// else why not.
async fn ask(
    events: &AgentEvents,
    kind: QuestionKind,
    what: &str,
    on: Option<String>,
    detail: Option<String>,
) -> Result<(), String> {
    static IDS: AtomicU32 = AtomicU32::new(1 << 20);
    let (tx, rx) = tokio::sync::oneshot::channel();
    events.emit(AgentEvent::Asking(Question {
        id: IDS.fetch_add(1, Ordering::Relaxed),
        tool: Arc::from(what),
        kind,
        on: on.map(Arc::from),
        detail: detail.map(Arc::from),
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

/// What a review shows: the commits it is of, in a line and whole.
struct Shown {
    /// `base..tip`, full ids: what an approval lands, and its basis.
    on: Option<String>,
    /// `1 file changed, 1 insertion(+)`
    words: String,
    /// Its commits, then `git diff --stat`.
    detail: Option<String>,
}

impl Landing {
    /// `wt`'s HEAD now.
    async fn head(&self, wt: &super::worktree::OpWorktree) -> Result<String, super::git::GitError> {
        super::git::line_in(wt.tree(), &["rev-parse", "HEAD"]).await
    }

    /// `base..tip`: from where `tip` left the run's branch to `tip`.
    async fn range(&self, tip: &str) -> String {
        let base = super::git::line(&self.repo, &["merge-base", &self.last_made(), tip])
            .await
            .unwrap_or_else(|_| self.last_made());
        format!("{base}..{tip}")
    }

    /// What a review of `tip` shows: the commits the run's branch does not
    /// have yet, up to `tip` and no further.
    async fn review_of(&self, wt: &super::worktree::OpWorktree, tip: &str) -> Shown {
        let on = self.range(tip).await;
        // What the operator is shown is what the commits hold: no program
        // the repository's attributes name rewrites it.
        let git = |args: Vec<&str>| {
            let mut all = vec![args[0], "--no-textconv", "--no-ext-diff"];
            all.extend(&args[1..]);
            let all: Vec<String> = all.into_iter().map(String::from).collect();
            async move { super::git::ok_in(wt.tree(), &all).await.map_err(|e| e.said) }
        };
        let words = match git(vec!["diff", "--shortstat", &on]).await {
            Ok(s) if !s.trim().is_empty() => s.trim().to_string(),
            Ok(_) => "no changes".into(),
            Err(e) => format!("cannot tell what changed: {e}"),
        };
        let log = git(vec!["log", "--format=%h %s", &on])
            .await
            .unwrap_or_default();
        let stat = git(vec!["diff", "--stat", &on]).await.unwrap_or_default();
        Shown {
            detail: Some(format!(
                "commits {}:\n{}\n{}",
                short_range(&on),
                log.trim_end(),
                stat.trim_end()
            )),
            on: Some(on),
            words,
        }
    }

    /// Fails an attempt whose agent moved its worktree off its own branch
    /// (`git checkout playdeck/<run>` there would commit on the run's
    /// branch), or made it stop being this repository's worktree (`rm
    /// .git`: git would then find the repository above it, and commit the
    /// user's checkout): nothing of it lands.
    async fn on_its_branch(&self, wt: &super::worktree::OpWorktree) -> Result<(), String> {
        let kept = || {
            format!(
                "nothing of this attempt lands; the worktree {} is kept",
                wt.path.display()
            )
        };
        let gitfile = std::fs::read_to_string(wt.path.join(".git")).unwrap_or_default();
        let points = gitfile
            .trim()
            .strip_prefix("gitdir:")
            .map(|g| std::path::Path::new(g.trim()))
            .and_then(|g| std::fs::canonicalize(g).ok());
        if points != std::fs::canonicalize(&wt.git_dir).ok() {
            return Err(format!(
                "its agent removed or rewrote its worktree's .git (it must name {}): {}",
                wt.git_dir.display(),
                kept()
            ));
        }
        let common = super::git::line_in(
            wt.tree(),
            &["rev-parse", "--path-format=absolute", "--git-common-dir"],
        )
        .await
        .map_err(|e| e.to_string())?;
        if std::fs::canonicalize(&common).ok() != std::fs::canonicalize(&self.common).ok() {
            return Err(format!(
                "its worktree's git directory now names another repository ({common}, not {}): {}",
                self.common.display(),
                kept()
            ));
        }
        let head = super::git::run_in(wt.tree(), &["symbolic-ref", "-q", "HEAD"])
            .await
            .map_err(|e| e.to_string())?;
        let want = super::refname(&wt.branch);
        if head.stdout.trim() == want {
            return Ok(());
        }
        let now = match head.stdout.trim() {
            "" => "a detached HEAD".to_string(),
            r => r.trim_start_matches("refs/heads/").to_string(),
        };
        Err(format!(
            "its agent moved its worktree off its branch {} to {now}: {}",
            wt.branch,
            kept()
        ))
    }

    /// Where an attempt's answer is kept until its work has landed (a
    /// conflict resolved by hand lands it later).
    fn result_file(&self, op: &str) -> std::path::PathBuf {
        self.worktrees.join(format!(".{op}.result.json"))
    }

    fn keep_result(&self, op: &str, result: &serde_json::Value) {
        let _ = std::fs::create_dir_all(&self.worktrees);
        let bytes = serde_json::to_vec(result).unwrap_or_default();
        let _ = crate::files::write_atomic(&self.result_file(op), &bytes);
    }

    fn kept_result(&self, op: &str) -> Option<serde_json::Value> {
        let bytes = std::fs::read(self.result_file(op)).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    fn forget_result(&self, op: &str) {
        let _ = std::fs::remove_file(self.result_file(op));
    }
}

/// `1a2b3c4d..5e6f7a8b` for people.
fn short_range(on: &str) -> String {
    match on.split_once("..") {
        Some((a, b)) => format!("{}..{}", super::short(a), super::short(b)),
        None => on.to_string(),
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
