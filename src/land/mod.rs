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
mod watch;
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
    /// The run directory (`landing.json` is in it).
    run_dir: PathBuf,
    /// The tips of the run's branch the run made, oldest first: its base,
    /// then each landing's. The branch moves only to the next of these;
    /// anything else on it is foreign, and put back.
    made: std::sync::Mutex<Vec<String>>,
    /// Paths changed in the checkout and not committed when the run
    /// began: they are not part of the run's base (said at the start).
    pub uncommitted: Vec<String>,
    /// Where the run hears what landing notices (its branch moved).
    notices: std::sync::OnceLock<crate::kernel::ExternalSender>,
    /// The repository's top directory (its main worktree).
    pub repo: PathBuf,
    /// Its common git directory (objects, refs, config, hooks, info).
    pub common: PathBuf,
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
    /// What the run last saw of the repository's own ground: the shared
    /// config, hooks and info, and the user's branch tips.
    seen: std::sync::Mutex<watch::Seen>,
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
        let common = PathBuf::from(
            git::line(
                &repo,
                &["rev-parse", "--path-format=absolute", "--git-common-dir"],
            )
            .await?,
        );
        let branch = branch_for(run_id);
        let have = git::run(
            &repo,
            &["rev-parse", "--verify", "--quiet", &refname(&branch)],
        )
        .await?
        .ok();
        // git runs in the repository, not where playdeck was started.
        let run_dir = std::path::absolute(run_dir).map_err(|error| OpenError::Write {
            path: run_dir.display().to_string(),
            error,
        })?;
        let mut uncommitted = Vec::new();
        if !have {
            let base = git::run(
                &repo,
                &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"],
            )
            .await?;
            if !base.ok() {
                return Err(OpenError::NoCommit(repo.display().to_string()));
            }
            // The run starts from what is committed: what is not is left
            // out, and said (files git ignores, and the run's own
            // directory, are not counted).
            let ours = |p: &str| {
                p.starts_with(".playdeck/")
                    || run_dir.starts_with(repo.join(p.trim_end_matches('/')))
            };
            uncommitted = git::ok(&repo, &["status", "--porcelain", "-z"])
                .await?
                .split('\0')
                .filter(|l| l.len() > 3)
                .map(|l| l[3..].to_string())
                .filter(|p| !ours(p))
                .collect();
            git::ok(&repo, &["branch", &branch, base.stdout.trim()]).await?;
        }
        let kept = record::LandingFile::read(&run_dir);
        let landing = Landing {
            repo,
            common,
            branch,
            run_id: run_id.to_string(),
            worktrees: run_dir.join("work"),
            logs: run_dir.join("logs"),
            run_dir: run_dir.clone(),
            made: std::sync::Mutex::new(Vec::new()),
            uncommitted,
            notices: std::sync::OnceLock::new(),
            cfg: cfg.clone(),
            reviewed_profiles,
            lock: tokio::sync::Mutex::new(()),
            seen: std::sync::Mutex::new(watch::Seen::default()),
        };
        landing.look_around().await;
        let made = match kept {
            Some(k) if have => {
                let mut m = vec![k.base];
                m.extend(k.tips);
                m
            }
            // A run begun before its tips were kept: the branch as it is.
            _ => vec![landing.tip().await?],
        };
        *landing.made.lock().unwrap_or_else(|e| e.into_inner()) = made;
        if !have {
            landing.record()?;
        }
        Ok(landing)
    }

    /// The run's branch's tip now.
    pub async fn tip(&self) -> Result<String, git::GitError> {
        git::line(&self.repo, &["rev-parse", &refname(&self.branch)]).await
    }

    /// The commit the run's branch was made from.
    pub fn base(&self) -> String {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.first().cloned().unwrap_or_default()
    }

    /// The last tip the run made (its base before anything landed).
    pub fn last_made(&self) -> String {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        made.last().cloned().unwrap_or_default()
    }

    /// `landing.json` with the tips made so far.
    fn record(&self) -> Result<(), OpenError> {
        let made = self.made.lock().unwrap_or_else(|e| e.into_inner()).clone();
        record::write(&self.run_dir, self, &made)
    }

    /// Where the run hears what landing notices; the branch is watched
    /// from then on (a foreign commit is said within a second).
    pub fn attach(self: &Arc<Landing>, tx: crate::kernel::ExternalSender) {
        if self.notices.set(tx).is_ok() {
            let me = Arc::downgrade(self);
            tokio::spawn(async move {
                loop {
                    tokio::time::sleep(WATCH_EVERY).await;
                    let Some(l) = me.upgrade() else { return };
                    if l.notices.get().is_some_and(|t| t.is_closed()) {
                        return;
                    }
                    for said in l.look_around().await {
                        l.notice(said);
                    }
                    // A landing in progress moves the branch itself.
                    let Ok(_one) = l.lock.try_lock() else {
                        continue;
                    };
                    let _ = l.reclaim().await;
                }
            });
        }
    }

    /// Looks at the run's branch now (one landing at a time): a commit no
    /// landing made is put back and said. `Ok(true)` when it had moved.
    pub async fn check_branch(&self) -> Result<bool, git::GitError> {
        let _one = self.lock.lock().await;
        self.reclaim().await
    }

    /// Tells the run something it should see (a warning).
    fn notice(&self, message: String) {
        tracing::warn!("{message}");
        if let Some(tx) = self.notices.get() {
            let _ = tx.send(crate::kernel::External::Signal(
                crate::kernel::SignalKind::Warning {
                    message: Arc::from(message),
                    op_id: None,
                },
            ));
        }
    }

    /// When the run's branch is not where the run's last landing left it
    /// (an agent committed on it, someone reset it), puts it back there —
    /// keeping what was on it on a branch of its own, named — and says
    /// so. Called with the landing lock held. `Ok(true)` when it moved.
    pub(super) async fn reclaim(&self) -> Result<bool, git::GitError> {
        let mine = self.last_made();
        let now = self.tip().await?;
        if now == mine || mine.is_empty() {
            return Ok(false);
        }
        let foreign = git::ok(
            &self.repo,
            &["log", "--format=%h %s", &format!("{mine}..{now}")],
        )
        .await
        .unwrap_or_default();
        let foreign: Vec<&str> = foreign.lines().collect();
        let kept = format!("{}-foreign/{}", self.branch, short(&now));
        let saved = git::run(&self.repo, &["branch", "-f", &kept, &now])
            .await
            .is_ok_and(|o| o.ok());
        git::ok(
            &self.repo,
            &["update-ref", &refname(&self.branch), &mine, &now],
        )
        .await?;
        let what = if foreign.is_empty() {
            format!(
                "it was moved to {} (no landing of this run made it)",
                short(&now)
            )
        } else {
            format!(
                "it holds {} commit(s) no landing of this run made: {}",
                foreign.len(),
                foreign.join("; ")
            )
        };
        let kept = if saved {
            format!("; they are kept on {kept}")
        } else {
            String::new()
        };
        self.notice(format!(
            "the run's branch {} moved under it: {what}. It is put back to {}, where the run's last landing left it{kept}; only the run's own landings move it",
            self.branch,
            short(&mine)
        ));
        Ok(true)
    }

    /// Lands `op`'s branch on the run's branch: one at a time. Work that
    /// is there already (a resumed run landed it before it stopped) lands
    /// no second time: there is nothing to land, and `commit` is `None`.
    ///
    /// What lands is `theirs` exactly (the commit a review showed), never
    /// what the worktree holds by the time it lands; it lands on the tip
    /// the run's last landing made (a branch moved under the run is put
    /// back first).
    pub async fn land(
        &self,
        op: &str,
        wt: &worktree::OpWorktree,
        subject: &str,
        theirs: &str,
    ) -> Result<Result<LandedWork, Conflict>, git::GitError> {
        let _one = self.lock.lock().await;
        self.reclaim().await?;
        let before = self.last_made();
        let theirs = theirs.to_string();
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
                let out = git::run_in(wt.tree(), &["rebase", &before]).await?;
                if !out.ok() {
                    let paths = git::unmerged(wt.tree()).await;
                    let _ = git::run_in(wt.tree(), &["rebase", "--abort"]).await;
                    if paths.is_empty() {
                        return Err(git::error(
                            &wt.path,
                            &["rebase", &before],
                            out.stderr.trim(),
                        ));
                    }
                    return Ok(Err(Conflict { paths }));
                }
                git::line_in(wt.tree(), &["rev-parse", "HEAD"]).await?
            }
        };
        // Recorded before the branch moves: a tip the run made is never
        // mistaken for a foreign one, whenever the process stops.
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(new.clone());
        if let Err(e) = self.record() {
            self.made.lock().unwrap_or_else(|e| e.into_inner()).pop();
            return Err(git::error(&self.repo, &["update-ref"], &e.to_string()));
        }
        crate::store::fault::kill_at("before_land");
        if let Err(e) = git::ok(
            &self.repo,
            &["update-ref", &refname(&self.branch), &new, &before],
        )
        .await
        {
            self.made.lock().unwrap_or_else(|e| e.into_inner()).pop();
            let _ = self.record();
            return Err(e);
        }
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

