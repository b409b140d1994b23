//! What `D` pages: the workspace an attempt worked in, and what changed
//! there (git's diff, and new files listed), prepared before the pager
//! takes the terminal.

use super::*;

/// Where an attempt worked.
#[derive(Debug, Clone, PartialEq)]
pub enum Workdir {
    /// Its instance's own git worktree.
    Worktree(PathBuf),
    /// No worktree of its own: the play's directory, which every operation
    /// without one shares.
    Shared(PathBuf),
    /// Its own worktree under `[workspace] isolation = "worktree"`: what it
    /// would land on the run's branch (`branch`) is what it changed since.
    Landing { path: PathBuf, branch: String },
}

/// Where the attempt of `op` worked, from what its run directory recorded:
/// its capacity instance's git worktree (`capacity.json`); else where it
/// ran (an agent CLI's `logs/<op>.<attempt>.command.json` names it); else
/// the play's directory (the checkpoint names the play).
pub fn workdir(
    run_dir: &Path,
    op: &str,
    attempt: u32,
    instance: Option<&str>,
) -> Result<Workdir, Refusal> {
    if let Some(rec) = crate::land::LandingFile::read(run_dir) {
        let path = rec.worktrees.join(op);
        if !path.exists() {
            return Err(Refusal {
                text: format!(
                    "{op} has no worktree now: its work landed on {} (or it has not started)",
                    rec.branch
                ),
                level: Level::Info,
            });
        }
        return Ok(Workdir::Landing {
            path,
            branch: rec.branch,
        });
    }
    if let Some(inst) = instance
        && let Some(rec) = std::fs::read(run_dir.join("capacity.json"))
            .ok()
            .and_then(|b| serde_json::from_slice::<CapacityFile>(&b).ok())
            .and_then(|c| c.agents.into_iter().find(|a| a.name == inst))
        && rec.workspace_mode == WorkspaceMode::GitWorktree
        && let Some(ws) = rec.placement.workspace
    {
        // A run started from a relative run directory records its
        // worktrees relative to where it was started: they are under the
        // run directory, which this console knows from where it is.
        let recorded = PathBuf::from(ws);
        let path = match recorded.file_name() {
            Some(key) if recorded.is_relative() => run_dir.join("worktrees").join(key),
            _ => recorded,
        };
        if !path.exists() {
            return Err(Refusal {
                text: format!(
                    "{op}'s worktree {} is gone: its instance {inst} was released",
                    path.display()
                ),
                level: Level::Warning,
            });
        }
        return Ok(Workdir::Worktree(path));
    }
    let ran_in = std::fs::read(run_dir.join(format!("logs/{op}.{attempt}.command.json")))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|v| v["cwd"].as_str().map(PathBuf::from));
    let play_dir = || {
        let play = crate::store::resume::play_path(run_dir);
        // Without the original, the path is the run's own copy: its
        // directory is not the play's.
        play.parent()
            .filter(|d| *d != run_dir)
            .map(Path::to_path_buf)
    };
    match ran_in.or_else(play_dir) {
        Some(dir) => Ok(Workdir::Shared(dir)),
        None => Err(Refusal {
            text: format!(
                "{op} has no worktree of its own (no capacity instance with workspace_mode = \"git-worktree\"), and the run does not record its play's directory"
            ),
            level: Level::Warning,
        }),
    }
}

/// Runs git in `dir`; its output, or what went wrong with the command named.
/// `ok` lists the exit codes that are answers (`diff --no-index` says 1
/// when the files differ).
pub(super) async fn git(dir: &Path, args: &[&str], ok: &[i32]) -> Result<String, Refusal> {
    // What is shown is what the files hold: no textconv or external diff
    // the repository's attributes name (and, as in every git playdeck
    // runs, no hook or driver its own config names).
    let mut all: Vec<&str> = args.to_vec();
    if matches!(args.first(), Some(&("diff" | "log" | "show"))) {
        all.splice(1..1, ["--no-textconv", "--no-ext-diff"]);
    }
    let out = crate::land::git::run(dir, &all)
        .await
        .map_err(|e| Refusal::error(e.to_string()))?;
    if ok.contains(&out.code) {
        Ok(out.stdout)
    } else {
        Err(Refusal::error(format!(
            "git -C {} {} failed: {}",
            dir.display(),
            args.join(" "),
            out.stderr.trim()
        )))
    }
}

/// Untracked files shown in full, at most: the list above names them all.
pub(super) const NEW_FILES_SHOWN: usize = 20;

