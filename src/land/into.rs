//! `playdeck land RUN --into BRANCH`: the run's branch brought into one of
//! the user's, when they say so — a fast-forward, or with `--merge` a merge
//! commit; refused, with the reason, when that cannot be done cleanly.

use std::path::{Path, PathBuf};

use super::git::{self, GitError};
use super::{refname, short};

/// What landing into a branch did.
#[derive(Debug, Clone, PartialEq)]
pub enum Done {
    /// The branch has the run's work already.
    AlreadyThere,
    FastForward {
        from: String,
        to: String,
        commits: usize,
    },
    Merged {
        commit: String,
        commits: usize,
    },
}

/// Why it was refused.
#[derive(Debug, thiserror::Error)]
pub enum Refused {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("there is no branch {0:?} in {1}")]
    NoBranch(String, String),
    #[error(
        "{branch} is checked out in {dir} with uncommitted changes ({paths}); commit or stash them first"
    )]
    Dirty {
        branch: String,
        dir: String,
        paths: String,
    },
    #[error(
        "{branch} has {ahead} commit(s) the run's branch {run} does not: it cannot fast-forward; use --merge for a merge commit"
    )]
    Diverged {
        branch: String,
        run: String,
        ahead: usize,
    },
    #[error(
        "{run} holds {} commit(s) no landing of the run made ({}); only what the run landed is taken into your branch — nothing was changed. Put the run's branch back with `git branch -f {run} {last}` (the run does it itself while it is live)",
        .foreign.len(),
        .foreign.join("; ")
    )]
    Foreign {
        run: String,
        foreign: Vec<String>,
        last: String,
    },
    #[error(
        "landing into {branch} would replace files in {dir} that git does not track there ({paths}: ignored or untracked, such as your own .env); nothing was changed. Move them aside first, or land into a branch that is not checked out"
    )]
    WouldReplace {
        branch: String,
        dir: String,
        paths: String,
    },
    #[error(
        "merging {run} into {branch} clashes in {paths}; nothing was changed (merge it by hand to resolve them)"
    )]
    Clash {
        run: String,
        branch: String,
        paths: String,
    },
}

