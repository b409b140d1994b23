//! Instance workspaces: `inplace` shares the run's workspace; `git-worktree`
//! is a real `git worktree add` on a branch of its own, removed on release.

use std::path::Path;

/// `git worktree add -b <branch> <path> HEAD` in `repo`.
pub async fn create_worktree(repo: &Path, path: &Path, branch: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent)
            .await
            .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    }
    let out = tokio::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["worktree", "add", "-b", branch])
        .arg(path)
        .arg("HEAD")
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| format!("cannot run git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git worktree add failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Removes the worktree; deletes its branch only when it holds no work that
/// is not merged (`git branch -d`), so nothing an agent committed is lost.
pub fn remove_worktree(repo: &Path, path: &Path, branch: Option<&str>) -> Result<(), String> {
    if !path.exists() {
        // Gone already (a crashed run's orphan): forget its registration.
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["worktree", "prune"])
            .output();
        if let Some(branch) = branch {
            let _ = std::process::Command::new("git")
                .arg("-C")
                .arg(repo)
                .args(["branch", "-d", branch])
                .output();
        }
        return Ok(());
    }
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(repo)
        .args(["worktree", "remove", "--force"])
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() && path.exists() {
        return Err(format!(
            "git worktree remove failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if let Some(branch) = branch {
        let _ = std::process::Command::new("git")
            .arg("-C")
            .arg(repo)
            .args(["branch", "-d", branch])
            .output();
    }
    Ok(())
}
