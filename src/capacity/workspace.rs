//! Instance workspaces: `inplace` shares the run's workspace; `git-worktree`
//! is a real `git worktree add` on a branch of its own, removed on release
//! only when nothing in it would be lost.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Why a worktree could not be added or removed: the path, and what git or
/// the system said.
#[derive(Debug, thiserror::Error)]
pub enum WorktreeError {
    #[error("cannot create {}: {error}", .dir.display())]
    CreateDir { dir: PathBuf, error: std::io::Error },
    #[error("cannot run git: {0}")]
    Git(std::io::Error),
    #[error("git worktree add failed: {0}")]
    AddFailed(String),
    #[error("kept {}: git worktree remove refused ({stderr})", .path.display())]
    RemoveRefused { path: PathBuf, stderr: String },
    /// Validation refuses git-worktree outside a repository; this is the
    /// same refusal at run time.
    #[error("the play is not in a git repository")]
    NoRepository,
}

/// `git worktree add -b <branch> <path> HEAD` in `repo`.
pub async fn create_worktree(repo: &Path, path: &Path, branch: &str) -> Result<(), WorktreeError> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|error| WorktreeError::CreateDir {
                dir: parent.to_path_buf(),
                error,
            })?;
    }
    // Two `git worktree add`s in one repository at once race in git itself
    // (`failed to read .git/worktrees/…/commondir`): one at a time here.
    static ADDS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _one = ADDS.lock().await;
    // A checkout runs smudge filters: none an agent configured.
    let repo_owned = repo.to_path_buf();
    let guard = tokio::task::spawn_blocking(move || crate::gitguard::guard(&repo_owned))
        .await
        .unwrap_or_else(|_| crate::gitguard::NOTHING_RUNS.map(String::from).to_vec());
    let mut wait = LOCK_WAIT;
    let out = loop {
        let out = tokio::process::Command::new("git")
            .args(&guard)
            .arg("-C")
            .arg(repo)
            .args(["worktree", "add", "-b", branch])
            .arg(path)
            .arg("HEAD")
            .kill_on_drop(true)
            .output()
            .await
            .map_err(WorktreeError::Git)?;
        if out.status.success() || !held_lock(&out) || wait > LOCK_WAIT_MAX {
            break out;
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
    };
    if out.status.success() {
        Ok(())
    } else {
        Err(WorktreeError::AddFailed(
            String::from_utf8_lossy(&out.stderr).trim().to_string(),
        ))
    }
}

/// Git refuses to touch a repository another git holds a lock of (two
/// releases at once: deleting a branch locks `packed-refs`); that is
/// waited out, doubling from this, up to the next.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_millis(20);
const LOCK_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether git failed on a lock another process holds.
fn held_lock(out: &std::process::Output) -> bool {
    let e = String::from_utf8_lossy(&out.stderr);
    e.contains(".lock") && e.contains("File exists")
}

/// `git -C repo ARGS`, another git's lock waited out.
fn git_in(repo: &Path, args: &[&std::ffi::OsStr]) -> std::io::Result<std::process::Output> {
    let mut wait = LOCK_WAIT;
    loop {
        let out = Command::new("git")
            .args(crate::gitguard::NOTHING_RUNS)
            .arg("-C")
            .arg(repo)
            .args(args)
            .output()?;
        if out.status.success() || !held_lock(&out) || wait > LOCK_WAIT_MAX {
            return Ok(out);
        }
        std::thread::sleep(wait);
        wait *= 2;
    }
}

/// How many paths to name in a summary of uncommitted work.
const NAMED_PATHS: usize = 5;

/// What in the worktree at `path` is not committed — changed, staged,
/// deleted, and files nobody added (every untracked file, not just
/// directories): `None` when there is nothing, or the worktree is gone.
/// When git cannot say, the answer is that it may hold work: a release
/// never guesses in favour of deleting.
pub fn uncommitted(path: &Path) -> Option<String> {
    if !path.exists() {
        return None;
    }
    let out = Command::new("git")
        .args(crate::gitguard::guard(path))
        .arg("-C")
        .arg(path)
        .args(["status", "--porcelain", "--untracked-files=all"])
        .output();
    let out = match out {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            return Some(format!(
                "cannot tell whether {} holds work (git status: {})",
                path.display(),
                String::from_utf8_lossy(&o.stderr).trim()
            ));
        }
        Err(e) => {
            return Some(format!(
                "cannot tell whether {} holds work (cannot run git: {e})",
                path.display()
            ));
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    // `XY path`: the status letters, then the path.
    let paths: Vec<&str> = text
        .lines()
        .filter(|l| l.len() > 3)
        .map(|l| &l[3..])
        .collect();
    if paths.is_empty() {
        return None;
    }
    let mut named = paths[..paths.len().min(NAMED_PATHS)].join(", ");
    if paths.len() > NAMED_PATHS {
        named.push_str(&format!(" and {} more", paths.len() - NAMED_PATHS));
    }
    Some(format!(
        "{} uncommitted path(s) in {}: {named}",
        paths.len(),
        path.display()
    ))
}

/// What removing a worktree did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Removed {
    /// Its branch holds commits that are not merged, so it stays.
    pub branch_kept: bool,
}

/// Removes the worktree, without `--force`: git itself refuses one that
/// holds changes (files ignored by `.gitignore` go with it), so work that
/// appeared after the release checked is not lost either. Its branch is
/// deleted only when it holds nothing that is not merged (`git branch
/// -d`), so nothing an agent committed is lost.
pub fn remove_worktree(
    repo: &Path,
    path: &Path,
    branch: Option<&str>,
) -> Result<Removed, WorktreeError> {
    // One at a time, as adds are: a worker's slots end together.
    static REMOVES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = REMOVES.lock().unwrap_or_else(|e| e.into_inner());
    if !path.exists() {
        // Gone already (a crashed run's orphan): forget its registration.
        let _ = Command::new("git")
            .args(crate::gitguard::NOTHING_RUNS)
            .arg("-C")
            .arg(repo)
            .args(["worktree", "prune"])
            .output();
    } else {
        let out = git_in(
            repo,
            &["worktree".as_ref(), "remove".as_ref(), path.as_os_str()],
        )
        .map_err(WorktreeError::Git)?;
        if !out.status.success() && path.exists() {
            return Err(WorktreeError::RemoveRefused {
                path: path.to_path_buf(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
    }
    let mut branch_kept = false;
    if let Some(branch) = branch {
        let _ = git_in(repo, &["branch".as_ref(), "-d".as_ref(), branch.as_ref()]);
        // Still there: git refused, it holds commits that are not merged.
        branch_kept = Command::new("git")
            .args(crate::gitguard::NOTHING_RUNS)
            .arg("-C")
            .arg(repo)
            .args(["rev-parse", "--verify", "--quiet"])
            .arg(format!("refs/heads/{branch}"))
            .output()
            .is_ok_and(|o| o.status.success());
    }
    Ok(Removed { branch_kept })
}