/// Brings `run_branch` into `into`, in `repo` — only a tip the run's own
/// landings made (`made`, oldest first: its base, then each landing's).
pub async fn land_into(
    repo: &Path,
    run_branch: &str,
    made: &[String],
    into: &str,
    merge: bool,
) -> Result<Done, Refused> {
    let exists = |b: &str| {
        let b = refname(b);
        async move {
            git::run(repo, &["rev-parse", "--verify", "--quiet", &b])
                .await
                .map(|o| o.ok())
        }
    };
    if !exists(into).await? {
        return Err(Refused::NoBranch(into.into(), repo.display().to_string()));
    }
    if !exists(run_branch).await? {
        return Err(Refused::NoBranch(
            run_branch.into(),
            repo.display().to_string(),
        ));
    }
    let theirs = git::line(repo, &["rev-parse", &refname(run_branch)]).await?;
    // The run's branch is the run's alone: a commit an agent (or anyone)
    // put on it is not taken to the user's branch on the run's name.
    if !made.is_empty() && !made.contains(&theirs) {
        let mut range = vec![
            "log".to_string(),
            "--format=%h %s".to_string(),
            theirs.clone(),
            "--not".to_string(),
        ];
        range.extend(made.iter().cloned());
        let foreign: Vec<String> = git::ok(repo, &range)
            .await?
            .lines()
            .map(str::to_string)
            .collect();
        let last = made.last().cloned().unwrap_or_default();
        return Err(Refused::Foreign {
            run: run_branch.into(),
            foreign: if foreign.is_empty() {
                vec![format!(
                    "it was moved to {}, which no landing made",
                    short(&theirs)
                )]
            } else {
                foreign
            },
            last: short(&last).to_string(),
        });
    }
    let ours = git::line(repo, &["rev-parse", &refname(into)]).await?;
    let is_ancestor = |a: String, b: String| async move {
        git::run(repo, &["merge-base", "--is-ancestor", &a, &b])
            .await
            .map(|o| o.ok())
    };
    if is_ancestor(theirs.clone(), ours.clone()).await? {
        return Ok(Done::AlreadyThere);
    }
    let commits = git::ok(repo, &["rev-list", "--count", &format!("{ours}..{theirs}")])
        .await?
        .trim()
        .parse()
        .unwrap_or(0);
    let fast_forward = is_ancestor(ours.clone(), theirs.clone()).await?;
    if !fast_forward && !merge {
        let ahead = git::ok(repo, &["rev-list", "--count", &format!("{theirs}..{ours}")])
            .await?
            .trim()
            .parse()
            .unwrap_or(0);
        return Err(Refused::Diverged {
            branch: into.into(),
            run: run_branch.into(),
            ahead,
        });
    }
    let checked_out = checked_out_at(repo, into).await?;
    if let Some(dir) = &checked_out {
        let dirty = git::ok(dir, &["status", "--porcelain", "--untracked-files=no"]).await?;
        if !dirty.trim().is_empty() {
            let paths: Vec<&str> = dirty.lines().map(|l| l.get(3..).unwrap_or(l)).collect();
            return Err(Refused::Dirty {
                branch: into.into(),
                dir: dir.display().to_string(),
                paths: paths.join(", "),
            });
        }
    }
    let message = format!("Land {run_branch} into {into}\n");
    let new = if fast_forward {
        theirs.clone()
    } else {
        let out = git::run(
            repo,
            &["merge-tree", "--write-tree", "--name-only", &ours, &theirs],
        )
        .await?;
        let mut lines = out.stdout.lines();
        let tree = lines.next().unwrap_or("").trim().to_string();
        if out.code == 1 {
            let paths: Vec<&str> = lines.take_while(|l| !l.is_empty()).collect();
            return Err(Refused::Clash {
                run: run_branch.into(),
                branch: into.into(),
                paths: paths.join(", "),
            });
        }
        if !out.ok() {
            return Err(git::error(repo, &["merge-tree"], out.stderr.trim()).into());
        }
        git::line(
            repo,
            &[
                "commit-tree",
                &tree,
                "-p",
                &ours,
                "-p",
                &theirs,
                "-m",
                &message,
            ],
        )
        .await?
    };
    if let Some(dir) = &checked_out {
        // git's merge refuses to overwrite an untracked file but replaces
        // an ignored one without a word: an agent that force-added its own
        // `.env` would overwrite the user's. Every file the landing adds
        // that is on disk already is refused, named.
        let added = git::ok(
            repo,
            &[
                "diff",
                "--name-only",
                "-z",
                "--no-renames",
                "--diff-filter=A",
                &ours,
                &new,
            ],
        )
        .await?;
        let in_the_way: Vec<&str> = added
            .split('\0')
            .filter(|p| !p.is_empty() && std::fs::symlink_metadata(dir.join(p)).is_ok())
            .collect();
        if !in_the_way.is_empty() {
            return Err(Refused::WouldReplace {
                branch: into.into(),
                dir: dir.display().to_string(),
                paths: in_the_way.join(", "),
            });
        }
    }
    match &checked_out {
        // The checkout moves with its branch: git does both, and refuses
        // when a file it would overwrite is in the way.
        Some(dir) => {
            git::ok(dir, &["merge", "--ff-only", "-q", &new]).await?;
        }
        None => {
            git::ok(repo, &["update-ref", &refname(into), &new, &ours]).await?;
        }
    }
    Ok(if fast_forward {
        Done::FastForward {
            from: short(&ours).into(),
            to: short(&new).into(),
            commits,
        }
    } else {
        Done::Merged {
            commit: short(&new).into(),
            commits,
        }
    })
}

/// The worktree `branch` is checked out in, if any.
async fn checked_out_at(repo: &Path, branch: &str) -> Result<Option<PathBuf>, GitError> {
    let list = git::ok(repo, &["worktree", "list", "--porcelain"]).await?;
    let mut at = None;
    let want = format!("branch {}", refname(branch));
    for line in list.lines() {
        if let Some(p) = line.strip_prefix("worktree ") {
            at = Some(PathBuf::from(p));
        } else if line == want {
            return Ok(at);
        }
    }
    Ok(None)
}