/// How often a live run looks at its branch for commits it did not make.
const WATCH_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The run's branch: `playdeck/<run-id>`, or — for a run directory whose
/// name git does not take as a branch name (`.hidden`, `a..b`, `x.lock`,
/// spaces) — that name made into one, with a digest of the original so
/// two such runs never share a branch.
pub fn branch_for(run_id: &str) -> String {
    let mut s: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_control() || " ~^:?*[\\/".contains(c) || c == '\u{7f}' {
                '-'
            } else {
                c
            }
        })
        .collect();
    while s.contains("..") || s.contains("@{") {
        s = s.replace("..", "-").replace("@{", "-");
    }
    let s = s.trim_start_matches(['.', '-']);
    let mut s = s.to_string();
    while s.ends_with('.') || s.ends_with(".lock") {
        s = s
            .trim_end_matches(".lock")
            .trim_end_matches('.')
            .to_string();
    }
    if s.is_empty() || s == "@" {
        s = "run".into();
    }
    if s != run_id {
        s = format!("{s}-{:08x}", crc32fast::hash(run_id.as_bytes()));
    }
    format!("playdeck/{s}")
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
    fn a_run_directory_that_is_no_branch_name_still_gets_a_branch() {
        assert_eq!(
            branch_for("20261129-192505-abcd"),
            "playdeck/20261129-192505-abcd"
        );
        for bad in [
            ".hidden", "a..b", "x.lock", "my run", "-x", "@", "a~b^c:d", "...",
        ] {
            let b = branch_for(bad);
            let part = b.trim_start_matches("playdeck/");
            assert!(
                !part.starts_with('.')
                    && !part.starts_with('-')
                    && !part.contains("..")
                    && !part.ends_with(".lock")
                    && !part.contains(' ')
                    && !part.contains('~'),
                "{bad} → {b}"
            );
            assert_ne!(branch_for(bad), branch_for(&format!("{bad}2")), "{bad}");
        }
        assert_ne!(branch_for(".hidden"), branch_for("hidden"));
    }

    #[test]
    fn git_versions_are_compared_as_numbers() {
        assert!(new_enough("git version 2.47.3"));
        assert!(new_enough("git version 2.38.0.windows.1"));
        assert!(new_enough("git version 3.0.0"));
        assert!(!new_enough("git version 2.37.9"));
        assert!(!new_enough("git version 2.9.5"));
    }
}
