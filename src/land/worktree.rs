//! An operation's own worktree: made from the run's branch when its first
//! attempt starts (files git ignores copied in, setup run), kept across its
//! attempts (a retry, a send-back continues the same tree and the same
//! agent session, which some CLIs key by directory), and removed once its
//! work has landed.

use std::path::{Path, PathBuf};

use super::git::{self, GitError};
use super::{Landing, refname};

/// Where an operation works, and on which branch.
#[derive(Debug, Clone)]
pub struct OpWorktree {
    pub path: PathBuf,
    pub branch: String,
    /// Its own git directory (`<common>/worktrees/<id>`), found from the
    /// repository's side: what the worktree's `.git` says is the agent's
    /// to change.
    pub git_dir: PathBuf,
}

impl OpWorktree {
    /// The worktree as git is told it, both directories named.
    pub fn tree(&self) -> git::Tree<'_> {
        git::Tree {
            work: &self.path,
            git_dir: &self.git_dir,
        }
    }
}

/// The git directory the repository keeps for the worktree at `path`:
/// the `worktrees/<id>` whose `gitdir` names `path/.git`.
fn admin_dir_of(common: &Path, path: &Path) -> Option<PathBuf> {
    let want = std::fs::canonicalize(path).ok()?;
    std::fs::read_dir(common.join("worktrees"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|admin| {
            std::fs::read_to_string(admin.join("gitdir")).is_ok_and(|g| {
                Path::new(g.trim())
                    .parent()
                    .and_then(|p| std::fs::canonicalize(p).ok())
                    .is_some_and(|p| p == want)
            })
        })
}

/// Why an operation's worktree is not ready.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("cannot copy {from} into the worktree: {error}")]
    Include { from: String, error: std::io::Error },
    #[error("{stage} `{command}` failed ({status}) in {dir}; its output is in {log}{tail}")]
    Setup {
        stage: &'static str,
        command: String,
        status: String,
        dir: String,
        log: String,
        tail: String,
    },
    #[error("cannot write {path}: {error}")]
    Log { path: String, error: std::io::Error },
}

/// A name git takes as one component of a branch (`..`, a trailing `.` or
/// `.lock` are not).
fn ref_safe(op: &str) -> String {
    let mut s = op.replace("..", "-");
    while s.ends_with('.') || s.ends_with(".lock") {
        s = s
            .trim_end_matches(".lock")
            .trim_end_matches('.')
            .to_string();
    }
    if s.is_empty() { "op".into() } else { s }
}

impl Landing {
    /// `op`'s worktree and branch (`playdeck/<run>-ops/<op>`), its git
    /// directory not known yet.
    fn worktree_of(&self, op: &str) -> OpWorktree {
        OpWorktree {
            path: self.worktrees.join(op),
            branch: format!("{}-ops/{}", self.branch, ref_safe(op)),
            git_dir: PathBuf::new(),
        }
    }

