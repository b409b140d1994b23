//! Landing the work (`[workspace] isolation = "worktree"`): each operation
//! works in a git worktree of its own, made from the run's branch
//! `playdeck/<run-id>`; once it succeeds, what it changed is committed on
//! its own branch and lands on the run's branch — one operation at a time,
//! in the order they finish — so what depends on it starts from a tree
//! that has it. The user's branches are never touched by a run: `playdeck
//! land RUN --into BRANCH` brings the run's branch in when they say so.
//!
//! A merge is computed without a checkout (`git merge-tree --write-tree`)
//! and the branch moved by compare-and-swap (`git update-ref NEW OLD`), so
//! the run's branch is never checked out and a merge that clashes leaves
//! nothing half-done. What clashed waits for the operator (a conflict
//! question); a review waits the same way before it lands.

pub mod git;
pub mod into;
mod isolated;
mod record;
mod worktree;

pub use isolated::Isolated;
pub use record::{LANDING_FILE, LandingFile};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::kernel::agent::LandedWork;
use crate::play::workspace_section::{LandMode, WorkspaceConfig};

/// Why the run's branch could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Git(#[from] git::GitError),
    #[error(
        "[workspace] isolation = \"worktree\" needs git 2.38 or later (merge-tree --write-tree); this git is {0}"
    )]
    OldGit(String),
    #[error(
        "[workspace] isolation = \"worktree\": the repository {0} has no commit to start the run's branch from; commit something first"
    )]
    NoCommit(String),
    #[error("cannot write {path}: {error}")]
    Write { path: String, error: std::io::Error },
}

/// The run's branch and where its operations' worktrees go.
#[derive(Debug)]
pub struct Landing {
    /// The repository's top directory (its main worktree).
    pub repo: PathBuf,
    /// `playdeck/<run-id>`.
    pub branch: String,
    pub run_id: String,
    /// `<run>/work`: a worktree per operation.
    pub worktrees: PathBuf,
    /// `<run>/logs`: setup and teardown output.
    pub logs: PathBuf,
    pub cfg: WorkspaceConfig,
    /// Role profiles whose operations wait for review.
    pub reviewed_profiles: Vec<String>,
    /// One landing at a time: each merges onto the tip the one before left.
    lock: tokio::sync::Mutex<()>,
}

/// A clash between an operation's work and what landed before it.
#[derive(Debug, Clone, PartialEq)]
pub struct Conflict {
    pub paths: Vec<String>,
}

impl Conflict {
    /// `clash.txt, src/a.rs`.
    pub fn named(&self) -> String {
        const NAMED: usize = 8;
        let mut s = self.paths[..self.paths.len().min(NAMED)].join(", ");
        if self.paths.len() > NAMED {
            s.push_str(&format!(" and {} more", self.paths.len() - NAMED));
        }
        s
    }
}

impl Landing {
    /// Sets the run's branch up: made from HEAD at the start, kept as it is
    /// when a resumed run has it already; recorded in `landing.json`.
    pub async fn open(
        cfg: &WorkspaceConfig,
        play_dir: &Path,
        run_dir: &Path,
        run_id: &str,
        reviewed_profiles: Vec<String>,
    ) -> Result<Landing, OpenError> {
        let version = git::line(play_dir, &["version"]).await?;
        if !new_enough(&version) {
            return Err(OpenError::OldGit(version));
        }
        let repo = PathBuf::from(git::line(play_dir, &["rev-parse", "--show-toplevel"]).await?);
        let branch = format!("playdeck/{run_id}");
        let have = git::run(
            &repo,
            &["rev-parse", "--verify", "--quiet", &refname(&branch)],
        )
        .await?
        .ok();
        if !have {
            let base = git::run(
                &repo,
                &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            )
            .await?;
            if !base.ok() {
                return Err(OpenError::NoCommit(repo.display().to_string()));
            }
            git::ok(&repo, &["branch", &branch, base.stdout.trim()]).await?;
        }
        // git runs in the repository, not where playdeck was started.
        let run_dir = std::path::absolute(run_dir).map_err(|error| OpenError::Write {
            path: run_dir.display().to_string(),
            error,
        })?;
        let run_dir = run_dir.as_path();
        let landing = Landing {
            repo,
            branch,
            run_id: run_id.to_string(),
            worktrees: run_dir.join("work"),
            logs: run_dir.join("logs"),
            cfg: cfg.clone(),
            reviewed_profiles,
            lock: tokio::sync::Mutex::new(()),
        };
        if !have {
            let base = landing.tip().await?;
            record::write(run_dir, &landing, &base)?;
        }
        Ok(landing)
    }