/// `git status --short` (untracked files too), `git diff HEAD`, then each
/// new (untracked) file in full as a diff from nothing — without touching
/// the worktree's index: `git add --intent-to-add` would change what the
/// agent sees.
///
/// For work waiting for review, `review` is the question's `base..tip`:
/// what would land is shown as those commits exactly, and a commit made in
/// the worktree since is named as not part of it.
pub(super) async fn diff(
    op: &str,
    w: &Workdir,
    color: bool,
    review: Option<&str>,
) -> Result<Prepared, Refusal> {
    let (dir, whose) = match w {
        Workdir::Worktree(d) | Workdir::Landing { path: d, .. } => {
            (d, format!("{op}'s worktree {}", d.display()))
        }
        Workdir::Shared(d) => (d, format!("the play's directory {}", d.display())),
    };
    if let Workdir::Shared(d) = w
        && git(d, &["rev-parse", "--show-toplevel"], &[0])
            .await
            .is_err()
    {
        return Err(Refusal {
            text: format!(
                "{op} has no worktree of its own: it runs in the play's directory {}, which is not in a git repository",
                d.display()
            ),
            level: Level::Warning,
        });
    }
    let color = if color {
        "--color=always"
    } else {
        "--color=never"
    };
    // What it committed and would land: the run's branch to its HEAD —
    // or, waiting for review, the commits the review is of.
    let landing = match w {
        Workdir::Landing { branch, .. } if review.is_some() => {
            let range = review.unwrap_or_default();
            let stat = git(dir, &["diff", "--stat", range], &[0]).await?;
            let full = git(dir, &["diff", color, range], &[0]).await?;
            let tip = range.split_once("..").map_or(range, |(_, t)| t);
            let after = git(
                dir,
                &["log", "--format=%h %s", &format!("{tip}..HEAD")],
                &[0],
            )
            .await
            .unwrap_or_default();
            let after = if after.trim().is_empty() {
                String::new()
            } else {
                format!(
                    "# made in its worktree after the review was asked, not part of it (they come back for review):\n{}",
                    after
                        .lines()
                        .map(|l| format!("#   {l}\n"))
                        .collect::<String>()
                )
            };
            let short = |s: &str| s.chars().take(12).collect::<String>();
            let shown = match range.split_once("..") {
                Some((a, b)) => format!("{}..{}", short(a), short(b)),
                None => range.to_string(),
            };
            Some(format!(
                "# {whose}: what its review is of, and what approving it lands on {branch}: commits {shown}\n{after}# git diff --stat {shown}\n{stat}\n# git diff {shown}\n{full}\n"
            ))
        }
        Workdir::Landing { branch, .. } => {
            let range = format!("refs/heads/{branch}...HEAD");
            let stat = git(dir, &["diff", "--stat", &range], &[0]).await?;
            let full = git(dir, &["diff", color, &range], &[0]).await?;
            (!stat.trim().is_empty()).then(|| {
                format!(
                    "# {whose}: what it would land on {branch}\n# git diff --stat {branch}...HEAD\n{stat}\n# git diff {branch}...HEAD\n{full}\n"
                )
            })
        }
        _ => None,
    };
    let status = git(dir, &["status", "--short", "--untracked-files=all"], &[0]).await?;
    let changed = status.lines().count();
    if changed == 0
        && let Some(text) = landing
    {
        return page_text(op, w, text, "its committed work".into());
    }
    if changed == 0 {
        return Err(Refusal {
            text: format!("nothing to diff: {whose} has no changes against HEAD"),
            level: Level::Info,
        });
    }
    let head = git(dir, &["log", "-1", "--format=%h %s"], &[0]).await?;
    let tracked = git(dir, &["diff", color, "HEAD"], &[0]).await?;
    let new = git(
        dir,
        &["ls-files", "--others", "--exclude-standard", "-z"],
        &[0],
    )
    .await?;
    let new: Vec<&str> = new.split('\0').filter(|p| !p.is_empty()).collect();
    let mut text = match w {
        Workdir::Landing { .. } => landing.unwrap_or_default() + &format!("# {whose}\n"),
        Workdir::Worktree(_) => format!("# {whose}\n"),
        Workdir::Shared(_) => format!(
            "# {op} has no worktree of its own: this is {whose}, which every operation without one shares\n"
        ),
    };
    text.push_str(&format!(
        "# HEAD {}# below: what is not committed yet (commits, the agent's too, are not part of it)\n\n# git status --short --untracked-files=all\n{status}\n# git diff HEAD\n{tracked}",
        head
    ));
    if !new.is_empty() {
        text.push_str(&format!(
            "\n# new files (untracked), in full{}\n",
            if new.len() > NEW_FILES_SHOWN {
                format!(
                    ": the first {NEW_FILES_SHOWN} of {} (git status above lists them all)",
                    new.len()
                )
            } else {
                String::new()
            }
        ));
        for p in new.iter().take(NEW_FILES_SHOWN) {
            let d = git(
                dir,
                &["diff", color, "--no-index", "--", "/dev/null", p],
                &[0, 1],
            )
            .await?;
            text.push_str(&d);
        }
    }
    let paths = if changed == 1 {
        "1 changed path".to_string()
    } else {
        format!("{changed} changed paths")
    };
    page_text(op, w, text, paths)
}

/// Writes `text` for the pager, and what the status line says after.
fn page_text(op: &str, w: &Workdir, text: String, paths: String) -> Result<Prepared, Refusal> {
    // The files are the agent's: what they hold must not drive the
    // terminal through a pager that passes escapes on (git's colour stays).
    let text: String = text
        .split_inclusive('\n')
        .map(|l| match l.strip_suffix('\n') {
            Some(l) => colour_only(l) + "\n",
            None => colour_only(l),
        })
        .collect();
    let mut file = temp("diff")?;
    file.as_file_mut()
        .write_all(text.as_bytes())
        .and_then(|_| file.as_file_mut().flush())
        .map_err(|e| Refusal::error(format!("cannot write a file for the pager: {e}")))?;
    // The directory last: a status line too narrow cuts its end, not what
    // was shown.
    Ok(match w {
        Workdir::Landing { path, branch } => Prepared {
            file,
            shown: format!(
                "paged what {op} would land on {branch} ({paths}): {}",
                path.display()
            ),
            level: Level::Info,
        },
        Workdir::Worktree(d) => Prepared {
            file,
            shown: format!(
                "paged the diff of {op}'s worktree ({paths}): {}",
                d.display()
            ),
            level: Level::Info,
        },
        Workdir::Shared(d) => Prepared {
            file,
            shown: format!(
                "{op} has no worktree of its own: paged the diff of the play's directory, shared by every operation without one ({paths}): {}",
                d.display()
            ),
            level: Level::Warning,
        },
    })
}