    /// `op`'s worktree, ready to work in: made from the run's branch when
    /// it is not there (with `include` copied and `setup` run, their output
    /// in `logs/<op>.<attempt>.setup.log`), else as the attempt before left
    /// it. A setup that failed runs again on the next attempt.
    pub async fn prepare(&self, op: &str, attempt: u32) -> Result<OpWorktree, NotReady> {
        let mut wt = self.worktree_of(op);
        let ready = self.worktrees.join(format!(".{op}.ready"));
        if admin_dir_of(&self.common, &wt.path).is_none() {
            tokio::fs::create_dir_all(&self.worktrees)
                .await
                .map_err(|error| NotReady::Log {
                    path: self.worktrees.display().to_string(),
                    error,
                })?;
            let path = wt.path.as_os_str().to_string_lossy().into_owned();
            // One at a time, with the landings: a worktree made while the
            // branch moves would start from either tip. It starts from the
            // tip the run's last landing made, never from a commit put on
            // the branch by something else (that is put back first).
            let _one = self.lock.lock().await;
            let _ = self.reclaim().await;
            let _ = git::run(&self.repo, &["worktree", "prune"]).await;
            let has_branch = git::run(
                &self.repo,
                &["rev-parse", "--verify", "--quiet", &refname(&wt.branch)],
            )
            .await?
            .ok();
            if has_branch {
                // A run stopped after its worktree went, before it landed.
                git::ok(&self.repo, &["worktree", "add", &path, &wt.branch]).await?;
            } else {
                let from = self.last_made();
                git::ok(
                    &self.repo,
                    &["worktree", "add", "-b", &wt.branch, &path, &from],
                )
                .await?;
            }
            let _ = tokio::fs::remove_file(&ready).await;
        }
        wt.git_dir = admin_dir_of(&self.common, &wt.path).ok_or_else(|| GitError {
            dir: self.repo.display().to_string(),
            args: "worktree add".into(),
            said: format!(
                "{} is not a worktree of this repository ({} has no entry for it)",
                wt.path.display(),
                self.common.join("worktrees").display()
            ),
        })?;
        if !ready.exists() {
            self.include(&wt.path).await?;
            let log = self.logs.join(format!("{op}.{attempt}.setup.log"));
            run_all("setup", &self.cfg.setup, &wt.path, &log).await?;
            tokio::fs::write(&ready, b"")
                .await
                .map_err(|error| NotReady::Log {
                    path: ready.display().to_string(),
                    error,
                })?;
        }
        Ok(wt)
    }

    /// Copies each `include` path the repository has (and git ignores) into
    /// the new worktree; a path the worktree has already (tracked) is left.
    async fn include(&self, into: &Path) -> Result<(), NotReady> {
        for rel in &self.cfg.include {
            let from = self.repo.join(rel);
            let to = into.join(rel);
            // Anything at the destination, a link included (an earlier
            // operation can commit `.env -> /tmp/x`), is the worktree's
            // own: nothing is written through it.
            if !from.exists() || std::fs::symlink_metadata(&to).is_ok() {
                continue;
            }
            if let Some(link) = linked_parent(into, &to) {
                return Err(NotReady::Include {
                    from: from.display().to_string(),
                    error: std::io::Error::other(format!(
                        "{} in the worktree is a symbolic link; include never writes through one",
                        link.display()
                    )),
                });
            }
            copy_tree(&from, &to).map_err(|error| NotReady::Include {
                from: from.display().to_string(),
                error,
            })?;
        }
        Ok(())
    }

    /// Commits what the agent left uncommitted in `wt`, when the play says
    /// to: `<op>: <first line of the instruction>`. Files git ignores stay
    /// out.
    pub async fn commit_left(
        &self,
        op: &str,
        wt: &OpWorktree,
        subject: &str,
    ) -> Result<(), GitError> {
        if !self.cfg.commit {
            return Ok(());
        }
        git::ok_in(wt.tree(), &["add", "-A"]).await?;
        let staged = git::run_in(wt.tree(), &["diff", "--cached", "--quiet"]).await?;
        if staged.ok() {
            return Ok(());
        }
        let message = format!("{op}: {subject}\n\nPlaydeck-Op: {op}\n");
        git::ok_in(wt.tree(), &["commit", "-q", "--no-verify", "-m", &message]).await?;
        Ok(())
    }