    /// The run's branch's tip now.
    pub async fn tip(&self) -> Result<String, git::GitError> {
        git::line(&self.repo, &["rev-parse", &refname(&self.branch)]).await
    }

    /// Lands `op`'s branch on the run's branch: one at a time. Work that
    /// is there already (a resumed run landed it before it stopped) lands
    /// no second time: there is nothing to land, and `commit` is `None`.
    pub async fn land(
        &self,
        op: &str,
        wt: &worktree::OpWorktree,
        subject: &str,
    ) -> Result<Result<LandedWork, Conflict>, git::GitError> {
        let _one = self.lock.lock().await;
        let before = self.tip().await?;
        let theirs = git::line(&wt.path, &["rev-parse", "HEAD"]).await?;
        let mut work = LandedWork {
            mode: self.cfg.land,
            branch: Arc::from(self.branch.as_str()),
            commit: None,
            commits: Vec::new(),
            files: Vec::new(),
        };
        let range = format!("{before}..{theirs}");
        work.commits = git::ok(&self.repo, &["log", "--reverse", "--format=%h %s", &range])
            .await?
            .lines()
            .map(Arc::from)
            .collect();
        if work.commits.is_empty() {
            return Ok(Ok(work));
        }
        work.files = git::ok(
            &self.repo,
            &["diff", "--name-only", &format!("{before}...{theirs}")],
        )
        .await?
        .lines()
        .map(Arc::from)
        .collect();
        let new = match self.cfg.land {
            LandMode::None => return Ok(Ok(work)),
            LandMode::Merge => {
                let out = git::run(
                    &self.repo,
                    &[
                        "merge-tree",
                        "--write-tree",
                        "--name-only",
                        &before,
                        &theirs,
                    ],
                )
                .await?;
                let mut lines = out.stdout.lines();
                let tree = lines.next().unwrap_or("").trim().to_string();
                if out.code == 1 {
                    let paths = lines
                        .take_while(|l| !l.is_empty())
                        .map(str::to_string)
                        .collect();
                    return Ok(Err(Conflict { paths }));
                }
                if !out.ok() {
                    return Err(git::error(&self.repo, &["merge-tree"], out.stderr.trim()));
                }
                let message = format!(
                    "land {op}: {subject}\n\nLanded by playdeck run {}.\n\nPlaydeck-Op: {op}\n",
                    self.run_id
                );
                git::line(
                    &self.repo,
                    &[
                        "commit-tree",
                        &tree,
                        "-p",
                        &before,
                        "-p",
                        &theirs,
                        "-m",
                        &message,
                    ],
                )
                .await?
            }
            LandMode::Rebase => {
                let out = git::run(&wt.path, &["rebase", &before]).await?;
                if !out.ok() {
                    let paths = git::unmerged(&wt.path).await;
                    let _ = git::run(&wt.path, &["rebase", "--abort"]).await;
                    if paths.is_empty() {
                        return Err(git::error(
                            &wt.path,
                            &["rebase", &before],
                            out.stderr.trim(),
                        ));
                    }
                    return Ok(Err(Conflict { paths }));
                }
                git::line(&wt.path, &["rev-parse", "HEAD"]).await?
            }
        };
        crate::store::fault::kill_at("before_land");
        git::ok(
            &self.repo,
            &["update-ref", &refname(&self.branch), &new, &before],
        )
        .await?;
        crate::store::fault::kill_at("after_land");
        work.commit = Some(Arc::from(short(&new)));
        Ok(Ok(work))
    }

    /// Whether `op`'s work waits for review: its own `review`, or its
    /// instance's role profile's.
    pub fn reviews(&self, own: bool, profile: Option<&str>) -> bool {
        own || profile.is_some_and(|p| self.reviewed_profiles.iter().any(|r| r == p))
    }
}

/// `refs/heads/<branch>`: never mistaken for a tag or a path.
pub fn refname(branch: &str) -> String {
    format!("refs/heads/{branch}")
}

/// A commit's short form, as logs name it.
pub fn short(sha: &str) -> &str {
    &sha[..sha.len().min(12)]
}

/// `git version 2.47.3` is 2.38 or later.
fn new_enough(version: &str) -> bool {
    let mut n = version
        .trim_start_matches("git version ")
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (n.next().unwrap_or(0), n.next().unwrap_or(0));
    (major, minor) >= (2, 38)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_versions_are_compared_as_numbers() {
        assert!(new_enough("git version 2.47.3"));
        assert!(new_enough("git version 2.38.0.windows.1"));
        assert!(new_enough("git version 3.0.0"));
        assert!(!new_enough("git version 2.37.9"));
        assert!(!new_enough("git version 2.9.5"));
    }
}