    /// After `op` landed: `teardown` runs in its worktree, which is then
    /// removed unless it holds work (git refuses, and it stays, said), and
    /// its branch deleted when it is merged. Returns what stayed, in words.
    pub async fn finish(&self, op: &str, attempt: u32, wt: &OpWorktree) -> Option<String> {
        let log = self.logs.join(format!("{op}.{attempt}.teardown.log"));
        let mut kept = None;
        if let Err(e) = run_all("teardown", &self.cfg.teardown, &wt.path, &log).await {
            kept = Some(e.to_string());
        }
        let path = wt.path.as_os_str().to_string_lossy().into_owned();
        match git::ok(&self.repo, &["worktree", "remove", &path]).await {
            Ok(_) => {
                let _ = tokio::fs::remove_file(self.worktrees.join(format!(".{op}.ready"))).await;
                // Its work is on the run's branch: its own goes (git's
                // `-d` would ask the checked-out branch, not the run's).
                let landed = git::run(
                    &self.repo,
                    &[
                        "merge-base",
                        "--is-ancestor",
                        &refname(&wt.branch),
                        &refname(&self.branch),
                    ],
                )
                .await
                .is_ok_and(|o| o.ok());
                if landed && self.cfg.land != super::LandMode::None {
                    let _ = git::run(&self.repo, &["branch", "-D", &wt.branch]).await;
                }
            }
            Err(e) => {
                kept = Some(format!("kept {}: {}", wt.path.display(), e.said));
            }
        }
        kept
    }
}

/// Runs each command with `sh -c` in `dir`, output appended to `log`; the
/// first that fails stops the rest.
async fn run_all(
    stage: &'static str,
    commands: &[String],
    dir: &Path,
    log: &Path,
) -> Result<(), NotReady> {
    use std::io::Write;
    if commands.is_empty() {
        return Ok(());
    }
    let log_err = |error| NotReady::Log {
        path: log.display().to_string(),
        error,
    };
    if let Some(parent) = log.parent() {
        std::fs::create_dir_all(parent).map_err(log_err)?;
    }
    let mut file = crate::files::append_private(log).map_err(log_err)?;
    for command in commands {
        let _ = writeln!(file, "$ {command}");
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .current_dir(dir)
            .stdin(std::process::Stdio::null())
            .stdout(file.try_clone().map_err(log_err)?)
            .stderr(file.try_clone().map_err(log_err)?)
            .kill_on_drop(true)
            .status()
            .await
            .map_err(log_err)?;
        if !out.success() {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let last: Vec<&str> = text.lines().rev().take(3).collect();
            let tail = if last.is_empty() {
                String::new()
            } else {
                let lines: Vec<&str> = last.into_iter().rev().collect();
                format!(": {}", lines.join(" / "))
            };
            return Err(NotReady::Setup {
                stage,
                command: command.clone(),
                status: out.to_string(),
                dir: dir.display().to_string(),
                log: log.display().to_string(),
                tail,
            });
        }
    }
    Ok(())
}

/// Copies a file, or a directory and what is in it.
/// The first directory between `root` and `path` that is a symbolic link.
fn linked_parent(root: &Path, path: &Path) -> Option<PathBuf> {
    let rel = path.strip_prefix(root).ok()?;
    let mut at = root.to_path_buf();
    let mut parts: Vec<_> = rel.components().collect();
    parts.pop();
    for c in parts {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Some(at);
        }
    }
    None
}

/// Copies `from` (the user's file or directory) to `to`, a place nothing
/// is at yet: directories made one level at a time, files created new
/// (`O_EXCL`, never through a link, `O_NOFOLLOW`) and readable by the
/// user alone — a secret copied in stays theirs.
fn copy_tree(from: &Path, to: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    if let Some(parent) = to.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)?;
    }
    if from.is_dir() {
        std::fs::DirBuilder::new().mode(0o700).create(to)?;
        for entry in std::fs::read_dir(from)? {
            let entry = entry?;
            copy_tree(&entry.path(), &to.join(entry.file_name()))?;
        }
        Ok(())
    } else {
        let mut src = std::fs::File::open(from)?;
        let mut dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(to)?;
        std::io::copy(&mut src, &mut dst).map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::ref_safe;

    #[test]
    fn op_names_become_branch_components_git_takes() {
        assert_eq!(ref_safe("build"), "build");
        assert_eq!(ref_safe("a..b"), "a-b");
        assert_eq!(ref_safe("x.lock"), "x");
        assert_eq!(ref_safe("y."), "y");
    }
}
